/*
 * search.h — one point of `parc search`'s layout space, and the closed-form
 * estimate its prefilter ranks the whole space by (search_estimate.c).
 *
 * The estimate is not the cost model: it reads the plan's model, cluster
 * and batch and charges a transformer (or MLP) block's GEMMs, attention,
 * streamed bytes and collectives with cost.h's terms at the layout's local
 * shapes, without lowering.  search.c lowers only the best estimated
 * layouts exactly; every figure it prints is the exact lowering's.
 */
#ifndef PARC_SEARCH_H
#define PARC_SEARCH_H

#include "parc.h"

typedef struct Layout1 {
    int tp, pp, dp;
    int64_t micro_batch;
    SchedKind sched;
    int virt;
    int zero, sp;
    RecomputeKind rc;
    int ep;  /* a mixture of experts' expert-parallel ranks: 0 experts whole; dp: split over the
                data axis; a divisor of dp between: `batch -> dp ep; experts -> ep;` with an
                axis dp of dp / ep ranks (expert-data parallelism) */
    int cp;  /* the sequence split over a context axis of this size (0 or 1: none) */
    int ring; /* cp > 1: ring attention (`cp_comm ring`), else the all-gather form */
    int bal;  /* cp > 1: the load-balanced split (`cp_split balanced`; search_cp_can_balance) */
} Layout1;

/* Whether base's sequence may take the load-balanced split over cp ranks:
 * a causal transformer without dropout, seq dividing by 2 cp. */
int search_cp_can_balance(const Plan *base, int cp);
/* Whether layout l of base splits the sequence load-balanced. */
int search_cp_balanced(const Plan *base, const Layout1 *l);

/* The estimated step time (seconds) and busiest rank's memory (bytes) of
 * `base` under layout l.  Pure arithmetic on the plan's numbers: no arena,
 * no diagnostics. */
typedef struct SearchEstimate {
    double step_s, memory;
} SearchEstimate;
SearchEstimate search_estimate(const Plan *base, const Layout1 *l);

#endif
