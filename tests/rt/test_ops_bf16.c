/*
 * test_ops_bf16.c — the ops and collectives of the CPU runtime on 16-bit storage
 * (bf16, then f16), on a 2x2x2 mesh (axes a, b, c; run with mpirun -np 8).
 *
 * Ops (every rank runs them): tensors live in a registered 16-bit buffer and
 * each call's dtypes word says so (which the runtime checks against the buffer);
 * the reference is the same op on fp32 copies of the rounded inputs (in
 * unregistered memory, declared fp32), its outputs rounded.  Statistics (mean, rstd, probs, stats, loss) are fp32 in
 * both runs, as the compiler assigns them.  Verdicts, in units in the last place
 * of the 16-bit format (ulp):
 *   - elementwise and row ops, norms, embeddings, cross-entropy, optimizers: 0 ulp
 *     (the same fp32 arithmetic in the same order; parameter gradients that sum
 *     over rows are summed in fp32 and rounded once);
 *   - the mixture-of-experts ops: as test_moe says;
 *   - GEMM ops and attention: <= 1 ulp, or within GEMM_ATOL where a sum of O(1)
 *     terms cancels to a tiny result (16-bit operands are widened into packed
 *     scratch and, past PRT_CONVERT_ROWS rows, in row chunks, so BLAS sums in
 *     another fp32 order); fp32 outputs of those ops within 1e-5 relative.
 *   - the runtime's workspace request of each op equals the formula at
 *     prt_expect_memory in parc_rt.h (the compiler's ledger uses it).
 * Collectives (nccl-tests style): small integers from (rank, index, seed), exact in
 * bf16 and f16, so every element is right or wrong: allreduce, allgather,
 * reducescatter, alltoall, slice with outer 1 and 3 on every axis, send/recv rings.
 * Exit status 0 iff nothing was wrong on any rank.
 */
#include "cpu/prt_cpu_attention.h"
#include "prt_internal.h"
#include "prt_scratch.h"
#include "rt_test.h"

static prt *RT;
static int64_t DT;            /* the 16-bit dtype under test */
static long long wrong;
static int worst_ulps;          /* the largest ulp difference seen (printed) */

/* ---------------------------------------------------------------- 16-bit pool */

enum { POOL_ELEMS = 1 << 20 };
static uint16_t *pool;         /* the registered buffer of dtype DT */
static int64_t pool_used;
static float *pool_f32[256];   /* the fp32 twins, freed by pool_reset */
static int pool_nf32;

static uint16_t to16(float f) { return DT == PRT_BF16 ? prt_f32_to_bf16(f) : prt_f32_to_f16(f); }
static float from16(uint16_t h) { return DT == PRT_BF16 ? prt_bf16_to_f32(h) : prt_f16_to_f32(h); }

/* A tensor twice: h in 16-bit storage (inside the pool) and f, an fp32 copy of
 * the same (rounded) values in unregistered memory. */
typedef struct pair {
    uint16_t *h;
    float *f;
    int64_t n;
} pair;

static pair mk(int64_t n, uint64_t seed, float scale) {
    PRT_CHECK(pool_used + n <= POOL_ELEMS && pool_nf32 < 256, "test pool exhausted");
    pair p = {pool + pool_used, rt_alloc(n), n};
    pool_f32[pool_nf32++] = p.f;
    pool_used += (n + 31) & ~(int64_t)31;
    rt_fill(p.f, n, seed, scale);
    for (int64_t i = 0; i < n; i++) {
        p.h[i] = to16(p.f[i]);
        p.f[i] = from16(p.h[i]);
    }
    return p;
}
static void pool_reset(void) {
    while (pool_nf32 > 0) free(pool_f32[--pool_nf32]);
    pool_used = 0;
}

/* Ordered integer of a 16-bit pattern: neighbours differ by 1, +0 == -0. */
static int ordered(uint16_t h) { return h & 0x8000 ? -(int)(h & 0x7fff) : (int)h; }

/* p.h (the 16-bit run) against round(p.f) (the fp32 run's result); then p.f takes
 * the 16-bit values, so the next op of both runs starts from the same inputs. */
static void expect16_tol(const char *what, pair p, int max_ulps, double atol) {
    long long bad = 0;
    int worst = 0;
    for (int64_t i = 0; i < p.n; i++) {
        uint16_t want = to16(p.f[i]);
        int d = abs(ordered(p.h[i]) - ordered(want));
        if (d > max_ulps && fabs((double)from16(p.h[i]) - (double)from16(want)) <= atol) d = max_ulps;
        if (d > worst) worst = d;
        if (d > max_ulps) {
            if (bad < 3)
                fprintf(stderr, "  %s %s[%lld]: got %.7g want %.7g (%d ulp)\n", prt_dtype_names[DT], what, (long long)i,
                        from16(p.h[i]), from16(want), d);
            bad++;
        }
    }
    if (bad) {
        fprintf(stderr, "rank %d: FAIL %s %s: %lld of %lld elements more than %d ulp off (worst %d)\n", RT->world_rank,
                prt_dtype_names[DT], what, bad, (long long)p.n, max_ulps, worst);
        wrong += bad;
    }
    if (worst > worst_ulps) worst_ulps = worst;
    for (int64_t i = 0; i < p.n; i++) p.f[i] = from16(p.h[i]);
}
static void expect16(const char *what, pair p, int max_ulps) { expect16_tol(what, p, max_ulps, 0.0); }
/* GEMM outputs: <= 1 ulp, or, where the sum cancels (tiny results from O(1)
 * terms), within GEMM_ATOL: fp32 sums of this test's <= 100 O(1) terms in another
 * order (row chunks) differ by a few 1e-7, which is more than an f16 ulp near 1e-4. */
#define GEMM_ATOL 2e-6
static void expect16_gemm(const char *what, pair p) { expect16_tol(what, p, 1, GEMM_ATOL); }
/* fp32 outputs (statistics) of the two runs. */
static void expect32(const char *what, const float *got, const float *want, int64_t n, double rtol) {
    char name[128];
    snprintf(name, sizeof name, "%s %s", prt_dtype_names[DT], what);
    if (!rt_close(name, got, want, n, rtol * 1e-3, rtol)) wrong++;
}

