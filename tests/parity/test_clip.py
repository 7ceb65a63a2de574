#!/usr/bin/python3
"""test_clip.py — gradient clipping by global norm and weight decay groups.

usage: test_clip.py PARC EXAMPLES_DIR [--steps N]

Copies EXAMPLES_DIR and gives every tiny_* plan (through common/tiny_train.par)
`weight_decay 0.1;` (the default group: matrices and embedding tables) and
`clip CLIP;`, then asserts:
  - groups: `parc lower --emit=ir` decays exactly the parameters of two or more
    dims (GPT-2's and Llama's recipe, written here from the shapes), and with
    `weight_decay 0.1 on all;` every parameter;
  - the torch reference: tiny_single's 10 steps against the same model in
    PyTorch (float64, test_torch_model.Model) stepped by
    torch.nn.utils.clip_grad_norm_(params, CLIP) and AdamW whose groups are built
    here from the shapes, not read from the program: per step the logged
    grad_norm and clip_scale = min(1, CLIP / (norm + 1e-6)) (relative 1e-5 at
    step 1, from the same weights; 1e-4 later, the loss curve's tolerance, as
    fp32 and float64 weights drift apart) and the loss (relative 1e-4);
    clipping must engage on at least 3 steps but not all, and the norm must
    change over the run, or the comparison proves little;
  - the clip factor reaches the update: under `optimizer sgd` the first step
    moves every element by lr * (clip_scale * g + wd * p) (within 1e-5 of the
    tensor's largest move plus an fp32 ulp of its largest weight, the
    rounding of the new weights), with clip_scale < 1 there;
  - every layout: the grad_norm and the loss of every step equal tiny_single's
    within relative 1e-5 (the norm counts each parameter once: replicas over
    tp/dp once, shards summed, across pipeline stages);
  - test_parity.py on the copied examples (losses, parameters, gradients);
  - without `clip` (the examples as they are): every step logs grad_norm and no
    clip_scale, step 1's equal to the clipped run's (the same weights), and
    tiny_dp, tiny_tp, tiny_pp_1f1b, tiny_zero1, tiny_zero3 and tiny_3d log
    tiny_single's norms within relative 1e-5.
Exits 1 on any failure, 77 (skip) without torch.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prt_dump  # noqa: E402

try:
    import torch
    import test_torch_model  # noqa: E402
except ImportError:
    print("SKIP: torch not installed")
    sys.exit(77)

CLIP = 2.0
WD = 0.1
LR = 1e-3
STEPS = 10
NORM_TOL = 1e-5        # step 1: the same weights, as test_torch_model.py's gradients
NORM_CURVE_TOL = 1e-4  # later steps: fp32 and float64 weights drift apart, as the loss curve's tolerance
CURVE_TOL = 1e-4
LAYOUT_TOL = 1e-5


def clipped_examples(examples, work, group="", optimizer="adamw"):
    dst = os.path.join(work, "examples" + (group and "_" + group) + "_" + optimizer)
    shutil.copytree(examples, dst)
    path = os.path.join(dst, "common", "tiny_train.par")
    with open(path) as f:
        text = f.read()
    old = "optimizer adamw lr 1e-3 weight_decay 0.0;"
    if old not in text:
        raise RuntimeError(f"{path}: expected `{old}`")
    new = f"optimizer {optimizer} lr 1e-3;\nweight_decay {WD:g}{' on ' + group if group else ''};\nclip {CLIP:g};"
    with open(path, "w") as f:
        f.write(text.replace(old, new))
    return dst


def run_logged(exe, world, work, name, env_extra=None):
    """Runs exe for STEPS steps with --log; -> list of step records (docs/metrics.schema.json)."""
    mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun")
    log = os.path.join(work, name + ".jsonl")
    env_extra = env_extra or {}
    cmd = [mpirun, "-np", str(world), "--oversubscribe"]
    for k in sorted(env_extra):
        cmd += ["-x", k]
    cmd += [exe, "--steps", str(STEPS), "--quiet", "--log", log]
    r = subprocess.run(cmd, capture_output=True, text=True, env=prt_dump.run_env(env_extra), timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    with open(log) as f:
        records = [json.loads(line) for line in f]
    steps = [r for r in records if r.get("record") == "step"]
    if [r["step"] for r in steps] != list(range(1, STEPS + 1)) or any("grad_norm" not in r for r in steps):
        raise RuntimeError(f"{log}: expected steps 1..{STEPS} with grad_norm, got {records}")
    return steps


def check_groups(parc, plan, all_params, problems):
    shapes = prt_dump.param_shapes(parc, plan)
    settings = prt_dump.optimizer_settings(parc, plan)
    for name, (_, sizes) in sorted(shapes.items()):
        want = WD if all_params or len(sizes) >= 2 else 0.0
        got = settings.get(name, {}).get("weight_decay")
        if got != want:
            problems.append(f"{os.path.basename(plan)} {'on all' if all_params else 'default'}: {name} {sizes} "
                            f"decays {got}, expected {want}")
    decayed = sum(1 for s in settings.values() if s["weight_decay"] > 0)
    print(f"  groups ({'on all' if all_params else 'default'}): {decayed} of {len(settings)} parameter tensors decay")


def torch_reference(parc, ex, work, problems):
    """tiny_single against clip_grad_norm_ + AdamW in float64; -> its step records."""
    plan = os.path.join(ex, "tiny_single.par")
    exe = os.path.join(work, "tiny_single")
    dump = os.path.join(work, "tiny_single.dump")
    prt_dump.build(parc, plan, exe)
    records = run_logged(exe, 1, work, "tiny_single",
                         {"PRT_DUMP_DIR": dump, "PRT_DUMP_STEP": "1", "PRT_DUMP_DATA_ALL": "1"})
    init = prt_dump.merge_params(dump, "init_params")
    data = prt_dump.read_data(os.path.join(dump, "data.rank0.bin"))
    model = test_torch_model.Model(prt_dump.param_shapes(parc, plan), init, {})
    params = [t for _, t in sorted(model.p.items())]
    groups = [dict(params=[t], weight_decay=WD if t.dim() >= 2 else 0.0) for t in params]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-8)
    clipped = 0
    norms = []
    for step in range(1, STEPS + 1):
        opt.zero_grad(set_to_none=False)
        batches = test_torch_model.step_batches(data, step)
        tokens = sum(t.size for _, t, _ in batches)
        loss = torch.zeros((), dtype=torch.float64)
        for _, tok, tgt in batches:
            out = model.forward(tok)
            tgt = torch.as_tensor(tgt.astype("int64")).reshape(-1)
            loss = loss + torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), tgt, reduction="sum")
        loss = loss / tokens
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(params, CLIP))
        opt.step()
        rec = records[step - 1]
        scale = min(1.0, CLIP / (norm + 1e-6))
        e_norm = abs(rec["grad_norm"] - norm) / norm
        e_loss = abs(rec["loss"] - float(loss)) / abs(float(loss))
        e_scale = abs(rec["clip_scale"] - scale) / scale
        clipped += norm > CLIP
        tol = NORM_TOL if step == 1 else NORM_CURVE_TOL
        norms.append(norm)
        ok = e_norm <= tol and e_loss <= CURVE_TOL and e_scale <= tol
        print(f"  step {step:2d}: grad_norm {rec['grad_norm']:.7g} torch {norm:.7g} (rel {e_norm:.1e}), clip_scale "
              f"{rec['clip_scale']:.6f}, loss {rec['loss']:.6f} torch {float(loss):.6f} (rel {e_loss:.1e})"
              f"  {'ok' if ok else 'FAIL'}")
        if not ok:
            problems.append(f"tiny_single step {step}: grad_norm {rec['grad_norm']} vs torch {norm}, clip_scale "
                            f"{rec['clip_scale']} vs {scale}, loss {rec['loss']} vs {float(loss)}")
    if clipped < 3 or clipped == STEPS:
        problems.append(f"clipping engaged on {clipped} of {STEPS} steps (norms {norms}): both regimes are wanted")
    if max(norms) - min(norms) < 1e-3 * max(norms):
        problems.append(f"the gradient norm does not change over the run: {norms}")
    print(f"  clipped on {clipped} of {STEPS} steps (clip {CLIP})")
    return records


def check_sgd_update(parc, examples, work, problems):
    """SGD makes the clip factor visible in the update (AdamW's normalised step
    hides a scale shared by all gradients): after step 1 of tiny_single under
    `optimizer sgd`, every element moved by exactly lr * (clip_scale * g + wd * p)
    (torch.optim.SGD after clip_grad_norm_), wd per the default group."""
    ex = clipped_examples(examples, work, optimizer="sgd")
    plan = os.path.join(ex, "tiny_single.par")
    exe = os.path.join(work, "tiny_single_sgd")
    dump = os.path.join(work, "sgd.dump")
    prt_dump.build(parc, plan, exe)
    global STEPS
    steps, STEPS = STEPS, 1
    try:
        rec = run_logged(exe, 1, work, "sgd", {"PRT_DUMP_DIR": dump, "PRT_DUMP_STEP": "1"})[0]
    finally:
        STEPS = steps
    shapes = prt_dump.param_shapes(parc, plan)
    before, after = prt_dump.merge_params(dump, "init_params"), prt_dump.merge_params(dump)
    grads = prt_dump.merge_params(dump, "grads")
    scale = rec["clip_scale"]
    if not scale < 0.99:
        problems.append(f"sgd: step 1 is not clipped (clip_scale {scale}, grad_norm {rec['grad_norm']})")
    worst = 0.0
    for key in sorted(before):
        p0, g = before[key].astype("float64"), grads[key].astype("float64")
        wd = WD if len(shapes[key[0]][1]) >= 2 else 0.0
        want = LR * (scale * g + wd * p0)
        got = p0 - after[key].astype("float64")
        # the new fp32 weights are rounded (half an ulp) after fp32 arithmetic: an ulp of the largest weight
        bound = 1e-5 * float(abs(want).max()) + 2.0 ** -23 * float(abs(p0).max())
        err = float(abs(got - want).max())
        worst = max(worst, err / bound)
        if err > bound:
            problems.append(f"sgd: {key[0]} layer {key[1]}: update differs from lr * (clip_scale * g + wd * p) "
                            f"by {err:.3g} (bound {bound:.3g})")
    print(f"  sgd step 1: clip_scale {scale:.6f} (grad_norm {rec['grad_norm']:.6g}); update = lr * (clip_scale * g "
          f"+ wd * p), worst error {worst:.2f} of its bound")


def check_layouts(parc, ex, work, reference, problems):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import test_parity  # noqa: E402
    names = [n for n in test_parity.layouts(ex) if n != "tiny_single"]
    for name in names:
        plan = os.path.join(ex, name + ".par")
        exe = os.path.join(work, name)
        prt_dump.build(parc, plan, exe)
        world = prt_dump.world_size(prt_dump.explain(parc, plan))
        records = run_logged(exe, world, work, name)
        worst_norm = max(abs(r["grad_norm"] - q["grad_norm"]) / q["grad_norm"] for r, q in zip(records, reference))
        worst_loss = max(abs(r["loss"] - q["loss"]) / abs(q["loss"]) for r, q in zip(records, reference))
        ok = worst_norm <= LAYOUT_TOL and worst_loss <= LAYOUT_TOL
        print(f"  {name:22s} {world} ranks: grad_norm max rel {worst_norm:.1e}, loss max rel {worst_loss:.1e}  "
              f"{'ok' if ok else 'FAIL'}")
        if not ok:
            problems.append(f"{name}: grad_norm {[r['grad_norm'] for r in records]} vs tiny_single "
                            f"{[q['grad_norm'] for q in reference]}")
    if len(names) < 10:
        problems.append(f"only {len(names)} layouts besides tiny_single: {names}")


UNCLIPPED = ["tiny_dp", "tiny_tp", "tiny_pp_1f1b", "tiny_zero1", "tiny_zero3", "tiny_3d"]


def check_unclipped(parc, examples, work, reference, problems):
    """Megatron-LM and torchtitan log the gradient norm whether or not they clip: so does every plan."""
    runs = {}
    for name in ["tiny_single"] + UNCLIPPED:
        plan = os.path.join(examples, name + ".par")
        exe = os.path.join(work, name + ".noclip")
        prt_dump.build(parc, plan, exe)
        runs[name] = run_logged(exe, prt_dump.world_size(prt_dump.explain(parc, plan)), work, name + ".noclip")
        if any("clip_scale" in r for r in runs[name]):
            problems.append(f"{name} without clip: the log has clip_scale")
    single = runs["tiny_single"]
    first = abs(single[0]["grad_norm"] - reference[0]["grad_norm"]) / reference[0]["grad_norm"]
    print(f"  no clip: tiny_single step 1 grad_norm {single[0]['grad_norm']:.7g}, clipped run's "
          f"{reference[0]['grad_norm']:.7g} (rel {first:.1e})")
    if first > NORM_TOL:
        problems.append(f"no clip: step 1 grad_norm {single[0]['grad_norm']} vs {reference[0]['grad_norm']} clipped")
    for name in UNCLIPPED:
        worst = max(abs(r["grad_norm"] - q["grad_norm"]) / q["grad_norm"] for r, q in zip(runs[name], single))
        print(f"  no clip: {name:14s} grad_norm max rel {worst:.1e}  {'ok' if worst <= LAYOUT_TOL else 'FAIL'}")
        if worst > LAYOUT_TOL:
            problems.append(f"no clip: {name} grad_norm {[r['grad_norm'] for r in runs[name]]} vs tiny_single "
                            f"{[q['grad_norm'] for q in single]}")


def main(argv):
    parsed = prt_dump.parse_args(argv, 6, __doc__)
    if parsed is None:
        return 2
    parc, examples, steps = parsed
    torch.set_num_threads(1)
    problems = []
    with tempfile.TemporaryDirectory(prefix="parc-clip-") as work:
        ex = clipped_examples(examples, work)
        check_groups(parc, os.path.join(ex, "tiny_llama.par"), False, problems)
        check_groups(parc, os.path.join(ex, "tiny_single.par"), False, problems)
        check_groups(parc, os.path.join(clipped_examples(examples, work, "all"), "tiny_single.par"), True, problems)
        try:
            check_sgd_update(parc, examples, work, problems)
            reference = torch_reference(parc, ex, work, problems)
            check_layouts(parc, ex, work, reference, problems)
            check_unclipped(parc, examples, work, reference, problems)
        except (RuntimeError, ValueError, OSError, KeyError) as e:
            problems.append(f"{type(e).__name__}: {e}")
        r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_parity.py"),
                            parc, ex, "--steps", str(steps)], text=True, env=prt_dump.run_env())
        if r.returncode != 0:
            problems.append(f"test_parity.py with clipping and weight decay exited {r.returncode}")
    for p in problems:
        prt_dump.fail(p)
    print("clip: " + ("FAIL" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
