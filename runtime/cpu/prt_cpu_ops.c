/*
 * prt_cpu_ops.c — the CPU backend, the reference every other backend is checked
 * against: the ops in simple loops plus OpenBLAS GEMMs, the element math of
 * prt_math.h, collectives over MPI (prt_mpi.c), and the backend table.
 * Semantics are parc_rt.h's: forward ops overwrite their outputs, backward ops
 * accumulate (+=) into input and parameter gradients.  Reductions over a row
 * accumulate in double; everything else is plain float arithmetic.  An op whose
 * float arguments are all stored as fp32 takes instead its threaded, vectorised
 * path in prt_cpu_fast.c (the same arithmetic, lane-parallel sums); these loops
 * are then the 16-bit storage paths.  Cross-entropy's exponentials are
 * prt_math.h's prt_expf_fast on both paths (and in the CUDA kernels).
 *
 * Storage.  A tensor argument is stored in the dtype of the registered buffer that
 * holds it, which the call's dtypes word declares (parc_rt.h): f32, bf16 or f16.
 * Arithmetic is always fp32.  Loops read through prt_load and write
 * through prt_store (round to nearest even), so an op on 16-bit storage equals the
 * fp32 op applied to the widened inputs, its outputs rounded; a backward op's +=
 * happens in fp32 and is rounded once.  The GEMM ops widen their 16-bit operands
 * into the runtime workspace (prt_workspace, booked to PRT_WORKSPACE): the weight
 * (and a weight gradient) whole, the row tensors PRT_CONVERT_ROWS rows at a time;
 * attention one head of one sample at a time.  The floats each op asks for are
 * the formulas at prt_expect_memory in parc_rt.h; all-f32 arguments ask for none.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prt_backend.h"
#include "prt_cpu_fast.h"
#include "prt_cpu_dropout.h"
#include "prt_cpu_gqa.h"
#include "prt_cpu_tensor.h"
#include "prt_internal.h"
#include "prt_scratch.h"

static int blas_dim(int64_t n, const char *what) {
    PRT_CHECK(n >= 0 && n <= INT_MAX, "%s: dimension %lld does not fit a BLAS int", what, (long long)n);
    return (int)n;
}

/* ---------------------------------------------------------------- tensors in their storage dtype */

/* Workspace for widened operands: one request per op (the scratch buffer keeps
 * only its largest request), carved front to back by take(). */
static float *scratch(prt *rt, int64_t floats) { return floats > 0 ? prt_workspace(rt, (size_t)floats) : NULL; }
static float *take(float **next, int64_t floats) {
    if (floats <= 0) return NULL;
    float *p = *next;
    *next += floats;
    return p;
}

/* An fp32 view of rows x cols elements of t starting at element off, rows `ld`
 * elements apart: t's own memory when it is fp32, else `slot` (rows x cols,
 * packed), filled with the widened values when `load`. */
typedef struct view {
    float *f;
    int ld;
} view;

static view view_of(tensor t, float *slot, int64_t off, int64_t rows, int64_t cols, int64_t ld, int load) {
    if (!is16(t)) return (view){(float *)t.p + off, (int)ld};
    if (load)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) slot[r * cols + c] = LD(t, off + r * ld + c);
    return (view){slot, (int)cols};
}
/* Rounds a view back into t (nothing to do when t is fp32: the view was t). */
static void view_store(tensor t, view v, int64_t off, int64_t rows, int64_t cols, int64_t ld) {
    if (!is16(t)) return;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) ST(t, off + r * ld + c, v.f[r * cols + c]);
}

/* Rows widened at a time: the ledger's R (prt_scratch.h). */
static int64_t chunk_rows(int64_t N, int any16) { return prt_scratch_rows(N, any16); }

/* The dtype of a byte-moving op's argument: any dtype. */
static int64_t any_dtype(prt *rt, int64_t dtypes, int index, const void *p, const char *op) {
    int64_t dtype = prt_arg_dtype(rt, dtypes, index, p, op);
    PRT_CHECK(dtype < PRT_NDTYPE, "%s: pointer argument %d has no dtype in the dtypes word %#llx", op, index + 1,
              (unsigned long long)dtypes);
    return dtype;
}

static void prt_cpu_zero(prt *rt, void *buf, int64_t n, int64_t dtypes) {
    int64_t dtype = any_dtype(rt, dtypes, 0, buf, "zero");
    if (n > 0) memset(buf, 0, (size_t)n * prt_dtype_size(dtype));
}

static void prt_cpu_copy(prt *rt, void *dst_, const void *src_, int64_t n, int64_t dtypes) {
    int64_t dd = any_dtype(rt, dtypes, 0, dst_, "copy"), ds = any_dtype(rt, dtypes, 1, src_, "copy");
    if (dd == ds) {
        if (n > 0 && dst_ != src_) memmove(dst_, src_, (size_t)n * prt_dtype_size(dd));
    } else {  /* a conversion: float dtypes only, never in place */
        tensor dst = ften(rt, dtypes, 0, dst_, "copy"), src = ften(rt, dtypes, 1, src_, "copy");
        for (int64_t i = 0; i < n; i++) ST(dst, i, LD(src, i));
    }
}

static void prt_cpu_acc(prt *rt, void *dst_, const void *src_, int64_t n, int64_t dtypes) {
    tensor dst = ften(rt, dtypes, 0, dst_, "acc"), src = ften(rt, dtypes, 1, src_, "acc");
    if (f32(dst) && f32(src)) {
        prt_fast_add(F32(dst), F32(dst), F32(src), n);
        return;
    }
    for (int64_t i = 0; i < n; i++) ST(dst, i, LD(dst, i) + LD(src, i));
}

/* Gradient clipping: the sum of squares in double, in element order (the
 * same result whatever the thread count), added to one fp32 accumulator. */
static void prt_cpu_sumsq(prt *rt, void *acc_, const void *x_, int64_t n, double weight, int64_t dtypes) {
    tensor acc = ften(rt, dtypes, 0, acc_, "sumsq"), x = ften(rt, dtypes, 1, x_, "sumsq");
    if (weight == 0.0) return;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double v = LD(x, i);
        s += v * v;
    }
    ST(acc, 0, (float)(LD(acc, 0) + weight * s));
}

