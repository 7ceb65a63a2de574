#!/usr/bin/python3
"""test_moe_alltoall.py — expert parallelism's all-to-alls, as listed and as run.

usage: test_moe_alltoall.py PARC EXAMPLES_DIR

tiny_moe_ep (4 experts, top 2, hidden 64, fp32; dp 2 with `experts -> dp`;
micro_batch 2 x seq 32 = 64 tokens a micro-batch, 2 micro-batches, 2 layers):
  - `parc collectives --json`: every all-to-all(v) row moves a rank's routed
    rows of one micro-batch, 64 tokens x top 2 x hidden 64 = 8,192 fp32
    elements (32 KiB) a call, over dp with bus factor 1/2; per layer and
    micro-batch 2 exchanges forward and 2 backward (the forward's exchanged
    rows are kept), so 2 x 2 x 2 calls a step each way; each exchange's counts move by an all-to-all of the 4
    experts' i32 counts;
  - a 1-step run with --trace: each rank's all-to-all(v) calls are as many as
    listed, a dispatch moves exactly its 128 rows (32 KiB), and the bytes
    of all calls on both ranks sum to the listed bytes per step x 2 ranks
    (every row that goes to an expert comes back, however it is routed);
  - `explain --json` states the same exchange (model.experts) and each
    stage's experts' share of its memory;
  - `parc search` ranks layouts with the experts whole and split over dp,
    the plan's own layout among them;
  - beside a context axis (tiny_moe_ring_ep): see context().
Exits 1 on any failure."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import prt_dump  # noqa: E402

ROWS, HIDDEN, FP32, RANKS, LAYERS, MICRO = 64 * 2, 64, 4, 2, 2, 2


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    parc, examples = argv[1:]
    plan = os.path.join(examples, "tiny_moe_ep.par")
    fails = []
    out = subprocess.run([parc, "collectives", plan, "--json"], capture_output=True, text=True, check=True).stdout
    rows = json.loads(out)["collectives"]
    v = [r for r in rows if r["collective"] == "all-to-all(v)"]
    counts = [r for r in rows if r["collective"] == "all-to-all"]
    calls = {"forward": 0, "backward": 0}
    listed = 0
    for r in v:
        if (r["elements"], r["element_bytes"], r["bytes_per_call"], r["axis"], r["group"], r["bus_factor"]) != \
                (ROWS * HIDDEN, FP32, ROWS * HIDDEN * FP32, "dp", RANKS, 0.5):
            fails.append(f"all-to-all(v) row {r}: expected {ROWS * HIDDEN} fp32 elements over dp 2, bus factor 0.5")
        calls[r["phase"]] = calls.get(r["phase"], 0) + r["calls_per_step"]
        listed += r["bytes_per_step"]
    want = {"forward": 2 * LAYERS * MICRO, "backward": 2 * LAYERS * MICRO}
    if calls != want:
        fails.append(f"all-to-all(v) calls per step {calls}, expected {want}")
    if sum(r["calls_per_step"] for r in counts) != sum(want.values()) or any(
            (r["elements"], r["element_bytes"]) != (4, 4) for r in counts):
        fails.append(f"the exchanges' counts: {counts}")
    per_rank, problem = traced_alltoallv(parc, plan, RANKS)
    if problem:
        fails.append(problem)
    else:
        measured = sum(sum(b) for b in per_rank.values())
        for rank, b in sorted(per_rank.items()):
            if len(b) != sum(want.values()):
                fails.append(f"rank {rank}: {len(b)} all-to-all(v) calls in the step, listed {sum(want.values())}")
            # the first exchange of each layer and micro-batch is a dispatch: all of the rank's rows
            if b[0] != ROWS * HIDDEN * FP32:
                fails.append(f"rank {rank}: the first dispatch moved {b[0]} bytes, expected {ROWS * HIDDEN * FP32}")
        if len(per_rank) != RANKS or measured != listed * RANKS:
            fails.append(f"measured {measured} bytes of all-to-all(v) over {len(per_rank)} ranks, listed "
                         f"{listed} a rank: expected {listed * RANKS}")
        else:
            print(f"tiny_moe_ep: {calls} all-to-all(v) calls of {ROWS * HIDDEN * FP32} bytes listed; "
                  f"measured {measured} bytes over {RANKS} ranks = listed {listed} x {RANKS}")
    # explain --json states the same exchange and the experts' side buffers (2 ranks x 64 tokens x 2)
    out = subprocess.run([parc, "explain", plan, "--json"], capture_output=True, text=True, check=True).stdout
    info = json.loads(out)
    x = info["model"].get("experts", {})
    want_x = dict(experts=4, top=2, over="dp", per_rank=2, exchange_bytes=ROWS * HIDDEN * FP32, exchanges_forward=2,
                  exchanges_backward=2, buffer_rows=RANKS * ROWS, bound_rows=RANKS * ROWS, capacity=None, imbalance=1)
    if x != want_x:
        fails.append(f"explain --json model.experts {x}, expected {want_x}")
    em = info["stages"][0].get("experts_memory", {})
    if not em or em.get("weights", 0) <= 0 or any(em[k] > info["stages"][0]["memory"][k] for k in em):
        fails.append(f"explain --json stages[0].experts_memory {em} against memory {info['stages'][0]['memory']}")
    # `parc search` ranks the layouts with the experts whole and split over dp, the plan's own among them
    out = subprocess.run([parc, "search", plan, "--top", "200", "--json"], capture_output=True, text=True,
                         check=True).stdout
    top = json.loads(out)["top"]
    split = sum(1 for r in top if r["experts_over_dp"])
    own = [r["rank"] for r in top if r["experts_over_dp"] and r["dp"] == 2 and r["micro_batch"] == 2 and
           r["zero"] == 0 and r["recompute"] == "none"]
    if not split or split == len(top) or len(own) != 1:
        fails.append(f"parc search: {split} of {len(top)} ranked layouts split the experts over dp, the plan's own "
                     f"layout ranked {own}")
    else:
        print(f"parc search: {split} of {len(top)} ranked layouts split the experts over dp; the plan's own is #{own[0]}")
    fails += context(parc, examples)
    for f in fails:
        prt_dump.fail(f)
    return 1 if fails else 0


def context(parc, examples):
    """tiny_moe_ring_ep (dp 2 x cp 2, experts over dp): a rank routes its
    chunk, 2 samples x 16 positions = 32 tokens, so an exchange moves 64 rows
    (16 KiB) over dp among the ranks of one cp coordinate, the experts' side
    holds the 128 rows of dp's two ranks; the router's counts (4 i32) are
    summed over cp once per layer and micro-batch; run with --trace, the 4
    ranks' all-to-all(v) bytes sum to the listed bytes x 4."""
    plan = os.path.join(examples, "tiny_moe_ring_ep.par")
    fails, rows_cp, ranks = [], 32 * 2, 4
    rows = json.loads(subprocess.run([parc, "collectives", plan, "--json"], capture_output=True, text=True,
                                     check=True).stdout)["collectives"]
    v = [r for r in rows if r["collective"] == "all-to-all(v)"]
    if not v or any((r["elements"], r["axis"], r["group"]) != (rows_cp * HIDDEN, "dp", 2) for r in v):
        fails.append(f"tiny_moe_ring_ep: all-to-all(v) rows {v}, expected {rows_cp * HIDDEN} elements over dp 2")
    summed = [r for r in rows if r["collective"] == "all-reduce" and r["axis"] == "cp" and r["phase"] == "forward"]
    if [(r["elements"], r["element_bytes"], r["calls_per_step"]) for r in summed] != [(4, 4, LAYERS * MICRO)]:
        fails.append(f"tiny_moe_ring_ep: the router counts' all-reduce over cp {summed}, expected 4 i32 elements "
                     f"{LAYERS * MICRO} times a step")
    x = json.loads(subprocess.run([parc, "explain", plan, "--json"], capture_output=True, text=True,
                                  check=True).stdout)["model"].get("experts", {})
    if (x.get("exchange_bytes"), x.get("buffer_rows")) != (rows_cp * HIDDEN * FP32, 2 * rows_cp):
        fails.append(f"tiny_moe_ring_ep: explain --json model.experts {x}, expected exchange_bytes "
                     f"{rows_cp * HIDDEN * FP32} and buffer_rows {2 * rows_cp}")
    listed = sum(r["bytes_per_step"] for r in v)
    per_rank, problem = traced_alltoallv(parc, plan, ranks)
    if problem:
        return fails + [f"tiny_moe_ring_ep: {problem}"]
    measured = sum(sum(b) for b in per_rank.values())
    if measured != listed * ranks:
        fails.append(f"tiny_moe_ring_ep: measured {measured} bytes of all-to-all(v), listed {listed} a rank x {ranks}")
    elif not fails:
        print(f"tiny_moe_ring_ep: exchanges of {rows_cp} rows over dp, the counts summed over cp "
              f"{LAYERS * MICRO} times a step; measured {measured} bytes = listed {listed} x {ranks}")
    return fails


def traced_alltoallv(parc, plan, ranks):
    """-> ({rank: [bytes of each all-to-all(v) call, in order]}, None) of one
    step of `plan` on `ranks` ranks with --trace, or (None, what failed)."""
    mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun")
    with tempfile.TemporaryDirectory(prefix="parc-moe-a2a-") as work:
        exe, trace = os.path.join(work, "prog"), os.path.join(work, "trace.json")
        prt_dump.build(parc, plan, exe)
        r = subprocess.run([mpirun, "-np", str(ranks), "--oversubscribe", exe, "--steps", "1", "--quiet",
                            "--trace", trace], capture_output=True, text=True, env=prt_dump.run_env({}), timeout=300)
        if r.returncode != 0:
            return None, f"the run failed ({r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}"
        per_rank = {}
        for e in prt_dump.read_trace(trace):
            if e.get("name") == "alltoallv":
                per_rank.setdefault(e["pid"], []).append(e["args"]["bytes"])
        return per_rank, None


if __name__ == "__main__":
    sys.exit(main(sys.argv))
