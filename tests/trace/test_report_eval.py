#!/usr/bin/env python3
"""test_report_eval.py PARC EXAMPLES_DIR — `parc report` reads the trace of a
plan that evaluates: a dp 2 tiny GPT with `eval every 2 steps`, traced, gives
a report (exit 0, a measured step beside the predicted one, every rank's
forward/backward items of the last step).  The step span of a step that
evaluated used to start after its evaluation, so its work lay outside it and
the report refused every such trace (the README's text recipe evaluates)."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402

t = Checks("report_eval")
parc, examples, check = t.parc, t.examples, t.check


with tempfile.TemporaryDirectory() as tmp:
    plan = t.tiny_plan(tmp, "eval", "optimizer adamw lr 1e-3; steps 4; seed 1234; eval every 2 steps batches 2;")
    trace = os.path.join(tmp, "t.json")
    r = subprocess.run([parc, "run", plan, "--", "--trace", trace, "--quiet"], capture_output=True, text=True,
                       timeout=300)
    check(r.returncode == 0, f"the traced run with eval exits 0 ({r.returncode}: {r.stderr.strip()[-200:]})")
    r = subprocess.run([parc, "report", trace, "--plan", plan], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"parc report exits 0 ({r.returncode}: {r.stderr.strip()[:300]})")
    check(re.search(r"^  step +\S+ \S+ +\S+ \S+ +\S+x$", r.stdout, re.M) is not None,
          "the report has the predicted and measured step")
    check(len(re.findall(r"^  rank \d \(stage 0\), step 4: .* in its 4 forward/backward items$", r.stdout, re.M)) == 2,
          "both ranks' last step holds its 4 forward/backward items")
sys.exit(t.done())
