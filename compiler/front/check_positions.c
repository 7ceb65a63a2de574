/*
 * check_positions.c — the model's position scheme and its norms' epsilon:
 *
 *   embed;                                           tokens, no positions
 *   embed positions learned;                         + a learned table (GPT-2)
 *   embed positions rope [theta X] [scaling llama3 factor F low_freq_factor L
 *                         high_freq_factor H original_max_positions N];
 *   norm rms [eps X];     (a block's, or the model's final norm)
 *
 * The rope settings are NAME VALUE pairs in any order, each once; `scaling
 * llama3` needs all four of its numbers.  Every problem is reported at the
 * value or name that causes it, with a hint; the defaults (theta 10000, eps
 * 1e-5) are parc.h's.
 */
#include <string.h>

#include "check.h"

#define ROPE_SETTINGS(X)                                               \
    X(RS_THETA, "theta")                                              \
    X(RS_SCALING, "scaling")                                          \
    X(RS_FACTOR, "factor")                                            \
    X(RS_LOW, "low_freq_factor")                                      \
    X(RS_HIGH, "high_freq_factor")                                    \
    X(RS_ORIGINAL, "original_max_positions")

#define RS_ENUM_(id, name) id,
#define RS_NAME_(id, name) name,
enum { ROPE_SETTINGS(RS_ENUM_) RS_COUNT };
static const char *const rope_setting_names[] = {ROPE_SETTINGS(RS_NAME_)};
static const char *const rope_scaling_words[] = {"llama3"};

#define ROPE_USAGE "embed positions rope theta 500000;"
#define LLAMA3_USAGE                                                                                            \
    "Llama 3.1's numbers: `scaling llama3 factor 8 low_freq_factor 1 high_freq_factor 4 original_max_positions " \
    "8192`"

/* The rope pairs after `embed positions rope`, from values[first]. */
static void check_rope(Check *c, const Stmt *st, int first)
{
    Rope *r = &c->plan->model.rope;
    const Value *given[RS_COUNT] = {0};
    for (int i = first; i < st->nvalues; i += 2) {
        const Value *name = &st->values[i];
        int k = name->kind == VAL_WORD ? check_word_index(name->text, rope_setting_names, RS_COUNT) : -1;
        if (k < 0) {
            if (name->kind == VAL_WORD)
                diag_error(name->loc, check_did_you_mean(c, name->text, rope_setting_names, RS_COUNT),
                           "unknown rope setting `%s`", name->text);
            else
                diag_error(name->loc, "settings come in pairs: `rope theta 500000 scaling llama3 ...`",
                           "expected a rope setting name, got `%s`", check_value_text(c, name));
            continue;
        }
        if (given[k]) {
            diag_error(name->loc, "give each setting once", "duplicate rope setting `%s`", name->text);
            continue;
        }
        given[k] = name;
        if (i + 1 >= st->nvalues) {
            diag_error(name->loc, k == RS_SCALING ? LLAMA3_USAGE : "write it like `" ROPE_USAGE "`",
                       "rope setting `%s` needs a value", name->text);
            break;
        }
        const Value *v = &st->values[i + 1];
        double x;
        switch (k) {
        case RS_THETA:
            check_read_real_hint(c, "theta", v, 1, 1, 1e12, 0,
                                 "the base of the frequencies: Llama 2 uses 10000, Llama 3 500000", &r->theta);
            break;
        case RS_SCALING:
            r->llama3 = check_read_word(c, "rope scaling", v, rope_scaling_words, 1) == 0;
            break;
        case RS_FACTOR:
            check_read_real_hint(c, "factor", v, 1, 0, 1e6, 0, "the longest wavelengths are divided by it: Llama 3.1 "
                                 "uses 8", &r->factor);
            break;
        case RS_LOW:
            check_read_real_hint(c, "low_freq_factor", v, 0, 1, 1e6, 0, "Llama 3.1 uses low_freq_factor 1",
                                 &r->low_freq_factor);
            break;
        case RS_HIGH:
            check_read_real_hint(c, "high_freq_factor", v, 0, 1, 1e6, 0, "Llama 3.1 uses high_freq_factor 4",
                                 &r->high_freq_factor);
            break;
        case RS_ORIGINAL:
            if (!check_read_real_hint(c, "original_max_positions", v, 1, 0, (double)MAX_DIM, 0,
                                      "the context length the model was trained at: Llama 3.1 uses 8192", &x))
                break;
            if (x != (double)(int64_t)x)
                diag_error(v->loc, "Llama 3.1 uses 8192", "`original_max_positions` takes a whole number, got %s",
                           v->num.text);
            else
                r->original_max_positions = (int64_t)x;
            break;
        }
    }
    /* the scaling's numbers: all four with `scaling llama3`, none without */
    static const int numbers[] = {RS_FACTOR, RS_LOW, RS_HIGH, RS_ORIGINAL};
    if (!given[RS_SCALING]) {
        for (int j = 0; j < COUNT_OF(numbers); j++)
            if (given[numbers[j]])
                diag_error(given[numbers[j]]->loc, LLAMA3_USAGE, "`%s` belongs to a frequency scaling: add `scaling "
                           "llama3`", rope_setting_names[numbers[j]]);
        return;
    }
    if (!r->llama3) return; /* the scaling's word was reported */
    const char *missing = "";
    for (int j = 0; j < COUNT_OF(numbers); j++)
        if (!given[numbers[j]])
            missing = check_add_missing(c, missing, arena_printf(c->arena, "`%s`", rope_setting_names[numbers[j]]));
    if (*missing) {
        diag_error(given[RS_SCALING]->loc, LLAMA3_USAGE, "`scaling llama3` is missing %s", missing);
        r->llama3 = 0;
        return;
    }
    if (r->low_freq_factor > 0 && r->high_freq_factor > 0 && r->high_freq_factor <= r->low_freq_factor)
        diag_error((given[RS_HIGH] + 1)->loc,
                   "the wavelengths between original / high_freq_factor and original / low_freq_factor are blended: "
                   "Llama 3.1 uses low_freq_factor 1 and high_freq_factor 4",
                   "high_freq_factor = %g must be above low_freq_factor = %g", r->high_freq_factor,
                   r->low_freq_factor);
}

