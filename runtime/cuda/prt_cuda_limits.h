/*
 * prt_cuda_limits.h — the shapes the CUDA kernels take, as one pure function
 * over an op's descriptor (its PRT_CALLS name and size arguments) and the
 * device's limits: head dims, grid dimensions, cross-entropy rows, cuBLAS'
 * int dimensions, shared memory per block.  Plain C with no CUDA types, so
 * tests/gpu/test_gpu_limits.c checks it on the CPU; the CUDA backend refuses a
 * plan through it at init (prt_cuda_check_op_shapes over the program's table
 * of op calls), and each op a shape before it launches anything
 * (prt_cuda_require_shape).
 */
#ifndef PRT_CUDA_LIMITS_H
#define PRT_CUDA_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "parc_rt.h"

/* What the device allows (cudaDeviceProp: maxGridSize[0], [1], sharedMemPerBlock). */
typedef struct {
    int64_t grid_x, grid_y, smem_per_block;
} prt_cuda_limits;
/* What every CUDA device of compute capability 3.0 and later reports there:
 * a grid of 2^31 - 1 x 65535 blocks, 48 KiB of shared memory per block
 * without an opt-in (CUDA C++ Programming Guide, "Technical Specifications
 * per Compute Capability"). */
#define PRT_CUDA_COMMON_LIMITS {2147483647LL, 65535, 49152}

/* An op as generated code calls it: name as in PRT_CALLS (e.g. "attention_fwd")
 * and its int64_t size arguments in call order (attention: B, T, NH, HD, causal). */
#define PRT_CUDA_MAX_SHAPE_ARGS PRT_OP_SHAPE_MAX_ARGS
typedef struct {
    const char *op;
    int nargs;
    int64_t args[PRT_CUDA_MAX_SHAPE_ARGS];
} prt_cuda_op_shape;

/* Attention's launch geometry (prt_cuda_attention.cu): ATT_ROWS rows (one warp
 * each) per block, ATT_BK rows per shared tile, head dims padded to 32, 64 or 128.
 * Shared memory per block of its largest kernel (k_attn_dkv): two tiles of
 * ATT_BK x (HDMAX + 1), two warp rows of ATT_ROWS x HDMAX and 2 x ATT_BK
 * per-row statistics, in floats. */
#define PRT_ATT_ROWS 8
#define PRT_ATT_BK 32
#define PRT_ATT_MAX_HD 128
/* Ring attention's kernels (prt_cuda_ring.cu): a block per row, a thread per
 * head dim, so up to this many dims (the block's threads). */
#define PRT_RING_MAX_HD 256
#define PRT_ATT_HDMAX(hd) ((hd) <= 32 ? 32 : (hd) <= 64 ? 64 : 128)
#define PRT_ATT_SMEM_BYTES(hdmax) \
    ((int64_t)4 * (2 * PRT_ATT_BK * ((hdmax) + 1) + 2 * PRT_ATT_ROWS * (hdmax) + 2 * PRT_ATT_BK))

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the CUDA kernels take `op` on a device with `lim`; else 0 and
 * "OP (ARG v, ...): what: the limit" in why (why_size > 0).  Ops without a
 * shape limit (element-wise, grid-stride kernels) always pass. */
int prt_cuda_shape_ok(const prt_cuda_op_shape *op, const prt_cuda_limits *lim, char *why, size_t why_size);

/* Walks a program's op-shape table (prt_plan_desc.op_shapes, emitted by the
 * compiler from the calls it generates) through prt_cuda_shape_ok: the index
 * of the first row the kernels refuse on a device with `lim`, with
 * "stage S calls OP (ARG v, ...): what: the limit" in why; -1 when every row
 * passes (n == 0 included).  The CUDA backend refuses the plan with it at
 * init, before it allocates anything. */
int64_t prt_cuda_check_op_shapes(const prt_op_shape_desc *rows, int64_t n, const prt_cuda_limits *lim, char *why,
                                 size_t why_size);

#ifdef __cplusplus
}
#endif
#endif
