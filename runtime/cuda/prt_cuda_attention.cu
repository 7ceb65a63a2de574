/*
 * prt_cuda_attention.cu — causal and full attention on the GPU, forward and
 * backward, with the CPU reference's semantics (cpu/prt_cpu_ops.c): an online
 * softmax over key tiles in shared memory, never a T x T matrix (unless the plan
 * saves probs); the scratch budget is prt_cuda_ops.cu's banner.
 *
 * Layout of the work: one warp per row (a query row, or a key row for dK and dV),
 * ATT_ROWS rows per block, the head dim split across the warp's lanes (lane l
 * holds dims l, l + 32, ...: HDMAX / 32 floats of each accumulator).  A tile of
 * ATT_BK = 32 rows of the other side (keys, or queries) sits in shared memory;
 * lane j scores tile row j against the warp's row (kept in shared memory too),
 * and the weighted sum over the tile broadcasts each lane's weight with a
 * shuffle.  So a thread keeps O(HDMAX / 32) floats in registers, not O(HDMAX):
 * nothing spills at head dim 128 (tests/gpu/gpu_ptxas.sh checks ptxas' report).
 * With dropout on the probabilities (the attention_dropout_* entries) every
 * kernel regenerates the mask element it needs from prt_math.h's hash: P V
 * uses P * M / (1 - p), the softmax backward P and dP = M / (1 - p) * dO v.
 */
#include <math.h>
#include <stdint.h>

#include "prt_cuda.h"

#define LD(t, i) prt_ld((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_st((t).p, (t).dtype, (i), (v))
#define FULL 0xffffffffu

static cudaStream_t stream_of(prt *rt) { return prt_cu(rt)->stream; }

/* ---------------------------------------------------------------- attention */

#define ATT_ROWS PRT_ATT_ROWS       /* rows per block: one warp each (prt_cuda_limits.h) */
#define ATT_THREADS (ATT_ROWS * 32)
#define ATT_BK PRT_ATT_BK           /* rows per shared-memory tile: one per lane */

/* Column of q/k/v (which = 0, 1, 2) of head h in a row of qkv[B,T,3,NH,HD]
 * (KV == NH) or of the grouped qkv[B,T,KV,G+2,HD] (G = NH / KV: group h / G
 * holds its G queries, then k, then v); a row is (NH + 2 KV) HD wide, which
 * prt_cuda_limits.c keeps within int. */
static __device__ __forceinline__ int qkv_col(int which, int h, int NH, int G, int HD) {
    if (G == 1) return (which * NH + h) * HD;
    return ((h / G) * (G + 2) + (which == 0 ? h % G : G + which - 1)) * HD;
}
/* Index of element 0 of column col of token t, sample b (rows W apart). */
static __device__ __forceinline__ int64_t qkv_at(int64_t b, int64_t t, int col, int T, int W) {
    return (b * T + t) * (int64_t)W + col;
}

/* The dropout factor of probability (i, j) of pair (b, h): 0 dropped, the
 * scale kept, 1 without dropout. */
static __device__ __forceinline__ float att_drop_f(const prt_cu_drop &d, int64_t b, int64_t h, int64_t i, int64_t j, int T) {
    if (!d.on) return 1.0f;
    uint64_t index = (uint64_t)((((d.first_sample + b) * d.NH_global + d.h_offset + h) * T + i) * T + j);
    return prt_dropout_keep(d.key, index, d.threshold) ? d.scale : 0.0f;
}

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}

/* Tile rows r0 .. r0 + ATT_BK - 1 of q/k/v `which` (times mul) into tile[ATT_BK][HDMAX + 1],
 * zero past T and past HD.  Every thread of the block takes part. */
