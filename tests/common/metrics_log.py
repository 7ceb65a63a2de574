"""metrics_log.py — reads a metrics log (`--log FILE`, JSON lines) and validates
every record against docs/metrics.schema.json with jsonschema (Debian's
python3-jsonschema), plus what a schema cannot say: no bare NaN or Infinity,
the step records come first (after an optional `eval` record of step 0),
numbered from `first` to their `steps` in order (or to the step a `diverged`
record names, which then comes right before the summary), their phases sum
to step_ms, and exactly one summary record ends the file.  A `restart`
record (parc run --restarts) starts a launch whose steps number from its
`resume_step` + 1 (from `first` again when it is 0: no checkpoint yet);
what the launches before it logged stays, without a summary, and
`steps_done` counts the last launch's steps.

    records, problems = metrics_log.read(path, first=1)

records: the step records in order, then the summary; problems: messages,
empty when the log is valid.  Used by tests/rt/phases.sh and the parity tests."""
import json
import math
import os

import jsonschema

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "metrics.schema.json")


def schema():
    with open(SCHEMA_PATH) as f:
        return json.load(f)


def reject_constant(name):
    """JSON has no NaN or Infinity: Python's json module reads them, this does not."""
    raise ValueError(f"bare {name} is not JSON")


def read(path, first=1):
    validator = jsonschema.Draft202012Validator(schema())
    problems, records = [], []
    with open(path) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines, 1):
        try:
            rec = json.loads(line, parse_constant=reject_constant)
        except ValueError as e:
            problems.append(f"{path}:{i}: not JSON: {e}")
            continue
        for err in validator.iter_errors(rec):
            problems.append(f"{path}:{i}: {err.message} (at {'/'.join(map(str, err.absolute_path)) or 'the record'})")
        records.append(rec)
    restarts = [i for i, r in enumerate(records) if r.get("record") == "restart"]
    for i in restarts:  # the launches before the last: consecutive steps, no summary
        before = records[restarts[restarts.index(i) - 1] + 1:i] if restarts.index(i) else records[:i]
        start = (records[restarts[restarts.index(i) - 1]].get("resume_step", 0) or first - 1) + 1 \
            if restarts.index(i) else first
        got = [r.get("step") for r in before if r.get("record") == "step"]
        if got != list(range(start, start + len(got))) or any(r.get("record") == "summary" for r in before):
            problems.append(f"{path}: before restart record {restarts.index(i) + 1}: steps {got}, expected from "
                            f"{start} on, and no summary")
    if restarts:
        first = (records[restarts[-1]].get("resume_step", 0) or first - 1) + 1
        records_all, records = records, records[restarts[-1] + 1:]
    steps = [r for r in records if r.get("record") == "step"]
    summaries = [r for r in records if r.get("record") == "summary"]
    if not records or records[-1].get("record") != "summary" or len(summaries) != 1:
        problems.append(f"{path}: expected one summary record at the end, got {len(summaries)}")
    diverged = [r for r in records if r.get("record") == "diverged"]
    want = list(range(first, first + len(steps)))
    # a run that diverged ends at the step whose loss or gradient norm was not finite
    ended = diverged[0].get("step") if diverged else steps[-1].get("steps") if steps else None
    if [r.get("step") for r in steps] != want or (steps and ended != want[-1]):
        problems.append(f"{path}: steps {[r.get('step') for r in steps]}, expected {first}..their `steps`")
    if len(diverged) > 1 or (diverged and records[-2:-1] != diverged):
        problems.append(f"{path}: a `diverged` record must come once, right before the summary")
    for r in steps:
        phases = r.get("phases_ms", {})
        total = sum(v for v in phases.values() if isinstance(v, (int, float)))
        if min(phases.values(), default=0) < -1e-6 or not math.isclose(total, r.get("step_ms", 0), rel_tol=1e-3,
                                                                          abs_tol=1e-3):
            problems.append(f"{path}: step {r.get('step')}: phases {phases} do not sum to step_ms {r.get('step_ms')}")
    if summaries and steps and summaries[0].get("steps_done") != len(steps):
        problems.append(f"{path}: summary says {summaries[0].get('steps_done')} steps, the log holds {len(steps)}")
    if restarts:
        records = records_all
    return records, problems
