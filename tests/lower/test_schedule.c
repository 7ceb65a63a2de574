/*
 * test_schedule.c — tests of the schedule pass (compiler/lower/schedule.c).
 *
 * Builds and verifies every schedule kind over hundreds of shapes, checks exact
 * peaks, bubbles and simulated makespans against their closed forms, compares
 * small dumps with golden strings, and feeds hand-corrupted schedules to the
 * verifier.  Prints "N passed, M failed"; exits non-zero on any failure.
 */
#include "schedule.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_check.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * (1.0 + fabs(b)); }

static int min_int(int a, int b) { return a < b ? a : b; }

/* The schedule's dump as a string in `arena`. */
static char *dump_string(Arena *arena, const Schedule *s) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    schedule_dump(s, f);
    fclose(f);
    char *copy = arena_strdup(arena, text);
    free(text);
    return copy;
}

/* Copies s's item arrays into fresh arena memory so a test can corrupt them. */
static Schedule copy_schedule(Arena *arena, const Schedule *s) {
    Schedule c = *s;
    int p = s->stages;
    c.count = arena_alloc(arena, (size_t)p * sizeof(int));
    c.items = arena_alloc(arena, (size_t)p * sizeof(WorkItem *));
    c.peak_in_flight = arena_alloc(arena, (size_t)p * sizeof(int));
    c.peak_micro_in_flight = arena_alloc(arena, (size_t)p * sizeof(int));
    memcpy(c.count, s->count, (size_t)p * sizeof(int));
    memcpy(c.peak_in_flight, s->peak_in_flight, (size_t)p * sizeof(int));
    memcpy(c.peak_micro_in_flight, s->peak_micro_in_flight, (size_t)p * sizeof(int));
    for (int st = 0; st < p; st++) {
        c.items[st] = arena_alloc(arena, (size_t)s->count[st] * sizeof(WorkItem));
        memcpy(c.items[st], s->items[st], (size_t)s->count[st] * sizeof(WorkItem));
    }
    return c;
}

/* Replaces stage st's order with the items of `text` ("F0 B0 F1.1 ..."). */
static void set_order(Arena *arena, Schedule *s, int st, const char *text) {
    WorkItem *items = arena_alloc(arena, strlen(text) * sizeof(WorkItem));
    int n = 0;
    for (const char *c = text; *c;) {
        if (*c == ' ') {
            c++;
            continue;
        }
        WorkItem item = {.kind = *c == 'F' ? WORK_FORWARD : WORK_BACKWARD};
        char *end;
        item.micro = (int32_t)strtol(c + 1, &end, 10);
        if (*end == '.') item.chunk = (int32_t)strtol(end + 1, &end, 10);
        items[n++] = item;
        c = end;
    }
    s->items[st] = items;
    s->count[st] = n;
}

