/*
 * test_lower.c — the textbook arithmetic of distributed training, asserted on
 * what the compiler derives from small plans: bytes per parameter, ZeRO
 * memory per stage, the collectives of tensor, sequence and data parallelism,
 * ZeRO's communication volumes, pipeline messages and in-flight micro-batches.
 * Every assertion reads the lowered program or its analysis.  Exit status is
 * the verdict.
 */
#include "analyze.h"
#include "ir.h"
#include "ops.h"
#include "passes.h"
#include "prt_scratch.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_check.h"

typedef struct Opts {
    const char *block;      /* "gpt2", "llama", "mlp" */
    const char *mesh;       /* "dp 4;" */
    const char *layout;
    const char *precision;  /* "fp32" or "bf16 master fp32" */
    int nodes, gpus;
    int batch, micro_batch;
    int layers, hidden, heads, ffn, vocab, seq;
    int no_positions;
    int tied;               /* head tied to the embedding */
    int kv_heads;           /* grouped-query attention when > 0 (default: heads) */
    int flash;              /* gpt2 block with `attention causal flash;` */
    double dropout;         /* gpt2 block with `dropout P;` when > 0 */
    const char *rope;       /* rotary positions with these settings (`theta 500000 ...`) when not NULL */
} Opts;

static Opts defaults(void)
{
    Opts o = {"gpt2", "dp 1;", "batch -> dp;", "fp32", 1, 1, 8, 2, 4, 64, 4, 256, 256, 32, 0, 0, 0, 0, 0, NULL};
    return o;
}

static char text[8192];

static Analysis *compile(Arena *arena, Opts o, Program **prog_out)
{
    char gpt2[96];
    snprintf(gpt2, sizeof gpt2, "block gpt2 { %s", o.flash ? "attention causal flash; " : "");
    if (o.dropout > 0) snprintf(gpt2 + strlen(gpt2), sizeof gpt2 - strlen(gpt2), "dropout %g; ", o.dropout);
    strcat(gpt2, "}");
    const char *block = !strcmp(o.block, "mlp")      ? "block mlp { act gelu; norm layer; bias false; residual true; }"
                        : !strcmp(o.block, "relu") ? "block mlp { act relu; norm rms; bias true; residual false; }"
                        : !strcmp(o.block, "llama") ? "block llama;"
                        : !strcmp(o.block, "moe")   ? "block llama { mlp moe experts 4 top 2 expert_ffn 32 z_loss 0.001; }"
                        : !strcmp(o.block, "moe_shared")
                            ? "block llama { mlp moe experts 4 top 2 expert_ffn 32 shared 2 z_loss 0.001; }"
                                                    : gpt2;
    char kv[32] = "", embed[256];
    if (o.kv_heads > 0) snprintf(kv, sizeof kv, " kv_heads %d;", o.kv_heads);
    if (o.rope) snprintf(embed, sizeof embed, "embed positions rope %s;", o.rope);
    else snprintf(embed, sizeof embed, "%s", o.no_positions ? "embed;" : "embed positions learned;");
    snprintf(text, sizeof text,
             "cluster { nodes %d; gpus_per_node %d;\n"
             "  gpu { memory 80 GiB; bf16 100 TFLOP/s; fp32 50 TFLOP/s; hbm 2 TB/s; }\n"
             "  link intra 100 GB/s 2 us; link inter 10 GB/s 5 us; }\n"
             "model m { vocab %d; seq %d; hidden %d; heads %d; ffn %d; layers %d;%s\n"
             "  %s repeat layers { %s } norm %s; head %s; loss cross_entropy; }\n"
             "train { batch %d; micro_batch %d; precision %s; optimizer adam lr 1e-3; }\n"
             "mesh { %s }\nlayout { %s }\n",
             o.nodes, o.gpus, o.vocab, o.seq, o.hidden, o.heads, o.ffn, o.layers, kv, embed, block,
             !strcmp(o.block, "llama") ? "rms" : "layer", o.tied ? "tied" : "untied", o.batch, o.micro_batch, o.precision, o.mesh, o.layout);
    /* through the driver with every verifier; the Compilation lives as long
     * as the arena, since the program points at its plan */
    Compilation *c = arena_alloc(arena, sizeof *c);
    if (passes_run_text(c, arena, "test.par", text, 1, passes_find("front")) != 0) {
        if (getenv("TEST_LOWER_VERBOSE")) printf("plan did not load:\n%s\n", text);
        return NULL;
    }
    if (passes_continue(c, passes_find("analyze")) != 0) return NULL;
    if (prog_out) *prog_out = c->prog;
    return c->analysis;
}

/* Sum over a stage's rows matching a filter. */
typedef struct Sum {
    int64_t calls;
    double elems;   /* elements x calls */
    double wire;    /* bytes x bus factor x calls */
} Sum;

/* The gradient norm's one-element all-reduce: every plan has it over the axes
 * that shard a gradient; the textbook volumes below count parameters alone. */
static int is_norm(const CollRow *r) { return r->tensor && !strcmp(r->tensor, "grad_norm.sumsq"); }

static Sum sum_rows(const Analysis *an, int stage, Phase phase, CollKind coll, int axis, const char *why_prefix,
                    int exclude_replays)
{
    Sum s = {0, 0, 0};
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
        if (is_norm(r)) continue;
        if (r->stage != stage || (phase != PHASE_COUNT && r->phase != phase) || r->coll != coll) continue;
        if (axis >= 0 && r->axis != axis) continue;
        if (why_prefix && strncmp(r->why, why_prefix, strlen(why_prefix))) continue;
        if (exclude_replays && !strncmp(r->why, "again for the backward", 22)) continue;
        s.calls += r->calls;
        s.elems += (double)r->elems * (double)r->calls;
        s.wire += (double)r->elems * r->elem_bytes * cost_bus_factor(r->coll, r->group) * (double)r->calls;
    }
    return s;
}

static int64_t params_of(const Program *prog) { return prog->graph->params_total; }

static void test_bytes_per_parameter(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.precision = "bf16 master fp32";
    Program *prog;
    Analysis *an = compile(&arena, o, &prog);
    CHECK(an != NULL, "mixed-precision plan lowers");
    if (!an) return;
    const StageCost *sc = &an->stages[0];
    double P = (double)params_of(prog);
    CHECK(sc->params_local == params_of(prog), "one rank holds all %lld parameters", (long long)params_of(prog));
    CHECK(sc->ledger[PRT_WEIGHTS] == 2 * P, "bf16 weights: 2 bytes/parameter, got %g", sc->ledger[PRT_WEIGHTS] / P);
    CHECK(sc->ledger[PRT_GRADS] == 2 * P, "bf16 gradients: 2 bytes/parameter, got %g", sc->ledger[PRT_GRADS] / P);
    CHECK(sc->ledger[PRT_MASTER] == 4 * P, "fp32 master: 4 bytes/parameter, got %g", sc->ledger[PRT_MASTER] / P);
    CHECK(sc->ledger[PRT_OPTIM] == 8 * P, "Adam m and v: 4 + 4 bytes/parameter, got %g", sc->ledger[PRT_OPTIM] / P);
    arena_free(&arena);
}

/* Bytes per parameter by precision option, the way Megatron's distributed
 * optimizer tabulates them: fp32 4 + 4 + 8 = 16; bf16 with fp32 master
 * 2 + 2 + 4 + 8 = 16; `grads fp32` (fp32 main gradients) 2 + 4 + 4 + 8 = 18,
 * without a master 2 + 4 + 8 = 14.  Under ZeRO-2 the fp32 gradients are
 * sharded like any gradient, and the data axis moves them as 4-byte elements:
 * DDP's all-reduce carries twice the bytes of the bf16-gradient plan. */
static void test_bytes_per_parameter_options(void)
{
    static const struct {
        const char *precision;
        int weights, grads, master, optim;
    } rows[] = {
        {"fp32", 4, 4, 0, 8},
        {"bf16 master fp32", 2, 2, 4, 8},
        {"bf16 master fp32 grads fp32", 2, 4, 4, 8},
        {"fp16 grads fp32 master fp32", 2, 4, 4, 8},
        {"bf16 grads fp32", 2, 4, 0, 8},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        Arena arena = {0};
        Opts o = defaults();
        o.precision = rows[i].precision;
        Program *prog;
        Analysis *an = compile(&arena, o, &prog);
        CHECK(an != NULL, "`precision %s` lowers", rows[i].precision);
        if (!an) continue;
        const int64_t *l = an->stages[0].ledger;
        double P = (double)params_of(prog);
        double total = (double)(l[PRT_WEIGHTS] + l[PRT_GRADS] + l[PRT_MASTER] + l[PRT_OPTIM]);
        int want = rows[i].weights + rows[i].grads + rows[i].master + rows[i].optim;
        CHECK(total == want * P, "`precision %s`: %d bytes/parameter, got %g", rows[i].precision, want, total / P);
        CHECK(l[PRT_GRADS] == rows[i].grads * P, "`precision %s`: gradients %d bytes/parameter, got %g",
              rows[i].precision, rows[i].grads, l[PRT_GRADS] / P);
        CHECK(l[PRT_WEIGHTS] == rows[i].weights * P && l[PRT_MASTER] == rows[i].master * P &&
                  l[PRT_OPTIM] == rows[i].optim * P,
              "`precision %s`: weights %g, master %g, optimizer %g bytes/parameter", rows[i].precision,
              l[PRT_WEIGHTS] / P, l[PRT_MASTER] / P, l[PRT_OPTIM] / P);
        arena_free(&arena);
    }
    /* ZeRO-2 over dp 4 shards fp32 gradients: 2 + (4 + 4 + 8) / 4 = 6 bytes/parameter */
    Arena arena = {0};
    Opts o = defaults();
    o.precision = "bf16 master fp32 grads fp32";
    o.gpus = 4;
    o.mesh = "dp 4;";
    o.layout = "batch -> dp; zero 2 over dp;";
    Program *prog;
    Analysis *an = compile(&arena, o, &prog);
    CHECK(an != NULL, "ZeRO-2 with fp32 gradients lowers");
    if (an) {
        const int64_t *l = an->stages[0].ledger;
        double P = (double)params_of(prog);
        CHECK(l[PRT_GRADS] == 4 * P / 4, "ZeRO-2 fp32 gradient share: %g bytes/parameter, want 1", l[PRT_GRADS] / P);
        CHECK(l[PRT_WEIGHTS] + l[PRT_GRADS] + l[PRT_MASTER] + l[PRT_OPTIM] == 2 * P + 16 * P / 4,
              "ZeRO-2 fp32 gradients: 6 bytes/parameter");
    }
    /* DDP over dp 2: the same elements, 4 bytes each instead of 2 */
    double wire[2] = {0, 0}, elems[2] = {0, 0};
    for (int f = 0; f < 2; f++) {
        o.precision = f ? "bf16 master fp32 grads fp32" : "bf16 master fp32";
        o.gpus = 2;
        o.mesh = "dp 2;";
        o.layout = "batch -> dp;";
        an = compile(&arena, o, &prog);
        CHECK(an != NULL, "DDP plan lowers");
        if (!an) continue;
        Sum s = sum_rows(an, 0, PHASE_GRAD_SYNC, COLL_ALLREDUCE, 0, NULL, 0);
        wire[f] = s.wire, elems[f] = s.elems;
        for (int i = 0; i < an->nrows; i++)
            if (an->rows[i].phase == PHASE_GRAD_SYNC)
                CHECK(an->rows[i].elem_bytes == (f ? 4 : 2), "gradient sync of %s moves %d-byte elements, want %d",
                      an->rows[i].tensor, an->rows[i].elem_bytes, f ? 4 : 2);
    }
    CHECK(elems[0] > 0 && elems[1] == elems[0] && wire[1] == 2 * wire[0],
          "fp32 gradients: the DDP all-reduce moves the same %.0f elements as 2x the bytes (%.0f vs %.0f)", elems[0],
          wire[1], wire[0]);
    arena_free(&arena);
}

