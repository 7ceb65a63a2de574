/*
 * prt_cuda_backend.c — the CUDA backend's table (prt_backend.h): parc_rt.h's
 * calls adapted to the device ops of prt_cuda_api.h (float tensors with their
 * storage dtype, from the call's dtypes word), the device memory hooks and the
 * device probe.
 */
#include <stdio.h>

#include "prt_backend.h"
#include "prt_cuda_api.h"

/* Pointer argument `index` of op `op`, p, with the storage dtype the call's
 * dtypes word gives it (prt_arg_dtype): f32, bf16 or f16. */
static prt_ten tn(prt *rt, int64_t dtypes, int index, const void *p, const char *op) {
    int64_t dtype = p ? prt_arg_dtype(rt, dtypes, index, p, op) : PRT_F32;
    PRT_CHECK(dtype == PRT_F32 || prt_dtype_is_16(dtype), "%s: pointer argument %d is declared %s, not a float dtype",
              op, index + 1, dtype >= 0 && dtype < PRT_NDTYPE ? prt_dtype_names[dtype] : "(no dtype)");
    return (prt_ten){(void *)p, dtype};
}
#define TN(index, p) tn(rt, dtypes, (index), (p), __func__)
/* Pointer argument `index`, of the dtype the call's definition fixes (i32 token
 * ids, a u8 mask): a word that says otherwise is an error. */
static const void *fixed(prt *rt, int64_t dtypes, int index, const void *p, int64_t dtype, const char *op) {
    PRT_CHECK(p && prt_arg_dtype(rt, dtypes, index, p, op) == dtype, "%s: pointer argument %d must be %s", op,
              index + 1, prt_dtype_names[dtype]);
    return p;
}
#define FIXED(index, p, dtype) fixed(rt, dtypes, (index), (p), (dtype), __func__)

static void cu_zero(prt *rt, void *buf, int64_t n, int64_t dtypes) {
    prt_ten t = TN(0, buf);
    prt_cu_zero(rt, t, n, prt_dtype_size(t.dtype));
}
static void cu_copy(prt *rt, void *dst_, const void *src_, int64_t n, int64_t dtypes) {
    prt_cu_copy(rt, TN(0, dst_), TN(1, src_), n);
}
static void cu_acc(prt *rt, void *dst_, const void *src_, int64_t n, int64_t dtypes) {
    if (prt_word_writes(dtypes, 0)) prt_cu_copy(rt, TN(0, dst_), TN(1, src_), n);  /* PRT_ARG_WRITE: dst = src */
    else prt_cu_acc(rt, TN(0, dst_), TN(1, src_), n);
}
static void cu_sumsq(prt *rt, void *acc_, const void *x_, int64_t n, double weight, int64_t dtypes) {
    prt_cu_sumsq(rt, TN(0, acc_), TN(1, x_), n, weight);
}
static void cu_scale(prt *rt, void *x_, int64_t n, double factor, int64_t dtypes) { prt_cu_scale(rt, TN(0, x_), n,
                     factor); }
