#!/usr/bin/python3
"""test_data_group.py — the data group: gradients summed and ZeRO sharded over the ranks of the
data and context axes together, as one collective over their derived axis `dp*cp`; batch over
two axes with the experts over the second (expert parallelism smaller than dp).

usage: test_data_group.py PARC EXAMPLES_DIR

tiny_rope (4 layers, 214,592 parameters in 9 tensors: wte, head.w, lnf.g and 6 per layer) over
dp 2 x cp 2 with ring attention:
  - tiny_rope_ring_dp_ddp (no ZeRO): `parc collectives --json` lists each parameter's gradient
    sync as one all-reduce over `dp*cp`, group 4, of the whole gradient (its elements as
    `parc lower --emit=graph` sizes it, fp32), and no gradient all-reduce over dp or cp alone;
  - tiny_rope_ring_zero3_group (`zero 3 over dp cp`): every weight gather and gradient
    reduce-scatter runs over `dp*cp` (group 4); the optimizer state, weights and gradients per
    rank are a quarter of the DDP plan's, half of `zero 3 over dp`'s (tiny_rope_ring_dp);
    `parc explain` says both axes carry "ZeRO-3 over dp*cp", and its HTML page's traffic table
    has a row for dp*cp; explaining tiny_rope_ring_dp (ZeRO-3 over dp alone) names
    `zero 3 over dp cp;` and the peak it would have, which the plan written so checks to;
  - the same plan on 2 nodes of 2 GPUs (cp inside a node, dp across): the `dp*cp` rows cross
    nodes, cp's ring shifts stay inside one;
  - `zero 1 over dp tp` is refused with the hint `over dp cp`, and the plan written as the hint
    says checks;
  - tiny_rope_ring_batch_two_axes (`batch -> outer inner; seq -> cp; zero 1 over outer inner
    cp;`): each gradient is reduce-scattered once, over the 8 ranks of outer*inner*cp;
  - tiny_moe_edp (`batch -> dp ep; experts -> ep;`, 4 experts over ep 2): the all-to-alls run
    over ep (group 2), each expert weight's gradient is summed over dp (group 2: the ranks
    holding that expert), every other gradient over `dp*ep` (group 4); with `zero 3 over dp`
    (tiny_moe_edp_zero3_dp) and with `zero 1 over dp ep` (tiny_moe_edp_zero1) the experts'
    optimizer state per rank is half of tiny_moe_edp's (sharded over dp, their expert-data-
    parallel group), and the reduce-scatter of an expert's gradient runs over dp (group 2);
  - `parc search tiny_moe_ep4` ranks layouts with the experts over an ep inside dp, and the plan
    it writes for the first explains to the step time the search printed.
Exits 1 on any failure."""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import prt_dump  # noqa: E402

GROUP, FP32 = 4, 4


