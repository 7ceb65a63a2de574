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
 * attention (prt_cpu_attention.c) a block of query rows of one head at a time, per
 * worker.  The floats each op asks for are
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
#include "prt_cpu_moe.h"
#include "prt_cpu_attention.h"
#include "prt_cpu_rope.h"
#include "prt_cpu_tensor.h"
#include "prt_cpu_view.h"
#include "prt_internal.h"
#include "prt_scratch.h"

/* ---------------------------------------------------------------- tensors in their storage dtype */

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
    if (n > 0) prt_fast_zero(buf, (size_t)n * prt_dtype_size(dtype));
}

static void prt_cpu_copy(prt *rt, void *dst_, const void *src_, int64_t n, int64_t dtypes) {
    int64_t dd = any_dtype(rt, dtypes, 0, dst_, "copy"), ds = any_dtype(rt, dtypes, 1, src_, "copy");
    if (dd == ds) {
        if (n > 0 && dst_ != src_) prt_fast_copy(dst_, src_, (size_t)n * prt_dtype_size(dd));
    } else {  /* a conversion: float dtypes only, never in place */
        tensor dst = ften(rt, dtypes, 0, dst_, "copy"), src = ften(rt, dtypes, 1, src_, "copy");
        for (int64_t i = 0; i < n; i++) ST(dst, i, LD(src, i));
    }
}

static void prt_cpu_acc(prt *rt, void *dst_, const void *src_, int64_t n, int64_t dtypes) {
    if (prt_word_writes(dtypes, 0)) {  /* PRT_ARG_WRITE: dst = src */
        prt_cpu_copy(rt, dst_, src_, n, dtypes);
        return;
    }
    tensor dst = ften(rt, dtypes, 0, dst_, "acc"), src = ften(rt, dtypes, 1, src_, "acc");
    if (f32(dst) && f32(src)) {
        prt_fast_add(F32(dst), F32(dst), F32(src), n);
        return;
    }
    for (int64_t i = 0; i < n; i++) ST(dst, i, LD(dst, i) + LD(src, i));
}

/* Gradient clipping: the sum of squares in double (fp32: prt_fast_sumsq's
 * fixed blocks and lanes; other dtypes in element order), the same result
 * whatever the thread count, added to one fp32 accumulator. */
static void prt_cpu_sumsq(prt *rt, void *acc_, const void *x_, int64_t n, double weight, int64_t dtypes) {
    tensor acc = ften(rt, dtypes, 0, acc_, "sumsq"), x = ften(rt, dtypes, 1, x_, "sumsq");
    if (weight == 0.0) return;
    if (f32(x)) {
        ST(acc, 0, (float)(LD(acc, 0) + weight * prt_fast_sumsq(F32(x), n)));
        return;
    }
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
                     int64_t t_offset, int64_t zz, int64_t dtypes) {
    tensor out = ften(rt, dtypes, 0, out_, "pos_fwd"), in = ften(rt, dtypes, 1, in_, "pos_fwd"),
           wpe = ften(rt, dtypes, 2, wpe_, "pos_fwd");
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t o = (b * T + t) * C, p = prt_seq_pos(t, T, t_offset, zz) * C;
            for (int64_t c = 0; c < C; c++) ST(out, o + c, LD(in, o + c) + LD(wpe, p + c));
        }
}

static void prt_cpu_pos_bwd(prt *rt, void *dwpe_, void *din_, const void *dout_, int64_t B, int64_t T, int64_t C,
                     int64_t t_offset, int64_t zz, int64_t dtypes) {
    tensor dwpe = ften(rt, dtypes, 0, dwpe_, "pos_bwd"), din = ften(rt, dtypes, 1, din_, "pos_bwd"),
           dout = ften(rt, dtypes, 2, dout_, "pos_bwd");
    if (dwpe.p)  /* each position sums its B samples in fp32, rounded once */
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++) {
                int64_t p = prt_seq_pos(t, T, t_offset, zz) * C + c;
                float acc = LD(dwpe, p);
                for (int64_t b = 0; b < B; b++) acc += LD(dout, (b * T + t) * C + c);
                ST(dwpe, p, acc);
            }
    if (din.p && prt_word_writes(dtypes, 1))  /* PRT_ARG_WRITE: din = dout */
        prt_cpu_copy(rt, din_, dout_, B * T * C, PRT_ARG_DTYPES(din.dtype, dout.dtype));
    else if (din.p && f32(din) && f32(dout))
        prt_fast_add(F32(din), F32(din), F32(dout), B * T * C);
    else if (din.p)
        for (int64_t i = 0; i < B * T * C; i++) ST(din, i, LD(din, i) + LD(dout, i));
}

