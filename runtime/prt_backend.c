/*
 * prt_backend.c — the backends this runtime was built with, the default first.
 * The one place that knows whether the CUDA backend was built.
 *
 * The CUDA backend lives in a shared module of its own (PRT_CUDA_MODULE: built
 * from runtime/cuda/ beside this library, one for the MPI runtime and one for
 * the single-process one), loaded with dlopen only when `--device cuda` asks
 * for it: a program that runs on the CPU never loads cudart, cuBLAS or NCCL,
 * and runs where they are not installed.  The module is found the way the
 * dynamic loader finds libraries (LD_LIBRARY_PATH, then the program's run
 * path, which parc sets to the build's directory); the program exports the
 * runtime's symbols (-rdynamic) for it.
 */
#include <stddef.h>
#include <stdio.h>

#ifdef PRT_CUDA_MODULE
#include <dlfcn.h>
#endif

#include "prt_backend.h"

#ifdef PRT_CUDA_MODULE
/* Opens the module and returns its table (the symbol prt_backend_cuda), or
 * NULL with the loader's reason in why. */
static const prt_backend *load_cuda(char *why, size_t why_size) {
    static const prt_backend *loaded;
    if (loaded) return loaded;
    void *module = dlopen(PRT_CUDA_MODULE, RTLD_NOW | RTLD_LOCAL);
#ifdef PRT_CUDA_MODULE_DIR
    /* the build's own copy: dlopen called through a sanitizer's interceptor
     * searches the interceptor's run path, not the program's */
    if (!module) {
        char first[512];
        snprintf(first, sizeof first, "%s", dlerror());
        module = dlopen(PRT_CUDA_MODULE_DIR "/" PRT_CUDA_MODULE, RTLD_NOW | RTLD_LOCAL);
        if (!module) {
            snprintf(why, why_size, "cannot load the CUDA backend %s: %s", PRT_CUDA_MODULE, first);
            return NULL;
        }
    }
#endif
    if (!module) {
        snprintf(why, why_size, "cannot load the CUDA backend %s: %s", PRT_CUDA_MODULE, dlerror());
        return NULL;
    }
    loaded = (const prt_backend *)dlsym(module, "prt_backend_cuda");
    if (!loaded) snprintf(why, why_size, "%s has no prt_backend_cuda: %s", PRT_CUDA_MODULE, dlerror());
    return loaded;
}

static const prt_backend cuda_module = {
    .name = "cuda",
    .description = "every op on the GPU, one rank per GPU (PRT_COLLECTIVES=nccl|mpi, see docs/gpu.md); "
                   "loaded from " PRT_CUDA_MODULE,
    .load = load_cuda,
};
#endif

const prt_backend *const prt_backends[] = {
    &prt_backend_cpu,
#ifdef PRT_CUDA_MODULE
    &cuda_module,
#endif
    NULL,
};
