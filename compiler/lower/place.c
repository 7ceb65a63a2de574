/*
 * place.c — lowering pass: placement.
 *
 * Takes a Graph whose tensors carry home placements (expand.c).  Runs every
 * op's placement rule (op_table[kind].rule, the place_rule_* functions below)
 * on every mesh axis: the placement the op needs of each input and parameter,
 * the one it produces, and those of the gradients its backward produces (a
 * contraction over a split dim produces Partial values and gradients).
 *
 * Guarantees on success: lw->rule holds every (op, axis) rule; every tensor's
 * Binding has its produced and gradient placements and `needed` (the backward
 * reads it, per op_table[kind].saves and the recompute policy); a block's
 * output is produced in its input's placement.  A placement no rule accepts is
 * a user error, reported once per (op kind, dim, axis).
 */
#include "lower.h"

/* Placement of a gradient given the placement of its value: Partial values
 * get replicated (complete) gradients. */
static Placement grad_of(Placement p) { return p.kind == PLACE_P ? PLACE_REP : p; }

void place_rule_error(Lowerer *lw, const Op *op, const char *fmt, const char *hint, int a, int dim)
{
    /* one report per (op kind, dim, axis): every layer repeats the same op */
    if (lw->rule_seen[op->kind][dim][a]++) {
        lw->errors++;
        return;
    }
    char msg[512];
    snprintf(msg, sizeof msg, fmt, op->name, dim_names[dim], lw->plan->mesh.axes[a].name);
    SrcLoc loc = lw->plan->layout.dim_axis_loc[dim].file ? lw->plan->layout.dim_axis_loc[dim] : op->loc;
    if (dim == DIM_SEQ && lw->plan->layout.sp_axis == a && lw->plan->layout.sp_loc.file)
        loc = lw->plan->layout.sp_loc;
    diag_error(loc, hint, "%s", msg);
    lw->errors++;
}

/* ------------------------------------------------------------ the rules */

static Placement out_home(const Lowerer *lw, const Op *op, int a)
{
    return op->out >= 0 ? lw->g->tensors[op->out].home[a] : PLACE_REP;
}

void place_rule_data(Lowerer *lw, const Op *op, int a, OpPlace *r)
{
    Placement home = out_home(lw, op, a);
    r->out = home;
    if (home.kind == PLACE_S && home.dim == DIM_SEQ)
        place_rule_error(lw, op, "%s: the data loader cannot split %s on `%s`", NULL, a, DIM_SEQ);
}

void place_rule_embed(Lowerer *lw, const Op *op, int a, OpPlace *r)
{
    Placement w = r->param[0];
    Placement tok = lw->g->tensors[op->in[0]].home[a];
    if (w.kind == PLACE_S) {
        if (tok.kind == PLACE_S)
            place_rule_error(lw, op, "%s: the table and the tokens are both split on `%s` (%s)",
                             "map batch and vocab to different axes", a, tok.dim);
        r->in[0] = PLACE_REP;
        r->din[0] = PLACE_REP;
        r->out = w.dim == DIM_VOCAB ? PLACE_PART : w;
    } else {
        /* a sequence split of the output (context parallelism): the rank looks
         * up its own chunk's tokens (a local slice of the whole rows) */
        Placement home = out_home(lw, op, a);
        Placement rows = tok.kind == PLACE_R && home.kind == PLACE_S && home.dim == DIM_SEQ &&
                                 a != lw->plan->layout.sp_axis
                             ? home
                             : tok;
        r->in[0] = rows;
        r->din[0] = rows;
        r->out = rows;
        tok = rows;
    }
    /* the table's gradient: rows this rank looked up (vocab split) or partial
     * sums over this rank's samples */
    r->dparam[0] = w.kind == PLACE_S ? w : (tok.kind == PLACE_S ? PLACE_PART : PLACE_REP);
}

/* Elementwise ops (positions, bias, activations, add, copy): everything in the
 * output's home; a parameter's gradient sums over rows split elsewhere. */
