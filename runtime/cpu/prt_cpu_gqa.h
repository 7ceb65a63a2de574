/*
 * prt_cpu_gqa.h — the CPU reference of grouped-query attention's key/value
 * repeat (parc_rt.h, kv_repeat_fwd / kv_repeat_bwd), kept apart from the
 * attention kernels of prt_cpu_ops.c; the backend table there names them.
 */
#ifndef PRT_CPU_GQA_H
#define PRT_CPU_GQA_H

#include <stdint.h>

#include "parc_rt.h"

void prt_cpu_kv_repeat_fwd(prt *rt, void *out, const void *in, int64_t N, int64_t KV, int64_t G, int64_t HD,
                           int64_t dtypes);
void prt_cpu_kv_repeat_bwd(prt *rt, void *din, const void *dout, int64_t N, int64_t KV, int64_t G, int64_t HD,
                           int64_t dtypes);

#endif
