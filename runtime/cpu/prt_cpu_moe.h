/*
 * prt_cpu_moe.h — the CPU reference of the mixture-of-experts ops (parc_rt.h's
 * moe_* rows): the router with its auxiliary losses, the dispatch permutation,
 * the grouped expert GEMM and the weighted combine (prt_cpu_moe.c); the backend
 * table of prt_cpu_ops.c names them.
 *
 * Notation: T tokens of H features, E experts, k = topk choices per token,
 * logits l[T,E] = x[T,H] @ wr[H,E].  Integer tensors (index, counts, offsets,
 * rows) are i32: the runtime has no 64-bit integer dtype, and T*k < 2^31 is
 * checked.  Float tensors are f32, bf16 or f16 (parc_rt.h); the arithmetic is
 * fp32 with per-token sums over E in double.
 *
 * Routing (moe_router_fwd).  For token t the k experts of largest l[t,e], in
 * decreasing order; equal logits: the lower expert first (so the choice is a
 * function of the logits alone).  The chosen set S_t is the same whether ranked
 * by logit, softmax or sigmoid, all monotone, and ranking the logits themselves
 * avoids ties that rounding would make.  The gate:
 *   softmax (sigmoid = 0): p[t,e] = softmax_e(l[t,:]); the chosen weights are
 *     p renormalised over S_t, i.e. w[t,j] = softmax over the chosen logits
 *     (Mixtral, Jiang et al. 2024: softmax over the top-k logits);
 *   sigmoid (sigmoid != 0): s[t,e] = 1 / (1 + exp(-l[t,e])); w[t,j] =
 *     s[t,i_j] / sum_{e in S_t} s[t,e] (DeepSeek-V3, 2024), and the router
 *     probability of the auxiliary loss is p[t,e] = s[t,e] / sum_e s[t,e]
 *     (DeepSeek-V3's normalised affinity s').
 * counts[e] = |{t : e in S_t}|.
 *
 * The load-balancing loss (Switch Transformer, Fedus et al. 2021, eq. 4;
 * GShard, Lepikhin et al. 2020, with k choices counted each):
 *   aux = aux_coef * E * sum_e f_e P_e,  f_e = counts[e] / (T k),
 *   P_e = (1/T) sum_t p[t,e];
 * f is piecewise constant (no gradient), so d aux / d p[t,e] = aux_coef E f_e / T.
 * The router z-loss (ST-MoE, Zoph et al. 2022, eq. 5):
 *   z = z_coef * (1/T) sum_t lse_t^2,  lse_t = log sum_e exp(l[t,e]);
 *   d z / d l[t,e] = z_coef * (2/T) lse_t softmax_e(l[t,:]).
 * Both coefficients are as the step's loss counts them (a caller that averages
 * over micro-batches folds that factor in).  Neither loss is added to the loss
 * prt_step_end reports; moe_router_fwd writes them to `losses` for the caller.
 *
 * The router's backward, per token, g[j] = dweight[t,j]:
 *   softmax: dl[t,i_j] += w_j (g_j - sum_m w_m g_m);
 *            aux: dl[t,e] += p_e (c_e - sum_m p_m c_m), c_e = aux_coef E f_e / T;
 *   sigmoid: dl[t,i_j] += s_j (1 - s_j) (g_j - sum_m w_m g_m) / sum_{S_t} s;
 *            aux: dl[t,e] += s_e (1 - s_e) (c_e - sum_m p_m c_m) / sum_e s;
 *   both: the z-loss term above.  The choice itself has no gradient.
 *
 * Dispatch (moe_permute_fwd): assignment (t, j) goes to row rows[t,j] of the
 * permuted tensor, sorted by expert and, within an expert, by token (stable),
 * so expert e owns rows offsets[e] .. offsets[e+1] - 1.  An expert that got no
 * token has an empty range: its GEMMs are skipped and its weight gradient gets
 * nothing added.  Combine (moe_combine_fwd): out[t] = sum_j w[t,j] y[rows[t,j]],
 * the sum in j order.
 *
 * Expert parallelism over S ranks of El = E / S experts each (rank j holds
 * experts j El .. (j+1) El - 1).  The dispatch's rows are already in the
 * order of the ranks that hold their experts: rank j's are sum over its
 * experts of counts (moe_rank_rows), alltoallv's send counts.  A rank then
 * receives, per source rank s, its experts' rows in expert order: block (s, e)
 * of counts[s,e] rows, where counts[S,El] is the all-to-all of each source's
 * counts of this rank's experts (alltoall with inner El).  moe_regroup_fwd
 * (to_expert = 1) makes that expert-major, blocks (e, s), with offsets for
 * moe_matmul; to_expert = 0 puts the experts' outputs back in (s, e) order for
 * the alltoallv that returns them (its counts: the first one's, swapped).
 * Both are permutations of rows; moe_regroup_bwd adds the gradient back.
 */
