/*
 * prt_internal.h — what the runtime's files share and generated code never sees:
 * the context struct, the ledger, the check macros, the counter-based hashes, the
 * trace hooks and the watchdog.
 *
 * Files: prt_mesh.c (prt_init: MPI, the mesh, its communicators, the backend),
 * prt_flags.c (runtime options), prt_buffers.c (buffers, ledger, parameter
 * initialisation), prt_steps.c (step loop, metrics, finalize), prt_failure.c
 * (errors, the watchdog, watched waits), prt_ops.c (public op and collective
 * entry points, dispatching to the backend), prt_backend.c (the backends of this
 * build), prt_mpi.c (collectives over MPI on host memory), prt_data.c (synthetic
 * and file data), prt_trace.c (Chrome trace JSON), prt_dump.c (parity dumps),
 * prt_ckpt.c (checkpoints and signals), prt_safetensors.c (the file format);
 * cpu/ the reference backend, cuda/ the CUDA backend.
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

/* A user-facing error (bad input, an unwritable output, a hang): prints
 * "parc: error: MESSAGE" without runtime source locations, then ends the job
 * with exit status `status` (MPI_Abort when MPI runs).  Only the rank that sees
 * the problem calls it. */
void prt_user_fail(int status, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

/* PRT_CHECK(cond, fmt, ...): a runtime error (bad arguments, inconsistent tables,
 * I/O failures) when cond is false. */
#define PRT_CHECK(cond, ...)                                   \
    do {                                                       \
        if (!(cond)) prt_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

/* PRT_MPI_CHECK(call): the one check for MPI calls; reports the call text and
 * MPI_Error_string.  Communicators use MPI_ERRORS_RETURN so errors reach it. */
/* The context errors report the rank and host of (prt_init; NULL at finalize). */
void prt_failure_context(prt *rt);

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

#include "prt_math.h"

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
    int64_t buffer;          /* its index in rt->buffers */
} prt_range;

typedef struct prt_send_slot {  /* one buffered pipeline send */
    char *data;
    size_t capacity;            /* bytes */
    MPI_Request request;        /* MPI_REQUEST_NULL when free */
} prt_send_slot;

/* A pipeline receive: what a recv call names (prt_mpi.c's receive posted ahead). */
typedef struct prt_recv_key {
    int64_t axis, delta, n, tag, dtype;
} prt_recv_key;

typedef struct prt_recv_ahead {  /* the next receive, posted before its op into a slot of its own */
    char *data;
    size_t capacity;             /* bytes (booked to PRT_COMM) */
    MPI_Request request;         /* MPI_REQUEST_NULL when nothing is posted */
    prt_recv_key key;
    int posted;                  /* posted and not yet claimed by its recv call */
    int arrived;                 /* complete (a test or the claim's wait saw it) */
    int got;                     /* elements received, once arrived */
} prt_recv_ahead;

typedef struct prt_inflight {  /* a collective started and not yet waited for (prt_overlap.c) */
    const void *buf;            /* what comm_wait names: the buffer the result lands in */
    MPI_Request request;        /* MPI_REQUEST_NULL once complete */
    const char *name;           /* "allreduce", "reducescatter" */
    int64_t bytes, axis;
    double start;               /* MPI_Wtime at its start */
    int done;
    void *owned;                /* freed once complete: what the request reads meanwhile (prt_comm_keep) */
    struct prt_ring *ring;      /* a collective of several steps the runtime drives itself (request unused):
                                 * prt_mpi_ring_advance moves it on, it is freed once complete */
} prt_inflight;

typedef struct prt_trace_event {
    const char *name;        /* a string constant (op names, span names) */
    const char *category;    /* "op", "comm", "p2p", "wait", "span", "step", "forward", "backward", "phases" */
    double start_us, duration_us;
    int64_t bytes;           /* -1: none */
    int64_t axis;            /* -1: none */
    /* Chrome's "ph": 0 or 'X' a complete span; 'B'/'E' a schedule item's work
     * (micro, chunk, chunks); 'i' a step's start (id = the step); 's'/'f' the
     * ends of a pipeline message's flow arrow (id, shared by both ranks); 'C' the
     * step's phase times (id = index of PRT_NPHASES values in phase_log).  "X"
     * steps carry their step in id.  Communication ("comm", "p2p") has its own
     * thread in the trace. */
    char ph;
    int32_t micro, chunk, chunks;
    int64_t id;
    int32_t lane;            /* > 0: a started collective's span, on thread 1 + lane (prt_overlap.c) */
    float gemm_share;        /* > 0: an op's share of its time in the GEMMs it calls itself (args.gemm_share) */
} prt_trace_event;

/* Threads of the trace that hold the spans of started collectives, which
 * overlap each other: each goes to the first lane free at its start. */
#define PRT_TRACE_LANES 64

#define PRT_SPAN_DEPTH 64

/* A token file as prt_data reads it (prt_data.c): `tokens` is `count` tokens
 * of `width` bytes (1 text, 2 llmc/u16, 4 u32) inside a read-only mapping. */
typedef struct prt_token_file {
    const char *path, *label;    /* label: where the path came from, for messages */
    const uint8_t *map;          /* the whole file, NULL when none */
    size_t map_len;
    const uint8_t *tokens;
    int64_t count;
    int width;
} prt_token_file;

/* Start-up marks (prt_startup.c), in order. */
enum {
    PRT_START_CREATED,    /* the process was created (fork; a restart keeps the pid) */
    PRT_START_INIT,       /* prt_init entered (in the image that runs) */
    PRT_START_MPI,        /* MPI_Init_thread returned */
    PRT_START_READY,      /* prt_init returns: options, mesh, data opened, backend up */
    PRT_START_BUFFERS,    /* prt_register_buffers returns: allocated, initial values drawn */
    PRT_START_FIRST_STEP, /* the first prt_step_begin */
    PRT_START_NMARKS
};

struct prt {
    prt_plan_desc plan;
    int world_rank, world_size, local_ranks;
    char host[MPI_MAX_PROCESSOR_NAME];
    int naxes;                       /* mesh axes */
    int ncomms;                      /* mesh axes and derived axes: axis_* and coord hold both */
    int axis_size[PRT_MAX_AXES];
    int coord[PRT_MAX_AXES];
    MPI_Comm axis_comm[PRT_MAX_AXES];
    int tag_ub;
    int64_t ring_seq[PRT_MAX_AXES]; /* ring collectives started on each axis: their messages' tags (prt_mpi.c) */

    /* flags */
    int64_t steps;
    int memory_report, quiet;
    const char *trace_path, *data_path;
    const char *device_name;   /* --device, default the first backend */
    double timeout;            /* seconds a watched wait may last; 0 = off */

    /* token files (prt_data.c), checked and mapped read-only at init */
    const char *val_data_path;   /* --val-data */
    int64_t data_format;         /* --data-format, else the plan's, else text */
    int data_format_set;
    prt_token_file train_data, val_data;

    /* evaluation (prt_eval_begin .. prt_eval_end) */
    int eval_active;             /* prt_data reads validation samples, losses count to eval_loss */
    int64_t eval_batch;          /* the batch prt_eval_batch named */
    double eval_loss;            /* this rank's sum of -log p over the validation tokens */
    double eval_start;           /* MPI_Wtime at prt_eval_begin */
    int64_t eval_step;           /* rt->step saved at prt_eval_begin */
    int64_t eval_runs;           /* batches run by this evaluation */
    int have_val_loss;           /* val_loss belongs in the --log record of the step */
    double val_loss;

    /* outputs, opened at init (rank 0) so a bad path fails before training */
    FILE *trace_file;
    const char *loss_path;

    /* buffers: one allocation per class, carved into 64-byte aligned slices */
    prt_buffer *buffers;
    int64_t nbuffers;
    char *class_block[PRT_NCLASS];
    prt_range *ranges;       /* non-empty buffers by address: the dtypes word's check */
    int64_t nranges;
    /* calls' dtypes words checked against the buffers (prt_arg_dtype): now, on
     * every call (PRT_CHECK_DTYPES=1), and whether a step / an evaluation has
     * ended (the first of each is checked) */
    int check_dtypes, check_dtypes_always, dtypes_step_seen, dtypes_eval_seen;

    /* ledger (bytes): current and peak per class, and the compiler's numbers */
    int64_t ledger_now[PRT_NCLASS];
    int64_t ledger_peak[PRT_NCLASS];
    int64_t expected[PRT_NCLASS];
    int have_expected;

    /* runtime-internal scratch (all booked: staging to PRT_COMM, workspace to PRT_WORKSPACE) */
    float *comm_stage;       size_t comm_stage_cap;   /* floats: collective packing */
    float *work;             size_t work_cap;         /* floats: attention, xent scratch, 16-bit conversions */
    prt_send_slot *send_slots; int nsend_slots;
    int sends_pending;         /* send slots whose MPI_Isend has not been seen complete */
    /* pipeline receives of the last training step in call order (the schedule
     * repeats each step), this step's so far, and the one posted ahead */
    prt_recv_key *recv_seq, *recv_now; int nrecv_seq, nrecv_now, recv_cap;
    prt_recv_ahead recv_ahead;
    int recv_ahead_pending;    /* posted and not yet seen complete: op entry points progress it */
    prt_inflight *inflight; int ninflight, inflight_cap;  /* collectives in flight, in start order */
    int inflight_pending;      /* of them not yet seen complete: op entry points progress them */
    double lane_end[PRT_TRACE_LANES + 1]; /* trace: when each lane's last span ended */
    int trace_lanes, trace_lanes_named;    /* lanes used so far / named in the trace's metadata */
    MPI_Op sum_bf16, sum_f16;  /* sums of 16-bit elements in fp32, created at first use */
    int have_sum_ops;

    /* steps and metrics */
    int64_t step;            /* current step, -1 outside a step */
    double step_start;       /* MPI_Wtime; moved later by an evaluation's time, which the step's does not count */
    double step_began;       /* MPI_Wtime the step began: the trace's step span starts there */
    double first_step_seconds; /* this process's first step, which the steady figures leave out */
    int64_t faults_at_first, faults_after_first; /* minor page faults at the first step's start and end */
    int64_t faults_last_step;                    /* ... and at the last step's end */
    double step_loss;        /* this rank's loss contribution (sum of -log p) */
    /* moe_counts: tokens each expert of each MoE layer got in the current
     * step's training forwards, [moe_layers * moe_experts], 0 when none yet */
    int64_t *moe_tokens;
    int64_t moe_layers, moe_experts;
    int64_t loss_replica_axes; /* bit a: ranks off coordinate 0 of axis a hold copies of the loss */
    int64_t steps_done;
    double total_seconds, last_loss;
    /* gradient clipping (prt_clip.c): the step's global gradient norm and clip factor */
    double grad_norm, clip_scale;
    int have_grad_norm;      /* prt_clip_norm has run: grad_norm is this step's */
    int clipping;            /* the plan clips: clip_scale is the factor applied */
    FILE *loss_file;         /* PRT_LOSS_FILE on rank 0 */
    /* phases of the step (prt_phases.c) */
    int64_t phase_cur;                   /* enum prt_phase */
    double phase_mark;                   /* MPI_Wtime when phase_cur began */
    double phase_step[PRT_NPHASES];      /* seconds of this step */
    double phase_sum[PRT_NPHASES];       /* over the steps after the first */
    int64_t phase_steps;                 /* steps in phase_sum */
    const char *log_path;    /* --log (else PRT_METRICS_FILE): JSON lines, rank 0 (prt_metrics.c) */
    FILE *log_file;
    int64_t die_rank, die_step;   /* PRT_TEST_DIE */

    /* dumps for the parity tests (PRT_DUMP_DIR, PRT_DUMP_STEP, PRT_DUMP_DATA_ALL; prt_dump.c) */
    char *dump_dir;          /* NULL: no dumps */
    int64_t dump_step;       /* -1: no per-step dumps */
    int dump_data_all;       /* data of every step, not only dump_step's */
    FILE *dump_data, *dump_logits;   /* opened at their first record */
    int64_t dump_logits_calls;       /* prt_xent_fwd calls recorded so far */

    /* trace */
    int tracing;
    double op_gemm_share;    /* set by an op that times its own GEMMs while tracing (the CPU attention),
                                0 before every op (prt_ops.c's dispatch); the op's trace event takes it */
    double time_origin;      /* MPI_Wtime at init (after a barrier) */
    prt_trace_event *events; int64_t nevents, events_cap;   /* recorded since the last flush */
    int trace_meta_done;     /* this rank's track names sent (prt_trace_flush) */
    int64_t trace_bytes;     /* rank 0: event bytes in the file; 0: nothing yet, -1: only its "[" */
    double *phase_log; int64_t phase_log_len, phase_log_cap;  /* ms per phase, PRT_NPHASES per step */
    prt_trace_event work_open;   /* the 'B' of the open work span (ph 0: none) */
    const char *span_name[PRT_SPAN_DEPTH];
    double span_start[PRT_SPAN_DEPTH];
    int span_depth;

    /* start-up marks, CLOCK_MONOTONIC seconds (prt_startup.c; 0: not reached) */
    double start_mark[PRT_START_NMARKS];

    /* the backend chosen at init (prt_backend.h) */
    const struct prt_backend *backend;
    struct prt_cuda *cuda;   /* the CUDA backend's state; NULL until prt_cuda_init */

    /* watched waits (prt_failure.c): a duplicate of the world communicator for
     * the watchdog's own messages */
    MPI_Comm watch_comm;
    const char *wait_what;   /* the wait in progress, NULL outside one */
    int64_t wait_axis;

    /* every rank's host (prt_placement.c; with one rank, none): the distinct
     * names, sizeof host bytes each, and each world rank's index into them */
    int nhosts;
    char *host_names;
    int *host_of;

    /* checkpoints and signals (prt_ckpt.c); NULL until prt_ckpt_init */
    struct prt_ckpt *ckpt;
};

extern const char *const prt_class_names[PRT_NCLASS];
extern const char *const prt_dtype_names[PRT_NDTYPE];
size_t prt_dtype_size(int64_t dtype);
/* The dtype of the registered buffer whose bytes hold `ptr` (any address inside
 * it, e.g. a ZeRO shard's offset), or -1 for NULL and for memory the runtime did
 * not allocate (test programs' arrays).  O(log buffers).  The ops take their
 * dtypes from the call's dtypes word; this is what checks it. */
int64_t prt_dtype_of(prt *rt, const void *ptr);
/* Stops the run unless `dtype`, which a call's dtypes word declares for its
 * pointer argument `index` (0 = the first after rt), is a dtype and, when p falls
 * in a registered buffer, that buffer's. */
void prt_verify_arg_dtype(prt *rt, const void *p, int64_t dtype, int index, const char *op);
/* The dtype of pointer argument `index` of op `op` from its dtypes word
 * (parc_rt.h), verified while rt->check_dtypes is set: what every backend reads
 * its tensors' dtypes with. */
static inline int64_t prt_arg_dtype(prt *rt, int64_t dtypes, int index, const void *p, const char *op) {
    int64_t dtype = prt_word_dtype(dtypes, index);
    if (p && rt->check_dtypes) prt_verify_arg_dtype(rt, p, dtype, index, op);
    return dtype;
}
/* The one dtype of a collective's elements: that of its pointer arguments a
 * and b (NULL: one buffer) in its dtypes word, which must agree (prt_ops.c). */
int64_t prt_comm_dtype(prt *rt, int64_t dtypes, const void *a, const void *b, const char *what);
/* Sets rt->check_dtypes for what runs next: always under PRT_CHECK_DTYPES=1,
 * else until the first step has ended and, during an evaluation, until the
 * first evaluation has. */
void prt_dtype_checks_update(prt *rt);

/* A malloc'ed host copy of `bytes` bytes of buffer memory (the caller frees it). */
void *prt_host_copy(prt *rt, const void *src, size_t bytes);

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
/* Collectives in flight (prt_overlap.c).  A backend's allreduce_start /
 * reducescatter_start posts its request with prt_comm_post (buf: where the
 * result lands, the buffer comm_wait names; start: MPI_Wtime at the start);
 * prt_comm_progress tests the pending ones and the pending pipeline sends
 * (the op entry points call it while there are any);
 * prt_comm_check_idle fails when any is still in flight (step end). */
/* The collective in flight on buf reads `owned` (a heap block: counts an
 * MPI nonblocking call keeps using) until it completes; comm_wait frees it. */
void prt_comm_keep(prt *rt, const void *buf, void *owned);
void prt_mpi_shift_start(prt *rt, int64_t axis, void *out, const void *in, int64_t n, int64_t dtype);
/* The same step blocking (the CUDA backend's host-staged path). */
void prt_mpi_shift(prt *rt, int64_t axis, void *out, const void *in, int64_t n, int64_t dtype);
void prt_comm_post(prt *rt, const void *buf, MPI_Request request, const char *name, int64_t bytes, int64_t axis,
                   double start);
/* The same for a collective the runtime runs as steps of point-to-point
 * messages (prt_mpi.c's ring reduce-scatter and all-gather): prt_comm_progress and
 * comm_wait move it on through prt_mpi_ring_advance. */
void prt_comm_post_ring(prt *rt, const void *buf, struct prt_ring *ring, const char *name, int64_t bytes,
                        int64_t axis, double start);
/* Moves a ring collective on: completes what of its current step has arrived
 * and posts the next; with wait set, until it is done (watched waits, named
 * as the collective on its axis).  Returns 1 once it is done. */
int prt_mpi_ring_advance(prt *rt, struct prt_ring *ring, int wait);
void prt_mpi_ring_free(struct prt_ring *ring);
/* Open MPI's settings the runtime's collectives rely on, set in the
 * environment before MPI_Init unless the user set them: a started
 * all-reduce runs the ring (libnbc otherwise reduces to one rank and
 * broadcasts back, for fewer than 4 ranks or in place, which moves twice
 * the bytes a rank of the ring does: docs/cost-model.md). */
void prt_mpi_settings(void);
void prt_comm_progress(prt *rt);
/* Tests the pending pipeline sends (prt_mpi.c); prt_comm_progress calls it. */
void prt_comm_progress_sends(prt *rt);
void prt_comm_progress_recv(prt *rt);
void prt_comm_recv_step_end(prt *rt);
void prt_comm_check_idle(prt *rt, const char *where);
void prt_comm_inflight_free(prt *rt);

/* Called by every backend's xent_fwd with the loss of its N rows: adds it to the
 * loss prt_step_end reports when this rank owns it (coordinate 0 of `axis` and
 * of every loss-replica axis). */
void prt_count_step_loss(prt *rt, int64_t axis, double loss);
/* Is this rank coordinate 0 of every axis of the last loss_replicas mask (the
 * one of a replicated value that counts it)? */
int prt_loss_owner(prt *rt);
/* Adds a router's counts[E] (host memory) to the step's per-expert tokens of
 * layer `layer` (every backend's moe_counts; parc_rt.h). */
void prt_moe_count_tokens(prt *rt, const int32_t *counts, int64_t E, int64_t layer);

/* ---------------------------------------------------------------- watchdog */

/* Completes a nonblocking MPI request (status may be NULL), polling it.  If it
 * takes longer than rt->timeout seconds, the ranks still polling ask each other
 * where they are waiting; the lowest of them reports the ranks that did not
 * answer (stopped, hung in computation, or dead) with their mesh coordinates and
 * what the others wait in, then ends the job (exit status 1).  `what` names the
 * wait ("all-reduce"), `axis` its mesh axis (-1: the world). */
void prt_wait(prt *rt, MPI_Request *request, MPI_Status *status, const char *what, int64_t axis);
/* A watched barrier over the world: start-up and shutdown phases. */
void prt_watched_barrier(prt *rt, const char *what);

/* Brackets a blocking call that cannot be polled (a communicator split, a device
 * synchronisation): if it stays blocked longer than the timeout, the watchdog
 * thread prints what was blocked and ends this process, so mpirun ends the job. */
void prt_block_begin(const char *what, int64_t axis);
void prt_block_end(void);
/* Starts (timeout > 0) and stops the watchdog thread. */
void prt_watchdog_start(prt *rt);
void prt_watchdog_stop(void);

/* ---------------------------------------------------------------- trace */

static inline double prt_trace_start(prt *rt) { return rt->tracing ? MPI_Wtime() : 0.0; }
void prt_trace_record(prt *rt, const char *name, const char *category, double start, int64_t bytes,
                      int64_t axis);
#define PRT_TRACE_END(rt, name, category, start, bytes, axis) \
    do {                                                      \
        if ((rt)->tracing) prt_trace_record(rt, name, category, start, bytes, axis); \
    } while (0)
/* The step marker at prt_step_begin, the step span and the step's phase times
 * at prt_step_end (after prt_phases_step_end). */
void prt_trace_step_begin(prt *rt, int64_t step);
void prt_trace_step_end(prt *rt, int64_t step);
/* The send ('s') or receive ('f') end of the flow arrow of a pipeline message,
 * placed just inside the end of the event just recorded for it; both ranks derive the same id
 * from (step, sender, receiver, tag). */
void prt_trace_flow(prt *rt, char ph, int sender, int receiver, int64_t tag);
/* Gathers every rank's events recorded since the last flush; rank 0 appends
 * them to the Chrome trace JSON file and flushes it (called at every step's end,
 * a collective of the world). */
void prt_trace_flush(prt *rt);
/* The last flush; rank 0 closes the JSON array and the file. */
void prt_trace_write(prt *rt);

/* Phases (prt_phases.c): the step's clock restarts in FORWARD at step begin;
 * prt_phase_charge moves the seconds since `start` from the current phase to
 * `phase` (a collective, a pipeline message); step end closes the step,
 * keeping the step's phases for its metrics record; the report prints
 * estimate against measurement on rank 0 and writes them as the metrics
 * log's summary record (exit on a failed write). */
void prt_phases_step_begin(prt *rt);
void prt_phase_charge(prt *rt, int64_t phase, double start);
void prt_phases_step_end(prt *rt, double end);
void prt_phases_report(prt *rt);

/* prt_startup.c: where start-up goes and the resident peak against the ledger.
 * prt_startup_begin at prt_init's entry (before anything else) gives the
 * process's creation and that moment; marks after it are set once each. */
void prt_startup_begin(double *created, double *entry);
void prt_startup_mark(prt *rt, int mark);
double prt_monotonic(void);
/* VmHWM in bytes (-1: unknown). */
int64_t prt_resident_peak(void);
/* The process's minor page faults so far (-1: unknown). */
int64_t prt_minor_faults(void);
/* glibc's malloc set to keep what it frees (prt_init, before MPI_Init): blocks
 * up to PRT_MMAP_THRESHOLD (glibc's largest, 32 MiB on 64-bit) from the heap,
 * up to PRT_TRIM_THRESHOLD of freed heap kept mapped.  The runtime's own
 * buffers are allocated once; what this spares is the per-call temporaries
 * of MPI and the kernels, each of which otherwise faults its pages anew. */
#define PRT_MMAP_THRESHOLD (32 << 20)
#define PRT_TRIM_THRESHOLD (1 << 30)
void prt_allocator_settings(void);
/* The ms from each mark to the next (PRT_START_NMARKS - 1 of them) and from
 * the process's creation to the first step (0 where a mark is missing). */
void prt_startup_intervals(const prt *rt, double *ms, double *total_ms);
/* With --memory, rank 0: the start-up and resident-memory line. */
void prt_startup_report(prt *rt);

/* Start-up phases, in the order prt_init and a resume's restore reach them.
 * Each one that runs (hosts: with 2 ranks or more; data: with a token
 * file; backend: with a backend start-up; resume: with --resume) ends the
 * ranks' local work of the phase with a wait of the world that prt_wait polls,
 * labelled by the phase, so a rank that never arrives is named with the phase
 * it did not reach (X: the enum's suffix, the hook's name, the wait's label). */
#define PRT_STARTUP_PHASES(X)                                                           \
    X(DUP, "dup", "duplicating the world communicator (start-up)")                      \
    X(MESH, "mesh", "the start-up barrier before the communicator split")               \
    X(HOSTS, "hosts", "the host names gather (start-up)")                               \
    X(OUTPUTS, "outputs", "the check of the outputs (start-up)")                        \
    X(DATA, "data", "the check of the data files (start-up)")                           \
    X(BACKEND, "backend", "the barrier before the backend's start-up")                  \
    X(READY, "ready", "the start-up barrier")                                           \
    X(RESUME, "resume", "the check of the restored checkpoint (start-up)")                \
    X(IMPORT, "import", "the check of the imported weights (start-up)")
enum {
#define X(id, name, wait) PRT_STARTUP_##id,
    PRT_STARTUP_PHASES(X)
#undef X
    PRT_STARTUP_NPHASES
};
/* The label of start-up phase `phase`'s wait, for prt_wait.  Call it as the
 * phase reaches its wait, before posting it: under the test hook
 * PRT_TEST_STOP=RANK:NAME, world rank RANK stops itself there (SIGSTOP) when
 * NAME is this phase's name; a NAME that is no phase's is a runtime error. */
const char *prt_startup_phase(prt *rt, int phase);

/* Metrics (prt_metrics.c), rank 0: the progress line and the step's record
 * of the metrics log (rt->log_file, JSON lines); prt_metrics_fail ends the
 * run after a failed write (step -1: the summary, not a step's record). */
extern const char *const prt_phase_keys[PRT_NPHASES];
void prt_metrics_step(prt *rt, int64_t step, double loss, double seconds);

/* Start-up, after the axes (prt_placement.c): every rank learns every rank's
 * host (rt->host_of, rt->host_names), and rank 0 warns about each group of an
 * axis whose ranks are on more than one host where that costs what the plan
 * did not count: a tensor-parallel group always, any other axis's where the
 * plan's cluster keeps the axis inside a node.  PRT_HOSTNAME (a test hook)
 * names the hosts; PRT_PLACEMENT_FILE=PATH has rank 0 write `RANK HOST` per
 * rank there (parc run reads it to name the ranks of a host it lost). */
void prt_check_placement(prt *rt);
/* World rank r's host name ("?" when unknown). */
const char *prt_host_of(const prt *rt, int r);
void prt_metrics_fail(prt *rt, int64_t step);
/* `, "key": v` into the metrics log, null where v is not finite (JSON has no
 * NaN or infinity); fprintf's result. */
int prt_json_number(FILE *f, const char *key, double v);
/* Rank 0: the message that training diverged at `step` (`what`, the loss or
 * the gradient norm, is `value`) and the metrics log's `diverged` record. */
void prt_metrics_diverged(prt *rt, int64_t step, const char *what, double value);

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
/* Global layer of instance `instance` (first_layer, or layer_of), or -1. */
int64_t prt_param_layer(const prt_buffer_desc *gen, int64_t instance);

/* ---------------------------------------------------------------- dumps (prt_dump.c) */

/* Reads PRT_DUMP_DIR / PRT_DUMP_STEP / PRT_DUMP_DATA_ALL (prt_init); a problem
 * (a directory that cannot be made or written, a bad step) goes to message. */
void prt_dump_init(prt *rt, char *message, size_t size);
/* Hooks; each returns at once when its dump is off. */
void prt_dump_step_begin(prt *rt, int64_t step);       /* init_params at dump_step */
void prt_dump_before_optimizer(prt *rt, int64_t step); /* grads at dump_step */
void prt_dump_data(prt *rt, const int32_t *tokens, const int32_t *targets, int64_t step, int64_t first_sample,
                   int64_t B, int64_t T);
void prt_dump_logits(prt *rt, const void *logits, int64_t dtype, int64_t N, int64_t V_local, int64_t vocab_offset, int64_t axis);
/* Writes params.rank<R>.bin and closes the dump files (prt_finalize). */
void prt_dump_finalize(prt *rt);

/* ---------------------------------------------------------------- data */

/* Opens, validates and maps the training and validation files (--data,
 * --val-data, else the plan's data section; prt_data.c's banner lists the
 * checks).  Every rank checks its share; the first rank that finds a problem
 * reports it (rank 0 when all do) and the job exits with status 2. */
void prt_data_open(prt *rt);
void prt_data_close(prt *rt);
/* enum prt_data_format by name ("text", "llmc", "u16", "u32"), -1 for none. */
int64_t prt_data_format_parse(const char *name);

/* Start-up problems found by some ranks (bad data, unwritable outputs) at the
 * end of start-up phase `phase` (PRT_STARTUP_*): each rank passes its message
 * or NULL; the lowest rank that has one prints it and every rank exits 2.
 * Returns when no rank has one.  Watched (prt_wait, labelled by the phase). */
void prt_startup_verdict(prt *rt, int phase, const char *message);

/* ---------------------------------------------------------------- flags (prt_flags.c) */

/* Parses the runtime options (argv after argv[0]); on a bad one every rank exits
 * with status 2 after rank 0 prints the message and the usage. */
void prt_parse_flags(prt *rt, int argc, char **argv);
/* Every rank calls it with the same status: flush, MPI_Finalize, exit. */
void prt_exit_all(prt *rt, int status) __attribute__((noreturn));

/* ---------------------------------------------------------------- the BLAS kernel check (prt_blas.c) */

/* The OpenBLAS kernel family to use instead of `chosen` on a CPU with (avx512:
 * F, CD, BW, DQ, VL) or (avx2: AVX2 and FMA), or NULL when `chosen` already uses
 * them: SkylakeX on AVX-512 CPUs, Haswell on AVX2 ones. */
const char *prt_blas_better_core(const char *chosen, int avx512, int avx2);
/* Before MPI_Init, argv NULL-terminated at argc: when OPENBLAS_CORETYPE is unset
 * and OpenBLAS chose an older family than the CPU runs, or OMP_WAIT_POLICY is
 * unset and the rank runs several threads, sets them (PASSIVE) and re-executes
 * the program (returns only when nothing needs changing or the exec failed). */
void prt_blas_select(int argc, char **argv);
/* After the flags: rank 0 prints one line when prt_blas_select restarted us. */
void prt_blas_report(prt *rt);

/* ---------------------------------------------------------------- checkpoints (prt_ckpt.c) */

/* One runtime option of checkpointing (--checkpoint-dir DIR, --checkpoint-every N,
 * --checkpoint-keep N, --resume latest|DIR, --save-on-exit with value NULL).
 * Returns 1 when `name` is one of them (a bad value is written to err), else 0. */
int prt_ckpt_option(prt *rt, const char *name, const char *value, char *err, size_t size);
/* At prt_init after the options: checks the checkpoint directory can be written
 * and the checkpoint to resume exists; installs the SIGINT/SIGTERM handlers. */
void prt_ckpt_init(prt *rt, char *message, size_t size);
/* --init-from PATH (prt_import.c): fills this rank's weights and fp32 masters
 * from a Hugging Face GPT-2 or Llama checkpoint, reading only its own shards;
 * every rank exits 2 when any found a problem (each named). */
void prt_import_hf(prt *rt, const char *path);

/* The machine's name as `calibrated "NAME";` gives it (prt_machine.c): "cpu
 * MODEL, N cores" for device "cpu" (or NULL), else "DEVICE DESCRIPTION". */
void prt_machine_name(const char *device, const char *description, char *out, size_t size);
/* At prt_step_end: stops after this step when a signal came (saving first when a
 * checkpoint directory is set), and saves every --checkpoint-every steps and at
 * the last step with --save-on-exit. */
void prt_ckpt_step_end(prt *rt, int64_t step);
/* Options text for the usage message. */
extern const char prt_ckpt_usage[];

/* ---------------------------------------------------------------- collectives, dtype explicit (prt_mpi.c) */

/* The MPI bodies of prt_allreduce ... prt_recv on HOST memory holding elements of
 * `dtype`, for axes of size > 1 (the public functions decode the dtype from the
 * call's dtypes word, handle size-1 axes and dispatch to the backend).  The CUDA
 * backend's host-staged path calls these on its staging copies. */
void prt_mpi_allreduce(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype);
void prt_mpi_allreduce_ends(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype);
void prt_mpi_allgather(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
void prt_mpi_reducescatter(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                           int64_t dtype);
void prt_mpi_alltoall(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);
void prt_alltoallv_overflow(prt *rt, const char *axis, int64_t arrived, int64_t out_rows) __attribute__((noreturn));
void prt_mpi_alltoallv(prt *rt, int64_t axis, void *out, const void *in, const void *send_rows, void *recv_rows,
                       int64_t out_rows, int64_t inner, int64_t dtype);
void prt_mpi_send(prt *rt, int64_t axis, int64_t delta, const void *buf, int64_t n, int64_t tag, int64_t dtype);
void prt_mpi_recv(prt *rt, int64_t axis, int64_t delta, void *buf, int64_t n, int64_t tag, int64_t dtype);
/* Nonblocking: MPI_Iallreduce in place (libnbc's ring, prt_mpi_settings)
 * posted with prt_comm_post; the all-gather and the reduce-scatter rings of
 * point-to-point steps posted with prt_comm_post_ring.  The blocking forms
 * above run the same collectives to the end. */
void prt_mpi_allreduce_start(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype);
void prt_mpi_allgather_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                             int64_t dtype);
void prt_mpi_reducescatter_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                                 int64_t dtype);

/* The local slice on host memory (the CPU backend's slice). */
void prt_mpi_slice(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype);

#ifdef __cplusplus
}
#endif
#endif
