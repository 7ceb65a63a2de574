/*
 * prt_cpu_attention.h — the CPU reference of causal attention (parc_rt.h,
 * attention_fwd / attention_bwd and their attention_dropout_* forms): heads
 * over the BLAS's threads, query rows a block at a time, keys a block at a time
 * too (online softmax) in the forward unless the probabilities are kept, and in
 * the backward above PRT_ATTENTION_FULL_ROWS keys (prt_cpu_attention.c);
 * the backend table of prt_cpu_ops.c names them.
 */
#ifndef PRT_CPU_ATTENTION_H
#define PRT_CPU_ATTENTION_H

#include <stdint.h>

#include "parc_rt.h"

/* Dropout on the probabilities (attention_dropout_fwd/bwd): the mask of
 * element (b, h, i, j) is prt_dropout_keep of its global index, regenerated
 * wherever it is needed and never stored. */
typedef struct prt_att_dropout {
    uint64_t key;
    uint32_t threshold;
    float scale;
    int64_t first_sample, h_offset, NH_global;
} prt_att_dropout;

/* The dropout of one call, its arguments checked (evaluation: p = 0). */
prt_att_dropout prt_cpu_attention_dropout(prt *rt, int64_t first_sample, int64_t h_offset, int64_t NH_global,
                                          int64_t NH, int64_t step, int64_t layer, double p);
/* attention_fwd / attention_bwd; drop NULL: no dropout; dtypes: the call's word. */
void prt_cpu_attention_heads_fwd(prt *rt, void *out, void *probs, const void *qkv, int64_t B, int64_t T,
                                 int64_t NH, int64_t KV, int64_t HD, int64_t causal, const prt_att_dropout *drop,
                                 int64_t dtypes);
void prt_cpu_attention_heads_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs,
                                 int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                                 const prt_att_dropout *drop, int64_t dtypes);
/* The same over query rows q0 .. q0 + Tq - 1 of the T rows of qkv (the
 * attention_fwd / attention_bwd of parc_rt.h with Tq and q0): out, dout and
 * probs hold Tq rows; dqkv is the whole qkv's gradient. */
void prt_cpu_attention_rows_fwd(prt *rt, void *out, void *probs, const void *qkv, int64_t B, int64_t T, int64_t Tq,
                                int64_t q0, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                                const prt_att_dropout *drop, int64_t dtypes);
void prt_cpu_attention_rows_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs, int64_t B,
                                int64_t T, int64_t Tq, int64_t q0, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                                const prt_att_dropout *drop, int64_t dtypes);
/* attention_bwd without kept probabilities, key-blocked whatever T is (what
 * attention_bwd runs above PRT_ATTENTION_FULL_ROWS keys; scratch
 * prt_attention_bwd_slice_keys per worker): for tests and benchmarks at any T. */
void prt_cpu_attention_keyblocked_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, int64_t B, int64_t T,
                                      int64_t NH, int64_t KV, int64_t HD, int64_t causal, const prt_att_dropout *drop,
                                      int64_t dtypes);
/* The same over query rows q0 .. q0 + Tq - 1 (prt_cpu_attention_rows_bwd). */
void prt_cpu_attention_keyblocked_rows_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, int64_t B,
                                           int64_t T, int64_t Tq, int64_t q0, int64_t NH, int64_t KV, int64_t HD,
                                           int64_t causal, const prt_att_dropout *drop, int64_t dtypes);
/* ring_kv_pack, ring_kv_grad, ring_attention_fwd and ring_attention_bwd of
 * parc_rt.h (scratch: prt_scratch_ring_attention_*). */
void prt_cpu_ring_kv_pack(prt *rt, void *kv, const void *qkv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                          int64_t HD, int64_t dtypes);
void prt_cpu_ring_kv_grad(prt *rt, void *dqkv, const void *dkv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                          int64_t HD, int64_t dtypes);
void prt_cpu_ring_attention_fwd(prt *rt, void *out, void *lse, const void *qkv, const void *kv, int64_t B, int64_t T,
                                int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t coord, int64_t step,
                                int64_t P, int64_t balanced, int64_t dtypes);
void prt_cpu_ring_attention_bwd(prt *rt, void *dqkv, void *dkv, const void *dout, const void *out, const void *lse,
                                const void *qkv, const void *kv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                                int64_t HD, int64_t causal, int64_t coord, int64_t step, int64_t P, int64_t balanced,
                                int64_t dtypes);
/* seq_permute and seq_halves of parc_rt.h (the all-gather form of the
 * load-balanced split). */
void prt_cpu_seq_permute(prt *rt, void *dst, const void *src, int64_t B, int64_t T, int64_t W, int64_t zz,
                         int64_t inverse, int64_t dtypes);
void prt_cpu_seq_halves(prt *rt, void *seq, void *half0, void *half1, int64_t B, int64_t h, int64_t C, int64_t join,
                        int64_t dtypes);

#endif
