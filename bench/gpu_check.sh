#!/usr/bin/env bash
# gpu_check.sh [BUNDLE] — the CUDA backend on one GPU, in one command, from the
# bundle bench/gpu_bundle.sh made on the CPU machine (default build/gpu-bundle;
# .ci/build makes it).  The GPU machine needs the NVIDIA driver, the CUDA
# toolkit's libraries (CUDA_HOME, default /usr/local/cuda) and, for NCCL and the
# PyTorch peer, python3 with torch and the nvidia-nccl wheel; no MPI, no
# OpenBLAS, nothing to build with.
#   0. probe: nvidia-smi's GPU, driver and the CUDA version the driver runs,
#      against the cudart the bundle was built for; every library the bundle's
#      CUDA module needs resolves; one step on the GPU starts.  Any failure
#      stops here at once, naming the library, the versions or the error;
#   1. every op forward/backward vs the CPU path (bin/test_gpu_ops: relative
#      error, f32 <= 1e-4, bf16 <= 1e-2, f16 <= 2e-3, unwritten outputs), with
#      PRT_COLLECTIVES=nccl (a one-rank NCCL communicator through the runtime's
#      code path) and =mpi (host-staged, the single-process MPI);
#   2. loss curves on the GPU vs the CPU run of the same program: tiny_single
#      (fp32, 1e-4 relative per step) and tiny_bf16 (5e-3);
#   3. --memory on the GPU: measured ledger == the compiler's per class;
#   4. throughput of gpt2_124m_gpu (tokens/s, MFU at 989 TFLOP/s bf16) vs
#      PyTorch eager and torch.compile on the same GPU in the same run
#      (GPU_CHECK_COMPILE=0 leaves torch.compile out);
#   5. bin/parc_calibrate --device cuda: the GPU measured through the CUDA
#      backend as a cluster fragment (peaks, shape classes' efficiencies),
#      kept as bench/results/gpu-calibrate-<date>.par (information).
# Fallback: when the bundle's CUDA module or programs do not run here (a
# driver, toolkit or C library the bundle was not built for), bench/gpu_build.sh
# compiles the CUDA module and test_gpu_ops here with nvcc and cmake (no MPI,
# BLAS or LLVM); with the new module in a copy of the bundle checks 1-3 run
# (not 4), or only check 1 when the bundle's programs do not start at all.
# GPU_CHECK_FALLBACK=1 takes that path whatever the probe finds.
#
# Time: each check runs under its own timeout, and the timeouts are the
# budget below: their sum bounds the whole run, under 9 minutes on one GPU by
# construction (the script refuses to start when the sum of the path it takes
# is over 540 s).  Each row of the table (with its seconds and limit) is
# appended to bench/results/gpu-<date>.md as it finishes, under a header
# naming the GPU, the driver and the commit.  Exit status 0 when every check of
# 0-3 passes (4 is information).
# --dry-run (first argument): on a machine without a GPU, what the script can
# check before it needs one: the budget printed and under 9 minutes on every
# path, the bundle's programs starting, its CUDA module's libraries resolving,
# and one step with --device cuda refused in one line, exit status 2, within
# its timeout (no crash, no hang; a step that runs means a GPU is here).  It writes nothing under bench/results and
# exits 0 when all of that holds.
set -uo pipefail
dry=0
[ "${1:-}" = --dry-run ] && { dry=1; shift; }
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bundle=$(cd "${1:-$root/build/gpu-bundle}" 2> /dev/null && pwd) || { echo "gpu_check: no bundle ${1:-build/gpu-bundle}: run bench/gpu_bundle.sh on the CPU machine"; exit 1; }
bin=$bundle/bin lib=$bundle/lib
PY=${PYTHON:-python3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

# ---------------------------------------------------------------- the budget (seconds)
T_QUERY=5         # nvidia-smi once; bin/tiny_single --help once
T_PY=10           # python3 locating the NCCL wheel
T_PROBE=30        # one step on the GPU (twice on the fallback paths: before and after the build)
T_BUILD=80        # the fallback build (bench/gpu_build.sh)
T_OPS=40          # test_gpu_ops, once per collectives path (2)
T_CURVE=12        # one program's run on the CPU or the GPU (2 plans x 2)
T_MEM=15          # --memory of the tiny plans; gpt2_124m_gpu gets 2 x T_MEM
T_GPT2=45         # gpt2_124m_gpu's 8 steps
T_TORCH=45        # PyTorch eager on the same model
T_COMPILE=120     # the same under torch.compile (its compilation included)
T_CALIB=30        # bin/parc_calibrate --device cuda (cuBLAS GEMM classes, the ops' bandwidths, attention)
budget() {  # the sum of the timeouts on a path: $1 = bundle | rebuilt | build-only
    local common=$((2 * T_QUERY + T_PY))
    case $1 in
    bundle) echo $((common + T_PROBE + 2 * T_OPS + 4 * T_CURVE + 4 * T_MEM + T_GPT2 + T_TORCH + T_COMPILE + T_CALIB)) ;;
    rebuilt) echo $((common + 2 * T_PROBE + T_BUILD + 2 * T_OPS + 4 * T_CURVE + 4 * T_MEM)) ;;
    build-only) echo $((common + 2 * T_PROBE + T_BUILD + 2 * T_OPS)) ;;
    esac
}
for p in bundle rebuilt build-only; do
    [ "$(budget $p)" -lt 540 ] || { echo "gpu_check: the $p path's timeouts sum to $(budget $p) s, not under 9 minutes"; exit 1; }
