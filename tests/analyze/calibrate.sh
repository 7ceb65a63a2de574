#!/usr/bin/env bash
# calibrate.sh PARC — `parc calibrate -o FILE` measures this machine and
# writes a cluster fragment: a gpu line, an intra link and an efficiency
# block (GEMM classes, attention, hbm, norm, activation, softmax, scores,
# optimizer, stream16, gemm16, intra) with every share in (0, 1], `overlap` in
# [0, 1] (the mean of a started all-reduce's and gathers' hidden shares), the rates of
# the runtime's kernels each share comes from in its comments (the attention
# op's forward and backward times, its modelled matmul time below their sum
# and the scores rate that fits the rest, `scores` of the bandwidth), a 16-bit GEMM rate no
# higher than the fp32 one (this CPU runtime widens 16-bit operands); a
# plan that includes it passes check and
# explains with those efficiencies; the link is the median of the fast ones of
# 4 launches (each launch's transport its own); a missing -o value is a usage error.
# --device cpu --ranks 2 measures every figure through the runtime's backend
# (the path --device cuda takes on a GPU): its peak, shares and link follow
# from its printed measurements the same way; bad --device/--ranks are usage
# errors that leave the -o file alone.
set -u
parc=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$parc" calibrate -o "$tmp/cluster.par" > "$tmp/out" 2>&1 || fail "parc calibrate exited with status $?: $(cat "$tmp/out")"
grep -q '^gpu { memory [0-9]* B; bf16 .* FLOP/s; fp32 .* FLOP/s; hbm .* B/s; }$' "$tmp/cluster.par" || fail "no gpu line"
grep -Eq '^calibrated "cpu .+, [0-9]+ cores?";$' "$tmp/cluster.par" || fail "no calibrated line naming this machine"
# the load the measurement met: other processes' share of the cores' time,
# the load average, and the word busy exactly when that share is above 10%
loadline=$(grep '^# load:' "$tmp/cluster.par")
share=$(echo "$loadline" | sed -n "s/^# load: other processes took \([0-9.]*\)% of the $(nproc) cores' time while the compute was measured (load average [0-9.]* [0-9.]* [0-9.]* at the end)\(;.*\)\{0,1\}$/\1/p")
[ -n "$share" ] || fail "no load line: $loadline"
busy=0
case $loadline in *"the machine was busy"*) busy=1 ;; esac
# and how many of its 11 GEMM rates (4 classes fp32 and bf16, the tiny
# class's second shape both ways, the attention-shaped sgemm) took more than
# three runs to confirm their best
echo "$loadline" | grep -Eq "; [0-9]+ of its 11 GEMM rates repeated past 3 runs of 0.2 s until a second run came within 10% of the best(;|$)" ||
    fail "the load line does not count the repeated GEMM rates: $loadline"
awk -v s="${share:-0}" -v b="$busy" 'BEGIN { exit !((s > 10) == (b == 1)) }' || fail "the load line says busy ($busy) against its share $share%"
grep -q '^link intra [0-9.e+]* B/s [0-9.e+-]* s;$' "$tmp/cluster.par" || fail "no intra link"
n='[0-9.]+'
line=$(grep '^efficiency' "$tmp/cluster.par")
echo "$line" | grep -Eq "^efficiency \{ gemm $n $n $n $n; attention $n; hbm $n; norm $n; activation $n; softmax $n; scores $n; tiles $n; optimizer $n; stream16 $n $n $n $n $n; gemm16 $n $n $n $n; intra $n; inter 1; half_intra $n B; overlap $n; \}\$" ||
    fail "no efficiency block of the expected keys: $line"
