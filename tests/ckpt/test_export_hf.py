#!/usr/bin/python3
"""test_export_hf.py — `parc export --names hf` loaded into plain PyTorch models
that follow Hugging Face's module names and weight layouts, and their logits
against the parc run's.

usage: test_export_hf.py PARC EXAMPLES_DIR

For tiny_single (a GPT-2: transformer.wte / wpe / h.L.{ln_1, attn.c_attn,
attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj} / ln_f, Conv1D weights [in, out],
lm_head [vocab, hidden] as nn.Linear), tiny_llama (model.embed_tokens /
layers.L.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
mlp.{gate,up,down}_proj} / norm, nn.Linear weights [out, in], head tied to the
embedding) and tiny_gqa (the same with 2 key/value heads for 4 query heads and
an untied lm_head) and tiny_rope (tiny_gqa's model with rotary positions at
theta 500000, applied here as transformers' Llama applies them: inv_freq =
1 / theta^(arange(0, hd, 2) / hd) in fp32, q and k rotated by x cos +
rotate_half(x) sin, the exported q_proj and k_proj used as they are — no
permutation of their rows): runs 6 steps on one rank saving a checkpoint at step 5 and
dumping step 6's tokens and logits (PRT_DUMP_STEP=6: the weights of step 6 are
those saved at step 5), exports step 5 with the default names, reads the file
with a plain reader (json + struct + numpy), loads it with load_state_dict(strict)
into the model written here (torch only, float64) and compares the logits of
every micro-batch of step 6: ||a - b|| / ||b|| < 1e-5.  The positions of a
Llama plan are the plan's (`embed;`: none; `embed positions rope ...`: rotary),
so this model applies rotary positions exactly where the plan has them; the
file holds weights only, and the base (config.json's rope_theta) is read from
the plan here.  Also: --names parc keeps parc's names, and a bad --names value
is a usage error.
Exits 1 on any failure, 77 (skip) without torch.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import numpy as np  # noqa: E402
import prt_dump  # noqa: E402

try:
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError:
    print("SKIP: torch not installed")
    sys.exit(77)

LOGIT_TOL = 1e-5
NORM_EPS = 1e-5  # runtime/cpu/prt_cpu_ops.c NORM_EPS
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def read_safetensors(path):
    """A plain safetensors reader: ({name: float64 tensor of its shape}, metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        if t["dtype"] != "F32":
            raise ValueError(f"{path}: {name}: {t['dtype']}, this test exports fp32 plans")
        a = np.frombuffer(raw[8 + hlen + b:8 + hlen + e], dtype="<f4").reshape(t["shape"])
        out[name] = torch.from_numpy(a.astype(np.float64))
    return out, meta


def causal_attention(q, k, v):
    """q [B, H, T, hd], k and v [B, H, T, hd] (already repeated per query head)."""
    T = q.shape[2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(s, -1) @ v


class Conv1D(nn.Module):
    """GPT-2's Conv1D: weight [in, out], y = x W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out, dtype=torch.float64))
        self.bias = nn.Parameter(torch.zeros(n_out, dtype=torch.float64))

    def forward(self, x):
        return x @ self.weight + self.bias


class GPT2Attention(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.c_attn, self.c_proj = Conv1D(C, 3 * C), Conv1D(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
        return self.c_proj(causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C))


class GPT2MLP(nn.Module):
    def __init__(self, C, Fd):
        super().__init__()
        self.c_fc, self.c_proj = Conv1D(C, Fd), Conv1D(Fd, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, C, H, Fd):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=NORM_EPS, dtype=torch.float64)
        self.attn = GPT2Attention(C, H)
        self.ln_2 = nn.LayerNorm(C, eps=NORM_EPS, dtype=torch.float64)
        self.mlp = GPT2MLP(C, Fd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, V, S, C, H, Fd, L):
        super().__init__()
        self.wte = nn.Embedding(V, C, dtype=torch.float64)
        self.wpe = nn.Embedding(S, C, dtype=torch.float64)
        self.h = nn.ModuleList(GPT2Block(C, H, Fd) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=NORM_EPS, dtype=torch.float64)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, V, S, C, H, Fd, L):
        super().__init__()
        self.transformer = GPT2Model(V, S, C, H, Fd, L)
        self.lm_head = nn.Linear(C, V, bias=False, dtype=torch.float64)

    def forward(self, tokens):
        return self.lm_head(self.transformer(tokens))


class LlamaRMSNorm(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C, dtype=torch.float64))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.weight


def linear(n_in, n_out):
    return nn.Linear(n_in, n_out, bias=False, dtype=torch.float64)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary(x, theta):
    """x [B, H, T, hd] rotated as transformers' Llama does (modeling_rope_utils.py's default
    inv_freq in fp32, the angles position x inv_freq in fp32, cos and sin of cat(freqs, freqs))."""
    hd = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    freqs = torch.arange(x.shape[2]).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1).double()
    return x * emb.cos() + rotate_half(x) * emb.sin()


class LlamaAttention(nn.Module):
    def __init__(self, C, H, KV, rope_theta=None):
        super().__init__()
        self.H, self.KV, self.hd, self.rope_theta = H, KV, C // H, rope_theta
        self.q_proj, self.k_proj = linear(C, H * self.hd), linear(C, KV * self.hd)
        self.v_proj, self.o_proj = linear(C, KV * self.hd), linear(H * self.hd, C)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.H, self.hd).transpose(1, 2)
        k, v = (p(x).view(B, T, self.KV, self.hd).transpose(1, 2) for p in (self.k_proj, self.v_proj))
        if self.rope_theta:  # q and k rotated, k before it is repeated for its query heads
            q, k = rotary(q, self.rope_theta), rotary(k, self.rope_theta)
        k, v = (t.repeat_interleave(self.H // self.KV, dim=1) for t in (k, v))  # query head h reads kv head h // G
        return self.o_proj(causal_attention(q, k, v).transpose(1, 2).reshape(B, T, self.H * self.hd))


class LlamaMLP(nn.Module):
    def __init__(self, C, Fd):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = linear(C, Fd), linear(C, Fd), linear(Fd, C)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, C, H, KV, Fd, rope_theta):
        super().__init__()
        self.self_attn, self.mlp = LlamaAttention(C, H, KV, rope_theta), LlamaMLP(C, Fd)
        self.input_layernorm, self.post_attention_layernorm = LlamaRMSNorm(C), LlamaRMSNorm(C)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, V, C, H, KV, Fd, L, rope_theta):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, C, dtype=torch.float64)
        self.layers = nn.ModuleList(LlamaDecoderLayer(C, H, KV, Fd, rope_theta) for _ in range(L))
        self.norm = LlamaRMSNorm(C)

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, V, C, H, KV, Fd, L, tied, rope_theta=None):
        super().__init__()
        self.model = LlamaModel(V, C, H, KV, Fd, L, rope_theta)
        self.tied = tied
        if not tied:
            self.lm_head = linear(C, V)

    def forward(self, tokens):
        h = self.model(tokens)
        return h @ self.model.embed_tokens.weight.T if self.tied else self.lm_head(h)


def model_for(shapes, state, meta, rope_theta=None):
    """The torch model of the exported family, sized from parc's parameter shapes; a Llama with
    rotary positions at rope_theta when it is given."""
    V, C = shapes["wte"][1]
    L = 1 + max(int(k.split(".")[2 if k.startswith("transformer") else 2]) for k in state if ".h." in k or
                ".layers." in k)
    if meta.get("model_type") == "gpt2":
        _, _, H, _ = shapes["attn.qkv.w"][1]
        return GPT2LMHeadModel(V, shapes["wpe"][1][0], C, H, shapes["mlp.up.w"][1][1], L)
    qkv = shapes["attn.qkv.w"][1]
    H, KV = (qkv[2], qkv[2]) if qkv[1] == 3 and qkv[2] * qkv[3] == C else (qkv[1] * (qkv[2] - 2), qkv[1])
    return LlamaForCausalLM(V, C, H, KV, shapes["mlp.up.w"][1][2], L, meta.get("tie_word_embeddings") == "true",
                            rope_theta)


def test_plan(parc, examples, work, name, family, first_key):
    d = os.path.join(work, name)
    os.makedirs(d)
    plan = os.path.join(examples, name + ".par")
    exe = os.path.join(d, name)
    prt_dump.build(parc, plan, exe)
    ck, dump = os.path.join(d, "ck"), os.path.join(d, "dump")
    r = subprocess.run([exe, "--steps", "6", "--quiet", "--checkpoint-dir", ck, "--checkpoint-every", "5",
                        "--timeout", "0"], capture_output=True, text=True, env=prt_dump.run_env(
                            {"PRT_DUMP_DIR": dump, "PRT_DUMP_STEP": "6"}), timeout=300)
    check(r.returncode == 0, f"{name}: 6 steps with a checkpoint at step 5 (exit {r.returncode}: {r.stderr[-300:]})")
    out = os.path.join(d, "model.safetensors")
    e = subprocess.run([parc, "export", os.path.join(ck, "step-000000005"), "-o", out], capture_output=True,
                       text=True)
    check(e.returncode == 0, f"{name}: parc export exits 0 ({e.returncode}: {e.stderr.strip()})")
    if e.returncode:
        return
    state, meta = read_safetensors(out)
    check(meta.get("names") == "hf" and meta.get("model_type") == family and first_key in state,
          f"{name}: Hugging Face {family} names by default ({meta}, e.g. {sorted(state)[:2]})")
    front = subprocess.run([parc, "lower", plan, "--emit=front"], capture_output=True, text=True, check=True).stdout
    fields = {f[0]: f[1] for f in (line.split() for line in front.splitlines()) if len(f) == 2}
    rope_theta = float(fields["rope_theta"]) if fields.get("positions") == "rope" else None
    model = model_for(prt_dump.param_shapes(parc, plan), state, meta, rope_theta)
    try:
        model.load_state_dict(state, strict=True)
        loaded = True
    except RuntimeError as err:
        loaded = False
        print(err)
    check(loaded, f"{name}: the file loads into the {family} model with load_state_dict(strict=True) "
          f"({len(state)} tensors)")
    if not loaded:
        return
    data, seen = [], set()  # the embedding's and the loss's prt_data calls of each micro-batch: one record each
    for rec in prt_dump.read_data(os.path.join(dump, "data.rank0.bin")):
        if rec[1] not in seen:
            seen.add(rec[1])
            data.append(rec)
    logits = prt_dump.read_logits(os.path.join(dump, "logits.rank0.bin"))
    worst = 0.0
    with torch.no_grad():
        for rec, lg in zip(data, logits):
            got = model(torch.from_numpy(rec[2].astype(np.int64))).reshape(lg["N"], -1).numpy()
            want = lg["logits"].astype(np.float64)
            worst = max(worst, float(np.linalg.norm(got - want) / np.linalg.norm(want)))
    check(len(logits) == len(data) and len(logits) >= 1 and worst < LOGIT_TOL,
          f"{name}: logits of the {len(logits)} micro-batches of step 6 equal parc's (worst {worst:.2e}, tolerance "
          f"{LOGIT_TOL})")
    if name == "tiny_single":
        p = os.path.join(d, "parc.safetensors")
        e = subprocess.run([parc, "export", ck, "-o", p, "--names", "parc"], capture_output=True, text=True)
        names = set(read_safetensors(p)[0]) if e.returncode == 0 else set()
        check("h.0.attn.qkv.w" in names and "wte" in names, f"{name}: --names parc keeps parc's names")
        e = subprocess.run([parc, "export", ck, "-o", p, "--names", "gpt"], capture_output=True, text=True)
        check(e.returncode == 2 and "--names takes hf or parc, not `gpt`" in e.stderr,
              f"export: a bad --names is a usage error ({e.returncode}: {e.stderr.strip()[:80]})")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    parc, examples = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="parc_export_hf_")
    test_plan(parc, examples, work, "tiny_single", "gpt2", "transformer.h.0.attn.c_attn.weight")
    test_plan(parc, examples, work, "tiny_llama", "llama", "model.layers.0.self_attn.q_proj.weight")
    test_plan(parc, examples, work, "tiny_gqa", "llama", "model.layers.0.self_attn.k_proj.weight")
    test_plan(parc, examples, work, "tiny_rope", "llama", "model.layers.0.self_attn.k_proj.weight")
    if failures:
        print(f"test_export_hf: {len(failures)} failures (work in {work})")
        return 1
    shutil.rmtree(work)
    print("test_export_hf: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
