/*
 * test_cost.c — the cost model's terms against hand-computed cases: one
 * GEMM per shape class, one all-reduce and one all-gather, the default
 * efficiency sets, attention's matmuls and score traffic (`scores`), and,
 * through lowered plans, the GEMM, all-reduce and
 * pipeline-bubble terms of the analysis, the blocking collectives exposed,
 * the gradient buckets partly hidden under the backward as the runtime
 * overlaps them (cost_overlap), ZeRO-3's gathers prefetched a layer ahead
 * (a pass by hand, then a lowered plan's), the tensor axis's input-gradient
 * all-reduces under their weight gradients, the pipeline's scatter/gather
 * (half the message across nodes, the all-gather inside), interleaved
 * chunks of unlike sizes each taking its own layers' time, and the phases
 * summing to the step.
 * Exit status: 0 when every check holds, 1 otherwise.
 */
#include "analyze.h"
#include "cost.h"
#include "explain.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void near(const char *what, double got, double want)
{
    double tol = 1e-9 * fabs(want) + 1e-15;
    if (fabs(got - want) > tol) {
        printf("FAIL %s: %.12g, hand-computed %.12g\n", what, got, want);
        failures++;
    }
}

static void truth(const char *what, int ok)
{
    if (!ok) {
        printf("FAIL %s\n", what);
        failures++;
    }
}

static Cluster test_cluster(void)
{
    Cluster c = {0};
    c.flops_bf16 = 100e12;
    c.hbm_bandwidth = 2e12;
    c.intra_bw = 300e9, c.intra_latency = 2e-6;
    c.inter_bw = 25e9, c.inter_latency = 5e-6;
    c.eff = (Efficiency){.name = "test", .gemm = {0.2, 0.4, 0.6, 0.8}, .attention = 0.5, .hbm = 0.9, .bus = {0.75, 0.5}};
    return c;
}

static void test_primitives(void)
{
    Cluster c = test_cluster();
    truth("class of 127 x 4096 x 4096 is tiny", cost_gemm_class(127, 4096, 4096) == GEMM_TINY);
    truth("class of 4096 x 128 x 4096 is small", cost_gemm_class(4096, 128, 4096) == GEMM_SMALL);
    truth("class of 4096 x 4096 x 512 is medium", cost_gemm_class(4096, 4096, 512) == GEMM_MEDIUM);
    truth("class of 2048 cubed is large", cost_gemm_class(2048, 2048, 2048) == GEMM_LARGE);
    /* one GEMM: 2 m n k FLOPs at 100 TFLOP/s x 0.8 (large) and x 0.2 (tiny) */
    near("gemm 4096^3", cost_gemm_s(&c, c.flops_bf16, 4096, 4096, 4096), 2.0 * 4096.0 * 4096 * 4096 / 80e12);
    near("gemm 64 x 4096 x 4096", cost_gemm_s(&c, c.flops_bf16, 64, 4096, 4096), 2.0 * 64 * 4096.0 * 4096 / 20e12);
    /* one all-reduce of 1 GiB over 8 GPUs of a node: 2(n-1) steps of 2 us,
     * 2(n-1)/n x bytes at 300 GB/s x 0.75 */
    double gib = 1073741824.0;
    near("all-reduce 8 ranks 1 GiB", cost_coll_s(&c, COLL_ALLREDUCE, 8, 8, gib), 14 * 2e-6 + 1.75 * gib / 225e9);
    near("all-reduce latency", cost_coll_latency_s(&c, COLL_ALLREDUCE, 8, 8), 28e-6);
    /* one all-gather of 64 MiB over 4 nodes: 3 steps of 5 us, 3/4 x bytes at 25 GB/s x 0.5 */
    near("all-gather 4 ranks across nodes", cost_coll_s(&c, COLL_ALLGATHER, 4, 1, 64 * 1048576.0),
         3 * 5e-6 + 0.75 * 64 * 1048576.0 / 12.5e9);
    near("send inside a node", cost_coll_s(&c, COLL_SEND, 2, 2, 1e6), 2e-6 + 1e6 / 225e9);
    /* 8 ranks over 2 nodes, 4 on each: four rings side by side cross at 4 x
     * 25 GB/s; 32 over 2 nodes, 16 on each, no faster than inside a node
     * (300 GB/s); an all-to-all's share for the other node leaves through
     * each rank's own link */
    near("all-gather 8 ranks, 4 a node", cost_coll_s(&c, COLL_ALLGATHER, 8, 4, 64 * 1048576.0),
         7 * 5e-6 + 0.875 * 64 * 1048576.0 / (4 * 25e9 * 0.5));
    near("all-reduce 32 ranks, 16 a node", cost_coll_s(&c, COLL_ALLREDUCE, 32, 16, 64 * 1048576.0),
         62 * 5e-6 + 2 * 31.0 / 32 * 64 * 1048576.0 / (300e9 * 0.5));
    near("all-to-all 8 ranks, 4 a node", cost_coll_s(&c, COLL_ALLTOALL, 8, 4, 64 * 1048576.0),
         7 * 5e-6 + 0.875 * 64 * 1048576.0 / (25e9 * 0.5));
    /* a half-bandwidth size of 8 MiB: 24 MiB over 8 ranks is charged as 32 MiB,
     * so it runs at 24/32 of the bus bandwidth */
    Cluster h = c;
    h.eff.half_bytes[0] = 8 * 1048576.0;
    near("all-reduce 24 MiB, n1/2 8 MiB", cost_coll_s(&h, COLL_ALLREDUCE, 8, 8, 24 * 1048576.0),
         14 * 2e-6 + 1.75 * 32 * 1048576.0 / 225e9);
    near("n1/2 inside leaves across alone", cost_coll_s(&h, COLL_SEND, 2, 1, 1e6), 5e-6 + 1e6 / 12.5e9);
    near("nothing over one rank", cost_coll_s(&c, COLL_ALLREDUCE, 1, 1, 1e9), 0);
    near("stream 1 GB", cost_stream_s(&c, 1e9), 1e9 / 1.8e12);
    /* GELU and SwiGLU at their own share of the bandwidth (a CPU's tanh) */
    h.eff.activation = 0.05;
    near("activation 1 GB at 0.05", cost_activation_s(&h, 1e9), 1e9 / 1e11);
    near("attention 1 TFLOP", cost_attention_s(&c, c.flops_bf16, 1e12), 1e12 / 50e12);
    /* a 16-bit plan's GEMMs at the bf16 peak x gemm16 where given, else x gemm;
     * fp32 plans at the fp32 peak x gemm whatever gemm16 says */
    Cluster g = c;
    g.flops_fp32 = 50e12;
    near("bf16 GEMM at gemm when gemm16 is not given", cost_gemm_prec_s(&g, PREC_BF16, 64, 4096, 4096),
         2.0 * 64 * 4096.0 * 4096 / 20e12);
    g.eff.gemm16[GEMM_TINY] = 0.1, g.eff.gemm16[GEMM_LARGE] = 0.4;
    near("bf16 tiny GEMM at gemm16 0.1", cost_gemm_prec_s(&g, PREC_BF16, 64, 4096, 4096),
         2.0 * 64 * 4096.0 * 4096 / 10e12);
    near("bf16 large GEMM at gemm16 0.4", cost_gemm_prec_s(&g, PREC_BF16, 4096, 4096, 4096),
         2.0 * 4096.0 * 4096 * 4096 / 40e12);
    near("fp32 tiny GEMM keeps gemm 0.2 at the fp32 peak", cost_gemm_prec_s(&g, PREC_FP32, 64, 4096, 4096),
         2.0 * 64 * 4096.0 * 4096 / 10e12);

    Efficiency e;
    truth("a100 defaults exist", plan_efficiency_defaults("a100", &e) == 0 && !strcmp(e.name, "a100"));
    near("a100 large GEMMs", e.gemm[GEMM_LARGE], 0.85);
    near("a100 NVLink bus efficiency", e.bus[0], 0.78);
    near("a100 NVLink half-bandwidth size", e.half_bytes[0], 8 * 1048576.0);
    truth("generic has no half-bandwidth size",
          plan_efficiency_defaults("generic", &e) == 0 && e.half_bytes[0] == 0 && e.half_bytes[1] == 0);
    truth("h100 and h200 defaults exist",
          plan_efficiency_defaults("h100", &e) == 0 && plan_efficiency_defaults("h200", &e) == 0);
    truth("an unknown set is refused", plan_efficiency_defaults("b300", &e) == -1);
}

