/*
 * ops_emit.c — each op's forward and backward runtime calls (see ops_emit.h).
 * The arguments follow the runtime's signatures (PRT_OPS in parc_rt.h); the
 * shape's d[] are the call's size arguments in the order ops.c documents.
 */
#include "ops_emit.h"

#define ENTRY(e, fn, ...) (EMIT((e), (fn), __VA_ARGS__), (e)->seq->n - 1)

static const OpDesc *row(const Op *op) { return &op_table[op->kind]; }

/* The ranks of the load-balanced split when axis is the context axis it
 * splits (prt_seq_pos's zz), else 0. */
static int64_t seq_zz(const Lowerer *lw, int axis)
{
    const Layout *l = &lw->plan->layout;
    return l->cp_balanced && axis >= 0 && axis == l->dim_axis[DIM_SEQ] ? lw->plan->mesh.axes[axis].size : 0;
}

int ops_emit_data_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    Lowerer *lw = e->lw;
    const Graph *g = lw->g;
    Arg scratch = arg_buf(lw->scratch_idx, INST_FIXED, 0);
    Arg tok = op->out == g->tokens ? a->out : scratch;
    Arg tgt = op->out == g->targets ? a->out : scratch;
    return ENTRY(e, RT_prt_data, tok, tgt, arg_kind(ARG_STEP), arg_kind(ARG_FIRST_SAMPLE), arg_int(s->d[0]),
                 arg_int(s->d[1]), arg_int(lw->plan->model.vocab), arg_int(seq_zz(lw, lw->plan->layout.dim_axis[DIM_SEQ])));
}

int ops_emit_embed_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_embed_fwd, a->out, a->in[0].arg, a->param[0].arg, arg_int(s->d[0]), arg_int(s->d[1]),
                 arg_int(s->d[2]), arg_coord(s->axis, s->d[2]));
}

/* the backward reads no weights: the table's placement comes from the rule */
int ops_emit_embed_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_embed_bwd, a->dparam[0].arg, a->in[0].arg, a->dout, arg_int(s->d[0]), arg_int(s->d[1]),
                 arg_int(s->d[2]), arg_coord(s->axis, s->d[2]));
}

int ops_emit_pos_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_pos_fwd, a->out, a->in[0].arg, a->param[0].arg, arg_int(s->d[0]), arg_int(s->d[1]),
                 arg_int(s->d[2]), arg_coord(s->axis, s->d[1]), arg_int(seq_zz(e->lw, s->axis)));
}

int ops_emit_pos_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_pos_bwd, a->dparam[0].arg, a->din[0].arg, a->dout, arg_int(s->d[0]), arg_int(s->d[1]),
                 arg_int(s->d[2]), arg_coord(s->axis, s->d[1]), arg_int(seq_zz(e->lw, s->axis)));
}

/* A norm's epsilon: the final norm's (the head region's) or the blocks'. */
static double norm_eps(const Emit *e, const Op *op)
{
    const Model *m = &e->lw->plan->model;
    return op->region == REGION_HEAD ? m->final_norm_eps : m->block.norm_eps;
}

int ops_emit_layernorm_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    Lowerer *lw = e->lw;
    return ENTRY(e, RT_prt_layernorm_fwd, a->out, arg_value(lw, op->aux[0]), arg_value(lw, op->aux[1]),
                 a->in[0].arg, a->param[0].arg, op->nparam > 1 ? a->param[1].arg : arg_null(), arg_int(s->d[0]),
                 arg_int(s->d[1]), arg_f64(norm_eps(e, op)));
}

int ops_emit_layernorm_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    Lowerer *lw = e->lw;
    return ENTRY(e, RT_prt_layernorm_bwd, a->din[0].arg, a->dparam[0].arg,
                 op->nparam > 1 ? a->dparam[1].arg : arg_null(), a->dout, a->in[0].arg, a->param[0].arg,
                 arg_value(lw, op->aux[0]), arg_value(lw, op->aux[1]), arg_int(s->d[0]), arg_int(s->d[1]));
}

