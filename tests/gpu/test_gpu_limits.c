/*
 * test_gpu_limits.c — the CUDA kernels' shape limits (runtime/cuda/prt_cuda_limits.h)
 * on the CPU: shapes the kernels take pass; each limit, when broken, refuses the op
 * with the op, its shape and the limit in the message (compared exactly).  The
 * device limits are an H100/H200's (grid x 2^31 - 1, y 65,535, 48 KiB of shared
 * memory per block) unless a case says otherwise.  Exit status 0 iff every case holds.
 */
#include <stdio.h>
#include <string.h>

#include "cuda/prt_cuda_limits.h"

static int failures, cases;
static const prt_cuda_limits hopper = {2147483647LL, 65535, 49152};

static void expect(const char *op, int nargs, const int64_t *args, const prt_cuda_limits *lim, const char *want) {
    prt_cuda_op_shape s;
    memset(&s, 0, sizeof s);
    s.op = op;
    s.nargs = nargs;
    memcpy(s.args, args, (size_t)nargs * sizeof *args);
    char why[512] = "";
    int ok = prt_cuda_shape_ok(&s, lim, why, sizeof why);
    int pass = want ? !ok && !strcmp(why, want) : ok;
    cases++;
    if (!pass) {
        failures++;
        printf("FAIL %s: got %s \"%s\", want %s \"%s\"\n", op, ok ? "accepted" : "refused", why, want ? "refused" : "accepted",
               want ? want : "");
    }
}
#define EXPECT(op, lim, want, ...)                                                 \
    do {                                                                           \
        const int64_t a_[] = {__VA_ARGS__};                                        \
        expect(op, (int)(sizeof a_ / sizeof a_[0]), a_, lim, want);                \
    } while (0)

