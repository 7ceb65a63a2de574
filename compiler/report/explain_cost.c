/*
 * explain_cost.c — the step time by phase (every `explain`) and each term of
 * the cost model behind it (`explain --verbose`): what was charged, at which
 * rate, with which stated efficiency.  Read from the Analysis only.
 */
#include "explain.h"

static void print_terms(FILE *out, const char *what, const CostTerms *t, double times)
{
    fprintf(out, "    %-26s %.4g s = GEMM %.4g s + attention %.4g s + memory-bound %.4g s + communication %.4g s\n",
            what, times * cost_terms_total(t), times * t->gemm_s, times * t->attention_s, times * t->stream_s,
            times * t->comm_s);
}

static double rate(double amount, double secs) { return secs > 0 ? amount / secs : 0; }

/* The tensor axis's share of the communication line: what of its
 * collectives is exposed and what the input gradients' hide under their
 * weight gradients (overlap_tp.c). */
static void explain_tp_comm(FILE *out, const Analysis *an)
{
    const Program *prog = an->prog;
    const Layout *l = &prog->plan->layout;
    if (plan_axis_size(prog->plan, prog->tp_axis) <= 1) return;
    const char *scatter = l->sp_axis >= 0 ? "reduce-scatter" : "all-reduce";
    if (l->tp_overlap_off)
        fprintf(out, "  tensor-parallel communication: %.4g s exposed, %.4g s hidden (`tp_overlap off;` at %s:%d: "
                     "each input gradient's %s blocks before its weight gradient)\n",
                an->tp_comm_exposed_s, an->tp_comm_hidden_s, l->tp_overlap_loc.file, l->tp_overlap_loc.line, scatter);
    else
        fprintf(out, "  tensor-parallel communication: %.4g s exposed, %.4g s hidden (each column-parallel linear's "
                     "input-gradient %s runs under its weight-gradient GEMM in the backward; the forward's and "
                     "the rest block)\n",
                an->tp_comm_exposed_s, an->tp_comm_hidden_s, scatter);
}

static void explain_comm(FILE *out, const Analysis *an);

/* The communication line's last words: what of the rest blocks. */
static int ring(const Analysis *an)
{
    const Layout *l = &an->prog->plan->layout;
    return l->cp_comm == CP_COMM_RING && l->dim_axis[DIM_SEQ] >= 0;
}
static const char *others(const Analysis *an)
{
    if (an->tp_comm_hidden_s > 0)
        return ring(an) ? "the tensor axis's input gradients below; ring attention's shifts under its steps; every "
                          "other collective finishes before the next op"
                        : "the tensor axis's input gradients below; every other collective finishes before the next op";
    return ring(an) ? "ring attention's shifts under its steps; every other collective finishes before the next op"
                    : "every other collective finishes before the next op";
}

void explain_phases(FILE *out, const Analysis *an)
{
    fprintf(out, "  by phase:");
    for (int k = 0; k < ANALYZE_NPHASES; k++)
        fprintf(out, "%s %s %.4g s", k ? "," : "", analyze_phase_names[k], an->phase_s[k]);
    explain_comm(out, an);
    explain_tp_comm(out, an);
}

