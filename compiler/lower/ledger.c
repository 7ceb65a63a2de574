/*
 * ledger.c — the memory ledger of a lowered program, computed once at the end
 * of lowering and stored in the Program: per stage and buffer class, the bytes
 * one rank's buffers take (elements x instances x dtype size) plus the
 * runtime's own scratch, bounded here the way the runtime allocates it.
 * analyze, explain, the fit advice and the code generator only read it, so the
 * number `explain` prints is the number the runtime checks its allocations
 * against.
 */
#include "ledger.h"
#include "ops.h"

#include <string.h>

const char *const ledger_class_keys[PRT_NCLASS] = {
#define X(id, key, report) key,
    PRT_CLASSES(X)
#undef X
};
const char *const ledger_class_names[PRT_NCLASS] = {
#define X(id, key, report) report,
    PRT_CLASSES(X)
#undef X
};

/* Pipeline messages a stage sends per step: one per micro-batch per chunk
 * boundary, activations forward (none from the model's last chunk) and
 * gradients backward (none from its first). */
void ledger_stage_sends(const Program *prog, const StageProgram *sp, int64_t *fwd, int64_t *bwd)
{
    *fwd = sp->seq[SEQ_SEND_FWD].n ? program_seq_calls_per_step(prog, sp, SEQ_SEND_FWD) : 0;
    *bwd = sp->seq[SEQ_SEND_BWD].n ? program_seq_calls_per_step(prog, sp, SEQ_SEND_BWD) : 0;
}

/* The runtime's own scratch, as the CPU runtime allocates it (parc_rt.h,
 * prt_expect_memory): each scratch buffer grows to its largest request.
 *   comm:      one packing buffer for [outer, S, inner] collectives with outer > 1
 *              and for the peer's copy in the embedding group's all-reduce;
 *   host staging: one copy per pipeline message still in flight, in the
 *              message's dtype, and one slot for the receive posted ahead
 *              (host memory: not in ledger[], see ir.h);
 *   workspace: the largest request of an op's call, per its row of op_table
 *              (include/prt_scratch.h): with all-fp32 operands in `work`, the
 *              extra a CPU build needs to widen 16-bit operands in `work_16`. */
static void runtime_scratch(const Program *prog, const StageProgram *sp, int64_t *comm, int64_t *work,
                            int64_t *work_16, int64_t *host_staging)
{
    int64_t pack = 0, scratch = 0, scratch_16 = 0;
    for (int q = 0; q < SEQ_COUNT; q++)
        for (int i = 0; i < sp->seq[q].n; i++) {
            const Instr *ins = &sp->seq[q].ins[i];
            if (ins->fn == RT_prt_allgather || ins->fn == RT_prt_reducescatter || ins->fn == RT_prt_alltoall ||
                ins->fn == RT_prt_reducescatter_start) {
                int64_t outer = ins->args[3].i, S = prog->plan->mesh.axes[ins->axis].size;
                if (outer > 1 && S > 1 && ins->elems > pack) pack = ins->elems;
            }
            /* the peer's copy of the embedding group's exchange */
            if (ins->fn == RT_prt_allreduce_ends && (ins->elems * ins->elem_bytes + 3) / 4 > pack)
                pack = (ins->elems * ins->elem_bytes + 3) / 4;
            int64_t base = ops_instr_scratch(prog, sp, ins, 0), want = ops_instr_scratch(prog, sp, ins, 1);
            if (base > scratch) scratch = base;
            if (want > scratch_16) scratch_16 = want;
        }
    /* Pipeline send copies still in flight.  An activation sent for (micro,
     * chunk) is unreceived only while that pair is in flight on the sender (its
     * backward needs the receiver's gradient, which needs the activation); a
     * gradient sent back is unreceived only while the pair is in flight on the
     * receiver.  So the schedule's in-flight peaks bound the copies; one more per
     * direction covers a completed send not yet reaped. */
    int64_t sends = 0, fwd, bwd;
    ledger_stage_sends(prog, sp, &fwd, &bwd);
    if (prog->nstages > 1) {
        int p = prog->nstages, s = sp->stage;
        int prev = s > 0 ? s - 1 : p - 1;
        int64_t fwd_bound = prog->schedule.peak_in_flight[s] + 1;
        int64_t bwd_bound = prog->schedule.peak_in_flight[prev] + 1;
        sends = (fwd < fwd_bound ? fwd : fwd_bound) + (bwd < bwd_bound ? bwd : bwd_bound);
    }
    /* and the runtime's slot for the next receive, posted ahead of its op */
    int64_t recv_ahead = prog->nstages > 1 ? 1 : 0;
    /* each copy holds one message, its instruction's elements in its own
     * dtype (2 bytes in a 16-bit plan; 1/tp of the boundary with
     * `pipeline_scatter on`), in host memory */
    int64_t message = 0;
    for (int q = 0; q < SEQ_COUNT; q++)
        for (int i = 0; i < sp->seq[q].n; i++) {
            const Instr *ins = &sp->seq[q].ins[i];
            if ((ins->coll == COLL_SEND || ins->coll == COLL_RECV) && ins->elems * ins->elem_bytes > message)
                message = ins->elems * ins->elem_bytes;
        }
    *comm = 4 * pack;
    *host_staging = (sends + recv_ahead) * message;
    *work = 4 * scratch;
    *work_16 = 4 * (scratch_16 > scratch ? scratch_16 - scratch : 0);
}

void ledger_compute(Program *prog)
{
    for (int s = 0; s < prog->nstages; s++) {
        StageProgram *sp = &prog->stages[s];
        memset(sp->ledger, 0, sizeof sp->ledger);
        sp->params_local = 0;
        for (int b = 0; b < sp->nbufs; b++) {
            const Buffer *bf = &sp->bufs[b];
            sp->ledger[bf->klass] += bf->elems * bf->instances * dtype_bytes(bf->dtype);
            if (bf->klass == PRT_WEIGHTS) sp->params_local += bf->elems * bf->instances;
        }
        int64_t scratch_comm, scratch_work;
        runtime_scratch(prog, sp, &scratch_comm, &scratch_work, &sp->cpu_widen, &sp->host_staging);
        sp->ledger[PRT_COMM] += scratch_comm;
        sp->ledger[PRT_WORKSPACE] += scratch_work;
        sp->ledger_total = 0;
        for (int k = 0; k < PRT_NCLASS; k++) sp->ledger_total += sp->ledger[k];
    }
}
