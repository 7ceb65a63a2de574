#!/usr/bin/python3
"""test_torch_model.py — the single-rank run of the tiny GPT-2 and tiny Llama
plans against the same models written in PyTorch (float64).

usage: test_torch_model.py PARC EXAMPLES_DIR [--keep DIR]

For tiny_single (pre-LN GPT-2: LayerNorm, qkv/proj/up/down with biases, GELU
(tanh), learned positions, untied head) and tiny_llama (RMSNorm, SwiGLU with up
weight [hidden, 2, ffn], no biases, no positions, head tied to wte) and tiny_gqa
(tiny_llama's block with grouped-query attention: attn.qkv.w [hidden, kv_heads,
G + 2, head_dim], per key/value head its G query heads, then k, then v; k and v
repeated for each query head of the group; untied head) and tiny_rope
(tiny_gqa's model with rotary positions, theta 500000) and tiny_rope_llama31
(plain attention, tied head, rotary positions with Llama 3.1's frequency
scaling, norms with their own epsilons) — the rotation written as Hugging Face
transformers' Llama applies it (modeling_rope_utils.py: inv_freq =
1 / theta^(arange(0, d, 2) / d) in fp32, _compute_llama3_parameters' scaling of
it in fp32; modeling_llama.py: angles position x inv_freq in fp32, cos and sin
of cat(freqs, freqs), q cos + rotate_half(q) sin on q and on k before the
repeat), so parc's pairs (i, i + head_dim/2) are transformers' and an exported
checkpoint needs no permutation — and tiny_dropout
(tiny_single's model with dropout 0.1 on the attention probabilities and on
attn.proj's and mlp.down's outputs before their residual adds; the masks are
those the runtime draws: prt_math.h's counter-based hash of (seed, step,
layer, site, global element index), recomputed here bit for bit in numpy, so
a mask element the runtime drew differently shows in the logits) it builds the
plan and runs 10 steps on one rank with PRT_LOSS_FILE, PRT_DUMP_DIR,
PRT_DUMP_STEP=1 and PRT_DUMP_DATA_ALL=1, then rebuilds the model in torch from
the dumped initial parameters (init_params: the weights at the start of step 1)
and feeds it the dumped tokens and targets of every step, micro-batch k being
samples [k * micro_batch, (k + 1) * micro_batch) (checked on first_sample).
Asserts, per plan:
  - logits of every micro-batch of step 1: ||a - b|| / ||b|| < 1e-5;
  - the loss of step 1 (mean over all batch x seq tokens): relative 1e-5;
  - every parameter gradient of step 1 (summed over micro-batches, after the
    gradient sync): ||a - b|| / ||b|| < 1e-5 per tensor;
  - the loss of every step of 10 AdamW steps (torch.optim.AdamW with each
    parameter's lr, betas, eps and weight decay read from the lowered program,
    so decay applies where the plan applies it): relative 1e-4.
Exits 1 on any failure, 77 (skip) without torch.
"""
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prt_dump  # noqa: E402

try:
    import numpy as np  # Debian's python3-torch depends on python3-numpy
    import torch
except ImportError:
    print("SKIP: torch not installed")
    sys.exit(77)

