/*
 * report_html_timeline.c — the pipeline timeline of the plan report: one lane
 * per stage over one step, a block per forward or backward of each
 * (micro-batch, chunk) at the time the cost model's simulation runs it
 * (schedule_simulate_spans with analyze's per-chunk times, so the step, the
 * idle time and the bubble are `parc explain`'s), the hand-offs between
 * stages, the idle time hatched, and the gradient sync and optimizer step
 * after the pipeline drains.
 *
 * The time axis is linear unless the plan's own scale would draw its work
 * items too narrow to tell apart (many micro-batches): then the steady state
 * of one-forward-one-backward pairs is squeezed into a marked band, so the
 * warm-up and the drain around it are drawn wide enough to read.  Every
 * block is still drawn, with its exact times in data-*.  Contracts in
 * report_html.h.
 */
#include "report_html.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    TL_W = REPORT_TIMELINE_W,
    TL_L = REPORT_TIMELINE_X0,
    TL_R = REPORT_TIMELINE_R,
    TL_LANE = 30,
    TL_GAP = 12,
    TL_TOP = 58,
    TL_AXIS = 34
};
/* Hand-off lines are drawn while a lane holds at most this many items. */
enum { TL_MAX_HANDOFF_ITEMS = 200 };
/* The squeezed axis: used when the linear scale draws an item narrower than
 * TL_MIN_ITEM_PX; at most TL_MAX_SQUEEZED bands, TL_SQUEEZED_W pixels in all,
 * each at least TL_MIN_SQUEEZED_ITEMS of the longest item long; the first and
 * last TL_STEADY_KEPT pairs of each stage's steady state stay unsqueezed. */
enum { TL_MIN_ITEM_PX = 6, TL_MAX_SQUEEZED = 2, TL_SQUEEZED_W = 200, TL_MIN_SQUEEZED_ITEMS = 8, TL_STEADY_KEPT = 2 };
enum { TL_MAX_PIECES = 2 * TL_MAX_SQUEEZED + 1 };

static const char *const forward_colors[2] = {"#4e79a7", "#a0cbe8"};
static const char *const backward_colors[2] = {"#59a14f", "#8cd17d"};
static const char *const label_colors[2] = {"#fff", "#1d2330"};
#define SYNC_COLOR "#f28e2b"
#define OPTIM_COLOR "#9c755f"

/* A piece of the time axis: [t0, t1] drawn from x0 at px pixels per second;
 * `squeezed` marks a band of the steady state drawn narrower than the rest. */
typedef struct AxisPiece {
    double t0, t1, x0, px;
    int squeezed;
} AxisPiece;

typedef struct Timeline {
    const Analysis *an;
    const Schedule *sc;
    double **start;  /* per stage, per item: when it starts */
    double *idle;    /* per stage: the pipeline's length minus the stage's busy time */
    int **item_at;   /* per stage: index of (kind, chunk, micro) in its order */
    double scale;    /* the axis' length in seconds */
    double px;       /* pixels per second outside squeezed pieces */
    AxisPiece piece[TL_MAX_PIECES];
    int npieces;     /* in time order, covering [0, scale] */
} Timeline;

/* The x of time t: the piece holding it (the last for t past the scale). */
static double tl_x(const Timeline *tl, double t)
{
    int k = 0;
    while (k + 1 < tl->npieces && t > tl->piece[k].t1) k++;
    return tl->piece[k].x0 + (t - tl->piece[k].t0) * tl->piece[k].px;
}
static double tl_y(int stage) { return TL_TOP + stage * (TL_LANE + TL_GAP); }
static double item_length(const Timeline *tl, int stage, const WorkItem *w)
{
    int at = stage * tl->an->prog->schedule.chunks + w->chunk;
    return w->kind == WORK_FORWARD ? tl->an->stage_fwd[at] : tl->an->stage_bwd[at];
}
static int item_key(const Schedule *sc, int kind, int chunk, int micro)
{
    return (kind * sc->chunks + chunk) * sc->micro_batches + micro;
}

