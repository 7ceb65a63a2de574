/*
 * prt_cpu_view.h — fp32 views of the CPU backend's tensor arguments and its
 * workspace, shared by the files of runtime/cpu/ that call the BLAS: a 16-bit
 * operand is widened into a slot of the runtime workspace (prt_workspace,
 * booked to PRT_WORKSPACE, sized by prt_scratch.h's formulas) and rounded back
 * once; an fp32 one is used in place.
 */
#ifndef PRT_CPU_VIEW_H
#define PRT_CPU_VIEW_H

#include <limits.h>

#include "prt_cpu_tensor.h"

static inline int blas_dim(int64_t n, const char *what) {
    PRT_CHECK(n >= 0 && n <= INT_MAX, "%s: dimension %lld does not fit a BLAS int", what, (long long)n);
    return (int)n;
}

/* Workspace for widened operands: one request per op (the scratch buffer keeps
 * only its largest request), carved front to back by take(). */
static inline float *scratch(prt *rt, int64_t floats) { return floats > 0 ? prt_workspace(rt, (size_t)floats) : NULL; }
static inline float *take(float **next, int64_t floats) {
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

static inline view view_of(tensor t, float *slot, int64_t off, int64_t rows, int64_t cols, int64_t ld, int load) {
    if (!is16(t)) return (view){(float *)t.p + off, (int)ld};
    if (load)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) slot[r * cols + c] = LD(t, off + r * ld + c);
    return (view){slot, (int)cols};
}
/* Rounds a view back into t (nothing to do when t is fp32: the view was t). */
static inline void view_store(tensor t, view v, int64_t off, int64_t rows, int64_t cols, int64_t ld) {
    if (!is16(t)) return;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) ST(t, off + r * ld + c, v.f[r * cols + c]);
}

/* matmul_fwd / matmul_bwd of parc_rt.h (prt_cpu_ops.c), for ops built on them
 * (the MoE router and grouped GEMM): `op` names the caller in messages, and
 * dtypes is a word laid out as matmul_fwd's (out, in, w) or matmul_bwd's (din,
 * dw, dout, in, w), PRT_ARG_WRITE on din included. */
void prt_cpu_gemm_fwd(prt *rt, const char *op, void *out, const void *in, const void *w, int64_t N, int64_t K,
                      int64_t M, int64_t dtypes);
void prt_cpu_gemm_bwd(prt *rt, const char *op, void *din, void *dw, const void *dout, const void *in, const void *w,
                      int64_t N, int64_t K, int64_t M, int64_t dtypes);

#endif
