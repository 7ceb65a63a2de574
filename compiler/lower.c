/*
 * lower.c — passes 4–7: placement, resharding, autodiff, gradient sync,
 * optimizer and schedule, into a per-stage Program.
 *
 * Takes a Graph whose tensors carry home placements.  For every op and every
 * mesh axis the op's rule (op_rule) says which placement it needs of each
 * input and which placement it produces; wherever a producer's placement
 * differs from what a consumer needs, the collective comes from the one table
 * (reshard_collective).  The backward program is derived op by op in reverse:
 * each op's rule also says the placement of the gradients it produces (a
 * contraction over a split dim produces Partial gradients), and the same table
 * moves each gradient to the placement its producer's gradient must have.  The
 * Megatron f/g pair, sequence-parallel gathers and scatters, DDP all-reduce,
 * ZeRO-1/2 reduce-scatter + all-gather and ZeRO-3 parameter gathers all come
 * out of that one mechanism; nothing here is written per strategy.
 *
 * Guarantees on success: every instruction's buffers exist on its stage; every
 * collective runs over one mesh axis; verify_program() holds.
 */
#include "ir.h"
#include "ledger.h"

#include <string.h>

const char *const coll_names[COLL_COUNT] = {
#define X(name, str) str,
    IR_COLLECTIVES(X)
#undef X
};

const char *const phase_names[PHASE_COUNT] = {"forward", "backward", "recompute", "grad-sync", "optimizer",
                                              "pipeline"};
const char *const seq_names[SEQ_COUNT] = {
    "embed.fwd", "block.fwd", "head.fwd", "head.bwd", "block.bwd", "embed.bwd", "zero_grads.block",
    "zero_grads.once", "grad_sync.block", "grad_sync.once", "optim.block", "optim.once"};

double coll_bus_factor(CollKind kind, int n)
{
    if (n <= 1) return 0;
    switch (kind) {
    case COLL_ALLREDUCE:
    case COLL_ALLREDUCE_MAX: return 2.0 * (n - 1) / n;
    case COLL_ALLGATHER:
    case COLL_REDUCESCATTER:
    case COLL_ALLTOALL: return (double)(n - 1) / n;
    case COLL_SEND:
    case COLL_RECV: return 1.0;
    default: return 0;
    }
}

CollKind reshard_collective(Placement from, Placement to)
{
    if (from.kind == to.kind && (from.kind != PLACE_S || from.dim == to.dim)) return COLL_NONE;
    if (from.kind == PLACE_P) return to.kind == PLACE_R ? COLL_ALLREDUCE : COLL_REDUCESCATTER;
    if (from.kind == PLACE_S) return to.kind == PLACE_R ? COLL_ALLGATHER : COLL_ALLTOALL;
    if (from.kind == PLACE_R && to.kind == PLACE_S) return COLL_SLICE;
    PARC_BUG("no collective turns %d into Partial", from.kind);
}

/* ------------------------------------------------------------ op rules */

/* Per op and axis: what the op needs of each input and parameter, what it
 * produces, and which gradient placements its backward produces. */
typedef struct OpPlace {
    Placement in[3], param[2], out;
    Placement din[3], dparam[2];
} OpPlace;

typedef struct Lowerer {
    Arena *arena;
    const Plan *plan;
    Graph *g;
    Program *prog;
    int naxes;
    OpPlace *rule;        /* [nops * naxes] */
    Placement *produced;  /* [ntensors * naxes]: placement each tensor is produced in */
    Placement *gradp;     /* [ntensors * naxes]: placement of each tensor's gradient buffer */
    int *needed;          /* [ntensors]: backward reads it */
    int errors;
    /* per stage */
    StageProgram *sp;
    int *tbuf;            /* [ntensors] buffer holding the tensor on this stage, -1 */
    int *gbuf;            /* [ntensors] buffer holding its gradient, -1 */
    int *tinst, *tk;      /* instance mode and k of tbuf per tensor */
    int *ginst, *gk;
    int *ofull;           /* ZeRO-2/3 per-micro-batch full gradient temp per param */
    int *master, *mom1, *mom2;
    int loss_buf, scratch_idx;
    Region region;
    int replaying;        /* emitting a forward reshard again inside backward */
    int rule_seen[OP_COUNT][DIM_COUNT][PARC_MAX_AXES];
} Lowerer;

#define RULE(lw, op, a) (&(lw)->rule[(size_t)(op) * (size_t)(lw)->naxes + (size_t)(a)])
#define PROD(lw, t, a) ((lw)->produced[(size_t)(t) * (size_t)(lw)->naxes + (size_t)(a)])
#define GRADP(lw, t, a) ((lw)->gradp[(size_t)(t) * (size_t)(lw)->naxes + (size_t)(a)])

static const Placement REP = {PLACE_R, 0};
static const Placement PART = {PLACE_P, 0};

static int place_eq(Placement a, Placement b)
{
    return a.kind == b.kind && (a.kind != PLACE_S || a.dim == b.dim);
}

static Placement split(Dim d)
{
    Placement p = {PLACE_S, (uint8_t)d};
    return p;
}

static int tensor_has_dim(const Tensor *t, Dim d)
{
    for (int i = 0; i < t->ndim; i++)
        if (t->dims[i] == d) return 1;
    return 0;
}

/* The placement a parameter is consumed in: its home, with a ZeRO-3 flat shard
 * gathered first. */
static Placement param_use(const Tensor *w, int a)
{
    Placement p = w->home[a];
    return (p.kind == PLACE_S && p.dim == DIM_FLAT) ? REP : p;
}

/* Placement of a gradient given the placement of its value: Partial values
 * get replicated (complete) gradients. */
static Placement grad_of(Placement p) { return p.kind == PLACE_P ? REP : p; }

/* Is the activation placement a split of a "row" dim (batch or seq)? */
static int is_row_split(Placement p) { return p.kind == PLACE_S && (p.dim == DIM_BATCH || p.dim == DIM_SEQ); }

static const char *axis_name(const Lowerer *lw, int a) { return lw->plan->mesh.axes[a].name; }

static void rule_error(Lowerer *lw, const Op *op, const char *fmt, const char *hint, int a, int dim)
{
    /* one report per (op kind, dim, axis): every layer repeats the same op */
    if (lw->rule_seen[op->kind][dim][a]++) {
        lw->errors++;
        return;
    }
    char msg[512];
    snprintf(msg, sizeof msg, fmt, op->name, dim_names[dim], axis_name(lw, a));
    SrcLoc loc = lw->plan->layout.dim_axis_loc[dim].file ? lw->plan->layout.dim_axis_loc[dim] : op->loc;
    if (dim == DIM_SEQ && lw->plan->layout.sp_axis == a && lw->plan->layout.sp_loc.file)
        loc = lw->plan->layout.sp_loc;
    diag_error(loc, hint, "%s", msg);
    lw->errors++;
}

static void op_rule(Lowerer *lw, const Op *op, int a)
{
    const Graph *g = lw->g;
    OpPlace *r = RULE(lw, op->id, a);
    const Tensor *out = op->out >= 0 ? &g->tensors[op->out] : NULL;
    Placement home = out ? out->home[a] : REP;
    for (int i = 0; i < op->nparam; i++) {
        r->param[i] = param_use(&g->tensors[op->param[i]], a);
        r->dparam[i] = r->param[i];
    }
    switch (op->kind) {
    case OP_DATA:
        r->out = home;
        if (home.kind == PLACE_S && home.dim == DIM_SEQ)
            rule_error(lw, op, "%s: the data loader cannot split %s on `%s`", NULL, a, DIM_SEQ);
        break;
    case OP_EMBED: {
        Placement w = r->param[0];
        Placement tok = g->tensors[op->in[0]].home[a];
        if (w.kind == PLACE_S) {
            if (tok.kind == PLACE_S)
                rule_error(lw, op, "%s: the table and the tokens are both split on `%s` (%s)",
                           "map batch and vocab to different axes", a, tok.dim);
            r->in[0] = REP;
            r->din[0] = REP;
            r->out = w.dim == DIM_VOCAB ? PART : w;
        } else {
            r->in[0] = tok;
            r->din[0] = tok;
            r->out = tok;
        }
        /* the table's gradient: rows this rank looked up (vocab split) or
         * partial sums over this rank's samples */
        r->dparam[0] = w.kind == PLACE_S ? w : (tok.kind == PLACE_S ? PART : REP);
        break;
    }
    case OP_POS:
    case OP_BIAS:
    case OP_GELU:
    case OP_RELU:
    case OP_SWIGLU:
    case OP_ADD:
    case OP_COPY:
        for (int i = 0; i < op->nin; i++) r->in[i] = r->din[i] = home;
        r->out = home;
        for (int i = 0; i < op->nparam; i++) {
            const Tensor *p = &g->tensors[op->param[i]];
            if (r->param[i].kind == PLACE_S) r->dparam[i] = r->param[i];
            else if (is_row_split(home) || (home.kind == PLACE_S && !tensor_has_dim(p, (Dim)home.dim)))
                r->dparam[i] = PART;
            else r->dparam[i] = REP;
        }
        break;
    case OP_LAYERNORM:
    case OP_RMSNORM:
        if (home.kind == PLACE_S && home.dim == DIM_HIDDEN)
            rule_error(lw, op, "%s normalises over %s, which is split on `%s`",
                       "keep hidden whole: split heads and ffn instead (Megatron tensor parallelism)", a, DIM_HIDDEN);
        r->in[0] = r->din[0] = home;
        r->out = home;
        for (int i = 0; i < op->nparam; i++) r->dparam[i] = is_row_split(home) ? PART : REP;
        break;
    case OP_LINEAR:
    case OP_LINEAR_T: {
        const Tensor *x = &g->tensors[op->in[0]];
        Placement wp = r->param[0];
        if (wp.kind == PLACE_S && tensor_has_dim(x, (Dim)wp.dim)) {
            /* the weight is split on a contracted dim: row parallel */
            r->in[0] = wp;
            r->din[0] = wp;
            r->out = PART;
            r->dparam[0] = wp;
        } else if (wp.kind == PLACE_S) {
            /* split on an output dim: column parallel, needs the whole input */
            if (is_row_split(home) || (home.kind == PLACE_S && home.dim != wp.dim))
                rule_error(lw, op, "%s: its output would be split twice on `%s` (%s and the weight's dim)", NULL, a,
                           home.dim);
            r->in[0] = REP;
            r->din[0] = PART;
            r->out = wp;
            r->dparam[0] = wp;
        } else {
            Placement want = is_row_split(home) ? home : REP;
            r->in[0] = want;
            r->din[0] = want;
            r->out = want;
            r->dparam[0] = is_row_split(want) ? PART : REP;
        }
        break;
    }
    case OP_ATTENTION:
        if (home.kind == PLACE_S && home.dim == DIM_SEQ)
            rule_error(lw, op, "%s cannot split %s on `%s` without context parallelism",
                       "split heads on this axis, or use `sequence_parallel over AXIS` with `heads -> AXIS`", a,
                       DIM_SEQ);
        if (home.kind == PLACE_S && home.dim == DIM_HEAD_DIM)
            rule_error(lw, op, "%s cannot split %s on `%s`", "split heads instead", a, DIM_HEAD_DIM);
        r->in[0] = r->din[0] = home;
        r->out = home;
        break;
    case OP_XENT: {
        Placement lp = g->tensors[op->in[0]].home[a];
        r->in[0] = r->din[0] = lp;
        /* the targets follow the logits' rows (a local slice when they differ) */
        r->in[1] = r->din[1] = (lp.kind == PLACE_S && lp.dim == DIM_VOCAB) ? REP : lp;
        r->out = is_row_split(lp) ? PART : REP;
        break;
    }
    default: PARC_BUG("no placement rule for op kind %d", (int)op->kind);
    }
}

