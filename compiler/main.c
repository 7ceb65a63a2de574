/*
 * main.c — the parc driver.  It reads like the pipeline of passes:
 *
 *   front_load      parse + check            (grammar/par.y, check.c)
 *   expand_model    the forward op graph     (expand.c)
 *   lower_program   placements, collectives, autodiff, schedule (lower.c)
 *   analyze_program memory ledger, volumes, cost (analyze.c)
 *   report_*        check / explain / collectives (explain.c)
 *   codegen_emit    LLVM -> object -> executable (codegen.c), launch_run (launch.c)
 *
 * The command line itself (options, help, usage errors) is cli.c's.
 * Exit status: 0 success, 1 the plan has errors, 2 usage, 3+ a failed tool.
 */
#include "analyze.h"
#include "cli.h"
#include "codegen.h"
#include "explain.h"
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Compiled {
    Plan plan;
    Graph *graph;
    Program *prog;
    Analysis *an;
} Compiled;

/* Runs the passes up to `until` (0 plan, 1 graph, 2 program + analysis).
 * Returns 0, or 1 after reporting errors. */
static int compile_plan(Arena *arena, const char *path, Compiled *c, int until, int check_fit)
{
    memset(c, 0, sizeof *c);
    if (front_load(arena, path, &c->plan) != 0) return 1;
    if (until < 1) return 0;
    c->graph = expand_model(arena, &c->plan);
    if (!c->graph) return 1;
    if (until < 2) return 0;
    c->prog = lower_program(arena, &c->plan, c->graph);
    if (!c->prog) return 1;
    c->an = analyze_program(arena, c->prog);
    if (check_fit && analyze_check(arena, c->an)) return 1;
    return diag_error_count() ? 1 : 0;
}

/* What the CPU runtime can execute today; everything else is checked and
 * explained but not built (an error, never a silent change of the plan). */
static int runtime_supports(const Plan *plan)
{
    int ok = 1;
    if (plan->model.block.kind == BLOCK_TRANSFORMER && plan->model.kv_heads != plan->model.heads) {
        diag_error(plan->model.dim_loc[DIM_HEADS].file ? plan->model.dim_loc[DIM_HEADS] : plan->model.loc, NULL,
                   "grouped-query attention (kv_heads %lld of %lld heads) is explained but not executed by the runtime",
                   (long long)plan->model.kv_heads, (long long)plan->model.heads);
        ok = 0;
    }
    if (!plan->model.has_embed || !plan->model.has_head || !plan->model.has_loss) {
        diag_error(plan->model.loc, "give the model `embed;`, a head and `loss cross_entropy;`",
                   "a trainable program needs token embedding, head and loss");
        ok = 0;
    }
    return ok;
}

/* `parc lower`: the pass to dump (0 plan, 1 graph, 2 ir, 3 schedule), or -1
 * after a usage error. */
static int lower_kind(const char *emit)
{
    static const char *const kinds[] = {"plan", "graph", "ir", "schedule"};
    for (int k = 0; k < 4; k++)
        if (!strcmp(emit ? emit : "ir", kinds[k])) return k;
    fprintf(stderr, "parc lower: --emit takes plan, graph, ir or schedule, not `%s`\n", emit);
    return -1;
}

/* `parc build`: the kind to emit, or -1 after a usage error. */
static int build_kind(const char *emit)
{
    if (!emit || !strcmp(emit, "exe")) return EMIT_EXE;
    if (!strcmp(emit, "llvm")) return EMIT_LLVM;
    if (!strcmp(emit, "obj")) return EMIT_OBJ;
    fprintf(stderr, "parc build: --emit takes llvm, obj or exe, not `%s`\n", emit);
    return -1;
}

/* Runs one command on a parsed command line; its exit status. */
static int run_command(Arena *arena, const CliOptions *o)
{
    Compiled c;
    int status;
    const char *path = o->plan;
    switch (o->command) {
    case CMD_CHECK:
        status = compile_plan(arena, path, &c, 2, 1);
        if (!status) report_check_summary(stdout, c.an);
        return status;
    case CMD_EXPLAIN:
        status = compile_plan(arena, path, &c, 2, 0);
        if (!status || (c.an && diag_error_count() == 0)) {
            int fit_errors = analyze_check(arena, c.an);
            if (o->json) report_explain_json(stdout, c.an);
            else report_explain(stdout, c.an, o->verbose);
            status = fit_errors ? 1 : 0;
        }
        return status;
    case CMD_COLLECTIVES:
        status = compile_plan(arena, path, &c, 2, 0);
        if (!status) {
            if (o->json) report_collectives_json(stdout, c.an);
            else report_collectives(stdout, c.an);
        }
        return status;
    case CMD_LOWER: {
        int kind = lower_kind(o->emit);
        if (kind < 0) return 2;
        status = compile_plan(arena, path, &c, kind < 2 ? kind : 2, 0);
        if (!status) {
            if (kind == 0) plan_dump(&c.plan, stdout);
            else if (kind == 1) graph_dump(c.graph, stdout);
            else if (kind == 3) schedule_dump(&c.prog->schedule, stdout);
            else program_dump(c.prog, stdout);
        }
        return status;
    }
    case CMD_BUILD: {
        int kind = build_kind(o->emit);
        if (kind < 0) return 2;
        const char *out = o->output;
        if (!out && kind != EMIT_LLVM) {
            fprintf(stderr, "parc build: missing -o OUT\n");
            return 2;
        }
        status = compile_plan(arena, path, &c, 2, 1);
        if (!status && !runtime_supports(&c.plan)) status = 1;
        if (!status) status = codegen_emit(c.prog, (EmitKind)kind, out ? out : "-") ? 1 : 0;
        return status;
    }
    case CMD_RUN:
        status = compile_plan(arena, path, &c, 2, 1);
        if (!status && !runtime_supports(&c.plan)) status = 1;
        if (!status) {
            report_check_summary(stdout, c.an);
            fflush(stdout);
            status = launch_run(c.prog, o->nforward, o->forward);
        }
        return status;
    case CMD_COUNT: break;
    }
    PARC_BUG("unknown command %d", (int)o->command);
}

int main(int argc, char **argv)
{
    CliOptions opts;
    int status = cli_parse(argc, argv, &opts);
    if (status >= 0) return status;
    diag_set_style(opts.color, opts.diagnostics_json);
    Arena arena = {0};
    status = run_command(&arena, &opts);
    arena_free(&arena);
    free(opts.forward);
    return status;
}
