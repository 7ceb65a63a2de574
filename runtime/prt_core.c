/*
 * prt_core.c — lifecycle of the CPU runtime: MPI and the mesh, runtime flags,
 * buffers and their ledger, parameter initialisation, steps and their metrics,
 * errors and the watchdog for blocking MPI calls.
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prt_internal.h"

/* ORDER enum prt_class */
const char *const prt_class_names[PRT_NCLASS] = {"weights", "grads",  "master",   "optim",
                                                 "activations", "comm", "workspace"};
/* ORDER enum prt_dtype */
const char *const prt_dtype_names[4] = {"f32", "bf16", "f16", "i32"};

size_t prt_dtype_size(int64_t dtype) {
    switch (dtype) {
    case PRT_F32: return 4;
    case PRT_BF16: return 2;
    case PRT_F16: return 2;
    case PRT_I32: return 4;
    }
    return 0;
}

/* The one context of this process: errors and the watchdog report its rank and host. */
static prt *g_rt;
static int g_rank = -1;
static char g_host[MPI_MAX_PROCESSOR_NAME] = "?";

/* ---------------------------------------------------------------- errors */

static int mpi_is_running(void) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

void prt_fail(const char *file, int line, const char *fmt, ...) {
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    fprintf(stderr, "parc: rank %d (%s): %s:%d: error: %s\n", g_rank, g_host, file, line, message);
    fflush(stderr);
    if (mpi_is_running()) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void prt_mpi_fail(const char *file, int line, const char *call, int err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", err);
    prt_fail(file, line, "MPI call failed: %s: %s", call, text);
}

void *prt_xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    PRT_CHECK(p, "out of memory allocating %zu bytes", bytes);
    return p;
}
void *prt_xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    PRT_CHECK(p, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}
void *prt_xrealloc(void *ptr, size_t bytes) {
    void *p = realloc(ptr, bytes ? bytes : 1);
    PRT_CHECK(p, "out of memory reallocating %zu bytes", bytes);
    return p;
}

/* ---------------------------------------------------------------- watchdog */

static struct {
    pthread_t thread;
    int running;
    atomic_int stop;
    atomic_llong blocked_since_ms;   /* 0: not inside a blocking call */
    _Atomic(const char *) what;
    atomic_llong axis;
    long long timeout_ms;
} g_watch;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void prt_block_begin(const char *what, int64_t axis) {
    atomic_store(&g_watch.what, what);
    atomic_store(&g_watch.axis, (long long)axis);
    atomic_store(&g_watch.blocked_since_ms, now_ms());
}
void prt_block_end(void) { atomic_store(&g_watch.blocked_since_ms, 0); }

static void *watchdog_main(void *arg) {
    (void)arg;
    while (!atomic_load(&g_watch.stop)) {
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
        long long since = atomic_load(&g_watch.blocked_since_ms);
        if (since && now_ms() - since > g_watch.timeout_ms) {
            long long axis = atomic_load(&g_watch.axis);
            const char *axis_name = "world";
            if (g_rt && axis >= 0 && axis < g_rt->naxes && g_rt->plan.axis_names[axis])
                axis_name = g_rt->plan.axis_names[axis];
            fprintf(stderr,
                    "parc: rank %d (%s): error: %s on axis %s blocked for more than %lld s "
                    "(PRT_TIMEOUT): a peer rank probably died or hangs; aborting this rank\n",
                    g_rank, g_host, atomic_load(&g_watch.what), axis_name, g_watch.timeout_ms / 1000);
            fflush(stderr);
            /* No MPI from this thread: exiting without MPI_Finalize makes mpirun end the job. */
            _exit(1);
        }
    }
    return NULL;
}

