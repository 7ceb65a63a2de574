/*
 * prt_cuda.cu — the CUDA backend's lifecycle, device memory and communication.
 *
 * One rank per GPU: device = local rank % visible devices.  Every op runs on one
 * stream (c->stream), in program order, so the CPU path's semantics hold without
 * any host synchronisation; the host waits only where it needs a value (the loss,
 * data uploads, dumps, MPI staging, step ends).
 *
 * Collectives (same [outer, S, inner] layouts as prt_mpi.c):
 *   nccl: one communicator per mesh axis (ncclCommInitRank, its unique id
 *         broadcast over the axis' MPI communicator) running on a communication
 *         stream that waits for the compute stream through an event and is waited
 *         for the same way; [outer, S, inner] packing is cudaMemcpy2DAsync through
 *         a device stage booked to PRT_COMM (the CPU path's packing buffer).
 *   mpi:  host-staged: copy to the host, the CPU runtime's MPI code
 *         (prt_mpi_*), copy back.  Works with any number of ranks per GPU.
 * One table (cu_collectives) describes each collective's block counts, packing
 * and its call on either path, and one function (cu_collective_run) runs them.
 * PRT_COLLECTIVES=nccl|mpi chooses; the default is nccl unless two ranks of a
 * node share a device (or the runtime was built without NCCL), then mpi.
 * Pipeline send/recv always take the host-staged MPI path (buffered sends as on
 * the CPU; NCCL point-to-point would block a send until its receive is posted).
 */
#include <stdlib.h>
#include <string.h>

#include "prt_cuda.h"
#include "prt_cuda_pack.h"

/* ---------------------------------------------------------------- errors */

void prt_cuda_fail(const char *file, int line, const char *call, cudaError_t err) {
    prt_fail(file, line, "CUDA call failed: %s: %s (%s)", call, cudaGetErrorString(err), cudaGetErrorName(err));
}

/* PRT_CUDA_SYNC=1 (read at prt_cuda_init): every kernel launch is followed by a
 * device synchronisation, so a failing kernel is named where it ran instead of
 * at the next synchronising call. */
static int g_sync_every_launch;

void prt_cuda_launch_check(const char *file, int line, const char *op) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && g_sync_every_launch) err = cudaDeviceSynchronize();
    if (err != cudaSuccess) prt_cuda_fail(file, line, op, err);
}

void prt_cublas_fail(const char *file, int line, const char *call, cublasStatus_t st) {
    prt_fail(file, line, "cuBLAS call failed: %s: %s", call, cublasGetStatusString(st));
}

#ifdef PRT_HAVE_NCCL
void prt_nccl_fail(const char *file, int line, const char *call, ncclResult_t res) {
    prt_fail(file, line, "NCCL call failed: %s: %s (%s)", call, ncclGetErrorString(res), ncclGetLastError(NULL));
}
#endif

void prt_cuda_require_shape(prt *rt, const char *op, int nargs, const int64_t *args) {
    prt_cuda_op_shape shape;
    memset(&shape, 0, sizeof shape);
    shape.op = op;
    shape.nargs = nargs < PRT_CUDA_MAX_SHAPE_ARGS ? nargs : PRT_CUDA_MAX_SHAPE_ARGS;
    memcpy(shape.args, args, (size_t)shape.nargs * sizeof *args);
    char why[512];
    if (!prt_cuda_shape_ok(&shape, &prt_cu(rt)->limits, why, sizeof why))
        prt_fail(__FILE__, __LINE__, "the CUDA backend cannot run %s", why);
}

/* ---------------------------------------------------------------- lifecycle */

int prt_cuda_probe(char *error, size_t error_size) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaSuccess) return n;
    cudaGetLastError();  /* clear it */
    if (err == cudaErrorNoDevice) return 0;
    if (error && error_size) snprintf(error, error_size, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
    return -1;
}

int prt_cuda_device_count(void) {
    int n = prt_cuda_probe(NULL, 0);
    return n > 0 ? n : 0;
}

static long env_long(const char *name, long fallback) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : fallback;
}