/* Memory-efficient attention drops exactly the stored probabilities from the
 * ledger, layers x micro_batch x heads x seq^2 elements in the activations'
 * dtype (4 x 2 x 4 x 32^2 here: 128 KiB in fp32, 64 KiB in bf16), and its
 * backward recomputes Q K^T: 4 x micro_batch x seq^2 x heads x head_dim FLOPs
 * more per layer. */
static void test_flash_attention(void)
{
    for (int bf16 = 0; bf16 < 2; bf16++) {
        Arena arena = {0};
        Opts o = defaults();
        if (bf16) o.precision = "bf16 master fp32";
        Program *prog;
        Analysis *stored = compile(&arena, o, &prog);
        o.flash = 1;
        Analysis *flash = compile(&arena, o, &prog);
        CHECK(stored && flash, "stored and flash attention plans lower (%s)", o.precision);
        if (!stored || !flash) {
            arena_free(&arena);
            continue;
        }
        const StageCost *a = &stored->stages[0], *b = &flash->stages[0];
        int64_t probs = 4LL * 2 * 4 * 32 * 32 * (bf16 ? 2 : 4);
        CHECK(a->ledger[PRT_ACTIVATIONS] - b->ledger[PRT_ACTIVATIONS] == probs,
              "flash drops %lld bytes of probabilities (%s), dropped %lld", (long long)probs, o.precision,
              (long long)(a->ledger[PRT_ACTIVATIONS] - b->ledger[PRT_ACTIVATIONS]));
        double recompute = 4.0 * 4 * 2 * 32 * 32 * 4 * 16;
        CHECK(b->flops_bwd_chunk - a->flops_bwd_chunk == recompute,
              "flash backward recomputes Q K^T: %g more FLOPs, got %g", recompute,
              b->flops_bwd_chunk - a->flops_bwd_chunk);
        CHECK(b->flops_fwd_chunk == a->flops_fwd_chunk, "flash forward FLOPs unchanged");
        arena_free(&arena);
    }
}

/* ZeRO memory with N data-parallel ranks: (2+2+12)Ψ, 2Ψ+2Ψ+12Ψ/N, 2Ψ+(2+12)Ψ/N, 16Ψ/N. */
static void test_zero_memory(void)
{
    const int N = 4;
    for (int z = 0; z <= 3; z++) {
        Arena arena = {0};
        Opts o = defaults();
        o.precision = "bf16 master fp32";
        o.gpus = N;
        o.mesh = "dp 4;";
        char layout[128];
        snprintf(layout, sizeof layout, "batch -> dp; zero %d over dp;", z);
        o.layout = layout;
        o.batch = 8;
        Program *prog;
        Analysis *an = compile(&arena, o, &prog);
        CHECK(an != NULL, "zero %d plan lowers", z);
        if (!an) continue;
        double P = (double)params_of(prog);
        const int64_t *l = an->stages[0].ledger;
        double states = (double)(l[PRT_WEIGHTS] + l[PRT_GRADS] + l[PRT_MASTER] + l[PRT_OPTIM]);
        double want = z == 0 ? 16 * P : z == 1 ? 4 * P + 12 * P / N : z == 2 ? 2 * P + 14 * P / N : 16 * P / N;
        CHECK(states == want, "zero %d model states %.0f, want %.0f", z, states, want);
        CHECK(l[PRT_WEIGHTS] == (z == 3 ? 2 * P / N : 2 * P), "zero %d weights", z);
        CHECK(l[PRT_GRADS] == (z >= 2 ? 2 * P / N : 2 * P), "zero %d gradients", z);
        CHECK(l[PRT_MASTER] + l[PRT_OPTIM] == (z >= 1 ? 12 * P / N : 12 * P), "zero %d optimizer states", z);
        arena_free(&arena);
    }
}

/* Megatron: per transformer layer 2 all-reduces forward + 2 backward of b·s·h. */
static void test_tensor_parallel(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.gpus = 2;
    o.mesh = "tp 2;";
    o.layout = "heads -> tp; ffn -> tp;";
    Program *prog;
    Analysis *an = compile(&arena, o, &prog);
    CHECK(an != NULL, "tp plan lowers");
    if (!an) return;
    const StageProgram *sp = &prog->stages[0];
    int64_t bsh = (int64_t)o.micro_batch * o.seq * o.hidden;
    int fwd = 0, bwd = 0, other = 0;
    for (int q = SEQ_BLOCK_FWD; q <= SEQ_BLOCK_BWD; q += SEQ_BLOCK_BWD - SEQ_BLOCK_FWD) {
        for (int i = 0; i < sp->seq[q].n; i++) {
            const Instr *ins = &sp->seq[q].ins[i];
            if (ins->coll == COLL_NONE) continue;
            if (ins->coll == COLL_ALLREDUCE && ins->elems == bsh) *(q == SEQ_BLOCK_FWD ? &fwd : &bwd) += 1;
            else other++;
        }
    }
    CHECK(fwd == 2, "2 forward all-reduces of b*s*h per layer, got %d", fwd);
    CHECK(bwd == 2, "2 backward all-reduces of b*s*h per layer, got %d", bwd);
    CHECK(other == 0, "no other collective inside a tp block, got %d", other);
    /* rules behind them */
    Sum rowpar = sum_rows(an, 0, PHASE_FORWARD, COLL_ALLREDUCE, 0, "mlp.down contracts ffn split on tp", 1);
    CHECK(rowpar.calls == (int64_t)o.layers * (o.batch / o.micro_batch), "mlp.down's all-reduce once per layer per "
          "micro-batch, got %lld", (long long)rowpar.calls);
    arena_free(&arena);
}

/* Sequence parallelism: the same volume as all-gather + reduce-scatter pairs. */
static void test_sequence_parallel(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.gpus = 2;
    o.mesh = "tp 2;";
    o.layout = "heads -> tp; ffn -> tp; vocab -> tp; sequence_parallel over tp;";
    Program *prog;
    Analysis *an = compile(&arena, o, &prog);
    CHECK(an != NULL, "sp plan lowers");
    if (!an) return;
    const StageProgram *sp = &prog->stages[0];
    int64_t bsh = (int64_t)o.micro_batch * o.seq * o.hidden;
    int ag[2] = {0, 0}, rs[2] = {0, 0}, ar = 0, replay = 0;
    for (int k = 0; k < 2; k++) {
        const Seq *seq = &sp->seq[k ? SEQ_BLOCK_BWD : SEQ_BLOCK_FWD];
        for (int i = 0; i < seq->n; i++) {
            const Instr *ins = &seq->ins[i];
            if (ins->coll == COLL_NONE) continue;
            if (ins->why && !strncmp(ins->why, "again for the backward", 22)) {
                replay++;
                continue;
            }
            if (ins->coll == COLL_ALLGATHER && ins->elems == bsh) ag[k]++;
            else if (ins->coll == COLL_REDUCESCATTER && ins->elems == bsh) rs[k]++;
            else if (ins->coll == COLL_ALLREDUCE) ar++;
        }
    }
    CHECK(ag[0] == 2 && rs[0] == 2, "forward: 2 all-gathers + 2 reduce-scatters of b*s*h, got %d + %d", ag[0], rs[0]);
    CHECK(ag[1] == 2 && rs[1] == 2, "backward: 2 all-gathers + 2 reduce-scatters, got %d + %d", ag[1], rs[1]);
    CHECK(ar == 0, "no all-reduce of activations with sequence parallelism, got %d", ar);
    CHECK(replay == 2, "the column-parallel inputs are gathered again in backward (Megatron-SP), got %d", replay);
    /* an all-reduce moves 2(n-1)/n, a gather + scatter pair (n-1)/n each: equal volumes */
    Analysis *tp;
    Opts t = o;
    t.layout = "heads -> tp; ffn -> tp; vocab -> tp;";
    tp = compile(&arena, t, NULL);
    if (tp) {
        double tp_wire = 0, sp_wire = 0;
        for (int ph = PHASE_FORWARD; ph <= PHASE_BACKWARD; ph++) {
            tp_wire += sum_rows(tp, 0, (Phase)ph, COLL_ALLREDUCE, 0, NULL, 1).wire;
            sp_wire += sum_rows(an, 0, (Phase)ph, COLL_ALLGATHER, 0, NULL, 1).wire +
                       sum_rows(an, 0, (Phase)ph, COLL_REDUCESCATTER, 0, NULL, 1).wire;
            /* both have the same vocab-parallel loss reductions */
            sp_wire += sum_rows(an, 0, (Phase)ph, COLL_ALLREDUCE, 0, "vocab-parallel", 1).wire;
        }
        /* every tp all-reduce has a gather + scatter pair (the embedding's and the
         * head's too, one of them in forward, the other in backward) */
        CHECK(fabs(tp_wire - sp_wire) < 1e-6 * tp_wire, "activation wire bytes per step: tp %.0f == sp %.0f",
              tp_wire, sp_wire);
    }
    arena_free(&arena);
}

