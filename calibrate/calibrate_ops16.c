/*
 * calibrate_ops16.c — what 16-bit tensors cost the CPU runtime's
 * memory-bound ops, class by class (`stream16`'s four shares).  Each op over
 * bf16 tensors loads every element widened and stores it rounded
 * (prt_math.h); where that is all the work (an add) a 16-bit byte costs
 * several fp32 ones, and where the op's arithmetic has a fast fp32 kernel
 * the 16-bit path does not share (GELU's tanh, the loss's exp, a norm's row
 * sums) it costs more still.  One share for all of them charges a GELU at
 * an add's share or the reverse; the classes differ by 2-4x on this
 * machine.  So each class's op runs through the backend's table (as a
 * program calls it; the CPU's, or a started runtime's) over fp32 tensors and over bf16 ones at the same shape,
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
        prt_layernorm_fwd(rt, b->z, b->stats, b->stats + n / C, b->x, b->g, b->bias, n / C, C, 1e-5,
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

/* Uploads n elements of dtype dt, element i = a + b x (i mod m), into dst. */
static void upload_pattern(struct prt *ctx, void *dst, void *host, int64_t dt, int64_t n, float a, float b, int64_t m)
{
    for (int64_t i = 0; i < n; i++) prt_store(host, dt, i, a + b * (float)(i % m));
    ctx->backend->upload(ctx, dst, host, (size_t)n * prt_dtype_size(dt));
}

/* Best seconds of one call of class k in dtype dt over 5 (after one warm),
 * each waited for; host: n floats of scratch for the uploads. */
static double class_time(struct prt *ctx, int k, int64_t dt, int64_t n, Ops16Bufs *b, float *host)
{
    /* values of a trained step's size, in the tensors' own dtype */
    upload_pattern(ctx, b->x, host, dt, n, 0.5f, -1e-3f, 997);
    upload_pattern(ctx, b->y, host, dt, n, 0.25f, 0.0f, 1);
    upload_pattern(ctx, b->z, host, dt, n, 0.0f, 0.01f, 13);
    upload_pattern(ctx, b->g, host, dt, 256, 1.0f, 0.0f, 1);
    upload_pattern(ctx, b->bias, host, dt, 256, 0.0f, 0.0f, 1);
    for (int64_t r = 0; r < n / 256; r++) host[r] = 0.0f, host[n / 256 + r] = 1.0f;
    for (int64_t r = 0; r < n / 4096; r++) host[2 * r] = 0.5f, host[2 * r + 1] = 0.5f + logf(4096.0f);
    ctx->backend->upload(ctx, b->stats, host, (size_t)(2 * n / 256 + 2) * sizeof(float));
    double best = 1e30;
    for (int rep = 0; rep < 6; rep++) {
        cal_sync(ctx);
        double t0 = clock_s();
        class_call(ctx, k, dt, n, b);
        cal_sync(ctx);
        double t = clock_s() - t0;
        if (rep && t < best) best = t;
    }
    return best;
}

void stream16_shares(struct prt *rt, int64_t n, double *share, double *t32, double *t16)
{
    struct prt *ctx = cal_context(rt);
    Ops16Bufs b;
    void **tensors[] = {&b.x, &b.y, &b.z, &b.g, &b.bias, &b.dg, &b.db};
    for (int i = 0; i < 7; i++) *tensors[i] = cal_tensor(ctx, i < 3 ? n : 256, PRT_F32, 0.0f, 0.0f);
    b.stats = cal_tensor(ctx, 2 * n / 256 + 2, PRT_F32, 0.0f, 0.0f);
    float *host = malloc((size_t)(n + 2) * sizeof(float));
    int32_t *targets = malloc((size_t)(n / 4096 + 1) * sizeof(int32_t));
    if (!host || !targets) {
        fprintf(stderr, "parc_calibrate: out of memory (16-bit op shares over %lld elements)\n", (long long)n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int64_t r = 0; r < n / 4096; r++) targets[r] = (int32_t)((r * 37) % 4096);
    b.targets = cal_tensor(ctx, n / 4096 + 1, PRT_I32, 0.0f, 0.0f);
    ctx->backend->upload(ctx, b.targets, targets, (size_t)(n / 4096 + 1) * sizeof(int32_t));
    for (int k = 0; k < STREAM16_CLASSES; k++) {
        t32[k] = class_time(ctx, k, PRT_F32, n, &b, host);
        t16[k] = class_time(ctx, k, PRT_BF16, n, &b, host);
        share[k] = t32[k] / (2.0 * t16[k]);
    }
    for (int i = 0; i < 7; i++) cal_free(ctx, *tensors[i]);
    cal_free(ctx, b.stats), cal_free(ctx, b.targets);
    free(host), free(targets);
    cal_context_done(rt, ctx);
}
