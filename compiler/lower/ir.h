/*
 * ir.h — the graph IR and the lowered per-stage program.
 *
 * expand.c builds the Graph: one forward op list per region (embedding, the
 * repeated block, head) over tensors with NAMED dims and GLOBAL sizes.  Every
 * tensor carries a home placement per mesh axis derived from the layout rules.
 *
 * The lowering passes (lower.c, with place.c, reshard.c, autodiff.c, optim.c,
 * overlap.c and program.c; see lower.h), run in order by the driver's pass
 * table (passes.c), turn the graph into a Program: per pipeline stage,
 * instruction sequences (forward, backward, gradient sync, optimizer, pipeline
 * messages) in which all communication is explicit, each collective inserted
 * by the one resharding table (reshard_collective), plus the buffers they use,
 * the schedule (schedule.c) and the memory ledger (ledger.c).  What each op
 * needs, saves, costs and calls is its row of the ops table (ops.h).  The
 * analysis (analyze.c), the reports (explain.c) and the code generator
 * (codegen*.c) read only the Program.
 */
#ifndef PARC_IR_H
#define PARC_IR_H

#include <string.h>

#include "parc.h"
#include "parc_rt.h"
#include "schedule.h"

#define IR_MAX_TDIMS 6

/* ------------------------------------------------------------ placements */

/* ORDER: X(kind, name) */
#define IR_PLACE_KINDS(X) \
    X(R, "R")             \
    X(S, "S")             \
    X(P, "P")
typedef enum {
#define X(name, str) PLACE_##name,
    IR_PLACE_KINDS(X)
#undef X
} PlaceKind;
typedef struct Placement {
    uint8_t kind; /* PlaceKind */
    uint8_t dim;  /* Dim, for PLACE_S */
} Placement;

/* Sets placement v on every mesh axis that axis (a mesh axis or a derived
 * one) spans. */
static inline void place_set_on(const Plan *plan, Placement *place, int axis, Placement v)
{
    unsigned parts = plan_axis_parts(plan, axis);
    for (int a = 0; a < plan->mesh.naxes; a++)
        if (parts >> a & 1) place[a] = v;
}

/* The placement on axis (a derived one: on its first part, the parts moving
 * together). */
static inline Placement place_on(const Plan *plan, const Placement *place, int axis)
{
    unsigned parts = plan_axis_parts(plan, axis);
    for (int a = 0; a < plan->mesh.naxes; a++)
        if (parts >> a & 1) return place[a];
    PARC_BUG("axis %d spans no mesh axis", axis);
}


/* The collectives.  ORDER: X(kind, name).  reshard_collective maps a
 * placement change to one; cost_bus_factor (cost.h) gives their bus bandwidth factors
 * as nccl-tests defines them: all-reduce 2(n-1)/n, gathers/scatters (n-1)/n. */
#define IR_COLLECTIVES(X)                   \
    X(NONE, "none")                         \
    X(ALLREDUCE, "all-reduce")              \
    X(ALLGATHER, "all-gather")              \
    X(REDUCESCATTER, "reduce-scatter")      \
    X(ALLTOALL, "all-to-all")               \
    X(ALLTOALLV, "all-to-all(v)")           \
    X(SLICE, "slice")                       \
    X(SEND, "send")                         \
    X(RECV, "recv")                         \
    X(SHIFT, "shift")                       \
    X(ALLREDUCE_MAX, "all-reduce(max)")

typedef enum {
#define X(name, str) COLL_##name,
    IR_COLLECTIVES(X)
#undef X
    COLL_COUNT
} CollKind;
extern const char *const coll_names[COLL_COUNT];

/* from -> to on one axis: the collective, per the table
 *   P->R all-reduce, P->S reduce-scatter, S->R all-gather, S(d)->S(e) all-to-all,
 *   R->S slice (no communication), equal -> none.  R/S -> P never happens.
 *   S(routed) <-> S(experts), routed rows between the tokens' ranks and their
 *   experts' (expert parallelism), is the all-to-all of variable counts. */
CollKind reshard_collective(Placement from, Placement to);

/* ------------------------------------------------------------ tensors, ops */

/* ORDER: X(region, name) */
#define IR_REGIONS(X)    \
    X(EMBED, "embed")    \
    X(BLOCK, "block")    \
    X(HEAD, "head")
typedef enum {
#define X(name, str) REGION_##name,
    IR_REGIONS(X)
#undef X
    REGION_COUNT
} Region;
extern const char *const region_names[REGION_COUNT];

/* ORDER: X(kind, name) */
#define IR_TENSOR_KINDS(X)   \
    X(ACT, "act")            \
    X(PARAM, "param")        \
    X(INDEX, "index")        \
    X(STAT, "stat")          \
    X(SCALAR, "scalar")
