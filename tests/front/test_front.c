/*
 * test_front.c — tests of the front end (lexer, parser, check, plan helpers).
 *
 *   test_front EXAMPLES_DIR        every example loads cleanly, with exact numbers
 *                                  asserted; then robustness: every prefix, every
 *                                  token deleted / duplicated / replaced, random
 *                                  bytes and pathological inputs must give either
 *                                  success with a plan that satisfies parc.h's
 *                                  guarantees, or failure with errors reported;
 *                                  never a crash, a hang or a leak.
 *   test_front --neg FILE...       negative tests in-process: each `# error: TEXT`
 *                                  (or `# warning: TEXT`) comment expects a
 *                                  diagnostic at that line containing TEXT;
 *                                  `# error@file: TEXT` one without a line.  Every
 *                                  reported error/warning must be expected.
 *   test_front --dump FILE         loads FILE and prints plan_dump (or the errors).
 *
 * Exit status 0 only when every check passed; a summary line says what ran.
 */
#define _GNU_SOURCE /* fopencookie */
#include "advise.h"
#include "analyze.h"
#include "explain.h"
#include "ir.h"
#include "parc.h"
#include "passes.h"
#include "plan_write.h"

#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures;
static long loads;

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* ------------------------------------------------------------ plan verifier */

/* The guarantees parc.h promises for any plan check_plan accepts. */
static void verify_plan(const Plan *p, const char *what)
{
    const Layout *l = &p->layout;
    const Train *t = &p->train;
    const Model *m = &p->model;
    EXPECT(p->mesh.naxes >= 1 && p->mesh.naxes <= PARC_MAX_AXES, "%s", what);
    int64_t world = 1;
    for (int a = 0; a < p->mesh.naxes; a++) {
        EXPECT(p->mesh.axes[a].size >= 1, "%s", what);
        world *= p->mesh.axes[a].size;
    }
    EXPECT(world == p->mesh.world, "%s", what);
    EXPECT(p->mesh.world == p->cluster.nodes * p->cluster.gpus_per_node, "%s", what);
    EXPECT(p->cluster.gpu_memory > 0 && p->cluster.flops_bf16 > 0 && p->cluster.hbm_bandwidth > 0, "%s", what);
    EXPECT(t->batch == t->micro_batch * t->micro_batches * plan_dp(p), "%s: batch arithmetic", what);
    EXPECT(t->lr > 0, "%s", what);
    /* a mesh axis; batch's may be derived, spanning the axes its rule names */
    for (int d = 0; d < DIM_COUNT; d++)
        EXPECT(l->dim_axis[d] >= -1 && l->dim_axis[d] < p->mesh.naxes + (d == DIM_BATCH ? p->mesh.nderived : 0), "%s",
               what);
    if (l->dim_axis[DIM_BATCH] >= p->mesh.naxes)
        EXPECT(!(plan_axis_parts(p, l->dim_axis[DIM_BATCH]) & ~l->batch_parts), "%s: batch's derived axis", what);
    int64_t sizes[] = {[DIM_HEADS] = m->heads, [DIM_FFN] = m->ffn, [DIM_VOCAB] = m->vocab, [DIM_HIDDEN] = m->hidden,
                       [DIM_SEQ] = m->seq};
    Dim split[] = {DIM_HEADS, DIM_FFN, DIM_VOCAB, DIM_HIDDEN, DIM_SEQ};
    for (int i = 0; i < 5; i++)
        if (l->dim_axis[split[i]] >= 0)
            EXPECT(sizes[split[i]] % plan_dim_parts(p, split[i]) == 0, "%s: %s divisible", what, dim_names[split[i]]);
    if (m->block.kind == BLOCK_TRANSFORMER) {
        EXPECT(m->heads * m->head_dim == m->hidden, "%s", what);
        EXPECT(m->kv_heads >= 1 && m->heads % m->kv_heads == 0, "%s", what);
    }
    if (l->sp_axis >= 0) EXPECT(m->seq % plan_axis_size(p, l->sp_axis) == 0, "%s", what);
    EXPECT(l->pp_axis == l->dim_axis[DIM_LAYERS], "%s", what);
    EXPECT(l->stages == plan_axis_size(p, l->pp_axis), "%s", what);
    EXPECT(l->virtual_stages >= 1, "%s", what);
    EXPECT((l->pp_axis >= 0) == (l->schedule != SCHED_NONE), "%s", what);
    EXPECT(l->embed_stage >= 0 && l->embed_stage < l->stages && l->head_stage >= 0 && l->head_stage < l->stages,
           "%s", what);
    {
        /* model chunks v = c * stages + s tile the layers in order */
        int64_t next = 0;
        for (int v = 0; v < l->stages * l->virtual_stages; v++) {
            EXPECT(l->chunk_first[v] == next && l->chunk_layers[v] >= 1, "%s: model chunk %d", what, v);
            next = l->chunk_first[v] + l->chunk_layers[v];
        }
        EXPECT(next == m->layers, "%s: the chunks cover the layers", what);
        if (l->virtual_stages > 1) EXPECT(t->micro_batches % l->stages == 0, "%s", what);
    }
    if (l->schedule == SCHED_1F1B) EXPECT(t->micro_batches >= l->stages, "%s", what);
    /* ZeRO shards over the data axis, the context axis, the data group
     * (their derived axis) or, with batch over several axes, some of them:
     * inside the data group always */
    if (l->zero_stage > 0)
        EXPECT(plan_zero_axis_ok(p, l->zero_axis), "%s: ZeRO over axis %d, the data group %d", what, l->zero_axis,
               l->data_group);
    if (m->tied_head) EXPECT(m->has_embed && m->has_head, "%s", what);
    if (m->positions == POS_ROPE) {
        EXPECT(m->has_embed && m->block.kind == BLOCK_TRANSFORMER && m->head_dim % 2 == 0 && m->rope.theta > 1,
               "%s: rotary positions on attention with an even head_dim", what);
        if (m->rope.llama3)
            EXPECT(m->rope.factor >= 1 && m->rope.low_freq_factor > 0 &&
                       m->rope.high_freq_factor > m->rope.low_freq_factor && m->rope.original_max_positions >= 1,
                   "%s: llama3 scaling", what);
    }
    EXPECT(m->block.norm_eps > 0 && m->block.norm_eps < 1 && m->final_norm_eps > 0 && m->final_norm_eps < 1,
           "%s: norm epsilons in (0, 1)", what);
    if (m->has_loss) EXPECT(m->has_head, "%s", what);
    /* Rank coordinates round-trip. */
    for (int r = 0; r < p->mesh.world && r < 4096; r += 1 + p->mesh.world / 64) {
        int coords[PARC_MAX_AXES];
        plan_rank_coords(p, r, coords);
        EXPECT(plan_coords_rank(p, coords) == r, "%s: rank %d", what, r);
    }
}

