/*
 * report_run.c — `parc report TRACE.json --plan PLAN`: a run's trace beside the
 * plan's predictions (contract in report_run.h).  Reading the trace (cJSON)
 * gives per rank the spans of the last step and the phase counters; the text
 * report and the page's sections are written from those.
 */
#include "report_run.h"

#include "report_html.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef PARC_HAVE_EXPORT
#include <cjson/cJSON.h>

/* The simulated timeline's colours (report_html_timeline.c), by chunk parity. */
static const char *const run_forward_colors[2] = {"#4e79a7", "#a0cbe8"};
static const char *const run_backward_colors[2] = {"#59a14f", "#8cd17d"};
#define RUN_COLLECTIVE_COLOR "#f28e2b"
#define RUN_P2P_COLOR "#76787b"

/* The counter's keys, in the order of ANALYZE_PHASES (runtime/prt_trace.c). */
static const char *const phase_keys[ANALYZE_NPHASES] = {"forward", "backward", "exposed_communication", "bubble",
                                                        "optimizer"};

typedef struct RunSpan {
    double t0, t1;  /* seconds from the rank's start of the step */
    int kind;       /* WorkKind; for communication: 0 a collective, 1 a pipeline message */
    int micro, chunk;
    const char *name;
} RunSpan;

typedef struct RunRank {
    int stage;
    double step_ts, step_s;      /* the last step: its start (us in the trace) and length (s) */
    int have_step;
    RunSpan *work;  int nwork, work_cap;   /* its schedule items, in order */
    RunSpan *comm;  int ncomm, comm_cap;   /* its collectives and messages */
    double phase_ms[ANALYZE_NPHASES];  /* mean over the steps after the first */
    int phase_steps;
    double first_ms[ANALYZE_NPHASES];  /* the first step (the mean when it is the only one) */
    int have_first;
} RunRank;

typedef struct Run {
    const char *path;
    int nranks, steps, last_step;
    RunRank *ranks;
    double longest_s;            /* the longest last step over the ranks */
} Run;

static int run_error(const Run *run, const char *hint, const char *what)
{
    diag_error((SrcLoc){.file = run->path}, hint, "%s", what);
    return 1;
}

static double num(const cJSON *o, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}
static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The stage of a world rank: its coordinate on the pipeline axis (the last
 * axis varies fastest). */
static int stage_of(const Plan *plan, int pp_axis, int rank)
{
    if (pp_axis < 0) return 0;
    int stride = 1;
    for (int a = plan->mesh.naxes - 1; a > pp_axis; a--) stride *= plan->mesh.axes[a].size;
    return rank / stride % plan->mesh.axes[pp_axis].size;
}

/* First pass: the number of ranks, the steps, and each rank's last step span
 * and phase counters (in file order: the counters of steps 1, 2, ...). */
static int read_steps(Run *run, const cJSON *events)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, events)
    {
        int pid = (int)num(e, "pid", -1);
        if (pid < 0 || pid >= run->nranks) continue;
        RunRank *r = &run->ranks[pid];
        const char *ph = str(e, "ph"), *cat = str(e, "cat");
        if (!ph || !cat) continue;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        if (!strcmp(ph, "X") && !strcmp(cat, "step")) {
            int step = (int)num(args, "step", -1);
            if (step > run->steps) run->steps = step;
            if (step >= run->last_step) {
                run->last_step = step;
                r->step_ts = num(e, "ts", 0);
                r->step_s = num(e, "dur", 0) * 1e-6;
                r->have_step = step;
            }
        } else if (!strcmp(ph, "C") && !strcmp(cat, "phases")) {
            double *into = r->have_first ? r->phase_ms : r->first_ms;
            for (int k = 0; k < ANALYZE_NPHASES; k++) into[k] += num(args, phase_keys[k], 0);
            if (r->have_first) r->phase_steps++;
            r->have_first = 1;
        }
    }
    for (int i = 0; i < run->nranks; i++) {
        RunRank *r = &run->ranks[i];
        if (r->have_step != run->last_step) return run_error(run, "a program's --trace writes every rank's steps",
                                                              "a rank has no span of the last step");
        for (int k = 0; k < ANALYZE_NPHASES; k++)
            r->phase_ms[k] = r->phase_steps ? r->phase_ms[k] / r->phase_steps : r->first_ms[k];
        if (r->step_s > run->longest_s) run->longest_s = r->step_s;
    }
    return 0;
}

