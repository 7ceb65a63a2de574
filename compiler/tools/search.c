/*
 * search.c — `parc search PLAN [--top K] [--json] [-o DIR]`: the layouts of
 * a plan's model on its cluster at its global batch, ranked by the cost
 * model.
 *
 * The space: every dp x tp x pp factorization of the cluster's GPUs (tp a
 * divisor of the GPUs in a node, so its groups stay inside one; mesh order
 * pp, dp, tp), each pipeline schedule (GPipe, 1F1B, interleaved with every
 * virtual-stage count that divides the layers), ZeRO 0-3 over the data
 * axis, sequence parallelism over tp, recompute none / selective / full,
 * every micro-batch size dividing the per-rank batch up to 16, for a
 * mixture of experts its experts whole on every rank or split over dp
 * (expert parallelism) where they divide, and
 * for a long sequence (SEARCH_CP_MIN_SEQ tokens and more) a context axis
 * (seq -> cp, mesh order pp, dp, cp, tp) of every size that leaves each rank
 * SEARCH_CP_MIN_CHUNK tokens at least, in both forms: the all-gather and
 * ring attention (either with the load-balanced split where the model is
 * causal and seq divides by 2 cp).
 *
 * Every layout of the space is first estimated in closed form
 * (search_estimate.c); those estimated to need far more memory than the
 * GPU has are left out, the rest are lowered exactly in order of estimated
 * step time until the top K x 4 that fit are known, and ranked by their
 * exact figures.  `--exhaustive` lowers the whole space instead (the test
 * that the prefilter's top K equals the exhaustive one compares the two).
 *
 * Each candidate lowered is written as .par text (plan_write.c) and goes through
 * the same passes as `parc explain` would take it: check (its rules prune:
 * divisibility, schedule constraints), expand, lower, analyze; a candidate
 * whose busiest rank does not fit (plan_fits: its ledger plus the cluster's
 * reserve within the GPU's memory) is pruned too.  So every plan
 * the search prints or writes passes check and explains to the printed
 * figures: they are that plan's own analysis.
 */
#include "passes.h"
#include "plan_write.h"
#include "report_html.h"
#include "search.h"
#include "tools.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Its figures, copied out of its analysis (the arena is freed). */
typedef struct Result {
    Layout1 l;
    double step_s, mfu, bubble, pipeline_s;
    double phase[ANALYZE_NPHASES];
    double link_wire[2], pipeline_bytes;
    int64_t mem[PRT_NCLASS], peak;
} Result;

typedef struct Search {
    const Plan *base;
    int verify;
    int rewind;       /* after each candidate go back to `mark` (search_best_fit), not diag_reset */
    int64_t *budget;  /* search_best_fit: lowering work left (layers); NULL: unbounded */
    int stopped;      /* the budget ran out */
    DiagMark mark;
    int64_t considered, pruned_check, pruned_memory;
    Result *res;
    int nres, cap;
    /* the prefilter (search_main without --exhaustive): enumerate only
     * collects the space; search_prefiltered lowers its best estimated */
    int collect;
    Layout1 *space;
    int64_t nspace, space_cap;
    int64_t lowered;          /* layouts lowered exactly */
    int64_t estimated_unfit;  /* left out by the memory estimate */
    int64_t own_estimate_rank;/* the plan's own layout by the estimate, 1-based; 0 when not in the space */
    double share_min;         /* the least exact step / estimated step over the ranked layouts (0: none yet) */
} Search;

/* Context parallelism is tried from this sequence length on (Llama 3 and
 * Megatron-LM split the sequence for contexts of 8K tokens and more), and
 * down to chunks of this many tokens a rank. */
#define SEARCH_CP_MIN_SEQ 8192
#define SEARCH_CP_MIN_CHUNK 1024

static int layout_cp(const Layout1 *l) { return l->cp > 1 ? l->cp : 1; }

/* The base plan with layout l: mesh pp x dp x cp x tp (size-1 axes left
 * out), the model's dims mapped onto them. */
