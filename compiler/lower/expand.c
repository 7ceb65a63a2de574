/*
 * expand.c — the expand pass: the model as a forward op graph over named-dim tensors.
 *
 * Takes a checked Plan.  Produces a Graph with three regions (embedding, one
 * repeated block, head) whose tensors carry global sizes and a home placement
 * on every mesh axis, derived from the layout rules alone:
 *   - a dim mapped to an axis (`ffn -> tp`) splits every tensor having that dim;
 *   - parameters are never split on batch or seq; ZeRO-3 shards them flat over
 *     the data axis;
 *   - with sequence parallelism, [batch, seq, hidden] activations that no other
 *     rule splits on the tensor axis are split on seq there.
 * One axis splits at most one dim of a tensor: a plan that asks for more is a
 * user error naming the tensor and the two rules.
 */
#include "ir.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Expander {
    Arena *arena;
    const Plan *plan;
    Graph *g;
    int errors;
    int sub;             /* the block's layer being expanded (plan_block_layers > 1) */
    const char *prefix;  /* "l<sub>." then, else "" */
} Expander;

int64_t expand_tensor_numel(const Tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->sizes[i];
    return n;
}

void expand_local_sizes(const Plan *plan, const Tensor *t, const Placement *place, int64_t *sizes)
{
    memcpy(sizes, t->sizes, sizeof(int64_t) * IR_MAX_TDIMS);
    /* the other splits first: the experts' rows count the tokens of the
     * expert axis's ranks, after batch's other axis took its share */
    for (int pass = 0; pass < 2; pass++)
    for (int a = 0; a < plan->mesh.naxes; a++) {
        if (place[a].kind != PLACE_S || place[a].dim == DIM_FLAT) continue;
        if ((place[a].dim == DIM_EXPERTS) != (pass == 1)) continue;
        int parts = plan->mesh.axes[a].size, found = 0;
        for (int d = 0; d < t->ndim && !found; d++)
            if (t->dims[d] == place[a].dim) {
                sizes[d] /= parts;
                found = 1;
            }
        if (found || place[a].dim != DIM_EXPERTS) continue;
        /* routed rows split by expert (expert parallelism): the rows this
         * rank's experts / parts experts can receive, every token of the
         * axis's ranks at most min(topk, experts / parts) times; with a
         * capacity, that many times the balanced share (tokens x topk /
         * parts) if fewer, as [rows, 1] */
        const MoeSpec *moe = &plan->model.block.moe;
        int64_t local = moe->experts / parts;
        int routed = -1, topk = -1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->dims[d] == DIM_ROUTED) routed = d;
            if (t->dims[d] == DIM_TOPK) topk = d;
        }
        if (routed < 0 || topk < 0) continue;
        if (sizes[topk] > local) sizes[topk] = local;
        if (moe->capacity > 0) {
            double share = (double)sizes[routed] * (double)moe->topk / (double)parts;
            int64_t rows = (int64_t)ceil(moe->capacity * share);
            if (rows < sizes[routed] * sizes[topk]) sizes[routed] = rows, sizes[topk] = 1;
        }
    }
}

int64_t expand_tensor_local_numel(const Plan *plan, const Tensor *t, const Placement *place)
{
    int64_t sizes[IR_MAX_TDIMS];
    expand_local_sizes(plan, t, place, sizes);
    int64_t flat_parts = 1;
    for (int a = 0; a < plan->mesh.naxes; a++)
        if (place[a].kind == PLACE_S && place[a].dim == DIM_FLAT) flat_parts *= plan->mesh.axes[a].size;
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= sizes[d];
    return (n + flat_parts - 1) / flat_parts;
}

void expand_placement_format(const Plan *plan, const Placement *place, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (int a = 0; a < plan->mesh.naxes && used < size; a++) {
        const char *axis = plan->mesh.axes[a].name;
        int n;
        switch (place[a].kind) {
        case PLACE_R: n = snprintf(buf + used, size - used, "%sR", a ? " " : ""); break;
        case PLACE_P: n = snprintf(buf + used, size - used, "%sP", a ? " " : ""); break;
        default:
            n = snprintf(buf + used, size - used, "%sS(%s)", a ? " " : "", dim_names[place[a].dim]);
            break;
        }
        (void)axis;
        if (n < 0) break;
        used += (size_t)n;
    }
}

static int tensor_new(Expander *ex, Region region, TensorKind kind, const char *name, SrcLoc loc,
                      int ndim, const Dim *dims, const int64_t *sizes)
{
    Graph *g = ex->g;
    Tensor t;
    memset(&t, 0, sizeof t);
    t.id = g->ntensors;
    t.region = region;
    t.kind = kind;
    t.name = arena_printf(ex->arena, "%s%s", region == REGION_BLOCK ? ex->prefix : "", name);
    t.base_name = t.name + (region == REGION_BLOCK ? strlen(ex->prefix) : 0);
    t.sub = region == REGION_BLOCK ? ex->sub : 0;
    t.ndim = ndim;
    if (ndim > 0) {
        memcpy(t.dims, dims, sizeof(Dim) * (size_t)ndim);
        memcpy(t.sizes, sizes, sizeof(int64_t) * (size_t)ndim);
    }
    t.producer = -1;
    t.loc = loc;
    ARR_PUSH(ex->arena, g->tensors, g->ntensors, g->tensors_cap, t);
    return t.id;
}

