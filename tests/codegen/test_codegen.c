/*
 * test_codegen.c — tests of the codegen pass (compiler/codegen/codegen.c, compiler/tools/launch.c).
 *
 * Builds small Programs BY HAND (independent of lower.c): buffers of every
 * class, sequences that use every ArgKind and InstMode, schedules from
 * schedule.c.  Checks:
 *   1. the LLVM structs codegen emits for prt_buffer_desc / prt_plan_desc have
 *      the C layout (size and every field offset);
 *   2. --emit=llvm text: verifies (codegen_emit verifies before emitting),
 *      contains the expected calls and tables, is deterministic, and its size
 *      does not grow with layers × micro-batches (loops, not unrolled copies);
 *   3. pipelines (1F1B over 2 stages, interleaved 2 × 2 chunks) emit and verify,
 *      with matching send/recv tags (checked by simulating the tag formula the
 *      module implements against the schedule's message order);
 *   4. an object file is written;
 *   5. an executable links with the runtime and runs under mpirun (launch_run):
 *      1 rank, a 2-stage interleaved pipeline on 2 ranks, and 4 stages × 2
 *      chunks × dp 2 on 8 ranks; exit status 0, which includes the runtime's
 *      ledger check of every buffer it allocated from the emitted table;
 *   6. the pass table (compiler/pipeline/passes.c) on example plans with every verifier
 *      on: each pass's dump is non-empty, the codegen row's module is the one
 *      codegen_emit writes; a broken plan, ledger or analysis makes its
 *      verifier abort with an internal error; the fit advice's predicate
 *      accepts exactly the changed plans that keep the rules.
 * Every module emitted here is also built, verified and dumped through
 * codegen_build / codegen_verify / codegen_dump, which must give the same text.
 * Prints "N passed, M failed"; exits non-zero on any failure.
 */
#include "advise.h"
#include "codegen.h"
#include "launch.h"
#include "passes.h"

#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_check.h"

/* ---------------------------------------------------------------- 1. layouts */

static void test_layouts(void) {
    uint64_t size, off[48];
    static const size_t desc_off[] = {
        offsetof(prt_buffer_desc, name),        offsetof(prt_buffer_desc, init_name),
        offsetof(prt_buffer_desc, klass),       offsetof(prt_buffer_desc, dtype),
        offsetof(prt_buffer_desc, elems),       offsetof(prt_buffer_desc, instances),
        offsetof(prt_buffer_desc, init),        offsetof(prt_buffer_desc, first_layer),
        offsetof(prt_buffer_desc, ndim),        offsetof(prt_buffer_desc, gdims),
        offsetof(prt_buffer_desc, split_axis),  offsetof(prt_buffer_desc, zero_axis),
        offsetof(prt_buffer_desc, copy_of),     offsetof(prt_buffer_desc, init_std),
        offsetof(prt_buffer_desc, layer_of),    offsetof(prt_buffer_desc, layer_of_n),
        offsetof(prt_buffer_desc, zero_whole),
    };
    int n = codegen_struct_layout(0, &size, off, 48);
    CHECK(n == (int)(sizeof desc_off / sizeof desc_off[0]), "prt_buffer_desc: %d LLVM fields", n);
    CHECK(size == sizeof(prt_buffer_desc), "prt_buffer_desc: LLVM size %llu, C size %zu",
          (unsigned long long)size, sizeof(prt_buffer_desc));
    for (int i = 0; i < n && i < (int)(sizeof desc_off / sizeof desc_off[0]); i++)
        CHECK(off[i] == desc_off[i], "prt_buffer_desc field %d: LLVM offset %llu, C offset %zu", i,
              (unsigned long long)off[i], desc_off[i]);

    static const size_t plan_off[] = {
        offsetof(prt_plan_desc, plan_name),  offsetof(prt_plan_desc, source_file),
        offsetof(prt_plan_desc, naxes),      offsetof(prt_plan_desc, axis_names),
        offsetof(prt_plan_desc, axis_sizes), offsetof(prt_plan_desc, axis_parts),
        offsetof(prt_plan_desc, dp_axis),
        offsetof(prt_plan_desc, tp_axis),    offsetof(prt_plan_desc, pp_axis),
        offsetof(prt_plan_desc, gpus_per_node),
        offsetof(prt_plan_desc, steps),      offsetof(prt_plan_desc, seed),
        offsetof(prt_plan_desc, batch),      offsetof(prt_plan_desc, micro_batch),
        offsetof(prt_plan_desc, micro_batches), offsetof(prt_plan_desc, seq),
        offsetof(prt_plan_desc, vocab),      offsetof(prt_plan_desc, est_step_seconds),
        offsetof(prt_plan_desc, est_phase_seconds),
        offsetof(prt_plan_desc, lr.shape),   offsetof(prt_plan_desc, lr.warmup),
        offsetof(prt_plan_desc, lr.stable),  offsetof(prt_plan_desc, lr.decay),
        offsetof(prt_plan_desc, lr.peak),    offsetof(prt_plan_desc, lr.min),
        offsetof(prt_plan_desc, data),
        offsetof(prt_plan_desc, ckpt_dir),   offsetof(prt_plan_desc, ckpt_every),
        offsetof(prt_plan_desc, ckpt_keep),  offsetof(prt_plan_desc, calibrated),
        offsetof(prt_plan_desc, model_json),
        offsetof(prt_plan_desc, op_shapes),  offsetof(prt_plan_desc, nop_shapes),
    };
    n = codegen_struct_layout(1, &size, off, 48);
    CHECK(n == (int)(sizeof plan_off / sizeof plan_off[0]), "prt_plan_desc: %d LLVM fields", n);
    CHECK(size == sizeof(prt_plan_desc), "prt_plan_desc: LLVM size %llu, C size %zu", (unsigned long long)size,
          sizeof(prt_plan_desc));
    for (int i = 0; i < n && i < (int)(sizeof plan_off / sizeof plan_off[0]); i++)
        CHECK(off[i] == plan_off[i], "prt_plan_desc field %d: LLVM offset %llu, C offset %zu", i,
              (unsigned long long)off[i], plan_off[i]);

    static const size_t data_off[] = {
        offsetof(prt_data_desc, train),      offsetof(prt_data_desc, validation),
        offsetof(prt_data_desc, format),     offsetof(prt_data_desc, eval_every),
        offsetof(prt_data_desc, eval_batches),
    };
    static const size_t shape_off[] = {
        offsetof(prt_op_shape_desc, op), offsetof(prt_op_shape_desc, stage), offsetof(prt_op_shape_desc, nargs),
        offsetof(prt_op_shape_desc, args),
    };
    n = codegen_struct_layout(3, &size, off, 48);
    CHECK(n == 4 && size == sizeof(prt_op_shape_desc), "prt_op_shape_desc: %d LLVM fields, size %llu, C size %zu", n,
          (unsigned long long)size, sizeof(prt_op_shape_desc));
    for (int i = 0; i < n && i < 4; i++)
        CHECK(off[i] == shape_off[i], "prt_op_shape_desc field %d: LLVM offset %llu, C offset %zu", i,
              (unsigned long long)off[i], shape_off[i]);

    n = codegen_struct_layout(2, &size, off, 48);
    CHECK(n == (int)(sizeof data_off / sizeof data_off[0]), "prt_data_desc: %d LLVM fields", n);
    CHECK(size == sizeof(prt_data_desc), "prt_data_desc: LLVM size %llu, C size %zu", (unsigned long long)size,
          sizeof(prt_data_desc));
    for (int i = 0; i < n && i < (int)(sizeof data_off / sizeof data_off[0]); i++)
        CHECK(off[i] == data_off[i], "prt_data_desc field %d: LLVM offset %llu, C offset %zu", i,
              (unsigned long long)off[i], data_off[i]);
}

