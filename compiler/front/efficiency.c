/*
 * efficiency.c — the named efficiency sets a plan's cluster may name
 * (`efficiency h100;`) and the class names its `efficiency { ... }` block
 * reads (parc.h).  The defaults are judgements about the hardware, stated
 * here and argued in docs/cost-model.md: what vendor-published or widely
 * reproduced measurements (cuBLAS GEMM sweeps, BabelStream-style bandwidth
 * tests, nccl-tests bus bandwidth, FlashAttention's kernel measurements)
 * reach of each part's datasheet peak.  A plan overrides any of them in its
 * cluster's `efficiency` statement; the cost model (analyze/cost.c) charges
 * what the plan ends up with.
 */
#include "parc.h"

#include <string.h>

const char *const gemm_class_names[PARC_GEMM_CLASSES] = {"tiny", "small", "medium", "large"};
const char *const stream16_names[PARC_STREAM16_KINDS] = {"streams", "norms", "activations", "softmax", "scores"};

/* ORDER: plan_efficiency_names follows the rows of `defaults`.
 * Columns: gemm tiny/small/medium/large, attention, hbm, bus intra, bus inter,
 * half_intra, half_inter, activation (the hbm share again on these GPUs: a
 * GELU's tanh or SwiGLU's exp costs a few instructions against its bytes).
 *
 * a100 (A100 SXM 80 GB: 312 TFLOP/s bf16, 2.04 TB/s HBM2e, NVLink3 300 GB/s
 *   a direction): cuBLAS bf16 GEMMs of 8192-class shapes run near 270
 *   TFLOP/s (0.85), falling with the smallest dimension as tiles stop filling
 *   108 SMs (wave quantization); FlashAttention-2 reports 50-73% of peak
 *   forward and less backward on A100 (0.50 overall); streaming kernels reach
 *   about 1.75 TB/s (0.85); nccl-tests all-reduce bus bandwidth on DGX A100
 *   is about 230 GB/s of 300 (0.78), and across nodes per HDR rail about 0.85
 *   of line rate.
 * h100 (H100 SXM: 989 TFLOP/s dense bf16, 3.35 TB/s HBM3, NVLink4 450 GB/s):
 *   large bf16 GEMMs sustain about 700-750 TFLOP/s under the power limit
 *   (0.75); FlashAttention-2 reaches about 35-40% of peak there (0.40);
 *   streaming about 2.9 TB/s (0.85); nccl-tests about 360 GB/s of 450 (0.80).
 * h200: the H100's compute with 4.8 TB/s HBM3e: the same GEMM and link
 *   figures; small GEMMs, more often bandwidth-bound, gain a little.
 * generic: a part nobody named: between the two generations.
 * Columns 9 and 10, half_intra and half_inter: the collective size at which
 *   NCCL reaches half its bus bandwidth (Hockney's n 1/2: time = (bytes +
 *   n 1/2) / r_inf).  A published nccl-tests all_reduce_perf table of an
 *   NVLink4 node (kvcache-ai/Mooncake pull request 3484: 242 GB/s bus
 *   bandwidth at 16 MiB, 300 at 32 MiB, against the ~370 GB/s ring plateau
 *   NCCL's maintainers give for H100 in NVIDIA/nccl-tests issue 212) is
 *   reproduced within 3% by n 1/2 = 8 MiB; the start-up is NCCL's chunked
 *   ring pipeline filling, so it is taken as the same size on NVLink3
 *   (A100) -- a judgement, not a measurement.  Between nodes the ring's
 *   start-up time (~35 us) at a rail's 25-50 GB/s is 1-2 MiB: 2 MiB.  A part
 *   nobody named (generic) gets none; `parc calibrate` fits its CPU link's
 *   own to all-reduces of 16 and 256 KiB (calibrate/parc_calibrate.c). */
#define MIB 1048576.0
static const double defaults[][11] = {
    {0.25, 0.50, 0.70, 0.80, 0.45, 0.80, 0.75, 0.80, 0, 0, 0.80},             /* generic */
    {0.30, 0.55, 0.75, 0.85, 0.50, 0.85, 0.78, 0.85, 8 * MIB, 2 * MIB, 0.85}, /* a100 */
    {0.22, 0.45, 0.65, 0.75, 0.40, 0.85, 0.80, 0.85, 8 * MIB, 2 * MIB, 0.85}, /* h100 */
    {0.25, 0.50, 0.67, 0.75, 0.42, 0.85, 0.80, 0.85, 8 * MIB, 2 * MIB, 0.85}, /* h200 */
};
#undef MIB
const char *const plan_efficiency_names[] = {"generic", "a100", "h100", "h200"};
const int plan_efficiency_count = (int)(sizeof defaults / sizeof defaults[0]);

int plan_efficiency_defaults(const char *name, Efficiency *eff)
{
    for (int i = 0; i < plan_efficiency_count; i++) {
        if (strcmp(name, plan_efficiency_names[i]) != 0) continue;
        memset(eff, 0, sizeof *eff);
        eff->name = plan_efficiency_names[i];
        for (int c = 0; c < PARC_GEMM_CLASSES; c++) eff->gemm[c] = defaults[i][c];
        eff->attention = defaults[i][4];
        eff->hbm = defaults[i][5];
        eff->bus[0] = defaults[i][6];
        eff->bus[1] = defaults[i][7];
        eff->half_bytes[0] = defaults[i][8];
        eff->half_bytes[1] = defaults[i][9];
        eff->activation = defaults[i][10];
        return 0;
    }
    return -1;
}
