/*
 * test_ops_write.c — PRT_ARG_WRITE (parc_rt.h) on every op that takes it, on
 * the CPU backend, fp32 and bf16 storage: the op called with the flag on an
 * output gradient that holds garbage (NaN) must leave exactly the values the
 * same op leaves when it adds into zeros, and without the flag it must still
 * add (into a prefilled buffer: prefill + the zero-start result, to within one
 * rounding); weight gradients (dw, db) as well as input gradients.  Exit status
 * 0 iff every check passed.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu/prt_cpu_attention.h"
#include "prt_internal.h"
#include "prt_math.h"
#include "rt_test.h"

static prt *RT;

/* A buffer of n elements of `dtype` filled from floats. */
static void *buf_of(const float *x, int64_t n, int64_t dtype) {
    void *p = malloc((size_t)n * prt_dtype_size(dtype) + 64);
    for (int64_t i = 0; i < n; i++) prt_store(p, dtype, i, x[i]);
    return p;
}
static void buf_fill(void *p, int64_t n, int64_t dtype, float v) {
    for (int64_t i = 0; i < n; i++) prt_store(p, dtype, i, v);
}

/* got (written over NaN) == want (added onto zeros), element for element;
 * zeros of either sign are equal. */
static void same(const char *what, int64_t dtype, const void *got, const void *want, int64_t n) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (!(prt_load(got, dtype, i) == prt_load(want, dtype, i))) {
            if (first < 0) first = i;
            bad++;
        }
    RT_EXPECT(bad == 0, "%s (%s): %lld of %lld elements differ from adding onto zeros, first [%lld] %g vs %g", what,
              dtype == PRT_BF16 ? "bf16" : "f32", (long long)bad, (long long)n, (long long)first,
              first >= 0 ? prt_load(got, dtype, first) : 0.0, first >= 0 ? prt_load(want, dtype, first) : 0.0);
}

/* Without the flag the op still adds: acc (prefilled with `pre`) = pre + zero-start result. */
static void adds(const char *what, int64_t dtype, const void *acc, const void *zero_start, float pre, int64_t n) {
    int64_t bad = 0;
    double tol = dtype == PRT_BF16 ? 1.0 / 64 : 1e-6;
    for (int64_t i = 0; i < n; i++) {
        double want = pre + prt_load(zero_start, dtype, i), got = prt_load(acc, dtype, i);
        if (!(fabs(got - want) <= tol * (1.0 + fabs(want)))) bad++;
    }
    RT_EXPECT(bad == 0, "%s (%s) without the flag: %lld of %lld elements are not prefill + result", what,
              dtype == PRT_BF16 ? "bf16" : "f32", (long long)bad, (long long)n);
}

/* The three runs of one op on its output gradient d[n]: into zeros, over NaN
 * with the flag, onto 0.25 without it.  run(d, flag) calls the op. */
typedef void (*run_fn)(void *ctx, void *d, int64_t write_flag);
static void three_runs(const char *what, int64_t dtype, int64_t n, run_fn run, void *ctx) {
    void *zero = malloc((size_t)n * 4 + 64), *over = malloc((size_t)n * 4 + 64), *pre = malloc((size_t)n * 4 + 64);
    buf_fill(zero, n, dtype, 0.0f);
    buf_fill(over, n, dtype, NAN);
    buf_fill(pre, n, dtype, 0.25f);
    run(ctx, zero, 0);
    run(ctx, over, PRT_ARG_WRITE);
    run(ctx, pre, 0);
    same(what, dtype, over, zero, n);
    adds(what, dtype, pre, zero, 0.25f, n);
    free(zero);
    free(over);
    free(pre);
}

typedef struct {
    int64_t dt, N, K, M, kind;  /* kind: 0 matmul, 1 matmul_t, 2 matmul_bias */
    void *in, *w, *dout, *dw, *db, *mean, *rstd, *logits, *stats;
    int32_t *targets;
    uint8_t *mask;
} ctx_t;

