/*
 * prt_cpu_moe.c — the mixture-of-experts ops of the CPU backend (the math is
 * prt_cpu_moe.h's): per-token loops for routing, permutation and combine, and
 * the GEMMs through prt_cpu_ops.c's matmul core (prt_cpu_gemm_fwd/_bwd), one
 * call per expert, which widens 16-bit operands in the workspace as matmul
 * does.  These ops take no workspace of their own.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prt_cpu_moe.h"
#include "prt_cpu_tensor.h"
#include "prt_cpu_view.h"

/* ---------------------------------------------------------------- arguments */

/* Pointer argument `index` of `op`, declared i32 by the op's definition
 * (expert indices, counts, offsets, rows). */
static int32_t *moe_i32(prt *rt, int64_t dtypes, int index, const void *p, const char *op) {
    PRT_CHECK(p, "%s: pointer argument %d (an i32 tensor) is NULL", op, index + 1);
    PRT_CHECK(prt_arg_dtype(rt, dtypes, index, p, op) == PRT_I32, "%s: pointer argument %d must be i32", op,
              index + 1);
    return (int32_t *)p;
}

static void moe_sizes(const char *op, int64_t T, int64_t E, int64_t topk) {
    PRT_CHECK(T >= 0 && E >= 1 && topk >= 1 && topk <= E, "%s: %lld tokens, %lld experts, top-%lld: need T >= 0 "
              "and 1 <= topk <= E", op, (long long)T, (long long)E, (long long)topk);
    PRT_CHECK(T * topk <= INT32_MAX, "%s: %lld assignments do not fit the i32 rows", op, (long long)(T * topk));
}

/* Address of element `i` of a tensor of dtype `dtype` at p. */
static const void *elem_at(const void *p, int64_t dtype, int64_t i) {
    return p ? (const char *)p + (size_t)i * prt_dtype_size(dtype) : NULL;
}

/* ---------------------------------------------------------------- router */

static double sigmoid_of(double l) { return 1.0 / (1.0 + exp(-l)); }

/* One token's gate: its logits row, the row's max and log-sum-exp, and over
 * the chosen experts the normaliser of the weights (softmax: the sum of
 * exp(l - l_first) over S_t, l_first the largest chosen logit; sigmoid: the
 * sum of the chosen sigmoids). */
typedef struct gate_row {
    tensor logits;
    int64_t base, E;
    double lse, chosen_sum, first;
    int sigmoid;
} gate_row;

static double logit_of(const gate_row *g, int64_t e) { return LD(g->logits, g->base + e); }

static gate_row gate_of(tensor logits, int64_t t, int64_t E, const int32_t *chosen, int64_t topk, int sigmoid) {
    gate_row g = {logits, t * E, E, 0.0, 0.0, 0.0, sigmoid};
    double m = -INFINITY, s = 0.0;
    for (int64_t e = 0; e < E; e++) m = fmax(m, logit_of(&g, e));
    for (int64_t e = 0; e < E; e++) s += exp(logit_of(&g, e) - m);
    g.lse = m + log(s);
    g.first = logit_of(&g, chosen[0]);
    for (int64_t j = 0; j < topk; j++)
        g.chosen_sum += sigmoid ? sigmoid_of(logit_of(&g, chosen[j])) : exp(logit_of(&g, chosen[j]) - g.first);
    return g;
}

/* The weight of a chosen expert e (prt_cpu_moe.h). */
static double gate_weight(const gate_row *g, int64_t e) {
    return g->sigmoid ? sigmoid_of(logit_of(g, e)) / g->chosen_sum : exp(logit_of(g, e) - g->first) / g->chosen_sum;
}

/* The token's router probability of every expert (the auxiliary loss's p):
 * softmax, or the sigmoids over their sum. */
static double gate_prob(const gate_row *g, int64_t e, double sigmoid_total) {
    return g->sigmoid ? sigmoid_of(logit_of(g, e)) / sigmoid_total : exp(logit_of(g, e) - g->lse);
}
static double sigmoid_total_of(const gate_row *g) {
    double a = 0.0;
    if (g->sigmoid)
        for (int64_t e = 0; e < g->E; e++) a += sigmoid_of(logit_of(g, e));
    return a;
}

/* The topk experts of largest logit in decreasing order, the lower expert
 * first among equal logits. */