/* Second pass: the work spans (B/E pairs) and communication of the last step. */
static int read_spans(Arena *arena, Run *run, const cJSON *events)
{
    const cJSON *e;
    int *open = arena_alloc(arena, sizeof(int) * (size_t)run->nranks);
    for (int i = 0; i < run->nranks; i++) open[i] = -1;
    cJSON_ArrayForEach(e, events)
    {
        int pid = (int)num(e, "pid", -1);
        const char *ph = str(e, "ph"), *cat = str(e, "cat");
        if (pid < 0 || pid >= run->nranks || !ph || !cat) continue;
        RunRank *r = &run->ranks[pid];
        double ts = num(e, "ts", 0);
        if (ts < r->step_ts - 0.002 || ts > r->step_ts + r->step_s * 1e6 + 0.002) continue;
        double t = (ts - r->step_ts) * 1e-6;
        if (!strcmp(ph, "B") && (!strcmp(cat, "forward") || !strcmp(cat, "backward"))) {
            if (open[pid] >= 0) return run_error(run, NULL, "a forward/backward span begins inside another");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
            RunSpan s = {t, t, !strcmp(cat, "backward"), (int)num(args, "micro", -1), (int)num(args, "chunk", -1),
                         NULL};
            ARR_PUSH(arena, r->work, r->nwork, r->work_cap, s);
            open[pid] = r->nwork - 1;
        } else if (!strcmp(ph, "E") && (!strcmp(cat, "forward") || !strcmp(cat, "backward"))) {
            if (open[pid] < 0) return run_error(run, NULL, "a forward/backward span ends without beginning");
            r->work[open[pid]].t1 = t;
            open[pid] = -1;
        } else if (!strcmp(ph, "X") && (!strcmp(cat, "comm") || !strcmp(cat, "p2p"))) {
            const char *name = str(e, "name");
            RunSpan s = {t, t + num(e, "dur", 0) * 1e-6, !strcmp(cat, "p2p"), -1, -1,
                         name ? arena_strdup(arena, name) : "?"};
            ARR_PUSH(arena, r->comm, r->ncomm, r->comm_cap, s);
        }
    }
    return 0;
}

/* Every rank's items of the last step are its stage's schedule, in order. */
static int check_schedule(const Run *run, const Schedule *sc)
{
    for (int i = 0; i < run->nranks; i++) {
        const RunRank *r = &run->ranks[i];
        int n = sc->count[r->stage], same = r->nwork == n;
        for (int k = 0; same && k < n; k++) {
            const WorkItem *w = &sc->items[r->stage][k];
            same = r->work[k].kind == w->kind && r->work[k].micro == w->micro && r->work[k].chunk == w->chunk;
        }
        if (!same) {
            char what[160];
            snprintf(what, sizeof what, "rank %d ran %d forward/backward items in step %d, not the %d of stage %d's "
                     "schedule in its order", i, r->nwork, run->last_step, n, r->stage);
            return run_error(run, "give the plan the traced program was built from", what);
        }
    }
    return 0;
}

