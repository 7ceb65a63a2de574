#!/usr/bin/env python3
"""When a pipeline's first activation leaves stage 0 and arrives at stage 1.

  first_activation.py TRACE.json [--skip N]

Per step after the first N (default 2), from a 2-stage run's --trace: on rank
0 the end of the step's first `send` span (the activation copied out and
posted), on rank 1 the end of its first `recv` span (the activation there),
each in ms since that rank's step start; prints the medians as
`sent=MS arrived=MS` (each process's clock starts at its own exit from the
start-up barrier, so the two agree to about a barrier's skew)."""
import json
import statistics
import sys


def firsts(events, pid, name):
    steps = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "step" and e["pid"] == pid),
                   key=lambda e: e["ts"])
    spans = sorted((e for e in events if e.get("ph") == "X" and e.get("name") == name and e["pid"] == pid),
                   key=lambda e: e["ts"])
    out = []
    for s in steps:
        inside = [e for e in spans if s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
        if inside:
            out.append((inside[0]["ts"] + inside[0]["dur"] - s["ts"]) / 1e3)
    return out


def main():
    events = json.load(open(sys.argv[1]))
    skip = int(sys.argv[sys.argv.index("--skip") + 1]) if "--skip" in sys.argv else 2
    sent, arrived = firsts(events, 0, "send")[skip:], firsts(events, 1, "recv")[skip:]
    if not sent or not arrived:
        print("sent=n/a arrived=n/a")
        return 1
    print(f"sent={statistics.median(sent):.1f} arrived={statistics.median(arrived):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
