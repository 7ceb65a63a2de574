/*
 * explain.c — the reports: `check`'s summary, `explain` (text and JSON) and
 * `collectives` (text and JSON).  Every number printed here is read from the
 * Analysis of the lowered Program; nothing is recomputed by formula.  The JSON
 * schema is documented in docs/json.md and kept stable (keys only added).
 */
#include "explain.h"

#include <math.h>
#include <string.h>

static const char *virtual_note(int v)
{
    static char buf[32];
    snprintf(buf, sizeof buf, ", %d virtual stages", v);
    return buf;
}

static const char *axis_role(const Program *prog, int a, char *buf, size_t size)
{
    const Plan *plan = prog->plan;
    const Layout *l = &plan->layout;
    size_t used = 0;
    buf[0] = 0;
    const char *sep = "";
    if (a == l->pp_axis) {
        used += (size_t)snprintf(buf + used, size - used, "%spipeline (layers, %s%s)", sep,
                                 schedule_kind_name(prog->schedule.kind),
                                 l->virtual_stages > 1 ? virtual_note(l->virtual_stages) : "");
        sep = ", ";
    }
    char dims[128] = "";
    size_t du = 0;
    for (int d = 0; d < DIM_COUNT && du < sizeof dims; d++) {
        if (d == DIM_LAYERS || !(plan_axis_parts(plan, l->dim_axis[d]) >> a & 1)) continue;
        du += (size_t)snprintf(dims + du, sizeof dims - du, "%s%s", du ? ", " : "", dim_names[d]);
    }
    if (dims[0] && used < size) {
        const char *kind = (plan_axis_parts(plan, l->dim_axis[DIM_BATCH]) >> a & 1) ? "data"
                    : l->dim_axis[DIM_SEQ] == a                                ? "context"
                                                                               : "tensor";
        /* a context axis: ring attention, the load-balanced split */
        int ctx = l->dim_axis[DIM_SEQ] == a && (l->cp_comm == CP_COMM_RING || l->cp_balanced);
        used += (size_t)snprintf(buf + used, size - used, "%s%s (%s%s%s%s)", sep, kind, dims, ctx ? "; " : "",
                                 !ctx ? "" : l->cp_comm == CP_COMM_RING ? "ring" : "all-gather",
                                 ctx && l->cp_balanced ? ", balanced" : "");
        sep = ", ";
    }
    if (l->sp_axis == a && used < size) {
        used += (size_t)snprintf(buf + used, size - used, "%ssequence parallel", sep);
        sep = ", ";
    }
    if ((plan_axis_parts(plan, l->zero_axis) >> a & 1) && l->zero_stage > 0 && used < size) {
        used += (size_t)snprintf(buf + used, size - used, "%sZeRO-%d", sep, l->zero_stage);
        if (l->zero_axis >= plan->mesh.naxes && used < size) /* over the data group */
            used += (size_t)snprintf(buf + used, size - used, " over %s", plan->mesh.axes[l->zero_axis].name);
        sep = ", ";
    }
    if (!buf[0]) snprintf(buf, size, "replicated (no rule maps to it)");
    return buf;
}


static void print_count(FILE *out, double v)
{
    if (v >= 1e12) fprintf(out, "%.3g T", v / 1e12);
    else if (v >= 1e9) fprintf(out, "%.3g B", v / 1e9);
    else if (v >= 1e6) fprintf(out, "%.3g M", v / 1e6);
    else if (v >= 1e3) fprintf(out, "%.3g K", v / 1e3);
    else fprintf(out, "%.0f", v);
}

void explain_check_summary(FILE *out, const Analysis *an)
{
    const Plan *plan = an->prog->plan;
    char total[64], cap[64];
    analyze_format_bytes((double)an->max_total, total, sizeof total);
    analyze_format_bytes(plan->cluster.gpu_memory, cap, sizeof cap);
    fprintf(out, "%s: ok: %d rank%s, ", plan->file ? plan->file : "plan", plan->mesh.world,
            plan->mesh.world == 1 ? "" : "s");
    print_count(out, (double)an->prog->graph->params_total);
    fprintf(out, " parameters, peak %s of %s per GPU (stage %d)", total, cap, an->worst_stage);
    if (plan->cluster.gpu_reserve > 0) {
        char reserve[64];
        analyze_format_bytes(plan->cluster.gpu_reserve, reserve, sizeof reserve);
        fprintf(out, " with a %s reserve: %.1f%% used",  reserve,
                100.0 * plan_memory_share(&plan->cluster, (double)an->max_total));
    }
    fputc('\n', out);
}

static int64_t stage_ranks(const Program *prog) { return prog->plan->mesh.world / (prog->nstages ? prog->nstages : 1); }

/* A stage's total, the cluster's reserve beside it, against the GPU: the
 * share they take together, whether they fit and the margin either way. */
static void explain_stage_total(FILE *out, const Cluster *cl, int64_t total)
{
    char b1[64], b2[64], b3[64], b4[64];
    analyze_format_bytes((double)total, b1, sizeof b1);
    analyze_format_bytes(cl->gpu_reserve, b2, sizeof b2);
    analyze_format_bytes(cl->gpu_memory, b3, sizeof b3);
    double margin = plan_usable_memory(cl) - (double)total;
    analyze_format_bytes(fabs(margin), b4, sizeof b4);
    int fits = plan_fits(cl, (double)total);
    fprintf(out, "  %-14s %16lld %11s   + reserve %s of %s (%.1f%%) %s, %s %s\n", "total", (long long)total, b1, b2, b3,
            100.0 * plan_memory_share(cl, (double)total), fits ? "fits" : "DOES NOT FIT", b4,
            fits ? "to spare" : "over");
}

/* A mixture of experts' share of a stage's memory: the buffers of the
 * experts' weights (their gradients, master weights and moments named after
 * them) and of the routed rows (dispatched, inside the experts, kept for the
 * backward), by class. */
static int stage_experts_bytes(const StageProgram *sp, int64_t by[PRT_NCLASS])
{
    int any = 0;
    for (int k = 0; k < PRT_NCLASS; k++) by[k] = 0;
    for (int b = 0; b < sp->nbufs; b++) {
        const Buffer *bf = &sp->bufs[b];
        if (!strstr(bf->name, "mlp.experts.") && !strstr(bf->name, "mlp.dispatch.")) continue;
        by[bf->klass] += bf->elems * bf->instances * dtype_bytes(bf->dtype);
        any = 1;
    }
    return any;
}

