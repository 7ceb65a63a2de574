/*
 * prt_cpu_attention.c — attention on the CPU (prt_cpu_attention.h).
 *
 * Each (batch, head) runs on one worker (up to PRT_ATTENTION_WORKERS of the
 * BLAS's threads, each with its own workspace slice and one-thread GEMMs: one
 * head's T x T x HD products split over BLAS threads only contend — measured
 * on the 41 M bench model, attention_bwd 1091 ms per step at 2 BLAS threads
 * against under 151 ms at 1), and each head PRT_ATTENTION_ROWS query rows at a
 * time.  With kept probabilities (probs given) rows i0 .. i0 + r - 1 see keys
 * 0 .. n - 1 at once (n = i0 + r when causal, else T): a block of scores is
 * [r, n], each row's softmax over its whole row of keys.  Without them a head
 * is also key-blocked (flash_head_fwd / flash_head_bwd below: online softmax,
 * blocks of [PRT_ATTENTION_ROWS, PRT_ATTENTION_KEYS] whatever T is); its
 * backward is row-blocked too, rebuilding whole rows of P, unless T is above
 * PRT_ATTENTION_FULL_ROWS (prt_scratch.h says why).  Either
 * way a causal head computes only the blocks of its lower triangle, and a
 * head's work is the same whichever worker runs it, so results do not depend
 * on the thread count.
 *
 * A call may compute only query rows q0 .. q0 + Tq - 1 of the T rows of its
 * qkv (context parallelism: the qkv gathered whole, the output, dout and the
 * probabilities this rank's Tq rows): every index of a query row below is its
 * row in the whole sequence (the causal mask, the dropout mask), and out,
 * dout and probs are read at that row less q0.  dqkv is the whole qkv's
 * gradient: dq of the other rows is left as it was (or zero when written).
 *
 * Tensors as in prt_cpu_view.h: a 16-bit q, k, v, output or gradient is
 * widened into the worker's slice, rounded back once per head.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_thread_num(void) { return 0; }
#endif

/* Attention's GEMMs go through att_sgemm: cblas_sgemm, its time added to the
 * worker's att_gemm_s while att_timing is set (a traced run, att_units: the
 * op's trace event then carries the share of its time in GEMMs). */
static _Thread_local int att_timing;
static _Thread_local double att_gemm_s;

static double att_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void att_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                      float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    double t0 = att_timing ? att_now() : 0.0;
    cblas_sgemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (att_timing) att_gemm_s += att_now() - t0;
}

#include "prt_cpu_attention.h"
#include "prt_cpu_fast.h"
#include "prt_cpu_view.h"
#include "prt_internal.h"
#include "prt_math.h"
#include "prt_scratch.h"

prt_att_dropout prt_cpu_attention_dropout(prt *rt, int64_t first_sample, int64_t h_offset, int64_t NH_global, int64_t NH,
                            int64_t step, int64_t layer, double p) {
    PRT_CHECK(p >= 0 && p < 1, "attention dropout: p = %g is outside [0, 1)", p);
    if (rt->eval_active) p = 0; /* evaluation runs the model without dropout */
    PRT_CHECK(first_sample >= 0 && h_offset >= 0 && h_offset + NH <= NH_global,
              "attention dropout: heads %lld..%lld of %lld", (long long)h_offset, (long long)(h_offset + NH),
              (long long)NH_global);
    return (prt_att_dropout){prt_dropout_key(rt->plan.seed, step, layer, 0), prt_dropout_threshold(p),
                      prt_dropout_scale(p), first_sample, h_offset, NH_global};
}

/* PD = P * M * scale on rows i0 .. i0 + r - 1, columns j0 .. j0 + c - 1 of head
 * h of sample b (PD and P: rows ld apart, column 0 = key j0; PD may be P). */
static void att_drop_cols(const prt_att_dropout *d, float *PD, const float *P, int ld, int64_t b, int64_t h, int T,
                          int i0, int r, int j0, int c) {
    uint64_t base = (uint64_t)(((d->first_sample + b) * d->NH_global + d->h_offset + h) * T) * (uint64_t)T + (uint64_t)j0;
    for (int i = 0; i < r; i++) {
        uint64_t row = base + (uint64_t)(i0 + i) * (uint64_t)T;
        for (int j = 0; j < c; j++)
            PD[(size_t)i * ld + j] =
                prt_dropout_keep(d->key, row + (uint64_t)j, d->threshold) ? P[(size_t)i * ld + j] * d->scale : 0.0f;
    }
}

/* PD = P * M * scale on rows i0 .. i0 + r - 1, columns 0 .. n - 1 (att_drop_cols). */
static void att_drop_apply(const prt_att_dropout *d, float *PD, const float *P, int ld, int64_t b, int64_t h, int T, int i0,
                           int r, int n) {
    att_drop_cols(d, PD, P, ld, b, h, T, i0, r, 0, n);
}

typedef struct att_args {
    tensor out, probs, qkv, dqkv, dout;
    int T, NH, HD, C, causal, write; /* write: dqkv is written, not added into (PRT_ARG_WRITE) */
    int Tq, q0;                      /* the query rows q0 .. q0 + Tq - 1 of the T the qkv holds: out, dout
                                        and probs have Tq rows, the causal mask is by row q0 + i */
    int KV, G, W;                    /* key/value heads, query heads per group, qkv row width (NH + 2 KV) HD */
    int keyblocked;                  /* the backward without probs: key-blocked, not whole rows */
    const prt_att_dropout *drop;
} att_args;

/* Column of head h's q (which 0), k (1) or v (2) in a row of qkv: KV == NH
 * is [3, NH, HD]; KV < NH the grouped [KV, G + 2, HD] (group h / G: its G
 * query heads, then k, then v). */
static int64_t qkv_col(const att_args *a, int which, int h) {
    if (a->KV == a->NH) return ((int64_t)which * a->NH + h) * a->HD;
    int g = h / a->G;
    return ((int64_t)g * (a->G + 2) + (which == 0 ? h % a->G : a->G + which - 1)) * a->HD;
}

/* The T x HD view of q, k or v (which) of head h of sample b in qkv or dqkv
 * t (rows W apart). */
static view part_view(const att_args *a, tensor t, float *slot, int64_t b, int which, int h, int load) {
    return view_of(t, slot, b * a->T * a->W + qkv_col(a, which, h), a->T, a->HD, a->W, load);
}
static void part_store(const att_args *a, tensor t, view v, int64_t b, int which, int h) {
    view_store(t, v, b * a->T * a->W + qkv_col(a, which, h), a->T, a->HD, a->W);
}

