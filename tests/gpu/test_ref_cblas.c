/*
 * test_ref_cblas.c — the reference GEMM of the GPU-only build
 * (tests/gpu/refblas/ref_cblas.c, compiled here under the prefix ref_) against
 * OpenBLAS's cblas_sgemm: both storage orders, every pair of transposes,
 * leading dimensions wider than the rows, beta 0 (C not read: it starts as
 * NaN) and beta 1.5.  Agreement within 1e-5 of each element's magnitude
 * sum |alpha| sum_k |a_ik b_kj| + |beta c_ij| (the scale of a GEMM's rounding:
 * the BLAS's fp32 sums against the reference's double ones, in an order that
 * depends on the kernel family, and an element that nearly cancels has a
 * relative error of no meaning).  Exit status 0 iff every case agrees.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* tests/gpu/refblas/cblas.h's cblas_sgemm, renamed; its enums have CBLAS's values */
void ref_cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc);

static float rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(void) {
    const int M = 7, N = 5, K = 9, pad = 3;
    int failures = 0, cases = 0;
    unsigned seed = 1;
    enum CBLAS_ORDER orders[2] = {CblasRowMajor, CblasColMajor};
    enum CBLAS_TRANSPOSE tr[2] = {CblasNoTrans, CblasTrans};
    for (int o = 0; o < 2; o++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++)
                for (int z = 0; z < 2; z++) {
                    int row = o == 0;
                    /* stored shapes: op(A) is M x K, op(B) K x N, C M x N */
                    int ar = a ? K : M, ac = a ? M : K, br = b ? N : K, bc = b ? K : N;
                    int lda = (row ? ac : ar) + pad, ldb = (row ? bc : br) + pad, ldc = (row ? N : M) + pad;
                    int na = (row ? ar : ac) * lda, nb = (row ? br : bc) * ldb, nc = (row ? M : N) * ldc;
                    float *A = malloc(sizeof(float) * (size_t)na), *B = malloc(sizeof(float) * (size_t)nb),
                          *C0 = malloc(sizeof(float) * (size_t)nc), *C1 = malloc(sizeof(float) * (size_t)nc);
                    float *Aa = malloc(sizeof(float) * (size_t)na), *Ba = malloc(sizeof(float) * (size_t)nb),
                          *S = malloc(sizeof(float) * (size_t)nc); /* the magnitude sums */
                    for (int i = 0; i < na; i++) A[i] = rnd(&seed), Aa[i] = fabsf(A[i]);
                    for (int i = 0; i < nb; i++) B[i] = rnd(&seed), Ba[i] = fabsf(B[i]);
                    float beta = z ? 1.5f : 0.0f;
                    for (int i = 0; i < nc; i++) C0[i] = C1[i] = z ? rnd(&seed) : NAN, S[i] = z ? fabsf(C0[i]) : 0;
                    cblas_sgemm(orders[o], tr[a], tr[b], M, N, K, 0.5f, A, lda, B, ldb, beta, C0, ldc);
                    ref_cblas_sgemm(orders[o], tr[a], tr[b], M, N, K, 0.5f, A, lda, B, ldb, beta, C1, ldc);
                    ref_cblas_sgemm(orders[o], tr[a], tr[b], M, N, K, 0.5f, Aa, lda, Ba, ldb, beta, S, ldc);
                    double worst = 0.0;
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            int at = row ? i * ldc + j : j * ldc + i;
                            double d = fabs((double)C0[at] - C1[at]) / ((double)S[at] + 1e-30);
                            if (!(d <= worst)) worst = d;  /* NaN counts as the worst */
                        }
                    int ok = worst <= 1e-5;
                    cases++;
                    failures += !ok;
                    printf("%s %s%s beta %.1f: max error / magnitude %.1e %s\n", row ? "row-major" : "col-major", a ? "A^T" : "A",
                           b ? " B^T" : " B", beta, worst, ok ? "ok" : "FAIL");
                    free(A), free(B), free(C0), free(C1), free(Aa), free(Ba), free(S);
                }
    printf("test_ref_cblas: %d cases, %d failed: %s\n", cases, failures, failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
