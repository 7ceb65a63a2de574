/*
 * bench_collectives.c — the runtime's all-reduce, all-gather and reduce-scatter
 * against the raw MPI calls of the same sizes on the same communicator (one mesh
 * axis over all ranks; run with mpirun -np 2).  Prints, per size, the time of
 * both, the runtime's overhead in percent, and algbw/busbw as nccl-tests defines
 * them (size = bytes of the full buffer: the all-reduce buffer, the all-gather
 * output, the reduce-scatter input; busbw = algbw x 2(n-1)/n for all-reduce,
 * x (n-1)/n for the other two).  Also all-gather with outer = 8, the packed
 * layout [outer, S, inner], against the same bytes gathered raw.  Cold: one
 * call right after the process malloced, touched and freed 64 MiB (as a
 * training step's other work does between two collectives), the median of 5,
 * both sides: a temporary the MPI library mallocs per call then meets the
 * allocator as a step leaves it (prt_init fixes glibc's thresholds so that it
 * reuses touched pages; with glibc's sliding ones each such call faulted its
 * temporary's pages anew).
 *   mpirun -np 2 bench_collectives [max_bytes]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"

enum { OP_ALLREDUCE, OP_ALLGATHER, OP_REDUCESCATTER, OP_ALLGATHER_OUTER8 };
static const char *op_names[] = {"allreduce", "allgather", "reducescatter", "allgather(outer 8)"};

/* One call of `op` on `bytes` (the full buffer); raw = the MPI call itself. */
static void call(prt *rt, int op, int raw, float *a, float *b, int64_t floats, int S) {
    MPI_Comm comm = prt_axis_comm(rt, 0);
    int64_t block = floats / S;
    switch (op) {
    case OP_ALLREDUCE:
        if (raw) MPI_Allreduce(MPI_IN_PLACE, a, (int)floats, MPI_FLOAT, MPI_SUM, comm);
        else prt_allreduce(rt, 0, a, floats, 0);
        break;
    case OP_ALLGATHER:
    case OP_ALLGATHER_OUTER8:
        if (raw) MPI_Allgather(a, (int)block, MPI_FLOAT, b, (int)block, MPI_FLOAT, comm);
        else if (op == OP_ALLGATHER) prt_allgather(rt, 0, b, a, 1, block, 0);
        else prt_allgather(rt, 0, b, a, 8, block / 8, 0);
        break;
    case OP_REDUCESCATTER:
        if (raw) MPI_Reduce_scatter_block(a, b, (int)block, MPI_FLOAT, MPI_SUM, comm);
        else prt_reducescatter(rt, 0, b, a, 1, block, 0);
        break;
    }
}

/* Seconds per call (the max over ranks), over enough calls to last ~0.1 s. */
static double time_op(prt *rt, int op, int raw, float *a, float *b, int64_t floats, int S) {
    for (int w = 0; w < 2; w++) call(rt, op, raw, a, b, floats, S);
    int reps = 1;
    for (;;) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int r = 0; r < reps; r++) call(rt, op, raw, a, b, floats, S);
        double t = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (t > 0.1 || reps >= (1 << 16)) return t / reps;
        reps *= t < 0.01 ? 10 : 2;
    }
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Seconds of one call after the heap's churn (the max over ranks), the median of 5. */
static double time_cold(prt *rt, int op, int raw, float *a, float *b, int64_t floats, int S) {
    enum { COLD = 5, CHURN = 64 << 20 };
    double t[COLD];
    for (int k = 0; k < COLD; k++) {
        char *other = malloc(CHURN);
        if (other) memset(other, 1, CHURN);
        free(other);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        call(rt, op, raw, a, b, floats, S);
        t[k] = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &t[k], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    qsort(t, COLD, sizeof t[0], cmp_double);
    return t[COLD / 2];
}

int main(int argc, char **argv) {
    int world = 1;
    const char *env = getenv("OMPI_COMM_WORLD_SIZE");
    if (env) world = atoi(env);
    static const char *names[1] = {"x"};
    prt_plan_desc plan;
    memset(&plan, 0, sizeof plan);
    plan.plan_name = "bench_collectives";
    plan.naxes = 1;
    plan.axis_names[0] = names[0];
    plan.axis_sizes[0] = world;
    plan.dp_axis = plan.tp_axis = plan.pp_axis = -1;
    int64_t max_bytes = argc > 1 ? atoll(argv[1]) : 16 << 20;
    char *rt_argv[2] = {argv[0], NULL};
    prt *rt = prt_init(1, rt_argv, &plan);
    int S = prt_axis_size(rt, 0);
    float *a = malloc((size_t)max_bytes), *b = malloc((size_t)max_bytes);
    if (!a || !b) return 1;
    for (int64_t i = 0; i < max_bytes / 4; i++) a[i] = b[i] = 1.0f;
    if (rt->world_rank == 0)
        printf("%d ranks; times are the max over ranks; cold: one call after 64 MiB malloced, touched and freed\n"
               "%-20s %10s %10s %10s %9s %10s %10s %11s %11s\n", S, "op", "bytes", "prt us", "mpi us", "overhead",
               "algbw GB/s", "busbw GB/s", "prt cold us", "mpi cold us");
    for (int op = 0; op < 4; op++) {
        for (int64_t bytes = 1024; bytes <= max_bytes; bytes *= 16) {
            int64_t floats = bytes / 4;
            if (floats % (8 * S)) continue;
            double ours = time_op(rt, op, 0, a, b, floats, S), raw = time_op(rt, op, 1, a, b, floats, S);
            double ours_cold = time_cold(rt, op, 0, a, b, floats, S), raw_cold = time_cold(rt, op, 1, a, b, floats, S);
            double algbw = (double)bytes / ours * 1e-9;
            double factor = op == OP_ALLREDUCE ? 2.0 * (S - 1) / S : (double)(S - 1) / S;
            if (rt->world_rank == 0)
                printf("%-20s %10lld %10.1f %10.1f %8.1f%% %10.2f %10.2f %11.1f %11.1f\n", op_names[op], (long long)bytes,
                       ours * 1e6, raw * 1e6, (ours / raw - 1.0) * 100.0, algbw, algbw * factor, ours_cold * 1e6,
                       raw_cold * 1e6);
        }
    }
    free(a);
    free(b);
    return (int)prt_finalize(rt);
}
