/*
 * analyze.c — the analyze pass: the memory ledger, FLOPs, collective volumes, the
 * pipeline bubble and the step-time estimate, all read off the Program.
 *
 * The ledger comes from the Program (ledger.c computes it at the end of
 * lowering); this pass copies it per stage and adds what it costs.  The
 * cost model's terms are cost.c's, each at a stated efficiency
 * (docs/cost-model.md): GEMMs by shape class, attention matmuls,
 * memory-bound ops at HBM bandwidth, collectives by latency x steps + bytes
 * x bus factor / (link bandwidth x bus efficiency).  Overlap as the runtime
 * schedules it: a gradient bucket started in the backward (overlap.c) runs
 * on the link from its layer's last backward on, one after the other, under
 * the rest of the last micro-batch's backward (cost_overlap); only what is
 * left of them when the backward ends is exposed, and of what runs under it
 * only the cluster's `overlap` share (cost_hidden_share).  Every other collective
 * completes before the next op runs.  Pipeline idle time comes from
 * simulating the actual schedule.
 */
#include "analyze.h"
#include "ledger.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void analyze_format_bytes(double bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    double v = bytes;
    while (fabs(v) >= 1024.0 && u < 5) v /= 1024.0, u++;
    if (u == 0) snprintf(buf, size, "%.0f B", v);
    else snprintf(buf, size, "%.*f %s", fabs(v) >= 100 ? 0 : 1, v, units[u]);
}

const char *const analyze_phase_names[ANALYZE_NPHASES] = {
#define X(name, str) str,
    ANALYZE_PHASES(X)
#undef X
};

static void add_row(Arena *arena, Analysis *an, CollRow row)
{
    /* rows are added stage by stage: only the current stage's can match */
    for (int i = an->nrows - 1; i >= 0 && an->rows[i].stage == row.stage; i--) {
        CollRow *r = &an->rows[i];
        if (r->stage == row.stage && r->phase == row.phase && r->coll == row.coll && r->axis == row.axis &&
            r->elems == row.elems && r->op == row.op && r->tensor == row.tensor && r->why == row.why) {
            r->calls += row.calls;
            return;
        }
    }
    ARR_PUSH(arena, an->rows, an->nrows, an->rows_cap, row);
}

/* What the started buckets of stage sp hide under the last micro-batch's
 * backward: its chunks from the last to the first (the head's backward
 * before the last chunk's layers, the embedding's after the first's), each
 * layer's bucket (bucket_s on the link) ready after that layer's backward
 * and its blocking sync (seq_s: one call of each sequence).  Waits between
 * the chunks' items are not counted, so this is the least it hides. */
static double bucket_hidden_s(const Cluster *cl, const StageProgram *sp, const double *seq_s, double bucket_s)
{
    int chunks = sp->chunks > 0 ? sp->chunks : 1, n = 0;
    double *ready = calloc((size_t)sp->layers + 1, sizeof(double));
    double *dur = calloc((size_t)sp->layers + 1, sizeof(double));
    PARC_ASSERT(ready && dur);
    double t = 0;
    for (int c = chunks - 1; c >= 0; c--) {
        if (c == chunks - 1 && sp->has_head) t += seq_s[SEQ_HEAD_BWD];
        for (int l = sp->chunk_layers[c] - 1; l >= 0; l--) {
            t += seq_s[SEQ_BLOCK_BWD] + seq_s[SEQ_GRAD_SYNC_BLOCK] - bucket_s;
            ready[n] = t;
            dur[n++] = bucket_s;
        }
        if (c == 0 && sp->has_embed) t += seq_s[SEQ_EMBED_BWD];
    }
    double hidden = 0;
    cost_overlap(ready, dur, n, t, &hidden);
    free(ready);
    free(dur);
    return hidden * cost_hidden_share(cl);
}

/* The layers of stage sp on which an instruction guarded by `when` runs, over its chunks. */
static int64_t when_layers(const StageProgram *sp, int when)
{
    int64_t n = 0;
    for (int c = 0; c < sp->chunks; c++) n += when_count(when, sp->chunk_layers[c]);
    return n;
}

/* The share of a block sequence's calls an instruction runs in: 1, or for
 * one guarded by `when` the layers it holds on, over the stage's. */
static double when_share(const StageProgram *sp, const Instr *ins)
{
    if (ins->when == WHEN_ALWAYS || sp->layers < 1) return 1.0;
    return (double)when_layers(sp, ins->when) / (double)sp->layers;
}

