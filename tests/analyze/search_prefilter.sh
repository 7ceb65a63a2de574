#!/usr/bin/env bash
# search_prefilter.sh PARC TOPS PLAN... — for each K of TOPS (e.g. 1,3,5),
# `parc search --top K` (the closed-form prefilter, then layouts lowered
# exactly in order of their estimates) ranks the same K layouts, with the
# same figures, as `parc search --exhaustive` (every layout lowered), and it
# lowered fewer layouts than the space holds, so the comparison is a real
# one; so #1 is the same at every K.  Over the whole space the exact step of
# every ranked layout is at least the estimate floor the prefilter's stop
# rule assumes.  Exit status: 0 all held, 1 any did not.
set -u
parc=$(realpath "$1"); tops=$2; shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
most=$(printf '%s\n' ${tops//,/ } | sort -n | tail -1)
for plan in "$@"; do
  name=$(basename "$plan" .par)
  # the exhaustive ranking does not depend on K: its first K rows are its top K
  if ! "$parc" search "$plan" --top "$most" --json --exhaustive > "$tmp/$name.all.json"; then
      echo "FAIL: parc search --exhaustive $plan exited with an error"; fails=$((fails + 1)); continue
  fi
  for top in ${tops//,/ }; do
    if ! "$parc" search "$plan" --top "$top" --json > "$tmp/$name.fast.json"; then
        echo "FAIL: parc search $plan --top $top exited with an error"; fails=$((fails + 1)); continue
    fi
    python3 - "$tmp/$name.fast.json" "$tmp/$name.all.json" "$plan" "$top" <<'PY' || fails=$((fails + 1))
import json, sys
fast, full, plan, top = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4])
bad = 0
if fast["considered"] != full["considered"]:
    print(f"FAIL: {plan}: the prefilter considered {fast['considered']} layouts, the exhaustive search {full['considered']}")
    bad += 1
if full["lowered"] != full["considered"] or full["estimated_not_to_fit"] != 0:
    print(f"FAIL: {plan}: --exhaustive lowered {full['lowered']} of {full['considered']}")
    bad += 1
if full["estimate_share_min"] < full["estimate_floor"]:
    print(f"FAIL: {plan}: a layout's exact step is {full['estimate_share_min']} of its estimate, below the "
          f"prefilter's floor {full['estimate_floor']}: the prefilter may stop before the best layout")
    bad += 1
if fast["lowered"] >= fast["considered"]:
    print(f"FAIL: {plan}: the prefilter lowered all {fast['lowered']} layouts; the space is too small to compare")
    bad += 1
full["top"] = full["top"][:top]
if len(full["top"]) != top or len(fast["top"]) != top:
    print(f"FAIL: {plan}: {len(fast['top'])} and {len(full['top'])} layouts ranked, expected {top}")
    bad += 1
for a, b in zip(fast["top"], full["top"]):
    if a != b:
        print(f"FAIL: {plan}: #{b['rank']} of the exhaustive search is {b}\n  the prefilter's is {a}")
        bad += 1
print(f"{plan}: top {top} the same; {fast['lowered']} of {fast['considered']} layouts lowered "
      f"({fast['estimated_not_to_fit']} estimated not to fit)")
sys.exit(1 if bad else 0)
PY
  done
done
echo "search_prefilter: $# plans, $fails failures"
[ "$fails" = 0 ]
