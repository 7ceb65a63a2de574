/*
 * prt_cpu_fast.c — the fp32 paths of the CPU backend's non-GEMM ops (contracts in
 * prt_cpu_fast.h): OpenMP across the BLAS's thread count, `omp simd` on the
 * inner loops so sums along a row vectorise (fp32 lanes), and prt_math.h's
 * branch-free element math (rational tanh, prt_expf_fast).
 *
 * Every kernel is built three times (PRT_FAST_CLONES, prt_cpu_fast.h): for
 * AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and the x86-64 baseline, and the loader
 * runs the widest one the CPU has.  The baseline's SSE2 cannot compare 64-bit
 * integers or convert them to float in a vector, so loops like cross-entropy's
 * (j == target) did not vectorise at all there.  This file is compiled without
 * FMA contraction (CMakeLists.txt), so each clone computes every element in the
 * same bits; only the order of the lane-parallel sums follows the vector width.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>  /* free */
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_thread_num(void) { return 0; }
#endif

#include "prt_cpu_fast.h"
#include "prt_internal.h"
#include "prt_math.h"

/* Below this many elements an op runs on the calling thread: waking the other
 * threads costs more than the work.  On a combined `parallel for simd` the test
 * is written `if (parallel : ...)`: an `if` without the modifier applies to the
 * simd construct too (OpenMP 5.0 gave simd an if clause), and a false one runs
 * the loop unvectorised, 3-4x slower on one thread. */
#define PAR_MIN 32768

int prt_cpu_threads(void) {
    int n = openblas_get_num_threads();
    return n > 0 ? n : 1;
}

/* The columns [*c0, *c1) of thread `t` of `nt` over C, in chunks of 16 floats
 * (one cache line) so no two threads write the same line. */
static void column_range(int64_t C, int t, int nt, int64_t *c0, int64_t *c1) {
    int64_t lines = (C + 15) / 16, per = (lines + nt - 1) / nt;
    *c0 = t * per * 16 < C ? t * per * 16 : C;
    *c1 = (t + 1) * per * 16 < C ? (t + 1) * per * 16 : C;
}

/* ---------------------------------------------------------------- zero */

PRT_FAST_CLONES void prt_fast_zero(void *buf, size_t bytes) {
    int nt = prt_cpu_threads(), par = nt > 1 && bytes >= 4 * PAR_MIN;
    size_t lines = (bytes + 63) / 64, per = (lines + (size_t)nt - 1) / (size_t)nt;
#pragma omp parallel num_threads(nt) if (par)
    {
        size_t t = par ? (size_t)omp_get_thread_num() : 0, b0 = t * per * 64, b1 = par ? b0 + per * 64 : bytes;
        if (b1 > bytes) b1 = bytes;
        if (b0 < b1) memset((char *)buf + b0, 0, b1 - b0);
    }
}

PRT_FAST_CLONES void prt_fast_copy(void *dst, const void *src, size_t bytes) {
    const char *s = src;
    char *d = dst;
    int nt = prt_cpu_threads(), par = nt > 1 && bytes >= 4 * PAR_MIN && (d + bytes <= s || s + bytes <= d);
    if (!par) {
        memmove(dst, src, bytes);
        return;
    }
    size_t lines = (bytes + 63) / 64, per = (lines + (size_t)nt - 1) / (size_t)nt;
#pragma omp parallel num_threads(nt)
    {
        size_t b0 = (size_t)omp_get_thread_num() * per * 64, b1 = b0 + per * 64;
        if (b1 > bytes) b1 = bytes;
        if (b0 < b1) memcpy(d + b0, s + b0, b1 - b0);
    }
}

/* ---------------------------------------------------------------- norms */

PRT_FAST_CLONES void prt_fast_layernorm_fwd(float *out, float *mean, float *rstd, const float *in, const float *w, const float *b,
                            int64_t N, int64_t C, double eps) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * C >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *x = in + n * C;
        float *o = out + n * C;
        double s = 0.0, v = 0.0;
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < C; c++) s += x[c];
        double m = s / (double)C;
