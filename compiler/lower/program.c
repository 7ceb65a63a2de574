/*
 * program.c — the lowered program's builders, verifier and dump.
 *
 * Builders (ir.h): buffers of a stage, instructions appended to a sequence,
 * report-only records; they take the program's parts, not a pass's context.  program_verify checks a Program's
 * invariants (a failure is a compiler bug, PARC_BUG); program_dump prints it
 * in a stable text form (no pointers, no hash order) for golden files.
 */
#include "ledger.h"

/* ------------------------------------------------------------ sizes */

int64_t program_local_numel(const Plan *plan, const Tensor *t, const Placement *place)
{
    if (t->kind == TENSOR_SCALAR) return 1;
    int64_t n = expand_tensor_local_numel(plan, t, place);
    /* ZeRO shards a parameter's local block flat, padded up to a multiple of
     * its axis: a block held whole on that axis keeps the padding too, so the
     * axis's all-gather and reduce-scatter move size × share elements */
    int za = program_param_zero_axis(plan, t);
    if (za < 0) return n;
    /* its flat shard */
    if (place_on(plan, place, za).kind == PLACE_S) return n;
    int64_t z = plan->mesh.axes[za].size;
    return (n + z - 1) / z * z;
}

int program_param_zero_axis(const Plan *plan, const Tensor *t)
{
    const Layout *l = &plan->layout;
    if (t->kind != TENSOR_PARAM || l->zero_stage < 1 || l->zero_axis < 0) return -1;
    unsigned parts = plan_axis_parts(plan, l->zero_axis), own = 0;
    for (int a = 0; a < plan->mesh.naxes; a++)
        if ((parts >> a & 1) && t->home[a].kind == PLACE_S && t->home[a].dim != DIM_FLAT) own |= 1u << a;
    if (!own) return l->zero_axis;
    unsigned rest = parts & ~own;
    for (int a = 0; rest && a < plan->mesh.naxes + plan->mesh.nderived; a++)
        if (plan_axis_parts(plan, a) == rest) return a;
    return -1;
}

void program_local_sizes(const Plan *plan, const Tensor *t, const Placement *place, int64_t *sizes)
{
    expand_local_sizes(plan, t, place, sizes);
}

/* ------------------------------------------------------------ builders */

int program_act_dtype(const Plan *plan)
{
    switch (plan->train.precision) {
    case PREC_BF16: return PRT_BF16;
    case PREC_FP16: return PRT_F16;
    default: return PRT_F32;
    }
}

int program_buf_new(Program *prog, StageProgram *sp, int order, const char *name, int klass, int dtype, int64_t elems,
                    int64_t instances)
{
    Buffer b;
    memset(&b, 0, sizeof b);
    b.name = arena_strdup(prog->arena, name);
    b.klass = klass;
    b.dtype = dtype;
    b.elems = elems;
    b.instances = instances;
    b.first_layer = -1;
    b.zero_axis = -1;
    b.copy_of = -1;
    b.order = order;
    for (int i = 0; i < 4; i++) b.split_axis[i] = -1;
    ARR_PUSH(prog->arena, sp->bufs, sp->nbufs, sp->bufs_cap, b);
    return sp->nbufs - 1;
}

static Instr instr_blank(Phase phase, int fn)
{
    Instr ins;
    memset(&ins, 0, sizeof ins);
    ins.fn = fn;
    ins.coll = COLL_NONE;
    ins.axis = -1;
    ins.op = -1;
    ins.entry = ENTRY_NONE;
    ins.shape.axis = -1;
    ins.tensor = -1;
    ins.phase = phase;
    return ins;
}

Instr *program_instr_new(Arena *arena, Seq *seq, Phase phase, RtFn fn)
{
    Instr ins = instr_blank(phase, (int)fn);
    ARR_PUSH(arena, seq->ins, seq->n, seq->cap, ins);
    return &seq->ins[seq->n - 1];
}

void program_push_args(Instr *ins, int n, const Arg *args)
{
    PARC_ASSERT(n <= IR_MAX_ARGS);
    ins->nargs = n;
    memcpy(ins->args, args, sizeof(Arg) * (size_t)n);
}

void program_record(Arena *arena, Seq *seq, Phase phase, CollKind coll, int axis, int64_t elems, int op, int tensor,
                    const char *why)
{
    Instr rec = instr_blank(phase, -1);
    rec.coll = coll;
    rec.axis = axis;
    rec.elems = elems;
    rec.elem_bytes = 4;
    rec.op = op;
    rec.tensor = tensor;
    rec.why = why;
    ARR_PUSH(arena, seq->ins, seq->n, seq->cap, rec);
}

