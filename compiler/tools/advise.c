/*
 * advise.c — what the driver tells a user about an analyzed plan beyond its
 * report: tensor-parallel groups that cross nodes, and, for a plan that does
 * not fit, the cheapest changes that would.
 *
 * Each candidate change is a copy of the plan as written with one layout or
 * training field changed, run through the pass table again (the driver's
 * passes_run_plan, balance included): the numbers are those the changed
 * plan's own `explain` gives.  A candidate is lowered only when advise_variant_valid
 * holds for it, so lowering it has nothing to report; any report there is a
 * compiler bug, never hidden.
 */
#include "advise.h"
#include "tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ variants */

int advise_variant_valid(const Plan *p)
{
    const Layout *l = &p->layout;
    const Train *t = &p->train;
    if (l->zero_stage < 0 || l->zero_stage > 3) return 0;
    if (l->zero_stage > 0 && !plan_zero_axis_ok(p, l->zero_axis)) return 0;
    if (l->recompute < RECOMPUTE_NONE || l->recompute > RECOMPUTE_FULL) return 0;
    int64_t dp = plan_dp(p);
    if (t->micro_batch < 1 || dp < 1 || t->batch % (t->micro_batch * dp) != 0) return 0;
    if (t->micro_batches != t->batch / (t->micro_batch * dp)) return 0;
    if (l->pp_axis >= 0) {
        if (l->schedule == SCHED_1F1B && t->micro_batches < l->stages) return 0;
        if (l->schedule == SCHED_INTERLEAVED && t->micro_batches % l->stages != 0) return 0;
    }
    if (l->pipeline_scatter && !plan_pipeline_scatter_fits(p)) return 0;
    return 1;
}

typedef enum { CHANGE_ZERO, CHANGE_RECOMPUTE, CHANGE_HALVE_MICRO } ChangeKind;

typedef struct Change {
    ChangeKind kind;
    int arg;
    const char *what;
} Change;

static void apply_change(Plan *p, const Change *c)
{
    switch (c->kind) {
    case CHANGE_ZERO:
        p->layout.zero_stage = c->arg;
        p->layout.zero_axis = p->layout.data_group; /* the data axis, with a context axis the data group */
        break;
    case CHANGE_RECOMPUTE: p->layout.recompute = (RecomputeKind)c->arg; break;
    case CHANGE_HALVE_MICRO:
        p->train.micro_batch /= 2;
        p->train.micro_batches *= 2;
        break;
    }
}

/* The candidate changes of a plan, cheapest kinds first; returns how many. */
static int list_changes(Arena *arena, const Plan *plan, Change *out, int max)
{
    /* ZeRO over the data group, named as the plan would write it (`zero 1 over dp cp`) */
    int n = 0, group = plan->layout.data_group;
    if (plan_axis_size(plan, group) > 1)
        for (int z = plan->layout.zero_stage + 1; z <= 3 && n < max; z++) {
            const char *what = arena_printf(arena, "zero %d over", z);
            for (int a = 0; a < plan->mesh.naxes; a++)
                if (plan_axis_parts(plan, group) >> a & 1) what = arena_printf(arena, "%s %s", what, plan->mesh.axes[a].name);
            out[n++] = (Change){CHANGE_ZERO, z, what};
        }
    static const char *const recompute_what[RECOMPUTE_COUNT] = {
#define ADVISE_RECOMPUTE_(kind, word) "recompute " word,
        PARC_RECOMPUTE(ADVISE_RECOMPUTE_)
#undef ADVISE_RECOMPUTE_
    };
    for (int r = plan->layout.recompute + 1; r < RECOMPUTE_COUNT && n < max; r++)
        out[n++] = (Change){CHANGE_RECOMPUTE, r, recompute_what[r]};
    if (plan->train.micro_batch % 2 == 0 && n < max)
        out[n++] = (Change){CHANGE_HALVE_MICRO, 0, "micro_batch halved"};
    return n;
}

/* The analysis of the plan as written (`base`) with one change, or NULL when
 * the changed plan breaks a rule (it is then not a candidate). */
