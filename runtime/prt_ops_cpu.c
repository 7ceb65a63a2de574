/*
 * prt_ops_cpu.c — the ops of the CPU backend: simple loops plus OpenBLAS GEMMs.
 * Semantics are parc_rt.h's: forward ops overwrite their outputs, backward ops
 * accumulate (+=) into input and parameter gradients.  Reductions over a row
 * accumulate in double; everything else is plain float arithmetic.
 *
 * Storage.  A tensor argument is stored in the dtype of the registered buffer that
 * holds it (prt_dtype_of; memory the runtime did not allocate is fp32): f32, bf16
 * or f16.  Arithmetic is always fp32.  Loops read through prt_load and write
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
#include <string.h>

#include "prt_internal.h"

#define OP_BEGIN(rt) double op_t0_ = prt_trace_start(rt)
#define OP_END(rt, name) PRT_TRACE_END(rt, name, "op", op_t0_, -1, -1)

static int blas_dim(int64_t n, const char *what) {
    PRT_CHECK(n >= 0 && n <= INT_MAX, "%s: dimension %lld does not fit a BLAS int", what, (long long)n);
    return (int)n;
}

/* ---------------------------------------------------------------- tensors in their storage dtype */

/* A float tensor argument: its address (NULL allowed) and storage dtype. */
typedef struct tensor {
    char *p;
    int64_t dtype;
} tensor;

static tensor ften(prt *rt, const void *p, const char *op) {
    int64_t dtype = prt_dtype_of(rt, p);
    PRT_CHECK(dtype != PRT_I32, "%s: a float tensor argument points into an i32 buffer", op);
    return (tensor){(char *)p, dtype < 0 ? PRT_F32 : dtype};
}
static inline int is16(tensor t) { return t.p && prt_dtype_is_16(t.dtype); }
#define LD(t, i) prt_load((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_store((t).p, (t).dtype, (i), (v))

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

/* ---------------------------------------------------------------- the CUDA backend

GPU_OP(rt, name, call): with --device cuda the op runs on the device (a prt_cu_*
function of runtime/cuda/) and returns; with --trace the span is timed on the
host around a device synchronisation.  TN(p) is a float tensor argument with its
storage dtype.  Without PRT_HAVE_CUDA both vanish and the CPU path is unchanged. */
#ifdef PRT_HAVE_CUDA
static prt_ten tn(prt *rt, const void *p, const char *op) {
    tensor t = ften(rt, p, op);
    return (prt_ten){t.p, t.dtype};
}
#define TN(p) tn(rt, (p), __func__)
#define GPU_OP(rt, name, call)                  \
    do {                                        \
        if ((rt)->device) {                     \
            call;                               \
            if ((rt)->tracing) prt_cuda_sync(rt); \
            OP_END(rt, name);                   \
            return;                             \
        }                                       \
    } while (0)
#else
#define GPU_OP(rt, name, call) \
    do {                       \
    } while (0)
#endif

/* Rows per chunk of a GEMM op's row tensors: all N when none is 16-bit. */
static int64_t chunk_rows(int64_t N, int any16) { return any16 && N > PRT_CONVERT_ROWS ? PRT_CONVERT_ROWS : N; }

void prt_zero(prt *rt, void *buf, int64_t n) {
    OP_BEGIN(rt);
    GPU_OP(rt, "zero", prt_cu_zero(rt, TN(buf), n, prt_dtype_size(prt_dtype_of(rt, buf) < 0 ? PRT_F32 : prt_dtype_of(rt, buf))));
    int64_t dtype = prt_dtype_of(rt, buf);
    if (n > 0) memset(buf, 0, (size_t)n * prt_dtype_size(dtype < 0 ? PRT_F32 : dtype));
    OP_END(rt, "zero");
}

void prt_copy(prt *rt, void *dst_, const void *src_, int64_t n) {
    OP_BEGIN(rt);
    GPU_OP(rt, "copy", prt_cu_copy(rt, TN(dst_), TN(src_), n));
    int64_t dd = prt_dtype_of(rt, dst_), ds = prt_dtype_of(rt, src_);
    dd = dd < 0 ? PRT_F32 : dd;
    ds = ds < 0 ? PRT_F32 : ds;
    if (dd == ds) {
        if (n > 0 && dst_ != src_) memmove(dst_, src_, (size_t)n * prt_dtype_size(dd));
    } else {  /* a conversion: float dtypes only, never in place */
        tensor dst = ften(rt, dst_, "copy"), src = ften(rt, src_, "copy");
        for (int64_t i = 0; i < n; i++) ST(dst, i, LD(src, i));
    }
    OP_END(rt, "copy");
}

