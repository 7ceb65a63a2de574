#!/usr/bin/env python3
"""The run report (`parc report TRACE.json --plan PLAN --html FILE`).

  test_run_report.py PARC EXAMPLES

Runs tiny_pp_1f1b.par for 3 steps with --trace, then
  - `parc report` prints each phase predicted (explain --json's phases_s) and
    measured (rank 0's phase counters in the trace, the mean of steps 2 and 3);
  - the page, rendered in headless Chromium, holds one measured block per
    forward/backward span of the trace's last step on every rank (same rank,
    item and times), the simulated timeline's blocks (one per scheduled item),
    one row per phase with the same two numbers; the screenshot is not blank
    and shows both timelines; the page raises no console errors and loads
    nothing; laid out at 1400 px it fits the window; the measured and the
    simulated timelines share one time axis: their ticks put time 0 at the
    same x and as many pixels in a millisecond, and every block of either
    starts where that axis puts its start time;
  - bad input is an error naming the file (exit 1): not JSON, missing, a trace
    of another plan (other ranks, another schedule), a page that cannot be
    written; a missing --plan or trace is a usage error (exit 2).
Exit 77 without chromium (after the checks that need none); 0 all passed."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_html as th  # noqa: E402

check, run = th.check, th.run
KEYS = ["forward", "backward", "exposed_communication", "bubble", "optimizer"]
NAMES = ["forward", "backward", "exposed communication", "bubble", "optimizer"]


def trace_facts(trace):
    """The last step's B spans per rank (rank, item, start s, end s from the
    step's start) and rank 0's mean phase ms over the steps after the first."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    last = max(e["args"]["step"] for e in events if e["ph"] == "X" and e.get("cat") == "step")
    spans = []
    for pid in sorted({e["pid"] for e in events}):
        step = next(e for e in events if e["pid"] == pid and e["ph"] == "X" and e.get("cat") == "step"
                    and e["args"]["step"] == last)
        for e in events:
            if e["pid"] == pid and e["ph"] == "B" and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]:
                m = re.fullmatch(r"([FB]) mb(\d+)(?: chunk(\d+))?", e["name"])
                item = m.group(1) + m.group(2) + (f".{m.group(3)}" if m.group(3) else "")
                spans.append((pid, item, (e["ts"] - step["ts"]) * 1e-6))
    counters = [e["args"] for e in events if e["pid"] == 0 and e["ph"] == "C"]
    later = counters[1:] or counters
    mean = [sum(c[k] for c in later) / len(later) for k in KEYS]
    return last, spans, mean


def check_text(name, out, exp, mean):
    for k, n in enumerate(NAMES):
        m = re.search(rf"^  {re.escape(n)} +([0-9.]+) (s|ms|\u00b5s|ns) +([0-9.]+) (s|ms|\u00b5s|ns)", out, re.M)
        if not check(m, f"{name}: no `{n}` line in the text report:\n{out}"):
            continue
        unit = {"s": 1, "ms": 1e-3, "\u00b5s": 1e-6, "ns": 1e-9}
        pred, meas = float(m.group(1)) * unit[m.group(2)], float(m.group(3)) * unit[m.group(4)]
        check(th.close(pred, exp["phases_s"][n], 5e-3, 1e-12), f"{name}: {n} predicted {pred}, explain {exp['phases_s'][n]}")
        check(th.close(meas, mean[k] * 1e-3, 5e-3, 1e-9), f"{name}: {n} measured {meas}, trace {mean[k] * 1e-3}")