int main(void) {
    /* attention: GPT-2's and Llama's shapes, head dims at each padding step */
    EXPECT("attention_fwd", &hopper, NULL, 32, 1024, 12, 12, 64, 1, 1024, 0);
    EXPECT("attention_bwd", &hopper, NULL, 1, 4096, 32, 32, 128, 1, 4096, 0);
    EXPECT("attention_fwd", &hopper, NULL, 2, 80, 3, 3, 16, 0, 80, 0);
    EXPECT("attention_fwd", &hopper, NULL, 1, 1, 1, 1, 1, 1, 1, 0);
    /* a rank's query rows of a context-parallel plan: refused */
    EXPECT("attention_fwd", &hopper, "attention_fwd (B 2, T 1024, NH 8, KV 8, HD 64, causal 1, Tq 512, q0 512): query rows from 512 of 1024: the CUDA kernels compute every row (context parallelism runs on the CPU runtime)",
           2, 1024, 8, 8, 64, 1, 512, 512);
    /* the dropout variants carry the attention's sizes first, then the mask's hash inputs */
    EXPECT("attention_dropout_fwd", &hopper, NULL, 4, 1024, 8, 8, 128, 1, -1, 0, 8, -1, -1);
    EXPECT("attention_dropout_bwd", &hopper, "attention_dropout_bwd (B 4, T 1024, NH 8, KV 8, HD 256, causal 1, first_sample -1, h_offset 0, NH_global 8, step -1, layer -1): head dim 256: the CUDA kernels take 1..128",
           4, 1024, 8, 8, 256, 1, -1, 0, 8, -1, -1);
    EXPECT("attention_fwd", &hopper, "attention_fwd (B 4, T 1024, NH 8, KV 8, HD 160, causal 1, Tq 1024, q0 0): head dim 160: the CUDA kernels take 1..128",
           4, 1024, 8, 8, 160, 1, 1024, 0);
    EXPECT("attention_bwd", &hopper, "attention_bwd (B 4, T 1024, NH 8, KV 8, HD 0, causal 0, Tq 1024, q0 0): head dim 0: the CUDA kernels take 1..128",
           4, 1024, 8, 8, 0, 0, 1024, 0);
    EXPECT("attention_fwd", &hopper, "attention_fwd (B 1, T 3000000000, NH 1, KV 1, HD 64, causal 1, Tq 3000000000, q0 0): sequence 3000000000: the kernels index it in int (at most 2147483647)",
           1, 3000000000LL, 1, 1, 64, 1, 3000000000LL, 0);
    EXPECT("attention_fwd", &hopper, "attention_fwd (B 1, T 16, NH 8000000, KV 8000000, HD 128, causal 1, Tq 16, q0 0): (heads + 2 x key/value heads) x head dim = 3072000000: the kernels index a row in int (at most 2147483647)",
           1, 16, 8000000, 8000000, 128, 1, 16, 0);
    /* a device with a 65,535 grid x dimension and 32 KiB of shared memory per block */
    const prt_cuda_limits small = {65535, 65535, 32768};
    EXPECT("attention_fwd", &small, "attention_fwd (B 1, T 524288, NH 1, KV 1, HD 64, causal 1, Tq 524288, q0 0): 65536 blocks of query rows: the grid's x dimension takes 65535",
           1, 524288, 1, 1, 64, 1, 524288, 0);
    EXPECT("attention_fwd", &small, NULL, 1, 524280, 1, 1, 64, 1, 524280, 0);
    EXPECT("attention_fwd", &small, "attention_fwd (B 1, T 64, NH 1, KV 1, HD 100, causal 1, Tq 64, q0 0): 41472 bytes of shared memory per block: the device has 32768",
           1, 64, 1, 1, 100, 1, 64, 0);
    EXPECT("attention_fwd", &small, NULL, 1, 64, 1, 1, 64, 1, 64, 0);  /* 20,992 bytes */
    /* ring attention's steps: head dims up to 256 (a thread each), rows in halves when balanced */
    EXPECT("ring_attention_fwd", &hopper, NULL, 1, 8192, 8, 1, 128, 1, 15, 0, 16, 1);
    EXPECT("ring_attention_bwd", &hopper, "ring_attention_bwd (B 1, T 4096, NH 8, KV 8, HD 320, causal 1, coord 1, step 0, P 2, balanced 0): head dim 320: the ring kernels take 1..256",
           1, 4096, 8, 8, 320, 1, 1, 0, 2, 0);
    /* cross-entropy rows */
    EXPECT("xent_fwd", &hopper, NULL, 32768, 50257, 0, -1);
    EXPECT("xent_fwd", &hopper, "xent_fwd (N 1073741824, V_local 50257, vocab_offset 0, axis -1): 1073741824 rows: the all-reduce of 2 x rows floats counts in int (at most 1073741823 rows)",
           1073741824LL, 50257, 0, -1);
    EXPECT("xent_fwd", &small, "xent_fwd (N 70000, V_local 128, vocab_offset 0, axis 0): 70000 rows, one block each: the grid's x dimension takes 65535",
           70000, 128, 0, 0);
    /* norms: rows and column blocks */
    EXPECT("layernorm_bwd", &hopper, NULL, 32768, 768);
    EXPECT("rmsnorm_fwd", &small, "rmsnorm_fwd (N 65536, C 4096): 65536 rows, one block each: the grid's x dimension takes 65535", 65536, 4096);
    EXPECT("layernorm_bwd", &small, "layernorm_bwd (N 16, C 2097153): 65537 blocks of 32 columns: the grid's x dimension takes 65535", 16, 2097153);
    EXPECT("bias_bwd", &small, "bias_bwd (N 16, M 2097153): 65537 blocks of 32 columns: the grid's x dimension takes 65535", 16, 2097153);
    EXPECT("bias_bwd", &small, NULL, 1000000, 2097120);  /* 65,535 blocks */
    EXPECT("embed_bwd", &small, "embed_bwd (N 65536, C 768, vocab_local 50257, vocab_offset 0): 65536 tokens, one block each: the grid's x dimension takes 65535",
           65536, 768, 50257, 0);
    /* GEMMs: cuBLAS' int dimensions */
    EXPECT("matmul_bwd", &hopper, NULL, 32768, 768, 50257);
    EXPECT("matmul_t_bwd", &hopper, "matmul_t_bwd (N 2147483648, K 768, M 50257): dimension 2147483648: cuBLAS takes 0..2147483647",
           2147483648LL, 768, 50257);
    EXPECT("matmul_fwd", &hopper, "matmul_fwd (N 4, K -1, M 4): dimension -1: cuBLAS takes 0..2147483647", 4, -1, 4);
    /* a descriptor with the wrong number of size arguments; ops without limits */
    EXPECT("attention_fwd", &hopper, "attention_fwd (B 1, T 2, NH 3): 3 size arguments given, the op has 8", 1, 2, 3);
    EXPECT("gelu_fwd", &small, NULL, 5000000000LL);
    /* grouped-query attention: the grouped qkv; key/value heads must divide the heads */
    EXPECT("attention_bwd", &hopper, NULL, 2, 1024, 32, 8, 128, 1, 1024, 0);
    EXPECT("attention_fwd", &hopper, "attention_fwd (B 2, T 1024, NH 32, KV 6, HD 128, causal 1, Tq 1024, q0 0): 6 key/value heads for 32 heads: they must divide the heads",
           2, 1024, 32, 6, 128, 1, 1024, 0);
    printf("test_gpu_limits: %d cases, %d failed: %s\n", cases, failures, failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