/* ---------------------------------------------------------------- norms */

static void prt_cpu_layernorm_fwd(prt *rt, void *out_, void *mean_, void *rstd_, const void *in_, const void *w_,
                           const void *b_, int64_t N, int64_t C, double eps, int64_t dtypes) {
    const char *op = "layernorm_fwd";
    tensor out = ften(rt, dtypes, 0, out_, op), mean = ften(rt, dtypes, 1, mean_, op),
           rstd = ften(rt, dtypes, 2, rstd_, op), in = ften(rt, dtypes, 3, in_, op),
           w = ften(rt, dtypes, 4, w_, op), b = ften(rt, dtypes, 5, b_, op);
    if (f32(out) && f32(mean) && f32(rstd) && f32(in) && f32(w) && f32(b)) {
        prt_fast_layernorm_fwd(F32(out), F32(mean), F32(rstd), F32(in), F32(w), F32(b), N, C, eps);
        return;
    }
    for (int64_t n = 0; n < N; n++) {
        int64_t x = n * C;
        double s = 0.0, v = 0.0;
        for (int64_t c = 0; c < C; c++) s += LD(in, x + c);
        double m = s / (double)C;
        for (int64_t c = 0; c < C; c++) v += (LD(in, x + c) - m) * (LD(in, x + c) - m);
        double r = prt_norm_rstd(v / (double)C, eps);
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
    /* PRT_ARG_WRITE on dw or db: the sums over the rows written, not added (zeroed first: C elements) */
    if (dw.p && prt_word_writes(dtypes, 1)) memset(dw.p, 0, (size_t)C * (size_t)prt_dtype_size(dw.dtype));
    if (db.p && prt_word_writes(dtypes, 2)) memset(db.p, 0, (size_t)C * (size_t)prt_dtype_size(db.dtype));
    if (f32(din) && f32(dw) && f32(db) && f32(dout) && f32(in) && f32(w) && f32(mean) && f32(rstd)) {
        prt_fast_layernorm_bwd(F32(din), F32(dw), F32(db), F32(dout), F32(in), F32(w), F32(mean), F32(rstd), N, C,
                               prt_word_writes(dtypes, 0));
        return;
    }
    int write = prt_word_writes(dtypes, 0);
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
            if (din.p)
                ST(din, x + c, (write ? 0.0f : LD(din, x + c)) + (float)(r * (dnorm - dnorm_mean - norm * dnorm_norm_mean)));
        }
    }
    if (dw.p) view_store(dw, dwv, 0, 1, C, C);
    if (db.p) view_store(db, dbv, 0, 1, C, C);
}

static void prt_cpu_rmsnorm_fwd(prt *rt, void *out_, void *rstd_, const void *in_, const void *w_, int64_t N, int64_t C,
                                double eps, int64_t dtypes) {
    const char *op = "rmsnorm_fwd";
    tensor out = ften(rt, dtypes, 0, out_, op), rstd = ften(rt, dtypes, 1, rstd_, op),
           in = ften(rt, dtypes, 2, in_, op), w = ften(rt, dtypes, 3, w_, op);
    if (f32(out) && f32(rstd) && f32(in) && f32(w)) {
        prt_fast_rmsnorm_fwd(F32(out), F32(rstd), F32(in), F32(w), N, C, eps);
        return;
    }
    for (int64_t n = 0; n < N; n++) {
        int64_t x = n * C;
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++) ss += (double)LD(in, x + c) * LD(in, x + c);
        double r = prt_norm_rstd(ss / (double)C, eps);
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
    /* PRT_ARG_WRITE on dw: the sums over the rows written, not added (zeroed first: C elements) */
    if (dw.p && prt_word_writes(dtypes, 1)) memset(dw.p, 0, (size_t)C * (size_t)prt_dtype_size(dw.dtype));
    if (f32(din) && f32(dw) && f32(dout) && f32(in) && f32(w) && f32(rstd)) {
        prt_fast_rmsnorm_bwd(F32(din), F32(dw), F32(dout), F32(in), F32(w), F32(rstd), N, C, prt_word_writes(dtypes, 0));
        return;
    }
    int write = prt_word_writes(dtypes, 0);
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
            if (din.p) ST(din, x + c, (write ? 0.0f : LD(din, x + c)) + (float)(r * ((double)LD(w, c) * g - xc * k)));
        }
    }
    if (dw.p) view_store(dw, dwv, 0, 1, C, C);
}

/* ---------------------------------------------------------------- linear */

