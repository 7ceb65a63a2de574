/*
 * rt_test.h — helpers shared by the runtime tests: deterministic inputs, a plan
 * for a given mesh, and comparisons that count failures.  A test's exit status is
 * its verdict: 0 when the failure count is 0, else 1.
 */
#ifndef RT_TEST_H
#define RT_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parc_rt.h"

static int rt_failures;

/* Uniform in [-1, 1) from a 64-bit state (splitmix64). */
static inline float rt_rand(uint64_t *state) {
    uint64_t x = (*state += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline void rt_fill(float *x, int64_t n, uint64_t seed, float scale) {
    uint64_t s = seed * 0x100000001b3ULL + 12345;
    for (int64_t i = 0; i < n; i++) x[i] = scale * rt_rand(&s);
}

static inline float *rt_alloc(int64_t n) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

static inline prt_plan_desc rt_plan(const char *name, int64_t naxes, const char *const *axis_names,
                                    const int64_t *axis_sizes) {
    prt_plan_desc p;
    memset(&p, 0, sizeof p);
    p.plan_name = name;
    p.source_file = "test";
    p.naxes = naxes;
    for (int64_t a = 0; a < naxes; a++) {
        p.axis_names[a] = axis_names[a];
        p.axis_sizes[a] = axis_sizes[a];
    }
    p.dp_axis = p.tp_axis = p.pp_axis = -1;
    p.steps = 1;
    p.seed = 1234;
    p.batch = p.micro_batch = 1;
    p.micro_batches = 1;
    p.seq = 1;
    p.vocab = 16;
    return p;
}

/* |got - want| <= atol + rtol * |want| elementwise; prints the first few misses. */
static inline int rt_close(const char *what, const float *got, const float *want, int64_t n, double atol, double rtol) {
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]), lim = atol + rtol * fabs((double)want[i]);
        if (!(d <= lim)) {
            if (bad < 4) fprintf(stderr, "  %s[%lld]: got %.9g want %.9g\n", what, (long long)i, got[i], want[i]);
            bad++;
        }
        if (d > worst) worst = d;
    }
    if (bad) {
        fprintf(stderr, "FAIL %s: %lld of %lld elements off (max abs diff %.3g)\n", what, (long long)bad, (long long)n, worst);
        rt_failures++;
        return 0;
    }
    return 1;
}

#define RT_EXPECT(cond, ...)                                            \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);        \
            fprintf(stderr, __VA_ARGS__);                               \
            fprintf(stderr, "\n");                                      \
            rt_failures++;                                              \
        }                                                               \
    } while (0)

#endif
