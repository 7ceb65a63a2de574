/*
 * main.c — the parc driver.  It runs the pass table (passes.c), which reads
 * like the pipeline:
 *
 *   front    parse + check              (grammar/par.y, check*.c)
 *   expand   the forward op graph       (expand.c)
 *   lower    placements, collectives, autodiff, optimizer, schedule, ledger (lower.c and its passes)
 *   analyze  volumes, cost              (analyze.c), then the fit advice (advise.c)
 *   report   check / explain / collectives (explain.c, report_html*.c); a run's trace (report_run.c)
 *   codegen  LLVM -> object -> executable (codegen*.c), launch_run (launch.c)
 *
 * The command line of every command, the plan tools `diff`, `search`,
 * `calibrate` and `export` (tools.h) included, is cli.c's: options, help,
 * usage errors.
 * Exit status: 0 success, 1 the plan has errors, 2 usage, 3+ a failed tool.
 *
 * Two executables are built from this file: parc-codegen, linked with the code
 * generator (LLVM), and parc, linked without it (codegen_stub.c), which loads
 * fast.  parc hands a command that generates code (needs_codegen) to the
 * parc-codegen in its own directory, with the same arguments, before it runs
 * any pass; every other command runs the same in both.
 */
#include "advise.h"
#include "analyze.h"
#include "cli.h"
#include "codegen.h"
#include "explain.h"
#include "ir.h"
#include "launch.h"
#include "passes.h"
#include "report_html.h"
#include "report_run.h"
#include "tools.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs the pass table up to pass `last`, then with check_fit the fit advice.
 * Returns 0, or 1 after reporting errors. */
static int compile_plan(Arena *arena, const char *path, Compilation *c, int last, int check_fit, int verify)
{
    if (passes_run(c, arena, path, verify, last)) return 1;
    if (check_fit && advise_plan(arena, c)) return 1;
    return diag_error_count() ? 1 : 0;
}

/* What the CPU runtime can execute today; everything else is checked and
 * explained but not built (an error, never a silent change of the plan). */