static void item_name(const Schedule *sc, const WorkItem *w, char *buf, size_t size)
{
    if (sc->chunks > 1)
        snprintf(buf, size, "%c%d.%d", w->kind == WORK_FORWARD ? 'F' : 'B', (int)w->micro, (int)w->chunk);
    else snprintf(buf, size, "%c%d", w->kind == WORK_FORWARD ? 'F' : 'B', (int)w->micro);
}

/* Runs the simulation with the analysis' times; its makespan is the
 * analysis' pipeline time or the report would contradict `explain`. */
static void timeline_build(Arena *arena, Timeline *tl, const Analysis *an)
{
    const Schedule *sc = &an->prog->schedule;
    int p = sc->stages;
    tl->an = an;
    tl->sc = sc;
    tl->start = arena_alloc(arena, sizeof(double *) * (size_t)p);
    tl->item_at = arena_alloc(arena, sizeof(int *) * (size_t)p);
    tl->idle = arena_alloc(arena, sizeof(double) * (size_t)p);
    for (int s = 0; s < p; s++) {
        tl->start[s] = arena_alloc(arena, sizeof(double) * (size_t)sc->count[s]);
        tl->item_at[s] = arena_alloc(arena, sizeof(int) * 2 * (size_t)sc->micro_batches * (size_t)sc->chunks);
        for (int i = 0; i < sc->count[s]; i++) {
            const WorkItem *w = &sc->items[s][i];
            tl->item_at[s][item_key(sc, w->kind, w->chunk, w->micro)] = i;
        }
    }
    double makespan = schedule_simulate_stages(sc, an->stage_fwd, an->stage_bwd, an->t_fwd, an->t_bwd, an->t_hold,
                                               an->t_wire, tl->idle, tl->start);
    if (makespan != an->pipeline_s)
        PARC_BUG("the timeline's simulation gives %.9g s, the analysis %.9g s", makespan, an->pipeline_s);
}

/* ------------------------------------------------------------ the time axis */

typedef struct Interval {
    double t0, t1;
} Interval;

static int interval_by_start(const void *a, const void *b)
{
    double x = ((const Interval *)a)->t0, y = ((const Interval *)b)->t0;
    return (x > y) - (x < y);
}

static int interval_by_length(const void *a, const void *b)
{
    double x = ((const Interval *)a)->t1 - ((const Interval *)a)->t0;
    double y = ((const Interval *)b)->t1 - ((const Interval *)b)->t0;
    return (x < y) - (x > y);
}

/* Items [a, b) of stage s as one interval of time, when there are any. */
static void keep_items(const Timeline *tl, int s, int a, int b, Interval *kept, int *n)
{
    if (a < 0) a = 0;
    if (b > tl->sc->count[s]) b = tl->sc->count[s];
    if (a >= b) return;
    kept[(*n)++] = (Interval){tl->start[s][a], tl->start[s][b - 1] + item_length(tl, s, &tl->sc->items[s][b - 1])};
}

/* Items [a, b) whole when there are at most 2 `ends` of them, else the first
 * and the last `ends`. */
static void keep_run(const Timeline *tl, int s, int a, int b, int ends, Interval *kept, int *n)
{
    if (b - a <= 2 * ends) keep_items(tl, s, a, b, kept, n);
    else {
        keep_items(tl, s, a, a + ends, kept, n);
        keep_items(tl, s, b - ends, b, kept, n);
    }
}

/* The times drawn at full width, merged and in order: on every stage its
 * warm-up forwards and its cool-down backwards (of a run longer than 2 p v +
 * 4, GPipe's, the first and last p v + 2), the first and last TL_STEADY_KEPT
 * pairs of its steady state, and the gradient sync and optimizer after the
 * pipeline.  Returns the number of intervals in `kept`. */