static void prt_cpu_scale(prt *rt, void *x_, int64_t n, double factor, int64_t dtypes) {
    tensor x = ften(rt, dtypes, 0, x_, "scale");
    if (factor == 1.0) return;
    float f = (float)factor;
    for (int64_t i = 0; i < n; i++) ST(x, i, LD(x, i) * f);
}

/* ---------------------------------------------------------------- embedding */

static void prt_cpu_embed_fwd(prt *rt, void *out_, const void *tokens_, const void *wte_, int64_t N, int64_t C,
                       int64_t vocab_local, int64_t vocab_offset, int64_t dtypes) {
    tensor out = ften(rt, dtypes, 0, out_, "embed_fwd"), wte = ften(rt, dtypes, 2, wte_, "embed_fwd");
    const int32_t *tokens = i32_arg(rt, dtypes, 1, tokens_, "embed_fwd");
    if (f32(out) && f32(wte)) {
        prt_fast_embed_fwd(F32(out), tokens, F32(wte), N, C, vocab_local, vocab_offset);
        return;
    }
    for (int64_t n = 0; n < N; n++) {
        int64_t row = (int64_t)tokens[n] - vocab_offset;
        for (int64_t c = 0; c < C; c++) ST(out, n * C + c, row >= 0 && row < vocab_local ? LD(wte, row * C + c) : 0.0f);
    }
}

/* A 16-bit dwte sums each row's tokens in fp32 (in token order, as the fp32 op
 * does) and rounds once: a row buffer of C floats from the workspace. */
static void prt_cpu_embed_bwd(prt *rt, void *dwte_, const void *tokens_, const void *dout_, int64_t N, int64_t C,
                       int64_t vocab_local, int64_t vocab_offset, int64_t dtypes) {
    tensor dwte = ften(rt, dtypes, 0, dwte_, "embed_bwd"), dout = ften(rt, dtypes, 2, dout_, "embed_bwd");
    const int32_t *tokens = i32_arg(rt, dtypes, 1, tokens_, "embed_bwd");
    if (f32(dwte) && f32(dout)) {
        prt_fast_embed_bwd(F32(dwte), tokens, F32(dout), N, C, vocab_local, vocab_offset);
        return;
    }
    float *acc = scratch(rt, prt_scratch_embed_bwd(C, is16(dwte)));
    for (int64_t n = 0; n < N; n++) {
        int64_t row = (int64_t)tokens[n] - vocab_offset;
        if (row < 0 || row >= vocab_local) continue;
        if (!acc) {
            float *d = (float *)dwte.p + row * C;
            for (int64_t c = 0; c < C; c++) d[c] += LD(dout, n * C + c);
            continue;
        }
        int seen = 0;  /* this row was summed at its first token */
        for (int64_t e = 0; e < n && !seen; e++) seen = tokens[e] == tokens[n];
        if (seen) continue;
        view a = view_of(dwte, acc, row * C, 1, C, C, 1);
        for (int64_t e = n; e < N; e++)
            if (tokens[e] == tokens[n])
                for (int64_t c = 0; c < C; c++) a.f[c] += LD(dout, e * C + c);
        view_store(dwte, a, row * C, 1, C, C);
    }
}

static void prt_cpu_pos_fwd(prt *rt, void *out_, const void *in_, const void *wpe_, int64_t B, int64_t T, int64_t C,
                     int64_t t_offset, int64_t dtypes) {
    tensor out = ften(rt, dtypes, 0, out_, "pos_fwd"), in = ften(rt, dtypes, 1, in_, "pos_fwd"),
           wpe = ften(rt, dtypes, 2, wpe_, "pos_fwd");
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t o = (b * T + t) * C, p = (t + t_offset) * C;
            for (int64_t c = 0; c < C; c++) ST(out, o + c, LD(in, o + c) + LD(wpe, p + c));
        }
}

static void prt_cpu_pos_bwd(prt *rt, void *dwpe_, void *din_, const void *dout_, int64_t B, int64_t T, int64_t C,
                     int64_t t_offset, int64_t dtypes) {
    tensor dwpe = ften(rt, dtypes, 0, dwpe_, "pos_bwd"), din = ften(rt, dtypes, 1, din_, "pos_bwd"),
           dout = ften(rt, dtypes, 2, dout_, "pos_bwd");
    if (dwpe.p)  /* each position sums its B samples in fp32, rounded once */
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++) {
                int64_t p = (t + t_offset) * C + c;
                float acc = LD(dwpe, p);
                for (int64_t b = 0; b < B; b++) acc += LD(dout, (b * T + t) * C + c);
                ST(dwpe, p, acc);
            }
    if (din.p)
        for (int64_t i = 0; i < B * T * C; i++) ST(din, i, LD(din, i) + LD(dout, i));
}

/* ---------------------------------------------------------------- norms */

static void prt_cpu_layernorm_fwd(prt *rt, void *out_, void *mean_, void *rstd_, const void *in_, const void *w_,
                           const void *b_, int64_t N, int64_t C, int64_t dtypes) {
    const char *op = "layernorm_fwd";
    tensor out = ften(rt, dtypes, 0, out_, op), mean = ften(rt, dtypes, 1, mean_, op),
           rstd = ften(rt, dtypes, 2, rstd_, op), in = ften(rt, dtypes, 3, in_, op),
           w = ften(rt, dtypes, 4, w_, op), b = ften(rt, dtypes, 5, b_, op);
    if (f32(out) && f32(mean) && f32(rstd) && f32(in) && f32(w) && f32(b)) {
        prt_fast_layernorm_fwd(F32(out), F32(mean), F32(rstd), F32(in), F32(w), F32(b), N, C, PRT_NORM_EPS);
        return;
    }
    for (int64_t n = 0; n < N; n++) {
        int64_t x = n * C;
        double s = 0.0, v = 0.0;
        for (int64_t c = 0; c < C; c++) s += LD(in, x + c);
        double m = s / (double)C;
        for (int64_t c = 0; c < C; c++) v += (LD(in, x + c) - m) * (LD(in, x + c) - m);
        double r = prt_norm_rstd(v / (double)C);
        for (int64_t c = 0; c < C; c++)
            ST(out, x + c, (float)((LD(in, x + c) - m) * r) * LD(w, c) + (b.p ? LD(b, c) : 0.0f));
        if (mean.p) ST(mean, n, (float)m);
        if (rstd.p) ST(rstd, n, (float)r);
    }
}

