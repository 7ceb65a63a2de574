/*
 * test_draw.c — the initial-value draw (runtime/prt_draw.h): its log and
 * cosine within 1 ulp of long double over the draw's ranges (the uniforms of
 * the hashes, and sweeps of doubles around the zeros of the cosine); the
 * draw's mean, standard deviation, tails, kurtosis and independence (lag 1,
 * between keys, between the two halves of an index) on 4 M values; a run
 * drawn in pieces equal to the run drawn at once, and the vector loop equal to
 * the formula one value at a time, bit for bit; and the float values equal
 * to the libm formula's (std sqrt(-2 log u1) cos(2 pi u2)) but for rare
 * rounding cases.  `rt_draw_test count N` prints how many of the first N
 * values of one key differ from the libm formula's as floats, and by how many
 * float ulps at most.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_draw.h"
#include "prt_internal.h"

static int failures;
#define EXPECT(cond, ...)                                   \
    do {                                                    \
        if (!(cond)) {                                      \
            failures++;                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                   \
            fputc('\n', stderr);                            \
        }                                                   \
    } while (0)

/* |got - ref| in units of the double ulp at ref. */
static double ulps(double got, long double ref) {
    int e;
    frexpl(ref, &e);
    long double ulp = ldexpl(1.0L, e - 53);
    return (double)(fabsl((long double)got - ref) / ulp);
}

static double uniform(uint64_t i) { return prt_unit(prt_hash2(0x5eed, i)); }

static void test_log(void) {
    double worst = 0, worst_x = 0;
    int64_t n = 4000000;
    for (int64_t i = 0; i < n; i++) {
        double x = uniform((uint64_t)i);
        if (i % 4 == 1) x = ldexp(x, -(int)(i % 53));  /* small arguments too (u1 reaches 2^-54) */
        if (i % 4 == 2) x = 1.0 - ldexp(uniform((uint64_t)i), -20);  /* next to 1 */
        double u = ulps(prt_draw_log(x), logl((long double)x));
        if (u > worst) worst = u, worst_x = x;
    }
    double edges[] = {0x1p-54, 0x1.0000000000001p-54, 0.5, 0.70710678118654746, 0.70710678118654757, 1.0 - 0x1p-53,
                      1.0 - 0x1p-52, 0.75, 0.25 + 0x1p-60};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        double u = ulps(prt_draw_log(edges[i]), logl((long double)edges[i]));
        if (u > worst) worst = u, worst_x = edges[i];
    }
    EXPECT(prt_draw_log(1.0) == 0.0, "log(1) = %a", prt_draw_log(1.0));
    printf("prt_draw_log: max error %.3f ulp (at %a) over %lld arguments\n", worst, worst_x, (long long)n);
    EXPECT(worst <= 1.0, "prt_draw_log: %.3f ulp at %a", worst, worst_x);
}

static void test_cos(void) {
    double worst = 0, worst_x = 0;
    int64_t n = 4000000;
    for (int64_t i = 0; i < n; i++) {
        double x = 6.283185307179586 * uniform((uint64_t)i);
        double u = ulps(prt_draw_cos(x), cosl((long double)x));
        if (u > worst) worst = u, worst_x = x;
    }
    /* 20000 doubles either side of each multiple of pi/4 in (0, 2 pi]: zeros of
     * the cosine, and the ends of the reduced interval */
    for (int q = 1; q <= 8; q++) {
        double c = (double)(q * 0.78539816339744830961566084581988L);
        double x = c;
        for (int k = 0; k < 20000; k++) x = nextafter(x, 0.0);
        for (int k = 0; k < 40000 && x <= 6.283185307179586; k++, x = nextafter(x, 8.0)) {
            double u = ulps(prt_draw_cos(x), cosl((long double)x));
            if (u > worst) worst = u, worst_x = x;
        }
    }
    double edges[] = {0.0, 0x1p-60, 6.283185307179586, 6.2831853071795853, 3.141592653589793};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        double u = ulps(prt_draw_cos(edges[i]), cosl((long double)edges[i]));
        if (u > worst) worst = u, worst_x = edges[i];
    }
    printf("prt_draw_cos: max error %.3f ulp (at %a) over %lld arguments and the sweeps\n", worst, worst_x,
           (long long)n);
    EXPECT(worst <= 1.0, "prt_draw_cos: %.3f ulp at %a", worst, worst_x);
}