/* Reads the trace into *run; 0, or 1 after a diagnostic. */
static int read_run(Arena *arena, Run *run, const Analysis *an)
{
    FILE *f = fopen(run->path, "rb");
    if (!f) return run_error(run, NULL, strerror(errno));
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return run_error(run, "give the file a program's --trace wrote", "not a regular file");
    }
    char *text = malloc((size_t)size + 4);
    if (!text) PARC_BUG("out of memory reading %s", run->path);
    size_t len = fread(text, 1, (size_t)size, f);
    int bad_read = ferror(f) || len != (size_t)size;
    fclose(f);
    text[len] = 0;
    cJSON *root = bad_read ? NULL : cJSON_ParseWithLength(text, len);
    const char *stop = root || bad_read ? NULL : cJSON_GetErrorPtr();
    size_t at = stop ? len - strlen(stop) : 0;  /* the parse stops `strlen(stop)` bytes before the end */
    if (!root && !bad_read) { /* a run that was stopped leaves the list open, as Chrome's readers allow */
        size_t end = len;
        while (end > 0 && strchr(" \t\r\n,", text[end - 1])) end--;
        size_t start = strspn(text, " \t\r\n");
        const char *close = text[start] == '[' ? "]" : "]}";  /* the streamed array, or the object form */
        memcpy(text + end, close, strlen(close) + 1);
        root = cJSON_ParseWithLength(text, end + strlen(close));
    }
    free(text);
    if (bad_read) return run_error(run, NULL, "cannot read it");
    if (!root) {
        char what[96];
        snprintf(what, sizeof what, "not JSON (the parse stops at byte %zu)", at);
        return run_error(run, "give the file a program's --trace wrote", what);
    }
    /* the format's two forms: the bare array (a streamed trace) or {"traceEvents": [...]} */
    const cJSON *events = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    int status = 0;
    if (!cJSON_IsArray(events)) {
        status = run_error(run, "give the file a program's --trace wrote",
                           "neither an array of events nor an object with a traceEvents list: not a Chrome trace");
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, events)
    {
        const char *name = str(e, "name");
        if (name && !strcmp(name, "process_name") && num(e, "pid", -1) + 1 > run->nranks)
            run->nranks = (int)num(e, "pid", -1) + 1;
    }
    const Plan *plan = an->prog->plan;
    if (run->nranks != plan->mesh.world) {
        char what[160];
        snprintf(what, sizeof what, "the trace holds %d ranks, the plan's mesh has %d", run->nranks, plan->mesh.world);
        status = run_error(run, "give the plan the traced program was built from", what);
        goto done;
    }
    run->ranks = arena_alloc(arena, sizeof(RunRank) * (size_t)run->nranks);
    memset(run->ranks, 0, sizeof(RunRank) * (size_t)run->nranks);
    for (int i = 0; i < run->nranks; i++) run->ranks[i].stage = stage_of(plan, an->prog->pp_axis, i);
    status = read_steps(run, events);
    if (!status && run->last_step <= 0)
        status = run_error(run, "a program's --trace writes a span per step", "the trace holds no step");
    if (!status) status = read_spans(arena, run, events);
    if (!status) status = check_schedule(run, &an->prog->schedule);
done:
    cJSON_Delete(root);
    return status;
}

/* ------------------------------------------------------------ text */

