/*
 * prt_cuda_ops.cu — every op of parc_rt.h on the GPU: simple, one-pass CUDA C
 * kernels plus cuBLAS GEMMs, with the CPU path's semantics (cpu/prt_cpu_ops.c) and its element math (prt_math.h):
 * forward ops overwrite, backward ops accumulate; tensors are read and written in
 * their storage dtype (prt_ld / prt_st), arithmetic is fp32 (row reductions in
 * fp64 where the CPU path uses double), and a backward op's += is rounded once.
 *
 * Scratch: only what the ledger already budgets for the CPU path (parc_rt.h,
 * prt_expect_memory), from prt_cuda_workspace:
 *   xent_fwd 3 x N floats (row max, sum of exp, target logit);
 *   attention_bwd: per (sample, head) pair, T floats (D = rowsum(dO * O)) and, when
 *     probs is NULL, T more (the rows' log-sum-exp), for at most T pairs at a time:
 *     at most (probs NULL ? 2 : 1) x T x T floats;
 *   column sums (bias, norm weight gradients) over many rows: partial sums per
 *     block of rows, only as many as the workspace already holds (never grown);
 *   cuBLAS: each GEMM is lent the workspace as it stands (prt_cuda_blas_workspace),
 *     never grown for it; PRT_CUBLAS_WORKSPACE_MB=n gives it n MiB of its own
 *     instead (booked to workspace, beyond the compiler's ledger);
 *   nothing else.
 * Attention (prt_cuda_attention.cu) never materialises a T x T matrix: the forward pass is one kernel with
 * an online softmax (one warp per query row, the head dim split across its lanes,
 * key/value tiles in shared memory); the backward pass recomputes the
 * probabilities in three kernels (row statistics, dQ by query rows, dK and dV
 * by key rows), each accumulating in registers and writing its rows once.
 * Head dims up to 128.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "prt_cuda.h"

#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
#define LD(t, i) prt_ld((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_st((t).p, (t).dtype, (i), (v))

static cudaStream_t stream_of(prt *rt) { return prt_cu(rt)->stream; }

/* Block-wide sums (every thread gets the result); blockDim.x a multiple of 32, <= 1024. */
static __device__ double block_sum_d(double v) {
    __shared__ double part[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    __syncthreads();  /* part[] may still be read by a previous call */
    if (lane == 0) part[warp] = v;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < nwarps; w++) s += part[w];
    return s;
}
static __device__ float block_max_f(float v) {
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    float m = -INFINITY;
    for (int w = 0; w < nwarps; w++) m = fmaxf(m, part[w]);
    return m;
}

/* ---------------------------------------------------------------- element-wise */

static __global__ void k_convert(prt_ten dst, prt_ten src, int64_t n) { GRID_STRIDE(i, n) ST(dst, i, LD(src, i)); }
static __global__ void k_acc(prt_ten dst, prt_ten src, int64_t n) { GRID_STRIDE(i, n) ST(dst, i, LD(dst, i) + LD(src, i)); }
static __global__ void k_add(prt_ten out, prt_ten a, prt_ten b, int64_t n) { GRID_STRIDE(i, n) ST(out, i, LD(a, i) + LD(b, i)); }

/* GELU, SiLU and the SwiGLU gate: prt_math.h's formulas, the CPU reference's. */
static __global__ void k_gelu_fwd(prt_ten out, prt_ten in, int64_t n) { GRID_STRIDE(i, n) ST(out, i, prt_gelu(LD(in, i))); }
static __global__ void k_gelu_bwd(prt_ten din, prt_ten in, prt_ten dout, int64_t n, int write) {
    GRID_STRIDE(i, n) ST(din, i, (write ? 0.0f : LD(din, i)) + prt_gelu_grad(LD(in, i)) * LD(dout, i));
}
static __global__ void k_relu_fwd(prt_ten out, prt_ten in, int64_t n) {
    GRID_STRIDE(i, n) {
        float x = LD(in, i);
        ST(out, i, x > 0.0f ? x : 0.0f);
    }
}
static __global__ void k_relu_bwd(prt_ten din, prt_ten in, prt_ten dout, int64_t n, int write) {
    GRID_STRIDE(i, n) {
        if (LD(in, i) > 0.0f) ST(din, i, (write ? 0.0f : LD(din, i)) + LD(dout, i));
        else if (write) ST(din, i, 0.0f);
    }
}
static __global__ void k_swiglu_fwd(prt_ten out, prt_ten in, int64_t N, int64_t F) {
    GRID_STRIDE(i, N * F) {
        int64_t n = i / F, f = i % F;
        float g = LD(in, n * 2 * F + f), up = LD(in, n * 2 * F + F + f);
        ST(out, i, prt_swiglu(g, up));
    }
}
static __global__ void k_swiglu_bwd(prt_ten din, prt_ten in, prt_ten dout, int64_t N, int64_t F, int write) {
    GRID_STRIDE(i, N * F) {
        int64_t n = i / F, f = i % F, ig = n * 2 * F + f, iu = ig + F;
        float g = LD(in, ig), up = LD(in, iu), d = LD(dout, i);
        ST(din, ig, (write ? 0.0f : LD(din, ig)) + prt_swiglu_dgate(d, g, up));
        ST(din, iu, (write ? 0.0f : LD(din, iu)) + prt_swiglu_dup(d, g));
    }
}
static __global__ void k_bias_fwd(prt_ten out, prt_ten in, prt_ten b, int64_t N, int64_t M) {
    GRID_STRIDE(i, N * M) ST(out, i, LD(in, i) + LD(b, i % M));
}

