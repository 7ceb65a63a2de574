#!/usr/bin/env python3
"""The gradient buckets of a data-parallel run overlap its backward.

  test_trace_overlap.py PARC PLAN

`parc run PLAN --steps 2 --trace T`, then
  - T is valid Chrome trace JSON (chrome_trace.check: spans of one thread nest,
    so the started collectives, which overlap each other, sit on lanes of
    their own, threads 2 and up);
  - every rank has, per step, exactly as many started-collective spans as the
    program starts: the `allreduce_start` / `reducescatter_start` lines of
    `parc lower PLAN --emit=ir` times the stage's layers;
  - on every rank some gradient collective's span [start, completion] overlaps
    a backward op's span (an op named *_bwd on the compute thread): the
    collective was in flight while the backward computed.
Exit status 0 iff all of that held."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chrome_trace  # noqa: E402

FAILS = []
STEPS = 2


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what)
    return cond


def starts_per_step(parc, plan):
    """Started collectives per step of a one-stage program, from the IR dump."""
    ir = subprocess.run([parc, "lower", plan, "--emit=ir"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"chunks (\d+), layers per chunk (\d+)", ir)
    layers = int(m.group(1)) * int(m.group(2))
    body = ir.split("  grad_sync.block:\n", 1)[1] if "  grad_sync.block:\n" in ir else ""
    body = re.split(r"\n  (?=\S)", body, maxsplit=1)[0]  # up to the next sequence
    starts = len(re.findall(r"^    (allreduce|reducescatter)_start\(", body, re.M))
    waits = len(re.findall(r"^    comm_wait\(", ir, re.M))
    check(starts > 0 and starts == waits, f"{plan}: {starts} starts and {waits} waits in the IR")
    return starts * layers


def main():
    parc, plan = sys.argv[1], sys.argv[2]
    want = starts_per_step(parc, plan)
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t.json")
        run = subprocess.run([parc, "run", plan, "--steps", str(STEPS), "--trace", trace], capture_output=True,
                             text=True, cwd=tmp)
        if not check(run.returncode == 0, f"parc run exit {run.returncode}: {run.stdout}{run.stderr}"):
            return 1
        t = chrome_trace.load(trace)
    problems = chrome_trace.check(t)
    check(not problems, f"the trace is not valid: {problems[:5]}")
    events = chrome_trace.events_of(t)
    spans = [e for e in events if e.get("ph") == "X"]
    ranks = sorted({e["pid"] for e in spans})
    check(len(ranks) == 2, f"ranks in the trace: {ranks}")
    for pid in ranks:
        started = [e for e in spans if e["pid"] == pid and e.get("cat") == "comm" and e["tid"] >= 2]
        check(len(started) == want * STEPS, f"rank {pid}: {len(started)} started collectives, the program starts "
              f"{want} a step")
        bwd = [e for e in spans if e["pid"] == pid and e["tid"] == 0 and e.get("cat") == "op"
               and e["name"].endswith("_bwd")]
        overlapped = [c for c in started
                      if any(o["ts"] < c["ts"] + c["dur"] and c["ts"] < o["ts"] + o["dur"] for o in bwd)]
        check(overlapped, f"rank {pid}: no gradient collective in flight during a backward op")
        print(f"rank {pid}: {len(overlapped)} of {len(started)} started collectives overlap a backward op")
    print("FAIL" if FAILS else "ok", len(FAILS), "failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
