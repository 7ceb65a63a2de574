/*
 * prt_cuda_ring.cu — ring attention's ops on the device (parc_rt.h
 * ring_kv_pack, ring_kv_grad, ring_attention_fwd, ring_attention_bwd): the
 * math of runtime/cpu/prt_cpu_attention.c's ring steps, one thread per row.
 *
 * The forward gives each (sample, head, query row) a block, a thread per head
 * dim (HD <= PRT_RING_MAX_HD, prt_cuda_limits.h), that walks the step's keys with an online
 * softmax (each score a block sum; running max and sum, the output row one
 * element a thread) and merges the block into out and lse by the rows'
 * logsumexp.  The backward runs two kernels, neither with atomics (so 16-bit
 * gradients add as the CPU's do, once per step): a block per query row for
 * dq, one per (sample, key/value group, key row) for dk and dv over the
 * group's query heads and the rows that see the key, each recomputing
 * P = exp(scale q k - L) and dS = P (dO v - D), D = rowsum(dO out).  Nothing
 * is kept per thread but scalars (no stack: tests/gpu/gpu_ptxas.sh).
 * A key is seen by a query row when its position in the whole sequence is not
 * after the row's (ring_sees: the positions of prt_seq_pos, so the
 * load-balanced split's halves mask as the whole sequence does).
 * No device scratch.
 */
#include <math.h>
#include <stdint.h>

#include "prt_cuda.h"

#define LD(t, i) prt_ld((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_st((t).p, (t).dtype, (i), (v))
#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static cudaStream_t stream_of(prt *rt) { return prt_cu(rt)->stream; }

/* The shape of a step: local rows T, NH query heads in KV groups of G, the
 * qkv row W = (NH + 2 KV) HD wide, the packed kv row 2 KV HD. */
typedef struct ring_shape {
    int64_t B, T, NH, KV, HD, G, W, WKV;
    int64_t coord, src, P; /* the rank's chunk and the step's (source) chunk of P */
    int causal, balanced;
    float scale;
} ring_shape;

/* The position in the whole sequence of row t of chunk c (prt_seq_pos). */
static __device__ int64_t ring_pos(const ring_shape *s, int64_t c, int64_t t) {
    return prt_seq_pos(t, s->T, c * s->T, s->balanced ? s->P : 0);
}
/* Does query row i see key row j of the step's chunk? */
static __device__ int ring_sees(const ring_shape *s, int64_t i, int64_t j) {
    return !s->causal || ring_pos(s, s->src, j) <= ring_pos(s, s->coord, i);
}

/* Column of head h's q (which 0), k (1) or v (2) in a qkv row (parc_rt.h
 * attention_fwd's layouts). */
static __device__ int64_t qkv_col(const ring_shape *s, int which, int64_t h) {
    if (s->KV == s->NH) return (which * s->NH + h) * s->HD;
    int64_t g = h / s->G;
    return (g * (s->G + 2) + (which == 0 ? h % s->G : s->G + which - 1)) * s->HD;
}
/* k (which 1) or v (2) of group g, row t of sample b in a packed kv */
static __device__ int64_t kv_at(const ring_shape *s, int which, int64_t b, int64_t t, int64_t g) {
    return (b * s->T + t) * s->WKV + ((which - 1) * s->KV + g) * s->HD;
}

static __global__ void kv_move_kernel(prt_ten qkv, prt_ten kv, ring_shape s, int to) {
    GRID_STRIDE(i, s.B * s.T * s.WKV) {
        int64_t e = i % s.HD, g = i / s.HD % s.KV, which = 1 + i / (s.HD * s.KV) % 2, row = i / s.WKV;
        int64_t x = row * s.W + qkv_col(&s, (int)which, g * s.G) + e;
        if (to) ST(kv, i, LD(qkv, x));
        else ST(qkv, x, LD(qkv, x) + LD(kv, i));
    }
}

/* The sum of v over the block, for every thread (blockDim.x a multiple of 32;
 * part: 32 floats of shared memory). */
static __device__ float block_sum(float v, float *part) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    float sum = 0.0f;
    for (int w = 0; w < nwarps; w++) sum += part[w];
    return sum;
}
#define ROWS(u, n) for (int64_t u = blockIdx.x; u < (n); u += gridDim.x)