static void explain_stage_experts(FILE *out, const StageProgram *sp)
{
    int64_t by[PRT_NCLASS];
    if (!stage_experts_bytes(sp, by)) return;
    char b1[64];
    fprintf(out, "  of which experts");
    const char *sep = " ";
    for (int k = 0; k < PRT_NCLASS; k++) {
        if (!by[k]) continue;
        analyze_format_bytes((double)by[k], b1, sizeof b1);
        fprintf(out, "%s%s %s", sep, ledger_class_names[k], b1);
        sep = ", ";
    }
    fprintf(out, " (their weights' states and the routed rows)\n");
}

/* One stage's memory: every class (with its buffers when verbose), the total
 * against the GPU, bytes per parameter. */
static void explain_stage_memory(FILE *out, const Analysis *an, int s, int verbose)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    char b1[64];
    const StageProgram *sp = &prog->stages[s];
    const StageCost *sc = &an->stages[s];
    fprintf(out, "\n");
    if (prog->nstages > 1)
        fprintf(out, "stage %d (%lld ranks): layers", s, (long long)stage_ranks(prog));
    else
        fprintf(out, "every rank (%lld): layers", (long long)stage_ranks(prog));
    for (int c = 0; c < sp->chunks; c++) {
        int64_t first, last;
        program_chunk_span(prog->plan, sp, c, &first, &last);
        fprintf(out, " %lld..%lld", (long long)first, (long long)last);
    }
    /* the head region holds the final norm even in a model without a head */
    int head = sp->has_head && prog->plan->model.has_head, embed = sp->has_embed && prog->plan->model.has_embed;
    fprintf(out, "%s%s; %lld parameters held\n", embed ? " + embedding" : "", head ? " + head" : "",
            (long long)sc->params_local);
    fprintf(out, "  %-14s %16s %11s\n", "memory", "bytes", "");
    for (int k = 0; k < PRT_NCLASS; k++) {
        analyze_format_bytes((double)sc->ledger[k], b1, sizeof b1);
        fprintf(out, "  %-14s %16lld %11s", ledger_class_names[k], (long long)sc->ledger[k], b1);
        if (k == PRT_ACTIVATIONS)
            fprintf(out, "   (%d in-flight micro-batch%s x %lld layer%s)", sp->nslots, sp->nslots == 1 ? "" : "es",
                    (long long)(sp->max_chunk_layers * plan_block_layers(prog->plan)),
                    sp->max_chunk_layers * plan_block_layers(prog->plan) == 1 ? "" : "s");
        if (k < PRT_ACTIVATIONS && sc->params_local > 0 && sc->ledger[k])
            fprintf(out, "   %.3g bytes/parameter", (double)sc->ledger[k] / (double)sc->params_local);
        fprintf(out, "\n");
        if (verbose) {
            for (int b = 0; b < sp->nbufs; b++) {
                const Buffer *bf = &sp->bufs[b];
                if (bf->klass != k) continue;
                int bytes = dtype_bytes(bf->dtype);
                fprintf(out, "      %-28s %12lld elements x %4lld instances x %d B = %lld\n", bf->name,
                        (long long)bf->elems, (long long)bf->instances, bytes,
                        (long long)(bf->elems * bf->instances * bytes));
            }
            if (k == PRT_COMM)
                fprintf(out, "      + runtime staging (packing of strided gathers, pipeline send copies)\n");
        }
    }
    explain_stage_total(out, &plan->cluster, sc->total);
    double states = (double)(sc->ledger[PRT_WEIGHTS] + sc->ledger[PRT_GRADS] + sc->ledger[PRT_MASTER] +
                             sc->ledger[PRT_OPTIM]);
    if (sc->params_local > 0)
        fprintf(out, "  model states   %.4g bytes per parameter held\n", states / (double)sc->params_local);
    explain_stage_experts(out, sp);
    if (sc->cpu_widen) {
        analyze_format_bytes((double)sc->cpu_widen, b1, sizeof b1);
        fprintf(out, "  the CPU runtime computes in fp32: a program built from this plan also widens 16-bit "
                     "operands in %s more workspace\n",
                b1);
    }
    if (sc->host_staging) {
        analyze_format_bytes((double)sc->host_staging, b1, sizeof b1);
        fprintf(out, "  pipeline sends are copied to host memory until received: up to %s per rank (not GPU "
                     "memory: the schedule's in-flight peak of messages, and the receive posted ahead)\n",
                b1);
    }
    if (verbose)
        fprintf(out, "  flops          %.4g per step on each rank of this stage (forward %.4g, backward %.4g per "
                     "micro-batch through one chunk)\n",
                sc->flops_step, sc->flops_fwd_chunk, sc->flops_bwd_chunk);
}

/* One line: the schedule's phases and its values at step 1 and the plan's last step. */
static void explain_lr_schedule(FILE *out, const Train *t)
{
    prt_lr_schedule s = {t->lr_shape, t->lr_warmup, t->lr_stable, t->lr_decay, t->lr, t->lr_min};
    fprintf(out, "  lr schedule     peak %.6g: ", t->lr);
    if (t->lr_warmup) fprintf(out, "linear warmup over %lld steps, ", (long long)t->lr_warmup);
    if (t->lr_stable) fprintf(out, "stable %lld steps, ", (long long)t->lr_stable);
    if (t->lr_shape != PRT_LR_CONSTANT)
        fprintf(out, "%s decay to %.4g over %lld steps; ", prt_lr_shape_name(t->lr_shape), t->lr_min,
                (long long)t->lr_decay);
    else
        fprintf(out, "then constant; ");
    fprintf(out, "lr %.4g at step 1, %.4g at step %lld\n", prt_lr_at(&s, 1), prt_lr_at(&s, t->steps),
            (long long)t->steps);
}

/* The plan's `checkpoint`: the built program's defaults and what overrides them. */
static void explain_checkpoint(FILE *out, const Train *t)
{
    fprintf(out, "  checkpoints     ");
    if (t->ckpt_every) fprintf(out, "every %lld steps", (long long)t->ckpt_every);
    else fprintf(out, "on a signal or --save-on-exit");
    if (t->ckpt_keep) fprintf(out, ", the newest %lld kept", (long long)t->ckpt_keep);
    fprintf(out, ", into %s/ unless --checkpoint-dir DIR (--checkpoint-every N, --checkpoint-keep N override "
                 "the plan's)\n", t->ckpt_dir);
}

