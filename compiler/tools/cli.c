/*
 * cli.c — parsing parc's command line and printing its help (contract in
 * cli.h).  One table of commands (the plan tools included), each with its
 * table of options; the parser, the usage errors and the help text all read
 * the tables, so they cannot disagree.
 */
#include "cli.h"

#include "parc.h"
#include "passes.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PARC_VERSION
#define PARC_VERSION "0.1.0"
#endif

typedef enum {
    OPT_JSON,
    OPT_VERBOSE,
    OPT_EMIT,
    OPT_OUTPUT,
    OPT_COLOR,
    OPT_DIAG_FORMAT,
    OPT_HELP,
    OPT_VERIFY,
    OPT_HTML,
    OPT_FORWARD, /* run: an option of the built program */
    OPT_PLAN,    /* report: the plan the trace ran */
    OPT_HOSTS,   /* run: mpirun's hostfile */
    OPT_RESTARTS, /* run: relaunches after a failure */
    OPT_SBATCH,  /* build: a Slurm batch script beside the executable */
    OPT_TOP,        /* search */
    OPT_EXHAUSTIVE, /* search */
    OPT_TIME,       /* search */
    OPT_DEVICE,     /* calibrate */
    OPT_RANKS,      /* calibrate */
    OPT_MASTER,     /* export */
    OPT_NAMES,      /* export */
    OPT_MAX_SHARD,  /* export */
} OptId;

typedef struct OptSpec {
    const char *name;  /* `--json`, `-o` */
    const char *value; /* the value's name in help, NULL for a flag */
    OptId id;
    const char *help;
} OptSpec;

typedef struct CmdSpec {
    const char *name;
    const char *args;    /* after the command in the usage line */
    int nargs;           /* the arguments it takes (plans, a trace, a checkpoint) */
    const char *summary; /* one line in the general usage */
    const char *detail;  /* a paragraph in the command's help */
    const OptSpec *opts;
    int nopts;
} CmdSpec;

static const OptSpec global_opts[] = {
    {"--color", "WHEN", OPT_COLOR, "colour the diagnostics: auto (on a terminal; the default), always or never"},
    {"--diagnostics-format", "FORMAT", OPT_DIAG_FORMAT,
     "text (the default) or json: one JSON object per diagnostic and line, with file, line, column, severity, "
     "message and hint"},
    {"--verify", NULL, OPT_VERIFY, "run each pass's verifier after it (also PARC_VERIFY=1)"},
    {"--help", NULL, OPT_HELP, "this help"},
    {"-h", NULL, OPT_HELP, NULL},
};
static const OptSpec explain_opts[] = {
    {"--verbose", NULL, OPT_VERBOSE, "the formula behind each number"},
    {"--json", NULL, OPT_JSON, "the same as JSON (schema in docs/json.md)"},
    {"--html", "FILE", OPT_HTML, "the same as one self-contained HTML page with pictures (`-`: standard output)"},
};
static const OptSpec collectives_opts[] = {
    {"--json", NULL, OPT_JSON, "the same as JSON (schema in docs/json.md)"},
};
static const OptSpec lower_opts[] = {
    {"--emit", "PASS", OPT_EMIT, "the pass to dump after (default lower; the passes are listed below)"},
};
static const OptSpec build_opts[] = {
    {"-o", "OUT", OPT_OUTPUT, "the file to write (with --emit=llvm, default standard output)"},
    {"--emit", "KIND", OPT_EMIT, "exe (the default), obj or llvm"},
    {"--sbatch", "FILE", OPT_SBATCH,
     "also write a Slurm batch script that runs OUT with srun on the plan's nodes (sbatch FILE)"},
};
static const OptSpec run_opts[] = {
    {"--hosts", "FILE", OPT_HOSTS, "run the ranks on the hosts of FILE, mpirun's hostfile (`HOST slots=N` per line): "
                                   "the plan's node i on its i-th host, gpus_per_node ranks each"},
    {"--restarts", "N", OPT_RESTARTS, "relaunch a failed job from its newest checkpoint up to N times (needs a "
                                      "checkpoint directory; each restart is a record of the --log)"},
    {"--steps", "N", OPT_FORWARD, "training steps (default: the plan's `steps`)"},
    {"--data", "FILE", OPT_FORWARD, "a token file to train on (default: the plan's data section, else the synthetic stream)"},
    {"--val-data", "FILE", OPT_FORWARD, "a token file to evaluate on (default: the plan's validation file)"},
    {"--data-format", "FORMAT", OPT_FORWARD, "llmc, u16, u32 or text (default: the plan's, else text)"},
    {"--trace", "FILE", OPT_FORWARD, "write a trace of every rank's phases (Chrome trace JSON)"},
    {"--device", "KIND", OPT_FORWARD, "cpu or cuda"},
    {"--memory", NULL, OPT_FORWARD, "compare measured memory per buffer class with the ledger"},
    {"--quiet", NULL, OPT_FORWARD, "no per-step lines"},
    {"--log", "FILE", OPT_FORWARD, "the training metrics as JSON lines, one object per step"},
    {"--timeout", "SECONDS", OPT_FORWARD, "how long a rank waits for the others before the job stops naming them (0: never)"},
    {"--checkpoint-dir", "DIR", OPT_FORWARD, "save checkpoints under DIR (on SIGINT/SIGTERM too)"},
    {"--checkpoint-every", "N", OPT_FORWARD, "save every N steps (and the last)"},
    {"--checkpoint-keep", "N", OPT_FORWARD, "keep the newest N checkpoints"},
    {"--resume", "WHERE", OPT_FORWARD, "latest (of --checkpoint-dir) or a checkpoint directory, any layout"},
    {"--init-from", "PATH", OPT_FORWARD, "start from a Hugging Face GPT-2 or Llama checkpoint (file or directory)"},
    {"--save-on-exit", NULL, OPT_FORWARD, "save after the last step (the default with a checkpoint directory)"},
};

