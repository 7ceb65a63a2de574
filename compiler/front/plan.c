/*
 * plan.c — helpers over the resolved Plan and its stable text dump.
 *
 * Mesh convention (parc.h): axes in rank order, the last axis varies fastest;
 * global rank r has coordinate (r / stride(a)) % size(a) on axis a, where
 * stride(a) is the product of the sizes of the axes after a.  Ranks
 * 0..gpus_per_node-1 are node 0, and so on.
 */
#include "parc.h"
#include "prt_lr.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_NAME_(kind, name) name,
const char *const dim_names[DIM_COUNT] = {PARC_DIMS(PLAN_NAME_)};
const char *const recompute_names[RECOMPUTE_COUNT] = {PARC_RECOMPUTE(PLAN_NAME_)};
const char *const precision_names[PREC_FP16 + 1] = {"fp32", "bf16", "fp16"};
#undef PLAN_NAME_

int plan_precision_bytes(Precision p)
{
    switch (p) {
    case PREC_FP32: return 4;
    case PREC_BF16: return 2;
    case PREC_FP16: return 2;
    }
    PARC_BUG("bad precision %d", (int)p);
}

int plan_axis_size(const Plan *plan, int axis)
{
    if (axis < 0) return 1;
    PARC_ASSERT(axis < plan->mesh.naxes + plan->mesh.nderived);
    return plan->mesh.axes[axis].size;
}

unsigned plan_axis_parts(const Plan *plan, int axis)
{
    if (axis < 0) return 0;
    PARC_ASSERT(axis < plan->mesh.naxes + plan->mesh.nderived);
    return axis < plan->mesh.naxes ? 1u << axis : plan->mesh.axes[axis].parts;
}

int plan_zero_axis_ok(const Plan *plan, int axis)
{
    if (axis < 0 || axis >= plan->mesh.naxes + plan->mesh.nderived || plan->layout.data_group < 0) return 0;
    return !(plan_axis_parts(plan, axis) & ~plan_axis_parts(plan, plan->layout.data_group));
}

/* The names of mesh axes `parts` joined by '*' ("dp*cp"), kept for the
 * process (plans are copied by value, so a derived axis's name cannot live
 * in the plan); the same text gives the same pointer. */
static const char *intern_parts(const Mesh *m, unsigned parts)
{
    static char **names;
    static size_t n, cap;
    char buf[PARC_MAX_AXES * 72] = "";
    size_t used = 0;
    for (int a = 0; a < m->naxes && used < sizeof buf; a++)
        if (parts >> a & 1)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", used ? "*" : "",
                                     m->axes[a].name ? m->axes[a].name : "?");
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], buf)) return names[i];
    if (n == cap) {
        cap = cap ? 2 * cap : 8;
        char **grown = realloc(names, cap * sizeof *names);
        if (!grown) PARC_BUG("out of memory naming a derived axis");
        names = grown;
    }
    names[n] = strdup(buf);
    if (!names[n]) PARC_BUG("out of memory naming a derived axis");
    return names[n++];
}

/* The axis spanning exactly `parts` (bit a per mesh axis): a mesh axis, an
 * existing derived axis, or a new derived one. */
static int derived_axis(Mesh *m, unsigned parts)
{
    for (int a = 0; a < m->naxes; a++)
        if (parts == 1u << a) return a;
    for (int d = m->naxes; d < m->naxes + m->nderived; d++)
        if (m->axes[d].parts == parts) return d;
    PARC_ASSERT(m->nderived < PARC_MAX_DERIVED);
    int d = m->naxes + m->nderived++, size = 1;
    for (int a = 0; a < m->naxes; a++)
        if (parts >> a & 1) size *= m->axes[a].size;
    m->axes[d] = (MeshAxis){.name = intern_parts(m, parts), .size = size, .parts = parts, .loc = m->loc};
    return d;
}

int plan_context_axis(const Plan *plan)
{
    int seq = plan->layout.dim_axis[DIM_SEQ];
    if (seq < 0 || seq >= plan->mesh.naxes || seq == plan_tensor_axis(plan)) return -1;
    return plan->mesh.axes[seq].size > 1 ? seq : -1;
}

