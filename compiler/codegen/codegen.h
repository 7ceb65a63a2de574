/*
 * codegen.h — the codegen pass: the host program of a plan.
 *
 * codegen.c takes a verified Program (ir.h) and emits, through the LLVM C API,
 * one module: constant tables per pipeline stage (buffer descriptors, schedule,
 * memory ledger), one function per (stage, instruction sequence), per-stage
 * forward/backward drivers with the pipeline send/recv, a per-stage step loop
 * and `main`, which asks the runtime for the rank's pipeline coordinate and runs
 * that stage.  Code size grows with stages and sequences, never with layers or
 * micro-batches: those are loops and tables.
 *
 * The implementation is three files sharing codegen_gen.h: codegen_tables.c,
 * codegen_seq.c and this interface's codegen.c.
 */
#ifndef PARC_CODEGEN_H
#define PARC_CODEGEN_H

#include <stdint.h>

#include "ir.h"

typedef enum { EMIT_LLVM, EMIT_OBJ, EMIT_EXE } EmitKind;

/* 1 in an executable linked with the code generator (codegen.c, LLVM:
 * parc-codegen and the tests); 0 in the lean parc, linked with codegen_stub.c,
 * which calls no other function of this header but hands every command that
 * generates code to parc-codegen (main.c). */
int codegen_linked(void);

/* The LLVM module of a program, built and not yet written. */
typedef struct CodegenModule CodegenModule;

/* Builds the module of a Program for the host target.  Returns NULL after
 * reporting (via diag_error) when LLVM has no target for the host.  A Program
 * that breaks ir.h's contract (argument kinds against the runtime signature,
 * buffer indices, instance modes) is a compiler bug: PARC_BUG. */
CodegenModule *codegen_build(const Program *program);

/* LLVMVerifyModule; a module that does not verify is a compiler bug: PARC_BUG. */
void codegen_verify(const CodegenModule *module);

/* The module as textual IR, deterministic for a given Program and host (no
 * pointers, no hash order). */
void codegen_dump(const CodegenModule *module, FILE *out);

/* Verifies the module, then writes it.  EMIT_LLVM writes textual IR to
 * out_path ("-" = stdout); EMIT_OBJ an object file for the host triple (PIC);
 * EMIT_EXE links that object with the runtime library, MPI and OpenBLAS into
 * an executable using the C compiler parc was built with.  Errors from LLVM
 * (target lookup, emit) and from the linker (with its own message), and
 * EMIT_EXE when parc was built without the CPU runtime, are reported via
 * diag_error; returns -1 then, else 0. */
int codegen_write(const CodegenModule *module, EmitKind kind, const char *out_path);

void codegen_free(CodegenModule *module);

/* codegen_build, codegen_write and codegen_free in one call; -1 after
 * reporting, else 0. */
int codegen_emit(const Program *program, EmitKind kind, const char *out_path);

/* For tests: the layout, under the host data layout, of the LLVM struct type
 * codegen emits for prt_buffer_desc (which == 0), prt_plan_desc (1) or prt_data_desc (2):
 * its ABI size in *size and the byte offset of each field in offsets[0..max-1].
 * Returns the number of fields (which may exceed max), or -1 for a bad `which`
 * or when the host target is unavailable. */
int codegen_struct_layout(int which, uint64_t *size, uint64_t *offsets, int max);
/* (which == 3: prt_op_shape_desc.) */

/* The op-shape table the plan descriptor hands the runtime (codegen_shapes.c):
 * every op call of every stage with its int64_t arguments, one row per
 * distinct call of a stage; *rows is malloc'ed.  Returns the row count. */
int codegen_op_shape_rows(const Program *program, prt_op_shape_desc **rows);

/* For tests: the op-shape table as the module hands it to the runtime, read
 * back through @plan's op_shapes and nop_shapes from the initializers into
 * rows[0..max-1], the op names copied into names.  Returns the number of rows
 * (0 without a table), or -1 when @plan does not point at @op_shapes with its
 * length or names is too small. */
int codegen_module_op_shapes(const CodegenModule *module, prt_op_shape_desc *rows, int max, char *names,
                             size_t names_size);

#endif
