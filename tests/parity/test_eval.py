#!/usr/bin/python3
"""test_eval.py — evaluation gives the same validation loss in every layout.

usage: test_eval.py PARC EXAMPLES_DIR [--steps N]

Copies the examples to a scratch directory, adds `eval every 2 steps batches 2;`
to the `train` section of every parity layout (test_parity.EXPECTED), and runs
each for N steps (default 4) on the same token files (llm.c format, written
here: bytes of the repository's docs as tokens, vocab 256) with --log.  Asserts:
  - the log validates against docs/metrics.schema.json (tests/common/metrics_log.py)
    and has val_loss for step 0 (its own `eval` record) and steps 2, 4, ...;
  - every layout's val_loss equals tiny_single's within relative 1e-5 (the
    parity tolerance), and so do the training losses;
  - evaluating changes nothing of training: tiny_single's training losses with
    and without evaluation are bitwise equal;
  - the validation loss falls from step 0 to the last evaluation;
  - tiny_single saved at step N/2 and resumed logs no step-0 evaluation and
    the same val_loss as the whole run at the later steps;
  - the evaluation runs without dropout: tiny_dropout and tiny_dropout_tp start
    from the weights of tiny_single and tiny_tp (the same layouts without
    dropout), so their step-0 validation loss is theirs bitwise, while their
    training losses (with dropout) differ.
Prints a table; exits 1 on any failure.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prt_dump  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import metrics_log  # noqa: E402
from test_parity import EXPECTED, LOSS_TOL  # noqa: E402

EVAL = "eval every 2 steps batches 2;"


def write_llmc(path, tokens):
    header = np.zeros(256, dtype="<i4")
    header[:3] = (20240520, 1, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes() + np.asarray(tokens, dtype="<u2").tobytes())


def read_log(path):
    train, val = {}, {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec:
                train[rec["step"]] = rec["loss"]
            if "val_loss" in rec:
                val[rec["step"]] = rec["val_loss"]
    return train, val


def run(exe, world, args):
    mpirun = os.environ.get("PARC_MPIRUN") or "mpirun"
    r = subprocess.run([mpirun, "-np", str(world), "--oversubscribe", exe] + args, capture_output=True, text=True,
                       env=prt_dump.run_env(), timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} failed ({r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r.stdout


def main(argv):
    parsed = prt_dump.parse_args(argv, 4, __doc__)
    if parsed is None:
        return 2
    parc, examples, steps = parsed
    root = os.path.dirname(os.path.abspath(examples))
    text = b"".join(open(os.path.join(root, "docs", f), "rb").read() for f in sorted(os.listdir(os.path.join(root, "docs")))
                    if f.endswith(".md"))
    tokens = np.frombuffer(text, dtype=np.uint8)
    failures, rows = [], []
    with tempfile.TemporaryDirectory(prefix="parc-eval-") as work:
        cut = len(tokens) * 9 // 10
        write_llmc(os.path.join(work, "train.bin"), tokens[:cut])
        write_llmc(os.path.join(work, "val.bin"), tokens[cut:])
        plans = os.path.join(work, "examples")
        shutil.copytree(examples, plans)
        data = ["--data", os.path.join(work, "train.bin"), "--val-data", os.path.join(work, "val.bin"),
                "--data-format", "llmc", "--steps", str(steps), "--quiet"]
        ref, runs = None, {}
        for name in EXPECTED:
            plan = os.path.join(plans, name + ".par")
            src = open(plan).read()
            if "train {" not in src:
                failures.append(f"{name}: no `train {{` to add the evaluation to")
                continue
            with open(plan, "w") as f:
                f.write(src.replace("train {", "train { " + EVAL, 1))
            world = prt_dump.world_size(prt_dump.explain(parc, plan))
            exe = os.path.join(work, name)
            prt_dump.build(parc, plan, exe)
            log = os.path.join(work, name + ".jsonl")
            out = run(exe, world, data + ["--log", log])
            train, val = read_log(log)
            runs[name] = (train, val)
            want = [0] + list(range(2, steps + 1, 2)) + ([steps] if steps % 2 else [])
            problems = metrics_log.read(log)[1]  # docs/metrics.schema.json
            if sorted(val) != want:
                problems.append(f"val_loss at steps {sorted(val)}, expected {want}")
            if sorted(train) != list(range(1, steps + 1)):
                problems.append(f"training loss at steps {sorted(train)}")
            if "val_loss" in out:
                problems.append("--quiet printed the evaluation")
            if ref is None:
                ref = (train, val)
                if val and not val[max(val)] < val[0]:
                    problems.append(f"the validation loss does not fall: {val}")
                # the same plan without the evaluation: training must not notice it
                with open(plan, "w") as f:
                    f.write(src)
                prt_dump.build(parc, plan, exe + ".plain")
                log_plain = os.path.join(work, name + ".plain.jsonl")
                no_val = data[:2] + data[4:]  # --val-data for a plan without eval is an error
                run(exe + ".plain", world, no_val + ["--log", log_plain])
                plain, plain_val = read_log(log_plain)
                if plain != train:
                    problems.append(f"training losses change with evaluation: {plain} vs {train}")
                if plain_val:
                    problems.append("a plan without `eval` logged val_loss")
                # a resumed run continues the evaluations: none before its first step, the same values after
                ck = os.path.join(work, "ck")
                with open(plan, "w") as f:
                    f.write(src.replace("train {", "train { " + EVAL, 1))
                half = [a if a != str(steps) else str(steps // 2) for a in data]
                run(exe, world, half + ["--checkpoint-dir", ck, "--save-on-exit"])
                log_resumed = os.path.join(work, name + ".resumed.jsonl")
                run(exe, world, data + ["--checkpoint-dir", ck, "--resume", "latest", "--log", log_resumed])
                resumed_train, resumed_val = read_log(log_resumed)
                later = {s: v for s, v in val.items() if s > steps // 2}
                if resumed_val != later or sorted(resumed_train) != list(range(steps // 2 + 1, steps + 1)):
                    problems.append(f"resumed at step {steps // 2}: val_loss {resumed_val}, expected {later}")
            vdiff = max((abs(val[s] - ref[1][s]) / abs(ref[1][s]) for s in val if s in ref[1]), default=0.0)
            tdiff = max((abs(train[s] - ref[0][s]) / abs(ref[0][s]) for s in train if s in ref[0]), default=0.0)
            if vdiff > LOSS_TOL:
                problems.append(f"val_loss differs from tiny_single by {vdiff:.3g} (relative): {val} vs {ref[1]}")
            if tdiff > LOSS_TOL:
                problems.append(f"training loss differs from tiny_single by {tdiff:.3g}")
            for p in problems:
                print(f"FAIL: {name}: {p}", file=sys.stderr)
            failures += problems
            rows.append((name, world, vdiff, tdiff, " ".join(f"{val[s]:.6f}" for s in sorted(val)),
                         "FAIL" if problems else "ok"))
        for name, same in [("tiny_dropout", "tiny_single"), ("tiny_dropout_tp", "tiny_tp")]:
            if same not in runs:
                continue
            base = runs[same]
            plan = os.path.join(plans, name + ".par")
            src = open(plan).read()
            with open(plan, "w") as f:
                f.write(src.replace("train {", "train { " + EVAL, 1))
            world = prt_dump.world_size(prt_dump.explain(parc, plan))
            exe = os.path.join(work, name)
            prt_dump.build(parc, plan, exe)
            log = os.path.join(work, name + ".jsonl")
            run(exe, world, data + ["--log", log])
            train, val = read_log(log)
            problems = []
            if val.get(0) != base[1].get(0):
                problems.append(f"step-0 val_loss {val.get(0)} is not {same}'s {base[1].get(0)}: "
                                "the evaluation dropped out")
            if train.get(1) is None or train.get(1) == base[0].get(1):
                problems.append(f"step-1 training loss {train.get(1)} equals {same}'s: no dropout in training")
            for p in problems:
                print(f"FAIL: {name}: {p}", file=sys.stderr)
            failures += problems
            rows.append((name, world, abs(val.get(0, 0) - base[1][0]) / abs(base[1][0]),
                         abs(train.get(1, 0) - base[0][1]) / abs(base[0][1]),
                         " ".join(f"{val[s]:.6f}" for s in sorted(val)), "FAIL" if problems else "ok"))
    print(f"validation loss over {steps} steps, `{EVAL}` (tolerance {LOSS_TOL:g} relative)")
    print(f"{'layout':<20}{'ranks':>6}{'val rel diff':>14}{'loss rel diff':>15}  {'val_loss at 0, 2, ...':<40}")
    for name, world, vd, td, curve, verdict in rows:
        print(f"{name:<20}{world:>6}{vd:>14.2e}{td:>15.2e}  {curve:<40}{verdict}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
