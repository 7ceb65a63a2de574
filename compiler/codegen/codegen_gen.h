/*
 * codegen_gen.h — the generator state shared by the code generator's files
 * (not part of its interface; codegen.h is):
 *
 *   codegen_tables.c  LLVM types mirroring parc_rt.h, runtime declarations, the
 *                     constant tables (plan, buffers, schedule, ledger) and the
 *                     function, block and loop builders;
 *   codegen_seq.c     the instruction sequences, per-stage forward/backward and
 *                     step loop, `main`;
 *   codegen.c         target machine, verification, text/object emission, linking.
 */
#ifndef PARC_CODEGEN_GEN_H
#define PARC_CODEGEN_GEN_H

#include "codegen.h"

#include <llvm-c/Core.h>

/* The lifecycle calls, not in PRT_OPS because they return values or are
 * called only by the driver code.  X(name, return, parameters) over
 * {v void, p pointer, i int64_t, d double}.  ORDER: LifeFn. */
#define CG_LIFECYCLE(X)                  \
    X(prt_init, 'p', "ipp")              \
    X(prt_register_buffers, 'v', "ppi")  \
    X(prt_ptr, 'p', "pii")               \
    X(prt_coord, 'i', "pi")              \
    X(prt_steps, 'i', "p")               \
    X(prt_first_step, 'i', "p")          \
    X(prt_lr, 'd', "pi")                 \
    X(prt_clip_scale, 'd', "p")          \
    X(prt_expect_memory, 'v', "pp")      \
    X(prt_step_begin, 'v', "pi")         \
    X(prt_before_optimizer, 'v', "pi")   \
    X(prt_step_end, 'v', "pi")           \
    X(prt_finalize, 'i', "p")            \
    X(prt_eval_begin, 'i', "pi")         \
    X(prt_eval_batch, 'v', "pi")         \
    X(prt_eval_end, 'v', "pi")           \
    X(abort, 'v', "")

typedef enum {
#define X(name, ret, params) LIFE_##name,
    CG_LIFECYCLE(X)
#undef X
    LIFE_COUNT
} LifeFn;

typedef struct CgLifeFn {
    const char *name;
    char ret;
    const char *params;
} CgLifeFn;
extern const CgLifeFn cg_life_fns[LIFE_COUNT];

/* ---------------------------------------------------------------- generator state */

typedef struct Gen {
    const Program *program;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef t_void, t_i8, t_i32, t_i64, t_f64, t_ptr;
    LLVMTypeRef t_buffer_desc, t_plan_desc, t_item;
    LLVMTypeRef t_op_shape_desc; /* prt_op_shape_desc */
    LLVMTypeRef t_seq_fn;   /* void(i8* rt, i64 chunk, i64 l, i64 slot, i64 micro, i64 step) */
    LLVMTypeRef t_work_fn;  /* void(i8* rt, i64 micro, i64 chunk, i64 slot, i64 step) */
    LLVMTypeRef t_stage_fn; /* void(i8* rt) */
    LLVMTypeRef t_data_desc, t_eval_fn; /* prt_data_desc; void(i8* rt, i64 step) */
    LLVMTypeRef rt_type[RT_FN_COUNT];
    LLVMValueRef rt_fn[RT_FN_COUNT];
    LLVMTypeRef life_type[LIFE_COUNT];
    LLVMValueRef life_fn[LIFE_COUNT];
    int nstrings;
    /* the function being built */
    LLVMValueRef fn, rt;
    LLVMValueRef coord[PARC_MESH_SLOTS]; /* prt_coord results, computed once in the entry block */
    LLVMBasicBlockRef entry;
    /* buffer pointers already computed in a straight-line sequence function */
    struct PtrCache {
        Arg arg;
        LLVMValueRef value;
    } ptrs[64];
    int nptrs, cache_ptrs;
} Gen;

/* Per stage: the sequence functions (NULL when the sequence is empty). */
typedef struct StageFns {
    LLVMValueRef seq[SEQ_COUNT];
    LLVMValueRef fwd, bwd, main;
    LLVMValueRef eval;   /* void(i8* rt, i64 step); NULL when the plan does not evaluate */
} StageFns;

/* A counted loop being built (codegen_loop_begin / codegen_loop_end). */
typedef struct Loop {
    LLVMBasicBlockRef pre, head, body, exit;
    LLVMValueRef index;
} Loop;

