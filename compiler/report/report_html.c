/*
 * report_html.c — `parc explain PLAN --html FILE`: the page, its summary, the
 * memory bars, the mesh and its traffic, and the collectives table.  The
 * pipeline timeline is in report_html_timeline.c.  Contracts in report_html.h.
 */
#include "report_html.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ text and numbers */

void report_html_escape(FILE *out, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*s, out); break;
        }
    }
}

void report_html_time(double seconds, char *buf, size_t size)
{
    double a = fabs(seconds);
    if (a >= 1.0 || a == 0.0) snprintf(buf, size, "%.4g s", seconds);
    else if (a >= 1e-3) snprintf(buf, size, "%.4g ms", seconds * 1e3);
    else snprintf(buf, size, "%.4g \xc2\xb5s", seconds * 1e6);
}

double report_html_tick(double range, int ticks)
{
    if (!(range > 0) || ticks < 1) return 1.0;
    double raw = range / ticks, p = pow(10.0, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * p;
}

/* Ledger classes, in enum prt_class order. */
static const char *const class_colors[PRT_NCLASS] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                     "#59a14f", "#edc948", "#b07aa1"};
/* Colours of the positions in a mesh group (coordinate on the axis), cycled. */
static const char *const position_colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
#define NPOSITION_COLORS ((int)(sizeof position_colors / sizeof position_colors[0]))

static void legend_item(FILE *out, const char *color, const char *label)
{
    fprintf(out, "<span><i class=\"swatch\" style=\"background:%s\"></i>", color);
    report_html_escape(out, label);
    fputs("</span>", out);
}

/* ------------------------------------------------------------ page */

static const char page_style[] =
    ":root{--ink:#1d2330;--mute:#5b6475;--line:#d9dde5;--bg:#f4f5f7}\n"
    "body{font:14px/1.45 system-ui,-apple-system,\"Segoe UI\",Roboto,\"DejaVu Sans\",sans-serif;"
    "color:var(--ink);background:var(--bg);margin:0}\n"
    "main{max-width:1360px;margin:0 auto;padding:18px 20px 40px}\n"
    "section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:14px 0}\n"
    "h1{font-size:21px;margin:0 0 4px}h2{font-size:16px;margin:0 0 6px}\n"
    ".sub,.note{color:var(--mute)}.note{font-size:12px;margin:6px 0 0}\n"
    ".cards{display:flex;gap:12px;flex-wrap:wrap;margin-top:12px}\n"
    ".card{flex:1 1 170px;border:1px solid var(--line);border-radius:6px;padding:8px 12px;background:#fafbfc}\n"
    ".card b{display:block;font-size:21px;font-weight:650}.card small{color:var(--mute)}\n"
    ".card.bad{border-color:#d62728;background:#fff1f0}.card.bad b{color:#b3161b}\n"
    ".legend{margin:2px 0 6px;font-size:13px}.legend span{margin-right:16px;white-space:nowrap}\n"
    ".swatch{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:5px}\n"
    ".swatch.idle{background:repeating-linear-gradient(45deg,#eef0f3 0 3px,#c3c9d2 3px 5px)}\n"
    ".swatch.line{height:2px;vertical-align:3px;background:#3d4452}\n"
    "table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin-top:8px}\n"
    "th,td{padding:3px 9px;border-bottom:1px solid #eceef2;text-align:right}td{white-space:nowrap}\n"
    "th{background:#f0f2f5;font-weight:600}td.l,th.l{text-align:left}\n"
    "td.why{white-space:normal;text-align:left;color:var(--mute);min-width:320px}\n"
    "td.layers{white-space:normal;min-width:10em}\n"
    ".wide{overflow-x:auto;max-width:100%}\n"
    "tr.total td{font-weight:600;border-top:1px solid var(--line)}\n"
    "td.bad{color:#b3161b;font-weight:600}\n"
    ".bar{display:inline-block;height:10px;border-radius:2px;vertical-align:-1px}\n"
    ".filter{margin:4px 0 2px}.filter button{font:inherit;font-size:13px;color:var(--ink);background:#fff;"
    "border:1px solid var(--line);border-radius:4px;padding:1px 8px;margin:0 4px 4px 0;cursor:pointer}\n"
    ".filter button[aria-pressed=true]{background:var(--ink);border-color:var(--ink);color:#fff}\n"
    ".filter small{opacity:.75}.filter select{font:inherit;font-size:13px}\n"
    ".panels{display:flex;flex-wrap:wrap;gap:6px 40px}.panel h3{font-size:14px;margin:10px 0 2px}\n"
    ".panel h3 .sub{font-weight:400;font-size:13px}\n"
    "svg{display:block;margin:4px 0}svg text{font-size:12px;fill:var(--ink)}\n"
    "svg.timeline,svg.memory,svg.mesh{max-width:100%;height:auto}\n"
    "svg .mute{fill:var(--mute)}svg .ax{stroke:#9aa1ad}svg .grid{stroke:#e6e9ee}\n"
    "svg .hl{stroke:#111;stroke-width:2}\n";

/* Hover: outline every block of the micro-batch under the pointer, or every
 * GPU of the mesh group under it (within the same picture).  The collectives'
 * filter: the rows of the axis and stage chosen above the table. */