int ops_emit_rmsnorm_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    return ENTRY(e, RT_prt_rmsnorm_fwd, a->out, arg_value(e->lw, op->aux[0]), a->in[0].arg, a->param[0].arg,
                 arg_int(s->d[0]), arg_int(s->d[1]), arg_f64(norm_eps(e, op)));
}

int ops_emit_rmsnorm_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    return ENTRY(e, RT_prt_rmsnorm_bwd, a->din[0].arg, a->dparam[0].arg, a->dout, a->in[0].arg, a->param[0].arg,
                 arg_value(e->lw, op->aux[0]), arg_int(s->d[0]), arg_int(s->d[1]));
}

/* With a folded bias (ops_fold_bias) param[1] / dparam[1] are the bias's and
 * out / dout the bias op's output and its gradient. */
int ops_emit_linear_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    if (e->lw->bias_fold[op->id] >= 0)
        return ENTRY(e, row(op)->fwd_bias, a->out, a->in[0].arg, a->param[0].arg, a->param[1].arg, arg_int(s->d[0]),
                     arg_int(s->d[1]), arg_int(s->d[2]));
    return ENTRY(e, row(op)->fwd, a->out, a->in[0].arg, a->param[0].arg, arg_int(s->d[0]), arg_int(s->d[1]),
                 arg_int(s->d[2]));
}

int ops_emit_linear_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    if (e->lw->bias_fold[op->id] >= 0)
        return ENTRY(e, row(op)->bwd_bias, a->din[0].arg, a->dparam[0].arg, a->dout, a->in[0].arg, a->param[0].arg,
                     a->dparam[1].arg, arg_int(s->d[0]), arg_int(s->d[1]), arg_int(s->d[2]));
    return ENTRY(e, row(op)->bwd, a->din[0].arg, a->dparam[0].arg, a->dout, a->in[0].arg, a->param[0].arg,
                 arg_int(s->d[0]), arg_int(s->d[1]), arg_int(s->d[2]));
}

int ops_emit_bias_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_bias_fwd, a->out, a->in[0].arg, a->param[0].arg, arg_int(s->d[0]), arg_int(s->d[1]));
}

/* the bias's gradient, then the input's (the op is an identity on it) */
int ops_emit_bias_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    int entry = ENTRY(e, RT_prt_bias_bwd, a->dparam[0].arg, a->dout, arg_int(s->d[0]), arg_int(s->d[1]));
    EMIT(e, RT_prt_acc, a->din[0].arg, a->dout, arg_int(s->d[0] * s->d[1]));
    return entry;
}

int ops_emit_activation_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    return ENTRY(e, row(op)->fwd, a->out, a->in[0].arg, arg_int(s->d[0]));
}

int ops_emit_activation_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    return ENTRY(e, row(op)->bwd, a->din[0].arg, a->in[0].arg, a->dout, arg_int(s->d[0]));
}

int ops_emit_swiglu_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_swiglu_fwd, a->out, a->in[0].arg, arg_int(s->d[0]), arg_int(s->d[1]));
}

int ops_emit_swiglu_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_swiglu_bwd, a->din[0].arg, a->in[0].arg, a->dout, arg_int(s->d[0]), arg_int(s->d[1]));
}

/* The rotation of q and k: the shape's sizes, the first position held (a
 * sequence split's coordinate times its local length), the plan's base and
 * Llama 3.1 scaling (factor 0: none). */
static int emit_rope(Emit *e, RtFn fn, Arg dst, Arg src, const OpShape *s)
{
    const Rope *r = &e->lw->plan->model.rope;
    return ENTRY(e, fn, dst, src, arg_int(s->d[0]), arg_int(s->d[1]), arg_int(s->d[2]), arg_int(s->d[3]),
                 arg_int(s->d[4]), arg_int(s->d[5]), arg_coord(s->axis, s->d[1]), arg_int(seq_zz(e->lw, s->axis)),
                 arg_f64(r->theta),
                 arg_f64(r->llama3 ? r->factor : 0), arg_f64(r->llama3 ? r->low_freq_factor : 0),
                 arg_f64(r->llama3 ? r->high_freq_factor : 0), arg_int(r->llama3 ? r->original_max_positions : 0));
}

