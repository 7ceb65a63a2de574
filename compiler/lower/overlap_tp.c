/*
 * overlap_tp.c — the backward's input-gradient collectives over the tensor
 * axis started before the weight-gradient GEMM and completed after it
 * (Megatron-LM's asynchronous tensor-parallel all-reduce: Narayanan et al.
 * 2021, "Efficient Large-Scale Language Model Training on GPU Clusters",
 * section 4.1 and its code's LinearWithGradAccumulationAndAsyncCommunication),
 * and the verifier of that.
 *
 * Takes a stage whose backward sequences (SEQ_BLOCK_BWD, SEQ_HEAD_BWD,
 * SEQ_EMBED_BWD) are as autodiff and optim left them: a linear whose weight is
 * split on its output dim over an axis (column-parallel: qkv, the MLP's up
 * projection, a vocab-parallel head) computes a Partial input gradient, and
 * reshard.c's table then sums it with a blocking all-reduce (a reduce-scatter
 * under sequence parallelism), on the gradient itself or on a copy of it.
 * Each such linear backward (matmul_bwd, matmul_t_bwd, matmul_bias_bwd with
 * both its input gradient and its weight gradient) becomes two calls of the
 * same entry, OpShape.part telling them apart:
 *
 *   input half   (din, null, dout, in, w[, null], N, K, M)     din GEMM
 *   ...          what lies between it and the collective (the copy)
 *   start        allreduce_start / reducescatter_start of the collective
 *   weight half  (null, dw, dout, in, w[, db], N, K, M)        dW GEMM (+ db)
 *   wait         comm_wait on the collective's result
 *
 * so the collective travels while the weight gradient computes.  A
 * collective is started only where the chain from the input half to it
 * (copies) names none of the weight half's buffers, and the weight half names
 * none of the collective's.  With `tp_overlap off;` nothing changes.  Runs
 * before the `overlap` row, so ZeRO-2/3's gradient scatters start after the
 * weight half, their last writer.
 *
 * Guarantees (overlap_tp_verify, from program_verify): each half of a split
 * call has its other half in the same sequence, input half first, with the
 * same op, shape, dout, in and w, the input half's weight and bias gradients
 * null and the weight half's input gradient null; each collective started in
 * a backward sequence over an axis other than ZeRO's data axis is fed by an
 * input half through copies only, is followed by that input half's weight
 * half and then by exactly one wait on its result, and nothing between the
 * start and the wait names its buffers; a started reduce-scatter that packs
 * (outer > 1, through the runtime's one communication stage) has no other
 * collective that packs between it and its wait.  A ring step's shift
 * (any sequence) has one wait after it, and between them nothing names its
 * result and its input is named only as a ring step's kv or another shift's
 * input (the step reads the block the shift is passing on).
 */
#include "lower.h"

/* Is ins a linear's whole backward, both gradients given? */
static int splittable(const Lowerer *lw, const Instr *ins)
{
    if (ins->entry != ENTRY_BACKWARD || ins->op < 0 || ins->shape.part != OP_PART_WHOLE) return 0;
    OpKind k = lw->g->ops[ins->op].kind;
    if (k != OP_LINEAR && k != OP_LINEAR_T) return 0;
    return ins->nargs >= 5 && ins->args[0].kind == ARG_BUF && ins->args[1].kind == ARG_BUF;
}

/* The arguments of a linear backward the weight half takes: dw, dout, in, w
 * and (matmul_bias_bwd) db. */
static int weight_arg(const Instr *ins, int k)
{
    return k >= 1 && k <= 4 ? 1 : ins->fn == RT_prt_matmul_bias_bwd && k == 5;
}

/* Does ins name any buffer the weight half of `lin` names? */
static int names_weight_half(const Instr *ins, const Instr *lin)
{
    for (int k = 0; k < lin->nargs; k++) {
        if (!weight_arg(lin, k) || lin->args[k].kind != ARG_BUF) continue;
        for (int m = 0; m < ins->nargs; m++)
            if (ins->args[m].kind == ARG_BUF && ins->args[m].buf == lin->args[k].buf) return 1;
    }
    return 0;
}

static int names_buf(const Instr *ins, int b)
{
    for (int k = 0; k < ins->nargs; k++)
        if (ins->args[k].kind == ARG_BUF && ins->args[k].buf == b) return 1;
    return 0;
}

/* A blocking all-reduce or reduce-scatter: the buffer it reads, else -1. */
static int collective_source(const Instr *ins)
{
    if (ins->fn == RT_prt_allreduce || ins->fn == RT_prt_allreduce_start) return ins->args[1].buf;
    if (ins->fn == RT_prt_reducescatter || ins->fn == RT_prt_reducescatter_start) return ins->args[2].buf;
    return -1;
}