void prt_cuda_init(prt *rt) {
    PRT_CHECK(!rt->cuda, "prt_cuda_init called twice");
    prt_cuda *c = (prt_cuda *)prt_xcalloc(1, sizeof *c);
    rt->cuda = c;
    char error[256] = "no CUDA device";
    c->devices = prt_cuda_probe(error, sizeof error);
    PRT_CHECK(c->devices > 0, "the CUDA backend: no usable device for rank %d: %s", rt->world_rank, error);

    MPI_Comm local;
    PRT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    PRT_MPI_CHECK(MPI_Comm_rank(local, &c->local_rank));
    PRT_MPI_CHECK(MPI_Comm_size(local, &c->local_ranks));
    MPI_Comm_free(&local);
    c->device = c->local_rank % c->devices;
    PRT_CUDA_CHECK(cudaSetDevice(c->device));
    cudaDeviceProp prop;
    PRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, c->device));
    snprintf(c->name, sizeof c->name, "%s", prop.name);
    c->limits.grid_x = prop.maxGridSize[0];
    c->limits.grid_y = prop.maxGridSize[1];
    c->limits.smem_per_block = (int64_t)prop.sharedMemPerBlock;
    /* every op call of the program against the device, before anything is allocated */
    char why[512];
    if (prt_cuda_check_op_shapes(rt->plan.op_shapes, rt->plan.nop_shapes, &c->limits, why, sizeof why) >= 0)
        prt_user_fail(1, "the CUDA backend cannot run this plan on %s (device %d): %s", c->name, c->device, why);

    PRT_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    PRT_CUDA_CHECK(cudaStreamCreateWithFlags(&c->comm_stream, cudaStreamNonBlocking));
    PRT_CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_compute, cudaEventDisableTiming));
    PRT_CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_comm, cudaEventDisableTiming));
    PRT_CUBLAS_CHECK(cublasCreate(&c->blas));
    PRT_CUBLAS_CHECK(cublasSetStream(c->blas, c->stream));
    /* cuBLAS gets no device memory of its own unless asked: the ledger stays exact.
     * Without PRT_CUBLAS_WORKSPACE_MB each GEMM lends it the device workspace
     * (prt_cuda_blas_workspace), which the ledger budgets. */
    long ws_mb = env_long("PRT_CUBLAS_WORKSPACE_MB", 0);
    if (ws_mb > 0) {
        c->blas_ws_bytes = (size_t)ws_mb << 20;
        PRT_CUDA_CHECK(cudaMalloc(&c->blas_ws, c->blas_ws_bytes));
        prt_ledger_book(rt, PRT_WORKSPACE, (int64_t)c->blas_ws_bytes);
    }
    PRT_CUBLAS_CHECK(cublasSetWorkspace(c->blas, c->blas_ws, c->blas_ws_bytes));
    c->tf32 = env_long("PRT_CUDA_TF32", 0) != 0;
    g_sync_every_launch = env_long("PRT_CUDA_SYNC", 0) != 0;

    /* collectives: PRT_COLLECTIVES, else nccl unless ranks share a device */
    const char *want = getenv("PRT_COLLECTIVES");
    int shared = c->local_ranks > c->devices, forced = 0;
    if (want && *want) {
        PRT_CHECK(!strcmp(want, "nccl") || !strcmp(want, "mpi"), "PRT_COLLECTIVES must be nccl or mpi, got '%s'", want);
        c->nccl = !strcmp(want, "nccl");
        forced = c->nccl;
    } else {
        c->nccl = !shared;
    }
#ifndef PRT_HAVE_NCCL
    PRT_CHECK(!forced, "PRT_COLLECTIVES=nccl: this runtime was built without NCCL");
    c->nccl = 0;
#else
    if (c->nccl) {
        /* one communicator per axis; every rank creates them in axis order */
        for (int a = 0; a < rt->ncomms; a++) {
            int S = rt->axis_size[a];
            if (S == 1 && !forced) continue;
            ncclUniqueId id;
            if (rt->coord[a] == 0) PRT_NCCL_CHECK(ncclGetUniqueId(&id));
            PRT_MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, rt->axis_comm[a]));
            prt_block_begin("NCCL communicator setup", a);
            PRT_NCCL_CHECK(ncclCommInitRank(&c->comm[a], S, id, rt->coord[a]));
            prt_block_end();
        }
    }
