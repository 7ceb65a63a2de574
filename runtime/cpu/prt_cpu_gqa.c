/*
 * prt_cpu_gqa.c — grouped-query attention on the CPU: the grouped qkv
 * [N, KV, G+2, HD] (per key/value head its G query heads, then k, then v)
 * laid out as the attention op's [N, 3, KV*G, HD], and the transpose that sums
 * each group's k and v gradients.  Storage dtypes as in prt_cpu_ops.c: loads
 * widen to fp32, stores round once.
 */
#include "prt_cpu_gqa.h"

#include "prt_internal.h"

typedef struct gqa_tensor {
    char *p;
    int64_t dtype;
} gqa_tensor;

static gqa_tensor gqa_ften(prt *rt, const void *p, const char *op) {
    int64_t dtype = prt_dtype_of(rt, p);
    PRT_CHECK(dtype != PRT_I32, "%s: a float tensor argument points into an i32 buffer", op);
    return (gqa_tensor){(char *)p, dtype < 0 ? PRT_F32 : dtype};
}

static void gqa_check(int64_t N, int64_t KV, int64_t G, int64_t HD, const char *op) {
    PRT_CHECK(N >= 0 && KV >= 1 && G >= 1 && HD >= 1, "%s: bad shape N=%lld KV=%lld G=%lld HD=%lld", op,
              (long long)N, (long long)KV, (long long)G, (long long)HD);
}

void cpu_kv_repeat_fwd(prt *rt, void *out_, const void *in_, int64_t N, int64_t KV, int64_t G, int64_t HD) {
    gqa_check(N, KV, G, HD, "kv_repeat_fwd");
    gqa_tensor out = gqa_ften(rt, out_, "kv_repeat_fwd"), in = gqa_ften(rt, in_, "kv_repeat_fwd");
    int64_t NH = KV * G;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < KV; g++) {
            int64_t src = (n * KV + g) * (G + 2) * HD;
            for (int64_t j = 0; j < G; j++) {
                int64_t h = g * G + j;
                for (int64_t w = 0; w < 3; w++) {
                    int64_t from = src + (w == 0 ? j : G + w - 1) * HD, to = ((n * 3 + w) * NH + h) * HD;
                    for (int64_t d = 0; d < HD; d++)
                        prt_store(out.p, out.dtype, to + d, prt_load(in.p, in.dtype, from + d));
                }
            }
        }
}

void cpu_kv_repeat_bwd(prt *rt, void *din_, const void *dout_, int64_t N, int64_t KV, int64_t G, int64_t HD) {
    gqa_check(N, KV, G, HD, "kv_repeat_bwd");
    gqa_tensor din = gqa_ften(rt, din_, "kv_repeat_bwd"), dout = gqa_ften(rt, dout_, "kv_repeat_bwd");
    int64_t NH = KV * G;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < KV; g++) {
            int64_t dst = (n * KV + g) * (G + 2) * HD;
            for (int64_t j = 0; j < G; j++) {
                int64_t from = (n * 3 * NH + g * G + j) * HD, to = dst + j * HD;
                for (int64_t d = 0; d < HD; d++)
                    prt_store(din.p, din.dtype, to + d,
                              prt_load(din.p, din.dtype, to + d) + prt_load(dout.p, dout.dtype, from + d));
            }
            for (int64_t w = 1; w < 3; w++) {  /* k, then v: the sum over the group's query heads */
                int64_t to = dst + (G + w - 1) * HD;
                for (int64_t d = 0; d < HD; d++) {
                    float sum = 0.0f;
                    for (int64_t j = 0; j < G; j++)
                        sum += prt_load(dout.p, dout.dtype, ((n * 3 + w) * NH + g * G + j) * HD + d);
                    prt_store(din.p, din.dtype, to + d, prt_load(din.p, din.dtype, to + d) + sum);
                }
            }
        }
}