static const Analysis *analyze_variant(Arena *arena, const Compilation *base, const Change *c)
{
    Plan *p = arena_alloc(arena, sizeof(Plan));
    *p = base->written;
    apply_change(p, c);
    if (!advise_variant_valid(p)) return NULL;
    return passes_variant(arena, base, p, c->what);
}

/* ------------------------------------------------------------ advice */

static void warn_tensor_axis_across_nodes(const Analysis *an)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    for (int a = 0; a < plan->mesh.naxes; a++) {
        if (plan_axis_inside_node(plan, a) || plan->mesh.axes[a].size <= 1) continue;
        if (a != prog->tp_axis && a != plan->layout.sp_axis) continue;
        char wire[64], bw[64];
        analyze_format_bytes(an->axis_wire[a], wire, sizeof wire);
        snprintf(bw, sizeof bw, "%.4g GB", plan->cluster.inter_bw / 1e9);
        diag_warning(plan->mesh.axes[a].loc,
                     "put the tensor axis last in `mesh { ... }` so its groups are GPUs of one node, and let "
                     "pipeline or data parallelism cross nodes",
                     "tensor-parallel axis `%s` spans nodes: its groups push %s per step over the %s/s link between "
                     "nodes",
                     plan->mesh.axes[a].name, wire, bw);
    }
}

/* A hint being written: appends stop at the buffer's end. */
typedef struct Hint {
    char text[4096];
    size_t used;
} Hint;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void hint_add(Hint *h, const char *fmt, ...)
{
    if (h->used >= sizeof h->text) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(h->text + h->used, sizeof h->text - h->used, fmt, ap);
    va_end(ap);
    if (n > 0) h->used += (size_t)n;
}

static double model_states(const StageCost *sc)
{
    return (double)(sc->ledger[PRT_WEIGHTS] + sc->ledger[PRT_GRADS] + sc->ledger[PRT_MASTER] + sc->ledger[PRT_OPTIM]);
}

/* The breakdown of the worst stage: bytes per class and per parameter. */
static void hint_breakdown(Hint *h, const StageCost *sc)
{
    char buf[64];
    hint_add(h, "per GPU:");
    for (int k = 0; k < PRT_NCLASS; k++) {
        if (!sc->ledger[k]) continue;
        analyze_format_bytes((double)sc->ledger[k], buf, sizeof buf);
        hint_add(h, " %s %s%s", ledger_class_names[k], buf, k + 1 < PRT_NCLASS ? "," : "");
    }
    if (sc->params_local > 0) {
        double P = (double)sc->params_local, states = model_states(sc);
        analyze_format_bytes(states, buf, sizeof buf);
        hint_add(h,
                 "\n        model states: %.4g bytes per parameter (weights %.3g, gradients %.3g, fp32 master %.3g, "
                 "optimizer moments %.3g) x %.4g B parameters = %s",
                 states / P, (double)sc->ledger[PRT_WEIGHTS] / P, (double)sc->ledger[PRT_GRADS] / P,
                 (double)sc->ledger[PRT_MASTER] / P, (double)sc->ledger[PRT_OPTIM] / P, P / 1e9, buf);
    }
}

/* Lowering work the layout advice may spend, in layers lowered. */
#define ADVISE_LOWERING_BUDGET 40000

/* A copy of plan on 2^k times its GPUs of the same kind: one node grows to
 * 8 GPUs, then nodes are added where the cluster has a link between them.
 * NULL when it cannot grow that far. */
static Plan *grown_cluster(Arena *arena, const Plan *plan, int k)
{
    Plan *p = arena_alloc(arena, sizeof(Plan));
    *p = *plan;
    Cluster *c = &p->cluster;
    for (int i = 0; i < k; i++) {
        if (c->nodes == 1 && c->gpus_per_node < 8 && c->intra_bw > 0) c->gpus_per_node *= 2;
        else if (c->inter_bw > 0) c->nodes *= 2;
        else return NULL;
    }
    return p;
}

/* When no change of the plan's own mesh fits: the fastest layout of these
 * GPUs that fits, else of the fewest more GPUs (up to 64 times as many), each
 * as its own `explain` reports it (search_best_fit). */
