/*
 * parc_calibrate.c — measures the machine it runs on as parc's cost model
 * sees a cluster, with the libraries the CPU runtime computes and
 * communicates with (OpenBLAS, MPI), one rank per core as `parc run` starts
 * them, and writes a cluster fragment plans include inside `cluster { }`:
 *
 *   gpu { memory; bf16; fp32; hbm; }   the best GEMM rate as the peak, the
 *                                      best streaming bandwidth, this rank's
 *                                      share of the machine's memory
 *   link intra BW LATENCY;             MPI between two local ranks
 *   link inter BW LATENCY;             with --inter LINK: MPI between ranks on
 *                                      two hosts, a rank's share while every
 *                                      rank of a host sends, as a
 *                                      `--link-inter LINK` launch measured it
 *                                      (which also measured the compute, in
 *                                      LINK too, with every host's ranks)
 *   efficiency { ... }                 each GEMM shape class against that
 *                                      peak, attention-shaped GEMMs, the
 *                                      runtime's kinds of memory-bound loops
 *                                      against the streaming bandwidth, its
 *                                      attention kernels' score traffic, the
 *                                      all-reduce bus bandwidth against the link
 *
 * Every rank measures the GEMMs and loops at once, as a run's ranks compute at
 * once on cores they share with whatever else the machine runs, and the
 * slowest rank's rate is written: a step of a synchronous program goes at
 * its slowest rank's pace.  Before anything it makes the same BLAS kernel
 * choice the runtime makes (prt_blas_select, runtime/prt_blas.c), so the
 * rates are those of the kernels the programs will run; the fragment names
 * them.
 *
 * Run as `mpirun -np 2 parc_calibrate OUT.par [--inter LINK] [LINK...]`
 * (`parc calibrate` does, after three `mpirun -np 2 parc_calibrate --link
 * LINK` launches that measure the link alone: link_of_fast, and with
 * --hosts one `mpirun -np HxS --map-by ppr:S:node parc_calibrate --link-inter
 * LINK` on the H hosts: measure_inter_link); with one rank it leaves the
 * link out.  Exit status 0, or 1 after a failed measurement or write (the message
 * names it).
 */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "calibrate_linear.h"
#include "cpu/prt_cpu_fast.h"
#include "prt_backend.h"
#include "prt_internal.h"
#include "prt_math.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *alloc_floats(size_t n, float v)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "parc_calibrate: out of memory (%zu floats)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < n; i++) p[i] = v + (float)(i % 7) * 1e-3f;
    return p;
}

/* Best FLOP/s of a plain fp32 C[m,n] = A[m,k] B[k,n] on one set of operands
 * over repeats lasting at least 0.2 s (the attention-shaped GEMMs). */
static double gemm_rate(int m, int n, int k)
{
    float *a = alloc_floats((size_t)m * k, 0.5f), *b = alloc_floats((size_t)k * n, 0.25f);
    float *c = alloc_floats((size_t)m * n, 0.0f);
    double best = 0, flops = 2.0 * m * n * k, rates[CAL_REPEATS];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n); /* warm */
    for (int rep = 0; rep < CAL_REPEATS; rep++) {
        int calls = 0;
        double t0 = now(), t;
        do {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
            calls++;
        } while ((t = now() - t0) < 0.2);
        rates[rep] = calls * flops / t;
        if (rates[rep] > best) best = rates[rep];
        if (rate_settled(rates, rep + 1)) break;
    }
    free(a), free(b), free(c);
    return best;
}

/* The triad (z = x + 0.5 y), the streaming bandwidth: bytes over time, best of 5. */
static double triad_rate(size_t n)
{
    float *x = alloc_floats(n, 1.0f), *y = alloc_floats(n, 2.0f), *z = alloc_floats(n, 0.0f);
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (size_t i = 0; i < n; i++) z[i] = x[i] + 0.5f * y[i];
        double t = now() - t0;
        if (3.0 * n * sizeof(float) / t > best) best = 3.0 * n * sizeof(float) / t;
    }
    volatile float sink = z[n / 2];
    (void)sink;
    free(x), free(y), free(z);
    return best;
}

/* The runtime's own fp32 kernels (runtime/cpu/prt_cpu_fast.c), one class of
 * the cost model's memory-bound ops each.  ORDER: the rates kernel_rates
 * fills, and the efficiency each becomes. */
enum { K_ADD, K_NORM, K_GELU, K_SOFTMAX, K_ADAMW, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"add", "layer norm", "GELU", "cross-entropy", "AdamW"};
/* The fp32 elements a pass of each class moves per element, as the cost
 * model charges it (the traffic of compiler/lower/ops.c's rows): the add's 2 reads and a
 * write; forward and backward passes of a norm and of GELU; the loss's max,
 * sum of exp and gradient; AdamW's weights, gradients and both moments read
 * and written.  kernel_pass and op_rates both charge these. */
static const double kernel_floats[K_COUNT] = {3, 5, 5, 4, 8};

/* One pass of kernel k over n elements (rows of 256, or of 4096 logits),
 * each backward writing its input gradient as the first writer does;
 * returns the bytes the cost model charges for it (kernel_floats). */
static double kernel_pass(int k, size_t n, float *x, float *y, float *z, float *w, int32_t *targets)
{
    const int64_t C = 256, V = 4096;
    switch (k) {
    case K_ADD: prt_fast_add(z, x, y, (int64_t)n); break;
    case K_NORM: {
        int64_t N = (int64_t)n / C;
        float *mean = w, *rstd = w + N, *g = w + 2 * N, *b = g + C, *dg = b + C, *db = dg + C;
        prt_fast_layernorm_fwd(z, mean, rstd, x, g, b, N, C, 1e-5);
        prt_fast_layernorm_bwd(y, dg, db, z, x, g, mean, rstd, N, C, 1);
        break;
    }
    case K_GELU:
        prt_fast_gelu_fwd(z, x, (int64_t)n);
        prt_fast_gelu_bwd(y, x, z, (int64_t)n, 1);
        break;
    case K_SOFTMAX: {
        int64_t N = (int64_t)n / V;
        prt_fast_row_max(w, x, N, V);
        prt_fast_row_sumexp(w + N, w + 2 * N, x, w, targets, N, V, 0);
        for (int64_t r = 0; r < N; r++) w[4 * N + 2 * r + 1] = w[r] + logf(w[N + r]);
        prt_fast_xent_bwd(z, x, w + 4 * N, targets, N, V, 0, 1.0f / (float)N, 1);
        break;
    }
    default: prt_fast_adamw(x, y, z, w, (int64_t)n, 1, 1e-3, 0.9, 0.95, 1e-8, 0.0);
    }
    return kernel_floats[k] * (double)n * sizeof(float);
}

/* Bytes per second of each kernel over n elements, best of 5 passes. */
static void kernel_rates(size_t n, double *rates)
{
    float *x = alloc_floats(n, 0.5f), *y = alloc_floats(n, 0.25f), *z = alloc_floats(n, 0.0f);
    float *w = alloc_floats(n, 1.0f);
    int32_t *targets = malloc(n / 256 * sizeof *targets);
    if (!targets) {
        fprintf(stderr, "parc_calibrate: out of memory (%zu targets)\n", n / 256);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < n / 256; i++) targets[i] = (int32_t)(i % 4096);
    for (int k = 0; k < K_COUNT; k++) {
        rates[k] = 0;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now(), bytes = kernel_pass(k, n, x, y, z, w, targets), t = now() - t0;
            if (bytes / t > rates[k]) rates[k] = bytes / t;
        }
    }
    volatile float sink = z[n / 2] + y[n / 2] + x[n / 2];
    (void)sink;
    free(x), free(y), free(z), free(w), free(targets);
}

/* The runtime's attention op (attention_fwd, then attention_bwd: the CPU
 * backend's kernels through the op table, as a program calls them), causal,
 * the probabilities kept for the backward (stored attention, the lowering
 * with recompute none) or not (flash attention: score tiles on chip), at two
 * shapes: the bench GPT's micro-batch (8 samples of 256
 * tokens, 8 heads of 32) and the tiny plans' (2 of 32, 4 heads of 16), where
 * the per-head cost of the small block products and softmax rows weighs
 * more.  ORDER: att_shapes, and each shape's pairs of calls a repeat times. */
enum { ATT_SHAPES = 2 };
static const int att_shapes[ATT_SHAPES][4] = {{8, 256, 8, 32}, {2, 32, 4, 16}}; /* B, T, NH, HD */
static const int att_pairs[ATT_SHAPES] = {1, 200};

/* Best mean seconds of a forward and of a backward call at shape k over 5
 * repeats of att_pairs[k] forward and backward pairs (after one to warm the
 * workspace) in *fwd and *bwd, every tensor of dtype dt, the probabilities
 * kept or not, through rt (a started runtime, or NULL: a bare CPU context,
 * cal_context), each call waited for. */
