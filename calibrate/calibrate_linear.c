/*
 * calibrate_linear.c — GEMM rates as a training step meets them.  A step
 * runs each linear through the runtime's op (runtime/cpu/prt_cpu_ops.c): the
 * forward a GEMM onto the broadcast bias row (beta 1), the backward the bias
 * gradient's column sums, then the input gradient against the transposed
 * weight and the weight gradient from the transposed input, each added into;
 * 16-bit tensors widened into fp32 scratch and rounded back.  And between
 * two calls of one linear the step has run every other op, so its operands
 * come from beyond the L2, not from the previous call's cache lines: the
 * measurement cycles through operand sets four L2s big together.  A hot loop
 * of plain sgemm calls on one buffer misses all of it, most at the tiny
 * class's shapes, where the per-call work is a few microseconds.
 */
#include "calibrate_linear.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "prt_backend.h"
#include "prt_internal.h"
#include "prt_math.h"

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int linear_sets(double set_bytes)
{
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    double want = 4.0 * (double)(l2 > 0 ? l2 : 1 << 20);
    double sets = set_bytes > 0 ? want / set_bytes + 1 : 1;
    return sets > 64 ? 64 : sets < 1 ? 1 : (int)sets;
}

/* The tensors of one linear, in the order they lie in a set:
 * in, w, b, out, dout, din, dw, db. */
enum { L_IN, L_W, L_B, L_OUT, L_DOUT, L_DIN, L_DW, L_DB, L_COUNT };

double linear_rate(int64_t N, int64_t K, int64_t M, int wide16)
{
    const int64_t elems[L_COUNT] = {N * K, K * M, M, N * M, N * M, N * K, K * M, M};
    int64_t per_set = 0;
    for (int t = 0; t < L_COUNT; t++) per_set += elems[t];
    size_t esize = wide16 ? sizeof(uint16_t) : sizeof(float);
    int sets = linear_sets((double)per_set * (double)esize);
    char *mem = malloc((size_t)per_set * (size_t)sets * esize);
    struct prt *rt = calloc(1, sizeof *rt);
    if (!mem || !rt) {
        fprintf(stderr, "parc_calibrate: out of memory (%d linear operand sets of %lld elements)\n", sets,
                (long long)per_set);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int64_t dt = wide16 ? PRT_BF16 : PRT_F32;
    for (int64_t i = 0; i < per_set * sets; i++) /* small values: the gradients are added into, call after call */
        prt_store(mem, dt, i, 1e-3f * (float)((i * 2654435761u) % 1000) / 1000.0f);
    rt->backend = &prt_backend_cpu;
    int64_t dt_fwd = PRT_ARG_DTYPES(dt, dt, dt, dt), dt_bwd = PRT_ARG_DTYPES(dt, dt, dt, dt, dt, dt);
    double flops = 6.0 * (double)N * (double)K * (double)M, best = 0;
    for (int rep = -1; rep < 3; rep++) { /* a pass over every set first: the workspace booked, the pages touched */
        int64_t calls = 0;
        double t0 = seconds(), t;
        do {
            char *s = mem + (size_t)(calls % sets) * (size_t)per_set * esize;
            void *p[L_COUNT];
            for (int64_t k = 0, off = 0; k < L_COUNT; off += elems[k], k++) p[k] = s + (size_t)off * esize;
            prt_matmul_bias_fwd(rt, p[L_OUT], p[L_IN], p[L_W], p[L_B], N, K, M, dt_fwd);
            prt_matmul_bias_bwd(rt, p[L_DIN], p[L_DW], p[L_DOUT], p[L_IN], p[L_W], p[L_DB], N, K, M, dt_bwd);
            calls++;
        } while ((t = seconds() - t0) < (rep < 0 ? 0 : 0.2) || calls < sets);
        if (rep >= 0 && (double)calls * flops / t > best) best = (double)calls * flops / t;
    }
    free(rt->work), free(rt), free(mem);
    return best;
}
