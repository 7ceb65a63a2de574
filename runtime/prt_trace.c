/*
 * prt_trace.c — Chrome trace JSON (chrome://tracing, Perfetto) of one run.
 * Each rank records events in memory: "X" (complete) spans of ops (args.gemm_share
 * where an op times the GEMMs it calls itself: the CPU attention), collectives
 * (bytes and axis in args), pipeline send/recv, steps (args.step) and
 * prt_span_begin/end regions; "B"/"E" spans of each schedule item's work
 * ("F mb3 chunk1", args micro and chunk) above its ops; an "i" marker at each
 * step's start; "s"/"f" flow events joining a pipeline send to its receive; and
 * a "C" counter of the step's phase times (ms, args by phase).  At the end of
 * every step (and at prt_finalize) the ranks' new events are gathered to world
 * rank 0 as JSON fragments, which it appends to one file and flushes, so a
 * killed run keeps the steps it finished: the file is the JSON array form of
 * the trace format, "[" then events, closed by "]" at prt_finalize (a reader of
 * a killed run's file appends the "]", as Chrome's format allows).  pid = world
 * rank (one process per rank, named with its mesh coordinates), tid 0
 * computation and tid 1 communication ("comm" and "p2p"), tid 2 and up the
 * lanes of collectives started to overlap computation (prt_overlap.c), each
 * from its start to the progress test that saw it complete, while the
 * comm_wait that completes it is a "wait" span on tid 0 (its bytes and axis),
 * timestamps in microseconds since the barrier in prt_init.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"

void prt_trace_record(prt *rt, const char *name, const char *category, double start, int64_t bytes, int64_t axis) {
    double end = MPI_Wtime();
    if (rt->nevents == rt->events_cap) {
        rt->events_cap = rt->events_cap ? 2 * rt->events_cap : 4096;
        rt->events = prt_xrealloc(rt->events, (size_t)rt->events_cap * sizeof *rt->events);
    }
    rt->events[rt->nevents++] = (prt_trace_event){.name = name, .category = category,
                                                  .start_us = (start - rt->time_origin) * 1e6,
                                                  .duration_us = (end - start) * 1e6, .bytes = bytes, .axis = axis};
}

/* Appends an event of phase `ph` at time `at` (MPI_Wtime) with no duration. */
static prt_trace_event *add_mark(prt *rt, char ph, const char *name, const char *category, double at) {
    if (rt->nevents == rt->events_cap) {
        rt->events_cap = rt->events_cap ? 2 * rt->events_cap : 4096;
        rt->events = prt_xrealloc(rt->events, (size_t)rt->events_cap * sizeof *rt->events);
    }
    prt_trace_event *e = &rt->events[rt->nevents++];
    *e = (prt_trace_event){.name = name, .category = category, .start_us = (at - rt->time_origin) * 1e6,
                           .bytes = -1, .axis = -1, .ph = ph};
    return e;
}

void prt_work_begin(prt *rt, int64_t kind, int64_t micro, int64_t chunk, int64_t chunks) {
    if (!rt->tracing) return;
    PRT_CHECK(kind == 0 || kind == 1, "prt_work_begin: kind %lld is neither forward (0) nor backward (1)",
              (long long)kind);
    PRT_CHECK(!rt->work_open.ph, "prt_work_begin inside the work of micro-batch %d", (int)rt->work_open.micro);
    PRT_CHECK(micro >= 0 && chunk >= 0 && chunk < chunks && micro <= INT32_MAX && chunks <= INT32_MAX,
              "prt_work_begin: micro-batch %lld, chunk %lld of %lld", (long long)micro, (long long)chunk,
              (long long)chunks);
    /* an evaluation's forwards are not items of the step's schedule */
    prt_trace_event *e = rt->eval_active ? add_mark(rt, 'B', "eval", "eval", MPI_Wtime())
                                         : add_mark(rt, 'B', kind ? "B" : "F", kind ? "backward" : "forward", MPI_Wtime());
    e->micro = (int32_t)micro, e->chunk = (int32_t)chunk, e->chunks = (int32_t)chunks;
    rt->work_open = *e;
}

