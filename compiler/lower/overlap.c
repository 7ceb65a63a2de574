/*
 * overlap.c — gradient buckets that overlap the backward: where each
 * collective starts and where it completes, and the verifier of that.
 *
 * Takes a stage whose layers' gradients sync per layer right after the last
 * micro-batch's backward through it (sync_in_backward: ZeRO-0/1), with
 * SEQ_GRAD_SYNC_BLOCK as optim.c emitted it.  The collective over the data
 * axis of each gradient there (DDP's all-reduce in place, ZeRO-1's
 * reduce-scatter of whole blocks) becomes a start (prt_allreduce_start,
 * prt_reducescatter_start) and gets its one wait (prt_comm_wait) in
 * SEQ_GRAD_WAIT_BLOCK, which the program runs for every layer once the
 * schedule and SEQ_GRAD_SYNC_ONCE are done, before the gradient norm and the
 * optimizer.  What reads the result in the sync sequence (ZeRO-1's copy of
 * its shard into the gradient) moves behind the wait, and a scratch buffer
 * the result lands in gets one instance per layer, since every layer's is in
 * flight at once: the ledger counts them.  Collectives over tensor axes stay
 * blocking (the bucket's data-axis step reads their result).
 *
 * Guarantees (overlap_verify, from program_verify): every start is in
 * SEQ_GRAD_SYNC_BLOCK, names per-layer buffer instances only and has exactly
 * one wait in SEQ_GRAD_WAIT_BLOCK naming its result; nothing after the start
 * in its sequence, nor before the wait in the wait sequence, references its
 * buffers; the sequences that can run while it is in flight (the schedule's,
 * the other layers' sync and wait sequences, SEQ_GRAD_SYNC_ONCE) reference
 * them only per layer (another layer's instance: a layer's bucket starts after
 * its last backward, codegen_seq.c); every wait has exactly one start.
 *
 * ZeRO-2/3 (overlap_scatters): each layer's backward, every micro-batch,
 * reduce-scatters each whole gradient into this rank's shard, and so do the
 * head's and the embedding's.  Each of those in SEQ_BLOCK_BWD, SEQ_HEAD_BWD
 * and SEQ_EMBED_BWD becomes a start placed right after the last instruction
 * that names its buffers (the gradient's last writer), so it runs under the
 * rest of the layer's backward; its wait goes to the end of the sequence,
 * before the next layer's backward zeroes the gradient again, and what reads
 * its result (the add into the shard) after the waits.  ZeRO-3's weight
 * gathers started a layer ahead are overlap_gather.c's.  No buffer gets more
 * instances: every collective started in a call of the sequence completes in
 * that call.  Guarantees (overlap_verify): each start in those sequences has
 * exactly one wait after it there and nothing between them names its
 * buffers; each wait there has one start before it.  With `grad_overlap
 * off;` neither function runs (lower_overlap).
 */
#include "lower.h"

static int arg_is(const Arg *a, const Arg *b)
{
    return a->kind == ARG_BUF && b->kind == ARG_BUF && a->buf == b->buf && a->inst == b->inst && a->k == b->k &&
           a->axis == b->axis && a->i == b->i;
}

/* Does ins name buffer `buf` in any argument (held[buf] set)? */
static int touches(const Instr *ins, const unsigned char *held)
{
    for (int k = 0; k < ins->nargs; k++)
        if (ins->args[k].kind == ARG_BUF && held[ins->args[k].buf]) return 1;
    return 0;
}

static void hold_all(const Instr *ins, unsigned char *held)
{
    for (int k = 0; k < ins->nargs; k++)
        if (ins->args[k].kind == ARG_BUF) held[ins->args[k].buf] = 1;
}

/* Is buffer b named anywhere on the stage but in the sync sequence? */
static int used_outside_sync(const StageProgram *sp, int b)
{
    for (int q = 0; q < SEQ_COUNT; q++) {
        if (q == SEQ_GRAD_SYNC_BLOCK) continue;
        for (int i = 0; i < sp->seq[q].n; i++) {
            const Instr *ins = &sp->seq[q].ins[i];
            for (int k = 0; k < ins->nargs; k++)
                if (ins->args[k].kind == ARG_BUF && ins->args[k].buf == b) return 1;
        }
    }
    return 0;
}