static void choose(tensor logits, int64_t t, int64_t E, int64_t topk, int32_t *chosen) {
    for (int64_t j = 0; j < topk; j++) {
        int64_t best = -1;
        float best_logit = 0.0f;
        for (int64_t e = 0; e < E; e++) {
            int taken = 0;
            for (int64_t m = 0; m < j && !taken; m++) taken = chosen[m] == e;
            float l = LD(logits, t * E + e);
            if (!taken && (best < 0 || l > best_logit)) best = e, best_logit = l;
        }
        chosen[j] = (int32_t)best;
    }
}

/* losses[0] = aux_coef E sum_e f_e P_e = aux_coef (E / T) sum_t sum_e f_e p[t,e]
 * with f_e = counts[e] / (T topk); losses[1] = z_coef mean_t lse_t^2. */
static void router_losses(tensor losses, tensor logits, const int32_t *index, const int32_t *counts, int64_t T,
                          int64_t E, int64_t topk, int sigmoid, double aux_coef, double z_coef) {
    double aux = 0.0, z = 0.0;
    for (int64_t t = 0; t < T; t++) {
        gate_row g = gate_of(logits, t, E, index + t * topk, topk, sigmoid);
        double total = sigmoid_total_of(&g);
        for (int64_t e = 0; e < E; e++) aux += (double)counts[e] / (double)(T * topk) * gate_prob(&g, e, total);
        z += g.lse * g.lse;
    }
    ST(losses, 0, T ? (float)(aux_coef * (double)E * aux / (double)T) : 0.0f);
    ST(losses, 1, T ? (float)(z_coef * z / (double)T) : 0.0f);
}

void prt_cpu_moe_router_fwd(prt *rt, void *logits_, void *index_, void *weight_, void *counts_, void *losses_,
                            const void *x, const void *wr, int64_t T, int64_t H, int64_t E, int64_t topk,
                            int64_t sigmoid, double aux_coef, double z_coef, int64_t dtypes) {
    const char *op = "moe_router_fwd";
    moe_sizes(op, T, E, topk);
    tensor logits = ften(rt, dtypes, 0, logits_, op), weight = ften(rt, dtypes, 2, weight_, op),
           losses = ften(rt, dtypes, 4, losses_, op);
    int32_t *index = moe_i32(rt, dtypes, 1, index_, op), *counts = moe_i32(rt, dtypes, 3, counts_, op);
    prt_cpu_gemm_fwd(rt, op, logits_, x, wr, T, H, E,
                     PRT_ARG_DTYPES(logits.dtype, prt_word_dtype(dtypes, 5), prt_word_dtype(dtypes, 6)));
    memset(counts, 0, (size_t)E * sizeof *counts);
    for (int64_t t = 0; t < T; t++) {
        int32_t *chosen = index + t * topk;
        choose(logits, t, E, topk, chosen);
        gate_row g = gate_of(logits, t, E, chosen, topk, (int)sigmoid);
        for (int64_t j = 0; j < topk; j++) {
            ST(weight, t * topk + j, (float)gate_weight(&g, chosen[j]));
            counts[chosen[j]]++;
        }
    }
    if (losses.p) router_losses(losses, logits, index, counts, T, E, topk, (int)sigmoid, aux_coef, z_coef);
}

void prt_cpu_moe_router_loss(prt *rt, void *losses_, const void *logits_, const void *index_, const void *counts_,
                             int64_t T, int64_t E, int64_t topk, int64_t sigmoid, double aux_coef, double z_coef,
                             int64_t dtypes) {
    const char *op = "moe_router_loss";
    moe_sizes(op, T, E, topk);
    tensor losses = ften(rt, dtypes, 0, losses_, op), logits = ften(rt, dtypes, 1, (void *)logits_, op);
    const int32_t *index = moe_i32(rt, dtypes, 2, index_, op), *counts = moe_i32(rt, dtypes, 3, counts_, op);
    router_losses(losses, logits, index, counts, T, E, topk, (int)sigmoid, aux_coef, z_coef);
}

void prt_cpu_moe_counts(prt *rt, const void *counts_, int64_t E, int64_t layer, int64_t dtypes) {
    const char *op = "moe_counts";
    prt_moe_count_tokens(rt, moe_i32(rt, dtypes, 0, (void *)counts_, op), E, layer);
}