/* The linear backward whose input gradient collective i of seq sums: walking
 * back from it through copies into the buffer it reads, the first
 * instruction that names that buffer and is a splittable linear backward
 * writing it as its input gradient; -1 when another instruction names it
 * first. */
static int feeding_linear(const Lowerer *lw, const Seq *seq, int i)
{
    int want = collective_source(&seq->ins[i]);
    if (want < 0) return -1;
    for (int k = i - 1; k >= 0; k--) {
        const Instr *o = &seq->ins[k];
        if (!names_buf(o, want)) continue;
        if (o->fn == RT_prt_copy && o->args[0].kind == ARG_BUF && o->args[0].buf == want && o->args[1].kind == ARG_BUF &&
            o->args[1].buf != want) {
            want = o->args[1].buf;
            continue;
        }
        return splittable(lw, o) && o->args[0].buf == want ? k : -1;
    }
    return -1;
}

/* The two halves of linear backward `whole`. */
static void halves(const Lowerer *lw, const Instr *whole, Instr *in_half, Instr *w_half)
{
    const OpDesc *d = &op_table[lw->g->ops[whole->op].kind];
    double rest = whole->flops - d->flops(&whole->shape, 1); /* a folded bias's */
    *in_half = *w_half = *whole;
    in_half->shape.part = OP_PART_INPUT;
    w_half->shape.part = OP_PART_WEIGHT;
    in_half->flops = d->flops(&in_half->shape, 1);
    w_half->flops = d->flops(&w_half->shape, 1) + rest;
    in_half->args[1] = arg_null();
    if (whole->fn == RT_prt_matmul_bias_bwd) in_half->args[5] = arg_null();
    w_half->args[0] = arg_null();
    in_half->writes = whole->writes & 1u;
    w_half->writes = whole->writes & ~1u;
}

static void tp_overlap_seq(Lowerer *lw, SeqKind q)
{
    StageProgram *sp = lw->sp;
    Seq *seq = &sp->seq[q];
    int n = seq->n, data_axis = lw->plan->layout.zero_axis;
    if (n == 0) return;
    Instr *orig = arena_alloc(lw->arena, sizeof(Instr) * (size_t)n);
    memcpy(orig, seq->ins, sizeof(Instr) * (size_t)n);
    int *split_for = arena_alloc(lw->arena, sizeof(int) * (size_t)n); /* a start: the linear it follows, else -1 */
    unsigned char *split = arena_alloc(lw->arena, (size_t)n);         /* a linear split for a later start */
    memset(split, 0, (size_t)n);
    for (int i = 0; i < n; i++) {
        split_for[i] = -1;
        const Instr *c = &orig[i];
        if ((c->fn != RT_prt_allreduce && c->fn != RT_prt_reducescatter) || c->axis < 0 || c->axis == data_axis ||
            c->when != WHEN_ALWAYS)
            continue;
        int j = feeding_linear(lw, seq, i);
        if (j < 0 || split[j]) continue;
        int clear = !names_weight_half(c, &orig[j]);
        for (int k = j + 1; k < i && clear; k++)
            clear = !names_weight_half(&orig[k], &orig[j]) && !instr_is_start(&orig[k]) && !instr_is_wait(&orig[k]);
        if (!clear) continue;
        split[j] = 1;
        split_for[i] = j;
    }
    seq->n = 0;
    for (int i = 0; i < n; i++) {
        Instr in_half, w_half;
        if (split[i]) {
            halves(lw, &orig[i], &in_half, &w_half);
            *program_instr_new(lw->arena, seq, in_half.phase, (RtFn)in_half.fn) = in_half;
            continue;
        }
        Instr *to = program_instr_new(lw->arena, seq, orig[i].phase, (RtFn)orig[i].fn);
        *to = orig[i];
        int j = split_for[i];
        if (j < 0) continue;
        to->fn = to->fn == RT_prt_allreduce ? RT_prt_allreduce_start : RT_prt_reducescatter_start;
        halves(lw, &orig[j], &in_half, &w_half);
        *program_instr_new(lw->arena, seq, w_half.phase, (RtFn)w_half.fn) = w_half;
        Emit ew = {lw, seq, orig[i].phase};
        Instr *w = EMIT(&ew, RT_prt_comm_wait, *instr_async_result(&orig[i]));
        w->axis = orig[i].axis;
        w->tensor = orig[i].tensor;
        w->why = arena_printf(lw->arena, "completes the %s of %s's input gradient started before %s's weight gradient",
                              coll_names[orig[i].coll], lw->g->ops[orig[j].op].name, lw->g->ops[orig[j].op].name);
    }
}

