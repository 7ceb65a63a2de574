#!/usr/bin/env python3
"""trace_gemm.py — the GEMM share of a parc training step, from its Chrome trace.

Used by bench_train.sh (plain python3, no numpy/torch needed):

  trace_gemm.py shapes IR               the distinct GEMM shapes of the lowered
                                        program, as N:K:M,... (bench_sgemm_peak --shapes)
  trace_gemm.py report IR TRACE PEAK [--skip K] [--top N]
                                        one rank's GEMM time, share and GFLOP/s

IR is `parc lower PLAN --emit=ir`: every matmul_fwd/matmul_bwd call (and their
_t and _bias forms: a folded bias is timed with its GEMM) with its N, K, M.  Calls in the `block.fwd`/`block.bwd` sections run once per layer held
(`layers per chunk` x `chunks`), the others once, all once per micro-batch of
the stage: FLOPs per step = sum 2NKM (fwd) + 4NKM (bwd: din and dw).  Those
counts are checked against the matmul events of the trace.

TRACE is the --trace JSON (rank 0's events); ops are assigned to the `step`
event that contains them, and the first K steps (warm-up) are skipped.

PEAK is bench_sgemm_peak's output: `square n gflops g` (the BLAS peak: largest n)
and `shape N:K:M fwd_gflops f bwd_gflops b` (the BLAS alone on each shape: the
time the step's GEMMs would take at those rates is printed beside parc's).

report prints `key=value` lines that bench_train.sh formats.  gemm_ms is the
matmul ops' time; inner_gemm_ms the time of the GEMMs other ops call
themselves (an op event's args.gemm_share x its duration: the CPU
attention's block products), all_gemm_ms the two together.
"""
import json
import re
import statistics
import sys

CALL = re.compile(r"^\s*(matmul(?:_t|_bias)?_(fwd|bwd))\((.*)\)\s*(?:;.*)?$")  # a trailing "; writes ..." mark


