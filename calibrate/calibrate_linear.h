/*
 * calibrate_linear.h — the GEMM rates `parc calibrate` writes, measured
 * through the CPU runtime's linear op as a training step calls it
 * (calibrate_linear.c).
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

#endif