/* ------------------------------------------------------------ loading */

static FILE *devnull;

/* Loads text as `path` with diagnostics discarded; checks the result agrees
 * with the error count and, on success, the plan's guarantees. */
static void load_quiet(const char *path, const char *text, const char *what)
{
    Arena arena = {0};
    Plan plan;
    diag_reset();
    diag_mute();
    int rc = check_plan_text(&arena, path, text, &plan);
    loads++;
    if (rc == 0) {
        EXPECT(diag_error_count() == 0, "%s: success with errors", what);
        verify_plan(&plan, what);
    } else {
        EXPECT(rc == -1 && diag_error_count() > 0, "%s: rc %d with %d errors", what, rc, diag_error_count());
    }
    arena_free(&arena);
    diag_unmute();
}

/* ------------------------------------------------------------ examples */

static int has_line(const char *dump, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = dump; (p = strstr(p, line)); p++)
        if ((p == dump || p[-1] == '\n' || p[-1] == ' ') && (p[n] == '\n' || p[n] == '\0')) return 1;
    return 0;
}

static void check_example_numbers(const char *name, const Plan *p, const char *dump)
{
    if (strcmp(name, "gpt3_175b.par") == 0) {
        EXPECT(p->layout.stages == 16, "gpt3 stages %d", p->layout.stages);
        EXPECT(p->layout.virtual_stages == 2, "gpt3 virtual");
        EXPECT(p->train.micro_batches == 192, "gpt3 micro_batches %" PRId64, p->train.micro_batches);
        EXPECT(p->mesh.world == 1024, "gpt3 world");
        EXPECT(p->layout.schedule == SCHED_INTERLEAVED, "gpt3 schedule");
        EXPECT(p->layout.chunk_layers[0] == 3 && p->layout.chunk_first[5] == 15 &&
                   p->layout.chunk_first[plan_chunk(&p->layout, 5, 1)] == 63, "gpt3 chunk layers");
        int tp = 2, dp = 1, pp = 0;
        EXPECT(strcmp(p->mesh.axes[tp].name, "tp") == 0, "gpt3 axis order");
        EXPECT(plan_axis_inside_node(p, tp) == 1, "tp inside a node");
        EXPECT(plan_axis_inside_node(p, dp) == 0, "dp spans nodes");
        EXPECT(plan_axis_inside_node(p, pp) == 0, "pp spans nodes");
        EXPECT(p->model.head_dim == 128 && p->model.positions == POS_LEARNED && p->model.block.bias == 1, "gpt3 model");
        EXPECT(p->cluster.flops_bf16 == 312e12 && p->cluster.gpu_memory == 80.0 * 1073741824.0, "gpt3 cluster");
        EXPECT(p->cluster.inter_bw == 25e9 && p->cluster.intra_latency == 2e-6, "gpt3 links");
        EXPECT(has_line(dump, "stages 16"), "gpt3 dump stages");
        EXPECT(has_line(dump, "virtual_stages 2"), "gpt3 dump virtual");
        EXPECT(has_line(dump, "micro_batches 192"), "gpt3 dump micro_batches");
        EXPECT(has_line(dump, "world 1024"), "gpt3 dump world");
        EXPECT(has_line(dump, "axis 2 tp size 8 stride 1 inside_node 1"), "gpt3 dump tp");
        EXPECT(has_line(dump, "axis 0 pp size 16 stride 64 inside_node 0"), "gpt3 dump pp");
        int coords[PARC_MAX_AXES];
        plan_rank_coords(p, 1023, coords);
        EXPECT(coords[0] == 15 && coords[1] == 7 && coords[2] == 7, "gpt3 coords");
        plan_rank_coords(p, 77, coords); /* 77 = 1*64 + 1*8 + 5 */
        EXPECT(coords[0] == 1 && coords[1] == 1 && coords[2] == 5, "gpt3 coords 77");
    } else if (strcmp(name, "llama2_7b.par") == 0) {
        EXPECT(p->mesh.world == 16 && plan_dp(p) == 2 && p->train.micro_batches == 256, "llama2_7b");
        EXPECT(p->layout.zero_stage == 1 && p->layout.sp_axis == 1 && p->layout.recompute == RECOMPUTE_SELECTIVE,
               "llama2_7b layout");
        EXPECT(plan_axis_inside_node(p, 1) && !plan_axis_inside_node(p, 0), "llama2_7b node");
        EXPECT(p->train.optimizer == OPT_ADAMW && p->train.weight_decay == 0.1 && p->train.beta2 == 0.95,
               "llama2_7b opt");
        EXPECT(p->layout.stages == 1 && p->layout.chunk_layers[0] == 32 && p->layout.schedule == SCHED_NONE,
               "llama2_7b stages");
        EXPECT(p->layout.dim_axis[DIM_LAYERS] == -1 && p->layout.dim_axis[DIM_HEADS] == 1, "llama2_7b dims");
        EXPECT(p->model.positions == POS_ROPE && p->model.rope.theta == 10000 && !p->model.rope.llama3,
               "llama2_7b rotary positions at theta 10000");
        EXPECT(p->model.block.norm_eps == 1e-5 && p->model.final_norm_eps == 1e-5, "llama2_7b norms' default eps");
        EXPECT(has_line(dump, "precision bf16") && has_line(dump, "master_fp32 1"), "llama2_7b dump");
    } else if (strcmp(name, "llama2_70b.par") == 0) {
        EXPECT(p->model.kv_heads == 8 && p->model.head_dim == 128, "70b gqa");
        EXPECT(p->model.positions == POS_ROPE && p->model.rope.theta == 10000, "70b rotary positions");
        EXPECT(p->layout.stages == 4 && p->layout.chunk_layers[3] == 20 && p->layout.chunk_first[3] == 60, "70b pp");
        EXPECT(p->layout.schedule == SCHED_1F1B && p->train.micro_batches == 256, "70b sched");
        EXPECT(plan_axis_inside_node(p, 2) && !plan_axis_inside_node(p, 1) && !plan_axis_inside_node(p, 0),
               "70b inside");
    } else if (strcmp(name, "llama7b_1gpu.par") == 0) {
        EXPECT(p->mesh.world == 1 && p->train.optimizer == OPT_ADAM && p->train.master_fp32 == 1, "1gpu");
        EXPECT(p->model.block.norm == NORM_RMS && p->model.block.mlp == MLP_SWIGLU && !p->model.block.bias, "llama block");
        EXPECT(has_line(dump, "gpu_memory 85899345920 B"), "1gpu memory");
    } else if (strcmp(name, "llama3_8b.par") == 0) {
        const Rope *r = &p->model.rope;
        EXPECT(p->model.positions == POS_ROPE && r->theta == 500000 && r->llama3 && r->factor == 8 &&
                   r->low_freq_factor == 1 && r->high_freq_factor == 4 && r->original_max_positions == 8192,
               "llama3_8b: theta 500000 with Llama 3.1's scaling");
        EXPECT(has_line(dump, "rope_theta 500000") && has_line(dump, "rope_scaling llama3") &&
                   has_line(dump, "rope_original_max_positions 8192"),
               "llama3_8b dump rope");
    } else if (strcmp(name, "tiny_rope.par") == 0) {
        EXPECT(p->model.positions == POS_ROPE && p->model.rope.theta == 500000 && p->model.kv_heads == 2,
               "tiny_rope: grouped-query attention, rotary at 500000");
    } else if (strcmp(name, "tiny_rope_llama31.par") == 0) {
        EXPECT(p->model.rope.llama3 && p->model.rope.original_max_positions == 64 && p->model.rope.theta == 10000,
               "tiny_rope_llama31 scaling");
        EXPECT(p->model.block.norm_eps == 1e-3 && p->model.final_norm_eps == 1e-2, "tiny_rope_llama31 eps");
        EXPECT(has_line(dump, "norm_eps 0.001") && has_line(dump, "final_norm_eps 0.01"), "tiny_rope_llama31 dump eps");
    } else if (strcmp(name, "llama7b_zero3.par") == 0) {
        EXPECT(p->layout.zero_stage == 3 && p->layout.zero_axis == 0 && plan_dp(p) == 8, "zero3");
        EXPECT(p->train.micro_batches == 8, "zero3 micro_batches");
    } else if (strcmp(name, "tiny_3d.par") == 0) {
        EXPECT(p->mesh.world == 8 && p->layout.stages == 2 && p->train.micro_batches == 4, "tiny_3d");
        EXPECT(p->train.weight_decay == 0.0 && p->train.lr == 1e-3 && p->train.precision == PREC_FP32, "tiny train");
        EXPECT(p->model.vocab == 256 && p->model.positions == POS_LEARNED && p->model.has_loss, "tiny model");
    } else if (strcmp(name, "tiny_pp_interleaved.par") == 0) {
        EXPECT(p->layout.virtual_stages == 2 && p->layout.chunk_layers[0] == 1 && p->layout.chunk_first[1] == 1,
               "tiny interleaved");
    } else if (strcmp(name, "tiny_llama.par") == 0) {
        EXPECT(p->model.tied_head && p->model.has_embed && p->model.positions == POS_NONE, "tiny llama");
    } else if (strcmp(name, "qwen15_moe_a27b.par") == 0) {
        const MoeSpec *moe = &p->model.block.moe;
        EXPECT(moe->experts == 60 && moe->topk == 4 && moe->expert_ffn == 1408 && moe->shared == 1 &&
                   moe->shared_ffn == 5632 && p->model.rope.theta == 1e6 && p->model.block.norm_eps == 1e-6,
               "qwen15_moe_a27b: 60 experts of 1408, top 4, one shared expert of 5632");
        EXPECT(has_line(dump, "moe experts 60 top 4 expert_ffn 1408 router softmax aux_loss 0.001 z_loss 0 shared 1 "
                              "shared_ffn 5632"),
               "qwen15_moe_a27b dump moe");
    } else if (strcmp(name, "tiny_moe_shared.par") == 0) {
        const MoeSpec *moe = &p->model.block.moe;
        EXPECT(moe->shared == 2 && moe->shared_ffn == 2 * moe->expert_ffn && moe->expert_ffn == 48,
               "tiny_moe_shared: shared_ffn defaults to shared x expert_ffn");
    } else if (strcmp(name, "tiny_mlp_tp.par") == 0) {
        EXPECT(p->model.block.kind == BLOCK_MLP && p->model.heads == 0 && p->layout.dim_axis[DIM_FFN] == 0,
               "tiny mlp");
    }
    if (strncmp(name, "tiny_b12_", 9) == 0) EXPECT(p->train.batch == 12, "%s: global batch 12", name);
    else if (strncmp(name, "tiny_", 5) == 0) EXPECT(p->train.batch == 8, "%s: global batch 8", name);
}

