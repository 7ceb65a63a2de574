/*
 * prt_cuda_rope.cu — the rotary position embedding on the GPU (parc_rt.h
 * rope_fwd / rope_bwd) with the CPU reference's semantics (cpu/prt_cpu_rope.c):
 * one thread per (sample, position, pair of head dims), which forms the pair's
 * cos and sin once (prt_math.h, the same formulas in double) and rotates that
 * pair in every rotated head of the row, passing the others through.  The
 * backward adds into din in fp32 unless it writes it.  No scratch.
 */
#include <stdint.h>

#include "prt_cuda.h"

#define LD(t, i) prt_ld((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_st((t).p, (t).dtype, (i), (v))

typedef struct {
    int64_t B, T, G, U, R, HD, t_offset, original, zz;
    double theta, factor, low, high;
} rope_shape;

static __global__ void k_rope(int backward, int accumulate, prt_ten dst, prt_ten src, rope_shape a) {
    int64_t half = a.HD / 2, row = a.G * a.U * a.HD, total = a.B * a.T * half;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e % half, bt = e / half, t = bt % a.T;
        float c, s;
        prt_rope_cos_sin(prt_seq_pos(t, a.T, a.t_offset, a.zz), prt_rope_inv_freq(i, a.HD, a.theta, a.factor, a.low, a.high, a.original), &c,
                         &s);
        for (int64_t gu = 0; gu < a.G * a.U; gu++) {
            int64_t e1 = bt * row + gu * a.HD + i, e2 = e1 + half;
            float x1 = LD(src, e1), x2 = LD(src, e2), y1 = x1, y2 = x2;
            if (gu % a.U < a.R) {
                if (backward) prt_rope_unrotate(x1, x2, c, s, &y1, &y2);
                else prt_rope_rotate(x1, x2, c, s, &y1, &y2);
            }
            if (accumulate) y1 += LD(dst, e1), y2 += LD(dst, e2);
            ST(dst, e1, y1);
            ST(dst, e2, y2);
        }
    }
}

static void rope(prt *rt, int backward, int accumulate, prt_ten dst, prt_ten src, rope_shape a) {
    PRT_CHECK(a.B >= 0 && a.T >= 0 && a.G >= 1 && a.U >= 1 && a.R >= 0 && a.R <= a.U && a.HD >= 2 && a.HD % 2 == 0 &&
                  a.t_offset >= 0 && a.theta > 0,
              "rope: bad shape B=%lld T=%lld G=%lld U=%lld R=%lld HD=%lld t_offset=%lld theta=%g", (long long)a.B,
              (long long)a.T, (long long)a.G, (long long)a.U, (long long)a.R, (long long)a.HD, (long long)a.t_offset,
              a.theta);
    int64_t total = a.B * a.T * (a.HD / 2);
    if (total <= 0) return;
    k_rope<<<prt_cu_blocks(total), PRT_CU_THREADS, 0, prt_cu(rt)->stream>>>(backward, accumulate, dst, src, a);
    PRT_LAUNCH_CHECK();
}

void prt_cu_rope_fwd(prt *rt, prt_ten out, prt_ten in, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                     int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                     double high_freq_factor, int64_t original_max_positions) {
    rope_shape a = {B, T, G, U, R, HD, t_offset, original_max_positions, zz, theta, factor, low_freq_factor,
                    high_freq_factor};
    rope(rt, 0, 0, out, in, a);
}

void prt_cu_rope_bwd(prt *rt, prt_ten din, prt_ten dout, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                     int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                     double high_freq_factor, int64_t original_max_positions, int write) {
    rope_shape a = {B, T, G, U, R, HD, t_offset, original_max_positions, zz, theta, factor, low_freq_factor,
                    high_freq_factor};
    rope(rt, 1, !write, din, dout, a);
}
