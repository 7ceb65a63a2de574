/*
 * prt_cpu_rope.c — the rotary position embedding on the CPU (parc_rt.h
 * rope_fwd / rope_bwd): per position and pair of head dims one cos and sin
 * (prt_math.h's frequencies and rotation), applied to the rotated heads of
 * every sample and group; the other heads pass through.  Tensors as in
 * prt_cpu_tensor.h: loads widen to fp32, stores round once; the backward adds
 * into din in fp32 unless PRT_ARG_WRITE says it writes it.  No scratch.
 */
#include "prt_cpu_rope.h"

#include "prt_cpu_tensor.h"

static void rope_check(int64_t B, int64_t T, int64_t G, int64_t U, int64_t R, int64_t HD, int64_t t_offset,
                       double theta, const char *op) {
    PRT_CHECK(B >= 0 && T >= 0 && G >= 1 && U >= 1 && R >= 0 && R <= U && HD >= 2 && HD % 2 == 0 && t_offset >= 0,
              "%s: bad shape B=%lld T=%lld G=%lld U=%lld R=%lld HD=%lld t_offset=%lld", op, (long long)B,
              (long long)T, (long long)G, (long long)U, (long long)R, (long long)HD, (long long)t_offset);
    PRT_CHECK(theta > 0, "%s: theta %g is not positive", op, theta);
}

/* dst = the rotation of src's rotated heads (the transpose when backward),
 * src's other heads as they are; with accumulate, added into dst. */
static void rope(tensor dst, tensor src, int backward, int accumulate, int64_t B, int64_t T, int64_t G, int64_t U,
                 int64_t R, int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low, double high,
                 int64_t original) {
    int64_t half = HD / 2, row = G * U * HD;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < half; i++) {
            float c, s;
            prt_rope_cos_sin(prt_seq_pos(t, T, t_offset, zz), prt_rope_inv_freq(i, HD, theta, factor, low, high, original), &c, &s);
            for (int64_t b = 0; b < B; b++)
                for (int64_t g = 0; g < G; g++)
                    for (int64_t u = 0; u < U; u++) {
                        int64_t e1 = (b * T + t) * row + (g * U + u) * HD + i, e2 = e1 + half;
                        float x1 = LD(src, e1), x2 = LD(src, e2), y1 = x1, y2 = x2;
                        if (u < R && backward) prt_rope_unrotate(x1, x2, c, s, &y1, &y2);
                        else if (u < R) prt_rope_rotate(x1, x2, c, s, &y1, &y2);
                        if (accumulate) y1 += LD(dst, e1), y2 += LD(dst, e2);
                        ST(dst, e1, y1);
                        ST(dst, e2, y2);
                    }
        }
}

void prt_cpu_rope_fwd(prt *rt, void *out_, const void *in_, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                      int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                      double high_freq_factor, int64_t original_max_positions, int64_t dtypes) {
    rope_check(B, T, G, U, R, HD, t_offset, theta, "rope_fwd");
    tensor out = ften(rt, dtypes, 0, out_, "rope_fwd"), in = ften(rt, dtypes, 1, in_, "rope_fwd");
    rope(out, in, 0, 0, B, T, G, U, R, HD, t_offset, zz, theta, factor, low_freq_factor, high_freq_factor,
         original_max_positions);
}

void prt_cpu_rope_bwd(prt *rt, void *din_, const void *dout_, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                      int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                      double high_freq_factor, int64_t original_max_positions, int64_t dtypes) {
    rope_check(B, T, G, U, R, HD, t_offset, theta, "rope_bwd");
    tensor din = ften(rt, dtypes, 0, din_, "rope_bwd"), dout = ften(rt, dtypes, 1, dout_, "rope_bwd");
    rope(din, dout, 1, !prt_word_writes(dtypes, 0), B, T, G, U, R, HD, t_offset, zz, theta, factor, low_freq_factor,
         high_freq_factor, original_max_positions);
}