static int timeline_kept(const Timeline *tl, Interval *kept, double longest)
{
    const Schedule *sc = tl->sc;
    int n = 0, ends = sc->stages * sc->chunks + 2;
    for (int s = 0; s < sc->stages; s++) {
        int count = sc->count[s], first_b = count, last_f = -1;
        for (int i = 0; i < count; i++) {
            if (sc->items[s][i].kind == WORK_BACKWARD && first_b == count) first_b = i;
            if (sc->items[s][i].kind == WORK_FORWARD) last_f = i;
        }
        int steady_end = last_f + 1 > first_b ? last_f + 1 : first_b;
        keep_run(tl, s, 0, first_b, ends, kept, &n);
        keep_run(tl, s, first_b, steady_end, 2 * TL_STEADY_KEPT, kept, &n);
        keep_run(tl, s, steady_end, count, ends, kept, &n);
    }
    kept[n++] = (Interval){tl->an->pipeline_s, tl->scale};
    qsort(kept, (size_t)n, sizeof *kept, interval_by_start);
    int merged = 0;
    for (int i = 0; i < n; i++) {
        /* gaps shorter than an item (hand-offs, waits) are not worth a band */
        if (merged && kept[i].t0 <= kept[merged - 1].t1 + longest) {
            if (kept[i].t1 > kept[merged - 1].t1) kept[merged - 1].t1 = kept[i].t1;
        } else kept[merged++] = kept[i];
    }
    return merged;
}

/* Sets the axis' pieces: one linear piece over [0, scale] unless `squeeze`
 * and the linear scale draws some item narrower than TL_MIN_ITEM_PX; then
 * the longest gaps between the kept times (at most TL_MAX_SQUEEZED, each
 * long enough and drawn at least twice narrower than the rest) become
 * squeezed pieces. */
static void timeline_scale(Arena *arena, Timeline *tl, double scale, int squeeze)
{
    const Schedule *sc = tl->sc;
    double width = TL_W - TL_L - TL_R, shortest = INFINITY, longest = 0;
    tl->scale = scale;
    tl->px = width / scale;
    tl->npieces = 1;
    tl->piece[0] = (AxisPiece){0, scale, TL_L, tl->px, 0};
    for (int s = 0; s < sc->stages; s++) {
        if (!sc->count[s]) continue;
        for (int c = 0; c < sc->chunks; c++) {
            int at = s * sc->chunks + c;
            shortest = fmin(shortest, fmin(tl->an->stage_fwd[at], tl->an->stage_bwd[at]));
            longest = fmax(longest, fmax(tl->an->stage_fwd[at], tl->an->stage_bwd[at]));
        }
    }
    if (!squeeze || !(shortest * tl->px < TL_MIN_ITEM_PX)) return;
    Interval *kept = arena_alloc(arena, sizeof(Interval) * (6 * (size_t)sc->stages + 1));
    int nkept = timeline_kept(tl, kept, longest), ngaps = 0;
    Interval gaps[TL_MAX_SQUEEZED + 1];
    Interval *all = arena_alloc(arena, sizeof(Interval) * (size_t)nkept);
    int nall = 0;
    for (int i = 0; i + 1 < nkept; i++)
        if (kept[i + 1].t0 - kept[i].t1 >= TL_MIN_SQUEEZED_ITEMS * longest)
            all[nall++] = (Interval){kept[i].t1, kept[i + 1].t0};
    qsort(all, (size_t)nall, sizeof *all, interval_by_length);
    for (int i = 0; i < nall && ngaps < TL_MAX_SQUEEZED; i++) gaps[ngaps++] = all[i];
    /* drop the shortest gap while a band would be less than twice narrower */
    double px = tl->px, band = 0;
    while (ngaps > 0) {
        double held = 0;
        for (int g = 0; g < ngaps; g++) held += gaps[g].t1 - gaps[g].t0;
        band = (double)TL_SQUEEZED_W / ngaps;
        px = (width - TL_SQUEEZED_W) / (scale - held);
        if (band / (gaps[ngaps - 1].t1 - gaps[ngaps - 1].t0) * 2 <= px) break;
        ngaps--;
    }
    if (!ngaps || px < 2 * tl->px) return;
    qsort(gaps, (size_t)ngaps, sizeof *gaps, interval_by_start);
    double t = 0, x = TL_L;
    tl->npieces = 0;
    tl->px = px;
    for (int g = 0; g < ngaps; g++) {
        tl->piece[tl->npieces++] = (AxisPiece){t, gaps[g].t0, x, px, 0};
        x += (gaps[g].t0 - t) * px;
        double dur = gaps[g].t1 - gaps[g].t0;
        tl->piece[tl->npieces++] = (AxisPiece){gaps[g].t0, gaps[g].t1, x, band / dur, 1};
        x += band;
        t = gaps[g].t1;
    }
    tl->piece[tl->npieces++] = (AxisPiece){t, scale, x, px, 0};
}

