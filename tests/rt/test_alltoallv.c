/*
 * test_alltoallv.c — the variable-count all-to-all (parc_rt.h's alltoallv) on a
 * mesh of axes ep (all S ranks; run with mpirun -np S, S = 2 or 3) and one
 * (size 1), nccl-tests style: every element is a small integer from (source
 * rank, destination rank, row, column), so a result is exactly right or wrong;
 * wrong elements are counted.
 *   - uneven counts: rank r sends rows_to(r, j) rows to rank j, some of them 0,
 *     and nothing at all to the last rank, which receives no row;
 *   - the received counts (recv_rows) and the rows, packed by source rank;
 *   - an output larger than what arrives: the rows past it are not touched;
 *   - f32 and i32 elements (activations and expert indices);
 *   - the size-1 axis: recv_rows = send_rows, the rows copied.
 * usage: test_alltoallv S [overflow].  Exit status 0 iff nothing was wrong on
 * any rank.  With `overflow`, rank 0's output holds one row less than arrives:
 * the run must stop with the runtime's error (the ctest matches its message).
 */
#include "prt_internal.h"
#include "rt_test.h"

enum { INNER = 3, SPARE = 2 };

static prt *RT;
static long long wrong;

/* Rows rank r sends to rank j of S: uneven, some 0, none to the last rank. */
static int rows_to(int r, int j, int S) { return j == S - 1 ? 0 : (2 * r + 3 * j + 1) % 4; }

/* Element i of row k that rank r sends to rank j. */
static int value(int r, int j, int k, int i) { return 1000 * r + 100 * j + 10 * k + i + 1; }

static void put(void *buf, int64_t dtype, int64_t at, int v) {
    if (dtype == PRT_I32) ((int32_t *)buf)[at] = v;
    else ((float *)buf)[at] = (float)v;
}
static int get(const void *buf, int64_t dtype, int64_t at) {
    return dtype == PRT_I32 ? ((const int32_t *)buf)[at] : (int)((const float *)buf)[at];
}

static void expect(const char *what, int64_t dtype, long long bad, long long n) {
    if (bad)
        fprintf(stderr, "rank %d: alltoallv %s (%s): %lld of %lld wrong\n", RT->world_rank, what,
                prt_dtype_names[dtype], bad, n);
    wrong += bad;
}

static void test_axis(int64_t dtype) {
    const int axis = 0, S = prt_axis_size(RT, axis), me = (int)prt_coord(RT, axis);
    int32_t send_rows[8], recv_rows[8];
    int sent = 0, arriving = 0;
    for (int j = 0; j < S; j++) sent += send_rows[j] = rows_to(me, j, S);
    for (int r = 0; r < S; r++) arriving += rows_to(r, me, S);
    int32_t *in = calloc((size_t)(sent + 1) * INNER, 4), *out = calloc((size_t)(arriving + SPARE) * INNER, 4);
    int64_t at = 0;
    for (int j = 0; j < S; j++)
        for (int k = 0; k < send_rows[j]; k++)
            for (int i = 0; i < INNER; i++) put(in, dtype, at++, value(me, j, k, i));
    for (int64_t e = 0; e < (int64_t)(arriving + SPARE) * INNER; e++) put(out, dtype, e, -7);
    for (int j = 0; j < S; j++) recv_rows[j] = -1;

    prt_alltoallv(RT, axis, out, in, send_rows, recv_rows, arriving + SPARE, INNER,
                  PRT_ARG_DTYPES(dtype, dtype, PRT_I32, PRT_I32));

    long long bad = 0;
    for (int r = 0; r < S; r++) bad += recv_rows[r] != rows_to(r, me, S);
    expect("received counts", dtype, bad, S);
    bad = 0, at = 0;
    for (int r = 0; r < S; r++)
        for (int k = 0; k < rows_to(r, me, S); k++)
            for (int i = 0; i < INNER; i++) bad += get(out, dtype, at++) != value(r, me, k, i);
    expect("rows", dtype, bad, at);
    bad = 0;
    for (int64_t e = (int64_t)arriving * INNER; e < (int64_t)(arriving + SPARE) * INNER; e++)
        bad += get(out, dtype, e) != -7;
    expect("rows past the arrivals", dtype, bad, SPARE * INNER);
    if (me == S - 1) expect("rows at the last rank (none)", dtype, arriving != 0, 1);
    free(in), free(out);
}

/* Axis 1 has one rank: what it sends itself is what it gets. */
static void test_size_one(void) {
    int32_t send_rows[1] = {2}, recv_rows[1] = {-1};
    float in[2 * INNER], out[2 * INNER + 1];
    for (int e = 0; e < 2 * INNER; e++) in[e] = (float)value(RT->world_rank, 0, e / INNER, e % INNER);
    out[2 * INNER] = -7;
    prt_alltoallv(RT, 1, out, in, send_rows, recv_rows, 3, INNER, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_I32, PRT_I32));
    long long bad = recv_rows[0] != 2;
    for (int e = 0; e < 2 * INNER; e++) bad += out[e] != in[e];
    bad += out[2 * INNER] != -7;
    expect("on a size-1 axis", PRT_F32, bad, 2 * INNER + 2);
}

int main(int argc, char **argv) {
    if (argc < 2 || atoi(argv[1]) < 2 || atoi(argv[1]) > 8) {
        fprintf(stderr, "usage: test_alltoallv S (2..8, the number of ranks)\n");
        return 2;
    }
    static const char *names[2] = {"ep", "one"};
    int64_t sizes[2] = {atoi(argv[1]), 1};
    prt_plan_desc plan = rt_plan("test_alltoallv", 2, names, sizes);
    char *rt_argv[2] = {argv[0], NULL};
    RT = prt_init(1, rt_argv, &plan);
    if (argc > 2 && !strcmp(argv[2], "overflow")) {
        int S = (int)sizes[0], me = (int)prt_coord(RT, 0), arriving = 0, sent = 0;
        int32_t send_rows[8], recv_rows[8];
        for (int j = 0; j < S; j++) sent += send_rows[j] = rows_to(me, j, S);
        for (int r = 0; r < S; r++) arriving += rows_to(r, me, S);
        float *in = rt_alloc((sent + 1) * INNER), *out = rt_alloc((arriving + 1) * INNER);
        prt_alltoallv(RT, 0, out, in, send_rows, recv_rows, me == 0 ? arriving - 1 : arriving, INNER,
                      PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_I32, PRT_I32));
        fprintf(stderr, "test_alltoallv: FAIL: rank %d's alltoallv into too small an output returned\n", me);
        return 1;
    }
    test_axis(PRT_F32);
    test_axis(PRT_I32);
    test_size_one();
    long long total = wrong + rt_failures;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    int rank = RT->world_rank;
    int64_t status = prt_finalize(RT);
    if (rank == 0) printf("test_alltoallv: %s (%lld wrong elements/checks over all ranks)\n", total ? "FAIL" : "ok", total);
    return total || status ? 1 : 0;
}
