#!/usr/bin/env python3
"""The input-gradient collectives of a tensor-parallel run are started before
the weight-gradient GEMM and completed after it (overlap_tp.c).

  test_trace_tp_overlap.py PARC PLAN...

For each PLAN (tp 2, one stage, no data axis):

`parc lower PLAN --emit=ir` shows, in head.bwd and block.bwd, each started
collective over the tensor axis followed by the weight-gradient half of the
linear backward (`; the weight gradient only`) and then by its comm_wait;
`parc run PLAN --steps 2 --trace T`, then
  - T is valid Chrome trace JSON (chrome_trace.check);
  - every rank has, per step, exactly as many started collectives on the
    tensor axis (tid 2 and up) and as many "wait" spans on it (tid 0) as the
    program starts: the starts of head.bwd once and of block.bwd once per
    layer, every micro-batch;
  - on every rank each of those collectives began before the next op on the
    compute thread began, that op is the weight-gradient GEMM (a
    matmul*_bwd), and the collective's wait began after that GEMM ended: the
    collective was in flight for the whole GEMM;
  - the same plan with `tp_overlap off;` starts none of them.
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




def tp_starts(ir, name):
    """Started collectives of sequence `name`, each checked to be followed by
    the weight-gradient half and then its wait."""
    lines = seq_body(ir, name).splitlines()
    n = 0
    for i, line in enumerate(lines):
        m = re.match(r"^    (allreduce|reducescatter)_start\(0, (%[^,)]+)", line)
        if not m:
            continue
        n += 1
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        wait = lines[i + 2] if i + 2 < len(lines) else ""
        check(re.match(r"^    matmul\w*_bwd\(null, ", nxt) and nxt.endswith("; the weight gradient only"),
              f"{name}: the start on {m.group(2)} is not followed by a weight-gradient half: {nxt.strip()}")
        check(wait.startswith(f"    comm_wait({m.group(2)})"),
              f"{name}: the weight half after the start on {m.group(2)} is not followed by its wait: {wait.strip()}")
    return n


def lowered(parc, plan):
    return subprocess.run([parc, "lower", plan, "--emit=ir"], capture_output=True, text=True, check=True).stdout


def blocking_variant(plan, tmp):
    """PLAN with `tp_overlap off;` in its layout, includes resolved from its folder."""
    text = open(plan).read()
    folder = os.path.dirname(os.path.abspath(plan))
    text = re.sub(r'include "([^"/][^"]*)"', lambda m: f'include "{os.path.join(folder, m.group(1))}"', text)
    text = re.sub(r"layout\s*\{", "layout {\n  tp_overlap off;", text, count=1)
    path = os.path.join(tmp, "blocking.par")
    with open(path, "w") as f:
        f.write(text)
    return path


def check_plan(parc, plan):
    name = os.path.basename(plan)
    ir = lowered(parc, plan)
    L = int(re.search(r"layers per chunk (\d+)", ir).group(1))
    micro = int(re.search(r"(\d+) micro-batches", ir).group(1))
    head, block = tp_starts(ir, "head.bwd"), tp_starts(ir, "block.bwd")
    check(block > 0, f"{name}: no input-gradient collective started in block.bwd")
    want = (head + block * L) * micro
    with tempfile.TemporaryDirectory() as tmp:
        off = lowered(parc, blocking_variant(plan, tmp))
        check(not re.search(r"_start\(|comm_wait\(", off), f"{name}: with `tp_overlap off;` the IR still starts "
              "collectives")
        trace = os.path.join(tmp, "t.json")
        run = subprocess.run([parc, "run", plan, "--steps", str(STEPS), "--trace", trace], capture_output=True,
                             text=True, cwd=tmp)
        if not check(run.returncode == 0, f"{name}: parc run exit {run.returncode}: {run.stdout}{run.stderr}"):
            return
        t = chrome_trace.load(trace)
    problems = chrome_trace.check(t)
    check(not problems, f"{name}: the trace is not valid: {problems[:5]}")
    spans = [e for e in chrome_trace.events_of(t) if e.get("ph") == "X"]
    ranks = sorted({e["pid"] for e in spans})
    check(len(ranks) == 2, f"{name}: ranks in the trace: {ranks}")
    for pid in ranks:
        mine = [e for e in spans if e["pid"] == pid]
        started = sorted((e for e in mine if e.get("cat") == "comm" and e["tid"] >= 2
                          and e.get("args", {}).get("axis") == "tp"), key=lambda e: e["ts"])
        waits = sorted((e for e in mine if e.get("cat") == "wait" and e["tid"] == 0
                        and e.get("args", {}).get("axis") == "tp"), key=lambda e: e["ts"])
        ops = sorted((e for e in mine if e.get("cat") == "op" and e["tid"] == 0), key=lambda e: e["ts"])
        check(len(started) == want * STEPS and len(waits) == want * STEPS,
              f"{name} rank {pid}: {len(started)} started collectives and {len(waits)} waits on tp, the program "
              f"starts {want} a step")
        under = 0
        for c in started:
            gemm = next((o for o in ops if o["ts"] >= c["ts"]), None)
            wait = next((w for w in waits if w["ts"] >= c["ts"]), None)
            ok = (gemm is not None and wait is not None and re.fullmatch(r"matmul\w*_bwd", gemm["name"])
                  and wait["ts"] >= gemm["ts"] + gemm["dur"] and wait["name"] == c["name"])
            check(ok, f"{name} rank {pid}: the {c['name']} started at {c['ts']} us is not in flight over a "
                  f"weight-gradient GEMM up to its wait (next op {gemm and gemm['name']}, wait at "
                  f"{wait and wait['ts']})")
            under += bool(ok)
        print(f"{name} rank {pid}: {under} of {len(started)} input-gradient {started[0]['name'] if started else ''}s "
              "started before a weight-gradient GEMM and waited after it")


def main():
    parc = os.path.abspath(sys.argv[1])
    for plan in sys.argv[2:]:
        check_plan(parc, os.path.abspath(plan))
    print("FAIL" if FAILS else "ok", len(FAILS), "failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
