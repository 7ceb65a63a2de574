/*
 * prt_scratch.h — the workspace (scratch) each runtime op takes, in floats.
 *
 * One home for the formulas documented at prt_expect_memory (parc_rt.h): the
 * CPU runtime's ops allocate exactly this much from their scratch buffer, and
 * the compiler's ledger budgets the largest over a stage's calls.  Arguments
 * are what an op has at hand: its size arguments and, per tensor argument,
 * whether it is given (non-NULL) and whether it is stored in 16 bits (bf16 or
 * f16; such an operand is widened to fp32 in the workspace).  With only fp32
 * tensors a call takes its fp32 scratch.  Plain C, no runtime types.
 */
#ifndef PRT_SCRATCH_H
#define PRT_SCRATCH_H

#include <stdint.h>

#include "parc_rt.h"

/* Rows a GEMM widens at a time: all N rows unless a row operand is 16-bit. */
static inline int64_t prt_scratch_rows(int64_t N, int any16)
{
    return any16 && N > PRT_CONVERT_ROWS ? PRT_CONVERT_ROWS : N;
}

/* out[N,M] = in[N,K] @ w (or w^T): the widened w whole, R rows of in and out. */
static inline int64_t prt_scratch_matmul_fwd(int64_t K, int64_t M, int64_t N, int w16, int in16, int out16)
{
    int64_t R = prt_scratch_rows(N, in16 || out16);
    return (int64_t)w16 * K * M + R * ((int64_t)in16 * K + (int64_t)out16 * M);
}

/* din += dout @ w^T needs w (only when din is given), dw += in^T @ dout needs
 * in (only when dw is given); 16-bit w and dw whole, row operands R rows. */
static inline int64_t prt_scratch_matmul_bwd(int64_t K, int64_t M, int64_t N, int has_din, int has_dw, int w16,
                                             int dw16, int in16, int dout16, int din16)
{
    int w = has_din && w16, in = has_dw && in16;
    int64_t R = prt_scratch_rows(N, dout16 || din16 || in);
    return ((int64_t)w + dw16) * K * M + R * ((int64_t)dout16 * M + (int64_t)din16 * K + (int64_t)in * K);
}

/* Per (batch, head): P [T,T] unless computed in a given fp32 probs buffer,
 * the widened q, k, v [3,T,HD] and the output block [T,HD]. */
static inline int64_t prt_scratch_attention_fwd(int64_t T, int64_t HD, int has_probs, int probs16, int qkv16,
                                                int out16)
{
    int p_own = has_probs && !probs16;
    return (int64_t)(p_own ? 0 : 1) * T * T + ((int64_t)qkv16 * 3 + out16) * T * HD;
}

/* dP [T,T] always, P [T,T] unless read from a given fp32 probs buffer, the
 * widened q, k, v, their gradient and the output gradient. */
static inline int64_t prt_scratch_attention_bwd(int64_t T, int64_t HD, int has_probs, int probs16, int qkv16,
                                                int dqkv16, int dout16)
{
    int p_own = has_probs && !probs16;
    return (int64_t)(p_own ? 1 : 2) * T * T + (((int64_t)qkv16 + dqkv16) * 3 + dout16) * T * HD;
}

/* With dropout on the probabilities, both directions also hold the dropped
 * probabilities P * M / (1 - p) [T,T] of the head at hand. */
static inline int64_t prt_scratch_attention_dropout_fwd(int64_t T, int64_t HD, int has_probs, int probs16, int qkv16,
                                                        int out16)
{
    return prt_scratch_attention_fwd(T, HD, has_probs, probs16, qkv16, out16) + T * T;
}
static inline int64_t prt_scratch_attention_dropout_bwd(int64_t T, int64_t HD, int has_probs, int probs16, int qkv16,
                                                        int dqkv16, int dout16)
{
    return prt_scratch_attention_bwd(T, HD, has_probs, probs16, qkv16, dqkv16, dout16) + T * T;
}

/* Row max [N], then the sum of exponentials and the target logit [2N] that
 * one all-reduce sums over a vocab split. */
static inline int64_t prt_scratch_xent_fwd(int64_t N) { return 3 * N; }

/* Parameter gradients summed over the rows in fp32 when stored in 16 bits. */
static inline int64_t prt_scratch_layernorm_bwd(int64_t C, int dw16, int db16) { return ((int64_t)dw16 + db16) * C; }
static inline int64_t prt_scratch_rmsnorm_bwd(int64_t C, int dw16) { return (int64_t)dw16 * C; }
static inline int64_t prt_scratch_embed_bwd(int64_t C, int dwte16) { return (int64_t)dwte16 * C; }

#endif
