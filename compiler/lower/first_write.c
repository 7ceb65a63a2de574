/*
 * first_write.c — lowering pass: gradient buffers written by their first writer.
 *
 * autodiff.c zeroes the gradients of a region's activations before its
 * backward, and every op's backward then adds into them.  Where the first
 * instruction of the sequence after such a zero that touches the zeroed memory
 * writes all of it — the input gradient of a GEMM, an activation, a norm,
 * dropout, attention, the learned or rotary position embedding or the
 * cross-entropy, or an acc onto it (the rules below) — adding onto zeros is
 * writing: the op's instruction gets the `writes` bit of that argument
 * (codegen passes it as PRT_ARG_WRITE in the call's dtypes word, parc_rt.h;
 * an acc with it is a copy), and the zero goes.
 *
 * first_write_step does the same across a step whose stage runs one
 * micro-batch: the weight gradients zeroed at the step's start (zero_grads.*)
 * and first touched in the backward by a GEMM's or a norm's weight gradient
 * (written whole: the products or sums over the call's rows) lose their zero
 * the same way, since that backward runs once a step per layer.
 *
 * Takes a backward sequence as autodiff_backward leaves it.  Guarantees, and
 * first_write_verify proves: an instruction's `writes` bit k names a rule of
 * its function, argument k is a buffer no other argument of the call overlaps,
 * the call writes no more elements than the buffer holds, and no earlier
 * instruction of the sequence touches that memory.
 */
#include "lower.h"

/* The arguments an op can write instead of accumulating: argument `arg` of
 * function `fn`, elements = `times` x the product of its integer arguments
 * `dims` (argument 0 is always a buffer, so a 0 ends the list). */
typedef struct WriteRule {
    RtFn fn;
    int arg;
    int dims[5];  /* -1 (or 0, never a dimension): unused */
    int times;    /* a constant factor; 0: 1; QKV: dims are B, T, NH, KV, HD of a qkv: B T (NH + 2 KV) HD */
} WriteRule;

#define QKV (-1)

static const WriteRule write_rules[] = {
    {RT_prt_acc, 0, {2, -1}, 1},                /* dst[n]: a copy */
    {RT_prt_gelu_bwd, 0, {3, -1}, 1},           /* din[n] */
    {RT_prt_matmul_bwd, 0, {5, 6}, 1},          /* din[N, K] */
    {RT_prt_matmul_t_bwd, 0, {5, 6}, 1},        /* din[N, K] */
    {RT_prt_matmul_bias_bwd, 0, {6, 7}, 1},     /* din[N, K] */
    {RT_prt_matmul_bwd, 1, {6, 7}, 1},          /* dw[K, M] (first_write_step) */
    {RT_prt_matmul_t_bwd, 1, {6, 7}, 1},        /* dw[M, K] */
    {RT_prt_matmul_bias_bwd, 1, {7, 8}, 1},     /* dw[K, M] */
    {RT_prt_matmul_bias_bwd, 5, {8}, 1},        /* db[M] */
    {RT_prt_layernorm_bwd, 1, {9}, 1},          /* dw[C] */
    {RT_prt_layernorm_bwd, 2, {9}, 1},          /* db[C] */
    {RT_prt_rmsnorm_bwd, 1, {7}, 1},            /* dw[C] */
    {RT_prt_layernorm_bwd, 0, {8, 9}, 1},       /* din[N, C] */
    {RT_prt_rmsnorm_bwd, 0, {6, 7}, 1},         /* din[N, C] */
    {RT_prt_relu_bwd, 0, {3}, 1},               /* din[n] */
    {RT_prt_swiglu_bwd, 0, {3, 4}, 2},          /* din[N, 2F]: gate and up halves */
    {RT_prt_dropout_bwd, 0, {3}, 1},            /* din[n]: 0 where dropped */
    {RT_prt_pos_bwd, 1, {3, 4, 5}, 1},          /* din[B, T, C]: a copy of dout */
    {RT_prt_rope_bwd, 0, {2, 3, 4, 5, 7}, 1},   /* din[B, T, G, U, HD] */
    {RT_prt_xent_bwd, 0, {4, 5}, 1},            /* dlogits[N, V_local] */
    {RT_prt_attention_bwd, 0, {4, 5, 6, 7, 8}, QKV},          /* dqkv[B, T, NH + 2 KV, HD] */
    {RT_prt_attention_dropout_bwd, 0, {4, 5, 6, 7, 8}, QKV},  /* dqkv[B, T, NH + 2 KV, HD] */
    {RT_prt_moe_router_bwd, 0, {9, 10}, 1},     /* dx[T, H] */
    {RT_prt_moe_router_bwd, 2, {9, 11}, 1},     /* dlogits[T, E]: always written */
    {RT_prt_moe_permute_bwd, 0, {3, 4}, 1},     /* din[T, H] */
    {RT_prt_moe_combine_bwd, 0, {6, 8, 7}, 1},  /* dy[T topk, H] */
    {RT_prt_moe_combine_bwd, 1, {6, 8}, 1},     /* dweight[T, topk] */
};