eff=$(echo "$line" | sed 's/[a-z]\+16//g; s/ overlap [0-9.]*;//; s/ half_intra [0-9.e+]* B;//' | grep -oE "$n") # the shares, not the 16 of stream16 and gemm16
[ "$(echo $eff | wc -w)" = 23 ] || fail "not 23 shares besides overlap in $line"
# half_intra: the mean of the half-bandwidth sizes (none below 0) that put the
# model's all-reduce on the two measured after compute, from the link's own figures
half=$(echo "$line" | sed -n 's/.* half_intra \([0-9.e+]*\) B;.*/\1/p')
read -r t16 t256 h16 h256 hm < <(sed -n 's/^# all-reduces after compute: 16 KiB \([0-9.e+]*\) us, 256 KiB \([0-9.e+]*\) us; the half-bandwidth size that puts the model on each \([-0-9.e+]*\) and \([-0-9.e+]*\) KiB, their mean \([0-9.e+]*\) KiB$/\1 \2 \3 \4 \5/p' "$tmp/cluster.par")
read -r lbw llat < <(sed -n 's/^link intra \([0-9.e+]*\) B\/s \([0-9.e+-]*\) s;$/\1 \2/p' "$tmp/cluster.par")
intra=$(echo "$line" | sed -n 's/.* intra \([0-9.]*\); inter.*/\1/p')
awk -v t1="${t16:--1}" -v t2="${t256:--1}" -v h1="${h16:-x}" -v h2="${h256:-x}" -v hm="${hm:--1}" -v h="${half:--1}" \
    -v bw="${lbw:-0}" -v lat="${llat:-0}" -v e="${intra:-0}" 'BEGIN {
    b = bw * e; w1 = (t1 * 1e-6 - 2 * lat) * b - 16384; w2 = (t2 * 1e-6 - 2 * lat) * b - 262144
    m = ((w1 > 0 ? w1 : 0) + (w2 > 0 ? w2 : 0)) / 2
    ok = (h1 * 1024 - w1) ^ 2 <= (0.01 * w1) ^ 2 + 4096 && (h2 * 1024 - w2) ^ 2 <= (0.01 * w2) ^ 2 + 4096
    exit !(t1 > 0 && t2 > 0 && ok && (hm * 1024 - m) ^ 2 <= (0.01 * m) ^ 2 + 4096 && (h - hm * 1024) ^ 2 <= (0.001 * h) ^ 2 + 64) }' ||
    fail "half_intra $half B is not the fit to $(grep '^# all-reduces' "$tmp/cluster.par") with $(grep '^link' "$tmp/cluster.par") x $intra"
# the link is measured in 4 launches (each its own shared-memory transport);
# the fast ones are those whose 256 KiB all-reduce took at most 2x the
# fastest's, and the fragment's figures are medians over them: the
# all-reduce line's 256 KiB figure is the median of the fast launches' listed
read -r nfast nl times < <(sed -n "s/^# the link's figures: each one's median over the \([0-9]*\) fast launches of \([0-9]*\) (a launch's shared-memory transport is its own; fast: its 256 KiB all-reduce within 2x of the fastest launch's); each launch's 256 KiB all-reduce after compute \([0-9., ]*\) us, overlap [0-9., ]*$/\1 \2 \3/p" "$tmp/cluster.par" | tr -d ,)
echo "${times:-}" | awk -v nf="${nfast:--1}" -v nl="${nl:--1}" -v t="${t256:--2}" '{
    n = split($0, x, " "); best = x[1]; for (i = 2; i <= n; i++) if (x[i] < best) best = x[i]
    k = 0; for (i = 1; i <= n; i++) if (x[i] <= 2 * best) f[++k] = x[i]
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (f[j] < f[i]) { y = f[i]; f[i] = f[j]; f[j] = y }
    med = k % 2 ? f[(k + 1) / 2] : (f[k / 2] + f[k / 2 + 1]) / 2
    exit !(n == 4 && nl == 4 && k == nf && (t - med) ^ 2 <= (1e-4 * med) ^ 2) }' ||
    fail "the link is not the fast launches' median: $(grep -E "^# (the link|all-reduces)" "$tmp/cluster.par")"
# overlap: the mean of the two patterns' hidden shares, each in [0, 1]
ov=$(echo "$line" | sed -n 's/.* overlap \([0-9.]*\); }$/\1/p')
read -r ov1 ov2 ovm < <(sed -n 's/^# overlap (a started collective under GEMMs, MPI_Test between them, as the runtime runs one): \([0-9.]*\) of a 4 MiB all-reduce.s time hidden, \([0-9.]*\) of 16 all-gathers of 64 KiB; their mean \([0-9.]*\)$/\1 \2 \3/p' "$tmp/cluster.par")
awk -v a="${ov1:--1}" -v b="${ov2:--1}" -v m="${ovm:--1}" -v o="${ov:--1}" 'BEGIN {
    exit !(a >= 0 && a <= 1 && b >= 0 && b <= 1 && (m - (a + b) / 2) ^ 2 <= 1e-6 && (o - m) ^ 2 <= 1e-6) }' ||
    fail "overlap $ov not the mean of its patterns' shares: $(grep '^# overlap' "$tmp/cluster.par")"
