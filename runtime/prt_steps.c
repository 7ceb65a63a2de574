/*
 * prt_steps.c — the step loop's runtime side: step begin/end (the step loss summed
 * over the ranks, the metrics line, PRT_LOSS_FILE), the ledger check and the
 * --memory table, and prt_finalize.  Every wait here is watched (prt_wait).
 */
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_backend.h"
#include "prt_internal.h"

/* ---------------------------------------------------------------- steps */

void prt_step_begin(prt *rt, int64_t step) {
    if (rt->die_rank == rt->world_rank && rt->die_step == step) {
        fprintf(stderr, "parc: rank %d (%s): PRT_TEST_DIE: killing myself at step %lld\n", rt->world_rank, rt->host,
                (long long)step);
        fflush(stderr);
        raise(SIGKILL);
    }
    prt_startup_mark(rt, PRT_START_FIRST_STEP);
    rt->step = step;
    rt->step_loss = 0.0;
    if (rt->moe_tokens) memset(rt->moe_tokens, 0, (size_t)(rt->moe_layers * rt->moe_experts) * sizeof *rt->moe_tokens);
    rt->step_began = rt->step_start = MPI_Wtime();
    if (rt->steps_done == 0) rt->faults_at_first = prt_minor_faults();
    prt_phases_step_begin(rt);
    prt_trace_step_begin(rt, step);
    prt_dump_step_begin(rt, step);
}

void prt_before_optimizer(prt *rt, int64_t step) {
    PRT_CHECK(rt->step == step, "prt_before_optimizer(%lld) outside step %lld", (long long)step, (long long)rt->step);
    prt_dump_before_optimizer(rt, step);
}

/* Waits for the backend's outstanding work (device kernels, NCCL collectives)
 * under the watchdog thread: a device wait cannot be polled like MPI's. */
static void backend_sync(prt *rt, const char *what) {
    if (!rt->backend->sync) return;
    prt_block_begin(what, -1);
    rt->backend->sync(rt);
    prt_block_end();
}

/* A non-finite loss or gradient norm stops every rank after the step that
 * made it and before that step's checkpoint: both are all-reduced, so every
 * rank sees the same value and stops at the same step.  Exit status 4. */
static void stop_if_diverged(prt *rt, int64_t step, double loss) {
    const char *what = NULL;
    double value = 0;
    if (!isfinite(loss)) what = "loss", value = loss;
    else if (rt->have_grad_norm && !isfinite(rt->grad_norm)) what = "gradient norm", value = rt->grad_norm;
    if (!what) return;
    prt_metrics_diverged(rt, step, what, value);
    prt_finalize(rt);
    exit(PRT_EXIT_DIVERGED);
}

/* The step's per-expert token counts of every MoE layer summed over all
 * ranks: data-parallel ranks routed different samples, pipeline stages hold
 * different layers (a rank's table covers its layers up to its last, zeros
 * elsewhere).  Every rank of a mixture of experts calls it at every step's
 * end: each holds a layer at least, so each has counted tokens by then (a
 * dense plan's ranks never have, and never call it). */
static void gather_moe_tokens(prt *rt) {
    int64_t dims[2] = {rt->moe_layers, rt->moe_experts};
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, dims, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the step's expert-count sizes", -1);
    if (dims[0] == 0) return;
    if (dims[0] != rt->moe_layers) {
        int64_t *grown = prt_xcalloc((size_t)(dims[0] * dims[1]), sizeof *grown);
        if (rt->moe_tokens) memcpy(grown, rt->moe_tokens, (size_t)(rt->moe_layers * dims[1]) * sizeof *grown);
        free(rt->moe_tokens);
        rt->moe_tokens = grown, rt->moe_layers = dims[0], rt->moe_experts = dims[1];
    }
    PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, rt->moe_tokens, (int)(dims[0] * dims[1]), MPI_INT64_T, MPI_SUM,
                                 MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the step's expert-count sum", -1);
}

void prt_step_end(prt *rt, int64_t step) {
    PRT_CHECK(rt->step == step, "prt_step_end(%lld) without prt_step_begin(%lld)", (long long)step, (long long)step);
    backend_sync(rt, "the device work of the step");  /* the step's time includes it */
    prt_comm_complete_sends(rt);
    prt_comm_recv_step_end(rt);
    prt_comm_check_idle(rt, "the step's end");
    double loss = rt->step_loss;
    double t_comm = prt_trace_start(rt);
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the step's loss all-reduce", -1);
    PRT_TRACE_END(rt, "step_loss_allreduce", "comm", t_comm, 8, -1);
    double tokens = (double)rt->plan.batch * (double)rt->plan.seq;
    loss = tokens > 0 ? loss / tokens : loss;
    double end = MPI_Wtime(), seconds = end - rt->step_start;
    rt->steps_done++;
    rt->dtypes_step_seen = 1;
    prt_dtype_checks_update(rt);
    prt_phases_step_end(rt, end);
    prt_trace_step_end(rt, step);
    rt->total_seconds += seconds;
    rt->faults_last_step = prt_minor_faults();
    if (rt->steps_done == 1) rt->first_step_seconds = seconds, rt->faults_after_first = rt->faults_last_step;
    rt->last_loss = loss;
    if (rt->moe_experts > 0) gather_moe_tokens(rt);
    prt_metrics_step(rt, step, loss, seconds);
    if (rt->world_rank == 0) {
        if (rt->loss_file && (fprintf(rt->loss_file, "%lld %.9g\n", (long long)step, loss) < 0 ||
                              fflush(rt->loss_file) != 0))
            prt_user_fail(1, "PRT_LOSS_FILE %s: cannot write step %lld: %s", rt->loss_path, (long long)step,
                          strerror(errno));
    }
    rt->step = -1;
    rt->have_val_loss = 0;
    if (rt->tracing) prt_trace_flush(rt);  /* a killed run keeps the steps it finished */
    stop_if_diverged(rt, step, loss);
    prt_ckpt_step_end(rt, step);
}