def check_page(name, els, exp, sched, spans, mean):
    blocks = [e for e in els if e["tag"] == "rect" and "measured" in e["attrs"].get("class", "").split()]
    check(len(blocks) == len(spans) > 0, f"{name}: {len(blocks)} measured blocks, the trace's last step has {len(spans)}")
    got = [(int(e["attrs"]["data-rank"]), e["attrs"]["data-item"], th.attr_float(e, "data-start")) for e in blocks]
    check(all(g[:2] == s[:2] and abs(g[2] - s[2]) < 1e-8 for g, s in zip(got, spans)),
          f"{name}: measured blocks {got[:3]}... differ from the trace {spans[:3]}...")
    sim = [e for e in els if e["svg"] == "timeline" and "data-item" in e["attrs"]
           and "measured" not in e["attrs"].get("class", "")]
    check(len(sim) == sum(len(s) for s in sched), f"{name}: {len(sim)} simulated blocks, schedule {sum(map(len, sched))}")
    rows = {e["attrs"]["data-phase"]: e for e in els if e["tag"] == "tr" and "data-phase" in e["attrs"]}
    check(sorted(rows) == sorted(KEYS), f"{name}: phase rows {sorted(rows)}")
    for k, key in enumerate(KEYS):
        if key in rows:
            check(th.close(th.attr_float(rows[key], "data-predicted-s"), exp["phases_s"][NAMES[k]], 1e-6, 1e-15),
                  f"{name}: {key} predicted differs from explain --json")
            check(th.close(th.attr_float(rows[key], "data-measured-s"), mean[k] * 1e-3, 1e-5, 1e-12),
                  f"{name}: {key} measured differs from the trace's counters")


# Per timeline picture: whether it is the measured one, its ticks (time, x on
# screen) and its blocks (start time, left edge on screen).
TIMELINE_AXES = """return Array.prototype.map.call(document.querySelectorAll('svg.timeline'), function(svg) {
  function x(e) { var b = e.getBoundingClientRect(); return b.left + b.width / 2; }
  return {
    measured: svg.classList.contains('measured'),
    ticks: Array.prototype.map.call(svg.querySelectorAll('line[data-tick-s]'), function(l) {
      return [+l.dataset.tickS, x(l)];
    }),
    blocks: Array.prototype.map.call(svg.querySelectorAll('rect[data-item]'), function(r) {
      return [r.dataset.item, +r.dataset.start, r.getBoundingClientRect().left];
    })
  };
});"""


def check_shared_axis(name, browser, tmp, page):
    """The measured and the simulated timelines, laid out at 1400 px, have one
    time axis: time 0 at the same x, the same pixels per millisecond (read
    off their ticks), and each block starts at its start time on it."""
    got = th.measure(browser, tmp, page, TIMELINE_AXES)
    if not got:
        return
    if not check(sorted(t["measured"] for t in got) == [False, True], f"{name}: timelines {got}"):
        return
    axes = {}
    for t in got:
        what = "measured" if t["measured"] else "simulated"
        ticks = t["ticks"]
        if not check(len(ticks) >= 2, f"{name}: the {what} timeline has {len(ticks)} ticks"):
            return
        (t0, x0), (t1, x1) = ticks[0], ticks[-1]
        per_ms = (x1 - x0) / ((t1 - t0) * 1e3)
        origin = x0 - t0 * 1e3 * per_ms
        check(all(abs(origin + tt * 1e3 * per_ms - xx) < 0.5 for tt, xx in ticks),
              f"{name}: the {what} timeline's ticks are not evenly spaced: {ticks}")
        late = [b for b in t["blocks"] if abs(origin + b[1] * 1e3 * per_ms - b[2]) > 1.0]
        check(t["blocks"] and not late, f"{name}: {len(late)} {what} blocks start off their axis: {late[:3]}")
        axes[what] = (origin, per_ms)
    (om, km), (os_, ks) = axes["measured"], axes["simulated"]
    check(abs(om - os_) < 0.5 and th.close(km, ks, 1e-3),
          f"{name}: the measured timeline puts 0 at x {om:.1f} with {km:.3f} px/ms, the simulated at {os_:.1f} "
          f"with {ks:.3f} px/ms")


