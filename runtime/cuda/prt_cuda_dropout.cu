/*
 * prt_cuda_dropout.cu — dropout of a [batch, seq, C] branch output on the GPU
 * (parc_rt.h dropout_fwd / dropout_bwd) with the CPU reference's semantics
 * (cpu/prt_cpu_dropout.c): one thread per element, the mask drawn by
 * prt_math.h's prt_dropout_keep of the element's global index and stored as
 * one byte.  No scratch.
 */
#include <stdint.h>

#include "prt_cuda.h"

#define LD(t, i) prt_ld((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_st((t).p, (t).dtype, (i), (v))

static __global__ void k_dropout_fwd(prt_ten out, uint8_t *mask, prt_ten in, int64_t B, int64_t T, int64_t C,
                              int64_t first_sample, int64_t t_offset, int64_t T_global, uint64_t key,
                              uint32_t threshold, float scale) {
    int64_t total = B * T * C;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = e % C, t = (e / C) % T, b = e / (C * T);
        int64_t global = ((first_sample + b) * T_global + t_offset + t) * C + c;
        int keep = prt_dropout_keep(key, (uint64_t)global, threshold);
        mask[e] = (uint8_t)keep;
        ST(out, e, keep ? LD(in, e) * scale : 0.0f);
    }
}

static __global__ void k_dropout_bwd(prt_ten din, const uint8_t *mask, prt_ten dout, int64_t n, float scale, int write) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        if (mask[e]) ST(din, e, (write ? 0.0f : LD(din, e)) + LD(dout, e) * scale);
        else if (write) ST(din, e, 0.0f);
    }
}

void prt_cu_dropout_fwd(prt *rt, prt_ten out, uint8_t *mask, prt_ten in, int64_t B, int64_t T, int64_t C,
                        int64_t first_sample, int64_t t_offset, int64_t T_global, uint64_t key, uint32_t threshold,
                        float scale) {
    PRT_CHECK(B >= 0 && T >= 0 && C >= 0 && t_offset >= 0 && t_offset + T <= T_global,
              "dropout_fwd: bad shape B=%lld T=%lld C=%lld t_offset=%lld T_global=%lld", (long long)B, (long long)T,
              (long long)C, (long long)t_offset, (long long)T_global);
    int64_t total = B * T * C;
    if (total <= 0) return;
    k_dropout_fwd<<<prt_cu_blocks(total), PRT_CU_THREADS, 0, prt_cu(rt)->stream>>>(out, mask, in, B, T, C, first_sample,
                                                                                t_offset, T_global, key, threshold,
                                                                                scale);
    PRT_LAUNCH_CHECK();
}

void prt_cu_dropout_bwd(prt *rt, prt_ten din, const uint8_t *mask, prt_ten dout, int64_t n, float scale, int write) {
    if (n <= 0) return;
    k_dropout_bwd<<<prt_cu_blocks(n), PRT_CU_THREADS, 0, prt_cu(rt)->stream>>>(din, mask, dout, n, scale, write);
    PRT_LAUNCH_CHECK();
}
