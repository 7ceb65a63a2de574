/*
 * codegen.c — pass 9: the LLVM host program of a plan.
 *
 * Takes a verified Program (ir.h).  Emits one LLVM module (typed pointers: every
 * pointer is i8*) that calls only the runtime API of runtime/parc_rt.h:
 *
 *   @plan                         prt_plan_desc constant
 *   @stageS.buffers               [nbufs x prt_buffer_desc] constant
 *   @stageS.schedule              [nitems x [4 x i64]]: kind, micro, chunk, slot
 *   @stageS.ledger                [PRT_NCLASS x i64]: bytes per buffer class
 *   @stageS.<seq>(rt, chunk, l, slot, micro, step)    one per sequence with calls
 *                                 (instructions with fn < 0 are report-only records)
 *   @stageS.fwd / @stageS.bwd(rt, micro, chunk, slot, step)
 *                                 receive, the layer loop, send (or embed/head)
 *   @stageS.main(rt)              buffers, ledger, the step loop
 *   @main(argc, argv)             prt_init, pick the stage by pp coordinate,
 *                                 prt_finalize
 *
 * Sequences that are not per layer are called with l = 0 (the instance modes
 * then name the layer position through k).  Pipeline messages use
 *   tag = (micro * chunks + receiver's chunk) * 2 + direction (0 fwd, 1 bwd).
 *
 * Guarantees: the module verifies (LLVMVerifyModule before every emit); its
 * text is a pure function of the Program and the host triple; code size is
 * O(stages × instructions), independent of layers and micro-batches (only the
 * schedule tables grow with micro-batches).
 */
#include "codegen.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

/* ---------------------------------------------------------------- runtime tables */

const char *const rt_fn_names[RT_FN_COUNT] = {
#define X(name, sig) #name,
    PRT_OPS(X)
#undef X
};
const char *const rt_fn_sigs[RT_FN_COUNT] = {
#define X(name, sig) sig,
    PRT_OPS(X)
#undef X
};

/* The lifecycle calls, not in PRT_OPS because they return values or are
 * called only by the driver code.  X(name, return, parameters) over
 * {v void, p pointer, i int64_t}.  ORDER: LifeFn. */
#define CG_LIFECYCLE(X)                  \
    X(prt_init, 'p', "ipp")              \
    X(prt_register_buffers, 'v', "ppi")  \
    X(prt_ptr, 'p', "pii")               \
    X(prt_coord, 'i', "pi")              \
    X(prt_steps, 'i', "p")               \
    X(prt_expect_memory, 'v', "pp")      \
    X(prt_step_begin, 'v', "pi")         \
    X(prt_before_optimizer, 'v', "pi")   \
    X(prt_step_end, 'v', "pi")           \
    X(prt_finalize, 'i', "p")            \
    X(abort, 'v', "")

typedef enum {
#define X(name, ret, params) LIFE_##name,
    CG_LIFECYCLE(X)
#undef X
    LIFE_COUNT
} LifeFn;

static const struct {
    const char *name;
    char ret;
    const char *params;
} life_fns[LIFE_COUNT] = {
#define X(name, ret, params) {#name, ret, params},
    CG_LIFECYCLE(X)
#undef X
};

/* Symbol suffix of each sequence's function.  ORDER: SeqKind in ir.h. */
static const char *const seq_symbol[SEQ_COUNT] = {
    "embed_fwd",       "block_fwd",      "head_fwd",        "head_bwd",
    "block_bwd",       "embed_bwd",      "zero_grads_block", "zero_grads_once",
    "grad_sync_block", "grad_sync_once", "optim_block",     "optim_once",
};
_Static_assert(SEQ_COUNT == 12, "seq_symbol[] follows SeqKind");

/* ---------------------------------------------------------------- generator state */

typedef struct Gen {
    const Program *program;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef t_void, t_i1, t_i8, t_i32, t_i64, t_f64, t_ptr;
    LLVMTypeRef t_buffer_desc, t_plan_desc, t_item;
    LLVMTypeRef t_seq_fn;   /* void(i8* rt, i64 chunk, i64 l, i64 slot, i64 micro, i64 step) */
    LLVMTypeRef t_work_fn;  /* void(i8* rt, i64 micro, i64 chunk, i64 slot, i64 step) */
    LLVMTypeRef t_stage_fn; /* void(i8* rt) */
    LLVMTypeRef rt_type[RT_FN_COUNT];
    LLVMValueRef rt_fn[RT_FN_COUNT];
    LLVMTypeRef life_type[LIFE_COUNT];
    LLVMValueRef life_fn[LIFE_COUNT];
    int nstrings;
    /* the function being built */
    LLVMValueRef fn, rt;
    LLVMValueRef coord[PARC_MAX_AXES]; /* prt_coord results, computed once in the entry block */
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
} StageFns;

static LLVMTypeRef sig_type(Gen *g, char c) {
    switch (c) {
    case 'p': return g->t_ptr;
    case 'i': return g->t_i64;
    case 'd': return g->t_f64;
    case 'v': return g->t_void;
    }
    PARC_BUG("bad signature character '%c'", c);
}

static LLVMTypeRef fn_type(Gen *g, char ret, const char *params) {
    LLVMTypeRef types[32];
    int n = (int)strlen(params);
    PARC_ASSERT(n <= 32);
    for (int i = 0; i < n; i++) types[i] = sig_type(g, params[i]);
    return LLVMFunctionType(sig_type(g, ret), types, (unsigned)n, 0);
}

static LLVMValueRef c64(Gen *g, int64_t v) { return LLVMConstInt(g->t_i64, (unsigned long long)v, 1); }

static int is_const(LLVMValueRef v, int64_t k) {
    return LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) == k;
}
/* a + b and a * b, skipping the identities so the text stays readable. */
static LLVMValueRef add(Gen *g, LLVMValueRef a, LLVMValueRef b, const char *name) {
    if (is_const(b, 0)) return a;
    if (is_const(a, 0)) return b;
    return LLVMBuildAdd(g->b, a, b, name);
}
static LLVMValueRef mul(Gen *g, LLVMValueRef a, LLVMValueRef b, const char *name) {
    if (is_const(b, 1)) return a;
    if (is_const(a, 1)) return b;
    if (is_const(a, 0) || is_const(b, 0)) return c64(g, 0);
    return LLVMBuildMul(g->b, a, b, name);
}

