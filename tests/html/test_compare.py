#!/usr/bin/env python3
"""Plans side by side: `parc diff A B --html FILE` and `parc search PLAN --html FILE`.

  test_compare.py PARC EXAMPLES

  - diff of tiny_dp.par and tiny_zero3.par, and of tiny_single.par and
    tiny_pp_1f1b.par: the figures table holds each plan's numbers as
    `parc explain --json` gives them (peak memory, step, bubble, MFU, phases)
    and their difference; each plan's memory bars have one segment per stage x
    non-zero class of its ledger and its timeline one block per item of its
    schedule (`parc lower --emit=schedule`);
  - the diffs also of tiny_pp_1f1b.par and tiny_pp_interleaved.par and of
    docs/report.par and html/interleaved_128.par: a row for exactly each
    setting (GPUs, mesh, pp/dp/tp sizes, schedule, virtual stages, stage
    split, batch, micro-batches, ZeRO, recompute, sequence parallel, each
    dim's axis, ...) in which the plans as `parc lower --emit=balance` dumps
    them differ, with both plans' values;
  - search of tiny_3d.par --top 3: three plans, in the order and with the
    figures of `parc search --json`, each with its bars and timeline, and a
    setting row for each of search --json's layout fields that differ among
    them;
  - the pages render in headless Chromium with no console errors, load nothing,
    and the screenshots are not blank; laid out at 1400 px they fit the window
    with nothing sticking out of a section;
  - --html to /dev/full is an error naming it (exit 3); --html with --json and
    --html without a file are usage errors (exit 2).
Exit 77 without chromium (after the checks that need none); 0 all passed."""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_html as th  # noqa: E402

check, run = th.check, th.run
NAMES = ["forward", "backward", "exposed communication", "bubble", "optimizer"]


class PlanDom(th.Dom):
    """Dom, with each element's enclosing data-plan (-1 outside one)."""

    def handle_starttag(self, tag, attrs):
        super().handle_starttag(tag, attrs)
        e = self.elements[-1]
        e["plan"] = next((int(x["attrs"]["data-plan"]) for x in reversed(self.stack)
                          if x["tag"] == "div" and "data-plan" in x["attrs"]), -1)


def expected(parc, plan):
    exp = json.loads(run([parc, "explain", plan, "--json"]).stdout)
    sched = th.schedule_items(run([parc, "lower", plan, "--emit=schedule"]).stdout)
    fig = {"peak_memory_bytes": exp["peak_memory_bytes"], "step_s": exp["step_time_s"],
           "bubble_share": exp["pipeline"]["bubble_share"], "mfu": exp["mfu"]}
    for n in NAMES:
        fig[n.replace(" ", "_") + "_s"] = exp["phases_s"][n]
    return exp, sched, fig


def check_plan_pieces(name, els, i, exp, sched):
    mine = [e for e in els if e["plan"] == i]
    segs = [e for e in mine if e["svg"] == "memory" and e["tag"] == "rect" and "data-class" in e["attrs"]]
    want = sorted((s["stage"], k, s["memory"][k]) for s in exp["stages"] for k in th.CLASSES if s["memory"][k] > 0)
    got = sorted((int(e["attrs"]["data-stage"]), e["attrs"]["data-class"], int(e["attrs"]["data-bytes"])) for e in segs)
    check(got == want, f"{name}: plan {i}: {len(got)} bar segments differ from its ledger's {len(want)}")
    blocks = [e for e in mine if e["svg"] == "timeline" and "data-item" in e["attrs"]]
    for s, items in enumerate(sched):
        got = [e["attrs"]["data-item"] for e in blocks if int(e["attrs"]["data-stage"]) == s]
        check(got == items, f"{name}: plan {i} stage {s}: blocks {got[:5]}... differ from its schedule {items[:5]}...")


TENSOR_DIMS = ["heads", "ffn", "vocab"]


