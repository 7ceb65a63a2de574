/*
 * prt_mpi.c — collectives on one mesh axis and pipeline send/recv over MPI, on
 * host memory: the CPU backend's collectives, and the CUDA backend's host-staged
 * path.  Every collective first waits, watched (prt_wait), for all ranks of its
 * axis to arrive, and receives and send completions are polled the same way, so
 * a peer that never arrives is named instead of hanging the job.
 *
 * Counts are elements of the buffer's dtype (the call's dtypes word, decoded by
 * prt_ops.c): f32 and i32 move as MPI_FLOAT / MPI_INT32_T, bf16 and f16 as
 * MPI_UINT16_T, two bytes each.  Sums of 16-bit elements use a user-defined
 * MPI_Op that adds in fp32 and rounds to nearest even at every combination (what
 * NCCL does for bf16): with two ranks that is the rounded exact-in-fp32 sum, and no
 * fp32 staging copy is needed.
 *
 * Layouts are parc_rt.h's [outer, S, inner].  With outer == 1 the MPI call works on
 * the caller's buffers directly; with outer > 1 the blocks are packed to or from
 * one staging buffer (outer*S*inner elements, booked to PRT_COMM, grown rarely).
 * Pipeline sends copy into send slots (booked to PRT_COMM) and MPI_Isend; a slot
 * is reused once MPI_Test says its send completed; pending sends are tested
 * between ops (prt_comm_progress) and completed at prt_step_end and
 * prt_finalize.  The next pipeline receive is posted ahead of its op (see
 * "receives posted ahead") and tested between ops too.  The public entry points (prt_ops.c) handle
 * axes of size 1 and find the dtype.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"

void prt_mpi_settings(void) { setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0); }

static int count_of(int64_t n, const char *what) {
    PRT_CHECK(n >= 0 && n <= INT_MAX, "%s: %lld elements do not fit one MPI call", what, (long long)n);
    return (int)n;
}

static const char *axis_label(prt *rt, int64_t axis) {
    return axis >= 0 && axis < rt->ncomms && rt->plan.axis_names[axis] ? rt->plan.axis_names[axis] : "?";
}

/* ---------------------------------------------------------------- element types */

/* The dtype the elements of a collective have: that of its registered buffers
 * (which must agree), else fp32.  b may be NULL. */
static MPI_Datatype mpi_type(int64_t dtype) {
    switch (dtype) {
    case PRT_BF16:
    case PRT_F16: return MPI_UINT16_T;
    case PRT_I32: return MPI_INT32_T;
    case PRT_U8: return MPI_BYTE;
    default: return MPI_FLOAT;
    }
}

static void sum_bf16(void *in_, void *inout_, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *in = in_;
    uint16_t *inout = inout_;
    for (int i = 0; i < *len; i++) inout[i] = prt_f32_to_bf16(prt_bf16_to_f32(in[i]) + prt_bf16_to_f32(inout[i]));
}
static void sum_f16(void *in_, void *inout_, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *in = in_;
    uint16_t *inout = inout_;
    for (int i = 0; i < *len; i++) inout[i] = prt_f32_to_f16(prt_f16_to_f32(in[i]) + prt_f16_to_f32(inout[i]));
}

/* The sum for elements of `dtype` (the user ops are created at first use and
 * freed by prt_comm_free). */
static MPI_Op sum_op(prt *rt, int64_t dtype) {
    if (!prt_dtype_is_16(dtype)) return MPI_SUM;
    if (!rt->have_sum_ops) {
        PRT_MPI_CHECK(MPI_Op_create(sum_bf16, 1, &rt->sum_bf16));
        PRT_MPI_CHECK(MPI_Op_create(sum_f16, 1, &rt->sum_f16));
        rt->have_sum_ops = 1;
    }
    return dtype == PRT_BF16 ? rt->sum_bf16 : rt->sum_f16;
}

/* Packing buffer of `bytes` (booked to PRT_COMM in whole floats). */
static char *stage_bytes(prt *rt, size_t bytes) {
    return (char *)prt_comm_stage(rt, (bytes + sizeof(float) - 1) / sizeof(float));
}

/* ---------------------------------------------------------------- collectives over MPI (host memory) */

/* Waits, watched, until every rank of the axis has reached this collective (a
 * nonblocking barrier that prt_wait polls, so a missing peer is named), then
 * brackets the blocking call that follows for the watchdog thread: the
 * all-to-alls, which stay MPI's blocking ones (the all-reduce, all-gather
 * and reduce-scatter below are started and waited for, their waits watched).
 * The barrier adds one small round trip per collective. */
