#!/usr/bin/python3
"""test_ring.py — ring attention's shifts, as listed and as estimated.

usage: test_ring.py PARC EXAMPLES_DIR

tiny_rope_s256_ring4 (seq 256 over cp 4: 64 tokens a rank; 4 query heads over
2 key/value heads of 16 dims; micro_batch 2, 4 micro-batches, 2 layers, fp32):
  - `parc collectives --json`: every shift row moves a chunk's packed keys and
    values, 2 x 64 x 2 x 2 x 16 = 8,192 fp32 elements (32 KiB) a call, over cp
    (group 4) with bus factor 1; per layer and micro-batch 3 forward (the
    chunk passed on while each of the first three steps computes) and 3 + 4
    backward (the keys and values again, and their gradient after each of
    the 4 steps, the last bringing it home), so 24 and 56 calls a step;
  - the all-gather form of the same plan (tiny_rope_s256_cp4) has no shift and
    gathers the qkv instead;
  - `parc explain`: attention names the ring and its 4 steps, and the
    estimate hides part of the shifts under the steps (hidden > 0);
  - tiny_rope_s256_ring4_balanced: explain says every rank does the same
    work, and the estimate's forward is below the split in order's;
  - tiny_rope_ring_tp: no line of explain's communication is negative (the
    shifts' hidden time is not the tensor axis's);
  - the plan's memory ledger holds the two K/V blocks and the two gradient
    blocks (ring.kv.0/1, ring.dkv.0/1, 32 KiB each) in the IR's buffers.
Exits 1 on any failure."""
import json
import re
import subprocess
import sys
import os

P, B, T, KV, HD, LAYERS, MICRO, FP32 = 4, 2, 256, 2, 16, 2, 4, 4
CHUNK = B * (T // P) * 2 * KV * HD


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, check=True).stdout


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    parc, examples = argv[1:]
    ring = os.path.join(examples, "tiny_rope_s256_ring4.par")
    gather = os.path.join(examples, "tiny_rope_s256_cp4.par")
    fails = []
    rows = json.loads(run(parc, "collectives", ring, "--json"))["collectives"]
    shifts = [r for r in rows if r["collective"] == "shift"]
    calls = {}
    for r in shifts:
        if (r["elements"], r["element_bytes"], r["axis"], r["group"], r["bus_factor"], r["op"]) != \
                (CHUNK, FP32, "cp", P, 1, "attn"):
            fails.append(f"shift row {r}: expected {CHUNK} fp32 elements of attn over cp {P}, bus factor 1")
        calls[r["phase"]] = calls.get(r["phase"], 0) + r["calls_per_step"]
    want = {"forward": (P - 1) * LAYERS * MICRO, "backward": (2 * P - 1) * LAYERS * MICRO}
    if calls != want:
        fails.append(f"shift calls per step {calls}, expected {want}")
    if any(r["collective"] == "all-gather" and r["phase"] != "grad-sync" for r in rows):
        fails.append("the ring plan gathers something outside the gradient sync")
    grows = json.loads(run(parc, "collectives", gather, "--json"))["collectives"]
    if any(r["collective"] == "shift" for r in grows) or not any(
            r["collective"] == "all-gather" and r["op"] == "attn" for r in grows):
        fails.append("the all-gather form: expected attention's all-gathers and no shift")
    text = run(parc, "explain", ring)
    if "ring attention over cp: 4 steps a layer" not in text:
        fails.append("explain does not name the ring and its 4 steps")
    m = re.search(r"communication: ([0-9.e+-]+) s exposed, ([0-9.e+-]+) s hidden", text)
    if not m or float(m.group(2)) <= 0:
        fails.append(f"explain: no communication hidden under the ring's steps ({m.group(0) if m else 'no line'})")
    tp_text = run(parc, "explain", os.path.join(examples, "tiny_rope_ring_tp.par"))
    for line in tp_text.splitlines():
        if re.search(r"-[0-9.]+(e[-+][0-9]+)? s exposed", line):
            fails.append(f"tiny_rope_ring_tp: a negative exposed time: {line.strip()}")
    def figure(pattern, text):
        m = re.search(pattern, text)
        return float(m.group(1)) if m else float("nan")
    bal = run(parc, "explain", os.path.join(examples, "tiny_rope_s256_ring4_balanced.par"))
    fwd, fwd_bal = figure(r"by phase: forward ([0-9.e+-]+) s", text), figure(r"by phase: forward ([0-9.e+-]+) s", bal)
    if "gives every rank the same work" not in bal or not fwd_bal < fwd:
        fails.append(f"the balanced split's estimate: forward {fwd_bal} s against the split in order's {fwd} s "
                     "(each step half the blocks)")
    ir = run(parc, "lower", ring, "--emit=ir")
    for name in ("ring.kv.0", "ring.kv.1", "ring.dkv.0", "ring.dkv.1"):
        if not re.search(r"%" + re.escape(name) + r"\b.*\b" + str(CHUNK) + r"\b", ir):
            fails.append(f"the IR has no buffer {name} of {CHUNK} elements")
    for f in fails:
        print("FAIL: " + f)
    print(f"ring: {len(shifts)} shift rows, calls {calls}; {'ok' if not fails else f'{len(fails)} failure(s)'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
