/*
 * fault_prog.c — a small 4-rank program (mesh dp=2 x tp=2) for test_fault.sh: each
 * step all-reduces on both axes and passes a message around the dp ring.
 * Fault hooks: PRT_TEST_DIE=RANK:STEP (the runtime's: SIGKILL at step begin),
 * FAULT_HANG=RANK:STEP (that rank sleeps 120 s instead of communicating, so the
 * others' watchdog must fire), FAULT_STOP=RANK:STEP (that rank stops itself with
 * SIGSTOP: alive but never arriving), FAULT_BADCALL=RANK:STEP (that rank makes an invalid
 * runtime call, so PRT_CHECK must abort the job), FAULT_NOSEND=RANK:STEP (that rank stops
 * itself with SIGSTOP instead of its send, so its successor waits in the receive).  With
 * FAULT_TAG0=1 every step's message has tag 0, as a pipeline's (direction, micro-batch,
 * chunk) tags repeat each step, so from the second step on the runtime posts the receive
 * ahead of its call.  The message must arrive equal to the all-reduced values it was
 * copied from (the same on every rank), else exit 1.  Runtime flags pass through.
 */
#include <signal.h>
#include <unistd.h>

#include "rt_test.h"

static int hook(const char *env, int64_t rank, int64_t step) {
    const char *v = getenv(env);
    long long r, s;
    return v && sscanf(v, "%lld:%lld", &r, &s) == 2 && r == rank && s == step;
}

int main(int argc, char **argv) {
    static const char *names[2] = {"dp", "tp"};
    static const int64_t sizes[2] = {2, 2};
    prt_plan_desc plan = rt_plan("fault_prog", 2, names, sizes);
    plan.steps = 6;
    plan.batch = 4;
    plan.seq = 8;
    plan.vocab = 256;
    prt *rt = prt_init(argc, argv, &plan);
    int64_t rank = prt_coord(rt, 0) * 2 + prt_coord(rt, 1);
    float buf[256], msg[64];
    int32_t tokens[4 * 8], targets[4 * 8];
    for (int64_t step = 0; step < prt_steps(rt); step++) {
        prt_step_begin(rt, step);
        if (hook("FAULT_HANG", rank, step)) sleep(120);
        if (hook("FAULT_STOP", rank, step)) raise(SIGSTOP);
        if (hook("FAULT_BADCALL", rank, step)) prt_ptr(rt, 99, 0);
        prt_data(rt, tokens, targets, step, prt_coord(rt, 0) * 2, 2, 8, 256, 0);  /* this dp rank's half of the batch */
        prt_span_begin(rt, "exchange");
        for (int i = 0; i < 256; i++) buf[i] = (float)(i + rank + tokens[0]);
        prt_allreduce(rt, 0, buf, 256, 0);
        prt_allreduce(rt, 1, buf, 256, 0);
        for (int i = 0; i < 64; i++) msg[i] = buf[i];
        int64_t tag = getenv("FAULT_TAG0") ? 0 : step;
        if (hook("FAULT_NOSEND", rank, step)) raise(SIGSTOP);
        prt_send(rt, 0, 1, msg, 64, tag, 0);
        for (int i = 0; i < 64; i++) msg[i] = -1.0f;
        prt_recv(rt, 0, -1, msg, 64, tag, 0);
        for (int i = 0; i < 64; i++)
            if (msg[i] != buf[i]) {
                fprintf(stderr, "fault_prog: rank %lld step %lld: message element %d is %g, want %g\n", (long long)rank,
                        (long long)step, i, msg[i], buf[i]);
                return 1;
            }
        prt_span_end(rt);
        usleep(50 * 1000);
        prt_step_end(rt, step);
    }
    if (hook("FAULT_STOP", rank, prt_steps(rt))) raise(SIGSTOP);  /* step = steps: before the shutdown */
    return (int)prt_finalize(rt);
}