/* The norms' inputs: dout = g's first N K values as [N, K], and each row's
 * statistics (mean, rstd; fp32, freed by the caller). */
static void norm_inputs(ctx_t *c, const float *g) {
    float *mean = rt_alloc(c->N), *rstd = rt_alloc(c->N);
    for (int64_t n = 0; n < c->N; n++) mean[n] = 0.1f * (float)(n % 5), rstd[n] = 0.5f + 0.01f * (float)n;
    free(c->dout);
    c->dout = buf_of(g, c->N * c->K, c->dt);
    c->mean = mean;
    c->rstd = rstd;
}

static void run_acc(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    prt_acc(RT, d, c->dout, c->N * c->K, PRT_ARG_DTYPES(c->dt | f, c->dt));
}
static void run_gelu(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    prt_gelu_bwd(RT, d, c->in, c->dout, c->N * c->K, PRT_ARG_DTYPES(c->dt | f, c->dt, c->dt));
}
static void run_matmul(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    int64_t t = c->dt;
    if (c->kind == 0) prt_matmul_bwd(RT, d, NULL, c->dout, c->in, c->w, c->N, c->K, c->M, PRT_ARG_DTYPES(t | f, t, t, t, t));
    if (c->kind == 1)
        prt_matmul_t_bwd(RT, d, NULL, c->dout, c->in, c->w, c->N, c->K, c->M, PRT_ARG_DTYPES(t | f, t, t, t, t));
    if (c->kind == 2)
        prt_matmul_bias_bwd(RT, d, NULL, c->dout, c->in, c->w, NULL, c->N, c->K, c->M,
                            PRT_ARG_DTYPES(t | f, t, t, t, t, t));
}
static void run_layernorm(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    int64_t t = c->dt;
    prt_layernorm_bwd(RT, d, NULL, NULL, c->dout, c->in, c->w, c->mean, c->rstd, c->N, c->K,
                      PRT_ARG_DTYPES(t | f, t, t, t, t, t, PRT_F32, PRT_F32));
}
static void run_xent(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    int64_t t = c->dt;
    prt_xent_bwd(RT, d, c->logits, c->stats, c->targets, c->N, c->K, 0, 0.125, PRT_ARG_DTYPES(t | f, t, PRT_F32, PRT_I32));
}

static void run_rmsnorm(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    int64_t t = c->dt;
    prt_rmsnorm_bwd(RT, d, NULL, c->dout, c->in, c->w, c->rstd, c->N, c->K, PRT_ARG_DTYPES(t | f, t, t, t, t, PRT_F32));
}
static void run_relu(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    prt_relu_bwd(RT, d, c->in, c->dout, c->N * c->K, PRT_ARG_DTYPES(c->dt | f, c->dt, c->dt));
}
static void run_swiglu(void *p, void *d, int64_t f) {  /* din[N, 2F], F = K / 2 */
    ctx_t *c = p;
    prt_swiglu_bwd(RT, d, c->in, c->dout, c->N, c->K / 2, PRT_ARG_DTYPES(c->dt | f, c->dt, c->dt));
}
static void run_dropout(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    prt_dropout_bwd(RT, d, c->mask, c->dout, c->N * c->K, 0.25, PRT_ARG_DTYPES(c->dt | f, PRT_U8, c->dt));
}
static void run_pos(void *p, void *d, int64_t f) {  /* din is pointer argument 1: [B = 1, T = N, C = K] */
    ctx_t *c = p;
    prt_pos_bwd(RT, NULL, d, c->dout, 1, c->N, c->K, 0, 0, PRT_ARG_DTYPES(c->dt, c->dt | f, c->dt));
}
static void run_rope(void *p, void *d, int64_t f) {  /* din[B = 1, T = N, 7 heads (5 rotated) of 10 = K] */
    ctx_t *c = p;
    prt_rope_bwd(RT, d, c->dout, 1, c->N, 1, 7, 5, c->K / 7, 4, 0, 10000, 0, 1, 4, 8192, PRT_ARG_DTYPES(c->dt | f, c->dt));
}