/* The struct types mirroring runtime/parc_rt.h, field for field. */
static void build_types(Gen *g) {
    g->t_void = LLVMVoidTypeInContext(g->ctx);
    g->t_i1 = LLVMInt1TypeInContext(g->ctx);
    g->t_i8 = LLVMInt8TypeInContext(g->ctx);
    g->t_i32 = LLVMInt32TypeInContext(g->ctx);
    g->t_i64 = LLVMInt64TypeInContext(g->ctx);
    g->t_f64 = LLVMDoubleTypeInContext(g->ctx);
    g->t_ptr = LLVMPointerType(g->t_i8, 0);

    LLVMTypeRef dims = LLVMArrayType(g->t_i64, PRT_MAX_DIMS);
    LLVMTypeRef desc_fields[] = {
        g->t_ptr, g->t_ptr,                          /* name, init_name */
        g->t_i64, g->t_i64, g->t_i64, g->t_i64,      /* klass, dtype, elems, instances */
        g->t_i64, g->t_i64, g->t_i64,                /* init, first_layer, ndim */
        dims, dims,                                  /* gdims, split_axis */
        g->t_i64, g->t_i64,                          /* zero_axis, copy_of */
        g->t_f64,                                    /* init_std */
        g->t_i64, g->t_i64,                          /* layers_per_chunk, chunk_layer_stride */
    };
    g->t_buffer_desc = LLVMStructCreateNamed(g->ctx, "prt_buffer_desc");
    LLVMStructSetBody(g->t_buffer_desc, desc_fields, sizeof desc_fields / sizeof desc_fields[0], 0);

    LLVMTypeRef plan_fields[] = {
        g->t_ptr, g->t_ptr,                              /* plan_name, source_file */
        g->t_i64,                                        /* naxes */
        LLVMArrayType(g->t_ptr, PRT_MAX_AXES),           /* axis_names */
        LLVMArrayType(g->t_i64, PRT_MAX_AXES),           /* axis_sizes */
        g->t_i64, g->t_i64, g->t_i64,                    /* dp_axis, tp_axis, pp_axis */
        g->t_i64, g->t_i64,                              /* steps, seed */
        g->t_i64, g->t_i64, g->t_i64, g->t_i64, g->t_i64, /* batch, micro_batch, micro_batches, seq, vocab */
        g->t_f64,                                        /* est_step_seconds */
    };
    g->t_plan_desc = LLVMStructCreateNamed(g->ctx, "prt_plan_desc");
    LLVMStructSetBody(g->t_plan_desc, plan_fields, sizeof plan_fields / sizeof plan_fields[0], 0);

    g->t_item = LLVMArrayType(g->t_i64, 4);
    LLVMTypeRef seq_params[] = {g->t_ptr, g->t_i64, g->t_i64, g->t_i64, g->t_i64, g->t_i64};
    g->t_seq_fn = LLVMFunctionType(g->t_void, seq_params, 6, 0);
    LLVMTypeRef work_params[] = {g->t_ptr, g->t_i64, g->t_i64, g->t_i64, g->t_i64};
    g->t_work_fn = LLVMFunctionType(g->t_void, work_params, 5, 0);
    g->t_stage_fn = LLVMFunctionType(g->t_void, &g->t_ptr, 1, 0);
}

/* Declares every runtime function, in PRT_OPS order, then the lifecycle. */
static void declare_runtime(Gen *g) {
    for (int f = 0; f < RT_FN_COUNT; f++) {
        g->rt_type[f] = fn_type(g, 'v', rt_fn_sigs[f]);
        g->rt_fn[f] = LLVMAddFunction(g->mod, rt_fn_names[f], g->rt_type[f]);
    }
    for (int f = 0; f < LIFE_COUNT; f++) {
        g->life_type[f] = fn_type(g, life_fns[f].ret, life_fns[f].params);
        g->life_fn[f] = LLVMAddFunction(g->mod, life_fns[f].name, g->life_type[f]);
    }
    LLVMAddAttributeAtIndex(g->life_fn[LIFE_abort], LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName("noreturn", 8), 0));
}

static LLVMValueRef call_life(Gen *g, LifeFn f, LLVMValueRef *args, unsigned n, const char *name) {
    return LLVMBuildCall2(g->b, g->life_type[f], g->life_fn[f], args, n, life_fns[f].ret == 'v' ? "" : name);
}

static LLVMValueRef call_rt(Gen *g, RtFn f, LLVMValueRef *args, unsigned n) {
    return LLVMBuildCall2(g->b, g->rt_type[f], g->rt_fn[f], args, n, "");
}

/* ---------------------------------------------------------------- constants */

/* A private constant C string, as i8*; NULL gives a null pointer. */
static LLVMValueRef const_string(Gen *g, const char *s) {
    if (!s) return LLVMConstNull(g->t_ptr);
    LLVMValueRef init = LLVMConstStringInContext(g->ctx, s, (unsigned)strlen(s), 0);
    char name[32];
    snprintf(name, sizeof name, ".str.%d", g->nstrings++);
    LLVMValueRef gv = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
    return LLVMConstBitCast(gv, g->t_ptr);
}

static LLVMValueRef const_i64_array(Gen *g, const int64_t *v, int n) {
    LLVMValueRef elems[PRT_MAX_AXES > PRT_NCLASS ? PRT_MAX_AXES : PRT_NCLASS];
    PARC_ASSERT(n <= (int)(sizeof elems / sizeof elems[0]));
    for (int i = 0; i < n; i++) elems[i] = c64(g, v[i]);
    return LLVMConstArray(g->t_i64, elems, (unsigned)n);
}

static LLVMValueRef add_const_global(Gen *g, LLVMValueRef init, const char *name) {
    LLVMValueRef gv = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    return gv;
}

static LLVMValueRef emit_plan_desc(Gen *g) {
    const Program *pr = g->program;
    const Plan *plan = pr->plan;
    LLVMValueRef names[PRT_MAX_AXES];
    int64_t sizes[PRT_MAX_AXES] = {0};
    PARC_ASSERT(plan->mesh.naxes >= 0 && plan->mesh.naxes <= PRT_MAX_AXES);
    for (int a = 0; a < PRT_MAX_AXES; a++) {
        names[a] = a < plan->mesh.naxes ? const_string(g, plan->mesh.axes[a].name) : LLVMConstNull(g->t_ptr);
        sizes[a] = a < plan->mesh.naxes ? plan->mesh.axes[a].size : 0;
    }
    LLVMValueRef fields[] = {
        const_string(g, plan->model.name ? plan->model.name : "plan"),
        const_string(g, plan->file),
        c64(g, plan->mesh.naxes),
        LLVMConstArray(g->t_ptr, names, PRT_MAX_AXES),
        const_i64_array(g, sizes, PRT_MAX_AXES),
        c64(g, pr->dp_axis), c64(g, pr->tp_axis), c64(g, pr->pp_axis),
        c64(g, plan->train.steps), c64(g, (int64_t)plan->train.seed),
        c64(g, plan->train.batch), c64(g, plan->train.micro_batch), c64(g, plan->train.micro_batches),
        c64(g, plan->model.seq), c64(g, plan->model.vocab),
        LLVMConstReal(g->t_f64, 0.0),  /* est_step_seconds: 0 = unknown, the runtime's timeout floor */
    };
    return add_const_global(g, LLVMConstNamedStruct(g->t_plan_desc, fields, sizeof fields / sizeof fields[0]),
                            "plan");
}

