#!/usr/bin/env python3
"""test_multinode.py PARC EXAMPLES_DIR — parc across hosts, on a 2-host
emulated cluster (tools/emucluster.sh: network namespaces node0 and node1,
2 slots each, their link shaped to RATE by tc tbf).  A cluster that cannot
be made (no root, no `ip`) FAILS the test with the reason.  It asserts:
  - the cluster: each host has its own host name, and mpirun started inside
    node0 runs one process on each host; `down` removes every namespace it
    made and its directory; 2 hosts of 2 slots share a machine of under 4
    cores, and with `--cores own` 2 hosts of 1 slot run on disjoint cores
    (more hosts than cores refused);
  - parity across hosts: `parc run --hosts` of the tiny GPT on 2 nodes of 2
    (dp across the hosts, tp inside each) and on 2 nodes of 1 (tp across)
    trains to tiny_single's loss at every step (relative difference at most
    1e-5, the parity tests' tolerance); the first run warns about nothing (so
    each host got 2 consecutive ranks), the second about its tensor-parallel
    group by the real host names, `ranks 0 (node0), 1 (node1)`;
  - the placement check of an axis other than tp: tiny_dp (one node of 2)
    started by hand with one rank per host warns that its `dp` group spans
    node0 and node1 although the plan keeps `dp` inside a node;
  - `parc calibrate --hosts` writes a fragment with both `link intra` and
    `link inter` (its comment naming node0 and node1 and their 2 ranks each
    sending at once), an efficiency block with `inter` and `half_inter`, the
    bandwidth of one pair of ranks alone within 30% of the shaped rate, and
    `link inter`, a rank's share while both ranks of a host send, within 30%
    of half of it; a 2-node plan that includes it passes `parc check`;
  - faults across hosts, on the dp-across run with `--timeout 5` and a
    checkpoint every 2 steps, once node0 trained 5 steps: node1's link taken
    down (`ip link set eth0 down`) and every process of node1 killed.  Each
    time `parc run` exits non-zero within FAULT_LIMIT seconds with exactly one
    `parc: error:` line, which names host node1 and a rank on it, 2 (dp 1,
    tp 0) or 3 (dp 1, tp 1) (a killed host: both; a cut link: both where the
    ranks of node0 wait in a watched wait, the one their blocked call shares
    where one is inside MPI's blocking collective); no rank of the run is left
    on either host 10 s later
    (the link back up); and the newest checkpoint is whole (`parc export`
    reads every tensor against its CRC);
  - `parc run --restarts 1` of the dp-across run (30 steps, a checkpoint
    every 4), every process of node1 killed once 10 steps are logged: the
    job is relaunched from the newest checkpoint and exits 0; its metrics log
    is valid (tests/common/metrics_log.py) with one `restart` record whose
    resume_step is that checkpoint's; the loss of every step (the relaunch's
    where a step was logged twice) prints as the uninterrupted run's, and
    the final weights of the two runs (parc export) are bitwise equal.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402
import metrics_log  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EMU = os.path.abspath(os.path.join(ROOT, "tools", "emucluster.sh"))
RATE = "200mbit"  # 25 MB/s: well below what this machine's veth pairs carry unshaped
RATE_BYTES = 25e6
BANDWIDTH_TOL = 0.30

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


STEPS = 6
LOSS_TOL = 1e-5


def plan(directory, name, cluster, mesh, layout):
    """The tiny GPT (examples/common) on `cluster` (nodes, gpus_per_node; the
    link between nodes at the shaped rate), with `mesh` and `layout`."""
    path = os.path.join(directory, name + ".par")
    with open(path, "w") as f:
        f.write(f'include "{examples}/common/tiny_gpt.par";\n'
                f'cluster {{ {cluster} include "{examples}/common/tiny_cluster.par"; link inter 25 MB/s 100 us; }}\n'
                f'train {{ include "{examples}/common/tiny_train.par"; micro_batch 2; }}\n'
                f"mesh {{ {mesh} }}\nlayout {{ {layout} }}\n")
    return path


def losses(path):
    """{step: loss} of a PRT_LOSS_FILE."""
    try:
        with open(path) as f:
            return {int(s): float(v) for s, v in (line.split() for line in f if line.strip())}
    except OSError:
        return {}


def same_curve(got, ref):
    return len(got) == len(ref) == STEPS and all(abs(got[s] - ref[s]) <= LOSS_TOL * abs(ref[s]) for s in ref)


def test_parity(cluster, tmp, ref):
    hostfile = os.path.join(cluster, "hostfile")
    cases = [
        ("dp_across", "nodes 2; gpus_per_node 2;", "dp 2; tp 2;",
         "batch -> dp; heads -> tp; ffn -> tp; vocab -> tp;", None),
        ("tp_across", "nodes 2; gpus_per_node 1;", "tp 2;", "heads -> tp; ffn -> tp; vocab -> tp;",
         "parc: warning: the tensor-parallel group on `tp` of ranks 0 (node0), 1 (node1) spans hosts"),
    ]
    for name, nodes, mesh, layout, warning in cases:
        path = plan(tmp, name, nodes, mesh, layout)
        loss_file = os.path.join(tmp, name + ".loss")
        rc, out, err = on(cluster, "node0", [parc, "run", path, "--hosts", hostfile, "--steps", str(STEPS),
                                             "--quiet"], env={"PRT_LOSS_FILE": loss_file})
        got = losses(loss_file)
        check(rc == 0 and same_curve(got, ref),
              f"{name} across node0 and node1 trains to tiny_single's losses within {LOSS_TOL}: exit {rc}, "
              f"{[got.get(s) for s in sorted(ref)]} vs {[ref[s] for s in sorted(ref)]} {err[-400:]}")
        warnings = [line for line in err.splitlines() if line.startswith("parc: warning")]
        if warning:
            check(len(warnings) == 1 and warning in warnings[0],
                  f"{name}: one placement warning, by the real host names: {warnings}")
        else:
            check(not warnings, f"{name}: no placement warning (each host has 2 consecutive ranks): {warnings}")


def test_placement_dp(cluster, tmp):
    exe = os.path.join(tmp, "tiny_dp")
    r = subprocess.run([parc, "build", os.path.join(examples, "tiny_dp.par"), "-o", exe], capture_output=True,
                       text=True)
    if not check(r.returncode == 0, f"parc build tiny_dp: {r.stderr[-300:]}"):
        return
    rc, out, err = on(cluster, "node0", ["mpirun", "-np", "2", "--hostfile", os.path.join(cluster, "hostfile"),
                                         "--map-by", "ppr:1:node", exe, "--steps", "1", "--quiet"])
    want = ("parc: warning: 1 of the 1 groups on `dp` span hosts (the first: ranks 0 (node0), 1 (node1)), "
            "but the plan keeps `dp` inside a node")
    check(rc == 0 and want in err, f"tiny_dp, one rank per host, warns `{want}`: exit {rc}: {err[-500:]}")


def test_calibrate(cluster, tmp):
    frag = os.path.join(tmp, "cluster.par")
    rc, out, err = on(cluster, "node0", [parc, "calibrate", "--hosts", os.path.join(cluster, "hostfile"), "-o", frag],
                      timeout=240)
    text = open(frag).read() if os.path.exists(frag) else ""
    if not check(rc == 0 and text, f"parc calibrate --hosts writes {frag}: exit {rc}: {err[-400:]}"):
        return
    intra = re.search(r"^link intra ([0-9.e+]+) B/s ([0-9.e+-]+) s;$", text, re.M)
    inter = re.search(r"^link inter ([0-9.e+]+) B/s ([0-9.e+-]+) s;$", text, re.M)
    check(intra and inter, f"the fragment has `link intra` and `link inter`: {intra and intra.group(0)}, "
                           f"{inter and inter.group(0)}")
    check("# between hosts (node0 and node1, 2 ranks each, sending at once)" in text,
          "its comment names the two hosts and the ranks of each measuring at once")
    alone = re.search(r"one pair alone ([0-9.]+) MB/s", text)
    check(alone and abs(float(alone.group(1)) * 1e6 - RATE_BYTES) <= BANDWIDTH_TOL * RATE_BYTES,
          f"the bandwidth of one pair alone, {alone and alone.group(1)} MB/s, is within {BANDWIDTH_TOL:.0%} of "
          f"the shaped {RATE_BYTES / 1e6:.0f} MB/s")
    check(re.search(r"^efficiency \{.* intra [0-9.]+; inter [0-9.]+; half_inter [0-9.e+]+ B; half_intra [0-9.e+]+ B;",
                    text, re.M) is not None, "its efficiency block has intra, inter, half_inter and half_intra")
    if inter:
        bw, share = float(inter.group(1)), RATE_BYTES / 2
        check(abs(bw - share) <= BANDWIDTH_TOL * share,
              f"`link inter`, {bw / 1e6:.2f} MB/s a rank, is within {BANDWIDTH_TOL:.0%} of half the shaped "
              f"{RATE_BYTES / 1e6:.0f} MB/s (the 2 ranks of a host share its link)")
    plan_path = os.path.join(tmp, "calibrated.par")
    with open(plan_path, "w") as f:
        f.write(f'include "{examples}/common/tiny_gpt.par";\n'
                f'cluster {{ nodes 2; gpus_per_node 2; include "{frag}"; }}\n'
                f'train {{ include "{examples}/common/tiny_train.par"; micro_batch 2; }}\n'
                "mesh { dp 2; tp 2; }\nlayout { batch -> dp; heads -> tp; ffn -> tp; vocab -> tp; }\n")
    r = subprocess.run([parc, "check", plan_path], capture_output=True, text=True)
    check(r.returncode == 0, f"a 2-node plan including the fragment passes check: {r.stdout[-200:]}{r.stderr[-400:]}")


FAULT_LIMIT = {"link": 25.0, "kill": 15.0}  # the watchdog's 5 s, its query, the launcher's 5 s + 2 s; daemon loss


def start_on(cluster, host, argv, out_path, env=None):
    """argv inside `host`, in the background, stdout and stderr to out_path."""
    full = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OPENBLAS_NUM_THREADS="1", **(env or {}))
    out = open(out_path, "w")
    return subprocess.Popen([EMU, "exec", cluster, host, *argv], stdout=out, stderr=subprocess.STDOUT, env=full), out


def step_records(log):
    try:
        with open(log) as f:
            return sum('"record": "step"' in line for line in f)
    except OSError:
        return 0


def run_processes(cluster):
    """Live processes started from a parc run directory under the cluster's temporary directories."""
    where, found = os.path.join(cluster, "tmp"), []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if where in cmd and "/parc-run-" in cmd and state != "Z":
            found.append((int(pid), cmd[:100]))
    return found


