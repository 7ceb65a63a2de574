/*
 * optim.c — lowering pass: parameters, gradient sync and the optimizer step.
 *
 * Takes the placed graph and the current stage.  A ZeRO stage is one row of
 * zero_rows: the placement on the ZeRO axis of the weights, of the gradient
 * buffer and of the optimizer state (whole, or this rank's share of the
 * flattened tensor).  Everything else follows by plain resharding: the
 * gradient moves from the placement it accumulated in to the optimizer's
 * (tensor axes first, the data axis last: DDP's all-reduce, ZeRO's
 * reduce-scatter), the step runs on the optimizer's placement, and the result
 * moves back to the weights' placement (ZeRO-1/2's all-gather).
 *
 * The gradient norm, every step (Megatron-LM and torchtitan log it; `clip`
 * uses it): once synced, each gradient adds its sum of squares to one scalar.
 * Over an axis that shards some parameter's optimizer placement (a tensor
 * axis, ZeRO's) or the pipeline's, the scalar is Partial and the resharding
 * table makes it whole (an all-reduce of one element), a gradient replicated
 * there counted by the ranks at coordinate 0 alone; over an axis where every
 * gradient is replicated (DDP's data axis) every rank counts its own equal
 * copy and nothing moves.  The runtime then has the norm and, with `clip`,
 * the factor min(1, clip / (norm + 1e-6)) (PyTorch's clip_grad_norm_) each
 * optimizer step scales its gradient by first.
 *
 * Guarantees: every parameter of a region bound on the stage has its weights,
 * gradient, optional fp32 master and moments; its gradient is zeroed at the
 * start of each step, synced after the last micro-batch and stepped once;
 * it is counted in the norm exactly once over the whole mesh.
 */
#include "lower.h"

typedef struct ZeroRow {
    /* on the ZeRO axis: PLACE_R = whole, split(DIM_FLAT) = this rank's share */
    Placement weights, grads, optim;
    const char *sync_why, *sync_why_bucketed; /* the data axis's gradient sync */
    const char *scatter_why;                  /* sharded gradients: the per-micro-batch scatter */
    const char *gather_why;                   /* whole weights, sharded optimizer: the gather back */
} ZeroRow;

#define WHOLE {PLACE_R, 0}
#define SHARD {PLACE_S, DIM_FLAT}
#define BUCKETED ", a bucket per layer after its last micro-batch's backward"
/* the data axis's sync into a sharded optimizer; ZeRO-2/3 gradients are
 * already this rank's share by then, so only ZeRO-1 reports it */
#define ZERO1_SYNC "ZeRO-1: gradients reduce-scattered so each rank updates its shard"

static const ZeroRow zero_rows[4] = {
    {WHOLE, WHOLE, WHOLE, "data parallel: gradients summed over the data axis (DDP)",
     "data parallel: gradients summed over the data axis (DDP)" BUCKETED, NULL, NULL},
    {WHOLE, WHOLE, SHARD, ZERO1_SYNC, ZERO1_SYNC BUCKETED, NULL,
     "ZeRO-1: each rank updated its shard; the whole weights are gathered back"},
    {WHOLE, SHARD, SHARD, ZERO1_SYNC, ZERO1_SYNC BUCKETED, "ZeRO-2 keeps only this rank's shard of each gradient",
     "ZeRO-2: each rank updated its shard; the whole weights are gathered back"},
    {SHARD, SHARD, SHARD, ZERO1_SYNC, ZERO1_SYNC BUCKETED, "ZeRO-3 keeps only this rank's shard of each gradient",
     NULL},
};

static int sharded(Placement p) { return p.kind == PLACE_S; }

/* The axis ZeRO shards parameter tt over (program_param_zero_axis): the
 * plan's, or what of it does not split tt by a dim of its own (an expert's
 * weights over ep: their expert-data-parallel ranks); -1: held whole. */
static int param_zero_axis(const Lowerer *lw, const Tensor *tt) { return program_param_zero_axis(lw->plan, tt); }

/* The ZeRO row of parameter tt: the plan's stage's, row 0 for one ZeRO
 * leaves whole. */
