#!/usr/bin/env bash
# search.sh PARC PLAN... — every plan `parc search -o DIR` writes numbers as a
# person writes them, passes `parc check`, and `parc explain --json` gives the
# figures the search printed
# for it (step time, MFU, bubble, peak memory, link bytes), and the ranks are
# in order of step time.  Exit status: 0 all held, 1 any did not.
set -u
parc=$(realpath "$1"); shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
for plan in "$@"; do
    dir=$tmp/$(basename "$plan" .par)
    if ! "$parc" search "$plan" --top 4 --json -o "$dir" > "$dir.json"; then
        echo "FAIL: parc search $plan exited with status $?"; fails=$((fails + 1)); continue
    fi
    for k in 1 2 3 4; do
        [ -f "$dir/$k.par" ] || { echo "FAIL: $dir/$k.par was not written"; fails=$((fails + 1)); continue; }
        if ! "$parc" check "$dir/$k.par" > /dev/null; then
            echo "FAIL: search #$k of $plan does not pass check"; fails=$((fails + 1)); continue
        fi
        # numbers as a person writes them (`2 us`, `0.9`), not 1.9999999999999999e-06 s
        if long=$(grep -noE '[0-9]{13,}|\.[0-9]{10,}|[0-9]e-0[0-9] s' "$dir/$k.par"); then
            echo "FAIL: search #$k of $plan writes unreadable numbers: $long"; fails=$((fails + 1))
        fi
        # the plan's own switches are kept in every layout it writes
        want=$(grep -c '^ *grad_overlap off;' "$plan"); got=$(grep -c '^ *grad_overlap off;' "$dir/$k.par")
        if [ "$want" != "$got" ]; then
            echo "FAIL: search #$k of $plan has $got \`grad_overlap off;\` lines, the plan $want"; fails=$((fails + 1))
        fi
        "$parc" explain "$dir/$k.par" --json > "$dir/$k.json" || { fails=$((fails + 1)); continue; }
    done
    python3 - "$dir.json" "$dir" <<'PY' || fails=$((fails + 1))
import json, sys
search = json.load(open(sys.argv[1]))
bad = 0
prev = 0
for row in search["top"]:
    k = row["rank"]
    ex = json.load(open(f"{sys.argv[2]}/{k}.json"))
    pairs = [("step_time_s", row["step_time_s"], ex["step_time_s"]),
             ("mfu", row["mfu"], ex["mfu"]),
             ("bubble_share", row["bubble_share"], ex["pipeline"]["bubble_share"]),
             ("peak_memory_bytes", row["peak_memory_bytes"], ex["peak_memory_bytes"])]
    for name, a, b in pairs:
        if abs(a - b) > 1e-5 * max(abs(a), abs(b), 1e-30):
            print(f"FAIL: search #{k} {name} {a} but its plan explains to {b}")
            bad += 1
    if row["step_time_s"] < prev:
        print(f"FAIL: search #{k} is faster than #{k - 1}")
        bad += 1
    prev = row["step_time_s"]
if len(search["top"]) != 4:
    print(f"FAIL: {len(search['top'])} layouts ranked, expected 4")
    bad += 1
sys.exit(1 if bad else 0)
PY
done
echo "search: $# plans, $fails failures"
[ "$fails" = 0 ]
