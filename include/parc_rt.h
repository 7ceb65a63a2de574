/*
 * parc_rt.h — the one public header of the parc runtime.
 *
 * Generated programs (see compiler/codegen/codegen.c) call only what is declared here.
 * Conventions, so that code generation stays mechanical:
 *   - every function takes the runtime context first;
 *   - every other argument is a pointer, an int64_t or a double (never int or
 *     float), so the LLVM signature of each call is a string over {p, i, d};
 *     PRT_OPS below lists them, and the compiler declares the calls from it;
 *   - tensors are row-major; shapes are written beside each argument, counts
 *     are elements.  A tensor is stored in the dtype of the buffer that holds it
 *     (prt_buffer_desc.dtype: f32, bf16 or f16 for float tensors, i32 for tokens
 *     and targets, u8 for dropout masks), and every op and collective is told
 *     those dtypes by its last argument, the dtypes word (PRT_ARG_DTYPES below);
 *     the runtime checks the word against the registered buffers.  The CPU backend
 *     computes in fp32: an op widens its 16-bit inputs and rounds its outputs to
 *     nearest even (bf16, IEEE half), so it equals the fp32 op on the widened
 *     inputs, rounded; a backward op's += is done in fp32 and rounded once;
 *   - forward ops overwrite their outputs; backward ops ACCUMULATE (+=) into the
 *     gradient of their inputs and into parameter gradients, so residual branches
 *     and tied weights need no special case.  Callers zero gradients first.
 */
#ifndef PARC_RT_H
#define PARC_RT_H

#include <stdint.h>

#include "prt_lr.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct prt prt;

/* Buffer classes of the memory ledger, in ledger order: X(ID, name) gives
 * enum prt_class (PRT_<ID> = its position) and the name the runtime prints
 * (--memory, ledger mismatches).
 *   WEIGHTS      parameters as the forward pass reads them
 *   GRADS        parameter gradients
 *   MASTER       fp32 master weights (mixed precision only)
 *   OPTIM        optimizer moments (Adam m and v; SGD momentum)
 *   ACTIVATIONS  tensors saved for backward, for all in-flight micro-batches
 *   COMM         communication staging buffers (pipeline messages, gathers)
 *   WORKSPACE    transient tensors of one layer's forward/backward */
/* X(ID, key, report name): the key is what the runtime prints (--memory) and
 * the dumps use; the report name is what the compiler's reports print. */
#define PRT_CLASSES(X)                            \
    X(WEIGHTS, "weights", "weights")              \
    X(GRADS, "grads", "gradients")                \
    X(MASTER, "master", "master")                 \
    X(OPTIM, "optim", "optimizer")                \
    X(ACTIVATIONS, "activations", "activations")  \
    X(COMM, "comm", "comm")                       \
    X(WORKSPACE, "workspace", "workspace")

enum prt_class {
#define PRT_CLASS_ENUM_(id, key, report) PRT_##id,
    PRT_CLASSES(PRT_CLASS_ENUM_)
#undef PRT_CLASS_ENUM_
    PRT_NCLASS
};

/* Element types: X(ID, name, bytes) gives enum prt_dtype (PRT_<ID>). */
#define PRT_DTYPES(X)      \
    X(F32, "f32", 4)       \
    X(BF16, "bf16", 2)     \
    X(F16, "f16", 2)       \
    X(I32, "i32", 4)       \
    X(U8, "u8", 1)

enum prt_dtype {
#define PRT_DTYPE_ENUM_(id, name, bytes) PRT_##id,
    PRT_DTYPES(PRT_DTYPE_ENUM_)
#undef PRT_DTYPE_ENUM_
    PRT_NDTYPE
};

enum prt_init { PRT_INIT_NONE = 0, PRT_INIT_NORMAL, PRT_INIT_ONES, PRT_INIT_ZEROS, PRT_INIT_COPY };

/* Mesh axes and derived axes together (a derived axis: the ranks that
 * differ only on its parts, prt_plan_desc.axis_parts). */
#define PRT_MAX_AXES 10
/* Rows a GEMM op widens from 16-bit storage at a time (the ledger's R, at
 * prt_expect_memory). */
#define PRT_CONVERT_ROWS 64
#define PRT_MAX_DIMS 4

/* One buffer of a stage's table.  Every field is int64_t, double or a pointer
 * so the compiler can emit the table as a constant LLVM struct array.
 *
 * A buffer has `instances` copies of `elems` local elements each (e.g. one per
 * layer held by this stage, or one per layer × in-flight micro-batch slot).
 *
 * Parameters (init != NONE) describe their GLOBAL tensor: `ndim` dims `gdims`,
 * each dim split over mesh axis split_axis[d] (-1 = whole).  The local block of a
 * rank is gdims[d] / size(axis) long, at offset coord(axis) × that.  When
 * zero_axis >= 0, the rank holds only its 1/size(zero_axis) share of the
 * flattened local block, padded up to a multiple of that size (pad elements are
 * zero and stay zero): elems is that share; with zero_whole = 1 it holds the
 * whole local block padded so (ZeRO-1/2 weights, which the axis's all-gather
 * fills from every rank's share): elems is the padded block.  Initial values are a pure function of
 * (init_name, global layer, global element index, seed):
 *   NORMAL: init_std × a standard normal from a counter-based hash;
 *   ONES/ZEROS: constants;  COPY: copy of buffer `copy_of`, same elems and
 *   instances, regenerated in this buffer's dtype.
 * A 16-bit buffer holds the rounding (to nearest even) of the fp32 value.  fp32
 * master weights (class PRT_MASTER) must have initial values: they describe
 * their parameter themselves (same init, init_name, dims, split axes and layers,
 * zero_axis = the ZeRO axis when the optimizer state is sharded) or COPY an
 * equal-shaped buffer; either way they get the full fp32 values, of which the
 * 16-bit weights are the rounding.  init NONE for a master is an error.
 * Instance i of a per-layer parameter is global layer first_layer + i (see
 * layer_of for interleaved pipelines). */
typedef struct prt_buffer_desc {
    const char *name;        /* for messages, traces, --memory: "h.3.mlp.up.w" style */
    const char *init_name;   /* stable parameter name hashed into its init key */
    int64_t klass;           /* enum prt_class */
    int64_t dtype;           /* enum prt_dtype */
    int64_t elems;           /* local elements per instance */
    int64_t instances;
    int64_t init;            /* enum prt_init */
    int64_t first_layer;     /* global layer of instance 0, or -1 for non-layer params */
    int64_t ndim;
    int64_t gdims[PRT_MAX_DIMS];
    int64_t split_axis[PRT_MAX_DIMS];
    int64_t zero_axis;
    int64_t copy_of;         /* buffer index for PRT_INIT_COPY, else -1 */
    double init_std;
    /* Interleaved pipelines hold several chunks of layers, not adjacent in
     * the model and not always of one size: when layer_of is not NULL,
     * instance i (< layer_of_n) is global layer layer_of[i] (else
     * first_layer + i). */
    const int64_t *layer_of;
    int64_t layer_of_n;
    int64_t zero_whole;      /* with zero_axis >= 0: 1 = the whole padded block, 0 = this rank's share */
} prt_buffer_desc;

/* The phases of a step: what the program's sequences are (prt_phase), what
 * the runtime times, and what the compiler estimates.  Collectives count as
 * exposed communication and pipeline sends and receives as bubble wherever
 * they run.  ORDER: the compiler's ANALYZE_PHASES (compiler/analyze/analyze.h). */
enum prt_phase {
    PRT_PHASE_FORWARD,
    PRT_PHASE_BACKWARD,
    PRT_PHASE_COMM,
    PRT_PHASE_BUBBLE,
    PRT_PHASE_OPTIMIZER,
    PRT_NPHASES
};

/* The plan's `data` section and its evaluation (prt_plan_desc.data).  Token
 * files (prt_data.c): llmc is llm.c's format (a header of 256 int32: magic
 * 20240520, version 1, the token count; then uint16 tokens), u16 and u32 are
 * headerless little-endian tokens (nanoGPT's .bin), text is bytes as tokens.
 * ORDER: the compiler's data_format_words (check_data.c). */
enum prt_data_format { PRT_DATA_TEXT, PRT_DATA_LLMC, PRT_DATA_U16, PRT_DATA_U32 };

typedef struct prt_data_desc {
    const char *train, *validation;   /* paths, NULL when the plan names none */
    int64_t format;                   /* enum prt_data_format of both files */
    /* `eval every N steps batches K;`: after the optimizer of every N-th step
     * (and before step 1, and after the last step) K global batches of the
     * validation data are run forward; 0: no evaluation */
    int64_t eval_every, eval_batches;
} prt_data_desc;