void prt_cu_zero(prt *rt, prt_ten buf, int64_t n, size_t esize) {
    if (n > 0) PRT_CUDA_CHECK(cudaMemsetAsync(buf.p, 0, (size_t)n * esize, stream_of(rt)));
}
void prt_cu_copy(prt *rt, prt_ten dst, prt_ten src, int64_t n) {
    if (n <= 0) return;
    if (dst.dtype == src.dtype) {
        prt_cu_copy_bytes(rt, dst.p, src.p, (size_t)n * prt_dtype_size(dst.dtype));
        return;
    }
    k_convert<<<prt_cu_blocks(n), PRT_CU_THREADS, 0, stream_of(rt)>>>(dst, src, n);
    PRT_LAUNCH_CHECK();
}
#define ELEMENTWISE(kernel, n, ...)                                           \
    do {                                                                      \
        if ((n) > 0) {                                                        \
            kernel<<<prt_cu_blocks(n), PRT_CU_THREADS, 0, stream_of(rt)>>>(__VA_ARGS__); \
            PRT_LAUNCH_CHECK();                                               \
        }                                                                     \
    } while (0)
void prt_cu_acc(prt *rt, prt_ten dst, prt_ten src, int64_t n) { ELEMENTWISE(k_acc, n, dst, src, n); }
void prt_cu_add_fwd(prt *rt, prt_ten out, prt_ten a, prt_ten b, int64_t n) { ELEMENTWISE(k_add, n, out, a, b, n); }
void prt_cu_gelu_fwd(prt *rt, prt_ten out, prt_ten in, int64_t n) { ELEMENTWISE(k_gelu_fwd, n, out, in, n); }
void prt_cu_gelu_bwd(prt *rt, prt_ten din, prt_ten in, prt_ten dout, int64_t n, int write) {
    ELEMENTWISE(k_gelu_bwd, n, din, in, dout, n, write);
}
void prt_cu_relu_fwd(prt *rt, prt_ten out, prt_ten in, int64_t n) { ELEMENTWISE(k_relu_fwd, n, out, in, n); }
void prt_cu_relu_bwd(prt *rt, prt_ten din, prt_ten in, prt_ten dout, int64_t n, int write) {
    ELEMENTWISE(k_relu_bwd, n, din, in, dout, n, write);
}
void prt_cu_swiglu_fwd(prt *rt, prt_ten out, prt_ten in, int64_t N, int64_t F) {
    ELEMENTWISE(k_swiglu_fwd, N * F, out, in, N, F);
}
void prt_cu_swiglu_bwd(prt *rt, prt_ten din, prt_ten in, prt_ten dout, int64_t N, int64_t F, int write) {
    ELEMENTWISE(k_swiglu_bwd, N * F, din, in, dout, N, F, write);
}
void prt_cu_bias_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten b, int64_t N, int64_t M) {
    ELEMENTWISE(k_bias_fwd, N * M, out, in, b, N, M);
}

/* ---------------------------------------------------------------- column sums */

/* dst[c] += sum over rows n of term(n, c), in fp32, rounded once:
 *   mode 0: dout[n,c]                                  (bias, layernorm db)
 *   mode 1: ((in[n,c] - mean[n]) * rstd[n]) * dout[n,c] (layernorm dw)
 *   mode 2: (in[n,c] * rstd[n]) * dout[n,c]             (rmsnorm dw)
 * Block (x, y): 32 columns x 16 row lanes over rows [y * rows, (y + 1) * rows);
 * lanes summed in a fixed order.  With part NULL (one row block) the block adds
 * its sum to dst; else it writes it to part[y * C + c] and k_colsum_final adds
 * the row blocks' sums in order: deterministic either way. */
