/*
 * prt_cpu_gqa.c — grouped-query attention on the CPU: the grouped qkv
 * [N, KV, G+2, HD] (per key/value head its G query heads, then k, then v)
 * laid out as the attention op's [N, 3, KV*G, HD], and the transpose that sums
 * each group's k and v gradients.  Tensors as in prt_cpu_tensor.h: loads
 * widen to fp32, stores round once.
 */
#include "prt_cpu_gqa.h"

#include "prt_cpu_tensor.h"

static void gqa_check(int64_t N, int64_t KV, int64_t G, int64_t HD, const char *op) {
    PRT_CHECK(N >= 0 && KV >= 1 && G >= 1 && HD >= 1, "%s: bad shape N=%lld KV=%lld G=%lld HD=%lld", op,
              (long long)N, (long long)KV, (long long)G, (long long)HD);
}

void prt_cpu_kv_repeat_fwd(prt *rt, void *out_, const void *in_, int64_t N, int64_t KV, int64_t G, int64_t HD,
                           int64_t dtypes) {
    gqa_check(N, KV, G, HD, "kv_repeat_fwd");
    tensor out = ften(rt, dtypes, 0, out_, "kv_repeat_fwd"), in = ften(rt, dtypes, 1, in_, "kv_repeat_fwd");
    int64_t NH = KV * G;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < KV; g++) {
            int64_t src = (n * KV + g) * (G + 2) * HD;
            for (int64_t j = 0; j < G; j++) {
                int64_t h = g * G + j;
                for (int64_t w = 0; w < 3; w++) {
                    int64_t from = src + (w == 0 ? j : G + w - 1) * HD, to = ((n * 3 + w) * NH + h) * HD;
                    for (int64_t d = 0; d < HD; d++) ST(out, to + d, LD(in, from + d));
                }
            }
        }
}

void prt_cpu_kv_repeat_bwd(prt *rt, void *din_, const void *dout_, int64_t N, int64_t KV, int64_t G, int64_t HD,
                           int64_t dtypes) {
    gqa_check(N, KV, G, HD, "kv_repeat_bwd");
    tensor din = ften(rt, dtypes, 0, din_, "kv_repeat_bwd"), dout = ften(rt, dtypes, 1, dout_, "kv_repeat_bwd");
    int64_t NH = KV * G;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < KV; g++) {
            int64_t dst = (n * KV + g) * (G + 2) * HD;
            for (int64_t j = 0; j < G; j++) {
                int64_t from = (n * 3 * NH + g * G + j) * HD, to = dst + j * HD;
                for (int64_t d = 0; d < HD; d++) ST(din, to + d, LD(din, to + d) + LD(dout, from + d));
            }
            for (int64_t w = 1; w < 3; w++) {  /* k, then v: the sum over the group's query heads */
                int64_t to = dst + (G + w - 1) * HD;
                for (int64_t d = 0; d < HD; d++) {
                    float sum = 0.0f;
                    for (int64_t j = 0; j < G; j++)
                        sum += LD(dout, ((n * 3 + w) * NH + g * G + j) * HD + d);
                    ST(din, to + d, LD(din, to + d) + sum);
                }
            }
        }
}