static void print_phases(FILE *out, const Run *run, const Analysis *an)
{
    const RunRank *r0 = &run->ranks[0];
    fprintf(out, "run report: %s (%d ranks, %d steps; measured: rank 0, the mean of the %s)\n", run->path,
            run->nranks, run->steps, r0->phase_steps ? "steps after the first" : "one step");
    fprintf(out, "  %-24s %14s %14s %10s\n", "phase", "predicted", "measured", "measured/predicted");
    double pred_total = 0, meas_total = 0;
    for (int k = 0; k <= ANALYZE_NPHASES; k++) {
        double pred = k < ANALYZE_NPHASES ? an->phase_s[k] : pred_total;
        double meas = k < ANALYZE_NPHASES ? r0->phase_ms[k] * 1e-3 : meas_total;
        char b1[64], b2[64], ratio[32] = "-";
        report_html_time(pred, b1, sizeof b1);
        report_html_time(meas, b2, sizeof b2);
        if (pred > 0) snprintf(ratio, sizeof ratio, "%.2fx", meas / pred);
        fprintf(out, "  %-24s %14s %14s %10s\n", k < ANALYZE_NPHASES ? analyze_phase_names[k] : "step", b1, b2,
                ratio);
        pred_total += pred, meas_total += meas;
    }
    for (int i = 0; i < run->nranks; i++) {
        const RunRank *r = &run->ranks[i];
        double busy = 0;
        for (int k = 0; k < r->nwork; k++) busy += r->work[k].t1 - r->work[k].t0;
        char b1[64], b2[64];
        report_html_time(r->step_s, b1, sizeof b1);
        report_html_time(busy, b2, sizeof b2);
        fprintf(out, "  rank %d (stage %d), step %d: %s, of which %s in its %d forward/backward items\n", i,
                r->stage, run->last_step, b1, b2, r->nwork);
    }
}

/* ------------------------------------------------------------ page */

/* The simulated timeline's width and time axis (report_html.h), so one scale
 * lines the two up. */
enum {
    RUN_W = REPORT_TIMELINE_W,
    RUN_L = REPORT_TIMELINE_X0,
    RUN_R = REPORT_TIMELINE_R,
    RUN_LANE = 30,
    RUN_COMM = 7,
    RUN_GAP = 14,
    RUN_TOP = 40
};

static double run_y(int rank) { return RUN_TOP + rank * (RUN_LANE + RUN_COMM + RUN_GAP); }

static void run_block(FILE *out, const RunRank *r, int rank, const RunSpan *s, double px, int chunks)
{
    char name[32], b0[64], b1[64], b2[64];
    if (chunks > 1) snprintf(name, sizeof name, "%c%d.%d", s->kind ? 'B' : 'F', s->micro, s->chunk);
    else snprintf(name, sizeof name, "%c%d", s->kind ? 'B' : 'F', s->micro);
    report_html_time(s->t0, b0, sizeof b0);
    report_html_time(s->t1, b1, sizeof b1);
    report_html_time(s->t1 - s->t0, b2, sizeof b2);
    double x = RUN_L + s->t0 * px, w = fmax((s->t1 - s->t0) * px, 0.5);
    int shade = s->chunk % 2;
    fprintf(out, "<rect class=\"measured\" data-rank=\"%d\" data-stage=\"%d\" data-item=\"%s\" data-micro=\"%d\" "
                 "data-chunk=\"%d\" data-start=\"%.9g\" data-end=\"%.9g\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                 "height=\"%d\" fill=\"%s\"%s><title>rank %d (stage %d), %s: measured %s to %s (%s)</title></rect>",
            rank, r->stage, name, s->micro, s->chunk, s->t0, s->t1, x, run_y(rank), w, RUN_LANE,
            s->kind ? run_backward_colors[shade] : run_forward_colors[shade], w >= 4 ? " stroke=\"#fff\"" : "", rank,
            r->stage, name, b0, b1, b2);
    if (w >= 7.0 * (double)strlen(name) + 4)
        fprintf(out, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" style=\"fill:%s;font-size:11px;"
                     "pointer-events:none\">%s</text>",
                x + w / 2, run_y(rank) + RUN_LANE / 2 + 2, shade ? "#1d2330" : "#fff", name);
    fputc('\n', out);
}