#define COLSUM_ROWS 512  /* rows per block when the workspace has room for the partial sums */
static __global__ void k_colsum(int mode, prt_ten dst, float *part, prt_ten dout, prt_ten in, prt_ten mean, prt_ten rstd,
                         int64_t N, int64_t C, int64_t rows) {
    __shared__ float lanes[16][33];
    int64_t c = blockIdx.x * 32 + threadIdx.x, n0 = blockIdx.y * rows, n1 = min(N, n0 + rows);
    float acc = 0.0f;
    if (c < C)
        for (int64_t n = n0 + threadIdx.y; n < n1; n += 16) {
            float g = LD(dout, n * C + c);
            if (mode == 1) g *= (LD(in, n * C + c) - LD(mean, n)) * LD(rstd, n);
            else if (mode == 2) g *= LD(in, n * C + c) * LD(rstd, n);
            acc += g;
        }
    lanes[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float s = 0.0f;
        for (int k = 0; k < 16; k++) s += lanes[k][threadIdx.x];
        if (part) part[blockIdx.y * C + c] = s;
        else ST(dst, c, LD(dst, c) + s);
    }
}
static __global__ void k_colsum_final(prt_ten dst, const float *part, int64_t G, int64_t C) {
    GRID_STRIDE(c, C) {
        float s = 0.0f;
        for (int64_t g = 0; g < G; g++) s += part[g * C + c];
        ST(dst, c, LD(dst, c) + s);
    }
}
/* Row blocks: N / COLSUM_ROWS of them (at most 65,535, the grid's y limit) when
 * the device workspace already holds their partial sums (it is not grown: the
 * ledger budgets no scratch for these ops), else one. */
static void colsum(prt *rt, int mode, prt_ten dst, prt_ten dout, prt_ten in, prt_ten mean, prt_ten rstd, int64_t N,
                   int64_t C) {
    if (!dst.p || C <= 0 || N <= 0) return;
    int64_t G = (N + COLSUM_ROWS - 1) / COLSUM_ROWS, have = (int64_t)prt_cuda_workspace_floats(rt);
    if (G > 65535) G = 65535;
    if (G * C > have) G = have / C;
    float *part = G > 1 ? prt_cuda_workspace(rt, (size_t)(G * C)) : NULL;
    if (G < 1) G = 1;
    int64_t rows = (N + G - 1) / G;
    dim3 grid((unsigned)((C + 31) / 32), (unsigned)G);
    k_colsum<<<grid, dim3(32, 16), 0, stream_of(rt)>>>(mode, dst, part, dout, in, mean, rstd, N, C, rows);
    PRT_LAUNCH_CHECK();
    if (part) ELEMENTWISE(k_colsum_final, C, dst, part, G, C);
}

void prt_cu_bias_bwd(prt *rt, prt_ten db, prt_ten dout, int64_t N, int64_t M) {
    PRT_CUDA_REQUIRE(rt, "bias_bwd", N, M);
    prt_ten none = {NULL, PRT_F32};
    colsum(rt, 0, db, dout, none, none, none, N, M);
}

/* ---------------------------------------------------------------- embedding and positions */

static __global__ void k_embed_fwd(prt_ten out, const int32_t *tokens, prt_ten wte, int64_t N, int64_t C, int64_t vocab_local,
                            int64_t vocab_offset) {
    GRID_STRIDE(i, N * C) {
        int64_t n = i / C, c = i % C, row = (int64_t)tokens[n] - vocab_offset;
        ST(out, i, row >= 0 && row < vocab_local ? LD(wte, row * C + c) : 0.0f);
    }
}

/* One block per token n.  The block of the FIRST occurrence of a (local) token sums,
 * for every channel, the existing dwte value and dout of every occurrence in token
 * order, in fp32, and rounds once: the CPU path's order exactly, so fp32 results
 * are bit-identical and no two blocks write the same row. */
static __global__ void k_embed_bwd(prt_ten dwte, const int32_t *tokens, prt_ten dout, int64_t N, int64_t C,
                            int64_t vocab_local, int64_t vocab_offset) {
    __shared__ int32_t match[PRT_CU_THREADS];   /* offsets in the chunk of the matching tokens, in order */
    __shared__ int wcount[PRT_CU_THREADS / 32];
    int64_t n = blockIdx.x;
    int32_t tok = tokens[n];
    int64_t row = (int64_t)tok - vocab_offset;
    if (row < 0 || row >= vocab_local) return;
    int seen = 0;
    for (int64_t e0 = 0; e0 < n && !seen; e0 += blockDim.x) {
        int64_t e = e0 + threadIdx.x;
        seen = __syncthreads_or(e < n && tokens[e] == tok);
    }
    if (seen) return;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t c0 = 0; c0 < C; c0 += blockDim.x) {
        int64_t c = c0 + threadIdx.x;
        float acc = c < C ? LD(dwte, row * C + c) : 0.0f;
        for (int64_t e0 = n; e0 < N; e0 += blockDim.x) {
            int64_t e = e0 + threadIdx.x;
            bool f = e < N && tokens[e] == tok;
            unsigned mask = __ballot_sync(0xffffffffu, f);
            __syncthreads();  /* the previous chunk's match[] and wcount[] are read */
            if (lane == 0) wcount[warp] = __popc(mask);
            __syncthreads();
            int base = 0, total = 0;
            for (int w = 0; w < PRT_CU_THREADS / 32; w++) {
                if (w < warp) base += wcount[w];
                total += wcount[w];
            }
            if (f) match[base + __popc(mask & ((1u << lane) - 1u))] = threadIdx.x;
            __syncthreads();
            if (c < C)
                for (int k = 0; k < total; k++) acc += LD(dout, (e0 + match[k]) * C + c);
        }
        if (c < C) ST(dwte, row * C + c, acc);
    }
}