def gemms(ir_path):
    """[(kind 'fwd'|'bwd', N, K, M, count per step)] from the lowered IR (stage 0)."""
    out, section, per_layer, chunks, mbs, stage = [], "", 1, 1, 1, -1
    for line in open(ir_path):
        m = re.match(r"^program .*?(\d+) micro-batches", line)
        if m:
            mbs = int(m.group(1))
        m = re.match(r"^stage (\d+): chunks (\d+), layers per chunk (\d+)", line)
        if m:
            stage, chunks, per_layer = int(m.group(1)), int(m.group(2)), int(m.group(3))
            continue
        if stage != 0:
            continue
        m = re.match(r"^  ([a-z_.]+):\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = CALL.match(line)
        if m:
            args = [a.strip() for a in m.group(3).split(",")]
            N, K, M = (int(x) for x in args[-3:])
            times = (per_layer * chunks if section.startswith("block.") else 1) * mbs
            out.append((m.group(2), N, K, M, times))
    return out


def load_trace(path):
    """The events of a --trace file: a JSON array, closed by "]" unless the run
    was killed (then the events up to the last whole line)."""
    text = open(path).read()
    lines = text.rstrip().split("\n")
    while lines:
        try:
            trace = json.loads(text if text.rstrip().endswith("]") else "\n".join(lines).rstrip(",") + "\n]")
            return trace["traceEvents"] if isinstance(trace, dict) else trace
        except json.JSONDecodeError:
            if text.rstrip().endswith("]"):
                raise
            lines.pop()
    raise ValueError(f"{path}: not a trace")


def load_peak(path):
    square, shapes = {}, {}
    for line in open(path):
        f = line.split()
        if len(f) >= 4 and f[0] == "square":
            square[int(f[1])] = float(f[3])
        elif len(f) >= 6 and f[0] == "shape":
            shapes[f[1]] = (float(f[3]), float(f[5]))
    return square, shapes


def report(ir_path, trace_path, peak_path, skip, top):
    gs = gemms(ir_path)
    square, shapes = load_peak(peak_path)
    flops = sum((2 if k == "fwd" else 4) * N * K * M * c for k, N, K, M, c in gs)
    blas_s = 0.0  # seconds the BLAS alone needs for one step's GEMMs, at its per-shape rates
    for k, N, K, M, c in gs:
        r = shapes.get(f"{N}:{K}:{M}")
        if r is None:
            blas_s = float("nan")
            break
        f = (2 if k == "fwd" else 4) * N * K * M * c
        blas_s += f / (r[0 if k == "fwd" else 1] * 1e9)
    ev = [e for e in load_trace(trace_path) if e.get("ph") == "X" and e.get("pid", 0) == 0]
    steps = sorted((e for e in ev if e.get("cat") == "step"), key=lambda e: e["ts"])[skip:]
    if not steps:
        print("error=no steps left after --skip")
        return 1
    per_step = []  # (step ms, gemm ms, {op: ms}, matmul events, ms of GEMMs inside other ops)
    for s in steps:
        t0, t1 = s["ts"], s["ts"] + s["dur"]
        ops, n_mm, inner = {}, 0, 0.0
        for e in ev:
            if e.get("cat") in ("op", "comm") and t0 <= e["ts"] <= t1:
                ops[e["name"]] = ops.get(e["name"], 0.0) + e["dur"] / 1e3
                if e["name"].startswith("matmul"):
                    n_mm += 1
                else:
                    inner += e["dur"] / 1e3 * e.get("args", {}).get("gemm_share", 0.0)
        gemm = sum(v for k, v in ops.items() if k.startswith("matmul"))
        per_step.append((s["dur"] / 1e3, gemm, ops, n_mm, inner))
    expected = sum(c for *_, c in gs)
    step_ms = statistics.median(p[0] for p in per_step)
    gemm_ms = statistics.median(p[1] for p in per_step)
    print(f"steps={len(per_step)}")
    print(f"step_ms={step_ms:.1f}")
    print(f"gemm_ms={gemm_ms:.1f}")
    print(f"gemm_share={gemm_ms / step_ms:.3f}")
    inner_ms = statistics.median(p[4] for p in per_step)
    print(f"inner_gemm_ms={inner_ms:.1f}")
    print(f"all_gemm_ms={statistics.median(p[1] + p[4] for p in per_step):.1f}")
    print(f"gemm_gflop_per_step={flops / 1e9:.2f}")
    print(f"gemm_gflops={flops / (gemm_ms / 1e3) / 1e9:.1f}")
    print(f"blas_same_shapes_ms={blas_s * 1e3:.1f}")
    print(f"blas_same_shapes_gflops={flops / blas_s / 1e9 if blas_s == blas_s and blas_s > 0 else float('nan'):.1f}")
    if square:
        n = max(square)
        print(f"blas_peak_n={n}")
        print(f"blas_peak_gflops={square[n]:.1f}")
    counts = {p[3] for p in per_step}
    print(f"matmul_events_per_step={'/'.join(str(c) for c in sorted(counts))}")
    print(f"matmul_events_expected={expected}")
    names = sorted(per_step[0][2], key=lambda k: -statistics.median(p[2].get(k, 0.0) for p in per_step))
    tops = []
    for k in names[:top]:
        ms = statistics.median(p[2].get(k, 0.0) for p in per_step)
        tops.append(f"{k} {ms:.0f} ms ({100 * ms / step_ms:.0f}%)")
    print("top_ops=" + ", ".join(tops))
    for k in names:
        print(f"op.{k}={statistics.median(p[2].get(k, 0.0) for p in per_step):.2f}")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "shapes":
        seen = []
        for _, N, K, M, _ in gemms(argv[1]):
            s = f"{N}:{K}:{M}"
            if s not in seen:
                seen.append(s)
        print(",".join(seen))
        return 0
    if len(argv) >= 4 and argv[0] == "report":
        skip, top = 2, 6
        rest = argv[4:]
        for i, a in enumerate(rest):
            if a == "--skip":
                skip = int(rest[i + 1])
            if a == "--top":
                top = int(rest[i + 1])
        return report(argv[1], argv[2], argv[3], skip, top)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
