/*
 * test_collectives.c — every collective of the runtime on every axis of a 2x2x2
 * mesh (axes a, b, c; run with mpirun -np 8), nccl-tests style: inputs are small
 * integers from (rank, index, seed), so every sum is exact in float and a result
 * is either right or wrong; wrong elements are counted.
 *   - allreduce, allreduce_ends, allgather, reducescatter, alltoall, slice with
 *     outer = 1 and 3; allgather in place (in = out + coord x inner, outer 1);
 *   - started reduce-scatters, all-gathers (one in place) and an all-reduce in
 *     flight together, waited in another order than started;
 *   - axis -1 (no-op copy semantics);
 *   - pipeline send/recv rings (+1 and -1) with several tags and sizes in flight;
 *   - vocab-parallel cross-entropy and embedding on axis c (size 2) against the
 *     unsplit ops, and the step loss counting a tensor-parallel group once.
 * With the argument 4x2 the mesh is 4 x 2 (axes a and b) and only the
 * collectives and rings run.
 * Exit status 0 iff nothing was wrong on any rank.
 */
#include "prt_internal.h"
#include "rt_test.h"

static prt *RT;
static long long wrong;

static float f(int rank, int64_t idx, int seed) { return (float)((rank * 7 + idx * 3 + seed * 5) % 17 - 8); }

/* World rank of the member with coordinate c on `axis` of my group (last axis fastest). */
static int member(int axis, int c) {
    int stride = 1;
    for (int a = RT->naxes - 1; a > axis; a--) stride *= RT->axis_size[a];
    return RT->world_rank + (c - RT->coord[axis]) * stride;
}

static void expect_eq(const char *what, int axis, const float *got, const float *want, int64_t n) {
    long long bad = 0;
    for (int64_t i = 0; i < n; i++) bad += got[i] != want[i];
    if (bad) fprintf(stderr, "rank %d: %s on axis %d: %lld of %lld wrong\n", RT->world_rank, what, axis, bad, (long long)n);
    wrong += bad;
}

