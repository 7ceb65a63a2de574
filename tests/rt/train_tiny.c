/*
 * train_tiny.c — a hand-written one-layer GPT trained with the runtime's ops, the
 * way generated programs drive it: buffer table (parameters, grads, Adam moments),
 * synthetic data, forward, backward with accumulating gradients, gradient
 * all-reduce over dp, AdamW, step metrics.  The mesh is dp = the number of ranks
 * (mpirun -np 1 or 2); each rank trains on its share of every global batch.
 * test_train.sh checks that the loss falls and that dp=2 reproduces dp=1.
 */
#include "rt_test.h"

enum { V = 64, T = 16, C = 32, NH = 2, HD = 16, F = 4 * C, B = 4 };
enum { WTE, WPE, LN1W, LN1B, QKVW, PROJW, LN2W, LN2B, FCW, FCPW, LNFW, LNFB, HEADW, NPARAM };
static const struct { const char *name; int64_t rows, cols, init; } P[NPARAM] = {
    {"wte", V, C, PRT_INIT_NORMAL},  {"wpe", T, C, PRT_INIT_NORMAL},  {"ln1.w", C, 0, PRT_INIT_ONES},
    {"ln1.b", C, 0, PRT_INIT_ZEROS}, {"qkv.w", C, 3 * C, PRT_INIT_NORMAL}, {"proj.w", C, C, PRT_INIT_NORMAL},
    {"ln2.w", C, 0, PRT_INIT_ONES},  {"ln2.b", C, 0, PRT_INIT_ZEROS}, {"fc.w", C, F, PRT_INIT_NORMAL},
    {"fcproj.w", F, C, PRT_INIT_NORMAL}, {"lnf.w", C, 0, PRT_INIT_ONES}, {"lnf.b", C, 0, PRT_INIT_ZEROS},
    {"head.w", C, V, PRT_INIT_NORMAL},
};