/* Scratch buffers made per layer: their fixed references become per layer. */
static void relayer(Instr *ins, const unsigned char *per_layer)
{
    for (int k = 0; k < ins->nargs; k++) {
        Arg *a = &ins->args[k];
        if (a->kind == ARG_BUF && per_layer[a->buf] && a->inst == INST_FIXED && a->k == 0) a->inst = INST_LAYER;
    }
}

/* Is ins the data axis's step of a gradient's sync, startable as it is? */
static int startable(const Lowerer *lw, const Instr *ins, int data_axis)
{
    if (ins->axis != data_axis || ins->phase != PHASE_GRAD_SYNC) return 0;
    if (ins->fn == RT_prt_allreduce) return 1;
    return ins->fn == RT_prt_reducescatter && ins->args[3].kind == ARG_INT && ins->args[3].i == 1 &&
           lw->sp->bufs[ins->args[1].buf].instances == 1;
}

void overlap_buckets(Lowerer *lw)
{
    StageProgram *sp = lw->sp;
    int data_axis = optim_sync_axis(lw->plan);
    if (!sp->sync_in_backward || data_axis < 0 || lw->plan->mesh.axes[data_axis].size < 2) return;
    int64_t layers = sp->layers;
    Seq *sync = &sp->seq[SEQ_GRAD_SYNC_BLOCK];
    Emit ew = {lw, &sp->seq[SEQ_GRAD_WAIT_BLOCK], PHASE_GRAD_SYNC};
    unsigned char *held = arena_alloc(lw->arena, (size_t)sp->nbufs + 1);
    unsigned char *per_layer = arena_alloc(lw->arena, (size_t)sp->nbufs + 1);
    memset(held, 0, (size_t)sp->nbufs + 1);
    memset(per_layer, 0, (size_t)sp->nbufs + 1);
    int kept = 0;
    for (int i = 0; i < sync->n; i++) {
        Instr ins = sync->ins[i];
        relayer(&ins, per_layer);
        if (touches(&ins, held)) { /* reads or writes a result in flight: after its wait */
            hold_all(&ins, held);
            Instr *moved = program_instr_new(ew.lw->arena, ew.seq, ew.phase, (RtFn)ins.fn);
            *moved = ins;
            continue;
        }
        if (startable(lw, &ins, data_axis)) {
            int out = ins.args[1].buf;
            if (ins.fn == RT_prt_reducescatter) { /* a scratch result: one per layer */
                if (used_outside_sync(sp, out)) PARC_BUG("stage %d: %s is used outside the sync", sp->stage,
                                                         sp->bufs[out].name);
                sp->bufs[out].instances = layers;
                per_layer[out] = 1;
                relayer(&ins, per_layer);
            }
            ins.fn = ins.fn == RT_prt_allreduce ? RT_prt_allreduce_start : RT_prt_reducescatter_start;
            Instr *w = EMIT(&ew, RT_prt_comm_wait, *instr_async_result(&ins));
            w->axis = ins.axis;
            w->tensor = ins.tensor;
            w->why = arena_printf(lw->arena, "completes the %s of %s started after its layer's backward",
                                  coll_names[ins.coll], lw->g->tensors[ins.tensor].name);
            hold_all(&ins, held);
        }
        sync->ins[kept++] = ins;
    }
    sync->n = kept;
}

/* ------------------------------------------------------------ ZeRO-2/3 */

/* Does ins name buffer b in any argument? */
static int names_buf(const Instr *ins, int b)
{
    for (int k = 0; k < ins->nargs; k++)
        if (ins->args[k].kind == ARG_BUF && ins->args[k].buf == b) return 1;
    return 0;
}

/* Is ins ZeRO-2/3's scatter of a whole gradient over the data axis? */
static int scatter_startable(const Instr *ins, int data_axis)
{
    return ins->fn == RT_prt_reducescatter && ins->axis == data_axis && ins->args[3].kind == ARG_INT &&
           ins->args[3].i == 1;
}

