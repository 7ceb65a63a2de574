#!/usr/bin/python3
"""test_moe_balance.py — the metrics log's per-expert token counts of a
mixture of experts, and the load-balancing loss moving a skewed router
toward balance.

usage: test_moe_balance.py PARC EXAMPLES_DIR

tiny_moe (4 experts, top 2, 256 tokens a step) with aux_loss 0 and 0.1: one
step saved to a checkpoint, whose router weights (every layer's
mlp.router.w [hidden, experts]) are then made four equal columns (and their
Adam moments zero, the manifest's CRC-32s rewritten), so every token's
logits tie and it goes to experts 0 and 1, the lower ones; then 40 steps
resumed with --log.  Asserts:
  - every step record has expert_tokens, one row of 4 per layer, each row
    summing to batch x seq x top = 512, and the log validates against
    docs/metrics.schema.json (tests/common/metrics_log.py);
  - the first resumed step's counts are exactly [256, 256, 0, 0] in every
    layer (the tie-break), an imbalance (largest count over the mean) of 2;
  - with aux_loss 0.1 the imbalance of the last 5 steps falls below 1.5 and
    below that of the run without it;
  - tiny_moe_dp_pp (dp 2 x pp 2: each data rank routes its own samples, each
    stage holds one layer) and tiny_moe_ep_tp (experts over dp 2, tp 2: both
    tensor ranks route alike) log, 3 steps from initialisation, the same
    expert_tokens every step as tiny_moe on one rank: every rank's counts
    summed, every layer's row present once, a tensor group's counted once;
  - tiny_moe_every (the mixture in layers 1 and 3 of 4) logs null for the
    dense layers 0 and 2, rows of 512 for 1 and 3, the same on one rank and
    over tiny_moe_every_pp's dp 2 x pp 2.
Exits 1 on any failure."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from array import array

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import metrics_log  # noqa: E402
import moe_plan  # noqa: E402
import prt_dump  # noqa: E402

TOKENS, TOPK, EXPERTS, LAYERS, HIDDEN = 256, 2, 4, 2, 64
STEPS = 40


def skew(step_dir):
    """Every router column := column 0 (ties for every token), its moments 0."""
    man_path = os.path.join(step_dir, "manifest.json")
    with open(man_path) as f:
        man = json.load(f)
    rank = man["ranks"][0]
    path = os.path.join(step_dir, rank["file"])
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base, touched = 8 + n, 0
    for name, info in header.items():
        if name == "__metadata__" or ".mlp.router.w" not in name:
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{name}: {info['dtype']}, expected F32")
        a, b = info["data_offsets"]
        x = array("f", bytes(raw[base + a:base + b]))
        if name.endswith((".m", ".v")):
            x = array("f", [0.0] * len(x))
        else:
            x = array("f", [x[(i // EXPERTS) * EXPERTS] for i in range(len(x))])  # [hidden, experts] row-major
        data = x.tobytes()
        raw[base + a:base + b] = data
        rank["tensors"][name]["crc32"] = "%08x" % (zlib.crc32(data) & 0xFFFFFFFF)
        touched += 1
    if touched != 3 * LAYERS:
        raise ValueError(f"{touched} router tensors in the checkpoint, expected {3 * LAYERS}")
    with open(path, "wb") as f:
        f.write(raw)
    with open(man_path, "w") as f:
        json.dump(man, f, indent=1)


def launch(exe, steps, args):
    """One rank of exe for `steps` steps with args; RuntimeError on failure."""
    mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun") or shutil.which("mpiexec")
    if not mpirun:
        raise RuntimeError("mpirun not found (set PARC_MPIRUN)")
    cmd = [mpirun, "-np", "1", exe, "--steps", str(steps), "--quiet"] + args
    r = subprocess.run(cmd, capture_output=True, text=True, env=prt_dump.run_env({}), timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-4000:]}{r.stderr[-4000:]}")


def imbalance(rows):
    return max(max(r) / (sum(r) / len(r)) for r in rows)


def run(parc, examples, work, aux):
    """-> (problems, the step records) of the skewed run with aux_loss `aux`."""
    plan = moe_plan.edited(examples, work, "tiny_moe", "aux_loss 0.01", f"aux_loss {aux}", f"aux{aux}")
    exe, ckpt, log = (os.path.join(work, f"aux{aux}{s}") for s in ("", ".ckpt", ".jsonl"))
    prt_dump.build(parc, plan, exe)
    launch(exe, 1, ["--checkpoint-dir", ckpt])
    skew(os.path.join(ckpt, "step-000000001"))
    launch(exe, 1 + STEPS, ["--checkpoint-dir", ckpt, "--resume", "latest", "--log", log])
    records, problems = metrics_log.read(log, first=2)
    steps = [r for r in records if r.get("record") == "step"]
    for r in steps:
        rows = r.get("expert_tokens")
        if not rows or len(rows) != LAYERS or any(len(x) != EXPERTS or sum(x) != TOKENS * TOPK for x in rows):
            problems.append(f"step {r['step']}: expert_tokens {rows}, expected {LAYERS} rows of {EXPERTS} "
                            f"summing to {TOKENS * TOPK}")
    if len(steps) != STEPS:
        problems.append(f"{len(steps)} step records, expected {STEPS}")
    return problems, steps


def log_counts(parc, examples, work, name, steps):
    """-> the expert_tokens of each step record of `name` run from initialisation."""
    plan, exe, log = os.path.join(examples, name + ".par"), os.path.join(work, name), os.path.join(work, name + ".jsonl")
    prt_dump.build(parc, plan, exe)
    mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun") or shutil.which("mpiexec")
    if not mpirun:
        raise RuntimeError("mpirun not found (set PARC_MPIRUN)")
    world = prt_dump.world_size(prt_dump.explain(parc, plan))
    cmd = [mpirun, "-np", str(world), "--oversubscribe", exe, "--steps", str(steps), "--quiet", "--log", log]
    r = subprocess.run(cmd, capture_output=True, text=True, env=prt_dump.run_env({}), timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-4000:]}{r.stderr[-4000:]}")
    records, problems = metrics_log.read(log, first=1)
    if problems:
        raise ValueError("; ".join(problems))
    return [r.get("expert_tokens") for r in records if r.get("record") == "step"]


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    parc, examples = argv[1:]
    failures = []
    with tempfile.TemporaryDirectory(prefix="parc-moe-balance-") as work:
        runs = {}
        for aux in (0, 0.1):
            try:
                problems, steps = run(parc, examples, work, aux)
            except (RuntimeError, ValueError, OSError, KeyError, subprocess.CalledProcessError) as e:
                problems, steps = [f"{type(e).__name__}: {e}"], []
            failures += [f"aux_loss {aux}: {p}" for p in problems]
            if problems or not steps:
                continue
            first = steps[0]["expert_tokens"]
            if first != [[TOKENS, TOKENS, 0, 0]] * LAYERS:
                failures.append(f"aux_loss {aux}: the skewed router's first step routed {first}, expected "
                                f"{[[TOKENS, TOKENS, 0, 0]] * LAYERS}")
            late = max(imbalance(r["expert_tokens"]) for r in steps[-5:])
            runs[aux] = late
            print(f"aux_loss {aux}: imbalance (largest count / mean) {imbalance(first):.3f} at step "
                  f"{steps[0]['step']}, at most {late:.3f} over steps {steps[-5]['step']}..{steps[-1]['step']}; "
                  f"last step {steps[-1]['expert_tokens']}")
        if len(runs) == 2 and not (runs[0.1] < 1.5 and runs[0.1] < runs[0]):
            failures.append(f"the load-balancing loss did not balance the experts: imbalance {runs[0.1]:.3f} with "
                            f"aux_loss 0.1, {runs[0]:.3f} without (want < 1.5 and below the run without)")
        try:
            one = log_counts(parc, examples, work, "tiny_moe", 3)
            for name in ("tiny_moe_dp_pp", "tiny_moe_ep_tp"):
                four = log_counts(parc, examples, work, name, 3)
                if len(one) != 3 or one != four:
                    failures.append(f"{name} logged expert_tokens {four}, tiny_moe on one rank {one}")
                else:
                    print(f"{name} (4 ranks) logs tiny_moe's expert_tokens in each of 3 steps: {four[-1]}")
        except (RuntimeError, ValueError, OSError, subprocess.CalledProcessError) as e:
            failures.append(f"the 4-rank expert_tokens: {type(e).__name__}: {e}")
        try:
            # the mixture in layers 1 and 3 of 4 (`every 2`): null rows for the
            # dense layers 0 and 2, the mixture rows each summing to 512, alike
            # over the dp 2 x pp 2 ranks of tiny_moe_every_pp and on one rank
            one = log_counts(parc, examples, work, "tiny_moe_every", 3)
            four = log_counts(parc, examples, work, "tiny_moe_every_pp", 3)
            bad = [rows for rows in one
                   if len(rows) != 4 or rows[0] is not None or rows[2] is not None
                   or any(rows[l] is None or sum(rows[l]) != 2 * TOKENS for l in (1, 3))]
            if bad or len(one) != 3 or one != four:
                failures.append(f"every 2: tiny_moe_every logged {one}, tiny_moe_every_pp {four}; expected null "
                                f"for layers 0 and 2 and rows of sum {2 * TOKENS} for 1 and 3, alike")
            else:
                print(f"tiny_moe_every (1 rank) and tiny_moe_every_pp (4 ranks) log {one[-1]}")
        except (RuntimeError, ValueError, OSError, subprocess.CalledProcessError) as e:
            failures.append(f"every 2's expert_tokens: {type(e).__name__}: {e}")
    for f in failures:
        prt_dump.fail(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