void prt_cu_embed_fwd(prt *rt, prt_ten out, const int32_t *tokens, prt_ten wte, int64_t N, int64_t C,
                      int64_t vocab_local, int64_t vocab_offset) {
    ELEMENTWISE(k_embed_fwd, N * C, out, tokens, wte, N, C, vocab_local, vocab_offset);
}
void prt_cu_embed_bwd(prt *rt, prt_ten dwte, const int32_t *tokens, prt_ten dout, int64_t N, int64_t C,
                      int64_t vocab_local, int64_t vocab_offset) {
    if (N <= 0 || C <= 0 || !dwte.p) return;
    PRT_CUDA_REQUIRE(rt, "embed_bwd", N, C, vocab_local, vocab_offset);
    k_embed_bwd<<<(unsigned)N, PRT_CU_THREADS, 0, stream_of(rt)>>>(dwte, tokens, dout, N, C, vocab_local, vocab_offset);
    PRT_LAUNCH_CHECK();
}

static __global__ void k_pos_fwd(prt_ten out, prt_ten in, prt_ten wpe, int64_t B, int64_t T, int64_t C, int64_t t_offset,
                                 int64_t zz) {
    GRID_STRIDE(i, B * T * C) {
        int64_t c = i % C, t = (i / C) % T;
        ST(out, i, LD(in, i) + LD(wpe, prt_seq_pos(t, T, t_offset, zz) * C + c));
    }
}
static __global__ void k_pos_dwpe(prt_ten dwpe, prt_ten dout, int64_t B, int64_t T, int64_t C, int64_t t_offset,
                                  int64_t zz) {
    GRID_STRIDE(i, T * C) {
        int64_t t = i / C, c = i % C, p = prt_seq_pos(t, T, t_offset, zz) * C + c;
        float acc = LD(dwpe, p);
        for (int64_t b = 0; b < B; b++) acc += LD(dout, (b * T + t) * C + c);
        ST(dwpe, p, acc);
    }
}
void prt_cu_pos_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten wpe, int64_t B, int64_t T, int64_t C, int64_t t_offset,
                    int64_t zz) {
    ELEMENTWISE(k_pos_fwd, B * T * C, out, in, wpe, B, T, C, t_offset, zz);
}
void prt_cu_pos_bwd(prt *rt, prt_ten dwpe, prt_ten din, prt_ten dout, int64_t B, int64_t T, int64_t C, int64_t t_offset,
                    int64_t zz, int din_write) {
    if (dwpe.p) ELEMENTWISE(k_pos_dwpe, T * C, dwpe, dout, B, T, C, t_offset, zz);
    if (din.p && din_write) prt_cu_copy(rt, din, dout, B * T * C);  /* din = dout */
    else if (din.p) ELEMENTWISE(k_acc, B * T * C, din, dout, B * T * C);
}

/* ---------------------------------------------------------------- norms (one block per row) */

static __global__ void k_layernorm_fwd(prt_ten out, prt_ten mean, prt_ten rstd, prt_ten in, prt_ten w, prt_ten b, int64_t C,
                                       double eps) {
    int64_t x = blockIdx.x * C;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += LD(in, x + c);
    double m = block_sum_d(s) / (double)C, v = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        double d = LD(in, x + c) - m;
        v += d * d;
    }
    double r = prt_norm_rstd(block_sum_d(v) / (double)C, eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        ST(out, x + c, (float)((LD(in, x + c) - m) * r) * LD(w, c) + (b.p ? LD(b, c) : 0.0f));
    if (threadIdx.x == 0) {
        if (mean.p) ST(mean, blockIdx.x, (float)m);
        if (rstd.p) ST(rstd, blockIdx.x, (float)r);
    }
}