static void cu_embed_fwd(prt *rt, void *out_, const void *tokens_, const void *wte_, int64_t N, int64_t C,
                         int64_t vocab_local, int64_t vocab_offset, int64_t dtypes) {
    prt_cu_embed_fwd(rt, TN(0, out_), FIXED(1, tokens_, PRT_I32), TN(2, wte_), N, C, vocab_local, vocab_offset);
}
static void cu_embed_bwd(prt *rt, void *dwte_, const void *tokens_, const void *dout_, int64_t N, int64_t C,
                         int64_t vocab_local, int64_t vocab_offset, int64_t dtypes) {
    prt_cu_embed_bwd(rt, TN(0, dwte_), FIXED(1, tokens_, PRT_I32), TN(2, dout_), N, C, vocab_local, vocab_offset);
}
static void cu_pos_fwd(prt *rt, void *out_, const void *in_, const void *wpe_, int64_t B, int64_t T, int64_t C,
                       int64_t t_offset, int64_t zz, int64_t dtypes) {
    prt_cu_pos_fwd(rt, TN(0, out_), TN(1, in_), TN(2, wpe_), B, T, C, t_offset, zz);
}
static void cu_pos_bwd(prt *rt, void *dwpe_, void *din_, const void *dout_, int64_t B, int64_t T, int64_t C,
                       int64_t t_offset, int64_t zz, int64_t dtypes) {
    prt_cu_pos_bwd(rt, TN(0, dwpe_), TN(1, din_), TN(2, dout_), B, T, C, t_offset, zz, prt_word_writes(dtypes, 1));
}
static void cu_layernorm_fwd(prt *rt, void *out_, void *mean_, void *rstd_, const void *in_, const void *w_,
                             const void *b_, int64_t N, int64_t C, double eps, int64_t dtypes) {
    prt_cu_layernorm_fwd(rt, TN(0, out_), TN(1, mean_), TN(2, rstd_), TN(3, in_), TN(4, w_), TN(5, b_), N, C, eps);
}
static void cu_layernorm_bwd(prt *rt, void *din_, void *dw_, void *db_, const void *dout_, const void *in_,
                             const void *w_, const void *mean_, const void *rstd_, int64_t N, int64_t C,
                             int64_t dtypes) {
    /* PRT_ARG_WRITE on dw or db: the column sums written, not added (zeroed first: C elements) */
    if (dw_ && prt_word_writes(dtypes, 1)) prt_cu_zero(rt, TN(1, dw_), C, prt_dtype_size(prt_word_dtype(dtypes, 1)));
    if (db_ && prt_word_writes(dtypes, 2)) prt_cu_zero(rt, TN(2, db_), C, prt_dtype_size(prt_word_dtype(dtypes, 2)));
    prt_cu_layernorm_bwd(rt, TN(0, din_), TN(1, dw_), TN(2, db_), TN(3, dout_), TN(4, in_), TN(5, w_), TN(6, mean_),
                         TN(7, rstd_), N, C,
                         prt_word_writes(dtypes, 0));
}
static void cu_rmsnorm_fwd(prt *rt, void *out_, void *rstd_, const void *in_, const void *w_, int64_t N, int64_t C,
                           double eps, int64_t dtypes) {
    prt_cu_rmsnorm_fwd(rt, TN(0, out_), TN(1, rstd_), TN(2, in_), TN(3, w_), N, C, eps);
}
static void cu_rmsnorm_bwd(prt *rt, void *din_, void *dw_, const void *dout_, const void *in_, const void *w_,
                           const void *rstd_, int64_t N, int64_t C, int64_t dtypes) {
    if (dw_ && prt_word_writes(dtypes, 1)) prt_cu_zero(rt, TN(1, dw_), C, prt_dtype_size(prt_word_dtype(dtypes, 1)));
    prt_cu_rmsnorm_bwd(rt, TN(0, din_), TN(1, dw_), TN(2, dout_), TN(3, in_), TN(4, w_), TN(5, rstd_), N, C,
                       prt_word_writes(dtypes, 0));
}
static void cu_matmul_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M,
                          int64_t dtypes) {
    prt_cu_matmul_fwd(rt, TN(0, out), TN(1, in), TN(2, w), N, K, M, 0);
}
static void cu_matmul_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, int64_t N,
                          int64_t K, int64_t M, int64_t dtypes) {
    prt_cu_matmul_bwd(rt, TN(0, din), TN(1, dw), TN(2, dout), TN(3, in), TN(4, w), N, K, M, 0, prt_word_writes(dtypes, 0),
                      prt_word_writes(dtypes, 1));
}
static void cu_matmul_t_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M,
                            int64_t dtypes) {
    prt_cu_matmul_fwd(rt, TN(0, out), TN(1, in), TN(2, w), N, K, M, 1);
}
static void cu_matmul_t_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, int64_t N,
                            int64_t K, int64_t M, int64_t dtypes) {
    prt_cu_matmul_bwd(rt, TN(0, din), TN(1, dw), TN(2, dout), TN(3, in), TN(4, w), N, K, M, 1, prt_word_writes(dtypes, 0),
                      prt_word_writes(dtypes, 1));
}
/* the GEMM, then the bias added in place (out may equal in for bias_fwd) */
static void cu_matmul_bias_fwd(prt *rt, void *out, const void *in, const void *w, const void *b, int64_t N, int64_t K,
                               int64_t M, int64_t dtypes) {
    prt_cu_matmul_fwd(rt, TN(0, out), TN(1, in), TN(2, w), N, K, M, 0);
    prt_cu_bias_fwd(rt, TN(0, out), TN(0, out), TN(3, b), N, M);
}
static void cu_matmul_bias_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, void *db,
                               int64_t N, int64_t K, int64_t M, int64_t dtypes) {
    if (db && prt_word_writes(dtypes, 5)) prt_cu_zero(rt, TN(5, db), M, prt_dtype_size(prt_word_dtype(dtypes, 5)));
    if (db) prt_cu_bias_bwd(rt, TN(5, db), TN(2, dout), N, M);
    prt_cu_matmul_bwd(rt, TN(0, din), TN(1, dw), TN(2, dout), TN(3, in), TN(4, w), N, K, M, 0, prt_word_writes(dtypes, 0),
                      prt_word_writes(dtypes, 1));
}
static void cu_bias_fwd(prt *rt, void *out_, const void *in_, const void *b_, int64_t N, int64_t M, int64_t dtypes) {
    prt_cu_bias_fwd(rt, TN(0, out_), TN(1, in_), TN(2, b_), N, M);
}
static void cu_bias_bwd(prt *rt, void *db_, const void *dout_, int64_t N, int64_t M, int64_t dtypes) {
    prt_cu_bias_bwd(rt, TN(0, db_), TN(1, dout_), N, M);
}
static void cu_gelu_fwd(prt *rt, void *out_, const void *in_, int64_t n, int64_t dtypes) {
    prt_cu_gelu_fwd(rt, TN(0, out_), TN(1, in_), n);
}
static void cu_gelu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n, int64_t dtypes) {
    prt_cu_gelu_bwd(rt, TN(0, din_), TN(1, in_), TN(2, dout_), n, prt_word_writes(dtypes, 0));
}
static void cu_relu_fwd(prt *rt, void *out_, const void *in_, int64_t n, int64_t dtypes) {
    prt_cu_relu_fwd(rt, TN(0, out_), TN(1, in_), n);
}
static void cu_relu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n, int64_t dtypes) {
    prt_cu_relu_bwd(rt, TN(0, din_), TN(1, in_), TN(2, dout_), n, prt_word_writes(dtypes, 0));
}
static void cu_swiglu_fwd(prt *rt, void *out_, const void *in_, int64_t N, int64_t F, int64_t dtypes) {
    prt_cu_swiglu_fwd(rt, TN(0, out_), TN(1, in_), N, F);
}
static void cu_swiglu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t N, int64_t F,
                          int64_t dtypes) {
    prt_cu_swiglu_bwd(rt, TN(0, din_), TN(1, in_), TN(2, dout_), N, F, prt_word_writes(dtypes, 0));
}
static void cu_add_fwd(prt *rt, void *out_, const void *a_, const void *b_, int64_t n, int64_t dtypes) {
    prt_cu_add_fwd(rt, TN(0, out_), TN(1, a_), TN(2, b_), n);
}
static void cu_rope_fwd(prt *rt, void *out_, const void *in_, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                        int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                        double high_freq_factor, int64_t original_max_positions, int64_t dtypes) {
    prt_cu_rope_fwd(rt, TN(0, out_), TN(1, in_), B, T, G, U, R, HD, t_offset, zz, theta, factor, low_freq_factor,
                    high_freq_factor, original_max_positions);
}
static void cu_rope_bwd(prt *rt, void *din_, const void *dout_, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                        int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                        double high_freq_factor, int64_t original_max_positions, int64_t dtypes) {
    prt_cu_rope_bwd(rt, TN(0, din_), TN(1, dout_), B, T, G, U, R, HD, t_offset, zz, theta, factor, low_freq_factor,
                    high_freq_factor, original_max_positions, prt_word_writes(dtypes, 0));
}
static void cu_dropout_fwd(prt *rt, void *out_, void *mask_, const void *in_, int64_t B, int64_t T, int64_t C,
                           int64_t first_sample, int64_t t_offset, int64_t T_global, int64_t step, int64_t layer,
                           int64_t site, double p, int64_t dtypes) {
    PRT_CHECK(p >= 0 && p < 1, "dropout_fwd: p = %g is outside [0, 1)", p);
    FIXED(1, mask_, PRT_U8);
    if (rt->eval_active) p = 0; /* evaluation runs the model without dropout */
    prt_cu_dropout_fwd(rt, TN(0, out_), (uint8_t *)mask_, TN(2, in_), B, T, C, first_sample, t_offset, T_global,
                       prt_dropout_key(rt->plan.seed, step, layer, site), prt_dropout_threshold(p),
                       prt_dropout_scale(p));
}
static void cu_dropout_bwd(prt *rt, void *din_, const void *mask_, const void *dout_, int64_t n, double p,
                           int64_t dtypes) {
    PRT_CHECK(p >= 0 && p < 1, "dropout_bwd: p = %g is outside [0, 1)", p);
    FIXED(1, mask_, PRT_U8);
    prt_cu_dropout_bwd(rt, TN(0, din_), (const uint8_t *)mask_, TN(2, dout_), n, prt_dropout_scale(p),
                       prt_word_writes(dtypes, 0));
}
static prt_cu_drop cu_drop(prt *rt, int64_t first_sample, int64_t h_offset, int64_t NH_global, int64_t step,
                           int64_t layer, double p) {
    PRT_CHECK(p >= 0 && p < 1, "attention dropout: p = %g is outside [0, 1)", p);
    if (rt->eval_active) p = 0; /* evaluation runs the model without dropout */
    prt_cu_drop d = {1, prt_dropout_threshold(p), prt_dropout_scale(p), prt_dropout_key(rt->plan.seed, step, layer, 0),
                     first_sample, h_offset, NH_global};
    return d;
}
static void cu_attention_dropout_fwd(prt *rt, void *out_, void *probs_, const void *qkv_, int64_t B, int64_t T_,
                                     int64_t NH_, int64_t KV_, int64_t HD_, int64_t causal, int64_t first_sample, int64_t h_offset,
                                     int64_t NH_global, int64_t step, int64_t layer, double p, int64_t dtypes) {
    prt_cu_attention_dropout_fwd(rt, TN(0, out_), TN(1, probs_), TN(2, qkv_), B, T_, NH_, KV_, HD_, causal,
                                 cu_drop(rt, first_sample, h_offset, NH_global, step, layer, p));
}
static void cu_attention_dropout_bwd(prt *rt, void *dqkv_, const void *dout_, const void *qkv_, const void *probs_,
                                     int64_t B, int64_t T_, int64_t NH_, int64_t KV_, int64_t HD_, int64_t causal,
                                     int64_t first_sample, int64_t h_offset, int64_t NH_global, int64_t step,
                                     int64_t layer, double p, int64_t dtypes) {
    if (prt_word_writes(dtypes, 0)) cu_zero(rt, dqkv_, B * T_ * (NH_ + 2 * KV_) * HD_, dtypes);  /* PRT_ARG_WRITE */
    prt_cu_attention_dropout_bwd(rt, TN(0, dqkv_), TN(1, dout_), TN(2, qkv_), TN(3, probs_), B, T_, NH_, KV_, HD_, causal,
                                 cu_drop(rt, first_sample, h_offset, NH_global, step, layer, p));
}
/* The CUDA kernels compute every query row of the qkv: Tq = T, q0 = 0 (the
 * op-shape check at start-up refuses a program that asks for fewer). */