static void watchdog_start(void) {
    const char *env = getenv("PRT_TIMEOUT");
    double seconds = env ? atof(env) : 300.0;
    if (seconds <= 0) return;
    g_watch.timeout_ms = (long long)(seconds * 1000.0);
    atomic_store(&g_watch.stop, 0);
    atomic_store(&g_watch.blocked_since_ms, 0);
    PRT_CHECK(pthread_create(&g_watch.thread, NULL, watchdog_main, NULL) == 0, "cannot start the watchdog thread");
    g_watch.running = 1;
}

static void watchdog_stop(void) {
    if (!g_watch.running) return;
    atomic_store(&g_watch.stop, 1);
    pthread_join(g_watch.thread, NULL);
    g_watch.running = 0;
}

/* ---------------------------------------------------------------- flags */

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s [--steps N] [--data FILE] [--memory] [--trace FILE] [--quiet] [--device cpu]\n"
            "  --steps N      number of training steps (default: the plan's)\n"
            "  --data FILE    train on FILE, byte level (vocab must be >= 256); default: synthetic data\n"
            "  --memory       print the memory ledger per rank and class (measured vs compiler)\n"
            "  --trace FILE   write a Chrome trace (JSON, open in Perfetto) of every op and collective\n"
            "  --quiet        print only the final line\n"
#ifdef PRT_HAVE_CUDA
            "  --device cpu|cuda  the backend: cpu (default), or cuda: every op on the GPU, one rank per GPU\n"
            "                 (PRT_COLLECTIVES=nccl|mpi picks the collectives; see docs/gpu.md)\n"
#else
            "  --device cpu   the backend (this runtime is the CPU one; cuda needs the CUDA build)\n"
#endif
            "environment: PRT_LOSS_FILE (rank 0 writes 'step loss' lines), PRT_TIMEOUT (seconds a\n"
            "blocking call may wait, default 300, 0 = off), OPENBLAS_NUM_THREADS, PRT_DUMP_DIR,\n"
            "PRT_DUMP_STEP, PRT_DUMP_DATA_ALL (parameter/gradient/data/logit dumps, see parc_rt.h)\n",
            prog);
}

/* Every rank parses the same argv, so every rank takes the same exit. */
static void exit_all(prt *rt, int status) {
    (void)rt;
    fflush(stdout);
    fflush(stderr);
    MPI_Finalize();
    exit(status);
}

static void bad_flag(prt *rt, const char *prog, const char *fmt, const char *arg) {
    if (rt->world_rank == 0) {
        fprintf(stderr, "parc: error: ");
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n");
        usage(stderr, prog);
    }
    exit_all(rt, 2);
}

static void parse_flags(prt *rt, int argc, char **argv) {
    const char *prog = argc > 0 && argv[0] ? argv[0] : "parc-program";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--steps")) {
            char *end = NULL;
            if (!value) bad_flag(rt, prog, "%s needs a value", a);
            long long n = strtoll(value, &end, 10);
            if (!*value || *end || n < 0) bad_flag(rt, prog, "--steps needs a non-negative integer, got '%s'", value);
            rt->steps = n;
            i++;
        } else if (!strcmp(a, "--data")) {
            if (!value) bad_flag(rt, prog, "%s needs a file", a);
            rt->data_path = value;
            i++;
        } else if (!strcmp(a, "--trace")) {
            if (!value) bad_flag(rt, prog, "%s needs a file", a);
            rt->trace_path = value;
            i++;
        } else if (!strcmp(a, "--device")) {
            if (!value) bad_flag(rt, prog, "%s needs cpu or cuda", a);
#ifdef PRT_HAVE_CUDA
            if (!strcmp(value, "cuda")) {
                if (prt_cuda_device_count() <= 0)
                    bad_flag(rt, prog, "--device %s: no CUDA device is visible to this process; only the CPU runtime "
                                       "(--device cpu) can run here", value);
                rt->device = 1;
            }
#else
            if (!strcmp(value, "cuda"))
                bad_flag(rt, prog, "--device %s: this program was linked with the CPU runtime (MPI + OpenBLAS); "
                                   "build it with the CUDA backend to run on GPUs", value);
#endif
            if (strcmp(value, "cpu") && strcmp(value, "cuda"))
                bad_flag(rt, prog, "--device must be cpu or cuda, got '%s'", value);
            i++;
        } else if (!strcmp(a, "--memory")) {
            rt->memory_report = 1;
        } else if (!strcmp(a, "--quiet")) {
            rt->quiet = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rt->world_rank == 0) usage(stdout, prog);
            exit_all(rt, 0);
        } else {
            bad_flag(rt, prog, "unknown argument '%s'", a);
        }
    }
}