/* out[N,M] = in[N,K] @ op(w) (+ bias[M] when bias is given), op(w) = w[K,M] or,
 * transposed, w[M,K]^T.  With a bias each block of out starts as the bias row
 * (in fp32) and the GEMM adds onto it (beta = 1): the bias costs no pass of
 * its own and a 16-bit out is rounded once. */
static void matmul_fwd(prt *rt, const char *op, void *out_, const void *in_, const void *w_, const tensor *bias,
                       int64_t N, int64_t K, int64_t M, int transposed, int64_t dtypes) {
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
        if (bias && f32(*bias))
            prt_fast_rows_fill(ov.f, ov.ld, F32(*bias), r, m);
        else if (bias)
            for (int i = 0; i < r; i++)
                for (int j = 0; j < m; j++) ov.f[(size_t)i * ov.ld + j] = LD(*bias, j);
        if (k)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasTrans : CblasNoTrans, r, m, k, 1.0f, iv.f, iv.ld,
                        wv.f, wv.ld, bias ? 1.0f : 0.0f, ov.f, ov.ld);
        else if (!bias)
            for (int i = 0; i < r; i++) memset(ov.f + (size_t)i * ov.ld, 0, (size_t)m * sizeof(float));
        view_store(out, ov, r0 * M, r, M, M);
    }
}

/* din[N,K] += dout[N,M] @ op(w)^T (=, with PRT_ARG_WRITE on din);  dw += in^T @ dout (w[K,M]) or
 * dout^T @ in (transposed: w[M,K]) (=, with PRT_ARG_WRITE on dw). */
static void matmul_bwd(prt *rt, const char *op, void *din_, void *dw_, const void *dout_, const void *in_,
                       const void *w_, int64_t N, int64_t K, int64_t M, int transposed, int64_t dtypes) {
    int n = blas_dim(N, op), k = blas_dim(K, op), m = blas_dim(M, op);
    tensor din = ften(rt, dtypes, 0, din_, op), dw = ften(rt, dtypes, 1, dw_, op),
           dout = ften(rt, dtypes, 2, dout_, op), in = ften(rt, dtypes, 3, in_, op),
           w = ften(rt, dtypes, 4, w_, op);
    int din_write = prt_word_writes(dtypes, 0), dw_write = dw.p && prt_word_writes(dtypes, 1);
    if (din_write && din.p && !m) memset(din.p, 0, (size_t)(N * K) * (size_t)prt_dtype_size(din.dtype));
    if (dw_write && !n) memset(dw.p, 0, (size_t)(K * M) * (size_t)prt_dtype_size(dw.dtype));
    if (!n || !k || !m) return;
    int w16 = din.p && is16(w), dw16 = is16(dw), din16 = is16(din), in16 = dw.p && is16(in), dout16 = is16(dout);
    int64_t R = chunk_rows(N, dout16 || din16 || in16);
    float *s = scratch(rt, prt_scratch_matmul_bwd(K, M, N, din.p != NULL, dw.p != NULL, is16(w), dw16, is16(in), dout16, din16));
    float *w_slot = take(&s, w16 * K * M), *dw_slot = take(&s, dw16 * K * M), *dout_slot = take(&s, dout16 * R * M),
          *din_slot = take(&s, din16 * R * K), *in_slot = take(&s, in16 * R * K);
    int64_t wr = transposed ? M : K, wc = transposed ? K : M;  /* w and dw are [wr, wc] */
    view wv = {NULL, 0}, dwv = {NULL, 0};
    if (din.p) wv = view_of(w, w_slot, 0, wr, wc, wc, 1);
    if (dw.p) dwv = view_of(dw, dw_slot, 0, wr, wc, wc, !dw_write);
    for (int64_t r0 = 0; r0 < N; r0 += R) {
        int r = (int)(N - r0 < R ? N - r0 : R);
        view dov = view_of(dout, dout_slot, r0 * M, r, M, M, 1);
        if (din.p) {
            view dv = view_of(din, din_slot, r0 * K, r, K, K, !din_write);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasNoTrans : CblasTrans, r, k, m, 1.0f, dov.f,
                        dov.ld, wv.f, wv.ld, din_write ? 0.0f : 1.0f, dv.f, dv.ld);
            view_store(din, dv, r0 * K, r, K, K);
        }
        if (dw.p) {
            view iv = view_of(in, in_slot, r0 * K, r, K, K, 1);
            float beta = dw_write && r0 == 0 ? 0.0f : 1.0f;  /* the first rows' products written, the rest added */
            if (transposed)  /* dw[M,K] += dout^T @ in */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, k, r, 1.0f, dov.f, dov.ld, iv.f, iv.ld, beta,
                            dwv.f, dwv.ld);
            else             /* dw[K,M] += in^T @ dout */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, m, r, 1.0f, iv.f, iv.ld, dov.f, dov.ld, beta,
                            dwv.f, dwv.ld);
        }
    }
    if (dw.p) view_store(dw, dwv, 0, wr, wc, wc);
}