static void test_dtype(int64_t dt) {
    const int64_t N = 37, K = 70, M = 45;  /* odd sizes: the vector loops' tails too */
    float *x = rt_alloc(N * K), *w = rt_alloc(K * M), *g = rt_alloc(N * M > N * K ? N * M : N * K);
    rt_fill(x, N * K, 11, 2.0f);
    rt_fill(w, K * M, 12, 0.5f);
    rt_fill(g, N * M > N * K ? N * M : N * K, 13, 1.0f);
    ctx_t c = {dt, N, K, M, 0, buf_of(x, N * K, dt), buf_of(w, K * M, dt), buf_of(g, N * K, dt), NULL, NULL,
               NULL, NULL, NULL, NULL, NULL, NULL};
    three_runs("acc dst", dt, N * K, run_acc, &c);
    three_runs("gelu_bwd din", dt, N * K, run_gelu, &c);
    free(c.dout);
    c.dout = buf_of(g, N * M, dt);
    for (c.kind = 0; c.kind < 3; c.kind++)
        three_runs(c.kind == 0 ? "matmul_bwd din" : c.kind == 1 ? "matmul_t_bwd din" : "matmul_bias_bwd din", dt,
                   N * K, run_matmul, &c);
    /* layer norm: the statistics of x's rows, weights w[0..K) */
    norm_inputs(&c, g);
    three_runs("layernorm_bwd din", dt, N * K, run_layernorm, &c);
    three_runs("rmsnorm_bwd din", dt, N * K, run_rmsnorm, &c);
    three_runs("relu_bwd din", dt, N * K, run_relu, &c);  /* x < 0 on about half: din = 0 there */
    three_runs("swiglu_bwd din", dt, N * K, run_swiglu, &c);
    uint8_t mask[N * K];
    for (int64_t i = 0; i < N * K; i++) mask[i] = (uint8_t)(i % 4 != 1);  /* a quarter dropped: din = 0 there */
    c.mask = mask;
    three_runs("dropout_bwd din", dt, N * K, run_dropout, &c);
    three_runs("pos_bwd din", dt, N * K, run_pos, &c);
    three_runs("rope_bwd din", dt, N * K, run_rope, &c);
    /* cross-entropy over K classes: stats[2n + 1] = a log-sum-exp of the row */
    float *stats = rt_alloc(2 * N);
    int32_t targets[N];
    for (int64_t n = 0; n < N; n++) stats[2 * n] = 0.0f, stats[2 * n + 1] = 3.0f + 0.1f * (float)n, targets[n] = (int32_t)(n * 7 % K);
    c.logits = c.in;
    c.stats = stats;
    c.targets = targets;
    three_runs("xent_bwd dlogits", dt, N * K, run_xent, &c);
    free(c.in), free(c.w), free(c.dout), free(c.mean), free(c.rstd), free(stats), free(x), free(w), free(g);
}

/* Weight gradients (the compiler's first_write_step): the dw of the three
 * GEMMs' backward, matmul_bias_bwd's db, the norms' dw and db, alone in the
 * call (din NULL); N = 150 rows, more than one widening chunk of a 16-bit
 * operand (PRT_CONVERT_ROWS), so a written dw takes the first chunk's
 * products and adds the others'. */