void plan_derive_axes(Plan *plan)
{
    Mesh *m = &plan->mesh;
    Layout *l = &plan->layout;
    unsigned zero_parts = l->zero_axis >= m->naxes && l->zero_axis < m->naxes + m->nderived
                              ? m->axes[l->zero_axis].parts : 0;
    m->nderived = 0;
    /* batch over two axes: the ones of more than one rank */
    unsigned bparts = 0;
    for (int a = 0; a < m->naxes; a++)
        if ((l->batch_parts >> a & 1) && m->axes[a].size > 1) bparts |= 1u << a;
    if (l->batch_parts) {
        int first = -1;
        for (int a = 0; a < m->naxes && first < 0; a++)
            if (l->batch_parts >> a & 1) first = a;
        l->dim_axis[DIM_BATCH] = __builtin_popcount(bparts) >= 2 ? derived_axis(m, bparts)
                                 : bparts ? __builtin_ctz(bparts) : first;
    }
    int batch = l->dim_axis[DIM_BATCH], seq = plan_context_axis(plan);
    int nb = plan_axis_size(plan, batch), ns = plan_axis_size(plan, seq);
    l->data_group = nb > 1 ? batch : ns > 1 ? seq : batch;
    /* after batch's own: reshard.c's fused_parts tries the later, wider, first */
    if (nb > 1 && ns > 1) l->data_group = derived_axis(m, plan_axis_parts(plan, batch) | 1u << seq);
    if (zero_parts) {
        int z = -1;
        for (int d = 0; d < m->naxes + m->nderived; d++)
            if (plan_axis_parts(plan, d) == zero_parts) z = d;
        l->zero_axis = z >= 0 ? z : l->data_group;
    }
}

int plan_dim_parts(const Plan *plan, Dim dim)
{
    PARC_ASSERT(dim >= 0 && dim < DIM_COUNT);
    return plan_axis_size(plan, plan->layout.dim_axis[dim]);
}

int plan_stage_layer_count(const Layout *l, int s)
{
    int n = 0;
    for (int c = 0; c < l->virtual_stages; c++) n += l->chunk_layers[plan_chunk(l, s, c)];
    return n;
}

int plan_dp(const Plan *plan)
{
    return plan_dim_parts(plan, DIM_BATCH);
}

int plan_cluster_cpu(const Cluster *c) { return c->calibrated && strncmp(c->calibrated, "cpu ", 4) == 0; }

double plan_default_reserve(const Cluster *c)
{
    if (plan_cluster_cpu(c)) return 0;
    const double mib = 1048576.0; /* whole MiB: the figure a written plan states */
    return round((PARC_RESERVE_FIXED + PARC_RESERVE_SHARE * c->gpu_memory) / mib) * mib;
}

double plan_usable_memory(const Cluster *c) { return c->gpu_memory - c->gpu_reserve; }

int plan_fits(const Cluster *c, double ledger_bytes) { return ledger_bytes + c->gpu_reserve <= c->gpu_memory; }

double plan_memory_share(const Cluster *c, double ledger_bytes)
{
    return c->gpu_memory > 0 ? (ledger_bytes + c->gpu_reserve) / c->gpu_memory : 0;
}

int plan_tensor_axis(const Plan *plan)
{
    const Layout *l = &plan->layout;
    return l->dim_axis[DIM_HEADS] >= 0 ? l->dim_axis[DIM_HEADS] : l->dim_axis[DIM_FFN];
}

int64_t plan_boundary_elems(const Plan *plan)
{
    const Model *m = &plan->model;
    int parts = plan->layout.sp_axis >= 0 ? plan_axis_size(plan, plan->layout.sp_axis) : 1;
    return plan->train.micro_batch * (m->seq / plan_dim_parts(plan, DIM_SEQ) / parts) *
           (m->hidden / plan_dim_parts(plan, DIM_HIDDEN));
}

int plan_sp_with_cp(const Model *m)
{
    return m->positions != POS_LEARNED && m->block.dropout == 0;
}

int plan_pipeline_scatter_fits(const Plan *plan)
{
    const Layout *l = &plan->layout;
    int tp = plan_tensor_axis(plan), size = plan_axis_size(plan, tp);
    return l->pp_axis >= 0 && size > 1 && l->sp_axis < 0 && l->dim_axis[DIM_SEQ] != tp &&
           l->dim_axis[DIM_HIDDEN] != tp && plan_boundary_elems(plan) % size == 0;
}

