/*
 * prt_cuda_ring.cu — ring attention's ops on the device (parc_rt.h
 * ring_kv_pack, ring_kv_grad, ring_attention_fwd, ring_attention_bwd): the
 * math of runtime/cpu/prt_cpu_attention.c's ring steps, one thread per row.
 *
 * The forward gives each (sample, head, query row) a thread that walks the
 * step's keys with an online softmax (running max and sum, the output row in
 * registers, HD <= PRT_CU_RING_HD) and merges the block into out and lse by
 * the rows' logsumexp.  The backward runs two kernels, neither with atomics
 * (so 16-bit gradients add as the CPU's do, once per step): one thread per
 * query row for dq, one per (sample, key/value group, key row) for dk and dv
 * over the group's query heads and the rows that see the key, each
 * recomputing P = exp(scale q k - L) and dS = P (dO v - D), D = rowsum(dO out).
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
#define PRT_CU_RING_HD 256

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

static __global__ void ring_fwd_kernel(prt_ten out, float *lse, prt_ten qkv, prt_ten kv, ring_shape s, int step) {
    GRID_STRIDE(u, s.B * s.NH * s.T) {
        int64_t i = u % s.T, h = u / s.T % s.NH, b = u / (s.T * s.NH), g = h / s.G;
        int64_t qo = (b * s.T + i) * s.W + qkv_col(&s, 0, h);
        float acc[PRT_CU_RING_HD], m = -INFINITY, l = 0.0f;
        for (int64_t e = 0; e < s.HD; e++) acc[e] = 0.0f;
        for (int64_t j = 0; j < s.T; j++) {
            if (!ring_sees(&s, i, j)) continue;
            int64_t ko = kv_at(&s, 1, b, j, g), vo = kv_at(&s, 2, b, j, g);
            float dot = 0.0f;
            for (int64_t e = 0; e < s.HD; e++) dot += LD(qkv, qo + e) * LD(kv, ko + e);
            float x = dot * s.scale, mx = fmaxf(m, x), a = expf(m - mx), p = expf(x - mx);
            for (int64_t e = 0; e < s.HD; e++) acc[e] = acc[e] * a + p * LD(kv, vo + e);
            l = l * a + p;
            m = mx;
        }
        if (l == 0.0f) continue; /* no key of this step (balanced: a half above the diagonal) */
        float lb = m + logf(l);
        int64_t oo = (b * s.T + i) * s.NH * s.HD + h * s.HD, lo = (b * s.NH + h) * s.T + i;
        if (step == 0) {
            for (int64_t e = 0; e < s.HD; e++) ST(out, oo + e, acc[e] / l);
            lse[lo] = lb;
            continue;
        }
        float old = lse[lo], mx = fmaxf(old, lb), nl = mx + logf(expf(old - mx) + expf(lb - mx));
        float ca = expf(old - nl), cb = expf(lb - nl);
        for (int64_t e = 0; e < s.HD; e++) ST(out, oo + e, LD(out, oo + e) * ca + acc[e] / l * cb);
        lse[lo] = nl;
    }
}

/* P and dS of query row i (head h) against key row j of the step. */
static __device__ void ring_pds(const ring_shape *s, prt_ten qkv, prt_ten kv, prt_ten dout, prt_ten out,
                                const float *lse, int64_t b, int64_t h, int64_t i, int64_t j, float *p, float *ds) {
    int64_t g = h / s->G, qo = (b * s->T + i) * s->W + qkv_col(s, 0, h);
    int64_t ko = kv_at(s, 1, b, j, g), vo = kv_at(s, 2, b, j, g), oo = (b * s->T + i) * s->NH * s->HD + h * s->HD;
    float dot = 0.0f, dp = 0.0f, D = 0.0f;
    for (int64_t e = 0; e < s->HD; e++) {
        dot += LD(qkv, qo + e) * LD(kv, ko + e);
        dp += LD(dout, oo + e) * LD(kv, vo + e);
        D += LD(dout, oo + e) * LD(out, oo + e);
    }
    *p = expf(dot * s->scale - lse[(b * s->NH + h) * s->T + i]);
    *ds = *p * (dp - D);
}