static const ZeroRow *zero_row(const Lowerer *lw, const Tensor *tt)
{
    int zs = lw->plan->layout.zero_stage;
    PARC_ASSERT(zs >= 0 && zs < 4);
    return &zero_rows[param_zero_axis(lw, tt) < 0 ? 0 : zs];
}

/* Local elements of a parameter buffer: this rank's share of the padded
 * tensor-parallel block when sharded, else the padded block (a parameter
 * split on the ZeRO axis: its block, unpadded). */
static int64_t param_elems(const Lowerer *lw, const Tensor *tt, Placement on_zero_axis)
{
    int za = param_zero_axis(lw, tt), zeroed = za >= 0;
    int zn = zeroed ? lw->plan->mesh.axes[za].size : 1;
    Placement tp[PARC_MAX_AXES] = {{0}}; /* tensor-parallel placement: home without the flat shard */
    for (int a = 0; a < lw->naxes; a++) tp[a] = place_param_use(tt, a);
    int64_t tp_local = program_local_numel(lw->plan, tt, tp);
    int64_t share = zeroed ? (tp_local + zn - 1) / zn : tp_local;
    return sharded(on_zero_axis) ? share : share * (zeroed ? zn : 1);
}

/* The fp32 master describes the parameter itself (its ZeRO share when the
 * optimizer state is sharded), so the runtime draws the full fp32 initial
 * values; the weights are their rounding. */
static void describe_master(Lowerer *lw, int w, int master, int zero_axis)
{
    const Buffer *pw = &lw->sp->bufs[w];
    Buffer *mb = &lw->sp->bufs[master];
    mb->init_name = pw->init_name;
    mb->init = pw->init;
    mb->init_std = pw->init_std;
    mb->first_layer = pw->first_layer;
    mb->ndim = pw->ndim;
    for (int d = 0; d < 4; d++) mb->gdims[d] = pw->gdims[d], mb->split_axis[d] = pw->split_axis[d];
    mb->zero_axis = zero_axis;
    mb->layer_table = pw->layer_table;
    mb->sub = pw->sub;
}

/* Optimizer moments start at zero (init NONE: the class block is zeroed) but
 * describe their parameter like the master does, so a checkpoint can name each
 * element by its global index and load it into another layout. */
static void describe_moment(Lowerer *lw, int w, int moment, int zero_axis)
{
    Buffer *ob = &lw->sp->bufs[moment];
    describe_master(lw, w, moment, zero_axis);
    ob->init = PRT_INIT_NONE;
    ob->init_std = 0;
}

static void describe_weights(Lowerer *lw, int w, const Tensor *tt, Region r, int first_layer, int zero_axis)
{
    Buffer *wb = &lw->sp->bufs[w];
    wb->init_name = tt->base_name;
    wb->init = tt->init;
    wb->init_std = tt->init_std;
    int64_t N = plan_block_layers(lw->plan);
    wb->first_layer = r == REGION_BLOCK ? first_layer * N + tt->sub : -1;
    wb->sub = tt->sub;
    PARC_ASSERT(tt->ndim <= 4);
    wb->ndim = tt->ndim;
    for (int d = 0; d < tt->ndim; d++) {
        wb->gdims[d] = tt->sizes[d];
        wb->split_axis[d] = -1;
        for (int a = 0; a < lw->naxes; a++) {
            Placement p = place_param_use(tt, a);
            if (p.kind == PLACE_S && p.dim == tt->dims[d]) wb->split_axis[d] = a;
        }
    }
    wb->zero_axis = zero_axis;
    wb->layer_table = r == REGION_BLOCK && (lw->sp->chunks > 1 || N > 1);
}

