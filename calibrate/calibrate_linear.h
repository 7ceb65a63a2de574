/*
 * calibrate_linear.h — rates `parc calibrate` measures through the CPU
 * runtime's own ops: the GEMM classes as a training step calls its linear
 * (calibrate_linear.c), the 16-bit shares of the memory-bound classes
 * (calibrate_ops16.c).
 */
#ifndef PARC_CALIBRATE_LINEAR_H
#define PARC_CALIBRATE_LINEAR_H

#include <stdint.h>

/* Operand sets a measurement rotates through: enough that together they
 * hold at least 4 x this core's L2 (sysconf; 1 MiB where it says nothing),
 * at least 1 and at most 64, for sets of set_bytes each. */
int linear_sets(double set_bytes);

/* Best FLOP/s (2 N K M forward, 4 N K M backward) of the runtime's
 * matmul_bias_fwd then matmul_bias_bwd (input, weight and bias gradients)
 * on in[N,K], w[K,M], b[M], fp32 or (wide16) every tensor bf16, each call on
 * the next of linear_sets operand sets, over 3 repeats of at least 0.2 s. */
double linear_rate(int64_t N, int64_t K, int64_t M, int wide16);

/* stream16's classes measured through the runtime's ops (calibrate_ops16.c):
 * the add, layer norm, GELU, the cross-entropy's backward. */
enum { STREAM16_CLASSES = 4 };
/* Each class's ops over n elements (a multiple of 4096) as fp32 and as bf16
 * tensors, best of 5: seconds in t32[k] and t16[k], and in share[k] the
 * 16-bit bytes/s over the fp32 ones the cost model charges, t32 / (2 t16). */
void stream16_shares(int64_t n, double *share, double *t32, double *t16);

#endif