static const char page_script[] =
    "(function(){var on=[];\n"
    "document.addEventListener('mouseover',function(e){\n"
    " on.forEach(function(x){x.classList.remove('hl')});on=[];\n"
    " var t=e.target&&e.target.closest?e.target.closest('[data-micro],[data-group]'):null;\n"
    " if(!t)return;var svg=t.closest('svg');if(!svg)return;\n"
    " var q=t.hasAttribute('data-micro')?'[data-micro=\"'+CSS.escape(t.dataset.micro)+'\"]'\n"
    "  :'[data-axis=\"'+CSS.escape(t.dataset.axis)+'\"][data-group=\"'+CSS.escape(t.dataset.group)+'\"]';\n"
    " on=Array.prototype.slice.call(svg.querySelectorAll(q));\n"
    " on.forEach(function(x){x.classList.add('hl')});});})();\n"
    "(function(){\n"
    "function show(sec){var a=sec.getAttribute('data-show-axis')||'',s=sec.getAttribute('data-show-stage')||'',\n"
    " n=0,rows=sec.querySelectorAll('tr[data-row]');\n"
    " rows.forEach(function(r){var on=(!a||r.getAttribute('data-axis')===a)&&(!s||r.getAttribute('data-stage')===s);\n"
    "  r.hidden=!on;n+=on?1:0;});\n"
    " sec.querySelectorAll('button[data-axis-filter]').forEach(function(b){\n"
    "  b.setAttribute('aria-pressed',String(b.getAttribute('data-axis-filter')===a));});\n"
    " var c=sec.querySelector('[data-shown]');\n"
    " if(c)c.textContent=n===rows.length?'all '+n+' rows':n+' of '+rows.length+' rows';}\n"
    "document.addEventListener('click',function(e){\n"
    " var b=e.target&&e.target.closest?e.target.closest('button[data-axis-filter]'):null;if(!b)return;\n"
    " var sec=b.closest('section');sec.setAttribute('data-show-axis',b.getAttribute('data-axis-filter'));show(sec);});\n"
    "document.addEventListener('change',function(e){\n"
    " var t=e.target;if(!t||!t.matches||!t.matches('select[data-stage-filter]'))return;\n"
    " var sec=t.closest('section');sec.setAttribute('data-show-stage',t.value);show(sec);});})();\n";