template <int HDMAX>
static __device__ void load_tile(float (*tile)[HDMAX + 1], prt_ten src, int col, int64_t b, int r0, int T, int W, int HD,
                                 float mul) {
    for (int e = threadIdx.x; e < ATT_BK * HDMAX; e += ATT_THREADS) {
        int j = e / HDMAX, d = e % HDMAX, row = r0 + j;
        tile[j][d] = row < T && d < HD ? LD(src, qkv_at(b, row, col, T, W) + d) * mul : 0.0f;
    }
}
/* The same for rows of dout[B,T,NH,HD]. */
template <int HDMAX>
static __device__ void load_dout_tile(float (*tile)[HDMAX + 1], prt_ten dout, int64_t b, int64_t h, int r0, int T, int C,
                               int HD) {
    for (int e = threadIdx.x; e < ATT_BK * HDMAX; e += ATT_THREADS) {
        int j = e / HDMAX, d = e % HDMAX, row = r0 + j;
        tile[j][d] = row < T && d < HD ? LD(dout, (b * T + row) * (int64_t)C + h * HD + d) : 0.0f;
    }
}
/* One row of HDMAX (zero past HD) into a warp's row buffer, by its lanes. */
template <int HDMAX>
static __device__ __forceinline__ void load_row(float *row, prt_ten src, int64_t at, int HD, float mul) {
    for (int d = threadIdx.x & 31; d < HDMAX; d += 32) row[d] = d < HD ? LD(src, at + d) * mul : 0.0f;
}
template <int HDMAX>
static __device__ __forceinline__ float dot_row(const float *a, const float *b) {
    float x = 0.0f;
#pragma unroll 8
    for (int d = 0; d < HDMAX; d++) x += a[d] * b[d];
    return x;
}

/* One warp per query row t of pair (b, h); online softmax over key tiles.
 * mode 0 (forward): out = softmax(q K^T / sqrt(HD)) V; probs (when not NULL) written
 *   in a second pass, masked entries 0.
 * mode 1 (backward statistics): lse[t] = log-sum-exp of the scaled scores (not when
 *   probs is given) and D[t] = dO[t] . O[t], with O from probs when given. */
template <int HDMAX>
static __global__ void __launch_bounds__(ATT_THREADS) k_attn_rows(int mode, prt_ten out, prt_ten probs, prt_ten qkv,
                                                           prt_ten dout, float *lse_ws, float *d_ws, int64_t pair0,
                                                           int T, int NH, int G, int W, int HD, int causal, float scale,
                                                           prt_cu_drop drop) {
    constexpr int VPL = HDMAX / 32;  /* dims per lane */
    __shared__ float ks[ATT_BK][HDMAX + 1], vs[ATT_BK][HDMAX + 1], qw[ATT_ROWS][HDMAX];
    int64_t pair = pair0 + blockIdx.y, b = pair / NH, h = pair % NH;
    int C = NH * HD, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int t = blockIdx.x * ATT_ROWS + warp;
    bool active = t < T, use_probs = mode == 1 && probs.p;
    int64_t prow = (pair * T + t) * (int64_t)T;  /* probs row of t */
    float *q = qw[warp];
    if (active) load_row<HDMAX>(q, qkv, qkv_at(b, t, qkv_col(0, (int)h, NH, G, HD), T, W), HD, scale);
    float acc[VPL];
#pragma unroll
    for (int i = 0; i < VPL; i++) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    int last = min(T - 1, (int)(blockIdx.x * ATT_ROWS + ATT_ROWS - 1));
    int kend = causal ? last + 1 : T;
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        __syncthreads();
        if (!use_probs) load_tile<HDMAX>(ks, qkv, qkv_col(1, (int)h, NH, G, HD), b, k0, T, W, HD, 1.0f);
        load_tile<HDMAX>(vs, qkv, qkv_col(2, (int)h, NH, G, HD), b, k0, T, W, HD, 1.0f);
        __syncthreads();
        if (!active || (causal && k0 > t)) continue;  /* whole warps: the shuffles below see every lane */
        int key = k0 + lane;
        bool valid = key < T && (!causal || key <= t);
        float p;  /* the weight of v: dropped probabilities */
        if (use_probs) {
            p = valid ? LD(probs, prow + key) * att_drop_f(drop, b, h, t, key, T) : 0.0f;
        } else {
            float s = valid ? dot_row<HDMAX>(q, ks[lane]) : -INFINITY;
            float tm = fmaxf(m, warp_max(s));  /* finite: key k0 <= t is valid */
            float corr = expf(m - tm);         /* 0 on the first tile (m = -inf) */
            p = valid ? expf(s - tm) : 0.0f;
            l = l * corr + warp_sum(p);  /* the softmax's sum: before dropout */
#pragma unroll
            for (int i = 0; i < VPL; i++) acc[i] *= corr;
            m = tm;
            if (drop.on && valid) p *= att_drop_f(drop, b, h, t, key, T);
        }
#pragma unroll 4
        for (int j = 0; j < ATT_BK; j++) {
            float pj = __shfl_sync(FULL, p, j);
#pragma unroll
            for (int i = 0; i < VPL; i++) acc[i] += pj * vs[j][lane + 32 * i];
        }
    }
    float inv = use_probs ? 1.0f : 1.0f / l;
    if (mode == 0) {
        if (active) {
            int64_t o = (b * T + t) * (int64_t)C + h * HD;
#pragma unroll
            for (int i = 0; i < VPL; i++)
                if (lane + 32 * i < HD) ST(out, o + lane + 32 * i, acc[i] * inv);
        }
        if (!probs.p) return;
        for (int k0 = 0; k0 < T; k0 += ATT_BK) {  /* second pass: the probabilities, every key */
            __syncthreads();
            load_tile<HDMAX>(ks, qkv, qkv_col(1, (int)h, NH, G, HD), b, k0, T, W, HD, 1.0f);
            __syncthreads();
            int key = k0 + lane;
            if (!active || key >= T) continue;
            float p = 0.0f;
            if (!causal || key <= t) p = expf(dot_row<HDMAX>(q, ks[lane]) - m) * inv;
            ST(probs, prow + key, p);
        }
        return;
    }
    if (!active) return;
    int64_t o = (b * T + t) * (int64_t)C + h * HD, r = (pair - pair0) * T + t;
    float dsum = 0.0f;
