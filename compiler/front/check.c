/*
 * check.c — the front end's entry points: parse, resolve includes, check,
 * fill the Plan.
 *
 * Takes: a .par file (or its text).  Gives: a Plan in which every number is in
 * base units and every guarantee listed in parc.h holds, or -1 after reporting
 * EVERY error of the failing phase through diag.  Phases:
 *   1. parse the file and, recursively, its includes (check_load.c; syntax
 *      errors stop here);
 *   2. read each section (check_sections.c): names, units, ranges,
 *      duplicates, missing items;
 *   3. cross checks (check_cross.c): mesh against cluster, layout rules
 *      against mesh and model, divisibility, batch arithmetic, pipeline stages
 *      and schedule, size limits.
 * Phase 3 only looks at values phase 2 accepted, so one mistake gives one
 * error, not a cascade.  Nothing is silently changed: every default is the
 * documented one (docs/language.md), every other fallback is an error.
 */
#include "check.h"

/* ------------------------------------------------------------ entry points */

static void plan_defaults(Plan *plan, const char *path)
{
    memset(plan, 0, sizeof *plan);
    plan->file = path;
    for (int d = 0; d < DIM_COUNT; d++) plan->layout.dim_axis[d] = -1;
    plan->layout.pp_axis = plan->layout.sp_axis = plan->layout.zero_axis = plan->layout.data_group = -1;
    plan->layout.virtual_stages = 1;
    plan->layout.stages = 1;
    plan->train.steps = 10;
    plan->train.seed = 1234;
    plan->model.name = "model";
    plan_efficiency_defaults("generic", &plan->cluster.eff);
    plan->model.block = (BlockSpec){.kind = BLOCK_TRANSFORMER, .norm = NORM_LAYER, .norm_eps = PARC_NORM_EPS,
                                    .mlp = MLP_GELU, .bias = 1, .causal = 1, .residual = 1};
    plan->model.final_norm_eps = PARC_NORM_EPS;
    plan->model.rope.theta = PARC_ROPE_THETA;
}

int check_plan_text(Arena *arena, const char *path, const char *text, Plan *plan)
{
    int errors_before = diag_error_count();
    path = arena_strdup(arena, path);
    text = arena_strdup(arena, text);
    plan_defaults(plan, path);
    Check check = {.arena = arena, .plan = plan, .file = path, .interleave = 1};
    Check *c = &check;
    c->include_stack[c->include_depth++] = check_canonical_path(c, path);

    StmtList top;
    if (check_parse_file(c, path, text, &top) != 0 || diag_error_count() > errors_before) return -1;

    /* Sections. */
    for (int i = 0; i < top.count; i++) {
        const Stmt *st = top.items[i];
        int k = check_word_index(st->key, SECTION_names, SECTION_COUNT);
        if (k < 0 || k == SEC_INCLUDE) {
            const char *best = diag_closest(st->key, SECTION_names, SEC_INCLUDE);
            diag_error(st->key_loc,
                       best ? arena_printf(c->arena, "did you mean `%s`?", best)
                            : "a plan has the sections `cluster`, `model`, `train`, `mesh`, `layout` and `data`",
                       "unknown section `%s`", st->key);
            continue;
        }
        if (!check_first_of(&c->section[k], st, "the plan")) continue;
    }
    /* Mesh and model first: layout names their axes and dims. */
    static const int order[] = {SEC_CLUSTER, SEC_MESH, SEC_MODEL, SEC_TRAIN, SEC_LAYOUT, SEC_DATA};
    for (int i = 0; i < COUNT_OF(order); i++) {
        const Stmt *sec = c->section[order[i]];
        if (!sec) {
            if (order[i] != SEC_LAYOUT && order[i] != SEC_DATA)
                diag_error(check_file_loc(path), arena_printf(c->arena, "add `%s`", SECTION_usage[order[i]]),
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
        case SEC_DATA: check_data(c, sec); break;
        }
    }
    /* Cross checks. */
    check_eval_data(c);
    check_mesh_against_cluster(c);
    if (c->mesh_ok) {
        check_dims_against_mesh(c);
        check_batch(c);
        check_pipeline(c);
        check_pipeline_scatter(c);
        check_cp_comm(c);
        check_moe_plan(c);
        check_size_limits(c);
    } else {
        check_fill_even_stages(&plan->layout, plan->model.layers > 0 ? plan->model.layers : 0);
    }
    return diag_error_count() > errors_before ? -1 : 0;
}

int check_plan(Arena *arena, const char *path, Plan *plan)
{
    const char *why = NULL;
    int from_stdin = strcmp(path, "-") == 0;
    const char *name = from_stdin ? "<stdin>" : path;
    char *text = from_stdin ? check_read_stdin_text(arena, &why) : check_read_whole_file(arena, path, 0, &why);
    if (!text) {
        plan_defaults(plan, name);
        diag_error((SrcLoc){0}, NULL, "cannot read `%s`: %s", name, why);
        return -1;
    }
    return check_plan_text(arena, name, text, plan);
}

int check_plan_buffer(Arena *arena, const char *name, const char *data, size_t size, Plan *plan)
{
    if (size > MAX_SOURCE_BYTES || memchr(data, '\0', size)) {
        plan_defaults(plan, arena_strdup(arena, name));
        diag_error(check_file_loc(plan->file), NULL, "cannot read `%s`: %s", name,
                   size > MAX_SOURCE_BYTES ? "it is larger than 16 MiB, parc's limit for one file"
                                           : "it contains NUL bytes (not a text file)");
        return -1;
    }
    return check_plan_text(arena, name, arena_strndup(arena, data, size), plan);
}