int main(int argc, char **argv) {
    const char *env = getenv("OMPI_COMM_WORLD_SIZE");
    int64_t dp = env ? atoi(env) : 1;
    static const char *names[1] = {"dp"};
    prt_plan_desc plan = rt_plan("train_tiny", 1, names, &dp);
    plan.dp_axis = 0;
    plan.steps = 10;
    plan.batch = B;
    plan.seq = T;
    plan.vocab = V;
    prt *rt = prt_init(argc, argv, &plan);
    if (B % dp) { fprintf(stderr, "dp must divide %d\n", B); return 2; }

    /* the buffer table: params, grads, m, v (4 x NPARAM) */
    prt_buffer_desc table[4 * NPARAM];
    memset(table, 0, sizeof table);
    for (int i = 0; i < NPARAM; i++) {
        int64_t n = P[i].rows * (P[i].cols ? P[i].cols : 1);
        for (int k = 0; k < 4; k++) {
            prt_buffer_desc *d = &table[k * NPARAM + i];
            d->name = P[i].name;
            d->init_name = P[i].name;
            d->klass = k == 0 ? PRT_WEIGHTS : k == 1 ? PRT_GRADS : PRT_OPTIM;
            d->dtype = PRT_F32;
            d->elems = n;
            d->instances = 1;
            d->init = k == 0 ? P[i].init : k == 1 ? PRT_INIT_NONE : PRT_INIT_ZEROS;
            d->first_layer = -1;
            d->ndim = P[i].cols ? 2 : 1;
            d->gdims[0] = P[i].rows;
            d->gdims[1] = P[i].cols;
            d->split_axis[0] = d->split_axis[1] = d->split_axis[2] = d->split_axis[3] = -1;
            d->zero_axis = -1;
            d->copy_of = -1;
            d->init_std = 0.02;
        }
    }
    prt_register_buffers(rt, table, 4 * NPARAM);
    float *w[NPARAM], *g[NPARAM];
    for (int i = 0; i < NPARAM; i++) {
        w[i] = prt_ptr(rt, i, 0);
        g[i] = prt_ptr(rt, NPARAM + i, 0);
    }

    const int64_t Bl = B / dp, N = Bl * T;
    int32_t *tok = calloc((size_t)N, 4), *tgt = calloc((size_t)N, 4);
    float *x0 = rt_alloc(N * C), *h1 = rt_alloc(N * C), *qkv = rt_alloc(N * 3 * C), *att = rt_alloc(N * C);
    float *x1 = rt_alloc(N * C), *h2 = rt_alloc(N * C), *fc = rt_alloc(N * F), *ge = rt_alloc(N * F);
    float *x2 = rt_alloc(N * C), *h3 = rt_alloc(N * C), *logits = rt_alloc(N * V), *tmp = rt_alloc(N * C);
    float *mean1 = rt_alloc(N), *rstd1 = rt_alloc(N), *mean2 = rt_alloc(N), *rstd2 = rt_alloc(N);
    float *meanf = rt_alloc(N), *rstdf = rt_alloc(N), *stats = rt_alloc(2 * N), *probs = rt_alloc(Bl * NH * T * T);
    float *dx = rt_alloc(N * C), *dh = rt_alloc(N * C), *dqkv = rt_alloc(N * 3 * C), *datt = rt_alloc(N * C);
    float *dfc = rt_alloc(N * F), *dge = rt_alloc(N * F), *dlogits = rt_alloc(N * V);

    for (int64_t step = 0; step < prt_steps(rt); step++) {
        prt_step_begin(rt, step);
        prt_data(rt, tok, tgt, step, prt_coord(rt, 0) * Bl, Bl, T, V, 0);
        for (int i = 0; i < NPARAM; i++) prt_zero(rt, g[i], P[i].rows * (P[i].cols ? P[i].cols : 1), 0);
        /* forward */
        prt_span_begin(rt, "forward");
        prt_embed_fwd(rt, x0, tok, w[WTE], N, C, V, 0, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
        prt_pos_fwd(rt, x0, x0, w[WPE], Bl, T, C, 0, 0, 0);
        prt_layernorm_fwd(rt, h1, mean1, rstd1, x0, w[LN1W], w[LN1B], N, C, 1e-5, 0);
        prt_matmul_fwd(rt, qkv, h1, w[QKVW], N, C, 3 * C, 0);
        prt_attention_fwd(rt, att, probs, qkv, Bl, T, NH, NH, HD, 1, T, 0, 0);
        prt_matmul_fwd(rt, tmp, att, w[PROJW], N, C, C, 0);
        prt_add_fwd(rt, x1, x0, tmp, N * C, 0);
        prt_layernorm_fwd(rt, h2, mean2, rstd2, x1, w[LN2W], w[LN2B], N, C, 1e-5, 0);
        prt_matmul_fwd(rt, fc, h2, w[FCW], N, C, F, 0);
        prt_gelu_fwd(rt, ge, fc, N * F, 0);
        prt_matmul_fwd(rt, tmp, ge, w[FCPW], N, F, C, 0);
        prt_add_fwd(rt, x2, x1, tmp, N * C, 0);
        prt_layernorm_fwd(rt, h3, meanf, rstdf, x2, w[LNFW], w[LNFB], N, C, 1e-5, 0);
        prt_matmul_fwd(rt, logits, h3, w[HEADW], N, C, V, 0);
        float loss = 0;
        prt_xent_fwd(rt, &loss, stats, logits, tgt, N, V, 0, -1, PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
        prt_span_end(rt);
        /* backward: gradients of the mean loss over the global batch */
        prt_span_begin(rt, "backward");
        prt_zero(rt, dlogits, N * V, 0);
        prt_xent_bwd(rt, dlogits, logits, stats, tgt, N, V, 0, 1.0 / (B * T), PRT_ARG_DTYPES(PRT_F32, PRT_F32, PRT_F32, PRT_I32));
        prt_zero(rt, dh, N * C, 0);
        prt_matmul_bwd(rt, dh, g[HEADW], dlogits, h3, w[HEADW], N, C, V, 0);
        prt_zero(rt, dx, N * C, 0);  /* dx = d x2, then d x1, then d x0 (residual stream) */
        prt_layernorm_bwd(rt, dx, g[LNFW], g[LNFB], dh, x2, w[LNFW], meanf, rstdf, N, C, 0);
        prt_zero(rt, dge, N * F, 0);
        prt_matmul_bwd(rt, dge, g[FCPW], dx, ge, w[FCPW], N, F, C, 0);
        prt_zero(rt, dfc, N * F, 0);
        prt_gelu_bwd(rt, dfc, fc, dge, N * F, 0);
        prt_zero(rt, dh, N * C, 0);
        prt_matmul_bwd(rt, dh, g[FCW], dfc, h2, w[FCW], N, C, F, 0);
        prt_layernorm_bwd(rt, dx, g[LN2W], g[LN2B], dh, x1, w[LN2W], mean2, rstd2, N, C, 0);
        prt_zero(rt, datt, N * C, 0);
        prt_matmul_bwd(rt, datt, g[PROJW], dx, att, w[PROJW], N, C, C, 0);
        prt_zero(rt, dqkv, N * 3 * C, 0);
        prt_attention_bwd(rt, dqkv, datt, qkv, probs, Bl, T, NH, NH, HD, 1, T, 0, 0);
        prt_zero(rt, dh, N * C, 0);
        prt_matmul_bwd(rt, dh, g[QKVW], dqkv, h1, w[QKVW], N, C, 3 * C, 0);
        prt_layernorm_bwd(rt, dx, g[LN1W], g[LN1B], dh, x0, w[LN1W], mean1, rstd1, N, C, 0);
        prt_pos_bwd(rt, g[WPE], NULL, dx, Bl, T, C, 0, 0, 0);
        prt_embed_bwd(rt, g[WTE], tok, dx, N, C, V, 0, PRT_ARG_DTYPES(PRT_F32, PRT_I32));
        prt_span_end(rt);
        /* data-parallel gradient sum, then AdamW */
        for (int i = 0; i < NPARAM; i++) {
            int64_t n = P[i].rows * (P[i].cols ? P[i].cols : 1);
            prt_allreduce(rt, 0, g[i], n, 0);
            prt_adamw(rt, w[i], NULL, g[i], prt_ptr(rt, 2 * NPARAM + i, 0), prt_ptr(rt, 3 * NPARAM + i, 0), n,
                      step + 1, 1e-2, 0.9, 0.95, 1e-8, 0.0, 0);
        }
        prt_step_end(rt, step);
    }
    free(tok); free(tgt);
    float *bufs[] = {x0, h1, qkv, att, x1, h2, fc, ge, x2, h3, logits, tmp, mean1, rstd1, mean2, rstd2, meanf, rstdf,
                     stats, probs, dx, dh, dqkv, datt, dfc, dge, dlogits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    return (int)prt_finalize(rt);
}