static void test_axis(int axis) {
    int S = prt_axis_size(RT, axis), me = RT->world_rank;
    int64_t c = prt_coord(RT, axis);
    for (int64_t outer = 1; outer <= 3; outer += 2) {
        const int64_t inner = 5, seed = (int)outer + 10 * axis;
        int64_t nin = outer * inner, nfull = outer * S * inner;
        float *in = rt_alloc(nfull), *out = rt_alloc(nfull), *want = rt_alloc(nfull);

        /* allreduce */
        for (int64_t i = 0; i < nfull; i++) in[i] = f(me, i, (int)seed);
        for (int64_t i = 0; i < nfull; i++) {
            want[i] = 0;
            for (int s = 0; s < S; s++) want[i] += f(member(axis, s), i, (int)seed);
        }
        prt_allreduce(RT, axis, in, nfull, 0);
        expect_eq("allreduce", axis, in, want, nfull);

        /* allreduce_ends: coordinates 0 and S - 1 (the whole axis when S = 2) */
        for (int64_t i = 0; i < nfull; i++) {
            in[i] = f(me, i, (int)seed + 7);
            want[i] = f(member(axis, 0), i, (int)seed + 7) + f(member(axis, S - 1), i, (int)seed + 7);
        }
        if (c == 0 || c == S - 1) {
            prt_allreduce_ends(RT, axis, in, nfull, 0);
            expect_eq("allreduce_ends", axis, in, want, nfull);
        }

        /* allgather: in[outer, inner] -> out[outer, S, inner] */
        for (int64_t i = 0; i < nin; i++) in[i] = f(me, i, (int)seed + 1);
        for (int64_t o = 0; o < outer; o++)
            for (int s = 0; s < S; s++)
                for (int64_t i = 0; i < inner; i++)
                    want[(o * S + s) * inner + i] = f(member(axis, s), o * inner + i, (int)seed + 1);
        prt_allgather(RT, axis, out, in, outer, inner, 0);
        expect_eq(outer > 1 ? "allgather(outer 3)" : "allgather", axis, out, want, nfull);
        if (outer == 1) { /* in place: this rank's block already at out + c * inner */
            for (int64_t i = 0; i < nfull; i++) out[i] = -99;
            for (int64_t i = 0; i < inner; i++) out[c * inner + i] = f(me, i, (int)seed + 1);
            prt_allgather(RT, axis, out, out + c * inner, 1, inner, 0);
            expect_eq("allgather(in place)", axis, out, want, nfull);
        }

        /* reducescatter: in[outer, S, inner] -> out[outer, inner] = block c summed */
        for (int64_t i = 0; i < nfull; i++) in[i] = f(me, i, (int)seed + 2);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                float s = 0;
                for (int r = 0; r < S; r++) s += f(member(axis, r), (o * S + c) * inner + i, (int)seed + 2);
                want[o * inner + i] = s;
            }
        prt_reducescatter(RT, axis, out, in, outer, inner, 0);
        expect_eq(outer > 1 ? "reducescatter(outer 3)" : "reducescatter", axis, out, want, nin);

        /* started reduce-scatters (the runtime's ring), three in flight at once
         * with an all-reduce among them, progressed between, waited in another
         * order than started: outer 1 and 3 (one that packs at a time) */
        {
            enum { K = 3 };
            const int64_t outers[K] = {outer, 1, 1}, inners[K] = {inner, 4099, 1};
            float *rin[K], *rout[K], *rwant[K];
            for (int k = 0; k < K; k++) {
                int64_t o_n = outers[k], i_n = inners[k], n = o_n * S * i_n;
                rin[k] = rt_alloc(n), rout[k] = rt_alloc(o_n * i_n), rwant[k] = rt_alloc(o_n * i_n);
                for (int64_t i = 0; i < n; i++) rin[k][i] = f(me, i, (int)seed + 40 + k);
                for (int64_t o = 0; o < o_n; o++)
                    for (int64_t i = 0; i < i_n; i++) {
                        float s = 0;
                        for (int r = 0; r < S; r++) s += f(member(axis, r), (o * S + c) * i_n + i, (int)seed + 40 + k);
                        rwant[k][o * i_n + i] = s;
                    }
            }
            for (int64_t i = 0; i < nfull; i++) {
                in[i] = f(me, i, (int)seed + 50);
                want[i] = 0;
                for (int s = 0; s < S; s++) want[i] += f(member(axis, s), i, (int)seed + 50);
            }
            /* two started all-gathers among them: one from a buffer of its own,
             * one in place (in = gout + c x inner) */
            const int64_t ginner[2] = {4099, 7};
            float *gin = rt_alloc(ginner[0]), *gout[2], *gwant[2];
            for (int k = 0; k < 2; k++) {
                gout[k] = rt_alloc(S * ginner[k]), gwant[k] = rt_alloc(S * ginner[k]);
                for (int r = 0; r < S; r++)
                    for (int64_t i = 0; i < ginner[k]; i++)
                        gwant[k][r * ginner[k] + i] = f(member(axis, r), i, (int)seed + 60 + k);
            }
            for (int64_t i = 0; i < ginner[0]; i++) gin[i] = f(me, i, (int)seed + 60);
            for (int64_t i = 0; i < ginner[1]; i++) gout[1][c * ginner[1] + i] = f(me, i, (int)seed + 61);
            prt_reducescatter_start(RT, axis, rout[0], rin[0], outers[0], inners[0], 0);
            prt_allgather_start(RT, axis, gout[0], gin, 1, ginner[0], 0);
            prt_reducescatter_start(RT, axis, rout[1], rin[1], outers[1], inners[1], 0);
            prt_allreduce_start(RT, axis, in, nfull, 0);
            prt_allgather_start(RT, axis, gout[1], gout[1] + c * ginner[1], 1, ginner[1], 0);
            prt_reducescatter_start(RT, axis, rout[2], rin[2], outers[2], inners[2], 0);
            for (int k = 0; k < 3; k++) prt_comm_progress(RT);
            prt_comm_wait(RT, rout[2]);
            prt_comm_wait(RT, gout[1]);
            prt_comm_wait(RT, in);
            prt_comm_wait(RT, rout[0]);
            prt_comm_wait(RT, rout[1]);
            prt_comm_wait(RT, gout[0]);
            expect_eq("allreduce_start", axis, in, want, nfull);
            expect_eq("allgather_start", axis, gout[0], gwant[0], S * ginner[0]);
            expect_eq("allgather_start(in place)", axis, gout[1], gwant[1], S * ginner[1]);
            free(gin);
            for (int k = 0; k < 2; k++) free(gout[k]), free(gwant[k]);
            for (int k = 0; k < K; k++) {
                expect_eq(outers[k] > 1 ? "reducescatter_start(outer 3)" : "reducescatter_start", axis, rout[k],
                          rwant[k], outers[k] * inners[k]);
                free(rin[k]), free(rout[k]), free(rwant[k]);
            }
        }

        /* alltoall: in[outer, S, inner] -> out[S, outer, inner]; out[s] = rank s's block c */
        for (int64_t i = 0; i < nfull; i++) in[i] = f(me, i, (int)seed + 3);
        for (int s = 0; s < S; s++)
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < inner; i++)
                    want[(s * outer + o) * inner + i] = f(member(axis, s), (o * S + c) * inner + i, (int)seed + 3);
        prt_alltoall(RT, axis, out, in, outer, inner, 0);
        expect_eq(outer > 1 ? "alltoall(outer 3)" : "alltoall", axis, out, want, nfull);

        /* slice: out[outer, inner] = in[outer, c, inner] */
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) want[o * inner + i] = in[(o * S + c) * inner + i];
        prt_slice(RT, axis, out, in, outer, inner, 0);
        expect_eq("slice", axis, out, want, nin);
        free(in); free(out); free(want);
    }

    /* send/recv rings: three messages of different sizes in flight each way */
    for (int delta = -1; delta <= 1; delta += 2) {
        float *msg[3], *got[3];
        for (int k = 0; k < 3; k++) {
            int64_t n = 4 + 3 * k;
            msg[k] = rt_alloc(n);
            got[k] = rt_alloc(n);
            for (int64_t i = 0; i < n; i++) msg[k][i] = f(me, i, 30 + k);
            prt_send(RT, axis, delta, msg[k], n, 100 + k, 0);
            memset(msg[k], 0, (size_t)n * sizeof(float));  /* sends are buffered: reuse is safe */
        }
        int from = member(axis, (int)((c - delta + S) % S));
        for (int k = 2; k >= 0; k--) {  /* receive in another order than sent: tags match them */
            int64_t n = 4 + 3 * k;
            float want[16];
            prt_recv(RT, axis, -delta, got[k], n, 100 + k, 0);
            for (int64_t i = 0; i < n; i++) want[i] = f(from, i, 30 + k);
            expect_eq(delta > 0 ? "send/recv ring +1" : "send/recv ring -1", axis, got[k], want, n);
        }
        prt_comm_complete_sends(RT);
        for (int k = 0; k < 3; k++) { free(msg[k]); free(got[k]); }
    }
}

