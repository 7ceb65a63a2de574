/*
 * prt_lr.h — the learning-rate schedule, one closed form shared by the
 * compiler (explain) and the runtime (the LR the optimizer reads each step).
 *
 * A schedule is a function of the step alone (counting from 1), so a run
 * resumed at step s continues it with no other state:
 *   warmup  steps 1..W:            lr = peak * s / W
 *   stable  the next S steps:      lr = peak
 *   decay   the next D steps:      p = (s - W - S) / D in (0, 1],
 *             cosine: lr = min + (peak - min) * (1 + cos(pi p)) / 2
 *             linear: lr = peak + (min - peak) * p
 *   after:                         lr = min
 * With shape PRT_LR_CONSTANT (no decay) the LR after warmup stays at peak.
 * Warmup-stable-decay is W > 0, S > 0 and a decay.
 */
#ifndef PRT_LR_H
#define PRT_LR_H

#include <math.h>
#include <stdint.h>

enum prt_lr_shape { PRT_LR_CONSTANT, PRT_LR_COSINE, PRT_LR_LINEAR };

static inline const char *prt_lr_shape_name(int64_t shape)
{
    return shape == PRT_LR_COSINE ? "cosine" : shape == PRT_LR_LINEAR ? "linear" : "constant";
}

typedef struct prt_lr_schedule {
    int64_t shape;          /* enum prt_lr_shape: the decay's */
    int64_t warmup, stable, decay; /* steps of each phase */
    double peak, min;
} prt_lr_schedule;

static inline double prt_lr_at(const prt_lr_schedule *s, int64_t step)
{
    if (step <= s->warmup) return s->peak * (double)step / (double)s->warmup;
    int64_t into = step - s->warmup - s->stable;
    if (s->shape == PRT_LR_CONSTANT || into <= 0) return s->peak;
    if (into >= s->decay) return s->min;
    double p = (double)into / (double)s->decay;
    if (s->shape == PRT_LR_COSINE) return s->min + (s->peak - s->min) * 0.5 * (1.0 + cos(3.14159265358979323846 * p));
    return s->peak + (s->min - s->peak) * p;
}

#endif
