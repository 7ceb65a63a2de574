/*
 * bench_attention.c — the CPU runtime's causal attention, forward and backward
 * without kept probabilities (what a plan runs when attention recomputes), on
 * qkv[B, T, 3, NH, HD] fp32.  Built by bench/bench_attention.sh, which links
 * it against the runtime library of a build and, as a second kernel, against
 * prt_cpu_attention.c of another revision compiled with its entry points
 * renamed (prt_old_attention_heads_fwd / _bwd): both kernels then run in one
 * process, alternating, on the same buffers.
 *   SHAPES="T:BNH [T:BNH ...]" bench_attention   (B = BNH / NH rounded up, NH = 4, HD = 64)
 *   env: REPS (default 3; the minimum over them is printed), KERNELS ("new old")
 * (shapes from the environment: the runtime may start the program again, with
 * its own arguments, to choose the BLAS's threads or kernels)
 * Output, one line per (T, kernel), machine-readable:
 *   blas_core <name> threads <n>        first
 *   attention T <T> B <B> NH <NH> HD <HD> kernel <new|old> fwd_ms <f> bwd_ms <b> fwd_cpu_ms <f> bwd_cpu_ms <b>
 * (wall and process CPU time, each the minimum over the calls)
 */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parc_rt.h"

/* CPU seconds of the process (all its threads): the measure for one thread on
 * a loaded machine, where the wall clock also counts the time others ran. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The other revision's kernel (its prt_cpu_attention.c, names changed); drop NULL.  Revisions
 * whose kernels take the key/value head count after NH are built with -DOLD_KV (then KV = NH). */
#ifdef OLD_KV
#define OLD_KV_PARAM int64_t KV,
#define OLD_KV_ARG(nh) nh,
#else
#define OLD_KV_PARAM
#define OLD_KV_ARG(nh)
#endif
void prt_old_attention_heads_fwd(prt *rt, void *out, void *probs, const void *qkv, int64_t B, int64_t T, int64_t NH,
                                 OLD_KV_PARAM int64_t HD, int64_t causal, const void *drop, int64_t dtypes);
void prt_old_attention_heads_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs, int64_t B,
                                 int64_t T, int64_t NH, OLD_KV_PARAM int64_t HD, int64_t causal, const void *drop,
                                 int64_t dtypes);

static float *filled(int64_t n, unsigned seed) {
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_attention: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) p[i] = (float)(((uint64_t)i * 2654435761u + seed) % 1000) / 500.0f - 1.0f;
    return p;
}

int main(int argc, char **argv) {
    prt_plan_desc plan;
    memset(&plan, 0, sizeof plan);
    plan.plan_name = "bench_attention";
    plan.dp_axis = plan.tp_axis = plan.pp_axis = -1;
    char *rt_argv[2] = {argv[0], NULL};
    (void)argc;
    prt *rt = prt_init(1, rt_argv, &plan);
    int reps = getenv("REPS") ? atoi(getenv("REPS")) : 3;
    const char *kernels = getenv("KERNELS") ? getenv("KERNELS") : "new old";
    if (reps < 1) reps = 1;
    printf("blas_core %s threads %d\n", openblas_get_corename(), openblas_get_num_threads());
    const int64_t NH = 4, HD = 64;
    const char *shapes = getenv("SHAPES");
    if (!shapes || !*shapes) {
        fprintf(stderr, "bench_attention: no SHAPES (\"T:BNH ...\") in the environment\n");
        return 2;
    }
    for (const char *p = shapes; *p;) {
        long long T_, bnh;
        int used = 0;
        while (*p == ' ') p++;
        if (!*p) break;
        if (sscanf(p, "%lld:%lld%n", &T_, &bnh, &used) != 2 || T_ < 1 || bnh < 1) {
            fprintf(stderr, "bench_attention: '%s' is not T:BNH\n", p);
            return 2;
        }
        p += used;
        int64_t T = T_, B = (bnh + NH - 1) / NH, C = NH * HD;
        float *qkv = filled(B * T * 3 * C, 1), *dout = filled(B * T * C, 2), *out = filled(B * T * C, 3),
              *dqkv = filled(B * T * 3 * C, 4);
        for (int k = 0; k < 2; k++) {
            int old = k == 1;
            if (!strstr(kernels, old ? "old" : "new")) continue;
            double fwd = 1e30, bwd = 1e30, fwd_cpu = 1e30, bwd_cpu = 1e30;
            for (int r = 0; r <= reps; r++) { /* r = 0 warms up */
                memset(dqkv, 0, sizeof(float) * (size_t)(B * T * 3 * C));
                double c0 = cpu_now(), t0 = MPI_Wtime();
                if (old) prt_old_attention_heads_fwd(rt, out, NULL, qkv, B, T, NH, OLD_KV_ARG(NH) HD, 1, NULL, 0);
                else prt_attention_fwd(rt, out, NULL, qkv, B, T, NH, NH, HD, 1, T, 0, 0);
                double t1 = MPI_Wtime(), c1 = cpu_now();
                if (old) prt_old_attention_heads_bwd(rt, dqkv, dout, qkv, NULL, B, T, NH, OLD_KV_ARG(NH) HD, 1, NULL, 0);
                else prt_attention_bwd(rt, dqkv, dout, qkv, NULL, B, T, NH, NH, HD, 1, T, 0, 0);
                double t2 = MPI_Wtime(), c2 = cpu_now();
                if (r > 0 && t1 - t0 < fwd) fwd = t1 - t0;
                if (r > 0 && t2 - t1 < bwd) bwd = t2 - t1;
                if (r > 0 && c1 - c0 < fwd_cpu) fwd_cpu = c1 - c0;
                if (r > 0 && c2 - c1 < bwd_cpu) bwd_cpu = c2 - c1;
            }
            printf("attention T %lld B %lld NH %lld HD %lld kernel %s fwd_ms %.2f bwd_ms %.2f fwd_cpu_ms %.2f bwd_cpu_ms %.2f\n",
                   (long long)T, (long long)B, (long long)NH, (long long)HD, old ? "old" : "new", fwd * 1e3, bwd * 1e3,
                   fwd_cpu * 1e3, bwd_cpu * 1e3);
            fflush(stdout);
        }
        free(qkv), free(dout), free(out), free(dqkv);
    }
    return (int)prt_finalize(rt);
}
