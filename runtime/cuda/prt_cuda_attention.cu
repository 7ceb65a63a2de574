/*
 * prt_cuda_attention.cu — causal and full attention on the GPU, forward and
 * backward, with the CPU reference's semantics (cpu/prt_cpu_ops.c): an online
 * softmax over key tiles in shared memory, one thread per query (or key) row,
 * never a T x T matrix; the scratch budget is prt_cuda_ops.cu's banner.
 * With dropout on the probabilities (the attention_dropout_* entries) every
 * kernel regenerates the mask element it needs from prt_math.h's hash: P V
 * uses P * M / (1 - p), the softmax backward P and dP = M / (1 - p) * dO v.
 */
#include <math.h>
#include <stdint.h>

#include "prt_cuda.h"

#define LD(t, i) prt_ld((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_st((t).p, (t).dtype, (i), (v))

static cudaStream_t stream_of(prt *rt) { return prt_cu(rt)->stream; }

/* ---------------------------------------------------------------- attention */

#define ATT_BQ 64  /* query (or key) rows per block: one per thread */
#define ATT_BK 32  /* rows per shared-memory tile */

/* Index of element d of q/k/v (which = 0, 1, 2) of token t, head h, sample b in qkv[B,T,3,NH,HD]. */
__device__ __forceinline__ int64_t qkv_at(int64_t b, int64_t t, int which, int64_t h, int T, int C, int HD) {
    return ((b * T + t) * 3 + which) * (int64_t)C + h * HD;
}

/* The dropout factor of probability (i, j) of pair (b, h): 0 dropped, the
 * scale kept, 1 without dropout. */
__device__ __forceinline__ float att_drop_f(const prt_cu_drop &d, int64_t b, int64_t h, int64_t i, int64_t j, int T) {
    if (!d.on) return 1.0f;
    uint64_t index = (uint64_t)((((d.first_sample + b) * d.NH_global + d.h_offset + h) * T + i) * T + j);
    return prt_dropout_keep(d.key, index, d.threshold) ? d.scale : 0.0f;
}

/* One thread per query row t of pair (b, h); online softmax over key tiles.
 * mode 0 (forward): out = softmax(q K^T / sqrt(HD)) V; probs (when not NULL) written
 *   in a second pass, masked entries 0.
 * mode 1 (backward statistics): lse[t] = log-sum-exp of the scaled scores (not when
 *   probs is given) and D[t] = dO[t] . O[t], with O from probs when given. */