typedef enum {
#define X(name, str) TENSOR_##name,
    IR_TENSOR_KINDS(X)
#undef X
    TENSOR_KIND_COUNT
} TensorKind;
extern const char *const tensor_kind_names[TENSOR_KIND_COUNT];

typedef struct Tensor {
    int id;
    Region region;
    TensorKind kind;
    const char *name;                 /* "mlp.up.w", "h2"; "l1.mlp.up.w" in layer 1 of a block of several */
    const char *base_name;            /* the name without that prefix: a parameter's name in every layer */
    int sub;                          /* REGION_BLOCK: its layer in the block (plan_block_layers), else 0 */
    int ndim;
    Dim dims[IR_MAX_TDIMS];
    int64_t sizes[IR_MAX_TDIMS];      /* global sizes */
    Placement home[PARC_MAX_AXES];    /* the layout's placement on each mesh axis */
    int producer;                     /* op id, -1 for params */
    /* parameters */
    int init;                         /* prt_init */
    double init_std;
    int decay;                        /* weight decay applies (matrices) */
    SrcLoc loc;
} Tensor;

/* The graph ops.  ORDER: X(kind, name); what each needs, saves, costs and
 * calls is its row of op_table (ops.h). */
#define IR_OPS(X)                     \
    X(DATA, "data")                   \
    X(EMBED, "embed")                 \
    X(POS, "pos")                     \
    X(LAYERNORM, "layernorm")         \
    X(RMSNORM, "rmsnorm")             \
    X(LINEAR, "linear")               \
    X(LINEAR_T, "linear_t")           \
    X(BIAS, "bias")                   \
    X(GELU, "gelu")                   \
    X(RELU, "relu")                   \
    X(SWIGLU, "swiglu")               \
    X(ROPE, "rope")                   \
    X(ATTENTION, "attention")         \
    X(DROPOUT, "dropout")             \
    X(ADD, "add")                     \
    X(COPY, "copy")                   \
    X(XENT, "cross_entropy")          \
    X(MOE_ROUTER, "moe_router")       \
    X(MOE_PERMUTE, "moe_permute")     \
    X(MOE_MATMUL, "moe_matmul")       \
    X(MOE_COMBINE, "moe_combine")

typedef enum {
#define X(name, str) OP_##name,
    IR_OPS(X)
#undef X
    OP_COUNT
} OpKind;
extern const char *const op_names[OP_COUNT];

typedef struct Op {
    int id;
    OpKind kind;
    Region region;
    const char *name;     /* "mlp.up"; "l1.mlp.up" in layer 1 of a block of several */
    int sub;              /* REGION_BLOCK: its layer in the block, else 0 */
    int nin, in[3];       /* activation inputs (tensor ids) */
    int nparam, param[2]; /* parameters (tensor ids) */
    int out;              /* output tensor */
    int naux, aux[5];     /* statistics the op saves for backward (mean, rstd, probs; a router's
                           * logits, choices, counts and losses) */
    SrcLoc loc;           /* the plan line that asked for it */
} Op;

typedef struct Graph {
    const Plan *plan;
    Tensor *tensors;
    int ntensors, tensors_cap;
    Op *ops;
    int nops, ops_cap;
    int region_first[REGION_COUNT], region_count[REGION_COUNT];
    int tokens, targets;        /* TENSOR_INDEX tensors (REGION_EMBED / REGION_HEAD) */
    int embed_out;              /* residual stream entering layer 0 */
    int block_in, block_out;    /* a block's input and output (same shape and home) */
    int head_in;                /* residual stream leaving the last layer */
    int loss;                   /* TENSOR_SCALAR */
    int moe_counts;             /* TENSOR_INDEX: a block's router's tokens per expert [experts], else -1 */
    int grad_sumsq;             /* TENSOR_SCALAR: the gradients' global sum of squares (`clip`), else -1 */
    int64_t params_total;       /* model parameters (global) */
    int64_t params_active;      /* those one token passes through: a mixture of
                                 * experts' router and topk of its experts */
} Graph;

/* Builds the forward graph of plan's model and every tensor's home placement.
 * Reports placement errors no op can accept (e.g. attention with seq split)
 * through diag; returns NULL after reporting. */
Graph *expand_model(Arena *arena, const Plan *plan);
/* The graph's invariants (expand_model checks them before returning).
 * Failure is a compiler bug: PARC_BUG. */
void expand_verify(const Graph *graph);
void expand_dump(const Graph *graph, FILE *out);
int64_t expand_tensor_numel(const Tensor *t);
/* Local elements of t on one rank under placement place[] (no Partial). */
int64_t expand_tensor_local_numel(const Plan *plan, const Tensor *t, const Placement *place);
/* Has tensor t a dim d? */
static inline int tensor_has_dim(const Tensor *t, Dim d)
{
    for (int i = 0; i < t->ndim; i++)
        if (t->dims[i] == d) return 1;
    return 0;
}
/* Its local sizes per dim (a flat ZeRO shard not applied).  Split(experts)
 * of routed rows [routed, topk, ...] (expert parallelism) is the bound of
 * what a rank's experts receive: routed whole, topk at most experts / parts. */