void place_rule_elementwise(Lowerer *lw, const Op *op, int a, OpPlace *r)
{
    Placement home = out_home(lw, op, a);
    for (int i = 0; i < op->nin; i++) r->in[i] = r->din[i] = home;
    r->out = home;
    for (int i = 0; i < op->nparam; i++) {
        const Tensor *p = &lw->g->tensors[op->param[i]];
        if (r->param[i].kind == PLACE_S) r->dparam[i] = r->param[i];
        else if (place_is_row_split(home) || (home.kind == PLACE_S && !tensor_has_dim(p, (Dim)home.dim)))
            r->dparam[i] = PLACE_PART;
        else r->dparam[i] = PLACE_REP;
    }
}

/* The mixture-of-experts ops (router, dispatch, grouped GEMM, combine): every
 * input and the output in its tensor's home, which splits the tokens' rows
 * (batch, and the routed rows with them) on the data axis and the experts'
 * hidden units on a tensor axis (`ffn -> tp`), nothing else (check refuses an
 * axis of size > 1 that would split anything else); a weight is whole, or
 * split as its home says, its gradient Partial where the rows are split (the
 * sum over this rank's tokens).  An expert GEMM whose weights are split by
 * expert (expert parallelism) takes and gives the rows its experts receive,
 * Split(experts): every row routed to them from the axis's ranks, so its
 * weight gradient is whole for its experts, Split(experts) too.  One whose
 * weights are split on ffn (tensor parallelism inside every expert) is a
 * column-parallel up GEMM or a row-parallel down GEMM. */
void place_rule_moe(Lowerer *lw, const Op *op, int a, OpPlace *r)
{
    const Graph *g = lw->g;
    /* sequence parallelism: the tokens' rows split on seq over the tensor
     * axis are gathered whole before routing (every rank of the axis routes
     * all of them, as without it), and the combine's output is whole, sliced
     * back to its home by its consumer */
    int sp = a == lw->plan->layout.sp_axis;
    for (int i = 0; i < op->nin; i++) {
        Placement home = g->tensors[op->in[i]].home[a];
        r->in[i] = r->din[i] = sp && home.kind == PLACE_S && home.dim == DIM_SEQ ? PLACE_REP : home;
    }
    r->out = out_home(lw, op, a);
    if (sp && r->out.kind == PLACE_S && r->out.dim == DIM_SEQ) r->out = PLACE_REP;
    Placement rows = op->nin > 0 ? r->in[0] : r->out;
    int by_expert = 0, by_ffn = 0;
    for (int i = 0; i < op->nparam; i++) {
        Placement w = r->param[i];
        if (w.kind == PLACE_S && w.dim == DIM_EXPERTS) by_expert = 1;
        else if (w.kind == PLACE_S && w.dim == DIM_FFN) by_ffn = 1;
        else if (w.kind == PLACE_S && w.dim != DIM_FLAT)
            place_rule_error(lw, op, "%s: a mixture of experts cannot split its weights (%s) on `%s` yet",
                             "split the experts by expert (`experts -> dp`) or their hidden units (`ffn -> tp`)", a,
                             w.dim);
    }
    if (by_expert) {
        r->in[0] = r->din[0] = r->out = place_split(DIM_EXPERTS);
        rows = r->out;
    } else if (by_ffn) {
        /* tensor parallelism inside the experts (Megatron's column / row
         * pair): the up GEMM's output is split on ffn, its input gradient
         * Partial; the down GEMM contracts the split ffn, its output Partial */
        if (r->out.kind == PLACE_S && r->out.dim == DIM_FFN) r->din[0] = PLACE_PART;
        else r->out = PLACE_PART;
    }
    for (int i = 0; i < op->nparam; i++)
        r->dparam[i] = !by_expert && place_is_row_split(rows) ? PLACE_PART : r->param[i];
}