static void apply_layout(const Plan *base, const Layout1 *l, Plan *p)
{
    *p = *base;
    Mesh *m = &p->mesh;
    Layout *ly = &p->layout;
    m->naxes = 0;
    for (int d = 0; d < DIM_COUNT; d++) ly->dim_axis[d] = -1;
    ly->pp_axis = ly->sp_axis = ly->zero_axis = -1;
    ly->batch_parts = 0;
    ly->zero_stage = 0;
    ly->uneven = 0;
    ly->virtual_stages = 1;
    ly->schedule = SCHED_NONE;
    /* expert parallelism inside the data ranks: dp / ep of them on `dp`, ep on `ep` */
    int edp = l->ep > 1 && l->ep < l->dp ? l->ep : 1;
    int sizes[5] = {l->pp, l->dp / edp, edp, layout_cp(l), l->tp};
    static const char *const names[5] = {"pp", "dp", "ep", "cp", "tp"};
    int axis[5] = {-1, -1, -1, -1, -1};
    for (int k = 0; k < 5; k++)
        if (sizes[k] > 1 || (k == 1 && l->pp == 1 && l->tp == 1 && layout_cp(l) == 1)) {
            axis[k] = m->naxes;
            m->axes[m->naxes++] = (MeshAxis){.name = names[k], .size = sizes[k]};
        }
    m->world = l->pp * l->dp * layout_cp(l) * l->tp;
    if (axis[1] >= 0) ly->dim_axis[DIM_BATCH] = axis[1];
    if (axis[2] >= 0) ly->batch_parts = (1u << axis[1]) | (1u << axis[2]); /* batch -> dp ep */
    if (axis[3] >= 0) ly->dim_axis[DIM_SEQ] = axis[3];
    ly->cp_comm = axis[3] >= 0 && l->ring ? CP_COMM_RING : CP_COMM_ALLGATHER;
    ly->cp_balanced = axis[3] >= 0 && search_cp_balanced(base, l);
    if (axis[4] >= 0) {
        const Model *md = &base->model;
        if (md->block.kind == BLOCK_TRANSFORMER) ly->dim_axis[DIM_HEADS] = axis[4];
        ly->dim_axis[DIM_FFN] = axis[4];
        if (md->vocab > 0 && md->vocab % l->tp == 0 && (md->has_embed || md->has_head)) ly->dim_axis[DIM_VOCAB] = axis[4];
        if (l->sp) ly->sp_axis = axis[4];
    }
    if (axis[0] >= 0) {
        ly->pp_axis = axis[0];
        ly->dim_axis[DIM_LAYERS] = axis[0];
        ly->schedule = l->sched;
        ly->virtual_stages = l->sched == SCHED_INTERLEAVED ? l->virt : 1;
    }
    /* ZeRO over the data group: beside a context axis, its ranks and dp's
     * together (Megatron-LM's distributed optimizer over dp x cp) */
    plan_derive_axes(p);
    if (l->zero > 0 && axis[1] >= 0) ly->zero_stage = l->zero, ly->zero_axis = p->layout.data_group;
    if (l->ep && axis[1] >= 0) ly->dim_axis[DIM_EXPERTS] = axis[2] >= 0 ? axis[2] : axis[1];
    /* `capacity` sizes expert parallelism's buffers: a layout with the
     * experts whole has none to size */
    if (!l->ep) p->model.block.moe.capacity = 0;
    ly->recompute = l->rc;
    p->train.micro_batch = l->micro_batch;
    /* the plan's `pipeline_scatter on` is kept where the layout can split its messages */
    ly->pipeline_scatter = base->layout.pipeline_scatter && plan_pipeline_scatter_fits(p);
}

static char *layout_text(const Plan *base, const Layout1 *l, const char *comment, size_t *len)
{
    Plan *p = malloc(sizeof *p);
    if (!p) return NULL;
    apply_layout(base, l, p);
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) {
        free(p);
        return NULL;
    }
    plan_write_par(p, comment, f);
    fclose(f);
    free(p);
    return text;
}