/* What the collectives started in block sequence seq hide under its work in
 * one chunk's pass of L layers (L = 1: one call of an embedding or head
 * sequence): its calls for each layer in the pass's order (dir +1
 * forward, -1 backward), each instruction where its `when` holds, one
 * timeline (cost_timeline over each instruction's cost), each wait matched
 * to the latest start into the same buffer instance.  So a gather started a
 * layer ahead (overlap_gather.c) runs under the layer before its use, and the
 * pass's first layer waits for its own; the `overlap` share of it is hidden.
 * dur[i] is instruction i's cost, the same in every layer.  *tp: the part of
 * it the starts over another axis than data_axis hide (overlap_tp.c's input
 * gradients under their weight gradients; ring attention's shifts aside). */
static double timeline_hidden(const Seq *seq, const double *dur_of, int64_t L, int dir, int data_axis, double *tp)
{
    int n = seq->n;
    size_t cap = (size_t)n * (size_t)L;
    double *dur = calloc(cap, sizeof(double));
    int *wait_of = calloc(cap, sizeof(int)), *at = calloc(cap, sizeof(int));
    int64_t *inst = calloc(cap, sizeof(int64_t));
    double *hidden_of = calloc(cap, sizeof(double));
    PARC_ASSERT(dur && wait_of && at && inst && hidden_of);
    int m = 0;
    for (int64_t step = 0; step < L; step++) {
        int64_t l = dir > 0 ? step : L - 1 - step;
        for (int i = 0; i < n; i++) {
            const Instr *ins = &seq->ins[i];
            if (!when_holds(ins->when, l, L)) continue;
            const Arg *res = instr_is_start(ins) ? instr_async_result(ins) : &ins->args[0];
            dur[m] = dur_of[i];
            at[m] = i;
            inst[m] = res->inst == INST_PARITY ? (l + res->k) & 1 : res->k;
            wait_of[m] = instr_is_start(ins) ? -2 : -1;
            if (instr_is_wait(ins))
                for (int j = m - 1; j >= 0 && wait_of[m] == -1; j--)
                    if (wait_of[j] == -2 && instr_async_result(&seq->ins[at[j]])->buf == res->buf && inst[j] == inst[m])
                        wait_of[m] = j;
            PARC_ASSERT(!instr_is_wait(ins) || wait_of[m] >= 0);
            m++;
        }
    }
    double hidden = 0;
    cost_timeline_each(dur, wait_of, m, &hidden, hidden_of);
    *tp = 0;
    for (int j = 0; j < m; j++)
        if (wait_of[j] == -2 && seq->ins[at[j]].axis != data_axis && seq->ins[at[j]].fn != RT_prt_shift_start)
            *tp += hidden_of[j];
    free(dur);
    free(wait_of);
    free(at);
    free(inst);
    free(hidden_of);
    return hidden;
}

/* timeline_hidden over a pass of L layers, walked through pass_window's
 * layers at most: past them the middle layers repeat in pairs (even, odd),
 * and once a pair hides what the pair before it hid, each further pair hides
 * that too.  The window doubles (to PASS_WINDOW_MAX layers) while it has not
 * settled so; a pass longer than that takes the last pair's figure.  *tp:
 * the part the tensor axis's starts hide, extrapolated alike. */
#define PASS_WINDOW_MAX 4096
static double pass_hidden_s(const Program *prog, const Seq *seq, int64_t L, int dir, double *tp)
{
    int n = seq->n, any = 0, data_axis = prog->plan->layout.zero_axis;
    *tp = 0;
    for (int i = 0; i < n; i++) any |= instr_is_start(&seq->ins[i]);
    if (!any || L < 1) return 0;
    double *dur = calloc((size_t)n, sizeof(double));
    PARC_ASSERT(dur);
    for (int i = 0; i < n; i++) {
        CostTerms one = {0};
        if (seq->ins[i].phase != PHASE_PIPELINE) cost_instr(prog, &seq->ins[i], 1.0, &one);
        dur[i] = cost_terms_total(&one);
    }
    double hidden;
    int64_t w = pass_window(L);
    if (w == L) hidden = timeline_hidden(seq, dur, L, dir, data_axis, tp);
    else
        for (;;) {
            double t, t2, t4;
            double h = timeline_hidden(seq, dur, w, dir, data_axis, &t),
                   h2 = timeline_hidden(seq, dur, w - 2, dir, data_axis, &t2),
                   h4 = timeline_hidden(seq, dur, w - 4, dir, data_axis, &t4), pair = h - h2;
            int settled = fabs(pair - (h2 - h4)) <= 1e-9 * (fabs(pair) + 1e-30) &&
                          fabs((t - t2) - (t2 - t4)) <= 1e-9 * (fabs(t - t2) + 1e-30);
            if (settled || w * 2 > PASS_WINDOW_MAX || w * 2 > L) {
                if (w * 2 > L && !settled) hidden = timeline_hidden(seq, dur, L, dir, data_axis, tp);
                else {
                    hidden = h + (double)((L - w) / 2) * pair;
                    *tp = t + (double)((L - w) / 2) * (t - t2);
                }
                break;
            }
            w = w * 2 + (L & 1);
        }
    free(dur);
    *tp *= cost_hidden_share(&prog->plan->cluster);
    return hidden * cost_hidden_share(&prog->plan->cluster);
}

