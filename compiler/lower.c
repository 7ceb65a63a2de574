/*
 * lower.c — passes 4–7 driven per pipeline stage: placement (place.c),
 * resharding (reshard.c), autodiff (autodiff.c), parameters, gradient sync and
 * the optimizer (optim.c) and the schedule (schedule.c), into a Program.
 *
 * Takes a Graph whose tensors carry home placements.  place_plan decides every
 * tensor's placement once; then for each stage lower_stage binds the buffers
 * of the layers, the embedding and the head it holds and emits its sequences.
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
        if (tt->kind == TENSOR_STAT && !b->needed && tt->producer >= 0 &&
            (op_table[g->ops[tt->producer].kind].saves & OP_SAVES_AUX_KEPT))
            continue; /* statistics the backward recomputes */
        int saved = b->needed && !full;
        /* attention probabilities are kept in the activations' dtype (16 bits in a
         * 16-bit plan, as Megatron keeps them); other statistics in fp32 */
        int probs = tt->kind == TENSOR_STAT && tt->producer >= 0 && g->ops[tt->producer].kind == OP_ATTENTION;
        int dtype = tt->kind == TENSOR_INDEX ? PRT_I32
                    : (tt->kind == TENSOR_ACT || probs) ? program_act_dtype(lw)
                                                        : PRT_F32;
        int64_t inst = 1;
        int mode = INST_FIXED;
        if (saved) {
            if (r == REGION_BLOCK) inst = slot_l_instances, mode = INST_SLOT_L;
            else inst = sp->nslots, mode = INST_SLOT;
        }
        int buf = program_buf_new(lw, tt->name, saved ? PRT_ACTIVATIONS : PRT_WORKSPACE, dtype,
                               program_local_numel(lw, tt, b->produced), inst);
        b->value = (BufRef){buf, mode, 0};
        if (tt->kind == TENSOR_ACT) {
            int gbuf = program_buf_new(lw, arena_printf(lw->arena, "%s.grad", tt->name), PRT_WORKSPACE,
                                    program_act_dtype(lw), program_local_numel(lw, tt, b->grad), 1);
            b->gradient = (BufRef){gbuf, INST_FIXED, 0};
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

/* The residual stream, (L + 1) instances per slot, and its gradient
 * ping-pong, bound to the block boundaries. */
static void bind_stream(Lowerer *lw, StageProgram *sp, int L)
{
    const Graph *g = lw->g;
    const Placement *rp = lw->bind[g->block_in].produced;
    int64_t relems = program_local_numel(lw, &g->tensors[g->block_in], rp);
    sp->boundary_elems = relems;
    sp->resid_buf = program_buf_new(lw, "resid", PRT_ACTIVATIONS, program_act_dtype(lw), relems,
                                 (int64_t)(L + 1) * sp->nslots);
    sp->dresid_buf = program_buf_new(lw, "resid.grad", PRT_WORKSPACE, program_act_dtype(lw), relems, 2);
    int bound[4] = {g->block_in, g->block_out, g->embed_out, g->head_in};
    int bk[4] = {0, 1, 0, L};
    int gmode[4] = {INST_PARITY, INST_PARITY, INST_FIXED, INST_FIXED};
    int gk[4] = {0, 1, 0, L & 1};
    for (int i = 0; i < 4; i++) {
        if (bound[i] < 0) continue;
        lw->bind[bound[i]].value = (BufRef){sp->resid_buf, INST_SLOT_L, bk[i]};
        lw->bind[bound[i]].gradient = (BufRef){sp->dresid_buf, gmode[i], gk[i]};
    }
    /* the produced placement of block_out must equal block_in's: enforced by
     * the ADD rule (its home), checked here */
    for (int a = 0; a < lw->naxes; a++)
        if (!place_eq(lw->bind[g->block_out].produced[a], rp[a]))
            PARC_BUG("block output placement differs from its input on axis %d", a);
}

/* A head that uses another region's parameter (a head tied to the embedding)
 * needs it on this stage. */
static int check_tied_head(Lowerer *lw)
{
    const Graph *g = lw->g;
    const Plan *plan = lw->plan;
    for (int i = 0; i < g->region_count[REGION_HEAD]; i++) {
        const Op *op = &g->ops[g->region_first[REGION_HEAD] + i];
        for (int k = 0; k < op->nparam; k++) {
            int t = op->param[k];
            if (g->tensors[t].region == REGION_HEAD || lw->bind[t].value.buf >= 0) continue;
            diag_error(plan->layout.stage_loc.file ? plan->layout.stage_loc : plan->model.loc,
                       "put the embedding and the head on one stage, or use `head untied`",
                       "the head is tied to the embedding, but they sit on different pipeline stages (%d and %d)",
                       plan->layout.embed_stage, plan->layout.head_stage);
            lw->errors++;
            return -1;
        }
    }
    return 0;
}

static void reset_bindings(Lowerer *lw)
{
    for (int t = 0; t < lw->g->ntensors; t++) {
        Binding *b = &lw->bind[t];
        b->value = b->gradient = (BufRef){-1, INST_FIXED, 0};
        b->full_grad = b->master = b->mom1 = b->mom2 = -1;
    }
}

/* Buffers of stage s: the stream, the loss and data scratch, and per region
 * held its parameters and activations. */
static void bind_stage(Lowerer *lw, StageProgram *sp, int L, const int *first)
{
    const Graph *g = lw->g;
    reset_bindings(lw);
    bind_stream(lw, sp, L);
    lw->loss_buf = program_buf_new(lw, "loss.sum", PRT_WORKSPACE, PRT_F32, 1, 1);
    int t = g->tokens >= 0 ? g->tokens : g->targets;
    lw->scratch_idx = t >= 0 ? program_buf_new(lw, "data.scratch", PRT_WORKSPACE, PRT_I32,
                                            program_local_numel(lw, &g->tensors[t], lw->bind[t].produced), 1)
                             : -1;
    if (sp->has_embed) {
        optim_bind_params(lw, REGION_EMBED, 1, -1);
        bind_region(lw, REGION_EMBED, 1);
    }
    if (L > 0) {
        optim_bind_params(lw, REGION_BLOCK, sp->chunks * L, first[0]);
        bind_region(lw, REGION_BLOCK, L);
    }
    if (sp->has_head) {
        if (check_tied_head(lw) != 0) return;
        optim_bind_params(lw, REGION_HEAD, 1, -1);
        bind_region(lw, REGION_HEAD, 1);
    }
    if (g->grad_sumsq >= 0)
        lw->bind[g->grad_sumsq].value =
            (BufRef){program_buf_new(lw, "grad_norm.sumsq", PRT_WORKSPACE, PRT_F32, 1, 1), INST_FIXED, 0};
}

static void lower_stage(Lowerer *lw, int s)
{
    const Plan *plan = lw->plan;
    const Graph *g = lw->g;
    StageProgram *sp = &lw->prog->stages[s];
    lw->sp = sp;
    sp->stage = s;
    int first[64];
    int L = stage_layers(plan, s, &sp->chunks, first);
    sp->layers_per_chunk = L;
    for (int c = 0; c < sp->chunks; c++) sp->chunk_first_layer[c] = first[c];
    sp->sync_in_backward = plan->layout.zero_stage <= 1;
    sp->has_embed = plan->model.has_embed && plan->layout.embed_stage == s;
    sp->has_head = plan->layout.head_stage == s;
    assign_slots(lw, sp, &lw->prog->schedule, s);
    bind_stage(lw, sp, L, first);
    if (lw->errors) return;

    Seq *q = sp->seq;
    if (sp->has_embed) {
        autodiff_forward(lw, &q[SEQ_EMBED_FWD], REGION_EMBED, PHASE_FORWARD);
        autodiff_backward(lw, &q[SEQ_EMBED_BWD], REGION_EMBED, g->embed_out);
    }
    if (L > 0) {
        autodiff_forward(lw, &q[SEQ_BLOCK_FWD], REGION_BLOCK, PHASE_FORWARD);
        autodiff_backward(lw, &q[SEQ_BLOCK_BWD], REGION_BLOCK, g->block_out);
    }
    if (sp->has_head) {
        autodiff_forward(lw, &q[SEQ_HEAD_FWD], REGION_HEAD, PHASE_FORWARD);
        autodiff_backward(lw, &q[SEQ_HEAD_BWD], REGION_HEAD, -1);
    }
    if (sp->has_embed)
        optim_emit(lw, &q[SEQ_ZERO_GRADS_ONCE], &q[SEQ_GRAD_SYNC_ONCE], &q[SEQ_OPTIM_ONCE], REGION_EMBED);
    if (L > 0) optim_emit(lw, &q[SEQ_ZERO_GRADS_BLOCK], &q[SEQ_GRAD_SYNC_BLOCK], &q[SEQ_OPTIM_BLOCK], REGION_BLOCK);
    /* the tied table's parameters were stepped with the embedding */
    if (sp->has_head) optim_emit(lw, &q[SEQ_ZERO_GRADS_ONCE], &q[SEQ_GRAD_SYNC_ONCE], &q[SEQ_OPTIM_ONCE], REGION_HEAD);
    optim_emit_grad_norm(lw);
    reshard_pipeline(lw->arena, lw->prog, sp);
}

/* The pipeline schedule of the plan, verified. */
static void build_schedule(Arena *arena, const Plan *plan, Program *prog, int p)
{
    SchedKind kind = plan->layout.schedule;
    if (p == 1 && kind != SCHED_NONE) kind = SCHED_NONE;
    if (schedule_build(arena, kind, p, (int)plan->train.micro_batches,
                       kind == SCHED_INTERLEAVED ? plan->layout.virtual_stages : 1, &prog->schedule) != 0)
        PARC_BUG("schedule_build refused a checked plan (p=%d m=%lld)", p, (long long)plan->train.micro_batches);
    char why[256];
    if (schedule_verify(&prog->schedule, why, sizeof why) != 0) PARC_BUG("unsound schedule: %s", why);
}

Placed *lower_place(Arena *arena, const Plan *plan, Graph *g)
{
    ops_check();
    Lowerer *lw = arena_alloc(arena, sizeof *lw);
    memset(lw, 0, sizeof *lw);
    lw->arena = arena;
    lw->plan = plan;
    lw->g = g;
    lw->naxes = plan->mesh.naxes;
    size_t na = (size_t)(lw->naxes ? lw->naxes : 1);
    lw->rule = arena_alloc(arena, sizeof(OpPlace) * (size_t)g->nops * na);
    lw->bind = arena_alloc(arena, sizeof(Binding) * (size_t)g->ntensors);
    place_plan(lw);
    return lw->errors ? NULL : lw;
}

Program *lower_program(Arena *arena, const Plan *plan, Graph *g)
{
    Placed *placed = lower_place(arena, plan, g);
    return placed ? lower_placed(placed) : NULL;
}

Program *lower_placed(Placed *placed)
{
    Lowerer lw = *placed; /* the stage programs' state starts from the placements */
    Arena *arena = lw.arena;
    const Plan *plan = lw.plan;
    Program *prog = arena_alloc(arena, sizeof(Program));
    prog->plan = plan;
    prog->graph = lw.g;
    lw.prog = prog;
    prog->dp_axis = plan->layout.dim_axis[DIM_BATCH];
    prog->tp_axis = plan->layout.dim_axis[DIM_HEADS] >= 0 ? plan->layout.dim_axis[DIM_HEADS]
                                                           : plan->layout.dim_axis[DIM_FFN];
    prog->pp_axis = plan->layout.pp_axis;
    int p = plan->layout.stages > 0 ? plan->layout.stages : 1;
    build_schedule(arena, plan, prog, p);
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
    program_verify(prog);
    return prog;
}
