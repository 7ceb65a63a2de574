/*
 * schedule.c — the schedule pass: pipeline schedules, their verifier and
 * simulator.
 *
 * Every schedule here is one skeleton (schedule_stage_order): w warm-up
 * forwards, then (n - w) pairs "next forward, oldest backward", then the w
 * remaining backwards.  A kind only chooses w per stage and how the k-th
 * forward/backward of a stage maps to (micro, chunk).  See schedule.h for the
 * contracts and the communication implied by an order.
 *
 * The verifier and the simulator share one executor (Executor below): stages
 * run their orders with buffered sends and blocking receives; a stage blocked on
 * a receive is woken exactly when that message is sent, so a run costs
 * O(total items + stages).
 */
#include "schedule.h"

#include <stdarg.h>
#include <string.h>

/* Upper bound on items of all stages together (WorkItem is 12 bytes). */
#define SCHEDULE_MAX_ITEMS (1L << 27)

/* Whether p stages of 2 m v items exceed SCHEDULE_MAX_ITEMS (in double: the
 * product of three ints may overflow a long). */
static int schedule_too_big(int p, int m, int v) {
    return 2.0 * m * v * p > (double)SCHEDULE_MAX_ITEMS;
}

const char *schedule_kind_name(SchedKind kind) {
    switch (kind) {
    case SCHED_NONE: return "none";
    case SCHED_GPIPE: return "gpipe";
    case SCHED_1F1B: return "1f1b";
    case SCHED_INTERLEAVED: return "interleaved";
    }
    return "?";
}

/* ------------------------------------------------------------- building */

/* Warm-up forwards on stage s (before the first backward). */
static int schedule_warmup(SchedKind kind, int p, int m, int v, int s) {
    long n = (long)m * v, w = 0;
    switch (kind) {
    case SCHED_NONE: w = 0; break;
    case SCHED_GPIPE: w = m; break;
    case SCHED_1F1B: w = p - s - 1; break;
    case SCHED_INTERLEAVED: w = 2L * (p - s - 1) + (long)(v - 1) * p; break;
    }
    return (int)(w < n ? w : n);
}

/* The k-th forward (backward) item of a stage.  Only the interleaved order
 * renumbers: groups of p micro-batches go through one chunk, then the next. */
static WorkItem schedule_item(SchedKind kind, WorkKind work, int p, int v, int k) {
    WorkItem item = {.kind = (uint8_t)work, .micro = k, .chunk = 0};
    if (kind == SCHED_INTERLEAVED) {
        int chunk = (k / p) % v;
        item.chunk = work == WORK_FORWARD ? chunk : v - 1 - chunk;
        item.micro = (k / (p * v)) * p + k % p;
    }
    return item;
}

static void schedule_stage_order(const Schedule *s, int stage, WorkItem *out) {
    int p = s->stages, v = s->chunks, n = s->micro_batches * s->chunks;
    int w = schedule_warmup(s->kind, p, s->micro_batches, v, stage), at = 0;
    for (int k = 0; k < w; k++) out[at++] = schedule_item(s->kind, WORK_FORWARD, p, v, k);
    for (int k = 0; k < n - w; k++) {
        out[at++] = schedule_item(s->kind, WORK_FORWARD, p, v, w + k);
        out[at++] = schedule_item(s->kind, WORK_BACKWARD, p, v, k);
    }
    for (int k = n - w; k < n; k++) out[at++] = schedule_item(s->kind, WORK_BACKWARD, p, v, k);
}

/* Peaks of one stage's order (definitions in schedule.h).  live_chunks is
 * scratch of m ints.  Items must be in range. */
static void schedule_stage_peaks(const WorkItem *items, int count, int *live_chunks, int m,
                                 int *peak, int *peak_micro) {
    int live = 0, live_micro = 0;
    *peak = *peak_micro = 0;
    memset(live_chunks, 0, (size_t)m * sizeof(*live_chunks));
    for (int i = 0; i < count; i++) {
        int micro = items[i].micro;
        if (items[i].kind == WORK_FORWARD) {
            live++;
            if (live_chunks[micro]++ == 0) live_micro++;
            if (live > *peak) *peak = live;
            if (live_micro > *peak_micro) *peak_micro = live_micro;
        } else {
            live--;
            if (--live_chunks[micro] == 0) live_micro--;
        }
    }
}

