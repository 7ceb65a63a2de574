/*
 * test_op_shapes.c — the op-shape table a built program hands the runtime
 * (prt_plan_desc.op_shapes, compiler/codegen/codegen_shapes.c) and the CUDA backend's
 * walk over it at init (prt_cuda_check_op_shapes, runtime/cuda/prt_cuda_limits.c).
 *
 * For example plans it builds the LLVM module as `parc build` does and reads
 * the table back from the module's @op_shapes initializer: the rows equal the
 * compiler's own list, the plan descriptor points at them, every row is an op
 * entry with its local sizes (attention's B, T, NH, HD of the rank's share),
 * and the walk with the limits every CUDA device has passes them.  A plan
 * with head_dim 512 is refused, naming the stage, the op, its shape and the
 * limit.  No GPU is needed: the walk is plain C.
 *
 * The ops table's completeness: every row of op_table is complete
 * (ops_row_incomplete: its functions, a cost, a first-writer rule or the
 * reason it has none), and every runtime entry a row names is the runtime's
 * own code (a HOST row of PRT_CALLS) or a backend op whose CUDA adapter
 * cu_<name> in runtime/cuda/prt_cuda_backend.c calls device functions
 * runtime/cuda defines.  The backend table is filled from PRT_CALLS, so a
 * missing adapter stops the CUDA build, and a missing device function only
 * the module's load; this source check fails for both on a machine without
 * the toolkit.  Exit status 1 on any failure.
 */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen.h"
#include "ops.h"
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

/* rel (a folder, or a file under it named `name`) in the source tree this file
 * is in (tests/codegen/test_op_shapes.c) */
static void source_path(char *path, size_t size, const char *rel, const char *name) {
    char root[PATH_MAX / 2];
    snprintf(root, sizeof root, "%s", __FILE__);
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(root, '/');
        if (slash) *slash = 0;
        else snprintf(root, sizeof root, "..");
    }
    int n = snprintf(path, size, "%s/%s%s%s", root, rel, name ? "/" : "", name ? name : "");
    if (n < 0 || (size_t)n >= size) path[0] = 0;
}

/* examples/<name>.par of the source tree */
static void example_path(char *path, size_t size, const char *name) {
    char file[128];
    snprintf(file, sizeof file, "%s.par", name);
    source_path(path, size, "examples", file);
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
        const int64_t att[] = {B, T, NH, NH, HD, 1, T, 0};
        CHECK(args_are(find(b, "attention_fwd", 0), 8, att) && args_are(find(b, "attention_bwd", 0), 8, att),
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
        const int64_t att[] = {B, T, NH, NH, HD, 1, T, 0};
        CHECK(tp == 2 && args_are(find(b, "attention_fwd", 0), 8, att) && args_are(find(b, "attention_fwd", 1), 8, att),
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
        const char *want = "stage 0 calls attention_fwd (B 2, T 64, NH 4, KV 4, HD 512, causal 1, Tq 64, q0 0): head dim 512: the CUDA "
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

/* ------------------------------------------------------------ the ops table */

/* Each PRT_CALLS row's kind, in RtFn order: "OP", "COMM" or "HOST". */
static const char *const call_kinds[RT_FN_COUNT] = {
#define CALL_KIND_(X, kind, name, sig, params, args) #kind,
    PRT_CALLS(CALL_KIND_, _)
#undef CALL_KIND_
};

/* The whole of file path, NUL-terminated (malloc'd), or NULL. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            char *more = realloc(text, cap);
            if (!more) break;
            text = more;
        }
        got = fread(text + n, 1, 4096, f);
        n += got;
    } while (got > 0);
    fclose(f);
    if (text) text[n] = 0;
    return text;
}

/* Where text defines function `name` at file scope (a line that starts with
 * its return type, the parameter list followed by a body): the body's `{`,
 * else NULL. */
static const char *definition(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
        if (p[n] != '(' || (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))) continue;
        const char *line = p;
        while (line > text && line[-1] != '\n') line--;
        if (isspace((unsigned char)*line) || *line == '#' || *line == '/' || *line == '*') continue;
        const char *q = p + n;
        for (int depth = 0; *q; q++)
            if (*q == '(') depth++;
            else if (*q == ')' && --depth == 0) break;
        if (!*q) return NULL;
        for (q++; isspace((unsigned char)*q); q++) {}
        if (*q == '{') return q;
    }
    return NULL;
}

/* The runtime/cuda sources (*.c, *.cu) one after the other, or NULL. */
static char *cuda_sources(void) {
    char dir[PATH_MAX];
    source_path(dir, sizeof dir, "runtime/cuda", NULL);
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *all = calloc(1, 1);
    size_t len = 0;
    for (struct dirent *e; all && (e = readdir(d));) {
        size_t k = strlen(e->d_name);
        if (!(k > 2 && !strcmp(e->d_name + k - 2, ".c")) && !(k > 3 && !strcmp(e->d_name + k - 3, ".cu"))) continue;
        char path[PATH_MAX];
        source_path(path, sizeof path, "runtime/cuda", e->d_name);
        char *text = slurp(path);
        if (!text) continue;
        size_t t = strlen(text);
        char *more = realloc(all, len + t + 2);
        if (more) {
            memcpy(more + len, text, t);
            more[len + t] = '\n', more[len + t + 1] = 0;
            len += t + 1;
        }
        all = more;
        free(text);
    }
    closedir(d);
    return all;
}

/* why = the formatted reason (cut to size), returned. */
__attribute__((format(printf, 3, 4))) static const char *reason(char *why, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(why, size, fmt, ap) < 0) why[0] = 0;
    va_end(ap);
    return why;
}