static void arrive(prt *rt, int64_t axis, const char *what) {
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Ibarrier(prt_axis_comm(rt, axis), &req));
    prt_wait(rt, &req, NULL, what, axis);
    prt_block_begin(what, axis);
}

/* in[outer, S, inner] packed into the staging buffer as [S, outer, inner]: block s
 * is what rank s of the axis gets (reduce-scatter, all-to-all). */
static const char *pack_blocks(prt *rt, const char *in, int S, int64_t outer, int64_t inner, size_t esize) {
    char *stage = stage_bytes(rt, (size_t)S * (size_t)(outer * inner) * esize);
    for (int s = 0; s < S; s++)
        for (int64_t o = 0; o < outer; o++)
            memcpy(stage + ((size_t)s * outer + o) * inner * esize, in + (size_t)((o * S + s) * inner) * esize,
                   (size_t)inner * esize);
    return stage;
}

/* The blocking all-reduce is the started one waited for: libnbc's ring
 * (prt_mpi_settings), the one the cost model charges.  Open MPI's blocking
 * MPI_Allreduce (coll tuned) ran a 16 MiB all-reduce of a pair of ranks on
 * two emulated hosts at 1 Gbit/s at 32-56 MB/s from one call to the next,
 * the ring at 52-57 (docs/cost-model.md); the watched wait names a missing
 * peer as arrive() does. */
static MPI_Request allreduce_post(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype, const char *name) {
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, count_of(n, name), mpi_type(dtype), sum_op(rt, dtype),
                                 prt_axis_comm(rt, axis), &req));
    return req;
}

void prt_mpi_allreduce(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype) {
    double t = prt_trace_start(rt);
    MPI_Request req = allreduce_post(rt, axis, buf, n, dtype, "allreduce");
    prt_wait(rt, &req, MPI_STATUS_IGNORE, "all-reduce", axis);
    PRT_TRACE_END(rt, "allreduce", "comm", t, n * (int64_t)prt_dtype_size(dtype), axis);
}

/* dst += src, count elements of dtype (16-bit ones summed in fp32 and rounded,
 * as sum_op's). */
static void add_into(int64_t dtype, void *dst, const void *src, int count) {
    MPI_Datatype type = mpi_type(dtype);
    if (dtype == PRT_BF16) sum_bf16((void *)src, dst, &count, &type);
    else if (dtype == PRT_F16) sum_f16((void *)src, dst, &count, &type);
    else {
        float *d = dst;
        const float *x = src;
        for (int i = 0; i < count; i++) d[i] += x[i];
    }
}

/* The two ends of the axis exchange their buffers (the peer's copy lands in the
 * packing buffer) and each adds the other's: addition commutes, so both get the
 * same bits.  The tag is the largest MPI allows, which no pipeline message
 * reaches before it (their receives all completed within the step). */
void prt_mpi_allreduce_ends(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype) {
    double t = prt_trace_start(rt);
    int count = count_of(n, "allreduce_ends"), S = prt_axis_size(rt, axis);
    size_t bytes = (size_t)count * prt_dtype_size(dtype);
    int peer = prt_coord(rt, axis) == 0 ? S - 1 : 0;
    char *other = stage_bytes(rt, bytes);
    MPI_Comm comm = prt_axis_comm(rt, axis);
    MPI_Request req[2];
    PRT_MPI_CHECK(MPI_Irecv(other, count, mpi_type(dtype), peer, rt->tag_ub, comm, &req[0]));
    PRT_MPI_CHECK(MPI_Isend(buf, count, mpi_type(dtype), peer, rt->tag_ub, comm, &req[1]));
    prt_wait(rt, &req[0], MPI_STATUS_IGNORE, "embedding-group all-reduce", axis);
    prt_wait(rt, &req[1], MPI_STATUS_IGNORE, "embedding-group all-reduce", axis);
    add_into(dtype, buf, other, count);
    PRT_TRACE_END(rt, "allreduce_ends", "comm", t, n * (int64_t)prt_dtype_size(dtype), axis);
}

/* The nonblocking forms (prt_overlap.c completes them): the watched wait at
 * comm_wait names a missing peer.  A reduce-scatter of
 * outer > 1 blocks sends from the communication stage it packs into, which
 * stays in use until its comm_wait (parc_rt.h: no other collective that packs
 * runs meanwhile). */
void prt_mpi_allreduce_start(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype) {
    double t = MPI_Wtime();
    MPI_Request req = allreduce_post(rt, axis, buf, n, dtype, "allreduce_start");
    prt_comm_post(rt, buf, req, "allreduce", n * (int64_t)prt_dtype_size(dtype), axis, t);
}