/* The bus bytes DDP's all-reduce over dp ranks moves for the embedding's and
 * the head's parameters (fp32): ZeRO-3 gathers these once per micro-batch, in
 * the forward, their backward reading the forward's copies. */
static double ends_ddp_wire(const Program *prog, int dp)
{
    double w = 0;
    for (int t = 0; t < prog->graph->ntensors; t++) {
        const Tensor *tt = &prog->graph->tensors[t];
        if (tt->kind == TENSOR_PARAM && tt->region != REGION_BLOCK)
            w += cost_bus_factor(COLL_ALLREDUCE, dp) * (double)expand_tensor_numel(tt) * 4;
    }
    return w;
}

/* DDP all-reduces exactly Ψ gradient elements; ZeRO-1/2 move the same bytes;
 * ZeRO-3 1.5x for every block parameter (gathered for its forward and again
 * for its backward), 1x for the embedding's and the head's (gathered once). */
static void test_data_parallel_volumes(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.block = "llama";   /* no biases: every block parameter is read by its backward */
    o.no_positions = 1;
    o.gpus = 4;
    o.mesh = "dp 4;";
    o.batch = 8;
    o.micro_batch = 2; /* one micro-batch per rank: ZeRO-2's per-micro-batch scatter happens once */
    double wire[4];
    int64_t P = 0;
    for (int z = 0; z <= 3; z++) {
        char layout[96];
        snprintf(layout, sizeof layout, "batch -> dp; zero %d over dp;", z);
        o.layout = layout;
        Program *prog;
        Analysis *an = compile(&arena, o, &prog);
        CHECK(an != NULL, "zero %d lowers", z);
        if (!an) return;
        P = params_of(prog);
        wire[z] = 0;
        for (int c = COLL_ALLREDUCE; c <= COLL_REDUCESCATTER; c++)
            wire[z] += sum_rows(an, 0, PHASE_COUNT, (CollKind)c, 0, NULL, 0).wire;
        /* the gradient norm: nothing moves while every gradient is whole on every
         * rank (DDP); one fp32 element is all-reduced once ZeRO shards them */
        int64_t norm_calls = 0;
        for (int r = 0; r < an->nrows; r++) {
            const CollRow *row = &an->rows[r];
            if (!is_norm(row)) continue;
            norm_calls += row->calls;
            CHECK(row->coll == COLL_ALLREDUCE && row->elems == 1 && row->elem_bytes == 4,
                  "zero %d: the norm all-reduces one fp32 element", z);
        }
        CHECK(norm_calls == (z > 0), "zero %d: %lld all-reduces of the gradient norm, want %d", z,
              (long long)norm_calls, z > 0);
        if (z == 0) {
            Sum ar = sum_rows(an, 0, PHASE_GRAD_SYNC, COLL_ALLREDUCE, 0, NULL, 0);
            CHECK(ar.elems == (double)P, "DDP all-reduces exactly %lld gradient elements per step, got %.0f",
                  (long long)P, ar.elems);
        }
        if (z == 3) {
            double ends = ends_ddp_wire(prog, 4);
            CHECK(ends > 0 && fabs(wire[3] - (1.5 * wire[0] - 0.5 * ends)) < 1e-6 * wire[0],
                  "ZeRO-3 moves 1.5x DDP's bytes for block parameters, 1x for the ends': %.0f vs DDP %.0f", wire[3],
                  wire[0]);
        }
    }
    CHECK(wire[1] == wire[0], "ZeRO-1 moves DDP's bytes: %.0f vs %.0f", wire[1], wire[0]);
    CHECK(wire[2] == wire[0], "ZeRO-2 moves DDP's bytes: %.0f vs %.0f", wire[2], wire[0]);
    arena_free(&arena);
}

/* ZeRO-3 moves 3 x a block's parameters per step (forward gather, backward
 * gather, reduce-scatter): 1.5 x DDP's all-reduce, by bus bytes; the
 * embedding's and the head's 2 x (their backward reads the forward's copies).
 * A tied table is used twice in the forward (lookup and head) and gathered
 * once there, and not again for the head's backward; with `recompute full`
 * the weights gathered for a layer's recompute forward serve its backward, so
 * recompute moves no more. */
static double tensor_wire(const Analysis *an, const char *tensor, CollKind coll, Phase phase, int64_t *calls)
{
    double w = 0;
    *calls = 0;
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
        if (r->coll != coll || strcmp(r->tensor, tensor) || (phase != PHASE_COUNT && r->phase != phase)) continue;
        w += (double)r->elems * r->elem_bytes * cost_bus_factor(r->coll, r->group) * (double)r->calls;
        *calls += r->calls;
    }
    return w;
}

static void test_zero3_use_windows(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.block = "llama";
    o.no_positions = 1;
    o.gpus = 4;
    o.mesh = "dp 4;";
    o.batch = 8;
    o.micro_batch = 2;
    static const char *const layouts[3] = {"batch -> dp;", "batch -> dp; zero 3 over dp;",
                                           "batch -> dp; zero 3 over dp; recompute full;"};
    for (int tied = 0; tied <= 1; tied++) {
        o.tied = tied;
        double wire[3] = {0, 0, 0}, ends = 0;
        int64_t gathers_fwd[3] = {0, 0, 0}, gathers_bwd[3] = {0, 0, 0};
        for (int k = 0; k < 3; k++) {
            o.layout = layouts[k];
            Program *prog;
            Analysis *an = compile(&arena, o, &prog);
            CHECK(an != NULL, "%s (%s head) lowers", layouts[k], tied ? "tied" : "untied");
            if (!an) return;
            for (int c = COLL_ALLREDUCE; c <= COLL_REDUCESCATTER; c++)
                wire[k] += sum_rows(an, 0, PHASE_COUNT, (CollKind)c, 0, NULL, 0).wire;
            ends = ends_ddp_wire(prog, 4);
            tensor_wire(an, "wte", COLL_ALLGATHER, PHASE_FORWARD, &gathers_fwd[k]);
            tensor_wire(an, "wte", COLL_ALLGATHER, PHASE_BACKWARD, &gathers_bwd[k]);
        }
        double want = 1.5 * wire[0] - 0.5 * ends;
        CHECK(fabs(wire[1] - want) < 1e-9 * wire[0], "%s head: ZeRO-3 moves %.0f bus bytes, want %.0f (DDP %.0f)",
              tied ? "tied" : "untied", wire[1], want, wire[0]);
        CHECK(fabs(wire[2] - want) < 1e-9 * wire[0],
              "%s head: ZeRO-3 with recompute full moves %.0f bus bytes, want %.0f (%.2f x DDP, no more than without)",
              tied ? "tied" : "untied", wire[2], want, wire[2] / wire[0]);
        for (int k = 1; k < 3; k++) {
            CHECK(gathers_fwd[k] == 1, "%s head, %s: the table is gathered %lld times per forward, want 1",
                  tied ? "tied" : "untied", layouts[k], (long long)gathers_fwd[k]);
            CHECK(gathers_bwd[k] == 0, "%s head, %s: the table is gathered %lld times per backward, want 0",
                  tied ? "tied" : "untied", layouts[k], (long long)gathers_bwd[k]);
        }
    }
    arena_free(&arena);
}

/* A head tied to the embedding across pipeline stages (Megatron's rule): the
 * last stage holds a copy of the table with its own gradient, master and
 * moments (16 bytes per element in bf16 with an fp32 master), and the two
 * copies' gradients are all-reduced over the embedding group, two ranks (the
 * first and the last stage) whatever the number of stages: vocab x hidden
 * elements, split by tp, a ZeRO share under ZeRO-1, once per step. */
static void test_tied_across_stages(void)
{
    static const struct {
        const char *mesh, *layout;
        int gpus, pp, tp, dp;
    } rows[] = {
        {"pp 2;", "layers -> pp schedule 1f1b;", 2, 2, 1, 1},
        {"pp 2;", "layers -> pp schedule interleaved 2;", 2, 2, 1, 1},
        {"pp 4;", "layers -> pp schedule 1f1b;", 4, 4, 1, 1},
        {"pp 2; tp 2;", "heads -> tp; ffn -> tp; vocab -> tp; layers -> pp schedule 1f1b;", 4, 2, 2, 1},
        {"pp 2; dp 2;", "batch -> dp; layers -> pp schedule 1f1b; zero 1 over dp;", 4, 2, 1, 2},
        {"pp 2; dp 2;", "batch -> dp; layers -> pp schedule 1f1b; zero 3 over dp;", 4, 2, 1, 2},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        Arena arena = {0};
        Opts o = defaults();
        o.tied = 1;
        o.precision = "bf16 master fp32";
        o.gpus = rows[i].gpus;
        o.mesh = rows[i].mesh;
        o.layout = rows[i].layout;
        o.micro_batch = 1;
        Program *prog;
        Analysis *an = compile(&arena, o, &prog);
        CHECK(an != NULL, "tied head on %s %s lowers", rows[i].mesh, rows[i].layout);
        if (!an) continue;
        int64_t table = (int64_t)o.vocab * o.hidden / rows[i].tp;
        int64_t share = rows[i].dp > 1 ? table / rows[i].dp : table;
        int last = rows[i].pp - 1;
        for (int s = 0; s < rows[i].pp; s++) {
            int64_t calls = 0, elems = 0;
            int group = 0, bytes = 0;
            for (int r = 0; r < an->nrows; r++) {
                const CollRow *row = &an->rows[r];
                if (row->stage != s || row->coll != COLL_ALLREDUCE || row->axis != prog->pp_axis || is_norm(row)) continue;
                calls += row->calls, elems = row->elems, group = row->group, bytes = row->elem_bytes;
                CHECK(strstr(row->why, "embedding group") != NULL, "the rule is named: %s", row->why);
            }
            int end = s == 0 || s == last;
            CHECK(calls == end && (!end || (elems == share && group == 2 && bytes == 2)),
                  "%s %s stage %d: %lld embedding-group all-reduces of %lld bf16 elements in a group of %d, want %d "
                  "of %lld in 2",
                  rows[i].mesh, rows[i].layout, s, (long long)calls, (long long)elems, group, end, (long long)share);
        }
        /* the copy on the last stage: weights 2, gradient 2, master 4, moments 8 bytes per element, the
         * sharded classes divided by dp under ZeRO */
        const StageProgram *sp = &prog->stages[last];
        int64_t w = 0, g = 0, m = 0, v = 0;
        for (int b = 0; b < sp->nbufs; b++) {
            const Buffer *bf = &sp->bufs[b];
            int64_t n = bf->elems * bf->instances;
            if (!strcmp(bf->name, "wte")) w = n;
            if (!strcmp(bf->name, "wte.grad")) g = n;
            if (!strcmp(bf->name, "wte.master")) m = n;
            if (!strcmp(bf->name, "wte.m") || !strcmp(bf->name, "wte.v")) v += n;
        }
        int zero3 = strstr(rows[i].layout, "zero 3") != NULL;
        CHECK(w == (zero3 ? share : table) && g == (zero3 ? share : table) && m == share && v == 2 * share,
              "%s %s: the last stage holds the table's copy: weights %lld, gradient %lld, master %lld, moments %lld "
              "elements (table %lld, share %lld)",
              rows[i].mesh, rows[i].layout, (long long)w, (long long)g, (long long)m, (long long)v, (long long)table,
              (long long)share);
        arena_free(&arena);
    }
}

