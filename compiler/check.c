/*
 * check.c — the front end: parse, resolve includes, check, fill the Plan.
 *
 * Takes: a .par file (or its text).  Gives: a Plan in which every number is in
 * base units and every guarantee listed in parc.h holds, or -1 after reporting
 * EVERY error of the failing phase through diag.  Phases:
 *   1. parse the file and, recursively, its includes (syntax errors stop here);
 *   2. read each section (cluster, model, train, mesh, layout): names, units,
 *      ranges, duplicates, missing items;
 *   3. cross checks: mesh against cluster, layout rules against mesh and
 *      model, divisibility, batch arithmetic, pipeline stages and schedule.
 * Phase 3 only looks at values phase 2 accepted, so one mistake gives one
 * error, not a cascade.  Nothing is silently changed: every default is the
 * documented one (docs/language.md), every other fallback is an error.
 */
#include "ast.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ key tables */

/* ORDER: each X-macro gives an enum and the spelling table used for lookup and
 * "did you mean".  The third column is the usage shown in hints. */
#define SECTION_KEYS(X)                                   \
    X(SEC_CLUSTER, "cluster", "cluster { nodes 1; ... }") \
    X(SEC_MODEL, "model", "model NAME { ... }")           \
    X(SEC_TRAIN, "train", "train { batch 8; ... }")       \
    X(SEC_MESH, "mesh", "mesh { dp 2; tp 8; }")           \
    X(SEC_LAYOUT, "layout", "layout { batch -> dp; }")    \
    X(SEC_INCLUDE, "include", "include \"common/model.par\";")

#define CLUSTER_KEYS(X)                          \
    X(CL_NODES, "nodes", "nodes 2;")             \
    X(CL_GPN, "gpus_per_node", "gpus_per_node 8;") \
    X(CL_GPU, "gpu", "gpu { memory 80 GiB; bf16 989 TFLOP/s; hbm 3.35 TB/s; }") \
    X(CL_LINK, "link", "link intra 450 GB/s 2 us;") \
    X(CL_EFFICIENCY, "efficiency", "efficiency h100;` or `efficiency a100 { gemm 0.3 0.55 0.75 0.85; hbm 0.8; }")

#define EFF_KEYS(X)                                          \
    X(EF_GEMM, "gemm", "gemm 0.3 0.55 0.75 0.85;")           \
    X(EF_ATTENTION, "attention", "attention 0.5;")           \
    X(EF_HBM, "hbm", "hbm 0.85;")                            \
    X(EF_INTRA, "intra", "intra 0.78;")                      \
    X(EF_INTER, "inter", "inter 0.85;")

#define GPU_KEYS(X)                             \
    X(GPU_MEMORY, "memory", "memory 80 GiB;")   \
    X(GPU_BF16, "bf16", "bf16 989 TFLOP/s;")    \
    X(GPU_FP32, "fp32", "fp32 67 TFLOP/s;")     \
    X(GPU_HBM, "hbm", "hbm 3.35 TB/s;")

#define MODEL_KEYS(X)                                                   \
    X(MD_VOCAB, "vocab", "vocab 32000;")                                \
    X(MD_SEQ, "seq", "seq 4096;")                                       \
    X(MD_HIDDEN, "hidden", "hidden 4096;")                              \
    X(MD_HEADS, "heads", "heads 32;")                                   \
    X(MD_FFN, "ffn", "ffn 11008;")                                      \
    X(MD_LAYERS, "layers", "layers 32;")                                \
    X(MD_HEAD_DIM, "head_dim", "head_dim 128;")                         \
    X(MD_KV_HEADS, "kv_heads", "kv_heads 8;")                           \
    X(MD_EMBED, "embed", "embed;` or `embed positions learned;")        \
    X(MD_REPEAT, "repeat", "repeat layers { block llama; }")            \
    X(MD_NORM, "norm", "norm rms;")                                     \
    X(MD_HEAD, "head", "head untied;")                                  \
    X(MD_LOSS, "loss", "loss cross_entropy;")

#define BLOCK_KEYS(X)                                 \
    X(BK_NORM, "norm", "norm rms;")                   \
    X(BK_MLP, "mlp", "mlp swiglu;")                   \
    X(BK_ACT, "act", "act gelu;")                     \
    X(BK_ATTENTION, "attention", "attention causal;") \
    X(BK_BIAS, "bias", "bias false;")                 \
    X(BK_RESIDUAL, "residual", "residual true;")

#define TRAIN_KEYS(X)                                              \
    X(TR_BATCH, "batch", "batch 1024;")                            \
    X(TR_MICRO_BATCH, "micro_batch", "micro_batch 2;")             \
    X(TR_MICRO_BATCHES, "micro_batches", "micro_batches 256;")     \
    X(TR_SEQ, "seq", "seq 4096;")                                  \
    X(TR_PRECISION, "precision", "precision bf16 master fp32;")    \
    X(TR_OPTIMIZER, "optimizer", "optimizer adamw lr 3e-4;")       \
    X(TR_STEPS, "steps", "steps 100;")                             \
    X(TR_SEED, "seed", "seed 1234;")

#define LAYOUT_KEYS(X)                                                   \
    X(LY_SP, "sequence_parallel", "sequence_parallel over tp;")          \
    X(LY_ZERO, "zero", "zero 1 over dp;")                                \
    X(LY_FSDP, "fsdp", "fsdp over dp;")                                  \
    X(LY_RECOMPUTE, "recompute", "recompute selective;")                 \
    X(LY_STAGE, "stage", "stage 0 { layers 0..15; }")                    \
    X(LY_SCHEDULE, "schedule", "layers -> pp schedule 1f1b;")

#define OPT_PARAMS(X)                \
    X(OP_LR, "lr")                   \
    X(OP_BETA1, "beta1")             \
    X(OP_BETA2, "beta2")             \
    X(OP_EPS, "eps")                 \
    X(OP_WEIGHT_DECAY, "weight_decay") \
    X(OP_MOMENTUM, "momentum")

#define ENUM_(id, name, usage) id,
#define NAME_(id, name, usage) name,
#define USAGE_(id, name, usage) usage,
#define DEFINE_KEYS(prefix, TABLE)                                              \
    enum { TABLE(ENUM_) prefix##_COUNT };                                       \
    static const char *const prefix##_names[] = {TABLE(NAME_)};                 \
    static const char *const prefix##_usage[] = {TABLE(USAGE_)};
DEFINE_KEYS(SECTION, SECTION_KEYS)
DEFINE_KEYS(CLUSTER, CLUSTER_KEYS)
DEFINE_KEYS(GPU, GPU_KEYS)
DEFINE_KEYS(EFF, EFF_KEYS)
DEFINE_KEYS(MODEL, MODEL_KEYS)
DEFINE_KEYS(BLOCK, BLOCK_KEYS)
DEFINE_KEYS(TRAIN, TRAIN_KEYS)
DEFINE_KEYS(LAYOUT, LAYOUT_KEYS)

#define OP_ENUM_(id, name) id,
#define OP_NAME_(id, name) name,
enum { OPT_PARAMS(OP_ENUM_) OP_COUNT };
static const char *const opt_param_names[] = {OPT_PARAMS(OP_NAME_)};

/* Word choices; ORDER: each follows its enum in parc.h. */
static const char *const norm_words[] = {"none", "layer", "rms"};
static const char *const mlp_words[] = {"gelu", "swiglu", "relu"};
static const char *const block_words[] = {"transformer", "mlp", "gpt2", "llama"};
static const char *const precision_words[] = {"fp32", "bf16", "fp16"};
static const char *const optimizer_words[] = {"adamw", "adam", "sgd"};
static const char *const schedule_words[] = {"none", "gpipe", "1f1b", "interleaved"};
static const char *const recompute_words[] = {"none", "selective", "full"};
static const char *const bool_words[] = {"false", "true"};
static const char *const head_words[] = {"none", "tied", "untied"};
static const char *const loss_words[] = {"none", "cross_entropy"};
static const char *const attention_words[] = {"full", "causal"};
static const char *const link_words[] = {"intra", "inter"};
static const char *const position_words[] = {"none", "learned"};
#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Dims a layout rule may map (head_dim, qkv and flat follow from these). */
static const Dim mappable_dims[] = {DIM_BATCH, DIM_SEQ, DIM_HIDDEN, DIM_HEADS, DIM_FFN, DIM_VOCAB, DIM_LAYERS};
static const char *const mappable_names[] = {"batch", "seq", "hidden", "heads", "ffn", "vocab", "layers"};

/* Limits that keep every product below overflow; far above any real plan. */
#define MAX_COUNT ((int64_t)1 << 40)
#define MAX_DIM ((int64_t)1 << 30)
#define MAX_WORLD (1 << 22)
#define MAX_INCLUDE_DEPTH 16

/* ------------------------------------------------------------ the checker */

typedef struct Check {
    Arena *arena;
    Plan *plan;
    const char *file;
    const char *include_stack[MAX_INCLUDE_DEPTH + 1];
    int include_depth;
    /* Sections found (NULL when absent). */
    const Stmt *section[SECTION_COUNT];
    /* Which plan values phase 2 accepted. */
    int have_nodes, have_gpn;
    int have_model_key[MODEL_COUNT];
    int dims_ok;              /* hidden/heads/head_dim/kv_heads consistent */
    int mesh_ok;              /* every axis valid and named once */
    int have_batch, have_micro_batch, have_micro_batches, have_train_seq;
    SrcLoc train_seq_loc;
    /* Layout statements kept for phase 3. */
    const Stmt *dim_rule[DIM_COUNT];
    int interleave;           /* `interleaved N`: N, else 1 */
    SrcLoc interleave_loc;
    const Stmt *sp_stmt, *zero_stmt, *schedule_stmt;
    const Stmt **stage_stmts;
    int nstage_stmts, cap_stage_stmts;
} Check;

/* ------------------------------------------------------------ small helpers */

/* A location naming a whole file (no line). */
static SrcLoc file_loc(const char *path)
{
    SrcLoc loc = {.file = path};
    return loc;
}

static SrcLoc loc_join(SrcLoc a, SrcLoc b)
{
    if (!a.file || !b.file || a.line != b.line || strcmp(a.file, b.file) != 0 || b.col < a.col) return a;
    a.len = b.col + b.len - a.col;
    return a;
}

static SrcLoc stmt_span(const Stmt *st)
{
    SrcLoc loc = st->key_loc;
    for (int i = 0; i < st->nvalues; i++) loc = loc_join(loc, st->values[i].loc);
    return loc;
}

static int word_index(const char *word, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(word, names[i]) == 0) return i;
    return -1;
}

