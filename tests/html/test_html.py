#!/usr/bin/env python3
"""The plan report (`parc explain PLAN --html FILE`).

  test_html.py write PARC EXAMPLES    a failed write is an error naming the path, exit 1
  test_html.py render PARC EXAMPLES   reports rendered in headless Chromium (exit 77
                                      without chromium): the DOM against `parc explain
                                      --json`, `parc collectives --json` and `parc lower
                                      --emit=schedule`; the screenshots are not blank;
                                      the pages raise no console errors and load nothing;
                                      laid out at 1400 px they fit the window, nothing
                                      sticking out of a section; the collectives table
                                      shows whole, its axis buttons and stage menu
                                      show exactly the rows of collectives --json
                                      of that axis or stage;
                                      laid out in a 1400 px window, a timeline of 128
                                      micro-batches (interleaved_128.par) draws every
                                      warm-up and drain item at least 5 px wide, its
                                      steady state squeezed into a marked band

Exit status is the verdict: 0 every check passed, 1 a check failed."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html import unescape
from html.parser import HTMLParser

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from png import png_colors  # noqa: E402

FAILS = []
CLASSES = ["weights", "gradients", "master", "optimizer", "activations", "comm", "workspace"]


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what)
    return cond


def close(a, b, rel=1e-9, abs_tol=0.0):
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_tol)


def run(cmd, want_rc=0):
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode == want_rc, f"{' '.join(cmd)}: exit {p.returncode}, want {want_rc}: {p.stderr[-600:]}")
    return p


class Dom(HTMLParser):
    """Every element as (tag, attrs, text directly inside), in document order,
    each with the classes of its enclosing <svg> and <section>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements, self.stack = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        svg = next((e["attrs"].get("class", "") for e in reversed(self.stack) if e["tag"] == "svg"), "")
        section = next((e["attrs"].get("class", "") for e in reversed(self.stack) if e["tag"] == "section"), "")
        e = {"tag": tag, "attrs": a, "text": "", "svg": svg, "section": section}
        self.elements.append(e)
        if tag not in ("meta", "br", "img", "input", "hr", "link"):
            self.stack.append(e)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i]["tag"] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        if self.stack:
            self.stack[-1]["text"] += data


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


def chromium(browser, tmp, url, *extra):
    profile = tempfile.mkdtemp(dir=tmp)
    p = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
                       capture_output=True, text=True, timeout=180)
    return p.returncode, p.stdout, p.stderr


MEASURE = """<script>(function(){var value=(function(){%s})();
var p=document.createElement('pre');p.id='parc-measure';p.textContent=JSON.stringify(value);
document.body.appendChild(p);})();</script>"""


def measure(browser, tmp, page, body, width=1400, height=1000):
    """The value of `body`, the body of a JavaScript function returning
    something JSON can hold, run at the end of a copy of `page` laid out in a
    window of width x height CSS pixels; None after a failed check."""
    text = open(page, encoding="utf-8").read()
    copy = os.path.join(tmp, "measured-" + os.path.basename(page))
    with open(copy, "w", encoding="utf-8") as f:
        f.write(text.replace("</body>", MEASURE % body + "</body>", 1))
    rc, dom, log = chromium(browser, tmp, "file://" + copy, "--dump-dom", f"--window-size={width},{height}")
    m = re.search(r'<pre id="parc-measure">(.*?)</pre>', dom, re.S)
    if not check(rc == 0 and m and not console_problems(log),
                 f"{os.path.basename(page)}: measuring failed (exit {rc}): {console_problems(log)[:3]}"):
        return None
    return json.loads(unescape(m.group(1)))


def console_problems(stderr):
    """Console messages and failed loads in Chromium's log: a report logs nothing."""
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line or "Uncaught" in line or "net::ERR_" in line]


def attr_float(e, name):
    return float(e["attrs"][name])


def check_self_contained(name, html):
    for pattern in (r"<script[^>]*\ssrc=", r"<link\b", r"<img\b", r"<iframe\b", r"\bhref=", r"@import",
                    r"url\((?!#)", r"https?://"):
        check(not re.search(pattern, html), f"{name}: the page refers outside itself: /{pattern}/")


