/*
 * prt_internal.h — what the CPU runtime's files share and generated code never sees:
 * the context struct, the ledger, the check macros, the counter-based hashes, the
 * trace hooks and the watchdog around blocking MPI calls.
 *
 * Files: prt_core.c (lifecycle, flags, buffers, ledger, steps, errors, watchdog),
 * prt_ops_cpu.c (ops and optimizers: fp32 arithmetic over f32/bf16/f16 storage), prt_comm_mpi.c (collectives, send/recv),
 * prt_data.c (synthetic and file data), prt_trace.c (Chrome trace JSON).
 */
#ifndef PRT_INTERNAL_H
#define PRT_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "parc_rt.h"

#ifdef __cplusplus
extern "C" {  /* the CUDA sources (runtime/cuda/) include this header */
#endif

/* ---------------------------------------------------------------- errors */

/* Reports a runtime error with file, line, rank and host, then MPI_Abort(world, 1).
 * Safe to call before MPI_Init (then it exits with status 1). */
void prt_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

/* PRT_CHECK(cond, fmt, ...): a runtime error (bad arguments, inconsistent tables,
 * I/O failures) when cond is false. */
#define PRT_CHECK(cond, ...)                                   \
    do {                                                       \
        if (!(cond)) prt_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

/* PRT_MPI_CHECK(call): the one check for MPI calls; reports the call text and
 * MPI_Error_string.  Communicators use MPI_ERRORS_RETURN so errors reach it. */
void prt_mpi_fail(const char *file, int line, const char *call, int err) __attribute__((noreturn));
#define PRT_MPI_CHECK(call)                                          \
    do {                                                             \
        int prt_mpi_err_ = (call);                                   \
        if (prt_mpi_err_ != MPI_SUCCESS)                             \
            prt_mpi_fail(__FILE__, __LINE__, #call, prt_mpi_err_);  \
    } while (0)

/* malloc/calloc that never return NULL (PRT_CHECK on failure). */
void *prt_xmalloc(size_t bytes);
void *prt_xcalloc(size_t count, size_t size);
void *prt_xrealloc(void *ptr, size_t bytes);

/* ---------------------------------------------------------------- hashes */

static inline uint64_t prt_splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
/* Hash of an ordered pair: different (a, b) give independent-looking values. */
static inline uint64_t prt_hash2(uint64_t a, uint64_t b) {
    return prt_splitmix64(prt_splitmix64(a) ^ (b + 0x632be59bd9b4e019ULL));
}
static inline uint64_t prt_hash_str(const char *s) { /* FNV-1a 64 */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; s && *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}
/* Uniform in (0, 1), never 0: 53 high bits, offset by half a step. */
static inline double prt_unit(uint64_t h) { return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

/* ---------------------------------------------------------------- 16-bit floats */

/* float -> bf16, round to nearest even; a NaN stays a (quiet) NaN. */
static inline uint16_t prt_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
static inline float prt_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
/* float -> IEEE binary16, round to nearest even, with subnormals; overflow gives inf. */
static inline uint16_t prt_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000;
        int shift = 14 - exp;
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;  /* a carry into the exponent is right */
    return (uint16_t)half;
}
static inline float prt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
    float f;
    if (exp == 0x1f) x = sign | 0x7f800000 | (mant << 13);
    else if (exp) x = sign | ((exp + 112) << 23) | (mant << 13);
    else {  /* zero or subnormal: mant x 2^-24 */
        f = (float)mant * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    memcpy(&f, &x, 4);
    return f;
}

/* Element i of a float tensor stored as `dtype` (PRT_F32, PRT_BF16 or PRT_F16), and
 * the store that rounds to it.  The ops compute in fp32 through these. */
static inline float prt_load(const void *base, int64_t dtype, int64_t i) {
    switch (dtype) {
    case PRT_BF16: return prt_bf16_to_f32(((const uint16_t *)base)[i]);
    case PRT_F16: return prt_f16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}
static inline void prt_store(void *base, int64_t dtype, int64_t i, float v) {
    switch (dtype) {
    case PRT_BF16: ((uint16_t *)base)[i] = prt_f32_to_bf16(v); break;
    case PRT_F16: ((uint16_t *)base)[i] = prt_f32_to_f16(v); break;
    default: ((float *)base)[i] = v; break;
    }
}
static inline int prt_dtype_is_16(int64_t dtype) { return dtype == PRT_BF16 || dtype == PRT_F16; }

/* ---------------------------------------------------------------- context */

typedef struct prt_buffer {
    prt_buffer_desc desc;
    char *base;              /* instance i at base + i * instance_bytes */
    size_t instance_bytes;
} prt_buffer;

/* The address range of one registered buffer (all instances); sorted by begin. */
typedef struct prt_range {
    const char *begin, *end;
    int64_t dtype;
} prt_range;

typedef struct prt_send_slot {  /* one buffered pipeline send */
    char *data;
    size_t capacity;            /* bytes */
    MPI_Request request;        /* MPI_REQUEST_NULL when free */
} prt_send_slot;

typedef struct prt_trace_event {
    const char *name;        /* a string constant (op names, span names) */
    const char *category;    /* "op", "comm", "p2p", "span", "step" */
    double start_us, duration_us;
    int64_t bytes;           /* -1: none */
    int64_t axis;            /* -1: none */
} prt_trace_event;

#define PRT_SPAN_DEPTH 64

struct prt {
    prt_plan_desc plan;
    int world_rank, world_size, local_ranks;
    char host[MPI_MAX_PROCESSOR_NAME];
    int naxes;
    int axis_size[PRT_MAX_AXES];
    int coord[PRT_MAX_AXES];
    MPI_Comm axis_comm[PRT_MAX_AXES];
    int tag_ub;

    /* flags */
    int64_t steps;
    int memory_report, quiet;
    const char *trace_path, *data_path;

    /* --data file, byte level, read once at init */
    uint8_t *data_bytes;
    size_t data_len;

    /* buffers: one allocation per class, carved into 64-byte aligned slices */
    prt_buffer *buffers;
    int64_t nbuffers;
    char *class_block[PRT_NCLASS];
    prt_range *ranges;       /* non-empty buffers by address: prt_dtype_of */
    int64_t nranges;

    /* ledger (bytes): current and peak per class, and the compiler's numbers */
    int64_t ledger_now[PRT_NCLASS];
    int64_t ledger_peak[PRT_NCLASS];
    int64_t expected[PRT_NCLASS];
    int have_expected;

    /* runtime-internal scratch (all booked: staging to PRT_COMM, workspace to PRT_WORKSPACE) */
    float *comm_stage;       size_t comm_stage_cap;   /* floats: collective packing */
    float *work;             size_t work_cap;         /* floats: attention, xent scratch, 16-bit conversions */
    prt_send_slot *send_slots; int nsend_slots;
    MPI_Op sum_bf16, sum_f16;  /* sums of 16-bit elements in fp32, created at first use */
    int have_sum_ops;

    /* steps and metrics */
    int64_t step;            /* current step, -1 outside a step */
    double step_start;       /* MPI_Wtime */
    double step_loss;        /* this rank's loss contribution (sum of -log p) */
    int64_t loss_replica_axes; /* bit a: ranks off coordinate 0 of axis a hold copies of the loss */
    int64_t steps_done;
    double total_seconds, last_loss;
    FILE *loss_file;         /* PRT_LOSS_FILE on rank 0 */
    int64_t die_rank, die_step;   /* PRT_TEST_DIE */

    /* dumps for the parity tests (PRT_DUMP_DIR, PRT_DUMP_STEP, PRT_DUMP_DATA_ALL; prt_dump.c) */
    char *dump_dir;          /* NULL: no dumps */
    int64_t dump_step;       /* -1: no per-step dumps */
    int dump_data_all;       /* data of every step, not only dump_step's */
    FILE *dump_data, *dump_logits;   /* opened at their first record */
    int64_t dump_logits_calls;       /* prt_xent_fwd calls recorded so far */

    /* trace */
    int tracing;
    double time_origin;      /* MPI_Wtime at init (after a barrier) */
    prt_trace_event *events; int64_t nevents, events_cap;
    const char *span_name[PRT_SPAN_DEPTH];
    double span_start[PRT_SPAN_DEPTH];
    int span_depth;

    int exit_status;

    /* --device cuda (only in a runtime built with PRT_HAVE_CUDA): every op, buffer
     * and workspace lives on the GPU; runtime/cuda/ holds the state */
    int device;
    struct prt_cuda *cuda;   /* NULL until prt_cuda_init */
};

extern const char *const prt_class_names[PRT_NCLASS];
extern const char *const prt_dtype_names[4];
size_t prt_dtype_size(int64_t dtype);
/* The dtype of the registered buffer whose bytes hold `ptr` (any address inside
 * it, e.g. a ZeRO shard's offset), or -1 for NULL and for memory the runtime did
 * not allocate (test programs' arrays), which the ops read as fp32.  O(log buffers). */
int64_t prt_dtype_of(prt *rt, const void *ptr);

/* Ledger: book (bytes > 0) or release (bytes < 0) to a class; tracks the peak. */
void prt_ledger_book(prt *rt, int64_t klass, int64_t bytes);
/* Runtime scratch, booked to its class: grows to exactly the largest request
 * (the previous contents are lost) and never shrinks until finalize. */
float *prt_comm_stage(prt *rt, size_t floats);
float *prt_workspace(prt *rt, size_t floats);

/* The communicator and group size of an axis; size 1 (and MPI_COMM_NULL) when axis < 0. */
int prt_axis_size(prt *rt, int64_t axis);
MPI_Comm prt_axis_comm(prt *rt, int64_t axis);

/* Completes every outstanding pipeline send (step end, finalize). */
void prt_comm_complete_sends(prt *rt);
void prt_comm_free(prt *rt);
/* Called by prt_xent_fwd: the loss that prt_step_end reports. */
void prt_add_step_loss(prt *rt, double loss);

/* ---------------------------------------------------------------- watchdog */

/* Brackets a blocking MPI call: if it stays blocked longer than PRT_TIMEOUT seconds
 * (default 300, 0 = off), the watchdog thread prints what was blocked and on which
 * axis, and kills this process so mpirun ends the job. */
void prt_block_begin(const char *what, int64_t axis);
void prt_block_end(void);

/* ---------------------------------------------------------------- trace */

static inline double prt_trace_start(prt *rt) { return rt->tracing ? MPI_Wtime() : 0.0; }
void prt_trace_record(prt *rt, const char *name, const char *category, double start, int64_t bytes,
                      int64_t axis);
#define PRT_TRACE_END(rt, name, category, start, bytes, axis) \
    do {                                                      \
        if ((rt)->tracing) prt_trace_record(rt, name, category, start, bytes, axis); \
    } while (0)
/* Gathers every rank's events and rank 0 writes the Chrome trace JSON file. */
void prt_trace_write(prt *rt);

/* ---------------------------------------------------------------- parameter maps */

/* Where the local elements of a parameter buffer sit in its global tensor (the
 * layout parc_rt.h describes at prt_buffer_desc).  The initialiser and the dumps
 * share it, so a dump's global indices are the ones the values were drawn for. */
typedef struct prt_param_map {
    int64_t ndim;
    int64_t gdims[PRT_MAX_DIMS], local_dims[PRT_MAX_DIMS], offset[PRT_MAX_DIMS];
    int64_t local_total;     /* elements of the local (tensor-parallel) block */
    int64_t first;           /* local flat index of element 0: the ZeRO share's start */
} prt_param_map;
/* Fills *map from `gen` for this rank (ndim 0: local index = global index over
 * undescribed_elems elements) and returns the elements per instance the
 * description implies (the ZeRO share, padding included).  PRT_CHECKs dims that
 * do not divide by their axis. */
int64_t prt_param_map_init(prt *rt, prt_param_map *map, const prt_buffer_desc *gen, const char *name,
                           int64_t undescribed_elems);
/* Global flat index of local element e of an instance; -1 for a ZeRO padding element. */
int64_t prt_param_global(const prt_param_map *map, int64_t e);
/* Global layer of instance `instance` (layers_per_chunk / chunk_layer_stride), or -1. */
int64_t prt_param_layer(const prt_buffer_desc *gen, int64_t instance);

/* ---------------------------------------------------------------- dumps (prt_dump.c) */

/* Reads PRT_DUMP_DIR / PRT_DUMP_STEP / PRT_DUMP_DATA_ALL (prt_init). */
void prt_dump_init(prt *rt);
/* Hooks; each returns at once when its dump is off. */
void prt_dump_step_begin(prt *rt, int64_t step);       /* init_params at dump_step */
void prt_dump_before_optimizer(prt *rt, int64_t step); /* grads at dump_step */
void prt_dump_data(prt *rt, const int32_t *tokens, const int32_t *targets, int64_t step, int64_t first_sample,
                   int64_t B, int64_t T);
void prt_dump_logits(prt *rt, const void *logits, int64_t dtype, int64_t N, int64_t V_local, int64_t vocab_offset, int64_t axis);
/* Writes params.rank<R>.bin and closes the dump files (prt_finalize). */
void prt_dump_finalize(prt *rt);

/* ---------------------------------------------------------------- data */

void prt_data_load(prt *rt, const char *path);

/* ---------------------------------------------------------------- collectives, dtype explicit (prt_comm_mpi.c) */

/* The MPI bodies of prt_allreduce ... prt_recv on HOST memory holding elements of
 * `dtype`, for axes of size > 1 (the public functions look the dtype up, handle
 * size-1 axes and dispatch to the GPU).  The CUDA backend's host-staged path
 * calls these on its staging copies. */
void prt_mpi_allreduce(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype);
void prt_mpi_allgather(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
void prt_mpi_reducescatter(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                           int64_t dtype);
void prt_mpi_alltoall(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
void prt_mpi_send(prt *rt, int64_t axis, int64_t delta, const void *buf, int64_t n, int64_t tag, int64_t dtype);
void prt_mpi_recv(prt *rt, int64_t axis, int64_t delta, void *buf, int64_t n, int64_t tag, int64_t dtype);

/* ---------------------------------------------------------------- CUDA backend (runtime/cuda/, PRT_HAVE_CUDA) */

/* Defined only when the runtime is built with CUDA (-DPRT_HAVE_CUDA); the CPU
 * files call them only inside #ifdef PRT_HAVE_CUDA.  Device memory is addressed
 * by plain pointers (unified addressing), so prt_dtype_of works on it too. */

/* A float tensor on the device and its storage dtype (PRT_F32, PRT_BF16, PRT_F16);
 * p may be NULL where the op allows it. */
typedef struct prt_ten {
    void *p;
    int64_t dtype;
} prt_ten;

int prt_cuda_device_count(void);          /* 0 when no device (or no driver) */
/* Picks device (local rank % devices), creates the streams, the cuBLAS handle and,
 * for collectives over NCCL, one communicator per mesh axis of size > 1 (every axis
 * when PRT_COLLECTIVES=nccl is set).  Needs the axis communicators (after prt_init's
 * mesh).  Independent of rt->device, so tests can drive both backends. */
void prt_cuda_init(prt *rt);
void prt_cuda_finalize(prt *rt);          /* frees the device scratch, destroys comms and handles */
void prt_cuda_sync(prt *rt);              /* waits for every op issued so far */
const char *prt_cuda_collectives(prt *rt);   /* "nccl" or "mpi" */
char *prt_cuda_alloc_zero(prt *rt, size_t bytes, const char *what);   /* cudaMalloc + zero; not booked */
void prt_cuda_free(void *p);
/* Copies ordered after every op issued so far; they return when the copy is done. */
void prt_cuda_h2d(prt *rt, void *dst, const void *src, size_t bytes);
void prt_cuda_d2h(prt *rt, void *dst, const void *src, size_t bytes);
void prt_cuda_memset(prt *rt, void *dst, int byte, size_t bytes);
/* A malloc'ed host copy of `bytes` device bytes (the caller frees it). */
void *prt_cuda_host_copy(prt *rt, const void *dev, size_t bytes);
/* Device scratch, booked like prt_workspace / prt_comm_stage (grows to exactly the
 * largest request, contents lost on growth). */
float *prt_cuda_workspace(prt *rt, size_t floats);
char *prt_cuda_comm_stage(prt *rt, size_t bytes);

/* The ops on the device: parc_rt.h's semantics, float tensors as prt_ten. */
void prt_cu_zero(prt *rt, prt_ten buf, int64_t n, size_t esize);
void prt_cu_copy(prt *rt, prt_ten dst, prt_ten src, int64_t n);
void prt_cu_acc(prt *rt, prt_ten dst, prt_ten src, int64_t n);
void prt_cu_embed_fwd(prt *rt, prt_ten out, const int32_t *tokens, prt_ten wte, int64_t N, int64_t C,
                      int64_t vocab_local, int64_t vocab_offset);
void prt_cu_embed_bwd(prt *rt, prt_ten dwte, const int32_t *tokens, prt_ten dout, int64_t N, int64_t C,
                      int64_t vocab_local, int64_t vocab_offset);
void prt_cu_pos_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten wpe, int64_t B, int64_t T, int64_t C, int64_t t_offset);
void prt_cu_pos_bwd(prt *rt, prt_ten dwpe, prt_ten din, prt_ten dout, int64_t B, int64_t T, int64_t C, int64_t t_offset);
void prt_cu_layernorm_fwd(prt *rt, prt_ten out, prt_ten mean, prt_ten rstd, prt_ten in, prt_ten w, prt_ten b,
                          int64_t N, int64_t C);
void prt_cu_layernorm_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten db, prt_ten dout, prt_ten in, prt_ten w,
                          prt_ten mean, prt_ten rstd, int64_t N, int64_t C);
void prt_cu_rmsnorm_fwd(prt *rt, prt_ten out, prt_ten rstd, prt_ten in, prt_ten w, int64_t N, int64_t C);
void prt_cu_rmsnorm_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten dout, prt_ten in, prt_ten w, prt_ten rstd,
                        int64_t N, int64_t C);
void prt_cu_matmul_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten w, int64_t N, int64_t K, int64_t M, int transposed);
void prt_cu_matmul_bwd(prt *rt, prt_ten din, prt_ten dw, prt_ten dout, prt_ten in, prt_ten w, int64_t N, int64_t K,
                       int64_t M, int transposed);
void prt_cu_bias_fwd(prt *rt, prt_ten out, prt_ten in, prt_ten b, int64_t N, int64_t M);
void prt_cu_bias_bwd(prt *rt, prt_ten db, prt_ten dout, int64_t N, int64_t M);
void prt_cu_gelu_fwd(prt *rt, prt_ten out, prt_ten in, int64_t n);
void prt_cu_gelu_bwd(prt *rt, prt_ten din, prt_ten in, prt_ten dout, int64_t n);
void prt_cu_relu_fwd(prt *rt, prt_ten out, prt_ten in, int64_t n);
void prt_cu_relu_bwd(prt *rt, prt_ten din, prt_ten in, prt_ten dout, int64_t n);
void prt_cu_swiglu_fwd(prt *rt, prt_ten out, prt_ten in, int64_t N, int64_t F);
void prt_cu_swiglu_bwd(prt *rt, prt_ten din, prt_ten in, prt_ten dout, int64_t N, int64_t F);
void prt_cu_attention_fwd(prt *rt, prt_ten out, prt_ten probs, prt_ten qkv, int64_t B, int64_t T, int64_t NH,
                          int64_t HD, int64_t causal);
void prt_cu_attention_bwd(prt *rt, prt_ten dqkv, prt_ten dout, prt_ten qkv, prt_ten probs, int64_t B, int64_t T,
                          int64_t NH, int64_t HD, int64_t causal);
void prt_cu_add_fwd(prt *rt, prt_ten out, prt_ten a, prt_ten b, int64_t n);
/* Returns the loss (sum over the N rows of -log p(target)); loss_sum += it on the device. */
double prt_cu_xent_fwd(prt *rt, prt_ten loss_sum, prt_ten stats, prt_ten logits, const int32_t *targets, int64_t N,
                       int64_t V_local, int64_t vocab_offset, int64_t axis);
void prt_cu_xent_bwd(prt *rt, prt_ten dlogits, prt_ten logits, prt_ten stats, const int32_t *targets, int64_t N,
                     int64_t V_local, int64_t vocab_offset, double scale);
void prt_cu_adamw(prt *rt, prt_ten param, prt_ten master, prt_ten grad, prt_ten m, prt_ten v, int64_t n, int64_t step,
                  double lr, double beta1, double beta2, double eps, double weight_decay);
void prt_cu_sgd(prt *rt, prt_ten param, prt_ten master, prt_ten grad, prt_ten mom, int64_t n, double lr,
                double momentum, double weight_decay);

/* Collectives on device buffers, axes of size > 1 (NCCL on the communication
 * stream, or host-staged through prt_mpi_*), and the local pieces. */
void prt_cu_allreduce(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype);
void prt_cu_allgather(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
void prt_cu_reducescatter(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                          int64_t dtype);
void prt_cu_alltoall(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
void prt_cu_slice(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
void prt_cu_copy_bytes(prt *rt, void *dst, const void *src, size_t bytes);
void prt_cu_send(prt *rt, int64_t axis, int64_t delta, const void *buf, int64_t n, int64_t tag, int64_t dtype);
void prt_cu_recv(prt *rt, int64_t axis, int64_t delta, void *buf, int64_t n, int64_t tag, int64_t dtype);

#ifdef __cplusplus
}
#endif
#endif
