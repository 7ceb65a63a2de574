/*
 * check_sections.c — one reader per section: cluster, model, train, mesh,
 * layout.
 *
 * Each reader takes its section's statements and fills its part of the Plan:
 * names, units, ranges, duplicates, missing items, each reported where it is
 * written.  It records in Check which values it accepted, so that the cross
 * checks (check_cross.c) only look at values that were read, and one mistake
 * gives one error.
 */
#include "check.h"

/* ------------------------------------------------------------ cluster */

#define RESERVE_HINT "the bytes of each GPU that are not the plan's (CUDA context, NCCL buffers, fragmentation): " \
                     "e.g. `reserve 4 GiB;`, or `reserve 0 B;` where ranks run on CPUs"

/* `reserve SIZE;`: a memory size, 0 or more.  Its unit is checked here so
 * that a missing or wrong one is told what the reserve is. */
static int check_reserve(Check *c, const Stmt *st, const Value *v, double *out)
{
    if (v->kind == VAL_NUMBER && !v->unit) {
        diag_error(v->loc, RESERVE_HINT, "`reserve` needs a unit: `%s` is a memory size", v->num.text);
        return 0;
    }
    const UnitInfo *u = v->kind == VAL_NUMBER ? ast_unit_find(v->unit, UNIT_MEMORY) : NULL;
    if (u && u->kind != UNIT_MEMORY) {
        diag_error(v->loc, RESERVE_HINT, "`reserve` takes a memory size such as `4 GiB`, got a %s `%s`",
                   unit_kind_names[u->kind], v->unit);
        return 0;
    }
    return check_read_quantity(c, st, v, UNIT_MEMORY, 1, out);
}

/* The reserve against the memory, both as written in the `gpu` block. */
static void check_reserve_below_memory(Check *c, const Cluster *cl, const Stmt *memory, const Stmt *reserve)
{
    if (cl->gpu_reserve < cl->gpu_memory) return;
    diag_error(reserve->values[0].loc, RESERVE_HINT, "`reserve %s` leaves nothing of the GPU's `memory %s` for the plan",
               check_value_text(c, &reserve->values[0]), check_value_text(c, &memory->values[0]));
}

static void check_gpu(Check *c, const Stmt *gpu, int *have)
{
    Cluster *cl = &c->plan->cluster;
    const Stmt *seen[GPU_COUNT] = {0};
    for (int i = 0; i < gpu->body.count; i++) {
        const Stmt *st = gpu->body.items[i];
        int k = check_word_index(st->key, GPU_names, GPU_COUNT);
        if (k < 0) {
            int guess = check_unknown_key(c, st, "`gpu`", GPU_names, GPU_COUNT);
            if (guess >= 0 && !have[guess]) have[guess] = -1; /* not "missing" too */
            continue;
        }
        if (!check_first_of(&seen[k], st, "`gpu`")) continue;
        if (!check_shape(c, st, 1, 1, BODY_NO, GPU_usage[k])) {
            have[k] = -1; /* given but wrong: not "missing" */
            continue;
        }
        const Value *v = &st->values[0];
        switch (k) {
        case GPU_MEMORY:
            if (check_read_quantity(c, st, v, UNIT_MEMORY, 0, &cl->gpu_memory)) have[k] = 1;
            cl->memory_loc = check_stmt_span(st);
            break;
        case GPU_BF16: have[k] = check_read_quantity(c, st, v, UNIT_COMPUTE, 0, &cl->flops_bf16); break;
        case GPU_FP32: have[k] = check_read_quantity(c, st, v, UNIT_COMPUTE, 0, &cl->flops_fp32); break;
        case GPU_HBM: have[k] = check_read_quantity(c, st, v, UNIT_BANDWIDTH, 0, &cl->hbm_bandwidth); break;
        case GPU_RESERVE:
            have[k] = check_reserve(c, st, v, &cl->gpu_reserve);
            cl->reserve_set = have[k];
            cl->reserve_loc = v->loc;
            break;
        }
        if (!have[k]) have[k] = -1; /* given but wrong: not "missing" */
    }
    if (have[GPU_MEMORY] == 1 && have[GPU_RESERVE] == 1)
        check_reserve_below_memory(c, cl, seen[GPU_MEMORY], seen[GPU_RESERVE]);
}

/* `efficiency NAME;`, `efficiency NAME { overrides }` or `efficiency { overrides }`
 * (from the generic defaults): what share of each peak the cost model uses. */
static void check_efficiency(Check *c, const Stmt *st)
{
    Efficiency *eff = &c->plan->cluster.eff;
    if (!check_shape(c, st, st->has_body ? 0 : 1, 1, st->has_body ? BODY_YES : BODY_NO, CLUSTER_usage[CL_EFFICIENCY]))
        return;
    if (st->nvalues == 1) {
        int k = check_read_word(c, "efficiency set", &st->values[0], plan_efficiency_names, plan_efficiency_count);
        if (k < 0) return;
        plan_efficiency_defaults(plan_efficiency_names[k], eff);
    } else {
        eff->name = "the plan's"; /* every value not given stays generic */
    }
    eff->loc = check_stmt_span(st);
    const Stmt *seen[EFF_COUNT] = {0};
    for (int i = 0; i < st->body.count; i++) {
        const Stmt *e = st->body.items[i];
        int k = check_word_index(e->key, EFF_names, EFF_COUNT);
        if (k < 0) {
            check_unknown_key(c, e, "`efficiency`", EFF_names, EFF_COUNT);
            continue;
        }
        if (!check_first_of(&seen[k], e, "`efficiency`")) continue;
        if (k == EF_HALF_INTRA || k == EF_HALF_INTER) {
            if (check_shape(c, e, 1, 1, BODY_NO, EFF_usage[k]))
                check_read_quantity(c, e, &e->values[0], UNIT_MEMORY, 1, &eff->half_bytes[k == EF_HALF_INTER]);
            continue;
        }
        if (k == EF_OVERLAP) { /* kept as written: explain prints this very number */
            if (check_shape(c, e, 1, 1, BODY_NO, EFF_usage[k]) &&
                check_read_real(c, e->key, &e->values[0], 0, 0, 1, 0, &eff->overlap))
                eff->overlap_set = 1;
            continue;
        }
        /* stream16: one share for every class, or one per class */
        int n = k == EF_GEMM || k == EF_GEMM16 ? PARC_GEMM_CLASSES
                : k == EF_STREAM16 && e->nvalues > 1 ? PARC_STREAM16_KINDS : 1;
        if (!check_shape(c, e, n, n, BODY_NO, EFF_usage[k])) continue;
        double *dst[EFF_COUNT] = {[EF_GEMM] = eff->gemm,          [EF_ATTENTION] = &eff->attention,
                                  [EF_HBM] = &eff->hbm,           [EF_ACTIVATION] = &eff->activation,
                                  [EF_INTRA] = &eff->bus[0],      [EF_INTER] = &eff->bus[1],
                                  [EF_NORM] = &eff->norm,         [EF_SOFTMAX] = &eff->softmax,
                                  [EF_SCORES] = &eff->scores,     [EF_TILES] = &eff->tiles,
                                  [EF_OPTIMIZER] = &eff->optimizer, [EF_STREAM16] = eff->stream16,
                                  [EF_GEMM16] = eff->gemm16};
        for (int j = 0; j < n; j++) {
            const char *what = n == 1 ? e->key
                               : k == EF_STREAM16 ? arena_printf(c->arena, "%s %s", e->key, stream16_names[j])
                                                  : arena_printf(c->arena, "%s %s", e->key, gemm_class_names[j]);
            check_read_real(c, what, &e->values[j], 0, 1, 1, 0, &dst[k][j]);
        }
        if (k == EF_STREAM16 && n == 1)
            for (int j = 1; j < PARC_STREAM16_KINDS; j++) eff->stream16[j] = eff->stream16[0];
    }
}