/* Product of the sizes of the axes after `axis`. */
static int64_t plan_axis_stride(const Plan *plan, int axis)
{
    int64_t stride = 1;
    for (int a = axis + 1; a < plan->mesh.naxes; a++) stride *= plan->mesh.axes[a].size;
    return stride;
}

/* A derived axis: each group's ranks lie between its rank at coordinate 0
 * (every part's coordinate 0) and the one at the last coordinate, so every
 * group stays in a node iff each group's first and last rank do. */
static int derived_inside_node(const Plan *plan, int axis)
{
    unsigned parts = plan->mesh.axes[axis].parts;
    int64_t gpn = plan->cluster.gpus_per_node, span = 0;
    if (gpn <= 0) return 0;
    /* reports ask for every instruction's axis: remember the last answer,
     * for this mesh, node size and parts */
    static struct { int naxes, sizes[PARC_MAX_AXES], inside; int64_t gpn; unsigned parts; } memo = {.naxes = -1};
    int same = memo.naxes == plan->mesh.naxes && memo.gpn == gpn && memo.parts == parts;
    for (int a = 0; a < plan->mesh.naxes && same; a++) same = memo.sizes[a] == plan->mesh.axes[a].size;
    if (same) return memo.inside;
    memo.naxes = plan->mesh.naxes, memo.gpn = gpn, memo.parts = parts, memo.inside = 0;
    for (int a = 0; a < plan->mesh.naxes; a++) memo.sizes[a] = plan->mesh.axes[a].size;
    for (int a = 0; a < plan->mesh.naxes; a++)
        if (parts >> a & 1) span += (int64_t)(plan->mesh.axes[a].size - 1) * plan_axis_stride(plan, a);
    int coords[PARC_MAX_AXES];
    for (int r = 0; r < plan->mesh.world; r++) {
        plan_rank_coords(plan, r, coords);
        int base = 1;
        for (int a = 0; a < plan->mesh.naxes && base; a++)
            if (parts >> a & 1) base = coords[a] == 0;
        if (base && r / gpn != (r + span) / gpn) return 0;
    }
    return memo.inside = 1;
}

/* The fewest of one group's ranks that share a node, over the axis's groups
 * and the nodes they touch.  A group's ranks in increasing order are its
 * parts' coordinates counted in mesh order (the later axis fastest), and a
 * node holds a contiguous range of ranks, so the ranks of a group on one node
 * are a run of that order. */
int plan_axis_node_ranks(const Plan *plan, int axis)
{
    if (axis < 0) return 1;
    int size = plan->mesh.axes[axis].size;
    if (size <= 1 || plan_axis_inside_node(plan, axis)) return size > 1 ? size : 1;
    int64_t gpn = plan->cluster.gpus_per_node;
    if (gpn <= 0) return 1;
    unsigned parts = plan_axis_parts(plan, axis);
    /* reports and the cost of every instruction ask for every axis: remember
     * the answers, a slot per mesh, node size and parts */
    static struct { int naxes, sizes[PARC_MAX_AXES], fewest; int64_t gpn; unsigned parts; } memo[16];
    unsigned h = (unsigned)gpn * 31u + parts;
    for (int a = 0; a < plan->mesh.naxes; a++) h = h * 31u + (unsigned)plan->mesh.axes[a].size;
    h %= 16u;
    int same = memo[h].naxes == plan->mesh.naxes && memo[h].gpn == gpn && memo[h].parts == parts;
    for (int a = 0; a < plan->mesh.naxes && same; a++) same = memo[h].sizes[a] == plan->mesh.axes[a].size;
    if (same) return memo[h].fewest;
    int fewest = size, coords[PARC_MAX_AXES], c[PARC_MAX_AXES];
    for (int r = 0; r < plan->mesh.world; r++) {
        plan_rank_coords(plan, r, coords);
        int base = 1;
        for (int a = 0; a < plan->mesh.naxes && base; a++)
            if (parts >> a & 1) base = coords[a] == 0;
        if (!base) continue;
        int64_t node = -1;
        int run = 0;
        memcpy(c, coords, sizeof c);
        for (int m = 0; m < size; m++) { /* the group's m-th rank: parts' coordinates counted, the last fastest */
            int64_t rank = plan_coords_rank(plan, c), at = rank / gpn;
            if (at != node) {
                if (run > 0 && run < fewest) fewest = run;
                node = at, run = 0;
            }
            run++;
            for (int a = plan->mesh.naxes - 1; a >= 0; a--) {
                if (!(parts >> a & 1)) continue;
                if (++c[a] < plan->mesh.axes[a].size) break;
                c[a] = 0;
            }
        }
        if (run < fewest) fewest = run;
    }
    memo[h].naxes = plan->mesh.naxes, memo[h].gpn = gpn, memo[h].parts = parts, memo[h].fewest = fewest;
    for (int a = 0; a < plan->mesh.naxes; a++) memo[h].sizes[a] = plan->mesh.axes[a].size;
    return fewest;
}