/* A gradient view of dqkv: loaded to be added into, or zeroed when the call
 * writes dqkv (its zero is then this one, a part at a time). */
static view grad_view(const att_args *a, float *slot, int64_t b, int which, int h) {
    view g = part_view(a, a->dqkv, slot, b, which, h, !a->write);
    if (a->write)
        for (int t = 0; t < a->T; t++) memset(g.f + (size_t)t * g.ld, 0, sizeof(float) * (size_t)a->HD);
    return g;
}

/* q, k, v of head h of sample b (slot: 3 T HD floats for a 16-bit qkv). */
static void head_views(const att_args *a, float *slot, int64_t b, int h, view *q, view *k, view *v) {
    int64_t THD = (int64_t)a->T * a->HD;
    *q = part_view(a, a->qkv, slot, b, 0, h, 1);
    *k = part_view(a, a->qkv, slot ? slot + THD : NULL, b, 1, h, 1);
    *v = part_view(a, a->qkv, slot ? slot + 2 * THD : NULL, b, 2, h, 1);
}

/* S (r rows ld apart) = softmax(Q_blk K[0:n]^T / sqrt(HD)) of query rows i0..,
 * the causal mask when asked; columns past each row's last key up to zero_to
 * are exactly 0. */
static void att_block_probs(float *S, int ld, view q, view k, int i0, int r, int n, int zero_to, int HD,
                            int causal) {
    float scale = 1.0f / sqrtf((float)HD);
    att_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, n, HD, scale, q.f + (size_t)i0 * q.ld, q.ld, k.f, k.ld,
                0.0f, S, ld);
    prt_fast_softmax_rows(S, ld, r, n, i0, causal, zero_to);
}

/* One head forward in workspace slice s (prt_attention_fwd_slice). */
static void att_head_fwd(const att_args *a, float *s, int64_t b, int h) {
    int T = a->T, HD = a->HD, C = a->C, BQ = (int)prt_attention_rows(T), Tq = a->Tq, q0 = a->q0;
    int64_t THD = (int64_t)T * HD, TT = (int64_t)Tq * T;
    int p_own = a->probs.p && !is16(a->probs); /* P written into the probs buffer itself */
    float *p_slot = take(&s, p_own ? 0 : (int64_t)BQ * T), *pd_slot = take(&s, a->drop ? (int64_t)BQ * T : 0),
          *qkv_slot = take(&s, is16(a->qkv) * 3 * THD), *out_slot = take(&s, is16(a->out) * THD);
    view q, k, v;
    head_views(a, qkv_slot, b, h, &q, &k, &v);
    int64_t o_off = (int64_t)b * Tq * C + (int64_t)h * HD, p_off = ((int64_t)b * a->NH + h) * TT;
    view o = view_of(a->out, out_slot, o_off, Tq, HD, C, 0);
    for (int i0 = q0; i0 < q0 + Tq; i0 += BQ) {
        int r = q0 + Tq - i0 < BQ ? q0 + Tq - i0 : BQ, n = a->causal ? i0 + r : T;
        int64_t p_row = p_off + (int64_t)(i0 - q0) * T;
        /* kept probabilities get whole rows (zeros past the mask); a block only in the slot, n columns */
        int ld = a->probs.p ? T : n;
        float *P = p_own ? (float *)a->probs.p + p_row : p_slot;
        att_block_probs(P, ld, q, k, i0, r, n, ld, HD, a->causal);
        if (a->probs.p && !p_own) view_store(a->probs, (view){P, ld}, p_row, r, T, T);
        if (a->drop) att_drop_apply(a->drop, pd_slot, P, ld, b, h, T, i0, r, n);
        att_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, n, 1.0f, a->drop ? pd_slot : P, ld, v.f, v.ld,
                    0.0f, o.f + (size_t)(i0 - q0) * o.ld, o.ld);
    }
    view_store(a->out, o, o_off, Tq, HD, C);
}

/* One head backward in workspace slice s (prt_attention_bwd_slice, less
 * its group's k, v, dk, dv slots), adding into its group's dk and dv. */
static void att_head_bwd(const att_args *a, float *s, int64_t b, int h, view k, view v, view dk, view dv) {
    int T = a->T, HD = a->HD, C = a->C, BQ = (int)prt_attention_rows(T), Tq = a->Tq, q0 = a->q0;
    int64_t THD = (int64_t)T * HD, TT = (int64_t)Tq * T;
    int p_own = a->probs.p && !is16(a->probs);
    float *dP = take(&s, (int64_t)BQ * T), *p_slot = take(&s, p_own ? 0 : (int64_t)BQ * T),
          *pd_slot = take(&s, a->drop ? (int64_t)BQ * T : 0), *q_slot = take(&s, is16(a->qkv) * THD),
          *dq_slot = take(&s, is16(a->dqkv) * THD), *dout_slot = take(&s, is16(a->dout) * THD);
    float scale = 1.0f / sqrtf((float)HD);
    view q = part_view(a, a->qkv, q_slot, b, 0, h, 1), dq = grad_view(a, dq_slot, b, 0, h);
    int64_t p_off = ((int64_t)b * a->NH + h) * TT, o_off = (int64_t)b * Tq * C + (int64_t)h * HD;
    view dO = view_of(a->dout, dout_slot, o_off, Tq, HD, C, 1);
    for (int i0 = q0; i0 < q0 + Tq; i0 += BQ) {
        int r = q0 + Tq - i0 < BQ ? q0 + Tq - i0 : BQ, n = a->causal ? i0 + r : T;
        int64_t p_row = p_off + (int64_t)(i0 - q0) * T;
        const float *P = p_slot;
        int ld = n; /* P's (and the dropped block's) row stride */
        if (p_own) P = (const float *)a->probs.p + p_row, ld = T;
        else if (a->probs.p) view_of(a->probs, p_slot, p_row, r, n, T, 1);
        else att_block_probs(p_slot, n, q, k, i0, r, n, n, HD, a->causal);
        const float *dOb = dO.f + (size_t)(i0 - q0) * dO.ld, *qb = q.f + (size_t)i0 * q.ld;
        /* with dropout O = PD V, PD = P * M * scale: dV += PD^T dO, and dP = (dO V^T) * M * scale */
        if (a->drop) att_drop_apply(a->drop, pd_slot, P, ld, b, h, T, i0, r, n);
        /* dV[0:n] += P_blk^T dO_blk;  dP = dO_blk V[0:n]^T */
        att_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, HD, r, 1.0f, a->drop ? pd_slot : P, ld, dOb, dO.ld,
                    1.0f, dv.f, dv.ld);
        att_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, n, HD, 1.0f, dOb, dO.ld, v.f, v.ld, 0.0f, dP, n);
        if (a->drop) att_drop_apply(a->drop, dP, dP, n, b, h, T, i0, r, n);
        /* dS = P * (dP - rowsum(P * dP)), in place in dP (masked entries: P = 0 -> 0) */
        prt_fast_softmax_bwd_rows(dP, P, ld, r, n);
        /* dQ_blk += scale dS K[0:n];  dK[0:n] += scale dS^T Q_blk */
        att_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, n, scale, dP, n, k.f, k.ld, 1.0f,
                    dq.f + (size_t)i0 * dq.ld, dq.ld);
        att_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, HD, r, scale, dP, n, qb, q.ld, 1.0f, dk.f, dk.ld);
    }
    part_store(a, a->dqkv, dq, b, 0, h);
}

