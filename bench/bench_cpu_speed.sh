#!/usr/bin/env bash
# One rank on the CPU against its peers, measured in this run on this machine:
#   1. parc's program vs PyTorch (bench/torch_gpt.py) on the same model, same
#      threads (1 and 2): Debian's torch 1.13 (attention as matmuls, all it has)
#      and, from bench/torch_env.sh, the current PyTorch of the Python package
#      index eager and under torch.compile, both with scaled_dot_product_attention;
#      every run on the SAME OpenBLAS kernel family where it calls OpenBLAS: the
#      one parc's start-up check picks (runtime/prt_blas.c), exported as
#      OPENBLAS_CORETYPE to every run (the current torch calls its own GEMM
#      library, named in the header); every run with glibc's malloc thresholds
#      raised as parc's runtime raises its own (lib.sh peer_malloc), the allocator
#      setting PyTorch's CPU performance guide recommends against page faults;
#      both models of the CPU targets: bench/plans/gpt_bench_single.par (5.3 M)
#      and gpt_bench_41m.par;
#   2. the GEMM share of parc's step and its GEMMs against cblas_sgemm alone on
#      the same shapes (--trace + bench_sgemm_peak + trace_gemm.py), 41 M model,
#      and torch's step (from 1.) over parc's GEMM time: the bound on the ratio
#      of 1. that kernels other than the GEMMs can reach.
# Runs alternate parc / the peers, ROUNDS times; each round's ratio is printed,
# then the median step times' ratio and the spread (min..max of the round ratios).
# Usage: bench/bench_cpu_speed.sh [build/parc]
#   env: STEPS (default 6; medians over steps 3..STEPS), ROUNDS (default 3),
#        MODELS ("5m 41m"), TORCH_PYTHON (default /usr/bin/python3),
#        CURRENT_TORCH (the current torch's python; default: bench/torch_env.sh
#        creates or finds .venv-torch; 0 skips those columns).
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
CURRENT_TORCH=${CURRENT_TORCH:-auto}
if [ "$CURRENT_TORCH" = auto ]; then
    CURRENT_TORCH=$("$root/bench/torch_env.sh" | tail -1) ||
        { echo "bench_cpu_speed: bench/torch_env.sh could not make the current torch: its columns skipped"; CURRENT_TORCH=0; }
fi
peer_malloc

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || a + 0 <= 0) print "n/a"; else printf "%.2f", b / a }'; }
ratio3() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || a + 0 <= 0) print "n/a"; else printf "%.3f", b / a }'; }

declare -A plan torch_args tokens torch_ms parc_ms compile_ms
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
echo "  allocator: $malloc_line"
if [ "$have_torch" = 1 ]; then echo "  peer torch: $("$TORCH_PYTHON" "$root/bench/torch_gpt.py" --steps 0 | sed -n 's/^PEER //p')"
else echo "  peer: torch not installed ($TORCH_PYTHON): torch columns skipped"; fi
if [ "$CURRENT_TORCH" != 0 ]; then
    echo "  peer current torch: $("$CURRENT_TORCH" "$root/bench/torch_gpt.py" --steps 0 --attention sdpa | sed -n 's/^PEER //p')"
else echo "  peer current torch: skipped (CURRENT_TORCH=0)"; fi

# peer_run NAME MODEL THREADS ROUND: one run of a peer into $tmp/NAME_MODEL_THREADS_ROUND.log
peer_run() {
    local py args=""
    case $1 in
        t) [ "$have_torch" = 1 ] || return 0; py=$TORCH_PYTHON ;;
        e) [ "$CURRENT_TORCH" != 0 ] || return 0; py=$CURRENT_TORCH args="--attention sdpa" ;;
        c) [ "$CURRENT_TORCH" != 0 ] || return 0; py=$CURRENT_TORCH args="--attention sdpa --compile" ;;
    esac
    # shellcheck disable=SC2086
    "$py" "$root/bench/torch_gpt.py" --threads "$3" --steps "$STEPS" ${torch_args[$2]} $args > "$tmp/$1_$2_$3_$4.log" 2>&1
}