static void cu_attention_rows(const char *op, int64_t T, int64_t Tq, int64_t q0) {
    PRT_CHECK(Tq == T && q0 == 0,
              "%s: query rows %lld .. %lld of %lld: the CUDA kernels compute every row (context parallelism runs "
              "on the CPU runtime)", op, (long long)q0, (long long)(q0 + Tq), (long long)T);
}
static void cu_attention_fwd(prt *rt, void *out_, void *probs_, const void *qkv_, int64_t B, int64_t T_, int64_t NH_,
                             int64_t KV_, int64_t HD_, int64_t causal, int64_t Tq, int64_t q0, int64_t dtypes) {
    cu_attention_rows("attention_fwd", T_, Tq, q0);
    prt_cu_attention_fwd(rt, TN(0, out_), TN(1, probs_), TN(2, qkv_), B, T_, NH_, KV_, HD_, causal);
}
static void cu_attention_bwd(prt *rt, void *dqkv_, const void *dout_, const void *qkv_, const void *probs_, int64_t B,
                             int64_t T_, int64_t NH_, int64_t KV_, int64_t HD_, int64_t causal, int64_t Tq, int64_t q0,
                             int64_t dtypes) {
    cu_attention_rows("attention_bwd", T_, Tq, q0);
    if (prt_word_writes(dtypes, 0)) cu_zero(rt, dqkv_, B * T_ * (NH_ + 2 * KV_) * HD_, dtypes);  /* PRT_ARG_WRITE */
    prt_cu_attention_bwd(rt, TN(0, dqkv_), TN(1, dout_), TN(2, qkv_), TN(3, probs_), B, T_, NH_, KV_, HD_, causal);
}
static void cu_ring_kv_pack(prt *rt, void *kv, const void *qkv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                            int64_t HD, int64_t dtypes) {
    prt_cu_ring_kv_move(rt, TN(1, qkv), TN(0, kv), B, T, NH, KV, HD, 1);
}
static void cu_ring_kv_grad(prt *rt, void *dqkv, const void *dkv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                            int64_t HD, int64_t dtypes) {
    prt_cu_ring_kv_move(rt, TN(0, dqkv), TN(1, dkv), B, T, NH, KV, HD, 0);
}
static void cu_seq_permute(prt *rt, void *dst, const void *src, int64_t B, int64_t T, int64_t W, int64_t zz,
                           int64_t inverse, int64_t dtypes) {
    prt_cu_seq_permute(rt, TN(0, dst), TN(1, src), B, T, W, zz, (int)inverse);
}
static void cu_seq_halves(prt *rt, void *seq, void *half0, void *half1, int64_t B, int64_t h, int64_t C, int64_t join,
                          int64_t dtypes) {
    prt_cu_seq_halves(rt, TN(0, seq), TN(1, half0), TN(2, half1), B, h, C, (int)join);
}
static void cu_ring_attention_fwd(prt *rt, void *out, void *lse, const void *qkv, const void *kv, int64_t B, int64_t T,
                                  int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t coord, int64_t step,
                                  int64_t P, int64_t balanced, int64_t dtypes) {
    prt_cu_ring_attention_fwd(rt, TN(0, out), TN(1, lse), TN(2, qkv), TN(3, kv), B, T, NH, KV, HD, causal, coord, step,
                              P, balanced);
}
static void cu_ring_attention_bwd(prt *rt, void *dqkv, void *dkv, const void *dout, const void *out, const void *lse,
                                  const void *qkv, const void *kv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                                  int64_t HD, int64_t causal, int64_t coord, int64_t step, int64_t P, int64_t balanced,
                                  int64_t dtypes) {
    prt_cu_ring_attention_bwd(rt, TN(0, dqkv), TN(1, dkv), TN(2, dout), TN(3, out), TN(4, lse), TN(5, qkv), TN(6, kv),
                              B, T, NH, KV, HD, causal, coord, step, P, balanced);
}
static void cu_xent_bwd(prt *rt, void *dlogits_, const void *logits_, const void *stats_, const void *targets_,
                        int64_t N, int64_t V_local, int64_t vocab_offset, double scale, int64_t dtypes) {
    prt_cu_xent_bwd(rt, TN(0, dlogits_), TN(1, logits_), TN(2, stats_), FIXED(3, targets_, PRT_I32), N, V_local,
                    vocab_offset, scale, prt_word_writes(dtypes, 0));
}
static void cu_adamw(prt *rt, void *param_, void *master_, const void *grad_, void *m_, void *v_, int64_t n,
                     int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay,
                     int64_t dtypes) {
    prt_cu_adamw(rt, TN(0, param_), TN(1, master_), TN(2, grad_), TN(3, m_), TN(4, v_), n, step, lr, beta1, beta2, eps,
                 weight_decay);
}
static void cu_sgd(prt *rt, void *param_, void *master_, const void *grad_, void *mom_, int64_t n, double lr,
                   double momentum, double weight_decay, int64_t dtypes) {
    prt_cu_sgd(rt, TN(0, param_), TN(1, master_), TN(2, grad_), TN(3, mom_), n, lr, momentum, weight_decay);
}

