/*
 * prt_phases.c — where a step's time goes, measured from the program's own
 * sequences: each starts with prt_phase (forward, backward, gradient sync as
 * communication, pipeline messages as bubble, optimizer), collectives and
 * pipeline messages are charged to communication and bubble wherever they
 * run (prt_ops.c), and at the end rank 0 prints its mean per step beside the
 * compiler's estimate of the same phases (prt_plan_desc.est_phase_seconds),
 * then every rank's means gathered: per phase min / mean / max over the
 * ranks and the slowest rank.
 * The first step is left out of the mean when there are more (it warms up).
 * Each step's phases go into its metrics record (prt_metrics.c), the means
 * and the estimate into the metrics log's summary record.
 * Host clock: with the CUDA backend a phase is what the host waited for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_backend.h"
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
    if (rt->steps_done > 1) { /* steps_done counts this step already: leave the first out */
        for (int k = 0; k < PRT_NPHASES; k++) rt->phase_sum[k] += rt->phase_step[k];
        rt->phase_steps++;
    }
}

/* Every rank's mean per phase and per step (ms), gathered on rank 0: per
 * phase the least, the mean and the most over the ranks, and which rank took
 * the most.  Index PRT_NPHASES is the step (the phases' sum). */
typedef struct RankSpread {
    int ranks;
    double min[PRT_NPHASES + 1], mean[PRT_NPHASES + 1], max[PRT_NPHASES + 1];
    int max_rank[PRT_NPHASES + 1];
} RankSpread;

/* Collective over MPI_COMM_WORLD: every rank calls it with its own means;
 * *out is filled on rank 0. */
