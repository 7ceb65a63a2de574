/*
 * ops.c — the rows of the compiler's op table (ops.h): per graph op its
 * placement rule (place.c), what its backward reads, the shape of its runtime
 * calls, their FLOPs, scratch and cost (the memory traffic or GEMMs cost.c
 * charges), its runtime entries and emitters (ops_emit.c), and its first-writer
 * rule (first_write.c) or why it has none; ops_check says a row is whole.
 * Adding an op is one row here plus its functions; see docs/design.md,
 * "Adding an op".
 */
#include "lower.h"
#include "ops_emit.h"
#include "prt_scratch.h"
#include <math.h>

/* ------------------------------------------------------------ shape helpers */

static const Placement *out_place(const Lowerer *lw, const Op *op) { return lw->bind[op->out].produced; }

/* Local sizes of tensor t under placement place. */
static void sizes_of(const Lowerer *lw, int t, const Placement *place, int64_t *sizes)
{
    program_local_sizes(lw->plan, &lw->g->tensors[t], place, sizes);
}

/* Rows (batch x seq) of tensor t under place. */
static int64_t rows_of(const Lowerer *lw, int t, const Placement *place)
{
    int64_t s[IR_MAX_TDIMS];
    sizes_of(lw, t, place, s);
    return s[0] * s[1];
}

/* Product of t's local sizes from dim `from` on. */
static int64_t trailing(const Lowerer *lw, int t, const Placement *place, int from)
{
    int64_t s[IR_MAX_TDIMS];
    sizes_of(lw, t, place, s);
    int64_t n = 1;
    for (int i = from; i < lw->g->tensors[t].ndim; i++) n *= s[i];
    return n;
}

static int64_t numel_of(const Lowerer *lw, int t, const Placement *place)
{
    return program_local_numel(lw->plan, &lw->g->tensors[t], place);
}

/* The mesh axis splitting dim d under place, -1 none. */
static int axis_of_split(const Lowerer *lw, const Placement *place, Dim d)
{
    for (int a = 0; a < lw->naxes; a++)
        if (place[a].kind == PLACE_S && place[a].dim == d) return a;
    return -1;
}

static void shape_clear(OpShape *s)
{
    memset(s, 0, sizeof *s);
    s->axis = -1;
    s->seq_axis = -1;
}

/* ------------------------------------------------------------ shapes */

/* d[0..n-1] = the first n local sizes of tensor t under place. */
static void shape_dims(const Lowerer *lw, int t, const Placement *place, int n, OpShape *s)
{
    int64_t z[IR_MAX_TDIMS];
    shape_clear(s);
    sizes_of(lw, t, place, z);
    for (int i = 0; i < n; i++) s->d[i] = z[i];
}

/* d = {N rows, width}: rows (batch x seq) of tensor t and the product of its
 * other local sizes. */
static void shape_row_width(const Lowerer *lw, int t, const Placement *place, OpShape *s)
{
    shape_clear(s);
    s->d[0] = rows_of(lw, t, place);
    s->d[1] = trailing(lw, t, place, 2);
}

/* data: d = {B, T} local samples and positions. */
static void shape_data(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    (void)a;
    shape_dims(lw, op->out, out_place(lw, op), 2, s);
}

/* embed: d = {N rows, C width, V local vocab}, axis splits the vocab. */
static void shape_embed(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    shape_clear(s);
    s->d[0] = rows_of(lw, op->in[0], a->in[0].place);
    s->d[1] = trailing(lw, op->out, out_place(lw, op), 2);
    s->d[2] = trailing(lw, op->param[0], a->param[0].place, 0) / (s->d[1] ? s->d[1] : 1);
    s->axis = axis_of_split(lw, a->param[0].place, DIM_VOCAB);
}

/* pos: d = {B, T, C}, axis splits the sequence. */
static void shape_pos(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    (void)a;
    shape_dims(lw, op->out, out_place(lw, op), 3, s);
    s->axis = axis_of_split(lw, out_place(lw, op), DIM_SEQ);
}

/* layernorm, rmsnorm, bias, swiglu: d = {N rows, C (or M, F) width}. */
static void shape_rows(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    (void)a;
    shape_row_width(lw, op->out, out_place(lw, op), s);
}

/* linear, linear_t: d = {N, K, M}: in[N,K] -> out[N,M] under the op's own
 * produced placement. */
static void shape_linear(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    shape_row_width(lw, op->in[0], a->in[0].place, s);
    int64_t N = s->d[0];
    s->d[2] = numel_of(lw, op->out, out_place(lw, op)) / (N ? N : 1);
}

/* gelu, relu, add, copy: d = {n elements}. */
static void shape_elements(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    (void)a;
    shape_clear(s);
    s->d[0] = numel_of(lw, op->out, out_place(lw, op));
}

/* attention: d = {B, T, NH, HD, KV, Tk}: T local query rows, NH local query
 * heads, KV local key/value heads (KV == NH: the qkv is [B, Tk, 3, NH, HD];
 * else the grouped [B, Tk, KV, NH / KV + 2, HD] it reads as it is), Tk keys
 * (T, or the whole sequence when the rule splits the queries on seq: context
 * parallelism); kept: the probabilities were saved; axis splits the heads (its
 * coordinate offsets the dropout mask's heads), seq_axis the query rows (its
 * coordinate times T offsets them). */