static void layout_describe(const Layout1 *l, char *buf, size_t size)
{
    int n = layout_cp(l) > 1 ? snprintf(buf, size, "pp %d dp %d cp %d%s%s tp %d, micro_batch %lld", l->pp, l->dp,
                                        l->cp, l->ring ? " (ring" : " (all-gather",
                                        l->bal ? ", balanced)" : ")", l->tp, (long long)l->micro_batch)
                              : snprintf(buf, size, "pp %d dp %d tp %d, micro_batch %lld", l->pp, l->dp, l->tp,
                                         (long long)l->micro_batch);
    if (l->pp > 1 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ", %s", schedule_kind_name(l->sched));
    if (l->pp > 1 && l->sched == SCHED_INTERLEAVED && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, " %d", l->virt);
    if ((size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ", zero %d%s, recompute %s", l->zero, l->sp ? ", sp" : "",
                      recompute_names[l->rc]);
    if (l->ep == l->dp && (size_t)n < size) snprintf(buf + n, size - (size_t)n, ", experts over dp");
    else if (l->ep && (size_t)n < size) snprintf(buf + n, size - (size_t)n, ", experts over ep %d of dp", l->ep);
}

/* Checks, lowers and analyzes one layout; records it unless pruned. */
static void try_layout(Search *s, const Layout1 *l)
{
    if (s->budget) {
        /* lowering scales with the layers, the analysis's pipeline simulation
         * with the micro-batches each rank runs */
        int64_t per_rank = l->dp > 0 && l->micro_batch > 0 ? s->base->train.batch / l->dp / l->micro_batch : 0;
        int64_t cost = s->base->model.layers + 64 + per_rank / 8;
        if (*s->budget < cost) {
            s->stopped = 1;
            return;
        }
        *s->budget -= cost;
    }
    s->considered++;
    s->lowered++;
    size_t len;
    char *text = layout_text(s->base, l, NULL, &len);
    if (!text) return;
    Arena arena = {0};
    Compilation c;
    const Analysis *an = NULL;
    if (passes_run_text(&c, &arena, "search", text, s->verify, passes_find("analyze")) == 0 && diag_error_count() == 0)
        an = c.analysis;
    if (!an) s->pruned_check++;
    else if (!plan_fits(&c.plan.cluster, (double)an->max_total)) s->pruned_memory++;
    else {
        Result r = {.l = *l, .step_s = an->step_s, .mfu = analyze_mfu(an), .bubble = an->bubble_share,
                    .pipeline_s = an->pipeline_s, .pipeline_bytes = an->pipeline_bytes, .peak = an->max_total};
        memcpy(r.phase, an->phase_s, sizeof r.phase);
        memcpy(r.link_wire, an->link_wire, sizeof r.link_wire);
        memcpy(r.mem, an->stages[an->worst_stage].ledger, sizeof r.mem);
        if (s->nres == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 256;
            Result *grown = realloc(s->res, (size_t)s->cap * sizeof *grown);
            if (!grown) PARC_BUG("out of memory");
            s->res = grown;
        }
        s->res[s->nres++] = r;
        double share = an->step_s / search_estimate(s->base, l).step_s;
        if (s->share_min == 0 || share < s->share_min) s->share_min = share;
    }
    passes_finish(&c);
    arena_free(&arena);
    if (s->rewind) diag_rewind(s->mark);
    else diag_reset();
    free(text);
}

/* enumerate's visit: lowers the layout now, or keeps it for the prefilter. */
static void consider(Search *s, const Layout1 *l)
{
    if (!s->collect) {
        try_layout(s, l);
        return;
    }
    if (s->nspace == s->space_cap) {
        s->space_cap = s->space_cap ? 2 * s->space_cap : 1024;
        Layout1 *grown = realloc(s->space, (size_t)s->space_cap * sizeof *grown);
        if (!grown) PARC_BUG("out of memory");
        s->space = grown;
    }
    s->space[s->nspace++] = *l;
}

/* 1 when the plan's sequence may split over a context axis of cp ranks
 * (cp 1: always): a long sequence, chunks of SEARCH_CP_MIN_CHUNK at least,
 * and a model whose attention takes it (no dropout). */
static int context_split(const Plan *b, int cp)
{
    if (cp == 1) return 1;
    const Model *m = &b->model;
    return m->seq >= SEARCH_CP_MIN_SEQ && m->seq % cp == 0 && m->seq / cp >= SEARCH_CP_MIN_CHUNK &&
           m->block.kind == BLOCK_TRANSFORMER && m->block.dropout == 0;
}

/* 1 when the plan's experts can split over a data axis of dp ranks. */
/* The next expert-parallel size after ep (0: experts whole, the first) for
 * dp data ranks: the divisors of dp above 1 that divide the experts, up to
 * dp; 0 after the last. */
static int next_ep(const Plan *b, int dp, int ep)
{
    int64_t e = b->model.block.moe.experts;
    for (int k = ep < 2 ? 2 : ep + 1; e > 0 && k <= dp; k++)
        if (dp % k == 0 && e % k == 0) return k;
    return 0;
}

static void enumerate(Search *s)
{
    const Plan *b = s->base;
    int world = b->cluster.nodes * b->cluster.gpus_per_node;
    int64_t layers = b->model.layers / plan_block_layers(b); /* stages hold whole blocks */
    for (int tp = 1; tp <= b->cluster.gpus_per_node; tp++) {
        if (b->cluster.gpus_per_node % tp || world % tp) continue;
        for (int pp = 1; pp <= world / tp && pp <= layers; pp++) {
            if ((world / tp) % pp) continue;
            for (int cp = 1; cp <= world / tp / pp; cp++) {
                if ((world / tp / pp) % cp || !context_split(b, cp)) continue;
                int dp = world / tp / pp / cp;
                if (b->train.batch % dp) continue;
                int64_t per_rank = b->train.batch / dp;
                for (int64_t mb = 1; mb <= per_rank && mb <= 16; mb++) {
                    if (per_rank % mb) continue;
                    for (int sched = pp > 1 ? SCHED_GPIPE : SCHED_NONE;
                         sched <= (pp > 1 ? SCHED_INTERLEAVED : SCHED_NONE); sched++) {
                        for (int v = sched == SCHED_INTERLEAVED ? 2 : 1;
                             v <= (sched == SCHED_INTERLEAVED ? layers / pp : 1); v++) {
                            if (sched == SCHED_INTERLEAVED && layers % (pp * v)) continue;
                            for (int zero = 0; zero <= (dp > 1 ? 3 : 0); zero++)
                                for (int sp = 0; sp <= (tp > 1 && (cp == 1 || plan_sp_with_cp(&b->model)) ? 1 : 0); sp++)
                                    for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc++)
                                        for (int ep = 0, first = 1; first || ep; first = 0, ep = next_ep(b, dp, ep))
                                            for (int ring = 0; ring <= (cp > 1); ring++)
                                                for (int bal = 0; bal <= search_cp_can_balance(b, cp); bal++) {
                                                    Layout1 l = {tp, pp, dp, mb, (SchedKind)sched, v, zero, sp,
                                                                 (RecomputeKind)rc, ep, cp, ring, bal};
                                                    consider(s, &l);
                                                }
                        }
                    }
                }
            }
        }
    }
}

