#!/usr/bin/env bash
# Training speed of parc's generated programs on this machine's CPUs, each number
# printed beside a named peer measured in the same run (ratios, not verdicts):
#   1. one rank vs PyTorch 1.13 CPU (bench/torch_gpt.py), same OpenBLAS and kernels, same
#      thread count (1 and 2), the GPT of bench/plans/gpt_bench_single.par;
#   2. the GEMM share of that step (--trace) and the GEMMs' GFLOP/s vs
#      cblas_sgemm alone (bench_sgemm_peak: the same shapes, and a 2048^3 peak);
#   3. dp = 2 (bench/plans/gpt_bench_dp2.par) vs PyTorch DDP over gloo, 2 processes;
#   4. the runtime's collectives vs raw MPI (bench_collectives, 2 ranks);
#   5. `parc build` time and executable size of the tiny GPT at 4 / 64 / 1024
#      layers, one rank and a 4-stage 1F1B pipeline.
# Usage: bench/bench_train.sh [build/parc]
#   env: STEPS (steps per training run, default 8; medians over steps 3..STEPS),
#        ROUNDS (alternating parc/torch rounds in 1 and 3, default 2),
#        TORCH_PYTHON (default /usr/bin/python3).
# About 3.5 minutes on 2 cores.  Single-rank parc runs use `mpirun --bind-to none`:
# Open MPI binds a lone rank to one core, which would leave OpenBLAS's second
# thread no core of its own (see bench/README.md).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
parc=$(realpath "${1:-$root/build/parc}")
benchbin=$(dirname "$parc")/bench
STEPS=${STEPS:-8}
ROUNDS=${ROUNDS:-2}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
PY=$(command -v python3 || echo "$TORCH_PYTHON")
[ "$STEPS" -ge 4 ] || STEPS=4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=$(command -v mpirun || true)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -x "$parc" ] || { echo "bench_train: no parc at $parc (run .ci/build)" >&2; exit 1; }
[ -n "$MPIRUN" ] || { echo "bench_train: no mpirun on PATH" >&2; exit 1; }

have_torch=0
"$TORCH_PYTHON" -c 'import torch' > /dev/null 2>&1 && have_torch=1

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b + 0 <= 0) print "n/a"; else printf "%.2fx", a / b }'; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

peer_malloc
echo "parc bench_train — $(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
echo "  allocator: $malloc_line"
echo "  BLAS: $(ldd "$benchbin/bench_sgemm_peak" 2>/dev/null | awk '/openblas|blas/ { print $3; exit }' | xargs -r readlink -f)"
if [ "$have_torch" = 1 ]; then echo "  peer: torch $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)') ($TORCH_PYTHON)"
else echo "  peer: torch not installed ($TORCH_PYTHON)"; fi
echo "  (this machine's numbers; every ratio compares runs made just now, one after the other)"

single=$root/bench/plans/gpt_bench_single.par
dp2=$root/bench/plans/gpt_bench_dp2.par
ok_single=0; ok_dp2=0
"$parc" build "$single" -o "$tmp/single" > "$tmp/build1.log" 2>&1 && ok_single=1 || { echo "parc build $single failed:"; cat "$tmp/build1.log"; }
"$parc" build "$dp2" -o "$tmp/dp2" > "$tmp/build2.log" 2>&1 && ok_dp2=1 || { echo "parc build $dp2 failed:"; cat "$tmp/build2.log"; }
# parc and torch on the same kernels: the family parc's start-up check runs (lib.sh)
if [ "$ok_single" = 1 ]; then same_kernels "$tmp/single"; echo "  BLAS kernels: $kernels"; fi