/* ---------------------------------------------------------------- hand-built programs */

/* The tiny model: per layer resid[N,C] = resid[N,C] @ w[C,C]. */
enum { MB = 2, T = 4, N = MB * T, C = 8, VOCAB = 16 };
enum { B_W, B_DW, B_M, B_V, B_RESID, B_DRESID, B_TOKENS, B_TARGETS, B_WS, B_COUNT };

typedef struct Shape {
    int stages, chunks, layers_per_chunk, micro_batches, dp;
    SchedKind sched;
} Shape;

static Arg a_buf(int buf, InstMode inst, int k) {
    return (Arg){.kind = ARG_BUF, .inst = (uint8_t)inst, .axis = -1, .buf = buf, .k = k};
}
static Arg a_buf_at(int buf, InstMode inst, int k, int axis, int64_t i) {
    return (Arg){.kind = ARG_BUF, .inst = (uint8_t)inst, .axis = (int8_t)axis, .buf = buf, .k = k, .i = i};
}
static Arg a_int(int64_t i) { return (Arg){.kind = ARG_INT, .i = i}; }
static Arg a_f64(double d) { return (Arg){.kind = ARG_F64, .d = d}; }
static Arg a_null(void) { return (Arg){.kind = ARG_NULL}; }
static Arg a_step(void) { return (Arg){.kind = ARG_STEP}; }
static Arg a_first_sample(void) { return (Arg){.kind = ARG_FIRST_SAMPLE}; }
static Arg a_coord_times(int axis, int64_t i) { return (Arg){.kind = ARG_COORD_TIMES, .axis = (int8_t)axis, .i = i}; }

static void emit_instr(Arena *arena, Seq *seq, RtFn fn, int nargs, const Arg *args) {
    Instr in = {.fn = fn, .nargs = nargs, .coll = COLL_NONE, .axis = -1, .op = -1, .tensor = -1};
    memcpy(in.args, args, (size_t)nargs * sizeof *args);
    ARR_PUSH(arena, seq->ins, seq->n, seq->cap, in);
}
#define INSTR(kind, fn, ...)                                                                          \
    do {                                                                                             \
        Arg args_[] = {__VA_ARGS__};                                                                 \
        emit_instr(arena, &sp->seq[kind], fn, (int)(sizeof args_ / sizeof args_[0]), args_);         \
    } while (0)

static void add_buffer(Arena *arena, StageProgram *sp, const char *name, int klass, int dtype, int64_t elems,
                       int64_t instances) {
    Buffer b = {.name = name, .klass = klass, .dtype = dtype, .elems = elems,
                .instances = instances, .init = PRT_INIT_NONE, .first_layer = -1,
                .split_axis = {-1, -1, -1, -1}, .zero_axis = -1, .copy_of = -1};
    ARR_PUSH(arena, sp->bufs, sp->nbufs, sp->bufs_cap, b);
}

static int dtype_size(int dtype) { return dtype == PRT_BF16 || dtype == PRT_F16 ? 2 : 4; }

/* One stage of the tiny model; sp->items etc. already set. */
static void build_stage(Arena *arena, const Program *pr, StageProgram *sp, const Shape *sh) {
    int L = sh->layers_per_chunk, V = sh->chunks, S = sp->nslots;
    int dp_axis = pr->dp_axis;
    int last = sp->stage == sh->stages - 1;
    add_buffer(arena, sp, "block.w", PRT_WEIGHTS, PRT_F32, C * C, (int64_t)V * L);
    Buffer *w = &sp->bufs[B_W];
    w->init = PRT_INIT_NORMAL;
    w->init_std = 0.02;
    w->init_name = "block.w";
    w->first_layer = sp->chunk_first_layer[0];
    w->layer_table = V > 1; /* chunk c of stage s is model chunk c * p + s */
    w->ndim = 2;
    w->gdims[0] = w->gdims[1] = C;
    add_buffer(arena, sp, "block.w.grad", PRT_GRADS, PRT_F32, C * C, (int64_t)V * L);
    add_buffer(arena, sp, "block.w.adam_m", PRT_OPTIM, PRT_F32, C * C, (int64_t)V * L);
    add_buffer(arena, sp, "block.w.adam_v", PRT_OPTIM, PRT_F32, C * C, (int64_t)V * L);
    add_buffer(arena, sp, "resid", PRT_ACTIVATIONS, PRT_F32, N * C, (int64_t)(L + 1) * S);
    add_buffer(arena, sp, "dresid", PRT_WORKSPACE, PRT_F32, N * C, 2);
    add_buffer(arena, sp, "tokens", PRT_ACTIVATIONS, PRT_I32, N, S);
    add_buffer(arena, sp, "targets", PRT_ACTIVATIONS, PRT_I32, N, S);
    add_buffer(arena, sp, "scratch", PRT_WORKSPACE, PRT_F32, 4 * sh->dp, 1);
    PARC_ASSERT(sp->nbufs == B_COUNT);
    for (int i = 0; i < sp->nbufs; i++)
        sp->ledger[sp->bufs[i].klass] += sp->bufs[i].elems * sp->bufs[i].instances * dtype_size(sp->bufs[i].dtype);
    /* the runtime stages every pipeline send it has not completed (analyze.c's bound) */
    if (sh->stages > 1) sp->ledger[PRT_COMM] += (int64_t)N * C * 4 * sp->nitems;
    sp->resid_buf = B_RESID;
    sp->dresid_buf = B_DRESID;
    sp->boundary_elems = N * C;

    if (sp->has_embed) {
        INSTR(SEQ_EMBED_FWD, RT_prt_data, a_buf(B_TOKENS, INST_SLOT, 0), a_buf(B_TARGETS, INST_SLOT, 0), a_step(),
              a_first_sample(), a_int(MB), a_int(T), a_int(VOCAB), a_int(0));
        INSTR(SEQ_EMBED_FWD, RT_prt_zero, a_buf(B_RESID, INST_SLOT_L, 0), a_int(N * C));
        INSTR(SEQ_EMBED_BWD, RT_prt_acc, a_buf(B_WS, INST_FIXED, 0), a_buf(B_DRESID, INST_FIXED, 0),
              a_coord_times(dp_axis, 4));
    }
    INSTR(SEQ_BLOCK_FWD, RT_prt_matmul_fwd, a_buf(B_RESID, INST_SLOT_L, 1), a_buf(B_RESID, INST_SLOT_L, 0),
          a_buf(B_W, INST_LAYER, 0), a_int(N), a_int(C), a_int(C));
    if (last) {
        INSTR(SEQ_HEAD_FWD, RT_prt_copy, a_buf_at(B_WS, INST_FIXED, 0, dp_axis, 4), a_buf(B_RESID, INST_SLOT_L, L),
              a_int(4));
        INSTR(SEQ_HEAD_BWD, RT_prt_zero, a_buf(B_DRESID, INST_PARITY, L), a_int(N * C));
    }
    INSTR(SEQ_BLOCK_BWD, RT_prt_zero, a_buf(B_DRESID, INST_PARITY, 0), a_int(N * C));
    INSTR(SEQ_BLOCK_BWD, RT_prt_matmul_bwd, a_buf(B_DRESID, INST_PARITY, 0), a_buf(B_DW, INST_LAYER, 0),
          a_buf(B_DRESID, INST_PARITY, 1), a_buf(B_RESID, INST_SLOT_L, 0), a_buf(B_W, INST_LAYER, 0), a_int(N),
          a_int(C), a_int(C));
    INSTR(SEQ_ZERO_GRADS_BLOCK, RT_prt_zero, a_buf(B_DW, INST_LAYER, 0), a_int(C * C));
    INSTR(SEQ_ZERO_GRADS_ONCE, RT_prt_zero, a_buf(B_WS, INST_FIXED, 0), a_int(4));
    if (dp_axis >= 0)
        INSTR(SEQ_GRAD_SYNC_BLOCK, RT_prt_allreduce, a_int(dp_axis), a_buf(B_DW, INST_LAYER, 0), a_int(C * C));
    INSTR(SEQ_OPTIM_BLOCK, RT_prt_adamw, a_buf(B_W, INST_LAYER, 0), a_null(), a_buf(B_DW, INST_LAYER, 0),
          a_buf(B_M, INST_LAYER, 0), a_buf(B_V, INST_LAYER, 0), a_int(C * C), a_step(), a_f64(1e-3), a_f64(0.9),
          a_f64(0.999), a_f64(1e-8), a_f64(0.0));
    INSTR(SEQ_OPTIM_ONCE, RT_prt_zero, a_buf(B_WS, INST_FIXED, 0), a_int(4));
    /* a report-only record (fn < 0): no call, and no function for a sequence of only records */
    Instr record = {.fn = -1, .coll = COLL_ALLREDUCE, .axis = 0, .elems = C * C, .op = -1, .tensor = -1};
    ARR_PUSH(arena, sp->seq[SEQ_GRAD_SYNC_ONCE].ins, sp->seq[SEQ_GRAD_SYNC_ONCE].n, sp->seq[SEQ_GRAD_SYNC_ONCE].cap,
             record);
    ARR_PUSH(arena, sp->seq[SEQ_OPTIM_ONCE].ins, sp->seq[SEQ_OPTIM_ONCE].n, sp->seq[SEQ_OPTIM_ONCE].cap, record);
}