#define DIMS(...) ((const Dim[]){__VA_ARGS__})
#define SIZES(...) ((const int64_t[]){__VA_ARGS__})
#define NDIMS(...) ((int)(sizeof((const Dim[]){__VA_ARGS__}) / sizeof(Dim)))

static int act(Expander *ex, Region r, const char *name, SrcLoc loc, int ndim, const Dim *dims,
               const int64_t *sizes)
{
    return tensor_new(ex, r, TENSOR_ACT, name, loc, ndim, dims, sizes);
}

static int param(Expander *ex, Region r, const char *name, SrcLoc loc, int ndim, const Dim *dims,
                 const int64_t *sizes, int init, double std)
{
    int id = tensor_new(ex, r, TENSOR_PARAM, name, loc, ndim, dims, sizes);
    Tensor *t = &ex->g->tensors[id];
    t->init = init;
    t->init_std = std;
    t->decay = ndim >= 2;
    return id;
}

static int op_new(Expander *ex, OpKind kind, Region region, const char *name, SrcLoc loc,
                  int nin, const int *in, int nparam, const int *params, int out)
{
    Graph *g = ex->g;
    Op op;
    memset(&op, 0, sizeof op);
    op.id = g->nops;
    op.kind = kind;
    op.region = region;
    op.name = arena_printf(ex->arena, "%s%s", region == REGION_BLOCK ? ex->prefix : "", name);
    op.sub = region == REGION_BLOCK ? ex->sub : 0;
    op.loc = loc;
    op.nin = nin;
    for (int i = 0; i < nin; i++) op.in[i] = in[i];
    op.nparam = nparam;
    for (int i = 0; i < nparam; i++) op.param[i] = params[i];
    op.out = out;
    if (out >= 0) g->tensors[out].producer = op.id;
    ARR_PUSH(ex->arena, g->ops, g->nops, g->ops_cap, op);
    return op.id;
}

static void op_aux(Expander *ex, int op, int tensor)
{
    Op *o = &ex->g->ops[op];
    PARC_ASSERT(o->naux < (int)(sizeof o->aux / sizeof o->aux[0]));
    o->aux[o->naux++] = tensor;
    ex->g->tensors[tensor].producer = op;
}

/* -------------------------------------------------------------- regions */

static int norm_op(Expander *ex, Region r, NormKind kind, int bias, const char *prefix, SrcLoc loc,
                   int x, int64_t B, int64_t S, int64_t H)
{
    char name[96];
    snprintf(name, sizeof name, "%s.out", prefix);
    int out = act(ex, r, name, loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_HIDDEN), SIZES(B, S, H));
    snprintf(name, sizeof name, "%s.g", prefix);
    int params[2], np = 0;
    params[np++] = param(ex, r, name, loc, 1, DIMS(DIM_HIDDEN), SIZES(H), PRT_INIT_ONES, 0);
    if (kind == NORM_LAYER && bias) {
        snprintf(name, sizeof name, "%s.b", prefix);
        params[np++] = param(ex, r, name, loc, 1, DIMS(DIM_HIDDEN), SIZES(H), PRT_INIT_ZEROS, 0);
    }
    int op = op_new(ex, kind == NORM_RMS ? OP_RMSNORM : OP_LAYERNORM, r, prefix, loc, 1, &x, np,
                    params, out);
    if (kind == NORM_LAYER) {
        snprintf(name, sizeof name, "%s.mean", prefix);
        op_aux(ex, op, tensor_new(ex, r, TENSOR_STAT, name, loc, 2, DIMS(DIM_BATCH, DIM_SEQ), SIZES(B, S)));
    }
    snprintf(name, sizeof name, "%s.rstd", prefix);
    op_aux(ex, op, tensor_new(ex, r, TENSOR_STAT, name, loc, 2, DIMS(DIM_BATCH, DIM_SEQ), SIZES(B, S)));
    return out;
}

/* y = x @ w by op `kind` over ins (x first, then the op's other inputs): the
 * output keeps x's two leading sizes as dims lead0, lead1 and takes the
 * weight's trailing `nout` dims.  The weight is PREFIX.w, the output PREFIX.y. */
static int weighted(Expander *ex, OpKind kind, Region r, const char *prefix, SrcLoc loc, int nin, const int *ins,
                    Dim lead0, Dim lead1, int nw, const Dim *wdims, const int64_t *wsizes, int nout, double std)
{
    char name[96];
    const Tensor *xt = &ex->g->tensors[ins[0]];
    Dim ydims[IR_MAX_TDIMS] = {lead0, lead1};
    int64_t ysizes[IR_MAX_TDIMS] = {xt->sizes[0], xt->sizes[1]};
    for (int i = 0; i < nout; i++) {
        ydims[2 + i] = wdims[nw - nout + i];
        ysizes[2 + i] = wsizes[nw - nout + i];
    }
    snprintf(name, sizeof name, "%s.w", prefix);
    int w = param(ex, r, name, loc, nw, wdims, wsizes, PRT_INIT_NORMAL, std);
    snprintf(name, sizeof name, "%s.y", prefix);
    int y = act(ex, r, name, loc, 2 + nout, ydims, ysizes);
    op_new(ex, kind, r, prefix, loc, nin, ins, 1, &w, y);
    return y;
}