void prt_acc(prt *rt, void *dst_, const void *src_, int64_t n) {
    OP_BEGIN(rt);
    GPU_OP(rt, "acc", prt_cu_acc(rt, TN(dst_), TN(src_), n));
    tensor dst = ften(rt, dst_, "acc"), src = ften(rt, src_, "acc");
    for (int64_t i = 0; i < n; i++) ST(dst, i, LD(dst, i) + LD(src, i));
    OP_END(rt, "acc");
}

/* ---------------------------------------------------------------- embedding */

void prt_embed_fwd(prt *rt, void *out_, const void *tokens_, const void *wte_, int64_t N, int64_t C,
                   int64_t vocab_local, int64_t vocab_offset) {
    OP_BEGIN(rt);
    GPU_OP(rt, "embed_fwd", prt_cu_embed_fwd(rt, TN(out_), tokens_, TN(wte_), N, C, vocab_local, vocab_offset));
    tensor out = ften(rt, out_, "embed_fwd"), wte = ften(rt, wte_, "embed_fwd");
    const int32_t *tokens = tokens_;
    for (int64_t n = 0; n < N; n++) {
        int64_t row = (int64_t)tokens[n] - vocab_offset;
        for (int64_t c = 0; c < C; c++) ST(out, n * C + c, row >= 0 && row < vocab_local ? LD(wte, row * C + c) : 0.0f);
    }
    OP_END(rt, "embed_fwd");
}

/* A 16-bit dwte sums each row's tokens in fp32 (in token order, as the fp32 op
 * does) and rounds once: a row buffer of C floats from the workspace. */
void prt_embed_bwd(prt *rt, void *dwte_, const void *tokens_, const void *dout_, int64_t N, int64_t C,
                   int64_t vocab_local, int64_t vocab_offset) {
    OP_BEGIN(rt);
    GPU_OP(rt, "embed_bwd", prt_cu_embed_bwd(rt, TN(dwte_), tokens_, TN(dout_), N, C, vocab_local, vocab_offset));
    tensor dwte = ften(rt, dwte_, "embed_bwd"), dout = ften(rt, dout_, "embed_bwd");
    const int32_t *tokens = tokens_;
    float *acc = scratch(rt, is16(dwte) * C);
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
    OP_END(rt, "embed_bwd");
}

void prt_pos_fwd(prt *rt, void *out_, const void *in_, const void *wpe_, int64_t B, int64_t T, int64_t C,
                 int64_t t_offset) {
    OP_BEGIN(rt);
    GPU_OP(rt, "pos_fwd", prt_cu_pos_fwd(rt, TN(out_), TN(in_), TN(wpe_), B, T, C, t_offset));
    tensor out = ften(rt, out_, "pos_fwd"), in = ften(rt, in_, "pos_fwd"), wpe = ften(rt, wpe_, "pos_fwd");
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t o = (b * T + t) * C, p = (t + t_offset) * C;
            for (int64_t c = 0; c < C; c++) ST(out, o + c, LD(in, o + c) + LD(wpe, p + c));
        }
    OP_END(rt, "pos_fwd");
}

void prt_pos_bwd(prt *rt, void *dwpe_, void *din_, const void *dout_, int64_t B, int64_t T, int64_t C,
                 int64_t t_offset) {
    OP_BEGIN(rt);
    GPU_OP(rt, "pos_bwd", prt_cu_pos_bwd(rt, TN(dwpe_), TN(din_), TN(dout_), B, T, C, t_offset));
    tensor dwpe = ften(rt, dwpe_, "pos_bwd"), din = ften(rt, din_, "pos_bwd"), dout = ften(rt, dout_, "pos_bwd");
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
    OP_END(rt, "pos_bwd");
}

/* ---------------------------------------------------------------- norms */

#define NORM_EPS 1e-5