/* Pipeline: b·s·h per micro-batch per boundary each way; in-flight peaks. */
static void test_pipeline(void)
{
    static const char *const kinds[] = {"gpipe", "1f1b", "interleaved 2"};
    for (int k = 0; k < 3; k++) {
        Arena arena = {0};
        Opts o = defaults();
        o.gpus = 2;
        o.mesh = "pp 2;";
        o.batch = 8;
        o.micro_batch = 1; /* m = 8 */
        char layout[96];
        snprintf(layout, sizeof layout, "layers -> pp schedule %s;", kinds[k]);
        o.layout = layout;
        Program *prog;
        Analysis *an = compile(&arena, o, &prog);
        CHECK(an != NULL, "pipeline %s lowers", kinds[k]);
        if (!an) continue;
        int64_t bsh = (int64_t)o.micro_batch * o.seq * o.hidden;
        int m = o.batch / o.micro_batch, v = k == 2 ? 2 : 1;
        for (int s = 0; s < 2; s++) {
            const StageProgram *sp = &prog->stages[s];
            CHECK(sp->boundary_elems == bsh, "message of b*s*h elements");
            int64_t fwd = 0, bwd = 0;
            for (int i = 0; i < an->nrows; i++) {
                const CollRow *r = &an->rows[i];
                if (r->stage != s || r->phase != PHASE_PIPELINE) continue;
                if (!strcmp(r->tensor, "resid")) fwd += r->calls;
                else bwd += r->calls;
            }
            /* chunk boundaries a stage sends across, forward and backward */
            int64_t want_fwd = (int64_t)m * (s == 0 ? v : v - 1), want_bwd = (int64_t)m * (s == 0 ? v - 1 : v);
            CHECK(fwd == want_fwd && bwd == want_bwd, "%s stage %d sends %lld/%lld, want %lld/%lld", kinds[k], s,
                  (long long)fwd, (long long)bwd, (long long)want_fwd, (long long)want_bwd);
        }
        if (k == 0) CHECK(prog->stages[0].nslots == m, "GPipe keeps all m = %d micro-batches in flight, got %d", m,
                          prog->stages[0].nslots);
        if (k == 1) {
            CHECK(prog->stages[0].nslots == 2, "1F1B keeps p = 2 in flight on the first stage, got %d",
                  prog->stages[0].nslots);
            CHECK(prog->stages[1].nslots == 1, "1F1B keeps 1 in flight on the last stage, got %d",
                  prog->stages[1].nslots);
            CHECK(fabs(an->bubble_ideal - 1.0 / 8) < 1e-12, "bubble (p-1)/m = 1/8, got %g", an->bubble_ideal);
        }
        if (k == 2) CHECK(fabs(an->bubble_ideal - 1.0 / 16) < 1e-12, "interleaved bubble (p-1)/(v m)");
        arena_free(&arena);
    }
}

/* Activation memory follows the schedule's peak and the recompute policy. */
static void test_activations(void)
{
    Arena arena = {0};
    Opts o = defaults();
    Analysis *none = compile(&arena, o, NULL);
    Opts s = o;
    char lay[64] = "batch -> dp; recompute selective;";
    s.layout = lay;
    Analysis *sel = compile(&arena, s, NULL);
    Opts f = o;
    f.layout = "batch -> dp; recompute full;";
    Analysis *full = compile(&arena, f, NULL);
    CHECK(none && sel && full, "recompute variants lower");
    if (!none || !sel || !full) return;
    int64_t a0 = none->stages[0].ledger[PRT_ACTIVATIONS], a1 = sel->stages[0].ledger[PRT_ACTIVATIONS],
            a2 = full->stages[0].ledger[PRT_ACTIVATIONS];
    /* selective drops exactly the attention probabilities: b * heads * s * s per layer */
    int64_t probs = (int64_t)o.micro_batch * o.heads * o.seq * o.seq * 4 * o.layers;
    CHECK(a0 - a1 == probs, "selective recompute saves b*a*s^2 per layer: %lld, want %lld", (long long)(a0 - a1),
          (long long)probs);
    /* full keeps the layer inputs (+ the embedding/head's own) */
    int64_t inputs = (int64_t)o.micro_batch * o.seq * o.hidden * 4 * (o.layers + 1);
    CHECK(a2 < a1 && a2 >= inputs, "full recompute keeps at least the %d layer inputs: %lld", o.layers, (long long)a2);
    arena_free(&arena);
}

/* The activation bytes of one layer: the ledger of two layers less that of one. */
static int64_t layer_activations(Opts o, const char *what)
{
    int64_t a[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        Arena arena = {0};
        o.layers = k + 1;
        Analysis *an = compile(&arena, o, NULL);
        CHECK(an != NULL, "%s: the %d-layer plan lowers", what, k + 1);
        if (an) a[k] = an->stages[0].ledger[PRT_ACTIVATIONS];
        arena_free(&arena);
    }
    return a[1] - a[0];
}

/* Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
 * Transformer Models", Table 2: the activation bytes of one GPT-3 layer
 * (s = 2048, b = 1, h = 12288, a = 96, 16-bit activations, 1-byte dropout
 * masks, t = 8):
 *   no parallelism            sbh (34 + 5as/h)
 *   tensor parallel           sbh (10 + 24/t + 5as/(ht))
 *   tensor + sequence         sbh/t (34 + 5as/h)
 *   tensor, selective         sbh (10 + 24/t)
 *   tensor + sequence, sel.   sbh 34/t
 *   full recompute            2 sbh
 * The 34 sbh are parc's exactly, term by term: the layer input and the two
 * norm inputs' other copies (2 + 2 + 2 + 2), q k v (6), attention's output
 * (2), the MLP's 8 + 8, and the two branch outputs' 1-byte dropout masks
 * (1 + 1); without dropout the masks go: 32 sbh.  parc differs in two places,
 * both asserted below:
 *   - the 5as/h term is 2as/h: attention is one fused op that keeps only the
 *     softmax output P (2 as^2 b); the dropped probabilities P * M / (1 - p)
 *     (2 as^2 b) and their mask M (as^2 b), which the paper counts as stored,
 *     are rebuilt in backward from P and the counter-based mask hash.  With
 *     flash attention (or selective recompute) nothing of size s^2 is kept:
 *     the term is 0, as the paper's selective rows;
 *   - LayerNorm keeps its mean and 1/std per token in fp32: 2 norms x 2 x 4
 *     bytes = 16 sb per layer (split with the sequence under sequence
 *     parallelism), which the paper leaves out. */
static void test_textbook_activations(void)
{
    const int64_t s = 2048, b = 1, h = 12288, a = 96, t = 8;
    const int64_t sbh = s * b * h, probs = 2 * a * s * s * b, stats = 16 * s * b;
    struct {
        const char *what;
        int tp, sp, flash;
        const char *recompute;
        double dropout;
        int64_t want, paper;
    } rows[] = {
        {"no parallelism", 0, 0, 0, "", 0.1, 34 * sbh + probs + stats, sbh * (34 + 5 * a * s / h)},
        {"no parallelism, no dropout", 0, 0, 0, "", 0, 32 * sbh + probs + stats, 0},
        {"no parallelism, flash", 0, 0, 1, "", 0.1, 34 * sbh + stats, 34 * sbh},
        {"tensor parallel", 1, 0, 0, "", 0.1, 10 * sbh + 24 * sbh / t + probs / t + stats,
         sbh * 10 + sbh * 24 / t + sbh * 5 * a * s / (h * t)},
        {"tensor + sequence parallel", 1, 1, 0, "", 0.1, 34 * sbh / t + probs / t + stats / t,
         sbh * (34 + 5 * a * s / h) / t},
        {"tensor parallel, selective recompute", 1, 0, 0, "recompute selective;", 0.1,
         10 * sbh + 24 * sbh / t + stats, sbh * 10 + sbh * 24 / t},
        {"tensor + sequence parallel, selective recompute", 1, 1, 0, "recompute selective;", 0.1,
         34 * sbh / t + stats / t, 34 * sbh / t},
        {"tensor + sequence parallel, flash", 1, 1, 1, "", 0.1, 34 * sbh / t + stats / t, 34 * sbh / t},
        {"full recompute", 1, 1, 0, "recompute full;", 0.1, 2 * sbh / t, 2 * sbh / t},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        Opts o = defaults();
        o.precision = "bf16 master fp32";
        o.seq = (int)s, o.hidden = (int)h, o.heads = (int)a, o.ffn = (int)(4 * h), o.vocab = 256;
        o.batch = 1, o.micro_batch = 1;
        o.flash = rows[i].flash, o.dropout = rows[i].dropout;
        char layout[160];
        if (rows[i].tp) {
            o.mesh = "tp 8;", o.gpus = (int)t;
            snprintf(layout, sizeof layout, "heads -> tp; ffn -> tp; vocab -> tp;%s %s",
                     rows[i].sp ? " sequence_parallel over tp;" : "", rows[i].recompute);
        } else {
            snprintf(layout, sizeof layout, "batch -> dp; %s", rows[i].recompute);
        }
        o.layout = layout;
        int64_t got = layer_activations(o, rows[i].what);
        CHECK(got == rows[i].want, "GPT-3 layer, %s: %lld activation bytes, want %lld (%.4g sbh)", rows[i].what,
              (long long)got, (long long)rows[i].want, (double)rows[i].want / (double)sbh);
        /* where the plan meets the paper's assumptions, its figure exactly
         * (the paper leaves out the norms' statistics) */
        int full = strstr(rows[i].recompute, "full") != NULL;
        int kept_probs = !rows[i].flash && !rows[i].recompute[0];
        int64_t norm_stats = full ? 0 : stats / (rows[i].sp ? t : 1);
        if (rows[i].paper && !kept_probs)
            CHECK(got - norm_stats == rows[i].paper, "GPT-3 layer, %s: the paper's %lld bytes", rows[i].what,
                  (long long)rows[i].paper);
        if (rows[i].paper && kept_probs)
            CHECK(rows[i].paper - (got - norm_stats) == 3 * a * s * s * b / (rows[i].tp ? t : 1),
                  "GPT-3 layer, %s: the paper's figure less the rebuilt dropped probabilities and mask", rows[i].what);
    }
}

