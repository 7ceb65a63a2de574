/*
 * check_cross.c — checks across sections, after every section was read.
 *
 * Takes values the section readers accepted and checks what no single section
 * can: the mesh against the cluster, dims against the axes they split,
 * batch = micro_batch × micro_batches × dp, the pipeline's stages and
 * schedule, and the plan's size limits (so that every later pass computes with
 * numbers that cannot overflow).  Fills the derived parts of the Plan:
 * micro_batches, pipeline stages and their layers.
 */
#include "check.h"

/* ------------------------------------------------------------ cross checks */

/* A dim of size n split over axis: reports when it does not divide.  The
 * hint names axis sizes that divide `fits` (n, or what else the split must
 * divide too: the heads' split takes the key/value heads with it). */
static int check_divides(Check *c, const char *dim_name, int64_t n, int64_t fits, int axis, SrcLoc loc,
                         const char *why)
{
    if (axis < 0 || n <= 0) return 1;
    const MeshAxis *a = &c->plan->mesh.axes[axis];
    if (n % a->size == 0) return 1;
    diag_error(loc, check_divisor_hint(c, a->name, fits, a->size), "%s = %" PRId64 " does not divide by %s = %d%s",
               dim_name, n, a->name, a->size, why ? why : "");
    return 0;
}

void check_dims_against_mesh(Check *c)
{
    Plan *p = c->plan;
    Model *m = &p->model;
    Layout *l = &p->layout;
    plan_derive_axes(p); /* batch over two axes: its derived axis */
    /* The data axes and the pipeline axis carry nothing else. */
    for (int e = 0; e < 2; e++) {
        Dim owner = e == 0 ? DIM_BATCH : DIM_LAYERS;
        int axis = l->dim_axis[owner];
        if (axis < 0) continue;
        for (int i = 0; i < COUNT_OF(mappable_dims); i++) {
            Dim d = mappable_dims[i];
            if (d == owner || !(plan_axis_parts(p, l->dim_axis[d]) & plan_axis_parts(p, axis))) continue;
            if (e == 1 && d == DIM_BATCH) continue; /* reported once, by the batch pass */
            if (e == 0 && d == DIM_EXPERTS) continue; /* expert parallelism borrows the data ranks */
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
        /* the heads' split takes the key/value heads with it: the hint divides both */
        int64_t fits = d == DIM_HEADS && c->dims_ok && m->kv_heads > 0 ? parc_gcd(m->heads, m->kv_heads) : splits[i].n;
        check_divides(c, dim_names[d], splits[i].n, fits, l->dim_axis[d], l->dim_axis_loc[d], NULL);
    }
    if (attention && c->dims_ok && l->dim_axis[DIM_HEADS] >= 0 && m->heads % plan_dim_parts(p, DIM_HEADS) == 0)
        check_divides(c, "kv_heads", m->kv_heads, m->kv_heads, l->dim_axis[DIM_HEADS], l->dim_axis_loc[DIM_HEADS],
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
        } else if (l->dim_axis[DIM_SEQ] >= 0 && !plan_sp_with_cp(m)) {
            diag_error(l->sp_loc,
                       m->positions == POS_LEARNED ? "keep one of them, or use rotary positions (`embed positions rope`)"
                                                   : "keep one of them, or drop `dropout` from the block",
                       "sequence parallelism and the rule `seq -> %s` split the sequence twice, and %s places rows "
                       "by one split",
                       p->mesh.axes[l->dim_axis[DIM_SEQ]].name,
                       m->positions == POS_LEARNED ? "the learned position table" : "dropout's mask");
        } else if (l->dim_axis[DIM_SEQ] >= 0 && m->seq > 0) {
            int64_t cp = p->mesh.axes[l->dim_axis[DIM_SEQ]].size;
            check_divides(c, "seq", m->seq / cp, m->seq / cp, l->sp_axis, l->sp_loc,
                          " (sequence parallelism splits each context chunk)");
        } else if (m->seq > 0) {
            check_divides(c, "seq", m->seq, m->seq, l->sp_axis, l->sp_loc, " (sequence parallelism splits seq)");
        }
    }

    /* ZeRO shards over the data axis, over the context axis (its ranks
     * hold the same parameters and sum their gradients, as a data axis's),
     * over both (`over dp cp`: the data group, their derived axis), or, with
     * batch over several axes, over all of them or one. */
    plan_derive_axes(p);
    int batch_rule_failed = c->dim_rule[DIM_BATCH] && l->dim_axis[DIM_BATCH] < 0;
    if (c->zero_stmt && l->zero_stage > 0 && !batch_rule_failed) {
        int batch_axis = l->dim_axis[DIM_BATCH], seq_axis = l->dim_axis[DIM_SEQ];
        unsigned named = c->zero_named;
        int several = __builtin_popcount(named) > 1;
        unsigned batch_parts = batch_axis >= 0 ? (l->batch_parts ? l->batch_parts : 1u << batch_axis) : 0;
        int cp = seq_axis >= 0 && seq_axis != plan_tensor_axis(p);
        int ok = -1; /* the axis ZeRO shards over */
        if (named == batch_parts) ok = batch_axis;
        else if (cp && named == 1u << seq_axis) ok = seq_axis;
        else if (cp && batch_axis >= 0 && named == (batch_parts | 1u << seq_axis)) ok = p->layout.data_group;
        else if (!several && (batch_parts >> l->zero_axis & 1)) ok = l->zero_axis;
        if (ok >= 0) {
            l->zero_axis = ok;
        } else {
            char group[160] = "";
            size_t used = 0;
            for (int a = 0; a < p->mesh.naxes && used < sizeof group; a++)
                if (((batch_parts | (cp ? 1u << seq_axis : 0)) >> a & 1))
                    used += (size_t)snprintf(group + used, sizeof group - used, "%s%s", used ? " " : "",
                                             p->mesh.axes[a].name);
            const char *name = p->mesh.axes[l->zero_axis].name;
            char listed[160] = "";
            size_t n = 0;
            for (int a = 0; a < p->mesh.naxes && n < sizeof listed; a++)
                if (named >> a & 1)
                    n += (size_t)snprintf(listed + n, sizeof listed - n, "%s`%s`", n ? " and " : "", p->mesh.axes[a].name);
            diag_error(l->zero_loc,
                       batch_axis >= 0 ? arena_printf(c->arena, "write `over %s`", group)
                                       : arena_printf(c->arena, "add `batch -> %s;`", name),
                       several ? "ZeRO over several axes shards over the data group: the axes `batch` maps to and the "
                                 "context axis `seq` maps to, not %s"
                               : "ZeRO shards over the data-parallel axis (the one `batch` maps to) or the context axis "
                                 "(the one `seq` maps to), not %s",
                       listed);
        }
    }
}

