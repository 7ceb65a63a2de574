/*
 * check.h — the front end's internal header, shared by its files:
 *
 *   check.c          the entry points: load, read the sections, cross checks
 *   check_load.c     files and includes: what may be read, cycles, depth
 *   check_read.c     statement shapes and values (counts, quantities, words)
 *   check_sections.c one reader per section (cluster, model, train, mesh, layout)
 *   check_positions.c the model's position scheme (learned, rotary) and norms' epsilon
 *   check_cross.c    checks across sections (mesh vs cluster, dims vs mesh,
 *                    batch arithmetic, pipeline stages, the plan's size limits)
 *
 * Nothing here is used outside the front end; the public entry points are in
 * parc.h (check_plan, check_plan_text).
 */
#ifndef PARC_CHECK_H
#define PARC_CHECK_H

#include "ast.h"

#include <inttypes.h>
#include <string.h>

/* ------------------------------------------------------------ key tables */

/* ORDER: each X-macro gives an enum and the spelling table used for lookup and
 * "did you mean".  The third column is the usage shown in hints. */
#define SECTION_KEYS(X)                                   \
    X(SEC_CLUSTER, "cluster", "cluster { nodes 1; ... }") \
    X(SEC_MODEL, "model", "model NAME { ... }")           \
    X(SEC_TRAIN, "train", "train { batch 8; ... }")       \
    X(SEC_MESH, "mesh", "mesh { dp 2; tp 8; }")           \
    X(SEC_LAYOUT, "layout", "layout { batch -> dp; }")    \
    X(SEC_DATA, "data", "data { train \"train.bin\"; validation \"val.bin\"; format llmc; }") \
    X(SEC_INCLUDE, "include", "include \"common/model.par\";")

#define CLUSTER_KEYS(X)                          \
    X(CL_NODES, "nodes", "nodes 2;")             \
    X(CL_GPN, "gpus_per_node", "gpus_per_node 8;") \
    X(CL_GPU, "gpu", "gpu { memory 80 GiB; bf16 989 TFLOP/s; hbm 3.35 TB/s; }") \
    X(CL_LINK, "link", "link intra 450 GB/s 2 us;") \
    X(CL_EFFICIENCY, "efficiency", "efficiency h100;` or `efficiency a100 { gemm 0.3 0.55 0.75 0.85; hbm 0.8; }") \
    X(CL_CALIBRATED, "calibrated", "calibrated \"cpu Intel(R) Xeon(R) Processor\";")

#define EFF_KEYS(X)                                          \
    X(EF_GEMM, "gemm", "gemm 0.3 0.55 0.75 0.85;")           \
    X(EF_ATTENTION, "attention", "attention 0.5;")           \
    X(EF_HBM, "hbm", "hbm 0.85;")                            \
    X(EF_ACTIVATION, "activation", "activation 0.85;")       \
    X(EF_INTRA, "intra", "intra 0.78;")                      \
    X(EF_INTER, "inter", "inter 0.85;")                      \
    X(EF_HALF_INTRA, "half_intra", "half_intra 8 MiB;")      \
    X(EF_HALF_INTER, "half_inter", "half_inter 2 MiB;")      \
    X(EF_NORM, "norm", "norm 0.85;")                         \
    X(EF_SOFTMAX, "softmax", "softmax 0.85;")                \
    X(EF_SCORES, "scores", "scores 0.85;")                   \
    X(EF_TILES, "tiles", "tiles 0.5;")                       \
    X(EF_OPTIMIZER, "optimizer", "optimizer 0.85;")          \
    X(EF_STREAM16, "stream16", "stream16 0.1;` or `stream16 0.1 0.2 0.05 0.1 0.5;")    \
    X(EF_GEMM16, "gemm16", "gemm16 0.3 0.55 0.75 0.85;")      \
    X(EF_OVERLAP, "overlap", "overlap 0.5;")

#define GPU_KEYS(X)                             \
    X(GPU_MEMORY, "memory", "memory 80 GiB;")   \
    X(GPU_BF16, "bf16", "bf16 989 TFLOP/s;")    \
    X(GPU_FP32, "fp32", "fp32 67 TFLOP/s;")     \
    X(GPU_HBM, "hbm", "hbm 3.35 TB/s;")         \
    X(GPU_RESERVE, "reserve", "reserve 4 GiB;")