/* Which tensors the backward reads (before recompute policy). */
static void mark_needed(Lowerer *lw)
{
    const Graph *g = lw->g;
    RecomputeKind rc = lw->plan->layout.recompute;
    for (int i = 0; i < g->nops; i++) {
        const Op *op = &g->ops[i];
        switch (op->kind) {
        case OP_LINEAR:
        case OP_LINEAR_T:
        case OP_GELU:
        case OP_RELU:
        case OP_SWIGLU:
        case OP_LAYERNORM:
        case OP_RMSNORM:
        case OP_EMBED:
            lw->needed[op->in[0]] = 1;
            for (int k = 0; k < op->naux; k++) lw->needed[op->aux[k]] = 1;
            break;
        case OP_ATTENTION:
            lw->needed[op->in[0]] = 1;
            if (rc == RECOMPUTE_NONE) lw->needed[op->aux[0]] = 1;
            break;
        case OP_XENT:
            lw->needed[op->in[0]] = lw->needed[op->in[1]] = 1;
            lw->needed[op->aux[0]] = 1;
            break;
        default: break;
        }
    }
}

/* ------------------------------------------------------------ buffers */

static int64_t local_numel(const Lowerer *lw, const Tensor *t, const Placement *place)
{
    if (t->kind == TENSOR_SCALAR) return 1;
    return tensor_local_numel(lw->plan, t, place);
}

static void local_sizes(const Lowerer *lw, const Tensor *t, const Placement *place, int64_t *sizes)
{
    memcpy(sizes, t->sizes, sizeof(int64_t) * IR_MAX_TDIMS);
    for (int a = 0; a < lw->naxes; a++) {
        if (place[a].kind != PLACE_S || place[a].dim == DIM_FLAT) continue;
        for (int d = 0; d < t->ndim; d++)
            if (t->dims[d] == place[a].dim) {
                sizes[d] /= lw->plan->mesh.axes[a].size;
                break;
            }
    }
}

static int act_dtype(const Lowerer *lw)
{
    switch (lw->plan->train.precision) {
    case PREC_BF16: return PRT_BF16;
    case PREC_FP16: return PRT_F16;
    default: return PRT_F32;
    }
}

static int buf_new(Lowerer *lw, const char *name, int klass, int dtype, int64_t elems, int64_t instances, int tensor)
{
    StageProgram *sp = lw->sp;
    Buffer b;
    memset(&b, 0, sizeof b);
    b.id = sp->nbufs;
    b.name = arena_strdup(lw->arena, name);
    b.klass = klass;
    b.dtype = dtype;
    b.elems = elems;
    b.instances = instances;
    b.tensor = tensor;
    b.first_layer = -1;
    b.zero_axis = -1;
    b.copy_of = -1;
    for (int i = 0; i < 4; i++) b.split_axis[i] = -1;
    ARR_PUSH(lw->arena, sp->bufs, sp->nbufs, sp->bufs_cap, b);
    return b.id;
}

/* ------------------------------------------------------------ instructions */

typedef struct Emit {
    Lowerer *lw;
    Seq *seq;
    Phase phase;
} Emit;

static Instr *instr_new(Emit *e, RtFn fn)
{
    Instr ins;
    memset(&ins, 0, sizeof ins);
    ins.fn = (int)fn;
    ins.coll = COLL_NONE;
    ins.axis = -1;
    ins.op = -1;
    ins.tensor = -1;
    ins.phase = e->phase;
    ARR_PUSH(e->lw->arena, e->seq->ins, e->seq->n, e->seq->cap, ins);
    return &e->seq->ins[e->seq->n - 1];
}

static Arg a_buf(int buf, int inst, int k)
{
    Arg a = {ARG_BUF, (uint8_t)inst, -1, buf, k, 0, 0};
    return a;
}
static Arg a_buf_off(int buf, int inst, int k, int axis, int64_t per_coord)
{
    Arg a = {ARG_BUF, (uint8_t)inst, (int8_t)axis, buf, k, per_coord, 0};
    return a;
}
static Arg a_null(void)
{
    Arg a = {ARG_NULL, 0, -1, -1, 0, 0, 0};
    return a;
}
static Arg a_int(int64_t v)
{
    Arg a = {ARG_INT, 0, -1, -1, 0, v, 0};
    return a;
}
static Arg a_f64(double v)
{
    Arg a = {ARG_F64, 0, -1, -1, 0, 0, v};
    return a;
}
static Arg a_coord(int axis, int64_t times)
{
    if (axis < 0) return a_int(0);
    Arg a = {ARG_COORD_TIMES, 0, (int8_t)axis, -1, 0, times, 0};
    return a;
}
static Arg a_kind(ArgKind kind)
{
    Arg a = {(uint8_t)kind, 0, -1, -1, 0, 0, 0};
    return a;
}

static void push_args(Instr *ins, int n, const Arg *args)
{
    PARC_ASSERT(n <= IR_MAX_ARGS);
    ins->nargs = n;
    memcpy(ins->args, args, sizeof(Arg) * (size_t)n);
}
#define EMIT(e, fn, ...)                                                                  \
    ({                                                                                    \
        Instr *ins_ = instr_new((e), (fn));                                               \
        const Arg args_[] = {__VA_ARGS__};                                                \
        push_args(ins_, (int)(sizeof args_ / sizeof args_[0]), args_);                    \
        ins_;                                                                             \
    })

/* Buffer argument of a tensor's value / gradient on the current stage. */
static Arg t_arg(Lowerer *lw, int t)
{
    PARC_ASSERT(lw->tbuf[t] >= 0);
    return a_buf(lw->tbuf[t], lw->tinst[t], lw->tk[t]);
}
static Arg g_arg(Lowerer *lw, int t)
{
    PARC_ASSERT(lw->gbuf[t] >= 0);
    return a_buf(lw->gbuf[t], lw->ginst[t], lw->gk[t]);
}

/* A value: a buffer argument plus the placement and tensor it holds. */
typedef struct Val {
    Arg arg;
    int tensor;
    Placement place[PARC_MAX_AXES];
} Val;

static int64_t val_elems(Lowerer *lw, const Val *v) { return local_numel(lw, &lw->g->tensors[v->tensor], v->place); }

static int elem_bytes_of(Lowerer *lw, int t)
{
    const Tensor *tt = &lw->g->tensors[t];
    return tt->kind == TENSOR_PARAM || tt->kind == TENSOR_ACT ? dtype_bytes(act_dtype(lw)) : 4;
}

/* outer/inner of a [outer, S, inner] collective splitting dim d. */
static void coll_shape(Lowerer *lw, int t, const Placement *small, Dim d, int64_t *outer, int64_t *inner)
{
    const Tensor *tt = &lw->g->tensors[t];
    if (d == DIM_FLAT) {
        *outer = 1;
        *inner = local_numel(lw, tt, small);
        return;
    }
    int64_t sizes[IR_MAX_TDIMS];
    local_sizes(lw, tt, small, sizes);
    int64_t o = 1, in = 1;
    int seen = 0;
    for (int i = 0; i < tt->ndim; i++) {
        if (!seen && tt->dims[i] == d) seen = 1;
        if (seen) in *= sizes[i];
        else o *= sizes[i];
    }
    PARC_ASSERT(seen);
    *outer = o;
    *inner = in;
}

static int temp_buf(Lowerer *lw, const char *what, int t, const Placement *place, int klass)
{
    const Tensor *tt = &lw->g->tensors[t];
    char name[160];
    snprintf(name, sizeof name, "%s.%s", tt->name, what);
    int dtype = tt->kind == TENSOR_INDEX ? PRT_I32 : (tt->kind == TENSOR_STAT ? PRT_F32 : act_dtype(lw));
    return buf_new(lw, name, klass, dtype, local_numel(lw, tt, place), 1, t);
}

/* Moves value v to placement `to` axis by axis, each step one collective from
 * the table; returns the new value (fresh workspace buffers).  `why` names the
 * rule; op is the graph op that causes it. */
static int arg_same(Arg x, Arg y)
{
    return x.kind == y.kind && x.inst == y.inst && x.axis == y.axis && x.buf == y.buf && x.k == y.k && x.i == y.i;
}

/* Moves value v to placement `to`, axis by axis, each step the one collective
 * the table names for it.  Intermediate values get fresh buffers; the last step
 * writes into *dst when dst != NULL.  dst may be v's own buffer only when that
 * last step is an all-reduce (it then runs in place); for any other collective
 * dst must not overlap v. */
