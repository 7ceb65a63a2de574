/*
 * prt_buffers.c — the buffers of a stage and their ledger: one block per buffer
 * class from the backend, carved into 64-byte aligned slices (booked to the
 * class), the runtime's own scratch (booked too), parameter maps and the initial
 * values that are a pure function of (parameter, global index, seed), and the
 * address ranges that give every tensor argument its dtype.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prt_backend.h"
#include "prt_draw.h"
#include "prt_internal.h"
#include "cpu/prt_cpu_fast.h"

const char *const prt_class_names[PRT_NCLASS] = {
#define PRT_CLASS_NAME_(id, key, report) key,
    PRT_CLASSES(PRT_CLASS_NAME_)
#undef PRT_CLASS_NAME_
};
const char *const prt_dtype_names[PRT_NDTYPE] = {
#define PRT_DTYPE_NAME_(id, name, bytes) name,
    PRT_DTYPES(PRT_DTYPE_NAME_)
#undef PRT_DTYPE_NAME_
};

size_t prt_dtype_size(int64_t dtype) {
    switch (dtype) {
#define PRT_DTYPE_SIZE_(id, name, bytes) case PRT_##id: return bytes;
    PRT_DTYPES(PRT_DTYPE_SIZE_)
#undef PRT_DTYPE_SIZE_
    }
    return 0;
}

/* ---------------------------------------------------------------- ledger and scratch */

void prt_ledger_book(prt *rt, int64_t klass, int64_t bytes) {
    PRT_CHECK(klass >= 0 && klass < PRT_NCLASS, "bad ledger class %lld", (long long)klass);
    rt->ledger_now[klass] += bytes;
    if (rt->ledger_now[klass] > rt->ledger_peak[klass]) rt->ledger_peak[klass] = rt->ledger_now[klass];
}

static float *grow(prt *rt, float **buf, size_t *cap, size_t floats, int64_t klass) {
    if (floats > *cap) {  /* exactly what is asked: the peak is the largest need */
        size_t want = floats;
        free(*buf);
        *buf = prt_xmalloc(want * sizeof(float));
        prt_ledger_book(rt, klass, (int64_t)((want - *cap) * sizeof(float)));
        *cap = want;
    }
    return *buf;
}

float *prt_comm_stage(prt *rt, size_t floats) {
    return grow(rt, &rt->comm_stage, &rt->comm_stage_cap, floats, PRT_COMM);
}
float *prt_workspace(prt *rt, size_t floats) {
    return grow(rt, &rt->work, &rt->work_cap, floats, PRT_WORKSPACE);
}

/* ---------------------------------------------------------------- buffers */

static void store(void *base, int64_t dtype, int64_t i, double v) {
    switch (dtype) {
    case PRT_F32: ((float *)base)[i] = (float)v; break;
    case PRT_BF16: ((uint16_t *)base)[i] = prt_f32_to_bf16((float)v); break;  /* the rounded fp32 value */
    case PRT_F16: ((uint16_t *)base)[i] = prt_f32_to_f16((float)v); break;
    case PRT_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    case PRT_U8: ((uint8_t *)base)[i] = (uint8_t)v; break;
    }
}

/* ---------------------------------------------------------------- parameter maps */

int64_t prt_param_map_init(prt *rt, prt_param_map *map, const prt_buffer_desc *gen, const char *name,
                           int64_t undescribed_elems) {
    int64_t ndim = gen->ndim;
    PRT_CHECK(ndim >= 0 && ndim <= PRT_MAX_DIMS, "buffer %s: ndim %lld", name, (long long)ndim);
    memset(map, 0, sizeof *map);
    map->ndim = ndim;
    map->local_total = 1;
    for (int64_t k = 0; k < ndim; k++) {
        int s = prt_axis_size(rt, gen->split_axis[k]);
        PRT_CHECK(gen->gdims[k] > 0 && gen->gdims[k] % s == 0,
                  "buffer %s: dim %lld (%lld) does not divide by its axis size %d", name, (long long)k,
                  (long long)gen->gdims[k], s);
        map->gdims[k] = gen->gdims[k];
        map->local_dims[k] = gen->gdims[k] / s;
        map->offset[k] = prt_coord(rt, gen->split_axis[k]) * map->local_dims[k];
        map->local_total *= map->local_dims[k];
    }
    if (ndim == 0) map->local_total = undescribed_elems;  /* undescribed: local index is the global index */
    int64_t share = map->local_total;
    if (gen->zero_axis >= 0) {
        PRT_CHECK(ndim > 0, "buffer %s: a ZeRO-sharded parameter needs its global dims", name);
        int64_t zero_size = prt_axis_size(rt, gen->zero_axis);
        share = (map->local_total + zero_size - 1) / zero_size;
        if (gen->zero_whole) return share * zero_size;  /* the whole block, padded: first stays 0 */
        map->first = prt_coord(rt, gen->zero_axis) * share;
    }
    return share;
}