#endif
    if (rt->world_rank == 0 && !rt->quiet) {
        printf("parc: cuda: %d rank%s on %d x %s (%d rank%s per node), collectives %s%s\n", rt->world_size,
               rt->world_size == 1 ? "" : "s", c->devices, c->name, c->local_ranks, c->local_ranks == 1 ? "" : "s",
               c->nccl ? "nccl" : "mpi (host-staged)", shared ? "; ranks share a GPU" : "");
        fflush(stdout);
    }
}

void prt_cuda_finalize(prt *rt) {
    prt_cuda *c = rt->cuda;
    if (!c) return;
    PRT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    PRT_CUDA_CHECK(cudaStreamSynchronize(c->comm_stream));
#ifdef PRT_HAVE_NCCL
    for (int a = 0; a < PRT_MAX_AXES; a++)
        if (c->comm[a]) PRT_NCCL_CHECK(ncclCommDestroy(c->comm[a]));
#endif
    PRT_CUBLAS_CHECK(cublasDestroy(c->blas));
    cudaFree(c->work);
    cudaFree(c->stage);
    cudaFree(c->blas_ws);
    cudaEventDestroy(c->ev_compute);
    cudaEventDestroy(c->ev_comm);
    for (int i = 0; i < c->started_events; i++) cudaEventDestroy(c->started[i].ev);
    free(c->started);
    cudaStreamDestroy(c->stream);
    cudaStreamDestroy(c->comm_stream);
    if (c->host) cudaFreeHost(c->host);
    free(c);
    rt->cuda = NULL;
}

void prt_cuda_sync(prt *rt) { PRT_CUDA_CHECK(cudaStreamSynchronize(prt_cu(rt)->stream)); }

const char *prt_cuda_collectives(prt *rt) { return prt_cu(rt)->nccl ? "nccl" : "mpi"; }

/* ---------------------------------------------------------------- memory */

char *prt_cuda_alloc_zero(prt *rt, size_t bytes, const char *what) {
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        prt_fail(__FILE__, __LINE__, "cudaMalloc of %zu bytes (%s) failed: %s (device has %zu of %zu bytes free)", bytes,
                 what, cudaGetErrorString(err), free_b, total_b);
    }
    PRT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, prt_cu(rt)->stream));
    return (char *)p;
}

size_t prt_cuda_memory_bytes(prt *rt) {
    (void)rt;
    size_t free_b = 0, total_b = 0;
    PRT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return total_b;
}

void prt_cuda_free(void *p) {
    if (p) PRT_CUDA_CHECK(cudaFree(p));
}

void prt_cuda_h2d(prt *rt, void *dst, const void *src, size_t bytes) {
    prt_cuda *c = prt_cu(rt);
    if (!bytes) return;
    PRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    PRT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

void prt_cuda_d2h(prt *rt, void *dst, const void *src, size_t bytes) {
    prt_cuda *c = prt_cu(rt);
    if (!bytes) return;
    PRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    PRT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

void prt_cuda_memset(prt *rt, void *dst, int byte, size_t bytes) {
    if (bytes) PRT_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, prt_cu(rt)->stream));
}

void *prt_cuda_host_copy(prt *rt, const void *dev, size_t bytes) {
    void *h = prt_xmalloc(bytes);
    prt_cuda_d2h(rt, h, dev, bytes);
    return h;
}

void prt_cu_copy_bytes(prt *rt, void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src)
        PRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, prt_cu(rt)->stream));
}

/* Device scratch that grows to exactly the largest request (booked like the CPU's). */
static void *grow_device(prt *rt, void **buf, size_t *cap, size_t want, size_t unit, int64_t klass) {
    if (want > *cap) {
        prt_cuda_sync(rt);  /* the old buffer may still be read by queued ops */
        if (*buf) PRT_CUDA_CHECK(cudaFree(*buf));
        *buf = NULL;
        PRT_CUDA_CHECK(cudaMalloc(buf, want * unit));
        prt_ledger_book(rt, klass, (int64_t)((want - *cap) * unit));
        *cap = want;
    }
    return *buf;
}

float *prt_cuda_workspace(prt *rt, size_t floats) {
    prt_cuda *c = prt_cu(rt);
    return (float *)grow_device(rt, (void **)&c->work, &c->work_cap, floats, sizeof(float), PRT_WORKSPACE);
}

size_t prt_cuda_workspace_floats(prt *rt) { return prt_cu(rt)->work_cap; }