#pragma omp simd reduction(+ : v)
        for (int64_t c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        double r = 1.0 / sqrt(v / (double)C + eps);
        if (b) {
#pragma omp simd
            for (int64_t c = 0; c < C; c++) o[c] = (float)((x[c] - m) * r) * w[c] + b[c];
        } else {
#pragma omp simd
            for (int64_t c = 0; c < C; c++) o[c] = (float)((x[c] - m) * r) * w[c];
        }
        if (mean) mean[n] = (float)m;
        if (rstd) rstd[n] = (float)r;
    }
}

/* The norms' backward runs in NORM_BWD_PARTS fixed blocks of rows (fewer when
 * N is smaller), each on one thread: a block's rows are read once for their
 * input gradients and their terms of the weight (and bias) gradients, summed
 * in row order into the block's own partial sums; the partial sums are then
 * added to dw (db) in block order, a column range per thread.  The blocks
 * depend on N alone, so the results do not depend on the thread count.
 * norm_parts: the block count, and with `sums` the [parts][2][C] partial
 * sums, zeroed (prt_xcalloc: a run out of memory stops with a message). */
#define NORM_BWD_PARTS 8

static float *norm_parts(int64_t N, int64_t C, int sums, int64_t *parts) {
    *parts = N < NORM_BWD_PARTS ? (N > 0 ? N : 1) : NORM_BWD_PARTS;
    return sums ? prt_xcalloc((size_t)(*parts * 2 * C), sizeof(float)) : NULL;
}

/* dw (db: the second row of each part; either may be NULL) += the parts' sums, in part order. */
static inline __attribute__((always_inline)) void norm_parts_add(float *dw, float *db, const float *part,
                                                                  int64_t parts, int64_t C, int nt, int par) {
#pragma omp parallel num_threads(nt) if (par)
    {
        int64_t c0, c1;
        column_range(C, par ? omp_get_thread_num() : 0, par ? nt : 1, &c0, &c1);
        for (int64_t p = 0; p < parts; p++) {
            const float *pw = part + p * 2 * C, *pb = pw + C;
            if (dw)
#pragma omp simd
                for (int64_t c = c0; c < c1; c++) dw[c] += pw[c];
            if (db)
#pragma omp simd
                for (int64_t c = c0; c < c1; c++) db[c] += pb[c];
        }
    }
}

PRT_FAST_CLONES void prt_fast_layernorm_bwd(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                            const float *mean, const float *rstd, int64_t N, int64_t C, int write) {
    int nt = prt_cpu_threads(), par = nt > 1 && N * C >= PAR_MIN;
    int64_t parts;
    float *part = norm_parts(N, C, dw || db, &parts);
    if (!din && !part) return;
#pragma omp parallel for num_threads(nt) if (par) schedule(static)
    for (int64_t p = 0; p < parts; p++) {
        float *pw = part ? part + p * 2 * C : NULL, *pb = pw ? pw + C : NULL;
        for (int64_t n = N * p / parts; n < N * (p + 1) / parts; n++) {
            const float *x = in + n * C, *g = dout + n * C;
            float m = mean[n], r = rstd[n];
            if (pw && dw)
#pragma omp simd
                for (int64_t c = 0; c < C; c++) pw[c] += (x[c] - m) * r * g[c];
            if (pb && db)
#pragma omp simd
                for (int64_t c = 0; c < C; c++) pb[c] += g[c];
            if (!din) continue;
            float *d = din + n * C;
            double dm = 0.0, dnm = 0.0;
#pragma omp simd reduction(+ : dm, dnm)
            for (int64_t c = 0; c < C; c++) {
                float norm = (x[c] - m) * r, dnorm = w[c] * g[c];
                dm += dnorm;
                dnm += dnorm * norm;
            }
            dm /= (double)C;
            dnm /= (double)C;
            if (write) {
#pragma omp simd
                for (int64_t c = 0; c < C; c++) {
                    float norm = (x[c] - m) * r, dnorm = w[c] * g[c];
                    d[c] = (float)(r * (dnorm - dm - norm * dnm));
                }
            } else {
#pragma omp simd
                for (int64_t c = 0; c < C; c++) {
                    float norm = (x[c] - m) * r, dnorm = w[c] * g[c];
                    d[c] += (float)(r * (dnorm - dm - norm * dnm));
                }
            }
        }
    }
    if (part) norm_parts_add(dw, db, part, parts, C, nt, par);
    free(part);
}