static LLVMValueRef emit_buffer_table(Gen *g, const StageProgram *sp) {
    LLVMValueRef *rows = calloc((size_t)sp->nbufs + 1, sizeof *rows);
    PARC_ASSERT(rows);
    for (int i = 0; i < sp->nbufs; i++) {
        const Buffer *bf = &sp->bufs[i];
        int64_t gdims[PRT_MAX_DIMS], split[PRT_MAX_DIMS];
        for (int d = 0; d < PRT_MAX_DIMS; d++) {
            gdims[d] = bf->gdims[d];
            split[d] = bf->split_axis[d];
        }
        LLVMValueRef dims = LLVMConstArray(g->t_i64, (LLVMValueRef[]){c64(g, gdims[0]), c64(g, gdims[1]),
                                                                     c64(g, gdims[2]), c64(g, gdims[3])},
                                           PRT_MAX_DIMS);
        LLVMValueRef splits = LLVMConstArray(g->t_i64, (LLVMValueRef[]){c64(g, split[0]), c64(g, split[1]),
                                                                       c64(g, split[2]), c64(g, split[3])},
                                             PRT_MAX_DIMS);
        LLVMValueRef fields[] = {
            const_string(g, bf->name),
            const_string(g, bf->init_name),
            c64(g, bf->klass), c64(g, bf->dtype), c64(g, bf->elems), c64(g, bf->instances),
            c64(g, bf->init), c64(g, bf->first_layer), c64(g, bf->ndim),
            dims, splits,
            c64(g, bf->zero_axis), c64(g, bf->copy_of),
            LLVMConstReal(g->t_f64, bf->init_std),
            c64(g, bf->layers_per_chunk), c64(g, bf->chunk_layer_stride),
        };
        rows[i] = LLVMConstNamedStruct(g->t_buffer_desc, fields, sizeof fields / sizeof fields[0]);
    }
    char name[64];
    snprintf(name, sizeof name, "stage%d.buffers", sp->stage);
    LLVMValueRef gv = add_const_global(g, LLVMConstArray(g->t_buffer_desc, rows, (unsigned)sp->nbufs), name);
    free(rows);
    return gv;
}

static LLVMValueRef emit_schedule_table(Gen *g, const StageProgram *sp) {
    LLVMValueRef *rows = calloc((size_t)sp->nitems + 1, sizeof *rows);
    PARC_ASSERT(rows);
    for (int i = 0; i < sp->nitems; i++) {
        const WorkItem *w = &sp->items[i];
        LLVMValueRef row[4] = {c64(g, w->kind), c64(g, w->micro), c64(g, w->chunk), c64(g, sp->slot_of_item[i])};
        rows[i] = LLVMConstArray(g->t_i64, row, 4);
    }
    char name[64];
    snprintf(name, sizeof name, "stage%d.schedule", sp->stage);
    LLVMValueRef gv = add_const_global(g, LLVMConstArray(g->t_item, rows, (unsigned)sp->nitems), name);
    free(rows);
    return gv;
}

static LLVMValueRef emit_ledger(Gen *g, const StageProgram *sp) {
    char name[64];
    snprintf(name, sizeof name, "stage%d.ledger", sp->stage);
    return add_const_global(g, const_i64_array(g, sp->ledger, PRT_NCLASS), name);
}

/* ---------------------------------------------------------------- functions, loops */

static LLVMValueRef add_function(Gen *g, LLVMTypeRef type, const char *name, const char *const *params) {
    LLVMValueRef fn = LLVMAddFunction(g->mod, name, type);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    for (unsigned i = 0; params[i]; i++) LLVMSetValueName2(LLVMGetParam(fn, i), params[i], strlen(params[i]));
    return fn;
}

/* Starts the body of fn: an entry block, rt = parameter 0, no cached coordinates. */
static void begin_function(Gen *g, LLVMValueRef fn) {
    g->fn = fn;
    g->rt = LLVMGetParam(fn, 0);
    memset(g->coord, 0, sizeof g->coord);
    g->nptrs = g->cache_ptrs = 0;
    g->entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
}

static LLVMBasicBlockRef new_block(Gen *g, const char *name) {
    return LLVMAppendBasicBlockInContext(g->ctx, g->fn, name);
}

/* prt_coord(rt, axis), called once per function in the entry block (it
 * dominates every use); 0 without the axis. */
static LLVMValueRef coord(Gen *g, int axis) {
    if (axis < 0) return c64(g, 0);
    PARC_ASSERT(axis < PARC_MAX_AXES && axis < g->program->plan->mesh.naxes);
    if (!g->coord[axis]) {
        LLVMBasicBlockRef here = LLVMGetInsertBlock(g->b);
        LLVMValueRef first = LLVMGetFirstInstruction(g->entry);
        /* insert after rt-independent setup: at the top of the entry block */
        if (first) LLVMPositionBuilderBefore(g->b, first);
        else LLVMPositionBuilderAtEnd(g->b, g->entry);
        char name[32];
        snprintf(name, sizeof name, "coord%d", axis);
        LLVMValueRef args[] = {g->rt, c64(g, axis)};
        g->coord[axis] = call_life(g, LIFE_prt_coord, args, 2, name);
        LLVMPositionBuilderAtEnd(g->b, here);
    }
    return g->coord[axis];
}

/* A counted loop "for (i = from; i < to; i++)"; the body goes between
 * loop_begin and loop_end. */
typedef struct Loop {
    LLVMBasicBlockRef pre, head, body, exit;
    LLVMValueRef index, to;
} Loop;

static Loop loop_begin(Gen *g, LLVMValueRef from, LLVMValueRef to, const char *name) {
    Loop lp;
    char buf[64];
    lp.pre = LLVMGetInsertBlock(g->b);
    lp.to = to;
    snprintf(buf, sizeof buf, "%s.head", name);
    lp.head = new_block(g, buf);
    snprintf(buf, sizeof buf, "%s.body", name);
    lp.body = new_block(g, buf);
    snprintf(buf, sizeof buf, "%s.exit", name);
    lp.exit = new_block(g, buf);
    LLVMBuildBr(g->b, lp.head);
    LLVMPositionBuilderAtEnd(g->b, lp.head);
    lp.index = LLVMBuildPhi(g->b, g->t_i64, name);
    LLVMAddIncoming(lp.index, &from, &lp.pre, 1);
    LLVMValueRef more = LLVMBuildICmp(g->b, LLVMIntSLT, lp.index, to, "");
    LLVMBuildCondBr(g->b, more, lp.body, lp.exit);
    LLVMPositionBuilderAtEnd(g->b, lp.body);
    return lp;
}