void prt_cpu_gemm_fwd(prt *rt, const char *op, void *out, const void *in, const void *w, int64_t N, int64_t K,
                      int64_t M, int64_t dtypes) {
    matmul_fwd(rt, op, out, in, w, NULL, N, K, M, 0, dtypes);
}

void prt_cpu_gemm_bwd(prt *rt, const char *op, void *din, void *dw, const void *dout, const void *in, const void *w,
                      int64_t N, int64_t K, int64_t M, int64_t dtypes) {
    matmul_bwd(rt, op, din, dw, dout, in, w, N, K, M, 0, dtypes);
}

static void prt_cpu_matmul_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M,
                               int64_t dtypes) {
    matmul_fwd(rt, "matmul", out, in, w, NULL, N, K, M, 0, dtypes);
}

static void prt_cpu_matmul_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w,
                               int64_t N, int64_t K, int64_t M, int64_t dtypes) {
    matmul_bwd(rt, "matmul", din, dw, dout, in, w, N, K, M, 0, dtypes);
}

static void prt_cpu_matmul_t_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M,
                                 int64_t dtypes) {
    matmul_fwd(rt, "matmul_t", out, in, w, NULL, N, K, M, 1, dtypes);
}

static void prt_cpu_matmul_t_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w,
                                 int64_t N, int64_t K, int64_t M, int64_t dtypes) {
    matmul_bwd(rt, "matmul_t", din, dw, dout, in, w, N, K, M, 1, dtypes);
}

static void prt_cpu_bias_bwd(prt *rt, void *db_, const void *dout_, int64_t N, int64_t M, int64_t dtypes);

static void prt_cpu_matmul_bias_fwd(prt *rt, void *out, const void *in, const void *w, const void *b, int64_t N,
                                    int64_t K, int64_t M, int64_t dtypes) {
    tensor bias = ften(rt, dtypes, 3, b, "matmul_bias_fwd");
    matmul_fwd(rt, "matmul_bias_fwd", out, in, w, &bias, N, K, M, 0, dtypes);
}

/* db first: it reads only dout, which the GEMMs read next */
static void prt_cpu_matmul_bias_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w,
                                    void *db, int64_t N, int64_t K, int64_t M, int64_t dtypes) {
    if (db)
        prt_cpu_bias_bwd(rt, db, dout, N, M,
                         PRT_ARG_DTYPES(prt_word_dtype(dtypes, 5) | (prt_word_writes(dtypes, 5) ? PRT_ARG_WRITE : 0),
                                        prt_word_dtype(dtypes, 2)));
    matmul_bwd(rt, "matmul_bias_bwd", din, dw, dout, in, w, N, K, M, 0, dtypes);
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
    if (prt_word_writes(dtypes, 0)) memset(db.p, 0, (size_t)M * (size_t)prt_dtype_size(db.dtype)); /* db = the sums */
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
        prt_fast_gelu_bwd(F32(din), F32(in), F32(dout), n, prt_word_writes(dtypes, 0));
    } else {
        int write = prt_word_writes(dtypes, 0);
        for (int64_t i = 0; i < n; i++) ST(din, i, (write ? 0.0f : LD(din, i)) + prt_gelu_grad(LD(in, i)) * LD(dout, i));
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
    int write = prt_word_writes(dtypes, 0);
    for (int64_t i = 0; i < n; i++)
        if (LD(in, i) > 0.0f) ST(din, i, (write ? 0.0f : LD(din, i)) + LD(dout, i));
        else if (write) ST(din, i, 0.0f);
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
        prt_fast_swiglu_bwd(F32(din), F32(in), F32(dout), N, F, prt_word_writes(dtypes, 0));
        return;
    }
    int write = prt_word_writes(dtypes, 0);
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            int64_t ig = n * 2 * F + f, iu = ig + F;
            float g = LD(in, ig), up = LD(in, iu), d = LD(dout, n * F + f);
            ST(din, ig, (write ? 0.0f : LD(din, ig)) + prt_swiglu_dgate(d, g, up));
            ST(din, iu, (write ? 0.0f : LD(din, iu)) + prt_swiglu_dup(d, g));
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