void expand_local_sizes(const Plan *plan, const Tensor *t, const Placement *place, int64_t *sizes);
void expand_placement_format(const Plan *plan, const Placement *place, char *buf, size_t size);

/* ------------------------------------------------------------ lowered program */

/* How an instruction's buffer argument picks its instance at run time.
 * ORDER: X(mode, dump format of its instance, given k).
 *   FIXED:   instance = k
 *   LAYER:   instance = base(chunk) + l                  (per-layer parameters; base(chunk) =
 *                                                        the layers of the stage's chunks before it)
 *   SLOT_L:  instance = (l + k) * nslots + slot          (per layer, per in-flight micro-batch;
 *                                                        k = 1 names the next layer's slot)
 *   SLOT:    instance = slot                             (per in-flight micro-batch)
 *   PARITY:  instance = (l + k) & 1                      (gradient ping-pong between layers;
 *                                                        ZeRO-3's gathered weights of two layers)
 *   LAYER_AT: instance = base(chunk) + l + k             (the parameters of the layer k away:
 *                                                        a gather prefetched for it, overlap_gather.c)
 *   SLOT_END: instance = (layers(chunk) + k) * nslots + slot (the residual stream at the end of
 *                                                        the chunk: what leaves it, what the head reads)
 *   PARITY_END: instance = (layers(chunk) + k) & 1       (the gradient ping-pong half the chunk's
 *                                                        last layer reads)
 * layers(chunk) is the chunk's layer count (StageProgram.chunk_layers), so the
 * chunks of one stage may differ. */
#define IR_INST_MODES(X)          \
    X(FIXED, "[%d]")              \
    X(LAYER, "[layer]")           \
    X(SLOT_L, "[l+%d,slot]")      \
    X(SLOT, "[slot]")             \
    X(PARITY, "[(l+%d)&1]")       \
    X(LAYER_AT, "[layer%+d]")     \
    X(SLOT_END, "[end%+d,slot]")  \
    X(PARITY_END, "[(end%+d)&1]")
typedef enum {
#define X(name, fmt) INST_##name,
    IR_INST_MODES(X)
#undef X
    INST_COUNT
} InstMode;

typedef enum {
    ARG_NULL,        /* a NULL pointer */
    ARG_BUF,         /* buffer `buf`, instance per `inst`/`k`, plus an element offset
                        coord(axis) * i when axis >= 0 (a rank's share of a flat tensor) */
    ARG_INT,         /* i */
    ARG_F64,         /* d */
    ARG_COORD_TIMES, /* coord(axis) * i + k */
    ARG_STEP,        /* the step number, counting from 1 */
    ARG_FIRST_SAMPLE, /* first sample of this micro-batch in the step's global batch:
                         micro * (micro_batch * dp) + coord(dp axis) * micro_batch */
    ARG_TAG,         /* a pipeline message's tag, (micro * chunks + chunk + k) * 2 + i:
                        the receiver's chunk is chunk + k, i = 0 activations, 1 gradients */
    ARG_LR,          /* the learning rate of the step under the plan's schedule (prt_lr) */
    ARG_COUNTED,     /* 1.0 on ranks at coordinate 0 of every axis in the bit mask i, else 0.0:
                        a value replicated over those axes is counted once */
    ARG_CLIP_SCALE,  /* the step's gradient clipping factor (prt_clip_scale) */
    ARG_LAYER        /* the global layer of a block sequence's (chunk, l) and the op's layer k
                        in the block: (chunk_first_layer[chunk] + l) * plan_block_layers + k;
                        outside block sequences the chunk's first layer */
} ArgKind;

typedef struct Arg {
    uint8_t kind, inst;
    int8_t axis;
    int32_t buf;
    int32_t k;
    int64_t i;
    double d;
} Arg;

/* ORDER: X(phase, name) */
#define IR_PHASES(X)              \
    X(FORWARD, "forward")         \
    X(BACKWARD, "backward")       \
    X(RECOMPUTE, "recompute")     \
    X(GRAD_SYNC, "grad-sync")     \
    X(OPTIMIZER, "optimizer")     \
    X(PIPELINE, "pipeline")
typedef enum {
#define X(name, str) PHASE_##name,
    IR_PHASES(X)
#undef X
    PHASE_COUNT
} Phase;
extern const char *const phase_names[PHASE_COUNT];

