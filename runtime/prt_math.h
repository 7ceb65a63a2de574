/*
 * prt_math.h — the element math both backends compute: bf16 and IEEE half
 * rounding (to nearest even), loads and stores of a float tensor in its storage
 * dtype, the norms' reciprocal square root, GELU (tanh approximation), SiLU and the SwiGLU
 * gate and their derivatives, the exponential of the cross-entropy and the
 * sigmoid (prt_expf_fast: no libm call, so the CPU loops vectorise), and the
 * rotary position embedding's frequencies and rotation.  Compiled
 * for the host (plain static inline C) and, under nvcc, for the device too
 * (__host__ __device__), so the CPU reference and the CUDA kernels evaluate
 * the same formulas bit for bit where the hardware rounds alike.
 * Needs only <stdint.h>, <string.h>, <math.h> and parc_rt.h's enum prt_dtype.
 */
#ifndef PRT_MATH_H
#define PRT_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "parc_rt.h"

#ifdef __CUDACC__
#define PRT_MATH static __host__ __device__ __forceinline__
#else
#define PRT_MATH static inline
#endif

/* ---------------------------------------------------------------- 16-bit floats */

/* float -> bf16, round to nearest even; a NaN stays a (quiet) NaN. */
PRT_MATH uint16_t prt_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
PRT_MATH float prt_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
/* float -> IEEE binary16, round to nearest even, with subnormals; overflow gives inf. */
PRT_MATH uint16_t prt_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000;
        int shift = 14 - exp;
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;  /* a carry into the exponent is right */
    return (uint16_t)half;
}
PRT_MATH float prt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
    float f;
    if (exp == 0x1f) x = sign | 0x7f800000 | (mant << 13);
    else if (exp) x = sign | ((exp + 112) << 23) | (mant << 13);
    else {  /* zero or subnormal: mant x 2^-24 */
        f = (float)mant * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    memcpy(&f, &x, 4);
    return f;
}

/* Element i of a float tensor stored as `dtype` (PRT_F32, PRT_BF16 or PRT_F16), and
 * the store that rounds to it.  The ops compute in fp32 through these. */
