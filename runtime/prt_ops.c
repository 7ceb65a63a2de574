/*
 * prt_ops.c — the public entry points of the ops and collectives (parc_rt.h's
 * PRT_CALLS rows of kind OP and COMM): what every backend shares, then one call
 * through the backend table chosen at prt_init (prt_backend.h).
 *   ops: timed for the trace (after a backend sync, so device work is counted);
 *   collectives: the elements' dtype from the call's dtypes word (its pointers'
 *     must agree; checked like an op's), an axis of size 1 as a local copy,
 *     and the backend's collective for the rest (it traces its own transfers).
 * Also the step-loss bookkeeping both backends' xent_fwd report to.
 */
#include <stdlib.h>
#include <string.h>

#include "prt_backend.h"
#include "prt_internal.h"

/* ---------------------------------------------------------------- ops */

static void trace_op(prt *rt, const char *name, double start) {
    if (rt->backend->sync) rt->backend->sync(rt);
    prt_trace_record(rt, name, "op", start, -1, -1);
    rt->events[rt->nevents - 1].gemm_share = (float)rt->op_gemm_share; /* 0 unless the op set it */
}

#define PRT_DISPATCH_OP(name, params, args)     \
    void prt_##name params {                    \
        if (rt->inflight_pending || rt->sends_pending || rt->recv_ahead_pending) prt_comm_progress(rt); \
        double start = prt_trace_start(rt);     \
        rt->op_gemm_share = 0;                  \
        rt->backend->name args;                 \
        if (rt->tracing) trace_op(rt, #name, start); \
    }
#define PRT_DISPATCH_COMM(name, params, args)
#define PRT_DISPATCH_HOST(name, params, args)
#define PRT_DISPATCH_(X, kind, name, sig, params, args) PRT_DISPATCH_##kind(name, params, args)
PRT_CALLS(PRT_DISPATCH_, _)

/* ---------------------------------------------------------------- collectives */

/* The dtype of a collective's elements: that of its pointer arguments in the
 * call's dtypes word (prt_arg_dtype, which checks them), which must agree.  b
 * may be NULL (one buffer). */
int64_t prt_comm_dtype(prt *rt, int64_t dtypes, const void *a, const void *b, const char *what) {
    int64_t da = prt_arg_dtype(rt, dtypes, 0, a, what), db = b ? prt_arg_dtype(rt, dtypes, 1, b, what) : da;
    PRT_CHECK(da < PRT_NDTYPE && db < PRT_NDTYPE, "%s: its dtypes word %#llx names no dtype", what,
              (unsigned long long)dtypes);
    PRT_CHECK(da == db, "%s: its dtypes word declares %s and %s elements; a collective moves one dtype", what,
              prt_dtype_names[da], prt_dtype_names[db]);
    return da;
}

/* out = in, n elements of esize bytes: an axis of size 1. */
static void copy_local(prt *rt, void *out, const void *in, int64_t n, size_t esize) {
    if (n > 0 && out != in) rt->backend->copy_bytes(rt, out, in, (size_t)n * esize);
}

void prt_allreduce(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtypes) {
    int64_t dtype = prt_comm_dtype(rt, dtypes, buf, NULL, "allreduce");
    if (prt_axis_size(rt, axis) == 1 || n == 0) return;
    double start = MPI_Wtime();
    rt->backend->allreduce(rt, axis, buf, n, dtype);
    prt_phase_charge(rt, PRT_PHASE_COMM, start);
}

void prt_allreduce_ends(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtypes) {
    int64_t dtype = prt_comm_dtype(rt, dtypes, buf, NULL, "allreduce_ends");
    if (prt_axis_size(rt, axis) == 1 || n == 0) return;
    int64_t c = prt_coord(rt, axis);
    PRT_CHECK(c == 0 || c == prt_axis_size(rt, axis) - 1, "allreduce_ends on axis %lld: called at coordinate %lld, "
              "which is neither end", (long long)axis, (long long)c);
    double start = MPI_Wtime();
    rt->backend->allreduce_ends(rt, axis, buf, n, dtype);
    prt_phase_charge(rt, PRT_PHASE_COMM, start);
}

/* allgather, reducescatter, alltoall and slice: [outer, inner] blocks; a size-1
 * axis leaves one block, a copy. */