/* Workspace request checks: the scratch buffer is emptied before the op, so its
 * capacity afterwards is that op's request. */
static void scratch_reset(void) {
    prt_ledger_book(RT, PRT_WORKSPACE, -(int64_t)(RT->work_cap * sizeof(float)));
    free(RT->work);
    RT->work = NULL;
    RT->work_cap = 0;
}
static void expect_scratch(const char *what, int64_t floats) {
    if ((int64_t)RT->work_cap != floats) {
        fprintf(stderr, "rank %d: FAIL %s %s: workspace request %zu floats, the ledger formula says %lld\n",
                RT->world_rank, prt_dtype_names[DT], what, RT->work_cap, (long long)floats);
        wrong++;
    }
}
static int64_t rows_r(int64_t N) { return N < PRT_CONVERT_ROWS ? N : PRT_CONVERT_ROWS; }

/* ---------------------------------------------------------------- ops */

static void test_elementwise(void) {
    enum { n = 300 };
    pair a = mk(n, 1, 3), b = mk(n, 2, 3), out = mk(n, 3, 1), din = mk(n, 4, 1);

    prt_add_fwd(RT, out.h, a.h, b.h, n, PRT_ARG_DTYPES(DT, DT, DT));
    prt_add_fwd(RT, out.f, a.f, b.f, n, 0);
    expect16("add_fwd", out, 0);
    prt_gelu_fwd(RT, out.h, a.h, n, PRT_ARG_DTYPES(DT, DT));
    prt_gelu_fwd(RT, out.f, a.f, n, 0);
    expect16("gelu_fwd", out, 0);
    prt_gelu_bwd(RT, din.h, a.h, b.h, n, PRT_ARG_DTYPES(DT, DT, DT));
    prt_gelu_bwd(RT, din.f, a.f, b.f, n, 0);
    expect16("gelu_bwd", din, 0);
    prt_relu_fwd(RT, out.h, a.h, n, PRT_ARG_DTYPES(DT, DT));
    prt_relu_fwd(RT, out.f, a.f, n, 0);
    expect16("relu_fwd", out, 0);
    prt_relu_bwd(RT, din.h, a.h, b.h, n, PRT_ARG_DTYPES(DT, DT, DT));
    prt_relu_bwd(RT, din.f, a.f, b.f, n, 0);
    expect16("relu_bwd", din, 0);
    prt_acc(RT, din.h, a.h, n, PRT_ARG_DTYPES(DT, DT));
    prt_acc(RT, din.f, a.f, n, 0);
    expect16("acc", din, 0);
    prt_copy(RT, out.h, a.h, n, PRT_ARG_DTYPES(DT, DT));  /* same dtype: the bits */
    prt_copy(RT, out.f, a.f, n, 0);
    expect16("copy", out, 0);
    float *wide = rt_alloc(n);    /* 16-bit -> fp32 (unregistered): widened exactly */
    prt_copy(RT, wide, a.h, n, PRT_ARG_DTYPES(PRT_F32, DT));
    expect32("copy to fp32", wide, a.f, n, 0);
    prt_copy(RT, out.h, b.f, n, PRT_ARG_DTYPES(DT));  /* fp32 -> 16-bit: rounded */
    memcpy(out.f, b.f, n * sizeof(float));
    expect16("copy from fp32", out, 0);
    free(wide);
    out.h[n] = 0x3f80;  /* pool padding after the tensor: zero must not touch it */
    prt_zero(RT, out.h, n, PRT_ARG_DTYPES(DT));
    memset(out.f, 0, n * sizeof(float));
    expect16("zero", out, 0);
    RT_EXPECT(out.h[n] == 0x3f80, "zero wrote past its n elements");

    enum { N = 6, F = 25 };  /* swiglu: in[N,2,F] */
    pair in = mk(N * 2 * F, 5, 2), o = mk(N * F, 6, 1), d = mk(N * F, 7, 1), di = mk(N * 2 * F, 8, 1);
    prt_swiglu_fwd(RT, o.h, in.h, N, F, PRT_ARG_DTYPES(DT, DT));
    prt_swiglu_fwd(RT, o.f, in.f, N, F, 0);
    expect16("swiglu_fwd", o, 0);
    prt_swiglu_bwd(RT, di.h, in.h, d.h, N, F, PRT_ARG_DTYPES(DT, DT, DT));
    prt_swiglu_bwd(RT, di.f, in.f, d.f, N, F, 0);
    expect16("swiglu_bwd", di, 0);

    enum { R = 70, M = 12 };  /* bias: sums over 70 rows into db */
    pair x = mk(R * M, 9, 1), bias = mk(M, 10, 1), y = mk(R * M, 11, 1), db = mk(M, 12, 1);
    prt_bias_fwd(RT, y.h, x.h, bias.h, R, M, PRT_ARG_DTYPES(DT, DT, DT));
    prt_bias_fwd(RT, y.f, x.f, bias.f, R, M, 0);
    expect16("bias_fwd", y, 0);
    prt_bias_fwd(RT, x.h, x.h, bias.h, R, M, PRT_ARG_DTYPES(DT, DT, DT));  /* in place */
    prt_bias_fwd(RT, x.f, x.f, bias.f, R, M, 0);
    expect16("bias_fwd in place", x, 0);
    prt_bias_bwd(RT, db.h, y.h, R, M, PRT_ARG_DTYPES(DT, DT));
    prt_bias_bwd(RT, db.f, y.f, R, M, 0);
    expect16("bias_bwd", db, 0);
}

