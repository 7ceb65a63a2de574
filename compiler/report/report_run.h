/*
 * report_run.h — the report of a run: `parc report TRACE.json --plan PLAN
 * [--html FILE]`.
 *
 * Reads the Chrome trace a built program wrote (--trace; runtime/prt_trace.c
 * gives its events): per rank the forward/backward spans of each schedule item
 * ("F mb3 chunk1", args micro and chunk), the step spans (args.step), the
 * collectives and pipeline messages of the communication thread, and the
 * per-step counter of phase times ("phase ms").  Beside them it sets the
 * Analysis of the plan the program was built from: the cost model's time per
 * phase and, in the page, its simulated timeline (report_html_timeline).
 *
 * The measured per phase is the mean over the steps after the first (the first
 * warms up) of each rank's counters, as the program's own closing line prints
 * rank 0's.  The measured timeline is the last step of every rank, each from
 * its own step start; the simulated one is drawn on the same time axis (one
 * scale, the longer of the two steps; time 0 at the same x).
 */
#ifndef PARC_REPORT_RUN_H
#define PARC_REPORT_RUN_H

#include "analyze.h"

/* Prints predicted vs measured per phase on `out` and, when html_path is not
 * NULL, writes the page there ("-": standard output, and then nothing else is
 * printed there).  Returns 0; 1 after a diagnostic naming the trace when it
 * cannot be read, is not a parc trace, or was not written by a program of
 * this plan (other ranks, stages or schedule); 1 when the page cannot be
 * written (the diagnostic names the path). */
int report_run(const Analysis *an, const char *trace_path, const char *html_path, FILE *out);

#endif