static const WriteRule *write_rule(int fn, int arg)
{
    for (size_t r = 0; r < sizeof write_rules / sizeof write_rules[0]; r++)
        if ((int)write_rules[r].fn == fn && write_rules[r].arg == arg) return &write_rules[r];
    return NULL;
}

int first_write_has_rule(int fn)
{
    for (size_t r = 0; r < sizeof write_rules / sizeof write_rules[0]; r++)
        if ((int)write_rules[r].fn == fn) return 1;
    return 0;
}

/* Elements the rule's call writes; -1 when an extent is not a constant. */
static int64_t rule_elems(const WriteRule *r, const Instr *ins)
{
    int64_t n = r->times > 0 ? r->times : 1;
    if (r->times == QKV) {
        for (int d = 0; d < 5; d++)
            if (ins->args[r->dims[d]].kind != ARG_INT) return -1;
        const Arg *x = ins->args;
        return n * x[r->dims[0]].i * x[r->dims[1]].i * (x[r->dims[2]].i + 2 * x[r->dims[3]].i) * x[r->dims[4]].i;
    }
    for (int d = 0; d < 5 && r->dims[d] > 0; d++) {
        const Arg *a = &ins->args[r->dims[d]];
        if (a->kind != ARG_INT) return -1;
        n *= a->i;
    }
    return n;
}

typedef enum { TOUCH_NONE, TOUCH_SAME, TOUCH_OTHER } Touch;

/* How argument b relates to the memory of buffer argument a: the same
 * (identical argument), none (another buffer, or another instance of it), or
 * some other overlap (an offset, another instance mode). */
static Touch touches(const Arg *a, const Arg *b)
{
    if (b->kind != ARG_BUF || b->buf != a->buf) return TOUCH_NONE;
    if (b->inst == a->inst && b->k == a->k && b->axis == a->axis && (a->axis < 0 || b->i == a->i)) return TOUCH_SAME;
    if (b->inst == a->inst && b->axis < 0 && a->axis < 0) {
        if (a->inst == INST_PARITY && (a->k - b->k) % 2) return TOUCH_NONE;
        if ((a->inst == INST_FIXED || a->inst == INST_SLOT_L) && a->k != b->k) return TOUCH_NONE;
    }
    return TOUCH_OTHER;
}

/* Whether instruction `ins` touches the memory of buffer argument a. */
static int instr_touches(const Instr *ins, const Arg *a)
{
    for (int k = 0; k < ins->nargs; k++)
        if (touches(a, &ins->args[k]) != TOUCH_NONE) return 1;
    return 0;
}

/* The argument of `ins` that can take the zeroed memory a of n elements as a
 * plain write: its index, else -1.  Any other argument touching a: -1. */
static int writable_arg(const Instr *ins, const Arg *a, int64_t n)
{
    int found = -1;
    for (int k = 0; k < ins->nargs; k++) {
        Touch t = touches(a, &ins->args[k]);
        if (t == TOUCH_OTHER || (t == TOUCH_SAME && found >= 0)) return -1;
        if (t == TOUCH_SAME) found = k;
    }
    if (found < 0) return -1;
    const WriteRule *r = write_rule(ins->fn, found);
    return r && rule_elems(r, ins) == n ? found : -1;
}

void first_write_seq(Seq *seq)
{
    int out = 0;
    for (int i = 0; i < seq->n; i++) {
        Instr *z = &seq->ins[i];
        int drop = 0;
        if (z->fn == RT_prt_zero && z->args[0].kind == ARG_BUF && z->args[1].kind == ARG_INT) {
            const Arg *a = &z->args[0];
            int before = 0, j = i + 1;
            for (int p = 0; p < out && !before; p++) before = instr_touches(&seq->ins[p], a);  /* the kept ones */
            while (j < seq->n && !instr_touches(&seq->ins[j], a)) j++;
            int k = !before && j < seq->n ? writable_arg(&seq->ins[j], a, z->args[1].i) : -1;
            if (k >= 0) {
                seq->ins[j].writes |= 1u << k;
                drop = 1;
            }
        }
        if (!drop) seq->ins[out++] = seq->ins[i];
    }
    seq->n = out;
}