#pragma unroll
    for (int i = 0; i < VPL; i++)
        if (lane + 32 * i < HD) dsum += LD(dout, o + lane + 32 * i) * (acc[i] * inv);
    dsum = warp_sum(dsum);
    if (lane == 0) {
        d_ws[r] = dsum;
        if (!use_probs) lse_ws[r] = m + logf(l);
    }
}

/* dQ: one warp per query row t.  dS = P (dO . v - D);  dq += scale dS k. */
template <int HDMAX>
static __global__ void __launch_bounds__(ATT_THREADS) k_attn_dq(prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs,
                                                         const float *lse_ws, const float *d_ws, int64_t pair0, int T,
                                                         int NH, int G, int W, int HD, int causal, float scale, prt_cu_drop drop) {
    constexpr int VPL = HDMAX / 32;
    __shared__ float ks[ATT_BK][HDMAX + 1], vs[ATT_BK][HDMAX + 1], qw[ATT_ROWS][HDMAX], gw[ATT_ROWS][HDMAX];
    int64_t pair = pair0 + blockIdx.y, b = pair / NH, h = pair % NH;
    int C = NH * HD, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int t = blockIdx.x * ATT_ROWS + warp;
    bool active = t < T;
    int64_t o = (b * T + t) * (int64_t)C + h * HD, r = (pair - pair0) * T + t, prow = (pair * T + t) * (int64_t)T;
    float *q = qw[warp], *g = gw[warp];
    if (active) {
        load_row<HDMAX>(q, qkv, qkv_at(b, t, qkv_col(0, (int)h, NH, G, HD), T, W), HD, scale);
        load_row<HDMAX>(g, dout, o, HD, 1.0f);
    }
    float dq[VPL];
#pragma unroll
    for (int i = 0; i < VPL; i++) dq[i] = 0.0f;
    float lse = active && !probs.p ? lse_ws[r] : 0.0f, D = active ? d_ws[r] : 0.0f;
    int last = min(T - 1, (int)(blockIdx.x * ATT_ROWS + ATT_ROWS - 1));
    int kend = causal ? last + 1 : T;
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        __syncthreads();
        load_tile<HDMAX>(ks, qkv, qkv_col(1, (int)h, NH, G, HD), b, k0, T, W, HD, 1.0f);
        load_tile<HDMAX>(vs, qkv, qkv_col(2, (int)h, NH, G, HD), b, k0, T, W, HD, 1.0f);
        __syncthreads();
        if (!active || (causal && k0 > t)) continue;
        int key = k0 + lane;
        float ds = 0.0f;
        if (key < T && (!causal || key <= t)) {
            float p = probs.p ? LD(probs, prow + key) : expf(dot_row<HDMAX>(q, ks[lane]) - lse);
            ds = p * (dot_row<HDMAX>(g, vs[lane]) * att_drop_f(drop, b, h, t, key, T) - D);
        }
#pragma unroll 4
        for (int j = 0; j < ATT_BK; j++) {
            float dsj = __shfl_sync(FULL, ds, j);
#pragma unroll
            for (int i = 0; i < VPL; i++) dq[i] += dsj * ks[j][lane + 32 * i];
        }
    }
    if (!active) return;
    int64_t at = qkv_at(b, t, qkv_col(0, (int)h, NH, G, HD), T, W);
#pragma unroll
    for (int i = 0; i < VPL; i++) {
        int d = lane + 32 * i;
        if (d < HD) ST(dqkv, at + d, LD(dqkv, at + d) + scale * dq[i]);
    }
}