static void attention_times(struct prt *rt, int k, int64_t dt, int kept, double *fwd, double *bwd)
{
    const int B = att_shapes[k][0], T = att_shapes[k][1], NH = att_shapes[k][2], HD = att_shapes[k][3];
    const int64_t C = (int64_t)NH * HD, rows = (int64_t)B * T;
    struct prt *ctx = cal_context(rt);
    void *qkv = cal_tensor(ctx, rows * 3 * C, dt, 0.0f, 0.1f), *out = cal_tensor(ctx, rows * C, dt, 0.0f, 0.0f);
    void *dout = cal_tensor(ctx, rows * C, dt, 0.01f, 0.0f), *dqkv = cal_tensor(ctx, rows * 3 * C, dt, 0.0f, 0.0f);
    void *probs = kept ? cal_tensor(ctx, (int64_t)B * NH * T * T, dt, 0.0f, 0.0f) : NULL;
    int64_t dt_fwd = PRT_ARG_DTYPES(dt, dt, dt), dt_bwd = PRT_ARG_DTYPES(dt, dt, dt, dt);
    *fwd = *bwd = 1e30;
    for (int rep = 0; rep < 6; rep++) {
        double tf = 0, tb = 0;
        for (int p = 0; p < att_pairs[k]; p++) {
            cal_sync(ctx);
            double t0 = now();
            prt_attention_fwd(ctx, out, probs, qkv, B, T, NH, NH, HD, 1, T, 0, dt_fwd);
            cal_sync(ctx);
            double t1 = now();
            prt_attention_bwd(ctx, dqkv, dout, qkv, probs, B, T, NH, NH, HD, 1, T, 0, dt_bwd);
            cal_sync(ctx);
            tf += t1 - t0, tb += now() - t1;
        }
        if (rep && tf / att_pairs[k] < *fwd) *fwd = tf / att_pairs[k];
        if (rep && tb / att_pairs[k] < *bwd) *bwd = tb / att_pairs[k];
    }
    cal_free(ctx, qkv), cal_free(ctx, out), cal_free(ctx, dout), cal_free(ctx, dqkv);
    if (probs) cal_free(ctx, probs);
    cal_context_done(rt, ctx);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The mean seconds of an all-reduce of COUNT floats issued after each rank
 * computed (two GEMMs of 128^3, about a quarter millisecond), the slowest
 * rank's: what a synchronisation costs a run, waiting for the other rank
 * included.  After 10 uncounted ones, SYNC_ROUNDS rounds of SYNCS /
 * SYNC_ROUNDS, the median round's mean (a round the machine took a rank
 * away in does not decide the figure). */
enum { SYNC_ROUNDS = 5 };

/* An all-reduce as the runtime runs each of its own (prt_mpi.c): started
 * and waited for, libnbc's ring (prt_mpi_settings, called before MPI_Init).
 * Every all-reduce that measures a link goes through it. */
static void link_allreduce(const void *send, void *recv, int count, MPI_Comm comm) {
    MPI_Request req;
    MPI_Iallreduce(send, recv, count, MPI_FLOAT, MPI_SUM, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
}

static double synced_allreduce_s(MPI_Comm comm, float *buf, size_t count, int syncs)
{
    const int dim = 128;
    float *a = alloc_floats((size_t)dim * dim, 0.5f), *c = alloc_floats((size_t)dim * dim, 0.0f);
    double round_s[SYNC_ROUNDS];
    int each = syncs / SYNC_ROUNDS;
    for (int k = -1; k < SYNC_ROUNDS; k++) {
        int n = k < 0 ? 10 : each;
        double waited = 0;
        MPI_Barrier(comm);
        for (int i = 0; i < n; i++) {
            for (int g = 0; g < 2; g++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim, dim, dim, 1.0f, a, dim, a, dim, 0.0f, c,
                            dim);
            double s0 = now();
            link_allreduce(MPI_IN_PLACE, buf, (int)count, comm);
            waited += now() - s0;
        }
        MPI_Allreduce(MPI_IN_PLACE, &waited, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (k >= 0) round_s[k] = waited / n;
    }
    free(a), free(c);
    qsort(round_s, SYNC_ROUNDS, sizeof round_s[0], cmp_double);
    return round_s[SYNC_ROUNDS / 2];
}

enum { MID_SIZES = 2 };
static const size_t mid_floats[MID_SIZES] = {4096, 65536}; /* 16 KiB, 256 KiB */

typedef struct Link {
    double latency, bandwidth, busbw;
    double sync; /* mean seconds of an 8-byte all-reduce after each rank's compute */
    double mid_s[MID_SIZES]; /* ... of all-reduces of mid_floats */
    double overlap, overlap_share[2]; /* measure_overlap: the mean, and the bucket's and the gathers' */
    double bytes; /* measure_inter_link: the size its bandwidth was measured at (0: 16 MiB) */
    double alone; /* measure_inter_link: the bandwidth of one pair of ranks while the others wait */
    double pairs; /* measure_inter_link: the pairs of ranks measuring at once (a host's ranks) */
    double ranks; /* the launch between hosts: its ranks, all measuring the compute at once */
    char hosts[2 * MPI_MAX_PROCESSOR_NAME + 8]; /* measure_inter_link: "A and B" */
} Link;

/* Ranks 0 and 1: half the round trip of 8 bytes (latency), of 16 MiB
 * (bandwidth), and the all-reduce bus bandwidth of 16 MiB over all ranks. */
static Link measure_link(int rank, int size)
{
    Link l = {0};
    const int small = 2000, big = 20;
    const size_t nbig = (size_t)4 << 20; /* floats: 16 MiB */
    /* the synchronisations on a zeroed buffer of their own: summed in place
     * hundreds of times, its values stay finite */
    float *mid = alloc_floats(mid_floats[MID_SIZES - 1], 0.0f);
    /* A synchronisation as a training step meets one: each rank computes
     * (GEMMs of about a quarter millisecond), then all-reduces 8 bytes.  Its
     * mean time holds what a ping-pong between idle ranks does not: waiting
     * for the other rank, whose core the machine's other work may have taken
     * meanwhile.  A mean, since a run's measured phases are means (of the
     * median round: synced_allreduce_s). */
    l.sync = synced_allreduce_s(MPI_COMM_WORLD, mid, 2, 400);
    /* the same at the sizes of a small plan's tensor-parallel all-reduces and
     * gathers, where a collective is far from its large-message bandwidth:
     * write_fragment fits the link's half-bandwidth size to them */
    for (int k = 0; k < MID_SIZES; k++) l.mid_s[k] = synced_allreduce_s(MPI_COMM_WORLD, mid, mid_floats[k], 200);
    free(mid);
    float *buf = alloc_floats(nbig, 1.0f), *out = alloc_floats(nbig, 0.0f);
    for (int pass = 0; pass < 2; pass++) {
        size_t count = pass ? nbig : 2;
        int iters = pass ? big : small;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        for (int i = 0; i < iters && rank < 2; i++) {
            if (rank == 0) {
                MPI_Send(buf, (int)count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
            }
        }
        double half = (now() - t0) / (2.0 * iters);
        if (pass == 0) l.latency = half;
        else l.bandwidth = (double)count * sizeof(float) / half;
    }
    link_allreduce(MPI_IN_PLACE, buf, (int)nbig, MPI_COMM_WORLD); /* warm */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int i = 0; i < big; i++) link_allreduce(buf, out, (int)nbig, MPI_COMM_WORLD);
    double t = (now() - t0) / big;
    l.busbw = 2.0 * (size - 1) / size * (double)nbig * sizeof(float) / t;
    free(buf), free(out);
    return l;
}

/* The median of n values (sorted in place). */
static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof x[0], cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Seconds of one ping-pong of `bytes` between ranks 0 and 1 of comm, half
 * the round trip, as rank 0 timed it (both return it). */
static double ping_pong_s(MPI_Comm comm, char *buf, size_t bytes)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    MPI_Barrier(comm);
    double t0 = now();
    if (rank == 0) {
        MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 0, comm);
        MPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 0, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 0, comm, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 0, comm);
    }
    double half = (now() - t0) / 2;
    MPI_Bcast(&half, 1, MPI_DOUBLE, 0, comm);
    return half;
}

/* A barrier the ranks reach asleep, testing it every millisecond: ranks
 * waiting for others to measure leave them the cores (where hosts share a
 * machine's, a polling rank takes one). */