/* The layouts search_best_fit tries (see tools.h). */
static void enumerate_fit(Search *s)
{
    const Plan *b = s->base;
    int gpn = b->cluster.gpus_per_node, world = b->cluster.nodes * gpn;
    int64_t layers = b->model.layers / plan_block_layers(b); /* stages hold whole blocks */
    for (int tp = 1; tp <= gpn; tp++) {
        if (gpn % tp || world % tp) continue;
        for (int pp = 1; pp <= world / tp && pp <= layers; pp++) {
            if ((world / tp) % pp) continue;
            int dp = world / tp / pp;
            if (b->train.batch % dp) continue;
            int64_t per_rank = b->train.batch / dp, mb = 0;
            for (int64_t m = b->train.micro_batch < per_rank ? b->train.micro_batch : per_rank; m >= 1 && !mb; m--)
                if (per_rank % m == 0 && (pp == 1 || per_rank / m >= pp)) mb = m;
            if (!mb) continue;
            for (int zero = 0; zero <= (dp > 1 ? 3 : 0); zero++)
                for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc++)
                    for (int ep = 0, first = 1; first || ep; first = 0, ep = next_ep(b, dp, ep)) {
                        Layout1 l = {tp, pp, dp, mb, pp > 1 ? SCHED_1F1B : SCHED_NONE, 1, zero, tp > 1,
                                     (RecomputeKind)rc, ep, 1, 0, 0};
                        try_layout(s, &l);
                    }
        }
    }
}

int search_best_fit(const Plan *base, SearchFit *fit, int64_t *budget, int verify)
{
    Search s = {.base = base, .verify = verify, .rewind = 1, .mark = diag_mark(), .budget = budget};
    diag_mute();
    enumerate_fit(&s);
    diag_unmute();
    fit->stopped = s.stopped;
    fit->tried = s.considered;
    /* the fastest, one with room to spare before one without */
    int best = -1, best_crowded = 1;
    for (int i = 0; i < s.nres; i++) {
        int crowded = plan_memory_share(&base->cluster, (double)s.res[i].peak) > PARC_MEMORY_WARN_SHARE;
        if (best >= 0 && crowded != best_crowded) {
            if (crowded) continue;
        } else if (best >= 0 && !(s.res[i].step_s < s.res[best].step_s ||
                                  (s.res[i].step_s == s.res[best].step_s && s.res[i].peak < s.res[best].peak))) {
            continue;
        }
        best = i;
        best_crowded = crowded;
    }
    if (best >= 0) {
        layout_describe(&s.res[best].l, fit->layout, sizeof fit->layout);
        fit->peak = s.res[best].peak;
        fit->step_s = s.res[best].step_s;
        fit->crowded = best_crowded;
    }
    free(s.res);
    return best >= 0;
}

/* A total order on layouts for ties: fewer pipeline stages, then fewer
 * context ranks, fewer tensor ranks, larger micro-batches, the schedule, lower ZeRO stages,
 * without sequence parallelism, less recomputation, experts whole. */
static int layout_order(const Layout1 *a, const Layout1 *b)
{
    const int64_t ka[] = {a->pp, layout_cp(a), a->tp, -a->micro_batch, a->sched, a->virt, a->zero, a->sp, a->rc, a->ep};
    const int64_t kb[] = {b->pp, layout_cp(b), b->tp, -b->micro_batch, b->sched, b->virt, b->zero, b->sp, b->rc, b->ep};
    for (size_t i = 0; i < sizeof ka / sizeof ka[0]; i++)
        if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
    return 0;
}