grep -q '^# memory GB/s: triad [0-9.]*, add [0-9.]*, layer norm [0-9.]*, GELU [0-9.]*, cross-entropy [0-9.]*, AdamW [0-9.]* (the runtime.s kernels, the bytes the cost model charges them)$' \
    "$tmp/cluster.par" || fail "no kernel rates: $(grep '^# memory' "$tmp/cluster.par")"
att=$(grep '^# attention' "$tmp/cluster.par")
# the attention op at the two shapes (ms: forward, backward, matmuls as
# modelled, MB of scores), the fitted rate and the model over each measurement
num='\([0-9.]*\)'
read -r f1 b1 m1 s1 f2 b2 m2 s2 < <(echo "$att" |
    sed -n "s/^# attention (the runtime.s op, causal, probabilities kept) ms: 8x256 tokens, 8 heads of 32: forward $num, backward $num, its matmuls as modelled $num, $num MB of scores; 2x32 tokens, 4 heads of 16: forward $num, backward $num, its matmuls as modelled $num, $num MB of scores; .*/\1 \2 \3 \4 \5 \6 \7 \8/p")
read -r rate o1 o2 < <(echo "$att" | sed -n 's/.*fits both best: \([0-9.]*\) GB\/s, the model at \([0-9.]*\) and \([0-9.]*\) of them$/\1 \2 \3/p')
[ -n "${s2:-}" ] && [ -n "${o2:-}" ] || fail "no attention line: $att"
# the scores bytes the model charges: 7 passes of B NH T T fp32 scores
awk -v a="${s1:-0}" -v b="${s2:-0}" 'BEGIN { exit !(a == 117.4 && b == 0.2294) }' || fail "score bytes $s1, $s2 MB"
agemm=$(sed -n 's/^# GEMM GFLOP\/s .*; sgemm 256x256x64 \([0-9.]*\)$/\1/p' "$tmp/cluster.par")
peak=$(sed -n 's/^gpu { .* fp32 \(.*\) FLOP\/s; hbm .*/\1/p' "$tmp/cluster.par")
hbm=$(sed -n 's/^gpu { .* hbm \(.*\) B\/s; }$/\1/p' "$tmp/cluster.par")
# attention_fit WHAT KEY K LINE: LINE's figures as the cost model charges the
# op: its matmuls K B NH T T HD FLOPs at the 256x256x64 GEMM rate (at most
# the fp32 peak); the fit, the rate x (ms a MB) minimising the squared
# relative errors of m + s x against the measured f + b at both shapes, and
# the efficiency KEY = rate / hbm (1 when none is left); each ratio printed
# is the model's.  Uses f1 b1 m1 s1 f2 b2 m2 s2, rate, o1, o2.
attention_fit() {
    local eff
    eff=$(echo "$line" | sed -n "s/.* $2 \([0-9.]*\);.*/\1/p")
    awk -v m1="${m1:-0}" -v m2="${m2:-0}" -v g="${agemm:-0}" -v p="${peak:-0}" -v k="$3" 'BEGIN { if (g * 1e9 > p) g = p / 1e9
        w1 = k * 8 * 8 * 256 * 256 * 32 / (g * 1e6); w2 = k * 2 * 4 * 32 * 32 * 16 / (g * 1e6)
        exit !(g > 0 && (m1 - w1) ^ 2 <= (0.002 * w1) ^ 2 && (m2 - w2) ^ 2 <= (0.002 * w2 + 1e-4) ^ 2) }' ||
        fail "$1 matmuls as modelled $m1, $m2 ms, not their $3 B NH T T HD FLOPs at the 256x256x64 rate $agemm GFLOP/s"
    awk -v f1="${f1:-0}" -v b1="${b1:-0}" -v m1="${m1:-0}" -v s1="${s1:-0}" -v f2="${f2:-0}" -v b2="${b2:-0}" \
        -v m2="${m2:-0}" -v s2="${s2:-0}" -v r="${rate:-0}" -v o1="${o1:-0}" -v o2="${o2:-0}" -v h="${hbm:-0}" \
        -v sc="${eff:-0}" 'BEGIN { t1 = f1 + b1; t2 = f2 + b2
        a1 = m1 / t1 - 1; c1 = s1 / t1; a2 = m2 / t2 - 1; c2 = s2 / t2; x = -(a1 * c1 + a2 * c2) / (c1 * c1 + c2 * c2)
        fit = x > 0 ? 1 / x : h / 1e9; if (fit > h / 1e9) fit = h / 1e9
        ok = (r - fit) ^ 2 <= (0.02 * fit) ^ 2 && (sc - r * 1e9 / h) ^ 2 <= (0.002 + 0.01 * sc) ^ 2
        ok = ok && (o1 - (m1 + s1 / r) / t1) ^ 2 <= (0.01 * o1 + 0.002) ^ 2 && (o2 - (m2 + s2 / r) / t2) ^ 2 <= (0.01 * o2 + 0.002) ^ 2
        exit !(t1 > 0 && t2 > 0 && ok) }' ||
        fail "$1: $4 does not fit rate $rate GB/s, $2 $eff of hbm $hbm B/s"
}
attention_fit attention scores 12 "$att"
# flash attention (probabilities not kept): 16 B NH T T HD matmul FLOPs (the
# backward rebuilds the scores and the output), 10 passes over score tiles
# on chip (3 forward, 7 backward); the same fit gives `tiles`
fa=$(grep '^# flash attention' "$tmp/cluster.par")
read -r f1 b1 m1 s1 f2 b2 m2 s2 < <(echo "$fa" |
    sed -n "s/^# flash attention (the runtime.s op, causal, probabilities not kept: score tiles on chip) ms: 8x256 tokens: forward $num, backward $num, its matmuls as modelled $num, $num MB of tiles; 2x32 tokens: forward $num, backward $num, its matmuls as modelled $num, $num MB of tiles; .*/\1 \2 \3 \4 \5 \6 \7 \8/p")