static void shape_attention(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    int64_t z[IR_MAX_TDIMS];
    shape_dims(lw, op->out, out_place(lw, op), 4, s);
    sizes_of(lw, op->in[0], a->in[0].place, z);
    const Model *m = &lw->plan->model;
    s->d[4] = m->kv_heads == m->heads ? s->d[2] : z[2];
    s->d[5] = z[1];
    s->seq_axis = axis_of_split(lw, out_place(lw, op), DIM_SEQ);
    s->axis = axis_of_split(lw, out_place(lw, op), DIM_HEADS);
    const Binding *p = &lw->bind[op->aux[0]];
    s->kept = p->needed && p->value.buf >= 0;
    s->dropout = lw->plan->model.block.dropout > 0;
    int ring = place_ring_axis(lw, op);
    if (ring >= 0) s->ring = lw->plan->mesh.axes[ring].size, s->balanced = lw->plan->layout.cp_balanced;
    if (place_balanced_gather(lw, op)) s->balanced = 1;
}

/* rope: d = {B, T, G groups, U heads per group, R rotated per group, HD} of
 * the qkv it rotates: a plain [B, T, 3, NH, HD] is G 1, U 3 NH, R 2 NH (q and
 * k); the grouped [B, T, KV, Q+2, HD] is G KV, U Q+2, R Q+1 (the queries and
 * k of each group); axis splits the sequence (its coordinate offsets the
 * positions). */
static void shape_rope(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    int64_t z[IR_MAX_TDIMS];
    shape_clear(s);
    sizes_of(lw, op->in[0], a->in[0].place, z);
    s->d[0] = z[0], s->d[1] = z[1], s->d[5] = z[4];
    if (lw->g->tensors[op->in[0]].dims[2] == DIM_QKV) {
        s->d[2] = 1, s->d[3] = z[2] * z[3], s->d[4] = 2 * z[3];
    } else {
        s->d[2] = z[2], s->d[3] = z[3], s->d[4] = z[3] - 1;
    }
    s->axis = axis_of_split(lw, a->in[0].place, DIM_SEQ);
}

/* dropout: d = {B, T, C, T global} of its [batch, seq, hidden] output, axis
 * splits the sequence (sequence parallelism). */
static void shape_dropout(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    (void)a;
    int64_t z[IR_MAX_TDIMS];
    shape_clear(s);
    sizes_of(lw, op->out, out_place(lw, op), z);
    s->d[0] = z[0], s->d[1] = z[1], s->d[2] = z[2];
    s->d[3] = lw->g->tensors[op->out].sizes[1];
    s->axis = axis_of_split(lw, out_place(lw, op), DIM_SEQ);
}

/* cross_entropy: d = {N rows, V local vocab}, axis splits the vocab. */
static void shape_xent(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    shape_row_width(lw, op->in[0], a->in[0].place, s);
    s->axis = axis_of_split(lw, a->in[0].place, DIM_VOCAB);
}

/* moe_router, moe_permute: d = {T tokens, H, E experts, K chosen per token}
 * of the [batch, seq, hidden] input. */
static void shape_moe_tokens(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    const MoeSpec *moe = &lw->plan->model.block.moe;
    shape_row_width(lw, op->in[0], a->in[0].place, s);
    s->d[2] = moe->experts;
    s->d[3] = moe->topk;
}

/* moe_matmul: d = {R routed rows, K, M, E local experts, R expected, ep}:
 * in[R,K] through w[E,K,M] -> out[R,M].  Under expert parallelism (the
 * weights split by expert on axis ep - 1; 0: none) R is the rows the buffers
 * hold, the bound of what the rank's experts can receive, and the expected
 * rows the busiest rank's: the balanced share (the axis's tokens x topk / its
 * size) times the plan's `imbalance`, which the cost model charges. */
static void shape_moe_matmul(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    shape_row_width(lw, op->in[0], a->in[0].place, s);
    s->d[2] = trailing(lw, op->out, out_place(lw, op), 2);
    int64_t w[IR_MAX_TDIMS];
    sizes_of(lw, op->param[0], a->param[0].place, w);
    s->d[3] = w[0];
    s->d[4] = s->d[0];
    s->d[5] = 0;
    for (int ax = 0; ax < lw->naxes; ax++) {
        Placement p = a->in[0].place[ax];
        if (p.kind != PLACE_S || p.dim != DIM_EXPERTS) continue;
        /* the tokens of the axis: the routed rows' first dim, less what
         * batch's other axis splits off */
        const MoeSpec *moe = &lw->plan->model.block.moe;
        double tokens = (double)lw->g->tensors[op->in[0]].sizes[0];
        for (int o = 0; o < lw->naxes; o++)
            if (o != ax && a->in[0].place[o].kind == PLACE_S && a->in[0].place[o].dim == DIM_ROUTED)
                tokens /= lw->plan->mesh.axes[o].size;
        double busiest = tokens * (double)moe->topk / (double)lw->plan->mesh.axes[ax].size * moe->imbalance;
        s->d[4] = (int64_t)llround(busiest);
        s->d[5] = ax + 1;
    }
}

/* moe_combine: d = {T tokens, H, K} of the [batch, seq, hidden] output. */
static void shape_moe_combine(const Lowerer *lw, const Op *op, const OpArgs *a, OpShape *s)
{
    shape_row_width(lw, op->out, out_place(lw, op), s);
    s->d[2] = trailing(lw, op->in[1], a->in[1].place, 2);
}

/* ------------------------------------------------------------ FLOPs */

/* FLOPs or elements moved per call of the ops whose count is a constant per
 * element of their shape: forward / backward per element times d[0] x ... x
 * d[n-1]. */
typedef struct PerElement {
    double forward, backward;
    int n;
} PerElement;

static double per_element(PerElement f, const OpShape *s, int bwd)
{
    double x = bwd ? f.backward : f.forward;
    for (int i = 0; i < f.n; i++) x *= (double)s->d[i];
    return x;
}

