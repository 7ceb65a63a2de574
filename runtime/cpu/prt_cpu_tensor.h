/*
 * prt_cpu_tensor.h — the CPU backend's float tensor arguments: an address and
 * the storage dtype of the registered buffer that holds it (prt_dtype_of;
 * memory the runtime did not allocate is fp32), read and written element by
 * element in fp32 (prt_load, prt_store).  Shared by the files of runtime/cpu/.
 */
#ifndef PRT_CPU_TENSOR_H
#define PRT_CPU_TENSOR_H

#include "prt_internal.h"

/* A float tensor argument: its address (NULL allowed) and storage dtype. */
typedef struct tensor {
    char *p;
    int64_t dtype;
} tensor;

/* The tensor argument p of op `op`; an i32 buffer is a caller's error. */
static inline tensor ften(prt *rt, const void *p, const char *op) {
    int64_t dtype = prt_dtype_of(rt, p);
    PRT_CHECK(dtype != PRT_I32, "%s: a float tensor argument points into an i32 buffer", op);
    return (tensor){(char *)p, dtype < 0 ? PRT_F32 : dtype};
}
static inline int is16(tensor t) { return t.p && prt_dtype_is_16(t.dtype); }
/* Every one of these arguments is absent or stored as fp32: the op takes its
 * threaded, vectorised path (prt_cpu_fast.h). */
static inline int f32(tensor t) { return !t.p || t.dtype == PRT_F32; }
#define F32(t) ((float *)(t).p)
#define LD(t, i) prt_load((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_store((t).p, (t).dtype, (i), (v))

#endif
