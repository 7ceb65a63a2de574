/*
 * cli.h — the command line of `parc`: commands, options, help.
 *
 * The rules, as in gcc, git and cargo:
 *   - options go before or after the plan (`parc explain --json PLAN` and
 *     `parc explain PLAN --json`), and `--name=value` equals `--name value`;
 *   - `parc help [COMMAND]` and `parc COMMAND --help` print help on stdout and
 *     exit 0;
 *   - `-` as the plan reads it from standard input; `--` ends the options
 *     (for `run`, what follows goes to the program unchanged);
 *   - an unknown option or command is a usage error (exit 2) that names it.
 * One table of commands, each with its table of options, serves every
 * command (the plan tools diff, search, calibrate and export included): the
 * parser, the usage errors with their "did you mean" and the help all read
 * it.  Options every command takes: --color=auto|always|never,
 * --diagnostics-format=text|json (see diag_set_style in parc.h), --verify.
 */
#ifndef PARC_CLI_H
#define PARC_CLI_H

#include <stdio.h>
#include <stdint.h>

/* ORDER: cli.c's command table follows this list. */
typedef enum {
    CMD_CHECK,
    CMD_EXPLAIN,
    CMD_COLLECTIVES,
    CMD_LOWER,
    CMD_BUILD,
    CMD_RUN,
    CMD_REPORT,
    CMD_DIFF,
    CMD_SEARCH,
    CMD_CALIBRATE,
    CMD_EXPORT,
    CMD_COUNT
} CliCommand;

typedef struct CliOptions {
    CliCommand command;
    const char *plan;       /* a path, or "-" for standard input; diff: the first plan */
    const char *plan2;      /* diff: the second plan */
    const char *checkpoint; /* export: the checkpoint (a step directory or a --checkpoint-dir) */
    int top;                /* search --top K (default 5) */
    int exhaustive, timed;  /* search --exhaustive, --time */
    const char *device;     /* calibrate --device DEV, NULL when not given */
    int ranks;              /* calibrate --ranks N (default 1) */
    int master;             /* export --master */
    int hf_names;           /* export --names hf (the default) or parc */
    int64_t max_shard;      /* export --max-shard-size, bytes (0: the default, 5 GB) */
    int json, verbose;      /* explain, collectives */
    const char *html;       /* explain --html FILE, NULL when not given */
    const char *trace;      /* report: the trace (its argument; `plan` is its --plan) */
    int verify;             /* --verify or PARC_VERIFY=1: the pass verifiers run */
    const char *emit;       /* lower, build: NULL when not given */
    const char *output;     /* build: -o, NULL when not given */
    const char *sbatch;     /* build: --sbatch FILE, NULL when not given */
    const char *hosts;      /* run: --hosts FILE (mpirun's hostfile), NULL when not given */
    int restarts;           /* run: --restarts N, the relaunches from the newest checkpoint (default 0) */
    int color;              /* diagnostics in colour (resolved from --color) */
    int diagnostics_json;   /* --diagnostics-format=json */
    /* run: the program's options, each `--name value` (or a lone flag), then
     * everything after `--`; NULL-terminated, owned by the caller's free(). */
    char **forward;
    int nforward;
} CliOptions;

/* Reads argv into *opts.  Returns -1 when the command should run; otherwise
 * the exit status of what it did instead: 0 after help or --version (printed
 * on stdout), 2 after a usage error (printed on stderr). */
int cli_parse(int argc, char **argv, CliOptions *opts);

/* The general usage (command NULL), or one command's help. */
void cli_help(FILE *out, const char *command);

#endif