void overlap_tp(Lowerer *lw)
{
    tp_overlap_seq(lw, SEQ_BLOCK_BWD);
    tp_overlap_seq(lw, SEQ_HEAD_BWD);
    tp_overlap_seq(lw, SEQ_EMBED_BWD);
}

/* ------------------------------------------------------------ verifier */

static int same_arg(const Arg *a, const Arg *b)
{
    return a->kind == b->kind && (a->kind != ARG_BUF || (a->buf == b->buf && a->inst == b->inst && a->k == b->k &&
                                                         a->axis == b->axis && a->i == b->i));
}

/* Are x (an input half) and y (a weight half) the two halves of one call? */
static int pair_of(const Instr *x, const Instr *y)
{
    if (x->fn != y->fn || x->op != y->op || x->nargs != y->nargs || x->shape.part != OP_PART_INPUT ||
        y->shape.part != OP_PART_WEIGHT || memcmp(x->shape.d, y->shape.d, sizeof x->shape.d) != 0)
        return 0;
    for (int k = 2; k < x->nargs; k++)
        if (k != 5 || x->fn != RT_prt_matmul_bias_bwd) {
            if (!same_arg(&x->args[k], &y->args[k])) return 0;
        }
    return 1;
}

static void verify_halves(const StageProgram *sp, SeqKind q)
{
    const Seq *seq = &sp->seq[q];
    for (int i = 0; i < seq->n; i++) {
        const Instr *h = &seq->ins[i];
        if (h->shape.part == OP_PART_WHOLE) continue;
        int input = h->shape.part == OP_PART_INPUT;
        int nulls_ok = input ? h->args[0].kind == ARG_BUF && h->args[1].kind == ARG_NULL &&
                                   (h->fn != RT_prt_matmul_bias_bwd || h->args[5].kind == ARG_NULL)
                             : h->args[0].kind == ARG_NULL && h->args[1].kind == ARG_BUF;
        if (h->entry != ENTRY_BACKWARD || !nulls_ok)
            PARC_BUG("stage %d %s: %s, the %s half of a linear's backward, does not name that gradient alone",
                     sp->stage, seq_names[q], rt_fn_names[h->fn], input ? "input" : "weight");
        int pairs = 0;
        for (int j = input ? i + 1 : 0; j < (input ? seq->n : i); j++)
            pairs += input ? pair_of(h, &seq->ins[j]) : pair_of(&seq->ins[j], h);
        if (pairs != 1)
            PARC_BUG("stage %d %s: the %s half %s has %d other halves %s it, not one", sp->stage, seq_names[q],
                     input ? "input" : "weight", rt_fn_names[h->fn], pairs, input ? "after" : "before");
    }
}

/* Does ins pack through the runtime's communication stage (parc_rt.h: a
 * gather or scatter of outer > 1 blocks)? */
static int packs(const Instr *ins)
{
    if (ins->fn != RT_prt_allgather && ins->fn != RT_prt_reducescatter && ins->fn != RT_prt_alltoall &&
        ins->fn != RT_prt_allgather_start && ins->fn != RT_prt_reducescatter_start)
        return 0;
    return ins->args[3].kind != ARG_INT || ins->args[3].i != 1;
}

