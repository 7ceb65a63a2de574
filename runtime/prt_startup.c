/*
 * prt_startup.c — where a program's start-up goes, and its resident memory
 * against the ledger: the metrics log's summary record (docs/json.md) and,
 * with --memory, one line at the end.
 *
 * Marks (CLOCK_MONOTONIC, seconds): the process's creation (from
 * /proc/self/stat, so a restart by prt_blas_select for OPENBLAS_CORETYPE, same
 * pid, is inside the first interval), prt_init's entry (of the image that
 * runs), MPI_Init done, prt_init done (options, mesh, data checked and
 * mapped, backend), the buffers registered (allocated and their initial
 * values drawn) and the first step's beginning.  Linux only where /proc is;
 * elsewhere the first interval reads 0.
 *
 * The start-up phases (PRT_STARTUP_PHASES): the label of each one's wait, and
 * the test hook PRT_TEST_STOP that stops a rank as it reaches one.
 */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "prt_internal.h"

double prt_monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds since this process was created (0 when /proc cannot say). */
static double process_age(void) {
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return 0;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long start = 0;
    /* after ")": state (field 3) ... starttime is field 22 */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                     &start) != 1)
        return 0;
    struct timespec up;
    if (clock_gettime(CLOCK_BOOTTIME, &up) != 0) return 0;
    long hz = sysconf(_SC_CLK_TCK);
    double age = (double)up.tv_sec + (double)up.tv_nsec * 1e-9 - (double)start / (double)(hz > 0 ? hz : 100);
    return age > 0 ? age : 0;
}

void prt_startup_mark(prt *rt, int mark) {
    if (mark < 0 || mark >= PRT_START_NMARKS || rt->start_mark[mark] > 0) return;
    rt->start_mark[mark] = prt_monotonic();
}

void prt_startup_begin(double *created, double *entry) {
    *entry = prt_monotonic();
    *created = *entry - process_age();
}

void prt_allocator_settings(void) {
    /* Fixed thresholds switch off glibc's sliding ones: a block up to
     * PRT_MMAP_THRESHOLD comes from the heap, and freed heap memory stays
     * mapped up to PRT_TRIM_THRESHOLD, so a temporary that MPI or a kernel
     * mallocs and frees every call (a ring reduce-scatter's scratch blocks,
     * Open MPI's own collectives' temporaries) reuses pages already touched
     * instead of faulting fresh ones. */
    mallopt(M_MMAP_THRESHOLD, PRT_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, PRT_TRIM_THRESHOLD);
}

int64_t prt_minor_faults(void) {
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? (int64_t)u.ru_minflt : -1;
}

/* VmHWM of /proc/self/status in bytes, -1 when unknown. */
int64_t prt_resident_peak(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

void prt_startup_intervals(const prt *rt, double *ms, double *total) {
    const double *m = rt->start_mark;
    for (int k = 0; k + 1 < PRT_START_NMARKS; k++) ms[k] = m[k + 1] > 0 && m[k] > 0 ? (m[k + 1] - m[k]) * 1e3 : 0;
    *total = m[PRT_START_FIRST_STEP] > 0 ? (m[PRT_START_FIRST_STEP] - m[PRT_START_CREATED]) * 1e3 : 0;
}

void prt_startup_report(prt *rt) {
    if (rt->world_rank != 0 || !rt->memory_report) return;
    double ms[PRT_START_NMARKS - 1], total;
    prt_startup_intervals(rt, ms, &total);
    int64_t peak = prt_resident_peak(), ledger = 0;
    for (int c = 0; c < PRT_NCLASS; c++) ledger += rt->expected[c];
    printf("parc: start-up %.0f ms to the first step (process creation to prt_init %.0f, MPI_Init %.0f, "
           "options, mesh, data and backend %.0f, buffers and initial values %.0f, then %.0f)\n",
           total, ms[0], ms[1], ms[2], ms[3], ms[4]);
    if (peak >= 0 && rt->have_expected)
        printf("parc: rank 0 resident peak (VmHWM) %.1f MiB, ledger %.1f MiB: %+.1f MiB\n", (double)peak / 1048576.0,
               (double)ledger / 1048576.0, (double)(peak - ledger) / 1048576.0);
    fflush(stdout);
}

/* ---------------------------------------------------------------- start-up phases */

static const struct {
    const char *name, *wait;
} startup_phases[PRT_STARTUP_NPHASES] = {
#define X(id, name, wait) {name, wait},
    PRT_STARTUP_PHASES(X)
#undef X
};

/* The phase PRT_TEST_STOP names for this rank, -1 for none (unset, another
 * rank's); a value that is not RANK:PHASE is a runtime error listing the phases. */
static int phase_to_stop(prt *rt) {
    const char *stop = getenv("PRT_TEST_STOP");
    if (!stop || !*stop) return -1;
    long long rank = -1;
    char name[32] = "";
    int phase = PRT_STARTUP_NPHASES;
    if (sscanf(stop, "%lld:%31s", &rank, name) == 2)
        for (phase = 0; phase < PRT_STARTUP_NPHASES; phase++)
            if (!strcmp(name, startup_phases[phase].name)) break;
    if (phase == PRT_STARTUP_NPHASES) {
        char names[256] = "";
        for (int k = 0; k < PRT_STARTUP_NPHASES; k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                     startup_phases[k].name);
        PRT_CHECK(0, "PRT_TEST_STOP must be RANK:PHASE with a PHASE of %s, got '%s'", names, stop);
    }
    return rank == rt->world_rank ? phase : -1;
}

const char *prt_startup_phase(prt *rt, int phase) {
    PRT_CHECK(phase >= 0 && phase < PRT_STARTUP_NPHASES, "start-up phase %d out of range", phase);
    if (phase_to_stop(rt) == phase) {
        fprintf(stderr, "parc: rank %d (%s): PRT_TEST_STOP: stopping before %s\n", rt->world_rank, rt->host,
                startup_phases[phase].wait);
        fflush(stderr);
        raise(SIGSTOP);
    }
    return startup_phases[phase].wait;
}
