/*
 * diff.c — `parc diff A.par B.par [--json]`: two plans lowered and analyzed,
 * side by side with their deltas: memory by class per stage, the
 * collectives one rank of the busiest stage issues (added, removed or
 * changed, each with the rule that put it there), bytes per link class,
 * the bubble, the step time and MFU.  Every number is read off the two
 * Analyses, as explain prints them.
 */
#include "explain.h"
#include "passes.h"
#include "report_html.h"
#include "tools.h"

#include <math.h>
#include <string.h>

/* A collective row's identity across two plans: what it moves and why,
 * not the stage it ended up on (stage counts may differ). */
static int row_same(const Analysis *a, const CollRow *x, const Analysis *b, const CollRow *y)
{
    const char *ax = x->axis >= 0 ? a->prog->plan->mesh.axes[x->axis].name : "-";
    const char *ay = y->axis >= 0 ? b->prog->plan->mesh.axes[y->axis].name : "-";
    return x->phase == y->phase && x->coll == y->coll && !strcmp(ax, ay) && !strcmp(x->op, y->op) &&
           !strcmp(x->tensor, y->tensor);
}

static double row_bytes(const CollRow *r) { return (double)r->elems * r->elem_bytes * (double)r->calls; }

/* The row of `an`'s busiest stage matching r of `other`, or NULL. */
static const CollRow *find_row(const Analysis *an, const Analysis *other, const CollRow *r)
{
    for (int i = 0; i < an->nrows; i++)
        if (an->rows[i].stage == an->worst_stage && row_same(an, &an->rows[i], other, r)) return &an->rows[i];
    return NULL;
}

static const char *axis_name(const Analysis *an, const CollRow *r)
{
    return r->axis >= 0 ? an->prog->plan->mesh.axes[r->axis].name : "-";
}

static void layout_line(FILE *out, const Analysis *an)
{
    const Plan *p = an->prog->plan;
    fprintf(out, "mesh");
    for (int a = 0; a < p->mesh.naxes; a++) fprintf(out, " %s %d", p->mesh.axes[a].name, p->mesh.axes[a].size);
    fprintf(out, "; zero %d; recompute %s; micro_batch %lld x %lld", p->layout.zero_stage,
            recompute_names[p->layout.recompute], (long long)p->train.micro_batch, (long long)p->train.micro_batches);
    if (p->layout.pp_axis >= 0)
        fprintf(out, "; %s x%d", schedule_kind_name(an->prog->schedule.kind), p->layout.virtual_stages);
    if (p->layout.sp_axis >= 0) fprintf(out, "; sequence parallel");
    if (p->layout.dim_axis[DIM_SEQ] >= 0)
        fprintf(out, "; seq over %s%s%s", p->mesh.axes[p->layout.dim_axis[DIM_SEQ]].name,
                p->layout.cp_comm == CP_COMM_RING ? " (ring attention)" : "",
                p->layout.cp_balanced ? " load-balanced" : "");
    if (p->layout.dim_axis[DIM_EXPERTS] >= 0)
        fprintf(out, "; experts over %s", p->mesh.axes[p->layout.dim_axis[DIM_EXPERTS]].name);
    if (p->model.block.moe.capacity > 0) fprintf(out, "; capacity %g", p->model.block.moe.capacity);
    if (p->layout.grad_overlap_off) fprintf(out, "; grad_overlap off");
    if (p->layout.tp_overlap_off) fprintf(out, "; tp_overlap off");
    if (p->layout.pipeline_scatter) fprintf(out, "; pipeline_scatter on");
}

static void print_delta_bytes(FILE *out, const char *what, double a, double b)
{
    char ba[64], bb[64], bd[64];
    analyze_format_bytes(a, ba, sizeof ba);
    analyze_format_bytes(b, bb, sizeof bb);
    analyze_format_bytes(b - a, bd, sizeof bd);
    fprintf(out, "  %-22s %12s %12s %s%s\n", what, ba, bb, b - a > 0 ? "+" : "", a == b ? "=" : bd);
}

static void print_delta_time(FILE *out, const char *what, double a, double b, const char *unit)
{
    if (a == b) fprintf(out, "  %-22s %12.4g %12.4g =\n", what, a, b);
    else if (a != 0) fprintf(out, "  %-22s %12.4g %12.4g %+.4g %s (%+.1f%%)\n", what, a, b, b - a, unit, 100.0 * (b - a) / a);
    else fprintf(out, "  %-22s %12.4g %12.4g %+.4g %s\n", what, a, b, b - a, unit);
}

