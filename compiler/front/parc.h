/*
 * parc.h — the compiler's one core header.
 *
 * Holds the shared vocabulary of every pass: the arena, source locations and
 * diagnostics, the resolved plan (what `check` guarantees), the named dims, the
 * mesh, and the pass entry points.  The graph IR and the lowered program live in
 * ir.h; the pipeline schedule in schedule.h.
 *
 * Pass order (the table in passes.c, which main.c runs):
 *   front: parse (grammar/par.y) + check (check*.c) -> expand (expand.c) ->
 *   place (place.c) -> reshard (lower.c: the schedule (schedule.c), each
 *   stage's buffers and forward program, all communication from reshard.c) ->
 *   autodiff (autodiff.c) -> optim (optim.c), over the ops of ops.c ->
 *   lower (the ledger, ledger.c) -> analyze (analyze.c) -> codegen
 *   (codegen*.c); then advice (advise.c) and reports (explain.c)
 */
#ifndef PARC_H
#define PARC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------- arena */

/* A bump allocator.  Everything of one compilation (AST, plan, IR) lives in one
 * arena and is freed at once; there are no per-node free functions.
 * arena_alloc returns zeroed memory aligned to 16 bytes; it never returns NULL
 * (out of memory is fatal). */
typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
    ArenaBlock *head;
} Arena;