int64_t prt_param_global(const prt_param_map *map, int64_t e) {
    int64_t local = map->first + e;
    if (local >= map->local_total) return -1;  /* ZeRO padding */
    if (map->ndim == 0) return local;
    int64_t idx[PRT_MAX_DIMS], rem = local, global = 0;  /* local flat -> local multi-index -> global flat */
    for (int64_t k = map->ndim - 1; k >= 0; k--) {
        idx[k] = rem % map->local_dims[k] + map->offset[k];
        rem /= map->local_dims[k];
    }
    for (int64_t k = 0; k < map->ndim; k++) global = global * map->gdims[k] + idx[k];
    return global;
}

int64_t prt_param_layer(const prt_buffer_desc *gen, int64_t instance) {
    if (gen->first_layer < 0) return -1;
    /* the stage's table of its chunks' layers (interleaved pipelines), else consecutive */
    if (gen->layer_of) return instance < gen->layer_of_n ? gen->layer_of[instance] : -1;
    return gen->first_layer + instance;
}

/* Elements [e0, e1) of one instance: runs of consecutive global indices (a row
 * of the innermost local dim, one prt_param_global per run), drawn a run at a
 * time.  Zeros are not written: the buffer comes zeroed (alloc_zero, or the
 * host copy's calloc), ZeRO padding included. */
static void fill_range(const prt_param_map *map, const prt_buffer_desc *gen, uint64_t key, char *base,
                       int64_t dtype, int64_t e0, int64_t e1) {
    enum { RUN = 512 };
    double v[RUN];
    int64_t inner = map->ndim > 0 ? map->local_dims[map->ndim - 1] : INT64_MAX;
    for (int64_t e = e0; e < e1;) {
        int64_t global = prt_param_global(map, e);
        if (global < 0) break;  /* the rest of the instance is ZeRO padding */
        int64_t n = e1 - e < RUN ? e1 - e : RUN;
        int64_t row_left = inner - (map->first + e) % inner;
        if (n > row_left) n = row_left;
        if (n > map->local_total - (map->first + e)) n = map->local_total - (map->first + e);
        if (gen->init == PRT_INIT_NORMAL) prt_draw_normal(key, global, n, gen->init_std, v);
        else for (int64_t i = 0; i < n; i++) v[i] = 1.0;  /* PRT_INIT_ONES */
        if (dtype == PRT_F32) for (int64_t i = 0; i < n; i++) ((float *)base)[e + i] = (float)v[i];
        else for (int64_t i = 0; i < n; i++) store(base, dtype, e + i, v[i]);
        e += n;
    }
}

/* Fills buffer `dst` (this rank's local shard of every instance, zeroed) with
 * the initial values that `gen` describes: value(seed, init_name, global layer,
 * global index), prt_draw.h.  A pure function of the element, so the elements
 * are split over the CPU ops' threads (prt_cpu_threads) in fixed chunks and
 * the values do not depend on their number. */
static void init_values(prt *rt, const prt_buffer *dst, const prt_buffer_desc *gen) {
    const prt_buffer_desc *d = &dst->desc;
    prt_param_map map;
    int64_t share = prt_param_map_init(rt, &map, gen, d->name, d->elems);
    PRT_CHECK(d->elems == share,
              "buffer %s: %lld local elements per instance, but its dims and sharding give %lld", d->name,
              (long long)d->elems, (long long)share);
    if (gen->init == PRT_INIT_ZEROS) return;  /* the buffer is zeroed */
    uint64_t name_key = prt_hash2((uint64_t)rt->plan.seed, prt_hash_str(gen->init_name ? gen->init_name : gen->name));
    const int64_t chunk = 32768;
    int64_t nchunks = (d->elems + chunk - 1) / chunk;
    for (int64_t inst = 0; inst < d->instances; inst++) {
        int64_t layer = prt_param_layer(gen, inst);
        uint64_t key = prt_hash2(name_key, (uint64_t)layer);
        char *base = dst->base + inst * dst->instance_bytes;
        int nt = prt_cpu_threads();
#pragma omp parallel for num_threads(nt) if (nt > 1 && nchunks > 1) schedule(static)
        for (int64_t c = 0; c < nchunks; c++) {
            int64_t e1 = (c + 1) * chunk < d->elems ? (c + 1) * chunk : d->elems;
            fill_range(&map, gen, key, base, d->dtype, c * chunk, e1);
        }
    }
}