/* y = x @ w (+ b).  wdims/wsizes: the weight; the output keeps x's leading
 * [batch, seq] and takes the weight's trailing `nout` dims. */
static int linear(Expander *ex, Region r, const char *prefix, SrcLoc loc, int x, int nw,
                  const Dim *wdims, const int64_t *wsizes, int nout, int bias, double std)
{
    char name[96];
    int y = weighted(ex, OP_LINEAR, r, prefix, loc, 1, &x, DIM_BATCH, DIM_SEQ, nw, wdims, wsizes, nout, std);
    if (!bias) return y;
    snprintf(name, sizeof name, "%s.b", prefix);
    int b = param(ex, r, name, loc, nout, wdims + nw - nout, wsizes + nw - nout, PRT_INIT_ZEROS, 0);
    Tensor yt = ex->g->tensors[y]; /* a copy: act() may move the tensor table */
    snprintf(name, sizeof name, "%s.out", prefix);
    int out = act(ex, r, name, loc, yt.ndim, yt.dims, yt.sizes);
    snprintf(name, sizeof name, "%s.bias", prefix);
    op_new(ex, OP_BIAS, r, name, loc, 1, &y, 1, &b, out);
    return out;
}

static int unary(Expander *ex, OpKind kind, Region r, const char *name, SrcLoc loc, int x, int nout,
                 const Dim *dims, const int64_t *sizes)
{
    char tname[96];
    snprintf(tname, sizeof tname, "%s.out", name);
    int y = act(ex, r, tname, loc, nout, dims, sizes);
    op_new(ex, kind, r, name, loc, 1, &x, 0, NULL, y);
    return y;
}

/* Rotary positions (`embed positions rope`): q and k of a qkv tensor, plain
 * or grouped, rotated by their token's position; the output has qkv's dims. */
static int rope(Expander *ex, Region r, int qkv)
{
    const Model *m = &ex->plan->model;
    if (m->positions != POS_ROPE) return qkv;
    Tensor t = ex->g->tensors[qkv]; /* a copy: adding tensors may move the array */
    return unary(ex, OP_ROPE, r, "attn.rope", m->positions_loc, qkv, t.ndim, t.dims, t.sizes);
}

static int add(Expander *ex, Region r, const char *name, SrcLoc loc, int a, int b)
{
    const Tensor *at = &ex->g->tensors[a];
    char tname[96];
    snprintf(tname, sizeof tname, "%s.out", name);
    int y = act(ex, r, tname, loc, at->ndim, at->dims, at->sizes);
    int in[2] = {a, b};
    op_new(ex, OP_ADD, r, name, loc, 2, in, 0, NULL, y);
    return y;
}

/* Megatron's hidden dropout on a branch output before its residual add:
 * y = x * mask / (1 - p), the one-byte mask saved for the backward. */
static int dropout(Expander *ex, Region r, const char *name, SrcLoc loc, int x)
{
    if (ex->plan->model.block.dropout <= 0) return x;
    Tensor xt = ex->g->tensors[x]; /* a copy: adding tensors may move the array */
    char tname[96];
    snprintf(tname, sizeof tname, "%s.out", name);
    int y = act(ex, r, tname, loc, xt.ndim, xt.dims, xt.sizes);
    int op = op_new(ex, OP_DROPOUT, r, name, loc, 1, &x, 0, NULL, y);
    snprintf(tname, sizeof tname, "%s.mask", name);
    op_aux(ex, op, tensor_new(ex, r, TENSOR_STAT, tname, loc, xt.ndim, xt.dims, xt.sizes));
    return y;
}

/* The block's activation over an MLP's up projection `up` (SwiGLU over its
 * gate and up halves, else GELU or ReLU): [lead0, lead1, ffn] of sizes n0, n1, F. */
static int mlp_act(Expander *ex, Region r, const char *name, SrcLoc loc, int up, Dim lead0, Dim lead1, int64_t n0,
                   int64_t n1, int64_t F)
{
    MlpKind mlp = ex->plan->model.block.mlp;
    OpKind kind = mlp == MLP_SWIGLU ? OP_SWIGLU : mlp == MLP_RELU ? OP_RELU : OP_GELU;
    return unary(ex, kind, r, name, loc, up, 3, DIMS(lead0, lead1, DIM_FFN), SIZES(n0, n1, F));
}

/* A dense MLP named `prefix` over h [batch, seq, hidden] with F hidden units:
 * PREFIX.up (gate and up for SwiGLU), PREFIX.act (the block's activation),
 * PREFIX.down, with biases when `bias`. */
