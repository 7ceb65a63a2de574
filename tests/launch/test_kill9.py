#!/usr/bin/env python3
"""test_kill9.py PARC EXAMPLES_DIR — `parc run` killed with SIGKILL (a CI
timeout, the OOM killer) takes its job with it: within seconds no mpirun and
no rank of the run is left (before, they trained on, re-parented to PID 1),
and the run's temporary directory is gone."""
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402
import time

t = Checks("kill9")
parc, examples, check = t.parc, t.examples, t.check


def processes_naming(text):
    """pids whose command line names text (the run's private directory)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            found.append((int(pid), cmd.strip()[:120]))
    return found


with tempfile.TemporaryDirectory() as tmp:
    plan = t.tiny_plan(tmp, "long", "optimizer adamw lr 1e-3; steps 1000000;")
    runs = os.path.join(tmp, "runs")
    os.mkdir(runs)
    env = dict(os.environ, TMPDIR=runs)
    p = subprocess.Popen([parc, "run", plan, "--", "--quiet"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    ranks = []
    for _ in range(300):  # the build, then mpirun starting both ranks
        ranks = [x for x in processes_naming(runs) if x[1].startswith(os.path.join(runs, "parc-run-"))]
        if len(ranks) >= 2:
            break
        time.sleep(0.1)
    check(len(ranks) >= 2, f"both ranks of the run started: {ranks}")
    time.sleep(1.0)
    p.send_signal(signal.SIGKILL)
    p.wait()
    left = processes_naming(runs)
    for _ in range(150):
        left = processes_naming(runs)
        if not left and not os.listdir(runs):
            break
        time.sleep(0.1)
    check(not left, f"no mpirun or rank is left 15 s after parc's SIGKILL: {left}")
    check(not os.listdir(runs), f"the run's temporary directory is gone: {os.listdir(runs)}")
    for pid, _ in left:  # do not leave them to the next test
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
sys.exit(t.done())
