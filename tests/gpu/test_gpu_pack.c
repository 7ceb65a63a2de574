/*
 * test_gpu_pack.c — the NCCL path's packing (runtime/cuda/prt_cuda_pack.h)
 * against the MPI path (runtime/prt_mpi.c) with S > 1 shards, on the CPU.
 *
 * Run as `mpirun -np S test_gpu_pack S` (mesh {x: S}).  Every rank's inputs are
 * small integers from (rank, index, seed) (habit 11), so each rank knows all
 * ranks' inputs and computes what the CUDA backend's NCCL path would leave in
 * its output: the packing copies of prt_pack_block applied on the host as
 * cudaMemcpy2D applies them, around NCCL's all-gather, reduce-scatter and
 * grouped all-to-all on [S, count] blocks (block s is rank s's).  That must
 * equal, element for element, what prt_mpi_allgather / _reducescatter /
 * _alltoall return on the same rank, for fp32 and bf16, outer 1, 2 and 3,
 * inner 1 and 5.  Exit status 0 iff no element differs on any rank.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"
#include "prt_math.h"
#include "cuda/prt_cuda_pack.h"

static long long wrong, compared;

static float val(int rank, int64_t i, int seed) { return (float)((rank * 7 + i * 3 + seed * 5) % 17 - 8); }

/* cudaMemcpy2D on the host. */
static void copy2d(char *dst, const char *src, prt_copy2d k) {
    for (size_t r = 0; r < k.height; r++) memcpy(dst + k.dst_off + r * k.dpitch, src + k.src_off + r * k.spitch, k.width);
}
/* The NCCL path's packing of a whole buffer: every block s. */
static void pack(int to_s_major, char *dst, const char *src, int S, int64_t outer, int64_t inner, size_t es) {
    for (int s = 0; s < S; s++) copy2d(dst, src, prt_pack_block(to_s_major, s, S, outer, inner, es));
}

static void fill(char *buf, int64_t dt, int rank, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) prt_store(buf, dt, i, val(rank, i, seed));
}

static void expect(const char *what, int me, int64_t dt, int64_t outer, int64_t inner, const char *got,
                   const char *want, int64_t n) {
    long long bad = 0;
    for (int64_t i = 0; i < n; i++) bad += prt_load(got, dt, i) != prt_load(want, dt, i);
    compared += n;
    wrong += bad;
    if (bad)
        fprintf(stderr, "rank %d: %s %s outer %lld inner %lld: %lld of %lld elements differ from the MPI path\n", me, what,
                prt_dtype_names[dt], (long long)outer, (long long)inner, bad, (long long)n);
}

static void check(prt *rt, int S, int me, int64_t dt, int64_t outer, int64_t inner) {
    size_t es = prt_dtype_size(dt);
    int64_t block = outer * inner, full = (int64_t)S * block;
    int seed = (int)(outer * 10 + inner + dt * 100);
    char *in = calloc((size_t)full, es), *mpi = calloc((size_t)full, es), *nccl = calloc((size_t)full, es),
         *peer = calloc((size_t)full, es), *stage = calloc((size_t)full, es), *gathered = calloc((size_t)full, es);

    /* all-gather: in[outer, inner] -> out[outer, S, inner]; NCCL gathers [S, block], then unpacks */
    fill(in, dt, me, block, seed);
    prt_mpi_allgather(rt, 0, mpi, in, outer, inner, dt);
    for (int q = 0; q < S; q++) fill(gathered + (size_t)(q * block) * es, dt, q, block, seed);
    if (outer == 1) memcpy(nccl, gathered, (size_t)full * es);
    else pack(0, nccl, gathered, S, outer, inner, es);
    expect("allgather", me, dt, outer, inner, nccl, mpi, full);

    /* reduce-scatter: in[outer, S, inner] packed to [S, block]; rank me gets the sum of block me */
    fill(in, dt, me, full, seed + 1);
    prt_mpi_reducescatter(rt, 0, mpi, in, outer, inner, dt);
    for (int64_t i = 0; i < block; i++) prt_store(nccl, dt, i, 0.0f);
    for (int q = 0; q < S; q++) {
        fill(peer, dt, q, full, seed + 1);
        const char *send = peer;
        if (outer != 1) pack(1, stage, peer, S, outer, inner, es), send = stage;
        for (int64_t i = 0; i < block; i++)
            prt_store(nccl, dt, i, prt_load(nccl, dt, i) + prt_load(send, dt, (int64_t)me * block + i));
    }
    expect("reducescatter", me, dt, outer, inner, nccl, mpi, block);

    /* all-to-all: packed block me of rank j lands at block j of my output */
    fill(in, dt, me, full, seed + 2);
    prt_mpi_alltoall(rt, 0, mpi, in, outer, inner, dt);
    for (int j = 0; j < S; j++) {
        fill(peer, dt, j, full, seed + 2);
        const char *send = peer;
        if (outer != 1) pack(1, stage, peer, S, outer, inner, es), send = stage;
        memcpy(nccl + (size_t)(j * block) * es, send + (size_t)((int64_t)me * block) * es, (size_t)block * es);
    }
    expect("alltoall", me, dt, outer, inner, nccl, mpi, full);
    free(in), free(mpi), free(nccl), free(peer), free(stage), free(gathered);
}

int main(int argc, char **argv) {
    int S = argc > 1 ? atoi(argv[1]) : 0;
    if (S < 2) {
        fprintf(stderr, "usage: mpirun -np S %s S (S >= 2)\n", argv[0]);
        return 2;
    }
    const char *names[1] = {"x"};
    prt_plan_desc plan;
    memset(&plan, 0, sizeof plan);
    plan.plan_name = "test_gpu_pack";
    plan.source_file = "test";
    plan.naxes = 1;
    plan.axis_names[0] = names[0];
    plan.axis_sizes[0] = S;
    plan.dp_axis = plan.tp_axis = plan.pp_axis = -1;
    plan.steps = plan.seed = 1;
    plan.batch = plan.micro_batch = plan.micro_batches = plan.seq = 1;
    plan.vocab = 16;
    char *args[2] = {argv[0], NULL};
    prt *rt = prt_init(1, args, &plan);
    int me = (int)prt_coord(rt, 0);
    const int64_t dts[2] = {PRT_F32, PRT_BF16}, inners[2] = {1, 5};
    for (int d = 0; d < 2; d++)
        for (int64_t outer = 1; outer <= 3; outer++)
            for (int i = 0; i < 2; i++) check(rt, S, me, dts[d], outer, inners[i]);
    long long all[2] = {wrong, compared};
    MPI_Allreduce(MPI_IN_PLACE, all, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0)
        printf("test_gpu_pack: %d shards: %lld elements compared, %lld differ: %s\n", S, all[1], all[0],
               all[0] || !all[1] ? "FAIL" : "ok");
    prt_finalize(rt);
    return all[0] || !all[1] ? 1 : 0;
}
