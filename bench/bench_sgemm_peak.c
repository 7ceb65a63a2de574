/*
 * bench_sgemm_peak.c — what the BLAS itself reaches on this machine: cblas_sgemm
 * GFLOP/s (2 N K M / s) on large square GEMMs (the peak a training step's GEMMs
 * are compared with) and, with --shapes, on GEMM shapes given on the command line
 * in the three forms a linear layer's step calls (forward NN out = in @ w;
 * backward NT din = dout @ w^T; TN dw = in^T @ dout), so the GEMMs of a
 * parc run can be held against the BLAS on exactly their shapes.
 * No MPI and no parc runtime: threads are the BLAS's own (OPENBLAS_NUM_THREADS).
 *   bench_sgemm_peak [--square 1024,2048] [--shapes N:K:M,N:K:M,...]
 * Output, one line per measurement (machine-readable):
 *   square <n> gflops <g>
 *   shape <N>:<K>:<M> fwd_gflops <g> bwd_gflops <g>   (bwd = NT + TN, 4NKM flops)
 *   blas_core <name>   the kernel family OpenBLAS runs (openblas_get_corename), printed first
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *filled(long n) {
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) { fprintf(stderr, "bench_sgemm_peak: out of memory\n"); exit(1); }
    for (long i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

/* kind 0: C[N,M] = A[N,K] B[K,M];  1: C[N,K] = A[N,M] B[K,M]^T;  2: C[K,M] = A[N,K]^T B[N,M]. */
static void gemm(int kind, int N, int K, int M, const float *a, const float *b, float *c) {
    if (kind == 0) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, M, K, 1.0f, a, K, b, M, 0.0f, c, M);
    else if (kind == 1) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, K, M, 1.0f, a, M, b, M, 1.0f, c, K);
    else cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, M, N, 1.0f, a, K, b, M, 1.0f, c, M);
}

/* Best seconds per call over a few rounds of enough calls to last ~0.15 s. */
static double best_time(int kind, int N, int K, int M, const float *a, const float *b, float *c) {
    gemm(kind, N, K, M, a, b, c); /* warm up */
    int reps = 1;
    double best = 1e30;
    for (int round = 0; round < 3;) {
        double t0 = now();
        for (int r = 0; r < reps; r++) gemm(kind, N, K, M, a, b, c);
        double t = now() - t0;
        if (t < 0.05 && reps < (1 << 20)) { reps *= 4; continue; }
        if (t / reps < best) best = t / reps;
        round++;
    }
    return best;
}

int main(int argc, char **argv) {
    const char *square = "1024,2048", *shapes = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--square") && i + 1 < argc) square = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else { fprintf(stderr, "usage: bench_sgemm_peak [--square n,n] [--shapes N:K:M,...]\n"); return 2; }
    }
    printf("blas_core %s\n", openblas_get_corename());
    for (const char *s = square; s && *s;) {
        int n = atoi(s);
        if (n > 0) {
            float *a = filled((long)n * n), *b = filled((long)n * n), *c = filled((long)n * n);
            double t = best_time(0, n, n, n, a, b, c);
            printf("square %d gflops %.2f\n", n, 2.0 * n * n * n / t * 1e-9);
            free(a); free(b); free(c);
        }
        s = strchr(s, ',');
        if (s) s++;
    }
    for (const char *s = shapes; s && *s;) {
        int N = 0, K = 0, M = 0;
        if (sscanf(s, "%d:%d:%d", &N, &K, &M) == 3 && N > 0 && K > 0 && M > 0) {
            float *in = filled((long)N * K), *w = filled((long)K * M), *dout = filled((long)N * M);
            float *out = filled((long)N * M), *din = filled((long)N * K), *dw = filled((long)K * M);
            double f = best_time(0, N, K, M, in, w, out);
            double b = best_time(1, N, K, M, dout, w, din) + best_time(2, N, K, M, in, dout, dw);
            double flops = 2.0 * N * K * M;
            printf("shape %d:%d:%d fwd_gflops %.2f bwd_gflops %.2f\n", N, K, M, flops / f * 1e-9, 2 * flops / b * 1e-9);
            free(in); free(w); free(dout); free(out); free(din); free(dw);
        }
        s = strchr(s, ',');
        if (s) s++;
    }
    return 0;
}
