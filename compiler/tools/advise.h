/*
 * advise.h — advice on an analyzed plan that lowered cleanly: the memory fit
 * (with the cheapest changes that would make it fit) and the mesh hierarchy.
 */
#ifndef PARC_ADVISE_H
#define PARC_ADVISE_H

#include "passes.h"

/* Warns about tensor- or sequence-parallel groups that span nodes.  When a
 * rank needs more memory than the GPU holds, reports one error at the
 * cluster's `memory` line with the per-class breakdown, the bytes per
 * parameter and, for each change of the plan that keeps every check and
 * schedule rule (ZeRO stages over the data axis, recomputation, a halved
 * micro_batch), its memory per GPU as the changed plan's own `explain`
 * gives it: the plan as written with that one change, through the driver
 * from balance on (passes_run_plan, so a `balance auto` plan is re-split);
 * when none fits, the fastest layout of the same GPUs that fits, else of the
 * fewest more (search_best_fit: each candidate checked, lowered and analyzed
 * from its own .par text, as its `explain` would report it).  Needs a plan
 * without errors so far.  Returns the number of errors reported (0 or 1).  A
 * variant that fails to lower is a compiler bug: PARC_BUG. */
int advise_plan(Arena *arena, const Compilation *c);

/* The pure predicate behind the variants: does `p` keep the rules the
 * variants change (ZeRO over the axis batch maps to, batch a multiple of
 * micro_batch × dp with micro_batches derived from it, the pipeline
 * schedule's micro-batch count)?  No diagnostics. */
int advise_variant_valid(const Plan *p);

#endif
