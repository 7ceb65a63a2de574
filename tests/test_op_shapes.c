/*
 * test_op_shapes.c — the op-shape table a built program hands the runtime
 * (prt_plan_desc.op_shapes, compiler/codegen_shapes.c) and the CUDA backend's
 * walk over it at init (prt_cuda_check_op_shapes, runtime/cuda/prt_cuda_limits.c).
 *
 * For example plans it builds the LLVM module as `parc build` does and reads
 * the table back from the module's @op_shapes initializer: the rows equal the
 * compiler's own list, the plan descriptor points at them, every row is an op
 * entry with its local sizes (attention's B, T, NH, HD of the rank's share),
 * and the walk with the limits every CUDA device has passes them.  A plan
 * with head_dim 512 is refused, naming the stage, the op, its shape and the
 * limit.  No GPU is needed: the walk is plain C.  Exit status 1 on any failure.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen.h"
#include "passes.h"
#include "prt_cuda_limits.h"

#include "test_check.h"

enum { MAX_ROWS = 512 };

typedef struct Built {
    Arena arena;
    Compilation c;
    CodegenModule *module;
    prt_op_shape_desc rows[MAX_ROWS];
    char names[MAX_ROWS * 32];
    int n;
} Built;

/* Compiles the plan at path as `parc build` does and reads back its table. */
static int build(Built *b, const char *path) {
    memset(b, 0, sizeof *b);
    if (passes_run(&b->c, &b->arena, path, 1, passes_find("analyze")) || diag_error_count()) {
        CHECK(0, "%s compiles", path);
        return -1;
    }
    b->module = codegen_build(b->c.prog);
    CHECK(b->module != NULL, "%s: a module", path);
    if (!b->module) return -1;
    b->n = codegen_module_op_shapes(b->module, b->rows, MAX_ROWS, b->names, sizeof b->names);
    CHECK(b->n > 0 && b->n <= MAX_ROWS, "%s: %d rows in @op_shapes", path, b->n);
    return b->n > 0 && b->n <= MAX_ROWS ? 0 : -1;
}

static void release(Built *b) {
    if (b->module) codegen_free(b->module);
    passes_finish(&b->c);
    arena_free(&b->arena);
}

static const prt_op_shape_desc *find(const Built *b, const char *op, int stage) {
    for (int r = 0; r < b->n; r++)
        if (!strcmp(b->rows[r].op, op) && b->rows[r].stage == stage) return &b->rows[r];
    return NULL;
}

static int args_are(const prt_op_shape_desc *row, int n, const int64_t *want) {
    if (!row || row->nargs != n) return 0;
    for (int i = 0; i < n; i++)
        if (row->args[i] != want[i]) return 0;
    return 1;
}

static void print_row(const prt_op_shape_desc *row) {
    fprintf(stderr, "  stage %lld %s", (long long)row->stage, row->op);
    for (int i = 0; i < row->nargs; i++) fprintf(stderr, " %lld", (long long)row->args[i]);
    fprintf(stderr, "\n");
}

/* The module's table is the compiler's list of the program's op calls. */
static void check_same_as_compiler(const Built *b, const char *name) {
    prt_op_shape_desc *mine = NULL;
    int n = codegen_op_shape_rows(b->c.prog, &mine);
    CHECK(n == b->n, "%s: the module holds %d rows, the program's calls give %d", name, b->n, n);
    int same = n == b->n;
    for (int r = 0; r < n && same; r++)
        same = !strcmp(mine[r].op, b->rows[r].op) && mine[r].stage == b->rows[r].stage &&
               mine[r].nargs == b->rows[r].nargs &&
               !memcmp(mine[r].args, b->rows[r].args, sizeof mine[r].args);
    CHECK(same, "%s: the module's rows equal the compiler's, field for field", name);
    /* every row is an op entry: a name the CUDA limit table or the runtime knows, no duplicates */
    int dup = 0;
    for (int r = 0; r < b->n; r++)
        for (int q = 0; q < r; q++)
            if (!strcmp(b->rows[r].op, b->rows[q].op) && b->rows[r].stage == b->rows[q].stage &&
                b->rows[r].nargs == b->rows[q].nargs && !memcmp(b->rows[r].args, b->rows[q].args, sizeof b->rows[r].args))
                dup++;
    CHECK(dup == 0, "%s: %d duplicate rows", name, dup);
    free(mine);
}