/* One op call of the program (prt_plan_desc.op_shapes): its PRT_CALLS name,
 * the pipeline stage whose code makes it, and its int64_t arguments in call
 * order, as code generation passes them (a rank's offset, coordinate × n, as
 * the largest any rank of the axis passes; an argument known only when the
 * call runs, such as the step or the micro-batch's first sample, as -1).  One
 * row per distinct call of each stage.  A backend that must refuse shapes
 * before anything runs walks them at init (the CUDA backend's limits,
 * runtime/cuda/prt_cuda_limits.h). */
#define PRT_OP_SHAPE_MAX_ARGS 12
typedef struct prt_op_shape_desc {
    const char *op;
    int64_t stage;
    int64_t nargs;
    int64_t args[PRT_OP_SHAPE_MAX_ARGS];
} prt_op_shape_desc;

/* What the program tells the runtime about its plan. */
typedef struct prt_plan_desc {
    const char *plan_name;
    const char *source_file;
    int64_t naxes;                       /* mesh axes: [0, naxes) */
    const char *axis_names[PRT_MAX_AXES];
    int64_t axis_sizes[PRT_MAX_AXES];
    /* [naxes, ...) while non-zero: derived axes, bit a set for each mesh axis
     * a they span; a collective's axis may name one (the data group) */
    int64_t axis_parts[PRT_MAX_AXES];
    int64_t dp_axis, tp_axis, pp_axis;   /* -1 when absent */
    /* The plan's cluster: world ranks gpus_per_node at a time, in order, share
     * a node (0 = unknown); the start-up placement check holds the hosts the
     * ranks landed on against it. */
    int64_t gpus_per_node;
    int64_t steps;                       /* default number of steps (--steps overrides) */
    int64_t seed;
    int64_t batch, micro_batch, micro_batches, seq, vocab;
    /* The compiler's estimate of one step's wall time in seconds (0 = unknown).
     * The default watchdog timeout is PRT_TIMEOUT_STEPS times it, at least
     * PRT_TIMEOUT_FLOOR seconds (see prt_init). */
    double est_step_seconds;
    /* ... and of it by phase (enum prt_phase; they sum to it), which the
     * runtime prints beside what it measured at the end (0 = unknown) */
    double est_phase_seconds[PRT_NPHASES];
    /* The learning-rate schedule (prt_lr.h); optimizer calls of a plan with one
     * take prt_lr(rt, step) as their lr. */
    prt_lr_schedule lr;
    /* The data section and evaluation; NULL: synthetic data, no evaluation
     * (--data / --val-data / --data-format override it). */
    const prt_data_desc *data;
    /* The plan's `checkpoint every N steps keep K;`: the defaults of
     * --checkpoint-dir (ckpt_dir; NULL: none), --checkpoint-every and
     * --checkpoint-keep (0: none), which override them. */
    const char *ckpt_dir;
    int64_t ckpt_every, ckpt_keep;
    /* The machine the cluster's figures were measured on (`calibrated "NAME";`,
     * as prt_machine_name names one), NULL: the cluster as written; the end of
     * a run says whether the estimate is for the machine it ran on. */
    const char *calibrated;
    /* The model's settings as one JSON object (plan_model_json: positions,
     * rope_theta, rope_scaling, norm_eps, ...): a checkpoint's manifest records
     * it, and a resume, an export and an import compare against it. */
    const char *model_json;
    /* Every op call of every stage with its size arguments (NULL, 0: none given);
     * the last two fields. */
    const prt_op_shape_desc *op_shapes;
    int64_t nop_shapes;
} prt_plan_desc;

#define PRT_TIMEOUT_STEPS 20
#define PRT_TIMEOUT_FLOOR 60.0

/* ---------------------------------------------------------------- lifecycle */

/* Initialises MPI, checks world size == product of axis sizes, builds one
 * communicator per axis (MPI_Comm_split), parses runtime flags from argv
 * (values as --name value or --name=value):
 *   --steps N  --data FILE  --val-data FILE  --data-format llmc|u16|u32|text
 *   --memory  --trace FILE  --quiet  --timeout SECONDS
 *   --device cpu|cuda
 *   --checkpoint-dir DIR  --checkpoint-every N  --checkpoint-keep N
 *   --resume latest|DIR  --save-on-exit   (docs/checkpoints.md)
 * Bad flags print a usage message and exit 2 on every rank; so do outputs that
 * cannot be opened and --data files that cannot be used, checked here before
 * any training. */
prt *prt_init(int64_t argc, char **argv, const prt_plan_desc *plan);
/* Allocates every buffer of this rank's stage (booked to its ledger class) and
 * initialises parameters.  Called once after prt_init. */
void prt_register_buffers(prt *rt, const prt_buffer_desc *descs, int64_t count);
/* Address of instance `instance` of buffer `buffer`. */
void *prt_ptr(prt *rt, int64_t buffer, int64_t instance);
int64_t prt_coord(prt *rt, int64_t axis);  /* this rank's coordinate on an axis, 0 if axis < 0 */
int64_t prt_steps(prt *rt);
/* The first step the loop runs: 1, or with --resume the checkpoint's step + 1
 * after its weights, fp32 master and optimizer moments have been loaded into this
 * rank's buffers from whichever rank files hold them (any layout of the same
 * model and training settings; prt_ckpt.c).  Called once after
 * prt_register_buffers. */
int64_t prt_first_step(prt *rt);
/* The learning rate of `step` (from 1) under the plan's schedule. */
double prt_lr(prt *rt, int64_t step);
/* The step's gradient clip factor, set by prt_clip_norm (1 before it runs). */
double prt_clip_scale(prt *rt);
/* Compares measured bytes per class with the compiler's ledger (bytes per class
 * for this rank).  With --memory prints both; weights, grads, master and optim
 * must match exactly, activations/comm/workspace must not exceed; a mismatch
 * is an error (exit status 3 from prt_finalize).  Checked at prt_finalize, against
 * the PEAK for activations/comm/workspace.  Measured = the table's tensor bytes
 * (elems x instances x dtype size; slices are 64-byte aligned, padding not
 * counted) plus the CPU runtime's own scratch, which the compiler must budget:
 *   PRT_COMM: one packing buffer of max(outer x S x inner x element size, rounded
 *     up to whole 4-byte floats) over the all-gathers/reduce-scatters/all-to-alls
 *     with outer > 1 and S > 1, and of n x element size over the allreduce_ends; and
 *     send slots holding the bytes (n x element size)
 *     of pipeline sends not yet completed (slots are reused, sends complete by
 *     prt_step_end), i.e. the peak bytes in flight, and one slot of the largest
 *     pipeline receive (the next receive is posted ahead of its op into it).
 *     The compiler budgets the packing buffer at 4 bytes per element (a bound
 *     for every dtype) and each send or receive slot at the message's own
 *     element size;
 *   PRT_WORKSPACE: one buffer of the largest of the ops' requests, in floats:
 *     the prt_scratch_* function of each op in prt_scratch.h, which both the
 *     CPU backend and the compiler's ledger call (0 for ops that have none).
 *     Collectives need no fp32 staging: 16-bit sums are an MPI_Op adding in fp32.
 * Each scratch buffer grows to exactly its largest request, so its peak is that. */
void prt_expect_memory(prt *rt, const int64_t *expected_bytes /* [PRT_NCLASS] */);
void prt_step_begin(prt *rt, int64_t step);
/* Called once per step after the gradient sync and before the optimizer (the
 * gradients of the step are final here); the PRT_DUMP_STEP gradient dump. */
void prt_before_optimizer(prt *rt, int64_t step);
/* Ends a step: sums the loss over the ranks that hold it, prints
 * `step N | loss L | lr X | tokens/s | ms` on global rank 0. */
void prt_step_end(prt *rt, int64_t step);
/* Evaluation (prt_data_desc.eval_*), called by every rank of the program
 * outside the training step's phases and time:
 *   n = prt_eval_begin(rt, step): the global batches of validation data to run
 *     forward after step `step` (0 = before training): eval_batches when the
 *     step is 0 on a fresh start, a multiple of eval_every or the run's last
 *     step, else 0.  Until prt_eval_end, prt_data reads validation samples and
 *     the cross-entropy loss counts to the validation loss, not the step's;
 *   prt_eval_batch(rt, e): batch e (0..n-1) follows: validation sample g of it
 *     is e × batch + first_sample + b of prt_data;
 *   prt_eval_end(rt, step): when n > 0, sums the validation loss over the ranks
 *     (mean over n × batch × seq tokens), prints `step N | val_loss V` on global
 *     rank 0 and puts it in the --log record of the step (step 0: a record of
 *     its own). */
int64_t prt_eval_begin(prt *rt, int64_t step);
void prt_eval_batch(prt *rt, int64_t batch);
void prt_eval_end(prt *rt, int64_t step);
/* Writes the trace, checks the ledger, finalises MPI.  Returns the exit status. */
int64_t prt_finalize(prt *rt);
/* A built program's exit status when training diverged: a step's loss or
 * gradient norm was not finite, and every rank stopped after that step,
 * before its checkpoint (1 is a user error, 2 bad data or options, 3 memory
 * that differs from the ledger, 128 + N a signal). */
