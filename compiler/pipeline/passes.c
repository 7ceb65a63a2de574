/*
 * passes.c — the pass table (passes.h): the compiler's pipeline as data.
 *
 *   front     parse + check                   grammar/par.y, check.c   Plan
 *   balance   with `balance auto`, the stage split of least busy time
 *                                              balance.c                Plan
 *   expand    the forward op graph            expand.c                 Graph
 *   place     each op's placements per axis   place.c                  PlaceTable
 *   schedule  the pipeline's order of work per stage and its in-flight
 *             peaks                            lower.c, schedule.c     Schedule
 *   reshard   the stage programs' buffers (cut from the schedule), forward
 *             sequences with every collective they need, pipeline messages
 *                                              lower.c, reshard.c       Program
 *   autodiff  + the backward sequences         autodiff.c               Program
 *   optim     + gradient zeroing, sync (per ZeRO stage) and optimizer steps
 *                                              optim.c                  Program
 *   tp_overlap the backward's input-gradient collectives over the tensor axis
 *             started before the weight-gradient GEMM, waited after it
 *             (unless `tp_overlap off;`)      overlap_tp.c             Program
 *   overlap   the data axis's gradient buckets as started collectives with
 *             their waits (unless `grad_overlap off;`)  overlap.c  Program
 *   lower     + the ledger: the whole program  lower.c, ledger.c        Program
 *   analyze   ledger per class, FLOPs, collective volumes, step time  analyze.c
 *   codegen   the LLVM module                 codegen*.c
 *
 * Older dump names stay valid: plan = front, graph = expand, ir = lower.
 */
#include "passes.h"

#include "explain.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ front */

static int run_front(Compilation *c)
{
    int status = c->text ? check_plan_text(c->arena, c->path, c->text, &c->plan) : check_plan(c->arena, c->path, &c->plan);
    c->written = c->plan;
    return status != 0;
}

static void dump_front(const Compilation *c, FILE *out) { plan_dump(&c->plan, out); }

/* What check guarantees about a plan (parc.h, struct Plan). */
static void verify_front(const Compilation *c)
{
    const Plan *p = &c->plan;
    const Mesh *m = &p->mesh;
    if (m->naxes < 0 || m->naxes > PARC_MAX_AXES) PARC_BUG("plan: %d mesh axes", m->naxes);
    int64_t world = 1;
    for (int a = 0; a < m->naxes; a++) {
        if (m->axes[a].size < 1) PARC_BUG("plan: axis `%s` has size %d", m->axes[a].name, m->axes[a].size);
        world *= m->axes[a].size;
    }
    if (world != m->world) PARC_BUG("plan: axis sizes multiply to %lld, world is %d", (long long)world, m->world);
    const Layout *l = &p->layout;
    for (int d = 0; d < DIM_COUNT; d++)
        if (l->dim_axis[d] < -1 || l->dim_axis[d] >= (d == DIM_BATCH ? m->naxes + m->nderived : m->naxes))
            PARC_BUG("plan: dim %s maps to axis %d of %d", dim_names[d], l->dim_axis[d], m->naxes);
    if (m->nderived < 0 || m->nderived > PARC_MAX_DERIVED) PARC_BUG("plan: %d derived axes", m->nderived);
    for (int a = m->naxes; a < m->naxes + m->nderived; a++) {
        int64_t size = 1;
        for (int b = 0; b < m->naxes; b++)
            if (m->axes[a].parts >> b & 1) size *= m->axes[b].size;
        if (!m->axes[a].parts || m->axes[a].parts >> m->naxes || size != m->axes[a].size)
            PARC_BUG("plan: derived axis `%s` of size %d spans axes %#x", m->axes[a].name, m->axes[a].size,
                     m->axes[a].parts);
    }
    {
        Plan again = *p; /* the derived axes are those plan_derive_axes gives */
        plan_derive_axes(&again);
        if (again.mesh.nderived != m->nderived || again.layout.data_group != l->data_group)
            PARC_BUG("plan: %d derived axes and data group %d, not plan_derive_axes's", m->nderived, l->data_group);
    }
    if (l->zero_stage < 0 || l->zero_stage > 3 ||
        (l->zero_stage > 0 && (l->zero_axis < 0 || l->zero_axis >= m->naxes + m->nderived)))
        PARC_BUG("plan: zero %d over axis %d", l->zero_stage, l->zero_axis);
    const Train *t = &p->train;
    if (t->micro_batch < 1 || t->micro_batches < 1 || t->batch != t->micro_batch * t->micro_batches * plan_dp(p))
        PARC_BUG("plan: batch %lld is not micro_batch %lld x micro_batches %lld x dp %d", (long long)t->batch,
                 (long long)t->micro_batch, (long long)t->micro_batches, plan_dp(p));
    if (l->stages < 1 || l->virtual_stages < 1 || (int64_t)l->stages * l->virtual_stages > PARC_MAX_STAGES)
        PARC_BUG("plan: %d stages of %d chunks", l->stages, l->virtual_stages);
    int64_t layers = 0;
    for (int v = 0; v < l->stages * l->virtual_stages; v++) {
        if (l->chunk_layers[v] < 1 || (v > 0 && l->chunk_first[v] != l->chunk_first[v - 1] + l->chunk_layers[v - 1]))
            PARC_BUG("plan: model chunk %d holds layers %d + %d, after %d + %d", v, l->chunk_first[v], l->chunk_layers[v],
                     v ? l->chunk_first[v - 1] : 0, v ? l->chunk_layers[v - 1] : 0);
        layers += l->chunk_layers[v];
    }
    if (layers != p->model.layers)
        PARC_BUG("plan: the stages hold %lld layers, the model has %lld", (long long)layers, (long long)p->model.layers);
}