static const OptSpec report_opts[] = {
    {"--plan", "PLAN", OPT_PLAN, "the plan the traced program was built from (required)"},
    {"--html", "FILE", OPT_HTML, "also the report as one self-contained HTML page (`-`: standard output)"},
};

static const OptSpec diff_opts[] = {
    {"--json", NULL, OPT_JSON, "the same as JSON: both plans' figures and each row's delta"},
    {"--html", "FILE", OPT_HTML, "the same as one self-contained HTML page (`-`: standard output)"},
};
static const OptSpec search_opts[] = {
    {"--top", "K", OPT_TOP, "how many layouts to print, fastest first (1..1000; default 5)"},
    {"-o", "DIR", OPT_OUTPUT, "write each printed layout as a plan, DIR/1.par for the fastest"},
    {"--json", NULL, OPT_JSON, "the same as JSON"},
    {"--html", "FILE", OPT_HTML, "the printed layouts side by side as one HTML page (`-`: standard output)"},
    {"--exhaustive", NULL, OPT_EXHAUSTIVE, "lower every layout of the space, not only the estimate's best"},
    {"--time", NULL, OPT_TIME, "also print how long the search took"},
};
static const OptSpec calibrate_opts[] = {
    {"-o", "FILE", OPT_OUTPUT, "the cluster fragment to write (default cluster.par)"},
    {"--device", "DEV", OPT_DEVICE, "measure through the runtime's backend DEV (cuda: cuBLAS, its kernels, NCCL)"},
    {"--ranks", "N", OPT_RANKS, "with --device: N ranks under mpirun, one per GPU (default 1)"},
    {"--hosts", "FILE", OPT_HOSTS, "run on the hosts of FILE, mpirun's hostfile (two or more): also measure the link "
                                   "between two hosts (`link inter`)"},
};
static const OptSpec export_opts[] = {
    {"-o", "OUT", OPT_OUTPUT, "a safetensors file (OUT.safetensors), or a directory Hugging Face transformers loads "
                              "(required)"},
    {"--output", "OUT", OPT_OUTPUT, NULL},
    {"--max-shard-size", "SIZE", OPT_MAX_SHARD, "into a directory: split the weights into files of at most SIZE "
                                                 "bytes (5GB, 500MB, 2GiB; default 5GB, as save_pretrained)"},
    {"--master", NULL, OPT_MASTER, "the fp32 master weights instead of the training dtype's, where the plan keeps them"},
    {"--names", "hf|parc", OPT_NAMES, "Hugging Face's names and layouts (the default) or parc's global names"},
};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ORDER: follows CliCommand. */
static const CmdSpec commands[CMD_COUNT] = {
    {"check", "PLAN", 1, "validate the plan (exit 0 valid, 1 errors)",
     "Checks the plan and everything the compiler derives from it (placements, schedule, memory per GPU): exit 0 "
     "and a one-line summary when it is valid and fits, 1 with every error otherwise.",
     NULL, 0},
    {"explain", "PLAN", 1, "memory per GPU, parallelism per axis, schedule, step time",
     "Explains the plan: the memory ledger per GPU, what each mesh axis carries, the pipeline schedule and its "
     "bubble, and the estimated step time.  Exit 1 when the plan does not fit, with the report still printed.",
     explain_opts, COUNT(explain_opts)},
    {"collectives", "PLAN", 1, "every collective each rank issues per step, and why",
     "Lists every collective each rank issues per step, its volume and link, and the rule behind it.",
     collectives_opts, COUNT(collectives_opts)},
    {"lower", "PLAN", 1, "dump what a pass of the pass table produced (--emit=PASS)",
     "Dumps the result of a pass in its stable text form (the golden files' format).", lower_opts,
     COUNT(lower_opts)},
    {"build", "PLAN -o OUT", 1, "compile to an executable (--emit=llvm|obj|exe)",
     "Compiles the plan into an executable linked with the runtime; run it with mpirun, one rank per mesh "
     "position.",
     build_opts, COUNT(build_opts)},
    {"run", "PLAN [options] [-- program options]", 1, "build and launch with mpirun (or srun inside Slurm)",
     "Builds the plan into a temporary executable and runs it with mpirun: on this machine, or on the hosts of "
     "--hosts FILE.  Inside a Slurm allocation (SLURM_JOB_ID set, no --hosts) it runs `srun` instead, the "
     "executable built under the working directory, which the allocation's nodes must share.  SIGINT and "
     "SIGTERM sent to parc reach the launcher, which stops the ranks; parc exits with its status.  Options "
     "after `--` go to the program unchanged.",
     run_opts, COUNT(run_opts)},
    {"report", "TRACE.json --plan PLAN [--html FILE]", 1, "a run's trace beside its plan: predicted vs measured",
     "Reads the trace a program wrote with --trace and the plan it was built from: prints each phase of the step "
     "as the cost model predicts it beside what the ranks measured, and with --html writes a page with the "
     "measured timeline of every rank (a block per forward and backward of the last step) above the simulated "
     "one.  Exit 1 when the trace cannot be read or does not belong to the plan.",
     report_opts, COUNT(report_opts)},
    {"diff", "A.par B.par [--json | --html FILE]", 2,
     "two plans side by side: memory, collectives, links, time",
     "Compiles both plans and prints them side by side with the deltas: memory by class on each plan's fullest "
     "GPU, the collectives added, removed or changed (with the rule behind each), bytes per link class, bubble, "
     "step time and MFU.  Exit 1 when either plan has errors.",
     diff_opts, COUNT(diff_opts)},
    {"search", "PLAN [--top K] [--json | --html FILE] [-o DIR]", 1,
     "the fastest layouts of the plan's model on its cluster",
     "Keeps the plan's model, cluster and global batch and ranks every layout of the space (dp x tp x pp, "
     "interleaving, ZeRO 0-3, sequence parallelism, recomputation, micro-batch size, schedule) that passes the "
     "checks and fits, by the cost model: the first line says how many it considered.  The best are lowered and "
     "explained exactly; each line gives memory, step time, MFU, bubble and bytes per link class.",
     search_opts, COUNT(search_opts)},
    {"calibrate", "[-o FILE] [--device DEV [--ranks N] | --hosts FILE]", 0, "measure this machine as a cluster fragment",
     "Runs the measuring program on two local ranks: GEMM rates over four shape classes, memory bandwidth, and "
     "the latency and bandwidth between the ranks (over four launches), and writes them as a cluster fragment "
     "that plans include inside `cluster { ... include \"FILE\"; }`.  With --device every figure is measured "
     "through that backend of the runtime (cuda: the linear op on cuBLAS, the memory-bound ops and attention on "
     "the GPU's kernels, the collectives over NCCL between N ranks).  With --hosts the launches run on the hosts of "
     "a hostfile, and one more measures the link between two of them (latency, bandwidth, half-bandwidth size) as "
     "`link inter`.  Exit 3 when it cannot run or write.",
     calibrate_opts, COUNT(calibrate_opts)},
    {"export", "CKPT -o OUT [--master] [--names hf|parc] [--max-shard-size SIZE]", 1,
     "a checkpoint of any layout as one safetensors file, or a directory transformers loads",
     "Assembles every parameter of a checkpoint (a step directory, or a --checkpoint-dir with its `latest`) from "
     "the shards of whichever rank files hold it, checked against the manifest's CRC-32, and writes one "
     "safetensors file (OUT ending in .safetensors) or a directory: config.json for GPT2LMHeadModel or "
     "LlamaForCausalLM and model.safetensors (past --max-shard-size, model-0000K-of-0000N.safetensors and "
     "model.safetensors.index.json), which AutoModelForCausalLM.from_pretrained(OUT) loads.  Exit 1 for a "
     "checkpoint that cannot be read or a model transformers has no class for, 2 for a usage error, 3 for a "
     "failed write.",
     export_opts, COUNT(export_opts)},
};


