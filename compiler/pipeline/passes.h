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
 * their pass ran.  What they produced lives in the caller's arena, except the
 * LLVM module (passes_finish frees it); the Program points at `plan`, so a
 * Compilation must outlive every use of its Program and Analysis. */
typedef struct Compilation {
    Arena *arena;
    const char *path;        /* the .par file, or the name its text is reported under */
    const char *text;        /* the plan's text when it is not read from path (NULL: read path) */
    int verify;              /* run every pass's verifier after it */
    int done;                /* the last row run (-1: none) */
    Plan written;            /* front: the plan as written, checked (the even stage split) */
    Plan plan;               /* front, then balance: the plan the later passes read */
    Graph *graph;            /* expand: the forward op graph */
    PlaceTable *placement;   /* place: the op rules' placements */
    Schedule *schedule;      /* schedule: the pipeline's order of work per stage */
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


extern const Pass passes[];
extern const int passes_count;

/* The row named `name` (or one of its older dump names: plan, graph, ir);
 * -1 when none. */
int passes_find(const char *name);

/* "front, expand, ..., codegen": the valid --emit names, for messages. */
const char *passes_names(void);

/* Whether PARC_VERIFY=1 is set in the environment. */
int passes_verify_from_env(void);

/* The driver's entries: the only way any part of parc runs a pass.  Each
 * zeroes c, then runs the table's rows in order up to `last` (a row index,
 * e.g. passes_find("analyze")), stopping after the first pass that reported
 * errors; with verify, each pass's verifier right after it.  Returns 0, or 1
 * after errors.
 *
 * passes_run: the plan in the file at path (front first).
 * passes_run_text: the plan in `text`, its diagnostics under `name`, its
 *   includes relative to the current directory (front first).
 * passes_run_plan: a plan already through front (a checked Plan, e.g. the
 *   `written` plan of another Compilation with one field changed): balance
 *   first, so a changed plan is re-split, lowered and analyzed exactly as its
 *   own text would be. */
int passes_run(Compilation *c, Arena *arena, const char *path, int verify, int last);
int passes_run_text(Compilation *c, Arena *arena, const char *name, const char *text, int verify, int last);
int passes_run_plan(Compilation *c, Arena *arena, const Plan *plan, int verify, int last);

/* A variant of an analyzed plan: `changed` (a copy of c->written with some
 * fields changed, which the caller has shown to keep every rule the change
 * touches) through balance .. analyze with c's verification; the analysis
 * and the Compilation it points into live in `arena`.  Anything reported
 * there is a compiler bug (PARC_BUG naming `what`). */
const Analysis *passes_variant(Arena *arena, const Compilation *c, const Plan *changed, const char *what);

/* explain's text report of an analyzed c (explain_text), with the variant it
 * compares against (the plan with flash attention) run through the table. */
void passes_explain_text(FILE *out, Arena *arena, const Compilation *c, int verbose);

/* Runs the rows after c->done up to `last` on c, as the entries above do
 * (`build`: the fit advice between analyze and codegen). */
int passes_continue(Compilation *c, int last);

/* Frees what the passes hold outside the arena. */
void passes_finish(Compilation *c);

#endif
