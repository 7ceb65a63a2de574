/*
 * prt_cuda_moe.cu — the mixture-of-experts ops of the CUDA backend: the math of
 * runtime/cpu/prt_cpu_moe.h on the device, tested against the CPU ops by
 * tests/gpu/test_gpu_ops.c.
 *
 * Routing is one thread per token (top-k by selection over the E logits, the
 * lower expert first among equal ones, as the CPU reference chooses), the
 * per-expert counts integer atomics (exact whatever the order), the auxiliary
 * losses one block per expert summing its router probability over the tokens
 * in a fixed order (block_sum_d), then one thread.  The dispatch's rows are
 * stable by token: one thread per expert walks the assignments in token
 * order.  The grouped GEMM reads the offsets back to the host (E + 1 ints) and
 * makes one cuBLAS GEMM per expert with rows, through the matmul entry points.
 * The regrouping of expert parallelism reads the counts [S, El] back and moves
 * one row per block.  Only the router's forward takes device scratch (E + 1
 * doubles of loss partials, prt_scratch_moe_router_fwd books them); the
 * dispatch counts in its offsets buffer before the scan.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prt_cuda.h"

#define LD(t, i) prt_ld((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_st((t).p, (t).dtype, (i), (v))
#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static cudaStream_t stream_of(prt *rt) { return prt_cu(rt)->stream; }

/* Block-wide sum in double, every thread gets it; blockDim.x a multiple of 32. */
static __device__ double moe_block_sum(double v) {
    __shared__ double part[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < nwarps; w++) s += part[w];
    return s;
}

/* A token's row statistics: max, log-sum-exp, and with a sigmoid router the
 * sum of the sigmoids. */
static __device__ void row_stats(prt_ten logits, int64_t t, int64_t E, double *lse, double *sig_total) {
    double m = -INFINITY, s = 0.0, st = 0.0;
    for (int64_t e = 0; e < E; e++) m = fmax(m, (double)LD(logits, t * E + e));
    for (int64_t e = 0; e < E; e++) {
        double l = LD(logits, t * E + e);
        s += exp(l - m);
        st += 1.0 / (1.0 + exp(-l));
    }
    *lse = m + log(s);
    *sig_total = st;
}

/* The router probability of the auxiliary loss (prt_cpu_moe.h). */
static __device__ double gate_prob(double l, double lse, double sig_total, int sigmoid) {
    return sigmoid ? (1.0 / (1.0 + exp(-l))) / sig_total : exp(l - lse);
}

/* ---------------------------------------------------------------- router */

/* One thread per token: the top-k choices, their weights, the counts. */
static __global__ void k_route(prt_ten logits, int32_t *index, prt_ten weight, int32_t *counts, int64_t T, int64_t E,
                               int64_t K, int sigmoid) {
    GRID_STRIDE(t, T) {
        double chosen_sum = 0.0, first = 0.0;
        for (int64_t j = 0; j < K; j++) {
            int64_t best = -1;
            double bl = -INFINITY;
            for (int64_t e = 0; e < E; e++) {
                int taken = 0;
                for (int64_t i = 0; i < j; i++) taken |= index[t * K + i] == (int32_t)e;
                double l = LD(logits, t * E + e);
                if (!taken && (best < 0 || l > bl)) best = e, bl = l;
            }
            index[t * K + j] = (int32_t)best;
            atomicAdd(&counts[best], 1);
            if (j == 0) first = bl;
            chosen_sum += sigmoid ? 1.0 / (1.0 + exp(-bl)) : exp(bl - first);
        }
        for (int64_t j = 0; j < K; j++) {
            double l = LD(logits, t * E + index[t * K + j]);
            double w = sigmoid ? (1.0 / (1.0 + exp(-l))) / chosen_sum : exp(l - first) / chosen_sum;
            ST(weight, t * K + j, (float)w);
        }
    }
}

/* Block e < E: f_e times the sum over tokens of expert e's router
 * probability; block E: the sum of lse^2; each into part[e] (doubles). */
static __global__ void k_router_losses(prt_ten logits, const int32_t *counts, int64_t T, int64_t E, int64_t K,
                                       int sigmoid, double *out) {
    int64_t e = blockIdx.x;
    double s = 0.0;
    for (int64_t t = threadIdx.x; t < T; t += blockDim.x) {
        double lse, st;
        row_stats(logits, t, E, &lse, &st);
        s += e < E ? gate_prob(LD(logits, t * E + e), lse, st, sigmoid) : lse * lse;
    }
    s = moe_block_sum(s);
    if (threadIdx.x == 0) out[e] = e < E ? (double)counts[e] / (double)(T * K) * s : s;
}