/* Does backward sequence q start collectives (overlap_scatters)? */
static int scatters_in(int q) { return q == SEQ_BLOCK_BWD || q == SEQ_HEAD_BWD || q == SEQ_EMBED_BWD; }

static void scatters_in_seq(Lowerer *lw, SeqKind q)
{
    StageProgram *sp = lw->sp;
    int data_axis = lw->plan->layout.zero_axis;
    Seq *seq = &sp->seq[q];
    int n = seq->n;
    if (n == 0) return;
    Instr *orig = arena_alloc(lw->arena, sizeof(Instr) * (size_t)n);
    memcpy(orig, seq->ins, sizeof(Instr) * (size_t)n);
    int *after = arena_alloc(lw->arena, sizeof(int) * (size_t)n); /* a start: the instruction it follows */
    unsigned char *kind = arena_alloc(lw->arena, (size_t)n);      /* 0 in place, 1 started, 2 after the waits */
    unsigned char *held = arena_alloc(lw->arena, (size_t)sp->nbufs + 1); /* in flight, or read after a wait */
    memset(kind, 0, (size_t)n);
    memset(held, 0, (size_t)sp->nbufs + 1);
    for (int i = 0; i < n; i++) {
        const Instr *ins = &orig[i];
        if (touches(ins, held)) { /* names a buffer in flight: after the waits */
            kind[i] = 2;
            hold_all(ins, held);
            continue;
        }
        if (!scatter_startable(ins, data_axis)) continue;
        int in = ins->args[2].buf, out = ins->args[1].buf, last = i - 1;
        while (last >= 0 && !names_buf(&orig[last], in) && !names_buf(&orig[last], out)) last--;
        kind[i] = 1;
        after[i] = last;
        held[in] = held[out] = 1;
    }
    /* in order, each start right after the last instruction naming its
     * buffers; then the waits in order of the starts; then what waited */
    seq->n = 0;
    for (int pos = -1; pos < n; pos++) {
        if (pos >= 0 && kind[pos] == 0) *program_instr_new(lw->arena, seq, orig[pos].phase, (RtFn)orig[pos].fn) = orig[pos];
        for (int i = 0; i < n; i++) {
            if (kind[i] != 1 || after[i] != pos) continue;
            Instr *st = program_instr_new(lw->arena, seq, orig[i].phase, RT_prt_reducescatter_start);
            *st = orig[i];
            st->fn = RT_prt_reducescatter_start;
        }
    }
    for (int i = 0; i < n; i++) {
        if (kind[i] != 1) continue;
        Emit ew = {lw, seq, orig[i].phase};
        Instr *w = EMIT(&ew, RT_prt_comm_wait, orig[i].args[1]);
        w->axis = orig[i].axis;
        w->tensor = orig[i].tensor;
        w->why = arena_printf(lw->arena, "completes the %s of %s started after the last writer of its gradient",
                              coll_names[orig[i].coll], lw->g->tensors[orig[i].tensor].name);
    }
    for (int i = 0; i < n; i++)
        if (kind[i] == 2) *program_instr_new(lw->arena, seq, orig[i].phase, (RtFn)orig[i].fn) = orig[i];
}

void overlap_scatters(Lowerer *lw)
{
    const Layout *lay = &lw->plan->layout;
    if (lay->zero_stage < 2 || lay->zero_axis < 0 || lw->plan->mesh.axes[lay->zero_axis].size < 2) return;
    scatters_in_seq(lw, SEQ_BLOCK_BWD);
    scatters_in_seq(lw, SEQ_HEAD_BWD);
    scatters_in_seq(lw, SEQ_EMBED_BWD);
}

/* ------------------------------------------------------------ verifier */

/* May sequence q run while a collective started in SEQ_GRAD_SYNC_BLOCK is in
 * flight?  Zeroing runs before any, the norm and optimizer after every wait. */