static void print_opts(FILE *out, const OptSpec *opts, int n)
{
    for (int i = 0; i < n; i++) {
        if (!opts[i].help) continue;
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", opts[i].name, opts[i].value ? " " : "",
                 opts[i].value ? opts[i].value : "");
        fprintf(out, "  %-28s %s\n", left, opts[i].help);
    }
}

void cli_help(FILE *out, const char *command)
{
    for (int c = 0; command && c < CMD_COUNT; c++) {
        if (strcmp(command, commands[c].name) != 0) continue;
        fprintf(out, "usage: parc %s %s\n\n%s\n", commands[c].name, commands[c].args, commands[c].detail);
        if (commands[c].nopts) {
            fprintf(out, "\noptions:\n");
            print_opts(out, commands[c].opts, commands[c].nopts);
        }
        if (c == CMD_LOWER) fprintf(out, "\npasses, in order: %s (older names: plan, graph, ir)\n", passes_names());
        fprintf(out, "\noptions of every command:\n");
        print_opts(out, global_opts, COUNT(global_opts));
        fprintf(out, "\nOptions go before or after the arguments; `--name=value` and `--name value` are the same; "
                     "`-` as PLAN reads standard input.\n");
        return;
    }
    fprintf(out, "usage: parc COMMAND ARGUMENTS [options]\n\ncommands:\n");
    for (int c = 0; c < CMD_COUNT; c++) fprintf(out, "  %-12s %s\n", commands[c].name, commands[c].summary);
    fprintf(out, "  %-12s %s\n", "help", "this text, or `parc help COMMAND` for one command");
    fprintf(out, "\noptions of every command:\n");
    print_opts(out, global_opts, COUNT(global_opts));
    fprintf(out, "\n  parc --version | --help\n");
}

