/*
 * prt_eval.c — evaluation on the validation data (`eval every N steps batches
 * K;`): generated code runs the forward of K global batches between
 * prt_eval_begin and prt_eval_end, on every rank in the same order of
 * (batch, micro-batch, chunk), so a pipeline's messages pair up as in
 * training.  Nothing of the training step changes: no gradient is computed,
 * the step's loss, phases and time leave the evaluation out, and the
 * validation loss is the same sum over the same samples in every layout.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "prt_backend.h"
#include "prt_internal.h"

int64_t prt_eval_begin(prt *rt, int64_t step) {
    const prt_data_desc *d = rt->plan.data;
    if (!d || d->eval_every <= 0 || d->eval_batches <= 0) return 0;
    int inside = rt->step >= 0;  /* after the optimizer of `step`; else before training */
    if (inside ? step % d->eval_every != 0 && step != rt->steps : step != 0) return 0;
    double now = MPI_Wtime();
    if (inside) rt->phase_step[rt->phase_cur] += now - rt->phase_mark;
    rt->eval_step = rt->step;
    rt->step = -1;  /* no phase, logits dump or step loss counts what follows */
    rt->eval_active = 1;
    rt->eval_loss = 0.0;
    rt->eval_batch = 0;
    rt->eval_runs = d->eval_batches;
    rt->eval_start = now;
    prt_dtype_checks_update(rt);
    return d->eval_batches;
}

void prt_eval_batch(prt *rt, int64_t batch) {
    PRT_CHECK(rt->eval_active && batch >= 0 && batch < rt->eval_runs,
              "prt_eval_batch(%lld) outside an evaluation of %lld batches", (long long)batch,
              (long long)rt->eval_runs);
    rt->eval_batch = batch;
}

/* Writes the record of an evaluation before training (step 0) to --log. */
static void log_initial(prt *rt, double val_loss) {
    if (!rt->log_file) return;
    if (fprintf(rt->log_file, "{\"record\": \"eval\", \"step\": 0, \"steps\": %lld, \"val_loss\": %.9g}\n", (long long)rt->steps,
                val_loss) < 0 ||
        fflush(rt->log_file) != 0)
        prt_user_fail(1, "--log %s: cannot write the evaluation before step 1: %s", rt->log_path, strerror(errno));
}

void prt_eval_end(prt *rt, int64_t step) {
    if (!rt->eval_active) return;
    if (rt->backend->sync) {  /* the loss of device work */
        prt_block_begin("the device work of the evaluation", -1);
        rt->backend->sync(rt);
        prt_block_end();
    }
    prt_comm_complete_sends(rt);
    double loss = rt->eval_loss;
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the validation loss all-reduce", -1);
    double tokens = (double)rt->eval_runs * (double)rt->plan.batch * (double)rt->plan.seq;
    loss = tokens > 0 ? loss / tokens : loss;
    double now = MPI_Wtime();
    if (rt->tracing) prt_trace_record(rt, "eval", "span", rt->eval_start, -1, -1);
    rt->eval_active = 0;
    rt->dtypes_eval_seen = 1;
    prt_dtype_checks_update(rt);
    rt->step = rt->eval_step;
    if (rt->step >= 0) {  /* the step's time and phases go on as if nothing ran */
        rt->step_start += now - rt->eval_start;
        rt->phase_mark = now;
        rt->val_loss = loss;
        rt->have_val_loss = 1;
    }
    if (rt->world_rank != 0) return;
    if (!rt->quiet) {
        printf("step %lld | val_loss %.6f | %lld batches | %.1f ms\n", (long long)step, loss,
               (long long)rt->eval_runs, (now - rt->eval_start) * 1e3);
        fflush(stdout);
    }
    if (rt->step < 0) log_initial(rt, loss);
}
