/*
 * prt_backend.h — the interface every backend of the runtime implements, and the
 * backends this runtime was built with.
 *
 * The public entry points (prt_ops.c) resolve what is common to all backends
 * (tracing, the dtype of a collective's elements, size-1 axes) and call the
 * backend chosen at prt_init (--device NAME) through this table:
 *   - one slot per op row of PRT_CALLS (kind OP), with parc_rt.h's signature,
 *     the dtypes word last; an op reads each tensor's dtype from it with
 *     prt_arg_dtype (prt_internal.h), which also does the runtime's check;
 *   - one slot per collective row (kind COMM), with parc_rt.h's signature, whose
 *     last argument is then the elements' dtype (enum prt_dtype, the word's
 *     common nibble, checked by prt_ops.c): allreduce/allgather/reducescatter/
 *     alltoall/alltoallv/slice are called only for axes of size > 1, send/recv
 *     for any;
 *   - the memory and lifecycle hooks below.
 * runtime/cpu/ is the reference backend (every op in fp32 loops and OpenBLAS,
 * collectives over MPI on host memory, prt_mpi.c); runtime/cuda/ runs every op
 * on the GPU.
 */
#ifndef PRT_BACKEND_H
#define PRT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "parc_rt.h"

#define PRT_BACKEND_SLOT_OP(name, params) void (*name) params;
#define PRT_BACKEND_SLOT_COMM(name, params) void (*name) params;
#define PRT_BACKEND_SLOT_HOST(name, params)
#define PRT_BACKEND_SLOT_(X, kind, name, sig, params, args) PRT_BACKEND_SLOT_##kind(name, params)

typedef struct prt_backend {
    const char *name;         /* the --device value */
    const char *description;  /* one line for the usage message */
    int host_memory;          /* 1: buffers are host memory (ops and dumps read them directly) */
    /* A backend in a shared module: returns its table, loaded, or NULL with the
     * reason in why; every other field of this entry but name and description
     * is then unused.  NULL: the table is this one. */
    const struct prt_backend *(*load)(char *why, size_t why_size);
    /* 1 when this process can use the backend; else 0 with the reason in why.
     * NULL: always usable. */
    int (*available)(char *why, size_t why_size);
    /* After the mesh is built (may be NULL); finalize releases what init made. */
    void (*init)(prt *rt);
    void (*finalize)(prt *rt);
    /* Waits for every op issued so far (NULL: ops are synchronous). */
    void (*sync)(prt *rt);
    /* Buffer memory: zeroed blocks, 64-byte aligned; copies between host and it
     * and within it, ordered after every op issued so far. */
    void *(*alloc_zero)(prt *rt, size_t bytes, const char *what);
    void (*free)(prt *rt, void *p);
    void (*upload)(prt *rt, void *dst, const void *host_src, size_t bytes);
    void (*download)(prt *rt, void *host_dst, const void *src, size_t bytes);
    void (*copy_bytes)(prt *rt, void *dst, const void *src, size_t bytes);
    /* comm_wait(buf) once the collective started on buf is complete as far as
     * prt_overlap.c can tell: orders the ops issued after it after the
     * collective (a GPU's compute stream waits for the event its start
     * recorded on the communication stream).  NULL: nothing more to wait for. */
    void (*comm_wait)(prt *rt, const void *buf);
    /* The bytes of memory one rank's device has (NULL: host memory, no
     * device of its own; parc_calibrate --device writes it as the gpu's). */
    size_t (*memory_bytes)(prt *rt);
    PRT_CALLS(PRT_BACKEND_SLOT_, _)
} prt_backend;

/* The reference backend (runtime/cpu/). */
extern const prt_backend prt_backend_cpu;
/* The backends of this build, NULL-terminated, the default first (prt_backend.c). */
extern const prt_backend *const prt_backends[];

#endif
