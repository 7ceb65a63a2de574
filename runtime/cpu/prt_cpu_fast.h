/*
 * prt_cpu_fast.h — the fp32 paths of the CPU backend's non-GEMM ops, threaded
 * across the rank's cores (OpenMP, as many threads as the BLAS uses) and written
 * so GCC vectorises them (prt_cpu_fast.c).  prt_cpu_ops.c calls them when every
 * float argument of an op is stored as fp32 and keeps its own loops, through
 * prt_load/prt_store, for 16-bit storage.  Same semantics as those loops
 * (parc_rt.h): forward ops overwrite, backward ops accumulate (into din, or
 * write it when `write` is set: PRT_ARG_WRITE).  Results do not
 * depend on the thread count: a row is one thread's, and sums over rows (bias
 * and embedding gradients) are split by column and run over the rows in order;
 * the norms' weight gradients sum fixed blocks of rows (set by N alone) in row
 * order, then the blocks in order.  Sums along a row are vector-lane partial
 * sums: of doubles for the norms' statistics and cross-entropy's sum of
 * exponentials, as the 16-bit paths sum in double, so both give the same fp32
 * results.
 */
#ifndef PRT_CPU_FAST_H
#define PRT_CPU_FAST_H

#include <stddef.h>
#include <stdint.h>

/* On a function: build it for AVX-512, AVX2 and the x86-64 baseline, the widest
 * the CPU runs chosen when the program loads (GCC's target_clones, an ifunc).
 * Empty where the compiler or the target has no such clones. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define PRT_FAST_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PRT_FAST_CLONES
#endif

/* The threads an op may use: the BLAS's (OPENBLAS_NUM_THREADS, or 1 per rank
 * when ranks share a node). */
int prt_cpu_threads(void);

/* bytes of buf set to 0, in 64-byte-line ranges, one per thread. */
void prt_fast_zero(void *buf, size_t bytes);
/* bytes of src copied to dst the same way; overlapping ranges: one memmove. */
void prt_fast_copy(void *dst, const void *src, size_t bytes);

void prt_fast_layernorm_fwd(float *out, float *mean, float *rstd, const float *in, const float *w, const float *b,
                            int64_t N, int64_t C, double eps);
void prt_fast_layernorm_bwd(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                            const float *mean, const float *rstd, int64_t N, int64_t C, int write);
void prt_fast_rmsnorm_fwd(float *out, float *rstd, const float *in, const float *w, int64_t N, int64_t C, double eps);
void prt_fast_rmsnorm_bwd(float *din, float *dw, const float *dout, const float *in, const float *w,
                          const float *rstd, int64_t N, int64_t C, int write);

/* Cross-entropy pieces: each row's max, then sum_j exp(x_j - max[n]) and the
 * target's logit (0 when the target is outside this rank's vocab slice). */
void prt_fast_row_max(float *mx, const float *logits, int64_t N, int64_t V);
void prt_fast_row_sumexp(float *sums, float *target_logit, const float *logits, const float *mx,
                         const int32_t *targets, int64_t N, int64_t V, int64_t vocab_offset);
/* The two above in one pass over each row (while it is in cache), where no
 * all-reduce of the maxima comes between them: the same results. */
void prt_fast_row_max_sumexp(float *mx, float *sums, float *target_logit, const float *logits, const int32_t *targets,
                             int64_t N, int64_t V, int64_t vocab_offset);
/* dlogits += scale (exp(x - lse) - onehot(target)), lse = stats[2n + 1]. */
void prt_fast_xent_bwd(float *dlogits, const float *logits, const float *stats, const int32_t *targets, int64_t N,
                       int64_t V, int64_t vocab_offset, float scale, int write);

/* Attention's softmax on r rows of scores S (rows ld apart), in place and on
 * the calling thread (attention's workers are threads already): row i over
 * its keys 0 .. last_i, last_i = i0 + i when causal, else n - 1; its max
 * subtracted, exponentials prt_expf_fast's summed in double lanes; columns
 * last_i + 1 .. zero_to - 1 set to exactly 0. */
void prt_fast_softmax_rows(float *S, int64_t ld, int64_t r, int64_t n, int64_t i0, int causal, int64_t zero_to);
/* Its backward in place in dP (rows n apart) from P (rows ld apart), r rows
 * of n columns: dP = P * (dP - rowsum(P * dP)), the row sums in double lanes. */
void prt_fast_softmax_bwd_rows(float *dP, const float *P, int64_t ld, int64_t r, int64_t n);

void prt_fast_gelu_fwd(float *out, const float *in, int64_t n);
void prt_fast_gelu_bwd(float *din, const float *in, const float *dout, int64_t n, int write);
void prt_fast_swiglu_fwd(float *out, const float *in, int64_t N, int64_t F);
void prt_fast_swiglu_bwd(float *din, const float *in, const float *dout, int64_t N, int64_t F, int write);

void prt_fast_bias_fwd(float *out, const float *in, const float *b, int64_t N, int64_t M);
void prt_fast_bias_bwd(float *db, const float *dout, int64_t N, int64_t M);
/* out[n * ld + j] = row[j] for n < N, j < M (a broadcast bias row) */
void prt_fast_rows_fill(float *out, int64_t ld, const float *row, int64_t N, int64_t M);
void prt_fast_add(float *out, const float *a, const float *b, int64_t n);   /* out = a + b (out may be a or b) */
/* sum of x[i]^2 in double; the same bits whatever the thread count (blocks fixed by n) */
double prt_fast_sumsq(const float *x, int64_t n);
void prt_fast_embed_fwd(float *out, const int32_t *tokens, const float *wte, int64_t N, int64_t C,
                        int64_t vocab_local, int64_t vocab_offset);
void prt_fast_embed_bwd(float *dwte, const int32_t *tokens, const float *dout, int64_t N, int64_t C,
                        int64_t vocab_local, int64_t vocab_offset);

/* AdamW over n fp32 elements, no master copy (prt_math.h's update, fused in one pass). */
void prt_fast_adamw(float *param, const float *grad, float *m, float *v, int64_t n, int64_t step, double lr,
                    double beta1, double beta2, double eps, double weight_decay);
/* AdamW with an fp32 master over n bf16 parameters and gradients: the master
 * takes the update, the parameter its bf16 rounding (prt_adamw_element's bits). */
void prt_fast_adamw_bf16(uint16_t *param, float *master, const uint16_t *grad, float *m, float *v, int64_t n,
                         int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay);

#endif