#define OPS_FLOPS(name, fwd, bwd, n) \
    static double flops_##name(const OpShape *s, int b) { return per_element((PerElement){fwd, bwd, n}, s, b); }
OPS_FLOPS(none, 0, 0, 0)
OPS_FLOPS(layernorm, 8, 16, 2)
OPS_FLOPS(rmsnorm, 4, 8, 2)
OPS_FLOPS(bias, 1, 0, 2)
OPS_FLOPS(activation, 8, 0, 1)
OPS_FLOPS(swiglu, 6, 0, 2)
OPS_FLOPS(add, 1, 0, 1)
OPS_FLOPS(dropout, 1, 1, 3)
OPS_FLOPS(xent, 5, 3, 2)
#undef OPS_FLOPS
/* linear, d = {N, K, M}: 2 N K M forward; the backward's input gradient and
 * its weight gradient 2 N K M each, one of them for a call of one half */
static double flops_linear(const OpShape *s, int bwd)
{
    double f = 2.0 * (double)s->d[0] * s->d[1] * s->d[2];
    return bwd && s->part == OP_PART_WHOLE ? 2.0 * f : f;
}
/* rope, d = {B, T, G, U, R, HD}: per rotated element two products and a sum
 * (x cos -/+ x' sin), forward and backward alike; the heads passed through
 * and the cos and sin of each (position, pair) are not counted. */
static double flops_rope(const OpShape *s, int bwd)
{
    (void)bwd;
    return 3.0 * (double)s->d[0] * s->d[1] * s->d[2] * s->d[4] * s->d[5];
}
/* the router's GEMM, d = {T, H, E, K}: logits 2 T H E forward; the backward's
 * dx and dwr 2 T H E each (the routing and the losses, O(T E), not counted) */
static double flops_moe_router(const OpShape *s, int bwd)
{
    return (bwd ? 4.0 : 2.0) * (double)s->d[0] * s->d[1] * s->d[2];
}
/* the grouped GEMM, d = {R, K, M, E, R expected}: the expected T K routed
 * rows each through one expert, 2 R K M forward, twice that backward: a
 * token's FLOPs are its topk experts', the active ones */
static double flops_moe_matmul(const OpShape *s, int bwd)
{
    return (bwd ? 4.0 : 2.0) * (double)s->d[4] * s->d[1] * s->d[2];
}
/* combine, d = {T, H, K}: a product and a sum per routed element forward;
 * dy and dweight backward */
static double flops_moe_combine(const OpShape *s, int bwd)
{
    return (bwd ? 4.0 : 2.0) * (double)s->d[0] * s->d[1] * s->d[2];
}

/* QK^T and PV forward, T query rows by Tk keys; backward twice that, plus
 * QK^T again when the probabilities were not kept.  A ring attention call is
 * one step: T rows by the T keys of one chunk, every step charged whole (the
 * busiest rank of a causal split in order, the last, computes all of them),
 * or half of it with the load-balanced split (every rank alike); the
 * all-gather form's calls likewise. */
static double flops_attention(const OpShape *s, int bwd)
{
    double f = (double)s->d[0] * s->d[1] * s->d[5] * s->d[2] * s->d[3];
    /* the load-balanced split: a ring step computes two of its four blocks of
     * halves (prt_ring_kinds: two whole, or one whole and two diagonals), a
     * gathered half of query rows half of the keys on average */
    if (s->balanced) f *= 0.5;
    /* a ring step's backward: QK^T again, dV, dP, dQ, dK */
    if (s->ring) return (bwd ? 10.0 : 4.0) * f;
    return (bwd ? (s->kept ? 8.0 : 12.0) : 4.0) * f;
}

/* ------------------------------------------------------------ memory traffic */

/* Elements one call reads plus writes (the row's `traffic`), for the ops
 * that move a constant number per element of their shape's first n sizes:
 * OPS_TRAFFIC(name, forward passes, backward passes, n). */
#define OPS_TRAFFIC(name, fwd, bwd, n) \
    static double traffic_##name(const OpShape *s, int b) { return per_element((PerElement){fwd, bwd, n}, s, b); }
OPS_TRAFFIC(embed, 2, 3, 2)      /* gather N rows of C / read dout, add into the table's rows */
OPS_TRAFFIC(pos, 3, 2, 3)        /* out = in + pos / dpos += dout */
OPS_TRAFFIC(norm, 2, 3, 2)       /* read x, write y / read x and dy, write dx */
OPS_TRAFFIC(bias, 2, 1, 2)       /* in place / sum dy over rows */
OPS_TRAFFIC(activation, 2, 3, 1) /* read x, write y / read x and dy, write dx */
OPS_TRAFFIC(swiglu, 3, 5, 2)     /* read gate and up, write / read both and dy, write both */
OPS_TRAFFIC(dropout, 3, 3, 3)    /* read x, write y and the mask / read the mask and dy, add into dx */
OPS_TRAFFIC(add, 3, 3, 1)
OPS_TRAFFIC(copy, 2, 2, 1)
OPS_TRAFFIC(xent, 2, 2, 2)       /* max, then the sum of exp over the logits / read them, write dlogits */
#undef OPS_TRAFFIC

/* moe_permute, d = {T, H, E, K}: each token's row read K times and written to
 * its K routed rows / each routed row's gradient read, the token's written */
static double traffic_moe_permute(const OpShape *s, int bwd)
{
    return (bwd ? 1.0 + (double)s->d[3] : 2.0 * (double)s->d[3]) * (double)s->d[0] * s->d[1];
}
/* moe_combine, d = {T, H, K}: K routed rows read per token, the token's row
 * written / dout read K times, the routed rows read (for dweight) and their
 * gradients written */
