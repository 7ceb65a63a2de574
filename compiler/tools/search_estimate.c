/*
 * search_estimate.c — the closed-form step time and memory `parc search`
 * ranks its whole space by before lowering the best few exactly (search.h).
 *
 * Per micro-batch through one block on one GPU: the block's GEMMs at their
 * local shapes (cost_gemm_s: the same shape classes and efficiencies as the
 * exact model), attention matmuls, the bytes its memory-bound ops stream
 * (the passes of cost.c's stream_rows, summed by hand), and the tensor
 * axis's collectives (all-reduce, or all-gather and reduce-scatter under
 * sequence parallelism), less what of the backward's runs under the
 * weight-gradient GEMMs (block_tp_hidden_s).  A stage is layers / pp blocks plus the head; the
 * pipeline is (m + (pp - 1) / v) stage-times (Narayanan et al. 2021, eq. 2
 * and its interleaved form), then the gradient sync by ZeRO stage with one
 * collective per parameter tensor as optim.c emits them (sync_estimate), less
 * what ZeRO-0/1's per-block buckets hide under the last backward, and the
 * optimizer's streamed state.  Memory: weights, gradients, master and
 * moments by ZeRO stage, and saved activations per block after Korthikanti
 * et al. 2022 (Table 2) times the micro-batches the schedule keeps in flight.
 *
 * It ranks; it never reports.  search.c prints only exact lowerings.
 */
#include "search.h"

#include "cost.h"

/* Sizes the estimate needs, local to one GPU. */
typedef struct Shape {
    double tok;       /* tokens per micro-batch: micro_batch x seq */
    double h, hs;     /* hidden; hidden over the tokens a norm sees (hs = h, or h / tp under sp) */
    double qkv, att;  /* qkv projection's output width, attention's width (local) */
    double f;         /* ffn (local) */
    double heads;     /* local query heads */
    double vocab;     /* the head's local width */
    int wb, gb;       /* weight and gradient element bytes */
} Shape;

static double gemm(const Cluster *cl, double peak, double n, double out, double in)
{
    return cost_gemm_s(cl, peak, (int64_t)n, (int64_t)out, (int64_t)in);
}

/* One block, one micro-batch, forward (bwd = 0) or backward (bwd = 1,
 * recompute included), compute only. */
static double block_compute_s(const Plan *p, const Layout1 *l, const Shape *s, int bwd)
{
    const Cluster *cl = &p->cluster;
    const BlockSpec *bs = &p->model.block;
    double peak = cost_peak_flops(cl, p->train.precision);
    int transformer = bs->kind == BLOCK_TRANSFORMER, swiglu = bs->mlp == MLP_SWIGLU;
    double calls = bwd ? 2.0 : 1.0;
    double g = gemm(cl, peak, s->tok, swiglu ? 2 * s->f : s->f, s->h) + gemm(cl, peak, s->tok, s->h, s->f);
    if (transformer) g += gemm(cl, peak, s->tok, s->qkv, s->h) + gemm(cl, peak, s->tok, s->h, s->att);
    double t = calls * g;
    /* streamed elements x passes: norms 2 / 3, residual adds 3 / 3, the
     * activation 2 / 3 (SwiGLU 3 / 5 over both halves), biases 2 / 1,
     * dropout 3 / 3, rotary positions 2 / 2 over the (grouped) qkv */
    double norms = (transformer ? 2 : 1) * (bs->norm != NORM_NONE) * s->tok * s->hs;
    double adds = (transformer || bs->residual ? (transformer ? 2 : 1) : 0) * s->tok * s->hs;
    double act = s->tok * s->f * (swiglu ? 2 : 1);
    double bias = bs->bias ? s->tok * (s->f * (swiglu ? 2 : 1) + s->h + (transformer ? s->qkv + s->h : 0)) : 0;
    double drop = bs->dropout > 0 ? (transformer ? 2 : 1) * s->tok * s->hs : 0;
    double rope = transformer && p->model.positions == POS_ROPE ? s->tok * s->qkv : 0;
    double elems = bwd ? 3 * norms + 3 * adds + bias + 3 * drop + 2 * rope
                       : 2 * norms + 3 * adds + 2 * bias + 3 * drop + 2 * rope;
    double act_elems = (bwd ? (swiglu ? 2.5 : 3) : (swiglu ? 1.5 : 2)) * act;
    if (transformer) {
        double scores = s->tok * s->heads * (double)p->model.seq;
        int ring = l->cp > 1 && l->ring, balanced = search_cp_balanced(p, l);
        int kept = l->rc == RECOMPUTE_NONE && !bs->flash && !ring && !balanced;
        double attn = 4.0 * scores * (s->att / (s->heads > 0 ? s->heads : 1));
        /* ring attention's backward recomputes only the scores (ops.c); the
         * balanced split computes half of the blocks, in either form */
        if (balanced) attn *= 0.5;
        t += cost_attention_s(cl, peak, bwd ? (kept ? 2.0 : ring ? 2.5 : 3.0) * attn : attn);
        /* stored: the scores through memory; else tiles on chip (ops.c) */
        if (kept) elems += (bwd ? 4.0 : 3.0) * scores;
        else t += cost_tiles_s(cl, (bwd ? 7.0 : 3.0) * scores * s->wb, s->wb == 2);
    }
    t += cost_stream_s(cl, elems * s->wb);
    if (bs->mlp != MLP_RELU) t += cost_activation_s(cl, act_elems * s->wb);
    else t += cost_stream_s(cl, act_elems * s->wb);
    return t;
}

