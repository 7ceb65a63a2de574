/*
 * lower.h — what the lowering passes share: the Lowerer, one Binding per
 * tensor, values and gradient destinations, and the instruction builders.
 *
 * Lowering is a sequence of passes over one Lowerer, one file each:
 *   place.c     every op's rule per mesh axis -> the placement each tensor is
 *               produced in, its gradient's placement, what backward reads;
 *   reshard.c   the one resharding table and the only emitter of
 *               communication (collectives and pipeline messages);
 *   autodiff.c  the backward program, op by op in reverse, and gradients moved
 *               back to their placements through reshard.c;
 *   optim.c     parameters, gradients and optimizer state per ZeRO stage (a
 *               table of placements), gradient sync and the optimizer step;
 *   program.c   buffers and instructions, the verifier and the dump;
 *   lower.c     the driver: the passes reshard, autodiff and optim, each over
 *               every pipeline stage, with the stage's buffers bound.
 * The ops themselves (rules, shapes, FLOPs, scratch, forward and backward
 * calls) are rows of ops.c's table.  Nothing outside these files includes
 * this header.
 */
#ifndef PARC_LOWER_H
#define PARC_LOWER_H

#include "ops.h"

#include <string.h>

/* Where a tensor (or its gradient) lives on the current stage: buffer `buf`
 * (-1: none), instance chosen per `inst` (InstMode) and `k`. */
typedef struct BufRef {
    int buf, inst, k;
} BufRef;

/* Everything lowering knows about one tensor.  The placements and `needed`
 * hold for the whole program; the buffers are rebound per stage. */
typedef struct Binding {
    Placement produced[PARC_MAX_AXES]; /* placement the tensor is produced in */
    Placement grad[PARC_MAX_AXES];     /* placement of its gradient buffer */
    int needed;                        /* the backward reads it */
    BufRef value, gradient;
    int full_grad;                     /* ZeRO-2/3: per-micro-batch whole gradient of a parameter */
    int tied_copy;                     /* a parameter of another stage held for a tied head (optim_bind_tied) */
    int master, mom1, mom2;            /* optimizer state buffers of a parameter */
} Binding;

/* A stage's bindings and loss and data scratch buffers, kept in the IR
 * (StageProgram.bindings) from one lowering pass to the next. */
struct StageBindings {
    Binding *bind; /* [ntensors] */
    int loss_buf, scratch_idx;
    /* the embedding's and the head's parameters as their forward gathered them
     * (reshard_window_save), for their backward: the weights do not change
     * within a step, and nothing else writes those copies */
    struct Val *ends_val;
    unsigned char *ends_has;
    /* [nops]: the buffer of an op's input kept as its forward exchanged it
     * (Lowerer.kept_in), made by the first exchange into it; -1 before */
    int *kept_buf;
};

/* The place pass's table (ir.h's PlaceTable). */
struct PlaceTable {
    const Plan *plan;
    Graph *g;
    int naxes;
    OpPlace *rule;  /* [nops * naxes] */
    Binding *bind;  /* [ntensors]: placements and `needed`; no buffers */
    int *bias_fold; /* [nops], ops_fold_bias */
    unsigned char *kept_in; /* [nops], mark_needed: bit i, input i is kept exchanged */
};

/* One lowering pass's working context over the program (lower.c,
 * lower_context): made afresh by each pass from the IR, never kept after it.
 * The current stage's bindings are its StageBindings'. */