/* Grouped-query attention keeps K and V at kv_heads: attention saves the
 * grouped qkv it reads, b s (heads + 2 kv_heads) head_dim elements, where
 * the same sizes with kv_heads = heads keep b s 3 heads head_dim; nothing
 * else of the layer differs (a heads split divides both by t). */
static void test_gqa_activations(void)
{
    for (int tp = 0; tp < 2; tp++) {
        Opts o = defaults();
        o.block = "llama", o.rope = "theta 10000";
        if (tp) o.mesh = "tp 2;", o.gpus = 2, o.layout = "heads -> tp; ffn -> tp; vocab -> tp;";
        int64_t t = tp ? 2 : 1, s = o.seq, b = o.micro_batch, NH = o.heads, KV = 2, HD = o.hidden / o.heads;
        int64_t mha = layer_activations(o, "mha");
        o.kv_heads = (int)KV;
        int64_t gqa = layer_activations(o, "gqa");
        int64_t want = mha - 2 * (NH - KV) * HD * s * b * 4 / t; /* fp32 activations */
        CHECK(gqa == want, "GQA layer (tp %lld): %lld activation bytes, want %lld (the MHA layer's %lld less k and v "
              "of %lld heads)", (long long)t, (long long)gqa, (long long)want, (long long)mha, (long long)(NH - KV));
        CHECK(mha > 0, "the MHA layer keeps activations");
    }
    /* Llama-3 405B's layer (Dubey et al. 2024, table 3: h 16384, 128 query heads
     * sharing 8 key/value heads of 128, FFN 53248) at s 8192, b 1, tp 8 with
     * sequence parallelism, 16-bit activations: q k v keep s b (128 + 16) 128 x 2 / 8
     * bytes, 2.25 s b h / 8 where repeated K/V would keep 6 s b h / 8 */
    Opts o = defaults();
    o.block = "llama", o.rope = "theta 500000", o.precision = "bf16 master fp32";
    o.hidden = 16384, o.heads = 128, o.ffn = 53248, o.seq = 8192, o.micro_batch = 1, o.batch = 1, o.vocab = 256;
    o.gpus = 8, o.mesh = "tp 8;", o.layout = "heads -> tp; ffn -> tp; vocab -> tp; sequence_parallel over tp;";
    int64_t mha = layer_activations(o, "405B-shaped, MHA");
    o.kv_heads = 8;
    int64_t gqa = layer_activations(o, "405B-shaped, GQA");
    int64_t sbh = 8192LL * 16384, kv_saved = 2LL * (128 - 8) * 128 * 8192 * 2 / 8;
    CHECK(gqa == mha - kv_saved && kv_saved * 8 * 4 == sbh * 15,
          "Llama-3 405B's layer: %lld activation bytes per GPU, the MHA layer's %lld less K and V of 120 heads "
          "(%lld bytes = 3.75 s b h / 8 in 16-bit)", (long long)gqa, (long long)mha, (long long)kv_saved);
}

/* Pipeline staging: each send copy still in flight holds one message in its
 * own dtype (2 bytes per element in a bf16 plan), at most the schedule's
 * in-flight peak (+1 not yet reaped) per direction, and one more for the
 * receive the runtime posts ahead of its op: a 64-stage GPT-3 pipeline books
 * 66 copies of b s h x 2 bytes on its first stage, 130 on the others, in host
 * memory (the runtime copies every message there, whatever the backend): the
 * GPU's comm holds none of it. */
static void test_pipeline_staging(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.precision = "bf16 master fp32";
    o.layers = 64, o.seq = 2048, o.hidden = 12288, o.heads = 96, o.ffn = 4 * 12288, o.vocab = 256;
    o.gpus = 8, o.nodes = 8, o.mesh = "pp 64;", o.layout = "layers -> pp schedule 1f1b;";
    o.batch = 128, o.micro_batch = 1;
    Program *prog;
    Analysis *an = compile(&arena, o, &prog);
    CHECK(an != NULL, "64-stage pipeline lowers");
    if (!an) return;
    const int64_t message = 2LL * 2048 * 12288; /* b s h in bf16 */
    int64_t worst = 0;
    for (int s = 0; s < prog->nstages; s++) {
        const StageProgram *sp = &prog->stages[s];
        int64_t fwd = s < 63 ? prog->schedule.peak_in_flight[s] + 1 : 0;
        int64_t bwd = s > 0 ? prog->schedule.peak_in_flight[s - 1] + 1 : 0;
        CHECK(sp->host_staging == (fwd + bwd + 1) * message,
              "stage %d: staging %lld bytes = (%lld + %lld + 1) copies of %lld bytes", s, (long long)sp->host_staging,
              (long long)fwd, (long long)bwd, (long long)message);
        CHECK(sp->ledger[PRT_COMM] == 0, "stage %d: the copies are host memory, not the GPU's comm (%lld)", s,
              (long long)sp->ledger[PRT_COMM]);
        if (sp->host_staging > worst) worst = sp->host_staging;
    }
    CHECK(prog->stages[0].host_staging == 66 * message, "stage 0: 66 copies of one bf16 message");
    CHECK(worst == 130 * message && worst < 7LL << 30, "the worst stage books 130 bf16 messages (%.3g GiB)",
          (double)worst / (1 << 30));
    arena_free(&arena);
}

/* The MFU numerator: 6 x (non-embedding parameters + the head's matmul) x
 * tokens + attention 12 L s h per token.  Embedding and position lookups do
 * no matmul; a tied head reads the table as its weight, so it counts once. */
static void test_model_flops(void)
{
    for (int tied = 0; tied < 2; tied++) {
        Arena arena = {0};
        Opts o = defaults();
        o.tied = tied;
        Program *prog;
        Analysis *an = compile(&arena, o, &prog);
        CHECK(an != NULL, "model FLOPs plan lowers (tied %d)", tied);
        if (!an) continue;
        double V = o.vocab, H = o.hidden, S = o.seq, P = (double)params_of(prog);
        double want_params = tied ? P - S * H : P - V * H - S * H; /* less wpe, and wte unless it is the head */
        double tokens = (double)o.batch * S, attn = 12.0 * o.layers * S * H;
        CHECK(an->model_matmul_params == want_params, "tied %d: %.0f matmul parameters, want %.0f", tied,
              an->model_matmul_params, want_params);
        CHECK(an->model_flops_per_step == 6 * want_params * tokens + attn * tokens,
              "tied %d: model FLOPs %.6g, want 6 x %.0f x %.0f + %.0f x %.0f", tied, an->model_flops_per_step,
              want_params, tokens, attn, tokens);
        arena_free(&arena);
    }
}

/* Shared experts are charged for every token: each forward GEMM of
 * mlp.shared.up / mlp.shared.down takes all micro_batch x seq tokens, and the
 * model FLOPs of the MFU grow by 6 x their parameters x the step's tokens. */
static void test_moe_shared_flops(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.block = "moe";
    Analysis *routed = compile(&arena, o, NULL);
    o.block = "moe_shared";
    Program *prog = NULL;
    Analysis *an = compile(&arena, o, &prog);
    CHECK(routed != NULL && an != NULL, "mixture-of-experts plans with and without shared experts lower");
    if (!routed || !an) {
        arena_free(&arena);
        return;
    }
    double T = (double)o.micro_batch * o.seq, H = o.hidden, F = 2 * 32; /* shared 2 x expert_ffn 32 */
    int ups = 0, downs = 0;
    for (int s = 0; s < prog->nstages; s++)
        for (int q = 0; q < SEQ_COUNT; q++)
            for (int i = 0; i < prog->stages[s].seq[q].n; i++) {
                const Instr *ins = &prog->stages[s].seq[q].ins[i];
                if (ins->entry != ENTRY_FORWARD || ins->fn != RT_prt_matmul_fwd) continue;
                const char *name = prog->graph->ops[ins->op].name;
                if (!strcmp(name, "mlp.shared.up")) {
                    ups++;
                    CHECK(ins->flops == 2 * T * H * 2 * F, "mlp.shared.up forward FLOPs %g, want 2 x %g x %g x %g",
                          ins->flops, T, H, 2 * F);
                } else if (!strcmp(name, "mlp.shared.down")) {
                    downs++;
                    CHECK(ins->flops == 2 * T * F * H, "mlp.shared.down forward FLOPs %g, want 2 x %g x %g x %g",
                          ins->flops, T, F, H);
                }
            }
    CHECK(ups > 0 && downs > 0, "the shared experts' GEMMs are lowered (%d up, %d down)", ups, downs);
    double shared_params = (double)o.layers * (H * 2 * F + F * H), tokens = (double)o.batch * o.seq;
    CHECK(an->model_flops_per_step - routed->model_flops_per_step == 6 * shared_params * tokens,
          "model FLOPs with shared experts %.6g, without %.6g: want 6 x %.0f x %.0f more", an->model_flops_per_step,
          routed->model_flops_per_step, shared_params, tokens);
    arena_free(&arena);
}

/* Placement errors name the op, the tensor and the rule. */
static void test_placement_errors(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.gpus = 2;
    o.mesh = "tp 2;";
    o.layout = "hidden -> tp;";
    diag_mute();
    int before = diag_error_count();
    Analysis *an = compile(&arena, o, NULL);
    diag_unmute();
    CHECK(an == NULL && diag_error_count() > before, "a norm with hidden split on tp is an error");
    arena_free(&arena);
    /* seq alone on an axis is context parallelism: attention gathers the qkv */
    Arena arena2 = {0};
    o.layout = "seq -> tp;";
    an = compile(&arena2, o, NULL);
    CHECK(an != NULL, "attention with seq split on an axis of its own compiles (context parallelism)");
    arena_free(&arena2);
}