static int runtime_supports(const Plan *plan)
{
    int ok = 1;
    if (!plan->model.has_embed || !plan->model.has_head || !plan->model.has_loss) {
        diag_error(plan->model.loc, "give the model `embed;`, a head and `loss cross_entropy;`",
                   "a trainable program needs token embedding, head and loss");
        ok = 0;
    }
    return ok;
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

/* check, explain, collectives: the analyzed plan and its report. */
static int report_command(Arena *arena, const CliOptions *o, Compilation *c)
{
    const int analyze = passes_find("analyze");
    int status;
    switch (o->command) {
    case CMD_CHECK:
        status = compile_plan(arena, o->plan, c, analyze, 1, o->verify);
        if (!status) explain_check_summary(stdout, c->analysis);
        return status;
    case CMD_EXPLAIN:
        status = compile_plan(arena, o->plan, c, analyze, 0, o->verify);
        if (!status || (c->analysis && diag_error_count() == 0)) {
            int fit_errors = advise_plan(arena, c);
            if (o->html) fit_errors += report_html_write(c->analysis, o->html) != 0;
            else if (o->json) explain_json(stdout, c->analysis);
            else passes_explain_text(stdout, arena, c, o->verbose);
            status = fit_errors ? 1 : 0;
        }
        return status;
    default:
        status = compile_plan(arena, o->plan, c, analyze, 0, o->verify);
        if (!status) {
            if (o->json) explain_collectives_json(stdout, c->analysis);
            else explain_collectives(stdout, c->analysis);
        }
        return status;
    }
}

/* Runs one command on a parsed command line; its exit status. */
static int run_command(Arena *arena, const CliOptions *o, Compilation *c)
{
    const int analyze = passes_find("analyze");
    int status;
    switch (o->command) {
    case CMD_CHECK:
    case CMD_EXPLAIN:
    case CMD_COLLECTIVES: return report_command(arena, o, c);
    case CMD_LOWER: {
        const char *emit = o->emit ? o->emit : "ir";
        int last = passes_find(emit);
        if (last < 0) {
            fprintf(stderr, "parc lower: --emit takes a pass: %s (or plan, graph, ir), not `%s`\n", passes_names(),
                    emit);
            return 2;
        }
        status = compile_plan(arena, o->plan, c, last, 0, o->verify);
        if (!status) passes[last].dump(c, stdout);
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
        status = compile_plan(arena, o->plan, c, analyze, 1, o->verify);
        if (!status && !runtime_supports(&c->plan)) status = 1;
        if (!status && o->sbatch && kind != EMIT_EXE) {
            fprintf(stderr, "parc build: --sbatch writes a script that runs the executable: use it with --emit=exe\n");
            return 2;
        }
        if (!status) status = passes_continue(c, passes_find("codegen"));
        if (!status) status = codegen_write(c->module, (EmitKind)kind, out ? out : "-") ? 1 : 0;
        if (!status && o->sbatch) status = launch_write_sbatch(c->prog, out, o->sbatch) ? 1 : 0;
        return status;
    }
    case CMD_RUN:
        status = compile_plan(arena, o->plan, c, analyze, 1, o->verify);
        if (!status && !runtime_supports(&c->plan)) status = 1;
        if (!status) status = passes_continue(c, passes_find("codegen"));
        if (!status) {
            explain_check_summary(stdout, c->analysis);
            fflush(stdout);
            LaunchOptions launch = {.hosts = o->hosts, .restarts = o->restarts};
            status = launch_run(c->module, c->prog, &launch, o->nforward, o->forward);
        }
        return status;
    case CMD_REPORT:
        status = compile_plan(arena, o->plan, c, analyze, 0, o->verify);
        if (!status) status = report_run(c->analysis, o->trace, o->html, stdout);
        return status;
    case CMD_DIFF: return diff_main(o);
    case CMD_SEARCH: return search_main(o);
    case CMD_CALIBRATE: return calibrate_main(o);
    case CMD_EXPORT: return export_main(o);
    case CMD_COUNT: break;
    }
    PARC_BUG("unknown command %d", (int)o->command);
}

/* Whether the command reaches the pass table's codegen row or codegen_write:
 * build, run, and lower's dump of codegen. */
static int needs_codegen(const CliOptions *o)
{
    switch (o->command) {
    case CMD_BUILD:
    case CMD_RUN: return 1;
    case CMD_LOWER: return o->emit && passes_find(o->emit) >= passes_find("codegen");
    default: return 0;
    }
}

/* Replaces this process with the parc-codegen beside this executable, the
 * same argv; returns only when it cannot, with exit status 1 after saying why. */
static int exec_codegen(char **argv)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "parc: cannot generate code: cannot find parc's own executable (/proc/self/exe): %s\n",
                strerror(errno));
        return 1;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%.*s/parc-codegen", slash ? (int)(slash - self) : 0, self);
    fflush(NULL);
    execv(path, argv);
    if (errno == ENOENT)
        fprintf(stderr,
                "parc: cannot generate code: %s is missing (build it with `cmake --build %s --target parc-codegen`, "
                "or put it beside parc)\n",
                path, PARC_BINARY_DIR);
    else
        fprintf(stderr, "parc: cannot generate code: cannot run %s: %s\n", path, strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    CliOptions opts;
    int status = cli_parse(argc, argv, &opts);
    if (status >= 0) return status;
    if (!codegen_linked() && needs_codegen(&opts)) {
        free(opts.forward);
        return exec_codegen(argv);
    }
    diag_set_style(opts.color, opts.diagnostics_json);
    Arena arena = {0};
    Compilation c;
    memset(&c, 0, sizeof c);
    status = run_command(&arena, &opts, &c);
    passes_finish(&c);
    arena_free(&arena);
    free(opts.forward);
    return status;
}