/* A reduce-scatter or an all-gather runs as a ring of S - 1 steps the
 * runtime drives (libnbc's started reduce-scatter reduces the whole buffer
 * to one rank and scatters it from there, log2(S) + 1 times the bytes of a
 * ring; its started all-gather sends each block to every rank at once:
 * docs/cost-model.md).  Rank r ends with block r of a reduce-scatter: at
 * step k it sends to rank r + 1 the partial sum of block r - 1 - k (its own
 * contribution at step 0), receives from rank r - 1 the partial sum of block
 * r - 2 - k and adds its own contribution to it; the last step receives into
 * out.  Two scratch blocks alternate as what is sent and what is received
 * (none for S = 2); they are the ring's own, freed when it completes, as an
 * MPI collective keeps its temporary buffers (not in the ledger).  An
 * all-gather forwards whole blocks in out itself: at step k rank r sends
 * block r - k to r + 1 and receives block r - 1 - k from r - 1.  The
 * messages carry a tag of their own per ring (below the largest, which
 * allreduce_ends uses), so rings in flight on one axis never take each
 * other's messages: every rank of an axis starts its rings in one order. */
enum { RING_REDUCE, RING_GATHER };
typedef struct prt_ring {
    MPI_Comm comm;
    MPI_Datatype type;
    int64_t dtype, axis;
    int kind, S, me, step, tag, count, posted; /* step: the one in flight; S - 1 once done */
    size_t block_bytes;
    const char *in; /* a reduce-scatter's S blocks: this rank's contributions */
    char *out, *scratch[2];
    MPI_Request req[2]; /* the step's receive and send */
} prt_ring;

static int ring_block(const prt_ring *g, int k) { return ((g->me - k) % g->S + g->S) % g->S; }

static prt_ring *ring_new(prt *rt, int64_t axis, int64_t dtype, int block, int kind) {
    prt_ring *g = prt_xcalloc(1, sizeof *g);
    g->comm = prt_axis_comm(rt, axis);
    g->type = mpi_type(dtype);
    g->dtype = dtype;
    g->axis = axis;
    g->kind = kind;
    g->S = prt_axis_size(rt, axis);
    g->me = prt_coord(rt, axis);
    g->count = block;
    g->block_bytes = (size_t)block * prt_dtype_size(dtype);
    g->tag = rt->tag_ub - 1 - (int)(rt->ring_seq[axis]++ % 4096);
    for (int i = 0; i < 2 && kind == RING_REDUCE && g->S > 2; i++)
        g->scratch[i] = prt_xmalloc(g->block_bytes ? g->block_bytes : 1);
    g->req[0] = g->req[1] = MPI_REQUEST_NULL;
    return g;
}

/* An all-gather into `out` (S blocks) starts from this rank's block there. */
static void ring_own_block(prt_ring *g, char *out, const void *in) {
    g->out = out;
    char *mine = out + (size_t)g->me * g->block_bytes;
    if ((const char *)in != mine) memmove(mine, in, g->block_bytes);
}

static void ring_post(prt_ring *g) {
    const char *send;
    char *recv;
    if (g->kind == RING_GATHER) {
        send = g->out + (size_t)ring_block(g, g->step) * g->block_bytes;
        recv = g->out + (size_t)ring_block(g, g->step + 1) * g->block_bytes;
    } else {
        send = g->step == 0 ? g->in + (size_t)ring_block(g, 1) * g->block_bytes : g->scratch[(g->step - 1) % 2];
        recv = g->step == g->S - 2 ? g->out : g->scratch[g->step % 2];
    }
    PRT_MPI_CHECK(MPI_Irecv(recv, g->count, g->type, (g->me + g->S - 1) % g->S, g->tag, g->comm, &g->req[0]));
    PRT_MPI_CHECK(MPI_Isend(send, g->count, g->type, (g->me + 1) % g->S, g->tag, g->comm, &g->req[1]));
    g->posted = 1;
}

int prt_mpi_ring_advance(prt *rt, prt_ring *g, int wait) {
    const char *what = g->kind == RING_GATHER ? "all-gather" : "reduce-scatter";
    while (g->step < g->S - 1) {
        if (!g->posted) ring_post(g);
        if (wait) {
            prt_wait(rt, &g->req[0], MPI_STATUS_IGNORE, what, g->axis);
            prt_wait(rt, &g->req[1], MPI_STATUS_IGNORE, what, g->axis);
        } else {
            int done = 0;
            PRT_MPI_CHECK(MPI_Testall(2, g->req, &done, MPI_STATUSES_IGNORE));
            if (!done) return 0;
        }
        if (g->kind == RING_REDUCE) {
            char *recv = g->step == g->S - 2 ? g->out : g->scratch[g->step % 2];
            add_into(g->dtype, recv, g->in + (size_t)ring_block(g, g->step + 2) * g->block_bytes, g->count);
        }
        g->step++;
        g->posted = 0;
    }
    return 1;
}

