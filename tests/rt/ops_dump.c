/*
 * ops_dump.c — runs every op of the CPU runtime on deterministic inputs and writes
 * inputs and outputs as raw little-endian float32/int32 files into a directory,
 * with manifest.txt ("name f32|i32 dim..." per line), for test_ops_torch.py to
 * recompute with PyTorch.  usage: ops_dump DIR
 * Backward outputs are written from zeroed gradient buffers (so they are the
 * gradients themselves); the accumulation contract is test_ops_grad's business.
 * The mixture-of-experts layers (moe_layer) dump their routing too (i32), which
 * the test recomputes and requires equal.
 */
#include "cpu/prt_cpu_attention.h"
#include "rt_test.h"

static const char *DIR_;
static FILE *MANIFEST;

static void dump(const char *name, const char *type, const void *data, int ndim, const int64_t *dims) {
    int64_t n = 1;
    fprintf(MANIFEST, "%s %s", name, type);
    for (int d = 0; d < ndim; d++) {
        n *= dims[d];
        fprintf(MANIFEST, " %lld", (long long)dims[d]);
    }
    fprintf(MANIFEST, "\n");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", DIR_, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 4, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "ops_dump: cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}
#define DUMP(name, data, ...) dump(name, "f32", data, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), (int64_t[]){__VA_ARGS__})
#define DUMPI(name, data, ...) dump(name, "i32", data, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), (int64_t[]){__VA_ARGS__})

/* One mixture-of-experts layer forward and backward (prt_cpu_moe.h), its
 * tensors dumped as PREFIX_name: the router (softmax or sigmoid gate, top-k),
 * the dispatch, SwiGLU experts (w13[E,H,2F]: gate then up, w2[E,F,H]) or GELU
 * experts (w13[E,H,F] up, w2[E,F,H] down), the combine, with the load-balancing
 * and z losses.  `empty`: feature 0 of every token is large and the last
 * expert's router weight for it very negative, so that expert gets no token;
 * `tie`: experts 1 and 2 have the same router column, so their logits tie
 * exactly.  The router backward runs again with dweight NULL and large
 * coefficients (the _l tensors), so the losses' gradients are checked apart. */