static double traffic_moe_combine(const OpShape *s, int bwd)
{
    return (bwd ? 3.0 * (double)s->d[2] : (double)s->d[2] + 1.0) * (double)s->d[0] * s->d[1];
}

/* attention: the qkv is read once, k and v once per key/value group,
 * B T (NH + 2 KV) HD, and the output written (forward); the backward reads
 * the qkv and dout and writes dqkv.  With the probabilities kept (stored
 * attention) the score matrix B NH T T goes through memory as well: written,
 * read by the softmax and read again by P V (forward); read and its gradient
 * written (backward).  Without them (flash attention, or probabilities
 * recomputed) the kernels work on tiles of scores that stay on chip (shared
 * memory on a GPU, a core's L2 on the CPU: runtime/cpu/prt_cpu_attention.c,
 * runtime/cuda/prt_cuda_attention.cu): memory sees only the qkv, the output
 * and their gradients, FlashAttention-2's traffic (Dao 2023, section 3)
 * less its saved row statistics, which these kernels recompute (their FLOPs
 * are in flops_attention); the tile passes are attention_onchip's. */
static double traffic_attention(const OpShape *s, int bwd)
{
    double scores = (double)s->d[0] * s->d[2] * s->d[1] * s->d[5];
    double qkv = (double)s->d[0] * s->d[5] * (s->d[2] + 2 * s->d[4]) * s->d[3];
    double out = (double)s->d[0] * s->d[1] * s->d[2] * s->d[3];
    return (s->kept ? (bwd ? 4.0 : 3.0) * scores : 0) + (bwd ? 2.0 * qkv + out : qkv + out);
}

/* The score passes of attention without kept probabilities, each over a
 * tile on chip: scores written, softmaxed, read by P V (forward 3); the
 * backward rebuilds them (3), forms dP and dS (3) and reads dS for dQ and
 * dK (1). */
static double onchip_attention(const OpShape *s, int bwd)
{
    double scores = (double)s->d[0] * s->d[2] * s->d[1] * s->d[5];
    return s->kept ? 0 : (bwd ? 7.0 : 3.0) * scores;
}

/* rope, d = {B, T, G, U, R, HD} (runtime/cpu/prt_cpu_rope.c): the forward
 * reads the qkv once and writes it once, every head (the ones passed
 * through are copied); the backward reads dout and writes din (its
 * first-writer rule: a write, not an add, where nothing wrote din before). */
static double traffic_rope(const OpShape *s, int bwd)
{
    (void)bwd;
    return 2.0 * (double)s->d[0] * s->d[1] * s->d[2] * s->d[3] * s->d[5];
}

/* linear, linear_t: d = {N, K, M}: forward N x K by K x M; backward the input
 * gradient (N x M by M x K) and the weight gradient (K x N by N x M), each
 * 2 N K M FLOPs in the class of the same smallest dimension; a call of one
 * half of the backward (OpShape.part) runs one of them. */
static int gemm_linear(const OpShape *s, int bwd, int64_t mnk[3])
{
    mnk[0] = s->d[0], mnk[1] = s->d[2], mnk[2] = s->d[1];
    return bwd && s->part == OP_PART_WHOLE ? 2 : 1;
}

/* the router, d = {T, H, E, K}: logits[T,E] = x[T,H] @ wr[H,E]; the backward
 * its input and weight gradients */
static int gemm_moe_router(const OpShape *s, int bwd, int64_t mnk[3])
{
    mnk[0] = s->d[0], mnk[1] = s->d[2], mnk[2] = s->d[1];
    return bwd ? 2 : 1;
}
/* the grouped GEMM, d = {R, K, M, E}: charged as one R x K by K x M GEMM
 * (the experts' calls together; an expert's share of the rows is not known
 * before the step) */
static int gemm_moe_matmul(const OpShape *s, int bwd, int64_t mnk[3])
{
    mnk[0] = s->d[4], mnk[1] = s->d[2], mnk[2] = s->d[1];
    return bwd ? 2 : 1;
}

/* ------------------------------------------------------------ scratch */

#define BIT(mask, k) (((mask) >> (k)) & 1u)

static int64_t scratch_none(const OpShape *s, int bwd, unsigned given, unsigned wide)
{
    return (void)s, (void)bwd, (void)given, (void)wide, 0;
}

/* embed_bwd(dwte, tokens, dout, ...) */
static int64_t scratch_embed(const OpShape *s, int bwd, unsigned given, unsigned wide)
{
    (void)given;
    return bwd ? prt_scratch_embed_bwd(s->d[1], (int)BIT(wide, 0)) : 0;
}

/* layernorm_bwd(din, dw, db, ...) */
static int64_t scratch_layernorm(const OpShape *s, int bwd, unsigned given, unsigned wide)
{
    (void)given;
    return bwd ? prt_scratch_layernorm_bwd(s->d[1], (int)BIT(wide, 1), (int)BIT(wide, 2)) : 0;
}

/* rmsnorm_bwd(din, dw, ...) */
static int64_t scratch_rmsnorm(const OpShape *s, int bwd, unsigned given, unsigned wide)
{
    (void)given;
    return bwd ? prt_scratch_rmsnorm_bwd(s->d[1], (int)BIT(wide, 1)) : 0;
}

/* matmul_fwd(out, in, w, N, K, M);  matmul_bwd(din, dw, dout, in, w, N, K, M);
 * the matmul_bias_* forms put the bias after these (b, db: never widened) */
