/*
 * cblas.h — the part of the CBLAS and OpenBLAS interface the runtime calls
 * (cblas_sgemm, OpenBLAS's thread count and kernel name), for the GPU-only
 * build (bench/gpu_build/) on a machine without a BLAS: ref_cblas.c beside it
 * implements them as a plain reference GEMM.  Enum values are CBLAS's.
 */
#ifndef PRT_REF_CBLAS_H
#define PRT_REF_CBLAS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 } CBLAS_ORDER;
typedef enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 } CBLAS_TRANSPOSE;

/* C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C (C is not read when beta is 0). */
void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
int openblas_get_num_threads(void);       /* 1 */
void openblas_set_num_threads(int n);     /* no effect: the reference runs on the OpenMP threads */
char *openblas_get_corename(void);        /* NULL: no kernel family to choose (prt_blas.c) */

#ifdef __cplusplus
}
#endif
#endif
