/*
 * prt_cuda.h — what the CUDA sources of the runtime share: the device state, the
 * check macros (one per library: CUDA, cuBLAS, NCCL; each reports file, line, rank,
 * host and the library's own error string through prt_fail) and the element
 * load/store of prt_math.h that give every kernel the CPU path's storage
 * semantics (fp32 arithmetic, round to nearest even into bf16/f16).
 */
#ifndef PRT_CUDA_H
#define PRT_CUDA_H

#include <mpi.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#ifdef PRT_HAVE_NCCL
#include <nccl.h>
#endif

#include "prt_cuda_api.h"
#include "prt_cuda_limits.h"

/* A collective started on the communication stream (prt_cu_comm_wait). */
typedef struct prt_cu_started {
    const void *buf;   /* the buffer comm_wait names */
    cudaEvent_t ev;    /* recorded after its NCCL call */
} prt_cu_started;

struct prt_cuda {
    int device, devices, local_rank, local_ranks;
    char name[256];
    cudaStream_t stream;        /* every op */
    cudaStream_t comm_stream;   /* NCCL collectives, ordered with events */
    cudaEvent_t ev_compute, ev_comm;
    cublasHandle_t blas;
    prt_cuda_limits limits;     /* the device's grid and shared-memory limits (prt_cuda_limits.h) */
    int tf32;                   /* PRT_CUDA_TF32=1: fp32 GEMMs on TF32 tensor cores */
    int nccl;                   /* 1: collectives over NCCL; 0: host-staged MPI */
#ifdef PRT_HAVE_NCCL
    ncclComm_t comm[PRT_MAX_AXES];   /* NULL where the axis has none */
#endif
    /* device scratch, booked: workspace -> PRT_WORKSPACE, comm stage -> PRT_COMM */
    float *work;  size_t work_cap;   /* floats */
    char *stage;  size_t stage_cap;  /* bytes, booked in whole floats */
    void *blas_ws; size_t blas_ws_bytes;   /* PRT_CUBLAS_WORKSPACE_MB, booked to PRT_WORKSPACE */
    const void *blas_ws_at; size_t blas_ws_at_bytes;   /* the workspace cuBLAS was last given */
    /* host staging of the MPI path (host memory, not in the device ledger) */
    char *host;   size_t host_cap;
    /* collectives started on the communication stream and not yet waited for:
     * the buffer comm_wait names and the event recorded after the NCCL call;
     * events past nstarted are free for the next start */
    prt_cu_started *started;
    int nstarted, started_cap, started_events;
};

void prt_cuda_fail(const char *file, int line, const char *call, cudaError_t err) __attribute__((noreturn));
void prt_cublas_fail(const char *file, int line, const char *call, cublasStatus_t st) __attribute__((noreturn));
#define PRT_CUDA_CHECK(call)                                                 \
    do {                                                                     \
        cudaError_t prt_cuda_err_ = (call);                                  \
        if (prt_cuda_err_ != cudaSuccess) prt_cuda_fail(__FILE__, __LINE__, #call, prt_cuda_err_); \
    } while (0)
#define PRT_CUBLAS_CHECK(call)                                               \
    do {                                                                     \
        cublasStatus_t prt_cublas_st_ = (call);                              \
        if (prt_cublas_st_ != CUBLAS_STATUS_SUCCESS) prt_cublas_fail(__FILE__, __LINE__, #call, prt_cublas_st_); \
    } while (0)
#ifdef PRT_HAVE_NCCL
void prt_nccl_fail(const char *file, int line, const char *call, ncclResult_t res) __attribute__((noreturn));
#define PRT_NCCL_CHECK(call)                                                 \
    do {                                                                     \
        ncclResult_t prt_nccl_res_ = (call);                                 \
        if (prt_nccl_res_ != ncclSuccess) prt_nccl_fail(__FILE__, __LINE__, #call, prt_nccl_res_); \
    } while (0)
#endif
/* After a kernel launch: the launch error, if any. */
/* After a kernel launch: the launch's error, and with PRT_CUDA_SYNC=1 the
 * kernel's own (prt_cuda_launch_check synchronises first), named by the op. */
void prt_cuda_launch_check(const char *file, int line, const char *op);
#define PRT_LAUNCH_CHECK() prt_cuda_launch_check(__FILE__, __LINE__, __func__)

static inline prt_cuda *prt_cu(prt *rt) {
    PRT_CHECK(rt->cuda, "the CUDA backend is not initialised (prt_cuda_init)");
    return rt->cuda;
}

/* Elementwise launches: PRT_CU_THREADS threads per block and enough blocks for
 * n elements, at most 65535 x 16 (the kernels stride over the rest). */
#define PRT_CU_THREADS 256
static inline int prt_cu_blocks(int64_t n) {
    int64_t b = (n + PRT_CU_THREADS - 1) / PRT_CU_THREADS;
    return (int)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

/* Element i of a float tensor stored as `dt`, and the store that rounds to it:
 * prt_math.h's, compiled for the device, so kernels round exactly as the CPU
 * reference does. */
#ifdef __CUDACC__
__device__ __forceinline__ float prt_ld(const void *p, int64_t dt, int64_t i) { return prt_load(p, dt, i); }
__device__ __forceinline__ void prt_st(void *p, int64_t dt, int64_t i, float v) { prt_store(p, dt, i, v); }
#endif

#endif