static void idle_barrier(void)
{
    MPI_Request req;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (MPI_Test(&req, &done, MPI_STATUS_IGNORE); !done; MPI_Test(&req, &done, MPI_STATUS_IGNORE)) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* The least of x over the launch's ranks; a rank outside the pairs gives
 * none (+inf). */
static double least(double x)
{
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    return x;
}

/* The link between two hosts, measured by `pairs` pairs of ranks, a rank of
 * each pair on each host (pair: the pair's communicator, its rank 0 on the
 * first host; MPI_COMM_NULL on a rank in no pair, which waits).  `link
 * inter` is a GPU's share of its node's network while every GPU of the node
 * sends at once (docs/language.md), and a host's ranks share its link: the
 * bandwidth, the all-reduce bus bandwidth and the mid-size all-reduces after
 * compute are measured by every pair at once, the slowest pair's; the
 * latency, the bandwidth of one pair alone (`alone`, the link's own rate) and
 * the 8-byte all-reduce after compute by the first pair while the others
 * wait (ranks that compute and synchronise 8 bytes in lockstep on cores
 * shared with other pairs, an emulated cluster's, wait out each other's time
 * slices: 10 us to 4 ms from one launch to the next).  A network is
 * far slower than shared memory, so every size adapts to it: the latency is
 * the median of
 * INTER_ROUNDS rounds of 8-byte ping-pongs; the bandwidth a ping-pong of the
 * smallest power-of-two size from 1 MiB up to INTER_MAX_BYTES whose one-way
 * time alone reaches INTER_MIN_S, the median of INTER_ROUNDS after one that
 * warms the connection; the all-reduce bus bandwidth of that size the same
 * way; the 8-byte and mid-size all-reduces after compute as for the link
 * inside a host (synced_allreduce_s). */
enum { INTER_ROUNDS = 5 };
#define INTER_MIN_S 0.1
#define INTER_MAX_BYTES ((size_t)64 << 20)

static Link measure_inter_link(MPI_Comm pair, int first, int pairs)
{
    Link l = {0};
    l.pairs = pairs;
    char *buf = calloc(INTER_MAX_BYTES, 1);
    float *out = alloc_floats(INTER_MAX_BYTES / sizeof(float), 0.0f);
    if (!buf) {
        fprintf(stderr, "parc_calibrate: out of memory (%zu bytes)\n", INTER_MAX_BYTES);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double x[INTER_ROUNDS];
    size_t size = (size_t)1 << 20;
    if (first) { /* the first pair alone */
        for (int k = -1; k < INTER_ROUNDS; k++) {
            double sum = 0;
            for (int i = 0; i < 50; i++) sum += ping_pong_s(pair, buf, 8);
            if (k >= 0) x[k] = sum / 50;
        }
        l.latency = median(x, INTER_ROUNDS);
        ping_pong_s(pair, buf, size); /* the connection up, its window open */
        while (size < INTER_MAX_BYTES && ping_pong_s(pair, buf, size) < INTER_MIN_S) size *= 2;
        for (int k = 0; k < INTER_ROUNDS; k++) x[k] = (double)size / ping_pong_s(pair, buf, size);
        l.alone = median(x, INTER_ROUNDS);
    }
    idle_barrier();
    MPI_Bcast(&size, sizeof size, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&l.latency, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&l.alone, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    size_t bytes = size;
    if (pair != MPI_COMM_NULL) ping_pong_s(pair, buf, bytes); /* every pair's connection up */
    for (int k = 0; k < INTER_ROUNDS; k++) { /* every pair at once */
        MPI_Barrier(MPI_COMM_WORLD);
        x[k] = least(pair != MPI_COMM_NULL ? (double)bytes / ping_pong_s(pair, buf, bytes) : INFINITY);
    }
    l.bandwidth = median(x, INTER_ROUNDS);
    float *f = (float *)(void *)buf;
    size_t count = bytes / sizeof(float);
    memset(buf, 0, bytes);
    for (int k = -1; k < INTER_ROUNDS; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now(), bw = INFINITY;
        if (pair != MPI_COMM_NULL) {
            link_allreduce(f, out, (int)count, pair);
            double t = now() - t0;
            MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, pair);
            bw = (double)bytes / t; /* 2 (n - 1) / n = 1 for a pair */
        }
        bw = least(bw);
        if (k >= 0) x[k] = bw;
    }
    l.busbw = median(x, INTER_ROUNDS);
    l.bytes = (double)bytes;
    free(out);
    float *mid = alloc_floats(mid_floats[MID_SIZES - 1], 0.0f);
    double sync = 0, mids[MID_SIZES] = {0, 0};
    MPI_Barrier(MPI_COMM_WORLD);
    if (first) sync = synced_allreduce_s(pair, mid, 2, 100);
    idle_barrier();
    MPI_Bcast(&sync, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    l.sync = sync;
    if (pair != MPI_COMM_NULL)
        for (int k = 0; k < MID_SIZES; k++) mids[k] = synced_allreduce_s(pair, mid, mid_floats[k], 50);
    MPI_Allreduce(MPI_IN_PLACE, mids, MID_SIZES, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int k = 0; k < MID_SIZES; k++) l.mid_s[k] = mids[k];
    free(mid);
    free(buf);
    return l;
}

/* How much of a started collective runs beside the rank's compute, as the
 * runtime overlaps one (runtime/prt_overlap.c): the collective is posted,
 * the rank computes, MPI_Test is called between its ops, and the wait
 * comes after.  On CPU ranks the bytes are moved by the ranks' own cores
 * (Open MPI's shared-memory transport copies them, its nonblocking
 * collectives advance only inside MPI calls), so part of the collective's
 * time is the rank's own.  Two patterns a step meets: a gradient bucket
 * (one all-reduce of 4 MiB under 24 GEMMs of 256^3, about 8 ms) and a
 * layer's weight gathers (16 all-gathers of 64 KiB each rank, started
 * together, under 6 GEMMs).  For each: W the GEMMs alone, C the
 * collectives alone (started and waited), T both; the hidden share is
 * (W + C - T) / C, the slowest rank's times, the median of 5 rounds.
 * Writes each pattern's share; returns their mean. */
enum { OV_ROUNDS = 5, OV_GATHERS = 16 };

static void overlap_post(int pattern, float *buf, float *out, size_t n, MPI_Request *req, int size)
{
    if (pattern == 0) {
        MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
        return;
    }
    size_t each = n / OV_GATHERS / (size_t)size;
    for (int g = 0; g < OV_GATHERS; g++)
        MPI_Iallgather(buf + (size_t)g * each, (int)each, MPI_FLOAT, out + (size_t)g * each * (size_t)size,
                       (int)each, MPI_FLOAT, MPI_COMM_WORLD, &req[g]);
}

/* The share of the collectives' time hidden under the GEMMs, from the
 * slowest rank's times t = {GEMMs alone, collectives alone, both}:
 * (W + C - T) / C; 1 when the collectives took no time. */
static double hidden_share(double t[3])
{
    MPI_Allreduce(MPI_IN_PLACE, t, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t[1] > 0 ? (t[0] + t[1] - t[2]) / t[1] : 1.0;
}

/* The median of OV_ROUNDS shares (sorted in place), within [0, 1]. */
static double median_share(double r[OV_ROUNDS])
{
    qsort(r, OV_ROUNDS, sizeof r[0], cmp_double);
    double mid = r[OV_ROUNDS / 2];
    return mid < 0 ? 0 : mid > 1 ? 1 : mid;
}

static double overlap_round(int pattern, int gemms, float *a, float *c, float *buf, float *out, size_t n, int size,
                            int dim)
{
    int nreq = pattern == 0 ? 1 : OV_GATHERS;
    MPI_Request req[OV_GATHERS];
    double t[3];
    for (int k = 0; k < 3; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        if (k > 0) overlap_post(pattern, buf, out, n, req, size);
        for (int g = 0; k != 1 && g < gemms; g++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim, dim, dim, 1.0f, a, dim, a, dim, 0.0f, c, dim);
            int done;
            if (k == 2) MPI_Testall(nreq, req, &done, MPI_STATUSES_IGNORE);
        }
        if (k > 0) MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        t[k] = now() - t0;
    }
    return hidden_share(t);
}

static double measure_overlap(int size, double share[2])
{
    const int dim = 256;
    const size_t n = (size_t)1 << 20; /* floats: 4 MiB */
    float *a = alloc_floats((size_t)dim * dim, 0.5f), *c = alloc_floats((size_t)dim * dim, 0.0f);
    float *buf = alloc_floats(n, 1.0f), *out = alloc_floats(n, 0.0f);
    for (int pattern = 0; pattern < 2; pattern++) {
        double r[OV_ROUNDS];
        size_t count = pattern == 0 ? n : (size_t)OV_GATHERS * 16384 * (size_t)size; /* 64 KiB a rank each */
        for (int k = -1; k < OV_ROUNDS; k++) { /* round -1 warms the collectives up */
            double v = overlap_round(pattern, pattern == 0 ? 24 : 6, a, c, buf, out, count, size, dim);
            if (k >= 0) r[k] = v;
        }
        share[pattern] = median_share(r);
    }
    free(a), free(c), free(buf), free(out);
    return 0.5 * (share[0] + share[1]);
}

static double clamp01(double x) { return x > 1.0 ? 1.0 : x < 1e-3 ? 1e-3 : x; }

/* What one rank measures; every field a rate (the ranks' minimum is taken
 * field by field). */
typedef struct Rates {
    double gemm[4], gemm16[4], attn; /* FLOP/s: fp32, and 16-bit operands widened as the runtime does */
    double triad, kernel[K_COUNT];   /* bytes/s */
    double rate32[STREAM16_CLASSES], rate16[STREAM16_CLASSES]; /* 1 / seconds of each stream16 class's ops:
                                                                * fp32, bf16 (stream16_shares) */
    double att_rate[ATT_SHAPES][2];  /* 1 / seconds of the attention op forward, backward (attention_times) */
    double flash_rate[ATT_SHAPES][2]; /* the same without kept probabilities */
    double att16_rate;               /* 1 / seconds of its bf16 forward + backward at the small shape */
    double others;                   /* share of the machine's core time other processes took while
                                      * measure_compute ran (load_begin/load_end; -1: unknown) */
} Rates;

/* The machine's CPU time in seconds, all cores (/proc/stat's busy jiffies:
 * user, nice, system, irq, softirq, steal), -1 where unknown. */
static double machine_busy_s(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7]);
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (n != 8 || hz <= 0) return -1;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
}

/* This process's CPU time in seconds (its threads' included). */
static double own_busy_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

/* Collective, around a measurement: load_begin notes the machine's and
 * this process's CPU time and the clock; load_end gives, on every rank, the
 * share of all cores' time in between that went to processes other than
 * the job's ranks (their CPU time summed over `ranks`, those on this
 * machine), -1 where /proc/stat is not there. */
typedef struct Load { double machine, own, wall; } Load;
#define CALIBRATE_BUSY 0.10 /* a share of other processes above which the fragment says the machine was busy */
static Load load_begin(void) { return (Load){machine_busy_s(), own_busy_s(), now()}; }
static double load_end(Load b, MPI_Comm ranks)
{
    double own = own_busy_s() - b.own;
    MPI_Allreduce(MPI_IN_PLACE, &own, 1, MPI_DOUBLE, MPI_SUM, ranks);
    double machine = machine_busy_s(), wall = now() - b.wall;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (machine < 0 || b.machine < 0 || wall <= 0 || cores <= 0) return -1;
    double share = (machine - b.machine - own) / (wall * (double)cores);
    return share < 0 ? 0 : share > 1 ? 1 : share;
}

/* GEMM classes by their smallest dimension: 64, 256, 1024, 2048 (cost.h). */
static const int gemm_dims[4][3] = {{64, 1024, 1024}, {256, 1024, 1024}, {1024, 1024, 1024}, {2048, 2048, 2048}};

/* Through a started runtime (--device): bytes per second of each class's
 * ops over n elements (rows of 256, or of 4096 logits), as kernel_pass
 * charges them, best of 5 waited-for passes after one: the add, layer norm
 * forward and backward, GELU forward and backward, the cross-entropy's
 * forward and backward, AdamW (kernel_floats); and, in *scores_rate, FLOP/s of the scores
 * GEMM of one head (T x T by head_dim 64, T = 256) through the matmul op. */
static void op_rates(struct prt *rt, int64_t n, double *rates, double *scores_rate)
{
    const int64_t C = 256, V = 4096, F = PRT_F32, W = PRT_F32 | PRT_ARG_WRITE;
    void *x = cal_tensor(rt, n, F, 0.5f, -0.5f), *y = cal_tensor(rt, n, F, 0.25f, 0.0f);
    void *z = cal_tensor(rt, n, F, 0.0f, 0.01f), *m = cal_tensor(rt, n, F, 0.0f, 0.0f);
    void *v = cal_tensor(rt, n, F, 0.0f, 0.0f), *g = cal_tensor(rt, C, F, 1.0f, 0.0f);
    void *bias = cal_tensor(rt, C, F, 0.0f, 0.0f), *dg = cal_tensor(rt, C, F, 0.0f, 0.0f);
    void *db = cal_tensor(rt, C, F, 0.0f, 0.0f), *stats = cal_tensor(rt, 2 * (n / C) + 2, F, 1.0f, 0.0f);
    void *loss = cal_tensor(rt, 1, F, 0.0f, 0.0f), *targets = cal_tensor(rt, n / V, PRT_I32, 0.0f, 4000.0f);
    char *st = stats;
    for (int k = 0; k < K_COUNT; k++) {
        rates[k] = 0;
        for (int rep = -1; rep < 5; rep++) {
            cal_sync(rt);
            double t0 = now();
            switch (k) {
            case K_ADD: prt_add_fwd(rt, z, x, y, n, PRT_ARG_DTYPES(F, F, F)); break;
            case K_NORM:
                prt_layernorm_fwd(rt, z, st, st + n / C * sizeof(float), x, g, bias, n / C, C, 1e-5,
                                  PRT_ARG_DTYPES(F, F, F, F, F, F));
                prt_layernorm_bwd(rt, y, dg, db, z, x, g, st, st + n / C * sizeof(float), n / C, C,
                                  PRT_ARG_DTYPES(W, F, F, F, F, F, F, F));
                break;
            case K_GELU:
                prt_gelu_fwd(rt, z, x, n, PRT_ARG_DTYPES(F, F));
                prt_gelu_bwd(rt, y, x, z, n, PRT_ARG_DTYPES(W, F, F));
                break;
            case K_SOFTMAX:
                prt_xent_fwd(rt, loss, st, x, targets, n / V, V, 0, -1, PRT_ARG_DTYPES(F, F, F, PRT_I32));
                prt_xent_bwd(rt, z, x, st, targets, n / V, V, 0, 1.0 / (double)(n / V),
                             PRT_ARG_DTYPES(W, F, F, PRT_I32));
                break;
            default:
                prt_adamw(rt, x, NULL, y, m, v, n, 1, 1e-3, 0.9, 0.95, 1e-8, 0.0, PRT_ARG_DTYPES(F, F, F, F, F));
            }
            cal_sync(rt);
            double t = now() - t0, bytes = kernel_floats[k] * (double)n * sizeof(float);
            if (rep >= 0 && bytes / t > rates[k]) rates[k] = bytes / t;
        }
    }
    const int64_t T = 256, HD = 64;
    void *q = cal_tensor(rt, T * HD, F, 0.0f, 0.1f), *kt = cal_tensor(rt, HD * T, F, 0.0f, 0.1f);
    void *sc = cal_tensor(rt, T * T, F, 0.0f, 0.0f);
    *scores_rate = 0;
    for (int rep = -1; rep < 3; rep++) {
        int64_t calls = 0;
        cal_sync(rt);
        double t0 = now(), t;
        do {
            for (int c = 0; c < 64; c++, calls++) prt_matmul_fwd(rt, sc, q, kt, T, HD, T, PRT_ARG_DTYPES(F, F, F));
            cal_sync(rt);
        } while ((t = now() - t0) < 0.2);
        double rate = 2.0 * T * T * HD * (double)calls / t;
        if (rep >= 0 && rate > *scores_rate) *scores_rate = rate;
    }
    void *all[] = {x, y, z, m, v, g, bias, dg, db, stats, loss, targets, q, kt, sc};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) cal_free(rt, all[k]);
}