/* Is ins a collective over the tensor axis (the axis heads, ffn or vocab split
 * over, or sequence parallelism's), pipeline messages aside? */
static int tensor_collective(const Program *prog, const Instr *ins)
{
    if (ins->coll == COLL_NONE || ins->coll == COLL_SLICE || ins->phase == PHASE_PIPELINE || ins->axis < 0) return 0;
    return ins->axis == prog->tp_axis || ins->axis == prog->plan->layout.sp_axis;
}

/* The cost of stage s: its ledger (read from the program), FLOPs and blocking
 * communication per chunk, gradient sync, optimizer, and its collective rows. */
static void analyze_stage(Arena *arena, Analysis *an, int s)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    const Graph *g = prog->graph;
    const StageProgram *sp = &prog->stages[s];
    StageCost *sc = &an->stages[s];
    memcpy(sc->ledger, sp->ledger, sizeof sc->ledger);
    sc->total = sp->ledger_total;
    sc->params_local = sp->params_local;
    sc->cpu_widen = sp->cpu_widen;
    sc->host_staging = sp->host_staging;
    if (sc->total > an->max_total) an->max_total = sc->total, an->worst_stage = s;

    /* FLOPs and blocking communication per chunk: the mean chunk, L layers */
    int chunks = sp->chunks ? sp->chunks : 1;
    double L = (double)sp->layers / chunks;
    double per_chunk_embed = 1.0 / chunks;
    double *seq_s = sc->seq_s, bucket_s = 0; /* one call of each (the StageCost's); a layer's started buckets */
    double tp_s[SEQ_COUNT] = {0};                 /* one call's collectives over the tensor axis */
    CostTerms clears = {0};                      /* the step's gradient clears (zero_grads.*) */
    for (int q = 0; q < SEQ_COUNT; q++) {
        const Seq *seq = &sp->seq[q];
        int64_t calls = program_seq_calls_per_step(prog, sp, (SeqKind)q);
        double flops = 0;
        CostTerms ct = {0};
        for (int i = 0; i < seq->n; i++) {
            const Instr *ins = &seq->ins[i];
            flops += ins->flops;
            double share = when_share(sp, ins);
            if (instr_is_start(ins) && q == SEQ_GRAD_SYNC_BLOCK) {
                CostTerms one = {0};
                cost_instr(prog, ins, 1.0, &one);
                bucket_s += one.comm_s;
            }
            if (ins->phase != PHASE_PIPELINE) cost_instr(prog, ins, share, &ct);
            if (tensor_collective(prog, ins) && seq_per_micro[q]) { /* the forward's and backward's */
                CostTerms one = {0};
                cost_instr(prog, ins, share, &one);
                tp_s[q] += one.comm_s;
            }
            /* pipeline messages are the schedule's (t_p2p), rows of their own below */
            if (ins->coll == COLL_NONE || ins->coll == COLL_SLICE || ins->phase == PHASE_PIPELINE) continue;
            CollRow row = {s,
                           ins->phase,
                           ins->coll,
                           ins->axis,
                           instr_group(plan, ins),
                           ins->elems,
                           ins->elem_bytes,
                           share < 1.0 ? calls / sp->layers * when_layers(sp, ins->when) : calls,
                           plan_axis_inside_node(plan, ins->axis),
                           ins->op >= 0 ? g->ops[ins->op].name
                                        : (ins->tensor >= 0 ? g->tensors[ins->tensor].name : "-"),
                           ins->tensor >= 0 ? g->tensors[ins->tensor].name : "-",
                           ins->why ? ins->why : ""};
            if (row.group > 1) add_row(arena, an, row);
        }
        sc->flops_step += flops * (double)calls;
        if (q == SEQ_BLOCK_BWD || q == SEQ_BLOCK_FWD) { /* its started collectives (overlap.c, overlap_gather.c) */
            /* each chunk's pass, of its own layers: what they hide, per chunk on the mean */
            double tp = 0, hidden = 0;
            for (int c = 0; c < chunks; c++) {
                double tp_c = 0;
                if (sp->chunk_layers[c] > 0)
                    hidden += pass_hidden_s(prog, seq, sp->chunk_layers[c], q == SEQ_BLOCK_FWD ? 1 : -1, &tp_c);
                tp += tp_c;
            }
            hidden /= chunks, tp /= chunks;
            ct.comm_s -= L > 0 ? hidden / L : 0;
            if (q == SEQ_BLOCK_BWD) sc->bwd_hidden_chunk_s += hidden;
            else sc->fwd_hidden_chunk_s = hidden;
            sc->tp_hidden_chunk_s += tp;
            sc->tp_comm_chunk_s += tp_s[q] * L;
        }
        if (q == SEQ_HEAD_BWD || q == SEQ_EMBED_BWD) { /* the collectives started in it (overlap_tp, overlap_scatters) */
            double tp = 0, hidden = pass_hidden_s(prog, seq, 1, 1, &tp);
            ct.comm_s -= hidden;
            sc->bwd_hidden_chunk_s += hidden * per_chunk_embed; /* spread over the chunks as its time is */
            sc->tp_hidden_chunk_s += tp * per_chunk_embed;
        }
        if (q == SEQ_HEAD_BWD || q == SEQ_EMBED_BWD || q == SEQ_HEAD_FWD || q == SEQ_EMBED_FWD)
            sc->tp_comm_chunk_s += tp_s[q] * per_chunk_embed;
        seq_s[q] = cost_terms_total(&ct);
        /* per chunk: the block's layers, and the embedding and head spread
         * over the chunks (as the schedule simulator takes one time for all) */
        switch (q) {
        case SEQ_BLOCK_FWD: sc->flops_fwd_chunk += flops * L, cost_terms_add(&sc->fwd, &ct, L); break;
        case SEQ_BLOCK_BWD: sc->flops_bwd_chunk += flops * L, cost_terms_add(&sc->bwd, &ct, L); break;
        case SEQ_EMBED_FWD:
        case SEQ_HEAD_FWD:
            sc->flops_fwd_chunk += flops * per_chunk_embed, cost_terms_add(&sc->fwd, &ct, per_chunk_embed);
            break;
        case SEQ_EMBED_BWD:
        case SEQ_HEAD_BWD:
            sc->flops_bwd_chunk += flops * per_chunk_embed, cost_terms_add(&sc->bwd, &ct, per_chunk_embed);
            break;
        case SEQ_GRAD_SYNC_BLOCK:
        case SEQ_GRAD_SYNC_ONCE:
        case SEQ_OPTIM_BLOCK:
        case SEQ_OPTIM_ONCE:
        case SEQ_GRAD_NORM_BLOCK: /* `clip`: the norm's sums and its all-reduces */
        case SEQ_GRAD_NORM_ONCE:
        case SEQ_GRAD_WAIT_BLOCK:
            /* all of it; what the started buckets hide is taken off below */
            cost_terms_add(&sc->sync, &ct, (double)calls);
            break;
        case SEQ_ZERO_GRADS_BLOCK:
        case SEQ_ZERO_GRADS_ONCE: cost_terms_add(&clears, &ct, (double)calls); break;
        default: break;
        }
    }
    sc->comm_fwd_chunk_s = sc->fwd.comm_s;
    sc->comm_bwd_chunk_s = sc->bwd.comm_s;
    sc->sync_hidden_s = bucket_s > 0 ? bucket_hidden_s(&plan->cluster, sp, seq_s, bucket_s) : 0;
    sc->sync_s = sc->sync.comm_s - sc->sync_hidden_s;
    /* optimizer: reads and writes weights, gradients, master and moments */
    double state = (double)(sc->ledger[PRT_WEIGHTS] + sc->ledger[PRT_GRADS] + sc->ledger[PRT_MASTER] +
                            sc->ledger[PRT_OPTIM]);
    sc->optim_bytes = 2.0 * state;
    /* `clip`: the norm reads each gradient once, the scaling reads and writes it */
    if (plan->train.clip > 0) sc->optim_bytes += 3.0 * (double)sc->ledger[PRT_GRADS];
    sc->optim_s = cost_memory_s(&plan->cluster, MEM_OPTIMIZER, sc->optim_bytes, 0);
    /* the gradients cleared at the top of the step: the program counts them
     * to the optimizer's phase too */
    sc->optim_s += clears.stream_s;
    sc->optim_bytes += clears.stream_bytes;
    an->flops_per_step += sc->flops_step * (double)(plan->mesh.world / (prog->nstages ? prog->nstages : 1));

    /* pipeline messages: the sends of the stage's message sequences, and the
     * all-gathers that complete a scattered message after its receive
     * (`pipeline_scatter on`), rows on the tensor axis's link */
    static const SeqKind msgs[4] = {SEQ_SEND_FWD, SEQ_SEND_BWD, SEQ_RECV_FWD, SEQ_RECV_BWD};
    for (int k = 0; k < 4; k++) {
        const Seq *seq = &sp->seq[msgs[k]];
        int64_t calls = program_seq_calls_per_step(prog, sp, msgs[k]);
        for (int i = 0; i < seq->n; i++) {
            const Instr *ins = &seq->ins[i];
            if (ins->coll == COLL_NONE || ins->coll == COLL_RECV || calls == 0) continue;
            int send = ins->coll == COLL_SEND;
            CollRow row = {s, PHASE_PIPELINE, ins->coll, ins->axis, send ? 2 : instr_group(plan, ins), ins->elems,
                           ins->elem_bytes, calls, plan_axis_inside_node(plan, ins->axis), "stage boundary",
                           sp->bufs[ins->args[2].buf].name, ins->why ? ins->why : ""};
            add_row(arena, an, row);
        }
    }
}

