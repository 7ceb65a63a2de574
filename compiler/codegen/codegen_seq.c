/*
 * codegen_seq.c — the code of a plan: one function per (stage, instruction
 * sequence), the per-stage forward/backward drivers with the pipeline
 * send/recv, the per-stage step loop and `main` (the module layout is in
 * codegen.c's banner).
 */
#include "codegen_gen.h"

#include <stdlib.h>
#include <string.h>

/* Symbol suffix of each sequence's function.  ORDER: SeqKind in ir.h. */

/* ---------------------------------------------------------------- sequences */

/* The parameters of a sequence function. */
typedef struct SeqParams {
    LLVMValueRef chunk, l, slot, micro, step;
} SeqParams;

/* Whether stage sp's chunks are alike: one layer count, first layers evenly
 * spaced (every stage of an even split).  Then a chunk's figures are
 * arithmetic on its index; else they are loaded from @stageS.chunks. */
static int chunks_alike(const StageProgram *sp) {
    for (int c = 1; c < sp->chunks; c++)
        if (sp->chunk_layers[c] != sp->chunk_layers[0] ||
            sp->chunk_first_layer[c] - sp->chunk_first_layer[c - 1] != sp->chunk_first_layer[1] - sp->chunk_first_layer[0])
            return 0;
    return 1;
}

enum { CHUNK_BASE, CHUNK_LAYERS, CHUNK_FIRST };

/* Figure `what` of the chunk whose index is the value `chunk` (codegen_stage_chunks). */
static LLVMValueRef chunk_figure(Gen *g, const StageProgram *sp, int what, LLVMValueRef chunk) {
    if (chunks_alike(sp)) {
        int64_t stride = sp->chunks > 1 ? sp->chunk_first_layer[1] - sp->chunk_first_layer[0] : 0;
        switch (what) {
        case CHUNK_BASE: return mul(g, chunk, c64(g, sp->chunk_layers[0]), "chunk_base");
        case CHUNK_LAYERS: return c64(g, sp->chunk_layers[0]);
        default: return add(g, mul(g, chunk, c64(g, stride), ""), c64(g, sp->chunk_first_layer[0]), "chunk_first");
        }
    }
    LLVMValueRef table = codegen_stage_chunks(g, sp);
    LLVMValueRef idx[] = {c64(g, 0), add(g, chunk, c64(g, (int64_t)what * sp->chunks), "")};
    LLVMValueRef addr = LLVMBuildInBoundsGEP2(g->b, LLVMGlobalGetValueType(table), table, idx, 2, "");
    static const char *const names[] = {"chunk_base", "chunk_layers", "chunk_first"};
    return LLVMBuildLoad2(g->b, g->t_i64, addr, names[what]);
}

static LLVMValueRef instance_of(Gen *g, const StageProgram *sp, const Arg *a, const SeqParams *p) {
    LLVMValueRef k = c64(g, a->k);
    switch (a->inst) {
    case INST_FIXED: return k;
    case INST_LAYER: return add(g, chunk_figure(g, sp, CHUNK_BASE, p->chunk), p->l, "");
    case INST_SLOT_L: return add(g, mul(g, add(g, p->l, k, ""), c64(g, sp->nslots), ""), p->slot, "");
    case INST_SLOT: return p->slot;
    case INST_PARITY: return LLVMBuildAnd(g->b, add(g, p->l, k, ""), c64(g, 1), "");
    case INST_LAYER_AT: return add(g, add(g, chunk_figure(g, sp, CHUNK_BASE, p->chunk), p->l, ""), k, "");
    case INST_SLOT_END: {
        LLVMValueRef end = add(g, chunk_figure(g, sp, CHUNK_LAYERS, p->chunk), k, "");
        return add(g, mul(g, end, c64(g, sp->nslots), ""), p->slot, "");
    }
    case INST_PARITY_END:
        return LLVMBuildAnd(g->b, add(g, chunk_figure(g, sp, CHUNK_LAYERS, p->chunk), k, ""), c64(g, 1), "");
    }
    PARC_BUG("stage %d: bad instance mode %d", sp->stage, a->inst);
}