/* The tensor axis's collectives of one block, one micro-batch, one direction. */
static double block_comm_s(const Plan *p, const Layout1 *l, const Shape *s)
{
    if (l->tp <= 1) return 0;
    const Cluster *cl = &p->cluster;
    double bytes = s->tok * s->h * s->wb;
    int n = p->model.block.kind == BLOCK_TRANSFORMER ? 2 : 1;
    if (l->sp)
        return n * (cost_coll_s(cl, COLL_ALLGATHER, l->tp, l->tp, bytes) + cost_coll_s(cl, COLL_REDUCESCATTER, l->tp, l->tp, bytes));
    return n * cost_coll_s(cl, COLL_ALLREDUCE, l->tp, l->tp, bytes);
}

/* What of one block's backward collectives over the tensor axis runs under
 * compute (overlap_tp.c, unless `tp_overlap off;`): each column-parallel
 * linear's (qkv, the MLP's up projection) input-gradient all-reduce, or
 * reduce-scatter under sequence parallelism, under its weight-gradient GEMM;
 * of that only the cluster's `overlap` share (cost_hidden_share). */
static double block_tp_hidden_s(const Plan *p, const Layout1 *l, const Shape *s)
{
    if (l->tp <= 1 || p->layout.tp_overlap_off) return 0;
    const Cluster *cl = &p->cluster;
    double peak = cost_peak_flops(cl, p->train.precision);
    double c = cost_coll_s(cl, l->sp ? COLL_REDUCESCATTER : COLL_ALLREDUCE, l->tp, l->tp, s->tok * s->h * s->wb);
    double up = gemm(cl, peak, s->tok, p->model.block.mlp == MLP_SWIGLU ? 2 * s->f : s->f, s->h);
    double hidden = c < up ? c : up;
    if (p->model.block.kind == BLOCK_TRANSFORMER) {
        double qkv = gemm(cl, peak, s->tok, s->qkv, s->h);
        hidden += c < qkv ? c : qkv;
    }
    return hidden * cost_hidden_share(cl);
}

/* The share of layers with the mixture of experts: 1 / `every`, 1 without
 * `every`; the estimate averages a layer over dense and mixture layers. */
static double moe_share(const Model *m)
{
    const MoeSpec *e = &m->block.moe;
    return e->experts && e->every > 1 ? 1.0 / (double)e->every : 1.0;
}

/* The MLP's hidden width as the estimate counts it: for parameters, a
 * mixture of experts' every expert side by side with its shared experts (its
 * router left out); for the work of a token, the topk experts it passes
 * through and the shared experts; averaged with the dense layers' ffn under
 * `every`. */
static double ffn_params(const Model *m)
{
    const MoeSpec *e = &m->block.moe;
    double w = moe_share(m);
    return e->experts ? w * ((double)e->experts * (double)e->expert_ffn + (double)e->shared_ffn) + (1 - w) * (double)m->ffn
                      : (double)m->ffn;
}
static double ffn_active(const Model *m)
{
    const MoeSpec *e = &m->block.moe;
    double w = moe_share(m);
    return e->experts ? w * ((double)e->topk * (double)e->expert_ffn + (double)e->shared_ffn) + (1 - w) * (double)m->ffn
                      : (double)m->ffn;
}

