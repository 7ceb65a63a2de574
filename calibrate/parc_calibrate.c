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
 *   efficiency { ... }                 each GEMM shape class against that
 *                                      peak, attention-shaped GEMMs, the
 *                                      runtime's kinds of memory-bound loops
 *                                      against the streaming bandwidth, the
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
 * Run as `mpirun -np 2 parc_calibrate OUT.par` (`parc calibrate` does); with
 * one rank it leaves the link out.  Exit status 0, or 1 after a failed
 * measurement or write (the message names it).
 */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prt_internal.h"

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

/* Best GFLOP/s of C[m,n] = A[m,k] B[k,n] over repeats lasting at least 0.2 s. */
static double gemm_rate(int m, int n, int k)
{
    float *a = alloc_floats((size_t)m * k, 0.5f), *b = alloc_floats((size_t)k * n, 0.25f);
    float *c = alloc_floats((size_t)m * n, 0.0f);
    double best = 0, flops = 2.0 * m * n * k;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n); /* warm */
    for (int rep = 0; rep < 3; rep++) {
        int calls = 0;
        double t0 = now(), t;
        do {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
            calls++;
        } while ((t = now() - t0) < 0.2);
        if (calls * flops / t > best) best = calls * flops / t;
    }
    free(a), free(b), free(c);
    return best;
}

/* Memory-bound loops: the bytes each moves over its time, best of 5.
 * kind 0: triad (the streaming bandwidth); 1: add (a residual); 2: a row
 * norm (two reads, one write per element); 3: tanh-GELU (one read, one
 * write, a transcendental per element). */
static double stream_rate(int kind, size_t n)
{
    float *x = alloc_floats(n, 1.0f), *y = alloc_floats(n, 2.0f), *z = alloc_floats(n, 0.0f);
    double best = 0, bytes = 0;
    const size_t row = 1024;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        switch (kind) {
        case 0:
            for (size_t i = 0; i < n; i++) z[i] = x[i] + 0.5f * y[i];
            bytes = 3.0 * n * sizeof(float);
            break;
        case 1:
            for (size_t i = 0; i < n; i++) z[i] = x[i] + y[i];
            bytes = 3.0 * n * sizeof(float);
            break;
        case 2:
            for (size_t r = 0; r + row <= n; r += row) {
                float s = 0, q = 0;
                for (size_t i = 0; i < row; i++) s += x[r + i], q += x[r + i] * x[r + i];
                float mean = s / row, rstd = 1.0f / sqrtf(q / row - mean * mean + 1e-5f);
                for (size_t i = 0; i < row; i++) z[r + i] = (x[r + i] - mean) * rstd;
            }
            bytes = 2.0 * n * sizeof(float);
            break;
        default:
            for (size_t i = 0; i < n; i++) {
                float v = x[i];
                z[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
            }
            bytes = 2.0 * n * sizeof(float);
            break;
        }
        double t = now() - t0;
        if (bytes / t > best) best = bytes / t;
    }
    volatile float sink = z[n / 2];
    (void)sink;
    free(x), free(y), free(z);
    return best;
}

typedef struct Link {
    double latency, bandwidth, busbw;
    double sync; /* mean seconds of an 8-byte all-reduce after each rank's compute */
} Link;

/* Ranks 0 and 1: half the round trip of 8 bytes (latency), of 16 MiB
 * (bandwidth), and the all-reduce bus bandwidth of 16 MiB over all ranks. */
