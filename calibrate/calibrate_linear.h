/*
 * calibrate_linear.h — rates `parc calibrate` measures through the CPU
 * runtime's own ops: the GEMM classes as a training step calls its linear
 * (calibrate_linear.c), the 16-bit shares of the memory-bound classes
 * (calibrate_ops16.c).
 */
#ifndef PARC_CALIBRATE_LINEAR_H
#define PARC_CALIBRATE_LINEAR_H

#include <stddef.h>
#include <stdint.h>

struct prt;

/* The runtime a measurement runs through: a started one (`--device DEV`:
 * its backend's memory, ops and synchronisation), or NULL: a bare context of
 * the CPU backend (host memory, every op synchronous), made and freed by the
 * measurement itself. */
struct prt *cal_context(struct prt *rt);
void cal_context_done(struct prt *rt, struct prt *ctx);
/* n elements of dtype dt in ctx's backend memory, element i holding
 * first + spread x ((i x 2654435761) mod 1000) / 1000 (uploaded from the host). */
void *cal_tensor(struct prt *ctx, int64_t n, int64_t dt, float first, float spread);
void cal_free(struct prt *ctx, void *p);
/* Waits for every op issued so far (nothing on the CPU backend). */
void cal_sync(struct prt *ctx);

/* Operand sets a measurement rotates through: enough that together they
 * hold at least 4 x this core's L2 (sysconf; 1 MiB where it says nothing),
 * or 256 MiB in a device's memory (past a GPU's L2 of tens of MiB), at
 * least 1 and at most 64, for sets of set_bytes each. */
int linear_sets(const struct prt *ctx, double set_bytes);

/* Best FLOP/s (2 N K M forward, 4 N K M backward) of the runtime's
 * matmul_bias_fwd then matmul_bias_bwd (input, weight and bias gradients)
 * on in[N,K], w[K,M], b[M], fp32 or (wide16) every tensor bf16, each call on
 * the next of linear_sets operand sets, over repeats of at least 0.2 s
 * (rate_settled's), through rt (cal_context). */
double linear_rate(struct prt *rt, int64_t N, int64_t K, int64_t M, int wide16);

/* Repeats of one rate measurement: at least 3, and on while the best rate is
 * not confirmed by another within CAL_AGREE of it, up to CAL_REPEATS; a
 * measurement that needed more than 3 is counted in cal_repeated (of
 * cal_measured), which the fragment's load line prints.  rate_settled says
 * whether repeat `done` (counting from 1) may be the last of `rates`. */
#define CAL_AGREE 0.10
#define CAL_REPEATS 9
extern int cal_repeated, cal_measured;
int rate_settled(const double *rates, int done);

/* stream16's classes measured through the runtime's ops (calibrate_ops16.c):
 * the add, layer norm, GELU, the cross-entropy's backward. */
enum { STREAM16_CLASSES = 4 };
/* Each class's ops over n elements (a multiple of 4096) as fp32 and as bf16
 * tensors, best of 5: seconds in t32[k] and t16[k], and in share[k] the
 * 16-bit bytes/s over the fp32 ones the cost model charges, t32 / (2 t16). */
void stream16_shares(struct prt *rt, int64_t n, double *share, double *t32, double *t16);

#endif