/* A block per (sample, head, query row), a thread per head dim e. */
static __global__ void ring_fwd_kernel(prt_ten out, float *lse, prt_ten qkv, prt_ten kv, ring_shape s, int step) {
    __shared__ float part[32];
    int64_t e = threadIdx.x;
    int on = e < s.HD;
    ROWS(u, s.B * s.NH * s.T) {
        int64_t i = u % s.T, h = u / s.T % s.NH, b = u / (s.T * s.NH), g = h / s.G;
        float q = on ? LD(qkv, (b * s.T + i) * s.W + qkv_col(&s, 0, h) + e) : 0.0f;
        float acc = 0.0f, m = -INFINITY, l = 0.0f;
        for (int64_t j = 0; j < s.T; j++) {
            if (!ring_sees(&s, i, j)) continue;
            float x = block_sum(on ? q * LD(kv, kv_at(&s, 1, b, j, g) + e) : 0.0f, part) * s.scale;
            float mx = fmaxf(m, x), a = expf(m - mx), p = expf(x - mx);
            acc = acc * a + (on ? p * LD(kv, kv_at(&s, 2, b, j, g) + e) : 0.0f);
            l = l * a + p;
            m = mx;
        }
        if (l == 0.0f) continue; /* no key of this step (balanced: a half above the diagonal) */
        float lb = m + logf(l);
        int64_t oo = (b * s.T + i) * s.NH * s.HD + h * s.HD + e, lo = (b * s.NH + h) * s.T + i;
        float old = step == 0 ? -INFINITY : lse[lo];
        __syncthreads(); /* every thread has read lse before thread 0 writes it */
        if (step == 0) {
            if (on) ST(out, oo, acc / l);
            if (e == 0) lse[lo] = lb;
            continue;
        }
        float mx = fmaxf(old, lb), nl = mx + logf(expf(old - mx) + expf(lb - mx));
        if (on) ST(out, oo, LD(out, oo) * expf(old - nl) + acc / l * expf(lb - nl));
        if (e == 0) lse[lo] = nl;
    }
}

/* P and dS of query row i (head h) against key row j of the step, every
 * thread of the block (thread e holds dim e). */
static __device__ void ring_pds(const ring_shape *s, prt_ten qkv, prt_ten kv, prt_ten dout, const float *lse,
                                int64_t b, int64_t h, int64_t i, int64_t j, float D, float *part, float *p,
                                float *ds) {
    int64_t e = threadIdx.x, g = h / s->G;
    int on = e < s->HD;
    float qk = on ? LD(qkv, (b * s->T + i) * s->W + qkv_col(s, 0, h) + e) * LD(kv, kv_at(s, 1, b, j, g) + e) : 0.0f;
    float dv = on ? LD(dout, (b * s->T + i) * s->NH * s->HD + h * s->HD + e) * LD(kv, kv_at(s, 2, b, j, g) + e) : 0.0f;
    float dot = block_sum(qk, part), dp = block_sum(dv, part);
    *p = expf(dot * s->scale - lse[(b * s->NH + h) * s->T + i]);
    *ds = *p * (dp - D);
}
/* D = rowsum(dO * out) of query row i, head h. */
static __device__ float ring_D(const ring_shape *s, prt_ten dout, prt_ten out, int64_t b, int64_t h, int64_t i,
                               float *part) {
    int64_t e = threadIdx.x, oo = (b * s->T + i) * s->NH * s->HD + h * s->HD + e;
    return block_sum(e < s->HD ? LD(dout, oo) * LD(out, oo) : 0.0f, part);
}

static __global__ void ring_dq_kernel(prt_ten dqkv, prt_ten dout, prt_ten out, const float *lse, prt_ten qkv,
                                      prt_ten kv, ring_shape s) {
    __shared__ float part[32];
    int64_t e = threadIdx.x;
    int on = e < s.HD;
    ROWS(u, s.B * s.NH * s.T) {
        int64_t i = u % s.T, h = u / s.T % s.NH, b = u / (s.T * s.NH), g = h / s.G;
        float D = ring_D(&s, dout, out, b, h, i, part), acc = 0.0f;
        for (int64_t j = 0; j < s.T; j++) {
            if (!ring_sees(&s, i, j)) continue;
            float p, ds;
            ring_pds(&s, qkv, kv, dout, lse, b, h, i, j, D, part, &p, &ds);
            if (on) acc += ds * s.scale * LD(kv, kv_at(&s, 1, b, j, g) + e);
        }
        int64_t qo = (b * s.T + i) * s.W + qkv_col(&s, 0, h) + e;
        if (on) ST(dqkv, qo, LD(dqkv, qo) + acc);
    }
}

