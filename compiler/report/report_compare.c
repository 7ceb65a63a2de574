/*
 * report_compare.c — pages that set plans side by side (`parc diff A B
 * --html`, `parc search PLAN --html`): a table of each plan's headline figures
 * (with the difference of two), then the plan report's memory bars of every
 * plan on one byte scale and their simulated timelines on one time scale.
 * Contracts in report_html.h.
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
    compare_table(out, plans, names, n);
    compare_pieces(out, plans, names, n, 0);
    compare_pieces(out, plans, names, n, 1);
    return report_html_close(out, path);
}
