/*
 * prt_data.c — the training and validation data: every sample is a pure
 * function of (seed, step, global sample index), so any data-parallel layout
 * sees the same global batch as the single-rank run.
 *
 * Synthetic (default): sample g of step s is a noisy arithmetic progression over
 * an alphabet of A = min(vocab, 64) tokens spread evenly over the vocab:
 * token[t] = (vocab / A) * ((start + stride * t) mod A), with start and stride
 * (1..4) hashed from (seed, s, g), and one token in 16 replaced by a hashed
 * random one from the whole vocab.  A small model learns it within a few steps:
 * first which tokens occur at all, then that the next token is the previous one
 * plus the stride seen in the context.  targets[t] = token[t + 1].  Validation
 * samples are the same stream under another key, at step 0.
 *
 * Token files (--data / --val-data, else the plan's data section), mapped
 * read-only at init so the ranks of a node share its pages and each rank's
 * resident memory is the pages of its own samples:
 *   text  bytes are tokens (vocab >= 256);
 *   llmc  llm.c's format: 256 int32 (magic 20240520, version 1, token count),
 *         then uint16 tokens;
 *   u16, u32  headerless little-endian tokens (nanoGPT's .bin files).
 * After each call the mapping's pages are dropped from the process (not from
 * the page cache), so a rank's resident memory does not grow with the file.
 * Training sample g of step s is the window of T + 1 tokens at
 * hash(seed, s, g) mod (count - T): tokens are its first T, targets its last T.
 * Validation sample g is the (g mod W)-th of the W = (count - 1) / T
 * consecutive windows, the same in every evaluation.  Each rank calls prt_data
 * only for its own samples (its data-parallel share of the batch; a
 * tensor-parallel group and the stages of a pipeline read the same samples:
 * stage 0 for the tokens, the last stage for the targets).
 *
 * Start-up checks, each naming the file: a regular file; llmc's magic, version
 * and a size equal to the header's count; a whole number of tokens; at least
 * one batch (batch x seq + 1 tokens); every token < vocab.  The scan reads the
 * file with pread in blocks (not through the mapping, so it leaves nothing
 * resident), each rank its 1/world share of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prt_backend.h"
#include "prt_internal.h"

#define LLMC_HEADER_BYTES 1024
#define LLMC_MAGIC 20240520
#define LLMC_VERSION 1
#define SCAN_BLOCK_BYTES ((size_t)4 << 20)

static const char *const format_names[] = {"text", "llmc", "u16", "u32"};

int64_t prt_data_format_parse(const char *name) {
    for (int64_t f = 0; f < (int64_t)(sizeof format_names / sizeof format_names[0]); f++)
        if (!strcmp(name, format_names[f])) return f;
    return -1;
}

/* The token count, width and header bytes from the file's size and header;
 * 0 and a message on a problem. */
static int read_layout(prt *rt, prt_token_file *f, int fd, off_t size, int64_t format, off_t *header,
                       char *message, size_t cap) {
    const char *p = f->path, *l = f->label;
    if (format == PRT_DATA_TEXT) {
        if (rt->plan.vocab > 0 && rt->plan.vocab < 256) {
            snprintf(message, cap, "%s %s: the data is read as bytes, so the model's vocab must be >= 256 (it is %lld)",
                     l, p, (long long)rt->plan.vocab);
            return 0;
        }
        if (size < (off_t)(rt->plan.seq > 0 ? rt->plan.seq + 2 : 2)) {
            snprintf(message, cap, "%s %s: %lld bytes is too short for sequences of %lld tokens (needs %lld)", l, p,
                     (long long)size, (long long)rt->plan.seq, (long long)rt->plan.seq + 2);
            return 0;
        }
        f->width = 1;
        f->count = (int64_t)size;
        *header = 0;
        return 1;
    }
    *header = 0;
    f->width = format == PRT_DATA_U32 ? 4 : 2;
    if (format == PRT_DATA_LLMC) {
        int32_t h[3] = {0, 0, 0};
        if (size < LLMC_HEADER_BYTES || pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h) {
            snprintf(message, cap, "%s %s: %lld bytes is shorter than the %d-byte header of an llm.c token file", l,
                     p, (long long)size, LLMC_HEADER_BYTES);
            return 0;
        }
        if (h[0] != LLMC_MAGIC) {
            snprintf(message, cap,
                     "%s %s: not an llm.c token file: magic %d, expected %d (headerless tokens are format u16 or u32)",
                     l, p, h[0], LLMC_MAGIC);
            return 0;
        }
        if (h[1] != LLMC_VERSION) {
            snprintf(message, cap, "%s %s: llm.c token file version %d; parc reads version %d (uint16 tokens)", l, p,
                     h[1], LLMC_VERSION);
            return 0;
        }
        if (h[2] < 0 || (int64_t)size - LLMC_HEADER_BYTES != 2 * (int64_t)h[2]) {
            snprintf(message, cap,
                     "%s %s: the header says %d tokens (%lld bytes after the header) but the file holds %lld bytes "
                     "after it",
                     l, p, h[2], 2 * (long long)h[2], (long long)size - LLMC_HEADER_BYTES);
            return 0;
        }
        *header = LLMC_HEADER_BYTES;
    } else if (size % f->width) {
        snprintf(message, cap, "%s %s: %lld bytes is not a whole number of %d-byte tokens (format %s)", l, p,
                 (long long)size, f->width, format_names[format]);
        return 0;
    }
    f->count = (int64_t)(size - *header) / f->width;
    int64_t need = rt->plan.batch * rt->plan.seq + 1;
    if (f->count < need) {
        snprintf(message, cap, "%s %s: %lld tokens are fewer than one batch (batch %lld x seq %lld + 1 = %lld)", l, p,
                 (long long)f->count, (long long)rt->plan.batch, (long long)rt->plan.seq, (long long)need);
        return 0;
    }
    return 1;
}

