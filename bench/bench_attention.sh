#!/usr/bin/env bash
# The CPU runtime's causal attention (forward + backward, probabilities not
# kept: the key-blocked online-softmax kernel of runtime/cpu/prt_cpu_attention.c)
# against two peers measured in this run, on the same shapes:
#   torch  PyTorch 1.13's attention as bench/torch_gpt.py runs it (matmul, masked
#          softmax, matmul; autograd for the backward), same threads, same
#          OpenBLAS kernel family;
#   old    the row-blocked kernel it replaced (each block of 64 query rows against
#          all its keys), prt_cpu_attention.c of revision OLD_REV compiled from git
#          with its entry points renamed and linked into the same driver.
# Shapes: HD 64, NH 4, causal, T = 256, 1024, 4096 (B x NH = 32, 8, 4 by default:
# a few seconds each).  Runs alternate parc / torch, ROUNDS times, threads 1
# and 2; each time is the minimum over REPS calls and the rounds, of process CPU
# time (CLOCK=cpu, the default: on a loaded machine the wall clock also counts
# the others' time; at 2 threads it adds both threads) or of the wall clock
# (CLOCK=wall).  Ratios: torch / parc and old / parc of fwd + bwd (> 1: parc's
# kernel is faster).
# Usage: bench/bench_attention.sh [build/parc]
#   env: SHAPES ("256:32 1024:8 4096:4", T:BxNH), THREADS ("1 2"), ROUNDS (2),
#        REPS (3), OLD_REV (c8a0cf6), TORCH_PYTHON (/usr/bin/python3), CLOCK (cpu).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
parc=$(realpath "${1:-$root/build/parc}")
build=$(dirname "$parc")
SHAPES=${SHAPES:-256:32 1024:8 4096:4}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-2}
REPS=${REPS:-3}
OLD_REV=${OLD_REV:-c8a0cf6}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
CLOCK=${CLOCK:-cpu}
case $CLOCK in cpu) col=17 ;; wall) col=13 ;; *) echo "bench_attention: CLOCK=$CLOCK is neither cpu nor wall" >&2; exit 2 ;; esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
lib=$build/libparc_rt.a
[ -f "$lib" ] || { echo "bench_attention: no $lib (build the CPU runtime first)" >&2; exit 1; }
command -v mpicc > /dev/null || { echo "bench_attention: no mpicc on PATH" >&2; exit 1; }
have_torch=0
"$TORCH_PYTHON" -c 'import torch' > /dev/null 2>&1 && have_torch=1

# The old kernel: its file and the scratch sizes it was written against.
mkdir -p "$tmp/old"
git -C "$root" show "$OLD_REV:runtime/cpu/prt_cpu_attention.c" > "$tmp/old/prt_cpu_attention.c" &&
    git -C "$root" show "$OLD_REV:runtime/prt_scratch.h" > "$tmp/old/prt_scratch.h" ||
    { echo "bench_attention: cannot read revision $OLD_REV" >&2; exit 1; }
ren="-Dprt_cpu_attention_heads_fwd=prt_old_attention_heads_fwd -Dprt_cpu_attention_heads_bwd=prt_old_attention_heads_bwd"
ren="$ren -Dprt_cpu_attention_dropout=prt_old_attention_dropout"
# a kernel taking the key/value head count after NH (grouped-query attention)
old_kv=; grep -q 'int64_t NH, int64_t KV, int64_t HD' "$tmp/old/prt_cpu_attention.c" && old_kv=-DOLD_KV
cflags="-O2 -fopenmp -I$root/include -I$root/runtime -I$root/runtime/cpu -I/usr/include/x86_64-linux-gnu/openblas-pthread"
mpicc $cflags -I"$tmp/old" $ren -c "$tmp/old/prt_cpu_attention.c" -o "$tmp/old.o" &&
    mpicc $cflags $old_kv "$root/bench/bench_attention.c" "$tmp/old.o" "$lib" -lopenblas -lcjson -lz -lm -o "$tmp/bench_attention" ||
    { echo "bench_attention: building the driver failed" >&2; exit 1; }

