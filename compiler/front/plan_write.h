/*
 * plan_write.h — a checked Plan as .par text (plan_write.c).
 */
#ifndef PARC_PLAN_WRITE_H
#define PARC_PLAN_WRITE_H

#include "parc.h"

/* Writes p as a complete plan (cluster with its efficiencies, model, train,
 * mesh, layout), `comment` first as a `#` line when given.  check_plan_text
 * of the result gives back p's numbers. */
void plan_write_par(const Plan *p, const char *comment, FILE *out);

#endif
