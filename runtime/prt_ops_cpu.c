/*
 * prt_ops_cpu.c — the fp32 ops of the CPU backend: simple loops plus OpenBLAS GEMMs.
 * Semantics are parc_rt.h's: forward ops overwrite their outputs, backward ops
 * accumulate (+=) into input and parameter gradients.  Reductions over a row
 * accumulate in double; everything else is plain float arithmetic.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "prt_internal.h"

#define OP_BEGIN(rt) double op_t0_ = prt_trace_start(rt)
#define OP_END(rt, name) PRT_TRACE_END(rt, name, "op", op_t0_, -1, -1)

static int blas_dim(int64_t n, const char *what) {
    PRT_CHECK(n >= 0 && n <= INT_MAX, "%s: dimension %lld does not fit a BLAS int", what, (long long)n);
    return (int)n;
}

void prt_zero(prt *rt, void *buf, int64_t n) {
    OP_BEGIN(rt);
    if (n > 0) memset(buf, 0, (size_t)n * sizeof(float));
    OP_END(rt, "zero");
}

void prt_copy(prt *rt, void *dst, const void *src, int64_t n) {
    OP_BEGIN(rt);
    if (n > 0 && dst != src) memmove(dst, src, (size_t)n * sizeof(float));
    OP_END(rt, "copy");
}

void prt_acc(prt *rt, void *dst, const void *src, int64_t n) {
    OP_BEGIN(rt);
    float *d = dst;
    const float *s = src;
    for (int64_t i = 0; i < n; i++) d[i] += s[i];
    OP_END(rt, "acc");
}

/* ---------------------------------------------------------------- embedding */

void prt_embed_fwd(prt *rt, void *out_, const void *tokens_, const void *wte_, int64_t N, int64_t C,
                   int64_t vocab_local, int64_t vocab_offset) {
    OP_BEGIN(rt);
    float *out = out_;
    const int32_t *tokens = tokens_;
    const float *wte = wte_;
    for (int64_t n = 0; n < N; n++) {
        int64_t row = (int64_t)tokens[n] - vocab_offset;
        if (row >= 0 && row < vocab_local) memcpy(out + n * C, wte + row * C, (size_t)C * sizeof(float));
        else memset(out + n * C, 0, (size_t)C * sizeof(float));
    }
    OP_END(rt, "embed_fwd");
}

void prt_embed_bwd(prt *rt, void *dwte_, const void *tokens_, const void *dout_, int64_t N, int64_t C,
                   int64_t vocab_local, int64_t vocab_offset) {
    OP_BEGIN(rt);
    float *dwte = dwte_;
    const int32_t *tokens = tokens_;
    const float *dout = dout_;
    for (int64_t n = 0; n < N; n++) {
        int64_t row = (int64_t)tokens[n] - vocab_offset;
        if (row < 0 || row >= vocab_local) continue;
        float *d = dwte + row * C;
        const float *g = dout + n * C;
        for (int64_t c = 0; c < C; c++) d[c] += g[c];
    }
    OP_END(rt, "embed_bwd");
}

void prt_pos_fwd(prt *rt, void *out_, const void *in_, const void *wpe_, int64_t B, int64_t T, int64_t C,
                 int64_t t_offset) {
    OP_BEGIN(rt);
    float *out = out_;
    const float *in = in_, *wpe = wpe_;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            float *o = out + (b * T + t) * C;
            const float *x = in + (b * T + t) * C, *p = wpe + (t + t_offset) * C;
            for (int64_t c = 0; c < C; c++) o[c] = x[c] + p[c];
        }
    OP_END(rt, "pos_fwd");
}

void prt_pos_bwd(prt *rt, void *dwpe_, void *din_, const void *dout_, int64_t B, int64_t T, int64_t C,
                 int64_t t_offset) {
    OP_BEGIN(rt);
    float *dwpe = dwpe_, *din = din_;
    const float *dout = dout_;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const float *g = dout + (b * T + t) * C;
            if (dwpe) {
                float *p = dwpe + (t + t_offset) * C;
                for (int64_t c = 0; c < C; c++) p[c] += g[c];
            }
            if (din) {
                float *d = din + (b * T + t) * C;
                for (int64_t c = 0; c < C; c++) d[c] += g[c];
            }
        }
    OP_END(rt, "pos_bwd");
}