/* Dropout of a [batch, seq, hidden] branch output: elementwise, with hidden
 * whole (its mask indexes whole rows of the global tensor). */
void place_rule_dropout(Lowerer *lw, const Op *op, int a, OpPlace *r)
{
    place_rule_elementwise(lw, op, a, r);
    if (r->out.kind == PLACE_S && r->out.dim == DIM_HIDDEN)
        place_rule_error(lw, op, "%s: dropout needs %s whole, but it is split on `%s`",
                         "keep hidden whole: split heads and ffn instead (Megatron tensor parallelism)", a,
                         DIM_HIDDEN);
}

void place_rule_norm(Lowerer *lw, const Op *op, int a, OpPlace *r)
{
    Placement home = out_home(lw, op, a);
    if (home.kind == PLACE_S && home.dim == DIM_HIDDEN)
        place_rule_error(lw, op, "%s normalises over %s, which is split on `%s`",
                         "keep hidden whole: split heads and ffn instead (Megatron tensor parallelism)", a,
                         DIM_HIDDEN);
    r->in[0] = r->din[0] = home;
    r->out = home;
    for (int i = 0; i < op->nparam; i++) r->dparam[i] = place_is_row_split(home) ? PLACE_PART : PLACE_REP;
}

void place_rule_linear(Lowerer *lw, const Op *op, int a, OpPlace *r)
{
    Placement home = out_home(lw, op, a);
    const Tensor *x = &lw->g->tensors[op->in[0]];
    Placement wp = r->param[0];
    if (wp.kind == PLACE_S && tensor_has_dim(x, (Dim)wp.dim)) {
        /* the weight is split on a contracted dim: row parallel */
        r->in[0] = wp;
        r->din[0] = wp;
        r->out = PLACE_PART;
        r->dparam[0] = wp;
    } else if (wp.kind == PLACE_S) {
        /* split on an output dim: column parallel, needs the whole input */
        if (place_is_row_split(home) || (home.kind == PLACE_S && home.dim != wp.dim))
            place_rule_error(lw, op, "%s: its output would be split twice on `%s` (%s and the weight's dim)", NULL,
                             a, home.dim);
        r->in[0] = PLACE_REP;
        r->din[0] = PLACE_PART;
        r->out = wp;
        r->dparam[0] = wp;
    } else {
        Placement want = place_is_row_split(home) ? home : PLACE_REP;
        r->in[0] = want;
        r->din[0] = want;
        r->out = want;
        r->dparam[0] = place_is_row_split(want) ? PLACE_PART : PLACE_REP;
    }
}

/* Attention.  Heads or batch split: everything in the output's placement.
 * Sequence split (context parallelism, the all-gather form of Llama 3):
 * each rank computes its own query rows, which need the keys and values of
 * every position, so the op takes the whole qkv (an all-gather over the axis;
 * q, k and v share one tensor, so the gather carries q too: 3/2 the bytes of
 * K and V alone for plain attention) and its qkv gradient is Partial (the dK
 * and dV of every position from this rank's queries, dQ of its own rows), which
 * the table reduce-scatters back to the sequence split.  The output keeps the
 * split. */
void place_rule_attention(Lowerer *lw, const Op *op, int a, OpPlace *r)
{
    Placement home = out_home(lw, op, a);
    if (home.kind == PLACE_S && home.dim == DIM_HEAD_DIM)
        place_rule_error(lw, op, "%s cannot split %s on `%s`", "split heads instead", a, DIM_HEAD_DIM);
    r->out = home;
    if (home.kind == PLACE_S && home.dim == DIM_SEQ) {
        if (lw->plan->model.block.dropout > 0)
            place_rule_error(lw, op, "%s: dropout on the attention probabilities with %s split on `%s` "
                                     "(context parallelism) is not supported",
                             "drop `dropout` from the block, or map heads or batch to this axis instead of seq", a,
                             DIM_SEQ);
        if (place_ring_axis(lw, op) == a) {
            r->in[0] = r->din[0] = home; /* ring attention: each rank's chunk; K/V pass around the axis */
            return;
        }
        r->in[0] = PLACE_REP;
        r->din[0] = PLACE_PART;
        return;
    }
    r->in[0] = r->din[0] = home;
}

