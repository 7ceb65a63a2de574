/*
 * plan_write.c — a checked Plan written back as a .par file that `parc check`
 * accepts and that loads into the same Plan (numbers in base units, every
 * rule spelled out).  `parc search` writes its layouts with it.
 */
#include "ast.h"
#include "parc.h"
#include "plan_write.h"
#include "prt_lr.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const norm_w[] = {"none", "layer", "rms"};
static const char *const mlp_w[] = {"gelu", "swiglu", "relu"};
static const char *const opt_w[] = {"adamw", "adam", "sgd"};
static const char *const sched_w[] = {"none", "gpipe", "1f1b", "interleaved"};
static const char *const tf_w[] = {"false", "true"};

/* A number as a person writes it: the fewest significant digits that read
 * back (times `factor`) to exactly x.  Returns buf. */
static const char *shortest(char *buf, size_t size, double x, double factor)
{
    double v = x / factor, a = v < 0 ? -v : v;
    int plain = a == 0 || (a >= 1e-4 && a < 1e15); /* written without an exponent, as people do */
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, v);
        if (plain && strchr(buf, 'e')) continue;
        if (strtod(buf, NULL) * factor == x) return buf;
    }
    snprintf(buf, size, "%.17g", x / factor);
    return buf;
}

/* A plain number, shortest (`0.9`, not 0.90000000000000002). */
#define NUM(x) shortest((char[40]){0}, 40, (x), 1.0)

/* A quantity of unit kind `kind` in the largest unit of that kind whose
 * value is at least 1 and reads back exactly (`2 us`, `80 GiB`, `989 TFLOP/s`),
 * else in the base unit. */
static const char *quantity(char *buf, size_t size, double x, UnitKind kind)
{
    const UnitInfo *best = NULL;
    char text[40];
    for (int i = 0; i < unit_table_count && x != 0; i++) {
        const UnitInfo *u = &unit_table[i];
        if (u->kind != kind || (x != 0 && x / u->factor < 1)) continue;
        shortest(text, sizeof text, x, u->factor);
        if (strtod(text, NULL) * u->factor != x || strchr(text, 'e')) continue;
        /* prefer the unit that needs the fewest characters, then the larger */
        if (!best || strlen(text) < strlen(buf) || (strlen(text) == strlen(buf) && u->factor > best->factor)) {
            best = u;
            snprintf(buf, size, "%s", text);
        }
    }
    if (!best) {
        for (int i = 0; i < unit_table_count; i++)
            if (unit_table[i].kind == kind && unit_table[i].factor == 1.0) best = &unit_table[i];
        shortest(buf, size, x, 1.0);
    }
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, " %s", best ? best->name : "");
    return buf;
}
#define QTY(x, kind) quantity((char[48]){0}, 48, (x), (kind))