/* Two stages of two MLP layers each, no embedding or head, so both stages
 * take the same time: GEMMs 64 x 64 x 256 (tokens 2 x 32, hidden 64, ffn
 * 256), all tiny; efficiencies given in the plan. */
static const char *const mlp_plan =
    "cluster { nodes 1; gpus_per_node 2;\n"
    "  gpu { memory 1 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; }\n"
    "  link intra 10 GB/s 5 us;\n"
    "  efficiency { gemm 0.5 0.6 0.7 0.8; attention 0.5; hbm 0.5; intra 0.25; inter 0.5; }\n"
    "}\n"
    "model m { seq 32; hidden 64; ffn 256; layers 4; repeat layers { block mlp; } }\n"
    "train { batch 8; micro_batch 2; precision fp32; optimizer sgd lr 0.1; }\n";

static Analysis *analyze_plan(Arena *arena, const char *name, const char *text)
{
    Compilation *c = arena_alloc(arena, sizeof *c); /* the analysis points at its plan */
    if (passes_run_text(c, arena, name, text, 1, passes_find("analyze")) != 0) return NULL;
    return c->analysis;
}

static Analysis *analyze_text(Arena *arena, const char *name, const char *tail)
{
    return analyze_plan(arena, name, arena_printf(arena, "%s%s", mlp_plan, tail));
}

static void phases_sum(const char *what, const Analysis *an)
{
    double sum = 0;
    for (int k = 0; k < ANALYZE_NPHASES; k++) sum += an->phase_s[k];
    near(what, sum, an->step_s);
}

static void test_pipeline_bubble(void)
{
    Arena arena = {0};
    Analysis *an = analyze_text(&arena, "mlp_pp", "mesh { pp 2; }\nlayout { layers -> pp schedule gpipe; }\n");
    truth("the pipeline plan analyzes", an != NULL);
    if (!an) return;
    /* forward: 2 layers x 2 GEMMs of 2 x 64 x 64 x 256 FLOPs at 1 TFLOP/s x 0.5 */
    double gemm = 2.0 * 64 * 64 * 256 / 0.5e12;
    near("forward GEMM term of a chunk", an->stages[0].fwd.gemm_s, 4 * gemm);
    near("backward GEMM term of a chunk", an->stages[0].bwd.gemm_s, 8 * gemm);
    /* a hand-off: 5 us + 2 x 32 x 64 fp32 at 10 GB/s x 0.25 */
    double p2p = 5e-6 + 2.0 * 32 * 64 * 4 / 2.5e9;
    near("stage hand-off", an->t_p2p, p2p);
    /* GPipe, p = 2, m = 4, equal stages, a message holding its sender and
     * its receiver a hand-off h each (schedule.h): stage 0's F0 and its
     * send's hold, tf + h; stage 1 takes each forward's input in and runs
     * it, 4 (h + tf); each of its backwards and its send's hold, 4 (tb + h);
     * stage 0 takes the last gradient in and runs B3, h + tb: 5 (tf + tb) +
     * 10 h, the bubble all of it but the 4 (tf + tb) of work.  Stage 1 clears
     * the loss's gradient too (one pass over 2 x 32 x 64 fp32 at 100 GB/s x
     * 0.5), so its backward is that much longer and the critical path runs
     * through its items: tf0 + tb0 + 4 (tf1 + tb1) + 10 h */
    double tf0 = an->stage_fwd[0], tb0 = an->stage_bwd[0], tf1 = an->stage_fwd[1], tb1 = an->stage_bwd[1];
    near("stage 1's forward as long as stage 0's", tf1, tf0);
    near("stage 1's backward longer by the loss gradient's clear", tb1 - tb0, 2.0 * 32 * 64 * 4 / 50e9);
    near("simulated GPipe makespan", an->pipeline_s, tf0 + tb0 + 4 * (tf1 + tb1) + 10 * p2p);
    near("bubble", an->phase_s[APHASE_BUBBLE], (tf0 + tb0) + 10 * p2p);
    near("forward phase", an->phase_s[APHASE_FORWARD], 4 * tf1);
    phases_sum("pipeline phases sum to the step", an);
    near("no communication hidden without data parallelism", an->comm_hidden_s, 0);
    arena_free(&arena);
}

static void test_allreduce(void)
{
    Arena arena = {0};
    Analysis *an = analyze_text(&arena, "mlp_tp", "mesh { tp 2; }\nlayout { ffn -> tp; tp_overlap off; }\n");
    truth("the tensor-parallel plan analyzes", an != NULL);
    if (!an) return;
    /* per layer one all-reduce of 2 x 32 x 64 fp32 over 2 ranks each way:
     * 2 steps of 5 us + (2 (n-1)/n = 1) x 16384 B at 10 GB/s x 0.25 */
    double ar = 2 * 5e-6 + 16384.0 / 2.5e9;
    near("forward all-reduces of a chunk", an->stages[0].fwd.comm_s, 4 * ar);
    near("backward all-reduces of a chunk", an->stages[0].bwd.comm_s, 4 * ar);
    /* and the gradient norm's sum of squares, one fp32 element, over tp once a step */
    double norm = 2 * 5e-6 + 4.0 / 2.5e9;
    near("exposed communication", an->phase_s[APHASE_COMM], 4 * 8 * ar + norm);
    near("no bubble without a pipeline", an->phase_s[APHASE_BUBBLE], 0);
    phases_sum("tensor-parallel phases sum to the step", an);
    near("tensor-parallel all-reduces block: nothing hidden", an->comm_hidden_s, 0);
    near("the tensor axis's share of it", an->tp_comm_exposed_s, 4 * 8 * ar);
    near("none of it hidden", an->tp_comm_hidden_s, 0);
    arena_free(&arena);
}

/* The same plan with the input gradient's all-reduce started before the
 * up projection's weight-gradient GEMM (overlap_tp.c): each layer's
 * backward hides that GEMM's time, 2 x 64 x 64 x 128 FLOPs at 1 TFLOP/s x
 * 0.5, under its all-reduce (which takes longer), so of the tensor axis's
 * communication a step exposes 16 GEMMs less and hides them; the blocking
 * plan (`tp_overlap off;`) exposes all of it. */
