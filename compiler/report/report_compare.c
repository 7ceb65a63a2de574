/*
 * report_compare.c — pages that set plans side by side (`parc diff A B
 * --html`, `parc search PLAN --html`): the settings in which the plans
 * differ, a table of each plan's headline figures (with the difference of
 * two), then the plan report's memory bars of every plan on one byte scale
 * and their simulated timelines on one time scale.  Contracts in
 * report_html.h.
 */
#include "report_html.h"

#include <math.h>
#include <string.h>

typedef enum { FIG_BYTES, FIG_TIME, FIG_SHARE, FIG_WIRE } FigKind;

typedef struct Figure {
    const char *key, *label;
    FigKind kind;
} Figure;

static const Figure figures[] = {
    {"peak_memory_bytes", "peak memory per GPU", FIG_BYTES},
    {"step_s", "estimated step", FIG_TIME},
    {"pipeline_s", "pipeline (simulated)", FIG_TIME},
    {"bubble_share", "bubble", FIG_SHARE},
    {"mfu", "model FLOPs utilisation", FIG_SHARE},
    {"wire_inside_bytes", "bytes per step inside nodes", FIG_WIRE},
    {"wire_across_bytes", "bytes per step across nodes", FIG_WIRE},
    {"forward_s", "forward", FIG_TIME},
    {"backward_s", "backward", FIG_TIME},
    {"exposed_communication_s", "exposed communication", FIG_TIME},
    {"bubble_s", "bubble time", FIG_TIME},
    {"optimizer_s", "optimizer", FIG_TIME},
};
enum { NFIGURES = sizeof figures / sizeof figures[0], FIRST_PHASE = 7 };

static double figure_value(const Analysis *an, int f)
{
    switch (f) {
    case 0: return (double)an->max_total;
    case 1: return an->step_s;
    case 2: return an->pipeline_s;
    case 3: return an->bubble_share;
    case 4: return analyze_mfu(an);
    case 5: return an->link_wire[0];
    case 6: return an->link_wire[1];
    default: return an->phase_s[f - FIRST_PHASE];
    }
}

static void figure_text(FigKind kind, double v, char *buf, size_t size)
{
    switch (kind) {
    case FIG_BYTES:
    case FIG_WIRE:
        if (v < 0) {
            buf[0] = '-';
            analyze_format_bytes(-v, buf + 1, size - 1);
        } else analyze_format_bytes(v, buf, size);
        break;
    case FIG_TIME: report_html_time(v, buf, size); break;
    case FIG_SHARE: snprintf(buf, size, "%.1f%%", 100.0 * v); break;
    }
}

static void compare_table(FILE *out, const Analysis *const *plans, const char *const *names, int n)
{
    fputs("<section class=\"figures\">\n<h2>The plans' figures</h2>\n<div class=\"wide\"><table>\n<tr><th></th>", out);
    for (int i = 0; i < n; i++) {
        fputs("<th>", out);
        report_html_escape(out, names[i]);
        fputs("</th>", out);
    }
    if (n == 2) fputs("<th>second \xe2\x88\x92 first</th><th>second / first</th>", out);
    fputs("</tr>\n", out);
    for (int f = 0; f < NFIGURES; f++) {
        fprintf(out, "<tr data-figure=\"%s\"><td>%s</td>", figures[f].key, figures[f].label);
        for (int i = 0; i < n; i++) {
            char b[64];
            double v = figure_value(plans[i], f);
            figure_text(figures[f].kind, v, b, sizeof b);
            fprintf(out, "<td data-plan=\"%d\" data-value=\"%.9g\">%s</td>", i, v, b);
        }
        if (n == 2) {
            double a = figure_value(plans[0], f), b = figure_value(plans[1], f);
            char d[64];
            if (figures[f].kind == FIG_SHARE) snprintf(d, sizeof d, "%+.1f points", 100.0 * (b - a));
            else figure_text(figures[f].kind, b - a, d, sizeof d);
            fprintf(out, "<td data-delta=\"%.9g\">%s</td><td>", b - a, d);
            if (a != 0) fprintf(out, "%.3gx", b / a);
            else fputs("-", out);
            fputs("</td>", out);
        }
        fputs("</tr>\n", out);
    }
    fputs("</table></div>\n</section>\n", out);
}

/* ------------------------------------------------------------ settings */