int plan_axis_inside_node(const Plan *plan, int axis)
{
    if (axis < 0) return 1;
    if (axis >= plan->mesh.naxes && axis < plan->mesh.naxes + plan->mesh.nderived)
        return plan->mesh.axes[axis].size <= 1 || derived_inside_node(plan, axis);
    PARC_ASSERT(axis < plan->mesh.naxes);
    int64_t size = plan->mesh.axes[axis].size;
    int64_t gpn = plan->cluster.gpus_per_node;
    if (size <= 1) return 1;
    if (gpn <= 0) return 0;
    int64_t stride = plan_axis_stride(plan, axis);
    int64_t world = plan->mesh.world;
    /* A group's ranks are base + c*stride, c = 0..size-1, increasing in c: it
     * stays in one node iff its first and last rank do.  The groups of one
     * block of size*stride ranks (bases k*block + 0..stride-1) together
     * cover the block, and any node boundary inside it falls between the
     * first and last rank of one of them: so every group stays inside a node
     * iff every block does. */
    int64_t block = size * stride;
    /* reports ask for every instruction's axis: remember the last answers */
    static struct { int64_t world, gpn, block; int inside; } memo[16];
    unsigned h = (unsigned)((world * 31 + gpn) * 31 + block) % 16u;
    if (memo[h].world == world && memo[h].gpn == gpn && memo[h].block == block) return memo[h].inside;
    int inside = 1;
    for (int64_t first = 0; first < world && inside; first += block)
        if (first / gpn != (first + block - 1) / gpn) inside = 0;
    memo[h].world = world, memo[h].gpn = gpn, memo[h].block = block, memo[h].inside = inside;
    return inside;
}

void plan_rank_coords(const Plan *plan, int rank, int coords[PARC_MAX_AXES])
{
    PARC_ASSERT(rank >= 0 && rank < plan->mesh.world);
    for (int a = plan->mesh.naxes - 1; a >= 0; a--) {
        coords[a] = rank % plan->mesh.axes[a].size;
        rank /= plan->mesh.axes[a].size;
    }
    for (int a = plan->mesh.naxes; a < PARC_MAX_AXES; a++) coords[a] = 0;
}

int plan_coords_rank(const Plan *plan, const int coords[PARC_MAX_AXES])
{
    int rank = 0;
    for (int a = 0; a < plan->mesh.naxes; a++) {
        PARC_ASSERT(coords[a] >= 0 && coords[a] < plan->mesh.axes[a].size);
        rank = rank * plan->mesh.axes[a].size + coords[a];
    }
    return rank;
}

/* ------------------------------------------------------------------ dump */

static const char *const norm_names[] = {"none", "layer", "rms"};
static const char *const mlp_names[] = {"gelu", "swiglu", "relu"};
static const char *const block_names[] = {"transformer", "mlp"};
static const char *const pos_names[] = {"none", "learned", "rope"}; /* ORDER: PosKind */
static const char *const optimizer_names[] = {"adamw", "adam", "sgd"};
static const char *const schedule_names[] = {"none", "gpipe", "1f1b", "interleaved"};

static const char *plan_axis_name(const Plan *plan, int axis)
{
    if (axis < 0 || axis >= plan->mesh.naxes + plan->mesh.nderived) return "-";
    return plan->mesh.axes[axis].name ? plan->mesh.axes[axis].name : "?";
}

static void plan_dump_loc(FILE *out, const char *what, SrcLoc loc)
{
    if (!loc.file) return;
    const char *base = strrchr(loc.file, '/');
    fprintf(out, "  %s %s:%d:%d+%d\n", what, base ? base + 1 : loc.file, loc.line, loc.col, loc.len);
}

/* A double in stable text: whole numbers below 2^53 in full (85899345920),
 * others with %.10g (3e-04 prints as 0.0003), the same on every platform. */