/* ---------------------------------------------------------------- attention (prt_cpu_attention.c) */

static void prt_cpu_attention_fwd(prt *rt, void *out, void *probs, const void *qkv, int64_t B, int64_t T, int64_t NH,
                                  int64_t KV, int64_t HD, int64_t causal, int64_t Tq, int64_t q0, int64_t dtypes) {
    prt_cpu_attention_rows_fwd(rt, out, probs, qkv, B, T, Tq, q0, NH, KV, HD, causal, NULL, dtypes);
}

static void prt_cpu_attention_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs,
                                  int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t Tq,
                                  int64_t q0, int64_t dtypes) {
    prt_cpu_attention_rows_bwd(rt, dqkv, dout, qkv, probs, B, T, Tq, q0, NH, KV, HD, causal, NULL, dtypes);
}

static void prt_cpu_attention_dropout_fwd(prt *rt, void *out, void *probs, const void *qkv, int64_t B, int64_t T,
                                          int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t first_sample,
                                          int64_t h_offset, int64_t NH_global, int64_t step, int64_t layer, double p,
                                          int64_t dtypes) {
    prt_att_dropout d = prt_cpu_attention_dropout(rt, first_sample, h_offset, NH_global, NH, step, layer, p);
    prt_cpu_attention_heads_fwd(rt, out, probs, qkv, B, T, NH, KV, HD, causal, &d, dtypes);
}

static void prt_cpu_attention_dropout_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs,
                                          int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                                          int64_t first_sample, int64_t h_offset, int64_t NH_global, int64_t step,
                                          int64_t layer, double p, int64_t dtypes) {
    prt_att_dropout d = prt_cpu_attention_dropout(rt, first_sample, h_offset, NH_global, NH, step, layer, p);
    prt_cpu_attention_heads_bwd(rt, dqkv, dout, qkv, probs, B, T, NH, KV, HD, causal, &d, dtypes);
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
    int fused = fast && S == 1; /* no all-reduce of the maxima between the passes: one pass a row */
    if (fused) prt_fast_row_max_sumexp(mx, sums, sums + N, F32(logits), targets, N, V_local, vocab_offset);
    else if (fast) prt_fast_row_max(mx, F32(logits), N, V_local);
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
    if (fast && !fused) prt_fast_row_sumexp(sums, sums + N, F32(logits), mx, targets, N, V_local, vocab_offset);
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
        prt_fast_xent_bwd(F32(dlogits), F32(logits), F32(stats), targets, N, V_local, vocab_offset, s,
                          prt_word_writes(dtypes, 0));
        return;
    }
    int write = prt_word_writes(dtypes, 0);
    for (int64_t n = 0; n < N; n++) {
        float lse = LD(stats, 2 * n + 1);
        int64_t target = (int64_t)targets[n] - vocab_offset, row = n * V_local;
        for (int64_t j = 0; j < V_local; j++) {
            float p = prt_expf_fast(LD(logits, row + j) - lse);
            ST(dlogits, row + j, (write ? 0.0f : LD(dlogits, row + j)) + s * (p - (j == target ? 1.0f : 0.0f)));
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
    if (master.p && param.dtype == PRT_BF16 && grad.dtype == PRT_BF16 && f32(master) && f32(m) && f32(v)) {
        prt_fast_adamw_bf16(param.p, F32(master), grad.p, F32(m), F32(v), n, step, lr, beta1, beta2, eps,
                            weight_decay);
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

/* calloc, not malloc + memset: a large block comes as fresh pages, which the
 * kernel zeroes when they are first written, so start-up makes no pass over
 * the buffers that the first step writes anyway.  64-byte aligned by hand, the
 * pointer calloc gave stored just below the block for cpu_free.  No huge-page
 * advice: on the machine bench/README.md names, blocks advised MADV_HUGEPAGE
 * made the first step 2-4 times slower (the kernel's huge-page fault path)
 * and the steady steps no faster. */
static void *cpu_alloc_zero(prt *rt, size_t bytes, const char *what) {
    char *raw = calloc(1, bytes + 64);
    PRT_CHECK(raw, "out of memory: %zu bytes of %s", bytes, what);
    char *p = (char *)(((uintptr_t)raw + 64) & ~(uintptr_t)63);  /* at least 16 bytes above raw */
    memcpy(p - sizeof raw, &raw, sizeof raw);
    return p;
}
static void cpu_free(prt *rt, void *p) {
    if (!p) return;
    char *raw;
    memcpy(&raw, (char *)p - sizeof raw, sizeof raw);
    free(raw);
}
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