done

echo "gpu_check: budget: bundle $(budget bundle) s, rebuilt $(budget rebuilt) s, build-only $(budget build-only) s (each under 540)"
out=bench/results/gpu-$(date -u +%Y-%m-%d).md
[ $dry = 1 ] && out=$tmp/gpu-dry-run.md
row() {  # check result verdict [seconds limit]
    local t=${4:+$4 s of $5}
    printf '%-44s %-34s %s %s\n' "$1" "$2" "$3" "$t"
    echo "| $1 | $2 | $3 | ${t:--} |" >> "$out"
    [ "$3" = ok ] || [ "$3" = info ] || fail=1
}
stop() { row "$1" "$2" FAIL; echo "gpu_check: FAIL (stopped at: $1)"; exit 1; }
# timed LIMIT OUTFILE CMD...: runs CMD under timeout LIMIT, output to OUTFILE; sets rc and secs
timed() {
    local limit=$1 file=$2 t0; shift 2
    t0=$(date +%s.%N)
    timeout "$limit" "$@" > "$file" 2>&1; rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    [ $rc = 124 ] && echo "(timed out after $limit s)" >> "$file"
}

smi=$(timeout "$T_QUERY" nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1; echo "rc=$?")
gpu=$(grep -v '^rc=' <<< "$smi" | head -1)
if [ $dry = 1 ]; then
    gpu="no GPU (dry run)"
elif ! grep -q '^rc=0$' <<< "$smi" || [ -z "$gpu" ]; then
    echo "gpu_check: FAIL: nvidia-smi lists no GPU: $gpu"
    exit 1
fi
[ $dry = 1 ] || mkdir -p bench/results
commit=$(sed -n 's/^gpu bundle of parc \([^,]*\),.*/\1/p' "$bundle/MANIFEST")
tree=$(git rev-parse --short HEAD 2> /dev/null || echo "$commit (the bundle's; no git here)")
{
    echo "# bench/gpu_check.sh — $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "GPU: ${gpu} · bundle of commit ${commit:-?} · checked from ${tree}"
    echo
    echo "| check | result | verdict | time (limit) |"
    echo "|---|---|---|---|"
} > "$out"
echo "gpu_check: ${gpu} | bundle $commit | $(date -u +%Y-%m-%dT%H:%MZ)"