static void prt_cpu_layernorm_bwd(prt *rt, void *din_, void *dw_, void *db_, const void *dout_, const void *in_,
                           const void *w_, const void *mean_, const void *rstd_, int64_t N, int64_t C, int64_t dtypes) {
    const char *op = "layernorm_bwd";
    tensor din = ften(rt, dtypes, 0, din_, op), dw = ften(rt, dtypes, 1, dw_, op), db = ften(rt, dtypes, 2, db_, op),
           dout = ften(rt, dtypes, 3, dout_, op),
           in = ften(rt, dtypes, 4, in_, op), w = ften(rt, dtypes, 5, w_, op), mean = ften(rt, dtypes, 6, mean_, op),
           rstd = ften(rt, dtypes, 7, rstd_, op);
    if (f32(din) && f32(dw) && f32(db) && f32(dout) && f32(in) && f32(w) && f32(mean) && f32(rstd)) {
        prt_fast_layernorm_bwd(F32(din), F32(dw), F32(db), F32(dout), F32(in), F32(w), F32(mean), F32(rstd), N, C);
        return;
    }
    /* dw, db sum over the N rows in fp32 (their own memory when fp32), rounded once */
    float *s = scratch(rt, prt_scratch_layernorm_bwd(C, is16(dw), is16(db))), *dw_slot = take(&s, is16(dw) * C),
          *db_slot = take(&s, is16(db) * C);
    view dwv = {NULL, 0}, dbv = {NULL, 0};
    if (dw.p) dwv = view_of(dw, dw_slot, 0, 1, C, C, 1);
    if (db.p) dbv = view_of(db, db_slot, 0, 1, C, C, 1);
    for (int64_t n = 0; n < N; n++) {
        int64_t x = n * C;
        float m = LD(mean, n), r = LD(rstd, n);
        double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
        for (int64_t c = 0; c < C; c++) {
            float norm = (LD(in, x + c) - m) * r, dnorm = LD(w, c) * LD(dout, x + c);
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= (double)C;
        dnorm_norm_mean /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            float g = LD(dout, x + c), norm = (LD(in, x + c) - m) * r, dnorm = LD(w, c) * g;
            if (db.p) dbv.f[c] += g;
            if (dw.p) dwv.f[c] += norm * g;
            if (din.p) ST(din, x + c, LD(din, x + c) + (float)(r * (dnorm - dnorm_mean - norm * dnorm_norm_mean)));
        }
    }
    if (dw.p) view_store(dw, dwv, 0, 1, C, C);
    if (db.p) view_store(db, dbv, 0, 1, C, C);
}

static void prt_cpu_rmsnorm_fwd(prt *rt, void *out_, void *rstd_, const void *in_, const void *w_, int64_t N, int64_t C,
                                int64_t dtypes) {
    const char *op = "rmsnorm_fwd";
    tensor out = ften(rt, dtypes, 0, out_, op), rstd = ften(rt, dtypes, 1, rstd_, op),
           in = ften(rt, dtypes, 2, in_, op), w = ften(rt, dtypes, 3, w_, op);
    if (f32(out) && f32(rstd) && f32(in) && f32(w)) {
        prt_fast_rmsnorm_fwd(F32(out), F32(rstd), F32(in), F32(w), N, C, PRT_NORM_EPS);
        return;
    }
    for (int64_t n = 0; n < N; n++) {
        int64_t x = n * C;
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++) ss += (double)LD(in, x + c) * LD(in, x + c);
        double r = prt_norm_rstd(ss / (double)C);
        for (int64_t c = 0; c < C; c++) ST(out, x + c, (float)(LD(in, x + c) * r) * LD(w, c));
        if (rstd.p) ST(rstd, n, (float)r);
    }
}

static void prt_cpu_rmsnorm_bwd(prt *rt, void *din_, void *dw_, const void *dout_, const void *in_, const void *w_,
                         const void *rstd_, int64_t N, int64_t C, int64_t dtypes) {
    const char *op = "rmsnorm_bwd";
    tensor din = ften(rt, dtypes, 0, din_, op), dw = ften(rt, dtypes, 1, dw_, op),
           dout = ften(rt, dtypes, 2, dout_, op), in = ften(rt, dtypes, 3, in_, op),
           w = ften(rt, dtypes, 4, w_, op), rstd = ften(rt, dtypes, 5, rstd_, op);
    if (f32(din) && f32(dw) && f32(dout) && f32(in) && f32(w) && f32(rstd)) {
        prt_fast_rmsnorm_bwd(F32(din), F32(dw), F32(dout), F32(in), F32(w), F32(rstd), N, C);
        return;
    }
    float *dw_slot = scratch(rt, prt_scratch_rmsnorm_bwd(C, is16(dw)));  /* dw sums over the rows in fp32, rounded once */
    view dwv = {NULL, 0};
    if (dw.p) dwv = view_of(dw, dw_slot, 0, 1, C, C, 1);
    for (int64_t n = 0; n < N; n++) {
        int64_t x = n * C;
        double r = LD(rstd, n), dot = 0.0;  /* dot = sum_c dnorm_c x_c */
        for (int64_t c = 0; c < C; c++) dot += (double)LD(w, c) * LD(dout, x + c) * LD(in, x + c);
        double k = r * r * dot / (double)C;
        for (int64_t c = 0; c < C; c++) {
            float g = LD(dout, x + c), xc = LD(in, x + c);
            if (dw.p) dwv.f[c] += (float)(xc * r) * g;
            if (din.p) ST(din, x + c, LD(din, x + c) + (float)(r * ((double)LD(w, c) * g - xc * k)));
        }
    }
    if (dw.p) view_store(dw, dwv, 0, 1, C, C);
}

/* ---------------------------------------------------------------- linear */