/* The sizes and flags one runtime call of a graph op is made with, computed
 * once per op by its row's shape function and read by both directions, by the
 * FLOP count and by the scratch size.  d[] are the call's size arguments in
 * the order of the op's row (ops.c); axis is the mesh axis whose coordinate
 * offsets the op's local block (-1 none); kept says the op's statistics were
 * kept from the forward (attention's probabilities); dropout says the call
 * drops out (attention's probabilities: its attention_dropout_* entries);
 * part says which half of a linear's backward the call computes (OpPart);
 * seq_axis is the mesh axis whose coordinate offsets attention's query rows
 * (context parallelism, -1 none). */
typedef enum {
    OP_PART_WHOLE,  /* every gradient the call's pointers name */
    OP_PART_INPUT,  /* a linear's input gradient only: its weight's and bias's pointers are null */
    OP_PART_WEIGHT  /* a linear's weight (and bias) gradient only: its input gradient's pointer is null */
} OpPart;
typedef struct OpShape {
    int64_t d[6];
    int axis;
    int kept;
    int dropout;
    OpPart part;
    int seq_axis;
    int ring;     /* ring attention: the context axis's size P (seq_axis), the call one step of P; else 0 */
    int balanced; /* attention over the load-balanced split (`cp_split balanced`), either form */
} OpShape;

/* The memory-bound classes of the cost model, each charged at its own
 * efficiency of the HBM bandwidth (cost_memory_s, cost.h): plain streams,
 * norms, activations with a transcendental per element, softmaxes, the
 * optimizer's update, attention's score matrix.  An op's row (ops.h) names
 * the class of the bytes its calls move. */
typedef enum { MEM_STREAM, MEM_NORM, MEM_ACTIVATION, MEM_SOFTMAX, MEM_OPTIMIZER, MEM_SCORES } MemKind;

/* Which runtime entry of its graph op an instruction is (ops.h). */
typedef enum { ENTRY_NONE, ENTRY_FORWARD, ENTRY_BACKWARD } OpEntry;

#define IR_MAX_ARGS 18

/* When a block sequence's instruction runs, by the layer l of the call (L:
 * the chunk's layers).  Only prefetched gathers carry one (overlap_gather.c):
 * the first layer of a pass gathers its own weights, every other layer's are
 * started by the layer before.  The dump prints it after the call.
 * ORDER: X(when, dump text) */
#define IR_WHENS(X)               \
    X(ALWAYS, "")                 \
    X(L_FIRST, "if l == 0")       \
    X(L_LAST, "if l == L-1")      \
    X(L_NOT_LAST, "if l < L-1")   \
    X(L_NOT_FIRST, "if l > 0")
typedef enum {
#define X(name, str) WHEN_##name,
    IR_WHENS(X)
#undef X
    WHEN_COUNT
} When;
extern const char *const when_names[WHEN_COUNT];
/* Does an instruction guarded by `when` run in the call for layer l of L? */
static inline int when_holds(int when, int64_t l, int64_t L)
{
    switch (when) {
    case WHEN_L_FIRST: return l == 0;
    case WHEN_L_LAST: return l == L - 1;
    case WHEN_L_NOT_LAST: return l < L - 1;
    case WHEN_L_NOT_FIRST: return l > 0;
    default: return 1;
    }
}
/* In how many of a pass's L layers an instruction guarded by `when` runs. */
static inline int64_t when_count(int when, int64_t L)
{
    if (L < 1) return 0;
    switch (when) {
    case WHEN_L_FIRST:
    case WHEN_L_LAST: return 1;
    case WHEN_L_NOT_LAST:
    case WHEN_L_NOT_FIRST: return L - 1;
    default: return L;
    }
}
/* The layers a pass over L layers is followed through when one is walked
 * layer by layer (the verifier of started collectives, the timeline of what
 * they hide): all of them up to IR_PASS_WINDOW, else IR_PASS_WINDOW or one
 * more, of L's parity.  A block sequence's layers differ only in being first,
 * last, or even or odd (when_holds, INST_PARITY; other instances are relative
 * to l), so a longer pass repeats the window's middle layers. */
#define IR_PASS_WINDOW 64
static inline int64_t pass_window(int64_t L)
{
    return L <= IR_PASS_WINDOW ? L : IR_PASS_WINDOW + (L & 1);
}

/* One call of a runtime function (an entry of PRT_OPS in include/parc_rt.h).
 * fn < 0 marks a report-only record: a collective a runtime op performs
 * inside itself (the vocab-parallel loss reductions); code generation skips it. */