echo "== 0. probe (budget: bundle $(budget bundle) s, rebuilt $(budget rebuilt) s, build-only $(budget build-only) s)"
driver_cuda=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' <<< "$(timeout "$T_QUERY" nvidia-smi 2> /dev/null)" | head -1)
want=$(sed -n 's/.*needs at run time:.*libcudart\.so\.\([0-9]*\).*/\1/p' "$bundle/MANIFEST")
cuda_home=${CUDA_HOME:-/usr/local/cuda}
libdirs=$lib
for d in "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home/targets/x86_64-linux/lib"; do [ -d "$d" ] && libdirs=$libdirs:$d; done
nccl_pkg=$(timeout "$T_PY" "$PY" -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2> /dev/null)
nccl_dir=${nccl_pkg:+$nccl_pkg/lib}
[ -n "$nccl_dir" ] && [ -d "$nccl_dir" ] && libdirs=$libdirs:$nccl_dir
export LD_LIBRARY_PATH=$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -n "$driver_cuda" ] && [ -n "$want" ] && [ "${driver_cuda%%.*}" -lt "$want" ] && [ "${GPU_CHECK_FALLBACK:-0}" != 1 ]; then
    echo "gpu_check: driver $(echo "$gpu" | cut -d, -f2) runs CUDA $driver_cuda; the bundle needs cudart $want: building here"
    GPU_CHECK_FALLBACK=1
fi
why=
hosts=1  # the bundle's programs start on this machine's C library
timeout "$T_QUERY" "$bin/tiny_single" --help > "$tmp/help.out" 2>&1; rc=$?
[ $rc = 0 ] || [ $rc = 2 ] || { hosts=0; why="bin/tiny_single does not start here (exit $rc: $(head -1 "$tmp/help.out"))"; }
if [ -z "$why" ]; then
    missing=$(ldd "$lib/libparc_cuda_serial.so" "$bin/test_gpu_ops" | awk '/not found/ { print $1 }' | sort -u | tr '\n' ' ')
    [ -z "$missing" ] || why="not found: $missing(searched $LD_LIBRARY_PATH)"
fi
if [ $dry = 1 ]; then
    [ -z "$why" ] || { echo "gpu_check --dry-run: FAIL: $why"; exit 1; }
    timed "$T_PROBE" "$tmp/probe.out" "$bin/tiny_single" --device cuda --steps 1 --quiet
    [ $rc = 0 ] && { echo "gpu_check --dry-run: ok: a GPU ran the step here; run gpu_check.sh without --dry-run"; exit 0; }
    msg=$(grep -m1 'error' "$tmp/probe.out")
    lines=$(grep -c . "$tmp/probe.out")
    if [ $rc != 2 ] || [ -z "$msg" ] || [ "$lines" != 1 ]; then
        echo "gpu_check --dry-run: FAIL: one step with --device cuda and no GPU: exit $rc after $secs s, $lines lines:"
        cat "$tmp/probe.out"
        exit 1
    fi
    echo "gpu_check --dry-run: ok: the bundle's programs start, its CUDA module's libraries resolve, and with no GPU"
    echo "  one step with --device cuda stops in $secs s with exit 2 and one line: $msg"
    exit 0
fi
if [ -z "$why" ] && [ "${GPU_CHECK_FALLBACK:-0}" != 1 ]; then
    timed "$T_PROBE" "$tmp/probe.out" "$bin/tiny_single" --device cuda --steps 1 --quiet
    [ $rc = 0 ] || why="one step on the GPU: exit $rc: $(grep -m1 error "$tmp/probe.out" || tail -1 "$tmp/probe.out")"
