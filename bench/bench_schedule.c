/*
 * bench_schedule.c — time of pass 7: building, verifying and simulating
 * pipeline schedules, as m, p and v grow.
 *
 * Usage: bench_schedule [repeats]   (default 5; the best run is reported)
 * Prints one row per shape: items in all stages, milliseconds to build, to
 * verify and to simulate, and nanoseconds per item (all three are linear in
 * the number of items p * 2 m v, so ns/item should stay flat).  Exits non-zero
 * if a schedule fails to build or verify.
 */
#include "schedule.h"

#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1) repeats = 1;
    static const struct {
        SchedKind kind;
        int p, m, v;
    } shapes[] = {
        {SCHED_1F1B, 16, 64, 1},          {SCHED_INTERLEAVED, 16, 64, 2},
        {SCHED_INTERLEAVED, 16, 128, 2},  {SCHED_INTERLEAVED, 16, 256, 2},
        {SCHED_INTERLEAVED, 16, 512, 2},  {SCHED_INTERLEAVED, 16, 1024, 2},
        {SCHED_INTERLEAVED, 32, 64, 2},   {SCHED_INTERLEAVED, 64, 64, 2},
        {SCHED_INTERLEAVED, 128, 128, 2}, {SCHED_INTERLEAVED, 16, 64, 4},
        {SCHED_INTERLEAVED, 16, 64, 8},   {SCHED_GPIPE, 64, 1024, 1},
        {SCHED_1F1B, 256, 1024, 1},       {SCHED_INTERLEAVED, 256, 1024, 4},
    };
    int status = 0;
    printf("%-12s %5s %5s %3s %10s %10s %10s %10s %8s\n", "schedule", "p", "m", "v", "items",
           "build_ms", "verify_ms", "sim_ms", "ns/item");
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        double best_build = 1e30, best_verify = 1e30, best_sim = 1e30;
        long items = 2L * shapes[i].p * shapes[i].m * shapes[i].v;
        for (int r = 0; r < repeats; r++) {
            Arena arena = {0};
            Schedule s;
            char why[256];
            double t0 = now_ms();
            if (schedule_build(&arena, shapes[i].kind, shapes[i].p, shapes[i].m, shapes[i].v, &s)) {
                fprintf(stderr, "bench_schedule: build failed for row %zu\n", i);
                return 1;
            }
            double t1 = now_ms();
            if (schedule_verify(&s, why, sizeof(why))) {
                fprintf(stderr, "bench_schedule: verify failed for row %zu: %s\n", i, why);
                status = 1;
            }
            double t2 = now_ms();
            if (schedule_simulate(&s, 1.0, 2.0, 0.0, NULL) < 0) status = 1;
            double t3 = now_ms();
            arena_free(&arena);
            if (t1 - t0 < best_build) best_build = t1 - t0;
            if (t2 - t1 < best_verify) best_verify = t2 - t1;
            if (t3 - t2 < best_sim) best_sim = t3 - t2;
        }
        double total = best_build + best_verify + best_sim;
        printf("%-12s %5d %5d %3d %10ld %10.3f %10.3f %10.3f %8.1f\n",
               schedule_kind_name(shapes[i].kind), shapes[i].p, shapes[i].m, shapes[i].v, items,
               best_build, best_verify, best_sim, total * 1e6 / (double)items);
    }
    return status;
}
