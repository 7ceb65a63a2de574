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
 */
#include <stdio.h>
#include <string.h>
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