typedef struct Instr {
    int fn;                  /* index into PRT_OPS order (see rt_fn_names), -1 = report only */
    int nargs;               /* arguments after the context */
    Arg args[IR_MAX_ARGS];
    /* what reports need */
    CollKind coll;           /* COLL_NONE for compute */
    int axis;                /* collective axis */
    int64_t elems;           /* collective: elements each rank contributes / receives per call */
    int elem_bytes;
    int op;                  /* graph op that caused it, -1 */
    OpEntry entry;           /* the op's forward / backward runtime entry, or neither */
    OpShape shape;           /* entry != ENTRY_NONE: the call's shape */
    int tensor;              /* tensor resharded, -1 */
    Phase phase;
    const char *why;         /* the rule: "mlp.down contracts ffn split on tp -> Partial -> all-reduce" */
    double flops;            /* compute instructions: FLOPs per call */
    int group;               /* collective: ranks taking part, 0 = the whole axis (the embedding group: 2) */
    unsigned writes;         /* bit k: argument k is written, not accumulated into (first_write.c) */
    int when;                /* WHEN_ALWAYS, or the layers of a block sequence it runs in */
} Instr;

/* The ranks a collective instruction runs over. */
static inline int instr_group(const Plan *plan, const Instr *ins)
{
    return ins->group > 0 ? ins->group : plan->mesh.axes[ins->axis].size;
}

/* Sequences.  Code generation calls each as f(rt, chunk, l, slot, micro, step):
 * block sequences inside loops over (chunk, l); the others with l = 0, so
 * INST_SLOT_L there names resid instance k (the head reads resid[L] with k = L).
 * The pipeline's input and output are decided by position: stage 0 chunk 0
 * receives nothing and runs SEQ_EMBED_FWD, the last stage's last chunk sends
 * nothing and runs SEQ_HEAD_FWD; lower_reshard guarantees has_embed only on
 * stage 0 and has_head only on the last stage.  A pipeline axis always has
 * size > 1 (check.c), so interleaved chunks never send to their own rank. */
/* ORDER: X(seq, name, symbol, per layer, per micro-batch).  Per micro-batch:
 * EMBED_FWD on the stage holding the embedding (slot), BLOCK_FWD per layer
 * (l, slot), HEAD_FWD on the head stage (slot), and the backward ones
 * likewise; ZERO_GRADS_* at the start of each step; GRAD_SYNC_* after the last
 * micro-batch ((l) / ()); OPTIM_* ((l, step) / (step)); the pipeline messages
 * of a (micro-batch, chunk) at a stage boundary (chunk, slot, micro): the
 * activations received / sent, the gradients received / sent; with `clip`,
 * after the gradient sync, GRAD_NORM_BLOCK ((l)) then GRAD_NORM_ONCE (()):
 * each parameter's sum of squares, then its reduction and the clip factor;
 * GRAD_WAIT_BLOCK ((l)) after GRAD_SYNC_ONCE: the waits of the gradient
 * collectives GRAD_SYNC_BLOCK started (overlap.c), and what reads their
 * results there. */
#define IR_SEQS(X)                                                  \
    X(EMBED_FWD, "embed.fwd", "embed_fwd", 0, 1)                    \
    X(BLOCK_FWD, "block.fwd", "block_fwd", 1, 1)                    \
    X(HEAD_FWD, "head.fwd", "head_fwd", 0, 1)                       \
    X(HEAD_BWD, "head.bwd", "head_bwd", 0, 1)                       \
    X(BLOCK_BWD, "block.bwd", "block_bwd", 1, 1)                    \
    X(EMBED_BWD, "embed.bwd", "embed_bwd", 0, 1)                    \
    X(ZERO_GRADS_BLOCK, "zero_grads.block", "zero_grads_block", 1, 0) \
    X(ZERO_GRADS_ONCE, "zero_grads.once", "zero_grads_once", 0, 0)  \
    X(GRAD_SYNC_BLOCK, "grad_sync.block", "grad_sync_block", 1, 0)  \
    X(GRAD_SYNC_ONCE, "grad_sync.once", "grad_sync_once", 0, 0)     \
    X(OPTIM_BLOCK, "optim.block", "optim_block", 1, 0)              \
    X(OPTIM_ONCE, "optim.once", "optim_once", 0, 0)                 \
    X(RECV_FWD, "recv.fwd", "recv_fwd", 0, 1)                       \
    X(SEND_FWD, "send.fwd", "send_fwd", 0, 1)                       \
    X(RECV_BWD, "recv.bwd", "recv_bwd", 0, 1)                       \
    X(SEND_BWD, "send.bwd", "send_bwd", 0, 1)                       \
    X(GRAD_NORM_BLOCK, "grad_norm.block", "grad_norm_block", 1, 0)  \
    X(GRAD_NORM_ONCE, "grad_norm.once", "grad_norm_once", 0, 0)    \
    X(GRAD_WAIT_BLOCK, "grad_wait.block", "grad_wait_block", 1, 0)
typedef enum {
#define X(name, str, sym, layer, micro) SEQ_##name,
    IR_SEQS(X)
#undef X
    SEQ_COUNT
} SeqKind;
extern const char *const seq_symbols[SEQ_COUNT]; /* for generated function names */
extern const uint8_t seq_per_layer[SEQ_COUNT];    /* runs inside the loop over layers */
extern const uint8_t seq_per_micro[SEQ_COUNT];    /* runs per micro-batch (slot valid) */
extern const char *const seq_names[SEQ_COUNT];