/* The stage and item that send item i of `stage` its input (schedule.h: the
 * communication implied by the order); 0 when it receives nothing. */
static int item_sender(const Timeline *tl, int stage, int i, int *from, int *from_item)
{
    const Schedule *sc = tl->sc;
    const WorkItem *w = &sc->items[stage][i];
    int p = sc->stages, v = sc->chunks, c = w->chunk;
    if (w->kind == WORK_FORWARD) {
        if (stage == 0 && c == 0) return 0;
        *from = stage > 0 ? stage - 1 : p - 1;
        c = stage > 0 ? c : c - 1;
    } else {
        if (stage == p - 1 && c == v - 1) return 0;
        *from = stage < p - 1 ? stage + 1 : 0;
        c = stage < p - 1 ? c : c + 1;
    }
    *from_item = tl->item_at[*from][item_key(sc, w->kind, c, w->micro)];
    return 1;
}

static void timeline_block(FILE *out, const Timeline *tl, int s, int i)
{
    const WorkItem *w = &tl->sc->items[s][i];
    const StageCost *cost = &tl->an->stages[s];
    double t0 = tl->start[s][i], len = item_length(tl, s, w), x = tl_x(tl, t0), y = tl_y(s),
           width = tl_x(tl, t0 + len) - x;
    int fwd = w->kind == WORK_FORWARD, shade = w->chunk % 2;
    double comm = fwd ? cost->comm_fwd_chunk_s : cost->comm_bwd_chunk_s;
    char name[32], b0[64], b1[64], b2[64], b3[64];
    item_name(tl->sc, w, name, sizeof name);
    report_html_time(t0, b0, sizeof b0);
    report_html_time(t0 + len, b1, sizeof b1);
    report_html_time(len, b2, sizeof b2);
    report_html_time(comm, b3, sizeof b3);
    fprintf(out, "<rect data-stage=\"%d\" data-item=\"%s\" data-micro=\"%d\" data-chunk=\"%d\" data-start=\"%.9g\" "
                 "data-end=\"%.9g\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\"%s>"
                 "<title>stage %d, %s: %s of micro-batch %d",
            s, name, (int)w->micro, (int)w->chunk, t0, t0 + len, x, y, width, TL_LANE,
            fwd ? forward_colors[shade] : backward_colors[shade], width >= 3 ? " stroke=\"#fff\"" : "", s, name,
            fwd ? "forward" : "backward", (int)w->micro);
    if (tl->sc->chunks > 1) fprintf(out, " through chunk %d", (int)w->chunk);
    fprintf(out, ", %s to %s (%s", b0, b1, b2);
    if (comm > 0) fprintf(out, ", of which %s in blocking collectives", b3);
    fputs(")</title></rect>", out);
    double comm_width = fmin(comm / len, 1.0) * width - 1;
    if (comm > 0 && width >= 4 && comm_width >= 0.5)
        fprintf(out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"5\" fill=\"#1d2330\" fill-opacity=\"0.5\" "
                     "pointer-events=\"none\"/>",
                x + 0.5, y + TL_LANE - 5.5, comm_width);
    /* the item's name where it fits, else its micro-batch (the shade tells the chunk) */
    char micro[16];
    snprintf(micro, sizeof micro, "%d", (int)w->micro);
    const char *label = width >= 7.0 * (double)strlen(name) + 4 ? name
                        : width >= 7.0 * (double)strlen(micro) + 3 ? micro : NULL;
    if (label)
        fprintf(out, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" style=\"fill:%s;font-size:11px;"
                     "pointer-events:none\">%s</text>",
                x + width / 2, y + TL_LANE / 2 + 2, label_colors[shade], label);
    fputc('\n', out);
}