int ops_emit_rope_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return emit_rope(e, RT_prt_rope_fwd, a->out, a->in[0].arg, s);
}

int ops_emit_rope_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return emit_rope(e, RT_prt_rope_bwd, a->din[0].arg, a->dout, s);
}

static Arg probs_arg(const Lowerer *lw, const Op *op, const OpShape *s)
{
    return s->kept ? arg_value(lw, op->aux[0]) : arg_null();
}

/* Workspace buffers name.0, name.1 .. (name alone for one) of n activations. */
static void act_bufs(Lowerer *lw, const char *name, int64_t n, Arg *out, int count)
{
    for (int k = 0; k < count; k++)
        out[k] = arg_buf(reshard_stage_buf(lw, count == 1 ? name : arena_printf(lw->arena, "%s.%d", name, k),
                                           program_act_dtype(lw->plan), n),
                         INST_FIXED, 0);
}

/* Ring attention (`cp_comm ring`, s->ring = P ranks on context axis
 * s->seq_axis), as Megatron-LM's and torchtitan's: the chunk's K/V packed,
 * then P steps, each computing on the chunk in hand while it is passed on
 * to the next rank (the shift started before the step's call, waited for
 * after it; none after the last).  The backward passes the K/V again and,
 * after each step, their gradient accumulated so far: a step computes its
 * share of the chunk's dK/dV into a buffer of its own while the sum of the
 * ranks before arrives, adds it, and passes the sum on (Megatron-LM's order:
 * the gradient's transfer, too, runs under a step), so that P shifts bring
 * every chunk's gradient home, added into dqkv's k and v. */
static int emit_ring_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    Lowerer *lw = e->lw;
    int64_t B = s->d[0], T = s->d[1], NH = s->d[2], HD = s->d[3], KV = s->d[4], P = s->ring, n = B * T * 2 * KV * HD;
    int ax = s->seq_axis, causal = lw->plan->model.block.causal;
    Arg kv[2], lse = arg_value(lw, op->aux[1]);
    act_bufs(lw, "ring.kv", n, kv, 2);
    EMIT(e, RT_prt_ring_kv_pack, kv[0], a->in[0].arg, arg_int(B), arg_int(T), arg_int(NH), arg_int(KV), arg_int(HD));
    int entry = -1;
    for (int64_t j = 0; j < P; j++) {
        Arg cur = kv[j & 1], next = kv[(j + 1) & 1];
        if (j + 1 < P) reshard_ring_shift(e, op, ax, next, cur, n, 0);
        entry = ENTRY(e, RT_prt_ring_attention_fwd, a->out, lse, a->in[0].arg, cur, arg_int(B), arg_int(T),
                      arg_int(NH), arg_int(KV), arg_int(HD), arg_int(causal), arg_coord(ax, 1), arg_int(j),
                      arg_int(P), arg_int(s->balanced));
        if (j + 1 < P) {
            autodiff_mark_entry(e, entry, op, s, ENTRY_FORWARD);
            reshard_ring_wait(e, op, ax, next);
        }
    }
    return entry;
}

