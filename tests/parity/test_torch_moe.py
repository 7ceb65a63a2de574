#!/usr/bin/python3
"""test_torch_moe.py — the single-rank run of the tiny mixture-of-experts plans
against the same models written in PyTorch (float64).

usage: test_torch_moe.py PARC EXAMPLES_DIR [--keep DIR]

tiny_moe (a Llama block with grouped-query attention and rotary positions
whose MLP is 4 SwiGLU experts of 96, top 2, softmax router, aux_loss 0.01),
tiny_moe_gelu (a GPT-2 block whose MLP is 3 GELU experts of 48, top 2, sigmoid
router, aux_loss 0.05, z_loss 0.001), tiny_moe_shared (tiny_moe's block with
4 SwiGLU experts of 48 and 2 shared experts: one SwiGLU MLP of 96 every token
goes through) and tiny_moe_shared_gelu (a GPT-2 block with 3 GELU experts of
48, top 2, sigmoid router, and a shared GELU expert of 80), and tiny_moe_every
(tiny_moe's mixture in layers 1 and 3 of 4, `every 2`, layers 0 and 2 a dense
SwiGLU MLP of ffn 172: the reference makes layer l a mixture iff (l + 1) % 2 == 0
and fails where a layer's parameters say otherwise).  The reference,
per layer over the N
tokens of a micro-batch: logits = h @ mlp.router.w [hidden, E]; each token's
top K logits, the lower expert first among equal ones (a stable descending
sort); the gate a softmax over the chosen logits (sigmoid router: the chosen
sigmoids over their sum); each chosen expert's MLP (mlp.experts.up.w [E, hidden,
(2,) F], the block's activation, mlp.experts.down.w [E, F, hidden]); the
outputs summed with the gate's weights; with shared experts, plus the dense
MLP mlp.shared.up.w [hidden, (2,) shared_ffn], the activation,
mlp.shared.down.w [shared_ffn, hidden] of every token (no gate, no biases).
The router's losses, with their
coefficients: aux = E sum_e f_e P_e (f_e the share of the N K choices expert e
got, no gradient; P_e the mean over tokens of the softmax over all E logits,
or of the sigmoids over their sum), z = mean_t logsumexp(logits_t)^2; the
step's loss is the mean cross-entropy over its tokens plus the mean over its
micro-batches of the layers' summed router losses.  Everything else, and the
assertions (logits and gradients of step 1 at 1e-5, its loss at 1e-5, the
loss of 10 AdamW steps at 1e-4), is test_torch_model.py's.  A token whose K-th
and (K+1)-th logits lie within 1e-6 could route differently in fp32: the
smallest such gap over the run is printed and must exceed that.
Exits 1 on any failure, 77 (skip) without torch.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prt_dump  # noqa: E402
import test_torch_model as ttm  # noqa: E402  (exits 77 without torch)

import torch  # noqa: E402

PLANS = ["tiny_moe", "tiny_moe_gelu", "tiny_moe_shared", "tiny_moe_shared_gelu", "tiny_moe_every"]
ROUTE_MARGIN = 1e-6


def moe_settings(parc, plan):
    """The `moe ...` line of `parc lower --emit=front` as {option: value}."""
    out = subprocess.run([parc, "lower", plan, "--emit=front"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        words = line.split()
        if words and words[0] == "moe":
            return dict(zip(words[1::2], words[2::2]))
    raise ValueError(f"{plan} has no mixture of experts")


class MoeModel(ttm.Model):
    settings_moe = None  # set per plan before construction

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        s = self.settings_moe
        self.experts, self.topk = int(s["experts"]), int(s["top"])
        self.sigmoid = s["router"] == "sigmoid"
        self.aux_coef, self.z_coef = float(s["aux_loss"]), float(s["z_loss"])
        self.shared_ffn = int(s.get("shared_ffn", 0))
        self.every = int(s.get("every", 1))
        self.min_margin = float("inf")

    def mlp(self, h, l):
        # `every N` (Switch, Qwen2-MoE's decoder_sparse_step): layer l is a
        # mixture iff (l + 1) % N == 0, the others the block's dense MLP
        if (l + 1) % self.every != 0:
            if ("mlp.router.w", l) in self.p:
                raise ValueError(f"layer {l} has a router, and with every {self.every} it is dense")
            return super().mlp(h, l)
        B, T, H = h.shape
        x = h.reshape(-1, H)
        N, E, K = x.shape[0], self.experts, self.topk
        logits = x @ self.p[("mlp.router.w", l)]
        ranked = torch.sort(logits.detach(), dim=1, descending=True, stable=True)
        order = ranked.indices[:, :K]
        if K < E:
            self.min_margin = min(self.min_margin, float((ranked.values[:, K - 1] - ranked.values[:, K]).min()))
        chosen = logits.gather(1, order)
        if self.sigmoid:
            s = torch.sigmoid(chosen)
            gate = s / s.sum(1, keepdim=True)
        else:
            gate = torch.softmax(chosen, dim=1)
        up = self.p[("mlp.experts.up.w", l)].reshape(E, H, -1)
        down = self.p[("mlp.experts.down.w", l)]
        out = torch.zeros(N, H, dtype=torch.float64)
        for e in range(E):
            tok, j = (order == e).nonzero(as_tuple=True)
            if tok.numel():
                y = self.activation(x[tok] @ up[e]) @ down[e]
                out = out.index_add(0, tok, gate[tok, j].unsqueeze(1) * y)
        f = torch.nn.functional.one_hot(order, E).sum((0, 1)).double() / (N * K)
        if self.sigmoid:
            s_all = torch.sigmoid(logits)
            P = (s_all / s_all.sum(1, keepdim=True)).mean(0)
        else:
            P = torch.softmax(logits, dim=1).mean(0)
        aux = self.aux_coef * E * (f * P).sum()
        z = self.z_coef * (torch.logsumexp(logits, dim=1) ** 2).mean()
        self.router_loss = self.router_loss + aux + z
        out = out.reshape(B, T, H)
        if self.shared_ffn:
            up = self.p[("mlp.shared.up.w", l)]
            if up.shape[-1] != self.shared_ffn:
                raise ValueError(f"mlp.shared.up.w {tuple(up.shape)}: expected {self.shared_ffn} hidden units")
            out = out + self.linear(self.activation(self.linear(h, "mlp.shared.up", l)), "mlp.shared.down", l)
        return out


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
    import tempfile
    tmp = None if keep else tempfile.TemporaryDirectory(prefix="parc-torch-moe-")
    work = keep or tmp.name
    os.makedirs(work, exist_ok=True)
    failures = 0
    for name in PLANS:
        made = []

        class Model(MoeModel):
            settings_moe = moe_settings(parc, os.path.join(examples, name + ".par"))

            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                made.append(self)

        try:
            problems = ttm.check_plan(parc, examples, name, work, model_class=Model)
        except (RuntimeError, ValueError, OSError, KeyError) as e:
            problems = [f"{type(e).__name__}: {e}"]
        if made:
            m = made[0]
            shared = f", shared experts of {m.shared_ffn} units" if m.shared_ffn else ""
            print(f"  routing           {m.experts} experts, top {m.topk}, {'sigmoid' if m.sigmoid else 'softmax'}"
                  f" router{shared}, smallest gap between a token's K-th and (K+1)-th logit {m.min_margin:.2e}"
                  f"  (must exceed {ROUTE_MARGIN:g})")
            if not m.min_margin > ROUTE_MARGIN:
                problems.append(f"a token's routing is a near-tie ({m.min_margin:.3g}): fp32 may route it otherwise")
        for p in problems:
            prt_dump.fail(f"{name}: {p}")
        failures += bool(problems)
    print(f"{len(PLANS) - failures}/{len(PLANS)} mixture-of-experts plans match PyTorch")
    if tmp:
        tmp.cleanup()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