/* ------------------------------------------------ key-blocked (online softmax)
 *
 * Without kept probabilities a head runs as in FlashAttention (Dao et al.
 * 2022) in FlashAttention-2's order (Dao 2023): a block of BQ query rows meets
 * the keys BK at a time; each row keeps its running max m and sum l of
 * exp(s - m), and on a new block with a larger max the partial output and l
 * are rescaled by exp(m_old - m_new).  A causal block above the diagonal is
 * never visited (no FLOPs); one on it is computed whole and masked.  The
 * backward recomputes the forward of each query block first (O and m, l, so
 * the logsumexp L = m + log l and D = rowsum(dO * O)), then runs key block by
 * key block: P = exp(S - L), dV_j += P^T dO_i, dP = dO_i V_j^T,
 * dS = P * (dP - D), dQ_i += dS K_j, dK_j += dS^T Q_i.  Row statistics are not
 * kept between the calls: that costs the backward two more block GEMMs per
 * block (7 against 5) and keeps the op's arguments and the IR as they are.
 * Exponentials are prt_expf_fast's (prt_math.h: the loops vectorise). */

/* Online softmax of the block S [r, c] (rows ld apart): query rows i0.., keys
 * j0.. (masked past row i's key i0 + i when causal).  Updates each row's max
 * m[i] and sum l[i], leaves P = exp(S - m_new) in S (0 where masked) and the
 * rescale factor exp(m_old - m_new) of row i in alpha[i]. */
static void flash_softmax_block(float *S, int ld, int i0, int r, int j0, int c, int causal, float *m, float *l,
                                float *alpha) {
    for (int i = 0; i < r; i++) {
        float *row = S + (size_t)i * ld;
        int last = causal && i0 + i - j0 < c - 1 ? i0 + i - j0 : c - 1; /* < 0: no key of this block */
        float mx = m[i];
        for (int j = 0; j <= last; j++) mx = row[j] > mx ? row[j] : mx;
        float a = last < 0 || mx == m[i] ? 1.0f : prt_expf_fast(m[i] - mx), sum = 0.0f;
        for (int j = 0; j <= last; j++) {
            row[j] = prt_expf_fast(row[j] - mx);
            sum += row[j];
        }
        for (int j = last < 0 ? 0 : last + 1; j < c; j++) row[j] = 0.0f;
        alpha[i] = a;
        l[i] = l[i] * a + sum;
        m[i] = mx;
    }
}

typedef struct flash_ws {
    float *S, *PD, *m, *l; /* S, PD: [BQ, BK] (PD only with dropout); m, l: [BQ] */
} flash_ws;

/* O [r, HD] (rows ld_o apart) = attention of query rows i0 .. i0 + r - 1 over
 * their keys, normalised; m, l left with each row's max and sum. */
static void flash_rows_fwd(const att_args *a, const flash_ws *w, view q, view k, view v, float *O, int ld_o,
                           int64_t b, int h, int i0, int r) {
    int T = a->T, HD = a->HD, BK = (int)prt_attention_keys(T), n = a->causal ? i0 + r : T;
    float scale = 1.0f / sqrtf((float)HD);
    for (int i = 0; i < r; i++) w->m[i] = -INFINITY, w->l[i] = 0.0f;
    for (int j0 = 0; j0 < n; j0 += BK) {
        int c = n - j0 < BK ? n - j0 : BK;
        att_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, c, HD, scale, q.f + (size_t)i0 * q.ld, q.ld,
                    k.f + (size_t)j0 * k.ld, k.ld, 0.0f, w->S, BK);
        float alpha[PRT_ATTENTION_ROWS];
        flash_softmax_block(w->S, BK, i0, r, j0, c, a->causal, w->m, w->l, alpha);
        if (j0 > 0)
            for (int i = 0; i < r; i++)
                if (alpha[i] != 1.0f)
                    for (int e = 0; e < HD; e++) O[(size_t)i * ld_o + e] *= alpha[i];
        if (a->drop) att_drop_cols(a->drop, w->PD, w->S, BK, b, h, T, i0, r, j0, c);
        att_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, c, 1.0f, a->drop ? w->PD : w->S, BK,
                    v.f + (size_t)j0 * v.ld, v.ld, j0 > 0 ? 1.0f : 0.0f, O, ld_o);
    }
    for (int i = 0; i < r; i++) {
        float inv = 1.0f / w->l[i];
        for (int e = 0; e < HD; e++) O[(size_t)i * ld_o + e] *= inv;
    }
}

/* One head forward, key-blocked, in workspace slice s (prt_attention_fwd_slice). */
static void flash_head_fwd(const att_args *a, float *s, int64_t b, int h) {
    int T = a->T, HD = a->HD, C = a->C, BQ = (int)prt_attention_rows(T), BK = (int)prt_attention_keys(T);
    int64_t THD = (int64_t)T * HD;
    flash_ws w;
    w.S = take(&s, (int64_t)BQ * BK), w.PD = take(&s, a->drop ? (int64_t)BQ * BK : 0), w.m = take(&s, BQ);
    w.l = take(&s, BQ);
    float *qkv_slot = take(&s, is16(a->qkv) * 3 * THD), *out_slot = take(&s, is16(a->out) * THD);
    view q, k, v;
    head_views(a, qkv_slot, b, h, &q, &k, &v);
    int Tq = a->Tq, q0 = a->q0;
    int64_t o_off = (int64_t)b * Tq * C + (int64_t)h * HD;
    view o = view_of(a->out, out_slot, o_off, Tq, HD, C, 0);
    for (int i0 = q0; i0 < q0 + Tq; i0 += BQ)
        flash_rows_fwd(a, &w, q, k, v, o.f + (size_t)(i0 - q0) * o.ld, o.ld, b, h, i0,
                       q0 + Tq - i0 < BQ ? q0 + Tq - i0 : BQ);
    view_store(a->out, o, o_off, Tq, HD, C);
}