def dump_settings(parc, plan):
    """The plan's settings as `parc lower --emit=balance` dumps them, keyed
    and written as the compare page's data-setting and data-setting-value."""
    out, axes, split, stages, nodes = {}, [], {}, [], {}
    out["grad_overlap"], out["tp_overlap"], out["balance"], out["pipeline_scatter"] = "on", "on", "even", "off"
    section = None
    for line in run([parc, "lower", plan, "--emit=balance"]).stdout.splitlines():
        w = line.split()
        if not line.startswith("  "):
            section = w[0] if w else None
        elif section == "cluster" and w[0] in ("nodes", "gpus_per_node"):
            nodes[w[0]] = w[1]
        elif section == "train" and w[0] in ("batch", "micro_batch", "micro_batches", "precision", "master_fp32",
                                             "grads_fp32"):
            out[w[0]] = w[1]
        elif section == "mesh" and w[0] == "axis":
            axes.append((w[2], int(w[4])))
        elif section == "layout":
            if len(w) == 3 and w[1] == "->":
                split[w[0]] = w[2]
            elif w[0] in ("dp", "schedule", "virtual_stages", "sp_axis", "recompute", "grad_overlap",
                          "tp_overlap", "pipeline_scatter"):
                out[w[0]] = w[1]
            elif w[0] == "stages":
                out["pp"] = w[1]
            elif w[0] == "zero":
                out["zero"] = " ".join(w[1:])
            elif w[0] == "stage":  # stage S first F layers L, or stage S chunk C first F layers L
                stages.append(f"{w[5]}:{w[7]}" if w[2] == "chunk" else f"{w[3]}:{w[5]}")
            elif w[0] == "balance":
                out["balance"] = "auto"
    out["gpus"] = f"{nodes['nodes']} x {nodes['gpus_per_node']}"
    out["mesh"] = ", ".join(f"{n} {size}" for n, size in axes)
    sizes = dict(axes)
    out["tp"] = str(next((sizes[split[d]] for d in TENSOR_DIMS if d in split and sizes[split[d]] > 1), 1))
    out["stage_split"] = " ".join(stages)
    for dim, axis in split.items():
        out["split " + dim] = axis
    return out


def settings(els):
    """The settings table: {data-setting: {plan: data-setting-value}}."""
    out, row = {}, None
    for e in els:
        if e["tag"] == "tr":
            row = e["attrs"].get("data-setting")
        elif e["tag"] == "td" and row and "data-setting-value" in e["attrs"]:
            out.setdefault(row, {})[int(e["attrs"]["data-plan"])] = e["attrs"]["data-setting-value"]
    return out


def check_settings(name, parc, els, paths):
    dumps = [dump_settings(parc, p) for p in paths]
    keys = set(dumps[0]) | set(dumps[1])
    want = {k: {i: d.get(k, "-") for i, d in enumerate(dumps)} for k in keys
            if dumps[0].get(k, "-") != dumps[1].get(k, "-")}
    got = settings(els)
    check(got == want, f"{name}: the settings that differ are {got}, the plans' dumps differ in {want}")
    return len(want)


def figures(els):
    out = {}
    for e in els:
        if e["tag"] == "td" and "data-value" in e["attrs"]:
            out.setdefault(e["row"], {})[int(e["attrs"]["data-plan"])] = th.attr_float(e, "data-value")
        if e["tag"] == "td" and "data-delta" in e["attrs"]:
            out.setdefault(e["row"], {})["delta"] = th.attr_float(e, "data-delta")
    return out


def parse(dom):
    p = PlanDom()
    p.feed(dom)
    row = None
    for e in p.elements:
        if e["tag"] == "tr":
            row = e["attrs"].get("data-figure")
        e["row"] = row
    return p.elements


def render(browser, tmp, name, html, colors):
    th.check_self_contained(name, open(html, encoding="utf-8").read())
    rc, dom, log = th.chromium(browser, tmp, "file://" + html, "--dump-dom")
    check(rc == 0 and "</html>" in dom, f"{name}: chromium --dump-dom exit {rc}")
    check(not th.console_problems(log), f"{name}: console: {th.console_problems(log)[:3]}")
    png = os.path.join(tmp, name + ".png")
    rc, _, log = th.chromium(browser, tmp, "file://" + html, f"--screenshot={png}", "--window-size=1400,2400")
    check(rc == 0 and os.path.exists(png), f"{name}: chromium --screenshot exit {rc}")
    check(not th.console_problems(log), f"{name}: console while painting: {th.console_problems(log)[:3]}")
    if os.path.exists(png):
        th.check_screenshot(name, png, colors)
    th.check_fits(name, browser, tmp, html)
    return parse(dom)


def test_diff(parc, examples, tmp, browser, a, b):
    name = f"diff {os.path.basename(a)} {os.path.basename(b)}"
    paths = [os.path.join(examples, a), os.path.join(examples, b)]
    html = os.path.join(tmp, f"diff_{os.path.basename(a)}_{os.path.basename(b)}.html")
    run([parc, "diff", *paths, "--html", html])
    if not browser:
        return
    els = render(browser, tmp, os.path.basename(html)[:-5], html, [("#4e79a7", "forward blocks and weight bars"),
                                                                    ("#59a14f", "backward blocks")])
    got = figures(els)
    for i, path in enumerate(paths):
        exp, sched, fig = expected(parc, path)
        for key, v in fig.items():
            check(key in got and th.close(got[key].get(i, float("nan")), v, 1e-5, 1e-15),  # --json: 6 digits
                  f"{name}: {key} of plan {i}: {got.get(key, {}).get(i)}, explain --json {v}")
        check_plan_pieces(name, els, i, exp, sched)
    for key, row in got.items():
        check(th.close(row["delta"], row[1] - row[0], 1e-6, 1e-12), f"{name}: {key}: delta {row['delta']}")
    differ = check_settings(name, parc, els, paths)
    print(f"{name}: {len(els)} elements checked, {differ} settings differ")


