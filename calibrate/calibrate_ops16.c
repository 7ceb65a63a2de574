/*
 * calibrate_ops16.c — what 16-bit tensors cost the CPU runtime's
 * memory-bound ops, class by class (`stream16`'s four shares).  Each op over
 * bf16 tensors loads every element widened and stores it rounded
 * (prt_math.h); where that is all the work (an add) a 16-bit byte costs
 * several fp32 ones, and where the op's arithmetic has a fast fp32 kernel
 * the 16-bit path does not share (GELU's tanh, the loss's exp, a norm's row
 * sums) it costs more still.  One share for all of them charges a GELU at
 * an add's share or the reverse; the classes differ by 2-4x on this
 * machine.  So each class's op runs through the CPU backend's table (as a
 * program calls it) over fp32 tensors and over bf16 ones at the same shape,
 * and its share is the ratio of the bytes per second the cost model charges
 * (half the bytes at 16 bits): fp32 time / (2 x bf16 time).
 */
#include "calibrate_linear.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "prt_backend.h"
#include "prt_internal.h"
#include "prt_math.h"

static double clock_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The ops of stream16 class k over n elements (rows of C = 256, the loss's
 * of V = 4096 logits) in dtype dt, each backward its input gradient's first
 * writer: 0 the add, 1 layer norm forward and backward, 2 GELU forward and
 * backward, 3 the cross-entropy's backward. */
typedef struct Ops16Bufs {
    void *x, *y, *z, *g, *bias, *dg, *db;
    float *stats; /* layer norm's mean and rstd, the loss's row max and log-sum-exp: fp32 as in every plan */
    int32_t *targets;
} Ops16Bufs;

static void class_call(struct prt *rt, int k, int64_t dt, int64_t n, const Ops16Bufs *b)
{
    const int64_t C = 256, V = 4096, W = dt | PRT_ARG_WRITE, F = PRT_F32;
    switch (k) {
    case 0: prt_add_fwd(rt, b->z, b->x, b->y, n, PRT_ARG_DTYPES(dt, dt, dt)); break;
    case 1:
        prt_layernorm_fwd(rt, b->z, b->stats, b->stats + n / C, b->x, b->g, b->bias, n / C, C,
                          PRT_ARG_DTYPES(dt, F, F, dt, dt, dt));
        prt_layernorm_bwd(rt, b->y, b->dg, b->db, b->z, b->x, b->g, b->stats, b->stats + n / C, n / C, C,
                          PRT_ARG_DTYPES(W, dt, dt, dt, dt, dt, F, F));
        break;
    case 2:
        prt_gelu_fwd(rt, b->z, b->x, n, PRT_ARG_DTYPES(dt, dt));
        prt_gelu_bwd(rt, b->y, b->x, b->z, n, PRT_ARG_DTYPES(W, dt, dt));
        break;
    default:
        prt_xent_bwd(rt, b->z, b->x, b->stats, b->targets, n / V, V, 0, 1.0 / (double)(n / V),
                     PRT_ARG_DTYPES(W, dt, F, PRT_I32));
        break;
    }
}

/* Best seconds of one call of class k in dtype dt over 5 (after one warm). */
static double class_time(struct prt *rt, int k, int64_t dt, int64_t n, Ops16Bufs *b)
{
    for (int64_t i = 0; i < n; i++) { /* values of a trained step's size, in the tensors' own dtype */
        prt_store(b->x, dt, i, 0.5f - 1e-3f * (float)(i % 997));
        prt_store(b->y, dt, i, 0.25f);
        prt_store(b->z, dt, i, 0.01f * (float)(i % 13));
    }
    for (int64_t i = 0; i < 256; i++) prt_store(b->g, dt, i, 1.0f), prt_store(b->bias, dt, i, 0.0f);
    for (int64_t r = 0; r < n / 256; r++) b->stats[r] = 0.0f, b->stats[n / 256 + r] = 1.0f;
    for (int64_t r = 0; r < n / 4096; r++) b->stats[2 * r] = 0.5f, b->stats[2 * r + 1] = 0.5f + logf(4096.0f);
    double best = 1e30;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = clock_s();
        class_call(rt, k, dt, n, b);
        double t = clock_s() - t0;
        if (rep && t < best) best = t;
    }
    return best;
}

void stream16_shares(int64_t n, double *share, double *t32, double *t16)
{
    Ops16Bufs b;
    void **tensors[] = {&b.x, &b.y, &b.z, &b.g, &b.bias, &b.dg, &b.db};
    for (int i = 0; i < 7; i++) *tensors[i] = malloc((size_t)(i < 3 ? n : 256) * sizeof(float));
    b.stats = malloc((size_t)(2 * n / 256 + 2) * sizeof(float));
    b.targets = malloc((size_t)(n / 4096 + 1) * sizeof(int32_t));
    struct prt *rt = calloc(1, sizeof *rt);
    if (!b.x || !b.y || !b.z || !b.g || !b.bias || !b.dg || !b.db || !b.stats || !b.targets || !rt) {
        fprintf(stderr, "parc_calibrate: out of memory (16-bit op shares over %lld elements)\n", (long long)n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int64_t r = 0; r < n / 4096; r++) b.targets[r] = (int32_t)((r * 37) % 4096);
    rt->backend = &prt_backend_cpu;
    for (int k = 0; k < STREAM16_CLASSES; k++) {
        t32[k] = class_time(rt, k, PRT_F32, n, &b);
        t16[k] = class_time(rt, k, PRT_BF16, n, &b);
        share[k] = t32[k] / (2.0 * t16[k]);
    }
    for (int i = 0; i < 7; i++) free(*tensors[i]);
    free(b.stats), free(b.targets), free(rt->work), free(rt);
}