void prt_cpu_moe_loss_add(prt *rt, const void *losses_, double scale, int64_t dtypes) {
    tensor losses = ften(rt, dtypes, 0, losses_, "moe_loss_add");
    prt_count_step_loss(rt, -1, scale * ((double)LD(losses, 0) + (double)LD(losses, 1)));
}

void prt_cpu_moe_router_bwd(prt *rt, void *dx, void *dwr, void *dlogits_, const void *dweight_, const void *logits_,
                            const void *index_, const void *counts_, const void *x, const void *wr, int64_t T,
                            int64_t H, int64_t E, int64_t topk, int64_t sigmoid, double aux_coef, double z_coef,
                            int64_t dtypes) {
    const char *op = "moe_router_bwd";
    moe_sizes(op, T, E, topk);
    tensor dlogits = ften(rt, dtypes, 2, dlogits_, op), dweight = ften(rt, dtypes, 3, dweight_, op),
           logits = ften(rt, dtypes, 4, logits_, op);
    const int32_t *index = moe_i32(rt, dtypes, 5, index_, op), *counts = moe_i32(rt, dtypes, 6, counts_, op);
    for (int64_t t = 0; t < T; t++) {
        const int32_t *chosen = index + t * topk;
        for (int64_t j = 0; j < topk; j++)
            PRT_CHECK(chosen[j] >= 0 && chosen[j] < E, "%s: token %lld chose expert %d of %lld", op, (long long)t,
                      chosen[j], (long long)E);
        gate_row g = gate_of(logits, t, E, chosen, topk, (int)sigmoid);
        double total = sigmoid_total_of(&g), wg = 0.0, pc = 0.0;
        if (dweight.p)
            for (int64_t j = 0; j < topk; j++) wg += gate_weight(&g, chosen[j]) * LD(dweight, t * topk + j);
        if (aux_coef != 0.0)
            for (int64_t e = 0; e < E; e++)
                pc += gate_prob(&g, e, total) * aux_coef * (double)E * counts[e] / ((double)T * (double)(T * topk));
        for (int64_t e = 0; e < E; e++) {
            double l = logit_of(&g, e), s = sigmoid ? sigmoid_of(l) : 0.0, d = 0.0;
            if (aux_coef != 0.0) {
                double c = aux_coef * (double)E * counts[e] / ((double)T * (double)(T * topk));
                d += sigmoid ? s * (1.0 - s) * (c - pc) / total : gate_prob(&g, e, total) * (c - pc);
            }
            if (z_coef != 0.0) d += z_coef * 2.0 / (double)T * g.lse * exp(l - g.lse);
            for (int64_t j = 0; j < topk && dweight.p; j++) {
                if (chosen[j] != e) continue;
                double gj = LD(dweight, t * topk + j);
                d += sigmoid ? s * (1.0 - s) * (gj - wg) / g.chosen_sum : gate_weight(&g, e) * (gj - wg);
            }
            ST(dlogits, t * E + e, (float)d);
        }
    }
    /* dx (+)= dlogits @ wr^T, dwr += x^T @ dlogits: matmul_bwd's word (din, dw, dout, in, w) */
    int64_t word = (dtypes & 15) | PRT_ARG_DTYPES(0, prt_word_dtype(dtypes, 1), dlogits.dtype,
                                                   prt_word_dtype(dtypes, 7), prt_word_dtype(dtypes, 8));
    prt_cpu_gemm_bwd(rt, op, dx, dwr, dlogits_, x, wr, T, H, E, word);
}

/* ---------------------------------------------------------------- dispatch and combine */