static void run_lane(FILE *out, const Run *run, int rank, double px, int chunks)
{
    const RunRank *r = &run->ranks[rank];
    double y = run_y(rank), busy = 0;
    fprintf(out, "<rect data-rank=\"%d\" data-step-s=\"%.9g\" x=\"%d\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                 "fill=\"url(#parc-idle)\"/>\n",
            rank, r->step_s, RUN_L, y, r->step_s * px, RUN_LANE);
    for (int k = 0; k < r->nwork; k++) {
        run_block(out, r, rank, &r->work[k], px, chunks);
        busy += r->work[k].t1 - r->work[k].t0;
    }
    for (int k = 0; k < r->ncomm; k++) {
        const RunSpan *c = &r->comm[k];
        char b2[64];
        report_html_time(c->t1 - c->t0, b2, sizeof b2);
        fprintf(out, "<rect class=\"comm\" data-rank=\"%d\" data-comm=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                     "height=\"%d\" fill=\"%s\"><title>rank %d: ",
                rank, c->kind ? "p2p" : "collective", RUN_L + c->t0 * px, y + RUN_LANE + 1,
                fmax((c->t1 - c->t0) * px, 0.5), RUN_COMM - 1, c->kind ? RUN_P2P_COLOR : RUN_COLLECTIVE_COLOR, rank);
        report_html_escape(out, c->name);
        fprintf(out, ", %s</title></rect>\n", b2);
    }
    char b1[64];
    report_html_time(r->step_s, b1, sizeof b1);
    fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">rank %d</text>\n", RUN_L - 8, y + RUN_LANE / 2 + 4,
            rank);
    fprintf(out, "<text class=\"mute\" x=\"%d\" y=\"%.1f\">stage %d: %s, busy %.0f%%</text>\n", RUN_W - RUN_R + 12,
            y + RUN_LANE / 2 + 4, r->stage, b1, r->step_s > 0 ? 100.0 * busy / r->step_s : 0.0);
}