static int expand_dense_mlp(Expander *ex, Region r, const char *prefix, SrcLoc loc, int h, int64_t B, int64_t S,
                            int64_t H, int64_t F, int bias, double std, double std_out)
{
    const BlockSpec *bs = &ex->plan->model.block;
    char up_name[64], act_name[64], down_name[64];
    snprintf(up_name, sizeof up_name, "%s.up", prefix);
    snprintf(act_name, sizeof act_name, "%s.act", prefix);
    snprintf(down_name, sizeof down_name, "%s.down", prefix);
    int up = bs->mlp == MLP_SWIGLU
                 ? linear(ex, r, up_name, loc, h, 3, DIMS(DIM_HIDDEN, DIM_GATE, DIM_FFN), SIZES(H, 2, F), 2, bias, std)
                 : linear(ex, r, up_name, loc, h, 2, DIMS(DIM_HIDDEN, DIM_FFN), SIZES(H, F), 1, bias, std);
    int a = mlp_act(ex, r, act_name, loc, up, DIM_BATCH, DIM_SEQ, B, S, F);
    return linear(ex, r, down_name, loc, a, 2, DIMS(DIM_FFN, DIM_HIDDEN), SIZES(F, H), 1, bias, std_out);
}

/* A grouped GEMM of the routed rows through each row's expert:
 * x [routed, topk, K...] @ w [experts, K..., M...] -> [routed, topk, M...],
 * the rows of expert e those of offsets[e] .. offsets[e+1] - 1. */
static int moe_matmul(Expander *ex, Region r, const char *prefix, SrcLoc loc, int x, int offsets, int nw,
                      const Dim *wdims, const int64_t *wsizes, int nout, double std)
{
    int in[2] = {x, offsets};
    return weighted(ex, OP_MOE_MATMUL, r, prefix, loc, 2, in, DIM_ROUTED, DIM_TOPK, nw, wdims, wsizes, nout, std);
}

/* A mixture-of-experts MLP over h [batch, seq, hidden] (docs/language.md):
 * the router's gate [batch, seq, topk] with its logits, choices, counts and
 * losses; the dispatch of each token's topk rows sorted by expert; each
 * expert's MLP as two grouped GEMMs around the block's activation; the
 * gate-weighted combine back to [batch, seq, hidden].  With shared experts,
 * the dense MLP `mlp.shared` of shared_ffn units over h, without biases,
 * added to the combine's output (`mlp.shared.add`). */
static int expand_moe(Expander *ex, Region r, int h, int64_t B, int64_t S, int64_t H, double std, double std_out)
{
    const BlockSpec *bs = &ex->plan->model.block;
    const MoeSpec *moe = &bs->moe;
    int64_t E = moe->experts, K = moe->topk, F = moe->expert_ffn, T = B * S;
    SrcLoc loc = moe->loc;
    int wr = param(ex, r, "mlp.router.w", loc, 2, DIMS(DIM_HIDDEN, DIM_EXPERTS), SIZES(H, E), PRT_INIT_NORMAL, std);
    int gate = act(ex, r, "mlp.gate", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_TOPK), SIZES(B, S, K));
    int router = op_new(ex, OP_MOE_ROUTER, r, "mlp.router", loc, 1, &h, 1, &wr, gate);
    /* the logits are an activation: their gradient buffer is the backward's dlogits */
    op_aux(ex, router, act(ex, r, "mlp.router.logits", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_EXPERTS), SIZES(B, S, E)));
    int index = tensor_new(ex, r, TENSOR_INDEX, "mlp.router.index", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_TOPK),
                           SIZES(B, S, K));
    op_aux(ex, router, index);
    ex->g->moe_counts = tensor_new(ex, r, TENSOR_INDEX, "mlp.router.counts", loc, 1, DIMS(DIM_EXPERTS), SIZES(E));
    op_aux(ex, router, ex->g->moe_counts);
    op_aux(ex, router, tensor_new(ex, r, TENSOR_STAT, "mlp.router.losses", loc, 1, DIMS(DIM_GATE), SIZES(2)));
    /* the tokens split over a context axis: the counts summed over it, which
     * the load-balancing loss and its gradient read (ops_emit.c) */
    if (plan_context_axis(ex->plan) >= 0)
        op_aux(ex, router, tensor_new(ex, r, TENSOR_INDEX, "mlp.router.counts.cp", loc, 1, DIMS(DIM_EXPERTS),
                                      SIZES(E)));

    int xp = act(ex, r, "mlp.dispatch.out", loc, 3, DIMS(DIM_ROUTED, DIM_TOPK, DIM_HIDDEN), SIZES(T, K, H));
    int din[2] = {h, index};
    int dispatch = op_new(ex, OP_MOE_PERMUTE, r, "mlp.dispatch", loc, 2, din, 0, NULL, xp);
    int offsets = tensor_new(ex, r, TENSOR_INDEX, "mlp.dispatch.offsets", loc, 1, DIMS(DIM_EXPERTS), SIZES(E + 1));
    int rows = tensor_new(ex, r, TENSOR_INDEX, "mlp.dispatch.rows", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_TOPK),
                          SIZES(B, S, K));
    op_aux(ex, dispatch, offsets);
    op_aux(ex, dispatch, rows);

    int up = bs->mlp == MLP_SWIGLU ? moe_matmul(ex, r, "mlp.experts.up", loc, xp, offsets, 4,
                                                DIMS(DIM_EXPERTS, DIM_HIDDEN, DIM_GATE, DIM_FFN), SIZES(E, H, 2, F), 2, std)
                                   : moe_matmul(ex, r, "mlp.experts.up", loc, xp, offsets, 3,
                                                DIMS(DIM_EXPERTS, DIM_HIDDEN, DIM_FFN), SIZES(E, H, F), 1, std);
    int a = mlp_act(ex, r, "mlp.experts.act", loc, up, DIM_ROUTED, DIM_TOPK, T, K, F);
    int down = moe_matmul(ex, r, "mlp.experts.down", loc, a, offsets, 3, DIMS(DIM_EXPERTS, DIM_FFN, DIM_HIDDEN),
                          SIZES(E, F, H), 1, std_out);
    int out = act(ex, r, "mlp.combine.out", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_HIDDEN), SIZES(B, S, H));
    int cin[3] = {down, gate, rows};
    op_new(ex, OP_MOE_COMBINE, r, "mlp.combine", loc, 3, cin, 0, NULL, out);
    if (moe->shared_ffn == 0) return out;
    int shared = expand_dense_mlp(ex, r, "mlp.shared", loc, h, B, S, H, moe->shared_ffn, 0, std, std_out);
    return add(ex, r, "mlp.shared.add", loc, out, shared);
}

