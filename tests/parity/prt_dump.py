"""prt_dump.py — readers for the runtime's PRT_DUMP_DIR files and the helpers the
parity tests share (building a plan, launching it, merging per-rank dumps).

The formats are documented in include/parc_rt.h next to PRT_DUMP_DIR; all
little-endian.  Only numpy is needed here (torch is imported by the torch test).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

MAGIC_PARAMS = b"PRTPAR1\0"
MAGIC_DATA = b"PRTDAT1\0"
MAGIC_LOGITS = b"PRTLOG1\0"


def read_trace(path):
    """The events of a --trace file.  A finished run's file is a JSON array; a
    killed run's lacks the closing "]" (Chrome's trace format allows that) and
    may end in a cut line (each event is one line): those lines are dropped."""
    with open(path) as f:
        text = f.read()
    try:
        trace = json.loads(text)
    except json.JSONDecodeError:
        lines = text.rstrip().split("\n")
        trace = None
        while trace is None and lines:
            try:
                trace = json.loads("\n".join(lines).rstrip().rstrip(",") + "\n]")
            except json.JSONDecodeError:
                lines.pop()
        if trace is None:
            raise ValueError(f"{path}: not a trace")
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def _i64(buf, off, n=1):
    return np.frombuffer(buf, dtype="<i8", count=n, offset=off)


def read_params(path):
    """params / init_params / grads file -> (rank, step, blocks); a block is
    (name, layer, flags, index int64[count], value float32[count])."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != MAGIC_PARAMS:
        raise ValueError(f"{path}: not a parameter dump")
    rank, step = (int(x) for x in _i64(buf, 8, 2))
    off, blocks = 24, []
    while off < len(buf):
        name_len = int(_i64(buf, off)[0])
        name = buf[off + 8:off + 8 + name_len].decode()
        off += 8 + name_len
        layer, flags, count = (int(x) for x in _i64(buf, off, 3))
        off += 24
        index = _i64(buf, off, count)
        off += 8 * count
        value = np.frombuffer(buf, dtype="<f4", count=count, offset=off)
        off += 4 * count
        blocks.append((name, layer, flags, index, value))
    return rank, step, blocks


def read_data(path):
    """data file -> list of (step, first_sample, tokens int32[B,T], targets int32[B,T])."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != MAGIC_DATA:
        raise ValueError(f"{path}: not a data dump")
    off, records = 8, []
    while off < len(buf):
        step, first, B, T = (int(x) for x in _i64(buf, off, 4))
        off += 32
        n = B * T
        tokens = np.frombuffer(buf, dtype="<i4", count=n, offset=off).reshape(B, T)
        targets = np.frombuffer(buf, dtype="<i4", count=n, offset=off + 4 * n).reshape(B, T)
        off += 8 * n
        records.append((step, first, tokens, targets))
    return records


def read_logits(path):
    """logits file -> list of dicts step, call, N, V_local, vocab_offset, axis, logits float32[N, V_local]."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != MAGIC_LOGITS:
        raise ValueError(f"{path}: not a logits dump")
    off, records = 8, []
    while off < len(buf):
        step, call, N, V, voff, axis = (int(x) for x in _i64(buf, off, 6))
        off += 48
        logits = np.frombuffer(buf, dtype="<f4", count=N * V, offset=off).reshape(N, V)
        off += 4 * N * V
        records.append(dict(step=step, call=call, N=N, V_local=V, vocab_offset=voff, axis=axis, logits=logits))
    return records


def merge_params(dump_dir, what="params"):
    """Merges WHAT.rank*.bin of every rank into {(name, layer): float32 array (flat,
    global order)}.  Raises ValueError unless every element is present exactly once,
    or, where replicated, every copy holds the same value.  A block with local
    indices (flags != 0: a ZeRO-2 gradient share) cannot be merged: an error."""
    paths = sorted(glob.glob(os.path.join(dump_dir, f"{what}.rank*.bin")))
    if not paths:
        raise ValueError(f"{dump_dir}: no {what}.rank*.bin")
    parts = {}
    for p in paths:
        _, _, blocks = read_params(p)
        for name, layer, flags, index, value in blocks:
            if flags != 0:
                raise ValueError(f"{p}: {name} layer {layer} has local indices (flags {flags})")
            parts.setdefault((name, layer), []).append((index, value))
    merged = {}
    for key, pieces in parts.items():
        index = np.concatenate([i for i, _ in pieces])
        value = np.concatenate([v for _, v in pieces])
        order = np.argsort(index, kind="stable")
        index, value = index[order], value[order]
        uniq, first = np.unique(index, return_index=True)
        if len(uniq) == 0 or uniq[0] != 0 or uniq[-1] != len(uniq) - 1:
            missing = (int(uniq[-1]) + 1 - len(uniq)) if len(uniq) else "all"
            raise ValueError(f"{key[0]} layer {key[1]}: elements missing ({missing} of {int(uniq[-1]) + 1})")
        lo = np.minimum.reduceat(value, first)
        hi = np.maximum.reduceat(value, first)
        if np.any(hi != lo):
            bad = int(np.count_nonzero(hi != lo))
            raise ValueError(f"{key[0]} layer {key[1]}: {bad} replicated elements differ between ranks "
                             f"(max spread {float(np.max(hi - lo)):.3g})")
        merged[key] = value[first]
    return merged