void prt_layernorm_fwd(prt *rt, void *out_, void *mean_, void *rstd_, const void *in_, const void *w_,
                       const void *b_, int64_t N, int64_t C) {
    OP_BEGIN(rt);
    GPU_OP(rt, "layernorm_fwd", prt_cu_layernorm_fwd(rt, TN(out_), TN(mean_), TN(rstd_), TN(in_), TN(w_), TN(b_), N, C));
    const char *op = "layernorm_fwd";
    tensor out = ften(rt, out_, op), mean = ften(rt, mean_, op), rstd = ften(rt, rstd_, op), in = ften(rt, in_, op),
           w = ften(rt, w_, op), b = ften(rt, b_, op);
    for (int64_t n = 0; n < N; n++) {
        int64_t x = n * C;
        double s = 0.0, v = 0.0;
        for (int64_t c = 0; c < C; c++) s += LD(in, x + c);
        double m = s / (double)C;
        for (int64_t c = 0; c < C; c++) v += (LD(in, x + c) - m) * (LD(in, x + c) - m);
        double r = 1.0 / sqrt(v / (double)C + NORM_EPS);
        for (int64_t c = 0; c < C; c++)
            ST(out, x + c, (float)((LD(in, x + c) - m) * r) * LD(w, c) + (b.p ? LD(b, c) : 0.0f));
        if (mean.p) ST(mean, n, (float)m);
        if (rstd.p) ST(rstd, n, (float)r);
    }
    OP_END(rt, "layernorm_fwd");
}

void prt_layernorm_bwd(prt *rt, void *din_, void *dw_, void *db_, const void *dout_, const void *in_,
                       const void *w_, const void *mean_, const void *rstd_, int64_t N, int64_t C) {
    OP_BEGIN(rt);
    GPU_OP(rt, "layernorm_bwd", prt_cu_layernorm_bwd(rt, TN(din_), TN(dw_), TN(db_), TN(dout_), TN(in_), TN(w_), TN(mean_), TN(rstd_), N, C));
    const char *op = "layernorm_bwd";
    tensor din = ften(rt, din_, op), dw = ften(rt, dw_, op), db = ften(rt, db_, op), dout = ften(rt, dout_, op),
           in = ften(rt, in_, op), w = ften(rt, w_, op), mean = ften(rt, mean_, op), rstd = ften(rt, rstd_, op);
    /* dw, db sum over the N rows in fp32 (their own memory when fp32), rounded once */
    float *s = scratch(rt, (is16(dw) + is16(db)) * C), *dw_slot = take(&s, is16(dw) * C), *db_slot = take(&s, is16(db) * C);
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
    OP_END(rt, "layernorm_bwd");
}

void prt_rmsnorm_fwd(prt *rt, void *out_, void *rstd_, const void *in_, const void *w_, int64_t N, int64_t C) {
    OP_BEGIN(rt);
    GPU_OP(rt, "rmsnorm_fwd", prt_cu_rmsnorm_fwd(rt, TN(out_), TN(rstd_), TN(in_), TN(w_), N, C));
    const char *op = "rmsnorm_fwd";
    tensor out = ften(rt, out_, op), rstd = ften(rt, rstd_, op), in = ften(rt, in_, op), w = ften(rt, w_, op);
    for (int64_t n = 0; n < N; n++) {
        int64_t x = n * C;
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++) ss += (double)LD(in, x + c) * LD(in, x + c);
        double r = 1.0 / sqrt(ss / (double)C + NORM_EPS);
        for (int64_t c = 0; c < C; c++) ST(out, x + c, (float)(LD(in, x + c) * r) * LD(w, c));
        if (rstd.p) ST(rstd, n, (float)r);
    }
    OP_END(rt, "rmsnorm_fwd");
}

void prt_rmsnorm_bwd(prt *rt, void *din_, void *dw_, const void *dout_, const void *in_, const void *w_,
                     const void *rstd_, int64_t N, int64_t C) {
    OP_BEGIN(rt);
    GPU_OP(rt, "rmsnorm_bwd", prt_cu_rmsnorm_bwd(rt, TN(din_), TN(dw_), TN(dout_), TN(in_), TN(w_), TN(rstd_), N, C));
    const char *op = "rmsnorm_bwd";
    tensor din = ften(rt, din_, op), dw = ften(rt, dw_, op), dout = ften(rt, dout_, op), in = ften(rt, in_, op),
           w = ften(rt, w_, op), rstd = ften(rt, rstd_, op);
    float *dw_slot = scratch(rt, is16(dw) * C);  /* dw sums over the rows in fp32, rounded once */
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
    OP_END(rt, "rmsnorm_bwd");
}

/* ---------------------------------------------------------------- linear */