static void test_embed_norms(void) {
    enum { N = 40, C = 24, V = 10, B = 4, T = 10 };
    int32_t tokens[N];
    for (int i = 0; i < N; i++) tokens[i] = (i * 7 + i / 3) % 13 - 1;  /* repeats, and rows outside [0, V) */
    for (int64_t off = 0; off <= 3; off += 3) {
        pair wte = mk(V * C, 20, 1), out = mk(N * C, 21, 1), dout = mk(N * C, 22, 1), dwte = mk(V * C, 23, 0.5f);
        prt_embed_fwd(RT, out.h, tokens, wte.h, N, C, V, off, PRT_ARG_DTYPES(DT, PRT_I32, DT));
        prt_embed_fwd(RT, out.f, tokens, wte.f, N, C, V, off, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
        expect16("embed_fwd", out, 0);
        scratch_reset();
        prt_embed_bwd(RT, dwte.h, tokens, dout.h, N, C, V, off, PRT_ARG_DTYPES(DT, PRT_I32, DT));
        expect_scratch("embed_bwd", C);
        prt_embed_bwd(RT, dwte.f, tokens, dout.f, N, C, V, off, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
        expect16("embed_bwd (repeated rows)", dwte, 0);
    }
    {   /* positions: wpe rows t + t_offset; dwpe sums the B samples */
        int64_t toff = 2;
        pair in = mk(B * T * C, 24, 1), wpe = mk((T + toff) * C, 25, 1), out = mk(B * T * C, 26, 1),
             dout = mk(B * T * C, 27, 1), dwpe = mk((T + toff) * C, 28, 1), din = mk(B * T * C, 29, 1);
        prt_pos_fwd(RT, out.h, in.h, wpe.h, B, T, C, toff, 0, PRT_ARG_DTYPES(DT, DT, DT));
        prt_pos_fwd(RT, out.f, in.f, wpe.f, B, T, C, toff, 0, 0);
        expect16("pos_fwd", out, 0);
        prt_pos_bwd(RT, dwpe.h, din.h, dout.h, B, T, C, toff, 0, PRT_ARG_DTYPES(DT, DT, DT));
        prt_pos_bwd(RT, dwpe.f, din.f, dout.f, B, T, C, toff, 0, 0);
        expect16("pos_bwd dwpe", dwpe, 0);
        expect16("pos_bwd din", din, 0);
    }
    {   /* rotary positions on a grouped qkv [B, T, 2 groups, 3 heads, 8]: 2 of 3 rotated, no workspace */
        enum { G = 2, U = 3, HD = 8 };
        int64_t n = B * T * G * U * HD;
        pair in = mk(n, 38, 2), out = mk(n, 39, 1), dout = mk(n, 19, 1), din = mk(n, 18, 1);
        for (int scaled = 0; scaled < 2; scaled++) {
            double factor = scaled ? 8 : 0;
            scratch_reset();
            prt_rope_fwd(RT, out.h, in.h, B, T, G, U, 2, HD, 3, 0, 500000, factor, 1, 4, 64, PRT_ARG_DTYPES(DT, DT));
            expect_scratch("rope_fwd", 0);
            prt_rope_fwd(RT, out.f, in.f, B, T, G, U, 2, HD, 3, 0, 500000, factor, 1, 4, 64, 0);
            expect16(scaled ? "rope_fwd (llama3 scaling)" : "rope_fwd", out, 0);
            scratch_reset();
            prt_rope_bwd(RT, din.h, dout.h, B, T, G, U, 2, HD, 3, 0, 500000, factor, 1, 4, 64, PRT_ARG_DTYPES(DT, DT));
            expect_scratch("rope_bwd", 0);
            prt_rope_bwd(RT, din.f, dout.f, B, T, G, U, 2, HD, 3, 0, 500000, factor, 1, 4, 64, 0);
            expect16(scaled ? "rope_bwd din (llama3 scaling)" : "rope_bwd din", din, 0);
        }
    }
    {   /* layernorm and rmsnorm: fp32 mean/rstd, 16-bit everything else */
        pair in = mk(N * C, 30, 2), w = mk(C, 31, 1), b = mk(C, 32, 1), out = mk(N * C, 33, 1), dout = mk(N * C, 34, 1),
             din = mk(N * C, 35, 1), dw = mk(C, 36, 1), db = mk(C, 37, 1);
        float mean_h[N], rstd_h[N], mean_f[N], rstd_f[N];
        prt_layernorm_fwd(RT, out.h, mean_h, rstd_h, in.h, w.h, b.h, N, C, 1e-5, PRT_ARG_DTYPES(DT, PRT_F32, PRT_F32, DT, DT, DT));
        prt_layernorm_fwd(RT, out.f, mean_f, rstd_f, in.f, w.f, b.f, N, C, 1e-5, 0);
        expect16("layernorm_fwd", out, 0);
        expect32("layernorm_fwd mean", mean_h, mean_f, N, 0);
        expect32("layernorm_fwd rstd", rstd_h, rstd_f, N, 0);
        scratch_reset();
        prt_layernorm_bwd(RT, din.h, dw.h, db.h, dout.h, in.h, w.h, mean_h, rstd_h, N, C, PRT_ARG_DTYPES(DT, DT, DT, DT, DT, DT));
        expect_scratch("layernorm_bwd", 2 * C);
        prt_layernorm_bwd(RT, din.f, dw.f, db.f, dout.f, in.f, w.f, mean_f, rstd_f, N, C, 0);
        expect16("layernorm_bwd din", din, 0);
        expect16("layernorm_bwd dw", dw, 0);
        expect16("layernorm_bwd db", db, 0);
        prt_layernorm_fwd(RT, out.h, mean_h, rstd_h, in.h, w.h, NULL, N, C, 1e-5, PRT_ARG_DTYPES(DT, PRT_F32, PRT_F32, DT, DT));  /* no bias */
        prt_layernorm_fwd(RT, out.f, mean_f, rstd_f, in.f, w.f, NULL, N, C, 1e-5, 0);
        expect16("layernorm_fwd (no bias)", out, 0);

        prt_rmsnorm_fwd(RT, out.h, rstd_h, in.h, w.h, N, C, 1e-6, PRT_ARG_DTYPES(DT, PRT_F32, DT, DT));
        prt_rmsnorm_fwd(RT, out.f, rstd_f, in.f, w.f, N, C, 1e-6, 0);
        expect16("rmsnorm_fwd", out, 0);
        expect32("rmsnorm_fwd rstd", rstd_h, rstd_f, N, 0);
        scratch_reset();
        prt_rmsnorm_bwd(RT, din.h, dw.h, dout.h, in.h, w.h, rstd_h, N, C, PRT_ARG_DTYPES(DT, DT, DT, DT, DT));
        expect_scratch("rmsnorm_bwd", C);
        prt_rmsnorm_bwd(RT, din.f, dw.f, dout.f, in.f, w.f, rstd_f, N, C, 0);
        expect16("rmsnorm_bwd din", din, 0);
        expect16("rmsnorm_bwd dw", dw, 0);
    }
}

static void test_matmul(void) {
    enum { K = 24, M = 40 };
    const int64_t Ns[2] = {20, 100};  /* one chunk; two chunks of PRT_CONVERT_ROWS */
    for (int t = 0; t < 2; t++)
        for (int transposed = 0; transposed < 2; transposed++) {
            int64_t N = Ns[t], R = rows_r(N);
            char what[64];
            pair in = mk(N * K, 40, 1), w = mk(K * M, 41, 0.5f), out = mk(N * M, 42, 1), dout = mk(N * M, 43, 1),
                 din = mk(N * K, 44, 1), dw = mk(K * M, 45, 1);
            scratch_reset();
            (transposed ? prt_matmul_t_fwd : prt_matmul_fwd)(RT, out.h, in.h, w.h, N, K, M, PRT_ARG_DTYPES(DT, DT, DT));
            snprintf(what, sizeof what, "%s N=%lld", transposed ? "matmul_t_fwd" : "matmul_fwd", (long long)N);
            expect_scratch(what, K * M + R * (K + M));
            (transposed ? prt_matmul_t_fwd : prt_matmul_fwd)(RT, out.f, in.f, w.f, N, K, M, 0);
            expect16_gemm(what, out);

            scratch_reset();
            (transposed ? prt_matmul_t_bwd : prt_matmul_bwd)(RT, din.h, dw.h, dout.h, in.h, w.h, N, K, M, PRT_ARG_DTYPES(DT, DT, DT, DT, DT));
            snprintf(what, sizeof what, "%s N=%lld", transposed ? "matmul_t_bwd" : "matmul_bwd", (long long)N);
            expect_scratch(what, 2 * K * M + R * (M + 2 * K));
            (transposed ? prt_matmul_t_bwd : prt_matmul_bwd)(RT, din.f, dw.f, dout.f, in.f, w.f, N, K, M, 0);
            expect16_gemm(what, din);
            expect16_gemm(what, dw);

            scratch_reset();  /* din NULL: no weight needed */
            (transposed ? prt_matmul_t_bwd : prt_matmul_bwd)(RT, NULL, dw.h, dout.h, in.h, w.h, N, K, M, PRT_ARG_DTYPES(PRT_F32, DT, DT, DT, DT));
            expect_scratch("matmul bwd (din NULL)", K * M + R * (M + K));
            (transposed ? prt_matmul_t_bwd : prt_matmul_bwd)(RT, NULL, dw.f, dout.f, in.f, w.f, N, K, M, 0);
            expect16_gemm("matmul bwd (din NULL) dw", dw);
        }
    /* mixed: fp32 activations (unregistered), 16-bit weight: only the weight is widened */
    enum { N = 30 };
    pair w = mk(K * M, 46, 0.5f);
    float *in = rt_alloc(N * K), *out_a = rt_alloc(N * M), *out_b = rt_alloc(N * M);
    rt_fill(in, N * K, 47, 1);
    scratch_reset();
    prt_matmul_fwd(RT, out_a, in, w.h, N, K, M, PRT_ARG_DTYPES(PRT_F32, PRT_F32, DT));
    expect_scratch("matmul_fwd (fp32 rows)", K * M);
    prt_matmul_fwd(RT, out_b, in, w.f, N, K, M, 0);
    expect32("matmul_fwd (fp32 rows)", out_a, out_b, N * M, 1e-5);
    free(in); free(out_a); free(out_b);
}

/* A mixture-of-experts layer (prt_cpu_moe.h), sigmoid gate, top-2 of 4 experts
 * over 80 tokens, expert 0 favoured (feature 0 is 1 everywhere and its router
 * weight 4) so that it gets more than PRT_CONVERT_ROWS rows: its 16-bit rows
 * are widened in two chunks.  The router keeps its logits in their storage dtype
 * and routes from those: its reference is matmul_fwd for the logits, then the
 * router on the rounded logits (x = logits, wr = the identity, which the GEMM
 * reproduces exactly); in the backward dlogits is rounded before its GEMMs,
 * so the reference is the router's dlogits (dx and dwr NULL), then
 * matmul_bwd.  Routing, dispatch and combine: 0 ulp; GEMMs as matmul's;
 * workspace as prt_scratch.h's moe formulas. */
static void test_moe(void) {
    enum { T = 80, H = 24, E = 4, K = 2, M = 16, R = T * K };
    const double aux = 0.3, zc = 0.2;
    pair x = mk(T * H, 70, 1), wr = mk(H * E, 71, 0.5f), logits = mk(T * E, 72, 1), weight = mk(R, 73, 1),
         w = mk(E * H * M, 74, 0.5f), xp = mk(R * H, 75, 1), y = mk(R * M, 76, 1), out = mk(T * M, 77, 1),
         dout = mk(T * M, 78, 1), dy = mk(R * M, 79, 1), dweight = mk(R, 80, 1), dxp = mk(R * H, 81, 1),
         dw = mk(E * H * M, 82, 1), dx = mk(T * H, 83, 1), dwr = mk(H * E, 84, 1), dlogits = mk(T * E, 85, 1);
    int32_t index[2][R], counts[2][E], offsets[2][E + 1], rows[2][R];
    float losses[2][2], eye[E * E] = {0};
    for (int e = 0; e < E; e++) eye[e * E + e] = 1.0f;
    const int64_t I32 = PRT_I32, F32 = PRT_F32;
    for (int t = 0; t < T; t++) x.h[t * H] = to16(x.f[t * H] = 1.0f);
    wr.h[0] = to16(wr.f[0] = 4.0f);

    scratch_reset();
    prt_moe_router_fwd(RT, logits.h, index[0], weight.h, counts[0], losses[0], x.h, wr.h, T, H, E, K, 1, aux, zc,
                       PRT_ARG_DTYPES(DT, I32, DT, I32, F32, DT, DT));
    expect_scratch("moe_router_fwd", prt_scratch_moe_router_fwd(T, H, E, 1, 1, 1));
    prt_matmul_fwd(RT, logits.f, x.f, wr.f, T, H, E, 0);
    expect16_gemm("moe_router_fwd logits", logits);
    prt_moe_router_fwd(RT, dlogits.f, index[1], weight.f, counts[1], losses[1], logits.f, eye, T, E, E, K, 1, aux, zc,
                       PRT_ARG_DTYPES(F32, I32, F32, I32, F32, F32, F32));
    RT_EXPECT(!memcmp(index[0], index[1], sizeof index[0]) && !memcmp(counts[0], counts[1], sizeof counts[0]),
              "%s moe_router_fwd: the routing differs from the fp32 router's on the same logits", prt_dtype_names[DT]);
    expect16("moe_router_fwd weight", weight, 0);
    expect32("moe_router_fwd losses", losses[0], losses[1], 2, 1e-6);

    prt_moe_permute_fwd(RT, xp.h, offsets[0], rows[0], x.h, index[0], T, H, E, K,
                        PRT_ARG_DTYPES(DT, I32, I32, DT, I32));
    prt_moe_permute_fwd(RT, xp.f, offsets[1], rows[1], x.f, index[0], T, H, E, K, PRT_ARG_DTYPES(F32, I32, I32, F32, I32));
    RT_EXPECT(!memcmp(offsets[0], offsets[1], sizeof offsets[0]) && !memcmp(rows[0], rows[1], sizeof rows[0]),
              "%s moe_permute_fwd: offsets or rows depend on the dtype", prt_dtype_names[DT]);
    expect16("moe_permute_fwd", xp, 0);
    int64_t most = 0;  /* the largest expert's rows */
    for (int e = 0; e < E; e++) most = offsets[0][e + 1] - offsets[0][e] > most ? offsets[0][e + 1] - offsets[0][e] : most;
    RT_EXPECT(most > PRT_CONVERT_ROWS, "%s moe: the largest expert has %lld rows, one chunk", prt_dtype_names[DT],
              (long long)most);

    scratch_reset();
    prt_moe_matmul_fwd(RT, y.h, xp.h, w.h, offsets[0], E, H, M, PRT_ARG_DTYPES(DT, DT, DT, I32));
    expect_scratch("moe_matmul_fwd", prt_scratch_moe_matmul_fwd(most, H, M, 1, 1, 1));
    prt_moe_matmul_fwd(RT, y.f, xp.f, w.f, offsets[0], E, H, M, PRT_ARG_DTYPES(F32, F32, F32, I32));
    expect16_gemm("moe_matmul_fwd", y);
    prt_moe_combine_fwd(RT, out.h, y.h, weight.h, rows[0], T, M, K, PRT_ARG_DTYPES(DT, DT, DT, I32));
    prt_moe_combine_fwd(RT, out.f, y.f, weight.f, rows[0], T, M, K, PRT_ARG_DTYPES(F32, F32, F32, I32));
    expect16("moe_combine_fwd", out, 0);

    /* the backward, every gradient prefilled (+=) but dlogits (written) */
    prt_moe_combine_bwd(RT, dy.h, dweight.h, dout.h, y.h, weight.h, rows[0], T, M, K,
                        PRT_ARG_DTYPES(DT, DT, DT, DT, DT, I32));
    prt_moe_combine_bwd(RT, dy.f, dweight.f, dout.f, y.f, weight.f, rows[0], T, M, K,
                        PRT_ARG_DTYPES(F32, F32, F32, F32, F32, I32));
    expect16("moe_combine_bwd dy", dy, 0);
    expect16("moe_combine_bwd dweight", dweight, 0);
    scratch_reset();
    prt_moe_matmul_bwd(RT, dxp.h, dw.h, dy.h, xp.h, w.h, offsets[0], E, H, M, PRT_ARG_DTYPES(DT, DT, DT, DT, DT, I32));
    expect_scratch("moe_matmul_bwd", prt_scratch_moe_matmul_bwd(most, H, M, 1, 1, 1, 1, 1, 1, 1));
    prt_moe_matmul_bwd(RT, dxp.f, dw.f, dy.f, xp.f, w.f, offsets[0], E, H, M,
                       PRT_ARG_DTYPES(F32, F32, F32, F32, F32, I32));
    expect16_gemm("moe_matmul_bwd din", dxp);
    expect16_gemm("moe_matmul_bwd dw", dw);
    prt_moe_permute_bwd(RT, dx.h, dxp.h, rows[0], T, H, K, PRT_ARG_DTYPES(DT, DT, I32));
    prt_moe_permute_bwd(RT, dx.f, dxp.f, rows[0], T, H, K, PRT_ARG_DTYPES(F32, F32, I32));
    expect16("moe_permute_bwd", dx, 0);
    scratch_reset();
    prt_moe_router_bwd(RT, dx.h, dwr.h, dlogits.h, dweight.h, logits.h, index[0], counts[0], x.h, wr.h, T, H, E, K, 1,
                       aux, zc, PRT_ARG_DTYPES(DT, DT, DT, DT, DT, I32, I32, DT, DT));
    expect_scratch("moe_router_bwd", prt_scratch_moe_router_bwd(T, H, E, 1, 1, 1, 1, 1, 1, 1));
    prt_moe_router_bwd(RT, NULL, NULL, dlogits.f, dweight.f, logits.f, index[0], counts[0], x.f, wr.f, T, H, E, K, 1,
                       aux, zc, PRT_ARG_DTYPES(F32, F32, F32, F32, F32, I32, I32, F32, F32));
    expect16("moe_router_bwd dlogits", dlogits, 0);
    prt_matmul_bwd(RT, dx.f, dwr.f, dlogits.f, x.f, wr.f, T, H, E, 0);
    expect16_gemm("moe_router_bwd dx", dx);
    expect16_gemm("moe_router_bwd dwr", dwr);
}

/* T = 8: one block of query rows; T = 150: three (PRT_ATTENTION_ROWS 64) and,
 * key-blocked (the forward without kept probabilities, and the key-blocked
 * backward), two of keys (PRT_ATTENTION_KEYS 128) */
static void test_attention(int64_t T) {
    enum { B = 2, NH = 2, HD = 4, C = NH * HD };
    const int64_t W = prt_attention_workers(B * NH), BQ = prt_attention_rows(T), BK = prt_attention_keys(T); /* a slice per worker */
    for (int causal = 0; causal <= 1; causal++) {
        pair qkv = mk(B * T * 3 * C, 50 + causal, 1.5f), out = mk(B * T * C, 52, 1), dout = mk(B * T * C, 53, 1),
             dqkv = mk(B * T * 3 * C, 54, 1), dqkv2 = mk(B * T * 3 * C, 55, 1);
        float *probs_h = rt_alloc(B * NH * T * T), *probs_f = rt_alloc(B * NH * T * T);
        scratch_reset();
        prt_attention_fwd(RT, out.h, probs_h, qkv.h, B, T, NH, NH, HD, causal, T, 0, PRT_ARG_DTYPES(DT, PRT_F32, DT));
        expect_scratch("attention_fwd", W * (4 * T * HD));
        prt_attention_fwd(RT, out.f, probs_f, qkv.f, B, T, NH, NH, HD, causal, T, 0, 0);
        expect16_gemm(causal ? "attention_fwd causal" : "attention_fwd", out);
        expect32("attention_fwd probs", probs_h, probs_f, B * NH * T * T, 1e-5);
        scratch_reset();
        prt_attention_fwd(RT, out.h, NULL, qkv.h, B, T, NH, NH, HD, causal, T, 0, PRT_ARG_DTYPES(DT, PRT_F32, DT));
        expect_scratch("attention_fwd (probs NULL)", W * (BQ * BK + 2 * BQ + 4 * T * HD));
        expect16_gemm("attention_fwd (probs NULL)", out);

        scratch_reset();
        prt_attention_bwd(RT, dqkv.h, dout.h, qkv.h, probs_h, B, T, NH, NH, HD, causal, T, 0, PRT_ARG_DTYPES(DT, DT, DT));
        expect_scratch("attention_bwd", W * (BQ * T + 7 * T * HD));
        prt_attention_bwd(RT, dqkv.f, dout.f, qkv.f, probs_f, B, T, NH, NH, HD, causal, T, 0, 0);
        expect16_gemm(causal ? "attention_bwd causal" : "attention_bwd", dqkv);
        scratch_reset();
        prt_attention_bwd(RT, dqkv2.h, dout.h, qkv.h, NULL, B, T, NH, NH, HD, causal, T, 0, PRT_ARG_DTYPES(DT, DT, DT));
        expect_scratch("attention_bwd (probs NULL)", W * (2 * BQ * T + 7 * T * HD));
        prt_attention_bwd(RT, dqkv2.f, dout.f, qkv.f, NULL, B, T, NH, NH, HD, causal, T, 0, 0);
        expect16_gemm("attention_bwd (probs NULL)", dqkv2);
        /* the key-blocked backward (attention_bwd's above PRT_ATTENTION_FULL_ROWS keys) */
        pair dqkv4 = mk(B * T * 3 * C, 58, 1);
        scratch_reset();
        prt_cpu_attention_keyblocked_bwd(RT, dqkv4.h, dout.h, qkv.h, B, T, NH, NH, HD, causal, NULL,
                                         PRT_ARG_DTYPES(DT, DT, DT));
        expect_scratch("attention_bwd key-blocked", W * (2 * BQ * BK + BQ * (HD + 2) + 2 * T + 7 * T * HD));
        prt_cpu_attention_keyblocked_bwd(RT, dqkv4.f, dout.f, qkv.f, B, T, NH, NH, HD, causal, NULL, 0);
        expect16_gemm("attention_bwd key-blocked", dqkv4);

        /* 16-bit probabilities: stored rounded, read back widened */
        pair probs = mk(B * NH * T * T, 56, 1), dqkv3 = mk(B * T * 3 * C, 57, 1);
        scratch_reset();
        prt_attention_fwd(RT, out.h, probs.h, qkv.h, B, T, NH, NH, HD, causal, T, 0, PRT_ARG_DTYPES(DT, DT, DT));
        expect_scratch("attention_fwd (16-bit probs)", W * (BQ * T + 4 * T * HD));
        memcpy(probs.f, probs_f, sizeof(float) * B * NH * T * T);
        expect16_gemm("attention_fwd (16-bit probs) probs", probs);
        for (int64_t i = 0; i < probs.n; i++) probs.f[i] = from16(probs.h[i]);
        scratch_reset();
        prt_attention_bwd(RT, dqkv3.h, dout.h, qkv.h, probs.h, B, T, NH, NH, HD, causal, T, 0, PRT_ARG_DTYPES(DT, DT, DT, DT));
        expect_scratch("attention_bwd (16-bit probs)", W * (2 * BQ * T + 7 * T * HD));
        prt_attention_bwd(RT, dqkv3.f, dout.f, qkv.f, probs.f, B, T, NH, NH, HD, causal, T, 0, 0);
        expect16_gemm("attention_bwd (16-bit probs)", dqkv3);
        free(probs_h);
        free(probs_f);
    }
}

static void test_xent(void) {
    enum { N = 12, V = 17 };
    int32_t targets[N];
    for (int i = 0; i < N; i++) targets[i] = (i * 5) % V;
    pair logits = mk(N * V, 60, 4), dlogits = mk(N * V, 61, 1);
    float stats_h[2 * N], stats_f[2 * N], loss_h = 0.25f, loss_f = 0.25f;
    prt_xent_fwd(RT, &loss_h, stats_h, logits.h, targets, N, V, 0, -1, PRT_ARG_DTYPES(PRT_F32, PRT_F32, DT, PRT_I32));
    prt_xent_fwd(RT, &loss_f, stats_f, logits.f, targets, N, V, 0, -1, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    expect32("xent_fwd stats", stats_h, stats_f, 2 * N, 0);
    expect32("xent_fwd loss", &loss_h, &loss_f, 1, 0);
    prt_xent_bwd(RT, dlogits.h, logits.h, stats_h, targets, N, V, 0, 0.125, PRT_ARG_DTYPES(DT, DT, PRT_F32, PRT_I32));
    prt_xent_bwd(RT, dlogits.f, logits.f, stats_f, targets, N, V, 0, 0.125, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    expect16("xent_bwd", dlogits, 0);
}

static void test_optimizers(void) {
    enum { n = 200 };
    for (int with_master = 0; with_master <= 1; with_master++) {
        pair param = mk(n, 70, 1), grad = mk(n, 71, 0.1f);
        float *master = rt_alloc(n), *m_h = rt_alloc(n), *v_h = rt_alloc(n), *m_f = rt_alloc(n), *v_f = rt_alloc(n);
        rt_fill(master, n, 72, 1);  /* a master is more precise than its rounded param */
        if (with_master)
            for (int64_t i = 0; i < n; i++) param.h[i] = to16(master[i]);
        float *ref = rt_alloc(n);   /* the fp32 run updates the master (or the widened param) */
        memcpy(ref, with_master ? master : param.f, n * sizeof(float));
        for (int64_t step = 1; step <= 3; step++) {
            prt_adamw(RT, param.h, with_master ? master : NULL, grad.h, m_h, v_h, n, step, 1e-2, 0.9, 0.999, 1e-8, 0.1, PRT_ARG_DTYPES(DT, PRT_F32, DT));
            prt_adamw(RT, ref, NULL, grad.f, m_f, v_f, n, step, 1e-2, 0.9, 0.999, 1e-8, 0.1, 0);
            if (!with_master)  /* without a master the param itself is rounded after each step */
                for (int64_t i = 0; i < n; i++) ref[i] = from16(to16(ref[i]));
        }
        memcpy(param.f, ref, n * sizeof(float));
        expect16(with_master ? "adamw param (rounded master)" : "adamw param in place", param, 0);
        if (with_master) expect32("adamw master", master, ref, n, 0);
        expect32("adamw m", m_h, m_f, n, 0);
        expect32("adamw v", v_h, v_f, n, 0);

        pair p2 = mk(n, 73, 1);
        float *mom_h = rt_alloc(n), *mom_f = rt_alloc(n), *ref2 = rt_alloc(n);
        for (int64_t i = 0; i < n; i++) master[i] = p2.f[i] + 1e-4f * (float)(i % 7);
        memcpy(ref2, with_master ? master : p2.f, n * sizeof(float));
        prt_sgd(RT, p2.h, with_master ? master : NULL, grad.h, mom_h, n, 0.05, 0.9, 0.01, PRT_ARG_DTYPES(DT, PRT_F32, DT));
        prt_sgd(RT, ref2, NULL, grad.f, mom_f, n, 0.05, 0.9, 0.01, 0);
        memcpy(p2.f, ref2, n * sizeof(float));
        expect16(with_master ? "sgd param (rounded master)" : "sgd param in place", p2, 0);
        expect32("sgd momentum", mom_h, mom_f, n, 0);
        free(master); free(m_h); free(v_h); free(m_f); free(v_f); free(ref); free(mom_h); free(mom_f); free(ref2);
    }
}

/* ---------------------------------------------------------------- collectives */

static float f(int rank, int64_t idx, int seed) { return (float)((rank * 7 + idx * 3 + seed * 5) % 17 - 8); }

static int member(int axis, int c) {  /* world rank at coordinate c of my group on `axis` */
    int stride = 1;
    for (int a = RT->naxes - 1; a > axis; a--) stride *= RT->axis_size[a];
    return RT->world_rank + (c - RT->coord[axis]) * stride;
}

static void expect_exact(const char *what, int axis, const uint16_t *got, const float *want, int64_t n) {
    long long bad = 0;
    for (int64_t i = 0; i < n; i++) bad += from16(got[i]) != want[i];
    if (bad)
        fprintf(stderr, "rank %d: %s %s on axis %d: %lld of %lld wrong\n", RT->world_rank, prt_dtype_names[DT], what, axis,
                bad, (long long)n);
    wrong += bad;
}

static void test_collectives(int axis) {
    int S = prt_axis_size(RT, axis), me = RT->world_rank;
    int64_t c = prt_coord(RT, axis);
    for (int64_t outer = 1; outer <= 3; outer += 2) {
        const int64_t inner = 5;
        int seed = (int)outer + 10 * axis;
        int64_t nin = outer * inner, nfull = outer * S * inner;
        pool_reset();
        pair in = mk(nfull, 1, 0), out = mk(nfull, 2, 0);
        float *want = rt_alloc(nfull);

        for (int64_t i = 0; i < nfull; i++) in.h[i] = to16(f(me, i, seed));
        for (int64_t i = 0; i < nfull; i++) {
            want[i] = 0;
            for (int s = 0; s < S; s++) want[i] += f(member(axis, s), i, seed);
        }
        prt_allreduce(RT, axis, in.h, nfull, PRT_ARG_DTYPES(DT));
        expect_exact("allreduce", axis, in.h, want, nfull);

        for (int64_t i = 0; i < nin; i++) in.h[i] = to16(f(me, i, seed + 1));
        for (int64_t o = 0; o < outer; o++)
            for (int s = 0; s < S; s++)
                for (int64_t i = 0; i < inner; i++)
                    want[(o * S + s) * inner + i] = f(member(axis, s), o * inner + i, seed + 1);
        prt_allgather(RT, axis, out.h, in.h, outer, inner, PRT_ARG_DTYPES(DT, DT));
        expect_exact(outer > 1 ? "allgather(outer 3)" : "allgather", axis, out.h, want, nfull);

        for (int64_t i = 0; i < nfull; i++) in.h[i] = to16(f(me, i, seed + 2));
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                float s = 0;
                for (int r = 0; r < S; r++) s += f(member(axis, r), (o * S + c) * inner + i, seed + 2);
                want[o * inner + i] = s;
            }
        prt_reducescatter(RT, axis, out.h, in.h, outer, inner, PRT_ARG_DTYPES(DT, DT));
        expect_exact(outer > 1 ? "reducescatter(outer 3)" : "reducescatter", axis, out.h, want, nin);

        for (int64_t i = 0; i < nfull; i++) in.h[i] = to16(f(me, i, seed + 3));
        for (int s = 0; s < S; s++)
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < inner; i++)
                    want[(s * outer + o) * inner + i] = f(member(axis, s), (o * S + c) * inner + i, seed + 3);
        prt_alltoall(RT, axis, out.h, in.h, outer, inner, PRT_ARG_DTYPES(DT, DT));
        expect_exact(outer > 1 ? "alltoall(outer 3)" : "alltoall", axis, out.h, want, nfull);

        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) want[o * inner + i] = from16(in.h[(o * S + c) * inner + i]);
        prt_slice(RT, axis, out.h, in.h, outer, inner, PRT_ARG_DTYPES(DT, DT));
        expect_exact("slice", axis, out.h, want, nin);
        free(want);
    }

    /* pipeline rings: three messages in flight each way, 2-byte elements */
    for (int delta = -1; delta <= 1; delta += 2) {
        pool_reset();
        pair msg[3], got[3];
        for (int k = 0; k < 3; k++) {
            int64_t n = 4 + 3 * k;
            msg[k] = mk(n, 80, 0);
            got[k] = mk(n, 81, 0);
            for (int64_t i = 0; i < n; i++) msg[k].h[i] = to16(f(me, i, 30 + k));
            prt_send(RT, axis, delta, msg[k].h, n, 100 + k, PRT_ARG_DTYPES(DT));
            memset(msg[k].h, 0, (size_t)n * 2);  /* sends are buffered */
        }
        int from = member(axis, (int)((c - delta + S) % S));
        for (int k = 2; k >= 0; k--) {
            int64_t n = 4 + 3 * k;
            float want[16];
            prt_recv(RT, axis, -delta, got[k].h, n, 100 + k, PRT_ARG_DTYPES(DT));
            for (int64_t i = 0; i < n; i++) want[i] = f(from, i, 30 + k);
            expect_exact(delta > 0 ? "send/recv ring +1" : "send/recv ring -1", axis, got[k].h, want, n);
        }
        prt_comm_complete_sends(RT);
    }
}

/* A 16-bit sum of two ranks is the rounded fp32 sum (one rounding), also for
 * values that are not small integers. */
static void test_allreduce_rounding(void) {
    const int axis = 2;  /* c, size 2 */
    enum { n = 64 };
    pool_reset();
    pair mine = mk(n, 90 + (uint64_t)RT->world_rank, 1);
    float other[n], want[n];
    uint64_t peer_seed = 90 + (uint64_t)member(axis, 1 - (int)prt_coord(RT, axis));
    rt_fill(other, n, peer_seed, 1);
    for (int i = 0; i < n; i++) want[i] = from16(to16(mine.f[i] + from16(to16(other[i]))));
    prt_allreduce(RT, axis, mine.h, n, PRT_ARG_DTYPES(DT));
    expect_exact("allreduce (one rounding of the fp32 sum)", axis, mine.h, want, n);
}

int main(int argc, char **argv) {
    static const char *names[3] = {"a", "b", "c"};
    static const int64_t sizes[3] = {2, 2, 2};
    prt_plan_desc plan = rt_plan("test_ops_bf16", 3, names, sizes);
    RT = prt_init(argc, argv, &plan);
    prt_buffer_desc descs[2];
    memset(descs, 0, sizeof descs);
    for (int k = 0; k < 2; k++) {
        descs[k].name = k ? "pool.f16" : "pool.bf16";
        descs[k].klass = PRT_ACTIVATIONS;
        descs[k].dtype = k ? PRT_F16 : PRT_BF16;
        descs[k].elems = POOL_ELEMS;
        descs[k].instances = 1;
        descs[k].init = PRT_INIT_NONE;
        descs[k].first_layer = -1;
        descs[k].zero_axis = -1;
        descs[k].copy_of = -1;
        for (int d = 0; d < PRT_MAX_DIMS; d++) descs[k].split_axis[d] = -1;
    }
    prt_register_buffers(RT, descs, 2);
    RT_EXPECT(prt_dtype_of(RT, prt_ptr(RT, 0, 0)) == PRT_BF16, "dtype of a buffer's first element");
    RT_EXPECT(prt_dtype_of(RT, (uint16_t *)prt_ptr(RT, 1, 0) + 777) == PRT_F16, "dtype of an interior pointer");
    RT_EXPECT(prt_dtype_of(RT, &plan) == -1, "dtype of memory the runtime did not allocate");

    for (int k = 0; k < 2; k++) {
        DT = descs[k].dtype;
        pool = prt_ptr(RT, k, 0);
        pool_reset();
        test_elementwise();
        test_embed_norms();
        test_matmul();
        test_attention(8);
        test_attention(150);
        test_xent();
        test_moe();
        test_optimizers();
        for (int axis = 0; axis < 3; axis++) test_collectives(axis);
        test_allreduce_rounding();
        pool_reset();
    }
    long long total = wrong + rt_failures;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    int worst = worst_ulps;
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int rank = RT->world_rank;
    int64_t status = prt_finalize(RT);
    if (rank == 0)
        printf("test_ops_bf16: %s (%lld wrong elements/checks over all ranks; largest op difference %d ulp)\n",
               total ? "FAIL" : "ok", total, worst);
    return total || status ? 1 : 0;
}