/* ---------------------------------------------------------------- norms */

#define NORM_EPS 1e-5

void prt_layernorm_fwd(prt *rt, void *out_, void *mean_, void *rstd_, const void *in_, const void *w_,
                       const void *b_, int64_t N, int64_t C) {
    OP_BEGIN(rt);
    float *out = out_, *mean = mean_, *rstd = rstd_;
    const float *in = in_, *w = w_, *b = b_;
    for (int64_t n = 0; n < N; n++) {
        const float *x = in + n * C;
        double s = 0.0, v = 0.0;
        for (int64_t c = 0; c < C; c++) s += x[c];
        double m = s / (double)C;
        for (int64_t c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        double r = 1.0 / sqrt(v / (double)C + NORM_EPS);
        float *o = out + n * C;
        for (int64_t c = 0; c < C; c++) o[c] = (float)((x[c] - m) * r) * w[c] + (b ? b[c] : 0.0f);
        if (mean) mean[n] = (float)m;
        if (rstd) rstd[n] = (float)r;
    }
    OP_END(rt, "layernorm_fwd");
}

void prt_layernorm_bwd(prt *rt, void *din_, void *dw_, void *db_, const void *dout_, const void *in_,
                       const void *w_, const void *mean_, const void *rstd_, int64_t N, int64_t C) {
    OP_BEGIN(rt);
    float *din = din_, *dw = dw_, *db = db_;
    const float *dout = dout_, *in = in_, *w = w_, *mean = mean_, *rstd = rstd_;
    for (int64_t n = 0; n < N; n++) {
        const float *g = dout + n * C, *x = in + n * C;
        float m = mean[n], r = rstd[n];
        double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
        for (int64_t c = 0; c < C; c++) {
            float norm = (x[c] - m) * r, dnorm = w[c] * g[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= (double)C;
        dnorm_norm_mean /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            float norm = (x[c] - m) * r, dnorm = w[c] * g[c];
            if (db) db[c] += g[c];
            if (dw) dw[c] += norm * g[c];
            if (din) din[n * C + c] += (float)(r * (dnorm - dnorm_mean - norm * dnorm_norm_mean));
        }
    }
    OP_END(rt, "layernorm_bwd");
}

void prt_rmsnorm_fwd(prt *rt, void *out_, void *rstd_, const void *in_, const void *w_, int64_t N, int64_t C) {
    OP_BEGIN(rt);
    float *out = out_, *rstd = rstd_;
    const float *in = in_, *w = w_;
    for (int64_t n = 0; n < N; n++) {
        const float *x = in + n * C;
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++) ss += (double)x[c] * x[c];
        double r = 1.0 / sqrt(ss / (double)C + NORM_EPS);
        float *o = out + n * C;
        for (int64_t c = 0; c < C; c++) o[c] = (float)(x[c] * r) * w[c];
        if (rstd) rstd[n] = (float)r;
    }
    OP_END(rt, "rmsnorm_fwd");
}

void prt_rmsnorm_bwd(prt *rt, void *din_, void *dw_, const void *dout_, const void *in_, const void *w_,
                     const void *rstd_, int64_t N, int64_t C) {
    OP_BEGIN(rt);
    float *din = din_, *dw = dw_;
    const float *dout = dout_, *in = in_, *w = w_, *rstd = rstd_;
    for (int64_t n = 0; n < N; n++) {
        const float *g = dout + n * C, *x = in + n * C;
        double r = rstd[n], dot = 0.0;  /* dot = sum_c dnorm_c x_c */
        for (int64_t c = 0; c < C; c++) dot += (double)w[c] * g[c] * x[c];
        double k = r * r * dot / (double)C;
        for (int64_t c = 0; c < C; c++) {
            if (dw) dw[c] += (float)(x[c] * r) * g[c];
            if (din) din[n * C + c] += (float)(r * ((double)w[c] * g[c] - x[c] * k));
        }
    }
    OP_END(rt, "rmsnorm_bwd");
}

/* ---------------------------------------------------------------- linear */

void prt_matmul_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M) {
    OP_BEGIN(rt);
    int n = blas_dim(N, "matmul"), k = blas_dim(K, "matmul"), m = blas_dim(M, "matmul");
    if (n && m) {
        if (k) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, k, 1.0f, in, k, w, m, 0.0f, out, m);
        else memset(out, 0, (size_t)n * (size_t)m * sizeof(float));
    }
    OP_END(rt, "matmul_fwd");
}