static int runs_in_flight(int q)
{
    switch (q) {
    case SEQ_ZERO_GRADS_BLOCK:
    case SEQ_ZERO_GRADS_ONCE:
    case SEQ_GRAD_NORM_BLOCK:
    case SEQ_GRAD_NORM_ONCE:
    case SEQ_OPTIM_BLOCK:
    case SEQ_OPTIM_ONCE: return 0;
    default: return 1;
    }
}

static void verify_start(const StageProgram *sp, int i)
{
    const Seq *sync = &sp->seq[SEQ_GRAD_SYNC_BLOCK], *wait = &sp->seq[SEQ_GRAD_WAIT_BLOCK];
    const Instr *st = &sync->ins[i];
    const Arg *res = instr_async_result(st);
    const char *name = sp->bufs[res->buf].name;
    for (int k = 0; k < st->nargs; k++)
        if (st->args[k].kind == ARG_BUF && st->args[k].inst != INST_LAYER)
            PARC_BUG("stage %d %s: %s on %%%s names a buffer instance shared by the layers, whose buckets are all "
                     "in flight at once",
                     sp->stage, seq_names[SEQ_GRAD_SYNC_BLOCK], rt_fn_names[st->fn], sp->bufs[st->args[k].buf].name);
    int waits = 0, at = -1;
    for (int j = 0; j < wait->n; j++)
        if (instr_is_wait(&wait->ins[j]) && arg_is(&wait->ins[j].args[0], res)) waits++, at = at < 0 ? j : at;
    if (waits != 1)
        PARC_BUG("stage %d %s: %s on %%%s has %d waits in %s, not one", sp->stage, seq_names[SEQ_GRAD_SYNC_BLOCK],
                 rt_fn_names[st->fn], name, waits, seq_names[SEQ_GRAD_WAIT_BLOCK]);
    for (int q = 0; q < SEQ_COUNT; q++) {
        if (!runs_in_flight(q)) continue;
        const Seq *seq = &sp->seq[q];
        for (int j = 0; j < seq->n; j++) {
            const Instr *o = &seq->ins[j];
            if ((q == SEQ_GRAD_SYNC_BLOCK && j == i) || (q == SEQ_GRAD_WAIT_BLOCK && j == at)) continue;
            /* the same layer's run: after the start, or before the wait */
            int same_run = (q == SEQ_GRAD_SYNC_BLOCK && j > i) || (q == SEQ_GRAD_WAIT_BLOCK && j < at);
            for (int k = 0; k < o->nargs; k++) {
                const Arg *a = &o->args[k];
                if (a->kind != ARG_BUF) continue;
                for (int m = 0; m < st->nargs; m++) {
                    if (st->args[m].kind != ARG_BUF || st->args[m].buf != a->buf) continue;
                    if (same_run || a->inst != INST_LAYER)
                        PARC_BUG("stage %d %s: %s references %%%s while the %s started on %%%s may be in flight",
                                 sp->stage, seq_names[q], o->fn >= 0 ? rt_fn_names[o->fn] : "a record",
                                 sp->bufs[a->buf].name, rt_fn_names[st->fn], name);
                }
            }
        }
    }
}

/* A start in a backward sequence (overlap_scatters): exactly one wait on its
 * result later in the sequence, and nothing between the two names its
 * buffers. */
static void verify_start_in_backward(const StageProgram *sp, int q, int i)
{
    const Seq *seq = &sp->seq[q];
    const Instr *st = &seq->ins[i];
    const Arg *res = instr_async_result(st);
    int waits = 0, at = -1;
    for (int j = 0; j < seq->n; j++)
        if (instr_is_wait(&seq->ins[j]) && arg_is(&seq->ins[j].args[0], res)) waits++, at = j;
    if (waits != 1 || at < i)
        PARC_BUG("stage %d %s: %s on %%%s has %d waits in the sequence%s, not one after it", sp->stage,
                 seq_names[q], rt_fn_names[st->fn], sp->bufs[res->buf].name, waits,
                 waits == 1 ? " (before it)" : "");
    for (int j = i + 1; j < at; j++)
        for (int k = 0; k < st->nargs; k++)
            if (instr_start_holds(st, k) && names_buf(&seq->ins[j], st->args[k].buf))
                PARC_BUG("stage %d %s: %s references %%%s while the %s started on %%%s is in flight", sp->stage,
                         seq_names[q], seq->ins[j].fn >= 0 ? rt_fn_names[seq->ins[j].fn] : "a record",
                         sp->bufs[st->args[k].buf].name, rt_fn_names[st->fn], sp->bufs[res->buf].name);
}