static LLVMValueRef arg_value(Gen *g, const StageProgram *sp, const Instr *in, int j, const SeqParams *p) {
    const Program *pr = g->program;
    const Arg *a = &in->args[j];
    char want = rt_fn_sigs[in->fn][j + 1];
    char have = 0;
    LLVMValueRef v = NULL;
    switch (a->kind) {
    case ARG_NULL:
        have = 'p';
        v = LLVMConstNull(g->t_ptr);
        break;
    case ARG_BUF: {
        have = 'p';
        if (a->buf < 0 || a->buf >= sp->nbufs)
            PARC_BUG("stage %d: %s argument %d names buffer %d of %d", sp->stage, rt_fn_names[in->fn], j, a->buf,
                     sp->nbufs);
        for (int c = 0; c < g->nptrs && !v; c++) {
            const Arg *b = &g->ptrs[c].arg;
            if (b->buf == a->buf && b->inst == a->inst && b->k == a->k && b->axis == a->axis &&
                (a->axis < 0 || b->i == a->i))
                v = g->ptrs[c].value;
        }
        if (v) break;
        LLVMValueRef args[] = {g->rt, c64(g, a->buf), instance_of(g, sp, a, p)};
        v = call_life(g, LIFE_prt_ptr, args, 3, sp->bufs[a->buf].name ? sp->bufs[a->buf].name : "buf");
        if (a->axis >= 0) {
            int64_t bytes = a->i * dtype_bytes(sp->bufs[a->buf].dtype);
            LLVMValueRef off = mul(g, codegen_coord(g, a->axis), c64(g, bytes), "");
            v = LLVMBuildInBoundsGEP2(g->b, g->t_i8, v, &off, 1, "");
        }
        if (g->cache_ptrs && g->nptrs < (int)(sizeof g->ptrs / sizeof g->ptrs[0]))
            g->ptrs[g->nptrs++] = (struct PtrCache){*a, v};
        break;
    }
    case ARG_INT:
        have = 'i';
        v = c64(g, a->i);
        break;
    case ARG_F64:
        have = 'd';
        v = LLVMConstReal(g->t_f64, a->d);
        break;
    case ARG_COORD_TIMES:
        have = 'i';
        v = mul(g, codegen_coord(g, a->axis), c64(g, a->i), "");
        if (a->k) v = LLVMBuildAdd(g->b, v, c64(g, a->k), "");
        break;
    case ARG_STEP:
        have = 'i';
        v = p->step;
        break;
    case ARG_LR: {
        have = 'd';
        LLVMValueRef args[] = {g->rt, p->step};
        v = call_life(g, LIFE_prt_lr, args, 2, "lr");
        break;
    }
    case ARG_CLIP_SCALE:
        have = 'd';
        v = call_life(g, LIFE_prt_clip_scale, &g->rt, 1, "clip_scale");
        break;
    case ARG_COUNTED: { /* 1.0 at coordinate 0 of every axis in the mask */
        have = 'd';
        LLVMValueRef once = LLVMConstInt(LLVMInt1TypeInContext(g->ctx), 1, 0);
        for (int ax = 0; ax < PARC_MAX_AXES; ax++)
            if (a->i >> ax & 1)
                once = LLVMBuildAnd(g->b, once, LLVMBuildICmp(g->b, LLVMIntEQ, codegen_coord(g, ax), c64(g, 0), ""), "");
        v = LLVMBuildUIToFP(g->b, once, g->t_f64, "counted");
        break;
    }
    case ARG_FIRST_SAMPLE: {
        have = 'i';
        int64_t mb = pr->plan->train.micro_batch;
        int64_t dp = plan_axis_size(pr->plan, pr->dp_axis);
        LLVMValueRef first = mul(g, p->micro, c64(g, mb * dp), "");
        v = add(g, first, mul(g, codegen_coord(g, pr->dp_axis), c64(g, mb), ""), "first_sample");
        break;
    }
    case ARG_LAYER:
        have = 'i';
        v = add(g, chunk_figure(g, sp, CHUNK_FIRST, p->chunk), p->l, "block");
        v = add(g, mul(g, v, c64(g, plan_block_layers(pr->plan)), ""), c64(g, a->k), "layer");
        break;
    case ARG_TAG: {
        have = 'i';
        int chunks = sp->chunks > 0 ? sp->chunks : 1;
        LLVMValueRef t = add(g, mul(g, p->micro, c64(g, chunks), ""), add(g, p->chunk, c64(g, a->k), ""), "");
        v = add(g, mul(g, t, c64(g, 2), ""), c64(g, a->i), "tag");
        break;
    }
    default: PARC_BUG("stage %d: %s argument %d has bad kind %d", sp->stage, rt_fn_names[in->fn], j, a->kind);
    }
    if (have != want)
        PARC_BUG("stage %d: %s argument %d is '%c' but the runtime signature \"%s\" wants '%c'", sp->stage,
                 rt_fn_names[in->fn], j, have, rt_fn_sigs[in->fn], want);
    return v;
}