/* out[N,M] = in[N,K] @ op(w), op(w) = w[K,M] or, transposed, w[M,K]^T. */
static void matmul_fwd(prt *rt, const char *op, void *out_, const void *in_, const void *w_, int64_t N, int64_t K,
                       int64_t M, int transposed) {
    int n = blas_dim(N, op), k = blas_dim(K, op), m = blas_dim(M, op);
    if (!n || !m) return;
    tensor out = ften(rt, out_, op), in = ften(rt, in_, op), w = ften(rt, w_, op);
    int64_t R = chunk_rows(N, is16(in) || is16(out));
    float *s = scratch(rt, is16(w) * K * M + R * (is16(in) * K + is16(out) * M));
    float *w_slot = take(&s, is16(w) * K * M), *in_slot = take(&s, is16(in) * R * K), *out_slot = take(&s, is16(out) * R * M);
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
                       const void *w_, int64_t N, int64_t K, int64_t M, int transposed) {
    int n = blas_dim(N, op), k = blas_dim(K, op), m = blas_dim(M, op);
    if (!n || !k || !m) return;
    tensor din = ften(rt, din_, op), dw = ften(rt, dw_, op), dout = ften(rt, dout_, op), in = ften(rt, in_, op),
           w = ften(rt, w_, op);
    int w16 = din.p && is16(w), dw16 = is16(dw), din16 = is16(din), in16 = dw.p && is16(in), dout16 = is16(dout);
    int64_t R = chunk_rows(N, dout16 || din16 || in16);
    float *s = scratch(rt, (w16 + dw16) * K * M + R * (dout16 * M + din16 * K + in16 * K));
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

void prt_matmul_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M) {
    OP_BEGIN(rt);
    GPU_OP(rt, "matmul_fwd", prt_cu_matmul_fwd(rt, TN(out), TN(in), TN(w), N, K, M, 0));
    matmul_fwd(rt, "matmul", out, in, w, N, K, M, 0);
    OP_END(rt, "matmul_fwd");
}

void prt_matmul_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, int64_t N,
                    int64_t K, int64_t M) {
    OP_BEGIN(rt);
    GPU_OP(rt, "matmul_bwd", prt_cu_matmul_bwd(rt, TN(din), TN(dw), TN(dout), TN(in), TN(w), N, K, M, 0));
    matmul_bwd(rt, "matmul", din, dw, dout, in, w, N, K, M, 0);
    OP_END(rt, "matmul_bwd");
}

void prt_matmul_t_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M) {
    OP_BEGIN(rt);
    GPU_OP(rt, "matmul_t_fwd", prt_cu_matmul_fwd(rt, TN(out), TN(in), TN(w), N, K, M, 1));
    matmul_fwd(rt, "matmul_t", out, in, w, N, K, M, 1);
    OP_END(rt, "matmul_t_fwd");
}

void prt_matmul_t_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, int64_t N,
                      int64_t K, int64_t M) {
    OP_BEGIN(rt);
    GPU_OP(rt, "matmul_t_bwd", prt_cu_matmul_bwd(rt, TN(din), TN(dw), TN(dout), TN(in), TN(w), N, K, M, 1));
    matmul_bwd(rt, "matmul_t", din, dw, dout, in, w, N, K, M, 1);
    OP_END(rt, "matmul_t_bwd");
}

void prt_bias_fwd(prt *rt, void *out_, const void *in_, const void *b_, int64_t N, int64_t M) {
    OP_BEGIN(rt);
    GPU_OP(rt, "bias_fwd", prt_cu_bias_fwd(rt, TN(out_), TN(in_), TN(b_), N, M));
    tensor out = ften(rt, out_, "bias_fwd"), in = ften(rt, in_, "bias_fwd"), b = ften(rt, b_, "bias_fwd");
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < M; j++) ST(out, n * M + j, LD(in, n * M + j) + LD(b, j));
    OP_END(rt, "bias_fwd");
}

void prt_bias_bwd(prt *rt, void *db_, const void *dout_, int64_t N, int64_t M) {
    OP_BEGIN(rt);
    GPU_OP(rt, "bias_bwd", prt_cu_bias_bwd(rt, TN(db_), TN(dout_), N, M));
    tensor db = ften(rt, db_, "bias_bwd"), dout = ften(rt, dout_, "bias_bwd");
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
    OP_END(rt, "bias_bwd");
}

/* ---------------------------------------------------------------- activations */

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

/* tanh as a clamped odd rational function, x P(x^2) / Q(x^2): no branch and no
 * libm call, so the loops below vectorise; within a few float ulp of tanh.
 * The coefficients are those of Eigen's generic_fast_tanh_float. */