void first_write_verify(const StageProgram *sp, const Seq *seq, const char *seq_name)
{
    for (int i = 0; i < seq->n; i++) {
        const Instr *ins = &seq->ins[i];
        for (int k = 0; k < IR_MAX_ARGS; k++) {
            if (!(ins->writes >> k & 1)) continue;
            const WriteRule *r = ins->fn >= 0 ? write_rule(ins->fn, k) : NULL;
            if (!r || k >= ins->nargs || ins->args[k].kind != ARG_BUF)
                PARC_BUG("stage %d %s: instruction %d writes argument %d, which its function cannot write", sp->stage,
                         seq_name, i, k + 1);
            const Arg *a = &ins->args[k];
            int64_t n = rule_elems(r, ins);
            if (n < 0 || n > sp->bufs[a->buf].elems)
                PARC_BUG("stage %d %s: %s writes %lld elements of %%%s, which holds %lld", sp->stage, seq_name,
                         rt_fn_names[ins->fn], (long long)n, sp->bufs[a->buf].name,
                         (long long)sp->bufs[a->buf].elems);
            for (int o = 0; o < ins->nargs; o++)
                if (o != k && touches(a, &ins->args[o]) != TOUCH_NONE)
                    PARC_BUG("stage %d %s: %s writes %%%s, which its argument %d also names", sp->stage, seq_name,
                             rt_fn_names[ins->fn], sp->bufs[a->buf].name, o + 1);
            for (int p = 0; p < i; p++)
                if (instr_touches(&seq->ins[p], a))
                    PARC_BUG("stage %d %s: %s writes %%%s, which instruction %d before it touches", sp->stage,
                             seq_name, rt_fn_names[ins->fn], sp->bufs[a->buf].name, p);
        }
    }
}

/* ------------------------------------------------------------ across the step */

static int seq_touches(const Seq *q, const Arg *a)
{
    for (int j = 0; j < q->n; j++)
        if (instr_touches(&q->ins[j], a)) return 1;
    return 0;
}

/* The zeros of zero sequence zk whose buffer the step touches first in the
 * backward sequences `order` (in the order a micro-batch runs them), through
 * an argument that can be written whole: that argument's `writes` bit set,
 * the zero dropped.  Nothing else before the optimizer may touch the buffer:
 * no forward, pipeline message or other backward sequence, no other zero. */
static void step_writes(StageProgram *sp, SeqKind zk, const SeqKind *order, int n)
{
    Seq *zs = &sp->seq[zk];
    int out = 0;
    for (int i = 0; i < zs->n; i++) {
        Instr z = zs->ins[i];
        int drop = 0;
        if (z.fn == RT_prt_zero && z.args[0].kind == ARG_BUF && z.args[1].kind == ARG_INT) {
            const Arg *a = &z.args[0];
            int clear = 1;
            /* before the optimizer a step runs its zeros, then only per-micro-batch sequences */
            for (int q = 0; q < SEQ_COUNT && clear; q++) {
                int ordered = 0;
                for (int o = 0; o < n; o++) ordered |= (int)order[o] == q;
                int before = seq_per_micro[q] || q == SEQ_ZERO_GRADS_BLOCK || q == SEQ_ZERO_GRADS_ONCE;
                if (q != (int)zk && !ordered && before) clear = !seq_touches(&sp->seq[q], a);
            }
            for (int p = 0; p < zs->n && clear; p++)
                if (p != i && instr_touches(&zs->ins[p], a)) clear = 0;
            Instr *w = NULL;
            for (int o = 0; o < n && clear && !w; o++) {
                Seq *q = &sp->seq[order[o]];
                for (int j = 0; j < q->n && !w; j++)
                    if (instr_touches(&q->ins[j], a)) w = &q->ins[j];
            }
            int k = w && w->when == z.when ? writable_arg(w, a, z.args[1].i) : -1;
            if (k >= 0) {
                w->writes |= 1u << k;
                drop = 1;
            }
        }
        if (!drop) zs->ins[out++] = z;
    }
    zs->n = out;
}

void first_write_step(StageProgram *sp)
{
    static const SeqKind block[] = {SEQ_BLOCK_BWD};
    static const SeqKind once[] = {SEQ_HEAD_BWD, SEQ_BLOCK_BWD, SEQ_EMBED_BWD};
    step_writes(sp, SEQ_ZERO_GRADS_BLOCK, block, 1);
    step_writes(sp, SEQ_ZERO_GRADS_ONCE, once, 3);
}