/* The communication line: exposed and hidden, and what hides. */
static void explain_comm(FILE *out, const Analysis *an)
{
    const Layout *l = &an->prog->plan->layout;
    if (l->grad_overlap_off) {
        const StageCost *end = &an->stages[an->tail_stage];
        fprintf(out, "\n  communication: %.4g s exposed, %.4g s hidden (`grad_overlap off;` at %s:%d: the gradient "
                     "collectives block where they are issued: the gradient sync is %.4g s of it; every other "
                     "collective finishes before the next op)\n",
                an->phase_s[APHASE_COMM], an->comm_hidden_s, l->grad_overlap_loc.file, l->grad_overlap_loc.line, end->sync_s);
        return;
    }
    const StageCost *slow = &an->stages[an->slow_stage];
    const Program *prog = an->prog;
    if (plan_axis_size(prog->plan, prog->plan->layout.data_group) <= 1) { /* no gradient sync */
        fprintf(out, "\n  communication: %.4g s exposed, %.4g s hidden (no data axis, so no gradient sync; %s)\n",
                an->phase_s[APHASE_COMM], an->comm_hidden_s,
                an->tp_comm_hidden_s > 0 || ring(an) ? others(an) : "every collective finishes before the next op");
        return;
    }
    double share = cost_hidden_share(&prog->plan->cluster);
    if (share < 1) /* `overlap` */
        fprintf(out, "\n  overlap: of the started collectives' time under compute, %.3g is hidden; the rest is the "
                     "ranks' own (the cluster's `overlap`) and counts as exposed",
                share);
    if (l->zero_stage >= 3 && slow->fwd_hidden_chunk_s > 0) { /* overlap_gather.c */
        fprintf(out, "\n  communication: %.4g s exposed, %.4g s hidden (each gradient's reduce-scatter runs under the "
                     "rest of its layer's, the head's or the embedding's backward; each layer's weight gathers run "
                     "under the layer before it in the pass, the first layer's exposed: %.4g s hidden in a forward "
                     "and %.4g s in a backward through one chunk, every micro-batch; %s)\n",
                an->phase_s[APHASE_COMM], an->comm_hidden_s, slow->fwd_hidden_chunk_s, slow->bwd_hidden_chunk_s,
                others(an));
        return;
    }
    if (l->zero_stage >= 2) {
        fprintf(out, "\n  communication: %.4g s exposed, %.4g s hidden (each gradient's reduce-scatter runs under the "
                     "rest of its layer's, the head's or the embedding's backward, every micro-batch; %s)\n",
                an->phase_s[APHASE_COMM], an->comm_hidden_s, others(an));
        return;
    }
    fprintf(out, "\n  communication: %.4g s exposed, %.4g s hidden (gradient buckets run under the last "
                 "micro-batch's backward; %s)\n",
            an->phase_s[APHASE_COMM], an->comm_hidden_s, others(an));
}

