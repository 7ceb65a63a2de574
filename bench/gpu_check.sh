#!/usr/bin/env bash
# gpu_check.sh — the CUDA backend on one GPU, in one command (about 5-8 minutes on
# an H200; builds what it needs with .ci/build):
#   1. every op forward/backward vs the CPU path (tests/gpu/test_gpu_ops.c: relative
#      error, f32 <= 1e-4, bf16 <= 1e-2, f16 <= 2e-3, plus unwritten-output NaN checks);
#   2. loss curves on the GPU vs the CPU runs of the same plans: tiny_single (fp32,
#      1e-4 relative per step), tiny_bf16 (5e-3), and the dp / tp / pp / zero3 layouts
#      on one GPU with PRT_COLLECTIVES=mpi (1e-4);
#   3. --memory on the GPU: measured ledger == the compiler's (exit status 0, no MISMATCH);
#   4. throughput of bench/plans/gpt2_124m_gpu.par (tokens/s, MFU at 989 TFLOP/s bf16)
#      vs PyTorch eager and torch.compile on the same GPU when torch with CUDA is there;
#   5. NCCL with a single rank through the runtime's NCCL code path (part of 1).
# Prints a table at the end and writes it to bench/results/gpu-<date>.md.
# Exit status: 0 when every check of 1-3 and 5 passes.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export PATH=$PATH:/usr/local/cuda/bin
PY=${PYTHON:-python3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
rows=(); fail=0
row() { rows+=("| $1 | $2 | $3 |"); printf '%-44s %-34s %s\n' "$1" "$2" "$3"; [ "$3" = ok ] || [ "$3" = info ] || fail=1; }

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo "+dirty")
echo "gpu_check: ${gpu:-no GPU found} | commit $commit | $(date -u +%Y-%m-%dT%H:%MZ)"
[ -n "$gpu" ] || { echo "gpu_check: nvidia-smi lists no GPU"; exit 1; }

echo "== build"; t0=$(date +%s)
.ci/build > "$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log"; echo "gpu_check: build failed"; exit 1; }
grep '^-- parc' build.configure.log
row "build (.ci/build)" "$(( $(date +%s) - t0 )) s" ok
parc=$root/build/parc