def check_memory(name, els, exp):
    segs = [e for e in els if e["svg"] == "memory" and e["tag"] == "rect" and "data-class" in e["attrs"]]
    want = sorted((s["stage"], k, s["memory"][k]) for s in exp["stages"] for k in CLASSES if s["memory"][k] > 0)
    got = sorted((int(e["attrs"]["data-stage"]), e["attrs"]["data-class"], int(e["attrs"]["data-bytes"])) for e in segs)
    check(len(segs) == len(want), f"{name}: {len(segs)} bar segments, want one per stage x non-zero class = {len(want)}")
    check(got == want, f"{name}: bar segments {got[:4]}... differ from explain --json {want[:4]}...")
    cells = [e for e in els if e["tag"] == "td" and "data-class" in e["attrs"]]
    want_cells = sorted((s["stage"], k, s["memory"][k]) for s in exp["stages"] for k in CLASSES + ["total"])
    got_cells = sorted((int(e["attrs"]["data-stage"]), e["attrs"]["data-class"], int(e["attrs"]["data-bytes"]))
                       for e in cells)
    check(got_cells == want_cells, f"{name}: memory table differs from explain --json")


def schedule_items(dump):
    stages = []
    for line in dump.splitlines():
        m = re.match(r"stage (\d+): (.*)$", line)
        if m:
            stages.append(m.group(2).split())
    return stages


def seconds(text):
    m = re.search(r"step ([0-9.e+-]+) (s|ms|\u00b5s)", text)
    return float(m.group(1)) * {"s": 1, "ms": 1e-3, "\u00b5s": 1e-6}[m.group(2)] if m else None


def check_timeline(name, els, exp, sched, text_report):
    blocks = [e for e in els if e["svg"] == "timeline" and "data-item" in e["attrs"]]
    per_stage = {}
    for e in blocks:
        per_stage.setdefault(int(e["attrs"]["data-stage"]), []).append(e)
    check(len(blocks) == sum(len(s) for s in sched), f"{name}: {len(blocks)} timeline blocks, schedule has "
          f"{sum(len(s) for s in sched)} items")
    for s, items in enumerate(sched):
        got = [e["attrs"]["data-item"] for e in per_stage.get(s, [])]
        check(got == items, f"{name}: stage {s} blocks {got[:6]}... differ from --emit=schedule {items[:6]}...")
        spans = [(attr_float(e, "data-start"), attr_float(e, "data-end")) for e in per_stage.get(s, [])]
        check(all(a[1] <= b[0] * (1 + 1e-9) + 1e-15 for a, b in zip(spans, spans[1:])),
              f"{name}: stage {s}: blocks overlap or run out of order")
    label = [e for e in els if e["svg"] == "timeline" and "data-step-s" in e["attrs"]]
    if not check(len(label) == 1, f"{name}: {len(label)} step labels on the timeline"):
        return
    lab = label[0]
    check(attr_float(lab, "data-step-s") == exp["step_time_s"],
          f"{name}: timeline step {lab['attrs']['data-step-s']} s, explain --json {exp['step_time_s']}")
    check(attr_float(lab, "data-bubble-share") == exp["pipeline"]["bubble_share"],
          f"{name}: timeline bubble {lab['attrs']['data-bubble-share']}, explain --json "
          f"{exp['pipeline']['bubble_share']}")
    check(attr_float(lab, "data-bubble-ideal") == exp["pipeline"]["bubble_ideal"], f"{name}: ideal bubble differs")
    shown = seconds(lab["text"])
    check(shown is not None and close(shown, exp["step_time_s"], 5e-4),
          f"{name}: the written step `{lab['text']}` is not explain's {exp['step_time_s']} s")
    m = re.search(r"step time estimate: ([0-9.e+-]+) s \(pipeline ([0-9.e+-]+) s", text_report)
    check(m and close(attr_float(lab, "data-pipeline-s"), float(m.group(2)), 5e-4),
          f"{name}: pipeline {lab['attrs']['data-pipeline-s']} s, explain says {m.group(2) if m else '?'}")
    # the drawn blocks are the simulation: their makespan and the least idle
    # stage's share are explain's pipeline time and bubble
    makespan = max(attr_float(e, "data-end") for e in blocks)
    check(close(makespan, attr_float(lab, "data-pipeline-s"), 1e-5),
          f"{name}: blocks end at {makespan} s, the pipeline at {lab['attrs']['data-pipeline-s']} s")
    idle = [makespan - sum(attr_float(e, "data-end") - attr_float(e, "data-start") for e in per_stage[s])
            for s in per_stage]
    check(close(min(idle) / makespan, exp["pipeline"]["bubble_share"], 1e-4, 1e-6),
          f"{name}: the blocks' bubble {min(idle) / makespan} is not explain's {exp['pipeline']['bubble_share']}")
    p, m_, v = exp["pipeline"]["stages"], exp["pipeline"]["micro_batches"], exp["pipeline"]["virtual_stages"]
    # every block waits for its input (schedule.h: F(m, c) on stage s receives from F(m, c) on s - 1, or from
    # chunk c - 1 on the last stage; B the reverse) plus the hand-off explain prints
    hop = re.search(r"stage hand-off ([0-9.e+-]+) s", text_report)
    hop = float(hop.group(1)) if hop else 0.0
    at = {(int(e["attrs"]["data-stage"]), e["attrs"]["data-item"]): e for e in blocks}
    late = 0
    for (s, item), e in at.items():
        kind, micro, chunk = item[0], int(item[1:].split(".")[0]), int(item.split(".")[1]) if "." in item else 0
        if kind == "F":
            src = None if s == 0 and chunk == 0 else (s - 1, chunk) if s > 0 else (p - 1, chunk - 1)
        else:
            src = None if s == p - 1 and chunk == v - 1 else (s + 1, chunk) if s < p - 1 else (0, chunk + 1)
        if src is None:
            continue
        src_item = f"{kind}{micro}" + (f".{src[1]}" if v > 1 else "")
        sender = at[(src[0], src_item)]
        if attr_float(e, "data-start") < attr_float(sender, "data-end") + hop * (1 - 1e-3) - 1e-12:
            late += 1
    check(late == 0, f"{name}: {late} blocks start before their input arrives")
    notes = [e for e in els if "data-handoffs" in e["attrs"]]
    handoffs = [e for e in els if "data-handoff" in e["attrs"]]
    if check(len(notes) == 1, f"{name}: no hand-off count"):
        drawn = int(notes[0]["attrs"]["data-handoffs"])
        check(drawn == len(handoffs), f"{name}: note says {drawn} hand-offs, {len(handoffs)} drawn")
        if drawn:
            check(drawn == 2 * (p * v - 1) * m_, f"{name}: {drawn} hand-offs, want 2 (p v - 1) m = "
                  f"{2 * (p * v - 1) * m_}")


