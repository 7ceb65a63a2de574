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

struct prt *cal_context(struct prt *rt)
{
    if (rt) return rt;
    struct prt *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        fprintf(stderr, "parc_calibrate: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    ctx->backend = &prt_backend_cpu;
    return ctx;
}

void cal_context_done(struct prt *rt, struct prt *ctx)
{
    if (ctx == rt) return;
    free(ctx->work), free(ctx);
}

void *cal_tensor(struct prt *ctx, int64_t n, int64_t dt, float first, float spread)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * prt_dtype_size(dt);
    char *host = malloc(bytes);
    if (!host) {
        fprintf(stderr, "parc_calibrate: out of memory (%zu bytes)\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int64_t i = 0; i < n; i++) {
        float v = first + spread * (float)((i * 2654435761u) % 1000) / 1000.0f;
        if (dt == PRT_I32) ((int32_t *)(void *)host)[i] = (int32_t)v;
        else prt_store(host, dt, i, v);
    }
    void *p = ctx->backend->alloc_zero(ctx, bytes, "calibrate");
    ctx->backend->upload(ctx, p, host, bytes);
    free(host);
    return p;
}

void cal_free(struct prt *ctx, void *p) { ctx->backend->free(ctx, p); }

void cal_sync(struct prt *ctx)
{
    if (ctx->backend->sync) ctx->backend->sync(ctx);
}

int linear_sets(const struct prt *ctx, double set_bytes)
{
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    double want = ctx->backend->host_memory ? 4.0 * (double)(l2 > 0 ? l2 : 1 << 20) : 256.0 * 1048576.0;
    double sets = set_bytes > 0 ? want / set_bytes + 1 : 1;
    return sets > 64 ? 64 : sets < 1 ? 1 : (int)sets;
}

/* The tensors of one linear, in the order they lie in a set:
 * in, w, b, out, dout, din, dw, db. */
enum { L_IN, L_W, L_B, L_OUT, L_DOUT, L_DIN, L_DW, L_DB, L_COUNT };

int cal_repeated, cal_measured;

int rate_settled(const double *rates, int done)
{
    if (done < 3) return 0;
    int last = done >= CAL_REPEATS, best = 0;
    for (int i = 1; i < done; i++)
        if (rates[i] > rates[best]) best = i;
    int agree = 0;
    for (int i = 0; i < done && !agree; i++) agree = i != best && rates[i] >= (1.0 - CAL_AGREE) * rates[best];
    if (agree || last) {
        cal_measured++;
        cal_repeated += done > 3;
        return 1;
    }
    return 0;
}

double linear_rate(struct prt *rt, int64_t N, int64_t K, int64_t M, int wide16)
{
    const int64_t elems[L_COUNT] = {N * K, K * M, M, N * M, N * M, N * K, K * M, M};
    int64_t per_set = 0;
    for (int t = 0; t < L_COUNT; t++) per_set += elems[t];
    struct prt *ctx = cal_context(rt);
    size_t esize = wide16 ? sizeof(uint16_t) : sizeof(float);
    int sets = linear_sets(ctx, (double)per_set * (double)esize);
    int64_t dt = wide16 ? PRT_BF16 : PRT_F32;
    /* small values: the gradients are added into, call after call */
    char *mem = cal_tensor(ctx, per_set * sets, dt, 0.0f, 1e-3f);
    int64_t dt_fwd = PRT_ARG_DTYPES(dt, dt, dt, dt), dt_bwd = PRT_ARG_DTYPES(dt, dt, dt, dt, dt, dt);
    double flops = 6.0 * (double)N * (double)K * (double)M, best = 0, rates[CAL_REPEATS];
    for (int rep = -1; rep < CAL_REPEATS; rep++) { /* a pass over every set first: the workspace booked, the pages touched */
        int64_t calls = 0;
        double t0 = seconds(), t;
        do { /* a pass over the sets between clock readings, waited for (a device's calls are queued) */
            for (int k = 0; k < sets; k++, calls++) {
                char *s = mem + (size_t)k * (size_t)per_set * esize;
                void *p[L_COUNT];
                for (int64_t j = 0, off = 0; j < L_COUNT; off += elems[j], j++) p[j] = s + (size_t)off * esize;
                prt_matmul_bias_fwd(ctx, p[L_OUT], p[L_IN], p[L_W], p[L_B], N, K, M, dt_fwd);
                prt_matmul_bias_bwd(ctx, p[L_DIN], p[L_DW], p[L_DOUT], p[L_IN], p[L_W], p[L_DB], N, K, M, dt_bwd);
            }
            cal_sync(ctx);
        } while ((t = seconds() - t0) < (rep < 0 ? 0 : 0.2));
        if (rep < 0) continue;
        rates[rep] = (double)calls * flops / t;
        if (rates[rep] > best) best = rates[rep];
        if (rate_settled(rates, rep + 1)) break;
    }
    cal_free(ctx, mem);
    cal_context_done(rt, ctx);
    return best;
}