echo
echo "1. one rank vs PyTorch, same threads: step ms (median of steps 3..$STEPS); ratio = peer ms / parc ms (above 1: parc"
echo "   is faster), per round and of the medians; torch = Debian's 1.13, eager = current torch, compile = it under"
echo "   torch.compile (its first step, the compilation, is in COMPILE below, not in the medians)"
printf '   %-4s %7s %8s %9s %9s %9s   %s\n' model threads "parc ms" "torch ms" "eager ms" "compile" "ratios: torch, eager, compile (rounds)"
for m in $MODELS; do
    for T in 1 2; do
        declare -A rounds=([t]="" [e]="" [c]="")
        for r in $(seq "$ROUNDS"); do
            OPENBLAS_NUM_THREADS=$T "$MPIRUN" --bind-to none -np 1 "$tmp/prog_$m" --steps "$STEPS" \
                > "$tmp/p_${m}_${T}_$r.log" 2>&1
            pm=$(median_ms "$tmp/p_${m}_${T}_$r.log")
            for k in t e c; do
                peer_run $k "$m" "$T" "$r"
                [ -f "$tmp/${k}_${m}_${T}_$r.log" ] && rounds[$k]="${rounds[$k]} $(ratio "$pm" "$(median_ms "$tmp/${k}_${m}_${T}_$r.log")")"
            done
        done
        p=$(median_ms "$tmp"/p_"${m}"_"${T}"_*.log)
        declare -A ms=([t]=nan [e]=nan [c]=nan)
        for k in t e c; do
            ls "$tmp"/"${k}"_"${m}"_"${T}"_*.log > /dev/null 2>&1 && ms[$k]=$(median_ms "$tmp"/"${k}"_"${m}"_"${T}"_*.log)
        done
        printf '   %-4s %7s %8s %9s %9s %9s   %s, %s, %s  (%s | %s | %s)\n' "$m" "$T" "$p" "${ms[t]}" "${ms[e]}" "${ms[c]}" \
            "$(ratio "$p" "${ms[t]}")x" "$(ratio "$p" "${ms[e]}")x" "$(ratio "$p" "${ms[c]}")x" \
            "${rounds[t]# }" "${rounds[e]# }" "${rounds[c]# }"
        torch_ms[${m}_$T]=${ms[t]} parc_ms[${m}_$T]=$p compile_ms[${m}_$T]=${ms[c]}
        comp=$(sed -n 's/^COMPILE first_step_s=//p' "$tmp"/c_"${m}"_"${T}"_*.log 2> /dev/null | sort -g | tr '\n' ' ')
        [ -z "$comp" ] || echo "          COMPILE: torch.compile's first step ${comp}s"
    done
done
echo "   targets: parc >= 1.0x torch.compile at the same threads on both models"

echo
m=${GEMM_MODEL:-41m}
echo "2. GEMM share of parc's step ($m, --trace, steps 3..6) and its GEMMs vs cblas_sgemm alone on the same shapes"
if [ -x "$tmp/prog_$m" ]; then
    "$parc" lower "${plan[$m]}" --emit=ir > "$tmp/ir.txt" 2>&1
    shapes=$("$PY" "$root/bench/trace_gemm.py" shapes "$tmp/ir.txt")
    printf '   %7s %8s %8s %6s %10s %12s %10s %11s %13s %9s %10s %9s\n' threads "step ms" "GEMM ms" share "GEMM GF/s" \
        "BLAS shapes" "vs shapes" "torch/GEMM" "compile/GEMM" "attn GEMM" "step/GEMM" "step/all"
    for T in 1 2; do
        OPENBLAS_NUM_THREADS=$T "$benchbin/bench_sgemm_peak" --square 2048 --shapes "$shapes" > "$tmp/peak$T.txt"
        OPENBLAS_NUM_THREADS=$T "$MPIRUN" --bind-to none -np 1 "$tmp/prog_$m" --steps 6 --quiet --trace "$tmp/t$T.json" \
            > /dev/null 2>&1
        "$PY" "$root/bench/trace_gemm.py" report "$tmp/ir.txt" "$tmp/t$T.json" "$tmp/peak$T.txt" --skip 2 > "$tmp/r$T.txt" ||
            { echo "   trace analysis failed:"; cat "$tmp/r$T.txt"; continue; }
        g() { sed -n "s/^$1=//p" "$tmp/r$T.txt"; }
        printf '   %7s %8s %8s %5.0f%% %10s %7s GF/s %9sx %10sx %12sx %9s %9sx %8sx\n' "$T" "$(g step_ms)" "$(g gemm_ms)" \
            "$(awk -v s="$(g gemm_share)" 'BEGIN { print s * 100 }')" "$(g gemm_gflops)" "$(g blas_same_shapes_gflops)" \
            "$(ratio "$(g gemm_ms)" "$(g blas_same_shapes_ms)")" "$(ratio "$(g gemm_ms)" "${torch_ms[${m}_$T]:-nan}")" \
            "$(ratio "$(g gemm_ms)" "${compile_ms[${m}_$T]:-nan}")" "$(g inner_gemm_ms)" \
            "$(ratio3 "$(g gemm_ms)" "$(g step_ms)")" "$(ratio3 "$(g all_gemm_ms)" "$(g step_ms)")"
        echo "           largest ops per step: $(g top_ops)"
    done
    echo "   'vs shapes' = BLAS-alone time / parc's GEMM time on the same shapes (targets: share >= 80% at 1 thread, >= 0.95x at 2;"
    echo "   the step <= 1.10x its GEMM time, a share >= 91%, at 1 and 2 threads)"
    echo "   'attn GEMM' = ms of the block GEMMs attention calls itself (its trace spans' gemm_share x their time);"
    echo "   'step/GEMM' = the step over the matmul ops' time, 'step/all' over theirs and attention's GEMMs together"
    echo "   'torch/GEMM' = torch's step (table 1, same threads) / parc's GEMM time alone: the torch/parc ratio parc would"
    echo "   reach with every non-GEMM op free, so the most faster kernels can give without fewer GEMM FLOPs than torch's;"
    echo "   'compile/GEMM' the same for torch.compile's step"
else
    echo "   skipped: model $m not in MODELS"
fi