void check_cluster(Check *c, const Stmt *sec)
{
    Cluster *cl = &c->plan->cluster;
    cl->loc = sec->key_loc;
    const Stmt *seen[CLUSTER_COUNT] = {0}, *suggested[CLUSTER_COUNT] = {0};
    const Stmt *links[2] = {0};
    int gpu_have[GPU_COUNT] = {0};
    for (int i = 0; i < sec->body.count; i++) {
        const Stmt *st = sec->body.items[i];
        int k = check_word_index(st->key, CLUSTER_names, CLUSTER_COUNT);
        if (k < 0) {
            int guess = check_unknown_key(c, st, "`cluster`", CLUSTER_names, CLUSTER_COUNT);
            if (guess >= 0 && guess != CL_LINK && guess != CL_GPU) suggested[guess] = st;
            continue;
        }
        if (k != CL_LINK && !check_first_of(&seen[k], st, "`cluster`")) continue;
        int64_t n;
        switch (k) {
        case CL_EFFICIENCY: check_efficiency(c, st); break;
        case CL_CALIBRATED:
            if (!check_shape(c, st, 1, 1, BODY_NO, CLUSTER_usage[k])) break;
            if (st->values[0].kind != VAL_STRING || !*st->values[0].text)
                diag_error(st->values[0].loc, arena_printf(c->arena, "e.g. `%s`", CLUSTER_usage[k]),
                           "`calibrated` names the machine in quotes, got `%s`", check_value_text(c, &st->values[0]));
            else
                cl->calibrated = st->values[0].text;
            break;
        case CL_NODES:
            if (check_read_count_stmt(c, st, 1, 1 << 20, &n, CLUSTER_usage[k])) cl->nodes = (int)n, c->have_nodes = 1;
            break;
        case CL_GPN:
            if (check_read_count_stmt(c, st, 1, 1 << 16, &n, CLUSTER_usage[k]))
                cl->gpus_per_node = (int)n, c->have_gpn = 1;
            break;
        case CL_GPU:
            if (check_shape(c, st, 0, 0, BODY_YES, CLUSTER_usage[k])) check_gpu(c, st, gpu_have);
            else gpu_have[GPU_MEMORY] = gpu_have[GPU_BF16] = gpu_have[GPU_HBM] = -1;
            break;
        case CL_LINK: {
            seen[k] = st;
            if (!check_shape(c, st, 3, 3, BODY_NO, "link intra 450 GB/s 2 us;` or `link inter 50 GB/s 5 us;")) break;
            int which = check_read_word(c, "link", &st->values[0], link_words, 2);
            if (which < 0) break;
            if (links[which]) {
                diag_error(st->key_loc, NULL, "duplicate `link %s`", link_words[which]);
                diag_note(links[which]->key_loc, NULL, "`link %s` was first given here", link_words[which]);
                break;
            }
            links[which] = st;
            double *bw = which == 0 ? &cl->intra_bw : &cl->inter_bw;
            double *lat = which == 0 ? &cl->intra_latency : &cl->inter_latency;
            check_read_quantity(c, st, &st->values[1], UNIT_BANDWIDTH, 0, bw);
            check_read_quantity(c, st, &st->values[2], UNIT_TIME, 1, lat);
            break;
        }
        }
    }
    /* Missing items, named together; a misspelled key was reported already. */
    for (int k = 0; k < CLUSTER_COUNT; k++)
        if (!seen[k]) seen[k] = suggested[k];
    const char *missing = "";
    if (!seen[CL_NODES]) missing = check_add_missing(c, missing, "`nodes`");
    if (!seen[CL_GPN]) missing = check_add_missing(c, missing, "`gpus_per_node`");
    if (!seen[CL_GPU]) {
        missing = check_add_missing(c, missing, "`gpu { memory ...; bf16 ...; hbm ...; }`");
    } else {
        if (!gpu_have[GPU_MEMORY]) missing = check_add_missing(c, missing, "`gpu memory`");
        if (!gpu_have[GPU_BF16]) missing = check_add_missing(c, missing, "`gpu bf16`");
        if (!gpu_have[GPU_HBM]) missing = check_add_missing(c, missing, "`gpu hbm`");
    }
    /* the default reserve, once `calibrated` is known wherever it stands */
    if (gpu_have[GPU_MEMORY] == 1 && !cl->reserve_set) cl->gpu_reserve = plan_default_reserve(cl);
    /* A link is needed only where there is something to link. */
    if (!links[0] && !(c->have_gpn && cl->gpus_per_node == 1))
        missing = check_add_missing(c, missing, "`link intra`");
    if (!links[1] && !(c->have_nodes && cl->nodes == 1))
        missing = check_add_missing(c, missing, "`link inter`");
    if (*missing)
        diag_error(sec->key_loc,
                   "a cluster needs nodes, gpus_per_node, gpu { memory; bf16; hbm; } and its links "
                   "(`link intra BW LATENCY;` inside a node, `link inter ...;` between nodes)",
                   "`cluster` is missing %s", missing);
    if (c->have_nodes && c->have_gpn && (int64_t)cl->nodes * cl->gpus_per_node > MAX_WORLD) {
        diag_error(sec->key_loc, NULL, "the cluster has %" PRId64 " GPUs; parc handles at most %d",
                   (int64_t)cl->nodes * cl->gpus_per_node, MAX_WORLD);
        c->have_nodes = 0;
    }
}

/* ------------------------------------------------------------ model */

/* A positive count of a `mlp moe` option; a value below 1 is an error with `hint`. */
static void check_moe_positive(Check *c, const Stmt *named, const Value *v, int64_t max, const char *hint,
                               int64_t *out)
{
    int64_t n;
    if (!check_read_count(c, named, v, INT64_MIN, max, &n)) return;
    if (n < 1) {
        diag_error(v->loc, hint, "`%s` must be at least 1, got %s", named->key, check_value_text(c, v));
        return;
    }
    *out = n;
}

/* `mlp moe [ACT] experts E top K [expert_ffn N] [router softmax|sigmoid]
 * [aux_loss C] [z_loss C] [shared S] [shared_ffn N] [imbalance F] [capacity F] [every N];`: fills b->moe (and
 * b->mlp when ACT is given).  expert_ffn stays 0 when not given, and so does
 * shared_ffn: check_moe_plan takes the model's ffn and S x expert_ffn. */