FILE *report_html_open(const char *path, const char *title)
{
    FILE *out = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (!out) {
        diag_error((SrcLoc){0}, NULL, "cannot write the report %s: %s", path, strerror(errno));
        return NULL;
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", out);
    report_html_escape(out, title);
    fprintf(out, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n", page_style);
    /* patterns shared by every picture of the page */
    fputs("<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs>"
          "<pattern id=\"parc-idle\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" "
          "patternTransform=\"rotate(45)\"><rect width=\"5\" height=\"5\" fill=\"#eef0f3\"/>"
          "<rect width=\"2\" height=\"5\" fill=\"#c3c9d2\"/></pattern></defs></svg>\n",
          out);
    return out;
}

int report_html_close(FILE *out, const char *path)
{
    fprintf(out, "</main>\n<script>\n%s</script>\n</body>\n</html>\n", page_script);
    int failed = ferror(out) != 0;
    int saved = failed ? errno : 0;
    if (out == stdout ? fflush(out) != 0 : fclose(out) != 0) failed = 1, saved = errno;
    if (failed) {
        diag_error((SrcLoc){0}, NULL, "cannot write the report %s: %s", path, saved ? strerror(saved) : "write error");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ summary */

static void summary_card(FILE *out, int bad, const char *label, const char *value, const char *detail)
{
    fprintf(out, "<div class=\"card%s\"><small>", bad ? " bad" : "");
    report_html_escape(out, label);
    fputs("</small><b>", out);
    report_html_escape(out, value);
    fputs("</b><small>", out);
    report_html_escape(out, detail);
    fputs("</small></div>\n", out);
}

void report_html_summary(FILE *out, const Analysis *an)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    const Train *t = &plan->train;
    char b1[64], b2[64], b3[64], detail[256];
    fputs("<section class=\"summary\">\n<h1>", out);
    report_html_escape(out, plan->file ? plan->file : "plan");
    fputs("</h1>\n<p class=\"sub\">model ", out);
    report_html_escape(out, plan->model.name ? plan->model.name : "");
    fprintf(out, ", %lld parameters, %lld layers &middot; %d node%s &times; %d GPUs &middot; mesh",
            (long long)prog->graph->params_total, (long long)plan->model.layers, plan->cluster.nodes,
            plan->cluster.nodes == 1 ? "" : "s", plan->cluster.gpus_per_node);
    for (int a = 0; a < plan->mesh.naxes; a++) {
        fputs(a ? " &times; " : " ", out);
        report_html_escape(out, plan->mesh.axes[a].name);
        fprintf(out, " %d", plan->mesh.axes[a].size);
    }
    fprintf(out, " &middot; batch %lld &times; seq %lld, micro-batch %lld, %lld micro-batches per rank &middot; %s",
            (long long)t->batch, (long long)plan->model.seq, (long long)t->micro_batch, (long long)t->micro_batches,
            precision_names[t->precision]);
    if (prog->nstages > 1) fprintf(out, " &middot; %s schedule", schedule_kind_name(prog->schedule.kind));
    fputs("</p>\n<div class=\"cards\">\n", out);

    const Cluster *cl = &plan->cluster;
    analyze_format_bytes((double)an->max_total, b1, sizeof b1);
    analyze_format_bytes(cl->gpu_memory, b2, sizeof b2);
    analyze_format_bytes(cl->gpu_reserve, b3, sizeof b3);
    int used = snprintf(detail, sizeof detail, "%.1f%% of %s with the %s reserve",
                        100.0 * plan_memory_share(cl, (double)an->max_total), b2, b3);
    if (prog->nstages > 1) snprintf(detail + used, sizeof detail - (size_t)used, ", stage %d", an->worst_stage);
    int fits = plan_fits(cl, (double)an->max_total);
    summary_card(out, !fits, fits ? "peak memory per GPU" : "peak memory per GPU: DOES NOT FIT", b1, detail);

    report_html_time(an->step_s, b1, sizeof b1);
    report_html_time(an->pipeline_s, b2, sizeof b2);
    report_html_time(an->step_s - an->pipeline_s, b3, sizeof b3);
    snprintf(detail, sizeof detail, "pipeline %s + gradient sync and optimizer %s", b2, b3);
    summary_card(out, 0, "estimated step time", b1, detail);

    snprintf(b1, sizeof b1, "%.1f%%", 100.0 * an->bubble_share);
    snprintf(detail, sizeof detail, "of the simulated step; ideal (p-1)/(v m) = %.1f%%", 100.0 * an->bubble_ideal);
    summary_card(out, 0, "pipeline bubble", b1, detail);

    double mfu = an->step_s > 0 ? an->model_flops_per_step / (an->step_s * an->peak_flops * plan->mesh.world) : 0;
    snprintf(b1, sizeof b1, "%.1f%%", 100.0 * mfu);
    snprintf(detail, sizeof detail, "%.4g model FLOP per step on %d GPUs", an->model_flops_per_step, plan->mesh.world);
    summary_card(out, 0, "model FLOPs utilisation", b1, detail);

    analyze_format_bytes(an->link_wire[0], b1, sizeof b1);
    analyze_format_bytes(an->link_wire[1], b2, sizeof b2);
    snprintf(detail, sizeof detail, "inside nodes; %s across nodes (per rank, busiest stage)", b2);
    summary_card(out, an->link_wire[1] > an->link_wire[0], "traffic per step", b1, detail);
    fputs("</div>\n</section>\n", out);
}

/* ------------------------------------------------------------ memory */

enum { MEM_W = 1320, MEM_H = 340, MEM_L = 86, MEM_R = 230, MEM_T = 24, MEM_B = 46 };

static void memory_axis(FILE *out, double top, double y0, double plot_h)
{
    double step = 1.0, unit = 1.0;
    while (top / unit >= 1024.0) unit *= 1024.0;
    step = report_html_tick(top / unit, 5) * unit;
    for (double v = 0; v <= top * 1.0001; v += step) {
        char label[64];
        double y = y0 - v / top * plot_h;
        analyze_format_bytes(v, label, sizeof label);
        fprintf(out, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>", MEM_L, MEM_W - MEM_R, y, y);
        fprintf(out, "<text class=\"mute\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", MEM_L - 8, y + 4,
                label);
    }
    fprintf(out, "<line class=\"ax\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>\n", MEM_L, MEM_W - MEM_R, y0, y0);
}

/* Stage s's stacked segments, bottom up in class order; `labelled` adds the
 * total above the bar. */
static void memory_bar(FILE *out, const Analysis *an, int s, double x, double bw, double y0, double px_per_byte,
                       int labelled)
{
    const StageCost *sc = &an->stages[s];
    const Plan *plan = an->prog->plan;
    double y = y0;
    char b1[64];
    for (int k = 0; k < PRT_NCLASS; k++) {
        if (!sc->ledger[k]) continue;
        double h = (double)sc->ledger[k] * px_per_byte;
        y -= h;
        analyze_format_bytes((double)sc->ledger[k], b1, sizeof b1);
        fprintf(out,
                "<rect data-stage=\"%d\" data-class=\"%s\" data-bytes=\"%lld\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                "height=\"%.2f\" fill=\"%s\"><title>stage %d, %s: %s (%lld B, %.1f%% of the stage)</title></rect>\n",
                s, ledger_class_names[k], (long long)sc->ledger[k], x, y, bw, h, class_colors[k], s,
                ledger_class_names[k], b1, (long long)sc->ledger[k],
                sc->total ? 100.0 * (double)sc->ledger[k] / (double)sc->total : 0.0);
    }
    if (!labelled) return;
    analyze_format_bytes((double)sc->total, b1, sizeof b1);
    int fits = plan_fits(&plan->cluster, (double)sc->total);
    fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\"%s>%s</text>\n", x + bw / 2, y - 5,
            fits ? "" : " style=\"fill:#b3161b;font-weight:600\"", b1);
}

static void memory_bars(FILE *out, const Analysis *an, double scale_bytes)
{
    const Program *prog = an->prog;
    double cap = prog->plan->cluster.gpu_memory, peak = (double)an->max_total;
    int cap_on_scale = cap > 0 && peak >= cap / 4;
    double top = scale_bytes > 0 ? scale_bytes : cap_on_scale ? fmax(peak, cap) * 1.08 : peak * 1.15;
    if (!(top > 0)) top = 1;
    if (scale_bytes > 0) cap_on_scale = cap > 0 && cap <= top;
    double plot_w = MEM_W - MEM_L - MEM_R, plot_h = MEM_H - MEM_T - MEM_B, y0 = MEM_T + plot_h;
    int n = prog->nstages;
    double slot = plot_w / n, bw = fmin(76.0, slot * 0.62);
    int label_every = slot >= 44 ? 1 : (int)ceil(44.0 / slot);
    fprintf(out, "<svg class=\"memory\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", MEM_W, MEM_H, MEM_W,
            MEM_H);
    memory_axis(out, top, y0, plot_h);
    for (int s = 0; s < n; s++) {
        double x = MEM_L + slot * s + (slot - bw) / 2;
        int labelled = s % label_every == 0;
        memory_bar(out, an, s, x, bw, y0, plot_h / top, labelled);
        if (labelled && n == 1)
            fprintf(out, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">every rank</text>\n", x + bw / 2, y0 + 18);
        else if (labelled)
            fprintf(out, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%s%d</text>\n", x + bw / 2, y0 + 18,
                    slot >= 44 ? "stage " : "", s);
    }
    char b1[64], b2[64];
    analyze_format_bytes(cap, b1, sizeof b1);
    if (cap_on_scale) {
        double y = y0 - cap / top * plot_h;
        double reserve = prog->plan->cluster.gpu_reserve;
        if (reserve > 0) { /* the reserve: the band below the capacity the plan may not use */
            analyze_format_bytes(reserve, b2, sizeof b2);
            fprintf(out, "<rect class=\"reserve\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#d62728\" "
                         "fill-opacity=\"0.12\"><title>reserve %s: CUDA context, NCCL buffers, fragmentation</title></rect>\n",
                    MEM_L, y, MEM_W - MEM_R + 8 - MEM_L, reserve / top * plot_h, b2);
            fprintf(out, "<text x=\"%d\" y=\"%.1f\" style=\"fill:#b3161b\">reserve %s</text>\n", MEM_W - MEM_R + 14,
                    y + 20, b2);
        }
        fprintf(out, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" stroke-width=\"2\" "
                     "stroke-dasharray=\"7 4\"/>\n",
                MEM_L, MEM_W - MEM_R + 8, y, y);
        fprintf(out, "<text x=\"%d\" y=\"%.1f\" style=\"fill:#b3161b\">GPU memory %s</text>\n", MEM_W - MEM_R + 14,
                y + 4, b1);
    } else if (cap > 0) {
        analyze_format_bytes(peak, b2, sizeof b2);
        fprintf(out, "<text x=\"%d\" y=\"%d\" style=\"fill:#b3161b\">&#9650; GPU memory %s</text>\n",
                MEM_W - MEM_R + 14, MEM_T + 10, b1);
        fprintf(out, "<text class=\"mute\" x=\"%d\" y=\"%d\">above this scale: the peak,</text>\n", MEM_W - MEM_R + 14,
                MEM_T + 28);
        fprintf(out, "<text class=\"mute\" x=\"%d\" y=\"%d\">%s, is %.2g%% of it</text>\n", MEM_W - MEM_R + 14,
                MEM_T + 44, b2, 100.0 * peak / cap);
    }
    fprintf(out, "<text class=\"mute\" x=\"%d\" y=\"%d\">per GPU of each %s</text>\n", MEM_L, MEM_T - 8,
            n > 1 ? "pipeline stage" : "rank");
    fputs("</svg>\n", out);
}

static void stage_layers(FILE *out, const Plan *plan, const StageProgram *sp)
{
    for (int c = 0; c < sp->chunks; c++) {
        int64_t first, last;
        program_chunk_span(plan, sp, c, &first, &last);
        fprintf(out, "%s%lld..%lld", c ? ", " : "", (long long)first, (long long)last);
    }
    if (sp->has_embed) fputs(" + embedding", out);
    if (sp->has_head) fputs(" + head", out);
}

static void memory_cell(FILE *out, int s, const char *klass, int64_t bytes, int bad)
{
    char b1[64];
    analyze_format_bytes((double)bytes, b1, sizeof b1);
    fprintf(out, "<td%s data-stage=\"%d\" data-class=\"%s\" data-bytes=\"%lld\" title=\"%lld B\">%s</td>",
            bad ? " class=\"bad\"" : "", s, klass, (long long)bytes, (long long)bytes, b1);
}

static void memory_table(FILE *out, const Analysis *an)
{
    const Program *prog = an->prog;
    const Cluster *cl = &prog->plan->cluster;
    fputs("<div class=\"wide\"><table class=\"memory\">\n<tr><th class=\"l\">stage</th><th class=\"l\">layers</th>",
          out);
    for (int k = 0; k < PRT_NCLASS; k++) fprintf(out, "<th>%s</th>", ledger_class_names[k]);
    fputs("<th>total</th><th>of the GPU with the reserve</th><th>bytes per parameter held</th></tr>\n", out);
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        const StageCost *sc = &an->stages[s];
        fprintf(out, "<tr data-stage=\"%d\"><td class=\"l\">%d</td><td class=\"l layers\">", s, s);
        stage_layers(out, prog->plan, sp);
        fputs("</td>", out);
        for (int k = 0; k < PRT_NCLASS; k++) memory_cell(out, s, ledger_class_names[k], sc->ledger[k], 0);
        int bad = !plan_fits(cl, (double)sc->total);
        memory_cell(out, s, "total", sc->total, bad);
        fprintf(out, "<td%s>%.1f%%</td>", bad ? " class=\"bad\"" : "", 100.0 * plan_memory_share(cl, (double)sc->total));
        double states = (double)(sc->ledger[PRT_WEIGHTS] + sc->ledger[PRT_GRADS] + sc->ledger[PRT_MASTER] +
                                 sc->ledger[PRT_OPTIM]);
        if (sc->params_local > 0) fprintf(out, "<td>%.4g</td></tr>\n", states / (double)sc->params_local);
        else fputs("<td>-</td></tr>\n", out);
    }
    fputs("</table></div>\n", out);
}

void report_html_memory(FILE *out, const Analysis *an, double scale_bytes)
{
    const Program *prog = an->prog;
    fputs("<section class=\"memory\">\n<h2>Memory per GPU</h2>\n<div class=\"legend\">", out);
    for (int k = 0; k < PRT_NCLASS; k++) legend_item(out, class_colors[k], ledger_class_names[k]);
    fputs("</div>\n", out);
    memory_bars(out, an, scale_bytes);
    memory_table(out, an);
    int widen = 0;
    for (int s = 0; s < prog->nstages; s++) widen |= an->stages[s].cpu_widen != 0;
    fprintf(out, "<p class=\"note\">The memory ledger of the lowered program: the buffers it allocates per class, "
                 "activations at the schedule's peak of in-flight micro-batches, plus the runtime's staging.%s</p>\n",
            widen ? " A program built for the CPU runtime also widens 16-bit operands in more workspace (not shown: "
                    "a GPU computes on them directly)."
                  : "");
    fputs("</section>\n", out);
}

/* ------------------------------------------------------------ mesh */

/* What an axis carries, in a few words: "pipeline (1f1b)", "tensor (heads,
 * ffn)", "data (batch)", "context (seq)", "sequence parallel", "ZeRO-1". */
static void axis_carries(FILE *out, const Plan *plan, const Program *prog, int a)
{
    const Layout *l = &plan->layout;
    const char *sep = "";
    if (a == l->pp_axis) {
        fprintf(out, "pipeline (%s)", schedule_kind_name(prog->schedule.kind));
        sep = ", ";
    }
    int any = 0;
    for (int d = 0; d < DIM_COUNT; d++) {
        if (d == DIM_LAYERS || !(plan_axis_parts(plan, l->dim_axis[d]) >> a & 1)) continue;
        if (!any)
            fprintf(out, "%s%s (", sep,
                    (plan_axis_parts(plan, l->dim_axis[DIM_BATCH]) >> a & 1) ? "data"
                    : l->dim_axis[DIM_SEQ] == a                                ? "context"
                                                                               : "tensor");
        fprintf(out, "%s%s", any ? ", " : "", dim_names[d]);
        any = 1;
    }
    if (any && l->dim_axis[DIM_SEQ] == a && (l->cp_comm == CP_COMM_RING || l->cp_balanced)) /* as explain's */
        fprintf(out, "; %s%s", l->cp_comm == CP_COMM_RING ? "ring" : "all-gather", l->cp_balanced ? ", balanced" : "");
    if (any) fputs(")", out), sep = ", ";
    if (l->sp_axis == a) fprintf(out, "%ssequence parallel", sep), sep = ", ";
    if ((plan_axis_parts(plan, l->zero_axis) >> a & 1) && l->zero_stage > 0) {
        fprintf(out, "%sZeRO-%d", sep, l->zero_stage), sep = ", ";
        if (l->zero_axis >= plan->mesh.naxes) fprintf(out, " over %s", plan->mesh.axes[l->zero_axis].name);
    }
    if (!*sep) fputs("replicated", out);
}

/* Where the GPUs of the mesh pictures go: nodes in rows of boxes, a node's
 * GPUs in rows of 8, room above each row of nodes for the arcs of groups. */
typedef struct MeshGeom {
    int gpn, cell, cols, pad, label, node_w, node_h, gap, arc_room, per_row, width, height;
} MeshGeom;

static MeshGeom mesh_geom(const Plan *plan)
{
    MeshGeom g;
    int world = plan->mesh.world;
    g.gpn = plan->cluster.gpus_per_node > 0 ? plan->cluster.gpus_per_node : world;
    g.cell = world <= 16 ? 32 : world <= 64 ? 24 : world <= 256 ? 16 : 9;
    g.cols = g.gpn < 8 ? g.gpn : 8;
    int rows = (g.gpn + g.cols - 1) / g.cols;
    int big = g.cell >= 16;
    g.pad = big ? 6 : 3;
    g.label = big ? 15 : 0;
    g.gap = big ? 18 : 8;
    g.arc_room = big ? 20 : 8;
    g.node_w = g.cols * g.cell + 2 * g.pad;
    g.node_h = rows * g.cell + 2 * g.pad + g.label;
    g.per_row = (1320 + g.gap) / (g.node_w + g.gap);
    if (g.per_row < 1) g.per_row = 1;
    int nodes = (world + g.gpn - 1) / g.gpn;
    if (nodes > g.per_row && nodes <= 16) {
        /* smaller GPUs rather than a second row: groups' arcs stay in one row */
        int cell = (1320 - nodes * (g.gap + 2 * g.pad)) / (nodes * g.cols);
        if (cell >= 16 && cell < g.cell) {
            g.cell = cell;
            g.node_w = g.cols * g.cell + 2 * g.pad;
            g.node_h = rows * g.cell + 2 * g.pad + g.label;
            g.per_row = nodes;
        }
    }
    int used = nodes < g.per_row ? nodes : g.per_row;
    g.width = used * (g.node_w + g.gap) - g.gap + 2;
    g.height = ((nodes + g.per_row - 1) / g.per_row) * (g.node_h + g.gap + g.arc_room);
    return g;
}

static void node_origin(const MeshGeom *g, int node, int *x, int *y)
{
    *x = 1 + (node % g->per_row) * (g->node_w + g->gap);
    *y = g->arc_room + (node / g->per_row) * (g->node_h + g->gap + g->arc_room);
}

static void cell_origin(const MeshGeom *g, int rank, int *x, int *y)
{
    int gpu = rank % g->gpn;
    node_origin(g, rank / g->gpn, x, y);
    *x += g->pad + (gpu % g->cols) * g->cell;
    *y += g->pad + (gpu / g->cols) * g->cell;
}

/* Ranks' group numbers on axis a: groups numbered in the order of their
 * first rank.  leader_group is scratch of world ints. */
static void mesh_groups(const Plan *plan, int a, int *group_of, int *leader_group)
{
    int world = plan->mesh.world, next = 0, coords[PARC_MAX_AXES];
    for (int r = 0; r < world; r++) leader_group[r] = -1;
    for (int r = 0; r < world; r++) {
        plan_rank_coords(plan, r, coords);
        coords[a] = 0;
        int leader = plan_coords_rank(plan, coords);
        if (leader_group[leader] < 0) leader_group[leader] = next++;
        group_of[r] = leader_group[leader];
    }
}

/* A GPU coloured by its position in its group on axis a. */
static void mesh_cell(FILE *out, const Plan *plan, const MeshGeom *g, int a, int r, const int *group_of)
{
    int coords[PARC_MAX_AXES], x, y;
    cell_origin(g, r, &x, &y);
    plan_rank_coords(plan, r, coords);
    const char *color = position_colors[coords[a] % NPOSITION_COLORS];
    fprintf(out, "<rect data-axis=\"%s\" data-rank=\"%d\" data-node=\"%d\" data-group=\"%d\" x=\"%d\" y=\"%d\" "
                 "width=\"%d\" height=\"%d\" rx=\"2\" fill=\"%s\" stroke=\"#fff\"><title>rank %d (node %d, GPU %d): ",
            plan->mesh.axes[a].name, r, r / g->gpn, group_of[r], x, y, g->cell, g->cell, color, r, r / g->gpn,
            r % g->gpn);
    report_html_escape(out, plan->mesh.axes[a].name);
    fprintf(out, " group %d, position %d of %d; coordinates", group_of[r], coords[a], plan->mesh.axes[a].size);
    for (int b = 0; b < plan->mesh.naxes; b++) {
        fputs(" ", out);
        report_html_escape(out, plan->mesh.axes[b].name);
        fprintf(out, "=%d", coords[b]);
    }
    fputs("</title></rect>\n", out);
}

/* Each group's members joined in order: a line along neighbouring GPUs of one
 * node, an arc for any other hop; teal inside a node, red across nodes. */
static void mesh_links(FILE *out, const Plan *plan, const MeshGeom *g, int a)
{
    int world = plan->mesh.world, coords[PARC_MAX_AXES];
    double width = g->cell >= 16 ? 2.0 : 1.0;
    for (int r = 0; r < world; r++) {
        plan_rank_coords(plan, r, coords);
        if (coords[a] + 1 >= plan->mesh.axes[a].size) continue;
        coords[a]++;
        int next = plan_coords_rank(plan, coords), x0, y0, x1, y1;
        cell_origin(g, r, &x0, &y0);
        cell_origin(g, next, &x1, &y1);
        int same_node = r / g->gpn == next / g->gpn;
        const char *color = same_node ? "#2a9d8f" : "#d62728";
        if (same_node && y0 == y1 && x1 - x0 == g->cell) {
            double y = y0 + g->cell - 3.5;
            fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\" "
                         "pointer-events=\"none\"/>\n",
                    x0 + g->cell / 2.0, y, x1 + g->cell / 2.0, y, color, width);
            continue;
        }
        /* leaves and meets the cells vertically, so it does not cross their neighbours */
        double cx0 = x0 + g->cell / 2.0, cx1 = x1 + g->cell / 2.0, lift = (g->arc_room + g->pad) * 1.2;
        fprintf(out, "<path d=\"M%.1f %d C%.1f %.1f %.1f %.1f %.1f %d\" fill=\"none\" stroke=\"%s\" "
                     "stroke-width=\"%.1f\" stroke-opacity=\"0.7\" pointer-events=\"none\"/>\n",
                cx0, y0, cx0, y0 - lift, cx1, y1 - lift, cx1, y1, color, width * 0.7);
    }
}

static void mesh_panel(FILE *out, const Analysis *an, int a, const MeshGeom *g, int *group_of, int *scratch)
{
    const Plan *plan = an->prog->plan;
    int world = plan->mesh.world, size = plan->mesh.axes[a].size, inside = plan_axis_inside_node(plan, a);
    int pipeline = a == an->prog->pp_axis && an->prog->nstages > 1;
    char b1[64], bw[64];
    analyze_format_bytes(pipeline ? an->pipeline_bytes : an->axis_wire[a], b1, sizeof b1);
    snprintf(bw, sizeof bw, "%.4g GB/s", (inside ? plan->cluster.intra_bw : plan->cluster.inter_bw) / 1e9);
    fputs("<div class=\"panel\"><h3>", out);
    report_html_escape(out, plan->mesh.axes[a].name);
    fprintf(out, " <span class=\"sub\">&middot; %d groups of %d &middot; ", world / size, size);
    axis_carries(out, plan, an->prog, a);
    fprintf(out, "<br>%s, %s &middot; %s per rank per step %s</span></h3>\n",
            inside ? "groups inside a node" : "groups across nodes", bw, b1,
            pipeline ? "in pipeline messages" : "on the wire");
    mesh_groups(plan, a, group_of, scratch);
    fprintf(out, "<svg class=\"mesh\" data-axis=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            plan->mesh.axes[a].name, g->width, g->height, g->width, g->height);
    for (int node = 0; node * g->gpn < world; node++) {
        int nx, ny;
        node_origin(g, node, &nx, &ny);
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\" fill=\"#f3f4f6\" stroke=\"#c3c9d2\">"
                     "<title>node %d</title></rect>\n",
                nx, ny, g->node_w, g->node_h, node);
        if (g->label)
            fprintf(out, "<text class=\"mute\" x=\"%d\" y=\"%d\" style=\"font-size:11px\">node %d</text>\n",
                    nx + g->pad, ny + g->node_h - 5, node);
    }
    for (int r = 0; r < world; r++) mesh_cell(out, plan, g, a, r, group_of);
    if (g->cell >= 16)
        for (int r = 0; r < world; r++) {
            int x, y, coords[PARC_MAX_AXES];
            cell_origin(g, r, &x, &y);
            plan_rank_coords(plan, r, coords);
            fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" style=\"fill:#fff;font-size:11px;"
                         "pointer-events:none\">%d</text>\n",
                    x + g->cell / 2, y + g->cell / 2 + 2, coords[a]);
        }
    mesh_links(out, plan, g, a);
    fputs("</svg></div>\n", out);
}