static Link measure_link(int rank, int size)
{
    Link l = {0, 0, 0, 0};
    const int small = 2000, big = 20;
    const size_t nbig = (size_t)4 << 20; /* floats: 16 MiB */
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
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)nbig, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int i = 0; i < big; i++) MPI_Allreduce(buf, out, (int)nbig, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (now() - t0) / big;
    l.busbw = 2.0 * (size - 1) / size * (double)nbig * sizeof(float) / t;
    /* A synchronisation as a training step meets one: each rank computes
     * (GEMMs of about a quarter millisecond), then all-reduces 8 bytes.  Its
     * mean time holds what a ping-pong between idle ranks does not: waiting
     * for the other rank, whose core the machine's other work may have taken
     * meanwhile.  The mean, since a run's measured phases are means. */
    const int syncs = 400, dim = 128;
    float *a = alloc_floats((size_t)dim * dim, 0.5f), *c = alloc_floats((size_t)dim * dim, 0.0f);
    double waited = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < syncs; i++) {
        for (int g = 0; g < 2; g++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim, dim, dim, 1.0f, a, dim, a, dim, 0.0f, c, dim);
        double s0 = now();
        MPI_Allreduce(MPI_IN_PLACE, buf, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        waited += now() - s0;
    }
    MPI_Allreduce(MPI_IN_PLACE, &waited, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    l.sync = waited / syncs;
    free(a), free(c);
    free(buf), free(out);
    return l;
}

static double clamp01(double x) { return x > 1.0 ? 1.0 : x < 1e-3 ? 1e-3 : x; }

int main(int argc, char **argv)
{
    prt_blas_select(argc, argv); /* may restart this process with the runtime's kernel choice */
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 parc_calibrate OUT.par\n");
        MPI_Finalize();
        return 2;
    }
    /* GEMM classes by their smallest dimension: 64, 256, 1024, 2048 (cost.h) */
    static const int dims[4][3] = {{64, 1024, 1024}, {256, 1024, 1024}, {1024, 1024, 1024}, {2048, 2048, 2048}};
    double gemm[4] = {0}, attn = 0, stream[4] = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    for (int c = 0; c < 4; c++) gemm[c] = gemm_rate(dims[c][0], dims[c][1], dims[c][2]);
    /* the tiny class also as small plans meet it, every dimension small
     * (per-call overhead counts there): the class runs at the two shapes'
     * harmonic mean, the rate of equal FLOPs spent in each */
    double tiny_small = gemm_rate(64, 64, 256);
    gemm[0] = 2.0 / (1.0 / gemm[0] + 1.0 / tiny_small);
    attn = gemm_rate(256, 256, 64); /* scores of one head: T x T by head_dim */
    for (int k = 0; k < 4; k++) stream[k] = stream_rate(k, (size_t)8 << 20);
    MPI_Allreduce(MPI_IN_PLACE, gemm, 4, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &attn, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, stream, 4, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    Link link = size > 1 ? measure_link(rank, size) : (Link){0, 0, 0, 0};
    int status = 0;
    if (rank == 0) {
        double peak = 0;
        for (int c = 0; c < 4; c++) peak = gemm[c] > peak ? gemm[c] : peak;
        /* the runtime's memory-bound ops: adds and norms at their mean share
         * of the streaming bandwidth, the activations (a tanh per element)
         * at the GELU loop's own */
        double hbm_eff = (stream[1] + stream[2]) / (2.0 * stream[0]), act_eff = stream[3] / stream[0];
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE), cores = sysconf(_SC_NPROCESSORS_ONLN);
        double memory = (double)pages * (double)page / (double)(cores > 0 ? cores : 1);
        char host[256] = "this machine";
        gethostname(host, sizeof host - 1);
        FILE *f = fopen(argv[1], "w");
        if (!f) {
            fprintf(stderr, "parc_calibrate: cannot write `%s`\n", argv[1]);
            status = 1;
        } else {
            fprintf(f, "# Fragment (not a plan), written by `parc calibrate` on %s: include it INSIDE\n"
                       "# `cluster { nodes 1; gpus_per_node N; ... }`.  One rank per core, fp32 OpenBLAS (%s kernels) "
                       "with one thread, %d MPI ranks measuring at once, the slowest rank's rates.\n",
                    host, openblas_get_corename(), size);
            fprintf(f, "# GEMM GFLOP/s: 64x1024x1024 with 64x64x256 (harmonic mean) %.2f, 256x1024x1024 %.2f, "
                       "1024^3 %.2f, 2048^3 %.2f; 256x256x64 %.2f\n",
                    gemm[0] / 1e9, gemm[1] / 1e9, gemm[2] / 1e9, gemm[3] / 1e9, attn / 1e9);
            fprintf(f, "# memory GB/s: triad %.2f, add %.2f, row norm %.2f, tanh-GELU %.2f\n", stream[0] / 1e9,
                    stream[1] / 1e9, stream[2] / 1e9, stream[3] / 1e9);
            if (size > 1)
                fprintf(f, "# MPI: latency %.3g us (ping-pong of idle ranks), %.3g us an 8-byte all-reduce after "
                           "compute (its mean over the all-reduce's %d steps is the link latency), bandwidth %.3g "
                           "GB/s, all-reduce bus bandwidth %.3g GB/s\n",
                        link.latency * 1e6, link.sync * 1e6, 2 * (size - 1), link.bandwidth / 1e9, link.busbw / 1e9);
            fprintf(f, "gpu { memory %.0f B; bf16 %.6g FLOP/s; fp32 %.6g FLOP/s; hbm %.6g B/s; }\n", memory, peak, peak,
                    stream[0]);
            double step_latency = link.sync / (2.0 * (size - 1));
            if (step_latency < link.latency) step_latency = link.latency;
            if (size > 1) fprintf(f, "link intra %.6g B/s %.6g s;\n", link.bandwidth, step_latency);
            fprintf(f, "efficiency { gemm %.3f %.3f %.3f %.3f; attention %.3f; hbm %.3f; activation %.4f; intra %.3f; "
                       "inter 1; }\n",
                    clamp01(gemm[0] / peak), clamp01(gemm[1] / peak), clamp01(gemm[2] / peak),
                    clamp01(gemm[3] / peak), clamp01(attn / peak), clamp01(hbm_eff), clamp01(act_eff),
                    size > 1 ? clamp01(link.busbw / link.bandwidth) : 1.0);
            if (fclose(f) != 0) {
                fprintf(stderr, "parc_calibrate: cannot write `%s`\n", argv[1]);
                status = 1;
            }
        }
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}