static void run_matmul_dw(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    int64_t t = c->dt;
    if (c->kind == 0) prt_matmul_bwd(RT, NULL, d, c->dout, c->in, c->w, c->N, c->K, c->M, PRT_ARG_DTYPES(t, t | f, t, t, t));
    if (c->kind == 1)
        prt_matmul_t_bwd(RT, NULL, d, c->dout, c->in, c->w, c->N, c->K, c->M, PRT_ARG_DTYPES(t, t | f, t, t, t));
    if (c->kind == 2)
        prt_matmul_bias_bwd(RT, NULL, d, c->dout, c->in, c->w, NULL, c->N, c->K, c->M,
                            PRT_ARG_DTYPES(t, t | f, t, t, t, t));
}
static void run_matmul_db(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    int64_t t = c->dt;
    prt_matmul_bias_bwd(RT, NULL, NULL, c->dout, c->in, c->w, d, c->N, c->K, c->M, PRT_ARG_DTYPES(t, t, t, t, t, t | f));
}
static void run_layernorm_dw(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    int64_t t = c->dt;
    prt_layernorm_bwd(RT, NULL, d, NULL, c->dout, c->in, c->w, c->mean, c->rstd, c->N, c->K,
                      PRT_ARG_DTYPES(t, t | f, t, t, t, t, PRT_F32, PRT_F32));
}
static void run_layernorm_db(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    int64_t t = c->dt;
    prt_layernorm_bwd(RT, NULL, NULL, d, c->dout, c->in, c->w, c->mean, c->rstd, c->N, c->K,
                      PRT_ARG_DTYPES(t, t, t | f, t, t, t, PRT_F32, PRT_F32));
}
static void run_rmsnorm_dw(void *p, void *d, int64_t f) {
    ctx_t *c = p;
    int64_t t = c->dt;
    prt_rmsnorm_bwd(RT, NULL, d, c->dout, c->in, c->w, c->rstd, c->N, c->K, PRT_ARG_DTYPES(t, t | f, t, t, t, PRT_F32));
}

static void test_weight_grads(int64_t dt) {
    const int64_t N = 150, K = 70, M = 45;
    float *x = rt_alloc(N * K), *w = rt_alloc(K * M), *g = rt_alloc(N * K);
    rt_fill(x, N * K, 41, 2.0f);
    rt_fill(w, K * M, 42, 0.5f);
    rt_fill(g, N * K, 43, 1.0f);
    ctx_t c = {dt, N, K, M, 0, buf_of(x, N * K, dt), buf_of(w, K * M, dt), buf_of(g, N * M, dt), NULL, NULL,
               NULL, NULL, NULL, NULL, NULL, NULL};
    for (c.kind = 0; c.kind < 3; c.kind++)
        three_runs(c.kind == 0 ? "matmul_bwd dw" : c.kind == 1 ? "matmul_t_bwd dw" : "matmul_bias_bwd dw", dt, K * M,
                   run_matmul_dw, &c);
    three_runs("matmul_bias_bwd db", dt, M, run_matmul_db, &c);
    norm_inputs(&c, g);
    three_runs("layernorm_bwd dw", dt, K, run_layernorm_dw, &c);
    three_runs("layernorm_bwd db", dt, K, run_layernorm_db, &c);
    three_runs("rmsnorm_bwd dw", dt, K, run_rmsnorm_dw, &c);
    free(c.in), free(c.w), free(c.dout), free(c.mean), free(c.rstd), free(x), free(w), free(g);
}

/* attention_bwd / attention_dropout_bwd's dqkv[B, T, 3, NH, HD]: probabilities
 * kept or recomputed (both row-blocked at this T), and the key-blocked
 * backward, T = 150 (blocks of 64 query rows, 128 keys), causal. */