typedef struct Example {
    char path[1024];
    char name[256];
    char *text;
} Example;

static int load_examples(const char *dir, Example **out)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "test_front: cannot open %s\n", dir);
        failures++;
        return 0;
    }
    int n = 0, cap = 0;
    Example *ex = NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".par") != 0) continue;
        if (n == cap) ex = realloc(ex, (size_t)(cap = cap ? cap * 2 : 32) * sizeof(*ex));
        snprintf(ex[n].path, sizeof ex[n].path, "%s/%s", dir, e->d_name);
        snprintf(ex[n].name, sizeof ex[n].name, "%s", e->d_name);
        ex[n].text = read_file(ex[n].path);
        if (ex[n].text) n++;
    }
    closedir(d);
    /* Stable order. */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(ex[j].name, ex[i].name) < 0) {
                Example t = ex[i];
                ex[i] = ex[j];
                ex[j] = t;
            }
    *out = ex;
    return n;
}

static void test_examples(Example *ex, int n)
{
    static const char *const required[] = {
        "llama7b_1gpu.par", "llama7b_zero3.par", "llama2_7b.par", "llama2_70b.par", "gpt3_175b.par",
        "tiny_single.par", "tiny_dp.par", "tiny_tp.par", "tiny_sp.par", "tiny_pp_gpipe.par", "tiny_pp_1f1b.par",
        "tiny_pp_interleaved.par", "tiny_zero1.par", "tiny_zero2.par", "tiny_zero3.par", "tiny_recompute.par",
        "tiny_3d.par", "tiny_llama.par", "tiny_mlp_tp.par", "llama3_8b.par", "tiny_rope.par", "tiny_rope_llama31.par"};
    for (size_t r = 0; r < sizeof required / sizeof required[0]; r++) {
        int found = 0;
        for (int i = 0; i < n; i++) found |= strcmp(ex[i].name, required[r]) == 0;
        EXPECT(found, "example %s missing", required[r]);
    }
    for (int i = 0; i < n; i++) {
        Arena arena = {0};
        Plan plan;
        diag_reset();
        int rc = check_plan(&arena, ex[i].path, &plan);
        EXPECT(rc == 0 && diag_error_count() == 0 && diag_warning_count() == 0, "%s: rc %d, %d errors, %d warnings",
               ex[i].name, rc, diag_error_count(), diag_warning_count());
        EXPECT(ex[i].text[0] == '#', "%s: starts with a comment saying what it shows", ex[i].name);
        if (rc == 0) {
            verify_plan(&plan, ex[i].name);
            char *dump = NULL;
            size_t dump_len = 0;
            FILE *mem = open_memstream(&dump, &dump_len);
            plan_dump(&plan, mem);
            fclose(mem);
            check_example_numbers(ex[i].name, &plan, dump);
            /* The dump is stable: a second load dumps the same text. */
            Arena again = {0};
            Plan plan2;
            diag_reset();
            check_plan(&again, ex[i].path, &plan2);
            char *dump2 = NULL;
            size_t dump2_len = 0;
            mem = open_memstream(&dump2, &dump2_len);
            plan_dump(&plan2, mem);
            fclose(mem);
            EXPECT(dump_len == dump2_len && memcmp(dump, dump2, dump_len) == 0, "%s: dump stable", ex[i].name);
            free(dump);
            free(dump2);
            arena_free(&again);
        }
        arena_free(&arena);
    }
}