template <int HDMAX>
__global__ void __launch_bounds__(ATT_BQ) k_attn_rows(int mode, prt_ten out, prt_ten probs, prt_ten qkv, prt_ten dout,
                                                      float *lse_ws, float *d_ws, int64_t pair0, int T, int NH, int HD,
                                                      int causal, float scale, prt_cu_drop drop) {
    __shared__ float ks[ATT_BK][HDMAX], vs[ATT_BK][HDMAX];
    int64_t pair = pair0 + blockIdx.y, b = pair / NH, h = pair % NH;
    int C = NH * HD;
    int t = blockIdx.x * ATT_BQ + threadIdx.x;
    bool active = t < T;
    bool use_probs = mode == 1 && probs.p;
    int64_t prow = (pair * T + t) * (int64_t)T;  /* probs row of t */
    float q[HDMAX], acc[HDMAX];
#pragma unroll
    for (int d = 0; d < HDMAX; d++) {
        q[d] = active && d < HD ? LD(qkv, qkv_at(b, t, 0, h, T, C, HD) + d) * scale : 0.0f;
        acc[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int last = min(T - 1, (int)(blockIdx.x * ATT_BQ + ATT_BQ - 1));
    int kend = causal ? last + 1 : T;
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        __syncthreads();
        for (int e = threadIdx.x; e < ATT_BK * HDMAX; e += ATT_BQ) {
            int j = e / HDMAX, d = e % HDMAX, key = k0 + j;
            float kv = 0.0f, vv = 0.0f;
            if (key < T && d < HD) {
                kv = LD(qkv, qkv_at(b, key, 1, h, T, C, HD) + d);
                vv = LD(qkv, qkv_at(b, key, 2, h, T, C, HD) + d);
            }
            ks[j][d] = kv;
            vs[j][d] = vv;
        }
        __syncthreads();
        if (!active) continue;
        int jn = min(ATT_BK, T - k0);
        if (causal) jn = min(jn, t - k0 + 1);
        if (jn <= 0) continue;
        if (use_probs) {
            for (int j = 0; j < jn; j++) {
                float p = LD(probs, prow + k0 + j) * att_drop_f(drop, b, h, t, k0 + j, T);
#pragma unroll
                for (int d = 0; d < HDMAX; d++) acc[d] += p * vs[j][d];
            }
            continue;
        }
        float s[ATT_BK], tm = m;
#pragma unroll
        for (int j = 0; j < ATT_BK; j++) {
            float x = -INFINITY;
            if (j < jn) {
                x = 0.0f;
#pragma unroll
                for (int d = 0; d < HDMAX; d++) x += q[d] * ks[j][d];
            }
            s[j] = x;
            tm = fmaxf(tm, x);
        }
        float corr = expf(m - tm);  /* 0 on the first tile (m = -inf) */
        l *= corr;
#pragma unroll
        for (int d = 0; d < HDMAX; d++) acc[d] *= corr;
#pragma unroll
        for (int j = 0; j < ATT_BK; j++) {
            float p = j < jn ? expf(s[j] - tm) : 0.0f;
            l += p;
            if (drop.on && j < jn) p *= att_drop_f(drop, b, h, t, k0 + j, T);
#pragma unroll
            for (int d = 0; d < HDMAX; d++) acc[d] += p * vs[j][d];
        }
        m = tm;
    }
    float inv = use_probs ? 1.0f : 1.0f / l;
    if (mode == 0) {
        if (active) {
            int64_t o = (b * T + t) * (int64_t)C + h * HD;
#pragma unroll
            for (int d = 0; d < HDMAX; d++)
                if (d < HD) ST(out, o + d, acc[d] * inv);
        }
        if (!probs.p) return;
        for (int k0 = 0; k0 < T; k0 += ATT_BK) {  /* second pass: the probabilities, every key */
            __syncthreads();
            for (int e = threadIdx.x; e < ATT_BK * HDMAX; e += ATT_BQ) {
                int j = e / HDMAX, d = e % HDMAX, key = k0 + j;
                ks[j][d] = key < T && d < HD ? LD(qkv, qkv_at(b, key, 1, h, T, C, HD) + d) : 0.0f;
            }
            __syncthreads();
            if (!active) continue;
            for (int j = 0; j < ATT_BK && k0 + j < T; j++) {
                float p = 0.0f;
                if (!causal || k0 + j <= t) {
                    float x = 0.0f;
#pragma unroll
                    for (int d = 0; d < HDMAX; d++) x += q[d] * ks[j][d];
                    p = expf(x - m) * inv;
                }
                ST(probs, prow + k0 + j, p);
            }
        }
        return;
    }
    if (!active) return;
    int64_t o = (b * T + t) * (int64_t)C + h * HD, r = (pair - pair0) * T + t;
    float dsum = 0.0f;
#pragma unroll
    for (int d = 0; d < HDMAX; d++)
        if (d < HD) dsum += LD(dout, o + d) * (acc[d] * inv);
    d_ws[r] = dsum;
    if (!use_probs) lse_ws[r] = m + logf(l);
}

/* dQ: one thread per query row t.  dS = P (dO . v - D);  dq += scale dS k. */
template <int HDMAX>
__global__ void __launch_bounds__(ATT_BQ) k_attn_dq(prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs,
                                                    const float *lse_ws, const float *d_ws, int64_t pair0, int T,
                                                    int NH, int HD, int causal, float scale, prt_cu_drop drop) {
    __shared__ float ks[ATT_BK][HDMAX], vs[ATT_BK][HDMAX];
    int64_t pair = pair0 + blockIdx.y, b = pair / NH, h = pair % NH;
    int C = NH * HD;
    int t = blockIdx.x * ATT_BQ + threadIdx.x;
    bool active = t < T;
    int64_t o = (b * T + t) * (int64_t)C + h * HD, r = (pair - pair0) * T + t, prow = (pair * T + t) * (int64_t)T;
    float q[HDMAX], g[HDMAX], dq[HDMAX];
#pragma unroll
    for (int d = 0; d < HDMAX; d++) {
        q[d] = active && d < HD ? LD(qkv, qkv_at(b, t, 0, h, T, C, HD) + d) * scale : 0.0f;
        g[d] = active && d < HD ? LD(dout, o + d) : 0.0f;
        dq[d] = 0.0f;
    }
    float lse = active && !probs.p ? lse_ws[r] : 0.0f, D = active ? d_ws[r] : 0.0f;
    int last = min(T - 1, (int)(blockIdx.x * ATT_BQ + ATT_BQ - 1));
    int kend = causal ? last + 1 : T;
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        __syncthreads();
        for (int e = threadIdx.x; e < ATT_BK * HDMAX; e += ATT_BQ) {
            int j = e / HDMAX, d = e % HDMAX, key = k0 + j;
            bool in = key < T && d < HD;
            ks[j][d] = in ? LD(qkv, qkv_at(b, key, 1, h, T, C, HD) + d) : 0.0f;
            vs[j][d] = in ? LD(qkv, qkv_at(b, key, 2, h, T, C, HD) + d) : 0.0f;
        }
        __syncthreads();
        if (!active) continue;
        int jn = min(ATT_BK, T - k0);
        if (causal) jn = min(jn, t - k0 + 1);
        for (int j = 0; j < jn; j++) {
            float p;
            if (probs.p) {
                p = LD(probs, prow + k0 + j);
            } else {
                float x = 0.0f;
#pragma unroll
                for (int d = 0; d < HDMAX; d++) x += q[d] * ks[j][d];
                p = expf(x - lse);
            }
            float dp = 0.0f;
#pragma unroll
            for (int d = 0; d < HDMAX; d++) dp += g[d] * vs[j][d];
            float ds = p * (dp * att_drop_f(drop, b, h, t, k0 + j, T) - D);
#pragma unroll
            for (int d = 0; d < HDMAX; d++) dq[d] += ds * ks[j][d];
        }
    }
    if (!active) return;
    int64_t at = qkv_at(b, t, 0, h, T, C, HD);
#pragma unroll
    for (int d = 0; d < HDMAX; d++)
        if (d < HD) ST(dqkv, at + d, LD(dqkv, at + d) + scale * dq[d]);
}