/* out[N,M] = in[N,K] @ op(w), op(w) = w[K,M] or, transposed, w[M,K]^T. */
static void matmul_fwd(prt *rt, const char *op, void *out_, const void *in_, const void *w_, int64_t N, int64_t K,
                       int64_t M, int transposed, int64_t dtypes) {
    int n = blas_dim(N, op), k = blas_dim(K, op), m = blas_dim(M, op);
    if (!n || !m) return;
    tensor out = ften(rt, dtypes, 0, out_, op), in = ften(rt, dtypes, 1, in_, op), w = ften(rt, dtypes, 2, w_, op);
    int64_t R = chunk_rows(N, is16(in) || is16(out));
    float *s = scratch(rt, prt_scratch_matmul_fwd(K, M, N, is16(w), is16(in), is16(out)));
    float *w_slot = take(&s, is16(w) * K * M), *in_slot = take(&s, is16(in) * R * K),
          *out_slot = take(&s, is16(out) * R * M);
    view wv = transposed ? view_of(w, w_slot, 0, M, K, K, 1) : view_of(w, w_slot, 0, K, M, M, 1);
    for (int64_t r0 = 0; r0 < N; r0 += R) {
        int r = (int)(N - r0 < R ? N - r0 : R);
        view iv = view_of(in, in_slot, r0 * K, r, K, K, 1), ov = view_of(out, out_slot, r0 * M, r, M, M, 0);
        if (k)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasTrans : CblasNoTrans, r, m, k, 1.0f, iv.f, iv.ld,
                        wv.f, wv.ld, 0.0f, ov.f, ov.ld);
        else
            for (int i = 0; i < r; i++) memset(ov.f + (size_t)i * ov.ld, 0, (size_t)m * sizeof(float));
        view_store(out, ov, r0 * M, r, M, M);
    }
}

/* din[N,K] += dout[N,M] @ op(w)^T;  dw += in^T @ dout (w[K,M]) or dout^T @ in (transposed: w[M,K]). */
static void matmul_bwd(prt *rt, const char *op, void *din_, void *dw_, const void *dout_, const void *in_,
                       const void *w_, int64_t N, int64_t K, int64_t M, int transposed, int64_t dtypes) {
    int n = blas_dim(N, op), k = blas_dim(K, op), m = blas_dim(M, op);
    if (!n || !k || !m) return;
    tensor din = ften(rt, dtypes, 0, din_, op), dw = ften(rt, dtypes, 1, dw_, op),
           dout = ften(rt, dtypes, 2, dout_, op), in = ften(rt, dtypes, 3, in_, op),
           w = ften(rt, dtypes, 4, w_, op);
    int w16 = din.p && is16(w), dw16 = is16(dw), din16 = is16(din), in16 = dw.p && is16(in), dout16 = is16(dout);
    int64_t R = chunk_rows(N, dout16 || din16 || in16);
    float *s = scratch(rt, prt_scratch_matmul_bwd(K, M, N, din.p != NULL, dw.p != NULL, is16(w), dw16, is16(in), dout16, din16));
    float *w_slot = take(&s, w16 * K * M), *dw_slot = take(&s, dw16 * K * M), *dout_slot = take(&s, dout16 * R * M),
          *din_slot = take(&s, din16 * R * K), *in_slot = take(&s, in16 * R * K);
    int64_t wr = transposed ? M : K, wc = transposed ? K : M;  /* w and dw are [wr, wc] */
    view wv = {NULL, 0}, dwv = {NULL, 0};
    if (din.p) wv = view_of(w, w_slot, 0, wr, wc, wc, 1);
    if (dw.p) dwv = view_of(dw, dw_slot, 0, wr, wc, wc, 1);
    for (int64_t r0 = 0; r0 < N; r0 += R) {
        int r = (int)(N - r0 < R ? N - r0 : R);
        view dov = view_of(dout, dout_slot, r0 * M, r, M, M, 1);
        if (din.p) {
            view dv = view_of(din, din_slot, r0 * K, r, K, K, 1);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasNoTrans : CblasTrans, r, k, m, 1.0f, dov.f,
                        dov.ld, wv.f, wv.ld, 1.0f, dv.f, dv.ld);
            view_store(din, dv, r0 * K, r, K, K);
        }
        if (dw.p) {
            view iv = view_of(in, in_slot, r0 * K, r, K, K, 1);
            if (transposed)  /* dw[M,K] += dout^T @ in */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, k, r, 1.0f, dov.f, dov.ld, iv.f, iv.ld, 1.0f,
                            dwv.f, dwv.ld);
            else             /* dw[K,M] += in^T @ dout */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, m, r, 1.0f, iv.f, iv.ld, dov.f, dov.ld, 1.0f,
                            dwv.f, dwv.ld);
        }
    }
    if (dw.p) view_store(dw, dwv, 0, wr, wc, wc);
}

static void prt_cpu_matmul_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M,
                               int64_t dtypes) {
    matmul_fwd(rt, "matmul", out, in, w, N, K, M, 0, dtypes);
}

static void prt_cpu_matmul_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w,
                               int64_t N, int64_t K, int64_t M, int64_t dtypes) {
    matmul_bwd(rt, "matmul", din, dw, dout, in, w, N, K, M, 0, dtypes);
}

static void prt_cpu_matmul_t_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M,
                                 int64_t dtypes) {
    matmul_fwd(rt, "matmul_t", out, in, w, N, K, M, 1, dtypes);
}

static void prt_cpu_matmul_t_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w,
                                 int64_t N, int64_t K, int64_t M, int64_t dtypes) {
    matmul_bwd(rt, "matmul_t", din, dw, dout, in, w, N, K, M, 1, dtypes);
}

static void prt_cpu_bias_fwd(prt *rt, void *out_, const void *in_, const void *b_, int64_t N, int64_t M,
                                 int64_t dtypes) {
    tensor out = ften(rt, dtypes, 0, out_, "bias_fwd"), in = ften(rt, dtypes, 1, in_, "bias_fwd"),
           b = ften(rt, dtypes, 2, b_, "bias_fwd");
    if (f32(out) && f32(in) && f32(b)) {
        prt_fast_bias_fwd(F32(out), F32(in), F32(b), N, M);
        return;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < M; j++) ST(out, n * M + j, LD(in, n * M + j) + LD(b, j));
}

