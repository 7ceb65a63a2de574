/*
 * analyze.h — the analyze pass: what the lowered program costs.
 *
 * Everything here is read off the Program (its buffers, instructions and
 * schedule); nothing is re-derived from the model by formula.
 */
#ifndef PARC_ANALYZE_H
#define PARC_ANALYZE_H

#include "ir.h"
#include "ledger.h"
#include "cost.h"

/* One row of the collective report: identical instructions of one stage
 * aggregated over a step. */
typedef struct CollRow {
    int stage;
    Phase phase;
    CollKind coll;
    int axis;                 /* -1 for pipeline messages between stages */
    int group;                /* ranks in the group */
    int64_t elems;            /* elements per call (the full buffer, as nccl-tests counts size) */
    int elem_bytes;
    int64_t calls;            /* per step */
    int inside_node;
    const char *op;           /* op that causes it */
    const char *tensor;
    const char *why;
} CollRow;

/* The step's time by phase, as analyze_step_time puts it together (they
 * sum to step_s).  ORDER: analyze_phase_names follows. */
#define ANALYZE_PHASES(X)                          \
    X(FORWARD, "forward")                          \
    X(BACKWARD, "backward")                        \
    X(COMM, "exposed communication")               \
    X(BUBBLE, "bubble")                            \
    X(OPTIMIZER, "optimizer")
enum {
#define X(name, str) APHASE_##name,
    ANALYZE_PHASES(X)
#undef X
    ANALYZE_NPHASES
};
extern const char *const analyze_phase_names[ANALYZE_NPHASES];

typedef struct StageCost {
    /* copied from the stage's ledger (StageProgram, ledger.h) */
    int64_t ledger[PRT_NCLASS];   /* bytes per class on one rank of the stage */
    int64_t total;
    int64_t params_local;         /* parameter elements held (weights) */
    int64_t cpu_widen;            /* extra workspace the CPU runtime needs to widen 16-bit operands
                                     (in the built program's ledger, not in `ledger`) */
    int64_t host_staging;         /* pipeline send copies in host memory (likewise) */
    double flops_fwd_chunk;       /* one micro-batch through one chunk, forward */
    double flops_bwd_chunk;
    double flops_step;            /* per rank per step */
    double comm_fwd_chunk_s;      /* blocking collectives inside one chunk's forward */
    double comm_bwd_chunk_s;
    double sync_s;                /* gradient sync per step, exposed (after the backward) */
    double sync_hidden_s;         /* ... and hidden under the backward (started buckets, overlap.c) */
    double bwd_hidden_chunk_s;    /* ZeRO-2/3's reduce-scatters and ZeRO-3's prefetched gathers hidden in one
                                     chunk's backward (overlap_scatters, overlap_gathers) */
    double fwd_hidden_chunk_s;    /* ZeRO-3's prefetched gathers hidden in one chunk's forward (overlap_gathers) */
    double tp_comm_chunk_s;       /* the collectives over the tensor axis in one chunk's forward and backward,
                                     blocking and started, before anything is hidden */
    double tp_hidden_chunk_s;     /* ... what of them is hidden: the input gradients' collectives under their
                                     weight gradients (overlap_tp.c), part of bwd_hidden_chunk_s */
    double optim_s;               /* optimizer step (memory bound), and the step's gradient clears */
    /* the cost model's terms (cost.h): one micro-batch through one chunk,
     * forward and backward (recompute included); per step, gradient sync and
     * the optimizer's communication */
    CostTerms fwd, bwd, sync;
    double optim_bytes;           /* state the optimizer streams per step */
    double seq_s[SEQ_COUNT];      /* one call of each sequence, what its started collectives hide taken off */
} StageCost;

typedef struct Analysis {
    const Program *prog;
    StageCost *stages;
    CollRow *rows;
    int nrows, rows_cap;
    int64_t max_total;            /* the most memory any rank needs */
    int worst_stage;
    double flops_per_step;        /* the whole model, all ranks */
    double model_flops_per_step;  /* 6 Ψ' tokens + attention (the MFU numerator) */
    /* Ψ': the non-embedding parameters plus the head's matmul weight (a tied
     * head's table once); attention: 12 x layers x seq x hidden per token */
    double model_matmul_params, model_attention_flops_per_token;
    double peak_flops;            /* per GPU for the plan's precision */
    double t_fwd, t_bwd, t_p2p;   /* per chunk per micro-batch, slowest chunk; t_p2p one hand-off (its receive and, scattered, the all-gather after it) */
    double t_hold, t_wire;        /* what a hand-off holds each end and is in flight (schedule_simulate_stages):
                                   * on a GPU t_p2p and 0 (its host-staged copies at about the link's rate), on
                                   * CPU ranks a copy of the message and t_p2p */
    double *stage_fwd, *stage_bwd; /* [stage * chunks + chunk]: each chunk's item time, which the simulation runs */
    double pipeline_s;            /* simulated makespan of the schedule */
    double bubble_ideal;          /* (p-1)/(v m) */
    double bubble_share;          /* idle share of the simulated step on the busiest stage */
    double step_s;                /* estimated step time */
    double axis_bytes[PARC_MESH_SLOTS];  /* bytes per step per rank on each axis (buffer sizes) */
    double axis_wire[PARC_MESH_SLOTS];   /* ... times the bus factor: what crosses the links */
    double link_wire[2];               /* [0] inside nodes, [1] across nodes */
    double pipeline_bytes;             /* send/recv bytes per step per rank, both directions */
    int slow_stage;                    /* the stage whose chunks are slowest (t_fwd + t_bwd) */
    int tail_stage;                    /* the stage with the longest gradient sync + optimizer */
    double phase_s[ANALYZE_NPHASES];   /* step_s by phase */
    double comm_hidden_s;              /* communication under compute: the tail stage's started buckets */
    /* per step on the slow stage, the tensor axis's collectives (its part of
     * phase_s[APHASE_COMM] and of comm_hidden_s) */
    double tp_comm_exposed_s, tp_comm_hidden_s;
} Analysis;

/* Reads the program and its ledger (ledger.h); changes nothing in it. */
Analysis *analyze_program(Arena *arena, const Program *prog);

/* The analysis in a stable text form (`parc lower --emit=analyze`). */
void analyze_dump(const Analysis *an, FILE *out);

/* Its invariants: the ledger equals the program's, classes sum to totals, the
 * worst stage is the largest, rows name real groups, times are ordered.
 * Failure is a compiler bug: PARC_BUG. */
void analyze_verify(const Analysis *an);

/* Model FLOPs utilisation: model FLOPs per step / (step time x peak x GPUs). */
double analyze_mfu(const Analysis *an);

/* Byte counts as people read them: "61.2 GiB". */
void analyze_format_bytes(double bytes, char *buf, size_t size);

/* The balance pass (balance.c): given the analysis of plan with its even
 * split (`even`, which the driver lowers and analyzes through the pass
 * table), replaces plan's stage split by the one whose busiest stage the
 * cost model finds least busy, and records what it found in
 * plan->layout.balance_*.  Whether a plan needs it: balance_wanted. */
int balance_wanted(const Plan *plan);
void balance_plan(Arena *arena, Plan *plan, const Analysis *even);

#endif