/* Weights, gradient, master and moments of parameter t (of region r). */
static void bind_param(Lowerer *lw, int t, Region r, int instances, int first_layer)
{
    const Plan *plan = lw->plan;
    const Tensor *tt = &lw->g->tensors[t];
    const ZeroRow *z = zero_row(lw, tt);
    int za = param_zero_axis(lw, tt), zeroed = za >= 0;
    int wdtype = program_act_dtype(lw->plan);
    /* `grads fp32`: 16-bit weights, gradients accumulated, synced and read by
     * the optimizer in fp32 (Megatron's main gradients) */
    int gdtype = plan->train.grads_fp32 ? PRT_F32 : wdtype;
    int mode = r == REGION_BLOCK ? INST_LAYER : INST_FIXED;
    Binding *b = &lw->bind[t];
    int64_t oelems = param_elems(lw, tt, z->optim);
    int w = program_buf_new(lw->prog, lw->sp, lw->buf_order, tt->name, PRT_WEIGHTS, wdtype, param_elems(lw, tt, z->weights), instances);
    describe_weights(lw, w, tt, r, first_layer, zeroed ? za : -1);
    lw->sp->bufs[w].zero_whole = zeroed && !sharded(z->weights);
    b->value = (BufRef){w, mode, 0};
    int gb = program_buf_new(lw->prog, lw->sp, lw->buf_order, arena_printf(lw->arena, "%s.grad", tt->name), PRT_GRADS, gdtype,
                          param_elems(lw, tt, z->grads), instances);
    b->gradient = (BufRef){gb, mode, 0};
    if (sharded(z->grads))
        b->full_grad = program_buf_new(lw->prog, lw->sp, lw->buf_order, arena_printf(lw->arena, "%s.grad.full", tt->name), PRT_WORKSPACE, gdtype,
                                    param_elems(lw, tt, PLACE_REP), 1);
    if (plan->train.master_fp32 && plan->train.precision != PREC_FP32) {
        b->master = program_buf_new(lw->prog, lw->sp, lw->buf_order, arena_printf(lw->arena, "%s.master", tt->name), PRT_MASTER, PRT_F32, oelems,
                                 instances);
        describe_master(lw, w, b->master, sharded(z->optim) ? za : -1);
    }
    if (plan->train.optimizer != OPT_SGD || plan->train.momentum != 0)
        b->mom1 = program_buf_new(lw->prog, lw->sp, lw->buf_order, arena_printf(lw->arena, "%s.m", tt->name), PRT_OPTIM, PRT_F32, oelems,
                               instances);
    if (b->mom1 >= 0) describe_moment(lw, w, b->mom1, sharded(z->optim) ? za : -1);
    if (plan->train.optimizer != OPT_SGD)
        b->mom2 = program_buf_new(lw->prog, lw->sp, lw->buf_order, arena_printf(lw->arena, "%s.v", tt->name), PRT_OPTIM, PRT_F32, oelems,
                               instances);
    if (b->mom2 >= 0) describe_moment(lw, w, b->mom2, sharded(z->optim) ? za : -1);
}

void optim_bind_params(Lowerer *lw, Region r, int instances, int first_layer)
{
    const Graph *g = lw->g;
    for (int t = 0; t < g->ntensors; t++)
        if (g->tensors[t].region == r && g->tensors[t].kind == TENSOR_PARAM) bind_param(lw, t, r, instances, first_layer);
}

int optim_bind_tied(Lowerer *lw)
{
    const Graph *g = lw->g;
    int bound = 0;
    for (int i = 0; i < g->region_count[REGION_HEAD]; i++) {
        const Op *op = &g->ops[g->region_first[REGION_HEAD] + i];
        for (int k = 0; k < op->nparam; k++) {
            int t = op->param[k];
            if (g->tensors[t].region == REGION_HEAD || lw->bind[t].value.buf >= 0) continue;
            PARC_ASSERT(g->tensors[t].region == REGION_EMBED);
            bind_param(lw, t, REGION_EMBED, 1, -1);
            lw->bind[t].tied_copy = 1;
            bound++;
        }
    }
    return bound;
}

int optim_tied_across_stages(const Lowerer *lw, int t)
{
    const Graph *g = lw->g;
    const Layout *lay = &lw->plan->layout;
    if (g->tensors[t].region != REGION_EMBED || lay->embed_stage == lay->head_stage || lw->prog->nstages < 2)
        return 0;
    for (int i = 0; i < g->region_count[REGION_HEAD]; i++) {
        const Op *op = &g->ops[g->region_first[REGION_HEAD] + i];
        for (int k = 0; k < op->nparam; k++)
            if (op->param[k] == t) return 1;
    }
    return 0;
}

/* Does a head op on this stage read parameter t of another region? */
static int head_shares(const Lowerer *lw, int t)
{
    const Graph *g = lw->g;
    if (!lw->sp->has_head || g->tensors[t].region == REGION_HEAD) return 0;
    for (int i = 0; i < g->region_count[REGION_HEAD]; i++) {
        const Op *op = &g->ops[g->region_first[REGION_HEAD] + i];
        for (int k = 0; k < op->nparam; k++)
            if (op->param[k] == t) return 1;
    }
    return 0;
}

