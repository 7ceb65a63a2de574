/*
 * codegen_shapes.c — @op_shapes, the table of every op call of the program
 * with its size arguments (prt_op_shape_desc, include/parc_rt.h), which the
 * plan descriptor hands the runtime so that a backend can refuse a shape at
 * init, before it allocates anything, instead of in the middle of a step.
 *
 * Takes the Program whose instructions codegen_seq.c emits calls from and
 * reads the same instructions: each op entry (Instr.entry != ENTRY_NONE) of
 * every sequence of every stage gives a row with its runtime function's name
 * (PRT_CALLS, without the prt_ prefix) and its int64_t arguments in call
 * order as arg_value passes them.  An ARG_COORD_TIMES argument, coordinate ×
 * i + k, is the largest any rank passes, (size - 1) × i + k (k when i < 0); arguments that only the
 * running call knows (the step, a micro-batch's first sample, a layer, a
 * message tag) are -1.  Identical rows of one stage appear once, in the order
 * of first appearance.
 */
#include "codegen_gen.h"

#include <stdlib.h>
#include <string.h>

/* The row of instruction `in` of stage `stage`; 0 when it is no op entry. */
static int shape_row(const Program *pr, int stage, const Instr *in, prt_op_shape_desc *row)
{
    if (in->fn < 0 || in->entry == ENTRY_NONE) return 0;
    const char *name = rt_fn_names[in->fn], *sig = rt_fn_sigs[in->fn];
    memset(row, 0, sizeof *row);
    row->op = strncmp(name, "prt_", 4) == 0 ? name + 4 : name;
    row->stage = stage;
    for (int j = 0; j < in->nargs; j++) {
        if (sig[j + 1] != 'i') continue;
        const Arg *a = &in->args[j];
        int64_t v = -1;
        if (a->kind == ARG_INT) v = a->i;
        else if (a->kind == ARG_COORD_TIMES) /* the largest any coordinate gives */
            v = a->k + (a->i > 0 && a->axis >= 0 ? (int64_t)pr->plan->mesh.axes[a->axis].size - 1 : 0) * a->i;
        if (row->nargs == PRT_OP_SHAPE_MAX_ARGS)
            PARC_BUG("%s takes more than %d int64_t arguments", name, PRT_OP_SHAPE_MAX_ARGS);
        row->args[row->nargs++] = v;
    }
    return 1;
}

static int same_row(const prt_op_shape_desc *a, const prt_op_shape_desc *b)
{
    return a->op == b->op && a->stage == b->stage && a->nargs == b->nargs &&
           memcmp(a->args, b->args, (size_t)a->nargs * sizeof a->args[0]) == 0;
}

int codegen_op_shape_rows(const Program *pr, prt_op_shape_desc **out)
{
    int n = 0, cap = 0;
    prt_op_shape_desc *rows = NULL;
    for (int s = 0; s < pr->nstages; s++) {
        const StageProgram *sp = &pr->stages[s];
        int stage_begin = n;
        for (int k = 0; k < SEQ_COUNT; k++) {
            const Seq *seq = &sp->seq[k];
            for (int i = 0; i < seq->n; i++) {
                prt_op_shape_desc row;
                if (!shape_row(pr, s, &seq->ins[i], &row)) continue;
                int seen = 0;
                for (int r = stage_begin; r < n && !seen; r++) seen = same_row(&rows[r], &row);
                if (seen) continue;
                if (n == cap) {
                    cap = cap ? 2 * cap : 64;
                    rows = realloc(rows, (size_t)cap * sizeof *rows);
                    PARC_ASSERT(rows);
                }
                rows[n++] = row;
            }
        }
    }
    *out = rows;
    return n;
}

LLVMValueRef codegen_emit_op_shapes(Gen *g, int64_t *count)
{
    prt_op_shape_desc *rows = NULL;
    int n = codegen_op_shape_rows(g->program, &rows);
    *count = n;
    if (n == 0) {
        free(rows);
        return LLVMConstNull(g->t_ptr);
    }
    LLVMValueRef *values = calloc((size_t)n, sizeof *values);
    PARC_ASSERT(values);
    for (int r = 0; r < n; r++) {
        LLVMValueRef args[PRT_OP_SHAPE_MAX_ARGS];
        for (int j = 0; j < PRT_OP_SHAPE_MAX_ARGS; j++) args[j] = c64(g, j < rows[r].nargs ? rows[r].args[j] : 0);
        LLVMValueRef fields[] = {codegen_const_string(g, rows[r].op), c64(g, rows[r].stage), c64(g, rows[r].nargs),
                                 LLVMConstArray(g->t_i64, args, PRT_OP_SHAPE_MAX_ARGS)};
        values[r] = LLVMConstNamedStruct(g->t_op_shape_desc, fields, sizeof fields / sizeof fields[0]);
    }
    LLVMValueRef init = LLVMConstArray(g->t_op_shape_desc, values, (unsigned)n);
    LLVMValueRef gv = LLVMAddGlobal(g->mod, LLVMTypeOf(init), "op_shapes");
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    free(values);
    free(rows);
    return LLVMConstBitCast(gv, g->t_ptr);
}
