/*
 * prt_failure.c — failure handling: runtime errors (prt_fail, with the runtime
 * source location, for broken tables and calls) and user errors (prt_user_fail:
 * bad input and outputs, without it), checked allocation, and the watchdog.
 *
 * The watchdog has two parts.  Every MPI wait of the runtime is a nonblocking
 * call completed by prt_wait, which polls it; past the timeout the waiting ranks
 * query each other over a private duplicate of the world communicator (each
 * polling rank answers with what it waits in), so the report names the ranks
 * that never answered: stopped (SIGSTOP), hung in computation, or dead.  Calls
 * that cannot be polled (communicator splits, device synchronisation) are
 * bracketed by prt_block_begin/end and watched by a thread that ends the process
 * past the timeout.  Where the job spans hosts, the report names each rank's
 * host, and a host none of whose ranks answered once, with its ranks.
 *
 * A rank that ends the job (an error, the watchdog's report) first appends
 * `RANK HOST` to PRT_FAILURE_FILE when it is set: the launcher then knows the
 * job is ending, and stops an mpirun that cannot reach a lost host's daemon.
 * With it set, the watchdog's two reports (the waiting ranks' and a blocked
 * call's) are printed by the rank that creates the file alone, so a job that
 * fails is explained once; with PRT_LAUNCH_HOST set too (the host mpirun runs
 * on), only a rank on that host may, where the job has ranks there: when the
 * network splits, each side sees the other as lost, and the side that still
 * reaches the launcher is the one whose view holds.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prt_internal.h"

/* The one context of this process: errors and the watchdog report its rank and host. */
static prt *g_rt;
static int g_rank = -1;
static char g_host[MPI_MAX_PROCESSOR_NAME] = "?";

void prt_failure_context(prt *rt) {
    g_rt = rt;
    g_rank = rt ? rt->world_rank : -1;
    if (rt) snprintf(g_host, sizeof g_host, "%s", rt->host);
}

/* ---------------------------------------------------------------- errors */

/* Whether this rank may print a watchdog report: PRT_LAUNCH_HOST is not set,
 * or this rank is on it, or no rank of the job is. */
static int may_report(void) {
    const char *launcher = getenv("PRT_LAUNCH_HOST");
    prt *rt = g_rt;
    if (!launcher || !*launcher || !rt || !rt->host_of || !strcmp(g_host, launcher)) return 1;
    for (int h = 0; h < rt->nhosts; h++)
        if (!strcmp(rt->host_names + (size_t)h * sizeof rt->host, launcher)) return 0;
    return 1;
}

/* Appends to PRT_FAILURE_FILE, when it is set (no allocation: the watchdog
 * thread calls it too): `text` (a message's lines), or, when `exclusive` and
 * this is not the job's first report, the note `RANK HOST` alone.  The first
 * report is the one that creates PRT_FAILURE_FILE.report, where may_report
 * allows.  Returns whether `text` is the job's first report (always, without
 * the variable). */