static void cu_xent_fwd(prt *rt, void *loss_sum, void *stats, const void *logits, const void *targets, int64_t N,
                        int64_t V_local, int64_t vocab_offset, int64_t axis, int64_t dtypes) {
    prt_ten lg = TN(2, logits);
    prt_dump_logits(rt, lg.p, lg.dtype, N, V_local, vocab_offset, axis);
    prt_count_step_loss(rt, axis, prt_cu_xent_fwd(rt, TN(0, loss_sum), TN(1, stats), lg, FIXED(3, targets, PRT_I32), N,
                                                  V_local, vocab_offset, axis));
}

/* The mixture-of-experts ops (prt_cuda_moe.cu); i32 tensors are FIXED. */
#define I32(index, p) ((int32_t *)FIXED((index), (p), PRT_I32))
static void cu_moe_router_fwd(prt *rt, void *logits, void *index, void *weight, void *counts, void *losses,
                              const void *x, const void *wr, int64_t T, int64_t H, int64_t E, int64_t topk,
                              int64_t sigmoid, double aux_coef, double z_coef, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_router_fwd", T, H, E, topk);
    prt_cu_moe_router_fwd(rt, TN(0, logits), I32(1, index), TN(2, weight), I32(3, counts), TN(4, losses), TN(5, x),
                          TN(6, wr), T, H, E, topk, (int)sigmoid, aux_coef, z_coef);
}
static void cu_moe_router_loss(prt *rt, void *losses, const void *logits, const void *index, const void *counts,
                               int64_t T, int64_t E, int64_t topk, int64_t sigmoid, double aux_coef, double z_coef,
                               int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_router_loss", T, E, topk);
    (void)index;
    prt_cu_moe_router_loss(rt, TN(0, losses), TN(1, logits), I32(3, counts), T, E, topk, (int)sigmoid, aux_coef,
                           z_coef);
}
static void cu_moe_router_bwd(prt *rt, void *dx, void *dwr, void *dlogits, const void *dweight, const void *logits,
                              const void *index, const void *counts, const void *x, const void *wr, int64_t T,
                              int64_t H, int64_t E, int64_t topk, int64_t sigmoid, double aux_coef, double z_coef,
                              int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_router_bwd", T, H, E, topk);
    prt_cu_moe_router_bwd(rt, TN(0, dx), TN(1, dwr), TN(2, dlogits), TN(3, dweight), TN(4, logits),
                          I32(5, index), I32(6, counts), TN(7, x), TN(8, wr), T, H, E, topk, (int)sigmoid, aux_coef,
                          z_coef, prt_word_writes(dtypes, 0));
}
static void cu_moe_permute_fwd(prt *rt, void *out, void *offsets, void *rows, const void *in, const void *index,
                               int64_t T, int64_t H, int64_t E, int64_t topk, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_permute_fwd", T, H, E, topk);
    prt_cu_moe_permute_fwd(rt, TN(0, out), I32(1, offsets), I32(2, rows), TN(3, in), I32(4, index), T, H, E, topk);
}
static void cu_moe_permute_bwd(prt *rt, void *din, const void *dout, const void *rows, int64_t T, int64_t H,
                               int64_t topk, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_permute_bwd", T, H, topk);
    prt_cu_moe_permute_bwd(rt, TN(0, din), TN(1, dout), I32(2, rows), T, H, topk, prt_word_writes(dtypes, 0));
}
static void cu_moe_matmul_fwd(prt *rt, void *out, const void *in, const void *w, const void *offsets, int64_t E,
                              int64_t K, int64_t M, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_matmul_fwd", E, K, M);
    prt_cu_moe_matmul_fwd(rt, TN(0, out), TN(1, in), TN(2, w), I32(3, offsets), E, K, M);
}
static void cu_moe_matmul_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w,
                              const void *offsets, int64_t E, int64_t K, int64_t M, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_matmul_bwd", E, K, M);
    prt_cu_moe_matmul_bwd(rt, TN(0, din), TN(1, dw), TN(2, dout), TN(3, in), TN(4, w), I32(5, offsets), E, K, M);
}
static void cu_moe_combine_fwd(prt *rt, void *out, const void *y, const void *weight, const void *rows, int64_t T,
                               int64_t H, int64_t topk, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_combine_fwd", T, H, topk);
    prt_cu_moe_combine_fwd(rt, TN(0, out), TN(1, y), TN(2, weight), I32(3, rows), T, H, topk);
}
static void cu_moe_combine_bwd(prt *rt, void *dy, void *dweight, const void *dout, const void *y, const void *weight,
                               const void *rows, int64_t T, int64_t H, int64_t topk, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_combine_bwd", T, H, topk);
    prt_cu_moe_combine_bwd(rt, TN(0, dy), TN(1, dweight), TN(2, dout), TN(3, y), TN(4, weight), I32(5, rows), T, H,
                           topk, prt_word_writes(dtypes, 0), prt_word_writes(dtypes, 1));
}