fi
[ "${GPU_CHECK_FALLBACK:-0}" = 1 ] && why=${why:-GPU_CHECK_FALLBACK=1}
path=bundle
if [ -n "$why" ]; then
    row "probe: the bundle" "$why" info
    echo "== 0b. fallback: the CUDA module and test_gpu_ops built here"
    timed "$T_BUILD" "$tmp/build.out" env NCCL_ROOT="${nccl_pkg:-}" bash bench/gpu_build.sh "$bundle" "$tmp/gb"
    tail -3 "$tmp/build.out"
    [ $rc = 0 ] || stop "fallback build (bench/gpu_build.sh)" "exit $rc: $(grep -m1 -E 'error|failed' "$tmp/build.out")"
    row "fallback build (bench/gpu_build.sh)" "$(grep -o 'CUDA [0-9.]*' "$tmp/build.out" | head -1), NCCL $(grep -o 'NCCL [A-Z]*' "$tmp/build.out" | head -1 | cut -d' ' -f2)" ok "$secs" "$T_BUILD"
    cp -r "$bundle" "$tmp/bundle"
    bundle=$tmp/bundle bin=$tmp/bundle/bin lib=$tmp/bundle/lib
    cp "$tmp/gb/libparc_cuda_serial.so" "$lib/"
    cp "$tmp/gb/test_gpu_ops" "$bin/test_gpu_ops"
    export LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH
    path=build-only
    if [ $hosts = 1 ]; then
        timed "$T_PROBE" "$tmp/probe.out" "$bin/tiny_single" --device cuda --steps 1 --quiet
        [ $rc = 0 ] && path=rebuilt
        [ $rc = 0 ] || why="the bundle's programs with the module built here: one step on the GPU: exit $rc: $(grep -m1 error "$tmp/probe.out" || tail -1 "$tmp/probe.out")"
    fi
fi
grep -q "needs at run time:.*libnccl" "$bundle/MANIFEST" || [ "$path" != bundle ] ||
    stop "probe: NCCL" "the bundle's CUDA module was built without NCCL (the CPU machine's build found none)"
row "probe" "${gpu}; driver runs CUDA ${driver_cuda:-?}, cudart ${want:-?}; NCCL from ${nccl_dir:-the toolkit}; path $path ($(budget $path) s budget)" \
    "$([ "$path" = build-only ] && echo "FAIL: only check 1 can run" || echo ok)"