/* The measured lanes over `scale` seconds: the simulated timeline's scale. */
static void html_measured(FILE *out, const Run *run, const Analysis *an, double scale)
{
    const Schedule *sc = &an->prog->schedule;
    double px = (RUN_W - RUN_L - RUN_R) / scale;
    int height = (int)run_y(run->nranks) - RUN_GAP + 34;
    fprintf(out, "<section class=\"run\" data-step=\"%d\" data-ranks=\"%d\">\n<h2>Measured: step %d of ", run->last_step,
            run->nranks, run->last_step);
    report_html_escape(out, run->path);
    fputs("</h2>\n<div class=\"legend\">", out);
    fprintf(out, "<span><i class=\"swatch\" style=\"background:%s\"></i>forward</span>"
                 "<span><i class=\"swatch\" style=\"background:%s\"></i>backward</span>"
                 "<span><i class=\"swatch\" style=\"background:" RUN_COLLECTIVE_COLOR "\"></i>collective</span>"
                 "<span><i class=\"swatch\" style=\"background:" RUN_P2P_COLOR "\"></i>pipeline message</span>"
                 "<span><i class=\"swatch idle\"></i>no forward/backward</span></div>\n",
            run_forward_colors[0], run_backward_colors[0]);
    fprintf(out, "<svg class=\"timeline measured\" data-origin-x=\"%d\" data-px-per-s=\"%.9g\" width=\"%d\" "
                 "height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            RUN_L, px, RUN_W, height, RUN_W, height);
    double tick = report_html_tick(scale, 8), y_end = run_y(run->nranks) - RUN_GAP + 4;
    for (double t = 0; t <= scale * (1 + 1e-9); t += tick) {
        char b[64];
        report_html_time(t, b, sizeof b);
        double x = RUN_L + t * px;
        fprintf(out, "<line class=\"grid\" data-tick-s=\"%.9g\" x1=\"%.2f\" x2=\"%.2f\" y1=\"%d\" y2=\"%.1f\"/>"
                     "<text class=\"mute\" x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                t, x, x, RUN_TOP - 6, y_end, x, y_end + 16, b);
    }
    for (int i = 0; i < run->nranks; i++) run_lane(out, run, i, px, sc->chunks);
    fputs("</svg>\n<p class=\"note\">What each rank ran in the last step of the trace, from its own start of the "
          "step: a block per forward and backward of the schedule, from after its input arrived until its output "
          "was sent, and below it the collectives and pipeline messages (time a rank waits in a receive shows "
          "there, not in a block). The simulated step below is drawn on the same time axis, from its start: "
          "the same milliseconds per pixel, so the two can be held against each other.</p>\n</section>\n",
          out);
}

static void html_phases(FILE *out, const Run *run, const Analysis *an)
{
    const RunRank *r0 = &run->ranks[0];
    double most = 0;
    for (int k = 0; k < ANALYZE_NPHASES; k++) most = fmax(most, fmax(an->phase_s[k], r0->phase_ms[k] * 1e-3));
    fprintf(out, "<section class=\"phases\">\n<h2>Predicted and measured per phase</h2>\n<div class=\"wide\"><table>\n"
                 "<tr><th>phase"
                 "</th><th>predicted</th><th>measured (rank 0)</th><th>measured / predicted</th><th></th></tr>\n");
    for (int k = 0; k < ANALYZE_NPHASES; k++) {
        double pred = an->phase_s[k], meas = r0->phase_ms[k] * 1e-3;
        char b1[64], b2[64], ratio[32] = "-";
        report_html_time(pred, b1, sizeof b1);
        report_html_time(meas, b2, sizeof b2);
        if (pred > 0) snprintf(ratio, sizeof ratio, "%.2fx", meas / pred);
        double wp = most > 0 ? 240 * pred / most : 0, wm = most > 0 ? 240 * meas / most : 0;
        fprintf(out, "<tr data-phase=\"%s\" data-predicted-s=\"%.9g\" data-measured-s=\"%.9g\"><td>%s</td><td>%s"
                     "</td><td>%s</td><td>%s</td><td><svg width=\"250\" height=\"18\"><rect x=\"0\" y=\"1\" "
                     "width=\"%.2f\" height=\"7\" fill=\"#4e79a7\"><title>predicted %s</title></rect><rect x=\"0\" "
                     "y=\"10\" width=\"%.2f\" height=\"7\" fill=\"#e15759\"><title>measured %s</title></rect></svg>"
                     "</td></tr>\n",
                phase_keys[k], pred, meas, analyze_phase_names[k], b1, b2, ratio, wp, b1, wm, b2);
    }
    fprintf(out, "</table></div>\n<p class=\"note\">Predicted: the cost model's step (parc explain) by phase, blue; "
                 "measured: rank 0's phase counters in the trace, the mean of the %s, red.</p>\n</section>\n",
            r0->phase_steps ? "steps after the first" : "one step");
}

static int write_page(const Run *run, const Analysis *an, const char *path)
{
    char title[512];
    snprintf(title, sizeof title, "parc report: %s", run->path);
    FILE *out = report_html_open(path, title);
    if (!out) return 1;
    report_html_summary(out, an);
    html_phases(out, run, an);
    /* one time axis for both: the longer of the measured and simulated steps */
    double scale = fmax(run->longest_s, an->step_s);
    if (!(scale > 0)) scale = 1.0;
    html_measured(out, run, an, scale);
    report_html_timeline(out, an, scale);
    return report_html_close(out, path) ? 1 : 0;
}

int report_run(const Analysis *an, const char *trace_path, const char *html_path, FILE *out)
{
    Arena arena = {0};
    Run run = {.path = trace_path};
    int status = read_run(&arena, &run, an);
    if (!status && !(html_path && !strcmp(html_path, "-"))) print_phases(out, &run, an);
    if (!status && html_path) status = write_page(&run, an, html_path);
    arena_free(&arena);
    return status;
}

#else

int report_run(const Analysis *an, const char *trace_path, const char *html_path, FILE *out)
{
    (void)an, (void)html_path, (void)out;
    diag_error((SrcLoc){.file = trace_path}, "install libcjson-dev (.ci/deps) and rebuild",
               "this parc was built without cJSON, which reading a trace needs");
    return 1;
}

#endif