void check_batch(Check *c)
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
                check_nearest_divisors(t->batch / dp, t->micro_batch, &below, &above);
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
    /* no smaller micro_batch helps: change the batch.  1f1b needs at least
     * `stages` micro-batches per rank, interleaved a multiple of `stages`, so a
     * batch below the unit rises to it and any other goes to the multiples of
     * the unit on either side (batch 6 or 10 over 4 stages: 4 or 8, 8 or 12). */
    int64_t unit = (int64_t)stages * t->micro_batch * dp;
    if (!multiple || t->batch < unit)
        return arena_printf(c->arena, "raise batch to %" PRId64 " (stages × micro_batch × dp)", unit);
    int64_t below = t->batch / unit * unit;
    return arena_printf(c->arena,
                        "batch %" PRId64 " or %" PRId64 " would (a multiple of stages × micro_batch × dp = %" PRId64
                        ")",
                        below, below + unit, unit);
}

void check_fill_even_stages(Layout *l, int64_t layers)
{
    int nchunks = l->stages * l->virtual_stages;
    int64_t per = layers / nchunks, rest = layers % nchunks;
    int first = 0;
    for (int v = 0; v < nchunks; v++) {
        /* On an uneven split (only after an error) the first chunks take one more. */
        int n = (int)(per + (v < rest ? 1 : 0));
        l->chunk_first[v] = first;
        l->chunk_layers[v] = n;
        first += n;
    }
}

/* "stage 2" without interleaving, else "stage 2's chunk 1": where model chunk v lives. */
static const char *chunk_name(Check *c, int v)
{
    const Layout *l = &c->plan->layout;
    if (l->virtual_stages == 1) return arena_printf(c->arena, "stage %d", v);
    return arena_printf(c->arena, "stage %d's chunk %d", v % l->stages, v / l->stages);
}

/* Explicit assignment: every model chunk a contiguous range, all layers once,
 * in order.  range_of[v] is model chunk v's range (stage v % stages's
 * `layers` value number v / stages), NULL when its stage has none.  Fills
 * chunk_first / chunk_layers; 1 when the assignment is valid. */