void prt_mpi_ring_free(prt_ring *g) {
    if (!g) return;
    free(g->scratch[0]);
    free(g->scratch[1]);
    free(g);
}

/* The ring of a reduce-scatter of in[outer, S, inner] into out[outer,
 * inner] (outer > 1: packed into the communication stage first). */
static prt_ring *reducescatter_ring(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                                    int64_t dtype, const char *name) {
    int S = prt_axis_size(rt, axis);
    int block = count_of(outer * inner, name);
    count_of((int64_t)S * block, name);
    prt_ring *g = ring_new(rt, axis, dtype, block, RING_REDUCE);
    g->in = outer > 1 ? pack_blocks(rt, in, S, outer, inner, prt_dtype_size(dtype)) : in;
    g->out = out;
    return g;
}

/* A blocking collective: the whole ring, waited for. */
static void ring_run(prt *rt, prt_ring *g) {
    prt_mpi_ring_advance(rt, g, 1);
    prt_mpi_ring_free(g);
}

void prt_mpi_reducescatter_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                                 int64_t dtype) {
    double t = MPI_Wtime();
    prt_ring *g = reducescatter_ring(rt, axis, out, in, outer, inner, dtype, "reducescatter_start");
    ring_post(g);
    prt_comm_post_ring(rt, out, g, "reducescatter", (int64_t)g->S * g->block_bytes, axis, t);
}

void prt_mpi_allgather_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                             int64_t dtype) {
    double t = MPI_Wtime();
    int S = prt_axis_size(rt, axis);
    PRT_CHECK(outer == 1, "allgather_start: outer %lld, not 1", (long long)outer);
    int block = count_of(inner, "allgather_start");
    count_of((int64_t)S * block, "allgather_start");
    prt_ring *g = ring_new(rt, axis, dtype, block, RING_GATHER);
    ring_own_block(g, out, in);
    ring_post(g);
    prt_comm_post_ring(rt, out, g, "allgather", (int64_t)S * block * (int64_t)prt_dtype_size(dtype), axis, t);
}

/* The blocking all-gather and reduce-scatter run the rings their started
 * forms run (above): Open MPI's own (coll tuned) sent a reduce-scatter of 4
 * ranks on two hosts about three times a ring's bytes across them, and an
 * all-gather a third more (docs/cost-model.md).  Their steps are watched
 * waits, so a missing peer is named as by arrive(). */
void prt_mpi_allgather(prt *rt, int64_t axis, void *out_, const void *in, int64_t outer, int64_t inner, int64_t dtype) {
    size_t esize = prt_dtype_size(dtype);
    int S = prt_axis_size(rt, axis);
    double t = prt_trace_start(rt);
    char *out = out_;
    int block = count_of(outer * inner, "allgather");
    count_of((int64_t)S * block, "allgather");
    char *gathered = outer == 1 ? out : stage_bytes(rt, (size_t)S * (size_t)block * esize); /* [S, outer, inner] */
    prt_ring *g = ring_new(rt, axis, dtype, block, RING_GATHER);
    ring_own_block(g, gathered, in);
    ring_run(rt, g);
    if (gathered != out) {
        for (int s = 0; s < S; s++)
            for (int64_t o = 0; o < outer; o++)
                memcpy(out + (size_t)((o * S + s) * inner) * esize, gathered + ((size_t)s * outer + o) * inner * esize,
                       (size_t)inner * esize);
    }
    PRT_TRACE_END(rt, "allgather", "comm", t, (int64_t)S * block * (int64_t)esize, axis);
}

void prt_mpi_reducescatter(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                           int64_t dtype) {
    double t = prt_trace_start(rt);
    prt_ring *g = reducescatter_ring(rt, axis, out, in, outer, inner, dtype, "reducescatter");
    int64_t bytes = (int64_t)g->S * (int64_t)g->block_bytes;
    ring_run(rt, g);
    PRT_TRACE_END(rt, "reducescatter", "comm", t, bytes, axis);
}

void prt_mpi_shift(prt *rt, int64_t axis, void *out, const void *in, int64_t n, int64_t dtype) {
    int S = prt_axis_size(rt, axis), me = rt->coord[axis], count = count_of(n, "shift");
    double t = prt_trace_start(rt);
    PRT_MPI_CHECK(MPI_Sendrecv(in, count, mpi_type(dtype), (me + 1) % S, 0, out, count, mpi_type(dtype),
                               (me + S - 1) % S, 0, prt_axis_comm(rt, axis), MPI_STATUS_IGNORE));
    PRT_TRACE_END(rt, "shift", "comm", t, n * (int64_t)prt_dtype_size(dtype), axis);
}