/* rt NULL: the CPU measurements (OpenBLAS and the CPU kernels called
 * directly where no op stands between, as before any runtime); else every
 * figure through the started runtime's ops (--device). */
static void measure_compute(struct prt *rt, Rates *r)
{
    /* each class as the runtime's linear op (forward and backward) at rows
     * x out x in = gemm_dims, operands from beyond the L2 (calibrate_linear.c) */
    for (int c = 0; c < 4; c++) {
        r->gemm[c] = linear_rate(rt, gemm_dims[c][0], gemm_dims[c][2], gemm_dims[c][1], 0);
        r->gemm16[c] = linear_rate(rt, gemm_dims[c][0], gemm_dims[c][2], gemm_dims[c][1], 1);
    }
    /* the tiny class also as small plans meet it, every dimension small
     * (per-call overhead counts there): the class runs at the two shapes'
     * harmonic mean, the rate of equal FLOPs spent in each */
    r->gemm[0] = 2.0 / (1.0 / r->gemm[0] + 1.0 / linear_rate(rt, 64, 256, 64, 0));
    r->gemm16[0] = 2.0 / (1.0 / r->gemm16[0] + 1.0 / linear_rate(rt, 64, 256, 64, 1));
    if (rt) {
        op_rates(rt, (int64_t)(rt->backend->host_memory ? 4 : 64) << 20, r->kernel, &r->attn);
        r->triad = r->kernel[K_ADD];
    } else {
        r->attn = gemm_rate(256, 256, 64); /* scores of one head: T x T by head_dim */
        r->triad = triad_rate((size_t)8 << 20);
        kernel_rates((size_t)4 << 20, r->kernel);
    }
    double share[STREAM16_CLASSES], t32[STREAM16_CLASSES], t16[STREAM16_CLASSES];
    stream16_shares(rt, (int64_t)(rt && !rt->backend->host_memory ? 64 : 4) << 20, share, t32, t16);
    for (int k = 0; k < STREAM16_CLASSES; k++) r->rate32[k] = 1.0 / t32[k], r->rate16[k] = 1.0 / t16[k];
    for (int k = 0; k < ATT_SHAPES; k++) {
        double fwd, bwd;
        attention_times(rt, k, PRT_F32, 1, &fwd, &bwd);
        r->att_rate[k][0] = 1.0 / fwd, r->att_rate[k][1] = 1.0 / bwd;
        attention_times(rt, k, PRT_F32, 0, &fwd, &bwd);
        r->flash_rate[k][0] = 1.0 / fwd, r->flash_rate[k][1] = 1.0 / bwd;
        if (k == ATT_SHAPES - 1) attention_times(rt, k, PRT_BF16, 1, &fwd, &bwd), r->att16_rate = 1.0 / (fwd + bwd);
    }
}