static int64_t token_at(const uint8_t *base, int width, int64_t i) {
    if (width == 1) return base[i];
    if (width == 2) {
        uint16_t v;
        memcpy(&v, base + 2 * i, 2);
        return v;
    }
    uint32_t v;
    memcpy(&v, base + 4 * i, 4);
    return v;
}

/* Scans tokens [lo, hi) of the file for one >= vocab; 0 and a message when one is. */
static int scan_tokens(prt *rt, prt_token_file *f, int fd, off_t header, int64_t lo, int64_t hi, char *message,
                       size_t cap) {
    uint8_t *block = prt_xmalloc(SCAN_BLOCK_BYTES);
    int64_t per_block = (int64_t)SCAN_BLOCK_BYTES / f->width, vocab = rt->plan.vocab;
    int ok = 1;
    for (int64_t at = lo; at < hi && ok; at += per_block) {
        int64_t n = hi - at < per_block ? hi - at : per_block;
        size_t bytes = (size_t)n * (size_t)f->width, got = 0;
        while (got < bytes) {
            ssize_t r = pread(fd, block + got, bytes - got, header + (off_t)(at * f->width) + (off_t)got);
            if (r <= 0) {
                snprintf(message, cap, "%s %s: cannot read it: %s", f->label, f->path,
                         r < 0 ? strerror(errno) : "the file shrank");
                ok = 0;
                break;
            }
            got += (size_t)r;
        }
        int64_t top = 0;
        if (ok && f->width == 2) {
            const uint16_t *t = (const uint16_t *)block;
            uint16_t m = 0;
#pragma omp simd reduction(max : m)
            for (int64_t i = 0; i < n; i++) m = t[i] > m ? t[i] : m;
            top = m;
        } else if (ok) {
            const uint32_t *t = (const uint32_t *)block;
            uint32_t m = 0;
#pragma omp simd reduction(max : m)
            for (int64_t i = 0; i < n; i++) m = t[i] > m ? t[i] : m;
            top = m;
        }
        if (ok && vocab > 0 && top >= vocab) {
            int64_t i = 0;
            while (token_at(block, f->width, i) < vocab) i++;
            snprintf(message, cap, "%s %s: token %lld at index %lld is not below the model's vocab (%lld)", f->label,
                     f->path, (long long)token_at(block, f->width, i), (long long)(at + i), (long long)vocab);
            ok = 0;
        }
    }
    free(block);
    return ok;
}

/* Checks and maps one file; on a problem writes it to message and returns 0. */
static int open_file(prt *rt, prt_token_file *f, int64_t format, char *message, size_t cap) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer */
    int fd = open(f->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(message, cap, "%s %s: cannot open it: %s", f->label, f->path, strerror(errno));
        return 0;
    }
    struct stat st;
    int ok = fstat(fd, &st) == 0;
    if (!ok) snprintf(message, cap, "%s %s: cannot stat it: %s", f->label, f->path, strerror(errno));
    else if (!S_ISREG(st.st_mode)) {
        snprintf(message, cap, "%s %s: is %s, not a regular file", f->label, f->path,
                 S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
        ok = 0;
    }
    off_t header = 0;
    ok = ok && read_layout(rt, f, fd, st.st_size, format, &header, message, cap);
    if (ok && f->width > 1) {  /* this rank's share of the scan */
        int64_t lo = f->count * rt->world_rank / rt->world_size, hi = f->count * (rt->world_rank + 1) / rt->world_size;
        ok = scan_tokens(rt, f, fd, header, lo, hi, message, cap);
    }
    if (ok) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            snprintf(message, cap, "%s %s: cannot map it: %s", f->label, f->path, strerror(errno));
            ok = 0;
        } else {
            f->map = p;
            f->map_len = (size_t)st.st_size;
            f->tokens = f->map + header;
        }
    }
    close(fd);
    return ok;
}