int optim_full_grad_zeroed_in(const Lowerer *lw, int t, Region r)
{
    return head_shares(lw, t) ? r == REGION_HEAD : lw->g->tensors[t].region == r;
}

int optim_full_grad_scattered_in(const Lowerer *lw, int t, Region r)
{
    /* the head's stage scatters the tied copy after the head's backward */
    return lw->g->tensors[t].region == r || (r == REGION_HEAD && lw->bind[t].tied_copy);
}

void optim_emit_scatter(Emit *e, Region r)
{
    Lowerer *lw = e->lw;
    const Graph *g = lw->g;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        const Binding *b = &lw->bind[t];
        if (!optim_full_grad_scattered_in(lw, t, r) || tt->kind != TENSOR_PARAM || b->full_grad < 0) continue;
        const ZeroRow *z = zero_row(lw, tt);
        int za = param_zero_axis(lw, tt);
        Val v;
        v.arg = arg_buf(b->full_grad, INST_FIXED, 0);
        v.tensor = t;
        Placement to[PARC_MAX_AXES];
        memcpy(v.place, b->grad, sizeof v.place);
        memcpy(to, b->grad, sizeof to);
        place_set_on(lw->plan, to, za, z->grads);
        Val s = reshard_to(e, v, to, -1, z->scatter_why, 1, NULL);
        EMIT(e, RT_prt_acc, arg_grad(lw, t), s.arg, arg_int(program_local_numel(lw->plan, tt, to)));
    }
}

/* The last step of a gradient's sync: the ZeRO axis, else the data group
 * (plan_derive_axes: batch's axis, or it and the context axis as one). */
int optim_sync_axis(const Plan *plan)
{
    const Layout *lay = &plan->layout;
    return lay->zero_axis >= 0 ? lay->zero_axis : lay->data_group;
}

/* Gradient sync: from the accumulation placement to the optimizer's, tensor
 * axes first, the data axis (sync_axis, all its parts at once) last; the
 * last step writes into dst_data. */
static void emit_sync(Lowerer *lw, Emit *es, int t, const Placement *acc, const Placement *opt, Arg gr, Arg dst_data,
                      Region r)
{
    const Layout *lay = &lw->plan->layout;
    const ZeroRow *z = zero_row(lw, &lw->g->tensors[t]);
    int data_axis = optim_sync_axis(lw->plan);
    unsigned data_parts = plan_axis_parts(lw->plan, data_axis);
    Val v = {gr, t, {{0}}};
    memcpy(v.place, acc, sizeof v.place);
    for (int pass = 0; pass < 2; pass++) {
        Placement to[PARC_MAX_AXES];
        memcpy(to, v.place, sizeof to);
        int moves = 0;
        for (int a = 0; a < lw->naxes; a++) {
            if ((int)(data_parts >> a & 1) == (pass == 1)) to[a] = opt[a];
            moves |= reshard_collective(v.place[a], to[a]) != COLL_NONE;
        }
        if (!moves) continue;
        int bucket = r == REGION_BLOCK && lw->sp->sync_in_backward;
        int batch = lay->dim_axis[DIM_BATCH];
        const char *why = pass == 0 ? (batch >= 0 && !(data_parts >> batch & 1) && lw->plan->mesh.axes[batch].size > 1
                                           ? "partial gradients of a parameter: each data rank's samples, and rows "
                                             "split on a tensor or context axis (ZeRO shards over the context axis)"
                                       : lay->dim_axis[DIM_SEQ] >= 0
                                           ? "partial gradients of a parameter used on rows split on a tensor or "
                                             "context axis"
                                           : "partial gradients of a parameter used on rows split on a tensor axis")
                          : z == &zero_rows[0] && data_axis != batch
                              ? arena_printf(lw->arena,
                                             data_axis >= lw->naxes
                                                 ? "data and context parallel: gradients summed over `%s` as one "
                                                   "group, every rank of it holding the same parameters%s"
                                                 : "context parallel: gradients summed over `%s`, whose ranks hold "
                                                   "the same parameters, each its chunk's share%s",
                                             lw->plan->mesh.axes[data_axis].name, bucket ? BUCKETED : "")
                          : bucket ? z->sync_why_bucketed
                                   : z->sync_why;
        reshard_to(es, v, to, -1, why, 1, pass == 0 ? &gr : &dst_data);
        memcpy(v.place, to, sizeof to);
    }
}