def read_losses(path):
    """PRT_LOSS_FILE -> {step: loss}."""
    losses = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                step, loss = line.split()
                losses[int(step)] = float(loss)
    return losses


def parse_args(argv, steps, doc, option="--steps", convert=int):
    """The tests' command line `TEST PARC EXAMPLES [--steps N]` (or another
    option with one value, read by convert): (parc, examples, value), or None
    after printing doc (the caller exits 2)."""
    args = argv[1:]
    if option in args:
        i = args.index(option)
        steps = convert(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(doc, file=sys.stderr)
        return None
    return args[0], args[1], steps


def run_env(extra=None):
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    env.update(extra or {})
    return env


def explain(parc, plan):
    """`parc explain PLAN --json` (schema docs/json.md) as a dict."""
    out = subprocess.run([parc, "explain", plan, "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def world_size(info):
    return int(info["world"])


def zero_stage(info):
    """The plan's ZeRO stage (0: none), from what its mesh axes carry."""
    stages = [int(m.group(1)) for axis in info["mesh"] for m in [re.search(r"ZeRO-(\d)", axis.get("carries", ""))] if m]
    return max(stages, default=0)


def build(parc, plan, exe):
    r = subprocess.run([parc, "build", plan, "-o", exe], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"parc build {plan} failed ({r.returncode}):\n{r.stdout}{r.stderr}")


def launch(exe, world, steps, env_extra, timeout=300):
    """Runs exe on `world` ranks (mpirun, oversubscribed) with the dump variables in
    env_extra exported to every rank.  Raises RuntimeError on failure."""
    mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun") or shutil.which("mpiexec")
    if not mpirun:
        raise RuntimeError("mpirun not found (set PARC_MPIRUN)")
    cmd = [mpirun, "-np", str(world), "--oversubscribe"]
    for k in sorted(env_extra):
        cmd += ["-x", k]
    cmd += [exe, "--steps", str(steps), "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=run_env(env_extra), timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-4000:]}{r.stderr[-4000:]}")


def param_shapes(parc, plan):
    """{name: (per_layer, [sizes])} of the model's parameters from `parc lower --emit=graph`.
    A block of several layers (`mlp moe ... every N`) names its layer j's
    parameters "lJ.NAME": they are listed by NAME, and layer_subs[NAME] is the set
    of j (global layer l holds NAME iff l % N is in it, N = block_layers)."""
    out = subprocess.run([parc, "lower", plan, "--emit=graph"], capture_output=True, text=True, check=True).stdout
    shapes, region = Shapes(), None
    shapes.layer_subs = {}
    for line in out.splitlines():
        m = re.match(r"region (\w+):", line)
        if m:
            region = m.group(1)
            continue
        m = re.match(r"\s+param\s+(\S+)\s+\[([^\]]*)\]", line)
        if m:
            sizes = [int(s.split("=")[1]) for s in m.group(2).split(",") if s.strip()]
            name, sub = m.group(1), 0
            j = re.match(r"l(\d+)\.(.*)", name) if region == "block" else None
            if j:
                sub, name = int(j.group(1)), j.group(2)
            shapes[name] = (region == "block", sizes)
            shapes.layer_subs.setdefault(name, set()).add(sub)
            shapes.block_layers = max(shapes.block_layers, sub + 1)
    return shapes


class Shapes(dict):
    """param_shapes' answer: a dict with the block's layout beside it."""
    layer_subs = None
    block_layers = 1


def schedule_peak(parc, plan):
    """The peak of the plan's learning-rate schedule, from `parc explain` (the
    optimizer calls of a plan with a schedule read the LR of each step: `lr`)."""
    out = subprocess.run([parc, "explain", plan], capture_output=True, text=True, check=True).stdout
    m = re.search(r"^  lr schedule +peak (\S+):", out, re.M)
    if not m:
        raise RuntimeError(f"{plan}: the optimizer reads a scheduled lr, but explain shows no schedule")
    return float(m.group(1))


def optimizer_settings(parc, plan):
    """{parameter name: dict(lr, betas, eps, weight_decay)} from the adamw calls of
    `parc lower --emit=ir` (weight decay is per parameter: the plan decays matrices only)."""
    out = subprocess.run([parc, "lower", plan, "--emit=ir"], capture_output=True, text=True, check=True).stdout
    settings = {}
    for m in re.finditer(r"adamw\(%([^\[,]+)[^\n]*?,\s*step,\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*([^)]+)\)",
                         out):
        lr_arg, b1, b2, eps, wd = m.groups()[1:]
        lr = float(lr_arg) if lr_arg.strip() != "lr" else schedule_peak(parc, plan)
        b1, b2, eps, wd = float(b1), float(b2), float(eps), float(wd)
        name = re.sub(r"^l\d+\.", "", m.group(1))  # a block's layer j: "lJ.NAME" (param_shapes)
        settings[name] = dict(lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    if not settings:
        raise RuntimeError(f"{plan}: no adamw calls in the lowered program")
    return settings


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
