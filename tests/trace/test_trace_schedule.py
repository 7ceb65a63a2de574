#!/usr/bin/env python3
"""The trace of a pipelined run shows its schedule.

  test_trace_schedule.py PARC PLAN...

For each plan: `parc run PLAN --steps 2 --trace T` (with PRT_METRICS_FILE), then
  - T is valid Chrome trace JSON (chrome_trace.check: fields per phase, B/E
    bracketing and nesting per thread, one start and one end per flow id);
  - on every rank and in every step, the forward/backward spans ("F mb3",
    "B mb0 chunk1") follow the order `parc lower PLAN --emit=schedule` prints
    for the rank's stage, each inside its step's span and above op spans only
    (every one holds at least one op, and ops run on the compute thread);
  - communication ("comm", "p2p") is on thread 1 (or, started to overlap
    computation, on a lane of its own, thread 2 and up) and nothing else is;
  - every pipeline send and receive carries one end of a flow arrow: as many
    flows as sends, each from a send span to a recv span of the same bytes on
    the neighbouring stage;
  - each step has one "step N" marker per rank and one counter of its phase
    times, whose values on rank 0 equal the PRT_METRICS_FILE record of that step;
  - attention's op spans carry args.gemm_share in (0, 1) (the share of their
    time in the block GEMMs they call), and no other op's span has one.
Exit status 0 iff all of that held."""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chrome_trace  # noqa: E402

FAILS = []
STEPS = 2


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what)
    return cond


def schedule_of(parc, plan):
    """{stage: ["F0", "B0", ...]} and the number of chunks, from the dump."""
    out = subprocess.run([parc, "lower", plan, "--emit=schedule"], capture_output=True, text=True, check=True).stdout
    chunks = int(re.search(r"chunks (\d+)", out).group(1))
    order = {}
    for line in out.splitlines():
        m = re.match(r"stage (\d+): (.*)", line)
        if m:
            order[int(m.group(1))] = m.group(2).split()
    return order, chunks


def item_of(event, chunks):
    """"F mb3 chunk1" -> "F3.1" (the dump's spelling), checked against args."""
    m = re.fullmatch(r"([FB]) mb(\d+)(?: chunk(\d+))?", event["name"])
    if not m:
        return None
    kind, micro, chunk = m.group(1), int(m.group(2)), m.group(3)
    check((chunk is not None) == (chunks > 1), f"span {event['name']!r}: chunk named iff the stage holds several")
    check(event["args"] == {"micro": micro, "chunk": int(chunk or 0)}, f"span {event['name']!r}: args {event['args']}")
    check(event["cat"] == ("forward" if kind == "F" else "backward"), f"span {event['name']!r}: cat {event['cat']}")
    return f"{kind}{micro}" + (f".{chunk}" if chunks > 1 else "")


