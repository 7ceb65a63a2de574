/*
 * prt_flags.c — the runtime options of a built program.  Every option takes its
 * value as `--name value` or `--name=value`; numbers are range-checked; a bad
 * option makes rank 0 print the problem and the usage, and every rank exit 2
 * (every rank parses the same argv, so all take the same exit).
 */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_backend.h"
#include "prt_internal.h"

#define PRT_MAX_STEPS 1000000000LL   /* 10^9 */
#define PRT_MAX_TIMEOUT 1e6          /* seconds, about 11.6 days */

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s [--steps N] [--data FILE] [--val-data FILE] [--data-format F] [--memory] [--trace FILE]\n"
            "       [--quiet] [--timeout SECONDS]\n"
            "       [--device NAME] [--log FILE] [--checkpoint-dir DIR] [--checkpoint-every N] [--checkpoint-keep N]\n"
            "       [--resume latest|DIR] [--init-from PATH] [--save-on-exit]   (values as --name value or --name=value)\n"
            "  --steps N          number of training steps, 1 to %lld (default: the plan's)\n"
            "  --data FILE        train on FILE (default: the plan's data section, else synthetic data)\n"
            "  --val-data FILE    evaluate on FILE (default: the plan's validation file)\n"
            "  --data-format F    llmc (llm.c's header + uint16), u16 or u32 (headerless tokens) or text\n"
            "                     (bytes; vocab >= 256); default: the plan's, else text\n"
            "  --memory           print the memory ledger per rank and class (measured vs compiler)\n"
            "  --trace FILE       write a Chrome trace (JSON, open in Perfetto) of every op and collective\n"
            "  --log FILE         write JSON lines, one object per step: step, steps, loss, lr, tokens_per_s,\n"
            "                     step_ms (schema: docs/json.md)\n"
            "  --quiet            print only the final line\n"
            "  --timeout SECONDS  how long any wait for other ranks may last before the job is stopped and\n"
            "                     the ranks that did not arrive are named; 0 = never (default: %d x the\n"
            "                     plan's estimated step time, at least %.0f s; PRT_TIMEOUT sets it too)\n"
            "  --device NAME      the backend:",
            prog, PRT_MAX_STEPS, PRT_TIMEOUT_STEPS, PRT_TIMEOUT_FLOOR);
    for (int i = 0; prt_backends[i]; i++) fprintf(f, "%s %s", i ? " |" : "", prt_backends[i]->name);
    fprintf(f, "\n");
    for (int i = 0; prt_backends[i]; i++)
        fprintf(f, "                     %s: %s\n", prt_backends[i]->name, prt_backends[i]->description);
    fputs(prt_ckpt_usage, f);
    fprintf(f,
            "environment: PRT_LOSS_FILE (rank 0 writes 'step loss' lines), PRT_TIMEOUT (seconds, as --timeout),\n"
            "OPENBLAS_NUM_THREADS, PRT_DUMP_DIR, PRT_DUMP_STEP, PRT_DUMP_DATA_ALL (parameter/gradient/data/logit\n"
            "dumps, see parc_rt.h)\n");
}

void prt_exit_all(prt *rt, int status) {
    (void)rt;
    fflush(stdout);
    fflush(stderr);
    MPI_Finalize();
    exit(status);
}

/* A bad option: the message and the usage. A device this machine cannot run
 * (prog NULL) is not a usage error: the message alone, still status 2. */