STEPS = 10
LOGIT_TOL = 1e-5
LOSS1_TOL = 1e-5
GRAD_TOL = 1e-5
CURVE_TOL = 1e-4
PLANS = ["tiny_single", "tiny_llama", "tiny_gqa", "tiny_rope", "tiny_rope_llama31", "tiny_dropout"]
if os.environ.get("TORCH_MODEL_PLANS"):  # a subset, for a quick look
    PLANS = os.environ["TORCH_MODEL_PLANS"].split(",")

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x):
    """SplitMix64's output function on uint64 arrays (prt_math.h prt_dropout_mix)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def dropout_mask(seed, step, layer, site, index, p):
    """prt_dropout_keep over an int64 array of global element indices: 1.0 kept, 0.0 dropped."""
    k = _mix(np.array([seed], dtype=np.uint64) ^ np.uint64(0x64726F706F7574))
    k = _mix(k ^ np.uint64(step))
    k = _mix(k ^ np.uint64(layer * 4 + site))
    k = _mix(k)
    threshold = np.uint64(min(max(math.floor(p * 4294967296.0 + 0.5), 0), 0xFFFFFFFF))
    with np.errstate(over="ignore"):
        draw = _mix(k ^ (index.astype(np.uint64) + np.uint64(0x632BE59BD9B4E019))) >> np.uint64(32)
    return torch.as_tensor((draw >= threshold).astype(np.float64))


def front_fields(parc, plan):
    """The two-word fields of `parc lower --emit=front` ("  KEY VALUE"), as strings."""
    out = subprocess.run([parc, "lower", plan, "--emit=front"], capture_output=True, text=True, check=True).stdout
    return {parts[0]: parts[1] for parts in (line.split() for line in out.splitlines()) if len(parts) == 2}


def rope_inv_freq(theta, dim, scaling=None):
    """transformers' inverse frequencies (modeling_rope_utils.py), in fp32 as it computes them:
    _compute_default_rope_parameters, then with scaling = (factor, low_freq_factor,
    high_freq_factor, original_max_position_embeddings) _compute_llama3_parameters."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if scaling is None:
        return inv_freq
    factor, low_freq_factor, high_freq_factor, old_context_len = scaling
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, inv_freq):
    """x[B, T, heads, head_dim] rotated as transformers' Llama does: the angles position x
    inv_freq in fp32, cos and sin of cat(freqs, freqs) (here in float64), x cos + rotate_half(x) sin."""
    positions = torch.arange(x.shape[1])
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1).double()
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    return x * cos + rotate_half(x) * sin


