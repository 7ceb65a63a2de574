/*
 * prt_cuda_limits.c — prt_cuda_shape_ok: every shape limit of the CUDA kernels
 * in one table (prt_cuda_limits.h), read by the ops before they launch and by
 * tests/gpu/test_gpu_limits.c on the CPU.
 */
#include <stdio.h>
#include <string.h>

#include "prt_cuda_limits.h"

#define INT_MAX_ 2147483647LL

typedef struct {
    const char *why;    /* NULL: within the limits */
    char buf[160];
} verdict;

static void refuse(verdict *v, const char *fmt, long long a, long long b) {
    if (v->why) return;  /* the first limit broken is the one reported */
    snprintf(v->buf, sizeof v->buf, fmt, a, b);
    v->why = v->buf;
}
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* attention (B, T, NH, KV, HD, causal): grid (T / ATT_ROWS, pairs in chunks
 * of grid_y); qkv[B,T,3,NH,HD] or, KV < NH, the grouped qkv[B,T,KV,G+2,HD] */
static void attention(const int64_t *a, const prt_cuda_limits *lim, verdict *v) {
    int64_t T = a[1], NH = a[2], KV = a[3], HD = a[4];
    if (KV < 1 || KV > NH || (NH >= 1 && NH % KV))
        refuse(v, "%lld key/value heads for %lld heads: they must divide the heads", KV, NH);
    if (HD < 1 || HD > PRT_ATT_MAX_HD) refuse(v, "head dim %lld: the CUDA kernels take 1..%lld", HD, PRT_ATT_MAX_HD);
    if (a[0] < 0 || T < 0) refuse(v, "batch %lld, sequence %lld: negative", a[0], T);
    if (T > INT_MAX_) refuse(v, "sequence %lld: the kernels index it in int (at most %lld)", T, INT_MAX_);
    if (NH < 1 || (NH + 2 * KV) * HD > INT_MAX_)
        refuse(v, "(heads + 2 x key/value heads) x head dim = %lld: the kernels index a row in int (at most %lld)",
               (NH + 2 * KV) * HD, INT_MAX_);
    if (ceil_div(T, PRT_ATT_ROWS) > lim->grid_x)
        refuse(v, "%lld blocks of query rows: the grid's x dimension takes %lld", ceil_div(T, PRT_ATT_ROWS), lim->grid_x);
    if (HD >= 1 && HD <= PRT_ATT_MAX_HD && PRT_ATT_SMEM_BYTES(PRT_ATT_HDMAX(HD)) > lim->smem_per_block)
        refuse(v, "%lld bytes of shared memory per block: the device has %lld", PRT_ATT_SMEM_BYTES(PRT_ATT_HDMAX(HD)),
               lim->smem_per_block);
}
/* attention_fwd / attention_bwd (B, T, NH, KV, HD, causal, Tq, q0): as
 * attention, every query row (q0 0, Tq T; the largest rank's q0 is what the
 * op-shape table holds) */
static void attention_rows(const int64_t *a, const prt_cuda_limits *lim, verdict *v) {
    attention(a, lim, v);
    if (a[6] != a[1] || a[7] != 0)
        refuse(v, "query rows from %lld of %lld: the CUDA kernels compute every row (context parallelism runs on the "
                  "CPU runtime)", a[7], a[1]);
}
/* ring attention's steps (B, T, NH, KV, HD, causal, coord, step, P, balanced):
 * a thread per head dim; the load-balanced split halves the rows */
static void ring(const int64_t *a, const prt_cuda_limits *lim, verdict *v) {
    int64_t T = a[1], NH = a[2], KV = a[3], HD = a[4];
    (void)lim;
    if (KV < 1 || KV > NH || (NH >= 1 && NH % KV))
        refuse(v, "%lld key/value heads for %lld heads: they must divide the heads", KV, NH);
    if (HD < 1 || HD > PRT_RING_MAX_HD) refuse(v, "head dim %lld: the ring kernels take 1..%lld", HD, PRT_RING_MAX_HD);
    if (a[9] && T % 2) refuse(v, "%lld rows do not split in two halves (the load-balanced split): %lld left over", T, T % 2);
}

/* cross-entropy forward (N, V_local, vocab_offset, axis): one block per row; the
 * all-reduce of the 2N row sums counts in int */