static void check_moe(Check *c, const Stmt *s, BlockSpec *b)
{
    static const char *const options[] = {"experts", "top",        "expert_ffn", "router",   "aux_loss", "z_loss",
                                          "shared",  "shared_ffn", "imbalance",  "capacity", "every"};
    enum {
        MO_EXPERTS, MO_TOP, MO_FFN, MO_ROUTER, MO_AUX, MO_Z, MO_SHARED, MO_SHARED_FFN, MO_IMBALANCE, MO_CAPACITY,
        MO_EVERY, MO_COUNT
    };
    const char *usage = "mlp moe experts 8 top 2;";
    MoeSpec *m = &b->moe;
    *m = (MoeSpec){.router = ROUTER_SOFTMAX, .aux_coef = 0.01, .imbalance = 1.0, .every = 1, .loc = check_stmt_span(s)};
    const Value *seen[MO_COUNT] = {0};
    int i = 1, act;
    if (i < s->nvalues && s->values[i].kind == VAL_WORD &&
        (act = check_word_index(s->values[i].text, mlp_words, COUNT_OF(mlp_words))) >= 0) {
        b->mlp = act;
        i++;
    }
    for (; i < s->nvalues; i += 2) {
        const Value *v = &s->values[i];
        int k = v->kind == VAL_WORD ? check_word_index(v->text, options, MO_COUNT) : -1;
        if (k < 0) {
            const char *hint = v->kind == VAL_WORD ? check_did_you_mean(c, v->text, options, MO_COUNT) : NULL;
            diag_error(v->loc, hint ? hint : arena_printf(c->arena, "`mlp moe` takes %s",
                                                          check_word_list(c, options, MO_COUNT)),
                       "unknown `mlp moe` option `%s`", check_value_text(c, v));
            m->experts = 0;
            return;
        }
        if (seen[k]) {
            diag_error(v->loc, "each option appears once; remove one of them", "duplicate `%s` in `mlp moe`",
                       options[k]);
            m->experts = 0;
            return;
        }
        seen[k] = v;
        if (i + 1 >= s->nvalues) {
            diag_error(v->loc, arena_printf(c->arena, "write it like `%s`", usage), "`%s` needs a value",
                       options[k]);
            m->experts = 0;
            return;
        }
        const Value *val = &s->values[i + 1];
        Stmt named = *s;
        named.key = options[k];
        int w;
        switch (k) {
        case MO_EXPERTS: check_read_count(c, &named, val, 2, 1 << 16, &m->experts); break;
        case MO_TOP: check_read_count(c, &named, val, 1, 1 << 16, &m->topk); break;
        case MO_FFN: check_read_count(c, &named, val, 1, INT64_C(1) << 40, &m->expert_ffn); break;
        case MO_ROUTER:
            if ((w = check_read_word(c, "router", val, router_words, COUNT_OF(router_words))) >= 0) m->router = w;
            break;
        case MO_AUX:
            check_read_real_hint(c, "aux_loss", val, 0, 0, 1e3, 0, "a coefficient such as `aux_loss 0.01`",
                                 &m->aux_coef);
            break;
        case MO_Z:
            check_read_real_hint(c, "z_loss", val, 0, 0, 1e3, 0, "a coefficient such as `z_loss 0.001`",
                                 &m->z_coef);
            break;
        case MO_SHARED:
            check_moe_positive(c, &named, val, 1 << 16, "leave `shared` out for no shared experts", &m->shared);
            break;
        case MO_IMBALANCE:
            check_read_real_hint(c, "imbalance", val, 1, 0, 1e3, 0,
                                 "the busiest rank's routed tokens over the mean, such as `imbalance 1.2`",
                                 &m->imbalance);
            break;
        case MO_CAPACITY:
            check_read_real_hint(c, "capacity", val, 1, 0, 1e3, 0,
                                 "the rows an expert-parallel rank's buffers hold over the balanced share, such as "
                                 "`capacity 1.5`",
                                 &m->capacity);
            break;
        case MO_EVERY:
            /* the lowered block holds `every` layers: a bound keeps it a block */
            check_moe_positive(c, &named, val, 64,
                               "`every 2` makes every second layer a mixture of experts; leave it out for every layer",
                               &m->every);
            m->every_loc = val->loc;
            break;
        case MO_SHARED_FFN:
            check_moe_positive(c, &named, val, INT64_C(1) << 40,
                               "the shared experts' hidden units together, such as `shared_ffn 5632`",
                               &m->shared_ffn);
            break;
        }
    }
    if (seen[MO_SHARED_FFN] && !seen[MO_SHARED]) {
        diag_error(seen[MO_SHARED_FFN]->loc, "add `shared 1` (or the count of shared experts)",
                   "`shared_ffn` sizes the shared experts, and the mixture has none");
        m->shared_ffn = 0;
    }
    if (m->shared == 0) m->shared_ffn = 0;
    if (!seen[MO_EXPERTS] || !seen[MO_TOP]) {
        diag_error(s->key_loc, arena_printf(c->arena, "write it like `%s`", usage), "`mlp moe` needs %s",
                   !seen[MO_EXPERTS] && !seen[MO_TOP] ? "`experts` and `top`"
                   : !seen[MO_EXPERTS]                ? "`experts`"
                                                      : "`top`");
        m->experts = 0;
        return;
    }
    if (m->experts > 0 && m->topk > m->experts) {
        diag_error(seen[MO_TOP]->loc, arena_printf(c->arena, "at most `top %" PRId64 "`", m->experts),
                   "`top %" PRId64 "` routes each token to more experts than the %" PRId64 " there are", m->topk,
                   m->experts);
        m->experts = 0;
    }
    if (m->topk < 1) m->experts = 0;
}

static void check_block(Check *c, const Stmt *st)
{
    BlockSpec *b = &c->plan->model.block;
    b->loc = check_stmt_span(st);
    int ok = check_shape(c, st, 1, 1, st->has_body, "block transformer { norm rms; mlp swiglu; }");
    if (st->nvalues < 1) return;
    int kind = check_read_word(c, "block kind", &st->values[0], block_words, COUNT_OF(block_words));
    if (kind < 0 || !ok) return;
    /* Presets; `transformer` starts from the GPT-2 choices. */
    *b = (BlockSpec){.kind = BLOCK_TRANSFORMER, .norm = NORM_LAYER, .norm_eps = PARC_NORM_EPS, .mlp = MLP_GELU,
                     .bias = 1, .causal = 1, .residual = 1, .loc = b->loc};
    if (kind == 1) *b = (BlockSpec){.kind = BLOCK_MLP, .norm = NORM_LAYER, .norm_eps = PARC_NORM_EPS, .mlp = MLP_GELU,
                                    .bias = 1, .causal = 0, .residual = 1, .loc = b->loc};
    if (kind == 3) b->norm = NORM_RMS, b->mlp = MLP_SWIGLU, b->bias = 0;
    const Stmt *seen[BLOCK_COUNT] = {0};
    for (int i = 0; i < st->body.count; i++) {
        const Stmt *s = st->body.items[i];
        int k = check_word_index(s->key, BLOCK_names, BLOCK_COUNT);
        const char *where = b->kind == BLOCK_MLP ? "an `mlp` block" : "a transformer block";
        if (k < 0) {
            check_unknown_key(c, s, where, BLOCK_names, BLOCK_COUNT);
            continue;
        }
        if (b->kind == BLOCK_MLP && (k == BK_ATTENTION || k == BK_MLP)) {
            diag_error(s->key_loc, k == BK_MLP ? "an mlp block names its activation with `act gelu;`" : NULL,
                       "`%s` does not apply to an `mlp` block%s", s->key,
                       k == BK_ATTENTION ? " (it has no attention)" : "");
            continue;
        }
        if (b->kind == BLOCK_TRANSFORMER && (k == BK_ACT || k == BK_RESIDUAL)) {
            diag_error(s->key_loc, k == BK_ACT ? "a transformer block names its MLP with `mlp gelu;`" : NULL,
                       "`%s` does not apply to a transformer block%s", s->key,
                       k == BK_RESIDUAL ? " (its residuals are always there)" : "");
            continue;
        }
        if (!check_first_of(&seen[k], s, where)) continue;
        int w;
        switch (k) {
        case BK_NORM: check_norm(c, s, BLOCK_usage[k], &b->norm, &b->norm_eps); break;
        case BK_MLP:
            if (s->nvalues >= 1 && s->values[0].kind == VAL_WORD && strcmp(s->values[0].text, "moe") == 0 &&
                !s->has_body) {
                check_moe(c, s, b);
                break;
            }
            /* fall through */
        case BK_ACT:
            if ((w = check_read_word_stmt(c, s, mlp_words, COUNT_OF(mlp_words), BLOCK_usage[k])) >= 0) b->mlp = w;
            break;
        case BK_ATTENTION:
            if (!check_shape(c, s, 1, 2, BODY_NO, BLOCK_usage[k])) break;
            if ((w = check_read_word(c, "`attention` mask", &s->values[0], attention_words, 2)) >= 0) b->causal = w;
            if (s->nvalues == 2 &&
                (w = check_read_word(c, "`attention` kind", &s->values[1], attention_kind_words, 2)) >= 0)
                b->flash = w;
            break;
        case BK_BIAS:
            if ((w = check_read_word_stmt(c, s, bool_words, 2, BLOCK_usage[k])) >= 0) b->bias = w;
            break;
        case BK_RESIDUAL:
            if ((w = check_read_word_stmt(c, s, bool_words, 2, BLOCK_usage[k])) >= 0) b->residual = w;
            break;
        case BK_DROPOUT:
            if (check_shape(c, s, 1, 1, BODY_NO, BLOCK_usage[k]))
                check_read_real(c, "dropout", &s->values[0], 0, 0, 1, 1, &b->dropout);
            b->dropout_loc = check_stmt_span(s);
            break;
        }
    }
}