/* Before a cuBLAS call: cuBLAS's workspace is the device workspace as it is now
 * (never grown for it), so weight-gradient GEMMs with a large K can split it
 * within the ledger; every op runs on the one stream, so no other op uses the
 * workspace meanwhile.  A PRT_CUBLAS_WORKSPACE_MB workspace stays put. */
void prt_cuda_blas_workspace(prt *rt) {
    prt_cuda *c = prt_cu(rt);
    if (c->blas_ws) return;
    size_t bytes = c->work_cap * sizeof(float) / 256 * 256;  /* cuBLAS: 256-byte aligned pointer (cudaMalloc's) and size */
    if (c->blas_ws_at == c->work && c->blas_ws_at_bytes == bytes) return;
    PRT_CUBLAS_CHECK(cublasSetWorkspace(c->blas, c->work, bytes));
    c->blas_ws_at = c->work;
    c->blas_ws_at_bytes = bytes;
}

char *prt_cuda_comm_stage(prt *rt, size_t bytes) {
    prt_cuda *c = prt_cu(rt);
    size_t floats = (bytes + sizeof(float) - 1) / sizeof(float), cap = c->stage_cap / sizeof(float);
    void *p = grow_device(rt, (void **)&c->stage, &cap, floats, sizeof(float), PRT_COMM);
    c->stage_cap = cap * sizeof(float);
    return (char *)p;
}

/* Host staging of the MPI path (not device memory: not booked), page-locked so
 * the copies to and from the device run at full bandwidth without a bounce
 * through the driver's own pinned buffer. */
static char *host_stage(prt_cuda *c, size_t bytes) {
    if (bytes > c->host_cap) {
        if (c->host) PRT_CUDA_CHECK(cudaFreeHost(c->host));
        c->host = NULL;
        PRT_CUDA_CHECK(cudaMallocHost((void **)&c->host, bytes));
        c->host_cap = bytes;
    }
    return c->host;
}

/* ---------------------------------------------------------------- collectives */

#ifdef PRT_HAVE_NCCL
static ncclDataType_t nccl_type(int64_t dtype) {
    switch (dtype) {
    case PRT_BF16: return ncclBfloat16;
    case PRT_F16: return ncclFloat16;
    case PRT_I32: return ncclInt32;
    default: return ncclFloat32;
    }
}

static ncclComm_t nccl_comm(prt *rt, int64_t axis) {
    prt_cuda *c = prt_cu(rt);
    PRT_CHECK(axis >= 0 && axis < rt->ncomms && c->comm[axis], "no NCCL communicator for axis %lld", (long long)axis);
    return c->comm[axis];
}

/* The communication stream, after everything issued on the compute stream. */
static cudaStream_t comm_begin(prt_cuda *c) {
    PRT_CUDA_CHECK(cudaEventRecord(c->ev_compute, c->stream));
    PRT_CUDA_CHECK(cudaStreamWaitEvent(c->comm_stream, c->ev_compute, 0));
    return c->comm_stream;
}
/* The compute stream continues after the collective. */
static void comm_end(prt_cuda *c) {
    PRT_CUDA_CHECK(cudaEventRecord(c->ev_comm, c->comm_stream));
    PRT_CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ev_comm, 0));
}

/* [outer, S, inner] <-> [S, outer, inner] on the compute stream (esize-byte
 * elements), one strided copy per block (prt_cuda_pack.h). */
static void pack_blocks(prt_cuda *c, int to_s_major, char *dst, const char *src, int S, int64_t outer, int64_t inner,
                        size_t esize) {
    for (int s = 0; s < S; s++) {
        prt_copy2d k = prt_pack_block(to_s_major, s, S, outer, inner, esize);
        PRT_CUDA_CHECK(cudaMemcpy2DAsync(dst + k.dst_off, k.dpitch, src + k.src_off, k.spitch, k.width, k.height,
                                         cudaMemcpyDeviceToDevice, c->stream));
    }
}
#endif

#define TRACE_BEGIN(rt) double prt_t0_ = prt_trace_start(rt)
#define TRACE_COMM(rt, name, bytes, axis)                      \
    do {                                                       \
        if ((rt)->tracing) {                                   \
            prt_cuda_sync(rt);                                 \
            prt_trace_record(rt, name, "comm", prt_t0_, bytes, axis); \
        }                                                      \
    } while (0)

