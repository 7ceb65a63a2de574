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
 * --data FILE (byte level, validated and mapped read-only at init, so ranks of a
 * node share its pages): the window of T + 1 bytes starting
 * at hash(seed, s, g) mod (len - T - 1); tokens are bytes, so vocab >= 256.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prt_backend.h"
#include "prt_internal.h"

/* Checks and maps the file; on a problem writes it to message and returns 0. */
static int open_data(prt *rt, const char *path, char *message, size_t size) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(message, size, "--data %s: cannot open it: %s", path, strerror(errno));
        return 0;
    }
    struct stat st;
    int ok = fstat(fd, &st) == 0;
    if (!ok) snprintf(message, size, "--data %s: cannot stat it: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode)) {
        snprintf(message, size, "--data %s: is %s, not a regular file", path,
                 S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
        ok = 0;
    } else if (rt->plan.vocab > 0 && rt->plan.vocab < 256) {
        snprintf(message, size,
                 "--data %s: the data is read as bytes, so the model's vocab must be >= 256 (it is %lld)", path,
                 (long long)rt->plan.vocab);
        ok = 0;
    } else if (st.st_size < (off_t)(rt->plan.seq > 0 ? rt->plan.seq + 2 : 2)) {
        snprintf(message, size, "--data %s: %lld bytes is too short for sequences of %lld tokens (needs %lld)", path,
                 (long long)st.st_size, (long long)rt->plan.seq, (long long)rt->plan.seq + 2);
        ok = 0;
    }
    if (ok) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            snprintf(message, size, "--data %s: cannot map it: %s", path, strerror(errno));
            ok = 0;
        } else {
            rt->data_bytes = p;
            rt->data_len = (size_t)st.st_size;
        }
    }
    close(fd);
    return ok;
}

void prt_data_open(prt *rt, const char *path) {
    char message[1024];
    prt_block_begin("opening the --data file (start-up)", -1);
    int ok = open_data(rt, path, message, sizeof message);
    prt_block_end();
    prt_startup_verdict(rt, ok ? NULL : message);
}

void prt_data_close(prt *rt) {
    if (rt->data_bytes) munmap((void *)rt->data_bytes, rt->data_len);
    rt->data_bytes = NULL;
}

void prt_data(prt *rt, void *tokens_, void *targets_, int64_t step, int64_t first_sample, int64_t B, int64_t T,
              int64_t vocab) {
    double t0 = prt_trace_start(rt);
    int32_t *tokens = tokens_, *targets = targets_;
    PRT_CHECK(vocab > 0 && T > 0 && B >= 0, "prt_data: bad shape B=%lld T=%lld vocab=%lld", (long long)B,
              (long long)T, (long long)vocab);
    int32_t *host = NULL;  /* a backend with its own memory: generated on the host, then uploaded */
    if (!rt->backend->host_memory) {
        host = prt_xmalloc(2 * sizeof(int32_t) * (size_t)(B * T));
        tokens = host;
        targets = host + B * T;
    }
    uint64_t seed_key = prt_hash2((uint64_t)rt->plan.seed, 0x64617461 /* "data" */);
    if (rt->data_bytes) {
        PRT_CHECK(vocab >= 256, "--data reads bytes, so the model's vocab must be >= 256 (it is %lld)",
                  (long long)vocab);
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
    if (host) {
        if (tokens_) rt->backend->upload(rt, tokens_, tokens, sizeof(int32_t) * (size_t)(B * T));
        if (targets_) rt->backend->upload(rt, targets_, targets, sizeof(int32_t) * (size_t)(B * T));
        free(host);
    }
    PRT_TRACE_END(rt, "data", "op", t0, -1, -1);
}