static void verify_start(const StageProgram *sp, SeqKind q, int i)
{
    const Seq *seq = &sp->seq[q];
    const Instr *st = &seq->ins[i];
    const Arg *res = instr_async_result(st);
    const char *name = sp->bufs[res->buf].name;
    /* the input half that feeds it, through copies */
    int want = collective_source(st), feed = -1;
    for (int k = i - 1; k >= 0 && feed < 0 && want >= 0; k--) {
        const Instr *o = &seq->ins[k];
        if (!names_buf(o, want)) continue;
        if (o->fn == RT_prt_copy && o->args[0].buf == want && o->args[1].kind == ARG_BUF) want = o->args[1].buf;
        else if (o->shape.part == OP_PART_INPUT && o->args[0].buf == want) feed = k;
        else break;
    }
    if (feed < 0)
        PARC_BUG("stage %d %s: %s on %%%s is not fed by a linear's input gradient", sp->stage, seq_names[q],
                 rt_fn_names[st->fn], name);
    int waits = 0, at = -1, weight = -1;
    for (int j = i + 1; j < seq->n; j++)
        if (instr_is_wait(&seq->ins[j]) && same_arg(&seq->ins[j].args[0], res)) waits++, at = at < 0 ? j : at;
    if (waits != 1)
        PARC_BUG("stage %d %s: %s on %%%s has %d waits after it, not one", sp->stage, seq_names[q],
                 rt_fn_names[st->fn], name, waits);
    for (int j = i + 1; j < at; j++) {
        const Instr *o = &seq->ins[j];
        if (pair_of(&seq->ins[feed], o)) weight = j;
        for (int k = 0; k < st->nargs; k++)
            if (st->args[k].kind == ARG_BUF && names_buf(o, st->args[k].buf))
                PARC_BUG("stage %d %s: %s references %%%s while the %s started on %%%s is in flight", sp->stage,
                         seq_names[q], o->fn >= 0 ? rt_fn_names[o->fn] : "a record", sp->bufs[st->args[k].buf].name,
                         rt_fn_names[st->fn], name);
        if (packs(st) && packs(o))
            PARC_BUG("stage %d %s: %s packs through the communication stage the %s on %%%s holds", sp->stage,
                     seq_names[q], rt_fn_names[o->fn], rt_fn_names[st->fn], name);
    }
    if (weight < 0)
        PARC_BUG("stage %d %s: no weight-gradient half between the %s on %%%s and its wait", sp->stage, seq_names[q],
                 rt_fn_names[st->fn], name);
}

/* A ring step's shift (shift_start, reshard.c) reads its input while the
 * step computes on it: it has one wait after it, and until then nothing
 * names its result, and its input is named only as the block a ring step
 * reads (ring_attention_fwd's and _bwd's kv) or as another shift's input. */
static void verify_shift(const StageProgram *sp, SeqKind q, int i)
{
    const Seq *seq = &sp->seq[q];
    const Instr *st = &seq->ins[i];
    const Arg *res = instr_async_result(st);
    int in = st->args[2].buf, at = -1;
    for (int j = i + 1; j < seq->n && at < 0; j++)
        if (instr_is_wait(&seq->ins[j]) && same_arg(&seq->ins[j].args[0], res)) at = j;
    if (at < 0)
        PARC_BUG("stage %d %s: the shift into %%%s has no wait after it", sp->stage, seq_names[q],
                 sp->bufs[res->buf].name);
    for (int j = i + 1; j < at; j++) {
        const Instr *o = &seq->ins[j];
        for (int k = 0; k < o->nargs; k++) {
            if (o->args[k].kind != ARG_BUF) continue;
            int b = o->args[k].buf;
            int reads = (o->fn == RT_prt_ring_attention_fwd && k == 3) ||
                        (o->fn == RT_prt_ring_attention_bwd && k == 6) || (o->fn == RT_prt_shift_start && k == 2);
            if (b == res->buf || (b == in && !reads))
                PARC_BUG("stage %d %s: %s names %%%s (argument %d) while the shift of %%%s into %%%s is in flight",
                         sp->stage, seq_names[q], rt_fn_names[o->fn], sp->bufs[b].name, k, sp->bufs[in].name,
                         sp->bufs[res->buf].name);
        }
    }
}

void overlap_tp_verify(const Program *prog)
{
    static const SeqKind backward[] = {SEQ_BLOCK_BWD, SEQ_HEAD_BWD, SEQ_EMBED_BWD};
    int data_axis = prog->plan->layout.zero_axis;
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        for (int q = 0; q < SEQ_COUNT; q++) {
            for (int i = 0; i < sp->seq[q].n; i++)
                if (sp->seq[q].ins[i].fn == RT_prt_shift_start) verify_shift(sp, (SeqKind)q, i);
            int bwd = q == SEQ_BLOCK_BWD || q == SEQ_HEAD_BWD || q == SEQ_EMBED_BWD;
            for (int i = 0; i < sp->seq[q].n && !bwd; i++)
                if (sp->seq[q].ins[i].shape.part != OP_PART_WHOLE)
                    PARC_BUG("stage %d %s: half of a linear's backward outside the backward sequences", s,
                             seq_names[q]);
        }
        for (size_t b = 0; b < sizeof backward / sizeof backward[0]; b++) {
            SeqKind q = backward[b];
            verify_halves(sp, q);
            const Seq *seq = &sp->seq[q];
            for (int i = 0; i < seq->n; i++) {
                const Instr *ins = &seq->ins[i];
                if (instr_is_start(ins) && ins->axis != data_axis && ins->fn != RT_prt_shift_start) verify_start(sp, q, i);
            }
        }
    }
}