/* The NCCL calls of the block collectives: `count` elements of `type` per block
 * (`block` bytes), src and dst in the layouts NCCL wants ([S, outer, inner] for
 * the S-block side). */
#ifdef PRT_HAVE_NCCL
typedef void (*nccl_call)(const char *src, char *dst, size_t count, size_t block, ncclDataType_t type, ncclComm_t comm,
                          int S, cudaStream_t s);

static void nccl_allreduce(const char *src, char *dst, size_t count, size_t block, ncclDataType_t type,
                           ncclComm_t comm, int S, cudaStream_t s) {
    (void)block, (void)S;
    PRT_NCCL_CHECK(ncclAllReduce(src, dst, count, type, ncclSum, comm, s));
}
/* in place when src is dst + rank * block (outer 1, parc_rt.h), which NCCL
 * takes as its in-place all-gather: the axis's communicator ranks are its
 * coordinates */
static void nccl_allgather(const char *src, char *dst, size_t count, size_t block, ncclDataType_t type,
                           ncclComm_t comm, int S, cudaStream_t s) {
    (void)block, (void)S;
    PRT_NCCL_CHECK(ncclAllGather(src, dst, count, type, comm, s));
}
static void nccl_reducescatter(const char *src, char *dst, size_t count, size_t block, ncclDataType_t type,
                               ncclComm_t comm, int S, cudaStream_t s) {
    (void)block, (void)S;
    PRT_NCCL_CHECK(ncclReduceScatter(src, dst, count, type, ncclSum, comm, s));
}
/* block j of src to rank j, the block from rank j to block j of dst */
static void nccl_alltoall(const char *src, char *dst, size_t count, size_t block, ncclDataType_t type,
                          ncclComm_t comm, int S, cudaStream_t s) {
    PRT_NCCL_CHECK(ncclGroupStart());
    for (int j = 0; j < S; j++) {
        PRT_NCCL_CHECK(ncclSend(src + (size_t)j * block, count, type, j, comm, s));
        PRT_NCCL_CHECK(ncclRecv(dst + (size_t)j * block, count, type, j, comm, s));
    }
    PRT_NCCL_CHECK(ncclGroupEnd());
}
#define NCCL_CALL(f) f
#else
typedef void *nccl_call;
#define NCCL_CALL(f) NULL
#endif

/* The host-staged path's calls, in the block collectives' one signature. */
typedef void (*mpi_call)(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                         int64_t dtype);
static void mpi_allreduce(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                          int64_t dtype) {
    (void)in;  /* in place */
    prt_mpi_allreduce(rt, axis, out, outer * inner, dtype);
}
static void mpi_allreduce_ends(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                               int64_t dtype) {
    (void)in;  /* in place */
    prt_mpi_allreduce_ends(rt, axis, out, outer * inner, dtype);
}

/* One collective over [outer, inner] blocks of an axis of S ranks: its input
 * and output hold one block or S of them ([outer, S, inner], parc_rt.h); the
 * NCCL path, with outer > 1, packs its S-block input to [S, outer, inner] or
 * unpacks its S-block output from it through the device stage (PRT_COMM).  No
 * NCCL call: always host-staged. */
typedef struct cu_collective {
    const char *name;
    int in_blocks_s, out_blocks_s;   /* 1: S blocks, 0: one */
    int in_place;                    /* in and out are one buffer */
    int pack_in, unpack_out;
    nccl_call nccl;
    mpi_call mpi;
} cu_collective;

/* ORDER: the enum (C++, so no array designators). */
enum { CU_ALLREDUCE, CU_ALLREDUCE_ENDS, CU_ALLGATHER, CU_REDUCESCATTER, CU_ALLTOALL };
static const cu_collective cu_collectives[] = {
    {"allreduce", 0, 0, 1, 0, 0, NCCL_CALL(nccl_allreduce), mpi_allreduce},
    /* the embedding group's sum: once per step, between two ranks of the axis */
    {"allreduce_ends", 0, 0, 1, 0, 0, NULL, mpi_allreduce_ends},
    {"allgather", 0, 1, 0, 0, 1, NCCL_CALL(nccl_allgather), prt_mpi_allgather},
    {"reducescatter", 1, 0, 0, 1, 0, NCCL_CALL(nccl_reducescatter), prt_mpi_reducescatter},
    {"alltoall", 1, 1, 0, 1, 0, NCCL_CALL(nccl_alltoall), prt_mpi_alltoall},
};