static void loop_end(Gen *g, Loop *lp) {
    LLVMValueRef next = LLVMBuildAdd(g->b, lp->index, c64(g, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMAddIncoming(lp->index, &next, &latch, 1);
    LLVMBuildBr(g->b, lp->head);
    LLVMMoveBasicBlockAfter(lp->exit, LLVMGetLastBasicBlock(g->fn)); /* blocks in reading order */
    LLVMPositionBuilderAtEnd(g->b, lp->exit);
}

/* ---------------------------------------------------------------- sequences */


/* The parameters of a sequence function. */
typedef struct SeqParams {
    LLVMValueRef chunk, l, slot, micro, step;
} SeqParams;

static LLVMValueRef instance_of(Gen *g, const StageProgram *sp, const Arg *a, const SeqParams *p) {
    LLVMValueRef k = c64(g, a->k);
    switch (a->inst) {
    case INST_FIXED: return k;
    case INST_LAYER: return add(g, mul(g, p->chunk, c64(g, sp->layers_per_chunk), ""), p->l, "");
    case INST_SLOT_L: return add(g, mul(g, add(g, p->l, k, ""), c64(g, sp->nslots), ""), p->slot, "");
    case INST_SLOT: return p->slot;
    case INST_PARITY: return LLVMBuildAnd(g->b, add(g, p->l, k, ""), c64(g, 1), "");
    }
    PARC_BUG("stage %d: bad instance mode %d", sp->stage, a->inst);
}

static LLVMValueRef arg_value(Gen *g, const StageProgram *sp, const Instr *in, int j, const SeqParams *p) {
    const Program *pr = g->program;
    const Arg *a = &in->args[j];
    char want = rt_fn_sigs[in->fn][j + 1];
    char have = 0;
    LLVMValueRef v = NULL;
    switch (a->kind) {
    case ARG_NULL:
        have = 'p';
        v = LLVMConstNull(g->t_ptr);
        break;
    case ARG_BUF: {
        have = 'p';
        if (a->buf < 0 || a->buf >= sp->nbufs)
            PARC_BUG("stage %d: %s argument %d names buffer %d of %d", sp->stage, rt_fn_names[in->fn], j, a->buf,
                     sp->nbufs);
        for (int c = 0; c < g->nptrs && !v; c++) {
            const Arg *b = &g->ptrs[c].arg;
            if (b->buf == a->buf && b->inst == a->inst && b->k == a->k && b->axis == a->axis &&
                (a->axis < 0 || b->i == a->i))
                v = g->ptrs[c].value;
        }
        if (v) break;
        LLVMValueRef args[] = {g->rt, c64(g, a->buf), instance_of(g, sp, a, p)};
        v = call_life(g, LIFE_prt_ptr, args, 3, sp->bufs[a->buf].name ? sp->bufs[a->buf].name : "buf");
        if (a->axis >= 0) {
            int64_t bytes = a->i * dtype_bytes(sp->bufs[a->buf].dtype);
            LLVMValueRef off = mul(g, coord(g, a->axis), c64(g, bytes), "");
            v = LLVMBuildInBoundsGEP2(g->b, g->t_i8, v, &off, 1, "");
        }
        if (g->cache_ptrs && g->nptrs < (int)(sizeof g->ptrs / sizeof g->ptrs[0]))
            g->ptrs[g->nptrs++] = (struct PtrCache){*a, v};
        break;
    }
    case ARG_INT:
        have = 'i';
        v = c64(g, a->i);
        break;
    case ARG_F64:
        have = 'd';
        v = LLVMConstReal(g->t_f64, a->d);
        break;
    case ARG_COORD_TIMES:
        have = 'i';
        v = mul(g, coord(g, a->axis), c64(g, a->i), "");
        break;
    case ARG_STEP:
        have = 'i';
        v = p->step;
        break;
    case ARG_FIRST_SAMPLE: {
        have = 'i';
        int64_t mb = pr->plan->train.micro_batch;
        int64_t dp = plan_axis_size(pr->plan, pr->dp_axis);
        LLVMValueRef first = mul(g, p->micro, c64(g, mb * dp), "");
        v = add(g, first, mul(g, coord(g, pr->dp_axis), c64(g, mb), ""), "first_sample");
        break;
    }
    default: PARC_BUG("stage %d: %s argument %d has bad kind %d", sp->stage, rt_fn_names[in->fn], j, a->kind);
    }
    if (have != want)
        PARC_BUG("stage %d: %s argument %d is '%c' but the runtime signature \"%s\" wants '%c'", sp->stage,
                 rt_fn_names[in->fn], j, have, rt_fn_sigs[in->fn], want);
    return v;
}

/* void stageS.<seq>(rt, chunk, l, slot, micro, step): the instructions in order. */
static LLVMValueRef emit_seq(Gen *g, const StageProgram *sp, SeqKind kind) {
    const Seq *seq = &sp->seq[kind];
    int ncalls = 0;
    for (int i = 0; i < seq->n; i++) {
        if (seq->ins[i].fn >= 0) ncalls++;
        else if (seq->ins[i].coll == COLL_NONE) PARC_BUG("stage %d: a record without a runtime call or collective", sp->stage);
    }
    if (ncalls == 0) return NULL;
    static const char *const params[] = {"rt", "chunk", "l", "slot", "micro", "step", NULL};
    char name[64];
    snprintf(name, sizeof name, "stage%d.%s", sp->stage, seq_symbol[kind]);
    LLVMValueRef fn = add_function(g, g->t_seq_fn, name, params);
    begin_function(g, fn);
    g->cache_ptrs = 1; /* one basic block: every value dominates what follows */
    SeqParams p = {LLVMGetParam(fn, 1), LLVMGetParam(fn, 2), LLVMGetParam(fn, 3), LLVMGetParam(fn, 4),
                   LLVMGetParam(fn, 5)};
    for (int i = 0; i < seq->n; i++) {
        const Instr *in = &seq->ins[i];
        if (in->fn < 0) continue; /* a record for the reports only */
        if (in->fn >= RT_FN_COUNT) PARC_BUG("stage %d %s: bad runtime function %d", sp->stage, name, in->fn);
        int want = (int)strlen(rt_fn_sigs[in->fn]) - 1;
        if (in->nargs != want || in->nargs > IR_MAX_ARGS)
            PARC_BUG("stage %d %s: %s has %d arguments, its signature \"%s\" wants %d", sp->stage, name,
                     rt_fn_names[in->fn], in->nargs, rt_fn_sigs[in->fn], want);
        LLVMValueRef args[IR_MAX_ARGS + 1];
        args[0] = g->rt;
        for (int j = 0; j < in->nargs; j++) args[j + 1] = arg_value(g, sp, in, j, &p);
        call_rt(g, (RtFn)in->fn, args, (unsigned)in->nargs + 1);
    }
    LLVMBuildRetVoid(g->b);
    return fn;
}

static void call_seq(Gen *g, LLVMValueRef fn, LLVMValueRef chunk, LLVMValueRef l, LLVMValueRef slot,
                     LLVMValueRef micro, LLVMValueRef step) {
    if (!fn) return;
    LLVMValueRef args[] = {g->rt, chunk, l, slot, micro, step};
    LLVMBuildCall2(g->b, g->t_seq_fn, fn, args, 6, "");
}

/* ---------------------------------------------------------------- forward, backward */

/* tag = (micro * chunks + receiver chunk) * 2 + dir */
static LLVMValueRef message_tag(Gen *g, const StageProgram *sp, LLVMValueRef micro, LLVMValueRef recv_chunk,
                                int dir) {
    int chunks = sp->chunks > 0 ? sp->chunks : 1;
    LLVMValueRef t = add(g, mul(g, micro, c64(g, chunks), ""), recv_chunk, "");
    return add(g, mul(g, t, c64(g, 2), ""), c64(g, dir), "tag");
}

/* prt_send / prt_recv of one pipeline message of `buf` instance `inst`. */
static void emit_message(Gen *g, const StageProgram *sp, RtFn fn, int delta, int buf, LLVMValueRef inst,
                         LLVMValueRef tag) {
    PARC_ASSERT(buf >= 0 && buf < sp->nbufs);
    LLVMValueRef pargs[] = {g->rt, c64(g, buf), inst};
    LLVMValueRef ptr = call_life(g, LIFE_prt_ptr, pargs, 3, "msg");
    LLVMValueRef args[] = {g->rt, c64(g, g->program->pp_axis), c64(g, delta), ptr, c64(g, sp->boundary_elems), tag};
    call_rt(g, fn, args, 6);
}

/* Emits "if (chunk == then_chunk) then_fn() else else_fn()" where either side
 * may be absent at compile time: `can_then` / `can_else` say which sides are
 * reachable on this stage. */
typedef void (*SideFn)(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p);

static void emit_choice(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p, int can_then,
                        int can_else, int then_chunk, SideFn then_fn, SideFn else_fn, const char *name) {
    if (can_then && can_else) {
        char buf[64];
        snprintf(buf, sizeof buf, "is_chunk%d", then_chunk);
        LLVMValueRef cond = LLVMBuildICmp(g->b, LLVMIntEQ, p->chunk, c64(g, then_chunk), buf);
        snprintf(buf, sizeof buf, "%s.then", name);
        LLVMBasicBlockRef bt = new_block(g, buf);
        snprintf(buf, sizeof buf, "%s.else", name);
        LLVMBasicBlockRef be = new_block(g, buf);
        snprintf(buf, sizeof buf, "%s.done", name);
        LLVMBasicBlockRef bd = new_block(g, buf);
        LLVMBuildCondBr(g->b, cond, bt, be);
        LLVMPositionBuilderAtEnd(g->b, bt);
        then_fn(g, sp, fns, p);
        LLVMBuildBr(g->b, bd);
        LLVMPositionBuilderAtEnd(g->b, be);
        else_fn(g, sp, fns, p);
        LLVMBuildBr(g->b, bd);
        LLVMPositionBuilderAtEnd(g->b, bd);
    } else if (can_then) {
        then_fn(g, sp, fns, p);
    } else if (can_else) {
        else_fn(g, sp, fns, p);
    }
}

/* The stage's position in the model order (schedule.h): chunk c of stage s is
 * model chunk c * p + s.  The first position (stage 0, chunk 0) reads its
 * input through SEQ_EMBED_FWD; the last (stage p-1, chunk v-1) ends in
 * SEQ_HEAD_FWD; everything else receives from / sends to the neighbour. */
static int first_stage(const Gen *g, const StageProgram *sp) { (void)g; return sp->stage == 0; }
static int last_stage(const Gen *g, const StageProgram *sp) { return sp->stage == g->program->nstages - 1; }

static void side_embed_fwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)sp;
    call_seq(g, fns->seq[SEQ_EMBED_FWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}
static void side_recv_fwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)fns;
    emit_message(g, sp, RT_prt_recv, -1, sp->resid_buf, p->slot, message_tag(g, sp, p->micro, p->chunk, 0));
}
static void side_head_fwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)sp;
    call_seq(g, fns->seq[SEQ_HEAD_FWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}
static void side_send_fwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)fns;
    /* the receiver's chunk: the same on the next stage, the next one after wrapping */
    LLVMValueRef recv_chunk = last_stage(g, sp) ? LLVMBuildAdd(g->b, p->chunk, c64(g, 1), "next_chunk") : p->chunk;
    LLVMValueRef inst = add(g, c64(g, (int64_t)sp->layers_per_chunk * sp->nslots), p->slot, "");
    emit_message(g, sp, RT_prt_send, +1, sp->resid_buf, inst, message_tag(g, sp, p->micro, recv_chunk, 0));
}
static void side_head_bwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)sp;
    call_seq(g, fns->seq[SEQ_HEAD_BWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}
static void side_recv_bwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)fns;
    emit_message(g, sp, RT_prt_recv, +1, sp->dresid_buf, c64(g, sp->layers_per_chunk & 1),
                 message_tag(g, sp, p->micro, p->chunk, 1));
}
static void side_embed_bwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)sp;
    call_seq(g, fns->seq[SEQ_EMBED_BWD], p->chunk, c64(g, 0), p->slot, p->micro, p->step);
}
static void side_send_bwd(Gen *g, const StageProgram *sp, const StageFns *fns, const SeqParams *p) {
    (void)fns;
    LLVMValueRef recv_chunk = first_stage(g, sp) ? LLVMBuildSub(g->b, p->chunk, c64(g, 1), "prev_chunk") : p->chunk;
    emit_message(g, sp, RT_prt_send, -1, sp->dresid_buf, c64(g, 0), message_tag(g, sp, p->micro, recv_chunk, 1));
}