/* One row of the traffic table; the exact bytes in the row's data-*. */
static void traffic_row(FILE *out, const char *name, const char *axis_attr, int size, int groups, int inside,
                        double bytes, double wire, double max_wire)
{
    char b1[64], b2[64];
    analyze_format_bytes(bytes, b1, sizeof b1);
    analyze_format_bytes(wire, b2, sizeof b2);
    const char *color = inside ? "#76b7b2" : "#e15759";
    fputs("<tr data-axis=\"", out);
    report_html_escape(out, axis_attr);
    fprintf(out, "\" data-bytes=\"%.0f\" data-wire-bytes=\"%.0f\"><td class=\"l\">", bytes, wire);
    report_html_escape(out, name);
    fprintf(out, "</td><td>%d</td><td>%d</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td class=\"l\">"
                 "<i class=\"bar\" style=\"width:%.0fpx;background:%s\"></i></td></tr>\n",
            size, groups, inside ? "inside nodes" : "across nodes", b1, b2,
            max_wire > 0 ? 260.0 * wire / max_wire : 0.0, color);
}

static void traffic_table(FILE *out, const Analysis *an)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    double max_wire = an->pipeline_bytes;
    int slots = plan->mesh.naxes + plan->mesh.nderived; /* derived axes (dp*cp) after the mesh's */
    for (int a = 0; a < slots; a++) max_wire = fmax(max_wire, an->axis_wire[a]);
    fputs("<div class=\"wide\"><table class=\"traffic\">\n<tr><th class=\"l\">axis</th><th>size</th><th>groups</th>"
          "<th class=\"l\">link"
          "</th><th>buffer bytes per step</th><th>on the wire per step</th><th class=\"l\"></th></tr>\n",
          out);
    for (int a = 0; a < slots; a++) {
        int size = plan->mesh.axes[a].size;
        traffic_row(out, plan->mesh.axes[a].name, plan->mesh.axes[a].name, size, plan->mesh.world / size,
                    plan_axis_inside_node(plan, a), an->axis_bytes[a], an->axis_wire[a], max_wire);
    }
    if (prog->nstages > 1)
        traffic_row(out, "pipeline send/recv", "-", 2, plan->mesh.world / 2,
                    plan_axis_inside_node(plan, prog->pp_axis), an->pipeline_bytes, an->pipeline_bytes, max_wire);
    char b1[64], b2[64];
    analyze_format_bytes(an->link_wire[0], b1, sizeof b1);
    analyze_format_bytes(an->link_wire[1], b2, sizeof b2);
    fprintf(out, "<tr class=\"total\"><td class=\"l\" colspan=\"4\">per rank of stage %d, the busiest</td>"
                 "<td class=\"l\" colspan=\"3\">inside nodes <span data-link=\"intra\" data-wire-bytes=\"%.0f\">%s"
                 "</span>, across nodes <span data-link=\"inter\" data-wire-bytes=\"%.0f\">%s</span></td></tr>\n",
            an->worst_stage, an->link_wire[0], b1, an->link_wire[1], b2);
    fputs("</table></div>\n", out);
}

