/*
 * check_data.c — the `data` section and train's `eval` statement.
 *
 *   data { train "train.bin"; validation "val.bin"; format llmc; }
 *   train { ... eval every 50 steps batches 20; }
 *
 * Takes the statements; fills plan->data and plan->train.eval_*.  Paths are
 * strings; a relative one is joined to the directory of the plan that names
 * it, so a built program finds its files wherever it is started.  The files
 * themselves are the program's to check (they may exist only where it runs):
 * at start-up it checks each one before the first step (runtime/prt_data.c).
 * Guarantees: format is a prt_data_format; eval_every and eval_batches are
 * both 0 or both in 1..MAX_COUNT; a plan that trains on a file and evaluates
 * names a validation file (and one that names a validation file without
 * evaluating is warned).
 */
#include "check.h"

#include "parc_rt.h"

#define DATA_KEYS(X)                                      \
    X(DA_TRAIN, "train", "train \"train.bin\";")          \
    X(DA_VALIDATION, "validation", "validation \"val.bin\";") \
    X(DA_FORMAT, "format", "format llmc;")
DEFINE_KEYS(DATA, DATA_KEYS)

/* ORDER: enum prt_data_format. */
static const char *const data_format_words[] = {"text", "llmc", "u16", "u32"};

/* A relative path joined to the (canonical) directory of the file that names
 * it; a plan read from standard input names paths relative to the working
 * directory. */
static const char *plan_relative(Check *c, const char *file, const char *path)
{
    if (path[0] == '/' || !file || strcmp(file, "<stdin>") == 0) return path;
    const char *slash = strrchr(file, '/');
    const char *dir = slash ? arena_printf(c->arena, "%.*s", (int)(slash - file), file) : ".";
    return arena_printf(c->arena, "%s/%s", check_canonical_path(c, dir), path);
}

static const char *read_path(Check *c, const Stmt *st, const char *usage)
{
    if (!check_shape(c, st, 1, 1, BODY_NO, usage)) return NULL;
    const Value *v = &st->values[0];
    if (v->kind != VAL_STRING) {
        diag_error(v->loc, arena_printf(c->arena, "write it in quotes: `%s`", usage), "`%s` needs a file name string, got `%s`",
                   st->key, check_value_text(c, v));
        return NULL;
    }
    if (!*v->text) {
        diag_error(v->loc, arena_printf(c->arena, "e.g. `%s`", usage), "`%s` names no file", st->key);
        return NULL;
    }
    return plan_relative(c, v->loc.file, v->text);
}

void check_data(Check *c, const Stmt *sec)
{
    DataSpec *d = &c->plan->data;
    d->present = 1;
    d->loc = sec->key_loc;
    d->format = PRT_DATA_LLMC;
    check_shape(c, sec, 0, 0, BODY_YES, SECTION_usage[SEC_DATA]);
    const Stmt *seen[DATA_COUNT] = {0};
    for (int i = 0; i < sec->body.count; i++) {
        const Stmt *st = sec->body.items[i];
        int k = check_word_index(st->key, DATA_names, DATA_COUNT);
        if (k < 0) {
            check_unknown_key(c, st, "`data`", DATA_names, DATA_COUNT);
            continue;
        }
        if (!check_first_of(&seen[k], st, "`data`")) continue;
        switch (k) {
        case DA_TRAIN:
            d->train = read_path(c, st, DATA_usage[k]);
            d->train_written = d->train ? st->values[0].text : NULL;
            d->train_loc = check_stmt_span(st);
            break;
        case DA_VALIDATION:
            d->validation = read_path(c, st, DATA_usage[k]);
            d->validation_written = d->validation ? st->values[0].text : NULL;
            d->validation_loc = check_stmt_span(st);
            break;
        case DA_FORMAT: {
            int f = check_read_word_stmt(c, st, data_format_words, COUNT_OF(data_format_words), DATA_usage[k]);
            if (f >= 0) d->format = f;
            break;
        }
        }
    }
    if (!seen[DA_TRAIN] && !seen[DA_VALIDATION])
        diag_error(sec->key_loc, "e.g. `data { train \"train.bin\"; validation \"val.bin\"; }`",
                   "`data` names no file");
}

/* Value i of `eval` is the word `want`; else an error at it. */
static int eval_word(Check *c, const Stmt *st, int i, const char *want)
{
    const Value *v = &st->values[i];
    if (v->kind == VAL_WORD && strcmp(v->text, want) == 0) return 1;
    diag_error(v->loc, arena_printf(c->arena, "write `%s`", TRAIN_usage[TR_EVAL]), "expected `%s` here, got `%s`",
               want, check_value_text(c, v));
    return 0;
}

/* eval every N steps batches K; */
void check_eval(Check *c, const Stmt *st)
{
    Train *t = &c->plan->train;
    t->eval_loc = check_stmt_span(st);
    if (!check_shape(c, st, 5, 5, BODY_NO, TRAIN_usage[TR_EVAL])) return;
    int64_t n = 0, k = 0;
    int ok = eval_word(c, st, 0, "every");
    ok = check_read_count(c, st, &st->values[1], 1, MAX_COUNT, &n) && ok;
    ok = eval_word(c, st, 2, "steps") && ok;
    ok = eval_word(c, st, 3, "batches") && ok;
    ok = check_read_count(c, st, &st->values[4], 1, MAX_COUNT, &k) && ok;
    if (!ok) return;
    t->eval_every = n;
    t->eval_batches = k;
}

void check_eval_data(Check *c)
{
    const Plan *plan = c->plan;
    if (plan->train.eval_every > 0 && plan->data.train && !plan->data.validation)
        diag_error(plan->train.eval_loc, "add `validation \"val.bin\";` to the `data` section",
                   "the plan evaluates but its data section names no validation file");
    if (plan->train.eval_every <= 0 && plan->data.validation)
        diag_warning(plan->data.validation_loc, "add `eval every 50 steps batches 20;` to `train`",
                     "the validation file is unused: `train` has no `eval`");
}