static void xent(const int64_t *a, const prt_cuda_limits *lim, verdict *v) {
    if (2 * a[0] > INT_MAX_) refuse(v, "%lld rows: the all-reduce of 2 x rows floats counts in int (at most %lld rows)", a[0], INT_MAX_ / 2);
    if (a[0] > lim->grid_x) refuse(v, "%lld rows, one block each: the grid's x dimension takes %lld", a[0], lim->grid_x);
}
/* norms (N, C): one block per row; backward column sums: 32 columns per block */
static void norm(const int64_t *a, const prt_cuda_limits *lim, verdict *v) {
    if (a[0] > lim->grid_x) refuse(v, "%lld rows, one block each: the grid's x dimension takes %lld", a[0], lim->grid_x);
    if (ceil_div(a[1], 32) > lim->grid_x)
        refuse(v, "%lld blocks of 32 columns: the grid's x dimension takes %lld", ceil_div(a[1], 32), lim->grid_x);
}
static void bias_bwd(const int64_t *a, const prt_cuda_limits *lim, verdict *v) {
    if (ceil_div(a[1], 32) > lim->grid_x)
        refuse(v, "%lld blocks of 32 columns: the grid's x dimension takes %lld", ceil_div(a[1], 32), lim->grid_x);
}
/* embedding backward (N, C, vocab_local, vocab_offset): one block per token */
static void embed_bwd(const int64_t *a, const prt_cuda_limits *lim, verdict *v) {
    if (a[0] > lim->grid_x) refuse(v, "%lld tokens, one block each: the grid's x dimension takes %lld", a[0], lim->grid_x);
}
/* GEMMs (N, K, M): cuBLAS takes int dimensions */
static void gemm(const int64_t *a, const prt_cuda_limits *lim, verdict *v) {
    (void)lim;
    for (int i = 0; i < 3; i++)
        if (a[i] < 0 || a[i] > INT_MAX_) refuse(v, "dimension %lld: cuBLAS takes 0..%lld", a[i], INT_MAX_);
}

static const struct {
    const char *op;
    int nargs;
    const char *args;   /* names of the size arguments, for messages */
    void (*check)(const int64_t *a, const prt_cuda_limits *lim, verdict *v);
} rows[] = {
    {"attention_fwd", 8, "B T NH KV HD causal Tq q0", attention_rows},
    {"attention_bwd", 8, "B T NH KV HD causal Tq q0", attention_rows},
    {"attention_dropout_fwd", 11, "B T NH KV HD causal first_sample h_offset NH_global step layer", attention},
    {"attention_dropout_bwd", 11, "B T NH KV HD causal first_sample h_offset NH_global step layer", attention},
    {"ring_attention_fwd", 10, "B T NH KV HD causal coord step P balanced", ring},
    {"ring_attention_bwd", 10, "B T NH KV HD causal coord step P balanced", ring},
    {"xent_fwd", 4, "N V_local vocab_offset axis", xent},
    {"layernorm_fwd", 2, "N C", norm},
    {"layernorm_bwd", 2, "N C", norm},
    {"rmsnorm_fwd", 2, "N C", norm},
    {"rmsnorm_bwd", 2, "N C", norm},
    {"bias_bwd", 2, "N M", bias_bwd},
    {"embed_bwd", 4, "N C vocab_local vocab_offset", embed_bwd},
    {"matmul_fwd", 3, "N K M", gemm},
    {"matmul_bwd", 3, "N K M", gemm},
    {"matmul_t_fwd", 3, "N K M", gemm},
    {"matmul_t_bwd", 3, "N K M", gemm},
};

int prt_cuda_shape_ok(const prt_cuda_op_shape *op, const prt_cuda_limits *lim, char *why, size_t why_size) {
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        if (strcmp(rows[r].op, op->op)) continue;
        verdict v = {NULL, ""};
        if (op->nargs != rows[r].nargs) {
            snprintf(v.buf, sizeof v.buf, "%d size arguments given, the op has %d", op->nargs, rows[r].nargs);
            v.why = v.buf;
        } else {
            rows[r].check(op->args, lim, &v);
        }
        if (!v.why) return 1;
        if (why && why_size) {
            /* "op (B 4, T 1024, ...): why" */
            int n = snprintf(why, why_size, "%s (", op->op);
            const char *name = rows[r].args;
            for (int i = 0; i < op->nargs && i < rows[r].nargs && n > 0 && (size_t)n < why_size; i++) {
                size_t len = strcspn(name, " ");
                n += snprintf(why + n, why_size - (size_t)n, "%s%.*s %lld", i ? ", " : "", (int)len, name,
                              (long long)op->args[i]);
                name += len + (name[len] == ' ');
            }
            if (n > 0 && (size_t)n < why_size) snprintf(why + n, why_size - (size_t)n, "): %s", v.why);
        }
        return 0;
    }
    return 1;
}

int64_t prt_cuda_check_op_shapes(const prt_op_shape_desc *rows, int64_t n, const prt_cuda_limits *lim, char *why,
                                 size_t why_size) {
    for (int64_t r = 0; r < n; r++) {
        prt_cuda_op_shape shape;
        memset(&shape, 0, sizeof shape);
        shape.op = rows[r].op;
        shape.nargs = rows[r].nargs >= 0 && rows[r].nargs < PRT_CUDA_MAX_SHAPE_ARGS ? (int)rows[r].nargs
                                                                                   : PRT_CUDA_MAX_SHAPE_ARGS;
        memcpy(shape.args, rows[r].args, (size_t)shape.nargs * sizeof shape.args[0]);
        char what[400];
        if (prt_cuda_shape_ok(&shape, lim, what, sizeof what)) continue;
        if (why && why_size) snprintf(why, why_size, "stage %lld calls %s", (long long)rows[r].stage, what);
        return r;
    }
    return -1;
}
