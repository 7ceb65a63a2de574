#!/usr/bin/env bash
# Data parallelism with the gradient buckets overlapping the backward, each
# number beside a named peer measured in the same run (ratios, not verdicts).
# For the 5 M GPT (bench/plans/gpt_bench_dp2.par) and the 41 M one
# (bench/plans/gpt_bench_41m_dp2.par), 2 ranks x 1 thread:
#   - tokens/s of parc and of PyTorch DistributedDataParallel over gloo
#     (bench/torch_gpt.py --ddp 2, the same model), ROUNDS alternating rounds,
#     the median step of steps 3..STEPS; parc / torch;
#   - from a parc run with --trace: the exposed communication share of the
#     step (the runtime's exposed_communication phase: waits for started
#     buckets and every blocking collective, over the step's phases, rank 0,
#     median of steps 3..), and the started collectives' in-flight time per
#     step (start to completion, rank 0) beside it.
# Then a 2-stage 1F1B pipeline of the 41 M model (bench/plans/gpt_bench_41m_pp2.par):
# when its first activation leaves stage 0 and when it has arrived at stage 1
# (bench/first_activation.py), the sender's own time as the peer of the arrival.
# The first lines say the CPU, the peer and the BLAS kernels: every run, parc's
# and torch's, uses the family parc's start-up check picks (lib.sh's
# same_kernels), so the ratio compares the programs, not two kernel families.
# Usage: bench/bench_overlap.sh [build/parc]
#   env: STEPS (default 8), ROUNDS (default 2), TORCH_PYTHON (default /usr/bin/python3).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
parc=$(realpath "${1:-$root/build/parc}")
STEPS=${STEPS:-8}
ROUNDS=${ROUNDS:-2}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
[ "$STEPS" -ge 4 ] || STEPS=4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=$(command -v mpirun || true)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -x "$parc" ] || { echo "bench_overlap: no parc at $parc (run .ci/build)" >&2; exit 1; }
[ -n "$MPIRUN" ] || { echo "bench_overlap: no mpirun on PATH" >&2; exit 1; }
have_torch=0
"$TORCH_PYTHON" -c 'import torch' > /dev/null 2>&1 && have_torch=1

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b + 0 <= 0) print "n/a"; else printf "%.2fx", a / b }'; }

peer_malloc
echo "parc bench_overlap — $(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
echo "  allocator: $malloc_line"
if [ "$have_torch" = 1 ]; then echo "  peer: torch $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)') DDP over gloo"
else echo "  peer: torch not installed ($TORCH_PYTHON): parc alone"; fi

# model name, plan, tokens per step, torch_gpt.py's model flags
models=("5M|$root/bench/plans/gpt_bench_dp2.par|4096|--batch 8"
        "41M|$root/bench/plans/gpt_bench_41m_dp2.par|2048|--batch 4 --vocab 8192 --hidden 768 --heads 12 --ffn 3072")
# both peers on the kernels parc's start-up check runs (lib.sh)
if "$parc" build "$root/bench/plans/gpt_bench_single.par" -o "$tmp/single" > "$tmp/single.build" 2>&1; then
    same_kernels "$tmp/single"
else
    kernels="not chosen: parc build gpt_bench_single.par failed"
fi
echo "  BLAS kernels: $kernels"
printf '\n  %5s %11s %11s %10s %13s %16s\n' model "parc tok/s" "torch tok/s" parc/torch "exposed comm" "in flight ms/step"
for m in "${models[@]}"; do
    IFS='|' read -r name plan tokens flags <<< "$m"
    if ! "$parc" build "$plan" -o "$tmp/$name" > "$tmp/$name.build" 2>&1; then
        echo "  $name: parc build failed:"; sed 's/^/    /' "$tmp/$name.build"; continue
    fi
    for r in $(seq "$ROUNDS"); do
        OPENBLAS_NUM_THREADS=1 "$MPIRUN" -np 2 "$tmp/$name" --steps "$STEPS" > "$tmp/${name}_parc_$r.log" 2>&1
        # shellcheck disable=SC2086
        [ "$have_torch" = 1 ] && "$TORCH_PYTHON" "$root/bench/torch_gpt.py" --ddp 2 --threads 1 --steps "$STEPS" \
            $flags --port $((29500 + RANDOM % 500)) > "$tmp/${name}_torch_$r.log" 2>&1
    done
    p=$(toks "$tokens" "$(median_ms "$tmp/${name}"_parc_*.log)")
    t=n/a
    [ "$have_torch" = 1 ] && t=$(toks "$tokens" "$(median_ms "$tmp/${name}"_torch_*.log)")
    OPENBLAS_NUM_THREADS=1 "$MPIRUN" -np 2 "$tmp/$name" --steps "$STEPS" --quiet --trace "$tmp/$name.json" > /dev/null 2>&1
    share=$(python3 - "$tmp/$name.json" <<'PY'
import json, statistics, sys
ev = json.load(open(sys.argv[1]))
phases = [e["args"] for e in ev if e.get("ph") == "C" and e.get("pid") == 0]
shares = [a["exposed_communication"] / sum(a.values()) for a in phases[2:] if sum(a.values()) > 0]
steps = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "step" and e.get("pid") == 0][2:]
started = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "comm" and e.get("pid") == 0 and e["tid"] >= 2]
fl = [sum(c["dur"] for c in started if s["ts"] <= c["ts"] <= s["ts"] + s["dur"]) / 1e3 for s in steps]
print(f"{100 * statistics.median(shares):.1f}% {statistics.median(fl):.1f}" if shares and fl else "n/a n/a")
PY
)
    printf '  %5s %11s %11s %10s %13s %16s\n' "$name" "$p" "$t" "$(ratio "$p" "$t")" "${share% *}" "${share#* }"
done

# the pipeline's first activation: when stage 0 sent it, when stage 1 had it
pp=$root/bench/plans/gpt_bench_41m_pp2.par
if "$parc" build "$pp" -o "$tmp/pp2" > "$tmp/pp2.build" 2>&1; then
    OPENBLAS_NUM_THREADS=1 "$MPIRUN" -np 2 "$tmp/pp2" --steps "$STEPS" --quiet --trace "$tmp/pp2.json" > /dev/null 2>&1
    fa=$(python3 "$root/bench/first_activation.py" "$tmp/pp2.json")
    s=${fa%% *}; a=${fa##* }
    echo
    echo "  41M pp 2 (1F1B, 4 micro-batches): first activation sent ${s#sent=} ms, arrived ${a#arrived=} ms into the step"
    echo "    (stage 0's send span end / stage 1's first receive end, medians of steps 3..$STEPS)"
else
    echo "  pp 2: parc build failed:"; sed 's/^/    /' "$tmp/pp2.build"
fi
echo
echo "  exposed comm: the step's exposed_communication phase share on rank 0 (target <= 20%);"
echo "  in flight: the started gradient collectives' summed start-to-completion time per step."