static void expand_embed(Expander *ex, int *wte_out)
{
    const Model *m = &ex->plan->model;
    Graph *g = ex->g;
    int64_t B = ex->plan->train.micro_batch * plan_dp(ex->plan), S = m->seq, H = m->hidden;
    SrcLoc loc = m->loc;
    g->tokens = tensor_new(ex, REGION_EMBED, TENSOR_INDEX, "tokens", loc, 2, DIMS(DIM_BATCH, DIM_SEQ), SIZES(B, S));
    op_new(ex, OP_DATA, REGION_EMBED, "data", loc, 0, NULL, 0, NULL, g->tokens);
    int wte = param(ex, REGION_EMBED, "wte", loc, 2, DIMS(DIM_VOCAB, DIM_HIDDEN), SIZES(m->vocab, H),
                    PRT_INIT_NORMAL, 0.02);
    *wte_out = wte;
    int e = act(ex, REGION_EMBED, "embed.out", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_HIDDEN), SIZES(B, S, H));
    op_new(ex, OP_EMBED, REGION_EMBED, "embed", loc, 1, &g->tokens, 1, &wte, e);
    if (m->positions == POS_LEARNED) {
        int wpe = param(ex, REGION_EMBED, "wpe", loc, 2, DIMS(DIM_SEQ, DIM_HIDDEN), SIZES(S, H),
                        PRT_INIT_NORMAL, 0.01);
        int x = act(ex, REGION_EMBED, "pos.out", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_HIDDEN), SIZES(B, S, H));
        op_new(ex, OP_POS, REGION_EMBED, "pos", loc, 1, &e, 1, &wpe, x);
        e = x;
    } else {
        /* the stream entering layer 0 must have the residual placement: the copy
         * is where a vocab-split lookup's Partial sum is resolved */
        e = unary(ex, OP_COPY, REGION_EMBED, "embed.stream", loc, e, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_HIDDEN),
                  SIZES(B, S, H));
    }
    g->embed_out = e;
}

/* One layer of the block: the stream x in, the stream out; `moe`: its MLP
 * is the mixture of experts, else dense. */
