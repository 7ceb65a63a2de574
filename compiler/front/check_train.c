/*
 * check_train.c — train's optimizer-side statements beside `optimizer`:
 *
 *   weight_decay VALUE [on weights|all];   the decay and the parameters it applies to
 *   clip MAX_NORM;                         gradient clipping by global norm
 *
 * Read after the `optimizer` statement, so they override its defaults.  Fills
 * Train's weight_decay, decay_all and clip.
 */
#include "check.h"

#define DECAY_HINT "write it like `weight_decay 0.1;` or `weight_decay 0.1 on all;`"

static const char *const decay_group_words[] = {"weights", "all"};

void check_weight_decay(Check *c, const Stmt *st)
{
    Train *t = &c->plan->train;
    if (!check_shape(c, st, 1, 3, BODY_NO, DECAY_HINT)) return;
    if (c->opt_weight_decay_loc.file) {
        diag_error(check_stmt_span(st), "drop `weight_decay` from the optimizer, or this statement",
                   "the weight decay is given twice: here and in `optimizer`");
        diag_note(c->opt_weight_decay_loc, NULL, "the optimizer's `weight_decay` is here");
        return;
    }
    double wd;
    if (!check_read_real(c, "weight_decay", &st->values[0], 0, 0, 10, 0, &wd)) return;
    int all = 0;
    if (st->nvalues > 1) {
        const Value *on = &st->values[1];
        if (on->kind != VAL_WORD || strcmp(on->text, "on") != 0) {
            diag_error(on->loc, DECAY_HINT, "expected `on` after the weight decay, got `%s`", check_value_text(c, on));
            return;
        }
        if (st->nvalues < 3) {
            diag_error(on->loc, "`on weights` (matrices and embedding tables) or `on all` (biases and norm gains too)",
                       "`on` needs the parameters the decay applies to");
            return;
        }
        all = check_read_word(c, "weight decay group", &st->values[2], decay_group_words, COUNT_OF(decay_group_words));
        if (all < 0) return;
    }
    t->weight_decay = wd;
    t->decay_all = all;
}

void check_clip(Check *c, const Stmt *st)
{
    Train *t = &c->plan->train;
    if (!check_shape(c, st, 1, 1, BODY_NO, "clip 1.0;")) return;
    check_read_real(c, "clip", &st->values[0], 0, 1, 1e6, 0, &t->clip);
}