static int note_failure(const char *text, int exclusive) {
    const char *path = getenv("PRT_FAILURE_FILE");
    if (!path || !*path) return 1;
    int first = !exclusive;
    if (exclusive && may_report()) {
        char gate[4096];
        snprintf(gate, sizeof gate, "%s.report", path);
        int fd = open(gate, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        first = fd >= 0;
        if (fd >= 0) close(fd);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return first;
    char note[MPI_MAX_PROCESSOR_NAME + 32];
    int n = snprintf(note, sizeof note, "%d %s\n", g_rank, g_host);
    if (!first || !text) text = note;
    size_t len = text == note ? (size_t)(n > 0 ? n : 0) : strlen(text);
    if (write(fd, text, len) < 0) { /* the launcher then waits for mpirun as before */ }
    close(fd);
    return first;
}

/* A report composed in memory (open_memstream), then printed on stderr when
 * it is the job's first (note_failure), which also keeps it in
 * PRT_FAILURE_FILE: the launcher prints it from there when this rank's stderr
 * cannot reach it (a lost host's). */
typedef struct report {
    char *text;
    size_t len;
    FILE *out;
} report;

static FILE *report_begin(report *r) {
    r->text = NULL, r->len = 0;
    r->out = open_memstream(&r->text, &r->len);
    return r->out ? r->out : stderr;
}

static void report_end(report *r) {
    if (!r->out) { /* no memory: it went to stderr as it was written */
        (void)note_failure(NULL, 0);
        return;
    }
    fclose(r->out);
    if (note_failure(r->text, 1)) fputs(r->text, stderr);
    fflush(stderr);
    free(r->text);
}

static int mpi_is_running(void) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

void prt_fail(const char *file, int line, const char *fmt, ...) {
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    char text[1400];
    snprintf(text, sizeof text, "parc: rank %d (%s): %s:%d: error: %s\n", g_rank, g_host, file, line, message);
    fputs(text, stderr);
    fflush(stderr);
    (void)note_failure(text, 0);
    if (mpi_is_running()) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void prt_user_fail(int status, const char *fmt, ...) {
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    fflush(stdout);
    char text[2100];
    snprintf(text, sizeof text, "parc: error: %s\n", message);
    fputs(text, stderr);
    fflush(stderr);
    (void)note_failure(text, 0);
    if (mpi_is_running()) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

void prt_mpi_fail(const char *file, int line, const char *call, int err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", err);
    prt_fail(file, line, "MPI call failed: %s: %s", call, text);
}

void *prt_xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    PRT_CHECK(p, "out of memory allocating %zu bytes", bytes);
    return p;
}
void *prt_xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    PRT_CHECK(p, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}
void *prt_xrealloc(void *ptr, size_t bytes) {
    void *p = realloc(ptr, bytes ? bytes : 1);
    PRT_CHECK(p, "out of memory reallocating %zu bytes", bytes);
    return p;
}

/* ---------------------------------------------------------------- the watchdog thread */

static struct {
    pthread_t thread;
    int running;
    atomic_int stop;
    atomic_llong blocked_since_ms;   /* 0: not inside a blocking call */
    _Atomic(const char *) what;
    atomic_llong axis;
    long long timeout_ms;
} g_watch;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void prt_block_begin(const char *what, int64_t axis) {
    atomic_store(&g_watch.what, what);
    atomic_store(&g_watch.axis, (long long)axis);
    atomic_store(&g_watch.blocked_since_ms, now_ms());
}
void prt_block_end(void) { atomic_store(&g_watch.blocked_since_ms, 0); }

static const char *axis_name(prt *rt, long long axis) {
    if (rt && axis >= 0 && axis < rt->ncomms && rt->plan.axis_names[axis]) return rt->plan.axis_names[axis];
    return "world";
}

static void rank_label(prt *rt, int rank, char *out, size_t size);
static int same_group(prt *rt, int a, int b, int64_t axis);

/* The watchdog thread's report of a blocked call: where the job spans hosts,
 * it names the ranks of the call's group on other hosts, the likely cause. */
static void report_blocked(FILE *out, const char *what, long long axis) {
    prt *rt = g_rt;
    int others = 0;
    for (int r = 0; rt && rt->nhosts > 1 && r < rt->world_size; r++)
        others += r != g_rank && rt->host_of[r] != rt->host_of[g_rank] && same_group(rt, r, g_rank, axis);
    if (!others) {
        fprintf(out,
                "parc: rank %d (%s): error: %s on axis %s blocked for more than %lld s "
                "(--timeout): a peer rank probably died or hangs; aborting this rank\n",
                g_rank, g_host, what, axis_name(rt, axis), g_watch.timeout_ms / 1000);
        return;
    }
    char label[160];
    rank_label(rt, g_rank, label, sizeof label);
    fprintf(out, "parc: error: %s on %s blocked in %s on %s for more than %lld s (--timeout) with", label, g_host,
            what, axis_name(rt, axis), g_watch.timeout_ms / 1000);
    for (int r = 0, k = 0; r < rt->world_size; r++) {
        if (r == g_rank || rt->host_of[r] == rt->host_of[g_rank] || !same_group(rt, r, g_rank, axis)) continue;
        rank_label(rt, r, label, sizeof label);
        fprintf(out, "%s %s on %s", k++ ? "," : "", label, prt_host_of(rt, r));
    }
    fprintf(out, ": %s, %s host or the network link to it is down or hung; the job stops\n",
            others > 1 ? "those ranks" : "that rank", others > 1 ? "their" : "its");
}

static void *watchdog_main(void *arg) {
    (void)arg;
    while (!atomic_load(&g_watch.stop)) {
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
        long long since = atomic_load(&g_watch.blocked_since_ms);
        if (since && now_ms() - since > g_watch.timeout_ms) {
            report r;
            report_blocked(report_begin(&r), atomic_load(&g_watch.what), atomic_load(&g_watch.axis));
            report_end(&r);
            /* No MPI from this thread: exiting without MPI_Finalize makes mpirun end the job. */
            _exit(1);
        }
    }
    return NULL;
}

void prt_watchdog_start(prt *rt) {
    if (rt->timeout <= 0 || g_watch.running) return;
    g_watch.timeout_ms = (long long)(rt->timeout * 1000.0);
    atomic_store(&g_watch.stop, 0);
    atomic_store(&g_watch.blocked_since_ms, 0);
    PRT_CHECK(pthread_create(&g_watch.thread, NULL, watchdog_main, NULL) == 0, "cannot start the watchdog thread");
    g_watch.running = 1;
}

void prt_watchdog_stop(void) {
    if (!g_watch.running) return;
    atomic_store(&g_watch.stop, 1);
    pthread_join(g_watch.thread, NULL);
    g_watch.running = 0;
}

/* ---------------------------------------------------------------- watched waits */

enum { TAG_QUERY = 1, TAG_REPLY = 2 };

/* Where a rank waits, as it answers a query. */
typedef struct wait_report {
    int64_t step, axis;
    char what[56];
} wait_report;

static wait_report my_report(prt *rt) {
    wait_report r;
    memset(&r, 0, sizeof r);
    r.step = rt->step;
    r.axis = rt->wait_axis;
    snprintf(r.what, sizeof r.what, "%s", rt->wait_what ? rt->wait_what : "?");
    return r;
}

static void nap_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Answers every pending query with this rank's report. */
static void answer_queries(prt *rt) {
    for (;;) {
        int flag = 0, query = 0;
        MPI_Status st;
        PRT_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, TAG_QUERY, rt->watch_comm, &flag, &st));
        if (!flag) return;
        PRT_MPI_CHECK(MPI_Recv(&query, 1, MPI_INT, st.MPI_SOURCE, TAG_QUERY, rt->watch_comm, MPI_STATUS_IGNORE));
        wait_report r = my_report(rt);
        PRT_MPI_CHECK(MPI_Send(&r, (int)sizeof r, MPI_BYTE, st.MPI_SOURCE, TAG_REPLY, rt->watch_comm));
    }
}

/* "rank R (dp 1, tp 0)": world rank R's mesh coordinates, last axis fastest. */
static void rank_label(prt *rt, int rank, char *out, size_t size) {
    int coord[PRT_MAX_AXES], rest = rank;
    for (int a = rt->naxes - 1; a >= 0; a--) {
        coord[a] = rest % rt->axis_size[a];
        rest /= rt->axis_size[a];
    }
    int n = snprintf(out, size, "rank %d", rank);
    for (int a = 0; a < rt->naxes && n > 0 && (size_t)n < size; a++)
        n += snprintf(out + n, size - (size_t)n, "%s%s %d%s", a ? ", " : " (", axis_name(rt, a), coord[a],
                      a == rt->naxes - 1 ? ")" : "");
}

/* Whether ranks a and b share the group of `axis` (equal coordinates elsewhere). */
static int same_group(prt *rt, int a, int b, int64_t axis) {
    if (axis < 0) return 1;
    for (int k = rt->naxes - 1; k >= 0; k--) {
        if (k != axis && a % rt->axis_size[k] != b % rt->axis_size[k]) return 0;
        a /= rt->axis_size[k];
        b /= rt->axis_size[k];
    }
    return 1;
}

/* " on HOST" for rank r where the job spans hosts, else "". */
static const char *on_host(prt *rt, int r, char *out, size_t size) {
    if (rt->nhosts <= 1) return "";
    snprintf(out, size, " on %s", prt_host_of(rt, r));
    return out;
}

/* "all-reduce on tp", or "the trace gather (shutdown)" for a wait on the world. */
static void wait_label(prt *rt, const wait_report *r, char *out, size_t size) {
    if (r->axis >= 0) snprintf(out, size, "%s on %s", r->what, axis_name(rt, r->axis));
    else snprintf(out, size, "%s", r->what);
}

/* A waiting rank of m's group on the axis it waits on, or -1. */
static int waiter_of(prt *rt, const char *heard, const wait_report *reports, int m) {
    for (int r = 0; r < rt->world_size; r++)
        if (heard[r] && same_group(rt, r, m, reports[r].axis)) return r;
    return -1;
}

/* Whether none of the ranks on m's host answered (the job spanning hosts). */
static int host_silent(prt *rt, const char *heard, int m) {
    if (rt->nhosts <= 1 || !rt->host_of) return 0;
    for (int r = 0; r < rt->world_size; r++)
        if (heard[r] && rt->host_of[r] == rt->host_of[m]) return 0;
    return 1;
}

/* One line for a host none of whose ranks answered, led by its lowest rank m. */
static void print_silent_host(FILE *out, prt *rt, const char *heard, const wait_report *reports, int m) {
    char label[160], peer[160], wait[128], step[32], at[300];
    fprintf(out, "parc: error: host %s does not answer: none of its ranks", prt_host_of(rt, m));
    for (int r = m, k = 0; r < rt->world_size; r++) {
        if (rt->host_of[r] != rt->host_of[m]) continue;
        rank_label(rt, r, label, sizeof label);
        fprintf(out, "%s %s", k++ ? "," : "", label + 5); /* without the word "rank" */
    }
    int waiter = waiter_of(rt, heard, reports, m);
    if (waiter >= 0) {
        rank_label(rt, waiter, peer, sizeof peer);
        wait_label(rt, &reports[waiter], wait, sizeof wait);
        snprintf(step, sizeof step, "step %lld; ", (long long)reports[waiter].step);
        fprintf(out, " reached %s within %.0f s (%s%s%s waits for them)", wait, rt->timeout,
                reports[waiter].step >= 0 ? step : "", peer, on_host(rt, waiter, at, sizeof at));
    } else {
        fprintf(out, " arrived within %.0f s", rt->timeout);
    }
    fprintf(out, ": the host, its network link or every process on it is down\n");
}

static void print_report(prt *rt, const char *heard, const wait_report *reports) {
    report rep;
    FILE *out = report_begin(&rep);
    char label[160], peer[160], wait[128], step[32], at[300], peer_at[300];
    int missing = 0, silent_hosts = 0;
    for (int m = 0; m < rt->world_size; m++) silent_hosts += !heard[m] && host_silent(rt, heard, m);
    for (int m = 0; m < rt->world_size; m++) {
        if (heard[m]) continue;
        missing++;
        if (host_silent(rt, heard, m)) {
            int first = 1; /* the host's line, once, at its lowest rank */
            for (int r = 0; r < m && first; r++) first = rt->host_of[r] != rt->host_of[m];
            if (first) print_silent_host(out, rt, heard, reports, m);
            continue;
        }
        rank_label(rt, m, label, sizeof label);
        if (silent_hosts) { /* most likely inside a blocking call with a rank of the silent host */
            fprintf(out, "parc:   %s%s did not answer either (blocked in a call with a rank of a host that does "
                         "not answer, or hung)\n", label, on_host(rt, m, at, sizeof at));
            continue;
        }
        int waiter = waiter_of(rt, heard, reports, m); /* a waiting rank of m's group on its axis */
        if (waiter < 0) {
            fprintf(out, "parc: error: %s%s did not arrive within %.0f s (stopped, hung or dead)\n", label,
                    on_host(rt, m, at, sizeof at), rt->timeout);
            continue;
        }
        rank_label(rt, waiter, peer, sizeof peer);
        wait_label(rt, &reports[waiter], wait, sizeof wait);
        snprintf(step, sizeof step, "step %lld; ", (long long)reports[waiter].step);
        fprintf(out, "parc: error: %s%s did not reach %s within %.0f s (%s%s%s waits for it)\n", label,
                on_host(rt, m, at, sizeof at), wait, rt->timeout, reports[waiter].step >= 0 ? step : "", peer,
                on_host(rt, waiter, peer_at, sizeof peer_at));
    }
    if (!missing)
        fprintf(out, "parc: error: every rank has waited for more than %.0f s: the ranks wait in collectives "
                     "that do not match (a deadlock)\n", rt->timeout);
    for (int r = 0; r < rt->world_size; r++) {
        if (!heard[r]) continue;
        rank_label(rt, r, label, sizeof label);
        wait_label(rt, &reports[r], wait, sizeof wait);
        snprintf(step, sizeof step, " (step %lld)", (long long)reports[r].step);
        fprintf(out, "parc:   %s%s waits in %s%s\n", label, on_host(rt, r, at, sizeof at), wait,
                reports[r].step >= 0 ? step : "");
    }
    report_end(&rep);
}

/* Past the timeout: asks every rank where it waits, for a grace period; the
 * lowest rank that answered reports and ends the job.  Returns when the
 * request completed meanwhile (a slow peer, not a hang). */
static void diagnose(prt *rt, MPI_Request *request, MPI_Status *status) {
    static int query = 1;
    int me = rt->world_rank, n = rt->world_size, done = 0;
    char *heard = prt_xcalloc((size_t)n, 1);
    wait_report *reports = prt_xcalloc((size_t)n, sizeof *reports);
    heard[me] = 1;
    reports[me] = my_report(rt);
    for (int r = 0; r < n; r++) {
        if (r == me) continue;
        MPI_Request q;
        PRT_MPI_CHECK(MPI_Isend(&query, 1, MPI_INT, r, TAG_QUERY, rt->watch_comm, &q));
        PRT_MPI_CHECK(MPI_Request_free(&q));
    }
    double grace = rt->timeout / 4 < 0.5 ? 0.5 : rt->timeout / 4 > 5.0 ? 5.0 : rt->timeout / 4;
    double t0 = MPI_Wtime();
    int answered = 1;
    while (MPI_Wtime() - t0 < grace && answered < n && !done) {
        answer_queries(rt);
        int flag = 0;
        MPI_Status st;
        PRT_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, TAG_REPLY, rt->watch_comm, &flag, &st));
        if (flag) {
            wait_report r;
            PRT_MPI_CHECK(MPI_Recv(&r, (int)sizeof r, MPI_BYTE, st.MPI_SOURCE, TAG_REPLY, rt->watch_comm,
                                   MPI_STATUS_IGNORE));
            r.what[sizeof r.what - 1] = 0;
            if (!heard[st.MPI_SOURCE]) answered++;
            heard[st.MPI_SOURCE] = 1;
            reports[st.MPI_SOURCE] = r;
            continue;
        }
        PRT_MPI_CHECK(MPI_Test(request, &done, status));
        nap_us(1000);
    }
    int lowest = 0;
    while (!heard[lowest]) lowest++;
    if (!done && lowest == me) {
        print_report(rt, heard, reports);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Another rank reports: it was waiting when it answered, so its own timeout
     * comes within one more period; keep answering until it ends the job. */
    double until = MPI_Wtime() + rt->timeout + 2 * grace + 2.0;
    while (!done && MPI_Wtime() < until) {
        answer_queries(rt);
        PRT_MPI_CHECK(MPI_Test(request, &done, status));
        nap_us(1000);
    }
    if (!done) {
        print_report(rt, heard, reports);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    free(heard);
    free(reports);
}

void prt_wait(prt *rt, MPI_Request *request, MPI_Status *status, const char *what, int64_t axis) {
    MPI_Status ignored;
    MPI_Status *st = status ? status : &ignored;
    int done = 0;
    PRT_MPI_CHECK(MPI_Test(request, &done, st));
    if (done) return;
    const char *outer_what = rt->wait_what;
    int64_t outer_axis = rt->wait_axis;
    rt->wait_what = what;
    rt->wait_axis = axis;
    double start = MPI_Wtime();
    for (long spins = 0; !done; spins++) {
        PRT_MPI_CHECK(MPI_Test(request, &done, st));
        if (done || spins < 2000) continue;  /* a short wait spins, as MPI's own waits do */
        answer_queries(rt);
        if (rt->timeout > 0 && MPI_Wtime() - start > rt->timeout) {
            diagnose(rt, request, st);
            done = 1;  /* diagnose returns only once the request completed */
            break;
        }
        nap_us(spins < 20000 ? 20 : 200);
    }
    rt->wait_what = outer_what;
    rt->wait_axis = outer_axis;
}

void prt_watched_barrier(prt *rt, const char *what) {
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, what, -1);
}