/* One line each: the data files and the evaluation, with the evaluation's
 * forward time from the cost model (a batch's forward phase per batch). */
static void explain_data(FILE *out, const Program *prog)
{
    const Plan *plan = prog->plan;
    const DataSpec *d = &plan->data;
    static const char *const formats[] = {"text", "llmc", "u16", "u32"}; /* ORDER: enum prt_data_format */
    if (d->present)
        fprintf(out, "  data            %s, format %s; validation %s (paths relative to the plan's directory)\n",
                d->train ? d->train_written : "synthetic", formats[d->format],
                d->validation ? d->validation_written : "synthetic");
    const Train *t = &plan->train;
    if (t->eval_every <= 0) return;
    double each = (double)t->eval_batches * prog->est_phase_seconds[PRT_PHASE_FORWARD];
    int64_t evals = 2 + (t->steps - 1) / t->eval_every;  /* before step 1, every N-th, the last */
    double train_s = (double)t->steps * prog->est_step_seconds;
    fprintf(out, "  eval            every %lld steps, %lld batches forward: %.3g s each, %lld in %lld steps (%.2g%% of "
                 "the training time)\n",
            (long long)t->eval_every, (long long)t->eval_batches, each, (long long)evals, (long long)t->steps,
            train_s > 0 ? 100.0 * (double)evals * each / train_s : 0.0);
}

int explain_wants_flash_switch(const Plan *plan)
{
    const BlockSpec *b = &plan->model.block;
    return b->kind == BLOCK_TRANSFORMER && plan->model.heads > 0 && plan->layout.recompute == RECOMPUTE_NONE;
}

/* Which attention the plan runs and, from `other` (the plan with `flash`
 * switched, through the pass table: the figures that plan's own explain
 * gives), what switching would do to the memory of the rank that needs the
 * most and to the step time. */
static void explain_attention(FILE *out, const Analysis *an, const Analysis *other)
{
    const Plan *plan = an->prog->plan;
    const BlockSpec *b = &plan->model.block;
    if (b->kind != BLOCK_TRANSFORMER || plan->model.heads <= 0) return;
    const char *mask = b->causal ? "causal" : "full";
    int cp = plan->layout.dim_axis[DIM_SEQ];
    if (cp >= 0 && plan->layout.cp_comm == CP_COMM_RING) {
        int64_t P = plan->mesh.axes[cp].size;
        fprintf(out, "  attention       %s, ring attention over %s: %lld step%s a layer, each on the keys and "
                     "values of one chunk of %lld tokens while the next arrives (the backward passes their "
                     "gradient along); online softmax, each row's logsumexp kept, no probabilities%s\n",
                mask, plan->mesh.axes[cp].name, (long long)P, P == 1 ? "" : "s", (long long)(plan->model.seq / P),
                !b->causal ? ""
                : plan->layout.cp_balanced
                    ? "; the load-balanced split (`cp_split balanced`: rank r holds chunks r and 2 cp - 1 - r) gives "
                      "every rank the same work, half of each step's blocks"
                    : "; a causal split in order leaves the last rank every step's work, the first one step's "
                      "(`cp_split balanced` evens it)");
        /* the blocks in flight, as the lowered program holds them */
        const StageProgram *sp = &an->prog->stages[an->worst_stage];
        int n = 0;
        double bytes = 0, each = 0;
        for (int i = 0; i < sp->nbufs; i++)
            if (!strncmp(sp->bufs[i].name, "ring.", 5)) {
                n++;
                each = (double)sp->bufs[i].elems * dtype_bytes(sp->bufs[i].dtype);
                bytes += each;
            }
        if (n) {
            char b1[64], b2[64];
            analyze_format_bytes(each, b1, sizeof b1);
            analyze_format_bytes(bytes, b2, sizeof b2);
            fprintf(out, "                  in flight: %d blocks of a chunk's keys and values, %s each (two passed on, "
                         "two of their gradient, one arriving), %s of workspace\n",
                    n, b1, b2);
        }
        return;
    }
    if (cp >= 0 && plan->layout.cp_balanced) {
        int64_t P = plan->mesh.axes[cp].size;
        fprintf(out, "  attention       %s, context parallel over %s by all-gather with the load-balanced split "
                     "(`cp_split balanced`: rank r holds chunks r and 2 cp - 1 - r of %lld tokens): the gathered qkv "
                     "put in order, the rank's two halves of query rows two calls, every rank the same work; no "
                     "probabilities kept, each half recomputes its own in the backward\n",
                mask, plan->mesh.axes[cp].name, (long long)(plan->model.seq / (2 * P)));
        return;
    }
    if (plan->layout.recompute != RECOMPUTE_NONE) {
        fprintf(out, "  attention       %s%s: probabilities recomputed in backward (recompute %s)\n", mask,
                b->flash ? " flash" : "", recompute_names[plan->layout.recompute]);
        return;
    }
    if (!other) PARC_BUG("explain: no analysis of the plan with `attention %s%s`", mask, b->flash ? "" : " flash");
    char b1[64];
    analyze_format_bytes(fabs((double)(an->max_total - other->max_total)), b1, sizeof b1);
    if (b->flash)
        fprintf(out, "  attention       %s flash: online softmax, no seq x seq probabilities kept, recomputed in "
                     "backward; stored (`attention %s`) would take %s more per GPU and %.4g s a step (this plan "
                     "%.4g s)\n", mask, mask, b1, other->step_s, an->step_s);
    else
        fprintf(out, "  attention       %s, probabilities stored for backward; `attention %s flash` would save %s per "
                     "GPU and take %.4g s a step (this plan %.4g s)\n", mask, mask, b1, other->step_s, an->step_s);
}

/* How the model sees token positions: a learned table, rotary (its base and
 * Llama 3.1 scaling) or none. */