/* What the cost model (compiler/analyze/cost.c, OP_ATTENTION) charges the attention
 * op at each shape of attention_times: its matmul FLOPs (4 B NH T T HD
 * forward, 8 backward with the probabilities kept, 12 without:
 * compiler/lower/ops.c) at the attention efficiency, and its score matrix
 * B NH T T, 4 bytes an element: kept, 3 passes forward and 4 backward
 * through memory at the streaming bandwidth x `scores`; not kept, 3 and 7
 * over tiles on chip at the streaming bandwidth x `tiles`.  The fit: the one
 * score rate x (seconds a byte) for which the model's forward + backward
 * time, matmul_s + bytes x, is nearest the measured one at both shapes by
 * least squares of the relative error: with a = matmul_s / measured - 1 and
 * c = bytes / measured at each, x = -sum(a c) / sum(c c); the share is
 * 1 / (x hbm), at most 1 (none left for the scores when the matmuls as
 * modelled already take the measured time). */
typedef struct AttentionFit {
    double measured_s[ATT_SHAPES], matmul_s[ATT_SHAPES], bytes[ATT_SHAPES];
    double scores, model_over_measured[ATT_SHAPES];
} AttentionFit;

static AttentionFit attention_fit(const Rates *r, int kept, double attn_eff, double peak, double hbm)
{
    AttentionFit a;
    double ac = 0, cc = 0;
    const double (*rate)[2] = kept ? r->att_rate : r->flash_rate;
    for (int k = 0; k < ATT_SHAPES; k++) {
        double f = (double)att_shapes[k][0] * att_shapes[k][2] * att_shapes[k][1] * att_shapes[k][1];
        a.bytes[k] = (3.0 + (kept ? 4.0 : 7.0)) * f * sizeof(float);
        a.measured_s[k] = 1.0 / rate[k][0] + 1.0 / rate[k][1];
        a.matmul_s[k] = (4.0 + (kept ? 8.0 : 12.0)) * f * att_shapes[k][3] / (peak * attn_eff);
        double rel = a.matmul_s[k] / a.measured_s[k] - 1.0, c = a.bytes[k] / a.measured_s[k];
        ac += rel * c, cc += c * c;
    }
    double x = -ac / cc;
    a.scores = x > 0 ? clamp01(1.0 / (x * hbm)) : 1.0;
    for (int k = 0; k < ATT_SHAPES; k++)
        a.model_over_measured[k] = (a.matmul_s[k] + a.bytes[k] / (a.scores * hbm)) / a.measured_s[k];
    return a;
}

/* A link measured by another launch of this program (`--link FILE`,
 * `--link-inter FILE`), as write_link wrote it: one number per field of
 * link_field_at, in order; the count of rates that follow (the launch
 * between hosts: every double of its Rates, the compute it measured with
 * every host's ranks; 0 otherwise) and them; the hosts. */
enum { MAX_LAUNCHES = 8 };
static const size_t link_field_at[] = {
    offsetof(Link, latency), offsetof(Link, bandwidth), offsetof(Link, busbw),
    offsetof(Link, sync),    offsetof(Link, mid_s[0]),  offsetof(Link, mid_s[1]),
    offsetof(Link, overlap), offsetof(Link, overlap_share[0]), offsetof(Link, overlap_share[1]),
    offsetof(Link, bytes),   offsetof(Link, alone),     offsetof(Link, pairs), offsetof(Link, ranks),
};
enum { LINK_FIELDS = sizeof link_field_at / sizeof link_field_at[0] };

static double *link_field(Link *l, int k) { return (double *)((char *)l + link_field_at[k]); }

static int write_link(const char *path, Link *l, const Rates *r)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int k = 0; k < LINK_FIELDS; k++) fprintf(f, "%.17g\n", *link_field(l, k));
    size_t n = r ? sizeof *r / sizeof(double) : 0;
    fprintf(f, "%zu\n", n);
    for (size_t k = 0; k < n; k++) fprintf(f, "%.17g\n", ((const double *)(const void *)r)[k]);
    fprintf(f, "%s\n", l->hosts);
    return fclose(f) == 0 ? 0 : -1;
}

/* r: NULL, or where the rates the file must carry go. */
static int read_link(const char *path, Link *l, Rates *r)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int k = 0;
    while (k < LINK_FIELDS && fscanf(f, "%lg", link_field(l, k)) == 1) k++;
    size_t n = 0;
    int ok = k == LINK_FIELDS && fscanf(f, "%zu", &n) == 1 && (!r || n == sizeof *r / sizeof(double));
    for (size_t i = 0; ok && i < n; i++) {
        double x;
        ok = fscanf(f, "%lg", &x) == 1;
        if (ok && r) ((double *)(void *)r)[i] = x;
    }
    l->hosts[0] = 0;
    if (ok && fscanf(f, " %[^\n]", l->hosts) != 1) l->hosts[0] = 0;
    fclose(f);
    return ok ? 0 : -1;
}

/* Each launch of a pair of ranks sets up its shared-memory transport anew,
 * and on some machines a launch's transport is several times slower than
 * another's at mid sizes.  Seen on a 2-core VM with Open MPI 4.1.4: the 256
 * KiB all-reduce after compute took about 60 us in most launches and 200 in
 * some (the single-copy path: with btl_vader_single_copy_mechanism
 * emulated no launch was slow), and a slow launch's started collectives hid
 * almost nothing (overlap 0-0.13 against 0.25-0.70), while the training
 * programs' all-reduces ran at the fast launches' figures in every run
 * (tiny_tp's 16 KiB ones, about 16 us each).  So the fragment's link is
 * that of the fast launches, those whose 256 KiB all-reduce took at most
 * FAST_WITHIN times the fastest one's: each figure's median over them
 * (within the fast transport the overlap still varies from launch to
 * launch).  The comment line lists every launch's. */
#define FAST_WITHIN 2.0

/* Marks the fast launches in fast[]; returns how many there are. */
static int fast_launches(const Link *all, int n, int fast[MAX_LAUNCHES])
{
    double best = all[0].mid_s[MID_SIZES - 1];
    for (int i = 1; i < n; i++)
        if (all[i].mid_s[MID_SIZES - 1] < best) best = all[i].mid_s[MID_SIZES - 1];
    int nf = 0;
    for (int i = 0; i < n; i++) nf += fast[i] = all[i].mid_s[MID_SIZES - 1] <= FAST_WITHIN * best;
    return nf;
}

static Link link_of_fast(Link *all, int n)
{
    int fast[MAX_LAUNCHES];
    fast_launches(all, n, fast);
    Link m = all[0];
    for (int k = 0; k < LINK_FIELDS; k++) {
        double x[MAX_LAUNCHES];
        int nf = 0;
        for (int i = 0; i < n; i++)
            if (fast[i]) x[nf++] = *link_field(&all[i], k);
        qsort(x, (size_t)nf, sizeof x[0], cmp_double);
        *link_field(&m, k) = nf % 2 ? x[nf / 2] : 0.5 * (x[nf / 2 - 1] + x[nf / 2]);
    }
    m.overlap = 0.5 * (m.overlap_share[0] + m.overlap_share[1]);
    return m;
}

/* The cluster fragment: the best fp32 GEMM rate is the fp32 peak and the
 * best 16-bit one (operands widened) the bf16 peak, each class against its
 * own precision's peak (gemm, gemm16); the streaming
 * bandwidth is the best of the triad and the runtime's add, and each class
 * of memory-bound op runs at its kernel's share of it. */
/* The link latency the cost model's all-reduce of `size` ranks takes each
 * of its 2(size-1) steps to cost: the 8-byte all-reduce after compute over
 * them, at least the ping-pong's.  Then the half-bandwidth size (Hockney's
 * n 1/2) that puts the model's all-reduce, 2(n-1) latency + (B + half)
 * 2(n-1)/n / busbw, on each measured mid-size all-reduce, in halves[]; their
 * mean, none below 0, in *half. */
static double link_fit(const Link *link, int size, double halves[MID_SIZES], double *half)
{
    double step_latency = link->sync / (2.0 * (size - 1));
    if (step_latency < link->latency) step_latency = link->latency;
    *half = 0;
    for (int k = 0; k < MID_SIZES; k++) {
        double bytes = (double)mid_floats[k] * sizeof(float), bus = 2.0 * (size - 1) / size;
        halves[k] = (link->mid_s[k] - 2.0 * (size - 1) * step_latency) * link->busbw / bus - bytes;
        *half += (halves[k] > 0 ? halves[k] : 0) / MID_SIZES;
    }
    return step_latency;
}