typedef struct Seq {
    Instr *ins;
    int n, cap;
} Seq;

typedef struct Buffer {
    const char *name;
    int klass;            /* enum prt_class */
    int dtype;            /* enum prt_dtype */
    int64_t elems;        /* per instance */
    int64_t instances;
    /* parameters: see prt_buffer_desc */
    const char *init_name;
    int init;
    int64_t first_layer;
    int ndim;
    int64_t gdims[4];
    int split_axis[4];
    int zero_axis;
    int zero_whole;       /* with zero_axis: the whole local block, padded for that axis */
    int copy_of;
    double init_std;
    int layer_table;      /* instances are the stage's layers chunk by chunk: layer_of is the stage's table
                             (prt_buffer_desc; codegen_stage_layer_of) */
    int sub;              /* a block parameter's layer in the block: instance i is global layer
                             block(i) * plan_block_layers + sub (the table's entries) */
    int order;            /* the stage's buffer order: what created it (lower.c, BufOrder) */
} Buffer;

/* The dump name of each buffer dtype (enum prt_dtype; PRT_DTYPES in parc_rt.h). */
extern const char *const dtype_names[PRT_NDTYPE];
/* Bytes of one element of a buffer dtype (enum prt_dtype), from PRT_DTYPES. */
static inline int dtype_bytes(int dtype)
{
    switch (dtype) {
#define X(id, name, bytes) \
    case PRT_##id: return bytes;
        PRT_DTYPES(X)
#undef X
    }
    return 4;
}
static inline int dtype_is_16(int dtype) { return dtype == PRT_BF16 || dtype == PRT_F16; }

/* Lowering's bindings on one stage (lower.h): which buffer holds each
 * tensor's value, gradient and optimizer state there, the stage's loss and
 * data scratch buffers, and the embedding's and head's parameters as its
 * forward gathered them.  reshard makes them; autodiff, optim and overlap
 * read and extend them.  Opaque outside lowering. */
typedef struct StageBindings StageBindings;

typedef struct StageProgram StageProgram;
/* The global layers first..last of chunk c of stage sp: its blocks' layers
 * (the program counts blocks of plan_block_layers layers). */
static inline void program_chunk_span(const Plan *plan, const StageProgram *sp, int c, int64_t *first, int64_t *last);

struct StageProgram {
    int stage;                 /* coordinate on the pipeline axis */
    StageBindings *bindings;   /* lowering's state of this stage (above); not read after `lower` */
    int chunks;                /* virtual stages held */
    int chunk_layers[64];      /* layers of each chunk (the plan's chunk_layers; chunks may differ) */
    int chunk_first_layer[64]; /* global layer of each chunk's first layer */
    int layers;                /* over all chunks: the per-layer parameters' instances */
    int max_chunk_layers;      /* the largest chunk's layers: the per-layer activation slots */
    int has_embed, has_head;
    int nslots;                /* activation slots = peak in-flight (micro, chunk) pairs */
    /* Where SEQ_GRAD_SYNC_BLOCK runs: 0 = for every layer after the whole
     * schedule; 1 = bucketed, for each layer right after the last micro-batch's
     * backward through it (so a GPU can overlap it with the next layer's
     * backward).  Set for ZeRO-0/1 (whole gradients accumulate until then);
     * ZeRO-2/3 scatter after every micro-batch inside SEQ_BLOCK_BWD instead. */
    int sync_in_backward;
    Buffer *bufs;
    int nbufs, bufs_cap;
    Seq seq[SEQ_COUNT];
    /* pipeline messages: resid buffer instance (0 or L, per slot) is received /
     * sent; the gradient ping-pong buffer likewise. */
    int resid_buf, dresid_buf;
    int64_t boundary_elems;    /* elements per pipeline message */
    /* the schedule of this stage: work items and the activation slot of each */
    int nitems;
    const WorkItem *items;
    int *slot_of_item;
    /* memory ledger (ledger.h, the last step of lowering): bytes per prt class
     * on one rank of this stage, their sum, the parameter elements held, and
     * the extra workspace a program built for the CPU runtime needs to widen
     * 16-bit operands to fp32 (not in ledger[]: a GPU computes on them) */
    int64_t ledger[PRT_NCLASS];
    int64_t ledger_total;
    int64_t params_local;
    int64_t cpu_widen;
    /* the copies of pipeline sends still in flight, which the runtime stages in
     * host memory whatever the backend (prt_mpi_send's send slots; the CUDA
     * backend copies each message to the host first): booked to PRT_COMM in
     * the built program's ledger, not in ledger[] (no GPU memory) */
    int64_t host_staging;
};