PRT_FAST_CLONES void prt_fast_rmsnorm_fwd(float *out, float *rstd, const float *in, const float *w, int64_t N, int64_t C, double eps) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * C >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *x = in + n * C;
        float *o = out + n * C;
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int64_t c = 0; c < C; c++) ss += (double)x[c] * x[c];
        double r = 1.0 / sqrt(ss / (double)C + eps);
#pragma omp simd
        for (int64_t c = 0; c < C; c++) o[c] = (float)(x[c] * r) * w[c];
        if (rstd) rstd[n] = (float)r;
    }
}

PRT_FAST_CLONES void prt_fast_rmsnorm_bwd(float *din, float *dw, const float *dout, const float *in, const float *w,
                          const float *rstd, int64_t N, int64_t C, int write) {
    int nt = prt_cpu_threads(), par = nt > 1 && N * C >= PAR_MIN;
    int64_t parts;
    float *part = norm_parts(N, C, dw != NULL, &parts);
    if (!din && !part) return;
#pragma omp parallel for num_threads(nt) if (par) schedule(static)
    for (int64_t p = 0; p < parts; p++) {
        float *pw = part ? part + p * 2 * C : NULL;
        for (int64_t n = N * p / parts; n < N * (p + 1) / parts; n++) {
            const float *x = in + n * C, *g = dout + n * C;
            if (pw) {
                float rf = rstd[n];
#pragma omp simd
                for (int64_t c = 0; c < C; c++) pw[c] += (float)(x[c] * (double)rf) * g[c];
            }
            if (!din) continue;
            float *d = din + n * C;
            double r = rstd[n], dot = 0.0;  /* dot = sum_c dnorm_c x_c */
#pragma omp simd reduction(+ : dot)
            for (int64_t c = 0; c < C; c++) dot += (double)w[c] * g[c] * x[c];
            double k = r * r * dot / (double)C;
            if (write) {
#pragma omp simd
                for (int64_t c = 0; c < C; c++) d[c] = (float)(r * ((double)w[c] * g[c] - x[c] * k));
            } else {
#pragma omp simd
                for (int64_t c = 0; c < C; c++) d[c] += (float)(r * ((double)w[c] * g[c] - x[c] * k));
            }
        }
    }
    if (part) norm_parts_add(dw, NULL, part, parts, C, nt, par);
    free(part);
}

/* ---------------------------------------------------------------- cross-entropy */

/* A row's max, its sum of exp(x - m) in double lanes, and its target's logit
 * (0 outside this rank's vocab slice): inlined into each clone below. */
static inline __attribute__((always_inline)) float row_max(const float *x, int64_t V) {
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < V; j++) m = x[j] > m ? x[j] : m;
    return m;
}
static inline __attribute__((always_inline)) float row_sumexp(const float *x, int64_t V, float m) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < V; j++) s += prt_expf_fast(x[j] - m);
    return (float)s;
}
static inline float row_target(const float *x, int32_t target, int64_t V, int64_t vocab_offset) {
    int64_t j = (int64_t)target - vocab_offset;
    return j >= 0 && j < V ? x[j] : 0.0f;
}

PRT_FAST_CLONES void prt_fast_row_max(float *mx, const float *logits, int64_t N, int64_t V) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * V >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) mx[n] = row_max(logits + n * V, V);
}