int schedule_build(Arena *arena, SchedKind kind, int stages, int micro_batches, int chunks,
                   Schedule *out) {
    int p = stages, m = micro_batches, v = chunks;
    if (p < 1 || m < 1 || v < 1 || p > PARC_MAX_STAGES) return -1;
    if (kind != SCHED_NONE && kind != SCHED_GPIPE && kind != SCHED_1F1B &&
        kind != SCHED_INTERLEAVED)
        return -1;
    if (kind != SCHED_INTERLEAVED && v != 1) return -1;
    if (kind == SCHED_INTERLEAVED && m % p != 0) return -1;
    if (schedule_too_big(p, m, v)) return -1;

    memset(out, 0, sizeof(*out));
    out->kind = kind;
    out->stages = p;
    out->micro_batches = m;
    out->chunks = v;
    out->count = arena_alloc(arena, (size_t)p * sizeof(*out->count));
    out->items = arena_alloc(arena, (size_t)p * sizeof(*out->items));
    out->peak_in_flight = arena_alloc(arena, (size_t)p * sizeof(*out->peak_in_flight));
    out->peak_micro_in_flight = arena_alloc(arena, (size_t)p * sizeof(*out->peak_micro_in_flight));
    int per_stage = 2 * m * v;
    Arena scratch = {0};
    int *live_chunks = arena_alloc(&scratch, (size_t)m * sizeof(*live_chunks));
    for (int s = 0; s < p; s++) {
        out->count[s] = per_stage;
        out->items[s] = arena_alloc(arena, (size_t)per_stage * sizeof(WorkItem));
        schedule_stage_order(out, s, out->items[s]);
        schedule_stage_peaks(out->items[s], per_stage, live_chunks, m, &out->peak_in_flight[s],
                             &out->peak_micro_in_flight[s]);
    }
    arena_free(&scratch);
    return 0;
}

double schedule_bubble_ideal(const Schedule *s) {
    return (double)(s->stages - 1) / ((double)s->chunks * s->micro_batches);
}

/* ------------------------------------------------------------ executing */

enum { MSG_ABSENT, MSG_SENT, MSG_RECEIVED };
enum { DIR_ACTIVATION, DIR_GRADIENT };

/* Runs all stages' orders.  A message is named by its direction and its
 * receiver (stage, chunk, micro); mail[] holds its state and arrival time. */
typedef struct Executor {
    const Schedule *s;
    int p, m, v;
    int *pc;          /* per stage: index of the next item to run */
    int *waiting;     /* per stage: message it is blocked on, or -1 */
    uint8_t *mail;    /* per message: MSG_* */
    double *arrival;  /* per message: time it reaches the receiver */
    double *clock;    /* per stage: when its last item finished */
    double *busy;     /* per stage: total time running items */
    int *ready;       /* stack of stages that may make progress */
    int nready;
    double t_fwd, t_bwd;
    const double *stage_fwd, *stage_bwd; /* [stage * chunks + chunk], where chunks take their own times (NULL: t_fwd, t_bwd) */
    double t_hold;    /* a message holds its sender for t_hold after the item that sends it, and its receiver
                       * for t_hold before the item that takes it in (schedule_simulate_stages) */
    double t_wire;    /* ... and is in flight for t_wire after its sender's hold */
    double *const *start; /* per stage, per item: when it starts (NULL: not kept) */
    char *why;        /* first error, or NULL to stop reporting */
    size_t why_size;
    int failed;
} Executor;

static void executor_fail(Executor *ex, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void executor_fail(Executor *ex, const char *fmt, ...) {
    if (ex->failed++) return;
    if (ex->why && ex->why_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ex->why, ex->why_size, fmt, ap);
        va_end(ap);
    }
}

static int message_index(const Executor *ex, int dir, int stage, int chunk, int micro) {
    return ((dir * ex->p + stage) * ex->v + chunk) * ex->m + micro;
}

/* The receiving stage of a message, and the stage that sends it. */
static int message_receiver(const Executor *ex, int msg) {
    return (msg / ex->m / ex->v) % ex->p;
}

static int message_sender(const Executor *ex, int msg) {
    int to = message_receiver(ex, msg), dir = msg / ex->m / ex->v / ex->p;
    if (dir == DIR_ACTIVATION) return to > 0 ? to - 1 : ex->p - 1;
    return to < ex->p - 1 ? to + 1 : 0;
}

static void message_describe(const Executor *ex, int msg, char *buf, size_t size) {
    int micro = msg % ex->m, chunk = (msg / ex->m) % ex->v, dir = msg / ex->m / ex->v / ex->p;
    snprintf(buf, size, "the %s of micro-batch %d chunk %d from stage %d",
             dir == DIR_ACTIVATION ? "input activation" : "output gradient", micro, chunk,
             message_sender(ex, msg));
}

