/*
 * ops_emit.h — the forward and backward emitters of op_table's rows
 * (ops_emit.c).  Each emits one op's runtime calls for a shape into e's
 * sequence and returns the index there of the op's entry instruction.
 * Inputs and parameters arrive in the placements the op's rule asks for;
 * gradient arguments are the destinations autodiff.c prepared.
 */
#ifndef PARC_OPS_EMIT_H
#define PARC_OPS_EMIT_H

#include "lower.h"

int ops_emit_data_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_embed_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_embed_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_pos_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_pos_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_layernorm_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_layernorm_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_rmsnorm_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_rmsnorm_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_linear_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_linear_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_bias_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_bias_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_activation_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_activation_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_swiglu_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_swiglu_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_rope_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_rope_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_attention_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_attention_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_dropout_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_dropout_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_add_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_add_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_copy_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_copy_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_xent_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_xent_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);

/* the mixture-of-experts ops' shapes: router and permute {T, H, E, K};
 * moe_matmul {R rows, K, M, E}; combine {T, H, K} */
int ops_emit_moe_router_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_moe_router_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_moe_permute_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_moe_permute_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_moe_matmul_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_moe_matmul_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_moe_combine_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);
int ops_emit_moe_combine_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s);

#endif