/* Parameters of one block, all of it (not split). */
static double block_params(const Model *m)
{
    double h = (double)m->hidden, f = ffn_params(m);
    double mlp = h * f * (m->block.mlp == MLP_SWIGLU ? 3 : 2);
    if (m->block.kind != BLOCK_TRANSFORMER) return mlp;
    double hd = (double)m->head_dim, a = (double)m->heads, kv = (double)m->kv_heads;
    return mlp + h * (a + 2 * kv) * hd + a * hd * h;
}

/* Parameter tensors by their local element counts, one entry each: the
 * gradient sync issues one collective per tensor (optim.c), so each pays its
 * latency.  bias: a linear's bias, whose backward reads no weight (ZeRO-3
 * gathers it in the forward only). */
typedef struct Params {
    int n;
    double elems[16];
    int bias[16];
} Params;

static void params_add(Params *ps, double elems, int bias)
{
    if (ps->n < 16) ps->elems[ps->n] = elems, ps->bias[ps->n++] = bias;
}

static void params_norm(Params *ps, NormKind kind, int bias, double h)
{
    if (kind == NORM_NONE) return;
    params_add(ps, h, 0);
    if (kind == NORM_LAYER && bias) params_add(ps, h, 0);
}

/* The experts' parameters of one layer, averaged (0 for a dense MLP). */
static double expert_params(const Model *m)
{
    const MoeSpec *e = &m->block.moe;
    return moe_share(m) * (double)e->experts * (double)e->expert_ffn * (double)m->hidden *
           (m->block.mlp == MLP_SWIGLU ? 3 : 2);
}

/* One block's parameters the data axis syncs, as expand.c makes them, split
 * by tp (heads, ffn); with the experts split over dp (ep) theirs are not
 * synced: only the shared experts' MLP is. */
static void block_param_list(const Model *m, double tp, int ep, Params *ps)
{
    const BlockSpec *bs = &m->block;
    double h = (double)m->hidden, up = bs->mlp == MLP_SWIGLU ? 2 : 1;
    double w = moe_share(m);
    double f = (ep ? w * (double)bs->moe.shared_ffn + (1 - w) * (double)m->ffn : ffn_params(m)) / tp;
    ps->n = 0;
    if (bs->kind == BLOCK_TRANSFORMER) {
        double hd = (double)m->head_dim, qkv = (double)(m->heads + 2 * m->kv_heads) * hd / tp;
        params_norm(ps, bs->norm, bs->bias, h);
        params_add(ps, h * qkv, 0);
        if (bs->bias) params_add(ps, qkv, 1);
        params_add(ps, (double)m->heads * hd / tp * h, 0);
        if (bs->bias) params_add(ps, h, 1);
    }
    params_norm(ps, bs->norm, bs->bias, h);
    if (f <= 0) return;
    params_add(ps, h * f * up, 0);
    if (bs->bias) params_add(ps, f * up, 1);
    params_add(ps, f * h, 0);
    if (bs->bias) params_add(ps, h, 1);
}

/* The parameters outside the blocks on the first stage (embed_side) or the
 * last: the table and learned positions; the final norm and an untied head. */
static void ends_param_list(const Model *m, double vocab, int embed_side, Params *ps)
{
    double h = (double)m->hidden;
    ps->n = 0;
    if (embed_side && m->has_embed) {
        params_add(ps, vocab * h, 1); /* the embedding's backward reads no weight */
        if (m->positions == POS_LEARNED) params_add(ps, (double)m->seq * h, 1);
    }
    if (!embed_side) {
        params_norm(ps, m->final_norm, m->block.bias, h);
        if (m->has_head && !m->tied_head) params_add(ps, vocab * h, 0);
    }
}

/* The collectives of every tensor of ps, `bytes` an element; with
 * skip_bias, of those a backward reads only. */