/* dK (want_dk) or dV: one thread per key row j, over the query rows i (i >= j when causal).
 *   dv += P dO_i;   dk += scale P (dO_i . v - D_i) q_i. */
template <int HDMAX, bool WANT_DK>
__global__ void __launch_bounds__(ATT_BQ) k_attn_dkv(prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs,
                                                     const float *lse_ws, const float *d_ws, int64_t pair0, int T,
                                                     int NH, int HD, int causal, float scale, prt_cu_drop drop) {
    __shared__ float qs[ATT_BK][HDMAX], gs[ATT_BK][HDMAX], ls[ATT_BK], dsh[ATT_BK];
    int64_t pair = pair0 + blockIdx.y, b = pair / NH, h = pair % NH;
    int C = NH * HD;
    int j = blockIdx.x * ATT_BQ + threadIdx.x;
    bool active = j < T;
    float k[HDMAX], v[HDMAX], a[HDMAX];
#pragma unroll
    for (int d = 0; d < HDMAX; d++) {
        k[d] = active && d < HD ? LD(qkv, qkv_at(b, j, 1, h, T, C, HD) + d) : 0.0f;
        v[d] = WANT_DK && active && d < HD ? LD(qkv, qkv_at(b, j, 2, h, T, C, HD) + d) : 0.0f;
        a[d] = 0.0f;
    }
    int first = causal ? (int)(blockIdx.x * ATT_BQ) : 0;  /* a multiple of ATT_BK */
    for (int i0 = first; i0 < T; i0 += ATT_BK) {
        __syncthreads();
        for (int e = threadIdx.x; e < ATT_BK * HDMAX; e += ATT_BQ) {
            int r = e / HDMAX, d = e % HDMAX, i = i0 + r;
            bool in = i < T && d < HD;
            qs[r][d] = in ? LD(qkv, qkv_at(b, i, 0, h, T, C, HD) + d) * scale : 0.0f;
            gs[r][d] = in ? LD(dout, (b * T + i) * (int64_t)C + h * HD + d) : 0.0f;
        }
        for (int r = threadIdx.x; r < ATT_BK; r += ATT_BQ) {
            int i = i0 + r;
            int64_t w = (pair - pair0) * T + i;
            ls[r] = i < T && !probs.p ? lse_ws[w] : 0.0f;
            dsh[r] = i < T ? d_ws[w] : 0.0f;
        }
        __syncthreads();
        if (!active) continue;
        for (int r = 0; r < ATT_BK; r++) {
            int i = i0 + r;
            if (i >= T) break;
            if (causal && i < j) continue;
            float p;
            if (probs.p) {
                p = LD(probs, (pair * T + i) * (int64_t)T + j);
            } else {
                float x = 0.0f;
#pragma unroll
                for (int d = 0; d < HDMAX; d++) x += qs[r][d] * k[d];
                p = expf(x - ls[r]);
            }
            float f = att_drop_f(drop, b, h, i, j, T);
            if (WANT_DK) {
                float dp = 0.0f;
#pragma unroll
                for (int d = 0; d < HDMAX; d++) dp += gs[r][d] * v[d];
                float ds = p * (dp * f - dsh[r]);
#pragma unroll
                for (int d = 0; d < HDMAX; d++) a[d] += ds * qs[r][d];  /* qs carries one factor of scale */
            } else {
#pragma unroll
                for (int d = 0; d < HDMAX; d++) a[d] += p * f * gs[r][d];
            }
        }
    }
    if (!active) return;
    int64_t at = qkv_at(b, j, WANT_DK ? 1 : 2, h, T, C, HD);
#pragma unroll
    for (int d = 0; d < HDMAX; d++)
        if (d < HD) ST(dqkv, at + d, LD(dqkv, at + d) + a[d]);
}