void prt_cpu_moe_permute_fwd(prt *rt, void *out_, void *offsets_, void *rows_, const void *in_, const void *index_,
                             int64_t T, int64_t H, int64_t E, int64_t topk, int64_t dtypes) {
    const char *op = "moe_permute_fwd";
    moe_sizes(op, T, E, topk);
    tensor out = ften(rt, dtypes, 0, out_, op), in = ften(rt, dtypes, 3, in_, op);
    int32_t *offsets = moe_i32(rt, dtypes, 1, offsets_, op), *rows = moe_i32(rt, dtypes, 2, rows_, op);
    const int32_t *index = moe_i32(rt, dtypes, 4, index_, op);
    /* counting sort: offsets[e] first counts, then the start of e, then (as the
     * cursor) its end, shifted back into starts at the end */
    memset(offsets, 0, (size_t)(E + 1) * sizeof *offsets);
    for (int64_t a = 0; a < T * topk; a++) {
        PRT_CHECK(index[a] >= 0 && index[a] < E, "%s: token %lld chose expert %d of %lld", op, (long long)(a / topk),
                  index[a], (long long)E);
        offsets[index[a]]++;
    }
    int32_t start = 0;
    for (int64_t e = 0; e < E; e++) {
        int32_t n = offsets[e];
        offsets[e] = start;
        start += n;
    }
    offsets[E] = start;
    for (int64_t a = 0; a < T * topk; a++) rows[a] = offsets[index[a]]++;
    for (int64_t e = E; e > 0; e--) offsets[e] = offsets[e - 1];
    offsets[0] = 0;
    size_t row_bytes = (size_t)H * prt_dtype_size(in.dtype);
    for (int64_t a = 0; a < T * topk; a++) {
        int64_t t = a / topk, r = rows[a];
        if (out.dtype == in.dtype)
            memcpy((char *)out.p + (size_t)r * row_bytes, (const char *)in.p + (size_t)t * row_bytes, row_bytes);
        else
            for (int64_t h = 0; h < H; h++) ST(out, r * H + h, LD(in, t * H + h));
    }
}

/* The row of assignment a, checked against the T*topk rows of a dispatch. */
static int64_t row_of(const int32_t *rows, int64_t a, int64_t n, const char *op) {
    PRT_CHECK(rows[a] >= 0 && rows[a] < n, "%s: assignment %lld names row %d of %lld", op, (long long)a, rows[a],
              (long long)n);
    return rows[a];
}

void prt_cpu_moe_permute_bwd(prt *rt, void *din_, const void *dout_, const void *rows_, int64_t T, int64_t H,
                             int64_t topk, int64_t dtypes) {
    const char *op = "moe_permute_bwd";
    tensor din = ften(rt, dtypes, 0, din_, op), dout = ften(rt, dtypes, 1, dout_, op);
    const int32_t *rows = moe_i32(rt, dtypes, 2, rows_, op);
    int write = prt_word_writes(dtypes, 0);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            float acc = write ? 0.0f : LD(din, t * H + h);
            for (int64_t j = 0; j < topk; j++) acc += LD(dout, row_of(rows, t * topk + j, T * topk, op) * H + h);
            ST(din, t * H + h, acc);
        }
}

void prt_cpu_moe_combine_fwd(prt *rt, void *out_, const void *y_, const void *weight_, const void *rows_, int64_t T,
                             int64_t H, int64_t topk, int64_t dtypes) {
    const char *op = "moe_combine_fwd";
    tensor out = ften(rt, dtypes, 0, out_, op), y = ften(rt, dtypes, 1, y_, op),
           weight = ften(rt, dtypes, 2, weight_, op);
    const int32_t *rows = moe_i32(rt, dtypes, 3, rows_, op);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < topk; j++)
                acc += LD(weight, t * topk + j) * LD(y, row_of(rows, t * topk + j, T * topk, op) * H + h);
            ST(out, t * H + h, acc);
        }
}

void prt_cpu_moe_combine_bwd(prt *rt, void *dy_, void *dweight_, const void *dout_, const void *y_,
                             const void *weight_, const void *rows_, int64_t T, int64_t H, int64_t topk,
                             int64_t dtypes) {
    const char *op = "moe_combine_bwd";
    tensor dy = ften(rt, dtypes, 0, dy_, op), dweight = ften(rt, dtypes, 1, dweight_, op),
           dout = ften(rt, dtypes, 2, dout_, op), y = ften(rt, dtypes, 3, y_, op),
           weight = ften(rt, dtypes, 4, weight_, op);
    const int32_t *rows = moe_i32(rt, dtypes, 5, rows_, op);
    int dy_write = prt_word_writes(dtypes, 0), dweight_write = prt_word_writes(dtypes, 1);
    for (int64_t a = 0; a < T * topk; a++) {
        int64_t t = a / topk, r = row_of(rows, a, T * topk, op);
        float w = LD(weight, a);
        double dot = 0.0;
        for (int64_t h = 0; h < H; h++) {
            float g = LD(dout, t * H + h);
            if (dy.p) ST(dy, r * H + h, (dy_write ? 0.0f : LD(dy, r * H + h)) + w * g);
            if (dweight.p) dot += (double)g * LD(y, r * H + h);
        }
        if (dweight.p) ST(dweight, a, (float)((dweight_write ? 0.0 : LD(dweight, a)) + dot));
    }
}