/* The backward's first pass: L[i] (logsumexp) and D[i] = rowsum(dO * O) of
 * every query row of the call (i: the row less q0), O recomputed a block at a
 * time into Ob. */
static void flash_row_stats(const att_args *a, const flash_ws *w, float *Ob, view q, view k, view v, view dO,
                            float *L, float *D, int64_t b, int h) {
    int HD = a->HD, BQ = (int)prt_attention_rows(a->T), Tq = a->Tq, q0 = a->q0;
    for (int i0 = q0; i0 < q0 + Tq; i0 += BQ) {
        int r = q0 + Tq - i0 < BQ ? q0 + Tq - i0 : BQ;
        flash_rows_fwd(a, w, q, k, v, Ob, HD, b, h, i0, r);
        for (int i = 0; i < r; i++) {
            const float *o = Ob + (size_t)i * HD, *g = dO.f + (size_t)(i0 - q0 + i) * dO.ld;
            float dot = 0.0f;
            for (int e = 0; e < HD; e++) dot += o[e] * g[e];
            D[i0 - q0 + i] = dot;
            L[i0 - q0 + i] = w->m[i] + logf(w->l[i]);
        }
    }
}

/* One head backward, key-blocked, in workspace slice s (as att_head_bwd). */
static void flash_head_bwd(const att_args *a, float *s, int64_t b, int h, view k, view v, view dk, view dv) {
    int T = a->T, HD = a->HD, C = a->C, BQ = (int)prt_attention_rows(T), BK = (int)prt_attention_keys(T);
    int64_t THD = (int64_t)T * HD;
    flash_ws w;
    w.S = take(&s, (int64_t)BQ * BK);
    float *dP = take(&s, (int64_t)BQ * BK);
    w.PD = take(&s, a->drop ? (int64_t)BQ * BK : 0);
    float *Ob = take(&s, (int64_t)BQ * HD);
    w.m = take(&s, BQ), w.l = take(&s, BQ);
    float *L = take(&s, T), *D = take(&s, T), *q_slot = take(&s, is16(a->qkv) * THD),
          *dq_slot = take(&s, is16(a->dqkv) * THD), *dout_slot = take(&s, is16(a->dout) * THD);
    float scale = 1.0f / sqrtf((float)HD);
    view q = part_view(a, a->qkv, q_slot, b, 0, h, 1), dq = grad_view(a, dq_slot, b, 0, h);
    int Tq = a->Tq, q0 = a->q0, nk = a->causal ? q0 + Tq : T; /* keys any of the call's rows sees */
    int64_t o_off = (int64_t)b * Tq * C + (int64_t)h * HD;
    view dO = view_of(a->dout, dout_slot, o_off, Tq, HD, C, 1);
    flash_row_stats(a, &w, Ob, q, k, v, dO, L, D, b, h);
    for (int j0 = 0; j0 < nk; j0 += BK) {
        int c = T - j0 < BK ? T - j0 : BK;
        const float *kb = k.f + (size_t)j0 * k.ld, *vb = v.f + (size_t)j0 * v.ld;
        float *dkb = dk.f + (size_t)j0 * dk.ld, *dvb = dv.f + (size_t)j0 * dv.ld;
        /* causal: the first block of the call's rows with a row at or past key j0 */
        int first = a->causal && j0 > q0 ? q0 + (j0 - q0) / BQ * BQ : q0;
        for (int i0 = first; i0 < q0 + Tq; i0 += BQ) {
            int r = q0 + Tq - i0 < BQ ? q0 + Tq - i0 : BQ;
            const float *qb = q.f + (size_t)i0 * q.ld, *dOb = dO.f + (size_t)(i0 - q0) * dO.ld;
            /* P = exp(scale Q_i K_j^T - L), 0 past each row's last key */
            att_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, c, HD, scale, qb, q.ld, kb, k.ld, 0.0f, w.S, BK);
            for (int i = 0; i < r; i++) {
                float *row = w.S + (size_t)i * BK, Li = L[i0 - q0 + i];
                int last = a->causal && i0 + i - j0 < c - 1 ? i0 + i - j0 : c - 1;
                for (int j = 0; j <= last; j++) row[j] = prt_expf_fast(row[j] - Li);
                for (int j = last < 0 ? 0 : last + 1; j < c; j++) row[j] = 0.0f;
            }
            /* with dropout O = PD V, PD = P * M * scale: dV += PD^T dO, and dP = (dO V^T) * M * scale */
            if (a->drop) att_drop_cols(a->drop, w.PD, w.S, BK, b, h, T, i0, r, j0, c);
            att_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, HD, r, 1.0f, a->drop ? w.PD : w.S, BK, dOb,
                        dO.ld, 1.0f, dvb, dv.ld);
            att_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, c, HD, 1.0f, dOb, dO.ld, vb, v.ld, 0.0f, dP, BK);
            if (a->drop) att_drop_cols(a->drop, dP, dP, BK, b, h, T, i0, r, j0, c);
            /* dS = P * (dP - D), in place in dP (masked entries: P = 0 -> 0) */
            for (int i = 0; i < r; i++) {
                const float *p = w.S + (size_t)i * BK;
                float *dp = dP + (size_t)i * BK, Di = D[i0 - q0 + i];
                for (int j = 0; j < c; j++) dp[j] = p[j] * (dp[j] - Di);
            }
            att_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, c, scale, dP, BK, kb, k.ld, 1.0f,
                        dq.f + (size_t)i0 * dq.ld, dq.ld);
            att_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, HD, r, scale, dP, BK, qb, q.ld, 1.0f, dkb, dk.ld);
        }
    }
    part_store(a, a->dqkv, dq, b, 0, h);
}

/* The backward of group g of sample b (its G query heads, one after another,
 * adding into the group's dk and dv: a group is one worker's, so no two
 * workers write one dk or dv).  The slice starts with the group's k, v, dk,
 * dv slots (16-bit tensors), the heads' own workspace after them. */