PRT_FAST_CLONES void prt_fast_row_sumexp(float *sums, float *target_logit, const float *logits, const float *mx,
                         const int32_t *targets, int64_t N, int64_t V, int64_t vocab_offset) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * V >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        sums[n] = row_sumexp(logits + n * V, V, mx[n]);
        target_logit[n] = row_target(logits + n * V, targets[n], V, vocab_offset);
    }
}

PRT_FAST_CLONES void prt_fast_row_max_sumexp(float *mx, float *sums, float *target_logit, const float *logits,
                                             const int32_t *targets, int64_t N, int64_t V, int64_t vocab_offset) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * V >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        mx[n] = row_max(logits + n * V, V);
        sums[n] = row_sumexp(logits + n * V, V, mx[n]);
        target_logit[n] = row_target(logits + n * V, targets[n], V, vocab_offset);
    }
}

PRT_FAST_CLONES void prt_fast_xent_bwd(float *dlogits, const float *logits, const float *stats, const int32_t *targets, int64_t N,
                       int64_t V, int64_t vocab_offset, float scale, int write) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * V >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *x = logits + n * V;
        float *d = dlogits + n * V, lse = stats[2 * n + 1];
        int64_t t = (int64_t)targets[n] - vocab_offset;
        if (write) {
#pragma omp simd
            for (int64_t j = 0; j < V; j++) d[j] = scale * (prt_expf_fast(x[j] - lse) - (j == t ? 1.0f : 0.0f));
        } else {
#pragma omp simd
            for (int64_t j = 0; j < V; j++) d[j] += scale * (prt_expf_fast(x[j] - lse) - (j == t ? 1.0f : 0.0f));
        }
    }
}

/* ---------------------------------------------------------------- attention's softmax */

PRT_FAST_CLONES void prt_fast_softmax_rows(float *S, int64_t ld, int64_t r, int64_t n, int64_t i0, int causal,
                                           int64_t zero_to) {
    for (int64_t i = 0; i < r; i++) {
        float *row = S + i * ld;
        int64_t len = causal ? i0 + i + 1 : n;
        /* the exponential and scaling loops run to a multiple of 16 where the
         * row has room: the masked columns up to it hold -inf, whose
         * exponential is exactly 0, so no loop ends in a scalar remainder */
        int64_t wide = (len + 15) / 16 * 16;
        if (wide > zero_to) wide = len;
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < len; j++) m = row[j] > m ? row[j] : m;
        for (int64_t j = len; j < wide; j++) row[j] = -INFINITY;
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < wide; j++) {
            float e = prt_expf_fast(row[j] - m);
            row[j] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
#pragma omp simd
        for (int64_t j = 0; j < wide; j++) row[j] *= inv;
        if (zero_to > wide) memset(row + wide, 0, sizeof(float) * (size_t)(zero_to - wide));
    }
}

PRT_FAST_CLONES void prt_fast_softmax_bwd_rows(float *dP, const float *P, int64_t ld, int64_t r, int64_t n) {
    for (int64_t i = 0; i < r; i++) {
        const float *p = P + i * ld;
        float *dp = dP + i * n;
        double dot = 0.0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < n; j++) dot += (double)p[j] * dp[j];
        float d = (float)dot;
#pragma omp simd
        for (int64_t j = 0; j < n; j++) dp[j] = p[j] * (dp[j] - d);
    }
}

/* ---------------------------------------------------------------- activations, bias, embedding */

PRT_FAST_CLONES void prt_fast_gelu_fwd(float *restrict out, const float *restrict in, int64_t n) {
    int nt = prt_cpu_threads();
#pragma omp parallel for simd num_threads(nt) if (parallel : nt > 1 && n >= PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = prt_gelu(in[i]);
}