def test_fault(cluster, tmp, fault, plan_path):
    log, ck, out_path = (os.path.join(tmp, f"{fault}.{x}") for x in ("jsonl", "ck", "out"))
    p, out = start_on(cluster, "node0", [parc, "run", plan_path, "--hosts", os.path.join(cluster, "hostfile"),
                                         "--steps", "1000000", "--timeout", "5", "--quiet", "--log", log,
                                         "--checkpoint-dir", ck, "--checkpoint-every", "2"], out_path)
    deadline = time.time() + 120
    while step_records(log) < 5 and p.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    if not check(step_records(log) >= 5, f"{fault}: the run trained 5 steps across the hosts"):
        p.kill()
        p.wait()
        out.close()
        return
    start = time.time()
    action = emu("link", cluster, "node1", "down") if fault == "link" else emu("kill", cluster, "node1")
    check(action.returncode == 0, f"{fault}: the fault was made: {action.stderr.strip()}")
    try:
        rc = p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    took = time.time() - start
    out.close()
    if fault == "link":
        emu("link", cluster, "node1", "up")
    text = open(out_path).read()
    errors = [line for line in text.splitlines() if line.startswith("parc: error:")]
    check(rc != 0 and took <= FAULT_LIMIT[fault],
          f"{fault}: parc run exits non-zero ({rc}) within {FAULT_LIMIT[fault]:.0f} s of the fault ({took:.1f} s)")
    named = len(errors) == 1 and re.search(r"\bnode1\b", errors[0]) and (
        "ranks 2 (dp 1, tp 0), 3 (dp 1, tp 1)" in errors[0] or "rank 2 (dp 1, tp 0) on node1" in errors[0]
        or "rank 3 (dp 1, tp 1) on node1" in errors[0])
    if fault == "kill":
        named = named and "ranks 2 (dp 1, tp 0), 3 (dp 1, tp 1)" in errors[0]
    check(named, f"{fault}: one error, naming host node1 and its ranks: {errors} {text[-1500:] if not named else ''}")
    left = run_processes(cluster)
    for _ in range(100):
        if not left:
            break
        time.sleep(0.1)
        left = run_processes(cluster)
    check(not left, f"{fault}: no rank of the run is left on either host 10 s later: {left}")
    try:
        latest = open(os.path.join(ck, "latest")).read().strip()
    except OSError:
        latest = ""
    exported = subprocess.run([parc, "export", os.path.join(ck, "latest"), "-o", os.path.join(tmp, f"{fault}.safetensors"),
                               "--names", "parc"], capture_output=True, text=True)
    check(latest.startswith("step-") and exported.returncode == 0,
          f"{fault}: the newest checkpoint ({latest}) is whole: parc export reads it: {exported.stderr[-300:]}")
    for pid, _ in left:  # not into the next case
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def read_log(path):
    """(records, problems) of a metrics log."""
    try:
        return metrics_log.read(path)
    except OSError as e:
        return [], [str(e)]


