/*
 * codegen_stub.c — codegen.h's entry points for the lean `parc`, the executable
 * that does not link LLVM.  Commands that generate code (build, run,
 * lower --emit=codegen) are handed to parc-codegen, the same driver linked
 * with codegen.c, before any pass runs (main.c), so no function here may ever
 * run: reaching one is a compiler bug (PARC_BUG).  codegen_free(NULL), which
 * every Compilation's end calls, frees nothing.
 *
 * Built into parc_codegen_stub, never into parc_codegen (CMakeLists.txt).
 */
#include "codegen.h"

#define NOT_LINKED(fn) PARC_BUG("%s reached in the parc that does not link LLVM: the command should have run parc-codegen", fn)

int codegen_linked(void) { return 0; }

CodegenModule *codegen_build(const Program *program) { NOT_LINKED("codegen_build"); }

void codegen_verify(const CodegenModule *module) { NOT_LINKED("codegen_verify"); }

void codegen_dump(const CodegenModule *module, FILE *out) { NOT_LINKED("codegen_dump"); }

int codegen_write(const CodegenModule *module, EmitKind kind, const char *out_path) { NOT_LINKED("codegen_write"); }

void codegen_free(CodegenModule *module)
{
    if (module) NOT_LINKED("codegen_free");
}

int codegen_emit(const Program *program, EmitKind kind, const char *out_path) { NOT_LINKED("codegen_emit"); }

int codegen_struct_layout(int which, uint64_t *size, uint64_t *offsets, int max) { NOT_LINKED("codegen_struct_layout"); }

int codegen_op_shape_rows(const Program *program, prt_op_shape_desc **rows) { NOT_LINKED("codegen_op_shape_rows"); }

int codegen_module_op_shapes(const CodegenModule *module, prt_op_shape_desc *rows, int max, char *names,
                             size_t names_size)
{
    NOT_LINKED("codegen_module_op_shapes");
}
