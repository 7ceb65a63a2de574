/*
 * lower.c — the lowering passes of the pass table, each driven per pipeline
 * stage: place (place.c), schedule (schedule.c), reshard (reshard.c),
 * autodiff (autodiff.c), optim (optim.c: parameters, gradient sync and the
 * optimizer), overlap (overlap*.c) and lower (the ledger), into a Program.
 *
 * Takes a Graph whose tensors carry home placements.  lower_place decides
 * every tensor's placement once, into a PlaceTable.  lower_reshard binds the
 * buffers of the layers, the embedding and the head each stage holds (its
 * StageBindings, kept in the IR) and emits its forward program and pipeline
 * messages; lower_autodiff its backward program; lower_optim its gradient
 * sync and optimizer step; lower_overlap starts its gradient buckets;
 * lower_finish computes the ledger.  Each pass makes its own working context
 * (lower_context) from the IR and keeps nothing after it.
 * Nothing here is written per op (op_table) or per strategy (the ZeRO rows).
 *
 * Guarantees on success: every instruction's buffers exist on its stage; every
 * collective runs over one mesh axis; program_verify() holds.  Plans the rules
 * cannot place are reported through diag (NULL returned).
 */
#include "ledger.h"
#include "lower.h"

static int is_block_boundary(const Lowerer *lw, int t)
{
    const Graph *g = lw->g;
    return t == g->block_in || t == g->block_out || t == g->embed_out || t == g->head_in;
}

/* Buffers for the activations of one region on the current stage: saved ones
 * per in-flight micro-batch (and layer), the rest workspace; a gradient buffer
 * per activation. */
static void bind_region(Lowerer *lw, Region r, int L)
{
    const Graph *g = lw->g;
    StageProgram *sp = lw->sp;
    int full = r == REGION_BLOCK && lw->plan->layout.recompute == RECOMPUTE_FULL;
    int64_t slot_l_instances = (int64_t)L * sp->nslots;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        Binding *b = &lw->bind[t];
        if (tt->region != r || tt->kind == TENSOR_PARAM || tt->kind == TENSOR_SCALAR) continue;
        if (is_block_boundary(lw, t)) continue;
        if (tt->producer >= 0 && lw->bias_fold[tt->producer] >= 0 && g->ops[tt->producer].kind != OP_BIAS)
            continue; /* a linear's output its folded bias adds to: never stored */
        if (tt->kind == TENSOR_STAT && !b->needed && tt->producer >= 0 &&
            (op_table[g->ops[tt->producer].kind].saves & OP_SAVES_AUX_KEPT))
            continue; /* statistics the backward recomputes */
        int saved = b->needed && !full;
        /* attention probabilities are kept in the activations' dtype (16 bits in a
         * 16-bit plan, as Megatron keeps them); other statistics in fp32 */
        int probs = tt->kind == TENSOR_STAT && tt->producer >= 0 && g->ops[tt->producer].kind == OP_ATTENTION &&
                    g->ops[tt->producer].aux[0] == t;
        /* dropout masks: one byte per element */
        int mask = tt->kind == TENSOR_STAT && tt->producer >= 0 && g->ops[tt->producer].kind == OP_DROPOUT;
        int dtype = tt->kind == TENSOR_INDEX ? PRT_I32
                    : mask                                ? PRT_U8
                    : (tt->kind == TENSOR_ACT || probs) ? program_act_dtype(lw->plan)
                                                        : PRT_F32;
        int64_t inst = 1;
        int mode = INST_FIXED;
        if (saved) {
            if (r == REGION_BLOCK) inst = slot_l_instances, mode = INST_SLOT_L;
            else inst = sp->nslots, mode = INST_SLOT;
        }
        int buf = program_buf_new(lw->prog, lw->sp, lw->buf_order, tt->name, saved ? PRT_ACTIVATIONS : PRT_WORKSPACE, dtype,
                               program_local_numel(lw->plan, tt, b->produced), inst);
        b->value = (BufRef){buf, mode, 0};
        if (tt->kind == TENSOR_ACT) {
            int gbuf = program_buf_new(lw->prog, lw->sp, lw->buf_order, arena_printf(lw->arena, "%s.grad", tt->name), PRT_WORKSPACE,
                                    program_act_dtype(lw->plan), program_local_numel(lw->plan, tt, b->grad), 1);
            b->gradient = (BufRef){gbuf, INST_FIXED, 0};
        }
    }
}

