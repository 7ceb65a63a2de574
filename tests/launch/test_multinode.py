#!/usr/bin/env python3
"""test_multinode.py PARC EXAMPLES_DIR — parc across hosts, on a 2-host
emulated cluster (tools/emucluster.sh: network namespaces node0 and node1,
2 slots each, their link shaped to RATE by tc tbf).  A cluster that cannot
be made (no root, no `ip`) FAILS the test with the reason.  It asserts:
  - the cluster: each host has its own host name, and mpirun started inside
    node0 runs one process on each host; `down` removes every namespace it
    made and its directory.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EMU = os.path.abspath(os.path.join(ROOT, "tools", "emucluster.sh"))
RATE = "200mbit"  # 25 MB/s: well below what this machine's veth pairs carry unshaped

t = Checks("multinode")
parc, examples, check = t.parc, t.examples, t.check


def emu(*args, timeout=60, **kw):
    """emucluster.sh ARGS..., its CompletedProcess (text, output captured)."""
    return subprocess.run([EMU, *args], capture_output=True, text=True, timeout=timeout, **kw)


def on(cluster, host, argv, timeout=120, env=None):
    """argv inside `host` of the cluster: (exit status, stdout, stderr)."""
    full = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OPENBLAS_NUM_THREADS="1", **(env or {}))
    try:
        p = subprocess.run([EMU, "exec", cluster, host, *argv], capture_output=True, text=True, timeout=timeout,
                           env=full)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", e.stderr or ""


def test_cluster(cluster):
    for host in ("node0", "node1"):
        rc, out, _ = on(cluster, host, ["hostname"])
        check(rc == 0 and out.strip() == host, f"{host} has its own host name: {out.strip()!r}")
    rc, out, err = on(cluster, "node0", ["mpirun", "-np", "2", "--hostfile", os.path.join(cluster, "hostfile"),
                                         "--map-by", "ppr:1:node", "hostname"])
    check(rc == 0 and sorted(out.split()) == ["node0", "node1"],
          f"mpirun inside node0 runs a process on each host: {out.split()} {err[-300:]}")


with tempfile.TemporaryDirectory() as tmp:
    cluster = os.path.join(tmp, "cluster")
    up = emu("up", cluster, "--hosts", "2", "--slots", "2", "--rate", RATE)
    if not check(up.returncode == 0, f"a 2-host emulated cluster comes up: {up.stderr.strip()}"):
        sys.exit(t.done())
    with open(os.path.join(cluster, "namespaces")) as f:
        made = f.read().split()
    try:
        test_cluster(cluster)
    finally:
        down = emu("down", cluster)
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        left = [ns for ns in made if ns in listed.split()]
        check(down.returncode == 0 and not left and not os.path.exists(cluster),
              f"`down` removes the {len(made)} namespaces it made and its directory: {left} {down.stderr.strip()}")
sys.exit(t.done())