static void item_name(const Schedule *s, const WorkItem *item, char *buf, size_t size) {
    if (s->chunks > 1)
        snprintf(buf, size, "%c%d.%d", item->kind == WORK_FORWARD ? 'F' : 'B', (int)item->micro,
                 (int)item->chunk);
    else snprintf(buf, size, "%c%d", item->kind == WORK_FORWARD ? 'F' : 'B', (int)item->micro);
}

/* The message item must receive before it runs on `stage`, or -1. */
static int item_needs(const Executor *ex, int stage, const WorkItem *item) {
    if (item->kind == WORK_FORWARD) {
        if (stage == 0 && item->chunk == 0) return -1;
        return message_index(ex, DIR_ACTIVATION, stage, item->chunk, item->micro);
    }
    if (stage == ex->p - 1 && item->chunk == ex->v - 1) return -1;
    return message_index(ex, DIR_GRADIENT, stage, item->chunk, item->micro);
}

/* The message item sends after it runs on `stage`, or -1. */
static int item_sends(const Executor *ex, int stage, const WorkItem *item) {
    int c = item->chunk;
    if (item->kind == WORK_FORWARD) {
        if (stage == ex->p - 1 && c == ex->v - 1) return -1;
        if (stage < ex->p - 1) return message_index(ex, DIR_ACTIVATION, stage + 1, c, item->micro);
        return message_index(ex, DIR_ACTIVATION, 0, c + 1, item->micro);
    }
    if (stage == 0 && c == 0) return -1;
    if (stage > 0) return message_index(ex, DIR_GRADIENT, stage - 1, c, item->micro);
    return message_index(ex, DIR_GRADIENT, ex->p - 1, c - 1, item->micro);
}

/* Runs `stage` until it finishes or blocks on a receive. */
static void executor_run_stage(Executor *ex, int stage) {
    const Schedule *s = ex->s;
    while (ex->pc[stage] < s->count[stage]) {
        const WorkItem *item = &s->items[stage][ex->pc[stage]];
        double start = ex->clock[stage];
        int need = item_needs(ex, stage, item);
        if (need >= 0) {
            if (ex->mail[need] != MSG_SENT) {
                ex->waiting[stage] = need;
                return;
            }
            ex->mail[need] = MSG_RECEIVED;
            if (ex->arrival[need] > start) start = ex->arrival[need];
            start += ex->t_hold; /* taking it in */
        }
        if (ex->start) ex->start[stage][ex->pc[stage]] = start;
        int at = stage * ex->s->chunks + item->chunk;
        double length = item->kind == WORK_FORWARD ? (ex->stage_fwd ? ex->stage_fwd[at] : ex->t_fwd)
                                                   : (ex->stage_bwd ? ex->stage_bwd[at] : ex->t_bwd);
        ex->clock[stage] = start + length;
        ex->busy[stage] += length;
        int sent = item_sends(ex, stage, item);
        if (sent >= 0) {
            if (ex->mail[sent] != MSG_ABSENT) {
                char name[48];
                item_name(s, item, name, sizeof(name));
                executor_fail(ex, "stage %d: %s at position %d sends a message twice", stage,
                              name, ex->pc[stage]);
                return;
            }
            ex->mail[sent] = MSG_SENT;
            ex->clock[stage] += ex->t_hold; /* staging it */
            ex->arrival[sent] = ex->clock[stage] + ex->t_wire;
            int to = message_receiver(ex, sent);
            if (ex->waiting[to] == sent) {
                ex->waiting[to] = -1;
                ex->ready[ex->nready++] = to;
            }
        }
        ex->pc[stage]++;
    }
}

/* Executes a schedule whose items are in range and unique per stage.  Returns
 * 0 when every stage ran to the end and every message was received. */