/* The ranking: step time, then memory, then layout_order, so the same
 * layouts rank the same whichever way they were found. */
static int by_step(const void *x, const void *y)
{
    const Result *a = x, *b = y;
    if (a->step_s != b->step_s) return a->step_s < b->step_s ? -1 : 1;
    if (a->peak != b->peak) return a->peak < b->peak ? -1 : 1;
    return layout_order(&a->l, &b->l);
}

/* One line on why the first layout beats the second: the phase whose
 * difference is the largest share of the gap. */
static void why_first(FILE *out, const Result *a, const Result *b, int rank_b)
{
    int best = 0;
    double gap = b->step_s - a->step_s, most = -1;
    for (int k = 0; k < ANALYZE_NPHASES; k++) {
        double d = b->phase[k] - a->phase[k];
        if (d > most) most = d, best = k;
    }
    if (gap <= 0) {
        fprintf(out, "#1 and #%d have the same estimated step time; #1 needs %s memory\n", rank_b,
                a->peak < b->peak ? "less" : "as much");
        return;
    }
    fprintf(out, "#1 beats #%d by %.4g s (%.1f%%): its %s is %.4g s shorter (%.4g s against %.4g s)\n", rank_b, gap,
            100.0 * gap / b->step_s, analyze_phase_names[best], most, a->phase[best], b->phase[best]);
}

/* The plan's own layout as a point of the space; 0 when the plan maps dims
 * the search does not (then it is not ranked). */
static int own_layout(const Plan *p, Layout1 *l)
{
    const Layout *ly = &p->layout;
    int tp_axis = ly->dim_axis[DIM_FFN];
    *l = (Layout1){.tp = plan_axis_size(p, tp_axis), .pp = ly->stages, .dp = plan_dp(p),
                   .micro_batch = p->train.micro_batch, .sched = ly->pp_axis >= 0 ? ly->schedule : SCHED_NONE,
                   .virt = ly->virtual_stages, .zero = ly->zero_stage, .sp = ly->sp_axis >= 0, .rc = ly->recompute,
                   .ep = ly->dim_axis[DIM_EXPERTS] >= 0 ? plan_axis_size(p, ly->dim_axis[DIM_EXPERTS]) : 0,
                   .cp = plan_axis_size(p, ly->dim_axis[DIM_SEQ])};
    l->ring = layout_cp(l) > 1 && ly->cp_comm == CP_COMM_RING;
    l->bal = layout_cp(l) > 1 && ly->cp_balanced;
    if (l->pp == 1) l->virt = 1;
    int axes = (l->tp > 1) + (l->pp > 1) + (layout_cp(l) > 1) + (l->ep > 1 && l->ep < l->dp) +
               (l->dp > 1 || (l->tp == 1 && l->pp == 1 && layout_cp(l) == 1));
    return p->mesh.naxes == axes && (ly->zero_stage == 0 || ly->zero_axis == p->layout.data_group) && !ly->uneven &&
           (ly->sp_axis < 0 || ly->sp_axis == tp_axis) && (layout_cp(l) == 1 || ly->dim_axis[DIM_SEQ] != tp_axis) &&
           (!l->bal || search_cp_can_balance(p, l->cp));
}

static int same_layout(const Layout1 *a, const Layout1 *b)
{
    return a->tp == b->tp && a->pp == b->pp && a->dp == b->dp && a->micro_batch == b->micro_batch &&
           (a->pp == 1 || (a->sched == b->sched && (a->sched != SCHED_INTERLEAVED || a->virt == b->virt))) &&
           a->zero == b->zero && a->sp == b->sp && a->rc == b->rc && a->ep == b->ep && layout_cp(a) == layout_cp(b) &&
           (layout_cp(a) == 1 || (a->ring == b->ring && a->bal == b->bal));
}

/* A layout the memory estimate leaves out needs more than this many times
 * the GPU's memory less its reserve: the estimate is rough, the exact ledger
 * decides the rest. */
#define SEARCH_MEMORY_SLACK 2.0
/* The estimate's floor: a layout's exact step time is at least this share of
 * its estimate (search_estimate.c over-estimates by at most 1 / 0.85 on
 * every example plan's whole space; `parc search --exhaustive` prints the
 * least share it met, and tests/analyze/search_prefilter.sh holds it above
 * this floor).  A layout estimated above the K-th best exact step over this
 * share cannot enter the top K, so the prefilter stops there. */
#define SEARCH_ESTIMATE_FLOOR 0.8

typedef struct Ranked {
    double step_s;
    int64_t index;
} Ranked;