static void bad_flag(prt *rt, const char *prog, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
static void bad_flag(prt *rt, const char *prog, const char *fmt, ...) {
    if (rt->world_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "parc: error: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        if (prog) usage(stderr, prog);
    }
    prt_exit_all(rt, 2);
}

/* A whole decimal integer in [lo, hi]; 0 when the text is not one. */
static int parse_int(const char *text, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || errno == ERANGE || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* A finite decimal number in [lo, hi]. */
static int parse_seconds(const char *text, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || *end || errno == ERANGE || !isfinite(v) || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* The default timeout: a generous multiple of the plan's step estimate, with a floor. */
static double default_timeout(const prt_plan_desc *plan) {
    double t = PRT_TIMEOUT_STEPS * plan->est_step_seconds;
    return isfinite(t) && t > PRT_TIMEOUT_FLOOR ? (t < PRT_MAX_TIMEOUT ? t : PRT_MAX_TIMEOUT) : PRT_TIMEOUT_FLOOR;
}

/* Options that take a value. */
static const char *const valued[] = {"--steps", "--data", "--val-data", "--data-format", "--trace", "--device",
                                     "--timeout", "--log",
                                     "--checkpoint-dir", "--checkpoint-every", "--checkpoint-keep", "--resume",
                                     "--init-from", NULL};

static void set_option(prt *rt, const char *prog, const char *name, const char *value) {
    char err[512] = "";
    if (prt_ckpt_option(rt, name, value, err, sizeof err)) {
        if (*err) bad_flag(rt, prog, "%s", err);
    } else if (!strcmp(name, "--steps")) {
        long long n = 0;
        if (!parse_int(value, 1, PRT_MAX_STEPS, &n))
            bad_flag(rt, prog, "--steps needs a whole number of steps from 1 to %lld, got '%s'", PRT_MAX_STEPS, value);
        rt->steps = n;
    } else if (!strcmp(name, "--timeout")) {
        if (!parse_seconds(value, 0, PRT_MAX_TIMEOUT, &rt->timeout))
            bad_flag(rt, prog, "--timeout needs seconds from 0 (never) to %.0f, got '%s'", PRT_MAX_TIMEOUT, value);
    } else if (!strcmp(name, "--data-format")) {
        rt->data_format = prt_data_format_parse(value);
        if (rt->data_format < 0)
            bad_flag(rt, prog, "--data-format must be llmc, u16, u32 or text, got '%s'", value);
        rt->data_format_set = 1;
    } else if (!strcmp(name, "--data") || !strcmp(name, "--val-data") || !strcmp(name, "--trace") ||
               !strcmp(name, "--log")) {
        if (!*value) bad_flag(rt, prog, "%s needs a file name", name);
        if (!strcmp(name, "--data")) rt->data_path = value;
        else if (!strcmp(name, "--val-data")) rt->val_data_path = value;
        else if (!strcmp(name, "--log")) rt->log_path = value;
        else rt->trace_path = value;
    } else {  /* --device */
        rt->device_name = value;
    }
}

void prt_parse_flags(prt *rt, int argc, char **argv) {
    const char *prog = argc > 0 && argv[0] ? argv[0] : "parc-program";
    const char *env = getenv("PRT_TIMEOUT");
    rt->timeout = default_timeout(&rt->plan);
    if (env && *env && !parse_seconds(env, 0, PRT_MAX_TIMEOUT, &rt->timeout))
        bad_flag(rt, prog, "PRT_TIMEOUT needs seconds from 0 (never) to %.0f, got '%s'", PRT_MAX_TIMEOUT, env);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--memory")) rt->memory_report = 1;
        else if (!strcmp(a, "--quiet")) rt->quiet = 1;
        else if (!strcmp(a, "--save-on-exit")) prt_ckpt_option(rt, a, NULL, NULL, 0);
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rt->world_rank == 0) usage(stdout, prog);
            prt_exit_all(rt, 0);
        } else {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            int k = 0;
            while (valued[k] && (strlen(valued[k]) != len || strncmp(valued[k], a, len))) k++;
            if (!valued[k]) {
                if (eq && ((len == 8 && !strncmp(a, "--memory", 8)) || (len == 7 && !strncmp(a, "--quiet", 7))))
                    bad_flag(rt, prog, "%.*s takes no value, got '%s'", (int)len, a, a);
                bad_flag(rt, prog, "unknown argument '%s'", a);
            }
            const char *value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!value) bad_flag(rt, prog, "%s needs a value", valued[k]);
            set_option(rt, prog, valued[k], value);
        }
    }
    /* the backend: by name, and usable by this process */
    const char *want = rt->device_name ? rt->device_name : prt_backends[0]->name;
    for (int i = 0; prt_backends[i] && !rt->backend; i++)
        if (!strcmp(prt_backends[i]->name, want)) rt->backend = prt_backends[i];
    if (!rt->backend && !strcmp(want, "cuda"))
        bad_flag(rt, prog, "--device cuda: this program was linked with the CPU runtime (MPI + OpenBLAS); "
                           "build it with the CUDA backend to run on GPUs");
    if (!rt->backend) bad_flag(rt, prog, "--device must be one of the backends listed below, got '%s'", want);
    char why[512] = "";
    if (rt->backend->load && !(rt->backend = rt->backend->load(why, sizeof why)))
        bad_flag(rt, NULL, "--device %s: %s; only the CPU runtime (--device cpu) can run here", want, why);
    if (rt->backend->available && !rt->backend->available(why, sizeof why))
        bad_flag(rt, NULL, "--device %s: %s; only the CPU runtime (--device cpu) can run here", want, why);
}