typedef struct {
    int64_t dt, B, T, NH, HD, drop;
    void *qkv, *dout, *probs;
    int keyblocked; /* the key-blocked backward, called directly */
} att_ctx_t;
static void run_attention(void *p, void *d, int64_t f) {
    att_ctx_t *c = p;
    int64_t t = c->dt, w = PRT_ARG_DTYPES(t | f, t, t, PRT_F32);
    prt_att_dropout drop = prt_cpu_attention_dropout(RT, 0, 0, c->NH, c->NH, 3, 1, 0.25);
    if (c->keyblocked)
        prt_cpu_attention_keyblocked_bwd(RT, d, c->dout, c->qkv, c->B, c->T, c->NH, c->NH, c->HD, 1, c->drop ? &drop : NULL, w);
    else if (c->drop)
        prt_attention_dropout_bwd(RT, d, c->dout, c->qkv, c->probs, c->B, c->T, c->NH, c->NH, c->HD, 1, 0, 0, c->NH, 3, 1,
                                  0.25, w);
    else prt_attention_bwd(RT, d, c->dout, c->qkv, c->probs, c->B, c->T, c->NH, c->NH, c->HD, 1, c->T, 0, w);
}
static void test_attention(int64_t dt) {
    enum { B = 2, T = 150, NH = 2, HD = 8 };
    int64_t nq = B * T * 3 * NH * HD, no = B * T * NH * HD;
    float *x = rt_alloc(nq), *g = rt_alloc(no), *probs = rt_alloc(B * NH * T * T);
    rt_fill(x, nq, 14, 1.5f);
    rt_fill(g, no, 15, 1.0f);
    att_ctx_t c = {dt, B, T, NH, HD, 0, buf_of(x, nq, dt), buf_of(g, no, dt), NULL, 0};
    float *out = rt_alloc(no);
    prt_attention_fwd(RT, out, probs, x, B, T, NH, NH, HD, 1, T, 0, 0);  /* the kept probabilities of x (fp32) */
    for (c.drop = 0; c.drop < 2; c.drop++)
        for (int kept = 0; kept < 3; kept++) { /* 2: key-blocked */
            c.probs = kept == 1 ? probs : NULL;
            c.keyblocked = kept == 2;
            const char *what[2][3] = {{"attention_bwd dqkv", "attention_bwd dqkv (probs kept)",
                                       "attention_bwd dqkv (key-blocked)"},
                                      {"attention_dropout_bwd dqkv", "attention_dropout_bwd dqkv (probs kept)",
                                       "attention_dropout_bwd dqkv (key-blocked)"}};
            three_runs(what[c.drop][kept], dt, nq, run_attention, &c);
        }
    free(c.qkv), free(c.dout), free(x), free(g), free(probs), free(out);
}

/* The mixture-of-experts backward ops' output gradients (prt_cpu_moe.h), every
 * float tensor in the dtype under test: the router's dx (its losses' gradients
 * in dlogits too), the dispatch's din, the grouped GEMM's din, the
 * combine's dy and dweight, and the expert-parallel regrouping's din.  T = 7 tokens, top-2 of E = 4 experts. */