void prt_work_end(prt *rt) {
    if (!rt->tracing) return;
    PRT_CHECK(rt->work_open.ph == 'B', "prt_work_end without prt_work_begin");
    prt_trace_event *e = add_mark(rt, 'E', rt->work_open.name, rt->work_open.category, MPI_Wtime());
    e->micro = rt->work_open.micro, e->chunk = rt->work_open.chunk, e->chunks = rt->work_open.chunks;
    rt->work_open.ph = 0;
}

void prt_trace_step_begin(prt *rt, int64_t step) {
    if (rt->tracing) add_mark(rt, 'i', "step", "step", rt->step_start)->id = step;
}

void prt_trace_step_end(prt *rt, int64_t step) {
    if (!rt->tracing) return;
    /* from the step's start, an evaluation inside it included: its work spans lie within */
    prt_trace_record(rt, "step", "step", rt->step_began, -1, -1);
    rt->events[rt->nevents - 1].id = step;
    if (rt->phase_log_len + PRT_NPHASES > rt->phase_log_cap) {
        rt->phase_log_cap = rt->phase_log_cap ? 2 * rt->phase_log_cap : 64 * PRT_NPHASES;
        rt->phase_log = prt_xrealloc(rt->phase_log, (size_t)rt->phase_log_cap * sizeof *rt->phase_log);
    }
    for (int k = 0; k < PRT_NPHASES; k++) rt->phase_log[rt->phase_log_len + k] = rt->phase_step[k] * 1e3;
    prt_trace_event *c = add_mark(rt, 'C', "phase ms", "phases", MPI_Wtime());
    c->id = rt->phase_log_len;
    rt->phase_log_len += PRT_NPHASES;
}

/* FNV-1a over the four numbers, cut to 53 bits so that JSON readers holding
 * numbers as doubles keep it exact. */
static int64_t flow_id(int64_t step, int sender, int receiver, int64_t tag) {
    uint64_t h = 1469598103934665603ull;
    int64_t words[4] = {step, sender, receiver, tag};
    const unsigned char *b = (const unsigned char *)words;
    for (size_t i = 0; i < sizeof words; i++) h = (h ^ b[i]) * 1099511628211ull;
    return (int64_t)(h & ((1ull << 53) - 1));
}

void prt_trace_flow(prt *rt, char ph, int sender, int receiver, int64_t tag) {
    if (!rt->tracing) return;
    PRT_CHECK(rt->nevents > 0, "prt_trace_flow without the message's event");
    const prt_trace_event *m = &rt->events[rt->nevents - 1];
    /* when the data left or arrived: just inside the end of the message's span */
    double inset_us = m->duration_us / 2 < 0.01 ? m->duration_us / 2 : 0.01;
    double at = rt->time_origin + (m->start_us + m->duration_us - inset_us) * 1e-6;
    /* an evaluation's messages (outside any step) are told apart by the step
     * after which it runs and its batch */
    int64_t when = rt->eval_active ? -1 - (rt->eval_step + 1) * ((int64_t)1 << 24) - rt->eval_batch : rt->step;
    add_mark(rt, ph, "message", "p2p", at)->id = flow_id(when, sender, receiver, tag);
}

void prt_span_begin(prt *rt, const char *name) {
    if (!rt->tracing) return;
    PRT_CHECK(rt->span_depth < PRT_SPAN_DEPTH, "prt_span_begin: spans nested deeper than %d", PRT_SPAN_DEPTH);
    rt->span_name[rt->span_depth] = name;
    rt->span_start[rt->span_depth] = MPI_Wtime();
    rt->span_depth++;
}

void prt_span_end(prt *rt) {
    if (!rt->tracing) return;
    PRT_CHECK(rt->span_depth > 0, "prt_span_end without prt_span_begin");
    rt->span_depth--;
    prt_trace_record(rt, rt->span_name[rt->span_depth], "span", rt->span_start[rt->span_depth], -1, -1);
}