/* ------------------------------------------------------------ written plans */

/* plan_dump's text from its first line starting `from` up to (not including)
 * the first line starting `to` after it; "" when absent.  Caller frees. */
static char *dump_section(const Plan *p, const char *from, const char *to)
{
    char *dump = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&dump, &len);
    plan_dump(p, mem);
    fclose(mem);
    char *start = strstr(dump, from), *end = start ? strstr(start + 1, to) : NULL;
    if (!start) start = dump + len;
    if (end) *end = '\0';
    char *out = strdup(start);
    free(dump);
    return out;
}

/* A plan written by plan_write_par (as `parc search -o` writes them) re-reads
 * to the same cluster, reserve included, whether the reserve was stated or
 * the default, and to the same model. */
static void expect_written_cluster(const char *what, const char *path, const char *text)
{
    Arena arena = {0};
    Plan plan, again;
    diag_reset();
    if (check_plan_text(&arena, path, text, &plan) != 0) {
        EXPECT(0, "%s: does not load", what);
        arena_free(&arena);
        return;
    }
    char *written = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&written, &len);
    plan_write_par(&plan, NULL, mem);
    fclose(mem);
    diag_reset();
    int rc = check_plan_text(&arena, path, written, &again);
    EXPECT(rc == 0 && diag_error_count() == 0, "%s: the written plan does not load:\n%s", what, written);
    if (rc == 0) {
        char *a = dump_section(&plan, "cluster\n", "\nmodel "), *b = dump_section(&again, "cluster\n", "\nmodel ");
        EXPECT(strcmp(a, b) == 0, "%s: the written plan's cluster differs:\n%s\nagainst\n%s", what, b, a);
        EXPECT(again.cluster.gpu_reserve == plan.cluster.gpu_reserve && again.cluster.reserve_set,
               "%s: reserve %.17g written, %.17g read back", what, plan.cluster.gpu_reserve, again.cluster.gpu_reserve);
        free(a);
        free(b);
        /* the model as well: a mixture of experts written back as one */
        a = dump_section(&plan, "\nmodel ", "\ntrain\n"), b = dump_section(&again, "\nmodel ", "\ntrain\n");
        EXPECT(strcmp(a, b) == 0, "%s: the written plan's model differs:\n%s\nagainst\n%s", what, b, a);
        free(a);
        free(b);
    }
    free(written);
    arena_free(&arena);
    diag_reset();
}