/* ---------------------------------------------------------------- parsing */

typedef struct Parser {
    int argc;
    char **argv;
    int i;           /* the argument being read */
    const char *who; /* "parc" or "parc explain", for messages */
    CliOptions *opts;
    const char *color;
    int help;
} Parser;

static int usage_error(Parser *p, const char *fmt, const char *arg, const char *extra)
{
    fprintf(stderr, "%s: ", p->who);
    fprintf(stderr, fmt, arg, extra ? extra : "");
    fprintf(stderr, "\n(`parc help%s%s` lists what it takes)\n", strcmp(p->who, "parc") ? " " : "",
            strcmp(p->who, "parc") ? p->who + 5 : "");
    return 2;
}

/* A whole number from 1 to max in *out; -1 when text is not one. */
static int read_count(const char *text, long max, int *out)
{
    char *end = NULL;
    long n = strtol(text, &end, 10);
    if (!*text || *end || n < 1 || n > max) return -1;
    *out = (int)n;
    return 0;
}

/* A shard size as save_pretrained writes one: a whole number with B, KB, MB, GB
 * (powers of 1000) or KiB, MiB, GiB (of 1024), at least 1 KB and at most 1 PB. */
static int read_shard_size(const char *text, int64_t *out)
{
    static const struct { const char *unit; double scale; } units[] = {
        {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
    };
    char *end = NULL;
    long long n = strtoll(text, &end, 10);
    if (end == text || n < 1) return -1;
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
        if (!strcmp(end, units[k].unit)) {
            double bytes = (double)n * units[k].scale;
            if (bytes < 1e3 || bytes > 1e15) return -1;
            *out = (int64_t)bytes;
            return 0;
        }
    return -1;
}

/* The option spec whose name `arg` (before any '=') is, among `opts`. */
static const OptSpec *find_opt(const OptSpec *opts, int n, const char *arg, size_t len)
{
    for (int k = 0; k < n; k++)
        if (strlen(opts[k].name) == len && strncmp(opts[k].name, arg, len) == 0) return &opts[k];
    return NULL;
}

/* The closest option name to an unknown one, for "did you mean". */
static const char *closest_opt(const CmdSpec *cmd, const char *arg, size_t len)
{
    const char *names[32];
    int n = 0;
    for (int k = 0; cmd && k < cmd->nopts && n < 32; k++) names[n++] = cmd->opts[k].name;
    for (int k = 0; k < COUNT(global_opts) && n < 32; k++) names[n++] = global_opts[k].name;
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)(len < 63 ? len : 63), arg);
    return diag_closest(word, names, n);
}