static int expand_layer(Expander *ex, int x, int moe)
{
    const Model *m = &ex->plan->model;
    const BlockSpec *bs = &m->block;
    int64_t B = ex->plan->train.micro_batch * plan_dp(ex->plan), S = m->seq, H = m->hidden;
    int64_t F = m->ffn, NH = m->heads, HD = m->head_dim;
    SrcLoc loc = bs->loc;
    Region r = REGION_BLOCK;
    double std = 0.02, std_out = 0.02 / sqrt(2.0 * (double)(m->layers > 0 ? m->layers : 1));
    int resid = x;
    if (bs->kind == BLOCK_TRANSFORMER) {
        int h = bs->norm != NORM_NONE ? norm_op(ex, r, bs->norm, bs->bias, "ln1", loc, x, B, S, H) : x;
        int qkv;
        if (m->kv_heads == m->heads) {
            qkv = linear(ex, r, "attn.qkv", loc, h, 4, DIMS(DIM_HIDDEN, DIM_QKV, DIM_HEADS, DIM_HEAD_DIM),
                         SIZES(H, 3, NH, HD), 3, bs->bias, std);
            qkv = rope(ex, r, qkv);
        } else {
            /* grouped-query attention: per key/value head its G query heads, then
             * its k and v (the heads dim counts kv heads, so a heads split hands
             * each rank whole groups); rotary positions rotate each k once, and
             * attention reads this layout as it is, k and v once per group. */
            int64_t KV = m->kv_heads, G = NH / KV;
            qkv = linear(ex, r, "attn.qkv", loc, h, 4, DIMS(DIM_HIDDEN, DIM_HEADS, DIM_QKV, DIM_HEAD_DIM),
                         SIZES(H, KV, G + 2, HD), 3, bs->bias, std);
            qkv = rope(ex, r, qkv);
        }
        int att = act(ex, r, "attn.out", loc, 4, DIMS(DIM_BATCH, DIM_SEQ, DIM_HEADS, DIM_HEAD_DIM),
                      SIZES(B, S, NH, HD));
        int aop = op_new(ex, OP_ATTENTION, r, "attn", loc, 1, &qkv, 0, NULL, att);
        op_aux(ex, aop, tensor_new(ex, r, TENSOR_STAT, "attn.probs", loc, 4,
                                   DIMS(DIM_BATCH, DIM_HEADS, DIM_SEQ, DIM_SEQ), SIZES(B, NH, S, S)));
        /* ring attention (`cp_comm ring`): each row's logsumexp, kept for the backward */
        if (ex->plan->layout.cp_comm == CP_COMM_RING && ex->plan->layout.dim_axis[DIM_SEQ] >= 0)
            op_aux(ex, aop, tensor_new(ex, r, TENSOR_STAT, "attn.lse", loc, 3, DIMS(DIM_BATCH, DIM_HEADS, DIM_SEQ),
                                       SIZES(B, NH, S)));
        int proj = linear(ex, r, "attn.proj", loc, att, 3, DIMS(DIM_HEADS, DIM_HEAD_DIM, DIM_HIDDEN),
                          SIZES(NH, HD, H), 1, bs->bias, std_out);
        proj = dropout(ex, r, "attn.drop", loc, proj);
        resid = add(ex, r, "attn.resid", loc, x, proj);
    }
    int h = resid;
    if (bs->norm != NORM_NONE)
        h = norm_op(ex, r, bs->norm, bs->bias, bs->kind == BLOCK_TRANSFORMER ? "ln2" : "ln", loc, resid, B, S, H);
    int down = moe ? expand_moe(ex, r, h, B, S, H, std, std_out)
                   : expand_dense_mlp(ex, r, "mlp", loc, h, B, S, H, F, bs->bias, std, std_out);
    down = dropout(ex, r, "mlp.drop", loc, down);
    int out = (bs->kind == BLOCK_TRANSFORMER || bs->residual)
                  ? add(ex, r, "mlp.resid", loc, resid, down)
                  : unary(ex, OP_COPY, r, "block.stream", loc, down, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_HIDDEN),
                          SIZES(B, S, H));
    return out;
}

/* The repeated block: plan_block_layers layers, each but the last with a
 * dense MLP when the mixture of experts is in every Nth layer only. */
static void expand_block(Expander *ex)
{
    const Model *m = &ex->plan->model;
    Graph *g = ex->g;
    int64_t B = ex->plan->train.micro_batch * plan_dp(ex->plan), S = m->seq, H = m->hidden;
    int64_t N = plan_block_layers(ex->plan);
    ex->sub = 0;
    ex->prefix = "";
    int x = act(ex, REGION_BLOCK, "x", m->block.loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_HIDDEN), SIZES(B, S, H));
    g->block_in = x;
    for (int64_t j = 0; j < N; j++) {
        ex->sub = (int)j;
        ex->prefix = N > 1 ? arena_printf(ex->arena, "l%d.", (int)j) : "";
        x = expand_layer(ex, x, m->block.moe.experts && j == N - 1);
    }
    ex->sub = 0;
    ex->prefix = "";
    g->block_out = x;
}

static void expand_head(Expander *ex, int wte)
{
    const Model *m = &ex->plan->model;
    Graph *g = ex->g;
    int64_t B = ex->plan->train.micro_batch * plan_dp(ex->plan), S = m->seq, H = m->hidden, V = m->vocab;
    SrcLoc loc = m->loc;
    Region r = REGION_HEAD;
    int x = act(ex, r, "xf", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_HIDDEN), SIZES(B, S, H));
    g->head_in = x;
    int h = x;
    if (m->final_norm != NORM_NONE) h = norm_op(ex, r, m->final_norm, m->block.bias, "lnf", loc, x, B, S, H);
    if (!m->has_head) return;
    int logits;
    if (m->tied_head && wte >= 0) {
        logits = act(ex, r, "head.y", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_VOCAB), SIZES(B, S, V));
        op_new(ex, OP_LINEAR_T, r, "head", loc, 1, &h, 1, &wte, logits);
    } else {
        logits = linear(ex, r, "head", loc, h, 2, DIMS(DIM_HIDDEN, DIM_VOCAB), SIZES(H, V), 1, 0, 0.02);
    }
    if (!m->has_loss) return;
    g->targets = tensor_new(ex, r, TENSOR_INDEX, "targets", loc, 2, DIMS(DIM_BATCH, DIM_SEQ), SIZES(B, S));
    op_new(ex, OP_DATA, r, "data", loc, 0, NULL, 0, NULL, g->targets);
    g->loss = tensor_new(ex, r, TENSOR_SCALAR, "loss", loc, 0, NULL, NULL);
    int in[2] = {logits, g->targets};
    int op = op_new(ex, OP_XENT, r, "loss", loc, 2, in, 0, NULL, g->loss);
    op_aux(ex, op, tensor_new(ex, r, TENSOR_STAT, "loss.stats", loc, 3, DIMS(DIM_BATCH, DIM_SEQ, DIM_GATE),
                              SIZES(B, S, 2)));
}

/* ----------------------------------------------------------- placements */

static const char *axis_name(const Plan *plan, int axis) { return plan->mesh.axes[axis].name; }

