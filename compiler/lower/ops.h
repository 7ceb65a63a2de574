/*
 * ops.h — the compiler's one table of graph ops.
 *
 * op_table[kind] is everything lowering, the ledger and the reports know about
 * a graph op (IR_OPS in ir.h):
 *   rule      its placement rule on one mesh axis: the placement it needs of
 *             each input and parameter, the one it produces, and those of the
 *             gradients its backward produces (place.c runs it);
 *   saves     the inputs and statistics its backward reads (OP_SAVES_*);
 *   reads_params  its backward reads its parameters (so a ZeRO-3 shard is
 *             gathered again for it);
 *   shape     the sizes of its runtime calls, computed once from the
 *             placements its inputs arrive in and used by both directions;
 *   flops     FLOPs of one forward (backward = 0) or backward call of a shape;
 *   scratch   floats of workspace the runtime takes for one call (the
 *             prt_scratch_* functions of include/prt_scratch.h, which the
 *             runtime's ops allocate by): `given` and `wide` have bit k set
 *             when argument k of the call is a buffer / a 16-bit buffer;
 *   partial   for an op whose rule can produce a Partial value, how: the verb
 *             of "<op> <partial> <dim> split on <axis> -> Partial" in the
 *             collective report (NULL: it never does);
 *   fwd, bwd  its runtime entry points (RT_NONE: none);
 *   folds_bias, fwd_bias, bwd_bias  a bias op right after it may fold into
 *             its call (ops_fold_bias), and the entries that then replace
 *             fwd and bwd;
 *   emit_fwd, emit_bwd  emit its calls for a shape and return the index of the
 *             entry's instruction in the sequence (emit_bwd NULL: no backward);
 *   cost      how the cost model (cost.c) charges one call: OP_COST_GEMM, the
 *             GEMMs `gemm` gives; OP_COST_ATTENTION, its FLOPs at the
 *             attention kernel's efficiency plus `traffic`; OP_COST_STREAM,
 *             memory-bound: `traffic`; OP_COST_FREE, nothing (say why);
 *   traffic   elements one forward or backward call of a shape reads plus
 *             writes, as its runtime calls do them, charged in the plan's
 *             precision at the efficiency of memory class `mem`;
 *   onchip    elements one call passes over in on-chip memory only (a tile
 *             of scores that never reaches HBM), charged at the cluster's
 *             `tiles` rate (cost.c; NULL: none);
 *   gemm      for OP_COST_GEMM: the GEMMs of one call, {m, n, k} and how many;
 *   bwd_accumulates  why its backward has no first-writer rule
 *             (first_write.c): it only adds into the gradients it produces
 *             (NULL: its backward entries have one).
 * Guarantees: every kind has a complete row (ops_check: every function, a
 * cost that charges a call of any nonempty shape something unless it is
 * OP_COST_FREE, a first-writer rule or the reason it has none), and the
 * instruction emitted for an op's entry carries its shape and FLOPs.
 */
#ifndef PARC_OPS_H
#define PARC_OPS_H

#include "ir.h"

struct Lowerer;
struct Emit;
struct Val;
struct GradDst;

/* What an op's rule decides on one axis: the placement it needs of each input
 * and parameter, the one it produces, and those of the gradients of its inputs
 * and parameters its backward produces. */
typedef struct OpPlace {
    Placement in[3], param[2], out;
    Placement din[3], dparam[2];
} OpPlace;

enum {
    OP_SAVES_IN0 = 1 << 0,       /* the first input */
    OP_SAVES_IN1 = 1 << 1,       /* the second input */
    OP_SAVES_AUX = 1 << 2,       /* every statistic it produces */
    OP_SAVES_AUX_KEPT = 1 << 3,  /* its statistics unless some recompute policy is set */
};

/* What an op's calls read: the values of its inputs and parameters (as the
 * op's rule places them), its output and gradient arguments. */
typedef struct OpArgs {
    const struct Val *in, *param;
    Arg out, dout;
    const struct GradDst *din, *dparam;
} OpArgs;

/* How the cost model charges one call of an op (the row's `cost`).  0 is no
 * kind, so a row that does not say is incomplete. */
typedef enum {
    OP_COST_STREAM = 1, /* memory-bound: its traffic at its memory class's efficiency */
    OP_COST_GEMM,       /* its GEMMs at their shape class's efficiency */
    OP_COST_ATTENTION,  /* its FLOPs at the attention efficiency, plus its traffic */
    OP_COST_FREE,       /* charged nothing */
} OpCostKind;

typedef struct OpDesc {
    void (*rule)(struct Lowerer *lw, const Op *op, int axis, OpPlace *r);
    unsigned saves;
    int reads_params;
    void (*shape)(const struct Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s);
    double (*flops)(const OpShape *s, int backward);
    int64_t (*scratch)(const OpShape *s, int backward, unsigned given, unsigned wide);
    const char *partial;
    RtFn fwd, bwd;
    int folds_bias;           /* a bias op after it may fold into its call (ops_fold_bias) */
    RtFn fwd_bias, bwd_bias;  /* then its entries with the bias (read only when folds_bias) */
    int (*emit_fwd)(struct Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
    int (*emit_bwd)(struct Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
    OpCostKind cost;
    double (*traffic)(const OpShape *s, int backward);
    double (*onchip)(const OpShape *s, int backward);
    MemKind mem;
    int (*gemm)(const OpShape *s, int backward, int64_t mnk[3]); /* returns how many of that GEMM */
    const char *bwd_accumulates;
} OpDesc;

extern const OpDesc op_table[OP_COUNT];

/* Decides which linear ops take the bias op that follows them into their own
 * runtime call (their row's fwd_bias / bwd_bias): the bias adds to the
 * linear's output and to nothing else, both in the same placement on every
 * axis (no collective between them), so the linear's output needs neither a
 * buffer nor a gradient.  Fills lw->bias_fold; place_plan calls it last. */
void ops_fold_bias(struct Lowerer *lw);

/* What op kind k's row lacks, written into why: 1, else 0 (complete). */
int ops_row_incomplete(int k, char *why, size_t why_size);
/* Checks that every op kind has a complete row; failure is PARC_BUG. */
void ops_check(void);

/* Workspace floats the runtime takes for instruction ins of stage sp: with
 * the buffers' own dtypes (wide = 1) or all fp32 (wide = 0).  0 for an
 * instruction that is no op's entry. */
int64_t ops_instr_scratch(const Program *prog, const StageProgram *sp, const Instr *ins, int wide);

#endif