/* Gradient sync and optimizer step after the pipeline: what the cost model
 * adds to the pipeline's length (the busiest stage's sum sets the step). */
static void timeline_tail(FILE *out, const Timeline *tl, int s)
{
    const StageCost *cost = &tl->an->stages[s];
    double t = tl->an->pipeline_s, y = tl_y(s);
    char b1[64];
    if (cost->sync_s > 0) {
        report_html_time(cost->sync_s, b1, sizeof b1);
        fprintf(out, "<rect data-stage=\"%d\" data-phase=\"grad-sync\" data-seconds=\"%.9g\" x=\"%.2f\" y=\"%.1f\" "
                     "width=\"%.2f\" height=\"%d\" fill=\"" SYNC_COLOR "\"><title>stage %d: gradient sync not hidden "
                     "behind the backward, %s</title></rect>\n",
                s, cost->sync_s, tl_x(tl, t), y, tl_x(tl, t + cost->sync_s) - tl_x(tl, t), TL_LANE, s, b1);
        t += cost->sync_s;
    }
    if (cost->optim_s > 0) {
        report_html_time(cost->optim_s, b1, sizeof b1);
        fprintf(out, "<rect data-stage=\"%d\" data-phase=\"optimizer\" data-seconds=\"%.9g\" x=\"%.2f\" y=\"%.1f\" "
                     "width=\"%.2f\" height=\"%d\" fill=\"" OPTIM_COLOR "\"><title>stage %d: optimizer step, %s "
                     "(reads and writes the model states at memory bandwidth)</title></rect>\n",
                s, cost->optim_s, tl_x(tl, t), y, tl_x(tl, t + cost->optim_s) - tl_x(tl, t), TL_LANE, s, b1);
    }
}

static void timeline_lane(FILE *out, const Timeline *tl, int s)
{
    const Analysis *an = tl->an;
    double y = tl_y(s);
    char b1[64];
    report_html_time(tl->idle[s], b1, sizeof b1);
    double share = an->pipeline_s > 0 ? tl->idle[s] / an->pipeline_s : 0;
    fprintf(out, "<rect data-stage=\"%d\" data-idle-s=\"%.9g\" x=\"%d\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                 "fill=\"url(#parc-idle)\"><title>stage %d waits %s in all (%.1f%% of the pipeline)</title></rect>\n",
            s, tl->idle[s], TL_L, y, tl_x(tl, an->pipeline_s) - TL_L, TL_LANE, s, b1, 100.0 * share);
    for (int i = 0; i < tl->sc->count[s]; i++) timeline_block(out, tl, s, i);
    timeline_tail(out, tl, s);
    if (tl->sc->stages == 1)
        fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">every rank</text>\n", TL_L - 8,
                y + TL_LANE / 2 + 4);
    else
        fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">stage %d</text>\n", TL_L - 8,
                y + TL_LANE / 2 + 4, s);
    fprintf(out, "<text class=\"mute\" x=\"%d\" y=\"%.1f\">idle %s (%.1f%%)</text>\n", TL_W - TL_R + 12,
            y + TL_LANE / 2 + 4, b1, 100.0 * share);
}

/* A line per message from the end of the item that sends it to its arrival
 * on the receiving lane.  Returns the number drawn. */