static void gather_spread(prt *rt, const double *mine, RankSpread *out) {
    enum { N = PRT_NPHASES + 1 };
    double *all = NULL;
    if (rt->world_rank == 0) {
        all = malloc(sizeof *all * N * (size_t)rt->world_size);
        PRT_CHECK(all != NULL, "out of memory gathering %d ranks' phases", rt->world_size);
    }
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Igather(mine, N, MPI_DOUBLE, all, N, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the per-rank phase gather (shutdown)", -1);
    if (rt->world_rank != 0) return;
    out->ranks = rt->world_size;
    for (int k = 0; k < N; k++) {
        double lo = all[k], hi = all[k], sum = 0;
        int at = 0;
        for (int r = 0; r < rt->world_size; r++) {
            double v = all[r * N + k];
            sum += v;
            if (v < lo) lo = v;
            if (v > hi) hi = v, at = r;
        }
        out->min[k] = lo, out->max[k] = hi, out->max_rank[k] = at;
        out->mean[k] = sum / rt->world_size;
    }
    free(all);
}

static int write_spread_json(FILE *f, const RankSpread *s, int k) {
    return fprintf(f, "{\"min\": %.6g, \"mean\": %.6g, \"max\": %.6g, \"max_rank\": %d}", s->min[k], s->mean[k],
                   s->max[k], s->max_rank[k]) < 0;
}

/* The metrics log's last record: per phase the estimate and rank 0's
 * measured mean, then every rank's spread. */
/* Which machine the plan's estimate is for, beside this one (its name into
 * here): "this machine", "another machine" (calibrated elsewhere) or "the
 * plan's cluster" (figures as written, not measured). */
static const char *estimate_for(const prt *rt, char *here, size_t size) {
    prt_machine_name(rt->backend->name, rt->backend->description, here, size);
    if (!rt->plan.calibrated) return "the plan's cluster";
    return strcmp(rt->plan.calibrated, here) ? "another machine" : "this machine";
}

static void write_summary(prt *rt, const double *mean_ms, double est_total, double meas_total, const RankSpread *s) {
    FILE *f = rt->log_file;
    int bad = fprintf(f, "{\"record\": \"summary\", \"steps_done\": %lld", (long long)rt->steps_done) < 0;
    bad |= prt_json_number(f, "final_loss", rt->last_loss) < 0;
    bad |= fprintf(f, ", \"measured_over\": \"%s\", \"phases_ms\": {",
                   rt->phase_steps > 0 ? "steps after the first" : "the one step") < 0;
    for (int k = 0; k < PRT_NPHASES; k++)
        bad |= fprintf(f, "%s\"%s\": {\"estimated\": %.6g, \"measured\": %.6g}", k ? ", " : "", prt_phase_keys[k],
                       rt->plan.est_phase_seconds[k] * 1e3, mean_ms[k]) < 0;
    bad |= fprintf(f, "}, \"step_ms\": {\"estimated\": %.6g, \"measured\": %.6g}", est_total, meas_total) < 0;
    char here[320];
    bad |= fprintf(f, ", \"estimate_for\": \"%s\"", estimate_for(rt, here, sizeof here)) < 0;
    bad |= fprintf(f, ", \"ranks\": {\"count\": %d, \"slowest_rank\": %d, \"phases_ms\": {", s->ranks,
                   s->max_rank[PRT_NPHASES]) < 0;
    for (int k = 0; k < PRT_NPHASES; k++) {
        bad |= fprintf(f, "%s\"%s\": ", k ? ", " : "", prt_phase_keys[k]) < 0;
        bad |= write_spread_json(f, s, k);
    }
    bad |= fprintf(f, "}, \"step_ms\": ") < 0;
    bad |= write_spread_json(f, s, PRT_NPHASES);
    bad |= fprintf(f, "}") < 0;
    double ms[PRT_START_NMARKS - 1], total;
    prt_startup_intervals(rt, ms, &total);
    bad |= fprintf(f, ", \"startup_ms\": {\"to_init\": %.6g, \"mpi_init\": %.6g, \"init\": %.6g, \"buffers\": %.6g, "
                      "\"to_step\": %.6g, \"total\": %.6g}",
                   ms[0], ms[1], ms[2], ms[3], ms[4], total) < 0;
    int64_t peak = prt_resident_peak(), ledger = 0;
    for (int c = 0; c < PRT_NCLASS; c++) ledger += rt->expected[c];
    if (peak >= 0) bad |= fprintf(f, ", \"resident_peak_bytes\": %lld", (long long)peak) < 0;
    /* rank 0's minor page faults: the first step's, and a mean over the steps after it */
    int64_t now = rt->faults_last_step;
    if (now >= 0 && rt->faults_at_first >= 0 && rt->faults_after_first >= 0) {
        bad |= fprintf(f, ", \"page_faults\": {\"first_step\": %lld",
                       (long long)(rt->faults_after_first - rt->faults_at_first)) < 0;
        if (rt->steps_done > 1)
            bad |= fprintf(f, ", \"per_step_after_first\": %.6g",
                           (double)(now - rt->faults_after_first) / (double)(rt->steps_done - 1)) < 0;
        bad |= fprintf(f, "}") < 0;
    }
    if (rt->have_expected) bad |= fprintf(f, ", \"ledger_bytes\": %lld", (long long)ledger) < 0;
    bad |= fprintf(f, "}\n") < 0;
    if (bad || fflush(f) != 0) prt_metrics_fail(rt, -1);
}

/* Collective: every rank's means go to rank 0, which prints its own beside
 * the estimate, then the spread over the ranks, and writes the summary. */
void prt_phases_report(prt *rt) {
    if (rt->steps_done == 0) return;
    double n = rt->phase_steps > 0 ? (double)rt->phase_steps : 1.0;
    const double *sum = rt->phase_sum;
    double first[PRT_NPHASES];
    if (rt->phase_steps == 0) { /* one step: it is all there is */
        memcpy(first, rt->phase_step, sizeof first);
        sum = first;
    }
    double est_total = 0, meas_total = 0, mean_ms[PRT_NPHASES + 1];
    for (int k = 0; k < PRT_NPHASES; k++) {
        mean_ms[k] = sum[k] / n * 1e3;
        meas_total += mean_ms[k];
    }
    mean_ms[PRT_NPHASES] = meas_total;
    RankSpread spread = {0};
    gather_spread(rt, mean_ms, &spread);
    if (rt->world_rank != 0) return;
    const char *over = rt->phase_steps > 0 ? "steps after the first" : "the one step";
    printf("parc: per step, estimated / measured ms (rank 0, %s):", over);
    for (int k = 0; k < PRT_NPHASES; k++) {
        double est = rt->plan.est_phase_seconds[k] * 1e3;
        est_total += est;
        printf("%s %s %.3g / %.3g", k ? "," : "", phase_names[k], est, mean_ms[k]);
    }
    printf("; step %.3g / %.3g", est_total, meas_total);
    if (meas_total > 0) printf(" (%.2fx)", est_total / meas_total);
    printf("\n");
    char here[320];
    const char *target = estimate_for(rt, here, sizeof here);
    if (!strcmp(target, "this machine"))
        printf("parc: the estimate is for this machine (%s): the plan's cluster was calibrated on it\n", here);
    else if (!strcmp(target, "another machine"))
        printf("parc: the estimate is for the machine the plan's cluster was calibrated on (%s), not this one (%s): "
               "`parc calibrate` measures this one\n", rt->plan.calibrated, here);
    else
        printf("parc: the estimate is for the plan's cluster as written, not this machine (%s): `parc calibrate` "
               "measures this one into a fragment the plan can include\n", here);
    printf("parc: per step over %d ranks, measured ms min / mean / max (the rank of the max):", spread.ranks);
    for (int k = 0; k <= PRT_NPHASES; k++)
        printf("%s %s %.3g / %.3g / %.3g (%d)", k == PRT_NPHASES ? ";" : k ? "," : "",
               k == PRT_NPHASES ? "step" : phase_names[k], spread.min[k], spread.mean[k], spread.max[k],
               spread.max_rank[k]);
    printf("; slowest rank %d\n", spread.max_rank[PRT_NPHASES]);
    fflush(stdout);
    if (rt->log_file) write_summary(rt, mean_ms, est_total, meas_total, &spread);
}