PRT_FAST_CLONES void prt_fast_gelu_bwd(float *restrict din, const float *restrict in, const float *restrict dout, int64_t n,
                       int write) {
    int nt = prt_cpu_threads();
    if (write) {
#pragma omp parallel for simd num_threads(nt) if (parallel : nt > 1 && n >= PAR_MIN) schedule(static)
        for (int64_t i = 0; i < n; i++) din[i] = prt_gelu_grad(in[i]) * dout[i];
    } else {
#pragma omp parallel for simd num_threads(nt) if (parallel : nt > 1 && n >= PAR_MIN) schedule(static)
        for (int64_t i = 0; i < n; i++) din[i] += prt_gelu_grad(in[i]) * dout[i];
    }
}

PRT_FAST_CLONES void prt_fast_swiglu_fwd(float *out, const float *in, int64_t N, int64_t F) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * F >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *g = in + n * 2 * F, *u = g + F;
        float *o = out + n * F;
#pragma omp simd
        for (int64_t f = 0; f < F; f++) o[f] = prt_swiglu(g[f], u[f]);
    }
}

PRT_FAST_CLONES void prt_fast_swiglu_bwd(float *din, const float *in, const float *dout, int64_t N, int64_t F, int write) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * F >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *g = in + n * 2 * F, *u = g + F, *d = dout + n * F;
        float *dg = din + n * 2 * F, *du = dg + F;
        if (write) {
#pragma omp simd
            for (int64_t f = 0; f < F; f++) {
                dg[f] = prt_swiglu_dgate(d[f], g[f], u[f]);
                du[f] = prt_swiglu_dup(d[f], g[f]);
            }
        } else {
#pragma omp simd
            for (int64_t f = 0; f < F; f++) {
                dg[f] += prt_swiglu_dgate(d[f], g[f], u[f]);
                du[f] += prt_swiglu_dup(d[f], g[f]);
            }
        }
    }
}

PRT_FAST_CLONES void prt_fast_bias_fwd(float *out, const float *in, const float *b, int64_t N, int64_t M) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * M >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *x = in + n * M;
        float *o = out + n * M;
#pragma omp simd
        for (int64_t j = 0; j < M; j++) o[j] = x[j] + b[j];
    }
}

PRT_FAST_CLONES void prt_fast_rows_fill(float *out, int64_t ld, const float *row, int64_t N, int64_t M) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * M >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) memcpy(out + n * ld, row, (size_t)M * sizeof(float));
}

PRT_FAST_CLONES void prt_fast_bias_bwd(float *db, const float *dout, int64_t N, int64_t M) {
    int nt = prt_cpu_threads(), par = nt > 1 && N * M >= PAR_MIN;
#pragma omp parallel num_threads(nt) if (par)
    {
        int64_t c0, c1;
        column_range(M, par ? omp_get_thread_num() : 0, par ? nt : 1, &c0, &c1);
        for (int64_t n = 0; n < N; n++) {
            const float *g = dout + n * M;
#pragma omp simd
            for (int64_t j = c0; j < c1; j++) db[j] += g[j];
        }
    }
}

PRT_FAST_CLONES void prt_fast_add(float *out, const float *a, const float *b, int64_t n) {
    int nt = prt_cpu_threads();
#pragma omp parallel for simd num_threads(nt) if (parallel : nt > 1 && n >= PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* The sum of squares of x[i0, i1) in double over 16 lanes (element i in lane
 * i mod 16, the lanes added in order at the end): 16 independent chains instead
 * of one, and every clone adds the same elements in the same order.  Inlined
 * into prt_fast_sumsq's clones, so each vectorises it at its own width. */
static inline __attribute__((always_inline)) double sumsq_lanes(const float *x, int64_t i0, int64_t i1) {
    double lane[16] = {0};
    int64_t i = i0;
    for (; i + 16 <= i1; i += 16)
        for (int j = 0; j < 16; j++) lane[j] += (double)x[i + j] * x[i + j];
    for (int j = 0; i < i1; i++, j++) lane[j] += (double)x[i] * x[i];
    double s = 0.0;
    for (int j = 0; j < 16; j++) s += lane[j];
    return s;
}

#define SUMSQ_BLOCKS 1024

