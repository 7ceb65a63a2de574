/*
 * check_positions.c — the model's position scheme and its norms' epsilon:
 *
 *   embed;                                           tokens, no positions
 *   embed positions learned;                         + a learned table (GPT-2)
 *   norm rms [eps X];     (a block's, or the model's final norm)
 *
 * Every problem is reported at the value or name that causes it, with a hint;
 * the default epsilon (1e-5) is parc.h's.
 */
#include <string.h>

#include "check.h"

void check_embed(Check *c, const Stmt *st)
{
    Model *m = &c->plan->model;
    if (!check_shape(c, st, 0, 2, BODY_NO, MODEL_usage[MD_EMBED])) return;
    m->has_embed = 1;
    if (st->nvalues == 0) return;
    const Value *v = &st->values[0];
    if (v->kind != VAL_WORD || strcmp(v->text, "positions") != 0) {
        diag_error(v->loc, "write `embed;` or `embed positions learned;`", "unexpected `%s` after `embed`",
                   check_value_text(c, v));
        return;
    }
    if (st->nvalues < 2) {
        diag_error(v->loc, "write `embed positions learned;`", "`positions` needs `learned` or `none`");
        return;
    }
    int w = check_read_word(c, "position embedding", &st->values[1], position_words, COUNT_OF(position_words));
    if (w >= 0) m->positions = w;
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