#define MODEL_KEYS(X)                                                   \
    X(MD_VOCAB, "vocab", "vocab 32000;")                                \
    X(MD_SEQ, "seq", "seq 4096;")                                       \
    X(MD_HIDDEN, "hidden", "hidden 4096;")                              \
    X(MD_HEADS, "heads", "heads 32;")                                   \
    X(MD_FFN, "ffn", "ffn 11008;")                                      \
    X(MD_LAYERS, "layers", "layers 32;")                                \
    X(MD_HEAD_DIM, "head_dim", "head_dim 128;")                         \
    X(MD_KV_HEADS, "kv_heads", "kv_heads 8;")                           \
    X(MD_EMBED, "embed", "embed;`, `embed positions learned;` or `embed positions rope theta 500000;") \
    X(MD_REPEAT, "repeat", "repeat layers { block llama; }")            \
    X(MD_NORM, "norm", "norm rms;` or `norm rms eps 1e-5;")            \
    X(MD_HEAD, "head", "head untied;")                                  \
    X(MD_LOSS, "loss", "loss cross_entropy;")

#define BLOCK_KEYS(X)                                 \
    X(BK_NORM, "norm", "norm rms;` or `norm rms eps 1e-5;") \
    X(BK_MLP, "mlp", "mlp swiglu;")                   \
    X(BK_ACT, "act", "act gelu;")                     \
    X(BK_ATTENTION, "attention", "attention causal;` or `attention causal flash;") \
    X(BK_BIAS, "bias", "bias false;")                 \
    X(BK_RESIDUAL, "residual", "residual true;")     \
    X(BK_DROPOUT, "dropout", "dropout 0.1;")

#define TRAIN_KEYS(X)                                              \
    X(TR_BATCH, "batch", "batch 1024;")                            \
    X(TR_MICRO_BATCH, "micro_batch", "micro_batch 2;")             \
    X(TR_MICRO_BATCHES, "micro_batches", "micro_batches 256;")     \
    X(TR_SEQ, "seq", "seq 4096;")                                  \
    X(TR_PRECISION, "precision", "precision bf16 master fp32;")    \
    X(TR_OPTIMIZER, "optimizer", "optimizer adamw lr 3e-4;")       \
    X(TR_CHECKPOINT, "checkpoint", "checkpoint every 100 steps keep 3;") \
    X(TR_STEPS, "steps", "steps 100;")                             \
    X(TR_SEED, "seed", "seed 1234;")                              \
    X(TR_LR, "lr", "lr 3e-4 warmup 100 steps cosine to 3e-5 over 10000 steps;") \
    X(TR_WEIGHT_DECAY, "weight_decay", "weight_decay 0.1 on weights;")   \
    X(TR_CLIP, "clip", "clip 1.0;")                               \
    X(TR_EVAL, "eval", "eval every 50 steps batches 20;")

#define LAYOUT_KEYS(X)                                                   \
    X(LY_SP, "sequence_parallel", "sequence_parallel over tp;")          \
    X(LY_ZERO, "zero", "zero 1 over dp;")                                \
    X(LY_FSDP, "fsdp", "fsdp over dp;")                                  \
    X(LY_RECOMPUTE, "recompute", "recompute selective;")                 \
    X(LY_STAGE, "stage", "stage 0 { layers 0..15; }")                    \
    X(LY_SCHEDULE, "schedule", "layers -> pp schedule 1f1b;")          \
    X(LY_BALANCE, "balance", "balance auto;")                           \
    X(LY_GRAD_OVERLAP, "grad_overlap", "grad_overlap off;")            \
    X(LY_TP_OVERLAP, "tp_overlap", "tp_overlap off;")                \
    X(LY_PIPELINE_SCATTER, "pipeline_scatter", "pipeline_scatter on;") \
    X(LY_CP_COMM, "cp_comm", "cp_comm ring;")                           \
    X(LY_CP_SPLIT, "cp_split", "cp_split balanced;")

#define OPT_PARAMS(X)                \
    X(OP_LR, "lr")                   \
    X(OP_BETA1, "beta1")             \
    X(OP_BETA2, "beta2")             \
    X(OP_EPS, "eps")                 \
    X(OP_WEIGHT_DECAY, "weight_decay") \
    X(OP_MOMENTUM, "momentum")