static void cu_moe_rank_rows(prt *rt, void *send_rows, const void *counts, int64_t S, int64_t E, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_rank_rows", S, E);
    prt_cu_moe_rank_rows(rt, I32(0, send_rows), I32(1, counts), S, E);
}
static void cu_moe_counts(prt *rt, const void *counts, int64_t E, int64_t layer, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_counts", E, layer);
    prt_cu_moe_counts(rt, I32(0, counts), E, layer);
}
static void cu_moe_loss_add(prt *rt, const void *losses, double scale, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_loss_add", (int64_t)scale);
    prt_cu_moe_loss_add(rt, TN(0, losses), scale);
}
static void cu_moe_regroup_fwd(prt *rt, void *out, void *offsets, const void *in, const void *counts, int64_t S,
                               int64_t El, int64_t H, int64_t to_expert, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_regroup_fwd", S, El, H, to_expert);
    prt_cu_moe_regroup_fwd(rt, TN(0, out), offsets ? I32(1, offsets) : NULL, TN(2, in), I32(3, counts), S, El, H,
                           (int)to_expert);
}
static void cu_moe_regroup_bwd(prt *rt, void *din, const void *dout, const void *counts, int64_t S, int64_t El,
                               int64_t H, int64_t to_expert, int64_t dtypes) {
    PRT_CUDA_REQUIRE(rt, "moe_regroup_bwd", S, El, H, to_expert);
    prt_cu_moe_regroup_bwd(rt, TN(0, din), TN(1, dout), I32(2, counts), S, El, H, (int)to_expert,
                           prt_word_writes(dtypes, 0));
}

