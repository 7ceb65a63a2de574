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

/* The mixture-of-experts ops: the router's GEMMs are matmul's over T rows
 * (logits[T,E] = x[T,H] @ wr[H,E]), and its forward takes at least E + 1
 * doubles (the CUDA runtime's partial sums of the losses, after the GEMM);
 * the grouped GEMM is one matmul call per expert, so its request is matmul's
 * for the expert with the most rows, `rows` (at most the T*topk rows a
 * dispatch makes, the compiler's bound).  Routing, dispatch and combine take
 * none. */
static inline int64_t prt_scratch_moe_router_fwd(int64_t T, int64_t H, int64_t E, int wr16, int x16, int logits16)
{
    int64_t gemm = prt_scratch_matmul_fwd(H, E, T, wr16, x16, logits16);
    return gemm > 2 * (E + 1) ? gemm : 2 * (E + 1);
}
static inline int64_t prt_scratch_moe_router_loss(int64_t E) { return 2 * (E + 1); }
static inline int64_t prt_scratch_moe_router_bwd(int64_t T, int64_t H, int64_t E, int has_dx, int has_dwr, int wr16,
                                                 int dwr16, int x16, int dlogits16, int dx16)
{
    return prt_scratch_matmul_bwd(H, E, T, has_dx, has_dwr, wr16, dwr16, x16, dlogits16, dx16);
}
static inline int64_t prt_scratch_moe_matmul_fwd(int64_t rows, int64_t K, int64_t M, int w16, int in16, int out16)
{
    return prt_scratch_matmul_fwd(K, M, rows, w16, in16, out16);
}
static inline int64_t prt_scratch_moe_matmul_bwd(int64_t rows, int64_t K, int64_t M, int has_din, int has_dw, int w16,
                                                 int dw16, int in16, int dout16, int din16)
{
    return prt_scratch_matmul_bwd(K, M, rows, has_din, has_dw, w16, dw16, in16, dout16, din16);
}

/* Attention runs each (batch, head) on one worker, up to PRT_ATTENTION_WORKERS
 * at once (the BLAS's threads, one-thread GEMMs inside).  With kept
 * probabilities a head goes PRT_ATTENTION_ROWS query rows at a time against
 * all its keys: a block of scores is [rows, T], never [T, T].  Without them it
 * is key-blocked as well (online softmax): a block of scores is
 * [PRT_ATTENTION_ROWS, PRT_ATTENTION_KEYS] whatever T is, sized with its K, V
 * and output blocks for a core's L2.  Every worker the heads can keep busy has
 * its own slice. */
#define PRT_ATTENTION_ROWS 64
#define PRT_ATTENTION_KEYS 128
#define PRT_ATTENTION_WORKERS 8
/* The backward without kept probabilities rebuilds whole rows of P (row-blocked,
 * five block GEMMs) up to this many keys, and goes key-blocked (seven: the
 * forward is recomputed for the row statistics, scratch independent of T)
 * only above: on the 1 MiB-L2 machine of bench/bench_attention.sh the
 * row-blocked backward took 0.70..0.83 of the key-blocked one's CPU time at
 * T = 256 .. 8192. */
#define PRT_ATTENTION_FULL_ROWS 8192

static inline int64_t prt_attention_workers(int64_t heads)
{
    return heads < PRT_ATTENTION_WORKERS ? (heads > 0 ? heads : 1) : PRT_ATTENTION_WORKERS;
}
static inline int64_t prt_attention_rows(int64_t T) { return T < PRT_ATTENTION_ROWS ? T : PRT_ATTENTION_ROWS; }
static inline int64_t prt_attention_keys(int64_t T) { return T < PRT_ATTENTION_KEYS ? T : PRT_ATTENTION_KEYS; }

/* One worker's slice of the forward.  Kept probabilities: the scores /
 * probabilities of a block unless written into the fp32 probs buffer itself,
 * the block with dropout applied.  Key-blocked: a block of scores, the dropped
 * block, each row's running max and sum [2, rows].  Both: the widened q, k, v
 * [3,T,HD] and output [T,HD]. */
static inline int64_t prt_attention_fwd_slice(int64_t T, int64_t HD, int has_probs, int probs16, int qkv16,
                                              int out16, int dropout)
{
    int64_t wide = ((int64_t)qkv16 * 3 + out16) * T * HD, R = prt_attention_rows(T);
    if (!has_probs) return (1 + (int64_t)dropout) * R * prt_attention_keys(T) + 2 * R + wide;
    return ((int64_t)(probs16 ? 1 : 0) + dropout) * R * T + wide;
}
/* The backward's.  Row-blocked (kept probabilities, or T up to
 * PRT_ATTENTION_FULL_ROWS): dP of a block, P unless read from the fp32 probs
 * buffer, the dropped block.  Key-blocked (_keys): P and dP of a block, the
 * dropped block, a block of recomputed output [rows, HD] with its rows' max
 * and sum, and the head's rows' logsumexp and rowsum(dO * O) [2, T].  Both:
 * the widened q, k, v, their gradient and the output gradient. */
