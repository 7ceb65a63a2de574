/*
 * codegen_tables.c — the code generator's LLVM types (field for field the
 * structs of include/parc_rt.h), the runtime declarations, the constant tables
 * of a plan (plan descriptor, per-stage buffers, schedule and ledger) and the
 * function, block and loop builders the sequence emitter uses.
 */
#include "codegen_gen.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- runtime tables */

const CgLifeFn cg_life_fns[LIFE_COUNT] = {
#define X(name, ret, params) {#name, ret, params},
    CG_LIFECYCLE(X)
#undef X
};
static LLVMTypeRef sig_type(Gen *g, char c) {
    switch (c) {
    case 'p': return g->t_ptr;
    case 'i':
    case 't': return g->t_i64;  /* the dtypes word */
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

/* The struct types mirroring include/parc_rt.h, field for field. */
void codegen_build_types(Gen *g) {
    g->t_void = LLVMVoidTypeInContext(g->ctx);
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
        g->t_ptr, g->t_i64,                          /* layer_of, layer_of_n */
        g->t_i64,                                    /* zero_whole */
    };
    g->t_buffer_desc = LLVMStructCreateNamed(g->ctx, "prt_buffer_desc");
    LLVMStructSetBody(g->t_buffer_desc, desc_fields, sizeof desc_fields / sizeof desc_fields[0], 0);

    LLVMTypeRef plan_fields[] = {
        g->t_ptr, g->t_ptr,                              /* plan_name, source_file */
        g->t_i64,                                        /* naxes */
        LLVMArrayType(g->t_ptr, PRT_MAX_AXES),           /* axis_names */
        LLVMArrayType(g->t_i64, PRT_MAX_AXES),           /* axis_sizes */
        LLVMArrayType(g->t_i64, PRT_MAX_AXES),           /* axis_parts */
        g->t_i64, g->t_i64, g->t_i64,                    /* dp_axis, tp_axis, pp_axis */
        g->t_i64,                                        /* gpus_per_node */
        g->t_i64, g->t_i64,                              /* steps, seed */
        g->t_i64, g->t_i64, g->t_i64, g->t_i64, g->t_i64, /* batch, micro_batch, micro_batches, seq, vocab */
        g->t_f64,                                         /* est_step_seconds */
        LLVMArrayType(g->t_f64, PRT_NPHASES),             /* est_phase_seconds */
        g->t_i64, g->t_i64, g->t_i64, g->t_i64,           /* lr: shape, warmup, stable, decay */
        g->t_f64, g->t_f64,                               /* lr: peak, min */
        g->t_ptr,                                         /* data */
        g->t_ptr, g->t_i64, g->t_i64,                     /* ckpt_dir, ckpt_every, ckpt_keep */
        g->t_ptr, g->t_ptr,                               /* calibrated, model_json */
        g->t_ptr, g->t_i64,                               /* op_shapes, nop_shapes */
    };
    g->t_plan_desc = LLVMStructCreateNamed(g->ctx, "prt_plan_desc");
    LLVMStructSetBody(g->t_plan_desc, plan_fields, sizeof plan_fields / sizeof plan_fields[0], 0);

    LLVMTypeRef shape_fields[] = {g->t_ptr, g->t_i64, g->t_i64, LLVMArrayType(g->t_i64, PRT_OP_SHAPE_MAX_ARGS)};
    g->t_op_shape_desc = LLVMStructCreateNamed(g->ctx, "prt_op_shape_desc"); /* op, stage, nargs, args */
    LLVMStructSetBody(g->t_op_shape_desc, shape_fields, sizeof shape_fields / sizeof shape_fields[0], 0);

    g->t_item = LLVMArrayType(g->t_i64, 4);
    LLVMTypeRef seq_params[] = {g->t_ptr, g->t_i64, g->t_i64, g->t_i64, g->t_i64, g->t_i64};
    g->t_seq_fn = LLVMFunctionType(g->t_void, seq_params, 6, 0);
    LLVMTypeRef work_params[] = {g->t_ptr, g->t_i64, g->t_i64, g->t_i64, g->t_i64};
    g->t_work_fn = LLVMFunctionType(g->t_void, work_params, 5, 0);
    g->t_stage_fn = LLVMFunctionType(g->t_void, &g->t_ptr, 1, 0);
    LLVMTypeRef data_fields[] = {g->t_ptr, g->t_ptr, g->t_i64, g->t_i64, g->t_i64}; /* paths, format, eval */
    g->t_data_desc = LLVMStructCreateNamed(g->ctx, "prt_data_desc");
    LLVMStructSetBody(g->t_data_desc, data_fields, sizeof data_fields / sizeof data_fields[0], 0);
    LLVMTypeRef eval_params[] = {g->t_ptr, g->t_i64};
    g->t_eval_fn = LLVMFunctionType(g->t_void, eval_params, 2, 0);
}

/* Declares every runtime function, in PRT_OPS order, then the lifecycle. */
void codegen_declare_runtime(Gen *g) {
    for (int f = 0; f < RT_FN_COUNT; f++) {
        g->rt_type[f] = fn_type(g, 'v', rt_fn_sigs[f]);
        g->rt_fn[f] = LLVMAddFunction(g->mod, rt_fn_names[f], g->rt_type[f]);
    }
    for (int f = 0; f < LIFE_COUNT; f++) {
        g->life_type[f] = fn_type(g, cg_life_fns[f].ret, cg_life_fns[f].params);
        g->life_fn[f] = LLVMAddFunction(g->mod, cg_life_fns[f].name, g->life_type[f]);
    }
    LLVMAddAttributeAtIndex(g->life_fn[LIFE_abort], LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName("noreturn", 8), 0));
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

LLVMValueRef codegen_const_string(Gen *g, const char *s) { return const_string(g, s); }

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

/* An internal constant i64 array named `name`, made on first use. */
static LLVMValueRef i64_table(Gen *g, const char *name, const int64_t *v, int n) {
    LLVMValueRef gv = LLVMGetNamedGlobal(g->mod, name);
    if (gv) return gv;
    LLVMValueRef *elems = calloc((size_t)n + 1, sizeof *elems);
    PARC_ASSERT(elems);
    for (int i = 0; i < n; i++) elems[i] = c64(g, v[i]);
    gv = add_const_global(g, LLVMConstArray(g->t_i64, elems, (unsigned)n), name);
    free(elems);
    return gv;
}

LLVMValueRef codegen_stage_layer_of(Gen *g, const StageProgram *sp, int sub) {
    char name[64];
    int64_t N = plan_block_layers(g->program->plan);
    if (sub == 0) snprintf(name, sizeof name, "stage%d.layer_of", sp->stage);
    else snprintf(name, sizeof name, "stage%d.layer_of.%d", sp->stage, sub);
    int64_t *v = calloc((size_t)sp->layers + 1, sizeof *v);
    PARC_ASSERT(v);
    int n = 0;
    for (int c = 0; c < sp->chunks; c++)
        for (int l = 0; l < sp->chunk_layers[c]; l++) v[n++] = (sp->chunk_first_layer[c] + l) * N + sub;
    PARC_ASSERT(n == sp->layers);
    LLVMValueRef gv = i64_table(g, name, v, n);
    free(v);
    return gv;
}

LLVMValueRef codegen_stage_chunks(Gen *g, const StageProgram *sp) {
    char name[64];
    snprintf(name, sizeof name, "stage%d.chunks", sp->stage);
    int64_t v[3 * 64];
    PARC_ASSERT(sp->chunks >= 1 && sp->chunks <= 64);
    int64_t base = 0;
    for (int c = 0; c < sp->chunks; c++) {
        v[c] = base;
        v[sp->chunks + c] = sp->chunk_layers[c];
        v[2 * sp->chunks + c] = sp->chunk_first_layer[c];
        base += sp->chunk_layers[c];
    }
    return i64_table(g, name, v, 3 * sp->chunks);
}

/* @data: the plan's data section and evaluation, or a null pointer without either. */
static LLVMValueRef emit_data_desc(Gen *g, const Plan *plan) {
    const DataSpec *d = &plan->data;
    if (!d->present && plan->train.eval_every <= 0) return LLVMConstNull(g->t_ptr);
    LLVMValueRef fields[] = {const_string(g, d->train), const_string(g, d->validation),
                             c64(g, d->present ? d->format : PRT_DATA_TEXT), c64(g, plan->train.eval_every),
                             c64(g, plan->train.eval_batches)};
    LLVMValueRef gv = add_const_global(
        g, LLVMConstNamedStruct(g->t_data_desc, fields, sizeof fields / sizeof fields[0]), "data");
    return LLVMConstBitCast(gv, g->t_ptr);
}

LLVMValueRef codegen_emit_plan_desc(Gen *g) {
    const Program *pr = g->program;
    const Plan *plan = pr->plan;
    LLVMValueRef names[PRT_MAX_AXES];
    int64_t sizes[PRT_MAX_AXES] = {0}, parts[PRT_MAX_AXES] = {0};
    _Static_assert(PRT_MAX_AXES >= PARC_MESH_SLOTS, "the runtime's axes hold the mesh's and the derived ones");
    int slots = plan->mesh.naxes + plan->mesh.nderived;
    PARC_ASSERT(plan->mesh.naxes >= 0 && slots <= PRT_MAX_AXES);
    for (int a = 0; a < PRT_MAX_AXES; a++) {
        names[a] = a < slots ? const_string(g, plan->mesh.axes[a].name) : LLVMConstNull(g->t_ptr);
        sizes[a] = a < slots ? plan->mesh.axes[a].size : 0;
        parts[a] = a < slots ? plan->mesh.axes[a].parts : 0;
    }
    LLVMValueRef phases[PRT_NPHASES];
    for (int k = 0; k < PRT_NPHASES; k++) phases[k] = LLVMConstReal(g->t_f64, pr->est_phase_seconds[k]);
    int64_t nshapes = 0;
    LLVMValueRef shapes = codegen_emit_op_shapes(g, &nshapes);
    Arena text = {0};
    LLVMValueRef model_json = const_string(g, plan_model_json(&text, plan));
    arena_free(&text);
    LLVMValueRef fields[] = {
        const_string(g, plan->model.name ? plan->model.name : "plan"),
        const_string(g, plan->file),
        c64(g, plan->mesh.naxes),
        LLVMConstArray(g->t_ptr, names, PRT_MAX_AXES),
        const_i64_array(g, sizes, PRT_MAX_AXES),
        const_i64_array(g, parts, PRT_MAX_AXES),
        c64(g, pr->dp_axis), c64(g, pr->tp_axis), c64(g, pr->pp_axis),
        c64(g, plan->cluster.gpus_per_node),
        c64(g, plan->train.steps), c64(g, (int64_t)plan->train.seed),
        c64(g, plan->train.batch), c64(g, plan->train.micro_batch), c64(g, plan->train.micro_batches),
        c64(g, plan->model.seq), c64(g, plan->model.vocab),
        LLVMConstReal(g->t_f64, pr->est_step_seconds),
        LLVMConstArray(g->t_f64, phases, PRT_NPHASES),
        c64(g, plan->train.lr_shape), c64(g, plan->train.lr_warmup), c64(g, plan->train.lr_stable),
        c64(g, plan->train.lr_decay), LLVMConstReal(g->t_f64, plan->train.lr),
        LLVMConstReal(g->t_f64, plan->train.lr_scheduled ? plan->train.lr_min : plan->train.lr),
        emit_data_desc(g, plan),
        plan->train.ckpt_dir ? const_string(g, plan->train.ckpt_dir) : LLVMConstNull(g->t_ptr),
        c64(g, plan->train.ckpt_every), c64(g, plan->train.ckpt_keep),
        plan->cluster.calibrated ? const_string(g, plan->cluster.calibrated) : LLVMConstNull(g->t_ptr),
        model_json,
        shapes, c64(g, nshapes),
    };
    return add_const_global(g, LLVMConstNamedStruct(g->t_plan_desc, fields, sizeof fields / sizeof fields[0]),
                            "plan");
}

LLVMValueRef codegen_emit_buffer_table(Gen *g, const StageProgram *sp) {
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
            bf->layer_table ? LLVMConstBitCast(codegen_stage_layer_of(g, sp, bf->sub), g->t_ptr) : LLVMConstNull(g->t_ptr),
            c64(g, bf->layer_table ? sp->layers : 0),
            c64(g, bf->zero_whole),
        };
        rows[i] = LLVMConstNamedStruct(g->t_buffer_desc, fields, sizeof fields / sizeof fields[0]);
    }
    char name[64];
    snprintf(name, sizeof name, "stage%d.buffers", sp->stage);
    LLVMValueRef gv = add_const_global(g, LLVMConstArray(g->t_buffer_desc, rows, (unsigned)sp->nbufs), name);
    free(rows);
    return gv;
}

