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
#include "prt_scratch.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (cond) passed++;                                                   \
        else {                                                                \
            failed++;                                                         \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                       \
            printf(__VA_ARGS__);                                              \
            printf("\n");                                                     \
        }                                                                     \
    } while (0)

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
} Opts;

static Opts defaults(void)
{
    Opts o = {"gpt2", "dp 1;", "batch -> dp;", "fp32", 1, 1, 8, 2, 4, 64, 4, 256, 256, 32, 0, 0, 0, 0};
    return o;
}

static char text[8192];

static Analysis *compile(Arena *arena, Opts o, Program **prog_out)
{
    const char *block = !strcmp(o.block, "mlp")      ? "block mlp { act gelu; norm layer; bias false; residual true; }"
                        : !strcmp(o.block, "relu") ? "block mlp { act relu; norm rms; bias true; residual false; }"
                        : !strcmp(o.block, "llama") ? "block llama;"
                        : o.flash                   ? "block gpt2 { attention causal flash; }"
                                                    : "block gpt2;";
    char kv[32] = "";
    if (o.kv_heads > 0) snprintf(kv, sizeof kv, " kv_heads %d;", o.kv_heads);
    snprintf(text, sizeof text,
             "cluster { nodes %d; gpus_per_node %d;\n"
             "  gpu { memory 80 GiB; bf16 100 TFLOP/s; fp32 50 TFLOP/s; hbm 2 TB/s; }\n"
             "  link intra 100 GB/s 2 us; link inter 10 GB/s 5 us; }\n"
             "model m { vocab %d; seq %d; hidden %d; heads %d; ffn %d; layers %d;%s\n"
             "  %s repeat layers { %s } norm %s; head %s; loss cross_entropy; }\n"
             "train { batch %d; micro_batch %d; precision %s; optimizer adam lr 1e-3; }\n"
             "mesh { %s }\nlayout { %s }\n",
             o.nodes, o.gpus, o.vocab, o.seq, o.hidden, o.heads, o.ffn, o.layers, kv,
             o.no_positions ? "embed;" : "embed positions learned;", block,
             !strcmp(o.block, "llama") ? "rms" : "layer", o.tied ? "tied" : "untied", o.batch, o.micro_batch, o.precision, o.mesh, o.layout);
    static Plan plan;
    memset(&plan, 0, sizeof plan);
    if (check_plan_text(arena, "test.par", text, &plan) != 0) {
        if (getenv("TEST_LOWER_VERBOSE")) printf("plan did not load:\n%s\n", text);
        return NULL;
    }
    Plan *p = arena_alloc(arena, sizeof *p);
    *p = plan;
    Graph *g = expand_model(arena, p);
    if (!g) return NULL;
    Program *prog = lower_program(arena, p, g);
    if (!prog) return NULL;
    if (prog_out) *prog_out = prog;
    return analyze_program(arena, prog);
}

/* Sum over a stage's rows matching a filter. */
typedef struct Sum {
    int64_t calls;
    double elems;   /* elements x calls */
    double wire;    /* bytes x bus factor x calls */
} Sum;

static Sum sum_rows(const Analysis *an, int stage, Phase phase, CollKind coll, int axis, const char *why_prefix,
                    int exclude_replays)
{
    Sum s = {0, 0, 0};
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
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

/* DDP all-reduces exactly Ψ gradient elements; ZeRO-1/2 move the same bytes;
 * ZeRO-3 1.5x for every parameter whose backward reads it. */
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
        if (z == 0) {
            Sum ar = sum_rows(an, 0, PHASE_GRAD_SYNC, COLL_ALLREDUCE, 0, NULL, 0);
            CHECK(ar.elems == (double)P, "DDP all-reduces exactly %lld gradient elements per step, got %.0f",
                  (long long)P, ar.elems);
        }
        if (z == 3) {
            /* the embedding table's backward does not read it: gathered once */
            const Tensor *wte = NULL;
            for (int t = 0; t < prog->graph->ntensors; t++)
                if (!strcmp(prog->graph->tensors[t].name, "wte")) wte = &prog->graph->tensors[t];
            double wte_ddp_wire = wte ? 2.0 * 0.75 * (double)expand_tensor_numel(wte) * 4 : 0;
            CHECK(fabs(wire[3] - (1.5 * wire[0] - 0.5 * wte_ddp_wire)) < 1e-6 * wire[0],
                  "ZeRO-3 moves 1.5x DDP's bytes for parameters re-read in backward: %.0f vs DDP %.0f", wire[3],
                  wire[0]);
        }
    }
    CHECK(wire[1] == wire[0], "ZeRO-1 moves DDP's bytes: %.0f vs %.0f", wire[1], wire[0]);
    CHECK(wire[2] == wire[0], "ZeRO-2 moves DDP's bytes: %.0f vs %.0f", wire[2], wire[0]);
    arena_free(&arena);
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