static void check_repeat(Check *c, const Stmt *st, int *have_block)
{
    if (!check_shape(c, st, 1, 1, BODY_YES, "repeat layers { block llama; }")) return;
    const Value *v = &st->values[0];
    if (v->kind != VAL_WORD || strcmp(v->text, "layers") != 0) {
        diag_error(v->loc, "the count is the model's `layers`: write `repeat layers { ... }`",
                   "`repeat` takes the word `layers`, got `%s`", check_value_text(c, v));
        return;
    }
    const Stmt *block = NULL;
    for (int i = 0; i < st->body.count; i++) {
        const Stmt *s = st->body.items[i];
        if (strcmp(s->key, "block") != 0) {
            static const char *const only[] = {"block"};
            check_unknown_key(c, s, "`repeat`", only, 1);
            continue;
        }
        if (!check_first_of(&block, s, "`repeat`")) continue;
        check_block(c, s);
        *have_block = 1;
    }
    if (!block)
        diag_error(st->key_loc, "write it like `repeat layers { block llama; }`", "`repeat` has no `block`");
}

/* Attention shape: head_dim * heads == hidden, kv_heads divides heads; sets
 * c->dims_ok when hidden, heads, head_dim and kv_heads agree. */
static void check_attention_shape(Check *c, const Stmt *const *seen, int have_block)
{
    Model *m = &c->plan->model;
    int attention = m->block.kind == BLOCK_TRANSFORMER;
    if (!attention && have_block == 1) {
        if (seen[MD_HEADS] || seen[MD_KV_HEADS] || seen[MD_HEAD_DIM]) {
            const Stmt *st = seen[MD_HEADS] ? seen[MD_HEADS] : seen[MD_KV_HEADS] ? seen[MD_KV_HEADS] : seen[MD_HEAD_DIM];
            diag_warning(st->key_loc, "remove it, or use a transformer block",
                         "`%s` is unused: an `mlp` block has no attention", st->key);
        }
        m->heads = m->kv_heads = m->head_dim = 0;
        c->dims_ok = c->have_model_key[MD_HIDDEN] == 1;
    } else if (c->have_model_key[MD_HIDDEN] == 1 && c->have_model_key[MD_HEADS] == 1) {
        c->dims_ok = 1;
        if (seen[MD_HEAD_DIM]) {
            if (c->have_model_key[MD_HEAD_DIM] != 1) {
                c->dims_ok = 0;
            } else if (m->heads * m->head_dim != m->hidden) {
                diag_error(check_stmt_span(seen[MD_HEAD_DIM]),
                           arena_printf(c->arena, "with hidden = %" PRId64 " and heads = %" PRId64
                                                  ", head_dim is %s",
                                        m->hidden, m->heads,
                                        m->hidden % m->heads == 0
                                            ? arena_printf(c->arena, "%" PRId64, m->hidden / m->heads)
                                            : "not a whole number"),
                           "heads × head_dim = %" PRId64 " × %" PRId64 " = %" PRId64 " must equal hidden = %" PRId64,
                           m->heads, m->head_dim, m->heads * m->head_dim, m->hidden);
                c->dims_ok = 0;
            }
        } else if (m->hidden % m->heads != 0) {
            diag_error(m->dim_loc[DIM_HEADS], check_divisor_hint(c, "heads", m->hidden, m->heads),
                       "hidden = %" PRId64 " does not divide by heads = %" PRId64, m->hidden, m->heads);
            c->dims_ok = 0;
        } else {
            m->head_dim = m->hidden / m->heads;
        }
        if (seen[MD_KV_HEADS]) {
            if (c->have_model_key[MD_KV_HEADS] != 1) {
                c->dims_ok = 0;
            } else if (m->kv_heads > m->heads || m->heads % m->kv_heads != 0) {
                diag_error(check_stmt_span(seen[MD_KV_HEADS]), check_divisor_hint(c, "kv_heads", m->heads, m->kv_heads),
                           "heads = %" PRId64 " does not divide by kv_heads = %" PRId64
                           " (each key/value head serves a whole group of query heads)",
                           m->heads, m->kv_heads);
                c->dims_ok = 0;
            }
        } else {
            m->kv_heads = m->heads;
        }
    }
}