static inline LLVMValueRef c64(Gen *g, int64_t v) { return LLVMConstInt(g->t_i64, (unsigned long long)v, 1); }

static inline int is_const(LLVMValueRef v, int64_t k) {
    return LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) == k;
}
/* a + b and a * b, skipping the identities so the text stays readable. */
static inline LLVMValueRef add(Gen *g, LLVMValueRef a, LLVMValueRef b, const char *name) {
    if (is_const(b, 0)) return a;
    if (is_const(a, 0)) return b;
    return LLVMBuildAdd(g->b, a, b, name);
}
static inline LLVMValueRef mul(Gen *g, LLVMValueRef a, LLVMValueRef b, const char *name) {
    if (is_const(b, 1)) return a;
    if (is_const(a, 1)) return b;
    if (is_const(a, 0) || is_const(b, 0)) return c64(g, 0);
    return LLVMBuildMul(g->b, a, b, name);
}

static inline LLVMValueRef call_life(Gen *g, LifeFn f, LLVMValueRef *args, unsigned n, const char *name) {
    return LLVMBuildCall2(g->b, g->life_type[f], g->life_fn[f], args, n, cg_life_fns[f].ret == 'v' ? "" : name);
}

static inline LLVMValueRef call_rt(Gen *g, RtFn f, LLVMValueRef *args, unsigned n) {
    return LLVMBuildCall2(g->b, g->rt_type[f], g->rt_fn[f], args, n, "");
}

static inline LLVMBasicBlockRef new_block(Gen *g, const char *name) {
    return LLVMAppendBasicBlockInContext(g->ctx, g->fn, name);
}

/* Types and runtime declarations into g (g->ctx set; declare needs g->mod). */
void codegen_build_types(Gen *g);
void codegen_declare_runtime(Gen *g);

/* Constant globals: @plan, @stageS.buffers, @stageS.schedule, @stageS.ledger, @op_shapes. */
LLVMValueRef codegen_emit_plan_desc(Gen *g);
LLVMValueRef codegen_emit_buffer_table(Gen *g, const StageProgram *sp);
LLVMValueRef codegen_emit_schedule_table(Gen *g, const StageProgram *sp);
LLVMValueRef codegen_emit_ledger(Gen *g, const StageProgram *sp);
/* @stageS.layer_of[.SUB]: the global layer of each per-layer instance of
 * stage sp (chunk by chunk) for the parameters of layer SUB in the block
 * (block * plan_block_layers + SUB), what a buffer's layer_of points at
 * (prt_buffer_desc). */
LLVMValueRef codegen_stage_layer_of(Gen *g, const StageProgram *sp, int sub);
/* @stageS.chunks: i64[3 * chunks]: for each chunk its first per-layer
 * instance (the layers of the chunks before it), its layer count, then its
 * first global layer; for stages whose chunks differ (codegen_seq.c). */
LLVMValueRef codegen_stage_chunks(Gen *g, const StageProgram *sp);
/* @op_shapes (codegen_shapes.c): every op call with its size arguments, as i8*
 * (null without any), its row count in *count. */
LLVMValueRef codegen_emit_op_shapes(Gen *g, int64_t *count);
/* A private constant C string, as i8*; NULL gives a null pointer. */
LLVMValueRef codegen_const_string(Gen *g, const char *s);

/* An internal function with named parameters (params NULL-terminated). */
LLVMValueRef codegen_add_function(Gen *g, LLVMTypeRef type, const char *name, const char *const *params);
/* Starts the body of fn: an entry block, rt = parameter 0, no cached coordinates. */
void codegen_begin_function(Gen *g, LLVMValueRef fn);
/* prt_coord(rt, axis), computed once per function in its entry block; 0 without the axis. */
LLVMValueRef codegen_coord(Gen *g, int axis);
/* A counted loop "for (i = from; i < to; i++)"; the body goes between
 * codegen_loop_begin and codegen_loop_end. */
Loop codegen_loop_begin(Gen *g, LLVMValueRef from, LLVMValueRef to, const char *name);
void codegen_loop_end(Gen *g, Loop *lp);

/* The whole module: types, declarations, tables, every stage's functions, main. */
void codegen_build_module(Gen *g);

#endif