/* One pipeline hand-off: the slowest message sequence a stage receives with,
 * its receive on the pipeline axis's link and, with `pipeline_scatter on`, the
 * all-gather after it on the tensor axis's. */
static double message_s(const Program *prog, double *bytes)
{
    static const SeqKind recvs[2] = {SEQ_RECV_FWD, SEQ_RECV_BWD};
    double worst = 0;
    *bytes = 0;
    for (int s = 0; s < prog->nstages; s++)
        for (int k = 0; k < 2; k++) {
            const StageProgram *sp = &prog->stages[s];
            if (program_seq_calls_per_step(prog, sp, recvs[k]) == 0) continue;
            CostTerms t = {0};
            for (int i = 0; i < sp->seq[recvs[k]].n; i++) cost_instr(prog, &sp->seq[recvs[k]].ins[i], 1.0, &t);
            if (t.comm_s > worst) worst = t.comm_s, *bytes = t.comm_bytes;
        }
    return worst;
}

/* The MFU numerator's Ψ': the non-embedding parameters (block parameters
 * once per layer) plus the head's matmul weight.  A table that is only looked
 * up (the embedding, learned positions) does no matmul and is left out; a
 * head tied to the embedding reads the table as its weight, so it counts once.
 * A mixture of experts counts the experts a token passes through: its
 * inactive experts (params_total - params_active) are left out. */