static void test_written_plans(Example *ex, int n)
{
    for (int i = 0; i < n; i++) expect_written_cluster(ex[i].name, ex[i].path, ex[i].text);
    /* a reserve stated in bytes and one the default gives in whole MiB (2 GiB + 2.5% of 84 GiB) */
    static const char *const reserves[] = {"reserve 3.5 GiB;", "reserve 123456789 B;", ""};
    for (size_t r = 0; r < sizeof reserves / sizeof reserves[0]; r++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "cluster { nodes 1; gpus_per_node 2; gpu { memory 84 GiB; bf16 989 TFLOP/s; hbm 3.35 TB/s; %s }\n"
                 "  link intra 450 GB/s 2 us; }\n"
                 "model m { vocab 256; seq 32; hidden 64; heads 4; ffn 256; layers 2; embed; repeat layers { block "
                 "gpt2; } norm layer; head untied; loss cross_entropy; }\n"
                 "train { batch 8; micro_batch 1; precision fp32; optimizer adamw lr 1e-3; }\n"
                 "mesh { dp 2; }\nlayout { batch -> dp; }\n",
                 reserves[r]);
        expect_written_cluster(*reserves[r] ? reserves[r] : "the default reserve", "reserve.par", text);
    }
    Arena arena = {0};
    Plan plan;
    diag_reset();
    int rc = check_plan_text(&arena, "default.par",
                             "cluster { nodes 1; gpus_per_node 1; gpu { memory 84 GiB; bf16 989 TFLOP/s; hbm 3.35 TB/s; } }\n"
                             "model m { vocab 256; seq 32; hidden 64; heads 4; ffn 256; layers 2; embed; repeat layers "
                             "{ block gpt2; } norm layer; head untied; loss cross_entropy; }\n"
                             "train { batch 8; micro_batch 1; precision fp32; optimizer adamw lr 1e-3; }\n"
                             "mesh { dp 1; }\nlayout { batch -> dp; }\n",
                             &plan);
    EXPECT(rc == 0 && plan.cluster.gpu_reserve == 4198.0 * 1048576.0 && !plan.cluster.reserve_set,
           "the default reserve of 84 GiB is %.17g, not 4198 MiB", plan.cluster.gpu_reserve);
    arena_free(&arena);
    diag_reset();
}

/* ------------------------------------------------------------ robustness */

/* Approximate tokens: runs of word/number characters, `->`, `..`, single others. */
static int tokenize(const char *s, int *start, int *len, int max)
{
    int n = 0;
    for (int i = 0; s[i] && n < max;) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
            i++;
            continue;
        }
        if (ch == '#') {
            while (s[i] && s[i] != '\n') i++;
            continue;
        }
        int j = i;
        if ((s[i] == '-' && s[i + 1] == '>') || (s[i] == '.' && s[i + 1] == '.')) {
            j = i + 2;
        } else if (ch == '"') {
            j = i + 1;
            while (s[j] && s[j] != '"' && s[j] != '\n') j++;
            if (s[j] == '"') j++;
        } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_') {
            while (s[j] && (((unsigned char)s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                            (s[j] >= '0' && s[j] <= '9') || s[j] == '_' || s[j] == '/' ||
                            (s[j] == '.' && s[j + 1] != '.')))
                j++;
        } else {
            j = i + 1;
        }
        start[n] = i;
        len[n] = j - i;
        n++;
        i = j;
    }
    return n;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const char *const replacements[] = {
    "0", "1", "3", "7", "2.5", "1e999", "99999999999999999999", "4096", "8K", "tp", "dp", "pp", "heads", "layers",
    "{", "}", ";", "->", "..", "GiB", "GB/s", "us", "stage", "embed", "fsdp", "interleaved", "\"x\"", "master",
    "fp32", "none", "over", "schedule", "2 GiB", "0..3", "#", "@", "mlp", "tied", "zero", "include", "1f1b", "B"};

static void test_robustness(Example *ex, int n)
{
    enum { MAX_TOKENS = 4096 };
    static int start[MAX_TOKENS], len[MAX_TOKENS];
    char what[1400];
    for (int i = 0; i < n; i++) {
        const char *text = ex[i].text;
        size_t size = strlen(text);
        char *buf = malloc(size * 2 + 64);
        /* Every prefix. */
        for (size_t cut = 0; cut < size; cut++) {
            memcpy(buf, text, cut);
            buf[cut] = '\0';
            snprintf(what, sizeof what, "%s prefix %zu", ex[i].name, cut);
            load_quiet(ex[i].path, buf, what);
        }
        int ntok = tokenize(text, start, len, MAX_TOKENS);
        for (int t = 0; t < ntok; t++) {
            /* Token deleted. */
            memcpy(buf, text, (size_t)start[t]);
            strcpy(buf + start[t], text + start[t] + len[t]);
            snprintf(what, sizeof what, "%s without token %d `%.*s`", ex[i].name, t, len[t], text + start[t]);
            load_quiet(ex[i].path, buf, what);
            /* Token duplicated. */
            memcpy(buf, text, (size_t)(start[t] + len[t]));
            buf[start[t] + len[t]] = ' ';
            strcpy(buf + start[t] + len[t] + 1, text + start[t]);
            snprintf(what, sizeof what, "%s with token %d `%.*s` twice", ex[i].name, t, len[t], text + start[t]);
            load_quiet(ex[i].path, buf, what);
            /* Token replaced (two pseudo-random replacements). */
            for (int k = 0; k < 2; k++) {
                const char *r = replacements[rng() % (sizeof replacements / sizeof replacements[0])];
                memcpy(buf, text, (size_t)start[t]);
                strcpy(buf + start[t], r);
                strcat(buf + start[t], text + start[t] + len[t]);
                snprintf(what, sizeof what, "%s with token %d `%.*s` -> `%s`", ex[i].name, t, len[t],
                         text + start[t], r);
                load_quiet(ex[i].path, buf, what);
            }
        }
        free(buf);
    }
}