typedef struct {
    int64_t dt, T, H, M, E, k;
    void *x, *wr, *logits, *weight, *dlogits, *dweight, *xp, *w, *dxp, *y, *dout;
    int32_t *index, *counts, *offsets, *rows;
    int64_t to_expert;  /* moe_regroup_bwd's direction */
} moe_ctx_t;
static void run_moe_router(void *p, void *d, int64_t f) {
    moe_ctx_t *c = p;
    int64_t t = c->dt;
    prt_moe_router_bwd(RT, d, NULL, c->dlogits, c->dweight, c->logits, c->index, c->counts, c->x, c->wr, c->T, c->H,
                       c->E, c->k, 1, 0.3, 0.2, PRT_ARG_DTYPES(t | f, t, t, t, t, PRT_I32, PRT_I32, t, t));
}
static void run_moe_permute(void *p, void *d, int64_t f) {
    moe_ctx_t *c = p;
    prt_moe_permute_bwd(RT, d, c->dxp, c->rows, c->T, c->H, c->k, PRT_ARG_DTYPES(c->dt | f, c->dt, PRT_I32));
}
static void run_moe_matmul(void *p, void *d, int64_t f) {
    moe_ctx_t *c = p;
    int64_t t = c->dt;
    prt_moe_matmul_bwd(RT, d, NULL, c->y, c->xp, c->w, c->offsets, c->E, c->H, c->M,
                       PRT_ARG_DTYPES(t | f, t, t, t, t, PRT_I32));
}
static void run_moe_combine_dy(void *p, void *d, int64_t f) {
    moe_ctx_t *c = p;
    int64_t t = c->dt;
    prt_moe_combine_bwd(RT, d, NULL, c->dout, c->y, c->weight, c->rows, c->T, c->M, c->k,
                        PRT_ARG_DTYPES(t | f, t, t, t, t, PRT_I32));
}
static void run_moe_combine_dweight(void *p, void *d, int64_t f) {
    moe_ctx_t *c = p;
    int64_t t = c->dt;
    prt_moe_combine_bwd(RT, NULL, d, c->dout, c->y, c->weight, c->rows, c->T, c->M, c->k,
                        PRT_ARG_DTYPES(t, t | f, t, t, t, PRT_I32));
}
static void run_moe_regroup(void *p, void *d, int64_t f) {  /* 3 ranks of 2 experts, 10 rows of H */
    moe_ctx_t *c = p;
    prt_moe_regroup_bwd(RT, d, c->dxp, c->counts, 3, 2, c->H, c->to_expert, PRT_ARG_DTYPES(c->dt | f, c->dt, PRT_I32));
}
static void test_moe(int64_t dt) {
    enum { T = 7, H = 9, M = 5, E = 4, K = 2, R = T * K };
    float x[T * H], wr[H * E], w[E * H * M], g[R * H + 16];  /* windows of g at offsets up to 11 */
    int32_t index[R], counts[E], offsets[E + 1], rows[R];
    rt_fill(x, T * H, 31, 1.0f); rt_fill(wr, H * E, 32, 1.0f); rt_fill(w, E * H * M, 33, 0.5f); rt_fill(g, R * H + 16, 34, 1.0f);
    moe_ctx_t c = {dt, T, H, M, E, K, buf_of(x, T * H, dt), buf_of(wr, H * E, dt), buf_of(g, T * E, dt),
                   buf_of(g, R, dt), buf_of(g, T * E, dt), buf_of(g + 3, R, dt), buf_of(g, R * H, dt),
                   buf_of(w, E * H * M, dt), buf_of(g + 5, R * H, dt), buf_of(g + 7, R * M, dt), buf_of(g + 11, T * M, dt),
                   index, counts, offsets, rows, 0};
    prt_moe_router_fwd(RT, c.logits, index, c.weight, counts, NULL, c.x, c.wr, T, H, E, K, 1, 0.3, 0.2,
                       PRT_ARG_DTYPES(dt, PRT_I32, dt, PRT_I32, dt, dt, dt));
    prt_moe_permute_fwd(RT, c.xp, offsets, rows, c.x, index, T, H, E, K, PRT_ARG_DTYPES(dt, PRT_I32, PRT_I32, dt, PRT_I32));
    three_runs("moe_router_bwd dx", dt, T * H, run_moe_router, &c);
    three_runs("moe_permute_bwd din", dt, T * H, run_moe_permute, &c);
    three_runs("moe_matmul_bwd din", dt, R * H, run_moe_matmul, &c);
    three_runs("moe_combine_bwd dy", dt, R * M, run_moe_combine_dy, &c);
    three_runs("moe_combine_bwd dweight", dt, R, run_moe_combine_dweight, &c);
    int32_t blocks[6] = {2, 0, 3, 1, 0, 4};  /* rows of (source, expert), 10 in all */
    c.counts = blocks;
    for (c.to_expert = 0; c.to_expert < 2; c.to_expert++)
        three_runs(c.to_expert ? "moe_regroup_bwd din (to experts)" : "moe_regroup_bwd din (to sources)", dt, 10 * H,
                   run_moe_regroup, &c);
    void *bufs[] = {c.x, c.wr, c.logits, c.weight, c.dlogits, c.dweight, c.xp, c.w, c.dxp, c.y, c.dout};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

/* acc with the flag and copy on 2 threads (prt_fast_copy: a byte range per
 * thread above 128 KiB): every byte of the source, for sizes that do not split
 * evenly into cache lines; and an overlapping copy inside one buffer (one
 * memmove, as the ranges cannot be split) equals memmove's result. */
static void test_copy_threads(void) {
    int nt0 = openblas_get_num_threads();
    openblas_set_num_threads(2);
    const int64_t sizes[] = {40000, 100003, 262147};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        float *src = rt_alloc(n), *dst = rt_alloc(n), *over = rt_alloc(n + 64);
        rt_fill(src, n, 21 + s, 3.0f);
        buf_fill(dst, n, PRT_F32, NAN);
        prt_acc(RT, dst, src, n, PRT_ARG_DTYPES(PRT_F32 | PRT_ARG_WRITE, PRT_F32));
        RT_EXPECT(!memcmp(dst, src, (size_t)n * 4), "acc with the flag, %lld floats on 2 threads: not a copy of src",
                  (long long)n);
        buf_fill(dst, n, PRT_F32, NAN);
        prt_copy(RT, dst, src, n, 0);
        RT_EXPECT(!memcmp(dst, src, (size_t)n * 4), "copy, %lld floats on 2 threads: not a copy of src", (long long)n);
        memcpy(over, src, (size_t)n * 4);
        memmove(dst, src, (size_t)n * 4);
        memmove(dst + 7, dst, (size_t)(n - 7) * 4);  /* the reference: dst[7..] = src[0..n-7) */
        prt_copy(RT, over + 7, over, n - 7, 0);
        RT_EXPECT(!memcmp(over, dst, (size_t)n * 4), "copy onto an overlapping range, %lld floats: differs from memmove",
                  (long long)n);
        free(src), free(dst), free(over);
    }
    openblas_set_num_threads(nt0);
}