/* A wait in a backward sequence: exactly one start of its result before it there. */
static void verify_wait_in_backward(const StageProgram *sp, int q, int i)
{
    const Seq *seq = &sp->seq[q];
    int starts = 0;
    for (int j = 0; j < i; j++)
        if (instr_is_start(&seq->ins[j]) && arg_is(instr_async_result(&seq->ins[j]), &seq->ins[i].args[0])) starts++;
    if (starts != 1)
        PARC_BUG("stage %d %s: the wait on %%%s has %d starts before it, not one", sp->stage, seq_names[q],
                 sp->bufs[seq->ins[i].args[0].buf].name, starts);
}

/* Does a gather started in seq (overlap_gather.c) land in buffer b? */
static int gathered_into(const Seq *seq, int b)
{
    for (int j = 0; j < seq->n; j++)
        if (seq->ins[j].fn == RT_prt_allgather_start && instr_async_result(&seq->ins[j])->buf == b) return 1;
    return 0;
}

/* Does a shift started in seq (ring attention, ops_emit.c) land in buffer b? */
static int shifted_into(const Seq *seq, int b)
{
    for (int j = 0; j < seq->n; j++)
        if (seq->ins[j].fn == RT_prt_shift_start && instr_async_result(&seq->ins[j])->buf == b) return 1;
    return 0;
}

void overlap_verify(const Program *prog)
{
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        for (int q = 0; q < SEQ_COUNT; q++) {
            const Seq *seq = &sp->seq[q];
            for (int i = 0; i < seq->n; i++) {
                const Instr *ins = &seq->ins[i];
                /* prefetched gathers: overlap_gather_verify runs the passes */
                int gather = ins->fn == RT_prt_allgather_start ||
                             (instr_is_wait(ins) && gathered_into(seq, ins->args[0].buf));
                /* ring attention's shifts: overlap_gather_verify runs the passes too */
                int shift = ins->fn == RT_prt_shift_start || (instr_is_wait(ins) && shifted_into(seq, ins->args[0].buf));
                if ((q == SEQ_BLOCK_BWD || q == SEQ_BLOCK_FWD) && (gather || shift)) continue;
                if (scatters_in(q)) {
                    if (instr_is_start(ins)) verify_start_in_backward(sp, q, i);
                    if (instr_is_wait(ins)) verify_wait_in_backward(sp, q, i);
                    continue;
                }
                if (instr_is_start(ins) && (q != SEQ_GRAD_SYNC_BLOCK || gather))
                    PARC_BUG("stage %d %s: %s outside %s and the backward sequences", s, seq_names[q],
                             rt_fn_names[ins->fn], seq_names[SEQ_GRAD_SYNC_BLOCK]);
                if (instr_is_wait(ins) && q != SEQ_GRAD_WAIT_BLOCK)
                    PARC_BUG("stage %d %s: a wait outside %s and the backward sequences", s, seq_names[q],
                             seq_names[SEQ_GRAD_WAIT_BLOCK]);
                if (instr_is_start(ins)) verify_start(sp, i);
                if (!instr_is_wait(ins)) continue;
                int starts = 0;
                const Seq *sync = &sp->seq[SEQ_GRAD_SYNC_BLOCK];
                for (int j = 0; j < sync->n; j++)
                    if (instr_is_start(&sync->ins[j]) && arg_is(instr_async_result(&sync->ins[j]), &ins->args[0]))
                        starts++;
                if (starts != 1)
                    PARC_BUG("stage %d %s: the wait on %%%s has %d starts, not one", s, seq_names[q],
                             sp->bufs[ins->args[0].buf].name, starts);
            }
        }
        overlap_gather_verify(sp);
    }
}