static void test_pathological(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/fuzz.par", dir);
    size_t big = 200000;
    char *buf = malloc(big + 1);
    /* Deep nesting: `a{` many times, `{` many times. */
    for (size_t i = 0; i + 2 <= big; i += 2) buf[i] = 'a', buf[i + 1] = '{';
    buf[big] = '\0';
    load_quiet(path, buf, "deep a{");
    memset(buf, '{', big);
    load_quiet(path, buf, "deep {");
    memset(buf, '}', big);
    load_quiet(path, buf, "many }");
    memset(buf, ';', big);
    load_quiet(path, buf, "many ;");
    memset(buf, 'x', big);
    load_quiet(path, buf, "long word");
    memset(buf, '9', big);
    load_quiet(path, buf, "long number");
    memset(buf, '"', 1);
    load_quiet(path, buf, "unterminated long string");
    for (size_t i = 0; i < big; i++) buf[i] = (char)(0x80 + i % 0x7f);
    load_quiet(path, buf, "high bytes");
    free(buf);
    static const char *const cases[] = {
        "", "#", "\n\n\n", "cluster", "cluster {", "cluster { nodes", "cluster { nodes 1e999; }",
        "cluster { nodes 99999999999999999999999; }", "cluster { nodes 1.5; }", "mesh { dp 0; }",
        "mesh { a 1; b 1; c 1; d 1; e 1; f 1; g 1; h 1; i 1; }", "mesh { dp 1048576; tp 1048576; }",
        "layout { stage 99999999 { layers 0..99999999999; } }", "model m { layers 1073741824; }",
        "include \"fuzz.par\";", "include \"/nonexistent/x.par\";", "include \"\";", "include \"/\";",
        "include \".\";", "x -> y;", "a -> ;", "..", "->", "\"", "1 2 3;", "train { optimizer sgd lr; }",
        "train { optimizer adam lr 1 lr 2 beta1 beta2 momentum; }", "train { precision fp32 master; }",
        "layout { zero 9 over; fsdp; schedule; schedule interleaved 99999; }", "model { repeat layers { block; } }",
        "model { repeat layers { block mlp { attention causal; act; } } }", "\x01\x02\x03\xff\xfe",
        "cluster { gpu { memory 80 GiB/s; bf16 1 GiB; hbm 1 TFLOP/s; } link intra 1 us 1 GB/s; }",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) load_quiet(path, cases[i], cases[i]);
    /* Random bytes and random token soup. */
    static const char *const soup[] = {
        "cluster", "model", "train", "mesh", "layout", "{", "}", ";", "->", "..", "nodes", "gpus_per_node", "gpu",
        "memory", "link", "intra", "inter", "vocab", "seq", "hidden", "heads", "ffn", "layers", "kv_heads", "head_dim",
        "embed", "positions", "learned", "rope", "theta", "scaling", "llama3", "factor", "low_freq_factor",
        "high_freq_factor", "original_max_positions", "eps", "repeat", "block", "transformer", "gpt2", "llama",
        "mlp", "norm", "rms",
        "head", "tied", "untied", "loss", "cross_entropy", "batch", "micro_batch", "micro_batches", "precision",
        "bf16", "master", "fp32", "optimizer", "adamw", "lr", "dp", "tp", "pp", "schedule", "1f1b", "interleaved",
        "gpipe", "zero", "over", "fsdp", "stage", "sequence_parallel", "recompute", "selective", "0", "1", "2", "4",
        "8", "32", "3e-4", "GiB", "GB/s", "TFLOP/s", "us", "K", "\"common/tiny_gpt.par\"", "include"};
    char line[4096];
    for (int k = 0; k < 4000; k++) {
        size_t used = 0;
        int ntok = (int)(rng() % 120);
        for (int t = 0; t < ntok && used < sizeof line - 64; t++) {
            const char *w = soup[rng() % (sizeof soup / sizeof soup[0])];
            used += (size_t)snprintf(line + used, sizeof line - used, "%s ", w);
        }
        line[used] = '\0';
        load_quiet(path, line, "token soup");
    }
    for (int k = 0; k < 2000; k++) {
        size_t n = rng() % 300;
        for (size_t i = 0; i < n; i++) {
            char c = (char)(rng() % 255 + 1);
            line[i] = c;
        }
        line[n] = '\0';
        load_quiet(path, line, "random bytes");
    }
}

/* ------------------------------------------------------------ limits */

/* A one-node-per-8-ranks plan over `mesh` with the given model and train
 * numbers, as text. */
static char *limit_plan(const char *mesh, const char *layout, int64_t ranks, int64_t seq, int64_t hidden,
                        int64_t layers, int64_t batch, const char *block)
{
    char *text = malloc(2048);
    int64_t nodes = ranks >= 8 ? ranks / 8 : 1, gpn = ranks >= 8 ? 8 : ranks;
    snprintf(text, 2048,
             "cluster { nodes %" PRId64 "; gpus_per_node %" PRId64 "; gpu { memory 80 GiB; bf16 989 TFLOP/s; "
             "hbm 3.35 TB/s; } link intra 450 GB/s 2 us; link inter 50 GB/s 5 us; }\n"
             "model m { vocab 256; seq %" PRId64 "; hidden %" PRId64 "; heads 4; ffn %" PRId64 "; layers %" PRId64
             "; embed; repeat layers { block %s; } norm layer; head untied; loss cross_entropy; }\n"
             "train { batch %" PRId64 "; micro_batch 1; precision fp32; optimizer adamw lr 1e-3; }\n"
             "mesh { %s }\nlayout { %s }\n",
             nodes, gpn, seq, hidden, hidden * 4 < (int64_t)1 << 30 ? hidden * 4 : hidden, layers, block, batch,
             mesh, layout);
    return text;
}

/* Loads text; 0 when it checks (and then it must lower), else -1 with the
 * diagnostics in *report (malloc'd). */