/* The program verifier (run after every lowering pass) over every schedule kind and
 * many (p, m, v), with ZeRO and sequence parallelism mixed in. */
static void test_verifier_sweep(void)
{
    static const char *const kinds[] = {"gpipe", "1f1b", "interleaved 2", "interleaved 4"};
    int lowered = 0, tried = 0;
    for (int p = 2; p <= 8; p *= 2)
        for (int k = 0; k < 4; k++)
            for (int m = p; m <= 4 * p; m += p)
                for (int z = 0; z <= 3; z += 3) {
                    int v = k == 2 ? 2 : k == 3 ? 4 : 1;
                    Arena arena = {0};
                    Opts o = defaults();
                    o.layers = p * v * 2;
                    o.gpus = p * 2;
                    o.batch = m * 2;
                    o.micro_batch = 1;
                    char mesh[64], layout[160];
                    snprintf(mesh, sizeof mesh, "pp %d; dp 2;", p);
                    snprintf(layout, sizeof layout, "batch -> dp; layers -> pp schedule %s; zero %d over dp;", kinds[k],
                             z);
                    o.mesh = mesh;
                    o.layout = layout;
                    Program *prog = NULL;
                    tried++;
                    if (compile(&arena, o, &prog) && prog) {
                        lowered++;
                        int slots_ok = 1;
                        for (int s = 0; s < prog->nstages; s++)
                            if (prog->stages[s].nslots != prog->schedule.peak_in_flight[s]) slots_ok = 0;
                        CHECK(slots_ok, "p=%d m=%d %s: activation slots equal the schedule's in-flight peak", p, m,
                              kinds[k]);
                    }
                    arena_free(&arena);
                }
    CHECK(lowered == tried, "every (p, m, v) lowers and verifies: %d of %d", lowered, tried);
}

/* Every combination of mesh, rules, ZeRO stage, recompute, schedule and
 * sequence parallelism the front end accepts must lower and analyze without an
 * internal error (PARC_BUG aborts, which fails the test), or be refused with a
 * diagnostic. */
static void test_layout_combinations(void)
{
    static const char *const meshes[] = {"dp 4;", "tp 4;", "pp 4;", "dp 2; tp 2;", "pp 2; tp 2;", "pp 2; dp 2;",
                                         "tp 2; dp 2;", "dp 2; pp 2;"};
    static const char *const rules[] = {"", "heads -> tp; ffn -> tp;", "heads -> tp; ffn -> tp; vocab -> tp;",
                                        "ffn -> tp;", "vocab -> tp;"};
    static const char *const extras[] = {"", "sequence_parallel over tp;", "recompute selective;",
                                         "recompute full;", "zero 1 over dp;", "zero 2 over dp;", "zero 3 over dp;",
                                         "zero 3 over dp; recompute full; sequence_parallel over tp;",
                                         "pipeline_scatter on;", "pipeline_scatter on; recompute full; zero 1 over dp;"};
    static const char *const scheds[] = {"gpipe", "1f1b", "interleaved 2"};
    static const char *const blocks[] = {"gpt2", "llama", "mlp", "rope"}; /* rope: llama, kv_heads 2, rotary */
    int accepted = 0, lowered = 0, refused = 0;
    for (size_t mi = 0; mi < sizeof meshes / sizeof meshes[0]; mi++)
        for (size_t ri = 0; ri < sizeof rules / sizeof rules[0]; ri++)
            for (size_t ei = 0; ei < sizeof extras / sizeof extras[0]; ei++)
                for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
                    const char *mesh = meshes[mi];
                    int has_dp = strstr(mesh, "dp") != NULL, has_tp = strstr(mesh, "tp") != NULL,
                        has_pp = strstr(mesh, "pp") != NULL;
                    char layout[256];
                    snprintf(layout, sizeof layout, "%s %s %s %s", has_dp ? "batch -> dp;" : "",
                             has_tp ? rules[ri] : "", has_pp ? "layers -> pp schedule " : "",
                             has_pp ? scheds[(mi + ri + ei) % 3] : "");
                    if (has_pp) strncat(layout, ";", sizeof layout - strlen(layout) - 1);
                    strncat(layout, extras[ei], sizeof layout - strlen(layout) - 1);
                    Arena arena = {0};
                    Opts o = defaults();
                    o.block = blocks[bi];
                    if (!strcmp(o.block, "rope")) o.block = "llama", o.kv_heads = 2, o.rope = "theta 500000";
                    o.gpus = 4;
                    o.mesh = mesh;
                    o.layout = layout;
                    o.batch = 16;
                    o.micro_batch = 2;
                    o.layers = 8;
                    diag_mute();
                    int before = diag_error_count();
                    Program *prog = NULL;
                    Analysis *an = compile(&arena, o, &prog);
                    int errors = diag_error_count() - before;
                    diag_unmute();
                    if (an) {
                        lowered++;
                        CHECK(an->max_total > 0 && errors == 0, "%s / %s lowered with a ledger", mesh, layout);
                        program_verify(prog);
                    } else if (errors > 0) {
                        refused++;
                    } else {
                        CHECK(0, "%s / %s: neither lowered nor refused with a diagnostic", mesh, layout);
                    }
                    accepted++;
                    arena_free(&arena);
                }
    CHECK(lowered > accepted / 2, "most combinations lower: %d of %d (refused %d)", lowered, accepted, refused);
    printf("layout combinations: %d lowered, %d refused with diagnostics\n", lowered, refused);
}


/* ---------------------------------------------------------------- the ops table */

static int is16(const StageProgram *sp, const Instr *ins, int k, int wide)
{
    const Arg *a = &ins->args[k];
    return wide && a->kind == ARG_BUF && (sp->bufs[a->buf].dtype == PRT_BF16 || sp->bufs[a->buf].dtype == PRT_F16);
}
static int given(const Instr *ins, int k) { return ins->args[k].kind == ARG_BUF; }

/* The runtime op's scratch from its call's arguments, by the runtime's own
 * signatures (parc_rt.h): independent of the table's shapes. */
static int64_t call_scratch(const StageProgram *sp, const Instr *ins, int w)
{
#define A(k) (ins->args[k].i)
#define W(k) is16(sp, ins, k, w)
    switch (ins->fn) {
    case RT_prt_matmul_fwd:
    case RT_prt_matmul_t_fwd: return prt_scratch_matmul_fwd(A(4), A(5), A(3), W(2), W(1), W(0));
    case RT_prt_matmul_bias_fwd: return prt_scratch_matmul_fwd(A(5), A(6), A(4), W(2), W(1), W(0));
    case RT_prt_matmul_bias_bwd:
        return prt_scratch_matmul_bwd(A(7), A(8), A(6), given(ins, 0), given(ins, 1), W(4), W(1), W(3), W(2), W(0));
    case RT_prt_matmul_bwd:
    case RT_prt_matmul_t_bwd:
        return prt_scratch_matmul_bwd(A(6), A(7), A(5), given(ins, 0), given(ins, 1), W(4), W(1), W(3), W(2), W(0));
    case RT_prt_attention_fwd: return prt_scratch_attention_fwd(A(4), A(7), A(3) * A(5), given(ins, 1), W(1), W(2), W(0));
    case RT_prt_attention_bwd:
        return prt_scratch_attention_bwd(A(5), A(8), A(4) * A(6), given(ins, 3), W(3), W(2), W(0), W(1));
    case RT_prt_attention_dropout_fwd:
        return prt_scratch_attention_dropout_fwd(A(4), A(7), A(3) * A(5), given(ins, 1), W(1), W(2), W(0));
    case RT_prt_attention_dropout_bwd:
        return prt_scratch_attention_dropout_bwd(A(5), A(8), A(4) * A(6), given(ins, 3), W(3), W(2), W(0), W(1));
    case RT_prt_xent_fwd: return prt_scratch_xent_fwd(A(4));
    case RT_prt_layernorm_bwd: return prt_scratch_layernorm_bwd(A(9), W(1), W(2));
    case RT_prt_rmsnorm_bwd: return prt_scratch_rmsnorm_bwd(A(7), W(1));
    case RT_prt_embed_bwd: return prt_scratch_embed_bwd(A(4), W(0));
    case RT_prt_moe_router_fwd: return prt_scratch_moe_router_fwd(A(7), A(8), A(9), W(6), W(5), W(0));
    case RT_prt_moe_router_bwd:
        return prt_scratch_moe_router_bwd(A(9), A(10), A(11), given(ins, 0), given(ins, 1), W(8), W(1), W(7), W(2),
                                          W(0));
    /* the grouped GEMM's bound: every routed row (the input's) through one expert */
    case RT_prt_moe_matmul_fwd:
        return prt_scratch_moe_matmul_fwd(sp->bufs[ins->args[1].buf].elems / A(5), A(5), A(6), W(2), W(1), W(0));
    case RT_prt_moe_matmul_bwd:
        return prt_scratch_moe_matmul_bwd(sp->bufs[ins->args[3].buf].elems / A(7), A(7), A(8), given(ins, 0),
                                          given(ins, 1), W(4), W(1), W(3), W(2), W(0));
    default: return 0;
    }
#undef A
#undef W
}