/* ------------------------------------------------------------ balance */

/* The even split through expand .. analyze (this table, as a plan of its
 * own), then the split that balance_plan derives from its analysis. */
static int run_balance(Compilation *c)
{
    if (!balance_wanted(&c->plan)) return 0;
    Plan *even = arena_alloc(c->arena, sizeof *even);
    *even = c->plan;
    even->layout.balance = BALANCE_EVEN;
    Compilation trial;
    if (passes_run_plan(&trial, c->arena, even, c->verify, passes_find("analyze"))) return 1;
    balance_plan(c->arena, &c->plan, trial.analysis);
    passes_finish(&trial);
    return 0;
}

/* ------------------------------------------------------------ expand */

static int run_expand(Compilation *c)
{
    c->graph = expand_model(c->arena, &c->plan);
    return c->graph == NULL;
}

static void dump_expand(const Compilation *c, FILE *out) { expand_dump(c->graph, out); }

static void verify_expand(const Compilation *c) { expand_verify(c->graph); }

/* ------------------------------------------------------------ place, lowering, schedule */

static int run_place(Compilation *c)
{
    c->placement = lower_place(c->arena, &c->plan, c->graph);
    return c->placement == NULL;
}

static void dump_place(const Compilation *c, FILE *out) { place_dump(c->placement, out); }

static void verify_place(const Compilation *c) { place_verify(c->placement); }

static int run_schedule(Compilation *c)
{
    c->schedule = lower_schedule(c->arena, &c->plan);
    return 0;
}

static void dump_schedule(const Compilation *c, FILE *out) { schedule_dump(c->schedule, out); }

static void verify_schedule(const Compilation *c)
{
    char why[256];
    if (schedule_verify(c->schedule, why, sizeof why) != 0) PARC_BUG("unsound schedule: %s", why);
}

static int run_reshard(Compilation *c)
{
    c->prog = lower_reshard(c->arena, c->placement, c->schedule);
    return c->prog == NULL;
}

static int run_autodiff(Compilation *c) { return lower_autodiff(c->prog); }

static int run_optim(Compilation *c) { return lower_optim(c->prog); }

static int run_tp_overlap(Compilation *c) { return lower_tp_overlap(c->prog); }

static int run_overlap(Compilation *c) { return lower_overlap(c->prog); }

static int run_step_writes(Compilation *c) { return lower_step_writes(c->prog); }

static int run_lower(Compilation *c)
{
    lower_finish(c->prog);
    return 0;
}

static void dump_lower(const Compilation *c, FILE *out) { program_dump(c->prog, out); }

static void verify_lower(const Compilation *c) { program_verify(c->prog); }


/* ------------------------------------------------------------ analyze, codegen */

static int run_analyze(Compilation *c)
{
    c->analysis = analyze_program(c->arena, c->prog);
    c->prog->est_step_seconds = c->analysis->step_s; /* the program's watchdog scales with it */
    _Static_assert((int)ANALYZE_NPHASES == (int)PRT_NPHASES, "the analysis's phases are the runtime's");
    for (int k = 0; k < PRT_NPHASES; k++) c->prog->est_phase_seconds[k] = c->analysis->phase_s[k];
    return 0;
}

static void dump_analyze(const Compilation *c, FILE *out) { analyze_dump(c->analysis, out); }

static void verify_analyze(const Compilation *c) { analyze_verify(c->analysis); }

static int run_codegen(Compilation *c)
{
    c->module = codegen_build(c->prog);
    return c->module == NULL;
}

static void dump_codegen(const Compilation *c, FILE *out) { codegen_dump(c->module, out); }

static void verify_codegen(const Compilation *c) { codegen_verify(c->module); }

/* ------------------------------------------------------------ the table */

