#!/usr/bin/env python3
"""test_val_windows.py PARC EXAMPLES_DIR — the windows an evaluation reads
from a validation file whose length is a multiple of seq, and one token
either side of it.

The tiny GPT (seq T = 32, batch 8, dp 2) evaluates 3 batches (24 samples)
before step 1 and after it, on u16 validation files of 9T - 1, 9T, 9T + 1,
16T - 1, 16T and 16T + 1 random tokens, with every prt_data call dumped
(PRT_DUMP_DIR, PRT_DUMP_DATA_ALL).  The windows are counted here by walking
the file: a window is seq + 1 tokens starting at a multiple of T (tokens its
first T, targets its last T, so consecutive windows share one token), and it
counts when its last token is inside the file; for 9T - 1, 9T, 9T + 1 that
is 8, 8, 9 windows.  Asserts, for each file: every validation sample g
(over both ranks and both evaluations) is the window at (g mod W) x T, with W
the count walked here; the samples use exactly windows 0 .. W - 1 (24
samples, so they wrap past the last window and an off-by-one either way
shows); the evaluations read samples 0 .. 23 and no other, each as often.  A file of 9T tokens has no
window at 8T: its last token would be at index 9T, one past the end."""
import glob
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
from runcheck import Checks  # noqa: E402
import prt_dump  # noqa: E402

t = Checks("val_windows")
parc, examples, check = t.parc, t.examples, t.check
SEQ, BATCH, EVAL_BATCHES = 32, 8, 3


def windows_walked(count):
    """The windows of seq + 1 tokens at multiples of seq that end inside the file."""
    n, start = 0, 0
    while start + SEQ + 1 <= count:
        n += 1
        start += SEQ
    return n


with tempfile.TemporaryDirectory(prefix="parc-val-windows-") as tmp:
    plan = t.tiny_plan(tmp, "val_windows", f"optimizer adamw lr 1e-3; steps 1; seed 1234; eval every 1 steps batches {EVAL_BATCHES};")
    exe = os.path.join(tmp, "val_windows")
    prt_dump.build(parc, plan, exe)
    rng = random.Random(20240520)
    train = os.path.join(tmp, "train.u16")
    np.array([rng.randrange(256) for _ in range(4096)], dtype="<u2").tofile(train)
    mpirun = os.environ.get("PARC_MPIRUN") or "mpirun"
    check(windows_walked(9 * SEQ) == 8 and windows_walked(9 * SEQ + 1) == 9, "the walk counts 8 and 9 windows")
    for count in (9 * SEQ - 1, 9 * SEQ, 9 * SEQ + 1, 16 * SEQ - 1, 16 * SEQ, 16 * SEQ + 1):
        tokens = np.array([rng.randrange(256) for _ in range(count)], dtype="<u2")
        val, dumps = os.path.join(tmp, f"val{count}.u16"), os.path.join(tmp, f"dump{count}")
        tokens.tofile(val)
        W = windows_walked(count)
        # every window the file holds whole, by its content: a sample names its window
        window_of = {tokens[s:s + SEQ + 1].tobytes(): s // SEQ for s in range(0, count - SEQ, SEQ)}
        check(len(window_of) == W, f"{count} tokens: the file's {W} windows are distinct")
        r = subprocess.run([mpirun, "-np", "2", "--oversubscribe", exe, "--data", train, "--val-data", val,
                            "--data-format", "u16"], capture_output=True, text=True, timeout=300,
                           env=prt_dump.run_env({"PRT_DUMP_DIR": dumps, "PRT_DUMP_DATA_ALL": "1"}))
        if not check(r.returncode == 0, f"{count} tokens: the run exits 0 (got {r.returncode}: {r.stderr[-300:]})"):
            continue
        evals = r.stdout.count(f"| {EVAL_BATCHES} batches |")
        check(evals == 2, f"{count} tokens: two evaluations of {EVAL_BATCHES} batches printed (got {evals})")
        used, samples, wrong = {}, {}, []
        for path in sorted(glob.glob(os.path.join(dumps, "data.rank*.bin"))):
            for step, first, toks, targs in prt_dump.read_data(path):
                if step != -1:  # a training step's samples
                    continue
                for b in range(toks.shape[0]):
                    g = first + b
                    window = np.append(toks[b], targs[b][-1]).astype("<u2").tobytes()
                    w = window_of.get(window) if np.array_equal(toks[b][1:], targs[b][:-1]) else None
                    if w != g % W:
                        wrong.append((g, w))
                    used[w] = used.get(w, 0) + 1
                    samples[g] = samples.get(g, 0) + 1
        n = EVAL_BATCHES * BATCH
        check(sorted(samples) == list(range(n)) and len(set(samples.values())) == 1,
              f"{count} tokens: the evaluations read samples 0..{n - 1}, each as often "
              f"(got {sorted(samples.items())[:6]})")
        check(not wrong, f"{count} tokens: every sample g is the window at (g mod {W}) x {SEQ} "
                         f"(wrong (g, window read): {wrong[:8]})")
        check(set(used) == set(range(W)), f"{count} tokens: the evaluations read exactly windows 0..{W - 1} "
                                          f"(read {sorted(used, key=str)})")
        print(f"      {count} tokens ({count / SEQ:.3f} x seq): {W} windows, {n} samples per evaluation")
sys.exit(t.done())