void *arena_alloc(Arena *arena, size_t size);
char *arena_strdup(Arena *arena, const char *s);
char *arena_strndup(Arena *arena, const char *s, size_t n);
char *arena_printf(Arena *arena, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_free(Arena *arena);

/* Growable array stored in an arena: ARR_PUSH(arena, items, count, cap, value). */
#define ARR_PUSH(arena, items, count, cap, value)                                   \
    do {                                                                          \
        if ((count) == (cap)) {                                                   \
            size_t new_cap_ = (cap) ? (size_t)(cap) * 2 : 8;                      \
            void *grown_ = arena_alloc((arena), new_cap_ * sizeof(*(items)));     \
            if (count) memcpy(grown_, (items), (size_t)(count) * sizeof(*(items))); \
            (items) = grown_;                                                     \
            (cap) = new_cap_;                                                     \
        }                                                                         \
        (items)[(count)++] = (value);                                             \
    } while (0)

/* ---------------------------------------------------------- diagnostics */

/* A span in a source file.  line and col are 1-based; len is the number of
 * columns the caret underlines (at least 1).  file == NULL means "no location"
 * (e.g. a default value nobody wrote). */
typedef struct SrcLoc {
    const char *file;
    int line, col, len;
} SrcLoc;

typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagLevel;

/* Source text registry: diag_add_source() lets diagnostics print the line of a
 * location and a caret under it.  The text must outlive the diagnostics. */
void diag_add_source(const char *file, const char *text);

/* Prints `file:line:col: error: message`, the source line, a caret under the
 * span, and, when hint != NULL, `  hint: ...`.  Counts errors and warnings. */
void diag_report(DiagLevel level, SrcLoc loc, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define diag_error(loc, hint, ...) diag_report(DIAG_ERROR, (loc), (hint), __VA_ARGS__)
#define diag_warning(loc, hint, ...) diag_report(DIAG_WARNING, (loc), (hint), __VA_ARGS__)
#define diag_note(loc, hint, ...) diag_report(DIAG_NOTE, (loc), (hint), __VA_ARGS__)
int diag_error_count(void);
int diag_warning_count(void);
void diag_set_default_stream(FILE *stream); /* where reports are printed; NULL: stderr */
/* Muted mode, nested: from diag_mute to its diag_unmute reports count errors
 * and warnings as usual but print nothing (trial compilations whose reports
 * are not the user's). */
void diag_mute(void);
void diag_unmute(void);
/* color: ANSI colours in text diagnostics.  json: each diagnostic is one line
 * {"file", "line", "column", "length", "severity", "message", "hint"} (file and
 * hint may be null; line and column 0 where unknown) instead of text. */
void diag_set_style(int color, int json);
void diag_reset(void);              /* zero the counters and forget sources */
/* A point of the diagnostic state to come back to after a trial compilation
 * whose reports are not the user's: diag_rewind restores the counters and
 * forgets the sources added since (the earlier ones stay, for carets). */
typedef struct DiagMark {
    int errors, warnings, nsources;
} DiagMark;
DiagMark diag_mark(void);
void diag_rewind(DiagMark mark);

/* "did you mean": the closest candidate by edit distance, or NULL when nothing is
 * close enough to suggest. */
const char *diag_closest(const char *word, const char *const *candidates, int count);

/* A compiler bug, never a user diagnostic: prints `parc: internal error at
 * FILE:LINE: message` and aborts. */
_Noreturn void diag_internal_error(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define PARC_BUG(...) diag_internal_error(__FILE__, __LINE__, __VA_ARGS__)
#define PARC_ASSERT(cond)                                                           \
    do {                                                                          \
        if (!(cond)) PARC_BUG("assertion failed: %s", #cond);                     \
    } while (0)

/* ------------------------------------------------------------ named dims */

/* The named dims of the model.  DIM_FLAT is the flattened element index of a
 * parameter, the dim ZeRO shards over the data axis.  A mixture of experts
 * adds EXPERTS (an expert's weights, the router's logits), TOPK (a token's
 * chosen experts) and ROUTED: the tokens of the routed rows [ROUTED, TOPK, ...],
 * each token's TOPK rows, sorted by expert.  ORDER: dim_names[] in
 * plan.c follows this enum. */
#define PARC_DIMS(X)          \
    X(BATCH, "batch")         \
    X(SEQ, "seq")             \
    X(HIDDEN, "hidden")       \
    X(HEADS, "heads")         \
    X(HEAD_DIM, "head_dim")   \
    X(FFN, "ffn")             \
    X(VOCAB, "vocab")         \
    X(LAYERS, "layers")       \
    X(QKV, "qkv")             \
    X(GATE, "gate")           \
    X(FLAT, "flat")           \
    X(EXPERTS, "experts")     \
    X(TOPK, "topk")           \
    X(ROUTED, "routed")

typedef enum {
#define X(name, str) DIM_##name,
    PARC_DIMS(X)
#undef X
    DIM_COUNT
} Dim;
extern const char *const dim_names[DIM_COUNT];

/* ------------------------------------------------------------- the plan */

typedef enum { NORM_NONE, NORM_LAYER, NORM_RMS } NormKind;
typedef enum { MLP_GELU, MLP_SWIGLU, MLP_RELU } MlpKind;
typedef enum { BLOCK_TRANSFORMER, BLOCK_MLP } BlockKind;
typedef enum { POS_NONE, POS_LEARNED, POS_ROPE } PosKind;
typedef enum { PREC_FP32, PREC_BF16, PREC_FP16 } Precision;
/* The plan's word for each precision (plan.c): what dumps, reports and
 * rewritten plans print. */
extern const char *const precision_names[PREC_FP16 + 1];
typedef enum { OPT_ADAMW, OPT_ADAM, OPT_SGD } OptKind;
typedef enum { SCHED_NONE, SCHED_GPIPE, SCHED_1F1B, SCHED_INTERLEAVED } SchedKind;
/* Activation recompute policies.  ORDER: X(kind, the plan's word). */
#define PARC_RECOMPUTE(X)         \
    X(NONE, "none")               \
    X(SELECTIVE, "selective")     \
    X(FULL, "full")
typedef enum {
#define X(name, word) RECOMPUTE_##name,
    PARC_RECOMPUTE(X)
#undef X
    RECOMPUTE_COUNT
} RecomputeKind;
/* The plan's word for each policy: what `recompute` reads and every dump,
 * report and rewritten plan prints (plan.c). */
extern const char *const recompute_names[RECOMPUTE_COUNT];

/* The greatest common divisor of a and b (0 with 0: the other). */
static inline int64_t parc_gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* Bytes of one element in a precision. */
int plan_precision_bytes(Precision p);

/* What fraction of its peak a GPU and its links reach (cost.c uses it; the
 * defaults per GPU and where each comes from are in cost.c and
 * docs/cost-model.md).  GEMMs by the class of their smallest dimension
 * (GemmClass in cost.h), attention as its kernel runs, streaming ops at HBM
 * bandwidth, collectives at bus bandwidth per link class. */
#define PARC_GEMM_CLASSES 4
#define PARC_STREAM16_KINDS 5 /* stream16's classes: streams, norms, activations, softmaxes, scores */
typedef struct Efficiency {
    const char *name;                 /* the default set it started from: "a100", "h100", "h200", "generic" */
    double gemm[PARC_GEMM_CLASSES];   /* achieved / peak FLOP/s of a GEMM, by shape class */
    double gemm16[PARC_GEMM_CLASSES]; /* the same for GEMMs of 16-bit plans against the bf16 peak, where the
                                       * cluster states them apart (0: as gemm) */
    double attention;                 /* achieved / peak FLOP/s of the attention matmuls */
    double hbm;                       /* achieved / peak bandwidth of memory-bound ops */
    double activation;                /* ... of the activations with a transcendental per element
                                       * (GELU, SwiGLU): on a GPU memory-bound like the rest, on a
                                       * CPU often bound by the tanh or exp itself */
    double norm;                      /* ... of layer and RMS norms (0: as hbm) */
    double softmax;                   /* ... of softmaxes: the loss's and attention's score matrix (0: as hbm) */
    double scores;                    /* ... of attention's score matrix alone, where it runs apart from the
                                       * loss's softmax (a CPU kernel that keeps a block of scores in cache;
                                       * 0: as softmax) */
    double tiles;                     /* ... of the score tiles flash attention keeps on chip, as a share of
                                       * the HBM bandwidth (0: as scores where that is stated, else none:
                                       * a GPU's fused kernel, inside `attention`; cost_tiles_s) */
    double optimizer;                 /* ... of the optimizer's pass over its state (0: as hbm) */
    double stream16[PARC_STREAM16_KINDS]; /* memory-bound ops over 16-bit tensors: their bytes/s against the
                                       * same op's over fp32 ones, by class: [0] streams (embedding, adds,
                                       * biases, copies, dropout), [1] norms, [2] activations, [3] the loss's
                                       * softmax, [4] attention's scores; `stream16 x;` gives all five x
                                       * (0: as 1, a byte is a byte; a CPU that widens each element to fp32
                                       * and back runs them slower, each class by its own arithmetic) */
    double bus[2];                    /* achieved bus bandwidth / link bandwidth: [0] intra, [1] inter */
    double half_bytes[2];             /* a collective's size at which it reaches half its bus bandwidth
                                       * (Hockney's n 1/2), bytes: [0] intra, [1] inter; 0 = any size runs
                                       * at full bandwidth */
    double overlap;                   /* `overlap`, as written: the share of a started collective's time
                                       * compute can hide; the rest is the rank's own core moving it (CPU
                                       * ranks: the shared-memory transport copies the bytes, nonblocking
                                       * collectives advance inside MPI calls).  Read only when
                                       * overlap_set; unset = all of it, as NCCL's kernels on a GPU's own
                                       * stream run beside compute */
    int overlap_set;
    SrcLoc loc;                       /* the `efficiency` statement; file == NULL for the defaults */
} Efficiency;

/* Shape class names (cost.h: GemmClass), and the named default sets
 * ("generic", "a100", "h100", "h200"; efficiency.c says where each comes from). */
extern const char *const gemm_class_names[PARC_GEMM_CLASSES];
extern const char *const stream16_names[PARC_STREAM16_KINDS]; /* stream16's classes, as diagnostics name them */
extern const char *const plan_efficiency_names[];
extern const int plan_efficiency_count;
/* Fills *eff with the named defaults; -1 when the name is unknown. */
int plan_efficiency_defaults(const char *name, Efficiency *eff);

typedef struct Cluster {
    int nodes, gpus_per_node;
    double gpu_memory;   /* bytes */
    double flops_bf16;   /* FLOP/s, peak dense 16-bit */
    double flops_fp32;   /* FLOP/s; 0 when the plan did not say */
    double hbm_bandwidth;/* bytes/s */
    double intra_bw, intra_latency; /* bytes/s, seconds: GPU to GPU inside a node */
    double inter_bw, inter_latency; /* bytes/s per GPU, seconds: between nodes */
    Efficiency eff;      /* always filled by check (defaults when the plan says nothing) */
    const char *calibrated; /* `calibrated "MACHINE";` (parc calibrate writes it): the machine its
                             * figures were measured on, as the runtime names its own; NULL: none */
    double gpu_reserve;  /* bytes of each GPU that are not the plan's: `gpu { reserve ...; }`, or
                          * plan_default_reserve when the plan does not say; 0 <= gpu_reserve < gpu_memory
                          * when written */
    int reserve_set;     /* the plan states `reserve` */
    SrcLoc loc, memory_loc, reserve_loc;
} Cluster;

/* Headroom: what a GPU holds besides the buffers the ledger counts.  The
 * ledger (lower/ledger.c) is every buffer of a stage; a process on a GPU also
 * holds its CUDA context (about 0.5 GiB on an H100 under CUDA 12 once
 * created, towards 1 GiB with cuBLAS's kernels loaded: NVIDIA's CUDA
 * programming guide, "Lazy Loading", explains why the figure varies), NCCL's
 * buffers (NCCL_BUFFSIZE, 4 MiB by default, per channel and protocol for
 * each peer: a few hundred MiB to about 1 GiB per communicator, and parc
 * makes one per mesh axis; NCCL's environment-variable documentation) and
 * what allocation loses to granularity and fragmentation (PyTorch's
 * "CUDA semantics" notes on its caching allocator; parc's runtime makes one
 * allocation per ledger class, so less there).  The default for a GPU is
 * PARC_RESERVE_FIXED for the context and NCCL plus PARC_RESERVE_SHARE of its
 * memory for allocation, in whole MiB: 4 GiB of an 80 GiB H100, 3 GiB of a
 * 40 GiB A100.
 * These are judgements from those figures, not a measurement; a cluster
 * states its own with `reserve`.  A cluster `parc calibrate` measured on a
 * CPU (`calibrated "cpu ..."`) defaults to 0: a CPU rank has no device
 * context, and its memory is the host's. */
#define PARC_RESERVE_FIXED (2.0 * 1073741824.0)
/* Whether `parc calibrate` measured the cluster on CPU ranks (`calibrated
 * "cpu ..."`): their device memory is the host's and a pipeline message is
 * staged by a copy in memory (analyze.c). */
int plan_cluster_cpu(const Cluster *c);
#define PARC_RESERVE_SHARE 0.025
/* The share of a GPU (ledger plus reserve) above which a plan that fits is
 * warned about: less than a tenth of the GPU left for what neither counts. */
#define PARC_MEMORY_WARN_SHARE 0.90
/* The reserve of a cluster that does not state one (above). */
double plan_default_reserve(const Cluster *c);
/* The one test of fit: the bytes of each GPU a plan's ledger may use (memory
 * less reserve), whether a rank whose ledger totals `ledger_bytes` fits in
 * them, and the share of the GPU such a rank takes with the reserve. */
double plan_usable_memory(const Cluster *c);
int plan_fits(const Cluster *c, double ledger_bytes);
double plan_memory_share(const Cluster *c, double ledger_bytes);

/* The epsilon a norm adds to the mean square (variance) before the reciprocal
 * square root when its statement gives none: PyTorch's LayerNorm default, and
 * GPT-2's and Llama 2's and 3's. */
#define PARC_NORM_EPS 1e-5
/* The rotary embedding's base when `rope` gives no `theta` (Su et al. 2021,
 * Llama 1 and 2, transformers' default rope_theta). */
#define PARC_ROPE_THETA 10000.0

/* Rotary position embedding (`embed positions rope ...`): attention's q and k
 * rotated by their token's position, head dims i and i + head_dim/2 a pair
 * (transformers' rotate_half); runtime/prt_math.h has the formulas. */
typedef struct Rope {
    double theta;                  /* the frequencies' base: 1 / theta^(2i/head_dim) */
    int llama3;                    /* Llama 3.1's frequency scaling (`scaling llama3 ...`) */
    double factor;                 /* its four numbers (Llama 3.1: 8, 1, 4, 8192) */
    double low_freq_factor, high_freq_factor;
    int64_t original_max_positions;
} Rope;

/* The router's gate over the chosen experts' logits: a softmax (Mixtral) or
 * the chosen sigmoids over their sum (DeepSeek-V3). */
typedef enum { ROUTER_SOFTMAX, ROUTER_SIGMOID } RouterKind;

/* A mixture-of-experts MLP (`mlp moe experts E top K ...;`): each token's
 * router logits over E experts, its top K experts (the lower expert first on
 * ties) each an MLP of the block's activation with expert_ffn hidden units,
 * their outputs summed with the gate's weights.  No token is dropped.  With
 * shared experts (DeepSeekMoE), every token also goes through one dense,
 * ungated MLP of the same activation with shared_ffn hidden units (the shared
 * experts side by side), added to the routed output. */
typedef struct MoeSpec {
    int64_t experts;      /* E >= 2; 0: the MLP is dense */
    int64_t topk;         /* K in [1, E] */
    int64_t expert_ffn;   /* each expert's hidden size (the model's ffn unless given) */
    RouterKind router;
    double aux_coef;      /* load-balancing loss coefficient (Switch / GShard form), default 0.01 */
    double z_coef;        /* router z-loss coefficient (ST-MoE), default 0 */
    int64_t shared;       /* shared experts, >= 1; 0: none */
    int64_t shared_ffn;   /* their hidden units together (shared x expert_ffn unless given); 0 iff shared == 0 */
    double imbalance;     /* for the estimate under expert parallelism: the busiest rank's routed rows
                           * over the balanced share, >= 1 (default 1) */
    double capacity;      /* expert parallelism's buffers hold this many times the balanced share of
                           * rows, >= 1; 0: the dropless bound */
    int64_t every;        /* `every N`: layer l has the mixture iff (l + 1) % N == 0, the others a dense
                           * MLP of the model's ffn (Switch, Qwen2-MoE's decoder_sparse_step, Llama 4's
                           * interleave step); 1: every layer.  N divides layers. */
    SrcLoc every_loc;     /* its value, when given */
    SrcLoc loc;           /* the `mlp moe ...` statement */
} MoeSpec;

/* One block kind in the repeated stack. */
typedef struct BlockSpec {
    BlockKind kind;
    NormKind norm;        /* transformer: norm before attention and before MLP */
    double norm_eps;      /* its epsilon (`norm rms eps 1e-6;`), PARC_NORM_EPS by default */
    MlpKind mlp;
    int bias;             /* linear layers (and LayerNorm) carry biases */
    int causal;           /* attention is causal */
    int flash;            /* memory-efficient attention: no seq x seq probabilities kept,
                           * recomputed in backward (`attention causal flash;`) */
    int residual;         /* BLOCK_MLP: x + mlp(norm(x)); always 1 for transformer */
    double dropout;       /* training-time dropout probability in [0, 1), 0 = none
                           * (`dropout 0.1;`): on the attention probabilities and on
                           * each branch's output before its residual add (Megatron's
                           * attention and hidden dropout); a mask element is a pure
                           * function of (seed, step, layer, global index) */
    MoeSpec moe;          /* moe.experts > 0: the MLP is a mixture of experts */
    SrcLoc loc, dropout_loc;
} BlockSpec;

typedef struct Model {
    const char *name;
    int64_t vocab, seq, hidden, heads, head_dim, ffn, layers;
    int64_t kv_heads;     /* key/value heads (== heads unless grouped-query attention) */
                          /* BLOCK_MLP models: heads = kv_heads = head_dim = 0 (no attention);
                           * vocab = 0 when the model has neither embedding nor head. */
    PosKind positions;    /* learned position embedding, rotary (in attention) or none */
    Rope rope;            /* POS_ROPE: its base and scaling */
    SrcLoc positions_loc; /* the position scheme's word in `embed positions ...` */
    int has_embed;        /* token embedding at the front (else input is hidden-wide) */
    BlockSpec block;      /* the repeated block */
    NormKind final_norm;
    double final_norm_eps; /* its epsilon, PARC_NORM_EPS by default */
    int has_head;         /* vocab projection at the end */
    int tied_head;        /* head shares the embedding matrix */
    int has_loss;         /* cross-entropy on the head's logits */
    SrcLoc loc, dim_loc[DIM_COUNT]; /* where each dim was given */
} Model;

typedef struct Train {
    int64_t batch;          /* global batch, in samples (sequences) */
    int64_t micro_batch;    /* samples per micro-batch per data-parallel rank */
    int64_t micro_batches;  /* micro-batches per step per rank (derived when absent) */
    Precision precision;    /* compute/storage precision of weights and activations */
    int master_fp32;        /* fp32 master weights kept (mixed precision) */
    int grads_fp32;         /* 16-bit weights, gradients accumulated and synced in fp32 */
    OptKind optimizer;
    double lr, beta1, beta2, eps, weight_decay, momentum;
    /* The learning-rate schedule (`lr ... warmup ... cosine to ...`; see
     * include/prt_lr.h); lr_scheduled is 0 for a constant lr, which the
     * optimizer calls then carry as a number. */
    int lr_scheduled;
    int lr_shape;                      /* enum prt_lr_shape */
    int64_t lr_warmup, lr_stable, lr_decay;
    double lr_min;
    /* Weight decay groups: decay_all 0 decays the weight matrices and
     * embedding tables only (every parameter of two or more dims), 1 every
     * parameter, biases and norm gains included (`weight_decay X on all;`). */
    int decay_all;
    /* Gradient clipping by global norm (`clip X;`): the gradients are scaled
     * by min(1, clip / (norm + 1e-6)) before the optimizer; 0 = off. */
    double clip;
    int64_t steps;
    uint64_t seed;
    /* `eval every N steps batches K;`: 0 and 0 without one */
    int64_t eval_every, eval_batches;
    SrcLoc loc, batch_loc, micro_batch_loc, micro_batches_loc, precision_loc, eval_loc;
    /* `checkpoint every N steps keep K;` (check_checkpoint.c): the built
     * program's defaults; 0 = none.  ckpt_dir is NULL without the statement. */
    int64_t ckpt_every, ckpt_keep;
    const char *ckpt_dir;
    SrcLoc ckpt_loc;
} Train;

/* The `data` section: the token files a built program reads (paths as the
 * plan wrote them, relative ones joined to the plan's directory) and their
 * format (enum prt_data_format of include/parc_rt.h); present = 0 without it. */
typedef struct DataSpec {
    int present;
    const char *train, *validation;  /* NULL when not given */
    const char *train_written, *validation_written;  /* as the plan wrote them (reports, dumps) */
    int format;
    SrcLoc loc, train_loc, validation_loc;
} DataSpec;

#define PARC_MAX_AXES 8
/* Derived axes: groups of ranks spanning several mesh axes, numbered after
 * them (PARC_MESH_SLOTS in all). */
#define PARC_MAX_DERIVED 2
#define PARC_MESH_SLOTS (PARC_MAX_AXES + PARC_MAX_DERIVED)
#define PARC_MAX_STAGES 4096

typedef struct MeshAxis {
    const char *name;
    int size;
    unsigned parts;        /* a derived axis: bit a for each mesh axis a it spans; 0 for a mesh axis */
    SrcLoc loc;
} MeshAxis;

/* Axes in rank order: the last axis varies fastest in the global rank.
 * axes[naxes .. naxes + nderived) are derived axes (plan_derive_axes): the
 * ranks that differ only on their parts, coordinate in mesh order (the
 * first part slowest), size the product of the parts' sizes.  A collective
 * may run over one; a placement names mesh axes only. */
typedef struct Mesh {
    int naxes;
    int nderived;
    MeshAxis axes[PARC_MESH_SLOTS];
    int world;             /* product of sizes */
    SrcLoc loc;
} Mesh;

enum { BALANCE_EVEN, BALANCE_AUTO };

typedef struct Layout {
    int dim_axis[DIM_COUNT];      /* mesh axis a dim maps to, or -1 */
    SrcLoc dim_axis_loc[DIM_COUNT];
    int pp_axis;                  /* axis carrying `layers`, or -1 */
    SchedKind schedule;
    int virtual_stages;           /* chunks per pipeline rank (1 unless interleaved) */
    int sp_axis;                  /* sequence-parallel axis, or -1 */
    int zero_stage;               /* 0..3 */
    int zero_axis;                /* axis ZeRO shards over (the data axis, the context axis or the data
                                     group, their derived axis), or -1 */
    unsigned batch_parts;         /* `batch -> A B ...`: a bit per axis named (dim_axis[DIM_BATCH] is
                                     then their derived axis, plan_derive_axes); else 0 */
    int data_group;               /* the data group (plan_derive_axes): the axis, mesh or derived,
                                     whose ranks hold the same parameters and sum their gradients
                                     (batch's and seq's together), or -1 */
    RecomputeKind recompute;
    /* Stage assignment, always filled by check: model chunk v holds layers
     * [chunk_first[v], chunk_first[v] + chunk_layers[v]), and chunk c of
     * pipeline rank s is model chunk v = c * stages + s (plan_chunk), for
     * c < virtual_stages; stages * virtual_stages <= PARC_MAX_STAGES.  The
     * model chunks tile the layers in order, each holding one at least: chunk
     * v + 1 starts where chunk v ends.  Without interleaving v = s. */
    int stages;                   /* size of the pp axis, 1 without one */
    int chunk_first[PARC_MAX_STAGES];
    int chunk_layers[PARC_MAX_STAGES];
    int embed_stage, head_stage;  /* where the embedding and head live */
    int uneven;                   /* the plan assigned layers explicitly (stage blocks) */
    /* `balance auto;`: the balance pass (balance.c) replaces check's even
     * split by the one of least estimated busy time; what it found: */
    int balance;                  /* BALANCE_EVEN or BALANCE_AUTO */
    int balanced;                 /* the pass ran: the figures below are its */
    double balance_layer_s;       /* one layer, forward + backward, one micro-batch */
    double balance_embed_s, balance_head_s; /* the embedding's and the head's, likewise */
    double balance_even_busy_s;   /* the busiest stage's busy time per step with the even split */
    double balance_busy_s;        /* ... with the chosen split */
    SrcLoc schedule_loc, sp_loc, zero_loc, recompute_loc, stage_loc, balance_loc;
    /* `grad_overlap off;`: the data axis's gradient buckets block after their
     * layer's backward instead of running under the rest of it (overlap.c) */
    int grad_overlap_off;
    SrcLoc grad_overlap_loc;
    /* `tp_overlap off;`: the backward's input-gradient collectives over the
     * tensor axis block where they are issued instead of running under the
     * weight-gradient GEMM (overlap_tp.c) */
    int tp_overlap_off;
    SrcLoc tp_overlap_loc;
    /* `pipeline_scatter on;` (Megatron-LM's scatter/gather between stages):
     * each pipeline message carries this tensor rank's 1/tp of the boundary
     * activation or gradient, and the receiver all-gathers it over the tensor
     * axis.  check guarantees: a pipeline axis, a tensor axis of size > 1 over
     * which the boundary is whole (no sequence parallelism, no `seq`/`hidden`
     * rule onto it), and the boundary's elements per micro-batch divide by it. */
    int pipeline_scatter;
    SrcLoc pipeline_scatter_loc;
    /* `cp_comm ring;` (CP_COMM_RING): attention under context parallelism
     * passes each chunk's K/V around the context axis (ring attention)
     * instead of gathering the qkv whole (CP_COMM_ALLGATHER, the default).
     * check guarantees: ring only with a context axis (a `seq` rule). */
    int cp_comm;
    SrcLoc cp_comm_loc;
    /* `cp_split balanced;`: the load-balanced split of the sequence over the
     * context axis (rank r holds chunks r and 2 cp - 1 - r of 2 cp), so every
     * rank of a causal model does the same attention work; the data are
     * loaded in that order (prt_data) and positions follow it (prt_seq_pos).
     * check guarantees: seq divides by 2 cp, no dropout. */
    int cp_balanced;
    SrcLoc cp_split_loc;
} Layout;
enum { CP_COMM_ALLGATHER, CP_COMM_RING };

/* The resolved, checked plan.  Guarantees after check_plan() succeeds:
 * every number is in base units (bytes, FLOP/s, seconds, counts); every split
 * dim divides by its axis; mesh.world == nodes * gpus_per_node; batch ==
 * micro_batch * micro_batches * size(batch axis); the stage assignment covers
 * every layer exactly once; the schedule's constraints on micro_batches hold. */
typedef struct Plan {
    const char *file;
    Cluster cluster;
    Model model;
    Train train;
    Mesh mesh;
    Layout layout;
    DataSpec data;
} Plan;

/* Axis sizes helpers: 1 when the axis is -1. */
/* Model chunk of chunk c of pipeline rank s (Layout's stage assignment). */
static inline int plan_chunk(const Layout *l, int s, int c) { return c * l->stages + s; }
/* The layers pipeline rank s holds, over all its chunks. */
int plan_stage_layer_count(const Layout *l, int s);
int plan_axis_size(const Plan *plan, int axis);
/* Size of the axis a dim maps to (1 if unmapped). */
int plan_dim_parts(const Plan *plan, Dim dim);
/* Size of the data-parallel axis (the axis `batch` maps to), 1 without one. */
int plan_dp(const Plan *plan);
/* The tensor axis: the one `heads` (else `ffn`) maps to, -1 without one. */
int plan_tensor_axis(const Plan *plan);
/* Elements of the residual stream one rank holds per micro-batch: a pipeline
 * message, micro_batch x its part of seq x its part of hidden. */
int64_t plan_boundary_elems(const Plan *plan);
/* Whether `pipeline_scatter on` can split this plan's pipeline messages: a
 * pipeline, a tensor axis of size > 1 over which the boundary is whole, and a
 * boundary that divides by it (what check requires of the switch). */
int plan_pipeline_scatter_fits(const Plan *plan);
/* Whether sequence parallelism composes with a context axis for this model:
 * a row's place is then two coordinates', which rotary positions (on the
 * qkv, whole on the tensor axis) take and a learned position table and
 * dropout's masks (placed by one split) do not. */
int plan_sp_with_cp(const Model *m);
/* Recomputes the plan's derived axes from its mesh and layout: batch's,
 * when `batch -> A B ...` splits the samples over several axes of more than
 * one rank (dim_axis[DIM_BATCH] becomes it; over one, that axis); and the
 * data group,
 * batch's axes and the context axis (seq's, when it is not the tensor axis)
 * together when both have more than one rank (Megatron-LM's data-parallel
 * group with context parallelism), else the one of them with more than one
 * rank.  Sets layout.data_group to it; a ZeRO axis that named a
 * derived axis names the one spanning the same axes now, else the data
 * group.  Idempotent; every plan entering the passes goes through it. */
void plan_derive_axes(Plan *plan);
/* The context axis: the one `seq` maps to when it is not the tensor axis
 * and has more than one rank (context parallelism), else -1. */
int plan_context_axis(const Plan *plan);
/* The mesh axes (bit a) an axis spans: itself, or a derived axis's parts. */
unsigned plan_axis_parts(const Plan *plan, int axis);
/* Whether ZeRO may shard over axis (mesh or derived): it spans some of the
 * data group's axes and no other (check_cross.c maps `zero N over A B ...`
 * to such an axis; the fit advice's variants keep to it). */
int plan_zero_axis_ok(const Plan *plan, int axis);
/* Whether every group of `axis` stays inside one node (mesh order, last axis
 * fastest, ranks 0..gpus_per_node-1 on node 0). */
int plan_axis_inside_node(const Plan *plan, int axis);
/* The fewest of one group's ranks of `axis` that share a node: the axis's
 * size when every group stays inside a node, 1 when each rank of a group is
 * on a node of its own (the cost of a collective across nodes: cost.h). */
int plan_axis_node_ranks(const Plan *plan, int axis);
/* Coordinates of a global rank on every axis, and back. */
void plan_rank_coords(const Plan *plan, int rank, int coords[PARC_MAX_AXES]);
int plan_coords_rank(const Plan *plan, const int coords[PARC_MAX_AXES]);

/* ------------------------------------------------------- front end (check) */

/* Parses and checks a .par file into *plan.  Reports every error it finds
 * (parse errors, then all semantic errors of the check pass) through diag and
 * returns 0 on success, -1 when any error was reported.  The plan's strings and
 * locations live in `arena`. Memory fit is NOT checked here (advise.c does it
 * on the analyzed program). */
int check_plan(Arena *arena, const char *path, Plan *plan);
/* The same from text already in memory (tests, fuzzing, standard input):
 * `path` names it in diagnostics and includes are relative to it.
 * check_plan(arena, "-", plan) reads standard input, named `<stdin>`.
 * check_plan_buffer takes `size` bytes that need not end in NUL (a NUL inside
 * is an error, as in a file); files are at most 16 MiB. */
int check_plan_text(Arena *arena, const char *path, const char *text, Plan *plan);
int check_plan_buffer(Arena *arena, const char *name, const char *data, size_t size, Plan *plan);

/* The model's parameters, as expand counts its tensors (every layer, the
 * embedding, the head; a tied table once); *active gets those one token
 * passes through: a mixture of experts counts its router, topk of its
 * routed experts and its shared experts. */
int64_t plan_parameter_counts(const Plan *plan, int64_t *active);
/* Layers in one repetition of the block: `mlp moe ... every N` repeats N
 * layers (N - 1 dense, then the mixture), else 1.  The lowered program's
 * per-layer unit ("block") is that group; the plan's stages hold whole
 * groups, and global layer = block * N + the layer's place in it. */
static inline int64_t plan_block_layers(const Plan *plan)
{
    const MoeSpec *m = &plan->model.block.moe;
    return m->experts && m->every > 1 ? m->every : 1;
}

/* Dumps the resolved plan in a stable text form (`parc lower --emit=front`). */
void plan_dump(const Plan *plan, FILE *out);
/* The model's settings a checkpoint records and an export or import needs
 * beyond its tensors' shapes, as one JSON object (arena text): vocab, seq, positions,
 * rope_theta and rope_scaling (transformers' llama3 form) with rotary
 * positions, norm, norm_eps, final_norm_eps, hidden, heads, kv_heads,
 * head_dim, ffn, layers, tied_head, bias, and a mixture of experts' settings
 * (`moe`: experts, topk, expert_ffn, router, aux_loss, z_loss, shared,
 * shared_ffn). */
const char *plan_model_json(Arena *arena, const Plan *plan);

#endif
