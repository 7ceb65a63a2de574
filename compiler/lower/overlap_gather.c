/*
 * overlap_gather.c — ZeRO-3's weight gathers prefetched one layer ahead, and
 * the verifier of every collective started in a layer loop.
 *
 * Takes a stage whose block sequences gather each sharded parameter of the
 * layer over the data axis right before its first use (reshard.c: one
 * prt_allgather of %w[layer] into %w.resharded per use window), after
 * overlap_scatters.  Each such gathered buffer gets two instances, the
 * layer's parity ((l+0)&1), and in each of SEQ_BLOCK_FWD and SEQ_BLOCK_BWD:
 *   - at the top, the gathers of the layer that runs next in the pass
 *     (l + 1 in the forward, l - 1 in the backward) start into the other
 *     instance ((l+1)&1), unless l is the pass's last layer;
 *   - before them, on the pass's first layer only (l == 0 forward, l == L-1
 *     backward), this layer's own gathers start, since no layer before it did;
 *   - each blocking gather becomes the wait on this layer's instance.
 * So layer l's weights travel while layer l-1 (forward) or l+1 (backward)
 * computes, as FSDP's forward and backward prefetch (Zhao et al. 2023,
 * "PyTorch FSDP", section 3.3.2) and ZeRO-3's parameter prefetch (Rajbhandari
 * et al. 2020, "ZeRO", section 7.1) do, at the cost of one more layer's
 * gathered weights alive at once: the second instance, which the ledger
 * counts.  A buffer is prefetched only where both block sequences gather it
 * at most once each, before any other reference to it, and nothing else on
 * the stage names it; any other stays blocking.  A pass (a chunk's loop over
 * its layers, codegen_seq.c) ends with nothing in flight.
 *
 * Guarantees (overlap_gather_verify, from overlap_verify): running each
 * block sequence's pass, layer by layer with each instruction's `when`,
 * every start's result is not already in flight, every wait names one in
 * flight, nothing names a buffer instance in flight but its wait, and the
 * pass ends with nothing in flight.
 */
#include "lower.h"

/* Is ins a blocking gather of a layer's parameter shard over the data axis
 * into a buffer of one instance? */
static int gather_of_layer(const StageProgram *sp, const Instr *ins, int data_axis)
{
    if (ins->fn != RT_prt_allgather || ins->axis != data_axis || ins->when != WHEN_ALWAYS) return 0;
    const Arg *out = &ins->args[1], *in = &ins->args[2];
    return ins->args[3].kind == ARG_INT && ins->args[3].i == 1 && out->kind == ARG_BUF && out->inst == INST_FIXED &&
           out->k == 0 && out->axis < 0 && in->kind == ARG_BUF && in->inst == INST_LAYER && in->axis < 0 &&
           sp->bufs[out->buf].instances == 1;
}

/* May buffer b's gathers be prefetched: every reference on the stage in the
 * block sequences, instance 0, each of them gathering it first and once? */
static int prefetchable(const StageProgram *sp, int b, int data_axis)
{
    int gathered = 0;
    for (int q = 0; q < SEQ_COUNT; q++) {
        const Seq *seq = &sp->seq[q];
        int block = q == SEQ_BLOCK_FWD || q == SEQ_BLOCK_BWD, seen = 0, gathers = 0;
        for (int i = 0; i < seq->n; i++) {
            const Instr *ins = &seq->ins[i];
            for (int k = 0; k < ins->nargs; k++) {
                const Arg *a = &ins->args[k];
                if (a->kind != ARG_BUF || a->buf != b) continue;
                if (!block || a->inst != INST_FIXED || a->k != 0) return 0;
                if (k == 1 && gather_of_layer(sp, ins, data_axis)) {
                    if (seen || gathers) return 0; /* read before its gather, or gathered twice */
                    gathers++;
                }
                seen = 1;
            }
        }
        if (seen && !gathers) return 0;
        gathered += gathers;
    }
    return gathered > 0;
}

static Instr *append(Lowerer *lw, Seq *seq, const Instr *ins)
{
    Instr *to = program_instr_new(lw->arena, seq, ins->phase, (RtFn)ins->fn);
    *to = *ins;
    return to;
}

