#!/usr/bin/env bash
# One rank on the CPU against its peers, measured in this run on this machine:
#   1. parc's program vs PyTorch 1.13 (bench/torch_gpt.py) on the same model, same
#      threads (1 and 2) and the SAME OpenBLAS kernel family: the one parc's
#      start-up check picks (runtime/prt_blas.c), exported as OPENBLAS_CORETYPE to
#      every run, so torch gets the faster kernels too; both models of the CPU
#      targets: bench/plans/gpt_bench_single.par (5.3 M) and gpt_bench_41m.par;
#   2. the GEMM share of parc's step and its GEMMs against cblas_sgemm alone on
#      the same shapes (--trace + bench_sgemm_peak + trace_gemm.py), 41 M model,
#      and torch's step (from 1.) over parc's GEMM time: the bound on the ratio
#      of 1. that kernels other than the GEMMs can reach.
# Runs alternate parc / torch, ROUNDS times; each round's ratio is printed, then
# the median step times' ratio and the spread (min..max of the round ratios).
# Usage: bench/bench_cpu_speed.sh [build/parc]
#   env: STEPS (default 6; medians over steps 3..STEPS), ROUNDS (default 3),
#        MODELS ("5m 41m"), TORCH_PYTHON (default /usr/bin/python3).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
parc=$(realpath "${1:-$root/build/parc}")
benchbin=$(dirname "$parc")/bench
STEPS=${STEPS:-6}
ROUNDS=${ROUNDS:-3}
MODELS=${MODELS:-5m 41m}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
PY=$(command -v python3 || echo "$TORCH_PYTHON")
[ "$STEPS" -ge 4 ] || STEPS=4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset OPENBLAS_CORETYPE
MPIRUN=$(command -v mpirun || true)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -x "$parc" ] || { echo "bench_cpu_speed: no parc at $parc (run .ci/build)" >&2; exit 1; }
[ -n "$MPIRUN" ] || { echo "bench_cpu_speed: no mpirun on PATH" >&2; exit 1; }
[ -x "$benchbin/bench_sgemm_peak" ] || { echo "bench_cpu_speed: no $benchbin/bench_sgemm_peak" >&2; exit 1; }
have_torch=0
"$TORCH_PYTHON" -c 'import torch' > /dev/null 2>&1 && have_torch=1

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || a + 0 <= 0) print "n/a"; else printf "%.2f", b / a }'; }

declare -A plan torch_args tokens torch_ms parc_ms
plan[5m]=$root/bench/plans/gpt_bench_single.par
torch_args[5m]="--batch 8"
tokens[5m]=2048
plan[41m]=$root/bench/plans/gpt_bench_41m.par
torch_args[41m]="--vocab 8192 --hidden 768 --heads 12 --ffn 3072 --batch 4"
tokens[41m]=1024

for m in $MODELS; do
    "$parc" build "${plan[$m]}" -o "$tmp/prog_$m" > "$tmp/build_$m.log" 2>&1 ||
        { echo "parc build ${plan[$m]} failed:"; cat "$tmp/build_$m.log"; exit 1; }
done

# The kernel family parc's start-up check runs, for every run below (lib.sh)
same_kernels "$tmp/prog_${MODELS%% *}"

echo "parc bench_cpu_speed — $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')," \
    "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  BLAS: $(ldd "$benchbin/bench_sgemm_peak" | awk '/openblas|blas/ { print $3; exit }' | xargs -r readlink -f)," \
    "kernels $kernels"
if [ "$have_torch" = 1 ]; then echo "  peer: torch $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)')"
else echo "  peer: torch not installed ($TORCH_PYTHON): torch columns skipped"; fi