/* ---------------------------------------------------------------- a file that shrinks */

/* The mapped token files and the message each would end the rank with:
 * reading a page of a mapping past its file's end (a file truncated or
 * rewritten during the run) raises SIGBUS, which names the file instead of a
 * raw backtrace.  Filled before the handler is installed, read only by it. */
static struct {
    const uint8_t *start;
    size_t len;
    char message[4096 + 256];
    size_t message_len;
} g_mapped[2];
static int g_nmapped;

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    (void)context;
    const uint8_t *at = info ? (const uint8_t *)info->si_addr : NULL;
    for (int i = 0; i < g_nmapped; i++)
        if (at >= g_mapped[i].start && at < g_mapped[i].start + g_mapped[i].len) {
            ssize_t w = write(2, g_mapped[i].message, g_mapped[i].message_len);
            (void)w;
            _exit(2);
        }
    signal(sig, SIG_DFL); /* not a token file's: the default, a core and the signal */
    raise(sig);
}

/* Watches file f's mapping for SIGBUS. */
static void watch_mapping(prt *rt, const prt_token_file *f) {
    if (!f->map || g_nmapped >= 2) return;
    int n = g_nmapped;
    g_mapped[n].start = f->map;
    g_mapped[n].len = f->map_len;
    int len = snprintf(g_mapped[n].message, sizeof g_mapped[n].message,
                       "parc: rank %d (%s): error: %s %s: the file shrank while the run read it (truncated or "
                       "rewritten?): a token file must not change during a run\n",
                       rt->world_rank, rt->host, f->label, f->path);
    g_mapped[n].message_len = len < 0 ? 0 : (size_t)len < sizeof g_mapped[n].message ? (size_t)len
                                                                                      : sizeof g_mapped[n].message - 1;
    g_nmapped = n + 1;
    struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

void prt_data_open(prt *rt) {
    const prt_data_desc *d = rt->plan.data;
    prt_token_file *train = &rt->train_data, *val = &rt->val_data;
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    train->path = rt->data_path ? rt->data_path : d ? d->train : NULL;
    train->label = rt->data_path ? "--data" : "data train";
    val->path = rt->val_data_path ? rt->val_data_path : d ? d->validation : NULL;
    val->label = rt->val_data_path ? "--val-data" : "data validation";
    int64_t format = rt->data_format_set ? rt->data_format : d ? d->format : PRT_DATA_TEXT;
    int evaluates = d && d->eval_every > 0 && d->eval_batches > 0;
    if (!train->path && !val->path) return;
    char message[1024] = "";
    double t0 = MPI_Wtime();
    prt_block_begin("checking the data files (start-up)", -1);
    int ok = 1;
    if (rt->val_data_path && !evaluates)
        snprintf(message, sizeof message,
                 "--val-data %s: the plan does not evaluate, so nothing would read it (add `eval every N steps "
                 "batches K;` to its train section)",
                 rt->val_data_path), ok = 0;
    if (ok && train->path) ok = open_file(rt, train, format, message, sizeof message);
    if (ok && val->path) ok = open_file(rt, val, format, message, sizeof message);
    if (ok && evaluates && train->path && !val->path)
        snprintf(message, sizeof message,
                 "the plan evaluates (eval every %lld steps) and trains on %s, so it needs validation data: "
                 "--val-data FILE or `validation \"FILE\";` in its data section",
                 (long long)d->eval_every, train->path), ok = 0;
    prt_block_end();
    prt_startup_verdict(rt, PRT_STARTUP_DATA, ok ? NULL : message);
    watch_mapping(rt, train);
    watch_mapping(rt, val);
    if (rt->world_rank == 0 && !rt->quiet) {
        for (int i = 0; i < 2; i++) {
            const prt_token_file *f = i ? val : train;
            if (!f->map) continue;
            printf("parc: %s %s: %lld tokens (%s)%s\n", f->label, f->path, (long long)f->count,
                   format_names[format], f->width > 1 ? ", every one below the vocab" : "");
        }
        if (format != PRT_DATA_TEXT)
            printf("parc: data checked in %.3f s (each of %d ranks scanned 1/%d of each file)\n", MPI_Wtime() - t0,
                   rt->world_size, rt->world_size);
        fflush(stdout);
    }
}

void prt_data_close(prt *rt) {
    g_nmapped = 0;
    prt_token_file *files[2] = {&rt->train_data, &rt->val_data};
    for (int i = 0; i < 2; i++) {
        if (files[i]->map) munmap((void *)files[i]->map, files[i]->map_len);
        files[i]->map = NULL;
    }
}

/* Sample g's window of T + 1 tokens from a file. */
static void file_sample(const prt_token_file *f, int eval, uint64_t h, uint64_t g, int64_t T, int32_t *tokens,
                        int32_t *targets) {
    int64_t start;
    if (eval) {
        uint64_t windows = (uint64_t)((f->count - 1) / T);
        start = (int64_t)(g % windows) * T;
    } else {
        start = (int64_t)(h % (uint64_t)(f->count - T));
    }
    for (int64_t t = 0; t < T; t++) {
        tokens[t] = (int32_t)token_at(f->tokens, f->width, start + t);
        targets[t] = (int32_t)token_at(f->tokens, f->width, start + t + 1);
    }
}

/* Each sample's rows into the load-balanced split's order (prt_seq_pos_whole). */
static void balance_rows(int32_t *rows, int64_t B, int64_t T, int64_t zz) {
    int32_t *whole = prt_xmalloc(sizeof(int32_t) * (size_t)T);
    for (int64_t b = 0; b < B; b++) {
        memcpy(whole, rows + b * T, sizeof(int32_t) * (size_t)T);
        for (int64_t t = 0; t < T; t++) rows[b * T + t] = whole[prt_seq_pos_whole(t, T, zz)];
    }
    free(whole);
}

void prt_data(prt *rt, void *tokens_, void *targets_, int64_t step, int64_t first_sample, int64_t B, int64_t T,
              int64_t vocab, int64_t zz) {
    double t0 = prt_trace_start(rt);
    int32_t *tokens = tokens_, *targets = targets_;
    PRT_CHECK(vocab > 0 && T > 0 && B >= 0, "prt_data: bad shape B=%lld T=%lld vocab=%lld", (long long)B,
              (long long)T, (long long)vocab);
    PRT_CHECK(zz >= 0 && (zz == 0 || T % (2 * zz) == 0), "prt_data: %lld tokens do not split in 2 x %lld chunks",
              (long long)T, (long long)zz);
    int32_t *host = NULL;  /* a backend with its own memory: generated on the host, then uploaded */
    if (!rt->backend->host_memory) {
        host = prt_xmalloc(2 * sizeof(int32_t) * (size_t)(B * T));
        tokens = host;
        targets = host + B * T;
    }
    int eval = rt->eval_active;
    const prt_token_file *f = eval ? &rt->val_data : &rt->train_data;
    if (eval) {  /* validation samples: the same in every evaluation */
        first_sample += rt->eval_batch * rt->plan.batch;
        step = 0;
    }
    uint64_t seed_key = prt_hash2((uint64_t)rt->plan.seed, eval ? 0x76616c69 /* "vali" */ : 0x64617461 /* "data" */);
    if (f->map) {
        PRT_CHECK(f->count > T, "%s %s: %lld tokens is too short for sequences of %lld tokens", f->label, f->path,
                  (long long)f->count, (long long)T);
        for (int64_t b = 0; b < B; b++) {
            uint64_t g = (uint64_t)(first_sample + b);
            file_sample(f, eval, prt_hash2(prt_hash2(seed_key, (uint64_t)step), g), g, T, tokens + b * T,
                        targets + b * T);
        }
        /* Drop this process's view of the pages just read (the page cache keeps
         * them): a fault may map a whole large folio around a sample, and over a
         * run scattered samples would leave the file resident in every rank. */
        (void)madvise((void *)f->map, f->map_len, MADV_DONTNEED);
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
    prt_dump_data(rt, tokens, targets, eval ? -1 : step, first_sample, B, T);
    if (zz > 0) balance_rows(tokens, B, T, zz), balance_rows(targets, B, T, zz);
    if (host) {
        if (tokens_) rt->backend->upload(rt, tokens_, tokens, sizeof(int32_t) * (size_t)(B * T));
        if (targets_) rt->backend->upload(rt, targets_, targets, sizeof(int32_t) * (size_t)(B * T));
        free(host);
    }
    PRT_TRACE_END(rt, "data", "op", t0, -1, -1);
}