static LLVMValueRef emit_work_fn(Gen *g, const StageProgram *sp, const StageFns *fns, int backward) {
    static const char *const params[] = {"rt", "micro", "chunk", "slot", "step", NULL};
    char name[64];
    snprintf(name, sizeof name, "stage%d.%s", sp->stage, backward ? "bwd" : "fwd");
    LLVMValueRef fn = add_function(g, g->t_work_fn, name, params);
    begin_function(g, fn);
    SeqParams p = {.micro = LLVMGetParam(fn, 1), .chunk = LLVMGetParam(fn, 2), .slot = LLVMGetParam(fn, 3),
                   .step = LLVMGetParam(fn, 4)};
    int chunks = sp->chunks > 0 ? sp->chunks : 1;
    int L = sp->layers_per_chunk;
    /* Which ends are reachable on this stage at all. */
    int begins_model = first_stage(g, sp);                 /* chunk 0 here is the model's start */
    int ends_model = last_stage(g, sp);                    /* chunk v-1 here is the model's end */
    int has_neighbour_in = !begins_model || chunks > 1;    /* some chunk receives */
    int has_neighbour_out = !ends_model || chunks > 1;     /* some chunk sends */
    if (!backward) {
        emit_choice(g, sp, fns, &p, begins_model, has_neighbour_in, 0, side_embed_fwd, side_recv_fwd, "input");
        if (L > 0 && fns->seq[SEQ_BLOCK_FWD]) {
            Loop lp = loop_begin(g, c64(g, 0), c64(g, L), "l");
            call_seq(g, fns->seq[SEQ_BLOCK_FWD], p.chunk, lp.index, p.slot, p.micro, p.step);
            loop_end(g, &lp);
        }
        emit_choice(g, sp, fns, &p, ends_model, has_neighbour_out, chunks - 1, side_head_fwd, side_send_fwd, "output");
    } else {
        emit_choice(g, sp, fns, &p, ends_model, has_neighbour_out, chunks - 1, side_head_bwd, side_recv_bwd, "dinput");
        if (L > 0 && fns->seq[SEQ_BLOCK_BWD]) {
            Loop lp = loop_begin(g, c64(g, 0), c64(g, L), "i");
            LLVMValueRef l = LLVMBuildSub(g->b, c64(g, L - 1), lp.index, "l");
            call_seq(g, fns->seq[SEQ_BLOCK_BWD], p.chunk, l, p.slot, p.micro, p.step);
            if (sp->sync_in_backward && fns->seq[SEQ_GRAD_SYNC_BLOCK]) {
                /* the layer's gradients are complete after the last micro-batch's
                 * backward through it: reduce them now (a bucket per layer) */
                int64_t last = g->program->plan->train.micro_batches - 1;
                LLVMValueRef cond = LLVMBuildICmp(g->b, LLVMIntEQ, p.micro, c64(g, last), "last_micro");
                LLVMBasicBlockRef bt = new_block(g, "sync.now"), bd = new_block(g, "sync.done");
                LLVMBuildCondBr(g->b, cond, bt, bd);
                LLVMPositionBuilderAtEnd(g->b, bt);
                call_seq(g, fns->seq[SEQ_GRAD_SYNC_BLOCK], p.chunk, l, c64(g, 0), c64(g, 0), p.step);
                LLVMBuildBr(g->b, bd);
                LLVMPositionBuilderAtEnd(g->b, bd);
            }
            loop_end(g, &lp);
        }
        emit_choice(g, sp, fns, &p, begins_model, has_neighbour_in, 0, side_embed_bwd, side_send_bwd,
                    "doutput");
    }
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* ---------------------------------------------------------------- stage main */

/* for chunk in 0..chunks-1, l in 0..L-1: fn(rt, chunk, l, 0, 0, step) */
static void emit_every_layer(Gen *g, const StageProgram *sp, LLVMValueRef fn, LLVMValueRef step, const char *name) {
    if (!fn || sp->layers_per_chunk <= 0) return;
    char buf[64];
    snprintf(buf, sizeof buf, "%s.chunk", name);
    Loop lc = loop_begin(g, c64(g, 0), c64(g, sp->chunks > 0 ? sp->chunks : 1), buf);
    snprintf(buf, sizeof buf, "%s.l", name);
    Loop ll = loop_begin(g, c64(g, 0), c64(g, sp->layers_per_chunk), buf);
    call_seq(g, fn, lc.index, ll.index, c64(g, 0), c64(g, 0), step);
    loop_end(g, &ll);
    loop_end(g, &lc);
}

static LLVMValueRef emit_stage_main(Gen *g, const StageProgram *sp, const StageFns *fns) {
    static const char *const params[] = {"rt", NULL};
    char name[64];
    snprintf(name, sizeof name, "stage%d.main", sp->stage);
    LLVMValueRef buffers = emit_buffer_table(g, sp);
    LLVMValueRef schedule = emit_schedule_table(g, sp);
    LLVMValueRef ledger = emit_ledger(g, sp);
    LLVMValueRef fn = add_function(g, g->t_stage_fn, name, params);
    begin_function(g, fn);
    LLVMValueRef zero = c64(g, 0);

    LLVMValueRef reg[] = {g->rt, LLVMConstBitCast(buffers, g->t_ptr), c64(g, sp->nbufs)};
    call_life(g, LIFE_prt_register_buffers, reg, 3, "");
    LLVMValueRef exp[] = {g->rt, LLVMConstBitCast(ledger, g->t_ptr)};
    call_life(g, LIFE_prt_expect_memory, exp, 2, "");
    LLVMValueRef steps = call_life(g, LIFE_prt_steps, &g->rt, 1, "steps");

    Loop ls = loop_begin(g, c64(g, 1), LLVMBuildAdd(g->b, steps, c64(g, 1), "steps_end"), "step");
    LLVMValueRef step = ls.index;
    LLVMValueRef sargs[] = {g->rt, step};
    call_life(g, LIFE_prt_step_begin, sargs, 2, "");

    call_seq(g, fns->seq[SEQ_ZERO_GRADS_ONCE], zero, zero, zero, zero, step);
    emit_every_layer(g, sp, fns->seq[SEQ_ZERO_GRADS_BLOCK], step, "zero");

    if (sp->nitems > 0) {
        Loop li = loop_begin(g, c64(g, 0), c64(g, sp->nitems), "item");
        LLVMValueRef field[4];
        static const char *const field_names[4] = {"kind", "micro", "chunk", "slot"};
        for (int f = 0; f < 4; f++) {
            LLVMValueRef idx[] = {zero, li.index, c64(g, f)};
            LLVMValueRef addr = LLVMBuildInBoundsGEP2(g->b, LLVMGlobalGetValueType(schedule), schedule, idx, 3, "");
            field[f] = LLVMBuildLoad2(g->b, g->t_i64, addr, field_names[f]);
        }
        LLVMBasicBlockRef bf = new_block(g, "item.fwd");
        LLVMBasicBlockRef bb = new_block(g, "item.bwd");
        LLVMBasicBlockRef bn = new_block(g, "item.next");
        LLVMValueRef is_fwd = LLVMBuildICmp(g->b, LLVMIntEQ, field[0], c64(g, WORK_FORWARD), "is_fwd");
        LLVMBuildCondBr(g->b, is_fwd, bf, bb);
        LLVMValueRef wargs[] = {g->rt, field[1], field[2], field[3], step};
        LLVMPositionBuilderAtEnd(g->b, bf);
        LLVMBuildCall2(g->b, g->t_work_fn, fns->fwd, wargs, 5, "");
        LLVMBuildBr(g->b, bn);
        LLVMPositionBuilderAtEnd(g->b, bb);
        LLVMBuildCall2(g->b, g->t_work_fn, fns->bwd, wargs, 5, "");
        LLVMBuildBr(g->b, bn);
        LLVMPositionBuilderAtEnd(g->b, bn);
        loop_end(g, &li);
    }

    if (!sp->sync_in_backward) emit_every_layer(g, sp, fns->seq[SEQ_GRAD_SYNC_BLOCK], step, "sync");
    call_seq(g, fns->seq[SEQ_GRAD_SYNC_ONCE], zero, zero, zero, zero, step);
    call_life(g, LIFE_prt_before_optimizer, sargs, 2, "");
    emit_every_layer(g, sp, fns->seq[SEQ_OPTIM_BLOCK], step, "optim");
    call_seq(g, fns->seq[SEQ_OPTIM_ONCE], zero, zero, zero, zero, step);

    call_life(g, LIFE_prt_step_end, sargs, 2, "");
    loop_end(g, &ls);
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* int main(int argc, char **argv) */
static void emit_main(Gen *g, LLVMValueRef plan_desc, const StageFns *stages) {
    const Program *pr = g->program;
    LLVMTypeRef argv_type = LLVMPointerType(g->t_ptr, 0);
    LLVMTypeRef params[] = {g->t_i32, argv_type};
    LLVMValueRef fn = LLVMAddFunction(g->mod, "main", LLVMFunctionType(g->t_i32, params, 2, 0));
    LLVMSetValueName2(LLVMGetParam(fn, 0), "argc", 4);
    LLVMSetValueName2(LLVMGetParam(fn, 1), "argv", 4);
    g->fn = fn;
    memset(g->coord, 0, sizeof g->coord);
    g->entry = new_block(g, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
    LLVMValueRef iargs[] = {LLVMBuildSExt(g->b, LLVMGetParam(fn, 0), g->t_i64, "argc64"),
                            LLVMBuildBitCast(g->b, LLVMGetParam(fn, 1), g->t_ptr, "argv8"),
                            LLVMConstBitCast(plan_desc, g->t_ptr)};
    g->rt = call_life(g, LIFE_prt_init, iargs, 3, "rt");
    LLVMBasicBlockRef done = new_block(g, "finalize");
    if (pr->nstages == 1) {
        LLVMBuildCall2(g->b, g->t_stage_fn, stages[0].main, &g->rt, 1, "");
        LLVMBuildBr(g->b, done);
    } else {
        LLVMValueRef cargs[] = {g->rt, c64(g, pr->pp_axis)};
        LLVMValueRef stage = call_life(g, LIFE_prt_coord, cargs, 2, "stage");
        LLVMBasicBlockRef bad = new_block(g, "bad_stage");
        LLVMValueRef sw = LLVMBuildSwitch(g->b, stage, bad, (unsigned)pr->nstages);
        for (int s = 0; s < pr->nstages; s++) {
            char name[32];
            snprintf(name, sizeof name, "stage%d", s);
            LLVMBasicBlockRef bs = new_block(g, name);
            LLVMAddCase(sw, c64(g, s), bs);
            LLVMPositionBuilderAtEnd(g->b, bs);
            LLVMBuildCall2(g->b, g->t_stage_fn, stages[s].main, &g->rt, 1, "");
            LLVMBuildBr(g->b, done);
        }
        LLVMPositionBuilderAtEnd(g->b, bad);
        call_life(g, LIFE_abort, NULL, 0, "");
        LLVMBuildUnreachable(g->b);
    }
    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMValueRef status = call_life(g, LIFE_prt_finalize, &g->rt, 1, "status");
    LLVMBuildRet(g->b, LLVMBuildTrunc(g->b, status, g->t_i32, ""));
}

static void build_module(Gen *g) {
    const Program *pr = g->program;
    PARC_ASSERT(pr->nstages >= 1 && pr->plan);
    build_types(g);
    declare_runtime(g);
    LLVMValueRef plan_desc = emit_plan_desc(g);
    StageFns *fns = calloc((size_t)pr->nstages, sizeof *fns);
    PARC_ASSERT(fns);
    for (int s = 0; s < pr->nstages; s++) {
        const StageProgram *sp = &pr->stages[s];
        PARC_ASSERT(sp->stage == s);
        if (sp->has_embed && s != 0) PARC_BUG("stage %d holds the embedding; codegen expects it on stage 0", s);
        if (sp->has_head && s != pr->nstages - 1)
            PARC_BUG("stage %d holds the head; codegen expects it on the last stage", s);
        if (pr->nstages > 1 && pr->pp_axis < 0) PARC_BUG("%d stages without a pipeline axis", pr->nstages);
        for (int k = 0; k < SEQ_COUNT; k++) fns[s].seq[k] = emit_seq(g, sp, (SeqKind)k);
        fns[s].fwd = emit_work_fn(g, sp, &fns[s], 0);
        fns[s].bwd = emit_work_fn(g, sp, &fns[s], 1);
        fns[s].main = emit_stage_main(g, sp, &fns[s]);
    }
    emit_main(g, plan_desc, fns);
    free(fns);
}

/* ---------------------------------------------------------------- target, emit */

static SrcLoc no_loc(void) { return (SrcLoc){0}; }

/* The host target machine (PIC); NULL after reporting. */
static LLVMTargetMachineRef host_machine(void) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    char *triple = LLVMGetDefaultTargetTriple();
    LLVMTargetRef target = NULL;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        diag_error(no_loc(), NULL, "codegen: no LLVM target for host triple %s: %s", triple, err ? err : "?");
        LLVMDisposeMessage(err);
        LLVMDisposeMessage(triple);
        return NULL;
    }
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, "generic", "", LLVMCodeGenLevelDefault,
                                                      LLVMRelocPIC, LLVMCodeModelDefault);
    if (!tm) diag_error(no_loc(), NULL, "codegen: cannot create an LLVM target machine for %s", triple);
    LLVMDisposeMessage(triple);
    return tm;
}

