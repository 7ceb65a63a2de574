/*
 * prt_cpu_dropout.c — dropout of a [batch, seq, C] branch output on the CPU:
 * the mask is prt_math.h's pure function of (seed, step, layer, site, global
 * element index), stored as one byte per element for the backward; during an
 * evaluation (prt_eval.c) nothing is dropped.  Storage
 * dtypes as in prt_cpu_ops.c: loads widen to fp32, stores round once.
 */
#include "prt_cpu_dropout.h"

#include "prt_cpu_tensor.h"
#include "prt_internal.h"

/* The mask (pointer argument 2) is u8 by the call's definition: a word that
 * says otherwise is an error. */
static uint8_t *drop_mask(prt *rt, int64_t dtypes, const void *p, const char *op) {
    PRT_CHECK(p && prt_arg_dtype(rt, dtypes, 1, p, op) == PRT_U8, "%s: the mask must be a u8 buffer", op);
    return (uint8_t *)p;
}

void prt_cpu_dropout_fwd(prt *rt, void *out_, void *mask_, const void *in_, int64_t B, int64_t T, int64_t C,
                         int64_t first_sample, int64_t t_offset, int64_t T_global, int64_t step, int64_t layer,
                         int64_t site, double p, int64_t dtypes) {
    PRT_CHECK(B >= 0 && T >= 0 && C >= 0 && first_sample >= 0 && t_offset >= 0 && t_offset + T <= T_global,
              "dropout_fwd: bad shape B=%lld T=%lld C=%lld t_offset=%lld T_global=%lld", (long long)B, (long long)T,
              (long long)C, (long long)t_offset, (long long)T_global);
    PRT_CHECK(p >= 0 && p < 1, "dropout_fwd: p = %g is outside [0, 1)", p);
    if (rt->eval_active) p = 0; /* evaluation runs the model without dropout */
    tensor out = ften(rt, dtypes, 0, out_, "dropout_fwd"), in = ften(rt, dtypes, 2, in_, "dropout_fwd");
    uint8_t *mask = drop_mask(rt, dtypes, mask_, "dropout_fwd");
    uint64_t key = prt_dropout_key(rt->plan.seed, step, layer, site);
    uint32_t threshold = prt_dropout_threshold(p);
    float scale = prt_dropout_scale(p);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t row = b * T + t, global = ((first_sample + b) * T_global + t_offset + t) * C;
            for (int64_t c = 0; c < C; c++) {
                int keep = prt_dropout_keep(key, (uint64_t)(global + c), threshold);
                mask[row * C + c] = (uint8_t)keep;
                prt_store(out.p, out.dtype, row * C + c, keep ? prt_load(in.p, in.dtype, row * C + c) * scale : 0.0f);
            }
        }
}

void prt_cpu_dropout_bwd(prt *rt, void *din_, const void *mask_, const void *dout_, int64_t n, double p,
                             int64_t dtypes) {
    PRT_CHECK(n >= 0 && p >= 0 && p < 1, "dropout_bwd: n = %lld, p = %g", (long long)n, p);
    tensor din = ften(rt, dtypes, 0, din_, "dropout_bwd"), dout = ften(rt, dtypes, 2, dout_, "dropout_bwd");
    const uint8_t *mask = drop_mask(rt, dtypes, mask_, "dropout_bwd");
    float scale = prt_dropout_scale(p);
    int write = prt_word_writes(dtypes, 0);  /* PRT_ARG_WRITE: din = mask dout scale, 0 where dropped */
    for (int64_t i = 0; i < n; i++)
        if (mask[i])
            prt_store(din.p, din.dtype, i,
                      (write ? 0.0f : prt_load(din.p, din.dtype, i)) + prt_load(dout.p, dout.dtype, i) * scale);
        else if (write)
            prt_store(din.p, din.dtype, i, 0.0f);
}
