#!/usr/bin/env bash
# The counts explain and check report, held against their definitions: the
# batch hint of a schedule that needs more micro-batches names batches that
# satisfy it, `explain --verbose` states the MFU numerator's formula, and the
# fit advice names a layout that fits by its own `explain`.
set -u
parc=$(realpath "$1"); examples=$(realpath "$2")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# plan BATCH SCHEDULE: 8 layers over 4 pipeline stages, micro_batch 1, dp 1
plan() {
    cat <<PAR
model m { vocab 256; seq 32; hidden 64; heads 4; ffn 256; layers 8; embed; repeat layers { block gpt2; } norm layer; head untied; loss cross_entropy; }
cluster { nodes 1; gpus_per_node 4; include "$examples/common/tiny_cluster.par"; }
train { batch $1; micro_batch 1; precision fp32; optimizer adamw lr 1e-3; }
mesh { pp 4; }
layout { layers -> pp schedule $2; }
PAR
}
# hint BATCH SCHEDULE WANT: the schedule's error carries the hint WANT
hint() {
    n=$((n + 1))
    plan "$1" "$2" > "$tmp/p.par"
    local out
    out=$("$parc" check "$tmp/p.par" --diagnostics-format json 2>&1)
    if ! printf '%s\n' "$out" | grep -qF "\"hint\": \"$3\""; then
        fail "batch $1, $2: hint is not \"$3\":"; printf '%s\n' "$out" | head -5
    fi
}
hint 6 "interleaved 2" "batch 4 or 8 would (a multiple of stages × micro_batch × dp = 4)"
hint 10 "interleaved 2" "batch 8 or 12 would (a multiple of stages × micro_batch × dp = 4)"
hint 2 "interleaved 2" "raise batch to 4 (stages × micro_batch × dp)"
hint 3 "1f1b" "raise batch to 4 (stages × micro_batch × dp)"
# each hinted batch passes check
for b in 4 8 12; do
    n=$((n + 1)); plan "$b" "interleaved 2" > "$tmp/p.par"
    "$parc" check "$tmp/p.par" > /dev/null 2>&1 || fail "batch $b, interleaved 2: the hinted batch does not pass check"
done

# explain --verbose states the MFU numerator: 6 x (parameters less the
# embedding and position tables, plus the head's matmul) x tokens + attention
n=$((n + 1))
out=$("$parc" explain "$examples/tiny_single.par" --verbose 2>&1)
# tiny_gpt: 234,880 parameters less wte 256 x 64 and wpe 32 x 64 (216,448); the untied head is kept
want="model FLOPs = 6 x 2.164e+05 parameters (all but the embedding and position tables, plus the head's matmul weight) x 256 tokens + attention 12 x layers x seq x hidden = 9.83e+04 per token"
printf '%s\n' "$out" | grep -qF "$want" || { fail "explain --verbose: no \"$want\""; printf '%s\n' "$out" | grep "model FLOPs"; }
n=$((n + 1))
json=$("$parc" explain "$examples/tiny_single.par" --json 2>&1)
/usr/bin/python3 - "$json" <<'PY' || fail "explain --json: model_flops_per_step is not 6 x 216448 x 256 + 98304 x 256"
import json, sys
d = json.loads(sys.argv[1])
want = 6 * (234880 - 256 * 64 - 32 * 64) * 8 * 32 + 12 * 4 * 32 * 64 * 8 * 32
got = d["model_flops_per_step"]
sys.exit(0 if abs(got - want) <= 1e-6 * want else 1)
PY
# the fit advice names a layout that fits by its own explain: Llama-2 7B on one
# 80 GiB GPU (150 GiB) fits no ZeRO, recompute or micro_batch change of its one
# GPU; the advice is two GPUs in tensor parallelism with sequence parallelism,
# and with selective recompute: without it the ledger (75.6 GiB) fits only
# with 0.4 GiB to spare beside the GPU's 4 GiB reserve, and the advice prefers
# a layout that leaves a tenth of the GPU
n=$((n + 1))
out=$("$parc" check "$examples/llama7b_1gpu.par" 2>&1)
want="no layout of these GPUs fits; on 1 node of 2 GPUs: pp 1 dp 1 tp 2, micro_batch 1, zero 0, sp, recompute selective -> 59.6 GiB per GPU (fits, 79.5% with the reserve)"
printf '%s\n' "$out" | grep -qF "$want" || { fail "llama7b_1gpu: the advice lacks \"$want\""; printf '%s\n' "$out" | tail -4; }
sed -e 's/gpus_per_node 1;/gpus_per_node 2;/' -e 's/^mesh { dp 1; }/mesh { tp 2; }/' \
    -e 's/^  batch -> dp;/  heads -> tp; ffn -> tp; vocab -> tp; sequence_parallel over tp; recompute selective;/' \
    "$examples/llama7b_1gpu.par" > "$tmp/advised.par"
n=$((n + 1))
out=$(cd "$examples" && "$parc" explain "$tmp/advised.par" 2>&1); status=$?
if [ "$status" != 0 ] || ! printf '%s\n' "$out" | grep -qE "^  total .* 59\.6 GiB +\+ reserve 4\.0 GiB of 80\.0 GiB \(79\.5%\) fits"; then
    fail "the advised layout does not explain at 59.6 GiB + the 4 GiB reserve, fitting (exit $status)"; printf '%s\n' "$out" | grep -E "total|error" | head -4
fi
# ... and its ledger plus the reserve is within the GPU by the JSON report's own numbers, with no warning from check
n=$((n + 1))
json=$(cd "$examples" && "$parc" explain "$tmp/advised.par" --json 2>/dev/null)
/usr/bin/python3 - "$json" <<'PY' || fail "the advised layout's ledger + reserve is not within the GPU's memory by explain --json"
import json, sys
d = json.loads(sys.argv[1])
peak, reserve, cap = d["peak_memory_bytes"], d["gpu_reserve_bytes"], d["gpu_memory_bytes"]
ok = reserve == 4 * 2**30 and peak + reserve <= 0.9 * cap and d["fits"] and all(s["memory"]["fits"] for s in d["stages"])
sys.exit(0 if ok else 1)
PY
n=$((n + 1))
out=$(cd "$examples" && "$parc" check "$tmp/advised.par" 2>&1); status=$?
if [ "$status" != 0 ] || printf '%s\n' "$out" | grep -q "warning"; then
    fail "the advised layout does not pass check without a warning (exit $status)"; printf '%s\n' "$out" | head -3
fi
echo "counting: $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