int place_balanced_gather(const Lowerer *lw, const Op *op)
{
    const Layout *l = &lw->plan->layout;
    int cp = l->dim_axis[DIM_SEQ];
    return op->kind == OP_ATTENTION && l->cp_balanced && l->cp_comm != CP_COMM_RING && cp >= 0 &&
           out_home(lw, op, cp).kind == PLACE_S && out_home(lw, op, cp).dim == DIM_SEQ;
}

int place_ring_axis(const Lowerer *lw, const Op *op)
{
    if (op->kind != OP_ATTENTION || lw->plan->layout.cp_comm != CP_COMM_RING) return -1;
    for (int a = 0; a < lw->naxes; a++) {
        Placement h = out_home(lw, op, a);
        if (h.kind == PLACE_S && h.dim == DIM_SEQ) return a;
    }
    return -1;
}

void place_rule_xent(Lowerer *lw, const Op *op, int a, OpPlace *r)
{
    Placement lp = lw->g->tensors[op->in[0]].home[a];
    r->in[0] = r->din[0] = lp;
    /* the targets follow the logits' rows (a local slice when they differ) */
    r->in[1] = r->din[1] = (lp.kind == PLACE_S && lp.dim == DIM_VOCAB) ? PLACE_REP : lp;
    r->out = place_is_row_split(lp) ? PLACE_PART : PLACE_REP;
}

/* ------------------------------------------------------------ the pass */

static void run_rules(Lowerer *lw)
{
    const Graph *g = lw->g;
    for (int i = 0; i < g->nops; i++) {
        const Op *op = &g->ops[i];
        for (int a = 0; a < lw->naxes; a++) {
            OpPlace *r = lower_rule(lw, op->id, a);
            for (int k = 0; k < op->nparam; k++) {
                r->param[k] = place_param_use(&g->tensors[op->param[k]], a);
                r->dparam[k] = r->param[k];
            }
            op_table[op->kind].rule(lw, op, a, r);
        }
    }
}

/* Does op's input i reach it by an exchange of routed rows (all-to-all(v))? */
static int exchanged(const Lowerer *lw, const Op *op, int i)
{
    for (int a = 0; a < lw->naxes; a++)
        if (lw->plan->mesh.axes[a].size > 1 &&
            reshard_collective(lw->bind[op->in[i]].produced[a], lower_rule(lw, op->id, a)->in[i]) == COLL_ALLTOALLV)
            return 1;
    return 0;
}

/* Which tensors the backward reads, per each op's row and the recompute
 * policy; an input that arrives by an exchange of routed rows is kept as
 * exchanged instead (Lowerer.kept_in: Megatron-LM keeps the dispatched
 * tokens too), so the backward exchanges only gradients. */
static void mark_needed(Lowerer *lw)
{
    const Graph *g = lw->g;
    int keep_stats = lw->plan->layout.recompute == RECOMPUTE_NONE;
    lw->kept_in = arena_alloc(lw->arena, (size_t)(g->nops ? g->nops : 1));
    memset(lw->kept_in, 0, (size_t)(g->nops ? g->nops : 1));
    for (int i = 0; i < g->nops; i++) {
        const Op *op = &g->ops[i];
        unsigned saves = op_table[op->kind].saves;
        for (int k = 0; k < 2 && k < op->nin; k++) {
            if (!(saves & (k ? OP_SAVES_IN1 : OP_SAVES_IN0))) continue;
            if (exchanged(lw, op, k)) lw->kept_in[i] |= (unsigned char)(1u << k);
            else lw->bind[op->in[k]].needed = 1;
        }
        /* ring attention's backward reads the output and its rows' logsumexp,
         * never probabilities */
        if (place_ring_axis(lw, op) >= 0) {
            PARC_ASSERT(op->naux == 2);
            lw->bind[op->out].needed = lw->bind[op->aux[1]].needed = 1;
            continue;
        }
        /* memory-efficient attention keeps no probabilities whatever the policy,
         * nor does the all-gather form of the load-balanced split (its two
         * halves of query rows are two calls, ops_emit.c) */
        int keep = keep_stats && !(op->kind == OP_ATTENTION && (lw->plan->model.block.flash || place_balanced_gather(lw, op)));
        if ((saves & OP_SAVES_AUX) || ((saves & OP_SAVES_AUX_KEPT) && keep))
            for (int k = 0; k < op->naux; k++) lw->bind[op->aux[k]].needed = 1;
    }
}