static int att_hdmax(int64_t HD) {
    PRT_CHECK(HD >= 1 && HD <= 128, "attention: head dim %lld; the CUDA kernels take 1..128", (long long)HD);
    return HD <= 32 ? 32 : HD <= 64 ? 64 : 128;
}

static void att_check(int64_t B, int64_t T, int64_t NH, int64_t HD) {
    PRT_CHECK(T >= 0 && T <= 0x7fffffff && NH * HD * 3 <= 0x7fffffff && NH >= 1, "attention: bad shape T=%lld NH=%lld HD=%lld",
              (long long)T, (long long)NH, (long long)HD);
    (void)B;
}

#define ATT_LAUNCH(kernel, grid, ...)                                                        \
    do {                                                                                     \
        switch (att_hdmax(HD)) {                                                             \
        case 32: kernel<32><<<grid, ATT_BQ, 0, stream_of(rt)>>>(__VA_ARGS__); break;         \
        case 64: kernel<64><<<grid, ATT_BQ, 0, stream_of(rt)>>>(__VA_ARGS__); break;         \
        default: kernel<128><<<grid, ATT_BQ, 0, stream_of(rt)>>>(__VA_ARGS__); break;        \
        }                                                                                    \
        PRT_LAUNCH_CHECK();                                                                  \
    } while (0)

void prt_cu_attention_dropout_fwd(prt *rt, prt_ten out, prt_ten probs, prt_ten qkv, int64_t B, int64_t T, int64_t NH,
                                  int64_t HD, int64_t causal, prt_cu_drop drop) {
    att_check(B, T, NH, HD);
    if (B <= 0 || T <= 0) return;
    float scale = 1.0f / sqrtf((float)HD);
    prt_ten none = {NULL, PRT_F32};
    int64_t pairs = B * NH;
    for (int64_t p0 = 0; p0 < pairs; p0 += 65535) {
        int64_t np = pairs - p0 < 65535 ? pairs - p0 : 65535;
        dim3 grid((unsigned)((T + ATT_BQ - 1) / ATT_BQ), (unsigned)np);
        ATT_LAUNCH(k_attn_rows, grid, 0, out, probs, qkv, none, (float *)NULL, (float *)NULL, p0, (int)T, (int)NH,
                   (int)HD, (int)causal, scale, drop);
    }
}