/* "`a`, `b` or `c`" */
static const char *word_list(Check *c, const char *const *names, int n)
{
    const char *s = "";
    for (int i = 0; i < n; i++)
        s = arena_printf(c->arena, "%s%s`%s`", s, i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
    return s;
}

static const char *value_text(Check *c, const Value *v)
{
    switch (v->kind) {
    case VAL_WORD: return v->text;
    case VAL_STRING: return arena_printf(c->arena, "\"%s\"", v->text);
    case VAL_NUMBER: return v->unit ? arena_printf(c->arena, "%s %s", v->num.text, v->unit) : v->num.text;
    case VAL_RANGE: return arena_printf(c->arena, "%s..%s", v->num.text, v->hi.text);
    }
    return "?";
}

static const char *did_you_mean(Check *c, const char *word, const char *const *names, int n)
{
    const char *best = diag_closest(word, names, n);
    if (best) return arena_printf(c->arena, "did you mean `%s`?", best);
    return arena_printf(c->arena, "expected %s", word_list(c, names, n));
}

/* Divisors of n nearest to `near` from below and above (0 when none). */
static void nearest_divisors(int64_t n, int64_t near, int64_t *below, int64_t *above)
{
    *below = 0;
    *above = 0;
    for (int64_t d = 1; d * d <= n; d++) {
        if (n % d) continue;
        int64_t pair[2] = {d, n / d};
        for (int k = 0; k < 2; k++) {
            int64_t x = pair[k];
            if (x < near && x > *below) *below = x;
            if (x > near && (*above == 0 || x < *above)) *above = x;
        }
    }
}

/* "tp = 8 or 16 would" for a dim of size n that `axis` of size `size` fails. */
static const char *divisor_hint(Check *c, const char *axis, int64_t n, int64_t size)
{
    int64_t below, above;
    nearest_divisors(n, size, &below, &above);
    if (below > 1 && above)
        return arena_printf(c->arena, "%s = %" PRId64 " or %" PRId64 " would", axis, below, above);
    if (above) return arena_printf(c->arena, "%s = %" PRId64 " would", axis, above);
    if (below) return arena_printf(c->arena, "%s = %" PRId64 " would", axis, below);
    return NULL;
}

/* "a, b" accumulation for "is missing ..." messages. */
static const char *add_missing(Check *c, const char *list, const char *item)
{
    return *list ? arena_printf(c->arena, "%s, %s", list, item) : item;
}

/* ------------------------------------------------------------ statement shapes */

enum { BODY_NO, BODY_YES };

/* Checks a statement's form: no `->` (unless allowed), between min and max
 * values, a `{ }` block iff body == BODY_YES.  Reports each problem; returns 1
 * when the form is right. */
static int check_shape(Check *c, const Stmt *st, int min_values, int max_values, int body, const char *usage)
{
    int ok = 1;
    const char *use = usage ? arena_printf(c->arena, "write it like `%s`", usage) : NULL;
    if (st->arrow) {
        diag_error(st->arrow_loc, "`->` maps a dim to a mesh axis inside `layout`, as in `heads -> tp;`",
                   "`%s` is not a layout rule", st->key);
        return 0;
    }
    if (st->nvalues < min_values) {
        SrcLoc at = st->nvalues ? st->values[st->nvalues - 1].loc : st->key_loc;
        diag_error(at, use, "`%s` needs %s value%s", st->key, min_values == 1 ? "a" : "more",
                   min_values == 1 ? "" : "s");
        ok = 0;
    } else if (st->nvalues > max_values) {
        const Value *extra = &st->values[max_values];
        const Value *before = max_values > 0 ? &st->values[max_values - 1] : NULL;
        if (extra->kind == VAL_WORD && before && before->kind == VAL_NUMBER && !before->unit &&
            extra->loc.line == before->loc.line) {
            static const char *unit_names[64];
            int n = 0;
            for (int i = 0; i < unit_table_count && n < 64; i++) unit_names[n++] = unit_table[i].name;
            const char *best = diag_closest(extra->text, unit_names, n);
            if (best) {
                diag_error(extra->loc, arena_printf(c->arena, "did you mean `%s`?", best), "unknown unit `%s`",
                           extra->text);
                return 0;
            }
        }
        const char *hint = use;
        if (extra->loc.line > st->key_loc.line)
            hint = arena_printf(c->arena, "missing `;` at the end of line %d?", extra->loc.line - 1);
        if (max_values == 0)
            diag_error(extra->loc, hint, "`%s` takes no value, got `%s`", st->key, value_text(c, extra));
        else
            diag_error(extra->loc, hint, "unexpected `%s` after `%s %s`", value_text(c, extra), st->key,
                       value_text(c, before));
        ok = 0;
    }
    if (body == BODY_NO && st->has_body) {
        diag_error(st->body_loc, use, "`%s` takes no `{ ... }` block", st->key);
        ok = 0;
    } else if (body == BODY_YES && !st->has_body) {
        diag_error(st->key_loc, use, "`%s` needs a `{ ... }` block", st->key);
        ok = 0;
    }
    return ok;
}

/* A statement key that is not in `names`.  Returns the index of the key it
 * suggests instead, or -1: the caller then does not also call that key missing. */
static int unknown_key(Check *c, const Stmt *st, const char *where, const char *const *names, int n)
{
    const char *best = diag_closest(st->key, names, n);
    const char *hint = best ? arena_printf(c->arena, "did you mean `%s`?", best)
                            : arena_printf(c->arena, "%s takes %s", where, word_list(c, names, n));
    diag_error(st->key_loc, hint, "unknown key `%s` in %s", st->key, where);
    return best ? word_index(best, names, n) : -1;
}

/* Records st in seen[k]; reports a duplicate. Returns 1 when st is the first. */
static int first_of(const Stmt **seen, const Stmt *st, const char *where)
{
    if (*seen) {
        diag_error(st->key_loc, "each key appears once; remove one of them", "duplicate `%s` in %s", st->key,
                   where);
        diag_note((*seen)->key_loc, NULL, "`%s` was first given here", st->key);
        return 0;
    }
    *seen = st;
    return 1;
}

/* ------------------------------------------------------------ values */

static int unit_required_error(Check *c, const Stmt *st, const Value *v, UnitKind want)
{
    const UnitInfo *u = unit_find(v->unit, want);
    if (!u) {
        const char *names[64];
        int n = 0;
        for (int i = 0; i < unit_table_count && n < 64; i++)
            if (unit_table[i].kind == want) names[n++] = unit_table[i].name;
        diag_error(v->unit_loc, did_you_mean(c, v->unit, names, n), "unknown unit `%s`", v->unit);
        return 0;
    }
    if (u->kind != want) {
        if (want == UNIT_COUNT)
            diag_error(v->loc, arena_printf(c->arena, "write a plain count, like `%s %s`", st->key, "8"),
                       "`%s` takes a plain count, got a %s `%s`", st->key, unit_kind_names[u->kind], v->unit);
        else
            diag_error(v->loc, NULL, "`%s` takes a %s such as `%s`, got a %s `%s`", st->key,
                       unit_kind_names[want], unit_kind_examples[want], unit_kind_names[u->kind], v->unit);
        return 0;
    }
    return 1;
}

/* A whole count in [min, max], optionally scaled by K / M / B. */
static int read_count(Check *c, const Stmt *st, const Value *v, int64_t min, int64_t max, int64_t *out)
{
    if (v->kind != VAL_NUMBER) {
        diag_error(v->loc, NULL, "`%s` takes a count such as `8`, got `%s`", st->key, value_text(c, v));
        return 0;
    }
    double factor = 1;
    if (v->unit) {
        if (!unit_required_error(c, st, v, UNIT_COUNT)) return 0;
        factor = unit_find(v->unit, UNIT_COUNT)->factor;
    }
    int64_t value;
    if (v->num.is_integer && !v->unit) {
        value = v->num.integer;
    } else {
        double x = v->num.value * factor;
        if (!isfinite(x) || x > (double)max) {
            diag_error(v->loc, NULL, "`%s` = %s is too large (at most %" PRId64 ")", st->key, value_text(c, v), max);
            return 0;
        }
        if (x != floor(x)) {
            diag_error(v->loc, NULL, "`%s` takes a whole number, got `%s`", st->key, value_text(c, v));
            return 0;
        }
        value = (int64_t)x;
    }
    if (value > max) {
        diag_error(v->loc, NULL, "`%s` = %s is too large (at most %" PRId64 ")", st->key, value_text(c, v), max);
        return 0;
    }
    if (value < min) {
        diag_error(v->loc, NULL, "`%s` must be at least %" PRId64 ", got %s", st->key, min, value_text(c, v));
        return 0;
    }
    *out = value;
    return 1;
}

/* A quantity with a unit of kind `want`, in base units; positive (or >= 0 when
 * zero_ok). */
static int read_quantity(Check *c, const Stmt *st, const Value *v, UnitKind want, int zero_ok, double *out)
{
    if (v->kind != VAL_NUMBER) {
        diag_error(v->loc, NULL, "`%s` takes a %s such as `%s`, got `%s`", st->key, unit_kind_names[want],
                   unit_kind_examples[want], value_text(c, v));
        return 0;
    }
    if (!v->unit) {
        diag_error(v->loc, arena_printf(c->arena, "write it with a unit, like `%s %s`", st->key,
                                        unit_kind_examples[want]),
                   "`%s` needs a unit: `%s` is a %s", st->key, v->num.text, unit_kind_names[want]);
        return 0;
    }
    if (!unit_required_error(c, st, v, want)) return 0;
    double x = v->num.value * unit_find(v->unit, want)->factor;
    if (!isfinite(x) || x > 1e30) {
        diag_error(v->loc, NULL, "`%s` = %s is too large", st->key, value_text(c, v));
        return 0;
    }
    if (x < 0 || (x == 0 && !zero_ok)) {
        diag_error(v->loc, NULL, "`%s` must be positive, got %s", st->key, value_text(c, v));
        return 0;
    }
    *out = x;
    return 1;
}

/* A plain number (no unit) in [lo, hi] (an open end when *_open). */
static int read_real(Check *c, const char *what, const Value *v, double lo, int lo_open, double hi, int hi_open,
                     double *out)
{
    if (v->kind != VAL_NUMBER) {
        diag_error(v->loc, NULL, "`%s` takes a number, got `%s`", what, value_text(c, v));
        return 0;
    }
    if (v->unit) {
        diag_error(v->unit_loc, NULL, "`%s` takes a plain number, without a unit", what);
        return 0;
    }
    double x = v->num.value;
    if (!isfinite(x) || x < lo || x > hi || (lo_open && x == lo) || (hi_open && x == hi)) {
        diag_error(v->loc, NULL, "`%s` must be in %s%g, %g%s, got %s", what, lo_open ? "(" : "[", lo, hi,
                   hi_open ? ")" : "]", v->num.text);
        return 0;
    }
    *out = x;
    return 1;
}

/* One of `words`: its index, or -1 after reporting. */
static int read_word(Check *c, const char *what, const Value *v, const char *const *words, int n)
{
    if (v->kind == VAL_WORD) {
        int i = word_index(v->text, words, n);
        if (i >= 0) return i;
        diag_error(v->loc, did_you_mean(c, v->text, words, n), "unknown %s `%s`", what, v->text);
        return -1;
    }
    diag_error(v->loc, arena_printf(c->arena, "expected %s", word_list(c, words, n)), "%s must be a word, got `%s`",
               what, value_text(c, v));
    return -1;
}

/* "KEY COUNT;" in one go. */
static int read_count_stmt(Check *c, const Stmt *st, int64_t min, int64_t max, int64_t *out, const char *usage)
{
    if (!check_shape(c, st, 1, 1, BODY_NO, usage)) return 0;
    return read_count(c, st, &st->values[0], min, max, out);
}

/* "KEY WORD;" in one go: the index or -1. */
static int read_word_stmt(Check *c, const Stmt *st, const char *const *words, int n, const char *usage)
{
    if (!check_shape(c, st, 1, 1, BODY_NO, usage)) return -1;
    return read_word(c, arena_printf(c->arena, "`%s` value", st->key), &st->values[0], words, n);
}

/* ------------------------------------------------------------ includes */

static char *read_whole_file(Arena *arena, const char *path, const char **why)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = strerror(errno);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) PARC_BUG("out of memory");
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            cap *= 2;
            char *grown = realloc(buf, cap);
            if (!grown) PARC_BUG("out of memory");
            buf = grown;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        *why = "read error";
        return NULL;
    }
    if (memchr(buf, '\0', len)) {
        free(buf);
        *why = "it contains NUL bytes (not a text file)";
        return NULL;
    }
    char *text = arena_strndup(arena, buf, len);
    free(buf);
    return text;
}