void check_model(Check *c, const Stmt *sec)
{
    Model *m = &c->plan->model;
    m->loc = sec->key_loc;
    m->name = "model";
    if (sec->nvalues >= 1 && sec->values[0].kind == VAL_WORD) m->name = sec->values[0].text;
    check_shape(c, sec, 0, 1, BODY_YES, "model llama7b { ... }");
    if (sec->nvalues >= 1 && sec->values[0].kind != VAL_WORD)
        diag_error(sec->values[0].loc, NULL, "a model name is a word, got `%s`", check_value_text(c, &sec->values[0]));

    const Stmt *seen[MODEL_COUNT] = {0}, *suggested[MODEL_COUNT] = {0};
    int have_block = 0;
    int head = -1, loss = -1;
    for (int i = 0; i < sec->body.count; i++) {
        const Stmt *st = sec->body.items[i];
        int k = check_word_index(st->key, MODEL_names, MODEL_COUNT);
        if (k < 0) {
            if (strcmp(st->key, "block") == 0) {
                diag_error(st->key_loc, "write it like `repeat layers { block llama; }`",
                           "`block` belongs inside `repeat layers { ... }`");
                continue;
            }
            int guess = check_unknown_key(c, st, "`model`", MODEL_names, MODEL_COUNT);
            if (guess >= 0 && guess <= MD_LAYERS) suggested[guess] = st;
            continue;
        }
        if (!check_first_of(&seen[k], st, "`model`")) continue;
        int64_t n;
        Dim dim = DIM_COUNT;
        int64_t *field = NULL;
        int64_t max = MAX_DIM;
        switch (k) {
        case MD_VOCAB: dim = DIM_VOCAB, field = &m->vocab; break;
        case MD_SEQ: dim = DIM_SEQ, field = &m->seq; break;
        case MD_HIDDEN: dim = DIM_HIDDEN, field = &m->hidden; break;
        case MD_HEADS: dim = DIM_HEADS, field = &m->heads; break;
        case MD_FFN: dim = DIM_FFN, field = &m->ffn; break;
        case MD_LAYERS: dim = DIM_LAYERS, field = &m->layers, max = 1 << 20; break;
        case MD_HEAD_DIM: dim = DIM_HEAD_DIM, field = &m->head_dim; break;
        case MD_KV_HEADS: field = &m->kv_heads; break;
        case MD_EMBED: check_embed(c, st); break;
        case MD_REPEAT: check_repeat(c, st, &have_block); have_block = have_block ? 1 : -1; break;
        case MD_NORM: check_norm(c, st, MODEL_usage[k], &m->final_norm, &m->final_norm_eps); break;
        case MD_HEAD: head = check_read_word_stmt(c, st, head_words, COUNT_OF(head_words), MODEL_usage[k]); break;
        case MD_LOSS: loss = check_read_word_stmt(c, st, loss_words, COUNT_OF(loss_words), MODEL_usage[k]); break;
        }
        if (field) {
            int ok = k == MD_SEQ ? check_read_token_count_stmt(c, st, 1, max, &n, MODEL_usage[k])
                                 : check_read_count_stmt(c, st, 1, max, &n, MODEL_usage[k]);
            if (ok) {
                *field = n;
                c->have_model_key[k] = 1;
            } else {
                c->have_model_key[k] = -1;
            }
            if (dim != DIM_COUNT) m->dim_loc[dim] = check_stmt_span(st);
        }
    }
    for (int k = 0; k < MODEL_COUNT; k++)
        if (!seen[k] && suggested[k]) seen[k] = suggested[k], c->have_model_key[k] = -1;
    if (head >= 0) {
        m->has_head = head != 0;
        m->tied_head = head == 1;
    }
    if (loss >= 0) m->has_loss = loss == 1;

    /* Required items: heads only for attention, vocab only with an embedding or a head. */
    int attention = m->block.kind == BLOCK_TRANSFORMER;
    const char *missing = "";
    static const int required[] = {MD_VOCAB, MD_SEQ, MD_HIDDEN, MD_HEADS, MD_FFN, MD_LAYERS};
    for (int i = 0; i < COUNT_OF(required); i++) {
        int k = required[i];
        if (seen[k]) continue;
        if (k == MD_HEADS && !attention && have_block) continue;
        if (k == MD_VOCAB && !m->has_embed && !m->has_head && have_block) continue;
        missing = check_add_missing(c, missing, arena_printf(c->arena, "`%s`", MODEL_names[k]));
    }
    if (!seen[MD_REPEAT]) missing = check_add_missing(c, missing, "`repeat layers { block ...; }`");
    if (*missing)
        diag_error(sec->key_loc,
                   attention ? "a transformer needs vocab, seq, hidden, heads, ffn, layers and a repeated block"
                             : NULL,
                   "`model %s` is missing %s", m->name, missing);

    check_attention_shape(c, seen, have_block);
    check_positions_against_model(c);

    /* Embedding, head, loss. */
    if (seen[MD_HEAD] && m->tied_head && !m->has_embed)
        diag_error(check_stmt_span(seen[MD_HEAD]), "add `embed;`, or write `head untied;`",
                   "a tied head shares the embedding matrix, but the model has no `embed`");
    if (seen[MD_LOSS] && m->has_loss && !m->has_head)
        diag_error(check_stmt_span(seen[MD_LOSS]), "add `head untied;` (or `head tied;`)",
                   "`loss cross_entropy` needs a head that produces the vocab logits");
}

/* ------------------------------------------------------------ train */

static void check_optimizer(Check *c, const Stmt *st)
{
    Train *t = &c->plan->train;
    if (!check_shape(c, st, 1, 64, BODY_NO, "optimizer adamw lr 3e-4 beta1 0.9 beta2 0.95;")) return;
    int kind = check_read_word(c, "optimizer", &st->values[0], optimizer_words, COUNT_OF(optimizer_words));
    if (kind < 0) return;
    t->optimizer = kind;
    t->beta1 = 0.9;
    t->beta2 = 0.999;
    t->eps = 1e-8;
    t->weight_decay = kind == OPT_ADAMW ? 0.01 : 0;
    t->momentum = 0;
    int given[OP_COUNT] = {0};
    for (int i = 1; i < st->nvalues; i += 2) {
        const Value *name = &st->values[i];
        int p = name->kind == VAL_WORD ? check_word_index(name->text, opt_param_names, OP_COUNT) : -1;
        if (p < 0) {
            if (name->kind == VAL_WORD)
                diag_error(name->loc, check_did_you_mean(c, name->text, opt_param_names, OP_COUNT),
                           "unknown optimizer setting `%s`", name->text);
            else
                diag_error(name->loc, "settings come in pairs: `lr 3e-4 beta1 0.9 ...`",
                           "expected an optimizer setting name, got `%s`", check_value_text(c, name));
            continue;
        }
        int applies = kind == OPT_SGD ? (p == OP_LR || p == OP_MOMENTUM || p == OP_WEIGHT_DECAY) : p != OP_MOMENTUM;
        if (!applies) {
            diag_error(name->loc,
                       kind == OPT_SGD ? "sgd takes `lr`, `momentum` and `weight_decay`"
                                       : "adam and adamw take `lr`, `beta1`, `beta2`, `eps` and `weight_decay`",
                       "`%s` does not apply to %s", name->text, optimizer_words[kind]);
            if (i + 1 < st->nvalues && st->values[i + 1].kind == VAL_NUMBER) continue;
            i--;
            continue;
        }
        if (given[p]) {
            diag_error(name->loc, NULL, "duplicate optimizer setting `%s`", name->text);
            continue;
        }
        given[p] = 1;
        if (i + 1 >= st->nvalues) {
            diag_error(name->loc, NULL, "optimizer setting `%s` needs a value", name->text);
            break;
        }
        const Value *v = &st->values[i + 1];
        switch (p) {
        case OP_LR: check_read_real(c, "lr", v, 0, 1, 10, 0, &t->lr); break;
        case OP_BETA1: check_read_real(c, "beta1", v, 0, 0, 1, 1, &t->beta1); break;
        case OP_BETA2: check_read_real(c, "beta2", v, 0, 0, 1, 1, &t->beta2); break;
        case OP_EPS: check_read_real(c, "eps", v, 0, 1, 1, 0, &t->eps); break;
        case OP_WEIGHT_DECAY:
            c->opt_weight_decay_loc = name->loc;
            check_read_real(c, "weight_decay", v, 0, 0, 10, 0, &t->weight_decay);
            break;
        case OP_MOMENTUM: check_read_real(c, "momentum", v, 0, 0, 1, 1, &t->momentum); break;
        }
    }
    if (given[OP_LR] && c->lr_stmt)
        diag_error(check_stmt_span(c->lr_stmt), "drop `lr` from the optimizer, or this statement",
                   "the learning rate is given twice: here and in `optimizer`");
    if (!given[OP_LR] && !c->lr_stmt)
        diag_error(st->values[0].loc, arena_printf(c->arena, "write it like `optimizer %s lr 3e-4;`",
                                                   optimizer_words[kind]),
                   "the optimizer needs a learning rate `lr`");
}

