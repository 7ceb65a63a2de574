/*
 * test_gpu_ops.c — every op of the CUDA backend against the CPU path (habit 10).
 *
 * One rank, mesh {x: 1}.  The runtime runs on the CPU (--device cpu); its CUDA
 * state is set up beside it (prt_cuda_init), so both backends run the same op on
 * the same inputs: the CPU op through the public API on registered host buffers
 * (one pool per dtype; each call's dtypes word gives its tensors' dtypes), the GPU op
 * through its prt_cu_* entry point on device copies.  Per op, dtype and output:
 *   relative error ||gpu - cpu|| / ||cpu|| <= tol (f32 1e-4; bf16 1e-2, about 2.5
 *   bf16 ulps: both sides round nearly equal fp32 values; f16 2e-3);
 *   forward outputs start as NaN on the device: any NaN left is an unwritten output.
 * Backward outputs start as the same random values on both sides (they accumulate).
 * The mixture-of-experts ops likewise (moe_ops), and ring attention's steps (ring_ops).  Then the collectives of the active PRT_COLLECTIVES path on axis x (size 1: with
 * PRT_COLLECTIVES=nccl that is a one-rank NCCL communicator, the real code path).
 * Exit status 0 when every check passes.  Prints one line per check.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/prt_cuda_api.h"

#define POOL (1 << 23) /* elements per dtype pool */

static prt *rt;
static char *pool[3];      /* host pools: f32, bf16, f16 */
static int64_t used[3];
static int32_t *ipool;     /* host i32 pool */
static int failures, checks;

typedef struct {           /* one tensor on both sides */
    void *h;               /* host, in a registered pool */
    void *d;               /* device copy */
    int64_t dt, n;
} ten;