static void diff_memory(FILE *out, const Analysis *a, const Analysis *b)
{
    int n = a->prog->nstages > b->prog->nstages ? a->prog->nstages : b->prog->nstages;
    for (int s = 0; s < n; s++) {
        const StageCost *x = s < a->prog->nstages ? &a->stages[s] : NULL;
        const StageCost *y = s < b->prog->nstages ? &b->stages[s] : NULL;
        fprintf(out, "\nmemory per rank, stage %d%s%s:\n", s, x ? "" : " (only in B)", y ? "" : " (only in A)");
        for (int k = 0; k < PRT_NCLASS; k++)
            print_delta_bytes(out, ledger_class_names[k], x ? (double)x->ledger[k] : 0, y ? (double)y->ledger[k] : 0);
        print_delta_bytes(out, "total", x ? (double)x->total : 0, y ? (double)y->total : 0);
    }
    fprintf(out, "\nbusiest rank: A stage %d, B stage %d\n", a->worst_stage, b->worst_stage);
    print_delta_bytes(out, "peak", (double)a->max_total, (double)b->max_total);
}

static void print_row(FILE *out, char mark, const Analysis *an, const CollRow *r)
{
    char b1[64];
    analyze_format_bytes(row_bytes(r), b1, sizeof b1);
    fprintf(out, "  %c %-9s %-15s %-4s %-14s %-12s %lld x %lld elements, %s/step  %s\n", mark, phase_names[r->phase],
            coll_names[r->coll], axis_name(an, r), r->op, r->tensor, (long long)r->calls, (long long)r->elems, b1,
            r->why);
}

static void diff_collectives(FILE *out, const Analysis *a, const Analysis *b)
{
    fprintf(out, "\ncollectives of one rank of the busiest stage (- only in A, + only in B, ~ changed):\n");
    int shown = 0;
    for (int i = 0; i < a->nrows; i++) {
        const CollRow *r = &a->rows[i];
        if (r->stage != a->worst_stage) continue;
        const CollRow *o = find_row(b, a, r);
        if (!o) print_row(out, '-', a, r), shown++;
        else if (o->elems != r->elems || o->calls != r->calls || o->group != r->group ||
                 o->elem_bytes != r->elem_bytes || o->inside_node != r->inside_node) {
            char b1[64], b2[64];
            analyze_format_bytes(row_bytes(r), b1, sizeof b1);
            analyze_format_bytes(row_bytes(o), b2, sizeof b2);
            fprintf(out, "  ~ %-9s %-15s %-4s %-14s %-12s group %d -> %d, %lld -> %lld calls of %lld -> %lld elements, "
                         "%s -> %s/step%s  %s\n",
                    phase_names[r->phase], coll_names[r->coll], axis_name(a, r), r->op, r->tensor, r->group, o->group,
                    (long long)r->calls, (long long)o->calls, (long long)r->elems, (long long)o->elems, b1, b2,
                    o->inside_node != r->inside_node ? (o->inside_node ? ", now inside a node" : ", now across nodes")
                                                     : "",
                    o->why);
            shown++;
        }
    }
    for (int i = 0; i < b->nrows; i++) {
        const CollRow *r = &b->rows[i];
        if (r->stage == b->worst_stage && !find_row(a, b, r)) print_row(out, '+', b, r), shown++;
    }
    if (!shown) fprintf(out, "  (the same)\n");
}

void diff_report(FILE *out, const Analysis *a, const Analysis *b)
{
    fprintf(out, "A %s: ", a->prog->plan->file);
    layout_line(out, a);
    fprintf(out, "\nB %s: ", b->prog->plan->file);
    layout_line(out, b);
    fprintf(out, "\n");
    diff_memory(out, a, b);
    diff_collectives(out, a, b);
    fprintf(out, "\nper rank per step %12s %12s delta\n", "A", "B");
    print_delta_bytes(out, "inside nodes (wire)", a->link_wire[0], b->link_wire[0]);
    print_delta_bytes(out, "across nodes (wire)", a->link_wire[1], b->link_wire[1]);
    print_delta_bytes(out, "pipeline messages", a->pipeline_bytes, b->pipeline_bytes);
    fprintf(out, "\ntime %25s %12s delta\n", "A", "B");
    print_delta_time(out, "bubble share", a->bubble_share, b->bubble_share, "");
    print_delta_time(out, "pipeline s", a->pipeline_s, b->pipeline_s, "s");
    print_delta_time(out, "step time s", a->step_s, b->step_s, "s");
    print_delta_time(out, "MFU %", 100.0 * analyze_mfu(a), 100.0 * analyze_mfu(b), "points");
    double r = a->step_s > 0 && b->step_s > 0 ? a->step_s / b->step_s : 1;
    if (r != 1) fprintf(out, "%s is faster by %.3gx\n", r > 1 ? "B" : "A", r > 1 ? r : 1 / r);
    else fprintf(out, "the same estimated step time\n");
}