static Val reshard_to(Emit *e, Val v, const Placement *to, int op, const char *why, int is_grad, const Arg *dst)
{
    Lowerer *lw = e->lw;
    int last = -1;
    for (int a = 0; a < lw->naxes; a++)
        if (reshard_collective(v.place[a], to[a]) != COLL_NONE && lw->plan->mesh.axes[a].size > 1) last = a;
    for (int a = 0; a < lw->naxes; a++) {
        Placement from = v.place[a];
        CollKind c = reshard_collective(from, to[a]);
        if (c == COLL_NONE) continue;
        if (lw->plan->mesh.axes[a].size == 1) {
            /* a group of one: every placement is the whole tensor */
            v.place[a] = to[a];
            continue;
        }
        Val nv = v;
        nv.place[a] = to[a];
        int t = v.tensor;
        if (dst && a == last) {
            PARC_ASSERT(c == COLL_ALLREDUCE || dst->buf != v.arg.buf);
            nv.arg = *dst;
        } else {
            int buf = temp_buf(lw, is_grad ? "grad.resharded" : "resharded", t, nv.place,
                               lw->g->tensors[t].kind == TENSOR_PARAM ? PRT_COMM : PRT_WORKSPACE);
            nv.arg = a_buf(buf, INST_FIXED, 0);
        }
        int64_t outer, inner;
        Instr *ins;
        switch (c) {
        case COLL_ALLREDUCE: {
            int64_t n = val_elems(lw, &v);
            if (!arg_same(nv.arg, v.arg)) EMIT(e, RT_prt_copy, nv.arg, v.arg, a_int(n));
            ins = EMIT(e, RT_prt_allreduce, a_int(a), nv.arg, a_int(n));
            ins->elems = n;
            break;
        }
        case COLL_ALLGATHER:
            coll_shape(lw, t, v.place, (Dim)from.dim, &outer, &inner);
            ins = EMIT(e, RT_prt_allgather, a_int(a), nv.arg, v.arg, a_int(outer), a_int(inner));
            ins->elems = outer * inner * lw->plan->mesh.axes[a].size;
            break;
        case COLL_REDUCESCATTER:
            coll_shape(lw, t, nv.place, (Dim)to[a].dim, &outer, &inner);
            ins = EMIT(e, RT_prt_reducescatter, a_int(a), nv.arg, v.arg, a_int(outer), a_int(inner));
            ins->elems = outer * inner * lw->plan->mesh.axes[a].size;
            break;
        case COLL_SLICE:
            coll_shape(lw, t, nv.place, (Dim)to[a].dim, &outer, &inner);
            ins = EMIT(e, RT_prt_slice, a_int(a), nv.arg, v.arg, a_int(outer), a_int(inner));
            ins->elems = outer * inner;
            break;
        case COLL_ALLTOALL:
        default:
            diag_error(lw->g->ops[op >= 0 ? op : 0].loc, NULL,
                       "moving `%s` from split %s to split %s on `%s` needs an all-to-all, which the runtime does "
                       "not lower yet",
                       lw->g->tensors[t].name, dim_names[from.dim], dim_names[to[a].dim], axis_name(lw, a));
            lw->errors++;
            return v;
        }
        ins->coll = c;
        ins->axis = a;
        ins->op = op;
        ins->tensor = t;
        ins->elem_bytes = elem_bytes_of(lw, t);
        ins->why = why;
        v = nv;
    }
    return v;
}

static Val reshard(Emit *e, Val v, const Placement *to, int op, const char *why, int is_grad)
{
    return reshard_to(e, v, to, op, why, is_grad, NULL);
}

static Val val_of(Lowerer *lw, int t)
{
    Val v;
    v.arg = t_arg(lw, t);
    v.tensor = t;
    for (int a = 0; a < lw->naxes; a++) v.place[a] = PROD(lw, t, a);
    return v;
}

static const char *reshard_why(Lowerer *lw, const Op *consumer, int t, const Placement *to, int backward)
{
    const Graph *g = lw->g;
    const Tensor *tt = &g->tensors[t];
    char buf[512];
    size_t used = 0;
    buf[0] = 0;
    for (int a = 0; a < lw->naxes; a++) {
        Placement want = backward ? GRADP(lw, t, a) : to[a];
        CollKind c;
        if (backward) c = reshard_collective(to[a], GRADP(lw, t, a));
        else c = reshard_collective(PROD(lw, t, a), to[a]);
        if (c == COLL_NONE) continue;
        const char *ax = axis_name(lw, a);
        int n;
        if (!backward) {
            Placement p = PROD(lw, t, a);
            const Op *prod = tt->producer >= 0 ? &g->ops[tt->producer] : NULL;
            if (tt->kind == TENSOR_PARAM && p.kind == PLACE_S && p.dim == DIM_FLAT)
                n = snprintf(buf + used, sizeof buf - used, "%s needs %s whole; ZeRO-3 shards it over %s",
                             consumer->name, tt->name, ax);
            else if (p.kind == PLACE_P && prod && (prod->kind == OP_EMBED))
                n = snprintf(buf + used, sizeof buf - used,
                             "%s looks rows up in a vocab split on %s -> Partial; %s needs %s",
                             prod->name, ax, consumer->name, want.kind == PLACE_R ? "it whole" : "it split on seq");
            else if (p.kind == PLACE_P && prod)
                n = snprintf(buf + used, sizeof buf - used, "%s contracts %s split on %s -> Partial; %s needs %s",
                             prod->name, dim_names[RULE(lw, prod->id, a)->in[0].dim], ax, consumer->name,
                             want.kind == PLACE_R ? "it whole" : "it split on seq");
            else if (p.kind == PLACE_S)
                n = snprintf(buf + used, sizeof buf - used, "%s needs %s whole on %s (split on %s)", consumer->name,
                             tt->name, ax, dim_names[p.dim]);
            else
                n = snprintf(buf + used, sizeof buf - used, "%s takes its part of %s on %s", consumer->name,
                             tt->name, ax);
        } else {
            if (to[a].kind == PLACE_P)
                n = snprintf(buf + used, sizeof buf - used,
                             "backward of %s sums over a dim split on %s -> Partial gradient of %s", consumer->name,
                             ax, tt->name);
            else
                n = snprintf(buf + used, sizeof buf - used, "gradient of %s back to its %s placement on %s",
                             tt->name, want.kind == PLACE_S ? "split" : "whole", ax);
        }
        if (n < 0) break;
        used += (size_t)n;
        if (used >= sizeof buf) break;
    }
    return arena_strdup(lw->arena, buf);
}

/* The value an op reads for input i: the tensor itself, or a resharded copy. */
static Val op_input(Emit *e, const Op *op, int i, int is_param)
{
    Lowerer *lw = e->lw;
    int t = is_param ? op->param[i] : op->in[i];
    Val v = val_of(lw, t);
    Placement to[PARC_MAX_AXES];
    int differs = 0;
    for (int a = 0; a < lw->naxes; a++) {
        OpPlace *r = RULE(lw, op->id, a);
        to[a] = is_param ? r->param[i] : r->in[i];
        if (!place_eq(to[a], v.place[a]) && lw->plan->mesh.axes[a].size > 1) differs = 1;
    }
    if (!differs) return v;
    const char *why = reshard_why(lw, op, t, to, 0);
    if (lw->replaying) why = arena_printf(lw->arena, "again for the backward of %s (the forward's copy was not kept): %s",
                                          op->name, why);
    return reshard(e, v, to, op->id, why, 0);
}

static int64_t rows_of(Lowerer *lw, int t, const Placement *place)
{
    int64_t sizes[IR_MAX_TDIMS];
    const Tensor *tt = &lw->g->tensors[t];
    local_sizes(lw, tt, place, sizes);
    return sizes[0] * sizes[1];
}

static int64_t trailing(Lowerer *lw, int t, const Placement *place, int from_dim)
{
    int64_t sizes[IR_MAX_TDIMS];
    const Tensor *tt = &lw->g->tensors[t];
    local_sizes(lw, tt, place, sizes);
    int64_t n = 1;
    for (int i = from_dim; i < tt->ndim; i++) n *= sizes[i];
    return n;
}

static int axis_of_split(Lowerer *lw, const Placement *place, Dim d)
{
    for (int a = 0; a < lw->naxes; a++)
        if (place[a].kind == PLACE_S && place[a].dim == d) return a;
    return -1;
}

static void set_flops(Instr *ins, double f) { ins->flops = f; }