static __global__ void k_router_losses_done(prt_ten losses, const double *part, int64_t T, int64_t E, double aux_coef,
                                            double z_coef) {
    double aux = 0.0;
    for (int64_t e = 0; e < E; e++) aux += part[e];
    ST(losses, 0, T ? (float)(aux_coef * (double)E * aux / (double)T) : 0.0f);
    ST(losses, 1, T ? (float)(z_coef * part[E] / (double)T) : 0.0f);
}

void prt_cu_moe_router_fwd(prt *rt, prt_ten logits, int32_t *index, prt_ten weight, int32_t *counts, prt_ten losses,
                           prt_ten x, prt_ten wr, int64_t T, int64_t H, int64_t E, int64_t K, int sigmoid,
                           double aux_coef, double z_coef) {
    prt_cu_matmul_fwd(rt, logits, x, wr, T, H, E, 0);
    PRT_CUDA_CHECK(cudaMemsetAsync(counts, 0, (size_t)E * sizeof *counts, stream_of(rt)));
    if (T > 0) {
        k_route<<<prt_cu_blocks(T), PRT_CU_THREADS, 0, stream_of(rt)>>>(logits, index, weight, counts, T, E, K,
                                                                          sigmoid);
        PRT_LAUNCH_CHECK();
    }
    if (losses.p) prt_cu_moe_router_loss(rt, losses, logits, counts, T, E, K, sigmoid, aux_coef, z_coef);
}

void prt_cu_moe_router_loss(prt *rt, prt_ten losses, prt_ten logits, const int32_t *counts, int64_t T, int64_t E,
                            int64_t K, int sigmoid, double aux_coef, double z_coef) {
    double *part = (double *)prt_cuda_workspace(rt, (size_t)(2 * (E + 1)));  /* E + 1 doubles */
    k_router_losses<<<(unsigned)(E + 1), 256, 0, stream_of(rt)>>>(logits, counts, T, E, K, sigmoid, part);
    PRT_LAUNCH_CHECK();
    k_router_losses_done<<<1, 1, 0, stream_of(rt)>>>(losses, part, T, E, aux_coef, z_coef);
    PRT_LAUNCH_CHECK();
}

/* One thread per token: dlogits[t, :] (written) from the gate weights'
 * gradient and both losses (prt_cpu_moe.h's backward). */
static __global__ void k_router_dlogits(prt_ten dlogits, prt_ten dweight, prt_ten logits, const int32_t *index,
                                        const int32_t *counts, int64_t T, int64_t E, int64_t K, int sigmoid,
                                        double aux_coef, double z_coef) {
    GRID_STRIDE(t, T) {
        double lse, st;
        row_stats(logits, t, E, &lse, &st);
        for (int64_t e = 0; e < E; e++) ST(dlogits, t * E + e, 0.0f);
        /* the chosen weights' gradient */
        if (dweight.p) {
            double first = LD(logits, t * E + index[t * K]), sum = 0.0, wg = 0.0;
            for (int64_t j = 0; j < K; j++) {
                double l = LD(logits, t * E + index[t * K + j]);
                sum += sigmoid ? 1.0 / (1.0 + exp(-l)) : exp(l - first);
            }
            for (int64_t j = 0; j < K; j++) {
                double l = LD(logits, t * E + index[t * K + j]);
                double w = (sigmoid ? 1.0 / (1.0 + exp(-l)) : exp(l - first)) / sum;
                wg += w * LD(dweight, t * K + j);
            }
            for (int64_t j = 0; j < K; j++) {
                int64_t e = index[t * K + j];
                double l = LD(logits, t * E + e), s = 1.0 / (1.0 + exp(-l));
                double w = (sigmoid ? s : exp(l - first)) / sum, g = LD(dweight, t * K + j);
                double d = sigmoid ? s * (1.0 - s) * (g - wg) / sum : w * (g - wg);
                ST(dlogits, t * E + e, LD(dlogits, t * E + e) + (float)d);
            }
        }
        /* the load-balancing loss: c_e = aux_coef E f_e / T */
        if (aux_coef != 0.0 && T > 0) {
            double pc = 0.0;
            for (int64_t e = 0; e < E; e++) {
                double c = aux_coef * (double)E * ((double)counts[e] / (double)(T * K)) / (double)T;
                pc += gate_prob(LD(logits, t * E + e), lse, st, sigmoid) * c;
            }
            for (int64_t e = 0; e < E; e++) {
                double l = LD(logits, t * E + e), c = aux_coef * (double)E * ((double)counts[e] / (double)(T * K)) / T;
                double d = sigmoid ? (1.0 / (1.0 + exp(-l))) * (1.0 - 1.0 / (1.0 + exp(-l))) * (c - pc) / st
                                   : exp(l - lse) * (c - pc);
                ST(dlogits, t * E + e, LD(dlogits, t * E + e) + (float)d);
            }
        }
        /* the z-loss */
        if (z_coef != 0.0 && T > 0)
            for (int64_t e = 0; e < E; e++) {
                double d = z_coef * 2.0 / (double)T * lse * exp(LD(logits, t * E + e) - lse);
                ST(dlogits, t * E + e, LD(dlogits, t * E + e) + (float)d);
            }
    }
}

