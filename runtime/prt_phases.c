/*
 * prt_phases.c — where a step's time goes, measured from the program's own
 * sequences: each starts with prt_phase (forward, backward, gradient sync as
 * communication, pipeline messages as bubble, optimizer), collectives and
 * pipeline messages are charged to communication and bubble wherever they
 * run (prt_ops.c), and at the end rank 0 prints the mean per step beside the
 * compiler's estimate of the same phases (prt_plan_desc.est_phase_seconds).
 * The first step is left out of the mean when there are more (it warms up).
 * Host clock: with the CUDA backend a phase is what the host waited for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"

static const char *const phase_names[PRT_NPHASES] = {"forward", "backward", "exposed communication", "bubble",
                                                     "optimizer"};
static const char *const phase_keys[PRT_NPHASES] = {"forward_ms", "backward_ms", "exposed_communication_ms",
                                                    "bubble_ms", "optimizer_ms"};

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

static void metrics_fail(prt *rt) {
    prt_user_fail(1, "PRT_METRICS_FILE %s: cannot write: %s", getenv("PRT_METRICS_FILE"), strerror(errno));
    (void)rt;
}

void prt_phases_step_end(prt *rt, double end) {
    rt->phase_step[rt->phase_cur] += end - rt->phase_mark;
    rt->phase_mark = end;
    if (rt->steps_done > 0) { /* steps_done counts this step already: leave the first out */
        for (int k = 0; k < PRT_NPHASES; k++) rt->phase_sum[k] += rt->phase_step[k];
        rt->phase_steps++;
    }
    const char *path = getenv("PRT_METRICS_FILE");
    if (rt->world_rank != 0 || !path || !*path) return;
    if (!rt->metrics_file) {
        rt->metrics_file = fopen(path, "w");
        if (!rt->metrics_file) prt_user_fail(1, "PRT_METRICS_FILE %s: cannot open it for writing: %s", path, strerror(errno));
        if (fprintf(rt->metrics_file, "step") < 0) metrics_fail(rt);
        for (int k = 0; k < PRT_NPHASES; k++)
            if (fprintf(rt->metrics_file, " %s", phase_keys[k]) < 0) metrics_fail(rt);
        if (fprintf(rt->metrics_file, " step_ms\n") < 0) metrics_fail(rt);
    }
    double total = 0;
    if (fprintf(rt->metrics_file, "%lld", (long long)rt->step) < 0) metrics_fail(rt);
    for (int k = 0; k < PRT_NPHASES; k++) {
        total += rt->phase_step[k];
        if (fprintf(rt->metrics_file, " %.6f", rt->phase_step[k] * 1e3) < 0) metrics_fail(rt);
    }
    if (fprintf(rt->metrics_file, " %.6f\n", total * 1e3) < 0 || fflush(rt->metrics_file) != 0) metrics_fail(rt);
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
    double est_total = 0, meas_total = 0;
    printf("parc: per step, estimated / measured ms (rank 0, %s):", rt->phase_steps > 0 ? "steps after the first" : "the one step");
    for (int k = 0; k < PRT_NPHASES; k++) {
        double est = rt->plan.est_phase_seconds[k] * 1e3, meas = sum[k] / n * 1e3;
        est_total += est, meas_total += meas;
        printf("%s %s %.3g / %.3g", k ? "," : "", phase_names[k], est, meas);
    }
    printf("; step %.3g / %.3g", est_total, meas_total);
    if (meas_total > 0) printf(" (%.2fx)", est_total / meas_total);
    printf("\n");
    fflush(stdout);
    if (rt->metrics_file) {
        if (fprintf(rt->metrics_file, "estimate") < 0) metrics_fail(rt);
        for (int k = 0; k < PRT_NPHASES; k++)
            if (fprintf(rt->metrics_file, " %.6f", rt->plan.est_phase_seconds[k] * 1e3) < 0) metrics_fail(rt);
        if (fprintf(rt->metrics_file, " %.6f\n", est_total) < 0) metrics_fail(rt);
        if (fclose(rt->metrics_file) != 0) metrics_fail(rt);
        rt->metrics_file = NULL;
    }
}