#define PRT_EXIT_DIVERGED 4

/* Dumps for the parity tests (tests/parity/), read from the environment at
 * prt_init; none has any effect unless PRT_DUMP_DIR is set.
 *   PRT_DUMP_DIR=DIR   (created if missing) at prt_finalize every rank writes
 *                      DIR/params.rank<R>.bin: its WEIGHTS buffers, final values.
 *   PRT_DUMP_STEP=K    also, on step K:
 *                      init_params.rank<R>.bin  WEIGHTS at prt_step_begin(K), before
 *                                               the step changes them;
 *                      grads.rank<R>.bin        GRADS at prt_before_optimizer(K).  The
 *                        indices are global only where the gradient has its
 *                        parameter's layout (flags 0); a ZeRO-2 share is written with
 *                        local indices (flags 1).  Whether the values are the full
 *                        gradient depends on the layout (a pipeline or tensor-parallel
 *                        rank holds only its part, before any missing sync), so they are
 *                        only required to be meaningful for single-rank runs;
 *                      data.rank<R>.bin         every prt_data call of step K;
 *                      logits.rank<R>.bin       every prt_xent_fwd call of step K, in
 *                                               call order (the local vocab block).
 *   PRT_DUMP_DATA_ALL=1  data.rank<R>.bin holds the prt_data calls of every step.
 * Formats (little-endian; i64 = int64, f32 = float, i32 = int32):
 *   params / init_params / grads: "PRTPAR1\0", i64 rank, i64 step (-1: final), then
 *     one block per buffer instance: i64 name_len, name bytes (init_name, no NUL),
 *     i64 global layer (-1: not per-layer), i64 flags (0: global indices), i64 count,
 *     i64 index[count] (global flat element index, the initialiser's mapping of
 *     gdims/split_axis/zero_axis/layer_of; ZeRO padding is left out),
 *     f32 value[count] (bf16/f16 widened).
 *   data: "PRTDAT1\0", then per call: i64 step, i64 first_sample, i64 B, i64 T,
 *     i32 tokens[B*T], i32 targets[B*T] (both filled whatever the call stores).
 *     Step -1 is a validation batch (PRT_DUMP_DATA_ALL only); its first_sample
 *     is the global validation sample index.
 *   logits: "PRTLOG1\0", then per call: i64 step, i64 call (0, 1, ... in order),
 *     i64 N, i64 V_local, i64 vocab_offset, i64 axis, f32 logits[N*V_local]. */