void explain_cost_terms(FILE *out, const Analysis *an)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    const Cluster *cl = &plan->cluster;
    const Efficiency *e = &cl->eff;
    const StageCost *slow = &an->stages[an->slow_stage], *end = &an->stages[an->tail_stage];
    fprintf(out, "  cost model (docs/cost-model.md), efficiencies %s%s", e->name ? e->name : "generic",
            e->loc.file ? "" : " (the defaults: the plan names none)");
    if (e->loc.file) fprintf(out, " (%s:%d)", e->loc.file, e->loc.line);
    fprintf(out, ":\n");
    fprintf(out, "    GEMM           2 m n k FLOPs at %.4g FLOP/s x efficiency by the smallest of m, n, k:",
            an->peak_flops);
    for (int c = 0; c < PARC_GEMM_CLASSES; c++)
        fprintf(out, "%s %s (>= %lld) %.3g", c ? "," : "", gemm_class_names[c], (long long)gemm_class_min_dim[c],
                e->gemm[c]);
    if (e->gemm16[0] > 0 && plan->train.precision != PREC_FP32)
        for (int c = 0; c < PARC_GEMM_CLASSES; c++)
            fprintf(out, "%s %s %.3g", c ? "," : "; this 16-bit plan's (gemm16):", gemm_class_names[c], e->gemm16[c]);
    fprintf(out, "\n    attention      its matmul FLOPs at %.4g x %.3g; stored probabilities: the score matrix "
                 "streamed as memory-bound", an->peak_flops, e->attention);
    if (e->scores > 0) fprintf(out, ", at %.4g B/s x %.3g (scores)", cl->hbm_bandwidth, e->scores);
    fprintf(out, "; flash (or recomputed): only qkv, output and their gradients through memory, score tiles on chip ");
    if (e->tiles > 0 || e->scores > 0)
        fprintf(out, "at %.4g B/s x %.3g (%s)\n", cl->hbm_bandwidth, e->tiles > 0 ? e->tiles : e->scores,
                e->tiles > 0 ? "tiles" : "scores: no `tiles`");
    else
        fprintf(out, "inside the fused kernel's FLOP rate\n");
    const double *s16 = e->stream16;
    if (e->norm > 0 || e->softmax > 0 || e->optimizer > 0 || s16[0] > 0) {
        fprintf(out, "    memory-bound   bytes read and written at %.4g B/s x %.3g (embedding, residual adds, "
                     "biases), x %.3g (norms), x %.3g (GELU, SwiGLU), x %.3g (softmax: the loss's%s), x %.3g (optimizer); "
                     "over 16-bit tensors x %.3g",
                cl->hbm_bandwidth, e->hbm, e->norm > 0 ? e->norm : e->hbm, e->activation,
                e->softmax > 0 ? e->softmax : e->hbm, e->scores > 0 ? "" : " and attention's scores",
                e->optimizer > 0 ? e->optimizer : e->hbm, s16[0] > 0 ? s16[0] : 1.0);
        if (s16[1] != s16[0] || s16[2] != s16[0] || s16[3] != s16[0] || s16[4] != s16[0]) /* by class */
            fprintf(out, " (streams), x %.3g (norms), x %.3g (GELU, SwiGLU), x %.3g (softmax), x %.3g (scores)",
                    s16[1] > 0 ? s16[1] : 1.0, s16[2] > 0 ? s16[2] : 1.0, s16[3] > 0 ? s16[3] : 1.0,
                    s16[4] > 0 ? s16[4] : 1.0);
        fprintf(out, " more\n");
    } else
        fprintf(out, "    memory-bound   bytes read and written at %.4g B/s x %.3g (norms, softmax, embedding, loss, "
                     "optimizer), x %.3g (GELU, SwiGLU)\n",
                cl->hbm_bandwidth, e->hbm, e->activation);
    fprintf(out, "    collectives    steps x latency + (bytes + half-bandwidth size) x bus factor / (link x efficiency): "
                 "intra %.4g B/s x %.3g, %.3g s a step, half at %.4g B; inter %.4g B/s x %.3g, %.3g s a step, half at %.4g B; "
                 "started ones hidden under compute at %.3g of their time (overlap)\n",
            cl->intra_bw, e->bus[0], cl->intra_latency, e->half_bytes[0], cl->inter_bw, e->bus[1], cl->inter_latency,
            e->half_bytes[1], cost_hidden_share(cl));
    fprintf(out, "  terms on stage %d (its chunks are the slowest), one micro-batch through one chunk:\n",
            an->slow_stage);
    print_terms(out, "forward", &slow->fwd, 1);
    print_terms(out, "backward", &slow->bwd, 1);
    const CostTerms *f = &slow->fwd, *b = &slow->bwd;
    double gf = f->gemm_flops + b->gemm_flops, gs = f->gemm_s + b->gemm_s;
    fprintf(out, "    GEMMs          %.4g FLOP at %.4g FLOP/s (%.1f%% of peak); by class:", gf, rate(gf, gs),
            100.0 * rate(gf, gs) / an->peak_flops);
    for (int c = 0; c < PARC_GEMM_CLASSES; c++)
        fprintf(out, " %s %.3g", gemm_class_names[c], f->gemm_class_flops[c] + b->gemm_class_flops[c]);
    double as = f->attention_s + b->attention_s, af = f->attention_flops + b->attention_flops;
    double ss = f->stream_s + b->stream_s, sb = f->stream_bytes + b->stream_bytes;
    fprintf(out, "\n    attention      %.4g FLOP in %.4g s; memory-bound %.4g B in %.4g s\n", af, as, sb, ss);
    fprintf(out, "  per step on stage %d: gradient sync %.4g s (%.4g B); optimizer %.4g B in %.4g s\n", an->tail_stage,
            end->sync.comm_s, end->sync.comm_bytes, end->optim_bytes, end->optim_s);
    double items = (double)prog->schedule.micro_batches * (double)prog->schedule.chunks;
    fprintf(out, "  pipeline: %.0f work items x (forward %.4g s + backward %.4g s) = %.4g s busy; simulated %.4g s "
                 "(hand-off %.4g s), so %.4g s bubble\n",
            items, cost_terms_total(f), cost_terms_total(b), items * (cost_terms_total(f) + cost_terms_total(b)),
            an->pipeline_s, an->t_p2p, an->phase_s[APHASE_BUBBLE]);
}