def test_search(parc, examples, tmp, browser):
    plan = os.path.join(examples, "tiny_3d.par")
    html = os.path.join(tmp, "search.html")
    top = json.loads(run([parc, "search", plan, "--top", "3", "--json"]).stdout)["top"]
    p = run([parc, "search", plan, "--top", "3", "--html", html])
    check("1." in p.stdout or "#1" in p.stdout or p.stdout.strip(), "search --html prints no ranking")
    if not browser:
        return
    els = render(browser, tmp, "search", html, [("#4e79a7", "forward blocks and weight bars")])
    got = figures(els)
    heads = [e for e in els if e["tag"] == "h3" and e["plan"] >= 0]
    check(len(heads) == 2 * len(top) == 6, f"search: {len(heads)} plan headings, want bars and timeline of 3")
    for i, r in enumerate(top):
        check(th.close(got["step_s"][i], r["step_time_s"], 1e-5), f"search: #{i + 1} step {got['step_s'][i]}, "
              f"search --json {r['step_time_s']}")
        check(got["peak_memory_bytes"][i] == r["peak_memory_bytes"], f"search: #{i + 1} peak memory differs")
        want = f"pp {r['pp']}" if r["pp"] > 1 else None
        check(heads[i]["text"].startswith(f"#{i + 1} ") and (not want or want in heads[i]["text"]),
              f"search: heading {heads[i]['text']!r} for {r}")
        segs = [e for e in els if e["plan"] == i and e["svg"] == "memory" and "data-class" in e["attrs"]]
        stages = {int(e["attrs"]["data-stage"]) for e in segs}
        check(stages == set(range(r["pp"])), f"search: #{i + 1}: bars of stages {sorted(stages)}, pp {r['pp']}")
        blocks = [e for e in els if e["plan"] == i and e["svg"] == "timeline" and "data-item" in e["attrs"]]
        check(len(blocks) > 0 and {int(e["attrs"]["data-stage"]) for e in blocks} == set(range(r["pp"])),
              f"search: #{i + 1}: timeline blocks on stages {sorted({e['attrs']['data-stage'] for e in blocks})}")
    got = settings(els)
    for key in ("pp", "dp", "tp", "micro_batch", "schedule", "virtual_stages", "recompute", "zero"):
        values = [str(r[key]) for r in top]
        if len(set(values)) == 1:
            check(key not in got, f"search: a row for {key}, the same in all three plans")
        elif check(key in got, f"search: no row for {key}, which differs: {values}"):
            shown = [got[key].get(i, "").split(" ")[0] for i in range(len(top))]
            check(shown == values, f"search: {key} shown as {shown}, search --json {values}")
    print(f"search: {len(els)} elements checked")


def test_errors(parc, examples, tmp):
    a, b = os.path.join(examples, "tiny_dp.par"), os.path.join(examples, "tiny_zero3.par")
    p = run([parc, "diff", a, b, "--html", "/dev/full"], 3)
    check("/dev/full" in p.stderr, f"diff /dev/full: `{p.stderr.strip()}`")
    p = run([parc, "diff", a, b, "--html", os.path.join(tmp, "x.html"), "--json"], 2)
    check("without --json" in p.stderr, f"diff --html --json: `{p.stderr.strip()}`")
    p = run([parc, "diff", a, b, "--html"], 2)
    check("`--html` needs a value (FILE)" in p.stderr, f"diff --html: `{p.stderr.strip()}`")
    p = run([parc, "search", a, "--top", "2", "--html", "/dev/full"], 3)
    check("/dev/full" in p.stderr, f"search /dev/full: `{p.stderr.strip()}`")
    p = run([parc, "search", a, "--html", os.path.join(tmp, "x.html"), "--json"], 2)
    check("without --json" in p.stderr, f"search --html --json: `{p.stderr.strip()}`")


def main():
    parc, examples = os.path.abspath(sys.argv[1]), sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="parc-compare-")
    try:
        browser = os.environ.get("PARC_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
        test_errors(parc, examples, tmp)
        test_diff(parc, examples, tmp, browser, "tiny_dp.par", "tiny_zero3.par")
        test_diff(parc, examples, tmp, browser, "tiny_single.par", "tiny_pp_1f1b.par")
        test_diff(parc, examples, tmp, browser, "tiny_pp_1f1b.par", "tiny_pp_interleaved.par")
        test_diff(parc, examples, tmp, browser, os.path.join("..", "docs", "report.par"),
                  os.path.join("..", "tests", "html", "interleaved_128.par"))
        test_search(parc, examples, tmp, browser)
        if not browser:
            print("SKIP: chromium is not installed (apt-get install chromium)")
            return 77 if not th.FAILS else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"compare: {len(th.FAILS)} failed")
    return 1 if th.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
