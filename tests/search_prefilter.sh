#!/usr/bin/env bash
# search_prefilter.sh PARC TOP PLAN... — `parc search --top TOP` (the
# closed-form prefilter, then the best estimated lowered exactly) ranks the
# same TOP layouts, with the same figures, as `parc search --exhaustive`
# (every layout lowered), and it lowered fewer layouts than the space holds,
# so the comparison is a real one.  Exit status: 0 all held, 1 any did not.
set -u
parc=$(realpath "$1"); top=$2; shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
for plan in "$@"; do
    name=$(basename "$plan" .par)
    if ! "$parc" search "$plan" --top "$top" --json > "$tmp/$name.fast.json" ||
       ! "$parc" search "$plan" --top "$top" --json --exhaustive > "$tmp/$name.all.json"; then
        echo "FAIL: parc search $plan exited with an error"; fails=$((fails + 1)); continue
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
if fast["lowered"] >= fast["considered"]:
    print(f"FAIL: {plan}: the prefilter lowered all {fast['lowered']} layouts; the space is too small to compare")
    bad += 1
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
echo "search_prefilter: $# plans, $fails failures"
[ "$fails" = 0 ]