void prt_cu_moe_router_bwd(prt *rt, prt_ten dx, prt_ten dwr, prt_ten dlogits, prt_ten dweight, prt_ten logits,
                           const int32_t *index, const int32_t *counts, prt_ten x, prt_ten wr, int64_t T, int64_t H,
                           int64_t E, int64_t K, int sigmoid, double aux_coef, double z_coef, int dx_write) {
    if (T > 0) {
        k_router_dlogits<<<prt_cu_blocks(T), PRT_CU_THREADS, 0, stream_of(rt)>>>(dlogits, dweight, logits, index,
                                                                                   counts, T, E, K, sigmoid, aux_coef,
                                                                                   z_coef);
        PRT_LAUNCH_CHECK();
    }
    /* dx [+]= dlogits @ wr^T, dwr += x^T @ dlogits */
    prt_cu_matmul_bwd(rt, dx, dwr, dlogits, x, wr, T, H, E, 0, dx_write, 0);
}

/* ---------------------------------------------------------------- dispatch and combine */

static __global__ void k_count_assignments(int32_t *offsets, const int32_t *index, int64_t n) {
    GRID_STRIDE(i, n) atomicAdd(&offsets[index[i] + 1], 1);
}

static __global__ void k_scan_offsets(int32_t *offsets, int64_t E) {
    offsets[0] = 0;
    for (int64_t e = 0; e < E; e++) offsets[e + 1] += offsets[e];
}

/* One thread per expert: its assignments' rows in token order (stable). */
static __global__ void k_dispatch_rows(int32_t *rows, const int32_t *offsets, const int32_t *index, int64_t T,
                                       int64_t E, int64_t K) {
    GRID_STRIDE(e, E) {
        int32_t next = offsets[e];
        for (int64_t a = 0; a < T * K; a++)
            if (index[a] == (int32_t)e) rows[a] = next++;
    }
}

static __global__ void k_dispatch_copy(prt_ten out, prt_ten in, const int32_t *rows, int64_t T, int64_t H, int64_t K) {
    GRID_STRIDE(i, T * K * H) {
        int64_t h = i % H, a = i / H, t = a / K;
        ST(out, (int64_t)rows[a] * H + h, LD(in, t * H + h));
    }
}

void prt_cu_moe_permute_fwd(prt *rt, prt_ten out, int32_t *offsets, int32_t *rows, prt_ten in, const int32_t *index,
                            int64_t T, int64_t H, int64_t E, int64_t K) {
    PRT_CUDA_CHECK(cudaMemsetAsync(offsets, 0, (size_t)(E + 1) * sizeof *offsets, stream_of(rt)));
    if (T * K > 0) {
        k_count_assignments<<<prt_cu_blocks(T * K), PRT_CU_THREADS, 0, stream_of(rt)>>>(offsets, index, T * K);
        PRT_LAUNCH_CHECK();
    }
    k_scan_offsets<<<1, 1, 0, stream_of(rt)>>>(offsets, E);
    PRT_LAUNCH_CHECK();
    if (T * K == 0) return;
    k_dispatch_rows<<<prt_cu_blocks(E), PRT_CU_THREADS, 0, stream_of(rt)>>>(rows, offsets, index, T, E, K);
    PRT_LAUNCH_CHECK();
    if (H > 0) {
        k_dispatch_copy<<<prt_cu_blocks(T * K * H), PRT_CU_THREADS, 0, stream_of(rt)>>>(out, in, rows, T, H, K);
        PRT_LAUNCH_CHECK();
    }
}