/* ---------------------------------------------------------------- memory and lifecycle */

static int cu_available(char *why, size_t why_size) {
    char error[256] = "";
    int n = prt_cuda_probe(error, sizeof error);
    if (n > 0) return 1;
    if (n == 0) snprintf(why, why_size, "no CUDA device is visible to this process");
    else snprintf(why, why_size, "the CUDA driver or toolkit fails: %s", error);
    return 0;
}
static void *cu_alloc_zero(prt *rt, size_t bytes, const char *what) { return prt_cuda_alloc_zero(rt, bytes, what); }
static void cu_free(prt *rt, void *p) { prt_cuda_free(p); }


#define CU_SLOT_OP(name) .name = cu_##name,
#define CU_SLOT_COMM(name) .name = prt_cu_##name,
#define CU_SLOT_HOST(name)
#define CU_SLOT_(X, kind, name, sig, params, args) CU_SLOT_##kind(name)

const prt_backend prt_backend_cuda = {
    .name = "cuda",
    .description = "every op on the GPU, one rank per GPU (PRT_COLLECTIVES=nccl|mpi, see docs/gpu.md)",
    .host_memory = 0,
    .available = cu_available,
    .init = prt_cuda_init,
    .finalize = prt_cuda_finalize,
    .sync = prt_cuda_sync,
    .alloc_zero = cu_alloc_zero,
    .free = cu_free,
    .upload = prt_cuda_h2d,
    .download = prt_cuda_d2h,
    .copy_bytes = prt_cu_copy_bytes,
    .comm_wait = prt_cu_comm_wait,
    .memory_bytes = prt_cuda_memory_bytes,
    PRT_CALLS(CU_SLOT_, _)
};