# Per timeline, per stage, its blocks in document order: item, start s, left px, width px.
TIMELINE_BOXES = """return Array.prototype.map.call(document.querySelectorAll('svg.timeline'), function(svg) {
  var lanes = {};
  svg.querySelectorAll('rect[data-item]').forEach(function(r) {
    var b = r.getBoundingClientRect();
    (lanes[r.dataset.stage] = lanes[r.dataset.stage] || []).push([r.dataset.item, +r.dataset.start, b.left, b.width]);
  });
  var bands = Array.prototype.map.call(svg.querySelectorAll('g.squeezed'), function(g) {
    var b = g.getBoundingClientRect();
    return {from: +g.dataset.fromS, to: +g.dataset.toS, text: g.textContent, left: b.left, width: b.width};
  });
  return {lanes: lanes, bands: bands};
});"""


def check_readable_timeline(name, browser, tmp, page, min_px=5.0):
    """Laid out at 1400 px: on every stage each warm-up item (before its first
    backward) and each drain item (after its last forward) is at least min_px
    wide and the blocks do not overlap; what is squeezed between them is
    marked as a band that holds only steady-state items."""
    got = measure(browser, tmp, page, TIMELINE_BOXES)
    if not got or not check(len(got) == 1, f"{name}: {len(got or [])} timelines measured"):
        return
    lanes, bands = got[0]["lanes"], got[0]["bands"]
    check(len(bands) >= 1 and all("steady state" in b["text"] and "narrower" in b["text"] for b in bands),
          f"{name}: the squeezed steady state is not marked: {bands}")
    for stage, boxes in sorted(lanes.items(), key=lambda kv: int(kv[0])):
        kinds = [b[0][0] for b in boxes]
        first_b, last_f = kinds.index("B"), len(kinds) - 1 - kinds[::-1].index("F")
        ends = boxes[:first_b] + boxes[last_f + 1:]
        narrow = [b for b in ends if b[3] < min_px]
        check(ends and not narrow, f"{name}: stage {stage}: {len(narrow)} of {len(ends)} warm-up and drain items "
              f"narrower than {min_px} px, e.g. {narrow[:3]}")
        overlap = [(a[0], b[0]) for a, b in zip(boxes, boxes[1:]) if b[2] < a[2] + a[3] - 0.5]
        check(not overlap, f"{name}: stage {stage}: blocks overlap on screen: {overlap[:3]}")
        for band in bands:
            inside = [i for i, b in enumerate(boxes) if band["from"] <= b[1] < band["to"]]
            check(all(first_b <= i <= last_f for i in inside),
                  f"{name}: stage {stage}: the band {band['from']}..{band['to']} s squeezes warm-up or drain items")