static void explain_positions(FILE *out, const Plan *plan)
{
    const Model *m = &plan->model;
    if (!m->has_embed) return;
    if (m->positions == POS_LEARNED) {
        fprintf(out, "  positions       learned: a [seq, hidden] table added to the token embedding\n");
    } else if (m->positions == POS_NONE) {
        fprintf(out, "  positions       none: no position embedding%s\n",
                m->block.kind == BLOCK_TRANSFORMER && m->block.causal ? " (only the causal mask orders the tokens)"
                                                                         : "");
    } else {
        fprintf(out, "  positions       rotary (RoPE) on q and k in every layer, theta %g, head dims i and i + "
                     "head_dim/2 paired (transformers' rotate_half)",
                m->rope.theta);
        if (m->rope.llama3)
            fprintf(out, "; Llama 3.1 scaling: factor %g, low_freq_factor %g, high_freq_factor %g, "
                         "original_max_positions %lld",
                    m->rope.factor, m->rope.low_freq_factor, m->rope.high_freq_factor,
                    (long long)m->rope.original_max_positions);
        fprintf(out, "\n");
    }
}

/* The plan's dropout: where it applies and what its stored masks take on the
 * worst stage (the u8 activation buffers). */
static void explain_dropout(FILE *out, const Analysis *an)
{
    const Plan *plan = an->prog->plan;
    double p = plan->model.block.dropout;
    if (p <= 0) return;
    const StageProgram *sp = &an->prog->stages[an->worst_stage];
    int64_t masks = 0;
    for (int b = 0; b < sp->nbufs; b++)
        if (sp->bufs[b].klass == PRT_ACTIVATIONS && sp->bufs[b].dtype == PRT_U8)
            masks += sp->bufs[b].elems * sp->bufs[b].instances;
    char b1[64];
    analyze_format_bytes((double)masks, b1, sizeof b1);
    int attention = plan->model.block.kind == BLOCK_TRANSFORMER && plan->model.heads > 0;
    fprintf(out, "  dropout         %g on %s; masks of (seed, step, layer, index), %s of them stored (1 byte per "
                 "element)%s\n",
            p, attention ? "the attention probabilities and both branch outputs" : "the MLP's output", b1,
            attention ? ", the probabilities' mask regenerated in backward" : "");
}

static void explain_stage_busy(FILE *out, const Analysis *an, int verbose);

/* What of each GPU is not the plan's, and where the figure comes from. */
static void explain_reserve(FILE *out, const Cluster *cl)
{
    char b1[64], b2[64];
    analyze_format_bytes(cl->gpu_reserve, b1, sizeof b1);
    analyze_format_bytes(plan_usable_memory(cl), b2, sizeof b2);
    if (cl->reserve_set && cl->gpu_reserve == 0)
        fprintf(out, "  reserve         none: the cluster states `reserve 0 B` (ranks on CPUs hold no device context)\n");
    else if (cl->reserve_set)
        fprintf(out, "  reserve         %s of each GPU outside the ledger (the cluster's `reserve`): %s for the plan\n",
                b1, b2);
    else if (cl->gpu_reserve > 0)
        fprintf(out, "  reserve         %s of each GPU outside the ledger: CUDA context, NCCL's buffers, fragmentation "
                     "(the default for a GPU, %.0f GiB + %.3g%% of its memory; `gpu { reserve ...; }` states another): "
                     "%s for the plan\n",
                b1, PARC_RESERVE_FIXED / 1073741824.0, 100 * PARC_RESERVE_SHARE, b2);
    else
        fprintf(out, "  reserve         none: the cluster was calibrated on a CPU, whose ranks hold no device context\n");
}

/* Expert parallelism's figures: the experts a rank holds, the bytes of one
 * exchange of a layer's routed rows (the balanced share times `imbalance`)
 * and how many a micro-batch makes (counted in stage 0's block sequences),
 * the rows the experts' side buffers hold and their dropless bound. */
typedef struct ExpertParallel {
    int axis;                /* -1: the experts are whole */
    int64_t local, tokens, chosen, rows, bound;
    double bytes;
    int fwd, bwd;
} ExpertParallel;

static ExpertParallel expert_parallel(const Program *prog)
{
    const Plan *plan = prog->plan;
    const MoeSpec *moe = &plan->model.block.moe;
    ExpertParallel x = {.axis = moe->experts ? plan->layout.dim_axis[DIM_EXPERTS] : -1};
    if (x.axis < 0) return x;
    int64_t S = plan->mesh.axes[x.axis].size;
    x.local = moe->experts / S;
    /* a rank's tokens: its samples' positions, its chunk of them beside a context axis */
    x.tokens = plan->train.micro_batch * plan->model.seq / plan_axis_size(plan, plan_context_axis(plan));
    x.chosen = moe->topk < x.local ? moe->topk : x.local;
    x.bytes = (double)x.tokens * (double)moe->topk * (double)plan->model.hidden * dtype_bytes(program_act_dtype(plan)) *
              moe->imbalance;
    const StageProgram *sp = &prog->stages[0];
    for (int i = 0; i < sp->seq[SEQ_BLOCK_FWD].n; i++) x.fwd += sp->seq[SEQ_BLOCK_FWD].ins[i].fn == RT_prt_alltoallv;
    for (int i = 0; i < sp->seq[SEQ_BLOCK_BWD].n; i++) x.bwd += sp->seq[SEQ_BLOCK_BWD].ins[i].fn == RT_prt_alltoallv;
    x.bound = x.rows = x.tokens * S * x.chosen;
    if (moe->capacity > 0) {
        int64_t cap = (int64_t)ceil(moe->capacity * (double)x.tokens * (double)moe->topk);
        if (cap < x.rows) x.rows = cap;
    }
    return x;
}

static void explain_expert_parallel(FILE *out, const Program *prog)
{
    const Plan *plan = prog->plan;
    const MoeSpec *moe = &plan->model.block.moe;
    ExpertParallel x = expert_parallel(prog);
    if (x.axis < 0) return;
    const char *ax = plan->mesh.axes[x.axis].name;
    char b1[64];
    analyze_format_bytes(x.bytes, b1, sizeof b1);
    const char *held =
        x.rows < x.bound ? arena_printf(prog->arena,
                                        "%lld rows, capacity %g x the balanced %lld (a step that routes more to a rank "
                                        "stops the run)",
                                        (long long)x.rows, moe->capacity, (long long)(x.tokens * moe->topk))
                         : arena_printf(prog->arena, "the %lld rows they can receive (every token of %s, at most %lld "
                                                     "each)",
                                        (long long)x.rows, ax, (long long)x.chosen);
    fprintf(out,
            "  expert parallel %lld of the %lld experts on each rank of %s; a layer's routed rows go to their experts' "
            "ranks and back by all-to-all(v), %s a rank each (%lld tokens x top %lld%s): %d per micro-batch forward, "
            "%d backward; the experts' buffers hold %s\n",
            (long long)x.local, (long long)moe->experts, ax, b1, (long long)x.tokens, (long long)moe->topk,
            moe->imbalance != 1.0 ? arena_printf(prog->arena, " x imbalance %g", moe->imbalance) : ", balanced",
            x.fwd, x.bwd, held);
}

