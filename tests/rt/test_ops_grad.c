/*
 * test_ops_grad.c — every op of the CPU runtime on one rank:
 *   - backward against central finite differences of L = sum(out * R) (R random),
 *     with the gradient buffers prefilled so that accumulation (+=) is checked too;
 *   - forward against small independent double-precision references;
 *   - optimizers against a double-precision reference of the same update;
 *   - the data stream's contract (determinism, targets = next token, split-invariance);
 *   - the mixture-of-experts router (its losses included) and a dispatch, grouped
 *     GEMM and combine, by finite differences too.
 * Exit status 0 iff every check passed.
 */
#include <cblas.h>

#include "cpu/prt_cpu_attention.h"
#include "prt_internal.h"
#include "rt_test.h"

static prt *RT;

/* ---------------------------------------------------------------- finite differences */

typedef double (*loss_fn)(void *ctx);

static double dot_r(const float *out, const float *r, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)out[i] * r[i];
    return s;
}

/* Compares analytic (= grad after backward - prefill) with central differences of f in x. */
static void grad_check(const char *what, loss_fn f, void *ctx, float *x, const float *grad, const float *prefill,
                       int64_t n, float h) {
    float *num = rt_alloc(n), *ana = rt_alloc(n);
    for (int64_t i = 0; i < n; i++) {
        float old = x[i], up = old + h, down = old - h;
        x[i] = up;
        double lp = f(ctx);
        x[i] = down;
        double lm = f(ctx);
        x[i] = old;
        num[i] = (float)((lp - lm) / ((double)up - (double)down));
        ana[i] = grad[i] - (prefill ? prefill[i] : 0.0f);
    }
    rt_close(what, ana, num, n, 2e-3, 2e-2);
    free(num);
    free(ana);
}

/* A gradient buffer prefilled with random values, and a copy of the prefill. */
typedef struct { float *g, *g0; } gradbuf;
static gradbuf grad_new(int64_t n, uint64_t seed) {
    gradbuf b = {rt_alloc(n), rt_alloc(n)};
    rt_fill(b.g0, n, seed, 0.5f);
    memcpy(b.g, b.g0, (size_t)n * sizeof(float));
    return b;
}
static void grad_free(gradbuf b) { free(b.g); free(b.g0); }

/* ---------------------------------------------------------------- embedding, positions */

typedef struct { float *out, *r, *wte; int32_t *tok; int64_t N, C, V, off; } embed_ctx;
static double embed_loss(void *p) {
    embed_ctx *c = p;
    prt_embed_fwd(RT, c->out, c->tok, c->wte, c->N, c->C, c->V, c->off, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
    return dot_r(c->out, c->r, c->N * c->C);
}
static void test_embed(void) {
    embed_ctx c = {.N = 7, .C = 4, .V = 5, .off = 2};
    int32_t tok[7] = {0, 2, 3, 6, 7, 4, 2};  /* 0 and 7 are outside [2, 7) */
    c.tok = tok;
    c.out = rt_alloc(c.N * c.C); c.r = rt_alloc(c.N * c.C); c.wte = rt_alloc(c.V * c.C);
    rt_fill(c.r, c.N * c.C, 1, 1); rt_fill(c.wte, c.V * c.C, 2, 1);
    embed_loss(&c);
    float *want = rt_alloc(c.N * c.C);
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t j = 0; j < c.C; j++) {
            int64_t row = tok[n] - c.off;
            want[n * c.C + j] = row >= 0 && row < c.V ? c.wte[row * c.C + j] : 0.0f;
        }
    rt_close("embed_fwd", c.out, want, c.N * c.C, 0, 0);
    gradbuf d = grad_new(c.V * c.C, 3);
    prt_embed_bwd(RT, d.g, tok, c.r, c.N, c.C, c.V, c.off, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
    grad_check("embed_bwd dwte", embed_loss, &c, c.wte, d.g, d.g0, c.V * c.C, 1e-2f);
    grad_free(d); free(want); free(c.out); free(c.r); free(c.wte);
}

typedef struct { float *out, *r, *in, *wpe; int64_t B, T, C, off; } pos_ctx;
static double pos_loss(void *p) {
    pos_ctx *c = p;
    prt_pos_fwd(RT, c->out, c->in, c->wpe, c->B, c->T, c->C, c->off, 0, 0);
    return dot_r(c->out, c->r, c->B * c->T * c->C);
}
static void test_pos(void) {
    pos_ctx c = {.B = 2, .T = 3, .C = 4, .off = 1};
    int64_t n = c.B * c.T * c.C, np = (c.T + c.off) * c.C;
    c.out = rt_alloc(n); c.r = rt_alloc(n); c.in = rt_alloc(n); c.wpe = rt_alloc(np);
    rt_fill(c.r, n, 4, 1); rt_fill(c.in, n, 5, 1); rt_fill(c.wpe, np, 6, 1);
    pos_loss(&c);
    float *want = rt_alloc(n);
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t t = 0; t < c.T; t++)
            for (int64_t j = 0; j < c.C; j++)
                want[(b * c.T + t) * c.C + j] = c.in[(b * c.T + t) * c.C + j] + c.wpe[(t + c.off) * c.C + j];
    rt_close("pos_fwd", c.out, want, n, 0, 0);
    gradbuf dwpe = grad_new(np, 7), din = grad_new(n, 8);
    prt_pos_bwd(RT, dwpe.g, din.g, c.r, c.B, c.T, c.C, c.off, 0, 0);
    grad_check("pos_bwd dwpe", pos_loss, &c, c.wpe, dwpe.g, dwpe.g0, np, 1e-2f);
    grad_check("pos_bwd din", pos_loss, &c, c.in, din.g, din.g0, n, 1e-2f);
    grad_free(dwpe); grad_free(din); free(want); free(c.out); free(c.r); free(c.in); free(c.wpe);
}

/* ---------------------------------------------------------------- norms */

typedef struct { float *out, *r, *in, *w, *b, *mean, *rstd; int64_t N, C; int rms; double eps; } norm_ctx;
static double norm_loss(void *p) {
    norm_ctx *c = p;
    if (c->rms) prt_rmsnorm_fwd(RT, c->out, c->rstd, c->in, c->w, c->N, c->C, c->eps, 0);
    else prt_layernorm_fwd(RT, c->out, c->mean, c->rstd, c->in, c->w, c->b, c->N, c->C, c->eps, 0);
    return dot_r(c->out, c->r, c->N * c->C);
}
/* Layer norm with eps 1e-5, RMS norm with 1e-6. */
static void test_norm(int rms, int with_bias) {
    norm_ctx c = {.N = 3, .C = 8, .rms = rms, .eps = rms ? 1e-6 : 1e-5};
    int64_t n = c.N * c.C;
    c.out = rt_alloc(n); c.r = rt_alloc(n); c.in = rt_alloc(n); c.w = rt_alloc(c.C);
    c.b = with_bias ? rt_alloc(c.C) : NULL;
    c.mean = rt_alloc(c.N); c.rstd = rt_alloc(c.N);
    rt_fill(c.r, n, 9, 1); rt_fill(c.in, n, 10, 2); rt_fill(c.w, c.C, 11, 1);
    if (c.b) rt_fill(c.b, c.C, 12, 1);
    norm_loss(&c);
    float *want = rt_alloc(n);
    for (int64_t i = 0; i < c.N; i++) {
        const float *x = c.in + i * c.C;
        double m = 0, v = 0;
        for (int64_t j = 0; j < c.C; j++) m += x[j];
        m = rms ? 0.0 : m / c.C;
        for (int64_t j = 0; j < c.C; j++) v += (x[j] - m) * (x[j] - m);
        double r = 1.0 / sqrt(v / c.C + c.eps);
        for (int64_t j = 0; j < c.C; j++) want[i * c.C + j] = (float)((x[j] - m) * r * c.w[j] + (c.b ? c.b[j] : 0.0));
    }
    const char *name = rms ? "rmsnorm" : with_bias ? "layernorm" : "layernorm(no bias)";
    char what[64];
    snprintf(what, sizeof what, "%s fwd", name);
    rt_close(what, c.out, want, n, 1e-5, 1e-5);
    gradbuf din = grad_new(n, 13), dw = grad_new(c.C, 14), db = grad_new(c.C, 15);
    if (rms) prt_rmsnorm_bwd(RT, din.g, dw.g, c.r, c.in, c.w, c.rstd, c.N, c.C, 0);
    else prt_layernorm_bwd(RT, din.g, dw.g, c.b ? db.g : NULL, c.r, c.in, c.w, c.mean, c.rstd, c.N, c.C, 0);
    snprintf(what, sizeof what, "%s bwd din", name);
    grad_check(what, norm_loss, &c, c.in, din.g, din.g0, n, 1e-2f);
    snprintf(what, sizeof what, "%s bwd dw", name);
    grad_check(what, norm_loss, &c, c.w, dw.g, dw.g0, c.C, 1e-2f);
    if (c.b) grad_check("layernorm bwd db", norm_loss, &c, c.b, db.g, db.g0, c.C, 1e-2f);
    else rt_close("layernorm(no bias) db untouched", db.g, db.g0, c.C, 0, 0);
    grad_free(din); grad_free(dw); grad_free(db);
    free(want); free(c.out); free(c.r); free(c.in); free(c.w); free(c.b); free(c.mean); free(c.rstd);
}

/* The epsilon is the call's: rows whose mean square (about 1e-6) is of its
 * size, normalised with eps 1e-5 and 1e-6, each against the double formula
 * with its own eps (and the two results far apart). */