static int64_t scratch_linear(const OpShape *s, int bwd, unsigned given, unsigned wide)
{
    int64_t N = s->d[0], K = s->d[1], M = s->d[2];
    if (!bwd) return prt_scratch_matmul_fwd(K, M, N, (int)BIT(wide, 2), (int)BIT(wide, 1), (int)BIT(wide, 0));
    return prt_scratch_matmul_bwd(K, M, N, (int)BIT(given, 0), (int)BIT(given, 1), (int)BIT(wide, 4),
                                  (int)BIT(wide, 1), (int)BIT(wide, 3), (int)BIT(wide, 2), (int)BIT(wide, 0));
}

/* attention_fwd(out, probs, qkv, ...);  attention_bwd(dqkv, dout, qkv, probs, ...);
 * ring attention's steps (s->ring) the ring_attention_* entries; the
 * attention_dropout_* forms (s->dropout) take the same first arguments;
 * sized by the key count Tk (a head's slice holds rows of Tk keys) */
static int64_t scratch_attention(const OpShape *s, int bwd, unsigned given, unsigned wide)
{
    int64_t T = s->d[5], HD = s->d[3], heads = s->d[0] * s->d[2];
    if (s->ring) /* ring_attention_fwd(out, lse, qkv, kv, ...) / _bwd(dqkv, dkv, dout, out, lse, qkv, kv, ...) */
        return bwd ? prt_scratch_ring_attention_bwd(T, HD, heads, (int)(BIT(wide, 5) | BIT(wide, 0)))
                   : prt_scratch_ring_attention_fwd(T, HD, heads, (int)(BIT(wide, 2) | BIT(wide, 0)));
    if (!bwd)
        return (s->dropout ? prt_scratch_attention_dropout_fwd : prt_scratch_attention_fwd)(
            T, HD, heads, (int)BIT(given, 1), (int)BIT(wide, 1), (int)BIT(wide, 2), (int)BIT(wide, 0));
    return (s->dropout ? prt_scratch_attention_dropout_bwd : prt_scratch_attention_bwd)(
        T, HD, heads, (int)BIT(given, 3), (int)BIT(wide, 3), (int)BIT(wide, 2), (int)BIT(wide, 0), (int)BIT(wide, 1));
}

static int64_t scratch_xent(const OpShape *s, int bwd, unsigned given, unsigned wide)
{
    (void)given, (void)wide;
    return bwd ? 0 : prt_scratch_xent_fwd(s->d[0]);
}

/* moe_router_fwd(logits, index, weight, counts, losses, x, wr, ...);
 * moe_router_bwd(dx, dwr, dlogits, dweight, logits, index, counts, x, wr, ...) */
static int64_t scratch_moe_router(const OpShape *s, int bwd, unsigned given, unsigned wide)
{
    int64_t T = s->d[0], H = s->d[1], E = s->d[2];
    if (!bwd) return prt_scratch_moe_router_fwd(T, H, E, (int)BIT(wide, 6), (int)BIT(wide, 5), (int)BIT(wide, 0));
    return prt_scratch_moe_router_bwd(T, H, E, (int)BIT(given, 0), (int)BIT(given, 1), (int)BIT(wide, 8),
                                      (int)BIT(wide, 1), (int)BIT(wide, 7), (int)BIT(wide, 2), (int)BIT(wide, 0));
}

/* moe_matmul_fwd(out, in, w, offsets, ...);  moe_matmul_bwd(din, dw, dout, in, w, offsets, ...):
 * bounded by an expert that gets all R rows */
static int64_t scratch_moe_matmul(const OpShape *s, int bwd, unsigned given, unsigned wide)
{
    int64_t R = s->d[0], K = s->d[1], M = s->d[2];
    if (!bwd) return prt_scratch_moe_matmul_fwd(R, K, M, (int)BIT(wide, 2), (int)BIT(wide, 1), (int)BIT(wide, 0));
    return prt_scratch_moe_matmul_bwd(R, K, M, (int)BIT(given, 0), (int)BIT(given, 1), (int)BIT(wide, 4),
                                      (int)BIT(wide, 1), (int)BIT(wide, 3), (int)BIT(wide, 2), (int)BIT(wide, 0));
}

/* ------------------------------------------------------------ the table */

#define SAVES_INPUT_AND_STATS (OP_SAVES_IN0 | OP_SAVES_AUX)