static void prt_cpu_bias_bwd(prt *rt, void *db_, const void *dout_, int64_t N, int64_t M, int64_t dtypes) {
    tensor db = ften(rt, dtypes, 0, db_, "bias_bwd"), dout = ften(rt, dtypes, 1, dout_, "bias_bwd");
    if (f32(db) && f32(dout)) {
        prt_fast_bias_bwd(F32(db), F32(dout), N, M);
        return;
    }
    if (!is16(db)) {
        float *d = (float *)db.p;
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < M; j++) d[j] += LD(dout, n * M + j);
    } else {  /* column sums in fp32 (the order of the fp32 op), rounded once */
        for (int64_t j = 0; j < M; j++) {
            float acc = LD(db, j);
            for (int64_t n = 0; n < N; n++) acc += LD(dout, n * M + j);
            ST(db, j, acc);
        }
    }
}

/* ---------------------------------------------------------------- activations */

/* The element math is prt_math.h's, shared with the CUDA kernels. */

static void prt_cpu_gelu_fwd(prt *rt, void *out_, const void *in_, int64_t n, int64_t dtypes) {
    tensor out = ften(rt, dtypes, 0, out_, "gelu_fwd"), in = ften(rt, dtypes, 1, in_, "gelu_fwd");
    if (out.dtype == PRT_F32 && in.dtype == PRT_F32) {
        prt_fast_gelu_fwd(F32(out), F32(in), n);
    } else {
        for (int64_t i = 0; i < n; i++) ST(out, i, prt_gelu(LD(in, i)));
    }
}

static void prt_cpu_gelu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n, int64_t dtypes) {
    tensor din = ften(rt, dtypes, 0, din_, "gelu_bwd"), in = ften(rt, dtypes, 1, in_, "gelu_bwd"),
           dout = ften(rt, dtypes, 2, dout_, "gelu_bwd");
    if (din.dtype == PRT_F32 && in.dtype == PRT_F32 && dout.dtype == PRT_F32) {
        prt_fast_gelu_bwd(F32(din), F32(in), F32(dout), n);
    } else {
        for (int64_t i = 0; i < n; i++) ST(din, i, LD(din, i) + prt_gelu_grad(LD(in, i)) * LD(dout, i));
    }
}

static void prt_cpu_relu_fwd(prt *rt, void *out_, const void *in_, int64_t n, int64_t dtypes) {
    tensor out = ften(rt, dtypes, 0, out_, "relu_fwd"), in = ften(rt, dtypes, 1, in_, "relu_fwd");
    for (int64_t i = 0; i < n; i++) {
        float x = LD(in, i);
        ST(out, i, x > 0.0f ? x : 0.0f);
    }
}

static void prt_cpu_relu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n, int64_t dtypes) {
    tensor din = ften(rt, dtypes, 0, din_, "relu_bwd"), in = ften(rt, dtypes, 1, in_, "relu_bwd"),
           dout = ften(rt, dtypes, 2, dout_, "relu_bwd");
    for (int64_t i = 0; i < n; i++)
        if (LD(in, i) > 0.0f) ST(din, i, LD(din, i) + LD(dout, i));
}

static void prt_cpu_swiglu_fwd(prt *rt, void *out_, const void *in_, int64_t N, int64_t F, int64_t dtypes) {
    tensor out = ften(rt, dtypes, 0, out_, "swiglu_fwd"), in = ften(rt, dtypes, 1, in_, "swiglu_fwd");
    if (f32(out) && f32(in)) {
        prt_fast_swiglu_fwd(F32(out), F32(in), N, F);
        return;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            float g = LD(in, n * 2 * F + f), up = LD(in, n * 2 * F + F + f);
            ST(out, n * F + f, prt_swiglu(g, up));
        }
}

static void prt_cpu_swiglu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t N, int64_t F,
                               int64_t dtypes) {
    tensor din = ften(rt, dtypes, 0, din_, "swiglu_bwd"), in = ften(rt, dtypes, 1, in_, "swiglu_bwd"),
           dout = ften(rt, dtypes, 2, dout_, "swiglu_bwd");
    if (f32(din) && f32(in) && f32(dout)) {
        prt_fast_swiglu_bwd(F32(din), F32(in), F32(dout), N, F);
        return;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            int64_t ig = n * 2 * F + f, iu = ig + F;
            float g = LD(in, ig), up = LD(in, iu), d = LD(dout, n * F + f);
            ST(din, ig, LD(din, ig) + prt_swiglu_dgate(d, g, up));
            ST(din, iu, LD(din, iu) + prt_swiglu_dup(d, g));
        }
}

static void prt_cpu_add_fwd(prt *rt, void *out_, const void *a_, const void *b_, int64_t n, int64_t dtypes) {
    tensor out = ften(rt, dtypes, 0, out_, "add_fwd"), a = ften(rt, dtypes, 1, a_, "add_fwd"),
           b = ften(rt, dtypes, 2, b_, "add_fwd");
    if (f32(out) && f32(a) && f32(b)) {
        prt_fast_add(F32(out), F32(a), F32(b), n);
        return;
    }
    for (int64_t i = 0; i < n; i++) ST(out, i, LD(a, i) + LD(b, i));
}

/* ---------------------------------------------------------------- attention */

/* P[T,T] = softmax(scale * Q K^T) of one head, causal mask when asked (masked
 * entries are exactly 0).  Rows of q and k are ldq, ldk floats apart. */
static void attention_probs(float *P, view q, view k, int T, int HD, int64_t causal) {
    float scale = 1.0f / sqrtf((float)HD);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HD, scale, q.f, q.ld, k.f, k.ld, 0.0f, P, T);
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

/* Dropout on the probabilities (attention_dropout_fwd/bwd): the mask of
 * element (b, h, i, j) is prt_dropout_keep of its global index, regenerated
 * wherever it is needed and never stored. */
typedef struct att_drop {
    uint64_t key;
    uint32_t threshold;
    float scale;
    int64_t first_sample, h_offset, NH_global;
} att_drop;

static att_drop att_drop_of(prt *rt, int64_t first_sample, int64_t h_offset, int64_t NH_global, int64_t NH,
                            int64_t step, int64_t layer, double p) {
    PRT_CHECK(p >= 0 && p < 1, "attention dropout: p = %g is outside [0, 1)", p);
    if (rt->eval_active) p = 0; /* evaluation runs the model without dropout */
    PRT_CHECK(first_sample >= 0 && h_offset >= 0 && h_offset + NH <= NH_global,
              "attention dropout: heads %lld..%lld of %lld", (long long)h_offset, (long long)(h_offset + NH),
              (long long)NH_global);
    return (att_drop){prt_dropout_key(rt->plan.seed, step, layer, 0), prt_dropout_threshold(p),
                      prt_dropout_scale(p), first_sample, h_offset, NH_global};
}