class Model:
    """The parc model of a plan in torch: parameters by (name, layer) from a dump,
    shapes from `parc lower --emit=graph`."""

    def __init__(self, shapes, init, settings, gqa=False, dropout=0.0, seed=0, front=None):
        front = front or {}
        self.dropout, self.seed = dropout, int(seed)
        self.eps = float(front.get("norm_eps", 1e-5))           # the blocks' norms
        self.final_eps = float(front.get("final_norm_eps", 1e-5))
        self.inv_freq = None                                    # rotary positions: transformers' inv_freq
        if front.get("positions") == "rope":
            scaling = None
            if front.get("rope_scaling") == "llama3":
                scaling = tuple(float(front[k]) for k in ("rope_factor", "rope_low_freq_factor",
                                                          "rope_high_freq_factor"))
                scaling += (int(front["rope_original_max_positions"]),)
            self.rope_scaling = scaling
            self.inv_freq = lambda dim: rope_inv_freq(float(front["rope_theta"]), dim, scaling)
        self.step, self.first = 1, 0  # where forward's micro-batch sits: the masks' step and first sample
        self.shapes = shapes
        self.layers = 1 + max(layer for (_, layer) in init)
        self.p = {}
        for (name, layer), flat in init.items():
            per_layer, sizes = shapes[name]
            if per_layer != (layer >= 0):
                raise ValueError(f"{name} layer {layer}: per-layer mismatch with the graph")
            t = torch.tensor(flat, dtype=torch.float64).reshape(sizes)
            self.p[(name, layer)] = t.requires_grad_(True)
        N = getattr(shapes, "block_layers", 1)
        subs = getattr(shapes, "layer_subs", None) or {}

        def held(n, l):  # a block of N layers holds n in layer l
            return l < 0 or l % N in subs.get(n, {l % N})
        missing = [n for n, (per_layer, _) in shapes.items()
                   if any((n, l) not in self.p for l in (range(self.layers) if per_layer else [-1]) if held(n, l))]
        extra = [(n, l) for (n, l) in self.p if not held(n, l)]
        if extra:
            raise ValueError(f"parameters in layers the graph does not put them in: {extra}")
        if missing:
            raise ValueError(f"parameters missing from the dump: {missing}")
        self.llama = ("ln1.b", 0) not in self.p
        self.tied = ("head.w", -1) not in self.p
        self.gqa = gqa
        self.settings = settings

    def has(self, name, layer=-1):
        return (name, layer) in self.p

    def norm(self, x, name, layer=-1):
        g = self.p[(name + ".g", layer)]
        eps = self.final_eps if layer < 0 else self.eps
        if self.has(name + ".b", layer):
            mean = x.mean(-1, keepdim=True)
            var = ((x - mean) ** 2).mean(-1, keepdim=True)
            return (x - mean) / torch.sqrt(var + eps) * g + self.p[(name + ".b", layer)]
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g

    def linear(self, x, name, layer):
        """x[..., K] @ w, the weight's leading dims flattened to K (row-major) and the rest to M; + b."""
        k = x.shape[-1]
        w = self.p[(name + ".w", layer)].reshape(k, -1)
        y = x.reshape(-1, k) @ w
        if self.has(name + ".b", layer):
            y = y + self.p[(name + ".b", layer)].reshape(-1)
        return y.reshape(*x.shape[:-1], w.shape[1])

    def drop(self, x, layer, site, index):
        """x * mask / (1 - p) with the runtime's mask of (step, layer, site) at the global indices."""
        if self.dropout <= 0:
            return x
        scale = float(np.float32(1.0 / (1.0 - self.dropout)))  # the runtime's fp32 scale
        return x * dropout_mask(self.seed, self.step, layer, site, index, self.dropout).reshape(x.shape) * scale

    def activation(self, u):
        """The block's activation over u[..., up width]: SwiGLU (llama: u[..., 2, ffn], gate then
        up) or GELU (tanh)."""
        if self.llama:
            u = u.reshape(*u.shape[:-1], 2, u.shape[-1] // 2)
            return torch.nn.functional.silu(u[..., 0, :]) * u[..., 1, :]
        return torch.nn.functional.gelu(u, approximate="tanh")

    def mlp(self, h, l):
        """The dense MLP of layer l over h[B, T, hidden] (mlp.up.w [hidden, 2, ffn] with SwiGLU)."""
        return self.linear(self.activation(self.linear(h, "mlp.up", l)), "mlp.down", l)

    def forward(self, tokens):
        B, T = tokens.shape
        self.router_loss = torch.zeros((), dtype=torch.float64)
        samples = np.arange(self.first, self.first + B, dtype=np.int64)
        tok = torch.as_tensor(tokens.astype("int64"))
        wte = self.p[("wte", -1)]
        x = wte[tok]
        if self.has("wpe"):
            x = x + self.p[("wpe", -1)][:T]
        qkv_sizes = self.shapes["attn.qkv.w"][1]
        # grouped-query attention: attn.qkv.w [hidden, kv_heads, G + 2, head_dim]
        KV, G, HD = qkv_sizes[1], qkv_sizes[2] - 2, qkv_sizes[3]
        NH = KV * G if self.gqa else qkv_sizes[2]
        C = NH * HD
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        rope = (lambda t: apply_rope(t, self.inv_freq(HD))) if self.inv_freq else (lambda t: t)
        for l in range(self.layers):
            h = self.norm(x, "ln1", l)
            if self.gqa:  # per kv head g: its G query heads, then k, then v; k rotated before its repeat
                qkv = self.linear(h, "attn.qkv", l).reshape(B, T, KV, G + 2, HD)
                q = rope(qkv[:, :, :, :G].reshape(B, T, NH, HD)).transpose(1, 2)
                k = rope(qkv[:, :, :, G]).repeat_interleave(G, dim=2).transpose(1, 2)
                v = qkv[:, :, :, G + 1].repeat_interleave(G, dim=2).transpose(1, 2)
            else:  # attn.qkv.w [hidden, 3, heads, head_dim]: qkv[B, T, 3, NH, HD]
                qkv = self.linear(h, "attn.qkv", l).reshape(B, T, 3, NH, HD)
                q, k, v = rope(qkv[:, :, 0]), rope(qkv[:, :, 1]), qkv[:, :, 2]
                q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, NH, T, HD]
            s = (q @ k.transpose(-1, -2)) / math.sqrt(HD)
            s = s.masked_fill(~mask, float("-inf"))
            pr = torch.softmax(s, dim=-1)
            if self.dropout > 0:  # element (b, h, i, j): ((sample * NH + h) * T + i) * T + j
                index = ((samples[:, None, None, None] * NH + np.arange(NH)[None, :, None, None]) * T
                         + np.arange(T)[None, None, :, None]) * T + np.arange(T)[None, None, None, :]
                pr = self.drop(pr, l, 0, index)
            a = pr @ v
            a = a.transpose(1, 2).reshape(B, T, C)
            H = x.shape[-1]  # branch outputs: element (b, t, c) is (sample * T + t) * H + c
            hidden = (samples[:, None, None] * T + np.arange(T)[None, :, None]) * H + np.arange(H)[None, None, :]
            x = x + self.drop(self.linear(a, "attn.proj", l), l, 1, hidden)
            h = self.norm(x, "ln2", l)
            x = x + self.drop(self.mlp(h, l), l, 2, hidden)
        x = self.norm(x, "lnf")
        if self.tied:
            return x @ wte.t()
        return x @ self.p[("head.w", -1)]

    def optimizer(self):
        groups = []
        for (name, layer), t in sorted(self.p.items()):
            s = self.settings[name]
            groups.append(dict(params=[t], lr=s["lr"], betas=s["betas"], eps=s["eps"],
                               weight_decay=s["weight_decay"]))
        return torch.optim.AdamW(groups)