/* ---------------------------------------------------------------- expert parallelism */

void prt_cpu_moe_rank_rows(prt *rt, void *send_rows_, const void *counts_, int64_t S, int64_t E, int64_t dtypes) {
    const char *op = "moe_rank_rows";
    int32_t *send_rows = moe_i32(rt, dtypes, 0, send_rows_, op);
    const int32_t *counts = moe_i32(rt, dtypes, 1, counts_, op);
    PRT_CHECK(S >= 1 && E >= S && E % S == 0, "%s: %lld experts do not split evenly over %lld ranks", op, (long long)E,
              (long long)S);
    for (int64_t j = 0; j < S; j++) {
        int64_t rows = 0;
        for (int64_t e = j * (E / S); e < (j + 1) * (E / S); e++) rows += counts[e];
        PRT_CHECK(rows <= INT32_MAX, "%s: %lld rows for rank %lld do not fit an i32", op, (long long)rows, (long long)j);
        send_rows[j] = (int32_t)rows;
    }
}

/* Where block (s, e) of counts[S,El] starts in source-major (s, e) order and
 * in expert-major (e, s) order. */
typedef struct { int64_t by_source, by_expert; } block_at;
static block_at block_start(const int32_t *counts, int64_t S, int64_t El, int64_t s, int64_t e) {
    block_at b = {0, 0};
    for (int64_t s2 = 0; s2 < S; s2++)
        for (int64_t e2 = 0; e2 < El; e2++) {
            if (s2 < s || (s2 == s && e2 < e)) b.by_source += counts[s2 * El + e2];
            if (e2 < e || (e2 == e && s2 < s)) b.by_expert += counts[s2 * El + e2];
        }
    return b;
}

static const int32_t *block_counts(prt *rt, int64_t dtypes, int index, const void *p, int64_t S, int64_t El,
                                   const char *op) {
    const int32_t *counts = moe_i32(rt, dtypes, index, p, op);
    PRT_CHECK(S >= 1 && El >= 1, "%s: %lld ranks of %lld experts", op, (long long)S, (long long)El);
    for (int64_t b = 0; b < S * El; b++)
        PRT_CHECK(counts[b] >= 0, "%s: %d rows from rank %lld for expert %lld", op, counts[b], (long long)(b / El),
                  (long long)(b % El));
    return counts;
}

void prt_cpu_moe_regroup_fwd(prt *rt, void *out_, void *offsets_, const void *in_, const void *counts_, int64_t S,
                             int64_t El, int64_t H, int64_t to_expert, int64_t dtypes) {
    const char *op = "moe_regroup_fwd";
    tensor out = ften(rt, dtypes, 0, out_, op), in = ften(rt, dtypes, 2, in_, op);
    const int32_t *counts = block_counts(rt, dtypes, 3, counts_, S, El, op);
    if (offsets_) {
        int32_t *offsets = moe_i32(rt, dtypes, 1, offsets_, op);
        for (int64_t e = 0; e <= El; e++)
            offsets[e] = (int32_t)(e < El ? block_start(counts, S, El, 0, e).by_expert
                                          : block_start(counts, S, El, S - 1, El - 1).by_expert + counts[S * El - 1]);
    }
    for (int64_t s = 0; s < S; s++)
        for (int64_t e = 0; e < El; e++) {
            block_at b = block_start(counts, S, El, s, e);
            int64_t from = to_expert ? b.by_source : b.by_expert, to = to_expert ? b.by_expert : b.by_source;
            int64_t n = (int64_t)counts[s * El + e] * H;
            if (out.dtype == in.dtype)
                memcpy((char *)out.p + (size_t)(to * H) * prt_dtype_size(out.dtype),
                       (const char *)in.p + (size_t)(from * H) * prt_dtype_size(in.dtype),
                       (size_t)n * prt_dtype_size(in.dtype));
            else
                for (int64_t i = 0; i < n; i++) ST(out, to * H + i, LD(in, from * H + i));
        }
}