/* ---------------------------------------------------------------- init */

prt *prt_init(int64_t argc, char **argv, const prt_plan_desc *plan) {
    int ac = (int)argc, provided = 0;
    char **av = argv;
    PRT_CHECK(plan, "prt_init: no plan");
    PRT_MPI_CHECK(MPI_Init_thread(&ac, &av, MPI_THREAD_FUNNELED, &provided));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    prt *rt = prt_xcalloc(1, sizeof *rt);
    g_rt = rt;
    rt->plan = *plan;
    PRT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rt->world_rank));
    PRT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &rt->world_size));
    int hostlen = 0;
    PRT_MPI_CHECK(MPI_Get_processor_name(rt->host, &hostlen));
    g_rank = rt->world_rank;
    snprintf(g_host, sizeof g_host, "%s", rt->host);
    rt->step = -1;
    rt->steps = plan->steps;
    rt->die_rank = rt->die_step = -1;

    parse_flags(rt, (int)argc, argv);

    /* The mesh: world size must be the product of the axis sizes. */
    int64_t product = 1;
    int bad_mesh = plan->naxes < 0 || plan->naxes > PRT_MAX_AXES;
    for (int64_t a = 0; !bad_mesh && a < plan->naxes; a++) {
        if (plan->axis_sizes[a] < 1) bad_mesh = 1;
        else product *= plan->axis_sizes[a];
    }
    if (bad_mesh || product != rt->world_size) {
        if (rt->world_rank == 0) {
            fprintf(stderr, "parc: error: plan '%s' needs %lld ranks (mesh", plan->plan_name ? plan->plan_name : "?",
                    (long long)product);
            for (int64_t a = 0; a < plan->naxes && a < PRT_MAX_AXES; a++)
                fprintf(stderr, "%s%s=%lld", a ? " x " : " ", plan->axis_names[a] ? plan->axis_names[a] : "?",
                        (long long)plan->axis_sizes[a]);
            fprintf(stderr, ") but was started with %d; run it with mpirun -np %lld\n", rt->world_size,
                    (long long)product);
        }
        exit_all(rt, 2);
    }
    rt->naxes = (int)plan->naxes;

    /* Coordinates, last axis fastest; one communicator per axis (key = coordinate). */
    int stride = 1, rest = rt->world_rank;
    int strides[PRT_MAX_AXES];
    for (int a = rt->naxes - 1; a >= 0; a--) {
        rt->axis_size[a] = (int)plan->axis_sizes[a];
        rt->coord[a] = rest % rt->axis_size[a];
        rest /= rt->axis_size[a];
        strides[a] = stride;
        stride *= rt->axis_size[a];
    }
    for (int a = 0; a < rt->naxes; a++) {
        int color = rt->world_rank - rt->coord[a] * strides[a];
        PRT_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, rt->coord[a], &rt->axis_comm[a]));
        int r = -1;
        PRT_MPI_CHECK(MPI_Comm_rank(rt->axis_comm[a], &r));
        PRT_CHECK(r == rt->coord[a], "axis %d: communicator rank %d != coordinate %d", a, r, rt->coord[a]);
    }
    int *tag_ub = NULL, has_ub = 0;
    PRT_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &has_ub));
    rt->tag_ub = has_ub && tag_ub ? *tag_ub : 32767;

    /* OpenBLAS: one thread per rank when several ranks share a node, unless the user says. */
    MPI_Comm local;
    PRT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    PRT_MPI_CHECK(MPI_Comm_size(local, &rt->local_ranks));
    MPI_Comm_free(&local);
    if (!getenv("OPENBLAS_NUM_THREADS") && rt->local_ranks > 1) openblas_set_num_threads(1);

    /* Test and metrics hooks. */
    const char *die = getenv("PRT_TEST_DIE");
    if (die) {
        long long r = -1, s = -1;
        PRT_CHECK(sscanf(die, "%lld:%lld", &r, &s) == 2, "PRT_TEST_DIE must be RANK:STEP, got '%s'", die);
        rt->die_rank = r;
        rt->die_step = s;
    }
    const char *loss_path = getenv("PRT_LOSS_FILE");
    if (loss_path && *loss_path && rt->world_rank == 0) {
        rt->loss_file = fopen(loss_path, "w");
        PRT_CHECK(rt->loss_file, "cannot write PRT_LOSS_FILE '%s'", loss_path);
    }
    if (rt->data_path) prt_data_load(rt, rt->data_path);
    prt_dump_init(rt);