static int rejected_with(const Schedule *s, const char *fragment) {
    char why[512];
    if (schedule_verify(s, why, sizeof(why)) == 0) {
        fprintf(stderr, "  verify accepted a corrupt schedule (wanted \"%s\")\n", fragment);
        return 0;
    }
    if (!strstr(why, fragment)) {
        fprintf(stderr, "  verify said \"%s\", wanted \"%s\"\n", why, fragment);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ sweep */

/* Every kind over p in 1..8, m in 1..32, v in 2..4: build, verify, exact
 * peaks, bubble, simulated makespan. */
static void test_sweep(void) {
    int shapes = 0, bad = 0;
    char why[512];
    for (int kind = SCHED_NONE; kind <= SCHED_INTERLEAVED; kind++) {
        for (int p = 1; p <= 8; p++) {
            for (int m = 1; m <= 32; m++) {
                int vmin = kind == SCHED_INTERLEAVED ? 2 : 1, vmax = kind == SCHED_INTERLEAVED ? 4 : 1;
                if (kind == SCHED_1F1B && m < p) continue;
                if (kind == SCHED_INTERLEAVED && m % p != 0) continue;
                for (int v = vmin; v <= vmax; v++) {
                    Arena arena = {0};
                    Schedule s;
                    shapes++;
                    int before = failed;
                    CHECK(schedule_build(&arena, (SchedKind)kind, p, m, v, &s) == 0,
                          "build %s p=%d m=%d v=%d", schedule_kind_name((SchedKind)kind), p, m, v);
                    if (failed != before) {
                        arena_free(&arena);
                        bad++;
                        continue;
                    }
                    int rc = schedule_verify(&s, why, sizeof(why));
                    CHECK(rc == 0, "%s p=%d m=%d v=%d: %s", schedule_kind_name(s.kind), p, m, v, why);
                    for (int st = 0; st < p; st++) {
                        CHECK(s.count[st] == 2 * m * v, "count");
                        int want = 0;
                        switch (s.kind) {
                        case SCHED_NONE: want = 1; break;
                        case SCHED_GPIPE: want = m; break;
                        case SCHED_1F1B: want = min_int(p - st, m); break;
                        case SCHED_INTERLEAVED:
                            want = min_int(2 * (p - st - 1) + (v - 1) * p + 1, m * v);
                            break;
                        }
                        CHECK(s.peak_in_flight[st] == want, "%s p=%d m=%d v=%d stage %d: peak %d, want %d",
                              schedule_kind_name(s.kind), p, m, v, st, s.peak_in_flight[st], want);
                        CHECK(v > 1 || s.peak_micro_in_flight[st] == s.peak_in_flight[st],
                              "v=1: micro peak equals peak");
                        CHECK(s.peak_micro_in_flight[st] <= s.peak_in_flight[st] &&
                                  s.peak_micro_in_flight[st] >= (s.peak_in_flight[st] + v - 1) / v,
                              "micro peak bounds");
                    }
                    if (s.kind == SCHED_INTERLEAVED)
                        CHECK(s.peak_in_flight[0] == min_int((v + 1) * p - 1, m * v),
                              "interleaved first-stage peak p=%d m=%d v=%d: %d", p, m, v,
                              s.peak_in_flight[0]);
                    CHECK(close_to(schedule_bubble_ideal(&s), (double)(p - 1) / (v * m)), "bubble");

                    /* Makespans with t_fwd = 1, t_bwd = 2, free communication. */
                    double *idle = arena_alloc(&arena, (size_t)p * sizeof(double));
                    double span = schedule_simulate(&s, 1.0, 2.0, 0.0, idle);
                    if (s.kind == SCHED_NONE) {
                        CHECK(close_to(span, 3.0 * m * p), "none p=%d m=%d: %g", p, m, span);
                    } else if (s.kind == SCHED_GPIPE || s.kind == SCHED_1F1B) {
                        CHECK(close_to(span, 3.0 * (m + p - 1)), "%s p=%d m=%d: makespan %g, want %d",
                              schedule_kind_name(s.kind), p, m, span, 3 * (m + p - 1));
                        for (int st = 0; st < p; st++)
                            CHECK(close_to(idle[st], 3.0 * (p - 1)), "idle stage %d: %g", st, idle[st]);
                        /* Bubble fraction = idle / busy = (p-1)/m = bubble_ideal. */
                        CHECK(close_to(idle[0] / (3.0 * m), schedule_bubble_ideal(&s)), "bubble fraction");
                    } else {
                        /* Interleaved, per-chunk times 1 and 2: the ideal is
                         * (m v + p - 1) * 3, bubble (p-1)/(v m) of the work. */
                        CHECK(close_to(span, 3.0 * (m * v + p - 1)),
                              "interleaved p=%d m=%d v=%d: makespan %g, want %d", p, m, v, span,
                              3 * (m * v + p - 1));
                        /* 1F1B over the same model: each stage item is v chunks. */
                        Schedule plain;
                        schedule_build(&arena, SCHED_1F1B, p, m, 1, &plain);
                        double plain_span = schedule_simulate(&plain, 1.0 * v, 2.0 * v, 0.0, NULL);
                        if (p > 1)
                            CHECK(span < plain_span, "interleaved %g not below 1F1B %g (p=%d m=%d v=%d)",
                                  span, plain_span, p, m, v);
                    }
                    if (failed != before) bad++;
                    arena_free(&arena);
                }
            }
        }
    }
    printf("sweep: %d shapes, %d with failures\n", shapes, bad);
    CHECK(shapes > 500, "only %d shapes", shapes);
}

/* Each stage at its own times, a message holding both ends (analyze.c's
 * simulation): 1F1B over 2 stages, 2 micro-batches, stage 0 F 1 B 2, stage 1
 * F 3 B 4, hand-off 0.5.  Stage 0: F0 0-1 (its send holds it to 1.5), F1
 * 1.5-2.5 (to 3); stage 1 takes micro-batch 0 in 1.5-2, F0 2-5, B0 5-9
 * (holds to 9.5); stage 0 takes it in 9.5-10, B0 10-12; stage 1 F1 10-13
 * (micro-batch 1 there since 3), B1 13-17 (holds to 17.5); stage 0 B1 18-20.
 * Without hand-offs: 17 (stage 0 busy 6, stage 1 14); every stage at the
 * slower one's times, as before stages had their own: 21. */
static void test_stage_times(void) {
    Arena arena = {0};
    Schedule s;
    schedule_build(&arena, SCHED_1F1B, 2, 2, 1, &s);
    const double f[2] = {1, 3}, b[2] = {2, 4};
    double idle[2];
    double span = schedule_simulate_stages(&s, f, b, 3, 4, 0.5, 0.0, idle, NULL);
    CHECK(close_to(span, 20.0), "own stage times, hand-off 0.5: makespan %g, want 20", span);
    CHECK(close_to(idle[0], 14.0) && close_to(idle[1], 6.0), "idle %g %g, want 14 6 (holds are not busy)",
          idle[0], idle[1]);
    span = schedule_simulate_stages(&s, f, b, 3, 4, 0.0, 0.0, idle, NULL);
    CHECK(close_to(span, 17.0) && close_to(idle[0], 11.0) && close_to(idle[1], 3.0),
          "own stage times, free hand-off: makespan %g idle %g %g, want 17 11 3", span, idle[0], idle[1]);
    /* a CPU rank's hand-off: holds of 0.1 (its copies) and 0.4 in flight.
     * Stage 0: F0 0-1 (holds to 1.1; arrives 1.5), F1 1.1-2.1 (to 2.2; 2.6);
     * stage 1 takes micro-batch 0 in 1.5-1.6, F0 1.6-4.6, B0 4.6-8.6 (to 8.7;
     * arrives 9.1), F1 8.8-11.8, B1 11.8-15.8 (to 15.9; 16.3); stage 0 B0
     * 9.2-11.2, B1 16.4-18.4 */
    span = schedule_simulate_stages(&s, f, b, 3, 4, 0.1, 0.4, idle, NULL);
    CHECK(close_to(span, 18.4) && close_to(idle[0], 12.4) && close_to(idle[1], 4.4),
          "holds 0.1, 0.4 in flight: makespan %g idle %g %g, want 18.4 12.4 4.4", span, idle[0], idle[1]);
    span = schedule_simulate(&s, 3, 4, 0.0, NULL);
    CHECK(close_to(span, 21.0), "every stage at the slower one's times: %g, want 21", span);
    arena_free(&arena);
}

/* GPipe with communication latency: each hop adds t_p2p on the critical path
 * twice per stage boundary (forward wave and backward wave). */
static void test_latency(void) {
    Arena arena = {0};
    for (int p = 1; p <= 6; p++) {
        for (int m = 1; m <= 12; m++) {
            Schedule g, f;
            schedule_build(&arena, SCHED_GPIPE, p, m, 1, &g);
            double span = schedule_simulate(&g, 1.0, 2.0, 0.25, NULL);
            CHECK(close_to(span, 3.0 * (m + p - 1) + 2 * (p - 1) * 0.25), "gpipe latency p=%d m=%d: %g",
                  p, m, span);
            if (m >= p) {
                schedule_build(&arena, SCHED_1F1B, p, m, 1, &f);
                double span_1f1b = schedule_simulate(&f, 1.0, 2.0, 0.25, NULL);
                CHECK(span_1f1b >= 3.0 * (m + p - 1) + 2 * (p - 1) * 0.25 - 1e-9,
                      "1f1b with latency cannot beat the critical path: %g", span_1f1b);
            }
        }
    }
    /* Interleaved pays more hops (v p - 1 per wave) than 1F1B (p - 1). */
    Schedule i;
    schedule_build(&arena, SCHED_INTERLEAVED, 4, 8, 2, &i);
    double free_span = schedule_simulate(&i, 1.0, 2.0, 0.0, NULL);
    double slow_span = schedule_simulate(&i, 1.0, 2.0, 0.5, NULL);
    CHECK(slow_span >= free_span + 2 * (2 * 4 - 1) * 0.5 - 1e-9, "interleaved latency: %g vs %g",
          slow_span, free_span);
    arena_free(&arena);
}

/* ----------------------------------------------------------------- golden */

static void test_golden(void) {
    static const struct {
        SchedKind kind;
        int p, m, v;
        const char *expected;
    } cases[] = {
        {SCHED_1F1B, 2, 4, 1,
         "schedule 1f1b: stages 2, micro_batches 4, chunks 1\n"
         "stage 0: F0 F1 B0 F2 B1 F3 B2 B3\n"
         "stage 1: F0 B0 F1 B1 F2 B2 F3 B3\n"
         "peak_in_flight: 2 1\n"
         "peak_micro_in_flight: 2 1\n"},
        {SCHED_INTERLEAVED, 2, 4, 2,
         "schedule interleaved: stages 2, micro_batches 4, chunks 2\n"
         "stage 0: F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0\n"
         "stage 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0\n"
         "peak_in_flight: 5 3\n"
         "peak_micro_in_flight: 4 3\n"},
        {SCHED_GPIPE, 3, 3, 1,
         "schedule gpipe: stages 3, micro_batches 3, chunks 1\n"
         "stage 0: F0 F1 F2 B0 B1 B2\n"
         "stage 1: F0 F1 F2 B0 B1 B2\n"
         "stage 2: F0 F1 F2 B0 B1 B2\n"
         "peak_in_flight: 3 3 3\n"
         "peak_micro_in_flight: 3 3 3\n"},
        {SCHED_NONE, 1, 3, 1,
         "schedule none: stages 1, micro_batches 3, chunks 1\n"
         "stage 0: F0 B0 F1 B1 F2 B2\n"
         "peak_in_flight: 1\n"
         "peak_micro_in_flight: 1\n"},
        {SCHED_1F1B, 4, 4, 1,
         "schedule 1f1b: stages 4, micro_batches 4, chunks 1\n"
         "stage 0: F0 F1 F2 F3 B0 B1 B2 B3\n"
         "stage 1: F0 F1 F2 B0 F3 B1 B2 B3\n"
         "stage 2: F0 F1 B0 F2 B1 F3 B2 B3\n"
         "stage 3: F0 B0 F1 B1 F2 B2 F3 B3\n"
         "peak_in_flight: 4 3 2 1\n"
         "peak_micro_in_flight: 4 3 2 1\n"},
        {SCHED_INTERLEAVED, 1, 2, 3,
         "schedule interleaved: stages 1, micro_batches 2, chunks 3\n"
         "stage 0: F0.0 F0.1 F0.2 B0.2 F1.0 B0.1 F1.1 B0.0 F1.2 B1.2 B1.1 B1.0\n"
         "peak_in_flight: 3\n"
         "peak_micro_in_flight: 2\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Arena arena = {0};
        Schedule s;
        CHECK(schedule_build(&arena, cases[i].kind, cases[i].p, cases[i].m, cases[i].v, &s) == 0,
              "golden build %zu", i);
        char *text = dump_string(&arena, &s);
        CHECK(strcmp(text, cases[i].expected) == 0, "golden %zu:\n--- got\n%s--- want\n%s", i, text,
              cases[i].expected);
        arena_free(&arena);
    }
}

/* --------------------------------------------------------------- negative */

static void test_corrupt(void) {
    Arena arena = {0};
    Schedule good, s;
    schedule_build(&arena, SCHED_1F1B, 2, 4, 1, &good);
    CHECK(schedule_verify(&good, NULL, 0) == 0, "good schedule");

    /* A backward before its forward: swap stage 1's F0 and B0. */
    s = copy_schedule(&arena, &good);
    set_order(&arena, &s, 1, "B0 F0 F1 B1 F2 B2 F3 B3");
    CHECK(rejected_with(&s, "stage 1: B0 at position 0 precedes its forward"), "swap");

    /* A dropped item. */
    s = copy_schedule(&arena, &good);
    s.count[0]--; /* drops the final B3 */
    CHECK(rejected_with(&s, "stage 0: B3 (micro-batch 3 chunk 0) is missing"), "drop");

    /* A duplicated item. */
    s = copy_schedule(&arena, &good);
    set_order(&arena, &s, 0, "F0 F1 B0 F2 B1 F3 B2 B2");
    CHECK(rejected_with(&s, "stage 0: B2 appears twice (positions 6 and 7)"), "duplicate");

    /* Deadlock: stage 0 waits for B0's gradient before it sends F1, but stage 1
     * needs F1 before it runs B0. */
    s = copy_schedule(&arena, &good);
    set_order(&arena, &s, 0, "F0 B0 F1 B1 F2 B2 F3 B3");
    set_order(&arena, &s, 1, "F0 F1 B0 B1 F2 F3 B2 B3");
    s.peak_in_flight[0] = 1;
    s.peak_in_flight[1] = 2;
    s.peak_micro_in_flight[0] = 1;
    s.peak_micro_in_flight[1] = 2;
    CHECK(rejected_with(&s, "deadlock: stage 0 blocks at position 1 (B0) waiting for the output "
                            "gradient of micro-batch 0 chunk 0 from stage 1, which is blocked at "
                            "F1 at position 1"),
          "deadlock");
    CHECK(schedule_simulate(&s, 1, 2, 0, NULL) < 0, "simulate refuses a deadlock");

    /* Out-of-range item. */
    s = copy_schedule(&arena, &good);
    s.items[1][3].chunk = 1;
    CHECK(rejected_with(&s, "stage 1: item 3 names micro-batch 1 chunk 1, out of range"), "range");

    /* Wrong peak. */
    s = copy_schedule(&arena, &good);
    s.peak_in_flight[0] = 1;
    CHECK(rejected_with(&s, "stage 0: peak_in_flight says 1, the order gives 2"), "peak");

    /* An interleaved deadlock across chunks: stage 0 runs F0.1 (needs stage 1's
     * F0.0 output) before F0.0 itself. */
    Schedule inter;
    schedule_build(&arena, SCHED_INTERLEAVED, 2, 2, 2, &inter);
    s = copy_schedule(&arena, &inter);
    WorkItem t = s.items[0][0];
    s.items[0][0] = s.items[0][2];
    s.items[0][2] = t;
    CHECK(s.items[0][0].chunk == 1 && s.items[0][0].micro == 0, "setup: F0.1 first");
    CHECK(rejected_with(&s, "deadlock: stage 0 blocks at position 0 (F0.1) waiting for the input "
                            "activation of micro-batch 0 chunk 1 from stage 1"),
          "interleaved deadlock");

    /* Impossible parameters. */
    CHECK(schedule_build(&arena, SCHED_INTERLEAVED, 4, 6, 2, &s) == -1, "m %% p != 0");
    CHECK(schedule_build(&arena, SCHED_1F1B, 4, 8, 2, &s) == -1, "chunks on 1f1b");
    CHECK(schedule_build(&arena, SCHED_GPIPE, 0, 8, 1, &s) == -1, "no stages");
    CHECK(schedule_build(&arena, SCHED_GPIPE, 2, 0, 1, &s) == -1, "no micro-batches");
    CHECK(schedule_build(&arena, SCHED_INTERLEAVED, 1, INT_MAX, INT_MAX, &s) == -1, "too big");
    CHECK(schedule_build(&arena, SCHED_GPIPE, PARC_MAX_STAGES + 1, 1, 1, &s) == -1, "too many stages");
    s = good;
    s.micro_batches = INT_MAX;
    s.chunks = INT_MAX;
    CHECK(rejected_with(&s, "bad shape"), "verify: huge shape");
    arena_free(&arena);
}

/* ----------------------------------------------------------------- oracle */

/* An independent, deliberately naive model of the communication rules in
 * schedule.h: messages keyed by their SENDER (stage, chunk, micro), stages run
 * round-robin one item at a time until nothing moves.  Returns the makespan, or
 * -1 when a backward precedes its forward or the stages deadlock.  Expects
 * each (micro, chunk) once as F and once as B per stage. */
static double oracle_makespan(Arena *arena, const Schedule *s, double tf, double tb, double tc) {
    int p = s->stages, m = s->micro_batches, v = s->chunks;
    for (int st = 0; st < p; st++)
        for (int i = 0; i < s->count[st]; i++) {
            const WorkItem *b = &s->items[st][i];
            if (b->kind != WORK_BACKWARD) continue;
            int seen = 0;
            for (int j = 0; j < i; j++)
                seen |= s->items[st][j].kind == WORK_FORWARD && s->items[st][j].micro == b->micro &&
                        s->items[st][j].chunk == b->chunk;
            if (!seen) return -1;
        }
    /* sent_at[dir][sender stage][sender chunk][micro]: arrival time, or -1. */
    size_t n = 2 * (size_t)p * v * m;
    double *sent_at = arena_alloc(arena, n * sizeof(double));
    for (size_t i = 0; i < n; i++) sent_at[i] = -1;
    int *pc = arena_alloc(arena, (size_t)p * sizeof(int));
    double *clock = arena_alloc(arena, (size_t)p * sizeof(double));
#define SENT(dir, st, c, mi) sent_at[(((size_t)(dir) * p + (st)) * v + (c)) * m + (mi)]
    for (int moved = 1; moved;) {
        moved = 0;
        for (int st = 0; st < p; st++) {
            if (pc[st] == s->count[st]) continue;
            const WorkItem *it = &s->items[st][pc[st]];
            int c = it->chunk, mi = it->micro;
            double ready = clock[st];
            if (it->kind == WORK_FORWARD && !(st == 0 && c == 0)) {
                /* the previous model chunk sent it */
                double t = st > 0 ? SENT(0, st - 1, c, mi) : SENT(0, p - 1, c - 1, mi);
                if (t < 0) continue;
                if (t > ready) ready = t;
            }
            if (it->kind == WORK_BACKWARD && !(st == p - 1 && c == v - 1)) {
                double t = st < p - 1 ? SENT(1, st + 1, c, mi) : SENT(1, 0, c + 1, mi);
                if (t < 0) continue;
                if (t > ready) ready = t;
            }
            clock[st] = ready + (it->kind == WORK_FORWARD ? tf : tb);
            SENT(it->kind == WORK_FORWARD ? 0 : 1, st, c, mi) = clock[st] + tc;
            pc[st]++;
            moved = 1;
        }
    }
#undef SENT
    double span = 0;
    for (int st = 0; st < p; st++) {
        if (pc[st] != s->count[st]) return -1;
        if (clock[st] > span) span = clock[st];
    }
    return span;
}

/* Recomputes the peaks the naive way so that a perturbed schedule is judged on
 * its order, not on stale peaks. */
static void oracle_peaks(Schedule *s) {
    for (int st = 0; st < s->stages; st++) {
        int live = 0, peak = 0, peak_micro = 0;
        for (int i = 0; i < s->count[st]; i++) {
            live += s->items[st][i].kind == WORK_FORWARD ? 1 : -1;
            if (live > peak) peak = live;
            int micros = 0;
            for (int mi = 0; mi < s->micro_batches; mi++) {
                int open = 0;
                for (int j = 0; j <= i; j++)
                    if (s->items[st][j].micro == mi)
                        open += s->items[st][j].kind == WORK_FORWARD ? 1 : -1;
                micros += open > 0;
            }
            if (micros > peak_micro) peak_micro = micros;
        }
        s->peak_in_flight[st] = peak;
        s->peak_micro_in_flight[st] = peak_micro;
    }
}

/* Built schedules agree with the oracle on makespan (with latency), and
 * randomly perturbed ones agree on sound/unsound and makespan. */
static void test_oracle(void) {
    Arena arena = {0};
    unsigned rng = 12345;
    int sound = 0, unsound = 0;
    for (int kind = SCHED_NONE; kind <= SCHED_INTERLEAVED; kind++) {
        for (int p = 1; p <= 4; p++) {
            for (int m = p; m <= 8; m += p) {
                int v = kind == SCHED_INTERLEAVED ? 1 + m % 3 + 1 : 1;
                Schedule base;
                if (schedule_build(&arena, (SchedKind)kind, p, m, v, &base)) continue;
                double want = oracle_makespan(&arena, &base, 1.0, 2.5, 0.125);
                double got = schedule_simulate(&base, 1.0, 2.5, 0.125, NULL);
                CHECK(want > 0 && close_to(got, want), "%s p=%d m=%d v=%d: simulate %g, oracle %g",
                      schedule_kind_name(base.kind), p, m, v, got, want);
                for (int trial = 0; trial < 40; trial++) {
                    Schedule s = copy_schedule(&arena, &base);
                    int swaps = 1 + trial % 3;
                    for (int k = 0; k < swaps; k++) {
                        rng = rng * 1103515245u + 12345u;
                        int st = (int)((rng >> 8) % (unsigned)p);
                        rng = rng * 1103515245u + 12345u;
                        int a = (int)((rng >> 8) % (unsigned)s.count[st]);
                        int b = trial & 1 ? a + 1 : (int)((rng >> 16) % (unsigned)s.count[st]);
                        if (b >= s.count[st]) b = 0;
                        WorkItem t = s.items[st][a];
                        s.items[st][a] = s.items[st][b];
                        s.items[st][b] = t;
                    }
                    oracle_peaks(&s);
                    char why[512];
                    double oracle = oracle_makespan(&arena, &s, 1.0, 2.5, 0.125);
                    int rc = schedule_verify(&s, why, sizeof(why));
                    CHECK((rc == 0) == (oracle >= 0), "p=%d m=%d v=%d trial %d: verify %d (%s), oracle %g",
                          p, m, v, trial, rc, why, oracle);
                    if (oracle >= 0) {
                        sound++;
                        CHECK(close_to(schedule_simulate(&s, 1.0, 2.5, 0.125, NULL), oracle),
                              "perturbed makespan");
                    } else {
                        unsound++;
                        CHECK(why[0] != '\0', "rejection without a reason");
                    }
                }
            }
        }
    }
    printf("oracle: %d perturbed schedules sound, %d unsound\n", sound, unsound);
    CHECK(sound > 50 && unsound > 50, "perturbations exercise both sides");
    arena_free(&arena);
}

int main(void) {
    test_sweep();
    test_latency();
    test_stage_times();
    test_golden();
    test_corrupt();
    test_oracle();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