/* Activation slots: lowest free slot at each forward, freed at its backward. */
static int assign_slots(Arena *arena, int n, const WorkItem *items, int chunks, int micro, int **slot_of_item) {
    int *slot = arena_alloc(arena, (size_t)n * sizeof(int));
    int *held = arena_alloc(arena, (size_t)(chunks * micro) * sizeof(int)); /* slot + 1 per (micro, chunk) */
    int *busy = arena_alloc(arena, (size_t)(n + 1) * sizeof(int));
    int nslots = 0;
    for (int i = 0; i < n; i++) {
        int key = items[i].micro * chunks + items[i].chunk;
        if (items[i].kind == WORK_FORWARD) {
            int s = 0;
            while (busy[s]) s++;
            busy[s] = 1;
            held[key] = s + 1;
            slot[i] = s;
            if (s + 1 > nslots) nslots = s + 1;
        } else {
            slot[i] = held[key] - 1;
            busy[slot[i]] = 0;
        }
    }
    *slot_of_item = slot;
    return nslots;
}

static Plan the_plan;

static Program *build_program(Arena *arena, const Shape *sh) {
    Plan *plan = &the_plan;
    memset(plan, 0, sizeof *plan);
    plan->file = "tiny.par";
    plan->model.name = "tiny";
    plan->model.seq = T;
    plan->model.vocab = VOCAB;
    plan->model.layers = sh->stages * sh->chunks * sh->layers_per_chunk;
    plan->train.micro_batch = MB;
    plan->train.micro_batches = sh->micro_batches;
    plan->train.batch = (int64_t)MB * sh->micro_batches * sh->dp;
    plan->train.steps = 3;
    plan->train.seed = 1234;
    Program *pr = arena_alloc(arena, sizeof *pr);
    pr->plan = plan;
    pr->dp_axis = pr->tp_axis = pr->pp_axis = -1;
    if (sh->stages > 1) {
        pr->pp_axis = plan->mesh.naxes;
        plan->mesh.axes[plan->mesh.naxes++] = (MeshAxis){.name = "pp", .size = sh->stages};
    }
    pr->dp_axis = plan->mesh.naxes;
    plan->mesh.axes[plan->mesh.naxes++] = (MeshAxis){.name = "dp", .size = sh->dp};
    plan->mesh.world = sh->stages * sh->dp;
    plan->layout.pp_axis = pr->pp_axis;
    plan->layout.schedule = sh->sched;
    plan->layout.virtual_stages = sh->chunks;
    plan->layout.stages = sh->stages;

    PARC_ASSERT(schedule_build(arena, sh->sched, sh->stages, sh->micro_batches, sh->chunks, &pr->schedule) == 0);
    pr->nstages = sh->stages;
    pr->stages = arena_alloc(arena, (size_t)sh->stages * sizeof *pr->stages);
    for (int s = 0; s < sh->stages; s++) {
        StageProgram *sp = &pr->stages[s];
        sp->stage = s;
        sp->chunks = sh->chunks;
        sp->layers = sh->chunks * sh->layers_per_chunk;
        sp->max_chunk_layers = sh->layers_per_chunk;
        for (int c = 0; c < sh->chunks; c++) {
            sp->chunk_layers[c] = sh->layers_per_chunk;
            sp->chunk_first_layer[c] = (c * sh->stages + s) * sh->layers_per_chunk;
        }
        sp->has_embed = s == 0;
        sp->has_head = s == sh->stages - 1;
        sp->nitems = pr->schedule.count[s];
        sp->items = pr->schedule.items[s];
        sp->nslots = assign_slots(arena, sp->nitems, sp->items, sh->chunks, sh->micro_batches, &sp->slot_of_item);
        build_stage(arena, pr, sp, sh);
        reshard_pipeline(arena, pr, sp);
    }
    return pr;
}

/* ---------------------------------------------------------------- helpers */

static char tmpdir[PATH_MAX];

static char *read_all(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = calloc((size_t)n + 1, 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) buf[0] = 0;
    fclose(f);
    return buf;
}

static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Builds pr's module, verifies it and compares its dump with `text`. */
static int same_as_module_dump(const Program *pr, const char *text) {
    CodegenModule *m = codegen_build(pr);
    if (!m) return 0;
    codegen_verify(m);
    char *dump = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&dump, &size);
    if (!f) {
        codegen_free(m);
        return 0;
    }
    codegen_dump(m, f);
    fclose(f);
    codegen_free(m);
    int same = dump && strcmp(dump, text) == 0;
    free(dump);
    return same;
}