# What spills out of the page or out of a section's card, laid out in the window:
# every HTML element (an <svg> as one box), inside a box that scrolls or not.
OVERFLOW = """var bad = [];
document.querySelectorAll('section').forEach(function(sec) {
  var cs = getComputedStyle(sec), box = sec.getBoundingClientRect();
  var right = box.right - parseFloat(cs.borderRightWidth) - parseFloat(cs.paddingRight) + 0.5;
  sec.querySelectorAll('*').forEach(function(e) {
    if (e instanceof SVGElement && !(e instanceof SVGSVGElement)) return;
    var b = e.getBoundingClientRect();
    if (b.width > 0 && b.right > right)
      bad.push([sec.className, e.tagName.toLowerCase(), e.getAttribute('class'), Math.round(b.right),
                Math.round(right)]);
  });
});
return {scroll_width: document.documentElement.scrollWidth, inner_width: innerWidth, bad: bad};"""


def check_fits(name, browser, tmp, page, width=1400):
    """Laid out in a window `width` px wide, the page is no wider than the
    window and nothing sticks out of a section: no table needs scrolling,
    even where it sits in a box that would scroll in a narrower window."""
    got = measure(browser, tmp, page, OVERFLOW, width)
    if not got:
        return
    check(got["inner_width"] == width and got["scroll_width"] <= width,
          f"{name}: at {width} px the page is {got['scroll_width']} px wide (window {got['inner_width']} px)")
    check(not got["bad"], f"{name}: at {width} px {len(got['bad'])} elements stick out of their section "
          f"(section, tag, class, right edge, section's): {got['bad'][:4]}")


def check_mesh(name, els, exp, coll):
    cells = [e for e in els if e["svg"] == "mesh" and "data-rank" in e["attrs"]]
    world = exp["world"]
    for axis in exp["mesh"]:
        mine = [e for e in cells if e["attrs"]["data-axis"] == axis["name"]]
        if axis["size"] == 1:
            check(not mine, f"{name}: axis {axis['name']} of size 1 drawn")
            continue
        check(sorted(int(e["attrs"]["data-rank"]) for e in mine) == list(range(world)),
              f"{name}: axis {axis['name']}: {len(mine)} GPUs drawn, want ranks 0..{world - 1}")
        groups = {}
        for e in mine:
            groups.setdefault(e["attrs"]["data-group"], []).append(e)
        check(len(groups) == world // axis["size"] and all(len(g) == axis["size"] for g in groups.values()),
              f"{name}: axis {axis['name']}: {len(groups)} groups, want {world // axis['size']} of {axis['size']}")
        one_node = all(len({e["attrs"]["data-node"] for e in g}) == 1 for g in groups.values())
        check(one_node == axis["inside_node"], f"{name}: axis {axis['name']}: groups inside one node {one_node}, "
              f"explain --json inside_node {axis['inside_node']}")
    rows = {e["attrs"]["data-axis"]: e for e in els if e["tag"] == "tr" and "data-wire-bytes" in e["attrs"]}
    for axis in exp["mesh"]:
        row = rows.get(axis["name"])
        if check(row is not None, f"{name}: no traffic row for {axis['name']}"):
            got = (float(row["attrs"]["data-bytes"]), float(row["attrs"]["data-wire-bytes"]))
            check(got == (axis["bytes_per_step"], axis["wire_bytes_per_step"]),
                  f"{name}: {axis['name']} moves {got} bytes per step, explain --json "
                  f"{(axis['bytes_per_step'], axis['wire_bytes_per_step'])}")
    if exp["pipeline"]["stages"] > 1 and check("-" in rows, f"{name}: no pipeline traffic row"):
        check(float(rows["-"]["attrs"]["data-bytes"]) == coll["pipeline_bytes_per_step"],
              f"{name}: pipeline bytes {rows['-']['attrs']['data-bytes']}, want {coll['pipeline_bytes_per_step']}")
    links = {e["attrs"]["data-link"]: float(e["attrs"]["data-wire-bytes"]) for e in els if "data-link" in e["attrs"]}
    check(links.get("intra") == coll["wire_inside_nodes"] and links.get("inter") == coll["wire_across_nodes"],
          f"{name}: link totals {links} differ from collectives --json")