/* The canonical name of a file for cycle detection. */
static const char *canonical_path(Check *c, const char *path)
{
    char *real = realpath(path, NULL);
    if (!real) return path;
    const char *s = arena_strdup(c->arena, real);
    free(real);
    return s;
}

static int load_includes(Check *c, StmtList *list, const char *file);

/* Parses `text` of `path` and splices its includes.  0 on success. */
static int parse_file(Check *c, const char *path, const char *text, StmtList *out)
{
    diag_add_source(path, text);
    if (ast_parse(c->arena, path, text, out) != 0) return -1;
    return load_includes(c, out, path);
}

/* Replaces every `include "PATH";` in list (at any depth) by the statements of
 * PATH, relative to the directory of `file`.  0 on success. */
static int load_includes(Check *c, StmtList *list, const char *file)
{
    int rc = 0;
    StmtList out = {0};
    for (int i = 0; i < list->count; i++) {
        Stmt *st = list->items[i];
        if (strcmp(st->key, "include") != 0) {
            if (st->has_body && load_includes(c, &st->body, file) != 0) rc = -1;
            ARR_PUSH(c->arena, out.items, out.count, out.cap, st);
            continue;
        }
        if (st->arrow || st->nvalues != 1 || st->values[0].kind != VAL_STRING || st->has_body) {
            diag_error(stmt_span(st), "write it like `include \"common/tiny_gpt.par\";`",
                       "`include` takes one file name in quotes");
            rc = -1;
            continue;
        }
        const Value *v = &st->values[0];
        const char *name = v->text;
        const char *path = name;
        const char *slash = strrchr(file, '/');
        if (name[0] != '/' && slash)
            path = arena_printf(c->arena, "%.*s/%s", (int)(slash - file), file, name);
        const char *canon = canonical_path(c, path);
        int cycle = 0;
        for (int k = 0; k < c->include_depth; k++)
            if (strcmp(c->include_stack[k], canon) == 0) cycle = 1;
        if (cycle) {
            diag_error(v->loc, "a file cannot include itself, directly or through other files",
                       "include cycle: `%s` is already being included", name);
            rc = -1;
            continue;
        }
        if (c->include_depth >= MAX_INCLUDE_DEPTH) {
            diag_error(v->loc, NULL, "includes nest deeper than %d files", MAX_INCLUDE_DEPTH);
            rc = -1;
            continue;
        }
        const char *why = NULL;
        char *text = read_whole_file(c->arena, path, &why);
        if (!text) {
            diag_error(v->loc, "include paths are relative to the including file", "cannot include `%s`: %s",
                       name, why);
            rc = -1;
            continue;
        }
        StmtList sub;
        c->include_stack[c->include_depth++] = canon;
        if (parse_file(c, path, text, &sub) != 0) rc = -1;
        c->include_depth--;
        for (int k = 0; k < sub.count; k++) ARR_PUSH(c->arena, out.items, out.count, out.cap, sub.items[k]);
    }
    *list = out;
    return rc;
}

/* ------------------------------------------------------------ cluster */

static void check_gpu(Check *c, const Stmt *gpu, int *have)
{
    Cluster *cl = &c->plan->cluster;
    const Stmt *seen[GPU_COUNT] = {0};
    for (int i = 0; i < gpu->body.count; i++) {
        const Stmt *st = gpu->body.items[i];
        int k = word_index(st->key, GPU_names, GPU_COUNT);
        if (k < 0) {
            int guess = unknown_key(c, st, "`gpu`", GPU_names, GPU_COUNT);
            if (guess >= 0 && !have[guess]) have[guess] = -1; /* not "missing" too */
            continue;
        }
        if (!first_of(&seen[k], st, "`gpu`")) continue;
        if (!check_shape(c, st, 1, 1, BODY_NO, GPU_usage[k])) {
            have[k] = -1; /* given but wrong: not "missing" */
            continue;
        }
        const Value *v = &st->values[0];
        switch (k) {
        case GPU_MEMORY:
            if (read_quantity(c, st, v, UNIT_MEMORY, 0, &cl->gpu_memory)) have[k] = 1;
            cl->memory_loc = stmt_span(st);
            break;
        case GPU_BF16: have[k] = read_quantity(c, st, v, UNIT_COMPUTE, 0, &cl->flops_bf16); break;
        case GPU_FP32: have[k] = read_quantity(c, st, v, UNIT_COMPUTE, 0, &cl->flops_fp32); break;
        case GPU_HBM: have[k] = read_quantity(c, st, v, UNIT_BANDWIDTH, 0, &cl->hbm_bandwidth); break;
        }
        if (!have[k]) have[k] = -1; /* given but wrong: not "missing" */
    }
}

/* `efficiency NAME;`, `efficiency NAME { overrides }` or `efficiency { overrides }`
 * (from the generic defaults): what share of each peak the cost model uses. */
static void check_efficiency(Check *c, const Stmt *st)
{
    Efficiency *eff = &c->plan->cluster.eff;
    if (!check_shape(c, st, st->has_body ? 0 : 1, 1, st->has_body ? BODY_YES : BODY_NO, CLUSTER_usage[CL_EFFICIENCY]))
        return;
    if (st->nvalues == 1) {
        int k = read_word(c, "efficiency set", &st->values[0], cost_efficiency_names, cost_efficiency_count);
        if (k < 0) return;
        cost_efficiency_defaults(cost_efficiency_names[k], eff);
    } else {
        eff->name = "the plan's"; /* every value not given stays generic */
    }
    eff->loc = stmt_span(st);
    const Stmt *seen[EFF_COUNT] = {0};
    for (int i = 0; i < st->body.count; i++) {
        const Stmt *e = st->body.items[i];
        int k = word_index(e->key, EFF_names, EFF_COUNT);
        if (k < 0) {
            unknown_key(c, e, "`efficiency`", EFF_names, EFF_COUNT);
            continue;
        }
        if (!first_of(&seen[k], e, "`efficiency`")) continue;
        int n = k == EF_GEMM ? PARC_GEMM_CLASSES : 1;
        if (!check_shape(c, e, n, n, BODY_NO, EFF_usage[k])) continue;
        double *dst[] = {eff->gemm, &eff->attention, &eff->hbm, &eff->bus[0], &eff->bus[1]};
        for (int j = 0; j < n; j++) {
            const char *what = k == EF_GEMM ? arena_printf(c->arena, "gemm %s", gemm_class_names[j]) : e->key;
            read_real(c, what, &e->values[j], 0, 1, 1, 0, &dst[k][j]);
        }
    }
}

