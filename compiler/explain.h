/*
 * explain.h — the reports users read: check's one-line summary, explain and
 * collectives in text and JSON (schemas in docs/json.md).
 */
#ifndef PARC_EXPLAIN_H
#define PARC_EXPLAIN_H

#include "analyze.h"

void report_check_summary(FILE *out, const Analysis *an);
void report_explain(FILE *out, const Analysis *an, int verbose);
void report_explain_json(FILE *out, const Analysis *an);
void report_collectives(FILE *out, const Analysis *an);
void report_collectives_json(FILE *out, const Analysis *an);

#endif