void report_html_mesh(FILE *out, const Analysis *an)
{
    const Plan *plan = an->prog->plan;
    int world = plan->mesh.world;
    fprintf(out, "<section class=\"mesh\">\n<h2>Mesh: %d node%s &times; %d GPUs</h2>\n", plan->cluster.nodes,
            plan->cluster.nodes == 1 ? "" : "s", plan->cluster.gpus_per_node);
    fputs("<div class=\"legend\"><span>one picture per axis: a GPU's colour and number are its position in its "
          "group on that axis; lines join each group's members in order:</span>"
          "<span><i class=\"swatch line\" style=\"background:#2a9d8f\"></i>inside a node</span>"
          "<span><i class=\"swatch line\" style=\"background:#d62728\"></i>across nodes</span></div>\n",
          out);
    MeshGeom g = mesh_geom(plan);
    Arena arena = {0};
    int *group_of = arena_alloc(&arena, sizeof(int) * (size_t)world);
    int *scratch = arena_alloc(&arena, sizeof(int) * (size_t)world);
    int drawn = 0;
    fputs("<div class=\"panels\">\n", out);
    for (int a = 0; a < plan->mesh.naxes; a++) {
        if (plan->mesh.axes[a].size <= 1) continue;
        mesh_panel(out, an, a, &g, group_of, scratch);
        drawn++;
    }
    fputs("</div>\n", out);
    if (!drawn) fputs("<p>One GPU: no axis has more than one rank.</p>\n", out);
    arena_free(&arena);
    traffic_table(out, an);
    fputs("<p class=\"note\">Buffer bytes are the collective buffers as nccl-tests counts them; on the wire multiplies "
          "each by its bus factor (all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n).</p>\n</section>\n",
          out);
}

