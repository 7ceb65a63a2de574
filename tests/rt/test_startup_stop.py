#!/usr/bin/env python3
"""test_startup_stop.py PARC EXAMPLES_DIR — a rank stopped (SIGSTOP) during
start-up, before its first step, ends the job naming it and the start-up phase
it did not reach, as a rank stopped mid-training is named.

examples/tiny_tp.par (2 ranks, tp 2) is built once and run on a text file with
--timeout 3.  PRT_TEST_STOP=RANK:PHASE (the runtime's hook) stops world rank
RANK as it reaches start-up phase PHASE, before that phase's wait, so the
stop is at an exact point and the outcome does not depend on timing.  For each
phase of prt_init and the restore after it, asserts: the job exits non-zero
(and not by this test's own limit) within 30 s; exactly one line names the
stopped rank with its mesh coordinate, the phase's wait and the rank waiting
for it:
    parc: error: rank 1 (tp 1) did not reach the check of the data files
    (start-up) within 3 s (rank 0 (tp 0) waits for it)
and no rank's watchdog thread ends the job with only its own name ("blocked
for more than").  Also: a clean run (which writes the checkpoint the resume
case reads) exits 0, and a PRT_TEST_STOP naming no phase is an error listing
them.  Before the fix a rank stopped before the duplicate of the world
communicator was detected by the others' watchdog thread but not named, and
the three start-up checks shared one label."""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402

t = Checks("startup_stop")
parc, examples, check = t.parc, t.examples, t.check
TIMEOUT = 3
text = os.path.join(os.path.dirname(examples), "tests", "data", "genesis_kjv.txt")

# (phase, the label of the wait the other rank is left in)
PHASES = [
    ("dup", "duplicating the world communicator (start-up)"),
    ("mesh", "the start-up barrier before the communicator split"),
    ("hosts", "the host names gather (start-up)"),
    ("outputs", "the check of the outputs (start-up)"),
    ("data", "the check of the data files (start-up)"),
    ("ready", "the start-up barrier"),
    ("resume", "the check of the restored checkpoint (start-up)"),
]


def env(stop=None):
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    e.pop("PRT_TEST_STOP", None)
    if stop:
        e["PRT_TEST_STOP"] = stop
    return e


with tempfile.TemporaryDirectory(prefix="parc-startup-stop-") as tmp:
    exe, ck = os.path.join(tmp, "tiny_tp"), os.path.join(tmp, "ck")
    r = subprocess.run([parc, "build", os.path.join(examples, "tiny_tp.par"), "-o", exe], capture_output=True,
                       text=True)
    if not check(r.returncode == 0, f"parc build tiny_tp: {r.stderr.strip()[-300:]}"):
        sys.exit(t.done())
    mpirun = os.environ.get("PARC_MPIRUN") or "mpirun"
    base = [mpirun, "-np", "2", "--oversubscribe", exe, "--quiet", "--timeout", str(TIMEOUT), "--steps", "2",
            "--data", text]

    r = subprocess.run(base + ["--checkpoint-dir", ck], capture_output=True, text=True, env=env(), timeout=120)
    check(r.returncode == 0, f"a clean run exits 0 (got {r.returncode}: {r.stderr.strip()[-300:]})")

    cases = [(1, phase, label) for phase, label in PHASES] + [(0, "data", "the check of the data files (start-up)")]
    for rank, phase, label in cases:
        args = base + (["--checkpoint-dir", ck, "--resume", "latest"] if phase == "resume" else [])
        start = time.time()
        try:
            r = subprocess.run(args, capture_output=True, text=True, env=env(f"{rank}:{phase}"), timeout=60)
        except subprocess.TimeoutExpired:
            check(False, f"{rank}:{phase}: the job ended within 60 s")
            continue
        elapsed = time.time() - start
        out = r.stdout + r.stderr
        other = 1 - rank
        want = (f"parc: error: rank {rank} (tp {rank}) did not reach {label} within {TIMEOUT} s "
                f"(rank {other} (tp {other}) waits for it)")
        named = [line for line in out.splitlines() if "did not reach" in line or "did not arrive" in line]
        check(r.returncode != 0, f"{rank}:{phase}: the job exits non-zero (got {r.returncode})")
        check(elapsed < 30, f"{rank}:{phase}: it ended in {elapsed:.1f} s (limit 30)")
        check(named == [want], f"{rank}:{phase}: one line names rank {rank} and `{label}`: {named or out[-400:]}")
        check("blocked for more than" not in out, f"{rank}:{phase}: no watchdog thread ended the job unnamed")

    r = subprocess.run(base, capture_output=True, text=True, env=env("1:nonesuch"), timeout=60)
    check(r.returncode != 0 and "PRT_TEST_STOP must be RANK:PHASE with a PHASE of dup, mesh, hosts," in r.stderr,
          f"PRT_TEST_STOP=1:nonesuch is an error listing the phases (exit {r.returncode}): {r.stderr.strip()[-200:]}")
sys.exit(t.done())
