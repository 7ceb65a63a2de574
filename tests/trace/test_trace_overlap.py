#!/usr/bin/env python3
"""The gradient collectives of a data-parallel run overlap its backward.

  test_trace_overlap.py PARC PLAN...

For each PLAN (DDP / ZeRO-1: buckets started in grad_sync.block, one per
layer per step; ZeRO-2/3: reduce-scatters started in block.bwd, every layer of
every micro-batch, and those of head.bwd and embed.bwd; ZeRO-3: the weight
gathers of block.fwd and block.bwd started a layer ahead, the pass's first
layer's by itself):

`parc run PLAN --steps 2 --trace T`, then
  - T is valid Chrome trace JSON (chrome_trace.check: spans of one thread nest,
    so the started collectives, which overlap each other, sit on lanes of
    their own, threads 2 and up);
  - every rank has, per step, exactly as many started-collective spans as the
    program starts: the `*_start` lines of grad_sync.block in `parc lower PLAN
    --emit=ir` times the stage's layers, plus those of block.fwd and block.bwd
    per pass (by their `; if ...` guards) and those of head.bwd and
    embed.bwd, times the micro-batches; and as many started `allgather` spans
    as the block's gathers times the layers and the micro-batches (both
    directions);
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
from ir_dump import seq_body  # noqa: E402

FAILS = []
STEPS = 2


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what)
    return cond




def seq_starts(ir, name, kinds="allreduce|reducescatter|allgather"):
    """The started collectives in sequence `name` of the IR dump."""
    return len(re.findall(rf"^    ({kinds})_start\(", seq_body(ir, name), re.M))


def pass_starts(ir, name, L):
    """Calls of the started collectives of block sequence `name` in one
    pass over L layers: an unguarded start runs for every layer, one marked
    `; if l == 0` / `; if l == L-1` (the pass's first layer gathering its
    own weights) once, `; if l < L-1` / `; if l > 0` (a gather prefetched for
    the next layer) L - 1 times."""
    calls = 0
    for line in re.findall(r"^    (?:allreduce|reducescatter|allgather)_start\(.*$", seq_body(ir, name), re.M):
        if line.endswith("; if l == 0") or line.endswith("; if l == L-1"):
            calls += 1
        elif line.endswith("; if l < L-1") or line.endswith("; if l > 0"):
            calls += L - 1
        else:
            calls += L
    return calls


def starts_per_step(parc, plan):
    """Started collectives per step of a one-stage program, from the IR
    dump, and how many of them are prefetched gathers."""
    ir = subprocess.run([parc, "lower", plan, "--emit=ir"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"chunks (\d+), layers per chunk (\d+)", ir)
    chunks, L = int(m.group(1)), int(m.group(2))
    micro = int(re.search(r"(\d+) micro-batches", ir).group(1))
    sync = seq_starts(ir, "grad_sync.block")
    fwd, bwd = seq_starts(ir, "block.fwd"), seq_starts(ir, "block.bwd")
    ends = seq_starts(ir, "head.bwd") + seq_starts(ir, "embed.bwd")  # once per micro-batch
    gathers = seq_starts(ir, "block.fwd", "allgather") + seq_starts(ir, "block.bwd", "allgather")
    waits = len(re.findall(r"^    comm_wait\(", ir, re.M))
    # a prefetched gather has two starts (the first layer's, the next layer's) and one wait
    check(sync + fwd + bwd > 0 and sync + fwd + bwd + ends - gathers // 2 == waits,
          f"{plan}: {sync} + {fwd} + {bwd} + {ends} starts ({gathers} of gathers) and {waits} waits in the IR")
    per_pass = pass_starts(ir, "block.fwd", L) + pass_starts(ir, "block.bwd", L)
    gather_calls = (gathers // 2) * L * chunks * micro  # every layer's gathers, once per pass direction
    return sync * chunks * L + per_pass * chunks * micro + ends * micro, gather_calls


def main():
    parc = sys.argv[1]
    for plan in sys.argv[2:]:
        check_plan(parc, plan)
    print("FAIL" if FAILS else "ok", len(FAILS), "failures")
    return 1 if FAILS else 0


def check_plan(parc, plan):
    want, want_gathers = starts_per_step(parc, plan)
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t.json")
        run = subprocess.run([parc, "run", plan, "--steps", str(STEPS), "--trace", trace], capture_output=True,
                             text=True, cwd=tmp)
        if not check(run.returncode == 0, f"{plan}: parc run exit {run.returncode}: {run.stdout}{run.stderr}"):
            return
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
        print(f"{os.path.basename(plan)} rank {pid}: {len(overlapped)} of {len(started)} started collectives "
              "overlap a backward op")
        gathers = [c for c in started if c["name"] == "allgather"]
        check(len(gathers) == want_gathers * STEPS, f"rank {pid}: {len(gathers)} started gathers, the program starts "
              f"{want_gathers} a step")
        if want_gathers:
            ops = [e for e in spans if e["pid"] == pid and e["tid"] == 0 and e.get("cat") == "op"]
            hidden = [c for c in gathers
                      if any(o["ts"] < c["ts"] + c["dur"] and c["ts"] < o["ts"] + o["dur"] for o in ops)]
            check(hidden, f"rank {pid}: no prefetched weight gather in flight during a compute op")
            print(f"{os.path.basename(plan)} rank {pid}: {len(hidden)} of {len(gathers)} started weight gathers "
                  "overlap a compute op")


if __name__ == "__main__":
    sys.exit(main())