/* A ring step: one nonblocking all-to-all(v) whose only counts are n to the
 * next rank and n from the one before (one request for comm_wait, which a
 * pair of point-to-point requests would not give). */
void prt_mpi_shift_start(prt *rt, int64_t axis, void *out, const void *in, int64_t n, int64_t dtype) {
    double t = MPI_Wtime();
    int S = prt_axis_size(rt, axis), me = rt->coord[axis];
    int count = count_of(n, "shift_start");
    int *v = prt_xcalloc((size_t)(4 * S), sizeof *v), *scounts = v, *sdispls = v + S, *rcounts = v + 2 * S,
        *rdispls = v + 3 * S;
    scounts[(me + 1) % S] = count;
    rcounts[(me + S - 1) % S] = count;
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Ialltoallv(in, scounts, sdispls, mpi_type(dtype), out, rcounts, rdispls, mpi_type(dtype),
                                 prt_axis_comm(rt, axis), &req));
    prt_comm_post(rt, out, req, "shift", n * (int64_t)prt_dtype_size(dtype), axis, t);
    prt_comm_keep(rt, out, v);
}

void prt_mpi_alltoall(prt *rt, int64_t axis, void *out, const void *in_, int64_t outer, int64_t inner, int64_t dtype) {
    size_t esize = prt_dtype_size(dtype);
    int S = prt_axis_size(rt, axis);
    double t = prt_trace_start(rt);
    const char *in = in_;
    int block = count_of(outer * inner, "alltoall");
    count_of((int64_t)S * block, "alltoall");
    const char *send = in;
    if (outer > 1) {
        send = pack_blocks(rt, in, S, outer, inner, esize);
    }
    MPI_Datatype type = mpi_type(dtype);
    arrive(rt, axis, "all-to-all");
    PRT_MPI_CHECK(MPI_Alltoall(send, block, type, out, block, type, prt_axis_comm(rt, axis)));
    prt_block_end();
    PRT_TRACE_END(rt, "alltoall", "comm", t, (int64_t)S * block * (int64_t)esize, axis);
}

/* More rows arrive than the output holds: expert parallelism's buffers
 * sized by a mixture of experts' `capacity` (the dropless bound cannot
 * overflow), so the routing of this step outgrew the plan's capacity. */
void prt_alltoallv_overflow(prt *rt, const char *axis, int64_t arrived, int64_t out_rows) {
    prt_user_fail(1,
                  "rank %d: the all-to-all on axis %s brings %lld routed rows, more than the %lld its experts' "
                  "buffers hold; the plan's `mlp moe ... capacity` bounds them: raise it (or drop it for the "
                  "dropless bound), or balance the router (aux_loss)",
                  rt->world_rank, axis, (long long)arrived, (long long)out_rows);
}

/* Rows of `inner` elements, a count per peer: the counts first (an all-to-all
 * of one i32 each, into recv_rows), then MPI_Alltoallv with counts and
 * displacements in elements (each must fit an int, as the block collectives'
 * do).  Blocks go and arrive in rank order, packed. */
void prt_mpi_alltoallv(prt *rt, int64_t axis, void *out, const void *in, const void *send_rows_, void *recv_rows_,
                       int64_t out_rows, int64_t inner, int64_t dtype) {
    size_t esize = prt_dtype_size(dtype);
    int S = prt_axis_size(rt, axis);
    double t = prt_trace_start(rt);
    const int32_t *send_rows = send_rows_;
    int32_t *recv_rows = recv_rows_;
    MPI_Comm comm = prt_axis_comm(rt, axis);
    /* [4, S]: send counts, send displacements, receive counts, receive displacements */
    int *counts = prt_xmalloc(4 * (size_t)S * sizeof *counts), *sdispls = counts + S, *rcounts = counts + 2 * S,
        *rdispls = counts + 3 * S;
    int64_t sent = 0, arrived = 0;
    for (int j = 0; j < S; j++) {
        PRT_CHECK(send_rows[j] >= 0, "alltoallv on axis %s: %d rows for rank %d", axis_label(rt, axis), send_rows[j],
                  j);
        counts[j] = count_of(send_rows[j] * inner, "alltoallv");
        sdispls[j] = count_of(sent * inner, "alltoallv");
        sent += send_rows[j];
    }
    arrive(rt, axis, "all-to-all (variable)");
    PRT_MPI_CHECK(MPI_Alltoall(send_rows, 1, MPI_INT32_T, recv_rows, 1, MPI_INT32_T, comm));
    for (int j = 0; j < S; j++) {
        rcounts[j] = count_of(recv_rows[j] * inner, "alltoallv");
        rdispls[j] = count_of(arrived * inner, "alltoallv");
        arrived += recv_rows[j];
    }
    if (arrived > out_rows) prt_alltoallv_overflow(rt, axis_label(rt, axis), arrived, out_rows);
    MPI_Datatype type = mpi_type(dtype);
    PRT_MPI_CHECK(MPI_Alltoallv(in, counts, sdispls, type, out, rcounts, rdispls, type, comm));
    prt_block_end();
    free(counts);
    PRT_TRACE_END(rt, "alltoallv", "comm", t, sent * inner * (int64_t)esize, axis);
}