static __global__ void k_layernorm_din(prt_ten din, prt_ten dout, prt_ten in, prt_ten w, prt_ten mean, prt_ten rstd, int64_t C,
                                       int write) {
    int64_t n = blockIdx.x, x = n * C;
    float m = LD(mean, n), r = LD(rstd, n);
    double a = 0.0, bsum = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float norm = (LD(in, x + c) - m) * r, dnorm = LD(w, c) * LD(dout, x + c);
        a += dnorm;
        bsum += dnorm * norm;
    }
    double dnorm_mean = block_sum_d(a) / (double)C, dnorm_norm_mean = block_sum_d(bsum) / (double)C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float g = LD(dout, x + c), norm = (LD(in, x + c) - m) * r, dnorm = LD(w, c) * g;
        ST(din, x + c, (write ? 0.0f : LD(din, x + c)) + (float)(r * (dnorm - dnorm_mean - norm * dnorm_norm_mean)));
    }
}

static __global__ void k_rmsnorm_fwd(prt_ten out, prt_ten rstd, prt_ten in, prt_ten w, int64_t C, double eps) {
    int64_t x = blockIdx.x * C;
    double ss = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        double v = LD(in, x + c);
        ss += v * v;
    }
    double r = prt_norm_rstd(block_sum_d(ss) / (double)C, eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) ST(out, x + c, (float)(LD(in, x + c) * r) * LD(w, c));
    if (threadIdx.x == 0 && rstd.p) ST(rstd, blockIdx.x, (float)r);
}

static __global__ void k_rmsnorm_din(prt_ten din, prt_ten dout, prt_ten in, prt_ten w, prt_ten rstd, int64_t C,
                              int write) {
    int64_t n = blockIdx.x, x = n * C;
    double r = LD(rstd, n), dot = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dot += (double)LD(w, c) * LD(dout, x + c) * LD(in, x + c);
    double k = r * r * block_sum_d(dot) / (double)C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float g = LD(dout, x + c), xc = LD(in, x + c);
        ST(din, x + c, (write ? 0.0f : LD(din, x + c)) + (float)(r * ((double)LD(w, c) * g - xc * k)));
    }
}

void prt_cu_layernorm_fwd(prt *rt, prt_ten out, prt_ten mean, prt_ten rstd, prt_ten in, prt_ten w, prt_ten b,
                          int64_t N, int64_t C, double eps) {
    if (N <= 0) return;
    PRT_CUDA_REQUIRE(rt, "layernorm_fwd", N, C);
    k_layernorm_fwd<<<(unsigned)N, PRT_CU_THREADS, 0, stream_of(rt)>>>(out, mean, rstd, in, w, b, C, eps);
    PRT_LAUNCH_CHECK();
}
void prt_cu_layernorm_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten db, prt_ten dout, prt_ten in, prt_ten w,
                          prt_ten mean, prt_ten rstd, int64_t N, int64_t C, int write) {
    if (N <= 0) return;
    PRT_CUDA_REQUIRE(rt, "layernorm_bwd", N, C);
    if (db.p) colsum(rt, 0, db, dout, in, mean, rstd, N, C);
    if (dw.p) colsum(rt, 1, dw, dout, in, mean, rstd, N, C);
    if (din.p) {
        k_layernorm_din<<<(unsigned)N, PRT_CU_THREADS, 0, stream_of(rt)>>>(din, dout, in, w, mean, rstd, C, write);
        PRT_LAUNCH_CHECK();
    }
}
void prt_cu_rmsnorm_fwd(prt *rt, prt_ten out, prt_ten rstd, prt_ten in, prt_ten w, int64_t N, int64_t C, double eps) {
    if (N <= 0) return;
    PRT_CUDA_REQUIRE(rt, "rmsnorm_fwd", N, C);
    k_rmsnorm_fwd<<<(unsigned)N, PRT_CU_THREADS, 0, stream_of(rt)>>>(out, rstd, in, w, C, eps);
    PRT_LAUNCH_CHECK();
}
void prt_cu_rmsnorm_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten dout, prt_ten in, prt_ten w, prt_ten rstd,
                        int64_t N, int64_t C, int write) {
    if (N <= 0) return;
    PRT_CUDA_REQUIRE(rt, "rmsnorm_bwd", N, C);
    prt_ten none = {NULL, PRT_F32};
    if (dw.p) colsum(rt, 2, dw, dout, in, none, rstd, N, C);
    if (din.p) {
        k_rmsnorm_din<<<(unsigned)N, PRT_CU_THREADS, 0, stream_of(rt)>>>(din, dout, in, w, rstd, C, write);
        PRT_LAUNCH_CHECK();
    }
}

/* ---------------------------------------------------------------- GEMMs */

/* Row-major C[M,N] (ldc) = alpha op(A)[M,K] op(B)[K,N] + beta C: any dtypes, fp32
 * accumulation; the fallback when cuBLAS has no kernel for the mix of dtypes. */