/* Placement errors name the op, the tensor and the rule. */
static void test_placement_errors(void)
{
    Arena arena = {0};
    Opts o = defaults();
    o.gpus = 2;
    o.mesh = "tp 2;";
    o.layout = "seq -> tp;";
    FILE *null = fopen("/dev/null", "w");
    diag_set_stream(null);
    int before = diag_error_count();
    Analysis *an = compile(&arena, o, NULL);
    diag_set_stream(NULL);
    if (null) fclose(null);
    CHECK(an == NULL && diag_error_count() > before, "attention with seq split on tp is an error");
    arena_free(&arena);

    /* a head tied to the embedding on another pipeline stage: one error, with its hint */
    Arena arena2 = {0};
    o = defaults();
    o.gpus = 2, o.mesh = "pp 2;", o.layout = "layers -> pp schedule 1f1b;", o.tied = 1;
    FILE *msgs = tmpfile();
    diag_set_stream(msgs);
    before = diag_error_count();
    an = compile(&arena2, o, NULL);
    diag_set_stream(NULL);
    char text[2048] = "";
    if (msgs) {
        rewind(msgs);
        size_t n = fread(text, 1, sizeof text - 1, msgs);
        text[n] = 0;
        fclose(msgs);
    }
    CHECK(an == NULL && diag_error_count() == before + 1, "a tied head on another stage is one error");
    CHECK(strstr(text, "error: the head is tied to the embedding, but they sit on different pipeline stages (0 and 1)") &&
              strstr(text, "hint: put the embedding and the head on one stage, or use `head untied`"),
          "the tied-head error names both stages and the fix:\n%s", text);
    arena_free(&arena2);
}

