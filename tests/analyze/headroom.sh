#!/usr/bin/env bash
# headroom.sh PARC EXAMPLES — "fits" means the ledger plus the cluster's
# reserve fits the GPU: one test of fit for check, explain (text and JSON),
# the fit advice and the search.  Llama-2 7B as tp 2 over two 80 GiB GPUs
# (examples/llama7b_1gpu.par's model; a ledger of 75.6 GiB per GPU) with
# reserves of 0.5 GiB (95.1% of the GPU: a warning, check still passes), the
# default 4 GiB (fits), 5 GiB (over the GPU with the reserve, under without:
# does not fit) and a cluster calibrated on a CPU (no reserve by default).
# Exit status: 0 all held, 1 any did not.
set -u
parc=$(realpath "$1"); examples=$(realpath "$2")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# plan RESERVE [CLUSTER_EXTRA] [LAYOUT_EXTRA]: the tp 2 plan, `reserve RESERVE;` in its gpu block unless RESERVE is -
plan() {
    local reserve=""
    [ "$1" != - ] && reserve="reserve $1; "
    sed -e 's/gpus_per_node 1;/gpus_per_node 2;'"${2:-}"'/' -e 's/^mesh { dp 1; }/mesh { tp 2; }/' \
        -e "s/hbm 3.35 TB\/s; }/hbm 3.35 TB\/s; $reserve}/" \
        -e 's/^  batch -> dp;/  heads -> tp; ffn -> tp; vocab -> tp; sequence_parallel over tp;'"${3:-}"'/' \
        "$examples/llama7b_1gpu.par"
}
# json FILE KEY: a top-level number or bool of `parc explain FILE --json`
json() { "$parc" explain "$1" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }

# 0.5 GiB reserve: 75.6 + 0.5 of 80 GiB, fits, warned with the margin; check exits 0
n=$((n + 1))
plan "0.5 GiB" > "$tmp/crowded.par"
out=$("$parc" check "$tmp/crowded.par" 2>&1); status=$?
want="warning: each rank uses 95.1% of the 80.0 GiB GPU (75.6 GiB ledger + 512 MiB reserve), which leaves 3.9 GiB"
if [ "$status" != 0 ] || ! printf '%s\n' "$out" | grep -qF "$want"; then
    fail "95% plan: check exits $status, want 0 with \"$want\":"; printf '%s\n' "$out" | head -6
fi
# the warning's hint names a change that takes the plan below 90%, and it does
hint="recompute selective    -> 59.6 GiB per GPU, 75.1% with the reserve (the cheapest change below the warning)"
printf '%s\n' "$out" | grep -qF "$hint" || { fail "95% plan: the warning's hint lacks \"$hint\""; printf '%s\n' "$out"; }
n=$((n + 1))
plan "0.5 GiB" "" " recompute selective;" > "$tmp/hinted.par"
out=$("$parc" check "$tmp/hinted.par" 2>&1); status=$?
if [ "$status" != 0 ] || printf '%s\n' "$out" | grep -q warning; then
    fail "the hinted change does not pass check without a warning (exit $status):"; printf '%s\n' "$out" | head -3
fi
# explain states the reserve and the margin, and warns too
n=$((n + 1))
out=$("$parc" explain "$tmp/crowded.par" 2>&1); status=$?
if [ "$status" != 0 ] || ! printf '%s\n' "$out" | grep -qF "$want" ||
   ! printf '%s\n' "$out" | grep -qE "^  total +81176190984 +75\.6 GiB +\+ reserve 512 MiB of 80\.0 GiB \(95\.1%\) fits, 3\.9 GiB to spare$" ||
   ! printf '%s\n' "$out" | grep -qF "reserve         512 MiB of each GPU outside the ledger (the cluster's \`reserve\`): 79.5 GiB for the plan"; then
    fail "95% plan: explain (exit $status) lacks the warning, the reserve or the margin:"; printf '%s\n' "$out" | grep -E "reserve|total|warning"
fi