/* A setting's value in a plan: `exact` as the plan's dump (`parc lower
 * --emit=balance`) writes it, for data-*; `shown` in words, for the page. */
typedef struct SettingValue {
    char exact[256], shown[320];
} SettingValue;

typedef void SettingFn(const Plan *plan, SettingValue *v);

static void set_number(SettingValue *v, long long n)
{
    snprintf(v->exact, sizeof v->exact, "%lld", n);
    snprintf(v->shown, sizeof v->shown, "%lld", n);
}

static const char *axis_name(const Plan *plan, int a) { return a >= 0 ? plan->mesh.axes[a].name : "-"; }

static void setting_gpus(const Plan *p, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%d x %d", p->cluster.nodes, p->cluster.gpus_per_node);
    snprintf(v->shown, sizeof v->shown, "%d node%s \xc3\x97 %d GPUs", p->cluster.nodes,
             p->cluster.nodes == 1 ? "" : "s", p->cluster.gpus_per_node);
}

static void setting_mesh(const Plan *p, SettingValue *v)
{
    size_t e = 0, w = 0;
    v->exact[0] = v->shown[0] = 0;
    for (int a = 0; a < p->mesh.naxes; a++) {
        e += (size_t)snprintf(v->exact + e, sizeof v->exact - e, "%s%s %d", a ? ", " : "", p->mesh.axes[a].name,
                              p->mesh.axes[a].size);
        w += (size_t)snprintf(v->shown + w, sizeof v->shown - w, "%s%s %d", a ? " \xc3\x97 " : "",
                              p->mesh.axes[a].name, p->mesh.axes[a].size);
        if (e >= sizeof v->exact || w >= sizeof v->shown) break;
    }
}

static void setting_pp(const Plan *p, SettingValue *v) { set_number(v, p->layout.stages); }
static void setting_dp(const Plan *p, SettingValue *v) { set_number(v, plan_dp(p)); }

/* The tensor-parallel size: the axis heads split over, else ffn, else vocab. */
static void setting_tp(const Plan *p, SettingValue *v)
{
    static const Dim tensor_dims[] = {DIM_HEADS, DIM_FFN, DIM_VOCAB};
    int size = 1;
    for (int i = 0; i < 3 && size == 1; i++) size = plan_dim_parts(p, tensor_dims[i]);
    set_number(v, size);
}

static void setting_schedule(const Plan *p, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%s", schedule_kind_name(p->layout.schedule));
    snprintf(v->shown, sizeof v->shown, "%s", v->exact);
}

static void setting_virtual(const Plan *p, SettingValue *v) { set_number(v, p->layout.virtual_stages); }

static void setting_split(const Plan *p, SettingValue *v)
{
    const Layout *l = &p->layout;
    size_t e = 0, w = 0;
    v->exact[0] = v->shown[0] = 0;
    for (int s = 0; s < l->stages && e < sizeof v->exact && w < sizeof v->shown; s++)
        for (int c = 0; c < l->virtual_stages && e < sizeof v->exact && w < sizeof v->shown; c++) {
            int k = plan_chunk(l, s, c);
            const char *sep = c ? ", " : s ? " | " : "";
            e += (size_t)snprintf(v->exact + e, sizeof v->exact - e, "%s%d:%d", s || c ? " " : "", l->chunk_first[k],
                                  l->chunk_layers[k]);
            w += (size_t)snprintf(v->shown + w, sizeof v->shown - w, "%s%d..%d", sep, l->chunk_first[k],
                                  l->chunk_first[k] + l->chunk_layers[k] - 1);
        }
}

static void setting_sp(const Plan *p, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%s", axis_name(p, p->layout.sp_axis));
    snprintf(v->shown, sizeof v->shown, p->layout.sp_axis >= 0 ? "over %s" : "off", v->exact);
}

static void setting_zero(const Plan *p, SettingValue *v)
{
    const Layout *l = &p->layout;
    snprintf(v->exact, sizeof v->exact, "%d over %s", l->zero_stage, axis_name(p, l->zero_axis));
    if (l->zero_stage > 0)
        snprintf(v->shown, sizeof v->shown, "ZeRO-%d over %s", l->zero_stage, axis_name(p, l->zero_axis));
    else snprintf(v->shown, sizeof v->shown, "off");
}