/* ---------------------------------------------------------------- the calls of generated code

Every call generated code makes is one row of PRT_CALLS below; the row gives its
prototype, the signature string the compiler declares it from (PRT_OPS) and, for
ops and collectives, its slot in the runtime's backend interface.  What each call
does:

 data (host)
  prt_data(tokens, targets, step, first_sample, B, T, vocab, zz): tokens, targets
    [B, T] int32.  Sample g of step `step` (g = first_sample + b) is a pure
    function of (seed, step, g): synthetic learnable sequences, or a window of
    T + 1 tokens of the training file (targets = the window shifted by one);
    during evaluation the validation file's consecutive windows instead.  With
    zz > 0 each sample's rows are in the order of the load-balanced split over
    zz ranks (row t holds position prt_seq_pos_whole(t, T, zz)), so that
    rank r's contiguous chunk of T / zz rows is its two chunks of the whole.

 ops (backend; n elements of the buffer's dtype; copy converts when dtypes differ)
  zero(buf, n); copy(dst, src, n); acc(dst, src, n): dst += src, in fp32.
  embed_fwd(out, tokens, wte, N, C, vocab_local, vocab_offset): out[N,C] =
    wte[tok - vocab_offset] when that row is local, else 0 (Partial).
  embed_bwd(dwte, tokens, dout, N, C, vocab_local, vocab_offset).
  pos_fwd(out, in, wpe, B, T, C, t_offset, zz): out[B,T,C] = in + wpe[position of
    row t] (t_offset: first row held, for seq splits; the position is
    prt_seq_pos(t, T, t_offset, zz), prt_math.h: t_offset + t, or with zz > 0 the
    load-balanced split over zz ranks);  pos_bwd(dwpe, din, dout, ...).
  layernorm_fwd(out, mean, rstd, in, w, b, N, C, eps): over C, rstd = 1 / sqrt(variance
    + eps) in double; b may be NULL (no bias); mean, rstd: [N] saved.
    layernorm_bwd(din, dw, db, dout, in, w, mean, rstd, N, C).
  rmsnorm_fwd(out, rstd, in, w, N, C, eps): rstd = 1 / sqrt(mean square + eps);
    rmsnorm_bwd(din, dw, dout, in, w, rstd, N, C).
  matmul_fwd(out, in, w, N, K, M): out[N,M] = in[N,K] @ w[K,M] (BLAS).
    matmul_bwd(din, dw, dout, in, w, N, K, M): din[N,K] += dout @ w^T (din may be
    NULL); dw[K,M] += in^T @ dout.
  matmul_t_fwd / matmul_t_bwd: the transposed weight (a head tied to the
    embedding): out[N,M] = in[N,K] @ w[M,K]^T; din[N,K] += dout @ w (din may be
    NULL); dw[M,K] += dout^T @ in.
  matmul_bias_fwd(out, in, w, b, N, K, M): out[N,M] = in @ w + b[M] in one call
    (out starts as the broadcast bias row, the GEMM adds onto it: beta = 1).
    matmul_bias_bwd(din, dw, dout, in, w, db, N, K, M): matmul_bwd plus db +=
    column sums of dout.  A linear whose bias folds into it (ops.c).
  bias_fwd(out, in, b, N, M): out[N,M] = in + b[M] (out may equal in);
    bias_bwd(db, dout, N, M): db += column sums of dout.
  gelu_fwd(out, in, n) (tanh approximation, prt_math.h), gelu_bwd(din, in, dout, n);
    relu_fwd, relu_bwd likewise.
  swiglu_fwd(out, in, N, F): in[N,2,F]: gate = in[:,0,:], up = in[:,1,:];
    out[N,F] = silu(gate) * up.  swiglu_bwd(din, in, dout, N, F).
  attention_fwd(out, probs, qkv, B, T, NH, KV, HD, causal, Tq, q0):
    out[B,Tq,NH,HD], query rows q0 .. q0 + Tq - 1 of the T rows of
    qkv[B,T,3,NH,HD] when KV == NH, else (KV < NH, dividing it; G = NH / KV)
    the grouped qkv[B,T,KV,G+2,HD]: per key/value head g its G query heads,
    then k, then v; query head h reads q at (h / G, h % G), k at (h / G, G), v
    at (h / G, G + 1), nothing repeated.  Row q0 + i attends to keys 0 .. q0 + i
    when causal (Tq = T, q0 = 0: the whole sequence; Tq < T: context
    parallelism, the qkv gathered whole).  probs[B,NH,Tq,T] saved when not NULL.
    attention_bwd(dqkv, dout, qkv, probs, B, T, NH, KV, HD, causal, Tq, q0)
    (dout[B,Tq,NH,HD]; dqkv[B,T,...] in qkv's layout: dq of rows q0 .. only,
    dk and dv of every key those rows saw; a group's dk and dv sum over its G
    query heads) recomputes the probabilities when probs is NULL.  The CUDA
    runtime takes Tq = T, q0 = 0 only.
  rope_fwd(out, in, B, T, G, U, R, HD, t_offset, zz, theta, factor, low_freq_factor,
    high_freq_factor, original_max_positions): rotary position embedding of the
    q and k heads of a qkv tensor.  in[B,T,G,U,HD]: per row (sample b, row t)
    G groups of U heads of HD (even) dims, the first R heads of each group
    rotated, the others (v) copied.  The token at row t has position
    prt_seq_pos(t, T, t_offset, zz) (prt_math.h: t_offset + t, or the
    load-balanced split's with zz > 0; its index in the whole sequence, so a
    sequence split rotates as the whole does).  Head dims i and i + HD/2 form a pair (Hugging Face's rotate_half):
    out_i = x_i cos a - x_{i+HD/2} sin a, out_{i+HD/2} = x_{i+HD/2} cos a + x_i
    sin a, a = position x inv_freq(i) in fp32 (prt_rope_inv_freq, prt_math.h:
    1 / theta^(2i/HD), with factor > 0 Llama 3.1's scaling of it by factor,
    low_freq_factor, high_freq_factor and original_max_positions; factor 0: none),
    cos a and sin a in double, rounded to fp32.  A plain-attention qkv
    [B,T,3,NH,HD] is G = 1, U = 3NH, R = 2NH; a grouped one [B,T,KV,Q+2,HD] is
    G = KV, U = Q+2, R = Q+1.  out may equal in.  rope_bwd(din, dout, B, T, G,
    U, R, HD, t_offset, ...): din += the transpose (the rotation by -a; dout of
    the other heads as it is).
  dropout_fwd(out, mask, in, B, T, C, first_sample, t_offset, T_global, step,
    layer, site, p): out[B,T,C] = in * mask / (1 - p), mask[B,T,C] u8 (1 keep, 0
    drop) saved; element (b, t, c) is global element ((first_sample + b) *
    T_global + t_offset + t) * C + c of its [batch, seq, C] tensor, kept unless
    prt_dropout_keep (prt_math.h) of (seed, step, layer, site) and that index
    says drop: the same mask on every layout.  site 1 is attention's output
    branch, 2 the MLP's.  During an evaluation (prt_eval_begin .. prt_eval_end)
    nothing is dropped, here and in attention_dropout_*: out = in.  dropout_bwd(din, mask, dout, n, p): din += dout *
    mask / (1 - p).
  attention_dropout_fwd(out, probs, qkv, B, T, NH, KV, HD, causal, first_sample,
    h_offset, NH_global, step, layer, p) / attention_dropout_bwd(dqkv, dout, qkv,
    probs, B, T, NH, KV, HD, causal, first_sample, h_offset, NH_global, step, layer,
    p): attention_fwd / attention_bwd with dropout on the probabilities:
    out = (P * M / (1 - p)) V, where M keeps element (b, h, i, j) unless the
    dropout hash of (seed, step, layer, site 0) and index (((first_sample + b) *
    NH_global + h_offset + h) * T + i) * T + j says drop.  probs, when given,
    holds P before dropout; M is never stored: the backward regenerates it.
  seq_permute(dst, src, B, T, W, zz, inverse): rows of W elements of B
    sequences of T, the load-balanced split's order (prt_seq_pos_whole over zz
    ranks) and the sequence's: inverse 0 dst[b, position of row g] = src[b, g]
    (a gathered sequence into order); inverse 1 dst[b, g] += src[b, position of
    g] (its gradient back, added).  seq_halves(seq, half0, half1, B, h, C, join):
    join 1 seq[b, a h + i] = half_a[b, i] (two blocks of B x h rows of C into
    B sequences of 2h), join 0 the inverse (the halves written).
  ring_kv_pack(kv, qkv, B, T, NH, KV, HD): kv[B,T,2,KV,HD] = the k and v of
    every key/value head of qkv (attention_fwd's layouts), what ring attention
    passes around the context axis.  ring_kv_grad(dqkv, dkv, B, T, NH, KV, HD):
    dqkv's k and v columns += dkv.
  ring_attention_fwd(out, lse, qkv, kv, B, T, NH, KV, HD, causal, coord, step,
    P): one step of ring attention over a context axis of P ranks, this rank at
    coord holding query rows coord*T .. of the whole sequence (qkv[B,T,...] its
    chunk) and, at step s, kv = the packed k and v of the chunk of rank
    src = (coord - s) mod P (keys src*T ..).  Step 0 writes out[B,T,NH,HD]
    (normalised) and lse[B,NH,T] (fp32, the rows' logsumexp); balanced: the
    rank's rows and the chunk's keys are each two halves of the load-balanced
    split (prt_ring_kinds, prt_math.h, says which pairs of halves compute);
    each later step
    merges its block in (out = out e^(lse - new) + O_blk e^(lse_blk - new), lse =
    new = logaddexp(lse, lse_blk)).  Causal: a block from src > coord is masked
    whole (nothing computed), src == coord is the diagonal block.
    ring_attention_bwd(dqkv, dkv, dout, out, lse, qkv, kv, B, T, NH, KV, HD,
    causal, coord, step, P): the same step's gradients from the final out and
    lse: dq (dqkv's q columns) += and dkv[B,T,2,KV,HD] += (a group's dk and dv
    sum over its query heads).  P^T dO, dO V^T, dS = P (dP - rowsum(dO out)).
  add_fwd(out, a, b, n).
  xent_fwd(loss_sum, stats, logits, targets, N, V_local, vocab_offset, axis):
    softmax cross-entropy over logits[N,V_local] whose vocab is split over `axis`
    (vocab_offset = first local class; axis < 0: not split).  The max and the sum
    of exponentials are all-reduced over the axis (the vocab-parallel loss).
    stats[N,2] (max, log-sum-exp) saved; *loss_sum (one float) += sum over the N
    rows of -log p(target) (every rank of the axis gets the same value).  The same
    sum is also added to the loss of the current step that prt_step_end reports;
    only coordinate 0 of `axis` contributes it there, so a tensor-parallel group
    counts its loss once.
  xent_bwd(dlogits, logits, stats, targets, N, V_local, vocab_offset, scale):
    dlogits[N,V_local] += scale * (softmax - onehot(target)).
  moe_*: a mixture-of-experts layer of E experts, each token routed to topk of
    them (runtime/cpu/prt_cpu_moe.h states the math; docs/design.md, "Mixture of
    experts").  Indices, counts, offsets and rows are i32.  A layer is
      moe_router_fwd -> moe_permute_fwd -> moe_matmul_fwd (expert up, and for
      SwiGLU gate and up fused, w[E,H,2F]) -> swiglu_fwd or gelu_fwd over the
      T*topk rows -> moe_matmul_fwd (down) -> moe_combine_fwd,
    and the backward the reverse; with the experts split over an axis, the
    expert GEMMs sit between moe_rank_rows, alltoall (the counts), alltoallv,
    moe_regroup_fwd (to_expert 1) and moe_regroup_fwd (0), alltoallv back.
  moe_router_fwd(logits, index, weight, counts, losses, x, wr, T, H, E, topk,
    sigmoid, aux_coef, z_coef): logits[T,E] = x[T,H] @ wr[H,E] (saved); per
    token the topk experts of largest logit (ties: the lower expert), index[T,topk]
    in that order, their weights weight[T,topk] summing to 1 (softmax over the
    chosen logits; sigmoid != 0: the chosen sigmoids over their sum); counts[E]
    the tokens each expert got; losses[2] (may be NULL) = aux_coef x the
    load-balancing loss E sum_e f_e P_e and z_coef x the z-loss mean_t
    logsumexp(logits_t)^2.
  moe_router_loss(losses, logits, index, counts, T, E, topk, sigmoid, aux_coef,
    z_coef): moe_router_fwd's losses[2] from its saved logits and index with
    the counts[E] given (i32): with the tokens split over a context axis the
    counts summed over it, so a rank's losses are its tokens' shares of the
    sequence's (the caller scales the coefficients).
  moe_router_bwd(dx, dwr, dlogits, dweight, logits, index, counts, x, wr, T, H,
    E, topk, sigmoid, aux_coef, z_coef): dlogits[T,E] = the gradient of the
    weights (dweight[T,topk], may be NULL) plus those of both losses (written,
    not added: the op's own scratch, which the caller provides); then dx[T,H]
    += dlogits @ wr^T (dx may be NULL) and dwr += x^T @ dlogits.
  moe_permute_fwd(out, offsets, rows, in, index, T, H, E, topk): out[T*topk,H]
    holds in's rows sorted by expert, then token (stable); offsets[E+1] where
    each expert's rows begin; rows[T,topk] the row of (token, choice).
    moe_permute_bwd(din, dout, rows, T, H, topk): din[t] += sum_j dout[rows[t,j]].
  moe_matmul_fwd(out, in, w, offsets, E, K, M): the grouped GEMM, per expert e
    out[r] = in[r] @ w[e] (w[E,K,M]) for its rows r of offsets[e] ..
    offsets[e+1] - 1, one BLAS call each (no rows: no call); rows past
    offsets[E] are not touched.  moe_matmul_bwd(din, dw, dout, in, w, offsets,
    E, K, M): matmul_bwd per expert (din may be NULL).
  moe_rank_rows(send_rows, counts, S, E): expert parallelism over S ranks, E / S
    experts each (rank j holds experts j*E/S ..): send_rows[j] = the rows of a
    dispatch for rank j's experts, sum of counts over them (alltoallv's send
    counts; the permuted rows are in that order already).
  moe_regroup_fwd(out, offsets, in, counts, S, El, H, to_expert): what a rank of
    El experts receives from alltoallv is grouped by source rank, then expert:
    counts[S,El] (i32; the all-to-all of each source's counts of these
    experts) are the rows of block (s, e).  to_expert = 1 reorders in's rows
    to expert-major (e, s) order and writes offsets[El+1] (may be NULL), where
    each expert's rows begin, for moe_matmul; to_expert = 0 is the inverse,
    back to (s, e) order for the return alltoallv.  moe_regroup_bwd(din, dout,
    counts, S, El, H, to_expert): the gradient of that forward, din += dout
    reordered back.
  moe_counts(counts, E, layer): adds counts[E] (i32, a router's tokens per
    expert) to the step's per-expert load of layer `layer` (global); the
    metrics log's step record (--log) writes it as expert_tokens.  Outside an
    evaluation only, and by one rank of the last loss_replicas mask (the
    router's replicas), as moe_loss_add counts its losses.
  moe_loss_add(losses, scale): adds scale x (losses[0] + losses[1]) (moe_router_fwd's
    two losses, f32) to the loss of the current step that prt_step_end reports
    (which divides it by batch x seq: a caller passes that product to count the
    losses as they are).
  moe_combine_fwd(out, y, weight, rows, T, H, topk): out[t] = sum_j weight[t,j]
    y[rows[t,j]].  moe_combine_bwd(dy, dweight, dout, y, weight, rows, T, H,
    topk): dy[rows[t,j]] += weight[t,j] dout[t], dweight[t,j] += dout[t] .
    y[rows[t,j]] (either may be NULL).
  adamw(param, master, grad, m, v, n, step, lr, beta1, beta2, eps, weight_decay):
    AdamW on n elements: master (fp32) is updated when not NULL and copied to
    param (rounded to param's dtype: a bf16 param is the rounded master); else
    param is updated in place.  Arithmetic is fp32 whatever the storage.  step
    counts from 1.  Bias-corrected, decoupled decay: p -= lr * (mhat / (sqrt(vhat)
    + eps) + weight_decay * p) (torch.optim.AdamW).
  sgd(param, master, grad, mom, n, lr, momentum, weight_decay): torch.optim.SGD's:
    d = grad + weight_decay * p, mom = momentum * mom + d (mom may be NULL: no
    momentum), p -= lr * d.

 gradient clipping by global norm
  sumsq(acc, x, n, weight): *acc (one fp32 element) += weight * sum of x[i]^2 over
    n elements of x's dtype, summed in double; weight is 0 or 1 (a gradient
    replicated over some axes is counted by one rank of them).
  scale(x, n, factor): x[i] *= factor (nothing when factor == 1).
  clip_norm(acc, max_norm) (host): acc holds the sum of squares of every gradient
    element of the model once; sets the step's grad_norm = sqrt(*acc) and, when
    max_norm > 0, the clip factor min(1, max_norm / (grad_norm + 1e-6))
    (torch.nn.utils.clip_grad_norm_), which prt_clip_scale returns (1 when
    max_norm is 0: the norm is only logged), and zeroes *acc for the next step.

 loss bookkeeping (host)
  loss_replicas(axis_mask): the axes (bit a = axis a) over which the logits, and
    so the loss, are replicated: only the ranks at coordinate 0 of each count the
    step loss.

 communication (backend, dtype explicit there).  n, outer and inner count
 elements of the buffers' dtype (which must agree): 16-bit elements move as 2
 bytes; 16-bit sums add in fp32 and round to the dtype at every combination of
 two partial sums.
  allreduce(axis, buf, n): sum all-reduce in place over the group of `axis`.
  allreduce_ends(axis, buf, n): sum all-reduce in place between the first and
    the last coordinate of `axis` (a pipeline's embedding group: the table of a
    head tied to the embedding, held by both end stages); only those two ranks
    call it.  Both get the same bits (x0 + x1, rounded once in a 16-bit dtype).
  allgather(axis, out, in, outer, inner): in[outer, inner] from each of the S ranks
    of the axis -> out[outer, S, inner].  In place where outer == 1 and in is
    out + coord * inner (this rank's block already there: the pipeline's
    scatter/gather); in overlapping out any other way is an error.
  reducescatter(axis, out, in, outer, inner): in[outer, S, inner] summed over the
    axis; out[outer, inner] = this rank's block.
  alltoall(axis, out, in, outer, inner): in[outer, S, inner] -> out[S, outer,
    inner]: block j goes to rank j, arriving blocks are placed by source rank (the
    resharding Split(d) -> Split(e)).
  alltoallv(axis, out, in, send_rows, recv_rows, out_rows, inner): rows of inner
    elements, a variable number per peer (expert parallelism's dispatch and
    combine): in holds send_rows[j] rows for rank j of the axis, blocks in rank
    order; the ranks first exchange their counts (recv_rows[S], written: the
    rows from each rank), then out gets the blocks by source rank, packed; at
    most out_rows rows arrive (more is an error).  send_rows, recv_rows: i32
    [S]; out and in one dtype.
  slice(axis, out, in, outer, inner): local slice, no communication:
    out[outer, inner] = in[outer, coord, inner].
  send(axis, delta, buf, n, tag) / recv(axis, delta, buf, n, tag): pipeline
    messages to/from the rank at coord + delta (mod size) on `axis`.  Sends are
    buffered (the call returns once the data is copied); receives block until
    the message is there (the runtime posts each training step's next receive
    ahead of its call, into a slot of its own, in the order of the step before).
    tag identifies (direction, micro-batch, chunk).
  shift_start(axis, out, in, n): n elements of in to the rank at coord + 1 (mod
    size) of the axis, out from the rank at coord - 1, started like the ones
    below (comm_wait(out) completes it; in is not written meanwhile): a step of
    ring attention's K/V (and their gradients') pass around a context axis.
  allreduce_start(axis, buf, n) / reducescatter_start(axis, out, in, outer, inner):
    allreduce / reducescatter started, not finished: they return at once and the
    result is there after comm_wait(buf) (comm_wait(out)); until then nothing may
    read or write the buffers.  The runtime advances them between ops (see
    prt_comm_progress).  A reducescatter_start of outer > 1 blocks sends from
    the runtime's one communication stage, packed [S, outer, inner], until its
    comm_wait: no collective that packs (an allgather, reducescatter or
    alltoall of outer > 1) may run before that wait (the compiler's
    overlap_tp_verify).
  allgather_start(axis, out, in, outer, inner): allgather started likewise,
    outer == 1; comm_wait(out) completes it (ZeRO-3's weights gathered for
    the next layer while this one computes).
  comm_wait(buf) (host): completes the collective started on buf (exactly one
    is in flight on it); a step must wait for every collective it started.

 trace (host)
  span_begin(name) / span_end(): a trace span around generated code regions (no-op
    without --trace).  The name is kept by pointer until prt_finalize: pass a
    string constant.
  work_begin(kind, micro, chunk, chunks) / work_end(): the forward (kind 0) or
    backward (kind 1) of micro-batch `micro` through chunk `chunk` of this
    stage (of `chunks` it holds), one item of the stage's schedule table, from
    after its input arrived until its output is sent; a trace span "F mb3" (with
    " chunk1" when chunks > 1) above the item's op spans (no-op without --trace).

 phases (host)
  phase(phase): what follows, until the next call, is of phase `phase` (enum
    prt_phase); every sequence of the program starts with it.  The runtime
    times each phase per step (collectives and pipeline messages apart) and at
    prt_finalize rank 0 prints them beside the plan's est_phase_seconds; the
    metrics log (--log) holds them per step and, in its summary, the estimate.

PRT_CALLS(R, X) calls R(X, kind, name, sig, params, args) per row: kind is OP (a
backend op), COMM (a backend collective) or HOST (the runtime's own code); sig is
over {p pointer, i int64_t, d double, t the dtypes word}, the first p the prt
context; params the parenthesised parameter list, args the parenthesised argument
names.  ORDER: the compiler's runtime function table follows PRT_OPS.

The dtypes word.  Every OP and COMM row ends with `int64_t dtypes` (sig 't'): the
enum prt_dtype of each pointer argument after rt, 4 bits each in argument order
(argument k in bits 4k..4k+3; a NULL argument's nibble is ignored).  PRT_F32 is 0,
so a call whose pointers are all fp32 passes 0; the compiler fills the word from
the IR's buffer dtypes, hand-written calls build it with PRT_ARG_DTYPES.  The
backends read their tensors' dtypes from it (prt_arg_dtype), not from the address.
The runtime checks each declared dtype against the registered buffer the pointer
falls in (memory it did not allocate is taken as declared) during the first step
and the first evaluation of a run, and on every call when PRT_CHECK_DTYPES=1 is
in the environment; a disagreement stops the run with the op, the argument, the
buffer and both dtypes.  A collective's pointers must all have one dtype, its
elements' (but alltoallv's row counts, which are i32).  The nibble's top bit,
PRT_ARG_WRITE, on an op's output gradient says the op is its first writer: it
writes the argument instead of adding into it (the compiler sets it where the
zero before would have been the only
content, first_write.c; prt_word_writes reads it).  Ops that take it: acc's dst
(then a copy), the din of gelu_bwd, relu_bwd, swiglu_bwd, matmul_bwd,
matmul_t_bwd, matmul_bias_bwd, layernorm_bwd, rmsnorm_bwd, rope_bwd, dropout_bwd
(0 where dropped) and pos_bwd (then a copy of dout), xent_bwd's dlogits, the
dqkv of attention_bwd and attention_dropout_bwd, the dx of moe_router_bwd, the
din of moe_permute_bwd, the din of moe_matmul_bwd (the rows of offsets[0] ..
offsets[E] - 1), the dy (the rows rows[] names) and dweight of
moe_combine_bwd, and the din of moe_regroup_bwd; and weight gradients: the dw of
matmul_bwd, matmul_t_bwd and matmul_bias_bwd, matmul_bias_bwd's db, and the dw
and db of layernorm_bwd and rmsnorm_bwd's dw (the sums over the call's rows
written, not added: the compiler sets these where a step runs one backward
through the weight, first_write.c). */