/* Stage s's chunks from the plan's stage assignment: their count, layers and
 * first layers, the stage's layers over all of them; returns the largest
 * chunk's layers. */
static int stage_chunks(const Plan *plan, StageProgram *sp, int s)
{
    const Layout *lay = &plan->layout;
    int v = lay->virtual_stages > 0 ? lay->virtual_stages : 1;
    PARC_ASSERT(v <= (int)(sizeof sp->chunk_layers / sizeof sp->chunk_layers[0]));
    sp->chunks = v;
    sp->layers = sp->max_chunk_layers = 0;
    /* the program's unit is the block of plan_block_layers layers (the front
     * gives each chunk whole blocks) */
    int64_t N = plan_block_layers(plan);
    for (int c = 0; c < v; c++) {
        int k = plan_chunk(lay, s, c);
        PARC_ASSERT(lay->chunk_first[k] % N == 0 && lay->chunk_layers[k] % N == 0);
        sp->chunk_first_layer[c] = (int)(lay->chunk_first[k] / N);
        sp->chunk_layers[c] = (int)(lay->chunk_layers[k] / N);
        sp->layers += sp->chunk_layers[c];
        if (sp->chunk_layers[c] > sp->max_chunk_layers) sp->max_chunk_layers = sp->chunk_layers[c];
    }
    return sp->max_chunk_layers;
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

/* The residual stream, (L + 1) instances per slot (L the stage's largest
 * chunk), and its gradient ping-pong, bound to the block boundaries. */
static void bind_stream(Lowerer *lw, StageProgram *sp, int L)
{
    const Graph *g = lw->g;
    const Placement *rp = lw->bind[g->block_in].produced;
    int64_t relems = program_local_numel(lw->plan, &g->tensors[g->block_in], rp);
    sp->boundary_elems = relems;
    sp->resid_buf = program_buf_new(lw->prog, lw->sp, lw->buf_order, "resid", PRT_ACTIVATIONS, program_act_dtype(lw->plan), relems,
                                 (int64_t)(L + 1) * sp->nslots);
    sp->dresid_buf = program_buf_new(lw->prog, lw->sp, lw->buf_order, "resid.grad", PRT_WORKSPACE, program_act_dtype(lw->plan), relems, 2);
    int bound[4] = {g->block_in, g->block_out, g->embed_out, g->head_in};
    /* the head reads the stream at the end of its chunk, resid[L], and its
     * input's gradient is the half the chunk's last layer reads */
    int bk[4] = {0, 1, 0, 0};
    int vmode[4] = {INST_SLOT_L, INST_SLOT_L, INST_SLOT_L, INST_SLOT_END};
    int gmode[4] = {INST_PARITY, INST_PARITY, INST_FIXED, INST_PARITY_END};
    int gk[4] = {0, 1, 0, 0};
    for (int i = 0; i < 4; i++) {
        if (bound[i] < 0) continue;
        lw->bind[bound[i]].value = (BufRef){sp->resid_buf, vmode[i], bk[i]};
        lw->bind[bound[i]].gradient = (BufRef){sp->dresid_buf, gmode[i], gk[i]};
    }
    /* the produced placement of block_out must equal block_in's: enforced by
     * the ADD rule (its home), checked here */
    for (int a = 0; a < lw->naxes; a++)
        if (!place_eq(lw->bind[g->block_out].produced[a], rp[a]))
            PARC_BUG("block output placement differs from its input on axis %d", a);
}

static void reset_bindings(Lowerer *lw)
{
    for (int t = 0; t < lw->g->ntensors; t++) {
        Binding *b = &lw->bind[t];
        b->value = b->gradient = (BufRef){-1, INST_FIXED, 0};
        b->full_grad = b->master = b->mom1 = b->mom2 = -1;
        b->tied_copy = 0;
    }
}

/* Buffers of stage s: the stream, the loss and data scratch, and per region
 * held its parameters and activations. */
static void bind_stage(Lowerer *lw, StageProgram *sp, int L)
{
    const Graph *g = lw->g;
    reset_bindings(lw);
    bind_stream(lw, sp, L);
    lw->loss_buf = program_buf_new(lw->prog, lw->sp, lw->buf_order, "loss.sum", PRT_WORKSPACE, PRT_F32, 1, 1);
    int t = g->tokens >= 0 ? g->tokens : g->targets;
    lw->scratch_idx = t >= 0 ? program_buf_new(lw->prog, lw->sp, lw->buf_order, "data.scratch", PRT_WORKSPACE, PRT_I32,
                                            program_local_numel(lw->plan, &g->tensors[t], lw->bind[t].produced), 1)
                             : -1;
    if (sp->has_embed) {
        optim_bind_params(lw, REGION_EMBED, 1, -1);
        bind_region(lw, REGION_EMBED, 1);
    }
    if (L > 0) {
        optim_bind_params(lw, REGION_BLOCK, sp->layers, sp->chunk_first_layer[0]);
        bind_region(lw, REGION_BLOCK, L);
    }
    if (sp->has_head) {
        optim_bind_tied(lw); /* a tied table of another stage: this stage's copy */
        optim_bind_params(lw, REGION_HEAD, 1, -1);
        bind_region(lw, REGION_HEAD, 1);
    }
    if (g->grad_sumsq >= 0)
        lw->bind[g->grad_sumsq].value =
            (BufRef){program_buf_new(lw->prog, lw->sp, lw->buf_order, "grad_norm.sumsq", PRT_WORKSPACE, PRT_F32, 1, 1), INST_FIXED, 0};
}

/* A stage lists its buffers by what created them: its bindings, then per
 * region (embedding, blocks, head) the forward's and the backward's, then
 * the optimizer's, each group in creation order.  The passes create them in
 * another order (every forward before any backward); lower_finish sorts. */
static int buf_order_bind(void) { return 0; }
static int buf_order_forward(Region r) { return 1 + 2 * (int)r; }
static int buf_order_backward(Region r) { return 2 + 2 * (int)r; }
static int buf_order_optim(void) { return 1 + 2 * REGION_COUNT; }

/* Makes stage s the current one of a pass's context: its program, its
 * bindings, its loss and data scratch buffers (the IR's StageBindings). */
static void enter_stage(Lowerer *lw, int s)
{
    StageBindings *st = lw->prog->stages[s].bindings;
    lw->sp = &lw->prog->stages[s];
    lw->bind = st->bind;
    lw->kept_buf = st->kept_buf;
    lw->loss_buf = st->loss_buf;
    lw->scratch_idx = st->scratch_idx;
}

/* What the pass changed of the current stage's scratch, back into the IR. */
static void leave_stage(Lowerer *lw, int s)
{
    StageBindings *st = lw->prog->stages[s].bindings;
    st->loss_buf = lw->loss_buf;
    st->scratch_idx = lw->scratch_idx;
}

/* A fresh working context for one pass over the place table (and, from
 * reshard on, the program). */
static Lowerer *lower_context(Arena *arena, const PlaceTable *pt, Program *prog)
{
    Lowerer *lw = arena_alloc(arena, sizeof *lw);
    memset(lw, 0, sizeof *lw);
    lw->arena = arena;
    lw->plan = pt->plan;
    lw->g = pt->g;
    lw->prog = prog;
    lw->naxes = pt->naxes;
    lw->rule = pt->rule;
    lw->bind = pt->bind;
    lw->bias_fold = pt->bias_fold;
    lw->kept_in = pt->kept_in;
    return lw;
}

static Lowerer *program_context(Program *prog) { return lower_context(prog->arena, prog->placement, prog); }

/* Stage s's layout, slots and buffers; then its forward program, every
 * placement change a collective (reshard.c), and its pipeline messages. */
static void reshard_stage(Lowerer *lw, int s, const Binding *placement)
{
    const Plan *plan = lw->plan;
    const Graph *g = lw->g;
    StageProgram *sp = &lw->prog->stages[s];
    StageBindings *st = arena_alloc(lw->arena, sizeof *st);
    memset(st, 0, sizeof *st);
    sp->bindings = st;
    st->bind = arena_alloc(lw->arena, sizeof(Binding) * (size_t)g->ntensors);
    memcpy(st->bind, placement, sizeof(Binding) * (size_t)g->ntensors);
    st->kept_buf = arena_alloc(lw->arena, sizeof(int) * (size_t)(g->nops ? g->nops : 1));
    for (int i = 0; i < g->nops; i++) st->kept_buf[i] = -1;
    enter_stage(lw, s);
    sp->stage = s;
    int L = stage_chunks(plan, sp, s);
    sp->sync_in_backward = plan->layout.zero_stage <= 1;
    sp->has_embed = plan->model.has_embed && plan->layout.embed_stage == s;
    sp->has_head = plan->layout.head_stage == s;
    assign_slots(lw, sp, &lw->prog->schedule, s);
    lw->buf_order = buf_order_bind();
    bind_stage(lw, sp, L);
    if (!lw->errors) {
        Seq *q = sp->seq;
        static const SeqKind fwd[REGION_COUNT] = {SEQ_EMBED_FWD, SEQ_BLOCK_FWD, SEQ_HEAD_FWD};
        int held[REGION_COUNT] = {sp->has_embed, L > 0, sp->has_head};
        /* one use window for the embedding and the head of this stage: a
         * table they share is gathered once per forward (reshard_window_open),
         * and their backward reads the forward's copies (autodiff_stage) */
        unsigned ends = REGION_BIT(REGION_EMBED) | REGION_BIT(REGION_HEAD);
        reshard_window_open(lw, ends, 0);
        for (int r = 0; r < REGION_COUNT; r++) {
            if (!held[r]) continue;
            lw->buf_order = buf_order_forward((Region)r);
            autodiff_forward(lw, &q[fwd[r]], (Region)r, PHASE_FORWARD);
        }
        reshard_window_save(lw, ends, &st->ends_val, &st->ends_has);
        reshard_window_close(lw, ends);
        reshard_pipeline(lw->arena, lw->prog, sp);
    }
    leave_stage(lw, s);
}

/* Stage s's backward program, region by region. */
static void autodiff_stage(Lowerer *lw, int s)
{
    const Graph *g = lw->g;
    enter_stage(lw, s);
    StageProgram *sp = lw->sp;
    Seq *q = sp->seq;
    static const SeqKind bwd[REGION_COUNT] = {SEQ_EMBED_BWD, SEQ_BLOCK_BWD, SEQ_HEAD_BWD};
    int held[REGION_COUNT] = {sp->has_embed, sp->layers > 0, sp->has_head};
    int incoming[REGION_COUNT] = {g->embed_out, g->block_out, -1};
    /* the embedding's and the head's parameters as the forward resharded them:
     * every micro-batch's forward precedes its backward in the step, and the
     * weights change only in the optimizer, so those copies still hold them
     * (ZeRO-3 gathers the head's weight once a micro-batch, not twice) */
    unsigned ends = REGION_BIT(REGION_EMBED) | REGION_BIT(REGION_HEAD);
    const StageBindings *st = lw->prog->stages[s].bindings;
    reshard_window_restore(lw, ends, st->ends_val, st->ends_has);
    for (int r = 0; r < REGION_COUNT; r++) {
        if (!held[r]) continue;
        lw->buf_order = buf_order_backward((Region)r);
        autodiff_backward(lw, &q[bwd[r]], (Region)r, incoming[r]);
    }
    reshard_window_close(lw, ends);
    leave_stage(lw, s);
}

/* Stage s's gradient zeroing, gradient sync and optimizer step. */
static void optim_stage(Lowerer *lw, int s)
{
    enter_stage(lw, s);
    lw->buf_order = buf_order_optim();
    StageProgram *sp = lw->sp;
    Seq *q = sp->seq;
    /* the embedding's parameters, or on the head's stage the tied table's copy */
    if (sp->has_embed || sp->has_head)
        optim_emit(lw, &q[SEQ_ZERO_GRADS_ONCE], &q[SEQ_GRAD_SYNC_ONCE], &q[SEQ_OPTIM_ONCE], REGION_EMBED);
    if (sp->layers > 0) {
        optim_emit(lw, &q[SEQ_ZERO_GRADS_BLOCK], &q[SEQ_GRAD_SYNC_BLOCK], &q[SEQ_OPTIM_BLOCK], REGION_BLOCK);
    }
    /* a tied table's parameters were stepped with the embedding */
    if (sp->has_head) optim_emit(lw, &q[SEQ_ZERO_GRADS_ONCE], &q[SEQ_GRAD_SYNC_ONCE], &q[SEQ_OPTIM_ONCE], REGION_HEAD);
    optim_emit_grad_norm(lw);
    leave_stage(lw, s);
}

Schedule *lower_schedule(Arena *arena, const Plan *plan)
{
    int p = plan->layout.stages > 0 ? plan->layout.stages : 1;
    SchedKind kind = plan->layout.schedule;
    if (p == 1 && kind != SCHED_NONE) kind = SCHED_NONE;
    Schedule *schedule = arena_alloc(arena, sizeof *schedule);
    if (schedule_build(arena, kind, p, (int)plan->train.micro_batches,
                       kind == SCHED_INTERLEAVED ? plan->layout.virtual_stages : 1, schedule) != 0)
        PARC_BUG("schedule_build refused a checked plan (p=%d m=%lld)", p, (long long)plan->train.micro_batches);
    char why[256];
    if (schedule_verify(schedule, why, sizeof why) != 0) PARC_BUG("unsound schedule: %s", why);
    return schedule;
}

PlaceTable *lower_place(Arena *arena, const Plan *plan, Graph *g)
{
    ops_check();
    PlaceTable *pt = arena_alloc(arena, sizeof *pt);
    memset(pt, 0, sizeof *pt);
    pt->plan = plan;
    pt->g = g;
    pt->naxes = plan->mesh.naxes;
    size_t na = (size_t)(pt->naxes ? pt->naxes : 1);
    pt->rule = arena_alloc(arena, sizeof(OpPlace) * (size_t)g->nops * na);
    pt->bind = arena_alloc(arena, sizeof(Binding) * (size_t)g->ntensors);
    Lowerer *lw = lower_context(arena, pt, NULL);
    place_plan(lw);
    pt->bias_fold = lw->bias_fold;
    pt->kept_in = lw->kept_in;
    return lw->errors ? NULL : pt;
}

Program *lower_reshard(Arena *arena, const PlaceTable *placement, const Schedule *schedule)
{
    const Plan *plan = placement->plan;
    Program *prog = arena_alloc(arena, sizeof(Program));
    memset(prog, 0, sizeof *prog);
    prog->arena = arena;
    prog->plan = plan;
    prog->graph = placement->g;
    prog->placement = placement;
    prog->dp_axis = plan->layout.dim_axis[DIM_BATCH];
    prog->tp_axis = plan->layout.dim_axis[DIM_HEADS] >= 0 ? plan->layout.dim_axis[DIM_HEADS]
                                                           : plan->layout.dim_axis[DIM_FFN];
    prog->pp_axis = plan->layout.pp_axis;
    int p = plan->layout.stages > 0 ? plan->layout.stages : 1;
    PARC_ASSERT(schedule->stages == p);
    prog->schedule = *schedule;
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
    memset(prog->stages, 0, sizeof(StageProgram) * (size_t)p);
    Lowerer *lw = lower_context(arena, placement, prog);
    for (int s = 0; s < p && !lw->errors; s++) reshard_stage(lw, s, placement->bind);
    return lw->errors ? NULL : prog;
}

int lower_autodiff(Program *prog)
{
    Lowerer *lw = program_context(prog);
    for (int s = 0; s < prog->nstages && !lw->errors; s++) autodiff_stage(lw, s);
    return lw->errors != 0;
}

int lower_optim(Program *prog)
{
    Lowerer *lw = program_context(prog);
    for (int s = 0; s < prog->nstages && !lw->errors; s++) optim_stage(lw, s);
    return lw->errors != 0;
}

int lower_tp_overlap(Program *prog)
{
    if (prog->plan->layout.tp_overlap_off) return 0; /* the input gradients' collectives stay blocking */
    Lowerer *lw = program_context(prog);
    for (int s = 0; s < prog->nstages && !lw->errors; s++) {
        enter_stage(lw, s);
        overlap_tp(lw);
        leave_stage(lw, s);
    }
    return lw->errors != 0;
}

int lower_overlap(Program *prog)
{
    if (prog->plan->layout.grad_overlap_off) return 0; /* the buckets stay blocking */
    Lowerer *lw = program_context(prog);
    for (int s = 0; s < prog->nstages && !lw->errors; s++) {
        enter_stage(lw, s);
        if (lw->sp->layers > 0) overlap_buckets(lw), overlap_scatters(lw), overlap_gathers(lw);
        leave_stage(lw, s);
    }
    return lw->errors != 0;
}

int lower_step_writes(Program *prog)
{
    if (prog->plan->train.micro_batches != 1) return 0; /* gradients accumulate over the micro-batches */
    for (int s = 0; s < prog->nstages; s++) first_write_step(&prog->stages[s]);
    return 0;
}

/* Sorts stage sp's buffers by Buffer.order, keeping creation order within
 * one order, and renames every reference to them. */
static void sort_buffers(Arena *arena, StageProgram *sp)
{
    int n = sp->nbufs, *renamed = arena_alloc(arena, sizeof(int) * (size_t)(n ? n : 1));
    Buffer *sorted = arena_alloc(arena, sizeof(Buffer) * (size_t)(n ? n : 1));
    int next = 0;
    for (int order = buf_order_bind(); order <= buf_order_optim(); order++)
        for (int b = 0; b < n; b++)
            if (sp->bufs[b].order == order) {
                renamed[b] = next;
                sorted[next++] = sp->bufs[b];
            }
    PARC_ASSERT(next == n);
    for (int b = 0; b < n; b++)
        if (sorted[b].copy_of >= 0) sorted[b].copy_of = renamed[sorted[b].copy_of];
    sp->bufs = sorted;
    sp->bufs_cap = n;
    sp->resid_buf = renamed[sp->resid_buf];
    sp->dresid_buf = renamed[sp->dresid_buf];
    for (int q = 0; q < SEQ_COUNT; q++)
        for (int i = 0; i < sp->seq[q].n; i++) {
            Instr *ins = &sp->seq[q].ins[i];
            for (int k = 0; k < ins->nargs; k++)
                if (ins->args[k].kind == ARG_BUF) ins->args[k].buf = renamed[ins->args[k].buf];
        }
}

void lower_finish(Program *prog)
{
    for (int s = 0; s < prog->nstages; s++) sort_buffers(prog->arena, &prog->stages[s]);
    ledger_compute(prog);
    program_verify(prog);
}