/* The parameter's placement on axis a for the optimizer step. */
static Placement opt_place(const Lowerer *lw, const Tensor *tt, int a)
{
    const ZeroRow *z = zero_row(lw, tt);
    if ((plan_axis_parts(lw->plan, param_zero_axis(lw, tt)) >> a & 1) && sharded(z->optim)) return z->optim;
    return place_param_use(tt, a);
}

/* The axes (bit a) the norm's scalar is summed over: size > 1 and either the
 * pipeline's or one where some parameter's optimizer placement is not whole. */
static int64_t norm_axes(const Lowerer *lw)
{
    const Plan *plan = lw->plan;
    int64_t axes = 0;
    for (int a = 0; a < lw->naxes; a++) {
        if (plan->mesh.axes[a].size < 2) continue;
        int split = a == plan->layout.pp_axis;
        for (int t = 0; t < lw->g->ntensors && !split; t++)
            if (lw->g->tensors[t].kind == TENSOR_PARAM) split = opt_place(lw, &lw->g->tensors[t], a).kind != PLACE_R;
        if (split) axes |= (int64_t)1 << a;
    }
    return axes;
}

/* The gradient (on the optimizer's placement `opt`, n elements at pg) adds
 * its sum of squares, once over the summed axes (norm_axes) where it is
 * replicated. */
static void emit_sumsq(Lowerer *lw, Region r, const Placement *opt, Arg pg, int64_t n, int64_t summed)
{
    const Plan *plan = lw->plan;
    int64_t replicated = 0;
    for (int a = 0; a < lw->naxes; a++)
        if (a != plan->layout.pp_axis && (summed >> a & 1) && opt[a].kind == PLACE_R)
            replicated |= (int64_t)1 << a;
    Arg once = arg_kind(ARG_COUNTED);
    once.i = replicated;
    Emit en = {lw, &lw->sp->seq[r == REGION_BLOCK ? SEQ_GRAD_NORM_BLOCK : SEQ_GRAD_NORM_ONCE], PHASE_GRAD_SYNC};
    Instr *ins = EMIT(&en, RT_prt_sumsq, arg_value(lw, lw->g->grad_sumsq), pg, arg_int(n), once);
    ins->flops = 2.0 * (double)n;
}

void optim_emit_grad_norm(Lowerer *lw)
{
    const Graph *g = lw->g;
    if (g->grad_sumsq < 0) return;
    Emit e = {lw, &lw->sp->seq[SEQ_GRAD_NORM_ONCE], PHASE_GRAD_SYNC};
    Arg acc = arg_value(lw, g->grad_sumsq);
    Val v = {acc, g->grad_sumsq, {{0}}};
    int64_t summed = norm_axes(lw);
    for (int a = 0; a < lw->naxes; a++) v.place[a] = (Placement){summed >> a & 1 ? PLACE_P : PLACE_R, 0};
    for (int a = 0; a < lw->naxes; a++) { /* one axis at a time, in place */
        if (!(summed >> a & 1)) continue;
        Placement to[PARC_MAX_AXES];
        memcpy(to, v.place, sizeof to);
        to[a] = (Placement){PLACE_R, 0};
        v = reshard_to(&e, v, to, -1, "the gradient norm: the gradients' sum of squares, each element counted once",
                       0, &acc);
    }
    EMIT(&e, RT_prt_clip_norm, acc, arg_f64(lw->plan->train.clip));
}