static uint64_t rng = 12345;
static float frand(void) {
    uint64_t x = (rng += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A tensor of n elements of dtype dt: random in [lo, hi) (or NaN on the device when nan_dev). */
static ten mk(int64_t dt, int64_t n, float lo, float hi, int nan_dev) {
    ten t = {NULL, NULL, dt, n};
    size_t es = prt_dtype_size(dt);
    if (used[dt] + n + 32 > POOL) { fprintf(stderr, "pool exhausted\n"); exit(1); }
    t.h = pool[dt] + used[dt] * es;
    used[dt] += (n + 31) / 32 * 32;
    for (int64_t i = 0; i < n; i++) prt_store(t.h, dt, i, lo + (hi - lo) * 0.5f * (frand() + 1.0f));
    t.d = prt_cuda_alloc_zero(rt, (size_t)n * es, "test");
    if (nan_dev) prt_cuda_memset(rt, t.d, 0xff, (size_t)n * es);
    else prt_cuda_h2d(rt, t.d, t.h, (size_t)n * es);
    return t;
}
static prt_ten D(ten t) { return (prt_ten){t.d, t.dt}; }
static prt_ten NONE = {NULL, PRT_F32};

static double tol_of(int64_t dt) { return dt == PRT_F32 ? 1e-4 : dt == PRT_BF16 ? 1e-2 : 2e-3; }

/* Compares the device copy of t with its host value. */
static void check(const char *op, const char *what, ten t, double tol) {
    size_t es = prt_dtype_size(t.dt);
    void *g = malloc((size_t)t.n * es);
    prt_cuda_d2h(rt, g, t.d, (size_t)t.n * es);
    double num = 0, den = 0;
    int64_t nans = 0;
    for (int64_t i = 0; i < t.n; i++) {
        float a = prt_load(g, t.dt, i), b = prt_load(t.h, t.dt, i);
        if (isnan(a) && !isnan(b)) nans++;
        num += ((double)a - b) * ((double)a - b);
        den += (double)b * b;
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    int ok = nans == 0 && rel <= tol && !isnan(rel);
    checks++;
    if (!ok) failures++;
    printf("%-22s %-6s %-8s rel %.2e (tol %.0e) nan %lld  %s\n", op, prt_dtype_names[t.dt], what, rel, tol,
           (long long)nans, ok ? "ok" : "FAIL");
    free(g);
}

static ten mki(int64_t n, int64_t lo, int64_t hi) {  /* i32 tokens in [lo, hi) */
    static int64_t iused;
    ten t = {ipool + iused, NULL, PRT_I32, n};
    iused += n;
    for (int64_t i = 0; i < n; i++) ((int32_t *)t.h)[i] = (int32_t)(lo + (int64_t)((frand() + 1.0f) * 0.5f * (hi - lo)) % (hi - lo));
    t.d = prt_cuda_alloc_zero(rt, (size_t)n * 4, "test");
    prt_cuda_h2d(rt, t.d, t.h, (size_t)n * 4);
    return t;
}

/* Compares an i32 tensor's device copy with its host value exactly (n of its elements). */
static void check_i32(const char *op, const char *what, ten t, int64_t n) {
    int32_t *g = malloc((size_t)n * 4);
    prt_cuda_d2h(rt, g, t.d, (size_t)n * 4);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += g[i] != ((int32_t *)t.h)[i];
    checks++;
    if (bad) failures++;
    printf("%-22s %-6s %-8s %lld of %lld differ  %s\n", op, "i32", what, (long long)bad, (long long)n,
           bad ? "FAIL" : "ok");
    free(g);
}
static void upload(ten t) { prt_cuda_h2d(rt, t.d, t.h, (size_t)t.n * prt_dtype_size(t.dt)); }

/* The mixture-of-experts ops: the router (softmax and sigmoid gates, both
 * losses) of T tokens over E experts, top 2; the dispatch, the grouped GEMM
 * (expert 4 gets no token: its index is never drawn), the combine, forward and
 * backward; the router's losses from given counts (moe_router_loss, a
 * context axis's); expert parallelism's rank rows and regroup over 3 ranks of 2
 * experts.  Each op's inputs are the CPU's outputs of the op before, uploaded,
 * so a choice the two sides round differently cannot cascade. */
static void moe_ops(int64_t dt) {
    double tol = tol_of(dt);
    const int64_t T = 40, H = 32, E = 5, K = 2, F = 24;
    for (int sig = 0; sig < 2; sig++) {
        const char *r = sig ? "moe_router(sigmoid)" : "moe_router";
        ten x = mk(dt, T * H, -1, 1, 0), wr = mk(dt, H * E, -1, 1, 0), logits = mk(dt, T * E, 0, 0, 1),
            index = mki(T * K, 0, 1), weight = mk(dt, T * K, 0, 0, 1), counts = mki(E, 0, 1),
            losses = mk(PRT_F32, 2, 0, 0, 1), dx = mk(dt, T * H, -1, 1, 0), dwr = mk(dt, H * E, -1, 1, 0),
            dlogits = mk(dt, T * E, 0, 0, 1), dweight = mk(dt, T * K, -1, 1, 0);
        prt_moe_router_fwd(rt, logits.h, index.h, weight.h, counts.h, losses.h, x.h, wr.h, T, H, E, K, sig, 0.05, 0.01,
                           PRT_ARG_DTYPES(logits.dt, PRT_I32, weight.dt, PRT_I32, PRT_F32, x.dt, wr.dt));
        prt_cu_moe_router_fwd(rt, D(logits), index.d, D(weight), counts.d, D(losses), D(x), D(wr), T, H, E, K, sig,
                              0.05, 0.01);
        check(r, "logits", logits, tol); check_i32(r, "index", index, T * K); check(r, "weight", weight, tol);
        check_i32(r, "counts", counts, E); check(r, "losses", losses, 1e-4);
        upload(logits), upload(index), upload(counts);
        /* the losses again from given counts (a context axis's sums): here twice
         * the router's, with other coefficients */
        ten twice = mki(E, 0, 1), again = mk(PRT_F32, 2, 0, 0, 1);
        for (int64_t e = 0; e < E; e++) ((int32_t *)twice.h)[e] = 2 * ((int32_t *)counts.h)[e];
        upload(twice);
        prt_moe_router_loss(rt, again.h, logits.h, index.h, twice.h, T, E, K, sig, 0.0125, 0.005,
                            PRT_ARG_DTYPES(PRT_F32, logits.dt, PRT_I32, PRT_I32));
        prt_cu_moe_router_loss(rt, D(again), D(logits), twice.d, T, E, K, sig, 0.0125, 0.005);
        check(sig ? "moe_router_loss(sigmoid)" : "moe_router_loss", "losses", again, 1e-4);
        prt_moe_router_bwd(rt, dx.h, dwr.h, dlogits.h, dweight.h, logits.h, index.h, counts.h, x.h, wr.h, T, H, E, K,
                           sig, 0.05, 0.01,
                           PRT_ARG_DTYPES(dx.dt, dwr.dt, dlogits.dt, dweight.dt, logits.dt, PRT_I32, PRT_I32, x.dt,
                                          wr.dt));
        prt_cu_moe_router_bwd(rt, D(dx), D(dwr), D(dlogits), D(dweight), D(logits), index.d, counts.d, D(x), D(wr), T,
                              H, E, K, sig, 0.05, 0.01, 0);
        check(r, "dlogits", dlogits, tol); check(r, "dx", dx, tol); check(r, "dwr", dwr, tol);
    }
    /* dispatch, experts, combine over choices of experts 0..3 (expert 4 gets none) */
    ten h = mk(dt, T * H, -1, 1, 0), index = mki(T * K, 0, 1), xp = mk(dt, T * K * H, 0, 0, 1),
        offsets = mki(E + 1, 0, 1), rows = mki(T * K, 0, 1);
    for (int64_t t = 0; t < T; t++) {
        ((int32_t *)index.h)[t * K] = (int32_t)(t % 4);
        ((int32_t *)index.h)[t * K + 1] = (int32_t)((t / 4 + t % 4 + 1) % 4);
    }
    upload(index);
    prt_moe_permute_fwd(rt, xp.h, offsets.h, rows.h, h.h, index.h, T, H, E, K,
                        PRT_ARG_DTYPES(xp.dt, PRT_I32, PRT_I32, h.dt, PRT_I32));
    prt_cu_moe_permute_fwd(rt, D(xp), offsets.d, rows.d, D(h), index.d, T, H, E, K);
    check("moe_permute_fwd", "out", xp, tol); check_i32("moe_permute_fwd", "offsets", offsets, E + 1);
    check_i32("moe_permute_fwd", "rows", rows, T * K);
    ten w_up = mk(dt, E * H * F, -1, 1, 0), up = mk(dt, T * K * F, 0, 0, 1), dxp = mk(dt, T * K * H, -1, 1, 0),
        dwu = mk(dt, E * H * F, -1, 1, 0), dup = mk(dt, T * K * F, -1, 1, 0);
    prt_moe_matmul_fwd(rt, up.h, xp.h, w_up.h, offsets.h, E, H, F, PRT_ARG_DTYPES(up.dt, xp.dt, w_up.dt, PRT_I32));
    prt_cu_moe_matmul_fwd(rt, D(up), D(xp), D(w_up), offsets.d, E, H, F);
    check("moe_matmul_fwd", "out", up, tol);
    prt_moe_matmul_bwd(rt, dxp.h, dwu.h, dup.h, xp.h, w_up.h, offsets.h, E, H, F,
                       PRT_ARG_DTYPES(dxp.dt, dwu.dt, dup.dt, xp.dt, w_up.dt, PRT_I32));
    prt_cu_moe_matmul_bwd(rt, D(dxp), D(dwu), D(dup), D(xp), D(w_up), offsets.d, E, H, F);
    check("moe_matmul_bwd", "din", dxp, tol); check("moe_matmul_bwd", "dw", dwu, tol);
    ten y = mk(dt, T * K * H, -1, 1, 0), gate = mk(dt, T * K, 0, 1, 0), out = mk(dt, T * H, 0, 0, 1),
        dout = mk(dt, T * H, -1, 1, 0), dy = mk(dt, T * K * H, -1, 1, 0), dgate = mk(dt, T * K, -1, 1, 0),
        dh = mk(dt, T * H, -1, 1, 0);
    prt_moe_combine_fwd(rt, out.h, y.h, gate.h, rows.h, T, H, K, PRT_ARG_DTYPES(out.dt, y.dt, gate.dt, PRT_I32));
    prt_cu_moe_combine_fwd(rt, D(out), D(y), D(gate), rows.d, T, H, K);
    check("moe_combine_fwd", "out", out, tol);
    prt_moe_combine_bwd(rt, dy.h, dgate.h, dout.h, y.h, gate.h, rows.h, T, H, K,
                        PRT_ARG_DTYPES(dy.dt, dgate.dt, dout.dt, y.dt, gate.dt, PRT_I32));
    prt_cu_moe_combine_bwd(rt, D(dy), D(dgate), D(dout), D(y), D(gate), rows.d, T, H, K, 0, 0);
    check("moe_combine_bwd", "dy", dy, tol); check("moe_combine_bwd", "dweight", dgate, tol);
    prt_moe_permute_bwd(rt, dh.h, dy.h, rows.h, T, H, K, PRT_ARG_DTYPES(dh.dt, dy.dt, PRT_I32));
    prt_cu_moe_permute_bwd(rt, D(dh), D(dy), rows.d, T, H, K, 0);
    check("moe_permute_bwd", "din", dh, tol);
    /* expert parallelism: S = 3 ranks of El = 2 experts; what this rank received, block (s, e) of cnt[s, e] rows */
    {
        const int64_t S = 3, El = 2, Et = S * El;
        ten ecounts = mki(Et, 0, 1), send = mki(S, 0, 1), cnt = mki(S * El, 0, 1), roff = mki(El + 1, 0, 1);
        static const int32_t per_expert[6] = {3, 0, 5, 2, 4, 1}, received[6] = {2, 0, 3, 4, 0, 1};
        memcpy(ecounts.h, per_expert, sizeof per_expert);
        memcpy(cnt.h, received, sizeof received);
        upload(ecounts), upload(cnt);
        prt_moe_rank_rows(rt, send.h, ecounts.h, S, Et, PRT_ARG_DTYPES(PRT_I32, PRT_I32));
        prt_cu_moe_rank_rows(rt, send.d, ecounts.d, S, Et);
        check_i32("moe_rank_rows", "send", send, S);
        const int64_t R = 10; /* the received rows: sum of cnt */
        ten in = mk(dt, R * H, -1, 1, 0), grouped = mk(dt, R * H, 0, 0, 1), back = mk(dt, R * H, 0, 0, 1),
            din = mk(dt, R * H, -1, 1, 0);
        prt_moe_regroup_fwd(rt, grouped.h, roff.h, in.h, cnt.h, S, El, H, 1,
                            PRT_ARG_DTYPES(grouped.dt, PRT_I32, in.dt, PRT_I32));
        prt_cu_moe_regroup_fwd(rt, D(grouped), roff.d, D(in), cnt.d, S, El, H, 1);
        check("moe_regroup_fwd", "out", grouped, tol); check_i32("moe_regroup_fwd", "offsets", roff, El + 1);
        prt_moe_regroup_fwd(rt, back.h, NULL, grouped.h, cnt.h, S, El, H, 0,
                            PRT_ARG_DTYPES(back.dt, PRT_I32, grouped.dt, PRT_I32));
        prt_cu_moe_regroup_fwd(rt, D(back), NULL, D(grouped), cnt.d, S, El, H, 0);
        check("moe_regroup_fwd(back)", "out", back, tol);
        prt_moe_regroup_bwd(rt, din.h, grouped.h, cnt.h, S, El, H, 1, PRT_ARG_DTYPES(din.dt, grouped.dt, PRT_I32));
        prt_cu_moe_regroup_bwd(rt, D(din), D(grouped), cnt.d, S, El, H, 1, 0);
        check("moe_regroup_bwd", "din", din, tol);
    }
}

/* Ring attention's steps (ring_kv_pack, ring_attention_fwd / _bwd,
 * ring_kv_grad) at coordinate 1 of a context axis of 3, the split in order
 * and load-balanced: every step of the forward against the CPU, each step's
 * inputs the CPU's outputs of the step before (out and lse merge in place),
 * then every step of the backward likewise. */
static void ring_ops(int64_t dt) {
    double tol = tol_of(dt);
    const int64_t B = 2, T = 12, NH = 4, KV = 2, HD = 16, P = 3, coord = 1, W = (NH + 2 * KV) * HD, C = NH * HD;
    for (int64_t balanced = 0; balanced < 2; balanced++) {
        ten qkv = mk(dt, B * T * W, -1, 1, 0), kv = mk(dt, B * T * 2 * KV * HD, 0, 0, 1),
            out = mk(dt, B * T * C, 0, 0, 1), lse = mk(PRT_F32, B * NH * T, 0, 0, 1),
            dqkv = mk(dt, B * T * W, -1, 1, 0), dkv = mk(dt, B * T * 2 * KV * HD, -1, 1, 0),
            dout = mk(dt, B * T * C, -1, 1, 0);
        char name[64];
        prt_ring_kv_pack(rt, kv.h, qkv.h, B, T, NH, KV, HD, PRT_ARG_DTYPES(kv.dt, qkv.dt));
        prt_cu_ring_kv_move(rt, D(qkv), D(kv), B, T, NH, KV, HD, 1);
        check("ring_kv_pack", "kv", kv, tol);
        for (int64_t step = 0; step < P; step++) {
            for (int64_t i = 0; i < kv.n; i++) prt_store(kv.h, dt, i, frand()); /* the chunk the step brings */
            upload(kv), upload(out), upload(lse);
            snprintf(name, sizeof name, "ring_attention_fwd step %lld%s", (long long)step, balanced ? " bal" : "");
            prt_ring_attention_fwd(rt, out.h, lse.h, qkv.h, kv.h, B, T, NH, KV, HD, 1, coord, step, P, balanced,
                                   PRT_ARG_DTYPES(out.dt, PRT_F32, qkv.dt, kv.dt));
            prt_cu_ring_attention_fwd(rt, D(out), D(lse), D(qkv), D(kv), B, T, NH, KV, HD, 1, coord, step, P,
                                      balanced);
            check(name, "out", out, tol);
            check(name, "lse", lse, tol);
        }
        for (int64_t step = 0; step < P; step++) {
            for (int64_t i = 0; i < kv.n; i++) prt_store(kv.h, dt, i, frand());
            upload(kv), upload(dqkv), upload(dkv);
            snprintf(name, sizeof name, "ring_attention_bwd step %lld%s", (long long)step, balanced ? " bal" : "");
            prt_ring_attention_bwd(rt, dqkv.h, dkv.h, dout.h, out.h, lse.h, qkv.h, kv.h, B, T, NH, KV, HD, 1, coord,
                                   step, P, balanced,
                                   PRT_ARG_DTYPES(dqkv.dt, dkv.dt, dout.dt, out.dt, PRT_F32, qkv.dt, kv.dt));
            prt_cu_ring_attention_bwd(rt, D(dqkv), D(dkv), D(dout), D(out), D(lse), D(qkv), D(kv), B, T, NH, KV, HD, 1,
                                      coord, step, P, balanced);
            check(name, "dqkv", dqkv, tol);
            check(name, "dkv", dkv, tol);
        }
        prt_ring_kv_grad(rt, dqkv.h, dkv.h, B, T, NH, KV, HD, PRT_ARG_DTYPES(dqkv.dt, dkv.dt));
        prt_cu_ring_kv_move(rt, D(dqkv), D(dkv), B, T, NH, KV, HD, 0);
        check("ring_kv_grad", "dqkv", dqkv, tol);
    }
    /* the all-gather form of the load-balanced split: a gathered sequence of 3 chunks put in
     * order and back (added), and a rank's rows split into halves and joined */
    ten seq = mk(dt, B * 3 * T * W, -1, 1, 0), ord = mk(dt, B * 3 * T * W, 0, 0, 1),
        back = mk(dt, B * 3 * T * W, -1, 1, 0), rows = mk(dt, B * T * C, -1, 1, 0),
        h0 = mk(dt, B * (T / 2) * C, 0, 0, 1), h1 = mk(dt, B * (T / 2) * C, 0, 0, 1);
    prt_seq_permute(rt, ord.h, seq.h, B, 3 * T, W, 3, 0, PRT_ARG_DTYPES(ord.dt, seq.dt));
    prt_cu_seq_permute(rt, D(ord), D(seq), B, 3 * T, W, 3, 0);
    check("seq_permute", "ordered", ord, tol);
    prt_seq_permute(rt, back.h, ord.h, B, 3 * T, W, 3, 1, PRT_ARG_DTYPES(back.dt, ord.dt));
    prt_cu_seq_permute(rt, D(back), D(ord), B, 3 * T, W, 3, 1);
    check("seq_permute inverse", "added", back, tol);
    prt_seq_halves(rt, rows.h, h0.h, h1.h, B, T / 2, C, 0, PRT_ARG_DTYPES(rows.dt, h0.dt, h1.dt));
    prt_cu_seq_halves(rt, D(rows), D(h0), D(h1), B, T / 2, C, 0);
    check("seq_halves split", "half 0", h0, tol);
    check("seq_halves split", "half 1", h1, tol);
    for (int64_t i = 0; i < rows.n; i++) prt_store(rows.h, dt, i, frand());
    upload(rows);
    prt_seq_halves(rt, rows.h, h0.h, h1.h, B, T / 2, C, 1, PRT_ARG_DTYPES(rows.dt, h0.dt, h1.dt));
    prt_cu_seq_halves(rt, D(rows), D(h0), D(h1), B, T / 2, C, 1);
    check("seq_halves join", "rows", rows, tol);
}

static void ops(int64_t dt) {
    double tol = tol_of(dt);
    const int64_t N = 48, C = 96, M = 80, K = 72;
    /* element-wise */
    {
        ten in = mk(dt, N * C, -2, 2, 0), out = mk(dt, N * C, 0, 0, 1), din = mk(dt, N * C, -1, 1, 0),
            dout = mk(dt, N * C, -1, 1, 0), b = mk(dt, N * C, -1, 1, 0);
        prt_gelu_fwd(rt, out.h, in.h, N * C, PRT_ARG_DTYPES(out.dt, in.dt)); prt_cu_gelu_fwd(rt, D(out), D(in), N * C); check("gelu_fwd", "out", out, tol);
        prt_gelu_bwd(rt, din.h, in.h, dout.h, N * C, PRT_ARG_DTYPES(din.dt, in.dt, dout.dt)); prt_cu_gelu_bwd(rt, D(din), D(in), D(dout), N * C, 0); check("gelu_bwd", "din", din, tol);
        prt_cuda_memset(rt, out.d, 0xff, (size_t)(N * C) * prt_dtype_size(dt));
        prt_relu_fwd(rt, out.h, in.h, N * C, PRT_ARG_DTYPES(out.dt, in.dt)); prt_cu_relu_fwd(rt, D(out), D(in), N * C); check("relu_fwd", "out", out, tol);
        prt_relu_bwd(rt, din.h, in.h, dout.h, N * C, PRT_ARG_DTYPES(din.dt, in.dt, dout.dt)); prt_cu_relu_bwd(rt, D(din), D(in), D(dout), N * C, 0); check("relu_bwd", "din", din, tol);
        prt_cuda_memset(rt, out.d, 0xff, (size_t)(N * C) * prt_dtype_size(dt));
        prt_add_fwd(rt, out.h, in.h, b.h, N * C, PRT_ARG_DTYPES(out.dt, in.dt, b.dt)); prt_cu_add_fwd(rt, D(out), D(in), D(b), N * C); check("add_fwd", "out", out, tol);
        prt_acc(rt, out.h, b.h, N * C, PRT_ARG_DTYPES(out.dt, b.dt)); prt_cu_acc(rt, D(out), D(b), N * C); check("acc", "dst", out, tol);
        prt_cuda_memset(rt, out.d, 0xff, (size_t)(N * C) * prt_dtype_size(dt));
        prt_copy(rt, out.h, in.h, N * C, PRT_ARG_DTYPES(out.dt, in.dt)); prt_cu_copy(rt, D(out), D(in), N * C); check("copy", "dst", out, tol);
        ten f32 = mk(PRT_F32, N * C, 0, 0, 1);
        prt_copy(rt, f32.h, in.h, N * C, PRT_ARG_DTYPES(f32.dt, in.dt)); prt_cu_copy(rt, D(f32), D(in), N * C); check("copy(convert)", "dst", f32, tol);
        prt_zero(rt, out.h, N * C, PRT_ARG_DTYPES(out.dt)); prt_cu_zero(rt, D(out), N * C, prt_dtype_size(dt)); check("zero", "buf", out, tol);
        /* clipping: the sum of squares adds to an fp32 accumulator (weight 0 adds nothing), scale in place */
        ten acc = mk(PRT_F32, 1, 0.5f, 0.5f, 0);
        prt_sumsq(rt, acc.h, in.h, N * C, 1.0, PRT_ARG_DTYPES(acc.dt, in.dt)); prt_cu_sumsq(rt, D(acc), D(in), N * C, 1.0); check("sumsq", "acc", acc, 1e-5);
        prt_sumsq(rt, acc.h, b.h, N * C, 0.0, PRT_ARG_DTYPES(acc.dt, b.dt)); prt_cu_sumsq(rt, D(acc), D(b), N * C, 0.0); check("sumsq(weight 0)", "acc", acc, 1e-5);
        prt_copy(rt, out.h, in.h, N * C, PRT_ARG_DTYPES(out.dt, in.dt)); prt_cu_copy(rt, D(out), D(in), N * C);
        prt_scale(rt, out.h, N * C, 0.37, PRT_ARG_DTYPES(out.dt)); prt_cu_scale(rt, D(out), N * C, 0.37); check("scale", "x", out, tol);
        ten sw_out = mk(dt, N * C / 2, 0, 0, 1);
        prt_swiglu_fwd(rt, sw_out.h, in.h, N, C / 2, PRT_ARG_DTYPES(sw_out.dt, in.dt)); prt_cu_swiglu_fwd(rt, D(sw_out), D(in), N, C / 2); check("swiglu_fwd", "out", sw_out, tol);
        prt_swiglu_bwd(rt, din.h, in.h, sw_out.h, N, C / 2, PRT_ARG_DTYPES(din.dt, in.dt, sw_out.dt)); prt_cu_swiglu_bwd(rt, D(din), D(in), D(sw_out), N, C / 2, 0); check("swiglu_bwd", "din", din, tol);
        ten bias = mk(dt, C, -1, 1, 0), db = mk(dt, C, -1, 1, 0);
        prt_cuda_memset(rt, out.d, 0xff, (size_t)(N * C) * prt_dtype_size(dt));
        prt_bias_fwd(rt, out.h, in.h, bias.h, N, C, PRT_ARG_DTYPES(out.dt, in.dt, bias.dt)); prt_cu_bias_fwd(rt, D(out), D(in), D(bias), N, C); check("bias_fwd", "out", out, tol);
        prt_bias_bwd(rt, db.h, dout.h, N, C, PRT_ARG_DTYPES(db.dt, dout.dt)); prt_cu_bias_bwd(rt, D(db), D(dout), N, C); check("bias_bwd", "db", db, tol);
    }
    /* embedding (vocab-parallel: a local block [16, 16 + 40) of a vocab of 64) and positions */
    {
        const int64_t V = 40, off = 16, B = 3, T = 16;
        ten tok = mki(N, 0, 64), wte = mk(dt, V * C, -1, 1, 0), out = mk(dt, N * C, 0, 0, 1), dwte = mk(dt, V * C, -1, 1, 0),
            dout = mk(dt, N * C, -1, 1, 0);
        prt_embed_fwd(rt, out.h, tok.h, wte.h, N, C, V, off, PRT_ARG_DTYPES(out.dt, tok.dt, wte.dt)); prt_cu_embed_fwd(rt, D(out), tok.d, D(wte), N, C, V, off); check("embed_fwd", "out", out, tol);
        prt_embed_bwd(rt, dwte.h, tok.h, dout.h, N, C, V, off, PRT_ARG_DTYPES(dwte.dt, tok.dt, dout.dt)); prt_cu_embed_bwd(rt, D(dwte), tok.d, D(dout), N, C, V, off); check("embed_bwd", "dwte", dwte, tol);
        ten wpe = mk(dt, (T + 4) * C, -1, 1, 0), in = mk(dt, B * T * C, -1, 1, 0), po = mk(dt, B * T * C, 0, 0, 1),
            dwpe = mk(dt, (T + 4) * C, -1, 1, 0), din = mk(dt, B * T * C, -1, 1, 0), pg = mk(dt, B * T * C, -1, 1, 0);
        prt_pos_fwd(rt, po.h, in.h, wpe.h, B, T, C, 4, 0, PRT_ARG_DTYPES(po.dt, in.dt, wpe.dt)); prt_cu_pos_fwd(rt, D(po), D(in), D(wpe), B, T, C, 4, 0); check("pos_fwd", "out", po, tol);
        prt_pos_bwd(rt, dwpe.h, din.h, pg.h, B, T, C, 4, 0, PRT_ARG_DTYPES(dwpe.dt, din.dt, pg.dt)); prt_cu_pos_bwd(rt, D(dwpe), D(din), D(pg), B, T, C, 4, 0, 0);
        check("pos_bwd", "dwpe", dwpe, tol); check("pos_bwd", "din", din, tol);
    }
    /* norms */
    {
        ten in = mk(dt, N * C, -2, 3, 0), w = mk(dt, C, 0.5f, 1.5f, 0), b = mk(dt, C, -1, 1, 0), out = mk(dt, N * C, 0, 0, 1),
            mean = mk(dt, N, 0, 0, 1), rstd = mk(dt, N, 0, 0, 1), din = mk(dt, N * C, -1, 1, 0), dw = mk(dt, C, -1, 1, 0),
            db = mk(dt, C, -1, 1, 0), dout = mk(dt, N * C, -1, 1, 0);
        prt_layernorm_fwd(rt, out.h, mean.h, rstd.h, in.h, w.h, b.h, N, C, 1e-5, PRT_ARG_DTYPES(out.dt, mean.dt, rstd.dt, in.dt, w.dt, b.dt));
        prt_cu_layernorm_fwd(rt, D(out), D(mean), D(rstd), D(in), D(w), D(b), N, C, 1e-5);
        check("layernorm_fwd", "out", out, tol); check("layernorm_fwd", "mean", mean, tol); check("layernorm_fwd", "rstd", rstd, tol);
        prt_layernorm_bwd(rt, din.h, dw.h, db.h, dout.h, in.h, w.h, mean.h, rstd.h, N, C, PRT_ARG_DTYPES(din.dt, dw.dt, db.dt, dout.dt, in.dt, w.dt, mean.dt, rstd.dt));
        prt_cu_layernorm_bwd(rt, D(din), D(dw), D(db), D(dout), D(in), D(w), D(mean), D(rstd), N, C, 0);
        check("layernorm_bwd", "din", din, tol); check("layernorm_bwd", "dw", dw, tol); check("layernorm_bwd", "db", db, tol);
        prt_cuda_memset(rt, out.d, 0xff, (size_t)(N * C) * prt_dtype_size(dt));
        prt_cuda_memset(rt, rstd.d, 0xff, (size_t)N * prt_dtype_size(dt));
        prt_rmsnorm_fwd(rt, out.h, rstd.h, in.h, w.h, N, C, 1e-6, PRT_ARG_DTYPES(out.dt, rstd.dt, in.dt, w.dt)); prt_cu_rmsnorm_fwd(rt, D(out), D(rstd), D(in), D(w), N, C, 1e-6);
        check("rmsnorm_fwd", "out", out, tol); check("rmsnorm_fwd", "rstd", rstd, tol);
        prt_rmsnorm_bwd(rt, din.h, dw.h, dout.h, in.h, w.h, rstd.h, N, C, PRT_ARG_DTYPES(din.dt, dw.dt, dout.dt, in.dt, w.dt, rstd.dt));
        prt_cu_rmsnorm_bwd(rt, D(din), D(dw), D(dout), D(in), D(w), D(rstd), N, C, 0);
        check("rmsnorm_bwd", "din", din, tol); check("rmsnorm_bwd", "dw", dw, tol);
    }
    /* GEMMs, both layouts; and a mixed-dtype one (fp32 input, 16-bit weight: the generic kernel) */
    for (int tr = 0; tr < 2; tr++) {
        const char *f = tr ? "matmul_t_fwd" : "matmul_fwd", *bw = tr ? "matmul_t_bwd" : "matmul_bwd";
        ten in = mk(dt, N * K, -1, 1, 0), w = mk(dt, K * M, -1, 1, 0), out = mk(dt, N * M, 0, 0, 1),
            din = mk(dt, N * K, -1, 1, 0), dw = mk(dt, K * M, -1, 1, 0), dout = mk(dt, N * M, -1, 1, 0);
        if (tr) { prt_matmul_t_fwd(rt, out.h, in.h, w.h, N, K, M, PRT_ARG_DTYPES(out.dt, in.dt, w.dt)); prt_matmul_t_bwd(rt, din.h, dw.h, dout.h, in.h, w.h, N, K, M, PRT_ARG_DTYPES(din.dt, dw.dt, dout.dt, in.dt, w.dt)); }
        else { prt_matmul_fwd(rt, out.h, in.h, w.h, N, K, M, PRT_ARG_DTYPES(out.dt, in.dt, w.dt)); prt_matmul_bwd(rt, din.h, dw.h, dout.h, in.h, w.h, N, K, M, PRT_ARG_DTYPES(din.dt, dw.dt, dout.dt, in.dt, w.dt)); }
        prt_cu_matmul_fwd(rt, D(out), D(in), D(w), N, K, M, tr);
        prt_cu_matmul_bwd(rt, D(din), D(dw), D(dout), D(in), D(w), N, K, M, tr, 0, 0);
        check(f, "out", out, tol); check(bw, "din", din, tol); check(bw, "dw", dw, tol);
        if (dt != PRT_F32) {
            ten in32 = mk(PRT_F32, N * K, -1, 1, 0), o2 = mk(dt, N * M, 0, 0, 1);
            if (tr) prt_matmul_t_fwd(rt, o2.h, in32.h, w.h, N, K, M, PRT_ARG_DTYPES(o2.dt, in32.dt, w.dt)); else prt_matmul_fwd(rt, o2.h, in32.h, w.h, N, K, M, PRT_ARG_DTYPES(o2.dt, in32.dt, w.dt));
            prt_cu_matmul_fwd(rt, D(o2), D(in32), D(w), N, K, M, tr);
            check(tr ? "matmul_t_fwd(mixed)" : "matmul_fwd(mixed)", "out", o2, tol);
        }
    }
    /* rotary positions on a grouped qkv: 3 kv heads of 4 query heads (the queries and k rotated), head dim
     * 128, positions from 4096 (a split sequence's second half), plain and with Llama 3.1's scaling; the
     * backward accumulating and writing */
    for (int scaled = 0; scaled < 2; scaled++) {
        const int64_t B = 2, T = N / 2, KV = 3, U = 6, R = 5, HD = 128, n = B * T * KV * U * HD, off = 4096;
        const double factor = scaled ? 8 : 0;
        ten in = mk(dt, n, -1, 1, 0), out = mk(dt, n, 0, 0, 1), din = mk(dt, n, -1, 1, 0), dout = mk(dt, n, -1, 1, 0),
            dw = mk(dt, n, 0, 0, 1);
        prt_rope_fwd(rt, out.h, in.h, B, T, KV, U, R, HD, off, 0, 500000, factor, 1, 4, 8192, PRT_ARG_DTYPES(out.dt, in.dt));
        prt_cu_rope_fwd(rt, D(out), D(in), B, T, KV, U, R, HD, off, 0, 500000, factor, 1, 4, 8192);
        check(scaled ? "rope_fwd(llama3)" : "rope_fwd", "out", out, tol);
        prt_rope_bwd(rt, din.h, dout.h, B, T, KV, U, R, HD, off, 0, 500000, factor, 1, 4, 8192, PRT_ARG_DTYPES(din.dt, dout.dt));
        prt_cu_rope_bwd(rt, D(din), D(dout), B, T, KV, U, R, HD, off, 0, 500000, factor, 1, 4, 8192, 0);
        check(scaled ? "rope_bwd(llama3)" : "rope_bwd", "din", din, tol);
        prt_rope_bwd(rt, dw.h, dout.h, B, T, KV, U, R, HD, off, 0, 500000, factor, 1, 4, 8192,
                     PRT_ARG_DTYPES(dw.dt | PRT_ARG_WRITE, dout.dt));
        prt_cu_rope_bwd(rt, D(dw), D(dout), B, T, KV, U, R, HD, off, 0, 500000, factor, 1, 4, 8192, 1);
        check(scaled ? "rope_bwd(llama3, writes)" : "rope_bwd(writes)", "din", dw, tol);
    }
    /* attention: head dims 16 / 64 / 128, causal or not, probs saved or not; T not a multiple of the tiles */
    const int64_t shapes[][4] = {{2, 80, 3, 16}, {1, 70, 2, 64}, {1, 40, 1, 128}};
    for (int s = 0; s < 3; s++)
        for (int causal = 0; causal < 2; causal++)
            for (int with_probs = 0; with_probs < 2; with_probs++) {
                int64_t B = shapes[s][0], T = shapes[s][1], NH = shapes[s][2], HD = shapes[s][3], Cq = NH * HD;
                if (s > 0 && !causal && with_probs) continue;
                ten qkv = mk(dt, B * T * 3 * Cq, -1, 1, 0), out = mk(dt, B * T * Cq, 0, 0, 1),
                    probs = with_probs ? mk(dt, B * NH * T * T, 0, 0, 1) : (ten){NULL, NULL, dt, 0},
                    dqkv = mk(dt, B * T * 3 * Cq, -1, 1, 0), dout = mk(dt, B * T * Cq, -1, 1, 0);
                char name[64];
                snprintf(name, sizeof name, "attention_fwd hd%lld%s%s", (long long)HD, causal ? " c" : "", with_probs ? " p" : "");
                prt_attention_fwd(rt, out.h, probs.h, qkv.h, B, T, NH, NH, HD, causal, T, 0, PRT_ARG_DTYPES(out.dt, probs.dt, qkv.dt));
                prt_cu_attention_fwd(rt, D(out), with_probs ? D(probs) : NONE, D(qkv), B, T, NH, NH, HD, causal);
                check(name, "out", out, tol);
                if (with_probs) check(name, "probs", probs, tol);
                name[10] = 'b', name[11] = 'w', name[12] = 'd';
                prt_attention_bwd(rt, dqkv.h, dout.h, qkv.h, probs.h, B, T, NH, NH, HD, causal, T, 0, PRT_ARG_DTYPES(dqkv.dt, dout.dt, qkv.dt, probs.dt));
                prt_cu_attention_bwd(rt, D(dqkv), D(dout), D(qkv), with_probs ? D(probs) : NONE, B, T, NH, NH, HD, causal);
                check(name, "dqkv", dqkv, tol);
            }
    /* grouped-query attention: qkv[B, T, KV, G + 2, HD] read as it is, causal or not, probs saved or
     * not, with and without dropout; 4 key/value heads of 3 queries over 5 samples at T 16 also make
     * several chunks of (sample, head) pairs (16 at a time) that split groups between two launches */
    const int64_t gshapes[][5] = {{2, 80, 6, 2, 64}, {5, 16, 12, 4, 32}};
    for (int s = 0; s < 2; s++)
        for (int causal = 0; causal < 2; causal++)
            for (int with_probs = 0; with_probs < 2; with_probs++)
                for (int drop = 0; drop < 2; drop++) {
                    int64_t B = gshapes[s][0], T = gshapes[s][1], NH = gshapes[s][2], KV = gshapes[s][3],
                            HD = gshapes[s][4], W = (NH + 2 * KV) * HD, Cq = NH * HD;
                    ten qkv = mk(dt, B * T * W, -1, 1, 0), out = mk(dt, B * T * Cq, 0, 0, 1),
                        probs = with_probs ? mk(dt, B * NH * T * T, 0, 0, 1) : (ten){NULL, NULL, dt, 0},
                        dqkv = mk(dt, B * T * W, -1, 1, 0), dout = mk(dt, B * T * Cq, -1, 1, 0);
                    prt_cu_drop dd = {drop, prt_dropout_threshold(0.2), prt_dropout_scale(0.2),
                                      prt_dropout_key(rt->plan.seed, 3, 1, 0), 2, 1, NH + 1};
                    char name[80];
                    snprintf(name, sizeof name, "attention gqa T%lld%s%s%s", (long long)T, causal ? " c" : "",
                             with_probs ? " p" : "", drop ? " drop" : "");
                    if (drop) {
                        prt_attention_dropout_fwd(rt, out.h, probs.h, qkv.h, B, T, NH, KV, HD, causal, 2, 1, NH + 1, 3, 1, 0.2,
                                                  PRT_ARG_DTYPES(out.dt, probs.dt, qkv.dt));
                        prt_cu_attention_dropout_fwd(rt, D(out), with_probs ? D(probs) : NONE, D(qkv), B, T, NH, KV, HD, causal, dd);
                    } else {
                        prt_attention_fwd(rt, out.h, probs.h, qkv.h, B, T, NH, KV, HD, causal, T, 0, PRT_ARG_DTYPES(out.dt, probs.dt, qkv.dt));
                        prt_cu_attention_fwd(rt, D(out), with_probs ? D(probs) : NONE, D(qkv), B, T, NH, KV, HD, causal);
                    }
                    check(name, "out", out, tol);
                    if (with_probs) check(name, "probs", probs, tol);
                    if (drop) {
                        prt_attention_dropout_bwd(rt, dqkv.h, dout.h, qkv.h, probs.h, B, T, NH, KV, HD, causal, 2, 1, NH + 1, 3, 1,
                                                  0.2, PRT_ARG_DTYPES(dqkv.dt, dout.dt, qkv.dt, probs.dt));
                        prt_cu_attention_dropout_bwd(rt, D(dqkv), D(dout), D(qkv), with_probs ? D(probs) : NONE, B, T, NH, KV,
                                                     HD, causal, dd);
                    } else {
                        prt_attention_bwd(rt, dqkv.h, dout.h, qkv.h, probs.h, B, T, NH, KV, HD, causal, T, 0,
                                          PRT_ARG_DTYPES(dqkv.dt, dout.dt, qkv.dt, probs.dt));
                        prt_cu_attention_bwd(rt, D(dqkv), D(dout), D(qkv), with_probs ? D(probs) : NONE, B, T, NH, KV, HD, causal);
                    }
                    check(name, "dqkv", dqkv, tol);
                }
    /* column sums over many rows (bias, layernorm and rmsnorm weight gradients): 2100 rows
     * make 5 row blocks whose partial sums sit in the workspace (made large enough first) */
    {
        const int64_t NR = 2100, CR = 64;
        prt_cuda_workspace(rt, (size_t)(5 * CR));
        ten in = mk(dt, NR * CR, -2, 3, 0), w = mk(dt, CR, 0.5f, 1.5f, 0),
            mean = mk(dt, NR, -0.1f, 0.1f, 0), rstd = mk(dt, NR, 0.5f, 1.5f, 0), dw = mk(dt, CR, -1, 1, 0),
            db = mk(dt, CR, -1, 1, 0), dout = mk(dt, NR * CR, -1, 1, 0);
        prt_bias_bwd(rt, db.h, dout.h, NR, CR, PRT_ARG_DTYPES(db.dt, dout.dt)); prt_cu_bias_bwd(rt, D(db), D(dout), NR, CR); check("bias_bwd(rows)", "db", db, tol);
        prt_layernorm_bwd(rt, NULL, dw.h, db.h, dout.h, in.h, w.h, mean.h, rstd.h, NR, CR, PRT_ARG_DTYPES(PRT_F32, dw.dt, db.dt, dout.dt, in.dt, w.dt, mean.dt, rstd.dt));
        prt_cu_layernorm_bwd(rt, NONE, D(dw), D(db), D(dout), D(in), D(w), D(mean), D(rstd), NR, CR, 0);
        check("layernorm_bwd(rows)", "dw", dw, tol); check("layernorm_bwd(rows)", "db", db, tol);
        prt_rmsnorm_bwd(rt, NULL, dw.h, dout.h, in.h, w.h, rstd.h, NR, CR, PRT_ARG_DTYPES(PRT_F32, dw.dt, dout.dt, in.dt, w.dt, rstd.dt));
        prt_cu_rmsnorm_bwd(rt, NONE, D(dw), D(dout), D(in), D(w), D(rstd), NR, CR, 0);
        check("rmsnorm_bwd(rows)", "dw", dw, tol);
    }
    /* attention at training shapes (causal, probs not saved): head dim 128 at T 1024,
     * head dim 64 at T 4096, and a backward over several chunks of (sample, head)
     * pairs (24 pairs, 16 at a time at T 16); fp32 and bf16 */
    const int64_t long_shapes[][4] = {{1, 1024, 2, 128}, {1, 4096, 1, 64}, {3, 16, 8, 32}};
    for (int s = 0; s < 3 && dt != PRT_F16; s++) {
        int64_t B = long_shapes[s][0], T = long_shapes[s][1], NH = long_shapes[s][2], HD = long_shapes[s][3], Cq = NH * HD;
        ten qkv = mk(dt, B * T * 3 * Cq, -1, 1, 0), out = mk(dt, B * T * Cq, 0, 0, 1), dqkv = mk(dt, B * T * 3 * Cq, -1, 1, 0),
            dout = mk(dt, B * T * Cq, -1, 1, 0);
        char name[64];
        snprintf(name, sizeof name, "attention_fwd T%lld hd%lld c", (long long)T, (long long)HD);
        prt_attention_fwd(rt, out.h, NULL, qkv.h, B, T, NH, NH, HD, 1, T, 0, PRT_ARG_DTYPES(out.dt, PRT_F32, qkv.dt));
        prt_cu_attention_fwd(rt, D(out), NONE, D(qkv), B, T, NH, NH, HD, 1);
        check(name, "out", out, tol);
        name[10] = 'b', name[11] = 'w', name[12] = 'd';
        prt_attention_bwd(rt, dqkv.h, dout.h, qkv.h, NULL, B, T, NH, NH, HD, 1, T, 0, PRT_ARG_DTYPES(dqkv.dt, dout.dt, qkv.dt));
        prt_cu_attention_bwd(rt, D(dqkv), D(dout), D(qkv), NONE, B, T, NH, NH, HD, 1);
        check(name, "dqkv", dqkv, tol);
    }
    /* dropout of a branch output: a block of a [8, 32, 40] tensor (samples 5.., positions 8..),
     * the mask byte for byte, the output and the backward */
    {
        const int64_t B = 3, T = 10, Cd = 40, n = B * T * Cd, T_global = 32, t_off = 8, first = 5;
        const double p = 0.2;
        ten in = mk(dt, n, -1, 1, 0), out = mk(dt, n, 0, 0, 1), din = mk(dt, n, -1, 1, 0), dout = mk(dt, n, -1, 1, 0);
        uint8_t *mh = malloc((size_t)n), *mg = malloc((size_t)n);
        uint8_t *md = (uint8_t *)prt_cuda_alloc_zero(rt, (size_t)n, "test");
        prt_dropout_fwd(rt, out.h, mh, in.h, B, T, Cd, first, t_off, T_global, 4, 2, 1, p, PRT_ARG_DTYPES(out.dt, PRT_U8, in.dt));
        prt_cu_dropout_fwd(rt, D(out), md, D(in), B, T, Cd, first, t_off, T_global,
                           prt_dropout_key(rt->plan.seed, 4, 2, 1), prt_dropout_threshold(p), prt_dropout_scale(p));
        check("dropout_fwd", "out", out, tol);
        prt_cuda_d2h(rt, mg, md, (size_t)n);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += mh[i] != mg[i];
        checks++;
        if (bad) failures++;
        printf("%-22s %-6s %-8s %lld of %lld bytes differ  %s\n", "dropout_fwd", prt_dtype_names[dt], "mask",
               (long long)bad, (long long)n, bad ? "FAIL" : "ok");
        prt_dropout_bwd(rt, din.h, mh, dout.h, n, p, PRT_ARG_DTYPES(din.dt, PRT_U8, dout.dt));
        prt_cu_dropout_bwd(rt, D(din), md, D(dout), n, prt_dropout_scale(p), 0);
        check("dropout_bwd", "din", din, tol);
        prt_cuda_free(md);
        free(mh);
        free(mg);
    }
    /* attention with dropout on its probabilities: heads 2..3 of 6, samples 3..4, probs saved or not */
    for (int with_probs = 0; with_probs < 2; with_probs++) {
        const int64_t B = 2, T = 70, NH = 2, HD = 64, Cq = NH * HD, first = 3, h0 = 2, NHg = 6, step = 5, layer = 1;
        const double p = 0.15;
        ten qkv = mk(dt, B * T * 3 * Cq, -1, 1, 0), out = mk(dt, B * T * Cq, 0, 0, 1),
            probs = with_probs ? mk(dt, B * NH * T * T, 0, 0, 1) : (ten){NULL, NULL, dt, 0},
            dqkv = mk(dt, B * T * 3 * Cq, -1, 1, 0), dout = mk(dt, B * T * Cq, -1, 1, 0);
        prt_cu_drop drop = {1, prt_dropout_threshold(p), prt_dropout_scale(p),
                            prt_dropout_key(rt->plan.seed, step, layer, 0), first, h0, NHg};
        const char *name = with_probs ? "attention_dropout p" : "attention_dropout";
        prt_attention_dropout_fwd(rt, out.h, probs.h, qkv.h, B, T, NH, NH, HD, 1, first, h0, NHg, step, layer, p, PRT_ARG_DTYPES(out.dt, probs.dt, qkv.dt));
        prt_cu_attention_dropout_fwd(rt, D(out), with_probs ? D(probs) : NONE, D(qkv), B, T, NH, NH, HD, 1, drop);
        check(name, "out", out, tol);
        if (with_probs) check(name, "probs", probs, tol);
        prt_attention_dropout_bwd(rt, dqkv.h, dout.h, qkv.h, probs.h, B, T, NH, NH, HD, 1, first, h0, NHg, step, layer, p, PRT_ARG_DTYPES(dqkv.dt, dout.dt, qkv.dt, probs.dt));
        prt_cu_attention_dropout_bwd(rt, D(dqkv), D(dout), D(qkv), with_probs ? D(probs) : NONE, B, T, NH, NH, HD, 1,
                                     drop);
        check(name, "dqkv", dqkv, tol);
    }
    /* cross-entropy, vocab block [8, 8 + 50) of 70 classes on axis 0 (size 1) */
    {
        const int64_t V = 50, off = 8;
        ten logits = mk(dt, N * V, -3, 3, 0), stats = mk(dt, 2 * N, 0, 0, 1), loss = mk(PRT_F32, 1, 0, 0, 0),
            tg = mki(N, 0, 70), dl = mk(dt, N * V, -1, 1, 0);
        prt_cuda_memset(rt, loss.d, 0, 4);
        prt_store(loss.h, PRT_F32, 0, 0.0f);
        prt_xent_fwd(rt, loss.h, stats.h, logits.h, tg.h, N, V, off, 0, PRT_ARG_DTYPES(loss.dt, stats.dt, logits.dt, tg.dt));
        double l = prt_cu_xent_fwd(rt, D(loss), D(stats), D(logits), tg.d, N, V, off, 0);
        check("xent_fwd", "stats", stats, tol); check("xent_fwd", "loss", loss, 1e-5);
        double want = prt_load(loss.h, PRT_F32, 0);
        checks++;
        int ok = fabs(l - want) <= 1e-5 * fabs(want);
        if (!ok) failures++;
        printf("%-22s %-6s %-8s %.6f vs %.6f  %s\n", "xent_fwd", prt_dtype_names[dt], "return", l, want, ok ? "ok" : "FAIL");
        prt_xent_bwd(rt, dl.h, logits.h, stats.h, tg.h, N, V, off, 0.25, PRT_ARG_DTYPES(dl.dt, logits.dt, stats.dt, tg.dt));
        prt_cu_xent_bwd(rt, D(dl), D(logits), D(stats), tg.d, N, V, off, 0.25, 0);
        check("xent_bwd", "dlogits", dl, tol);
    }
    /* optimizers: master fp32 when the parameter is 16-bit */
    {
        const int64_t n = 1000;
        ten p = mk(dt, n, -1, 1, 0), g = mk(dt, n, -1, 1, 0), m = mk(PRT_F32, n, -0.1f, 0.1f, 0), v = mk(PRT_F32, n, 0, 0.1f, 0),
            master = mk(PRT_F32, n, -1, 1, 0);
        int int16 = dt != PRT_F32;
        prt_adamw(rt, p.h, int16 ? master.h : NULL, g.h, m.h, v.h, n, 3, 1e-2, 0.9, 0.95, 1e-8, 0.1, PRT_ARG_DTYPES(p.dt, PRT_F32, g.dt, m.dt, v.dt));
        prt_cu_adamw(rt, D(p), int16 ? D(master) : NONE, D(g), D(m), D(v), n, 3, 1e-2, 0.9, 0.95, 1e-8, 0.1);
        check("adamw", "param", p, tol); check("adamw", "m", m, 1e-5); check("adamw", "v", v, 1e-5);
        if (int16) check("adamw", "master", master, 1e-5);
        prt_sgd(rt, p.h, int16 ? master.h : NULL, g.h, m.h, n, 1e-2, 0.9, 0.01, PRT_ARG_DTYPES(p.dt, PRT_F32, g.dt, m.dt));
        prt_cu_sgd(rt, D(p), int16 ? D(master) : NONE, D(g), D(m), n, 1e-2, 0.9, 0.01);
        check("sgd", "param", p, tol); check("sgd", "mom", m, 1e-5);
    }
}

/* The collectives of the active path on axis 0 (size 1): each must leave the
 * [outer, S, inner] data as the CPU path does (a copy for S = 1). */
static void collectives(void) {
    const int64_t outer = 3, inner = 50;
    for (int64_t dt = PRT_F32; dt <= PRT_BF16; dt++) {
        ten a = mk(dt, outer * inner, -1, 1, 0), o = mk(dt, outer * inner, 0, 0, 1);
        prt_cu_allreduce(rt, 0, a.d, outer * inner, dt); check("cu_allreduce", "buf", a, 0);
        prt_cu_allgather(rt, 0, o.d, a.d, outer, inner, dt); memcpy(o.h, a.h, (size_t)(outer * inner) * prt_dtype_size(dt));
        check("cu_allgather", "out", o, 0);
        prt_cuda_memset(rt, o.d, 0xff, (size_t)(outer * inner) * prt_dtype_size(dt));
        prt_cu_reducescatter(rt, 0, o.d, a.d, outer, inner, dt); check("cu_reducescatter", "out", o, 0);
        prt_cuda_memset(rt, o.d, 0xff, (size_t)(outer * inner) * prt_dtype_size(dt));
        prt_cu_alltoall(rt, 0, o.d, a.d, outer, inner, dt); check("cu_alltoall", "out", o, 0);
        prt_cuda_memset(rt, o.d, 0xff, (size_t)(outer * inner) * prt_dtype_size(dt));
        prt_cu_slice(rt, 0, o.d, a.d, outer, inner, dt); check("cu_slice", "out", o, 0);
    }
}

int main(int argc, char **argv) {
    (void)argc;
    const char *names[1] = {"x"};
    prt_plan_desc plan;
    memset(&plan, 0, sizeof plan);
    plan.plan_name = "test_gpu_ops";
    plan.source_file = "test";
    plan.naxes = 1;
    plan.axis_names[0] = names[0];
    plan.axis_sizes[0] = 1;
    plan.dp_axis = plan.tp_axis = plan.pp_axis = -1;
    plan.steps = 1;
    plan.seed = 1;
    plan.batch = plan.micro_batch = plan.micro_batches = plan.seq = 1;
    plan.vocab = 70;
    char *args[2] = {argv[0], NULL};
    rt = prt_init(1, args, &plan);
    /* Skipped only when the driver reports no device; any other CUDA error (a
     * driver or toolkit mismatch) is a failure, named. */
    char error[256] = "";
    int devices = prt_cuda_probe(error, sizeof error);
    if (devices <= 0) {
        printf("test_gpu_ops: %s: %s\n", devices == 0 ? "no CUDA device" : error, devices == 0 ? "skipped" : "FAIL");
        prt_finalize(rt);
        return devices == 0 ? 77 : 1;
    }
    prt_buffer_desc d[4];
    memset(d, 0, sizeof d);
    const char *pn[4] = {"pool_f32", "pool_bf16", "pool_f16", "pool_i32"};
    for (int i = 0; i < 4; i++) {
        d[i].name = pn[i];
        d[i].klass = PRT_WORKSPACE;
        d[i].dtype = i;
        d[i].elems = POOL;
        d[i].instances = 1;
        d[i].init = PRT_INIT_NONE;
        d[i].first_layer = -1;
        d[i].zero_axis = -1;
        d[i].copy_of = -1;
    }
    prt_register_buffers(rt, d, 4);
    for (int i = 0; i < 3; i++) pool[i] = prt_ptr(rt, i, 0);
    ipool = prt_ptr(rt, 3, 0);
    prt_cuda_init(rt);
    printf("test_gpu_ops: collectives %s\n", prt_cuda_collectives(rt));
    for (int64_t dt = PRT_F32; dt <= PRT_F16; dt++) ops(dt), moe_ops(dt), ring_ops(dt);
    collectives();
    prt_cuda_sync(rt);
    printf("test_gpu_ops: %d checks, %d failed: %s\n", checks, failures, failures ? "FAIL" : "ok");
    prt_cuda_finalize(rt);
    prt_finalize(rt);
    return failures ? 1 : 0;
}