int explain_wants_zero_group(const Plan *plan)
{
    const Layout *l = &plan->layout;
    int group = plan->layout.data_group;
    return l->zero_stage > 0 && l->zero_axis >= 0 && group >= plan->mesh.naxes && l->zero_axis != group;
}

/* ZeRO over one axis of the data group: what sharding over all of it would
 * hold per GPU (`group`, that plan through the pass table). */
static void explain_zero_group(FILE *out, const Analysis *an, const Analysis *group)
{
    const Plan *plan = an->prog->plan;
    const Layout *l = &plan->layout;
    if (!group) return;
    int g = plan->layout.data_group;
    char now[64], then[64], names[160] = "";
    size_t used = 0;
    for (int a = 0; a < plan->mesh.naxes && used < sizeof names; a++)
        if (plan_axis_parts(plan, g) >> a & 1)
            used += (size_t)snprintf(names + used, sizeof names - used, " %s", plan->mesh.axes[a].name);
    analyze_format_bytes((double)an->max_total, now, sizeof now);
    analyze_format_bytes((double)group->max_total, then, sizeof then);
    fprintf(out, "  ZeRO-%d over %s alone: every rank of %s holds the same parameters; `zero %d over%s;` would shard "
                 "over all %d: %s per GPU instead of %s\n",
            l->zero_stage, plan->mesh.axes[l->zero_axis].name, plan->mesh.axes[g].name, l->zero_stage, names,
            plan->mesh.axes[g].size, then, now);
}