static int executor_run(Executor *ex, Arena *scratch) {
    const Schedule *s = ex->s;
    int p = s->stages;
    ex->p = p;
    ex->m = s->micro_batches;
    ex->v = s->chunks;
    size_t messages = 2 * (size_t)p * ex->v * ex->m;
    ex->pc = arena_alloc(scratch, (size_t)p * sizeof(int));
    ex->waiting = arena_alloc(scratch, (size_t)p * sizeof(int));
    ex->ready = arena_alloc(scratch, (size_t)p * sizeof(int));
    ex->clock = arena_alloc(scratch, (size_t)p * sizeof(double));
    ex->busy = arena_alloc(scratch, (size_t)p * sizeof(double));
    ex->mail = arena_alloc(scratch, messages);
    ex->arrival = arena_alloc(scratch, messages * sizeof(double));
    for (int st = p - 1; st >= 0; st--) {
        ex->waiting[st] = -1;
        ex->ready[ex->nready++] = st;
    }
    while (ex->nready > 0 && !ex->failed) executor_run_stage(ex, ex->ready[--ex->nready]);
    if (ex->failed) return -1;

    for (int st = 0; st < p; st++) {
        if (ex->pc[st] == s->count[st]) continue;
        char name[48], what[160], other[96];
        item_name(s, &s->items[st][ex->pc[st]], name, sizeof(name));
        message_describe(ex, ex->waiting[st], what, sizeof(what));
        int from = message_sender(ex, ex->waiting[st]);
        if (ex->pc[from] < s->count[from]) {
            char theirs[48];
            item_name(s, &s->items[from][ex->pc[from]], theirs, sizeof(theirs));
            snprintf(other, sizeof(other), "%s at position %d", theirs, ex->pc[from]);
        } else {
            snprintf(other, sizeof(other), "the end of its order");
        }
        executor_fail(ex, "deadlock: stage %d blocks at position %d (%s) waiting for %s, "
                          "which is blocked at %s",
                      st, ex->pc[st], name, what, other);
        return -1;
    }
    for (size_t i = 0; i < messages; i++) {
        if (ex->mail[i] == MSG_SENT) {
            char what[160];
            message_describe(ex, (int)i, what, sizeof(what));
            executor_fail(ex, "%s to stage %d is sent but never received", what,
                          message_receiver(ex, (int)i));
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ verifying */

static int verify_fail(char *why, size_t why_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int verify_fail(char *why, size_t why_size, const char *fmt, ...) {
    if (why && why_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int schedule_verify(const Schedule *s, char *why, size_t why_size) {
    if (why && why_size) why[0] = '\0';
    if (!s) return verify_fail(why, why_size, "no schedule");
    int p = s->stages, m = s->micro_batches, v = s->chunks;
    if (p < 1 || m < 1 || v < 1 || p > PARC_MAX_STAGES || schedule_too_big(p, m, v))
        return verify_fail(why, why_size, "bad shape: stages %d, micro_batches %d, chunks %d", p,
                           m, v);
    if (!s->count || !s->items || !s->peak_in_flight || !s->peak_micro_in_flight)
        return verify_fail(why, why_size, "schedule arrays missing");

    Arena scratch = {0};
    int n = m * v, rc = 0;
    int *forward_at = arena_alloc(&scratch, (size_t)n * sizeof(int));
    int *backward_at = arena_alloc(&scratch, (size_t)n * sizeof(int));
    int *live_chunks = arena_alloc(&scratch, (size_t)m * sizeof(int));

    /* Each stage: items in range, each (micro, chunk) once as F and once as B,
     * B after its F. */
    for (int st = 0; st < p && rc == 0; st++) {
        if (s->count[st] < 0 || (s->count[st] > 0 && !s->items[st])) {
            rc = verify_fail(why, why_size, "stage %d: bad item count %d", st, s->count[st]);
            break;
        }
        for (int i = 0; i < n; i++) forward_at[i] = backward_at[i] = -1;
        for (int i = 0; i < s->count[st] && rc == 0; i++) {
            const WorkItem *item = &s->items[st][i];
            if (item->kind != WORK_FORWARD && item->kind != WORK_BACKWARD) {
                rc = verify_fail(why, why_size, "stage %d: item %d has bad kind %d", st, i,
                                 item->kind);
            } else if (item->micro < 0 || item->micro >= m || item->chunk < 0 ||
                       item->chunk >= v) {
                rc = verify_fail(why, why_size,
                                 "stage %d: item %d names micro-batch %d chunk %d, out of range "
                                 "(%d micro-batches, %d chunks)",
                                 st, i, (int)item->micro, (int)item->chunk, m, v);
            } else {
                int key = item->chunk * m + item->micro;
                int *at = item->kind == WORK_FORWARD ? forward_at : backward_at;
                int twice = at[key] >= 0;
                if (!twice && (item->kind == WORK_FORWARD || forward_at[key] >= 0)) {
                    at[key] = i;
                    continue;
                }
                char name[48];
                item_name(s, item, name, sizeof(name));
                if (twice)
                    rc = verify_fail(why, why_size, "stage %d: %s appears twice (positions %d and %d)",
                                     st, name, at[key], i);
                else
                    rc = verify_fail(why, why_size,
                                     "stage %d: %s at position %d precedes its forward", st, name,
                                     i);
            }
        }
        for (int key = 0; key < n && rc == 0; key++) {
            if (forward_at[key] < 0 || backward_at[key] < 0) {
                WorkItem missing = {.kind = forward_at[key] < 0 ? WORK_FORWARD : WORK_BACKWARD,
                                    .micro = key % m, .chunk = key / m};
                char name[48];
                item_name(s, &missing, name, sizeof(name));
                rc = verify_fail(why, why_size, "stage %d: %s (micro-batch %d chunk %d) is missing",
                                 st, name, (int)missing.micro, (int)missing.chunk);
            }
        }
        if (rc == 0) {
            int peak, peak_micro;
            schedule_stage_peaks(s->items[st], s->count[st], live_chunks, m, &peak, &peak_micro);
            if (peak != s->peak_in_flight[st])
                rc = verify_fail(why, why_size, "stage %d: peak_in_flight says %d, the order gives %d",
                                 st, s->peak_in_flight[st], peak);
            else if (peak_micro != s->peak_micro_in_flight[st])
                rc = verify_fail(why, why_size,
                                 "stage %d: peak_micro_in_flight says %d, the order gives %d", st,
                                 s->peak_micro_in_flight[st], peak_micro);
        }
    }

    /* Run every stage: no deadlock, every send received once. */
    if (rc == 0) {
        Executor ex = {.s = s, .why = why, .why_size = why_size};
        rc = executor_run(&ex, &scratch);
    }
    arena_free(&scratch);
    return rc;
}

/* ----------------------------------------------------------- simulating */

double schedule_simulate(const Schedule *s, double t_fwd, double t_bwd, double t_p2p,
                         double *idle) {
    return schedule_simulate_spans(s, t_fwd, t_bwd, t_p2p, idle, NULL);
}

static double simulate(const Schedule *s, const double *stage_fwd, const double *stage_bwd, double t_fwd,
                       double t_bwd, double t_hold, double t_wire, double *idle, double *const *start) {
    if (schedule_verify(s, NULL, 0) != 0) return -1.0;
    Arena scratch = {0};
    Executor ex = {.s = s, .t_fwd = t_fwd, .t_bwd = t_bwd, .t_hold = t_hold, .t_wire = t_wire,
                   .stage_fwd = stage_fwd, .stage_bwd = stage_bwd, .start = start};
    double makespan = -1.0;
    if (executor_run(&ex, &scratch) == 0) {
        makespan = 0.0;
        for (int st = 0; st < s->stages; st++)
            if (ex.clock[st] > makespan) makespan = ex.clock[st];
        if (idle)
            for (int st = 0; st < s->stages; st++) idle[st] = makespan - ex.busy[st];
    }
    arena_free(&scratch);
    return makespan;
}

double schedule_simulate_spans(const Schedule *s, double t_fwd, double t_bwd, double t_p2p,
                               double *idle, double *const *start) {
    return simulate(s, NULL, NULL, t_fwd, t_bwd, 0, t_p2p, idle, start);
}

double schedule_simulate_stages(const Schedule *s, const double *stage_fwd, const double *stage_bwd, double t_fwd,
                                double t_bwd, double t_hold, double t_wire, double *idle, double *const *start) {
    return simulate(s, stage_fwd, stage_bwd, t_fwd, t_bwd, t_hold, t_wire, idle, start);
}

/* -------------------------------------------------------------- dumping */

void schedule_dump(const Schedule *s, FILE *out) {
    fprintf(out, "schedule %s: stages %d, micro_batches %d, chunks %d\n",
            schedule_kind_name(s->kind), s->stages, s->micro_batches, s->chunks);
    for (int st = 0; st < s->stages; st++) {
        fprintf(out, "stage %d:", st);
        for (int i = 0; i < s->count[st]; i++) {
            char name[48];
            item_name(s, &s->items[st][i], name, sizeof(name));
            fprintf(out, " %s", name);
        }
        fputc('\n', out);
    }
    fputs("peak_in_flight:", out);
    for (int st = 0; st < s->stages; st++) fprintf(out, " %d", s->peak_in_flight[st]);
    fputs("\npeak_micro_in_flight:", out);
    for (int st = 0; st < s->stages; st++) fprintf(out, " %d", s->peak_micro_in_flight[st]);
    fputc('\n', out);
}