static int timeline_handoffs(FILE *out, const Timeline *tl)
{
    const Schedule *sc = tl->sc;
    char b1[64], name[32];
    report_html_time(tl->an->t_p2p, b1, sizeof b1);
    int drawn = 0;
    for (int s = 0; s < sc->stages; s++)
        for (int i = 0; i < sc->count[s]; i++) {
            int from, j;
            if (!item_sender(tl, s, i, &from, &j)) continue;
            const WorkItem *w = &sc->items[from][j];
            double sent = tl->start[from][j] + item_length(tl, from, w), arrives = sent + tl->an->t_hold + tl->an->t_wire;
            int down = from < s;
            double y0 = tl_y(from) + (down ? TL_LANE : 0), y1 = tl_y(s) + (down ? 0 : TL_LANE);
            item_name(sc, w, name, sizeof name);
            fprintf(out, "<line data-handoff=\"%s\" data-from=\"%d\" data-to=\"%d\" x1=\"%.2f\" y1=\"%.1f\" "
                         "x2=\"%.2f\" y2=\"%.1f\" stroke=\"#3d4452\" stroke-width=\"1.2\"><title>%s of %s: stage %d "
                         "to stage %d, %s</title></line>\n",
                    name, from, s, tl_x(tl, sent), y0, tl_x(tl, arrives), y1,
                    w->kind == WORK_FORWARD ? "activation" : "gradient", name, from, s, b1);
            drawn++;
        }
    return drawn;
}

/* Ticks of 1, 2 or 5 times a power of ten over each unsqueezed piece, about
 * one per 130 pixels, none crowding a squeezed band's labels. */
static void timeline_axis(FILE *out, const Timeline *tl, double y_end)
{
    for (int k = 0; k < tl->npieces; k++) {
        const AxisPiece *pc = &tl->piece[k];
        double span = pc->t1 - pc->t0, w = span * pc->px;
        if (pc->squeezed || !(span > 0)) continue;
        double step = report_html_tick(span, w / 130 > 1 ? (int)(w / 130) : 1);
        for (double t = ceil(pc->t0 / step * (1 - 1e-9)) * step; t <= pc->t1 * 1.0001; t += step) {
            char label[64];
            double x = tl_x(tl, t);
            if ((k > 0 && x < pc->x0 + 36) || (k + 1 < tl->npieces && x > pc->x0 + w - 36)) continue;
            report_html_time(t, label, sizeof label);
            fprintf(out, "<line class=\"grid\" data-tick-s=\"%.9g\" x1=\"%.2f\" x2=\"%.2f\" y1=\"%d\" y2=\"%.1f\"/>", t,
                    x, x, TL_TOP - 6, y_end);
            fprintf(out, "<text class=\"mute\" x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x,
                    y_end + 16, label);
        }
    }
}

/* Over each squeezed piece, on top of its blocks: a pale veil, its edges
 * dashed, and under the axis its length and how much narrower it is drawn. */