/* The dtypes word of a call (parc_rt.h): the dtype of each pointer argument's
 * buffer, 4 bits each in argument order, PRT_ARG_WRITE on those the instruction
 * writes; a NULL argument's nibble is 0. */
static int64_t dtypes_word(const StageProgram *sp, const Instr *in) {
    int64_t word = 0;
    int k = 0;
    for (int j = 0; j < in->nargs; j++) {
        const Arg *a = &in->args[j];
        if (a->kind != ARG_BUF && a->kind != ARG_NULL) continue;
        if (k >= 16) PARC_BUG("stage %d: %s has more pointer arguments than its dtypes word holds", sp->stage,
                              rt_fn_names[in->fn]);
        if (a->kind == ARG_BUF) word |= (int64_t)sp->bufs[a->buf].dtype << (4 * k);
        if (a->kind == ARG_BUF && (in->writes >> j & 1)) word |= (int64_t)PRT_ARG_WRITE << (4 * k);
        k++;
    }
    return word;
}

/* The phase a sequence's time counts to (enum prt_phase in parc_rt.h). */
static int64_t seq_phase(SeqKind kind) {
    switch (kind) {
    case SEQ_EMBED_FWD:
    case SEQ_BLOCK_FWD:
    case SEQ_HEAD_FWD: return PRT_PHASE_FORWARD;
    case SEQ_HEAD_BWD:
    case SEQ_BLOCK_BWD:
    case SEQ_EMBED_BWD: return PRT_PHASE_BACKWARD;
    case SEQ_GRAD_SYNC_BLOCK:
    case SEQ_GRAD_SYNC_ONCE:
    case SEQ_GRAD_WAIT_BLOCK: return PRT_PHASE_COMM;
    case SEQ_RECV_FWD:
    case SEQ_SEND_FWD:
    case SEQ_RECV_BWD:
    case SEQ_SEND_BWD: return PRT_PHASE_BUBBLE;
    default: return PRT_PHASE_OPTIMIZER; /* zeroing gradients, the optimizer */
    }
}

/* The condition under which an instruction guarded by `when` runs (ir.h). */
static LLVMValueRef when_cond(Gen *g, const StageProgram *sp, int when, LLVMValueRef chunk, LLVMValueRef l) {
    LLVMValueRef last = when == WHEN_L_LAST || when == WHEN_L_NOT_LAST
                            ? LLVMBuildSub(g->b, chunk_figure(g, sp, CHUNK_LAYERS, chunk), c64(g, 1), "last")
                            : NULL;
    switch (when) {
    case WHEN_L_FIRST: return LLVMBuildICmp(g->b, LLVMIntEQ, l, c64(g, 0), "first_layer");
    case WHEN_L_LAST: return LLVMBuildICmp(g->b, LLVMIntEQ, l, last, "last_layer");
    case WHEN_L_NOT_LAST: return LLVMBuildICmp(g->b, LLVMIntSLT, l, last, "not_last_layer");
    case WHEN_L_NOT_FIRST: return LLVMBuildICmp(g->b, LLVMIntSGT, l, c64(g, 0), "not_first_layer");
    }
    PARC_BUG("stage %d: bad `when` %d", sp->stage, when);
}

/* void stageS.<seq>(rt, chunk, l, slot, micro, step): prt_phase, then the
 * instructions in order; one guarded by `when` inside a branch of its own
 * (pointers computed there are not cached: they do not dominate what
 * follows). */