/* examples/<name>.par of the source tree this file is in */
static void example_path(char *path, size_t size, const char *name) {
    char root[PATH_MAX / 2];
    snprintf(root, sizeof root, "%s", __FILE__);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(root, '/');
        if (slash) *slash = 0;
        else snprintf(root, sizeof root, "..");
    }
    int n = snprintf(path, size, "%s/examples/%s.par", root, name);
    if (n < 0 || (size_t)n >= size) path[0] = 0;
}

/* tiny_single: micro_batch 8 x seq 32 tokens, 4 heads of 16, vocab 256, one stage. */
static void test_single(void) {
    char path[PATH_MAX];
    example_path(path, sizeof path, "tiny_single");
    Built *b = calloc(1, sizeof *b);
    if (build(b, path) == 0) {
        check_same_as_compiler(b, "tiny_single");
        const Plan *p = &b->c.plan;
        int64_t B = p->train.micro_batch, T = p->model.seq, NH = p->model.heads, HD = p->model.hidden / NH;
        const int64_t att[] = {B, T, NH, HD, 1};
        CHECK(args_are(find(b, "attention_fwd", 0), 5, att) && args_are(find(b, "attention_bwd", 0), 5, att),
              "attention_fwd/bwd (B %lld, T %lld, NH %lld, HD %lld, causal 1)", (long long)B, (long long)T,
              (long long)NH, (long long)HD);
        const int64_t xent[] = {B * T, p->model.vocab, 0, -1};
        const prt_op_shape_desc *x = find(b, "xent_fwd", 0);
        CHECK(x && x->nargs == 4 && x->args[0] == xent[0] && x->args[1] == xent[1] && x->args[2] == 0,
              "xent_fwd (N %lld, V_local %lld, offset 0, axis)", (long long)xent[0], (long long)xent[1]);
        const int64_t norm[] = {B * T, p->model.hidden};
        CHECK(args_are(find(b, "layernorm_fwd", 0), 2, norm), "layernorm_fwd (N %lld, C %lld)", (long long)norm[0],
              (long long)norm[1]);
        const int64_t up[] = {B * T, p->model.hidden, p->model.ffn};
        int found_up = 0;
        for (int r = 0; r < b->n; r++)
            if (!strcmp(b->rows[r].op, "matmul_fwd") && args_are(&b->rows[r], 3, up)) found_up = 1;
        CHECK(found_up, "matmul_fwd (N %lld, K %lld, M %lld): the MLP's up-projection", (long long)up[0],
              (long long)up[1], (long long)up[2]);
        char why[512] = "";
        const prt_cuda_limits lim = PRT_CUDA_COMMON_LIMITS;
        CHECK(prt_cuda_check_op_shapes(b->rows, b->n, &lim, why, sizeof why) == -1,
              "tiny_single passes the CUDA limits: %s", why);
        if (failed)
            for (int r = 0; r < b->n; r++) print_row(&b->rows[r]);
    }
    release(b);
    free(b);
}

