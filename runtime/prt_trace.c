/*
 * prt_trace.c — Chrome trace JSON (chrome://tracing, Perfetto) of one run.
 * Each rank records "X" (complete) events in memory: ops, collectives (bytes and
 * axis in args), pipeline send/recv, steps and prt_span_begin/end regions.  At
 * the end of every step (and at prt_finalize) the ranks' new events are gathered
 * to world rank 0 as JSON fragments, which it appends to one file and flushes,
 * so a killed run keeps the steps it finished: the file is the JSON array form
 * of the trace format, "[" then events, closed by "]" at prt_finalize (a reader
 * of a killed run's file appends the "]", as Chrome's format allows).  pid =
 * world rank (one track per rank, named with its mesh coordinates), tid 0,
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
    rt->events[rt->nevents++] = (prt_trace_event){name, category, (start - rt->time_origin) * 1e6,
                                                  (end - start) * 1e6, bytes, axis};
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
        rt->trace_meta_done = 1;
    }
    for (int64_t i = 0; i < rt->nevents; i++) {
        const prt_trace_event *e = &rt->events[i];
        put(t, t->len ? ",\n{\"name\":\"" : "{\"name\":\"");
        put_escaped(t, e->name ? e->name : "?");
        put(t, "\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f", e->category, r,
            e->start_us, e->duration_us);
        if (e->bytes >= 0 || e->axis >= 0) {
            put(t, ",\"args\":{");
            if (e->bytes >= 0) put(t, "\"bytes\":%lld%s", (long long)e->bytes, e->axis >= 0 ? "," : "");
            if (e->axis >= 0) {
                put(t, "\"axis\":\"");
                put_escaped(t,
                            e->axis < rt->naxes && rt->plan.axis_names[e->axis] ? rt->plan.axis_names[e->axis] : "?");
                put(t, "\"");
            }
            put(t, "}");
        }
        put(t, "}");
    }
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
