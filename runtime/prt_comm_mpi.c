/*
 * prt_comm_mpi.c — collectives on one mesh axis and pipeline send/recv, over MPI.
 *
 * Layouts are parc_rt.h's [outer, S, inner].  With outer == 1 the MPI call works on
 * the caller's buffers directly; with outer > 1 the blocks are packed to or from
 * one staging buffer (outer*S*inner floats, booked to PRT_COMM, grown rarely).
 * Pipeline sends copy into send slots (booked to PRT_COMM) and MPI_Isend; a slot
 * is reused once MPI_Test says its send completed; every send is completed at
 * prt_step_end and prt_finalize.  An axis < 0 or of size 1 is a local copy.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"

static int count_of(int64_t n, const char *what) {
    PRT_CHECK(n >= 0 && n <= INT_MAX, "%s: %lld elements do not fit one MPI call", what, (long long)n);
    return (int)n;
}

static void local_copy(void *out, const void *in, int64_t n) {
    if (n > 0 && out != in) memmove(out, in, (size_t)n * sizeof(float));
}

static const char *axis_label(prt *rt, int64_t axis) {
    return axis >= 0 && axis < rt->naxes && rt->plan.axis_names[axis] ? rt->plan.axis_names[axis] : "?";
}

void prt_allreduce(prt *rt, int64_t axis, void *buf, int64_t n) {
    int S = prt_axis_size(rt, axis);
    if (S == 1 || n == 0) return;
    double t = prt_trace_start(rt);
    prt_block_begin("all-reduce", axis);
    PRT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, count_of(n, "allreduce"), MPI_FLOAT, MPI_SUM,
                                prt_axis_comm(rt, axis)));
    prt_block_end();
    PRT_TRACE_END(rt, "allreduce", "comm", t, n * 4, axis);
}

void prt_allgather(prt *rt, int64_t axis, void *out_, const void *in, int64_t outer, int64_t inner) {
    int S = prt_axis_size(rt, axis);
    if (S == 1) {
        local_copy(out_, in, outer * inner);
        return;
    }
    double t = prt_trace_start(rt);
    float *out = out_;
    int block = count_of(outer * inner, "allgather");
    prt_block_begin("all-gather", axis);
    if (outer == 1) {
        PRT_MPI_CHECK(MPI_Allgather(in, block, MPI_FLOAT, out, block, MPI_FLOAT, prt_axis_comm(rt, axis)));
    } else {
        float *stage = prt_comm_stage(rt, (size_t)S * (size_t)block);  /* [S, outer, inner] */
        PRT_MPI_CHECK(MPI_Allgather(in, block, MPI_FLOAT, stage, block, MPI_FLOAT, prt_axis_comm(rt, axis)));
        for (int s = 0; s < S; s++)
            for (int64_t o = 0; o < outer; o++)
                memcpy(out + (o * S + s) * inner, stage + ((size_t)s * outer + o) * inner, (size_t)inner * sizeof(float));
    }
    prt_block_end();
    PRT_TRACE_END(rt, "allgather", "comm", t, (int64_t)S * block * 4, axis);
}

void prt_reducescatter(prt *rt, int64_t axis, void *out, const void *in_, int64_t outer, int64_t inner) {
    int S = prt_axis_size(rt, axis);
    if (S == 1) {
        local_copy(out, in_, outer * inner);
        return;
    }
    double t = prt_trace_start(rt);
    const float *in = in_;
    int block = count_of(outer * inner, "reducescatter");
    count_of((int64_t)S * block, "reducescatter");
    const float *send = in;
    if (outer > 1) {
        float *stage = prt_comm_stage(rt, (size_t)S * (size_t)block);  /* [S, outer, inner] */
        for (int s = 0; s < S; s++)
            for (int64_t o = 0; o < outer; o++)
                memcpy(stage + ((size_t)s * outer + o) * inner, in + (o * S + s) * inner, (size_t)inner * sizeof(float));
        send = stage;
    }
    prt_block_begin("reduce-scatter", axis);
    PRT_MPI_CHECK(MPI_Reduce_scatter_block(send, out, block, MPI_FLOAT, MPI_SUM, prt_axis_comm(rt, axis)));
    prt_block_end();
    PRT_TRACE_END(rt, "reducescatter", "comm", t, (int64_t)S * block * 4, axis);
}

void prt_alltoall(prt *rt, int64_t axis, void *out, const void *in_, int64_t outer, int64_t inner) {
    int S = prt_axis_size(rt, axis);
    if (S == 1) {
        local_copy(out, in_, outer * inner);
        return;
    }
    double t = prt_trace_start(rt);
    const float *in = in_;
    int block = count_of(outer * inner, "alltoall");
    count_of((int64_t)S * block, "alltoall");
    const float *send = in;
    if (outer > 1) {
        float *stage = prt_comm_stage(rt, (size_t)S * (size_t)block);  /* [S, outer, inner]: block j for rank j */
        for (int s = 0; s < S; s++)
            for (int64_t o = 0; o < outer; o++)
                memcpy(stage + ((size_t)s * outer + o) * inner, in + (o * S + s) * inner, (size_t)inner * sizeof(float));
        send = stage;
    }
    prt_block_begin("all-to-all", axis);
    PRT_MPI_CHECK(MPI_Alltoall(send, block, MPI_FLOAT, out, block, MPI_FLOAT, prt_axis_comm(rt, axis)));
    prt_block_end();
    PRT_TRACE_END(rt, "alltoall", "comm", t, (int64_t)S * block * 4, axis);
}

