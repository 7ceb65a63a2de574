#!/usr/bin/env bash
# calibrate.sh PARC — `parc calibrate -o FILE` measures this machine and
# writes a cluster fragment: a gpu line, an intra link and an efficiency
# block (GEMM classes, attention, hbm, norm, activation, softmax, optimizer,
# stream16, gemm16, intra) with every share in (0, 1], the rates of the runtime's
# kernels each share comes from in its comments, a 16-bit GEMM rate no
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
echo "$line" | grep -Eq "^efficiency \{ gemm $n $n $n $n; attention $n; hbm $n; norm $n; activation $n; softmax $n; optimizer $n; stream16 $n; gemm16 $n $n $n $n; intra $n; inter 1; \}\$" ||
    fail "no efficiency block of the expected keys: $line"
eff=$(echo "$line" | sed 's/[a-z]\+16//g' | grep -oE "$n") # the values, not the 16 of stream16 and gemm16
[ "$(echo $eff | wc -w)" = 17 ] || fail "not 17 values in $line"
grep -q '^# memory GB/s: triad [0-9.]*, add [0-9.]*, layer norm [0-9.]*, GELU [0-9.]*, cross-entropy [0-9.]*, AdamW [0-9.]* (the runtime.s kernels, the bytes the cost model charges them); bf16 add [0-9.]*, GELU [0-9.]*$' \
    "$tmp/cluster.par" || fail "no kernel rates: $(grep '^# memory' "$tmp/cluster.par")"
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