cat > "$tmp/torch_att.py" <<'PY'
import math, sys, time
import torch
import torch.nn.functional as F
threads, reps, NH, HD = int(sys.argv[1]), int(sys.argv[2]), 4, 64
torch.set_num_threads(threads)
for spec in sys.argv[3:]:
    T, bnh = (int(x) for x in spec.split(":"))
    B = -(-bnh // NH)
    q, k, v = (torch.randn(B, NH, T, HD, requires_grad=True) for _ in range(3))
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    go = torch.randn(B, NH, T, HD)
    fwd = bwd = fc = bc = 1e30
    for r in range(reps + 1):
        c0, t0 = time.process_time(), time.perf_counter()
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HD))
        y = F.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
        t1, c1 = time.perf_counter(), time.process_time()
        torch.autograd.grad(y, (q, k, v), go)
        t2, c2 = time.perf_counter(), time.process_time()
        if r:
            fwd, bwd, fc, bc = min(fwd, t1 - t0), min(bwd, t2 - t1), min(fc, c1 - c0), min(bc, c2 - c1)
        del s, y
    print(f"attention T {T} B {B} NH {NH} HD {HD} kernel torch fwd_ms {fwd * 1e3:.2f} bwd_ms {bwd * 1e3:.2f} "
          f"fwd_cpu_ms {fc * 1e3:.2f} bwd_cpu_ms {bc * 1e3:.2f}", flush=True)
PY

echo "bench_attention: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bench_attention: torch $([ $have_torch = 1 ] && "$TORCH_PYTHON" -c 'import torch; print(torch.__version__)' || echo 'not found: torch columns n/a'), old kernel = $OLD_REV"
for th in $THREADS; do
    out=$tmp/t$th.txt
    : > "$out"
    for r in $(seq 1 "$ROUNDS"); do
        SHAPES=$SHAPES OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=$th REPS=$REPS "$tmp/bench_attention" >> "$out" 2>&1 ||
            { echo "bench_attention: the driver failed:" >&2; cat "$out" >&2; exit 1; }
        [ $have_torch = 1 ] && OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=$th \
            "$TORCH_PYTHON" "$tmp/torch_att.py" "$th" "$REPS" $SHAPES >> "$out" 2>&1
    done
    echo "threads $th, BLAS kernel $(awk '/^blas_core/ { print $2; exit }' "$out"), $CLOCK ms"
    printf '  %6s %4s %10s %10s %10s %10s %10s %10s %10s %10s\n' T BxNH "parc fwd" "parc bwd" "old fwd" "old bwd" \
        "torch fwd" "torch bwd" "torch/parc" "old/parc"
    # ms, the minimum over the rounds of each (T, kernel); ratios of fwd + bwd
    awk -v col="$col" '/^attention/ { key = $3 SUBSEP $11; f = $col; b = $(col + 2)
                        if (!(key in F) || f < F[key]) F[key] = f
                        if (!(key in Bw) || b < Bw[key]) Bw[key] = b
                        if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3; bnh[$3] = $5 * $7 } }
         function ms(t, k, X) { return ((t, k) in X) ? sprintf("%.2f", X[t, k]) : "n/a" }
         function ratio(t, k) { return ((t, k) in F) ? sprintf("%.2fx", (F[t, k] + Bw[t, k]) / (F[t, "new"] + Bw[t, "new"])) : "n/a" }
         END { for (i = 1; i <= n; i++) { t = order[i]
                 printf "  %6d %4d %10s %10s %10s %10s %10s %10s %10s %10s\n", t, bnh[t], ms(t, "new", F), ms(t, "new", Bw),
                        ms(t, "old", F), ms(t, "old", Bw), ms(t, "torch", F), ms(t, "torch", Bw), ratio(t, "torch"),
                        ratio(t, "old") } }' "$out"
done