int64_t program_seq_calls_per_step(const Program *prog, const StageProgram *sp, SeqKind seq)
{
    int64_t m = prog->plan->train.micro_batches;
    int64_t layers = sp->layers;
    switch (seq) {
    case SEQ_EMBED_FWD:
    case SEQ_EMBED_BWD: return sp->has_embed ? m : 0;
    case SEQ_HEAD_FWD:
    case SEQ_HEAD_BWD: return sp->has_head ? m : 0;
    case SEQ_BLOCK_FWD:
    case SEQ_BLOCK_BWD: return m * layers;
    case SEQ_ZERO_GRADS_BLOCK:
    case SEQ_GRAD_SYNC_BLOCK:
    case SEQ_GRAD_WAIT_BLOCK:
    case SEQ_OPTIM_BLOCK:
    case SEQ_GRAD_NORM_BLOCK: return layers;
    /* one message per micro-batch per chunk boundary: none into the model's
     * first chunk, none out of its last */
    case SEQ_RECV_FWD:
    case SEQ_SEND_BWD: return prog->nstages > 1 ? m * (sp->chunks - (sp->stage == 0)) : 0;
    case SEQ_SEND_FWD:
    case SEQ_RECV_BWD: return prog->nstages > 1 ? m * (sp->chunks - (sp->stage == prog->nstages - 1)) : 0;
    default: return 1;
    }
}

/* ------------------------------------------------------------ verifier */

void program_verify(const Program *prog)
{
    const Plan *plan = prog->plan;
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        for (int b = 0; b < sp->nbufs; b++)
            if (sp->bufs[b].klass < 0 || sp->bufs[b].klass >= PRT_NCLASS || sp->bufs[b].dtype < 0 ||
                sp->bufs[b].dtype >= PRT_NDTYPE)
                PARC_BUG("stage %d: buffer %%%s has class %d and dtype %d", s, sp->bufs[b].name, sp->bufs[b].klass,
                         sp->bufs[b].dtype);
        for (int q = 0; q < SEQ_COUNT; q++) {
            const Seq *seq = &sp->seq[q];
            int block = seq_per_layer[q], per_micro = seq_per_micro[q];
            for (int i = 0; i < seq->n; i++) {
                const Instr *ins = &seq->ins[i];
                if (ins->fn < 0) {
                    if (ins->coll == COLL_NONE) PARC_BUG("stage %d %s: a record without a collective", s, seq_names[q]);
                    continue;
                }
                if (ins->fn >= RT_FN_COUNT) PARC_BUG("stage %d %s: bad runtime function %d", s, seq_names[q], ins->fn);
                const char *sig = rt_fn_sigs[ins->fn];
                if (rt_fn_nargs(ins->fn) != ins->nargs)
                    PARC_BUG("stage %d %s: %s takes %d arguments, given %d", s, seq_names[q], rt_fn_names[ins->fn],
                             rt_fn_nargs(ins->fn), ins->nargs);
                for (int k = 0; k < ins->nargs; k++) {
                    const Arg *a = &ins->args[k];
                    char want = sig[k + 1];
                    int is_ptr = a->kind == ARG_BUF || a->kind == ARG_NULL;
                    int is_f = a->kind == ARG_F64 || a->kind == ARG_LR || a->kind == ARG_COUNTED ||
                               a->kind == ARG_CLIP_SCALE;
                    if ((want == 'p') != is_ptr || (want == 'd') != is_f)
                        PARC_BUG("stage %d %s: %s argument %d has the wrong kind", s, seq_names[q],
                                 rt_fn_names[ins->fn], k + 1);
                    if (a->kind == ARG_BUF) {
                        if (a->buf < 0 || a->buf >= sp->nbufs)
                            PARC_BUG("stage %d %s: %s names buffer %d of %d", s, seq_names[q], rt_fn_names[ins->fn],
                                     a->buf, sp->nbufs);
                        /* embed/head sequences run with l = 0, so INST_SLOT_L names resid[k] there */
                        if ((a->inst == INST_LAYER || a->inst == INST_PARITY || a->inst == INST_LAYER_AT) && !block)
                            PARC_BUG("stage %d %s: per-layer instance outside a layer loop", s, seq_names[q]);
                        if ((a->inst == INST_SLOT || a->inst == INST_SLOT_L || a->inst == INST_SLOT_END) && !per_micro)
                            PARC_BUG("stage %d %s: per-slot instance outside a micro-batch", s, seq_names[q]);
                    }
                    if ((a->kind == ARG_COORD_TIMES || (a->kind == ARG_BUF && a->axis >= 0)) &&
                        a->axis >= plan->mesh.naxes + plan->mesh.nderived)
                        PARC_BUG("stage %d %s: axis %d is not a mesh axis", s, seq_names[q], a->axis);
                }
                if (ins->when != WHEN_ALWAYS && (!block || ins->when < 0 || ins->when >= WHEN_COUNT))
                    PARC_BUG("stage %d %s: %s runs only on some layers outside a layer loop", s, seq_names[q],
                             rt_fn_names[ins->fn]);
                if (ins->coll != COLL_NONE && (ins->axis < 0 || ins->axis >= plan->mesh.naxes + plan->mesh.nderived))
                    PARC_BUG("stage %d %s: collective over a non-axis group", s, seq_names[q]);
            }
        }
    }
    overlap_verify(prog);
    overlap_tp_verify(prog);
    for (int s = 0; s < prog->nstages; s++)
        for (int q = 0; q < SEQ_COUNT; q++) first_write_verify(&prog->stages[s], &prog->stages[s].seq[q], seq_names[q]);
}

