/*
 * test_moe_ep.c — a mixture-of-experts layer with its experts split over the S
 * ranks of axis ep (run with mpirun -np S, S = 2 or 3; 2 experts per rank)
 * against the same layer with every expert on the rank (prt_cpu_moe.h):
 * router, dispatch, moe_rank_rows, the all-to-all of the counts, alltoallv,
 * moe_regroup_fwd to expert order, SwiGLU experts (grouped GEMMs), the way
 * back, the combine, and the whole backward.  Each rank routes its own tokens
 * with the same router and expert weights.  Out, dx, dwr and the routing
 * weights' gradient must equal the local layer's on every rank, and a rank's
 * expert weight gradients the local layers' summed over the ranks, to fp32
 * rounding.  With S = 3 the last rank's experts get no token (it receives no
 * row).  usage: test_moe_ep S.  Exit status 0 iff nothing was wrong on any rank.
 */
#include "prt_internal.h"
#include "rt_test.h"

enum { T = 7, H = 6, F = 4, K = 2, EL = 2, R = T * K };

static prt *RT;

static float *zeros(int64_t n) { return rt_alloc(n); }
static int32_t *izeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(int32_t)); }

static void close_to(const char *what, const float *got, const float *want, int64_t n) {
    char name[96];
    snprintf(name, sizeof name, "rank %d: %s", RT->world_rank, what);
    rt_close(name, got, want, n, 1e-6, 1e-5);
}