static void setting_recompute(const Plan *p, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%s", recompute_names[p->layout.recompute]);
    snprintf(v->shown, sizeof v->shown, "%s", v->exact);
}

static void setting_overlap(const Plan *p, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%s", p->layout.grad_overlap_off ? "off" : "on");
    snprintf(v->shown, sizeof v->shown, "%s", v->exact);
}

static void setting_tp_overlap(const Plan *p, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%s", p->layout.tp_overlap_off ? "off" : "on");
    snprintf(v->shown, sizeof v->shown, "%s", v->exact);
}

static void setting_scatter(const Plan *p, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%s", p->layout.pipeline_scatter ? "on" : "off");
    snprintf(v->shown, sizeof v->shown, "%s", v->exact);
}

static void setting_balance(const Plan *p, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%s", p->layout.balance == BALANCE_AUTO ? "auto" : "even");
    snprintf(v->shown, sizeof v->shown, "%s", v->exact);
}

static void setting_batch(const Plan *p, SettingValue *v) { set_number(v, p->train.batch); }
static void setting_micro_batch(const Plan *p, SettingValue *v) { set_number(v, p->train.micro_batch); }
static void setting_micro_batches(const Plan *p, SettingValue *v) { set_number(v, p->train.micro_batches); }

static void setting_precision(const Plan *p, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%s", precision_names[p->train.precision]);
    snprintf(v->shown, sizeof v->shown, "%s", v->exact);
}

static void setting_flag(int on, SettingValue *v)
{
    snprintf(v->exact, sizeof v->exact, "%d", on);
    snprintf(v->shown, sizeof v->shown, "%s", on ? "yes" : "no");
}
static void setting_master(const Plan *p, SettingValue *v) { setting_flag(p->train.master_fp32, v); }
static void setting_grads(const Plan *p, SettingValue *v) { setting_flag(p->train.grads_fp32, v); }

/* The settings the page compares, in the order it lists them; each plan's
 * dim-to-axis rules follow them (key "split DIM"). */
static const struct {
    const char *key, *label;
    SettingFn *value;
} settings[] = {
    {"gpus", "GPUs", setting_gpus},
    {"mesh", "mesh axes", setting_mesh},
    {"pp", "pipeline stages (pp)", setting_pp},
    {"dp", "data-parallel ranks (dp)", setting_dp},
    {"tp", "tensor-parallel ranks (tp)", setting_tp},
    {"schedule", "pipeline schedule", setting_schedule},
    {"virtual_stages", "virtual stages per rank", setting_virtual},
    {"stage_split", "layers of each stage", setting_split},
    {"balance", "stage balance", setting_balance},
    {"batch", "batch", setting_batch},
    {"micro_batch", "micro-batch", setting_micro_batch},
    {"micro_batches", "micro-batches per rank", setting_micro_batches},
    {"zero", "ZeRO", setting_zero},
    {"recompute", "recompute", setting_recompute},
    {"sp_axis", "sequence parallel", setting_sp},
    {"grad_overlap", "gradient sync under the backward", setting_overlap},
    {"tp_overlap", "input-gradient collectives under the weight-gradient GEMMs", setting_tp_overlap},
    {"pipeline_scatter", "pipeline messages scattered over tp", setting_scatter},
    {"precision", "precision", setting_precision},
    {"master_fp32", "fp32 master weights", setting_master},
    {"grads_fp32", "fp32 gradients", setting_grads},
};
enum { NSETTINGS = sizeof settings / sizeof settings[0] };

/* Setting k's value in `plan`: a row of the table above, then one per dim. */
static void setting_value(const Plan *plan, int k, SettingValue *v)
{
    if (k < NSETTINGS) {
        settings[k].value(plan, v);
        return;
    }
    int a = plan->layout.dim_axis[k - NSETTINGS];
    snprintf(v->exact, sizeof v->exact, "%s", axis_name(plan, a));
    snprintf(v->shown, sizeof v->shown, a >= 0 ? "over %s" : "not split", v->exact);
}

static void setting_key(int k, char *buf, size_t size, int label)
{
    if (k < NSETTINGS) snprintf(buf, size, "%s", label ? settings[k].label : settings[k].key);
    else snprintf(buf, size, label ? "%s split" : "split %s", dim_names[k - NSETTINGS]);
}

/* The settings in which the plans differ, each plan's value side by side;
 * the names of those they share below. */