const OpDesc op_table[OP_COUNT] = {
    [OP_DATA] = {.rule = place_rule_data,
                 .saves = 0,
                 .reads_params = 0,
                 .shape = shape_data,
                 .flops = flops_none,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_data,
                 .bwd = RT_NONE,
                 .emit_fwd = ops_emit_data_fwd,
                 .emit_bwd = NULL,
                 .cost = OP_COST_FREE /* the runtime's own code fills B x T token ids: not modelled */},
    [OP_EMBED] = {.rule = place_rule_embed,
                 .saves = SAVES_INPUT_AND_STATS,
                 .reads_params = 0,
                 .shape = shape_embed,
                 .flops = flops_none,
                 .scratch = scratch_embed,
                 .partial = "looks rows up in a",
                 .fwd = RT_prt_embed_fwd,
                 .bwd = RT_prt_embed_bwd,
                 .emit_fwd = ops_emit_embed_fwd,
                 .emit_bwd = ops_emit_embed_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_embed,
                 .mem = MEM_STREAM,
                 .bwd_accumulates = "it adds into the table gradient, a parameter's, row by token"},
    [OP_POS] = {.rule = place_rule_elementwise,
                 .saves = 0,
                 .reads_params = 0,
                 .shape = shape_pos,
                 .flops = flops_none,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_pos_fwd,
                 .bwd = RT_prt_pos_bwd,
                 .emit_fwd = ops_emit_pos_fwd,
                 .emit_bwd = ops_emit_pos_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_pos,
                 .mem = MEM_STREAM},
    [OP_LAYERNORM] = {.rule = place_rule_norm,
                 .saves = SAVES_INPUT_AND_STATS,
                 .reads_params = 1,
                 .shape = shape_rows,
                 .flops = flops_layernorm,
                 .scratch = scratch_layernorm,
                 .partial = NULL,
                 .fwd = RT_prt_layernorm_fwd,
                 .bwd = RT_prt_layernorm_bwd,
                 .emit_fwd = ops_emit_layernorm_fwd,
                 .emit_bwd = ops_emit_layernorm_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_norm,
                 .mem = MEM_NORM},
    [OP_RMSNORM] = {.rule = place_rule_norm,
                 .saves = SAVES_INPUT_AND_STATS,
                 .reads_params = 1,
                 .shape = shape_rows,
                 .flops = flops_rmsnorm,
                 .scratch = scratch_rmsnorm,
                 .partial = NULL,
                 .fwd = RT_prt_rmsnorm_fwd,
                 .bwd = RT_prt_rmsnorm_bwd,
                 .emit_fwd = ops_emit_rmsnorm_fwd,
                 .emit_bwd = ops_emit_rmsnorm_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_norm,
                 .mem = MEM_NORM},
    [OP_LINEAR] = {.rule = place_rule_linear,
                 .saves = SAVES_INPUT_AND_STATS,
                 .reads_params = 1,
                 .shape = shape_linear,
                 .flops = flops_linear,
                 .scratch = scratch_linear,
                 .partial = "contracts",
                 .fwd = RT_prt_matmul_fwd,
                 .bwd = RT_prt_matmul_bwd,
                 .folds_bias = 1,
                 .fwd_bias = RT_prt_matmul_bias_fwd,
                 .bwd_bias = RT_prt_matmul_bias_bwd,
                 .emit_fwd = ops_emit_linear_fwd,
                 .emit_bwd = ops_emit_linear_bwd,
                 .cost = OP_COST_GEMM,
                 .gemm = gemm_linear},
    [OP_LINEAR_T] = {.rule = place_rule_linear,
                 .saves = SAVES_INPUT_AND_STATS,
                 .reads_params = 1,
                 .shape = shape_linear,
                 .flops = flops_linear,
                 .scratch = scratch_linear,
                 .partial = "contracts",
                 .fwd = RT_prt_matmul_t_fwd,
                 .bwd = RT_prt_matmul_t_bwd,
                 .emit_fwd = ops_emit_linear_fwd,
                 .emit_bwd = ops_emit_linear_bwd,
                 .cost = OP_COST_GEMM,
                 .gemm = gemm_linear},
    [OP_BIAS] = {.rule = place_rule_elementwise,
                 .saves = 0,
                 .reads_params = 0,
                 .shape = shape_rows,
                 .flops = flops_bias,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_bias_fwd,
                 .bwd = RT_prt_bias_bwd,
                 .emit_fwd = ops_emit_bias_fwd,
                 .emit_bwd = ops_emit_bias_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_bias,
                 .mem = MEM_STREAM,
                 .bwd_accumulates = "it produces only the bias gradient, a parameter's"},
    [OP_GELU] = {.rule = place_rule_elementwise,
                 .saves = SAVES_INPUT_AND_STATS,
                 .reads_params = 0,
                 .shape = shape_elements,
                 .flops = flops_activation,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_gelu_fwd,
                 .bwd = RT_prt_gelu_bwd,
                 .emit_fwd = ops_emit_activation_fwd,
                 .emit_bwd = ops_emit_activation_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_activation,
                 .mem = MEM_ACTIVATION},
    [OP_RELU] = {.rule = place_rule_elementwise,
                 .saves = SAVES_INPUT_AND_STATS,
                 .reads_params = 0,
                 .shape = shape_elements,
                 .flops = flops_activation,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_relu_fwd,
                 .bwd = RT_prt_relu_bwd,
                 .emit_fwd = ops_emit_activation_fwd,
                 .emit_bwd = ops_emit_activation_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_activation,
                 .mem = MEM_STREAM},
    [OP_SWIGLU] = {.rule = place_rule_elementwise,
                 .saves = SAVES_INPUT_AND_STATS,
                 .reads_params = 0,
                 .shape = shape_rows,
                 .flops = flops_swiglu,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_swiglu_fwd,
                 .bwd = RT_prt_swiglu_bwd,
                 .emit_fwd = ops_emit_swiglu_fwd,
                 .emit_bwd = ops_emit_swiglu_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_swiglu,
                 .mem = MEM_ACTIVATION},
    [OP_ROPE] = {.rule = place_rule_elementwise,
                 .saves = 0,
                 .reads_params = 0,
                 .shape = shape_rope,
                 .flops = flops_rope,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_rope_fwd,
                 .bwd = RT_prt_rope_bwd,
                 .emit_fwd = ops_emit_rope_fwd,
                 .emit_bwd = ops_emit_rope_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_rope,
                 .mem = MEM_STREAM},
    [OP_ATTENTION] = {.rule = place_rule_attention,
                 .saves = OP_SAVES_IN0 | OP_SAVES_AUX_KEPT,
                 .reads_params = 0,
                 .shape = shape_attention,
                 .flops = flops_attention,
                 .scratch = scratch_attention,
                 .partial = NULL,
                 .fwd = RT_prt_attention_fwd,
                 .bwd = RT_prt_attention_bwd,
                 .emit_fwd = ops_emit_attention_fwd,
                 .emit_bwd = ops_emit_attention_bwd,
                 .cost = OP_COST_ATTENTION,
                 .traffic = traffic_attention,
                 .onchip = onchip_attention,
                 .mem = MEM_SCORES},
    [OP_DROPOUT] = {.rule = place_rule_dropout,
                 .saves = OP_SAVES_AUX,
                 .reads_params = 0,
                 .shape = shape_dropout,
                 .flops = flops_dropout,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_dropout_fwd,
                 .bwd = RT_prt_dropout_bwd,
                 .emit_fwd = ops_emit_dropout_fwd,
                 .emit_bwd = ops_emit_dropout_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_dropout,
                 .mem = MEM_STREAM},
    [OP_ADD] = {.rule = place_rule_elementwise,
                 .saves = 0,
                 .reads_params = 0,
                 .shape = shape_elements,
                 .flops = flops_add,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_add_fwd,
                 .bwd = RT_prt_acc,
                 .emit_fwd = ops_emit_add_fwd,
                 .emit_bwd = ops_emit_add_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_add,
                 .mem = MEM_STREAM},
    [OP_COPY] = {.rule = place_rule_elementwise,
                 .saves = 0,
                 .reads_params = 0,
                 .shape = shape_elements,
                 .flops = flops_none,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_copy,
                 .bwd = RT_prt_acc,
                 .emit_fwd = ops_emit_copy_fwd,
                 .emit_bwd = ops_emit_copy_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_copy,
                 .mem = MEM_STREAM},
    [OP_XENT] = {.rule = place_rule_xent,
                 .saves = OP_SAVES_IN0 | OP_SAVES_IN1 | OP_SAVES_AUX,
                 .reads_params = 0,
                 .shape = shape_xent,
                 .flops = flops_xent,
                 .scratch = scratch_xent,
                 .partial = NULL,
                 .fwd = RT_prt_xent_fwd,
                 .bwd = RT_prt_xent_bwd,
                 .emit_fwd = ops_emit_xent_fwd,
                 .emit_bwd = ops_emit_xent_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_xent,
                 .mem = MEM_SOFTMAX},
    [OP_MOE_ROUTER] = {.rule = place_rule_moe,
                 .saves = OP_SAVES_IN0 | OP_SAVES_AUX,
                 .reads_params = 1,
                 .shape = shape_moe_tokens,
                 .flops = flops_moe_router,
                 .scratch = scratch_moe_router,
                 .partial = NULL,
                 .fwd = RT_prt_moe_router_fwd,
                 .bwd = RT_prt_moe_router_bwd,
                 .emit_fwd = ops_emit_moe_router_fwd,
                 .emit_bwd = ops_emit_moe_router_bwd,
                 .cost = OP_COST_GEMM,
                 .gemm = gemm_moe_router},
    [OP_MOE_PERMUTE] = {.rule = place_rule_moe,
                 .saves = OP_SAVES_AUX,
                 .reads_params = 0,
                 .shape = shape_moe_tokens,
                 .flops = flops_none,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_moe_permute_fwd,
                 .bwd = RT_prt_moe_permute_bwd,
                 .emit_fwd = ops_emit_moe_permute_fwd,
                 .emit_bwd = ops_emit_moe_permute_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_moe_permute,
                 .mem = MEM_STREAM},
    [OP_MOE_MATMUL] = {.rule = place_rule_moe,
                 .saves = OP_SAVES_IN0 | OP_SAVES_IN1,
                 .reads_params = 1,
                 .shape = shape_moe_matmul,
                 .flops = flops_moe_matmul,
                 .scratch = scratch_moe_matmul,
                 .partial = "contracts",
                 .fwd = RT_prt_moe_matmul_fwd,
                 .bwd = RT_prt_moe_matmul_bwd,
                 .emit_fwd = ops_emit_moe_matmul_fwd,
                 .emit_bwd = ops_emit_moe_matmul_bwd,
                 .cost = OP_COST_GEMM,
                 .gemm = gemm_moe_matmul,
                 .bwd_accumulates = "the rows it writes, offsets[E] of them, are no argument of its call"},
    [OP_MOE_COMBINE] = {.rule = place_rule_moe,
                 .saves = OP_SAVES_IN0 | OP_SAVES_IN1,
                 .reads_params = 0,
                 .shape = shape_moe_combine,
                 .flops = flops_moe_combine,
                 .scratch = scratch_none,
                 .partial = NULL,
                 .fwd = RT_prt_moe_combine_fwd,
                 .bwd = RT_prt_moe_combine_bwd,
                 .emit_fwd = ops_emit_moe_combine_fwd,
                 .emit_bwd = ops_emit_moe_combine_bwd,
                 .cost = OP_COST_STREAM,
                 .traffic = traffic_moe_combine,
                 .mem = MEM_STREAM},
};