void explain_text(FILE *out, const Analysis *an, const Analysis *other, const Analysis *group, int verbose)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    const Model *m = &plan->model;
    const Train *t = &plan->train;
    char b1[64];

    fprintf(out, "plan %s: model %s\n", plan->file ? plan->file : "", m->name ? m->name : "");
    fprintf(out, "  parameters      %lld (", (long long)prog->graph->params_total);
    print_count(out, (double)prog->graph->params_total);
    fprintf(out, ")\n");
    if (m->block.moe.experts) {
        const MoeSpec *moe = &m->block.moe;
        fprintf(out, "  active          %lld (", (long long)prog->graph->params_active);
        print_count(out, (double)prog->graph->params_active);
        int64_t N = plan_block_layers(plan);
        char which[96] = "in each layer";
        if (N > 1)
            snprintf(which, sizeof which, "in each of the %lld mixture layers (the others dense)",
                     (long long)(m->layers / N));
        fprintf(out, ") per token: the router%s%lld of %lld experts%s %s\n", moe->shared ? ", " : " and ",
                (long long)moe->topk, (long long)moe->experts, moe->shared ? " and the shared experts" : "", which);
        const char *act = m->block.mlp == MLP_SWIGLU ? "SwiGLU" : m->block.mlp == MLP_GELU ? "GELU" : "ReLU";
        fprintf(out, "  experts         %lld %s experts per %slayer, %lld hidden units each; each token to its top %lld "
                     "by a %s router; aux_loss %g, z_loss %g\n",
                (long long)moe->experts, act, N > 1 ? "mixture " : "", (long long)moe->expert_ffn, (long long)moe->topk,
                moe->router == ROUTER_SIGMOID ? "sigmoid" : "softmax", moe->aux_coef, moe->z_coef);
        if (N > 1)
            fprintf(out, "  interleaved     the mixture in every %lld%s layer (layers %lld, %lld, ...), a dense %s MLP of "
                         "%lld hidden units in the others\n",
                    (long long)N, N == 2 ? "nd" : N == 3 ? "rd" : "th", (long long)(N - 1), (long long)(2 * N - 1), act,
                    (long long)m->ffn);
        if (moe->shared)
            fprintf(out, "  shared experts  %lld, as one ungated %s MLP of %lld hidden units that every token goes "
                         "through, added to the routed experts' output\n",
                    (long long)moe->shared, act, (long long)moe->shared_ffn);
        explain_expert_parallel(out, prog);
    }
    analyze_format_bytes(plan->cluster.gpu_memory, b1, sizeof b1);
    fprintf(out, "  cluster         %d node%s x %d GPUs = %d GPUs, %s each\n", plan->cluster.nodes,
            plan->cluster.nodes == 1 ? "" : "s", plan->cluster.gpus_per_node, plan->mesh.world, b1);
    explain_reserve(out, &plan->cluster);
    /* a 16-bit plan says in which dtype its gradients accumulate and are reduced */
    char grads[96] = "";
    if (t->precision != PREC_FP32)
        snprintf(grads, sizeof grads, ", gradients accumulated and reduced in %s",
                 t->grads_fp32 ? "fp32" : precision_names[t->precision]);
    fprintf(out, "  training        batch %lld x seq %lld = %lld tokens/step; micro-batch %lld, %lld micro-batches per "
                 "rank; %s%s%s; %s\n",
            (long long)t->batch, (long long)m->seq, (long long)(t->batch * m->seq), (long long)t->micro_batch,
            (long long)t->micro_batches, precision_names[t->precision],
            t->master_fp32 && t->precision != PREC_FP32 ? " with fp32 master weights" : "", grads,
            t->optimizer == OPT_SGD ? "sgd" : t->optimizer == OPT_ADAM ? "adam" : "adamw");
    if (t->lr_scheduled) explain_lr_schedule(out, t);
    if (t->clip > 0 || t->decay_all) {
        char clip[96] = "";
        if (t->clip > 0) snprintf(clip, sizeof clip, "gradients clipped to global norm %.4g; ", t->clip);
        fprintf(out, "  optimizer       %sweight decay %.4g on %s\n", clip, t->weight_decay,
                t->decay_all ? "every parameter" : "matrices and embedding tables only");
    }
    explain_data(out, prog);
    if (t->ckpt_dir) explain_checkpoint(out, t);
    fprintf(out, "  compute         %.4g FLOP/step (model FLOPs, 6 x (non-embedding params + head) x tokens + "
                 "attention: %.4g)\n",
            an->flops_per_step, an->model_flops_per_step);
    if (verbose) {
        double tokens = (double)t->batch * (double)m->seq;
        fprintf(out,
                "                  model FLOPs = 6 x %.4g parameters (all but the embedding and position tables, "
                "plus the head's matmul weight) x %.4g tokens + attention 12 x layers x seq x hidden = %.4g per "
                "token; the MFU numerator\n",
                an->model_matmul_params, tokens, an->model_attention_flops_per_token);
    }
    explain_attention(out, an, other);
    explain_positions(out, plan);
    explain_dropout(out, an);

    fprintf(out, "\nmesh (last axis varies fastest):\n");
    fprintf(out, "  %-6s %5s  %-44s %-12s %s\n", "axis", "size", "carries", "groups", "link");
    for (int a = 0; a < plan->mesh.naxes; a++) {
        char role[256];
        int inside = plan_axis_inside_node(plan, a);
        double bw = inside ? plan->cluster.intra_bw : plan->cluster.inter_bw;
        snprintf(b1, sizeof b1, "%.4g GB", bw / 1e9);
        fprintf(out, "  %-6s %5d  %-44s %-12s %s %s/s\n", plan->mesh.axes[a].name, plan->mesh.axes[a].size,
                axis_role(prog, a, role, sizeof role), inside ? "inside node" : "across nodes",
                inside ? "intra" : "inter", b1);
    }
    explain_zero_group(out, an, group);

    for (int s = 0; s < prog->nstages; s++) explain_stage_memory(out, an, s, verbose);

    /* the schedule */
    const Schedule *sc = &prog->schedule;
    if (sc->stages == 1)
        fprintf(out, "\nno pipeline axis: %d micro-batches accumulate gradients, each forward then backward\n",
                sc->micro_batches);
    else
        fprintf(out, "\npipeline: %s, %d stages, %d micro-batches, %d virtual stage%s per rank\n",
                schedule_kind_name(sc->kind), sc->stages, sc->micro_batches, sc->chunks, sc->chunks == 1 ? "" : "s");
    fprintf(out, "  bubble          (p-1)/(v*m) = %.4g of ideal time; %.1f%% of the simulated step\n", an->bubble_ideal,
            100.0 * an->bubble_share);
    if (plan->layout.pipeline_scatter) {
        int tp = plan_tensor_axis(plan), n = plan_axis_size(plan, tp);
        char b1[64], b2[64];
        double whole = (double)plan_boundary_elems(plan) * plan_precision_bytes(plan->train.precision);
        analyze_format_bytes(whole / n, b1, sizeof b1);
        analyze_format_bytes(whole, b2, sizeof b2);
        fprintf(out, "  scatter/gather  each message carries this %s rank's 1/%d of the boundary, %s of %s, and the "
                     "receiver all-gathers it over %s (`pipeline_scatter on`)\n",
                plan->mesh.axes[tp].name, n, b1, b2, plan->mesh.axes[tp].name);
    }
    for (int s = 0; s < sc->stages; s++) {
        fprintf(out, "  stage %-3d peak in flight %d:", s, sc->peak_in_flight[s]);
        int shown = sc->count[s] < 24 || verbose ? sc->count[s] : 24;
        for (int i = 0; i < shown; i++) {
            const WorkItem *w = &sc->items[s][i];
            if (sc->chunks > 1) fprintf(out, " %c%d.%d", w->kind == WORK_FORWARD ? 'F' : 'B', w->micro, w->chunk);
            else fprintf(out, " %c%d", w->kind == WORK_FORWARD ? 'F' : 'B', w->micro);
        }
        if (shown < sc->count[s]) fprintf(out, " ... (%d items)", sc->count[s]);
        fprintf(out, "\n");
        if (s >= 7 && !verbose && sc->stages > 9) {
            fprintf(out, "  ... %d more stages\n", sc->stages - s - 1);
            break;
        }
    }

    if (sc->stages > 1) explain_stage_busy(out, an, verbose);

    fprintf(out, "\nstep time estimate: %.4g s", an->step_s);
    double mfu = an->step_s > 0 ? an->model_flops_per_step / (an->step_s * an->peak_flops * plan->mesh.world) : 0;
    fprintf(out, " (pipeline %.4g s + gradient sync and optimizer %.4g s); model FLOPs utilisation %.1f%%\n",
            an->pipeline_s, an->step_s - an->pipeline_s, 100.0 * mfu);
    fprintf(out, "  per micro-batch through one chunk: forward %.4g s, backward %.4g s, stage hand-off %.4g s\n",
            an->t_fwd, an->t_bwd, an->t_p2p);
    explain_phases(out, an);
    if (verbose) explain_cost_terms(out, an);
    fprintf(out, "  communication per rank per step:");
    for (int a = 0; a < plan->mesh.naxes + plan->mesh.nderived; a++) {
        analyze_format_bytes(an->axis_wire[a], b1, sizeof b1);
        fprintf(out, " %s %s", plan->mesh.axes[a].name, b1);
    }
    analyze_format_bytes(an->pipeline_bytes, b1, sizeof b1);
    if (prog->nstages > 1) fprintf(out, ", pipeline messages %s", b1);
    fprintf(out, "\n");
}

/* The split's layer counts, "3 + 1". */
static void layer_counts(const Program *prog, char *buf, size_t size)
{
    size_t used = 0;
    for (int s = 0; s < prog->nstages && used < size; s++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", s ? " + " : "",
                                 (long long)(prog->stages[s].layers * plan_block_layers(prog->plan)));
}

/* Each stage's layers and busy time per step (its work items through the
 * cost model), then what `balance auto` found. */