/* ---------------------------------------------------------------- finalize */

/* Checks this rank's ledger against the compiler's; returns 0 or 3. */
static int check_ledger(prt *rt) {
    if (!rt->have_expected) return 0;
    int status = 0;
    for (int c = 0; c < PRT_NCLASS; c++) {
        int exact = c == PRT_WEIGHTS || c == PRT_GRADS || c == PRT_MASTER || c == PRT_OPTIM;
        int64_t measured = exact ? rt->ledger_now[c] : rt->ledger_peak[c];
        int ok = exact ? measured == rt->expected[c] : measured <= rt->expected[c];
        if (!ok) {
            fprintf(stderr, "parc: rank %d (%s): error: memory ledger mismatch in class %s: measured %lld B, "
                            "compiler %lld B (%s)\n", rt->world_rank, rt->host, prt_class_names[c],
                    (long long)measured, (long long)rt->expected[c], exact ? "must be equal" : "must not exceed");
            status = 3;
        }
    }
    return status;
}

static void print_memory_table(prt *rt) {
    int64_t mine[2 * PRT_NCLASS + 1];
    for (int c = 0; c < PRT_NCLASS; c++) {
        int exact = c <= PRT_OPTIM;
        mine[c] = exact ? rt->ledger_now[c] : rt->ledger_peak[c];
        mine[PRT_NCLASS + c] = rt->expected[c];
    }
    mine[2 * PRT_NCLASS] = rt->have_expected;
    int64_t *all = rt->world_rank == 0 ? prt_xmalloc(sizeof mine * (size_t)rt->world_size) : NULL;
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Igather(mine, 2 * PRT_NCLASS + 1, MPI_INT64_T, all, 2 * PRT_NCLASS + 1, MPI_INT64_T, 0,
                              MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the memory ledger gather (shutdown)", -1);
    if (rt->world_rank == 0) {
        printf("memory ledger (bytes; measured = exact for weights/grads/master/optim, peak otherwise)\n");
        printf("%5s  %-12s %16s %16s  %s\n", "rank", "class", "measured", "compiler", "");
        for (int r = 0; r < rt->world_size; r++) {
            const int64_t *row = all + (size_t)r * (2 * PRT_NCLASS + 1);
            for (int c = 0; c < PRT_NCLASS; c++) {
                int exact = c <= PRT_OPTIM;
                if (row[2 * PRT_NCLASS]) {
                    int ok = exact ? row[c] == row[PRT_NCLASS + c] : row[c] <= row[PRT_NCLASS + c];
                    printf("%5d  %-12s %16lld %16lld  %s\n", r, prt_class_names[c], (long long)row[c],
                           (long long)row[PRT_NCLASS + c], ok ? "ok" : "MISMATCH");
                } else {
                    printf("%5d  %-12s %16lld %16s\n", r, prt_class_names[c], (long long)row[c], "-");
                }
            }
        }
        fflush(stdout);
    }
    free(all);
}

int64_t prt_finalize(prt *rt) {
    backend_sync(rt, "the device work before shutdown");
    prt_comm_complete_sends(rt);
    prt_dump_finalize(rt);
    if (rt->tracing) prt_trace_write(rt);
    int status = check_ledger(rt);
    if (rt->memory_report) print_memory_table(rt);
    prt_startup_report(rt);
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the exit status all-reduce (shutdown)", -1);
    if (rt->world_rank == 0 && rt->steps_done > 0) {
        /* the steady state: the first step pays every buffer's first touch */
        int steady = rt->steps_done > 1;
        double ms = steady ? (rt->total_seconds - rt->first_step_seconds) / (double)(rt->steps_done - 1) * 1e3
                           : rt->total_seconds * 1e3;
        double tokens = (double)rt->plan.batch * (double)rt->plan.seq;
        printf("parc: %s: %lld steps | final loss %.6f | %.1f ms/step | %.0f tok/s (%s)\n",
               rt->plan.plan_name ? rt->plan.plan_name : "plan", (long long)rt->steps_done, rt->last_loss, ms,
               ms > 0 ? tokens / (ms * 1e-3) : 0.0, steady ? "steps after the first" : "the one step");
        fflush(stdout);
    }
    prt_phases_report(rt);
    if (rt->loss_file && fclose(rt->loss_file) != 0)
        prt_user_fail(1, "PRT_LOSS_FILE %s: cannot write: %s", rt->loss_path, strerror(errno));
    rt->loss_file = NULL;
    if (rt->log_file && fclose(rt->log_file) != 0)
        prt_user_fail(1, "--log %s: cannot write: %s", rt->log_path, strerror(errno));
    rt->log_file = NULL;
    prt_watched_barrier(rt, "the final barrier (shutdown)");
    prt_watchdog_stop();
    prt_comm_free(rt);
    for (int a = 0; a < rt->ncomms; a++) MPI_Comm_free(&rt->axis_comm[a]);
    MPI_Comm_free(&rt->watch_comm);
    for (int c = 0; c < PRT_NCLASS; c++)
        if (rt->class_block[c]) rt->backend->free(rt, rt->class_block[c]);
    if (rt->backend->finalize) rt->backend->finalize(rt);
    prt_data_close(rt);
    free(rt->moe_tokens);
    free(rt->buffers);
    free(rt->ranges);
    free(rt->comm_stage);
    free(rt->work);
    free(rt->events);
    free(rt->phase_log);
    free(rt->host_names);
    free(rt->host_of);
    prt_failure_context(NULL);
    free(rt);
    MPI_Finalize();
    return status;
}