static void write_cluster(const Plan *p, FILE *out)
{
    const Cluster *c = &p->cluster;
    const Efficiency *e = &c->eff;
    fprintf(out, "cluster {\n  nodes %d;\n  gpus_per_node %d;\n", c->nodes, c->gpus_per_node);
    if (c->calibrated) fprintf(out, "  calibrated \"%s\";\n", c->calibrated);
    fprintf(out, "  gpu { memory %s; bf16 %s;", QTY(c->gpu_memory, UNIT_MEMORY), QTY(c->flops_bf16, UNIT_COMPUTE));
    if (c->flops_fp32 > 0) fprintf(out, " fp32 %s;", QTY(c->flops_fp32, UNIT_COMPUTE));
    /* the reserve as a number even where it was the default: the plan re-reads to it */
    fprintf(out, " hbm %s; reserve %s; }\n", QTY(c->hbm_bandwidth, UNIT_BANDWIDTH), QTY(c->gpu_reserve, UNIT_MEMORY));
    if (c->gpus_per_node > 1 || c->intra_bw > 0)
        fprintf(out, "  link intra %s %s;\n", QTY(c->intra_bw, UNIT_BANDWIDTH), QTY(c->intra_latency, UNIT_TIME));
    if (c->nodes > 1 || c->inter_bw > 0)
        fprintf(out, "  link inter %s %s;\n", QTY(c->inter_bw, UNIT_BANDWIDTH), QTY(c->inter_latency, UNIT_TIME));
    Efficiency known;
    int named = e->name && plan_efficiency_defaults(e->name, &known) == 0;
    fprintf(out, "  efficiency %s%s{ gemm", named ? e->name : "", named ? " " : "");
    for (int k = 0; k < PARC_GEMM_CLASSES; k++) fprintf(out, " %s", NUM(e->gemm[k]));
    fprintf(out, "; attention %s; hbm %s; activation %s; intra %s; inter %s; half_intra %s; "
                 "half_inter %s;",
            NUM(e->attention), NUM(e->hbm), NUM(e->activation), NUM(e->bus[0]), NUM(e->bus[1]),
            QTY(e->half_bytes[0], UNIT_MEMORY), QTY(e->half_bytes[1], UNIT_MEMORY));
    /* the memory-bound classes a cluster may state apart from hbm (0: as hbm, or as 1) */
    const char *const extra_names[] = {"norm", "softmax", "scores", "tiles", "optimizer"};
    const double extra[] = {e->norm, e->softmax, e->scores, e->tiles, e->optimizer};
    for (int k = 0; k < 5; k++)
        if (extra[k] > 0) fprintf(out, " %s %s;", extra_names[k], NUM(extra[k]));
    if (e->overlap_set && e->overlap < 1) fprintf(out, " overlap %s;", NUM(e->overlap));
    if (e->stream16[0] > 0) {
        fprintf(out, " stream16");
        for (int k = 0; k < PARC_STREAM16_KINDS; k++) fprintf(out, " %s", NUM(e->stream16[k]));
        fprintf(out, ";");
    }
    if (e->gemm16[0] > 0) {
        fprintf(out, " gemm16");
        for (int k = 0; k < PARC_GEMM_CLASSES; k++) fprintf(out, " %s", NUM(e->gemm16[k]));
        fprintf(out, ";");
    }
    fprintf(out, " }\n}\n");
}

/* " eps X" after a norm's kind, or nothing at the default (PARC_NORM_EPS).
 * Returns buf. */
static const char *norm_eps_text(char *buf, size_t size, NormKind kind, double eps)
{
    buf[0] = 0;
    if (kind != NORM_NONE && eps != PARC_NORM_EPS) snprintf(buf, size, " eps %s", NUM(eps));
    return buf;
}
#define norm_eps(kind, eps) norm_eps_text((char[48]){0}, 48, (kind), (eps))

static void write_embed(const Model *m, FILE *out)
{
    fprintf(out, "  embed%s", m->positions == POS_LEARNED ? " positions learned" : "");
    if (m->positions == POS_ROPE) {
        fprintf(out, " positions rope theta %s", NUM(m->rope.theta));
        if (m->rope.llama3)
            fprintf(out, " scaling llama3 factor %s low_freq_factor %s high_freq_factor %s original_max_positions %"
                         PRId64, NUM(m->rope.factor), NUM(m->rope.low_freq_factor), NUM(m->rope.high_freq_factor),
                    m->rope.original_max_positions);
    }
    fprintf(out, ";\n");
}

