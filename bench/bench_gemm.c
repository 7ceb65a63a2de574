/*
 * bench_gemm.c — prt_matmul_fwd against cblas_sgemm called directly, at the GEMM
 * shapes of the tiny GPT (examples/common/tiny_gpt.par: N = micro_batch x seq,
 * hidden 64, ffn 256, vocab 256) and of a GPT-2-small-sized layer.  Prints GFLOP/s
 * of both and the ratio (prt / direct; 1.00 = no overhead).  One rank:
 *   bench_gemm [--reps R]
 */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parc_rt.h"

static float *filled(int64_t n) {
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) exit(1);
    for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

/* Seconds per call, timed over enough calls to last about 0.2 s. */
static double time_calls(prt *rt, int direct, float *out, const float *in, const float *w, int N, int K, int M) {
    int reps = 1;
    for (;;) {
        double t0 = MPI_Wtime();
        for (int r = 0; r < reps; r++) {
            if (direct) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, M, K, 1.0f, in, K, w, M, 0.0f, out, M);
            else prt_matmul_fwd(rt, out, in, w, N, K, M, 0);
        }
        double t = MPI_Wtime() - t0;
        if (t > 0.2 || reps >= (1 << 20)) return t / reps;
        reps *= t < 0.02 ? 10 : 2;
    }
}

int main(int argc, char **argv) {
    prt_plan_desc plan;
    memset(&plan, 0, sizeof plan);
    plan.plan_name = "bench_gemm";
    plan.dp_axis = plan.tp_axis = plan.pp_axis = -1;
    char *rt_argv[2] = {argv[0], NULL};
    (void)argc;
    prt *rt = prt_init(1, rt_argv, &plan);
    static const struct { const char *what; int N, K, M; } shapes[] = {
        {"tiny qkv   (mb 2)", 64, 64, 192},   {"tiny proj  (mb 2)", 64, 64, 64},
        {"tiny fc    (mb 2)", 64, 64, 256},   {"tiny fcpr  (mb 2)", 64, 256, 64},
        {"tiny head  (mb 2)", 64, 64, 256},   {"tiny fc    (b 8)", 256, 64, 256},
        {"bench qkv", 1024, 768, 2304},       {"bench fc", 1024, 768, 3072},
        {"bench fcproj", 1024, 3072, 768},
    };
    printf("%-20s %6s %6s %6s %12s %12s %8s\n", "shape", "N", "K", "M", "prt GFLOP/s", "blas GFLOP/s", "ratio");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s].N, K = shapes[s].K, M = shapes[s].M;
        float *in = filled((int64_t)N * K), *w = filled((int64_t)K * M), *out = filled((int64_t)N * M);
        time_calls(rt, 1, out, in, w, N, K, M);  /* warm up */
        double direct = time_calls(rt, 1, out, in, w, N, K, M), ours = time_calls(rt, 0, out, in, w, N, K, M);
        double flops = 2.0 * N * K * M;
        printf("%-20s %6d %6d %6d %12.2f %12.2f %8.3f\n", shapes[s].what, N, K, M, flops / ours * 1e-9,
               flops / direct * 1e-9, direct / ours);
        free(in); free(w); free(out);
    }
    return (int)prt_finalize(rt);
}
