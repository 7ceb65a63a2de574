#!/bin/sh
# test_trace.sh — the run-time outputs of a program: --trace writes valid Chrome
# trace JSON with one track per rank and the collectives' bytes; PRT_LOSS_FILE gets
# one "step loss" line per step; --data FILE runs; --steps N is obeyed.
# usage: test_trace.sh FAULT_PROG [MPIRUN] [PYTHON]
# Exit status 0 iff all of that held.
PROG=${1:?usage: test_trace.sh FAULT_PROG [MPIRUN] [PYTHON]}
MPIRUN=${2:-mpirun}
PYTHON=${3:-python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
head -c 4096 "$0" >"$DIR/data.txt"; cat "$0" "$0" "$0" >>"$DIR/data.txt"
PRT_LOSS_FILE="$DIR/loss.txt" timeout 60 "$MPIRUN" -np 4 --oversubscribe "$PROG" --quiet --steps 3 \
    --trace "$DIR/trace.json" --data "$DIR/data.txt" >"$DIR/out.txt" 2>&1
rc=$?
if [ $rc -ne 0 ]; then cat "$DIR/out.txt"; echo "test_trace: FAIL (program exited $rc)"; exit 1; fi
"$PYTHON" - "$DIR/trace.json" "$DIR/loss.txt" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))  # a finished run's file is whole JSON: an array of events
events = trace if isinstance(trace, list) else []
problems = []
pids = {e["pid"] for e in events}
if pids != {0, 1, 2, 3}:
    problems.append(f"tracks {sorted(pids)}, want ranks 0-3")
for pid in range(4):
    mine = [e for e in events if e["pid"] == pid and e["ph"] == "X"]
    names = {e["name"] for e in mine}
    for want in ("allreduce", "send", "recv", "data", "exchange", "step"):
        if want not in names:
            problems.append(f"rank {pid}: no '{want}' event")
    ar = [e for e in mine if e["name"] == "allreduce"]
    if ar and any(e["args"]["bytes"] != 1024 or e["args"]["axis"] not in ("dp", "tp") for e in ar):
        problems.append(f"rank {pid}: allreduce args wrong: {ar[0].get('args')}")
    if len([e for e in mine if e["name"] == "step"]) != 3:
        problems.append(f"rank {pid}: want 3 step events")
    if any(e["dur"] < 0 or e["ts"] < 0 for e in mine):
        problems.append(f"rank {pid}: negative time")
lines = open(sys.argv[2]).read().split()
if len(lines) != 6 or [int(x) for x in lines[0::2]] != [0, 1, 2]:
    problems.append(f"loss file: {lines}")
for p in problems:
    print("FAIL:", p)
print("test_trace:", "FAIL" if problems else "ok", f"({len(events)} events)")
sys.exit(1 if problems else 0)
PY