/* Emits pr as LLVM text into tmpdir/name; returns the text (malloc) or NULL. */
static char *emit_text(const Program *pr, const char *name) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    int rc = codegen_emit(pr, EMIT_LLVM, path);
    CHECK(rc == 0, "codegen_emit(EMIT_LLVM, %s) failed (see the diagnostic above)", name);
    char *text = rc == 0 ? read_all(path) : NULL;
    if (text) CHECK(same_as_module_dump(pr, text), "%s: codegen_dump of the verified module differs", name);
    return text;
}

/* ---------------------------------------------------------------- 2. LLVM text */

static void test_llvm_text(void) {
    Arena arena = {0};
    Shape sh = {.stages = 1, .chunks = 1, .layers_per_chunk = 2, .micro_batches = 2, .dp = 1, .sched = SCHED_GPIPE};
    Program *pr = build_program(&arena, &sh);
    char *text = emit_text(pr, "tiny.ll");
    if (text) {
        static const char *const expected[] = {
            "%prt_buffer_desc = type { i8*, i8*, i64, i64, i64, i64, i64, i64, i64, [4 x i64], [4 x i64], i64, i64, double, i8*, i64, i64 }",
            "@stage0.buffers = internal constant [9 x %prt_buffer_desc]",
            "@stage0.schedule = internal constant [4 x [4 x i64]] [[4 x i64] zeroinitializer, [4 x i64] [i64 0, i64 1, i64 0, i64 1], [4 x i64] [i64 1, i64 0, i64 0, i64 0], [4 x i64] [i64 1, i64 1, i64 0, i64 1]]",
            "@stage0.ledger = internal constant [7 x i64]",
            "@plan = internal constant %prt_plan_desc",
            "declare void @prt_matmul_fwd(i8*, i8*, i8*, i8*, i64, i64, i64, i64)",
            "declare void @prt_adamw(i8*, i8*, i8*, i8*, i8*, i8*, i64, i64, double, double, double, double, double, i64)",
            "declare i8* @prt_init(i64, i8*, i8*)",
            "call void @prt_matmul_fwd(i8* %rt,",
            "call void @prt_matmul_bwd(i8* %rt,",
            "call void @prt_data(i8* %rt,",
            "call void @prt_adamw(i8* %rt, i8* %block.w, i8* null, i8* %block.w.grad,",
            "double 1.000000e-03",
            "call void @prt_allreduce(i8* %rt, i64 0,",
            "call i64 @prt_coord(i8* %rt, i64 0)",
            "call void @prt_register_buffers(i8* %rt,",
            "call void @prt_expect_memory(i8* %rt,",
            "call i64 @prt_steps(i8* %rt)",
            "call void @prt_step_begin(i8* %rt, i64 %step)",
            "call void @prt_step_end(i8* %rt, i64 %step)",
            "call i64 @prt_finalize(i8* %rt)",
            "define i32 @main(i32 %argc, i8** %argv)",
            "define internal void @stage0.block_fwd(i8* %rt, i64 %chunk, i64 %l, i64 %slot, i64 %micro, i64 %step)",
            "define internal void @stage0.fwd(i8* %rt, i64 %micro, i64 %chunk, i64 %slot, i64 %step)",
            "define internal void @stage0.main(i8* %rt)",
            "%first_sample",
            "and i64", /* INST_PARITY */
        };
        for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
            CHECK(strstr(text, expected[i]) != NULL, "the LLVM text lacks \"%s\"", expected[i]);
        CHECK(strstr(text, "grad_sync_once") == NULL, "a sequence of records only got a function");
        /* one stage: no pipeline messages */
        CHECK(count_of(text, "call void @prt_send") == 0 && count_of(text, "call void @prt_recv") == 0,
              "a single stage sends or receives");
        /* the resid buffer's name, the plan's axis name */
        CHECK(strstr(text, "c\"resid\\00\"") && strstr(text, "c\"dp\\00\""), "strings missing");

        /* deterministic */
        char *again = emit_text(pr, "tiny2.ll");
        CHECK(again && strcmp(text, again) == 0, "two emits of the same program differ");
        free(again);

        /* no unrolling: 6 layers and 8 micro-batches give the same code, only the
         * schedule table grows */
        Arena arena2 = {0};
        Shape big = sh;
        big.layers_per_chunk = 6;
        big.micro_batches = 8;
        Program *pr2 = build_program(&arena2, &big);
        char *text2 = emit_text(pr2, "tiny_big.ll");
        if (text2) {
            CHECK(count_of(text, "call ") == count_of(text2, "call "), "calls: %d with L=2 m=2, %d with L=6 m=8",
                  count_of(text, "call "), count_of(text2, "call "));
            CHECK(count_of(text, "\n  %") == count_of(text2, "\n  %"), "instructions grow with L or m");
            CHECK(strstr(text2, "[16 x [4 x i64]]") != NULL, "schedule table of 16 items missing");
        }
        free(text2);
        arena_free(&arena2);
    }
    free(text);
    arena_free(&arena);
}

/* ---------------------------------------------------------------- 3. pipelines */

/* Simulates the module's pipeline messages over the schedule: every send's
 * (sender -> receiver stage, direction, tag) must be received by a receive
 * with the same triple, and no two sends share one.  The formulas are the ones
 * codegen.c emits; the IR is checked to contain the calls. */
static void check_tags(const Program *pr) {
    int p = pr->nstages, V = pr->stages[0].chunks, m = pr->schedule.micro_batches;
    int nmsg = 2 * p * m * V;
    int *sent = calloc((size_t)nmsg * 2, sizeof(int)), *recvd = calloc((size_t)nmsg * 2, sizeof(int));
    for (int s = 0; s < p; s++) {
        const StageProgram *sp = &pr->stages[s];
        for (int i = 0; i < sp->nitems; i++) {
            WorkItem w = sp->items[i];
            int c = w.chunk;
            if (w.kind == WORK_FORWARD) {
                if (!(s == 0 && c == 0)) recvd[(s * m * V + w.micro * V + c) * 2 + 0]++;
                if (!(s == p - 1 && c == V - 1)) {
                    int rs = (s + 1) % p, rc = s == p - 1 ? c + 1 : c;
                    sent[(rs * m * V + w.micro * V + rc) * 2 + 0]++;
                }
            } else {
                if (!(s == p - 1 && c == V - 1)) recvd[(s * m * V + w.micro * V + c) * 2 + 1]++;
                if (!(s == 0 && c == 0)) {
                    int rs = (s + p - 1) % p, rc = s == 0 ? c - 1 : c;
                    sent[(rs * m * V + w.micro * V + rc) * 2 + 1]++;
                }
            }
        }
    }
    int bad = 0;
    for (int i = 0; i < nmsg * 2; i++) bad += sent[i] != recvd[i] || sent[i] > 1;
    CHECK(bad == 0, "%d pipeline messages without their matching receive", bad);
    free(sent);
    free(recvd);
}