static int by_estimate(const void *x, const void *y)
{
    const Ranked *a = x, *b = y;
    if (a->step_s != b->step_s) return a->step_s < b->step_s ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* The top-th best exact step so far, or HUGE_VAL while fewer fit. */
static double kth_best_step(const Search *s, int top)
{
    if (s->nres < top) return HUGE_VAL;
    double *steps = malloc((size_t)s->nres * sizeof *steps);
    if (!steps) PARC_BUG("out of memory");
    for (int i = 0; i < s->nres; i++) steps[i] = s->res[i].step_s;
    /* a partial selection: the top smallest */
    for (int i = 0; i < top; i++)
        for (int j = i + 1; j < s->nres; j++)
            if (steps[j] < steps[i]) {
                double t = steps[i];
                steps[i] = steps[j];
                steps[j] = t;
            }
    double kth = steps[top - 1];
    free(steps);
    return kth;
}

/* The prefilter: every layout of the space estimated (search_estimate.c),
 * those estimated to need far more memory than the GPU has left out, the
 * rest lowered in order of estimated step time until the next estimate,
 * times SEARCH_ESTIMATE_FLOOR, exceeds the top-th best exact step found (or
 * the space is spent): no layout left can then rank among the top, so the
 * ranking is the exhaustive search's, whatever `top` is.  The plan's own
 * layout is lowered too, so its rank and the reason #1 beats it are exact. */
static void search_prefiltered(Search *s, int top)
{
    Ranked *order = malloc((size_t)(s->nspace ? s->nspace : 1) * sizeof *order);
    if (!order) PARC_BUG("out of memory");
    int64_t n = 0;
    double limit = SEARCH_MEMORY_SLACK * plan_usable_memory(&s->base->cluster);
    for (int64_t i = 0; i < s->nspace; i++) {
        SearchEstimate e = search_estimate(s->base, &s->space[i]);
        if (e.memory > limit) s->estimated_unfit++;
        else order[n++] = (Ranked){e.step_s, i};
    }
    qsort(order, (size_t)n, sizeof *order, by_estimate);
    Layout1 own;
    int has_own = own_layout(s->base, &own), own_lowered = 0;
    double bound = HUGE_VAL; /* the top-th best exact step, refreshed as results come */
    for (int64_t i = 0; i < n && order[i].step_s * SEARCH_ESTIMATE_FLOOR <= bound; i++) {
        const Layout1 *l = &s->space[order[i].index];
        int had = s->nres;
        try_layout(s, l);
        if (s->nres != had) bound = kth_best_step(s, top);
        if (has_own && same_layout(l, &own)) own_lowered = 1;
    }
    for (int64_t i = 0; has_own && i < n && !s->own_estimate_rank; i++)
        if (same_layout(&s->space[order[i].index], &own)) s->own_estimate_rank = i + 1;
    if (has_own && !own_lowered) try_layout(s, &own);
    s->considered = s->nspace;
    free(order);
}

/* Where the plan's own layout ranks, and why #1 beats it. */
static void print_own(FILE *out, const Search *s)
{
    Layout1 own;
    char d[160];
    if (!own_layout(s->base, &own)) {
        fprintf(out, "\nthe plan's own layout maps dims the search does not vary; it is not ranked\n");
        return;
    }
    layout_describe(&own, d, sizeof d);
    for (int i = 0; i < s->nres; i++) {
        if (!same_layout(&s->res[i].l, &own)) continue;
        if (s->collect) fprintf(out, "\nthe plan's own layout (%s) is #%d of the %d ranked exactly", d, i + 1, s->nres);
        else fprintf(out, "\nthe plan's own layout (%s) ranks #%d of %d", d, i + 1, s->nres);
        if (s->collect && s->own_estimate_rank)
            fprintf(out, " (#%lld of %lld by the estimate)", (long long)s->own_estimate_rank, (long long)s->nspace);
        else if (s->collect) fprintf(out, " (outside the estimate's ranking)");
        fprintf(out, ": step %.4g s, %.1f%% slower than #1\n", s->res[i].step_s,
                100.0 * (s->res[i].step_s / s->res[0].step_s - 1.0));
        if (i > 0) {
            fprintf(out, "  ");
            why_first(out, &s->res[0], &s->res[i], i + 1);
        }
        return;
    }
    fprintf(out, "\nthe plan's own layout (%s) is not among the ranked: it is refused by check or does not fit\n", d);
}

static void print_text(FILE *out, const Search *s, int top, double secs)
{
    char d[160], b1[32], b2[32], b3[32];
    fprintf(out, "search %s: %d GPUs, batch %lld: %lld layouts considered, ", s->base->file,
            s->base->cluster.nodes * s->base->cluster.gpus_per_node, (long long)s->base->train.batch,
            (long long)s->considered);
    if (s->collect)
        fprintf(out, "%lld estimated not to fit; %lld lowered exactly in order of estimated step time: ",
                (long long)s->estimated_unfit, (long long)s->lowered);
    fprintf(out, "%lld refused by check, %lld do not fit, %d ranked", (long long)s->pruned_check,
            (long long)s->pruned_memory, s->nres);
    if (secs >= 0) fprintf(out, " in %.3f s", secs);
    fprintf(out, "\n");
    if (!s->collect && s->nres)
        fprintf(out, "the estimate: every ranked layout's exact step is at least %.3f of its estimate (the prefilter "
                     "stops where estimate x %g passes the top's exact steps)\n",
                s->share_min, SEARCH_ESTIMATE_FLOOR);
    for (int i = 0; i < top && i < s->nres; i++) {
        const Result *r = &s->res[i];
        layout_describe(&r->l, d, sizeof d);
        fprintf(out, "\n#%d %s\n", i + 1, d);
        fprintf(out, "   step %.4g s, MFU %.1f%%, bubble %.1f%%;", r->step_s, 100.0 * r->mfu, 100.0 * r->bubble);
        for (int k = 0; k < ANALYZE_NPHASES; k++) fprintf(out, "%s %s %.4g s", k ? "," : "", analyze_phase_names[k], r->phase[k]);
        fprintf(out, "\n   memory per GPU");
        for (int k = 0; k < PRT_NCLASS; k++) {
            analyze_format_bytes((double)r->mem[k], b1, sizeof b1);
            fprintf(out, "%s %s %s", k ? "," : "", ledger_class_names[k], b1);
        }
        analyze_format_bytes((double)r->peak, b1, sizeof b1);
        fprintf(out, "; total %s\n", b1);
        analyze_format_bytes(r->link_wire[0], b1, sizeof b1);
        analyze_format_bytes(r->link_wire[1], b2, sizeof b2);
        analyze_format_bytes(r->pipeline_bytes, b3, sizeof b3);
        fprintf(out, "   per rank per step: inside nodes %s, across nodes %s (pipeline messages %s)\n", b1, b2, b3);
    }
    if (s->nres >= 2) {
        fprintf(out, "\n");
        why_first(out, &s->res[0], &s->res[1], 2);
    }
    if (s->nres > 0) print_own(out, s);
}

static void print_json(FILE *out, const Search *s, int top)
{
    fprintf(out, "{\n  \"schema\": \"parc.search/1\",\n  \"considered\": %lld,\n  \"estimated_not_to_fit\": %lld,\n  "
                 "\"lowered\": %lld,\n  \"refused_by_check\": %lld,\n  "
                 "\"do_not_fit\": %lld,\n  \"ranked\": %d,\n  \"estimate_floor\": %g,\n  "
                 "\"estimate_share_min\": %.6g,\n  \"top\": [",
            (long long)s->considered, (long long)s->estimated_unfit, (long long)s->lowered, (long long)s->pruned_check,
            (long long)s->pruned_memory, s->nres, SEARCH_ESTIMATE_FLOOR, s->share_min);
    for (int i = 0; i < top && i < s->nres; i++) {
        const Result *r = &s->res[i];
        fprintf(out, "%s\n    {\"rank\": %d, \"pp\": %d, \"dp\": %d, \"tp\": %d, \"micro_batch\": %lld, "
                     "\"schedule\": \"%s\", \"virtual_stages\": %d, \"zero\": %d, \"sequence_parallel\": %s, "
                     "\"recompute\": \"%s\", \"experts_over_dp\": %s, \"ep\": %d, \"cp\": %d, \"cp_comm\": \"%s\", \"cp_split\": \"%s\", \"step_time_s\": %.6g, \"mfu\": %.6g, \"bubble_share\": %.6g, "
                     "\"peak_memory_bytes\": %lld, \"wire_inside_nodes\": %.0f, \"wire_across_nodes\": %.0f, "
                     "\"pipeline_bytes\": %.0f, \"phases_s\": {",
                i ? "," : "", i + 1, r->l.pp, r->l.dp, r->l.tp, (long long)r->l.micro_batch,
                schedule_kind_name(r->l.pp > 1 ? r->l.sched : SCHED_NONE), r->l.pp > 1 ? r->l.virt : 1, r->l.zero,
                r->l.sp ? "true" : "false", recompute_names[r->l.rc], r->l.ep && r->l.ep == r->l.dp ? "true" : "false", r->l.ep, layout_cp(&r->l),
                layout_cp(&r->l) == 1 ? "none" : r->l.ring ? "ring" : "allgather",
                layout_cp(&r->l) == 1 ? "none" : r->l.bal ? "balanced" : "contiguous", r->step_s, r->mfu, r->bubble, (long long)r->peak,
                r->link_wire[0], r->link_wire[1], r->pipeline_bytes);
        for (int k = 0; k < ANALYZE_NPHASES; k++)
            fprintf(out, "%s\"%s\": %.6g", k ? ", " : "", analyze_phase_names[k], r->phase[k]);
        fprintf(out, "}}");
    }
    fprintf(out, "\n  ]\n}\n");
}

/* DIR/1.par ... DIR/K.par; 0, or 3 after reporting a failed write. */
static int write_plans(const Search *s, int top, const char *dir)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "parc search: cannot create `%s`: %s\n", dir, strerror(errno));
        return 3;
    }
    for (int i = 0; i < top && i < s->nres; i++) {
        const Result *r = &s->res[i];
        char d[160], comment[320], path[4096];
        layout_describe(&r->l, d, sizeof d);
        snprintf(comment, sizeof comment, "parc search #%d for %s: %s; estimated step %.6g s", i + 1, s->base->file, d,
                 r->step_s);
        size_t len;
        char *text = layout_text(s->base, &r->l, comment, &len);
        snprintf(path, sizeof path, "%s/%d.par", dir, i + 1);
        FILE *f = text ? fopen(path, "w") : NULL;
        int bad = !f || fwrite(text, 1, len, f) != len;
        if (f && fclose(f) != 0) bad = 1;
        free(text);
        if (bad) {
            fprintf(stderr, "parc search: cannot write `%s`: %s\n", path, strerror(errno));
            return 3;
        }
    }
    return 0;
}

