/*
 * blas_core.c — the start-up BLAS kernel check (prt_blas.c), for test_blas.sh.
 *   blas_core --table   the choice rule on fixed inputs, no MPI; exit 0 iff all hold
 *   blas_core --own     prints OpenBLAS's own choice (no prt_init, so no restart)
 *   blas_core [flags]   a one-step-free program on a dp mesh of the ranks started:
 *                       after prt_init each rank prints
 *                       "rank R core <openblas_get_corename()> wait <OMP_WAIT_POLICY or ->"
 *                       and then "rank R timeout <OPENBLAS_THREAD_TIMEOUT or ->"
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"
#include "rt_test.h"

static int table(void) {
    static const struct { const char *chosen; int avx512, avx2; const char *want; } rows[] = {
        {"Prescott", 1, 1, "SkylakeX"}, {"Haswell", 1, 1, "SkylakeX"}, {"Zen", 1, 1, "SkylakeX"},
        {"SkylakeX", 1, 1, NULL},       {"cooperlake", 1, 1, NULL},    {"SapphireRapids", 1, 1, NULL},
        {"Prescott", 0, 1, "Haswell"},  {"Sandybridge", 0, 1, "Haswell"}, {"Haswell", 0, 1, NULL},
        {"Zen", 0, 1, NULL},            {"Prescott", 0, 0, NULL},      {"Core2", 0, 0, NULL},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *got = prt_blas_better_core(rows[i].chosen, rows[i].avx512, rows[i].avx2);
        int ok = got && rows[i].want ? !strcmp(got, rows[i].want) : got == rows[i].want;
        if (!ok) {
            printf("FAIL: %s avx512=%d avx2=%d: got %s, want %s\n", rows[i].chosen, rows[i].avx512, rows[i].avx2,
                   got ? got : "(keep)", rows[i].want ? rows[i].want : "(keep)");
            failures++;
        }
    }
    printf("blas_core --table: %d of %zu rows wrong\n", failures, sizeof rows / sizeof rows[0]);
    return failures != 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--table")) return table();
    if (argc > 1 && !strcmp(argv[1], "--own")) return printf("%s\n", openblas_get_corename()) < 0;
    int world = 1;
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (size) world = atoi(size);
    static const char *names[1] = {"dp"};
    int64_t sizes[1] = {world};
    prt_plan_desc plan = rt_plan("blas_core", 1, names, sizes);
    plan.steps = 1;
    prt *rt = prt_init(argc, argv, &plan);
    const char *wait = getenv("OMP_WAIT_POLICY");
    printf("rank %lld core %s wait %s\n", (long long)prt_coord(rt, 0), openblas_get_corename(), wait ? wait : "-");
    const char *timeout = getenv("OPENBLAS_THREAD_TIMEOUT");
    printf("rank %lld timeout %s\n", (long long)prt_coord(rt, 0), timeout ? timeout : "-");
    fflush(stdout);
    return (int)prt_finalize(rt);
}