echo "== 1. ops vs CPU, 5. NCCL one rank"
for coll in nccl mpi; do
    PRT_COLLECTIVES=$coll timeout 300 mpirun -np 1 build/tests/gpu_test_gpu_ops > "$tmp/ops_$coll.txt" 2>&1; rc=$?
    grep -E "FAIL|error" "$tmp/ops_$coll.txt" | head -20
    worst=$(awk '$0 ~ / rel / { for (i = 1; i <= NF; i++) if ($i == "rel") { v = $(i + 1) + 0; if (v > w) { w = v; n = $1 " " $2 " " $3 } } }
                 END { printf "%.1e (%s)", w, n }' "$tmp/ops_$coll.txt")
    row "ops + collectives, PRT_COLLECTIVES=$coll" "$(tail -1 "$tmp/ops_$coll.txt" | sed 's/test_gpu_ops: //'); worst $worst" "$([ $rc = 0 ] && echo ok || echo "FAIL rc=$rc")"
done

echo "== 2. loss curves GPU vs CPU"
ranks() { "$parc" check "$1" 2>/dev/null | sed -n 's/.*ok: \([0-9]*\) rank.*/\1/p'; }
curve() {  # plan tol extra-env...
    local plan=$1 tol=$2; shift 2
    local extra="$*" name; name=$(basename "$plan" .par)
    "$parc" build "$plan" -o "$tmp/$name" > "$tmp/$name.build" 2>&1 || { row "loss $name" "parc build failed" FAIL; return; }
    local np; np=$(ranks "$plan"); np=${np:-1}
    PRT_LOSS_FILE=$tmp/$name.cpu timeout 300 mpirun -np "$np" --oversubscribe "$tmp/$name" --quiet > "$tmp/$name.cpu.out" 2>&1
    env "$@" PRT_LOSS_FILE=$tmp/$name.gpu timeout 300 mpirun -np "$np" --oversubscribe "$tmp/$name" --quiet --device cuda \
        > "$tmp/$name.gpu.out" 2>&1; local rc=$?
    if [ $rc != 0 ]; then tail -5 "$tmp/$name.gpu.out"; row "loss $name ($np rank, GPU $extra)" "GPU run rc=$rc" FAIL; return; fi
    local res; res=$(paste "$tmp/$name.cpu" "$tmp/$name.gpu" | awk -v tol="$tol" '
        { d = $2 - $4; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1); if (r > w) w = r; n++; last = $4 }
        END { printf "%s %d %.2e %s", (n >= 2 && w <= tol) ? "ok" : "FAIL", n, w, last }')
    set -- $res
    row "loss $name ($np rank$( [ "$np" = 1 ] || echo s ) $extra)" "$2 steps, max rel $3 (tol $tol), final $4" "$1"
}
curve examples/tiny_single.par 1e-4
curve examples/tiny_bf16.par 5e-3
for p in tiny_dp tiny_tp tiny_pp_1f1b tiny_zero3; do curve "examples/$p.par" 1e-4 PRT_COLLECTIVES=mpi; done

echo "== 3. --memory on the GPU"
for p in examples/tiny_single.par examples/tiny_bf16.par bench/plans/gpt2_124m_gpu.par; do
    name=$(basename "$p" .par)
    [ -x "$tmp/$name" ] || "$parc" build "$p" -o "$tmp/$name" > /dev/null 2>&1
    timeout 300 mpirun -np 1 "$tmp/$name" --device cuda --steps 1 --memory --quiet > "$tmp/$name.mem" 2>&1; rc=$?
    grep -E "MISMATCH|error" "$tmp/$name.mem" | head -5
    row "--memory $name" "rc=$rc, $(grep -c ' ok$' "$tmp/$name.mem") classes ok" \
        "$([ $rc = 0 ] && ! grep -q MISMATCH "$tmp/$name.mem" && echo ok || echo FAIL)"
done

echo "== 4. throughput: gpt2_124m_gpu"
median_ms() {
    awk -F'|' '/^step [0-9]+ \|/ { split($1, a, " "); if (a[2] >= 3) { gsub(/ ms/, "", $NF); print $NF + 0 } }' "$1" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print v[int((NR + 1) / 2)] }'
}
tokens=32768; flops_tok=$(awk 'BEGIN { print 6 * 124.44e6 + 6 * 12 * 1024 * 768 }')  # 6N + causal attention
timeout 300 mpirun -np 1 "$tmp/gpt2_124m_gpu" --device cuda --steps 8 > "$tmp/gpt2.out" 2>&1; rc=$?
ms=$(median_ms "$tmp/gpt2.out")
tok_parc=$(awk -v ms="$ms" -v t=$tokens 'BEGIN { if (ms == "nan") print 0; else printf "%.0f", t / ms * 1000 }')
mfu() { awk -v tps="$1" -v f="$flops_tok" 'BEGIN { printf "%.1f%%", tps * f / 989e12 * 100 }'; }
row "parc gpt2_124m bf16 (B=32, T=1024)" "$tok_parc tok/s, $ms ms/step, MFU $(mfu "$tok_parc")" "$([ $rc = 0 ] && echo info || echo "FAIL rc=$rc")"
[ $rc = 0 ] || tail -5 "$tmp/gpt2.out"
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1; then
    cat > "$tmp/torch_gpt2.py" <<'PYEOF'
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
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
    for mode in eager compile; do
        timeout 400 "$PY" "$tmp/torch_gpt2.py" $mode > "$tmp/torch_$mode.out" 2>&1
        tps=$(sed -n 's/^TOKS //p' "$tmp/torch_$mode.out")
        if [ -n "$tps" ]; then
            row "torch $mode gpt2_124m bf16 autocast" "$tps tok/s, MFU $(mfu "$tps"); parc/torch $(awk -v a="$tok_parc" -v b="$tps" 'BEGIN { printf "%.2fx", a / b }')" info
        else row "torch $mode" "failed: $(tail -1 "$tmp/torch_$mode.out")" info; fi
    done
else
    row "torch" "not available with CUDA ($PY): no PyTorch comparison" info
fi

mkdir -p bench/results
out=bench/results/gpu-$(date -u +%Y-%m-%d).md
{
    echo "# bench/gpu_check.sh — $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "GPU: ${gpu} · commit ${commit}"
    echo
    echo "| check | result | verdict |"
    echo "|---|---|---|"
    printf '%s\n' "${rows[@]}"
} > "$out"
echo; cat "$out"; echo; echo "written to $out"
echo "gpu_check: $([ $fail = 0 ] && echo ok || echo FAIL)"
exit $fail