/* dK and dV: one warp per key row j of one key/value group, over query head
 * jh of the group (pair group G + jh, when among pairs pair0 .. pair_end - 1)
 * and its query rows i (i >= j when causal).  A group is one block row
 * (blockIdx.y) and one launch takes one head of each group, so no two blocks
 * of a launch add into one dk or dv; the launches of a group's heads follow
 * each other on the stream.
 *   dv += P dO_i;   dk += scale P (dO_i . v - D_i) q_i. */
template <int HDMAX>
static __global__ void __launch_bounds__(ATT_THREADS) k_attn_dkv(prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs,
                                                          const float *lse_ws, const float *d_ws, int64_t pair0,
                                                          int64_t pair_end, int jh, int T, int NH, int G, int W, int HD,
                                                          int causal, float scale, prt_cu_drop drop) {
    constexpr int VPL = HDMAX / 32;
    __shared__ float qs[ATT_BK][HDMAX + 1], gs[ATT_BK][HDMAX + 1], kw[ATT_ROWS][HDMAX], vw[ATT_ROWS][HDMAX];
    __shared__ float ls[ATT_BK], dsh[ATT_BK];
    static_assert(sizeof qs + sizeof gs + sizeof kw + sizeof vw + sizeof ls + sizeof dsh == PRT_ATT_SMEM_BYTES(HDMAX),
                  "prt_cuda_limits.h's shared memory per block of the attention kernels");
    int64_t pair = (pair0 / G + blockIdx.y) * G + jh;
    if (pair < pair0 || pair >= pair_end) return;  /* the whole block: a head of another chunk */
    int64_t b = pair / NH, h = pair % NH;
    int C = NH * HD, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int j = blockIdx.x * ATT_ROWS + warp;
    bool active = j < T;
    float *k = kw[warp], *v = vw[warp];
    if (active) {
        load_row<HDMAX>(k, qkv, qkv_at(b, j, qkv_col(1, (int)h, NH, G, HD), T, W), HD, 1.0f);
        load_row<HDMAX>(v, qkv, qkv_at(b, j, qkv_col(2, (int)h, NH, G, HD), T, W), HD, 1.0f);
    }
    float dk[VPL], dv[VPL];
#pragma unroll
    for (int i = 0; i < VPL; i++) dk[i] = dv[i] = 0.0f;
    int first = causal ? (int)(blockIdx.x * ATT_ROWS) : 0;  /* the block's first key row */
    for (int i0 = first; i0 < T; i0 += ATT_BK) {
        __syncthreads();
        load_tile<HDMAX>(qs, qkv, qkv_col(0, (int)h, NH, G, HD), b, i0, T, W, HD, scale);  /* qs: one factor of scale */
        load_dout_tile<HDMAX>(gs, dout, b, h, i0, T, C, HD);
        for (int rr = threadIdx.x; rr < ATT_BK; rr += ATT_THREADS) {
            int i = i0 + rr;
            int64_t w = (pair - pair0) * T + i;
            ls[rr] = i < T && !probs.p ? lse_ws[w] : 0.0f;
            dsh[rr] = i < T ? d_ws[w] : 0.0f;
        }
        __syncthreads();
        if (!active) continue;
        int i = i0 + lane;
        float p = 0.0f, ds = 0.0f;
        if (i < T && (!causal || i >= j)) {
            p = probs.p ? LD(probs, (pair * T + i) * (int64_t)T + j) : expf(dot_row<HDMAX>(qs[lane], k) - ls[lane]);
            float f = att_drop_f(drop, b, h, i, j, T);
            ds = p * (dot_row<HDMAX>(gs[lane], v) * f - dsh[lane]);
            p *= f;  /* dv's weight: the dropped probability */
        }
#pragma unroll 4
        for (int r = 0; r < ATT_BK; r++) {
            float pr = __shfl_sync(FULL, p, r), dsr = __shfl_sync(FULL, ds, r);
#pragma unroll
            for (int x = 0; x < VPL; x++) {
                dv[x] += pr * gs[r][lane + 32 * x];
                dk[x] += dsr * qs[r][lane + 32 * x];
            }
        }
    }
    if (!active) return;
    int64_t atk = qkv_at(b, j, qkv_col(1, (int)h, NH, G, HD), T, W), atv = qkv_at(b, j, qkv_col(2, (int)h, NH, G, HD), T, W);
#pragma unroll
    for (int x = 0; x < VPL; x++) {
        int d = lane + 32 * x;
        if (d < HD) {
            ST(dqkv, atk + d, LD(dqkv, atk + d) + dk[x]);
            ST(dqkv, atv + d, LD(dqkv, atv + d) + dv[x]);
        }
    }
}