void prt_matmul_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, int64_t N,
                    int64_t K, int64_t M) {
    OP_BEGIN(rt);
    int n = blas_dim(N, "matmul"), k = blas_dim(K, "matmul"), m = blas_dim(M, "matmul");
    if (n && k && m) {
        /* din[N,K] += dout[N,M] @ w[K,M]^T */
        if (din) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, k, m, 1.0f, dout, m, w, m, 1.0f, din, k);
        /* dw[K,M] += in[N,K]^T @ dout[N,M] */
        if (dw) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, m, n, 1.0f, in, k, dout, m, 1.0f, dw, m);
    }
    OP_END(rt, "matmul_bwd");
}

void prt_matmul_t_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M) {
    OP_BEGIN(rt);
    int n = blas_dim(N, "matmul_t"), k = blas_dim(K, "matmul_t"), m = blas_dim(M, "matmul_t");
    if (n && m) {  /* out[N,M] = in[N,K] @ w[M,K]^T */
        if (k) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, in, k, w, k, 0.0f, out, m);
        else memset(out, 0, (size_t)n * (size_t)m * sizeof(float));
    }
    OP_END(rt, "matmul_t_fwd");
}

void prt_matmul_t_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, int64_t N,
                      int64_t K, int64_t M) {
    OP_BEGIN(rt);
    int n = blas_dim(N, "matmul_t"), k = blas_dim(K, "matmul_t"), m = blas_dim(M, "matmul_t");
    if (n && k && m) {
        /* din[N,K] += dout[N,M] @ w[M,K] */
        if (din) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, m, 1.0f, dout, m, w, k, 1.0f, din, k);
        /* dw[M,K] += dout[N,M]^T @ in[N,K] */
        if (dw) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, k, n, 1.0f, dout, m, in, k, 1.0f, dw, k);
    }
    OP_END(rt, "matmul_t_bwd");
}

void prt_bias_fwd(prt *rt, void *out_, const void *in_, const void *b_, int64_t N, int64_t M) {
    OP_BEGIN(rt);
    float *out = out_;
    const float *in = in_, *b = b_;
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < M; j++) out[n * M + j] = in[n * M + j] + b[j];
    OP_END(rt, "bias_fwd");
}

void prt_bias_bwd(prt *rt, void *db_, const void *dout_, int64_t N, int64_t M) {
    OP_BEGIN(rt);
    float *db = db_;
    const float *dout = dout_;
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < M; j++) db[j] += dout[n * M + j];
    OP_END(rt, "bias_bwd");
}

/* ---------------------------------------------------------------- activations */

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

void prt_gelu_fwd(prt *rt, void *out_, const void *in_, int64_t n) {
    OP_BEGIN(rt);
    float *out = out_;
    const float *in = in_;
    for (int64_t i = 0; i < n; i++) {
        float x = in[i], cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
    }
    OP_END(rt, "gelu_fwd");
}

void prt_gelu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n) {
    OP_BEGIN(rt);
    float *din = din_;
    const float *in = in_, *dout = dout_;
    for (int64_t i = 0; i < n; i++) {
        float x = in[i], cube = 0.044715f * x * x * x;
        float t = tanhf(GELU_SCALE * (x + cube));
        float sech2 = 1.0f - t * t;
        float grad = 0.5f * (1.0f + t) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        din[i] += grad * dout[i];
    }
    OP_END(rt, "gelu_bwd");
}