LLVMValueRef codegen_emit_schedule_table(Gen *g, const StageProgram *sp) {
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

LLVMValueRef codegen_emit_ledger(Gen *g, const StageProgram *sp) {
    char name[64];
    snprintf(name, sizeof name, "stage%d.ledger", sp->stage);
    /* the built program runs on the CPU runtime, which also widens 16-bit
     * operands to fp32 in its workspace */
    int64_t ledger[PRT_NCLASS];
    memcpy(ledger, sp->ledger, sizeof ledger);
    ledger[PRT_WORKSPACE] += sp->cpu_widen;
    ledger[PRT_COMM] += sp->host_staging; /* its pipeline sends' copies, in host memory */
    return add_const_global(g, const_i64_array(g, ledger, PRT_NCLASS), name);
}

/* ---------------------------------------------------------------- functions, loops */

LLVMValueRef codegen_add_function(Gen *g, LLVMTypeRef type, const char *name, const char *const *params) {
    LLVMValueRef fn = LLVMAddFunction(g->mod, name, type);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    for (unsigned i = 0; params[i]; i++) LLVMSetValueName2(LLVMGetParam(fn, i), params[i], strlen(params[i]));
    return fn;
}

/* Starts the body of fn: an entry block, rt = parameter 0, no cached coordinates. */
void codegen_begin_function(Gen *g, LLVMValueRef fn) {
    g->fn = fn;
    g->rt = LLVMGetParam(fn, 0);
    memset(g->coord, 0, sizeof g->coord);
    g->nptrs = g->cache_ptrs = 0;
    g->entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
}

/* prt_coord(rt, axis), called once per function in the entry block (it
 * dominates every use); 0 without the axis. */
LLVMValueRef codegen_coord(Gen *g, int axis) {
    if (axis < 0) return c64(g, 0);
    PARC_ASSERT(axis < PARC_MESH_SLOTS && axis < g->program->plan->mesh.naxes + g->program->plan->mesh.nderived);
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

Loop codegen_loop_begin(Gen *g, LLVMValueRef from, LLVMValueRef to, const char *name) {
    Loop lp;
    char buf[64];
    lp.pre = LLVMGetInsertBlock(g->b);
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

void codegen_loop_end(Gen *g, Loop *lp) {
    LLVMValueRef next = LLVMBuildAdd(g->b, lp->index, c64(g, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMAddIncoming(lp->index, &next, &latch, 1);
    LLVMBuildBr(g->b, lp->head);
    LLVMMoveBasicBlockAfter(lp->exit, LLVMGetLastBasicBlock(g->fn)); /* blocks in reading order */
    LLVMPositionBuilderAtEnd(g->b, lp->exit);
}
