/*
 * prt_phases.c — where a step's time goes, measured from the program's own
 * sequences: each starts with prt_phase (forward, backward, gradient sync as
 * communication, pipeline messages as bubble, optimizer), collectives and
 * pipeline messages are charged to communication and bubble wherever they
 * run (prt_ops.c), and at the end rank 0 prints the mean per step beside the
 * compiler's estimate of the same phases (prt_plan_desc.est_phase_seconds).
 * The first step is left out of the mean when there are more (it warms up).
 * Each step's phases go into its metrics record (prt_metrics.c), the means
 * and the estimate into the metrics log's summary record.
 * Host clock: with the CUDA backend a phase is what the host waited for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"

static const char *const phase_names[PRT_NPHASES] = {"forward", "backward", "exposed communication", "bubble",
                                                     "optimizer"};

void prt_phase(prt *rt, int64_t phase) {
    PRT_CHECK(phase >= 0 && phase < PRT_NPHASES, "prt_phase(%lld): no such phase", (long long)phase);
    double now = MPI_Wtime();
    if (rt->step >= 0) rt->phase_step[rt->phase_cur] += now - rt->phase_mark;
    rt->phase_mark = now;
    rt->phase_cur = phase;
}

void prt_phases_step_begin(prt *rt) {
    memset(rt->phase_step, 0, sizeof rt->phase_step);
    rt->phase_cur = PRT_PHASE_FORWARD;
    rt->phase_mark = rt->step_start;
}

void prt_phase_charge(prt *rt, int64_t phase, double start) {
    if (rt->step < 0) return;
    double dt = MPI_Wtime() - start;
    rt->phase_step[phase] += dt;
    rt->phase_step[rt->phase_cur] -= dt;
}

void prt_phases_step_end(prt *rt, double end) {
    rt->phase_step[rt->phase_cur] += end - rt->phase_mark;
    rt->phase_mark = end;
    if (rt->steps_done > 0) { /* steps_done counts this step already: leave the first out */
        for (int k = 0; k < PRT_NPHASES; k++) rt->phase_sum[k] += rt->phase_step[k];
        rt->phase_steps++;
    }
}

/* The metrics log's last record: per phase the estimate and the measured mean. */
static void write_summary(prt *rt, const double *mean_ms, double est_total, double meas_total) {
    FILE *f = rt->log_file;
    int bad = fprintf(f, "{\"record\": \"summary\", \"steps_done\": %lld, \"final_loss\": %.9g, "
                         "\"measured_over\": \"%s\", \"phases_ms\": {",
                      (long long)rt->steps_done, rt->last_loss,
                      rt->phase_steps > 0 ? "steps after the first" : "the one step") < 0;
    for (int k = 0; k < PRT_NPHASES; k++)
        bad |= fprintf(f, "%s\"%s\": {\"estimated\": %.6g, \"measured\": %.6g}", k ? ", " : "", prt_phase_keys[k],
                       rt->plan.est_phase_seconds[k] * 1e3, mean_ms[k]) < 0;
    bad |= fprintf(f, "}, \"step_ms\": {\"estimated\": %.6g, \"measured\": %.6g}}\n", est_total, meas_total) < 0;
    if (bad || fflush(f) != 0) prt_metrics_fail(rt, -1);
}

void prt_phases_report(prt *rt) {
    if (rt->world_rank != 0 || rt->steps_done == 0) return;
    double n = rt->phase_steps > 0 ? (double)rt->phase_steps : 1.0;
    const double *sum = rt->phase_sum;
    double first[PRT_NPHASES];
    if (rt->phase_steps == 0) { /* one step: it is all there is */
        memcpy(first, rt->phase_step, sizeof first);
        sum = first;
    }
    double est_total = 0, meas_total = 0, mean_ms[PRT_NPHASES];
    printf("parc: per step, estimated / measured ms (rank 0, %s):", rt->phase_steps > 0 ? "steps after the first" : "the one step");
    for (int k = 0; k < PRT_NPHASES; k++) {
        double est = rt->plan.est_phase_seconds[k] * 1e3, meas = sum[k] / n * 1e3;
        est_total += est, meas_total += meas;
        mean_ms[k] = meas;
        printf("%s %s %.3g / %.3g", k ? "," : "", phase_names[k], est, meas);
    }
    printf("; step %.3g / %.3g", est_total, meas_total);
    if (meas_total > 0) printf(" (%.2fx)", est_total / meas_total);
    printf("\n");
    fflush(stdout);
    if (rt->log_file) write_summary(rt, mean_ms, est_total, meas_total);
}
