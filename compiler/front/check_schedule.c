/*
 * check_schedule.c — train's learning-rate schedule:
 *
 *   lr PEAK [warmup N steps] [stable N steps] [cosine|linear to MIN over N steps];
 *
 * Fills Train's lr (the peak) and lr_* fields; the closed form is
 * include/prt_lr.h's.  Each phase is written at most once, in that order; a
 * statement of the peak alone is a constant lr.
 */
#include "check.h"

#include "prt_lr.h"

enum { PH_WARMUP, PH_STABLE, PH_DECAY };
#define SCHEDULE_HINT "write it like `lr 3e-4 warmup 100 steps cosine to 3e-5 over 10000 steps;`"

static int is_word(const Value *v, const char *w) { return v && v->kind == VAL_WORD && strcmp(v->text, w) == 0; }

/* `N steps` at values[*i]: advances *i past it; 1 on success, else 0 after reporting. */
static int read_steps(Check *c, const Stmt *st, int *i, const char *what, int64_t *out)
{
    const Value *v = *i < st->nvalues ? &st->values[*i] : NULL;
    if (!v) {
        diag_error(st->values[*i - 1].loc, SCHEDULE_HINT, "`%s` needs a number of steps after it", what);
        return 0;
    }
    Stmt named = *st;
    named.key = what;
    if (!check_read_count(c, &named, v, 1, MAX_COUNT, out)) return 0;
    (*i)++;
    if (!is_word(*i < st->nvalues ? &st->values[*i] : NULL, "steps")) {
        diag_error(v->loc, arena_printf(c->arena, "write `%s %s steps`", what, check_value_text(c, v)),
                   "expected `steps` after the number of %s steps", what);
        return 0;
    }
    (*i)++;
    return 1;
}

static int read_decay(Check *c, const Stmt *st, int *i, int shape)
{
    Train *t = &c->plan->train;
    const Value *kw = &st->values[*i - 1];
    if (!is_word(*i < st->nvalues ? &st->values[*i] : NULL, "to")) {
        diag_error(kw->loc, SCHEDULE_HINT, "`%s` decays to a minimum: `%s to MIN over N steps`", kw->text, kw->text);
        return 0;
    }
    (*i)++;
    if (*i >= st->nvalues) {
        diag_error(st->values[*i - 1].loc, SCHEDULE_HINT, "`to` needs the minimum learning rate");
        return 0;
    }
    if (!check_read_real(c, "the minimum lr", &st->values[*i], 0, 0, 10, 0, &t->lr_min)) return 0;
    (*i)++;
    if (!is_word(*i < st->nvalues ? &st->values[*i] : NULL, "over")) {
        diag_error(st->values[*i - 1].loc, SCHEDULE_HINT, "expected `over N steps` after the minimum");
        return 0;
    }
    (*i)++;
    if (!read_steps(c, st, i, "over", &t->lr_decay)) return 0;
    t->lr_shape = shape;
    return 1;
}

void check_lr_schedule(Check *c, const Stmt *st)
{
    Train *t = &c->plan->train;
    if (!check_shape(c, st, 1, 16, BODY_NO, SCHEDULE_HINT)) return;
    if (!check_read_real(c, "lr", &st->values[0], 0, 1, 10, 0, &t->lr)) return;
    t->lr_shape = PRT_LR_CONSTANT;
    t->lr_warmup = t->lr_stable = t->lr_decay = 0;
    t->lr_min = t->lr;
    int last = -1;
    for (int i = 1; i < st->nvalues;) {
        const Value *kw = &st->values[i++];
        int phase = is_word(kw, "warmup")                              ? PH_WARMUP
                    : is_word(kw, "stable")                            ? PH_STABLE
                    : is_word(kw, "cosine") || is_word(kw, "linear") ? PH_DECAY
                                                                       : -1;
        if (phase < 0) {
            static const char *const words[] = {"warmup", "stable", "cosine", "linear"};
            diag_error(kw->loc, kw->kind == VAL_WORD ? check_did_you_mean(c, kw->text, words, 4) : SCHEDULE_HINT,
                       "expected `warmup`, `stable`, `cosine` or `linear` in the lr schedule, got `%s`",
                       check_value_text(c, kw));
            return;
        }
        if (phase <= last) {
            diag_error(kw->loc, "the phases come once each, in the order warmup, stable, decay",
                       "`%s` cannot follow the schedule's %s", kw->text,
                       last == PH_WARMUP ? "warmup" : last == PH_STABLE ? "stable phase" : "decay");
            return;
        }
        last = phase;
        int ok = phase == PH_WARMUP   ? read_steps(c, st, &i, "warmup", &t->lr_warmup)
                 : phase == PH_STABLE ? read_steps(c, st, &i, "stable", &t->lr_stable)
                                      : read_decay(c, st, &i, is_word(kw, "cosine") ? PRT_LR_COSINE : PRT_LR_LINEAR);
        if (!ok) return;
    }
    if (t->lr_stable > 0 && t->lr_shape == PRT_LR_CONSTANT) {
        diag_error(check_stmt_span(st), "add the decay after it, e.g. `linear to 0 over 1000 steps`",
                   "a stable phase is followed by a decay (warmup-stable-decay)");
        return;
    }
    if (t->lr_shape != PRT_LR_CONSTANT && t->lr_min > t->lr) {
        diag_error(check_stmt_span(st), "the minimum is at most the peak lr",
                   "the schedule decays from %g to a larger %g", t->lr, t->lr_min);
        return;
    }
    t->lr_scheduled = t->lr_warmup > 0 || t->lr_shape != PRT_LR_CONSTANT;
}
