/*
 * reshard.c — lowering pass: resharding, the only emitter of communication.
 *
 * Takes values (a buffer argument, the tensor it holds and its placement per
 * mesh axis) and the placement a consumer needs.  Each axis whose placement
 * differs gets the one collective the table names (reshard_collective):
 *
 *   Partial -> Replicated   all-reduce        Split(d) -> Replicated  all-gather
 *   Partial -> Split(d)     reduce-scatter    Replicated -> Split(d)  local slice
 *   Split(d) -> Split(e)    not lowered: reported as an error (no op's rule
 *                           asks for it; see docs/design.md)
 *   Split(routed) <-> Split(experts)  all-to-all of variable counts: routed
 *                           rows to the ranks holding their experts and back
 *                           (expert parallelism; routed_exchange below)
 *
 * Guarantees: every collective instruction runs over one mesh axis of size > 1
 * (a group of one needs none), carries its element count, element size, the
 * op and tensor that caused it and the rule (`why`); a step's output never
 * overlaps its input except an all-reduce in place.
 */
#include "lower.h"
#include <math.h>

CollKind reshard_collective(Placement from, Placement to)
{
    if (from.kind == to.kind && (from.kind != PLACE_S || from.dim == to.dim)) return COLL_NONE;
    if (from.kind == PLACE_S && to.kind == PLACE_S &&
        ((from.dim == DIM_ROUTED && to.dim == DIM_EXPERTS) || (from.dim == DIM_EXPERTS && to.dim == DIM_ROUTED)))
        return COLL_ALLTOALLV;
    if (from.kind == PLACE_P) return to.kind == PLACE_R ? COLL_ALLREDUCE : COLL_REDUCESCATTER;
    if (from.kind == PLACE_S) return to.kind == PLACE_R ? COLL_ALLGATHER : COLL_ALLTOALL;
    if (from.kind == PLACE_R && to.kind == PLACE_S) return COLL_SLICE;
    PARC_BUG("no collective turns %d into Partial", from.kind);
}

static int64_t val_elems(Lowerer *lw, const Val *v)
{
    return program_local_numel(lw->plan, &lw->g->tensors[v->tensor], v->place);
}

/* A collective moves elements of its source buffer's dtype (fp32 gradients of
 * 16-bit weights move as 4 bytes). */
static int elem_dtype_of(Lowerer *lw, Arg src)
{
    PARC_ASSERT(src.kind == ARG_BUF && src.buf >= 0);
    return lw->sp->bufs[src.buf].dtype;
}

