/*
 * report_html.h — the plan report as one self-contained HTML page
 * (`parc explain PLAN --html FILE`): memory per stage, the simulated pipeline
 * timeline, the mesh and the traffic of each axis, the collectives and the
 * rule behind each.
 *
 * The page needs nothing from the network: CSS and SVG are inline, and a few
 * lines of inline script only highlight what belongs together on hover (a
 * micro-batch across stages, a group of the mesh) and filter the collectives
 * by axis and stage; without the script every row shows.  Every number is read from
 * the Analysis of the lowered Program, the timeline from the same schedule
 * simulation the cost model runs; readable values are in the text and in SVG
 * <title>s (hover), exact ones in data-* attributes, so the DOM alone carries
 * every number (tests compare them with `parc explain --json`).
 *
 * Each section is its own function writing one <section> element, so a page
 * that compares plans (diff, search) can put the same pieces side by side;
 * the `scale` arguments let such a page draw two plans on one scale.
 */
#ifndef PARC_REPORT_HTML_H
#define PARC_REPORT_HTML_H

#include "analyze.h"

/* Writes the whole report of `an` to `path` ("-" is standard output).
 * Returns 0, or -1 after reporting through diag an error that names the path
 * (a file that cannot be opened, a write or close that fails). */
int report_html_write(const Analysis *an, const char *path);

/* The page around the sections.  report_html_open opens `path` ("-" is
 * standard output) and writes <!doctype>, <head> with the style sheet and the
 * shared SVG patterns; NULL after a diagnostic naming the path.
 * report_html_close writes the hover script and the end of the page and closes
 * the file: 0, or -1 after a diagnostic when a write or the close failed. */
FILE *report_html_open(const char *path, const char *title);
int report_html_close(FILE *out, const char *path);

/* The plan in a paragraph and the headline numbers (peak memory, step time,
 * bubble, model FLOPs utilisation, traffic per link class). */
void report_html_summary(FILE *out, const Analysis *an);

/* Stacked bars of the memory ledger per stage against the GPU's capacity, and
 * the table of the same bytes.  scale_bytes > 0 fixes the top of the bar axis
 * (0: fitted to this plan). */
void report_html_memory(FILE *out, const Analysis *an, double scale_bytes);

/* One lane per pipeline stage over one simulated step.  scale_s > 0 fixes the
 * time axis, linear from the step's start (0: this plan's step, the steady
 * state squeezed when the linear axis draws items too narrow to read). */
void report_html_timeline(FILE *out, const Analysis *an, double scale_s);

/* Every timeline's picture (the simulated one above, the run report's
 * measured one): REPORT_TIMELINE_W wide, time 0 at x = REPORT_TIMELINE_X0 and
 * a scale of s seconds over REPORT_TIMELINE_PLOT_W pixels, so two drawn with
 * one scale share their time axis.  Each <svg class="timeline"> says so in
 * data-origin-x and data-px-per-s, each tick's grid line in data-tick-s. */
enum { REPORT_TIMELINE_W = 1320, REPORT_TIMELINE_X0 = 84, REPORT_TIMELINE_PLOT_W = 1046 };
/* the margin right of the plot */
enum { REPORT_TIMELINE_R = REPORT_TIMELINE_W - REPORT_TIMELINE_X0 - REPORT_TIMELINE_PLOT_W };

/* Nodes x GPUs once per mesh axis with the axis' groups marked, and the bytes
 * each axis moves per step over links inside and across nodes. */
void report_html_mesh(FILE *out, const Analysis *an);

/* Every collective row of the Analysis with the rule behind it, the whole
 * table in the page (no box of its own to scroll), under buttons that show the
 * rows of one axis and a menu that shows those of one stage. */
void report_html_collectives(FILE *out, const Analysis *an);

/* Plans side by side (`parc diff A B --html`, `parc search --html`;
 * report_compare.c): the settings in which the plans differ (mesh, the
 * parallel sizes, schedule, stage split, batch and micro-batches, ZeRO,
 * recompute, each dim's axis, ...) with every plan's value, a table of each
 * plan's figures (and, for two, the second minus the first), then every
 * plan's memory bars on one byte scale and its simulated timeline on one time
 * scale, each under names[i] in a <div class="plan" data-plan="i">.  Returns
 * 0, or -1 after a diagnostic naming the path. */
int report_html_compare(const char *path, const char *title, const Analysis *const *plans, const char *const *names,
                        int n);

/* Text and number formatting the report's sections share. */
void report_html_escape(FILE *out, const char *s);          /* text with & < > " escaped */
void report_html_time(double seconds, char *buf, size_t size); /* "853.4 us" (a micro sign), "13.88 s" */
/* A tick step of 1, 2 or 5 times a power of ten giving about `ticks` ticks
 * over [0, range]. */
double report_html_tick(double range, int ticks);

#endif
