/*
 * prt_cpu_tensor.h — the CPU backend's float tensor arguments: an address and
 * the storage dtype the call's dtypes word gives it (prt_arg_dtype, parc_rt.h),
 * read and written element by element in fp32 (prt_load, prt_store).  Shared by
 * the files of runtime/cpu/.
 */
#ifndef PRT_CPU_TENSOR_H
#define PRT_CPU_TENSOR_H

#include "prt_internal.h"

/* A float tensor argument: its address (NULL allowed) and storage dtype
 * (prt_math.h's prt_ten, which the CUDA kernels take too). */
typedef prt_ten tensor;

/* Pointer argument `index` of op `op`, p, with the dtype its dtypes word gives
 * it: f32, bf16 or f16 (anything else is a caller's error). */
static inline tensor ften(prt *rt, int64_t dtypes, int index, const void *p, const char *op) {
    int64_t dtype = p ? prt_arg_dtype(rt, dtypes, index, p, op) : PRT_F32;
    PRT_CHECK(dtype == PRT_F32 || prt_dtype_is_16(dtype), "%s: pointer argument %d is declared %s, not a float dtype",
              op, index + 1, dtype >= 0 && dtype < PRT_NDTYPE ? prt_dtype_names[dtype] : "(no dtype)");
    return (tensor){(void *)p, dtype};
}
/* Pointer argument `index` of op `op`, i32 by the call's definition (tokens,
 * targets): a word that says otherwise is an error. */
static inline const int32_t *i32_arg(prt *rt, int64_t dtypes, int index, const void *p, const char *op) {
    PRT_CHECK(prt_arg_dtype(rt, dtypes, index, p, op) == PRT_I32, "%s: pointer argument %d (token ids) must be i32",
              op, index + 1);
    return p;
}
static inline int is16(tensor t) { return t.p && prt_dtype_is_16(t.dtype); }
/* Every one of these arguments is absent or stored as fp32: the op takes its
 * threaded, vectorised path (prt_cpu_fast.h). */
static inline int f32(tensor t) { return !t.p || t.dtype == PRT_F32; }
#define F32(t) ((float *)(t).p)
#define LD(t, i) prt_load((t).p, (t).dtype, (i))
#define ST(t, i, v) prt_store((t).p, (t).dtype, (i), (v))

#endif