const Pass passes[] = {
    {"front", run_front, dump_front, verify_front},
    {"balance", run_balance, dump_front, verify_front},
    {"expand", run_expand, dump_expand, verify_expand},
    {"place", run_place, dump_place, verify_place},
    {"schedule", run_schedule, dump_schedule, verify_schedule},
    {"reshard", run_reshard, dump_lower, verify_lower},
    {"autodiff", run_autodiff, dump_lower, verify_lower},
    {"optim", run_optim, dump_lower, verify_lower},
    {"tp_overlap", run_tp_overlap, dump_lower, verify_lower},
    {"overlap", run_overlap, dump_lower, verify_lower},
    {"step_writes", run_step_writes, dump_lower, verify_lower},
    {"lower", run_lower, dump_lower, verify_lower},
    {"analyze", run_analyze, dump_analyze, verify_analyze},
    {"codegen", run_codegen, dump_codegen, verify_codegen},
};
const int passes_count = (int)(sizeof passes / sizeof passes[0]);

int passes_find(const char *name)
{
    static const struct {
        const char *old, *now;
    } aliases[] = {{"plan", "front"}, {"graph", "expand"}, {"ir", "lower"}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(name, aliases[i].old)) name = aliases[i].now;
    for (int i = 0; i < passes_count; i++)
        if (!strcmp(name, passes[i].name)) return i;
    return -1;
}

const char *passes_names(void)
{
    static char names[256];
    if (!names[0]) {
        size_t used = 0;
        for (int i = 0; i < passes_count; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", passes[i].name);
    }
    return names;
}

int passes_verify_from_env(void)
{
    const char *v = getenv("PARC_VERIFY");
    return v && !strcmp(v, "1");
}

/* Runs rows first..last on c. */
static int run_rows(Compilation *c, int first, int last)
{
    PARC_ASSERT(first >= 0 && last < passes_count);
    for (int i = first; i <= last; i++) {
        const Pass *p = &passes[i];
        int errors = diag_error_count();
        if (p->run(c)) return 1;
        if (diag_error_count() != errors) return 1;
        if (c->verify && p->verify) p->verify(c);
        c->done = i;
    }
    return 0;
}

static void start(Compilation *c, Arena *arena, const char *path, const char *text, int verify)
{
    memset(c, 0, sizeof *c);
    c->arena = arena;
    c->path = path;
    c->text = text;
    c->verify = verify;
    c->done = -1;
}

int passes_run(Compilation *c, Arena *arena, const char *path, int verify, int last)
{
    start(c, arena, path, NULL, verify);
    return run_rows(c, 0, last);
}

int passes_run_text(Compilation *c, Arena *arena, const char *name, const char *text, int verify, int last)
{
    start(c, arena, name, text, verify);
    return run_rows(c, 0, last);
}

int passes_run_plan(Compilation *c, Arena *arena, const Plan *plan, int verify, int last)
{
    start(c, arena, plan->file, NULL, verify);
    c->written = c->plan = *plan;
    plan_derive_axes(&c->plan); /* a plan built or changed by a tool: its data group as its mesh now has it */
    c->done = passes_find("front");
    if (verify) passes[c->done].verify(c);
    return run_rows(c, c->done + 1, last);
}

int passes_continue(Compilation *c, int last) { return run_rows(c, c->done + 1, last); }

const Analysis *passes_variant(Arena *arena, const Compilation *c, const Plan *changed, const char *what)
{
    int errors = diag_error_count(), warnings = diag_warning_count();
    Compilation *v = arena_alloc(arena, sizeof *v); /* its plan outlives this call: the analysis points at it */
    if (passes_run_plan(v, arena, changed, c->verify, passes_find("analyze")) || diag_error_count() != errors ||
        diag_warning_count() != warnings)
        PARC_BUG("the plan changed by `%s` keeps every rule but did not lower cleanly", what);
    passes_finish(v);
    return v->analysis;
}

void passes_finish(Compilation *c)
{
    codegen_free(c->module);
    c->module = NULL;
}

void passes_explain_text(FILE *out, Arena *arena, const Compilation *c, int verbose)
{
    const Analysis *other = NULL;
    if (explain_wants_flash_switch(&c->plan)) {
        Plan *p = arena_alloc(arena, sizeof *p);
        *p = c->written;
        p->model.block.flash = !p->model.block.flash;
        other = passes_variant(arena, c, p, p->model.block.flash ? "attention ... flash" : "attention without flash");
    }
    const Analysis *group = NULL;
    if (explain_wants_zero_group(&c->plan)) {
        Plan *p = arena_alloc(arena, sizeof *p);
        *p = c->plan;
        p->layout.zero_axis = p->layout.data_group;
        group = passes_variant(arena, c, p, "ZeRO over the data group");
    }
    explain_text(out, c->analysis, other, group, verbose);
}