/* Appends to a growing string. */
typedef struct { char *s; size_t len, cap; } text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        PRT_CHECK(n >= 0, "trace: formatting failed");
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap ? 2 * t->cap + (size_t)n : 65536 + (size_t)n;
        t->s = prt_xrealloc(t->s, t->cap);
    }
}

/* Writes a JSON string literal body (escapes quotes, backslashes, control bytes). */
static void put_escaped(text *t, const char *s) {
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') put(t, "\\%c", c);
        else if (c < 0x20) put(t, "\\u%04x", c);
        else put(t, "%c", c);
    }
}

/* One event as a JSON object (after ",\n" unless it is the fragment's first). */
static void put_event(text *t, prt *rt, const prt_trace_event *e) {
    char ph = e->ph ? e->ph : 'X';
    int comm = !strcmp(e->category, "comm") || !strcmp(e->category, "p2p");
    put(t, t->len ? ",\n{\"name\":\"" : "{\"name\":\"");
    put_escaped(t, e->name ? e->name : "?");
    if (ph == 'B' || ph == 'E') {
        put(t, " mb%d", (int)e->micro);
        if (e->chunks > 1) put(t, " chunk%d", (int)e->chunk);
    } else if (ph == 'i') {
        put(t, " %lld", (long long)e->id);
    }
    put(t, "\",\"cat\":\"%s\",\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f", e->category, ph, rt->world_rank,
        comm ? 1 + e->lane : 0, e->start_us);
    switch (ph) {
    case 'B': put(t, ",\"args\":{\"micro\":%d,\"chunk\":%d}}", (int)e->micro, (int)e->chunk); return;
    case 'E': put(t, "}"); return;
    case 'i': put(t, ",\"s\":\"p\",\"args\":{\"step\":%lld}}", (long long)e->id); return;
    case 's': put(t, ",\"id\":%lld}", (long long)e->id); return;
    case 'f': put(t, ",\"id\":%lld,\"bp\":\"e\"}", (long long)e->id); return;
    case 'C': {
        static const char *const keys[PRT_NPHASES] = {"forward", "backward", "exposed_communication", "bubble",
                                                      "optimizer"};
        put(t, ",\"args\":{");
        for (int k = 0; k < PRT_NPHASES; k++) put(t, "%s\"%s\":%.6f", k ? "," : "", keys[k], rt->phase_log[e->id + k]);
        put(t, "}}");
        return;
    }
    default: break;
    }
    put(t, ",\"dur\":%.3f", e->duration_us);
    int step = !strcmp(e->category, "step");
    if (e->gemm_share > 0) {
        put(t, ",\"args\":{\"gemm_share\":%.4f}}", (double)e->gemm_share);
        return;
    }
    if (e->bytes >= 0 || e->axis >= 0 || step) {
        put(t, ",\"args\":{");
        if (step) put(t, "\"step\":%lld%s", (long long)e->id, e->bytes >= 0 || e->axis >= 0 ? "," : "");
        if (e->bytes >= 0) put(t, "\"bytes\":%lld%s", (long long)e->bytes, e->axis >= 0 ? "," : "");
        if (e->axis >= 0) {
            put(t, "\"axis\":\"");
            put_escaped(t, e->axis < rt->ncomms && rt->plan.axis_names[e->axis] ? rt->plan.axis_names[e->axis] : "?");
            put(t, "\"");
        }
        put(t, "}");
    }
    put(t, "}");
}

/* This rank's metadata events (once, in its first fragment) and the events
 * recorded since the last flush, as ",\n"-joined JSON objects. */
