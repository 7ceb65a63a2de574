/*
 * tools.h — commands that compare or generate plans from analyzed programs:
 * `parc diff` (diff.c), `parc search` (search.c), and `parc calibrate`
 * (calibrate.c), which measures the machine as a cluster.  Each takes the
 * command line as cli.c parsed it and returns the exit status (0 success,
 * 1 a plan has errors, 2 usage, 3 a failed write).
 */
#ifndef PARC_TOOLS_H
#define PARC_TOOLS_H

#include "analyze.h"
#include "cli.h"

int diff_main(const CliOptions *o);
int search_main(const CliOptions *o);
int calibrate_main(const CliOptions *o);
/* `parc export CKPT -o MODEL.safetensors` (export.c): a checkpoint as one file. */
int export_main(const CliOptions *o);

/* The fastest layout of base's model on base's cluster (its own mesh aside)
 * that fits by its own analysis (plan_fits), among those that take no more
 * than PARC_MEMORY_WARN_SHARE of the GPU where there are any: every tp x pp x dp factorisation of the GPUs
 * (tp inside a node), 1F1B pipelines, ZeRO 0-3 over dp, sequence parallelism
 * over tp, recompute none, selective or full, micro_batch the plan's or the
 * largest smaller one a pipeline allows.  Each candidate is written as .par
 * text and checked, lowered and analyzed as `parc explain` would take it, its
 * reports muted (search.c).  Returns 1 and fills fit when one fits. */
typedef struct SearchFit {
    char layout[160];   /* "pp 2 dp 1 tp 4, micro_batch 1, 1f1b, zero 1, recompute selective" */
    int64_t peak;       /* bytes per GPU of its busiest rank */
    int crowded;        /* it takes more than PARC_MEMORY_WARN_SHARE of the GPU: no layout that fits takes less */
    double step_s;
    int stopped;        /* the budget ran out before every layout was tried */
    int64_t tried;      /* layouts checked, lowered and analyzed */
} SearchFit;
/* budget: lowering work left, in layers lowered (each try costs the model's
 * layers + 64 + 1/8 of the micro-batches each of its ranks runs); shared by
 * successive calls, so the advice stays bounded.
 * verify: run every pass's verifier on each candidate. */
int search_best_fit(const Plan *base, SearchFit *fit, int64_t *budget, int verify);

/* Two analyzed plans side by side with their deltas (diff.c). */
void diff_report(FILE *out, const Analysis *a, const Analysis *b);
void diff_report_json(FILE *out, const Analysis *a, const Analysis *b);

#endif