read -r rate o1 o2 < <(echo "$fa" | sed -n 's/.*fits both best: \([0-9.]*\) GB\/s, the model at \([0-9.]*\) and \([0-9.]*\) of them$/\1 \2 \3/p')
[ -n "${s2:-}" ] && [ -n "${o2:-}" ] || fail "no flash attention line: $fa"
awk -v a="${s1:-0}" -v b="${s2:-0}" 'BEGIN { exit !(a == 167.8 && b == 0.3277) }' || fail "tile bytes $s1, $s2 MB"
attention_fit "flash attention" tiles 16 "$fa"
# stream16 by class: each the fp32 time over twice the bf16 time of the
# runtime's ops (add, layer norm, GELU, cross-entropy backward) the comment
# prints; the scores' share from the bf16 attention op at the small shape
ops16=$(grep '^# 16-bit ops' "$tmp/cluster.par")
s16=$(echo "$line" | sed -n 's/.* stream16 \([0-9. ]*\);.*/\1/p')
echo "$ops16" | awk -v s="$s16" '{ n = split(s, v, " ")
    if (!match($0, /^# 16-bit ops, fp32 \/ bf16 ms \(the runtime.s ops over 4 Mi elements\): add [0-9.]+ \/ [0-9.]+, layer norm [0-9.]+ \/ [0-9.]+, GELU [0-9.]+ \/ [0-9.]+, cross-entropy backward [0-9.]+ \/ [0-9.]+; attention 2x32 tokens bf16 forward \+ backward [0-9.]+, its matmuls as modelled [0-9.]+$/)) exit 1
    sub(/^.*elements\): /, ""); sub(/; attention.*$/, ""); gsub(/[^0-9. \/]/, " "); m = 0
    for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/ && $(i + 1) == "/") { t32[++m] = $i; t16[m] = $(i + 2) }
    if (n != 5 || m != 4) exit 1
    for (k = 1; k <= 4; k++) { w = t32[k] / (2 * t16[k]); if (w > 1) w = 1
        if ((v[k] - w) ^ 2 > (0.002 + 0.01 * w) ^ 2) exit 1 }
    exit 0 }' || fail "stream16 $s16 is not fp32 / (2 x bf16) of the ops: $ops16"