def run(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r


def collectives(parc, plan):
    return json.loads(run(parc, "collectives", plan, "--json").stdout)["collectives"]


def memory(parc, plan):
    return json.loads(run(parc, "explain", plan, "--json").stdout)["stages"][0]["memory"]


def expert_memory(parc, plan):
    """The experts' optimizer bytes under stage 0's memory (`of which experts`)."""
    text = run(parc, "explain", plan).stdout
    for line in text.splitlines():
        if line.strip().startswith("of which experts"):
            for part in line.split(","):
                words = part.split()
                if "optimizer" in words:
                    i = words.index("optimizer")
                    return " ".join(words[i + 1:i + 3])
    return None


def expert_data_parallel(parc, examples):
    fails = []
    edp = os.path.join(examples, "tiny_moe_edp.par")
    rows = collectives(parc, edp)
    experts = ("mlp.experts.up.w", "mlp.experts.down.w")
    for r in rows:
        if r["collective"].startswith("all-to-all") and (r["axis"], r["group"]) != ("ep", 2):
            fails.append(f"tiny_moe_edp: {r['collective']} of {r['op']} over {r['axis']}, expected ep (2)")
        if r["phase"] == "grad-sync" and r["tensor"] != "grad_norm.sumsq":
            want = ("dp", 2) if r["tensor"] in experts else ("dp*ep", 4)
            if (r["collective"], r["axis"], r["group"]) != ("all-reduce",) + want:
                fails.append(f"tiny_moe_edp: {r['tensor']}'s sync {r['collective']} over {r['axis']} "
                             f"({r['group']}), expected all-reduce over {want}")
    synced = {r["tensor"] for r in rows if r["phase"] == "grad-sync"}
    if not set(experts) <= synced or "attn.qkv.w" not in synced:
        fails.append(f"tiny_moe_edp: gradient syncs {sorted(synced)}")
    base = expert_memory(parc, edp)
    z3 = expert_memory(parc, os.path.join(examples, "tiny_moe_edp_zero3_dp.par"))
    z1 = expert_memory(parc, os.path.join(examples, "tiny_moe_edp_zero1.par"))
    def kib(x):
        n, unit = x.split()
        return float(n) * {"B": 1 / 1024, "KiB": 1, "MiB": 1024}[unit]
    if not (base and z3 and z1) or abs(kib(z3) * 2 - kib(base)) > 1 or abs(kib(z1) * 2 - kib(base)) > 1:
        fails.append(f"experts' optimizer state: {base} (tiny_moe_edp), {z3} (zero 3 over dp), {z1} "
                     "(zero 1 over dp ep): expected half of the first for both")
    for r in collectives(parc, os.path.join(examples, "tiny_moe_edp_zero1.par")):
        if r["collective"] == "reduce-scatter":
            want = ("dp", 2) if r["tensor"] in experts else ("dp*ep", 4)
            if (r["axis"], r["group"]) != want:
                fails.append(f"tiny_moe_edp_zero1: {r['tensor']}'s reduce-scatter over {r['axis']}, expected {want}")
    print(f"expert-data parallelism: experts' optimizer state {base}, {z3} with zero 3 over dp, {z1} with "
          "zero 1 over dp ep")
    # parc search ranks expert parallelism inside the data ranks, and the plan it writes for one
    # such layout explains to the step time it printed
    ep4 = os.path.join(examples, "tiny_moe_ep4.par")
    top = json.loads(run(parc, "search", ep4, "--top", "400", "--json").stdout)["top"]
    inner = [r for r in top if 1 < r["ep"] < r["dp"]]
    if not inner:
        fails.append("search tiny_moe_ep4: no layout with experts over an ep inside dp")
    else:
        k = inner[0]["rank"]
        with tempfile.TemporaryDirectory() as work:
            run(parc, "search", ep4, "--top", str(k), "-o", work)
            os.symlink(os.path.abspath(os.path.join(examples, "common")), os.path.join(work, "common"))
            written = open(os.path.join(work, f"{k}.par")).read()
            got = json.loads(run(parc, "explain", os.path.join(work, f"{k}.par"), "--json").stdout)["step_time_s"]
            if "batch -> dp ep;" not in written or "experts -> ep;" not in written or \
                    abs(got - inner[0]["step_time_s"]) > 1e-6 * got:
                fails.append(f"search #{k} (ep {inner[0]['ep']} of dp {inner[0]['dp']}): the written plan explains "
                             f"to {got} s against {inner[0]['step_time_s']} s, or lacks `batch -> dp ep;`")
        print(f"search tiny_moe_ep4: {len(inner)} of {len(top)} ranked layouts put the experts over an ep inside dp, "
              f"the first #{k}")
    return fails


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    parc, examples = argv[1:]
    fails = []
    ddp = os.path.join(examples, "tiny_rope_ring_dp_ddp.par")
    group = os.path.join(examples, "tiny_rope_ring_zero3_group.par")
    over_dp = os.path.join(examples, "tiny_rope_ring_dp.par")

    numel = {}
    for name, (_, sizes) in prt_dump.param_shapes(parc, ddp).items():
        n = 1
        for s in sizes:
            n *= s
        numel[name] = n
    if sum(numel[k] * (4 if k not in ("wte", "head.w", "lnf.g") else 1) for k in numel) != 214592:
        fails.append(f"tiny_rope's parameters {numel}: expected 214,592 in all")

    rows = collectives(parc, ddp)
    sync = {r["tensor"]: r for r in rows if r["phase"] == "grad-sync" and r["tensor"] != "grad_norm.sumsq"}
    if set(sync) != set(numel):
        fails.append(f"tiny_rope_ring_dp_ddp: gradient sync rows for {sorted(sync)}, expected {sorted(numel)}")
    for name, r in sync.items():
        got = (r["collective"], r["axis"], r["group"], r["elements"], r["element_bytes"])
        if got != ("all-reduce", "dp*cp", GROUP, numel.get(name), FP32):
            fails.append(f"tiny_rope_ring_dp_ddp: {name}'s sync {got}, expected one all-reduce over dp*cp "
                         f"(group {GROUP}) of its {numel.get(name)} fp32 elements")
    alone = [r for r in rows if r["phase"] == "grad-sync" and r["tensor"] != "grad_norm.sumsq" and
             r["axis"] in ("dp", "cp")]
    if alone:
        fails.append(f"tiny_rope_ring_dp_ddp: gradients also summed over one axis: {alone[0]}")

    grows = collectives(parc, group)
    zero = [r for r in grows if r["collective"] in ("all-gather", "reduce-scatter")]
    if not zero or any((r["axis"], r["group"]) != ("dp*cp", GROUP) for r in zero):
        bad = [r for r in zero if (r["axis"], r["group"]) != ("dp*cp", GROUP)]
        fails.append(f"tiny_rope_ring_zero3_group: {len(zero)} ZeRO rows, off the data group: {bad[:1]}")
    gathered = {r["tensor"] for r in zero if r["collective"] == "reduce-scatter"}
    if gathered != set(numel):
        fails.append(f"tiny_rope_ring_zero3_group: reduce-scatters for {sorted(gathered)}, expected every parameter")

    m_ddp, m_group, m_dp = memory(parc, ddp), memory(parc, group), memory(parc, over_dp)
    for k in ("weights", "gradients", "optimizer"):
        if m_group[k] * GROUP != m_ddp[k] or m_group[k] * 2 != m_dp[k]:
            fails.append(f"{k}: {m_group[k]} B over dp*cp, {m_dp[k]} B over dp, {m_ddp[k]} B without ZeRO: "
                         "expected a quarter and a half of the last")
    print(f"optimizer state per rank: {m_ddp['optimizer']} B (DDP over dp*cp), {m_dp['optimizer']} B "
          f"(ZeRO-3 over dp), {m_group['optimizer']} B (ZeRO-3 over dp*cp)")

    # ZeRO over dp alone beside cp: explain names the statement that shards over the group and
    # the memory it would take, and the plan written so explains to that figure
    said = [l for l in run(parc, "explain", over_dp).stdout.splitlines() if "ZeRO-3 over dp alone" in l]
    m = re.search(r"`(zero 3 over dp cp;)` would shard over all 4: ([0-9.]+ \w+) per GPU instead of ([0-9.]+ \w+)",
                  said[0]) if said else None
    if not m:
        fails.append(f"explain tiny_rope_ring_dp: no line proposing ZeRO over dp cp ({said})")
    else:
        with tempfile.TemporaryDirectory() as work:
            os.symlink(os.path.abspath(os.path.join(examples, "common")), os.path.join(work, "common"))
            followed = os.path.join(work, "followed.par")
            with open(followed, "w") as f:
                f.write(open(over_dp).read().replace("zero 3 over dp;", m.group(1)))
            peak = re.search(r"peak ([0-9.]+ \w+) of", run(parc, "check", followed).stdout)
            if not peak or peak.group(1) != m.group(2):
                fails.append(f"followed, the hint's plan peaks at {peak.group(1) if peak else '?'}, it said {m.group(2)}")
            else:
                print(f"explain's hint `{m.group(1)}`: {m.group(3)} -> {m.group(2)} per GPU, as the plan written so checks")

    text = run(parc, "explain", group).stdout
    for axis in ("dp", "cp"):
        if not any(line.split()[:1] == [axis] and "ZeRO-3 over dp*cp" in line for line in text.splitlines()):
            fails.append(f"explain: axis {axis} does not carry `ZeRO-3 over dp*cp`")

    with tempfile.TemporaryDirectory() as work:
        os.symlink(os.path.abspath(os.path.join(examples, "common")), os.path.join(work, "common"))
        page = os.path.join(work, "group.html")
        run(parc, "explain", group, "--html", page)
        if "dp*cp</td><td>4</td><td>1</td>" not in open(page).read():
            fails.append("explain --html: the traffic table has no row for dp*cp (size 4, 1 group)")
        src = open(group).read()
        two = os.path.join(work, "two_nodes.par")
        with open(two, "w") as f:
            f.write(src.replace("nodes 1; gpus_per_node 4;", "nodes 2; gpus_per_node 2; link inter 1 GB/s 10 us;"))
        rows2 = collectives(parc, two)
        for r in rows2:
            want = r["axis"] == "cp"
            if r["axis"] in ("cp", "dp*cp") and r["inside_node"] != want:
                fails.append(f"2 nodes x 2: {r['collective']} over {r['axis']} inside_node {r['inside_node']}, "
                             f"expected {want}")
        if not any(r["axis"] == "dp*cp" for r in rows2):
            fails.append("2 nodes x 2: no collective over dp*cp")
        bad = os.path.join(work, "bad.par")
        with open(bad, "w") as f:
            f.write(src.replace("zero 3 over dp cp;", "heads -> tp;\n  zero 3 over dp tp;")
                    .replace("mesh { dp 2; cp 2; }", "mesh { dp 2; cp 2; tp 1; }"))
        r = run(parc, "check", bad, check=False)
        if r.returncode == 0 or "ZeRO over several axes shards over the data group" not in r.stderr or \
                "hint: write `over dp cp`" not in r.stderr:
            fails.append(f"`zero 3 over dp tp`: exit {r.returncode}, {r.stderr.strip()[:300]}")
        fixed = os.path.join(work, "fixed.par")
        with open(fixed, "w") as f:
            f.write(open(bad).read().replace("zero 3 over dp tp;", "zero 3 over dp cp;"))
        r = run(parc, "check", fixed, check=False)
        if r.returncode != 0:
            fails.append(f"the plan as the hint says does not check: {r.stderr.strip()[:300]}")

    # batch over two axes beside cp, ZeRO over all three: one reduce-scatter per gradient over
    # the 8 ranks of outer*inner*cp, none over batch's own derived axis
    rows3 = collectives(parc, os.path.join(examples, "tiny_rope_ring_batch_two_axes.par"))
    rs = [r for r in rows3 if r["collective"] == "reduce-scatter"]
    if len(rs) != len(numel) or any((r["axis"], r["group"]) != ("outer*inner*cp", 8) for r in rs):
        fails.append(f"tiny_rope_ring_batch_two_axes: {len(rs)} reduce-scatters, "
                     f"{sorted({(r['axis'], r['group']) for r in rs})}: expected one per parameter over "
                     "outer*inner*cp (8)")
    fails += expert_data_parallel(parc, examples)
    for f in fails:
        print("FAIL: " + f)
    print(f"data group: {len(sync)} gradient syncs over dp*cp, {len(zero)} ZeRO-3 collectives over it; "
          f"{'ok' if not fails else f'{len(fails)} failure(s)'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