static void check_cluster(Check *c, const Stmt *sec)
{
    Cluster *cl = &c->plan->cluster;
    cl->loc = sec->key_loc;
    const Stmt *seen[CLUSTER_COUNT] = {0}, *suggested[CLUSTER_COUNT] = {0};
    const Stmt *links[2] = {0};
    int gpu_have[GPU_COUNT] = {0};
    for (int i = 0; i < sec->body.count; i++) {
        const Stmt *st = sec->body.items[i];
        int k = word_index(st->key, CLUSTER_names, CLUSTER_COUNT);
        if (k < 0) {
            int guess = unknown_key(c, st, "`cluster`", CLUSTER_names, CLUSTER_COUNT);
            if (guess >= 0 && guess != CL_LINK && guess != CL_GPU) suggested[guess] = st;
            continue;
        }
        if (k != CL_LINK && !first_of(&seen[k], st, "`cluster`")) continue;
        int64_t n;
        switch (k) {
        case CL_EFFICIENCY: check_efficiency(c, st); break;
        case CL_NODES:
            if (read_count_stmt(c, st, 1, 1 << 20, &n, CLUSTER_usage[k])) cl->nodes = (int)n, c->have_nodes = 1;
            break;
        case CL_GPN:
            if (read_count_stmt(c, st, 1, 1 << 16, &n, CLUSTER_usage[k]))
                cl->gpus_per_node = (int)n, c->have_gpn = 1;
            break;
        case CL_GPU:
            if (check_shape(c, st, 0, 0, BODY_YES, CLUSTER_usage[k])) check_gpu(c, st, gpu_have);
            else gpu_have[GPU_MEMORY] = gpu_have[GPU_BF16] = gpu_have[GPU_HBM] = -1;
            break;
        case CL_LINK: {
            seen[k] = st;
            if (!check_shape(c, st, 3, 3, BODY_NO, "link intra 450 GB/s 2 us;` or `link inter 50 GB/s 5 us;")) break;
            int which = read_word(c, "link", &st->values[0], link_words, 2);
            if (which < 0) break;
            if (links[which]) {
                diag_error(st->key_loc, NULL, "duplicate `link %s`", link_words[which]);
                diag_note(links[which]->key_loc, NULL, "`link %s` was first given here", link_words[which]);
                break;
            }
            links[which] = st;
            double *bw = which == 0 ? &cl->intra_bw : &cl->inter_bw;
            double *lat = which == 0 ? &cl->intra_latency : &cl->inter_latency;
            read_quantity(c, st, &st->values[1], UNIT_BANDWIDTH, 0, bw);
            read_quantity(c, st, &st->values[2], UNIT_TIME, 1, lat);
            break;
        }
        }
    }
    /* Missing items, named together; a misspelled key was reported already. */
    for (int k = 0; k < CLUSTER_COUNT; k++)
        if (!seen[k]) seen[k] = suggested[k];
    const char *missing = "";
    if (!seen[CL_NODES]) missing = add_missing(c, missing, "`nodes`");
    if (!seen[CL_GPN]) missing = add_missing(c, missing, "`gpus_per_node`");
    if (!seen[CL_GPU]) {
        missing = add_missing(c, missing, "`gpu { memory ...; bf16 ...; hbm ...; }`");
    } else {
        if (!gpu_have[GPU_MEMORY]) missing = add_missing(c, missing, "`gpu memory`");
        if (!gpu_have[GPU_BF16]) missing = add_missing(c, missing, "`gpu bf16`");
        if (!gpu_have[GPU_HBM]) missing = add_missing(c, missing, "`gpu hbm`");
    }
    /* A link is needed only where there is something to link. */
    if (!links[0] && !(c->have_gpn && cl->gpus_per_node == 1))
        missing = add_missing(c, missing, "`link intra`");
    if (!links[1] && !(c->have_nodes && cl->nodes == 1))
        missing = add_missing(c, missing, "`link inter`");
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

static void check_block(Check *c, const Stmt *st)
{
    BlockSpec *b = &c->plan->model.block;
    b->loc = stmt_span(st);
    int ok = check_shape(c, st, 1, 1, st->has_body, "block transformer { norm rms; mlp swiglu; }");
    if (st->nvalues < 1) return;
    int kind = read_word(c, "block kind", &st->values[0], block_words, COUNT_OF(block_words));
    if (kind < 0 || !ok) return;
    /* Presets; `transformer` starts from the GPT-2 choices. */
    *b = (BlockSpec){.kind = BLOCK_TRANSFORMER, .norm = NORM_LAYER, .mlp = MLP_GELU, .bias = 1, .causal = 1,
                     .residual = 1, .loc = b->loc};
    if (kind == 1) *b = (BlockSpec){.kind = BLOCK_MLP, .norm = NORM_LAYER, .mlp = MLP_GELU, .bias = 1,
                                    .causal = 0, .residual = 1, .loc = b->loc};
    if (kind == 3) b->norm = NORM_RMS, b->mlp = MLP_SWIGLU, b->bias = 0;
    const Stmt *seen[BLOCK_COUNT] = {0};
    for (int i = 0; i < st->body.count; i++) {
        const Stmt *s = st->body.items[i];
        int k = word_index(s->key, BLOCK_names, BLOCK_COUNT);
        const char *where = b->kind == BLOCK_MLP ? "an `mlp` block" : "a transformer block";
        if (k < 0) {
            unknown_key(c, s, where, BLOCK_names, BLOCK_COUNT);
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
        if (!first_of(&seen[k], s, where)) continue;
        int w;
        switch (k) {
        case BK_NORM:
            if ((w = read_word_stmt(c, s, norm_words, COUNT_OF(norm_words), BLOCK_usage[k])) >= 0) b->norm = w;
            break;
        case BK_MLP:
        case BK_ACT:
            if ((w = read_word_stmt(c, s, mlp_words, COUNT_OF(mlp_words), BLOCK_usage[k])) >= 0) b->mlp = w;
            break;
        case BK_ATTENTION:
            if ((w = read_word_stmt(c, s, attention_words, 2, BLOCK_usage[k])) >= 0) b->causal = w;
            break;
        case BK_BIAS:
            if ((w = read_word_stmt(c, s, bool_words, 2, BLOCK_usage[k])) >= 0) b->bias = w;
            break;
        case BK_RESIDUAL:
            if ((w = read_word_stmt(c, s, bool_words, 2, BLOCK_usage[k])) >= 0) b->residual = w;
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
                   "`repeat` takes the word `layers`, got `%s`", value_text(c, v));
        return;
    }
    const Stmt *block = NULL;
    for (int i = 0; i < st->body.count; i++) {
        const Stmt *s = st->body.items[i];
        if (strcmp(s->key, "block") != 0) {
            static const char *const only[] = {"block"};
            unknown_key(c, s, "`repeat`", only, 1);
            continue;
        }
        if (!first_of(&block, s, "`repeat`")) continue;
        check_block(c, s);
        *have_block = 1;
    }
    if (!block)
        diag_error(st->key_loc, "write it like `repeat layers { block llama; }`", "`repeat` has no `block`");
}

static void check_model(Check *c, const Stmt *sec)
{
    Model *m = &c->plan->model;
    m->loc = sec->key_loc;
    m->name = "model";
    if (sec->nvalues >= 1 && sec->values[0].kind == VAL_WORD) m->name = sec->values[0].text;
    check_shape(c, sec, 0, 1, BODY_YES, "model llama7b { ... }");
    if (sec->nvalues >= 1 && sec->values[0].kind != VAL_WORD)
        diag_error(sec->values[0].loc, NULL, "a model name is a word, got `%s`", value_text(c, &sec->values[0]));

    const Stmt *seen[MODEL_COUNT] = {0}, *suggested[MODEL_COUNT] = {0};
    int have_block = 0;
    int head = -1, loss = -1;
    for (int i = 0; i < sec->body.count; i++) {
        const Stmt *st = sec->body.items[i];
        int k = word_index(st->key, MODEL_names, MODEL_COUNT);
        if (k < 0) {
            if (strcmp(st->key, "block") == 0) {
                diag_error(st->key_loc, "write it like `repeat layers { block llama; }`",
                           "`block` belongs inside `repeat layers { ... }`");
                continue;
            }
            int guess = unknown_key(c, st, "`model`", MODEL_names, MODEL_COUNT);
            if (guess >= 0 && guess <= MD_LAYERS) suggested[guess] = st;
            continue;
        }
        if (!first_of(&seen[k], st, "`model`")) continue;
        int64_t n;
        int w;
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
        case MD_EMBED:
            if (!check_shape(c, st, 0, 2, BODY_NO, MODEL_usage[k])) break;
            m->has_embed = 1;
            if (st->nvalues >= 1) {
                const Value *v = &st->values[0];
                if (v->kind != VAL_WORD || strcmp(v->text, "positions") != 0) {
                    diag_error(v->loc, "write `embed;` or `embed positions learned;`",
                               "unexpected `%s` after `embed`", value_text(c, v));
                    break;
                }
                if (st->nvalues < 2) {
                    diag_error(v->loc, "write `embed positions learned;`", "`positions` needs `learned` or `none`");
                    break;
                }
                if ((w = read_word(c, "position embedding", &st->values[1], position_words, 2)) >= 0)
                    m->positions = w;
            }
            break;
        case MD_REPEAT: check_repeat(c, st, &have_block); have_block = have_block ? 1 : -1; break;
        case MD_NORM:
            if ((w = read_word_stmt(c, st, norm_words, COUNT_OF(norm_words), MODEL_usage[k])) >= 0) m->final_norm = w;
            break;
        case MD_HEAD: head = read_word_stmt(c, st, head_words, COUNT_OF(head_words), MODEL_usage[k]); break;
        case MD_LOSS: loss = read_word_stmt(c, st, loss_words, COUNT_OF(loss_words), MODEL_usage[k]); break;
        }
        if (field) {
            if (read_count_stmt(c, st, 1, max, &n, MODEL_usage[k])) {
                *field = n;
                c->have_model_key[k] = 1;
            } else {
                c->have_model_key[k] = -1;
            }
            if (dim != DIM_COUNT) m->dim_loc[dim] = stmt_span(st);
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
        missing = add_missing(c, missing, arena_printf(c->arena, "`%s`", MODEL_names[k]));
    }
    if (!seen[MD_REPEAT]) missing = add_missing(c, missing, "`repeat layers { block ...; }`");
    if (*missing)
        diag_error(sec->key_loc,
                   attention ? "a transformer needs vocab, seq, hidden, heads, ffn, layers and a repeated block"
                             : NULL,
                   "`model %s` is missing %s", m->name, missing);

    /* Attention shape: head_dim * heads == hidden, kv_heads divides heads. */
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
                diag_error(stmt_span(seen[MD_HEAD_DIM]),
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
            diag_error(m->dim_loc[DIM_HEADS], divisor_hint(c, "heads", m->hidden, m->heads),
                       "hidden = %" PRId64 " does not divide by heads = %" PRId64, m->hidden, m->heads);
            c->dims_ok = 0;
        } else {
            m->head_dim = m->hidden / m->heads;
        }
        if (seen[MD_KV_HEADS]) {
            if (c->have_model_key[MD_KV_HEADS] != 1) {
                c->dims_ok = 0;
            } else if (m->kv_heads > m->heads || m->heads % m->kv_heads != 0) {
                diag_error(stmt_span(seen[MD_KV_HEADS]), divisor_hint(c, "kv_heads", m->heads, m->kv_heads),
                           "heads = %" PRId64 " does not divide by kv_heads = %" PRId64
                           " (each key/value head serves a whole group of query heads)",
                           m->heads, m->kv_heads);
                c->dims_ok = 0;
            }
        } else {
            m->kv_heads = m->heads;
        }
    }

    /* Embedding, head, loss. */
    if (seen[MD_HEAD] && m->tied_head && !m->has_embed)
        diag_error(stmt_span(seen[MD_HEAD]), "add `embed;`, or write `head untied;`",
                   "a tied head shares the embedding matrix, but the model has no `embed`");
    if (seen[MD_LOSS] && m->has_loss && !m->has_head)
        diag_error(stmt_span(seen[MD_LOSS]), "add `head untied;` (or `head tied;`)",
                   "`loss cross_entropy` needs a head that produces the vocab logits");
}

/* ------------------------------------------------------------ train */

static void check_optimizer(Check *c, const Stmt *st)
{
    Train *t = &c->plan->train;
    if (!check_shape(c, st, 1, 64, BODY_NO, "optimizer adamw lr 3e-4 beta1 0.9 beta2 0.95;")) return;
    int kind = read_word(c, "optimizer", &st->values[0], optimizer_words, COUNT_OF(optimizer_words));
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
        int p = name->kind == VAL_WORD ? word_index(name->text, opt_param_names, OP_COUNT) : -1;
        if (p < 0) {
            if (name->kind == VAL_WORD)
                diag_error(name->loc, did_you_mean(c, name->text, opt_param_names, OP_COUNT),
                           "unknown optimizer setting `%s`", name->text);
            else
                diag_error(name->loc, "settings come in pairs: `lr 3e-4 beta1 0.9 ...`",
                           "expected an optimizer setting name, got `%s`", value_text(c, name));
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
        case OP_LR: read_real(c, "lr", v, 0, 1, 10, 0, &t->lr); break;
        case OP_BETA1: read_real(c, "beta1", v, 0, 0, 1, 1, &t->beta1); break;
        case OP_BETA2: read_real(c, "beta2", v, 0, 0, 1, 1, &t->beta2); break;
        case OP_EPS: read_real(c, "eps", v, 0, 1, 1, 0, &t->eps); break;
        case OP_WEIGHT_DECAY: read_real(c, "weight_decay", v, 0, 0, 10, 0, &t->weight_decay); break;
        case OP_MOMENTUM: read_real(c, "momentum", v, 0, 0, 1, 1, &t->momentum); break;
        }
    }
    if (!given[OP_LR])
        diag_error(st->values[0].loc, arena_printf(c->arena, "write it like `optimizer %s lr 3e-4;`",
                                                   optimizer_words[kind]),
                   "the optimizer needs a learning rate `lr`");
}

