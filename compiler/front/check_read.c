/*
 * check_read.c — reading statements and values of the syntax tree.
 *
 * Each reader takes a statement or a value, reports what is wrong with it
 * (shape, unit, range, spelling, with a hint) and, when it is right, gives the
 * value in base units.  They never abort: bad input is a diagnostic.
 */
#include "check.h"

#include <math.h>

/* ------------------------------------------------------------ small helpers */

/* A location naming a whole file (no line). */
SrcLoc check_file_loc(const char *path)
{
    SrcLoc loc = {.file = path};
    return loc;
}

SrcLoc check_loc_join(SrcLoc a, SrcLoc b)
{
    if (!a.file || !b.file || a.line != b.line || strcmp(a.file, b.file) != 0 || b.col < a.col) return a;
    a.len = b.col + b.len - a.col;
    return a;
}

SrcLoc check_stmt_span(const Stmt *st)
{
    SrcLoc loc = st->key_loc;
    for (int i = 0; i < st->nvalues; i++) loc = check_loc_join(loc, st->values[i].loc);
    return loc;
}

int check_word_index(const char *word, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(word, names[i]) == 0) return i;
    return -1;
}

/* "`a`, `b` or `c`" */
const char *check_word_list(Check *c, const char *const *names, int n)
{
    const char *s = "";
    for (int i = 0; i < n; i++)
        s = arena_printf(c->arena, "%s%s`%s`", s, i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
    return s;
}

const char *check_value_text(Check *c, const Value *v)
{
    switch (v->kind) {
    case VAL_WORD: return v->text;
    case VAL_STRING: return arena_printf(c->arena, "\"%s\"", v->text);
    case VAL_NUMBER: return v->unit ? arena_printf(c->arena, "%s %s", v->num.text, v->unit) : v->num.text;
    case VAL_RANGE: return arena_printf(c->arena, "%s..%s", v->num.text, v->hi.text);
    }
    return "?";
}

const char *check_did_you_mean(Check *c, const char *word, const char *const *names, int n)
{
    const char *best = diag_closest(word, names, n);
    if (best) return arena_printf(c->arena, "did you mean `%s`?", best);
    return arena_printf(c->arena, "expected %s", check_word_list(c, names, n));
}

/* Divisors of n nearest to `near` from below and above (0 when none). */
void check_nearest_divisors(int64_t n, int64_t near, int64_t *below, int64_t *above)
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
const char *check_divisor_hint(Check *c, const char *axis, int64_t n, int64_t size)
{
    int64_t below, above;
    check_nearest_divisors(n, size, &below, &above);
    if (below > 1 && above)
        return arena_printf(c->arena, "%s = %" PRId64 " or %" PRId64 " would", axis, below, above);
    if (above) return arena_printf(c->arena, "%s = %" PRId64 " would", axis, above);
    if (below) return arena_printf(c->arena, "%s = %" PRId64 " would", axis, below);
    return NULL;
}

/* "a, b" accumulation for "is missing ..." messages. */
const char *check_add_missing(Check *c, const char *list, const char *item)
{
    return *list ? arena_printf(c->arena, "%s, %s", list, item) : item;
}

/* ------------------------------------------------------------ statement shapes */

/* Checks a statement's form: no `->` (unless allowed), between min and max
 * values, a `{ }` block iff body == BODY_YES.  Reports each problem; returns 1
 * when the form is right. */
int check_shape(Check *c, const Stmt *st, int min_values, int max_values, int body, const char *usage)
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
            diag_error(extra->loc, hint, "`%s` takes no value, got `%s`", st->key, check_value_text(c, extra));
        else
            diag_error(extra->loc, hint, "unexpected `%s` after `%s %s`", check_value_text(c, extra), st->key,
                       check_value_text(c, before));
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

/* Features other planners offer and parc does not: a key or word spelled as
 * those tools spell it is told so, with what parc has instead, rather than
 * called unknown. */
static const struct {
    const char *word, *feature, *instead;
} unsupported_features[] = {
    {"experts", "a mixture of experts as a key of its own", "it is the block's MLP: `mlp moe experts 8 top 2;`"},
    {"moe", "a mixture of experts as a key of its own", "it is the block's MLP: `mlp moe experts 8 top 2;`"},
    {"expert_parallel", "expert parallelism", "split the MLP with `ffn -> AXIS;`"},
    {"context_parallel", "a statement for context parallelism",
     "context parallelism is the rule `seq -> AXIS;` on an axis of its own (attention gathers its qkv over it)"},
    {"fp8", "fp8 precision", "`precision bf16 master fp32;` or `precision fp16 master fp32;`"},
    {"offload", "offloading to host memory", "shard optimizer state with `zero 1 over AXIS;` (or 2, 3)"},
};

/* 1 after reporting `word` at loc as a feature parc does not offer. */
static int unsupported_feature(const char *word, SrcLoc loc)
{
    for (int i = 0; i < COUNT_OF(unsupported_features); i++) {
        if (strcmp(word, unsupported_features[i].word) != 0) continue;
        diag_error(loc, unsupported_features[i].instead, "%s (`%s`) is not supported by parc",
                   unsupported_features[i].feature, word);
        return 1;
    }
    return 0;
}

/* A statement key that is not in `names`.  Returns the index of the key it
 * suggests instead, or -1: the caller then does not also call that key missing. */
int check_unknown_key(Check *c, const Stmt *st, const char *where, const char *const *names, int n)
{
    if (unsupported_feature(st->key, st->key_loc)) return -1;
    const char *best = diag_closest(st->key, names, n);
    const char *hint = best ? arena_printf(c->arena, "did you mean `%s`?", best)
                            : arena_printf(c->arena, "%s takes %s", where, check_word_list(c, names, n));
    diag_error(st->key_loc, hint, "unknown key `%s` in %s", st->key, where);
    return best ? check_word_index(best, names, n) : -1;
}

/* Records st in seen[k]; reports a duplicate. Returns 1 when st is the first. */
int check_first_of(const Stmt **seen, const Stmt *st, const char *where)
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

int check_unit_required_error(Check *c, const Stmt *st, const Value *v, UnitKind want)
{
    const UnitInfo *u = ast_unit_find(v->unit, want);
    if (!u) {
        const char *names[64];
        int n = 0;
        for (int i = 0; i < unit_table_count && n < 64; i++)
            if (unit_table[i].kind == want) names[n++] = unit_table[i].name;
        diag_error(v->unit_loc, check_did_you_mean(c, v->unit, names, n), "unknown unit `%s`", v->unit);
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
/* A count, its scale K / M / B read as 10^3 / 10^6 / 10^9, or with `binary`
 * as 2^10 / 2^20 / 2^30 (token and sequence counts). */
static int read_count(Check *c, const Stmt *st, const Value *v, int64_t min, int64_t max, int64_t *out, int binary)
{
    if (v->kind != VAL_NUMBER) {
        diag_error(v->loc, NULL, "`%s` takes a count such as `8`, got `%s`", st->key, check_value_text(c, v));
        return 0;
    }
    double factor = 1;
    if (v->unit) {
        if (!check_unit_required_error(c, st, v, UNIT_COUNT)) return 0;
        factor = ast_unit_find(v->unit, UNIT_COUNT)->factor;
        if (binary) factor = factor == 1e3 ? 0x1p10 : factor == 1e6 ? 0x1p20 : 0x1p30;
    }
    int64_t value;
    if (v->num.is_integer && !v->unit) {
        value = v->num.integer;
    } else {
        double x = v->num.value * factor;
        /* (double)INT64_MAX rounds up to 2^63, which the cast below cannot take */
        if (!isfinite(x) || x >= 0x1p63 || x > (double)max) {
            diag_error(v->loc, NULL, "`%s` = %s is too large (at most %" PRId64 ")", st->key, check_value_text(c, v), max);
            return 0;
        }
        if (x != floor(x)) {
            diag_error(v->loc, NULL, "`%s` takes a whole number, got `%s`", st->key, check_value_text(c, v));
            return 0;
        }
        if (x < -0x1p63) {
            diag_error(v->loc, NULL, "`%s` must be at least %" PRId64 ", got %s", st->key, min, check_value_text(c, v));
            return 0;
        }
        value = (int64_t)x;
    }
    if (value > max) {
        diag_error(v->loc, NULL, "`%s` = %s is too large (at most %" PRId64 ")", st->key, check_value_text(c, v), max);
        return 0;
    }
    if (value < min) {
        diag_error(v->loc, NULL, "`%s` must be at least %" PRId64 ", got %s", st->key, min, check_value_text(c, v));
        return 0;
    }
    *out = value;
    return 1;
}

int check_read_count(Check *c, const Stmt *st, const Value *v, int64_t min, int64_t max, int64_t *out)
{
    return read_count(c, st, v, min, max, out, 0);
}

int check_read_token_count(Check *c, const Stmt *st, const Value *v, int64_t min, int64_t max, int64_t *out)
{
    return read_count(c, st, v, min, max, out, 1);
}

/* A quantity with a unit of kind `want`, in base units; positive (or >= 0 when
 * zero_ok). */
int check_read_quantity(Check *c, const Stmt *st, const Value *v, UnitKind want, int zero_ok, double *out)
{
    if (v->kind != VAL_NUMBER) {
        diag_error(v->loc, NULL, "`%s` takes a %s such as `%s`, got `%s`", st->key, unit_kind_names[want],
                   unit_kind_examples[want], check_value_text(c, v));
        return 0;
    }
    if (!v->unit) {
        diag_error(v->loc, arena_printf(c->arena, "write it with a unit, like `%s %s`", st->key,
                                        unit_kind_examples[want]),
                   "`%s` needs a unit: `%s` is a %s", st->key, v->num.text, unit_kind_names[want]);
        return 0;
    }
    if (!check_unit_required_error(c, st, v, want)) return 0;
    double x = v->num.value * ast_unit_find(v->unit, want)->factor;
    if (!isfinite(x) || x > 1e30) {
        diag_error(v->loc, NULL, "`%s` = %s is too large", st->key, check_value_text(c, v));
        return 0;
    }
    if (x < 0 || (x == 0 && !zero_ok)) {
        diag_error(v->loc, NULL, "`%s` must be positive, got %s", st->key, check_value_text(c, v));
        return 0;
    }
    /* The slowest rates a machine has: below them the estimates' times
     * overflow (an infinite step, NaN shares) rather than describe anything. */
    static const struct {
        UnitKind kind;
        double least;
        const char *text;
    } floors[] = {{UNIT_COMPUTE, 1e6, "0.001 GFLOP/s"}, {UNIT_BANDWIDTH, 1e3, "1 KB/s"}};
    for (size_t k = 0; k < sizeof floors / sizeof floors[0]; k++)
        if (want == floors[k].kind && x > 0 && x < floors[k].least) {
            diag_error(v->loc, arena_printf(c->arena, "a %s is at least %s", unit_kind_names[want], floors[k].text),
                       "`%s` = %s is too small to be a %s", st->key, check_value_text(c, v), unit_kind_names[want]);
            return 0;
        }
    *out = x;
    return 1;
}

/* A plain number (no unit) in [lo, hi] (an open end when *_open). */
int check_read_real(Check *c, const char *what, const Value *v, double lo, int lo_open, double hi, int hi_open,
                     double *out)
{
    return check_read_real_hint(c, what, v, lo, lo_open, hi, hi_open, NULL, out);
}

int check_read_real_hint(Check *c, const char *what, const Value *v, double lo, int lo_open, double hi, int hi_open,
                         const char *hint, double *out)
{
    if (v->kind != VAL_NUMBER) {
        diag_error(v->loc, hint, "`%s` takes a number, got `%s`", what, check_value_text(c, v));
        return 0;
    }
    if (v->unit) {
        diag_error(v->unit_loc, hint, "`%s` takes a plain number, without a unit", what);
        return 0;
    }
    double x = v->num.value;
    if (!isfinite(x) || x < lo || x > hi || (lo_open && x == lo) || (hi_open && x == hi)) {
        diag_error(v->loc, hint, "`%s` must be in %s%g, %g%s, got %s", what, lo_open ? "(" : "[", lo, hi,
                   hi_open ? ")" : "]", v->num.text);
        return 0;
    }
    *out = x;
    return 1;
}

/* One of `words`: its index, or -1 after reporting. */
int check_read_word(Check *c, const char *what, const Value *v, const char *const *words, int n)
{
    if (v->kind == VAL_WORD) {
        int i = check_word_index(v->text, words, n);
        if (i >= 0) return i;
        if (unsupported_feature(v->text, v->loc)) return -1;
        diag_error(v->loc, check_did_you_mean(c, v->text, words, n), "unknown %s `%s`", what, v->text);
        return -1;
    }
    diag_error(v->loc, arena_printf(c->arena, "expected %s", check_word_list(c, words, n)), "%s must be a word, got `%s`",
               what, check_value_text(c, v));
    return -1;
}

/* "KEY COUNT;" in one go. */
int check_read_count_stmt(Check *c, const Stmt *st, int64_t min, int64_t max, int64_t *out, const char *usage)
{
    if (!check_shape(c, st, 1, 1, BODY_NO, usage)) return 0;
    return check_read_count(c, st, &st->values[0], min, max, out);
}

int check_read_token_count_stmt(Check *c, const Stmt *st, int64_t min, int64_t max, int64_t *out, const char *usage)
{
    if (!check_shape(c, st, 1, 1, BODY_NO, usage)) return 0;
    return check_read_token_count(c, st, &st->values[0], min, max, out);
}

/* "KEY WORD;" in one go: the index or -1. */
int check_read_word_stmt(Check *c, const Stmt *st, const char *const *words, int n, const char *usage)
{
    if (!check_shape(c, st, 1, 1, BODY_NO, usage)) return -1;
    return check_read_word(c, arena_printf(c->arena, "`%s` value", st->key), &st->values[0], words, n);
}