# ---------------------------------------------------------------- 1
echo
echo "1. one rank vs PyTorch CPU, same threads (GPT V4096 T256 C256 NH8 L4 F1024, batch 8 = 2048 tok/step, fp32 AdamW)"
echo "   tokens/s = 2048 / median step time of steps 3..$STEPS over $ROUNDS alternating rounds"
printf '   %7s %12s %12s %11s\n' threads "parc tok/s" "torch tok/s" parc/torch
for T in 1 2; do
    for r in $(seq "$ROUNDS"); do
        [ "$ok_single" = 1 ] && OPENBLAS_NUM_THREADS=$T "$MPIRUN" --bind-to none -np 1 "$tmp/single" --steps "$STEPS" \
            > "$tmp/s1_parc_${T}_$r.log" 2>&1
        [ "$have_torch" = 1 ] && "$TORCH_PYTHON" "$root/bench/torch_gpt.py" --threads "$T" --steps "$STEPS" \
            > "$tmp/s1_torch_${T}_$r.log" 2>&1
    done
    p=n/a; t=n/a
    [ "$ok_single" = 1 ] && p=$(toks 2048 "$(median_ms "$tmp"/s1_parc_"${T}"_*.log)")
    if [ "$have_torch" = 1 ]; then t=$(toks 2048 "$(median_ms "$tmp"/s1_torch_"${T}"_*.log)")
    else t="torch not installed: skipped"; fi
    printf '   %7s %12s %12s %11s\n' "$T" "$p" "$t" "$(ratio "$p" "$t")"
done

# ---------------------------------------------------------------- 2
echo
echo "2. GEMM share of the one-rank step (--trace, median of steps 3..6) vs cblas_sgemm alone"
if [ "$ok_single" = 1 ] && [ -x "$benchbin/bench_sgemm_peak" ]; then
    "$parc" lower "$single" --emit=ir > "$tmp/ir.txt" 2>&1
    shapes=$("$PY" "$root/bench/trace_gemm.py" shapes "$tmp/ir.txt")
    printf '   %7s %8s %8s %6s %9s %14s %11s %9s %9s\n' threads "step ms" "GEMM ms" share "GEMM GF/s" "BLAS shapes" "BLAS peak" "GEMM/peak" "vs shapes"
    for T in 1 2; do
        OPENBLAS_NUM_THREADS=$T "$benchbin/bench_sgemm_peak" --square 2048 --shapes "$shapes" > "$tmp/peak$T.txt"
        OPENBLAS_NUM_THREADS=$T "$MPIRUN" --bind-to none -np 1 "$tmp/single" --steps 6 --quiet --trace "$tmp/t$T.json" \
            > /dev/null 2>&1
        "$PY" "$root/bench/trace_gemm.py" report "$tmp/ir.txt" "$tmp/t$T.json" "$tmp/peak$T.txt" --skip 2 > "$tmp/r$T.txt" ||
            { echo "   trace analysis failed:"; cat "$tmp/r$T.txt"; continue; }
        g() { sed -n "s/^$1=//p" "$tmp/r$T.txt"; }
        printf '   %7s %8s %8s %5.0f%% %9s %9s GF/s %6s GF/s %9s %9s\n' "$T" "$(g step_ms)" "$(g gemm_ms)" \
            "$(awk -v s="$(g gemm_share)" 'BEGIN { print s * 100 }')" "$(g gemm_gflops)" "$(g blas_same_shapes_gflops)" \
            "$(g blas_peak_gflops)" "$(ratio "$(g gemm_gflops)" "$(g blas_peak_gflops)")" \
            "$(ratio "$(g blas_same_shapes_ms)" "$(g gemm_ms)")"
        [ "$(g matmul_events_per_step)" = "$(g matmul_events_expected)" ] ||
            echo "   warning: $(g matmul_events_per_step) matmul events per step in the trace, the IR says $(g matmul_events_expected)"
        tops[$T]=$(g top_ops)
    done
    echo "   GEMMs: $(sed -n 's/^gemm_gflop_per_step=//p' "$tmp/r1.txt") GFLOP/step (2NKM fwd + 4NKM bwd, shapes from parc lower --emit=ir);"
    echo "   'BLAS shapes' = cblas_sgemm alone on the same shapes and transposes; 'BLAS peak' = 2048^3 sgemm;"
    echo "   'vs shapes' = BLAS-alone time / parc's GEMM time (1.00x: no runtime overhead)."
    for T in 1 2; do [ -n "${tops[$T]:-}" ] && echo "   largest ops per step, $T thread(s): ${tops[$T]}"; done
    if [ "$have_torch" = 1 ] && [ -s "$tmp/r1.txt" ]; then
        tops_torch=$("$TORCH_PYTHON" "$root/bench/torch_gpt.py" --ops --threads 1 2>/dev/null | sed -n 's/^OPS //p')
        pair() { # op -> "parc X / torch Y ms = R"
            local p t
            p=$(awk -F= -v a="op.$1_fwd" -v b="op.$1_bwd" '$1 == a || $1 == b { s += $2 } END { printf "%.0f", s }' "$tmp/r1.txt")
            t=$(echo "$tops_torch" | tr ' ' '\n' | sed -n "s/^$1=//p")
            echo "$1 $p / $(printf '%.0f' "${t:-0}") ms ($(ratio "$t" "$p"))"
        }
        [ -n "$tops_torch" ] && echo "   non-GEMM ops, fwd+bwd ms per step at 1 thread, parc / torch alone on the same shapes (torch/parc):" &&
            echo "     $(pair gelu); $(pair attention); $(pair xent)"
    fi