/* tiny_3d: pp 2 x dp 2 x tp 2; each stage's rows, heads and vocab are a rank's share. */
static void test_3d(void) {
    char path[PATH_MAX];
    example_path(path, sizeof path, "tiny_3d");
    Built *b = calloc(1, sizeof *b);
    if (build(b, path) == 0) {
        check_same_as_compiler(b, "tiny_3d");
        const Plan *p = &b->c.plan;
        int tp = plan_dim_parts(p, DIM_HEADS);
        int64_t B = p->train.micro_batch, T = p->model.seq, NH = p->model.heads / tp, HD = p->model.hidden / p->model.heads;
        const int64_t att[] = {B, T, NH, HD, 1};
        CHECK(tp == 2 && args_are(find(b, "attention_fwd", 0), 5, att) && args_are(find(b, "attention_fwd", 1), 5, att),
              "both stages: attention_fwd (B %lld, T %lld, NH %lld of %lld, HD %lld)", (long long)B, (long long)T,
              (long long)NH, (long long)p->model.heads, (long long)HD);
        CHECK(find(b, "embed_fwd", 0) && !find(b, "embed_fwd", 1) && find(b, "xent_fwd", 1) && !find(b, "xent_fwd", 0),
              "the embedding's calls on stage 0, the loss's on stage 1");
        const prt_op_shape_desc *x = find(b, "xent_fwd", 1);
        int vparts = plan_dim_parts(p, DIM_VOCAB);
        CHECK(x && x->args[1] == p->model.vocab / vparts && x->args[2] == (vparts - 1) * (p->model.vocab / vparts),
              "xent_fwd: V_local %lld and the largest vocab offset %lld",
              x ? (long long)x->args[1] : -1LL, x ? (long long)x->args[2] : -1LL);
        const prt_cuda_limits lim = PRT_CUDA_COMMON_LIMITS;
        char why[512] = "";
        CHECK(prt_cuda_check_op_shapes(b->rows, b->n, &lim, why, sizeof why) == -1, "tiny_3d passes: %s", why);
    }
    release(b);
    free(b);
}

/* head_dim 512 (hidden 2048 over 4 heads): refused at init, naming all of it. */
static void test_refused(void) {
    char dir[] = "/tmp/parc-test-op-shapes-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/hd512.par", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "write %s", path);
    if (!f) return;
    fprintf(f, "model hd512 { vocab 256; seq 64; hidden 2048; heads 4; ffn 4096; layers 2; embed positions learned;\n"
               "  repeat layers { block gpt2; } norm layer; head untied; loss cross_entropy; }\n"
               "cluster { nodes 1; gpus_per_node 1; gpu { memory 80 GiB; bf16 989 TFLOP/s; hbm 3.35 TB/s; }\n"
               "  link intra 450 GB/s 2 us; }\n"
               "train { batch 2; micro_batch 2; precision bf16 master fp32; optimizer adamw lr 1e-3; }\n"
               "mesh { dp 1; }\nlayout { batch -> dp; }\n");
    fclose(f);
    Built *b = calloc(1, sizeof *b);
    if (build(b, path) == 0) {
        const prt_cuda_limits lim = PRT_CUDA_COMMON_LIMITS;
        char why[512] = "";
        int64_t r = prt_cuda_check_op_shapes(b->rows, b->n, &lim, why, sizeof why);
        CHECK(r >= 0 && !strcmp(b->rows[r].op, "attention_fwd"), "refused at row %lld (%s)", (long long)r,
              r >= 0 ? b->rows[r].op : "none");
        const char *want = "stage 0 calls attention_fwd (B 2, T 64, NH 4, HD 512, causal 1): head dim 512: the CUDA "
                           "kernels take 1..128";
        CHECK(!strcmp(why, want), "the refusal names the stage, op, shape and limit:\n  got  %s\n  want %s", why, want);
        /* the same table passes where the limit is not the head dim: only attention is refused */
        int attention = 0;
        for (int k = 0; k < b->n; k++) {
            prt_cuda_op_shape one = {b->rows[k].op, (int)b->rows[k].nargs, {0}};
            memcpy(one.args, b->rows[k].args, sizeof b->rows[k].args);
            if (!prt_cuda_shape_ok(&one, &lim, NULL, 0)) attention += !strncmp(b->rows[k].op, "attention", 9) ? 1 : 100;
        }
        CHECK(attention == 2, "exactly attention_fwd and attention_bwd are refused (%d)", attention);
    }
    release(b);
    free(b);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    test_single();
    test_3d();
    test_refused();
    printf("test_op_shapes: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