/* A local slice on host memory (no MPI): the CPU backend's slice. */
void prt_mpi_slice(prt *rt, int64_t axis, void *out_, const void *in_, int64_t outer, int64_t inner, int64_t dtype) {
    size_t esize = prt_dtype_size(dtype);
    int S = prt_axis_size(rt, axis);
    double t = prt_trace_start(rt);
    char *out = out_;
    const char *in = in_;
    int64_t c = prt_coord(rt, axis);
    for (int64_t o = 0; o < outer; o++)
        memcpy(out + (size_t)(o * inner) * esize, in + (size_t)((o * S + c) * inner) * esize, (size_t)inner * esize);
    PRT_TRACE_END(rt, "slice", "op", t, -1, axis);
}

/* ---------------------------------------------------------------- pipeline */

static int peer_of(prt *rt, int64_t axis, int64_t delta) {
    int S = prt_axis_size(rt, axis);
    int64_t c = prt_coord(rt, axis);
    return (int)(((c + delta) % S + S) % S);
}

/* The world rank of coordinate `peer` on the axis (coordinates run last axis
 * fastest, prt_mesh.c; axis < 0: this rank): for the trace's flow arrows. */
static int world_rank_of(prt *rt, int64_t axis, int peer) {
    if (axis < 0 || axis >= rt->naxes) return rt->world_rank; /* point-to-point runs on mesh axes */
    int stride = 1;
    for (int a = rt->naxes - 1; a > axis; a--) stride *= rt->axis_size[a];
    return rt->world_rank + (peer - rt->coord[axis]) * stride;
}

/* Frees the slots whose sends have completed (non-blocking).  Testing is also
 * what moves a large message on: Open MPI sends its fragments from inside MPI
 * calls, so the op entry points call this while sends are pending
 * (prt_comm_progress), and a receiver is not kept waiting for a sender that
 * computes. */
static void reap_sends(prt *rt) {
    for (int i = 0; i < rt->nsend_slots && rt->sends_pending > 0; i++) {
        prt_send_slot *s = &rt->send_slots[i];
        if (s->request == MPI_REQUEST_NULL) continue;
        int done = 0;
        PRT_MPI_CHECK(MPI_Test(&s->request, &done, MPI_STATUS_IGNORE));
        if (done) rt->sends_pending--;
    }
}

void prt_comm_progress_sends(prt *rt) { reap_sends(rt); }

void prt_mpi_send(prt *rt, int64_t axis, int64_t delta, const void *buf, int64_t n, int64_t tag, int64_t dtype) {
    double t = prt_trace_start(rt);
    int count = count_of(n, "send");
    size_t bytes = (size_t)count * prt_dtype_size(dtype);
    PRT_CHECK(tag >= 0 && tag <= rt->tag_ub, "send: tag %lld outside [0, %d]", (long long)tag, rt->tag_ub);
    MPI_Comm comm = axis >= 0 ? prt_axis_comm(rt, axis) : MPI_COMM_SELF;
    reap_sends(rt);
    /* the free slot that fits best, else the largest free one (grown), else a new one */
    int pick = -1;
    for (int i = 0; i < rt->nsend_slots; i++) {
        prt_send_slot *s = &rt->send_slots[i];
        if (s->request != MPI_REQUEST_NULL) continue;
        if (pick < 0) { pick = i; continue; }
        prt_send_slot *p = &rt->send_slots[pick];
        int s_fits = s->capacity >= bytes, p_fits = p->capacity >= bytes;
        if ((s_fits && (!p_fits || s->capacity < p->capacity)) || (!s_fits && !p_fits && s->capacity > p->capacity))
            pick = i;
    }
    if (pick < 0) {
        rt->send_slots = prt_xrealloc(rt->send_slots, (size_t)(rt->nsend_slots + 1) * sizeof *rt->send_slots);
        pick = rt->nsend_slots++;
        rt->send_slots[pick] = (prt_send_slot){NULL, 0, MPI_REQUEST_NULL};
    }
    prt_send_slot *slot = &rt->send_slots[pick];
    if (slot->capacity < bytes) {
        free(slot->data);
        slot->data = prt_xmalloc(bytes);
        prt_ledger_book(rt, PRT_COMM, (int64_t)(bytes - slot->capacity));
        slot->capacity = bytes;
    }
    if (count) memcpy(slot->data, buf, bytes);
    PRT_MPI_CHECK(
        MPI_Isend(slot->data, count, mpi_type(dtype), peer_of(rt, axis, delta), (int)tag, comm, &slot->request));
    rt->sends_pending++;
    /* An evaluation only sends forward, so nothing here would reap its slots:
     * each send completes before the next work (its receiver is at the same
     * (micro-batch, chunk) or past it, prt_eval.c), keeping one slot in flight. */
    if (rt->eval_active) {
        prt_wait(rt, &slot->request, NULL, "a pipeline send of the evaluation", axis);
        rt->sends_pending--;
    }
    if (rt->tracing) {
        prt_trace_record(rt, "send", "p2p", t, (int64_t)bytes, axis);
        prt_trace_flow(rt, 's', rt->world_rank, world_rank_of(rt, axis, peer_of(rt, axis, delta)), tag);
    }
}