static void build_ranges(prt *rt);

void prt_register_buffers(prt *rt, const prt_buffer_desc *descs, int64_t count) {
    PRT_CHECK(!rt->buffers, "prt_register_buffers called twice");
    PRT_CHECK(count >= 0 && (count == 0 || descs), "prt_register_buffers: bad table");
    rt->buffers = prt_xcalloc((size_t)(count ? count : 1), sizeof(prt_buffer));
    rt->nbuffers = count;
    size_t class_size[PRT_NCLASS] = {0};
    size_t offset[count ? count : 1];
    for (int64_t i = 0; i < count; i++) {
        const prt_buffer_desc *d = &descs[i];
        const char *name = d->name ? d->name : "?";
        PRT_CHECK(d->klass >= 0 && d->klass < PRT_NCLASS, "buffer %s: bad class %lld", name, (long long)d->klass);
        PRT_CHECK(prt_dtype_size(d->dtype), "buffer %s: bad dtype %lld", name, (long long)d->dtype);
        PRT_CHECK(d->elems >= 0 && d->instances >= 0, "buffer %s: negative size", name);
        PRT_CHECK(d->init >= PRT_INIT_NONE && d->init <= PRT_INIT_COPY, "buffer %s: bad init %lld", name,
                  (long long)d->init);
        PRT_CHECK(!d->layer_of || (d->first_layer >= 0 && d->layer_of_n == d->instances),
                  "buffer %s: a layer table of %lld entries for %lld instances", name, (long long)d->layer_of_n,
                  (long long)d->instances);
        rt->buffers[i].desc = *d;
        rt->buffers[i].instance_bytes = (size_t)d->elems * prt_dtype_size(d->dtype);
        size_t bytes = rt->buffers[i].instance_bytes * (size_t)d->instances;
        offset[i] = class_size[d->klass];
        class_size[d->klass] += (bytes + 63) & ~(size_t)63;  /* 64-byte aligned slices */
        prt_ledger_book(rt, d->klass, (int64_t)bytes);       /* the ledger counts tensor bytes */
    }
    for (int c = 0; c < PRT_NCLASS; c++) {
        if (!class_size[c]) continue;
        /* one zeroed block per class from the backend (slices stay 64-byte aligned) */
        rt->class_block[c] = rt->backend->alloc_zero(rt, class_size[c], prt_class_names[c]);
    }
    for (int64_t i = 0; i < count; i++) rt->buffers[i].base = rt->class_block[descs[i].klass] + offset[i];
    build_ranges(rt);
    for (int64_t i = 0; i < count; i++) {
        const prt_buffer_desc *d = &descs[i];
        /* fp32 master weights start as the parameter's full-precision values: a
         * master without any is a table error, not a model that starts from 0 */
        PRT_CHECK(d->klass != PRT_MASTER || d->init != PRT_INIT_NONE,
                  "buffer %s: master weights without initial values (init NONE); the table must describe "
                  "the parameter (its init, dims and ZeRO axis) or COPY an fp32-equal-shaped one", d->name);
        if (d->init == PRT_INIT_NONE) continue;
        const prt_buffer_desc *gen = d;
        if (d->init == PRT_INIT_COPY) {
            PRT_CHECK(d->copy_of >= 0 && d->copy_of < count && d->copy_of != i, "buffer %s: bad copy_of %lld",
                      d->name, (long long)d->copy_of);
            gen = &descs[d->copy_of];
            PRT_CHECK(gen->init != PRT_INIT_COPY && gen->init != PRT_INIT_NONE,
                      "buffer %s: copy_of names %s, which has no initial values", d->name, gen->name);
            PRT_CHECK(gen->elems == d->elems && gen->instances == d->instances,
                      "buffer %s: copy of %s with another shape", d->name, gen->name);
        }
        PRT_CHECK(gen->init != PRT_INIT_NORMAL || d->dtype != PRT_I32, "buffer %s: normal init of an i32 buffer",
                  d->name);
        /* A copy regenerates the source's values in its own dtype: an fp32 master of
         * bf16 weights gets the full-precision initial values, equal to the source's
         * when the dtypes agree. */
        if (!rt->backend->host_memory) {  /* generated on the host, copied to the backend's memory */
            prt_buffer host = rt->buffers[i];
            size_t bytes = host.instance_bytes * (size_t)d->instances;
            host.base = prt_xcalloc(bytes ? bytes : 1, 1);
            init_values(rt, &host, gen);
            if (bytes) rt->backend->upload(rt, rt->buffers[i].base, host.base, bytes);
            free(host.base);
            continue;
        }
        init_values(rt, &rt->buffers[i], gen);
    }
    prt_startup_mark(rt, PRT_START_BUFFERS);
}

