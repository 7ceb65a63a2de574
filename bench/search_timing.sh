#!/usr/bin/env bash
# `parc search` over GPT-3 175B on 1,024 A100s and Llama-2-70B on 64 H100s
# (examples/), pinned to one core: the layouts considered, the seconds it
# took and the ratio to the 2 s target, and where the published layout of
# each example (Megatron-LM's for GPT-3, the example's own for Llama-2) ranks,
# with the model's reason when #1 beats it.
set -euo pipefail
parc=$(realpath "${1:-build/parc}")
root=$(cd "$(dirname "$0")/.." && pwd)
pin=(); command -v taskset > /dev/null && pin=(taskset -c 0)
for plan in gpt3_175b llama2_70b; do
    out=$("${pin[@]}" "$parc" search "$root/examples/$plan.par" --top 5 --time)
    head=$(printf '%s\n' "$out" | head -1)
    secs=$(printf '%s\n' "$head" | sed -n 's/.* in \([0-9.]*\) s$/\1/p')
    echo "$head"
    printf '  one core: %s s against the 2 s target: %.2fx the target\n' "$secs" "$(echo "$secs / 2" | bc -l)"
    printf '%s\n' "$out" | sed -n '/^#1 /p;/the plan.s own layout/,$p' | sed 's/^/  /'
done
