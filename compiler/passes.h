/*
 * passes.h — the compiler's passes as one table, in order.
 *
 * Each row names a pass and gives its entry point, its dump (a stable text
 * form of what it produced: `parc lower PLAN --emit=<name>`) and its verifier.
 * passes_run runs the rows in order up to a given one, stopping after the
 * first pass that reports errors; with verification on it runs each pass's
 * verifier right after the pass.  A verifier failure is a compiler bug
 * (PARC_BUG), never a user diagnostic.  Adding a pass is one row, plus the
 * field of Compilation that holds its result.
 */
#ifndef PARC_PASSES_H
#define PARC_PASSES_H

#include "analyze.h"
#include "codegen.h"

/* What the passes produced so far for one plan; later fields are NULL until
 * their pass ran.  Lives in the caller's arena, except the LLVM module
 * (passes_finish frees it). */
typedef struct Compilation {
    Arena *arena;
    const char *path;        /* the .par file */
    int verify;              /* run every pass's verifier after it */
    Plan plan;               /* front: parsed and checked */
    Graph *graph;            /* expand: the forward op graph */
    Placed *placed;          /* place: the op rules' placements */
    Program *prog;           /* reshard .. lower: per-stage programs, schedule, ledger */
    Analysis *analysis;      /* analyze: costs and the collective report */
    CodegenModule *module;   /* codegen: the LLVM module, verified on write */
} Compilation;

typedef struct Pass {
    const char *name;
    /* Runs the pass on c; 0, or 1 after reporting the plan's errors. */
    int (*run)(Compilation *c);
    void (*dump)(const Compilation *c, FILE *out);
    /* Checks the pass's result; PARC_BUG on a broken invariant. */
    void (*verify)(const Compilation *c);
} Pass;

/* The balance pass (balance.c): with `balance auto;` replaces plan's stage
 * split by the one whose busiest stage the cost model finds least busy, and
 * records what it found in plan->layout.balance_*.  0, or 1 after the
 * lowering of the even split reported errors. */
int balance_plan(Arena *arena, Plan *plan);

extern const Pass passes[];
extern const int passes_count;

/* The row named `name` (or one of its older dump names: plan, graph, ir);
 * -1 when none. */
int passes_find(const char *name);

/* "front, expand, ..., codegen": the valid --emit names, for messages. */
const char *passes_names(void);

/* Whether PARC_VERIFY=1 is set in the environment. */
int passes_verify_from_env(void);

/* Zeroes c, then runs passes 0..last on the plan at path.  Returns 0, or 1
 * after the first pass that reported errors. */
int passes_run(Compilation *c, Arena *arena, const char *path, int verify, int last);

/* Frees what the passes hold outside the arena. */
void passes_finish(Compilation *c);

#endif