static int assign_explicit_layers(Check *c, const Value *const *range_of)
{
    Layout *l = &c->plan->layout;
    int64_t layers = c->plan->model.layers;
    int stages = l->stages, nchunks = stages * l->virtual_stages;
    int ok = 1;
    int *owner = arena_alloc(c->arena, (size_t)layers * sizeof(int));
    for (int64_t i = 0; i < layers; i++) owner[i] = -1;
    int ranges_known = 1; /* every chunk's range was read: gaps are meaningful */
    int missing_reported = 0;
    for (int v = 0; v < nchunks; v++) {
        int s = v % stages;
        if (!range_of[v]) {
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
                diag_error(l->stage_loc,
                           l->virtual_stages == 1 ? "with explicit stages every stage needs `stage N { layers A..B; }`"
                                                  : "with explicit stages every stage needs `stage N { layers A..B C..D; }`, "
                                                    "a range per chunk",
                           "stage%s %s %s no layers", count > 1 ? "s" : "", runs, count > 1 ? "have" : "has");
                missing_reported = 1;
            }
            ok = 0;
            ranges_known = 0;
            continue;
        }
        const Value *rv = range_of[v];
        int64_t lo, hi;
        Stmt fake = {.key = "layers"};
        Number hi_num = rv->kind == VAL_RANGE ? rv->hi : rv->num;
        Value lo_v = {.kind = VAL_NUMBER, .loc = rv->num.loc, .num = rv->num};
        Value hi_v = {.kind = VAL_NUMBER, .loc = hi_num.loc, .num = hi_num};
        if (!check_read_count(c, &fake, &lo_v, 0, MAX_DIM, &lo) || !check_read_count(c, &fake, &hi_v, 0, MAX_DIM, &hi)) {
            ok = 0;
            ranges_known = 0;
            continue;
        }
        if (lo > hi) {
            diag_error(rv->loc, NULL, "the range %" PRId64 "..%" PRId64 " is empty (ranges go low..high, both included)",
                       lo, hi);
            ok = 0;
            ranges_known = 0;
            continue;
        }
        if (hi >= layers) {
            diag_error(rv->loc, NULL, "layer %" PRId64 " is out of range: the model has %" PRId64 " layers (0..%" PRId64 ")",
                       hi, layers, layers - 1);
            ok = 0;
            hi = layers - 1; /* the part in range still counts for gaps and overlaps */
        }
        int overlap_reported = 0;
        for (int64_t x = lo; x <= hi; x++) {
            if (owner[x] >= 0 && owner[x] != v) {
                if (!overlap_reported)
                    diag_error(rv->loc, l->virtual_stages == 1 ? "every layer lives on exactly one stage"
                                                                : "every layer lives in exactly one chunk",
                               "layer %" PRId64 " is on %s and on %s", x, chunk_name(c, owner[x]), chunk_name(c, v));
                overlap_reported = 1;
                ok = 0;
                continue;
            }
            owner[x] = v;
        }
        l->chunk_first[v] = (int)lo;
        l->chunk_layers[v] = lo <= hi ? (int)(hi - lo + 1) : 0;
    }
    for (int64_t x = 0; x < layers && ranges_known; x++) {
        if (owner[x] >= 0) continue;
        int64_t end = x;
        while (end + 1 < layers && owner[end + 1] < 0) end++;
        /* Point at the chunk whose range ends right before the gap, else the first. */
        SrcLoc at = l->stage_loc;
        for (int v = 0; v < nchunks; v++)
            if (range_of[v] && l->chunk_first[v] + l->chunk_layers[v] == x) at = range_of[v]->loc;
        const char *where = l->virtual_stages == 1 ? "stage" : "chunk";
        if (end == x)
            diag_error(at, l->virtual_stages == 1 ? "every layer lives on exactly one stage"
                                                  : "every layer lives in exactly one chunk",
                       "layer %" PRId64 " is on no %s", x, where);
        else
            diag_error(at, l->virtual_stages == 1 ? "every layer lives on exactly one stage"
                                                  : "every layer lives in exactly one chunk",
                       "layers %" PRId64 "..%" PRId64 " are on no %s", x, end, where);
        ok = 0;
        x = end;
    }
    for (int v = 1; v < nchunks && ok; v++) {
        if (l->chunk_first[v] != l->chunk_first[v - 1] + l->chunk_layers[v - 1]) {
            if (l->virtual_stages == 1)
                diag_error(range_of[v]->loc, "stage s + 1 holds the layers right after stage s",
                           "stage %d holds layers %d..%d, which do not follow stage %d's %d..%d", v, l->chunk_first[v],
                           l->chunk_first[v] + l->chunk_layers[v] - 1, v - 1, l->chunk_first[v - 1],
                           l->chunk_first[v - 1] + l->chunk_layers[v - 1] - 1);
            else
                diag_error(range_of[v]->loc,
                           "the model's chunks run in order: chunk c of stages 0, 1, ..., then chunk c + 1 of "
                           "stages 0, 1, ...",
                           "%s holds layers %d..%d, but the model chunk before it (%s) ends at layer %d",
                           chunk_name(c, v), l->chunk_first[v], l->chunk_first[v] + l->chunk_layers[v] - 1,
                           chunk_name(c, v - 1), l->chunk_first[v - 1] + l->chunk_layers[v - 1] - 1);
            ok = 0;
        }
    }
    return ok;
}

/* `balance auto;` asks the balance pass for the stage split: it needs a
 * pipeline of contiguous stages and no split of the plan's own. */
