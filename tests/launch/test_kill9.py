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
import time

parc, examples = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
fails = 0


def check(ok, what):
    global fails
    print(("ok    " if ok else "FAIL  ") + what)
    fails += 0 if ok else 1


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
    plan = os.path.join(tmp, "long.par")
    with open(plan, "w") as f:
        f.write(f'include "{examples}/common/tiny_gpt.par";\n'
                f'cluster {{ nodes 1; gpus_per_node 2; include "{examples}/common/tiny_cluster.par"; }}\n'
                "train { batch 8; micro_batch 2; precision fp32; optimizer adamw lr 1e-3; steps 1000000; }\n"
                "mesh { dp 2; }\nlayout { batch -> dp; }\n")
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
print(f"kill9: {fails} failures")
sys.exit(1 if fails else 0)