/* FLOPs of a call from its arguments, the textbook counts. */
static double call_flops(const Instr *ins)
{
#define A(k) ((double)ins->args[k].i)
    /* a linear backward: 2 N K M for each gradient its pointers name (din, dw) */
    double gemms = (ins->nargs > 1) * ((ins->args[0].kind == ARG_BUF) + (ins->args[1].kind == ARG_BUF));
    switch (ins->fn) {
    case RT_prt_matmul_fwd:
    case RT_prt_matmul_t_fwd: return 2 * A(3) * A(4) * A(5);
    case RT_prt_matmul_bwd:
    case RT_prt_matmul_t_bwd: return 2 * gemms * A(5) * A(6) * A(7);
    case RT_prt_matmul_bias_fwd: return 2 * A(4) * A(5) * A(6) + A(4) * A(6); /* the bias: one add per output */
    case RT_prt_matmul_bias_bwd: return 2 * gemms * A(6) * A(7) * A(8);
    case RT_prt_attention_fwd:
    case RT_prt_attention_dropout_fwd: return 4 * A(3) * A(4) * A(4) * A(5) * A(7); /* B T T NH HD: per query head */
    case RT_prt_attention_bwd:
    case RT_prt_attention_dropout_bwd:
        return (ins->args[3].kind == ARG_NULL ? 12 : 8) * A(4) * A(5) * A(5) * A(6) * A(8);
    case RT_prt_dropout_fwd:
    case RT_prt_dropout_bwd: return ins->fn == RT_prt_dropout_bwd ? A(3) : A(3) * A(4) * A(5);
    case RT_prt_xent_fwd: return 5 * A(4) * A(5);
    case RT_prt_xent_bwd: return 3 * A(4) * A(5);
    case RT_prt_rope_fwd:
    case RT_prt_rope_bwd: return 3 * A(2) * A(3) * A(4) * A(6) * A(7); /* B T G R HD: rotated elements */
    case RT_prt_moe_router_fwd: return 2 * A(7) * A(8) * A(9);             /* logits: T H E */
    case RT_prt_moe_router_bwd: return 2 * gemms * A(9) * A(10) * A(11);
    case RT_prt_moe_combine_fwd: return 2 * A(4) * A(5) * A(6);            /* T H topk */
    case RT_prt_moe_combine_bwd: return 4 * A(6) * A(7) * A(8);
    default: return -1; /* not checked here */
    }
#undef A
}

/* Every op of the table appears in lowered programs, each entry instruction
 * is the row's runtime function with the row's FLOPs for its shape, and the
 * ledger's workspace is the largest prt_scratch_* request over the stage's
 * calls (fp32), with the CPU's widening extra in cpu_widen. */
static void test_ops_table(void)
{
    for (int k = 0; k < OP_COUNT; k++) {
        char why[256];
        CHECK(!ops_row_incomplete(k, why, sizeof why), "op %s has a complete row: %s", op_names[k], why);
    }
    enum { NPLANS = 9 };
    Opts plans[NPLANS];
    for (int i = 0; i < NPLANS; i++) plans[i] = defaults();
    plans[1].precision = "bf16 master fp32", plans[1].mesh = "tp 2;", plans[1].gpus = 2,
    plans[1].layout = "heads -> tp; ffn -> tp; vocab -> tp;";
    plans[2].block = "llama", plans[2].precision = "bf16 master fp32", plans[2].layout = "recompute full;",
    plans[2].rope = "theta 500000", plans[2].kv_heads = 2;
    plans[3].block = "relu", plans[3].tied = 1, plans[3].no_positions = 1;
    plans[4].block = "mlp", plans[4].precision = "bf16 master fp32", plans[4].mesh = "pp 2; dp 2;", plans[4].gpus = 4,
    plans[4].layout = "batch -> dp; layers -> pp schedule 1f1b; zero 3 over dp;";
    plans[5].precision = "bf16 master fp32", plans[5].mesh = "tp 2;", plans[5].gpus = 2,
    plans[5].layout = "heads -> tp; ffn -> tp; sequence_parallel over tp; recompute selective;",
    plans[5].rope = "scaling llama3 factor 8 low_freq_factor 1 high_freq_factor 4 original_max_positions 8192";
    plans[6].precision = "bf16 master fp32", plans[6].mesh = "tp 2;", plans[6].gpus = 2, plans[6].dropout = 0.1,
    plans[6].layout = "heads -> tp; ffn -> tp; vocab -> tp; sequence_parallel over tp;";
    plans[7].flash = 1, plans[7].dropout = 0.25, plans[7].mesh = "pp 2;", plans[7].gpus = 2,
    plans[7].layout = "layers -> pp schedule 1f1b;";
    plans[8].block = "moe", plans[8].precision = "bf16 master fp32", plans[8].layout = "batch -> dp; recompute full;";
    int seen[OP_COUNT][3] = {{0}}, seen_folded = 0;
    for (int pi = 0; pi < NPLANS; pi++) {
        Arena arena = {0};
        Program *prog = NULL;
        int before = diag_error_count(); /* the mlp plans warn that `heads` is unused */
        diag_mute();
        Analysis *an = compile(&arena, plans[pi], &prog);
        diag_unmute();
        CHECK(an != NULL && diag_error_count() == before, "ops plan %d lowers without errors", pi);
        if (!an) {
            arena_free(&arena);
            continue;
        }
        for (int s = 0; s < prog->nstages; s++) {
            const StageProgram *sp = &prog->stages[s];
            int64_t base = 0, want = 0, work_bufs = 0;
            for (int b = 0; b < sp->nbufs; b++)
                if (sp->bufs[b].klass == PRT_WORKSPACE)
                    work_bufs += sp->bufs[b].elems * sp->bufs[b].instances * dtype_bytes(sp->bufs[b].dtype);
            for (int q = 0; q < SEQ_COUNT; q++)
                for (int i = 0; i < sp->seq[q].n; i++) {
                    const Instr *ins = &sp->seq[q].ins[i];
                    int64_t b32 = call_scratch(sp, ins, 0), b16 = call_scratch(sp, ins, 1);
                    if (b32 > base) base = b32;
                    if (b16 > want) want = b16;
                    if (ins->entry == ENTRY_NONE) {
                        CHECK(call_scratch(sp, ins, 1) == 0, "plan %d: %s outside an op's entry takes scratch", pi,
                              rt_fn_names[ins->fn]);
                        continue;
                    }
                    const Op *op = &prog->graph->ops[ins->op];
                    const OpDesc *d = &op_table[op->kind];
                    int bwd = ins->entry == ENTRY_BACKWARD;
                    seen[op->kind][ins->entry]++;
                    int entry = bwd ? d->bwd : d->fwd;
                    if (op->kind == OP_ATTENTION && ins->shape.dropout) /* the form with dropout */
                        entry = bwd ? RT_prt_attention_dropout_bwd : RT_prt_attention_dropout_fwd;
                    /* a linear with its bias folded in: the bias's FLOPs {N, M} join */
                    int folded = d->folds_bias && ins->fn == (bwd ? d->bwd_bias : d->fwd_bias);
                    OpShape bias_shape = {{ins->shape.d[0], ins->shape.d[2], 0, 0}, -1, 0, 0, OP_PART_WHOLE, -1, 0, 0};
                    double row_flops =
                        d->flops(&ins->shape, bwd) + (folded ? op_table[OP_BIAS].flops(&bias_shape, bwd) : 0);
                    seen_folded += folded;
                    CHECK(ins->fn == entry || folded, "plan %d: %s %s is its row's entry", pi, op->name,
                          bwd ? "backward" : "forward");
                    CHECK(ins->flops == row_flops, "plan %d: %s FLOPs %g are its row's %g", pi, op->name, ins->flops,
                          row_flops);
                    double f = call_flops(ins);
                    CHECK(f < 0 || f == ins->flops, "plan %d: %s FLOPs %g, its arguments say %g", pi, op->name,
                          ins->flops, f);
                    CHECK(ops_instr_scratch(prog, sp, ins, 1) == b16 && ops_instr_scratch(prog, sp, ins, 0) == b32,
                          "plan %d: %s scratch %lld, its call takes %lld", pi, op->name,
                          (long long)ops_instr_scratch(prog, sp, ins, 1), (long long)b16);
                }
            CHECK(sp->ledger[PRT_WORKSPACE] == work_bufs + 4 * base,
                  "plan %d stage %d: workspace %lld = buffers %lld + 4 x largest fp32 scratch %lld", pi, s,
                  (long long)sp->ledger[PRT_WORKSPACE], (long long)work_bufs, (long long)base);
            CHECK(sp->cpu_widen == 4 * (want > base ? want - base : 0),
                  "plan %d stage %d: CPU widening %lld = 4 x (%lld - %lld)", pi, s, (long long)sp->cpu_widen,
                  (long long)want, (long long)base);
            if (pi == 1 || pi == 2) CHECK(want > base, "plan %d: a 16-bit plan widens operands on the CPU", pi);
        }
        arena_free(&arena);
    }
    CHECK(seen_folded > 0, "a linear with its bias folded in appears in a lowered program");
    for (int k = 0; k < OP_COUNT; k++) {
        CHECK(seen[k][ENTRY_FORWARD] > 0, "op %s's forward appears in a lowered program", op_names[k]);
        CHECK(op_table[k].emit_bwd == NULL || seen[k][ENTRY_BACKWARD] > 0,
              "op %s's backward appears in a lowered program", op_names[k]);
    }
}

/* First-writer gradients (first_write.c): in a gpt2 block's backward every
 * activation gradient is written by its first writer: four GEMM input
 * gradients, GELU's, attention's dqkv and the residual's four accs get the
 * `writes` bit, and no zero is left of ten; the head's three (layer norm, GEMM, cross-entropy) all go, and the position
 * embedding's backward writes the token embedding's gradient (a copy).
 * With tp 2 the column-parallel GEMMs' partial input gradients are written too.
 * A llama block's SwiGLU and RMSNorm gradients, an MLP block's ReLU and a
 * dropout's are written by their first writers as well. */
static void count_seq(const Seq *q, int *zeros, int *writes, int *copies, int *accs)
{
    *zeros = *writes = *copies = *accs = 0;
    for (int i = 0; i < q->n; i++) {
        *zeros += q->ins[i].fn == RT_prt_zero;
        *writes += q->ins[i].writes != 0;
        *copies += q->ins[i].fn == RT_prt_copy;
        *accs += q->ins[i].fn == RT_prt_acc;
    }
}

/* Weight gradients across the step (first_write_step): with one micro-batch a
 * step the gpt2 block's four GEMMs write their dw and db and its two layer
 * norms their dw and db, and zero_grads.block keeps no zero; the head's GEMM
 * and final norm write theirs, and only the token and position tables'
 * gradients (a scatter-add, and a sum the position backward adds) keep their
 * zeros.  With four micro-batches the gradients accumulate: every zero stays
 * and no weight gradient is written. */