static __global__ void k_gemm_generic(int ta, int tb, int M, int N, int K, float alpha, prt_ten A, int lda, prt_ten B, int ldb,
                               float beta, prt_ten C, int ldc) {
    __shared__ float As[16][17], Bs[16][17];
    int col = blockIdx.x * 16 + threadIdx.x;
    for (int64_t row0 = blockIdx.y * 16; row0 < M; row0 += (int64_t)gridDim.y * 16) {  /* row tiles: any M */
        int row = (int)row0 + threadIdx.y;
        float acc = 0.0f;
        for (int k0 = 0; k0 < K; k0 += 16) {
            int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
            As[threadIdx.y][threadIdx.x] =
                row < M && ka < K ? LD(A, ta ? (int64_t)ka * lda + row : (int64_t)row * lda + ka) : 0.0f;
            Bs[threadIdx.y][threadIdx.x] =
                kb < K && col < N ? LD(B, tb ? (int64_t)col * ldb + kb : (int64_t)kb * ldb + col) : 0.0f;
            __syncthreads();
            for (int kk = 0; kk < 16; kk++) acc += As[threadIdx.y][kk] * Bs[kk][threadIdx.x];
            __syncthreads();
        }
        if (row < M && col < N) {
            int64_t i = (int64_t)row * ldc + col;
            ST(C, i, alpha * acc + (beta != 0.0f ? beta * LD(C, i) : 0.0f));
        }
    }
}

static cudaDataType_t cuda_type(int64_t dtype) {
    return dtype == PRT_BF16 ? CUDA_R_16BF : dtype == PRT_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* Row-major C[M,N] = alpha op(A) op(B) + beta C (lda, ldb, ldc: row strides of the
 * stored matrices).  cuBLAS (fp32 compute) when A and B share a dtype and C has it
 * or is fp32; the generic kernel otherwise. */
static void gemm_rm(prt *rt, int ta, int tb, int M, int N, int K, float alpha, prt_ten A, int lda, prt_ten B, int ldb,
                    float beta, prt_ten C, int ldc) {
    prt_cuda *c = prt_cu(rt);
    if (A.dtype == B.dtype && (C.dtype == A.dtype || C.dtype == PRT_F32)) {
        /* column-major view: C^T[N,M] = op(B)^T op(A)^T */
        cublasComputeType_t compute =
            A.dtype == PRT_F32 && c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        prt_cuda_blas_workspace(rt);
        PRT_CUBLAS_CHECK(cublasGemmEx(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                                      &alpha, B.p, cuda_type(B.dtype), ldb, A.p, cuda_type(A.dtype), lda, &beta, C.p,
                                      cuda_type(C.dtype), ldc, compute, CUBLAS_GEMM_DEFAULT));
        return;
    }
    int tiles = (M + 15) / 16;
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)(tiles < 65535 ? tiles : 65535));
    k_gemm_generic<<<grid, dim3(16, 16), 0, c->stream>>>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    PRT_LAUNCH_CHECK();
}

void prt_cu_matmul_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten w, int64_t N_, int64_t K_, int64_t M_, int transposed) {
    const char *op = transposed ? "matmul_t_fwd" : "matmul_fwd";
    PRT_CUDA_REQUIRE(rt, op, N_, K_, M_);
    int N = (int)N_, K = (int)K_, M = (int)M_;
    if (!N || !M) return;
    if (!K) {
        prt_cu_zero(rt, out, (int64_t)N * M, prt_dtype_size(out.dtype));
        return;
    }
    /* out[N,M] = in[N,K] @ w[K,M]  or  in[N,K] @ w[M,K]^T */
    gemm_rm(rt, 0, transposed, N, M, K, 1.0f, in, K, w, transposed ? K : M, 0.0f, out, M);
}

void prt_cu_matmul_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten dout, prt_ten in, prt_ten w, int64_t N_, int64_t K_,
                       int64_t M_, int transposed, int din_write, int dw_write) {
    const char *op = transposed ? "matmul_t_bwd" : "matmul_bwd";
    PRT_CUDA_REQUIRE(rt, op, N_, K_, M_);
    int N = (int)N_, K = (int)K_, M = (int)M_;
    if (din.p && din_write && !M) prt_cu_zero(rt, din, (int64_t)N * K, prt_dtype_size(din.dtype));
    if (dw.p && dw_write && !N) prt_cu_zero(rt, dw, (int64_t)K * M, prt_dtype_size(dw.dtype));
    if (!N || !K || !M) return;
    if (din.p) {
        float beta = din_write ? 0.0f : 1.0f;  /* din_write: din = ..., not += */
        if (transposed)  /* din[N,K] += dout[N,M] @ w[M,K] */
            gemm_rm(rt, 0, 0, N, K, M, 1.0f, dout, M, w, K, beta, din, K);
        else             /* din[N,K] += dout[N,M] @ w[K,M]^T */
            gemm_rm(rt, 0, 1, N, K, M, 1.0f, dout, M, w, M, beta, din, K);
    }
    if (dw.p) {
        float beta = dw_write ? 0.0f : 1.0f;  /* dw_write: dw = ..., not += */
        if (transposed)  /* dw[M,K] += dout^T @ in */
            gemm_rm(rt, 1, 0, M, K, N, 1.0f, dout, M, in, K, beta, dw, K);
        else             /* dw[K,M] += in^T @ dout */
            gemm_rm(rt, 1, 0, K, M, N, 1.0f, in, K, dout, M, beta, dw, M);
    }
}