else
    echo "   skipped (no parc build or no $benchbin/bench_sgemm_peak: build with .ci/build)"
fi

# ---------------------------------------------------------------- 3
echo
echo "3. dp = 2 vs PyTorch DDP (gloo), 2 processes x 1 thread, global batch 16 (8 per rank) = 4096 tok/step"
printf '   %12s %12s %11s\n' "parc tok/s" "torch tok/s" parc/torch
for r in $(seq "$ROUNDS"); do
    [ "$ok_dp2" = 1 ] && OPENBLAS_NUM_THREADS=1 "$MPIRUN" -np 2 "$tmp/dp2" --steps "$STEPS" > "$tmp/s3_parc_$r.log" 2>&1
    [ "$have_torch" = 1 ] && "$TORCH_PYTHON" "$root/bench/torch_gpt.py" --ddp 2 --threads 1 --steps "$STEPS" \
        --port $((29500 + RANDOM % 500)) > "$tmp/s3_torch_$r.log" 2>&1
done
p=n/a; t=n/a
[ "$ok_dp2" = 1 ] && p=$(toks 4096 "$(median_ms "$tmp"/s3_parc_*.log)")
if [ "$have_torch" = 1 ]; then t=$(toks 4096 "$(median_ms "$tmp"/s3_torch_*.log)"); else t="torch not installed: skipped"; fi
printf '   %12s %12s %11s\n' "$p" "$t" "$(ratio "$p" "$t")"
if [ "$ok_dp2" = 1 ] && [ "$ok_single" = 1 ]; then
    one=$(toks 2048 "$(median_ms "$tmp"/s1_parc_1_*.log)")
    echo "   parc dp=2 / parc one rank 1 thread (section 1): $(ratio "$p" "$one") (ideal 2.00x)"
fi