def check_errors(parc, examples, tmp, trace, other_trace, plan):
    bad = os.path.join(tmp, "bad.json")
    open(bad, "w").write('{"traceEvents": [ {"ph": "X",')
    p = run([parc, "report", bad, "--plan", plan], 1)
    check(bad in p.stderr and "not JSON" in p.stderr, f"not JSON: `{p.stderr.strip()}`")
    missing = os.path.join(tmp, "none.json")
    p = run([parc, "report", missing, "--plan", plan], 1)
    check(missing in p.stderr and "No such file" in p.stderr, f"missing trace: `{p.stderr.strip()}`")
    p = run([parc, "report", trace, "--plan", os.path.join(examples, "tiny_single.par")], 1)
    check("2 ranks" in p.stderr and "mesh has 1" in p.stderr, f"other ranks: `{p.stderr.strip()}`")
    p = run([parc, "report", other_trace, "--plan", plan], 1)
    check("schedule" in p.stderr and other_trace in p.stderr, f"other schedule: `{p.stderr.strip()}`")
    p = run([parc, "report", trace, "--plan", plan, "--html", "/dev/full"], 1)
    check("/dev/full" in p.stderr, f"/dev/full: `{p.stderr.strip()}`")
    p = run([parc, "report", trace], 2)
    check("missing --plan" in p.stderr, f"no --plan: `{p.stderr.strip()}`")
    p = run([parc, "report", "--plan", plan], 2)
    check("missing TRACE.json" in p.stderr, f"no trace: `{p.stderr.strip()}`")


def main():
    parc, examples = os.path.abspath(sys.argv[1]), sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="parc-run-report-")
    try:
        plan = os.path.join(examples, "tiny_pp_1f1b.par")
        name = "tiny_pp_1f1b.par"
        trace, other = os.path.join(tmp, "t.json"), os.path.join(tmp, "other.json")
        run([parc, "run", plan, "--steps", "3", "--quiet", "--trace", trace])
        run([parc, "run", os.path.join(examples, "tiny_pp_interleaved.par"), "--steps", "1", "--quiet",
             "--trace", other])
        if not check(os.path.exists(trace) and os.path.exists(other), "the runs wrote no traces"):
            return 1
        last, spans, mean = trace_facts(json.load(open(trace)))
        check(last == 3, f"the trace's last step is {last}")
        exp = json.loads(run([parc, "explain", plan, "--json"]).stdout)
        sched = th.schedule_items(run([parc, "lower", plan, "--emit=schedule"]).stdout)
        out_html = os.path.join(tmp, "run.html")
        p = run([parc, "report", trace, "--plan", plan, "--html", out_html])
        check_text(name, p.stdout, exp, mean)
        check_errors(parc, examples, tmp, trace, other, plan)
        browser = os.environ.get("PARC_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
        if not browser:
            print("SKIP: chromium is not installed (apt-get install chromium)")
            return 77 if not th.FAILS else 1
        if not check(os.path.exists(out_html), "no page written"):
            return 1
        th.check_self_contained(name, open(out_html, encoding="utf-8").read())
        rc, dom, log = th.chromium(browser, tmp, "file://" + out_html, "--dump-dom")
        check(rc == 0 and "</html>" in dom, f"{name}: chromium --dump-dom exit {rc}")
        check(not th.console_problems(log), f"{name}: console: {th.console_problems(log)[:3]}")
        parser = th.Dom()
        parser.feed(dom)
        check_page(name, parser.elements, exp, sched, spans, mean)
        th.check_fits(name, browser, tmp, out_html)
        check_shared_axis(name, browser, tmp, out_html)
        png = os.path.join(tmp, "run.png")
        rc, _, log = th.chromium(browser, tmp, "file://" + out_html, f"--screenshot={png}", "--window-size=1400,1600")
        check(rc == 0 and os.path.exists(png), f"{name}: chromium --screenshot exit {rc}")
        check(not th.console_problems(log), f"{name}: console while painting: {th.console_problems(log)[:3]}")
        if os.path.exists(png):
            th.check_screenshot(name, png, [("#4e79a7", "forward blocks"), ("#59a14f", "backward blocks"),
                                            ("#e15759", "measured phase bars")])
        print(f"{name}: {len(spans)} measured spans, {len(parser.elements)} elements checked")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"run report: {len(th.FAILS)} failed")
    return 1 if th.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