#define PRT_ARG_WRITE 8

/* The dtype of pointer argument `index` (0 = the first after rt) in a word. */
static inline int64_t prt_word_dtype(int64_t dtypes, int index) { return (dtypes >> (4 * index)) & 7; }
/* 1 when pointer argument `index` is written, not accumulated into (PRT_ARG_WRITE). */
static inline int prt_word_writes(int64_t dtypes, int index) { return (int)((dtypes >> (4 * index + 3)) & 1); }
/* The word of the dtypes given, in pointer-argument order:
 *   prt_matmul_fwd(rt, out, in, w, N, K, M, PRT_ARG_DTYPES(PRT_BF16, PRT_BF16, PRT_F32)). */
static inline int64_t prt_arg_dtypes_(const int64_t *dtypes, int n) {
    int64_t word = 0;
    for (int i = 0; i < n && i < 16; i++) word |= (dtypes[i] & 15) << (4 * i);
    return word;
}
#define PRT_ARG_DTYPES(...)                                         \
    prt_arg_dtypes_((const int64_t[]){__VA_ARGS__},                 \
                    (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* Every pointer argument of the call in one dtype: the word of n of them. */
static inline int64_t prt_same_dtypes(int64_t dtype, int n) {
    int64_t word = 0;
    for (int i = 0; i < n && i < 16; i++) word |= (dtype & 15) << (4 * i);
    return word;
}
#define PRT_CALLS(R, X)                                                                                           \
    R(X, OP, zero, "ppit", (prt *rt, void *buf, int64_t n, int64_t dtypes), (rt, buf, n, dtypes))                 \
    R(X, OP, copy, "pppit", (prt *rt, void *dst, const void *src, int64_t n, int64_t dtypes),                     \
      (rt, dst, src, n, dtypes))                                                                                  \
    R(X, OP, acc, "pppit", (prt *rt, void *dst, const void *src, int64_t n, int64_t dtypes),                      \
      (rt, dst, src, n, dtypes))                                                                                  \
    R(X, HOST, data, "pppiiiiii",                                                                                 \
      (prt *rt, void *tokens, void *targets, int64_t step, int64_t first_sample, int64_t B, int64_t T,            \
       int64_t vocab, int64_t zz),                                                                                \
      (rt, tokens, targets, step, first_sample, B, T, vocab, zz))                                                 \
    R(X, OP, embed_fwd, "ppppiiiit", (prt *rt, void *out, const void *tokens, const void *wte, int64_t N,         \
      int64_t C, int64_t vocab_local, int64_t vocab_offset, int64_t dtypes),                                      \
      (rt, out, tokens, wte, N, C, vocab_local, vocab_offset, dtypes))                                            \
    R(X, OP, embed_bwd, "ppppiiiit", (prt *rt, void *dwte, const void *tokens, const void *dout, int64_t N,       \
      int64_t C, int64_t vocab_local, int64_t vocab_offset, int64_t dtypes),                                      \
      (rt, dwte, tokens, dout, N, C, vocab_local, vocab_offset, dtypes))                                          \
    R(X, OP, pos_fwd, "ppppiiiiit", (prt *rt, void *out, const void *in, const void *wpe, int64_t B, int64_t T,   \
      int64_t C, int64_t t_offset, int64_t zz, int64_t dtypes),                                                   \
      (rt, out, in, wpe, B, T, C, t_offset, zz, dtypes))                                                          \
    R(X, OP, pos_bwd, "ppppiiiiit", (prt *rt, void *dwpe, void *din, const void *dout, int64_t B, int64_t T,      \
      int64_t C, int64_t t_offset, int64_t zz, int64_t dtypes),                                                   \
      (rt, dwpe, din, dout, B, T, C, t_offset, zz, dtypes))                                                       \
    R(X, OP, layernorm_fwd, "pppppppiidt", (prt *rt, void *out, void *mean, void *rstd, const void *in,           \
      const void *w, const void *b, int64_t N, int64_t C, double eps, int64_t dtypes),                            \
      (rt, out, mean, rstd, in, w, b, N, C, eps, dtypes))                                                         \
    R(X, OP, layernorm_bwd, "pppppppppiit", (prt *rt, void *din, void *dw, void *db, const void *dout,            \
      const void *in, const void *w, const void *mean, const void *rstd, int64_t N, int64_t C, int64_t dtypes),   \
      (rt, din, dw, db, dout, in, w, mean, rstd, N, C, dtypes))                                                   \
    R(X, OP, rmsnorm_fwd, "pppppiidt", (prt *rt, void *out, void *rstd, const void *in, const void *w, int64_t N, \
      int64_t C, double eps, int64_t dtypes),                                                                     \
      (rt, out, rstd, in, w, N, C, eps, dtypes))                                                                  \
    R(X, OP, rmsnorm_bwd, "pppppppiit", (prt *rt, void *din, void *dw, const void *dout, const void *in,          \
      const void *w, const void *rstd, int64_t N, int64_t C, int64_t dtypes),                                     \
      (rt, din, dw, dout, in, w, rstd, N, C, dtypes))                                                             \
    R(X, OP, matmul_fwd, "ppppiiit", (prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K,    \
      int64_t M, int64_t dtypes),                                                                                 \
      (rt, out, in, w, N, K, M, dtypes))                                                                          \
    R(X, OP, matmul_bwd, "ppppppiiit", (prt *rt, void *din, void *dw, const void *dout, const void *in,           \
      const void *w, int64_t N, int64_t K, int64_t M, int64_t dtypes),                                            \
      (rt, din, dw, dout, in, w, N, K, M, dtypes))                                                                \
    R(X, OP, matmul_t_fwd, "ppppiiit", (prt *rt, void *out, const void *in, const void *w, int64_t N, int64_t K,  \
      int64_t M, int64_t dtypes),                                                                                 \
      (rt, out, in, w, N, K, M, dtypes))                                                                          \
    R(X, OP, matmul_t_bwd, "ppppppiiit", (prt *rt, void *din, void *dw, const void *dout, const void *in,         \
      const void *w, int64_t N, int64_t K, int64_t M, int64_t dtypes),                                            \
      (rt, din, dw, dout, in, w, N, K, M, dtypes))                                                                \
    R(X, OP, matmul_bias_fwd, "pppppiiit", (prt *rt, void *out, const void *in, const void *w, const void *b,     \
      int64_t N, int64_t K, int64_t M, int64_t dtypes),                                                           \
      (rt, out, in, w, b, N, K, M, dtypes))                                                                       \
    R(X, OP, matmul_bias_bwd, "pppppppiiit", (prt *rt, void *din, void *dw, const void *dout, const void *in,     \
      const void *w, void *db, int64_t N, int64_t K, int64_t M, int64_t dtypes),                                  \
      (rt, din, dw, dout, in, w, db, N, K, M, dtypes))                                                            \
    R(X, OP, bias_fwd, "ppppiit", (prt *rt, void *out, const void *in, const void *b, int64_t N, int64_t M,       \
      int64_t dtypes),                                                                                            \
      (rt, out, in, b, N, M, dtypes))                                                                             \
    R(X, OP, bias_bwd, "pppiit", (prt *rt, void *db, const void *dout, int64_t N, int64_t M, int64_t dtypes),     \
      (rt, db, dout, N, M, dtypes))                                                                               \
    R(X, OP, gelu_fwd, "pppit", (prt *rt, void *out, const void *in, int64_t n, int64_t dtypes),                  \
      (rt, out, in, n, dtypes))                                                                                   \
    R(X, OP, gelu_bwd, "ppppit", (prt *rt, void *din, const void *in, const void *dout, int64_t n,                \
      int64_t dtypes),                                                                                            \
      (rt, din, in, dout, n, dtypes))                                                                             \
    R(X, OP, relu_fwd, "pppit", (prt *rt, void *out, const void *in, int64_t n, int64_t dtypes),                  \
      (rt, out, in, n, dtypes))                                                                                   \
    R(X, OP, relu_bwd, "ppppit", (prt *rt, void *din, const void *in, const void *dout, int64_t n,                \
      int64_t dtypes),                                                                                            \
      (rt, din, in, dout, n, dtypes))                                                                             \
    R(X, OP, swiglu_fwd, "pppiit", (prt *rt, void *out, const void *in, int64_t N, int64_t F, int64_t dtypes),    \
      (rt, out, in, N, F, dtypes))                                                                                \
    R(X, OP, swiglu_bwd, "ppppiit", (prt *rt, void *din, const void *in, const void *dout, int64_t N, int64_t F,  \
      int64_t dtypes),                                                                                            \
      (rt, din, in, dout, N, F, dtypes))                                                                          \
    R(X, OP, attention_fwd, "ppppiiiiiiiit", (prt *rt, void *out, void *probs, const void *qkv, int64_t B,        \
      int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t Tq, int64_t q0, int64_t dtypes),     \
      (rt, out, probs, qkv, B, T, NH, KV, HD, causal, Tq, q0, dtypes))                                            \
    R(X, OP, attention_bwd, "pppppiiiiiiiit", (prt *rt, void *dqkv, const void *dout, const void *qkv,            \
      const void *probs, int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t Tq,    \
      int64_t q0, int64_t dtypes),                                                                                \
      (rt, dqkv, dout, qkv, probs, B, T, NH, KV, HD, causal, Tq, q0, dtypes))                                     \
    R(X, OP, ring_kv_pack, "pppiiiiit", (prt *rt, void *kv, const void *qkv, int64_t B, int64_t T, int64_t NH,   \
      int64_t KV, int64_t HD, int64_t dtypes),                                                                    \
      (rt, kv, qkv, B, T, NH, KV, HD, dtypes))                                                                    \
    R(X, OP, ring_kv_grad, "pppiiiiit", (prt *rt, void *dqkv, const void *dkv, int64_t B, int64_t T, int64_t NH,  \
      int64_t KV, int64_t HD, int64_t dtypes),                                                                    \
      (rt, dqkv, dkv, B, T, NH, KV, HD, dtypes))                                                                  \
    R(X, OP, seq_permute, "pppiiiiit", (prt *rt, void *dst, const void *src, int64_t B, int64_t T, int64_t W,      \
      int64_t zz, int64_t inverse, int64_t dtypes),                                                               \
      (rt, dst, src, B, T, W, zz, inverse, dtypes))                                                               \
    R(X, OP, seq_halves, "ppppiiiit", (prt *rt, void *seq, void *half0, void *half1, int64_t B, int64_t h,         \
      int64_t C, int64_t join, int64_t dtypes),                                                                   \
      (rt, seq, half0, half1, B, h, C, join, dtypes))                                                             \
    R(X, OP, ring_attention_fwd, "pppppiiiiiiiiiit", (prt *rt, void *out, void *lse, const void *qkv,           \
      const void *kv, int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t coord,    \
      int64_t step, int64_t P, int64_t balanced, int64_t dtypes),                                                 \
      (rt, out, lse, qkv, kv, B, T, NH, KV, HD, causal, coord, step, P, balanced, dtypes))                        \
    R(X, OP, ring_attention_bwd, "ppppppppiiiiiiiiiit", (prt *rt, void *dqkv, void *dkv, const void *dout,      \
      const void *out, const void *lse, const void *qkv, const void *kv, int64_t B, int64_t T, int64_t NH,       \
      int64_t KV, int64_t HD, int64_t causal, int64_t coord, int64_t step, int64_t P, int64_t balanced,          \
      int64_t dtypes),                                                                                            \
      (rt, dqkv, dkv, dout, out, lse, qkv, kv, B, T, NH, KV, HD, causal, coord, step, P, balanced, dtypes))       \
    R(X, OP, rope_fwd, "pppiiiiiiiiddddit", (prt *rt, void *out, const void *in, int64_t B, int64_t T,             \
      int64_t G, int64_t U, int64_t R, int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor,     \
      double low_freq_factor, double high_freq_factor, int64_t original_max_positions, int64_t dtypes),           \
      (rt, out, in, B, T, G, U, R, HD, t_offset, zz, theta, factor, low_freq_factor, high_freq_factor,            \
      original_max_positions, dtypes))                                                                            \
    R(X, OP, rope_bwd, "pppiiiiiiiiddddit", (prt *rt, void *din, const void *dout, int64_t B, int64_t T,           \
      int64_t G, int64_t U, int64_t R, int64_t HD, int64_t t_offset, int64_t zz, double theta, double factor,     \
      double low_freq_factor, double high_freq_factor, int64_t original_max_positions, int64_t dtypes),           \
      (rt, din, dout, B, T, G, U, R, HD, t_offset, zz, theta, factor, low_freq_factor, high_freq_factor,          \
      original_max_positions, dtypes))                                                                            \
    R(X, OP, dropout_fwd, "ppppiiiiiiiiidt", (prt *rt, void *out, void *mask, const void *in, int64_t B,          \
      int64_t T, int64_t C, int64_t first_sample, int64_t t_offset, int64_t T_global, int64_t step,               \
      int64_t layer, int64_t site, double p, int64_t dtypes),                                                     \
      (rt, out, mask, in, B, T, C, first_sample, t_offset, T_global, step, layer, site, p, dtypes))               \
    R(X, OP, dropout_bwd, "ppppidt", (prt *rt, void *din, const void *mask, const void *dout, int64_t n,          \
      double p, int64_t dtypes),                                                                                  \
      (rt, din, mask, dout, n, p, dtypes))                                                                        \
    R(X, OP, attention_dropout_fwd, "ppppiiiiiiiiiiidt", (prt *rt, void *out, void *probs, const void *qkv,       \
      int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD, int64_t causal, int64_t first_sample,             \
      int64_t h_offset, int64_t NH_global, int64_t step, int64_t layer, double p, int64_t dtypes),                \
      (rt, out, probs, qkv, B, T, NH, KV, HD, causal, first_sample, h_offset, NH_global, step, layer, p,          \
      dtypes))                                                                                                    \
    R(X, OP, attention_dropout_bwd, "pppppiiiiiiiiiiidt", (prt *rt, void *dqkv, const void *dout,                 \
      const void *qkv, const void *probs, int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HD,               \
      int64_t causal, int64_t first_sample, int64_t h_offset, int64_t NH_global, int64_t step, int64_t layer,     \
      double p, int64_t dtypes),                                                                                  \
      (rt, dqkv, dout, qkv, probs, B, T, NH, KV, HD, causal, first_sample, h_offset, NH_global, step, layer, p,   \
      dtypes))                                                                                                    \
    R(X, OP, moe_router_fwd, "ppppppppiiiiiddt", (prt *rt, void *logits, void *index, void *weight, void *counts, \
      void *losses, const void *x, const void *wr, int64_t T, int64_t H, int64_t E, int64_t topk,                 \
      int64_t sigmoid, double aux_coef, double z_coef, int64_t dtypes),                                           \
      (rt, logits, index, weight, counts, losses, x, wr, T, H, E, topk, sigmoid, aux_coef, z_coef, dtypes))       \
    R(X, OP, moe_router_loss, "pppppiiiiddt", (prt *rt, void *losses, const void *logits, const void *index,      \
      const void *counts, int64_t T, int64_t E, int64_t topk, int64_t sigmoid, double aux_coef, double z_coef,    \
      int64_t dtypes),                                                                                            \
      (rt, losses, logits, index, counts, T, E, topk, sigmoid, aux_coef, z_coef, dtypes))                         \
    R(X, OP, moe_router_bwd, "ppppppppppiiiiiddt", (prt *rt, void *dx, void *dwr, void *dlogits,                  \
      const void *dweight, const void *logits, const void *index, const void *counts, const void *x,              \
      const void *wr, int64_t T, int64_t H, int64_t E, int64_t topk, int64_t sigmoid, double aux_coef,            \
      double z_coef, int64_t dtypes),                                                                             \
      (rt, dx, dwr, dlogits, dweight, logits, index, counts, x, wr, T, H, E, topk, sigmoid, aux_coef, z_coef,     \
      dtypes))                                                                                                    \
    R(X, OP, moe_permute_fwd, "ppppppiiiit", (prt *rt, void *out, void *offsets, void *rows, const void *in,      \
      const void *index, int64_t T, int64_t H, int64_t E, int64_t topk, int64_t dtypes),                          \
      (rt, out, offsets, rows, in, index, T, H, E, topk, dtypes))                                                 \
    R(X, OP, moe_permute_bwd, "ppppiiit", (prt *rt, void *din, const void *dout, const void *rows, int64_t T,     \
      int64_t H, int64_t topk, int64_t dtypes),                                                                   \
      (rt, din, dout, rows, T, H, topk, dtypes))                                                                  \
    R(X, OP, moe_matmul_fwd, "pppppiiit", (prt *rt, void *out, const void *in, const void *w,                     \
      const void *offsets, int64_t E, int64_t K, int64_t M, int64_t dtypes),                                      \
      (rt, out, in, w, offsets, E, K, M, dtypes))                                                                 \
    R(X, OP, moe_matmul_bwd, "pppppppiiit", (prt *rt, void *din, void *dw, const void *dout, const void *in,      \
      const void *w, const void *offsets, int64_t E, int64_t K, int64_t M, int64_t dtypes),                       \
      (rt, din, dw, dout, in, w, offsets, E, K, M, dtypes))                                                       \
    R(X, OP, moe_combine_fwd, "pppppiiit", (prt *rt, void *out, const void *y, const void *weight,                \
      const void *rows, int64_t T, int64_t H, int64_t topk, int64_t dtypes),                                      \
      (rt, out, y, weight, rows, T, H, topk, dtypes))                                                             \
    R(X, OP, moe_combine_bwd, "pppppppiiit", (prt *rt, void *dy, void *dweight, const void *dout, const void *y,  \
      const void *weight, const void *rows, int64_t T, int64_t H, int64_t topk, int64_t dtypes),                  \
      (rt, dy, dweight, dout, y, weight, rows, T, H, topk, dtypes))                                               \
    R(X, OP, moe_rank_rows, "pppiit", (prt *rt, void *send_rows, const void *counts, int64_t S, int64_t E,        \
      int64_t dtypes),                                                                                            \
      (rt, send_rows, counts, S, E, dtypes))                                                                      \
    R(X, OP, moe_regroup_fwd, "pppppiiiit", (prt *rt, void *out, void *offsets, const void *in,                   \
      const void *counts, int64_t S, int64_t El, int64_t H, int64_t to_expert, int64_t dtypes),                   \
      (rt, out, offsets, in, counts, S, El, H, to_expert, dtypes))                                                \
    R(X, OP, moe_regroup_bwd, "ppppiiiit", (prt *rt, void *din, const void *dout, const void *counts, int64_t S,  \
      int64_t El, int64_t H, int64_t to_expert, int64_t dtypes),                                                  \
      (rt, din, dout, counts, S, El, H, to_expert, dtypes))                                                       \
    R(X, OP, moe_counts, "ppiit", (prt *rt, const void *counts, int64_t E, int64_t layer, int64_t dtypes),       \
      (rt, counts, E, layer, dtypes))                                                                             \
    R(X, OP, moe_loss_add, "ppdt", (prt *rt, const void *losses, double scale, int64_t dtypes),                  \
      (rt, losses, scale, dtypes))                                                                                \
    R(X, OP, add_fwd, "ppppit", (prt *rt, void *out, const void *a, const void *b, int64_t n, int64_t dtypes),    \
      (rt, out, a, b, n, dtypes))                                                                                 \
    R(X, OP, xent_fwd, "pppppiiiit", (prt *rt, void *loss_sum, void *stats, const void *logits,                   \
      const void *targets, int64_t N, int64_t V_local, int64_t vocab_offset, int64_t axis, int64_t dtypes),       \
      (rt, loss_sum, stats, logits, targets, N, V_local, vocab_offset, axis, dtypes))                             \
    R(X, OP, xent_bwd, "pppppiiidt", (prt *rt, void *dlogits, const void *logits, const void *stats,              \
      const void *targets, int64_t N, int64_t V_local, int64_t vocab_offset, double scale, int64_t dtypes),       \
      (rt, dlogits, logits, stats, targets, N, V_local, vocab_offset, scale, dtypes))                             \
    R(X, HOST, loss_replicas, "pi", (prt *rt, int64_t axis_mask), (rt, axis_mask))                                \
    R(X, COMM, allreduce, "pipit", (prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtypes),                 \
      (rt, axis, buf, n, dtypes))                                                                                 \
    R(X, COMM, allreduce_ends, "pipit", (prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtypes),            \
      (rt, axis, buf, n, dtypes))                                                                                 \
    R(X, COMM, allgather, "pippiit", (prt *rt, int64_t axis, void *out, const void *in, int64_t outer,            \
      int64_t inner, int64_t dtypes),                                                                             \
      (rt, axis, out, in, outer, inner, dtypes))                                                                  \
    R(X, COMM, reducescatter, "pippiit", (prt *rt, int64_t axis, void *out, const void *in, int64_t outer,        \
      int64_t inner, int64_t dtypes),                                                                             \
      (rt, axis, out, in, outer, inner, dtypes))                                                                  \
    R(X, COMM, alltoall, "pippiit", (prt *rt, int64_t axis, void *out, const void *in, int64_t outer,             \
      int64_t inner, int64_t dtypes),                                                                             \
      (rt, axis, out, in, outer, inner, dtypes))                                                                  \
    R(X, COMM, alltoallv, "pippppiit", (prt *rt, int64_t axis, void *out, const void *in, const void *send_rows,  \
      void *recv_rows, int64_t out_rows, int64_t inner, int64_t dtypes),                                          \
      (rt, axis, out, in, send_rows, recv_rows, out_rows, inner, dtypes))                                         \
    R(X, COMM, slice, "pippiit", (prt *rt, int64_t axis, void *out, const void *in, int64_t outer,                \
      int64_t inner, int64_t dtypes),                                                                             \
      (rt, axis, out, in, outer, inner, dtypes))                                                                  \
    R(X, COMM, send, "piipiit", (prt *rt, int64_t axis, int64_t delta, const void *buf, int64_t n, int64_t tag,   \
      int64_t dtypes),                                                                                            \
      (rt, axis, delta, buf, n, tag, dtypes))                                                                     \
    R(X, COMM, recv, "piipiit", (prt *rt, int64_t axis, int64_t delta, void *buf, int64_t n, int64_t tag,         \
      int64_t dtypes),                                                                                            \
      (rt, axis, delta, buf, n, tag, dtypes))                                                                     \
    R(X, COMM, shift_start, "pippit", (prt *rt, int64_t axis, void *out, const void *in, int64_t n,               \
      int64_t dtypes),                                                                                            \
      (rt, axis, out, in, n, dtypes))                                                                             \
    R(X, COMM, allreduce_start, "pipit", (prt *rt, int64_t axis, void *buf, int64_t n, int64_t dtypes),           \
      (rt, axis, buf, n, dtypes))                                                                                 \
    R(X, COMM, reducescatter_start, "pippiit", (prt *rt, int64_t axis, void *out, const void *in, int64_t outer,  \
      int64_t inner, int64_t dtypes),                                                                             \
      (rt, axis, out, in, outer, inner, dtypes))                                                                  \
    R(X, COMM, allgather_start, "pippiit", (prt *rt, int64_t axis, void *out, const void *in, int64_t outer,      \
      int64_t inner, int64_t dtypes),                                                                             \
      (rt, axis, out, in, outer, inner, dtypes))                                                                  \
    R(X, HOST, comm_wait, "pp", (prt *rt, void *buf), (rt, buf))                                                  \
    R(X, OP, adamw, "ppppppiidddddt", (prt *rt, void *param, void *master, const void *grad, void *m, void *v,    \
      int64_t n, int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay,            \
      int64_t dtypes),                                                                                            \
      (rt, param, master, grad, m, v, n, step, lr, beta1, beta2, eps, weight_decay, dtypes))                      \
    R(X, OP, sgd, "pppppidddt", (prt *rt, void *param, void *master, const void *grad, void *mom, int64_t n,      \
      double lr, double momentum, double weight_decay, int64_t dtypes),                                           \
      (rt, param, master, grad, mom, n, lr, momentum, weight_decay, dtypes))                                      \
    R(X, HOST, span_begin, "pp", (prt *rt, const char *name), (rt, name))                                         \
    R(X, HOST, span_end, "p", (prt *rt), (rt))                                                                    \
    R(X, HOST, work_begin, "piiii", (prt *rt, int64_t kind, int64_t micro, int64_t chunk, int64_t chunks),        \
      (rt, kind, micro, chunk, chunks))                                                                           \
    R(X, HOST, work_end, "p", (prt *rt), (rt))                                                                    \
    R(X, HOST, phase, "pi", (prt *rt, int64_t phase), (rt, phase))                                                \
    R(X, OP, sumsq, "pppidt", (prt *rt, void *acc, const void *x, int64_t n, double weight, int64_t dtypes),      \
      (rt, acc, x, n, weight, dtypes))                                                                            \
    R(X, OP, scale, "ppidt", (prt *rt, void *x, int64_t n, double factor, int64_t dtypes),                        \
      (rt, x, n, factor, dtypes))                                                                                 \
    R(X, HOST, clip_norm, "ppd", (prt *rt, void *acc, double max_norm), (rt, acc, max_norm))

/* The prototypes: void prt_<name> params. */
#define PRT_CALL_PROTOTYPE_(X, kind, name, sig, params, args) void prt_##name params;
PRT_CALLS(PRT_CALL_PROTOTYPE_, _)
#undef PRT_CALL_PROTOTYPE_

/* The signature table the compiler declares calls from: X(prt_<name>, sig) per
 * row of PRT_CALLS, in its order. */
#define PRT_OPS_ROW_(X, kind, name, sig, params, args) X(prt_##name, sig)
#define PRT_OPS(X) PRT_CALLS(PRT_OPS_ROW_, X)

#ifdef __cplusplus
}
#endif
#endif
