#!/usr/bin/python3
"""test_moe_capacity.py — a mixture of experts' `capacity` under expert parallelism.

usage: test_moe_capacity.py PARC EXAMPLES_DIR

tiny_moe_ep (4 experts over dp 2, top 2, 64 tokens a micro-batch: a balanced
share of 128 rows a rank) with `capacity C` added to its `mlp moe`:
  - C = 1.5: explain says the experts' buffers hold 192 rows; 6 steps give
    tiny_moe's losses on one rank (relative 1e-6) with memory equal to the
    ledger (--memory), a third less workspace than the dropless bound's 256
    rows would take;
  - C = 1.0: the first step routes more than 128 rows to a rank, and the run
    stops with a non-zero status and the message naming the rows, the
    buffers and `capacity`, never a wrong step.
Exits 1 on any failure."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import moe_plan  # noqa: E402
import prt_dump  # noqa: E402


def plan_with(examples, work, capacity):
    return moe_plan.edited(examples, work, "tiny_moe_ep", "aux_loss 0.01;", f"aux_loss 0.01 capacity {capacity};",
                           f"ep{capacity}")


def run(exe, world, work, name, extra):
    mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun")
    losses = os.path.join(work, name + ".loss")
    cmd = [mpirun, "-np", str(world), "--oversubscribe", "-x", "PRT_LOSS_FILE", exe, "--steps", "6", "--quiet"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, env=prt_dump.run_env({"PRT_LOSS_FILE": losses}),
                       timeout=300)
    curve = prt_dump.read_losses(losses) if r.returncode == 0 else {}
    return r, [curve[k] for k in sorted(curve)]


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    parc, examples = argv[1:]
    fails = []
    with tempfile.TemporaryDirectory(prefix="parc-moe-capacity-") as work:
        ref = os.path.join(work, "ref")
        prt_dump.build(parc, os.path.join(examples, "tiny_moe.par"), ref)
        r, want = run(ref, 1, work, "ref", [])
        if r.returncode != 0:
            fails.append(f"tiny_moe failed ({r.returncode}): {r.stderr[-2000:]}")
        p15 = plan_with(examples, work, 1.5)
        out = subprocess.run([parc, "explain", p15], capture_output=True, text=True).stdout
        if "hold 192 rows, capacity 1.5 x the balanced 128" not in out:
            fails.append("explain of capacity 1.5 does not say the buffers hold 192 rows:\n" +
                         "\n".join(l for l in out.splitlines() if "expert parallel" in l))
        exe = os.path.join(work, "ep15")
        prt_dump.build(parc, p15, exe)
        r, got = run(exe, 2, work, "ep15", ["--memory"])
        if r.returncode != 0:
            fails.append(f"capacity 1.5 failed ({r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
        elif want and (len(got) != len(want) or any(abs(a - b) > 1e-6 * abs(b) for a, b in zip(got, want))):
            fails.append(f"capacity 1.5 losses {got}, tiny_moe on one rank {want}")
        else:
            print(f"capacity 1.5: 6 steps of tiny_moe's losses ({got[-1]:.6f} last), memory equal to the ledger")
        exe = os.path.join(work, "ep10")
        prt_dump.build(parc, plan_with(examples, work, 1.0), exe)
        r, _ = run(exe, 2, work, "ep10", [])
        said = re.search(r"brings (\d+) routed rows, more than the 128 its experts' buffers hold; the plan's "
                         r"`mlp moe \.\.\. capacity` bounds them", r.stdout + r.stderr)
        if r.returncode == 0 or not said or int(said.group(1)) <= 128:
            fails.append(f"capacity 1.0: exit {r.returncode}, expected a stop naming the overflow:\n"
                         f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
        else:
            print(f"capacity 1.0: stopped with exit {r.returncode}: {said.group(1)} rows for 128")
    for f in fails:
        prt_dump.fail(f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