static LLVMValueRef emit_seq(Gen *g, const StageProgram *sp, SeqKind kind) {
    const Seq *seq = &sp->seq[kind];
    int ncalls = 0;
    for (int i = 0; i < seq->n; i++) {
        if (seq->ins[i].fn >= 0) ncalls++;
        else if (seq->ins[i].coll == COLL_NONE) PARC_BUG("stage %d: a record without a runtime call or collective", sp->stage);
    }
    if (ncalls == 0) return NULL;
    static const char *const params[] = {"rt", "chunk", "l", "slot", "micro", "step", NULL};
    char name[64];
    snprintf(name, sizeof name, "stage%d.%s", sp->stage, seq_symbols[kind]);
    LLVMValueRef fn = codegen_add_function(g, g->t_seq_fn, name, params);
    codegen_begin_function(g, fn);
    g->cache_ptrs = 1; /* one basic block: every value dominates what follows */
    SeqParams p = {LLVMGetParam(fn, 1), LLVMGetParam(fn, 2), LLVMGetParam(fn, 3), LLVMGetParam(fn, 4),
                   LLVMGetParam(fn, 5)};
    LLVMValueRef phase_args[] = {g->rt, c64(g, seq_phase(kind))};
    call_rt(g, RT_prt_phase, phase_args, 2);
    for (int i = 0; i < seq->n; i++) {
        const Instr *in = &seq->ins[i];
        if (in->fn < 0) continue; /* a record for the reports only */
        if (in->fn >= RT_FN_COUNT) PARC_BUG("stage %d %s: bad runtime function %d", sp->stage, name, in->fn);
        int want = rt_fn_nargs(in->fn), word = want + 1 < (int)strlen(rt_fn_sigs[in->fn]);
        if (in->nargs != want || in->nargs > IR_MAX_ARGS)
            PARC_BUG("stage %d %s: %s has %d arguments, its signature \"%s\" wants %d", sp->stage, name,
                     rt_fn_names[in->fn], in->nargs, rt_fn_sigs[in->fn], want);
        LLVMBasicBlockRef done = NULL;
        if (in->when != WHEN_ALWAYS) {
            LLVMBasicBlockRef then = new_block(g, "when");
            done = new_block(g, "when.done");
            LLVMBuildCondBr(g->b, when_cond(g, sp, in->when, p.chunk, p.l), then, done);
            LLVMPositionBuilderAtEnd(g->b, then);
            g->cache_ptrs = 0;
        }
        LLVMValueRef args[IR_MAX_ARGS + 2];
        args[0] = g->rt;
        for (int j = 0; j < in->nargs; j++) args[j + 1] = arg_value(g, sp, in, j, &p);
        if (word) args[in->nargs + 1] = c64(g, dtypes_word(sp, in));
        call_rt(g, (RtFn)in->fn, args, (unsigned)(in->nargs + 1 + word));
        if (done) {
            LLVMBuildBr(g->b, done);
            LLVMPositionBuilderAtEnd(g->b, done);
            g->cache_ptrs = 1;
        }
    }
    LLVMBuildRetVoid(g->b);
    return fn;
}

static void call_seq(Gen *g, LLVMValueRef fn, LLVMValueRef chunk, LLVMValueRef l, LLVMValueRef slot,
                     LLVMValueRef micro, LLVMValueRef step) {
    if (!fn) return;
    LLVMValueRef args[] = {g->rt, chunk, l, slot, micro, step};
    LLVMBuildCall2(g->b, g->t_seq_fn, fn, args, 6, "");
}

/* ---------------------------------------------------------------- forward, backward */

/* Emits "if (chunk == then_chunk) then_fn() else else_fn()" where either side
 * may be absent at compile time: `can_then` / `can_else` say which sides are
 * reachable on this stage. */
typedef void (*SideFn)(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p);

static void emit_choice(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p, int can_then,
                        int can_else, int then_chunk, SideFn then_fn, SideFn else_fn, const char *name) {
    if (can_then && can_else) {
        char buf[64];
        snprintf(buf, sizeof buf, "is_chunk%d", then_chunk);
        LLVMValueRef cond = LLVMBuildICmp(g->b, LLVMIntEQ, p->chunk, c64(g, then_chunk), buf);
        snprintf(buf, sizeof buf, "%s.then", name);
        LLVMBasicBlockRef bt = new_block(g, buf);
        snprintf(buf, sizeof buf, "%s.else", name);
        LLVMBasicBlockRef be = new_block(g, buf);
        snprintf(buf, sizeof buf, "%s.done", name);
        LLVMBasicBlockRef bd = new_block(g, buf);
        LLVMBuildCondBr(g->b, cond, bt, be);
        LLVMPositionBuilderAtEnd(g->b, bt);
        then_fn(g, sp, fns, p);
        LLVMBuildBr(g->b, bd);
        LLVMPositionBuilderAtEnd(g->b, be);
        else_fn(g, sp, fns, p);
        LLVMBuildBr(g->b, bd);
        LLVMPositionBuilderAtEnd(g->b, bd);
    } else if (can_then) {
        then_fn(g, sp, fns, p);
    } else if (can_else) {
        else_fn(g, sp, fns, p);
    }
}

/* The stage's position in the model order (schedule.h): chunk c of stage s is
 * model chunk c * p + s.  The first position (stage 0, chunk 0) reads its
 * input through SEQ_EMBED_FWD; the last (stage p-1, chunk v-1) ends in
 * SEQ_HEAD_FWD; everything else receives from / sends to the neighbour. */
static int first_stage(const Gen *g, const StageProgram *sp) { (void)g; return sp->stage == 0; }
static int last_stage(const Gen *g, const StageProgram *sp) { return sp->stage == g->program->nstages - 1; }

