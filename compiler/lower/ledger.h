/*
 * ledger.h — the memory ledger: bytes per buffer class on one rank of each
 * pipeline stage.  Lowering computes it (ledger_compute, in lower_finish: the
 * `lower` row of the pass table) from the program's buffers and the runtime's scratch and
 * stores it in each StageProgram; every later pass only reads it.
 */
#ifndef PARC_LEDGER_H
#define PARC_LEDGER_H

#include "ir.h"

/* Each buffer class's key, as the runtime prints it and the program dump
 * shows it, and its report name (PRT_CLASSES in include/parc_rt.h). */
extern const char *const ledger_class_keys[PRT_NCLASS];
extern const char *const ledger_class_names[PRT_NCLASS];

/* Fills ledger[], ledger_total, params_local and cpu_widen of every stage of
 * a lowered program (buffers and schedule complete). */
void ledger_compute(Program *prog);

/* Pipeline messages a stage sends per step: one per micro-batch per chunk
 * boundary, activations forward (none from the model's last chunk) and
 * gradients backward (none from its first); 0 and 0 without pipelining. */
void ledger_stage_sends(const Program *prog, const StageProgram *sp, int64_t *fwd, int64_t *bwd);

#endif