/* ---------------------------------------------------------------- receives posted ahead */

/* The schedule repeats every training step, so the receives of the last step,
 * in call order, say which comes next: once a receive is done the next one is
 * posted (MPI_Irecv) into a slot of its own (booked to PRT_COMM), tested
 * between ops like the sends (so the message moves while this rank computes),
 * and the recv call that names it waits for it there and copies it out.  MPI
 * matches the receives of one (source, tag, communicator) in the order they
 * were posted, so a receive posted ahead gets the very message its recv call
 * would have got, whenever that call comes (an evaluation's too); one that no
 * call claims is cancelled at prt_finalize. */

static int same_message(const prt_recv_key *a, const prt_recv_key *b) {
    return a->axis == b->axis && a->delta == b->delta && a->tag == b->tag;
}

static void post_ahead(prt *rt, const prt_recv_key *k) {
    prt_recv_ahead *ra = &rt->recv_ahead;
    if (ra->posted) return;  /* one slot: the one posted before is still unclaimed */
    int count = count_of(k->n, "recv");
    size_t bytes = (size_t)count * prt_dtype_size(k->dtype);
    if (ra->capacity < bytes) {
        free(ra->data);
        ra->data = prt_xmalloc(bytes);
        prt_ledger_book(rt, PRT_COMM, (int64_t)(bytes - ra->capacity));
        ra->capacity = bytes;
    }
    MPI_Comm comm = k->axis >= 0 ? prt_axis_comm(rt, k->axis) : MPI_COMM_SELF;
    PRT_MPI_CHECK(MPI_Irecv(ra->data, count, mpi_type(k->dtype), peer_of(rt, k->axis, k->delta), (int)k->tag, comm,
                            &ra->request));
    ra->key = *k;
    ra->posted = 1;
    ra->arrived = 0;
    rt->recv_ahead_pending = 1;
}

void prt_comm_progress_recv(prt *rt) {
    prt_recv_ahead *ra = &rt->recv_ahead;
    if (!ra->posted || ra->arrived) return;
    int done = 0;
    MPI_Status status;
    PRT_MPI_CHECK(MPI_Test(&ra->request, &done, &status));
    if (!done) return;
    PRT_MPI_CHECK(MPI_Get_count(&status, mpi_type(ra->key.dtype), &ra->got));
    ra->arrived = 1;
    rt->recv_ahead_pending = 0;
}

/* The claimed receive posted ahead, waited for (watched) and copied to buf;
 * returns its element count. */
static int claim_ahead(prt *rt, void *buf, int64_t axis, int64_t dtype) {
    prt_recv_ahead *ra = &rt->recv_ahead;
    if (!ra->arrived) {
        MPI_Status status;
        prt_wait(rt, &ra->request, &status, "pipeline receive", axis);
        PRT_MPI_CHECK(MPI_Get_count(&status, mpi_type(ra->key.dtype), &ra->got));
        ra->arrived = 1;
        rt->recv_ahead_pending = 0;
    }
    PRT_CHECK(ra->key.dtype == dtype, "recv on axis %s (tag %lld): the message posted ahead was %s, the call asks %s",
              axis_label(rt, axis), (long long)ra->key.tag, prt_dtype_names[ra->key.dtype], prt_dtype_names[dtype]);
    if (ra->got > 0) memcpy(buf, ra->data, (size_t)ra->got * prt_dtype_size(dtype));
    ra->posted = ra->arrived = 0;
    return ra->got;
}