/* A block per (sample, key/value group, key row) over the group's heads and
 * the rows that see the key. */
static __global__ void ring_dkv_kernel(prt_ten dkv, prt_ten dout, prt_ten out, const float *lse, prt_ten qkv,
                                       prt_ten kv, ring_shape s) {
    __shared__ float part[32];
    int64_t e = threadIdx.x;
    int on = e < s.HD;
    ROWS(u, s.B * s.KV * s.T) {
        int64_t j = u % s.T, g = u / s.T % s.KV, b = u / (s.T * s.KV);
        float dk = 0.0f, dv = 0.0f;
        for (int64_t h = g * s.G; h < (g + 1) * s.G; h++)
            for (int64_t i = 0; i < s.T; i++) {
                if (!ring_sees(&s, i, j)) continue;
                float p, ds, D = ring_D(&s, dout, out, b, h, i, part);
                ring_pds(&s, qkv, kv, dout, lse, b, h, i, j, D, part, &p, &ds);
                if (!on) continue;
                dk += ds * s.scale * LD(qkv, (b * s.T + i) * s.W + qkv_col(&s, 0, h) + e);
                dv += p * LD(dout, (b * s.T + i) * s.NH * s.HD + h * s.HD + e);
            }
        if (!on) continue;
        int64_t ko = kv_at(&s, 1, b, j, g) + e, vo = kv_at(&s, 2, b, j, g) + e;
        ST(dkv, ko, LD(dkv, ko) + dk);
        ST(dkv, vo, LD(dkv, vo) + dv);
    }
}

/* A block per row (at most 65535 x 16, striding over the rest), a thread per
 * head dim rounded up to whole warps. */
static int ring_grid(int64_t rows) { return (int)(rows < 1 ? 1 : rows > 65535 * 16 ? 65535 * 16 : rows); }
static int ring_threads(int64_t HD) { return (int)((HD + 31) / 32 * 32); }

static ring_shape shape_of(const char *op, int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD) {
    PRT_CHECK(KV >= 1 && NH % KV == 0 && HD >= 1 && HD <= PRT_RING_MAX_HD,
              "%s: %lld heads over %lld key/value heads of %lld dims (the CUDA kernels take head dims up to %d)", op,
              (long long)NH, (long long)KV, (long long)HD, PRT_RING_MAX_HD);
    ring_shape s = {B, T, NH, KV, HD, NH / KV, (NH + 2 * KV) * HD, 2 * KV * HD, 0, 0, 1, 0, 0, 1.0f / sqrtf((float)HD)};
    return s;
}

/* The step's chunks; 0 when no block of it computes (prt_ring_kinds). */
static int block_of(ring_shape *s, const char *op, int64_t causal, int64_t coord, int64_t step, int64_t P,
                    int64_t balanced) {
    PRT_CHECK(P >= 1 && coord >= 0 && coord < P && step >= 0 && step < P && (!balanced || s->T % 2 == 0),
              "%s: step %lld of %lld at coordinate %lld (%lld rows%s)", op, (long long)step, (long long)P,
              (long long)coord, (long long)s->T, balanced ? ", split balanced" : "");
    s->coord = coord, s->src = ((coord - step) % P + P) % P, s->P = P;
    s->causal = causal != 0, s->balanced = balanced != 0;
    int kind[2][2];
    prt_ring_kinds(coord, step, P, s->causal, s->balanced, kind);
    return kind[0][0] || kind[0][1] || kind[1][0] || kind[1][1];
}

void prt_cu_ring_kv_move(prt *rt, prt_ten qkv, prt_ten kv, int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD,
                         int to) {
    ring_shape s = shape_of(to ? "ring_kv_pack" : "ring_kv_grad", B, T, NH, KV, HD);
    if (B * T == 0) return;
    kv_move_kernel<<<prt_cu_blocks(B * T * s.WKV), PRT_CU_THREADS, 0, stream_of(rt)>>>(qkv, kv, s, to);
    PRT_LAUNCH_CHECK();
}