static void test_tp_overlapped(void)
{
    Arena arena = {0};
    Analysis *an = analyze_text(&arena, "mlp_tp_overlap", "mesh { tp 2; }\nlayout { ffn -> tp; }\n");
    Analysis *off = analyze_text(&arena, "mlp_tp_blocking", "mesh { tp 2; }\nlayout { ffn -> tp; tp_overlap off; }\n");
    truth("the tensor-parallel plans analyze", an != NULL && off != NULL);
    if (!an || !off) return;
    const Seq *seq = &an->prog->stages[0].seq[SEQ_BLOCK_BWD];
    int starts = 0, weight_after_start = 0;
    for (int i = 0; i < seq->n; i++) {
        starts += instr_is_start(&seq->ins[i]);
        weight_after_start += instr_is_start(&seq->ins[i]) && i + 2 < seq->n &&
                              seq->ins[i + 1].shape.part == OP_PART_WEIGHT && instr_is_wait(&seq->ins[i + 2]);
    }
    truth("one all-reduce started per layer's backward, then the weight gradient, then its wait",
          starts == 1 && weight_after_start == 1);
    double ar = 2 * 5e-6 + 16384.0 / 2.5e9, dw = 2.0 * 64 * 64 * 128 / 0.5e12;
    int L = an->prog->stages[0].max_chunk_layers;
    double items = (double)an->prog->schedule.micro_batches * an->prog->schedule.chunks;
    truth("the weight gradient is shorter than the all-reduce", dw < ar);
    near("a chunk's backward hides L weight gradients", an->stages[0].tp_hidden_chunk_s, L * dw);
    near("the blocking backward is longer by them", cost_terms_total(&off->stages[0].bwd),
         cost_terms_total(&an->stages[0].bwd) + L * dw);
    near("tensor-parallel communication hidden", an->tp_comm_hidden_s, items * L * dw);
    near("tensor-parallel communication exposed", an->tp_comm_exposed_s, items * (2 * L * ar - L * dw));
    near("the blocking plan hides none", off->tp_comm_hidden_s, 0);
    truth("explain's exposed tensor-parallel time is below the blocking plan's",
          an->tp_comm_exposed_s < off->tp_comm_exposed_s && an->tp_comm_hidden_s > 0);
    near("the same collectives either way", an->tp_comm_exposed_s + an->tp_comm_hidden_s, off->tp_comm_exposed_s);
    near("hidden communication is the tensor axis's", an->comm_hidden_s, an->tp_comm_hidden_s);
    phases_sum("overlapped tensor-parallel phases sum to the step", an);
    /* explain prints these figures */
    char text[8192] = {0};
    FILE *out = fmemopen(text, sizeof text - 1, "w");
    truth("a memory stream", out != NULL);
    if (out) {
        explain_phases(out, an);
        fclose(out);
        char want[160];
        snprintf(want, sizeof want, "tensor-parallel communication: %.4g s exposed, %.4g s hidden",
                 an->tp_comm_exposed_s, an->tp_comm_hidden_s);
        truth("explain prints the tensor axis's exposed and hidden time", strstr(text, want) != NULL);
    }
    arena_free(&arena);
}

static void test_gradient_sync_overlapped(void)
{
    Arena arena = {0};
    Analysis *an = analyze_text(&arena, "mlp_dp", "mesh { dp 2; }\nlayout { batch -> dp; }\n");
    truth("the data-parallel plan analyzes", an != NULL);
    if (!an) return;
    /* the sum of its all-reduces, one bucket per layer */
    double want = 0;
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
        if (r->phase != PHASE_GRAD_SYNC) continue;
        want += (double)r->calls * cost_coll_s(&an->prog->plan->cluster, r->coll, r->group, plan_axis_node_ranks(an->prog->plan, r->axis),
                                               (double)r->elems * r->elem_bytes);
    }
    truth("there are gradient all-reduces", want > 0);
    /* each layer's bucket starts after that layer's backward of the last
     * micro-batch and runs under the layers below it: 4 layers of tb each,
     * the layer-3 bucket ready at tb, layer 2's at 2 tb, ...; one link, so
     * bucket k starts at max(ready, the previous one's end) */
    /* the head's backward first (here only the loss gradient's clear) */
    CostTerms head = {0};
    const Seq *hb = &an->prog->stages[0].seq[SEQ_HEAD_BWD];
    for (int i = 0; i < hb->n; i++) cost_instr(an->prog, &hb->ins[i], 1.0, &head);
    double h0 = cost_terms_total(&head), all = cost_terms_total(&an->stages[0].bwd);
    truth("the head's backward clears the loss gradient", h0 > 0);
    double bucket = want / 4, tb = (all - h0) / 4, link = 0;
    for (int k = 1; k <= 4; k++) link = (link > h0 + k * tb ? link : h0 + k * tb) + bucket;
    double exposed = link > all ? link - all : 0;
    truth("the buckets outlast the backward here (part hidden, part exposed)", exposed > 0 && exposed < want);
    near("gradient sync, what the backward does not hide", an->stages[0].sync_s, exposed);
    near("hidden gradient sync", an->stages[0].sync_hidden_s, want - exposed);
    near("exposed communication is the sync", an->phase_s[APHASE_COMM], exposed);
    near("hidden communication", an->comm_hidden_s, want - exposed);
    phases_sum("data-parallel phases sum to the step", an);
    arena_free(&arena);
}

/* The overlap arithmetic on its own: three collectives of 1.5 s ready at 1,
 * 2 and 3 s of a 3.5 s compute run 1-2.5, 2.5-4 and 4-5.5: 2 s after the
 * compute, 2.5 s of the 4.5 s under it; two short ones end before it. */
static void test_overlap(void)
{
    const double ready[3] = {1, 2, 3}, dur[3] = {1.5, 1.5, 1.5};
    double hidden = -1;
    near("exposed after the compute", cost_overlap(ready, dur, 3, 3.5, &hidden), 2.0);
    near("hidden under the compute", hidden, 2.5);
    const double ready2[2] = {1, 2}, dur2[2] = {0.5, 0.5};
    near("all hidden: nothing exposed", cost_overlap(ready2, dur2, 2, 3.0, &hidden), 0);
    near("all hidden", hidden, 1.0);
    near("started at the end: all exposed", cost_overlap(ready2 + 1, dur2, 1, 2.0, &hidden), 0.5);
    near("started at the end: nothing hidden", hidden, 0);
}

/* The memory-bound classes: norms, softmaxes and the optimizer at their own
 * share of the bandwidth, hbm's where a cluster leaves them at 0; 16-bit
 * tensors at stream16 of that. */