/* The placement a parameter's gradient accumulates in: Partial when any use
 * produces a Partial gradient, else the last use's. */
static Placement param_grad(const Lowerer *lw, int t, int a)
{
    const Graph *g = lw->g;
    Placement acc = PLACE_REP;
    for (int i = 0; i < g->nops; i++)
        for (int k = 0; k < g->ops[i].nparam; k++)
            if (g->ops[i].param[k] == t) {
                Placement d = lower_rule(lw, i, a)->dparam[k];
                if (d.kind == PLACE_P || acc.kind == PLACE_R) acc = d;
            }
    return acc;
}

void place_plan(Lowerer *lw)
{
    Graph *g = lw->g;
    run_rules(lw);
    for (int t = 0; t < g->ntensors; t++)
        for (int a = 0; a < lw->naxes; a++) lw->bind[t].produced[a] = g->tensors[t].home[a];
    for (int i = 0; i < g->nops; i++) {
        const Op *op = &g->ops[i];
        for (int a = 0; a < lw->naxes; a++) {
            const OpPlace *r = lower_rule(lw, i, a);
            if (op->out >= 0) lw->bind[op->out].produced[a] = r->out;
            for (int k = 0; k < op->naux; k++)
                lw->bind[op->aux[k]].produced[a] = r->out.kind == PLACE_P ? g->tensors[op->in[0]].home[a] : r->out;
        }
    }
    /* statistics and an op's index tensors (a router's choices, a dispatch's
     * offsets) follow the op's rows: never split on a feature dim or on a dim
     * they lack */
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *tt = &g->tensors[t];
        if (tt->kind != TENSOR_STAT && !(tt->kind == TENSOR_INDEX && tt->producer >= 0 &&
                                         g->ops[tt->producer].out != t))
            continue;
        for (int a = 0; a < lw->naxes; a++) {
            Placement p = lw->bind[t].produced[a];
            /* a dispatch's rows [batch, seq, topk] index this rank's tokens:
             * split where they are at home (batch, or seq on a context axis) */
            if (p.kind == PLACE_S && p.dim == DIM_ROUTED && tensor_has_dim(tt, DIM_BATCH))
                lw->bind[t].produced[a] = tt->home[a].kind == PLACE_S ? tt->home[a] : place_split(DIM_BATCH);
            else if (p.kind == PLACE_P || (p.kind == PLACE_S && !tensor_has_dim(tt, (Dim)p.dim)))
                lw->bind[t].produced[a] = PLACE_REP;
        }
    }
    for (int t = 0; t < g->ntensors; t++)
        for (int a = 0; a < lw->naxes; a++)
            lw->bind[t].grad[a] = g->tensors[t].kind == TENSOR_PARAM ? param_grad(lw, t, a)
                                                                      : grad_of(lw->bind[t].produced[a]);
    mark_needed(lw);
    ops_fold_bias(lw);
}

/* ------------------------------------------------------------ dump, verifier */

static void place_print(FILE *out, Placement p)
{
    if (p.kind == PLACE_R) fputs("R", out);
    else if (p.kind == PLACE_P) fputs("P", out);
    else fprintf(out, "S(%s)", dim_names[p.dim]);
}

