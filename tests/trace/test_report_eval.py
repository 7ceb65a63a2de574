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

parc, examples = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
fails = 0


def check(ok, what):
    global fails
    print(("ok    " if ok else "FAIL  ") + what)
    fails += 0 if ok else 1


with tempfile.TemporaryDirectory() as tmp:
    plan = os.path.join(tmp, "eval.par")
    with open(plan, "w") as f:
        f.write(f'include "{examples}/common/tiny_gpt.par";\n'
                f'cluster {{ nodes 1; gpus_per_node 2; include "{examples}/common/tiny_cluster.par"; }}\n'
                "train { batch 8; micro_batch 2; precision fp32; optimizer adamw lr 1e-3; steps 4; seed 1234;\n"
                "  eval every 2 steps batches 2; }\n"
                "mesh { dp 2; }\nlayout { batch -> dp; }\n")
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
print(f"report_eval: {fails} failures")
sys.exit(1 if fails else 0)