#ifdef PRT_HAVE_CUDA
    if (rt->device) prt_cuda_init(rt);
#endif

    rt->tracing = rt->trace_path != NULL;
    PRT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    rt->time_origin = MPI_Wtime();
    watchdog_start();
    return rt;
}

int64_t prt_coord(prt *rt, int64_t axis) {
    if (axis < 0) return 0;
    PRT_CHECK(axis < rt->naxes, "axis %lld out of range (mesh has %d axes)", (long long)axis, rt->naxes);
    return rt->coord[axis];
}

int64_t prt_steps(prt *rt) { return rt->steps; }

int prt_axis_size(prt *rt, int64_t axis) {
    if (axis < 0) return 1;
    PRT_CHECK(axis < rt->naxes, "axis %lld out of range (mesh has %d axes)", (long long)axis, rt->naxes);
    return rt->axis_size[axis];
}

MPI_Comm prt_axis_comm(prt *rt, int64_t axis) {
    if (axis < 0) return MPI_COMM_NULL;
    PRT_CHECK(axis < rt->naxes, "axis %lld out of range (mesh has %d axes)", (long long)axis, rt->naxes);
    return rt->axis_comm[axis];
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

float *prt_comm_stage(prt *rt, size_t floats) { return grow(rt, &rt->comm_stage, &rt->comm_stage_cap, floats, PRT_COMM); }
float *prt_workspace(prt *rt, size_t floats) { return grow(rt, &rt->work, &rt->work_cap, floats, PRT_WORKSPACE); }

/* ---------------------------------------------------------------- buffers */

static void store(void *base, int64_t dtype, int64_t i, double v) {
    switch (dtype) {
    case PRT_F32: ((float *)base)[i] = (float)v; break;
    case PRT_BF16: ((uint16_t *)base)[i] = prt_f32_to_bf16((float)v); break;  /* the rounded fp32 value */
    case PRT_F16: ((uint16_t *)base)[i] = prt_f32_to_f16((float)v); break;
    case PRT_I32: ((int32_t *)base)[i] = (int32_t)v; break;
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
    /* chunks of layers_per_chunk layers, chunk_layer_stride apart (interleaved pipelines), else consecutive */
    if (gen->layers_per_chunk > 0)
        return gen->first_layer + (instance / gen->layers_per_chunk) * gen->chunk_layer_stride +
               instance % gen->layers_per_chunk;
    return gen->first_layer + instance;
}

/* Fills buffer `dst` (this rank's local shard of every instance) with the initial
 * values that `gen` describes: value(seed, init_name, global layer, global index). */
static void init_values(prt *rt, const prt_buffer *dst, const prt_buffer_desc *gen) {
    const prt_buffer_desc *d = &dst->desc;
    prt_param_map map;
    int64_t share = prt_param_map_init(rt, &map, gen, d->name, d->elems);
    PRT_CHECK(d->elems == share,
              "buffer %s: %lld local elements per instance, but its dims and sharding give %lld", d->name,
              (long long)d->elems, (long long)share);
    uint64_t name_key = prt_hash2((uint64_t)rt->plan.seed, prt_hash_str(gen->init_name ? gen->init_name : gen->name));
    for (int64_t inst = 0; inst < d->instances; inst++) {
        int64_t layer = prt_param_layer(gen, inst);
        uint64_t key = prt_hash2(name_key, (uint64_t)layer);
        char *base = dst->base + inst * dst->instance_bytes;
        for (int64_t e = 0; e < d->elems; e++) {
            int64_t global = prt_param_global(&map, e);
            double v = 0.0;
            if (global >= 0) {
                switch (gen->init) {
                case PRT_INIT_ONES: v = 1.0; break;
                case PRT_INIT_ZEROS: v = 0.0; break;
                case PRT_INIT_NORMAL: {
                    double u1 = prt_unit(prt_hash2(key, 2 * (uint64_t)global));
                    double u2 = prt_unit(prt_hash2(key, 2 * (uint64_t)global + 1));
                    v = gen->init_std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
                    break;
                }
                }
            }
            store(base, d->dtype, e, v);
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
        PRT_CHECK(d->init >= PRT_INIT_NONE && d->init <= PRT_INIT_COPY, "buffer %s: bad init %lld", name, (long long)d->init);
        rt->buffers[i].desc = *d;
        rt->buffers[i].instance_bytes = (size_t)d->elems * prt_dtype_size(d->dtype);
        size_t bytes = rt->buffers[i].instance_bytes * (size_t)d->instances;
        offset[i] = class_size[d->klass];
        class_size[d->klass] += (bytes + 63) & ~(size_t)63;  /* 64-byte aligned slices */
        prt_ledger_book(rt, d->klass, (int64_t)bytes);       /* the ledger counts tensor bytes */
    }
    for (int c = 0; c < PRT_NCLASS; c++) {
        if (!class_size[c]) continue;
#ifdef PRT_HAVE_CUDA
        if (rt->device) {  /* one cudaMalloc per class, zeroed (slices stay 64-byte aligned) */
            rt->class_block[c] = prt_cuda_alloc_zero(rt, class_size[c], prt_class_names[c]);
            continue;
        }
#endif
        rt->class_block[c] = aligned_alloc(64, class_size[c]);
        PRT_CHECK(rt->class_block[c], "out of memory: %zu bytes of %s", class_size[c], prt_class_names[c]);
        memset(rt->class_block[c], 0, class_size[c]);
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
        PRT_CHECK(gen->init != PRT_INIT_NORMAL || d->dtype != PRT_I32, "buffer %s: normal init of an i32 buffer", d->name);
        /* A copy regenerates the source's values in its own dtype: an fp32 master of
         * bf16 weights gets the full-precision initial values, equal to the source's
         * when the dtypes agree. */
#ifdef PRT_HAVE_CUDA
        if (rt->device) {  /* generated on the host, copied to the device */
            prt_buffer host = rt->buffers[i];
            size_t bytes = host.instance_bytes * (size_t)d->instances;
            host.base = prt_xcalloc(bytes ? bytes : 1, 1);
            init_values(rt, &host, gen);
            if (bytes) prt_cuda_h2d(rt, rt->buffers[i].base, host.base, bytes);
            free(host.base);
            continue;
        }
#endif
        init_values(rt, &rt->buffers[i], gen);
    }
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
        if (bytes) rt->ranges[rt->nranges++] = (prt_range){b->base, b->base + bytes, b->desc.dtype};
    }
    qsort(rt->ranges, (size_t)rt->nranges, sizeof(prt_range), range_cmp);
}

int64_t prt_dtype_of(prt *rt, const void *ptr) {
    const char *p = ptr;
    if (!p) return -1;
    int64_t lo = 0, hi = rt->nranges;  /* first range with begin > p */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (rt->ranges[mid].begin <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && p < rt->ranges[lo - 1].end ? rt->ranges[lo - 1].dtype : -1;
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

/* ---------------------------------------------------------------- steps */

void prt_add_step_loss(prt *rt, double loss) { rt->step_loss += loss; }

void prt_step_begin(prt *rt, int64_t step) {
    if (rt->die_rank == rt->world_rank && rt->die_step == step) {
        fprintf(stderr, "parc: rank %d (%s): PRT_TEST_DIE: killing myself at step %lld\n", rt->world_rank, rt->host,
                (long long)step);
        fflush(stderr);
        raise(SIGKILL);
    }
    rt->step = step;
    rt->step_loss = 0.0;
    rt->step_start = MPI_Wtime();
    prt_dump_step_begin(rt, step);
}

void prt_before_optimizer(prt *rt, int64_t step) {
    PRT_CHECK(rt->step == step, "prt_before_optimizer(%lld) outside step %lld", (long long)step, (long long)rt->step);
    prt_dump_before_optimizer(rt, step);
}

void prt_step_end(prt *rt, int64_t step) {
    PRT_CHECK(rt->step == step, "prt_step_end(%lld) without prt_step_begin(%lld)", (long long)step, (long long)step);
#ifdef PRT_HAVE_CUDA
    if (rt->device) prt_cuda_sync(rt);  /* the step's time includes its device work */
#endif
    prt_comm_complete_sends(rt);
    double loss = rt->step_loss;
    double t_comm = prt_trace_start(rt);
    prt_block_begin("loss all-reduce (step end)", -1);
    PRT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    prt_block_end();
    PRT_TRACE_END(rt, "step_loss_allreduce", "comm", t_comm, 8, -1);
    double tokens = (double)rt->plan.batch * (double)rt->plan.seq;
    loss = tokens > 0 ? loss / tokens : loss;
    double end = MPI_Wtime(), seconds = end - rt->step_start;
    if (rt->tracing) prt_trace_record(rt, "step", "step", rt->step_start, -1, -1);
    rt->steps_done++;
    rt->total_seconds += seconds;
    rt->last_loss = loss;
    if (rt->world_rank == 0) {
        if (!rt->quiet) {
            printf("step %lld | loss %.6f | %.0f tok/s | %.1f ms\n", (long long)step, loss,
                   seconds > 0 ? tokens / seconds : 0.0, seconds * 1e3);
            fflush(stdout);
        }
        if (rt->loss_file) {
            fprintf(rt->loss_file, "%lld %.9g\n", (long long)step, loss);
            fflush(rt->loss_file);
        }
    }
    rt->step = -1;
}

/* ---------------------------------------------------------------- finalize */

/* Checks this rank's ledger against the compiler's; returns 0 or 3. */
static int check_ledger(prt *rt) {
    if (!rt->have_expected) return 0;
    int status = 0;
    for (int c = 0; c < PRT_NCLASS; c++) {
        int exact = c == PRT_WEIGHTS || c == PRT_GRADS || c == PRT_MASTER || c == PRT_OPTIM;
        int64_t measured = exact ? rt->ledger_now[c] : rt->ledger_peak[c];
        int ok = exact ? measured == rt->expected[c] : measured <= rt->expected[c];
        if (!ok) {
            fprintf(stderr, "parc: rank %d (%s): error: memory ledger mismatch in class %s: measured %lld B, "
                            "compiler %lld B (%s)\n", rt->world_rank, rt->host, prt_class_names[c],
                    (long long)measured, (long long)rt->expected[c], exact ? "must be equal" : "must not exceed");
            status = 3;
        }
    }
    return status;
}

static void print_memory_table(prt *rt) {
    int64_t mine[2 * PRT_NCLASS + 1];
    for (int c = 0; c < PRT_NCLASS; c++) {
        int exact = c <= PRT_OPTIM;
        mine[c] = exact ? rt->ledger_now[c] : rt->ledger_peak[c];
        mine[PRT_NCLASS + c] = rt->expected[c];
    }
    mine[2 * PRT_NCLASS] = rt->have_expected;
    int64_t *all = rt->world_rank == 0 ? prt_xmalloc(sizeof mine * (size_t)rt->world_size) : NULL;
    PRT_MPI_CHECK(MPI_Gather(mine, 2 * PRT_NCLASS + 1, MPI_INT64_T, all, 2 * PRT_NCLASS + 1, MPI_INT64_T, 0,
                             MPI_COMM_WORLD));
    if (rt->world_rank == 0) {
        printf("memory ledger (bytes; measured = exact for weights/grads/master/optim, peak otherwise)\n");
        printf("%5s  %-12s %16s %16s  %s\n", "rank", "class", "measured", "compiler", "");
        for (int r = 0; r < rt->world_size; r++) {
            const int64_t *row = all + (size_t)r * (2 * PRT_NCLASS + 1);
            for (int c = 0; c < PRT_NCLASS; c++) {
                int exact = c <= PRT_OPTIM;
                if (row[2 * PRT_NCLASS]) {
                    int ok = exact ? row[c] == row[PRT_NCLASS + c] : row[c] <= row[PRT_NCLASS + c];
                    printf("%5d  %-12s %16lld %16lld  %s\n", r, prt_class_names[c], (long long)row[c],
                           (long long)row[PRT_NCLASS + c], ok ? "ok" : "MISMATCH");
                } else {
                    printf("%5d  %-12s %16lld %16s\n", r, prt_class_names[c], (long long)row[c], "-");
                }
            }
        }
        fflush(stdout);
    }
    free(all);
}

int64_t prt_finalize(prt *rt) {
#ifdef PRT_HAVE_CUDA
    if (rt->device) prt_cuda_sync(rt);
#endif
    prt_comm_complete_sends(rt);
    prt_dump_finalize(rt);
    if (rt->tracing) prt_trace_write(rt);
    int status = check_ledger(rt);
    if (rt->memory_report) print_memory_table(rt);
    PRT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (rt->world_rank == 0 && rt->steps_done > 0) {
        double ms = rt->total_seconds / (double)rt->steps_done * 1e3;
        double tokens = (double)rt->plan.batch * (double)rt->plan.seq;
        printf("parc: %s: %lld steps | final loss %.6f | %.1f ms/step | %.0f tok/s\n",
               rt->plan.plan_name ? rt->plan.plan_name : "plan", (long long)rt->steps_done, rt->last_loss, ms,
               ms > 0 ? tokens / (ms * 1e-3) : 0.0);
        fflush(stdout);
    }
    watchdog_stop();
    if (rt->loss_file) fclose(rt->loss_file);
    prt_comm_free(rt);
    for (int a = 0; a < rt->naxes; a++) MPI_Comm_free(&rt->axis_comm[a]);
#ifdef PRT_HAVE_CUDA
    if (rt->device)
        for (int c = 0; c < PRT_NCLASS; c++) {
            prt_cuda_free(rt->class_block[c]);
            rt->class_block[c] = NULL;
        }
    if (rt->cuda) prt_cuda_finalize(rt);
#endif
    for (int c = 0; c < PRT_NCLASS; c++) free(rt->class_block[c]);
    free(rt->buffers);
    free(rt->ranges);
    free(rt->comm_stage);
    free(rt->work);
    free(rt->events);
    free(rt->data_bytes);
    g_rt = NULL;
    free(rt);
    MPI_Finalize();
    return status;
}