#define PRT_BLOCK_COLLECTIVE(name)                                                                   \
    void prt_##name(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,  \
                    int64_t dtypes) {                                                                \
        int64_t dtype = prt_comm_dtype(rt, dtypes, out, in, #name);                                      \
        if (prt_axis_size(rt, axis) == 1) {                                                          \
            copy_local(rt, out, in, outer * inner, prt_dtype_size(dtype));                           \
            return;                                                                                  \
        }                                                                                            \
        double start = MPI_Wtime();                                                                  \
        rt->backend->name(rt, axis, out, in, outer, inner, dtype);                                   \
        if (strcmp(#name, "slice") != 0) prt_phase_charge(rt, PRT_PHASE_COMM, start);                \
    }
PRT_BLOCK_COLLECTIVE(reducescatter)
PRT_BLOCK_COLLECTIVE(alltoall)
PRT_BLOCK_COLLECTIVE(slice)

/* alltoallv: out and in one dtype, the counts i32 (checked as an op's
 * arguments); a size-1 axis keeps its own rows, a copy. */
void prt_alltoallv(prt *rt, int64_t axis, void *out, const void *in, const void *send_rows, void *recv_rows,
                   int64_t out_rows, int64_t inner, int64_t dtypes) {
    int64_t dtype = prt_comm_dtype(rt, dtypes, out, in, "alltoallv");
    PRT_CHECK(prt_arg_dtype(rt, dtypes, 2, send_rows, "alltoallv") == PRT_I32 &&
              prt_arg_dtype(rt, dtypes, 3, recv_rows, "alltoallv") == PRT_I32,
              "alltoallv: its row counts (pointer arguments 3 and 4) must be i32");
    if (prt_axis_size(rt, axis) == 1) {
        int32_t rows = 0;
        rt->backend->download(rt, &rows, send_rows, sizeof rows);
        PRT_CHECK(rows >= 0 && rows <= out_rows, "alltoallv on a size-1 axis: %d rows for an output of %lld", rows,
                  (long long)out_rows);
        rt->backend->copy_bytes(rt, recv_rows, send_rows, sizeof rows);
        copy_local(rt, out, in, rows * inner, prt_dtype_size(dtype));
        return;
    }
    double start = MPI_Wtime();
    rt->backend->alltoallv(rt, axis, out, in, send_rows, recv_rows, out_rows, inner, dtype);
    prt_phase_charge(rt, PRT_PHASE_COMM, start);
}

/* allgather: as the other block collectives, and in place where `in` is
 * `out` plus this rank's block (outer 1, parc_rt.h); any other overlap of in
 * and out is an error. */
void prt_allgather(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtypes) {
    int64_t dtype = prt_comm_dtype(rt, dtypes, out, in, "allgather");
    int64_t S = prt_axis_size(rt, axis);
    size_t esize = prt_dtype_size(dtype), block = (size_t)(outer * inner) * esize;
    const char *o = out, *i = in;
    int overlaps = i < o + (size_t)S * block && o < i + block;
    PRT_CHECK(!overlaps || (outer == 1 && i == o + (size_t)prt_coord(rt, axis) * block),
              "allgather on axis %lld: its input overlaps its output other than as this rank's block (in place)",
              (long long)axis);
    if (S == 1) {
        copy_local(rt, out, in, outer * inner, esize);
        return;
    }
    double start = MPI_Wtime();
    rt->backend->allgather(rt, axis, out, in, outer, inner, dtype);
    prt_phase_charge(rt, PRT_PHASE_COMM, start);
}

void prt_send(prt *rt, int64_t axis, int64_t delta, const void *buf, int64_t n, int64_t tag, int64_t dtypes) {
    int64_t dtype = prt_comm_dtype(rt, dtypes, buf, NULL, "send");
    double start = MPI_Wtime();
    rt->backend->send(rt, axis, delta, buf, n, tag, dtype);
    prt_phase_charge(rt, PRT_PHASE_BUBBLE, start);
}

void prt_recv(prt *rt, int64_t axis, int64_t delta, void *buf, int64_t n, int64_t tag, int64_t dtypes) {
    int64_t dtype = prt_comm_dtype(rt, dtypes, buf, NULL, "recv");
    double start = MPI_Wtime();
    rt->backend->recv(rt, axis, delta, buf, n, tag, dtype);
    prt_phase_charge(rt, PRT_PHASE_BUBBLE, start);
}

/* ---------------------------------------------------------------- step loss */

void prt_loss_replicas(prt *rt, int64_t axis_mask) { rt->loss_replica_axes = axis_mask; }

void prt_moe_count_tokens(prt *rt, const int32_t *counts, int64_t E, int64_t layer) {
    PRT_CHECK(E > 0 && layer >= 0, "moe_counts: E = %lld, layer %lld", (long long)E, (long long)layer);
    PRT_CHECK(rt->moe_experts == 0 || rt->moe_experts == E, "moe_counts: %lld experts, the plan's layers have %lld",
              (long long)E, (long long)rt->moe_experts);
    if (rt->eval_active) return;
    if (layer >= rt->moe_layers) {  /* the stage's layers, as their first forward arrives */
        int64_t *grown = prt_xcalloc((size_t)((layer + 1) * E), sizeof *grown);
        if (rt->moe_tokens) memcpy(grown, rt->moe_tokens, (size_t)(rt->moe_layers * E) * sizeof *grown);
        free(rt->moe_tokens);
        rt->moe_tokens = grown, rt->moe_layers = layer + 1, rt->moe_experts = E;
    }
    if (!prt_loss_owner(rt)) return; /* a replica of the router: another rank counts its tokens */
    for (int64_t e = 0; e < E; e++) rt->moe_tokens[layer * E + e] += counts[e];
}

int prt_loss_owner(prt *rt) {
    for (int a = 0; a < PRT_MAX_AXES; a++)
        if ((rt->loss_replica_axes >> a & 1) && prt_coord(rt, a) != 0) return 0;
    return 1;
}

void prt_count_step_loss(prt *rt, int64_t axis, double loss) {
    int owner = prt_coord(rt, axis) == 0 && prt_loss_owner(rt);
    if (owner && rt->eval_active) rt->eval_loss += loss;  /* prt_eval_begin .. prt_eval_end */
    else if (owner) rt->step_loss += loss;
}