static inline float tanh_rational(float x) {
    const float clamp = 7.90531110763549805f;
    x = x > clamp ? clamp : (x < -clamp ? -clamp : x);
    float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}

static inline float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanh_rational(GELU_SCALE * (x + 0.044715f * x * x * x)));
}

static inline float gelu_grad(float x) {
    float t = tanh_rational(GELU_SCALE * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}

void prt_gelu_fwd(prt *rt, void *out_, const void *in_, int64_t n) {
    OP_BEGIN(rt);
    GPU_OP(rt, "gelu_fwd", prt_cu_gelu_fwd(rt, TN(out_), TN(in_), n));
    tensor out = ften(rt, out_, "gelu_fwd"), in = ften(rt, in_, "gelu_fwd");
    if (out.dtype == PRT_F32 && in.dtype == PRT_F32) {
        float *restrict o = (float *)out.p;
        const float *restrict x = (const float *)in.p;
        for (int64_t i = 0; i < n; i++) o[i] = gelu_f(x[i]);
    } else {
        for (int64_t i = 0; i < n; i++) ST(out, i, gelu_f(LD(in, i)));
    }
    OP_END(rt, "gelu_fwd");
}

void prt_gelu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n) {
    OP_BEGIN(rt);
    GPU_OP(rt, "gelu_bwd", prt_cu_gelu_bwd(rt, TN(din_), TN(in_), TN(dout_), n));
    tensor din = ften(rt, din_, "gelu_bwd"), in = ften(rt, in_, "gelu_bwd"), dout = ften(rt, dout_, "gelu_bwd");
    if (din.dtype == PRT_F32 && in.dtype == PRT_F32 && dout.dtype == PRT_F32) {
        float *restrict d = (float *)din.p;
        const float *restrict x = (const float *)in.p, *restrict g = (const float *)dout.p;
        for (int64_t i = 0; i < n; i++) d[i] += gelu_grad(x[i]) * g[i];
    } else {
        for (int64_t i = 0; i < n; i++) ST(din, i, LD(din, i) + gelu_grad(LD(in, i)) * LD(dout, i));
    }
    OP_END(rt, "gelu_bwd");
}

void prt_relu_fwd(prt *rt, void *out_, const void *in_, int64_t n) {
    OP_BEGIN(rt);
    GPU_OP(rt, "relu_fwd", prt_cu_relu_fwd(rt, TN(out_), TN(in_), n));
    tensor out = ften(rt, out_, "relu_fwd"), in = ften(rt, in_, "relu_fwd");
    for (int64_t i = 0; i < n; i++) {
        float x = LD(in, i);
        ST(out, i, x > 0.0f ? x : 0.0f);
    }
    OP_END(rt, "relu_fwd");
}

void prt_relu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n) {
    OP_BEGIN(rt);
    GPU_OP(rt, "relu_bwd", prt_cu_relu_bwd(rt, TN(din_), TN(in_), TN(dout_), n));
    tensor din = ften(rt, din_, "relu_bwd"), in = ften(rt, in_, "relu_bwd"), dout = ften(rt, dout_, "relu_bwd");
    for (int64_t i = 0; i < n; i++)
        if (LD(in, i) > 0.0f) ST(din, i, LD(din, i) + LD(dout, i));
    OP_END(rt, "relu_bwd");
}

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void prt_swiglu_fwd(prt *rt, void *out_, const void *in_, int64_t N, int64_t F) {
    OP_BEGIN(rt);
    GPU_OP(rt, "swiglu_fwd", prt_cu_swiglu_fwd(rt, TN(out_), TN(in_), N, F));
    tensor out = ften(rt, out_, "swiglu_fwd"), in = ften(rt, in_, "swiglu_fwd");
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            float g = LD(in, n * 2 * F + f), up = LD(in, n * 2 * F + F + f);
            ST(out, n * F + f, g * sigmoidf(g) * up);
        }
    OP_END(rt, "swiglu_fwd");
}