static int load_and_lower(const char *text, char **report, int *lowered)
{
    Arena arena = {0};
    size_t size = 0;
    FILE *out = open_memstream(report, &size);
    diag_reset();
    diag_set_default_stream(out); /* the fit advice mutes its own trials */
    Compilation c;
    int front_failed = passes_run_text(&c, &arena, "limit.par", text, 1, passes_find("front")) != 0;
    int rc = front_failed ? -1 : 0;
    *lowered = 0;
    if (rc == 0 && passes_continue(&c, passes_find("analyze")) == 0) {
        *lowered = 1;
        /* the fit advice lowers variants of the plan: they stay in bounds too */
        advise_plan(&arena, &c);
        passes_explain_text(devnull, &arena, &c, 1);
        explain_json(devnull, c.analysis);
    }
    passes_finish(&c);
    diag_set_default_stream(NULL);
    fclose(out);
    arena_free(&arena);
    diag_reset();
    return rc;
}

static void expect_limit(const char *what, char *text, const char *message)
{
    char *report = NULL;
    int lowered;
    int rc = load_and_lower(text, &report, &lowered);
    if (!message)
        EXPECT(rc == 0 && lowered, "%s: at the limit the plan must check and lower (rc %d):\n%s", what, rc, report);
    else
        EXPECT(rc == -1 && strstr(report, message), "%s: expected `%s`, got rc %d:\n%s", what, message, rc, report);
    free(report);
    free(text);
}

/* Plans at each size limit check and lower (no overflow, no internal error);
 * one step beyond, check refuses them naming the limit. */
static void test_limits(void)
{
    const char *pp = "layers -> pp schedule 1f1b;", *gpipe = "layers -> pp schedule gpipe;";
    /* schedule steps: 2 × 32768 × 64 = 2^22 */
    expect_limit("schedule at 2^22", limit_plan("pp 64;", pp, 64, 32, 64, 64, 32768, "gpt2"), NULL);
    expect_limit("schedule over 2^22", limit_plan("pp 64;", pp, 64, 32, 64, 64, 32832, "gpt2"),
                 "parc handles at most 4,194,304");
    /* gpipe: 2 × m × 2 × m ≤ 2^30 */
    expect_limit("gpipe at 2^30", limit_plan("pp 2;", gpipe, 2, 32, 64, 4, 16384, "gpt2"), NULL);
    expect_limit("gpipe over 2^30", limit_plan("pp 2;", gpipe, 2, 32, 64, 4, 16386, "gpt2"),
                 "exceeds parc's limit of 1,073,741,824 (2^30)");
    /* widest activation: heads 4 × seq² = 2^40 at seq 2^19 */
    expect_limit("activation at 2^40", limit_plan("dp 1;", "batch -> dp;", 1, 524288, 64, 4, 8, "gpt2"), NULL);
    expect_limit("activation over 2^40", limit_plan("dp 1;", "batch -> dp;", 1, 524289, 64, 4, 8, "gpt2"),
                 "parc handles at most 1,099,511,627,776 (2^40)");
    /* parameters: hidden 2^19, ffn 2^21: 2^42 per layer; 3 layers (1.3e13) are below 2^44 (1.76e13), 5
     * (2.2e13) over it */
    expect_limit("parameters below 2^44", limit_plan("dp 1;", "batch -> dp;", 1, 32, 524288, 3, 8, "gpt2"), NULL);
    expect_limit("parameters over 2^44", limit_plan("dp 1;", "batch -> dp;", 1, 32, 524288, 5, 8, "gpt2"),
                 "parc handles at most 17,592,186,044,416 (2^44)");
    /* a whole plan in a buffer: a NUL byte inside is an error, the same bytes without it load */
    char *text = limit_plan("dp 1;", "batch -> dp;", 1, 32, 64, 4, 8, "gpt2");
    size_t n = strlen(text);
    Arena arena = {0};
    Plan plan;
    diag_reset();
    diag_mute();
    EXPECT(check_plan_buffer(&arena, "buf.par", text, n, &plan) == 0, "a plan from a buffer without NUL");
    text[10] = '\0';
    EXPECT(check_plan_buffer(&arena, "buf.par", text, n, &plan) == -1 && diag_error_count() == 1,
           "a NUL byte in a buffer is one error");
    diag_unmute();
    diag_reset();
    arena_free(&arena);
    free(text);
}

/* ------------------------------------------------------------ negative tests */

typedef struct Expect {
    int line; /* 0: a whole-file diagnostic */
    int warning;
    char text[512];
    int matched;
} Expect;

/* Parses the `# error: ...` / `# warning: ...` / `# error@file: ...` comments. */
static int read_expectations(const char *text, Expect *ex, int max)
{
    int n = 0, line = 1;
    for (const char *p = text; *p; line++) {
        const char *end = strchr(p, '\n');
        size_t linelen = end ? (size_t)(end - p) : strlen(p);
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s", (int)(linelen < sizeof buf - 1 ? linelen : sizeof buf - 1), p);
        static const struct {
            const char *tag;
            int warning, file_level;
        } tags[] = {{"# error@file:", 0, 1}, {"# error:", 0, 0}, {"# warning:", 1, 0}};
        for (char *q = buf; *q && n < max; q++) {
            for (size_t k = 0; k < 3; k++) {
                size_t tl = strlen(tags[k].tag);
                if (strncmp(q, tags[k].tag, tl) != 0) continue;
                const char *s = q + tl;
                while (*s == ' ') s++;
                const char *stop = strstr(s, " # ");
                size_t sl = stop ? (size_t)(stop - s) : strlen(s);
                while (sl > 0 && (s[sl - 1] == ' ' || s[sl - 1] == '\r')) sl--;
                ex[n] = (Expect){.line = tags[k].file_level ? 0 : line, .warning = tags[k].warning};
                snprintf(ex[n].text, sizeof ex[n].text, "%.*s", (int)sl, s);
                n++;
                q += tl - 1;
                break;
            }
        }
        if (!end) break;
        p = end + 1;
    }
    return n;
}

