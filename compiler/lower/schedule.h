/*
 * schedule.h — the schedule pass: the pipeline schedule.
 *
 * Takes the schedule kind and the pipeline shape the checker validated
 * (p stages, m micro-batches per step, v chunks per stage) and gives, per stage,
 * the order in which it runs the forward and backward of every
 * (micro-batch, chunk).  The send/recv operations are not listed: they are
 * implied by the order (below), and schedule_verify() proves that every implied
 * send has its receive and that the stages cannot deadlock.
 *
 * Vocabulary.  "Stage" is a pipeline rank (a coordinate on the pp axis).  With
 * interleaving (v > 1) stage s holds v chunks; chunk c of stage s is model chunk
 * c * p + s, so the model is traversed stage 0 chunk 0, stage 1 chunk 0, ...,
 * stage p-1 chunk 0, stage 0 chunk 1, ..., stage p-1 chunk v-1.
 *
 * Communication implied by the order, on stage s:
 *   before F(m,c): receive its input activation    unless s == 0   && c == 0
 *   after  F(m,c): send its output activation      unless s == p-1 && c == v-1
 *   before B(m,c): receive its output gradient     unless s == p-1 && c == v-1
 *   after  B(m,c): send its input gradient         unless s == 0   && c == 0
 * Forward goes (s, c) -> (s+1, c), and (p-1, c) -> (0, c+1); backward the
 * reverse.  Sends are asynchronous (buffered), receives block.  With p == 1 and
 * v > 1 the "neighbour" is the stage itself (a local hand-off).
 *
 * The schedules (every one is "warm-up forwards, then steady one-forward-one-
 * backward pairs, then cool-down backwards"; only the warm-up count and the
 * numbering of items differ):
 *   SCHED_NONE         warm-up 0: F0 B0 F1 B1 ... (gradient accumulation; with
 *                      p > 1 this is naive model parallelism: one micro-batch
 *                      in the whole pipeline at a time).  Peak in flight 1.
 *   SCHED_GPIPE        warm-up m: F0 .. F(m-1), then B0 .. B(m-1) in the SAME
 *                      (ascending) order, so micro-batch 0's gradient is done
 *                      first on every stage.  Peak in flight m.
 *   SCHED_1F1B         PipeDream-Flush (Narayanan et al. 2021): warm-up
 *                      min(p-s-1, m) on stage s.  Peak in flight min(p-s, m).
 *   SCHED_INTERLEAVED  Megatron-LM interleaved 1F1B (Narayanan et al. 2021
 *                      §2.2, the order of Megatron's
 *                      forward_backward_pipelining_with_interleaving): needs
 *                      m % p == 0; n = m*v items of each kind per stage;
 *                      warm-up min(2(p-s-1) + (v-1)p, n) on stage s.  Forward
 *                      item k is chunk (k/p) % v, micro (k/(p v)) p + k % p;
 *                      backward item k is chunk v-1-(k/p) % v, same micro.
 *                      Peak in flight min(2(p-s-1) + (v-1)p + 1, m v); on
 *                      stage 0 min((v+1)p - 1, m v) chunk-micro-batches, i.e.
 *                      p + (p-1)/v micro-batches through a whole stage.
 *                      (Unlike old Megatron releases there is no special case
 *                      for m == p; the order above is sound there too.)
 *
 * Guarantees after schedule_build() returns 0: every stage lists each
 * (micro, chunk) exactly once as F and once as B, B after its F;
 * schedule_verify() returns 0 (the tests check this over hundreds of shapes);
 * all memory lives in the arena.
 */
#ifndef PARC_SCHEDULE_H
#define PARC_SCHEDULE_H

#include "parc.h"

typedef enum { WORK_FORWARD, WORK_BACKWARD } WorkKind;

/* One unit of work on a stage: the forward or backward of one micro-batch
 * through one of the stage's chunks. */
typedef struct WorkItem {
    uint8_t kind;    /* WorkKind */
    int32_t micro;   /* 0 .. m-1 */
    int32_t chunk;   /* 0 .. v-1 */
} WorkItem;

typedef struct Schedule {
    SchedKind kind;
    int stages, micro_batches, chunks;   /* p, m, v */
    int *count;          /* per stage: number of items (2*m*v) */
    WorkItem **items;    /* per stage: the order of work */
    /* Per stage: the maximum, over the stage's order, of the number of
     * (micro, chunk) pairs whose forward has started and whose backward has not
     * yet finished.  Unit: one micro-batch through ONE chunk of the stage.
     * THIS is the memory ledger's multiplier: saved activations on stage s =
     * peak_in_flight[s] * (saved activations of one micro-batch through one
     * chunk of s); where a stage's chunks hold unlike layer counts, through its
     * largest one (a slot is sized for the chunk that needs most). */
    int *peak_in_flight;
    /* Per stage: the maximum number of DISTINCT micro-batches that have at
     * least one chunk in flight at once.  Equals peak_in_flight when v == 1;
     * with v > 1 it is smaller.  For buffers kept per micro-batch regardless of
     * chunk (e.g. a micro-batch's input tokens and labels); NOT for saved
     * activations. */
    int *peak_micro_in_flight;
} Schedule;