# ---------------------------------------------------------------- 4
echo
echo "4. runtime collectives vs raw MPI on the same communicator (bench_collectives, 2 ranks): overhead by size"
if [ -x "$benchbin/bench_collectives" ]; then
    coll_ok=1
    for r in 1 2 3; do
        "$MPIRUN" -np 2 "$benchbin/bench_collectives" > "$tmp/coll$r.txt" 2>&1 ||
            { coll_ok=0; echo "   bench_collectives failed:"; sed 's/^/   /' "$tmp/coll$r.txt" | tail -5; break; }
    done
    if [ "$coll_ok" = 1 ]; then
        # per (op, size): the median of the 3 runs' overhead column
        awk 'FNR > 2 && NF >= 5 {
                 if ($1 == "allgather(outer") { op = $1 " " $2; b = $3; o = $6 } else { op = $1; b = $2; o = $5 }
                 if (b !~ /^[0-9]+$/) next
                 sub(/%/, "", o); k = op SUBSEP b
                 if (!(k in cnt)) { keys[++nk] = k; kop[k] = op; kb[k] = b }
                 v[k, ++cnt[k]] = o + 0 }
             END {
                 for (i = 1; i <= nk; i++) {
                     k = keys[i]; n = cnt[k]
                     for (x = 1; x <= n; x++) a[x] = v[k, x]
                     for (x = 1; x <= n; x++) for (y = x + 1; y <= n; y++) if (a[y] < a[x]) { t = a[x]; a[x] = a[y]; a[y] = t }
                     m = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
                     op = kop[k]; b = kb[k]
                     u = b >= 1048576 ? b / 1048576 "M" : b / 1024 "K"
                     if (!(op in line)) order[++no] = op
                     line[op] = line[op] sprintf(" %6s %+7.1f%%", u, m)
                 }
                 for (i = 1; i <= no; i++) printf "   %-20s%s\n", order[i], line[order[i]] }' \
            "$tmp/coll1.txt" "$tmp/coll2.txt" "$tmp/coll3.txt"
        echo "   (overhead = prt time / MPI time - 1, median of 3 runs; +: the runtime is slower;"
        echo "    each point is timed over ~0.1 s, so tens of percent either way is this machine's noise)"
    fi
else
    echo "   skipped: $benchbin/bench_collectives not built (CPU runtime missing?)"
fi

# ---------------------------------------------------------------- 5
echo
echo "5. parc build (LLVM codegen + link) of the tiny GPT as layers grow: best of 3 ms, executable bytes"
# tiny_cluster.par's 1 GiB would not hold 1024 layers on one rank: a larger fake GPU
gpu="gpu { memory 64 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; } link intra 10 GB/s 5 us;"
printf '   %7s %16s %16s %18s %18s\n' layers "1 rank ms" "1 rank bytes" "pp 4 (1F1B) ms" "pp 4 bytes"
for L in 4 64 1024; do
    sed "s/layers 4;/layers $L;/" "$root/examples/common/tiny_gpt.par" > "$tmp/tiny_gpt_$L.par"
    cat > "$tmp/one_$L.par" <<PLAN
include "$tmp/tiny_gpt_$L.par";
cluster { nodes 1; gpus_per_node 1; $gpu }
train { include "$root/examples/common/tiny_train.par"; micro_batch 2; }
mesh { dp 1; }
layout { batch -> dp; }
PLAN
    cat > "$tmp/pp4_$L.par" <<PLAN
include "$tmp/tiny_gpt_$L.par";
cluster { nodes 1; gpus_per_node 4; $gpu }
train { include "$root/examples/common/tiny_train.par"; micro_batch 2; }
mesh { pp 4; }
layout { layers -> pp schedule 1f1b; }
PLAN
    row=()
    for kind in one pp4; do
        best=""; size=n/a
        for _ in 1 2 3; do
            t0=$(now_ms)
            if "$parc" build "$tmp/${kind}_$L.par" -o "$tmp/exe_${kind}_$L" > "$tmp/b.log" 2>&1; then
                dt=$(( $(now_ms) - t0 )); { [ -z "$best" ] || [ "$dt" -lt "$best" ]; } && best=$dt
                size=$(stat -c %s "$tmp/exe_${kind}_$L")
            else best="failed"; sed 's/^/   /' "$tmp/b.log" | head -3; break; fi
        done
        row+=("$best" "$size")
    done
    printf '   %7s %16s %16s %18s %18s\n' "$L" "${row[@]}"
done
