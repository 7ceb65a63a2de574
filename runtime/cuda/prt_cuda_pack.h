/*
 * prt_cuda_pack.h — the index math of the NCCL path's packing (prt_cuda.cu):
 * parc_rt.h's [outer, S, inner] layouts against the [S, outer, inner] ones that
 * NCCL's all-gather, reduce-scatter and grouped all-to-all work on (block s is
 * rank s's).  Block s of a packing is one strided copy, cudaMemcpy2D's
 * arguments; plain C, so tests/gpu/test_gpu_pack.c checks it on the CPU
 * against the MPI path's packing (runtime/prt_mpi.c) with several shards.
 */
#ifndef PRT_CUDA_PACK_H
#define PRT_CUDA_PACK_H

#include <stddef.h>
#include <stdint.h>

/* height rows of width bytes, from src + src_off (rows spitch bytes apart) to
 * dst + dst_off (rows dpitch bytes apart). */
typedef struct {
    size_t dst_off, dpitch, src_off, spitch, width, height;
} prt_copy2d;

/* Block s (0 <= s < S) of a packing of esize-byte elements:
 *   to_s_major 1: src[outer, S, inner] -> dst[S, outer, inner] (before a
 *     reduce-scatter or an all-to-all: dst's block s goes to rank s);
 *   to_s_major 0: src[S, outer, inner] -> dst[outer, S, inner] (after an
 *     all-gather: src's block s came from rank s). */
static inline prt_copy2d prt_pack_block(int to_s_major, int s, int S, int64_t outer, int64_t inner, size_t esize)
{
    size_t row = (size_t)inner * esize;              /* one (o, s) row of inner elements */
    size_t strided = (size_t)s * row, blocked = (size_t)s * (size_t)outer * row;
    prt_copy2d c;
    c.width = row;
    c.height = (size_t)outer;
    if (to_s_major) {
        c.src_off = strided, c.spitch = (size_t)S * row;
        c.dst_off = blocked, c.dpitch = row;
    } else {
        c.src_off = blocked, c.spitch = row;
        c.dst_off = strided, c.dpitch = (size_t)S * row;
    }
    return c;
}

#endif
