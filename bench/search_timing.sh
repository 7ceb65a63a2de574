#!/usr/bin/env bash
# `parc search` over GPT-3 175B on 1,024 A100s and Llama-2-70B on 64 H100s
# (examples/), pinned to one core: the layouts considered and lowered, the
# seconds it took and the ratio to the 2 s target, the same search with
# --exhaustive (every layout lowered) as the peer measured in the same run,
# whether both rank the same top 5, and where the published layout of each
# example (Megatron-LM's for GPT-3, the example's own for Llama-2) ranks,
# with the model's reason when #1 beats it.
set -euo pipefail
parc=$(realpath "${1:-build/parc}")
root=$(cd "$(dirname "$0")/.." && pwd)
pin=(); command -v taskset > /dev/null && pin=(taskset -c 0)
seconds() { sed -n '1s/.* in \([0-9.]*\) s$/\1/p'; }
for plan in gpt3_175b llama2_70b; do
    out=$("${pin[@]}" "$parc" search "$root/examples/$plan.par" --top 5 --time)
    all=$("${pin[@]}" "$parc" search "$root/examples/$plan.par" --top 5 --time --exhaustive)
    secs=$(printf '%s\n' "$out" | seconds)
    secs_all=$(printf '%s\n' "$all" | seconds)
    printf '%s\n' "$out" | head -1
    printf '  one core: %s s against the 2 s target: %.2fx the target\n' "$secs" "$(echo "$secs / 2" | bc -l)"
    printf '  --exhaustive: %s s (%.1fx the time with the prefilter)\n' "$secs_all" "$(echo "$secs_all / $secs" | bc -l)"
    if [ "$(printf '%s\n' "$out" | grep -A3 '^#[1-5] pp')" = "$(printf '%s\n' "$all" | grep -A3 '^#[1-5] pp')" ]; then
        echo "  top 5 and their figures: the same as --exhaustive's"
    else
        echo "  top 5: NOT the same as --exhaustive's:"
        printf '%s\n' "$all" | sed -n 's/^\(#[1-5] pp.*\)/    exhaustive \1/p'
    fi
    printf '%s\n' "$out" | sed -n '/^#1 /p;/the plan.s own layout/,$p' | sed 's/^/  /'
done