static void test_memory_classes(void)
{
    Cluster c = test_cluster(); /* 2 TB/s x hbm 0.9 */
    near("norm as hbm when not given", cost_memory_s(&c, MEM_NORM, 1e9, 0), 1e9 / 1.8e12);
    near("softmax as hbm when not given", cost_memory_s(&c, MEM_SOFTMAX, 1e9, 0), 1e9 / 1.8e12);
    near("optimizer as hbm when not given", cost_memory_s(&c, MEM_OPTIMIZER, 1e9, 0), 1e9 / 1.8e12);
    near("16-bit as fp32 when stream16 is not given", cost_memory_s(&c, MEM_STREAM, 1e9, 1), 1e9 / 1.8e12);
    c.eff.norm = 0.25, c.eff.softmax = 0.05, c.eff.optimizer = 0.2, c.eff.activation = 0.1;
    for (int k = 0; k < PARC_STREAM16_KINDS; k++) c.eff.stream16[k] = 0.5;
    near("norm 1 GB at 0.25", cost_memory_s(&c, MEM_NORM, 1e9, 0), 1e9 / 5e11);
    near("softmax 1 GB at 0.05", cost_memory_s(&c, MEM_SOFTMAX, 1e9, 0), 1e9 / 1e11);
    near("optimizer 1 GB at 0.2", cost_memory_s(&c, MEM_OPTIMIZER, 1e9, 0), 1e9 / 4e11);
    near("plain stream keeps hbm", cost_memory_s(&c, MEM_STREAM, 1e9, 0), 1e9 / 1.8e12);
    near("16-bit GELU at 0.1 x 0.5", cost_memory_s(&c, MEM_ACTIVATION, 1e9, 1), 1e9 / 1e11);
    near("16-bit norm at 0.25 x 0.5", cost_memory_s(&c, MEM_NORM, 1e9, 1), 1e9 / 2.5e11);
    /* stream16 by class: streams 0.5, norms 0.25, activations 0.125, the
     * loss's softmax 0.2, attention's scores (at softmax's 0.05) 0.4; the
     * optimizer is never a 16-bit stream (its master and moments are fp32) */
    const double by_class[PARC_STREAM16_KINDS] = {0.5, 0.25, 0.125, 0.2, 0.4};
    for (int k = 0; k < PARC_STREAM16_KINDS; k++) c.eff.stream16[k] = by_class[k];
    near("16-bit stream at 0.9 x 0.5", cost_memory_s(&c, MEM_STREAM, 1e9, 1), 1e9 / 9e11);
    near("16-bit norm at 0.25 x 0.25", cost_memory_s(&c, MEM_NORM, 1e9, 1), 1e9 / 1.25e11);
    near("16-bit GELU at 0.1 x 0.125", cost_memory_s(&c, MEM_ACTIVATION, 1e9, 1), 1e9 / 2.5e10);
    near("16-bit softmax at 0.05 x 0.2", cost_memory_s(&c, MEM_SOFTMAX, 1e9, 1), 1e9 / 2e10);
    near("16-bit scores at 0.05 x 0.4", cost_memory_s(&c, MEM_SCORES, 1e9, 1), 1e9 / 4e10);
    near("fp32 GELU without stream16", cost_memory_s(&c, MEM_ACTIVATION, 1e9, 0), 1e9 / 2e11);

    /* the optimizer of the two-stage MLP plan (sgd: weights and gradients
     * read and written) at 100 GB/s x 0.25, its stated share */
    Arena arena = {0};
    const char *text = "cluster { nodes 1; gpus_per_node 1;\n"
                       "  gpu { memory 1 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; }\n"
                       "  efficiency { hbm 0.5; optimizer 0.25; norm 0.125; }\n"
                       "}\n"
                       "model m { seq 32; hidden 64; ffn 256; layers 4; repeat layers { block mlp; } }\n"
                       "train { batch 8; micro_batch 2; precision fp32; optimizer sgd lr 0.1; }\n"
                       "mesh { dp 1; }\nlayout { batch -> dp; }\n";
    Analysis *an = analyze_plan(&arena, "optimizer.par", text);
    truth("the optimizer plan analyzes", an != NULL);
    if (an) {
        const StageCost *sc = &an->stages[0];
        double state = (double)(sc->ledger[PRT_WEIGHTS] + sc->ledger[PRT_GRADS]);
        /* per layer: the norm's 2 x 64, up 64 x 256 + 256, down 256 x 64 + 64 */
        near("sgd state: 4 layers' weights, fp32, and their gradients", state,
             2.0 * 4 * (2 * 64 + 64 * 256 + 256 + 256 * 64 + 64) * 4);
        /* and the step's clear of each gradient, one pass (counted to the optimizer's phase) */
        double grads = (double)sc->ledger[PRT_GRADS];
        near("optimizer bytes: the state read and written, the gradients cleared", sc->optim_bytes,
             2 * state + grads);
        near("optimizer at 100 GB/s x 0.25, the clears at hbm's share", sc->optim_s,
             2 * state / 25e9 + grads / 50e9);
    }
    arena_free(&arena);

    /* `stream16` read from a plan: one value for every class, or one each */
    const char *const stream16_text[2] = {"  efficiency { hbm 0.5; stream16 0.3; }\n",
                                          "  efficiency { hbm 0.5; stream16 0.5 0.25 0.125 0.2 0.4; }\n"};
    for (int v = 0; v < 2; v++) {
        Arena a2 = {0};
        char *plan = arena_printf(&a2, "%s%s%s", "cluster { nodes 1; gpus_per_node 1;\n"
                                  "  gpu { memory 1 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; }\n",
                                  stream16_text[v], strstr(text, "}\nmodel")); /* the optimizer plan after its cluster's efficiency */
        Analysis *a = analyze_plan(&a2, "stream16.par", plan);
        truth("the stream16 plan analyzes", a != NULL);
        if (a)
            for (int k = 0; k < PARC_STREAM16_KINDS; k++)
                near(v ? "stream16 by class" : "stream16 for every class", a->prog->plan->cluster.eff.stream16[k],
                     v ? by_class[k] : 0.3);
        arena_free(&a2);
    }

    /* a 16-bit plan's gradient clears are the runtime's memset, whatever the
     * dtype: at hbm's share, not at the streams' stream16 (0.5 here) */
    Arena a3 = {0};
    Analysis *a16 = analyze_plan(&a3, "clears16.par",
                                 "cluster { nodes 1; gpus_per_node 1;\n"
                                 "  gpu { memory 1 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; }\n"
                                 "  efficiency { hbm 0.5; stream16 0.5 0.25 0.125 0.2 0.4; }\n}\n"
                                 "model m { seq 32; hidden 64; ffn 256; layers 4; repeat layers { block mlp; } }\n"
                                 "train { batch 8; micro_batch 2; precision bf16 master fp32; optimizer sgd lr 0.1; }\n"
                                 "mesh { dp 1; }\nlayout { batch -> dp; }\n");
    truth("the bf16 optimizer plan analyzes", a16 != NULL);
    if (a16) {
        const StageCost *sc = &a16->stages[0];
        double state = (double)(sc->ledger[PRT_WEIGHTS] + sc->ledger[PRT_GRADS] + sc->ledger[PRT_MASTER] +
                                sc->ledger[PRT_OPTIM]);
        double grads = (double)sc->ledger[PRT_GRADS];
        near("bf16 gradients: 2 bytes each", grads, 4.0 * (2 * 64 + 64 * 256 + 256 + 256 * 64 + 64) * 2);
        near("bf16 optimizer at 100 GB/s x 0.5, its clears too", sc->optim_s, 2 * state / 50e9 + grads / 50e9);
    }
    arena_free(&a3);
}

/* Attention by its kind: a one-layer GPT (micro-batch 2, seq 32, 4 heads of
 * 16, probabilities kept) charges its attention op the matmul FLOPs (4 B T T
 * NH HD forward, 8 backward) at 1 TFLOP/s x 0.5 and its score matrix B NH
 * T T (3 passes forward, 4 backward, 4 bytes) at 100 GB/s x scores; a
 * cluster without `scores` streams it at softmax's share, one without
 * either at hbm's. */
static const Instr *attention_entry(const Analysis *an, int seq)
{
    const Seq *s = &an->prog->stages[0].seq[seq];
    for (int i = 0; i < s->n; i++)
        if (s->ins[i].op >= 0 && an->prog->graph->ops[s->ins[i].op].kind == OP_ATTENTION &&
            s->ins[i].entry != ENTRY_NONE)
            return &s->ins[i];
    return NULL;
}

