/*
 * balance.c — the pass after front: with `balance auto;` the pipeline's
 * stage split of least estimated busy time.
 *
 * Takes the checked Plan with check's even split (where the layers do not
 * divide by the stages, the first stages hold one more) and the analysis of
 * that plan, which the driver lowers through the pass table (passes.c,
 * run_balance).  Reads off its instructions, through the cost
 * model (cost.c), what one micro-batch costs forward and backward: one layer
 * (the block sequences), and each stage's work besides its layers (the
 * embedding on the first, the head and the loss on the last, its pipeline
 * hand-offs).  A stage's busy time per step is micro-batches x (its layers x
 * one layer + its own work); the gradient sync and optimizer after the
 * pipeline drains are left out, as they do not hold up the other stages.
 *
 * Chooses, among the splits that give every stage at least one layer, one
 * whose busiest stage is least busy (layers handed out one at a time to the
 * stage they delay least).  When that is no less busy than the even split,
 * the even split stays: ties go to the even split.
 *
 * Guarantees: chunk_first / chunk_layers cover every layer exactly once in
 * stage order (what check guarantees of any split); Layout.balanced and the
 * balance_* figures say what was found, for explain.  Without `balance auto`
 * it changes nothing.
 */
#include "analyze.h"

#include <stdlib.h>

/* The cost of one run of a sequence of stage sp: seconds, by the cost model. */
static double seq_seconds(const Program *prog, const StageProgram *sp, SeqKind q)
{
    CostTerms t = {0};
    const Seq *seq = &sp->seq[q];
    for (int i = 0; i < seq->n; i++)
        if (seq->ins[i].phase != PHASE_PIPELINE) cost_instr(prog, &seq->ins[i], 1.0, &t);
    return cost_terms_total(&t);
}

/* Busy time per step of a stage holding n layers. */
static double stage_busy(double micro, double own, double layer, int n) { return micro * (own + n * layer); }

int balance_wanted(const Plan *plan) { return plan->layout.balance == BALANCE_AUTO && plan->layout.stages >= 2; }

void balance_plan(Arena *arena, Plan *plan, const Analysis *an)
{
    Layout *l = &plan->layout;
    PARC_ASSERT(balance_wanted(plan));
    const Program *prog = an->prog;

    int S = prog->nstages;
    const StageProgram *first = &prog->stages[0];
    double layer = seq_seconds(prog, first, SEQ_BLOCK_FWD) + seq_seconds(prog, first, SEQ_BLOCK_BWD);
    double micro = (double)prog->schedule.micro_batches;
    double *own = arena_alloc(arena, sizeof(double) * (size_t)S);
    int *n = arena_alloc(arena, sizeof(int) * (size_t)S);
    double even_busy = 0;
    for (int s = 0; s < S; s++) {
        const StageProgram *sp = &prog->stages[s];
        double chunk = cost_terms_total(&an->stages[s].fwd) + cost_terms_total(&an->stages[s].bwd);
        own[s] = chunk - sp->layers * layer;
        if (own[s] < 0) own[s] = 0;
        double b = stage_busy(micro, own[s], layer, sp->layers);
        if (b > even_busy) even_busy = b;
        if (sp->has_embed)
            l->balance_embed_s = seq_seconds(prog, sp, SEQ_EMBED_FWD) + seq_seconds(prog, sp, SEQ_EMBED_BWD);
        if (sp->has_head) l->balance_head_s = seq_seconds(prog, sp, SEQ_HEAD_FWD) + seq_seconds(prog, sp, SEQ_HEAD_BWD);
        n[s] = 1;
    }
    /* the program's unit is a block of N layers (`every N`): whole blocks move */
    int64_t N = plan_block_layers(plan);
    l->balance_layer_s = layer / (double)N;
    l->balance_even_busy_s = l->balance_busy_s = even_busy;
    l->balanced = 1;

    /* one layer at a time to the stage it delays least (the lower stage on a tie) */
    int64_t left = plan->model.layers / N - S;
    for (; left > 0; left--) {
        int best = 0;
        double best_t = stage_busy(micro, own[0], layer, n[0] + 1);
        for (int s = 1; s < S; s++) {
            double t = stage_busy(micro, own[s], layer, n[s] + 1);
            if (t < best_t) best = s, best_t = t;
        }
        n[best]++;
    }
    double busy = 0;
    for (int s = 0; s < S; s++) {
        double b = stage_busy(micro, own[s], layer, n[s]);
        if (b > busy) busy = b;
    }
    if (!(busy < even_busy * (1.0 - 1e-9))) return; /* no better than even: keep it */
    int64_t at = 0;
    for (int s = 0; s < S; s++) {
        l->chunk_first[s] = (int)(at * N);
        l->chunk_layers[s] = (int)(n[s] * N);
        at += n[s];
    }
    PARC_ASSERT(at * N == plan->model.layers);
    l->balance_busy_s = busy;
}