static void place_tensor(Expander *ex, Tensor *t)
{
    const Plan *plan = ex->plan;
    const Layout *lay = &plan->layout;
    int sp = lay->sp_axis;
    for (int a = 0; a < plan->mesh.naxes; a++) {
        Placement p = {PLACE_R, 0};
        int owner_dim = -1;
        for (int d = 0; d < t->ndim; d++) {
            Dim dim = t->dims[d];
            /* the routed rows are the tokens' rows: they split where batch and
             * a context axis do (the data group) */
            int axis = dim == DIM_ROUTED ? (lay->data_group >= 0 ? lay->data_group : lay->dim_axis[DIM_BATCH])
                                         : lay->dim_axis[dim];
            if (!(plan_axis_parts(plan, axis) >> a & 1)) continue; /* batch may span two axes */
            /* `experts` splits the experts' weights [experts, ...] alone (not
             * the router's columns, its logits or its counts) */
            if (dim == DIM_EXPERTS && !(t->kind == TENSOR_PARAM && d == 0)) continue;
            if (dim == DIM_LAYERS) continue;
            if (t->kind == TENSOR_PARAM && (dim == DIM_BATCH || dim == DIM_SEQ)) continue;
            /* token ids are loaded whole along seq; a seq split starts at the
             * embedding's output (a local slice).  A block's index tensors (a
             * router's choices, a dispatch's rows) index the rank's tokens. */
            if (t->kind == TENSOR_INDEX && dim == DIM_SEQ && t->region != REGION_BLOCK) continue;
            if (owner_dim >= 0 && owner_dim != (int)dim) {
                diag_error(lay->dim_axis_loc[dim], "map one of the two dims to another axis",
                           "tensor `%s` would be split on axis `%s` twice: `%s -> %s` and `%s -> %s`",
                           t->name, axis_name(plan, a), dim_names[owner_dim], axis_name(plan, a),
                           dim_names[dim], axis_name(plan, a));
                ex->errors++;
                continue;
            }
            if (owner_dim == (int)dim) continue; /* a second dim of the same name (probs) */
            owner_dim = (int)dim;
            p.kind = PLACE_S;
            p.dim = (uint8_t)dim;
        }
        /* Expert parallelism: the routed rows inside the experts (their
         * hidden units) live with the experts, split by expert; the rows
         * going in and coming out are the tokens', split where batch is. */
        if (lay->dim_axis[DIM_EXPERTS] == a && tensor_has_dim(t, DIM_ROUTED) && tensor_has_dim(t, DIM_FFN)) {
            p.kind = PLACE_S;
            p.dim = DIM_EXPERTS;
        }
        /* Sequence parallelism: the residual stream and norm outputs are split on
         * seq where nothing else splits them on the tensor axis. */
        if (a == sp && t->kind == TENSOR_ACT && p.kind == PLACE_R && t->ndim == 3 &&
            t->dims[0] == DIM_BATCH && t->dims[1] == DIM_SEQ && t->dims[2] == DIM_HIDDEN) {
            p.kind = PLACE_S;
            p.dim = DIM_SEQ;
        }
        /* ZeRO-3 / FSDP: parameters live flat-sharded over the data axis. */
        if (t->kind == TENSOR_PARAM && lay->zero_stage == 3 && (plan_axis_parts(plan, lay->zero_axis) >> a & 1) &&
            p.kind == PLACE_R) {
            p.kind = PLACE_S;
            p.dim = DIM_FLAT;
        }
        t->home[a] = p;
    }
    /* ... over the parts that do not split it by a dim of its own: the
     * axis program_param_zero_axis names (an expert's weights over ep inside
     * `zero 3 over dp ep`: over dp, their expert-data-parallel ranks), none
     * when no axis spans them, as the optimizer's row for it says (optim.c) */
    if (t->kind == TENSOR_PARAM && lay->zero_stage == 3 && lay->zero_axis >= 0) {
        unsigned keep = plan_axis_parts(plan, program_param_zero_axis(plan, t));
        for (int a = 0; a < plan->mesh.naxes; a++)
            if (!(keep >> a & 1) && t->home[a].kind == PLACE_S && t->home[a].dim == DIM_FLAT)
                t->home[a] = (Placement){PLACE_R, 0};
    }
}

/* The graph's invariants: every op reads tensors already produced (or the
 * region's inputs and parameters), linear contractions agree in size, and
 * every split dim divides by its axis.  A failure is a compiler bug. */