static inline void program_chunk_span(const Plan *plan, const StageProgram *sp, int c, int64_t *first, int64_t *last)
{
    int64_t N = plan_block_layers(plan);
    *first = (int64_t)sp->chunk_first_layer[c] * N;
    *last = *first + (int64_t)sp->chunk_layers[c] * N - 1;
}

/* The placement pass's result (place.c; lower.h defines it): for every op
 * and mesh axis, the placement each input and parameter must have, the one
 * the op produces and those of the gradients its backward produces; per
 * tensor, its produced and gradient placements and whether the backward
 * reads it; which bias ops fold into their linear's call.  Opaque outside
 * lowering; lives in the arena. */
typedef struct PlaceTable PlaceTable;

typedef struct Program {
    Arena *arena;              /* where the program and everything lowering adds to it live */
    const Plan *plan;
    Graph *graph;
    const PlaceTable *placement; /* the place pass's table the program was lowered from */
    Schedule schedule;
    int nstages;
    StageProgram *stages;
    int dp_axis, tp_axis, pp_axis;
    double est_step_seconds;   /* the analysis's step time estimate, 0 before analyze; the built
                                  program's watchdog timeout is a multiple of it */
    double est_phase_seconds[PRT_NPHASES]; /* ... by phase (analyze.h ANALYZE_PHASES); the built program
                                              prints them beside what it measures */
} Program;

/* The place pass: runs the op rules over the graph.  Reports placement
 * errors no op accepts through diag and returns NULL after reporting. */
PlaceTable *lower_place(Arena *arena, const Plan *plan, Graph *graph);
/* `parc lower --emit=place`: one line per op and axis, stable text. */
void place_dump(const PlaceTable *placement, FILE *out);
/* Every rule placement is one the tensor can have (a split names one of its
 * dims; Partial only for produced values and gradients); PARC_BUG otherwise. */
void place_verify(const PlaceTable *placement);

/* The schedule pass: the plan's pipeline schedule (schedule.c) — every
 * stage's order of forward and backward work items and its in-flight peaks,
 * which reshard cuts the stage programs from and the ledger multiplies saved
 * activations by, proven sound (schedule_verify) whether or not verification
 * is on.  A checked plan always has one (PARC_BUG otherwise). */
Schedule *lower_schedule(Arena *arena, const Plan *plan);

/* The lowering passes after place and schedule, in this order, each over
 * every stage (the rows reshard .. lower of passes.c).  Each is a function
 * over the program: it reads what the passes before it left in the Program
 * (the placement table, each stage's bindings and sequences) and adds to
 * it; no state passes between them outside the IR.  They report user errors
 * through diag and then return NULL (or 1); a broken invariant is an
 * internal error.  Each runs once per program, after the one before it.
 *   lower_reshard   the Program: the schedule's copy, stage buffers and
 *                   bindings, the forward programs with their collectives,
 *                   pipeline messages;
 *   lower_autodiff  the backward programs (ZeRO-2/3 gradient scatters included);
 *   lower_optim     gradient zeroing, gradient sync and the optimizer steps;
 *   lower_tp_overlap the backward's input-gradient collectives over the tensor
 *                   axis started between a linear's input-gradient and
 *                   weight-gradient halves (overlap_tp.c), unless the plan
 *                   says `tp_overlap off;`;
 *   lower_overlap   the data axis's gradient buckets started in the backward
 *                   and waited before the optimizer (overlap.c), unless the
 *                   plan says `grad_overlap off;`;
 *   lower_step_writes with one micro-batch a step, the weight gradients'
 *                   zeros dropped where the backward's first touch writes them
 *                   whole (first_write.c);
 *   lower_finish    the ledger; the program verified. */
Program *lower_reshard(Arena *arena, const PlaceTable *placement, const Schedule *schedule);
int lower_autodiff(Program *program);
int lower_optim(Program *program);
int lower_tp_overlap(Program *program);
int lower_overlap(Program *program);
int lower_step_writes(Program *program);
void lower_finish(Program *program);
/* Checks the program's invariants (every collective's group is a mesh axis,
 * buffers in range, instance modes valid for the sequence, schedule sound).
 * Failure is a compiler bug: PARC_BUG. */
void program_verify(const Program *program);
/* The starts and waits of overlapped collectives (overlap.c; program_verify
 * calls it).  Failure is a compiler bug: PARC_BUG. */
void overlap_verify(const Program *program);
/* The split linear backwards and the input-gradient collectives started
 * between their halves (overlap_tp.c; program_verify calls it). */
void overlap_tp_verify(const Program *program);
/* The passes of a stage's block sequences run layer by layer: every started
 * collective waited once in the pass, nothing touching its buffers meanwhile
 * (overlap_gather.c; overlap_verify calls it). */