static int emit_ring_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    Lowerer *lw = e->lw;
    int64_t B = s->d[0], T = s->d[1], NH = s->d[2], HD = s->d[3], KV = s->d[4], P = s->ring, n = B * T * 2 * KV * HD;
    int ax = s->seq_axis, causal = lw->plan->model.block.causal;
    Arg kv[2], dkv[2], arrived, lse = arg_value(lw, op->aux[1]), out = arg_value(lw, op->out);
    act_bufs(lw, "ring.kv", n, kv, 2);
    act_bufs(lw, "ring.dkv", n, dkv, 2);
    act_bufs(lw, "ring.dkv.in", n, &arrived, 1);
    EMIT(e, RT_prt_ring_kv_pack, kv[0], a->in[0].arg, arg_int(B), arg_int(T), arg_int(NH), arg_int(KV), arg_int(HD));
    int entry = -1;
    for (int64_t j = 0; j < P; j++) {
        Arg cur = kv[j & 1], next = kv[(j + 1) & 1], mine = dkv[j & 1];
        if (j + 1 < P) reshard_ring_shift(e, op, ax, next, cur, n, 0);
        EMIT(e, RT_prt_zero, mine, arg_int(n));
        entry = autodiff_mark_entry(e,
                           ENTRY(e, RT_prt_ring_attention_bwd, a->din[0].arg, mine, a->dout, out, lse, a->in[0].arg,
                                 cur, arg_int(B), arg_int(T), arg_int(NH), arg_int(KV), arg_int(HD), arg_int(causal),
                                 arg_coord(ax, 1), arg_int(j), arg_int(P), arg_int(s->balanced)),
                           op, s, ENTRY_BACKWARD);
        if (j > 0) { /* the chunk's gradient so far, from the rank before, arrived under this step */
            reshard_ring_wait(e, op, ax, arrived);
            EMIT(e, RT_prt_acc, mine, arrived, arg_int(n));
        }
        reshard_ring_shift(e, op, ax, arrived, mine, n, 1);
        if (j + 1 < P) reshard_ring_wait(e, op, ax, next);
    }
    reshard_ring_wait(e, op, ax, arrived);
    EMIT(e, RT_prt_ring_kv_grad, a->din[0].arg, arrived, arg_int(B), arg_int(T), arg_int(NH), arg_int(KV),
         arg_int(HD));
    return entry;
}

/* The all-gather form of the load-balanced split (`cp_split balanced`
 * without ring attention; Llama 3's context parallelism): the gathered qkv
 * holds the chunks in the split's order, so it is put in the sequence's
 * (seq_permute into `cp.qkv`) and the rank's query rows, two halves of h
 * rows at positions coord h and (2 cp - 1 - coord) h, are two calls, each an
 * entry of the op, their outputs joined into the rank's rows (seq_halves).
 * The backward splits dout likewise, both calls add into the ordered qkv's
 * gradient (`cp.qkv.grad`), and seq_permute adds it back in the gathered
 * order, which the reduce-scatter then takes.  No probabilities are kept
 * (place.c): each backward call recomputes its own. */
static Arg half_q0(const OpShape *s, int64_t P, int64_t h, int a)
{
    return a ? arg_coord_plus(s->seq_axis, -h, (int32_t)((2 * P - 1) * h)) : arg_coord(s->seq_axis, h);
}

static int emit_balanced_gather(Emit *e, const Op *op, const OpArgs *a, const OpShape *s, int bwd)
{
    Lowerer *lw = e->lw;
    const Model *m = &lw->plan->model;
    int64_t B = s->d[0], Tl = s->d[1], NH = s->d[2], HD = s->d[3], KV = s->d[4], T = s->d[5], h = Tl / 2;
    int64_t P = lw->plan->mesh.axes[s->seq_axis].size, W = (NH + 2 * KV) * HD, C = NH * HD;
    PARC_ASSERT(Tl % 2 == 0 && !s->kept && !s->dropout);
    Arg ordered, grad, half[2];
    act_bufs(lw, "cp.qkv", B * T * W, &ordered, 1);
    act_bufs(lw, "cp.half", B * h * C, half, 2);
    EMIT(e, RT_prt_seq_permute, ordered, a->in[0].arg, arg_int(B), arg_int(T), arg_int(W), arg_int(P), arg_int(0));
    OpShape hs = *s;
    hs.d[1] = h;
    int entry = -1;
    if (!bwd) {
        for (int k = 0; k < 2; k++)
            entry = autodiff_mark_entry(e,
                               ENTRY(e, RT_prt_attention_fwd, half[k], arg_null(), ordered, arg_int(B), arg_int(T),
                                     arg_int(NH), arg_int(KV), arg_int(HD), arg_int(m->block.causal), arg_int(h),
                                     half_q0(s, P, h, k)),
                               op, &hs, ENTRY_FORWARD);
        EMIT(e, RT_prt_seq_halves, a->out, half[0], half[1], arg_int(B), arg_int(h), arg_int(C), arg_int(1));
        return entry;
    }
    act_bufs(lw, "cp.qkv.grad", B * T * W, &grad, 1);
    EMIT(e, RT_prt_seq_halves, a->dout, half[0], half[1], arg_int(B), arg_int(h), arg_int(C), arg_int(0));
    EMIT(e, RT_prt_zero, grad, arg_int(B * T * W));
    for (int k = 0; k < 2; k++)
        entry = autodiff_mark_entry(e,
                           ENTRY(e, RT_prt_attention_bwd, grad, half[k], ordered, arg_null(), arg_int(B), arg_int(T),
                                 arg_int(NH), arg_int(KV), arg_int(HD), arg_int(m->block.causal), arg_int(h),
                                 half_q0(s, P, h, k)),
                           op, &hs, ENTRY_BACKWARD);
    EMIT(e, RT_prt_seq_permute, a->din[0].arg, grad, arg_int(B), arg_int(T), arg_int(W), arg_int(P), arg_int(1));
    return entry;
}