static void format_events(prt *rt, text *t) {
    int r = rt->world_rank;
    if (!rt->trace_meta_done) {
        put(t, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d", r, r);
        for (int a = 0; a < rt->naxes; a++) {
            put(t, a ? " " : " (");
            put_escaped(t, rt->plan.axis_names[a] ? rt->plan.axis_names[a] : "?");
            put(t, "=%d%s", rt->coord[a], a == rt->naxes - 1 ? ")" : "");
        }
        put(t, "\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
            r, r);
        for (int tid = 0; tid < 2; tid++)
            put(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}},"
                   "\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                r, tid, tid ? "communication" : "compute", r, tid, tid);
        rt->trace_meta_done = 1;
    }
    for (; rt->trace_lanes_named < rt->trace_lanes; rt->trace_lanes_named++) /* started collectives' lanes */
        put(t, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"communication "
               "in flight %d\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":"
               "{\"sort_index\":%d}}",
            t->len ? ",\n" : "", r, rt->trace_lanes_named + 2, rt->trace_lanes_named + 1, r,
            rt->trace_lanes_named + 2, rt->trace_lanes_named + 2);
    for (int64_t i = 0; i < rt->nevents; i++) put_event(t, rt, &rt->events[i]);
    rt->nevents = 0;
}

/* Rank 0: a failed write of the trace ends the job (exit 1), naming the file. */
static void trace_write_failed(prt *rt, int err) {
    prt_user_fail(1, "--trace %s: cannot write the trace: %s", rt->trace_path, strerror(err ? err : errno));
}

/* Gathers and appends the events since the last flush; `what` names the wait. */
static void trace_flush(prt *rt, const char *what) {
    text t = {0};
    int r = rt->world_rank;
    format_events(rt, &t);
    PRT_CHECK(t.len <= (size_t)1 << 30, "trace: rank %d has %zu bytes of events, too many to gather", r, t.len);
    int len = (int)t.len, *lens = NULL, *displs = NULL;
    char *all = NULL;
    if (r == 0) {
        lens = prt_xcalloc((size_t)rt->world_size, sizeof(int));
        displs = prt_xcalloc((size_t)rt->world_size, sizeof(int));
    }
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Igather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, what, -1);
    if (r == 0) {
        long long total = 0;
        for (int i = 0; i < rt->world_size; i++) {
            PRT_CHECK(total <= (1ll << 31) - 1 - lens[i], "trace: too large to gather (> 2 GiB)");
            displs[i] = (int)total;
            total += lens[i];
        }
        all = prt_xmalloc((size_t)total + 1);
    }
    PRT_MPI_CHECK(MPI_Igatherv(t.s, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, what, -1);
    if (r == 0) {
        /* the file is a JSON array written as the run goes: "[" first, then each
         * rank's fragment after ",\n"; a killed run leaves it without its
         * closing "]", which Chrome's trace format allows */
        FILE *f = rt->trace_file;  /* opened at prt_init, so a bad path failed before training */
        errno = 0;
        int ok = rt->trace_bytes != 0 || fputs("[\n", f) >= 0;
        if (!rt->trace_bytes) rt->trace_bytes = -1;
        for (int i = 0; ok && i < rt->world_size; i++) {
            if (!lens[i]) continue;
            ok = (rt->trace_bytes < 0 || fputs(",\n", f) >= 0) &&
                 fwrite(all + displs[i], 1, (size_t)lens[i], f) == (size_t)lens[i];
            rt->trace_bytes = (rt->trace_bytes < 0 ? 0 : rt->trace_bytes) + lens[i];
        }
        if (!ok || fflush(f) != 0) trace_write_failed(rt, errno);
    }
    free(all);
    free(lens);
    free(displs);
    free(t.s);
}

void prt_trace_flush(prt *rt) { trace_flush(rt, "the trace gather at the step's end"); }

void prt_trace_write(prt *rt) {
    trace_flush(rt, "the trace gather (shutdown)");
    if (rt->world_rank == 0) {
        FILE *f = rt->trace_file;
        errno = 0;
        int ok = fputs("\n]\n", f) >= 0;
        ok = fflush(f) == 0 && ok;
        int err = errno;
        ok = fclose(f) == 0 && ok;
        rt->trace_file = NULL;
        if (!ok) trace_write_failed(rt, err);
        if (!rt->quiet) printf("parc: trace of %d ranks written to %s\n", rt->world_size, rt->trace_path);
    }
}