void prt_relu_fwd(prt *rt, void *out_, const void *in_, int64_t n) {
    OP_BEGIN(rt);
    float *out = out_;
    const float *in = in_;
    for (int64_t i = 0; i < n; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
    OP_END(rt, "relu_fwd");
}

void prt_relu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n) {
    OP_BEGIN(rt);
    float *din = din_;
    const float *in = in_, *dout = dout_;
    for (int64_t i = 0; i < n; i++)
        if (in[i] > 0.0f) din[i] += dout[i];
    OP_END(rt, "relu_bwd");
}

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void prt_swiglu_fwd(prt *rt, void *out_, const void *in_, int64_t N, int64_t F) {
    OP_BEGIN(rt);
    float *out = out_;
    const float *in = in_;
    for (int64_t n = 0; n < N; n++) {
        const float *gate = in + n * 2 * F, *up = gate + F;
        for (int64_t f = 0; f < F; f++) out[n * F + f] = gate[f] * sigmoidf(gate[f]) * up[f];
    }
    OP_END(rt, "swiglu_fwd");
}

void prt_swiglu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t N, int64_t F) {
    OP_BEGIN(rt);
    float *din = din_;
    const float *in = in_, *dout = dout_;
    for (int64_t n = 0; n < N; n++) {
        const float *gate = in + n * 2 * F, *up = gate + F;
        float *dgate = din + n * 2 * F, *dup = dgate + F;
        for (int64_t f = 0; f < F; f++) {
            float g = gate[f], s = sigmoidf(g), d = dout[n * F + f];
            dgate[f] += d * up[f] * s * (1.0f + g * (1.0f - s));
            dup[f] += d * g * s;
        }
    }
    OP_END(rt, "swiglu_bwd");
}

void prt_add_fwd(prt *rt, void *out_, const void *a_, const void *b_, int64_t n) {
    OP_BEGIN(rt);
    float *out = out_;
    const float *a = a_, *b = b_;
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    OP_END(rt, "add_fwd");
}

/* ---------------------------------------------------------------- attention */

/* P[T,T] = softmax(scale * Q K^T) of head h of sample b, causal mask when asked
 * (masked entries are exactly 0).  Q, K rows are 3*C apart in qkv. */
static void attention_probs(float *P, const float *qkv, int64_t b, int64_t h, int T, int NH, int HD,
                            int64_t causal) {
    int C = NH * HD, ld = 3 * C;
    const float *q = qkv + (size_t)b * T * ld + (size_t)h * HD, *k = q + C;
    float scale = 1.0f / sqrtf((float)HD);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HD, scale, q, ld, k, ld, 0.0f, P, T);
    for (int t = 0; t < T; t++) {
        float *row = P + (size_t)t * T;
        int last = causal ? t : T - 1;
        float m = row[0];
        for (int j = 1; j <= last; j++) m = row[j] > m ? row[j] : m;
        double sum = 0.0;
        for (int j = 0; j <= last; j++) {
            row[j] = expf(row[j] - m);
            sum += row[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j <= last; j++) row[j] *= inv;
        for (int j = last + 1; j < T; j++) row[j] = 0.0f;
    }
}

void prt_attention_fwd(prt *rt, void *out_, void *probs_, const void *qkv_, int64_t B, int64_t T_, int64_t NH_,
                       int64_t HD_, int64_t causal) {
    OP_BEGIN(rt);
    int T = blas_dim(T_, "attention"), NH = blas_dim(NH_, "attention"), HD = blas_dim(HD_, "attention");
    int C = blas_dim(NH_ * HD_, "attention"), ld = 3 * C;
    float *out = out_, *probs = probs_;
    const float *qkv = qkv_;
    float *scratch = probs ? NULL : prt_workspace(rt, (size_t)T * T);
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            float *P = probs ? probs + ((size_t)b * NH + h) * T * T : scratch;
            attention_probs(P, qkv, b, h, T, NH, HD, causal);
            const float *v = qkv + (size_t)b * T * ld + 2 * C + (size_t)h * HD;
            float *o = out + (size_t)b * T * C + (size_t)h * HD;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HD, T, 1.0f, P, T, v, ld, 0.0f, o, C);
        }
    OP_END(rt, "attention_fwd");
}

