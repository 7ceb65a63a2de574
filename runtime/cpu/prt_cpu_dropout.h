/*
 * prt_cpu_dropout.h — the CPU reference of dropout on a branch's output
 * (parc_rt.h, dropout_fwd / dropout_bwd), kept apart from prt_cpu_ops.c; the
 * backend table there names them.  Attention's dropout on its probabilities
 * lives with the attention kernels in prt_cpu_ops.c.
 */
#ifndef PRT_CPU_DROPOUT_H
#define PRT_CPU_DROPOUT_H

#include <stdint.h>

#include "parc_rt.h"

void prt_cpu_dropout_fwd(prt *rt, void *out, void *mask, const void *in, int64_t B, int64_t T, int64_t C,
                         int64_t first_sample, int64_t t_offset, int64_t T_global, int64_t step, int64_t layer,
                         int64_t site, double p, int64_t dtypes);
void prt_cpu_dropout_bwd(prt *rt, void *din, const void *mask, const void *dout, int64_t n, double p, int64_t dtypes);

#endif
