/*
 * main.c — the parc driver.  It reads like the pipeline of passes:
 *
 *   passes_run      the pass table: front, expand, lower, schedule, analyze,
 *                   codegen (passes.c), each with a dump and a verifier
 *   advise_plan     memory fit and the cheapest change that fits (advise.c)
 *   report_*        check / explain / collectives (explain.c)
 *   codegen_emit    LLVM -> object -> executable (codegen.c), launch_run (launch.c)
 *
 * Exit status: 0 success, 1 the plan has errors, 2 usage, 3+ a failed tool.
 */
#include "advise.h"
#include "analyze.h"
#include "codegen.h"
#include "explain.h"
#include "tools.h"
#include "ir.h"
#include "launch.h"
#include "passes.h"
#include "report_html.h"

#include <stdlib.h>
#include <string.h>

#ifndef PARC_VERSION
#define PARC_VERSION "0.1.0"
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "usage: parc COMMAND PLAN.par [options]\n"
            "\n"
            "commands:\n"
            "  check PLAN            validate the plan (exit 0 valid, 1 errors)\n"
            "  explain PLAN          memory per GPU, parallelism per axis, schedule, step time\n"
            "       --verbose        the formula behind each number\n"
            "       --json           the same as JSON (schema in docs/json.md)\n"
            "       --html FILE      the same as one self-contained HTML page with pictures\n"
            "  collectives PLAN      every collective each rank issues per step, and why\n"
            "       --json\n"
            "  lower PLAN --emit=PASS  dump after a pass: front | expand | lower | schedule |\n"
            "                        analyze | codegen (plan, graph, ir: front, expand, lower)\n"
            "  build PLAN -o OUT     compile to an executable (--emit=llvm|obj|exe, default exe)\n"
            "  run PLAN [runtime options]  build and launch locally with mpirun:\n"
            "       --steps N --data FILE --memory --trace FILE --quiet\n"
            "  diff A.par B.par      two plans side by side: memory, collectives, links, time\n"
            "       --json\n"
            "  search PLAN           the fastest layouts of the plan's model on its cluster\n"
            "       --top K --json -o DIR (writes each as a .par)\n"
            "  calibrate [-o FILE]   measure this machine (GEMMs, memory, MPI) as a cluster fragment\n"
            "\n"
            "  --verify (or PARC_VERIFY=1)  run each pass's verifier after it\n"
            "\n"
            "  parc --version | --help\n");
}

/* Runs the pass table up to pass `last`, then with check_fit the fit advice.
 * Returns 0, or 1 after reporting errors. */
static int compile_plan(Arena *arena, const char *path, Compilation *c, int last, int check_fit, int verify)
{
    if (passes_run(c, arena, path, verify, last)) return 1;
    if (check_fit && advise_plan(arena, c->analysis)) return 1;
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

static int has_flag(int argc, char **argv, const char *flag)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], flag)) return 1;
    return 0;
}

static const char *flag_value(int argc, char **argv, const char *flag)
{
    size_t n = strlen(flag);
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], flag, n) && argv[i][n] == '=') return argv[i] + n + 1;
        if (!strcmp(argv[i], flag) && i + 1 < argc) return argv[i + 1];
    }
    return NULL;
}

/* Options a command accepts; anything else is a usage error.  A trailing '='
 * in `known` marks an option that takes a value (`--emit=ir` or `--emit ir`). */