/* The gradient clip's sum of squares over fp32 (prt_sumsq, its weight 1
 * added to the accumulator): within 1e-12 relative of the sum in long double,
 * for sizes below one block, across blocks and not a multiple of 16; and the
 * same bits on 1 and 2 threads, since its blocks depend on n alone. */
static void test_sumsq_threads(void) {
    int nt0 = openblas_get_num_threads();
    const int64_t sizes[] = {15, 40000, 3000017};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        float *x = rt_alloc(n);
        rt_fill(x, n, 31 + s, 2.0f);
        long double ref = 0;
        for (int64_t i = 0; i < n; i++) ref += (long double)x[i] * x[i];
        float acc[2] = {0.5f, 0.5f};
        for (int t = 0; t < 2; t++) {
            openblas_set_num_threads(t + 1);
            prt_sumsq(RT, &acc[t], x, n, 1.0, PRT_ARG_DTYPES(PRT_F32, PRT_F32));
        }
        RT_EXPECT(fabsl(acc[0] - (0.5L + ref)) <= 1e-6L * (0.5L + ref), "sumsq of %lld floats: %.9g, long double %.9Lg",
                  (long long)n, acc[0], 0.5L + ref);
        RT_EXPECT(!memcmp(&acc[0], &acc[1], sizeof acc[0]), "sumsq of %lld floats: %.9g on 1 thread, %.9g on 2",
                  (long long)n, acc[0], acc[1]);
        free(x);
    }
    openblas_set_num_threads(nt0);
}

int main(int argc, char **argv) {
    (void)argc;
    prt_plan_desc plan = rt_plan("test_ops_write", 0, NULL, NULL);
    RT = prt_init(1, argv, &plan);
    test_dtype(PRT_F32);
    test_dtype(PRT_BF16);
    test_weight_grads(PRT_F32);
    test_weight_grads(PRT_BF16);
    test_attention(PRT_F32);
    test_attention(PRT_BF16);
    test_moe(PRT_F32);
    test_moe(PRT_BF16);
    test_copy_threads();
    test_sumsq_threads();
    int64_t status = prt_finalize(RT);
    if (status) rt_failures++;
    printf("test_ops_write: %s (%d failures)\n", rt_failures ? "FAIL" : "ok", rt_failures);
    return rt_failures ? 1 : 0;
}