static double coll_each(const Cluster *cl, CollKind kind, int n, int node, const Params *ps, double bytes,
                        int skip_bias)
{
    double t = 0;
    for (int i = 0; i < ps->n; i++)
        if (!skip_bias || !ps->bias[i]) t += cost_coll_s(cl, kind, n, node, ps->elems[i] * bytes);
    return t;
}

/* What a block's ZeRO-2/3 reduce-scatters, started each after its gradient's
 * last writer (overlap_scatters), leave exposed past the block's backward of
 * tb: the gradients complete in reverse order of the block's parameters, the
 * j-th at the share of tb its and the later parameters' elements make (the
 * GEMMs' time follows their weights' size); one link, one after the other. */
static double scatter_exposed_s(const Cluster *cl, int dp, int node, const Params *ps, double bytes, double tb)
{
    double all = 0, done = 0, link = 0;
    for (int i = 0; i < ps->n; i++) all += ps->elems[i];
    for (int i = ps->n - 1; i >= 0; i--) {
        done += ps->elems[i];
        double ready = all > 0 ? tb * done / all : tb;
        link = (link > ready ? link : ready) + cost_coll_s(cl, COLL_REDUCESCATTER, dp, node, ps->elems[i] * bytes);
    }
    return link > tb ? link - tb : 0;
}

/* What a pass over n blocks leaves exposed of gathers of g seconds each
 * started a layer ahead (overlap_gather.c), each block computing t: the
 * first block's whole, then what each gather takes past the block before
 * it (tests/analyze/test_cost.c works the case by hand). */
static double prefetch_exposed_s(double g, double t, int n)
{
    return g + (n - 1) * (g > t ? g - t : 0);
}

/* What a rank spends on collectives of `all` seconds that leave `exposed`
 * past the compute they run under: the exposed part, and of the rest what the
 * cluster's `overlap` does not hide (cost_hidden_share, as analyze.c). */
static double unhidden_s(const Cluster *cl, double all, double exposed)
{
    return all - (all - exposed) * cost_hidden_share(cl);
}

/* The data group's gradient sync of one stage over dp ranks (dp x cp beside
 * a context axis), `node` of them on a node, the parameters
 * of its blocks (nblocks of them, each `blocks`) and its ends, by ZeRO stage
 * as optim.c emits it: ZeRO-0/1 once per step (a bucket per block, started
 * after the block's last backward unless `grad_overlap off;`, overlap.c),
 * ZeRO-2/3 reduce-scatters after every micro-batch (mb: a block's under the
 * rest of its backward, scatter_exposed_s, unless `grad_overlap off;`), ZeRO-1/2 an
 * all-gather of the stepped weights, ZeRO-3 a gather of each block weight
 * for the forward and again for the backward that reads it, each started a
 * layer ahead unless `grad_overlap off;` (overlap_gather.c:
 * prefetch_exposed_s), and of each end weight for the forward only (its
 * backward reads the forward's copy: lower.c, reshard_window_save).
 * tf, tb: one block's forward and backward; t0: what precedes the first
 * block's.  The tail the buckets leave exposed past the backward is
 * cost_overlap's rule.  Of what runs under compute only the cluster's
 * `overlap` share is hidden (cost_hidden_share), as analyze.c counts it. */