/* The comment lines of the link between hosts and the `link inter` line. */
static void write_inter(FILE *f, const Link *inter, const char *hosts)
{
    double halves[MID_SIZES], half;
    double latency = link_fit(inter, 2, halves, &half);
    int pairs = inter->pairs >= 1 ? (int)inter->pairs : 1;
    fprintf(f, "# between hosts (%s, %d rank%s each, sending at once): latency %.3g us (ping-pong of one idle pair), "
               "%.3g us an 8-byte all-reduce after compute, bandwidth %.4g MB/s a rank (ping-pongs of %.0f KiB; one "
               "pair alone %.4g MB/s), all-reduce bus bandwidth %.4g MB/s a rank\n",
            hosts, pairs, pairs == 1 ? "" : "s", inter->latency * 1e6, inter->sync * 1e6, inter->bandwidth / 1e6,
            inter->bytes / 1024, inter->alone / 1e6, inter->busbw / 1e6);
    fprintf(f, "# between hosts, all-reduces after compute: 16 KiB %.6g us, 256 KiB %.6g us; the half-bandwidth size "
               "that puts the model on each %.4g and %.4g KiB, their mean %.4g KiB\n",
            inter->mid_s[0] * 1e6, inter->mid_s[1] * 1e6, halves[0] / 1024, halves[1] / 1024, half / 1024);
    fprintf(f, "link inter %.6g B/s %.6g s;\n", inter->bandwidth, latency);
}

static void write_fragment(FILE *f, const Rates *r, const Link *link, const Link *launch, int launches, int size,
                           const struct prt *rt, const Link *inter, const char *inter_hosts)
{
    double peak = 0, peak16 = 0;
    for (int c = 0; c < 4; c++) peak = r->gemm[c] > peak ? r->gemm[c] : peak;
    for (int c = 0; c < 4; c++) peak16 = r->gemm16[c] > peak16 ? r->gemm16[c] : peak16;
    int widened = !rt || rt->backend == &prt_backend_cpu; /* the CPU backend widens 16-bit operands to fp32 */
    if (widened && peak16 > peak) peak16 = peak; /* widening cannot make a GEMM faster: a measured excess is noise */
    double hbm = r->triad > r->kernel[K_ADD] ? r->triad : r->kernel[K_ADD];
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE), cores = sysconf(_SC_NPROCESSORS_ONLN);
    double memory = (double)pages * (double)page / (double)(cores > 0 ? cores : 1);
    if (rt && rt->backend->memory_bytes) memory = (double)rt->backend->memory_bytes((struct prt *)rt);
    char host[256] = "this machine";
    gethostname(host, sizeof host - 1);
    char every[96] = "";
    if (inter) snprintf(every, sizeof every, " (the link inside a host; the compute: the %.0f ranks of the hosts)",
                        inter->ranks);
    if (!rt)
        fprintf(f, "# Fragment (not a plan), written by `parc calibrate%s` on %s: include it INSIDE\n"
                   "# `cluster { nodes %s; gpus_per_node N; ... }`.  One rank per core, fp32 OpenBLAS (%s kernels) "
                   "with one thread, %d MPI ranks measuring at once%s, the slowest rank's rates.\n",
                inter ? " --hosts" : "", host, inter ? "M" : "1", openblas_get_corename(), size, every);
    else
        fprintf(f, "# Fragment (not a plan), written by `parc calibrate --device %s` on %s: include it INSIDE\n"
                   "# `cluster { nodes 1; gpus_per_node N; ... }`.  Every figure through the runtime's %s backend "
                   "(%s), %d rank%s measuring at once, the slowest rank's rates.\n",
                rt->backend->name, host, rt->backend->name, rt->backend->description, size, size > 1 ? "s" : "");
    if (r->others >= 0) {
        double avg[3] = {-1, -1, -1};
        FILE *la = fopen("/proc/loadavg", "r");
        if (la) {
            if (fscanf(la, "%lf %lf %lf", &avg[0], &avg[1], &avg[2]) != 3) avg[0] = -1;
            fclose(la);
        }
        fprintf(f, "# load: other processes took %.1f%% of the %ld cores' time while the compute was measured",
                100 * r->others, cores);
        if (avg[0] >= 0) fprintf(f, " (load average %.2f %.2f %.2f at the end)", avg[0], avg[1], avg[2]);
        if (cal_measured > 0)
            fprintf(f, "; %d of its %d GEMM rates repeated past 3 runs of 0.2 s until a second run came within %.0f%% "
                       "of the best", cal_repeated, cal_measured, 100 * CAL_AGREE);
        if (r->others > CALIBRATE_BUSY)
            fprintf(f, "; the machine was busy: the rates are what was left to the ranks, calibrate again on a quiet "
                       "machine");
        fprintf(f, "\n");
    }
    fprintf(f, "# GEMM GFLOP/s (the linear op forward + backward, rows x out x in, operands beyond the L2): "
               "64x1024x1024 with 64x64x256 (harmonic mean) %.2f, 256x1024x1024 %.2f, 1024^3 %.2f, 2048^3 %.2f; "
               "sgemm 256x256x64 %.2f\n",
            r->gemm[0] / 1e9, r->gemm[1] / 1e9, r->gemm[2] / 1e9, r->gemm[3] / 1e9, r->attn / 1e9);
    fprintf(f, "# bf16 GEMM GFLOP/s (the linear op over bf16 tensors%s), the same shapes: %.2f, %.2f, %.2f, %.2f\n",
            widened ? ": widened to fp32, rounded back" : "", r->gemm16[0] / 1e9, r->gemm16[1] / 1e9, r->gemm16[2] / 1e9, r->gemm16[3] / 1e9);
    fprintf(f, "# memory GB/s: triad %.2f", r->triad / 1e9);
    for (int k = 0; k < K_COUNT; k++) fprintf(f, ", %s %.2f", kernel_names[k], r->kernel[k] / 1e9);
    fprintf(f, " (the runtime's kernels, the bytes the cost model charges them)\n");
    fprintf(f, "# 16-bit ops, fp32 / bf16 ms (the runtime's ops over 4 Mi elements):");
    static const char *const names16[STREAM16_CLASSES] = {"add", "layer norm", "GELU", "cross-entropy backward"};
    for (int k = 0; k < STREAM16_CLASSES; k++)
        fprintf(f, "%s %s %.4f / %.4f", k ? "," : "", names16[k], 1e3 / r->rate32[k], 1e3 / r->rate16[k]);
    AttentionFit att = attention_fit(r, 1, clamp01(r->attn / peak), peak, hbm);
    AttentionFit tiles = attention_fit(r, 0, clamp01(r->attn / peak), peak, hbm);
    /* attention's scores over bf16 at the small shape: the share of the fp32
     * scores rate at which the model (its matmuls at the bf16 peak, half the
     * score bytes) takes the measured bf16 forward + backward */
    const int sm = ATT_SHAPES - 1;
    double share16[STREAM16_CLASSES]; /* from the slowest rank's times, as printed: fp32 / (2 x bf16) */
    for (int k = 0; k < STREAM16_CLASSES; k++) share16[k] = r->rate16[k] / (2.0 * r->rate32[k]);
    double m16 = att.matmul_s[sm] * peak / peak16, rest16 = 1.0 / r->att16_rate - m16;
    double scores16 = rest16 > 0 ? clamp01(att.bytes[sm] / 2 / (att.scores * hbm * rest16)) : 1.0;
    fprintf(f, "; attention %dx%d tokens bf16 forward + backward %.4f, its matmuls as modelled %.4f\n",
            att_shapes[sm][0], att_shapes[sm][1], 1e3 / r->att16_rate, 1e3 * m16);
    fprintf(f, "# attention (the runtime's op, causal, probabilities kept) ms:");
    for (int k = 0; k < ATT_SHAPES; k++)
        fprintf(f, "%s %dx%d tokens, %d heads of %d: forward %.4f, backward %.4f, its matmuls as modelled %.4f, "
                   "%.4g MB of scores",
                k ? ";" : "", att_shapes[k][0], att_shapes[k][1], att_shapes[k][2], att_shapes[k][3],
                1e3 / r->att_rate[k][0], 1e3 / r->att_rate[k][1], 1e3 * att.matmul_s[k], att.bytes[k] / 1e6);
    fprintf(f, "; the scores rate that fits both best: %.3f GB/s, the model at", att.scores * hbm / 1e9);
    for (int k = 0; k < ATT_SHAPES; k++) fprintf(f, "%s %.3f", k ? " and" : "", att.model_over_measured[k]);
    fprintf(f, " of them\n");
    fprintf(f, "# flash attention (the runtime's op, causal, probabilities not kept: score tiles on chip) ms:");
    for (int k = 0; k < ATT_SHAPES; k++)
        fprintf(f, "%s %dx%d tokens: forward %.4f, backward %.4f, its matmuls as modelled %.4f, %.4g MB of tiles",
                k ? ";" : "", att_shapes[k][0], att_shapes[k][1], 1e3 / r->flash_rate[k][0],
                1e3 / r->flash_rate[k][1], 1e3 * tiles.matmul_s[k], tiles.bytes[k] / 1e6);
    fprintf(f, "; the tiles rate that fits both best: %.3f GB/s, the model at", tiles.scores * hbm / 1e9);
    for (int k = 0; k < ATT_SHAPES; k++) fprintf(f, "%s %.3f", k ? " and" : "", tiles.model_over_measured[k]);
    fprintf(f, " of them\n");
    if (size > 1 && rt)
        fprintf(f, "# collectives (the runtime's, waited for): %.3g us an 8-byte all-reduce (its mean over the "
                   "all-reduce's %d steps is the link latency), all-reduce bus bandwidth %.3g GB/s of %.0f MiB (the "
                   "link's bandwidth)\n",
                link->sync * 1e6, 2 * (size - 1), link->busbw / 1e9, rt->backend->host_memory ? 16.0 : 256.0);
    else if (size > 1)
        fprintf(f, "# MPI: latency %.3g us (ping-pong of idle ranks), %.3g us an 8-byte all-reduce after "
                   "compute (its mean over the all-reduce's %d steps is the link latency), bandwidth %.3g "
                   "GB/s, all-reduce bus bandwidth %.3g GB/s\n",
                link->latency * 1e6, link->sync * 1e6, 2 * (size - 1), link->bandwidth / 1e9, link->busbw / 1e9);
    if (size > 1 && launches > 1) {
        int fast[MAX_LAUNCHES], nf = fast_launches(launch, launches, fast);
        fprintf(f, "# the link's figures: each one's median over the %d fast launches of %d (a launch's "
                   "shared-memory transport is its own; fast: its 256 KiB all-reduce within %.2gx of the "
                   "fastest launch's); each launch's 256 KiB all-reduce after compute",
                nf, launches, FAST_WITHIN);
        for (int i = 0; i < launches; i++) fprintf(f, "%s %.6g", i ? "," : "", launch[i].mid_s[1] * 1e6);
        fprintf(f, " us, overlap");
        for (int i = 0; i < launches; i++) fprintf(f, "%s %.4f", i ? "," : "", launch[i].overlap);
        fprintf(f, "\n");
    }
    double half = 0, halves[MID_SIZES] = {0};
    double step_latency = size > 1 ? link_fit(link, size, halves, &half) : 0;
    if (size > 1)
        fprintf(f, "# all-reduces after compute: 16 KiB %.6g us, 256 KiB %.6g us; the half-bandwidth size that puts "
                   "the model on each %.4g and %.4g KiB, their mean %.4g KiB\n",
                link->mid_s[0] * 1e6, link->mid_s[1] * 1e6, halves[0] / 1024, halves[1] / 1024, half / 1024);
    if (size > 1)
        fprintf(f, "# overlap (a started collective under GEMMs%s, as the runtime runs one): "
                   "%.3f of a 4 MiB all-reduce's time hidden, %.3f of 16 all-gathers of 64 KiB; their mean %.3f\n",
                rt ? " of 1024^3, the runtime's allreduce_start and allgather_start" : ", MPI_Test between them",
                link->overlap_share[0], link->overlap_share[1], link->overlap);
    char machine[320];
    prt_machine_name(rt ? rt->backend->name : "cpu", rt ? rt->backend->description : NULL, machine, sizeof machine);
    for (char *q = machine; *q; q++)
        if (*q == '"' || *q == '\\' || *q == '\n') *q = '\'';  /* a plan string holds neither */
    fprintf(f, "calibrated \"%s\";\n", machine);
    fprintf(f, "gpu { memory %.0f B; bf16 %.6g FLOP/s; fp32 %.6g FLOP/s; hbm %.6g B/s; }\n", memory, peak16, peak,
            hbm);
    if (size > 1) fprintf(f, "link intra %.6g B/s %.6g s;\n", link->bandwidth, step_latency);
    char inter_eff[96] = "inter 1;";
    if (inter) {
        double inter_halves[MID_SIZES], inter_half;
        link_fit(inter, 2, inter_halves, &inter_half);
        write_inter(f, inter, inter_hosts);
        snprintf(inter_eff, sizeof inter_eff, "inter %.4g; half_inter %.6g B;", clamp01(inter->busbw / inter->bandwidth),
                 inter_half);
    }
    fprintf(f, "efficiency { gemm %.4g %.4g %.4g %.4g; attention %.4g; hbm %.4g; norm %.4g; activation %.4g; "
               "softmax %.4g; scores %.4g; tiles %.4g; optimizer %.4g; stream16 %.4g %.4g %.4g %.4g %.4g; gemm16 %.4g %.4g %.4g %.4g; "
               "intra %.4g; %s half_intra %.6g B; overlap %.4g; }\n",
            clamp01(r->gemm[0] / peak), clamp01(r->gemm[1] / peak), clamp01(r->gemm[2] / peak),
            clamp01(r->gemm[3] / peak), clamp01(r->attn / peak), clamp01(r->kernel[K_ADD] / hbm),
            clamp01(r->kernel[K_NORM] / hbm), clamp01(r->kernel[K_GELU] / hbm), clamp01(r->kernel[K_SOFTMAX] / hbm),
            att.scores, tiles.scores,
            clamp01(r->kernel[K_ADAMW] / hbm), clamp01(share16[0]), clamp01(share16[1]), clamp01(share16[2]),
            clamp01(share16[3]), scores16, clamp01(r->gemm16[0] / peak16),
            clamp01(r->gemm16[1] / peak16), clamp01(r->gemm16[2] / peak16), clamp01(r->gemm16[3] / peak16),
            size > 1 ? clamp01(link->busbw / link->bandwidth) : 1.0, inter_eff, half, size > 1 ? link->overlap : 1.0);
}

