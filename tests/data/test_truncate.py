#!/usr/bin/env python3
"""test_truncate.py PARC EXAMPLES_DIR — a token file truncated while a run
reads it ends the job with a message naming the file (exit status 2), not
with SIGBUS inside the data reader, Open MPI's raw backtrace and exit 135."""
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402
import time

t = Checks("truncate")
parc, examples, check = t.parc, t.examples, t.check


with tempfile.TemporaryDirectory() as tmp:
    data = os.path.join(tmp, "tokens.u16")
    rng = random.Random(7)
    with open(data, "wb") as f:  # 4 MiB of u16 tokens below the tiny GPT's vocab of 256
        f.write(bytes(b for _ in range(1 << 21) for b in (rng.randrange(256), 0)))
    plan = t.tiny_plan(tmp, "long", "optimizer adamw lr 1e-3; steps 1000000;")
    p = subprocess.Popen([parc, "run", plan, "--", "--data", data, "--data-format", "u16"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    started = False
    out = []
    deadline = time.time() + 120
    for line in p.stdout:  # wait for the first steps, then cut the file under the running job
        out.append(line)
        if line.startswith("step 3/"):
            started = True
            os.truncate(data, 0)
            break
        if time.time() > deadline:
            break
    check(started, "the run trained 3 steps on the file")
    try:
        rest, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, _ = p.communicate()
        check(False, "the job ended within 120 s of the truncation")
    text = "".join(out) + (rest or "")
    check(p.returncode == 2, f"parc run exits 2 (got {p.returncode})")
    check(f"error: --data {data}: the file shrank while the run read it" in text,
          f"a message names the file: {[l for l in text.splitlines() if 'error' in l][:3]}")
    check("Bus error" not in text and "SIGBUS" not in text, "no raw SIGBUS report")
sys.exit(t.done())
