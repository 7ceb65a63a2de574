#!/usr/bin/env python3
"""A checker of Chrome trace JSON (the format chrome://tracing and Perfetto read),
as strict as the parts of the format a parc trace uses:

  - the file is {"traceEvents": [...]} or the bare array of events, every
    event an object with a known "ph";
  - every phase has its required fields with the right types
    (X: name, ts, dur >= 0; B: name, ts; E: ts; i: name, ts, s in g/p/t;
    s/f: name, cat, id, ts; C: name, ts, numeric args; M: name, args), and
    pid/tid integers on all of them;
  - per (pid, tid), B/E pairs match like brackets (an E closes the last open B,
    with its name when it gives one) and, together with the X spans, nest:
    two spans of one thread are disjoint or one holds the other;
  - flows: every id has exactly one "s" and one "f", with the same name and
    cat, and each end lies inside a span of its own thread (the slice it binds
    to).  (Their order in time is not checked: each process's clock starts at
    its own exit from a barrier.)

check(trace) returns the list of problems (empty: valid).  As a program:
chrome_trace.py TRACE.json exits 0 when the file is valid, 1 otherwise."""
import json
import sys
from collections import defaultdict

# Timestamps are written with 3 decimals (ns): a span's end, ts + dur, may
# pass the next one's start by the rounding of both.
TOL_US = 0.002
PHASES = {"X", "B", "E", "i", "I", "s", "t", "f", "C", "M"}


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fields(e, i, problems):
    ph = e.get("ph")
    where = f"event {i} ({ph} {e.get('name')!r})"
    if ph not in PHASES:
        problems.append(f"event {i}: unknown ph {ph!r}")
        return False
    need = {"pid": int, "tid": int}
    if ph != "M":
        need["ts"] = "num"
    if ph in ("X", "B", "i", "I", "s", "t", "f", "C", "M"):
        need["name"] = str
    if ph in ("s", "t", "f"):
        need["cat"] = str
    ok = True
    for key, kind in need.items():
        v = e.get(key)
        good = _num(v) if kind == "num" else isinstance(v, kind) and not isinstance(v, bool)
        if not good:
            problems.append(f"{where}: field {key!r} missing or of the wrong type ({v!r})")
            ok = False
    if ph == "X" and not (_num(e.get("dur")) and e["dur"] >= 0):
        problems.append(f"{where}: dur {e.get('dur')!r} is not a number >= 0")
        ok = False
    if ph in ("i", "I") and e.get("s", "t") not in ("g", "p", "t"):
        problems.append(f"{where}: scope {e.get('s')!r} is not g, p or t")
    if ph in ("s", "t", "f") and not (isinstance(e.get("id"), (int, str)) and not isinstance(e.get("id"), bool)):
        problems.append(f"{where}: flow without an id")
        ok = False
    if ph == "C":
        args = e.get("args")
        if not isinstance(args, dict) or not args or not all(_num(v) for v in args.values()):
            problems.append(f"{where}: a counter's args must be numbers: {args!r}")
    if ph == "M" and not isinstance(e.get("args"), dict):
        problems.append(f"{where}: metadata without args")
    return ok


def spans(events):
    """Per (pid, tid): the spans [start, end, name, event] of its X events and
    B/E pairs, and the problems of the B/E bracketing."""
    out, problems, open_ = defaultdict(list), [], defaultdict(list)
    for e in events:
        key = (e["pid"], e["tid"])
        if e["ph"] == "X":
            out[key].append([e["ts"], e["ts"] + e["dur"], e["name"], e])
        elif e["ph"] == "B":
            open_[key].append(e)
        elif e["ph"] == "E":
            if not open_[key]:
                problems.append(f"pid {key[0]} tid {key[1]}: E at {e['ts']} closes nothing")
                continue
            b = open_[key].pop()
            if "name" in e and e["name"] != b["name"]:
                problems.append(f"pid {key[0]} tid {key[1]}: E {e['name']!r} at {e['ts']} closes B {b['name']!r}")
            if e["ts"] < b["ts"]:
                problems.append(f"pid {key[0]} tid {key[1]}: {b['name']!r} ends at {e['ts']} before it begins")
            out[key].append([b["ts"], e["ts"], b["name"], b])
    for key, left in open_.items():
        for b in left:
            problems.append(f"pid {key[0]} tid {key[1]}: B {b['name']!r} at {b['ts']} never ends")
    for key in out:
        out[key].sort(key=lambda s: (s[0], -s[1]))
    return out, problems


def _nesting(by_thread):
    problems = []
    for (pid, tid), ss in by_thread.items():
        stack = []
        for s in ss:
            while stack and stack[-1][1] <= s[0] + TOL_US:
                stack.pop()
            if stack and s[1] > stack[-1][1] + TOL_US:
                t = stack[-1]
                problems.append(f"pid {pid} tid {tid}: {s[2]!r} [{s[0]}, {s[1]}] overlaps {t[2]!r} "
                                f"[{t[0]}, {t[1]}] without nesting")
                continue
            stack.append(s)
    return problems


def _inside(by_thread, key, ts):
    return any(s[0] - TOL_US <= ts <= s[1] + TOL_US for s in by_thread.get(key, ()))


def _flows(events, by_thread):
    problems, ends = [], defaultdict(lambda: {"s": [], "f": [], "t": []})
    for e in events:
        if e["ph"] in ("s", "t", "f"):
            ends[e["id"]][e["ph"]].append(e)
    for fid, d in ends.items():
        if len(d["s"]) != 1 or len(d["f"]) != 1:
            problems.append(f"flow {fid}: {len(d['s'])} starts and {len(d['f'])} ends, want 1 and 1")
            continue
        s, f = d["s"][0], d["f"][0]
        if (s["name"], s["cat"]) != (f["name"], f["cat"]):
            problems.append(f"flow {fid}: starts as {s['name']}/{s['cat']}, ends as {f['name']}/{f['cat']}")
        for end in (s, f):
            if not _inside(by_thread, (end["pid"], end["tid"]), end["ts"]):
                problems.append(f"flow {fid}: its {end['ph']} at {end['ts']} (pid {end['pid']} tid {end['tid']}) "
                                "lies in no span of its thread")
    return problems


def events_of(trace):
    """The event list of either form of the format: {"traceEvents": [...]} or
    the bare array (what a streamed trace is); None for anything else."""
    if isinstance(trace, list):
        return trace
    if isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list):
        return trace["traceEvents"]
    return None


def load(path):
    """A trace file; a streamed one cut short (no closing "]") is read as
    Chrome's readers read it, with the "]" appended."""
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if text.lstrip().startswith("["):
            return json.loads(text.rstrip().rstrip(",") + "]")
        raise


def check(trace):
    listed = events_of(trace)
    if listed is None:
        return ["neither an event array nor an object with a traceEvents list"]
    problems = []
    events = []
    for i, e in enumerate(listed):
        if not isinstance(e, dict):
            problems.append(f"event {i}: not an object")
        elif _fields(e, i, problems):
            events.append(e)
    by_thread, bracket = spans(events)
    return problems + bracket + _nesting(by_thread) + _flows(events, by_thread)


def main():
    problems = check(load(sys.argv[1]))
    for p in problems[:50]:
        print("FAIL:", p)
    print("chrome_trace:", "FAIL" if problems else "ok", f"({len(problems)} problems)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