void expand_verify(const Graph *g)
{
    const Plan *plan = g->plan;
    char *ready = calloc((size_t)g->ntensors + 1, 1);
    if (!ready) PARC_BUG("out of memory");
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        if (tt->kind == TENSOR_PARAM || t == g->block_in || t == g->head_in) ready[t] = 1;
        for (int a = 0; a < plan->mesh.naxes; a++) {
            Placement p = tt->home[a];
            if (p.kind == PLACE_P) PARC_BUG("tensor %s has a Partial home", tt->name);
            if (p.kind != PLACE_S || p.dim == DIM_FLAT) continue;
            int found = 0;
            for (int d = 0; d < tt->ndim; d++)
                if (tt->dims[d] == p.dim) {
                    found = 1;
                    if (tt->sizes[d] % plan->mesh.axes[a].size)
                        PARC_BUG("tensor %s: %s = %lld does not divide by axis %s", tt->name, dim_names[p.dim],
                                 (long long)tt->sizes[d], plan->mesh.axes[a].name);
                }
            if (!found && !(p.dim == DIM_EXPERTS && tensor_has_dim(tt, DIM_ROUTED)))
                PARC_BUG("tensor %s is split on a dim it does not have", tt->name);
        }
    }
    for (int i = 0; i < g->nops; i++) {
        const Op *op = &g->ops[i];
        for (int k = 0; k < op->nin; k++)
            if (!ready[op->in[k]]) PARC_BUG("op %s reads %s before it is produced", op->name, g->tensors[op->in[k]].name);
        if (op->kind == OP_LINEAR || op->kind == OP_LINEAR_T) {
            const Tensor *x = &g->tensors[op->in[0]], *w = &g->tensors[op->param[0]];
            int64_t k_in = 1, k_w = 1;
            for (int d = 2; d < x->ndim; d++) k_in *= x->sizes[d];
            int nk = x->ndim - 2;
            for (int d = 0; d < nk; d++) k_w *= w->sizes[op->kind == OP_LINEAR ? d : w->ndim - nk + d];
            if (k_in != k_w) PARC_BUG("op %s contracts %lld input features with %lld weight rows", op->name,
                                      (long long)k_in, (long long)k_w);
        }
        if (op->out >= 0) ready[op->out] = 1;
        for (int k = 0; k < op->naux; k++) ready[op->aux[k]] = 1;
    }
    free(ready);
}

Graph *expand_model(Arena *arena, const Plan *plan)
{
    Expander ex = {arena, plan, arena_alloc(arena, sizeof(Graph)), 0, 0, ""};
    Graph *g = ex.g;
    g->plan = plan;
    g->tokens = g->targets = g->embed_out = g->head_in = g->loss = g->grad_sumsq = g->moe_counts = -1;
    int wte = -1;
    int first = 0;
    g->region_first[REGION_EMBED] = 0;
    if (plan->model.has_embed) expand_embed(&ex, &wte);
    g->region_count[REGION_EMBED] = g->nops - first;
    first = g->nops;
    g->region_first[REGION_BLOCK] = first;
    expand_block(&ex);
    g->region_count[REGION_BLOCK] = g->nops - first;
    first = g->nops;
    g->region_first[REGION_HEAD] = first;
    expand_head(&ex, wte);
    g->region_count[REGION_HEAD] = g->nops - first;
    /* the gradient norm's one value: the gradients' sum of squares (optim.c),
     * Partial over the axes it is summed over until its reduction */
    g->grad_sumsq = tensor_new(&ex, REGION_HEAD, TENSOR_SCALAR, "grad_norm.sumsq", plan->train.loc, 0, NULL, NULL);

    for (int i = 0; i < g->ntensors; i++) place_tensor(&ex, &g->tensors[i]);
    if (!ex.errors) expand_verify(g);
    for (int i = 0; i < g->ntensors; i++) {
        const Tensor *t = &g->tensors[i];
        if (t->kind != TENSOR_PARAM) continue;
        int64_t n = expand_tensor_numel(t);
        g->params_total += t->region == REGION_BLOCK ? n * (plan->model.layers / plan_block_layers(plan)) : n;
    }
    int64_t counted = plan_parameter_counts(plan, &g->params_active);
    if (!ex.errors && counted != g->params_total)
        PARC_BUG("the plan counts %" PRId64 " parameters, its graph %" PRId64, counted, g->params_total);
    return ex.errors ? NULL : g;
}

void expand_dump(const Graph *g, FILE *out)
{
    const Plan *plan = g->plan;
    fprintf(out, "graph %s: %lld parameters\n", plan->model.name ? plan->model.name : "model",
            (long long)g->params_total);
    for (int r = 0; r < REGION_COUNT; r++) {
        fprintf(out, "region %s:\n", region_names[r]);
        for (int i = 0; i < g->ntensors; i++) {
            const Tensor *t = &g->tensors[i];
            if (t->region != (Region)r) continue;
            char place[256];
            expand_placement_format(plan, t->home, place, sizeof place);
            fprintf(out, "  %-6s %-14s [", tensor_kind_names[t->kind], t->name);
            for (int d = 0; d < t->ndim; d++)
                fprintf(out, "%s%s=%lld", d ? ", " : "", dim_names[t->dims[d]], (long long)t->sizes[d]);
            fprintf(out, "]  %s\n", place);
        }
        for (int i = 0; i < g->region_count[r]; i++) {
            const Op *o = &g->ops[g->region_first[r] + i];
            fprintf(out, "  op %-12s %-10s", o->name, op_names[o->kind]);
            for (int k = 0; k < o->nin; k++) fprintf(out, " %s", g->tensors[o->in[k]].name);
            for (int k = 0; k < o->nparam; k++) fprintf(out, " %s", g->tensors[o->param[k]].name);
            if (o->out >= 0) fprintf(out, " -> %s", g->tensors[o->out].name);
            fprintf(out, "\n");
        }
    }
}
