/*
 * ref_cblas.c — a reference single-precision GEMM behind cblas.h beside it: the
 * CPU side of the GPU op test (tests/gpu/test_gpu_ops.c) in the GPU-only build,
 * where no BLAS is installed.  Each element is a dot product accumulated in
 * double, rows of C over OpenMP threads: slow, and exact enough to judge the
 * GPU's fp32 results by (their tolerance is 1e-4 relative).
 */
#include <stddef.h>

#include "cblas.h"

/* Element (i, j) of op(X) for a matrix stored with leading dimension ld. */
static inline float at(const float *X, int ld, int trans, int colmajor, int i, int j) {
    int r = trans ? j : i, c = trans ? i : j;
    return colmajor ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c];
}

void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    int cm = order == CblasColMajor, tA = ta != CblasNoTrans, tB = tb != CblasNoTrans;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++) s += (double)at(A, lda, tA, cm, i, k) * at(B, ldb, tB, cm, k, j);
            float *c = cm ? &C[(size_t)j * ldc + i] : &C[(size_t)i * ldc + j];
            *c = (float)(alpha * s + (beta != 0.0f ? (double)beta * *c : 0.0));
        }
}

int openblas_get_num_threads(void) { return 1; }
void openblas_set_num_threads(int n) { (void)n; }
char *openblas_get_corename(void) { return NULL; }