/* ---------------------------------------------------------------- cross-entropy (one block per row) */

static __global__ void k_xent_max(float *mx, prt_ten logits, int64_t V) {
    int64_t row = blockIdx.x * V;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, LD(logits, row + j));
    m = block_max_f(m);
    if (threadIdx.x == 0) mx[blockIdx.x] = m;
}
static __global__ void k_xent_sums(float *sums, const float *mx, prt_ten logits, const int32_t *targets, int64_t N, int64_t V,
                            int64_t vocab_offset) {
    int64_t n = blockIdx.x, row = n * V;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) s += prt_expf_fast(LD(logits, row + j) - mx[n]);
    s = block_sum_d(s);
    if (threadIdx.x == 0) {
        sums[n] = (float)s;
        int64_t j = (int64_t)targets[n] - vocab_offset;
        sums[N + n] = j >= 0 && j < V ? LD(logits, row + j) : 0.0f;
    }
}
/* One block: stats, the loss (double) into loss_out[0] (8 bytes at the start of the
 * workspace, written after every read of it), loss_sum[0] += loss. */
static __global__ void k_xent_final(prt_ten stats, prt_ten loss_sum, float *mx, const float *sums, int64_t N) {
    double loss = 0.0;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
        float lse = mx[n] + logf(sums[n]);
        ST(stats, 2 * n, mx[n]);
        ST(stats, 2 * n + 1, lse);
        loss += (double)lse - (double)sums[N + n];
    }
    loss = block_sum_d(loss);  /* ends with __syncthreads: every read of mx is done */
    if (threadIdx.x == 0) {
        *(double *)mx = loss;
        if (loss_sum.p) ST(loss_sum, 0, LD(loss_sum, 0) + (float)loss);
    }
}
static __global__ void k_xent_bwd(prt_ten dlogits, prt_ten logits, prt_ten stats, const int32_t *targets, int64_t N, int64_t V,
                           int64_t vocab_offset, float s, int write) {
    GRID_STRIDE(i, N * V) {
        int64_t n = i / V, j = i % V;
        float p = prt_expf_fast(LD(logits, i) - LD(stats, 2 * n + 1));
        ST(dlogits, i, (write ? 0.0f : LD(dlogits, i)) + s * (p - (j == (int64_t)targets[n] - vocab_offset ? 1.0f : 0.0f)));
    }
}

/* MAX or SUM over the axis of n floats in device memory (the xent all-reduces). */
static void allreduce_f32(prt *rt, int64_t axis, float *buf, int64_t n, int is_max, const char *name) {
    prt_cuda *c = prt_cu(rt);
    (void)c;
    if (prt_axis_size(rt, axis) == 1) return;
    double t0 = prt_trace_start(rt);
#ifdef PRT_HAVE_NCCL
    if (c->nccl) {
        PRT_CUDA_CHECK(cudaEventRecord(c->ev_compute, c->stream));
        PRT_CUDA_CHECK(cudaStreamWaitEvent(c->comm_stream, c->ev_compute, 0));
        PRT_NCCL_CHECK(ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, is_max ? ncclMax : ncclSum, c->comm[axis],
                                     c->comm_stream));
        PRT_CUDA_CHECK(cudaEventRecord(c->ev_comm, c->comm_stream));
        PRT_CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ev_comm, 0));
        if (rt->tracing) prt_cuda_sync(rt);
        PRT_TRACE_END(rt, name, "comm", t0, n * 4, axis);
        return;
    }
#endif
    float *h = (float *)prt_cuda_host_copy(rt, buf, (size_t)n * sizeof(float));
    prt_block_begin(is_max ? "cross-entropy max all-reduce" : "cross-entropy sum all-reduce", axis);
    PRT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, is_max ? MPI_MAX : MPI_SUM, prt_axis_comm(rt, axis)));
    prt_block_end();
    prt_cuda_h2d(rt, buf, h, (size_t)n * sizeof(float));
    free(h);
    PRT_TRACE_END(rt, name, "comm", t0, n * 4, axis);
}