void prt_swiglu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t N, int64_t F) {
    OP_BEGIN(rt);
    GPU_OP(rt, "swiglu_bwd", prt_cu_swiglu_bwd(rt, TN(din_), TN(in_), TN(dout_), N, F));
    tensor din = ften(rt, din_, "swiglu_bwd"), in = ften(rt, in_, "swiglu_bwd"), dout = ften(rt, dout_, "swiglu_bwd");
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            int64_t ig = n * 2 * F + f, iu = ig + F;
            float g = LD(in, ig), up = LD(in, iu), s = sigmoidf(g), d = LD(dout, n * F + f);
            ST(din, ig, LD(din, ig) + d * up * s * (1.0f + g * (1.0f - s)));
            ST(din, iu, LD(din, iu) + d * g * s);
        }
    OP_END(rt, "swiglu_bwd");
}

void prt_add_fwd(prt *rt, void *out_, const void *a_, const void *b_, int64_t n) {
    OP_BEGIN(rt);
    GPU_OP(rt, "add_fwd", prt_cu_add_fwd(rt, TN(out_), TN(a_), TN(b_), n));
    tensor out = ften(rt, out_, "add_fwd"), a = ften(rt, a_, "add_fwd"), b = ften(rt, b_, "add_fwd");
    for (int64_t i = 0; i < n; i++) ST(out, i, LD(a, i) + LD(b, i));
    OP_END(rt, "add_fwd");
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

void prt_attention_fwd(prt *rt, void *out_, void *probs_, const void *qkv_, int64_t B, int64_t T_, int64_t NH_,
                       int64_t HD_, int64_t causal) {
    OP_BEGIN(rt);
    GPU_OP(rt, "attention_fwd", prt_cu_attention_fwd(rt, TN(out_), TN(probs_), TN(qkv_), B, T_, NH_, HD_, causal));
    int T = blas_dim(T_, "attention"), NH = blas_dim(NH_, "attention"), HD = blas_dim(HD_, "attention");
    int C = blas_dim(NH_ * HD_, "attention");
    blas_dim(3 * (int64_t)C, "attention");
    tensor out = ften(rt, out_, "attention_fwd"), probs = ften(rt, probs_, "attention_fwd"),
           qkv = ften(rt, qkv_, "attention_fwd");
    int64_t THD = (int64_t)T * HD, TT = (int64_t)T * T;
    int p_own = probs.p && !is16(probs);  /* P computed in the probs buffer itself */
    float *s = scratch(rt, is16(qkv) * 3 * THD + is16(out) * THD + (p_own ? 0 : TT));
    float *qkv_slot = take(&s, is16(qkv) * 3 * THD), *out_slot = take(&s, is16(out) * THD),
          *p_slot = take(&s, p_own ? 0 : TT);
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            view q, k, v;
            head_views(qkv, qkv_slot, b, h, T, C, HD, 1, &q, &k, &v);
            int64_t p_off = ((int64_t)b * NH + h) * TT;
            float *P = p_own ? (float *)probs.p + p_off : p_slot;
            attention_probs(P, q, k, T, HD, causal);
            if (probs.p && !p_own) view_store(probs, (view){P, T}, p_off, T, T, T);
            view o = view_of(out, out_slot, (int64_t)b * T * C + (int64_t)h * HD, T, HD, C, 0);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HD, T, 1.0f, P, T, v.f, v.ld, 0.0f, o.f, o.ld);
            view_store(out, o, (int64_t)b * T * C + (int64_t)h * HD, T, HD, C);
        }
    OP_END(rt, "attention_fwd");
}