static void test_norm_eps(void) {
    enum { N = 4, C = 16 };
    float in[N * C], w[C], out[2][N * C], want[N * C], rstd[N], mean[N];
    rt_fill(in, N * C, 16, 2e-3f);
    for (int64_t j = 0; j < C; j++) w[j] = 1.0f;
    for (int rms = 0; rms < 2; rms++) {
        for (int k = 0; k < 2; k++) {
            double eps = k ? 1e-6 : 1e-5;
            if (rms) prt_rmsnorm_fwd(RT, out[k], rstd, in, w, N, C, eps, 0);
            else prt_layernorm_fwd(RT, out[k], mean, rstd, in, w, NULL, N, C, eps, 0);
            for (int64_t i = 0; i < N; i++) {
                double m = 0, v = 0;
                for (int64_t j = 0; j < C; j++) m += in[i * C + j];
                m = rms ? 0.0 : m / C;
                for (int64_t j = 0; j < C; j++) v += (in[i * C + j] - m) * (in[i * C + j] - m);
                for (int64_t j = 0; j < C; j++) want[i * C + j] = (float)((in[i * C + j] - m) / sqrt(v / C + eps));
            }
            char what[64];
            snprintf(what, sizeof what, "%s fwd, eps %g", rms ? "rmsnorm" : "layernorm", eps);
            rt_close(what, out[k], want, N * C, 1e-6, 1e-5);
        }
        double apart = 0;
        for (int64_t i = 0; i < N * C; i++) apart = fmax(apart, fabs((double)out[1][i] - out[0][i]));
        RT_EXPECT(apart > 0.1, "%s: eps 1e-5 and 1e-6 give outputs at most %g apart", rms ? "rmsnorm" : "layernorm",
                  apart);
    }
}

/* ---------------------------------------------------------------- matmul, bias */

typedef struct { float *out, *r, *in, *w; int64_t N, K, M; int transposed; } mm_ctx;
static double mm_loss(void *p) {
    mm_ctx *c = p;
    if (c->transposed) prt_matmul_t_fwd(RT, c->out, c->in, c->w, c->N, c->K, c->M, 0);
    else prt_matmul_fwd(RT, c->out, c->in, c->w, c->N, c->K, c->M, 0);
    return dot_r(c->out, c->r, c->N * c->M);
}
static void test_matmul_t(void) {  /* w[M,K]: the tied head */
    mm_ctx c = {.N = 3, .K = 4, .M = 5, .transposed = 1};
    c.out = rt_alloc(c.N * c.M); c.r = rt_alloc(c.N * c.M); c.in = rt_alloc(c.N * c.K); c.w = rt_alloc(c.M * c.K);
    rt_fill(c.r, c.N * c.M, 116, 1); rt_fill(c.in, c.N * c.K, 117, 1); rt_fill(c.w, c.M * c.K, 118, 1);
    mm_loss(&c);
    float *want = rt_alloc(c.N * c.M);
    for (int64_t i = 0; i < c.N; i++)
        for (int64_t j = 0; j < c.M; j++) {
            double s = 0;
            for (int64_t k = 0; k < c.K; k++) s += (double)c.in[i * c.K + k] * c.w[j * c.K + k];
            want[i * c.M + j] = (float)s;
        }
    rt_close("matmul_t fwd", c.out, want, c.N * c.M, 1e-6, 1e-5);
    gradbuf din = grad_new(c.N * c.K, 119), dw = grad_new(c.M * c.K, 120);
    prt_matmul_t_bwd(RT, din.g, dw.g, c.r, c.in, c.w, c.N, c.K, c.M, 0);
    grad_check("matmul_t bwd din", mm_loss, &c, c.in, din.g, din.g0, c.N * c.K, 1e-2f);
    grad_check("matmul_t bwd dw", mm_loss, &c, c.w, dw.g, dw.g0, c.M * c.K, 1e-2f);
    gradbuf dw2 = grad_new(c.M * c.K, 120);
    prt_matmul_t_bwd(RT, NULL, dw2.g, c.r, c.in, c.w, c.N, c.K, c.M, 0);
    rt_close("matmul_t bwd (din NULL) dw", dw2.g, dw.g, c.M * c.K, 0, 0);
    grad_free(din); grad_free(dw); grad_free(dw2);
    free(want); free(c.out); free(c.r); free(c.in); free(c.w);
}

static void test_matmul(void) {
    mm_ctx c = {.N = 3, .K = 4, .M = 5};
    c.out = rt_alloc(c.N * c.M); c.r = rt_alloc(c.N * c.M); c.in = rt_alloc(c.N * c.K); c.w = rt_alloc(c.K * c.M);
    rt_fill(c.r, c.N * c.M, 16, 1); rt_fill(c.in, c.N * c.K, 17, 1); rt_fill(c.w, c.K * c.M, 18, 1);
    mm_loss(&c);
    float *want = rt_alloc(c.N * c.M);
    for (int64_t i = 0; i < c.N; i++)
        for (int64_t j = 0; j < c.M; j++) {
            double s = 0;
            for (int64_t k = 0; k < c.K; k++) s += (double)c.in[i * c.K + k] * c.w[k * c.M + j];
            want[i * c.M + j] = (float)s;
        }
    rt_close("matmul fwd", c.out, want, c.N * c.M, 1e-6, 1e-5);
    gradbuf din = grad_new(c.N * c.K, 19), dw = grad_new(c.K * c.M, 20);
    prt_matmul_bwd(RT, din.g, dw.g, c.r, c.in, c.w, c.N, c.K, c.M, 0);
    grad_check("matmul bwd din", mm_loss, &c, c.in, din.g, din.g0, c.N * c.K, 1e-2f);
    grad_check("matmul bwd dw", mm_loss, &c, c.w, dw.g, dw.g0, c.K * c.M, 1e-2f);
    /* din == NULL: only dw accumulates */
    gradbuf dw2 = grad_new(c.K * c.M, 20);
    prt_matmul_bwd(RT, NULL, dw2.g, c.r, c.in, c.w, c.N, c.K, c.M, 0);
    rt_close("matmul bwd (din NULL) dw", dw2.g, dw.g, c.K * c.M, 0, 0);
    grad_free(din); grad_free(dw); grad_free(dw2);
    free(want); free(c.out); free(c.r); free(c.in); free(c.w);
}

/* matmul_bias_*: the linear with its bias folded in, against the double sum
 * and against matmul + bias as two calls (a large shape too, so the GEMM
 * blocks K and adds onto the bias row in pieces). */
typedef struct { float *out, *r, *in, *w, *b; int64_t N, K, M; } mmb_ctx;
static double mmb_loss(void *p) {
    mmb_ctx *c = p;
    prt_matmul_bias_fwd(RT, c->out, c->in, c->w, c->b, c->N, c->K, c->M, 0);
    return dot_r(c->out, c->r, c->N * c->M);
}
static void test_matmul_bias(int64_t N, int64_t K, int64_t M) {
    mmb_ctx c = {.N = N, .K = K, .M = M};
    c.out = rt_alloc(N * M); c.r = rt_alloc(N * M); c.in = rt_alloc(N * K); c.w = rt_alloc(K * M); c.b = rt_alloc(M);
    rt_fill(c.r, N * M, 31, 1); rt_fill(c.in, N * K, 32, 1); rt_fill(c.w, K * M, 33, 1); rt_fill(c.b, M, 34, 1);
    mmb_loss(&c);
    float *want = rt_alloc(N * M), *two = rt_alloc(N * M);
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < M; j++) {
            double s = c.b[j];
            for (int64_t k = 0; k < K; k++) s += (double)c.in[i * K + k] * c.w[k * M + j];
            want[i * M + j] = (float)s;
        }
    char what[96];
    snprintf(what, sizeof what, "matmul_bias fwd %lldx%lldx%lld", (long long)N, (long long)K, (long long)M);
    rt_close(what, c.out, want, N * M, 1e-5, 1e-5);
    prt_matmul_fwd(RT, two, c.in, c.w, N, K, M, 0);
    prt_bias_fwd(RT, two, two, c.b, N, M, 0);
    snprintf(what, sizeof what, "matmul_bias fwd = matmul + bias %lldx%lldx%lld", (long long)N, (long long)K,
             (long long)M);
    rt_close(what, c.out, two, N * M, 1e-5, 1e-5);
    gradbuf din = grad_new(N * K, 35), dw = grad_new(K * M, 36), db = grad_new(M, 37);
    prt_matmul_bias_bwd(RT, din.g, dw.g, c.r, c.in, c.w, db.g, N, K, M, 0);
    if (N * K * M <= 1000) {  /* finite differences on the small shape */
        grad_check("matmul_bias bwd din", mmb_loss, &c, c.in, din.g, din.g0, N * K, 1e-2f);
        grad_check("matmul_bias bwd dw", mmb_loss, &c, c.w, dw.g, dw.g0, K * M, 1e-2f);
        grad_check("matmul_bias bwd db", mmb_loss, &c, c.b, db.g, db.g0, M, 1e-2f);
    }
    /* the same gradients as matmul_bwd + bias_bwd; db NULL leaves the rest alone */
    gradbuf din2 = grad_new(N * K, 35), dw2 = grad_new(K * M, 36), db2 = grad_new(M, 37);
    prt_matmul_bwd(RT, din2.g, dw2.g, c.r, c.in, c.w, N, K, M, 0);
    prt_bias_bwd(RT, db2.g, c.r, N, M, 0);
    rt_close("matmul_bias bwd din = matmul_bwd's", din.g, din2.g, N * K, 0, 0);
    rt_close("matmul_bias bwd dw = matmul_bwd's", dw.g, dw2.g, K * M, 0, 0);
    rt_close("matmul_bias bwd db = bias_bwd's", db.g, db2.g, M, 0, 0);
    gradbuf din3 = grad_new(N * K, 35);
    prt_matmul_bias_bwd(RT, din3.g, NULL, c.r, c.in, c.w, NULL, N, K, M, 0);
    rt_close("matmul_bias bwd (dw, db NULL) din", din3.g, din.g, N * K, 0, 0);
    grad_free(din); grad_free(dw); grad_free(db); grad_free(din2); grad_free(dw2); grad_free(db2); grad_free(din3);
    free(want); free(two); free(c.out); free(c.r); free(c.in); free(c.w); free(c.b);
}