void prt_attention_bwd(prt *rt, void *dqkv_, const void *dout_, const void *qkv_, const void *probs_, int64_t B,
                       int64_t T_, int64_t NH_, int64_t HD_, int64_t causal) {
    OP_BEGIN(rt);
    int T = blas_dim(T_, "attention"), NH = blas_dim(NH_, "attention"), HD = blas_dim(HD_, "attention");
    int C = blas_dim(NH_ * HD_, "attention"), ld = 3 * C;
    float *dqkv = dqkv_;
    const float *dout = dout_, *qkv = qkv_, *probs = probs_;
    float *scratch = prt_workspace(rt, (size_t)(probs ? 1 : 2) * T * T);
    float *dP = scratch, *Pbuf = probs ? NULL : scratch + (size_t)T * T;
    float scale = 1.0f / sqrtf((float)HD);
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *P = probs ? probs + ((size_t)b * NH + h) * T * T : Pbuf;
            if (!probs) attention_probs(Pbuf, qkv, b, h, T, NH, HD, causal);
            size_t base = (size_t)b * T * ld + (size_t)h * HD;
            const float *q = qkv + base, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
            const float *dO = dout + (size_t)b * T * C + (size_t)h * HD;
            /* dV += P^T dO;  dP = dO V^T */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HD, T, 1.0f, P, T, dO, C, 1.0f, dv, ld);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HD, 1.0f, dO, C, v, ld, 0.0f, dP, T);
            /* dS = P * (dP - rowsum(P * dP)), in place in dP (masked entries: P = 0 -> 0) */
            for (int t = 0; t < T; t++) {
                const float *p = P + (size_t)t * T;
                float *dp = dP + (size_t)t * T;
                double dot = 0.0;
                for (int j = 0; j < T; j++) dot += (double)p[j] * dp[j];
                for (int j = 0; j < T; j++) dp[j] = p[j] * (dp[j] - (float)dot);
            }
            /* dQ += scale dS K;  dK += scale dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HD, T, scale, dP, T, k, ld, 1.0f, dq, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HD, T, scale, dP, T, q, ld, 1.0f, dk, ld);
        }
    OP_END(rt, "attention_bwd");
}

/* ---------------------------------------------------------------- cross-entropy */

void prt_xent_fwd(prt *rt, void *loss_sum_, void *stats_, const void *logits_, const void *targets_, int64_t N,
                  int64_t V_local, int64_t vocab_offset, int64_t axis) {
    OP_BEGIN(rt);
    float *loss_sum = loss_sum_, *stats = stats_;
    const float *logits = logits_;
    const int32_t *targets = targets_;
    int S = prt_axis_size(rt, axis);
    prt_dump_logits(rt, logits, N, V_local, vocab_offset, axis);
    /* scratch: row max [N], then (sum of exp [N], target logit [N]) for one all-reduce */
    float *mx = prt_workspace(rt, (size_t)3 * (size_t)N), *sums = mx + N;
    for (int64_t n = 0; n < N; n++) {
        const float *x = logits + n * V_local;
        float m = -INFINITY;
        for (int64_t j = 0; j < V_local; j++) m = x[j] > m ? x[j] : m;
        mx[n] = m;
    }
    PRT_CHECK(N <= INT_MAX / 2, "xent: %lld rows is too many for one all-reduce", (long long)N);
    if (S > 1) {
        double t = prt_trace_start(rt);
        prt_block_begin("cross-entropy max all-reduce", axis);
        PRT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, mx, (int)N, MPI_FLOAT, MPI_MAX, prt_axis_comm(rt, axis)));
        prt_block_end();
        PRT_TRACE_END(rt, "xent_allreduce_max", "comm", t, N * 4, axis);
    }
    for (int64_t n = 0; n < N; n++) {
        const float *x = logits + n * V_local;
        double s = 0.0;
        for (int64_t j = 0; j < V_local; j++) s += exp((double)(x[j] - mx[n]));
        sums[n] = (float)s;
        int64_t j = (int64_t)targets[n] - vocab_offset;
        sums[N + n] = j >= 0 && j < V_local ? x[j] : 0.0f;
    }
    if (S > 1) {
        double t = prt_trace_start(rt);
        prt_block_begin("cross-entropy sum all-reduce", axis);
        PRT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, (int)(2 * N), MPI_FLOAT, MPI_SUM, prt_axis_comm(rt, axis)));
        prt_block_end();
        PRT_TRACE_END(rt, "xent_allreduce_sum", "comm", t, N * 8, axis);
    }
    double loss = 0.0;
    for (int64_t n = 0; n < N; n++) {
        float lse = mx[n] + logf(sums[n]);
        stats[2 * n] = mx[n];
        stats[2 * n + 1] = lse;
        loss += (double)lse - (double)sums[N + n];
    }
    *loss_sum += (float)loss;
    int owner = prt_coord(rt, axis) == 0;
    for (int a = 0; a < PRT_MAX_AXES; a++)
        if ((rt->loss_replica_axes >> a & 1) && prt_coord(rt, a) != 0) owner = 0;
    if (owner) prt_add_step_loss(rt, loss);
    OP_END(rt, "xent_fwd");
}