/* din[t] (+)= sum_j dout[rows[t, j]], one thread per element of din. */
static __global__ void k_dispatch_back(prt_ten din, prt_ten dout, const int32_t *rows, int64_t T, int64_t H, int64_t K,
                                       int write) {
    GRID_STRIDE(i, T * H) {
        int64_t h = i % H, t = i / H;
        float s = write ? 0.0f : LD(din, i);
        for (int64_t j = 0; j < K; j++) s += LD(dout, (int64_t)rows[t * K + j] * H + h);
        ST(din, i, s);
    }
}

void prt_cu_moe_permute_bwd(prt *rt, prt_ten din, prt_ten dout, const int32_t *rows, int64_t T, int64_t H, int64_t K,
                            int write) {
    if (T * H <= 0) return;
    k_dispatch_back<<<prt_cu_blocks(T * H), PRT_CU_THREADS, 0, stream_of(rt)>>>(din, dout, rows, T, H, K, write);
    PRT_LAUNCH_CHECK();
}

static __global__ void k_combine(prt_ten out, prt_ten y, prt_ten weight, const int32_t *rows, int64_t T, int64_t H,
                                 int64_t K) {
    GRID_STRIDE(i, T * H) {
        int64_t h = i % H, t = i / H;
        float s = 0.0f;
        for (int64_t j = 0; j < K; j++) s += LD(weight, t * K + j) * LD(y, (int64_t)rows[t * K + j] * H + h);
        ST(out, i, s);
    }
}

void prt_cu_moe_combine_fwd(prt *rt, prt_ten out, prt_ten y, prt_ten weight, const int32_t *rows, int64_t T, int64_t H,
                            int64_t K) {
    if (T * H <= 0) return;
    k_combine<<<prt_cu_blocks(T * H), PRT_CU_THREADS, 0, stream_of(rt)>>>(out, y, weight, rows, T, H, K);
    PRT_LAUNCH_CHECK();
}

/* dy[rows[t, j]] (+)= weight[t, j] dout[t]: each routed row is one (t, j)'s. */
static __global__ void k_combine_dy(prt_ten dy, prt_ten dout, prt_ten weight, const int32_t *rows, int64_t T,
                                    int64_t H, int64_t K, int write) {
    GRID_STRIDE(i, T * K * H) {
        int64_t h = i % H, a = i / H, t = a / K, r = (int64_t)rows[a] * H + h;
        ST(dy, r, (write ? 0.0f : LD(dy, r)) + LD(weight, a) * LD(dout, t * H + h));
    }
}

/* dweight[t, j] (+)= dout[t] . y[rows[t, j]], one thread per (t, j). */
static __global__ void k_combine_dweight(prt_ten dweight, prt_ten dout, prt_ten y, const int32_t *rows, int64_t T,
                                         int64_t H, int64_t K, int write) {
    GRID_STRIDE(a, T * K) {
        int64_t t = a / K, r = (int64_t)rows[a] * H;
        double s = 0.0;
        for (int64_t h = 0; h < H; h++) s += (double)LD(dout, t * H + h) * LD(y, r + h);
        ST(dweight, a, (write ? 0.0f : LD(dweight, a)) + (float)s);
    }
}

void prt_cu_moe_combine_bwd(prt *rt, prt_ten dy, prt_ten dweight, prt_ten dout, prt_ten y, prt_ten weight,
                            const int32_t *rows, int64_t T, int64_t H, int64_t K, int dy_write, int dweight_write) {
    if (dy.p && T * K * H > 0) {
        k_combine_dy<<<prt_cu_blocks(T * K * H), PRT_CU_THREADS, 0, stream_of(rt)>>>(dy, dout, weight, rows, T, H, K,
                                                                                       dy_write);
        PRT_LAUNCH_CHECK();
    }
    if (dweight.p && T * K > 0) {
        k_combine_dweight<<<prt_cu_blocks(T * K), PRT_CU_THREADS, 0, stream_of(rt)>>>(dweight, dout, y, rows, T, H, K,
                                                                                        dweight_write);
        PRT_LAUNCH_CHECK();
    }
}

/* ---------------------------------------------------------------- grouped GEMM */

