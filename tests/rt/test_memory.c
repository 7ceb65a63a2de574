/*
 * test_memory.c — the buffer table, the ledger and parameter initialisation, on a
 * mesh of one axis "dp" (run with mpirun -np 2; -np 1 works too).
 *   usage: test_memory good|bad|bad-comm
 * Asserts, on every rank:
 *   - ledger bytes per class equal the table's bytes exactly, plus the runtime's
 *     own staging (an outer > 1 all-gather, a buffered send) booked to PRT_COMM;
 *   - initial values are layout-independent: a split parameter's block, a
 *     ZeRO-sharded parameter's flat share (pad elements 0) and an fp32 master
 *     (COPY) equal the corresponding elements of the unsplit parameter bit for bit;
 *     a bf16 parameter is the rounded fp32 one; layers differ; the instances of
 *     interleaved pipeline chunks (layers_per_chunk) are the right global layers;
 *   - prt_finalize returns 0 with the right expectations (good) and 3 when the
 *     compiler's ledger disagrees (bad: weights off by 4 bytes; bad-comm: comm
 *     expectation one byte below the measured peak).
 * Exit status 0 iff all of that held.
 */
#include "prt_internal.h"
#include "rt_test.h"

enum { WTE, W_SPLIT, W_FULL, W_ZERO, W_ZERO_FULL, MASTER_Z, ADAM_M, ADAM_V, ONES_ZERO, GRADS, ACT_BF16, COMM_BUF,
       WTE_BF16, MASTER_WTE, INTERLEAVED, ALL_LAYERS, NBUF };

static uint16_t to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "good";
    if (strcmp(mode, "good") && strcmp(mode, "bad") && strcmp(mode, "bad-comm")) {
        fprintf(stderr, "usage: test_memory good|bad|bad-comm\n");
        return 2;
    }
    int world = 1;
    {   /* the mesh must match the world: ask MPI before building the plan */
        const char *env = getenv("OMPI_COMM_WORLD_SIZE");
        if (env) world = atoi(env);
    }
    static const char *names[1] = {"dp"};
    int64_t sizes[1] = {world};
    prt_plan_desc plan = rt_plan("test_memory", 1, names, sizes);
    char *rt_argv[3] = {argv[0], "--memory", NULL};
    prt *rt = prt_init(2, rt_argv, &plan);
    int S = rt->world_size;
    int64_t c = prt_coord(rt, 0);

    /* ZeRO shares: z.w [5,3] -> 15 elements, share ceil(15/S); ones [3] -> ceil(3/S). */
    int64_t zshare = (15 + S - 1) / S, oshare = (3 + S - 1) / S;
    PRT_CHECK(10 % S == 0, "test_memory needs a dp size dividing 10");