static void place_print_list(FILE *out, const Placement *p, int n)
{
    for (int k = 0; k < n; k++) {
        fputs(k ? " " : "", out);
        place_print(out, p[k]);
    }
    if (n == 0) fputs("-", out);
}

void place_dump(const PlaceTable *pt, FILE *out)
{
    const Graph *g = pt->g;
    const Plan *plan = pt->plan;
    fprintf(out, "placements of %s: per op and mesh axis, forward  inputs | parameters -> output,"
                 "  backward  input gradients | parameter gradients\n",
            plan->model.name ? plan->model.name : "model");
    for (int r = 0; r < REGION_COUNT; r++) {
        if (!g->region_count[r]) continue;
        fprintf(out, "region %s:\n", region_names[r]);
        for (int i = 0; i < g->region_count[r]; i++) {
            int id = g->region_first[r] + i;
            const Op *op = &g->ops[id];
            for (int a = 0; a < pt->naxes; a++) {
                const OpPlace *p = &pt->rule[(size_t)id * (size_t)pt->naxes + (size_t)a];
                fprintf(out, "  %-15s %-13s %-4s  ", a ? "" : op->name, a ? "" : op_names[op->kind],
                        plan->mesh.axes[a].name);
                place_print_list(out, p->in, op->nin);
                fputs(" | ", out);
                place_print_list(out, p->param, op->nparam);
                fputs(" -> ", out);
                if (op->out >= 0) place_print(out, p->out);
                else fputs("-", out);
                fputs("   bwd ", out);
                place_print_list(out, p->din, op->nin);
                fputs(" | ", out);
                place_print_list(out, p->dparam, op->nparam);
                fputs("\n", out);
            }
        }
    }
}

/* A placement tensor t may have: Replicated, Partial where allowed, or a
 * split of one of its own dims (or the flat ZeRO dim of a parameter, or
 * routed rows split by the expert they go to). */
static void verify_one(const Graph *g, const Op *op, int a, const char *what, int t, Placement p, int partial_ok)
{
    const Tensor *tt = &g->tensors[t];
    if (p.kind == PLACE_P && !partial_ok)
        PARC_BUG("placement: op %s needs %s `%s` Partial on axis %d", op->name, what, tt->name, a);
    if (p.kind == PLACE_S && !tensor_has_dim(tt, (Dim)p.dim) && !(tt->kind == TENSOR_PARAM && p.dim == DIM_FLAT) &&
        !(p.dim == DIM_EXPERTS && tensor_has_dim(tt, DIM_ROUTED)))
        PARC_BUG("placement: op %s splits %s `%s` on dim %s, which it does not have", op->name, what, tt->name,
                 dim_names[p.dim]);
    if (p.kind != PLACE_R && p.kind != PLACE_P && p.kind != PLACE_S)
        PARC_BUG("placement: op %s has placement kind %d for %s `%s`", op->name, p.kind, what, tt->name);
}

void place_verify(const PlaceTable *pt)
{
    const Graph *g = pt->g;
    for (int i = 0; i < g->nops; i++) {
        const Op *op = &g->ops[i];
        for (int a = 0; a < pt->naxes; a++) {
            const OpPlace *p = &pt->rule[(size_t)i * (size_t)pt->naxes + (size_t)a];
            for (int k = 0; k < op->nin; k++) {
                verify_one(g, op, a, "input", op->in[k], p->in[k], 0);
                verify_one(g, op, a, "input gradient of", op->in[k], p->din[k], 1);
            }
            for (int k = 0; k < op->nparam; k++) {
                verify_one(g, op, a, "parameter", op->param[k], p->param[k], 0);
                verify_one(g, op, a, "parameter gradient of", op->param[k], p->dparam[k], 1);
            }
            if (op->out >= 0) verify_one(g, op, a, "output", op->out, p->out, 1);
        }
    }
}
