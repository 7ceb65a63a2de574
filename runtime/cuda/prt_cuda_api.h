/*
 * prt_cuda_api.h — the C interface of the CUDA backend (runtime/cuda/): device
 * state, memory, and every op and collective on device tensors.  The backend
 * table (prt_cuda_backend.c) adapts parc_rt.h's calls to these; the GPU tests
 * (tests/gpu/) call them directly to compare them with the CPU reference.
 */
#ifndef PRT_CUDA_API_H
#define PRT_CUDA_API_H

#include "prt_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device memory is addressed by plain pointers (unified addressing), so the
 * runtime's dtype check (prt_arg_dtype) finds device buffers too. */

/* The number of CUDA devices this process sees: 0 when the driver reports none
 * (cudaErrorNoDevice), -1 on any other CUDA error, whose name (e.g.
 * "cudaErrorInsufficientDriver: ...") is written to error. */
int prt_cuda_probe(char *error, size_t error_size);
int prt_cuda_device_count(void);          /* prt_cuda_probe's count, 0 on an error */
/* Picks device (local rank % devices), creates the streams, the cuBLAS handle and,
 * for collectives over NCCL, one communicator per mesh axis of size > 1 (every axis
 * when PRT_COLLECTIVES=nccl is set).  Needs the axis communicators (after prt_init's
 * mesh).  Independent of rt->device, so tests can drive both backends. */
void prt_cuda_init(prt *rt);
void prt_cuda_finalize(prt *rt);          /* frees the device scratch, destroys comms and handles */
void prt_cuda_sync(prt *rt);              /* waits for every op issued so far */
const char *prt_cuda_collectives(prt *rt);   /* "nccl" or "mpi" */
char *prt_cuda_alloc_zero(prt *rt, size_t bytes, const char *what);   /* cudaMalloc + zero; not booked */
void prt_cuda_free(void *p);
size_t prt_cuda_memory_bytes(prt *rt);     /* the device's memory (cudaMemGetInfo's total) */
/* Copies ordered after every op issued so far; they return when the copy is done. */
void prt_cuda_h2d(prt *rt, void *dst, const void *src, size_t bytes);
void prt_cuda_d2h(prt *rt, void *dst, const void *src, size_t bytes);
void prt_cuda_memset(prt *rt, void *dst, int byte, size_t bytes);
/* A malloc'ed host copy of `bytes` device bytes (the caller frees it). */
void *prt_cuda_host_copy(prt *rt, const void *dev, size_t bytes);
/* Refuses (prt_fail) an op whose shape the kernels do not take on this device,
 * naming the op, its shape and the limit (prt_cuda_shape_ok); before any launch. */
void prt_cuda_require_shape(prt *rt, const char *op, int nargs, const int64_t *args);
#define PRT_CUDA_REQUIRE(rt, op, ...)                                                          \
    do {                                                                                       \
        const int64_t prt_shape_[] = {__VA_ARGS__};                                            \
        prt_cuda_require_shape(rt, op, (int)(sizeof prt_shape_ / sizeof prt_shape_[0]), prt_shape_); \
    } while (0)
/* Device scratch, booked like prt_workspace / prt_comm_stage (grows to exactly the
 * largest request, contents lost on growth). */
float *prt_cuda_workspace(prt *rt, size_t floats);
size_t prt_cuda_workspace_floats(prt *rt);   /* its present size: what a call can take without growing it */
void prt_cuda_blas_workspace(prt *rt);      /* lends cuBLAS that workspace before a GEMM */
char *prt_cuda_comm_stage(prt *rt, size_t bytes);

/* The ops on the device: parc_rt.h's semantics, float tensors as prt_ten. */
void prt_cu_zero(prt *rt, prt_ten buf, int64_t n, size_t esize);
void prt_cu_copy(prt *rt, prt_ten dst, prt_ten src, int64_t n);
void prt_cu_acc(prt *rt, prt_ten dst, prt_ten src, int64_t n);
void prt_cu_sumsq(prt *rt, prt_ten acc, prt_ten x, int64_t n, double weight);
void prt_cu_scale(prt *rt, prt_ten x, int64_t n, double factor);
void prt_cu_embed_fwd(prt *rt, prt_ten out, const int32_t *tokens, prt_ten wte, int64_t N, int64_t C,
                      int64_t vocab_local, int64_t vocab_offset);
