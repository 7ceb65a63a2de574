/*
 * prt_backend.c — the backends this runtime was built with, the default first.
 * The one place that knows whether the CUDA backend was compiled in.
 */
#include <stddef.h>

#include "prt_backend.h"

#ifdef PRT_HAVE_CUDA
extern const prt_backend prt_backend_cuda;  /* runtime/cuda/prt_cuda_backend.c */
#endif

const prt_backend *const prt_backends[] = {
    &prt_backend_cpu,
#ifdef PRT_HAVE_CUDA
    &prt_backend_cuda,
#endif
    NULL,
};