/* attention_fwd / attention_bwd take the key count T (the qkv's rows), then
 * the rank's query rows Tq and their first row q0 (context parallelism: the
 * seq axis's coordinate times Tq; else Tq = T, q0 0).  With dropout the
 * attention_dropout_* entries (no sequence split: place_rule_attention) take,
 * after attention's own arguments, what places the local block in the global
 * mask: the first sample, the first local head of NH_global, the step and the
 * layer. */
int ops_emit_attention_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    const Model *m = &e->lw->plan->model;
    if (s->ring) return emit_ring_fwd(e, op, a, s);
    if (place_balanced_gather(e->lw, op)) return emit_balanced_gather(e, op, a, s, 0);
    if (s->dropout)
        return ENTRY(e, RT_prt_attention_dropout_fwd, a->out, probs_arg(e->lw, op, s), a->in[0].arg,
                     arg_int(s->d[0]), arg_int(s->d[1]), arg_int(s->d[2]), arg_int(s->d[4]),
                     arg_int(s->d[3]), arg_int(m->block.causal), arg_kind(ARG_FIRST_SAMPLE), arg_coord(s->axis, s->d[2]),
                     arg_int(m->heads), arg_kind(ARG_STEP), arg_layer(op->sub), arg_f64(m->block.dropout));
    return ENTRY(e, RT_prt_attention_fwd, a->out, probs_arg(e->lw, op, s), a->in[0].arg, arg_int(s->d[0]),
                 arg_int(s->d[5]), arg_int(s->d[2]), arg_int(s->d[4]), arg_int(s->d[3]), arg_int(m->block.causal),
                 arg_int(s->d[1]), arg_coord(s->seq_axis, s->d[1]));
}

int ops_emit_attention_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    const Model *m = &e->lw->plan->model;
    if (s->ring) return emit_ring_bwd(e, op, a, s);
    if (place_balanced_gather(e->lw, op)) return emit_balanced_gather(e, op, a, s, 1);
    if (s->dropout)
        return ENTRY(e, RT_prt_attention_dropout_bwd, a->din[0].arg, a->dout, a->in[0].arg, probs_arg(e->lw, op, s),
                     arg_int(s->d[0]), arg_int(s->d[1]), arg_int(s->d[2]), arg_int(s->d[4]),
                     arg_int(s->d[3]), arg_int(m->block.causal), arg_kind(ARG_FIRST_SAMPLE), arg_coord(s->axis, s->d[2]),
                     arg_int(m->heads), arg_kind(ARG_STEP), arg_layer(op->sub), arg_f64(m->block.dropout));
    return ENTRY(e, RT_prt_attention_bwd, a->din[0].arg, a->dout, a->in[0].arg, probs_arg(e->lw, op, s),
                 arg_int(s->d[0]), arg_int(s->d[5]), arg_int(s->d[2]), arg_int(s->d[4]), arg_int(s->d[3]),
                 arg_int(m->block.causal), arg_int(s->d[1]), arg_coord(s->seq_axis, s->d[1]));
}

/* Dropout of a branch output: site 1 for attention's (`attn.drop`), 2 for the
 * MLP's (`mlp.drop`), as expand.c names them; the sample, the position (a
 * sequence split's offset), the step and the layer place the mask. */
static int64_t dropout_site(const Op *op)
{
    size_t n = strlen(op->name);
    return n >= 8 && strcmp(op->name + n - 8, "mlp.drop") == 0 ? 2 : 1;
}