void prt_cu_attention_fwd(prt *rt, prt_ten out, prt_ten probs, prt_ten qkv, int64_t B, int64_t T, int64_t NH,
                          int64_t HD, int64_t causal) {
    prt_cu_drop none = {0, 0, 1.0f, 0, 0, 0, NH};
    prt_cu_attention_dropout_fwd(rt, out, probs, qkv, B, T, NH, HD, causal, none);
}

void prt_cu_attention_dropout_bwd(prt *rt, prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs, int64_t B,
                                  int64_t T, int64_t NH, int64_t HD, int64_t causal, prt_cu_drop drop) {
    att_check(B, T, NH, HD);
    if (B <= 0 || T <= 0 || !dqkv.p) return;
    float scale = 1.0f / sqrtf((float)HD);
    prt_ten none = {NULL, PRT_F32};
    int64_t pairs = B * NH, per_pair = probs.p ? T : 2 * T;
    int64_t chunk = T < 65535 ? T : 65535;  /* pairs at a time: chunk x per_pair <= the ledger's (1 or 2) x T x T */
    if (chunk > pairs) chunk = pairs;
    float *ws = prt_cuda_workspace(rt, (size_t)(chunk * per_pair));
    for (int64_t p0 = 0; p0 < pairs; p0 += chunk) {
        int64_t np = pairs - p0 < chunk ? pairs - p0 : chunk;
        float *d_ws = ws, *lse_ws = probs.p ? NULL : ws + np * T;
        dim3 grid((unsigned)((T + ATT_BQ - 1) / ATT_BQ), (unsigned)np);
        ATT_LAUNCH(k_attn_rows, grid, 1, none, probs, qkv, dout, lse_ws, d_ws, p0, (int)T, (int)NH, (int)HD,
                   (int)causal, scale, drop);
        ATT_LAUNCH(k_attn_dq, grid, dqkv, dout, qkv, probs, lse_ws, d_ws, p0, (int)T, (int)NH, (int)HD, (int)causal,
                   scale, drop);
        switch (att_hdmax(HD)) {
        case 32:
            k_attn_dkv<32, true><<<grid, ATT_BQ, 0, stream_of(rt)>>>(dqkv, dout, qkv, probs, lse_ws, d_ws, p0, (int)T,
                                                                    (int)NH, (int)HD, (int)causal, scale, drop);
            k_attn_dkv<32, false><<<grid, ATT_BQ, 0, stream_of(rt)>>>(dqkv, dout, qkv, probs, lse_ws, d_ws, p0, (int)T,
                                                                     (int)NH, (int)HD, (int)causal, scale, drop);
            break;
        case 64:
            k_attn_dkv<64, true><<<grid, ATT_BQ, 0, stream_of(rt)>>>(dqkv, dout, qkv, probs, lse_ws, d_ws, p0, (int)T,
                                                                    (int)NH, (int)HD, (int)causal, scale, drop);
            k_attn_dkv<64, false><<<grid, ATT_BQ, 0, stream_of(rt)>>>(dqkv, dout, qkv, probs, lse_ws, d_ws, p0, (int)T,
                                                                     (int)NH, (int)HD, (int)causal, scale, drop);
            break;
        default:
            k_attn_dkv<128, true><<<grid, ATT_BQ, 0, stream_of(rt)>>>(dqkv, dout, qkv, probs, lse_ws, d_ws, p0, (int)T,
                                                                     (int)NH, (int)HD, (int)causal, scale, drop);
            k_attn_dkv<128, false><<<grid, ATT_BQ, 0, stream_of(rt)>>>(dqkv, dout, qkv, probs, lse_ws, d_ws, p0, (int)T,
                                                                      (int)NH, (int)HD, (int)causal, scale, drop);
            break;
        }
        PRT_LAUNCH_CHECK();
    }
}

void prt_cu_attention_bwd(prt *rt, prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs, int64_t B, int64_t T,
                          int64_t NH, int64_t HD, int64_t causal) {
    prt_cu_drop none = {0, 0, 1.0f, 0, 0, 0, NH};
    prt_cu_attention_dropout_bwd(rt, dqkv, dout, qkv, probs, B, T, NH, HD, causal, none);
}