static void timeline_squeezed(FILE *out, const Timeline *tl, double y_end)
{
    for (int k = 0; k < tl->npieces; k++) {
        const AxisPiece *pc = &tl->piece[k];
        if (!pc->squeezed) continue;
        double dur = pc->t1 - pc->t0, x0 = pc->x0, x1 = pc->x0 + dur * pc->px, factor = tl->px / pc->px;
        int items = 0;
        for (int s = 0; s < tl->sc->stages; s++)
            for (int i = 0; i < tl->sc->count[s]; i++) items += tl->start[s][i] >= pc->t0 && tl->start[s][i] < pc->t1;
        char b0[64], b1[64], b2[64];
        report_html_time(pc->t0, b0, sizeof b0);
        report_html_time(pc->t1, b1, sizeof b1);
        report_html_time(dur, b2, sizeof b2);
        fprintf(out, "<g class=\"squeezed\" data-from-s=\"%.9g\" data-to-s=\"%.9g\" data-px-per-s=\"%.9g\" "
                     "data-factor=\"%.6g\" data-items=\"%d\">",
                pc->t0, pc->t1, pc->px, factor, items);
        fprintf(out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%.1f\" fill=\"#fff\" fill-opacity=\"0.6\">"
                     "<title>the steady state from %s to %s (%s, %d items of all stages) drawn %.0f times narrower "
                     "than the rest of the step</title></rect>",
                x0, TL_TOP - 6, x1 - x0, y_end - (TL_TOP - 6), b0, b1, b2, items, factor);
        for (int e = 0; e < 2; e++)
            fprintf(out, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%d\" y2=\"%.1f\" stroke=\"#1d2330\" "
                         "stroke-dasharray=\"4 3\"/>",
                    e ? x1 : x0, e ? x1 : x0, TL_TOP - 6, y_end + 4);
        fprintf(out, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" style=\"font-weight:600\">steady state"
                     "</text><text class=\"mute\" x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>"
                     "<text class=\"mute\" x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">drawn %.0f&#215; narrower"
                     "</text></g>\n",
                (x0 + x1) / 2, y_end + 16, (x0 + x1) / 2, y_end + 30, b2, (x0 + x1) / 2, y_end + 44, factor);
    }
}

/* The step above the lanes: a bracket over its length, the numbers on it. */
static void timeline_step_label(FILE *out, const Timeline *tl)
{
    const Analysis *an = tl->an;
    char step[64], pipe[64], tail[64];
    report_html_time(an->step_s, step, sizeof step);
    report_html_time(an->pipeline_s, pipe, sizeof pipe);
    report_html_time(an->step_s - an->pipeline_s, tail, sizeof tail);
    double x0 = tl_x(tl, 0), x1 = tl_x(tl, an->step_s), xp = tl_x(tl, an->pipeline_s), y = TL_TOP - 16;
    fprintf(out, "<path d=\"M%.2f %.1f v-7 H%.2f v7\" fill=\"none\" stroke=\"#1d2330\" stroke-width=\"1.2\"/>\n", x0,
            y, x1);
    fprintf(out,
            "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#1d2330\" stroke-dasharray=\"3 3\"/>\n", xp,
            xp, y - 7.0, tl_y(tl->sc->stages) - TL_GAP + 4);
    /* over a bracket too short to centre it on (a step drawn on a longer scale), from its start */
    int centred = fmin(x1, TL_W - TL_R) - x0 >= 640;
    fprintf(out, "<text class=\"step\" data-step-s=\"%.6g\" data-pipeline-s=\"%.6g\" data-bubble-share=\"%.6g\" "
                 "data-bubble-ideal=\"%.6g\" x=\"%.2f\" y=\"%.1f\" text-anchor=\"%s\" style=\"font-weight:600\">"
                 "step %s = pipeline %s + gradient sync and optimizer %s &#183; bubble %.1f%% of the simulated step"
                 "</text>\n",
            an->step_s, an->pipeline_s, an->bubble_share, an->bubble_ideal,
            centred ? (x0 + fmin(x1, TL_W - TL_R)) / 2 : x0, y - 13, centred ? "middle" : "start", step, pipe, tail,
            100.0 * an->bubble_share);
}

static void timeline_legend(FILE *out, const Schedule *sc)
{
    fputs("<div class=\"legend\">", out);
    for (int c = 0; c < (sc->chunks > 1 ? 2 : 1); c++) {
        fprintf(out, "<span><i class=\"swatch\" style=\"background:%s\"></i>forward%s</span>", forward_colors[c],
                sc->chunks > 1 ? (c ? " (odd chunks)" : " (even chunks)") : "");
        fprintf(out, "<span><i class=\"swatch\" style=\"background:%s\"></i>backward%s</span>", backward_colors[c],
                sc->chunks > 1 ? (c ? " (odd chunks)" : " (even chunks)") : "");
    }
    fputs("<span><i class=\"swatch\" style=\"background:#1d2330;opacity:.5;height:5px;vertical-align:1px\"></i>"
          "blocking collectives inside</span>",
          out);
    if (sc->stages > 1) fputs("<span><i class=\"swatch line\"></i>hand-off to the next stage</span>", out);
    fputs("<span><i class=\"swatch idle\"></i>idle</span>", out);
    fputs("<span><i class=\"swatch\" style=\"background:" SYNC_COLOR "\"></i>gradient sync</span>", out);
    fputs("<span><i class=\"swatch\" style=\"background:" OPTIM_COLOR "\"></i>optimizer</span></div>\n", out);
}