echo "== 1. ops vs CPU, NCCL one rank"
for coll in nccl mpi; do
    PRT_COLLECTIVES=$coll timed "$T_OPS" "$tmp/ops_$coll.txt" "$bin/test_gpu_ops"
    grep -E "FAIL|error" "$tmp/ops_$coll.txt" | head -20
    worst=$(awk '$0 ~ / rel / { for (i = 1; i <= NF; i++) if ($i == "rel") { v = $(i + 1) + 0; if (v > w) { w = v; n = $1 " " $2 " " $3 } } }
                 END { printf "%.1e (%s)", w, n }' "$tmp/ops_$coll.txt")
    row "ops + collectives, PRT_COLLECTIVES=$coll" "$(tail -1 "$tmp/ops_$coll.txt" | sed 's/test_gpu_ops: //'); worst $worst" \
        "$([ $rc = 0 ] && echo ok || echo "FAIL rc=$rc")" "$secs" "$T_OPS"
done
if [ "$path" = build-only ]; then
    echo; cat "$out"; echo; echo "written to $out"; echo "gpu_check: FAIL (checks 2-4 not run: $why)"
    exit 1
fi

echo "== 2. loss curves GPU vs CPU"
curve() {  # program tol
    local name=$1 tol=$2 cpu_secs
    PRT_LOSS_FILE=$tmp/$name.cpu timed "$T_CURVE" "$tmp/$name.cpu.out" "$bin/$name" --quiet
    [ $rc = 0 ] || { tail -3 "$tmp/$name.cpu.out"; row "loss $name" "CPU run rc=$rc" FAIL "$secs" "$T_CURVE"; return; }
    cpu_secs=$secs
    PRT_LOSS_FILE=$tmp/$name.gpu timed "$T_CURVE" "$tmp/$name.gpu.out" "$bin/$name" --quiet --device cuda
    [ $rc = 0 ] || { tail -3 "$tmp/$name.gpu.out"; row "loss $name" "GPU run rc=$rc" FAIL "$secs" "$T_CURVE"; return; }
    local res; res=$(paste "$tmp/$name.cpu" "$tmp/$name.gpu" | awk -v tol="$tol" '
        { d = $2 - $4; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1); if (r > w) w = r; n++; last = $4 }
        END { printf "%s %d %.2e %s", (n >= 2 && w <= tol) ? "ok" : "FAIL", n, w, last }')
    set -- $res
    row "loss $name (GPU vs CPU)" "$2 steps, max rel $3 (tol $tol), final $4" "$1" "$cpu_secs + $secs" "2 x $T_CURVE"
}
curve tiny_single 1e-4
curve tiny_bf16 5e-3

echo "== 3. --memory on the GPU"
for name in tiny_single tiny_bf16 gpt2_124m_gpu; do
    limit=$T_MEM; [ $name = gpt2_124m_gpu ] && limit=$((2 * T_MEM))
    timed "$limit" "$tmp/$name.mem" "$bin/$name" --device cuda --steps 1 --memory --quiet
    grep -E "MISMATCH|error" "$tmp/$name.mem" | head -5
    row "--memory $name" "rc=$rc, $(grep -c ' ok$' "$tmp/$name.mem") classes ok" \
        "$([ $rc = 0 ] && ! grep -q MISMATCH "$tmp/$name.mem" && echo ok || echo FAIL)" "$secs" "$limit"
done

if [ "$path" = rebuilt ]; then
    row "throughput" "not run on the fallback path (its budget goes to the build)" info
    echo; cat "$out"; echo; echo "written to $out"
    echo "gpu_check: $([ $fail = 0 ] && echo ok || echo FAIL)"
    exit $fail
fi

echo "== 4. throughput: gpt2_124m_gpu"
median_ms() {
    awk -F'|' '/^step [0-9]+(\/[0-9]+)? \|/ { split($1, a, "[ /]"); if (a[2] >= 3) for (i = NF; i > 1; i--) if ($i ~ / ms *$/) { gsub(/ ms/, "", $i); print $i + 0; break } }' "$1" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print v[int((NR + 1) / 2)] }'
}
tokens=32768; flops_tok=$(awk 'BEGIN { print 6 * 124.44e6 + 6 * 12 * 1024 * 768 }')  # 6N + causal attention
timed "$T_GPT2" "$tmp/gpt2.out" "$bin/gpt2_124m_gpu" --device cuda --steps 8
ms=$(median_ms "$tmp/gpt2.out")
tok_parc=$(awk -v ms="$ms" -v t=$tokens 'BEGIN { if (ms == "nan") print 0; else printf "%.0f", t / ms * 1000 }')
mfu() { awk -v tps="$1" -v f="$flops_tok" 'BEGIN { printf "%.1f%%", tps * f / 989e12 * 100 }'; }
row "parc gpt2_124m bf16 (B=32, T=1024)" "$tok_parc tok/s, $ms ms/step, MFU $(mfu "$tok_parc")" \
    "$([ $rc = 0 ] && echo info || echo "FAIL rc=$rc")" "$secs" "$T_GPT2"