/* The top layouts lowered and analyzed again (the search kept only their
 * figures) and set side by side in one page (report_html_compare). */
static int write_html(const Search *s, int top, const char *path)
{
    int n = top < s->nres ? top : s->nres;
    Arena arena = {0};
    const Analysis **plans = arena_alloc(&arena, sizeof *plans * (size_t)n);
    const char **names = arena_alloc(&arena, sizeof *names * (size_t)n);
    for (int i = 0; i < n; i++) {
        size_t len;
        char *text = layout_text(s->base, &s->res[i].l, NULL, &len), d[160];
        if (!text) PARC_BUG("search: no text for layout #%d", i + 1);
        layout_describe(&s->res[i].l, d, sizeof d);
        names[i] = arena_printf(&arena, "#%d %s", i + 1, d);
        Compilation *c = arena_alloc(&arena, sizeof *c); /* the analysis points at its plan */
        plans[i] = passes_run_text(c, &arena, names[i], text, s->verify, passes_find("analyze")) == 0 &&
                           diag_error_count() == 0
                       ? c->analysis
                       : NULL;
        passes_finish(c);
        free(text);
        if (!plans[i] || plans[i]->step_s != s->res[i].step_s)
            PARC_BUG("search: layout #%d does not analyze again to the step it was ranked by", i + 1);
    }
    char title[512];
    snprintf(title, sizeof title, "parc search: the %d fastest layouts of %s", n, s->base->file);
    int status = report_html_compare(path, title, plans, names, n) ? 3 : 0;
    arena_free(&arena);
    return status;
}