static void att_group_bwd(const att_args *a, float *s, int64_t b, int g) {
    int64_t THD = (int64_t)a->T * a->HD;
    int h0 = g * a->G;
    float *kv_slot = take(&s, is16(a->qkv) * 2 * THD), *dkv_slot = take(&s, is16(a->dqkv) * 2 * THD);
    view k = part_view(a, a->qkv, kv_slot, b, 1, h0, 1), v = part_view(a, a->qkv, kv_slot ? kv_slot + THD : NULL, b, 2, h0, 1);
    view dk = grad_view(a, dkv_slot, b, 1, h0), dv = grad_view(a, dkv_slot ? dkv_slot + THD : NULL, b, 2, h0);
    for (int h = h0; h < h0 + a->G; h++)
        (a->probs.p || !a->keyblocked ? att_head_bwd : flash_head_bwd)(a, s, b, h, k, v, dk, dv);
    part_store(a, a->dqkv, dk, b, 1, h0);
    part_store(a, a->dqkv, dv, b, 2, h0);
}

/* One unit of a call's work on a worker: head h (forward) or key/value group
 * h (backward) of sample b, in workspace slice s; ring: the ring step's
 * arguments (NULL outside ring attention). */
struct ring_args;
typedef void (*att_unit)(const att_args *a, const struct ring_args *ring, float *s, int64_t b, int h);

/* Every (batch, head) of a forward, every (batch, key/value group) of a
 * backward over the workers, the BLAS on one thread meanwhile; slice = the
 * floats of one worker's workspace. */
static void att_units(prt *rt, const att_args *a, const struct ring_args *ring, int64_t B, int64_t slice, int bwd,
                      att_unit unit) {
    int64_t heads = B * a->NH, units = bwd ? B * a->KV : heads, per = bwd ? a->KV : a->NH;
    int64_t nw = prt_attention_workers(units);
    int nt = openblas_get_num_threads();
    if (nt < 1) nt = 1;
    if (nw > nt) nw = nt;
    float *ws = scratch(rt, prt_attention_workers(heads) * slice);
    int timing = rt->tracing;
    double gemm = 0.0, busy = 0.0;
    if (nt > 1) openblas_set_num_threads(1);
#pragma omp parallel for num_threads((int)nw) if (nw > 1) schedule(dynamic, 1) reduction(+ : gemm, busy)
    for (int64_t u = 0; u < units; u++) {
        float *s = slice ? ws + (size_t)omp_get_thread_num() * (size_t)slice : NULL;
        double t0 = timing ? att_now() : 0.0;
        att_timing = timing, att_gemm_s = 0.0;
        unit(a, ring, s, u / per, (int)(u % per));
        if (timing) gemm += att_gemm_s, busy += att_now() - t0;
        att_timing = 0;
    }
    if (nt > 1) openblas_set_num_threads(nt);
    if (timing && busy > 0) rt->op_gemm_share = gemm / busy;
}

static void att_unit_fwd(const att_args *a, const struct ring_args *ring, float *s, int64_t b, int h) {
    (void)ring;
    (a->probs.p ? att_head_fwd : flash_head_fwd)(a, s, b, h);
}
static void att_unit_bwd(const att_args *a, const struct ring_args *ring, float *s, int64_t b, int g) {
    (void)ring;
    att_group_bwd(a, s, b, g);
}
static void att_run(prt *rt, const att_args *a, int64_t B, int64_t slice, int bwd) {
    att_units(rt, a, NULL, B, slice, bwd, bwd ? att_unit_bwd : att_unit_fwd);
}

static att_args att_args_of(prt *rt, const char *op, int64_t T_, int64_t Tq_, int64_t q0_, int64_t NH_, int64_t KV_,
                            int64_t HD_, int64_t causal, const prt_att_dropout *drop) {
    PRT_CHECK(KV_ >= 1 && KV_ <= NH_ && NH_ % KV_ == 0, "%s: %lld key/value heads do not divide %lld heads", op,
              (long long)KV_, (long long)NH_);
    PRT_CHECK(Tq_ >= 0 && q0_ >= 0 && q0_ + Tq_ <= T_, "%s: query rows %lld .. %lld of %lld", op, (long long)q0_,
              (long long)(q0_ + Tq_), (long long)T_);
    att_args a = {.T = blas_dim(T_, op), .NH = blas_dim(NH_, op), .HD = blas_dim(HD_, op),
                  .C = blas_dim(NH_ * HD_, op), .causal = causal != 0, .drop = drop};
    a.Tq = (int)Tq_, a.q0 = (int)q0_;
    a.KV = (int)KV_, a.G = (int)(NH_ / KV_), a.W = blas_dim((NH_ + 2 * KV_) * HD_, op);
    (void)rt;
    return a;
}

void prt_cpu_attention_rows_fwd(prt *rt, void *out, void *probs, const void *qkv, int64_t B, int64_t T, int64_t Tq,
                                int64_t q0, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                                const prt_att_dropout *drop, int64_t dtypes) {
    att_args a = att_args_of(rt, "attention_fwd", T, Tq, q0, NH, KV, HD, causal, drop);
    a.out = ften(rt, dtypes, 0, out, "attention_fwd"), a.probs = ften(rt, dtypes, 1, probs, "attention_fwd");
    a.qkv = ften(rt, dtypes, 2, qkv, "attention_fwd");
    att_run(rt, &a, B,
            prt_attention_fwd_slice(T, HD, a.probs.p != NULL, is16(a.probs), is16(a.qkv), is16(a.out), drop != NULL),
            0);
}

static void att_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs, int64_t B, int64_t T,
                    int64_t Tq, int64_t q0, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                    const prt_att_dropout *drop, int64_t dtypes, int keyblocked) {
    att_args a = att_args_of(rt, "attention_bwd", T, Tq, q0, NH, KV, HD, causal, drop);
    a.keyblocked = keyblocked;
    a.dqkv = ften(rt, dtypes, 0, dqkv, "attention_bwd"), a.dout = ften(rt, dtypes, 1, dout, "attention_bwd");
    a.qkv = ften(rt, dtypes, 2, qkv, "attention_bwd"), a.probs = ften(rt, dtypes, 3, probs, "attention_bwd");
    a.write = prt_word_writes(dtypes, 0);
    int64_t slice = keyblocked ? prt_attention_bwd_slice_keys(T, HD, is16(a.qkv), is16(a.dqkv), is16(a.dout), drop != NULL)
                               : prt_attention_bwd_slice(T, HD, a.probs.p != NULL, is16(a.probs), is16(a.qkv),
                                                         is16(a.dqkv), is16(a.dout), drop != NULL);
    att_run(rt, &a, B, slice, 1);
}