static void test_step_writes(void)
{
    for (int one = 0; one < 2; one++) {
        Arena arena = {0};
        Program *prog;
        Opts o = defaults();
        if (one) o.batch = o.micro_batch;
        Analysis *an = compile(&arena, o, &prog);
        CHECK(an != NULL, "gpt2 plan with %s lowers", one ? "one micro-batch" : "four micro-batches");
        if (!an) continue;
        const StageProgram *sp = &prog->stages[0];
        int weight_bits = 0;
        for (int q = 0; q < SEQ_COUNT; q++)
            for (int i = 0; i < sp->seq[q].n; i++) {
                const Instr *ins = &sp->seq[q].ins[i];
                unsigned wmask = ins->fn == RT_prt_matmul_bias_bwd ? (1u << 1 | 1u << 5)
                                 : ins->fn == RT_prt_matmul_bwd     ? 1u << 1
                                 : ins->fn == RT_prt_layernorm_bwd  ? (1u << 1 | 1u << 2)
                                                                    : 0u;
                if (!wmask) continue;
                CHECK((ins->writes & wmask) == (one ? wmask : 0u), "%s: %s in %s writes argument mask %#x",
                      one ? "one micro-batch" : "four", rt_fn_names[ins->fn], seq_names[q], ins->writes);
                weight_bits += __builtin_popcount(ins->writes & wmask);
            }
        int z, w, c, a;
        count_seq(&sp->seq[SEQ_ZERO_GRADS_BLOCK], &z, &w, &c, &a);
        CHECK(z == (one ? 0 : 12), "%s: zero_grads.block keeps %d zeros", one ? "one micro-batch" : "four", z);
        count_seq(&sp->seq[SEQ_ZERO_GRADS_ONCE], &z, &w, &c, &a);
        CHECK(z == (one ? 2 : 5), "%s: zero_grads.once keeps %d zeros", one ? "one micro-batch" : "four", z);
        CHECK(weight_bits == (one ? 4 * 2 + 2 * 2 + 1 + 2 : 0), "%s: %d weight-gradient write bits",
              one ? "one micro-batch" : "four", weight_bits);
        arena_free(&arena);
    }
}

static void test_first_writer(void)
{
    Arena arena = {0};
    Program *prog;
    Analysis *an = compile(&arena, defaults(), &prog);
    CHECK(an != NULL, "gpt2 plan lowers");
    if (!an) return;
    int z, w, c, a;
    const StageProgram *sp = &prog->stages[0];
    count_seq(&sp->seq[SEQ_BLOCK_BWD], &z, &w, &c, &a);
    CHECK(z == 0 && w == 10 && c == 0 && a == 4, "block backward: no zero, 10 writes, 0 copies, 4 accs; got %d %d %d %d",
          z, w, c, a);
    for (int i = 0; i < sp->seq[SEQ_BLOCK_BWD].n; i++) {
        const Instr *ins = &sp->seq[SEQ_BLOCK_BWD].ins[i];
        if (ins->fn == RT_prt_attention_bwd)
            CHECK(ins->writes == 1 && !strcmp(sp->bufs[ins->args[0].buf].name, "attn.qkv.out.grad"),
                  "attention_bwd writes dqkv (attn.qkv.out.grad), not %s (mask %#x)", sp->bufs[ins->args[0].buf].name,
                  ins->writes);
        if (ins->writes)
            CHECK(ins->writes == 1 && (ins->fn == RT_prt_matmul_bias_bwd || ins->fn == RT_prt_gelu_bwd ||
                                       ins->fn == RT_prt_acc || ins->fn == RT_prt_attention_bwd),
                  "%s writes argument mask %#x", rt_fn_names[ins->fn], ins->writes);
    }
    count_seq(&sp->seq[SEQ_HEAD_BWD], &z, &w, &c, &a);
    CHECK(z == 0 && w == 3, "head backward: no zero, 3 writes; got %d zeros, %d writes", z, w);
    FILE *dump = tmpfile();
    program_dump(prog, dump);
    rewind(dump);
    char line[4096];
    int marked = 0;
    while (fgets(line, sizeof line, dump)) marked += strstr(line, "; writes %") != NULL;
    fclose(dump);
    CHECK(marked == 14, "the IR dump marks 14 first writers, got %d", marked);
    count_seq(&sp->seq[SEQ_EMBED_BWD], &z, &w, &c, &a);
    CHECK(z == 0 && w == 1, "embed backward: no zero, 1 write; got %d zeros, %d writes", z, w);
    for (int i = 0; i < sp->seq[SEQ_EMBED_BWD].n; i++) {
        const Instr *ins = &sp->seq[SEQ_EMBED_BWD].ins[i];
        if (ins->writes)
            CHECK(ins->fn == RT_prt_pos_bwd && ins->writes == 2u, "embed backward: %s writes argument mask %#x",
                  rt_fn_names[ins->fn], ins->writes);
    }
    arena_free(&arena);

    /* the first writer of each block kind's gradients: fn, how many calls write, zeros left in the block */
    static const struct {
        const char *block;
        double dropout;
        RtFn fn;
        int calls, writes, zeros;
        const char *rope;
    } kinds[] = {
        {"llama", 0, RT_prt_swiglu_bwd, 1, 10, 0, NULL},   /* attention_bwd writes dqkv: no zero left */
        {"llama", 0, RT_prt_rmsnorm_bwd, 2, 10, 0, NULL},  /* ln2's and ln1's din are the residual's: they add */
        {"relu", 0, RT_prt_relu_bwd, 1, 5, 0, NULL},       /* acc, two GEMMs, relu and rmsnorm: no zero left */
        {"gpt2", 0.1, RT_prt_dropout_bwd, 2, 12, 0, NULL}, /* the two branch outputs' dropouts (and dqkv) */
        {"llama", 0, RT_prt_rope_bwd, 1, 11, 0, "theta 10000"}, /* attention writes the rotated dqkv, rope the qkv's */
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        Opts o = defaults();
        o.block = kinds[k].block;
        o.dropout = kinds[k].dropout;
        o.rope = kinds[k].rope;
        an = compile(&arena, o, &prog);
        CHECK(an != NULL, "%s plan lowers", kinds[k].block);
        if (!an) return;
        const Seq *q = &prog->stages[0].seq[SEQ_BLOCK_BWD];
        int calls = 0, writing = 0;
        for (int i = 0; i < q->n; i++)
            if (q->ins[i].fn == kinds[k].fn) calls++, writing += q->ins[i].writes == 1u;
        count_seq(q, &z, &w, &c, &a);
        int want_writing = kinds[k].fn == RT_prt_rmsnorm_bwd ? 0 : kinds[k].calls;
        CHECK(calls == kinds[k].calls && writing == want_writing && w == kinds[k].writes && z == kinds[k].zeros,
              "%s block backward: %d %s calls (want %d), %d of them writing (want %d), %d writes (want %d), %d zeros "
              "(want %d)",
              kinds[k].block, calls, rt_fn_names[kinds[k].fn], kinds[k].calls, writing, want_writing, w,
              kinds[k].writes, z, kinds[k].zeros);
        if (kinds[k].fn == RT_prt_rmsnorm_bwd) {  /* the final norm's, in the head, writes */
            const Seq *h = &prog->stages[0].seq[SEQ_HEAD_BWD];
            int head_writes = 0;
            for (int i = 0; i < h->n; i++) head_writes += h->ins[i].fn == RT_prt_rmsnorm_bwd && h->ins[i].writes == 1u;
            CHECK(head_writes == 1, "llama head backward: the final rmsnorm_bwd writes (%d)", head_writes);
        }
        arena_free(&arena);
    }

    Opts o = defaults();
    o.mesh = "tp 2;";
    o.layout = "heads -> tp; ffn -> tp;";
    o.gpus = 2;
    an = compile(&arena, o, &prog);
    CHECK(an != NULL, "gpt2 tp 2 plan lowers");
    if (!an) return;
    int zeros_tp, writes_tp;
    count_seq(&prog->stages[0].seq[SEQ_BLOCK_BWD], &zeros_tp, &writes_tp, &c, &a);
    /* the column-parallel GEMMs' partial input gradients (grad.part) and the accs after their
     * all-reduces are first writers too, and attention_bwd's dqkv on its local heads */
    CHECK(writes_tp == 14 && zeros_tp == 0, "tp 2 block backward: 14 writes, no zero; got %d writes, %d zeros",
          writes_tp, zeros_tp);
    arena_free(&arena);
}

/* The ring shift's verifier (overlap_tp.c) catches a ring step that writes
 * the block its shift is passing on: a child process breaks the first
 * forward step of a ring plan that way and must die by PARC_BUG naming the
 * shift, where the unbroken program verifies. */
static void test_shift_verifier(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.block = "llama";
    o.rope = "theta 10000";
    o.gpus = 2;
    o.mesh = "cp 2;";
    o.layout = "seq -> cp; cp_comm ring;";
    Program *prog = NULL;
    Analysis *an = compile(&arena, o, &prog);
    CHECK(an != NULL, "a ring plan lowers");
    if (!an) return;
    program_verify(prog);
    Seq *seq = &prog->stages[0].seq[SEQ_BLOCK_FWD];
    int at = -1;
    for (int i = 0; i + 1 < seq->n && at < 0; i++)
        if (seq->ins[i].fn == RT_prt_shift_start && seq->ins[i + 1].fn == RT_prt_ring_attention_fwd) at = i;
    CHECK(at >= 0, "the ring plan's forward starts a shift before a ring step");
    if (at < 0) return;
    fflush(stdout);
    int pipefd[2];
    CHECK(pipe(pipefd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        /* the step writes its output over the block in flight */
        seq->ins[at + 1].args[0] = seq->ins[at].args[2];
        overlap_tp_verify(prog);
        _exit(0);
    }
    close(pipefd[1]);
    char err[2048] = "";
    ssize_t n, got = 0;
    while ((n = read(pipefd[0], err + got, sizeof err - 1 - (size_t)got)) > 0) got += n;
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && strstr(err, "while the shift of"),
          "a ring step writing the block its shift passes on is a verifier error (%s)", err);
    arena_free(&arena);
}

int main(void)
{
    test_shift_verifier();
    test_ops_table();
    test_first_writer();
    test_step_writes();
    test_layout_combinations();
    test_verifier_sweep();
    test_bytes_per_parameter();
    test_bytes_per_parameter_options();
    test_zero3_use_windows();
    test_tied_across_stages();
    test_flash_attention();
    test_zero_memory();
    test_tensor_parallel();
    test_sequence_parallel();
    test_data_parallel_volumes();
    test_pipeline();
    test_activations();
    test_textbook_activations();
    test_gqa_activations();
    test_pipeline_staging();
    test_model_flops();
    test_moe_shared_flops();
    test_placement_errors();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