#ifndef PRT_CPU_MOE_H
#define PRT_CPU_MOE_H

#include <stdint.h>

#include "parc_rt.h"

void prt_cpu_moe_router_fwd(prt *rt, void *logits, void *index, void *weight, void *counts, void *losses,
                            const void *x, const void *wr, int64_t T, int64_t H, int64_t E, int64_t topk,
                            int64_t sigmoid, double aux_coef, double z_coef, int64_t dtypes);
void prt_cpu_moe_router_loss(prt *rt, void *losses, const void *logits, const void *index, const void *counts,
                             int64_t T, int64_t E, int64_t topk, int64_t sigmoid, double aux_coef, double z_coef,
                             int64_t dtypes);
void prt_cpu_moe_router_bwd(prt *rt, void *dx, void *dwr, void *dlogits, const void *dweight, const void *logits,
                            const void *index, const void *counts, const void *x, const void *wr, int64_t T,
                            int64_t H, int64_t E, int64_t topk, int64_t sigmoid, double aux_coef, double z_coef,
                            int64_t dtypes);
void prt_cpu_moe_permute_fwd(prt *rt, void *out, void *offsets, void *rows, const void *in, const void *index,
                             int64_t T, int64_t H, int64_t E, int64_t topk, int64_t dtypes);
void prt_cpu_moe_permute_bwd(prt *rt, void *din, const void *dout, const void *rows, int64_t T, int64_t H,
                             int64_t topk, int64_t dtypes);
void prt_cpu_moe_matmul_fwd(prt *rt, void *out, const void *in, const void *w, const void *offsets, int64_t E,
                            int64_t K, int64_t M, int64_t dtypes);
void prt_cpu_moe_matmul_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w,
                            const void *offsets, int64_t E, int64_t K, int64_t M, int64_t dtypes);
void prt_cpu_moe_combine_fwd(prt *rt, void *out, const void *y, const void *weight, const void *rows, int64_t T,
                             int64_t H, int64_t topk, int64_t dtypes);
void prt_cpu_moe_combine_bwd(prt *rt, void *dy, void *dweight, const void *dout, const void *y, const void *weight,
                             const void *rows, int64_t T, int64_t H, int64_t topk, int64_t dtypes);

void prt_cpu_moe_counts(prt *rt, const void *counts, int64_t E, int64_t layer, int64_t dtypes);
void prt_cpu_moe_loss_add(prt *rt, const void *losses, double scale, int64_t dtypes);
void prt_cpu_moe_rank_rows(prt *rt, void *send_rows, const void *counts, int64_t S, int64_t E, int64_t dtypes);
void prt_cpu_moe_regroup_fwd(prt *rt, void *out, void *offsets, const void *in, const void *counts, int64_t S,
                             int64_t El, int64_t H, int64_t to_expert, int64_t dtypes);
void prt_cpu_moe_regroup_bwd(prt *rt, void *din, const void *dout, const void *counts, int64_t S, int64_t El,
                             int64_t H, int64_t to_expert, int64_t dtypes);

#endif
