/*
 * ir.c — the name tables of ir.h's X-macros, each derived from its one list:
 * ops, collectives, regions, tensor kinds, phases, layer guards, sequences,
 * buffer dtypes (PRT_DTYPES) and the runtime's functions (PRT_OPS).  Every
 * pass, report and the code generator read these; none spells a name itself.
 */
#include "ir.h"

/* X(kind, name) lists: their names in order. */
#define IR_NAME_(kind, name) name,
const char *const op_names[OP_COUNT] = {IR_OPS(IR_NAME_)};
const char *const coll_names[COLL_COUNT] = {IR_COLLECTIVES(IR_NAME_)};
const char *const region_names[REGION_COUNT] = {IR_REGIONS(IR_NAME_)};
const char *const tensor_kind_names[TENSOR_KIND_COUNT] = {IR_TENSOR_KINDS(IR_NAME_)};
const char *const phase_names[PHASE_COUNT] = {IR_PHASES(IR_NAME_)};
const char *const when_names[WHEN_COUNT] = {IR_WHENS(IR_NAME_)};
#undef IR_NAME_

#define IR_SEQ_NAME_(seq, name, symbol, layer, micro) name,
#define IR_SEQ_SYMBOL_(seq, name, symbol, layer, micro) symbol,
#define IR_SEQ_LAYER_(seq, name, symbol, layer, micro) layer,
#define IR_SEQ_MICRO_(seq, name, symbol, layer, micro) micro,
const char *const seq_names[SEQ_COUNT] = {IR_SEQS(IR_SEQ_NAME_)};
const char *const seq_symbols[SEQ_COUNT] = {IR_SEQS(IR_SEQ_SYMBOL_)};
const uint8_t seq_per_layer[SEQ_COUNT] = {IR_SEQS(IR_SEQ_LAYER_)};
const uint8_t seq_per_micro[SEQ_COUNT] = {IR_SEQS(IR_SEQ_MICRO_)};
#undef IR_SEQ_NAME_
#undef IR_SEQ_SYMBOL_
#undef IR_SEQ_LAYER_
#undef IR_SEQ_MICRO_

#define IR_DTYPE_NAME_(id, name, bytes) name,
const char *const dtype_names[PRT_NDTYPE] = {PRT_DTYPES(IR_DTYPE_NAME_)};
#undef IR_DTYPE_NAME_

#define IR_RT_NAME_(name, sig) #name,
#define IR_RT_SIG_(name, sig) sig,
const char *const rt_fn_names[RT_FN_COUNT] = {PRT_OPS(IR_RT_NAME_)};
const char *const rt_fn_sigs[RT_FN_COUNT] = {PRT_OPS(IR_RT_SIG_)};
#undef IR_RT_NAME_
#undef IR_RT_SIG_