#define ENUM_(id, name, usage) id,
#define NAME_(id, name, usage) name,
#define USAGE_(id, name, usage) usage,
#define DEFINE_KEYS(prefix, TABLE)                                              \
    enum { TABLE(ENUM_) prefix##_COUNT };                                       \
    static const char *const prefix##_names[] = {TABLE(NAME_)};                 \
    static const char *const prefix##_usage[] = {TABLE(USAGE_)};
DEFINE_KEYS(SECTION, SECTION_KEYS)
DEFINE_KEYS(CLUSTER, CLUSTER_KEYS)
DEFINE_KEYS(GPU, GPU_KEYS)
DEFINE_KEYS(EFF, EFF_KEYS)
DEFINE_KEYS(MODEL, MODEL_KEYS)
DEFINE_KEYS(BLOCK, BLOCK_KEYS)
DEFINE_KEYS(TRAIN, TRAIN_KEYS)
DEFINE_KEYS(LAYOUT, LAYOUT_KEYS)

#define OP_ENUM_(id, name) id,
#define OP_NAME_(id, name) name,
enum { OPT_PARAMS(OP_ENUM_) OP_COUNT };
static const char *const opt_param_names[] = {OPT_PARAMS(OP_NAME_)};

/* Word choices; ORDER: each follows its enum in parc.h. */
static const char *const norm_words[] = {"none", "layer", "rms"};
static const char *const mlp_words[] = {"gelu", "swiglu", "relu"};
static const char *const router_words[] = {"softmax", "sigmoid"};
static const char *const block_words[] = {"transformer", "mlp", "gpt2", "llama"};
static const char *const precision_words[] = {"fp32", "bf16", "fp16"};
static const char *const optimizer_words[] = {"adamw", "adam", "sgd"};
static const char *const schedule_words[] = {"none", "gpipe", "1f1b", "interleaved"};
static const char *const balance_words[] = {"even", "auto"}; /* ORDER: BALANCE_EVEN, BALANCE_AUTO */
/* ORDER: Layout.grad_overlap_off and Layout.tp_overlap_off 0, 1 */
static const char *const overlap_words[] = {"on", "off"};
static const char *const pipeline_scatter_words[] = {"off", "on"}; /* ORDER: Layout.pipeline_scatter 0, 1 */
static const char *const cp_comm_words[] = {"allgather", "ring"};  /* ORDER: CP_COMM_* */
static const char *const cp_split_words[] = {"contiguous", "balanced"}; /* ORDER: Layout.cp_balanced 0, 1 */
static const char *const bool_words[] = {"false", "true"};
static const char *const head_words[] = {"none", "tied", "untied"};
static const char *const loss_words[] = {"none", "cross_entropy"};
static const char *const attention_words[] = {"full", "causal"};
static const char *const attention_kind_words[] = {"stored", "flash"};
static const char *const link_words[] = {"intra", "inter"};
static const char *const position_words[] = {"none", "learned", "rope"}; /* ORDER: PosKind */
#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Dims a layout rule may map (head_dim, qkv and flat follow from these). */
static const Dim mappable_dims[] = {DIM_BATCH, DIM_SEQ, DIM_HIDDEN, DIM_HEADS, DIM_FFN, DIM_VOCAB, DIM_LAYERS, DIM_EXPERTS};
static const char *const mappable_names[] = {"batch", "seq", "hidden", "heads", "ffn", "vocab", "layers", "experts"};

/* Limits that keep every product below overflow; far above any real plan. */
#define MAX_COUNT ((int64_t)1 << 40)
#define MAX_DIM ((int64_t)1 << 30)
#define MAX_WORLD (1 << 22)
/* The plan's size limits (docs/language.md, "Limits"), checked by
 * check_size_limits so that no later pass sees a product that could overflow
 * and check / explain stay bounded in time and memory: */
#define MAX_SCHEDULE_ITEMS ((int64_t)1 << 22)   /* 2 × micro_batches × virtual stages × stages */
#define MAX_GPIPE_WORK ((int64_t)1 << 30)       /* gpipe: the schedule's steps × micro-batches in flight */
#define MAX_TENSOR_ELEMS ((int64_t)1 << 40)     /* one activation of one micro-batch */
#define MAX_PARAMS ((int64_t)1 << 44)           /* model parameters */
#define MAX_ACTIVATION_ELEMS ((int64_t)1 << 52) /* layers × micro_batches × MAX of one layer's tensors */
#define MAX_INCLUDE_DEPTH 16
#define MAX_INCLUDED_FILES 4096                  /* includes read for one plan, repeats counted */
#define MAX_INCLUDED_BYTES ((int64_t)1 << 26)   /* 64 MiB: their text added up */
#define MAX_SOURCE_BYTES ((size_t)1 << 24) /* 16 MiB: a plan file, or one include */

/* ------------------------------------------------------------ the checker */

typedef struct Check {
    Arena *arena;
    Plan *plan;
    const char *file;
    const char *include_stack[MAX_INCLUDE_DEPTH + 1];
    int include_depth;
    /* What the includes read so far, against MAX_INCLUDED_*; the plan file's
     * own include being expanded (where a bound is reported); set once one
     * was reported, so nothing more is read. */
    int64_t included_files, included_bytes;
    SrcLoc root_include;
    int includes_over;
    /* Sections found (NULL when absent). */
    const Stmt *section[SECTION_COUNT];
    /* Which plan values phase 2 accepted. */
    int have_nodes, have_gpn;
    int have_model_key[MODEL_COUNT];
    int dims_ok;              /* hidden/heads/head_dim/kv_heads consistent */
    int mesh_ok;              /* every axis valid and named once */
    const Stmt *lr_stmt;      /* train's `lr` schedule, found before the optimizer is read */
    SrcLoc opt_weight_decay_loc; /* the optimizer's own `weight_decay` (file NULL when not given) */
    int have_batch, have_micro_batch, have_micro_batches;
    SrcLoc train_seq_loc;
    /* Layout statements kept for phase 3. */
    const Stmt *dim_rule[DIM_COUNT];
    int interleave;           /* `interleaved N`: N, else 1 */
    SrcLoc interleave_loc;
    const Stmt *zero_stmt, *schedule_stmt;
    unsigned zero_named;             /* `zero N over A B ...`: a bit per axis named */
    const Stmt **stage_stmts;
    int nstage_stmts, cap_stage_stmts;
} Check;

/* ------------------------------------------------------------ check_read.c */

enum { BODY_NO, BODY_YES };

SrcLoc check_file_loc(const char *path);     /* a location naming a whole file */
SrcLoc check_loc_join(SrcLoc a, SrcLoc b);   /* a's span extended to b's end on one line */
SrcLoc check_stmt_span(const Stmt *st);      /* a statement's key and values */
int check_word_index(const char *word, const char *const *names, int n); /* -1 when absent */
const char *check_word_list(Check *c, const char *const *names, int n);  /* "`a`, `b` or `c`" */
const char *check_value_text(Check *c, const Value *v);                  /* the value as written */
const char *check_did_you_mean(Check *c, const char *word, const char *const *names, int n);
/* Divisors of n nearest to `near` from below and above (0 when none). */
void check_nearest_divisors(int64_t n, int64_t near, int64_t *below, int64_t *above);
/* "tp = 8 or 16 would" for a dim of size n that `axis` of size `size` fails. */
const char *check_divisor_hint(Check *c, const char *axis, int64_t n, int64_t size);
const char *check_add_missing(Check *c, const char *list, const char *item);
/* A statement's form: value count in [min_values, max_values], a block iff
 * body == BODY_YES, no `->`.  Reports each problem; 1 when the form is right. */
int check_shape(Check *c, const Stmt *st, int min_values, int max_values, int body, const char *usage);
/* Reports an unknown key; the index of the key it suggests, or -1. */
int check_unknown_key(Check *c, const Stmt *st, const char *where, const char *const *names, int n);
/* Records st in *seen; reports a duplicate.  1 when st is the first. */
int check_first_of(const Stmt **seen, const Stmt *st, const char *where);
/* Value readers: 1 (or the word's index) on success, 0 (or -1) after reporting. */
int check_read_count(Check *c, const Stmt *st, const Value *v, int64_t min, int64_t max, int64_t *out);
/* The same for the counts of tokens and sequences (`seq`, `batch`,
 * `micro_batch`, `micro_batches`): K / M / B scale by 2^10 / 2^20 / 2^30, so
 * a 128K context is 131,072 tokens. */
int check_read_token_count(Check *c, const Stmt *st, const Value *v, int64_t min, int64_t max, int64_t *out);
int check_read_quantity(Check *c, const Stmt *st, const Value *v, UnitKind want, int zero_ok, double *out);
int check_read_real(Check *c, const char *what, const Value *v, double lo, int lo_open, double hi, int hi_open,
              double *out);
/* check_read_real with a hint on each of its errors (NULL: none). */
int check_read_real_hint(Check *c, const char *what, const Value *v, double lo, int lo_open, double hi, int hi_open,
                         const char *hint, double *out);
int check_read_word(Check *c, const char *what, const Value *v, const char *const *words, int n);
int check_read_count_stmt(Check *c, const Stmt *st, int64_t min, int64_t max, int64_t *out, const char *usage);
int check_read_token_count_stmt(Check *c, const Stmt *st, int64_t min, int64_t max, int64_t *out, const char *usage);
int check_read_word_stmt(Check *c, const Stmt *st, const char *const *words, int n, const char *usage);

/* ------------------------------------------------------------ check_load.c */

/* The text of a plan or include file: at most MAX_SOURCE_BYTES without NUL
 * bytes, in the arena; NULL with *why set (and errno kept from a failed
 * open).  With regular_only (includes) anything but a regular file is
 * refused; a plan named on the command line may be a pipe (`<(...)`). */
char *check_read_whole_file(Arena *arena, const char *path, int regular_only, const char **why);
/* The same for standard input (a pipe or a terminal: no regular-file test). */
char *check_read_stdin_text(Arena *arena, const char **why);
const char *check_canonical_path(Check *c, const char *path);
/* Parses `text` of `path` and splices its includes.  0 on success. */
int check_parse_file(Check *c, const char *path, const char *text, StmtList *out);

/* ------------------------------------------------------------ check_sections.c */

void check_cluster(Check *c, const Stmt *sec);
void check_model(Check *c, const Stmt *sec);
void check_train(Check *c, const Stmt *sec);
void check_mesh(Check *c, const Stmt *sec);
void check_layout(Check *c, const Stmt *sec);

/* ------------------------------------------------------------ check_positions.c */

/* model's `embed [positions none|learned|rope [theta X] [scaling llama3 ...]];` */
void check_embed(Check *c, const Stmt *st);
/* `norm KIND [eps X];` of a block or the model (the final norm): the kind and
 * its epsilon, PARC_NORM_EPS when not given. */
void check_norm(Check *c, const Stmt *st, const char *usage, NormKind *kind, double *eps);
/* Rotary positions against the model: attention to rotate, an even head_dim. */
void check_positions_against_model(Check *c);

/* ------------------------------------------------------------ check_checkpoint.c */

/* train's `checkpoint [every N steps] [keep K];` */
void check_checkpoint(Check *c, const Stmt *st);

/* ------------------------------------------------------------ check_schedule.c */

/* train's `lr PEAK [warmup N steps] [stable N steps] [cosine|linear to MIN over N steps];` */
void check_lr_schedule(Check *c, const Stmt *st);

/* ------------------------------------------------------------ check_train.c */

/* train's `weight_decay VALUE [on weights|all];` and `clip MAX_NORM;`, read
 * after the optimizer (whose defaults they override). */
void check_weight_decay(Check *c, const Stmt *st);
void check_clip(Check *c, const Stmt *st);

/* ------------------------------------------------------------ check_data.c */

/* The `data` section: train / validation paths and the format. */
void check_data(Check *c, const Stmt *sec);
/* train's `eval every N steps batches K;` */
void check_eval(Check *c, const Stmt *st);
/* Evaluation against the data section: a training file needs a validation one. */
void check_eval_data(Check *c);

/* ------------------------------------------------------------ check_cross.c */

void check_mesh_against_cluster(Check *c);
void check_dims_against_mesh(Check *c);
void check_batch(Check *c);
void check_pipeline(Check *c);
void check_pipeline_scatter(Check *c);
/* `cp_comm ring;` and `cp_split balanced;` need a context axis (a `seq -> AXIS`
 * rule); the balanced split seq dividing by 2 cp and no dropout. */
void check_cp_comm(Check *c);
void check_fill_even_stages(Layout *l, int64_t layers);
/* The size limits above, on values the sections accepted; reports each one a
 * plan exceeds with the limit's value. */
void check_size_limits(Check *c);
/* A mixture-of-experts MLP: its expert_ffn defaults to the model's ffn and,
 * with shared experts, its shared_ffn to shared x expert_ffn; it runs on one
 * rank for now, so every mesh axis of size > 1 is an error naming the axis. */
void check_moe_plan(Check *c);

#endif