/* prt_work_begin(rt, kind, micro, chunk, chunks): the item's span in the trace
 * starts once its input is there (after the receive, before the embedding or
 * the head's backward); work_end closes it after the output is sent. */
static void work_begin(Gen *g, const StageProgram *sp, const SeqParams *p, WorkKind kind) {
    LLVMValueRef args[] = {g->rt, c64(g, kind), p->micro, p->chunk, c64(g, sp->chunks > 0 ? sp->chunks : 1)};
    call_rt(g, RT_prt_work_begin, args, 5);
}

static void side_embed_fwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    work_begin(g, sp, p, WORK_FORWARD);
    call_seq(g, fns->seq[SEQ_EMBED_FWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}
static void side_recv_fwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    call_seq(g, fns->seq[SEQ_RECV_FWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
    work_begin(g, sp, p, WORK_FORWARD);
}
static void side_head_fwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)sp;
    call_seq(g, fns->seq[SEQ_HEAD_FWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}
static void side_send_fwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)sp;
    call_seq(g, fns->seq[SEQ_SEND_FWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}
static void side_head_bwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    work_begin(g, sp, p, WORK_BACKWARD);
    call_seq(g, fns->seq[SEQ_HEAD_BWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}
static void side_recv_bwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    call_seq(g, fns->seq[SEQ_RECV_BWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
    work_begin(g, sp, p, WORK_BACKWARD);
}
static void side_embed_bwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)sp;
    call_seq(g, fns->seq[SEQ_EMBED_BWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}
static void side_send_bwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)sp;
    call_seq(g, fns->seq[SEQ_SEND_BWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}

static LLVMValueRef emit_work_fn(Gen *g, const StageProgram *sp, const StageFns *fns, int backward) {
    static const char *const params[] = {"rt", "micro", "chunk", "slot", "step", NULL};
    char name[64];
    snprintf(name, sizeof name, "stage%d.%s", sp->stage, backward ? "bwd" : "fwd");
    LLVMValueRef fn = codegen_add_function(g, g->t_work_fn, name, params);
    codegen_begin_function(g, fn);
    SeqParams p = {.micro = LLVMGetParam(fn, 1), .chunk = LLVMGetParam(fn, 2), .slot = LLVMGetParam(fn, 3),
                   .step = LLVMGetParam(fn, 4)};
    int chunks = sp->chunks > 0 ? sp->chunks : 1;
    int L = sp->max_chunk_layers;
    LLVMValueRef chunk_layers = L > 0 ? chunk_figure(g, sp, CHUNK_LAYERS, p.chunk) : NULL;
    /* Which ends are reachable on this stage at all. */
    int begins_model = first_stage(g, sp);                 /* chunk 0 here is the model's start */
    int ends_model = last_stage(g, sp);                    /* chunk v-1 here is the model's end */
    int has_neighbour_in = !begins_model || chunks > 1;    /* some chunk receives */
    int has_neighbour_out = !ends_model || chunks > 1;     /* some chunk sends */
    if (!backward) {
        emit_choice(g, sp, fns, &p, begins_model, has_neighbour_in, 0, side_embed_fwd, side_recv_fwd, "input");
        if (L > 0 && fns->seq[SEQ_BLOCK_FWD]) {
            Loop lp = codegen_loop_begin(g, c64(g, 0), chunk_layers, "l");
            call_seq(g, fns->seq[SEQ_BLOCK_FWD], p.chunk, lp.index, p.slot, p.micro, p.step);
            codegen_loop_end(g, &lp);
        }
        emit_choice(g, sp, fns, &p, ends_model, has_neighbour_out, chunks - 1, side_head_fwd, side_send_fwd, "output");
    } else {
        emit_choice(g, sp, fns, &p, ends_model, has_neighbour_out, chunks - 1, side_head_bwd, side_recv_bwd, "dinput");
        if (L > 0 && fns->seq[SEQ_BLOCK_BWD]) {
            Loop lp = codegen_loop_begin(g, c64(g, 0), chunk_layers, "i");
            LLVMValueRef l = LLVMBuildSub(g->b, LLVMBuildSub(g->b, chunk_layers, c64(g, 1), ""), lp.index, "l");
            call_seq(g, fns->seq[SEQ_BLOCK_BWD], p.chunk, l, p.slot, p.micro, p.step);
            if (sp->sync_in_backward && fns->seq[SEQ_GRAD_SYNC_BLOCK]) {
                /* the layer's gradients are complete after the last micro-batch's
                 * backward through it: reduce them now (a bucket per layer) */
                int64_t last = g->program->plan->train.micro_batches - 1;
                LLVMValueRef cond = LLVMBuildICmp(g->b, LLVMIntEQ, p.micro, c64(g, last), "last_micro");
                LLVMBasicBlockRef bt = new_block(g, "sync.now"), bd = new_block(g, "sync.done");
                LLVMBuildCondBr(g->b, cond, bt, bd);
                LLVMPositionBuilderAtEnd(g->b, bt);
                call_seq(g, fns->seq[SEQ_GRAD_SYNC_BLOCK], p.chunk, l, c64(g, 0), c64(g, 0), p.step);
                LLVMBuildBr(g->b, bd);
                LLVMPositionBuilderAtEnd(g->b, bd);
            }
            codegen_loop_end(g, &lp);
        }
        emit_choice(g, sp, fns, &p, begins_model, has_neighbour_in, 0, side_embed_bwd, side_send_bwd,
                    "doutput");
    }
    call_rt(g, RT_prt_work_end, &g->rt, 1);
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* ---------------------------------------------------------------- stage main */

/* for chunk in 0..chunks-1, l below the chunk's layers: fn(rt, chunk, l, 0, 0, step) */
static void emit_every_layer(Gen *g, const StageProgram *sp, LLVMValueRef fn, LLVMValueRef step, const char *name) {
    if (!fn || sp->layers <= 0) return;
    char buf[64];
    snprintf(buf, sizeof buf, "%s.chunk", name);
    Loop lc = codegen_loop_begin(g, c64(g, 0), c64(g, sp->chunks > 0 ? sp->chunks : 1), buf);
    snprintf(buf, sizeof buf, "%s.l", name);
    Loop ll = codegen_loop_begin(g, c64(g, 0), chunk_figure(g, sp, CHUNK_LAYERS, lc.index), buf);
    call_seq(g, fn, lc.index, ll.index, c64(g, 0), c64(g, 0), step);
    codegen_loop_end(g, &ll);
    codegen_loop_end(g, &lc);
}

/* void stageS.eval(rt, step): n = prt_eval_begin(rt, step) validation batches,
 * each micro-batch through every chunk forward in (micro, chunk) order, the
 * same order on every stage (a receive waits only for work that precedes it
 * there, so the buffered sends cannot deadlock), activation slot 0 (nothing is
 * kept for a backward); then prt_eval_end. */
static LLVMValueRef emit_eval_fn(Gen *g, const StageProgram *sp, const StageFns *fns) {
    if (g->program->plan->train.eval_every <= 0) return NULL;
    static const char *const params[] = {"rt", "step", NULL};
    char name[64];
    snprintf(name, sizeof name, "stage%d.eval", sp->stage);
    LLVMValueRef fn = codegen_add_function(g, g->t_eval_fn, name, params);
    codegen_begin_function(g, fn);
    LLVMValueRef step = LLVMGetParam(fn, 1);
    LLVMValueRef args[] = {g->rt, step};
    LLVMValueRef n = call_life(g, LIFE_prt_eval_begin, args, 2, "eval_batches");
    Loop le = codegen_loop_begin(g, c64(g, 0), n, "eval.batch");
    LLVMValueRef bargs[] = {g->rt, le.index};
    call_life(g, LIFE_prt_eval_batch, bargs, 2, "");
    Loop lm = codegen_loop_begin(g, c64(g, 0), c64(g, g->program->plan->train.micro_batches), "eval.micro");
    Loop lc = codegen_loop_begin(g, c64(g, 0), c64(g, sp->chunks > 0 ? sp->chunks : 1), "eval.chunk");
    LLVMValueRef wargs[] = {g->rt, lm.index, lc.index, c64(g, 0), step};
    LLVMBuildCall2(g->b, g->t_work_fn, fns->fwd, wargs, 5, "");
    codegen_loop_end(g, &lc);
    codegen_loop_end(g, &lm);
    codegen_loop_end(g, &le);
    call_life(g, LIFE_prt_eval_end, args, 2, "");
    LLVMBuildRetVoid(g->b);
    return fn;
}

static void call_eval(Gen *g, const StageFns *fns, LLVMValueRef step) {
    if (!fns->eval) return;
    LLVMValueRef args[] = {g->rt, step};
    LLVMBuildCall2(g->b, g->t_eval_fn, fns->eval, args, 2, "");
}

static LLVMValueRef emit_stage_main(Gen *g, const StageProgram *sp, const StageFns *fns) {
    static const char *const params[] = {"rt", NULL};
    char name[64];
    snprintf(name, sizeof name, "stage%d.main", sp->stage);
    LLVMValueRef buffers = codegen_emit_buffer_table(g, sp);
    LLVMValueRef schedule = codegen_emit_schedule_table(g, sp);
    LLVMValueRef ledger = codegen_emit_ledger(g, sp);
    LLVMValueRef fn = codegen_add_function(g, g->t_stage_fn, name, params);
    codegen_begin_function(g, fn);
    LLVMValueRef zero = c64(g, 0);

    LLVMValueRef reg[] = {g->rt, LLVMConstBitCast(buffers, g->t_ptr), c64(g, sp->nbufs)};
    call_life(g, LIFE_prt_register_buffers, reg, 3, "");
    LLVMValueRef exp[] = {g->rt, LLVMConstBitCast(ledger, g->t_ptr)};
    call_life(g, LIFE_prt_expect_memory, exp, 2, "");
    LLVMValueRef steps = call_life(g, LIFE_prt_steps, &g->rt, 1, "steps");

    LLVMValueRef first = call_life(g, LIFE_prt_first_step, &g->rt, 1, "first_step");  /* after a resume: later */
    call_eval(g, fns, LLVMBuildSub(g->b, first, c64(g, 1), "before_first"));  /* the initial model, step 0 */
    Loop ls = codegen_loop_begin(g, first, LLVMBuildAdd(g->b, steps, c64(g, 1), "steps_end"), "step");
    LLVMValueRef step = ls.index;
    LLVMValueRef sargs[] = {g->rt, step};
    call_life(g, LIFE_prt_step_begin, sargs, 2, "");

    call_seq(g, fns->seq[SEQ_ZERO_GRADS_ONCE], zero, zero, zero, zero, step);
    emit_every_layer(g, sp, fns->seq[SEQ_ZERO_GRADS_BLOCK], step, "zero");

    if (sp->nitems > 0) {
        Loop li = codegen_loop_begin(g, c64(g, 0), c64(g, sp->nitems), "item");
        LLVMValueRef field[4];
        static const char *const field_names[4] = {"kind", "micro", "chunk", "slot"};
        for (int f = 0; f < 4; f++) {
            LLVMValueRef idx[] = {zero, li.index, c64(g, f)};
            LLVMValueRef addr = LLVMBuildInBoundsGEP2(g->b, LLVMGlobalGetValueType(schedule), schedule, idx, 3, "");
            field[f] = LLVMBuildLoad2(g->b, g->t_i64, addr, field_names[f]);
        }
        LLVMBasicBlockRef bf = new_block(g, "item.fwd");
        LLVMBasicBlockRef bb = new_block(g, "item.bwd");
        LLVMBasicBlockRef bn = new_block(g, "item.next");
        LLVMValueRef is_fwd = LLVMBuildICmp(g->b, LLVMIntEQ, field[0], c64(g, WORK_FORWARD), "is_fwd");
        LLVMBuildCondBr(g->b, is_fwd, bf, bb);
        LLVMValueRef wargs[] = {g->rt, field[1], field[2], field[3], step};
        LLVMPositionBuilderAtEnd(g->b, bf);
        LLVMBuildCall2(g->b, g->t_work_fn, fns->fwd, wargs, 5, "");
        LLVMBuildBr(g->b, bn);
        LLVMPositionBuilderAtEnd(g->b, bb);
        LLVMBuildCall2(g->b, g->t_work_fn, fns->bwd, wargs, 5, "");
        LLVMBuildBr(g->b, bn);
        LLVMPositionBuilderAtEnd(g->b, bn);
        codegen_loop_end(g, &li);
    }

    if (!sp->sync_in_backward) emit_every_layer(g, sp, fns->seq[SEQ_GRAD_SYNC_BLOCK], step, "sync");
    call_seq(g, fns->seq[SEQ_GRAD_SYNC_ONCE], zero, zero, zero, zero, step);
    /* the buckets started in the backward complete here (overlap.c) */
    emit_every_layer(g, sp, fns->seq[SEQ_GRAD_WAIT_BLOCK], step, "wait");
    emit_every_layer(g, sp, fns->seq[SEQ_GRAD_NORM_BLOCK], step, "norm"); /* `clip`: the gradient norm */
    call_seq(g, fns->seq[SEQ_GRAD_NORM_ONCE], zero, zero, zero, zero, step);
    call_life(g, LIFE_prt_before_optimizer, sargs, 2, "");
    emit_every_layer(g, sp, fns->seq[SEQ_OPTIM_BLOCK], step, "optim");
    call_seq(g, fns->seq[SEQ_OPTIM_ONCE], zero, zero, zero, zero, step);
    call_eval(g, fns, step);

    call_life(g, LIFE_prt_step_end, sargs, 2, "");
    codegen_loop_end(g, &ls);
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* int main(int argc, char **argv) */
static void emit_main(Gen *g, LLVMValueRef plan_desc, const StageFns *stages) {
    const Program *pr = g->program;
    LLVMTypeRef argv_type = LLVMPointerType(g->t_ptr, 0);
    LLVMTypeRef params[] = {g->t_i32, argv_type};
    LLVMValueRef fn = LLVMAddFunction(g->mod, "main", LLVMFunctionType(g->t_i32, params, 2, 0));
    LLVMSetValueName2(LLVMGetParam(fn, 0), "argc", 4);
    LLVMSetValueName2(LLVMGetParam(fn, 1), "argv", 4);
    g->fn = fn;
    memset(g->coord, 0, sizeof g->coord);
    g->entry = new_block(g, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
    LLVMValueRef iargs[] = {LLVMBuildSExt(g->b, LLVMGetParam(fn, 0), g->t_i64, "argc64"),
                            LLVMBuildBitCast(g->b, LLVMGetParam(fn, 1), g->t_ptr, "argv8"),
                            LLVMConstBitCast(plan_desc, g->t_ptr)};
    g->rt = call_life(g, LIFE_prt_init, iargs, 3, "rt");
    LLVMBasicBlockRef done = new_block(g, "finalize");
    if (pr->nstages == 1) {
        LLVMBuildCall2(g->b, g->t_stage_fn, stages[0].main, &g->rt, 1, "");
        LLVMBuildBr(g->b, done);
    } else {
        LLVMValueRef cargs[] = {g->rt, c64(g, pr->pp_axis)};
        LLVMValueRef stage = call_life(g, LIFE_prt_coord, cargs, 2, "stage");
        LLVMBasicBlockRef bad = new_block(g, "bad_stage");
        LLVMValueRef sw = LLVMBuildSwitch(g->b, stage, bad, (unsigned)pr->nstages);
        for (int s = 0; s < pr->nstages; s++) {
            char name[32];
            snprintf(name, sizeof name, "stage%d", s);
            LLVMBasicBlockRef bs = new_block(g, name);
            LLVMAddCase(sw, c64(g, s), bs);
            LLVMPositionBuilderAtEnd(g->b, bs);
            LLVMBuildCall2(g->b, g->t_stage_fn, stages[s].main, &g->rt, 1, "");
            LLVMBuildBr(g->b, done);
        }
        LLVMPositionBuilderAtEnd(g->b, bad);
        call_life(g, LIFE_abort, NULL, 0, "");
        LLVMBuildUnreachable(g->b);
    }
    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMValueRef status = call_life(g, LIFE_prt_finalize, &g->rt, 1, "status");
    LLVMBuildRet(g->b, LLVMBuildTrunc(g->b, status, g->t_i32, ""));
}

void codegen_build_module(Gen *g) {
    const Program *pr = g->program;
    PARC_ASSERT(pr->nstages >= 1 && pr->plan);
    codegen_build_types(g);
    codegen_declare_runtime(g);
    LLVMValueRef plan_desc = codegen_emit_plan_desc(g);
    StageFns *fns = calloc((size_t)pr->nstages, sizeof *fns);
    PARC_ASSERT(fns);
    for (int s = 0; s < pr->nstages; s++) {
        const StageProgram *sp = &pr->stages[s];
        PARC_ASSERT(sp->stage == s);
        if (sp->has_embed && s != 0) PARC_BUG("stage %d holds the embedding; codegen expects it on stage 0", s);
        if (sp->has_head && s != pr->nstages - 1)
            PARC_BUG("stage %d holds the head; codegen expects it on the last stage", s);
        if (pr->nstages > 1 && pr->pp_axis < 0) PARC_BUG("%d stages without a pipeline axis", pr->nstages);
        for (int k = 0; k < SEQ_COUNT; k++) fns[s].seq[k] = emit_seq(g, sp, (SeqKind)k);
        fns[s].fwd = emit_work_fn(g, sp, &fns[s], 0);
        fns[s].bwd = emit_work_fn(g, sp, &fns[s], 1);
        fns[s].eval = emit_eval_fn(g, sp, &fns[s]);
        fns[s].main = emit_stage_main(g, sp, &fns[s]);
    }
    emit_main(g, plan_desc, fns);
    free(fns);
}