static void explain_stage_busy(FILE *out, const Analysis *an, int verbose)
{
    const Program *prog = an->prog;
    const Layout *l = &prog->plan->layout;
    double items = (double)prog->schedule.micro_batches * (double)prog->schedule.chunks;
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        const StageCost *c = &an->stages[s];
        double item = cost_terms_total(&c->fwd) + cost_terms_total(&c->bwd);
        fprintf(out, "  stage %-3d layers", s);
        for (int k = 0; k < sp->chunks; k++) {
            int64_t first, last;
            program_chunk_span(prog->plan, sp, k, &first, &last);
            fprintf(out, " %lld..%lld", (long long)first, (long long)last);
        }
        fprintf(out, "%s%s: busy %.4g s per step (%.0f x %.4g s)\n", sp->has_embed ? " + embedding" : "",
                sp->has_head ? " + head" : "", items * item, items, item);
        if (s >= 7 && !verbose && prog->nstages > 9) {
            fprintf(out, "  ... %d more stages\n", prog->nstages - s - 1);
            break;
        }
    }
    if (!l->balanced || l->balance_layer_s <= 0) return;
    char counts[256];
    layer_counts(prog, counts, sizeof counts);
    fprintf(out, "  balanced: head on last stage costs %.2g layers, embedding on stage 0 %.2g; ",
            l->balance_head_s / l->balance_layer_s, l->balance_embed_s / l->balance_layer_s);
    if (l->balance_busy_s < l->balance_even_busy_s)
        fprintf(out, "layers %s, busiest stage %.4g s per step instead of %.4g s split evenly\n", counts,
                l->balance_busy_s, l->balance_even_busy_s);
    else
        fprintf(out, "the even split %s is already the least busy (%.4g s per step)\n", counts,
                l->balance_even_busy_s);
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(out, "\\u%04x", *s);
        else fputc(*s, out);
    }
    fputc('"', out);
}

void explain_json(FILE *out, const Analysis *an)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    fprintf(out, "{\n  \"schema\": \"parc.explain/1\",\n  \"plan\": ");
    json_str(out, plan->file);
    fprintf(out, ",\n  \"model\": {\"name\": ");
    json_str(out, plan->model.name);
    Arena text = {0};
    fprintf(out, ", \"parameters\": %lld, \"active_parameters\": %lld, \"layers\": %lld, \"config\": %s",
            (long long)prog->graph->params_total, (long long)prog->graph->params_active, (long long)plan->model.layers,
            plan_model_json(&text, plan));
    arena_free(&text);
    const MoeSpec *moe = &plan->model.block.moe;
    if (moe->experts) {
        ExpertParallel x = expert_parallel(prog);
        fprintf(out, ",\n    \"experts\": {\"experts\": %lld, \"top\": %lld, \"over\": ", (long long)moe->experts,
                (long long)moe->topk);
        if (x.axis >= 0) json_str(out, plan->mesh.axes[x.axis].name);
        else fputs("null", out);
        fprintf(out, ", \"per_rank\": %lld", (long long)(x.axis >= 0 ? x.local : moe->experts));
        if (x.axis >= 0)
            fprintf(out, ", \"exchange_bytes\": %.0f, \"exchanges_forward\": %d, \"exchanges_backward\": %d, "
                         "\"buffer_rows\": %lld, \"bound_rows\": %lld",
                    x.bytes, x.fwd, x.bwd, (long long)x.rows, (long long)x.bound);
        fprintf(out, ", \"capacity\": ");
        if (moe->capacity > 0) fprintf(out, "%.6g", moe->capacity);
        else fputs("null", out);
        fprintf(out, ", \"imbalance\": %.6g}", moe->imbalance);
    }
    fprintf(out, "},\n");
    fprintf(out, "  \"world\": %d,\n  \"gpu_memory_bytes\": %.0f,\n  \"gpu_reserve_bytes\": %.0f,\n", plan->mesh.world,
            plan->cluster.gpu_memory, plan->cluster.gpu_reserve);
    fprintf(out, "  \"mesh\": [");
    for (int a = 0; a < plan->mesh.naxes; a++) {
        char role[256];
        fprintf(out, "%s\n    {\"name\": ", a ? "," : "");
        json_str(out, plan->mesh.axes[a].name);
        fprintf(out, ", \"size\": %d, \"carries\": ", plan->mesh.axes[a].size);
        json_str(out, axis_role(prog, a, role, sizeof role));
        fprintf(out, ", \"inside_node\": %s, \"bytes_per_step\": %.0f, \"wire_bytes_per_step\": %.0f}",
                plan_axis_inside_node(plan, a) ? "true" : "false", an->axis_bytes[a], an->axis_wire[a]);
    }
    fprintf(out, "\n  ],\n  \"stages\": [");
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        const StageCost *sc = &an->stages[s];
        fprintf(out, "%s\n    {\"stage\": %d, \"ranks\": %lld, \"layers\": %d, \"embed\": %s, \"head\": %s, "
                     "\"parameters_held\": %lld, \"in_flight_peak\": %d,\n     \"memory\": {",
                s ? "," : "", s, (long long)stage_ranks(prog), (int)(sp->layers * plan_block_layers(plan)),
                sp->has_embed && prog->plan->model.has_embed ? "true" : "false",
                sp->has_head && prog->plan->model.has_head ? "true" : "false", (long long)sc->params_local,
                prog->schedule.peak_in_flight[s]);
        for (int k = 0; k < PRT_NCLASS; k++)
            fprintf(out, "%s\"%s\": %lld", k ? ", " : "", ledger_class_names[k], (long long)sc->ledger[k]);
        fprintf(out, ", \"total\": %lld, \"fits\": %s},\n", (long long)sc->total,
                plan_fits(&plan->cluster, (double)sc->total) ? "true" : "false");
        int64_t by[PRT_NCLASS];
        if (stage_experts_bytes(sp, by)) {
            fprintf(out, "     \"experts_memory\": {");
            for (int k = 0; k < PRT_NCLASS; k++)
                fprintf(out, "%s\"%s\": %lld", k ? ", " : "", ledger_class_names[k], (long long)by[k]);
            fprintf(out, "},\n");
        }
        fprintf(out, "     \"cpu_runtime_extra_workspace\": %lld, "
                     "\"host_pipeline_staging\": %lld, \"flops_per_step\": %.6g}",
                (long long)sc->cpu_widen, (long long)sc->host_staging, sc->flops_step);
    }
    fprintf(out, "\n  ],\n");
    fprintf(out, "  \"peak_memory_bytes\": %lld,\n  \"fits\": %s,\n", (long long)an->max_total,
            plan_fits(&plan->cluster, (double)an->max_total) ? "true" : "false");
    fprintf(out, "  \"pipeline\": {\"schedule\": \"%s\", \"stages\": %d, \"micro_batches\": %d, \"virtual_stages\": %d, "
                 "\"bubble_ideal\": %.6g, \"bubble_share\": %.6g},\n",
            schedule_kind_name(prog->schedule.kind), prog->schedule.stages, prog->schedule.micro_batches,
            prog->schedule.chunks, an->bubble_ideal, an->bubble_share);
    fprintf(out, "  \"phases_s\": {");
    for (int k = 0; k < ANALYZE_NPHASES; k++)
        fprintf(out, "%s\"%s\": %.9g", k ? ", " : "", analyze_phase_names[k], an->phase_s[k]);
    fprintf(out, "},\n  \"communication_hidden_s\": %.6g,\n", an->comm_hidden_s);
    fprintf(out, "  \"tensor_parallel_communication_s\": {\"exposed\": %.6g, \"hidden\": %.6g},\n", an->tp_comm_exposed_s,
            an->tp_comm_hidden_s);
    fprintf(out, "  \"mfu\": %.6g,\n", analyze_mfu(an));
    fprintf(out, "  \"flops_per_step\": %.6g,\n  \"model_flops_per_step\": %.6g,\n  \"step_time_s\": %.6g\n}\n",
            an->flops_per_step, an->model_flops_per_step, an->step_s);
}