/* The first problem of a row's cost (see ops.h), else NULL.  A probe shape
 * of 2s stands for any nonempty one. */
static const char *cost_incomplete(const OpDesc *d)
{
    int64_t mnk[3];
    for (int kept = 0; kept <= 1; kept++) {
        const OpShape probe = {{2, 2, 2, 2, 2, 2}, -1, kept, 0, OP_PART_WHOLE, -1, 0, 0};
        for (int bwd = 0; bwd <= (d->bwd != RT_NONE); bwd++)
            switch (d->cost) {
            case OP_COST_GEMM:
                if (!d->gemm || d->traffic) return "an OP_COST_GEMM row names its GEMMs (gemm) and no traffic";
                if (d->gemm(&probe, bwd, mnk) < 1 || mnk[0] < 1 || mnk[1] < 1 || mnk[2] < 1)
                    return "its gemm gives no GEMM for a call";
                break;
            case OP_COST_STREAM:
            case OP_COST_ATTENTION:
                if (!d->traffic || d->gemm) return "a memory-bound cost names its traffic and no GEMMs";
                if (!(d->traffic(&probe, bwd) > 0)) return "its traffic charges a call nothing (say OP_COST_FREE)";
                if (d->mem < MEM_STREAM || d->mem > MEM_SCORES) return "its memory class is no MemKind";
                if (d->onchip && d->cost != OP_COST_ATTENTION) return "only attention's tiles stay on chip";
                break;
            case OP_COST_FREE:
                if (d->traffic || d->gemm) return "an OP_COST_FREE row names no traffic and no GEMMs";
                break;
            default: return "no cost (OP_COST_STREAM, OP_COST_GEMM, OP_COST_ATTENTION or OP_COST_FREE)";
            }
    }
    return NULL;
}