void optim_emit(Lowerer *lw, Seq *zero, Seq *sync, Seq *optim, Region r)
{
    const Graph *g = lw->g;
    const Train *tr = &lw->plan->train;
    int64_t summed = norm_axes(lw); /* the norm's axes: one walk of the parameters, not one per parameter */
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        const Binding *b = &lw->bind[t];
        if (tt->region != r || tt->kind != TENSOR_PARAM || b->value.buf < 0) continue;
        const ZeroRow *z = zero_row(lw, tt);
        int za = param_zero_axis(lw, tt);
        int mode = b->value.inst;
        Arg w = arg_ref(b->value), gr = arg_ref(b->gradient);
        Emit ez = {lw, zero, PHASE_GRAD_SYNC};
        EMIT(&ez, RT_prt_zero, gr, arg_int(lw->sp->bufs[b->gradient.buf].elems));

        /* the placements of the gradient as accumulated, of the optimizer and
         * of the weights, per this ZeRO stage's row */
        Placement acc[PARC_MAX_AXES], opt[PARC_MAX_AXES], whole[PARC_MAX_AXES];
        for (int a = 0; a < lw->naxes; a++) {
            acc[a] = b->grad[a];
            opt[a] = whole[a] = place_param_use(tt, a);
        }
        if (za >= 0 && sharded(z->weights)) place_set_on(lw->plan, whole, za, z->weights);
        if (za >= 0 && sharded(z->grads)) place_set_on(lw->plan, acc, za, z->grads);
        if (za >= 0 && sharded(z->optim)) place_set_on(lw->plan, opt, za, z->optim);
        int64_t n = program_local_numel(lw->plan, tt, opt);
        /* a whole buffer stepped on a shard: this rank's region of it */
        int shard_of_whole_w = za >= 0 && sharded(z->optim) && !sharded(z->weights);
        int shard_of_whole_g = za >= 0 && sharded(z->optim) && !sharded(z->grads);
        Arg pw = shard_of_whole_w ? arg_buf_off(b->value.buf, mode, 0, za, n) : w;
        Arg pg = shard_of_whole_g ? arg_buf_off(b->gradient.buf, mode, 0, za, n) : gr;
        Emit es = {lw, sync, PHASE_GRAD_SYNC};
        emit_sync(lw, &es, t, acc, opt, gr, pg, r);
        /* a table held by the first and the last stage: both copies' gradients summed */
        if (optim_tied_across_stages(lw, t)) reshard_embedding_group(&es, t, pg, n);
        /* a tied table's copy counts once in the global norm: on the embedding's stage */
        if (g->grad_sumsq >= 0 && !lw->bind[t].tied_copy) emit_sumsq(lw, r, opt, pg, n, summed);

        /* the optimizer step on the optimizer's placement */
        Emit eo = {lw, optim, PHASE_OPTIMIZER};
        Arg master = b->master >= 0 ? arg_buf(b->master, mode, 0) : arg_null();
        Arg m1 = b->mom1 >= 0 ? arg_buf(b->mom1, mode, 0) : arg_null();
        Arg m2 = b->mom2 >= 0 ? arg_buf(b->mom2, mode, 0) : arg_null();
        if (tr->clip > 0) { /* clipped: the gradient scaled by the step's factor first */
            Instr *sc = EMIT(&eo, RT_prt_scale, pg, arg_int(n), arg_kind(ARG_CLIP_SCALE));
            sc->tensor = t;
            sc->flops = (double)n;
        }
        double wd = tt->decay || tr->decay_all ? tr->weight_decay : 0.0; /* the plan's decay group */
        Arg lr = tr->lr_scheduled ? arg_kind(ARG_LR) : arg_f64(tr->lr); /* a schedule: read each step */
        Instr *ins;
        if (tr->optimizer == OPT_SGD)
            ins = EMIT(&eo, RT_prt_sgd, pw, master, pg, m1, arg_int(n), lr, arg_f64(tr->momentum),
                       arg_f64(wd));
        else
            ins = EMIT(&eo, RT_prt_adamw, pw, master, pg, m1, m2, arg_int(n), arg_kind(ARG_STEP), lr,
                       arg_f64(tr->beta1), arg_f64(tr->beta2), arg_f64(tr->eps), arg_f64(wd));
        ins->tensor = t;
        ins->flops = 12.0 * n;
        /* back to the weights' placement */
        Val updated = {pw, t, {{0}}};
        memcpy(updated.place, opt, sizeof opt);
        int gathers = 0;
        for (int a = 0; a < lw->naxes; a++) gathers |= reshard_collective(opt[a], whole[a]) != COLL_NONE;
        if (gathers) reshard_to(&eo, updated, whole, -1, z->gather_why, 0, &w);
    }
}
