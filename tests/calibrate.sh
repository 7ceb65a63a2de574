#!/usr/bin/env bash
# calibrate.sh PARC — `parc calibrate -o FILE` measures this machine and
# writes a cluster fragment: a gpu line, an intra link and an efficiency
# block (GEMM classes, attention, hbm, norm, activation, softmax, scores,
# optimizer, stream16, gemm16, intra) with every share in (0, 1], the rates of
# the runtime's kernels each share comes from in its comments (the attention
# op's forward and backward times, its modelled matmul time below their sum
# and the scores rate that fits the rest, `scores` of the bandwidth), a 16-bit GEMM rate no
# higher than the fp32 one (this CPU runtime widens 16-bit operands); a
# plan that includes it passes check and
# explains with those efficiencies; a missing -o value is a usage error.
set -u
parc=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$parc" calibrate -o "$tmp/cluster.par" > "$tmp/out" 2>&1 || fail "parc calibrate exited with status $?: $(cat "$tmp/out")"
grep -q '^gpu { memory [0-9]* B; bf16 .* FLOP/s; fp32 .* FLOP/s; hbm .* B/s; }$' "$tmp/cluster.par" || fail "no gpu line"
grep -q '^link intra [0-9.e+]* B/s [0-9.e+-]* s;$' "$tmp/cluster.par" || fail "no intra link"
n='[0-9.]+'
line=$(grep '^efficiency' "$tmp/cluster.par")
echo "$line" | grep -Eq "^efficiency \{ gemm $n $n $n $n; attention $n; hbm $n; norm $n; activation $n; softmax $n; scores $n; optimizer $n; stream16 $n; gemm16 $n $n $n $n; intra $n; inter 1; \}\$" ||
    fail "no efficiency block of the expected keys: $line"
eff=$(echo "$line" | sed 's/[a-z]\+16//g' | grep -oE "$n") # the values, not the 16 of stream16 and gemm16
[ "$(echo $eff | wc -w)" = 18 ] || fail "not 18 values in $line"
grep -q '^# memory GB/s: triad [0-9.]*, add [0-9.]*, layer norm [0-9.]*, GELU [0-9.]*, cross-entropy [0-9.]*, AdamW [0-9.]* (the runtime.s kernels, the bytes the cost model charges them); bf16 add [0-9.]*, GELU [0-9.]*$' \
    "$tmp/cluster.par" || fail "no kernel rates: $(grep '^# memory' "$tmp/cluster.par")"
att=$(grep '^# attention' "$tmp/cluster.par")
read -r fwd bwd mm rate < <(echo "$att" |
    sed -n 's/^# attention (the runtime.s op, 8x256 tokens, 8 heads of 32, causal, probabilities kept) ms: forward \([0-9.]*\), backward \([0-9.]*\); its matmuls as modelled \([0-9.]*\); the rest over the 117.4 MB of scores the cost model charges: \([0-9.]*\) GB\/s$/\1 \2 \3 \4/p')
[ -n "${rate:-}" ] || fail "no attention line: $att"
# the scores share is the rate over the bandwidth (hbm), and that rate fits
# the measured time less the modelled matmuls (at most the bandwidth, when
# the matmuls alone take longer than the kernel)
hbm=$(sed -n 's/^gpu { .* hbm \(.*\) B\/s; }$/\1/p' "$tmp/cluster.par")
# the matmuls as the cost model charges them: 12 x 8 x 8 x 256 x 256 x 32 FLOPs at
# the 256x256x64 GEMM rate (at most the fp32 peak)
agemm=$(sed -n 's/^# GEMM GFLOP\/s: .*; 256x256x64 \([0-9.]*\)$/\1/p' "$tmp/cluster.par")
peak=$(sed -n 's/^gpu { .* fp32 \(.*\) FLOP\/s; hbm .*/\1/p' "$tmp/cluster.par")
awk -v m="${mm:-0}" -v g="${agemm:-0}" -v p="${peak:-0}" 'BEGIN { if (g * 1e9 > p) g = p / 1e9
    want = 12 * 8 * 8 * 256 * 256 * 32 / (g * 1e6); exit !(g > 0 && (m - want) ^ 2 <= (0.002 * want) ^ 2) }' ||
    fail "attention matmuls as modelled $mm ms, not its FLOPs at the 256x256x64 rate $agemm GFLOP/s"
scores=$(echo "$line" | sed -n 's/.* scores \([0-9.]*\);.*/\1/p')
awk -v f="${fwd:-0}" -v b="${bwd:-0}" -v m="${mm:-0}" -v r="${rate:-0}" -v h="${hbm:-0}" -v s="${scores:-0}" 'BEGIN {
    fit = f + b - m > 0 ? 117.4 / (f + b - m) : h / 1e9; if (fit > h / 1e9) fit = h / 1e9
    exit !(f > 0 && b > 0 && m > 0 && r > 0 && (r - fit) ^ 2 <= (0.01 * fit) ^ 2 && (s - r * 1e9 / h) ^ 2 <= (0.002 + 0.01 * s) ^ 2) }' ||
    fail "attention: forward $fwd + backward $bwd - matmuls $mm ms over 117.4 MB is not $rate GB/s, or scores $scores is not it over hbm $hbm B/s"
grep -q '^# bf16 GEMM GFLOP/s (operands widened to fp32, the result added into and rounded), the same shapes: [0-9.]*, [0-9.]*, [0-9.]*, [0-9.]*$' \
    "$tmp/cluster.par" || fail "no bf16 GEMM rates"
read -r bf16 fp32 < <(sed -n 's/^gpu { memory [0-9]* B; bf16 \(.*\) FLOP\/s; fp32 \(.*\) FLOP\/s; hbm .*/\1 \2/p' "$tmp/cluster.par")
awk -v a="${bf16:-0}" -v b="${fp32:-0}" 'BEGIN { exit !(a > 0 && a <= b) }' || fail "bf16 $bf16 FLOP/s not in (0, fp32 $fp32]"
for v in $eff; do
    awk -v v="$v" 'BEGIN { exit !(v > 0 && v <= 1) }' || fail "efficiency $v outside (0, 1]"
done
sed -e "s|include \"common/tiny_cluster.par\";|include \"$tmp/cluster.par\";|" \
    -e "s|include \"common/|include \"$root/examples/common/|" "$root/examples/tiny_dp.par" > "$tmp/plan.par"
"$parc" check "$tmp/plan.par" > /dev/null || fail "a plan including the fragment does not pass check"
"$parc" explain "$tmp/plan.par" --verbose | grep -q "efficiencies the plan's ($tmp/cluster.par:" ||
    fail "explain does not name the calibrated efficiencies"
"$parc" calibrate -o > /dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || fail "parc calibrate -o without a file exited with $rc, expected 2"
echo "calibrate: $fails failures"
[ "$fails" = 0 ]
