/*
 * prt_data.c — the training data: every sample is a pure function of
 * (seed, step, global sample index), so any data-parallel layout sees the same
 * global batch as the single-rank run.
 *
 * Synthetic (default): sample g of step s is a noisy arithmetic progression over
 * an alphabet of A = min(vocab, 64) tokens spread evenly over the vocab:
 * token[t] = (vocab / A) * ((start + stride * t) mod A), with start and stride
 * (1..4) hashed from (seed, s, g), and one token in 16 replaced by a hashed
 * random one from the whole vocab.  A small model learns it within a few steps:
 * first which tokens occur at all, then that the next token is the previous one
 * plus the stride seen in the context.  targets[t] = token[t + 1].
 *
 * --data FILE (byte level, read once at init): the window of T + 1 bytes starting
 * at hash(seed, s, g) mod (len - T - 1); tokens are bytes, so vocab >= 256.
 */
#include <stdio.h>
#include <stdlib.h>

#include "prt_internal.h"

void prt_data_load(prt *rt, const char *path) {
    FILE *f = fopen(path, "rb");
    PRT_CHECK(f, "--data %s: cannot open the file", path);
    PRT_CHECK(fseek(f, 0, SEEK_END) == 0, "--data %s: cannot seek", path);
    long len = ftell(f);
    PRT_CHECK(len >= 0, "--data %s: cannot tell its size", path);
    rewind(f);
    rt->data_bytes = prt_xmalloc((size_t)len);
    PRT_CHECK(fread(rt->data_bytes, 1, (size_t)len, f) == (size_t)len, "--data %s: short read", path);
    fclose(f);
    rt->data_len = (size_t)len;
}

void prt_data(prt *rt, void *tokens_, void *targets_, int64_t step, int64_t first_sample, int64_t B, int64_t T,
              int64_t vocab) {
    double t0 = prt_trace_start(rt);
    int32_t *tokens = tokens_, *targets = targets_;
    PRT_CHECK(vocab > 0 && T > 0 && B >= 0, "prt_data: bad shape B=%lld T=%lld vocab=%lld", (long long)B,
              (long long)T, (long long)vocab);
#ifdef PRT_HAVE_CUDA
    int32_t *host = NULL;  /* --device cuda: generated on the host, then copied to the device buffers */
    if (rt->device) {
        host = prt_xmalloc(2 * sizeof(int32_t) * (size_t)(B * T));
        tokens = host;
        targets = host + B * T;
    }
#endif
    uint64_t seed_key = prt_hash2((uint64_t)rt->plan.seed, 0x64617461 /* "data" */);
    if (rt->data_bytes) {
        PRT_CHECK(vocab >= 256, "--data reads bytes, so the model's vocab must be >= 256 (it is %lld)", (long long)vocab);
        PRT_CHECK(rt->data_len >= (size_t)T + 2, "--data %s: %zu bytes is too short for sequences of %lld tokens",
                  rt->data_path, rt->data_len, (long long)T);
        uint64_t windows = (uint64_t)(rt->data_len - (size_t)T - 1);
        for (int64_t b = 0; b < B; b++) {
            uint64_t h = prt_hash2(prt_hash2(seed_key, (uint64_t)step), (uint64_t)(first_sample + b));
            const uint8_t *w = rt->data_bytes + h % windows;
            for (int64_t t = 0; t < T; t++) {
                tokens[b * T + t] = w[t];
                targets[b * T + t] = w[t + 1];
            }
        }
    } else {
        uint64_t alphabet = vocab < 64 ? (uint64_t)vocab : 64, spacing = (uint64_t)vocab / alphabet;
        for (int64_t b = 0; b < B; b++) {
            uint64_t h = prt_hash2(prt_hash2(seed_key, (uint64_t)step), (uint64_t)(first_sample + b));
            uint64_t start = h % alphabet, stride = 1 + (h >> 40) % 4;
            for (int64_t t = 0; t <= T; t++) {
                uint64_t noise = prt_hash2(h, (uint64_t)t);
                int32_t tok = (noise & 15) == 0 ? (int32_t)((noise >> 8) % (uint64_t)vocab)
                                                : (int32_t)(spacing * ((start + stride * (uint64_t)t) % alphabet));
                if (t < T) tokens[b * T + t] = tok;
                if (t > 0) targets[b * T + t - 1] = tok;
            }
        }
    }
    prt_dump_data(rt, tokens, targets, step, first_sample, B, T);
#ifdef PRT_HAVE_CUDA
    if (host) {
        if (tokens_) prt_cuda_h2d(rt, tokens_, tokens, sizeof(int32_t) * (size_t)(B * T));
        if (targets_) prt_cuda_h2d(rt, targets_, targets, sizeof(int32_t) * (size_t)(B * T));
        free(host);
    }
#endif
    PRT_TRACE_END(rt, "data", "op", t0, -1, -1);
}