int main(int argc, char **argv) {
    if (argc < 2 || atoi(argv[1]) < 2 || atoi(argv[1]) > 8) {
        fprintf(stderr, "usage: test_moe_ep S (2..8, the number of ranks)\n");
        return 2;
    }
    static const char *names[1] = {"ep"};
    int64_t sizes[1] = {atoi(argv[1])};
    prt_plan_desc plan = rt_plan("test_moe_ep", 1, names, sizes);
    char *rt_argv[2] = {argv[0], NULL};
    RT = prt_init(1, rt_argv, &plan);
    const int64_t S = sizes[0], E = S * EL, me = prt_coord(RT, 0), cap = S * R;
    const double aux = 0.01, zc = 0.001;
    const int64_t F32 = PRT_F32, I32 = PRT_I32;
    const int64_t w_router = PRT_ARG_DTYPES(F32, I32, F32, I32, F32, F32, F32),
                  w_router_bwd = PRT_ARG_DTYPES(F32, F32, F32, F32, F32, I32, I32, F32, F32),
                  w_permute = PRT_ARG_DTYPES(F32, I32, I32, F32, I32), w_mm = PRT_ARG_DTYPES(F32, F32, F32, I32),
                  w_mm_bwd = PRT_ARG_DTYPES(F32, F32, F32, F32, F32, I32), w_rows = PRT_ARG_DTYPES(F32, F32, F32, I32),
                  w_rows_bwd = PRT_ARG_DTYPES(F32, F32, F32, F32, F32, I32),
                  w_v = PRT_ARG_DTYPES(F32, F32, I32, I32), w_regroup = PRT_ARG_DTYPES(F32, I32, F32, I32),
                  w_regroup_bwd = PRT_ARG_DTYPES(F32, F32, I32);

    /* the same router and experts on every rank; this rank's tokens */
    float *x = rt_alloc(T * H), *wr = rt_alloc(H * E), *w13 = rt_alloc(E * H * 2 * F), *w2 = rt_alloc(E * F * H),
          *dout = rt_alloc(T * H);
    rt_fill(x, T * H, 300 + (uint64_t)me, 1); rt_fill(wr, H * E, 301, 1); rt_fill(w13, E * H * 2 * F, 302, 0.5f);
    rt_fill(w2, E * F * H, 303, 0.5f); rt_fill(dout, T * H, 304 + (uint64_t)me, 1);
    if (S == 3) { /* the last rank's experts are never chosen */
        for (int t = 0; t < T; t++) x[t * H] = 2.0f + 0.25f * (float)(t % 3);
        for (int64_t e = E - EL; e < E; e++) wr[e] = -20.0f;
    }

    /* routing and dispatch (both runs) */
    float *logits = zeros(T * E), *weight = zeros(R), losses[2], *xp = zeros(R * H);
    int32_t *index = izeros(R), *counts = izeros(E), *offsets = izeros(E + 1), *rows = izeros(R);
    prt_moe_router_fwd(RT, logits, index, weight, counts, losses, x, wr, T, H, E, K, 0, aux, zc, w_router);
    prt_moe_permute_fwd(RT, xp, offsets, rows, x, index, T, H, E, K, w_permute);

    /* the reference: every expert here */
    float *h1 = zeros(R * 2 * F), *a = zeros(R * F), *y = zeros(R * H), *out_ref = zeros(T * H);
    float *dy = zeros(R * H), *dweight_ref = zeros(R), *da = zeros(R * F), *dh1 = zeros(R * 2 * F),
          *dxp = zeros(R * H), *dw13_ref = zeros(E * H * 2 * F), *dw2_ref = zeros(E * F * H), *dx_ref = zeros(T * H),
          *dwr_ref = zeros(H * E), *dlogits = zeros(T * E);
    prt_moe_matmul_fwd(RT, h1, xp, w13, offsets, E, H, 2 * F, w_mm);
    prt_swiglu_fwd(RT, a, h1, R, F, 0);
    prt_moe_matmul_fwd(RT, y, a, w2, offsets, E, F, H, w_mm);
    prt_moe_combine_fwd(RT, out_ref, y, weight, rows, T, H, K, w_rows);
    prt_moe_combine_bwd(RT, dy, dweight_ref, dout, y, weight, rows, T, H, K, w_rows_bwd);
    prt_moe_matmul_bwd(RT, da, dw2_ref, dy, a, w2, offsets, E, F, H, w_mm_bwd);
    prt_swiglu_bwd(RT, dh1, h1, da, R, F, 0);
    prt_moe_matmul_bwd(RT, dxp, dw13_ref, dh1, xp, w13, offsets, E, H, 2 * F, w_mm_bwd);
    prt_moe_permute_bwd(RT, dx_ref, dxp, rows, T, H, K, PRT_ARG_DTYPES(F32, F32, I32));
    prt_moe_router_bwd(RT, dx_ref, dwr_ref, dlogits, dweight_ref, logits, index, counts, x, wr, T, H, E, K, 0, aux, zc,
                       w_router_bwd);
    prt_allreduce(RT, 0, dw13_ref, E * H * 2 * F, 0);  /* every rank's tokens' share of each expert */
    prt_allreduce(RT, 0, dw2_ref, E * F * H, 0);

    /* expert parallel: this rank's EL experts, rows from every rank */
    int32_t *send_rows = izeros(S), *recv_rows = izeros(S), *back_rows = izeros(S), *recv_counts = izeros(S * EL),
            *offs = izeros(EL + 1);
    const float *w13_l = w13 + me * EL * H * 2 * F, *w2_l = w2 + me * EL * F * H;
    float *xr = zeros(cap * H), *xg = zeros(cap * H), *h1g = zeros(cap * 2 * F), *ag = zeros(cap * F),
          *yg = zeros(cap * H), *yr = zeros(cap * H), *yb = zeros(R * H), *out = zeros(T * H);
    prt_moe_rank_rows(RT, send_rows, counts, S, E, PRT_ARG_DTYPES(I32, I32));
    prt_alltoall(RT, 0, recv_counts, counts, 1, EL, PRT_ARG_DTYPES(I32, I32));
    prt_alltoallv(RT, 0, xr, xp, send_rows, recv_rows, cap, H, w_v);
    prt_moe_regroup_fwd(RT, xg, offs, xr, recv_counts, S, EL, H, 1, w_regroup);
    int64_t rl = offs[EL];  /* the rows this rank's experts got */
    prt_moe_matmul_fwd(RT, h1g, xg, w13_l, offs, EL, H, 2 * F, w_mm);
    prt_swiglu_fwd(RT, ag, h1g, rl, F, 0);
    prt_moe_matmul_fwd(RT, yg, ag, w2_l, offs, EL, F, H, w_mm);
    prt_moe_regroup_fwd(RT, yr, NULL, yg, recv_counts, S, EL, H, 0, w_regroup);
    prt_alltoallv(RT, 0, yb, yr, recv_rows, back_rows, R, H, w_v);
    prt_moe_combine_fwd(RT, out, yb, weight, rows, T, H, K, w_rows);

    float *dyb = zeros(R * H), *dweight = zeros(R), *dyr = zeros(cap * H), *dyg = zeros(cap * H), *dag = zeros(cap * F),
          *dh1g = zeros(cap * 2 * F), *dxg = zeros(cap * H), *dxr = zeros(cap * H), *dxp_ep = zeros(R * H),
          *dx = zeros(T * H), *dwr = zeros(H * E), *dw13_l = zeros(EL * H * 2 * F), *dw2_l = zeros(EL * F * H),
          *dlogits_ep = zeros(T * E);
    int32_t *rows_again = izeros(S), *rows_back = izeros(S);
    prt_moe_combine_bwd(RT, dyb, dweight, dout, yb, weight, rows, T, H, K, w_rows_bwd);
    prt_alltoallv(RT, 0, dyr, dyb, send_rows, rows_again, cap, H, w_v);
    prt_moe_regroup_bwd(RT, dyg, dyr, recv_counts, S, EL, H, 0, w_regroup_bwd);
    prt_moe_matmul_bwd(RT, dag, dw2_l, dyg, ag, w2_l, offs, EL, F, H, w_mm_bwd);
    prt_swiglu_bwd(RT, dh1g, h1g, dag, rl, F, 0);
    prt_moe_matmul_bwd(RT, dxg, dw13_l, dh1g, xg, w13_l, offs, EL, H, 2 * F, w_mm_bwd);
    prt_moe_regroup_bwd(RT, dxr, dxg, recv_counts, S, EL, H, 1, w_regroup_bwd);
    prt_alltoallv(RT, 0, dxp_ep, dxr, recv_rows, rows_back, R, H, w_v);
    prt_moe_permute_bwd(RT, dx, dxp_ep, rows, T, H, K, PRT_ARG_DTYPES(F32, F32, I32));
    prt_moe_router_bwd(RT, dx, dwr, dlogits_ep, dweight, logits, index, counts, x, wr, T, H, E, K, 0, aux, zc,
                       w_router_bwd);

    for (int64_t j = 0; j < S; j++)
        RT_EXPECT(back_rows[j] == send_rows[j] && rows_again[j] == recv_rows[j] && rows_back[j] == send_rows[j],
                  "rank %lld: the way back's counts from rank %lld differ from the way out's", (long long)me,
                  (long long)j);
    if (S == 3 && me == S - 1) RT_EXPECT(rl == 0, "rank %lld: its starved experts got %lld rows", (long long)me, (long long)rl);
    close_to("out", out, out_ref, T * H);
    close_to("dweight", dweight, dweight_ref, R);
    close_to("dx", dx, dx_ref, T * H);
    close_to("dwr", dwr, dwr_ref, H * E);
    close_to("dw13 of its experts", dw13_l, dw13_ref + me * EL * H * 2 * F, EL * H * 2 * F);
    close_to("dw2 of its experts", dw2_l, dw2_ref + me * EL * F * H, EL * F * H);

    long long total = rt_failures;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    int rank = RT->world_rank;
    int64_t status = prt_finalize(RT);
    if (rank == 0) printf("test_moe_ep: %s (%lld failed checks over all ranks)\n", total ? "FAIL" : "ok", total);
    return total || status ? 1 : 0;
}