static void check_balance_rule(Check *c)
{
    Layout *l = &c->plan->layout;
    if (l->pp_axis < 0)
        diag_error(l->balance_loc, "add a pipeline axis to the mesh and `layers -> pp;`",
                   "`balance auto` balances pipeline stages: no `layers -> AXIS` rule");
    else if (l->schedule == SCHED_INTERLEAVED)
        diag_error(l->balance_loc, "use 1f1b or gpipe to balance the stages",
                   "`balance auto` is not allowed with an interleaved schedule (its chunks are even)");
    else if (c->nstage_stmts > 0) {
        diag_error(l->balance_loc, "remove `balance auto;` or the `stage` blocks",
                   "`balance auto` chooses the stage split, but the plan assigns layers with `stage` blocks");
        diag_note(l->stage_loc, NULL, "the stages are assigned here");
    } else if (c->have_model_key[MD_LAYERS] == 1 && c->plan->model.layers < l->stages)
        diag_error(l->balance_loc, NULL, "%" PRId64 " layers cannot fill %d stages (each holds one at least)",
                   c->plan->model.layers, l->stages);
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
    int ok = 1, any_layers = 0, wrote_layers = 0;
    for (int i = 0; i < c->nstage_stmts; i++) {
        const Stmt *st = c->stage_stmts[i];
        int64_t s;
        if (!check_read_count(c, st, &st->values[0], 0, PARC_MAX_STAGES - 1, &s)) {
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
            int k = check_word_index(b->key, stage_keys, 3);
            if (k < 0) {
                check_unknown_key(c, b, "`stage`", stage_keys, 3);
                ok = 0;
                continue;
            }
            const Stmt **seen = k == 0 ? &seen_layers : k == 1 ? &seen_embed : &seen_head;
            if (!check_first_of(seen, b, "`stage`")) {
                ok = 0;
                continue;
            }
            if (k == 0) {
                int nv = l->virtual_stages;
                wrote_layers = 1;
                if (!check_shape(c, b, 1, 64, BODY_NO, nv > 1 ? "layers 0..3 8..11;" : "layers 0..15;")) {
                    ok = 0;
                    continue;
                }
                if (b->nvalues != nv && nv == 1) {
                    diag_error(b->values[1].loc,
                               "write one range, `layers A..B;`, or interleave the stages (`layers -> pp schedule "
                               "interleaved N;`) and give a range per chunk",
                               "stage %" PRId64 " lists %d layer ranges, but without an interleaved schedule a "
                               "stage holds one",
                               s, b->nvalues);
                    ok = 0;
                    continue;
                }
                if (b->nvalues != nv) {
                    diag_error(b->values[0].loc,
                               arena_printf(c->arena, "give a range for each of stage %" PRId64 "'s %d chunks, chunk 0's "
                                            "first: `layers A..B C..D;`", s, nv),
                               "stage %" PRId64 " lists %d layer range%s, but `schedule interleaved %d` gives each "
                               "stage %d chunks",
                               s, b->nvalues, b->nvalues == 1 ? "" : "s", nv, nv);
                    ok = 0;
                    continue;
                }
                int bad = 0;
                for (int j = 0; j < nv; j++) {
                    const Value *v = &b->values[j];
                    if (v->kind != VAL_RANGE && v->kind != VAL_NUMBER) {
                        diag_error(v->loc, "write a layer range like `layers 0..15;` (both ends included)",
                                   "`layers` in a stage takes a range, got `%s`", check_value_text(c, v));
                        bad = 1;
                        break;
                    }
                    range_of[plan_chunk(l, (int)s, j)] = v;
                }
                if (bad) {
                    ok = 0;
                    continue;
                }
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
        /* layers written but refused: the split is neither explicit nor even,
         * and the even split's divisibility is not the user's question */
        if (any_layers || wrote_layers) *explicit_layers = -1;
        return;
    }
    if (c->have_model_key[MD_LAYERS] != 1 || !assign_explicit_layers(c, range_of)) *explicit_layers = -1;
}

void check_pipeline(Check *c)
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
    if ((int64_t)l->stages * l->virtual_stages > PARC_MAX_STAGES) {
        diag_error(c->interleave_loc, "use fewer virtual stages",
                   "%d stages × %d virtual stages = %d model chunks; parc handles at most %d", l->stages,
                   l->virtual_stages, l->stages * l->virtual_stages, PARC_MAX_STAGES);
        l->virtual_stages = 1;
    }
    l->embed_stage = 0;
    l->head_stage = l->stages - 1;

    int explicit_layers = 0;
    if (l->balance == BALANCE_AUTO) check_balance_rule(c);
    if (c->nstage_stmts > 0) {
        if (l->pp_axis < 0) {
            diag_error(l->stage_loc, "add a pipeline axis to the mesh and `layers -> pp;`",
                       "`stage` blocks need a pipeline axis: no `layers -> AXIS` rule");
        } else {
            check_stage_blocks(c, &explicit_layers);
        }
    }
    int have_layers = c->have_model_key[MD_LAYERS] == 1;
    if (explicit_layers == 1) {
        l->uneven = 1;
    } else if (explicit_layers == 0 && have_layers && l->balance != BALANCE_AUTO) {
        int64_t chunks = (int64_t)l->stages * l->virtual_stages;
        if (m->layers % chunks != 0) {
            const char *pp = l->pp_axis >= 0 ? p->mesh.axes[l->pp_axis].name : "pp";
            if (l->virtual_stages > 1) {
                const char *works = "";
                for (int v = 2; v <= 8; v++)
                    if (m->layers % ((int64_t)l->stages * v) == 0) works = arena_printf(c->arena, "%s%s%d", works, *works ? ", " : "", v);
                diag_error(c->interleave_loc,
                           arena_printf(c->arena,
                                        "%s, or assign each stage's %d chunks with `stage N { layers A..B C..D; }`",
                                        *works ? arena_printf(c->arena, "interleaved %s would", works)
                                               : "use fewer stages or virtual stages",
                                        l->virtual_stages),
                           "layers = %" PRId64 " does not divide into %s = %d stages × %d virtual stages = %" PRId64
                           " chunks",
                           m->layers, pp, l->stages, l->virtual_stages, chunks);
            } else {
                const char *hint = check_divisor_hint(c, pp, m->layers, l->stages);
                hint = arena_printf(c->arena,
                                    "%s%sor let the cost model split them with `balance auto;`, or assign them with "
                                    "`stage N { layers A..B; }`",
                                    hint ? hint : "", hint ? "; " : "");
                diag_error(l->dim_axis_loc[DIM_LAYERS], hint,
                           "layers = %" PRId64 " does not divide by %s = %d pipeline stages", m->layers, pp,
                           l->stages);
            }
        }
    }
    if (explicit_layers != 1) {
        if (have_layers && (int64_t)l->stages * l->virtual_stages <= m->layers) {
            check_fill_even_stages(l, m->layers);
        } else {
            /* Only after an error was reported (no layers, or more stages than layers). */
            for (int v = 0; v < l->stages * l->virtual_stages; v++) l->chunk_first[v] = 0, l->chunk_layers[v] = 0;
        }
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

/* A micro_batch whose boundary (per_sample elements a sample) divides by tp
 * and whose micro-batch count the schedule takes, for pipeline_scatter's
 * hint; NULL when none divides the rank's batch. */
static const char *scatter_micro_batch_hint(Check *c, int64_t per_sample, int tp)
{
    Plan *p = c->plan;
    Train *t = &p->train;
    const Layout *l = &p->layout;
    int64_t dp = plan_dp(p);
    if (dp <= 0 || t->batch % dp != 0) return NULL;
    int64_t per_rank = t->batch / dp, unit = tp / parc_gcd(per_sample, tp);
    for (int64_t m = unit; m <= per_rank; m += unit) {
        if (per_rank % m) continue;
        int64_t mbs = per_rank / m;
        if (l->schedule == SCHED_1F1B && mbs < l->stages) continue;
        if (l->schedule == SCHED_INTERLEAVED && mbs % l->stages) continue;
        if (t->micro_batches_loc.file)
            return arena_printf(c->arena, "micro_batch %" PRId64 " with micro_batches %" PRId64 " would", m, mbs);
        return arena_printf(c->arena, "micro_batch %" PRId64 " would", m);
    }
    return NULL;
}

void check_cp_comm(Check *c)
{
    const Plan *p = c->plan;
    const Layout *l = &p->layout;
    int cp = l->dim_axis[DIM_SEQ];
    if (cp < 0 && c->dim_rule[DIM_SEQ]) return; /* a refused rule, reported */
    if (l->cp_comm == CP_COMM_RING && cp < 0)
        diag_error(l->cp_comm_loc, "map the sequence onto an axis of its own (`seq -> cp;`), or remove `cp_comm ring;`",
                   "`cp_comm ring` passes keys and values around the context axis: the plan has none (no `seq -> "
                   "AXIS` rule)");
    if (!l->cp_balanced) return;
    SrcLoc at = l->cp_split_loc;
    if (cp < 0) {
        diag_error(at, "map the sequence onto an axis of its own (`seq -> cp;`), or remove `cp_split balanced;`",
                   "`cp_split balanced` splits the sequence over the context axis: the plan has none (no `seq -> "
                   "AXIS` rule)");
        return;
    }
    int64_t P = p->mesh.axes[cp].size;
    if (p->model.seq > 0 && p->model.seq % (2 * P) != 0)
        diag_error(at, arena_printf(c->arena, "a seq that divides by %lld, or remove `cp_split balanced;`",
                                    (long long)(2 * P)),
                   "`cp_split balanced` cuts the sequence in 2 x %s = %lld chunks: seq = %lld does not divide",
                   p->mesh.axes[cp].name, (long long)(2 * P), (long long)p->model.seq);
    if (p->model.block.dropout > 0)
        diag_error(at, "drop `dropout` from the block, or remove `cp_split balanced;`",
                   "`cp_split balanced` reorders the sequence, and dropout's masks are placed by position in order: "
                   "not supported together");
}

/* `pipeline_scatter on;` splits each pipeline message over the tensor axis:
 * it needs a pipeline, a tensor axis of size > 1 over which the boundary
 * [micro_batch, seq, hidden] is whole, and a boundary that divides by it. */
void check_pipeline_scatter(Check *c)
{
    Plan *p = c->plan;
    Layout *l = &p->layout;
    const Model *m = &p->model;
    if (!l->pipeline_scatter) return;
    SrcLoc at = l->pipeline_scatter_loc;
    if ((c->dim_rule[DIM_HEADS] && l->dim_axis[DIM_HEADS] < 0) || (c->dim_rule[DIM_FFN] && l->dim_axis[DIM_FFN] < 0))
        return; /* a tensor rule was refused and reported */
    if (l->pp_axis < 0) {
        diag_error(at, "add a pipeline axis to the mesh and `layers -> pp;`, or remove `pipeline_scatter on;`",
                   "`pipeline_scatter on` splits the messages between pipeline stages: no `layers -> AXIS` rule");
        return;
    }
    int tp = plan_tensor_axis(p);
    if (plan_axis_size(p, tp) <= 1) {
        diag_error(at, "map `heads -> tp; ffn -> tp;` onto a mesh axis of size > 1, or remove `pipeline_scatter on;`",
                   tp < 0 ? "`pipeline_scatter on` splits each message over the tensor axis: the plan has none (no "
                            "`heads` or `ffn` rule)"
                          : "`pipeline_scatter on` splits each message over the tensor axis: `%s` has size 1",
                   tp < 0 ? "" : p->mesh.axes[tp].name);
        return;
    }
    const char *name = p->mesh.axes[tp].name;
    if (l->sp_axis == tp) {
        diag_error(at, "remove `pipeline_scatter on;`: each rank already sends only its part of the sequence",
                   "with `sequence_parallel over %s` the boundary is already split over `%s`: there is nothing to "
                   "scatter",
                   name, name);
        diag_note(l->sp_loc, NULL, "sequence parallelism is set here");
        return;
    }
    for (int k = 0; k < 2; k++) {
        Dim d = k == 0 ? DIM_SEQ : DIM_HIDDEN;
        if (l->dim_axis[d] != tp) continue;
        diag_error(at, arena_printf(c->arena, "remove `pipeline_scatter on;` or the rule `%s -> %s`", dim_names[d], name),
                   "the rule `%s -> %s` already splits the boundary over `%s`: there is nothing to scatter",
                   dim_names[d], name, name);
        return;
    }
    if (!c->have_micro_batch || m->seq <= 0 || c->have_model_key[MD_HIDDEN] != 1) return;
    int64_t elems = plan_boundary_elems(p), per_sample = elems / p->train.micro_batch;
    if (plan_pipeline_scatter_fits(p)) return;
    const char *hint = scatter_micro_batch_hint(c, per_sample, plan_axis_size(p, tp));
    diag_error(at, hint ? arena_printf(c->arena, "%s, or remove `pipeline_scatter on;`", hint)
                        : "remove `pipeline_scatter on;`",
               "the boundary's %" PRId64 " elements per micro-batch (micro_batch %" PRId64 " × its part of seq × "
               "hidden, %" PRId64 " a sample) do not divide by %s = %d",
               elems, p->train.micro_batch, per_sample, name, plan_axis_size(p, tp));
}

void check_mesh_against_cluster(Check *c)
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


/* ------------------------------------------------------------ size limits */

static SrcLoc at_or(SrcLoc a, SrcLoc b) { return a.file ? a : b; }

/* "1,048,576" */
static const char *thousands(Check *c, int64_t n)
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%" PRId64, n);
    const char *s = "";
    for (int i = 0; i < len; i++)
        s = arena_printf(c->arena, "%s%s%c", s, i > 0 && (len - i) % 3 == 0 ? "," : "", digits[i]);
    return s;
}

/* `every N`: N divides the layers, and each model chunk holds whole groups
 * of N layers (the lowered program repeats a group as its block). */
static void check_moe_every(Check *c)
{
    Plan *p = c->plan;
    const MoeSpec *moe = &p->model.block.moe;
    Layout *l = &p->layout;
    int64_t N = moe->every, L = p->model.layers;
    if (N <= 1 || c->have_model_key[MD_LAYERS] != 1 || L < 1) return;
    if (N > L || L % N != 0) {
        const char *works = "";
        for (int64_t v = 2; v <= L && v <= 8; v++)
            if (L % v == 0) works = arena_printf(c->arena, "%s%s%" PRId64, works, *works ? ", " : "", v);
        diag_error(moe->every_loc,
                   *works ? arena_printf(c->arena, "every %s would divide them", works)
                          : "leave `every` out: the mixture is then in every layer",
                   "`every %" PRId64 "` does not divide the model's %" PRId64 " layers", N, L);
        return;
    }
    int nchunks = l->stages * l->virtual_stages;
    if (l->balance == BALANCE_AUTO && L / N >= nchunks) {
        /* the even split balance.c starts from, in whole groups */
        check_fill_even_stages(l, L / N);
        for (int v = 0; v < nchunks; v++) l->chunk_first[v] *= (int)N, l->chunk_layers[v] *= (int)N;
        return;
    }
    for (int v = 0; v < nchunks; v++) {
        if (l->chunk_layers[v] < 1 || (l->chunk_first[v] % N == 0 && l->chunk_layers[v] % N == 0)) continue;
        int64_t groups = L / N;
        diag_error(moe->every_loc,
                   groups >= nchunks
                       ? arena_printf(c->arena,
                                      "give each stage a multiple of %" PRId64 " layers (`stage N { layers A..B; }` with "
                                      "A a multiple of %" PRId64 "), or let `balance auto;` place whole groups",
                                      N, N)
                       : arena_printf(c->arena, "use at most %" PRId64 " pipeline chunks, or a smaller `every`", groups),
                   "%s holds layers %d..%d, and with `every %" PRId64 "` a stage holds whole groups of %" PRId64
                   " layers (each group's last layer is the mixture of experts)",
                   chunk_name(c, v), l->chunk_first[v], l->chunk_first[v] + l->chunk_layers[v] - 1, N, N);
        return;
    }
}

void check_moe_plan(Check *c)
{
    Plan *p = c->plan;
    MoeSpec *moe = &p->model.block.moe;
    if (moe->experts == 0) {
        if (p->layout.dim_axis[DIM_EXPERTS] >= 0)
            diag_error(p->layout.dim_axis_loc[DIM_EXPERTS], "drop the rule, or make the block's MLP `mlp moe experts E top K;`",
                       "the model has no mixture of experts: there are no experts to split");
        return;
    }
    if (moe->expert_ffn == 0) moe->expert_ffn = p->model.ffn;
    if (moe->shared && moe->shared_ffn == 0) moe->shared_ffn = moe->shared * moe->expert_ffn;
    check_moe_every(c);
    if (c->dim_rule[DIM_BATCH] && p->layout.dim_axis[DIM_BATCH] < 0) return; /* its rule's error said it */
    /* The data axis (experts replicated on it, their gradients all-reduced
     * like any weight's, or split over it: expert parallelism), a tensor
     * axis, a context axis and the pipeline axis carry a mixture of experts;
     * any other axis of size > 1 replicates it (refused below). */
    const Layout *l = &p->layout;
    int ep = l->dim_axis[DIM_EXPERTS];
    /* `ffn -> tp` splits the experts' hidden units and the shared experts' */
    int ffn_axis = l->dim_axis[DIM_FFN];
    if (ffn_axis >= 0) {
        check_divides(c, "expert_ffn", moe->expert_ffn, moe->expert_ffn, ffn_axis, moe->loc,
                      " (`ffn -> AXIS` splits every expert's hidden units)");
        if (moe->shared_ffn)
            check_divides(c, "shared_ffn", moe->shared_ffn, moe->shared_ffn, ffn_axis, moe->loc,
                          " (`ffn -> AXIS` splits the shared experts' hidden units)");
    }
    if (moe->capacity > 0 && ep < 0)
        diag_error(moe->loc, "drop `capacity`, or split the experts over the data axis with `experts -> AXIS;`",
                   "`capacity` sizes the buffers of expert parallelism, and the experts are not split");
    if (ep >= 0) {
        const MeshAxis *ax = &p->mesh.axes[ep];
        /* the data axis, or one of two that batch splits over (the experts
         * replicated over the other: Megatron-LM's expert-data parallelism) */
        if (ep != l->dim_axis[DIM_BATCH] && !(l->batch_parts >> ep & 1))
            diag_error(l->dim_axis_loc[DIM_EXPERTS],
                       l->dim_axis[DIM_BATCH] >= 0
                           ? arena_printf(c->arena,
                                          "write `experts -> %s;`, or `batch -> %s %s;` to split the samples over "
                                          "`%s` too: the experts split over data ranks, which route their own "
                                          "samples (DeepSpeed-MoE, Megatron-LM)",
                                          p->mesh.axes[l->dim_axis[DIM_BATCH]].name,
                                          p->mesh.axes[l->dim_axis[DIM_BATCH]].name, ax->name, ax->name)
                           : "map `batch` to the axis too: each rank routes its own samples to the experts of all",
                       "expert parallelism runs over the data axis (the one batch maps to), not `%s`", ax->name);
        else
            check_divides(c, "experts", moe->experts, moe->experts, ep, l->dim_axis_loc[DIM_EXPERTS],
                          " (each rank of the axis holds experts / size of them)");
    }
    for (int a = 0; a < p->mesh.naxes; a++) {
        const MeshAxis *ax = &p->mesh.axes[a];
        if (ax->size <= 1 || (plan_axis_parts(p, l->dim_axis[DIM_BATCH]) >> a & 1) || a == l->pp_axis || a == ep)
            continue;
        /* a tensor axis (heads, ffn, vocab) splits attention, the experts'
         * hidden units and the head as it does a dense model's; a context
         * axis (seq) splits the tokens each rank routes, their router counts
         * summed over it for the load-balancing loss (Megatron-LM sums them
         * over its tensor x context group) */
        const char *what = NULL;
        int tensor = 0;
        for (int i = 0; i < COUNT_OF(mappable_dims) && !what; i++) {
            Dim d = mappable_dims[i];
            if (!(plan_axis_parts(p, l->dim_axis[d]) >> a & 1)) continue;
            if (d == DIM_HEADS || d == DIM_FFN || d == DIM_VOCAB || d == DIM_SEQ) tensor = 1;
            else what = arena_printf(c->arena, "`%s -> %s`", dim_names[d], ax->name);
        }
        if (!what && !tensor)
            what = arena_printf(c->arena, "`%s` (size %d, nothing mapped: a replica axis)", ax->name, ax->size);
        if (!what) continue;
        diag_error(ax->loc,
                   "with `mlp moe`, give size > 1 only to the axes of `batch` (data parallelism; `experts` "
                   "may split over it), of `heads`, `ffn` and `vocab` (tensor and sequence parallelism), of `seq` "
                   "(context parallelism) and of `layers` (pipeline)",
                   "a mixture of experts with %s is not yet supported", what);
        diag_note(moe->loc, NULL, "the mixture of experts is here");
    }
}

/* Elements of the widest activation of one micro-batch on one rank before any
 * split: micro_batch × seq × the widest of the layer's outputs (q/k/v, the
 * MLP's up projection, the logits, the attention scores heads × seq). */
static double widest_activation(const Plan *p)
{
    const Model *m = &p->model;
    double width = 3.0 * (double)m->hidden;
    double ffn = (double)m->ffn * (m->block.mlp == MLP_SWIGLU ? 2 : 1);
    if (m->block.moe.experts) {
        const MoeSpec *moe = &m->block.moe;
        double routed = (double)moe->topk * (double)moe->expert_ffn, shared = (double)moe->shared_ffn;
        ffn = (routed > shared ? routed : shared) * (m->block.mlp == MLP_SWIGLU ? 2 : 1);
    }
    if (ffn > width) width = ffn;
    if ((double)m->vocab > width) width = (double)m->vocab;
    double scores = (double)m->heads * (double)m->seq;
    if (scores > width) width = scores;
    return (double)p->train.micro_batch * (double)m->seq * width;
}

/* Parameters of the model, in double (an upper bound: biases and norms
 * counted for every block kind). */
static double parameter_bound(const Plan *p)
{
    const Model *m = &p->model;
    double h = (double)m->hidden, f = (double)m->ffn, v = (double)m->vocab;
    if (m->block.moe.experts)
        f = (double)m->block.moe.experts * (double)m->block.moe.expert_ffn + (double)m->block.moe.shared_ffn + h;
    double per_layer = 4.0 * h * h + 3.0 * h * f + 4.0 * h + 2.0 * f;
    return (double)m->layers * per_layer + 2.0 * v * h + (double)m->seq * h + 2.0 * h;
}

void check_size_limits(Check *c)
{
    Plan *p = c->plan;
    Train *t = &p->train;
    Model *m = &p->model;
    Layout *l = &p->layout;
    if (c->have_micro_batches == 1) {
        SrcLoc at = t->micro_batches_loc.file ? t->micro_batches_loc : t->batch_loc;
        double items = 2.0 * (double)t->micro_batches * l->virtual_stages * l->stages;
        if (items > (double)MAX_SCHEDULE_ITEMS)
            diag_error(at, "fewer micro-batches per step (a larger micro_batch) or fewer pipeline stages",
                       "the schedule has 2 × %" PRId64 " micro-batches × %d virtual stage%s × %d stage%s = %.0f "
                       "forward and backward steps; parc handles at most %s",
                       t->micro_batches, l->virtual_stages, l->virtual_stages == 1 ? "" : "s", l->stages,
                       l->stages == 1 ? "" : "s", items, thousands(c, MAX_SCHEDULE_ITEMS));
        /* GPipe keeps every micro-batch of a step in flight: the slots of its
         * activations grow with micro_batches, and so does placing each step. */
        else if (l->schedule == SCHED_GPIPE && items * (double)t->micro_batches > (double)MAX_GPIPE_WORK)
            diag_error(at, "use `schedule 1f1b` (at most as many in flight as there are stages), or fewer "
                           "micro-batches",
                       "gpipe keeps all %" PRId64 " micro-batches in flight: %.0f steps × %" PRId64
                       " in flight exceeds parc's limit of %s (2^30)",
                       t->micro_batches, items, t->micro_batches, thousands(c, MAX_GPIPE_WORK));
    }
    int dims_known = c->have_model_key[MD_SEQ] == 1 && c->have_model_key[MD_HIDDEN] == 1 &&
                     c->have_model_key[MD_FFN] == 1 && c->have_model_key[MD_LAYERS] == 1;
    if (!dims_known) return;
    SrcLoc model_at = m->dim_loc[DIM_SEQ].file ? m->dim_loc[DIM_SEQ] : m->loc;
    double params = parameter_bound(p);
    if (params > (double)MAX_PARAMS)
        diag_error(m->dim_loc[DIM_HIDDEN].file ? m->dim_loc[DIM_HIDDEN] : m->loc, NULL,
                   "the model has about %.3g parameters; parc handles at most %s (2^44)", params,
                   thousands(c, MAX_PARAMS));
    if (!c->have_micro_batch) return;
    double widest = widest_activation(p);
    if (widest > (double)MAX_TENSOR_ELEMS) {
        diag_error(model_at, "a shorter seq or a smaller micro_batch",
                   "one micro-batch's widest activation has about %.3g elements (micro_batch %" PRId64
                   " × seq %" PRId64 " × its width); parc handles at most %s (2^40)",
                   widest, t->micro_batch, m->seq, thousands(c, MAX_TENSOR_ELEMS));
        return;
    }
    if (c->have_micro_batches != 1) return;
    double activations = widest * (double)m->layers * (double)t->micro_batches;
    if (activations > (double)MAX_ACTIVATION_ELEMS)
        diag_error(at_or(t->micro_batches_loc, t->batch_loc), "fewer micro-batches per step or fewer layers",
                   "layers × micro-batches × the widest activation = %" PRId64 " × %" PRId64 " × %.3g elements "
                   "exceeds parc's limit of %s (2^52)",
                   m->layers, t->micro_batches, widest, thousands(c, MAX_ACTIVATION_ELEMS));
}