void prt_attention_bwd(prt *rt, void *dqkv_, const void *dout_, const void *qkv_, const void *probs_, int64_t B,
                       int64_t T_, int64_t NH_, int64_t HD_, int64_t causal) {
    OP_BEGIN(rt);
    GPU_OP(rt, "attention_bwd", prt_cu_attention_bwd(rt, TN(dqkv_), TN(dout_), TN(qkv_), TN(probs_), B, T_, NH_, HD_, causal));
    int T = blas_dim(T_, "attention"), NH = blas_dim(NH_, "attention"), HD = blas_dim(HD_, "attention");
    int C = blas_dim(NH_ * HD_, "attention");
    blas_dim(3 * (int64_t)C, "attention");
    tensor dqkv = ften(rt, dqkv_, "attention_bwd"), dout = ften(rt, dout_, "attention_bwd"),
           qkv = ften(rt, qkv_, "attention_bwd"), probs = ften(rt, probs_, "attention_bwd");
    int64_t THD = (int64_t)T * HD, TT = (int64_t)T * T;
    /* dP [T,T] always; P [T,T] unless read from an fp32 probs buffer */
    int p_own = probs.p && !is16(probs);
    float *s = scratch(rt, is16(qkv) * 3 * THD + is16(dqkv) * 3 * THD + is16(dout) * THD + (p_own ? 1 : 2) * TT);
    float *dP = take(&s, TT), *p_slot = take(&s, p_own ? 0 : TT), *qkv_slot = take(&s, is16(qkv) * 3 * THD),
          *dqkv_slot = take(&s, is16(dqkv) * 3 * THD), *dout_slot = take(&s, is16(dout) * THD);
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
            /* dV += P^T dO;  dP = dO V^T */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HD, T, 1.0f, P, T, dO.f, dO.ld, 1.0f, dv.f, dv.ld);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HD, 1.0f, dO.f, dO.ld, v.f, v.ld, 0.0f, dP, T);
            /* dS = P * (dP - rowsum(P * dP)), in place in dP (masked entries: P = 0 -> 0) */
            for (int t = 0; t < T; t++) {
                const float *p = P + (size_t)t * T;
                float *dp = dP + (size_t)t * T;
                double dot = 0.0;
                for (int j = 0; j < T; j++) dot += (double)p[j] * dp[j];
                for (int j = 0; j < T; j++) dp[j] = p[j] * (dp[j] - (float)dot);
            }
            /* dQ += scale dS K;  dK += scale dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HD, T, scale, dP, T, k.f, k.ld, 1.0f, dq.f, dq.ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HD, T, scale, dP, T, q.f, q.ld, 1.0f, dk.f, dk.ld);
            head_store(dqkv, dq, dk, dv, b, h, T, C, HD);
        }
    OP_END(rt, "attention_bwd");
}

/* ---------------------------------------------------------------- cross-entropy */

/* Adds the loss of an xent_fwd call to the step's loss when this rank owns it:
 * coordinate 0 of `axis` and of every loss-replica axis. */
static void count_step_loss(prt *rt, int64_t axis, double loss) {
    int owner = prt_coord(rt, axis) == 0;
    for (int a = 0; a < PRT_MAX_AXES; a++)
        if ((rt->loss_replica_axes >> a & 1) && prt_coord(rt, a) != 0) owner = 0;
    if (owner) prt_add_step_loss(rt, loss);
}

void prt_xent_fwd(prt *rt, void *loss_sum_, void *stats_, const void *logits_, const void *targets_, int64_t N,
                  int64_t V_local, int64_t vocab_offset, int64_t axis) {
    OP_BEGIN(rt);
#ifdef PRT_HAVE_CUDA
    if (rt->device) {
        prt_ten lg = TN(logits_);
        prt_dump_logits(rt, lg.p, lg.dtype, N, V_local, vocab_offset, axis);
        count_step_loss(rt, axis, prt_cu_xent_fwd(rt, TN(loss_sum_), TN(stats_), lg, targets_, N, V_local,
                                                  vocab_offset, axis));
        OP_END(rt, "xent_fwd");
        return;
    }
#endif
    tensor loss_sum = ften(rt, loss_sum_, "xent_fwd"), stats = ften(rt, stats_, "xent_fwd"),
           logits = ften(rt, logits_, "xent_fwd");
    const int32_t *targets = targets_;
    int S = prt_axis_size(rt, axis);
    prt_dump_logits(rt, logits.p, logits.dtype, N, V_local, vocab_offset, axis);
    /* scratch: row max [N], then (sum of exp [N], target logit [N]) for one all-reduce */
    float *mx = prt_workspace(rt, (size_t)3 * (size_t)N), *sums = mx + N;
    for (int64_t n = 0; n < N; n++) {
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
        prt_block_begin("cross-entropy max all-reduce", axis);
        PRT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, mx, (int)N, MPI_FLOAT, MPI_MAX, prt_axis_comm(rt, axis)));
        prt_block_end();
        PRT_TRACE_END(rt, "xent_allreduce_max", "comm", t, N * 4, axis);
    }
    for (int64_t n = 0; n < N; n++) {
        double s = 0.0;
        for (int64_t j = 0; j < V_local; j++) s += exp((double)(LD(logits, n * V_local + j) - mx[n]));
        sums[n] = (float)s;
        int64_t j = (int64_t)targets[n] - vocab_offset;
        sums[N + n] = j >= 0 && j < V_local ? LD(logits, n * V_local + j) : 0.0f;
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
        ST(stats, 2 * n, mx[n]);
        ST(stats, 2 * n + 1, lse);
        loss += (double)lse - (double)sums[N + n];
    }
    ST(loss_sum, 0, LD(loss_sum, 0) + (float)loss);
    count_step_loss(rt, axis, loss);
    OP_END(rt, "xent_fwd");
}