# the default reserve, 2 GiB + 2.5% of 80 GiB = 4 GiB: 75.6 + 4.0 fits
n=$((n + 1))
plan - > "$tmp/default.par"
[ "$(json "$tmp/default.par" gpu_reserve_bytes)" = 4294967296 ] || fail "the default reserve of an 80 GiB GPU is not 4 GiB"
[ "$(json "$tmp/default.par" fits)" = True ] || fail "75.6 GiB with the default 4 GiB reserve does not fit 80 GiB"

# 5 GiB reserve: 75.6 + 5 > 80 although 75.6 < 80: does not fit, in check, explain and its JSON
n=$((n + 1))
plan "5 GiB" > "$tmp/over.par"
out=$("$parc" check "$tmp/over.par" 2>&1); status=$?
want="error: the plan does not fit: each rank needs 75.6 GiB, the GPU holds 75.0 GiB for it (80.0 GiB less a 5.0 GiB reserve)"
if [ "$status" != 1 ] || ! printf '%s\n' "$out" | grep -qF "$want" ||
   ! printf '%s\n' "$out" | grep -qF "without the reserve it would fit"; then
    fail "over with the reserve: check exits $status, want 1 with \"$want\" and the reserve named:"; printf '%s\n' "$out" | head -12
fi
n=$((n + 1))
out=$("$parc" explain "$tmp/over.par" 2>&1); status=$?
if [ "$status" != 1 ] || ! printf '%s\n' "$out" | grep -qE "^  total .* 75\.6 GiB +\+ reserve 5\.0 GiB of 80\.0 GiB \(100\.8%\) DOES NOT FIT, 616 MiB over$"; then
    fail "over with the reserve: explain exits $status without DOES NOT FIT:"; printf '%s\n' "$out" | grep -E "total|error"
fi
[ "$(json "$tmp/over.par" fits)" = False ] || fail "over with the reserve: explain --json says it fits"

# the search ranks only layouts that fit with the reserve: with 5 GiB the plan's own
# layout (75.6 GiB) is not ranked, and every ranked one leaves the reserve
n=$((n + 1))
"$parc" search "$tmp/over.par" --top 50 --json > "$tmp/search.json" 2>/dev/null || fail "search of the 5 GiB plan exits $?"
python3 - "$tmp/search.json" <<'PY' || fail "the search ranks a layout that does not fit with the 5 GiB reserve"
import json, sys
rows = json.load(open(sys.argv[1]))["top"]
bad = [r for r in rows if r["peak_memory_bytes"] + 5 * 2**30 > 80 * 2**30]
sys.exit(1 if bad or not rows else 0)
PY
plan "4 GiB" > "$tmp/four.par"
"$parc" search "$tmp/four.par" --top 100 --json > "$tmp/four.json" 2>/dev/null || fail "search of the 4 GiB plan exits $?"
python3 - "$tmp/four.json" <<'PY' || fail "with a 4 GiB reserve the plan's own layout (tp 2, sp, 75.6 GiB) is not ranked"
import json, sys
rows = json.load(open(sys.argv[1]))["top"]
own = [r for r in rows if (r["pp"], r["dp"], r["tp"], r["zero"], r["sequence_parallel"], r["recompute"]) == (1, 1, 2, 0, True, "none")]
sys.exit(0 if own and abs(own[0]["peak_memory_bytes"] / 2**30 - 75.6) < 0.05 else 1)
PY
"$parc" search "$tmp/over.par" --top 1 2>/dev/null | grep -qF "#1 pp 1 dp 1 tp 2, micro_batch 1, zero 0, sp, recompute none" &&
    fail "with a 5 GiB reserve the 75.6 GiB layout is still ranked #1"

# a cluster calibrated on a CPU has no reserve unless it states one
n=$((n + 1))
plan - ' calibrated "cpu Test CPU, 2 cores";' > "$tmp/cpu.par"
[ "$(json "$tmp/cpu.par" gpu_reserve_bytes)" = 0 ] || fail "a cluster calibrated on a CPU has a default reserve"
out=$("$parc" explain "$tmp/cpu.par" 2>&1)
printf '%s\n' "$out" | grep -qF "reserve         none: the cluster was calibrated on a CPU" ||
    fail "explain does not say a CPU-calibrated cluster has no reserve"

echo "headroom: $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
