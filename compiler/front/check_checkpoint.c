/*
 * check_checkpoint.c — train's checkpoint schedule:
 *
 *   checkpoint [every N steps] [keep K];        (at least one of the two)
 *
 * Fills Train's ckpt_every (0: no periodic saves), ckpt_keep (0: keep all) and
 * ckpt_dir, the directory a built program saves into when no
 * --checkpoint-dir is given: the plan file's name with `.par` replaced by
 * `.ckpt`, in the working directory of the run.  The runtime options
 * --checkpoint-dir, --checkpoint-every and --checkpoint-keep override each
 * (docs/checkpoints.md).
 */
#include "check.h"

#define CHECKPOINT_HINT "write it like `checkpoint every 100 steps keep 3;`"

static int is_word(const Value *v, const char *w) { return v && v->kind == VAL_WORD && strcmp(v->text, w) == 0; }

/* "tiny_tp.ckpt" for "examples/tiny_tp.par". */
static const char *default_dir(Check *c)
{
    const char *file = c->plan->file ? c->plan->file : "plan.par";
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t len = strlen(base);
    if (len > 4 && strcmp(base + len - 4, ".par") == 0) len -= 4;
    if (len == 0 || strcmp(base, "-") == 0) return "plan.ckpt";
    return arena_printf(c->arena, "%.*s.ckpt", (int)len, base);
}

void check_checkpoint(Check *c, const Stmt *st)
{
    Train *t = &c->plan->train;
    if (!check_shape(c, st, 1, 5, BODY_NO, CHECKPOINT_HINT)) return;
    static const char *const words[] = {"every", "keep"};
    const Value *seen[2] = {0};
    int64_t every = 0, keep = 0;
    for (int i = 0; i < st->nvalues;) {
        const Value *kw = &st->values[i++];
        int k = kw->kind == VAL_WORD ? check_word_index(kw->text, words, 2) : -1;
        if (k < 0) {
            diag_error(kw->loc, kw->kind == VAL_WORD ? check_did_you_mean(c, kw->text, words, 2) : CHECKPOINT_HINT,
                       "expected `every` or `keep` in `checkpoint`, got `%s`", check_value_text(c, kw));
            return;
        }
        if (seen[k]) {
            diag_error(kw->loc, CHECKPOINT_HINT, "`%s` is given twice in `checkpoint`", words[k]);
            diag_note(seen[k]->loc, NULL, "`%s` was first given here", words[k]);
            return;
        }
        seen[k] = kw;
        const Value *v = i < st->nvalues ? &st->values[i] : NULL;
        if (!v) {
            diag_error(kw->loc, CHECKPOINT_HINT, "`%s` needs a number after it", words[k]);
            return;
        }
        Stmt named = *st;
        named.key = k == 0 ? "checkpoint every" : "checkpoint keep";
        if (!check_read_count(c, &named, v, 1, MAX_COUNT, k == 0 ? &every : &keep)) return;
        i++;
        if (k == 0) {
            if (!is_word(i < st->nvalues ? &st->values[i] : NULL, "steps")) {
                diag_error(v->loc, arena_printf(c->arena, "write `every %s steps`", check_value_text(c, v)),
                           "expected `steps` after the number of steps between checkpoints");
                return;
            }
            i++;
        }
    }
    t->ckpt_every = every;
    t->ckpt_keep = keep;
    t->ckpt_dir = default_dir(c);
    t->ckpt_loc = check_stmt_span(st);
}