#define P(nm, init_nm, k, dt, el, inst, ini, layer, nd, d0, d1, s0, s1, z, cp, sd) \
    {nm, init_nm, k, dt, el, inst, ini, layer, nd, {d0, d1, 0, 0}, {s0, s1, -1, -1}, z, cp, sd}
    prt_buffer_desc t[NBUF] = {
        [WTE] = P("wte", "wte", PRT_WEIGHTS, PRT_F32, 60, 1, PRT_INIT_NORMAL, -1, 2, 10, 6, -1, -1, -1, -1, 0.02),
        [W_SPLIT] = P("h.mlp.up.w", "mlp.up.w", PRT_WEIGHTS, PRT_F32, 60 / S, 2, PRT_INIT_NORMAL, 0, 2, 6, 10, -1, 0, -1, -1, 0.02),
        [W_FULL] = P("h.mlp.up.w(full)", "mlp.up.w", PRT_ACTIVATIONS, PRT_F32, 60, 2, PRT_INIT_NORMAL, 0, 2, 6, 10, -1, -1, -1, -1, 0.02),
        [W_ZERO] = P("z.w", "z.w", PRT_WEIGHTS, PRT_F32, zshare, 1, PRT_INIT_NORMAL, -1, 2, 5, 3, -1, -1, 0, -1, 1.0),
        [W_ZERO_FULL] = P("z.w(full)", "z.w", PRT_ACTIVATIONS, PRT_F32, 15, 1, PRT_INIT_NORMAL, -1, 2, 5, 3, -1, -1, -1, -1, 1.0),
        [MASTER_Z] = P("z.w(master)", "z.w", PRT_MASTER, PRT_F32, zshare, 1, PRT_INIT_COPY, -1, 2, 5, 3, -1, -1, 0, W_ZERO, 0),
        [ADAM_M] = P("z.w(m)", "z.w.m", PRT_OPTIM, PRT_F32, zshare, 1, PRT_INIT_ZEROS, -1, 2, 5, 3, -1, -1, 0, -1, 0),
        [ADAM_V] = P("z.w(v)", "z.w.v", PRT_OPTIM, PRT_F32, zshare, 1, PRT_INIT_ZEROS, -1, 2, 5, 3, -1, -1, 0, -1, 0),
        [ONES_ZERO] = P("ln.w", "ln.w", PRT_WEIGHTS, PRT_F32, oshare, 1, PRT_INIT_ONES, -1, 1, 3, 0, -1, -1, 0, -1, 0),
        [GRADS] = P("grads", "grads", PRT_GRADS, PRT_F32, 130, 1, PRT_INIT_NONE, -1, 0, 0, 0, -1, -1, -1, -1, 0),
        [ACT_BF16] = P("acts", "acts", PRT_ACTIVATIONS, PRT_BF16, 33, 3, PRT_INIT_NONE, -1, 0, 0, 0, -1, -1, -1, -1, 0),
        [COMM_BUF] = P("pp.msg", "pp.msg", PRT_COMM, PRT_F32, 16, 1, PRT_INIT_NONE, -1, 0, 0, 0, -1, -1, -1, -1, 0),
        [WTE_BF16] = P("wte(bf16)", "wte", PRT_WEIGHTS, PRT_BF16, 60, 1, PRT_INIT_NORMAL, -1, 2, 10, 6, -1, -1, -1, -1, 0.02),
        [MASTER_WTE] = P("wte(master)", "wte", PRT_MASTER, PRT_F32, 60, 1, PRT_INIT_COPY, -1, 2, 10, 6, -1, -1, -1, WTE_BF16, 0),
        /* interleaved pipeline chunks of unlike sizes: layer 1, then layers 4..6, vs layers 0..7 */
        [INTERLEAVED] = P("h.ln.w(chunks)", "ln.noise", PRT_ACTIVATIONS, PRT_F32, 6, 4, PRT_INIT_NORMAL, 1, 1, 6, 0, -1, -1, -1, -1, 1.0),
        [ALL_LAYERS] = P("h.ln.w(all)", "ln.noise", PRT_ACTIVATIONS, PRT_F32, 6, 8, PRT_INIT_NORMAL, 0, 1, 6, 0, -1, -1, -1, -1, 1.0),
    };
    static const int64_t layer_of[4] = {1, 4, 5, 6};
    t[INTERLEAVED].layer_of = layer_of;
    t[INTERLEAVED].layer_of_n = 4;
    prt_register_buffers(rt, t, NBUF);

    int64_t want[PRT_NCLASS] = {
        [PRT_WEIGHTS] = 60 * 4 + (60 / S) * 2 * 4 + zshare * 4 + oshare * 4 + 60 * 2,
        [PRT_GRADS] = 130 * 4,
        [PRT_MASTER] = zshare * 4 + 60 * 4,
        [PRT_OPTIM] = 2 * zshare * 4,
        [PRT_ACTIVATIONS] = 120 * 4 + 15 * 4 + 99 * 2 + 12 * 6 * 4,
        [PRT_COMM] = 16 * 4,
        [PRT_WORKSPACE] = 0,
    };
    for (int k = 0; k < PRT_NCLASS; k++)
        RT_EXPECT(rt->ledger_now[k] == want[k], "rank %d: ledger %s = %lld, want %lld", rt->world_rank,
                  prt_class_names[k], (long long)rt->ledger_now[k], (long long)want[k]);

    /* layout-independent initial values */
    const float *split = prt_ptr(rt, W_SPLIT, 0), *full = prt_ptr(rt, W_FULL, 0);
    for (int layer = 0; layer < 2; layer++) {
        split = prt_ptr(rt, W_SPLIT, layer);
        full = prt_ptr(rt, W_FULL, layer);
        int64_t cols = 10 / S, bad = 0;
        for (int r = 0; r < 6; r++)
            for (int64_t k = 0; k < cols; k++) bad += memcmp(&split[r * cols + k], &full[r * 10 + c * cols + k], 4) != 0;
        RT_EXPECT(!bad, "layer %d: %lld elements of the split parameter differ from the unsplit one", layer, (long long)bad);
    }
    RT_EXPECT(memcmp(prt_ptr(rt, W_FULL, 0), prt_ptr(rt, W_FULL, 1), 60 * 4), "layers 0 and 1 got the same values");
    for (int i = 0; i < 4; i++)
        RT_EXPECT(!memcmp(prt_ptr(rt, INTERLEAVED, i), prt_ptr(rt, ALL_LAYERS, layer_of[i]), 6 * 4),
                  "interleaved instance %d is not global layer %lld", i, (long long)layer_of[i]);
    const float *zw = prt_ptr(rt, W_ZERO, 0), *zfull = prt_ptr(rt, W_ZERO_FULL, 0), *zmaster = prt_ptr(rt, MASTER_Z, 0);
    for (int64_t e = 0; e < zshare; e++) {
        int64_t g = c * zshare + e;
        float expect = g < 15 ? zfull[g] : 0.0f;
        RT_EXPECT(!memcmp(&zw[e], &expect, 4), "zero share element %lld (global %lld): %g, want %g", (long long)e,
                  (long long)g, zw[e], expect);
    }
    RT_EXPECT(!memcmp(zw, zmaster, (size_t)zshare * 4), "the COPY master differs from its weights");
    const float *ones = prt_ptr(rt, ONES_ZERO, 0);
    for (int64_t e = 0; e < oshare; e++)
        RT_EXPECT(ones[e] == (c * oshare + e < 3 ? 1.0f : 0.0f), "ones share element %lld = %g", (long long)e, ones[e]);
    const float *wte = prt_ptr(rt, WTE, 0), *mwte = prt_ptr(rt, MASTER_WTE, 0);
    const uint16_t *wbf = prt_ptr(rt, WTE_BF16, 0);
    double mean = 0, var = 0;
    for (int i = 0; i < 60; i++) {
        RT_EXPECT(wbf[i] == to_bf16(wte[i]), "bf16 wte[%d] is not the rounded fp32 value", i);
        mean += wte[i] / 60.0;
    }
    for (int i = 0; i < 60; i++) var += (wte[i] - mean) * (wte[i] - mean) / 60.0;
    RT_EXPECT(fabs(mean) < 0.01 && sqrt(var) > 0.012 && sqrt(var) < 0.028, "wte: mean %g std %g (init_std 0.02)", mean, sqrt(var));
    RT_EXPECT(!memcmp(wte, mwte, 60 * 4), "the fp32 master of bf16 weights is not the fp32 initial value");

    /* runtime staging is booked to PRT_COMM */
    float in[12], out[24], msg[10], got[10];
    for (int i = 0; i < 12; i++) in[i] = (float)i;
    for (int i = 0; i < 10; i++) msg[i] = (float)(i + rt->world_rank);
    prt_allgather(rt, 0, out, in, 3, 4, 0);
    int64_t stage = S > 1 ? 3 * 4 * S * 4 : 0;
    RT_EXPECT(rt->ledger_peak[PRT_COMM] == want[PRT_COMM] + stage, "comm peak after all-gather %lld, want %lld",
              (long long)rt->ledger_peak[PRT_COMM], (long long)(want[PRT_COMM] + stage));
    prt_send(rt, 0, 0, msg, 10, 7, 0);  /* to myself */
    prt_recv(rt, 0, 0, got, 10, 7, 0);
    RT_EXPECT(!memcmp(msg, got, sizeof msg), "send/recv to self");
    int64_t comm_peak = want[PRT_COMM] + stage + 10 * 4;
    RT_EXPECT(rt->ledger_peak[PRT_COMM] == comm_peak, "comm peak after a send %lld, want %lld",
              (long long)rt->ledger_peak[PRT_COMM], (long long)comm_peak);

    int64_t expect[PRT_NCLASS];
    memcpy(expect, want, sizeof expect);
    expect[PRT_COMM] = comm_peak;
    expect[PRT_WORKSPACE] = 1 << 20;
    if (!strcmp(mode, "bad")) expect[PRT_WEIGHTS] -= 4;
    if (!strcmp(mode, "bad-comm")) expect[PRT_COMM] -= 1;
    prt_expect_memory(rt, expect);

    int local_failures = rt_failures, total = 0;
    MPI_Allreduce(&local_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int rank = rt->world_rank;
    int64_t status = prt_finalize(rt);
    int64_t want_status = strcmp(mode, "good") ? 3 : 0;
    if (status != want_status) {
        fprintf(stderr, "FAIL: prt_finalize returned %lld, want %lld\n", (long long)status, (long long)want_status);
        total++;
    }
    if (rank == 0) printf("test_memory %s: %s (%d failures)\n", mode, total ? "FAIL" : "ok", total);
    return total ? 1 : 0;
}
