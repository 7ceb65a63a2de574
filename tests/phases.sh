#!/usr/bin/env bash
# phases.sh PARC PLAN... — a built program times its step by phase and sets
# the compiler's estimate beside it: `parc run PLAN --steps 3` with
# PRT_METRICS_FILE prints the estimated / measured line at the end; the file
# has a header, one line per step whose phases (forward, backward, exposed
# communication, bubble, optimizer) are not negative and sum to its step
# time, and an `estimate` line equal to `parc explain --json`'s phases_s.
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
    python3 - "$tmp/$n.metrics" "$tmp/$n.json" "$plan" <<'PY' || fails=$((fails + 1))
import json, sys
lines = [l.split() for l in open(sys.argv[1])]
plan = sys.argv[3]
bad = 0
def fail(msg):
    global bad
    print(f"FAIL: {plan}: {msg}")
    bad += 1
want_head = ["step", "forward_ms", "backward_ms", "exposed_communication_ms", "bubble_ms", "optimizer_ms", "step_ms"]
if lines[0] != want_head: fail(f"header {lines[0]}")
steps = [l for l in lines[1:] if l[0] != "estimate"]
if [l[0] for l in steps] != ["1", "2", "3"]: fail(f"step lines {[l[0] for l in steps]}")
for l in steps:
    v = [float(x) for x in l[1:]]
    if min(v[:5]) < -1e-6: fail(f"step {l[0]}: a negative phase {v[:5]}")
    if abs(sum(v[:5]) - v[5]) > 1e-3 * max(v[5], 1e-3): fail(f"step {l[0]}: phases sum to {sum(v[:5])}, step {v[5]}")
est = [l for l in lines if l[0] == "estimate"]
phases = json.load(open(sys.argv[2]))["phases_s"]
keys = ["forward", "backward", "exposed communication", "bubble", "optimizer"]
if len(est) != 1: fail(f"{len(est)} estimate lines")
else:
    got = [float(x) for x in est[0][1:]]
    for k, name in enumerate(keys):
        if abs(got[k] - phases[name] * 1e3) > 1e-5 * max(abs(got[k]), 1e-9) + 1e-6:
            fail(f"estimated {name} {got[k]} ms, explain says {phases[name] * 1e3} ms")
sys.exit(1 if bad else 0)
PY
done
echo "phases: $# plans, $fails failures"
[ "$fails" = 0 ]
