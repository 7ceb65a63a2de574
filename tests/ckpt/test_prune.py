#!/usr/bin/env python3
"""test_prune.py PARC EXAMPLES_DIR — a run with --checkpoint-dir alone saves its
last step; --checkpoint-keep keeps the checkpoints
written last, not the highest step numbers.  A first run of tiny_single saves
steps 1..6; a fresh run of 3 steps into the same directory with
--checkpoint-keep 2 must keep its own steps 2 and 3 (the newest writes),
remove every older one, point `latest` at step 3, and resume from it; and
`parc export DIR/latest` exports what `parc export DIR` does.
Before, the fresh run deleted each checkpoint it had just written (the old
steps 4..6 ranked higher) and `latest` named a deleted directory."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402

t = Checks("prune")
parc, check = t.parc, t.check
plan = os.path.join(t.examples, "tiny_single.par")


def run(*args):
    r = subprocess.run([parc, "run", plan, "--", "--quiet", *args], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def steps_in(ck):
    return sorted(int(m.group(1)) for d in os.listdir(ck) if (m := re.fullmatch(r"step-0*(\d+)", d)))


def latest(ck):
    path = os.path.join(ck, "latest")
    name = os.readlink(path) if os.path.islink(path) else open(path).read().strip() if os.path.exists(path) else ""
    m = re.search(r"(\d+)$", name.rstrip("/"))
    return int(m.group(1)) if m else None


with tempfile.TemporaryDirectory() as tmp:
    # --checkpoint-dir alone saves the last step (Megatron-LM's and torchtitan's rule)
    alone = os.path.join(tmp, "alone")
    rc, out = run("--steps", "3", "--checkpoint-dir", alone)
    check(rc == 0 and steps_in(alone) == [3] and latest(alone) == 3,
          f"--checkpoint-dir alone saves the last step: {steps_in(alone) if os.path.isdir(alone) else 'nothing'}")
    ck = os.path.join(tmp, "ck")
    rc, out = run("--steps", "6", "--checkpoint-dir", ck, "--checkpoint-every", "1")
    check(rc == 0 and steps_in(ck) == [1, 2, 3, 4, 5, 6], f"a first run saves steps 1..6: {steps_in(ck)} ({rc})")
    rc, out = run("--steps", "3", "--checkpoint-dir", ck, "--checkpoint-every", "1", "--checkpoint-keep", "2")
    check(rc == 0, f"a fresh 3-step run into the same directory exits 0 ({rc}: {out.strip()[-200:]})")
    check(steps_in(ck) == [2, 3], f"it keeps its own newest two, steps 2 and 3: {steps_in(ck)}")
    check(latest(ck) == 3, f"latest names step 3: {latest(ck)}")
    rc, out = run("--steps", "4", "--checkpoint-dir", ck, "--resume", "latest", "--checkpoint-keep", "2")
    check(rc == 0, f"--resume latest continues from it ({rc}: {out.strip()[-200:]})")
    # `parc export DIR/latest` (the README's form) exports what `parc export DIR` does
    files = []
    for src in (ck, os.path.join(ck, "latest")):
        dst = os.path.join(tmp, f"m{len(files)}.safetensors")
        r = subprocess.run([parc, "export", src, "-o", dst, "--names", "parc"], capture_output=True, text=True)
        check(r.returncode == 0, f"parc export {os.path.basename(src)} exits 0 ({r.returncode}: {r.stderr.strip()})")
        files.append(open(dst, "rb").read() if r.returncode == 0 else b"")
    check(files[0] and files[0] == files[1], "both exports are the same file")
sys.exit(t.done())