typedef struct { float *out, *r, *in, *b; int64_t N, M; } bias_ctx;
static double bias_loss(void *p) {
    bias_ctx *c = p;
    prt_bias_fwd(RT, c->out, c->in, c->b, c->N, c->M, 0);
    return dot_r(c->out, c->r, c->N * c->M);
}
static void test_bias(void) {
    bias_ctx c = {.N = 3, .M = 5};
    c.out = rt_alloc(15); c.r = rt_alloc(15); c.in = rt_alloc(15); c.b = rt_alloc(5);
    rt_fill(c.r, 15, 21, 1); rt_fill(c.in, 15, 22, 1); rt_fill(c.b, 5, 23, 1);
    bias_loss(&c);
    float want[15];
    for (int i = 0; i < 15; i++) want[i] = c.in[i] + c.b[i % 5];
    rt_close("bias fwd", c.out, want, 15, 0, 0);
    float inplace[15];
    memcpy(inplace, c.in, sizeof inplace);
    prt_bias_fwd(RT, inplace, inplace, c.b, 3, 5, 0);
    rt_close("bias fwd in place", inplace, want, 15, 0, 0);
    gradbuf db = grad_new(5, 24);
    prt_bias_bwd(RT, db.g, c.r, c.N, c.M, 0);
    grad_check("bias bwd db", bias_loss, &c, c.b, db.g, db.g0, 5, 1e-2f);
    grad_free(db); free(c.out); free(c.r); free(c.in); free(c.b);
}

/* ---------------------------------------------------------------- activations */

typedef struct { float *out, *r, *in; int64_t n, F; int kind; } act_ctx;  /* kind: 0 gelu, 1 relu, 2 swiglu */
static double act_loss(void *p) {
    act_ctx *c = p;
    int64_t nout = c->kind == 2 ? c->n * c->F : c->n;
    if (c->kind == 0) prt_gelu_fwd(RT, c->out, c->in, c->n, 0);
    else if (c->kind == 1) prt_relu_fwd(RT, c->out, c->in, c->n, 0);
    else prt_swiglu_fwd(RT, c->out, c->in, c->n, c->F, 0);
    return dot_r(c->out, c->r, nout);
}
static void test_activation(int kind) {
    act_ctx c = {.n = kind == 2 ? 3 : 24, .F = 4, .kind = kind};
    int64_t nin = kind == 2 ? c.n * 2 * c.F : c.n, nout = kind == 2 ? c.n * c.F : c.n;
    c.out = rt_alloc(nout); c.r = rt_alloc(nout); c.in = rt_alloc(nin);
    rt_fill(c.r, nout, 25, 1); rt_fill(c.in, nin, 26 + kind, 3);
    if (kind == 1)  /* keep relu inputs away from the kink */
        for (int64_t i = 0; i < nin; i++) c.in[i] += c.in[i] >= 0 ? 0.1f : -0.1f;
    act_loss(&c);
    float *want = rt_alloc(nout);
    for (int64_t i = 0; i < nout; i++) {
        if (kind == 0) {
            double x = c.in[i];
            want[i] = (float)(0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))));
        } else if (kind == 1) {
            want[i] = c.in[i] > 0 ? c.in[i] : 0.0f;
        } else {
            int64_t row = i / c.F, f = i % c.F;
            double g = c.in[row * 2 * c.F + f], u = c.in[row * 2 * c.F + c.F + f];
            want[i] = (float)(g / (1.0 + exp(-g)) * u);
        }
    }
    const char *name = kind == 0 ? "gelu" : kind == 1 ? "relu" : "swiglu";
    char what[64];
    snprintf(what, sizeof what, "%s fwd", name);
    rt_close(what, c.out, want, nout, 1e-6, 1e-5);
    gradbuf din = grad_new(nin, 30 + kind);
    if (kind == 0) prt_gelu_bwd(RT, din.g, c.in, c.r, c.n, 0);
    else if (kind == 1) prt_relu_bwd(RT, din.g, c.in, c.r, c.n, 0);
    else prt_swiglu_bwd(RT, din.g, c.in, c.r, c.n, c.F, 0);
    snprintf(what, sizeof what, "%s bwd din", name);
    grad_check(what, act_loss, &c, c.in, din.g, din.g0, nin, 1e-2f);
    grad_free(din); free(want); free(c.out); free(c.r); free(c.in);
}

static void test_add(void) {
    float a[9], b[9], out[9], want[9];
    rt_fill(a, 9, 40, 1); rt_fill(b, 9, 41, 1);
    for (int i = 0; i < 9; i++) want[i] = a[i] + b[i];
    prt_add_fwd(RT, out, a, b, 9, 0);
    rt_close("add fwd", out, want, 9, 0, 0);
    float acc[9];
    memcpy(acc, a, sizeof acc);
    prt_acc(RT, acc, b, 9, 0);
    rt_close("acc", acc, want, 9, 0, 0);
    prt_copy(RT, acc, a, 9, 0);
    rt_close("copy", acc, a, 9, 0, 0);
    prt_zero(RT, acc, 9, 0);
    float zeros[9] = {0};
    rt_close("zero", acc, zeros, 9, 0, 0);
}

/* ---------------------------------------------------------------- rotary position embedding */

typedef struct { float *out, *r, *in; int64_t B, T, G, U, R, HD, off; double theta, factor; } rope_ctx;
static double rope_loss(void *p) {
    rope_ctx *c = p;
    prt_rope_fwd(RT, c->out, c->in, c->B, c->T, c->G, c->U, c->R, c->HD, c->off, 0, c->theta, c->factor, 1, 4, 8192, 0);
    return dot_r(c->out, c->r, c->B * c->T * c->G * c->U * c->HD);
}
/* Llama 3.1's inverse frequency of pair i in double, from its definition
 * (factor 0: none). */
static double rope_freq_ref(int64_t i, int64_t HD, double theta, double factor, double low, double high,
                            double original) {
    double f = 1.0 / pow(theta, 2.0 * (double)i / (double)HD), w = 2 * M_PI / f;
    if (!(factor > 0) || w < original / high) return f;
    if (w > original / low) return f / factor;
    double s = (original / w - low) / (high - low);
    return (1 - s) * f / factor + s * f;
}
/* The closed form of parc_rt.h's rope_fwd in double: for a grouped layout
 * (G groups of U heads, R rotated) and for a plain qkv (G 1, U 3 x 2 heads, R
 * 4), without and with Llama 3.1's scaling, at a position offset; the backward
 * (adding into a prefilled din) by finite differences; the whole sequence
 * against its two halves, the second at t_offset T/2, bit for bit; the
 * frequencies of the three bands of Llama 3.1's scaling against the double
 * reference; and the rotation's relative-position property: <rope(q, m),
 * rope(k, n)> is a function of m - n. */
static void test_rope(void) {
    const struct { int64_t G, U, R, HD, off; double theta, factor; } cases[] = {
        {2, 4, 3, 8, 0, 10000, 0}, {1, 6, 4, 6, 5, 500000, 0}, {2, 3, 2, 16, 3, 500000, 8}};
    for (int k = 0; k < 3; k++) {
        rope_ctx c = {.B = 2, .T = 5, .G = cases[k].G, .U = cases[k].U, .R = cases[k].R, .HD = cases[k].HD,
                      .off = cases[k].off, .theta = cases[k].theta, .factor = cases[k].factor};
        int64_t n = c.B * c.T * c.G * c.U * c.HD, half = c.HD / 2;
        c.out = rt_alloc(n); c.r = rt_alloc(n); c.in = rt_alloc(n);
        rt_fill(c.r, n, 60 + k, 1); rt_fill(c.in, n, 63 + k, 1.5f);
        rope_loss(&c);
        float *want = rt_alloc(n);
        for (int64_t row = 0; row < c.B * c.T; row++)
            for (int64_t h = 0; h < c.G * c.U; h++)
                for (int64_t i = 0; i < half; i++) {
                    /* theta 500000 and an original context of 8192 put HD 16's pairs in all three bands */
                    double a = (double)(c.off + row % c.T) * rope_freq_ref(i, c.HD, c.theta, c.factor, 1, 4, 8192);
                    int64_t e = (row * c.G * c.U + h) * c.HD + i;
                    double x1 = c.in[e], x2 = c.in[e + half], rot = h % c.U < c.R;
                    want[e] = (float)(rot ? x1 * cos(a) - x2 * sin(a) : x1);
                    want[e + half] = (float)(rot ? x2 * cos(a) + x1 * sin(a) : x2);
                }
        char what[96];
        snprintf(what, sizeof what, "rope fwd (G %lld U %lld R %lld HD %lld factor %g)", (long long)c.G, (long long)c.U,
                 (long long)c.R, (long long)c.HD, c.factor);
        rt_close(what, c.out, want, n, 1e-6, 1e-5);
        gradbuf din = grad_new(n, 66 + k);
        prt_rope_bwd(RT, din.g, c.r, c.B, c.T, c.G, c.U, c.R, c.HD, c.off, 0, c.theta, c.factor, 1, 4, 8192, 0);
        snprintf(what, sizeof what, "rope bwd din (G %lld U %lld R %lld)", (long long)c.G, (long long)c.U,
                 (long long)c.R);
        grad_check(what, rope_loss, &c, c.in, din.g, din.g0, n, 1e-2f);
        /* the second half of the sequence alone, at its offset: the same bits */
        rope_loss(&c);  /* out of the unperturbed input again */
        int64_t T2 = c.T / 2 + 1, row_len = c.G * c.U * c.HD;
        float *part_in = rt_alloc(c.B * T2 * row_len), *part_out = rt_alloc(c.B * T2 * row_len),
              *part_want = rt_alloc(c.B * T2 * row_len);
        for (int64_t b = 0; b < c.B; b++) {
            memcpy(part_in + b * T2 * row_len, c.in + (b * c.T + c.T - T2) * row_len, (size_t)(T2 * row_len) * 4);
            memcpy(part_want + b * T2 * row_len, c.out + (b * c.T + c.T - T2) * row_len, (size_t)(T2 * row_len) * 4);
        }
        prt_rope_fwd(RT, part_out, part_in, c.B, T2, c.G, c.U, c.R, c.HD, c.off + c.T - T2, 0, c.theta, c.factor, 1, 4,
                     8192, 0);
        rt_close("rope fwd of a sequence split at its offset", part_out, part_want, c.B * T2 * row_len, 0, 0);
        free(part_in); free(part_out); free(part_want);
        grad_free(din); free(want); free(c.out); free(c.r); free(c.in);
    }
    /* Llama 3.1's published scaling on a head of 128 dims, theta 500000:
     * every band occurs, and each frequency is the double reference's */
    int bands[3] = {0, 0, 0};
    float got[64], ref[64];
    for (int64_t i = 0; i < 64; i++) {
        got[i] = prt_rope_inv_freq(i, 128, 500000, 8, 1, 4, 8192);
        ref[i] = (float)rope_freq_ref(i, 128, 500000, 8, 1, 4, 8192);
        double w = 2 * M_PI / rope_freq_ref(i, 128, 500000, 0, 1, 4, 8192);
        bands[w < 2048 ? 0 : w > 8192 ? 2 : 1]++;
    }
    rt_close("rope llama3 inverse frequencies", got, ref, 64, 0, 1e-6);
    RT_EXPECT(bands[0] > 0 && bands[1] > 0 && bands[2] > 0, "llama3 bands (kept, blended, divided): %d %d %d",
              bands[0], bands[1], bands[2]);
    /* relative position: q at m, k at n, one head pair each (G 1, U 2, R 2) */
    enum { HD = 8, T = 12 };
    float x[T * 2 * HD], y[T * 2 * HD];
    for (int64_t t = 0; t < T; t++) rt_fill(x + t * 2 * HD, 2 * HD, 70, 1);  /* the same q and k at every position */
    prt_rope_fwd(RT, y, x, 1, T, 1, 2, 2, HD, 0, 0, 10000, 0, 1, 4, 8192, 0);
    for (int64_t d = 0; d < 4; d++) {
        float base[T], shifted[T];
        for (int64_t m = 0; m + d + 4 < T; m++) {
            double s0 = 0, s1 = 0;
            for (int64_t i = 0; i < HD; i++) {
                s0 += (double)y[(m + d) * 2 * HD + i] * y[m * 2 * HD + HD + i];          /* q at m + d, k at m */
                s1 += (double)y[(m + d + 4) * 2 * HD + i] * y[(m + 4) * 2 * HD + HD + i]; /* both 4 later */
            }
            base[m] = (float)s0, shifted[m] = (float)s1;
        }
        rt_close("rope relative position: q.k depends on m - n", shifted, base, T - d - 4, 1e-5, 1e-5);
    }
}