static double sync_estimate(const Plan *p, const Layout1 *l, const Params *blocks, int nblocks, const Params *ends,
                            int dp, int node, double mb, double tf, double tb, double t0, int gb, int wb)
{
    const Cluster *cl = &p->cluster;
    if (dp <= 1) return 0;
    double t = 0;
    if (l->zero <= 1) {
        CollKind kind = l->zero == 0 ? COLL_ALLREDUCE : COLL_REDUCESCATTER;
        double bucket = coll_each(cl, kind, dp, node, blocks, gb, 0), all = nblocks * bucket, exposed = all;
        if (!p->layout.grad_overlap_off && nblocks >= 1) {
            double link = 0;
            for (int k = 1; k <= nblocks; k++) link = (link > t0 + k * tb ? link : t0 + k * tb) + bucket;
            double past = link > t0 + nblocks * tb ? link - (t0 + nblocks * tb) : 0;
            if (past < all) exposed = past;
        }
        t += unhidden_s(cl, all, exposed) + coll_each(cl, kind, dp, node, ends, gb, 0);
    } else {
        double all = coll_each(cl, COLL_REDUCESCATTER, dp, node, blocks, gb, 0);
        double block =
            p->layout.grad_overlap_off ? all : unhidden_s(cl, all, scatter_exposed_s(cl, dp, node, blocks, gb, tb));
        t += mb * (nblocks * block + coll_each(cl, COLL_REDUCESCATTER, dp, node, ends, gb, 0));
    }
    if (l->zero == 1 || l->zero == 2)
        t += nblocks * coll_each(cl, COLL_ALLGATHER, dp, node, blocks, wb, 0) +
             coll_each(cl, COLL_ALLGATHER, dp, node, ends, wb, 0);
    if (l->zero == 3) {
        double gf = coll_each(cl, COLL_ALLGATHER, dp, node, blocks, wb, 0);
        double gbw = coll_each(cl, COLL_ALLGATHER, dp, node, blocks, wb, 1);
        double all = nblocks * (gf + gbw);
        double blocks_s = p->layout.grad_overlap_off || nblocks < 2
                              ? all
                              : unhidden_s(cl, all, prefetch_exposed_s(gf, tf, nblocks) +
                                                                        prefetch_exposed_s(gbw, tb, nblocks));
        t += mb * (blocks_s + coll_each(cl, COLL_ALLGATHER, dp, node, ends, wb, 0));
    }
    return t;
}

int search_cp_can_balance(const Plan *base, int cp)
{
    return cp > 1 && base->model.block.kind == BLOCK_TRANSFORMER && base->model.block.causal &&
           base->model.seq % (2 * cp) == 0 && base->model.block.dropout == 0;
}

int search_cp_balanced(const Plan *base, const Layout1 *l)
{
    return l->bal && search_cp_can_balance(base, l->cp);
}

/* What of a transfer of x seconds a computation of c seconds leaves exposed
 * (the cluster's `overlap` share of the overlap hidden). */
static double exposed_s(const Cluster *cl, double x, double c)
{
    return x - (x < c ? x : c) * cost_hidden_share(cl);
}

/* How many of a group of `size` ranks `stride` apart share a node (the
 * search's layouts place an axis's ranks so that they divide a node or
 * span whole ones): `size` when the group stays inside one (cost.h). */
static int node_ranks(const Plan *p, int size, int stride)
{
    int gpn = p->cluster.gpus_per_node;
    if (size <= 1 || (gpn > 0 && (int64_t)size * stride <= gpn && gpn % (size * stride) == 0)) return size;
    return gpn > stride && gpn % stride == 0 ? gpn / stride : 1;
}

