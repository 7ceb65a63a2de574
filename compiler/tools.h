/*
 * tools.h — commands that compare or generate plans from analyzed programs:
 * `parc diff` (diff.c), `parc search` (search.c), and `parc calibrate`
 * (calibrate.c), which measures the machine as a cluster.  Each takes the
 * arguments after its command name and returns the exit status (0 success,
 * 1 a plan has errors, 2 usage, 3 a failed write).
 */
#ifndef PARC_TOOLS_H
#define PARC_TOOLS_H

#include "analyze.h"

int diff_main(int argc, char **argv);
int search_main(int argc, char **argv);
int calibrate_main(int argc, char **argv);

/* Two analyzed plans side by side with their deltas (diff.c). */
void diff_report(FILE *out, const Analysis *a, const Analysis *b);
void diff_report_json(FILE *out, const Analysis *a, const Analysis *b);

#endif
