/*
 * prt_metrics.c — what rank 0 reports per step: the progress line on stdout
 * (step / total, loss, lr, gradient norm when the plan clips, throughput,
 * step time, the time left) and the metrics log, JSON lines (`--log FILE`,
 * or PRT_METRICS_FILE when no --log is given), one record per step and one
 * summary at the end (prt_phases.c), as docs/json.md and
 * docs/metrics.schema.json describe; a non-finite number is written as null,
 * never as a bare token.  Every write is checked: a failure ends the run with
 * the path (exit 1).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "prt_internal.h"

const char *const prt_phase_keys[PRT_NPHASES] = {"forward", "backward", "exposed_communication", "bubble",
                                                 "optimizer"};

void prt_metrics_fail(prt *rt, int64_t step) {
    if (step >= 0)
        prt_user_fail(1, "--log %s: cannot write step %lld: %s", rt->log_path, (long long)step, strerror(errno));
    prt_user_fail(1, "--log %s: cannot write: %s", rt->log_path, strerror(errno));
}

/* "1:02:03" or "2:03": seconds, rounded. */
static void format_eta(double seconds, char *buf, size_t size) {
    long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600) snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
}

static void print_progress(prt *rt, int64_t step, double loss, double tokens_per_s, double seconds) {
    char eta[32];
    double mean = rt->steps_done > 0 ? rt->total_seconds / (double)rt->steps_done : seconds;
    format_eta(mean * (double)(rt->steps - step), eta, sizeof eta);
    printf("step %lld/%lld | loss %.6f | lr %.6g", (long long)step, (long long)rt->steps, loss, prt_lr(rt, step));
    if (rt->have_grad_norm) printf(" | grad_norm %.4g", rt->grad_norm);
    printf(" | %.0f tok/s | %.1f ms | eta %s\n", tokens_per_s, seconds * 1e3, eta);
    fflush(stdout);
}

int prt_json_number(FILE *f, const char *key, double v) {
    if (!isfinite(v)) return fprintf(f, ", \"%s\": null", key);
    return fprintf(f, ", \"%s\": %.9g", key, v);
}

static void write_record(prt *rt, int64_t step, double loss, double tokens_per_s, double seconds) {
    FILE *f = rt->log_file;
    int bad = fprintf(f, "{\"record\": \"step\", \"step\": %lld, \"steps\": %lld", (long long)step,
                      (long long)rt->steps) < 0;
    bad |= prt_json_number(f, "loss", loss) < 0;
    bad |= fprintf(f, ", \"lr\": %.9g", prt_lr(rt, step)) < 0;
    if (rt->have_grad_norm) {
        bad |= prt_json_number(f, "grad_norm", rt->grad_norm) < 0;
        if (rt->clipping) bad |= prt_json_number(f, "clip_scale", rt->clip_scale) < 0;
    }
    if (rt->have_val_loss) bad |= prt_json_number(f, "val_loss", rt->val_loss) < 0;
    bad |= fprintf(f, ", \"tokens_per_s\": %.6g, \"step_ms\": %.6g, \"phases_ms\": {", tokens_per_s, seconds * 1e3) < 0;
    for (int k = 0; k < PRT_NPHASES; k++)
        bad |= fprintf(f, "%s\"%s\": %.6g", k ? ", " : "", prt_phase_keys[k], rt->phase_step[k] * 1e3) < 0;
    bad |= fprintf(f, "}") < 0;
    if (rt->moe_layers > 0) {  /* every rank's counts, summed at the step's end */
        bad |= fprintf(f, ", \"expert_tokens\": [") < 0;
        for (int64_t l = 0; l < rt->moe_layers; l++) {
            /* a mixture's row counts every token topk times: a row of zeros
             * is a layer with a dense MLP (`every N`) */
            int64_t routed = 0;
            for (int64_t e = 0; e < rt->moe_experts; e++) routed += rt->moe_tokens[l * rt->moe_experts + e];
            if (routed == 0) {
                bad |= fprintf(f, "%snull", l ? ", " : "") < 0;
                continue;
            }
            bad |= fprintf(f, "%s[", l ? ", " : "") < 0;
            for (int64_t e = 0; e < rt->moe_experts; e++)
                bad |= fprintf(f, "%s%lld", e ? ", " : "", (long long)rt->moe_tokens[l * rt->moe_experts + e]) < 0;
            bad |= fprintf(f, "]") < 0;
        }
        bad |= fprintf(f, "]") < 0;
    }
    bad |= fprintf(f, "}\n") < 0;
    if (bad || fflush(f) != 0) prt_metrics_fail(rt, step);
}

void prt_metrics_step(prt *rt, int64_t step, double loss, double seconds) {
    if (rt->world_rank != 0) return;
    double tokens = (double)rt->plan.batch * (double)rt->plan.seq;
    double tokens_per_s = seconds > 0 ? tokens / seconds : 0.0;
    if (!rt->quiet) print_progress(rt, step, loss, tokens_per_s, seconds);
    if (rt->log_file) write_record(rt, step, loss, tokens_per_s, seconds);
}

void prt_metrics_diverged(prt *rt, int64_t step, const char *what, double value) {
    if (rt->world_rank != 0) return;
    fflush(stdout);
    fprintf(stderr,
            "parc: error: step %lld: the %s is %s: training diverged, and every rank stops here, before this step's "
            "checkpoint (lower the learning rate, clip the gradients with `clip 1.0;` in `train`, or resume from an "
            "earlier checkpoint)\n",
            (long long)step, what, isnan(value) ? "NaN" : value > 0 ? "+inf" : "-inf");
    fflush(stderr);
    FILE *f = rt->log_file;
    if (f && (fprintf(f, "{\"record\": \"diverged\", \"step\": %lld, \"steps\": %lld, \"non_finite\": \"%s\"}\n",
                      (long long)step, (long long)rt->steps, what) < 0 ||
              fflush(f) != 0))
        prt_metrics_fail(rt, step);
}