/* Forward of one op. */
static void emit_forward(Emit *e, const Op *op)
{
    Lowerer *lw = e->lw;
    const Graph *g = lw->g;
    const Model *m = &lw->plan->model;
    Val in[3], pr[2];
    for (int i = 0; i < op->nin; i++) in[i] = op_input(e, op, i, 0);
    for (int i = 0; i < op->nparam; i++) pr[i] = op_input(e, op, i, 1);
    int out = op->out;
    Arg o = out >= 0 && lw->tbuf[out] >= 0 ? t_arg(lw, out) : a_null();
    Placement *op_out = &PROD(lw, out >= 0 ? out : 0, 0);
    Instr *ins = NULL;
    switch (op->kind) {
    case OP_DATA: {
        int64_t sizes[IR_MAX_TDIMS];
        local_sizes(lw, &g->tensors[out], op_out, sizes);
        Arg tok = out == g->tokens ? o : a_buf(lw->scratch_idx, INST_FIXED, 0);
        Arg tgt = out == g->targets ? o : a_buf(lw->scratch_idx, INST_FIXED, 0);
        ins = EMIT(e, RT_prt_data, tok, tgt, a_kind(ARG_STEP), a_kind(ARG_FIRST_SAMPLE), a_int(sizes[0]),
                   a_int(sizes[1]), a_int(m->vocab));
        break;
    }
    case OP_EMBED: {
        int64_t N = rows_of(lw, op->in[0], in[0].place);
        int64_t C = trailing(lw, out, op_out, 2);
        int64_t V = trailing(lw, op->param[0], pr[0].place, 0) / (C ? C : 1);
        int va = axis_of_split(lw, pr[0].place, DIM_VOCAB);
        ins = EMIT(e, RT_prt_embed_fwd, o, in[0].arg, pr[0].arg, a_int(N), a_int(C), a_int(V), a_coord(va, V));
        break;
    }
    case OP_POS: {
        int64_t sizes[IR_MAX_TDIMS];
        local_sizes(lw, &g->tensors[out], op_out, sizes);
        int sa = axis_of_split(lw, in[0].place, DIM_SEQ);
        ins = EMIT(e, RT_prt_pos_fwd, o, in[0].arg, pr[0].arg, a_int(sizes[0]), a_int(sizes[1]), a_int(sizes[2]),
                   a_coord(sa, sizes[1]));
        break;
    }
    case OP_LAYERNORM: {
        int64_t N = rows_of(lw, out, op_out), C = trailing(lw, out, op_out, 2);
        ins = EMIT(e, RT_prt_layernorm_fwd, o, t_arg(lw, op->aux[0]), t_arg(lw, op->aux[1]), in[0].arg, pr[0].arg,
                   op->nparam > 1 ? pr[1].arg : a_null(), a_int(N), a_int(C));
        set_flops(ins, 8.0 * N * C);
        break;
    }
    case OP_RMSNORM: {
        int64_t N = rows_of(lw, out, op_out), C = trailing(lw, out, op_out, 2);
        ins = EMIT(e, RT_prt_rmsnorm_fwd, o, t_arg(lw, op->aux[0]), in[0].arg, pr[0].arg, a_int(N), a_int(C));
        set_flops(ins, 4.0 * N * C);
        break;
    }
    case OP_LINEAR:
    case OP_LINEAR_T: {
        int64_t N = rows_of(lw, op->in[0], in[0].place);
        int64_t K = trailing(lw, op->in[0], in[0].place, 2);
        /* the output's local width under the op's own produced placement */
        int64_t M = local_numel(lw, &g->tensors[out], op_out) / (N ? N : 1);
        ins = EMIT(e, op->kind == OP_LINEAR ? RT_prt_matmul_fwd : RT_prt_matmul_t_fwd, o, in[0].arg, pr[0].arg,
                   a_int(N), a_int(K), a_int(M));
        set_flops(ins, 2.0 * N * K * M);
        break;
    }
    case OP_BIAS: {
        int64_t N = rows_of(lw, out, op_out), M = trailing(lw, out, op_out, 2);
        ins = EMIT(e, RT_prt_bias_fwd, o, in[0].arg, pr[0].arg, a_int(N), a_int(M));
        set_flops(ins, (double)N * M);
        break;
    }
    case OP_GELU:
    case OP_RELU: {
        int64_t n = local_numel(lw, &g->tensors[out], op_out);
        ins = EMIT(e, op->kind == OP_GELU ? RT_prt_gelu_fwd : RT_prt_relu_fwd, o, in[0].arg, a_int(n));
        set_flops(ins, 8.0 * n);
        break;
    }
    case OP_SWIGLU: {
        int64_t N = rows_of(lw, out, op_out), F = trailing(lw, out, op_out, 2);
        ins = EMIT(e, RT_prt_swiglu_fwd, o, in[0].arg, a_int(N), a_int(F));
        set_flops(ins, 6.0 * N * F);
        break;
    }
    case OP_ATTENTION: {
        int64_t s[IR_MAX_TDIMS];
        local_sizes(lw, &g->tensors[out], op_out, s);
        Arg probs = lw->needed[op->aux[0]] && lw->tbuf[op->aux[0]] >= 0 ? t_arg(lw, op->aux[0]) : a_null();
        ins = EMIT(e, RT_prt_attention_fwd, o, probs, in[0].arg, a_int(s[0]), a_int(s[1]), a_int(s[2]), a_int(s[3]),
                   a_int(m->block.causal));
        set_flops(ins, 4.0 * s[0] * s[1] * s[1] * s[2] * s[3]);
        break;
    }
    case OP_ADD: {
        int64_t n = local_numel(lw, &g->tensors[out], op_out);
        ins = EMIT(e, RT_prt_add_fwd, o, in[0].arg, in[1].arg, a_int(n));
        set_flops(ins, (double)n);
        break;
    }
    case OP_COPY: {
        int64_t n = local_numel(lw, &g->tensors[out], op_out);
        ins = EMIT(e, RT_prt_copy, o, in[0].arg, a_int(n));
        break;
    }
    case OP_XENT: {
        int64_t N = rows_of(lw, op->in[0], in[0].place), V = trailing(lw, op->in[0], in[0].place, 2);
        int va = axis_of_split(lw, in[0].place, DIM_VOCAB);
        int64_t replicas = 0;
        for (int a = 0; a < lw->naxes; a++)
            if (in[0].place[a].kind == PLACE_R && lw->plan->mesh.axes[a].size > 1 && a != lw->plan->layout.pp_axis)
                replicas |= (int64_t)1 << a;
        if (replicas) EMIT(e, RT_prt_loss_replicas, a_int(replicas));
        ins = EMIT(e, RT_prt_xent_fwd, a_buf(lw->loss_buf, INST_FIXED, 0), t_arg(lw, op->aux[0]), in[0].arg,
                   in[1].arg, a_int(N), a_int(V), a_coord(va, V), a_int(va));
        set_flops(ins, 5.0 * N * V);
        if (va >= 0) {
            /* the vocab-parallel loss: max, sum of exponentials and the target
             * logit are reduced over the vocab axis inside the op */
            static const CollKind kinds[2] = {COLL_ALLREDUCE_MAX, COLL_ALLREDUCE};
            static const char *const whys[2] = {
                "vocab-parallel cross-entropy: the row max over a vocab split",
                "vocab-parallel cross-entropy: the sum of exponentials and the target logit (held by one rank of "
                "the split), in one call"};
            for (int k = 0; k < 2; k++) {
                /* a report-only record: the runtime op performs them */
                Instr rec;
                memset(&rec, 0, sizeof rec);
                rec.fn = -1;
                rec.coll = kinds[k];
                rec.axis = va;
                rec.elems = k == 0 ? N : 2 * N;
                rec.elem_bytes = 4;
                rec.op = op->id;
                rec.tensor = op->in[0];
                rec.phase = e->phase;
                rec.why = whys[k];
                ARR_PUSH(lw->arena, e->seq->ins, e->seq->n, e->seq->cap, rec);
            }
            ins = NULL;
        }
        break;
    }
    default: PARC_BUG("no forward for op kind %d", (int)op->kind);
    }
    if (ins) ins->op = op->id;
}

/* Gradient destination of input i (or param i) of op: the tensor's gradient
 * buffer directly when the op's gradient placement matches it, else a fresh
 * zeroed temp (returned in *tmp) to be resharded and accumulated afterwards. */
typedef struct GradDst {
    Arg arg;
    int tmp;          /* temp buffer, -1 when direct */
    int tensor;
    Placement place[PARC_MAX_AXES];
} GradDst;

static GradDst grad_dst(Emit *e, const Op *op, int i, int is_param)
{
    Lowerer *lw = e->lw;
    GradDst d;
    d.tensor = is_param ? op->param[i] : op->in[i];
    d.tmp = -1;
    int differs = 0;
    for (int a = 0; a < lw->naxes; a++) {
        OpPlace *r = RULE(lw, op->id, a);
        d.place[a] = is_param ? r->dparam[i] : r->din[i];
        if (!place_eq(d.place[a], GRADP(lw, d.tensor, a)) && lw->plan->mesh.axes[a].size > 1) differs = 1;
    }
    if (is_param) {
        /* parameter gradients accumulate in their accumulation placement */
        int t = d.tensor;
        int buf = lw->ofull[t] >= 0 ? lw->ofull[t] : lw->gbuf[t];
        d.arg = lw->ofull[t] >= 0 ? a_buf(buf, INST_FIXED, 0) : g_arg(lw, t);
        return d;
    }
    if (lw->gbuf[d.tensor] < 0) {
        d.arg = a_null();
        return d;
    }
    if (!differs) {
        d.arg = g_arg(lw, d.tensor);
        return d;
    }
    Placement tmp_place[PARC_MAX_AXES];
    for (int a = 0; a < lw->naxes; a++) tmp_place[a] = d.place[a].kind == PLACE_P ? REP : d.place[a];
    d.tmp = temp_buf(lw, "grad.part", d.tensor, tmp_place, PRT_WORKSPACE);
    d.arg = a_buf(d.tmp, INST_FIXED, 0);
    int64_t n = local_numel(lw, &lw->g->tensors[d.tensor], tmp_place);
    EMIT(e, RT_prt_zero, d.arg, a_int(n));
    return d;
}

/* After the op's backward wrote into a temp: reshard it and accumulate. */
static void grad_finish(Emit *e, const Op *op, GradDst *d)
{
    Lowerer *lw = e->lw;
    if (d->tmp < 0) return;
    Val v;
    v.arg = d->arg;
    v.tensor = d->tensor;
    memcpy(v.place, d->place, sizeof v.place);
    Placement to[PARC_MAX_AXES];
    for (int a = 0; a < lw->naxes; a++) to[a] = GRADP(lw, d->tensor, a);
    Val r = reshard(e, v, to, op->id, reshard_why(lw, op, d->tensor, d->place, 1), 1);
    int64_t n = local_numel(lw, &lw->g->tensors[d->tensor], to);
    EMIT(e, RT_prt_acc, g_arg(lw, d->tensor), r.arg, a_int(n));
}