/* `precision P [master fp32] [grads fp32]`: the pairs in either order, each once. */
static void check_precision(Check *c, const Stmt *st)
{
    Train *t = &c->plan->train;
    t->precision_loc = check_stmt_span(st);
    if (!check_shape(c, st, 1, 7, BODY_NO, "precision bf16 master fp32;")) return; /* a pair given twice is named below */
    int p = check_read_word(c, "precision", &st->values[0], precision_words, COUNT_OF(precision_words));
    if (p < 0) return;
    t->precision = p;
    t->master_fp32 = t->grads_fp32 = 0;
    for (int i = 1; i < st->nvalues; i += 2) {
        const Value *m = &st->values[i];
        int is_master = m->kind == VAL_WORD && strcmp(m->text, "master") == 0;
        int is_grads = m->kind == VAL_WORD && strcmp(m->text, "grads") == 0;
        if (!is_master && !is_grads) {
            diag_error(m->loc, "write it like `precision bf16 master fp32;` or `precision bf16 master fp32 grads fp32;`",
                       "unexpected `%s` after `precision %s`", check_value_text(c, m), precision_words[p]);
            return;
        }
        if (i + 1 >= st->nvalues || st->values[i + 1].kind != VAL_WORD || strcmp(st->values[i + 1].text, "fp32") != 0) {
            diag_error(i + 1 >= st->nvalues ? m->loc : st->values[i + 1].loc,
                       is_master ? "write `master fp32`" : "write `grads fp32`",
                       is_master ? "master weights are kept in fp32" : "gradients are accumulated in fp32 or in the "
                                                                       "weights' precision (the default)");
            return;
        }
        SrcLoc span = check_loc_join(m->loc, st->values[i + 1].loc);
        if ((is_master && t->master_fp32) || (is_grads && t->grads_fp32)) {
            diag_error(span, "write it once", "`%s fp32` is given twice", m->text);
            return;
        }
        if (p == PREC_FP32) {
            diag_error(span, "write `precision fp32;` or `precision bf16 master fp32 grads fp32;`",
                       is_master ? "fp32 weights are their own master copy" : "fp32 weights have fp32 gradients");
            return;
        }
        if (is_master) t->master_fp32 = 1;
        else t->grads_fp32 = 1;
    }
}

void check_train(Check *c, const Stmt *sec)
{
    Train *t = &c->plan->train;
    t->loc = sec->key_loc;
    t->steps = 10;
    t->seed = 1234;
    check_shape(c, sec, 0, 0, BODY_YES, "train { batch 8; micro_batch 2; ... }");
    const Stmt *seen[TRAIN_COUNT] = {0}, *suggested[TRAIN_COUNT] = {0};
    for (int i = 0; i < sec->body.count; i++) /* the optimizer's lr is optional with a schedule */
        if (!c->lr_stmt && strcmp(sec->body.items[i]->key, "lr") == 0) c->lr_stmt = sec->body.items[i];
    for (int i = 0; i < sec->body.count; i++) {
        const Stmt *st = sec->body.items[i];
        int k = check_word_index(st->key, TRAIN_names, TRAIN_COUNT);
        if (k < 0) {
            int guess = check_unknown_key(c, st, "`train`", TRAIN_names, TRAIN_COUNT);
            if (guess >= 0) suggested[guess] = st;
            continue;
        }
        if (!check_first_of(&seen[k], st, "`train`")) continue;
        int64_t n;
        switch (k) {
        case TR_BATCH:
            t->batch_loc = check_stmt_span(st);
            if (check_read_token_count_stmt(c, st, 1, MAX_COUNT, &n, TRAIN_usage[k])) t->batch = n, c->have_batch = 1;
            break;
        case TR_MICRO_BATCH:
            t->micro_batch_loc = check_stmt_span(st);
            if (check_read_token_count_stmt(c, st, 1, MAX_COUNT, &n, TRAIN_usage[k]))
                t->micro_batch = n, c->have_micro_batch = 1;
            break;
        case TR_MICRO_BATCHES:
            t->micro_batches_loc = check_stmt_span(st);
            if (check_read_token_count_stmt(c, st, 1, MAX_COUNT, &n, TRAIN_usage[k]))
                t->micro_batches = n, c->have_micro_batches = 1;
            else
                c->have_micro_batches = -1;
            break;
        case TR_SEQ:
            c->train_seq_loc = check_stmt_span(st);
            if (check_read_count_stmt(c, st, 1, MAX_DIM, &n, TRAIN_usage[k])) {
                if (!c->plan->model.seq) c->plan->model.seq = n;
                else if (c->plan->model.seq != n)
                    diag_error(c->train_seq_loc, "give `seq` in one place, or the same value in both",
                               "train seq = %" PRId64 " disagrees with the model's seq = %" PRId64, n,
                               c->plan->model.seq);
            }
            break;
        case TR_PRECISION: check_precision(c, st); break;
        case TR_OPTIMIZER: check_optimizer(c, st); break;
        case TR_CHECKPOINT: check_checkpoint(c, st); break;
        case TR_LR: check_lr_schedule(c, st); break;
        case TR_WEIGHT_DECAY:
        case TR_CLIP: break; /* read after the optimizer, below */
        case TR_EVAL: check_eval(c, st); break;
        case TR_STEPS:
            if (check_read_count_stmt(c, st, 1, MAX_COUNT, &n, TRAIN_usage[k])) t->steps = n;
            break;
        case TR_SEED:
            if (check_read_count_stmt(c, st, 0, INT64_MAX, &n, TRAIN_usage[k])) t->seed = (uint64_t)n;
            break;
        }
    }
    if (seen[TR_WEIGHT_DECAY]) check_weight_decay(c, seen[TR_WEIGHT_DECAY]);
    if (seen[TR_CLIP]) check_clip(c, seen[TR_CLIP]);
    for (int k = 0; k < TRAIN_COUNT; k++)
        if (!seen[k] && suggested[k]) seen[k] = suggested[k];
    if (suggested[TR_MICRO_BATCHES] && !c->have_micro_batches) c->have_micro_batches = -1;
    const char *missing = "";
    if (!seen[TR_BATCH]) missing = check_add_missing(c, missing, "`batch`");
    if (!seen[TR_MICRO_BATCH]) missing = check_add_missing(c, missing, "`micro_batch`");
    if (!seen[TR_PRECISION]) missing = check_add_missing(c, missing, "`precision`");
    if (!seen[TR_OPTIMIZER]) missing = check_add_missing(c, missing, "`optimizer`");
    if (*missing)
        diag_error(sec->key_loc, "e.g. `batch 8; micro_batch 2; precision bf16 master fp32; optimizer adamw lr 3e-4;`",
                   "`train` is missing %s", missing);
}

/* ------------------------------------------------------------ mesh */