double prt_cu_xent_fwd(prt *rt, prt_ten loss_sum, prt_ten stats, prt_ten logits, const int32_t *targets, int64_t N,
                       int64_t V_local, int64_t vocab_offset, int64_t axis) {
    if (N <= 0) return 0.0;
    PRT_CUDA_REQUIRE(rt, "xent_fwd", N, V_local, vocab_offset, axis);
    float *mx = prt_cuda_workspace(rt, (size_t)3 * (size_t)N), *sums = mx + N;
    cudaStream_t s = stream_of(rt);
    k_xent_max<<<(unsigned)N, PRT_CU_THREADS, 0, s>>>(mx, logits, V_local);
    PRT_LAUNCH_CHECK();
    allreduce_f32(rt, axis, mx, N, 1, "xent_allreduce_max");
    k_xent_sums<<<(unsigned)N, PRT_CU_THREADS, 0, s>>>(sums, mx, logits, targets, N, V_local, vocab_offset);
    PRT_LAUNCH_CHECK();
    allreduce_f32(rt, axis, sums, 2 * N, 0, "xent_allreduce_sum");
    k_xent_final<<<1, 1024, 0, s>>>(stats, loss_sum, mx, sums, N);
    PRT_LAUNCH_CHECK();
    double loss = 0.0;
    prt_cuda_d2h(rt, &loss, mx, sizeof loss);
    return loss;
}

void prt_cu_xent_bwd(prt *rt, prt_ten dlogits, prt_ten logits, prt_ten stats, const int32_t *targets, int64_t N,
                     int64_t V_local, int64_t vocab_offset, double scale, int write) {
    ELEMENTWISE(k_xent_bwd, N * V_local, dlogits, logits, stats, targets, N, V_local, vocab_offset, (float)scale, write);
}

/* ---------------------------------------------------------------- optimizers */

/* The element updates are prt_math.h's, the CPU reference's. */
static __global__ void k_adamw(prt_ten param, prt_ten master, prt_ten grad, prt_ten m, prt_ten v, int64_t n,
                               prt_adamw_args args) {
    GRID_STRIDE(i, n) prt_adamw_element(&args, param, master, grad, m, v, i);
}
static __global__ void k_sgd(prt_ten param, prt_ten master, prt_ten grad, prt_ten mom, int64_t n, float lr, float mu,
                             float wd) {
    GRID_STRIDE(i, n) prt_sgd_element(param, master, grad, mom, lr, mu, wd, i);
}

void prt_cu_adamw(prt *rt, prt_ten param, prt_ten master, prt_ten grad, prt_ten m, prt_ten v, int64_t n, int64_t step,
                  double lr, double beta1, double beta2, double eps, double weight_decay) {
    PRT_CHECK(step >= 1, "adamw: step counts from 1, got %lld", (long long)step);
    ELEMENTWISE(k_adamw, n, param, master, grad, m, v, n, prt_adamw_prepare(step, lr, beta1, beta2, eps, weight_decay));
}

void prt_cu_sgd(prt *rt, prt_ten param, prt_ten master, prt_ten grad, prt_ten mom, int64_t n, double lr, double momentum,
                double weight_decay) {
    ELEMENTWISE(k_sgd, n, param, master, grad, mom, n, (float)lr, (float)momentum, (float)weight_decay);
}

/* ---------------------------------------------------------------- gradient clipping */

/* Each block sums its grid-strided squares in double, then adds them to the
 * fp32 accumulator atomically (the order of those few adds is the device's,
 * so the last bits of the norm may differ between runs, unlike the CPU's). */
static __global__ void k_sumsq(float *acc, prt_ten x, int64_t n, float weight) {
    double s = 0.0;
    GRID_STRIDE(i, n) {
        double v = LD(x, i);
        s += v * v;
    }
    s = block_sum_d(s);
    if (threadIdx.x == 0) atomicAdd(acc, (float)(weight * s));
}
static __global__ void k_scale(prt_ten x, int64_t n, float factor) { GRID_STRIDE(i, n) ST(x, i, LD(x, i) * factor); }

void prt_cu_sumsq(prt *rt, prt_ten acc, prt_ten x, int64_t n, double weight) {
    PRT_CHECK(acc.dtype == PRT_F32, "sumsq: the accumulator is %s, not f32", prt_dtype_names[acc.dtype]);
    if (weight == 0.0 || n <= 0) return;
    int blocks = prt_cu_blocks(n) < 1024 ? prt_cu_blocks(n) : 1024;
    k_sumsq<<<blocks, PRT_CU_THREADS, 0, stream_of(rt)>>>((float *)acc.p, x, n, (float)weight);
    PRT_LAUNCH_CHECK();
}
void prt_cu_scale(prt *rt, prt_ten x, int64_t n, double factor) {
    if (factor != 1.0) ELEMENTWISE(k_scale, n, x, n, (float)factor);
}
