#!/usr/bin/env python3
"""torch_gpt.py — the PyTorch peer of bench/plans/gpt_bench_*.par.

The same GPT that parc compiles from those plans, written the plain PyTorch
way; attention as matmuls + masked softmax (all Debian's torch 1.13 has) or,
with --attention sdpa (torch 2.x), F.scaled_dot_product_attention(is_causal),
the fused kernel a current PyTorch user calls:
  token embedding + learned positions; per layer (pre-LN GPT-2 block, biases)
    x = x + proj(attn(qkv(LN1(x))))     qkv: one fused Linear(C, 3C)
    x = x + down(gelu_tanh(up(LN2(x))))
  final LayerNorm; untied head Linear(C, V, bias=False); mean cross-entropy;
  AdamW(lr 1e-3, weight_decay 0) step.
Weights ~ N(0, 0.02), biases 0, LayerNorm 1/0 (the initial values do not matter
for speed).  Batches are random tokens.

  /usr/bin/python3 bench/torch_gpt.py --threads T [--steps N] [--batch B] [--ddp W]
      [--compile] [--attention matmul|sdpa]

--compile wraps the model in torch.compile (torch 2.x; inductor's CPU backend
fuses the element-wise ops into generated C++ kernels): the first step
compiles, so the medians over steps 3..N are steady, and the line
`COMPILE first_step_s=<s>` says what the compilation cost.  The line
`PEER torch=<version> blas=<BLAS_INFO> mkldnn=<0|1> compile=<0|1>
attention=<kind> malloc=<MALLOC_MMAP_THRESHOLD_,MALLOC_TRIM_THRESHOLD_>`
says which GEMM library and allocator setting the run had.

--ops times three of the step's non-GEMM ops alone, fwd + bwd (autograd), on
the same shapes, and prints `OPS gelu=<ms> attention=<ms> xent=<ms>` per step
(gelu and attention x layers): the peer of parc's per-op trace spans.

--threads T sets torch.set_num_threads(T) per process AND, before torch is
imported, OPENBLAS_NUM_THREADS=T / OMP_NUM_THREADS=T: Debian's torch 1.13 is
built with BLAS_INFO=generic and runs its GEMMs in the system OpenBLAS
(openblas-pthread), whose own threads set_num_threads does not govern — without
the variable a "1-thread" torch would run its GEMMs on every core.  parc's
programs link the same OpenBLAS, so both sides then use T threads.  Also
OMP_WAIT_POLICY=PASSIVE unless set: torch's OpenMP workers otherwise spin
between parallel regions and take the cores from OpenBLAS's threads (measured
here: 2 threads 2.9 s/step active vs 0.94 s passive) — the peer gets its best
setting.  And OPENBLAS_THREAD_TIMEOUT=4 unless set, as parc's programs set it
for a threaded rank (runtime/prt_blas.c): both peers' OpenBLAS workers then
sleep alike after a GEMM.  --ddp W runs W
processes (torch.multiprocessing.spawn) with DistributedDataParallel over gloo
on 127.0.0.1, each process a batch of --batch sequences (global batch W x B).
Rank 0 prints `step N | loss L | T tok/s | ms` per step (tokens of the global
batch) and last a line
  RESULT tok_s=<median of steps 3..N> ms=<median step ms> threads=T world=W
"""
import argparse
import math
import os
import statistics
import sys
import time

def _threads_from_argv():
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return "1"


# Before `import torch`: OpenBLAS and OpenMP read these once, when loaded.
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _threads_from_argv()
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # bench_train.sh checks for this line
    print("torch not installed")
    sys.exit(3)


SDPA = False  # --attention sdpa