static int range_cmp(const void *a, const void *b) {
    const prt_range *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The sorted address ranges of the non-empty buffers (slices never overlap). */
static void build_ranges(prt *rt) {
    rt->ranges = prt_xcalloc((size_t)(rt->nbuffers ? rt->nbuffers : 1), sizeof(prt_range));
    rt->nranges = 0;
    for (int64_t i = 0; i < rt->nbuffers; i++) {
        const prt_buffer *b = &rt->buffers[i];
        size_t bytes = b->instance_bytes * (size_t)b->desc.instances;
        if (bytes) rt->ranges[rt->nranges++] = (prt_range){b->base, b->base + bytes, b->desc.dtype, i};
    }
    qsort(rt->ranges, (size_t)rt->nranges, sizeof(prt_range), range_cmp);
}

/* The range of the registered buffer holding ptr, or NULL. */
static const prt_range *range_of(prt *rt, const void *ptr) {
    const char *p = ptr;
    if (!p) return NULL;
    int64_t lo = 0, hi = rt->nranges;  /* first range with begin > p */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (rt->ranges[mid].begin <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && p < rt->ranges[lo - 1].end ? &rt->ranges[lo - 1] : NULL;
}

int64_t prt_dtype_of(prt *rt, const void *ptr) {
    const prt_range *r = range_of(rt, ptr);
    return r ? r->dtype : -1;
}

void prt_verify_arg_dtype(prt *rt, const void *p, int64_t dtype, int index, const char *op) {
    PRT_CHECK(dtype >= 0 && dtype < PRT_NDTYPE, "%s: the call's dtypes word gives pointer argument %d the code %lld, "
              "which is no dtype", op, index + 1, (long long)dtype);
    const prt_range *r = range_of(rt, p);
    PRT_CHECK(!r || r->dtype == dtype, "%s: the call's dtypes word declares pointer argument %d %s, but it points "
              "into buffer %s, which holds %s (the program and the runtime disagree on the buffer's dtype)", op,
              index + 1, prt_dtype_names[dtype], rt->buffers[r->buffer].desc.name, prt_dtype_names[r->dtype]);
}

void prt_dtype_checks_update(prt *rt) {
    rt->check_dtypes = rt->check_dtypes_always || !(rt->eval_active ? rt->dtypes_eval_seen : rt->dtypes_step_seen);
}

void *prt_ptr(prt *rt, int64_t buffer, int64_t instance) {
    PRT_CHECK(buffer >= 0 && buffer < rt->nbuffers, "prt_ptr: buffer %lld out of range (%lld registered)",
              (long long)buffer, (long long)rt->nbuffers);
    const prt_buffer *b = &rt->buffers[buffer];
    PRT_CHECK(instance >= 0 && instance < b->desc.instances, "prt_ptr: buffer %s has %lld instances, asked for %lld",
              b->desc.name, (long long)b->desc.instances, (long long)instance);
    return b->base + instance * b->instance_bytes;
}

void prt_expect_memory(prt *rt, const int64_t *expected_bytes) {
    PRT_CHECK(expected_bytes, "prt_expect_memory: no ledger");
    memcpy(rt->expected, expected_bytes, sizeof rt->expected);
    rt->have_expected = 1;
}


void *prt_host_copy(prt *rt, const void *src, size_t bytes) {
    void *host = prt_xmalloc(bytes);
    if (bytes) rt->backend->download(rt, host, src, bytes);
    return host;
}
