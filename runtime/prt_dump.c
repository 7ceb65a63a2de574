/*
 * prt_dump.c — dumps for the parity tests (tests/parity/): parameters, gradients,
 * training data and logits, written per rank in little-endian binary files that
 * tests/parity/prt_dump.py reads.  Everything here is off unless PRT_DUMP_DIR is
 * set; parc_rt.h (PRT_DUMP_DIR) describes the files and their formats.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prt_backend.h"
#include "prt_internal.h"

/* File magics, 8 bytes each. */
static const char magic_params[8] = "PRTPAR1";
static const char magic_data[8] = "PRTDAT1";
static const char magic_logits[8] = "PRTLOG1";

/* The dump directory, for messages: a failed write is a user error naming it. */
static const char *g_dump_dir = "?";

static void dump_fail(const char *what) __attribute__((noreturn));
static void dump_fail(const char *what) {
    prt_user_fail(1, "PRT_DUMP_DIR %s: %s: %s", g_dump_dir, what, strerror(errno ? errno : EIO));
}

void prt_dump_init(prt *rt, char *message, size_t size) {
    rt->dump_step = -1;
    const char *dir = getenv("PRT_DUMP_DIR");
    if (!dir || !*dir) return;
    rt->dump_dir = prt_xmalloc(strlen(dir) + 1);
    strcpy(rt->dump_dir, dir);
    g_dump_dir = rt->dump_dir;
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        snprintf(message, size, "PRT_DUMP_DIR %s: cannot create the directory: %s", dir, strerror(errno));
    else if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        snprintf(message, size, "PRT_DUMP_DIR %s: is not a directory", dir);
    else if (access(dir, W_OK | X_OK) != 0)
        snprintf(message, size, "PRT_DUMP_DIR %s: cannot write into it: %s", dir, strerror(errno));
    const char *step = getenv("PRT_DUMP_STEP");
    if (step && *step) {
        char *end = NULL;
        errno = 0;
        long long k = strtoll(step, &end, 10);
        if (*end || errno || k < 1 || k > 1000000000LL)
            snprintf(message, size, "PRT_DUMP_STEP must be a step number from 1 to 1000000000, got '%s'", step);
        rt->dump_step = k;
    }
    const char *all = getenv("PRT_DUMP_DATA_ALL");
    rt->dump_data_all = all && *all && strcmp(all, "0") != 0;
}

static FILE *open_dump(prt *rt, const char *what, const char magic[8]) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.rank%d.bin", rt->dump_dir, what, rt->world_rank);
    FILE *f = fopen(path, "wb");
    if (!f) dump_fail("cannot open a dump file for writing");
    errno = 0;
    if (fwrite(magic, 1, 8, f) != 8) dump_fail("cannot write a dump file");
    return f;
}

static void put(FILE *f, const void *p, size_t size, size_t n) {
    errno = 0;
    if (fwrite(p, size, n, f) != n) dump_fail("cannot write a dump file");
}
static void put_i64(FILE *f, int64_t v) { put(f, &v, sizeof v, 1); }

static float load_value(const char *base, int64_t dtype, int64_t i) {
    if (dtype == PRT_I32) {
        int32_t v;
        memcpy(&v, base + 4 * i, 4);
        return (float)v;
    }
    return prt_load(base, dtype, i);
}

/* One block per instance of buffer `b`, its elements mapped by `gen` (the
 * parameter's own description).  A buffer whose size disagrees with gen's
 * mapping (a ZeRO-2 gradient share) is written with local indices, flags = 1. */
static void write_instances(prt *rt, FILE *f, const prt_buffer *b, const prt_buffer_desc *gen) {
    const prt_buffer_desc *d = &b->desc;
    prt_param_map map;
    int64_t share = prt_param_map_init(rt, &map, gen, d->name, d->elems);
    int64_t flags = share == d->elems ? 0 : 1;
    const char *name = gen->init_name ? gen->init_name : gen->name ? gen->name : "?";
    int64_t *index = prt_xmalloc(sizeof(int64_t) * (size_t)(d->elems ? d->elems : 1));
    float *value = prt_xmalloc(sizeof(float) * (size_t)(d->elems ? d->elems : 1));
    for (int64_t inst = 0; inst < d->instances; inst++) {
        const char *base = b->base + inst * b->instance_bytes;
        void *host = NULL;  /* --device cuda: the instance copied to the host */
        if (!rt->backend->host_memory) base = host = prt_host_copy(rt, base, b->instance_bytes);
        int64_t count = 0;
        for (int64_t e = 0; e < d->elems; e++) {
            int64_t global = flags ? e : prt_param_global(&map, e);
            if (global < 0) continue;  /* ZeRO padding */
            index[count] = global;
            value[count] = load_value(base, d->dtype, e);
            count++;
        }
        put_i64(f, (int64_t)strlen(name));
        put(f, name, 1, strlen(name));
        put_i64(f, prt_param_layer(gen, inst));
        put_i64(f, flags);
        put_i64(f, count);
        put(f, index, sizeof *index, (size_t)count);
        put(f, value, sizeof *value, (size_t)count);
        free(host);
    }
    free(index);
    free(value);
}