static void test_attention_scores(void)
{
    const char *const effs[3] = {"hbm 0.5; softmax 0.05; scores 0.25;", "hbm 0.5; softmax 0.05;", "hbm 0.5;"};
    const double share[3] = {0.25, 0.05, 0.5};
    const double scores = 2.0 * 4 * 32 * 32, flops = scores * 16;
    /* besides the scores: the qkv read once and the output written (forward);
     * the qkv and dout read and dqkv written (backward): B T (NH + 2 KV) HD and B T NH HD */
    const double qkv = 2.0 * 32 * (4 + 2 * 4) * 16, out = 2.0 * 32 * 4 * 16;
    for (int k = 0; k < 3; k++) {
        Arena arena = {0};
        const char *text = arena_printf(&arena,
                                        "cluster { nodes 1; gpus_per_node 1;\n"
                                        "  gpu { memory 1 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; }\n"
                                        "  efficiency { gemm 0.5 0.6 0.7 0.8; attention 0.5; %s }\n"
                                        "}\n"
                                        "model m { vocab 64; seq 32; hidden 64; heads 4; ffn 256; layers 1;\n"
                                        "  embed positions learned; repeat layers { block gpt2; } norm layer;\n"
                                        "  head untied; loss cross_entropy; }\n"
                                        "train { batch 2; micro_batch 2; precision fp32; optimizer sgd lr 0.1; }\n"
                                        "mesh { dp 1; }\nlayout { batch -> dp; }\n",
                                        effs[k]);
        Analysis *an = analyze_plan(&arena, "attention.par", text);
        truth("the attention plan analyzes", an != NULL);
        const Instr *fwd = an ? attention_entry(an, SEQ_BLOCK_FWD) : NULL, *bwd = an ? attention_entry(an, SEQ_BLOCK_BWD) : NULL;
        truth("attention forward and backward entries", fwd && bwd && fwd->shape.kept && bwd->shape.kept);
        if (fwd && bwd) {
            CostTerms f = {0}, b = {0};
            cost_instr(an->prog, fwd, 1, &f);
            cost_instr(an->prog, bwd, 1, &b);
            near(arena_printf(&arena, "attention forward matmuls (%s)", effs[k]), f.attention_s, 4 * flops / 0.5e12);
            near(arena_printf(&arena, "attention backward matmuls (%s)", effs[k]), b.attention_s, 8 * flops / 0.5e12);
            near(arena_printf(&arena, "forward scores: 3 passes, qkv and out (%s)", effs[k]), f.stream_s,
                 (3 * scores + qkv + out) * 4 / (100e9 * share[k]));
            near(arena_printf(&arena, "backward scores: 4 passes, qkv twice and dout (%s)", effs[k]), b.stream_s,
                 (4 * scores + 2 * qkv + out) * 4 / (100e9 * share[k]));
            near("forward score bytes", f.stream_bytes, (3 * scores + qkv + out) * 4);
        }
        arena_free(&arena);
    }
}

/* Flash against stored attention on a GPT-3-shaped layer (hidden 12288, 96
 * heads of 128, micro-batch 1, bf16) at seq 2,048 and 8,192 on an H100
 * (989 TFLOP/s bf16, 3.35 TB/s, `efficiency h100`): flash's memory traffic
 * is FlashAttention-2's, the qkv read and the output written (forward), the
 * qkv and dout read and dqkv written (backward), 2 bytes each, with no
 * score matrix; its score tiles (3 passes forward, 7 backward) stay on chip,
 * inside the fused kernel's rate (the h100 set states neither `tiles` nor
 * `scores`), so it is charged its matmuls (12 of 4 B NH T T HD backward:
 * the scores rebuilt) at 989 TFLOP/s x 0.40 and its bytes at 3.35 TB/s x
 * 0.85; stored attention adds its score matrix through HBM (3 and 4 passes)
 * and takes longer.  A cluster stating `tiles` charges the tiles there; one
 * stating only `scores` (a CPU fragment from before `tiles`) at that. */
static void test_flash_attention(void)
{
    const int64_t seqs[2] = {2048, 8192};
    for (int q = 0; q < 2; q++) {
        const double T = (double)seqs[q], S = 96.0 * T * T, flops = S * 128;
        const double qkv = T * (96 + 2 * 96) * 128, out = T * 96 * 128;
        double total[2] = {0, 0}; /* stored, flash: attention's forward + backward seconds */
        for (int flash = 0; flash <= 1; flash++)
            for (int e = 0; e < (flash ? 3 : 1); e++) {
                static const char *const effs[3] = {"efficiency h100;", "efficiency h100 { tiles 0.5; }",
                                                    "efficiency h100 { scores 0.25; }"};
                Arena arena = {0};
                const char *text = arena_printf(
                    &arena,
                    "cluster { nodes 1; gpus_per_node 1;\n"
                    "  gpu { memory 80 GiB; bf16 989 TFLOP/s; fp32 67 TFLOP/s; hbm 3.35 TB/s; }\n  %s\n}\n"
                    "model gpt3_layer { vocab 50304; seq %lld; hidden 12288; heads 96; ffn 49152; layers 1;\n"
                    "  embed positions learned; repeat layers { block gpt2%s } norm layer;\n"
                    "  head untied; loss cross_entropy; }\n"
                    "train { batch 1; micro_batch 1; precision bf16; optimizer adamw lr 1e-4; }\n"
                    "mesh { dp 1; }\nlayout { batch -> dp; }\n",
                    effs[e], (long long)seqs[q], flash ? " { attention causal flash; }" : ";");
                Analysis *an = analyze_plan(&arena, "gpt3_layer.par", text);
                const char *what = arena_printf(&arena, "seq %lld, %s, %s", (long long)seqs[q],
                                                flash ? "flash" : "stored", effs[e]);
                truth(arena_printf(&arena, "the GPT-3 layer analyzes (%s)", what), an != NULL);
                const Instr *fwd = an ? attention_entry(an, SEQ_BLOCK_FWD) : NULL;
                const Instr *bwd = an ? attention_entry(an, SEQ_BLOCK_BWD) : NULL;
                truth(arena_printf(&arena, "attention entries, probabilities kept unless flash (%s)", what),
                      fwd && bwd && fwd->shape.kept == !flash && bwd->shape.kept == !flash);
                if (!fwd || !bwd) {
                    arena_free(&arena);
                    continue;
                }
                CostTerms f = {0}, b = {0};
                cost_instr(an->prog, fwd, 1, &f);
                cost_instr(an->prog, bwd, 1, &b);
                double hbm = 3.35e12 * 0.85, peak = 989e12 * 0.40;
                double tiles_rate = e == 1 ? 3.35e12 * 0.5 : e == 2 ? 3.35e12 * 0.25 : 0;
                double fwd_tiles = flash ? 3 * S * 2 : 0, bwd_tiles = flash ? 7 * S * 2 : 0;
                double fwd_bytes = (qkv + out + (flash ? 0 : 3 * S)) * 2, bwd_bytes = (2 * qkv + out + (flash ? 0 : 4 * S)) * 2;
                near(arena_printf(&arena, "forward HBM bytes (%s)", what), f.stream_bytes, fwd_bytes);
                near(arena_printf(&arena, "backward HBM bytes (%s)", what), b.stream_bytes, bwd_bytes);
                near(arena_printf(&arena, "forward bytes on chip (%s)", what), f.onchip_bytes, fwd_tiles);
                near(arena_printf(&arena, "backward bytes on chip (%s)", what), b.onchip_bytes, bwd_tiles);
                near(arena_printf(&arena, "forward attention seconds (%s)", what), f.attention_s,
                     4 * flops / peak + (tiles_rate > 0 ? fwd_tiles / tiles_rate : 0));
                near(arena_printf(&arena, "backward attention seconds (%s)", what), b.attention_s,
                     (flash ? 12 : 8) * flops / peak + (tiles_rate > 0 ? bwd_tiles / tiles_rate : 0));
                if (!flash) { /* stored: the score matrix at softmax's share, hbm's in the h100 set */
                    near(arena_printf(&arena, "stored attention's memory seconds (%s)", what), f.stream_s + b.stream_s,
                         (fwd_bytes + bwd_bytes) / hbm);
                }
                if (e == 0) total[flash] = f.attention_s + f.stream_s + b.attention_s + b.stream_s;
                arena_free(&arena);
            }
        if (!(total[1] < total[0]))
            printf("FAIL seq %lld: flash attention %.6g s, not below stored %.6g s\n", (long long)seqs[q], total[1],
                   total[0]), failures++;
    }
}