/* Builds the schedule of `kind` for p = stages, m = micro_batches, v = chunks
 * into *out (all memory in `arena`).  Returns 0, or -1 without a diagnostic
 * when the parameters are impossible (p, m or v < 1; p > PARC_MAX_STAGES;
 * v != 1 for a kind other than SCHED_INTERLEAVED; m % p != 0 for
 * SCHED_INTERLEAVED; more than 2^27 items in all).  The checker guarantees
 * none of these, so -1 is a caller bug.  SCHED_1F1B accepts m < p (it then
 * degenerates towards GPipe on the first stages). */
int schedule_build(Arena *arena, SchedKind kind, int stages, int micro_batches, int chunks,
                   Schedule *out);

/* Proves *s sound: shape and item ranges valid; on every stage each
 * (micro, chunk) appears exactly once as F and once as B, B after its F;
 * executing all stages with buffered sends and blocking receives runs every
 * item (no deadlock); every send is received exactly once, by the stage and
 * chunk it is addressed to; the stored peaks equal the recomputed ones.
 * Returns 0 when sound, else -1 with the first problem found written to `why`
 * (NUL-terminated, truncated to why_size; why may be NULL).  A failure on a
 * built schedule is a compiler bug. */
int schedule_verify(const Schedule *s, char *why, size_t why_size);

/* The ideal bubble fraction (p-1)/(v*m): idle time over compute time of a stage
 * when forward and backward costs are uniform and communication is free. */
double schedule_bubble_ideal(const Schedule *s);

/* Event simulation of one step: each F of one chunk takes t_fwd seconds, each B
 * t_bwd, each send -> recv hop t_p2p (sends do not occupy the sender).  Returns
 * the makespan (the time the last stage finishes), or -1.0 when the schedule
 * deadlocks.  If idle != NULL fills idle[s] = makespan - busy time of stage s:
 * the time stage s waits, including its ramp-up before the first item and its
 * drain after the last.  Note t_fwd/t_bwd are per CHUNK: to compare an
 * interleaved schedule with a v == 1 one over the same model, give the v == 1
 * schedule v times the times. */
double schedule_simulate(const Schedule *s, double t_fwd, double t_bwd, double t_p2p,
                         double *idle);

/* The same simulation, also telling when each item starts: when start != NULL,
 * start[st][i] = the start of item i of stage st (the caller gives s->count[st]
 * doubles per stage).  Item i runs until start + t_fwd (or t_bwd); a message
 * it received arrived at or before its start. */
double schedule_simulate_spans(const Schedule *s, double t_fwd, double t_bwd, double t_p2p,
                               double *idle, double *const *start);

/* The simulation as the runtime runs a step (analyze.c): an F on stage st
 * of chunk c takes stage_fwd[st * chunks + c], a B stage_bwd[st * chunks + c]
 * (a pipeline's stages and chunks differ: the first holds the embedding, the
 * last the head and the loss, and chunks may hold unlike layers), and a message
 * holds both ends for t_hold: its sender after the item that sends it (the
 * runtime stages the buffer before the send returns: a copy into its send
 * slot, on a GPU first the copy to host memory) and its receiver once it
 * has arrived, before the item that needs it (taking it in: a copy out of
 * the receive posted ahead, on a GPU back to device memory).  It arrives
 * t_wire after the sender's hold ends.  Holds are not busy time: idle[]
 * counts them with the waits.  With both arrays NULL every stage takes t_fwd
 * and t_bwd, with the same holds. */
double schedule_simulate_stages(const Schedule *s, const double *stage_fwd, const double *stage_bwd, double t_fwd,
                                double t_bwd, double t_hold, double t_wire, double *idle, double *const *start);

/* Stable text form:
 *   schedule 1f1b: stages 2, micro_batches 4, chunks 1
 *   stage 0: F0 F1 B0 F2 B1 F3 B2 B3
 *   stage 1: F0 B0 F1 B1 F2 B2 F3 B3
 *   peak_in_flight: 2 1
 *   peak_micro_in_flight: 2 1
 * Items are written "F<micro>" / "B<micro>", with ".<chunk>" appended when
 * v > 1 ("F3.1"). */
void schedule_dump(const Schedule *s, FILE *out);

/* "none", "gpipe", "1f1b", "interleaved". */
const char *schedule_kind_name(SchedKind kind);

#endif
