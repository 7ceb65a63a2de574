#!/usr/bin/python3
"""test_ops_torch.py — the CPU runtime's ops against PyTorch.

usage: test_ops_torch.py OPS_DUMP_BINARY [WORKDIR]
Runs ops_dump (every op, forward and backward, on deterministic inputs), recomputes
each output with torch in float64 from the same float32 inputs, and requires the
relative error ||a - b|| / ||b|| < 1e-5 for every tensor.  Exit status: 0 all ok,
1 any mismatch or failure, 77 when torch is not installed (ctest SKIP_RETURN_CODE).
"""
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP: torch not installed")
    sys.exit(77)

TOL = 1e-5


def load(directory):
    tensors = {}
    with open(os.path.join(directory, "manifest.txt")) as manifest:
        for line in manifest:
            name, kind, *dims = line.split()
            with open(os.path.join(directory, name + ".bin"), "rb") as f:
                data = bytearray(f.read())
            dtype = torch.float32 if kind == "f32" else torch.int32
            t = torch.frombuffer(data, dtype=dtype).reshape([int(d) for d in dims])
            tensors[name] = t.double() if kind == "f32" else t.long()
    return tensors


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    workdir = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="parc_ops_")
    os.makedirs(workdir, exist_ok=True)
    subprocess.run([sys.argv[1], workdir], check=True)
    t = load(workdir)
    failures = 0

    def check(name, ref):
        nonlocal failures
        got = t[name]
        ref = ref.detach().double().reshape(got.shape)
        err = (got - ref).norm().item() / max(ref.norm().item(), 1e-30)
        ok = err < TOL
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:12s} rel err {err:.2e}")

    def leaf(name):
        return t[name].clone().requires_grad_(True)

    # layernorm
    x, w, b = leaf("ln_in"), leaf("ln_w"), leaf("ln_b")
    y = F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)
    y.backward(t["ln_dout"])
    check("ln_out", y); check("ln_din", x.grad); check("ln_dw", w.grad); check("ln_db", b.grad)

    # rmsnorm (written out: torch's rms_norm is recent)
    x, w = leaf("rms_in"), leaf("rms_w")
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w  # ops_dump's eps
    y.backward(t["rms_dout"])
    check("rms_out", y); check("rms_din", x.grad); check("rms_dw", w.grad)

    # gelu (tanh approximation), relu
    x = leaf("act_in")
    y = F.gelu(x, approximate="tanh")
    y.backward(t["act_dout"])
    check("gelu_out", y); check("gelu_din", x.grad)
    x = leaf("act_in")
    y = F.relu(x)
    y.backward(t["act_dout"])
    check("relu_out", y); check("relu_din", x.grad)

    # swiglu: in[N, 2, F], gate = [:, 0], up = [:, 1]
    x = leaf("sw_in")
    y = F.silu(x[:, 0, :]) * x[:, 1, :]
    y.backward(t["sw_dout"])
    check("sw_out", y); check("sw_din", x.grad)

    # matmul + bias: w is [K, M]
    x, w, b = leaf("mm_in"), leaf("mm_w"), leaf("mm_b")
    y = x @ w + b
    y.backward(t["mm_dout"])
    check("mm_out", y); check("mm_din", x.grad); check("mm_dw", w.grad); check("mm_db", b.grad)
    check("mmb_out", y); check("mmb_din", x.grad); check("mmb_dw", w.grad); check("mmb_db", b.grad)
    x, w = leaf("mm_in"), leaf("mmt_w")  # tied head: w is [M, K]
    y = F.linear(x, w)
    y.backward(t["mm_dout"])
    check("mmt_out", y); check("mmt_din", x.grad); check("mmt_dw", w.grad)

    # attention: qkv[B, T, 3, NH, HD] -> out[B, T, NH, HD]
    # (attl: more query rows than one of the CPU kernel's blocks; attk: key-blocked, three blocks of keys)
    for prefix, src, causal in (("att", "att", True), ("attnc", "att", False), ("attl", "attl", True),
                                ("attlnc", "attl", False), ("attk", "attk", True), ("attknc", "attk", False)):
        qkv = leaf(src + "_qkv")
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # [B, NH, T, HD]
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # manual: torch 1.x has no SDPA
        if causal:
            T = scores.shape[-1]
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2)
        y.backward(t[src + "_dout"])
        check(prefix + "_out", y); check(prefix + "_dqkv", qkv.grad)

    # grouped-query attention: qkv[B, T, KV, G + 2, HD] (per key/value head its G queries, then k, then v)
    # against k and v repeated per query head (repeat_interleave: its backward sums a group's gradients)
    for prefix, causal in (("attg", True), ("attgk", True), ("attgnc", False)):
        qkv = leaf("attg_qkv")
        B, T, KV, U, HD = qkv.shape
        G = U - 2
        q = qkv[:, :, :, :G].reshape(B, T, KV * G, HD).transpose(1, 2)  # [B, NH, T, HD]
        k, v = (qkv[:, :, :, G + i].repeat_interleave(G, dim=2).transpose(1, 2) for i in range(2))
        scores = q @ k.transpose(-1, -2) / HD ** 0.5
        if causal:
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2)
        y.backward(t["attg_dout"])
        check(prefix + "_out", y); check(prefix + "_dqkv", qkv.grad)

    # rotary positions, as Hugging Face transformers computes them (modeling_rope_utils.py and
    # modeling_llama.py): inv_freq in fp32, Llama 3.1's scaling of it in fp32, the angles position x
    # inv_freq in fp32, cos and sin of cat(freqs, freqs) (here in float64), x cos + rotate_half(x) sin
    def inv_freq(theta, dim, scaling=None):
        inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        if scaling is None:
            return inv
        factor, low, high, original = scaling
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > original / low, inv / factor, inv)
        smooth = (original / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < original / high) * ~(wavelen > original / low)
        return torch.where(medium, smoothed, scaled)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def rope(x, positions, inv):  # x[B, T, heads, HD]
        freqs = positions.float()[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1).double()
        cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
        return x * cos + rotate_half(x) * sin

    x = leaf("rope_in")  # [B, T, 3, NH, HD]: q and k rotated, positions from 3
    positions = torch.arange(3, 3 + x.shape[1])
    inv = inv_freq(10000.0, x.shape[-1])
    y = torch.stack([rope(x[:, :, 0], positions, inv), rope(x[:, :, 1], positions, inv), x[:, :, 2]], dim=2)
    y.backward(t["rope_dout"])
    check("rope_out", y); check("rope_din", x.grad)
    x = leaf("ropeg_in")  # [B, T, KV, Q + 2, HD]: the Q queries and k rotated
    Q = x.shape[3] - 2
    inv = inv_freq(100.0, x.shape[-1], (8.0, 1.0, 4.0, 32))
    rotated = rope(x[:, :, :, : Q + 1].flatten(2, 3), torch.arange(x.shape[1]), inv).reshape(x[:, :, :, : Q + 1].shape)
    y = torch.cat([rotated, x[:, :, :, Q + 1:]], dim=3)
    y.backward(t["ropeg_dout"])
    check("ropeg_out", y); check("ropeg_din", x.grad)

    # cross-entropy: loss_sum and the gradient of the mean
    logits = leaf("xe_logits")
    loss = F.cross_entropy(logits, t["xe_targets"], reduction="sum")
    (loss / logits.shape[0]).backward()
    check("xe_loss", loss); check("xe_dlogits", logits.grad)

    # embedding
    wte = leaf("emb_wte")
    y = F.embedding(t["emb_tok"], wte)
    y.backward(t["emb_dout"])
    check("emb_out", y); check("emb_dwte", wte.grad)

    # AdamW and SGD, three steps with the same hyper-parameters as ops_dump
    p = t["opt_p0"].clone().requires_grad_(True)
    opt = torch.optim.AdamW([p], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for s in range(3):
        p.grad = t["opt_g"][s].clone()
        opt.step()
    check("adamw_p", p)
    p = t["opt_p0"].clone().requires_grad_(True)
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)
    for s in range(3):
        p.grad = t["opt_g"][s].clone()
        opt.step()
    check("sgd_p", p)

    print(f"test_ops_torch: {'FAIL' if failures else 'ok'} ({failures} mismatches, torch {torch.__version__})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