PRT_MATH float prt_load(const void *base, int64_t dtype, int64_t i) {
    switch (dtype) {
    case PRT_BF16: return prt_bf16_to_f32(((const uint16_t *)base)[i]);
    case PRT_F16: return prt_f16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}
PRT_MATH void prt_store(void *base, int64_t dtype, int64_t i, float v) {
    switch (dtype) {
    case PRT_BF16: ((uint16_t *)base)[i] = prt_f32_to_bf16(v); break;
    case PRT_F16: ((uint16_t *)base)[i] = prt_f32_to_f16(v); break;
    default: ((float *)base)[i] = v; break;
    }
}
PRT_MATH int prt_dtype_is_16(int64_t dtype) { return dtype == PRT_BF16 || dtype == PRT_F16; }

/* A float tensor and its storage dtype (PRT_F32, PRT_BF16, PRT_F16); p may be
 * NULL where the op allows it.  Both backends' ops take these. */
typedef struct prt_ten {
    void *p;
    int64_t dtype;
} prt_ten;

/* ---------------------------------------------------------------- norms */

/* 1 / sqrt(mean square + eps) of a row, in double: layer norm's (of the centred
 * row) and RMS norm's rstd; eps is the plan's (`norm rms eps 1e-5;`). */
PRT_MATH double prt_norm_rstd(double mean_square, double eps) { return 1.0 / sqrt(mean_square + eps); }

/* ---------------------------------------------------------------- activations */

#define PRT_GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

/* tanh as a clamped odd rational function, x P(x^2) / Q(x^2): no branch and no
 * libm call, so the CPU loops vectorise; within a few float ulp of tanh.
 * The coefficients are those of Eigen's generic_fast_tanh_float. */
PRT_MATH float prt_tanh_rational(float x) {
    const float clamp = 7.90531110763549805f;
    x = x > clamp ? clamp : (x < -clamp ? -clamp : x);
    float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
PRT_MATH float prt_gelu(float x) {
    return 0.5f * x * (1.0f + prt_tanh_rational(PRT_GELU_SCALE * (x + 0.044715f * x * x * x)));
}
/* d gelu / dx. */
PRT_MATH float prt_gelu_grad(float x) {
    float t = prt_tanh_rational(PRT_GELU_SCALE * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * PRT_GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}

/* exp(x) in fp32 without libm, so CPU loops over it vectorise: x = n ln2 + r,
 * |r| <= ln2/2 (Cody-Waite: ln2 split into a part exact in float and the rest),
 * e^r by its Taylor polynomial to degree 7 (truncation below 1e-8 relative),
 * times 2^n built in the exponent bits.  Within 2 ulp of expf for |x| < 87;
 * 0 below -87.3 (where expf is subnormal or 0), +inf above 88.7.  n is taken
 * from the bits of x log2(e) + 1.5 2^23, so no float-to-int conversion can
 * overflow, whatever x is. */
PRT_MATH float prt_expf_fast(float x) {
    const float lo = -87.3f, hi = 88.7f, shifter = 12582912.0f; /* 1.5 x 2^23 */
    float xc = x < lo ? lo : (x > hi ? hi : x);
    float t = xc * 1.44269504088896341f + shifter, n = t - shifter;
    float r = xc - n * 0.693145751953125f;   /* ln2, high part (exact product for |n| < 2^11) */
    r = r - n * 1.42860682030941723e-6f;     /* ln2 - the high part */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t tb, bits;
    memcpy(&tb, &t, 4);
    bits = (tb - 0x4b400000u + 127u) << 23;   /* (n + 127) << 23: 2^n, n in [-126, 128] */
    float scale;
    memcpy(&scale, &bits, 4);
    float y = n > 127.0f ? p * 2.0f * 1.70141183460469231732e38f : p * scale; /* 2^128 overflows: p 2 2^127 */
    return x < lo ? 0.0f : (x > hi ? INFINITY : y);
}

/* The logistic function, through prt_expf_fast (above) so the CPU loops over it
 * vectorise and both backends evaluate the same bits. */
PRT_MATH float prt_sigmoid(float x) { return 1.0f / (1.0f + prt_expf_fast(-x)); }

/* SwiGLU of one (gate g, up u) pair: silu(g) * u; and, for an output gradient d,
 * the gradients of the gate, d u s (1 + g (1 - s)), and of the up half, d g s,
 * s = sigmoid(g). */
PRT_MATH float prt_swiglu(float g, float u) { return g * prt_sigmoid(g) * u; }
PRT_MATH float prt_swiglu_dgate(float d, float g, float u) {
    float s = prt_sigmoid(g);
    return d * u * s * (1.0f + g * (1.0f - s));
}
PRT_MATH float prt_swiglu_dup(float d, float g) { return d * g * prt_sigmoid(g); }

/* ---------------------------------------------------------------- optimizers */

/* AdamW's per-step constants (parc_rt.h, prt_adamw), in fp32 as the updates use them. */
typedef struct prt_adamw_args {
    float b1, b2, lr, eps, wd, bc1, bc2;   /* bc = 1 - beta^step: the bias corrections */
} prt_adamw_args;

PRT_MATH prt_adamw_args prt_adamw_prepare(int64_t step, double lr, double beta1, double beta2, double eps,
                                          double weight_decay) {
    prt_adamw_args a = {(float)beta1, (float)beta2, (float)lr, (float)eps, (float)weight_decay,
                        (float)(1.0 - pow(beta1, (double)step)), (float)(1.0 - pow(beta2, (double)step))};
    return a;
}
/* One element: *m and *v get their new (fp32) moments, the new parameter is
 * returned; decoupled weight decay, bias-corrected (torch.optim.AdamW). */
PRT_MATH float prt_adamw_update(const prt_adamw_args *a, float p, float g, float *m, float *v) {
    float mi = a->b1 * *m + (1.0f - a->b1) * g, vi = a->b2 * *v + (1.0f - a->b2) * g * g;
    *m = mi;
    *v = vi;
    float mhat = mi / a->bc1, vhat = vi / a->bc2;
    return p - a->lr * (mhat / (sqrtf(vhat) + a->eps) + a->wd * p);
}
/* One SGD element (torch.optim.SGD): d = g + wd p; with momentum (mom non-NULL)
 * *mom = mu *mom + d and d = *mom; returns p - lr d. */
PRT_MATH float prt_sgd_update(float p, float g, float *mom, float lr, float mu, float wd) {
    float d = g + wd * p;
    if (mom) {
        d = mu * *mom + d;
        *mom = d;
    }
    return p - lr * d;
}

/* Element i of one optimizer step on tensors in their storage dtypes
 * (parc_rt.h's adamw and sgd): the fp32 master when there is one, else the
 * parameter itself, takes the update, and a master's parameter gets its
 * rounding; mom may be absent (no momentum).  The loops of both backends. */
PRT_MATH void prt_adamw_element(const prt_adamw_args *a, prt_ten param, prt_ten master, prt_ten grad, prt_ten m,
                                prt_ten v, int64_t i) {
    prt_ten p = master.p ? master : param;
    float mi = prt_load(m.p, m.dtype, i), vi = prt_load(v.p, v.dtype, i);
    float pi = prt_adamw_update(a, prt_load(p.p, p.dtype, i), prt_load(grad.p, grad.dtype, i), &mi, &vi);
    prt_store(m.p, m.dtype, i, mi);
    prt_store(v.p, v.dtype, i, vi);
    prt_store(p.p, p.dtype, i, pi);
    if (master.p) prt_store(param.p, param.dtype, i, pi);
}
PRT_MATH void prt_sgd_element(prt_ten param, prt_ten master, prt_ten grad, prt_ten mom, float lr, float mu, float wd,
                              int64_t i) {
    prt_ten p = master.p ? master : param;
    float mi = mom.p ? prt_load(mom.p, mom.dtype, i) : 0.0f;
    float pi = prt_sgd_update(prt_load(p.p, p.dtype, i), prt_load(grad.p, grad.dtype, i), mom.p ? &mi : NULL, lr, mu, wd);
    if (mom.p) prt_store(mom.p, mom.dtype, i, mi);
    prt_store(p.p, p.dtype, i, pi);
    if (master.p) prt_store(param.p, param.dtype, i, pi);
}

/* ---------------------------------------------------------------- dropout masks */

/* A dropout mask element is a pure function of (seed, step, layer, site,
 * global element index), so every rank computes any element without state and
 * every layout of a plan draws the same masks: a counter-based generator in
 * the manner of Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"
 * (SC 2011), with SplitMix64's output function (Steele, Lea and Flood,
 * "Fast splittable pseudorandom number generators", OOPSLA 2014; the same
 * function as prt_internal.h's prt_splitmix64) as the hash.  Sites: 0 the
 * attention probabilities, 1 attention's output branch, 2 the MLP's. */
PRT_MATH uint64_t prt_dropout_mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
/* The key of one (step, layer, site): what prt_dropout_keep hashes an index with. */
PRT_MATH uint64_t prt_dropout_key(int64_t seed, int64_t step, int64_t layer, int64_t site) {
    uint64_t k = prt_dropout_mix((uint64_t)seed ^ 0x64726f706f7574ULL); /* "dropout" */
    k = prt_dropout_mix(k ^ (uint64_t)step);
    k = prt_dropout_mix(k ^ ((uint64_t)layer * 4u + (uint64_t)site));
    return prt_dropout_mix(k);
}
/* Elements whose 32-bit draw falls below round(p * 2^32) are dropped. */
PRT_MATH uint32_t prt_dropout_threshold(double p) {
    double t = floor(p * 4294967296.0 + 0.5);
    return t <= 0 ? 0u : t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}
/* 1 when element `index` is kept. */
PRT_MATH int prt_dropout_keep(uint64_t key, uint64_t index, uint32_t threshold) {
    return (uint32_t)(prt_dropout_mix(key ^ (index + 0x632be59bd9b4e019ULL)) >> 32) >= threshold;
}
/* The scale of a kept element, 1 / (1 - p) in fp32. */
PRT_MATH float prt_dropout_scale(double p) { return (float)(1.0 / (1.0 - p)); }


/* ---------------------------------------------------------------- rotary position embedding */

/* The inverse frequency of pair i (dims i and i + HD/2) of a head of HD dims,
 * in fp32 as Hugging Face transformers computes it (modeling_rope_utils.py,
 * _compute_default_rope_parameters): 1 / theta^(2i/HD), the exponent and the
 * quotient rounded to fp32, the power of the fp32 theta in double rounded once.
 * With factor > 0, Llama 3.1's frequency scaling (Meta's llama-models
 * reference, apply_scaling; transformers' _compute_llama3_parameters), in fp32
 * in the order transformers evaluates it: with wavelength w = 2 pi / f, a
 * frequency whose w exceeds original / low_freq_factor is divided by factor,
 * one whose w is below original / high_freq_factor is kept, and between the
 * two s = (original / w - low) / (high - low) blends them: (1 - s) f / factor +
 * s f.  (torch evaluates c / x as c * (1 / x): so do these.) */
PRT_MATH float prt_rope_inv_freq(int64_t i, int64_t HD, double theta, double factor, double low_freq_factor,
                                 double high_freq_factor, int64_t original) {
    float e = (float)(2 * i) / (float)HD;
    float f = 1.0f / (float)pow((double)(float)theta, (double)e);
    if (!(factor > 0)) return f;
    float fac = (float)factor, low = (float)low_freq_factor, span = (float)(high_freq_factor - low_freq_factor);
    float wavelen = (1.0f / f) * (float)(2.0 * 3.14159265358979323846);
    float low_wavelen = (float)((double)original / low_freq_factor);
    float high_wavelen = (float)((double)original / high_freq_factor);
    if (wavelen > low_wavelen) return f / fac;
    if (wavelen < high_wavelen) return f;
    float smooth = ((1.0f / wavelen) * (float)original - low) / span;
    return (1.0f - smooth) * f / fac + smooth * f;
}
/* cos and sin of the angle of position `pos` at inverse frequency f: the
 * angle pos x f in fp32 (transformers' fp32 product), its cosine and sine in
 * double, rounded to fp32.  On the device through sincospi of angle / pi,
 * whose argument reduction is exact (double cos and sin carry a slow path
 * with a stack frame for huge arguments); the double quotient's error, at most
 * 1e-11 radian for any angle of a 2^31-token position, is far below fp32's. */
PRT_MATH void prt_rope_cos_sin(int64_t pos, float f, float *c, float *s) {
    float angle = (float)pos * f;
#ifdef __CUDA_ARCH__
    double sn, cs;
    sincospi((double)angle * 0.31830988618379067154, &sn, &cs);
    *c = (float)cs;
    *s = (float)sn;
#else
    *c = (float)cos((double)angle);
    *s = (float)sin((double)angle);
#endif
}
/* The rotation of a pair (x1 = dim i, x2 = dim i + HD/2) by the angle whose
 * cos and sin are c, s: x cos + rotate_half(x) sin, rotate_half(x) = (-x2, x1). */
PRT_MATH void prt_rope_rotate(float x1, float x2, float c, float s, float *y1, float *y2) {
    *y1 = x1 * c - x2 * s;
    *y2 = x2 * c + x1 * s;
}
/* Its transpose, the rotation by the opposite angle: the backward's. */
PRT_MATH void prt_rope_unrotate(float g1, float g2, float c, float s, float *d1, float *d2) {
    *d1 = g1 * c + g2 * s;
    *d2 = g2 * c - g1 * s;
}

/* The load-balanced split of a sequence over a context axis of zz ranks
 * (`cp_split balanced`): the sequence in 2 zz chunks, rank r holding chunks r
 * and 2 zz - 1 - r, so every rank of a causal model does the same attention
 * work (Megatron-LM's and torchtitan's split).  The data are loaded in that
 * order (prt_data permutes each sample), and row t of a rank's T rows (first
 * row t_offset = r T of the permuted sequence) is the token at position
 * prt_seq_pos of the whole sequence.  zz 0: no permutation, t_offset + t. */
PRT_MATH int64_t prt_seq_pos(int64_t t, int64_t T, int64_t t_offset, int64_t zz) {
    if (zz <= 0 || T < 2) return t_offset + t;
    int64_t h = T / 2, r = t_offset / T;
    return t < h ? r * h + t : (2 * zz - 1 - r) * h + (t - h);
}
/* Row t of a whole permuted sequence of T_all rows (zz ranks): its position. */
PRT_MATH int64_t prt_seq_pos_whole(int64_t t, int64_t T_all, int64_t zz) {
    if (zz <= 0) return t;
    int64_t T = T_all / zz;
    return prt_seq_pos(t % T, T, t / T * T, zz);
}

/* Ring attention's step `step` of P on the rank at coord (parc_rt.h
 * ring_attention_fwd): the blocks of its query rows and of the step's keys,
 * in halves (a, b: 0 the first half of the rank's rows, 1 the second) when
 * the split is balanced, else one block each (a = b = 0).  kind[a][b]: 0
 * masked whole (nothing computed), 1 the diagonal (causal within), 2 whole.
 * The number of blocks is 2 balanced, else 1 (prt_ring_halves). */
PRT_MATH int prt_ring_halves(int balanced) { return balanced ? 2 : 1; }
PRT_MATH void prt_ring_kinds(int64_t coord, int64_t step, int64_t P, int causal, int balanced, int kind[2][2]) {
    int64_t src = ((coord - step) % P + P) % P;
    int n = prt_ring_halves(balanced);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            if (a >= n || b >= n) {
                kind[a][b] = 0;
                continue;
            }
            /* the chunk index of each block in the sequence: 2P halves balanced, else P chunks */
            int64_t q = balanced ? (a ? 2 * P - 1 - coord : coord) : coord;
            int64_t k = balanced ? (b ? 2 * P - 1 - src : src) : src;
            kind[a][b] = !causal ? 2 : k > q ? 0 : k == q ? 1 : 2;
        }
}

#endif
