/*
 * prt_draw.h — the initial-value draw: a normal value per (key, global index)
 * by Box–Muller (G. E. P. Box and M. E. Muller, "A note on the generation of
 * random normal deviates", Ann. Math. Stat. 29, 1958) from two uniforms that
 * are hashes of the index, with the runtime's own natural log and cosine so
 * that the loops over a run of indices vectorise (no libm call) and the values
 * do not depend on the machine's libm.
 *
 * value(key, g) = std * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2),
 *   u1 = prt_unit(prt_hash2(key, 2g)), u2 = prt_unit(prt_hash2(key, 2g + 1)),
 * evaluated in double, in that order, then rounded to the buffer's dtype.
 *
 * prt_draw_log: for a positive normal double.  x = 2^k m with m in
 *   [sqrt(2)/2, sqrt(2)), f = m - 1 (exact), s = f / (2 + f), and
 *   log(1 + f) = log((1 + s) / (1 - s)) = 2s + s R(s^2),
 *   R(z) = sum_{j>=1} 2 z^j / (2j + 1), summed to j = 10 (|s| <= 0.1716, so the
 *   first term left out is below 7e-19 of the result); 2s is written
 *   f - f^2/2 + s f^2/2 and k log 2 as two parts whose first is exact for
 *   |k| < 2^11 (the arrangement of fdlibm's e_log.c, Sun Microsystems 1993).
 * prt_draw_cos: for 0 <= x <= 2 pi (the draw's range).  x = n pi/2 + y with
 *   n = nearest, y from a three-part pi/2 (33 + 33 + 53 bits; the first two
 *   products with n <= 4 are exact, the subtraction of the first is exact by
 *   Sterbenz's lemma and that of the second is carried exactly by Knuth's
 *   TwoSum), so y has ~100 correct bits even next to a zero of the cosine;
 *   then sin or cos of |y| <= pi/4 by their Taylor series to the y^17 and y^16
 *   terms (the first terms left out are below 2e-18 of the result), with the
 *   rounding error of 1 - y^2/2 carried back (fdlibm's k_cos.c arrangement).
 * Accuracy: within 1 ulp of the exact value over the draw's ranges; rt_draw
 *   (tests/rt/test_draw.c) measures both against long double over millions of
 *   arguments and asserts the bound.  Branch-free, no fused multiply-add
 *   needed (prt_draw.c and the test compile with -ffp-contract=off, so a
 *   compiler for a machine with FMA does not contract them either).
 */
#ifndef PRT_DRAW_H
#define PRT_DRAW_H

#include <stdint.h>
#include <string.h>

static inline double prt_draw_from_bits(uint64_t b) {
    double d;
    memcpy(&d, &b, 8);
    return d;
}
static inline uint64_t prt_draw_bits(double d) {
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}

static inline double prt_draw_log(double x) {
    const double ln2_hi = 6.9314718055989033e-01;  /* 0x3fe62e42fefa3800: 42 bits */
    const double ln2_lo = 5.4979230187083712e-14;  /* log 2 - ln2_hi */
    uint64_t b = prt_draw_bits(x);
    uint64_t biased = b >> 52;
    double m = prt_draw_from_bits((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL); /* [1, 2) */
    /* k = biased - 1023 (+ 1 when m is halved) as a double without an int64
     * conversion (2^52 + n is exact); selects between doubles, so it vectorises */
    double k = prt_draw_from_bits(0x4330000000000000ULL | biased) - (4503599627370496.0 + 1023.0);
    k = m > 1.4142135623730951 ? k + 1.0 : k;
    m = m > 1.4142135623730951 ? 0.5 * m : m;
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double r = z * (2.0 / 3 + z * (2.0 / 5 + z * (2.0 / 7 + z * (2.0 / 9 + z * (2.0 / 11 + z * (2.0 / 13 +
               z * (2.0 / 15 + z * (2.0 / 17 + z * (2.0 / 19 + z * (2.0 / 21))))))))));
    double hfsq = 0.5 * f * f;
    return k * ln2_hi - ((hfsq - (s * (hfsq + r) + k * ln2_lo)) - f);
}

static inline double prt_draw_cos(double x) {
    const double pio2_1 = 1.5707963267341256e+00;  /* 0x3ff921fb54400000: pi/2's first 33 bits */
    const double pio2_2 = 6.077100506303966e-11;   /* 0x3dd0b4611a600000: the next 33 */
    const double pio2_3 = 2.0222662487959506e-21;  /* the rest, rounded */
    int n = (int)(x * 0.6366197723675814 + 0.5);   /* x >= 0: the nearest multiple of pi/2 */
    double dn = (double)n;
    double a = x - dn * pio2_1;                     /* exact */
    double t = dn * pio2_2;                         /* exact */
    double y = a - t;                               /* TwoSum(a, -t): y + e == a - t */
    double tb = y - a, ta = y - tb;
    double e = (a - ta) - (t + tb);
    double tail = e - dn * pio2_3;                  /* x - n pi/2 == y + tail */
    double z = y * y;
    /* sin(y + tail) = y + (y z S(z) + tail (1 - z/2)) */
    double sp = -1.0 / 6 + z * (1.0 / 120 + z * (-1.0 / 5040 + z * (1.0 / 362880 + z * (-1.0 / 39916800 +
                z * (1.0 / 6227020800.0 + z * (-1.0 / 1307674368000.0 + z * (1.0 / 355687428096000.0)))))));
    double sn = y + ((y * z) * sp + (tail - 0.5 * z * tail));
    /* cos(y + tail) = 1 - z/2 + z^2 C(z) - y tail, 1 - z/2 rounded with its error kept */
    double cp = 1.0 / 24 + z * (-1.0 / 720 + z * (1.0 / 40320 + z * (-1.0 / 3628800 + z * (1.0 / 479001600 +
                z * (-1.0 / 87178291200.0 + z * (1.0 / 20922789888000.0))))));
    double hz = 0.5 * z, w = 1.0 - hz;
    double cs = w + (((1.0 - w) - hz) + (z * z * cp - y * tail));
    double v = (n & 1) ? sn : cs;
    return ((n + 1) & 2) ? -v : v;  /* n = 1, 2: negative */
}

/* The draw's value for one index (the definition; prt_draw_normal fills runs). */
static inline double prt_draw_value(double std, double u1, double u2) {
    return std * __builtin_sqrt(-2.0 * prt_draw_log(u1)) * prt_draw_cos(6.283185307179586 * u2);
}

/* out[i] = value(key, g0 + i) for 0 <= i < n, times std (prt_draw.c). */
void prt_draw_normal(uint64_t key, int64_t g0, int64_t n, double std, double *out);

#endif