SearchEstimate search_estimate(const Plan *base, const Layout1 *l)
{
    const Model *m = &base->model;
    const Cluster *cl = &base->cluster;
    const Train *tr = &base->train;
    double tp = l->tp;
    int cp = l->cp > 1 ? l->cp : 1;
    Shape s = {.tok = (double)l->micro_batch * (double)m->seq / cp,
               .h = (double)m->hidden,
               .f = ffn_active(m) / tp,
               .heads = (double)m->heads / tp,
               .wb = plan_precision_bytes(tr->precision)};
    s.hs = l->sp ? s.h / tp : s.h;
    s.att = (double)(m->heads * m->head_dim) / tp;
    s.qkv = (double)((m->heads + 2 * m->kv_heads) * m->head_dim) / tp;
    s.vocab = (double)m->vocab / (m->vocab % l->tp == 0 ? tp : 1.0);
    s.gb = tr->grads_fp32 ? 4 : s.wb;
    double peak = cost_peak_flops(cl, tr->precision);

    /* one stage, one micro-batch: its blocks and the head */
    double per_stage = (double)m->layers / l->pp;
    double fwd = block_compute_s(base, l, &s, 0), bwd = block_compute_s(base, l, &s, 1);
    double comm = block_comm_s(base, l, &s), hidden = block_tp_hidden_s(base, l, &s);
    /* the gradients are summed over the data group, dp x cp (plan_derive_axes) */
    int group = l->dp * cp, group_node = node_ranks(base, group, l->tp);
    /* context parallelism (the all-gather form): each block gathers the
     * qkv of the whole sequence over cp, again in the backward (the
     * forward's copy is not kept, reshard.c), and reduce-scatters its
     * gradient */
    if (cp > 1 && !l->ring) {
        double qkv = s.tok * cp * s.qkv * s.wb;
        int cp_node = node_ranks(base, cp, l->tp);
        double gather = cost_coll_s(cl, COLL_ALLGATHER, cp, cp_node, qkv);
        fwd += gather;
        bwd += gather + cost_coll_s(cl, COLL_REDUCESCATTER, cp, cp_node, qkv);
    }
    /* ring attention: each of the cp - 1 steps' K/V shift runs under the step
     * before it; backward the K/V's and their gradient's share the link under
     * each step, and the gradient's last shift, home, is exposed (ops_emit.c) */
    if (cp > 1 && l->ring && m->block.kind == BLOCK_TRANSFORMER) {
        int cp_node = node_ranks(base, cp, l->tp);
        double kv = s.tok * 2.0 * (double)m->kv_heads / tp * (double)m->head_dim * s.wb;
        double shift = cost_coll_s(cl, COLL_SHIFT, cp, cp_node, kv);
        double attn = 4.0 * s.tok * s.heads * (double)m->seq * (double)m->head_dim *
                      (search_cp_balanced(base, l) ? 0.5 : 1.0);
        double step_f = cost_attention_s(cl, peak, attn) / cp, step_b = cost_attention_s(cl, peak, 2.5 * attn) / cp;
        fwd += (cp - 1) * exposed_s(cl, shift, step_f);
        bwd += (cp - 1) * exposed_s(cl, 2 * shift, step_b) + shift;
    }
    /* expert parallelism: each block's routed rows exchanged over dp, 2 times
     * forward, 2 backward (and the forward's 2 again recomputing), balanced
     * (reshard.c) */
    if (l->ep) { /* the exchange over the ep ranks: the data axis's, or its inner ep of them */
        double rows = s.tok * (double)m->block.moe.topk * s.h * s.wb;
        double x = cost_coll_s(cl, COLL_ALLTOALLV, l->ep, node_ranks(base, l->ep, cp * l->tp), rows);
        fwd += 2 * x * moe_share(m);
        bwd += 2 * x * moe_share(m);
    }
    double block = fwd + bwd + comm * (l->rc == RECOMPUTE_FULL ? 3 : 2) + (l->rc == RECOMPUTE_FULL ? fwd : 0) - hidden;
    double head = 0;
    if (m->has_head) {
        head = 3 * gemm(cl, peak, s.tok, s.vocab, s.h) + cost_stream_s(cl, 5 * s.tok * s.vocab * s.wb);
        /* a vocab-parallel loss reduces its per-token max and sum over tp */
        if (s.vocab < (double)m->vocab) head += 2 * cost_coll_s(cl, COLL_ALLREDUCE, l->tp, l->tp, s.tok * 4);
    }
    double stage = per_stage * block + head;
    int pp_link = node_ranks(base, l->pp, l->dp * cp * l->tp) >= l->pp ? 2 : 1; /* a hand-off's link */
    double p2p = l->pp > 1 ? cost_coll_s(cl, COLL_SEND, 2, pp_link, s.tok * s.hs * s.wb) : 0;
    /* `pipeline_scatter on` where the layout keeps it (search.c's apply_layout):
     * 1/tp of the message over the pipeline link, then the all-gather over tp */
    if (l->pp > 1 && base->layout.pipeline_scatter && l->tp > 1 && !l->sp &&
        (int64_t)(s.tok * s.hs) % l->tp == 0)
        p2p = cost_coll_s(cl, COLL_SEND, 2, pp_link, s.tok * s.hs * s.wb / tp) +
              cost_coll_s(cl, COLL_ALLGATHER, l->tp, node_ranks(base, l->tp, 1), s.tok * s.hs * s.wb);
    int v = l->pp > 1 && l->sched == SCHED_INTERLEAVED ? l->virt : 1;
    double mb = (double)(tr->batch / l->dp / l->micro_batch);
    /* hand-offs wait on the critical path only while the pipeline fills and drains */
    double pipe = (mb + (double)(l->pp - 1) / v) * stage + 2.0 * (l->pp - 1) * p2p;

    /* parameters of the busiest stage on one GPU, and what ZeRO shards */
    double embed = m->has_embed ? (double)m->vocab * s.h / (s.vocab < (double)m->vocab ? tp : 1) : 0;
    double head_w = m->has_head && !m->tied_head ? (double)m->vocab * s.h / (s.vocab < (double)m->vocab ? tp : 1) : 0;
    double ends = l->pp > 1 ? (embed > head_w ? embed : head_w) : embed + head_w;
    /* the experts split over ep; ZeRO shards each over the dp / ep ranks holding it */
    double experts = l->ep ? per_stage * expert_params(m) : 0, edp = l->ep ? (double)l->dp / l->ep : 1;
    double params = per_stage * block_params(m) / tp + ends - experts;
    double dp = l->dp;
    /* the stage of the longest sync: the first's ends or the last's (one
     * stage holds both without a pipeline) */
    Params bp, first, last;
    block_param_list(m, tp, l->ep, &bp);
    ends_param_list(m, s.vocab, 1, &first);
    ends_param_list(m, s.vocab, 0, &last);
    if (l->pp == 1) {
        for (int i = 0; i < last.n; i++) params_add(&first, last.elems[i], last.bias[i]);
        last.n = 0;
    }
    int nb = (int)per_stage;
    double tb = bwd + comm + (l->rc == RECOMPUTE_FULL ? fwd + comm : 0) - hidden;
    double tf = fwd + comm;
    double sync = sync_estimate(base, l, &bp, nb, &first, group, group_node, mb, tf, tb, l->pp == 1 ? 2.0 / 3.0 * head : 0,
                                s.gb, s.wb);
    if (l->pp > 1) {
        double tail = sync_estimate(base, l, &bp, nb, &last, group, group_node, mb, tf, tb, 2.0 / 3.0 * head, s.gb, s.wb);
        if (tail > sync) sync = tail;
    }
    /* experts over ep < dp: each expert's gradient summed over the dp / ep
     * ranks holding it (its expert-data-parallel group, the outer axis) */
    if (l->ep > 1 && l->ep < l->dp)
        sync += cost_coll_s(cl, COLL_ALLREDUCE, l->dp / l->ep, node_ranks(base, l->dp / l->ep, l->ep * cp * l->tp),
                            experts / l->ep * s.gb);
    int master = tr->master_fp32 && tr->precision != PREC_FP32;
    double moments = tr->optimizer == OPT_SGD ? (tr->momentum > 0 ? 4 : 0) : 8;
    double state = params * ((l->zero >= 1 ? 1 / dp : 1) * (4.0 * master + moments) + (l->zero >= 2 ? 1 / dp : 1) * s.gb +
                             (l->zero >= 3 ? 1 / dp : 1) * s.wb) +
                   experts / (l->ep ? l->ep : 1) *
                       ((l->zero >= 1 ? 1 / edp : 1) * (4.0 * master + moments) + (l->zero >= 2 ? 1 / edp : 1) * s.gb +
                        (l->zero >= 3 ? 1 / edp : 1) * s.wb);
    double optim = cost_stream_s(cl, 2 * state);

    /* saved activations per block per micro-batch, in 16-bit elements'
     * bytes (Korthikanti et al. 2022: s b h (10 + 24 / t + 5 a s / (h t)),
     * sequence parallel s b h / t (34 + 5 a s / h); selective keeps the
     * 34 s b h / t part, full only the block's input) */
    double sbh = s.tok * s.h * s.wb / 2.0, as_h = m->hidden ? (double)m->heads * (double)m->seq / (double)m->hidden : 0;
    if (m->block.flash) as_h = 0;
    double act;
    if (l->rc == RECOMPUTE_FULL) act = 2 * sbh / (l->sp ? tp : 1);
    else if (l->sp) act = sbh / tp * (34 + (l->rc == RECOMPUTE_NONE ? 5 * as_h : 0));
    else act = sbh * (10 + 24 / tp + (l->rc == RECOMPUTE_NONE ? 5 * as_h / tp : 0));
    double inflight = l->pp == 1 ? 1 : l->sched == SCHED_GPIPE ? mb : (mb < l->pp ? mb : l->pp);
    if (l->pp > 1 && v > 1) inflight *= 1 + (double)(l->pp - 1) / (l->pp * v);
    double memory = state + inflight * per_stage * act + (l->rc == RECOMPUTE_FULL ? act * 17 : 0);
    return (SearchEstimate){.step_s = pipe + sync + optim, .memory = memory};
}