static void write_model(const Plan *p, FILE *out)
{
    const Model *m = &p->model;
    const BlockSpec *b = &m->block;
    char dropout[48] = "";
    if (b->dropout > 0) snprintf(dropout, sizeof dropout, " dropout %s;", NUM(b->dropout));
    fprintf(out, "model %s {\n ", m->name ? m->name : "model");
    if (m->vocab > 0) fprintf(out, " vocab %" PRId64 ";", m->vocab);
    fprintf(out, " seq %" PRId64 "; hidden %" PRId64 ";", m->seq, m->hidden);
    if (b->kind == BLOCK_TRANSFORMER) {
        fprintf(out, " heads %" PRId64 ";", m->heads);
        if (m->kv_heads != m->heads) fprintf(out, " kv_heads %" PRId64 ";", m->kv_heads);
        if (m->heads > 0 && m->head_dim * m->heads != m->hidden) fprintf(out, " head_dim %" PRId64 ";", m->head_dim);
    }
    fprintf(out, " ffn %" PRId64 "; layers %" PRId64 ";\n", m->ffn, m->layers);
    if (m->has_embed) write_embed(m, out);
    char mlp[256];
    snprintf(mlp, sizeof mlp, "%s", mlp_w[b->mlp]);
    if (b->moe.experts) {
        const MoeSpec *e = &b->moe;
        char aux[32], z[32];
        snprintf(aux, sizeof aux, "%s", NUM(e->aux_coef));
        snprintf(z, sizeof z, "%s", NUM(e->z_coef));
        snprintf(mlp, sizeof mlp,
                 "moe %s experts %" PRId64 " top %" PRId64 " expert_ffn %" PRId64 " router %s aux_loss %s z_loss %s",
                 mlp_w[b->mlp], e->experts, e->topk, e->expert_ffn, e->router == ROUTER_SIGMOID ? "sigmoid" : "softmax",
                 aux, z);
        if (e->shared) {
            size_t used = strlen(mlp);
            snprintf(mlp + used, sizeof mlp - used, " shared %" PRId64 " shared_ffn %" PRId64, e->shared,
                     e->shared_ffn);
        }
        if (e->imbalance != 1.0) {
            size_t used = strlen(mlp);
            snprintf(mlp + used, sizeof mlp - used, " imbalance %s", NUM(e->imbalance));
        }
        if (e->capacity > 0) {
            size_t used = strlen(mlp);
            snprintf(mlp + used, sizeof mlp - used, " capacity %s", NUM(e->capacity));
        }
        if (e->every > 1) {
            size_t used = strlen(mlp);
            snprintf(mlp + used, sizeof mlp - used, " every %" PRId64, e->every);
        }
    }
    if (b->kind == BLOCK_TRANSFORMER)
        fprintf(out, "  repeat layers { block transformer { norm %s%s; mlp %s; attention %s%s; bias %s;%s } }\n",
                norm_w[b->norm], norm_eps(b->norm, b->norm_eps), mlp, b->causal ? "causal" : "full",
                b->flash ? " flash" : "", tf_w[b->bias], dropout);
    else
        fprintf(out, "  repeat layers { block mlp { act %s; norm %s%s; bias %s; residual %s;%s } }\n", mlp_w[b->mlp],
                norm_w[b->norm], norm_eps(b->norm, b->norm_eps), tf_w[b->bias], tf_w[b->residual], dropout);
    fprintf(out, "  norm %s%s;\n", norm_w[m->final_norm], norm_eps(m->final_norm, m->final_norm_eps));
    fprintf(out, "  head %s;\n", !m->has_head ? "none" : m->tied_head ? "tied" : "untied");
    fprintf(out, "  loss %s;\n}\n", m->has_loss ? "cross_entropy" : "none");
}

static void write_train(const Plan *p, FILE *out)
{
    const Train *t = &p->train;
    fprintf(out, "train {\n  batch %" PRId64 ";\n  micro_batch %" PRId64 ";\n", t->batch, t->micro_batch);
    fprintf(out, "  precision %s%s%s;\n", precision_names[t->precision],
            t->precision != PREC_FP32 && t->master_fp32 ? " master fp32" : "",
            t->precision != PREC_FP32 && t->grads_fp32 ? " grads fp32" : "");
    fprintf(out, "  optimizer %s", opt_w[t->optimizer]);
    if (!t->lr_scheduled) fprintf(out, " lr %s", NUM(t->lr));
    if (t->optimizer == OPT_SGD) fprintf(out, " momentum %s", NUM(t->momentum));
    else fprintf(out, " beta1 %s beta2 %s eps %s", NUM(t->beta1), NUM(t->beta2), NUM(t->eps));
    if (t->decay_all) fprintf(out, ";\n  weight_decay %s on all;\n", NUM(t->weight_decay));
    else fprintf(out, " weight_decay %s;\n", NUM(t->weight_decay));
    if (t->clip > 0) fprintf(out, "  clip %s;\n", NUM(t->clip));
    if (t->lr_scheduled) {
        fprintf(out, "  lr %s", NUM(t->lr));
        if (t->lr_warmup) fprintf(out, " warmup %" PRId64 " steps", t->lr_warmup);
        if (t->lr_stable) fprintf(out, " stable %" PRId64 " steps", t->lr_stable);
        if (t->lr_shape != PRT_LR_CONSTANT)
            fprintf(out, " %s to %s over %" PRId64 " steps", prt_lr_shape_name(t->lr_shape), NUM(t->lr_min),
                    t->lr_decay);
        fprintf(out, ";\n");
    }
    if (t->ckpt_dir) {
        fprintf(out, "  checkpoint");
        if (t->ckpt_every) fprintf(out, " every %" PRId64 " steps", t->ckpt_every);
        if (t->ckpt_keep) fprintf(out, " keep %" PRId64, t->ckpt_keep);
        fprintf(out, ";\n");
    }
    fprintf(out, "  steps %" PRId64 ";\n  seed %" PRIu64 ";\n}\n", t->steps, t->seed);
}