static void test_pipelines(void) {
    Shape shapes[] = {
        {.stages = 2, .chunks = 1, .layers_per_chunk = 2, .micro_batches = 4, .dp = 1, .sched = SCHED_1F1B},
        {.stages = 2, .chunks = 2, .layers_per_chunk = 1, .micro_batches = 4, .dp = 1, .sched = SCHED_INTERLEAVED},
        {.stages = 4, .chunks = 2, .layers_per_chunk = 2, .micro_batches = 8, .dp = 2, .sched = SCHED_INTERLEAVED},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        Arena arena = {0};
        Program *pr = build_program(&arena, &shapes[k]);
        char name[64];
        snprintf(name, sizeof name, "pipe%zu.ll", k);
        char *text = emit_text(pr, name);
        if (text) {
            CHECK(strstr(text, "call void @prt_send(i8* %rt, i64 0, i64 1,") != NULL, "%s: no forward send", name);
            CHECK(strstr(text, "call void @prt_recv(i8* %rt, i64 0, i64 -1,") != NULL, "%s: no forward receive", name);
            CHECK(strstr(text, "call void @prt_send(i8* %rt, i64 0, i64 -1,") != NULL, "%s: no backward send", name);
            CHECK(strstr(text, "call void @prt_recv(i8* %rt, i64 0, i64 1,") != NULL, "%s: no backward receive", name);
            CHECK(strstr(text, "switch i64 %stage") != NULL, "%s: main does not pick the stage", name);
            check_tags(pr);
        }
        free(text);
        arena_free(&arena);
    }
}

/* ---------------------------------------------------------------- 4, 5. object, executable, run */

/* parc run of a hand-built program: its module written and launched. */
static int run_program(const Program *pr, const char *hosts, int argc, char **argv) {
    CodegenModule *m = codegen_build(pr);
    if (!m) return -1;
    LaunchOptions options = {.hosts = hosts, .restarts = 0};
    int status = launch_run(m, pr, &options, argc, argv);
    codegen_free(m);
    return status;
}

static void test_object_and_run(void) {
    Arena arena = {0};
    Shape sh = {.stages = 1, .chunks = 1, .layers_per_chunk = 2, .micro_batches = 2, .dp = 1, .sched = SCHED_GPIPE};
    Program *pr = build_program(&arena, &sh);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/tiny.o", tmpdir);
    CHECK(codegen_emit(pr, EMIT_OBJ, path) == 0, "EMIT_OBJ failed");
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 0, "no object file at %s", path);

    snprintf(path, sizeof path, "%s/tiny", tmpdir);
    int linked = codegen_emit(pr, EMIT_EXE, path) == 0;
    CHECK(linked, "EMIT_EXE failed: the generated object did not link with the runtime (see above)");
    if (!linked) {
        arena_free(&arena);
        return;
    }
    CHECK(access(path, X_OK) == 0, "no executable at %s", path);

    static char *run_args[] = {(char *)"--steps", (char *)"2", (char *)"--memory"};
    printf("test_codegen: running the 1-rank program (parc run)\n");
    fflush(stdout);
    int status = run_program(pr, NULL, 3, run_args);
    CHECK(status == 0,
          "1-rank run exited with status %d: the runtime library (runtime/*.c) failed the hand-built program "
          "(ledger check = status 3; see its output above)",
          status);
    arena_free(&arena);

    /* 2 ranks, 2 pipeline stages of 2 interleaved chunks: messages cross both ways and wrap around */
    Arena arena2 = {0};
    Shape pipe = {.stages = 2, .chunks = 2, .layers_per_chunk = 1, .micro_batches = 4, .dp = 1,
                  .sched = SCHED_INTERLEAVED};
    Program *pr2 = build_program(&arena2, &pipe);
    printf("test_codegen: running the 2-stage interleaved pipeline on 2 ranks (parc run)\n");
    fflush(stdout);
    status = run_program(pr2, NULL, 3, run_args);
    CHECK(status == 0, "2-rank pipeline run exited with status %d (runtime send/recv, or codegen's tags)", status);
    arena_free(&arena2);

    /* 8 ranks (oversubscribed on small machines): 4 stages × 2 chunks × dp 2, gradient all-reduce,
     * first samples from the dp coordinate */
    Arena arena3 = {0};
    Shape wide = {.stages = 4, .chunks = 2, .layers_per_chunk = 1, .micro_batches = 4, .dp = 2,
                  .sched = SCHED_INTERLEAVED};
    Program *pr3 = build_program(&arena3, &wide);
    static char *quiet_args[] = {(char *)"--steps", (char *)"2"};
    printf("test_codegen: running 4 stages x 2 chunks x dp 2 on 8 ranks (parc run)\n");
    fflush(stdout);
    status = run_program(pr3, NULL, 2, quiet_args);
    CHECK(status == 0, "8-rank pipeline run exited with status %d", status);
    arena_free(&arena3);
}

/* ---------------------------------------------------------------- 6. the pass table */


/* The repository root, from this file's path (tests/codegen/test_codegen.c). */
static const char *source_root(void) {
    static char root[PATH_MAX];
    snprintf(root, sizeof root, "%s", __FILE__);
    char *slash = strrchr(root, '/');
    if (slash) *slash = 0; /* .../tests/codegen */
    slash = strrchr(root, '/');
    if (slash) *slash = 0; /* .../tests */
    slash = strrchr(root, '/');
    if (slash) *slash = 0;
    else snprintf(root, sizeof root, "..");
    return root;
}

static char *dump_to_text(const Pass *p, const Compilation *c) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) return NULL;
    p->dump(c, f);
    fclose(f);
    return text;
}

static void test_pass_table(void) {
    static const char *const plans[] = {"tiny_3d", "tiny_pp_interleaved", "tiny_zero3", "tiny_bf16"};
    static const char *const order[] = {"front",   "balance",    "expand",  "place", "schedule",
                                        "reshard", "autodiff",   "optim",   "tp_overlap", "overlap",
                                        "step_writes", "lower",  "analyze",    "codegen"};
    CHECK(passes_count == 14, "the table has %d passes", passes_count);
    for (int i = 0; i < 14 && i < passes_count; i++) {
        CHECK(passes_find(order[i]) == i, "pass %s at %d", order[i], passes_find(order[i]));
        CHECK(passes[i].run && passes[i].dump && passes[i].verify, "pass %s has run, dump and verify", order[i]);
    }
    CHECK(passes_find("plan") == 0 && passes_find("graph") == 2 && passes_find("ir") == 11,
          "the old dump names plan, graph, ir");
    CHECK(passes_find("asm") == -1, "an unknown pass name");
    CHECK(strcmp(passes_names(), "front, balance, expand, place, schedule, reshard, autodiff, optim, tp_overlap, "
                                 "overlap, step_writes, lower, analyze, codegen") == 0,
          "names: %s", passes_names());
    for (size_t k = 0; k < sizeof plans / sizeof plans[0]; k++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/examples/%s.par", source_root(), plans[k]);
        Arena arena = {0};
        Compilation c;
        int rc = passes_run(&c, &arena, path, 1, passes_count - 1);
        CHECK(rc == 0 && c.module, "%s: the passes with verifiers on failed (see above)", plans[k]);
        if (rc == 0 && c.module) {
            for (int i = 0; i < passes_count; i++) {
                char *text = dump_to_text(&passes[i], &c);
                CHECK(text && strlen(text) > 10, "%s: --emit=%s dumps nothing", plans[k], passes[i].name);
                if (i == passes_count - 1 && text) {
                    CHECK(same_as_module_dump(c.prog, text), "%s: the codegen row's module is not codegen_emit's",
                          plans[k]);
                    CHECK(strstr(text, "define i32 @main") != NULL, "%s: no main in the module", plans[k]);
                }
                free(text);
            }
            CHECK(c.analysis->max_total == c.prog->stages[c.analysis->worst_stage].ledger_total,
                  "%s: analysis and ledger disagree on the worst stage", plans[k]);
        }
        /* each pass alone: on what the rows before it left (a Compilation
         * built up to it), its run, verifier and dump give what the whole
         * table gives up to it */
        for (int i = 1; i < passes_count - 1; i++) {
            Arena a1 = {0}, a2 = {0};
            Compilation before, whole;
            int ok = passes_run(&before, &a1, path, 1, i - 1) == 0 && passes_run(&whole, &a2, path, 1, i) == 0;
            CHECK(ok, "%s: the table up to %s", plans[k], passes[i].name);
            if (ok) {
                CHECK(passes[i].run(&before) == 0, "%s: %s alone reports errors", plans[k], passes[i].name);
                passes[i].verify(&before);
                char *alone = dump_to_text(&passes[i], &before), *all = dump_to_text(&passes[i], &whole);
                CHECK(alone && all && strcmp(alone, all) == 0, "%s: %s run alone dumps otherwise", plans[k],
                      passes[i].name);
                free(alone);
                free(all);
            }
            passes_finish(&before);
            passes_finish(&whole);
            arena_free(&a1);
            arena_free(&a2);
        }
        passes_finish(&c);
        CHECK(c.module == NULL, "%s: passes_finish keeps the module", plans[k]);
        arena_free(&arena);
    }
}