/* outer/inner of a [outer, S, inner] collective splitting dim d. */
static void coll_shape(Lowerer *lw, int t, const Placement *small, Dim d, int64_t *outer, int64_t *inner)
{
    const Tensor *tt = &lw->g->tensors[t];
    if (d == DIM_FLAT) {
        *outer = 1;
        *inner = program_local_numel(lw->plan, tt, small);
        return;
    }
    int64_t sizes[IR_MAX_TDIMS];
    program_local_sizes(lw->plan, tt, small, sizes);
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

static int temp_buf_dtype(Lowerer *lw, const char *what, int t, const Placement *place, int klass, int dtype)
{
    const Tensor *tt = &lw->g->tensors[t];
    char name[160];
    snprintf(name, sizeof name, "%s.%s", tt->name, what);
    return program_buf_new(lw->prog, lw->sp, lw->buf_order, name, klass, dtype, program_local_numel(lw->plan, tt, place), 1);
}

int reshard_temp_buf(Lowerer *lw, const char *what, int t, const Placement *place, int klass)
{
    const Tensor *tt = &lw->g->tensors[t];
    int dtype = tt->kind == TENSOR_INDEX ? PRT_I32 : (tt->kind == TENSOR_STAT ? PRT_F32 : program_act_dtype(lw->plan));
    return temp_buf_dtype(lw, what, t, place, klass, dtype);
}

int reshard_stage_buf(Lowerer *lw, const char *name, int dtype, int64_t n)
{
    for (int b = 0; b < lw->sp->nbufs; b++)
        if (!strcmp(lw->sp->bufs[b].name, name)) {
            PARC_ASSERT(lw->sp->bufs[b].dtype == dtype && lw->sp->bufs[b].elems >= n);
            return b;
        }
    return program_buf_new(lw->prog, lw->sp, lw->buf_order, name, PRT_WORKSPACE, dtype, n, 1);
}

/* The routing bookkeeping of expert parallelism (i32), rewritten by each exchange. */
static int ep_buf(Lowerer *lw, const char *name, int64_t n) { return reshard_stage_buf(lw, name, PRT_I32, n); }

int reshard_ep_offsets(Lowerer *lw, int axis)
{
    int64_t local = lw->plan->model.block.moe.experts / lw->plan->mesh.axes[axis].size;
    return ep_buf(lw, "moe.ep.offsets", local + 1);
}

void reshard_ring_shift(Emit *e, const Op *op, int axis, Arg out, Arg in, int64_t n, int grad)
{
    Lowerer *lw = e->lw;
    const char *ax = lw->plan->mesh.axes[axis].name;
    Instr *c = EMIT(e, RT_prt_shift_start, arg_int(axis), out, in, arg_int(n));
    c->coll = COLL_SHIFT;
    c->axis = axis;
    c->op = op->id;
    c->tensor = op->in[0];
    c->elems = n;
    c->elem_bytes = dtype_bytes(program_act_dtype(lw->plan));
    c->why = grad ? arena_printf(lw->arena,
                                 "ring attention over %s: the gradient of the keys and values of the chunk in hand, "
                                 "passed on with them (the last step brings each chunk's home)",
                                 ax)
                  : arena_printf(lw->arena,
                                 "ring attention over %s: the keys and values of the chunk in hand to the next rank, "
                                 "sent while this step computes on them",
                                 ax);
}

void reshard_ring_wait(Emit *e, const Op *op, int axis, Arg out)
{
    Instr *w = EMIT(e, RT_prt_comm_wait, out);
    w->axis = axis;
    w->op = op->id;
    w->tensor = op->in[0];
    w->why = "completes the ring step's shift before the next step reads the chunk";
}

/* Routed rows [routed, topk, W...] between the ranks of axis a that routed
 * them (Split(routed): this rank's tokens' rows, sorted by expert, as the
 * dispatch made them) and the ranks holding their experts (Split(experts):
 * every row for this rank's experts, expert-major, offsets in
 * moe.ep.offsets).  The counts come from the router's counts of the layer
 * and micro-batch being run (saved for the backward): how many rows go to
 * each rank (moe_rank_rows) and, by an all-to-all of each rank's counts of
 * the experts it holds, how many come from each source per local expert.
 * To the experts: alltoallv, then moe_regroup_fwd from (source, expert) to
 * expert-major order; back: the inverse regroup, then alltoallv home, where
 * the rows land in the order they left.  The exchange's row estimate
 * (elems) is the busiest rank's: balanced, every rank sends and receives its
 * tokens' rows, T x topk, times the plan's `imbalance` (the cost model's
 * all-to-all moving (n-1)/n of them off-rank). */
static Instr *routed_exchange(Emit *e, Val v, Val nv, int a, int dtype, int op)
{
    Lowerer *lw = e->lw;
    const Plan *plan = lw->plan;
    int t = v.tensor;
    const Tensor *tt = &lw->g->tensors[t];
    PARC_ASSERT(tt->ndim >= 3 && tt->dims[0] == DIM_ROUTED && tt->dims[1] == DIM_TOPK && lw->g->moe_counts >= 0);
    int to_expert = nv.place[a].dim == DIM_EXPERTS;
    int64_t S = plan->mesh.axes[a].size, E = plan->model.block.moe.experts, El = E / S;
    int64_t sizes[IR_MAX_TDIMS], W = 1;
    program_local_sizes(plan, tt, nv.place, sizes);
    for (int d = 2; d < tt->ndim; d++) W *= sizes[d];
    const Placement *tokens = to_expert ? v.place : nv.place, *experts = to_expert ? nv.place : v.place;
    int64_t token_rows = program_local_numel(plan, tt, tokens) / W;
    int64_t expert_rows = program_local_numel(plan, tt, experts) / W;
    Arg counts = arg_value(lw, lw->g->moe_counts);
    Arg recv = arg_buf(ep_buf(lw, "moe.ep.recv", S), INST_FIXED, 0);
    Arg peer = arg_buf(ep_buf(lw, "moe.ep.counts", S * El), INST_FIXED, 0);
    Instr *c = EMIT(e, RT_prt_alltoall, arg_int(a), peer, counts, arg_int(1), arg_int(El));
    c->coll = COLL_ALLTOALL;
    c->axis = a;
    c->op = op;
    c->tensor = lw->g->moe_counts;
    c->elems = E;
    c->elem_bytes = 4;
    c->why = arena_printf(lw->arena,
                          "expert parallelism: each rank's tokens per expert to the rank of %s holding it, the "
                          "counts of the exchange of %s",
                          plan->mesh.axes[a].name, tt->name);
    Instr *x;
    if (to_expert) {
        Arg send = arg_buf(ep_buf(lw, "moe.ep.send", S), INST_FIXED, 0);
        Arg arrived = arg_buf(temp_buf_dtype(lw, "arrived", t, nv.place, PRT_WORKSPACE, dtype), INST_FIXED, 0);
        EMIT(e, RT_prt_moe_rank_rows, send, counts, arg_int(S), arg_int(E));
        x = EMIT(e, RT_prt_alltoallv, arg_int(a), arrived, v.arg, send, recv, arg_int(expert_rows), arg_int(W));
        EMIT(e, RT_prt_moe_regroup_fwd, nv.arg, arg_buf(reshard_ep_offsets(lw, a), INST_FIXED, 0), arrived, peer,
             arg_int(S), arg_int(El), arg_int(W), arg_int(1));
    } else {
        Arg back = arg_buf(ep_buf(lw, "moe.ep.back", S), INST_FIXED, 0);
        Arg by_source = arg_buf(temp_buf_dtype(lw, "by_source", t, v.place, PRT_WORKSPACE, dtype), INST_FIXED, 0);
        EMIT(e, RT_prt_moe_rank_rows, back, peer, arg_int(S), arg_int(S * El));
        EMIT(e, RT_prt_moe_regroup_fwd, by_source, arg_null(), v.arg, peer, arg_int(S), arg_int(El), arg_int(W),
             arg_int(0));
        x = EMIT(e, RT_prt_alltoallv, arg_int(a), nv.arg, by_source, back, recv, arg_int(token_rows), arg_int(W));
    }
    x->elems = (int64_t)llround((double)(token_rows * W) * plan->model.block.moe.imbalance);
    return x;
}

static int arg_same(Arg x, Arg y)
{
    return x.kind == y.kind && x.inst == y.inst && x.axis == y.axis && x.buf == y.buf && x.k == y.k && x.i == y.i;
}

/* The mesh axes (bit a) that move as one derived axis: every part of it
 * changes the same way, by a collective that a group of their ranks runs as
 * one (a sum, or a flat shard's scatter, gather or slice); chosen[d - naxes]
 * marks those derived axes.  The widest group wins: plan_derive_axes makes
 * batch's own derived axis before the data group that contains it, so the
 * later ones are tried first. */
static unsigned fused_parts(const Lowerer *lw, const Val *v, const Placement *to, int *chosen)
{
    const Mesh *m = &lw->plan->mesh;
    unsigned fused = 0;
    for (int d = m->naxes + m->nderived - 1; d >= m->naxes; d--) {
        unsigned parts = m->axes[d].parts;
        chosen[d - m->naxes] = 0;
        int first = -1, same = !(parts & fused);
        for (int a = 0; a < m->naxes && same; a++) {
            if (!(parts >> a & 1)) continue;
            if (first < 0) first = a;
            same = m->axes[a].size > 1 && place_eq(v->place[a], v->place[first]) && place_eq(to[a], to[first]);
        }
        if (!same || first < 0) continue;
        CollKind c = reshard_collective(v->place[first], to[first]);
        if (c == COLL_ALLREDUCE || ((c == COLL_REDUCESCATTER || c == COLL_SLICE) && to[first].dim == DIM_FLAT) ||
            (c == COLL_ALLGATHER && v->place[first].dim == DIM_FLAT)) {
            fused |= parts;
            chosen[d - m->naxes] = 1;
        }
    }
    return fused;
}

/* The steps of a move, in mesh order: each mesh axis, a chosen derived axis
 * (fused_parts) at its first part in place of all its parts. */
static int reshard_steps(const Lowerer *lw, const Val *v, const Placement *to, int *steps)
{
    const Mesh *m = &lw->plan->mesh;
    int chosen[PARC_MAX_DERIVED] = {0};
    unsigned fused = fused_parts(lw, v, to, chosen);
    int n = 0;
    for (int a = 0; a < m->naxes; a++) {
        if (!(fused >> a & 1)) {
            steps[n++] = a;
            continue;
        }
        for (int d = m->naxes; d < m->naxes + m->nderived; d++)
            if (chosen[d - m->naxes] && (m->axes[d].parts & ((2u << a) - 1)) == 1u << a)
                steps[n++] = d; /* a is the derived axis's first part */
    }
    return n;
}

/* Moves value v to placement `to` step by step (reshard_steps: a mesh axis,
 * or a derived axis whose parts move together), each step one collective
 * from the table; returns the new value (fresh workspace buffers).  `why`
 * names the rule; op is the graph op that causes it.  Elements of the step's
 * smaller side go through a fresh buffer when the destination shares the
 * source's buffer: a gather's source is copied out first, a scatter or slice
 * writes a fresh buffer copied into dst after. */
Val reshard_to(Emit *e, Val v, const Placement *to, int op, const char *why, int is_grad, const Arg *dst)
{
    Lowerer *lw = e->lw;
    const Plan *plan = lw->plan;
    int steps[PARC_MESH_SLOTS], nsteps = reshard_steps(lw, &v, to, steps);
    int last = -1;
    for (int k = 0; k < nsteps; k++) {
        Placement from = place_on(plan, v.place, steps[k]);
        if (reshard_collective(from, place_on(plan, to, steps[k])) != COLL_NONE && plan->mesh.axes[steps[k]].size > 1)
            last = steps[k];
    }
    for (int k = 0; k < nsteps; k++) {
        int a = steps[k]; /* a mesh axis, or a derived one moving all its parts */
        Placement from = place_on(plan, v.place, a), dest = place_on(plan, to, a);
        CollKind c = reshard_collective(from, dest);
        if (c == COLL_NONE) continue;
        if (plan->mesh.axes[a].size == 1) {
            /* a group of one: every placement is the whole tensor */
            place_set_on(plan, v.place, a, dest);
            continue;
        }
        int t = v.tensor;
        int klass = lw->g->tensors[t].kind == TENSOR_PARAM ? PRT_COMM : PRT_WORKSPACE;
        int dtype = elem_dtype_of(lw, v.arg); /* a step keeps its value's dtype */
        Val nv = v;
        place_set_on(plan, nv.place, a, dest);
        int into_dst = dst && a == last;
        int overlap = into_dst && dst->buf == v.arg.buf && c != COLL_ALLREDUCE;
        if (overlap && c == COLL_ALLGATHER) {
            int shard = temp_buf_dtype(lw, "shard", t, v.place, klass, dtype);
            EMIT(e, RT_prt_copy, arg_buf(shard, INST_FIXED, 0), v.arg, arg_int(val_elems(lw, &v)));
            v.arg = arg_buf(shard, INST_FIXED, 0);
            overlap = 0;
        }
        if (into_dst && !overlap) {
            nv.arg = *dst;
        } else {
            int buf = temp_buf_dtype(lw, is_grad ? "grad.resharded" : "resharded", t, nv.place, klass, dtype);
            nv.arg = arg_buf(buf, INST_FIXED, 0);
        }
        int64_t outer, inner;
        Instr *ins;
        switch (c) {
        case COLL_ALLREDUCE: {
            int64_t n = val_elems(lw, &v);
            if (!arg_same(nv.arg, v.arg)) EMIT(e, RT_prt_copy, nv.arg, v.arg, arg_int(n));
            ins = EMIT(e, RT_prt_allreduce, arg_int(a), nv.arg, arg_int(n));
            ins->elems = n;
            break;
        }
        case COLL_ALLGATHER:
            coll_shape(lw, t, v.place, (Dim)from.dim, &outer, &inner);
            ins = EMIT(e, RT_prt_allgather, arg_int(a), nv.arg, v.arg, arg_int(outer), arg_int(inner));
            ins->elems = outer * inner * lw->plan->mesh.axes[a].size;
            break;
        case COLL_REDUCESCATTER:
            coll_shape(lw, t, nv.place, (Dim)dest.dim, &outer, &inner);
            ins = EMIT(e, RT_prt_reducescatter, arg_int(a), nv.arg, v.arg, arg_int(outer), arg_int(inner));
            ins->elems = outer * inner * lw->plan->mesh.axes[a].size;
            break;
        case COLL_ALLTOALLV:
            ins = routed_exchange(e, v, nv, a, dtype, op);
            break;
        case COLL_SLICE:
            coll_shape(lw, t, nv.place, (Dim)dest.dim, &outer, &inner);
            ins = EMIT(e, RT_prt_slice, arg_int(a), nv.arg, v.arg, arg_int(outer), arg_int(inner));
            ins->elems = outer * inner;
            break;
        default:
            diag_error(lw->g->ops[op >= 0 ? op : 0].loc, NULL,
                       "moving `%s` from split %s to split %s on `%s` needs an all-to-all, which the runtime does "
                       "not lower yet",
                       lw->g->tensors[t].name, dim_names[from.dim], dim_names[dest.dim], lw->plan->mesh.axes[a].name);
            lw->errors++;
            return v;
        }
        ins->coll = c;
        ins->axis = a;
        ins->op = op;
        ins->tensor = t;
        ins->elem_bytes = dtype_bytes(dtype);
        ins->why = why;
        if (overlap) {
            int64_t n = val_elems(lw, &nv);
            EMIT(e, RT_prt_copy, *dst, nv.arg, arg_int(n));
            nv.arg = *dst;
        }
        v = nv;
    }
    return v;
}

static Val val_of(Lowerer *lw, int t)
{
    Val v;
    v.arg = arg_value(lw, t);
    v.tensor = t;
    for (int a = 0; a < lw->naxes; a++) v.place[a] = lw->bind[t].produced[a];
    return v;
}

/* How producer made a Partial value, per its row of the ops table. */
static const char *op_partial_verb(const Op *prod)
{
    const char *verb = op_table[prod->kind].partial;
    if (!verb) PARC_BUG("op %s produced a Partial value its row does not account for", prod->name);
    return verb;
}

/* The dim the producer's rule splits among its inputs, then its parameters,
 * on axis a: the one a Partial output sums over. */
static Dim split_dim(const Lowerer *lw, const Op *prod, int a)
{
    const OpPlace *r = lower_rule(lw, prod->id, a);
    for (int i = 0; i < prod->nin; i++)
        if (r->in[i].kind == PLACE_S) return (Dim)r->in[i].dim;
    for (int i = 0; i < prod->nparam; i++)
        if (r->param[i].kind == PLACE_S) return (Dim)r->param[i].dim;
    return (Dim)r->in[0].dim;
}

const char *reshard_why(Lowerer *lw, const Op *consumer, int t, const Placement *to, int backward)
{
    const Graph *g = lw->g;
    const Tensor *tt = &g->tensors[t];
    char buf[512], flat[128] = "";
    size_t used = 0, flat_len = 0;
    buf[0] = 0;
    /* a weight ZeRO-3 shards over several axes (a group) is gathered over all
     * of them: one clause names them, at the first */
    for (int a = 0; a < lw->naxes && !backward && tt->kind == TENSOR_PARAM && flat_len < sizeof flat; a++) {
        Placement p = lw->bind[t].produced[a];
        if (p.kind == PLACE_S && p.dim == DIM_FLAT && reshard_collective(p, to[a]) != COLL_NONE)
            flat_len += (size_t)snprintf(flat + flat_len, sizeof flat - flat_len, "%s%s", flat_len ? " and " : "",
                                         lw->plan->mesh.axes[a].name);
    }
    int flat_said = 0;
    for (int a = 0; a < lw->naxes; a++) {
        Placement want = backward ? lw->bind[t].grad[a] : to[a];
        CollKind c;
        if (backward) c = reshard_collective(to[a], lw->bind[t].grad[a]);
        else c = reshard_collective(lw->bind[t].produced[a], to[a]);
        if (c == COLL_NONE) continue;
        const char *ax = lw->plan->mesh.axes[a].name;
        int n;
        int flat_here = !backward && tt->kind == TENSOR_PARAM && lw->bind[t].produced[a].kind == PLACE_S &&
                        lw->bind[t].produced[a].dim == DIM_FLAT;
        if (flat_here && flat_said) continue;
        if (used > 0) { /* a move on several axes: one clause each */
            n = snprintf(buf + used, sizeof buf - used, "; ");
            if (n < 0 || (used += (size_t)n) >= sizeof buf) break;
        }
        if (c == COLL_ALLTOALLV) {
            int in = want.dim == DIM_EXPERTS;
            if (!backward)
                n = snprintf(buf + used, sizeof buf - used,
                             in ? "expert parallelism: %s takes the rows of %s routed to its experts, from every rank of %s"
                                : "expert parallelism: %s takes its tokens' rows of %s back from the ranks of %s holding "
                                  "their experts",
                             consumer->name, tt->name, ax);
            else
                n = snprintf(buf + used, sizeof buf - used,
                             in ? "expert parallelism: the gradient of %s to the ranks of %s holding its rows' experts"
                                : "expert parallelism: the gradient of %s back to the ranks of %s its tokens came from",
                             tt->name, ax);
        } else if (!backward) {
            Placement p = lw->bind[t].produced[a];
            const Op *prod = tt->producer >= 0 ? &g->ops[tt->producer] : NULL;
            if (flat_here) {
                n = snprintf(buf + used, sizeof buf - used, "%s needs %s whole; ZeRO-3 shards it over %s",
                             consumer->name, tt->name, flat);
                flat_said = 1;
            } else if (p.kind == PLACE_P && prod)
                n = snprintf(buf + used, sizeof buf - used, "%s %s %s split on %s -> Partial; %s needs %s",
                             prod->name, op_partial_verb(prod), dim_names[split_dim(lw, prod, a)], ax, consumer->name,
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

void reshard_window_open(Lowerer *lw, unsigned regions, int serves_backward)
{
    if (!lw->window_val) {
        size_t n = (size_t)(lw->g->ntensors ? lw->g->ntensors : 1);
        lw->window_val = arena_alloc(lw->arena, sizeof(Val) * n);
        lw->window_has = arena_alloc(lw->arena, n);
        memset(lw->window_has, 0, n);
    }
    lw->window_regions |= regions;
    if (serves_backward) lw->window_backward |= regions;
    else lw->window_backward &= ~regions;
}

void reshard_window_close(Lowerer *lw, unsigned regions)
{
    for (int t = 0; t < lw->g->ntensors && lw->window_has; t++)
        if (regions & REGION_BIT(lw->g->tensors[t].region)) lw->window_has[t] = 0;
    lw->window_regions &= ~regions;
    lw->window_backward &= ~regions;
}

void reshard_window_save(Lowerer *lw, unsigned regions, Val **val, unsigned char **has)
{
    size_t n = (size_t)(lw->g->ntensors ? lw->g->ntensors : 1);
    *val = arena_alloc(lw->arena, sizeof(Val) * n);
    *has = arena_alloc(lw->arena, n);
    memset(*has, 0, n);
    for (int t = 0; t < lw->g->ntensors && lw->window_has; t++)
        if ((regions & REGION_BIT(lw->g->tensors[t].region)) && lw->window_has[t])
            (*val)[t] = lw->window_val[t], (*has)[t] = 1;
}

void reshard_window_restore(Lowerer *lw, unsigned regions, const Val *val, const unsigned char *has)
{
    reshard_window_open(lw, regions, 1);
    for (int t = 0; t < lw->g->ntensors && val; t++)
        if ((regions & REGION_BIT(lw->g->tensors[t].region)) && has[t])
            lw->window_val[t] = val[t], lw->window_has[t] = 1;
}

/* Does the open window of t's region serve this use? */
static int window_serves(const Lowerer *lw, int t)
{
    unsigned bit = REGION_BIT(lw->g->tensors[t].region);
    return (lw->window_regions & bit) && (!lw->replaying || (lw->window_backward & bit));
}

/* The copy of parameter t in placement `to` the open window holds, if any. */
static const Val *window_copy(const Lowerer *lw, int t, const Placement *to)
{
    if (!window_serves(lw, t) || !lw->window_has[t]) return NULL;
    const Val *w = &lw->window_val[t];
    for (int a = 0; a < lw->naxes; a++)
        if (!place_eq(w->place[a], to[a])) return NULL;
    return w;
}

/* The buffer that keeps input i of op as the forward exchanged it
 * (Lowerer.kept_in): an activation per in-flight micro-batch (and layer), as
 * a saved value's buffer is (lower.c, bind_region), workspace where full
 * recomputation runs the forward again right before the backward. */
static Arg kept_arg(Lowerer *lw, const Op *op, int i, const Placement *to)
{
    int t = op->in[i];
    const Tensor *tt = &lw->g->tensors[t];
    int block = tt->region == REGION_BLOCK;
    int full = block && lw->plan->layout.recompute == RECOMPUTE_FULL;
    int mode = full ? INST_FIXED : block ? INST_SLOT_L : INST_SLOT;
    if (lw->kept_buf[op->id] < 0) {
        int64_t inst = full ? 1 : block ? (int64_t)lw->sp->max_chunk_layers * lw->sp->nslots : lw->sp->nslots;
        lw->kept_buf[op->id] = program_buf_new(lw->prog, lw->sp, lw->buf_order,
                                               arena_printf(lw->arena, "%s.%s.kept", tt->name, op->name),
                                               full ? PRT_WORKSPACE : PRT_ACTIVATIONS, program_act_dtype(lw->plan),
                                               program_local_numel(lw->plan, tt, to), inst);
    }
    return arg_buf(lw->kept_buf[op->id], mode, 0);
}

/* The value an op reads for input i: the tensor itself, or a resharded copy
 * (for the backward, the forward's kept copy where the op keeps it). */
Val reshard_input(Emit *e, const Op *op, int i, int is_param)
{
    Lowerer *lw = e->lw;
    int t = is_param ? op->param[i] : op->in[i];
    Val v = val_of(lw, t);
    Placement to[PARC_MAX_AXES];
    int differs = 0;
    for (int a = 0; a < lw->naxes; a++) {
        OpPlace *r = lower_rule(lw, op->id, a);
        to[a] = is_param ? r->param[i] : r->in[i];
        if (!place_eq(to[a], v.place[a]) && lw->plan->mesh.axes[a].size > 1) differs = 1;
    }
    if (!differs) return v;
    if (!is_param && lw->kept_in && (lw->kept_in[op->id] >> i & 1)) {
        Arg kept = kept_arg(lw, op, i, to);
        if (lw->replaying) {
            Val k = v;
            k.arg = kept;
            memcpy(k.place, to, sizeof k.place);
            return k;
        }
        return reshard_to(e, v, to, op->id, reshard_why(lw, op, t, to, 0), 0, &kept);
    }
    const Val *kept = is_param ? window_copy(lw, t, to) : NULL;
    if (kept) return *kept;
    int pass = !is_param && !lw->replaying && lw->copy_has; /* a forward pass's copy (Lowerer.copy_val) */
    if (pass && lw->copy_has[t]) {
        const Val *c = &lw->copy_val[t];
        int same = 1;
        for (int a = 0; a < lw->naxes; a++) same &= place_eq(c->place[a], to[a]);
        if (same) return *c;
    }
    const char *why = reshard_why(lw, op, t, to, 0);
    if (lw->replaying)
        why = arena_printf(lw->arena, "again for the backward of %s (the forward's copy was not kept): %s", op->name,
                           why);
    Val r = reshard_to(e, v, to, op->id, why, 0, NULL);
    if (is_param && window_serves(lw, t)) {
        lw->window_val[t] = r;
        lw->window_has[t] = 1;
    }
    if (pass) lw->copy_val[t] = r, lw->copy_has[t] = 1;
    return r;
}

/* ------------------------------------------------------------ the embedding group */

/* Megatron's rule for a head tied to the embedding across pipeline stages: the
 * first stage's table and the last stage's copy each accumulate their own
 * uses' gradient; summing the two over the embedding group (coordinates 0 and
 * p - 1 of the pipeline axis, a group of two whatever p is) gives both copies
 * the whole gradient, so their optimizer steps keep them equal. */
void reshard_embedding_group(Emit *e, int t, Arg grad, int64_t n)
{
    Lowerer *lw = e->lw;
    int pp = lw->prog->pp_axis;
    PARC_ASSERT(pp >= 0 && lw->plan->mesh.axes[pp].size > 1 && grad.kind == ARG_BUF);
    Instr *ins = EMIT(e, RT_prt_allreduce_ends, arg_int(pp), grad, arg_int(n));
    ins->coll = COLL_ALLREDUCE;
    ins->axis = pp;
    ins->group = 2;
    ins->elems = n;
    ins->elem_bytes = dtype_bytes(lw->sp->bufs[grad.buf].dtype);
    ins->op = -1;
    ins->tensor = t;
    ins->why = arena_printf(lw->arena,
                            "tied head: %s is held by the first stage (lookup) and the last (head); their gradients "
                            "are summed over the embedding group (first and last stage on %s)",
                            lw->g->tensors[t].name, lw->plan->mesh.axes[pp].name);
}

/* ------------------------------------------------------------ pipeline messages */

typedef struct Message {
    SeqKind seq;
    RtFn fn;
    CollKind coll;
    int delta;        /* the peer: coord + delta on the pipeline axis */
    int buf, inst, k; /* the stream buffer's instance */
    int chunk_delta;  /* the receiver's chunk minus the sender's (tags name the receiver's) */
    int grad;         /* 0 activations, 1 gradients */
    const char *why;
} Message;

static Instr message_instr(const Program *prog, const StageProgram *sp, RtFn fn, CollKind coll, int axis,
                           int64_t elems, int buf, const char *why)
{
    Instr ins;
    memset(&ins, 0, sizeof ins);
    ins.fn = (int)fn;
    ins.coll = coll;
    ins.axis = axis;
    ins.elems = elems;
    ins.elem_bytes = dtype_bytes(sp->bufs[buf].dtype);
    ins.op = -1;
    ins.entry = ENTRY_NONE;
    ins.shape.axis = -1;
    ins.tensor = prog->graph ? prog->graph->block_in : -1;
    ins.phase = PHASE_PIPELINE;
    ins.why = why;
    return ins;
}

/* With `pipeline_scatter on` (Megatron-LM's scatter/gather) the boundary is
 * whole on the tensor axis and identical on its ranks: each sends and
 * receives only its 1/tp block (the buffer at coord(tp) × part), and each
 * receive is followed by an in-place all-gather over tp into the whole
 * buffer (`in` is `out` plus this rank's block, outer 1). */
void reshard_pipeline(Arena *arena, const Program *prog, StageProgram *sp)
{
    if (prog->nstages <= 1) return;
    int s = sp->stage, last = prog->nstages - 1;
    const Plan *plan = prog->plan;
    int scatter = plan->layout.pipeline_scatter, tp = prog->tp_axis;
    int64_t whole = sp->boundary_elems, part = whole;
    if (scatter) {
        PARC_ASSERT(tp >= 0 && plan->mesh.axes[tp].size > 1 && whole % plan->mesh.axes[tp].size == 0);
        part = whole / plan->mesh.axes[tp].size;
    }
    /* the activations leave from resid[L] (L the chunk's layers) and arrive in resid[0] of the slot;
     * gradients leave from the ping-pong half layer 0 wrote and arrive in the
     * half the last layer reads; wrapping to the next chunk happens at the
     * last stage forward and the first stage backward */
    const Message msgs[4] = {
        {SEQ_RECV_FWD, RT_prt_recv, COLL_RECV, -1, sp->resid_buf, INST_SLOT_L, 0, 0, 0,
         scatter ? "this tensor rank's 1/tp of the activations from the previous stage (pipeline scatter/gather)"
                 : "activations from the previous stage"},
        {SEQ_SEND_FWD, RT_prt_send, COLL_SEND, +1, sp->resid_buf, INST_SLOT_END, 0, s == last ? 1 : 0, 0,
         scatter ? "this tensor rank's 1/tp of the activations to the next stage (pipeline scatter/gather; one "
                   "message per micro-batch per chunk)"
                 : "activations to the next stage (one message per micro-batch per chunk)"},
        {SEQ_RECV_BWD, RT_prt_recv, COLL_RECV, +1, sp->dresid_buf, INST_PARITY_END, 0, 0, 1,
         scatter ? "this tensor rank's 1/tp of the gradients from the next stage (pipeline scatter/gather)"
                 : "gradients from the next stage"},
        {SEQ_SEND_BWD, RT_prt_send, COLL_SEND, -1, sp->dresid_buf, INST_FIXED, 0, s == 0 ? -1 : 0, 1,
         scatter ? "this tensor rank's 1/tp of the gradients to the previous stage (pipeline scatter/gather; one "
                   "message per micro-batch per chunk)"
                 : "gradients to the previous stage (one message per micro-batch per chunk)"},
    };
    for (int i = 0; i < 4; i++) {
        const Message *m = &msgs[i];
        if (program_seq_calls_per_step(prog, sp, m->seq) == 0) continue;
        Seq *q = &sp->seq[m->seq];
        Arg all = arg_buf(m->buf, m->inst, m->k);
        Arg mine = scatter ? arg_buf_off(m->buf, m->inst, m->k, tp, part) : all;
        Instr ins = message_instr(prog, sp, m->fn, m->coll, prog->pp_axis, part, m->buf, m->why);
        const Arg args[] = {arg_int(prog->pp_axis), arg_int(m->delta), mine, arg_int(part),
                            {ARG_TAG, 0, -1, -1, m->chunk_delta, m->grad, 0}};
        program_push_args(&ins, (int)(sizeof args / sizeof args[0]), args);
        ARR_PUSH(arena, q->ins, q->n, q->cap, ins);
        if (!scatter || m->fn != RT_prt_recv) continue;
        const char *why = arena_printf(
            arena,
            "pipeline scatter/gather: the %s arrive as 1/%d per rank of %s (Megatron-LM); all-gathered over %s into "
            "the whole boundary",
            m->grad ? "gradients" : "activations", plan->mesh.axes[tp].size, plan->mesh.axes[tp].name,
            plan->mesh.axes[tp].name);
        Instr gather = message_instr(prog, sp, RT_prt_allgather, COLL_ALLGATHER, tp, whole, m->buf, why);
        const Arg gargs[] = {arg_int(tp), all, mine, arg_int(1), arg_int(part)};
        program_push_args(&gather, (int)(sizeof gargs / sizeof gargs[0]), gargs);
        ARR_PUSH(arena, q->ins, q->n, q->cap, gather);
    }
}
