/*
 * prt_clip.c — the gradient norm, the host side: the step's norm from the
 * reduced sum of squares and, when the plan clips, the factor every gradient
 * is scaled by before the optimizer (PyTorch's clip_grad_norm_: max_norm /
 * (norm + 1e-6), at most 1).  The sums and the scaling are backend ops
 * (sumsq, scale); the reduction is the compiler's all-reduces.
 */
#include <math.h>

#include "prt_backend.h"
#include "prt_internal.h"

void prt_clip_norm(prt *rt, void *acc, double max_norm) {
    float sumsq = 0.0f;
    rt->backend->download(rt, &sumsq, acc, sizeof sumsq);
    rt->backend->zero(rt, acc, 1, PRT_ARG_DTYPES(PRT_F32));  /* the accumulator is one fp32 element */
    double norm = sqrt((double)sumsq);
    double coef = max_norm > 0 ? max_norm / (norm + 1e-6) : 1.0;  /* max_norm 0: no clipping */
    rt->grad_norm = norm;
    rt->clipping = max_norm > 0;
    rt->clip_scale = coef < 1.0 ? coef : 1.0;
    rt->have_grad_norm = 1;
}

double prt_clip_scale(prt *rt) { return rt->have_grad_norm ? rt->clip_scale : 1.0; }