static void compare_settings(FILE *out, const Analysis *const *plans, const char *const *names, int n)
{
    Arena arena = {0};
    SettingValue *v = arena_alloc(&arena, sizeof(SettingValue) * (size_t)n);
    int same = 0, differ = 0;
    char buf[128];
    fputs("<section class=\"settings\">\n<h2>Settings that differ</h2>\n", out);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && same) fputs("<p class=\"note\" data-same-settings>The same in every plan: ", out);
        int listed = 0;
        for (int k = 0; k < NSETTINGS + DIM_COUNT; k++) {
            int differs = 0, split = k < NSETTINGS;
            for (int i = 0; i < n; i++) {
                setting_value(plans[i]->prog->plan, k, &v[i]);
                differs |= i > 0 && strcmp(v[i].exact, v[0].exact) != 0;
                split |= k >= NSETTINGS && plans[i]->prog->plan->layout.dim_axis[k - NSETTINGS] >= 0;
            }
            if (!split) continue; /* a dim no plan splits */
            if (pass == 0 && !differs) {
                same++;
                continue;
            }
            if (pass == 1) {
                if (differs) continue;
                setting_key(k, buf, sizeof buf, 1);
                fputs(listed++ ? ", " : "", out);
                report_html_escape(out, buf);
                continue;
            }
            if (!differ++) {
                fputs("<div class=\"wide\"><table class=\"settings\">\n<tr><th class=\"l\">setting</th>", out);
                for (int i = 0; i < n; i++) {
                    fputs("<th class=\"l\">", out);
                    report_html_escape(out, names[i]);
                    fputs("</th>", out);
                }
                fputs("</tr>\n", out);
            }
            setting_key(k, buf, sizeof buf, 0);
            fputs("<tr data-setting=\"", out);
            report_html_escape(out, buf);
            setting_key(k, buf, sizeof buf, 1);
            fputs("\"><td class=\"l\">", out);
            report_html_escape(out, buf);
            fputs("</td>", out);
            for (int i = 0; i < n; i++) {
                fprintf(out, "<td class=\"l%s\" data-plan=\"%d\" data-setting-value=\"",
                        k < NSETTINGS && settings[k].value == setting_split ? " layers" : "", i);
                report_html_escape(out, v[i].exact);
                fputs("\">", out);
                report_html_escape(out, v[i].shown);
                fputs("</td>", out);
            }
            fputs("</tr>\n", out);
        }
        if (pass == 0 && differ) fputs("</table></div>\n", out);
        if (pass == 0 && !differ) fputs("<p>None: the plans' layouts and training settings are the same.</p>\n", out);
        if (pass == 1 && same) fputs(".</p>\n", out);
    }
    fputs("</section>\n", out);
    arena_free(&arena);
}

/* Each plan's piece under its name, in a row that wraps. */
static void compare_pieces(FILE *out, const Analysis *const *plans, const char *const *names, int n, int timeline)
{
    double bytes = 0, seconds = 0;
    for (int i = 0; i < n; i++) {
        double cap = plans[i]->prog->plan->cluster.gpu_memory;
        bytes = fmax(bytes, fmax((double)plans[i]->max_total, cap) * 1.08);
        seconds = fmax(seconds, plans[i]->step_s);
    }
    fputs("<div class=\"side\" style=\"display:flex;flex-wrap:wrap;gap:12px 32px;align-items:flex-start\">\n", out);
    for (int i = 0; i < n; i++) {
        fprintf(out, "<div class=\"plan\" data-plan=\"%d\">\n<h3>", i);
        report_html_escape(out, names[i]);
        fputs("</h3>\n", out);
        if (timeline) report_html_timeline(out, plans[i], seconds);
        else report_html_memory(out, plans[i], bytes);
        fputs("</div>\n", out);
    }
    fputs("</div>\n", out);
}

int report_html_compare(const char *path, const char *title, const Analysis *const *plans, const char *const *names,
                        int n)
{
    FILE *out = report_html_open(path, title);
    if (!out) return -1;
    fputs("<h1>", out);
    report_html_escape(out, title);
    fputs("</h1>\n", out);
    compare_settings(out, plans, names, n);
    compare_table(out, plans, names, n);
    compare_pieces(out, plans, names, n, 0);
    compare_pieces(out, plans, names, n, 1);
    return report_html_close(out, path);
}