typedef struct Lowerer {
    Arena *arena;
    const Plan *plan;
    Graph *g;
    Program *prog;        /* NULL in the place pass */
    int naxes;
    OpPlace *rule;        /* [nops * naxes], the place table's */
    Binding *bind;        /* [ntensors]: place's, then the current stage's */
    int errors;           /* user errors this pass reported */
    StageProgram *sp;     /* the stage being lowered */
    int loss_buf, scratch_idx;
    int replaying;        /* emitting a forward reshard again inside backward */
    /* Use windows (reshard_window_open/close): bit r set while the window of
     * region r is open; a parameter of it resharded for one use serves the
     * later uses (backward replays too where window_backward has bit r). */
    unsigned window_regions, window_backward;
    struct Val *window_val;    /* [ntensors] */
    unsigned char *window_has; /* [ntensors] */
    /* One forward pass (autodiff_forward): an activation resharded for one
     * op serves the later ops of the pass that ask for the same placement
     * (a MoE layer's router and dispatch both gather the norm's output under
     * sequence parallelism); the latest copy of each tensor. */
    struct Val *copy_val;      /* [ntensors] */
    unsigned char *copy_has;   /* [ntensors], NULL outside a forward pass */
    int buf_order;        /* Buffer.order of the buffers created now (lower.c) */
    int rule_seen[OP_COUNT][DIM_COUNT][PARC_MAX_AXES];
    /* [nops] (ops_fold_bias): for a linear, the bias op folded into its call;
     * for that bias op, the linear; -1 otherwise */
    int *bias_fold;
    /* [nops] (place.c, mark_needed): bit i set when the backward reads input
     * i of the op as the forward's exchanged copy (an all-to-all of routed
     * rows, expert parallelism), kept per in-flight micro-batch, rather than
     * exchanging the saved value again; the producer's value is then not
     * saved for it */
    unsigned char *kept_in;
    int *kept_buf; /* the current stage's StageBindings.kept_buf */
} Lowerer;

static inline OpPlace *lower_rule(const Lowerer *lw, int op, int a)
{
    return &lw->rule[(size_t)op * (size_t)lw->naxes + (size_t)a];
}

static const Placement PLACE_REP = {PLACE_R, 0};
static const Placement PLACE_PART = {PLACE_P, 0};

static inline int place_eq(Placement a, Placement b)
{
    return a.kind == b.kind && (a.kind != PLACE_S || a.dim == b.dim);
}
static inline Placement place_split(Dim d)
{
    Placement p = {PLACE_S, (uint8_t)d};
    return p;
}
/* Is the activation placement a split of a "row" dim (batch, seq, or the
 * routed rows of a mixture of experts, which are tokens)? */
static inline int place_is_row_split(Placement p)
{
    return p.kind == PLACE_S && (p.dim == DIM_BATCH || p.dim == DIM_SEQ || p.dim == DIM_ROUTED);
}
/* The placement a parameter is consumed in: its home, with a ZeRO-3 flat
 * shard gathered first. */
static inline Placement place_param_use(const Tensor *w, int a)
{
    Placement p = w->home[a];
    return (p.kind == PLACE_S && p.dim == DIM_FLAT) ? PLACE_REP : p;
}

/* ------------------------------------------------------------ place.c */

/* Runs every op's rule on every axis and derives each tensor's produced and
 * gradient placements and whether backward reads it.  Reports placements no
 * rule accepts (lw->errors counts them). */
void place_plan(Lowerer *lw);
/* Reports that op cannot take `dim` split on axis a; once per (op kind, dim,
 * axis).  fmt takes the op's name, the dim's name and the axis's name. */
void place_rule_error(Lowerer *lw, const Op *op, const char *fmt, const char *hint, int a, int dim);
/* The placement rules of op_table's rows (r->param[] and r->dparam[] arrive
 * set to the parameters' use placements). */
void place_rule_data(Lowerer *lw, const Op *op, int a, OpPlace *r);
void place_rule_embed(Lowerer *lw, const Op *op, int a, OpPlace *r);
void place_rule_elementwise(Lowerer *lw, const Op *op, int a, OpPlace *r);
void place_rule_norm(Lowerer *lw, const Op *op, int a, OpPlace *r);
void place_rule_linear(Lowerer *lw, const Op *op, int a, OpPlace *r);
void place_rule_attention(Lowerer *lw, const Op *op, int a, OpPlace *r);
/* The context axis op's ring attention passes K/V around (`cp_comm ring` and
 * op an attention whose output is split on seq there), else -1. */
int place_ring_axis(const Lowerer *lw, const Op *op);
/* Whether op is attention in the all-gather form of the load-balanced split
 * (`cp_split balanced` without ring attention): its query rows two halves. */