/* The temporaries of a collective reuse their pages: a 6 MiB reduce-scatter
 * over each axis (on an axis of more than 2 ranks its ring mallocs two
 * scratch blocks and frees them every call; Open MPI's own reduce-scatter
 * mallocs one of the input's size), each call after a 64 MiB block was
 * malloced, touched and freed as a step's other work might, faults no page
 * from the third call on.  With glibc's sliding thresholds (no
 * prt_allocator_settings) each call faulted all pages of its temporaries
 * (MPI's: 1,536 pages, 31 ms cold against 1.1 ms warm on a Zen 5 VM).  Not
 * under a sanitizer, whose allocator is its own. */
#if defined(__SANITIZE_ADDRESS__)
#define RT_OWN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RT_OWN_ALLOCATOR 1
#endif
#endif
static void test_resident_temporaries(int axis) {
#ifndef RT_OWN_ALLOCATOR
    const int S = prt_axis_size(RT, axis);
    const int64_t n = (6 << 20) / 4, block = n / S;
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)block * 4);
    for (int64_t i = 0; i < n; i++) a[i] = 1.0f;
    int64_t worst = 0;
    for (int call = 0; call < 6; call++) {
        char *other = malloc(64 << 20);
        memset(other, 1, 64 << 20);
        free(other);
        int64_t before = prt_minor_faults();
        prt_reducescatter(RT, axis, b, a, 1, block, 0);
        int64_t faults = prt_minor_faults() - before;
        if (call >= 2 && faults > worst) worst = faults;
    }
    RT_EXPECT(worst <= 16, "rank %d: a 6 MiB reduce-scatter over %d ranks faulted %lld pages in a call after the second",
              RT->world_rank, S, (long long)worst);
    RT_EXPECT(b[0] == (float)S, "rank %d: the reduce-scatter summed %g, not %d", RT->world_rank, b[0], S);
    free(a), free(b);
#else
    (void)axis;
#endif
}

static void test_no_axis(void) {
    float in[6], out[6], want[6];
    for (int i = 0; i < 6; i++) in[i] = want[i] = f(RT->world_rank, i, 99);
    prt_allreduce(RT, -1, in, 6, 0);
    expect_eq("allreduce(axis -1)", -1, in, want, 6);
    prt_allgather(RT, -1, out, in, 2, 3, 0);
    expect_eq("allgather(axis -1)", -1, out, want, 6);
    prt_reducescatter(RT, -1, out, in, 2, 3, 0);
    expect_eq("reducescatter(axis -1)", -1, out, want, 6);
    prt_alltoall(RT, -1, out, in, 2, 3, 0);
    expect_eq("alltoall(axis -1)", -1, out, want, 6);
    prt_slice(RT, -1, out, in, 2, 3, 0);
    expect_eq("slice(axis -1)", -1, out, want, 6);
}