static double model_matmul_params(const Graph *g)
{
    double n = 0;
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        if (tt->kind != TENSOR_PARAM) continue;
        int matmul = 0;
        for (int i = 0; i < g->nops && !matmul; i++) {
            const Op *op = &g->ops[i];
            if (op->kind == OP_EMBED || op->kind == OP_POS) continue;
            for (int k = 0; k < op->nparam; k++)
                if (op->param[k] == t) matmul = 1;
        }
        double per_layer =
            tt->region == REGION_BLOCK ? (double)(g->plan->model.layers / plan_block_layers(g->plan)) : 1.0;
        if (matmul) n += (double)expand_tensor_numel(tt) * per_layer;
    }
    return n - (double)(g->params_total - g->params_active);
}

/* Per-axis and per-link volumes of the busiest stage, and the model FLOPs. */
static void analyze_totals(Analysis *an)
{
    const Plan *plan = an->prog->plan;
    const Graph *g = an->prog->graph;
    /* every rank runs one stage: report the busiest one's rows */
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
        if (r->stage != an->worst_stage) continue;
        double bytes = (double)r->elems * r->elem_bytes * (double)r->calls;
        if (r->coll == COLL_SEND) {
            an->pipeline_bytes += bytes;
            an->link_wire[r->inside_node ? 0 : 1] += bytes;
            continue;
        }
        an->axis_bytes[r->axis] += bytes;
        double wire = bytes * cost_bus_factor(r->coll, r->group);
        an->axis_wire[r->axis] += wire;
        an->link_wire[r->inside_node ? 0 : 1] += wire;
    }

    /* model FLOPs: 6 Ψ' per token (forward 2, backward 4) plus attention */
    const Model *m = &plan->model;
    double tokens = (double)plan->train.batch * (double)m->seq;
    double attn = m->block.kind == BLOCK_TRANSFORMER ? 12.0 * (double)m->layers * (double)m->seq * (double)m->hidden
                                                     : 0.0;
    an->model_matmul_params = model_matmul_params(g);
    an->model_attention_flops_per_token = attn;
    an->model_flops_per_step = 6.0 * an->model_matmul_params * tokens + attn * tokens;
}