static int att_hdmax(int64_t HD) { return PRT_ATT_HDMAX(HD); }  /* HD in 1..128: PRT_CUDA_REQUIRE first */

#define ATT_LAUNCH(kernel, grid, ...)                                                              \
    do {                                                                                           \
        switch (att_hdmax(HD)) {                                                                   \
        case 32: kernel<32><<<grid, ATT_THREADS, 0, stream_of(rt)>>>(__VA_ARGS__); break;          \
        case 64: kernel<64><<<grid, ATT_THREADS, 0, stream_of(rt)>>>(__VA_ARGS__); break;          \
        default: kernel<128><<<grid, ATT_THREADS, 0, stream_of(rt)>>>(__VA_ARGS__); break;         \
        }                                                                                          \
        PRT_LAUNCH_CHECK();                                                                        \
    } while (0)

void prt_cu_attention_dropout_fwd(prt *rt, prt_ten out, prt_ten probs, prt_ten qkv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                                  int64_t HD, int64_t causal, prt_cu_drop drop) {
    PRT_CUDA_REQUIRE(rt, "attention_fwd", B, T, NH, KV, HD, causal);
    if (B <= 0 || T <= 0) return;
    float scale = 1.0f / sqrtf((float)HD);
    prt_ten none = {NULL, PRT_F32};
    int64_t pairs = B * NH;
    for (int64_t p0 = 0; p0 < pairs; p0 += 65535) {
        int64_t np = pairs - p0 < 65535 ? pairs - p0 : 65535;
        dim3 grid((unsigned)((T + ATT_ROWS - 1) / ATT_ROWS), (unsigned)np);
        ATT_LAUNCH(k_attn_rows, grid, 0, out, probs, qkv, none, (float *)NULL, (float *)NULL, p0, (int)T, (int)NH,
                   (int)(NH / KV), (int)((NH + 2 * KV) * HD), (int)HD, (int)causal, scale, drop);
    }
}

void prt_cu_attention_fwd(prt *rt, prt_ten out, prt_ten probs, prt_ten qkv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                          int64_t HD, int64_t causal) {
    prt_cu_drop none = {0, 0, 1.0f, 0, 0, 0, NH};
    prt_cu_attention_dropout_fwd(rt, out, probs, qkv, B, T, NH, KV, HD, causal, none);
}

void prt_cu_attention_dropout_bwd(prt *rt, prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs, int64_t B,
                                  int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal, prt_cu_drop drop) {
    PRT_CUDA_REQUIRE(rt, "attention_bwd", B, T, NH, KV, HD, causal);
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
        dim3 grid((unsigned)((T + ATT_ROWS - 1) / ATT_ROWS), (unsigned)np);
        ATT_LAUNCH(k_attn_rows, grid, 1, none, probs, qkv, dout, lse_ws, d_ws, p0, (int)T, (int)NH, (int)(NH / KV),
                   (int)((NH + 2 * KV) * HD), (int)HD, (int)causal, scale, drop);
        ATT_LAUNCH(k_attn_dq, grid, dqkv, dout, qkv, probs, lse_ws, d_ws, p0, (int)T, (int)NH, (int)(NH / KV),
                   (int)((NH + 2 * KV) * HD), (int)HD, (int)causal, scale, drop);
        /* dk, dv: one block row per key/value group meeting the chunk, one launch per query head of a
         * group (launches on one stream run one after the other: a group's dk and dv have one writer
         * at a time) */
        int64_t G = NH / KV, groups = (p0 + np - 1) / G - p0 / G + 1;
        dim3 ggrid((unsigned)((T + ATT_ROWS - 1) / ATT_ROWS), (unsigned)groups);
        for (int64_t jh = 0; jh < G; jh++)
            ATT_LAUNCH(k_attn_dkv, ggrid, dqkv, dout, qkv, probs, lse_ws, d_ws, p0, p0 + np, (int)jh, (int)T, (int)NH,
                       (int)G, (int)((NH + 2 * KV) * HD), (int)HD, (int)causal, scale, drop);
    }
}

void prt_cu_attention_bwd(prt *rt, prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs, int64_t B, int64_t T,
                          int64_t NH, int64_t KV, int64_t HD, int64_t causal) {
    prt_cu_drop none = {0, 0, 1.0f, 0, 0, 0, NH};
    prt_cu_attention_dropout_bwd(rt, dqkv, dout, qkv, probs, B, T, NH, KV, HD, causal, none);
}