void report_html_timeline(FILE *out, const Analysis *an, double scale_s)
{
    Arena arena = {0};
    Timeline tl;
    timeline_build(&arena, &tl, an);
    const Schedule *sc = tl.sc;
    double scale = scale_s > 0 ? scale_s : an->step_s;
    if (!(scale > 0)) scale = 1.0;
    timeline_scale(&arena, &tl, scale, !(scale_s > 0));
    int squeezed = tl.npieces > 1;
    int height = TL_TOP + sc->stages * (TL_LANE + TL_GAP) - TL_GAP + TL_AXIS + (squeezed ? 28 : 0);
    double y_end = tl_y(sc->stages) - TL_GAP + 4;

    fputs("<section class=\"timeline\">\n<h2>", out);
    if (sc->stages > 1)
        fprintf(out, "Pipeline: %s, %d stages, %d micro-batches", schedule_kind_name(sc->kind), sc->stages,
                sc->micro_batches);
    else fprintf(out, "One step: %d micro-batches, each forward then backward", sc->micro_batches);
    if (sc->chunks > 1) fprintf(out, ", %d virtual stages per rank", sc->chunks);
    fputs("</h2>\n", out);
    timeline_legend(out, sc);
    int most = 0;
    for (int s = 0; s < sc->stages; s++) most = sc->count[s] > most ? sc->count[s] : most;
    /* blocks a pixel or two wide stay solid colour instead of blurring into their neighbours */
    fprintf(out, "<svg class=\"timeline\" data-origin-x=\"%d\" data-px-per-s=\"%.9g\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\"%s>\n",
            TL_L, tl.px, TL_W, height, TL_W, height,
            most > TL_MAX_HANDOFF_ITEMS ? " shape-rendering=\"crispEdges\"" : "");
    timeline_axis(out, &tl, y_end);
    timeline_step_label(out, &tl);
    /* hand-offs first: the lanes cover them, so they show between the lanes */
    int handoffs = sc->stages > 1 && most <= TL_MAX_HANDOFF_ITEMS ? timeline_handoffs(out, &tl) : 0;
    for (int s = 0; s < sc->stages; s++) timeline_lane(out, &tl, s);
    timeline_squeezed(out, &tl, y_end);
    fputs("</svg>\n", out);

    char f[64], b[64], h[64];
    report_html_time(an->t_fwd, f, sizeof f);
    report_html_time(an->t_bwd, b, sizeof b);
    report_html_time(an->t_p2p, h, sizeof h);
    fprintf(out, "<p class=\"note\" data-handoffs=\"%d\">The cost model's simulation of the schedule: every forward "
                 "and backward of a micro-batch through one chunk takes its own stage's time, at most %s and %s (a "
                 "stage's compute at the GPU's rates plus its blocking collectives)",
            handoffs, f, b);
    if (sc->stages > 1) fprintf(out, "; a hand-off between stages takes %s", h);
    if (sc->stages > 1 && !handoffs) fputs(" (not drawn at this scale)", out);
    fputs(". The bubble is the idle share of the least idle stage.", out);
    if (squeezed)
        fputs(" The axis is not linear: so that the warm-up and the drain show each item, the steady state between "
              "them is squeezed into the pale band(s) marked under the axis (every block is still there; hover one "
              "for its times).",
              out);
    fputs("</p>\n</section>\n", out);
    arena_free(&arena);
}