void overlap_gather_verify(const StageProgram *sp);
/* The `writes` bits of a sequence's instructions (first_write.c; program_verify
 * runs it on every sequence). */
void first_write_verify(const StageProgram *sp, const Seq *seq, const char *seq_name);
/* first_write.c's pass across the step, for a stage that runs one micro-batch
 * a step (lower_step_writes): zeros of zero_grads.* dropped where the
 * backward's first touch writes the weight gradient whole. */
void first_write_step(StageProgram *sp);
void program_dump(const Program *program, FILE *out);

/* How many times per step a sequence runs on a stage. */
int64_t program_seq_calls_per_step(const Program *program, const StageProgram *sp, SeqKind seq);

/* The pipeline messages of stage sp as instructions of SEQ_RECV_FWD,
 * SEQ_SEND_FWD, SEQ_RECV_BWD and SEQ_SEND_BWD (reshard.c): each sequence that
 * runs on the stage gets its one prt_recv / prt_send of the residual stream
 * (resid_buf, dresid_buf, boundary_elems, chunks and chunk_layers set).
 * Nothing with one stage. */
void reshard_pipeline(Arena *arena, const Program *program, StageProgram *sp);

/* Names of the runtime functions in PRT_OPS order, and their signatures
 * (ir.c, from PRT_OPS).  RT_NONE: no runtime function (an op without a
 * backward). */
typedef enum {
    RT_NONE = -1,
#define X(name, sig) RT_##name,
    PRT_OPS(X)
#undef X
    RT_FN_COUNT
} RtFn;
extern const char *const rt_fn_names[RT_FN_COUNT];
extern const char *const rt_fn_sigs[RT_FN_COUNT];

/* Collectives that overlap computation (overlap.c): a start instruction
 * (prt_allreduce_start, prt_reducescatter_start) begins the collective and
 * returns; the one wait instruction (prt_comm_wait) naming the start's result
 * buffer (instr_async_result) completes it.  Between the two nothing reads or
 * writes the start's buffers (program_verify). */
static inline int instr_is_start(const Instr *ins)
{
    return ins->fn == RT_prt_allreduce_start || ins->fn == RT_prt_reducescatter_start ||
           ins->fn == RT_prt_allgather_start || ins->fn == RT_prt_shift_start;
}
/* Whether argument k of start ins is a buffer nothing may name until its
 * wait: every buffer of a start but a shift's input, which the shift only
 * reads (ring attention computes on the block it passes on meanwhile). */
static inline int instr_start_holds(const Instr *ins, int k)
{
    return ins->args[k].kind == ARG_BUF && !(ins->fn == RT_prt_shift_start && k == 2);
}
static inline int instr_is_wait(const Instr *ins) { return ins->fn == RT_prt_comm_wait; }
/* The argument naming where a start's result lands: what its wait names. */
static inline const Arg *instr_async_result(const Instr *ins) { return &ins->args[1]; }

/* The arguments an instruction of runtime function fn carries (Instr.nargs):
 * its signature's after the context, but for the dtypes word ('t', last) that
 * code generation derives from the pointer arguments' buffers. */
static inline int rt_fn_nargs(int fn)
{
    const char *sig = rt_fn_sigs[fn];
    int n = (int)strlen(sig) - 1;
    return n > 0 && sig[n] == 't' ? n - 1 : n;
}

/* ------------------------------------------------------------ builders (program.c) */

/* A new buffer of stage sp, listed in group `order` (Buffer.order); its index. */
int program_buf_new(Program *prog, StageProgram *sp, int order, const char *name, int klass, int dtype, int64_t elems,
                    int64_t instances);
/* A call of runtime function fn appended to seq, in `phase`; its arguments
 * by program_push_args. */
Instr *program_instr_new(Arena *arena, Seq *seq, Phase phase, RtFn fn);
void program_push_args(Instr *ins, int n, const Arg *args);
/* A report-only record of a collective a runtime op performs inside itself. */
void program_record(Arena *arena, Seq *seq, Phase phase, CollKind coll, int axis, int64_t elems, int op, int tensor,
                    const char *why);
/* The dtype of the plan's activations. */
int program_act_dtype(const Plan *plan);
/* Local elements / sizes of tensor t under placement place[] (scalars: 1). */
int64_t program_local_numel(const Plan *plan, const Tensor *t, const Placement *place);
/* The axis ZeRO shards parameter t over: the plan's ZeRO axis less its parts
 * that split t by a dim of its own (an expert's weights over ep under `zero
 * N over dp ep`: their expert-data-parallel ranks, dp), as the mesh or
 * derived axis spanning what is left; -1 without ZeRO, or when nothing is
 * left or no axis spans it (t is then held whole). */
int program_param_zero_axis(const Plan *plan, const Tensor *t);
void program_local_sizes(const Plan *plan, const Tensor *t, const Placement *place, int64_t *sizes);

#endif