/* Why backend op `call` (a PRT_CALLS name) has no CUDA implementation, else
 * NULL: the adapter cu_<call> of the backend table, and every prt_cu_*
 * function its body calls defined in runtime/cuda. */
static const char *cuda_missing(const char *sources, const char *call, char *why, size_t size) {
    char adapter[96];
    snprintf(adapter, sizeof adapter, "cu_%s", call);
    const char *body = definition(sources, adapter);
    if (!body) return reason(why, size, "no adapter %s in runtime/cuda (the backend table names it)", adapter);
    int depth = 0, kernels = 0;
    const char *p = body;
    do {
        if (*p == '{') depth++;
        else if (*p == '}') depth--;
        else if (!strncmp(p, "prt_cu_", 7) && !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) {
            char callee[96];
            size_t k = 0;
            while (k + 1 < sizeof callee && (isalnum((unsigned char)p[k]) || p[k] == '_')) callee[k] = p[k], k++;
            callee[k] = 0;
            if (p[k] == '(') {
                if (!definition(sources, callee))
                    return reason(why, size, "%s calls %s, which runtime/cuda does not define", adapter, callee);
                kernels++;
            }
            p += k - 1;
        }
        p++;
    } while (*p && depth > 0);
    return kernels ? NULL : reason(why, size, "%s calls no device function (prt_cu_*)", adapter);
}

/* Every row complete, and every entry it names implemented on the GPU. */
static void test_ops_table(void) {
    char why[200];
    for (int k = 0; k < OP_COUNT; k++) {
        int bad = ops_row_incomplete(k, why, sizeof why);
        CHECK(!bad, "op %s's row in op_table: %s", op_names[k], bad ? why : "");
    }
    char *sources = cuda_sources();
    CHECK(sources && definition(sources, "cu_matmul_fwd"), "the CUDA backend's sources are readable");
    if (!sources) return;
    for (int k = 0; k < OP_COUNT; k++) {
        const OpDesc *d = &op_table[k];
        RtFn entries[4] = {d->fwd, d->bwd, d->folds_bias ? d->fwd_bias : RT_NONE,
                           d->folds_bias ? d->bwd_bias : RT_NONE};
        for (int e = 0; e < 4; e++) {
            if (entries[e] <= RT_NONE || entries[e] >= RT_FN_COUNT) continue;
            const char *name = rt_fn_names[entries[e]] + strlen("prt_"), *kind = call_kinds[entries[e]];
            CHECK(!strcmp(kind, "OP") || !strcmp(kind, "HOST"), "op %s names %s, a %s row of PRT_CALLS", op_names[k],
                  name, kind);
            if (strcmp(kind, "OP") != 0) continue;
            const char *missing = cuda_missing(sources, name, why, sizeof why);
            CHECK(!missing, "op %s names %s: %s", op_names[k], name, missing ? missing : "");
        }
    }
    /* the alternatives the emitters choose among (attention's dropout forms) are backend ops too */
    for (int f = 0; f < RT_FN_COUNT; f++) {
        if (strcmp(call_kinds[f], "OP") != 0) continue;
        const char *missing = cuda_missing(sources, rt_fn_names[f] + strlen("prt_"), why, sizeof why);
        CHECK(!missing, "backend op %s: %s", rt_fn_names[f], missing ? missing : "");
    }
    free(sources);
}

int main(void) {
    test_ops_table();
    test_single();
    test_3d();
    test_refused();
    printf("test_op_shapes: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