/* PD = P * M * scale for head h of sample b (P, PD: [T,T]; PD may be P). */
static void att_drop_apply(const att_drop *d, float *PD, const float *P, int64_t b, int64_t h, int T) {
    uint64_t base = (uint64_t)(((d->first_sample + b) * d->NH_global + d->h_offset + h) * T) * (uint64_t)T;
    for (int64_t e = 0; e < (int64_t)T * T; e++)
        PD[e] = prt_dropout_keep(d->key, base + (uint64_t)e, d->threshold) ? P[e] * d->scale : 0.0f;
}

/* Views of head h of sample b: q, k, v of qkv[B,T,3,NH,HD] (rows 3C apart). */
static void head_views(tensor qkv, float *slot, int64_t b, int64_t h, int T, int C, int HD, int load, view *q,
                       view *k, view *v) {
    int64_t base = (int64_t)b * T * 3 * C + h * HD, THD = (int64_t)T * HD;
    *q = view_of(qkv, slot, base, T, HD, 3 * C, load);
    *k = view_of(qkv, slot ? slot + THD : NULL, base + C, T, HD, 3 * C, load);
    *v = view_of(qkv, slot ? slot + 2 * THD : NULL, base + 2 * C, T, HD, 3 * C, load);
}
static void head_store(tensor qkv, view q, view k, view v, int64_t b, int64_t h, int T, int C, int HD) {
    int64_t base = (int64_t)b * T * 3 * C + h * HD;
    view_store(qkv, q, base, T, HD, 3 * C);
    view_store(qkv, k, base + C, T, HD, 3 * C);
    view_store(qkv, v, base + 2 * C, T, HD, 3 * C);
}

static void attention_fwd_heads(prt *rt, void *out_, void *probs_, const void *qkv_, int64_t B, int64_t T_, int64_t NH_,
                       int64_t HD_, int64_t causal, const att_drop *drop, int64_t dtypes) {
    int T = blas_dim(T_, "attention"), NH = blas_dim(NH_, "attention"), HD = blas_dim(HD_, "attention");
    int C = blas_dim(NH_ * HD_, "attention");
    blas_dim(3 * (int64_t)C, "attention");
    tensor out = ften(rt, dtypes, 0, out_, "attention_fwd"), probs = ften(rt, dtypes, 1, probs_, "attention_fwd"),
           qkv = ften(rt, dtypes, 2, qkv_, "attention_fwd");
    int64_t THD = (int64_t)T * HD, TT = (int64_t)T * T;
    int p_own = probs.p && !is16(probs);  /* P computed in the probs buffer itself */
    float *s = scratch(rt, drop ? prt_scratch_attention_dropout_fwd(T, HD, probs.p != NULL, is16(probs), is16(qkv),
                                                                    is16(out))
                                : prt_scratch_attention_fwd(T, HD, probs.p != NULL, is16(probs), is16(qkv), is16(out)));
    float *qkv_slot = take(&s, is16(qkv) * 3 * THD), *out_slot = take(&s, is16(out) * THD),
          *p_slot = take(&s, p_own ? 0 : TT), *pd_slot = take(&s, drop ? TT : 0);
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            view q, k, v;
            head_views(qkv, qkv_slot, b, h, T, C, HD, 1, &q, &k, &v);
            int64_t p_off = ((int64_t)b * NH + h) * TT;
            float *P = p_own ? (float *)probs.p + p_off : p_slot;
            attention_probs(P, q, k, T, HD, causal);
            if (probs.p && !p_own) view_store(probs, (view){P, T}, p_off, T, T, T);
            if (drop) att_drop_apply(drop, pd_slot, P, b, h, T);
            view o = view_of(out, out_slot, (int64_t)b * T * C + (int64_t)h * HD, T, HD, C, 0);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HD, T, 1.0f, drop ? pd_slot : P, T, v.f, v.ld,
                        0.0f, o.f, o.ld);
            view_store(out, o, (int64_t)b * T * C + (int64_t)h * HD, T, HD, C);
        }
}