void prt_cu_embed_bwd(prt *rt, prt_ten dwte, const int32_t *tokens, prt_ten dout, int64_t N, int64_t C,
                      int64_t vocab_local, int64_t vocab_offset);
void prt_cu_pos_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten wpe, int64_t B, int64_t T, int64_t C, int64_t t_offset,
                    int64_t zz);
void prt_cu_pos_bwd(prt *rt, prt_ten dwpe, prt_ten din, prt_ten dout, int64_t B, int64_t T, int64_t C, int64_t t_offset,
                    int64_t zz,
                    int din_write);
void prt_cu_layernorm_fwd(prt *rt, prt_ten out, prt_ten mean, prt_ten rstd, prt_ten in, prt_ten w, prt_ten b,
                          int64_t N, int64_t C, double eps);
void prt_cu_layernorm_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten db, prt_ten dout, prt_ten in, prt_ten w,
                          prt_ten mean, prt_ten rstd, int64_t N, int64_t C, int write);
void prt_cu_rmsnorm_fwd(prt *rt, prt_ten out, prt_ten rstd, prt_ten in, prt_ten w, int64_t N, int64_t C, double eps);
void prt_cu_rmsnorm_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten dout, prt_ten in, prt_ten w, prt_ten rstd,
                        int64_t N, int64_t C, int write);
void prt_cu_matmul_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten w, int64_t N, int64_t K, int64_t M, int transposed);
void prt_cu_matmul_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten dout, prt_ten in, prt_ten w, int64_t N, int64_t K,
                       int64_t M, int transposed, int din_write, int dw_write);
void prt_cu_bias_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten b, int64_t N, int64_t M);
void prt_cu_bias_bwd(prt *rt, prt_ten db, prt_ten dout, int64_t N, int64_t M);
void prt_cu_gelu_fwd(prt *rt, prt_ten out, prt_ten in, int64_t n);
void prt_cu_gelu_bwd(prt *rt, prt_ten din, prt_ten in, prt_ten dout, int64_t n, int write);
void prt_cu_relu_fwd(prt *rt, prt_ten out, prt_ten in, int64_t n);
void prt_cu_relu_bwd(prt *rt, prt_ten din, prt_ten in, prt_ten dout, int64_t n, int write);
void prt_cu_swiglu_fwd(prt *rt, prt_ten out, prt_ten in, int64_t N, int64_t F);
void prt_cu_swiglu_bwd(prt *rt, prt_ten din, prt_ten in, prt_ten dout, int64_t N, int64_t F, int write);
/* The mixture-of-experts ops (prt_cuda_moe.cu; parc_rt.h's moe_* rows, the
 * i32 tensors as device pointers; `write`: the output is written, not added) */
void prt_cu_moe_router_fwd(prt *rt, prt_ten logits, int32_t *index, prt_ten weight, int32_t *counts, prt_ten losses,
                           prt_ten x, prt_ten wr, int64_t T, int64_t H, int64_t E, int64_t K, int sigmoid,
                           double aux_coef, double z_coef);
void prt_cu_moe_router_loss(prt *rt, prt_ten losses, prt_ten logits, const int32_t *counts, int64_t T, int64_t E,
                            int64_t K, int sigmoid, double aux_coef, double z_coef);
void prt_cu_moe_router_bwd(prt *rt, prt_ten dx, prt_ten dwr, prt_ten dlogits, prt_ten dweight, prt_ten logits,
                           const int32_t *index, const int32_t *counts, prt_ten x, prt_ten wr, int64_t T, int64_t H,
                           int64_t E, int64_t K, int sigmoid, double aux_coef, double z_coef, int dx_write);
void prt_cu_moe_permute_fwd(prt *rt, prt_ten out, int32_t *offsets, int32_t *rows, prt_ten in, const int32_t *index,
                            int64_t T, int64_t H, int64_t E, int64_t K);