static void hint_layouts(Arena *arena, Hint *h, const Plan *plan, int verify)
{
    char buf[64];
    SearchFit fit;
    /* Bounded: a plan of thousands of layers on thousands of GPUs would
     * otherwise lower thousands of candidates (about 0.5 s of work here for 96 layers). */
    int64_t budget = ADVISE_LOWERING_BUDGET, tried = 0;
    if (plan->model.block.moe.experts) {
        hint_add(h, "\n        a mixture of experts trains on one rank for now: no layout over more GPUs is planned yet "
                    "(shrink micro_batch, seq or the experts)");
        return;
    }
    for (int k = 0; k <= 6; k++) {
        const Plan *p = k == 0 ? plan : grown_cluster(arena, plan, k);
        if (!p) break;
        int found = search_best_fit(p, &fit, &budget, verify);
        tried += fit.tried;
        if (!found && fit.stopped) {
            hint_add(h, "\n        no layout that fits among the %lld the advice tried within its budget "
                        "(`parc search` ranks every layout)", (long long)tried);
            return;
        }
        if (!found) continue;
        analyze_format_bytes((double)fit.peak, buf, sizeof buf);
        int gpus = p->cluster.nodes * p->cluster.gpus_per_node;
        char share[96];
        int used = snprintf(share, sizeof share, "%.1f%% with the reserve",
                            100.0 * plan_memory_share(&p->cluster, (double)fit.peak));
        if (fit.crowded)
            snprintf(share + used, sizeof share - (size_t)used, "; none that fits takes %.0f%% or less",
                     100 * PARC_MEMORY_WARN_SHARE);
        if (k == 0)
            hint_add(h, "\n        these %d GPUs as %s -> %s per GPU (fits, %s; `parc search` ranks every layout)", gpus,
                     fit.layout, buf, share);
        else
            hint_add(h, "\n        no layout of these GPUs fits; on %d node%s of %d GPUs: %s -> %s per GPU (fits, %s)",
                     p->cluster.nodes, p->cluster.nodes == 1 ? "" : "s", p->cluster.gpus_per_node, fit.layout, buf,
                     share);
        return;
    }
    hint_add(h, "\n        no layout of up to 64 times these GPUs fits (tp, pp, dp with ZeRO and recompute): shrink "
                "micro_batch or seq");
}

/* What a candidate change must reach: the GPU (ledger plus reserve within
 * its memory), or the share below which a fitting plan is not warned about. */
typedef enum { ROOM_FIT, ROOM_UNWARNED } Room;

static int has_room(const Cluster *cl, double ledger_bytes, Room room)
{
    if (!plan_fits(cl, ledger_bytes)) return 0;
    return room == ROOM_FIT || plan_memory_share(cl, ledger_bytes) <= PARC_MEMORY_WARN_SHARE;
}

/* One line per candidate change, each marked when it reaches `room`; returns
 * how many do. */
static int hint_changes(Arena *arena, Hint *h, const Compilation *c, Room room)
{
    const Plan *plan = &c->written;
    Change changes[8];
    int nchanges = list_changes(arena, plan, changes, 8);
    int reached = 0;
    char buf[64];
    for (int i = 0; i < nchanges; i++) {
        const Analysis *v = analyze_variant(arena, c, &changes[i]);
        if (!v) continue;
        analyze_format_bytes((double)v->max_total, buf, sizeof buf);
        int ok = has_room(&plan->cluster, (double)v->max_total, room);
        reached += ok;
        if (room == ROOM_FIT)
            hint_add(h, "\n        %-22s -> %s per GPU%s", changes[i].what, buf,
                     ok ? (reached == 1 ? " (fits: the cheapest change)" : " (fits)") : "");
        else
            hint_add(h, "\n        %-22s -> %s per GPU, %.1f%% with the reserve%s", changes[i].what, buf,
                     100.0 * plan_memory_share(&plan->cluster, (double)v->max_total),
                     ok && reached == 1 ? " (the cheapest change below the warning)" : "");
    }
    return reached;
}