/* The libm formula the draw reproduces. */
static double libm_value(double std, uint64_t key, uint64_t g) {
    double u1 = prt_unit(prt_hash2(key, 2 * g)), u2 = prt_unit(prt_hash2(key, 2 * g + 1));
    return std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int64_t float_ulps(float a, float b) {
    int32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    int64_t d = (int64_t)x - y;
    return d < 0 ? -d : d;
}

/* Float mismatches against the libm formula over values [0, n) of one key. */
static int64_t count_mismatches(uint64_t key, int64_t n, double std, int64_t *max_ulps) {
    enum { B = 65536 };
    double *v = malloc(B * sizeof(double));
    int64_t bad = 0;
    *max_ulps = 0;
    for (int64_t at = 0; at < n; at += B) {
        int64_t len = n - at < B ? n - at : B;
        prt_draw_normal(key, at, len, std, v);
        for (int64_t i = 0; i < len; i++) {
            float ours = (float)v[i], ref = (float)libm_value(std, key, (uint64_t)(at + i));
            if (ours != ref) {
                bad++;
                int64_t u = float_ulps(ours, ref);
                if (u > *max_ulps) *max_ulps = u;
            }
        }
    }
    free(v);
    return bad;
}

static void test_statistics(void) {
    int64_t n = 4000000;
    double *a = malloc((size_t)n * sizeof(double)), *b = malloc((size_t)n * sizeof(double));
    uint64_t key_a = prt_hash2(prt_hash2(1234, prt_hash_str("h.0.attn.wq")), 3);
    uint64_t key_b = prt_hash2(prt_hash2(1234, prt_hash_str("h.0.attn.wq")), 4);  /* the next layer */
    prt_draw_normal(key_a, 0, n, 1.0, a);
    prt_draw_normal(key_b, 0, n, 1.0, b);
    double s1 = 0, s2 = 0, s4 = 0, lag = 0, cross = 0, halves = 0;
    int64_t within1 = 0, beyond3 = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = a[i];
        s1 += x, s2 += x * x, s4 += x * x * x * x;
        if (i + 1 < n) lag += x * a[i + 1];
        cross += x * b[i];
        if (i < n / 2) halves += x * a[i + n / 2];
        within1 += fabs(x) < 1.0;
        beyond3 += fabs(x) > 3.0;
    }
    double mean = s1 / n, var = s2 / n - mean * mean, kurt = s4 / n / (var * var);
    double p1 = (double)within1 / n, p3 = (double)beyond3 / n;
    double se = 1.0 / sqrt((double)n);  /* standard error of a mean of unit-variance products */
    printf("draw of %lld: mean %+.5f, std %.5f, kurtosis %.4f, P(|x|<1) %.5f, P(|x|>3) %.6f, corr lag-1 %+.5f, "
           "next layer %+.5f, halves %+.5f\n", (long long)n, mean, sqrt(var), kurt, p1, p3, lag / (n - 1),
           cross / n, halves / (n / 2));
    EXPECT(fabs(mean) < 5 * se, "mean %g", mean);
    EXPECT(fabs(var - 1.0) < 5 * sqrt(2.0) * se, "variance %g", var);
    EXPECT(fabs(kurt - 3.0) < 5 * sqrt(24.0) * se, "kurtosis %g", kurt);
    EXPECT(fabs(p1 - 0.682689492137) < 5 * sqrt(0.6827 * 0.3173) * se, "P(|x| < 1) = %g", p1);
    EXPECT(fabs(p3 - 0.002699796063) < 5 * sqrt(0.0027 * 0.9973) * se, "P(|x| > 3) = %g", p3);
    EXPECT(fabs(lag / (n - 1)) < 5 * se, "lag-1 correlation %g", lag / (n - 1));
    EXPECT(fabs(cross / n) < 5 * se, "correlation with the next layer %g", cross / n);
    EXPECT(fabs(halves / (n / 2)) < 5 * sqrt(2.0) * se, "correlation of the halves %g", halves / (n / 2));

    /* a run drawn in pieces (as chunks and rows do) equals the run drawn at once */
    int64_t m = 1000;
    prt_draw_normal(key_a, 777, 300, 0.02, b);
    prt_draw_normal(key_a, 1077, m - 300, 0.02, b + 300);
    prt_draw_normal(key_a, 777, m, 0.02, a);
    int64_t diff = 0;
    for (int64_t i = 0; i < m; i++) diff += memcmp(&a[i], &b[i], sizeof(double)) != 0;
    EXPECT(diff == 0, "%lld of %lld values differ when the run is drawn in two pieces", (long long)diff, (long long)m);
    /* the loop the CPU picked (prt_draw.c's AVX-512 / AVX2 / baseline clones)
     * equals the formula compiled here for the baseline x86-64, bit for bit */
    prt_draw_normal(key_a, 123456789, m, 0.02, a);
    diff = 0;
    for (int64_t i = 0; i < m; i++) {
        uint64_t g = 123456789 + (uint64_t)i;
        double one = prt_draw_value(0.02, prt_unit(prt_hash2(key_a, 2 * g)), prt_unit(prt_hash2(key_a, 2 * g + 1)));
        diff += memcmp(&a[i], &one, sizeof(double)) != 0;
    }
    EXPECT(diff == 0, "%lld of %lld values of prt_draw_normal differ from prt_draw_value's", (long long)diff,
           (long long)m);
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "count") == 0) {
        int64_t n = atoll(argv[2]), max_ulps;
        uint64_t key = prt_hash2(prt_hash2(1234, prt_hash_str("h.0.mlp.w1")), 0);
        int64_t bad = count_mismatches(key, n, 0.02, &max_ulps);
        printf("%lld of %lld float values differ from the libm formula's (at most %lld ulp)\n", (long long)bad,
               (long long)n, (long long)max_ulps);
        return 0;
    }
    test_log();
    test_cos();
    test_statistics();
    int64_t max_ulps, n = 4000000;
    uint64_t key = prt_hash2(prt_hash2(42, prt_hash_str("wte")), (uint64_t)-1);
    int64_t bad = count_mismatches(key, n, 0.02, &max_ulps);
    printf("%lld of %lld float values differ from the libm formula's (at most %lld ulp)\n", (long long)bad,
           (long long)n, (long long)max_ulps);
    EXPECT(bad <= 4 && max_ulps <= 1, "%lld float values differ from the libm formula's, by up to %lld ulp",
           (long long)bad, (long long)max_ulps);
    if (failures) fprintf(stderr, "rt_draw: %d failures\n", failures);
    return failures ? 1 : 0;
}
