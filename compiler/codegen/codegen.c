/*
 * codegen.c — the codegen pass: the LLVM host program of a plan.
 *
 * Takes a verified Program (ir.h).  Emits one LLVM module (typed pointers: every
 * pointer is i8*) that calls only the runtime API of include/parc_rt.h:
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
#include "codegen_gen.h"
#include "process.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

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
    PARC_ASSERT(LLVMOffsetOfElement(td, g->t_buffer_desc, 15) == offsetof(prt_buffer_desc, layer_of_n));
    PARC_ASSERT(LLVMABISizeOfType(td, g->t_plan_desc) == sizeof(prt_plan_desc));
    PARC_ASSERT(LLVMOffsetOfElement(td, g->t_plan_desc, 3) == offsetof(prt_plan_desc, axis_names));
    PARC_ASSERT(LLVMOffsetOfElement(td, g->t_plan_desc, 9) == offsetof(prt_plan_desc, gpus_per_node));
    PARC_ASSERT(LLVMOffsetOfElement(td, g->t_plan_desc, 16) == offsetof(prt_plan_desc, vocab));
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

/* A plan of one rank links the single-process runtime (runtime/serial/: no MPI
 * library, CPU backend); any other links the MPI runtime. */
static int link_executable(const char *obj_path, const char *out_path, const char *log_path, int world) {
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
#ifdef PARC_CUDA_MODULE_DIR
    /* the CUDA backend is a module the runtime dlopens (runtime/prt_backend.c):
     * the program exports every runtime symbol for it and finds it in the build */
    argv[argc++] = (char *)"-rdynamic";
    argv[argc++] = (char *)"-Wl,-rpath," PARC_CUDA_MODULE_DIR;
#endif
    argv[argc++] = (char *)"-Wl,--whole-archive";
#ifdef PARC_RT_SERIAL_LIB
    int serial = world <= 1;
    argv[argc++] = (char *)(serial ? PARC_RT_SERIAL_LIB : PARC_RT_LIB);
#else
    int serial = 0;
    (void)world;
    argv[argc++] = (char *)PARC_RT_LIB;
#endif
    argv[argc++] = (char *)"-Wl,--no-whole-archive";
    if (!serial) {
        push_words(argv, &argc, 120, mpi_flags, " ");
        push_words(argv, &argc, 120, mpi_libs, "|");
    }
    argv[argc++] = (char *)PARC_OPENBLAS_LIBRARY;
    char omp_libs[] = PARC_OPENMP_LIBRARIES;  /* the CPU ops' threads (libgomp) */
    push_words(argv, &argc, 120, omp_libs, "|");
    argv[argc++] = (char *)"-lcjson";  /* checkpoints: JSON headers and manifests, CRC-32 */
    argv[argc++] = (char *)"-lz";
    argv[argc++] = (char *)"-lm";
    argv[argc] = NULL;
    int status = process_run(argv, NULL, log_path);
    if (status == 0) return 0;
    char *log = read_file_prefix(log_path, 4000);
    diag_error(no_loc(), NULL, "codegen: linking %s with %s failed (status %d)%s%s", out_path, PARC_CC, status,
               log && *log ? ":\n" : "", log ? log : "");
    free(log);
    return -1;
}
#endif

static int emit_executable(LLVMTargetMachineRef tm, LLVMModuleRef mod, const char *out_path, int world) {
#ifndef PARC_RT_LIB
    (void)tm, (void)mod, (void)world;
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
    if (rc == 0) rc = link_executable(obj, out_path, log, world);
    unlink(obj);
    unlink(log);
    rmdir(dir);
    return rc;
#endif
}

struct CodegenModule {
    Gen g;
    LLVMTargetMachineRef tm;
};