static void emit_backward(Emit *e, const Op *op)
{
    Lowerer *lw = e->lw;
    const Graph *g = lw->g;
    const Model *m = &lw->plan->model;
    if (op->kind == OP_DATA) return;
    int out = op->out;
    Placement *op_out = &PROD(lw, out, 0);
    /* inputs as the forward read them (resharded copies are replayed) */
    Val in[3], pr[2];
    lw->replaying = 1;
    for (int i = 0; i < op->nin; i++) {
        if (lw->needed[op->in[i]] && lw->tbuf[op->in[i]] >= 0) in[i] = op_input(e, op, i, 0);
        else {
            in[i].arg = a_null();
            in[i].tensor = op->in[i];
            for (int a = 0; a < lw->naxes; a++) in[i].place[a] = RULE(lw, op->id, a)->in[i];
        }
    }
    for (int i = 0; i < op->nparam; i++) {
        if (op->kind == OP_LINEAR || op->kind == OP_LINEAR_T || op->kind == OP_LAYERNORM ||
            op->kind == OP_RMSNORM)
            pr[i] = op_input(e, op, i, 1);
        else {
            pr[i].arg = a_null();
            pr[i].tensor = op->param[i];
        }
    }
    lw->replaying = 0;
    Arg dout = out >= 0 && lw->gbuf[out] >= 0 ? g_arg(lw, out) : a_null();
    GradDst din[3], dp[2];
    for (int i = 0; i < op->nin; i++) din[i] = grad_dst(e, op, i, 0);
    for (int i = 0; i < op->nparam; i++) dp[i] = grad_dst(e, op, i, 1);
    Instr *ins = NULL;
    switch (op->kind) {
    case OP_EMBED: {
        int64_t N = rows_of(lw, op->in[0], in[0].place);
        int64_t C = trailing(lw, out, op_out, 2);
        /* the backward reads no weights: the table's placement comes from the rule */
        for (int a = 0; a < lw->naxes; a++) pr[0].place[a] = RULE(lw, op->id, a)->param[0];
        int64_t V = trailing(lw, op->param[0], pr[0].place, 0) / (C ? C : 1);
        int va = axis_of_split(lw, pr[0].place, DIM_VOCAB);
        ins = EMIT(e, RT_prt_embed_bwd, dp[0].arg, in[0].arg, dout, a_int(N), a_int(C), a_int(V), a_coord(va, V));
        break;
    }
    case OP_POS: {
        int64_t s[IR_MAX_TDIMS];
        local_sizes(lw, &g->tensors[out], op_out, s);
        int sa = axis_of_split(lw, op_out, DIM_SEQ);
        ins = EMIT(e, RT_prt_pos_bwd, dp[0].arg, din[0].arg, dout, a_int(s[0]), a_int(s[1]), a_int(s[2]),
                   a_coord(sa, s[1]));
        break;
    }
    case OP_LAYERNORM: {
        int64_t N = rows_of(lw, out, op_out), C = trailing(lw, out, op_out, 2);
        ins = EMIT(e, RT_prt_layernorm_bwd, din[0].arg, dp[0].arg, op->nparam > 1 ? dp[1].arg : a_null(), dout,
                   in[0].arg, pr[0].arg, t_arg(lw, op->aux[0]), t_arg(lw, op->aux[1]), a_int(N), a_int(C));
        set_flops(ins, 16.0 * N * C);
        break;
    }
    case OP_RMSNORM: {
        int64_t N = rows_of(lw, out, op_out), C = trailing(lw, out, op_out, 2);
        ins = EMIT(e, RT_prt_rmsnorm_bwd, din[0].arg, dp[0].arg, dout, in[0].arg, pr[0].arg, t_arg(lw, op->aux[0]),
                   a_int(N), a_int(C));
        set_flops(ins, 8.0 * N * C);
        break;
    }
    case OP_LINEAR:
    case OP_LINEAR_T: {
        int64_t N = rows_of(lw, op->in[0], in[0].place);
        int64_t K = trailing(lw, op->in[0], in[0].place, 2);
        int64_t M = local_numel(lw, &g->tensors[out], op_out) / (N ? N : 1);
        ins = EMIT(e, op->kind == OP_LINEAR ? RT_prt_matmul_bwd : RT_prt_matmul_t_bwd, din[0].arg, dp[0].arg, dout,
                   in[0].arg, pr[0].arg, a_int(N), a_int(K), a_int(M));
        set_flops(ins, 4.0 * N * K * M);
        break;
    }
    case OP_BIAS: {
        int64_t N = rows_of(lw, out, op_out), M = trailing(lw, out, op_out, 2);
        ins = EMIT(e, RT_prt_bias_bwd, dp[0].arg, dout, a_int(N), a_int(M));
        ins->op = op->id;
        ins = EMIT(e, RT_prt_acc, din[0].arg, dout, a_int(N * M));
        break;
    }
    case OP_GELU:
    case OP_RELU: {
        int64_t n = local_numel(lw, &g->tensors[out], op_out);
        ins = EMIT(e, op->kind == OP_GELU ? RT_prt_gelu_bwd : RT_prt_relu_bwd, din[0].arg, in[0].arg, dout, a_int(n));
        break;
    }
    case OP_SWIGLU: {
        int64_t N = rows_of(lw, out, op_out), F = trailing(lw, out, op_out, 2);
        ins = EMIT(e, RT_prt_swiglu_bwd, din[0].arg, in[0].arg, dout, a_int(N), a_int(F));
        break;
    }
    case OP_ATTENTION: {
        int64_t s[IR_MAX_TDIMS];
        local_sizes(lw, &g->tensors[out], op_out, s);
        Arg probs = lw->needed[op->aux[0]] && lw->tbuf[op->aux[0]] >= 0 ? t_arg(lw, op->aux[0]) : a_null();
        ins = EMIT(e, RT_prt_attention_bwd, din[0].arg, dout, in[0].arg, probs, a_int(s[0]), a_int(s[1]),
                   a_int(s[2]), a_int(s[3]), a_int(m->block.causal));
        set_flops(ins, (probs.kind == ARG_NULL ? 12.0 : 8.0) * s[0] * s[1] * s[1] * s[2] * s[3]);
        break;
    }
    case OP_ADD: {
        int64_t n = local_numel(lw, &g->tensors[out], op_out);
        EMIT(e, RT_prt_acc, din[0].arg, dout, a_int(n));
        ins = EMIT(e, RT_prt_acc, din[1].arg, dout, a_int(n));
        break;
    }
    case OP_COPY: {
        int64_t n = local_numel(lw, &g->tensors[out], op_out);
        ins = EMIT(e, RT_prt_acc, din[0].arg, dout, a_int(n));
        break;
    }
    case OP_XENT: {
        int64_t N = rows_of(lw, op->in[0], in[0].place), V = trailing(lw, op->in[0], in[0].place, 2);
        int va = axis_of_split(lw, in[0].place, DIM_VOCAB);
        double scale = 1.0 / ((double)lw->plan->train.batch * (double)lw->plan->model.seq);
        ins = EMIT(e, RT_prt_xent_bwd, din[0].arg, in[0].arg, t_arg(lw, op->aux[0]), in[1].arg, a_int(N), a_int(V),
                   a_coord(va, V), a_f64(scale));
        set_flops(ins, 3.0 * N * V);
        break;
    }
    default: PARC_BUG("no backward for op kind %d", (int)op->kind);
    }
    if (ins) ins->op = op->id;
    for (int i = 0; i < op->nin; i++) grad_finish(e, op, &din[i]);
}

/* ------------------------------------------------------------ driver */

static int is_block_boundary(const Lowerer *lw, int t)
{
    const Graph *g = lw->g;
    return t == g->block_in || t == g->block_out || t == g->embed_out || t == g->head_in;
}

/* Buffers for the tensors of one region on the current stage. */
static void bind_region(Lowerer *lw, Region r, int L)
{
    const Graph *g = lw->g;
    StageProgram *sp = lw->sp;
    int full = r == REGION_BLOCK && lw->plan->layout.recompute == RECOMPUTE_FULL;
    int64_t slot_l_instances = (int64_t)L * sp->nslots;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        if (tt->region != r || tt->kind == TENSOR_PARAM) continue;
        if (is_block_boundary(lw, t)) continue;
        Placement *pl = &PROD(lw, t, 0);
        int saved = lw->needed[t] && !full;
        if (tt->kind == TENSOR_STAT && !lw->needed[t] && tt->producer >= 0 &&
            g->ops[tt->producer].kind == OP_ATTENTION) {
            lw->tbuf[t] = -1; /* probabilities recomputed in backward */
            continue;
        }
        int klass = saved ? PRT_ACTIVATIONS : PRT_WORKSPACE;
        int dtype = tt->kind == TENSOR_INDEX ? PRT_I32 : (tt->kind == TENSOR_ACT ? act_dtype(lw) : PRT_F32);
        int64_t inst = 1;
        int mode = INST_FIXED;
        if (saved) {
            if (r == REGION_BLOCK) inst = slot_l_instances, mode = INST_SLOT_L;
            else inst = sp->nslots, mode = INST_SLOT;
        }
        if (tt->kind == TENSOR_SCALAR) continue;
        lw->tbuf[t] = buf_new(lw, tt->name, klass, dtype, local_numel(lw, tt, pl), inst, t);
        lw->tinst[t] = mode;
        lw->tk[t] = 0;
        if (tt->kind == TENSOR_ACT) {
            char name[160];
            snprintf(name, sizeof name, "%s.grad", tt->name);
            Placement gp[PARC_MAX_AXES];
            for (int a = 0; a < lw->naxes; a++) gp[a] = GRADP(lw, t, a);
            lw->gbuf[t] = buf_new(lw, name, PRT_WORKSPACE, act_dtype(lw), local_numel(lw, tt, gp), 1, t);
            lw->ginst[t] = INST_FIXED;
            lw->gk[t] = 0;
        }
    }
}

static void emit_region_forward(Lowerer *lw, Seq *seq, Region r, Phase phase)
{
    Emit e = {lw, seq, phase};
    lw->region = r;
    for (int i = 0; i < lw->g->region_count[r]; i++) emit_forward(&e, &lw->g->ops[lw->g->region_first[r] + i]);
}

static void emit_zero_region_grads(Emit *e, Region r, int skip_tensor)
{
    Lowerer *lw = e->lw;
    const Graph *g = lw->g;
    for (int t = 0; t < g->ntensors; t++) {
        if (g->tensors[t].region != r || lw->gbuf[t] < 0 || t == skip_tensor) continue;
        if (g->tensors[t].kind == TENSOR_PARAM) continue;
        Placement gp[PARC_MAX_AXES];
        for (int a = 0; a < lw->naxes; a++) gp[a] = GRADP(lw, t, a);
        EMIT(e, RT_prt_zero, g_arg(lw, t), a_int(local_numel(lw, &g->tensors[t], gp)));
    }
}

/* ZeRO-2/3: after each micro-batch's backward, the full gradient of every
 * parameter of the region is reduce-scattered into its shard. */
static void emit_zero_scatter(Emit *e, Region r)
{
    Lowerer *lw = e->lw;
    const Graph *g = lw->g;
    int za = lw->plan->layout.zero_axis;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        if (tt->region != r || tt->kind != TENSOR_PARAM || lw->ofull[t] < 0) continue;
        Val v;
        v.arg = a_buf(lw->ofull[t], INST_FIXED, 0);
        v.tensor = t;
        Placement to[PARC_MAX_AXES];
        for (int a = 0; a < lw->naxes; a++) {
            v.place[a] = GRADP(lw, t, a);
            to[a] = v.place[a];
        }
        to[za].kind = PLACE_S;
        to[za].dim = DIM_FLAT;
        Val s = reshard(e, v, to, -1,
                        lw->plan->layout.zero_stage == 2 ? "ZeRO-2 keeps only this rank's shard of each gradient"
                                                         : "ZeRO-3 keeps only this rank's shard of each gradient",
                        1);
        int64_t n = local_numel(lw, tt, to);
        EMIT(e, RT_prt_acc, g_arg(lw, t), s.arg, a_int(n));
        for (int a = 0; a < lw->naxes; a++) v.place[a] = GRADP(lw, t, a);
    }
}

static void emit_region_backward(Lowerer *lw, Seq *seq, Region r, int incoming)
{
    Emit e = {lw, seq, PHASE_BACKWARD};
    lw->region = r;
    const Graph *g = lw->g;
    if (r == REGION_BLOCK && lw->plan->layout.recompute == RECOMPUTE_FULL) {
        Emit rc = {lw, seq, PHASE_RECOMPUTE};
        for (int i = 0; i < g->region_count[r]; i++) emit_forward(&rc, &g->ops[g->region_first[r] + i]);
    }
    emit_zero_region_grads(&e, r, incoming);
    for (int t = 0; t < g->ntensors; t++)
        if (g->tensors[t].region == r && lw->ofull[t] >= 0) {
            const Buffer *b = &lw->sp->bufs[lw->ofull[t]];
            EMIT(&e, RT_prt_zero, a_buf(lw->ofull[t], INST_FIXED, 0), a_int(b->elems));
        }
    for (int i = g->region_count[r] - 1; i >= 0; i--) emit_backward(&e, &g->ops[g->region_first[r] + i]);
    emit_zero_scatter(&e, r);
}