def step_batches(records, step):
    """The step's micro-batches in order: [(first_sample, tokens, targets)], deduplicated
    (prt_data runs once for the tokens and once for the targets of a micro-batch)."""
    seen = {}
    for s, first, tokens, targets in records:
        if s != step:
            continue
        if first in seen:
            if not ((seen[first][0] == tokens).all() and (seen[first][1] == targets).all()):
                raise ValueError(f"step {step}: two different samples at first_sample {first}")
            continue
        seen[first] = (tokens, targets)
    batches = [(first, t, g) for first, (t, g) in seen.items()]
    if not batches:
        raise ValueError(f"no data dumped for step {step}")
    mb = batches[0][1].shape[0]
    firsts = [b[0] for b in batches]
    if firsts != [k * mb for k in range(len(batches))]:
        raise ValueError(f"step {step}: micro-batches start at samples {firsts}, expected multiples of {mb}")
    return batches


def rel(a, b):
    a, b = (x.detach().double() if torch.is_tensor(x) else torch.tensor(x, dtype=torch.float64) for x in (a, b))
    return float(torch.linalg.norm(a - b) / max(float(torch.linalg.norm(b)), 1e-300))


def check_plan(parc, examples, name, work, model_class=None):
    """-> list of problems; prints the comparison numbers.  model_class: the torch
    model (Model, or a subclass with another MLP); its forward's router_loss (the
    coefficient-weighted router losses of that micro-batch, summed over layers)
    counts in the step's loss as the mean over the step's micro-batches."""
    model_class = model_class or Model
    plan = os.path.join(examples, name + ".par")
    exe = os.path.join(work, name)
    dump = os.path.join(work, name + ".dump")
    loss_file = os.path.join(work, name + ".loss")
    info = prt_dump.explain(parc, plan)
    if prt_dump.world_size(info) != 1:
        return [f"{name} is not a single-rank plan"]
    prt_dump.build(parc, plan, exe)
    prt_dump.launch(exe, 1, STEPS, {"PRT_LOSS_FILE": loss_file, "PRT_DUMP_DIR": dump, "PRT_DUMP_STEP": "1",
                                     "PRT_DUMP_DATA_ALL": "1"})
    losses = prt_dump.read_losses(loss_file)
    init = prt_dump.merge_params(dump, "init_params")
    grads = prt_dump.merge_params(dump, "grads")
    data = prt_dump.read_data(os.path.join(dump, "data.rank0.bin"))
    logits = prt_dump.read_logits(os.path.join(dump, "logits.rank0.bin"))
    front = front_fields(parc, plan)
    model = model_class(prt_dump.param_shapes(parc, plan), init, prt_dump.optimizer_settings(parc, plan),
                  gqa=front.get("kv_heads", front.get("heads")) != front.get("heads"), dropout=float(front.get("dropout", 0.0)), seed=int(front.get("seed", 0)),
                  front=front)
    problems = []

    # step 1: logits, loss and gradients
    batches = step_batches(data, 1)
    tokens_per_step = sum(t.size for _, t, _ in batches)
    if len(logits) != len(batches):
        problems.append(f"{len(logits)} prt_xent_fwd calls dumped for {len(batches)} micro-batches")
    loss = torch.zeros((), dtype=torch.float64)
    logit_err = 0.0
    for k, (first, tokens, targets) in enumerate(batches):
        model.step, model.first = 1, first
        out = model.forward(tokens)
        if k < len(logits):
            rec = logits[k]
            if rec["vocab_offset"] != 0 or rec["V_local"] != out.shape[-1]:
                problems.append(f"logits call {k}: vocab block {rec['vocab_offset']}+{rec['V_local']}")
            else:
                logit_err = max(logit_err, rel(rec["logits"], out.detach().reshape(rec["N"], -1)))
        tgt = torch.as_tensor(targets.astype("int64")).reshape(-1)
        loss = loss + torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), tgt, reduction="sum")
        loss = loss + model.router_loss * tokens.size
    loss = loss / tokens_per_step
    loss.backward()
    loss1_err = abs(losses[1] - float(loss)) / abs(float(loss))
    grad_err, grad_worst = 0.0, None
    for key, t in sorted(model.p.items()):
        if key not in grads:
            problems.append(f"no gradient dumped for {key[0]} layer {key[1]}")
            continue
        e = rel(grads[key], t.grad.reshape(-1))
        if e > grad_err:
            grad_err, grad_worst = e, key
        if e > GRAD_TOL:
            problems.append(f"gradient {key[0]} layer {key[1]}: ||a-b||/||b|| = {e:.3g}")
    if logit_err > LOGIT_TOL:
        problems.append(f"logits: ||a-b||/||b|| = {logit_err:.3g}")
    if loss1_err > LOSS1_TOL:
        problems.append(f"step 1 loss {losses[1]:.9g} vs torch {float(loss):.9g} (rel {loss1_err:.3g})")

    # AdamW over every step: the torch loss curve against the runtime's
    opt = model.optimizer()
    opt.step()  # step 1's gradients are already in .grad
    curve = [float(loss)]
    for step in range(2, STEPS + 1):
        opt.zero_grad(set_to_none=False)
        batches = step_batches(data, step)
        loss = torch.zeros((), dtype=torch.float64)
        for first, tokens, targets in batches:
            model.step, model.first = step, first
            out = model.forward(tokens)
            tgt = torch.as_tensor(targets.astype("int64")).reshape(-1)
            loss = loss + torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), tgt, reduction="sum")
            loss = loss + model.router_loss * tokens.size
        loss = loss / tokens_per_step
        loss.backward()
        opt.step()
        curve.append(float(loss))
    curve_err = 0.0
    for step, torch_loss in enumerate(curve, start=1):
        if step not in losses:
            problems.append(f"no runtime loss for step {step}")
            continue
        e = abs(losses[step] - torch_loss) / abs(torch_loss)
        curve_err = max(curve_err, e)
        if e > CURVE_TOL:
            problems.append(f"step {step}: loss {losses[step]:.9g} vs torch {torch_loss:.9g} (rel {e:.3g})")
    if not curve[-1] < curve[0]:
        problems.append(f"the torch loss does not fall: {curve}")

    rope = ""
    if model.inv_freq:
        rope = "rotary positions" + (" (llama3 scaling), " if model.rope_scaling else ", ")
    print(f"{name}: {'llama' if model.llama else 'gpt2'}, {'tied' if model.tied else 'untied'} head, "
          f"{'grouped-query attention, ' if model.gqa else ''}{rope}"
          f"{f'dropout {model.dropout:g}, ' if model.dropout > 0 else ''}"
          f"{len(model.p)} parameter tensors, {len(step_batches(data, 1))} micro-batches/step")
    print(f"  logits step 1     ||a-b||/||b|| = {logit_err:.2e}  (tol {LOGIT_TOL:g})")
    print(f"  loss step 1       runtime {losses[1]:.7f} torch {curve[0]:.7f} rel {loss1_err:.2e}  (tol {LOSS1_TOL:g})")
    print(f"  grads step 1      max ||a-b||/||b|| = {grad_err:.2e} ({grad_worst[0]} layer {grad_worst[1]})"
          f"  (tol {GRAD_TOL:g})")
    print(f"  loss curve 1..{STEPS}  max rel diff = {curve_err:.2e}  (tol {CURVE_TOL:g})")
    print("    runtime " + " ".join(f"{losses.get(s, float('nan')):.5f}" for s in range(1, STEPS + 1)))
    print("    torch   " + " ".join(f"{x:.5f}" for x in curve))
    return problems


def main(argv):
    args = argv[1:]
    keep = None
    if "--keep" in args:
        i = args.index("--keep")
        keep = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    parc, examples = args
    torch.set_num_threads(1)
    tmp = None if keep else tempfile.TemporaryDirectory(prefix="parc-torch-")
    work = keep or tmp.name
    os.makedirs(work, exist_ok=True)
    failures = 0
    for name in PLANS:
        try:
            problems = check_plan(parc, examples, name, work)
        except (RuntimeError, ValueError, OSError, KeyError) as e:
            problems = [f"{type(e).__name__}: {e}"]
        for p in problems:
            prt_dump.fail(f"{name}: {p}")
        failures += bool(problems)
    print(f"{len(PLANS) - failures}/{len(PLANS)} plans match PyTorch")
    if tmp:
        tmp.cleanup()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
