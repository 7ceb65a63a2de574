/*
 * prt_cuda_backend.c — the CUDA backend's table (prt_backend.h): parc_rt.h's
 * calls adapted to the device ops of prt_cuda_api.h (float tensors with their
 * storage dtype), the device memory hooks and the device probe.
 */
#include <stdio.h>

#include "prt_backend.h"
#include "prt_cuda_api.h"

/* A float tensor argument with its storage dtype (prt_dtype_of; unregistered
 * memory is fp32). */
static prt_ten tn(prt *rt, const void *p, const char *op) {
    int64_t dtype = prt_dtype_of(rt, p);
    PRT_CHECK(dtype != PRT_I32, "%s: a float tensor argument points into an i32 buffer", op);
    return (prt_ten){(void *)p, dtype < 0 ? PRT_F32 : dtype};
}
#define TN(p) tn(rt, (p), __func__)

static void cu_zero(prt *rt, void *buf, int64_t n) {
    prt_cu_zero(rt, TN(buf), n, prt_dtype_size(TN(buf).dtype));
}
static void cu_copy(prt *rt, void *dst_, const void *src_, int64_t n) {
    prt_cu_copy(rt, TN(dst_), TN(src_), n);
}
static void cu_acc(prt *rt, void *dst_, const void *src_, int64_t n) {
    prt_cu_acc(rt, TN(dst_), TN(src_), n);
}
static void cu_sumsq(prt *rt, void *acc_, const void *x_, int64_t n, double weight) {
    prt_cu_sumsq(rt, TN(acc_), TN(x_), n, weight);
}
static void cu_scale(prt *rt, void *x_, int64_t n, double factor) { prt_cu_scale(rt, TN(x_), n, factor); }
static void cu_embed_fwd(prt *rt, void *out_, const void *tokens_, const void *wte_, int64_t N, int64_t C,
                         int64_t vocab_local, int64_t vocab_offset) {
    prt_cu_embed_fwd(rt, TN(out_), tokens_, TN(wte_), N, C, vocab_local, vocab_offset);
}
static void cu_embed_bwd(prt *rt, void *dwte_, const void *tokens_, const void *dout_, int64_t N, int64_t C,
                         int64_t vocab_local, int64_t vocab_offset) {
    prt_cu_embed_bwd(rt, TN(dwte_), tokens_, TN(dout_), N, C, vocab_local, vocab_offset);
}
static void cu_pos_fwd(prt *rt, void *out_, const void *in_, const void *wpe_, int64_t B, int64_t T, int64_t C,
                       int64_t t_offset) {
    prt_cu_pos_fwd(rt, TN(out_), TN(in_), TN(wpe_), B, T, C, t_offset);
}
static void cu_pos_bwd(prt *rt, void *dwpe_, void *din_, const void *dout_, int64_t B, int64_t T, int64_t C,
                       int64_t t_offset) {
    prt_cu_pos_bwd(rt, TN(dwpe_), TN(din_), TN(dout_), B, T, C, t_offset);
}
static void cu_layernorm_fwd(prt *rt, void *out_, void *mean_, void *rstd_, const void *in_, const void *w_,
                             const void *b_, int64_t N, int64_t C) {
    prt_cu_layernorm_fwd(rt, TN(out_), TN(mean_), TN(rstd_), TN(in_), TN(w_), TN(b_), N, C);
}
static void cu_layernorm_bwd(prt *rt, void *din_, void *dw_, void *db_, const void *dout_, const void *in_,
                             const void *w_, const void *mean_, const void *rstd_, int64_t N, int64_t C) {
    prt_cu_layernorm_bwd(rt, TN(din_), TN(dw_), TN(db_), TN(dout_), TN(in_), TN(w_), TN(mean_), TN(rstd_), N, C);
}
static void cu_rmsnorm_fwd(prt *rt, void *out_, void *rstd_, const void *in_, const void *w_, int64_t N, int64_t C) {
    prt_cu_rmsnorm_fwd(rt, TN(out_), TN(rstd_), TN(in_), TN(w_), N, C);
}
static void cu_rmsnorm_bwd(prt *rt, void *din_, void *dw_, const void *dout_, const void *in_, const void *w_,
                           const void *rstd_, int64_t N, int64_t C) {
    prt_cu_rmsnorm_bwd(rt, TN(din_), TN(dw_), TN(dout_), TN(in_), TN(w_), TN(rstd_), N, C);
}
static void cu_matmul_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M) {
    prt_cu_matmul_fwd(rt, TN(out), TN(in), TN(w), N, K, M, 0);
}
static void cu_matmul_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, int64_t N,
                          int64_t K, int64_t M) {
    prt_cu_matmul_bwd(rt, TN(din), TN(dw), TN(dout), TN(in), TN(w), N, K, M, 0);
}
static void cu_matmul_t_fwd(prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K, int64_t M) {
    prt_cu_matmul_fwd(rt, TN(out), TN(in), TN(w), N, K, M, 1);
}
static void cu_matmul_t_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, int64_t N,
                            int64_t K, int64_t M) {
    prt_cu_matmul_bwd(rt, TN(din), TN(dw), TN(dout), TN(in), TN(w), N, K, M, 1);
}
/* the GEMM, then the bias added in place (out may equal in for bias_fwd) */
static void cu_matmul_bias_fwd(prt *rt, void *out, const void *in, const void *w, const void *b, int64_t N, int64_t K,
                               int64_t M) {
    prt_cu_matmul_fwd(rt, TN(out), TN(in), TN(w), N, K, M, 0);
    prt_cu_bias_fwd(rt, TN(out), TN(out), TN(b), N, M);
}
static void cu_matmul_bias_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w, void *db,
                               int64_t N, int64_t K, int64_t M) {
    if (db) prt_cu_bias_bwd(rt, TN(db), TN(dout), N, M);
    prt_cu_matmul_bwd(rt, TN(din), TN(dw), TN(dout), TN(in), TN(w), N, K, M, 0);
}
static void cu_bias_fwd(prt *rt, void *out_, const void *in_, const void *b_, int64_t N, int64_t M) {
    prt_cu_bias_fwd(rt, TN(out_), TN(in_), TN(b_), N, M);
}
static void cu_bias_bwd(prt *rt, void *db_, const void *dout_, int64_t N, int64_t M) {
    prt_cu_bias_bwd(rt, TN(db_), TN(dout_), N, M);
}
static void cu_gelu_fwd(prt *rt, void *out_, const void *in_, int64_t n) {
    prt_cu_gelu_fwd(rt, TN(out_), TN(in_), n);
}
static void cu_gelu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n) {
    prt_cu_gelu_bwd(rt, TN(din_), TN(in_), TN(dout_), n);
}
static void cu_relu_fwd(prt *rt, void *out_, const void *in_, int64_t n) {
    prt_cu_relu_fwd(rt, TN(out_), TN(in_), n);
}
static void cu_relu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t n) {
    prt_cu_relu_bwd(rt, TN(din_), TN(in_), TN(dout_), n);
}
static void cu_swiglu_fwd(prt *rt, void *out_, const void *in_, int64_t N, int64_t F) {
    prt_cu_swiglu_fwd(rt, TN(out_), TN(in_), N, F);
}
static void cu_swiglu_bwd(prt *rt, void *din_, const void *in_, const void *dout_, int64_t N, int64_t F) {
    prt_cu_swiglu_bwd(rt, TN(din_), TN(in_), TN(dout_), N, F);
}
static void cu_add_fwd(prt *rt, void *out_, const void *a_, const void *b_, int64_t n) {
    prt_cu_add_fwd(rt, TN(out_), TN(a_), TN(b_), n);
}
static void cu_kv_repeat_fwd(prt *rt, void *out_, const void *in_, int64_t N, int64_t KV, int64_t G, int64_t HD) {
    prt_cu_kv_repeat_fwd(rt, TN(out_), TN(in_), N, KV, G, HD);
}
static void cu_kv_repeat_bwd(prt *rt, void *din_, const void *dout_, int64_t N, int64_t KV, int64_t G, int64_t HD) {
    prt_cu_kv_repeat_bwd(rt, TN(din_), TN(dout_), N, KV, G, HD);
}
static void cu_dropout_fwd(prt *rt, void *out_, void *mask_, const void *in_, int64_t B, int64_t T, int64_t C,
                           int64_t first_sample, int64_t t_offset, int64_t T_global, int64_t step, int64_t layer,
                           int64_t site, double p) {
    PRT_CHECK(p >= 0 && p < 1 && prt_dtype_of(rt, mask_) == PRT_U8, "dropout_fwd: p = %g, the mask must be a u8 buffer",
              p);
    if (rt->eval_active) p = 0; /* evaluation runs the model without dropout */
    prt_cu_dropout_fwd(rt, TN(out_), (uint8_t *)mask_, TN(in_), B, T, C, first_sample, t_offset, T_global,
                       prt_dropout_key(rt->plan.seed, step, layer, site), prt_dropout_threshold(p),
                       prt_dropout_scale(p));
}
static void cu_dropout_bwd(prt *rt, void *din_, const void *mask_, const void *dout_, int64_t n, double p) {
    PRT_CHECK(p >= 0 && p < 1 && prt_dtype_of(rt, mask_) == PRT_U8, "dropout_bwd: p = %g, the mask must be a u8 buffer",
              p);
    prt_cu_dropout_bwd(rt, TN(din_), (const uint8_t *)mask_, TN(dout_), n, prt_dropout_scale(p));
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
                                     int64_t NH_, int64_t HD_, int64_t causal, int64_t first_sample, int64_t h_offset,
                                     int64_t NH_global, int64_t step, int64_t layer, double p) {
    prt_cu_attention_dropout_fwd(rt, TN(out_), TN(probs_), TN(qkv_), B, T_, NH_, HD_, causal,
                                 cu_drop(rt, first_sample, h_offset, NH_global, step, layer, p));
}
static void cu_attention_dropout_bwd(prt *rt, void *dqkv_, const void *dout_, const void *qkv_, const void *probs_,
                                     int64_t B, int64_t T_, int64_t NH_, int64_t HD_, int64_t causal,
                                     int64_t first_sample, int64_t h_offset, int64_t NH_global, int64_t step,
                                     int64_t layer, double p) {
    prt_cu_attention_dropout_bwd(rt, TN(dqkv_), TN(dout_), TN(qkv_), TN(probs_), B, T_, NH_, HD_, causal,
                                 cu_drop(rt, first_sample, h_offset, NH_global, step, layer, p));
}
static void cu_attention_fwd(prt *rt, void *out_, void *probs_, const void *qkv_, int64_t B, int64_t T_, int64_t NH_,
                             int64_t HD_, int64_t causal) {
    prt_cu_attention_fwd(rt, TN(out_), TN(probs_), TN(qkv_), B, T_, NH_, HD_, causal);
}
static void cu_attention_bwd(prt *rt, void *dqkv_, const void *dout_, const void *qkv_, const void *probs_, int64_t B,
                             int64_t T_, int64_t NH_, int64_t HD_, int64_t causal) {
    prt_cu_attention_bwd(rt, TN(dqkv_), TN(dout_), TN(qkv_), TN(probs_), B, T_, NH_, HD_, causal);
}
static void cu_xent_bwd(prt *rt, void *dlogits_, const void *logits_, const void *stats_, const void *targets_,
                        int64_t N, int64_t V_local, int64_t vocab_offset, double scale) {
    prt_cu_xent_bwd(rt, TN(dlogits_), TN(logits_), TN(stats_), targets_, N, V_local, vocab_offset, scale);
}
static void cu_adamw(prt *rt, void *param_, void *master_, const void *grad_, void *m_, void *v_, int64_t n,
                     int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay) {
    prt_cu_adamw(rt, TN(param_), TN(master_), TN(grad_), TN(m_), TN(v_), n, step, lr, beta1, beta2, eps, weight_decay);
}
static void cu_sgd(prt *rt, void *param_, void *master_, const void *grad_, void *mom_, int64_t n, double lr,
                   double momentum, double weight_decay) {
    prt_cu_sgd(rt, TN(param_), TN(master_), TN(grad_), TN(mom_), n, lr, momentum, weight_decay);
}

static void cu_xent_fwd(prt *rt, void *loss_sum, void *stats, const void *logits, const void *targets, int64_t N,
                        int64_t V_local, int64_t vocab_offset, int64_t axis) {
    prt_ten lg = TN(logits);
    prt_dump_logits(rt, lg.p, lg.dtype, N, V_local, vocab_offset, axis);
    prt_count_step_loss(rt, axis, prt_cu_xent_fwd(rt, TN(loss_sum), TN(stats), lg, targets, N, V_local, vocab_offset,
                                                  axis));
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
    PRT_CALLS(CU_SLOT_, _)
};