static int test_negative(int argc, char **argv)
{
    int files = 0, bad_files = 0;
    for (int i = 0; i < argc; i++) {
        const char *path = argv[i];
        char *text = read_file(path);
        if (!text) {
            fprintf(stderr, "FAIL %s: cannot read\n", path);
            bad_files++;
            continue;
        }
        files++;
        Expect ex[64];
        int nex = read_expectations(text, ex, 64);
        char *out = NULL;
        size_t outlen = 0;
        FILE *mem = open_memstream(&out, &outlen);
        Arena arena = {0};
        Plan plan;
        diag_reset();
        diag_set_default_stream(mem);
        int rc = check_plan(&arena, path, &plan);
        diag_set_default_stream(NULL);
        fclose(mem);
        int ok = 1;
        if (nex == 0) {
            fprintf(stderr, "FAIL %s: no `# error:` expectations in the file\n", path);
            ok = 0;
        }
        if (rc != -1) {
            fprintf(stderr, "FAIL %s: check_plan returned %d, expected -1\n", path, rc);
            ok = 0;
        }
        size_t plen = strlen(path);
        char *scan = strdup(out ? out : "");
        for (char *l = scan; l && *l;) {
            char *nl = strchr(l, '\n');
            if (nl) *nl = '\0';
            if (strncmp(l, path, plen) == 0 && l[plen] == ':') {
                const char *rest = l + plen + 1;
                int line = 0, col = 0, consumed = 0;
                if (sscanf(rest, "%d:%d: %n", &line, &col, &consumed) == 2 && consumed > 0) rest += consumed;
                else if (*rest == ' ') rest++, line = 0;
                int warning = strncmp(rest, "warning: ", 9) == 0;
                int error = strncmp(rest, "error: ", 7) == 0;
                if (warning || error) {
                    const char *msg = rest + (warning ? 9 : 7);
                    int found = 0;
                    for (int k = 0; k < nex; k++)
                        if (ex[k].line == line && ex[k].warning == warning && strstr(msg, ex[k].text)) {
                            ex[k].matched = 1;
                            found = 1;
                        }
                    if (!found) {
                        fprintf(stderr, "FAIL %s:%d: unexpected %s: %s\n", path, line, warning ? "warning" : "error",
                                msg);
                        ok = 0;
                    }
                }
            } else if (strstr(l, ": error: ") && l[0] != ' ') {
                fprintf(stderr, "FAIL %s: unexpected diagnostic: %s\n", path, l);
                ok = 0;
            }
            l = nl ? nl + 1 : NULL;
        }
        for (int k = 0; k < nex; k++)
            if (!ex[k].matched) {
                fprintf(stderr, "FAIL %s:%d: expected %s containing \"%s\" was not reported\n", path, ex[k].line,
                        ex[k].warning ? "warning" : "error", ex[k].text);
                ok = 0;
            }
        free(scan);
        if (!ok) {
            fprintf(stderr, "---- output for %s:\n%s----\n", path, out ? out : "");
            bad_files++;
        }
        free(out);
        free(text);
        arena_free(&arena);
    }
    printf("test_front --neg: %d files, %d failed\n", files, bad_files);
    diag_reset();
    return bad_files ? 1 : 0;
}

/* ------------------------------------------------------------ main */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_front: timed out (a hang in the front end?)\n";
    if (write(2, msg, sizeof msg - 1)) {}
    _exit(2);
}

/* A stream that counts its writes, unbuffered as stderr is. */
static ssize_t count_write(void *cookie, const char *buf, size_t size)
{
    (void)buf;
    ++*(long *)cookie;
    return (ssize_t)size;
}

/* A diagnostic on a 128 KB line echoes it and its caret in a few writes, not
 * one per byte (an unbuffered stderr made that 14.5 s). */
static void test_diag_writes(void)
{
    enum { LINE = 131072 };
    char *text = malloc(LINE + 64);
    if (!text) return;
    memset(text, ' ', LINE);
    memcpy(text + LINE, "x;\n", 4);
    diag_reset();
    diag_add_source("long.par", text);
    long writes = 0;
    FILE *f = fopencookie(&writes, "w", (cookie_io_functions_t){.write = count_write});
    if (!f) return;
    setvbuf(f, NULL, _IONBF, 0);
    diag_set_default_stream(f);
    SrcLoc at = {.file = "long.par", .line = 1, .col = LINE + 1, .len = 1};
    diag_error(at, NULL, "an error at the end of a long line");
    diag_set_default_stream(NULL);
    fclose(f);
    diag_reset();
    if (getenv("TEST_FRONT_VERBOSE")) printf("diag writes: %ld\n", writes);
    EXPECT(writes > 3 && writes < 64, "a diagnostic on a %d-byte line took %ld writes", LINE, writes);
    free(text);
}

int main(int argc, char **argv)
{
    signal(SIGALRM, on_alarm);
    alarm(300);
    if (argc >= 2 && strcmp(argv[1], "--neg") == 0) return test_negative(argc - 2, argv + 2);
    if (argc == 3 && strcmp(argv[1], "--dump") == 0) {
        Arena arena = {0};
        Plan plan;
        int rc = check_plan(&arena, argv[2], &plan);
        if (rc == 0) plan_dump(&plan, stdout);
        arena_free(&arena);
        diag_reset();
        return rc == 0 ? 0 : 1;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: test_front EXAMPLES_DIR | --neg FILE... | --dump FILE\n");
        return 2;
    }
    devnull = fopen("/dev/null", "w");
    if (!devnull) return 2;
    clock_t t0 = clock();
    Example *ex = NULL;
    int n = load_examples(argv[1], &ex);
    EXPECT(n >= 19, "found only %d examples in %s", n, argv[1]);
    test_examples(ex, n);
    test_written_plans(ex, n);
    int after_examples = failures;
    test_robustness(ex, n);
    test_pathological(argv[1]);
    test_limits();
    test_diag_writes();
    for (int i = 0; i < n; i++) free(ex[i].text);
    free(ex);
    diag_reset();
    fclose(devnull);
    printf("test_front: %d examples, %ld robustness loads, %d failures (%d in examples), %.1f s\n", n, loads,
           failures, after_examples, (double)(clock() - t0) / CLOCKS_PER_SEC);
    return failures ? 1 : 0;
}