static const char *plan_num(char buf[48], double x)
{
    if (x > -9007199254740992.0 && x < 9007199254740992.0 && x == (double)(int64_t)x)
        snprintf(buf, 48, "%" PRId64, (int64_t)x);
    else
        snprintf(buf, 48, "%.10g", x);
    return buf;
}

/* Parameters of the block's MLP: dense, or the router, every routed expert
 * and the shared experts (a dense MLP of shared_ffn units, no biases). */
static int64_t plan_mlp_params(const Model *m, int64_t *active)
{
    const BlockSpec *b = &m->block;
    int64_t H = m->hidden, gate = b->mlp == MLP_SWIGLU ? 2 : 1;
    if (b->moe.experts == 0) {
        int64_t F = m->ffn;
        int64_t n = H * gate * F + F * H + (b->bias ? gate * F + H : 0);
        *active = n;
        return n;
    }
    int64_t E = b->moe.experts, F = b->moe.expert_ffn;
    int64_t router = H * E, expert = H * gate * F + F * H;
    int64_t shared = (H * gate + H) * b->moe.shared_ffn;
    *active = router + b->moe.topk * expert + shared;
    return router + E * expert + shared;
}

/* Parameters of a norm of kind `kind` over hidden with layer norm's bias when `bias`. */
static int64_t plan_norm_params(NormKind kind, int bias, int64_t H)
{
    if (kind == NORM_NONE) return 0;
    return kind == NORM_LAYER && bias ? 2 * H : H;
}

int64_t plan_parameter_counts(const Plan *plan, int64_t *active)
{
    const Model *m = &plan->model;
    const BlockSpec *b = &m->block;
    int64_t H = m->hidden, V = m->vocab;
    int64_t mlp_active, layer = plan_mlp_params(m, &mlp_active);
    int64_t layer_rest = plan_norm_params(b->norm, b->bias, H);
    if (b->kind == BLOCK_TRANSFORMER) {
        int64_t qkv = (m->heads + 2 * m->kv_heads) * m->head_dim, att = m->heads * m->head_dim;
        layer_rest += plan_norm_params(b->norm, b->bias, H) + H * qkv + att * H + (b->bias ? qkv + H : 0);
    }
    int64_t ends = 0;
    if (m->has_embed) ends += V * H + (m->positions == POS_LEARNED ? m->seq * H : 0);
    ends += plan_norm_params(m->final_norm, b->bias, H);
    if (m->has_head && !(m->tied_head && m->has_embed)) ends += H * V;
    /* `every N`: layers / N mixtures, the rest dense MLPs of ffn units */
    int64_t N = plan_block_layers(plan), moe_layers = m->layers / N, dense_layers = m->layers - moe_layers;
    Model dense_model = *m;
    dense_model.block.moe.experts = 0;
    int64_t dense_active, dense = plan_mlp_params(&dense_model, &dense_active);
    *active = ends + m->layers * layer_rest + moe_layers * mlp_active + dense_layers * dense;
    return ends + m->layers * layer_rest + moe_layers * layer + dense_layers * dense;
}

const char *plan_model_json(Arena *arena, const Plan *plan)
{
    const Model *m = &plan->model;
    static const char *const norms[] = {"none", "layer", "rms"};
    const char *scaling = "";
    if (m->positions == POS_ROPE && m->rope.llama3)
        scaling = arena_printf(arena,
                               ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.17g, \"low_freq_factor\": "
                               "%.17g, \"high_freq_factor\": %.17g, \"original_max_position_embeddings\": %lld}",
                               m->rope.factor, m->rope.low_freq_factor, m->rope.high_freq_factor,
                               (long long)m->rope.original_max_positions);
    const char *rope = m->positions == POS_ROPE ? arena_printf(arena, ", \"rope_theta\": %.17g%s", m->rope.theta, scaling)
                                                : "";
    const MoeSpec *e = &m->block.moe;
    const char *moe = e->experts ? arena_printf(arena,
                                                ", \"moe\": {\"experts\": %lld, \"topk\": %lld, \"expert_ffn\": %lld, "
                                                "\"router\": \"%s\", \"aux_loss\": %.17g, \"z_loss\": %.17g, "
                                                "\"shared\": %lld, \"shared_ffn\": %lld, \"every\": %lld}",
                                                (long long)e->experts, (long long)e->topk, (long long)e->expert_ffn,
                                                e->router == ROUTER_SIGMOID ? "sigmoid" : "softmax", e->aux_coef,
                                                e->z_coef, (long long)e->shared, (long long)e->shared_ffn,
                                                (long long)e->every)
                                 : "";
    return arena_printf(arena,
                        "{\"vocab\": %lld, \"seq\": %lld, \"positions\": \"%s\"%s, \"norm\": \"%s\", \"norm_eps\": %.17g, "
                        "\"final_norm_eps\": %.17g, "
                        "\"hidden\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld, \"ffn\": %lld, "
                        "\"layers\": %lld, \"tied_head\": %s, \"bias\": %s%s}",
                        (long long)m->vocab, (long long)m->seq, pos_names[m->positions], rope, norms[m->block.norm], m->block.norm_eps, m->final_norm_eps,
                        (long long)m->hidden, (long long)m->heads, (long long)m->kv_heads, (long long)m->head_dim,
                        (long long)m->ffn, (long long)m->layers, m->tied_head ? "true" : "false",
                        m->block.bias ? "true" : "false", moe);
}

