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


def moe_route(logits, topk, sigmoid):
    """The top-k experts of each row (the lower expert first among equal logits: a stable sort) and
    their weights: softmax over the chosen logits (Mixtral), or the chosen sigmoids over their sum
    (DeepSeek-V3); and the router probabilities the load-balancing loss averages."""
    index = torch.sort(-logits, dim=1, stable=True).indices[:, :topk]
    chosen = logits.gather(1, index)
    if sigmoid:
        s = torch.sigmoid(chosen)
        weight = s / s.sum(1, keepdim=True)
        gate = torch.sigmoid(logits)
        probs = gate / gate.sum(1, keepdim=True)
    else:
        weight = torch.softmax(chosen, dim=1)
        probs = torch.softmax(logits, dim=1)
    return index, weight, probs


def moe_losses(logits, index, probs, E, aux_coef, z_coef):
    T, topk = index.shape
    counts = torch.bincount(index.flatten(), minlength=E)
    f = counts.double() / (T * topk)  # the fraction of assignments, no gradient
    aux = aux_coef * E * (f * probs.mean(0)).sum()
    z = z_coef * (torch.logsumexp(logits, dim=1) ** 2).mean()
    return counts, aux, z


def check_moe(t, prefix, check, check_exact, leaf):
    sigmoid, topk, swiglu, E = (int(v) for v in t[prefix + "_cfg"].tolist())
    aux_coef, z_coef, aux_l, z_l = 0.01, 0.001, 0.7, 0.3  # ops_dump's moe_layer
    x, wr, w13, w2 = leaf(prefix + "_x"), leaf(prefix + "_wr"), leaf(prefix + "_w13"), leaf(prefix + "_w2")
    T, H = x.shape
    ffn = w2.shape[1]
    logits = x @ wr
    logits.retain_grad()
    index, weight, probs = moe_route(logits, topk, sigmoid)
    weight.retain_grad()
    counts, aux, z = moe_losses(logits, index, probs, E, aux_coef, z_coef)
    # the dispatch order: by expert, then token
    flat = index.flatten().tolist()
    order = sorted(range(len(flat)), key=lambda a: (flat[a], a))
    rows = torch.empty(len(flat), dtype=torch.long)
    rows[torch.tensor(order)] = torch.arange(len(flat))
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)])
    out = []
    for tok in range(T):
        acc = 0
        for j in range(topk):
            e = index[tok, j]
            h = x[tok] @ w13[e]
            act = F.silu(h[:ffn]) * h[ffn:] if swiglu else F.gelu(h, approximate="tanh")
            acc = acc + weight[tok, j] * (act @ w2[e])
        out.append(acc)
    out = torch.stack(out)
    ((out * t[prefix + "_dout"]).sum() + aux + z).backward()
    check_exact(prefix + "_index", index); check_exact(prefix + "_counts", counts)
    check_exact(prefix + "_rows", rows.reshape(T, topk)); check_exact(prefix + "_offsets", offsets)
    check(prefix + "_logits", logits); check(prefix + "_weight", weight)
    check(prefix + "_losses", torch.stack([aux, z]))
    check(prefix + "_xp", x[torch.tensor(order) // topk])  # sorted position p holds assignment order[p]
    check(prefix + "_out", out); check(prefix + "_dweight", weight.grad)
    check(prefix + "_dw2", w2.grad); check(prefix + "_dw13", w13.grad)
    check(prefix + "_dx", x.grad); check(prefix + "_dwr", wr.grad); check(prefix + "_dlogits", logits.grad)
    # the losses' gradients alone
    x, wr = leaf(prefix + "_x"), leaf(prefix + "_wr")
    logits = x @ wr
    logits.retain_grad()
    index, _, probs = moe_route(logits, topk, sigmoid)
    _, aux, z = moe_losses(logits, index, probs, E, aux_l, z_l)
    (aux + z).backward()
    check(prefix + "_losses_l", torch.stack([aux, z])); check(prefix + "_dlogits_l", logits.grad)
    check(prefix + "_dx_l", x.grad); check(prefix + "_dwr_l", wr.grad)


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

    def check_exact(name, ref):
        nonlocal failures
        got = t[name]
        ok = got.shape == ref.shape and bool((got == ref).all())
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:12s} exact")

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

    # mixture of experts (ops_dump's moe_layer): routing recomputed from the float64 logits, the layer
    # per (token, choice) through its expert, the losses of Switch Transformer (aux) and ST-MoE (z)
    for prefix in ("moe_a", "moe_b", "moe_c", "moe_d"):
        check_moe(t, prefix, check, check_exact, leaf)

    print(f"test_ops_torch: {'FAIL' if failures else 'ok'} ({failures} mismatches, torch {torch.__version__})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