/* The offsets [E + 1] on the host (the GEMMs' row counts). */
static int32_t *host_offsets(prt *rt, const int32_t *offsets, int64_t E) {
    int32_t *h = (int32_t *)prt_xmalloc((size_t)(E + 1) * sizeof *h);
    PRT_CUDA_CHECK(cudaMemcpyAsync(h, offsets, (size_t)(E + 1) * sizeof *h, cudaMemcpyDeviceToHost, stream_of(rt)));
    PRT_CUDA_CHECK(cudaStreamSynchronize(stream_of(rt)));
    for (int64_t e = 0; e < E; e++)
        PRT_CHECK(h[e] >= 0 && h[e] <= h[e + 1], "moe_matmul: offsets[%lld] = %d, offsets[%lld] = %d", (long long)e,
                  h[e], (long long)(e + 1), h[e + 1]);
    return h;
}

static prt_ten at(prt_ten t, int64_t elems) {
    return (prt_ten){t.p ? (char *)t.p + (size_t)elems * prt_dtype_size(t.dtype) : NULL, t.dtype};
}

void prt_cu_moe_matmul_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten w, const int32_t *offsets, int64_t E, int64_t K,
                           int64_t M) {
    int32_t *h = host_offsets(rt, offsets, E);
    for (int64_t e = 0; e < E; e++) {
        int64_t r0 = h[e], n = h[e + 1] - h[e];
        if (n) prt_cu_matmul_fwd(rt, at(out, r0 * M), at(in, r0 * K), at(w, e * K * M), n, K, M, 0);
    }
    free(h);
}

void prt_cu_moe_matmul_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten dout, prt_ten in, prt_ten w,
                           const int32_t *offsets, int64_t E, int64_t K, int64_t M) {
    int32_t *h = host_offsets(rt, offsets, E);
    for (int64_t e = 0; e < E; e++) {
        int64_t r0 = h[e], n = h[e + 1] - h[e];
        if (n)
            prt_cu_matmul_bwd(rt, at(din, r0 * K), at(dw, e * K * M), at(dout, r0 * M), at(in, r0 * K),
                              at(w, e * K * M), n, K, M, 0, 0, 0);
    }
    free(h);
}

/* ---------------------------------------------------------------- expert parallelism */

static __global__ void k_rank_rows(int32_t *send, const int32_t *counts, int64_t S, int64_t E) {
    int64_t El = E / S;
    for (int64_t j = 0; j < S; j++) {
        int32_t s = 0;
        for (int64_t e = j * El; e < (j + 1) * El; e++) s += counts[e];
        send[j] = s;
    }
}

void prt_cu_moe_rank_rows(prt *rt, int32_t *send_rows, const int32_t *counts, int64_t S, int64_t E) {
    PRT_CHECK(S >= 1 && E >= S && E % S == 0, "moe_rank_rows: %lld experts over %lld ranks", (long long)E,
              (long long)S);
    k_rank_rows<<<1, 1, 0, stream_of(rt)>>>(send_rows, counts, S, E);
    PRT_LAUNCH_CHECK();
}

/* Output row r of a regroup: its source row.  to_expert: out is (e, s)-major
 * and in (s, e)-major; else the other way round.  counts [S, El]. */
static __device__ int64_t regroup_source(const int32_t *counts, int64_t S, int64_t El, int to_expert, int64_t r) {
    int64_t seen = 0;
    for (int64_t outer = 0; outer < (to_expert ? El : S); outer++)
        for (int64_t inner = 0; inner < (to_expert ? S : El); inner++) {
            int64_t s = to_expert ? inner : outer, e = to_expert ? outer : inner;
            int64_t c = counts[s * El + e];
            if (r < seen + c) {
                int64_t base = 0; /* where block (s, e) starts in the source order */
                for (int64_t s2 = 0; s2 < S; s2++)
                    for (int64_t e2 = 0; e2 < El; e2++)
                        if (to_expert ? (s2 < s || (s2 == s && e2 < e)) : (e2 < e || (e2 == e && s2 < s)))
                            base += counts[s2 * El + e2];
                return base + (r - seen);
            }
            seen += c;
        }
    return -1;
}

/* One block per output row: out[r] = in[source(r)] (forward), or in the
 * backward din[source(r)] (+)= dout[r]. */