CodegenModule *codegen_build(const Program *program) {
    LLVMTargetMachineRef tm = host_machine();
    if (!tm) return NULL;
    CodegenModule *m = calloc(1, sizeof *m);
    PARC_ASSERT(m);
    m->tm = tm;
    Gen *g = &m->g;
    g->program = program;
    g->ctx = LLVMContextCreate();
    g->mod = LLVMModuleCreateWithNameInContext("parc", g->ctx);
    g->b = LLVMCreateBuilderInContext(g->ctx);
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(g->mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    char *layout = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(g->mod, layout);
    LLVMDisposeMessage(layout);

    codegen_build_module(g);
    check_layouts(g, td);
    LLVMDisposeTargetData(td);
    return m;
}

void codegen_verify(const CodegenModule *m) {
    char *err = NULL;
    if (LLVMVerifyModule(m->g.mod, LLVMReturnStatusAction, &err))
        PARC_BUG("the generated LLVM module does not verify: %s", err ? err : "?");
    LLVMDisposeMessage(err);
}

void codegen_dump(const CodegenModule *m, FILE *out) {
    char *text = LLVMPrintModuleToString(m->g.mod);
    fputs(text, out);
    LLVMDisposeMessage(text);
}

int codegen_write(const CodegenModule *m, EmitKind kind, const char *out_path) {
    codegen_verify(m);
    switch (kind) {
    case EMIT_LLVM: return write_text(m->g.mod, out_path);
    case EMIT_OBJ: return emit_object(m->tm, m->g.mod, out_path);
    case EMIT_EXE: return emit_executable(m->tm, m->g.mod, out_path, m->g.program->plan->mesh.world);
    }
    PARC_BUG("bad emit kind %d", (int)kind);
}

int codegen_linked(void) { return 1; }

void codegen_free(CodegenModule *m) {
    if (!m) return;
    LLVMDisposeTargetMachine(m->tm);
    LLVMDisposeBuilder(m->g.b);
    LLVMDisposeModule(m->g.mod);
    LLVMContextDispose(m->g.ctx);
    free(m);
}

int codegen_emit(const Program *program, EmitKind kind, const char *out_path) {
    CodegenModule *m = codegen_build(program);
    if (!m) return -1;
    int rc = codegen_write(m, kind, out_path);
    codegen_free(m);
    return rc;
}

int codegen_struct_layout(int which, uint64_t *size, uint64_t *offsets, int max) {
    if (which < 0 || which > 3) return -1;
    LLVMTargetMachineRef tm = host_machine();
    if (!tm) return -1;
    Gen g = {0};
    g.ctx = LLVMContextCreate();
    codegen_build_types(&g);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    LLVMTypeRef t = which == 0 ? g.t_buffer_desc : which == 1 ? g.t_plan_desc : which == 2 ? g.t_data_desc
                                                                                            : g.t_op_shape_desc;
    int n = (int)LLVMCountStructElementTypes(t);
    *size = LLVMABISizeOfType(td, t);
    for (int i = 0; i < n && i < max; i++) offsets[i] = LLVMOffsetOfElement(td, t, (unsigned)i);
    LLVMDisposeTargetData(td);
    LLVMDisposeTargetMachine(tm);
    LLVMContextDispose(g.ctx);
    return n;
}

/* Element i of a constant array or struct (a ConstantDataArray of integers
 * has no operands; an all-zero aggregate has neither). */
static LLVMValueRef const_element(LLVMValueRef v, unsigned i, LLVMTypeRef elem) {
    if (LLVMIsAConstantAggregateZero(v)) return LLVMConstNull(elem);
    if (LLVMIsAConstantDataSequential(v)) return LLVMGetElementAsConstant(v, i);
    return LLVMGetOperand(v, i);
}

int codegen_module_op_shapes(const CodegenModule *m, prt_op_shape_desc *rows, int max, char *names, size_t names_size) {
    /* as the runtime finds it: @plan's op_shapes and nop_shapes, its last two fields */
    LLVMValueRef plan = LLVMGetNamedGlobal(m->g.mod, "plan");
    if (!plan) return -1;
    LLVMValueRef desc = LLVMGetInitializer(plan);
    unsigned fields = LLVMCountStructElementTypes(m->g.t_plan_desc);
    LLVMValueRef table = LLVMGetOperand(desc, fields - 2);
    int n = (int)LLVMConstIntGetSExtValue(LLVMGetOperand(desc, fields - 1));
    if (LLVMIsNull(table)) return n == 0 ? 0 : -1;
    if (LLVMIsAConstantExpr(table)) table = LLVMGetOperand(table, 0);
    LLVMValueRef gv = LLVMGetNamedGlobal(m->g.mod, "op_shapes");
    if (table != gv) return -1;
    LLVMValueRef init = LLVMGetInitializer(gv);
    if ((int)LLVMGetArrayLength(LLVMTypeOf(init)) != n) return -1;
    size_t used = 0;
    for (int r = 0; r < n && r < max; r++) {
        LLVMValueRef row = const_element(init, (unsigned)r, m->g.t_op_shape_desc);
        memset(&rows[r], 0, sizeof rows[r]);
        /* the name: a constant string global, behind a bitcast where pointers are typed */
        LLVMValueRef str = LLVMGetOperand(row, 0);
        if (LLVMIsAConstantExpr(str)) str = LLVMGetOperand(str, 0);
        size_t len = 0;
        const char *text = LLVMIsAGlobalVariable(str) ? LLVMGetAsString(LLVMGetInitializer(str), &len) : "";
        if (used + len + 1 > names_size) return -1;
        memcpy(names + used, text, len);
        names[used + len] = 0;
        rows[r].op = names + used;
        used += len + 1;
        rows[r].stage = LLVMConstIntGetSExtValue(LLVMGetOperand(row, 1));
        rows[r].nargs = LLVMConstIntGetSExtValue(LLVMGetOperand(row, 2));
        LLVMValueRef args = LLVMGetOperand(row, 3);
        for (unsigned j = 0; j < PRT_OP_SHAPE_MAX_ARGS; j++)
            rows[r].args[j] = LLVMConstIntGetSExtValue(const_element(args, j, m->g.t_i64));
    }
    return n;
}