def check_collectives(name, els, coll):
    rows = [e for e in els if e["tag"] == "tr" and "data-row" in e["attrs"]]
    want = coll["collectives"]
    check(len(rows) == len(want), f"{name}: {len(rows)} collective rows, collectives --json has {len(want)}")
    for e, c in zip(rows, want):
        got = (int(e["attrs"]["data-stage"]), int(e["attrs"]["data-calls"]), float(e["attrs"]["data-bytes-per-step"]))
        if not check(got == (c["stage"], c["calls_per_step"], c["bytes_per_step"]),
                     f"{name}: collective row {e['attrs']['data-row']} {got} differs from {c}"):
            break


# The collectives table laid out: the boxes around it that clip it, the rows
# on screen, and the rows on screen after each axis button is pressed and each
# stage chosen in the menu (through the page's own script).
COLLECTIVES_SHOWN = """var sec = document.querySelector('section.collectives');
var table = sec.querySelector('table.collectives'), clipped = [];
for (var p = table.parentElement; p && p !== sec; p = p.parentElement)
  if (getComputedStyle(p).overflowY !== 'visible' && p.scrollHeight > p.clientHeight + 1)
    clipped.push([p.getAttribute('class'), p.clientHeight, p.scrollHeight]);
function shown() {
  return Array.prototype.filter.call(sec.querySelectorAll('tr[data-row]'), function(r) {
    return r.getClientRects().length > 0;
  }).map(function(r) { return +r.dataset.row; });
}
var all = shown(), axes = {}, stages = {};
sec.querySelectorAll('button[data-axis-filter]').forEach(function(b) {
  b.click();
  axes[b.dataset.axisFilter] = shown();
});
sec.querySelector('button[data-axis-filter=""]').click();
var menu = sec.querySelector('select[data-stage-filter]');
if (menu) Array.prototype.forEach.call(menu.options, function(o) {
  menu.value = o.value;
  menu.dispatchEvent(new Event('change', {bubbles: true}));
  stages[o.value] = shown();
});
return {clipped: clipped, all: all, axes: axes, stages: stages};"""


def check_collectives_shown(name, browser, tmp, page, coll):
    """The whole collectives table shows in the page, in no box that clips it;
    a button per axis shows exactly that axis' rows (collectives --json), and
    with more than one stage the stage menu exactly that stage's."""
    got = measure(browser, tmp, page, COLLECTIVES_SHOWN)
    if not got:
        return
    rows = coll["collectives"]
    check(not got["clipped"], f"{name}: the collectives table is clipped by a box that scrolls: {got['clipped']}")
    check(got["all"] == list(range(len(rows))), f"{name}: {len(got['all'])} of {len(rows)} collective rows show")
    want = {}
    for i, c in enumerate(rows):
        want.setdefault(c["axis"] or "-", []).append(i)
    want[""] = list(range(len(rows)))
    check(got["axes"] == want, f"{name}: the axis buttons show {({k: len(v) for k, v in got['axes'].items()})} rows, "
          f"collectives --json has {({k: len(v) for k, v in want.items()})}")
    stages = {str(s): [i for i, c in enumerate(rows) if c["stage"] == s] for s in {c["stage"] for c in rows}}
    if len(stages) > 1:
        stages[""] = list(range(len(rows)))
        check(got["stages"] == stages, f"{name}: the stage menu shows "
              f"{({k: len(v) for k, v in got['stages'].items()})} rows, "
              f"want {({k: len(v) for k, v in stages.items()})}")


def check_screenshot(name, png, colors_needed):
    colors = png_colors(png)
    check(len(colors) > 200, f"{name}: screenshot has {len(colors)} colours: blank?")
    for hexcolor, what in colors_needed:
        rgb = tuple(int(hexcolor[i:i + 2], 16) for i in (1, 3, 5))
        check(colors.get(rgb, 0) > 100, f"{name}: screenshot lacks {what} ({hexcolor}): {colors.get(rgb, 0)} px")