/* Step time: the slowest stage's chunk times through the actual schedule,
 * then the longest gradient sync and optimizer tail. */
static void analyze_step_time(Arena *arena, Analysis *an)
{
    const Program *prog = an->prog;
    double slowest = -1;
    int v = prog->schedule.chunks > 0 ? prog->schedule.chunks : 1;
    an->stage_fwd = arena_alloc(arena, sizeof(double) * (size_t)prog->nstages * (size_t)v);
    an->stage_bwd = arena_alloc(arena, sizeof(double) * (size_t)prog->nstages * (size_t)v);
    for (int s = 0; s < prog->nstages; s++) {
        const StageCost *sc = &an->stages[s];
        const StageProgram *sp = &prog->stages[s];
        double tf = cost_terms_total(&sc->fwd);
        double tb = cost_terms_total(&sc->bwd);
        for (int c = 0; c < v; c++) {
            /* one chunk's item: its own layers, the embedding in the model's
             * first chunk and the head in its last (v = 1: the mean is the chunk) */
            double f = tf, b = tb;
            if (v > 1) {
                f = sp->chunk_layers[c] * sc->seq_s[SEQ_BLOCK_FWD];
                b = sp->chunk_layers[c] * sc->seq_s[SEQ_BLOCK_BWD];
                if (c == 0) f += sc->seq_s[SEQ_EMBED_FWD], b += sc->seq_s[SEQ_EMBED_BWD];
                if (c == v - 1) f += sc->seq_s[SEQ_HEAD_FWD], b += sc->seq_s[SEQ_HEAD_BWD];
            }
            an->stage_fwd[s * v + c] = f, an->stage_bwd[s * v + c] = b;
            if (f > an->t_fwd) an->t_fwd = f;
            if (b > an->t_bwd) an->t_bwd = b;
        }
        if (tf + tb > slowest) slowest = tf + tb, an->slow_stage = s;
    }
    double msg_bytes = 0;
    if (prog->nstages > 1) an->t_p2p = message_s(prog, &msg_bytes);
    /* a CPU rank stages a message with a copy into its send slot, and takes
     * it in with a copy out of the receive posted ahead (runtime/prt_mpi.c),
     * and the bytes cross the link meanwhile; a GPU's host-staged path
     * copies over the host's bus, at about the link's rate, so there the
     * hand-off is the holds */
    if (plan_cluster_cpu(&prog->plan->cluster))
        an->t_hold = cost_stream_s(&prog->plan->cluster, 2.0 * msg_bytes), an->t_wire = an->t_p2p;
    else an->t_hold = an->t_p2p, an->t_wire = 0;
    double *idle = arena_alloc(arena, sizeof(double) * (size_t)prog->nstages);
    /* each stage at its own times: the last stage's head and loss make its
     * chunks the slowest, and the first stage's ramp-up forward and drain
     * backward, on the critical path, are its own; a pipeline message holds
     * its sender and its receiver t_hold each and is t_wire in flight
     * (schedule.h) */
    an->pipeline_s = schedule_simulate_stages(&prog->schedule, an->stage_fwd, an->stage_bwd, an->t_fwd, an->t_bwd,
                                              an->t_hold, an->t_wire, idle, NULL);
    an->bubble_ideal = schedule_bubble_ideal(&prog->schedule);
    double min_idle = an->pipeline_s;
    for (int s = 0; s < prog->nstages; s++)
        if (idle[s] < min_idle) min_idle = idle[s];
    if (min_idle < 1e-12 * an->pipeline_s) min_idle = 0; /* a sum's rounding, not a bubble */
    an->bubble_share = an->pipeline_s > 0 ? min_idle / an->pipeline_s : 0;
    double tail = -1;
    for (int s = 0; s < prog->nstages; s++) {
        double t = an->stages[s].sync_s + an->stages[s].optim_s;
        if (t > tail) tail = t, an->tail_stage = s;
    }
    an->step_s = an->pipeline_s + tail;

    /* by phase: the slowest stage's work items, the rest of the simulated
     * makespan as bubble, then the tail stage's sync and optimizer */
    const StageCost *slow = &an->stages[an->slow_stage], *end = &an->stages[an->tail_stage];
    double items = (double)prog->schedule.micro_batches * (double)prog->schedule.chunks;
    an->phase_s[APHASE_FORWARD] = items * (cost_terms_total(&slow->fwd) - slow->fwd.comm_s);
    an->phase_s[APHASE_BACKWARD] = items * (cost_terms_total(&slow->bwd) - slow->bwd.comm_s);
    an->phase_s[APHASE_COMM] = items * (slow->fwd.comm_s + slow->bwd.comm_s) + end->sync_s;
    double busy = items * (cost_terms_total(&slow->fwd) + cost_terms_total(&slow->bwd));
    an->phase_s[APHASE_BUBBLE] = an->pipeline_s - busy > 1e-12 * an->pipeline_s ? an->pipeline_s - busy : 0;
    an->phase_s[APHASE_OPTIMIZER] = end->optim_s;
    an->comm_hidden_s = end->sync_hidden_s + items * (slow->fwd_hidden_chunk_s + slow->bwd_hidden_chunk_s);
    an->tp_comm_hidden_s = items * slow->tp_hidden_chunk_s;
    an->tp_comm_exposed_s = items * (slow->tp_comm_chunk_s - slow->tp_hidden_chunk_s);
}