int place_balanced_gather(const Lowerer *lw, const Op *op);
void place_rule_dropout(Lowerer *lw, const Op *op, int a, OpPlace *r);
void place_rule_xent(Lowerer *lw, const Op *op, int a, OpPlace *r);
void place_rule_moe(Lowerer *lw, const Op *op, int a, OpPlace *r);

/* ------------------------------------------------------------ program.c */

/* Instruction emission into one sequence of the current stage. */
typedef struct Emit {
    Lowerer *lw;
    Seq *seq;
    Phase phase;
} Emit;

#define EMIT(e, fn, ...)                                                                  \
    ({                                                                                    \
        Instr *ins_ = program_instr_new((e)->lw->arena, (e)->seq, (e)->phase, (fn));                                          \
        const Arg args_[] = {__VA_ARGS__};                                                \
        program_push_args(ins_, (int)(sizeof args_ / sizeof args_[0]), args_);               \
        ins_;                                                                             \
    })

static inline Arg arg_buf(int buf, int inst, int k)
{
    Arg a = {ARG_BUF, (uint8_t)inst, -1, buf, k, 0, 0};
    return a;
}
static inline Arg arg_buf_off(int buf, int inst, int k, int axis, int64_t per_coord)
{
    Arg a = {ARG_BUF, (uint8_t)inst, (int8_t)axis, buf, k, per_coord, 0};
    return a;
}
static inline Arg arg_null(void)
{
    Arg a = {ARG_NULL, 0, -1, -1, 0, 0, 0};
    return a;
}
static inline Arg arg_int(int64_t v)
{
    Arg a = {ARG_INT, 0, -1, -1, 0, v, 0};
    return a;
}
static inline Arg arg_f64(double v)
{
    Arg a = {ARG_F64, 0, -1, -1, 0, 0, v};
    return a;
}
static inline Arg arg_coord(int axis, int64_t times)
{
    if (axis < 0) return arg_int(0);
    Arg a = {ARG_COORD_TIMES, 0, (int8_t)axis, -1, 0, times, 0};
    return a;
}
/* coord(axis) * times + plus (the load-balanced split's second half: its
 * first position, (2 cp - 1 - coord) x half) */
static inline Arg arg_coord_plus(int axis, int64_t times, int32_t plus)
{
    if (axis < 0) return arg_int(plus);
    Arg a = {ARG_COORD_TIMES, 0, (int8_t)axis, -1, plus, times, 0};
    return a;
}
static inline Arg arg_kind(ArgKind kind)
{
    Arg a = {(uint8_t)kind, 0, -1, -1, 0, 0, 0};
    return a;
}
/* The global layer of an op's call: its layer `sub` in the block (Op.sub). */
static inline Arg arg_layer(int sub)
{
    Arg a = {ARG_LAYER, 0, -1, -1, sub, 0, 0};
    return a;
}
static inline Arg arg_ref(BufRef r)
{
    PARC_ASSERT(r.buf >= 0);
    return arg_buf(r.buf, r.inst, r.k);
}
/* Buffer argument of a tensor's value / gradient on the current stage. */
static inline Arg arg_value(const Lowerer *lw, int t) { return arg_ref(lw->bind[t].value); }
static inline Arg arg_grad(const Lowerer *lw, int t) { return arg_ref(lw->bind[t].gradient); }


/* ------------------------------------------------------------ reshard.c */

/* A value: a buffer argument plus the placement and tensor it holds. */
typedef struct Val {
    Arg arg;
    int tensor;
    Placement place[PARC_MAX_AXES];
} Val;

/* Moves value v to placement `to`, axis by axis, each step the one collective
 * the table names for it.  Intermediate values get fresh buffers; the last
 * step writes into *dst when dst != NULL.  When dst shares v's buffer, an
 * all-reduce runs in place; a gather first copies its source out to a
 * `.shard` buffer and a scatter writes a fresh buffer copied into dst (a
 * collective cannot read a region of the buffer it writes).  `why` names the
 * rule; op is the graph op that causes it (-1 none). */
Val reshard_to(Emit *e, Val v, const Placement *to, int op, const char *why, int is_grad, const Arg *dst);
/* The value op reads for input i (or parameter i): the tensor as produced, or
 * a resharded copy in the placement the op's rule asks for. */