# each GEMM class as the runtime's linear op, forward + backward, fp32 and over bf16 tensors
g='\([0-9.]*\)'
read -r g32 < <(sed -n "s/^# GEMM GFLOP\/s (the linear op forward + backward, rows x out x in, operands beyond the L2): 64x1024x1024 with 64x64x256 (harmonic mean) $g, 256x1024x1024 $g, 1024^3 $g, 2048^3 $g; sgemm 256x256x64 $g$/\1/p" "$tmp/cluster.par")
read -r g16 < <(sed -n "s/^# bf16 GEMM GFLOP\/s (the linear op over bf16 tensors: widened to fp32, rounded back), the same shapes: $g, $g, $g, $g$/\1/p" "$tmp/cluster.par")
[ -n "${g32:-}" ] || fail "no GEMM rates: $(grep '^# GEMM' "$tmp/cluster.par")"
[ -n "${g16:-}" ] || fail "no bf16 GEMM rates: $(grep '^# bf16 GEMM' "$tmp/cluster.par")"
# the runtime widens each 16-bit operand and rounds the result on every call:
# at the tiny class (64 rows) those passes cost a share no FLOP count covers
awk -v a="${g16:-0}" -v b="${g32:-0}" 'BEGIN { exit !(a > 0 && a < b) }' ||
    fail "bf16 tiny-class linear rate $g16 GFLOP/s not below fp32's $g32: not the runtime's 16-bit path"
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
ov3=$(awk -v o="${ov:--1}" 'BEGIN { printf "%.3g", o }') # as explain prints it
"$parc" explain "$tmp/plan.par" --verbose | grep -q "started ones hidden under compute at $ov3 of their time (overlap)" ||
    fail "explain does not print the calibrated overlap ${ov:-} ($ov3)"
"$parc" explain "$tmp/plan.par" | grep -q "^  overlap: of the started collectives' time under compute, $ov3 is hidden;" ||
    fail "explain's phases do not say the overlap share $ov3"
# the number explain prints is the one written, rounded once: 0.1355 is 0.136
# (kept as 1 - (1 - x) it came out 0.135)
sed 's/ overlap [0-9.]*; }$/ overlap 0.1355; }/' "$tmp/cluster.par" > "$tmp/cluster_ov.par"
sed "s|include \"$tmp/cluster.par\";|include \"$tmp/cluster_ov.par\";|" "$tmp/plan.par" > "$tmp/plan_ov.par"
"$parc" explain "$tmp/plan_ov.par" | grep -q "^  overlap: of the started collectives' time under compute, 0.136 is hidden;" ||
    fail "overlap 0.1355 is not explained as 0.136: $("$parc" explain "$tmp/plan_ov.par" | grep '^  overlap')"
# --device cpu --ranks 2: every figure through the runtime's backend (the
# path a GPU takes with --device cuda), one launch of two ranks
"$parc" calibrate --device cpu --ranks 2 -o "$tmp/dev.par" > "$tmp/devout" 2>&1 ||
    fail "parc calibrate --device cpu --ranks 2 exited with status $?: $(cat "$tmp/devout")"
d="$tmp/dev.par"
grep -q '^# Fragment (not a plan), written by `parc calibrate --device cpu` on ' "$d" || fail "--device: no header naming the device: $(head -1 "$d")"
grep -q "Every figure through the runtime's cpu backend (.*), 2 ranks measuring at once, the slowest rank's rates.$" "$d" ||
    fail "--device: the header does not say the backend and its 2 ranks: $(sed -n 2p "$d")"
grep -q '^gpu { memory [0-9]* B; bf16 .* FLOP/s; fp32 .* FLOP/s; hbm .* B/s; }$' "$d" || fail "--device: no gpu line"
dline=$(grep '^efficiency' "$d")
echo "$dline" | grep -Eq "^efficiency \{ gemm $n $n $n $n; attention $n; hbm $n; norm $n; activation $n; softmax $n; scores $n; tiles $n; optimizer $n; stream16 $n $n $n $n $n; gemm16 $n $n $n $n; intra $n; inter 1; half_intra $n B; overlap $n; \}\$" ||
    fail "--device: no efficiency block of the expected keys: $dline"
for v in $(echo "$dline" | sed 's/[a-z]\+16//g; s/ half_intra [0-9.e+]* B;//' | grep -oE "$n"); do
    awk -v v="$v" 'BEGIN { exit !(v >= 0 && v <= 1) }' || fail "--device: share $v outside [0, 1]"
