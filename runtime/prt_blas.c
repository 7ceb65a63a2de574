/*
 * prt_blas.c — the BLAS kernel check at start-up.  OpenBLAS built with
 * DYNAMIC_ARCH picks its kernel family from the CPU it recognises, in a library
 * constructor that runs before main; on a CPU it does not know it falls back to
 * an older family (Debian's 0.3.21 picks Haswell's AVX2 kernels on AVX-512 CPUs
 * it does not name, or Prescott's SSE3 ones), and every GEMM runs at a fraction
 * of the machine.  OPENBLAS_CORETYPE overrides the choice, but it is read only
 * by that constructor: a setenv() before the first BLAS call changes nothing.
 * So prt_blas_select, the first thing prt_init does (before MPI_Init), sets it
 * and re-executes the program, same pid and command line (the process's own,
 * from /proc/self/cmdline, whatever argv prt_init was given); the restarted process keeps
 * the user's setting, and rank 0 says what happened in one line.  A user's own
 * OPENBLAS_CORETYPE always wins: nothing is checked or changed then.
 *
 * The same restart sets OMP_WAIT_POLICY=PASSIVE, when the user has not set it
 * and the rank will run more than one thread: libgomp reads it at load too, and
 * its default lets the CPU ops' idle threads spin after each parallel region,
 * taking the cores the next GEMM's BLAS threads need.  And it sets
 * OPENBLAS_THREAD_TIMEOUT=4 (the user's setting wins): OpenBLAS's pthread
 * workers otherwise spin 2^28 cycles (~0.1 s) after every GEMM before they
 * sleep, on the cores the element-wise ops after it run on.  (What each
 * setting gained, measured: bench/README.md, "Threads that spin".)
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "prt_internal.h"

/* Set in the restarted process: the family OpenBLAS had chosen itself. */
#define PRT_BLAS_MARK "PRT_BLAS_REPLACED"

static int in_list(const char *core, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (!strcasecmp(core, list[i])) return 1;
    return 0;
}

const char *prt_blas_better_core(const char *chosen, int avx512, int avx2) {
    static const char *const avx512_families[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    static const char *const avx2_families[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    if (!chosen) return NULL;
    if (avx512) return in_list(chosen, avx512_families) ? NULL : "SkylakeX";
    if (avx2) return in_list(chosen, avx2_families) ? NULL : "Haswell";
    return NULL;
}

/* The CPU features the SkylakeX kernels use (F, CD, BW, DQ, VL), and Haswell's. */
static void cpu_features(int *avx512, int *avx2) {
    __builtin_cpu_init();
    *avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
              __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
              __builtin_cpu_supports("avx512vl");
    *avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* Whether this rank will run its ops on more than one thread: OpenBLAS's count,
 * unless prt_init will set it to 1 (ranks sharing the node, Open MPI's count). */
static int threaded(void) {
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!getenv("OPENBLAS_NUM_THREADS") && local && atoi(local) > 1) return 0;
    return openblas_get_num_threads() > 1;
}

/* The process's own command line, from /proc/self/cmdline: NULL-terminated,
 * in one malloc'd block, or NULL.  The argv a caller hands prt_init need not be
 * main's (a test passes its own), and the restarted process must get main's. */
static char **own_argv(void) {
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *text = malloc(cap);
    for (size_t got; text && (got = fread(text + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) text = realloc(text, cap *= 2);
    }
    fclose(f);
    if (!text || n == 0 || text[n - 1] != 0) return free(text), NULL;
    size_t words = 0;
    for (size_t i = 0; i < n; i++) words += text[i] == 0;
    char **argv = malloc((words + 1) * sizeof *argv + n);
    if (!argv) return free(text), NULL;
    char *copy = (char *)(argv + words + 1);
    memcpy(copy, text, n);
    free(text);
    for (size_t i = 0, w = 0; w < words; w++) argv[w] = copy + i, i += strlen(copy + i) + 1;
    argv[words] = NULL;
    return argv;
}

void prt_blas_select(int argc, char **argv) {
    if (!argv || argc < 1 || argv[argc]) return;
    /* test hook: PRT_TEST_BLAS_CHOSE=NAME stands in for OpenBLAS's own choice */
    const char *better = NULL, *chosen = getenv("PRT_TEST_BLAS_CHOSE");
    if (!chosen) chosen = openblas_get_corename();
    if (!getenv("OPENBLAS_CORETYPE")) {
        int avx512 = 0, avx2 = 0;
        cpu_features(&avx512, &avx2);
        better = prt_blas_better_core(chosen, avx512, avx2);
    }
    int passive = !getenv("OMP_WAIT_POLICY") && threaded(), sleepy = !getenv("OPENBLAS_THREAD_TIMEOUT") && threaded();
    if (!better && !passive && !sleepy) return;
    if (better && (setenv("OPENBLAS_CORETYPE", better, 1) || setenv(PRT_BLAS_MARK, chosen, 1))) return;
    if (passive && setenv("OMP_WAIT_POLICY", "PASSIVE", 1)) return;
    if (sleepy && setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1)) return;
    fflush(stdout);
    fflush(stderr);
    char **own = own_argv();
    if (own) execv("/proc/self/exe", own);
    free(own);
    /* no restart (no /proc, say): keep what was loaded and say nothing changed */
    if (better) unsetenv("OPENBLAS_CORETYPE");
    if (passive) unsetenv("OMP_WAIT_POLICY");
    if (sleepy) unsetenv("OPENBLAS_THREAD_TIMEOUT");
    unsetenv(PRT_BLAS_MARK);
}

void prt_blas_report(prt *rt) {
    const char *replaced = getenv(PRT_BLAS_MARK);
    if (!replaced) return;
    if (rt->world_rank == 0 && !rt->quiet)
        fprintf(stderr,
                "parc: OpenBLAS chose its %s kernels on this CPU; restarted with OPENBLAS_CORETYPE=%s, "
                "its kernels for the CPU's instructions (set OPENBLAS_CORETYPE to choose)\n",
                replaced, openblas_get_corename());
    unsetenv(PRT_BLAS_MARK);
}