static void write_layout(const Plan *p, FILE *out)
{
    const Layout *l = &p->layout;
    const Mesh *mesh = &p->mesh;
    fprintf(out, "mesh {");
    for (int a = 0; a < mesh->naxes; a++) fprintf(out, " %s %d;", mesh->axes[a].name, mesh->axes[a].size);
    fprintf(out, " }\nlayout {\n");
    for (int d = 0; d < DIM_COUNT; d++) {
        int a = l->dim_axis[d];
        if (a < 0 || d == DIM_LAYERS) continue;
        if (d == DIM_BATCH && l->batch_parts) { /* `batch -> dp ep;` */
            fprintf(out, "  batch ->");
            for (int b = 0; b < mesh->naxes; b++)
                if (l->batch_parts >> b & 1) fprintf(out, " %s", mesh->axes[b].name);
            fprintf(out, ";\n");
            continue;
        }
        fprintf(out, "  %s -> %s;\n", dim_names[d], mesh->axes[a].name);
    }
    if (l->pp_axis >= 0) {
        fprintf(out, "  layers -> %s schedule %s", mesh->axes[l->pp_axis].name, sched_w[l->schedule]);
        if (l->schedule == SCHED_INTERLEAVED) fprintf(out, " %d", l->virtual_stages);
        fprintf(out, ";\n");
        if (l->balance == BALANCE_AUTO) fprintf(out, "  balance auto;\n");
        int last = l->stages - 1;
        for (int s = 0; s < l->stages; s++) {
            int embed = p->model.has_embed && l->embed_stage == s && s != 0, head = p->model.has_head && l->head_stage == s && s != last;
            if (!l->uneven && !embed && !head) continue;
            fprintf(out, "  stage %d {", s);
            if (l->uneven) {
                fprintf(out, " layers");
                for (int c = 0; c < l->virtual_stages; c++) {
                    int v = plan_chunk(l, s, c);
                    fprintf(out, " %d..%d", l->chunk_first[v], l->chunk_first[v] + l->chunk_layers[v] - 1);
                }
                fprintf(out, ";");
            }
            if (embed) fprintf(out, " embed;");
            if (head) fprintf(out, " head;");
            fprintf(out, " }\n");
        }
    }
    if (l->sp_axis >= 0) fprintf(out, "  sequence_parallel over %s;\n", mesh->axes[l->sp_axis].name);
    if (l->zero_stage > 0) { /* a derived axis: its parts, `over dp cp` */
        fprintf(out, "  zero %d over", l->zero_stage);
        unsigned parts = l->zero_axis < mesh->naxes ? 1u << l->zero_axis : mesh->axes[l->zero_axis].parts;
        for (int a = 0; a < mesh->naxes; a++)
            if (parts >> a & 1) fprintf(out, " %s", mesh->axes[a].name);
        fprintf(out, ";\n");
    }
    if (l->recompute != RECOMPUTE_NONE) fprintf(out, "  recompute %s;\n", recompute_names[l->recompute]);
    if (l->grad_overlap_off) fprintf(out, "  grad_overlap off;\n");
    if (l->tp_overlap_off) fprintf(out, "  tp_overlap off;\n");
    if (l->pipeline_scatter) fprintf(out, "  pipeline_scatter on;\n");
    if (l->cp_comm == CP_COMM_RING) fprintf(out, "  cp_comm ring;\n");
    if (l->cp_balanced) fprintf(out, "  cp_split balanced;\n");
    fprintf(out, "}\n");
}

void plan_write_par(const Plan *p, const char *comment, FILE *out)
{
    if (comment && *comment) fprintf(out, "# %s\n", comment);
    write_cluster(p, out);
    write_model(p, out);
    write_train(p, out);
    write_layout(p, out);
}