/* The emitted structs must match the C layout of the runtime header the
 * generated code is linked against (same host). */
static void check_layouts(Gen *g, LLVMTargetDataRef td) {
    PARC_ASSERT(LLVMABISizeOfType(td, g->t_buffer_desc) == sizeof(prt_buffer_desc));
    PARC_ASSERT(LLVMOffsetOfElement(td, g->t_buffer_desc, 9) == offsetof(prt_buffer_desc, gdims));
    PARC_ASSERT(LLVMOffsetOfElement(td, g->t_buffer_desc, 13) == offsetof(prt_buffer_desc, init_std));
    PARC_ASSERT(LLVMOffsetOfElement(td, g->t_buffer_desc, 15) == offsetof(prt_buffer_desc, chunk_layer_stride));
    PARC_ASSERT(LLVMABISizeOfType(td, g->t_plan_desc) == sizeof(prt_plan_desc));
    PARC_ASSERT(LLVMOffsetOfElement(td, g->t_plan_desc, 3) == offsetof(prt_plan_desc, axis_names));
    PARC_ASSERT(LLVMOffsetOfElement(td, g->t_plan_desc, 14) == offsetof(prt_plan_desc, vocab));
}

static int write_text(LLVMModuleRef mod, const char *out_path) {
    char *text = LLVMPrintModuleToString(mod);
    FILE *f = strcmp(out_path, "-") == 0 ? stdout : fopen(out_path, "w");
    int rc = 0;
    if (!f) {
        diag_error(no_loc(), NULL, "codegen: cannot write %s: %s", out_path, strerror(errno));
        rc = -1;
    } else {
        if (fputs(text, f) == EOF) rc = -1;
        if (f == stdout ? fflush(f) != 0 : fclose(f) != 0) rc = -1;
        if (rc) diag_error(no_loc(), NULL, "codegen: cannot write %s: %s", out_path, strerror(errno));
    }
    LLVMDisposeMessage(text);
    return rc;
}