void prt_xent_bwd(prt *rt, void *dlogits_, const void *logits_, const void *stats_, const void *targets_, int64_t N,
                  int64_t V_local, int64_t vocab_offset, double scale) {
    OP_BEGIN(rt);
    GPU_OP(rt, "xent_bwd", prt_cu_xent_bwd(rt, TN(dlogits_), TN(logits_), TN(stats_), targets_, N, V_local, vocab_offset, scale));
    tensor dlogits = ften(rt, dlogits_, "xent_bwd"), logits = ften(rt, logits_, "xent_bwd"),
           stats = ften(rt, stats_, "xent_bwd");
    const int32_t *targets = targets_;
    float s = (float)scale;
    for (int64_t n = 0; n < N; n++) {
        float lse = LD(stats, 2 * n + 1);
        int64_t target = (int64_t)targets[n] - vocab_offset, row = n * V_local;
        for (int64_t j = 0; j < V_local; j++) {
            float p = expf(LD(logits, row + j) - lse);
            ST(dlogits, row + j, LD(dlogits, row + j) + s * (p - (j == target ? 1.0f : 0.0f)));
        }
    }
    OP_END(rt, "xent_bwd");
}

/* ---------------------------------------------------------------- optimizers */

/* With a master the fp32 master is updated and the param gets its rounding. */
void prt_adamw(prt *rt, void *param_, void *master_, const void *grad_, void *m_, void *v_, int64_t n, int64_t step,
               double lr, double beta1, double beta2, double eps, double weight_decay) {
    OP_BEGIN(rt);
    GPU_OP(rt, "adamw", prt_cu_adamw(rt, TN(param_), TN(master_), TN(grad_), TN(m_), TN(v_), n, step, lr, beta1, beta2, eps, weight_decay));
    PRT_CHECK(step >= 1, "adamw: step counts from 1, got %lld", (long long)step);
    tensor param = ften(rt, param_, "adamw"), master = ften(rt, master_, "adamw"), grad = ften(rt, grad_, "adamw"),
           m = ften(rt, m_, "adamw"), v = ften(rt, v_, "adamw");
    tensor p = master.p ? master : param;
    float b1 = (float)beta1, b2 = (float)beta2, lr_f = (float)lr, eps_f = (float)eps, wd = (float)weight_decay;
    float bc1 = (float)(1.0 - pow(beta1, (double)step)), bc2 = (float)(1.0 - pow(beta2, (double)step));
    for (int64_t i = 0; i < n; i++) {
        float g = LD(grad, i);
        float mi = b1 * LD(m, i) + (1.0f - b1) * g, vi = b2 * LD(v, i) + (1.0f - b2) * g * g;
        ST(m, i, mi);
        ST(v, i, vi);
        float mhat = mi / bc1, vhat = vi / bc2, pi = LD(p, i);
        pi -= lr_f * (mhat / (sqrtf(vhat) + eps_f) + wd * pi);
        ST(p, i, pi);
        if (master.p) ST(param, i, pi);
    }
    OP_END(rt, "adamw");
}

void prt_sgd(prt *rt, void *param_, void *master_, const void *grad_, void *mom_, int64_t n, double lr,
             double momentum, double weight_decay) {
    OP_BEGIN(rt);
    GPU_OP(rt, "sgd", prt_cu_sgd(rt, TN(param_), TN(master_), TN(grad_), TN(mom_), n, lr, momentum, weight_decay));
    tensor param = ften(rt, param_, "sgd"), master = ften(rt, master_, "sgd"), grad = ften(rt, grad_, "sgd"),
           mom = ften(rt, mom_, "sgd");
    tensor p = master.p ? master : param;
    float lr_f = (float)lr, mu = (float)momentum, wd = (float)weight_decay;
    for (int64_t i = 0; i < n; i++) {
        float pi = LD(p, i), d = LD(grad, i) + wd * pi;
        if (mom.p) {
            d = mu * LD(mom, i) + d;
            ST(mom, i, d);
        }
        pi -= lr_f * d;
        ST(p, i, pi);
        if (master.p) ST(param, i, pi);
    }
    OP_END(rt, "sgd");
}

void prt_loss_replicas(prt *rt, int64_t axis_mask) { rt->loss_replica_axes = axis_mask; }