/* A started collective on buf (allreduce_start, ..., comm_wait): the event
 * recorded after its NCCL call, from the pool past nstarted (prt_cuda.h). */
static cudaEvent_t started_event(prt_cuda *c, const void *buf) {
    if (c->nstarted == c->started_cap) {
        int cap = c->started_cap ? 2 * c->started_cap : 16;
        c->started = (prt_cu_started *)prt_xrealloc(c->started, (size_t)cap * sizeof *c->started);
        c->started_cap = cap;
    }
    prt_cu_started *s = &c->started[c->nstarted];
    if (c->nstarted == c->started_events) {
        PRT_CUDA_CHECK(cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming));
        c->started_events++;
    }
    s->buf = buf;
    c->nstarted++;
    return s->ev;
}

void prt_cu_comm_wait(prt *rt, const void *buf) {
    prt_cuda *c = prt_cu(rt);
    for (int i = 0; i < c->nstarted; i++) {
        if (c->started[i].buf != buf) continue;
        PRT_CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->started[i].ev, 0));
        prt_cu_started done = c->started[i];
        c->started[i] = c->started[c->nstarted - 1];
        c->started[--c->nstarted] = done; /* its event back in the pool */
        return;
    }
    /* none: the host-staged path completed it inside its start */
}

/* started: the NCCL path leaves the compute stream free to run on and
 * records an event for comm_wait(out) instead of making it wait at once (the
 * host-staged path blocks either way).  A started reduce-scatter of outer > 1
 * blocks sends from the device stage it packs into, which stays in use until
 * its comm_wait (parc_rt.h: no other collective that packs runs meanwhile);
 * gathers are started whole (outer 1), so nothing is unpacked after one. */
static void cu_collective_run(prt *rt, const cu_collective *k, int64_t axis, void *out, const void *in, int64_t outer,
                              int64_t inner, int64_t dtype, int started = 0) {
    prt_cuda *c = prt_cu(rt);
    int S = prt_axis_size(rt, axis);
    size_t esize = prt_dtype_size(dtype), block = (size_t)(outer * inner) * esize;
    size_t in_bytes = k->in_blocks_s ? (size_t)S * block : block, out_bytes = k->out_blocks_s ? (size_t)S * block : block;
#ifdef PRT_HAVE_NCCL
    if (c->nccl && k->nccl) {
        TRACE_BEGIN(rt);
        const char *src = (const char *)in;
        char *dst = (char *)out;
        if (outer != 1 && k->pack_in) {
            char *stage = prt_cuda_comm_stage(rt, in_bytes);  /* block j for rank j */
            pack_blocks(c, 1, stage, src, S, outer, inner, esize);
            src = stage;
        }
        if (outer != 1 && k->unpack_out) dst = prt_cuda_comm_stage(rt, out_bytes);  /* [S, outer, inner] */
        cudaStream_t s = comm_begin(c);
        k->nccl(src, dst, (size_t)(outer * inner), block, nccl_type(dtype), nccl_comm(rt, axis), S, s);
        if (started) PRT_CUDA_CHECK(cudaEventRecord(started_event(c, out), c->comm_stream));
        else comm_end(c);
        if (outer != 1 && k->unpack_out) pack_blocks(c, 0, (char *)out, dst, S, outer, inner, esize);
        TRACE_COMM(rt, k->name, (int64_t)(in_bytes > out_bytes ? in_bytes : out_bytes), axis);
        return;
    }
#endif
    /* host-staged: the CPU runtime's MPI code on a page-locked copy (it traces itself) */
    char *h = host_stage(c, k->in_place ? in_bytes : in_bytes + out_bytes), *hin = h;
    char *hout = k->in_place ? h : h + in_bytes;
    prt_cuda_d2h(rt, hin, in, in_bytes);
    k->mpi(rt, axis, hout, hin, outer, inner, dtype);
    prt_cuda_h2d(rt, out, hout, out_bytes);
}