void prt_xent_bwd(prt *rt, void *dlogits_, const void *logits_, const void *stats_, const void *targets_, int64_t N,
                  int64_t V_local, int64_t vocab_offset, double scale) {
    OP_BEGIN(rt);
    float *dlogits = dlogits_;
    const float *logits = logits_, *stats = stats_;
    const int32_t *targets = targets_;
    float s = (float)scale;
    for (int64_t n = 0; n < N; n++) {
        const float *x = logits + n * V_local;
        float *d = dlogits + n * V_local, lse = stats[2 * n + 1];
        int64_t target = (int64_t)targets[n] - vocab_offset;
        for (int64_t j = 0; j < V_local; j++) {
            float p = expf(x[j] - lse);
            d[j] += s * (p - (j == target ? 1.0f : 0.0f));
        }
    }
    OP_END(rt, "xent_bwd");
}

/* ---------------------------------------------------------------- optimizers */

void prt_adamw(prt *rt, void *param_, void *master_, const void *grad_, void *m_, void *v_, int64_t n, int64_t step,
               double lr, double beta1, double beta2, double eps, double weight_decay) {
    OP_BEGIN(rt);
    PRT_CHECK(step >= 1, "adamw: step counts from 1, got %lld", (long long)step);
    float *param = param_, *master = master_, *m = m_, *v = v_;
    const float *grad = grad_;
    float *p = master ? master : param;
    float b1 = (float)beta1, b2 = (float)beta2, lr_f = (float)lr, eps_f = (float)eps, wd = (float)weight_decay;
    float bc1 = (float)(1.0 - pow(beta1, (double)step)), bc2 = (float)(1.0 - pow(beta2, (double)step));
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        float mhat = m[i] / bc1, vhat = v[i] / bc2;
        p[i] -= lr_f * (mhat / (sqrtf(vhat) + eps_f) + wd * p[i]);
        if (master) param[i] = p[i];
    }
    OP_END(rt, "adamw");
}

void prt_sgd(prt *rt, void *param_, void *master_, const void *grad_, void *mom_, int64_t n, double lr,
             double momentum, double weight_decay) {
    OP_BEGIN(rt);
    float *param = param_, *master = master_, *mom = mom_;
    const float *grad = grad_;
    float *p = master ? master : param;
    float lr_f = (float)lr, mu = (float)momentum, wd = (float)weight_decay;
    for (int64_t i = 0; i < n; i++) {
        float d = grad[i] + wd * p[i];
        if (mom) {
            mom[i] = mu * mom[i] + d;
            d = mom[i];
        }
        p[i] -= lr_f * d;
        if (master) param[i] = p[i];
    }
    OP_END(rt, "sgd");
}

void prt_loss_replicas(prt *rt, int64_t axis_mask) { rt->loss_replica_axes = axis_mask; }
