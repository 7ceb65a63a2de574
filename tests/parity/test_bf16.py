#!/usr/bin/python3
"""test_bf16.py — bf16 plans train on the CPU runtime and follow the fp32 run.

usage: test_bf16.py PARC EXAMPLES_DIR [--steps N] [--keep DIR]

Builds and runs, for 10 steps with PRT_LOSS_FILE and --memory:
  tiny_single   (fp32, 1 rank: the reference curve),
  tiny_bf16     (the same model and data, bf16 storage with fp32 master, 1 rank),
  tiny_bf16_3d  (bf16, pp 2 x dp 2 x tp 2, ZeRO-1, 8 ranks),
  tiny_bf16_ring (bf16, ring attention over cp 2 with the load-balanced split, 2 ranks),
and asserts:
  - the bf16 loss falls: the last step is at least FALL below step 1;
  - every step of tiny_bf16 is within BF16_VS_FP32 (relative) of tiny_single;
  - every step of tiny_bf16_3d and of tiny_bf16_ring is within BF16_3D_VS_1
    (relative) of tiny_bf16;
  - both bf16 runs pass --memory: exit 0 and an "ok" row for each of the 7 classes
    on every rank, and the measured weights and gradients are exactly 2 bytes per
    element of the stage's weights/grads buffers in `parc lower --emit=ir` (which
    must all be bf16), the master 4 bytes per element.

Tolerances (measured on this model, seed 1234, 10 steps, OPENBLAS_NUM_THREADS=1):
  - bf16 vs fp32: max relative step difference 1.6e-4 (step 5: 5.167467 vs
    5.166626; step 10: 4.906500 vs 4.907025).  bf16 keeps 8 significant bits, so
    one rounding moves a value by <= 2^-9 = 0.2%; the master weights and Adam
    moments are fp32 and the loss is an fp32 average over 256 tokens, so the curve
    moves far less.  BF16_VS_FP32 = 2e-3 (12x the measurement, one bf16 half-ulp):
    a bug moves the curve by percents (weights not rounded back from the master,
    a dropped accumulation; a master starting at zero sits at log(256) = 5.545 from
    step 2, 8% above fp32 at step 10).
  - 3D bf16 vs 1-rank bf16: max relative difference 9.1e-5 (step 10).  The layouts
    round at different points (a tensor-parallel partial sum is rounded to bf16
    before its all-reduce; data-parallel gradients are summed from rounded halves;
    micro-batches of 1 instead of 2 accumulate the gradient in bf16 four times
    instead of twice), so they cannot agree to fp32 parity's 1e-5
    (test_parity.py).  BF16_3D_VS_1 = 2e-3 (20x the measurement).  Ring
    attention over cp 2 (tiny_bf16_ring): 1.5e-4 (step 10), each step's block
    output rounded to bf16 before it merges into the next.
Prints a table; exit status 1 on any failure.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prt_dump  # noqa: E402

FALL = 0.3              # the loss must fall at least this much over 10 steps (fp32: 5.53 -> 4.91)
BF16_VS_FP32 = 2e-3     # relative, per step
BF16_3D_VS_1 = 2e-3     # relative, per step
CLASSES = ("weights", "grads", "master", "optim", "activations", "comm", "workspace")


def run_plan(parc, examples, name, steps, work):
    """Builds and runs a plan with --memory; returns (losses, world, memory rows, output)."""
    plan = os.path.join(examples, name + ".par")
    exe = os.path.join(work, name)
    loss_file = os.path.join(work, name + ".loss")
    world = prt_dump.world_size(prt_dump.explain(parc, plan))
    prt_dump.build(parc, plan, exe)
    mpirun = os.environ.get("PARC_MPIRUN") or "mpirun"
    cmd = [mpirun, "-np", str(world), "--oversubscribe", "-x", "PRT_LOSS_FILE", exe, "--steps", str(steps),
           "--memory", "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=prt_dump.run_env({"PRT_LOSS_FILE": loss_file}),
                       timeout=300)
    out = r.stdout + r.stderr
    rows = {}
    for m in re.finditer(r"^\s*(\d+)\s+(\w+)\s+(\d+)\s+(\d+)\s+(ok|MISMATCH)\s*$", r.stdout, re.M):
        rows[(int(m.group(1)), m.group(2))] = (int(m.group(3)), int(m.group(4)), m.group(5))
    losses = prt_dump.read_losses(loss_file) if os.path.exists(loss_file) else {}
    return dict(losses=losses, world=world, rows=rows, status=r.returncode, out=out, plan=plan)


def stage_elems(parc, plan):
    """{stage: {class: (elements, set of dtypes)}} from `parc lower --emit=ir`."""
    out = subprocess.run([parc, "lower", plan, "--emit=ir"], capture_output=True, text=True, check=True).stdout
    stages, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"stage (\d+):", line)
        if m:
            cur = stages.setdefault(int(m.group(1)), {})
            continue
        m = re.match(r"\s+%\S+\s+(\w+)\s+(\w+)\s+(\d+) x (\d+)\b", line)  # may end in "zero(A)"
        if m and cur is not None:
            n, dtypes = cur.get(m.group(1), (0, set()))
            cur[m.group(1)] = (n + int(m.group(3)) * int(m.group(4)), dtypes | {m.group(2)})
    return stages


def rank_stage(parc, plan, rank):
    """The pipeline stage of a rank: its coordinate on the pp axis (last axis fastest)."""
    mesh = prt_dump.explain(parc, plan)["mesh"]
    stride = 1
    for axis in reversed(mesh):
        if axis["carries"].startswith("pipeline"):
            return rank // stride % axis["size"]
        stride *= axis["size"]
    return 0


def check_memory(parc, name, run, failures):
    if run["status"] != 0:
        failures.append(f"{name}: --memory run exited {run['status']}:\n{run['out'][-3000:]}")
    stages = stage_elems(parc, run["plan"])
    for rank in range(run["world"]):
        for c in CLASSES:
            row = run["rows"].get((rank, c))
            if not row or row[2] != "ok":
                failures.append(f"{name}: rank {rank} {c}: {row[2] if row else 'no row'} "
                                f"(measured {row[0] if row else '?'} B, compiler {row[1] if row else '?'} B)")
        st = stages[rank_stage(parc, run["plan"], rank)]
        for c, size in (("weights", 2), ("grads", 2), ("master", 4)):
            n, dtypes = st.get(c, (0, set()))
            want_dtype = {"bf16"} if size == 2 else {"f32"}
            if dtypes != want_dtype:
                failures.append(f"{name}: {c} buffers are {sorted(dtypes)}, want {sorted(want_dtype)}")
            got = run["rows"].get((rank, c), (None,))[0]
            if got != size * n:
                failures.append(f"{name}: rank {rank} {c}: measured {got} B, want {size} x {n} elements = {size * n} B")


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    parc, examples = os.path.abspath(args[0]), os.path.abspath(args[1])
    steps, keep = 10, None
    if "--steps" in args:
        steps = int(args[args.index("--steps") + 1])
    if "--keep" in args:
        keep = args[args.index("--keep") + 1]
        os.makedirs(keep, exist_ok=True)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        work = keep or tmp
        runs = {}
        for name in ("tiny_single", "tiny_bf16", "tiny_bf16_3d", "tiny_bf16_ring"):
            try:
                runs[name] = run_plan(parc, examples, name, steps, work)
            except (RuntimeError, subprocess.SubprocessError) as e:
                failures.append(f"{name}: {e}")
        ref, one, three, ring = (runs.get(n) for n in ("tiny_single", "tiny_bf16", "tiny_bf16_3d", "tiny_bf16_ring"))
        print(f"{'step':>4} {'fp32':>10} {'bf16':>10} {'rel':>9} {'bf16 3d':>10} {'rel':>9} {'bf16 ring':>10} {'rel':>9}")
        worst = [0.0, 0.0, 0.0]
        for s in range(1, steps + 1):
            a = ref["losses"].get(s) if ref else None
            b = one["losses"].get(s) if one else None
            c = three["losses"].get(s) if three else None
            d = ring["losses"].get(s) if ring else None
            r1 = abs(b - a) / abs(a) if a is not None and b is not None else None
            r3 = abs(c - b) / abs(b) if b is not None and c is not None else None
            rr = abs(d - b) / abs(b) if b is not None and d is not None else None
            fmt = lambda x, f: format(x, f) if x is not None else "-"  # noqa: E731
            print(f"{s:>4} {fmt(a, '10.6f')} {fmt(b, '10.6f')} {fmt(r1, '9.2e')} {fmt(c, '10.6f')} {fmt(r3, '9.2e')} "
                  f"{fmt(d, '10.6f')} {fmt(rr, '9.2e')}")
            if r1 is None or r1 > BF16_VS_FP32:
                failures.append(f"step {s}: tiny_bf16 {b} vs tiny_single {a}: relative {r1} > {BF16_VS_FP32}")
            if r3 is None or r3 > BF16_3D_VS_1:
                failures.append(f"step {s}: tiny_bf16_3d {c} vs tiny_bf16 {b}: relative {r3} > {BF16_3D_VS_1}")
            if rr is None or rr > BF16_3D_VS_1:
                failures.append(f"step {s}: tiny_bf16_ring {d} vs tiny_bf16 {b}: relative {rr} > {BF16_3D_VS_1}")
            worst = [max(worst[0], r1 or 0.0), max(worst[1], r3 or 0.0), max(worst[2], rr or 0.0)]
        print(f"max relative difference: bf16 vs fp32 {worst[0]:.2e} (tolerance {BF16_VS_FP32}), "
              f"3d vs 1 rank {worst[1]:.2e}, ring vs 1 rank {worst[2]:.2e} (tolerance {BF16_3D_VS_1})")
        for name, run in (("tiny_bf16", one), ("tiny_bf16_3d", three), ("tiny_bf16_ring", ring)):
            if not run:
                continue
            l = run["losses"]
            if len(l) != steps or l.get(steps, 1e9) > l.get(1, 0) - FALL:
                failures.append(f"{name}: the loss did not fall by {FALL}: {l.get(1)} -> {l.get(steps)}")
            check_memory(parc, name, run, failures)
            print(f"{name}: {run['world']} rank(s), --memory exit {run['status']}, "
                  f"{sum(1 for v in run['rows'].values() if v[2] == 'ok')} ok rows of {7 * run['world']}")
    for f in failures:
        prt_dump.fail(f)
    print(f"test_bf16: {'FAIL' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