/* Runs verify(c) in a child; passes when it aborts with an internal error
 * whose message contains `expect`. */
static void expect_internal_error(const char *what, void (*verify)(const Compilation *), const Compilation *c,
                                  const char *expect) {
    char log[PATH_MAX + 64];
    snprintf(log, sizeof log, "%s/verify.log", tmpdir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 2) < 0) _exit(99);
        verify(c);
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "%s: fork/wait", what);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "%s: the verifier did not abort (status %d)", what,
          status);
    char *text = read_all(log);
    CHECK(text && strstr(text, "parc: internal error at ") && strstr(text, expect),
          "%s: expected an internal error with `%s`, got: %s", what, expect, text ? text : "(nothing)");
    free(text);
}

static void verify_with(const Compilation *c, const char *name) { passes[passes_find(name)].verify(c); }
static void verify_front_row(const Compilation *c) { verify_with(c, "front"); }
static void verify_analyze_row(const Compilation *c) { verify_with(c, "analyze"); }

static void verify_lower_row(const Compilation *c) { verify_with(c, "lower"); }

/* The overlapped gradient buckets of a dp 2 plan: a start without its wait,
 * a wait without its start and a reader of a result still in flight are
 * compiler bugs. */
static void test_overlap_verifier(void) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/examples/tiny_dp.par", source_root());
    Arena arena = {0};
    Compilation c;
    int rc = passes_run(&c, &arena, path, 1, passes_find("lower"));
    CHECK(rc == 0, "tiny_dp through lower");
    if (rc == 0) {
        StageProgram *sp = &c.prog->stages[0];
        Seq *wait = &sp->seq[SEQ_GRAD_WAIT_BLOCK], *sync = &sp->seq[SEQ_GRAD_SYNC_BLOCK];
        CHECK(wait->n > 1 && sync->n == wait->n && instr_is_wait(&wait->ins[0]) && instr_is_start(&sync->ins[0]),
              "tiny_dp: every bucket's all-reduce started with a wait (%d starts, %d waits)", sync->n, wait->n);
        if (wait->n > 1) {
            Instr first = wait->ins[0];
            wait->ins[0] = wait->ins[1]; /* the first start loses its wait: the second's is there twice */
            expect_internal_error("missing wait", verify_lower_row, &c, "has 0 waits in grad_wait.block, not one");
            wait->ins[0] = first;
            Instr start = sync->ins[0];
            sync->ins[0].fn = RT_prt_allreduce; /* a wait left without its start */
            expect_internal_error("wait without a start", verify_lower_row, &c, "has 0 starts, not one");
            sync->ins[0] = start;
            Instr second = sync->ins[1]; /* the second bucket reads the first's buffer while it is in flight */
            sync->ins[1].args[1] = sync->ins[0].args[1];
            expect_internal_error("reader in flight", verify_lower_row, &c, "may be in flight");
            sync->ins[1] = second;
            verify_lower_row(&c); /* restored: passes */
        }
    }
    passes_finish(&c);
    arena_free(&arena);
}

/* ZeRO-2's reduce-scatters started in the backward (overlap_scatters): a
 * start without its wait, a wait before its start and a reader of a buffer in
 * flight are compiler bugs. */
static void test_overlap_scatter_verifier(void) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/examples/tiny_zero2.par", source_root());
    Arena arena = {0};
    Compilation c;
    int rc = passes_run(&c, &arena, path, 1, passes_find("lower"));
    CHECK(rc == 0, "tiny_zero2 through lower");
    if (rc == 0) {
        Seq *bwd = &c.prog->stages[0].seq[SEQ_BLOCK_BWD];
        int first = -1, starts = 0, waits = 0, wait_at = -1;
        for (int i = 0; i < bwd->n; i++) {
            if (instr_is_start(&bwd->ins[i])) starts++, first = first < 0 ? i : first;
            if (instr_is_wait(&bwd->ins[i])) waits++, wait_at = wait_at < 0 ? i : wait_at;
        }
        CHECK(starts == 12 && waits == 12 && first >= 0 && wait_at > first,
              "tiny_zero2: 12 reduce-scatters started in block.bwd, 12 waits after them (%d, %d)", starts, waits);
        if (first >= 0 && wait_at > first) {
            Instr st = bwd->ins[first];
            bwd->ins[first].fn = RT_prt_reducescatter; /* its wait is left without a start */
            expect_internal_error("scatter wait without a start", verify_lower_row, &c, "has 0 starts before it");
            bwd->ins[first] = st;
            Instr next = bwd->ins[first + 1]; /* the next instruction writes the gradient in flight */
            bwd->ins[first + 1] = bwd->ins[first - 1];
            expect_internal_error("scatter input written in flight", verify_lower_row, &c, "is in flight");
            bwd->ins[first + 1] = next;
            Instr w = bwd->ins[wait_at];
            bwd->ins[wait_at] = bwd->ins[wait_at - 1]; /* a start loses its wait */
            expect_internal_error("scatter without its wait", verify_lower_row, &c, "not one after it");
            bwd->ins[wait_at] = w;
            Seq *head = &c.prog->stages[0].seq[SEQ_HEAD_BWD]; /* the head's scatters are started too */
            int head_wait = -1;
            for (int i = 0; i < head->n && head_wait < 0; i++)
                if (instr_is_wait(&head->ins[i])) head_wait = i;
            CHECK(head_wait > 0, "tiny_zero2: head.bwd waits for its started reduce-scatters");
            if (head_wait > 0) {
                Instr hw = head->ins[head_wait];
                head->ins[head_wait] = head->ins[head_wait - 1]; /* a start loses its wait */
                expect_internal_error("head scatter without its wait", verify_lower_row, &c, "not one after it");
                head->ins[head_wait] = hw;
            }
            verify_lower_row(&c); /* restored: passes */
        }
    }
    passes_finish(&c);
    arena_free(&arena);
}