/* ---------------------------------------------------------------- attention */

typedef struct { float *out, *r, *qkv, *probs; int64_t B, T, NH, KV, HD, causal; int save; } att_ctx;
/* Column of q (which 0), k (1) or v (2) of head h in a qkv row (parc_rt.h
 * attention_fwd): [3, NH, HD] when KV == NH, else [KV, NH / KV + 2, HD]. */
static int64_t att_col(int64_t NH, int64_t KV, int64_t HD, int which, int64_t h) {
    if (KV == NH) return (which * NH + h) * HD;
    int64_t G = NH / KV;
    return ((h / G) * (G + 2) + (which == 0 ? h % G : G + which - 1)) * HD;
}
static double att_loss(void *p) {
    att_ctx *c = p;
    prt_attention_fwd(RT, c->out, c->save ? c->probs : NULL, c->qkv, c->B, c->T, c->NH, c->KV, c->HD, c->causal, c->T, 0, 0);
    return dot_r(c->out, c->r, c->B * c->T * c->NH * c->HD);
}
/* Forward against the formula, backward by finite differences; KV < NH: the
 * grouped layout (a group's k and v collect the gradients of its G heads). */
static void test_attention(int64_t causal, int save, int64_t NH, int64_t KV) {
    att_ctx c = {.B = 2, .T = 5, .NH = NH, .KV = KV, .HD = 3, .causal = causal, .save = save};
    int64_t C = c.NH * c.HD, W = (c.NH + 2 * c.KV) * c.HD, nq = c.B * c.T * W, no = c.B * c.T * C;
    c.out = rt_alloc(no); c.r = rt_alloc(no); c.qkv = rt_alloc(nq); c.probs = rt_alloc(c.B * c.NH * c.T * c.T);
    rt_fill(c.r, no, 42, 1); rt_fill(c.qkv, nq, 43, 1.5f);
    att_loss(&c);
    float *want = rt_alloc(no);
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t h = 0; h < c.NH; h++)
            for (int64_t t = 0; t < c.T; t++) {
                double s[16], m = -1e300, z = 0;
                int64_t last = causal ? t : c.T - 1;
                int64_t qc = att_col(NH, KV, c.HD, 0, h), kc = att_col(NH, KV, c.HD, 1, h), vc = att_col(NH, KV, c.HD, 2, h);
                const float *q = c.qkv + (b * c.T + t) * W + qc;
                for (int64_t j = 0; j <= last; j++) {
                    const float *k = c.qkv + (b * c.T + j) * W + kc;
                    double d = 0;
                    for (int64_t e = 0; e < c.HD; e++) d += (double)q[e] * k[e];
                    s[j] = d / sqrt((double)c.HD);
                    if (s[j] > m) m = s[j];
                }
                for (int64_t j = 0; j <= last; j++) z += (s[j] = exp(s[j] - m));
                for (int64_t e = 0; e < c.HD; e++) {
                    double o = 0;
                    for (int64_t j = 0; j <= last; j++) o += s[j] / z * c.qkv[(b * c.T + j) * W + vc + e];
                    want[(b * c.T + t) * C + h * c.HD + e] = (float)o;
                }
            }
    char what[96];
    snprintf(what, sizeof what, "attention(causal=%lld, probs %s, NH %lld, KV %lld) fwd", (long long)causal,
             save ? "saved" : "recomputed", (long long)NH, (long long)KV);
    rt_close(what, c.out, want, no, 1e-5, 1e-4);
    gradbuf d = grad_new(nq, 44);
    prt_attention_bwd(RT, d.g, c.r, c.qkv, save ? c.probs : NULL, c.B, c.T, c.NH, c.KV, c.HD, causal, c.T, 0, 0);
    snprintf(what, sizeof what, "attention(causal=%lld, probs %s, NH %lld, KV %lld) bwd dqkv", (long long)causal,
             save ? "saved" : "recomputed", (long long)NH, (long long)KV);
    grad_check(what, att_loss, &c, c.qkv, d.g, d.g0, nq, 1e-2f);
    grad_free(d); free(want); free(c.out); free(c.r); free(c.qkv); free(c.probs);
}

/* The grouped layout against the plain one with k and v repeated per query
 * head: the same output, and dq equal, a group's dk and dv the sums of the
 * repeated heads' — kept and recomputed probabilities, with and without
 * dropout, and the key-blocked backward (T above the block sizes). */
static void test_attention_grouped(void) {
    const int64_t B = 2, T = 70, NH = 6, KV = 2, G = NH / KV, HD = 8;
    int64_t W = (NH + 2 * KV) * HD, C = NH * HD, ng = B * T * W, nr = B * T * 3 * C, no = B * T * C;
    float *qg = rt_alloc(ng), *qr = rt_alloc(nr), *dout = rt_alloc(no), *probs = rt_alloc(B * NH * T * T);
    float *og = rt_alloc(no), *orp = rt_alloc(no), *dg = rt_alloc(ng), *dr = rt_alloc(nr), *sum = rt_alloc(ng);
    rt_fill(qg, ng, 61, 1); rt_fill(dout, no, 62, 1);
    for (int64_t n = 0; n < B * T; n++)
        for (int w = 0; w < 3; w++)
            for (int64_t h = 0; h < NH; h++)
                memcpy(qr + n * 3 * C + att_col(NH, NH, HD, w, h), qg + n * W + att_col(NH, KV, HD, w, h),
                       sizeof(float) * (size_t)HD);
    for (int drop = 0; drop < 2; drop++)
        for (int save = 0; save < 2; save++)
            for (int kb = 0; kb < 2 - save; kb++) {
                prt_att_dropout dd = prt_cpu_attention_dropout(RT, 3, 1, NH + 2, NH, 7, 1, 0.2);
                char what[96];
                snprintf(what, sizeof what, "grouped attention (dropout %d, probs %s%s)", drop, save ? "kept" : "recomputed",
                         kb ? ", key-blocked" : "");
                memset(dg, 0, sizeof(float) * (size_t)ng), memset(dr, 0, sizeof(float) * (size_t)nr);
                for (int layout = 0; layout < 2; layout++) {
                    float *q = layout ? qr : qg, *o = layout ? orp : og, *g = layout ? dr : dg;
                    int64_t kv = layout ? NH : KV;
                    if (drop) {
                        prt_attention_dropout_fwd(RT, o, save ? probs : NULL, q, B, T, NH, kv, HD, 1, 3, 1, NH + 2, 7, 1, 0.2, 0);
                        if (kb) prt_cpu_attention_keyblocked_bwd(RT, g, dout, q, B, T, NH, kv, HD, 1, &dd, 0);
                        else prt_attention_dropout_bwd(RT, g, dout, q, save ? probs : NULL, B, T, NH, kv, HD, 1, 3, 1, NH + 2, 7, 1, 0.2, 0);
                    } else {
                        prt_attention_fwd(RT, o, save ? probs : NULL, q, B, T, NH, kv, HD, 1, T, 0, 0);
                        if (kb) prt_cpu_attention_keyblocked_bwd(RT, g, dout, q, B, T, NH, kv, HD, 1, NULL, 0);
                        else prt_attention_bwd(RT, g, dout, q, save ? probs : NULL, B, T, NH, kv, HD, 1, T, 0, 0);
                    }
                }
                rt_close(what, og, orp, no, 1e-5, 1e-5);
                memset(sum, 0, sizeof(float) * (size_t)ng);
                for (int64_t n = 0; n < B * T; n++)
                    for (int w = 0; w < 3; w++)
                        for (int64_t h = 0; h < NH; h++)
                            for (int64_t e = 0; e < HD; e++)
                                sum[n * W + att_col(NH, KV, HD, w, h) + e] += dr[n * 3 * C + att_col(NH, NH, HD, w, h) + e];
                (void)G;
                rt_close(what, dg, sum, ng, 1e-5, 1e-4);
                /* the first writer's form (PRT_ARG_WRITE on dqkv): the same gradient over stale contents (the
                 * kept probabilities, last written by the plain layout's forward, are the grouped one's) */
                float *dw = rt_alloc(ng);
                rt_fill(dw, ng, 63, 5);
                int64_t wr = PRT_ARG_WRITE;
                if (kb) prt_cpu_attention_keyblocked_bwd(RT, dw, dout, qg, B, T, NH, KV, HD, 1, drop ? &dd : NULL, wr);
                else if (drop)
                    prt_attention_dropout_bwd(RT, dw, dout, qg, save ? probs : NULL, B, T, NH, KV, HD, 1, 3, 1, NH + 2, 7, 1, 0.2, wr);
                else prt_attention_bwd(RT, dw, dout, qg, save ? probs : NULL, B, T, NH, KV, HD, 1, T, 0, wr);
                rt_close(what, dw, dg, ng, 0, 0);
                free(dw);
            }
    free(qg); free(qr); free(dout); free(probs); free(og); free(orp); free(dg); free(dr); free(sum);
}