void prt_cu_moe_permute_bwd(prt *rt, prt_ten din, prt_ten dout, const int32_t *rows, int64_t T, int64_t H, int64_t K,
                            int write);
void prt_cu_moe_matmul_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten w, const int32_t *offsets, int64_t E, int64_t K,
                           int64_t M);
void prt_cu_moe_matmul_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten dout, prt_ten in, prt_ten w,
                           const int32_t *offsets, int64_t E, int64_t K, int64_t M);
void prt_cu_moe_combine_fwd(prt *rt, prt_ten out, prt_ten y, prt_ten weight, const int32_t *rows, int64_t T, int64_t H,
                            int64_t K);
void prt_cu_moe_combine_bwd(prt *rt, prt_ten dy, prt_ten dweight, prt_ten dout, prt_ten y, prt_ten weight,
                            const int32_t *rows, int64_t T, int64_t H, int64_t K, int dy_write, int dweight_write);
void prt_cu_moe_rank_rows(prt *rt, int32_t *send_rows, const int32_t *counts, int64_t S, int64_t E);
void prt_cu_moe_regroup_fwd(prt *rt, prt_ten out, int32_t *offsets, prt_ten in, const int32_t *counts, int64_t S,
                            int64_t El, int64_t H, int to_expert);
void prt_cu_moe_regroup_bwd(prt *rt, prt_ten din, prt_ten dout, const int32_t *counts, int64_t S, int64_t El, int64_t H,
                            int to_expert, int write);
void prt_cu_moe_counts(prt *rt, const int32_t *counts, int64_t E, int64_t layer);
void prt_cu_moe_loss_add(prt *rt, prt_ten losses, double scale);
/* KV: key/value heads; KV == NH: qkv[B,T,3,NH,HD], else the grouped
 * qkv[B,T,KV,NH/KV+2,HD] (parc_rt.h attention_fwd). */
void prt_cu_attention_fwd(prt *rt, prt_ten out, prt_ten probs, prt_ten qkv, int64_t B, int64_t T, int64_t NH,
                          int64_t KV, int64_t HD, int64_t causal);
void prt_cu_attention_bwd(prt *rt, prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs, int64_t B, int64_t T,
                          int64_t NH, int64_t KV, int64_t HD, int64_t causal);
/* Ring attention (parc_rt.h ring_*; prt_cuda_ring.cu): kv_move packs qkv's k
 * and v into kv (to 1) or adds kv into qkv's k and v columns (to 0). */
void prt_cu_ring_kv_move(prt *rt, prt_ten qkv, prt_ten kv, int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD,
                         int to);
void prt_cu_seq_permute(prt *rt, prt_ten dst, prt_ten src, int64_t B, int64_t T, int64_t W, int64_t zz, int inverse);
void prt_cu_seq_halves(prt *rt, prt_ten seq, prt_ten half0, prt_ten half1, int64_t B, int64_t h, int64_t C, int join);
void prt_cu_ring_attention_fwd(prt *rt, prt_ten out, prt_ten lse, prt_ten qkv, prt_ten kv, int64_t B, int64_t T,
                               int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t coord, int64_t step,
                               int64_t P, int64_t balanced);
void prt_cu_ring_attention_bwd(prt *rt, prt_ten dqkv, prt_ten dkv, prt_ten dout, prt_ten out, prt_ten lse, prt_ten qkv,
                               prt_ten kv, int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                               int64_t coord, int64_t step, int64_t P, int64_t balanced);
/* Dropout on the attention probabilities: where the local block sits in the
 * global mask (parc_rt.h attention_dropout_fwd); on = 0 for none. */
typedef struct prt_cu_drop {
    int on;
    uint32_t threshold;
    float scale;
    uint64_t key;
    int64_t first_sample, h_offset, NH_global;
} prt_cu_drop;
void prt_cu_attention_dropout_fwd(prt *rt, prt_ten out, prt_ten probs, prt_ten qkv, int64_t B, int64_t T,
                                  int64_t NH, int64_t KV, int64_t HD, int64_t causal, prt_cu_drop drop);