static __global__ void k_regroup(prt_ten dst, prt_ten src, const int32_t *counts, int64_t S, int64_t El, int64_t H,
                                 int to_expert, int backward, int write) {
    __shared__ int64_t source;
    int64_t r = blockIdx.x;
    if (threadIdx.x == 0) source = regroup_source(counts, S, El, to_expert, r);
    __syncthreads();
    if (source < 0) return;
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
        if (backward) ST(dst, source * H + h, (write ? 0.0f : LD(dst, source * H + h)) + LD(src, r * H + h));
        else ST(dst, r * H + h, LD(src, source * H + h));
    }
}

/* The rows the counts [S, El] hold, and with to_expert each local expert's
 * offsets (El + 1) into `offsets` (NULL: none). */
static int64_t regroup_rows(prt *rt, const int32_t *counts, int64_t S, int64_t El, int32_t *offsets) {
    int32_t *h = (int32_t *)prt_xmalloc((size_t)(S * El) * sizeof *h);
    PRT_CUDA_CHECK(cudaMemcpyAsync(h, counts, (size_t)(S * El) * sizeof *h, cudaMemcpyDeviceToHost, stream_of(rt)));
    PRT_CUDA_CHECK(cudaStreamSynchronize(stream_of(rt)));
    int64_t rows = 0;
    int32_t *off = (int32_t *)prt_xmalloc((size_t)(El + 1) * sizeof *off);
    off[0] = 0;
    for (int64_t e = 0; e < El; e++) {
        int64_t c = 0;
        for (int64_t s = 0; s < S; s++) {
            PRT_CHECK(h[s * El + e] >= 0, "moe_regroup: counts[%lld, %lld] = %d", (long long)s, (long long)e,
                      h[s * El + e]);
            c += h[s * El + e];
        }
        rows += c;
        off[e + 1] = (int32_t)rows;
    }
    if (offsets)
        PRT_CUDA_CHECK(cudaMemcpy(offsets, off, (size_t)(El + 1) * sizeof *off, cudaMemcpyHostToDevice));
    free(off);
    free(h);
    return rows;
}

void prt_cu_moe_regroup_fwd(prt *rt, prt_ten out, int32_t *offsets, prt_ten in, const int32_t *counts, int64_t S,
                            int64_t El, int64_t H, int to_expert) {
    int64_t rows = regroup_rows(rt, counts, S, El, to_expert ? offsets : NULL);
    if (rows <= 0 || H <= 0) return;
    k_regroup<<<(unsigned)rows, PRT_CU_THREADS, 0, stream_of(rt)>>>(out, in, counts, S, El, H, to_expert, 0, 0);
    PRT_LAUNCH_CHECK();
}

void prt_cu_moe_regroup_bwd(prt *rt, prt_ten din, prt_ten dout, const int32_t *counts, int64_t S, int64_t El, int64_t H,
                            int to_expert, int write) {
    int64_t rows = regroup_rows(rt, counts, S, El, NULL);
    if (rows <= 0 || H <= 0) return;
    k_regroup<<<(unsigned)rows, PRT_CU_THREADS, 0, stream_of(rt)>>>(din, dout, counts, S, El, H, to_expert, 1, write);
    PRT_LAUNCH_CHECK();
}

/* ---------------------------------------------------------------- host bookkeeping */

void prt_cu_moe_counts(prt *rt, const int32_t *counts, int64_t E, int64_t layer) {
    int32_t *h = (int32_t *)prt_xmalloc((size_t)E * sizeof *h);
    PRT_CUDA_CHECK(cudaMemcpyAsync(h, counts, (size_t)E * sizeof *h, cudaMemcpyDeviceToHost, stream_of(rt)));
    PRT_CUDA_CHECK(cudaStreamSynchronize(stream_of(rt)));
    prt_moe_count_tokens(rt, h, E, layer);
    free(h);
}

void prt_cu_moe_loss_add(prt *rt, prt_ten losses, double scale) {
    float h[2];
    size_t es = prt_dtype_size(losses.dtype);
    char raw[8];
    PRT_CUDA_CHECK(cudaMemcpyAsync(raw, losses.p, 2 * es, cudaMemcpyDeviceToHost, stream_of(rt)));
    PRT_CUDA_CHECK(cudaStreamSynchronize(stream_of(rt)));
    h[0] = prt_load(raw, losses.dtype, 0);
    h[1] = prt_load(raw, losses.dtype, 1);
    prt_count_step_loss(rt, -1, scale * ((double)h[0] + (double)h[1]));
}