/* ZeRO-3's gathers prefetched a layer ahead (overlap_gather.c): a prefetch
 * that runs on the last layer too, the first layer's own start run on every
 * layer, a guarded gather left blocking and a first layer that starts none
 * are compiler bugs. */
static void test_overlap_gather_verifier(void) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/examples/tiny_zero3.par", source_root());
    Arena arena = {0};
    Compilation c;
    int rc = passes_run(&c, &arena, path, 1, passes_find("lower"));
    CHECK(rc == 0, "tiny_zero3 through lower");
    if (rc == 0) {
        Seq *fwd = &c.prog->stages[0].seq[SEQ_BLOCK_FWD];
        int own = -1, next = -1, wait = -1;
        for (int i = 0; i < fwd->n; i++) {
            const Instr *ins = &fwd->ins[i];
            if (ins->fn == RT_prt_allgather_start && ins->when == WHEN_L_FIRST && own < 0) own = i;
            if (ins->fn == RT_prt_allgather_start && ins->when == WHEN_L_NOT_LAST && next < 0) next = i;
            if (instr_is_wait(ins) && wait < 0) wait = i;
        }
        CHECK(own >= 0 && next > own && wait > next,
              "tiny_zero3: block.fwd starts its own gathers (%d), the next layer's (%d), then waits (%d)", own, next,
              wait);
        if (own >= 0 && next > own && wait > next) {
            Instr saved = fwd->ins[next];
            fwd->ins[next].when = WHEN_ALWAYS; /* the last layer prefetches a layer that is not there */
            expect_internal_error("prefetch past the last layer", verify_lower_row, &c, "layers ends with the");
            fwd->ins[next] = saved;
            saved = fwd->ins[own];
            fwd->ins[own].when = WHEN_ALWAYS; /* every layer gathers its own again, over the prefetched copy */
            expect_internal_error("own gather on every layer", verify_lower_row, &c,
                                  "while the collective started on it is in flight");
            fwd->ins[own].fn = RT_prt_allgather; /* a blocking gather that runs on some layers only */
            fwd->ins[own].when = WHEN_L_FIRST;
            expect_internal_error("guarded blocking gather", verify_lower_row, &c, "which only started collectives do");
            fwd->ins[own] = saved;
            fwd->ins[own].when = WHEN_L_LAST; /* the forward's first layer starts nothing for itself */
            expect_internal_error("first layer without its gather", verify_lower_row, &c, "has no collective in flight");
            fwd->ins[own] = saved;
            verify_lower_row(&c); /* restored: passes */
        }
    }
    passes_finish(&c);
    arena_free(&arena);
}

static void test_verifiers_fail(void) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/examples/tiny_3d.par", source_root());
    Arena arena = {0};
    Compilation c;
    int rc = passes_run(&c, &arena, path, 1, passes_find("analyze"));
    CHECK(rc == 0, "tiny_3d through analyze");
    if (rc == 0) {
        c.plan.mesh.world++;
        expect_internal_error("plan world", verify_front_row, &c, "axis sizes multiply to 8, world is 9");
        c.plan.mesh.world--;
        c.plan.train.micro_batches++;
        expect_internal_error("plan batch", verify_front_row, &c, "is not micro_batch");
        c.plan.train.micro_batches--;
        c.analysis->stages[0].ledger[PRT_GRADS] += 4;
        expect_internal_error("analysis ledger", verify_analyze_row, &c, "analyzed gradients");
        c.analysis->stages[0].ledger[PRT_GRADS] -= 4;
        c.analysis->worst_stage = c.prog->nstages;
        expect_internal_error("worst stage", verify_analyze_row, &c, "worst stage");
    }
    passes_finish(&c);
    arena_free(&arena);
}

static void verify_reshard_row(const Compilation *c) { verify_with(c, "reshard"); }
static void verify_autodiff_row(const Compilation *c) { verify_with(c, "autodiff"); }
static void verify_optim_row(const Compilation *c) { verify_with(c, "optim"); }

/* Instructions of sequence q summed over the stages. */
static int seq_instrs(const Program *prog, SeqKind q) {
    int n = 0;
    for (int s = 0; s < prog->nstages; s++) n += prog->stages[s].seq[q].n;
    return n;
}

/* The lowering rows reshard, autodiff and optim: each adds its sequences and
 * nothing of the next; the ledger waits for `lower`; each row's verifier
 * holds after it and reports a broken program as an internal error. */
static void test_lowering_rows(void) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/examples/tiny_3d.par", source_root());
    static const char *const rows[] = {"reshard", "autodiff", "optim"};
    void (*const verifiers[])(const Compilation *) = {verify_reshard_row, verify_autodiff_row, verify_optim_row};
    for (int r = 0; r < 3; r++) {
        Arena arena = {0};
        Compilation c;
        int rc = passes_run(&c, &arena, path, 1, passes_find(rows[r]));
        CHECK(rc == 0 && c.prog, "tiny_3d through %s", rows[r]);
        if (rc == 0 && c.prog) {
            const Program *p = c.prog;
            CHECK(seq_instrs(p, SEQ_BLOCK_FWD) > 0 && seq_instrs(p, SEQ_SEND_FWD) > 0 && seq_instrs(p, SEQ_RECV_BWD) > 0,
                  "%s: forward sequences and pipeline messages", rows[r]);
            CHECK((seq_instrs(p, SEQ_BLOCK_BWD) > 0) == (r >= 1), "%s: backward sequences %d", rows[r],
                  seq_instrs(p, SEQ_BLOCK_BWD));
            CHECK((seq_instrs(p, SEQ_OPTIM_BLOCK) > 0 && seq_instrs(p, SEQ_GRAD_SYNC_BLOCK) > 0) == (r >= 2),
                  "%s: optimizer sequences %d", rows[r], seq_instrs(p, SEQ_OPTIM_BLOCK));
            CHECK(p->stages[0].ledger_total == 0, "%s: the ledger before `lower`", rows[r]);
            Instr *ins = &c.prog->stages[0].seq[SEQ_BLOCK_FWD].ins[0];
            int k = 0;
            while (k < ins->nargs && ins->args[k].kind != ARG_BUF) k++;
            CHECK(k < ins->nargs, "%s: the first block instruction takes a buffer", rows[r]);
            if (k < ins->nargs) {
                int buf = ins->args[k].buf;
                ins->args[k].buf = c.prog->stages[0].nbufs;
                expect_internal_error(rows[r], verifiers[r], &c, "names buffer");
                ins->args[k].buf = buf;
            }
        }
        passes_finish(&c);
        arena_free(&arena);
    }
}

/* Loads examples/<name>.par through the front pass into *c; 0 on success. */
static int load_example(Compilation *c, Arena *arena, const char *name) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/examples/%s.par", source_root(), name);
    int rc = passes_run(c, arena, path, 1, passes_find("front"));
    CHECK(rc == 0, "%s parses", name);
    return rc;
}