/* A plan that fits with less than PARC_MEMORY_WARN_SHARE of the GPU to
 * spare: a warning naming the margin, and the changes that leave more. */
static void warn_little_room(Arena *arena, const Compilation *c)
{
    const Analysis *an = c->analysis;
    const Plan *plan = an->prog->plan;
    const Cluster *cl = &plan->cluster;
    double share = plan_memory_share(cl, (double)an->max_total);
    Hint *h = arena_alloc(arena, sizeof(Hint));
    hint_add(h, "above %.0f%% a run may still run out of memory (the reserve is an estimate); changes that use "
                "less:", 100 * PARC_MEMORY_WARN_SHARE);
    if (!hint_changes(arena, h, c, ROOM_UNWARNED))
        hint_add(h, "\n        none of these is below %.0f%%: more GPUs (`parc search` on a larger cluster), or "
                    "this GPU's own `reserve` where it is known to be smaller",
                 100 * PARC_MEMORY_WARN_SHARE);
    char ledger[64], reserve[64], cap[64], left[64], who[48] = "each rank";
    analyze_format_bytes((double)an->max_total, ledger, sizeof ledger);
    analyze_format_bytes(cl->gpu_reserve, reserve, sizeof reserve);
    analyze_format_bytes(cl->gpu_memory, cap, sizeof cap);
    analyze_format_bytes(plan_usable_memory(cl) - (double)an->max_total, left, sizeof left);
    if (an->prog->nstages > 1) snprintf(who, sizeof who, "a rank of stage %d", an->worst_stage);
    SrcLoc at = cl->memory_loc.file ? cl->memory_loc : cl->loc;
    diag_warning(at, h->text, "%s uses %.1f%% of the %s GPU (%s ledger + %s reserve), which leaves %s", who,
                 100.0 * share, cap, ledger, reserve, left);
}

int advise_plan(Arena *arena, const Compilation *c)
{
    const Analysis *an = c->analysis;
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    const Cluster *cl = &plan->cluster;
    warn_tensor_axis_across_nodes(an);
    if (cl->gpu_memory <= 0) return 0;
    if (plan_fits(cl, (double)an->max_total)) {
        if (plan_memory_share(cl, (double)an->max_total) > PARC_MEMORY_WARN_SHARE) warn_little_room(arena, c);
        return 0;
    }

    Hint *h = arena_alloc(arena, sizeof(Hint));
    hint_breakdown(h, &an->stages[an->worst_stage]);
    if (!hint_changes(arena, h, c, ROOM_FIT)) hint_layouts(arena, h, &c->written, c->verify);
    char need[64], usable[64], cap[64], reserve[64];
    analyze_format_bytes((double)an->max_total, need, sizeof need);
    analyze_format_bytes(plan_usable_memory(cl), usable, sizeof usable);
    analyze_format_bytes(cl->gpu_memory, cap, sizeof cap);
    analyze_format_bytes(cl->gpu_reserve, reserve, sizeof reserve);
    if ((double)an->max_total <= cl->gpu_memory) /* the reserve alone decides */
        hint_add(h, "\n        without the reserve it would fit: where this GPU's context and buffers are known to "
                    "take less than %s, `gpu { reserve ...; }` states it",
                 reserve);
    char holds[256];
    if (plan_usable_memory(cl) <= 0)
        snprintf(holds, sizeof holds, "nothing for it: its %s are within the %s reserve", cap, reserve);
    else if (cl->gpu_reserve > 0)
        snprintf(holds, sizeof holds, "%s for it (%s less a %s reserve)", usable, cap, reserve);
    else snprintf(holds, sizeof holds, "%s", cap);
    SrcLoc at = cl->memory_loc.file ? cl->memory_loc : cl->loc;
    if (prog->nstages > 1)
        diag_error(at, h->text, "the plan does not fit: a rank of stage %d needs %s, the GPU holds %s",
                   an->worst_stage, need, holds);
    else
        diag_error(at, h->text, "the plan does not fit: each rank needs %s, the GPU holds %s", need, holds);
    return 1;
}