int ops_emit_dropout_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    return ENTRY(e, RT_prt_dropout_fwd, a->out, arg_value(e->lw, op->aux[0]), a->in[0].arg, arg_int(s->d[0]),
                 arg_int(s->d[1]), arg_int(s->d[2]), arg_kind(ARG_FIRST_SAMPLE), arg_coord(s->axis, s->d[1]),
                 arg_int(s->d[3]), arg_kind(ARG_STEP), arg_layer(op->sub), arg_int(dropout_site(op)),
                 arg_f64(e->lw->plan->model.block.dropout));
}

int ops_emit_dropout_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    return ENTRY(e, RT_prt_dropout_bwd, a->din[0].arg, arg_value(e->lw, op->aux[0]), a->dout,
                 arg_int(s->d[0] * s->d[1] * s->d[2]), arg_f64(e->lw->plan->model.block.dropout));
}

int ops_emit_add_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_add_fwd, a->out, a->in[0].arg, a->in[1].arg, arg_int(s->d[0]));
}

int ops_emit_add_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    EMIT(e, RT_prt_acc, a->din[0].arg, a->dout, arg_int(s->d[0]));
    return ENTRY(e, RT_prt_acc, a->din[1].arg, a->dout, arg_int(s->d[0]));
}

int ops_emit_copy_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_copy, a->out, a->in[0].arg, arg_int(s->d[0]));
}

int ops_emit_copy_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_acc, a->din[0].arg, a->dout, arg_int(s->d[0]));
}

/* The loss over the ranks that hold different rows: the replicas of the
 * logits (mesh axes other than the pipeline's where they are whole) are
 * counted once.  With a vocab split, the row max, the sum of exponentials and
 * the target logit are reduced over the vocab axis inside the op: report-only
 * records of those collectives follow the call. */
int ops_emit_xent_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    Lowerer *lw = e->lw;
    int64_t N = s->d[0], V = s->d[1];
    int va = s->axis;
    int64_t replicas = 0;
    for (int x = 0; x < lw->naxes; x++)
        if (a->in[0].place[x].kind == PLACE_R && lw->plan->mesh.axes[x].size > 1 && x != lw->plan->layout.pp_axis)
            replicas |= (int64_t)1 << x;
    if (replicas) EMIT(e, RT_prt_loss_replicas, arg_int(replicas));
    int entry = ENTRY(e, RT_prt_xent_fwd, arg_buf(lw->loss_buf, INST_FIXED, 0), arg_value(lw, op->aux[0]),
                      a->in[0].arg, a->in[1].arg, arg_int(N), arg_int(V), arg_coord(va, V), arg_int(va));
    if (va >= 0) {
        program_record(e->lw->arena, e->seq, e->phase, COLL_ALLREDUCE_MAX, va, N, op->id, op->in[0],
                    "vocab-parallel cross-entropy: the row max over a vocab split");
        program_record(e->lw->arena, e->seq, e->phase, COLL_ALLREDUCE, va, 2 * N, op->id, op->in[0],
                    "vocab-parallel cross-entropy: the sum of exponentials and the target logit (held by one rank of "
                    "the split), in one call");
    }
    return entry;
}

int ops_emit_xent_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    const Plan *plan = e->lw->plan;
    double scale = 1.0 / ((double)plan->train.batch * (double)plan->model.seq);
    return ENTRY(e, RT_prt_xent_bwd, a->din[0].arg, a->in[0].arg, arg_value(e->lw, op->aux[0]), a->in[1].arg,
                 arg_int(s->d[0]), arg_int(s->d[1]), arg_coord(s->axis, s->d[1]), arg_f64(scale));
}

/* ------------------------------------------------------------ mixture of experts */

/* A router's coefficients as the step's loss counts them: the step averages
 * over its batch / micro_batch micro-batches, each of which routes once. */
static double moe_coef(const Plan *plan, double coef)
{
    return coef * (double)plan->train.micro_batch / (double)plan->train.batch;
}

/* A router's aux tensors (expand.c): the saved logits, index, counts and
 * losses, and beside a context axis the counts summed over it. */