/* ------------------------------------------------------------ collectives */

/* Above the table: a button per axis (and one for all rows) and a stage
 * menu; the page script shows only the rows of the chosen axis and stage.
 * Without the script every row shows. */
static void collectives_filter(FILE *out, const Analysis *an)
{
    const Plan *plan = an->prog->plan;
    int per_axis[PARC_MAX_AXES + 1] = {0};  /* the last: rows of no axis */
    for (int i = 0; i < an->nrows; i++) per_axis[an->rows[i].axis >= 0 ? an->rows[i].axis : plan->mesh.naxes]++;
    fprintf(out, "<div class=\"filter\"><span class=\"sub\">axis</span> <button type=\"button\" data-axis-filter=\"\" "
                 "aria-pressed=\"true\">all <small>%d</small></button>",
            an->nrows);
    for (int a = 0; a <= plan->mesh.naxes; a++) {
        if (!per_axis[a]) continue;
        const char *name = a < plan->mesh.naxes ? plan->mesh.axes[a].name : "-";
        fputs("<button type=\"button\" data-axis-filter=\"", out);
        report_html_escape(out, name);
        fputs("\" aria-pressed=\"false\">", out);
        report_html_escape(out, a < plan->mesh.naxes ? name : "no axis");
        fprintf(out, " <small>%d</small></button>", per_axis[a]);
    }
    if (an->prog->nstages > 1) {
        fputs(" <label><span class=\"sub\">stage</span> <select data-stage-filter><option value=\"\">all</option>", out);
        for (int s = 0; s < an->prog->nstages; s++) {
            int n = 0;
            for (int i = 0; i < an->nrows; i++) n += an->rows[i].stage == s;
            fprintf(out, "<option value=\"%d\">%d (%d rows)</option>", s, s, n);
        }
        fputs("</select></label>", out);
    }
    fprintf(out, " <span class=\"sub\" data-shown>all %d rows</span></div>\n", an->nrows);
}