void prt_cu_attention_dropout_bwd(prt *rt, prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs, int64_t B,
                                  int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal, prt_cu_drop drop);
/* Dropout of a branch output (prt_cuda_dropout.cu): mask one byte per element. */
void prt_cu_dropout_fwd(prt *rt, prt_ten out, uint8_t *mask, prt_ten in, int64_t B, int64_t T, int64_t C,
                        int64_t first_sample, int64_t t_offset, int64_t T_global, uint64_t key, uint32_t threshold,
                        float scale);
void prt_cu_dropout_bwd(prt *rt, prt_ten din, const uint8_t *mask, prt_ten dout, int64_t n, float scale, int write);
/* The rotary position embedding (prt_cuda_rope.cu); write: the backward writes din. */
void prt_cu_rope_fwd(prt *rt, prt_ten out, prt_ten in, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                     int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                     double high_freq_factor, int64_t original_max_positions);
void prt_cu_rope_bwd(prt *rt, prt_ten din, prt_ten dout, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                     int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                     double high_freq_factor, int64_t original_max_positions, int write);
void prt_cu_add_fwd(prt *rt, prt_ten out, prt_ten a, prt_ten b, int64_t n);
/* Returns the loss (sum over the N rows of -log p(target)); loss_sum += it on the device. */
double prt_cu_xent_fwd(prt *rt, prt_ten loss_sum, prt_ten stats, prt_ten logits, const int32_t *targets, int64_t N,
                       int64_t V_local, int64_t vocab_offset, int64_t axis);
void prt_cu_xent_bwd(prt *rt, prt_ten dlogits, prt_ten logits, prt_ten stats, const int32_t *targets, int64_t N,
                     int64_t V_local, int64_t vocab_offset, double scale, int write);
void prt_cu_adamw(prt *rt, prt_ten param, prt_ten master, prt_ten grad, prt_ten m, prt_ten v, int64_t n, int64_t step,
                  double lr, double beta1, double beta2, double eps, double weight_decay);
void prt_cu_sgd(prt *rt, prt_ten param, prt_ten master, prt_ten grad, prt_ten mom, int64_t n, double lr,
                double momentum, double weight_decay);

/* Collectives on device buffers, axes of size > 1 (NCCL on the communication
 * stream, or host-staged through prt_mpi_*), and the local pieces. */
void prt_cu_allreduce(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype);
void prt_cu_allreduce_ends(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype);
void prt_cu_allgather(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
void prt_cu_reducescatter(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                          int64_t dtype);
/* The started forms (prt_overlap.c).  With NCCL the collective is enqueued on
 * the communication stream after everything issued so far, and an event is
 * recorded after it; the compute stream runs on, and prt_cu_comm_wait (the
 * backend's comm_wait) makes it wait for that event.  Nothing is left for the
 * host to progress.  The host-staged path is the blocking one. */
void prt_cu_allreduce_start(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype);
void prt_cu_allgather_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                            int64_t dtype);
void prt_cu_reducescatter_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                                int64_t dtype);
void prt_cu_comm_wait(prt *rt, const void *buf);
/* n elements to the next rank of the axis, from the one before (a ring step);
 * NCCL: one group of ncclSend/ncclRecv on the communication stream. */
void prt_cu_shift_start(prt *rt, int64_t axis, void *out, const void *in, int64_t n, int64_t dtype);
void prt_cu_alltoall(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
/* Rows of inner elements, a count per peer (device i32 [S]); the host waits for
 * the counts both ways (prt_cuda.cu). */
void prt_cu_alltoallv(prt *rt, int64_t axis, void *out, const void *in, const void *send_rows, void *recv_rows,
                      int64_t out_rows, int64_t inner, int64_t dtype);
void prt_cu_slice(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
void prt_cu_copy_bytes(prt *rt, void *dst, const void *src, size_t bytes);
void prt_cu_send(prt *rt, int64_t axis, int64_t delta, const void *buf, int64_t n, int64_t tag, int64_t dtype);
void prt_cu_recv(prt *rt, int64_t axis, int64_t delta, void *buf, int64_t n, int64_t tag, int64_t dtype);

#ifdef __cplusplus
}
#endif
#endif