void check_mesh(Check *c, const Stmt *sec)
{
    Mesh *mesh = &c->plan->mesh;
    mesh->loc = sec->key_loc;
    check_shape(c, sec, 0, 0, BODY_YES, "mesh { dp 2; tp 8; }");
    c->mesh_ok = 1;
    const Stmt *axis_stmt[PARC_MAX_AXES] = {0};
    for (int i = 0; i < sec->body.count; i++) {
        const Stmt *st = sec->body.items[i];
        int dup = -1;
        for (int a = 0; a < mesh->naxes; a++)
            if (strcmp(mesh->axes[a].name, st->key) == 0) dup = a;
        if (dup >= 0) {
            diag_error(st->key_loc, "each axis is named once", "duplicate mesh axis `%s`", st->key);
            diag_note(axis_stmt[dup]->key_loc, NULL, "`%s` was first given here", st->key);
            c->mesh_ok = 0;
            continue;
        }
        if (mesh->naxes == PARC_MAX_AXES) {
            diag_error(st->key_loc, NULL, "a mesh has at most %d axes", PARC_MAX_AXES);
            c->mesh_ok = 0;
            break;
        }
        int64_t n = 1;
        if (!check_read_count_stmt(c, st, 1, MAX_WORLD, &n, "dp 2;")) c->mesh_ok = 0, n = 1;
        axis_stmt[mesh->naxes] = st;
        mesh->axes[mesh->naxes++] = (MeshAxis){.name = st->key, .size = (int)n, .loc = check_stmt_span(st)};
    }
    if (mesh->naxes == 0) {
        diag_error(sec->key_loc, "a single GPU is `mesh { dp 1; }`", "the mesh has no axes");
        c->mesh_ok = 0;
    }
    int64_t world = 1;
    for (int a = 0; a < mesh->naxes; a++) {
        world *= mesh->axes[a].size;
        if (world > MAX_WORLD) {
            diag_error(sec->key_loc, NULL, "the mesh has more than %d ranks", MAX_WORLD);
            c->mesh_ok = 0;
            world = 1;
            break;
        }
    }
    mesh->world = (int)world;
}

static int mesh_axis(const Plan *plan, const char *name)
{
    for (int a = 0; a < plan->mesh.naxes; a++)
        if (strcmp(plan->mesh.axes[a].name, name) == 0) return a;
    return -1;
}

/* The axis named by v, or -1 after reporting. */
static int read_axis(Check *c, const Value *v)
{
    const Mesh *mesh = &c->plan->mesh;
    if (mesh->naxes == 0) return -1; /* no mesh: reported once, not per rule */
    if (v->kind != VAL_WORD) {
        diag_error(v->loc, NULL, "expected a mesh axis name, got `%s`", check_value_text(c, v));
        return -1;
    }
    int a = mesh_axis(c->plan, v->text);
    if (a >= 0) return a;
    const char *names[PARC_MAX_AXES];
    for (int i = 0; i < mesh->naxes; i++) names[i] = mesh->axes[i].name;
    const char *best = diag_closest(v->text, names, mesh->naxes);
    const char *hint = best ? arena_printf(c->arena, "did you mean `%s`?", best)
                            : mesh->naxes ? arena_printf(c->arena, "the mesh axes are %s",
                                                         check_word_list(c, names, mesh->naxes))
                                          : "declare it in `mesh { ... }`";
    diag_error(v->loc, hint, "unknown mesh axis `%s`", v->text);
    return -1;
}

/* ------------------------------------------------------------ layout */

/* `schedule KIND [N]` at values[i..]; returns 1 when read. */
static int read_schedule(Check *c, const Stmt *st, int i)
{
    Layout *l = &c->plan->layout;
    const Value *kw = &st->values[i];
    if (kw->kind != VAL_WORD || strcmp(kw->text, "schedule") != 0) {
        diag_error(kw->loc, "write it like `layers -> pp schedule 1f1b;`", "unexpected `%s` in a layout rule",
                   check_value_text(c, kw));
        return 0;
    }
    if (i + 1 >= st->nvalues) {
        diag_error(kw->loc, "gpipe, 1f1b or interleaved N", "`schedule` needs a kind");
        return 0;
    }
    int kind = check_read_word(c, "schedule", &st->values[i + 1], schedule_words + 1, COUNT_OF(schedule_words) - 1);
    if (kind < 0) return 0;
    kind += 1;
    int n_after = st->nvalues - (i + 2);
    if (kind == SCHED_INTERLEAVED) {
        if (n_after != 1) {
            diag_error(st->values[i + 1].loc, "write it like `schedule interleaved 2;` (2 chunks per pipeline rank)",
                       "`interleaved` needs the number of virtual stages");
            return 0;
        }
        int64_t v;
        Stmt fake = *st;
        fake.key = "interleaved";
        if (!check_read_count(c, &fake, &st->values[i + 2], 2, 64, &v)) return 0;
        c->interleave = (int)v;
        c->interleave_loc = st->values[i + 2].loc;
    } else if (n_after > 0) {
        diag_error(st->values[i + 2].loc, NULL, "unexpected `%s` after `%s`", check_value_text(c, &st->values[i + 2]),
                   schedule_words[kind]);
        return 0;
    }
    l->schedule = kind;
    l->schedule_loc = check_loc_join(kw->loc, st->values[st->nvalues - 1].loc);
    return 1;
}

static void check_rule(Check *c, const Stmt *st)
{
    Layout *l = &c->plan->layout;
    int d = check_word_index(st->key, mappable_names, COUNT_OF(mappable_names));
    if (d < 0) {
        int other = check_word_index(st->key, dim_names, DIM_COUNT);
        if (other == DIM_HEAD_DIM || other == DIM_QKV)
            diag_error(st->key_loc, "map `heads -> AXIS` instead", "`%s` cannot be mapped to an axis", st->key);
        else if (other == DIM_FLAT)
            diag_error(st->key_loc, "write `zero 3 over dp;`", "`flat` is sharded by ZeRO, not by a rule");
        else
            diag_error(st->key_loc, check_did_you_mean(c, st->key, mappable_names, COUNT_OF(mappable_names)),
                       "unknown dim `%s`", st->key);
        return;
    }
    Dim dim = mappable_dims[d];
    if (st->nvalues < 1) return; /* the grammar guarantees one */
    if (c->dim_rule[dim]) {
        diag_error(st->key_loc, "a dim maps to at most one axis", "`%s` is already mapped", st->key);
        diag_note(c->dim_rule[dim]->key_loc, NULL, "first mapped here");
        return;
    }
    c->dim_rule[dim] = st;
    int axis = read_axis(c, &st->values[0]);
    if (dim == DIM_BATCH && st->nvalues > 1) {
        /* `batch -> dp ep;`: the samples split over several axes (their
         * derived axis, plan_derive_axes), a later one's ranks groups inside
         * the data ranks (expert parallelism smaller than dp) */
        unsigned parts = axis >= 0 ? 1u << axis : 0;
        int ok = axis >= 0;
        for (int i = 1; i < st->nvalues; i++) {
            int b = read_axis(c, &st->values[i]);
            if (b >= 0 && (parts >> b & 1)) {
                diag_error(st->values[i].loc, "name each axis once", "`batch -> ...` names `%s` twice",
                           st->values[i].text);
                ok = 0;
            }
            if (b < 0) ok = 0;
            else parts |= 1u << b;
        }
        if (!ok) return; /* batch unmapped: the checks that need its axis stay quiet */
        l->batch_parts = parts;
    } else if (st->nvalues > 1) {
        if (dim != DIM_LAYERS)
            diag_error(st->values[1].loc, "a rule is `DIM -> AXIS;`; `layers -> AXIS` may add `schedule KIND`",
                       "unexpected `%s`: only `layers -> AXIS` takes a schedule", check_value_text(c, &st->values[1]));
        else if (c->schedule_stmt)
            diag_error(st->values[1].loc, NULL, "the schedule is already given");
        else if (read_schedule(c, st, 1))
            c->schedule_stmt = st;
    }
    if (axis < 0) return;
    l->dim_axis[dim] = axis;
    l->dim_axis_loc[dim] = check_loc_join(st->key_loc, st->values[0].loc);
}

