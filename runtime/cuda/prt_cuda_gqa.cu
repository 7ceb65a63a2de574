/*
 * prt_cuda_gqa.cu — grouped-query attention's key/value repeat on the GPU
 * (parc_rt.h kv_repeat_fwd / kv_repeat_bwd) with the CPU reference's
 * semantics (cpu/prt_cpu_gqa.c): one thread per element of the grouped
 * tensor [N, KV, G+2, HD]; the backward's k and v sums over the group are
 * formed in fp32 in the order the CPU adds them and stored once.  No scratch.
 */
#include <stdint.h>

#include "prt_cuda.h"

#define LD(t, i) prt_ld((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_st((t).p, (t).dtype, (i), (v))

/* The element of out[N,3,KV*G,HD] that grouped element e of in[N,KV,G+2,HD]
 * (slot s: query j < G, k = G, v = G+1) maps to, for query head j of the group. */
static __device__ __forceinline__ int64_t gqa_out_at(int64_t n, int64_t g, int64_t w, int64_t j, int64_t d, int64_t KV,
                                              int64_t G, int64_t HD) {
    return ((n * 3 + w) * KV * G + g * G + j) * HD + d;
}

static __global__ void k_kv_repeat(int backward, prt_ten x, prt_ten y, int64_t N, int64_t KV, int64_t G, int64_t HD) {
    int64_t total = N * KV * (G + 2) * HD;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t d = e % HD, s = (e / HD) % (G + 2), g = (e / (HD * (G + 2))) % KV, n = e / (HD * (G + 2) * KV);
        if (!backward) {  /* x = out, y = in */
            float v = LD(y, e);
            if (s < G) ST(x, gqa_out_at(n, g, 0, s, d, KV, G, HD), v);
            else
                for (int64_t j = 0; j < G; j++) ST(x, gqa_out_at(n, g, s - G + 1, j, d, KV, G, HD), v);
        } else {  /* x = din, y = dout */
            float sum = 0.0f;
            if (s < G) sum = LD(y, gqa_out_at(n, g, 0, s, d, KV, G, HD));
            else
                for (int64_t j = 0; j < G; j++) sum += LD(y, gqa_out_at(n, g, s - G + 1, j, d, KV, G, HD));
            ST(x, e, LD(x, e) + sum);
        }
    }
}

static void kv_repeat(prt *rt, int backward, prt_ten x, prt_ten y, int64_t N, int64_t KV, int64_t G, int64_t HD) {
    PRT_CHECK(N >= 0 && KV >= 1 && G >= 1 && HD >= 1, "kv_repeat: bad shape N=%lld KV=%lld G=%lld HD=%lld",
              (long long)N, (long long)KV, (long long)G, (long long)HD);
    int64_t total = N * KV * (G + 2) * HD;
    if (total <= 0) return;
    k_kv_repeat<<<prt_cu_blocks(total), PRT_CU_THREADS, 0, prt_cu(rt)->stream>>>(backward, x, y, N, KV, G, HD);
    PRT_LAUNCH_CHECK();
}

void prt_cu_kv_repeat_fwd(prt *rt, prt_ten out, prt_ten in, int64_t N, int64_t KV, int64_t G, int64_t HD) {
    kv_repeat(rt, 0, out, in, N, KV, G, HD);
}

void prt_cu_kv_repeat_bwd(prt *rt, prt_ten din, prt_ten dout, int64_t N, int64_t KV, int64_t G, int64_t HD) {
    kv_repeat(rt, 1, din, dout, N, KV, G, HD);
}