void prt_cu_allreduce(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype) {
    cu_collective_run(rt, &cu_collectives[CU_ALLREDUCE], axis, buf, buf, 1, n, dtype);
}
void prt_cu_allreduce_ends(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype) {
    cu_collective_run(rt, &cu_collectives[CU_ALLREDUCE_ENDS], axis, buf, buf, 1, n, dtype);
}
void prt_cu_allgather(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype) {
    cu_collective_run(rt, &cu_collectives[CU_ALLGATHER], axis, out, in, outer, inner, dtype);
}
void prt_cu_reducescatter(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                          int64_t dtype) {
    cu_collective_run(rt, &cu_collectives[CU_REDUCESCATTER], axis, out, in, outer, inner, dtype);
}
void prt_cu_allreduce_start(prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtype) {
    cu_collective_run(rt, &cu_collectives[CU_ALLREDUCE], axis, buf, buf, 1, n, dtype, 1);
}
void prt_cu_reducescatter_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                                int64_t dtype) {
    cu_collective_run(rt, &cu_collectives[CU_REDUCESCATTER], axis, out, in, outer, inner, dtype, 1);
}
void prt_cu_allgather_start(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner,
                            int64_t dtype) {
    cu_collective_run(rt, &cu_collectives[CU_ALLGATHER], axis, out, in, outer, inner, dtype, 1);
}
void prt_cu_alltoall(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype) {
    cu_collective_run(rt, &cu_collectives[CU_ALLTOALL], axis, out, in, outer, inner, dtype);
}

void prt_cu_shift_start(prt *rt, int64_t axis, void *out, const void *in, int64_t n, int64_t dtype) {
    prt_cuda *c = prt_cu(rt);
    size_t bytes = (size_t)n * prt_dtype_size(dtype);
#ifdef PRT_HAVE_NCCL
    if (c->nccl) {
        TRACE_BEGIN(rt);
        int S = prt_axis_size(rt, axis), me = rt->coord[axis];
        ncclComm_t comm = nccl_comm(rt, axis);
        cudaStream_t s = comm_begin(c);
        PRT_NCCL_CHECK(ncclGroupStart());
        PRT_NCCL_CHECK(ncclSend(in, (size_t)n, nccl_type(dtype), (me + 1) % S, comm, s));
        PRT_NCCL_CHECK(ncclRecv(out, (size_t)n, nccl_type(dtype), (me + S - 1) % S, comm, s));
        PRT_NCCL_CHECK(ncclGroupEnd());
        PRT_CUDA_CHECK(cudaEventRecord(started_event(c, out), c->comm_stream));
        TRACE_COMM(rt, "shift", (int64_t)bytes, axis);
        return;
    }
#endif
    /* host-staged: a blocking exchange through the page-locked stage */
    char *h = host_stage(c, 2 * bytes + 1);
    prt_cuda_d2h(rt, h, in, bytes);
    prt_mpi_shift(rt, axis, h + bytes, h, n, dtype);
    prt_cuda_h2d(rt, out, h + bytes, bytes);
}

/* alltoallv: the counts are device i32 [S] like the rows.  The host needs them
 * to size the transfers, so either path synchronises once for the send
 * counts and once for the received ones.
 *   nccl: the counts by one ncclSend/ncclRecv of an i32 per peer into
 *     recv_rows, copied down; then the rows by ncclSend/ncclRecv per peer with
 *     rows (no call for a peer with none: both ends know the count), all in one
 *     group on the communication stream;
 *   mpi: host-staged through prt_mpi_alltoallv (the counts, in and out copied
 *     through the page-locked stage). */
