#!/usr/bin/python3
"""test_lr_schedule.py — the learning-rate schedule: closed form, optimizer, layouts.

usage: test_lr_schedule.py PARC EXAMPLES_DIR [--steps N]

Copies EXAMPLES_DIR and gives every tiny_* plan (through common/tiny_train.par) the
warmup-stable-decay schedule SCHEDULE, then asserts:
  - `parc explain tiny_single` shows the schedule's shape in the expected line;
  - the LR that the program prints (1e-5 relative) and writes to its --log file
    (1e-9) for each of 8 steps equals the closed form below, written here
    independently of include/prt_lr.h; the --log file validates against
    docs/metrics.schema.json (tests/common/metrics_log.py), steps 1..8 in order;
  - the optimizer used the LR of step 1 (peak / warmup): AdamW's first update of an
    element is lr * g / (|g| + eps), so with weight decay 0 the largest |update| of
    every tensor of tiny_single is within 1e-4 of lr(1), not of the peak;
  - every layout reproduces tiny_single under the schedule: test_parity.py on the
    copied examples (losses, parameters, initial parameters, step-1 gradients).
Exits 1 on any failure.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prt_dump  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import metrics_log  # noqa: E402

PEAK, MIN, WARMUP, STABLE, DECAY = 1e-3, 1e-4, 2, 1, 3
SCHEDULE = f"lr 1e-3 warmup {WARMUP} steps stable {STABLE} steps cosine to 1e-4 over {DECAY} steps;"
EXPLAIN_LINE = ("  lr schedule     peak 0.001: linear warmup over 2 steps, stable 1 steps, cosine decay to "
                "0.0001 over 3 steps; lr 0.0005 at step 1, 0.0001 at step 10")
LOG_STEPS = 8


def closed_form(step):
    if step <= WARMUP:
        return PEAK * step / WARMUP
    into = step - WARMUP - STABLE
    if into <= 0:
        return PEAK
    p = min(into / DECAY, 1.0)
    return MIN + (PEAK - MIN) * 0.5 * (1 + math.cos(math.pi * p))


def scheduled_examples(examples, work):
    dst = os.path.join(work, "examples")
    shutil.copytree(examples, dst)
    path = os.path.join(dst, "common", "tiny_train.par")
    with open(path) as f:
        text = f.read()
    old = "optimizer adamw lr 1e-3 weight_decay 0.0;"
    if old not in text:
        raise RuntimeError(f"{path}: expected `{old}`")
    with open(path, "w") as f:
        f.write(text.replace(old, "optimizer adamw weight_decay 0.0;\n" + SCHEDULE))
    return dst


def check_logged_lr(exe, problems):
    mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun")
    log = exe + ".jsonl"
    r = subprocess.run([mpirun, "-np", "1", exe, "--steps", str(LOG_STEPS), "--log", log], capture_output=True,
                       text=True, env=prt_dump.run_env(), timeout=300)
    if r.returncode != 0:
        problems.append(f"tiny_single failed ({r.returncode}): {r.stderr[-2000:]}")
        return
    printed = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^step (\d+)/\d+ \| loss \S+ \| lr (\S+) \|",
                                                                       r.stdout, re.M)}
    records = read_log(log, problems)
    for s in range(1, LOG_STEPS + 1):
        want = closed_form(s)
        got, rec = printed.get(s), records.get(s, {})
        ok = got is not None and abs(got - want) <= 1e-5 * want and abs(rec.get("lr", -1) - want) <= 1e-9 * want
        print(f"  step {s}: lr printed {got!s:>10}, logged {rec.get('lr')!s:>22}, closed form {want:.9g}  "
              f"{'ok' if ok else 'FAIL'}")
        if not ok:
            problems.append(f"step {s}: lr printed {got}, logged {rec.get('lr')}, closed form {want:.9g}")


def read_log(path, problems):
    """--log FILE -> {step: record}, validated by tests/common/metrics_log.py against
    docs/metrics.schema.json, steps 1..LOG_STEPS."""
    records, bad = metrics_log.read(path)
    problems.extend(bad)
    steps = {r["step"]: r for r in records if r.get("record") == "step"}
    if sorted(steps) != list(range(1, LOG_STEPS + 1)):
        problems.append(f"{path}: steps {sorted(steps)} for {LOG_STEPS} steps")
    return steps


def check_first_update(exe, work, problems):
    dump = os.path.join(work, "update.dump")
    prt_dump.launch(exe, 1, 1, {"PRT_DUMP_DIR": dump, "PRT_DUMP_STEP": "1"})
    before, after = prt_dump.merge_params(dump, "init_params"), prt_dump.merge_params(dump)
    lr1 = closed_form(1)
    worst = 0.0
    for key in sorted(before):
        step = float(abs(after[key].astype("float64") - before[key].astype("float64")).max())
        worst = max(worst, abs(step / lr1 - 1))
        if abs(step / lr1 - 1) > 1e-4:
            problems.append(f"{key[0]} layer {key[1]}: largest first update {step:.6g}, lr(1) = {lr1:.6g}")
    print(f"  first AdamW update: max over tensors of |max|dp| / lr(1) - 1| = {worst:.2e} "
          f"(lr(1) = {lr1:g}, peak {PEAK:g})")


def main(argv):
    parsed = prt_dump.parse_args(argv, 6, __doc__)
    if parsed is None:
        return 2
    parc, examples, steps = parsed
    problems = []
    with tempfile.TemporaryDirectory(prefix="parc-lr-") as work:
        ex = scheduled_examples(examples, work)
        plan = os.path.join(ex, "tiny_single.par")
        out = subprocess.run([parc, "explain", plan], capture_output=True, text=True, check=True).stdout
        if EXPLAIN_LINE not in out.splitlines():
            problems.append(f"explain shows no `{EXPLAIN_LINE.strip()}`:\n{out}")
        exe = os.path.join(work, "tiny_single")
        prt_dump.build(parc, plan, exe)
        print(f"schedule: {SCHEDULE}")
        check_logged_lr(exe, problems)
        check_first_update(exe, work, problems)
        r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_parity.py"),
                            parc, ex, "--steps", str(steps)], text=True, env=prt_dump.run_env())
        if r.returncode != 0:
            problems.append(f"test_parity.py under the schedule exited {r.returncode}")
    for p in problems:
        prt_dump.fail(p)
    print("lr schedule: " + ("FAIL" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