static Plan with_micro(const Plan *base, int64_t micro_batch, int64_t micro_batches) {
    Plan p = *base;
    p.train.micro_batch = micro_batch, p.train.micro_batches = micro_batches;
    return p;
}

/* The fit advice lowers only changed plans that keep the rules. */
static void test_variant_predicate(void) {
    Arena arena = {0};
    Compilation c;
    /* interleaved over 2 stages, batch 8, micro_batch 2, no data axis */
    if (load_example(&c, &arena, "tiny_pp_interleaved") == 0) {
        Plan p = c.plan;
        CHECK(advise_variant_valid(&p), "the checked plan keeps the rules");
        p = with_micro(&c.plan, 1, 8);
        CHECK(advise_variant_valid(&p), "micro_batch 1: 8 micro-batches, a multiple of 2 stages");
        p = with_micro(&c.plan, 8, 1);
        CHECK(!advise_variant_valid(&p), "micro_batch 8: 1 micro-batch, not a multiple of 2 stages");
        p = with_micro(&c.plan, 2, 5);
        CHECK(!advise_variant_valid(&p), "micro_batches not batch / micro_batch");
        p = c.plan;
        p.layout.zero_stage = 1, p.layout.zero_axis = -1;
        CHECK(!advise_variant_valid(&p), "ZeRO without a data axis");
    }
    arena_free(&arena);
    Arena arena2 = {0};
    /* 1F1B over 2 stages, dp 2, batch 8, micro_batch 1 */
    if (load_example(&c, &arena2, "tiny_3d") == 0) {
        Plan p = with_micro(&c.plan, 2, 2);
        CHECK(advise_variant_valid(&p), "micro_batch 2: 2 micro-batches for 2 stages");
        p = with_micro(&c.plan, 4, 1);
        CHECK(!advise_variant_valid(&p), "micro_batch 4: 1F1B needs 2 micro-batches");
        p = with_micro(&c.plan, 3, 1);
        CHECK(!advise_variant_valid(&p), "micro_batch 3 x dp 2 does not divide batch 8");
        p = c.plan;
        for (int z = 1; z <= 3; z++) {
            p.layout.zero_stage = z, p.layout.zero_axis = p.layout.dim_axis[DIM_BATCH];
            CHECK(advise_variant_valid(&p), "zero %d over the batch axis", z);
        }
        p.layout.zero_axis = p.layout.pp_axis;
        CHECK(!advise_variant_valid(&p), "ZeRO over the pipeline axis");
        p = c.plan;
        p.layout.recompute = RECOMPUTE_FULL;
        CHECK(advise_variant_valid(&p), "recompute full");
    }
    arena_free(&arena2);
}

/* ---------------------------------------------------------------- main */

/* Busiest stage of a two-stage split with n0 layers on stage 0, from the
 * balance pass's own figures (embedding on stage 0, head on stage 1). */
static double two_stage_busiest(const Layout *l, double micro, int layers, int n0) {
    double a = micro * (n0 * l->balance_layer_s + l->balance_embed_s);
    double b = micro * ((layers - n0) * l->balance_layer_s + l->balance_head_s);
    return a > b ? a : b;
}

/* `balance auto`: the split of least busy time, ties to the even one. */
static void test_balance(void) {
    Arena arena = {0};
    Compilation c;
    /* three stages over four layers: the extra layer goes to the middle stage */
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/examples/tiny_pp_balance.par", source_root());
    CHECK(passes_run(&c, &arena, path, 1, passes_find("balance")) == 0, "tiny_pp_balance balances");
    const Layout *l = &c.plan.layout;
    CHECK(l->balanced && l->chunk_layers[0] == 1 && l->chunk_layers[1] == 2 && l->chunk_layers[2] == 1 &&
              l->chunk_first[1] == 1 && l->chunk_first[2] == 3,
          "pp 3 over 4 layers: 1 + 2 + 1, got %d + %d + %d", l->chunk_layers[0], l->chunk_layers[1],
          l->chunk_layers[2]);
    CHECK(l->balance_busy_s < l->balance_even_busy_s && l->balance_head_s > l->balance_embed_s &&
              l->balance_embed_s > 0,
          "busiest %g s below the even split's %g s; head %g s > embedding %g s > 0", l->balance_busy_s,
          l->balance_even_busy_s, l->balance_head_s, l->balance_embed_s);
    passes_finish(&c);

    /* two stages of the tiny GPT: the head costs less than a layer, so 2 + 2 stays;
     * with a 32x larger vocabulary it costs about ten, and stage 0 takes 3 of 4 */
    for (int heavy = 0; heavy < 2; heavy++) {
        if (load_example(&c, &arena, "tiny_pp_1f1b")) break;
        Plan *written = &c.written;
        written->layout.balance = BALANCE_AUTO;
        if (heavy) written->model.vocab = 8192;
        Compilation b;
        CHECK(passes_run_plan(&b, &arena, written, 1, passes_find("balance")) == 0,
              "the balance pass of tiny_pp_1f1b (vocab %lld)", (long long)written->model.vocab);
        Plan *p = &b.plan;
        int want = heavy ? 3 : 2;
        CHECK(p->layout.chunk_layers[0] == want && p->layout.chunk_layers[1] == 4 - want &&
                  p->layout.chunk_first[1] == want,
              "vocab %lld: %d + %d layers, expected %d + %d", (long long)p->model.vocab, p->layout.chunk_layers[0],
              p->layout.chunk_layers[1], want, 4 - want);
        double micro = (double)p->train.micro_batches, best = 1e300;
        for (int n0 = 1; n0 <= 3; n0++) {
            double t = two_stage_busiest(&p->layout, micro, 4, n0);
            if (t < best) best = t;
        }
        CHECK(fabs(p->layout.balance_busy_s - best) <= 1e-9 * best &&
                  fabs(p->layout.balance_even_busy_s - two_stage_busiest(&p->layout, micro, 4, 2)) <= 1e-9 * best,
              "vocab %lld: chosen %g s is the least of every split (%g s), even %g s", (long long)p->model.vocab,
              p->layout.balance_busy_s, best, p->layout.balance_even_busy_s);
        CHECK(heavy ? p->layout.balance_busy_s < p->layout.balance_even_busy_s
                    : p->layout.balance_busy_s == p->layout.balance_even_busy_s,
              "vocab %lld: %s", (long long)p->model.vocab, heavy ? "faster than even" : "a tie keeps the even split");
        passes_finish(&b);
        passes_finish(&c);
    }
    arena_free(&arena);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/parc-test-codegen-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_layouts();
    test_llvm_text();
    test_pipelines();
    test_object_and_run();
    test_pass_table();
    test_verifiers_fail();
    test_overlap_verifier();
    test_overlap_scatter_verifier();
    test_overlap_gather_verifier();
    test_lowering_rows();
    test_variant_predicate();
    test_balance();
    if (failed == 0) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "test_codegen: could not remove %s\n", tmpdir);
    } else {
        fprintf(stderr, "test_codegen: outputs kept in %s\n", tmpdir);
    }
    printf("test_codegen: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
