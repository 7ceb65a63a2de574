/*
 * cost.h — the cost model's terms, each with its stated efficiency.
 *
 * Takes: a cluster (its peaks and its Efficiency, parc.h) and one piece of
 * work — a GEMM of a shape, attention matmuls, bytes a memory-bound op
 * streams, a collective of some bytes over a group — and gives its seconds.
 * analyze.c sums these over the lowered program's instructions; nothing here
 * reads a plan's model.  The formulas and where each default efficiency comes
 * from are in docs/cost-model.md.
 */
#ifndef PARC_COST_H
#define PARC_COST_H

#include "ir.h"

/* nccl-tests bus bandwidth factor of a collective over a group of n ranks:
 * all-reduce 2(n-1)/n, gathers and scatters (n-1)/n, a pipeline message 1. */
double cost_bus_factor(CollKind kind, int n);

/* GEMM shape classes by the smallest of (m, n, k): below 128, below 512,
 * below 2048, and the rest.  ORDER: Efficiency.gemm[] follows this enum. */
typedef enum { GEMM_TINY, GEMM_SMALL, GEMM_MEDIUM, GEMM_LARGE } GemmClass;
extern const int64_t gemm_class_min_dim[PARC_GEMM_CLASSES];
GemmClass cost_gemm_class(int64_t m, int64_t n, int64_t k);
/* gemm_class_names and the default sets: parc.h, beside Efficiency. */

/* Peak FLOP/s for a precision (bf16/fp16 at the 16-bit rate, fp32 at the
 * fp32 rate when given, else the 16-bit one). */
double cost_peak_flops(const Cluster *cl, Precision p);

/* Seconds of one GEMM m x k by k x n (2 m n k FLOPs) at peak x efficiency of its class. */
double cost_gemm_s(const Cluster *cl, double peak, int64_t m, int64_t n, int64_t k);
/* The same at the plan's precision: its peak (cost_peak_flops), and for a
 * 16-bit plan the class's `gemm16` efficiency where the cluster gives one. */
double cost_gemm_prec_s(const Cluster *cl, Precision p, int64_t m, int64_t n, int64_t k);
/* Seconds of `flops` of attention matmuls at peak x attention efficiency. */
double cost_attention_s(const Cluster *cl, double peak, double flops);
/* Seconds to stream `bytes` through HBM (reads + writes) at bandwidth x efficiency. */
double cost_stream_s(const Cluster *cl, double bytes);
/* The same for GELU and SwiGLU, at the `activation` efficiency. */
double cost_activation_s(const Cluster *cl, double bytes);
/* Memory-bound ops by class (MemKind, ir.h), each at its own efficiency of the HBM
 * bandwidth (norm, softmax and optimizer as hbm where the cluster leaves them
 * at 0; attention's score matrix, MEM_SCORES, as softmax); ops over 16-bit
 * tensors (wide16) at that times their class's `stream16` (streams, norms,
 * activations, the loss's softmax, attention's scores). */
double cost_memory_s(const Cluster *cl, MemKind kind, double bytes, int wide16);
/* Seconds of `bytes` of attention score tiles passed over on chip (flash
 * attention's, ops.h `onchip`): at HBM bandwidth x `tiles` (x stream16's
 * scores share when 16-bit) where the cluster states it; else at `scores`
 * where it states that (a CPU fragment from before `tiles`, whose kernel's
 * rate it was); else none: on a GPU they are part of the fused kernel whose
 * FLOP rate the `attention` efficiency is. */
double cost_tiles_s(const Cluster *cl, double bytes, int wide16);
/* Seconds of one collective of `bytes` per rank (the buffer nccl-tests calls
 * size) over a group of n ranks of which node_ranks share a node (at least
 * n: the group is inside a node, on the intra link; fewer: it spans nodes,
 * plan_axis_node_ranks): latency x steps + bytes x bus factor / (link
 * bandwidth x bus efficiency).  Across nodes a ring collective (all-reduce,
 * all-gather, reduce-scatter) crosses at node_ranks x `link inter`, at most
 * `link intra`.  Steps: 2(n-1) for all-reduce (ring reduce-scatter +
 * all-gather), n-1 for the others, 1 for a send. */
double cost_coll_s(const Cluster *cl, CollKind kind, int n, int node_ranks, double bytes);
/* The latency and bandwidth parts of cost_coll_s separately. */
double cost_coll_latency_s(const Cluster *cl, CollKind kind, int n, int node_ranks);
double cost_coll_bandwidth_s(const Cluster *cl, CollKind kind, int n, int node_ranks, double bytes);

/* The share of what cost_overlap and cost_timeline find hidden under compute
 * that is hidden: the cluster's `overlap` (1 unless it says; CPU ranks move
 * a started collective's bytes with their own cores, so the rest of that
 * time is theirs and counts as exposed). */
double cost_hidden_share(const Cluster *cl);

/* Collectives started while compute goes on, one link: collective i may
 * start at ready[i] (seconds into the compute) and takes dur[i]; they run
 * one after the other in order.  Returns the seconds the last one ends after
 * compute_end (0 when it ends before: everything hidden) and sets *hidden to
 * the rest of their total time. */
double cost_overlap(const double *ready, const double *dur, int n, double compute_end, double *hidden);
/* One call of a sequence with started collectives (overlap_scatters): item i
 * costs dur[i]; wait_of[i] is -1 for work that blocks (compute, blocking
 * collectives), -2 for a start, else the index of the start it waits for.
 * Work runs in order; a started collective runs on the link from its start,
 * once the link is free (one after the other); a wait holds the work until
 * its collective ends.  Returns the sequence's time; *hidden: how much of the
 * started collectives' time ran under work. */
double cost_timeline(const double *dur, const int *wait_of, int n, double *hidden);
/* The same, and per start i, hidden_of[i]: its time less what its wait held
 * the work for (what was queued on the link before it counts to it); the
 * starts' hidden_of sum to *hidden.  Other entries are left alone. */
double cost_timeline_each(const double *dur, const int *wait_of, int n, double *hidden, double *hidden_of);

/* What one instruction costs, by term.  flops and bytes say what was
 * charged, so reports can print the rate each term ran at. */
typedef struct CostTerms {
    double gemm_s, attention_s, stream_s, comm_s;
    double gemm_flops, attention_flops, stream_bytes, comm_bytes;
    double onchip_bytes; /* attention's score tiles that stay on chip (in attention_s) */
    double gemm_class_flops[PARC_GEMM_CLASSES];
} CostTerms;

/* Adds the cost of instruction `ins` (one call) times `times` to *t: an op
 * entry as its row of op_table says (ops.h: the GEMMs of a linear, forward
 * one and backward two; attention matmuls plus the score matrix streamed
 * through memory; the bytes every other op streams), a collective by
 * cost_coll_s.  Report-only collectives (fn < 0) count: the runtime performs
 * them inside an op. */
void cost_instr(const Program *prog, const Instr *ins, double times, CostTerms *t);
void cost_terms_add(CostTerms *to, const CostTerms *from, double times);
double cost_terms_total(const CostTerms *t);

#endif