static void check_precision(Check *c, const Stmt *st)
{
    Train *t = &c->plan->train;
    t->precision_loc = stmt_span(st);
    if (!check_shape(c, st, 1, 3, BODY_NO, "precision bf16 master fp32;")) return;
    int p = read_word(c, "precision", &st->values[0], precision_words, COUNT_OF(precision_words));
    if (p < 0) return;
    t->precision = p;
    t->master_fp32 = 0;
    if (st->nvalues == 1) return;
    const Value *m = &st->values[1];
    if (m->kind != VAL_WORD || strcmp(m->text, "master") != 0) {
        diag_error(m->loc, "write it like `precision bf16 master fp32;`", "unexpected `%s` after `precision %s`",
                   value_text(c, m), precision_words[p]);
        return;
    }
    if (st->nvalues < 3 || st->values[2].kind != VAL_WORD || strcmp(st->values[2].text, "fp32") != 0) {
        diag_error(st->nvalues < 3 ? m->loc : st->values[2].loc, "write `master fp32`",
                   "master weights are kept in fp32");
        return;
    }
    if (p == PREC_FP32) {
        diag_error(loc_join(m->loc, st->values[2].loc), "write `precision fp32;` or `precision bf16 master fp32;`",
                   "fp32 weights are their own master copy");
        return;
    }
    t->master_fp32 = 1;
}

static void check_train(Check *c, const Stmt *sec)
{
    Train *t = &c->plan->train;
    t->loc = sec->key_loc;
    t->steps = 10;
    t->seed = 1234;
    check_shape(c, sec, 0, 0, BODY_YES, "train { batch 8; micro_batch 2; ... }");
    const Stmt *seen[TRAIN_COUNT] = {0}, *suggested[TRAIN_COUNT] = {0};
    for (int i = 0; i < sec->body.count; i++) {
        const Stmt *st = sec->body.items[i];
        int k = word_index(st->key, TRAIN_names, TRAIN_COUNT);
        if (k < 0) {
            int guess = unknown_key(c, st, "`train`", TRAIN_names, TRAIN_COUNT);
            if (guess >= 0) suggested[guess] = st;
            continue;
        }
        if (!first_of(&seen[k], st, "`train`")) continue;
        int64_t n;
        switch (k) {
        case TR_BATCH:
            t->batch_loc = stmt_span(st);
            if (read_count_stmt(c, st, 1, MAX_COUNT, &n, TRAIN_usage[k])) t->batch = n, c->have_batch = 1;
            break;
        case TR_MICRO_BATCH:
            t->micro_batch_loc = stmt_span(st);
            if (read_count_stmt(c, st, 1, MAX_COUNT, &n, TRAIN_usage[k]))
                t->micro_batch = n, c->have_micro_batch = 1;
            break;
        case TR_MICRO_BATCHES:
            t->micro_batches_loc = stmt_span(st);
            if (read_count_stmt(c, st, 1, MAX_COUNT, &n, TRAIN_usage[k]))
                t->micro_batches = n, c->have_micro_batches = 1;
            else
                c->have_micro_batches = -1;
            break;
        case TR_SEQ:
            c->train_seq_loc = stmt_span(st);
            if (read_count_stmt(c, st, 1, MAX_DIM, &n, TRAIN_usage[k])) {
                c->have_train_seq = 1;
                if (!c->plan->model.seq) c->plan->model.seq = n;
                else if (c->plan->model.seq != n)
                    diag_error(c->train_seq_loc, "give `seq` in one place, or the same value in both",
                               "train seq = %" PRId64 " disagrees with the model's seq = %" PRId64, n,
                               c->plan->model.seq);
            }
            break;
        case TR_PRECISION: check_precision(c, st); break;
        case TR_OPTIMIZER: check_optimizer(c, st); break;
        case TR_STEPS:
            if (read_count_stmt(c, st, 1, MAX_COUNT, &n, TRAIN_usage[k])) t->steps = n;
            break;
        case TR_SEED:
            if (read_count_stmt(c, st, 0, INT64_MAX, &n, TRAIN_usage[k])) t->seed = (uint64_t)n;
            break;
        }
    }
    for (int k = 0; k < TRAIN_COUNT; k++)
        if (!seen[k] && suggested[k]) seen[k] = suggested[k];
    if (suggested[TR_MICRO_BATCHES] && !c->have_micro_batches) c->have_micro_batches = -1;
    const char *missing = "";
    if (!seen[TR_BATCH]) missing = add_missing(c, missing, "`batch`");
    if (!seen[TR_MICRO_BATCH]) missing = add_missing(c, missing, "`micro_batch`");
    if (!seen[TR_PRECISION]) missing = add_missing(c, missing, "`precision`");
    if (!seen[TR_OPTIMIZER]) missing = add_missing(c, missing, "`optimizer`");
    if (*missing)
        diag_error(sec->key_loc, "e.g. `batch 8; micro_batch 2; precision bf16 master fp32; optimizer adamw lr 3e-4;`",
                   "`train` is missing %s", missing);
}

/* ------------------------------------------------------------ mesh */

static void check_mesh(Check *c, const Stmt *sec)
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
        if (!read_count_stmt(c, st, 1, MAX_WORLD, &n, "dp 2;")) c->mesh_ok = 0, n = 1;
        axis_stmt[mesh->naxes] = st;
        mesh->axes[mesh->naxes++] = (MeshAxis){.name = st->key, .size = (int)n, .loc = stmt_span(st)};
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
        diag_error(v->loc, NULL, "expected a mesh axis name, got `%s`", value_text(c, v));
        return -1;
    }
    int a = mesh_axis(c->plan, v->text);
    if (a >= 0) return a;
    const char *names[PARC_MAX_AXES];
    for (int i = 0; i < mesh->naxes; i++) names[i] = mesh->axes[i].name;
    const char *best = diag_closest(v->text, names, mesh->naxes);
    const char *hint = best ? arena_printf(c->arena, "did you mean `%s`?", best)
                            : mesh->naxes ? arena_printf(c->arena, "the mesh axes are %s",
                                                         word_list(c, names, mesh->naxes))
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
                   value_text(c, kw));
        return 0;
    }
    if (i + 1 >= st->nvalues) {
        diag_error(kw->loc, "gpipe, 1f1b or interleaved N", "`schedule` needs a kind");
        return 0;
    }
    int kind = read_word(c, "schedule", &st->values[i + 1], schedule_words + 1, COUNT_OF(schedule_words) - 1);
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
        if (!read_count(c, &fake, &st->values[i + 2], 2, 64, &v)) return 0;
        c->interleave = (int)v;
        c->interleave_loc = st->values[i + 2].loc;
    } else if (n_after > 0) {
        diag_error(st->values[i + 2].loc, NULL, "unexpected `%s` after `%s`", value_text(c, &st->values[i + 2]),
                   schedule_words[kind]);
        return 0;
    }
    l->schedule = kind;
    l->schedule_loc = loc_join(kw->loc, st->values[st->nvalues - 1].loc);
    return 1;
}