/* A sequence with started collectives (cost_timeline): work 1 s, start A
 * (2 s on the link), work 1 s, start B (1 s), work 0.5 s, wait B, wait A,
 * work 1 s.  A runs 1-3, B after it 3-4; the work reaches the waits at 2.5
 * s, holds until 4, ends at 5: 1.5 s of the 3 s of collectives exposed. */
static void test_timeline(void)
{
    const double dur[8] = {1, 2, 1, 1, 0.5, 0, 0, 1};
    const int wait_of[8] = {-1, -2, -1, -2, -1, 3, 1, -1};
    double hidden = -1;
    near("the sequence's time", cost_timeline(dur, wait_of, 8, &hidden), 5.0);
    near("hidden under the work", hidden, 1.5);
    const int blocking[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    near("the same collectives blocking", cost_timeline(dur, blocking, 8, &hidden), 6.5);
    near("blocking: nothing hidden", hidden, 0);
}

/* ZeRO-2 over dp 2: the reduce-scatters started in a layer's backward hide
 * under the rest of it; the analysis charges the backward exactly its
 * timeline (cost_timeline over its instructions' costs). */
static void test_scatters_overlapped(void)
{
    Arena arena = {0};
    Analysis *an = analyze_text(&arena, "mlp_zero2", "mesh { dp 2; }\nlayout { batch -> dp; zero 2 over dp; }\n");
    Analysis *off = analyze_text(&arena, "mlp_zero2_blocking",
                                 "mesh { dp 2; }\nlayout { batch -> dp; zero 2 over dp; grad_overlap off; }\n");
    truth("the ZeRO-2 plans analyze", an != NULL && off != NULL);
    if (!an || !off) return;
    const Seq *seq = &an->prog->stages[0].seq[SEQ_BLOCK_BWD];
    double dur[512];
    int wait_of[512], n = seq->n < 512 ? seq->n : 512, starts = 0;
    for (int i = 0; i < n; i++) {
        const Instr *ins = &seq->ins[i];
        CostTerms one = {0};
        cost_instr(an->prog, ins, 1.0, &one);
        dur[i] = cost_terms_total(&one);
        wait_of[i] = instr_is_start(ins) ? -2 : -1;
        starts += instr_is_start(ins);
        for (int j = i - 1; j >= 0 && instr_is_wait(ins) && wait_of[i] == -1; j--)
            if (instr_is_start(&seq->ins[j]) && instr_async_result(&seq->ins[j])->buf == ins->args[0].buf) wait_of[i] = j;
    }
    truth("reduce-scatters started in the backward", starts > 0);
    double hidden = 0, t = cost_timeline(dur, wait_of, n, &hidden);
    int L = an->prog->stages[0].max_chunk_layers;
    truth("part of them hidden", hidden > 0);
    near("one chunk's backward hides L x the layer's", an->stages[0].bwd_hidden_chunk_s, L * hidden);
    double items = (double)an->prog->schedule.micro_batches * an->prog->schedule.chunks;
    near("hidden communication", an->comm_hidden_s, items * L * hidden);
    /* the blocking plan's backward is longer by exactly what is hidden */
    near("the blocking backward", cost_terms_total(&off->stages[0].bwd), cost_terms_total(&an->stages[0].bwd) + L * hidden);
    near("nothing hidden with grad_overlap off", off->comm_hidden_s, 0);
    truth("the layer's backward is its timeline", t > 0 && t < cost_terms_total(&off->stages[0].bwd) / L + 1e-12);
    phases_sum("ZeRO-2 phases sum to the step", an);
    arena_free(&arena);
}

/* ZeRO-3's gathers prefetched a layer ahead (overlap_gather.c), by hand: a
 * pass over L = 3 layers, each computing 1 s once its gathers (g s on the
 * one link) are there.  Layer 0 starts its own (on the link 0..g) and layer
 * 1's (g..2g), each later layer the next one's as it begins.  g = 0.6: layer
 * 0 waits until 0.6 and ends at 1.6; layer 1's gather was done at 1.2, layer
 * 2's runs 1.6..2.2 under layer 1 (1.6..2.6); the pass ends at 3.6 s: of the
 * 1.8 s of gathers only the first layer's 0.6 s is exposed.  g = 1.5, more
 * than a layer's work: layer 0 ends at 2.5, layer 1 waits until 3 and ends at
 * 4, layer 2's gather runs 3..4.5, the pass ends at 5.5 s: exposed g + (L-1)
 * (g - 1) = 2.5 s.  Blocking, each layer takes 1 + g. */
static void test_prefetch_timeline(void)
{
    static const double gs[2] = {0.6, 1.5}, ends[2] = {3.6, 5.5}, hiddens[2] = {1.2, 2.0};
    for (int k = 0; k < 2; k++) {
        double g = gs[k];
        /* start G0, start G1, wait G0, work | start G2, wait G1, work | wait G2, work */
        const double dur[9] = {g, g, 0, 1, g, 0, 1, 0, 1};
        const int wait_of[9] = {-2, -2, 0, -1, -2, 1, -1, 4, -1};
        double hidden = -1;
        near(k ? "prefetched pass, link-bound" : "prefetched pass", cost_timeline(dur, wait_of, 9, &hidden), ends[k]);
        near(k ? "hidden, link-bound" : "hidden: all but the first layer's gather", hidden, hiddens[k]);
        const int blocking[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
        const double dur_blocking[9] = {g, 0, 0, 1, g, 0, 1, g, 1};
        near("the gathers blocking", cost_timeline(dur_blocking, blocking, 9, &hidden), 3 * (1 + g));
    }
}

/* The instance a guarded block instruction's buffer argument names at layer l. */
static int64_t parity_instance(const Arg *a, int64_t l)
{
    return a->inst == INST_PARITY ? (l + a->k) & 1 : a->k;
}

/* ZeRO-3 over dp 2, lowered: the forward's gathers start a layer ahead, the
 * ledger holds the second instance of each gathered buffer, and the analysis
 * charges one chunk's forward exactly its pass's timeline: the blocking
 * plan's forward less what that timeline hides, the first gather exposed. */
static void test_gathers_prefetched(void)
{
    Arena arena = {0};
    Analysis *an = analyze_text(&arena, "mlp_zero3", "mesh { dp 2; }\nlayout { batch -> dp; zero 3 over dp; }\n");
    Analysis *off = analyze_text(&arena, "mlp_zero3_blocking",
                                 "mesh { dp 2; }\nlayout { batch -> dp; zero 3 over dp; grad_overlap off; }\n");
    truth("the ZeRO-3 plans analyze", an != NULL && off != NULL);
    if (!an || !off) return;
    const StageProgram *sp = &an->prog->stages[0], *sp_off = &off->prog->stages[0];
    const Seq *seq = &sp->seq[SEQ_BLOCK_FWD];
    int64_t L = sp->max_chunk_layers;
    int first = 0, next = 0, blocking_off = 0, started_off = 0;
    double first_gather = -1;
    for (int i = 0; i < seq->n; i++) {
        const Instr *ins = &seq->ins[i];
        first += ins->fn == RT_prt_allgather_start && ins->when == WHEN_L_FIRST;
        next += ins->fn == RT_prt_allgather_start && ins->when == WHEN_L_NOT_LAST;
        if (ins->fn == RT_prt_allgather_start && first_gather < 0) {
            CostTerms one = {0};
            cost_instr(an->prog, ins, 1.0, &one);
            first_gather = one.comm_s;
        }
    }
    const Seq *seq_off = &sp_off->seq[SEQ_BLOCK_FWD];
    for (int i = 0; i < seq_off->n; i++) {
        blocking_off += seq_off->ins[i].fn == RT_prt_allgather;
        started_off += instr_is_start(&seq_off->ins[i]);
    }
    truth("each gather of the forward started for the first layer and for the next", first > 0 && first == next);
    truth("grad_overlap off: the same gathers blocking, none started", blocking_off == first && started_off == 0);
    /* the ledger: exactly one more instance of each gathered buffer */
    int64_t extra = 0;
    for (int b = 0; b < sp->nbufs; b++)
        if (sp->bufs[b].instances == 2 && strstr(sp->bufs[b].name, ".resharded"))
            extra += sp->bufs[b].elems * dtype_bytes(sp->bufs[b].dtype);
    truth("gathered buffers of two instances", extra > 0);
    near("the ledger's comm class holds the second instances", (double)(sp->ledger[PRT_COMM] - sp_off->ledger[PRT_COMM]),
         (double)extra);
    /* one chunk's forward pass as one timeline, each wait on the latest start
     * into the same buffer instance */
    double dur[1024];
    int wait_of[1024], at[1024], m = 0;
    int64_t inst[1024];
    for (int64_t l = 0; l < L; l++)
        for (int i = 0; i < seq->n && m < 1024; i++) {
            const Instr *ins = &seq->ins[i];
            if (!when_holds(ins->when, l, L)) continue;
            CostTerms one = {0};
            cost_instr(an->prog, ins, 1.0, &one);
            const Arg *res = instr_is_start(ins) ? instr_async_result(ins) : &ins->args[0];
            dur[m] = cost_terms_total(&one);
            at[m] = i;
            inst[m] = parity_instance(res, l);
            wait_of[m] = instr_is_start(ins) ? -2 : -1;
            for (int j = m - 1; j >= 0 && instr_is_wait(ins) && wait_of[m] == -1; j--)
                if (wait_of[j] == -2 && instr_async_result(&seq->ins[at[j]])->buf == res->buf && inst[j] == inst[m])
                    wait_of[m] = j;
            truth("every wait of the pass has its start", !instr_is_wait(ins) || wait_of[m] >= 0);
            m++;
        }
    double hidden = 0;
    cost_timeline(dur, wait_of, m, &hidden);
    truth("some of the forward's gathers hidden", hidden > 0);
    near("one chunk's forward hides its pass's timeline", an->stages[0].fwd_hidden_chunk_s, hidden);
    near("the blocking forward is longer by exactly that", cost_terms_total(&off->stages[0].fwd),
         cost_terms_total(&an->stages[0].fwd) + hidden);
    double gathers = off->stages[0].fwd.comm_s; /* the blocking forward's: its gathers */
    truth("the first layer's first gather exposed", first_gather > 0 && hidden <= gathers - first_gather + 1e-15);
    double items = (double)an->prog->schedule.micro_batches * an->prog->schedule.chunks;
    near("hidden communication", an->comm_hidden_s,
         items * (an->stages[0].fwd_hidden_chunk_s + an->stages[0].bwd_hidden_chunk_s));
    near("nothing hidden with grad_overlap off", off->comm_hidden_s, 0);
    phases_sum("ZeRO-3 phases sum to the step", an);
    arena_free(&arena);
}

/* `overlap`: of what a started collective's timeline hides under compute,
 * only that share is hidden; the rest is the rank's own time and counts as
 * exposed.  The same plans at overlap 0.25 against the default (1): the
 * buckets of ZeRO-0 and the prefetched gathers and started scatters of
 * ZeRO-3 hide a quarter, and the step is longer by the other three. */
static void test_overlap_share(void)
{
    Arena arena = {0};
    const char *dp = "mesh { dp 2; }\nlayout { batch -> dp; }\n";
    const char *z3 = "mesh { dp 2; }\nlayout { batch -> dp; zero 3 over dp; }\n";
    const char *at = strstr(mlp_plan, "inter 0.5; }");
    truth("the test plan's efficiency statement", at != NULL);
    if (!at) return;
    const char *quarter = arena_printf(&arena, "%.*sinter 0.5; overlap 0.25; }%s", (int)(at - mlp_plan), mlp_plan,
                                       at + strlen("inter 0.5; }"));
    for (int k = 0; k < 2; k++) {
        const char *mesh = k ? z3 : dp;
        Analysis *all = analyze_text(&arena, "mlp_overlap_1", mesh);
        Analysis *q = analyze_plan(&arena, "mlp_overlap_q", arena_printf(&arena, "%s%s", quarter, mesh));
        truth("the overlap plans analyze", all != NULL && q != NULL);
        if (!all || !q) continue;
        near("overlap 0.25 is what a quarter hides", cost_hidden_share(&q->prog->plan->cluster), 0.25);
        near("no overlap statement: all of it", cost_hidden_share(&all->prog->plan->cluster), 1.0);
        truth(k ? "ZeRO-3 hides some of its gathers and scatters" : "the buckets hide some", all->comm_hidden_s > 0);
        near("a quarter of it hidden", q->comm_hidden_s, 0.25 * all->comm_hidden_s);
        near("the rest exposed: the step longer by three quarters", q->step_s,
             all->step_s + 0.75 * all->comm_hidden_s);
        near("the exposed phase holds it", q->phase_s[APHASE_COMM],
             all->phase_s[APHASE_COMM] + 0.75 * all->comm_hidden_s);
        phases_sum("overlap phases sum to the step", q);
    }
    arena_free(&arena);
}

/* Megatron-LM's pipeline scatter/gather (`pipeline_scatter on`): two stages
 * on two nodes of two GPUs, tp 2 inside each.  A message is 2 x 32 x 64 fp32
 * = 16 KiB; scattered, each tensor rank sends its 8 KiB across nodes and the
 * receiver all-gathers the 16 KiB over tp inside its node. */
static void test_pipeline_scatter(void)
{
    static const char *const base =
        "cluster { nodes 2; gpus_per_node 2;\n"
        "  gpu { memory 1 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; }\n"
        "  link intra 100 GB/s 2 us;\n"
        "  link inter 10 GB/s 5 us;\n"
        "  efficiency { gemm 0.5 0.6 0.7 0.8; attention 0.5; hbm 0.5; intra 0.5; inter 0.5; }\n"
        "}\n"
        "model m { seq 32; hidden 64; ffn 256; layers 4; repeat layers { block mlp; } }\n"
        "train { batch 8; micro_batch 2; precision fp32; optimizer sgd lr 0.1; }\n"
        "mesh { pp 2; tp 2; }\n";
    Arena arena = {0};
    Analysis *on = analyze_plan(&arena, "mlp_pp_scatter",
                                arena_printf(&arena, "%slayout { ffn -> tp; layers -> pp; pipeline_scatter on; }\n", base));
    Analysis *off = analyze_plan(&arena, "mlp_pp_whole", arena_printf(&arena, "%slayout { ffn -> tp; layers -> pp; }\n", base));
    truth("the scatter/gather plans analyze", on != NULL && off != NULL);
    if (!on || !off) return;
    double message = 2.0 * 32 * 64 * 4, m = 4; /* bytes; micro-batches per step */
    /* whole: 5 us + 16 KiB at 10 GB/s x 0.5; scattered: 5 us + 8 KiB across,
     * then an all-gather of 2 ranks inside a node: 2 us + 1/2 x 16 KiB at 100 GB/s x 0.5 */
    near("whole hand-off", off->t_p2p, 5e-6 + message / 5e9);
    near("scattered hand-off: half the message across, the all-gather inside",
         on->t_p2p, 5e-6 + message / 2 / 5e9 + 2e-6 + 0.5 * message / 50e9);
    near("pipeline bytes per rank per step, whole", off->pipeline_bytes, m * message);
    near("pipeline bytes per rank per step, 1/tp of them scattered", on->pipeline_bytes, off->pipeline_bytes / 2);
    near("across nodes: the same but for the halved messages", on->link_wire[1] - on->pipeline_bytes,
         off->link_wire[1] - off->pipeline_bytes);
    int gathers = 0, sends = 0;
    for (int i = 0; i < on->nrows; i++) {
        const CollRow *r = &on->rows[i];
        if (r->phase != PHASE_PIPELINE) continue;
        if (r->coll == COLL_SEND) {
            sends++;
            truth("a scattered send moves 1/tp of the message", r->elems * r->elem_bytes == message / 2 && !r->inside_node);
        } else if (r->coll == COLL_ALLGATHER) {
            gathers++;
            truth("the all-gather is over tp, inside a node, the whole message, once per micro-batch",
                  r->axis == on->prog->tp_axis && r->inside_node && r->group == 2 && r->elems * r->elem_bytes == message &&
                      r->calls == (int64_t)m);
            truth("the all-gather's rule names the scatter/gather", strstr(r->why, "scatter/gather") != NULL);
        }
    }
    truth("each stage sends and all-gathers", sends == 2 && gathers == 2);
    /* the all-gathers' wire inside the node: (n-1)/n of 16 KiB per micro-batch on the busiest stage */
    near("the tensor axis carries the all-gathers", on->axis_wire[on->prog->tp_axis] - off->axis_wire[off->prog->tp_axis],
         m * 0.5 * message);
    for (int s = 0; s < 2; s++)
        truth("host staging holds 1/tp of the messages",
              2 * on->prog->stages[s].host_staging == off->prog->stages[s].host_staging);
    phases_sum("scatter/gather phases sum to the step", on);
    arena_free(&arena);
}

static void test_uneven_chunks(void)
{
    static const char *const base =
        "cluster { nodes 1; gpus_per_node 2;\n"
        "  gpu { memory 1 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; }\n"
        "  link intra 10 GB/s 5 us;\n"
        "  efficiency { gemm 0.5 0.6 0.7 0.8; attention 0.5; hbm 0.5; intra 0.25; inter 0.5; }\n"
        "}\n"
        "model m { seq 32; hidden 64; ffn 256; layers 6; repeat layers { block mlp; } }\n"
        "train { batch 8; micro_batch 2; precision fp32; optimizer sgd lr 0.1; }\n"
        "mesh { pp 2; }\n";
    Arena arena = {0};
    Analysis *un = analyze_plan(&arena, "mlp_pp_uneven",
                                arena_printf(&arena,
                                             "%slayout { layers -> pp schedule interleaved 2;\n"
                                             "  stage 0 { layers 0 3..4; }\n  stage 1 { layers 1..2 5; } }\n",
                                             base));
    truth("the uneven interleaved plan analyzes", un != NULL);
    if (!un) return;
    /* items are [stage x 2 + chunk]: layer 0 | 1..2 || 3..4 | 5 */
    double f1 = un->stage_fwd[0], b1 = un->stage_bwd[0];   /* stage 0 chunk 0: layer 0 */
    near("a two-layer chunk's forward is two one-layer chunks'", un->stage_fwd[1], 2 * f1); /* stage 0 chunk 1: 3..4 */
    near("a two-layer chunk's backward is two one-layer chunks'", un->stage_bwd[1], 2 * b1);
    near("stage 1's first chunk holds two layers", un->stage_fwd[2], 2 * f1);         /* stage 1 chunk 0: 1..2 */
    near("stage 1's second chunk holds one layer", un->stage_fwd[3], f1);             /* stage 1 chunk 1: 5 */
    truth("the last chunk's backward clears the loss's gradient too", un->stage_bwd[3] > b1);
    /* each stage runs each micro-batch through 3 layers: 4 micro-batches x (1 + 2 layers) at least */
    truth("the simulated step is at least a stage's work", un->pipeline_s >= 4 * (3 * f1 + 3 * b1));
    phases_sum("uneven interleaved phases sum to the step", un);
    arena_free(&arena);
}

/* The ranks of a group that share a node, as the collectives' cost reads
 * them: 4 nodes of 4; dp 4 x tp 2 x cp 2 puts tp and cp inside a node, dp
 * across with one rank a node, and dp x cp (their data group, a derived axis)
 * across with two a node; dp 8 x tp 2 puts two of dp's ranks on a node. */
static void test_node_ranks(void)
{
    static const char *const cluster =
        "cluster { nodes 4; gpus_per_node 4;\n"
        "  gpu { memory 1 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; }\n"
        "  link intra 10 GB/s 5 us; link inter 1 GB/s 10 us; }\n"
        "model m { seq 32; hidden 64; ffn 256; layers 4; repeat layers { block mlp; } }\n"
        "train { batch 16; micro_batch 2; precision fp32; optimizer sgd lr 0.1; }\n";
    Arena arena = {0};
    Analysis *an = analyze_plan(&arena, "nodes_cp", arena_printf(&arena, "%s%s", cluster,
        "mesh { dp 4; tp 2; cp 2; }\nlayout { batch -> dp; ffn -> tp; seq -> cp; zero 1 over dp cp; }\n"));
    truth("the dp x tp x cp plan analyzes", an != NULL);
    if (an) {
        const Plan *p = an->prog->plan;
        truth("tp: both ranks on a node", plan_axis_node_ranks(p, 1) == 2);
        truth("cp: both ranks on a node", plan_axis_node_ranks(p, 2) == 2);
        truth("dp: one rank a node", plan_axis_node_ranks(p, 0) == 1);
        truth("the data group dp x cp is derived", p->mesh.nderived == 1);
        truth("dp x cp: two ranks a node", p->mesh.nderived == 1 && plan_axis_node_ranks(p, p->mesh.naxes) == 2);
    }
    an = analyze_plan(&arena, "nodes_dp", arena_printf(&arena, "%s%s", cluster,
        "mesh { dp 8; tp 2; }\nlayout { batch -> dp; ffn -> tp; }\n"));
    truth("the dp x tp plan analyzes", an != NULL);
    if (an) truth("dp 8 over 4 nodes: two ranks a node", plan_axis_node_ranks(an->prog->plan, 0) == 2);
    arena_free(&arena);
}

int main(void)
{
    test_primitives();
    test_memory_classes();
    test_attention_scores();
    test_flash_attention();
    test_pipeline_bubble();
    test_pipeline_scatter();
    test_uneven_chunks();
    test_allreduce();
    test_tp_overlapped();
    test_gradient_sync_overlapped();
    test_overlap();
    test_timeline();
    test_scatters_overlapped();
    test_prefetch_timeline();
    test_gathers_prefetched();
    test_overlap_share();
    test_node_ranks();
    if (diag_error_count()) printf("FAIL %d diagnostics\n", diag_error_count()), failures++;
    printf("%s: %d failure%s\n", failures ? "FAIL" : "ok", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