/* Vocab-parallel xent and embedding on axis 2 (c, size 2) vs the unsplit ops. */
static void test_vocab_parallel(void) {
    enum { N = 6, V = 10, C = 4 };
    const int axis = 2;
    int S = prt_axis_size(RT, axis);
    int64_t c = prt_coord(RT, axis), Vl = V / S, off = c * Vl;
    float logits[N * V], local[N * V], stats[2 * N], stats_ref[2 * N], d_ref[N * V], d_loc[N * V];
    int32_t targets[N] = {0, 9, 4, 5, 2, 7};
    rt_fill(logits, N * V, 7, 4);  /* same on every rank */
    for (int n = 0; n < N; n++)
        for (int64_t j = 0; j < Vl; j++) local[n * Vl + j] = logits[n * V + off + j];

    prt_step_begin(RT, 0);
    float loss_ref = 0, loss = 0;
    prt_xent_fwd(RT, &loss_ref, stats_ref, logits, targets, N, V, 0, -1, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    double unsplit_step_loss = RT->step_loss;
    RT->step_loss = 0;  /* the split call below is what the step reports */
    prt_xent_fwd(RT, &loss, stats, local, targets, N, Vl, off, axis, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    prt_step_end(RT, 0);
    (void)unsplit_step_loss;
    if (!rt_close("vocab-parallel xent loss", &loss, &loss_ref, 1, 1e-5, 1e-5)) wrong++;
    if (!rt_close("vocab-parallel xent stats", stats, stats_ref, 2 * N, 1e-5, 1e-5)) wrong++;
    /* the step loss counts each tensor-parallel group once: (world / S) groups */
    double want_step = (double)loss_ref * (RT->world_size / S) / (double)(RT->plan.batch * RT->plan.seq);
    if (fabs(RT->last_loss - want_step) > 1e-5 * fabs(want_step)) {
        fprintf(stderr, "rank %d: step loss %.9g, want %.9g\n", RT->world_rank, RT->last_loss, want_step);
        wrong++;
    }
    memset(d_ref, 0, sizeof d_ref);
    memset(d_loc, 0, sizeof d_loc);
    prt_xent_bwd(RT, d_ref, logits, stats_ref, targets, N, V, 0, 0.5, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    prt_xent_bwd(RT, d_loc, local, stats, targets, N, Vl, off, 0.5, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
    float d_want[N * V];
    for (int n = 0; n < N; n++)
        for (int64_t j = 0; j < Vl; j++) d_want[n * Vl + j] = d_ref[n * V + off + j];
    if (!rt_close("vocab-parallel xent dlogits", d_loc, d_want, N * Vl, 1e-6, 1e-5)) wrong++;

    /* embedding: local rows give a Partial sum; all-reduce over the axis = unsplit */
    float wte[V * C], out_ref[N * C], out[N * C], dout[N * C], dwte_ref[V * C], dwte[V * C];
    rt_fill(wte, V * C, 8, 1);
    rt_fill(dout, N * C, 9, 1);
    prt_embed_fwd(RT, out_ref, targets, wte, N, C, V, 0, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
    prt_embed_fwd(RT, out, targets, wte + off * C, N, C, Vl, off, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
    prt_allreduce(RT, axis, out, N * C, 0);
    if (!rt_close("vocab-parallel embed fwd", out, out_ref, N * C, 0, 0)) wrong++;
    memset(dwte_ref, 0, sizeof dwte_ref);
    memset(dwte, 0, sizeof dwte);
    prt_embed_bwd(RT, dwte_ref, targets, dout, N, C, V, 0, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
    prt_embed_bwd(RT, dwte, targets, dout, N, C, Vl, off, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
    if (!rt_close("vocab-parallel embed bwd", dwte, dwte_ref + off * C, Vl * C, 0, 0)) wrong++;
}

int main(int argc, char **argv) {
    static const char *names[3] = {"a", "b", "c"};
    /* "4x2": axes a of 4 and b of 2 (rings of more than two ranks) */
    int wide = argc > 1 && strcmp(argv[1], "4x2") == 0;
    static const int64_t cube[3] = {2, 2, 2}, rect[2] = {4, 2};
    prt_plan_desc plan = rt_plan("test_collectives", wide ? 2 : 3, names, wide ? rect : cube);
    plan.batch = 2;
    plan.seq = 3;
    if (wide) argv[1] = argv[0]; /* the runtime's options follow */
    RT = prt_init(argc - wide, argv + wide, &plan);
    for (int axis = 0; axis < RT->naxes; axis++) test_axis(axis);
    test_no_axis();
    if (!wide) test_vocab_parallel();
    test_resident_temporaries(0); /* 4 ranks with 4x2 */
    long long total = wrong + rt_failures;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    int rank = RT->world_rank;
    int64_t status = prt_finalize(RT);
    if (rank == 0) printf("test_collectives: %s (%lld wrong elements/checks over all ranks)\n", total ? "FAIL" : "ok", total);
    return total || status ? 1 : 0;
}