/* ---------------------------------------------------------------- dropout */

typedef struct { float *out, *r, *in; uint8_t *mask; int64_t B, T, C; double p; } drop_ctx;
static double drop_loss(void *p) {
    drop_ctx *c = p;
    prt_dropout_fwd(RT, c->out, c->mask, c->in, c->B, c->T, c->C, 0, 0, c->T, 7, 3, 1, c->p, PRT_ARG_DTYPES(PRT_F32, PRT_U8));
    return dot_r(c->out, c->r, c->B * c->T * c->C);
}
/* Forward: kept elements scaled by 1/(1 - p), the mask prt_dropout_keep of the
 * global index, about p of them dropped, and a block of the tensor (later
 * samples, a sequence window) drawing exactly the whole call's mask there;
 * another step, layer or site draws another mask.  Backward by finite
 * differences (with the mask fixed, the op is linear). */
static void test_dropout(void) {
    drop_ctx c = {.B = 4, .T = 8, .C = 16, .p = 0.25};
    int64_t n = c.B * c.T * c.C;
    c.out = rt_alloc(n); c.r = rt_alloc(n); c.in = rt_alloc(n); c.mask = calloc((size_t)n, 1);
    rt_fill(c.r, n, 51, 1); rt_fill(c.in, n, 52, 1);
    drop_loss(&c);
    float *want = rt_alloc(n);
    uint64_t key = prt_dropout_key(RT->plan.seed, 7, 3, 1);
    int64_t dropped = 0, bad_mask = 0;
    for (int64_t i = 0; i < n; i++) {
        int keep = prt_dropout_keep(key, (uint64_t)i, prt_dropout_threshold(c.p));
        want[i] = keep ? c.in[i] * (float)(1.0 / (1.0 - c.p)) : 0.0f;
        dropped += !keep;
        bad_mask += c.mask[i] != keep;
    }
    rt_close("dropout fwd", c.out, want, n, 0, 0);
    RT_EXPECT(bad_mask == 0, "dropout fwd: %lld mask bytes differ from prt_dropout_keep", (long long)bad_mask);
    RT_EXPECT(dropped > n / 8 && dropped < 3 * n / 8, "dropout p = 0.25 dropped %lld of %lld", (long long)dropped,
              (long long)n);
    /* samples 1..2, positions 3..6 of the same [4, 8, 16] tensor */
    int64_t nb = 2 * 4 * c.C, bad_block = 0;
    float *bin = rt_alloc(nb), *bout = rt_alloc(nb);
    uint8_t *bmask = calloc((size_t)nb, 1);
    for (int64_t b = 0; b < 2; b++)
        for (int64_t t = 0; t < 4; t++)
            memcpy(bin + (b * 4 + t) * c.C, c.in + ((1 + b) * c.T + 3 + t) * c.C, (size_t)c.C * sizeof(float));
    prt_dropout_fwd(RT, bout, bmask, bin, 2, 4, c.C, 1, 3, c.T, 7, 3, 1, c.p, PRT_ARG_DTYPES(PRT_F32, PRT_U8));
    for (int64_t b = 0; b < 2; b++)
        for (int64_t t = 0; t < 4; t++)
            for (int64_t k = 0; k < c.C; k++)
                bad_block += bout[(b * 4 + t) * c.C + k] != c.out[((1 + b) * c.T + 3 + t) * c.C + k];
    RT_EXPECT(bad_block == 0, "dropout: a block of the tensor differs from the whole call in %lld elements",
              (long long)bad_block);
    int64_t same = 0;
    prt_dropout_fwd(RT, bout, bmask, bin, 2, 4, c.C, 1, 3, c.T, 8, 3, 1, c.p, PRT_ARG_DTYPES(PRT_F32, PRT_U8)); /* step 8 */
    for (int64_t b = 0; b < 2; b++)
        for (int64_t t = 0; t < 4; t++)
            for (int64_t k = 0; k < c.C; k++)
                same += bout[(b * 4 + t) * c.C + k] == c.out[((1 + b) * c.T + 3 + t) * c.C + k];
    RT_EXPECT(same < nb, "dropout: step 8 drew step 7's mask");
    gradbuf d = grad_new(n, 53);
    prt_dropout_bwd(RT, d.g, c.mask, c.r, n, c.p, PRT_ARG_DTYPES(PRT_F32, PRT_U8));
    grad_check("dropout bwd din", drop_loss, &c, c.in, d.g, d.g0, n, 1e-2f);
    grad_free(d); free(want); free(bin); free(bout); free(bmask); free(c.out); free(c.r); free(c.in); free(c.mask);
}

typedef struct { float *out, *r, *qkv, *probs; int64_t B, T, NH, HD, first, h0, NHg; double p; int save; } attd_ctx;
static double attd_loss(void *p) {
    attd_ctx *c = p;
    prt_attention_dropout_fwd(RT, c->out, c->save ? c->probs : NULL, c->qkv, c->B, c->T, c->NH, c->NH, c->HD, 1, c->first,
                              c->h0, c->NHg, 5, 2, c->p, 0);
    return dot_r(c->out, c->r, c->B * c->T * c->NH * c->HD);
}
/* Attention with dropout on its probabilities: p = 0 is attention itself; the
 * backward (probabilities kept or recomputed, the mask regenerated) against
 * finite differences; one head of one sample, placed by first_sample and
 * h_offset, draws the whole call's mask there. */
static void test_attention_dropout(int save) {
    attd_ctx c = {.B = 2, .T = 6, .NH = 2, .HD = 3, .first = 0, .h0 = 0, .NHg = 2, .p = 0.3, .save = save};
    int64_t C = c.NH * c.HD, nq = c.B * c.T * 3 * C, no = c.B * c.T * C;
    c.out = rt_alloc(no); c.r = rt_alloc(no); c.qkv = rt_alloc(nq); c.probs = rt_alloc(c.B * c.NH * c.T * c.T);
    rt_fill(c.r, no, 54, 1); rt_fill(c.qkv, nq, 55, 1.5f);
    float *plain = rt_alloc(no);
    prt_attention_fwd(RT, plain, save ? c.probs : NULL, c.qkv, c.B, c.T, c.NH, c.NH, c.HD, 1, c.T, 0, 0); /* the same kernel */
    c.p = 0;
    attd_loss(&c);
    rt_close("attention dropout p = 0 fwd", c.out, plain, no, 0, 0);
    c.p = 0.3;
    attd_loss(&c);
    int64_t differ = 0;
    for (int64_t i = 0; i < no; i++) differ += c.out[i] != plain[i];
    RT_EXPECT(differ > 0, "attention dropout p = 0.3: the output equals attention's");
    /* sample 1, head 1 alone: qkv[1, T, 3, 1 head, HD] */
    int64_t nq1 = c.T * 3 * c.HD, no1 = c.T * c.HD, bad = 0;
    float *q1 = rt_alloc(nq1), *o1 = rt_alloc(no1), *p1 = rt_alloc(c.T * c.T);
    for (int64_t t = 0; t < c.T; t++)
        for (int64_t w = 0; w < 3; w++)
            memcpy(q1 + (t * 3 + w) * c.HD, c.qkv + ((1 * c.T + t) * 3 + w) * C + 1 * c.HD, (size_t)c.HD * sizeof(float));
    prt_attention_dropout_fwd(RT, o1, save ? p1 : NULL, q1, 1, c.T, 1, 1, c.HD, 1, 1, 1, 2, 5, 2, c.p, 0);
    for (int64_t t = 0; t < c.T; t++)
        for (int64_t e = 0; e < c.HD; e++) bad += o1[t * c.HD + e] != c.out[(1 * c.T + t) * C + 1 * c.HD + e];
    RT_EXPECT(bad == 0, "attention dropout: sample 1 head 1 alone differs in %lld elements", (long long)bad);
    gradbuf d = grad_new(nq, 56);
    prt_attention_dropout_bwd(RT, d.g, c.r, c.qkv, save ? c.probs : NULL, c.B, c.T, c.NH, c.NH, c.HD, 1, c.first, c.h0,
                              c.NHg, 5, 2, c.p, 0);
    grad_check(save ? "attention dropout (probs saved) bwd dqkv" : "attention dropout (probs recomputed) bwd dqkv",
               attd_loss, &c, c.qkv, d.g, d.g0, nq, 1e-2f);
    grad_free(d); free(plain); free(q1); free(o1); free(p1); free(c.out); free(c.r); free(c.qkv); free(c.probs);
}

/* ---------------------------------------------------------------- cross-entropy */