class Block(nn.Module):
    def __init__(self, C, NH, FF, T):
        super().__init__()
        self.nh = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.up = nn.Linear(C, FF)
        self.down = nn.Linear(FF, C)
        # a plain attribute, not a buffer: DDP broadcasts buffers, and gloo has no bool
        self.mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)

    def attn(self, x):
        B, T, C = x.shape
        hd = C // self.nh
        qkv = self.qkv(x).view(B, T, 3, self.nh, hd)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # [B, NH, T, HD]
        if SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, V, T, C, NH, FF, L):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH, FF, T) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, tokens, targets):
        B, T = tokens.shape
        x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def run(rank, a):
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    if a.ddp > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(a.port)
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=a.ddp)
    torch.manual_seed(1234)
    model = GPT(a.vocab, a.seq, a.hidden, a.heads, a.ffn, a.layers)
    if a.ddp > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    if a.compile:
        model = torch.compile(model)
    g = torch.Generator().manual_seed(1000 + rank)
    tokens_per_step = a.batch * a.seq * max(a.ddp, 1)
    times = []
    for step in range(1, a.steps + 1):
        tok = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
        tgt = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(tok, tgt)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if a.ddp > 1:  # the step ends when the slowest rank ends: report the max
            import torch.distributed as dist
            t = torch.tensor([dt], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            dt = t.item()
        times.append(dt)
        if rank == 0 and step == 1 and a.compile:
            print(f"COMPILE first_step_s={dt:.2f}", flush=True)
        if rank == 0:
            print(f"step {step} | loss {loss.item():.6f} | {tokens_per_step / dt:.0f} tok/s | {dt * 1e3:.1f} ms",
                  flush=True)
    if rank == 0:
        tail = times[2:] if len(times) > 2 else times
        med = statistics.median(tail)
        print(f"RESULT tok_s={tokens_per_step / med:.1f} ms={med * 1e3:.1f} threads={torch.get_num_threads()} "
              f"world={max(a.ddp, 1)}", flush=True)
    if a.ddp > 1:
        import torch.distributed as dist
        dist.destroy_process_group()


def ops(a):
    torch.set_num_threads(a.threads)

    def ms(f, n=8):
        f()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t0) / n * 1e3

    N, hd = a.batch * a.seq, a.hidden // a.heads
    x = torch.randn(N * a.ffn, requires_grad=True)
    gx = torch.randn_like(x)
    gelu = ms(lambda: torch.autograd.grad(F.gelu(x, approximate="tanh"), x, gx)) * a.layers
    q, k, v = (torch.randn(a.batch, a.heads, a.seq, hd, requires_grad=True) for _ in range(3))
    mask = torch.triu(torch.ones(a.seq, a.seq, dtype=torch.bool), diagonal=1)

    def att():
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        return F.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v

    go = torch.randn_like(att())
    attention = ms(lambda: torch.autograd.grad(att(), (q, k, v), go)) * a.layers
    logits = torch.randn(N, a.vocab, requires_grad=True)
    tgt = torch.randint(0, a.vocab, (N,))
    xent = ms(lambda: torch.autograd.grad(F.cross_entropy(logits, tgt), logits))
    print(f"OPS gelu={gelu:.1f} attention={attention:.1f} xent={xent:.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=8, help="sequences per process per step")
    p.add_argument("--ddp", type=int, default=0, help="processes of DistributedDataParallel (gloo)")
    p.add_argument("--port", type=int, default=29531)
    p.add_argument("--ops", action="store_true", help="time gelu, attention, cross-entropy alone")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--compile", action="store_true", help="torch.compile the model (torch 2.x)")
    p.add_argument("--attention", choices=("matmul", "sdpa"), default="matmul")
    a = p.parse_args()
    global SDPA
    SDPA = a.attention == "sdpa"
    if (a.compile or SDPA) and int(torch.__version__.split(".")[0]) < 2:
        print(f"torch {torch.__version__} has no torch.compile or scaled_dot_product_attention (torch 2.x)")
        sys.exit(3)
    cfg = torch.__config__.show()
    blas = next((w.split("=", 1)[1].rstrip(",") for w in cfg.replace(",", " ").split() if w.startswith("BLAS_INFO=")),
                "unknown")
    print(f"PEER torch={torch.__version__} blas={blas} mkldnn={int(torch.backends.mkldnn.is_available())} "
          f"compile={int(a.compile)} attention={a.attention} "
          f"malloc={os.environ.get('MALLOC_MMAP_THRESHOLD_', '-')},{os.environ.get('MALLOC_TRIM_THRESHOLD_', '-')}",
          flush=True)
    if a.steps == 0:  # --steps 0: the PEER line alone
        return
    if a.ops:
        ops(a)
    elif a.ddp > 1:
        import torch.multiprocessing as mp
        mp.spawn(run, args=(a,), nprocs=a.ddp, join=True)
    else:
        run(0, a)


if __name__ == "__main__":
    main()