void prt_cpu_attention_heads_fwd(prt *rt, void *out, void *probs, const void *qkv, int64_t B, int64_t T,
                                 int64_t NH, int64_t KV, int64_t HD, int64_t causal, const prt_att_dropout *drop,
                                 int64_t dtypes) {
    prt_cpu_attention_rows_fwd(rt, out, probs, qkv, B, T, T, 0, NH, KV, HD, causal, drop, dtypes);
}

void prt_cpu_attention_rows_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs, int64_t B,
                                int64_t T, int64_t Tq, int64_t q0, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                                const prt_att_dropout *drop, int64_t dtypes) {
    att_bwd(rt, dqkv, dout, qkv, probs, B, T, Tq, q0, NH, KV, HD, causal, drop, dtypes,
            !probs && T > PRT_ATTENTION_FULL_ROWS);
}

void prt_cpu_attention_heads_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, const void *probs,
                                 int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal,
                                 const prt_att_dropout *drop, int64_t dtypes) {
    prt_cpu_attention_rows_bwd(rt, dqkv, dout, qkv, probs, B, T, T, 0, NH, KV, HD, causal, drop, dtypes);
}

void prt_cpu_attention_keyblocked_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, int64_t B, int64_t T,
                                      int64_t NH, int64_t KV, int64_t HD, int64_t causal, const prt_att_dropout *drop,
                                      int64_t dtypes) {
    att_bwd(rt, dqkv, dout, qkv, NULL, B, T, T, 0, NH, KV, HD, causal, drop, dtypes, 1);
}

void prt_cpu_attention_keyblocked_rows_bwd(prt *rt, void *dqkv, const void *dout, const void *qkv, int64_t B,
                                           int64_t T, int64_t Tq, int64_t q0, int64_t NH, int64_t KV, int64_t HD,
                                           int64_t causal, const prt_att_dropout *drop, int64_t dtypes) {
    att_bwd(rt, dqkv, dout, qkv, NULL, B, T, Tq, q0, NH, KV, HD, causal, drop, dtypes, 1);
}


/* ------------------------------------------------ ring attention
 *
 * One step of ring attention (parc_rt.h ring_attention_fwd / _bwd): the
 * rank's T query rows against the T keys of the chunk the step brings, packed
 * kv[B, T, 2, KV, HD].  The chunk of rank src = (coord - step) mod P: causal,
 * src > coord is above the diagonal (nothing to compute), src == coord the
 * diagonal block (masked like a whole causal sequence of T), src < coord whole.
 * With the load-balanced split the rows and the keys are two halves each and
 * the step computes the pairs of halves prt_ring_kinds names.  The forward
 * runs flash_rows_fwd on each block and merges the normalised block output
 * into out by the rows' logsumexp (Liu et al. 2023, "Ring Attention
 * with Blockwise Transformers"; the merge of FlashAttention's online softmax
 * across blocks); the backward is flash_head_bwd's key loop with the final
 * out's logsumexp L and D = rowsum(dO * out) (Dao 2023). */

typedef struct ring_args {
    tensor kv, dkv, lse, out;
    int step;
    int kind[2][2]; /* prt_ring_kinds: 0 nothing, 1 the diagonal, 2 whole, of query half a by key half b */
    int halves;     /* 2 with the load-balanced split, else 1 */
} ring_args;

/* The step's blocks (prt_ring_kinds); 0 when none computes. */
static int ring_blocks(ring_args *g, int64_t causal, int64_t coord, int64_t step, int64_t P, int64_t balanced,
                       int64_t T, const char *op) {
    PRT_CHECK(P >= 1 && coord >= 0 && coord < P && step >= 0 && step < P, "%s: step %lld of %lld at coordinate %lld",
              op, (long long)step, (long long)P, (long long)coord);
    PRT_CHECK(!balanced || T % 2 == 0, "%s: the load-balanced split of %lld rows", op, (long long)T);
    prt_ring_kinds(coord, step, P, causal != 0, balanced != 0, g->kind);
    g->halves = prt_ring_halves(balanced != 0);
    return g->kind[0][0] || g->kind[0][1] || g->kind[1][0] || g->kind[1][1];
}

/* k (which 1) or v (2) of group g of sample b in a packed kv */
static view kv_view(const att_args *a, tensor kv, float *slot, int64_t b, int which, int g, int load) {
    int64_t W = 2 * (int64_t)a->KV * a->HD;
    return view_of(kv, slot, b * a->T * W + ((int64_t)(which - 1) * a->KV + g) * a->HD, a->T, a->HD, W, load);
}
static void kv_store(const att_args *a, tensor kv, view v, int64_t b, int which, int g) {
    int64_t W = 2 * (int64_t)a->KV * a->HD;
    view_store(kv, v, b * a->T * W + ((int64_t)(which - 1) * a->KV + g) * a->HD, a->T, a->HD, W);
}
/* rows from `row` on */
static view rows_from(view v, int row) { return (view){v.f + (size_t)row * v.ld, v.ld}; }