def render(parc, examples, browser, tmp, plan, want_rc, shoot, readable=False):
    name = os.path.basename(plan)
    path = os.path.join(examples, plan)
    out = os.path.join(tmp, name + ".html")
    run([parc, "explain", path, "--html", out], want_rc)
    exp = json.loads(run([parc, "explain", path, "--json"], want_rc).stdout)
    coll = json.loads(run([parc, "collectives", path, "--json"]).stdout)
    sched = schedule_items(run([parc, "lower", path, "--emit=schedule"]).stdout)
    text_report = run([parc, "explain", path], want_rc).stdout
    if not check(os.path.exists(out), f"{name}: no report written"):
        return
    check_self_contained(name, open(out, encoding="utf-8").read())
    rc, dom, log = chromium(browser, tmp, "file://" + out, "--dump-dom")
    check(rc == 0 and "</html>" in dom, f"{name}: chromium --dump-dom exit {rc}")
    check(not console_problems(log), f"{name}: console: {console_problems(log)[:3]}")
    parser = Dom()
    parser.feed(dom)
    els = parser.elements
    check_memory(name, els, exp)
    check_timeline(name, els, exp, sched, text_report)
    check_mesh(name, els, exp, coll)
    check_collectives(name, els, coll)
    check_fits(name, browser, tmp, out)
    check_collectives_shown(name, browser, tmp, out, coll)
    if readable:
        check_readable_timeline(name, browser, tmp, out)
    if shoot:
        png = os.path.join(tmp, name + ".png")
        rc, _, log = chromium(browser, tmp, "file://" + out, f"--screenshot={png}", "--window-size=1400,2000")
        check(rc == 0 and os.path.exists(png), f"{name}: chromium --screenshot exit {rc}")
        check(not console_problems(log), f"{name}: console while painting: {console_problems(log)[:3]}")
        if os.path.exists(png):
            check_screenshot(name, png, [("#4e79a7", "forward blocks and weight bars"), ("#59a14f", "backward blocks"),
                                         ("#b07aa1", "workspace bars")])
    print(f"{name}: {len(els)} elements checked")


def test_write(parc, examples, tmp):
    plan = os.path.join(examples, "tiny_3d.par")
    p = run([parc, "explain", plan, "--html", "/dev/full"], 1)
    check("/dev/full" in p.stderr and "No space left" in p.stderr, f"/dev/full: message `{p.stderr.strip()}`")
    missing = os.path.join(tmp, "no", "such", "dir", "r.html")
    p = run([parc, "explain", plan, "--html", missing], 1)
    check(missing in p.stderr and "No such file" in p.stderr, f"missing directory: message `{p.stderr.strip()}`")
    p = run([parc, "explain", plan, "--html"], 2)
    check("needs a value" in p.stderr, f"--html without a file: `{p.stderr.strip()}`")
    p = run([parc, "explain", plan, "--html", os.path.join(tmp, "r.html"), "--json"], 2)
    check("without --json" in p.stderr, f"--html with --json: `{p.stderr.strip()}`")
    p = run([parc, "explain", plan, "--html", "-"])
    check(p.stdout.startswith("<!DOCTYPE html>") and p.stdout.rstrip().endswith("</html>"),
          "--html - does not write the page to standard output")


def main():
    mode, parc, examples = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    tmp = tempfile.mkdtemp(prefix="parc-html-")
    try:
        if mode == "write":
            test_write(parc, examples, tmp)
        else:
            browser = os.environ.get("PARC_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            if not browser:
                print("SKIP: chromium is not installed (apt-get install chromium)")
                return 77
            # the console check itself: a page that throws must be caught
            bad = os.path.join(tmp, "throws.html")
            open(bad, "w").write("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
            _, _, log = chromium(browser, tmp, "file://" + bad, "--dump-dom")
            check(console_problems(log), "a page that throws raised no console message: the check is blind")
            render(parc, examples, browser, tmp, "tiny_3d.par", 0, True)
            render(parc, examples, browser, tmp, "tiny_pp_interleaved.par", 0, False)
            render(parc, examples, browser, tmp, "tiny_single.par", 0, False)
            render(parc, examples, browser, tmp, "llama7b_1gpu.par", 1, False)
            render(parc, examples, browser, tmp, "gpt3_175b.par", 0, True)
            # the plan of the README's picture (docs/report.png)
            render(parc, os.path.join(examples, "..", "docs"), browser, tmp, "report.par", 0, False)
            render(parc, os.path.dirname(os.path.abspath(__file__)), browser, tmp, "interleaved_128.par", 0, False,
                   readable=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"html {mode}: {len(FAILS)} failed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
