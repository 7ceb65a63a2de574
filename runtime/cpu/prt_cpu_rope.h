/*
 * prt_cpu_rope.h — the CPU reference of the rotary position embedding
 * (parc_rt.h, rope_fwd / rope_bwd), kept apart from prt_cpu_ops.c's other
 * ops; the backend table there names them.
 */
#ifndef PRT_CPU_ROPE_H
#define PRT_CPU_ROPE_H

#include <stdint.h>

#include "parc_rt.h"

void prt_cpu_rope_fwd(prt *rt, void *out, const void *in, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                      int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                      double high_freq_factor, int64_t original_max_positions, int64_t dtypes);
void prt_cpu_rope_bwd(prt *rt, void *din, const void *dout, int64_t B, int64_t T, int64_t G, int64_t U, int64_t R,
                      int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor, double low_freq_factor,
                      double high_freq_factor, int64_t original_max_positions, int64_t dtypes);

#endif