/* ------------------------------------------------------------ dump */

static void arg_dump(const StageProgram *sp, const Arg *a, FILE *out)
{
    static const char *const inst_formats[INST_COUNT] = {
#define X(name, fmt) fmt,
        IR_INST_MODES(X)
#undef X
    };
    switch (a->kind) {
    case ARG_NULL: fprintf(out, "null"); break;
    case ARG_BUF:
        fprintf(out, "%%%s", sp->bufs[a->buf].name);
        if (a->inst != INST_FIXED || a->k) fprintf(out, inst_formats[a->inst], a->k);
        if (a->axis >= 0) fprintf(out, "+coord(%d)*%lld", a->axis, (long long)a->i);
        break;
    case ARG_INT: fprintf(out, "%lld", (long long)a->i); break;
    case ARG_F64: fprintf(out, "%.9g", a->d); break;
    case ARG_COORD_TIMES:
        fprintf(out, "coord(%d)*%lld", a->axis, (long long)a->i);
        if (a->k) fprintf(out, "%+d", a->k);
        break;
    case ARG_STEP: fprintf(out, "step"); break;
    case ARG_LR: fprintf(out, "lr"); break;
    case ARG_CLIP_SCALE: fprintf(out, "clip_scale"); break;
    case ARG_COUNTED: /* the axes over which the value is replicated */
        fprintf(out, "once_over(");
        for (int a_ = 0, n_ = 0; a_ < PARC_MAX_AXES; a_++)
            if (a->i >> a_ & 1) fprintf(out, "%s%d", n_++ ? "," : "", a_);
        fprintf(out, ")");
        break;
    case ARG_FIRST_SAMPLE: fprintf(out, "first_sample"); break;
    case ARG_LAYER:
        fprintf(out, "layer");
        if (a->k) fprintf(out, "%+d", a->k);
        break;
    case ARG_TAG:
        fprintf(out, "tag(%s, micro, chunk", a->i ? "grad" : "act");
        if (a->k) fprintf(out, "%+d", a->k);
        fprintf(out, ")");
        break;
    }
}

void program_dump(const Program *prog, FILE *out)
{
    const Plan *plan = prog->plan;
    fprintf(out, "program %s: %d stage(s), schedule %s, %lld micro-batches\n",
            plan->model.name ? plan->model.name : "model", prog->nstages, schedule_kind_name(prog->schedule.kind),
            (long long)plan->train.micro_batches);
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        /* the program's unit: a layer, or a block of N layers (`every N`) */
        int64_t N = plan_block_layers(plan);
        const char *unit = N > 1 ? "blocks" : "layers";
        fprintf(out, "\nstage %d: chunks %d, %s per chunk", s, sp->chunks, unit);
        int alike = 1;
        for (int c = 1; c < sp->chunks; c++) alike &= sp->chunk_layers[c] == sp->chunk_layers[0];
        for (int c = 0; c < (alike ? 1 : sp->chunks); c++) fprintf(out, " %d", sp->chunk_layers[c]);
        if (N > 1) fprintf(out, " of %lld layers", (long long)N);
        fprintf(out, ", first %s", unit);
        for (int c = 0; c < sp->chunks; c++) fprintf(out, " %d", sp->chunk_first_layer[c]);
        fprintf(out, ", embed %d, head %d, slots %d, message %lld elements\n", sp->has_embed, sp->has_head, sp->nslots,
                (long long)sp->boundary_elems);
        fprintf(out, "  gradient sync of layers: %s\n",
                sp->sync_in_backward ? "per layer, right after the last micro-batch's backward through it"
                                     : "reduce-scattered after every micro-batch's backward (ZeRO-2/3)");
        fprintf(out, "  buffers:\n");
        for (int b = 0; b < sp->nbufs; b++) {
            const Buffer *bf = &sp->bufs[b];
            fprintf(out, "    %%%-24s %-11s %-4s %10lld x %lld", bf->name, ledger_class_keys[bf->klass],
                    dtype_names[bf->dtype], (long long)bf->elems, (long long)bf->instances);
            if (bf->zero_axis >= 0) fprintf(out, bf->zero_whole ? " zero(%d, whole)" : " zero(%d)", bf->zero_axis);
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
                if (ins->coll != COLL_NONE || instr_is_wait(ins)) fprintf(out, "    ; %s", ins->why ? ins->why : "");
                for (int k = 0, n = 0; k < ins->nargs; k++)  /* first_write.c */
                    if (ins->writes >> k & 1)
                        fprintf(out, "%s%%%s%s", n++ ? ", " : "    ; writes ", sp->bufs[ins->args[k].buf].name,
                                ins->writes >> (k + 1) ? "" : ", not adds");
                if (ins->when != WHEN_ALWAYS) fprintf(out, "    ; %s", when_names[ins->when]);
                if (ins->shape.part != OP_PART_WHOLE) /* overlap_tp.c */
                    fprintf(out, "    ; the %s gradient only", ins->shape.part == OP_PART_INPUT ? "input" : "weight");
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