/* Reads the option at p->argv[p->i] (and its value).  0, or 2 after a usage
 * error. */
static int read_option(Parser *p, const CmdSpec *cmd)
{
    const char *arg = p->argv[p->i];
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    const char *value = eq ? eq + 1 : NULL;
    /* `-oOUT` */
    if (arg[1] != '-' && len > 2 && cmd && find_opt(cmd->opts, cmd->nopts, arg, 2)) len = 2, value = arg + 2;
    const OptSpec *o = cmd ? find_opt(cmd->opts, cmd->nopts, arg, len) : NULL;
    if (!o) o = find_opt(global_opts, COUNT(global_opts), arg, len);
    if (!o && !cmd && strncmp(arg, "--version", len) == 0 && len == 9 && !value) {
        printf("parc %s\n", PARC_VERSION);
        return 1;
    }
    if (!o) {
        const char *best = closest_opt(cmd, arg, len);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), arg);
        char *hint = NULL;
        if (best && (hint = malloc(strlen(best) + 32))) sprintf(hint, "; did you mean `%s`?", best);
        int rc = usage_error(p, "unknown option `%s`%s", name, hint);
        free(hint);
        return rc;
    }
    if (!o->value && value) return usage_error(p, "`%s` takes no value", o->name, NULL);
    if (o->value && !value) {
        if (p->i + 1 >= p->argc) return usage_error(p, "`%s` needs a value (%s)", o->name, o->value);
        value = p->argv[++p->i];
    }
    CliOptions *opts = p->opts;
    switch (o->id) {
    case OPT_JSON: opts->json = 1; break;
    case OPT_VERBOSE: opts->verbose = 1; break;
    case OPT_EMIT: opts->emit = value; break;
    case OPT_OUTPUT: opts->output = value; break;
    case OPT_HELP: p->help = 1; break;
    case OPT_VERIFY: opts->verify = 1; break;
    case OPT_HTML: opts->html = value; break;
    case OPT_PLAN: opts->plan = value; break;
    case OPT_HOSTS: opts->hosts = value; break;
    case OPT_RESTARTS:
        if (read_count(value, 1000, &opts->restarts))
            return usage_error(p, "--restarts takes a count from 1 to 1000, not `%s`", value, NULL);
        break;
    case OPT_SBATCH: opts->sbatch = value; break;
    case OPT_COLOR:
        if (strcmp(value, "auto") && strcmp(value, "always") && strcmp(value, "never"))
            return usage_error(p, "--color takes auto, always or never, not `%s`", value, NULL);
        p->color = value;
        break;
    case OPT_DIAG_FORMAT:
        if (strcmp(value, "text") && strcmp(value, "json"))
            return usage_error(p, "--diagnostics-format takes text or json, not `%s`", value, NULL);
        opts->diagnostics_json = strcmp(value, "json") == 0;
        break;
    case OPT_FORWARD:
        opts->forward[opts->nforward++] = (char *)o->name;
        if (value) opts->forward[opts->nforward++] = (char *)value;
        break;
    case OPT_TOP:
        if (read_count(value, 1000, &opts->top))
            return usage_error(p, "--top takes a count from 1 to 1000, not `%s`", value, NULL);
        break;
    case OPT_EXHAUSTIVE: opts->exhaustive = 1; break;
    case OPT_TIME: opts->timed = 1; break;
    case OPT_DEVICE: opts->device = value; break;
    case OPT_RANKS:
        if (read_count(value, 64, &opts->ranks))
            return usage_error(p, "--ranks takes a whole number from 1 to 64, not `%s`", value, NULL);
        break;
    case OPT_MASTER: opts->master = 1; break;
    case OPT_MAX_SHARD:
        if (read_shard_size(value, &opts->max_shard))
            return usage_error(p, "--max-shard-size takes a size such as 5GB, 500MB or 2GiB, not `%s`", value, NULL);
        break;
    case OPT_NAMES:
        if (strcmp(value, "hf") && strcmp(value, "parc"))
            return usage_error(p, "--names takes hf or parc, not `%s`", value, NULL);
        opts->hf_names = strcmp(value, "hf") == 0;
        break;
    }
    return 0;
}