void prt_slice(prt *rt, int64_t axis, void *out_, const void *in_, int64_t outer, int64_t inner) {
    int S = prt_axis_size(rt, axis);
    if (S == 1) {
        local_copy(out_, in_, outer * inner);
        return;
    }
    double t = prt_trace_start(rt);
    float *out = out_;
    const float *in = in_;
    int64_t c = prt_coord(rt, axis);
    for (int64_t o = 0; o < outer; o++) memcpy(out + o * inner, in + (o * S + c) * inner, (size_t)inner * sizeof(float));
    PRT_TRACE_END(rt, "slice", "op", t, -1, axis);
}

/* ---------------------------------------------------------------- pipeline */

static int peer_of(prt *rt, int64_t axis, int64_t delta) {
    int S = prt_axis_size(rt, axis);
    int64_t c = prt_coord(rt, axis);
    return (int)(((c + delta) % S + S) % S);
}

/* Frees the slots whose sends have completed (non-blocking). */
static void reap_sends(prt *rt) {
    for (int i = 0; i < rt->nsend_slots; i++) {
        prt_send_slot *s = &rt->send_slots[i];
        if (s->request == MPI_REQUEST_NULL) continue;
        int done = 0;
        PRT_MPI_CHECK(MPI_Test(&s->request, &done, MPI_STATUS_IGNORE));
    }
}

void prt_send(prt *rt, int64_t axis, int64_t delta, const void *buf, int64_t n, int64_t tag) {
    double t = prt_trace_start(rt);
    int count = count_of(n, "send");
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
        int s_fits = s->capacity >= (size_t)count, p_fits = p->capacity >= (size_t)count;
        if ((s_fits && (!p_fits || s->capacity < p->capacity)) || (!s_fits && !p_fits && s->capacity > p->capacity))
            pick = i;
    }
    if (pick < 0) {
        rt->send_slots = prt_xrealloc(rt->send_slots, (size_t)(rt->nsend_slots + 1) * sizeof *rt->send_slots);
        pick = rt->nsend_slots++;
        rt->send_slots[pick] = (prt_send_slot){NULL, 0, MPI_REQUEST_NULL};
    }
    prt_send_slot *slot = &rt->send_slots[pick];
    if (slot->capacity < (size_t)count) {
        free(slot->data);
        slot->data = prt_xmalloc((size_t)count * sizeof(float));
        prt_ledger_book(rt, PRT_COMM, (int64_t)(((size_t)count - slot->capacity) * sizeof(float)));
        slot->capacity = (size_t)count;
    }
    if (count) memcpy(slot->data, buf, (size_t)count * sizeof(float));
    PRT_MPI_CHECK(MPI_Isend(slot->data, count, MPI_FLOAT, peer_of(rt, axis, delta), (int)tag, comm, &slot->request));
    PRT_TRACE_END(rt, "send", "p2p", t, n * 4, axis);
}

void prt_recv(prt *rt, int64_t axis, int64_t delta, void *buf, int64_t n, int64_t tag) {
    double t = prt_trace_start(rt);
    int count = count_of(n, "recv");
    PRT_CHECK(tag >= 0 && tag <= rt->tag_ub, "recv: tag %lld outside [0, %d]", (long long)tag, rt->tag_ub);
    MPI_Comm comm = axis >= 0 ? prt_axis_comm(rt, axis) : MPI_COMM_SELF;
    MPI_Status status;
    prt_block_begin("pipeline receive", axis);
    PRT_MPI_CHECK(MPI_Recv(buf, count, MPI_FLOAT, peer_of(rt, axis, delta), (int)tag, comm, &status));
    prt_block_end();
    int got = -1;
    PRT_MPI_CHECK(MPI_Get_count(&status, MPI_FLOAT, &got));
    PRT_CHECK(got == count, "recv on axis %s (tag %lld): expected %d floats, got %d", axis_label(rt, axis),
              (long long)tag, count, got);
    reap_sends(rt);
    PRT_TRACE_END(rt, "recv", "p2p", t, n * 4, axis);
}

void prt_comm_complete_sends(prt *rt) {
    for (int i = 0; i < rt->nsend_slots; i++) {
        prt_send_slot *s = &rt->send_slots[i];
        if (s->request == MPI_REQUEST_NULL) continue;
        prt_block_begin("completing a pipeline send", -1);
        PRT_MPI_CHECK(MPI_Wait(&s->request, MPI_STATUS_IGNORE));
        prt_block_end();
    }
}

void prt_comm_free(prt *rt) {
    for (int i = 0; i < rt->nsend_slots; i++) free(rt->send_slots[i].data);
    free(rt->send_slots);
    rt->send_slots = NULL;
    rt->nsend_slots = 0;
}