typedef struct { float *logits, *stats; int32_t *targets; int64_t N, V; double scale; } xent_ctx;
static double xent_loss(void *p) {
    xent_ctx *c = p;
    float loss = 0.0f;
    prt_xent_fwd(RT, &loss, c->stats, c->logits, c->targets, c->N, c->V, 0, -1, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    return c->scale * loss;
}
static void test_xent(void) {
    xent_ctx c = {.N = 4, .V = 7, .scale = 0.25};
    int32_t targets[4] = {0, 6, 3, 3};
    c.targets = targets;
    c.logits = rt_alloc(c.N * c.V); c.stats = rt_alloc(2 * c.N);
    rt_fill(c.logits, c.N * c.V, 45, 3);
    float loss = 1.5f;  /* accumulates */
    prt_xent_fwd(RT, &loss, c.stats, c.logits, targets, c.N, c.V, 0, -1, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    double want = 1.5;
    for (int64_t n = 0; n < c.N; n++) {
        double z = 0;
        for (int64_t j = 0; j < c.V; j++) z += exp((double)c.logits[n * c.V + j]);
        want += log(z) - c.logits[n * c.V + targets[n]];
    }
    float got = loss, wantf = (float)want;
    rt_close("xent fwd loss_sum", &got, &wantf, 1, 1e-5, 1e-6);
    gradbuf d = grad_new(c.N * c.V, 46);
    prt_xent_bwd(RT, d.g, c.logits, c.stats, targets, c.N, c.V, 0, c.scale, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    grad_check("xent bwd dlogits", xent_loss, &c, c.logits, d.g, d.g0, c.N * c.V, 1e-2f);
    grad_free(d); free(c.logits); free(c.stats);
}

/* ---------------------------------------------------------------- optimizers */

static void test_optimizers(void) {
    enum { N = 10, STEPS = 3 };
    for (int with_master = 0; with_master < 2; with_master++) {
        float p[N], master[N], m[N] = {0}, v[N] = {0}, g[N];
        double pr[N], mr[N] = {0}, vr[N] = {0};
        rt_fill(p, N, 50, 1);
        memcpy(master, p, sizeof p);
        for (int i = 0; i < N; i++) pr[i] = p[i];
        double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
        for (int s = 1; s <= STEPS; s++) {
            rt_fill(g, N, 60 + (uint64_t)s, 1);
            prt_adamw(RT, p, with_master ? master : NULL, g, m, v, N, s, lr, b1, b2, eps, wd, 0);
            for (int i = 0; i < N; i++) {
                mr[i] = b1 * mr[i] + (1 - b1) * g[i];
                vr[i] = b2 * vr[i] + (1 - b2) * (double)g[i] * g[i];
                double mh = mr[i] / (1 - pow(b1, s)), vh = vr[i] / (1 - pow(b2, s));
                pr[i] -= lr * (mh / (sqrt(vh) + eps) + wd * pr[i]);
            }
        }
        float want[N];
        for (int i = 0; i < N; i++) want[i] = (float)pr[i];
        rt_close(with_master ? "adamw (master) param" : "adamw param", p, want, N, 1e-6, 1e-5);
        if (with_master) rt_close("adamw master", master, want, N, 1e-6, 1e-5);
    }
    for (int with_master = 0; with_master < 2; with_master++) {
        float p[N], master[N], mom[N] = {0}, g[N];
        double pr[N], br[N] = {0};
        rt_fill(p, N, 70, 1);
        memcpy(master, p, sizeof p);
        for (int i = 0; i < N; i++) pr[i] = p[i];
        double lr = 0.1, mu = 0.9, wd = 0.01;
        for (int s = 1; s <= STEPS; s++) {
            rt_fill(g, N, 80 + (uint64_t)s, 1);
            prt_sgd(RT, p, with_master ? master : NULL, g, mom, N, lr, mu, wd, 0);
            for (int i = 0; i < N; i++) {
                double d = g[i] + wd * pr[i];
                br[i] = mu * br[i] + d;
                pr[i] -= lr * br[i];
            }
        }
        float want[N];
        for (int i = 0; i < N; i++) want[i] = (float)pr[i];
        rt_close(with_master ? "sgd (master) param" : "sgd param", p, want, N, 1e-6, 1e-5);
    }
}

/* ---------------------------------------------------------------- data */

static void test_data(void) {
    enum { B = 4, T = 12, V = 50 };
    int32_t tok[B * T], tgt[B * T], tok2[B * T], tgt2[B * T];
    prt_data(RT, tok, tgt, 3, 0, B, T, V, 0);
    prt_data(RT, tok2, tgt2, 3, 2, 2, T, V, 0);  /* samples 2, 3 alone */
    int bad = 0;
    for (int i = 0; i < B * T; i++) bad += tok[i] < 0 || tok[i] >= V || tgt[i] < 0 || tgt[i] >= V;
    for (int b = 0; b < B; b++)
        for (int t = 0; t + 1 < T; t++) bad += tgt[b * T + t] != tok[b * T + t + 1];
    RT_EXPECT(!bad, "data: %d tokens out of range or targets != next token", bad);
    RT_EXPECT(!memcmp(tok + 2 * T, tok2, sizeof(int32_t) * 2 * T) && !memcmp(tgt + 2 * T, tgt2, sizeof(int32_t) * 2 * T),
              "data: sample g differs when fetched in another batch split");
    prt_data(RT, tok2, tgt2, 4, 0, B, T, V, 0);
    RT_EXPECT(memcmp(tok, tok2, sizeof tok), "data: step 3 and step 4 gave the same batch");
    /* the load-balanced split over 3 ranks: 6 chunks of 2, rank r's rows (4 a rank)
     * chunks r and 5 - r, so row t of the sample holds position {0,1,10,11,2,3,8,9,4,5,6,7}[t] */
    static const int at[T] = {0, 1, 10, 11, 2, 3, 8, 9, 4, 5, 6, 7};
    prt_data(RT, tok2, tgt2, 3, 0, B, T, V, 3);
    bad = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            bad += tok2[b * T + t] != tok[b * T + at[t]] || tgt2[b * T + t] != tgt[b * T + at[t]] ||
                   prt_seq_pos_whole(t, T, 3) != at[t];
    RT_EXPECT(!bad, "data: %d rows out of the load-balanced split's order", bad);
    for (int r = 0; r < 3; r++)
        for (int t = 0; t < 4; t++) bad += prt_seq_pos(t, 4, r * 4, 3) != at[r * 4 + t];
    RT_EXPECT(!bad, "prt_seq_pos: %d rows of a rank's chunk at the wrong position", bad);
}

/* Attention on 1 and on 2 BLAS threads (the heads spread over two workers):
 * the same bits, over three blocks of query rows, with and without kept
 * probabilities. */
static void test_attention_threads(void) {
    enum { B = 2, T = 150, NH = 3, HD = 8, C = NH * HD };
    int nt0 = openblas_get_num_threads();
    float *qkv = rt_alloc(B * T * 3 * C), *dout = rt_alloc(B * T * C), *probs = rt_alloc(B * NH * T * T);
    rt_fill(qkv, B * T * 3 * C, 70, 1.5f); rt_fill(dout, B * T * C, 71, 1);
    for (int save = 0; save < 2; save++) {
        float *out[2], *dqkv[2];
        for (int run = 0; run < 2; run++) {
            openblas_set_num_threads(run + 1);
            out[run] = rt_alloc(B * T * C), dqkv[run] = calloc(B * T * 3 * C, sizeof(float));
            prt_attention_fwd(RT, out[run], save ? probs : NULL, qkv, B, T, NH, NH, HD, 1, T, 0, 0);
            prt_attention_bwd(RT, dqkv[run], dout, qkv, save ? probs : NULL, B, T, NH, NH, HD, 1, T, 0, 0);
        }
        rt_close(save ? "attention fwd 2 threads = 1 (probs kept)" : "attention fwd 2 threads = 1", out[1], out[0],
                 B * T * C, 0, 0);
        rt_close(save ? "attention bwd 2 threads = 1 (probs kept)" : "attention bwd 2 threads = 1", dqkv[1],
                 dqkv[0], B * T * 3 * C, 0, 0);
        for (int run = 0; run < 2; run++) free(out[run]), free(dqkv[run]);
    }
    openblas_set_num_threads(nt0);
    free(qkv); free(dout); free(probs);
}

/* The key-blocked kernels (the forward with probs NULL: online softmax over
 * PRT_ATTENTION_KEYS keys at a time; the key-blocked backward, called
 * directly) against the row-blocked ones (probs kept: each row's softmax over
 * all its keys) at T = 300 (query blocks 4 x 64 + 44, key blocks
 * 128 + 128 + 44), causal and not, with and without dropout: the same output
 * and gradient to fp32 rounding, and the backward writes nothing outside its
 * call's dqkv (all add onto the same prefill). */
static void test_attention_blocked(void) {
    enum { B = 2, T = 300, NH = 2, HD = 8, C = NH * HD };
    int64_t nq = B * T * 3 * C, no = B * T * C;
    float *qkv = rt_alloc(nq), *dout = rt_alloc(no), *probs = rt_alloc(B * NH * T * T), *o[2], *g[2];
    rt_fill(qkv, nq, 80, 1.5f); rt_fill(dout, no, 81, 1);
    for (int causal = 0; causal <= 1; causal++)
        for (int drop = 0; drop <= 1; drop++) {
            for (int kept = 0; kept < 2; kept++) {
                o[kept] = rt_alloc(no), g[kept] = rt_alloc(nq);
                rt_fill(g[kept], nq, 82, 1);
                float *p = kept ? probs : NULL;
                if (drop) {
                    prt_attention_dropout_fwd(RT, o[kept], p, qkv, B, T, NH, NH, HD, causal, 3, 1, 4, 7, 1, 0.2, 0);
                    prt_attention_dropout_bwd(RT, g[kept], dout, qkv, p, B, T, NH, NH, HD, causal, 3, 1, 4, 7, 1, 0.2, 0);
                } else {
                    prt_attention_fwd(RT, o[kept], p, qkv, B, T, NH, NH, HD, causal, T, 0, 0);
                    prt_attention_bwd(RT, g[kept], dout, qkv, p, B, T, NH, NH, HD, causal, T, 0, 0);
                }
            }
            /* the key-blocked backward (attention_bwd's above PRT_ATTENTION_FULL_ROWS keys) */
            float *gk = rt_alloc(nq);
            rt_fill(gk, nq, 82, 1);
            prt_att_dropout d = prt_cpu_attention_dropout(RT, 3, 1, 4, NH, 7, 1, 0.2);
            prt_cpu_attention_keyblocked_bwd(RT, gk, dout, qkv, B, T, NH, NH, HD, causal, drop ? &d : NULL, 0);
            char what[96];
            snprintf(what, sizeof what, "attention key-blocked = row-blocked fwd (causal %d, dropout %d)", causal, drop);
            rt_close(what, o[0], o[1], no, 2e-6, 1e-5);
            snprintf(what, sizeof what, "attention bwd, probs NULL = kept (causal %d, dropout %d)", causal, drop);
            rt_close(what, g[0], g[1], nq, 1e-5, 1e-4);
            snprintf(what, sizeof what, "attention key-blocked = row-blocked bwd (causal %d, dropout %d)", causal, drop);
            rt_close(what, gk, g[1], nq, 1e-5, 1e-4);
            for (int kept = 0; kept < 2; kept++) free(o[kept]), free(g[kept]);
            free(gk);
        }
    free(qkv); free(dout); free(probs);
}

/* A call over query rows q0 .. q0 + Tq - 1 (context parallelism: each rank's
 * chunk of the sequence against the whole qkv) against the whole-sequence
 * call: T = 300 in chunks of 100 (query blocks not aligned with the chunks'
 * starts), grouped-query (4 heads over 2), causal and not, with the
 * probabilities kept (row-blocked), recomputed (row-blocked) and key-blocked:
 * each chunk's output and probabilities are the whole call's rows, and the
 * chunks' qkv gradients (the Partial sums the reduce-scatter adds) sum to the
 * whole call's. */
static void test_attention_rows(void) {
    enum { B = 2, T = 300, NH = 4, KV = 2, HD = 8, C = NH * HD, W = (NH + 2 * KV) * HD, CH = 3, TQ = T / CH };
    int64_t nq = (int64_t)B * T * W, no = (int64_t)B * T * C, np = (int64_t)B * NH * T * T;
    float *qkv = rt_alloc(nq), *dout = rt_alloc(no), *probs = rt_alloc(np), *out = rt_alloc(no), *g = rt_alloc(nq);
    float *cp = rt_alloc(np / CH), *co = rt_alloc(no / CH), *cdo = rt_alloc(no / CH), *gsum = rt_alloc(nq),
          *orows = rt_alloc(no / CH), *prows = rt_alloc(np / CH);
    rt_fill(qkv, nq, 90, 1.5f); rt_fill(dout, no, 91, 1);
    for (int causal = 0; causal <= 1; causal++)
        for (int mode = 0; mode < 3; mode++) { /* 0 probs kept, 1 recomputed, 2 key-blocked backward */
            float *p = mode == 0 ? probs : NULL;
            memset(g, 0, sizeof(float) * (size_t)nq);
            memset(gsum, 0, sizeof(float) * (size_t)nq);
            prt_attention_fwd(RT, out, p, qkv, B, T, NH, KV, HD, causal, T, 0, 0);
            if (mode == 2) prt_cpu_attention_keyblocked_bwd(RT, g, dout, qkv, B, T, NH, KV, HD, causal, NULL, 0);
            else prt_attention_bwd(RT, g, dout, qkv, p, B, T, NH, KV, HD, causal, T, 0, 0);
            for (int c = 0; c < CH; c++) {
                int64_t q0 = (int64_t)c * TQ;
                for (int64_t b = 0; b < B; b++) {
                    memcpy(cdo + b * TQ * C, dout + (b * T + q0) * C, sizeof(float) * TQ * C);
                    memcpy(orows + b * TQ * C, out + (b * T + q0) * C, sizeof(float) * TQ * C);
                    for (int64_t h = 0; h < NH; h++)
                        memcpy(prows + (b * NH + h) * TQ * T, probs + ((b * NH + h) * T + q0) * T, sizeof(float) * TQ * T);
                }
                float *cpp = mode == 0 ? cp : NULL;
                prt_attention_fwd(RT, co, cpp, qkv, B, T, NH, KV, HD, causal, TQ, q0, 0);
                if (mode == 2)
                    prt_cpu_attention_keyblocked_rows_bwd(RT, gsum, cdo, qkv, B, T, TQ, q0, NH, KV, HD, causal, NULL, 0);
                else prt_attention_bwd(RT, gsum, cdo, qkv, cpp, B, T, NH, KV, HD, causal, TQ, q0, 0);
                char what[96];
                snprintf(what, sizeof what, "attention rows %lld.. = the whole call's (causal %d, mode %d)", (long long)q0,
                         causal, mode);
                rt_close(what, co, orows, no / CH, 2e-6, 1e-5);
                if (mode == 0) {
                    snprintf(what, sizeof what, "attention probs of rows %lld.. (causal %d)", (long long)q0, causal);
                    rt_close(what, cp, prows, np / CH, 1e-7, 1e-5);
                }
            }
            char what[96];
            snprintf(what, sizeof what, "attention bwd: the chunks' dqkv sum to the whole's (causal %d, mode %d)", causal,
                     mode);
            rt_close(what, gsum, g, nq, 1e-5, 1e-4);
        }
    free(qkv); free(dout); free(probs); free(out); free(g); free(cp); free(co); free(cdo); free(gsum); free(orows);
    free(prows);
}

/* ---------------------------------------------------------------- mixture of experts */

/* The router: L = sum_j weight[t,j] R[t,j] + the load-balancing loss + the
 * z-loss, both with large coefficients, in x and wr.  Differences that change
 * the routing would not be derivatives: the check fails if one does. */
typedef struct {
    float *x, *wr, *r, *logits, *weight, losses[2];
    int32_t *index, *counts, *index0;
    int64_t T, H, E, topk, sigmoid;
    double aux, z;
} router_ctx;
static int64_t router_word(void) { return PRT_ARG_DTYPES(PRT_F32, PRT_I32, PRT_F32, PRT_I32, PRT_F32, PRT_F32, PRT_F32); }
static double router_loss(void *p) {
    router_ctx *c = p;
    prt_moe_router_fwd(RT, c->logits, c->index, c->weight, c->counts, c->losses, c->x, c->wr, c->T, c->H, c->E,
                       c->topk, c->sigmoid, c->aux, c->z, router_word());
    if (c->index0) RT_EXPECT(!memcmp(c->index, c->index0, (size_t)(c->T * c->topk) * 4),
                             "moe router: a finite difference changed the routing; choose other inputs");
    return dot_r(c->weight, c->r, c->T * c->topk) + c->losses[0] + c->losses[1];
}
static void test_moe_router(int64_t sigmoid, int64_t topk) {
    router_ctx c = {.T = 6, .H = 4, .E = 4, .topk = topk, .sigmoid = sigmoid, .aux = 0.3, .z = 0.2};
    int64_t T = c.T, H = c.H, E = c.E;
    c.x = rt_alloc(T * H); c.wr = rt_alloc(H * E); c.r = rt_alloc(T * topk); c.logits = rt_alloc(T * E);
    c.weight = rt_alloc(T * topk);
    c.index = calloc((size_t)(T * topk), 4); c.counts = calloc((size_t)E, 4);
    rt_fill(c.x, T * H, 130 + (uint64_t)sigmoid, 1); rt_fill(c.wr, H * E, 132 + (uint64_t)topk, 1);
    rt_fill(c.r, T * topk, 134, 1);
    router_loss(&c);
    c.index0 = malloc((size_t)(T * topk) * 4);
    memcpy(c.index0, c.index, (size_t)(T * topk) * 4);
    double wsum = 0.0;  /* each token's weights sum to 1 */
    for (int64_t i = 0; i < T * topk; i++) wsum += c.weight[i];
    RT_EXPECT(fabs(wsum - (double)T) < 1e-5, "moe router: the weights sum to %g over %lld tokens", wsum, (long long)T);
    gradbuf dx = grad_new(T * H, 135), dwr = grad_new(H * E, 136);
    float *dlogits = rt_alloc(T * E);
    prt_moe_router_bwd(RT, dx.g, dwr.g, dlogits, c.r, c.logits, c.index, c.counts, c.x, c.wr, T, H, E, topk, sigmoid,
                       c.aux, c.z, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_F32, PRT_F32, PRT_I32, PRT_I32, PRT_F32,
                                                  PRT_F32));
    const char *names[2][2] = {{"moe_router_bwd (softmax) dx", "moe_router_bwd (softmax) dwr"},
                               {"moe_router_bwd (sigmoid) dx", "moe_router_bwd (sigmoid) dwr"}};
    grad_check(names[sigmoid][0], router_loss, &c, c.x, dx.g, dx.g0, T * H, 1e-2f);
    grad_check(names[sigmoid][1], router_loss, &c, c.wr, dwr.g, dwr.g0, H * E, 1e-2f);
    grad_free(dx); grad_free(dwr);
    free(dlogits); free(c.x); free(c.wr); free(c.r); free(c.logits); free(c.weight); free(c.index); free(c.counts);
    free(c.index0);
}

/* The router's tokens split over a context axis of C = 2 ranks (ops_emit.c):
 * each half routes its own T/2 tokens, the counts are summed over the halves,
 * and moe_router_loss with the summed counts and the coefficients aux / C^2
 * and z / C gives each half's share of the whole's losses: the halves' losses
 * sum to moe_router_fwd's over all T tokens, and moe_router_bwd with the
 * summed counts and those coefficients gives each half's rows of the whole's
 * dlogits.  moe_router_loss with a router's own counts gives its losses. */
static void test_moe_router_context(int64_t sigmoid) {
    enum { T = 8, H = 4, E = 4, K = 2, C = 2, TC = T / C };
    const double aux = 0.3, z = 0.2;
    float *x = rt_alloc(T * H), *wr = rt_alloc(H * E), *logits = rt_alloc(T * E), *weight = rt_alloc(T * K),
          *dw = rt_alloc(T * K), *dlogits = rt_alloc(T * E), *part_dlogits = rt_alloc(T * E), losses[2], again[2];
    int32_t index[T * K], counts[E], part_counts[C][E], sum_counts[E];
    rt_fill(x, T * H, 140 + (uint64_t)sigmoid, 1); rt_fill(wr, H * E, 141, 1); rt_fill(dw, T * K, 142, 1);
    const int64_t w_loss = PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_I32, PRT_I32);
    const int64_t w_bwd =
        PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_F32, PRT_F32, PRT_I32, PRT_I32, PRT_F32, PRT_F32);
    prt_moe_router_fwd(RT, logits, index, weight, counts, losses, x, wr, T, H, E, K, sigmoid, aux, z, router_word());
    prt_moe_router_loss(RT, again, logits, index, counts, T, E, K, sigmoid, aux, z, w_loss);
    rt_close("moe_router_loss: a router's own counts give its losses", again, losses, 2, 1e-7, 1e-6);
    prt_moe_router_bwd(RT, NULL, NULL, dlogits, dw, logits, index, counts, x, wr, T, H, E, K, sigmoid, aux, z, w_bwd);
    float *pl[C], *pw[C];
    int32_t pi[C][TC * K];
    for (int c = 0; c < C; c++) {
        pl[c] = rt_alloc(TC * E), pw[c] = rt_alloc(TC * K);
        prt_moe_router_fwd(RT, pl[c], pi[c], pw[c], part_counts[c], NULL, x + c * TC * H, wr, TC, H, E, K, sigmoid,
                           aux, z, router_word());
    }
    for (int e = 0; e < E; e++) sum_counts[e] = part_counts[0][e] + part_counts[1][e];
    float sum[2] = {0, 0};
    for (int c = 0; c < C; c++) {
        float part[2];
        prt_moe_router_loss(RT, part, pl[c], pi[c], sum_counts, TC, E, K, sigmoid, aux / (C * C), z / C, w_loss);
        sum[0] += part[0], sum[1] += part[1];
        prt_moe_router_bwd(RT, NULL, NULL, part_dlogits + c * TC * E, dw + c * TC * K, pl[c], pi[c], sum_counts,
                           x + c * TC * H, wr, TC, H, E, K, sigmoid, aux / (C * C), z / C, w_bwd);
        free(pl[c]); free(pw[c]);
    }
    const char *what[2] = {"moe_router_loss over a context split of 2 (softmax): the halves' losses sum to the whole's",
                           "moe_router_loss over a context split of 2 (sigmoid): the halves' losses sum to the whole's"};
    rt_close(what[sigmoid], sum, losses, 2, 1e-7, 1e-5);
    const char *dwhat[2] = {"moe_router_bwd over a context split of 2 (softmax): the halves' dlogits are the whole's",
                            "moe_router_bwd over a context split of 2 (sigmoid): the halves' dlogits are the whole's"};
    rt_close(dwhat[sigmoid], part_dlogits, dlogits, T * E, 1e-7, 1e-5);
    free(x); free(wr); free(logits); free(weight); free(dw); free(dlogits); free(part_dlogits);
}