static int check_options(int argc, char **argv, const char *const *known, const char *cmd)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            fprintf(stderr, "parc %s: unexpected argument `%s`\n", cmd, a);
            return 2;
        }
        int ok = 0;
        for (int k = 0; known[k] && !ok; k++) {
            size_t n = strlen(known[k]);
            int takes_value = known[k][n - 1] == '=';
            if (takes_value) n--;
            if (strncmp(a, known[k], n)) continue;
            if (a[n] == 0) {
                ok = 1;
                if (takes_value && ++i >= argc) {
                    fprintf(stderr, "parc %s: `%s` needs a value\n", cmd, a);
                    return 2;
                }
            } else if (a[n] == '=' && takes_value) {
                ok = 1;
            }
        }
        if (!ok) {
            fprintf(stderr, "parc %s: unknown option `%s`\n", cmd, a);
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("parc %s\n", PARC_VERSION);
        return 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "diff")) return diff_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "search")) return search_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "calibrate")) return calibrate_main(argc - 2, argv + 2);
    if (argc < 3) {
        fprintf(stderr, "parc %s: missing PLAN.par\n", cmd);
        usage(stderr);
        return 2;
    }
    const char *path = argv[2];
    int oargc = argc - 3;
    char **oargv = argv + 3;
    Arena arena = {0};
    Compilation c;
    int status;
    int verify = passes_verify_from_env() || has_flag(oargc, oargv, "--verify"); /* not for run */
    const int analyze = passes_find("analyze");

    if (!strcmp(cmd, "check")) {
        static const char *const known[] = {"--verify", NULL};
        if ((status = check_options(oargc, oargv, known, cmd))) return status;
        status = compile_plan(&arena, path, &c, analyze, 1, verify);
        if (!status) report_check_summary(stdout, c.analysis);
    } else if (!strcmp(cmd, "explain")) {
        static const char *const known[] = {"--json", "--verbose", "--html=", "--verify", NULL};
        if ((status = check_options(oargc, oargv, known, cmd))) return status;
        if (flag_value(oargc, oargv, "--html") &&
            (has_flag(oargc, oargv, "--json") || has_flag(oargc, oargv, "--verbose"))) {
            fprintf(stderr, "parc explain: --html writes its own form of the report; give it without --json and "
                            "--verbose\n");
            return 2;
        }
        status = compile_plan(&arena, path, &c, analyze, 0, verify);
        if (!status || (c.analysis && diag_error_count() == 0)) {
            int fit_errors = advise_plan(&arena, c.analysis);
            const char *html = flag_value(oargc, oargv, "--html");
            if (html) fit_errors += report_html_write(c.analysis, html) != 0;
            else if (has_flag(oargc, oargv, "--json")) report_explain_json(stdout, c.analysis);
            else report_explain(stdout, c.analysis, has_flag(oargc, oargv, "--verbose"));
            status = fit_errors ? 1 : 0;
        }
    } else if (!strcmp(cmd, "collectives")) {
        static const char *const known[] = {"--json", "--verify", NULL};
        if ((status = check_options(oargc, oargv, known, cmd))) return status;
        status = compile_plan(&arena, path, &c, analyze, 0, verify);
        if (!status) {
            if (has_flag(oargc, oargv, "--json")) report_collectives_json(stdout, c.analysis);
            else report_collectives(stdout, c.analysis);
        }
    } else if (!strcmp(cmd, "lower")) {
        static const char *const known[] = {"--emit=", "--verify", NULL};
        if ((status = check_options(oargc, oargv, known, cmd))) return status;
        const char *emit = flag_value(oargc, oargv, "--emit");
        if (!emit) emit = "ir";
        int last = passes_find(emit);
        if (last < 0) {
            fprintf(stderr, "parc lower: --emit takes a pass: %s (or plan, graph, ir), not `%s`\n", passes_names(),
                    emit);
            return 2;
        }
        status = compile_plan(&arena, path, &c, last, 0, verify);
        if (!status) passes[last].dump(&c, stdout);
    } else if (!strcmp(cmd, "build")) {
        static const char *const known[] = {"-o=", "--emit=", "--verify", NULL};
        if ((status = check_options(oargc, oargv, known, cmd))) return status;
        const char *out = flag_value(oargc, oargv, "-o");
        const char *emit = flag_value(oargc, oargv, "--emit");
        EmitKind kind = EMIT_EXE;
        if (emit && !strcmp(emit, "llvm")) kind = EMIT_LLVM;
        else if (emit && !strcmp(emit, "obj")) kind = EMIT_OBJ;
        else if (emit && strcmp(emit, "exe")) {
            fprintf(stderr, "parc build: --emit takes llvm, obj or exe, not `%s`\n", emit);
            return 2;
        }
        if (!out) {
            if (kind == EMIT_LLVM) out = "-";
            else {
                fprintf(stderr, "parc build: missing -o OUT\n");
                return 2;
            }
        }
        status = compile_plan(&arena, path, &c, analyze, 1, verify);
        if (!status && !runtime_supports(&c.plan)) status = 1;
        if (!status) status = codegen_emit(c.prog, kind, out) ? 1 : 0;
    } else if (!strcmp(cmd, "run")) {
        /* its options go to the runtime: only PARC_VERIFY turns verification on */
        status = compile_plan(&arena, path, &c, analyze, 1, passes_verify_from_env());
        if (!status && !runtime_supports(&c.plan)) status = 1;
        if (!status) {
            report_check_summary(stdout, c.analysis);
            fflush(stdout);
            status = launch_run(c.prog, oargc, oargv);
        }
    } else {
        static const char *const cmds[] = {"check", "explain", "collectives", "lower", "build", "run"};
        const char *close = diag_closest(cmd, cmds, 6);
        fprintf(stderr, "parc: unknown command `%s`%s%s%s\n", cmd, close ? "; did you mean `" : "",
                close ? close : "", close ? "`?" : "");
        usage(stderr);
        return 2;
    }
    passes_finish(&c);
    arena_free(&arena);
    return status;
}
