/*
 * autodiff.c — lowering pass: the forward and backward programs of a region.
 *
 * Takes the placed graph (place.c) and the current stage's buffers (lower.c).
 * The forward runs each op's row (op_table) on its inputs, resharded to the
 * placements its rule asks for.  The backward runs the ops in reverse: each
 * op's backward reads its saved inputs (resharded again when the forward's
 * copy was not kept), writes its input gradients in the placements its rule
 * says, and those move back to the placement each producer's gradient has
 * through the same resharding table — so the transpose of every collective
 * (all-gather <-> reduce-scatter, the Megatron f/g pair) falls out.
 *
 * Guarantees: every op's entry instruction carries its shape, FLOPs and op;
 * gradients of a region's activations are zeroed before its backward (except
 * the incoming one); parameter gradients accumulate in their accumulation
 * placement (ZeRO-2/3: a whole per-micro-batch buffer scattered after).
 * An activation gradient's zero is dropped where its first writer writes it
 * whole instead of adding onto zeros (first_write.c).
 */
#include "lower.h"

int autodiff_mark_entry(Emit *e, int idx, const Op *op, const OpShape *s, OpEntry entry)
{
    if (idx < 0) return idx;
    Instr *ins = &e->seq->ins[idx];
    ins->op = op->id;
    ins->entry = entry;
    ins->shape = *s;
    ins->flops = op_table[op->kind].flops(s, entry == ENTRY_BACKWARD);
    return idx;
}

/* A bias op folded into the linear before it (ops_fold_bias): -1, or the
 * linear's call takes it; the bias op itself emits nothing. */
static const Op *folded_bias(const Lowerer *lw, const Op *op)
{
    int b = lw->bias_fold[op->id];
    return b >= 0 && op->kind != OP_BIAS ? &lw->g->ops[b] : NULL;
}

/* The folded bias's FLOPs join its linear's entry. */
static void mark_folded(Emit *e, int idx, const Op *bias, const OpArgs *args, int backward)
{
    if (idx < 0) return;
    OpShape bs;
    op_table[OP_BIAS].shape(e->lw, bias, args, &bs);
    e->seq->ins[idx].flops += op_table[OP_BIAS].flops(&bs, backward);
}

/* Forward of one op. */
static void emit_forward(Emit *e, const Op *op)
{
    Lowerer *lw = e->lw;
    const OpDesc *d = &op_table[op->kind];
    if (op->kind == OP_BIAS && lw->bias_fold[op->id] >= 0) return;
    const Op *bias = folded_bias(lw, op);
    Val in[3], pr[2];
    PARC_ASSERT(op->nin <= 3 && op->nparam <= 2);
    for (int i = 0; i < op->nin; i++) in[i] = reshard_input(e, op, i, 0);
    for (int i = 0; i < op->nparam; i++) pr[i] = reshard_input(e, op, i, 1);
    if (bias) pr[op->nparam] = reshard_input(e, bias, 0, 1);
    int out = bias ? bias->out : op->out;
    OpArgs args = {in, pr, out >= 0 && lw->bind[out].value.buf >= 0 ? arg_value(lw, out) : arg_null(), arg_null(),
                   NULL, NULL};
    OpShape s;
    d->shape(lw, op, &args, &s);
    int idx = d->emit_fwd(e, op, &args, &s);
    autodiff_mark_entry(e, idx, op, &s, ENTRY_FORWARD);
    if (bias) mark_folded(e, idx, bias, &args, 0);
}

static GradDst grad_dst(Emit *e, const Op *op, int i, int is_param)
{
    Lowerer *lw = e->lw;
    GradDst d = {0};
    d.tensor = is_param ? op->param[i] : op->in[i];
    d.tmp = -1;
    const Binding *b = &lw->bind[d.tensor];
    int differs = 0;
    for (int a = 0; a < lw->naxes; a++) {
        OpPlace *r = lower_rule(lw, op->id, a);
        d.place[a] = is_param ? r->dparam[i] : r->din[i];
        if (!place_eq(d.place[a], b->grad[a]) && lw->plan->mesh.axes[a].size > 1) differs = 1;
    }
    if (is_param) {
        /* parameter gradients accumulate in their accumulation placement */
        d.arg = b->full_grad >= 0 ? arg_buf(b->full_grad, INST_FIXED, 0) : arg_grad(lw, d.tensor);
        return d;
    }
    if (b->gradient.buf < 0) {
        d.arg = arg_null();
        return d;
    }
    if (!differs) {
        d.arg = arg_grad(lw, d.tensor);
        return d;
    }
    Placement tmp_place[PARC_MAX_AXES];
    for (int a = 0; a < lw->naxes; a++) tmp_place[a] = d.place[a].kind == PLACE_P ? PLACE_REP : d.place[a];
    d.tmp = reshard_temp_buf(lw, "grad.part", d.tensor, tmp_place, PRT_WORKSPACE);
    d.arg = arg_buf(d.tmp, INST_FIXED, 0);
    int64_t n = program_local_numel(lw->plan, &lw->g->tensors[d.tensor], tmp_place);
    EMIT(e, RT_prt_zero, d.arg, arg_int(n));
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
    const Placement *to = lw->bind[d->tensor].grad;
    Val r = reshard_to(e, v, to, op->id, reshard_why(lw, op, d->tensor, d->place, 1), 1, NULL);
    int64_t n = program_local_numel(lw->plan, &lw->g->tensors[d->tensor], to);
    EMIT(e, RT_prt_acc, arg_grad(lw, d->tensor), r.arg, arg_int(n));
}