/* WHAT.rank<R>.bin with every buffer of class `klass`.  Gradient buffers carry no
 * description of their own: "X.grad" is mapped by the weights buffer "X". */
static void write_class(prt *rt, const char *what, int64_t klass, int64_t step) {
    FILE *f = open_dump(rt, what, magic_params);
    put_i64(f, rt->world_rank);
    put_i64(f, step);
    for (int64_t i = 0; i < rt->nbuffers; i++) {
        const prt_buffer *b = &rt->buffers[i];
        if (b->desc.klass != klass) continue;
        const prt_buffer_desc *gen = &b->desc;
        if (klass != PRT_WEIGHTS) {
            gen = NULL;
            size_t len = b->desc.name ? strlen(b->desc.name) : 0;
            for (int64_t j = 0; j < rt->nbuffers && len > 5 && !strcmp(b->desc.name + len - 5, ".grad"); j++) {
                const prt_buffer_desc *w = &rt->buffers[j].desc;
                if (w->klass == PRT_WEIGHTS && w->name && strlen(w->name) == len - 5 &&
                    !strncmp(w->name, b->desc.name, len - 5))
                    gen = w;
            }
            if (!gen) continue;  /* not the gradient of a parameter */
        }
        write_instances(rt, f, b, gen);
    }
    errno = 0;
    if (fclose(f) != 0) dump_fail("cannot write a dump file");
}

void prt_dump_step_begin(prt *rt, int64_t step) {
    if (rt->dump_dir && step == rt->dump_step) write_class(rt, "init_params", PRT_WEIGHTS, step);
}

void prt_dump_before_optimizer(prt *rt, int64_t step) {
    if (rt->dump_dir && step == rt->dump_step) write_class(rt, "grads", PRT_GRADS, step);
}

void prt_dump_data(prt *rt, const int32_t *tokens, const int32_t *targets, int64_t step, int64_t first_sample,
                   int64_t B, int64_t T) {
    if (!rt->dump_dir || (step != rt->dump_step && !rt->dump_data_all)) return;
    if (!rt->dump_data) rt->dump_data = open_dump(rt, "data", magic_data);
    int64_t header[4] = {step, first_sample, B, T};
    put(rt->dump_data, header, sizeof header[0], 4);
    put(rt->dump_data, tokens, sizeof *tokens, (size_t)(B * T));
    put(rt->dump_data, targets, sizeof *targets, (size_t)(B * T));
}

void prt_dump_logits(prt *rt, const void *logits, int64_t dtype, int64_t N, int64_t V_local, int64_t vocab_offset,
                     int64_t axis) {
    if (!rt->dump_dir || rt->step < 0 || rt->step != rt->dump_step) return;
    if (!rt->dump_logits) rt->dump_logits = open_dump(rt, "logits", magic_logits);
    int64_t header[6] = {rt->step, rt->dump_logits_calls++, N, V_local, vocab_offset, axis};
    put(rt->dump_logits, header, sizeof header[0], 6);
    void *host = NULL;  /* --device cuda: the logits copied to the host */
    if (!rt->backend->host_memory)
        logits = host = prt_host_copy(rt, logits, prt_dtype_size(dtype) * (size_t)(N * V_local));
    if (dtype == PRT_F32) {
        put(rt->dump_logits, logits, sizeof(float), (size_t)(N * V_local));
        free(host);
        return;
    }
    float *row = prt_xmalloc(sizeof(float) * (size_t)(V_local ? V_local : 1));  /* widened row by row */
    for (int64_t n = 0; n < N; n++) {
        for (int64_t j = 0; j < V_local; j++) row[j] = prt_load(logits, dtype, n * V_local + j);
        put(rt->dump_logits, row, sizeof(float), (size_t)V_local);
    }
    free(row);
    free(host);
}

void prt_dump_finalize(prt *rt) {
    if (!rt->dump_dir) return;
    write_class(rt, "params", PRT_WEIGHTS, -1);
    errno = 0;
    if (rt->dump_data && fclose(rt->dump_data) != 0) dump_fail("cannot write the data dump");
    errno = 0;
    if (rt->dump_logits && fclose(rt->dump_logits) != 0) dump_fail("cannot write the logits dump");
    rt->dump_data = rt->dump_logits = NULL;
    free(rt->dump_dir);
    rt->dump_dir = NULL;
}