/* Rewrites block sequence q, whose pass walks the layers in direction dir. */
static void prefetch_seq(Lowerer *lw, SeqKind q, int dir, const unsigned char *pre)
{
    StageProgram *sp = lw->sp;
    Seq *seq = &sp->seq[q];
    int n = seq->n, data_axis = lw->plan->layout.zero_axis;
    Instr *orig = arena_alloc(lw->arena, sizeof(Instr) * (size_t)(n ? n : 1));
    memcpy(orig, seq->ins, sizeof(Instr) * (size_t)n);
    seq->n = 0;
    for (int pass = 0; pass < 2; pass++) /* this layer's on the pass's first, then the next layer's */
        for (int i = 0; i < n; i++) {
            if (!gather_of_layer(sp, &orig[i], data_axis) || !pre[orig[i].args[1].buf]) continue;
            Instr *st = append(lw, seq, &orig[i]);
            st->fn = RT_prt_allgather_start;
            st->args[1].inst = INST_PARITY;
            st->args[1].k = pass;
            if (pass) {
                st->args[2].inst = INST_LAYER_AT;
                st->args[2].k = dir;
            }
            st->when = pass ? (dir > 0 ? WHEN_L_NOT_LAST : WHEN_L_NOT_FIRST) : (dir > 0 ? WHEN_L_FIRST : WHEN_L_LAST);
            /* its why stays the blocking gather's: one row of the collective report */
        }
    for (int i = 0; i < n; i++) {
        const Instr *ins = &orig[i];
        if (gather_of_layer(sp, ins, data_axis) && pre[ins->args[1].buf]) {
            Emit ew = {lw, seq, ins->phase};
            Arg res = ins->args[1];
            res.inst = INST_PARITY;
            Instr *w = EMIT(&ew, RT_prt_comm_wait, res);
            w->axis = ins->axis;
            w->tensor = ins->tensor;
            w->why = arena_printf(lw->arena, "completes the gather of %s started a layer ahead (by the pass's first "
                                  "layer for itself), before its first use",
                                  lw->g->tensors[ins->tensor].name);
            continue;
        }
        Instr *to = append(lw, seq, ins);
        for (int k = 0; k < to->nargs; k++)
            if (to->args[k].kind == ARG_BUF && pre[to->args[k].buf]) to->args[k].inst = INST_PARITY;
    }
}

void overlap_gathers(Lowerer *lw)
{
    StageProgram *sp = lw->sp;
    const Layout *lay = &lw->plan->layout;
    int data_axis = lay->zero_axis;
    if (lay->zero_stage < 3 || data_axis < 0 || lw->plan->mesh.axes[data_axis].size < 2 || sp->max_chunk_layers < 2)
        return;
    unsigned char *pre = arena_alloc(lw->arena, (size_t)sp->nbufs + 1);
    memset(pre, 0, (size_t)sp->nbufs + 1);
    int any = 0;
    for (int q = SEQ_BLOCK_FWD; q <= SEQ_BLOCK_BWD; q += SEQ_BLOCK_BWD - SEQ_BLOCK_FWD) {
        const Seq *seq = &sp->seq[q];
        for (int i = 0; i < seq->n; i++) {
            const Instr *ins = &seq->ins[i];
            int b = ins->args[1].buf;
            if (gather_of_layer(sp, ins, data_axis) && !pre[b] && prefetchable(sp, b, data_axis)) pre[b] = 1, any = 1;
        }
    }
    if (!any) return;
    prefetch_seq(lw, SEQ_BLOCK_FWD, +1, pre);
    prefetch_seq(lw, SEQ_BLOCK_BWD, -1, pre);
    for (int b = 0; b < sp->nbufs; b++)
        if (pre[b]) sp->bufs[b].instances = 2; /* this layer's and the next one's */
}

/* ------------------------------------------------------------ verifier */

/* The instance an argument of a block sequence's call for (chunk 0, l) names. */
static int64_t instance_at(const StageProgram *sp, const Arg *a, int64_t l)
{
    switch (a->inst) {
    case INST_LAYER: return l;
    case INST_LAYER_AT: return l + a->k;
    case INST_PARITY: return (l + a->k) & 1;
    case INST_SLOT_L: return (l + a->k) * sp->nslots; /* slot 0 */
    case INST_SLOT: return 0;
    default: return a->k;
    }
}