/* The first problem of a row's first-writer rules (first_write.c), else NULL. */
static const char *first_write_incomplete(const OpDesc *d)
{
    if (d->bwd == RT_NONE) return d->bwd_accumulates ? "bwd_accumulates without a backward" : NULL;
    int rule = first_write_has_rule(d->bwd) && (!d->folds_bias || first_write_has_rule(d->bwd_bias));
    if (!rule && !d->bwd_accumulates)
        return "its backward has no first-writer rule (first_write.c) and bwd_accumulates does not say why";
    if (rule && d->bwd_accumulates) return "its backward has a first-writer rule, yet bwd_accumulates says it has none";
    return NULL;
}

static int incomplete(char *why, size_t size, const char *what)
{
    snprintf(why, size, "%s", what);
    return 1;
}

int ops_row_incomplete(int k, char *why, size_t size)
{
    const OpDesc *d = &op_table[k];
    if (!d->rule || !d->shape || !d->flops || !d->scratch || !d->emit_fwd)
        return incomplete(why, size, "a rule, shape, flops, scratch or emit_fwd function is missing");
    if (d->fwd <= RT_NONE || d->fwd >= RT_FN_COUNT) return incomplete(why, size, "no forward runtime entry");
    if ((d->emit_bwd != NULL) != (d->bwd != RT_NONE))
        return incomplete(why, size, "a backward emitter needs a backward entry and the other way round");
    if (d->folds_bias && (d->fwd_bias <= RT_NONE || d->fwd_bias == d->fwd || d->bwd_bias <= RT_NONE ||
                          d->bwd_bias == d->bwd || !d->emit_bwd))
        return incomplete(why, size, "it folds a bias but lacks its entries with the bias");
    const char *problem = cost_incomplete(d);
    if (!problem) problem = first_write_incomplete(d);
    return problem ? incomplete(why, size, problem) : 0;
}

void ops_check(void)
{
    char why[160];
    for (int k = 0; k < OP_COUNT; k++)
        if (ops_row_incomplete(k, why, sizeof why))
            PARC_BUG("op %s has an incomplete row in op_table: %s", op_names[k], why);
}

/* The bias op that can fold into linear op i, else -1 (see ops.h). */
static int bias_after(const Lowerer *lw, int i)
{
    const Graph *g = lw->g;
    const Op *op = &g->ops[i];
    if (!op_table[op->kind].folds_bias || i + 1 >= g->nops) return -1;
    const Op *b = &g->ops[i + 1];
    int t = op->out;
    if (b->kind != OP_BIAS || b->region != op->region || b->nin != 1 || b->in[0] != t) return -1;
    if (t == g->block_in || t == g->block_out || t == g->embed_out || t == g->head_in || lw->bind[t].needed)
        return -1;
    for (int k = 0; k < g->nops; k++)
        for (int j = 0; j < g->ops[k].nin; j++)
            if (k != b->id && g->ops[k].in[j] == t) return -1;
    for (int a = 0; a < lw->naxes; a++) {
        const OpPlace *r = lower_rule(lw, b->id, a);
        Placement p = lw->bind[t].produced[a];
        if (p.kind == PLACE_P || !place_eq(r->in[0], p) || !place_eq(r->out, p) ||
            !place_eq(r->din[0], lw->bind[t].grad[a]) || !place_eq(lw->bind[b->out].produced[a], p))
            return -1;
    }
    return b->id;
}

void ops_fold_bias(Lowerer *lw)
{
    const Graph *g = lw->g;
    lw->bias_fold = arena_alloc(lw->arena, sizeof(int) * (size_t)(g->nops ? g->nops : 1));
    for (int i = 0; i < g->nops; i++) lw->bias_fold[i] = -1;
    for (int i = 0; i < g->nops; i++) {
        int b = bias_after(lw, i);
        if (b < 0) continue;
        lw->bias_fold[i] = b;
        lw->bias_fold[b] = i;
    }
}

int64_t ops_instr_scratch(const Program *prog, const StageProgram *sp, const Instr *ins, int wide)
{
    if (ins->entry == ENTRY_NONE || ins->op < 0) return 0;
    const OpDesc *d = &op_table[prog->graph->ops[ins->op].kind];
    unsigned given = 0, w16 = 0;
    for (int k = 0; k < ins->nargs && k < 32; k++) {
        const Arg *a = &ins->args[k];
        if (a->kind != ARG_BUF) continue;
        given |= 1u << k;
        if (wide && dtype_is_16(sp->bufs[a->buf].dtype)) w16 |= 1u << k;
    }
    return d->scratch(&ins->shape, ins->entry == ENTRY_BACKWARD, given, w16);
}