static void ring_head_fwd(const att_args *a, const struct ring_args *g, float *s, int64_t b, int h) {
    int T = a->T, HD = a->HD, C = a->C, n = T / g->halves, BQ = (int)prt_attention_rows(n);
    int64_t THD = (int64_t)T * HD;
    flash_ws w = {0};
    w.S = take(&s, (int64_t)BQ * prt_attention_keys(n)), w.m = take(&s, BQ), w.l = take(&s, BQ);
    float *Ob = take(&s, (int64_t)BQ * HD), *q_slot = take(&s, is16(a->qkv) * THD),
          *k_slot = take(&s, is16(g->kv) * THD), *v_slot = take(&s, is16(g->kv) * THD),
          *o_slot = take(&s, is16(a->out) * THD);
    view q = part_view(a, a->qkv, q_slot, b, 0, h, 1);
    view k = kv_view(a, g->kv, k_slot, b, 1, h / a->G, 1), v = kv_view(a, g->kv, v_slot, b, 2, h / a->G, 1);
    int64_t o_off = (int64_t)b * T * C + (int64_t)h * HD;
    view o = view_of(a->out, o_slot, o_off, T, HD, C, g->step > 0);
    float *lse = (float *)g->lse.p + ((int64_t)b * a->NH + h) * T;
    for (int qa = 0; qa < g->halves; qa++) {
        int written = g->step > 0; /* step 0 writes a row's first block, merges the rest */
        for (int kb = 0; kb < g->halves; kb++) {
            if (!g->kind[qa][kb]) continue;
            att_args sub = *a;
            sub.T = n, sub.causal = g->kind[qa][kb] == 1;
            view qs = rows_from(q, qa * n), ks = rows_from(k, kb * n), vs = rows_from(v, kb * n);
            for (int i0 = 0; i0 < n; i0 += BQ) {
                int r = n - i0 < BQ ? n - i0 : BQ;
                flash_rows_fwd(&sub, &w, qs, ks, vs, Ob, HD, b, h, i0, r);
                for (int i = 0; i < r; i++) {
                    int row = qa * n + i0 + i;
                    float lb = w.m[i] + logf(w.l[i]), *orow = o.f + (size_t)row * o.ld;
                    const float *brow = Ob + (size_t)i * HD;
                    if (!written) {
                        lse[row] = lb;
                        memcpy(orow, brow, sizeof(float) * (size_t)HD);
                        continue;
                    }
                    float old = lse[row], mx = old > lb ? old : lb;
                    float nl = mx + logf(expf(old - mx) + expf(lb - mx)), ca = expf(old - nl), cb = expf(lb - nl);
                    for (int e = 0; e < HD; e++) orow[e] = orow[e] * ca + brow[e] * cb;
                    lse[row] = nl;
                }
            }
            written = 1;
        }
    }
    view_store(a->out, o, o_off, T, HD, C);
}

/* Head h's share of a backward step, adding into its group's dk and dv. */
static void ring_head_bwd(const att_args *a, const ring_args *g, float *s, int64_t b, int h, view k, view v, view dk,
                          view dv) {
    int T = a->T, HD = a->HD, C = a->C, n = T / g->halves, BQ = (int)prt_attention_rows(n),
        BK = (int)prt_attention_keys(n);
    int64_t THD = (int64_t)T * HD;
    float *S = take(&s, (int64_t)BQ * BK), *dP = take(&s, (int64_t)BQ * BK), *D = take(&s, T),
          *q_slot = take(&s, is16(a->qkv) * THD), *dq_slot = take(&s, is16(a->dqkv) * THD),
          *do_slot = take(&s, is16(a->dout) * THD), *o_slot = take(&s, is16(g->out) * THD);
    float scale = 1.0f / sqrtf((float)HD);
    view q = part_view(a, a->qkv, q_slot, b, 0, h, 1), dq = part_view(a, a->dqkv, dq_slot, b, 0, h, 1);
    int64_t o_off = (int64_t)b * T * C + (int64_t)h * HD;
    view dO = view_of(a->dout, do_slot, o_off, T, HD, C, 1), O = view_of(g->out, o_slot, o_off, T, HD, C, 1);
    const float *L = (const float *)g->lse.p + ((int64_t)b * a->NH + h) * T;
    for (int i = 0; i < T; i++) {
        const float *o = O.f + (size_t)i * O.ld, *d = dO.f + (size_t)i * dO.ld;
        float dot = 0.0f;
        for (int e = 0; e < HD; e++) dot += o[e] * d[e];
        D[i] = dot;
    }
    for (int qa = 0; qa < g->halves; qa++)
        for (int kb = 0; kb < g->halves; kb++) {
            if (!g->kind[qa][kb]) continue;
            int diag = g->kind[qa][kb] == 1, q0 = qa * n, k0 = kb * n;
            for (int j0 = 0; j0 < n; j0 += BK) {
                int c = n - j0 < BK ? n - j0 : BK;
                const float *kb_ = k.f + (size_t)(k0 + j0) * k.ld, *vb = v.f + (size_t)(k0 + j0) * v.ld;
                float *dkb = dk.f + (size_t)(k0 + j0) * dk.ld, *dvb = dv.f + (size_t)(k0 + j0) * dv.ld;
                int first = diag ? j0 / BQ * BQ : 0; /* the diagonal block: rows at or past key j0 */
                for (int i0 = first; i0 < n; i0 += BQ) {
                    int r = n - i0 < BQ ? n - i0 : BQ;
                    const float *qb = q.f + (size_t)(q0 + i0) * q.ld, *dOb = dO.f + (size_t)(q0 + i0) * dO.ld;
                    att_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, c, HD, scale, qb, q.ld, kb_, k.ld, 0.0f, S,
                                BK);
                    for (int i = 0; i < r; i++) {
                        float *row = S + (size_t)i * BK, Li = L[q0 + i0 + i];
                        int last = diag && i0 + i - j0 < c - 1 ? i0 + i - j0 : c - 1;
                        for (int j = 0; j <= last; j++) row[j] = prt_expf_fast(row[j] - Li);
                        for (int j = last < 0 ? 0 : last + 1; j < c; j++) row[j] = 0.0f;
                    }
                    att_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, HD, r, 1.0f, S, BK, dOb, dO.ld, 1.0f, dvb,
                                dv.ld);
                    att_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, c, HD, 1.0f, dOb, dO.ld, vb, v.ld, 0.0f, dP,
                                BK);
                    for (int i = 0; i < r; i++) {
                        const float *p = S + (size_t)i * BK;
                        float *dp = dP + (size_t)i * BK, Di = D[q0 + i0 + i];
                        for (int j = 0; j < c; j++) dp[j] = p[j] * (dp[j] - Di);
                    }
                    att_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, c, scale, dP, BK, kb_, k.ld, 1.0f,
                                dq.f + (size_t)(q0 + i0) * dq.ld, dq.ld);
                    att_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, HD, r, scale, dP, BK, qb, q.ld, 1.0f, dkb,
                                dk.ld);
                }
            }
        }
    part_store(a, a->dqkv, dq, b, 0, h);
}

static void ring_group_bwd(const att_args *a, const struct ring_args *g, float *s, int64_t b, int grp) {
    int64_t THD = (int64_t)a->T * a->HD;
    float *k_slot = take(&s, is16(g->kv) * THD), *v_slot = take(&s, is16(g->kv) * THD),
          *dk_slot = take(&s, is16(g->dkv) * THD), *dv_slot = take(&s, is16(g->dkv) * THD);
    view k = kv_view(a, g->kv, k_slot, b, 1, grp, 1), v = kv_view(a, g->kv, v_slot, b, 2, grp, 1);
    view dk = kv_view(a, g->dkv, dk_slot, b, 1, grp, 1), dv = kv_view(a, g->dkv, dv_slot, b, 2, grp, 1);
    for (int h = grp * a->G; h < (grp + 1) * a->G; h++) ring_head_bwd(a, g, s, b, h, k, v, dk, dv);
    kv_store(a, g->dkv, dk, b, 1, grp);
    kv_store(a, g->dkv, dv, b, 2, grp);
}