enum { ROUTER_LOGITS, ROUTER_INDEX, ROUTER_COUNTS, ROUTER_LOSSES, ROUTER_COUNTS_CP };

/* The router's load-balancing and z-loss coefficients as a rank's call
 * takes them (moe_coef).  With the tokens split over a context axis of C
 * ranks a rank's losses are its tokens' shares of the sequence's, which the
 * step sums over the axis: with the summed counts and the rank's T tokens
 * the router's formulas give C^2 times its share of the load-balancing loss
 * (f_e and P_e each over T instead of C T) and C times its share of the
 * z-loss, so the coefficients are divided by that. */
static void router_coefs(const Plan *plan, double *aux, double *z)
{
    const MoeSpec *moe = &plan->model.block.moe;
    int cp = plan_context_axis(plan);
    double C = cp >= 0 ? (double)plan_axis_size(plan, cp) : 1.0;
    *aux = moe_coef(plan, moe->aux_coef) / (C * C);
    *z = moe_coef(plan, moe->z_coef) / C;
}

/* the router (aux: logits, index, counts, losses, and with a context axis the
 * counts summed over it), then its two losses added to the step's loss and its
 * counts to the step's per-expert load (not again when a recompute replays the
 * forward), by one rank of its replicas.  With a context axis the router
 * leaves the losses to moe_router_loss over the summed counts. */
int ops_emit_moe_router_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    Lowerer *lw = e->lw;
    const Plan *plan = lw->plan;
    const MoeSpec *moe = &plan->model.block.moe;
    int cp = plan_context_axis(plan);
    PARC_ASSERT(op->naux == (cp >= 0 ? ROUTER_COUNTS_CP + 1 : ROUTER_COUNTS_CP));
    Arg losses = arg_value(lw, op->aux[ROUTER_LOSSES]), counts = arg_value(lw, op->aux[ROUTER_COUNTS]);
    double aux, z;
    router_coefs(plan, &aux, &z);
    int entry = ENTRY(e, RT_prt_moe_router_fwd, arg_value(lw, op->aux[ROUTER_LOGITS]),
                      arg_value(lw, op->aux[ROUTER_INDEX]), a->out, counts, cp >= 0 ? arg_null() : losses,
                      a->in[0].arg, a->param[0].arg, arg_int(s->d[0]), arg_int(s->d[1]), arg_int(s->d[2]),
                      arg_int(s->d[3]), arg_int(moe->router == ROUTER_SIGMOID), arg_f64(aux), arg_f64(z));
    if (cp >= 0) {
        /* the rank's counts are its part of the sequence's, Partial over cp:
         * the table's all-reduce makes them whole into the summed counts */
        int t = op->aux[ROUTER_COUNTS_CP];
        Val v = {counts, t, {{0}}};
        Placement whole[PARC_MAX_AXES];
        for (int x = 0; x < lw->naxes; x++) whole[x] = v.place[x] = PLACE_REP;
        v.place[cp] = PLACE_PART;
        Arg summed = arg_value(lw, t);
        reshard_to(e, v, whole, op->id,
                   arena_printf(lw->arena, "the router's tokens per expert summed over context axis %s: the "
                                           "load-balancing loss counts the whole sequence's",
                                plan->mesh.axes[cp].name),
                   0, &summed);
        if (e->phase == PHASE_FORWARD)
            EMIT(e, RT_prt_moe_router_loss, losses, arg_value(lw, op->aux[ROUTER_LOGITS]),
                 arg_value(lw, op->aux[ROUTER_INDEX]), summed, arg_int(s->d[0]), arg_int(s->d[2]), arg_int(s->d[3]),
                 arg_int(moe->router == ROUTER_SIGMOID), arg_f64(aux), arg_f64(z));
    }
    if (e->phase == PHASE_FORWARD) {
        /* every rank of an axis the tokens are whole on (a tensor axis) routes
         * them alike: one of them counts the losses and the tokens */
        int64_t replicas = 0;
        for (int x = 0; x < lw->naxes; x++)
            if (a->in[0].place[x].kind == PLACE_R && plan->mesh.axes[x].size > 1 && x != plan->layout.pp_axis)
                replicas |= (int64_t)1 << x;
        EMIT(e, RT_prt_loss_replicas, arg_int(replicas));
        EMIT(e, RT_prt_moe_loss_add, losses, arg_f64((double)plan->train.batch * (double)plan->model.seq));
        EMIT(e, RT_prt_moe_counts, counts, arg_int(s->d[2]), arg_layer(op->sub));
    }
    return entry;
}