typedef struct InFlight {
    int buf;
    int64_t inst;
    int start; /* which start posted it, counting from 0 in the pass */
    int at;    /* the start's index in the sequence */
    int result;
} InFlight;

/* The pass of a chunk of `layers` layers. */
static void verify_pass(const StageProgram *sp, SeqKind q, int dir, int layers)
{
    const Seq *seq = &sp->seq[q];
    int64_t L = pass_window(layers); /* a longer pass repeats its middle layers */
    InFlight fl[2 * IR_MAX_ARGS * 64];
    int nfl = 0, posts = 0;
    for (int64_t step = 0; step < L; step++) {
        int64_t l = dir > 0 ? step : L - 1 - step;
        for (int i = 0; i < seq->n; i++) {
            const Instr *ins = &seq->ins[i];
            if (!when_holds(ins->when, l, L)) continue;
            if (ins->when != WHEN_ALWAYS && !instr_is_start(ins))
                PARC_BUG("stage %d %s: %s carries `%s`, which only started collectives do", sp->stage, seq_names[q],
                         rt_fn_names[ins->fn], when_names[ins->when]);
            if (instr_is_wait(ins)) {
                const Arg *a = &ins->args[0];
                int64_t inst = instance_at(sp, a, l);
                int at = -1;
                for (int f = 0; f < nfl && at < 0; f++)
                    if (fl[f].result && fl[f].buf == a->buf && fl[f].inst == inst) at = f;
                if (at < 0)
                    PARC_BUG("stage %d %s, layer %lld of %lld: the wait on %%%s[%lld] has no collective in flight",
                             sp->stage, seq_names[q], (long long)l, (long long)L, sp->bufs[a->buf].name,
                             (long long)inst);
                int start = fl[at].start, kept = 0;
                for (int f = 0; f < nfl; f++)
                    if (fl[f].start != start) fl[kept++] = fl[f];
                nfl = kept;
                continue;
            }
            for (int k = 0; k < ins->nargs; k++) {
                const Arg *a = &ins->args[k];
                if (a->kind != ARG_BUF) continue;
                int64_t inst = instance_at(sp, a, l);
                for (int f = 0; f < nfl; f++)
                    if (fl[f].buf == a->buf && fl[f].inst == inst)
                        PARC_BUG("stage %d %s, layer %lld of %lld: %s references %%%s[%lld] while the collective "
                                 "started on it is in flight",
                                 sp->stage, seq_names[q], (long long)l, (long long)L,
                                 ins->fn >= 0 ? rt_fn_names[ins->fn] : "a record", sp->bufs[a->buf].name,
                                 (long long)inst);
            }
            if (!instr_is_start(ins)) continue;
            for (int k = 0; k < ins->nargs; k++) {
                const Arg *a = &ins->args[k];
                if (!instr_start_holds(ins, k)) continue;
                if (nfl == (int)(sizeof fl / sizeof fl[0]))
                    PARC_BUG("stage %d %s: more buffers in flight than the verifier follows", sp->stage, seq_names[q]);
                fl[nfl++] = (InFlight){a->buf, instance_at(sp, a, l), posts, i, a == instr_async_result(ins)};
            }
            posts++;
        }
    }
    if (nfl > 0)
        PARC_BUG("stage %d %s: the pass over its %lld layers ends with the %s started on %%%s in flight", sp->stage,
                 seq_names[q], (long long)L, rt_fn_names[seq->ins[fl[0].at].fn], sp->bufs[fl[0].buf].name);
}

void overlap_gather_verify(const StageProgram *sp)
{
    for (int c = 0; c < sp->chunks; c++) {
        if (sp->chunk_layers[c] < 1) continue;
        verify_pass(sp, SEQ_BLOCK_FWD, +1, sp->chunk_layers[c]);
        verify_pass(sp, SEQ_BLOCK_BWD, -1, sp->chunk_layers[c]);
    }
}