Analysis *analyze_program(Arena *arena, const Program *prog)
{
    const Plan *plan = prog->plan;
    Analysis *an = arena_alloc(arena, sizeof(Analysis));
    an->prog = prog;
    an->stages = arena_alloc(arena, sizeof(StageCost) * (size_t)prog->nstages);
    an->peak_flops = cost_peak_flops(&plan->cluster, plan->train.precision);
    for (int s = 0; s < prog->nstages; s++) analyze_stage(arena, an, s);
    analyze_totals(an);
    analyze_step_time(arena, an);
    return an;
}

/* ------------------------------------------------------------ dump, verify */

void analyze_dump(const Analysis *an, FILE *out)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    fprintf(out, "analysis: %d stage%s, worst stage %d needs %lld bytes per rank\n", prog->nstages,
            prog->nstages == 1 ? "" : "s", an->worst_stage, (long long)an->max_total);
    for (int s = 0; s < prog->nstages; s++) {
        const StageCost *sc = &an->stages[s];
        fprintf(out, "stage %d:", s);
        for (int k = 0; k < PRT_NCLASS; k++) fprintf(out, " %s %lld", ledger_class_names[k], (long long)sc->ledger[k]);
        fprintf(out, " total %lld\n", (long long)sc->total);
        fprintf(out, "  params_local %lld cpu_widen %lld\n", (long long)sc->params_local, (long long)sc->cpu_widen);
        fprintf(out, "  flops fwd_chunk %.6g bwd_chunk %.6g step %.6g\n", sc->flops_fwd_chunk, sc->flops_bwd_chunk,
                sc->flops_step);
        fprintf(out, "  seconds comm_fwd_chunk %.6g comm_bwd_chunk %.6g sync %.6g optim %.6g\n", sc->comm_fwd_chunk_s,
                sc->comm_bwd_chunk_s, sc->sync_s, sc->optim_s);
        if (sc->sync_hidden_s > 0) fprintf(out, "  seconds sync hidden under the backward %.6g\n", sc->sync_hidden_s);
        const CostTerms *terms[3] = {&sc->fwd, &sc->bwd, &sc->sync};
        static const char *const tname[3] = {"fwd_chunk", "bwd_chunk", "sync"};
        for (int k = 0; k < 3; k++)
            fprintf(out, "  terms %s: gemm %.6g s (%.6g FLOP) attention %.6g s (%.6g FLOP) stream %.6g s (%.6g B) "
                         "comm %.6g s (%.6g B)\n",
                    tname[k], terms[k]->gemm_s, terms[k]->gemm_flops, terms[k]->attention_s, terms[k]->attention_flops,
                    terms[k]->stream_s, terms[k]->stream_bytes, terms[k]->comm_s, terms[k]->comm_bytes);
    }
    fprintf(out, "collectives (%d rows):\n", an->nrows);
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
        fprintf(out, "  stage %d %s %s axis %s group %d: %lld x %d B x %lld calls, %s; %s %s; %s\n", r->stage,
                phase_names[r->phase], coll_names[r->coll], r->axis >= 0 ? plan->mesh.axes[r->axis].name : "-",
                r->group, (long long)r->elems, r->elem_bytes, (long long)r->calls,
                r->inside_node ? "inside node" : "across nodes", r->op, r->tensor, r->why);
    }
    for (int a = 0; a < plan->mesh.naxes + plan->mesh.nderived; a++)
        fprintf(out, "axis %s: bytes %.6g wire %.6g\n", plan->mesh.axes[a].name, an->axis_bytes[a], an->axis_wire[a]);
    fprintf(out, "links: inside %.6g across %.6g pipeline %.6g\n", an->link_wire[0], an->link_wire[1],
            an->pipeline_bytes);
    fprintf(out, "flops: step %.6g model %.6g peak %.6g\n", an->flops_per_step, an->model_flops_per_step,
            an->peak_flops);
    fprintf(out, "time: fwd %.6g bwd %.6g p2p %.6g pipeline %.6g step %.6g\n", an->t_fwd, an->t_bwd, an->t_p2p,
            an->pipeline_s, an->step_s);
    fprintf(out, "bubble: ideal %.6g simulated %.6g\n", an->bubble_ideal, an->bubble_share);
    fprintf(out, "phases (slow stage %d, tail stage %d):", an->slow_stage, an->tail_stage);
    for (int k = 0; k < ANALYZE_NPHASES; k++) fprintf(out, "%s %s %.6g", k ? "," : "", analyze_phase_names[k], an->phase_s[k]);
    fprintf(out, "; hidden communication %.6g\n", an->comm_hidden_s);
    fprintf(out, "tensor axis: communication exposed %.6g hidden %.6g\n", an->tp_comm_exposed_s, an->tp_comm_hidden_s);
}