void plan_dump(const Plan *plan, FILE *out)
{
    const Cluster *c = &plan->cluster;
    const Model *m = &plan->model;
    const Train *t = &plan->train;
    const Mesh *mesh = &plan->mesh;
    const Layout *l = &plan->layout;

    fprintf(out, "plan %s\n", plan->file ? plan->file : "-");
    fprintf(out, "cluster\n");
    fprintf(out, "  nodes %d\n  gpus_per_node %d\n", c->nodes, c->gpus_per_node);
    char n1[48], n2[48], n3[48], n4[48], n5[48], n6[48];
    fprintf(out, "  gpu_memory %s B\n  gpu_reserve %s B\n", plan_num(n1, c->gpu_memory), plan_num(n2, c->gpu_reserve));
    fprintf(out, "  flops_bf16 %s FLOP/s\n  flops_fp32 %s FLOP/s\n", plan_num(n1, c->flops_bf16),
            plan_num(n2, c->flops_fp32));
    fprintf(out, "  hbm_bandwidth %s B/s\n", plan_num(n1, c->hbm_bandwidth));
    fprintf(out, "  intra %s B/s %s s\n", plan_num(n1, c->intra_bw), plan_num(n2, c->intra_latency));
    fprintf(out, "  inter %s B/s %s s\n", plan_num(n1, c->inter_bw), plan_num(n2, c->inter_latency));

    fprintf(out, "model %s\n", m->name ? m->name : "-");
    fprintf(out, "  vocab %" PRId64 "\n  seq %" PRId64 "\n  hidden %" PRId64 "\n", m->vocab, m->seq, m->hidden);
    fprintf(out, "  heads %" PRId64 "\n  kv_heads %" PRId64 "\n  head_dim %" PRId64 "\n", m->heads, m->kv_heads,
            m->head_dim);
    fprintf(out, "  ffn %" PRId64 "\n  layers %" PRId64 "\n", m->ffn, m->layers);
    fprintf(out, "  embed %d\n  positions %s\n", m->has_embed, pos_names[m->positions]);
    if (m->positions == POS_ROPE) {
        fprintf(out, "  rope_theta %s\n", plan_num(n1, m->rope.theta));
        if (m->rope.llama3)
            fprintf(out, "  rope_scaling llama3\n  rope_factor %s\n  rope_low_freq_factor %s\n"
                         "  rope_high_freq_factor %s\n  rope_original_max_positions %" PRId64 "\n",
                    plan_num(n1, m->rope.factor), plan_num(n2, m->rope.low_freq_factor),
                    plan_num(n3, m->rope.high_freq_factor), m->rope.original_max_positions);
    }
    fprintf(out, "  block %s norm %s mlp %s bias %d causal %d flash %d residual %d\n", block_names[m->block.kind],
            norm_names[m->block.norm], mlp_names[m->block.mlp], m->block.bias, m->block.causal, m->block.flash,
            m->block.residual);
    if (m->block.moe.experts) {
        const MoeSpec *moe = &m->block.moe;
        int64_t active, total = plan_parameter_counts(plan, &active);
        fprintf(out, "  moe experts %" PRId64 " top %" PRId64 " expert_ffn %" PRId64 " router %s aux_loss %s z_loss %s",
                moe->experts, moe->topk, moe->expert_ffn, moe->router == ROUTER_SIGMOID ? "sigmoid" : "softmax",
                plan_num(n1, moe->aux_coef), plan_num(n2, moe->z_coef));
        if (moe->shared) fprintf(out, " shared %" PRId64 " shared_ffn %" PRId64, moe->shared, moe->shared_ffn);
        if (moe->imbalance != 1.0) fprintf(out, " imbalance %s", plan_num(n1, moe->imbalance));
        if (moe->capacity > 0) fprintf(out, " capacity %s", plan_num(n1, moe->capacity));
        if (moe->every > 1) fprintf(out, " every %" PRId64, moe->every);
        fprintf(out, "\n");
        fprintf(out, "  parameters %" PRId64 " active %" PRId64 "\n", total, active);
    }
    fprintf(out, "  norm_eps %s\n", plan_num(n1, m->block.norm_eps));
    if (m->block.dropout > 0) fprintf(out, "  dropout %s\n", plan_num(n1, m->block.dropout));
    fprintf(out, "  final_norm %s\n  final_norm_eps %s\n", norm_names[m->final_norm], plan_num(n1, m->final_norm_eps));
    fprintf(out, "  head %d\n  tied_head %d\n  loss %d\n", m->has_head, m->tied_head, m->has_loss);

    fprintf(out, "train\n");
    fprintf(out, "  batch %" PRId64 "\n  micro_batch %" PRId64 "\n  micro_batches %" PRId64 "\n", t->batch,
            t->micro_batch, t->micro_batches);
    fprintf(out, "  precision %s\n  master_fp32 %d\n  grads_fp32 %d\n", precision_names[t->precision], t->master_fp32,
            t->grads_fp32);
    fprintf(out, "  optimizer %s lr %s beta1 %s beta2 %s eps %s weight_decay %s momentum %s\n",
            optimizer_names[t->optimizer], plan_num(n1, t->lr), plan_num(n2, t->beta1), plan_num(n3, t->beta2),
            plan_num(n4, t->eps), plan_num(n5, t->weight_decay), plan_num(n6, t->momentum));
    if (t->lr_scheduled)
        fprintf(out, "  lr_schedule warmup %" PRId64 " stable %" PRId64 " %s to %s over %" PRId64 "\n", t->lr_warmup,
                t->lr_stable, prt_lr_shape_name(t->lr_shape), plan_num(n1, t->lr_min), t->lr_decay);
    if (t->decay_all) fprintf(out, "  weight_decay_on all\n");
    if (t->clip > 0) fprintf(out, "  clip %s\n", plan_num(n1, t->clip));
    fprintf(out, "  steps %" PRId64 "\n  seed %" PRIu64 "\n", t->steps, t->seed);
    if (t->eval_every > 0)
        fprintf(out, "  eval every %" PRId64 " batches %" PRId64 "\n", t->eval_every, t->eval_batches);
    if (plan->data.present) {
        static const char *const formats[] = {"text", "llmc", "u16", "u32"}; /* ORDER: enum prt_data_format */
        fprintf(out, "data\n  train %s\n  validation %s\n  format %s\n",
                plan->data.train ? plan->data.train_written : "-",
                plan->data.validation ? plan->data.validation_written : "-", formats[plan->data.format]);
    }
    if (t->ckpt_dir)
        fprintf(out, "  checkpoint every %" PRId64 " keep %" PRId64 " dir %s\n", t->ckpt_every, t->ckpt_keep,
                t->ckpt_dir);

    fprintf(out, "mesh\n");
    for (int a = 0; a < mesh->naxes; a++)
        fprintf(out, "  axis %d %s size %d stride %" PRId64 " inside_node %d\n", a, plan_axis_name(plan, a),
                mesh->axes[a].size, plan_axis_stride(plan, a), plan_axis_inside_node(plan, a));
    fprintf(out, "  world %d\n", mesh->world);

    fprintf(out, "layout\n");
    for (int d = 0; d < DIM_COUNT; d++)
        if (l->dim_axis[d] >= 0) fprintf(out, "  %s -> %s\n", dim_names[d], plan_axis_name(plan, l->dim_axis[d]));
    fprintf(out, "  dp %d\n", plan_dp(plan));
    fprintf(out, "  pp_axis %s\n  schedule %s\n  virtual_stages %d\n", plan_axis_name(plan, l->pp_axis),
            schedule_names[l->schedule], l->virtual_stages);
    fprintf(out, "  sp_axis %s\n", plan_axis_name(plan, l->sp_axis));
    fprintf(out, "  zero %d over %s\n", l->zero_stage, plan_axis_name(plan, l->zero_axis));
    fprintf(out, "  recompute %s\n", recompute_names[l->recompute]);
    fprintf(out, "  stages %d\n  uneven %d\n  embed_stage %d\n  head_stage %d\n", l->stages, l->uneven,
            l->embed_stage, l->head_stage);
    for (int s = 0; s < l->stages && s < PARC_MAX_STAGES; s++) {
        if (l->virtual_stages == 1) {
            fprintf(out, "  stage %d first %d layers %d\n", s, l->chunk_first[s], l->chunk_layers[s]);
            continue;
        }
        for (int c = 0; c < l->virtual_stages; c++)
            fprintf(out, "  stage %d chunk %d first %d layers %d\n", s, c, l->chunk_first[plan_chunk(l, s, c)],
                    l->chunk_layers[plan_chunk(l, s, c)]);
    }
    if (l->grad_overlap_off) fprintf(out, "  grad_overlap off\n");
    if (l->tp_overlap_off) fprintf(out, "  tp_overlap off\n");
    if (l->pipeline_scatter) fprintf(out, "  pipeline_scatter on\n");
    if (l->cp_comm == CP_COMM_RING) fprintf(out, "  cp_comm ring\n");
    if (l->cp_balanced) fprintf(out, "  cp_split balanced\n");
    if (l->balance == BALANCE_AUTO)
        fprintf(out, "  balance auto: layer %.6g s embed %.6g s head %.6g s busiest even %.6g s chosen %.6g s\n",
                l->balance_layer_s, l->balance_embed_s, l->balance_head_s, l->balance_even_busy_s, l->balance_busy_s);

    fprintf(out, "locations\n");
    plan_dump_loc(out, "cluster", c->loc);
    plan_dump_loc(out, "cluster.memory", c->memory_loc);
    plan_dump_loc(out, "model", m->loc);
    plan_dump_loc(out, "model.block", m->block.loc);
    for (int d = 0; d < DIM_COUNT; d++) {
        char what[40];
        snprintf(what, sizeof what, "model.%s", dim_names[d]);
        plan_dump_loc(out, what, m->dim_loc[d]);
    }
    plan_dump_loc(out, "train", t->loc);
    plan_dump_loc(out, "train.batch", t->batch_loc);
    plan_dump_loc(out, "train.micro_batch", t->micro_batch_loc);
    plan_dump_loc(out, "train.micro_batches", t->micro_batches_loc);
    plan_dump_loc(out, "train.precision", t->precision_loc);
    plan_dump_loc(out, "mesh", mesh->loc);
    for (int a = 0; a < mesh->naxes; a++) {
        char what[64];
        snprintf(what, sizeof what, "mesh.%s", plan_axis_name(plan, a));
        plan_dump_loc(out, what, mesh->axes[a].loc);
    }
    for (int d = 0; d < DIM_COUNT; d++) {
        char what[40];
        snprintf(what, sizeof what, "layout.%s", dim_names[d]);
        plan_dump_loc(out, what, l->dim_axis_loc[d]);
    }
    plan_dump_loc(out, "layout.schedule", l->schedule_loc);
    plan_dump_loc(out, "layout.sequence_parallel", l->sp_loc);
    plan_dump_loc(out, "layout.zero", l->zero_loc);
    plan_dump_loc(out, "layout.recompute", l->recompute_loc);
    plan_dump_loc(out, "layout.stage", l->stage_loc);
    if (l->balance == BALANCE_AUTO) plan_dump_loc(out, "layout.balance", l->balance_loc);
    if (l->grad_overlap_off) plan_dump_loc(out, "layout.grad_overlap", l->grad_overlap_loc);
    if (l->tp_overlap_off) plan_dump_loc(out, "layout.tp_overlap", l->tp_overlap_loc);
    if (l->pipeline_scatter) plan_dump_loc(out, "layout.pipeline_scatter", l->pipeline_scatter_loc);
    if (l->cp_comm == CP_COMM_RING) plan_dump_loc(out, "layout.cp_comm", l->cp_comm_loc);
    if (l->cp_balanced) plan_dump_loc(out, "layout.cp_split", l->cp_split_loc);
}