/* Dispatch, one grouped GEMM and the combine, routing fixed (expert 3 gets no
 * token): L = sum(out * R) in x, w[E,H,M] and the weights; x, w and weight's
 * gradients prefilled, so the accumulation of permute_bwd, moe_matmul_bwd and
 * combine_bwd is checked too. */
typedef struct {
    float *x, *w, *weight, *r, *xp, *y, *out;
    int32_t *index, *offsets, *rows;
    int64_t T, H, M, E, topk;
} moe_ctx;
static double moe_loss(void *p) {
    moe_ctx *c = p;
    int64_t T = c->T, H = c->H, M = c->M, E = c->E, k = c->topk;
    prt_moe_permute_fwd(RT, c->xp, c->offsets, c->rows, c->x, c->index, T, H, E, k,
                        PRT_ARG_DTYPES(PRT_F32, PRT_I32, PRT_I32, PRT_F32, PRT_I32));
    prt_moe_matmul_fwd(RT, c->y, c->xp, c->w, c->offsets, E, H, M, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    prt_moe_combine_fwd(RT, c->out, c->y, c->weight, c->rows, T, M, k,
                        PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    return dot_r(c->out, c->r, T * M);
}
static void test_moe_layer(void) {
    moe_ctx c = {.T = 5, .H = 3, .M = 4, .E = 4, .topk = 2};
    int64_t T = c.T, H = c.H, M = c.M, E = c.E, k = c.topk, R = T * k;
    int32_t index[10] = {1, 0, 2, 1, 0, 2, 1, 2, 0, 1}, offsets[5], rows[10];
    c.index = index, c.offsets = offsets, c.rows = rows;
    c.x = rt_alloc(T * H); c.w = rt_alloc(E * H * M); c.weight = rt_alloc(R); c.r = rt_alloc(T * M);
    c.xp = rt_alloc(R * H); c.y = rt_alloc(R * M); c.out = rt_alloc(T * M);
    rt_fill(c.x, T * H, 140, 1); rt_fill(c.w, E * H * M, 141, 1); rt_fill(c.weight, R, 142, 1); rt_fill(c.r, T * M, 143, 1);
    moe_loss(&c);
    RT_EXPECT(offsets[0] == 0 && offsets[1] == 3 && offsets[2] == 7 && offsets[3] == 10 && offsets[4] == 10,
              "moe_permute_fwd: offsets %d %d %d %d %d, not 0 3 7 10 10", offsets[0], offsets[1], offsets[2],
              offsets[3], offsets[4]);
    RT_EXPECT(rows[0] == 3 && rows[1] == 0 && rows[2] == 7 && rows[3] == 4,
              "moe_permute_fwd: token 0 and 1's rows %d %d %d %d, not 3 0 7 4 (by expert, then token)", rows[0],
              rows[1], rows[2], rows[3]);
    gradbuf dx = grad_new(T * H, 144), dw = grad_new(E * H * M, 145), dweight = grad_new(R, 146);
    float *dy = rt_alloc(R * M), *dxp = rt_alloc(R * H);
    prt_moe_combine_bwd(RT, dy, dweight.g, c.r, c.y, c.weight, rows, T, M, k,
                        PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    prt_moe_matmul_bwd(RT, dxp, dw.g, dy, c.xp, c.w, offsets, E, H, M,
                       PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    prt_moe_permute_bwd(RT, dx.g, dxp, rows, T, H, k, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_I32));
    grad_check("moe layer dx", moe_loss, &c, c.x, dx.g, dx.g0, T * H, 1e-2f);
    grad_check("moe layer dw (expert 3: no rows)", moe_loss, &c, c.w, dw.g, dw.g0, E * H * M, 1e-2f);
    grad_check("moe layer dweight", moe_loss, &c, c.weight, dweight.g, dweight.g0, R, 1e-2f);
    grad_free(dx); grad_free(dw); grad_free(dweight);
    free(dy); free(dxp); free(c.x); free(c.w); free(c.weight); free(c.r); free(c.xp); free(c.y); free(c.out);
}

/* Ring attention's blocks (prt_ring_kinds) over a context axis of P ranks,
 * T rows a rank: every visible (query, key) pair of a causal sequence is in a
 * block some step computes, no computed block is masked whole, and the
 * blocks' area, the attention work, is the same on every rank with the
 * load-balanced split (within one block: here exactly) where the split in
 * order gives rank r r T^2 + T (T + 1) / 2 of it. */
static void test_ring_balance(void) {
    for (int64_t P = 2; P <= 8; P++)
        for (int balanced = 0; balanced < 2; balanced++) {
            const int64_t T = 8, n = balanced ? T / 2 : T;
            int64_t work[8] = {0};
            int bad = 0;
            for (int64_t r = 0; r < P; r++) {
                int64_t seen = 0, visible = 0;
                for (int64_t step = 0; step < P; step++) {
                    int kind[2][2];
                    prt_ring_kinds(r, step, P, 1, balanced, kind);
                    int64_t src = ((r - step) % P + P) % P;
                    for (int a = 0; a < 2; a++)
                        for (int b = 0; b < 2; b++) {
                            if (!kind[a][b]) continue;
                            work[r] += kind[a][b] == 2 ? n * n : n * (n + 1) / 2;
                            int64_t any = 0;
                            for (int64_t i = a * n; i < (a + 1) * n; i++)
                                for (int64_t j = b * n; j < (b + 1) * n; j++) {
                                    int64_t qi = prt_seq_pos(i, T, r * T, balanced ? P : 0),
                                            kj = prt_seq_pos(j, T, src * T, balanced ? P : 0);
                                    int sees = kj <= qi;
                                    any += sees;
                                    /* the kind says how: the diagonal sees j <= i within the block */
                                    bad += kind[a][b] == 2 ? !sees : sees != (j - b * n <= i - a * n);
                                }
                            bad += any == 0;
                            seen += any;
                        }
                }
                for (int64_t i = 0; i < T; i++) visible += prt_seq_pos(i, T, r * T, balanced ? P : 0) + 1;
                bad += seen != visible;
            }
            RT_EXPECT(!bad, "ring blocks, P %lld%s: %d pairs or blocks wrong", (long long)P,
                      balanced ? " balanced" : "", bad);
            for (int64_t r = 0; r < P; r++) {
                if (balanced) RT_EXPECT(work[r] == work[0], "balanced ring, P %lld: rank %lld computes %lld, rank 0 %lld",
                                        (long long)P, (long long)r, (long long)work[r], (long long)work[0]);
                else RT_EXPECT(work[r] == r * T * T + T * (T + 1) / 2, "ring in order, P %lld: rank %lld computes %lld",
                               (long long)P, (long long)r, (long long)work[r]);
            }
        }
}

int main(int argc, char **argv) {
    prt_plan_desc plan = rt_plan("test_ops_grad", 0, NULL, NULL);
    RT = prt_init(1, argv, &plan);
    (void)argc;
    test_embed();
    test_pos();
    test_norm(0, 1);
    test_norm(0, 0);
    test_norm(1, 0);
    test_norm_eps();
    test_matmul();
    test_matmul_t();
    test_bias();
    test_matmul_bias(3, 4, 5);
    test_matmul_bias(96, 700, 130);
    test_activation(0);
    test_activation(1);
    test_activation(2);
    test_add();
    test_rope();
    for (int causal = 0; causal < 2; causal++)
        for (int save = 0; save < 2; save++) {
            test_attention(causal, save, 2, 2);
            test_attention(causal, save, 4, 2);
            test_attention(causal, save, 3, 1);
        }
    test_attention_grouped();
    test_attention_threads();
    test_attention_blocked();
    test_attention_rows();
    test_dropout();
    test_attention_dropout(0);
    test_attention_dropout(1);
    test_xent();
    for (int64_t sigmoid = 0; sigmoid < 2; sigmoid++)
        for (int64_t topk = 1; topk <= 2; topk++) test_moe_router(sigmoid, topk);
    for (int64_t sigmoid = 0; sigmoid <= 1; sigmoid++) test_moe_router_context(sigmoid);
    test_moe_layer();
    test_optimizers();
    test_data();
    test_ring_balance();
    int64_t status = prt_finalize(RT);
    if (status) rt_failures++;
    printf("test_ops_grad: %s (%d failures)\n", rt_failures ? "FAIL" : "ok", rt_failures);
    return rt_failures ? 1 : 0;
}