Val reshard_input(Emit *e, const Op *op, int i, int is_param);
/* Use windows of resharded parameters (ZeRO-3's gathered weights): between
 * open and close, the copy of a parameter one use gathered serves the later
 * uses of the same parameter of those regions, instead of gathering it again
 * (backward replays only when serves_backward).  A window may span sequences
 * only where nothing between them writes the copy: the embedding's and the
 * head's forward on one stage (a tied table gathered once per forward; the
 * weights change only after the step), or one layer's recompute forward and
 * its backward (FSDP gathers once per layer in backward). */
void reshard_window_open(Lowerer *lw, unsigned regions, int serves_backward);
void reshard_window_close(Lowerer *lw, unsigned regions);
/* The copies the open window of `regions` holds, kept (arena) for a later
 * window; and that window opened again serving the backward, with them. */
void reshard_window_save(Lowerer *lw, unsigned regions, struct Val **val, unsigned char **has);
void reshard_window_restore(Lowerer *lw, unsigned regions, const struct Val *val, const unsigned char *has);
#define REGION_BIT(r) (1u << (r))
/* The rule behind moving tensor t for consumer (forward) or moving its
 * gradient from placement `to` back (backward), one clause per axis. */
const char *reshard_why(Lowerer *lw, const Op *consumer, int t, const Placement *to, int backward);
/* The embedding group's all-reduce of a tied table's gradient (n elements of
 * grad, in the optimizer's placement) between the first and the last stage. */
void reshard_embedding_group(Emit *e, int t, Arg grad, int64_t n);
/* A fresh buffer for tensor t under placement place: "<tensor>.<what>". */
int reshard_temp_buf(Lowerer *lw, const char *what, int t, const Placement *place, int klass);
/* The stage's buffer of the offsets [experts / size + 1] of the rows that
 * reached this rank's experts over expert-parallel axis `axis` in the last
 * exchange to them: an expert GEMM under expert parallelism reads it, of its
 * own layer and micro-batch, because the exchange into its rows (the up
 * GEMM's input in forward and again in backward, the down GEMM's output
 * gradient) runs before it and nothing between them exchanges. */
int reshard_ep_offsets(Lowerer *lw, int axis);
/* The stage's workspace buffer `name` of n elements of dtype, made on first
 * use and shared by every later use of the name (expert parallelism's
 * routing bookkeeping; ring attention's K/V blocks and the load-balanced
 * split's ordered qkv, ops_emit.c). */
int reshard_stage_buf(Lowerer *lw, const char *name, int dtype, int64_t n);
/* Ring attention: reshard_ring_shift emits one step of the ring over context
 * axis `axis` (the resharding of a chunk's block from one rank of the axis to
 * the next: shift_start of n elements of in to out, a started collective with
 * its rule; grad: the K/V gradient's), and reshard_ring_wait its comm_wait. */
void reshard_ring_shift(Emit *e, const Op *op, int axis, Arg out, Arg in, int64_t n, int grad);
void reshard_ring_wait(Emit *e, const Op *op, int axis, Arg out);

/* ------------------------------------------------------------ autodiff.c */

/* Gradient destination of an op's input or parameter: the tensor's gradient
 * buffer directly when the op's gradient placement matches it, else a fresh
 * zeroed temp resharded and accumulated after the op's backward. */
typedef struct GradDst {
    Arg arg;
    int tmp; /* temp buffer, -1 when direct */
    int tensor;
    Placement place[PARC_MAX_AXES];
} GradDst;

/* The forward of a region's ops (phase FORWARD, or RECOMPUTE inside backward). */
void autodiff_forward(Lowerer *lw, Seq *seq, Region r, Phase phase);
/* Instruction idx of e's sequence is an entry of op: its op, entry, shape
 * and FLOPs (every op's entry carries them; an op lowered to several calls,
 * ring attention's steps, marks each); returns idx. */
int autodiff_mark_entry(struct Emit *e, int idx, const Op *op, const OpShape *s, OpEntry entry);
/* The backward of a region: recompute (full policy), zeroed gradients (except
 * `incoming`, which the next region wrote), each op's backward in reverse, and
 * the ZeRO-2/3 per-micro-batch scatter of parameter gradients. */