void prt_cpu_moe_regroup_bwd(prt *rt, void *din_, const void *dout_, const void *counts_, int64_t S, int64_t El,
                             int64_t H, int64_t to_expert, int64_t dtypes) {
    const char *op = "moe_regroup_bwd";
    tensor din = ften(rt, dtypes, 0, din_, op), dout = ften(rt, dtypes, 1, dout_, op);
    const int32_t *counts = block_counts(rt, dtypes, 2, counts_, S, El, op);
    int write = prt_word_writes(dtypes, 0);
    for (int64_t s = 0; s < S; s++)
        for (int64_t e = 0; e < El; e++) {
            block_at b = block_start(counts, S, El, s, e);
            /* the forward moved rows from `from` (din's layout) to `to` (dout's) */
            int64_t from = to_expert ? b.by_source : b.by_expert, to = to_expert ? b.by_expert : b.by_source;
            for (int64_t i = 0; i < (int64_t)counts[s * El + e] * H; i++)
                ST(din, from * H + i, (write ? 0.0f : LD(din, from * H + i)) + LD(dout, to * H + i));
        }
}

/* ---------------------------------------------------------------- the grouped GEMM */

/* offsets[0..E], checked: non-decreasing from 0 (the rows an expert owns). */
static const int32_t *expert_offsets(prt *rt, int64_t dtypes, int index, const void *p, int64_t E, const char *op) {
    const int32_t *offsets = moe_i32(rt, dtypes, index, p, op);
    PRT_CHECK(E >= 1 && offsets[0] == 0, "%s: %lld experts whose rows start at %d, not 0", op, (long long)E,
              offsets[0]);
    for (int64_t e = 0; e < E; e++)
        PRT_CHECK(offsets[e + 1] >= offsets[e], "%s: expert %lld's rows end at %d, before they start at %d", op,
                  (long long)e, offsets[e + 1], offsets[e]);
    return offsets;
}

void prt_cpu_moe_matmul_fwd(prt *rt, void *out, const void *in, const void *w, const void *offsets_, int64_t E,
                            int64_t K, int64_t M, int64_t dtypes) {
    const char *op = "moe_matmul_fwd";
    const int32_t *offsets = expert_offsets(rt, dtypes, 3, offsets_, E, op);
    int64_t d_out = prt_word_dtype(dtypes, 0), d_in = prt_word_dtype(dtypes, 1), d_w = prt_word_dtype(dtypes, 2);
    for (int64_t e = 0; e < E; e++) {
        int64_t r0 = offsets[e], n = offsets[e + 1] - r0;
        if (!n) continue;
        prt_cpu_gemm_fwd(rt, op, (void *)elem_at(out, d_out, r0 * M), elem_at(in, d_in, r0 * K),
                         elem_at(w, d_w, e * K * M), n, K, M, dtypes & 0xfff);
    }
}

/* matmul_bwd's word is this op's first five nibbles (din, dw, dout, in, w). */
void prt_cpu_moe_matmul_bwd(prt *rt, void *din, void *dw, const void *dout, const void *in, const void *w,
                            const void *offsets_, int64_t E, int64_t K, int64_t M, int64_t dtypes) {
    const char *op = "moe_matmul_bwd";
    const int32_t *offsets = expert_offsets(rt, dtypes, 5, offsets_, E, op);
    int64_t d_din = prt_word_dtype(dtypes, 0), d_dw = prt_word_dtype(dtypes, 1), d_dout = prt_word_dtype(dtypes, 2),
            d_in = prt_word_dtype(dtypes, 3), d_w = prt_word_dtype(dtypes, 4);
    for (int64_t e = 0; e < E; e++) {
        int64_t r0 = offsets[e], n = offsets[e + 1] - r0;
        if (!n) continue;
        prt_cpu_gemm_bwd(rt, op, (void *)elem_at(din, d_din, r0 * K), (void *)elem_at(dw, d_dw, e * K * M),
                         elem_at(dout, d_dout, r0 * M), elem_at(in, d_in, r0 * K), elem_at(w, d_w, e * K * M), n, K,
                         M, dtypes & 0xfffff);
    }
}