def log_curve(records):
    """{step: loss}, the last record of each step winning."""
    return {r["step"]: r["loss"] for r in records if r.get("record") == "step"}


def safetensors(path):
    """{name: bytes} of a safetensors file."""
    import json
    import struct
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items() if k != "__metadata__"}


def test_restart(cluster, tmp, plan_path):
    hostfile, steps = os.path.join(cluster, "hostfile"), "30"
    runs = {}
    for name in ("whole", "restarted"):
        log, ck, out_path = (os.path.join(tmp, f"{name}.{x}") for x in ("jsonl", "ck", "out"))
        # the watchdog is not what this case tests: a generous timeout keeps a
        # busy machine's slow step from ending the uninterrupted run
        argv = [parc, "run", plan_path, "--hosts", hostfile, "--steps", steps, "--quiet", "--log", log,
                "--checkpoint-dir", ck, "--checkpoint-every", "4", "--timeout", "60"]
        if name == "restarted":
            argv += ["--restarts", "1"]
        p, out = start_on(cluster, "node0", argv, out_path)
        if name == "restarted":
            deadline = time.time() + 120
            while step_records(log) < 10 and p.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            check(step_records(log) >= 10 and p.poll() is None, "restarted: 10 steps logged, the job still running")
            emu("kill", cluster, "node1")
        try:
            rc = p.wait(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        out.close()
        text = open(out_path).read()
        records, problems = read_log(log)
        check(rc == 0 and not problems, f"{name}: exit {rc}, a valid metrics log: {problems[:3]} {text[-600:] if rc else ''}")
        exported = os.path.join(tmp, f"{name}.safetensors")
        r = subprocess.run([parc, "export", os.path.join(ck, "latest"), "-o", exported, "--names", "parc"],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{name}: its final checkpoint exports: {r.stderr[-300:]}")
        runs[name] = (records, exported, text)
    records, _, text = runs["restarted"]
    restarts = [r for r in records if r.get("record") == "restart"]
    latest_before = restarts[0]["resume_step"] if restarts else -1
    check(len(restarts) == 1 and restarts[0]["restart"] == 1 and restarts[0]["exit_status"] != 0
          and latest_before > 0 and latest_before % 4 == 0 and restarts[0]["last_step"] >= 10,
          f"restarted: one restart record, from a checkpoint of a step that is a multiple of 4: {restarts}")
    check("restart 1 of 1 from the newest checkpoint" in text, "restarted: parc says it restarts, and from where")
    whole, again = log_curve(runs["whole"][0]), log_curve(records)
    twice = sorted(set(s for s in again if [r.get("step") for r in records].count(s) > 1))
    check(len(whole) == 30 and again == whole,
          f"the loss of every step of the restarted run equals the uninterrupted run's "
          f"(steps {twice[:1]}..{twice[-1:]} logged twice): {[s for s in whole if whole[s] != again.get(s)]}")
    try:
        a, b = safetensors(runs["whole"][1]), safetensors(runs["restarted"][1])
        differ = [k for k in a if a[k] != b.get(k)]
    except (OSError, ValueError, KeyError) as e:
        a, differ = {}, [str(e)]
    check(a and not differ and set(a) == set(b),
          f"the final weights of both runs are bitwise equal ({len(a)} tensors): {differ[:5]}")


def test_cluster(cluster):
    for host in ("node0", "node1"):
        rc, out, _ = on(cluster, host, ["hostname"])
        check(rc == 0 and out.strip() == host, f"{host} has its own host name: {out.strip()!r}")
    rc, out, err = on(cluster, "node0", ["mpirun", "-np", "2", "--hostfile", os.path.join(cluster, "hostfile"),
                                         "--map-by", "ppr:1:node", "hostname"])
    check(rc == 0 and sorted(out.split()) == ["node0", "node1"],
          f"mpirun inside node0 runs a process on each host: {out.split()} {err[-300:]}")
    check(not os.path.exists(os.path.join(cluster, "cores")),
          "2 hosts of 2 slots on a machine of fewer than 4 cores share its cores (no `cores` file)")


def test_own_cores(tmp):
    """Hosts with cores of their own: 2 hosts of 1 slot on a machine of 2
    cores or more run on disjoint cores; `--cores own` for more hosts than
    cores is refused."""
    cores = len(os.sched_getaffinity(0))
    own = os.path.join(tmp, "own")
    up = emu("up", own, "--hosts", "2", "--slots", "1", "--cores", "own")
    if cores < 2:
        check(up.returncode == 1 and "need a core each" in up.stderr,
              f"--cores own with 2 hosts on {cores} core is refused: {up.returncode} {up.stderr.strip()}")
        return
    if not check(up.returncode == 0, f"2 hosts with their own cores come up: {up.stderr.strip()}"):
        return
    try:
        masks = {}
        for host in ("node0", "node1"):
            rc, out, _ = on(own, host, ["python3", "-c", "import os; print(*sorted(os.sched_getaffinity(0)))"])
            masks[host] = out.strip()
            check(rc == 0 and out.strip() != "", f"{host} runs on cores {out.strip()}")
        check(not set(masks["node0"].split()) & set(masks["node1"].split()),
              f"the two hosts' cores are disjoint: {masks}")
    finally:
        emu("down", own)
    many = emu("up", os.path.join(tmp, "many"), "--hosts", str(cores + 1), "--slots", "1", "--cores", "own")
    check(many.returncode == 1 and "need a core each" in many.stderr,
          f"--cores own with {cores + 1} hosts on {cores} cores is refused: {many.stderr.strip()}")


with tempfile.TemporaryDirectory() as tmp:
    cluster = os.path.join(tmp, "cluster")
    up = emu("up", cluster, "--hosts", "2", "--slots", "2", "--rate", RATE)
    if not check(up.returncode == 0, f"a 2-host emulated cluster comes up: {up.stderr.strip()}"):
        sys.exit(t.done())
    with open(os.path.join(cluster, "namespaces")) as f:
        made = f.read().split()
    try:
        test_cluster(cluster)
        test_own_cores(tmp)
        ref_file = os.path.join(tmp, "single.loss")
        r = subprocess.run([parc, "run", os.path.join(examples, "tiny_single.par"), "--steps", str(STEPS), "--quiet"],
                           capture_output=True, text=True, env=dict(os.environ, PRT_LOSS_FILE=ref_file))
        ref = losses(ref_file)
        if check(r.returncode == 0 and len(ref) == STEPS, f"tiny_single's {STEPS} losses: {r.stderr[-300:]}"):
            test_parity(cluster, tmp, ref)
        test_placement_dp(cluster, tmp)
        for fault in ("link", "kill"):
            test_fault(cluster, tmp, fault, os.path.join(tmp, "dp_across.par"))
        test_restart(cluster, tmp, os.path.join(tmp, "dp_across.par"))
        test_calibrate(cluster, tmp)
    finally:
        down = emu("down", cluster)
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        left = [ns for ns in made if ns in listed.split()]
        check(down.returncode == 0 and not left and not os.path.exists(cluster),
              f"`down` removes the {len(made)} namespaces it made and its directory: {left} {down.stderr.strip()}")
sys.exit(t.done())