void autodiff_backward(Lowerer *lw, Seq *seq, Region r, int incoming);
/* A backward sequence's zeroed activation gradients whose first writer can
 * write them: the writer's `writes` bit set (an acc made a copy), the zero
 * dropped (first_write.c). */
void first_write_seq(Seq *seq);
/* 1 when runtime function fn has a first-writer rule: an argument it can
 * write instead of adding into (ops_check asks it of every backward entry). */
int first_write_has_rule(int fn);

/* ------------------------------------------------------------ optim.c */

/* Weights, gradients, fp32 master and optimizer moments of a region's
 * parameters on the current stage, shaped by the ZeRO stage's row. */
void optim_bind_params(Lowerer *lw, Region r, int instances, int first_layer);
/* Zeroing, gradient sync and optimizer step of a region's parameters. */
void optim_emit(Lowerer *lw, Seq *zero, Seq *sync, Seq *optim, Region r);
/* The reduction of the gradients' sum of squares that optim_emit accumulated
 * (an all-reduce per summed axis, from Partial to whole), then the norm and,
 * with `clip`, the clip factor, at the end of SEQ_GRAD_NORM_ONCE. */
void optim_emit_grad_norm(Lowerer *lw);
/* The axis of a gradient sync's last step, all its parts at once: the ZeRO
 * axis, else the data group (layout.data_group). */
int optim_sync_axis(const Plan *plan);
/* ZeRO-2/3 after a micro-batch's backward: each parameter's whole gradient
 * reduce-scattered into this rank's shard. */
void optim_emit_scatter(Emit *e, Region r);
/* A head tied to an embedding on another pipeline stage (Megatron's rule): the
 * head's stage holds a copy of the table — weights, gradient, master and
 * moments, initialised from the same name, so equal — bound as region
 * EMBED with tied_copy set; returns how many it bound. */
int optim_bind_tied(Lowerer *lw);
/* ------------------------------------------------------------ overlap.c */

/* The current stage's per-layer gradient buckets as started collectives with
 * their waits in SEQ_GRAD_WAIT_BLOCK (overlap.c's banner); after the stage's
 * optim_emit calls (lower_overlap, the pass table's `overlap` row).  Nothing unless the stage syncs in the backward over a
 * data axis of size > 1. */
void overlap_buckets(Lowerer *lw);
/* ZeRO-2/3 over a data axis of size > 1: each reduce-scatter of a whole
 * gradient in the current stage's SEQ_BLOCK_BWD becomes a start placed right
 * after the last instruction naming its buffers, with its wait at the end of
 * the sequence (before the next layer's backward writes the gradient again),
 * followed by what reads its result (overlap.c's banner). */
void overlap_scatters(Lowerer *lw);
/* ZeRO-3 over a data axis of size > 1, after overlap_scatters: each layer's
 * weight gathers in SEQ_BLOCK_FWD / SEQ_BLOCK_BWD started a layer ahead into
 * a second instance and waited before their first use (overlap_gather.c's
 * banner). */
void overlap_gathers(Lowerer *lw);

/* ------------------------------------------------------------ overlap_tp.c */

/* The current stage's backward sequences: each blocking collective that sums
 * a linear's input gradient over an axis other than ZeRO's data axis started
 * between the linear's input-gradient and weight-gradient halves, its wait
 * after the latter (overlap_tp.c's banner); lower_tp_overlap, the pass
 * table's `tp_overlap` row, before `overlap`. */
void overlap_tp(Lowerer *lw);

/* Is parameter t held on two stages, the embedding's and the tied head's? */
int optim_tied_across_stages(const Lowerer *lw, int t);
/* Where a parameter's per-micro-batch whole gradient (full_grad) starts and
 * ends on this stage: the backward runs head, blocks, embedding, so a table the
 * head shares with the embedding is zeroed before the head's backward and
 * scattered after the embedding's. */
int optim_full_grad_zeroed_in(const Lowerer *lw, int t, Region r);
int optim_full_grad_scattered_in(const Lowerer *lw, int t, Region r);

#endif
