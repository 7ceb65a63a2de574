/*
 * prt_draw.c — the initial-value draw over a run of consecutive global indices
 * (prt_draw.h gives the formula): the uniforms of a block first (the hashes),
 * then the log, square root and cosine of the whole block in one loop that
 * the compiler vectorises.  Compiled with -ffp-contract=off (CMakeLists.txt).
 */
#include "prt_draw.h"

#include "prt_internal.h"

enum { DRAW_BLOCK = 256 };

/* Compiled for AVX-512 and AVX2 as well, picked at load time by the CPU: the
 * same IEEE operations on wider vectors (FMA is not enabled and contraction
 * is off), so every clone gives the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void prt_draw_normal(uint64_t key, int64_t g0, int64_t n, double std, double *out) {
    double u1[DRAW_BLOCK], u2[DRAW_BLOCK];
    for (int64_t at = 0; at < n; at += DRAW_BLOCK) {
        int64_t len = n - at < DRAW_BLOCK ? n - at : DRAW_BLOCK;
        uint64_t g = (uint64_t)(g0 + at);
        for (int64_t i = 0; i < len; i++) {
            u1[i] = prt_unit(prt_hash2(key, 2 * (g + (uint64_t)i)));
            u2[i] = prt_unit(prt_hash2(key, 2 * (g + (uint64_t)i) + 1));
        }
        double *o = out + at;
        for (int64_t i = 0; i < len; i++) o[i] = prt_draw_value(std, u1[i], u2[i]);
    }
}