/* ---------------------------------------------------------------- --device */

/* The mean seconds of an all-reduce of n floats over the ranks through the
 * runtime (its backend's collectives: NCCL or MPI on a GPU), `calls` of
 * them after 3 uncounted ones, each waited for, the slowest rank's. */
static double op_allreduce_s(struct prt *rt, void *buf, int64_t n, int calls)
{
    double t = 0;
    for (int i = -3; i < calls; i++) {
        cal_sync(rt);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        prt_allreduce(rt, 0, buf, n, PRT_ARG_DTYPES(PRT_F32));
        cal_sync(rt);
        if (i >= 0) t += now() - t0;
    }
    t /= calls;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t;
}

/* The link between the ranks as the runtime's collectives meet it: an
 * 8-byte all-reduce (its mean over the all-reduce's 2(n-1) steps is the
 * latency), the mid sizes, the bus bandwidth of 256 MiB (16 MiB on host
 * memory), which is also the link's bandwidth; and the two overlap patterns
 * of measure_overlap through allreduce_start and allgather_start under
 * matmul ops of 1024^3. */
static Link device_link(struct prt *rt, int size)
{
    Link l = {0};
    int64_t nbig = (int64_t)(rt->backend->host_memory ? 4 : 64) << 20;
    void *buf = cal_tensor(rt, nbig, PRT_F32, 0.0f, 0.0f); /* zeros: summed again and again, they stay finite */
    l.sync = op_allreduce_s(rt, buf, 2, 200);
    l.latency = l.sync / (2.0 * (size - 1));
    for (int k = 0; k < MID_SIZES; k++) l.mid_s[k] = op_allreduce_s(rt, buf, (int64_t)mid_floats[k], 50);
    l.busbw = 2.0 * (size - 1) / size * (double)nbig * sizeof(float) / op_allreduce_s(rt, buf, nbig, 10);
    l.bandwidth = l.busbw;
    const int64_t dim = 1024, each = 16384; /* floats: 64 KiB a rank each gather */
    void *a = cal_tensor(rt, dim * dim, PRT_F32, 0.0f, 1e-3f), *c = cal_tensor(rt, dim * dim, PRT_F32, 0.0f, 0.0f);
    void *out = cal_tensor(rt, (int64_t)OV_GATHERS * each * size, PRT_F32, 0.0f, 0.0f);
    for (int pattern = 0; pattern < 2; pattern++) {
        double share[OV_ROUNDS];
        for (int round = -1; round < OV_ROUNDS; round++) {
            double t[3];
            for (int k = 0; k < 3; k++) { /* the GEMMs alone, the collectives alone, both */
                cal_sync(rt);
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = now();
                if (k > 0 && pattern == 0) prt_allreduce_start(rt, 0, buf, (int64_t)1 << 20, PRT_ARG_DTYPES(PRT_F32));
                for (int g = 0; k > 0 && pattern == 1 && g < OV_GATHERS; g++)
                    prt_allgather_start(rt, 0, (float *)out + (size_t)g * each * size, (float *)buf + (size_t)g * each,
                                        1, each, PRT_ARG_DTYPES(PRT_F32, PRT_F32));
                for (int g = 0; k != 1 && g < (pattern == 0 ? 24 : 6); g++)
                    prt_matmul_fwd(rt, c, a, a, dim, dim, dim, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32));
                if (k > 0 && pattern == 0) prt_comm_wait(rt, buf);
                for (int g = 0; k > 0 && pattern == 1 && g < OV_GATHERS; g++)
                    prt_comm_wait(rt, (float *)out + (size_t)g * each * size);
                cal_sync(rt);
                t[k] = now() - t0;
            }
            double v = hidden_share(t); /* every rank, the warm round too: it all-reduces */
            if (round >= 0) share[round] = v;
        }
        l.overlap_share[pattern] = median_share(share);
    }
    l.overlap = 0.5 * (l.overlap_share[0] + l.overlap_share[1]);
    cal_free(rt, buf), cal_free(rt, a), cal_free(rt, c), cal_free(rt, out);
    return l;
}

/* The device by name, before any runtime or MPI starts (`parc calibrate`
 * asks first, so that a misspelt name is one line, not one per rank): the
 * runtime's own refusal lists a training program's options, none of which
 * this tool takes. 0 when known, else 2 with the names it has. */