/* Parameter buffers, gradients, optimizer state of a region. */
static void bind_params(Lowerer *lw, Region r, int instances, int first_layer)
{
    const Graph *g = lw->g;
    const Plan *plan = lw->plan;
    const Layout *lay = &plan->layout;
    int za = lay->zero_axis, zs = lay->zero_stage;
    int zn = za >= 0 ? plan->mesh.axes[za].size : 1;
    int wdtype = act_dtype(lw);
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        if (tt->region != r || tt->kind != TENSOR_PARAM) continue;
        Placement tp[PARC_MAX_AXES]; /* tensor-parallel placement: home without the flat shard */
        for (int a = 0; a < lw->naxes; a++) tp[a] = param_use(tt, a);
        int64_t tp_local = local_numel(lw, tt, tp);
        int64_t share = zs > 0 ? (tp_local + zn - 1) / zn : tp_local;
        int64_t padded = share * (zs > 0 ? zn : 1);
        int64_t welems = zs == 3 ? share : padded;
        int64_t gelems = zs >= 2 ? share : padded;
        int64_t oelems = zs >= 1 ? share : padded;
        int mode = r == REGION_BLOCK ? INST_LAYER : INST_FIXED;
        char name[160];
        int w = buf_new(lw, tt->name, PRT_WEIGHTS, wdtype, welems, instances, t);
        Buffer *wb = &lw->sp->bufs[w];
        wb->init_name = tt->name;
        wb->init = tt->init;
        wb->init_std = tt->init_std;
        wb->first_layer = r == REGION_BLOCK ? first_layer : -1;
        wb->ndim = tt->ndim <= 4 ? tt->ndim : 4;
        PARC_ASSERT(tt->ndim <= 4);
        for (int d = 0; d < tt->ndim; d++) {
            wb->gdims[d] = tt->sizes[d];
            wb->split_axis[d] = -1;
            for (int a = 0; a < lw->naxes; a++)
                if (tp[a].kind == PLACE_S && tp[a].dim == tt->dims[d]) wb->split_axis[d] = a;
        }
        wb->zero_axis = zs == 3 ? za : -1;
        if (r == REGION_BLOCK && lw->sp->chunks > 1) {
            wb->layers_per_chunk = lw->sp->layers_per_chunk;
            wb->chunk_layer_stride = (int64_t)plan->layout.stages * lw->sp->layers_per_chunk;
        }
        lw->tbuf[t] = w;
        lw->tinst[t] = mode;
        lw->tk[t] = 0;
        snprintf(name, sizeof name, "%s.grad", tt->name);
        lw->gbuf[t] = buf_new(lw, name, PRT_GRADS, wdtype, gelems, instances, t);
        lw->ginst[t] = mode;
        lw->gk[t] = 0;
        if (zs >= 2) {
            snprintf(name, sizeof name, "%s.grad.full", tt->name);
            lw->ofull[t] = buf_new(lw, name, PRT_WORKSPACE, wdtype, padded, 1, t);
        }
        if (plan->train.master_fp32 && plan->train.precision != PREC_FP32) {
            snprintf(name, sizeof name, "%s.master", tt->name);
            lw->master[t] = buf_new(lw, name, PRT_MASTER, PRT_F32, oelems, instances, t);
            /* the master describes the parameter itself (its ZeRO share when zs >= 1), so the
             * runtime draws the full fp32 initial values; the weights are their rounding */
            const Buffer *pw = &lw->sp->bufs[w];   /* bufs may have moved */
            Buffer *mb = &lw->sp->bufs[lw->master[t]];
            mb->init_name = pw->init_name;
            mb->init = pw->init;
            mb->init_std = pw->init_std;
            mb->first_layer = pw->first_layer;
            mb->ndim = pw->ndim;
            for (int d = 0; d < 4; d++) mb->gdims[d] = pw->gdims[d], mb->split_axis[d] = pw->split_axis[d];
            mb->zero_axis = zs >= 1 ? za : -1;
            mb->layers_per_chunk = pw->layers_per_chunk;
            mb->chunk_layer_stride = pw->chunk_layer_stride;
        }
        if (plan->train.optimizer != OPT_SGD || plan->train.momentum != 0) {
            snprintf(name, sizeof name, "%s.m", tt->name);
            lw->mom1[t] = buf_new(lw, name, PRT_OPTIM, PRT_F32, oelems, instances, t);
        }
        if (plan->train.optimizer != OPT_SGD) {
            snprintf(name, sizeof name, "%s.v", tt->name);
            lw->mom2[t] = buf_new(lw, name, PRT_OPTIM, PRT_F32, oelems, instances, t);
        }
    }
}

/* Gradient sync and optimizer step of a region's parameters. */
static void emit_param_steps(Lowerer *lw, Seq *zero, Seq *sync, Seq *optim, Region r)
{
    const Graph *g = lw->g;
    const Plan *plan = lw->plan;
    const Layout *lay = &plan->layout;
    const Train *tr = &plan->train;
    int za = lay->zero_axis, zs = lay->zero_stage;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        if (tt->region != r || tt->kind != TENSOR_PARAM || lw->tbuf[t] < 0) continue;
        int mode = lw->tinst[t];
        Arg w = a_buf(lw->tbuf[t], mode, 0), gr = a_buf(lw->gbuf[t], mode, 0);
        const Buffer *gb = &lw->sp->bufs[lw->gbuf[t]];
        Emit ez = {lw, zero, PHASE_GRAD_SYNC};
        EMIT(&ez, RT_prt_zero, gr, a_int(gb->elems));

        /* gradient sync: from the accumulation placement to the optimizer's */
        Emit es = {lw, sync, PHASE_GRAD_SYNC};
        Placement acc[PARC_MAX_AXES], opt[PARC_MAX_AXES];
        for (int a = 0; a < lw->naxes; a++) {
            acc[a] = GRADP(lw, t, a);
            opt[a] = param_use(tt, a);
            if (a == za && zs >= 1) opt[a] = split(DIM_FLAT);
        }
        if (zs >= 2) acc[za] = split(DIM_FLAT); /* already scattered per micro-batch */
        Val v = {gr, t, {{0}}};
        memcpy(v.place, acc, sizeof acc);
        /* tensor-parallel axes first, the data axis last */
        int data_axis = za >= 0 ? za : lay->dim_axis[DIM_BATCH];
        for (int pass = 0; pass < 2; pass++) {
            Placement to[PARC_MAX_AXES];
            memcpy(to, v.place, sizeof to);
            for (int a = 0; a < lw->naxes; a++)
                if ((a == data_axis) == (pass == 1)) to[a] = opt[a];
            int moves = 0;
            for (int a = 0; a < lw->naxes; a++) moves |= reshard_collective(v.place[a], to[a]) != COLL_NONE;
            if (!moves) continue;
            const char *why;
            int bucket = r == REGION_BLOCK && lw->sp->sync_in_backward;
            if (pass == 0) why = "partial gradients of a parameter used on rows split on a tensor axis";
            else if (zs == 0)
                why = bucket ? "data parallel: gradients summed over the data axis (DDP), a bucket per layer after "
                               "its last micro-batch's backward"
                             : "data parallel: gradients summed over the data axis (DDP)";
            else
                why = bucket ? "ZeRO-1: gradients reduce-scattered so each rank updates its shard, a bucket per layer "
                               "after its last micro-batch's backward"
                             : "ZeRO-1: gradients reduce-scattered so each rank updates its shard";
            if (pass == 1 && zs == 1) {
                /* ZeRO-1 keeps the reduced shard in its region of the whole
                 * gradient buffer; a reduce-scatter cannot write into its own
                 * input, so it goes through a temporary */
                Val nv = reshard(&es, v, to, -1, why, 1);
                int64_t n = local_numel(lw, tt, to);
                EMIT(&es, RT_prt_copy, a_buf_off(lw->gbuf[t], mode, 0, za, n), nv.arg, a_int(n));
            } else {
                reshard_to(&es, v, to, -1, why, 1, &gr); /* all-reduces in place */
            }
            memcpy(v.place, to, sizeof to);
        }

        /* optimizer step on the optimizer placement */
        Emit eo = {lw, optim, PHASE_OPTIMIZER};
        int64_t n = local_numel(lw, tt, opt);
        Arg pw = (zs == 1 || zs == 2) ? a_buf_off(lw->tbuf[t], mode, 0, za, n) : w;
        Arg pg = zs == 1 ? a_buf_off(lw->gbuf[t], mode, 0, za, n) : gr;
        Arg master = lw->master[t] >= 0 ? a_buf(lw->master[t], mode, 0) : a_null();
        Arg m1 = lw->mom1[t] >= 0 ? a_buf(lw->mom1[t], mode, 0) : a_null();
        Arg m2 = lw->mom2[t] >= 0 ? a_buf(lw->mom2[t], mode, 0) : a_null();
        double wd = tt->decay ? tr->weight_decay : 0.0;
        Instr *ins;
        if (tr->optimizer == OPT_SGD)
            ins = EMIT(&eo, RT_prt_sgd, pw, master, pg, m1, a_int(n), a_f64(tr->lr), a_f64(tr->momentum), a_f64(wd));
        else
            ins = EMIT(&eo, RT_prt_adamw, pw, master, pg, m1, m2, a_int(n), a_kind(ARG_STEP), a_f64(tr->lr),
                       a_f64(tr->beta1), a_f64(tr->beta2), a_f64(tr->eps), a_f64(wd));
        ins->tensor = t;
        set_flops(ins, 12.0 * n);
        /* ZeRO-1/2: the updated shards are gathered back into whole weights */
        if (zs == 1 || zs == 2) {
            /* the shard is copied out first: an all-gather cannot read a region of
             * the buffer it writes */
            int tmp = buf_new(lw, arena_printf(lw->arena, "%s.shard", tt->name), PRT_COMM, lw->sp->bufs[lw->tbuf[t]].dtype,
                              n, 1, t);
            EMIT(&eo, RT_prt_copy, a_buf(tmp, INST_FIXED, 0), pw, a_int(n));
            Val shard = {a_buf(tmp, INST_FIXED, 0), t, {{0}}};
            memcpy(shard.place, opt, sizeof opt);
            Placement whole[PARC_MAX_AXES];
            for (int a = 0; a < lw->naxes; a++) whole[a] = param_use(tt, a);
            reshard_to(&eo, shard, whole, -1,
                       zs == 1 ? "ZeRO-1: each rank updated its shard; the whole weights are gathered back"
                               : "ZeRO-2: each rank updated its shard; the whole weights are gathered back",
                       0, &w);
        }
    }
}

