#!/usr/bin/env bash
# phases.sh PARC PLAN... — a built program times its step by phase and sets
# the compiler's estimate beside it: `parc run PLAN --steps 3` with
# PRT_METRICS_FILE (the metrics log's name when --log is not given) prints the
# estimated / measured line at the end; the log validates against
# docs/metrics.schema.json (tests/common/metrics_log.py), holds a record per step
# whose phases (forward, backward, exposed communication, bubble, optimizer)
# are not negative and sum to its step time, and a summary whose estimates
# equal `parc explain --json`'s phases_s and whose `ranks` spread covers
# every rank of the plan's mesh (min <= mean <= max, rank 0's own mean
# inside it, the slowest rank the one with the longest step), as the
# printed per-rank line says too.
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
    grep '^parc: per step over [0-9]* ranks, measured ms min / mean / max (the rank of the max): forward ' \
        "$tmp/$n.out" > "$tmp/$n.ranks" || { echo "FAIL: $plan: no per-rank line"; fails=$((fails + 1)); }
    "$parc" explain "$plan" --json > "$tmp/$n.json" || { fails=$((fails + 1)); continue; }
    python3 - "$tmp/$n.metrics" "$tmp/$n.json" "$plan" "$(dirname "$0")/../common" "$tmp/$n.ranks" <<'PY' || fails=$((fails + 1))
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
world = json.load(open(sys.argv[2]))["world"]
ranks = summary.get("ranks", {})
if ranks.get("count") != world: problems.append(f"ranks.count {ranks.get('count')}, the mesh has {world}")
spreads = dict(ranks.get("phases_ms", {}), step=ranks.get("step_ms", {}))
own = dict({k: v.get("measured") for k, v in summary.get("phases_ms", {}).items()},
           step=summary.get("step_ms", {}).get("measured"))
for key, s in spreads.items():
    lo, mean, hi, at = s.get("min"), s.get("mean"), s.get("max"), s.get("max_rank", -1)
    if None in (lo, mean, hi) or not (lo <= mean * (1 + 1e-5) + 1e-9 and mean <= hi * (1 + 1e-5) + 1e-9):
        problems.append(f"ranks {key}: min {lo} mean {mean} max {hi} out of order")
    elif not (lo * (1 - 1e-5) - 1e-9 <= own[key] <= hi * (1 + 1e-5) + 1e-9):
        problems.append(f"ranks {key}: rank 0's {own[key]} ms outside [{lo}, {hi}]")
    if not 0 <= at < world: problems.append(f"ranks {key}: max_rank {at} not a rank of {world}")
if ranks.get("slowest_rank") != ranks.get("step_ms", {}).get("max_rank"):
    problems.append(f"slowest_rank {ranks.get('slowest_rank')} is not step_ms.max_rank")
line = open(sys.argv[5]).read() if len(sys.argv) > 5 else ""
if not line.startswith(f"parc: per step over {world} ranks") or f"slowest rank {ranks.get('slowest_rank')}" not in line:
    problems.append(f"the per-rank line does not name {world} ranks and slowest rank {ranks.get('slowest_rank')}: {line}")
for p in problems: print(f"FAIL: {plan}: {p}")
sys.exit(1 if problems else 0)
PY
done
echo "phases: $# plans, $fails failures"
[ "$fails" = 0 ]