/* After a training step's receive: it is this step's next, and the next of
 * the last step's sequence is posted (after the last, the next step's first). */
static void recv_done(prt *rt, const prt_recv_key *k) {
    if (rt->eval_active) return;
    if (rt->nrecv_now == rt->recv_cap) {
        rt->recv_cap = rt->recv_cap ? 2 * rt->recv_cap : 16;
        rt->recv_now = prt_xrealloc(rt->recv_now, (size_t)rt->recv_cap * sizeof *rt->recv_now);
        rt->recv_seq = prt_xrealloc(rt->recv_seq, (size_t)rt->recv_cap * sizeof *rt->recv_seq);
    }
    rt->recv_now[rt->nrecv_now++] = *k;
    if (rt->nrecv_seq > 0) post_ahead(rt, &rt->recv_seq[rt->nrecv_now % rt->nrecv_seq]);
}

void prt_comm_recv_step_end(prt *rt) {
    if (!rt->nrecv_now) return;
    prt_recv_key *t = rt->recv_seq;
    rt->recv_seq = rt->recv_now;
    rt->recv_now = t;
    rt->nrecv_seq = rt->nrecv_now;
    rt->nrecv_now = 0;
}

void prt_mpi_recv(prt *rt, int64_t axis, int64_t delta, void *buf, int64_t n, int64_t tag, int64_t dtype) {
    double t = prt_trace_start(rt);
    int count = count_of(n, "recv");
    MPI_Datatype type = mpi_type(dtype);
    PRT_CHECK(tag >= 0 && tag <= rt->tag_ub, "recv: tag %lld outside [0, %d]", (long long)tag, rt->tag_ub);
    prt_recv_key key = {axis, delta, n, tag, dtype};
    int got = -1;
    if (rt->recv_ahead.posted && same_message(&rt->recv_ahead.key, &key)) {
        got = claim_ahead(rt, buf, axis, dtype);
    } else {
        MPI_Comm comm = axis >= 0 ? prt_axis_comm(rt, axis) : MPI_COMM_SELF;
        MPI_Status status;
        MPI_Request req;
        PRT_MPI_CHECK(MPI_Irecv(buf, count, type, peer_of(rt, axis, delta), (int)tag, comm, &req));
        prt_wait(rt, &req, &status, "pipeline receive", axis);
        PRT_MPI_CHECK(MPI_Get_count(&status, type, &got));
    }
    PRT_CHECK(got == count, "recv on axis %s (tag %lld): expected %d %s elements, got %d", axis_label(rt, axis),
              (long long)tag, count, prt_dtype_names[dtype], got);
    reap_sends(rt);
    recv_done(rt, &key);
    if (rt->tracing) {
        prt_trace_record(rt, "recv", "p2p", t, n * (int64_t)prt_dtype_size(dtype), axis);
        prt_trace_flow(rt, 'f', world_rank_of(rt, axis, peer_of(rt, axis, delta)), rt->world_rank, tag);
    }
}

void prt_comm_complete_sends(prt *rt) {
    for (int i = 0; i < rt->nsend_slots; i++) {
        prt_send_slot *s = &rt->send_slots[i];
        if (s->request == MPI_REQUEST_NULL) continue;
        prt_wait(rt, &s->request, NULL, "completing a pipeline send", -1);
        rt->sends_pending--;
    }
}

void prt_comm_free(prt *rt) {
    prt_recv_ahead *ra = &rt->recv_ahead;
    if (ra->posted && !ra->arrived) {  /* posted ahead and never claimed: no message is coming */
        PRT_MPI_CHECK(MPI_Cancel(&ra->request));
        PRT_MPI_CHECK(MPI_Wait(&ra->request, MPI_STATUS_IGNORE));
    }
    free(ra->data);
    *ra = (prt_recv_ahead){NULL, 0, MPI_REQUEST_NULL, {0, 0, 0, 0, 0}, 0, 0, 0};
    rt->recv_ahead_pending = 0;
    free(rt->recv_seq);
    free(rt->recv_now);
    rt->recv_seq = rt->recv_now = NULL;
    rt->nrecv_seq = rt->nrecv_now = rt->recv_cap = 0;
    for (int i = 0; i < rt->nsend_slots; i++) free(rt->send_slots[i].data);
    free(rt->send_slots);
    rt->send_slots = NULL;
    rt->nsend_slots = 0;
    prt_comm_inflight_free(rt);
    if (rt->have_sum_ops) {
        MPI_Op_free(&rt->sum_bf16);
        MPI_Op_free(&rt->sum_f16);
        rt->have_sum_ops = 0;
    }
}
