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
    blocks and the arriving gradient (ring.kv.0/1, ring.dkv.0/1, ring.dkv.in, 32 KiB each) in
    the IR's buffers;
  - Llama 3 70B at 131,072 tokens over cp 16 x tp 8 (llama3_70b_128k: pp 4,
    interleaved 2, micro_batch 1, bf16, flash): a middle stage's activations
    equal the bytes counted by hand, per layer and micro-batch of s = 131,072
    / 16 = 8,192 tokens: with full recomputation (the example) the layer's
    input, 2 s h; without it and with ring attention, 2 bytes x s x (4 h: the
    input, the first norm's output, the attention residual, the second norm's
    output; (64 + 2 x 8) x 128 / 8: the rotated qkv; 64 x 128 / 8: attention's
    output; 2 x 28,672 / 8: the up projection; 28,672 / 8: SwiGLU's output)
    + 4 bytes x s x (2 norms' rstd + 64 / 8 heads' logsumexp), times 9 micro-
    batches in flight x 10 layers a chunk; the layers' inputs are the
    residual stream's slots, 9 x (10 + 1) with each chunk's output;
  - llama3_70b_128k_ring with `zero 1 over cp;`: a middle stage's optimizer
    state is a 16th of the plan's without it, its weights whole.
Exits 1 on any failure."""
import json
import re
import subprocess
import sys
import os
import tempfile

P, B, T, KV, HD, LAYERS, MICRO, FP32 = 4, 2, 256, 2, 16, 2, 4, 4
CHUNK = B * (T // P) * 2 * KV * HD


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, check=True).stdout


def cp_memory(parc, examples):
    """The activations of stage 1 of llama3_70b_128k, with and without full
    recomputation (the latter with ring attention), against the hand count."""
    fails = []
    S, CP, TP, H, HEADS, KV, HD, F = 131072, 16, 8, 8192, 64, 8, 128, 28672
    slots, layers = 9, 10  # stage 1: 9 micro-batches in flight (interleaved 1F1B), 10 layers a chunk
    s = S // CP
    stream = slots * (layers + 1) * 2 * s * H  # the residual stream's slots: each layer's input and the chunk's end
    per_layer = 2 * s * (4 * H + (HEADS + 2 * KV) * HD // TP + HEADS * HD // TP + 2 * F // TP + F // TP) \
        + 4 * s * (2 + HEADS // TP)
    want = {"recompute full (the example)": stream,
            "ring attention, nothing recomputed": stream + slots * layers * (per_layer - 2 * s * H)}
    text = open(os.path.join(examples, "llama3_70b_128k.par")).read()
    ring = text.replace("seq -> cp;", "seq -> cp;\n  cp_comm ring;").replace("recompute full;", "")
    if ring == text or "recompute" in ring.split("layout", 1)[1]:
        return ["llama3_70b_128k: the test cannot find its `seq -> cp;` and `recompute full;`"]
    with tempfile.TemporaryDirectory() as tmp:
        for (what, bytes_), plan_text in zip(want.items(), (text, ring)):
            path = os.path.join(tmp, "plan.par")
            with open(path, "w") as f:
                f.write(plan_text)
            out = subprocess.run([parc, "explain", path, "--json"], capture_output=True, text=True).stdout
            stage = json.loads(out)["stages"][1]
            got = stage["memory"]["activations"]
            if (stage["in_flight_peak"], stage["layers"]) != (slots, 2 * layers) or got != bytes_:
                fails.append(f"llama3_70b_128k, {what}: stage 1 activations {got} B ({stage['in_flight_peak']} in "
                             f"flight, {stage['layers']} layers), counted by hand {bytes_} B")
            else:
                print(f"llama3_70b_128k, {what}: stage 1 activations {got} B = the hand count")
    # ZeRO-1 over the context axis (no data axis): the optimizer state a 16th
    ring_plan = os.path.join(examples, "llama3_70b_128k_ring.par")
    text = open(ring_plan).read()
    zero = text.replace("seq -> cp;", "seq -> cp;\n  zero 1 over cp;")
    with tempfile.TemporaryDirectory() as tmp:
        got = []
        for plan_text in (text, zero):
            path = os.path.join(tmp, "plan.par")
            with open(path, "w") as f:
                f.write(plan_text)
            out = subprocess.run([parc, "explain", path, "--json"], capture_output=True, text=True).stdout
            got.append(json.loads(out)["stages"][1]["memory"])
    share = got[1]["optimizer"] / got[0]["optimizer"] if got[0]["optimizer"] else 0
    if zero == text or abs(share * CP - 1) > 1e-3 or got[1]["weights"] != got[0]["weights"]:
        fails.append(f"llama3_70b_128k_ring with zero 1 over cp: optimizer {got[1]['optimizer']} B against "
                     f"{got[0]['optimizer']} B without (share {share:.5f}, want 1/{CP}), weights "
                     f"{got[1]['weights']} against {got[0]['weights']}")
    else:
        print(f"llama3_70b_128k_ring, zero 1 over cp: stage 1 optimizer {got[1]['optimizer']} B = 1/{CP} of "
              f"{got[0]['optimizer']} B, total {got[1]['total']} B against {got[0]['total']} B")
    return fails


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
    if "in flight: 5 blocks of a chunk's keys and values, 32.0 KiB each" not in text:
        fails.append("explain does not state the ring's 5 blocks of 32 KiB in flight")
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
    fails += cp_memory(parc, examples)
    ir = run(parc, "lower", ring, "--emit=ir")
    for name in ("ring.kv.0", "ring.kv.1", "ring.dkv.0", "ring.dkv.1", "ring.dkv.in"):
        if not re.search(r"%" + re.escape(name) + r"\b.*\b" + str(CHUNK) + r"\b", ir):
            fails.append(f"the IR has no buffer {name} of {CHUNK} elements")
    for f in fails:
        print("FAIL: " + f)
    print(f"ring: {len(shifts)} shift rows, calls {calls}; {'ok' if not fails else f'{len(fails)} failure(s)'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