static void check_stage(Check *c, const Stmt *st)
{
    if (!c->plan->layout.stage_loc.file) c->plan->layout.stage_loc = check_stmt_span(st);
    if (!check_shape(c, st, 1, 1, BODY_YES, "stage 0 { layers 0..15; embed; }")) return;
    ARR_PUSH(c->arena, c->stage_stmts, c->nstage_stmts, c->cap_stage_stmts, st);
}

void check_layout(Check *c, const Stmt *sec)
{
    Layout *l = &c->plan->layout;
    check_shape(c, sec, 0, 0, BODY_YES, "layout { batch -> dp; }");
    const Stmt *seen[LAYOUT_COUNT] = {0};
    for (int i = 0; i < sec->body.count; i++) {
        const Stmt *st = sec->body.items[i];
        if (st->arrow) {
            check_rule(c, st);
            continue;
        }
        int k = check_word_index(st->key, LAYOUT_names, LAYOUT_COUNT);
        if (k < 0) {
            if (check_word_index(st->key, dim_names, DIM_COUNT) >= 0) {
                diag_error(st->key_loc,
                           arena_printf(c->arena, "write it like `%s -> %s;`", st->key,
                                        st->nvalues && st->values[0].kind == VAL_WORD ? st->values[0].text : "tp"),
                           "a layout rule needs `->`");
                continue;
            }
            const char *cands[LAYOUT_COUNT + COUNT_OF(mappable_names)];
            int n = 0;
            for (int j = 0; j < LAYOUT_COUNT; j++) cands[n++] = LAYOUT_names[j];
            for (int j = 0; j < COUNT_OF(mappable_names); j++) cands[n++] = mappable_names[j];
            check_unknown_key(c, st, "`layout`", cands, n);
            continue;
        }
        if (k == LY_STAGE) {
            check_stage(c, st);
            continue;
        }
        if (k == LY_FSDP && seen[LY_ZERO]) k = LY_ZERO; /* fsdp is zero 3: one of them */
        if (k == LY_ZERO && seen[LY_FSDP]) k = LY_FSDP;
        if (!check_first_of(&seen[k], st, "`layout`")) continue;
        switch (k) {
        case LY_SP:
            l->sp_loc = check_stmt_span(st);
            if (!check_shape(c, st, 2, 2, BODY_NO, LAYOUT_usage[k])) break;
            if (st->values[0].kind != VAL_WORD || strcmp(st->values[0].text, "over") != 0) {
                diag_error(st->values[0].loc, "write it like `sequence_parallel over tp;`",
                           "expected `over`, got `%s`", check_value_text(c, &st->values[0]));
                break;
            }
            l->sp_axis = read_axis(c, &st->values[1]);
            break;
        case LY_ZERO:
        case LY_FSDP: {
            l->zero_loc = check_stmt_span(st);
            int nfixed = k == LY_ZERO ? 1 : 0;
            if (!check_shape(c, st, nfixed + 2, nfixed + 1 + PARC_MAX_AXES, BODY_NO, LAYOUT_usage[k])) break;
            int64_t stage = 3;
            if (k == LY_ZERO && !check_read_count(c, st, &st->values[0], 0, 3, &stage)) break;
            const Value *over = &st->values[nfixed];
            if (over->kind != VAL_WORD || strcmp(over->text, "over") != 0) {
                diag_error(over->loc, arena_printf(c->arena, "write it like `%s`", LAYOUT_usage[k]),
                           "expected `over`, got `%s`", check_value_text(c, over));
                break;
            }
            /* `over dp cp`: several axes, the data group or part of it (check_cross) */
            int axis = read_axis(c, &st->values[nfixed + 1]), ok = axis >= 0;
            unsigned named = ok ? 1u << axis : 0;
            for (int i = nfixed + 2; i < st->nvalues; i++) {
                int b = read_axis(c, &st->values[i]);
                if (b >= 0 && (named >> b & 1)) {
                    diag_error(st->values[i].loc, "name each axis once", "`%s` names `%s` twice", st->key,
                               st->values[i].text);
                    ok = 0;
                }
                if (b < 0) ok = 0;
                else named |= 1u << b;
            }
            if (!ok) break;
            l->zero_stage = (int)stage;
            l->zero_axis = stage > 0 ? axis : -1;
            c->zero_named = stage > 0 ? named : 0;
            c->zero_stmt = st;
            break;
        }
        case LY_RECOMPUTE: {
            l->recompute_loc = check_stmt_span(st);
            int w = check_read_word_stmt(c, st, recompute_names, COUNT_OF(recompute_names), LAYOUT_usage[k]);
            if (w >= 0) l->recompute = w;
            break;
        }
        case LY_BALANCE: {
            l->balance_loc = check_stmt_span(st);
            int w = check_read_word_stmt(c, st, balance_words, COUNT_OF(balance_words), LAYOUT_usage[k]);
            if (w >= 0) l->balance = w;
            break;
        }
        case LY_GRAD_OVERLAP: {
            l->grad_overlap_loc = check_stmt_span(st);
            int w = check_read_word_stmt(c, st, overlap_words, COUNT_OF(overlap_words), LAYOUT_usage[k]);
            if (w >= 0) l->grad_overlap_off = w;
            break;
        }
        case LY_TP_OVERLAP: {
            l->tp_overlap_loc = check_stmt_span(st);
            int w = check_read_word_stmt(c, st, overlap_words, COUNT_OF(overlap_words), LAYOUT_usage[k]);
            if (w >= 0) l->tp_overlap_off = w;
            break;
        }
        case LY_PIPELINE_SCATTER: {
            l->pipeline_scatter_loc = check_stmt_span(st);
            int w = check_read_word_stmt(c, st, pipeline_scatter_words, COUNT_OF(pipeline_scatter_words),
                                         LAYOUT_usage[k]);
            if (w >= 0) l->pipeline_scatter = w;
            break;
        }
        case LY_CP_SPLIT: {
            l->cp_split_loc = check_stmt_span(st);
            int w = check_read_word_stmt(c, st, cp_split_words, COUNT_OF(cp_split_words), LAYOUT_usage[k]);
            if (w >= 0) l->cp_balanced = w;
            break;
        }
        case LY_CP_COMM: {
            l->cp_comm_loc = check_stmt_span(st);
            int w = check_read_word_stmt(c, st, cp_comm_words, COUNT_OF(cp_comm_words), LAYOUT_usage[k]);
            if (w >= 0) l->cp_comm = w;
            break;
        }
        case LY_SCHEDULE:
            if (!check_shape(c, st, 1, 2, BODY_NO, "schedule 1f1b;")) break;
            if (c->schedule_stmt) {
                diag_error(st->key_loc, NULL, "the schedule is already given");
                break;
            }
            {
                /* Reuse the rule reader: view `schedule K N` as values of a rule. */
                Stmt view = *st;
                Value vals[3] = {{.kind = VAL_WORD, .loc = st->key_loc, .text = "schedule"}};
                for (int j = 0; j < st->nvalues && j < 2; j++) vals[j + 1] = st->values[j];
                view.values = vals;
                view.nvalues = st->nvalues + 1;
                if (read_schedule(c, &view, 0)) c->schedule_stmt = st;
            }
            break;
        }
    }
}