static int known_device(const char *dev)
{
    char names[128] = "";
    int known = !strcmp(dev, "cuda"); /* the runtime says why, when it cannot load it */
    for (int i = 0; prt_backends[i]; i++) {
        known |= !strcmp(prt_backends[i]->name, dev);
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", prt_backends[i]->name);
    }
    if (known) return 0;
    fprintf(stderr, "parc calibrate: no device `%s`; this runtime has: %s%s\n", dev, names,
            strstr(names, "cuda") ? "" : " (and cuda, when built with the CUDA backend)");
    return 2;
}

/* Collective: the compute's rates, every rank measuring at once, the
 * slowest rank's (a step goes at its pace), with the load other processes
 * put on the machine meanwhile (load_end over `machine`, the ranks on it). */
static Rates rates_at_once(struct prt *rt, MPI_Comm machine)
{
    Rates r;
    memset(&r, 0, sizeof r);
    MPI_Barrier(MPI_COMM_WORLD);
    Load load = load_begin();
    measure_compute(rt, &r);
    double others = load_end(load, machine);
    MPI_Allreduce(MPI_IN_PLACE, &r, (int)(sizeof r / sizeof(double)), MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    r.others = others;
    return r;
}

/* `parc_calibrate --device DEV OUT.par`, one rank per device (mpirun -np G,
 * or alone): every figure through the runtime started on DEV, a mesh of
 * one axis over the ranks (their count from the launcher's environment:
 * Open MPI's, or PMI's; 1 without one). */
static int calibrate_on_device(char **argv)
{
    if (known_device(argv[2]) != 0) return 2;
    const char *world = getenv("OMPI_COMM_WORLD_SIZE");
    if (!world) world = getenv("PMI_SIZE");
    prt_plan_desc plan;
    memset(&plan, 0, sizeof plan);
    plan.plan_name = "parc_calibrate";
    plan.source_file = "parc_calibrate";
    plan.naxes = 1;
    plan.axis_names[0] = "dp";
    plan.axis_sizes[0] = world && atoll(world) > 0 ? atoll(world) : 1;
    plan.dp_axis = 0, plan.tp_axis = plan.pp_axis = -1;
    plan.steps = plan.batch = plan.micro_batch = plan.micro_batches = plan.seq = 1;
    plan.seed = 1;
    plan.vocab = 4096;
    char *av[] = {argv[0], (char *)"--device", argv[2], (char *)"--quiet", NULL};
    struct prt *rt = prt_init(4, av, &plan);
    int rank = rt->world_rank, size = rt->world_size, status = 0;
    Link link = size > 1 ? device_link(rt, size) : (Link){0};
    Rates r = rates_at_once(rt, MPI_COMM_WORLD);
    if (rank == 0) {
        FILE *f = fopen(argv[3], "w");
        if (!f || (write_fragment(f, &r, &link, &link, 1, size, rt, NULL, NULL), fclose(f) != 0)) {
            fprintf(stderr, "parc_calibrate: cannot write `%s`\n", argv[3]);
            status = 1;
        }
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int64_t fin = prt_finalize(rt);
    return status ? status : (int)fin;
}

/* The end of a link-only launch: rank 0 writes the link's figures (and r,
 * the rates, where it measured them) to path; every rank returns the same
 * status, 1 when that write failed. */
static int finish_link(int rank, const char *path, Link *link, const Rates *r)
{
    int status = 0;
    if (rank == 0 && write_link(path, link, r) != 0) {
        fprintf(stderr, "parc_calibrate: cannot write `%s`\n", path);
        status = 1;
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--known-device")) return known_device(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "--device")) {
        if (argc == 4) return calibrate_on_device(argv);
        fprintf(stderr, "usage: [mpirun -np G] parc_calibrate --device DEV OUT.par\n");
        return 2;
    }
    prt_blas_select(argc, argv); /* may restart this process with the runtime's kernel choice */
    prt_mpi_settings(); /* the started collectives the runtime runs */
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int link_only = argc == 3 && !strcmp(argv[1], "--link");
    int inter_only = argc == 3 && !strcmp(argv[1], "--link-inter");
    const char *inter_path = argc >= 4 && !strcmp(argv[2], "--inter") ? argv[3] : NULL;
    int first_link = inter_path ? 4 : 2;
    if (argc < 2 || (!link_only && !inter_only && argc - first_link >= MAX_LAUNCHES) ||
        (!link_only && !inter_only && argv[1][0] == '-') || (inter_only && size < 2)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 parc_calibrate OUT.par [--inter LINK] [LINK...]\n"
                            "       mpirun -np 2 parc_calibrate --link LINK\n"
                            "       mpirun -np HxS --map-by ppr:S:node parc_calibrate --link-inter LINK\n"
                            "       [mpirun -np G] parc_calibrate --device DEV OUT.par\n");
        MPI_Finalize();
        return 2;
    }
    int status = 0;
    if (inter_only) { /* S ranks on each of H >= 2 hosts, in host order */
        char mine[MPI_MAX_PROCESSOR_NAME] = {0}, (*names)[MPI_MAX_PROCESSOR_NAME] = malloc((size_t)size * sizeof *names);
        int len = 0;
        if (!names) MPI_Abort(MPI_COMM_WORLD, 1);
        MPI_Get_processor_name(mine, &len);
        MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
        int per = 1; /* the first host's ranks; the second host's are the next as many */
        while (per < size && !strcmp(names[per], names[0])) per++;
        int ok = 2 * per <= size;
        for (int r = per; r < 2 * per && ok; r++) ok = !strcmp(names[r], names[per]);
        if (!ok) {
            if (rank == 0)
                fprintf(stderr, "parc_calibrate: --link-inter: the ranks are not S on %s and S on another host: "
                                "start them host by host (mpirun --map-by ppr:S:node with a hostfile of two hosts "
                                "or more)\n", names[0]);
            free(names);
            MPI_Finalize();
            return 1;
        }
        /* pair p: rank p on the first host and rank per + p on the second */
        MPI_Comm pair;
        MPI_Comm_split(MPI_COMM_WORLD, rank < 2 * per ? rank % per : MPI_UNDEFINED, rank / per, &pair);
        Link link = measure_inter_link(pair, rank < 2 * per && rank % per == 0, per);
        snprintf(link.hosts, sizeof link.hosts, "%s and %s", names[0], names[per]);
        link.ranks = size;
        free(names);
        if (pair != MPI_COMM_NULL) MPI_Comm_free(&pair);
        /* the compute with every rank of the hosts at once, as a run's ranks
         * compute: where hosts share a machine's cores (an emulated cluster)
         * they take each other's.  The load is the first rank's machine's:
         * its CPU time less that of the ranks on it (those with its boot_id) */
        char boot[64] = "", first[64];
        FILE *b = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (b) {
            if (!fgets(boot, sizeof boot, b)) boot[0] = 0;
            fclose(b);
        }
        memcpy(first, boot, sizeof first);
        MPI_Bcast(first, sizeof first, MPI_CHAR, 0, MPI_COMM_WORLD);
        MPI_Comm machine;
        MPI_Comm_split(MPI_COMM_WORLD, strcmp(boot, first) != 0, rank, &machine);
        Rates r = rates_at_once(NULL, machine);
        MPI_Comm_free(&machine);
        return finish_link(rank, argv[2], &link, &r);
    }
    if (link_only) {
        Link link = size > 1 ? measure_link(rank, size) : (Link){0};
        if (size > 1) link.overlap = measure_overlap(size, link.overlap_share);
        return finish_link(rank, argv[2], &link, NULL);
    }
    /* the link first, as the link-only launches measure it, before the
     * compute measurements churn this process's memory (after them a launch
     * meets the slow transport more often: bench/README.md, "Calibration's
     * launch order") */
    Link links[MAX_LAUNCHES] = {{0}};
    int launches = 1;
    if (size > 1) {
        links[0] = measure_link(rank, size);
        links[0].overlap = measure_overlap(size, links[0].overlap_share);
    }
    Rates r;
    memset(&r, 0, sizeof r);
    Link inter = {0};
    if (inter_path) { /* the launch between hosts measured the compute, every host's ranks at once */
        if (read_link(inter_path, &inter, &r) != 0) {
            if (rank == 0)
                fprintf(stderr, "parc_calibrate: cannot read the link between hosts measured in `%s`\n", inter_path);
            status = 1;
        }
    } else {
        r = rates_at_once(NULL, MPI_COMM_WORLD);
    }
    if (size > 1) {
        for (int i = first_link; i < argc && status == 0; i++) {
            if (read_link(argv[i], &links[launches], NULL) != 0) {
                if (rank == 0) fprintf(stderr, "parc_calibrate: cannot read the link measured in `%s`\n", argv[i]);
                status = 1;
            }
            launches++;
        }
    }
    Link link = link_of_fast(links, launches);
    if (rank == 0 && status == 0) {
        FILE *f = fopen(argv[1], "w");
        if (!f || (write_fragment(f, &r, &link, links, launches, size, NULL, inter_path ? &inter : NULL, inter.hosts),
                   fclose(f) != 0)) {
            fprintf(stderr, "parc_calibrate: cannot write `%s`\n", argv[1]);
            status = 1;
        }
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}