static int find_command(const char *name)
{
    for (int c = 0; c < CMD_COUNT; c++)
        if (strcmp(name, commands[c].name) == 0) return c;
    return -1;
}

static int unknown_command(const char *name)
{
    const char *names[CMD_COUNT + 1];
    int n = 0;
    for (int c = 0; c < CMD_COUNT; c++) names[n++] = commands[c].name;
    names[n++] = "help";
    const char *best = diag_closest(name, names, n);
    fprintf(stderr, "parc: unknown command `%s`%s%s%s\n", name, best ? "; did you mean `" : "", best ? best : "",
            best ? "`?" : "");
    cli_help(stderr, NULL);
    return 2;
}

/* `parc help [COMMAND]` */
static int help_command(int argc, char **argv, int i)
{
    if (i >= argc) {
        cli_help(stdout, NULL);
        return 0;
    }
    if (i + 1 < argc) {
        fprintf(stderr, "parc help: unexpected argument `%s`\n", argv[i + 1]);
        return 2;
    }
    if (strcmp(argv[i], "help") == 0) {
        cli_help(stdout, NULL);
        return 0;
    }
    if (find_command(argv[i]) < 0) return unknown_command(argv[i]);
    cli_help(stdout, argv[i]);
    return 0;
}

static int resolve_color(const char *when)
{
    if (when && strcmp(when, "always") == 0) return 1;
    if (when && strcmp(when, "never") == 0) return 0;
    const char *term = getenv("TERM");
    return isatty(2) && !getenv("NO_COLOR") && !(term && strcmp(term, "dumb") == 0);
}

/* The command's arguments in place, and the options that go together; 0,
 * or 2 after a usage error. */