static __global__ void ring_dq_kernel(prt_ten dqkv, prt_ten dout, prt_ten out, const float *lse, prt_ten qkv,
                                      prt_ten kv, ring_shape s) {
    GRID_STRIDE(u, s.B * s.NH * s.T) {
        int64_t i = u % s.T, h = u / s.T % s.NH, b = u / (s.T * s.NH), g = h / s.G;
        int64_t qo = (b * s.T + i) * s.W + qkv_col(&s, 0, h);
        float acc[PRT_CU_RING_HD];
        for (int64_t e = 0; e < s.HD; e++) acc[e] = 0.0f;
        for (int64_t j = 0; j < s.T; j++) {
            if (!ring_sees(&s, i, j)) continue;
            float p, ds;
            ring_pds(&s, qkv, kv, dout, out, lse, b, h, i, j, &p, &ds);
            int64_t ko = kv_at(&s, 1, b, j, g);
            for (int64_t e = 0; e < s.HD; e++) acc[e] += ds * s.scale * LD(kv, ko + e);
        }
        for (int64_t e = 0; e < s.HD; e++) ST(dqkv, qo + e, LD(dqkv, qo + e) + acc[e]);
    }
}

static __global__ void ring_dkv_kernel(prt_ten dkv, prt_ten dout, prt_ten out, const float *lse, prt_ten qkv,
                                       prt_ten kv, ring_shape s) {
    GRID_STRIDE(u, s.B * s.KV * s.T) {
        int64_t j = u % s.T, g = u / s.T % s.KV, b = u / (s.T * s.KV);
        float dk[PRT_CU_RING_HD], dv[PRT_CU_RING_HD];
        for (int64_t e = 0; e < s.HD; e++) dk[e] = dv[e] = 0.0f;
        for (int64_t h = g * s.G; h < (g + 1) * s.G; h++)
            for (int64_t i = 0; i < s.T; i++) {
                if (!ring_sees(&s, i, j)) continue;
                float p, ds;
                ring_pds(&s, qkv, kv, dout, out, lse, b, h, i, j, &p, &ds);
                int64_t qo = (b * s.T + i) * s.W + qkv_col(&s, 0, h), oo = (b * s.T + i) * s.NH * s.HD + h * s.HD;
                for (int64_t e = 0; e < s.HD; e++) {
                    dk[e] += ds * s.scale * LD(qkv, qo + e);
                    dv[e] += p * LD(dout, oo + e);
                }
            }
        int64_t ko = kv_at(&s, 1, b, j, g), vo = kv_at(&s, 2, b, j, g);
        for (int64_t e = 0; e < s.HD; e++) {
            ST(dkv, ko + e, LD(dkv, ko + e) + dk[e]);
            ST(dkv, vo + e, LD(dkv, vo + e) + dv[e]);
        }
    }
}

static ring_shape shape_of(const char *op, int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD) {
    PRT_CHECK(KV >= 1 && NH % KV == 0 && HD >= 1 && HD <= PRT_CU_RING_HD,
              "%s: %lld heads over %lld key/value heads of %lld dims (the CUDA kernels take head dims up to %d)", op,
              (long long)NH, (long long)KV, (long long)HD, PRT_CU_RING_HD);
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
    ring_fwd_kernel<<<prt_cu_blocks(B * NH * T), PRT_CU_THREADS, 0, stream_of(rt)>>>(out, (float *)lse.p, qkv, kv, s,
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
    ring_dq_kernel<<<prt_cu_blocks(B * NH * T), PRT_CU_THREADS, 0, stream_of(rt)>>>(dqkv, dout, out, L, qkv, kv, s);
    PRT_LAUNCH_CHECK();
    ring_dkv_kernel<<<prt_cu_blocks(B * KV * T), PRT_CU_THREADS, 0, stream_of(rt)>>>(dkv, dout, out, L, qkv, kv, s);
    PRT_LAUNCH_CHECK();
}
