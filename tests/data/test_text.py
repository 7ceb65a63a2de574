#!/usr/bin/python3
"""test_text.py — training on real text: tokenize, train, the validation loss falls.

usage: test_text.py PARC EXAMPLES_DIR [--steps N]

tools/tokenize.py trains a 512-piece BPE (examples/gpt_text.par's vocab) on
tests/data/genesis_kjv.txt (the Book of Genesis, King James Version, 1611: public
domain; the text of Debian's bible-kjv-text without verse numbers) and writes
llm.c train/validation files; gpt_text (2 data-parallel ranks) trains N steps
(default 150) on them with --log.  Asserts: the tokenizer's files hold what
its log says; the validation loss is logged before step 1 and every 50 steps;
the last one is below BOUND (0.6) x the first.  Measured here: 6.2425 at step 0,
3.6661 at 50, 3.4017 at 100, 3.2617 at 150 (0.523 of the start: the margin to
the bound is 0.08), 3.0066 at 300 (0.482).  The samples are a pure function of
the seed, so the curve is the same on every run of the same build.  Exits 1
on any failure.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import prt_dump  # noqa: E402

BOUND = 0.6


def main(argv):
    parsed = prt_dump.parse_args(argv, 150, __doc__)
    if parsed is None:
        return 2
    parc, examples, steps = parsed
    root = os.path.dirname(os.path.abspath(examples))
    plan = os.path.join(examples, "gpt_text.par")
    text = os.path.join(root, "tests", "data", "genesis_kjv.txt")
    failures = []
    with tempfile.TemporaryDirectory(prefix="parc-text-") as work:
        r = subprocess.run([sys.executable, os.path.join(root, "tools", "tokenize.py"), text, work, "--plan", plan,
                            "--parc", parc], capture_output=True, text=True)
        print(r.stdout.strip())
        if r.returncode != 0:
            print(f"FAIL: tokenize.py exit {r.returncode}: {r.stderr}", file=sys.stderr)
            return 1
        counts = dict(re.findall(r"^(\w+)\.bin: (\d+) tokens", r.stdout, re.M))
        for name in ("train", "val"):
            size = os.path.getsize(os.path.join(work, name + ".bin"))
            if size != 1024 + 2 * int(counts.get(name, -1)):
                failures.append(f"{name}.bin: {size} bytes for {counts.get(name)} tokens")
        exe = os.path.join(work, "gpt_text")
        prt_dump.build(parc, plan, exe)
        log = os.path.join(work, "log.jsonl")
        mpirun = os.environ.get("PARC_MPIRUN") or "mpirun"
        cmd = [mpirun, "-np", "2", "--oversubscribe", exe, "--steps", str(steps), "--quiet", "--log", log,
               "--data", os.path.join(work, "train.bin"), "--val-data", os.path.join(work, "val.bin")]
        r = subprocess.run(cmd, capture_output=True, text=True, env=prt_dump.run_env(), timeout=900)
        print(r.stdout.strip()[-500:])
        if r.returncode != 0:
            print(f"FAIL: training exit {r.returncode}:\n{r.stderr[-3000:]}", file=sys.stderr)
            return 1
        val = {}
        with open(log) as f:
            for line in f:
                rec = json.loads(line)
                if "val_loss" in rec:
                    val[rec["step"]] = rec["val_loss"]
        want = sorted({0, steps} | set(range(50, steps + 1, 50)))
        if sorted(val) != want:
            failures.append(f"val_loss at steps {sorted(val)}, expected {want}")
        if 0 in val and steps in val:
            ratio = val[steps] / val[0]
            print("step  val_loss")
            for s in sorted(val):
                print(f"{s:>4}  {val[s]:.4f}")
            print(f"val_loss {val[0]:.4f} -> {val[steps]:.4f} after {steps} steps: {ratio:.3f} of the start "
                  f"(bound {BOUND})")
            if not ratio < BOUND:
                failures.append(f"the validation loss fell only to {ratio:.3f} of its start (bound {BOUND})")
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