static int emit_object(LLVMTargetMachineRef tm, LLVMModuleRef mod, const char *out_path) {
    char *err = NULL;
    char *path = strdup(out_path);
    PARC_ASSERT(path);
    int failed = LLVMTargetMachineEmitToFile(tm, mod, path, LLVMObjectFile, &err);
    free(path);
    if (failed) {
        diag_error(no_loc(), NULL, "codegen: LLVM cannot emit object file %s: %s", out_path, err ? err : "?");
        LLVMDisposeMessage(err);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- linking */

#ifndef PARC_CC
#define PARC_CC "cc"
#endif

#ifdef PARC_RT_LIB
/* Appends the words of `s` split at `sep` (empty words dropped) to argv. */
static void push_words(char **argv, int *argc, int max, char *s, const char *sep) {
    for (char *save = NULL, *w = strtok_r(s, sep, &save); w; w = strtok_r(NULL, sep, &save)) {
        PARC_ASSERT(*argc < max - 1);
        argv[(*argc)++] = w;
    }
}

static char *read_file_prefix(const char *path, size_t max) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(max + 1, 1);
    size_t n = buf ? fread(buf, 1, max, f) : 0;
    fclose(f);
    if (buf) {
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
    }
    return buf;
}

static int link_executable(const char *obj_path, const char *out_path, const char *log_path) {
    char mpi_flags[] = PARC_MPI_LINK_FLAGS;
    char mpi_libs[] = PARC_MPI_LIBRARIES;
    char *argv[128];
    int argc = 0;
    argv[argc++] = (char *)PARC_CC;
    argv[argc++] = (char *)obj_path;
    argv[argc++] = (char *)"-o";
    argv[argc++] = (char *)out_path;
#ifdef PARC_RT_SANITIZE
    argv[argc++] = (char *)"-fsanitize=address,undefined";
#endif
    argv[argc++] = (char *)PARC_RT_LIB;
    push_words(argv, &argc, 120, mpi_flags, " ");
    push_words(argv, &argc, 120, mpi_libs, "|");
    argv[argc++] = (char *)PARC_OPENBLAS_LIBRARY;
#ifdef PARC_CUDA_LIBRARIES
    char cuda_libs[] = PARC_CUDA_LIBRARIES;  /* the runtime was built with its CUDA backend */
    push_words(argv, &argc, 120, cuda_libs, "|");
#endif
    argv[argc++] = (char *)"-lm";
    argv[argc] = NULL;
    int status = launch_process(argv, NULL, log_path);
    if (status == 0) return 0;
    char *log = read_file_prefix(log_path, 4000);
    diag_error(no_loc(), NULL, "codegen: linking %s with %s failed (status %d)%s%s", out_path, PARC_CC, status,
               log && *log ? ":\n" : "", log ? log : "");
    free(log);
    return -1;
}
#endif

static int emit_executable(LLVMTargetMachineRef tm, LLVMModuleRef mod, const char *out_path) {
#ifndef PARC_RT_LIB
    (void)tm, (void)mod;
    diag_error(no_loc(), "install MPI and OpenBLAS (libopenmpi-dev libopenblas-dev) and rebuild parc",
               "codegen: cannot link %s: parc was built without the CPU runtime", out_path);
    return -1;
#else
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/parc-link-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        diag_error(no_loc(), NULL, "codegen: cannot create a temporary directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char obj[PATH_MAX + 16], log[PATH_MAX + 16];
    snprintf(obj, sizeof obj, "%s/plan.o", dir);
    snprintf(log, sizeof log, "%s/link.log", dir);
    int rc = emit_object(tm, mod, obj);
    if (rc == 0) rc = link_executable(obj, out_path, log);
    unlink(obj);
    unlink(log);
    rmdir(dir);
    return rc;
#endif
}

int codegen_emit(const Program *program, EmitKind kind, const char *out_path) {
    Gen g = {.program = program};
    g.ctx = LLVMContextCreate();
    g.mod = LLVMModuleCreateWithNameInContext("parc", g.ctx);
    g.b = LLVMCreateBuilderInContext(g.ctx);
    int rc = -1;
    LLVMTargetMachineRef tm = host_machine();
    if (!tm) goto out;
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(g.mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    char *layout = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(g.mod, layout);
    LLVMDisposeMessage(layout);

    build_module(&g);
    check_layouts(&g, td);
    LLVMDisposeTargetData(td);

    char *err = NULL;
    if (LLVMVerifyModule(g.mod, LLVMReturnStatusAction, &err)) {
        diag_error(no_loc(), NULL, "codegen: internal error: the generated LLVM module does not verify (a bug in %s): %s",
                   __FILE__, err ? err : "?");
        LLVMDisposeMessage(err);
        goto out;
    }
    LLVMDisposeMessage(err);
    switch (kind) {
    case EMIT_LLVM: rc = write_text(g.mod, out_path); break;
    case EMIT_OBJ: rc = emit_object(tm, g.mod, out_path); break;
    case EMIT_EXE: rc = emit_executable(tm, g.mod, out_path); break;
    }
out:
    if (tm) LLVMDisposeTargetMachine(tm);
    LLVMDisposeBuilder(g.b);
    LLVMDisposeModule(g.mod);
    LLVMContextDispose(g.ctx);
    return rc;
}

int codegen_struct_layout(int which, uint64_t *size, uint64_t *offsets, int max) {
    if (which != 0 && which != 1) return -1;
    LLVMTargetMachineRef tm = host_machine();
    if (!tm) return -1;
    Gen g = {0};
    g.ctx = LLVMContextCreate();
    build_types(&g);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    LLVMTypeRef t = which == 0 ? g.t_buffer_desc : g.t_plan_desc;
    int n = (int)LLVMCountStructElementTypes(t);
    *size = LLVMABISizeOfType(td, t);
    for (int i = 0; i < n && i < max; i++) offsets[i] = LLVMOffsetOfElement(td, t, (unsigned)i);
    LLVMDisposeTargetData(td);
    LLVMDisposeTargetMachine(tm);
    LLVMContextDispose(g.ctx);
    return n;
}