void prt_cpu_ring_attention_fwd(prt *rt, void *out, void *lse, const void *qkv, const void *kv, int64_t B, int64_t T,
                                int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t coord, int64_t step,
                                int64_t P, int64_t balanced, int64_t dtypes) {
    const char *op = "ring_attention_fwd";
    att_args a = att_args_of(rt, op, T, T, 0, NH, KV, HD, causal, NULL);
    ring_args g = {.step = (int)step};
    if (!ring_blocks(&g, causal, coord, step, P, balanced, T, op)) return;
    a.out = ften(rt, dtypes, 0, out, op), g.lse = ften(rt, dtypes, 1, lse, op);
    a.qkv = ften(rt, dtypes, 2, qkv, op), g.kv = ften(rt, dtypes, 3, kv, op);
    PRT_CHECK(!is16(g.lse), "%s: lse is fp32", op);
    att_units(rt, &a, &g, B, prt_ring_fwd_slice(T, HD, is16(a.qkv) || is16(a.out)), 0, ring_head_fwd);
}

void prt_cpu_ring_attention_bwd(prt *rt, void *dqkv, void *dkv, const void *dout, const void *out, const void *lse,
                                const void *qkv, const void *kv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                                int64_t HD, int64_t causal, int64_t coord, int64_t step, int64_t P, int64_t balanced,
                                int64_t dtypes) {
    const char *op = "ring_attention_bwd";
    att_args a = att_args_of(rt, op, T, T, 0, NH, KV, HD, causal, NULL);
    ring_args g = {.step = (int)step};
    if (!ring_blocks(&g, causal, coord, step, P, balanced, T, op)) return;
    a.dqkv = ften(rt, dtypes, 0, dqkv, op), g.dkv = ften(rt, dtypes, 1, dkv, op);
    a.dout = ften(rt, dtypes, 2, dout, op), g.out = ften(rt, dtypes, 3, out, op);
    g.lse = ften(rt, dtypes, 4, lse, op), a.qkv = ften(rt, dtypes, 5, qkv, op), g.kv = ften(rt, dtypes, 6, kv, op);
    PRT_CHECK(!is16(g.lse), "%s: lse is fp32", op);
    att_units(rt, &a, &g, B, prt_ring_bwd_slice(T, HD, is16(a.qkv) || is16(a.dqkv)), 1, ring_group_bwd);
}

/* kv[B,T,2,KV,HD] <- k, v of qkv (to 1), or dqkv's k, v columns += dkv (to 0) */
static void kv_move(prt *rt, const char *op, void *qkv_, void *kv_, int64_t B, int64_t T, int64_t NH, int64_t KV,
                    int64_t HD, int64_t dtypes, int to) {
    att_args a = att_args_of(rt, op, T, T, 0, NH, KV, HD, 0, NULL);
    tensor qkv = ften(rt, dtypes, to ? 1 : 0, qkv_, op), kv = ften(rt, dtypes, to ? 0 : 1, kv_, op);
    int64_t W = 2 * KV * HD;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int which = 1; which <= 2; which++)
                for (int64_t g = 0; g < KV; g++) {
                    int64_t x = (b * T + t) * a.W + qkv_col(&a, which, (int)(g * a.G));
                    int64_t y = (b * T + t) * W + ((which - 1) * KV + g) * HD;
                    for (int64_t e = 0; e < HD; e++)
                        if (to) ST(kv, y + e, LD(qkv, x + e));
                        else ST(qkv, x + e, LD(qkv, x + e) + LD(kv, y + e));
                }
}

void prt_cpu_ring_kv_pack(prt *rt, void *kv, const void *qkv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                          int64_t HD, int64_t dtypes) {
    kv_move(rt, "ring_kv_pack", (void *)qkv, kv, B, T, NH, KV, HD, dtypes, 1);
}

void prt_cpu_ring_kv_grad(prt *rt, void *dqkv, const void *dkv, int64_t B, int64_t T, int64_t NH, int64_t KV,
                          int64_t HD, int64_t dtypes) {
    kv_move(rt, "ring_kv_grad", dqkv, (void *)dkv, B, T, NH, KV, HD, dtypes, 0);
}

/* ------------------------------------------------ the load-balanced split's order */

void prt_cpu_seq_permute(prt *rt, void *dst_, const void *src_, int64_t B, int64_t T, int64_t W, int64_t zz,
                         int64_t inverse, int64_t dtypes) {
    const char *op = "seq_permute";
    PRT_CHECK(B >= 0 && T >= 0 && W >= 0 && zz >= 1 && T % (2 * zz) == 0, "%s: B=%lld T=%lld W=%lld zz=%lld", op,
              (long long)B, (long long)T, (long long)W, (long long)zz);
    tensor dst = ften(rt, dtypes, 0, dst_, op), src = ften(rt, dtypes, 1, src_, op);
    for (int64_t b = 0; b < B; b++)
        for (int64_t g = 0; g < T; g++) {
            int64_t p = prt_seq_pos_whole(g, T, zz), x = (b * T + g) * W, y = (b * T + p) * W;
            for (int64_t e = 0; e < W; e++)
                if (inverse) ST(dst, x + e, LD(dst, x + e) + LD(src, y + e));
                else ST(dst, y + e, LD(src, x + e));
        }
}

void prt_cpu_seq_halves(prt *rt, void *seq_, void *half0, void *half1, int64_t B, int64_t h, int64_t C, int64_t join,
                        int64_t dtypes) {
    const char *op = "seq_halves";
    PRT_CHECK(B >= 0 && h >= 0 && C >= 0, "%s: B=%lld h=%lld C=%lld", op, (long long)B, (long long)h, (long long)C);
    tensor seq = ften(rt, dtypes, 0, seq_, op), half[2] = {ften(rt, dtypes, 1, half0, op), ften(rt, dtypes, 2, half1, op)};
    for (int64_t a = 0; a < 2; a++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < h; i++) {
                int64_t blk = (b * h + i) * C, row = ((b * 2 + a) * h + i) * C;
                for (int64_t e = 0; e < C; e++)
                    if (join) ST(seq, row + e, LD(half[a], blk + e));
                    else ST(half[a], blk + e, LD(seq, row + e));
            }
}
