#!/usr/bin/env bash
# Compiler speed: start-up, `parc --version` and `parc check` of the largest
# example with parc (no LLVM) beside parc-codegen (the same driver linked with
# LLVM), alternating in the same run (median of PAIRS each, and their ratio);
# `parc check` of the largest example, a generated plan with 10,000 layers
# checked and explained, and lowering a GPT-3-shaped 1024-GPU plan under
# interleaved 1F1B as layers and micro-batches grow.  Prints milliseconds
# (best of 5 unless said) and the targets they are held against.
# Usage: bench/bench_compiler.sh [build/parc]   env: PAIRS (default 21)
set -euo pipefail
parc=$(realpath "${1:-build/parc}")
full=$(dirname "$parc")/parc-codegen
root=$(cd "$(dirname "$0")/.." && pwd)
PAIRS=${PAIRS:-21}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
best_ms() { # command... -> best wall time of 5 runs in ms
    local best=999999999
    for _ in 1 2 3 4 5; do
        local t0 t1
        t0=$(date +%s%N); "$@" > /dev/null 2>&1 || { echo "FAILED: $*" >&2; exit 1; }; t1=$(date +%s%N)
        local ms=$(( (t1 - t0) / 1000 ))
        [ "$ms" -lt "$best" ] && best=$ms
    done
    printf '%d.%03d' $((best / 1000)) $((best % 1000))
}
plan() { # layers micro_batches pp v -> file
    local L=$1 m=$2 pp=$3 v=$4 f=$tmp/p_$1_$2_$3_$4.par
    local sched="1f1b"; [ "$v" -gt 1 ] && sched="interleaved $v"
    local dp=$(( 1024 / (pp * 8) ))
    cat > "$f" <<PLAN
cluster { nodes 128; gpus_per_node 8;
  gpu { memory 80 GiB; bf16 312 TFLOP/s; hbm 2.0 TB/s; }
  link intra 300 GB/s 2 us; link inter 25 GB/s 5 us; }
model g { vocab 51200; seq 2048; hidden 12288; heads 96; ffn 49152; layers $L;
  embed positions learned; repeat layers { block gpt2; } norm layer; head untied; loss cross_entropy; }
train { batch $(( m * dp )); micro_batch 1; precision bf16 master fp32; optimizer adamw lr 1e-4; }
mesh { pp $pp; dp $dp; tp 8; }
layout { batch -> dp; heads -> tp; ffn -> tp; vocab -> tp; layers -> pp schedule $sched;
  sequence_parallel over tp; zero 1 over dp; recompute selective; }
PLAN
    echo "$f"
}
run_us() { # command... -> its wall time in microseconds (bash's clock where it has one: no process started to read it)
    local t0 t1
    if [ -n "${EPOCHREALTIME:-}" ]; then
        t0=${EPOCHREALTIME//[.,]/}; "$@" > /dev/null 2>&1 || { echo "FAILED: $*" >&2; exit 1; }; t1=${EPOCHREALTIME//[.,]/}
        echo $(( t1 - t0 ))
    else
        t0=$(date +%s%N); "$@" > /dev/null 2>&1 || { echo "FAILED: $*" >&2; exit 1; }; t1=$(date +%s%N)
        echo $(( (t1 - t0) / 1000 ))
    fi
}
median_ms() { sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", v[int((NR + 1) / 2)] / 1000 }'; }
pair() { # label, args... -> parc and parc-codegen alternately, PAIRS times each: medians and their ratio
    local label=$1; shift
    : > "$tmp/lean.us"; : > "$tmp/full.us"
    for _ in $(seq "$PAIRS"); do
        run_us "$parc" "$@" >> "$tmp/lean.us"
        run_us "$full" "$@" >> "$tmp/full.us"
    done
    local a b
    a=$(median_ms < "$tmp/lean.us"); b=$(median_ms < "$tmp/full.us")
    printf '  %-44s %8s %13s %7s\n' "$label" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')"
}
echo "bench_compiler: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -x "$full" ]; then
    echo "start-up, ms (median of $PAIRS, alternating): parc (no LLVM) against parc-codegen (LLVM linked)"
    printf '  %-44s %8s %13s %7s\n' command parc parc-codegen ratio
    pair "parc --version" --version
    pair "parc check examples/gpt3_175b.par" check "$root/examples/gpt3_175b.par"
    echo "  (target: parc check of the largest example < 50 ms)"
else
    echo "start-up: no parc-codegen beside $parc: parc alone below"
fi
echo "parc check, largest example (gpt3_175b.par, 1024 GPUs): $(best_ms "$parc" check "$root/examples/gpt3_175b.par") ms   (target < 50 ms)"
big=$tmp/deep.par
sed 's/layers 4;/layers 10000;/' "$root/examples/common/tiny_gpt.par" > "$tmp/deep_model.par"
cat > "$big" <<PLAN
include "$tmp/deep_model.par";
cluster { nodes 1; gpus_per_node 8; gpu { memory 80 GiB; bf16 100 TFLOP/s; hbm 2 TB/s; } link intra 100 GB/s 2 us; }
train { batch 64; micro_batch 1; precision fp32; optimizer adamw lr 1e-3; }
mesh { pp 8; }
layout { layers -> pp schedule 1f1b; }
PLAN
echo "10,000-layer plan, 8 stages: check $(best_ms "$parc" check "$big") ms, explain $(best_ms "$parc" explain "$big") ms   (target < 1000 ms)"
echo "lowering (parc lower --emit=ir) of a 1024-GPU plan, pp 16 x dp 8 x tp 8, interleaved 2:"
printf '  %8s %14s %10s\n' layers micro-batches ms
for L in 96 192 384; do
    for m in 64 128 256; do
        f=$(plan "$L" "$m" 16 2)
        printf '  %8d %14d %10s\n' "$L" "$m" "$(best_ms "$parc" lower "$f" --emit=ir)"
    done
done
echo "  (target: 96 layers, 64 micro-batches < 500 ms)"