static inline int64_t prt_attention_bwd_slice_keys(int64_t T, int64_t HD, int qkv16, int dqkv16, int dout16,
                                                   int dropout)
{
    int64_t wide = (((int64_t)qkv16 + dqkv16) * 3 + dout16) * T * HD, R = prt_attention_rows(T);
    return (2 + (int64_t)dropout) * R * prt_attention_keys(T) + R * (HD + 2) + 2 * T + wide;
}
static inline int64_t prt_attention_bwd_slice(int64_t T, int64_t HD, int has_probs, int probs16, int qkv16,
                                              int dqkv16, int dout16, int dropout)
{
    int64_t wide = (((int64_t)qkv16 + dqkv16) * 3 + dout16) * T * HD, R = prt_attention_rows(T);
    if (!has_probs && T > PRT_ATTENTION_FULL_ROWS)
        return prt_attention_bwd_slice_keys(T, HD, qkv16, dqkv16, dout16, dropout);
    return ((int64_t)(has_probs && !probs16 ? 1 : 2) + dropout) * R * T + wide;
}

/* heads = B x NH (attention's batch times heads) */
static inline int64_t prt_scratch_attention_fwd(int64_t T, int64_t HD, int64_t heads, int has_probs, int probs16,
                                                int qkv16, int out16)
{
    return prt_attention_workers(heads) * prt_attention_fwd_slice(T, HD, has_probs, probs16, qkv16, out16, 0);
}
static inline int64_t prt_scratch_attention_bwd(int64_t T, int64_t HD, int64_t heads, int has_probs, int probs16,
                                                int qkv16, int dqkv16, int dout16)
{
    return prt_attention_workers(heads) * prt_attention_bwd_slice(T, HD, has_probs, probs16, qkv16, dqkv16, dout16, 0);
}
static inline int64_t prt_scratch_attention_dropout_fwd(int64_t T, int64_t HD, int64_t heads, int has_probs,
                                                        int probs16, int qkv16, int out16)
{
    return prt_attention_workers(heads) * prt_attention_fwd_slice(T, HD, has_probs, probs16, qkv16, out16, 1);
}
static inline int64_t prt_scratch_attention_dropout_bwd(int64_t T, int64_t HD, int64_t heads, int has_probs,
                                                        int probs16, int qkv16, int dqkv16, int dout16)
{
    return prt_attention_workers(heads) * prt_attention_bwd_slice(T, HD, has_probs, probs16, qkv16, dqkv16, dout16, 1);
}

/* Ring attention (ring_attention_fwd / _bwd, parc_rt.h): each (batch, head)
 * of a forward, each (batch, key/value group) of a backward on one worker as
 * attention's, key-blocked against the step's block of keys (T rows on either
 * side).  A forward slice: a block of scores, its rows' max and sum [2, rows]
 * and output [rows, HD]; a backward one: P and dP of a block and the rows'
 * rowsum(dO * out) [T].  With 16-bit activations (w16) the widened q, k, v and
 * output (forward) or k, v, dk, dv, q, dq, dout and out (backward), T x HD each. */
static inline int64_t prt_ring_fwd_slice(int64_t T, int64_t HD, int w16)
{
    int64_t R = prt_attention_rows(T);
    return R * prt_attention_keys(T) + 2 * R + R * HD + (int64_t)w16 * 4 * T * HD;
}
static inline int64_t prt_ring_bwd_slice(int64_t T, int64_t HD, int w16)
{
    return 2 * prt_attention_rows(T) * prt_attention_keys(T) + T + (int64_t)w16 * 8 * T * HD;
}
/* heads = B x NH */
static inline int64_t prt_scratch_ring_attention_fwd(int64_t T, int64_t HD, int64_t heads, int w16)
{
    return prt_attention_workers(heads) * prt_ring_fwd_slice(T, HD, w16);
}
static inline int64_t prt_scratch_ring_attention_bwd(int64_t T, int64_t HD, int64_t heads, int w16)
{
    return prt_attention_workers(heads) * prt_ring_bwd_slice(T, HD, w16);
}

/* Row max [N], then the sum of exponentials and the target logit [2N] that
 * one all-reduce sums over a vocab split. */
static inline int64_t prt_scratch_xent_fwd(int64_t N) { return 3 * N; }

/* Parameter gradients summed over the rows in fp32 when stored in 16 bits. */
static inline int64_t prt_scratch_layernorm_bwd(int64_t C, int dw16, int db16) { return ((int64_t)dw16 + db16) * C; }
static inline int64_t prt_scratch_rmsnorm_bwd(int64_t C, int dw16) { return (int64_t)dw16 * C; }
static inline int64_t prt_scratch_embed_bwd(int64_t C, int dwte16) { return (int64_t)dwte16 * C; }

#endif