/* Placement of every tensor as produced and of its gradient. */
static void plan_placements(Lowerer *lw)
{
    Graph *g = lw->g;
    for (int i = 0; i < g->nops; i++)
        for (int a = 0; a < lw->naxes; a++) op_rule(lw, &g->ops[i], a);
    for (int t = 0; t < g->ntensors; t++)
        for (int a = 0; a < lw->naxes; a++) PROD(lw, t, a) = g->tensors[t].home[a];
    for (int i = 0; i < g->nops; i++) {
        const Op *op = &g->ops[i];
        for (int a = 0; a < lw->naxes; a++) {
            if (op->out >= 0) PROD(lw, op->out, a) = RULE(lw, i, a)->out;
            for (int k = 0; k < op->naux; k++) PROD(lw, op->aux[k], a) = RULE(lw, i, a)->out.kind == PLACE_P
                                                                           ? g->tensors[op->in[0]].home[a]
                                                                           : RULE(lw, i, a)->out;
        }
    }
    /* statistics follow the op's rows: never split on a feature dim */
    for (int t = 0; t < g->ntensors; t++) {
        Tensor *tt = &g->tensors[t];
        if (tt->kind != TENSOR_STAT) continue;
        for (int a = 0; a < lw->naxes; a++) {
            Placement p = PROD(lw, t, a);
            if (p.kind == PLACE_P || (p.kind == PLACE_S && !tensor_has_dim(tt, (Dim)p.dim))) PROD(lw, t, a) = REP;
        }
    }
    /* block boundaries: the stream leaving a block must look like the one
     * entering the next, so the block output is brought to the input's placement */
    for (int t = 0; t < g->ntensors; t++)
        for (int a = 0; a < lw->naxes; a++) {
            const Tensor *tt = &g->tensors[t];
            if (tt->kind == TENSOR_PARAM) {
                Placement acc = REP;
                for (int i = 0; i < g->nops; i++)
                    for (int k = 0; k < g->ops[i].nparam; k++)
                        if (g->ops[i].param[k] == t) {
                            Placement d = RULE(lw, i, a)->dparam[k];
                            if (d.kind == PLACE_P || acc.kind == PLACE_R) acc = d;
                        }
                GRADP(lw, t, a) = acc;
            } else {
                GRADP(lw, t, a) = grad_of(PROD(lw, t, a));
            }
        }
}

static int stage_layers(const Plan *plan, int s, int *chunks, int *first)
{
    const Layout *lay = &plan->layout;
    int v = lay->virtual_stages > 0 ? lay->virtual_stages : 1;
    *chunks = v;
    if (v == 1) {
        first[0] = lay->stage_first[s];
        return lay->stage_layers[s];
    }
    int p = lay->stages;
    int L = (int)(plan->model.layers / ((int64_t)p * v));
    for (int c = 0; c < v; c++) first[c] = (c * p + s) * L;
    return L;
}

static void assign_slots(Lowerer *lw, StageProgram *sp, const Schedule *sc, int s)
{
    int n = sc->count[s];
    sp->nitems = n;
    sp->items = sc->items[s];
    sp->slot_of_item = arena_alloc(lw->arena, sizeof(int) * (size_t)(n ? n : 1));
    int m = sc->micro_batches, v = sc->chunks;
    int *slot_of = arena_alloc(lw->arena, sizeof(int) * (size_t)(m * v));
    int cap = sc->peak_in_flight[s] > 0 ? sc->peak_in_flight[s] : 1;
    int *busy = arena_alloc(lw->arena, sizeof(int) * (size_t)cap);
    int used = 0;
    for (int i = 0; i < n; i++) {
        const WorkItem *w = &sc->items[s][i];
        int key = w->micro * v + w->chunk;
        if (w->kind == WORK_FORWARD) {
            int k = 0;
            while (k < cap && busy[k]) k++;
            PARC_ASSERT(k < cap);
            busy[k] = 1;
            slot_of[key] = k;
            if (k + 1 > used) used = k + 1;
        } else {
            busy[slot_of[key]] = 0;
        }
        sp->slot_of_item[i] = slot_of[key];
    }
    sp->nslots = used > 0 ? used : 1;
}

static void lower_stage(Lowerer *lw, int s)
{
    const Plan *plan = lw->plan;
    const Graph *g = lw->g;
    Program *prog = lw->prog;
    StageProgram *sp = &prog->stages[s];
    lw->sp = sp;
    sp->stage = s;
    int first[64];
    int L = stage_layers(plan, s, &sp->chunks, first);
    sp->layers_per_chunk = L;
    for (int c = 0; c < sp->chunks; c++) sp->chunk_first_layer[c] = first[c];
    sp->sync_in_backward = plan->layout.zero_stage <= 1;
    sp->has_embed = plan->model.has_embed && plan->layout.embed_stage == s;
    sp->has_head = plan->layout.head_stage == s;
    assign_slots(lw, sp, &prog->schedule, s);
    size_t nt = (size_t)g->ntensors;
    int *arrays[] = {lw->tbuf, lw->gbuf, lw->ofull, lw->master, lw->mom1, lw->mom2};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++)
        for (size_t i = 0; i < nt; i++) arrays[k][i] = -1;

    /* the residual stream: (L + 1) per slot; its gradient ping-pong */
    Placement rp[PARC_MAX_AXES];
    for (int a = 0; a < lw->naxes; a++) rp[a] = PROD(lw, g->block_in, a);
    int64_t relems = local_numel(lw, &g->tensors[g->block_in], rp);
    sp->boundary_elems = relems;
    sp->resid_buf = buf_new(lw, "resid", PRT_ACTIVATIONS, act_dtype(lw), relems, (int64_t)(L + 1) * sp->nslots,
                            g->block_in);
    sp->dresid_buf = buf_new(lw, "resid.grad", PRT_WORKSPACE, act_dtype(lw), relems, 2, g->block_in);
    int bound[4] = {g->block_in, g->block_out, g->embed_out, g->head_in};
    int bk[4] = {0, 1, 0, L};
    int gmode[4] = {INST_PARITY, INST_PARITY, INST_FIXED, INST_FIXED};
    int gk[4] = {0, 1, 0, L & 1};
    for (int i = 0; i < 4; i++) {
        if (bound[i] < 0) continue;
        lw->tbuf[bound[i]] = sp->resid_buf;
        lw->tinst[bound[i]] = INST_SLOT_L;
        lw->tk[bound[i]] = bk[i];
        lw->gbuf[bound[i]] = sp->dresid_buf;
        lw->ginst[bound[i]] = gmode[i];
        lw->gk[bound[i]] = gk[i];
    }
    /* the produced placement of block_out must equal block_in's: enforced by
     * the ADD rule (its home), checked here */
    for (int a = 0; a < lw->naxes; a++)
        if (!place_eq(PROD(lw, g->block_out, a), rp[a]))
            PARC_BUG("block output placement differs from its input on axis %d", a);

    lw->loss_buf = buf_new(lw, "loss.sum", PRT_WORKSPACE, PRT_F32, 1, 1, g->loss);
    {
        Placement tp[PARC_MAX_AXES];
        int t = g->tokens >= 0 ? g->tokens : g->targets;
        for (int a = 0; a < lw->naxes; a++) tp[a] = t >= 0 ? PROD(lw, t, a) : REP;
        lw->scratch_idx = t >= 0 ? buf_new(lw, "data.scratch", PRT_WORKSPACE, PRT_I32,
                                           local_numel(lw, &g->tensors[t], tp), 1, t)
                                 : -1;
    }
    if (sp->has_embed) {
        bind_params(lw, REGION_EMBED, 1, -1);
        bind_region(lw, REGION_EMBED, 1);
    }
    if (L > 0) {
        bind_params(lw, REGION_BLOCK, sp->chunks * L, first[0]);
        bind_region(lw, REGION_BLOCK, L);
    }
    if (sp->has_head) {
        /* a head tied to the embedding needs the table on this stage */
        for (int i = 0; i < g->region_count[REGION_HEAD]; i++) {
            const Op *op = &g->ops[g->region_first[REGION_HEAD] + i];
            if (op->kind == OP_LINEAR_T && lw->tbuf[op->param[0]] < 0) {
                diag_error(plan->layout.stage_loc.file ? plan->layout.stage_loc : plan->model.loc,
                           "put the embedding and the head on one stage, or use `head untied`",
                           "the head is tied to the embedding, but they sit on different pipeline stages (%d and %d)",
                           plan->layout.embed_stage, plan->layout.head_stage);
                lw->errors++;
                return;
            }
        }
        bind_params(lw, REGION_HEAD, 1, -1);
        bind_region(lw, REGION_HEAD, 1);
    }
    if (lw->errors) return;

    if (sp->has_embed) {
        emit_region_forward(lw, &sp->seq[SEQ_EMBED_FWD], REGION_EMBED, PHASE_FORWARD);
        emit_region_backward(lw, &sp->seq[SEQ_EMBED_BWD], REGION_EMBED, g->embed_out);
    }
    if (L > 0) {
        emit_region_forward(lw, &sp->seq[SEQ_BLOCK_FWD], REGION_BLOCK, PHASE_FORWARD);
        emit_region_backward(lw, &sp->seq[SEQ_BLOCK_BWD], REGION_BLOCK, g->block_out);
    }
    if (sp->has_head) {
        emit_region_forward(lw, &sp->seq[SEQ_HEAD_FWD], REGION_HEAD, PHASE_FORWARD);
        emit_region_backward(lw, &sp->seq[SEQ_HEAD_BWD], REGION_HEAD, -1);
    }
    if (sp->has_embed)
        emit_param_steps(lw, &sp->seq[SEQ_ZERO_GRADS_ONCE], &sp->seq[SEQ_GRAD_SYNC_ONCE], &sp->seq[SEQ_OPTIM_ONCE],
                         REGION_EMBED);
    if (L > 0)
        emit_param_steps(lw, &sp->seq[SEQ_ZERO_GRADS_BLOCK], &sp->seq[SEQ_GRAD_SYNC_BLOCK],
                         &sp->seq[SEQ_OPTIM_BLOCK], REGION_BLOCK);
    if (sp->has_head) {
        /* the tied table's parameters were stepped with the embedding */
        emit_param_steps(lw, &sp->seq[SEQ_ZERO_GRADS_ONCE], &sp->seq[SEQ_GRAD_SYNC_ONCE], &sp->seq[SEQ_OPTIM_ONCE],
                         REGION_HEAD);
    }
}

int64_t seq_calls_per_step(const Program *prog, const StageProgram *sp, SeqKind seq)
{
    int64_t m = prog->plan->train.micro_batches;
    int64_t layers = (int64_t)sp->chunks * sp->layers_per_chunk;
    switch (seq) {
    case SEQ_EMBED_FWD:
    case SEQ_EMBED_BWD: return sp->has_embed ? m : 0;
    case SEQ_HEAD_FWD:
    case SEQ_HEAD_BWD: return sp->has_head ? m : 0;
    case SEQ_BLOCK_FWD:
    case SEQ_BLOCK_BWD: return m * layers;
    case SEQ_ZERO_GRADS_BLOCK:
    case SEQ_GRAD_SYNC_BLOCK:
    case SEQ_OPTIM_BLOCK: return layers;
    default: return 1;
    }
}