/* The program verifier (run inside lower_program) over every schedule kind and
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
                                         "zero 3 over dp; recompute full; sequence_parallel over tp;"};
    static const char *const scheds[] = {"gpipe", "1f1b", "interleaved 2"};
    static const char *const blocks[] = {"gpt2", "llama", "mlp"};
    int accepted = 0, lowered = 0, refused = 0;
    FILE *null = fopen("/dev/null", "w");
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
                    o.gpus = 4;
                    o.mesh = mesh;
                    o.layout = layout;
                    o.batch = 16;
                    o.micro_batch = 2;
                    o.layers = 8;
                    diag_set_stream(null);
                    int before = diag_error_count();
                    Program *prog = NULL;
                    Analysis *an = compile(&arena, o, &prog);
                    int errors = diag_error_count() - before;
                    diag_set_stream(NULL);
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
    if (null) fclose(null);
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
    case RT_prt_matmul_bwd:
    case RT_prt_matmul_t_bwd:
        return prt_scratch_matmul_bwd(A(6), A(7), A(5), given(ins, 0), given(ins, 1), W(4), W(1), W(3), W(2), W(0));
    case RT_prt_attention_fwd: return prt_scratch_attention_fwd(A(4), A(6), given(ins, 1), W(1), W(2), W(0));
    case RT_prt_attention_bwd: return prt_scratch_attention_bwd(A(5), A(7), given(ins, 3), W(3), W(2), W(0), W(1));
    case RT_prt_xent_fwd: return prt_scratch_xent_fwd(A(4));
    case RT_prt_layernorm_bwd: return prt_scratch_layernorm_bwd(A(9), W(1), W(2));
    case RT_prt_rmsnorm_bwd: return prt_scratch_rmsnorm_bwd(A(7), W(1));
    case RT_prt_embed_bwd: return prt_scratch_embed_bwd(A(4), W(0));
    default: return 0;
    }
#undef A
#undef W
}

/* FLOPs of a call from its arguments, the textbook counts. */
static double call_flops(const Instr *ins)
{
#define A(k) ((double)ins->args[k].i)
    switch (ins->fn) {
    case RT_prt_matmul_fwd:
    case RT_prt_matmul_t_fwd: return 2 * A(3) * A(4) * A(5);
    case RT_prt_matmul_bwd:
    case RT_prt_matmul_t_bwd: return 4 * A(5) * A(6) * A(7);
    case RT_prt_attention_fwd: return 4 * A(3) * A(4) * A(4) * A(5) * A(6);
    case RT_prt_attention_bwd: return (ins->args[3].kind == ARG_NULL ? 12 : 8) * A(4) * A(5) * A(5) * A(6) * A(7);
    case RT_prt_xent_fwd: return 5 * A(4) * A(5);
    case RT_prt_xent_bwd: return 3 * A(4) * A(5);
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
        const OpDesc *d = &op_table[k];
        CHECK(d->rule && d->shape && d->flops && d->scratch && d->emit_fwd && d->fwd >= 0 && d->fwd < RT_FN_COUNT,
              "op %s has a complete row", op_names[k]);
        CHECK((d->emit_bwd != NULL) == (d->bwd != RT_NONE), "op %s: backward emitter and entry agree", op_names[k]);
    }
    Opts plans[6];
    for (int i = 0; i < 6; i++) plans[i] = defaults();
    plans[1].precision = "bf16 master fp32", plans[1].mesh = "tp 2;", plans[1].gpus = 2,
    plans[1].layout = "heads -> tp; ffn -> tp; vocab -> tp;";
    plans[2].block = "llama", plans[2].precision = "bf16 master fp32", plans[2].layout = "recompute full;",
    plans[2].no_positions = 1, plans[2].kv_heads = 2;
    plans[3].block = "relu", plans[3].tied = 1, plans[3].no_positions = 1;
    plans[4].block = "mlp", plans[4].precision = "bf16 master fp32", plans[4].mesh = "pp 2; dp 2;", plans[4].gpus = 4,
    plans[4].layout = "batch -> dp; layers -> pp schedule 1f1b; zero 3 over dp;";
    plans[5].precision = "bf16 master fp32", plans[5].mesh = "tp 2;", plans[5].gpus = 2,
    plans[5].layout = "heads -> tp; ffn -> tp; sequence_parallel over tp; recompute selective;";
    int seen[OP_COUNT][3] = {{0}};
    for (int pi = 0; pi < 6; pi++) {
        Arena arena = {0};
        Program *prog = NULL;
        FILE *quiet = fopen("/dev/null", "w"); /* the mlp plans warn that `heads` is unused */
        int before = diag_error_count();
        diag_set_stream(quiet);
        Analysis *an = compile(&arena, plans[pi], &prog);
        diag_set_stream(NULL);
        if (quiet) fclose(quiet);
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
                    CHECK(ins->fn == (int)(bwd ? d->bwd : d->fwd), "plan %d: %s %s is its row's entry", pi, op->name,
                          bwd ? "backward" : "forward");
                    CHECK(ins->flops == d->flops(&ins->shape, bwd), "plan %d: %s FLOPs %g are its row's %g", pi,
                          op->name, ins->flops, d->flops(&ins->shape, bwd));
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
    for (int k = 0; k < OP_COUNT; k++) {
        CHECK(seen[k][ENTRY_FORWARD] > 0, "op %s's forward appears in a lowered program", op_names[k]);
        CHECK(op_table[k].emit_bwd == NULL || seen[k][ENTRY_BACKWARD] > 0,
              "op %s's backward appears in a lowered program", op_names[k]);
    }
}

int main(void)
{
    test_ops_table();
    test_layout_combinations();
    test_verifier_sweep();
    test_bytes_per_parameter();
    test_flash_attention();
    test_zero_memory();
    test_tensor_parallel();
    test_sequence_parallel();
    test_data_parallel_volumes();
    test_pipeline();
    test_activations();
    test_placement_errors();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
