/*
 * prt_overlap.c — collectives that overlap computation: allreduce_start,
 * reducescatter_start, allgather_start, shift_start and comm_wait (parc_rt.h), and the
 * table of collectives in flight they share with the backends.
 *
 * A backend's *_start posts its collective and registers the request here
 * (prt_comm_post), or the state of a ring it drives itself step by step
 * (prt_comm_post_ring: the MPI backend's reduce-scatter and all-gather); a backend whose
 * collectives overlap by other means (the CUDA backend enqueues it on NCCL's
 * stream and records an event) registers nothing, the entry point then
 * records it as complete, and comm_wait asks the backend to order what
 * follows after it (prt_backend.comm_wait).  While requests (or pipeline
 * sends) are in flight, every op entry point first calls prt_comm_progress,
 * which tests them (MPI_Test drives Open MPI's nonblocking collectives, which
 * make no progress on their own), moves each ring on to its next step, and
 * records each one's trace span when it completes: from its start to the
 * test that saw it done, on the
 * communication track.  comm_wait(buf) completes the one collective posted on
 * buf through a watched wait (prt_wait), charging its time to exposed
 * communication; the trace shows it as a span of category "wait" on the
 * compute thread, named and sized as the collective.  A step that ends with a collective in flight is a runtime
 * error: the compiler's verifier guarantees each start its wait.
 */
#include <stdlib.h>

#include "prt_backend.h"
#include "prt_internal.h"

/* The in-flight entry on buf, or -1. */
static int find(prt *rt, const void *buf) {
    for (int i = 0; i < rt->ninflight; i++)
        if (rt->inflight[i].buf == buf) return i;
    return -1;
}

/* Registers a collective in flight on buf: an MPI request, or a ring the
 * MPI backend drives (ring non-NULL, request unused); MPI_REQUEST_NULL and
 * no ring: already complete. */
static void post(prt *rt, const void *buf, MPI_Request request, struct prt_ring *ring, const char *name,
                 int64_t bytes, int64_t axis, double start) {
    PRT_CHECK(find(rt, buf) < 0, "%s started on a buffer whose %s is still in flight", name,
              rt->inflight[find(rt, buf)].name);
    if (rt->ninflight == rt->inflight_cap) {
        rt->inflight_cap = rt->inflight_cap ? 2 * rt->inflight_cap : 64;
        rt->inflight = prt_xrealloc(rt->inflight, (size_t)rt->inflight_cap * sizeof *rt->inflight);
    }
    int done = request == MPI_REQUEST_NULL && !ring;
    rt->inflight[rt->ninflight++] = (prt_inflight){buf, request, name, bytes, axis, start, done, NULL, ring};
    if (!done) rt->inflight_pending++;
}

void prt_comm_post(prt *rt, const void *buf, MPI_Request request, const char *name, int64_t bytes, int64_t axis,
                   double start) {
    post(rt, buf, request, NULL, name, bytes, axis, start);
}

void prt_comm_post_ring(prt *rt, const void *buf, struct prt_ring *ring, const char *name, int64_t bytes,
                        int64_t axis, double start) {
    post(rt, buf, MPI_REQUEST_NULL, ring, name, bytes, axis, start);
}

void prt_comm_keep(prt *rt, const void *buf, void *owned) {
    int i = find(rt, buf);
    PRT_CHECK(i >= 0 && !rt->inflight[i].owned, "comm_keep: no collective of its own in flight on the buffer");
    rt->inflight[i].owned = owned;
}

/* Marks entry f complete: its span in the trace ends now, on the first lane
 * free since its start (the last lane when all are busy). */
static void completed(prt *rt, prt_inflight *f) {
    f->done = 1;
    rt->inflight_pending--;
    if (!rt->tracing) return;
    int lane = 1;
    while (lane < PRT_TRACE_LANES && lane <= rt->trace_lanes && rt->lane_end[lane] > f->start) lane++;
    if (lane > rt->trace_lanes) rt->trace_lanes = lane;
    prt_trace_record(rt, f->name, "comm", f->start, f->bytes, f->axis);
    rt->events[rt->nevents - 1].lane = lane;
    rt->lane_end[lane] = MPI_Wtime();
}

void prt_comm_progress(prt *rt) {
    if (rt->sends_pending > 0) prt_comm_progress_sends(rt);
    if (rt->recv_ahead_pending) prt_comm_progress_recv(rt);
    int blocked = 0; /* an MPI request not done: MPI_Test progressed every one, test the later ones next time */
    for (int i = 0; i < rt->ninflight && rt->inflight_pending > 0; i++) {
        prt_inflight *f = &rt->inflight[i];
        if (f->done) continue;
        int done = 0;
        if (f->ring) done = prt_mpi_ring_advance(rt, f->ring, 0); /* each ring posts its own next step */
        else if (!blocked) {
            PRT_MPI_CHECK(MPI_Test(&f->request, &done, MPI_STATUS_IGNORE));
            blocked = !done;
        }
        if (done) completed(rt, f);
    }
}

void prt_comm_check_idle(prt *rt, const char *where) {
    PRT_CHECK(rt->ninflight == 0, "%s: %d collective(s) still in flight, the first %s of %lld bytes on axis %lld",
              where, rt->ninflight, rt->ninflight ? rt->inflight[0].name : "",
              rt->ninflight ? (long long)rt->inflight[0].bytes : 0LL,
              rt->ninflight ? (long long)rt->inflight[0].axis : 0LL);
}