void prt_cu_alltoallv(prt *rt, int64_t axis, void *out, const void *in, const void *send_rows, void *recv_rows,
                      int64_t out_rows, int64_t inner, int64_t dtype) {
    prt_cuda *c = prt_cu(rt);
    int S = prt_axis_size(rt, axis);
    size_t esize = prt_dtype_size(dtype), row = (size_t)inner * esize, counts = (size_t)S * sizeof(int32_t);
    int32_t *h_send = (int32_t *)prt_xmalloc(2 * counts), *h_recv = h_send + S;
    prt_cuda_d2h(rt, h_send, send_rows, counts);
    size_t sent = 0;
    for (int j = 0; j < S; j++) {
        PRT_CHECK(h_send[j] >= 0, "alltoallv on axis %lld: %d rows for rank %d", (long long)axis, h_send[j], j);
        sent += (size_t)h_send[j];
    }
#ifdef PRT_HAVE_NCCL
    if (c->nccl) {
        TRACE_BEGIN(rt);
        ncclComm_t comm = nccl_comm(rt, axis);
        cudaStream_t s = comm_begin(c);
        PRT_NCCL_CHECK(ncclGroupStart());
        for (int j = 0; j < S; j++) {
            PRT_NCCL_CHECK(ncclSend((const int32_t *)send_rows + j, 1, ncclInt32, j, comm, s));
            PRT_NCCL_CHECK(ncclRecv((int32_t *)recv_rows + j, 1, ncclInt32, j, comm, s));
        }
        PRT_NCCL_CHECK(ncclGroupEnd());
        comm_end(c);
        prt_cuda_d2h(rt, h_recv, recv_rows, counts);
        size_t arrived = 0;
        for (int j = 0; j < S; j++) arrived += (size_t)h_recv[j];
        if (arrived > (size_t)out_rows)
            prt_alltoallv_overflow(rt, rt->plan.axis_names[axis] ? rt->plan.axis_names[axis] : "?", (int64_t)arrived,
                                   out_rows);
        s = comm_begin(c);
        ncclDataType_t type = nccl_type(dtype);
        const char *src = (const char *)in;
        char *dst = (char *)out;
        PRT_NCCL_CHECK(ncclGroupStart());
        for (int j = 0; j < S; j++) {
            if (h_send[j]) PRT_NCCL_CHECK(ncclSend(src, (size_t)h_send[j] * (size_t)inner, type, j, comm, s));
            if (h_recv[j]) PRT_NCCL_CHECK(ncclRecv(dst, (size_t)h_recv[j] * (size_t)inner, type, j, comm, s));
            src += (size_t)h_send[j] * row;
            dst += (size_t)h_recv[j] * row;
        }
        PRT_NCCL_CHECK(ncclGroupEnd());
        comm_end(c);
        free(h_send);
        TRACE_COMM(rt, "alltoallv", (int64_t)(sent * row), axis);
        return;
    }
#endif
    size_t in_bytes = sent * row, out_bytes = (size_t)out_rows * row;
    char *h = host_stage(c, in_bytes + out_bytes + 1);
    prt_cuda_d2h(rt, h, in, in_bytes);
    prt_mpi_alltoallv(rt, axis, h + in_bytes, h, h_send, h_recv, out_rows, inner, dtype);
    size_t arrived = 0;
    for (int j = 0; j < S; j++) arrived += (size_t)h_recv[j];
    prt_cuda_h2d(rt, out, h + in_bytes, arrived * row);
    prt_cuda_h2d(rt, recv_rows, h_recv, counts);
    free(h_send);
}

void prt_cu_slice(prt *rt, int64_t axis, void *out, const void *in, int64_t outer, int64_t inner, int64_t dtype) {
    prt_cuda *c = prt_cu(rt);
    int S = prt_axis_size(rt, axis);
    size_t row = (size_t)inner * prt_dtype_size(dtype);
    int64_t coord = prt_coord(rt, axis);
    if (!row || !outer) return;
    PRT_CUDA_CHECK(cudaMemcpy2DAsync(out, row, (const char *)in + (size_t)coord * row, (size_t)S * row, row, (size_t)outer,
                                     cudaMemcpyDeviceToDevice, c->stream));
}

/* Pipeline messages: host-staged MPI with the CPU path's buffered sends. */
void prt_cu_send(prt *rt, int64_t axis, int64_t delta, const void *buf, int64_t n, int64_t tag, int64_t dtype) {
    prt_cuda *c = prt_cu(rt);
    size_t bytes = (size_t)n * prt_dtype_size(dtype);
    char *h = host_stage(c, bytes ? bytes : 1);
    prt_cuda_d2h(rt, h, buf, bytes);
    prt_mpi_send(rt, axis, delta, h, n, tag, dtype);  /* copies into its send slot before returning */
}

void prt_cu_recv(prt *rt, int64_t axis, int64_t delta, void *buf, int64_t n, int64_t tag, int64_t dtype) {
    prt_cuda *c = prt_cu(rt);
    size_t bytes = (size_t)n * prt_dtype_size(dtype);
    char *h = host_stage(c, bytes ? bytes : 1);
    prt_mpi_recv(rt, axis, delta, h, n, tag, dtype);
    prt_cuda_h2d(rt, buf, h, bytes);
}