/* An input or parameter the backward does not read: no argument, the rule's
 * placement (the shape reads it). */
static Val unread(const Lowerer *lw, const Op *op, int i, int is_param)
{
    Val v;
    v.arg = arg_null();
    v.tensor = is_param ? op->param[i] : op->in[i];
    for (int a = 0; a < lw->naxes; a++) {
        const OpPlace *r = lower_rule(lw, op->id, a);
        v.place[a] = is_param ? r->param[i] : r->in[i];
    }
    return v;
}

static void emit_backward(Emit *e, const Op *op)
{
    Lowerer *lw = e->lw;
    const OpDesc *d = &op_table[op->kind];
    if (!d->emit_bwd || (op->kind == OP_BIAS && lw->bias_fold[op->id] >= 0)) return;
    const Op *bias = folded_bias(lw, op);
    int out = bias ? bias->out : op->out;
    /* inputs as the forward read them (resharded copies are replayed) */
    Val in[3], pr[2];
    const int nin = op->nin, nparam = op->nparam;
    PARC_ASSERT(nin <= 3 && nparam + (bias != NULL) <= 2); /* Op's in[], param[]; a folded bias's one */
    lw->replaying = 1;
    for (int i = 0; i < nin; i++) {
        const Binding *b = &lw->bind[op->in[i]];
        int kept = lw->kept_in && (lw->kept_in[op->id] >> i & 1);
        in[i] = (b->needed && b->value.buf >= 0) || kept ? reshard_input(e, op, i, 0) : unread(lw, op, i, 0);
    }
    for (int i = 0; i < nparam; i++) pr[i] = d->reads_params ? reshard_input(e, op, i, 1) : unread(lw, op, i, 1);
    lw->replaying = 0;
    GradDst din[3], dp[2];
    for (int i = 0; i < nin; i++) din[i] = grad_dst(e, op, i, 0);
    for (int i = 0; i < nparam; i++) dp[i] = grad_dst(e, op, i, 1);
    if (bias) dp[nparam] = grad_dst(e, bias, 0, 1);
    OpArgs args = {in, pr, arg_null(), out >= 0 && lw->bind[out].gradient.buf >= 0 ? arg_grad(lw, out) : arg_null(),
                   din, dp};
    OpShape s;
    d->shape(lw, op, &args, &s);
    int idx = d->emit_bwd(e, op, &args, &s);
    autodiff_mark_entry(e, idx, op, &s, ENTRY_BACKWARD);
    if (bias) mark_folded(e, idx, bias, &args, 1);
    for (int i = 0; i < op->nin; i++) grad_finish(e, op, &din[i]);
}

void autodiff_forward(Lowerer *lw, Seq *seq, Region r, Phase phase)
{
    Emit e = {lw, seq, phase};
    size_t n = (size_t)(lw->g->ntensors ? lw->g->ntensors : 1);
    if (!lw->copy_val) lw->copy_val = arena_alloc(lw->arena, sizeof(Val) * n);
    lw->copy_has = arena_alloc(lw->arena, n);
    memset(lw->copy_has, 0, n);
    for (int i = 0; i < lw->g->region_count[r]; i++) emit_forward(&e, &lw->g->ops[lw->g->region_first[r] + i]);
    lw->copy_has = NULL;
}

static void zero_region_grads(Emit *e, Region r, int skip_tensor)
{
    Lowerer *lw = e->lw;
    const Graph *g = lw->g;
    for (int t = 0; t < g->ntensors; t++) {
        if (g->tensors[t].region != r || lw->bind[t].gradient.buf < 0 || t == skip_tensor) continue;
        if (g->tensors[t].kind == TENSOR_PARAM) continue;
        EMIT(e, RT_prt_zero, arg_grad(lw, t), arg_int(program_local_numel(lw->plan, &g->tensors[t], lw->bind[t].grad)));
    }
}

void autodiff_backward(Lowerer *lw, Seq *seq, Region r, int incoming)
{
    Emit e = {lw, seq, PHASE_BACKWARD};
    const Graph *g = lw->g;
    /* the recompute forward's gathered weights serve this layer's backward */
    int window = r == REGION_BLOCK && lw->plan->layout.recompute == RECOMPUTE_FULL;
    if (window) {
        reshard_window_open(lw, REGION_BIT(REGION_BLOCK), 1);
        autodiff_forward(lw, seq, r, PHASE_RECOMPUTE);
    }
    zero_region_grads(&e, r, incoming);
    for (int t = 0; t < g->ntensors; t++)
        if (lw->bind[t].full_grad >= 0 && optim_full_grad_zeroed_in(lw, t, r)) {
            const Buffer *b = &lw->sp->bufs[lw->bind[t].full_grad];
            EMIT(&e, RT_prt_zero, arg_buf(lw->bind[t].full_grad, INST_FIXED, 0), arg_int(b->elems));
        }
    for (int i = g->region_count[r] - 1; i >= 0; i--) emit_backward(&e, &g->ops[g->region_first[r] + i]);
    if (window) reshard_window_close(lw, REGION_BIT(REGION_BLOCK));
    optim_emit_scatter(&e, r);
    first_write_seq(seq);
}