done
# the peak is the best of the four GEMM classes, each class's share its rate over it
read -r dg1 dg2 dg3 dg4 < <(sed -n "s/^# GEMM GFLOP\/s (the linear op forward + backward, rows x out x in, operands beyond the L2): 64x1024x1024 with 64x64x256 (harmonic mean) $g, 256x1024x1024 $g, 1024^3 $g, 2048^3 $g; sgemm 256x256x64 [0-9.]*$/\1 \2 \3 \4/p" "$d")
dpeak=$(sed -n 's/^gpu { .* fp32 \(.*\) FLOP\/s; hbm .*/\1/p' "$d")
read -r e1 e2 e3 e4 < <(echo "$dline" | sed -n 's/^efficiency { gemm \([0-9.]*\) \([0-9.]*\) \([0-9.]*\) \([0-9.]*\);.*/\1 \2 \3 \4/p')
awk -v a="${dg1:-0}" -v b="${dg2:-0}" -v c="${dg3:-0}" -v e="${dg4:-0}" -v p="${dpeak:-0}" \
    -v s1="${e1:-9}" -v s2="${e2:-9}" -v s3="${e3:-9}" -v s4="${e4:-9}" 'BEGIN {
    m = a; if (b > m) m = b; if (c > m) m = c; if (e > m) m = e
    ok = m > 0 && (p / 1e9 - m) ^ 2 <= (0.001 * m + 0.01) ^ 2
    split(a " " b " " c " " e, r, " "); split(s1 " " s2 " " s3 " " s4, s, " ")
    for (k = 1; k <= 4; k++) ok = ok && (s[k] - r[k] / m) ^ 2 <= (0.001 + 0.001 * s[k]) ^ 2
    exit !ok }' || fail "--device: fp32 peak $dpeak and gemm shares $e1 $e2 $e3 $e4 are not the classes' $dg1 $dg2 $dg3 $dg4 GFLOP/s over their best"
# the link from the runtime's own all-reduce: latency the 8-byte all-reduce's
# time over its 2 steps, bandwidth its bus bandwidth at 16 MiB (host memory)
read -r dsync dbus < <(sed -n "s/^# collectives (the runtime's, waited for): \([0-9.e+]*\) us an 8-byte all-reduce (its mean over the all-reduce's 2 steps is the link latency), all-reduce bus bandwidth \([0-9.e+]*\) GB\/s of 16 MiB (the link's bandwidth)$/\1 \2/p" "$d")
read -r dbw dlat < <(sed -n 's/^link intra \([0-9.e+]*\) B\/s \([0-9.e+-]*\) s;$/\1 \2/p' "$d")
awk -v s="${dsync:-0}" -v u="${dbus:-0}" -v bw="${dbw:-0}" -v l="${dlat:-0}" 'BEGIN {
    exit !(s > 0 && u > 0 && (l * 1e6 - s / 2) ^ 2 <= (0.01 * s) ^ 2 && (bw / 1e9 - u) ^ 2 <= (0.01 * u) ^ 2) }' ||
    fail "--device: link $dbw B/s $dlat s is not the runtime's all-reduce ($(grep '^# collectives' "$d"))"
grep -q "^# overlap (a started collective under GEMMs of 1024^3, the runtime's allreduce_start and allgather_start, as the runtime runs one): [0-9.]* of a 4 MiB all-reduce's time hidden, [0-9.]* of 16 all-gathers of 64 KiB; their mean [0-9.]*$" "$d" ||
    fail "--device: no overlap through the runtime's started collectives: $(grep '^# overlap' "$d")"
sed -e "s|include \"$tmp/cluster.par\";|include \"$d\";|" "$tmp/plan.par" > "$tmp/devplan.par"
"$parc" check "$tmp/devplan.par" > /dev/null || fail "--device: a plan including the fragment does not pass check"
"$parc" explain "$tmp/devplan.par" --verbose | grep -q "efficiencies the plan's ($d:" ||
    fail "--device: explain does not name the calibrated efficiencies"
# usage: --ranks only with --device, from 1 to 64; an unknown device is named
# in one line, before the old file is touched
echo keep > "$tmp/keep.par"
for args in "--ranks 2" "--device cpu --ranks 0" "--device cpu --ranks 65" "--device cpu --ranks two" "--device" "--device nosuch"; do
    # shellcheck disable=SC2086
    "$parc" calibrate $args -o "$tmp/keep.par" > "$tmp/uout" 2>&1; rc=$?
    [ "$rc" = 2 ] || fail "parc calibrate $args exited with $rc, expected 2: $(cat "$tmp/uout")"
    [ "$(cat "$tmp/keep.par")" = keep ] || fail "parc calibrate $args touched the -o file"
done
"$parc" calibrate --device nosuch -o "$tmp/keep.par" 2>&1 | grep -q "^parc calibrate: no device \`nosuch\`; this runtime has: cpu" ||
    fail "an unknown device is not named with the runtime's devices"
[ "$("$parc" calibrate --device nosuch -o "$tmp/keep.par" 2>&1 | wc -l)" = 1 ] || fail "an unknown device takes more than one line"
"$parc" calibrate -o > /dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || fail "parc calibrate -o without a file exited with $rc, expected 2"
echo "calibrate: $fails failures"
[ "$fails" = 0 ]