static void attention_bwd_heads(prt *rt, void *dqkv_, const void *dout_, const void *qkv_, const void *probs_, int64_t B,
                       int64_t T_, int64_t NH_, int64_t HD_, int64_t causal, const att_drop *drop, int64_t dtypes) {
    int T = blas_dim(T_, "attention"), NH = blas_dim(NH_, "attention"), HD = blas_dim(HD_, "attention");
    int C = blas_dim(NH_ * HD_, "attention");
    blas_dim(3 * (int64_t)C, "attention");
    tensor dqkv = ften(rt, dtypes, 0, dqkv_, "attention_bwd"), dout = ften(rt, dtypes, 1, dout_, "attention_bwd"),
           qkv = ften(rt, dtypes, 2, qkv_, "attention_bwd"), probs = ften(rt, dtypes, 3, probs_, "attention_bwd");
    int64_t THD = (int64_t)T * HD, TT = (int64_t)T * T;
    /* dP [T,T] always; P [T,T] unless read from an fp32 probs buffer */
    int p_own = probs.p && !is16(probs);
    float *s = scratch(rt, drop ? prt_scratch_attention_dropout_bwd(T, HD, probs.p != NULL, is16(probs), is16(qkv),
                                                                    is16(dqkv), is16(dout))
                                : prt_scratch_attention_bwd(T, HD, probs.p != NULL, is16(probs), is16(qkv), is16(dqkv),
                                                            is16(dout)));
    float *dP = take(&s, TT), *p_slot = take(&s, p_own ? 0 : TT), *qkv_slot = take(&s, is16(qkv) * 3 * THD),
          *dqkv_slot = take(&s, is16(dqkv) * 3 * THD), *dout_slot = take(&s, is16(dout) * THD),
          *pd_slot = take(&s, drop ? TT : 0);
    float scale = 1.0f / sqrtf((float)HD);
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            view q, k, v, dq, dk, dv;
            head_views(qkv, qkv_slot, b, h, T, C, HD, 1, &q, &k, &v);
            head_views(dqkv, dqkv_slot, b, h, T, C, HD, 1, &dq, &dk, &dv);
            int64_t p_off = ((int64_t)b * NH + h) * TT, o_off = (int64_t)b * T * C + (int64_t)h * HD;
            const float *P = p_own ? (const float *)probs.p + p_off : p_slot;
            if (!probs.p) attention_probs(p_slot, q, k, T, HD, causal);
            else if (!p_own) view_of(probs, p_slot, p_off, T, T, T, 1);
            view dO = view_of(dout, dout_slot, o_off, T, HD, C, 1);
            /* with dropout O = PD V, PD = P * M * scale: dV += PD^T dO, and dP = (dO V^T) * M * scale */
            if (drop) att_drop_apply(drop, pd_slot, P, b, h, T);
            /* dV += P^T dO;  dP = dO V^T */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HD, T, 1.0f, drop ? pd_slot : P, T, dO.f, dO.ld,
                        1.0f, dv.f, dv.ld);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HD, 1.0f, dO.f, dO.ld, v.f, v.ld, 0.0f, dP, T);
            if (drop) att_drop_apply(drop, dP, dP, b, h, T);
            /* dS = P * (dP - rowsum(P * dP)), in place in dP (masked entries: P = 0 -> 0) */
            for (int t = 0; t < T; t++) {
                const float *p = P + (size_t)t * T;
                float *dp = dP + (size_t)t * T;
                double dot = 0.0;
                for (int j = 0; j < T; j++) dot += (double)p[j] * dp[j];
                for (int j = 0; j < T; j++) dp[j] = p[j] * (dp[j] - (float)dot);
            }
            /* dQ += scale dS K;  dK += scale dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HD, T, scale, dP, T, k.f, k.ld, 1.0f, dq.f,
                        dq.ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HD, T, scale, dP, T, q.f, q.ld, 1.0f, dk.f, dk.ld);
            head_store(dqkv, dq, dk, dv, b, h, T, C, HD);
        }
}

/* Attention's GEMMs are one head's (T x T x HD): too small to split over BLAS
 * threads, which only contend (measured: the 41 M bench model's attention_bwd
 * 1091 ms per step at 2 BLAS threads, against under 151 ms at 1), so they run
 * on one. */
static void prt_cpu_attention_fwd(prt *rt, void *out, void *probs, const void *qkv, int64_t B, int64_t T, int64_t NH,
                                  int64_t HD, int64_t causal, int64_t dtypes) {
    int nt = openblas_get_num_threads();
    if (nt > 1) openblas_set_num_threads(1);
    attention_fwd_heads(rt, out, probs, qkv, B, T, NH, HD, causal, NULL, dtypes);
    if (nt > 1) openblas_set_num_threads(nt);
}

static void prt_cpu_attention_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs, int64_t B,
                                  int64_t T, int64_t NH, int64_t HD, int64_t causal, int64_t dtypes) {
    int nt = openblas_get_num_threads();
    if (nt > 1) openblas_set_num_threads(1);
    attention_bwd_heads(rt, dqkv, dout, qkv, probs, B, T, NH, HD, causal, NULL, dtypes);
    if (nt > 1) openblas_set_num_threads(nt);
}

static void prt_cpu_attention_dropout_fwd(prt *rt, void *out, void *probs, const void *qkv, int64_t B, int64_t T,
                                          int64_t NH, int64_t HD, int64_t causal, int64_t first_sample, int64_t h_offset,
                                          int64_t NH_global, int64_t step, int64_t layer, double p, int64_t dtypes) {
    att_drop d = att_drop_of(rt, first_sample, h_offset, NH_global, NH, step, layer, p);
    int nt = openblas_get_num_threads();
    if (nt > 1) openblas_set_num_threads(1);
    attention_fwd_heads(rt, out, probs, qkv, B, T, NH, HD, causal, &d, dtypes);
    if (nt > 1) openblas_set_num_threads(nt);
}

static void prt_cpu_attention_dropout_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs,
                                          int64_t B, int64_t T, int64_t NH, int64_t HD, int64_t causal,
                                          int64_t first_sample, int64_t h_offset, int64_t NH_global, int64_t step,
                                          int64_t layer, double p, int64_t dtypes) {
    att_drop d = att_drop_of(rt, first_sample, h_offset, NH_global, NH, step, layer, p);
    int nt = openblas_get_num_threads();
    if (nt > 1) openblas_set_num_threads(1);
    attention_bwd_heads(rt, dqkv, dout, qkv, probs, B, T, NH, HD, causal, &d, dtypes);
    if (nt > 1) openblas_set_num_threads(nt);
}

/* ---------------------------------------------------------------- cross-entropy */