void report_html_collectives(FILE *out, const Analysis *an)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    fprintf(out, "<section class=\"collectives\">\n<h2>Collectives per step (%d rows)</h2>\n", an->nrows);
    collectives_filter(out, an);
    fputs("<div class=\"wide\"><table class=\"collectives\">\n<tr><th>stage</th><th class=\"l\">phase</th>"
          "<th class=\"l\">op</th><th class=\"l\">collective</th><th class=\"l\">axis</th><th>group</th>"
          "<th>bytes per call</th><th>calls</th><th>bytes per step</th><th class=\"l\">link</th>"
          "<th class=\"l\">rule</th></tr>\n",
          out);
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
        double call = (double)r->elems * r->elem_bytes, step = call * (double)r->calls;
        const char *axis = r->axis >= 0 ? plan->mesh.axes[r->axis].name : "-";
        char b1[64], b2[64];
        analyze_format_bytes(call, b1, sizeof b1);
        analyze_format_bytes(step, b2, sizeof b2);
        fprintf(out, "<tr data-row=\"%d\" data-stage=\"%d\" data-axis=\"", i, r->stage);
        report_html_escape(out, axis);
        fprintf(out, "\" data-bytes-per-call=\"%.0f\" data-calls=\"%lld\" data-bytes-per-step=\"%.0f\"><td>%d</td>"
                     "<td class=\"l\">%s</td><td class=\"l\">",
                call, (long long)r->calls, step, r->stage, phase_names[r->phase]);
        report_html_escape(out, r->op);
        fprintf(out, "</td><td class=\"l\">%s</td><td class=\"l\">",
                r->coll == COLL_SEND ? "send/recv" : coll_names[r->coll]);
        report_html_escape(out, axis);
        fprintf(out, "</td><td>%d</td><td title=\"%lld elements of %d B\">%s</td><td>%lld</td><td>%s</td>"
                     "<td class=\"l\">%s</td><td class=\"why\">",
                r->group, (long long)r->elems, r->elem_bytes, b1, (long long)r->calls, b2,
                r->inside_node ? "intra" : "inter");
        report_html_escape(out, r->why);
        fputs("</td></tr>\n", out);
    }
    fputs("</table></div>\n</section>\n", out);
}

/* ------------------------------------------------------------ the file */

int report_html_write(const Analysis *an, const char *path)
{
    char title[512];
    snprintf(title, sizeof title, "parc: %s", an->prog->plan->file ? an->prog->plan->file : "plan");
    FILE *out = report_html_open(path, title);
    if (!out) return -1;
    report_html_summary(out, an);
    report_html_memory(out, an, 0);
    report_html_timeline(out, an, 0);
    report_html_mesh(out, an);
    report_html_collectives(out, an);
    return report_html_close(out, path);
}