/* ------------------------------------------------------------ JSON */

static void json_side(FILE *out, const Analysis *an)
{
    fprintf(out, "{\"plan\": \"%s\", \"stages\": [", an->prog->plan->file);
    for (int s = 0; s < an->prog->nstages; s++) {
        fprintf(out, "%s{", s ? ", " : "");
        for (int k = 0; k < PRT_NCLASS; k++)
            fprintf(out, "\"%s\": %lld, ", ledger_class_names[k], (long long)an->stages[s].ledger[k]);
        fprintf(out, "\"total\": %lld}", (long long)an->stages[s].total);
    }
    fprintf(out, "], \"peak_memory_bytes\": %lld, \"wire_inside_nodes\": %.0f, \"wire_across_nodes\": %.0f, "
                 "\"pipeline_bytes\": %.0f, \"bubble_share\": %.6g, \"step_time_s\": %.6g, \"mfu\": %.6g}",
            (long long)an->max_total, an->link_wire[0], an->link_wire[1], an->pipeline_bytes, an->bubble_share,
            an->step_s, analyze_mfu(an));
}

static void json_row(FILE *out, const char *change, const Analysis *an, const CollRow *r, const CollRow *other)
{
    fprintf(out, "{\"change\": \"%s\", \"phase\": \"%s\", \"collective\": \"%s\", \"axis\": \"%s\", \"op\": \"%s\", "
                 "\"tensor\": \"%s\", \"calls\": %lld, \"elements\": %lld",
            change, phase_names[r->phase], coll_names[r->coll], axis_name(an, r), r->op, r->tensor,
            (long long)r->calls, (long long)r->elems);
    if (other) fprintf(out, ", \"b_calls\": %lld, \"b_elements\": %lld", (long long)other->calls, (long long)other->elems);
    fprintf(out, ", \"rule\": \"");
    for (const char *s = (other ? other : r)->why; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        fputc(*s, out);
    }
    fprintf(out, "\"}");
}

void diff_report_json(FILE *out, const Analysis *a, const Analysis *b)
{
    fprintf(out, "{\n  \"schema\": \"parc.diff/1\",\n  \"a\": ");
    json_side(out, a);
    fprintf(out, ",\n  \"b\": ");
    json_side(out, b);
    fprintf(out, ",\n  \"collectives\": [");
    int n = 0;
    for (int i = 0; i < a->nrows; i++) {
        const CollRow *r = &a->rows[i];
        if (r->stage != a->worst_stage) continue;
        const CollRow *o = find_row(b, a, r);
        if (o && o->elems == r->elems && o->calls == r->calls && o->group == r->group) continue;
        fprintf(out, "%s\n    ", n++ ? "," : "");
        json_row(out, o ? "changed" : "removed", a, r, o);
    }
    for (int i = 0; i < b->nrows; i++) {
        const CollRow *r = &b->rows[i];
        if (r->stage != b->worst_stage || find_row(a, b, r)) continue;
        fprintf(out, "%s\n    ", n++ ? "," : "");
        json_row(out, "added", b, r, NULL);
    }
    fprintf(out, "\n  ],\n  \"step_time_ratio_a_over_b\": %.6g\n}\n", b->step_s > 0 ? a->step_s / b->step_s : 0);
}

/* ------------------------------------------------------------ command */

int diff_main(const CliOptions *o)
{
    const char *paths[2] = {o->plan, o->plan2}, *html = o->html;
    int json = o->json, verify = o->verify;
    Arena arena = {0};
    Compilation c[2];
    int analyze = passes_find("analyze"), status = 0;
    for (int k = 0; k < 2; k++)
        if (passes_run(&c[k], &arena, paths[k], verify, analyze) || diag_error_count()) status = 1;
    if (!status) {
        if (html) {
            const Analysis *plans[2] = {c[0].analysis, c[1].analysis};
            char title[1024];
            snprintf(title, sizeof title, "parc diff: %s and %s", paths[0], paths[1]);
            status = report_html_compare(html, title, plans, paths, 2) ? 3 : 0;
        } else if (json) diff_report_json(stdout, c[0].analysis, c[1].analysis);
        else diff_report(stdout, c[0].analysis, c[1].analysis);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "parc diff: cannot write the report\n");
            status = 3;
        }
    }
    for (int k = 0; k < 2; k++) passes_finish(&c[k]);
    arena_free(&arena);
    return status;
}