def check_plan(parc, plan, tmp):
    name = os.path.basename(plan)
    trace_path, metrics = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + ".metrics")
    env = dict(os.environ, PRT_METRICS_FILE=metrics)
    p = subprocess.run([parc, "run", plan, "--steps", str(STEPS), "--trace", trace_path, "--quiet"],
                       capture_output=True, text=True, env=env, timeout=240)
    if not check(p.returncode == 0, f"{name}: parc run exited {p.returncode}: {p.stdout[-400:]} {p.stderr[-400:]}"):
        return
    with open(trace_path) as f:
        trace = json.load(f)  # a finished run's file is complete JSON
    problems = chrome_trace.check(trace)
    for q in problems[:20]:
        print("  ", q)
    check(not problems, f"{name}: the trace is not valid Chrome trace JSON ({len(problems)} problems)")
    events = chrome_trace.events_of(trace) or []
    order, chunks = schedule_of(parc, plan)
    stage_of = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            m = re.search(r"\bpp=(\d+)", e["args"]["name"])
            stage_of[e["pid"]] = int(m.group(1)) if m else 0
    check(sorted(set(stage_of.values())) == sorted(order), f"{name}: ranks of stages {stage_of}, schedule {sorted(order)}")

    # the CPU attention times the block GEMMs it calls itself: its spans carry that share of their time
    for e in events:
        if e["ph"] == "X" and e.get("cat") == "op":
            share = e.get("args", {}).get("gemm_share")
            if e["name"].startswith("attention"):
                check(share is not None and 0 < share < 1, f"{name}: {e['name']} gemm_share {share}")
            else:
                check(share is None, f"{name}: {e['name']} has a gemm_share ({share})")
    by_thread, _ = chrome_trace.spans(events)
    for e in events:
        if e["ph"] in ("X", "B"):
            comm = e.get("cat") in ("comm", "p2p")
            # tid 2 and up: the lanes of collectives started to overlap computation
            check(e["tid"] >= 1 if comm else e["tid"] == 0, f"{name}: {e['name']} ({e.get('cat')}) on thread {e['tid']}")
    for pid, stage in stage_of.items():
        compute = by_thread[(pid, 0)]
        steps = [s for s in compute if s[3].get("cat") == "step" and s[3]["ph"] == "X"]
        check([s[3]["args"]["step"] for s in steps] == list(range(1, STEPS + 1)), f"{name}: rank {pid} step spans")
        marks = [e for e in events if e["pid"] == pid and e["ph"] == "i"]
        check([e["name"] for e in marks] == [f"step {k}" for k in range(1, STEPS + 1)], f"{name}: rank {pid} markers")
        work = [s for s in compute if s[3]["ph"] == "B"]
        ops = [s for s in compute if s[3].get("cat") == "op"]
        for st in steps:
            mine = [item_of(s[3], chunks) for s in work if st[0] <= s[0] and s[1] <= st[1]]
            check(mine == order[stage], f"{name}: rank {pid} (stage {stage}) step {st[3]['args']['step']}: "
                                        f"spans {' '.join(map(str, mine))}, schedule {' '.join(order[stage])}")
        check(len(work) == STEPS * len(order[stage]), f"{name}: rank {pid}: {len(work)} work spans")
        for w in work:
            held = [o for o in ops if w[0] <= o[0] and o[1] <= w[1]]
            if not check(held, f"{name}: rank {pid}: span {w[2]} at {w[0]} holds no op"):
                break
        counters = [e for e in events if e["pid"] == pid and e["ph"] == "C"]
        check(len(counters) == STEPS, f"{name}: rank {pid}: {len(counters)} phase counters, want {STEPS}")
        if pid == 0 and len(counters) == STEPS:
            rows = [r for r in map(json.loads, open(metrics)) if r.get("record") == "step"]
            keys = ["forward", "backward", "exposed_communication", "bubble", "optimizer"]
            check(len(rows) == STEPS, f"{name}: {len(rows)} step records in the metrics log")
            for c, row in zip(counters, rows):
                want = [row["phases_ms"][k] for k in keys]
                got = [c["args"][k] for k in keys]
                check(all(abs(a - b) <= 1e-5 + 1e-5 * abs(b) for a, b in zip(got, want)),  # the log: 6 digits
                      f"{name}: phase counter {got} != metrics record {row}")

    sends = [e for e in events if e["ph"] == "X" and e["name"] == "send"]
    recvs = [e for e in events if e["ph"] == "X" and e["name"] == "recv"]
    starts = [e for e in events if e["ph"] == "s"]
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    check(len(sends) == len(recvs) == len(starts) == len(ends) > 0,
          f"{name}: {len(sends)} sends, {len(recvs)} recvs, {len(starts)} flow starts, {len(ends)} flow ends")

    def holder(e, want):
        return next((x for x in events if x["ph"] == "X" and x["name"] == want and x["pid"] == e["pid"]
                     and x["tid"] == e["tid"] and x["ts"] <= e["ts"] <= x["ts"] + x["dur"] + 0.002), None)

    for s in starts:
        f = ends.get(s["id"])
        snd, rcv = holder(s, "send"), holder(f, "recv") if f else None
        if not check(snd and rcv, f"{name}: flow {s['id']} does not join a send to a recv"):
            continue
        check(snd["args"]["bytes"] == rcv["args"]["bytes"], f"{name}: flow {s['id']}: {snd['args']} -> {rcv['args']}")
        hop = (stage_of[f["pid"]] - stage_of[s["pid"]]) % max(len(order), 1)
        check(len(order) == 1 or hop in (1, len(order) - 1), f"{name}: flow {s['id']} skips stages")
    print(f"{name}: {len(events)} events, {len(starts)} flows, {sum(len(v) for v in order.values())} items per step")


def main():
    parc, plans = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        for plan in plans:
            check_plan(parc, plan, tmp)
    print("test_trace_schedule:", "FAIL" if FAILS else "ok", f"({len(plans)} plans)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