void prt_cu_ring_attention_fwd(prt *rt, prt_ten out, prt_ten lse, prt_ten qkv, prt_ten kv, int64_t B, int64_t T,
                               int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t coord, int64_t step,
                               int64_t P, int64_t balanced) {
    ring_shape s = shape_of("ring_attention_fwd", B, T, NH, KV, HD);
    PRT_CHECK(lse.dtype == PRT_F32, "ring_attention_fwd: lse is fp32");
    if (!block_of(&s, "ring_attention_fwd", causal, coord, step, P, balanced) || B * T == 0) return;
    ring_fwd_kernel<<<ring_grid(B * NH * T), ring_threads(HD), 0, stream_of(rt)>>>(out, (float *)lse.p, qkv, kv, s,
                                                                                 (int)step);
    PRT_LAUNCH_CHECK();
}

void prt_cu_ring_attention_bwd(prt *rt, prt_ten dqkv, prt_ten dkv, prt_ten dout, prt_ten out, prt_ten lse, prt_ten qkv,
                               prt_ten kv, int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                               int64_t coord, int64_t step, int64_t P, int64_t balanced) {
    ring_shape s = shape_of("ring_attention_bwd", B, T, NH, KV, HD);
    PRT_CHECK(lse.dtype == PRT_F32, "ring_attention_bwd: lse is fp32");
    if (!block_of(&s, "ring_attention_bwd", causal, coord, step, P, balanced) || B * T == 0) return;
    const float *L = (const float *)lse.p;
    ring_dq_kernel<<<ring_grid(B * NH * T), ring_threads(HD), 0, stream_of(rt)>>>(dqkv, dout, out, L, qkv, kv, s);
    PRT_LAUNCH_CHECK();
    ring_dkv_kernel<<<ring_grid(B * KV * T), ring_threads(HD), 0, stream_of(rt)>>>(dkv, dout, out, L, qkv, kv, s);
    PRT_LAUNCH_CHECK();
}

/* seq_permute / seq_halves (parc_rt.h): one thread per element. */
static __global__ void seq_permute_kernel(prt_ten dst, prt_ten src, int64_t B, int64_t T, int64_t W, int64_t zz,
                                          int inverse) {
    GRID_STRIDE(i, B * T * W) {
        int64_t e = i % W, g = i / W % T, b = i / (W * T);
        int64_t y = (b * T + prt_seq_pos_whole(g, T, zz)) * W + e;
        if (inverse) ST(dst, i, LD(dst, i) + LD(src, y));
        else ST(dst, y, LD(src, i));
    }
}
static __global__ void seq_halves_kernel(prt_ten seq, prt_ten half0, prt_ten half1, int64_t B, int64_t h, int64_t C,
                                         int join) {
    GRID_STRIDE(i, 2 * B * h * C) {
        int64_t n = B * h * C, a = i / n, j = i % n, e = j % C, r = j / C % h, b = j / (C * h);
        int64_t row = ((b * 2 + a) * h + r) * C + e;
        prt_ten half = a ? half1 : half0;
        if (join) ST(seq, row, LD(half, j));
        else ST(half, j, LD(seq, row));
    }
}

void prt_cu_seq_permute(prt *rt, prt_ten dst, prt_ten src, int64_t B, int64_t T, int64_t W, int64_t zz, int inverse) {
    PRT_CHECK(zz >= 1 && T % (2 * zz) == 0, "seq_permute: T=%lld zz=%lld", (long long)T, (long long)zz);
    if (B * T * W == 0) return;
    seq_permute_kernel<<<prt_cu_blocks(B * T * W), PRT_CU_THREADS, 0, stream_of(rt)>>>(dst, src, B, T, W, zz, inverse);
    PRT_LAUNCH_CHECK();
}

void prt_cu_seq_halves(prt *rt, prt_ten seq, prt_ten half0, prt_ten half1, int64_t B, int64_t h, int64_t C, int join) {
    if (B * h * C == 0) return;
    seq_halves_kernel<<<prt_cu_blocks(2 * B * h * C), PRT_CU_THREADS, 0, stream_of(rt)>>>(seq, half0, half1, B, h, C,
                                                                                          join);
    PRT_LAUNCH_CHECK();
}