int search_main(const CliOptions *o)
{
    const char *path = o->plan, *dir = o->output, *html = o->html;
    int top = o->top, json = o->json, timed = o->timed, exhaustive = o->exhaustive, verify = o->verify, status = 0;
    Arena arena = {0};
    Compilation c;
    if (passes_run(&c, &arena, path, verify, passes_find("front")) || diag_error_count()) {
        passes_finish(&c);
        arena_free(&arena);
        return 1;
    }
    Search s = {.base = &c.plan, .verify = verify, .collect = !exhaustive};
    /* each candidate's arena is freed before the next one takes about as
     * much: keep the heap instead of returning it to the system each time */
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    diag_mute();
    diag_reset();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    enumerate(&s);
    if (s.collect) search_prefiltered(&s, top);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    diag_unmute();
    if (s.nres > 0) qsort(s.res, (size_t)s.nres, sizeof *s.res, by_step);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (json) print_json(stdout, &s, top);
    else if (!(html && !strcmp(html, "-"))) print_text(stdout, &s, top, timed ? secs : -1);
    if (s.nres == 0) {
        fprintf(stderr, "parc search: no layout of %s fits its cluster\n", path);
        status = 1;
    }
    if (!status && dir) status = write_plans(&s, top, dir);
    if (!status && html) status = write_html(&s, top, html);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "parc search: cannot write the report\n");
        status = 3;
    }
    free(s.res);
    free(s.space);
    passes_finish(&c);
    arena_free(&arena);
    return status;
}