static void moe_layer(prt *rt, const char *prefix, uint64_t seed, int sigmoid, int topk, int E, int swiglu, int empty,
                      int tie) {
    enum { T = 10, H = 6, F = 4, MAXE = 8 };
    const double aux = 0.01, zc = 0.001, aux_l = 0.7, zc_l = 0.3;
    const int64_t R = (int64_t)T * topk, W = swiglu ? 2 * F : F;
    float x[T * H], wr[H * MAXE], w13[MAXE * H * 2 * F], w2[MAXE * F * H], dout[T * H];
    float logits[T * MAXE], weight[T * 2], losses[2], losses_l[2], xp[T * 2 * H], h1[T * 2 * 2 * F], a[T * 2 * F],
          y[T * 2 * H], out[T * H];
    int32_t index[T * 2], counts[MAXE], offsets[MAXE + 1], rows[T * 2];
    float dy[T * 2 * H] = {0}, dweight[T * 2] = {0}, da[T * 2 * F] = {0}, dw2[MAXE * F * H] = {0},
          dh1[T * 2 * 2 * F] = {0}, dxp[T * 2 * H] = {0}, dw13[MAXE * H * 2 * F] = {0}, dx[T * H] = {0},
          dwr[H * MAXE] = {0}, dlogits[T * MAXE], dx_l[T * H] = {0}, dwr_l[H * MAXE] = {0}, dlogits_l[T * MAXE];
    rt_fill(x, T * H, seed, 1); rt_fill(wr, H * E, seed + 1, 1); rt_fill(w13, E * H * W, seed + 2, 0.5f);
    rt_fill(w2, E * F * H, seed + 3, 0.5f); rt_fill(dout, T * H, seed + 4, 1);
    if (empty) {
        for (int t = 0; t < T; t++) x[t * H] = 2.0f + 0.25f * (float)(t % 3);
        wr[E - 1] = -20.0f;
    }
    if (tie)
        for (int h = 0; h < H; h++) wr[h * E + 2] = wr[h * E + 1];
    const int64_t F32 = PRT_F32, I32 = PRT_I32;
    prt_moe_router_fwd(rt, logits, index, weight, counts, losses, x, wr, T, H, E, topk, sigmoid, aux, zc,
                       PRT_ARG_DTYPES(F32, I32, F32, I32, F32, F32, F32));
    prt_moe_permute_fwd(rt, xp, offsets, rows, x, index, T, H, E, topk, PRT_ARG_DTYPES(F32, I32, I32, F32, I32));
    int64_t mm = PRT_ARG_DTYPES(F32, F32, F32, I32), mmb = PRT_ARG_DTYPES(F32, F32, F32, F32, F32, I32);
    prt_moe_matmul_fwd(rt, h1, xp, w13, offsets, E, H, W, mm);
    if (swiglu) prt_swiglu_fwd(rt, a, h1, R, F, 0);
    else prt_gelu_fwd(rt, a, h1, R * F, 0);
    prt_moe_matmul_fwd(rt, y, a, w2, offsets, E, F, H, mm);
    prt_moe_combine_fwd(rt, out, y, weight, rows, T, H, topk, PRT_ARG_DTYPES(F32, F32, F32, I32));

    prt_moe_combine_bwd(rt, dy, dweight, dout, y, weight, rows, T, H, topk, PRT_ARG_DTYPES(F32, F32, F32, F32, F32, I32));
    prt_moe_matmul_bwd(rt, da, dw2, dy, a, w2, offsets, E, F, H, mmb);
    if (swiglu) prt_swiglu_bwd(rt, dh1, h1, da, R, F, 0);
    else prt_gelu_bwd(rt, dh1, h1, da, R * F, 0);
    prt_moe_matmul_bwd(rt, dxp, dw13, dh1, xp, w13, offsets, E, H, W, mmb);
    prt_moe_permute_bwd(rt, dx, dxp, rows, T, H, topk, PRT_ARG_DTYPES(F32, F32, I32));
    int64_t rb = PRT_ARG_DTYPES(F32, F32, F32, F32, F32, I32, I32, F32, F32);
    prt_moe_router_bwd(rt, dx, dwr, dlogits, dweight, logits, index, counts, x, wr, T, H, E, topk, sigmoid, aux, zc, rb);
    /* the losses alone, with large coefficients */
    float logits_l[T * MAXE], weight_l[T * 2];
    int32_t index_l[T * 2], counts_l[MAXE];
    prt_moe_router_fwd(rt, logits_l, index_l, weight_l, counts_l, losses_l, x, wr, T, H, E, topk, sigmoid, aux_l,
                       zc_l, PRT_ARG_DTYPES(F32, I32, F32, I32, F32, F32, F32));
    prt_moe_router_bwd(rt, dx_l, dwr_l, dlogits_l, NULL, logits_l, index_l, counts_l, x, wr, T, H, E, topk, sigmoid,
                       aux_l, zc_l, rb);

    char name[64];
#define MOE_DUMP(what, data, ...) (snprintf(name, sizeof name, "%s_%s", prefix, what), DUMP(name, data, __VA_ARGS__))
#define MOE_DUMPI(what, data, ...) (snprintf(name, sizeof name, "%s_%s", prefix, what), DUMPI(name, data, __VA_ARGS__))
    float cfg[4] = {(float)sigmoid, (float)topk, (float)swiglu, (float)E};  /* what the test recomputes */
    MOE_DUMP("cfg", cfg, 4);
    MOE_DUMP("x", x, T, H); MOE_DUMP("wr", wr, H, E); MOE_DUMP("w13", w13, E, H, W); MOE_DUMP("w2", w2, E, F, H);
    MOE_DUMP("dout", dout, T, H);
    MOE_DUMP("logits", logits, T, E); MOE_DUMPI("index", index, T, topk); MOE_DUMP("weight", weight, T, topk);
    MOE_DUMPI("counts", counts, E); MOE_DUMP("losses", losses, 2); MOE_DUMPI("offsets", offsets, E + 1);
    MOE_DUMPI("rows", rows, T, topk); MOE_DUMP("xp", xp, R, H); MOE_DUMP("out", out, T, H);
    MOE_DUMP("dweight", dweight, T, topk); MOE_DUMP("dw2", dw2, E, F, H); MOE_DUMP("dw13", dw13, E, H, W);
    MOE_DUMP("dx", dx, T, H); MOE_DUMP("dwr", dwr, H, E); MOE_DUMP("dlogits", dlogits, T, E);
    MOE_DUMP("losses_l", losses_l, 2); MOE_DUMP("dlogits_l", dlogits_l, T, E); MOE_DUMP("dx_l", dx_l, T, H);
    MOE_DUMP("dwr_l", dwr_l, H, E);
#undef MOE_DUMP
#undef MOE_DUMPI
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: ops_dump DIR\n");
        return 2;
    }
    DIR_ = argv[1];
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.txt", DIR_);
    MANIFEST = fopen(path, "w");
    if (!MANIFEST) {
        fprintf(stderr, "ops_dump: cannot write %s\n", path);
        return 1;
    }
    prt_plan_desc plan = rt_plan("ops_dump", 0, NULL, NULL);
    char *rt_argv[2] = {argv[0], NULL};
    prt *rt = prt_init(1, rt_argv, &plan);
    enum { N = 8, C = 16 };

    {   /* layernorm */
        float in[N * C], w[C], b[C], dout[N * C], out[N * C], mean[N], rstd[N], din[N * C] = {0}, dw[C] = {0}, db[C] = {0};
        rt_fill(in, N * C, 1, 2); rt_fill(w, C, 2, 1); rt_fill(b, C, 3, 1); rt_fill(dout, N * C, 4, 1);
        prt_layernorm_fwd(rt, out, mean, rstd, in, w, b, N, C, 1e-5, 0);
        prt_layernorm_bwd(rt, din, dw, db, dout, in, w, mean, rstd, N, C, 0);
        DUMP("ln_in", in, N, C); DUMP("ln_w", w, C); DUMP("ln_b", b, C); DUMP("ln_dout", dout, N, C);
        DUMP("ln_out", out, N, C); DUMP("ln_din", din, N, C); DUMP("ln_dw", dw, C); DUMP("ln_db", db, C);
    }
    {   /* rmsnorm */
        float in[N * C], w[C], dout[N * C], out[N * C], rstd[N], din[N * C] = {0}, dw[C] = {0};
        rt_fill(in, N * C, 5, 2); rt_fill(w, C, 6, 1); rt_fill(dout, N * C, 7, 1);
        prt_rmsnorm_fwd(rt, out, rstd, in, w, N, C, 1e-6, 0);
        prt_rmsnorm_bwd(rt, din, dw, dout, in, w, rstd, N, C, 0);
        DUMP("rms_in", in, N, C); DUMP("rms_w", w, C); DUMP("rms_dout", dout, N, C);
        DUMP("rms_out", out, N, C); DUMP("rms_din", din, N, C); DUMP("rms_dw", dw, C);
    }
    {   /* gelu, relu */
        float in[64], dout[64], out[64], din[64] = {0}, rout[64], rdin[64] = {0};
        rt_fill(in, 64, 8, 4); rt_fill(dout, 64, 9, 1);
        prt_gelu_fwd(rt, out, in, 64, 0);
        prt_gelu_bwd(rt, din, in, dout, 64, 0);
        prt_relu_fwd(rt, rout, in, 64, 0);
        prt_relu_bwd(rt, rdin, in, dout, 64, 0);
        DUMP("act_in", in, 64); DUMP("act_dout", dout, 64);
        DUMP("gelu_out", out, 64); DUMP("gelu_din", din, 64); DUMP("relu_out", rout, 64); DUMP("relu_din", rdin, 64);
    }
    {   /* swiglu */
        enum { F = 12 };
        float in[N * 2 * F], dout[N * F], out[N * F], din[N * 2 * F] = {0};
        rt_fill(in, N * 2 * F, 10, 3); rt_fill(dout, N * F, 11, 1);
        prt_swiglu_fwd(rt, out, in, N, F, 0);
        prt_swiglu_bwd(rt, din, in, dout, N, F, 0);
        DUMP("sw_in", in, N, 2, F); DUMP("sw_dout", dout, N, F); DUMP("sw_out", out, N, F); DUMP("sw_din", din, N, 2, F);
    }
    {   /* matmul + bias */
        enum { M = 24 };
        float in[N * C], w[C * M], b[M], dout[N * M], out[N * M], din[N * C] = {0}, dw[C * M] = {0}, db[M] = {0};
        rt_fill(in, N * C, 12, 1); rt_fill(w, C * M, 13, 1); rt_fill(b, M, 14, 1); rt_fill(dout, N * M, 15, 1);
        prt_matmul_fwd(rt, out, in, w, N, C, M, 0);
        prt_bias_fwd(rt, out, out, b, N, M, 0);
        prt_matmul_bwd(rt, din, dw, dout, in, w, N, C, M, 0);
        prt_bias_bwd(rt, db, dout, N, M, 0);
        DUMP("mm_in", in, N, C); DUMP("mm_w", w, C, M); DUMP("mm_b", b, M); DUMP("mm_dout", dout, N, M);
        DUMP("mm_out", out, N, M); DUMP("mm_din", din, N, C); DUMP("mm_dw", dw, C, M); DUMP("mm_db", db, M);
        /* the same linear with its bias folded into one call */
        float fout[N * M], fdin[N * C] = {0}, fdw[C * M] = {0}, fdb[M] = {0};
        prt_matmul_bias_fwd(rt, fout, in, w, b, N, C, M, 0);
        prt_matmul_bias_bwd(rt, fdin, fdw, dout, in, w, fdb, N, C, M, 0);
        DUMP("mmb_out", fout, N, M); DUMP("mmb_din", fdin, N, C); DUMP("mmb_dw", fdw, C, M); DUMP("mmb_db", fdb, M);
        /* the transposed (tied) form: w[M, K] */
        float wt[M * C], tout[N * M], tdin[N * C] = {0}, tdw[M * C] = {0};
        rt_fill(wt, M * C, 25, 1);
        prt_matmul_t_fwd(rt, tout, in, wt, N, C, M, 0);
        prt_matmul_t_bwd(rt, tdin, tdw, dout, in, wt, N, C, M, 0);
        DUMP("mmt_w", wt, M, C); DUMP("mmt_out", tout, N, M); DUMP("mmt_din", tdin, N, C); DUMP("mmt_dw", tdw, M, C);
    }
    {   /* causal attention (probs recomputed in backward) and non-causal with saved probs */
        enum { B = 2, T = 6, NH = 2, HD = 4, CC = NH * HD };
        float qkv[B * T * 3 * CC], dout[B * T * CC], out[B * T * CC], dqkv[B * T * 3 * CC] = {0};
        float out_nc[B * T * CC], probs[B * NH * T * T], dqkv_nc[B * T * 3 * CC] = {0};
        rt_fill(qkv, B * T * 3 * CC, 16, 1.5f); rt_fill(dout, B * T * CC, 17, 1);
        prt_attention_fwd(rt, out, NULL, qkv, B, T, NH, NH, HD, 1, T, 0, 0);
        prt_attention_bwd(rt, dqkv, dout, qkv, NULL, B, T, NH, NH, HD, 1, T, 0, 0);
        prt_attention_fwd(rt, out_nc, probs, qkv, B, T, NH, NH, HD, 0, T, 0, 0);
        prt_attention_bwd(rt, dqkv_nc, dout, qkv, probs, B, T, NH, NH, HD, 0, T, 0, 0);
        DUMP("att_qkv", qkv, B, T, 3, NH, HD); DUMP("att_dout", dout, B, T, NH, HD);
        DUMP("att_out", out, B, T, NH, HD); DUMP("att_dqkv", dqkv, B, T, 3, NH, HD);
        DUMP("attnc_out", out_nc, B, T, NH, HD); DUMP("attnc_dqkv", dqkv_nc, B, T, 3, NH, HD);
    }
    {   /* attention over more rows than one block (PRT_ATTENTION_ROWS): 64 + 64 + 22 */
        enum { B = 1, T = 150, NH = 3, HD = 8, CC = NH * HD };
        float *qkv = rt_alloc(B * T * 3 * CC), *dout = rt_alloc(B * T * CC), *out = rt_alloc(B * T * CC),
              *dqkv = calloc(B * T * 3 * CC, sizeof(float)), *out_nc = rt_alloc(B * T * CC),
              *probs = rt_alloc(B * NH * T * T), *dqkv_nc = calloc(B * T * 3 * CC, sizeof(float));
        rt_fill(qkv, B * T * 3 * CC, 26, 1.5f); rt_fill(dout, B * T * CC, 27, 1);
        prt_attention_fwd(rt, out, NULL, qkv, B, T, NH, NH, HD, 1, T, 0, 0);
        prt_attention_bwd(rt, dqkv, dout, qkv, NULL, B, T, NH, NH, HD, 1, T, 0, 0);
        prt_attention_fwd(rt, out_nc, probs, qkv, B, T, NH, NH, HD, 0, T, 0, 0);
        prt_attention_bwd(rt, dqkv_nc, dout, qkv, probs, B, T, NH, NH, HD, 0, T, 0, 0);
        DUMP("attl_qkv", qkv, B, T, 3, NH, HD); DUMP("attl_dout", dout, B, T, NH, HD);
        DUMP("attl_out", out, B, T, NH, HD); DUMP("attl_dqkv", dqkv, B, T, 3, NH, HD);
        DUMP("attlnc_out", out_nc, B, T, NH, HD); DUMP("attlnc_dqkv", dqkv_nc, B, T, 3, NH, HD);
        free(qkv); free(dout); free(out); free(dqkv); free(out_nc); free(probs); free(dqkv_nc);
    }
    {   /* key-blocked attention (the forward with probs NULL, the key-blocked backward) over several blocks of
         * keys (PRT_ATTENTION_KEYS): 128 + 128 + 44, causal and not */
        enum { B = 1, T = 300, NH = 2, HD = 8, CC = NH * HD };
        float *qkv = rt_alloc(B * T * 3 * CC), *dout = rt_alloc(B * T * CC), *out = rt_alloc(B * T * CC),
              *dqkv = calloc(B * T * 3 * CC, sizeof(float)), *out_nc = rt_alloc(B * T * CC),
              *dqkv_nc = calloc(B * T * 3 * CC, sizeof(float));
        rt_fill(qkv, B * T * 3 * CC, 28, 1.5f); rt_fill(dout, B * T * CC, 29, 1);
        prt_attention_fwd(rt, out, NULL, qkv, B, T, NH, NH, HD, 1, T, 0, 0);
        prt_cpu_attention_keyblocked_bwd(rt, dqkv, dout, qkv, B, T, NH, NH, HD, 1, NULL, 0);
        prt_attention_fwd(rt, out_nc, NULL, qkv, B, T, NH, NH, HD, 0, T, 0, 0);
        prt_cpu_attention_keyblocked_bwd(rt, dqkv_nc, dout, qkv, B, T, NH, NH, HD, 0, NULL, 0);
        DUMP("attk_qkv", qkv, B, T, 3, NH, HD); DUMP("attk_dout", dout, B, T, NH, HD);
        DUMP("attk_out", out, B, T, NH, HD); DUMP("attk_dqkv", dqkv, B, T, 3, NH, HD);
        DUMP("attknc_out", out_nc, B, T, NH, HD); DUMP("attknc_dqkv", dqkv_nc, B, T, 3, NH, HD);
        free(qkv); free(dout); free(out); free(dqkv); free(out_nc); free(dqkv_nc);
    }
    {   /* grouped-query attention: qkv[B, T, KV, G + 2, HD] read as it is (3 key/value heads of 2 query heads),
         * over more rows than one block: causal recomputed, non-causal kept, and the key-blocked backward */
        enum { B = 2, T = 150, NH = 6, KV = 3, G = NH / KV, HD = 8, W = (NH + 2 * KV) * HD, CC = NH * HD };
        float *qkv = rt_alloc(B * T * W), *dout = rt_alloc(B * T * CC), *out = rt_alloc(B * T * CC),
              *dqkv = calloc(B * T * W, sizeof(float)), *out_nc = rt_alloc(B * T * CC),
              *probs = rt_alloc(B * NH * T * T), *dqkv_nc = calloc(B * T * W, sizeof(float)),
              *dqkv_k = calloc(B * T * W, sizeof(float));
        rt_fill(qkv, B * T * W, 40, 1.5f); rt_fill(dout, B * T * CC, 41, 1);
        prt_attention_fwd(rt, out, NULL, qkv, B, T, NH, KV, HD, 1, T, 0, 0);
        prt_attention_bwd(rt, dqkv, dout, qkv, NULL, B, T, NH, KV, HD, 1, T, 0, 0);
        prt_cpu_attention_keyblocked_bwd(rt, dqkv_k, dout, qkv, B, T, NH, KV, HD, 1, NULL, 0);
        prt_attention_fwd(rt, out_nc, probs, qkv, B, T, NH, KV, HD, 0, T, 0, 0);
        prt_attention_bwd(rt, dqkv_nc, dout, qkv, probs, B, T, NH, KV, HD, 0, T, 0, 0);
        DUMP("attg_qkv", qkv, B, T, KV, G + 2, HD); DUMP("attg_dout", dout, B, T, NH, HD);
        DUMP("attg_out", out, B, T, NH, HD); DUMP("attg_dqkv", dqkv, B, T, KV, G + 2, HD);
        DUMP("attgk_out", out, B, T, NH, HD); DUMP("attgk_dqkv", dqkv_k, B, T, KV, G + 2, HD);
        DUMP("attgnc_out", out_nc, B, T, NH, HD); DUMP("attgnc_dqkv", dqkv_nc, B, T, KV, G + 2, HD);
        free(qkv); free(dout); free(out); free(dqkv); free(out_nc); free(probs); free(dqkv_nc); free(dqkv_k);
    }
    {   /* rotary positions: a plain qkv [B, T, 3, NH, HD] (q and k rotated), positions from 3, and a grouped
         * one [B, T, KV, Q + 2, HD] (the Q queries and k rotated) with Llama 3.1's scaling */
        enum { B = 2, T = 7, NH = 2, HD = 8, KV = 2, Q = 2 };
        float in[B * T * 3 * NH * HD], dout[B * T * 3 * NH * HD], out[B * T * 3 * NH * HD], din[B * T * 3 * NH * HD] = {0};
        rt_fill(in, B * T * 3 * NH * HD, 30, 2); rt_fill(dout, B * T * 3 * NH * HD, 31, 1);
        prt_rope_fwd(rt, out, in, B, T, 1, 3 * NH, 2 * NH, HD, 3, 0, 10000, 0, 1, 4, 8192, 0);
        prt_rope_bwd(rt, din, dout, B, T, 1, 3 * NH, 2 * NH, HD, 3, 0, 10000, 0, 1, 4, 8192, 0);
        DUMP("rope_in", in, B, T, 3, NH, HD); DUMP("rope_dout", dout, B, T, 3, NH, HD);
        DUMP("rope_out", out, B, T, 3, NH, HD); DUMP("rope_din", din, B, T, 3, NH, HD);
        float gin[B * T * KV * (Q + 2) * HD], gdout[B * T * KV * (Q + 2) * HD], gout[B * T * KV * (Q + 2) * HD],
              gdin[B * T * KV * (Q + 2) * HD] = {0};
        rt_fill(gin, B * T * KV * (Q + 2) * HD, 32, 2); rt_fill(gdout, B * T * KV * (Q + 2) * HD, 33, 1);
        /* an original context of 32 positions puts HD 8's four pairs in all three bands at theta 100 */
        prt_rope_fwd(rt, gout, gin, B, T, KV, Q + 2, Q + 1, HD, 0, 0, 100, 8, 1, 4, 32, 0);
        prt_rope_bwd(rt, gdin, gdout, B, T, KV, Q + 2, Q + 1, HD, 0, 0, 100, 8, 1, 4, 32, 0);
        DUMP("ropeg_in", gin, B, T, KV, Q + 2, HD); DUMP("ropeg_dout", gdout, B, T, KV, Q + 2, HD);
        DUMP("ropeg_out", gout, B, T, KV, Q + 2, HD); DUMP("ropeg_din", gdin, B, T, KV, Q + 2, HD);
    }
    {   /* cross-entropy: loss_sum and d(mean loss)/dlogits */
        enum { V = 20 };
        float logits[N * V], stats[2 * N], loss = 0, dlogits[N * V] = {0};
        int32_t targets[N];
        rt_fill(logits, N * V, 18, 3);
        for (int i = 0; i < N; i++) targets[i] = (i * 7 + 3) % V;
        prt_xent_fwd(rt, &loss, stats, logits, targets, N, V, 0, -1, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
        prt_xent_bwd(rt, dlogits, logits, stats, targets, N, V, 0, 1.0 / N, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
        DUMP("xe_logits", logits, N, V); DUMPI("xe_targets", targets, N);
        DUMP("xe_loss", &loss, 1); DUMP("xe_dlogits", dlogits, N, V);
    }
    {   /* embedding */
        enum { V = 20 };
        float wte[V * C], dout[N * C], out[N * C], dwte[V * C] = {0};
        int32_t tok[N];
        rt_fill(wte, V * C, 19, 1); rt_fill(dout, N * C, 20, 1);
        for (int i = 0; i < N; i++) tok[i] = (i * 5 + 1) % 7;  /* repeats: accumulation in dwte */
        prt_embed_fwd(rt, out, tok, wte, N, C, V, 0, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
        prt_embed_bwd(rt, dwte, tok, dout, N, C, V, 0, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
        DUMP("emb_wte", wte, V, C); DUMPI("emb_tok", tok, N); DUMP("emb_dout", dout, N, C);
        DUMP("emb_out", out, N, C); DUMP("emb_dwte", dwte, V, C);
    }
    {   /* AdamW and SGD: three steps */
        enum { P = 32 };
        float p[P], m[P] = {0}, v[P] = {0}, g[3][P], sp[P], mom[P] = {0};
        rt_fill(p, P, 21, 1);
        memcpy(sp, p, sizeof p);
        DUMP("opt_p0", p, P);
        for (int s = 0; s < 3; s++) rt_fill(g[s], P, 22 + (uint64_t)s, 1);
        DUMP("opt_g", g, 3, P);
        for (int s = 0; s < 3; s++) {
            prt_adamw(rt, p, NULL, g[s], m, v, P, s + 1, 1e-2, 0.9, 0.95, 1e-8, 0.1, 0);
            prt_sgd(rt, sp, NULL, g[s], mom, P, 0.1, 0.9, 0.01, 0);
        }
        DUMP("adamw_p", p, P); DUMP("sgd_p", sp, P);
    }
    /* mixture of experts: softmax top-2 SwiGLU with an expert that gets no token; sigmoid top-2 GELU, the same;
     * softmax top-1 SwiGLU with tied logits; sigmoid top-1 GELU */
    moe_layer(rt, "moe_a", 50, 0, 2, 5, 1, 1, 0);
    moe_layer(rt, "moe_b", 60, 1, 2, 5, 0, 1, 0);
    moe_layer(rt, "moe_c", 70, 0, 1, 4, 1, 0, 1);
    moe_layer(rt, "moe_d", 80, 1, 1, 4, 0, 0, 0);
    fclose(MANIFEST);
    return prt_finalize(rt) ? 1 : 0;
}