static int check_arguments(Parser *p, const char **args, int nargs)
{
    CliOptions *opts = p->opts;
    switch (opts->command) {
    case CMD_REPORT:
        opts->trace = args[0];
        if (!opts->trace) return usage_error(p, "missing TRACE.json (the file a program's --trace wrote)%s", "", NULL);
        if (!opts->plan) return usage_error(p, "missing --plan PLAN (the plan the program was built from)%s", "", NULL);
        return 0;
    case CMD_DIFF:
        if (nargs < 2) return usage_error(p, "give two plans: A.par B.par%s", "", NULL);
        opts->plan = args[0];
        opts->plan2 = args[1];
        return 0;
    case CMD_CALIBRATE:
        if (opts->ranks > 1 && !opts->device)
            return usage_error(p, "--ranks goes with --device (without it the CPU is measured on two ranks)%s", "",
                               NULL);
        if (opts->hosts && opts->device)
            return usage_error(p, "--hosts measures the CPU runtime's links; it does not go with --device%s", "", NULL);
        return 0;
    case CMD_EXPORT:
        opts->checkpoint = args[0];
        if (!opts->checkpoint) return usage_error(p, "missing CKPT (a checkpoint step directory or --checkpoint-dir)%s", "", NULL);
        if (!opts->output || !*opts->output) return usage_error(p, "missing -o OUT (the safetensors file to write)%s", "", NULL);
        return 0;
    default:
        opts->plan = args[0];
        if (!opts->plan) return usage_error(p, "missing PLAN.par%s%s", "", " (`-` reads it from standard input)");
        return 0;
    }
}

static int parse(int argc, char **argv, CliOptions *opts)
{
    Parser p = {.argc = argc, .argv = argv, .who = "parc", .opts = opts};
    const CmdSpec *cmd = NULL;
    char who[64];
    const char *args[2] = {NULL, NULL};
    int rc, options_done = 0, nargs = 0;
    for (p.i = 1; p.i < argc; p.i++) {
        const char *arg = argv[p.i];
        if (!options_done && strcmp(arg, "--") == 0) {
            options_done = 1;
            if (cmd && opts->command == CMD_RUN) {
                while (++p.i < argc) opts->forward[opts->nforward++] = argv[p.i];
                break;
            }
            continue;
        }
        if (!options_done && arg[0] == '-' && arg[1] != 0) {
            if ((rc = read_option(&p, cmd)) != 0) return rc == 1 ? 0 : rc;
            continue;
        }
        if (!cmd) {
            if (strcmp(arg, "help") == 0) return help_command(argc, argv, p.i + 1);
            int c = find_command(arg);
            if (c < 0) return unknown_command(arg);
            cmd = &commands[c];
            opts->command = (CliCommand)c;
            snprintf(who, sizeof who, "parc %s", cmd->name);
            p.who = who;
        } else if (nargs < cmd->nargs) {
            args[nargs++] = arg;
        } else {
            return usage_error(&p, "unexpected argument `%s`%s", arg,
                               opts->command == CMD_RUN ? " (options for the program go after `--`)" : "");
        }
    }
    if (p.help) {
        cli_help(stdout, cmd ? cmd->name : NULL);
        return 0;
    }
    if (!cmd) {
        cli_help(stderr, NULL);
        return 2;
    }
    if ((rc = check_arguments(&p, args, nargs)) != 0) return rc;
    if (opts->html && (opts->json || opts->verbose))
        return usage_error(&p, "--html writes its own form of the report; give it without --json%s%s", "",
                           opts->command == CMD_EXPLAIN ? " and --verbose" : "");
    opts->forward[opts->nforward] = NULL;
    opts->color = resolve_color(p.color);
    if (passes_verify_from_env()) opts->verify = 1;
    return -1;
}

int cli_parse(int argc, char **argv, CliOptions *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->top = 5;
    opts->ranks = 1;
    opts->hf_names = 1;
    opts->forward = calloc((size_t)argc + 1, sizeof *opts->forward);
    if (!opts->forward) PARC_BUG("out of memory");
    int rc = parse(argc, argv, opts);
    if (rc != -1) {
        free(opts->forward);
        opts->forward = NULL;
    }
    return rc;
}