static void prt_cpu_xent_fwd(prt *rt, void *loss_sum_, void *stats_, const void *logits_, const void *targets_,
                             int64_t N, int64_t V_local, int64_t vocab_offset, int64_t axis, int64_t dtypes) {
    tensor loss_sum = ften(rt, dtypes, 0, loss_sum_, "xent_fwd"), stats = ften(rt, dtypes, 1, stats_, "xent_fwd"),
           logits = ften(rt, dtypes, 2, logits_, "xent_fwd");
    const int32_t *targets = i32_arg(rt, dtypes, 3, targets_, "xent_fwd");
    int S = prt_axis_size(rt, axis);
    prt_dump_logits(rt, logits.p, logits.dtype, N, V_local, vocab_offset, axis);
    /* scratch: row max [N], then (sum of exp [N], target logit [N]) for one all-reduce */
    float *mx = prt_workspace(rt, (size_t)prt_scratch_xent_fwd(N)), *sums = mx + N;
    int fast = f32(logits);
    if (fast) prt_fast_row_max(mx, F32(logits), N, V_local);
    for (int64_t n = 0; n < N && !fast; n++) {
        float m = -INFINITY;
        for (int64_t j = 0; j < V_local; j++) {
            float x = LD(logits, n * V_local + j);
            m = x > m ? x : m;
        }
        mx[n] = m;
    }
    PRT_CHECK(N <= INT_MAX / 2, "xent: %lld rows is too many for one all-reduce", (long long)N);
    if (S > 1) {
        double t = prt_trace_start(rt);
        MPI_Request req;
        PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, mx, (int)N, MPI_FLOAT, MPI_MAX, prt_axis_comm(rt, axis), &req));
        prt_wait(rt, &req, NULL, "cross-entropy max all-reduce", axis);
        PRT_TRACE_END(rt, "xent_allreduce_max", "comm", t, N * 4, axis);
    }
    if (fast) prt_fast_row_sumexp(sums, sums + N, F32(logits), mx, targets, N, V_local, vocab_offset);
    for (int64_t n = 0; n < N && !fast; n++) {
        double s = 0.0;
        for (int64_t j = 0; j < V_local; j++) s += prt_expf_fast(LD(logits, n * V_local + j) - mx[n]);
        sums[n] = (float)s;
        int64_t j = (int64_t)targets[n] - vocab_offset;
        sums[N + n] = j >= 0 && j < V_local ? LD(logits, n * V_local + j) : 0.0f;
    }
    if (S > 1) {
        double t = prt_trace_start(rt);
        MPI_Request req;
        PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, sums, (int)(2 * N), MPI_FLOAT, MPI_SUM, prt_axis_comm(rt, axis),
                                     &req));
        prt_wait(rt, &req, NULL, "cross-entropy sum all-reduce", axis);
        PRT_TRACE_END(rt, "xent_allreduce_sum", "comm", t, N * 8, axis);
    }
    double loss = 0.0;
    for (int64_t n = 0; n < N; n++) {
        float lse = mx[n] + logf(sums[n]);
        ST(stats, 2 * n, mx[n]);
        ST(stats, 2 * n + 1, lse);
        loss += (double)lse - (double)sums[N + n];
    }
    ST(loss_sum, 0, LD(loss_sum, 0) + (float)loss);
    prt_count_step_loss(rt, axis, loss);
}

static void prt_cpu_xent_bwd(prt *rt, void *dlogits_, const void *logits_, const void *stats_, const void *targets_,
                             int64_t N, int64_t V_local, int64_t vocab_offset, double scale, int64_t dtypes) {
    tensor dlogits = ften(rt, dtypes, 0, dlogits_, "xent_bwd"), logits = ften(rt, dtypes, 1, logits_, "xent_bwd"),
           stats = ften(rt, dtypes, 2, stats_, "xent_bwd");
    const int32_t *targets = i32_arg(rt, dtypes, 3, targets_, "xent_bwd");
    float s = (float)scale;
    if (f32(dlogits) && f32(logits) && f32(stats)) {
        prt_fast_xent_bwd(F32(dlogits), F32(logits), F32(stats), targets, N, V_local, vocab_offset, s);
        return;
    }
    for (int64_t n = 0; n < N; n++) {
        float lse = LD(stats, 2 * n + 1);
        int64_t target = (int64_t)targets[n] - vocab_offset, row = n * V_local;
        for (int64_t j = 0; j < V_local; j++) {
            float p = prt_expf_fast(LD(logits, row + j) - lse);
            ST(dlogits, row + j, LD(dlogits, row + j) + s * (p - (j == target ? 1.0f : 0.0f)));
        }
    }
}

/* ---------------------------------------------------------------- optimizers */

/* With a master the fp32 master is updated and the param gets its rounding. */
static void prt_cpu_adamw(prt *rt, void *param_, void *master_, const void *grad_, void *m_, void *v_, int64_t n,
                          int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay,
                          int64_t dtypes) {
    PRT_CHECK(step >= 1, "adamw: step counts from 1, got %lld", (long long)step);
    tensor param = ften(rt, dtypes, 0, param_, "adamw"), master = ften(rt, dtypes, 1, master_, "adamw"),
           grad = ften(rt, dtypes, 2, grad_, "adamw"),
           m = ften(rt, dtypes, 3, m_, "adamw"), v = ften(rt, dtypes, 4, v_, "adamw");
    if (!master.p && f32(param) && f32(grad) && f32(m) && f32(v)) {
        prt_fast_adamw(F32(param), F32(grad), F32(m), F32(v), n, step, lr, beta1, beta2, eps, weight_decay);
        return;
    }
    prt_adamw_args args = prt_adamw_prepare(step, lr, beta1, beta2, eps, weight_decay);
    for (int64_t i = 0; i < n; i++) prt_adamw_element(&args, param, master, grad, m, v, i);
}

static void prt_cpu_sgd(prt *rt, void *param_, void *master_, const void *grad_, void *mom_, int64_t n, double lr,
                 double momentum, double weight_decay, int64_t dtypes) {
    tensor param = ften(rt, dtypes, 0, param_, "sgd"), master = ften(rt, dtypes, 1, master_, "sgd"),
           grad = ften(rt, dtypes, 2, grad_, "sgd"),
           mom = ften(rt, dtypes, 3, mom_, "sgd");
    for (int64_t i = 0; i < n; i++)
        prt_sgd_element(param, master, grad, mom, (float)lr, (float)momentum, (float)weight_decay, i);
}

/* ---------------------------------------------------------------- the backend table */

static void *cpu_alloc_zero(prt *rt, size_t bytes, const char *what) {
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    PRT_CHECK(p, "out of memory: %zu bytes of %s", bytes, what);
    memset(p, 0, bytes);
    return p;
}
static void cpu_free(prt *rt, void *p) { free(p); }
static void cpu_copy_bytes(prt *rt, void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }

#define CPU_SLOT_OP(name) .name = prt_cpu_##name,
#define CPU_SLOT_COMM(name) .name = prt_mpi_##name,
#define CPU_SLOT_HOST(name)
#define CPU_SLOT_(X, kind, name, sig, params, args) CPU_SLOT_##kind(name)

const prt_backend prt_backend_cpu = {
    .name = "cpu",
    .description = "every op on the CPU (OpenBLAS), collectives over MPI (the reference)",
    .host_memory = 1,
    .alloc_zero = cpu_alloc_zero,
    .free = cpu_free,
    .upload = cpu_copy_bytes,
    .download = cpu_copy_bytes,
    .copy_bytes = cpu_copy_bytes,
    PRT_CALLS(CPU_SLOT_, _)
};