static const char *dtype_name(int bytes) { return bytes == 2 ? "16-bit" : "32-bit"; }

void explain_collectives(FILE *out, const Analysis *an)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    char b1[64], b2[64];
    int opw = 14; /* the op column fits the longest name (mlp.experts.down.w) */
    for (int i = 0; i < an->nrows; i++)
        if ((int)strlen(an->rows[i].op) > opw) opw = (int)strlen(an->rows[i].op);
    for (int s = 0; s < prog->nstages; s++) {
        if (prog->nstages > 1) fprintf(out, "%sstage %d:\n", s ? "\n" : "", s);
        fprintf(out, "  %-9s %-*s %-15s %-5s %5s %12s %-6s %10s %6s %11s %-6s %s\n", "phase", opw, "op", "collective",
                "axis", "group", "elements", "dtype", "bytes/call", "calls", "bytes/step", "link", "rule");
        for (int i = 0; i < an->nrows; i++) {
            const CollRow *r = &an->rows[i];
            if (r->stage != s) continue;
            double bytes = (double)r->elems * r->elem_bytes;
            analyze_format_bytes(bytes, b1, sizeof b1);
            analyze_format_bytes(bytes * (double)r->calls, b2, sizeof b2);
            const char *axis = r->axis >= 0 ? plan->mesh.axes[r->axis].name : "-";
            fprintf(out, "  %-9s %-*s %-15s %-5s %5d %12lld %-6s %10s %6lld %11s %-6s %s\n", phase_names[r->phase],
                    opw, r->op, r->coll == COLL_SEND ? "send/recv" : coll_names[r->coll], axis, r->group,
                    (long long)r->elems, dtype_name(r->elem_bytes), b1, (long long)r->calls, b2,
                    r->inside_node ? "intra" : "inter", r->why);
        }
    }
    fprintf(out, "\ntotals per rank per step (stage %d, the busiest):\n", an->worst_stage);
    fprintf(out, "  %-6s %14s %14s\n", "axis", "buffer bytes", "on the wire");
    for (int a = 0; a < plan->mesh.naxes + plan->mesh.nderived; a++) {
        analyze_format_bytes(an->axis_bytes[a], b1, sizeof b1);
        analyze_format_bytes(an->axis_wire[a], b2, sizeof b2);
        fprintf(out, "  %-6s %14s %14s   %s\n", plan->mesh.axes[a].name, b1, b2,
                plan_axis_inside_node(plan, a) ? "inside a node" : "across nodes");
    }
    if (prog->nstages > 1) {
        analyze_format_bytes(an->pipeline_bytes, b1, sizeof b1);
        fprintf(out, "  %-6s %14s %14s   pipeline send/recv\n", "pp", b1, b1);
    }
    analyze_format_bytes(an->link_wire[0], b1, sizeof b1);
    analyze_format_bytes(an->link_wire[1], b2, sizeof b2);
    fprintf(out, "  links: inside nodes %s, across nodes %s\n", b1, b2);
    fprintf(out, "  bus factors (nccl-tests): all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n\n");
}

void explain_collectives_json(FILE *out, const Analysis *an)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    fprintf(out, "{\n  \"schema\": \"parc.collectives/1\",\n  \"collectives\": [");
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
        fprintf(out, "%s\n    {\"stage\": %d, \"phase\": \"%s\", \"op\": ", i ? "," : "", r->stage,
                phase_names[r->phase]);
        json_str(out, r->op);
        fprintf(out, ", \"tensor\": ");
        json_str(out, r->tensor);
        fprintf(out, ", \"collective\": \"%s\", \"axis\": ", r->coll == COLL_SEND ? "send/recv" : coll_names[r->coll]);
        json_str(out, r->axis >= 0 ? plan->mesh.axes[r->axis].name : "");
        fprintf(out, ", \"group\": %d, \"elements\": %lld, \"element_bytes\": %d, \"bytes_per_call\": %lld, "
                     "\"calls_per_step\": %lld, \"bytes_per_step\": %lld, \"bus_factor\": %.6g, \"inside_node\": %s, "
                     "\"rule\": ",
                r->group, (long long)r->elems, r->elem_bytes, (long long)(r->elems * r->elem_bytes),
                (long long)r->calls, (long long)(r->elems * r->elem_bytes * r->calls),
                r->coll == COLL_SEND ? 1.0 : cost_bus_factor(r->coll, r->group),
                r->inside_node ? "true" : "false");
        json_str(out, r->why);
        fprintf(out, "}");
    }
    fprintf(out, "\n  ],\n  \"totals\": {");
    for (int a = 0; a < plan->mesh.naxes + plan->mesh.nderived; a++) {
        fprintf(out, "%s\n    ", a ? "," : "");
        json_str(out, plan->mesh.axes[a].name);
        fprintf(out, ": {\"bytes_per_step\": %.0f, \"wire_bytes_per_step\": %.0f}", an->axis_bytes[a],
                an->axis_wire[a]);
    }
    fprintf(out, "\n  },\n  \"pipeline_bytes_per_step\": %.0f,\n  \"wire_inside_nodes\": %.0f,\n  "
                 "\"wire_across_nodes\": %.0f\n}\n",
            an->pipeline_bytes, an->link_wire[0], an->link_wire[1]);
}