void check_embed(Check *c, const Stmt *st)
{
    Model *m = &c->plan->model;
    if (!check_shape(c, st, 0, 64, BODY_NO, MODEL_usage[MD_EMBED])) return;
    m->has_embed = 1;
    if (st->nvalues == 0) return;
    const Value *v = &st->values[0];
    if (v->kind != VAL_WORD || strcmp(v->text, "positions") != 0) {
        diag_error(v->loc, "write `embed;`, `embed positions learned;` or `embed positions rope;`",
                   "unexpected `%s` after `embed`", check_value_text(c, v));
        return;
    }
    if (st->nvalues < 2) {
        diag_error(v->loc, "write `embed positions learned;` or `embed positions rope theta 500000;`",
                   "`positions` needs `learned`, `rope` or `none`");
        return;
    }
    int w = check_read_word(c, "position embedding", &st->values[1], position_words, COUNT_OF(position_words));
    if (w < 0) return;
    m->positions = w;
    m->positions_loc = st->values[1].loc;
    if (w == POS_ROPE) {
        check_rope(c, st, 2);
    } else if (st->nvalues > 2) {
        diag_error(st->values[2].loc, "only `rope` takes settings: `embed positions rope theta 500000;`",
                   "unexpected `%s` after `embed positions %s`", check_value_text(c, &st->values[2]),
                   position_words[w]);
    }
}

void check_norm(Check *c, const Stmt *st, const char *usage, NormKind *kind, double *eps)
{
    if (!check_shape(c, st, 1, 3, BODY_NO, usage)) return;
    int w = check_read_word(c, arena_printf(c->arena, "`%s` value", st->key), &st->values[0], norm_words,
                            COUNT_OF(norm_words));
    if (w < 0) return;
    *kind = w;
    *eps = PARC_NORM_EPS;
    if (st->nvalues == 1) return;
    const Value *k = &st->values[1];
    if (k->kind != VAL_WORD || strcmp(k->text, "eps") != 0) {
        diag_error(k->loc, "write it like `norm rms eps 1e-5;`", "unexpected `%s` after `norm %s`",
                   check_value_text(c, k), norm_words[w]);
        return;
    }
    if (w == NORM_NONE) {
        diag_error(k->loc, "drop `eps`, or name the norm: `norm rms eps 1e-5;`", "`norm none` has no epsilon");
        return;
    }
    if (st->nvalues < 3) {
        diag_error(k->loc, "write it like `norm rms eps 1e-5;`", "`eps` needs a value");
        return;
    }
    check_read_real_hint(c, "eps", &st->values[2], 0, 1, 1, 1,
                         "the norm adds it to the mean square: Llama 2 and 3 and GPT-2 use 1e-5 (the default), "
                         "Llama 1 1e-6",
                         eps);
}

void check_positions_against_model(Check *c)
{
    const Model *m = &c->plan->model;
    if (m->positions != POS_ROPE) return;
    if (m->block.kind != BLOCK_TRANSFORMER) {
        diag_error(m->positions_loc, "use `embed;` or `embed positions learned;` with an `mlp` block",
                   "rotary positions rotate attention's q and k, but an `mlp` block has no attention");
        return;
    }
    if (c->dims_ok && m->head_dim % 2 != 0)
        diag_error(m->positions_loc, "choose hidden and heads (or head_dim) so that head_dim is even",
                   "rotary positions pair head dims i and i + head_dim/2, but head_dim = %" PRId64 " is odd",
                   m->head_dim);
}