/* Records a start the backend finished itself (or a size-1 axis). */
static void post_if_finished(prt *rt, int before, const void *buf, const char *name, int64_t bytes, int64_t axis,
                             double start) {
    if (rt->ninflight == before) prt_comm_post(rt, buf, MPI_REQUEST_NULL, name, bytes, axis, start);
    PRT_CHECK(rt->ninflight == before + 1 && rt->inflight[before].buf == buf,
              "%s: the backend registered something else than its collective", name);
}

void prt_allreduce_start(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtypes) {
    double start = MPI_Wtime();
    int64_t dtype = prt_comm_dtype(rt, dtypes, buf, NULL, "allreduce_start");
    int before = rt->ninflight;
    if (prt_axis_size(rt, axis) > 1 && n > 0) rt->backend->allreduce_start(rt, axis, buf, n, dtype);
    post_if_finished(rt, before, buf, "allreduce", n * (int64_t)prt_dtype_size(dtype), axis, start);
    prt_phase_charge(rt, PRT_PHASE_COMM, start);
}

void prt_reducescatter_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                             int64_t dtypes) {
    double start = MPI_Wtime();
    int64_t dtype = prt_comm_dtype(rt, dtypes, out, in, "reducescatter_start");
    PRT_CHECK(outer >= 1, "reducescatter_start: outer %lld", (long long)outer);
    int before = rt->ninflight;
    int S = prt_axis_size(rt, axis);
    if (S > 1) rt->backend->reducescatter_start(rt, axis, out, in, outer, inner, dtype);
    else if (inner > 0 && out != in)
        rt->backend->copy_bytes(rt, out, in, (size_t)(outer * inner) * prt_dtype_size(dtype));
    post_if_finished(rt, before, out, "reducescatter", (int64_t)S * outer * inner * (int64_t)prt_dtype_size(dtype),
                     axis, start);
    prt_phase_charge(rt, PRT_PHASE_COMM, start);
}

void prt_allgather_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                         int64_t dtypes) {
    double start = MPI_Wtime();
    int64_t dtype = prt_comm_dtype(rt, dtypes, out, in, "allgather_start");
    PRT_CHECK(outer == 1, "allgather_start: outer %lld (only whole blocks, outer 1, are started)", (long long)outer);
    int before = rt->ninflight;
    int S = prt_axis_size(rt, axis);
    if (S > 1) rt->backend->allgather_start(rt, axis, out, in, outer, inner, dtype);
    else if (inner > 0 && out != in) rt->backend->copy_bytes(rt, out, in, (size_t)inner * prt_dtype_size(dtype));
    post_if_finished(rt, before, out, "allgather", (int64_t)S * inner * (int64_t)prt_dtype_size(dtype), axis, start);
    prt_phase_charge(rt, PRT_PHASE_COMM, start);
}

void prt_shift_start(prt *rt, int64_t axis, void *out, const void *in, int64_t n, int64_t dtypes) {
    double start = MPI_Wtime();
    int64_t dtype = prt_comm_dtype(rt, dtypes, out, in, "shift_start");
    PRT_CHECK(n >= 0 && out != in, "shift_start: %lld elements, in %s out", (long long)n,
              out == in ? "the same buffer as" : "apart from");
    int before = rt->ninflight;
    if (prt_axis_size(rt, axis) > 1) rt->backend->shift_start(rt, axis, out, in, n, dtype);
    else if (n > 0) rt->backend->copy_bytes(rt, out, in, (size_t)n * prt_dtype_size(dtype));
    post_if_finished(rt, before, out, "shift", n * (int64_t)prt_dtype_size(dtype), axis, start);
    prt_phase_charge(rt, PRT_PHASE_COMM, start);
}

void prt_comm_wait(prt *rt, void *buf) {
    double start = MPI_Wtime();
    int i = find(rt, buf);
    PRT_CHECK(i >= 0, "comm_wait: no collective is in flight on this buffer");
    prt_inflight *f = &rt->inflight[i];
    const char *name = f->name;
    int64_t bytes = f->bytes, axis = f->axis;
    if (!f->done) {
        if (f->ring) prt_mpi_ring_advance(rt, f->ring, 1);
        else prt_wait(rt, &f->request, NULL, f->name, f->axis);
        completed(rt, f);
    }
    free(f->owned);
    prt_mpi_ring_free(f->ring);
    for (int k = i + 1; k < rt->ninflight; k++) rt->inflight[k - 1] = rt->inflight[k];
    rt->ninflight--;
    if (rt->backend->comm_wait) rt->backend->comm_wait(rt, buf);
    PRT_TRACE_END(rt, name, "wait", start, bytes, axis);
    prt_phase_charge(rt, PRT_PHASE_COMM, start);
}

void prt_comm_inflight_free(prt *rt) {
    for (int i = 0; i < rt->ninflight; i++) {
        free(rt->inflight[i].owned);
        prt_mpi_ring_free(rt->inflight[i].ring);
    }
    free(rt->inflight);
    rt->inflight = NULL;
    rt->ninflight = rt->inflight_cap = rt->inflight_pending = 0;
}
