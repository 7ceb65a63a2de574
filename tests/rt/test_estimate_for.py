#!/usr/bin/env python3
"""test_estimate_for.py PARC EXAMPLES_DIR — the end of a run says which machine
the estimate beside the measurement is for, in its last lines and in the
metrics log's summary (`estimate_for`): a cluster as written ("the plan's
cluster": not this machine, naming it and `parc calibrate`); one whose
`calibrated "NAME";` names this machine, as the first run printed it ("this
machine"); one calibrated on another ("another machine", naming both)."""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402

t = Checks("estimate_for")
parc, examples, check = t.parc, t.examples, t.check


def run(tmp, name, calibrated):
    plan = t.tiny_plan(tmp, name, "optimizer adamw lr 1e-3; steps 2;")
    if calibrated is not None:
        text = open(plan).read().replace("gpus_per_node 2;", f'gpus_per_node 2; calibrated "{calibrated}";')
        open(plan, "w").write(text)
    log = os.path.join(tmp, name + ".jsonl")
    r = subprocess.run([parc, "run", plan, "--log", log], capture_output=True, text=True, timeout=300)
    summary = [json.loads(x) for x in open(log) if '"summary"' in x] if os.path.exists(log) else []
    return r, summary[0] if summary else {}


with tempfile.TemporaryDirectory() as tmp:
    r, s = run(tmp, "written", None)
    m = re.search(r"^parc: the estimate is for the plan's cluster as written, not this machine \((.+)\): "
                  r"`parc calibrate` measures this one", r.stdout, re.M)
    check(r.returncode == 0 and m is not None, f"a cluster as written: the run names this machine and parc calibrate "
          f"({r.returncode}: {r.stdout[-400:]})")
    check(s.get("estimate_for") == "the plan's cluster", f"... and its summary says so ({s.get('estimate_for')})")
    here = m.group(1) if m else "?"
    check(re.fullmatch(r"cpu .+, \d+ cores?", here) is not None, f"this machine's name: {here}")
    r, s = run(tmp, "here", here)
    check(r.returncode == 0 and f"parc: the estimate is for this machine ({here}): the plan's cluster was "
          "calibrated on it" in r.stdout and s.get("estimate_for") == "this machine",
          f"calibrated on this machine: said so ({s.get('estimate_for')}: {r.stdout[-300:]})")
    r, s = run(tmp, "there", "cpu Some Other Processor, 64 cores")
    check(r.returncode == 0 and "calibrated on (cpu Some Other Processor, 64 cores), not this one (" + here + ")"
          in r.stdout and s.get("estimate_for") == "another machine",
          f"calibrated elsewhere: both machines named ({s.get('estimate_for')}: {r.stdout[-300:]})")
sys.exit(t.done())
