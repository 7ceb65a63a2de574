#!/usr/bin/env python3
"""test_diverge.py PARC EXAMPLES_DIR — a run whose loss stops being finite
(SGD at lr 10 on the tiny GPT over dp 2) stops every rank at that step with
exit status 4 and one message naming the step and what was not finite; its
metrics log holds no bare NaN (the step's loss or gradient norm, whichever
was not finite, is null, a `diverged` record
follows, and the log validates against docs/metrics.schema.json); and with a
checkpoint every step, the diverged step's checkpoint is never written:
`latest` names the step before it.  Before, the
run trained on with loss -nan to the last step and exited 0."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402
import metrics_log  # noqa: E402

t = Checks("diverge")
parc, examples, check = t.parc, t.examples, t.check


with tempfile.TemporaryDirectory() as tmp:
    plan = t.tiny_plan(tmp, "diverge", "optimizer sgd lr 10; steps 30; seed 1234;")
    log, ck = os.path.join(tmp, "log.jsonl"), os.path.join(tmp, "ck")
    r = subprocess.run([parc, "run", plan, "--", "--log", log, "--checkpoint-dir", ck, "--checkpoint-every", "1",
                        "--quiet"], capture_output=True, text=True, timeout=300)
    m = re.search(r"parc: error: step (\d+): the (loss|gradient norm) is (NaN|[+-]inf): training diverged", r.stderr)
    check(r.returncode == 4, f"the run exits with status 4 (got {r.returncode})")
    check(m is not None, f"one message names the step and what was not finite: {r.stderr.strip()[:300]}")
    check(r.stderr.count("training diverged") == 1, "the message comes once, from rank 0")
    step = int(m.group(1)) if m else -1
    check(1 < step < 30, f"it stopped at step {step}, before the last")
    records, problems = metrics_log.read(log)
    check(not problems, f"the metrics log is valid JSON lines against the schema: {problems[:3]}")
    with open(log) as f:
        text = f.read()
    check("nan" not in text.lower() and "inf" not in text.lower(), "no NaN or infinity token in the log")
    steps = [x for x in records if x.get("record") == "step"]
    key = "loss" if m and m.group(2) == "loss" else "grad_norm"
    check(steps and steps[-1]["step"] == step and steps[-1][key] is None,
          f"the diverged step's record holds {key} null")
    check(all(x["loss"] is not None and x["grad_norm"] is not None for x in steps[:-1]),
          "every earlier step's loss and gradient norm are numbers")
    saved = sorted(int(d.split("-")[-1]) for d in os.listdir(ck) if d.startswith("step-"))
    check(saved and max(saved) == step - 1, f"checkpoints up to step {step - 1}, none of step {step}: {saved[-3:]}")
    path = os.path.join(ck, "latest")
    latest = os.readlink(path) if os.path.islink(path) else open(path).read().strip() if os.path.exists(path) else ""
    digits = re.sub(r"\D", "", os.path.basename(latest.rstrip("/")))
    check(digits != "" and int(digits) == step - 1, f"latest names step {step - 1}: {latest}")
sys.exit(t.done())
