#!/usr/bin/env bash
# phases.sh PARC PLAN... — a built program times its step by phase and sets
# the compiler's estimate beside it: `parc run PLAN --steps 3` with
# PRT_METRICS_FILE (the metrics log's name when --log is not given) prints the
# estimated / measured line at the end; the log validates against
# docs/metrics.schema.json (tests/metrics_log.py), holds a record per step
# whose phases (forward, backward, exposed communication, bubble, optimizer)
# are not negative and sum to its step time, and a summary whose estimates
# equal `parc explain --json`'s phases_s.
set -u
parc=$(realpath "$1"); shift
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
for plan in "$@"; do
    n=$(basename "$plan" .par)
    if ! PRT_METRICS_FILE="$tmp/$n.metrics" "$parc" run "$plan" --steps 3 > "$tmp/$n.out" 2>&1; then
        echo "FAIL: parc run $plan: $(tail -3 "$tmp/$n.out")"; fails=$((fails + 1)); continue
    fi
    grep -q '^parc: per step, estimated / measured ms (rank 0, steps after the first): forward ' "$tmp/$n.out" ||
        { echo "FAIL: $plan: no estimated / measured line"; fails=$((fails + 1)); }
    "$parc" explain "$plan" --json > "$tmp/$n.json" || { fails=$((fails + 1)); continue; }
    python3 - "$tmp/$n.metrics" "$tmp/$n.json" "$plan" "$(dirname "$0")" <<'PY' || fails=$((fails + 1))
import json, sys
sys.path.insert(0, sys.argv[4])
import metrics_log
plan = sys.argv[3]
records, problems = metrics_log.read(sys.argv[1])
steps = [r for r in records if r.get("record") == "step"]
if [r.get("step") for r in steps] != [1, 2, 3]: problems.append(f"step records {[r.get('step') for r in steps]}")
summary = records[-1] if records else {}
phases = json.load(open(sys.argv[2]))["phases_s"]
keys = {"forward": "forward", "backward": "backward", "exposed_communication": "exposed communication",
        "bubble": "bubble", "optimizer": "optimizer"}
for key, name in keys.items():
    got = summary.get("phases_ms", {}).get(key, {}).get("estimated")
    if got is None or abs(got - phases[name] * 1e3) > 1e-5 * max(abs(got), 1e-9) + 1e-6:
        problems.append(f"estimated {name} {got} ms, explain says {phases[name] * 1e3} ms")
for p in problems: print(f"FAIL: {plan}: {p}")
sys.exit(1 if problems else 0)
PY
done
echo "phases: $# plans, $fails failures"
[ "$fails" = 0 ]