/* dlogits (written) in the logits' gradient buffer */
int ops_emit_moe_router_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    Lowerer *lw = e->lw;
    const Plan *plan = lw->plan;
    const MoeSpec *moe = &plan->model.block.moe;
    /* with a context axis the loss's gradient reads the counts summed over it */
    int cp = plan_context_axis(plan);
    Arg counts = arg_value(lw, op->aux[cp >= 0 ? ROUTER_COUNTS_CP : ROUTER_COUNTS]);
    double aux, z;
    router_coefs(plan, &aux, &z);
    return ENTRY(e, RT_prt_moe_router_bwd, a->din[0].arg, a->dparam[0].arg, arg_grad(lw, op->aux[ROUTER_LOGITS]),
                 a->dout, arg_value(lw, op->aux[ROUTER_LOGITS]), arg_value(lw, op->aux[ROUTER_INDEX]), counts,
                 a->in[0].arg, a->param[0].arg, arg_int(s->d[0]), arg_int(s->d[1]), arg_int(s->d[2]),
                 arg_int(s->d[3]), arg_int(moe->router == ROUTER_SIGMOID), arg_f64(aux), arg_f64(z));
}

/* aux: offsets, rows */
int ops_emit_moe_permute_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    Lowerer *lw = e->lw;
    return ENTRY(e, RT_prt_moe_permute_fwd, a->out, arg_value(lw, op->aux[0]), arg_value(lw, op->aux[1]),
                 a->in[0].arg, a->in[1].arg, arg_int(s->d[0]), arg_int(s->d[1]), arg_int(s->d[2]), arg_int(s->d[3]));
}

int ops_emit_moe_permute_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    return ENTRY(e, RT_prt_moe_permute_bwd, a->din[0].arg, a->dout, arg_value(e->lw, op->aux[1]), arg_int(s->d[0]),
                 arg_int(s->d[1]), arg_int(s->d[3]));
}

/* The offsets of an expert GEMM's rows: the dispatch's, or under expert
 * parallelism (d[5] = axis + 1) those of the rows the last exchange brought
 * to this rank's experts (reshard_ep_offsets states why they are this
 * layer's and micro-batch's). */
static Arg moe_offsets(Emit *e, const OpArgs *a, const OpShape *s)
{
    return s->d[5] ? arg_buf(reshard_ep_offsets(e->lw, (int)s->d[5] - 1), INST_FIXED, 0) : a->in[1].arg;
}

int ops_emit_moe_matmul_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_moe_matmul_fwd, a->out, a->in[0].arg, a->param[0].arg, moe_offsets(e, a, s),
                 arg_int(s->d[3]), arg_int(s->d[1]), arg_int(s->d[2]));
}

int ops_emit_moe_matmul_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_moe_matmul_bwd, a->din[0].arg, a->dparam[0].arg, a->dout, a->in[0].arg,
                 a->param[0].arg, moe_offsets(e, a, s), arg_int(s->d[3]), arg_int(s->d[1]), arg_int(s->d[2]));
}

/* in: the experts' rows, the gate, the dispatch's rows */
int ops_emit_moe_combine_fwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_moe_combine_fwd, a->out, a->in[0].arg, a->in[1].arg, a->in[2].arg, arg_int(s->d[0]),
                 arg_int(s->d[1]), arg_int(s->d[2]));
}

int ops_emit_moe_combine_bwd(Emit *e, const Op *op, const OpArgs *a, const OpShape *s)
{
    (void)op;
    return ENTRY(e, RT_prt_moe_combine_bwd, a->din[0].arg, a->din[1].arg, a->dout, a->in[0].arg, a->in[1].arg,
                 a->in[2].arg, arg_int(s->d[0]), arg_int(s->d[1]), arg_int(s->d[2]));
}