Program *lower_program(Arena *arena, const Plan *plan, Graph *g)
{
    Lowerer lw;
    memset(&lw, 0, sizeof lw);
    lw.arena = arena;
    lw.plan = plan;
    lw.g = g;
    lw.naxes = plan->mesh.naxes;
    size_t nt = (size_t)g->ntensors, na = (size_t)(lw.naxes ? lw.naxes : 1);
    lw.rule = arena_alloc(arena, sizeof(OpPlace) * (size_t)g->nops * na);
    lw.produced = arena_alloc(arena, sizeof(Placement) * nt * na);
    lw.gradp = arena_alloc(arena, sizeof(Placement) * nt * na);
    lw.needed = arena_alloc(arena, sizeof(int) * nt);
    int **arrays[] = {&lw.tbuf, &lw.gbuf, &lw.tinst, &lw.tk, &lw.ginst, &lw.gk, &lw.ofull,
                      &lw.master, &lw.mom1, &lw.mom2};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) *arrays[k] = arena_alloc(arena, sizeof(int) * nt);

    plan_placements(&lw);
    if (lw.errors) return NULL;
    mark_needed(&lw);

    Program *prog = arena_alloc(arena, sizeof(Program));
    prog->plan = plan;
    prog->graph = g;
    lw.prog = prog;
    prog->dp_axis = plan->layout.dim_axis[DIM_BATCH];
    prog->tp_axis = plan->layout.dim_axis[DIM_HEADS] >= 0 ? plan->layout.dim_axis[DIM_HEADS]
                                                           : plan->layout.dim_axis[DIM_FFN];
    prog->pp_axis = plan->layout.pp_axis;
    int p = plan->layout.stages > 0 ? plan->layout.stages : 1;
    SchedKind kind = plan->layout.schedule;
    if (p == 1 && kind != SCHED_NONE) kind = SCHED_NONE;
    if (schedule_build(arena, kind, p, (int)plan->train.micro_batches,
                       kind == SCHED_INTERLEAVED ? plan->layout.virtual_stages : 1, &prog->schedule) != 0)
        PARC_BUG("schedule_build refused a checked plan (p=%d m=%lld)", p, (long long)plan->train.micro_batches);
    char why[256];
    if (schedule_verify(&prog->schedule, why, sizeof why) != 0) PARC_BUG("unsound schedule: %s", why);
    if (plan->layout.embed_stage != 0 && plan->model.has_embed) {
        diag_error(plan->layout.stage_loc, "the pipeline starts on stage 0: put `embed;` in stage 0",
                   "the embedding is placed on stage %d", plan->layout.embed_stage);
        return NULL;
    }
    if (plan->layout.head_stage != p - 1) {
        diag_error(plan->layout.stage_loc, "the pipeline ends on the last stage: put `head;` there",
                   "the head is placed on stage %d of %d", plan->layout.head_stage, p);
        return NULL;
    }
    prog->nstages = p;
    prog->stages = arena_alloc(arena, sizeof(StageProgram) * (size_t)p);
    for (int s = 0; s < p && !lw.errors; s++) lower_stage(&lw, s);
    if (lw.errors) return NULL;
    ledger_compute(prog);
    verify_program(prog);
    return prog;
}

/* ------------------------------------------------------------ verifier */

void verify_program(const Program *prog)
{
    const Plan *plan = prog->plan;
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        for (int q = 0; q < SEQ_COUNT; q++) {
            const Seq *seq = &sp->seq[q];
            int block = q == SEQ_BLOCK_FWD || q == SEQ_BLOCK_BWD || q == SEQ_ZERO_GRADS_BLOCK ||
                        q == SEQ_GRAD_SYNC_BLOCK || q == SEQ_OPTIM_BLOCK;
            int per_micro = q <= SEQ_EMBED_BWD;
            for (int i = 0; i < seq->n; i++) {
                const Instr *ins = &seq->ins[i];
                if (ins->fn < 0) {
                    if (ins->coll == COLL_NONE) PARC_BUG("stage %d %s: a record without a collective", s, seq_names[q]);
                    continue;
                }
                if (ins->fn >= RT_FN_COUNT) PARC_BUG("stage %d %s: bad runtime function %d", s, seq_names[q], ins->fn);
                const char *sig = rt_fn_sigs[ins->fn];
                if ((int)strlen(sig) != ins->nargs + 1)
                    PARC_BUG("stage %d %s: %s takes %zu arguments, given %d", s, seq_names[q], rt_fn_names[ins->fn],
                             strlen(sig) - 1, ins->nargs);
                for (int k = 0; k < ins->nargs; k++) {
                    const Arg *a = &ins->args[k];
                    char want = sig[k + 1];
                    int is_ptr = a->kind == ARG_BUF || a->kind == ARG_NULL;
                    int is_f = a->kind == ARG_F64;
                    if ((want == 'p') != is_ptr || (want == 'd') != is_f)
                        PARC_BUG("stage %d %s: %s argument %d has the wrong kind", s, seq_names[q],
                                 rt_fn_names[ins->fn], k + 1);
                    if (a->kind == ARG_BUF) {
                        if (a->buf < 0 || a->buf >= sp->nbufs)
                            PARC_BUG("stage %d %s: %s names buffer %d of %d", s, seq_names[q], rt_fn_names[ins->fn],
                                     a->buf, sp->nbufs);
                        /* embed/head sequences run with l = 0, so INST_SLOT_L names resid[k] there */
                        if ((a->inst == INST_LAYER || a->inst == INST_PARITY) && !block)
                            PARC_BUG("stage %d %s: per-layer instance outside a layer loop", s, seq_names[q]);
                        if ((a->inst == INST_SLOT || a->inst == INST_SLOT_L) && !per_micro)
                            PARC_BUG("stage %d %s: per-slot instance outside a micro-batch", s, seq_names[q]);
                    }
                    if ((a->kind == ARG_COORD_TIMES || (a->kind == ARG_BUF && a->axis >= 0)) &&
                        a->axis >= plan->mesh.naxes)
                        PARC_BUG("stage %d %s: axis %d is not a mesh axis", s, seq_names[q], a->axis);
                }
                if (ins->coll != COLL_NONE && (ins->axis < 0 || ins->axis >= plan->mesh.naxes))
                    PARC_BUG("stage %d %s: collective over a non-axis group", s, seq_names[q]);
            }
        }
    }
}

/* ------------------------------------------------------------ dump */

static void arg_dump(const StageProgram *sp, const Arg *a, FILE *out)
{
    static const char *const inst_names[] = {"", "[layer]", "[l+%d,slot]", "[slot]", "[(l+%d)&1]"};
    switch (a->kind) {
    case ARG_NULL: fprintf(out, "null"); break;
    case ARG_BUF:
        fprintf(out, "%%%s", sp->bufs[a->buf].name);
        if (a->inst == INST_FIXED) {
            if (a->k) fprintf(out, "[%d]", a->k);
        } else fprintf(out, inst_names[a->inst], a->k);
        if (a->axis >= 0) fprintf(out, "+coord(%d)*%lld", a->axis, (long long)a->i);
        break;
    case ARG_INT: fprintf(out, "%lld", (long long)a->i); break;
    case ARG_F64: fprintf(out, "%.9g", a->d); break;
    case ARG_COORD_TIMES: fprintf(out, "coord(%d)*%lld", a->axis, (long long)a->i); break;
    case ARG_STEP: fprintf(out, "step"); break;
    case ARG_FIRST_SAMPLE: fprintf(out, "first_sample"); break;
    }
}

static const char *const class_names[] = {"weights", "grads", "master", "optim", "activations", "comm", "workspace"};

void program_dump(const Program *prog, FILE *out)
{
    const Plan *plan = prog->plan;
    fprintf(out, "program %s: %d stage(s), schedule %s, %lld micro-batches\n",
            plan->model.name ? plan->model.name : "model", prog->nstages, schedule_kind_name(prog->schedule.kind),
            (long long)plan->train.micro_batches);
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        fprintf(out, "\nstage %d: chunks %d, layers per chunk %d, first layers", s, sp->chunks, sp->layers_per_chunk);
        for (int c = 0; c < sp->chunks; c++) fprintf(out, " %d", sp->chunk_first_layer[c]);
        fprintf(out, ", embed %d, head %d, slots %d, message %lld elements\n", sp->has_embed, sp->has_head, sp->nslots,
                (long long)sp->boundary_elems);
        fprintf(out, "  gradient sync of layers: %s\n",
                sp->sync_in_backward ? "per layer, right after the last micro-batch's backward through it"
                                     : "reduce-scattered after every micro-batch's backward (ZeRO-2/3)");
        fprintf(out, "  buffers:\n");
        for (int b = 0; b < sp->nbufs; b++) {
            const Buffer *bf = &sp->bufs[b];
            fprintf(out, "    %%%-24s %-11s %-4s %10lld x %lld", bf->name, class_names[bf->klass],
                    bf->dtype == PRT_F32 ? "f32" : bf->dtype == PRT_BF16 ? "bf16" : bf->dtype == PRT_F16 ? "f16" : "i32",
                    (long long)bf->elems, (long long)bf->instances);
            if (bf->zero_axis >= 0) fprintf(out, " zero(%d)", bf->zero_axis);
            fprintf(out, "\n");
        }
        for (int q = 0; q < SEQ_COUNT; q++) {
            const Seq *seq = &sp->seq[q];
            if (!seq->n) continue;
            fprintf(out, "  %s:\n", seq_names[q]);
            for (int i = 0; i < seq->n; i++) {
                const Instr *ins = &seq->ins[i];
                if (ins->fn < 0) {
                    fprintf(out, "    ; in %s: %s over %s, %lld x 4 bytes\n",
                            ins->op >= 0 ? prog->graph->ops[ins->op].name : "-", coll_names[ins->coll],
                            plan->mesh.axes[ins->axis].name, (long long)ins->elems);
                    continue;
                }
                fprintf(out, "    %s(", rt_fn_names[ins->fn] + 4);
                for (int k = 0; k < ins->nargs; k++) {
                    if (k) fprintf(out, ", ");
                    arg_dump(sp, &ins->args[k], out);
                }
                fprintf(out, ")");
                if (ins->coll != COLL_NONE) fprintf(out, "    ; %s", ins->why ? ins->why : "");
                fprintf(out, "\n");
            }
        }
        fprintf(out, "  schedule:");
        for (int i = 0; i < sp->nitems; i++)
            fprintf(out, " %c%d.%d@%d", sp->items[i].kind == WORK_FORWARD ? 'F' : 'B', sp->items[i].micro,
                    sp->items[i].chunk, sp->slot_of_item[i]);
        fprintf(out, "\n");
    }
}