[ $rc = 0 ] || tail -5 "$tmp/gpt2.out"
cat > "$tmp/torch_gpt2.py" <<'PYEOF'
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
if not torch.cuda.is_available(): sys.exit("torch %s sees no CUDA device" % torch.__version__)
mode = sys.argv[1]; B, T, V, C, L, H = 32, 1024, 50257, 768, 12, 12
class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.ln1 = nn.LayerNorm(C); s.qkv = nn.Linear(C, 3 * C); s.proj = nn.Linear(C, C)
        s.ln2 = nn.LayerNorm(C); s.up = nn.Linear(C, 4 * C); s.down = nn.Linear(4 * C, C)
    def forward(s, x):
        q, k, v = s.qkv(s.ln1(x)).view(x.shape[0], T, 3, H, C // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(x.shape)
        x = x + s.proj(a)
        return x + s.down(F.gelu(s.up(s.ln2(x)), approximate="tanh"))
class GPT(nn.Module):
    def __init__(s):
        super().__init__(); s.wte = nn.Embedding(V, C); s.wpe = nn.Embedding(T, C)
        s.h = nn.ModuleList(Block() for _ in range(L)); s.lnf = nn.LayerNorm(C)
    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(T, device=idx.device))
        for b in s.h: x = b(x)
        return F.cross_entropy((s.lnf(x) @ s.wte.weight.t()).float().view(-1, V), tgt.view(-1))
m = GPT().cuda(); opt = torch.optim.AdamW(m.parameters(), lr=6e-4, weight_decay=0.0, fused=True)
step = torch.compile(m) if mode == "compile" else m
idx = torch.randint(0, V, (B, T), device="cuda"); tgt = torch.randint(0, V, (B, T), device="cuda")
times = []
for i in range(10):
    torch.cuda.synchronize(); t = time.time()
    with torch.autocast("cuda", dtype=torch.bfloat16): loss = step(idx, tgt)
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize(); times.append(time.time() - t)
times = sorted(times[3:]); print("TOKS %.0f" % (B * T / times[len(times) // 2]))
PYEOF
modes="eager compile"; [ "${GPU_CHECK_COMPILE:-1}" = 0 ] && modes=eager
for mode in $modes; do
    limit=$T_TORCH; [ $mode = compile ] && limit=$T_COMPILE
    timed "$limit" "$tmp/torch_$mode.out" "$PY" "$tmp/torch_gpt2.py" $mode
    tps=$(sed -n 's/^TOKS //p' "$tmp/torch_$mode.out")
    if [ -n "$tps" ]; then
        row "torch $mode gpt2_124m bf16 autocast" "$tps tok/s, MFU $(mfu "$tps"); parc/torch $(awk -v a="$tok_parc" -v b="$tps" 'BEGIN { printf "%.2fx", a / b }')" \
            info "$secs" "$limit"
    else row "torch $mode ($PY)" "no comparison: $(tail -1 "$tmp/torch_$mode.out")" info "$secs" "$limit"; fi
done

echo "== 5. parc calibrate --device cuda (the GPU as a cluster fragment)"
cal=bench/results/gpu-calibrate-$(date -u +%Y-%m-%d).par
timed "$T_CALIB" "$tmp/calib.out" "$bin/parc_calibrate" --device cuda "$tmp/calib.par"
if [ $rc = 0 ] && grep -q '^gpu {' "$tmp/calib.par" 2> /dev/null; then
    cp "$tmp/calib.par" "$cal"
    cat "$cal"
    peaks=$(sed -n 's/^gpu { memory \([0-9]*\) B; bf16 \(.*\) FLOP\/s; fp32 \(.*\) FLOP\/s; hbm \(.*\) B\/s; }$/\1 \2 \3 \4/p' "$cal" |
        awk '{ printf "bf16 %.0f, fp32 %.0f TFLOP/s; hbm %.0f GB/s; %.0f GiB", $2 / 1e12, $3 / 1e12, $4 / 1e9, $1 / 2^30 }')
    row "calibrate --device cuda (written to $cal)" "$peaks" info "$secs" "$T_CALIB"
else
    row "calibrate --device cuda" "exit $rc: $(tail -1 "$tmp/calib.out")" info "$secs" "$T_CALIB"
    tail -5 "$tmp/calib.out"
fi

echo; cat "$out"; echo; echo "written to $out"
echo "gpu_check: $([ $fail = 0 ] && echo ok || echo FAIL)"
exit $fail