static void check_rule(Check *c, const Stmt *st)
{
    Layout *l = &c->plan->layout;
    int d = word_index(st->key, mappable_names, COUNT_OF(mappable_names));
    if (d < 0) {
        int other = word_index(st->key, dim_names, DIM_COUNT);
        if (other == DIM_HEAD_DIM || other == DIM_QKV)
            diag_error(st->key_loc, "map `heads -> AXIS` instead", "`%s` cannot be mapped to an axis", st->key);
        else if (other == DIM_FLAT)
            diag_error(st->key_loc, "write `zero 3 over dp;`", "`flat` is sharded by ZeRO, not by a rule");
        else
            diag_error(st->key_loc, did_you_mean(c, st->key, mappable_names, COUNT_OF(mappable_names)),
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
    if (st->nvalues > 1) {
        if (dim != DIM_LAYERS)
            diag_error(st->values[1].loc, "a rule is `DIM -> AXIS;`; `layers -> AXIS` may add `schedule KIND`",
                       "unexpected `%s`: only `layers -> AXIS` takes a schedule", value_text(c, &st->values[1]));
        else if (c->schedule_stmt)
            diag_error(st->values[1].loc, NULL, "the schedule is already given");
        else if (read_schedule(c, st, 1))
            c->schedule_stmt = st;
    }
    if (axis < 0) return;
    l->dim_axis[dim] = axis;
    l->dim_axis_loc[dim] = loc_join(st->key_loc, st->values[0].loc);
}

static void check_stage(Check *c, const Stmt *st)
{
    if (!c->plan->layout.stage_loc.file) c->plan->layout.stage_loc = stmt_span(st);
    if (!check_shape(c, st, 1, 1, BODY_YES, "stage 0 { layers 0..15; embed; }")) return;
    ARR_PUSH(c->arena, c->stage_stmts, c->nstage_stmts, c->cap_stage_stmts, st);
}

static void check_layout(Check *c, const Stmt *sec)
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
        int k = word_index(st->key, LAYOUT_names, LAYOUT_COUNT);
        if (k < 0) {
            if (word_index(st->key, dim_names, DIM_COUNT) >= 0) {
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
            unknown_key(c, st, "`layout`", cands, n);
            continue;
        }
        if (k == LY_STAGE) {
            check_stage(c, st);
            continue;
        }
        if (k == LY_FSDP && seen[LY_ZERO]) k = LY_ZERO; /* fsdp is zero 3: one of them */
        if (k == LY_ZERO && seen[LY_FSDP]) k = LY_FSDP;
        if (!first_of(&seen[k], st, "`layout`")) continue;
        switch (k) {
        case LY_SP:
            l->sp_loc = stmt_span(st);
            if (!check_shape(c, st, 2, 2, BODY_NO, LAYOUT_usage[k])) break;
            if (st->values[0].kind != VAL_WORD || strcmp(st->values[0].text, "over") != 0) {
                diag_error(st->values[0].loc, "write it like `sequence_parallel over tp;`",
                           "expected `over`, got `%s`", value_text(c, &st->values[0]));
                break;
            }
            if ((l->sp_axis = read_axis(c, &st->values[1])) >= 0) c->sp_stmt = st;
            break;
        case LY_ZERO:
        case LY_FSDP: {
            l->zero_loc = stmt_span(st);
            int nfixed = k == LY_ZERO ? 1 : 0;
            if (!check_shape(c, st, nfixed + 2, nfixed + 2, BODY_NO, LAYOUT_usage[k])) break;
            int64_t stage = 3;
            if (k == LY_ZERO && !read_count(c, st, &st->values[0], 0, 3, &stage)) break;
            const Value *over = &st->values[nfixed];
            if (over->kind != VAL_WORD || strcmp(over->text, "over") != 0) {
                diag_error(over->loc, arena_printf(c->arena, "write it like `%s`", LAYOUT_usage[k]),
                           "expected `over`, got `%s`", value_text(c, over));
                break;
            }
            int axis = read_axis(c, &st->values[nfixed + 1]);
            if (axis < 0) break;
            l->zero_stage = (int)stage;
            l->zero_axis = stage > 0 ? axis : -1;
            c->zero_stmt = st;
            break;
        }
        case LY_RECOMPUTE: {
            l->recompute_loc = stmt_span(st);
            int w = read_word_stmt(c, st, recompute_words, COUNT_OF(recompute_words), LAYOUT_usage[k]);
            if (w >= 0) l->recompute = w;
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

/* ------------------------------------------------------------ cross checks */

/* A dim of size n split over axis: reports when it does not divide. */
static int check_divides(Check *c, const char *dim_name, int64_t n, int axis, SrcLoc loc, const char *why)
{
    if (axis < 0 || n <= 0) return 1;
    const MeshAxis *a = &c->plan->mesh.axes[axis];
    if (n % a->size == 0) return 1;
    diag_error(loc, divisor_hint(c, a->name, n, a->size), "%s = %" PRId64 " does not divide by %s = %d%s", dim_name,
               n, a->name, a->size, why ? why : "");
    return 0;
}

static void check_dims_against_mesh(Check *c)
{
    Plan *p = c->plan;
    Model *m = &p->model;
    Layout *l = &p->layout;
    /* The data axis and the pipeline axis carry nothing else. */
    for (int e = 0; e < 2; e++) {
        Dim owner = e == 0 ? DIM_BATCH : DIM_LAYERS;
        int axis = l->dim_axis[owner];
        if (axis < 0) continue;
        for (int i = 0; i < COUNT_OF(mappable_dims); i++) {
            Dim d = mappable_dims[i];
            if (d == owner || l->dim_axis[d] != axis) continue;
            if (e == 1 && d == DIM_BATCH) continue; /* reported once, by the batch pass */
            diag_error(l->dim_axis_loc[d],
                       e == 0 ? "the data-parallel axis carries only `batch` (and ZeRO shards)"
                              : "the pipeline axis carries only `layers`",
                       "`%s` and `%s` both map to `%s`", dim_names[d], dim_names[owner], p->mesh.axes[axis].name);
        }
    }
    int attention = m->block.kind == BLOCK_TRANSFORMER;
    struct {
        Dim dim;
        int64_t n;
        int known;
    } splits[] = {
        {DIM_HEADS, m->heads, c->have_model_key[MD_HEADS] == 1 && attention},
        {DIM_FFN, m->ffn, c->have_model_key[MD_FFN] == 1},
        {DIM_VOCAB, m->vocab, c->have_model_key[MD_VOCAB] == 1},
        {DIM_HIDDEN, m->hidden, c->have_model_key[MD_HIDDEN] == 1},
        {DIM_SEQ, m->seq, m->seq > 0},
    };
    for (int i = 0; i < COUNT_OF(splits); i++) {
        Dim d = splits[i].dim;
        if (l->dim_axis[d] < 0) continue;
        if (d == DIM_HEADS && !attention) {
            diag_error(l->dim_axis_loc[d], "split the MLP with `ffn -> AXIS;`",
                       "an `mlp` block has no attention heads to split");
            continue;
        }
        if (d == DIM_VOCAB && !m->has_embed && !m->has_head) {
            diag_error(l->dim_axis_loc[d], NULL, "the model has no embedding or head: there is no vocab to split");
            continue;
        }
        if (!splits[i].known) continue;
        check_divides(c, dim_names[d], splits[i].n, l->dim_axis[d], l->dim_axis_loc[d], NULL);
    }
    if (attention && c->dims_ok && l->dim_axis[DIM_HEADS] >= 0 && m->heads % plan_dim_parts(p, DIM_HEADS) == 0)
        check_divides(c, "kv_heads", m->kv_heads, l->dim_axis[DIM_HEADS], l->dim_axis_loc[DIM_HEADS],
                      " (key/value heads split with the heads)");

    /* Sequence parallelism rides on the tensor axis. */
    int tensor_rule_failed = (c->dim_rule[DIM_HEADS] && l->dim_axis[DIM_HEADS] < 0) ||
                             (c->dim_rule[DIM_FFN] && l->dim_axis[DIM_FFN] < 0);
    if (l->sp_axis >= 0 && !tensor_rule_failed) {
        int tensor_axis = l->dim_axis[DIM_HEADS] >= 0 ? l->dim_axis[DIM_HEADS] : l->dim_axis[DIM_FFN];
        const char *sp_name = p->mesh.axes[l->sp_axis].name;
        if (l->dim_axis[DIM_HEADS] != l->sp_axis && l->dim_axis[DIM_FFN] != l->sp_axis) {
            diag_error(l->sp_loc,
                       tensor_axis >= 0 ? arena_printf(c->arena, "the tensor axis is `%s`: write `sequence_parallel over %s;`",
                                                       p->mesh.axes[tensor_axis].name, p->mesh.axes[tensor_axis].name)
                                        : arena_printf(c->arena, "map `heads -> %s;` and `ffn -> %s;` first", sp_name,
                                                       sp_name),
                       "sequence parallelism runs over the tensor axis (the one heads/ffn map to), not `%s`", sp_name);
        } else if (l->dim_axis[DIM_SEQ] >= 0) {
            diag_error(l->sp_loc, "keep one of them", "`seq` is already split by the rule `seq -> %s`",
                       p->mesh.axes[l->dim_axis[DIM_SEQ]].name);
        } else if (m->seq > 0) {
            check_divides(c, "seq", m->seq, l->sp_axis, l->sp_loc, " (sequence parallelism splits seq)");
        }
    }

    /* ZeRO shards over the data axis. */
    int batch_rule_failed = c->dim_rule[DIM_BATCH] && l->dim_axis[DIM_BATCH] < 0;
    if (c->zero_stmt && l->zero_stage > 0 && !batch_rule_failed) {
        int batch_axis = l->dim_axis[DIM_BATCH];
        if (l->zero_axis != batch_axis) {
            const char *name = p->mesh.axes[l->zero_axis].name;
            diag_error(l->zero_loc,
                       batch_axis >= 0 ? arena_printf(c->arena, "batch maps to `%s`: write `over %s`",
                                                      p->mesh.axes[batch_axis].name, p->mesh.axes[batch_axis].name)
                                       : arena_printf(c->arena, "add `batch -> %s;`", name),
                       "ZeRO shards over the data-parallel axis (the one `batch` maps to), not `%s`", name);
        }
    }
}

static void check_batch(Check *c)
{
    Plan *p = c->plan;
    Train *t = &p->train;
    if (!c->have_batch || !c->have_micro_batch || c->have_micro_batches < 0) return;
    int64_t dp = plan_dp(p);
    const char *dp_name = p->layout.dim_axis[DIM_BATCH] >= 0 ? p->mesh.axes[p->layout.dim_axis[DIM_BATCH]].name : "dp";
    if (c->have_micro_batches) {
        int64_t prod;
        if (__builtin_mul_overflow(t->micro_batch, t->micro_batches, &prod) || __builtin_mul_overflow(prod, dp, &prod))
            prod = -1;
        if (prod != t->batch) {
            diag_error(t->micro_batches_loc,
                       t->batch % (t->micro_batch * dp) == 0
                           ? arena_printf(c->arena, "micro_batches %" PRId64 " would; or drop `micro_batches` to derive it",
                                          t->batch / (t->micro_batch * dp))
                           : "or drop `micro_batches` to derive it",
                       "batch = %" PRId64 " but micro_batch × micro_batches × %s = %" PRId64 " × %" PRId64 " × %" PRId64
                       " = %s",
                       t->batch, dp_name, t->micro_batch, t->micro_batches, dp,
                       prod < 0 ? "(overflow)" : arena_printf(c->arena, "%" PRId64, prod));
            c->have_micro_batches = -1;
        }
        return;
    }
    int64_t unit;
    if (__builtin_mul_overflow(t->micro_batch, dp, &unit) || t->batch % unit != 0) {
        const char *hint;
        if (__builtin_mul_overflow(t->micro_batch, dp, &unit)) {
            hint = NULL;
        } else {
            int64_t lo = t->batch / unit * unit, hi = lo + unit;
            const char *mb = "";
            if (t->batch % dp == 0) {
                int64_t below, above;
                nearest_divisors(t->batch / dp, t->micro_batch, &below, &above);
                if (below && above)
                    mb = arena_printf(c->arena, "; or micro_batch %" PRId64 " or %" PRId64, below, above);
                else if (below || above)
                    mb = arena_printf(c->arena, "; or micro_batch %" PRId64, below ? below : above);
            }
            hint = lo > 0 ? arena_printf(c->arena, "batch %" PRId64 " or %" PRId64 " would%s", lo, hi, mb)
                          : arena_printf(c->arena, "batch %" PRId64 " would%s", hi, mb);
        }
        diag_error(t->batch_loc, hint,
                   "batch = %" PRId64 " is not a multiple of micro_batch × %s = %" PRId64 " × %" PRId64, t->batch,
                   dp_name, t->micro_batch, dp);
        c->have_micro_batches = -1;
        return;
    }
    t->micro_batches = t->batch / unit;
    c->have_micro_batches = 1;
}

/* micro_batch values that give a micro_batches count satisfying the schedule. */
static const char *micro_batch_hint(Check *c, int stages, int multiple)
{
    Train *t = &c->plan->train;
    int64_t dp = plan_dp(c->plan);
    if (t->batch % dp != 0) return NULL;
    int64_t per_rank = t->batch / dp;
    for (int64_t m = t->micro_batch - 1; m >= 1; m--) {
        if (per_rank % m) continue;
        int64_t mbs = per_rank / m;
        if (multiple ? mbs % stages == 0 : mbs >= stages)
            return arena_printf(c->arena, "micro_batch %" PRId64 " gives %" PRId64 " micro-batches", m, mbs);
    }
    return arena_printf(c->arena, "raise batch to %" PRId64 " (stages × micro_batch × dp)",
                        (int64_t)stages * t->micro_batch * dp);
}

static void fill_even_stages(Layout *l, int64_t layers)
{
    int per_chunk_count = l->stages * l->virtual_stages;
    int64_t per = layers / per_chunk_count, rest = layers % per_chunk_count;
    int first = 0;
    for (int s = 0; s < l->stages; s++) {
        /* On an uneven split (only after an error) the first stages take one more. */
        int n = (int)(per + (s < rest ? 1 : 0));
        l->stage_first[s] = first;
        l->stage_layers[s] = n;
        first += n;
    }
}

static void check_stage_blocks(Check *c, int *explicit_layers)
{
    Plan *p = c->plan;
    Layout *l = &p->layout;
    Model *m = &p->model;
    int stages = l->stages;
    const Stmt *by_stage[PARC_MAX_STAGES] = {0};
    const Value *range_of[PARC_MAX_STAGES] = {0};
    const Stmt *embed_at = NULL, *head_at = NULL;
    int ok = 1, any_layers = 0;
    for (int i = 0; i < c->nstage_stmts; i++) {
        const Stmt *st = c->stage_stmts[i];
        int64_t s;
        if (!read_count(c, st, &st->values[0], 0, PARC_MAX_STAGES - 1, &s)) {
            ok = 0;
            continue;
        }
        if (l->pp_axis >= 0 && s >= stages) {
            diag_error(st->values[0].loc, NULL, "stage %" PRId64 " is out of range: `%s` has %d stages (0..%d)", s,
                       p->mesh.axes[l->pp_axis].name, stages, stages - 1);
            ok = 0;
            continue;
        }
        if (by_stage[s]) {
            diag_error(st->key_loc, NULL, "duplicate `stage %" PRId64 "`", s);
            diag_note(by_stage[s]->key_loc, NULL, "first given here");
            ok = 0;
            continue;
        }
        by_stage[s] = st;
        const Stmt *seen_layers = NULL, *seen_embed = NULL, *seen_head = NULL;
        for (int j = 0; j < st->body.count; j++) {
            const Stmt *b = st->body.items[j];
            static const char *const stage_keys[] = {"layers", "embed", "head"};
            int k = word_index(b->key, stage_keys, 3);
            if (k < 0) {
                unknown_key(c, b, "`stage`", stage_keys, 3);
                ok = 0;
                continue;
            }
            const Stmt **seen = k == 0 ? &seen_layers : k == 1 ? &seen_embed : &seen_head;
            if (!first_of(seen, b, "`stage`")) {
                ok = 0;
                continue;
            }
            if (k == 0) {
                if (!check_shape(c, b, 1, 1, BODY_NO, "layers 0..15;")) {
                    ok = 0;
                    continue;
                }
                const Value *v = &b->values[0];
                if (v->kind != VAL_RANGE && v->kind != VAL_NUMBER) {
                    diag_error(v->loc, "write a layer range like `layers 0..15;` (both ends included)",
                               "`layers` in a stage takes a range, got `%s`", value_text(c, v));
                    ok = 0;
                    continue;
                }
                range_of[s] = v;
                any_layers = 1;
                continue;
            }
            if (!check_shape(c, b, 0, 0, BODY_NO, k == 1 ? "embed;" : "head;")) {
                ok = 0;
                continue;
            }
            if (k == 1 && !m->has_embed) {
                diag_error(b->key_loc, NULL, "the model has no embedding to place");
                ok = 0;
                continue;
            }
            if (k == 2 && !m->has_head) {
                diag_error(b->key_loc, NULL, "the model has no head to place");
                ok = 0;
                continue;
            }
            const Stmt **at = k == 1 ? &embed_at : &head_at;
            if (*at) {
                diag_error(b->key_loc, "the embedding and the head each live on one stage", "`%s` is already on another stage",
                           b->key);
                diag_note((*at)->key_loc, NULL, "placed here");
                ok = 0;
                continue;
            }
            *at = b;
            if (k == 1) l->embed_stage = (int)s;
            else l->head_stage = (int)s;
        }
    }
    *explicit_layers = any_layers;
    if (!any_layers || !ok) {
        if (any_layers) *explicit_layers = -1;
        return;
    }
    if (l->schedule == SCHED_INTERLEAVED) return; /* reported by the caller */
    /* Explicit assignment: every stage a contiguous range, all layers once, in order. */
    int64_t layers = m->layers;
    if (c->have_model_key[MD_LAYERS] != 1) {
        *explicit_layers = -1;
        return;
    }
    int *owner = arena_alloc(c->arena, (size_t)layers * sizeof(int));
    for (int64_t i = 0; i < layers; i++) owner[i] = -1;
    int ranges_known = 1; /* every stage's range was read: gaps are meaningful */
    int missing_reported = 0;
    for (int s = 0; s < stages; s++) {
        if (!range_of[s]) {
            /* One error for all stages without layers, as runs: "stages 1, 3..7". */
            if (!missing_reported) {
                const char *runs = "";
                int count = 0;
                for (int a = s; a < stages; a++) {
                    if (range_of[a] || (a > s && !range_of[a - 1])) continue;
                    int b = a;
                    while (b + 1 < stages && !range_of[b + 1]) b++;
                    runs = arena_printf(c->arena, "%s%s%d%s", runs, *runs ? ", " : "", a,
                                        b > a ? arena_printf(c->arena, "..%d", b) : "");
                    count += b - a + 1;
                }
                diag_error(l->stage_loc, "with explicit stages every stage needs `stage N { layers A..B; }`",
                           "stage%s %s %s no layers", count > 1 ? "s" : "", runs, count > 1 ? "have" : "has");
                missing_reported = 1;
            }
            ok = 0;
            ranges_known = 0;
            continue;
        }
        const Value *v = range_of[s];
        int64_t lo, hi;
        Stmt fake = {.key = "layers"};
        Number hi_num = v->kind == VAL_RANGE ? v->hi : v->num;
        Value lo_v = {.kind = VAL_NUMBER, .loc = v->num.loc, .num = v->num};
        Value hi_v = {.kind = VAL_NUMBER, .loc = hi_num.loc, .num = hi_num};
        if (!read_count(c, &fake, &lo_v, 0, MAX_DIM, &lo) || !read_count(c, &fake, &hi_v, 0, MAX_DIM, &hi)) {
            ok = 0;
            ranges_known = 0;
            continue;
        }
        if (lo > hi) {
            diag_error(v->loc, NULL, "the range %" PRId64 "..%" PRId64 " is empty (ranges go low..high, both included)",
                       lo, hi);
            ok = 0;
            ranges_known = 0;
            continue;
        }
        if (hi >= layers) {
            diag_error(v->loc, NULL, "layer %" PRId64 " is out of range: the model has %" PRId64 " layers (0..%" PRId64 ")",
                       hi, layers, layers - 1);
            ok = 0;
            hi = layers - 1; /* the part in range still counts for gaps and overlaps */
        }
        int overlap_reported = 0;
        for (int64_t x = lo; x <= hi; x++) {
            if (owner[x] >= 0 && owner[x] != s) {
                if (!overlap_reported)
                    diag_error(v->loc, "every layer lives on exactly one stage",
                               "layer %" PRId64 " is on stage %d and on stage %d", x, owner[x], s);
                overlap_reported = 1;
                ok = 0;
                continue;
            }
            owner[x] = s;
        }
        l->stage_first[s] = (int)lo;
        l->stage_layers[s] = lo <= hi ? (int)(hi - lo + 1) : 0;
    }
    for (int64_t x = 0; x < layers && ranges_known; x++) {
        if (owner[x] >= 0) continue;
        int64_t end = x;
        while (end + 1 < layers && owner[end + 1] < 0) end++;
        /* Point at the stage whose range ends right before the gap, else the first. */
        SrcLoc at = l->stage_loc;
        for (int s = 0; s < stages; s++)
            if (range_of[s] && l->stage_first[s] + l->stage_layers[s] == x) at = range_of[s]->loc;
        if (end == x)
            diag_error(at, "every layer lives on exactly one stage", "layer %" PRId64 " is on no stage", x);
        else
            diag_error(at, "every layer lives on exactly one stage",
                       "layers %" PRId64 "..%" PRId64 " are on no stage", x, end);
        ok = 0;
        x = end;
    }
    for (int s = 1; s < stages && ok; s++) {
        if (l->stage_first[s] != l->stage_first[s - 1] + l->stage_layers[s - 1]) {
            diag_error(range_of[s]->loc, "stage s + 1 holds the layers right after stage s",
                       "stage %d holds layers %d..%d, which do not follow stage %d's %d..%d", s, l->stage_first[s],
                       l->stage_first[s] + l->stage_layers[s] - 1, s - 1, l->stage_first[s - 1],
                       l->stage_first[s - 1] + l->stage_layers[s - 1] - 1);
            ok = 0;
        }
    }
    if (!ok) *explicit_layers = -1;
}

static void check_pipeline(Check *c)
{
    Plan *p = c->plan;
    Layout *l = &p->layout;
    Model *m = &p->model;
    Train *t = &p->train;
    l->pp_axis = l->dim_axis[DIM_LAYERS];
    l->stages = plan_axis_size(p, l->pp_axis);
    int too_many_stages = l->stages > PARC_MAX_STAGES;
    if (too_many_stages) {
        diag_error(l->dim_axis_loc[DIM_LAYERS], NULL, "%d pipeline stages; parc handles at most %d", l->stages,
                   PARC_MAX_STAGES);
        l->stages = 1;
        l->pp_axis = -1;
        c->schedule_stmt = NULL;
        c->nstage_stmts = 0;
        l->schedule = SCHED_NONE;
    }
    if (c->schedule_stmt && l->pp_axis < 0) {
        if (!c->dim_rule[DIM_LAYERS])
            diag_error(l->schedule_loc, "add `layers -> pp schedule ...;` with a pipeline axis in the mesh",
                       "a schedule needs a pipeline axis: no `layers -> AXIS` rule");
        l->schedule = SCHED_NONE;
    }
    if (l->pp_axis >= 0 && l->schedule == SCHED_NONE) l->schedule = SCHED_1F1B;
    l->virtual_stages = l->schedule == SCHED_INTERLEAVED ? c->interleave : 1;
    l->embed_stage = 0;
    l->head_stage = l->stages - 1;

    int explicit_layers = 0;
    if (c->nstage_stmts > 0) {
        if (l->pp_axis < 0) {
            diag_error(l->stage_loc, "add a pipeline axis to the mesh and `layers -> pp;`",
                       "`stage` blocks need a pipeline axis: no `layers -> AXIS` rule");
        } else if (l->schedule == SCHED_INTERLEAVED) {
            diag_error(l->stage_loc, "interleaved schedules split layers evenly; use 1f1b or gpipe for explicit stages",
                       "explicit `stage` blocks are not allowed with an interleaved schedule");
        } else {
            check_stage_blocks(c, &explicit_layers);
        }
    }
    int have_layers = c->have_model_key[MD_LAYERS] == 1;
    if (explicit_layers == 1) {
        l->uneven = 1;
    } else if (explicit_layers == 0 && have_layers) {
        int64_t chunks = (int64_t)l->stages * l->virtual_stages;
        if (m->layers % chunks != 0) {
            const char *pp = l->pp_axis >= 0 ? p->mesh.axes[l->pp_axis].name : "pp";
            if (l->virtual_stages > 1) {
                const char *works = "";
                for (int v = 2; v <= 8; v++)
                    if (m->layers % ((int64_t)l->stages * v) == 0) works = arena_printf(c->arena, "%s%s%d", works, *works ? ", " : "", v);
                diag_error(c->interleave_loc,
                           *works ? arena_printf(c->arena, "interleaved %s would", works)
                                  : "use fewer stages or virtual stages",
                           "layers = %" PRId64 " does not divide into %s = %d stages × %d virtual stages = %" PRId64
                           " chunks",
                           m->layers, pp, l->stages, l->virtual_stages, chunks);
            } else {
                const char *hint = divisor_hint(c, pp, m->layers, l->stages);
                hint = arena_printf(c->arena, "%s%sor assign layers explicitly with `stage N { layers A..B; }`",
                                    hint ? hint : "", hint ? "; " : "");
                diag_error(l->dim_axis_loc[DIM_LAYERS], hint,
                           "layers = %" PRId64 " does not divide by %s = %d pipeline stages", m->layers, pp,
                           l->stages);
            }
        }
    }
    if (explicit_layers != 1) {
        if (have_layers && l->stages <= m->layers) {
            fill_even_stages(l, m->layers);
        } else {
            /* Only after an error was reported (no layers, or more stages than layers). */
            for (int s = 0; s < l->stages; s++) l->stage_first[s] = 0, l->stage_layers[s] = 0;
        }
    }
    if (l->virtual_stages > 1 && l->stages > 0 && have_layers) {
        /* Interleaved: stage s holds chunks c*stages + s; stage_layers is per chunk. */
        int64_t per = m->layers / ((int64_t)l->stages * l->virtual_stages);
        for (int s = 0; s < l->stages; s++) l->stage_first[s] = (int)(s * per), l->stage_layers[s] = (int)per;
    }

    /* The schedule's demands on micro-batches. */
    if (l->pp_axis >= 0 && c->have_micro_batches == 1) {
        SrcLoc at = t->micro_batches_loc.file ? t->micro_batches_loc : t->micro_batch_loc;
        if (l->schedule == SCHED_1F1B && t->micro_batches < l->stages)
            diag_error(at, micro_batch_hint(c, l->stages, 0),
                       "1f1b over %d stages needs at least %d micro-batches per step, got %" PRId64, l->stages,
                       l->stages, t->micro_batches);
        if (l->schedule == SCHED_INTERLEAVED && t->micro_batches % l->stages != 0)
            diag_error(at, micro_batch_hint(c, l->stages, 1),
                       "interleaved over %d stages needs micro_batches divisible by %d, got %" PRId64, l->stages,
                       l->stages, t->micro_batches);
    }
}

static void check_mesh_against_cluster(Check *c)
{
    Plan *p = c->plan;
    if (!c->mesh_ok || !c->have_nodes || !c->have_gpn || p->mesh.naxes == 0) return;
    int64_t gpus = (int64_t)p->cluster.nodes * p->cluster.gpus_per_node;
    if (p->mesh.world == gpus) return;
    const char *sizes = "";
    for (int a = 0; a < p->mesh.naxes; a++)
        sizes = arena_printf(c->arena, "%s%s%s %d", sizes, a ? " × " : "", p->mesh.axes[a].name, p->mesh.axes[a].size);
    diag_error(p->mesh.loc, arena_printf(c->arena, "the product of the axis sizes (%s) must be %" PRId64, sizes, gpus),
               "the mesh has %d ranks but the cluster has %" PRId64 " GPUs (%d node%s × %d)", p->mesh.world, gpus,
               p->cluster.nodes, p->cluster.nodes == 1 ? "" : "s", p->cluster.gpus_per_node);
}

/* ------------------------------------------------------------ entry points */

static void plan_defaults(Plan *plan, const char *path)
{
    memset(plan, 0, sizeof *plan);
    plan->file = path;
    for (int d = 0; d < DIM_COUNT; d++) plan->layout.dim_axis[d] = -1;
    plan->layout.pp_axis = plan->layout.sp_axis = plan->layout.zero_axis = -1;
    plan->layout.virtual_stages = 1;
    plan->layout.stages = 1;
    plan->train.steps = 10;
    plan->train.seed = 1234;
    plan->model.name = "model";
    cost_efficiency_defaults("generic", &plan->cluster.eff);
    plan->model.block = (BlockSpec){.kind = BLOCK_TRANSFORMER, .norm = NORM_LAYER, .mlp = MLP_GELU, .bias = 1,
                                    .causal = 1, .residual = 1};
}

int front_load_text(Arena *arena, const char *path, const char *text, Plan *plan)
{
    int errors_before = diag_error_count();
    path = arena_strdup(arena, path);
    text = arena_strdup(arena, text);
    plan_defaults(plan, path);
    Check check = {.arena = arena, .plan = plan, .file = path, .interleave = 1};
    Check *c = &check;
    c->include_stack[c->include_depth++] = canonical_path(c, path);

    StmtList top;
    if (parse_file(c, path, text, &top) != 0 || diag_error_count() > errors_before) return -1;

    /* Sections. */
    for (int i = 0; i < top.count; i++) {
        const Stmt *st = top.items[i];
        int k = word_index(st->key, SECTION_names, SECTION_COUNT);
        if (k < 0 || k == SEC_INCLUDE) {
            const char *best = diag_closest(st->key, SECTION_names, SEC_INCLUDE);
            diag_error(st->key_loc,
                       best ? arena_printf(c->arena, "did you mean `%s`?", best)
                            : "a plan has the sections `cluster`, `model`, `train`, `mesh` and `layout`",
                       "unknown section `%s`", st->key);
            continue;
        }
        if (!first_of(&c->section[k], st, "the plan")) continue;
    }
    /* Mesh and model first: layout names their axes and dims. */
    static const int order[] = {SEC_CLUSTER, SEC_MESH, SEC_MODEL, SEC_TRAIN, SEC_LAYOUT};
    for (int i = 0; i < COUNT_OF(order); i++) {
        const Stmt *sec = c->section[order[i]];
        if (!sec) {
            if (order[i] != SEC_LAYOUT)
                diag_error(file_loc(path), arena_printf(c->arena, "add `%s`", SECTION_usage[order[i]]),
                           "the plan has no `%s` section", SECTION_names[order[i]]);
            continue;
        }
        if (!sec->has_body) {
            check_shape(c, sec, 0, order[i] == SEC_MODEL ? 1 : 0, BODY_YES, SECTION_usage[order[i]]);
            c->section[order[i]] = NULL;
            continue;
        }
        switch (order[i]) {
        case SEC_CLUSTER: check_cluster(c, sec); break;
        case SEC_MESH: check_mesh(c, sec); break;
        case SEC_MODEL: check_model(c, sec); break;
        case SEC_TRAIN: check_train(c, sec); break;
        case SEC_LAYOUT: check_layout(c, sec); break;
        }
    }
    /* Cross checks. */
    check_mesh_against_cluster(c);
    if (c->mesh_ok) {
        check_dims_against_mesh(c);
        check_batch(c);
        check_pipeline(c);
    } else {
        fill_even_stages(&plan->layout, plan->model.layers > 0 ? plan->model.layers : 0);
    }
    return diag_error_count() > errors_before ? -1 : 0;
}

int front_load(Arena *arena, const char *path, Plan *plan)
{
    const char *why = NULL;
    char *text = read_whole_file(arena, path, &why);
    if (!text) {
        memset(plan, 0, sizeof *plan);
        diag_error((SrcLoc){0}, NULL, "cannot read `%s`: %s", path, why);
        return -1;
    }
    return front_load_text(arena, path, text, plan);
}