void analyze_verify(const Analysis *an)
{
    const Program *prog = an->prog;
    int64_t max_total = -1;
    for (int s = 0; s < prog->nstages; s++) {
        const StageCost *sc = &an->stages[s];
        const StageProgram *sp = &prog->stages[s];
        int64_t sum = 0;
        for (int k = 0; k < PRT_NCLASS; k++) {
            if (sc->ledger[k] != sp->ledger[k] || sc->ledger[k] < 0)
                PARC_BUG("stage %d: analyzed %s %lld bytes, the program's ledger %lld", s, ledger_class_names[k],
                         (long long)sc->ledger[k], (long long)sp->ledger[k]);
            sum += sc->ledger[k];
        }
        if (sum != sc->total || sum != sp->ledger_total)
            PARC_BUG("stage %d: ledger classes sum to %lld, total %lld", s, (long long)sum, (long long)sc->total);
        if (sc->total > max_total) max_total = sc->total;
        if (!(sc->flops_step >= 0 && sc->sync_s >= 0 && sc->optim_s >= 0))
            PARC_BUG("stage %d: negative FLOPs or time", s);
    }
    if (an->worst_stage < 0 || an->worst_stage >= prog->nstages || an->max_total != max_total ||
        an->stages[an->worst_stage].total != max_total)
        PARC_BUG("worst stage %d with %lld bytes, the most any stage needs is %lld", an->worst_stage,
                 (long long)an->max_total, (long long)max_total);
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
        if (r->stage < 0 || r->stage >= prog->nstages || r->group < 2 || r->calls < 1 || r->elems < 1)
            PARC_BUG("collective row %d: stage %d group %d, %lld calls of %lld elements", i, r->stage, r->group,
                     (long long)r->calls, (long long)r->elems);
        if (r->axis < -1 || r->axis >= prog->plan->mesh.naxes + prog->plan->mesh.nderived) PARC_BUG("collective row %d: axis %d", i, r->axis);
    }
    if (!(an->step_s >= an->pipeline_s && an->pipeline_s >= 0 && an->bubble_share >= 0 && an->bubble_share <= 1))
        PARC_BUG("step %g s, pipeline %g s, bubble share %g", an->step_s, an->pipeline_s, an->bubble_share);
}

double analyze_mfu(const Analysis *an)
{
    double denom = an->step_s * an->peak_flops * an->prog->plan->mesh.world;
    return denom > 0 ? an->model_flops_per_step / denom : 0;
}