echo
echo "1. one rank vs PyTorch, same threads and kernels: step ms (median of steps 3..$STEPS), torch/parc per round"
printf '   %-4s %7s %9s %9s %7s   %s\n' model threads "parc ms" "torch ms" ratio "rounds (spread)"
for m in $MODELS; do
    for T in 1 2; do
        rounds=""
        for r in $(seq "$ROUNDS"); do
            OPENBLAS_NUM_THREADS=$T "$MPIRUN" --bind-to none -np 1 "$tmp/prog_$m" --steps "$STEPS" \
                > "$tmp/p_${m}_${T}_$r.log" 2>&1
            if [ "$have_torch" = 1 ]; then
                # shellcheck disable=SC2086
                "$TORCH_PYTHON" "$root/bench/torch_gpt.py" --threads "$T" --steps "$STEPS" ${torch_args[$m]} \
                    > "$tmp/t_${m}_${T}_$r.log" 2>&1
                rounds="$rounds $(ratio "$(median_ms "$tmp/p_${m}_${T}_$r.log")" "$(median_ms "$tmp/t_${m}_${T}_$r.log")")"
            fi
        done
        p=$(median_ms "$tmp"/p_"${m}"_"${T}"_*.log); t=nan
        [ "$have_torch" = 1 ] && t=$(median_ms "$tmp"/t_"${m}"_"${T}"_*.log)
        spread=$(echo "$rounds" | tr ' ' '\n' | grep -v '^$' | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) printf "%s..%s", lo, hi }')
        printf '   %-4s %7s %9s %9s %6sx  %s (%s)\n' "$m" "$T" "$p" "$t" "$(ratio "$p" "$t")" "${rounds# }" "$spread"
        torch_ms[${m}_$T]=$t parc_ms[${m}_$T]=$p
    done
done
echo "   ratio = torch ms / parc ms (above 1: parc is faster); target 1.5x at 1 and 2 threads"

echo
m=${GEMM_MODEL:-41m}
echo "2. GEMM share of parc's step ($m, --trace, steps 3..6) and its GEMMs vs cblas_sgemm alone on the same shapes"
if [ -x "$tmp/prog_$m" ]; then
    "$parc" lower "${plan[$m]}" --emit=ir > "$tmp/ir.txt" 2>&1
    shapes=$("$PY" "$root/bench/trace_gemm.py" shapes "$tmp/ir.txt")
    printf '   %7s %8s %8s %6s %10s %12s %10s %11s\n' threads "step ms" "GEMM ms" share "GEMM GF/s" "BLAS shapes" "vs shapes" \
        "torch/GEMM"
    for T in 1 2; do
        OPENBLAS_NUM_THREADS=$T "$benchbin/bench_sgemm_peak" --square 2048 --shapes "$shapes" > "$tmp/peak$T.txt"
        OPENBLAS_NUM_THREADS=$T "$MPIRUN" --bind-to none -np 1 "$tmp/prog_$m" --steps 6 --quiet --trace "$tmp/t$T.json" \
            > /dev/null 2>&1
        "$PY" "$root/bench/trace_gemm.py" report "$tmp/ir.txt" "$tmp/t$T.json" "$tmp/peak$T.txt" --skip 2 > "$tmp/r$T.txt" ||
            { echo "   trace analysis failed:"; cat "$tmp/r$T.txt"; continue; }
        g() { sed -n "s/^$1=//p" "$tmp/r$T.txt"; }
        printf '   %7s %8s %8s %5.0f%% %10s %7s GF/s %9sx %10sx\n' "$T" "$(g step_ms)" "$(g gemm_ms)" \
            "$(awk -v s="$(g gemm_share)" 'BEGIN { print s * 100 }')" "$(g gemm_gflops)" "$(g blas_same_shapes_gflops)" \
            "$(ratio "$(g gemm_ms)" "$(g blas_same_shapes_ms)")" "$(ratio "$(g gemm_ms)" "${torch_ms[${m}_$T]:-nan}")"
        echo "           largest ops per step: $(g top_ops)"
    done
    echo "   'vs shapes' = BLAS-alone time / parc's GEMM time on the same shapes (targets: share >= 80% at 1 thread, >= 0.95x at 2)"
    echo "   'torch/GEMM' = torch's step (table 1, same threads) / parc's GEMM time alone: the torch/parc ratio parc would"
    echo "   reach with every non-GEMM op free, so the most faster kernels can give without fewer GEMM FLOPs than torch's"
else
    echo "   skipped: model $m not in MODELS"
fi