PRT_FAST_CLONES double prt_fast_sumsq(const float *x, int64_t n) {
    /* blocks fixed by n alone (at least PAR_MIN elements, a multiple of 16, at
     * most SUMSQ_BLOCKS of them), their sums added in block order: the result
     * is the same whatever the thread count */
    int64_t block = (n + SUMSQ_BLOCKS - 1) / SUMSQ_BLOCKS;
    block = block < PAR_MIN ? PAR_MIN : (block + 15) / 16 * 16;
    int64_t nb = (n + block - 1) / block;
    double part[SUMSQ_BLOCKS];
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && nb > 1) schedule(static)
    for (int64_t b = 0; b < nb; b++) part[b] = sumsq_lanes(x, b * block, b + 1 < nb ? (b + 1) * block : n);
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++) s += part[b];
    return s;
}

PRT_FAST_CLONES void prt_fast_embed_fwd(float *out, const int32_t *tokens, const float *wte, int64_t N, int64_t C,
                        int64_t vocab_local, int64_t vocab_offset) {
    int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && N * C >= PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        int64_t row = (int64_t)tokens[n] - vocab_offset;
        if (row >= 0 && row < vocab_local) memcpy(out + n * C, wte + row * C, (size_t)C * sizeof(float));
        else memset(out + n * C, 0, (size_t)C * sizeof(float));
    }
}

PRT_FAST_CLONES void prt_fast_embed_bwd(float *dwte, const int32_t *tokens, const float *dout, int64_t N, int64_t C,
                        int64_t vocab_local, int64_t vocab_offset) {
    int nt = prt_cpu_threads(), par = nt > 1 && N * C >= PAR_MIN;
#pragma omp parallel num_threads(nt) if (par)
    {
        int64_t c0, c1;
        column_range(C, par ? omp_get_thread_num() : 0, par ? nt : 1, &c0, &c1);
        for (int64_t n = 0; n < N; n++) {
            int64_t row = (int64_t)tokens[n] - vocab_offset;
            if (row < 0 || row >= vocab_local) continue;
            float *d = dwte + row * C;
            const float *g = dout + n * C;
#pragma omp simd
            for (int64_t c = c0; c < c1; c++) d[c] += g[c];
        }
    }
}

/* ---------------------------------------------------------------- AdamW */

PRT_FAST_CLONES void prt_fast_adamw(float *restrict param, const float *restrict grad, float *restrict m, float *restrict v, int64_t n,
                    int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay) {
    prt_adamw_args a = prt_adamw_prepare(step, lr, beta1, beta2, eps, weight_decay);
    int nt = prt_cpu_threads();
#pragma omp parallel for simd num_threads(nt) if (parallel : nt > 1 && n >= PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float mi = m[i], vi = v[i];
        param[i] = prt_adamw_update(&a, param[i], grad[i], &mi, &vi);
        m[i] = mi;
        v[i] = vi;
    }
}

/* AdamW with an fp32 master over bf16 parameters and gradients: each gradient
 * widened, the master stepped, the parameter its rounding -- prt_adamw_element
 * element for element (the same bits), in one vectorised pass instead of a
 * load and a store through the dtype switch per operand. */
PRT_FAST_CLONES void prt_fast_adamw_bf16(uint16_t *restrict param, float *restrict master,
                                         const uint16_t *restrict grad, float *restrict m, float *restrict v,
                                         int64_t n, int64_t step, double lr, double beta1, double beta2, double eps,
                                         double weight_decay) {
    prt_adamw_args a = prt_adamw_prepare(step, lr, beta1, beta2, eps, weight_decay);
    int nt = prt_cpu_threads();
#pragma omp parallel for simd num_threads(nt) if (parallel : nt > 1 && n >= PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float mi = m[i], vi = v[i];
        float pi = prt_adamw_update(&a, master[i], prt_bf16_to_f32(grad[i]), &mi, &vi);
        m[i] = mi;
        v[i] = vi;
        master[i] = pi;
        param[i] = prt_f32_to_bf16(pi);
    }
}
