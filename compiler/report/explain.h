/*
 * explain.h — the reports users read: check's one-line summary, explain and
 * collectives in text and JSON (schemas in docs/json.md).
 */
#ifndef PARC_EXPLAIN_H
#define PARC_EXPLAIN_H

#include "analyze.h"

void explain_check_summary(FILE *out, const Analysis *an);
/* other: the analysis of the same plan with `flash` switched (on for stored
 * attention, off for flash), which the driver makes when
 * explain_wants_flash_switch(plan): what switching would save or cost is
 * reported; NULL otherwise. */
void explain_text(FILE *out, const Analysis *an, const Analysis *other, const Analysis *group, int verbose);
int explain_wants_flash_switch(const Plan *plan);
/* group: the analysis of the same plan with ZeRO over its whole data group,
 * which the driver makes when explain_wants_zero_group(plan) (ZeRO over one
 * of the axes whose ranks hold the same parameters, the data group spanning
 * more): its memory is reported beside the plan's; NULL otherwise. */
int explain_wants_zero_group(const Plan *plan);
void explain_json(FILE *out, const Analysis *an);
void explain_collectives(FILE *out, const Analysis *an);
void explain_collectives_json(FILE *out, const Analysis *an);
/* The step time by phase and how much communication is hidden (explain), and
 * every term of the cost model behind it (explain --verbose); explain_cost.c. */
void explain_phases(FILE *out, const Analysis *an);
void explain_cost_terms(FILE *out, const Analysis *an);

#endif
