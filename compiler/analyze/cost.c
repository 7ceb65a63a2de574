/*
 * cost.c — the cost model's terms (cost.h): GEMMs at a shape-dependent
 * efficiency, attention matmuls at their kernel's efficiency, memory-bound
 * ops at HBM bandwidth x efficiency, collectives by latency x steps + bytes
 * x bus factor / (bandwidth x bus efficiency).
 *
 * The efficiencies come from the plan's cluster: a named default set
 * (front/efficiency.c, where each is argued) or its own `efficiency`
 * statement.
 */
#include "cost.h"
#include "ops.h"

#include <stdlib.h>
#include <string.h>

const int64_t gemm_class_min_dim[PARC_GEMM_CLASSES] = {1, 128, 512, 2048};

double cost_bus_factor(CollKind kind, int n)
{
    if (n <= 1) return 0;
    switch (kind) {
    case COLL_ALLREDUCE:
    case COLL_ALLREDUCE_MAX: return 2.0 * (n - 1) / n;
    case COLL_ALLGATHER:
    case COLL_REDUCESCATTER:
    case COLL_ALLTOALL:
    case COLL_ALLTOALLV: return (double)(n - 1) / n;
    case COLL_SEND:
    case COLL_RECV:
    case COLL_SHIFT: return 1.0; /* a ring step: each rank sends its block once, to the next */
    default: return 0;
    }
}

GemmClass cost_gemm_class(int64_t m, int64_t n, int64_t k)
{
    int64_t d = m < n ? m : n;
    if (k < d) d = k;
    for (int c = PARC_GEMM_CLASSES - 1; c > 0; c--)
        if (d >= gemm_class_min_dim[c]) return (GemmClass)c;
    return GEMM_TINY;
}

double cost_peak_flops(const Cluster *cl, Precision p)
{
    double peak = p != PREC_FP32 ? cl->flops_bf16 : (cl->flops_fp32 > 0 ? cl->flops_fp32 : cl->flops_bf16);
    return peak > 0 ? peak : 1e12;
}

/* An efficiency a plan left at zero (a hand-built Cluster) counts as 1. */
static double eff_or_one(double e) { return e > 0 ? e : 1.0; }

double cost_gemm_s(const Cluster *cl, double peak, int64_t m, int64_t n, int64_t k)
{
    if (m <= 0 || n <= 0 || k <= 0) return 0;
    double e = eff_or_one(cl->eff.gemm[cost_gemm_class(m, n, k)]);
    return 2.0 * (double)m * (double)n * (double)k / (peak * e);
}

double cost_gemm_prec_s(const Cluster *cl, Precision p, int64_t m, int64_t n, int64_t k)
{
    if (m <= 0 || n <= 0 || k <= 0) return 0;
    GemmClass c = cost_gemm_class(m, n, k);
    double e = p != PREC_FP32 && cl->eff.gemm16[c] > 0 ? cl->eff.gemm16[c] : eff_or_one(cl->eff.gemm[c]);
    return 2.0 * (double)m * (double)n * (double)k / (cost_peak_flops(cl, p) * e);
}

double cost_attention_s(const Cluster *cl, double peak, double flops)
{
    return flops / (peak * eff_or_one(cl->eff.attention));
}

double cost_memory_s(const Cluster *cl, MemKind kind, double bytes, int wide16)
{
    const Efficiency *e = &cl->eff;
    double bw = cl->hbm_bandwidth > 0 ? cl->hbm_bandwidth : 1e12;
    double eff = eff_or_one(e->hbm);
    int c16 = 0; /* its stream16 class */
    switch (kind) {
    case MEM_STREAM: break;
    case MEM_NORM: eff = e->norm > 0 ? e->norm : eff, c16 = 1; break;
    case MEM_ACTIVATION: eff = eff_or_one(e->activation), c16 = 2; break;
    case MEM_SOFTMAX: eff = e->softmax > 0 ? e->softmax : eff, c16 = 3; break;
    case MEM_OPTIMIZER: eff = e->optimizer > 0 ? e->optimizer : eff; break;
    case MEM_SCORES: eff = e->scores > 0 ? e->scores : e->softmax > 0 ? e->softmax : eff, c16 = 4; break;
    }
    if (wide16) eff *= eff_or_one(e->stream16[c16]);
    return bytes / (bw * eff);
}

double cost_tiles_s(const Cluster *cl, double bytes, int wide16)
{
    const Efficiency *e = &cl->eff;
    if (e->tiles <= 0 && e->scores <= 0) return 0;
    double bw = cl->hbm_bandwidth > 0 ? cl->hbm_bandwidth : 1e12;
    double eff = e->tiles > 0 ? e->tiles : e->scores;
    if (wide16) eff *= eff_or_one(e->stream16[4]);
    return bytes / (bw * eff);
}

double cost_stream_s(const Cluster *cl, double bytes) { return cost_memory_s(cl, MEM_STREAM, bytes, 0); }

double cost_activation_s(const Cluster *cl, double bytes) { return cost_memory_s(cl, MEM_ACTIVATION, bytes, 0); }

static int coll_steps(CollKind kind, int n)
{
    if (kind == COLL_SEND || kind == COLL_RECV || kind == COLL_SHIFT) return 1;
    return (kind == COLL_ALLREDUCE || kind == COLL_ALLREDUCE_MAX) ? 2 * (n - 1) : n - 1;
}

double cost_coll_latency_s(const Cluster *cl, CollKind kind, int n, int node_ranks)
{
    if (n <= 1 || kind == COLL_NONE || kind == COLL_SLICE) return 0;
    return coll_steps(kind, n) * (node_ranks >= n ? cl->intra_latency : cl->inter_latency);
}

double cost_coll_bandwidth_s(const Cluster *cl, CollKind kind, int n, int node_ranks, double bytes)
{
    if (n <= 1 || kind == COLL_NONE || kind == COLL_SLICE) return 0;
    int inside = node_ranks >= n;
    double bw = inside ? cl->intra_bw : cl->inter_bw;
    if (bw <= 0) bw = 1e12;
    /* a ring collective over a group with k ranks on each node runs k rings
     * side by side, each crossing between nodes through another rank's link
     * (NCCL's channels, one or more per NIC; nccl-tests' bus bandwidths across
     * nodes approach the node's NICs together), so it crosses at k times a
     * rank's `link inter`, and no faster than the link inside the node.  An
     * all-to-all's share for other nodes leaves through each rank's own link. */
    int ring = kind == COLL_ALLREDUCE || kind == COLL_ALLREDUCE_MAX || kind == COLL_ALLGATHER ||
               kind == COLL_REDUCESCATTER;
    if (!inside && ring && node_ranks > 1) {
        bw *= node_ranks;
        if (cl->intra_bw > 0 && bw > cl->intra_bw) bw = cl->intra_bw;
    }
    double factor = (kind == COLL_SEND || kind == COLL_RECV || kind == COLL_SHIFT) ? 1.0 : cost_bus_factor(kind, n);
    /* Hockney's (n + n_1/2) / r_inf: below n_1/2 a collective cannot fill
     * its pipeline of chunks and runs at under half its bus bandwidth */
    double half = cl->eff.half_bytes[inside ? 0 : 1];
    return (bytes + (half > 0 ? half : 0)) * factor / (bw * eff_or_one(cl->eff.bus[inside ? 0 : 1]));
}

double cost_coll_s(const Cluster *cl, CollKind kind, int n, int node_ranks, double bytes)
{
    return cost_coll_latency_s(cl, kind, n, node_ranks) + cost_coll_bandwidth_s(cl, kind, n, node_ranks, bytes);
}

/* ------------------------------------------------------------ per instruction */

/* One call of a graph op's entry, as its row of op_table says (ops.h): its
 * GEMMs, its FLOPs at the attention efficiency, the elements it moves in the
 * plan's precision at its memory class's efficiency. */
static void cost_op_entry(const Program *prog, const Instr *ins, double times, CostTerms *t)
{
    const Cluster *cl = &prog->plan->cluster;
    Precision p = prog->plan->train.precision;
    int bytes = plan_precision_bytes(p);
    const OpDesc *d = &op_table[prog->graph->ops[ins->op].kind];
    int bwd = ins->entry == ENTRY_BACKWARD;
    if (d->cost == OP_COST_GEMM) {
        int64_t mnk[3];
        double calls = d->gemm(&ins->shape, bwd, mnk);
        double secs = calls * cost_gemm_prec_s(cl, p, mnk[0], mnk[1], mnk[2]);
        double flops = calls * 2.0 * (double)mnk[0] * (double)mnk[1] * (double)mnk[2];
        t->gemm_s += times * secs;
        t->gemm_flops += times * flops;
        t->gemm_class_flops[cost_gemm_class(mnk[0], mnk[1], mnk[2])] += times * flops;
        return;
    }
    if (d->cost == OP_COST_ATTENTION) {
        t->attention_s += times * cost_attention_s(cl, cost_peak_flops(cl, p), ins->flops);
        t->attention_flops += times * ins->flops;
        if (d->onchip) {
            double b = d->onchip(&ins->shape, bwd) * bytes;
            t->attention_s += times * cost_tiles_s(cl, b, bytes == 2);
            t->onchip_bytes += times * b;
        }
    }
    if (d->cost == OP_COST_STREAM || d->cost == OP_COST_ATTENTION) {
        double b = d->traffic(&ins->shape, bwd) * bytes;
        t->stream_s += times * cost_memory_s(cl, d->mem, b, bytes == 2);
        t->stream_bytes += times * b;
    }
}

void cost_instr(const Program *prog, const Instr *ins, double times, CostTerms *t)
{
    const Plan *plan = prog->plan;
    if (ins->coll != COLL_NONE && ins->coll != COLL_SLICE) {
        if (ins->axis < 0) return;
        int n = instr_group(plan, ins);
        double bytes = (double)ins->elems * ins->elem_bytes;
        /* a point-to-point message is inside a node only where its axis is */
        int p2p = ins->coll == COLL_SEND || ins->coll == COLL_RECV || ins->coll == COLL_SHIFT;
        int node = p2p ? (plan_axis_inside_node(plan, ins->axis) ? n : 1) : plan_axis_node_ranks(plan, ins->axis);
        t->comm_s += times * cost_coll_s(&plan->cluster, ins->coll, n, node, bytes);
        if (n > 1) t->comm_bytes += times * bytes;
        return;
    }
    if (ins->op >= 0 && ins->entry != ENTRY_NONE) {
        cost_op_entry(prog, ins, times, t);
        return;
    }
    /* the runtime's own data movement between ops: a gradient cleared (one
     * pass), a copy (two), a gradient added into (three; two where it is the
     * first writer and copies, first_write.c) -- streams at hbm */
    int passes = ins->fn == RT_prt_zero ? 1 : ins->fn == RT_prt_copy ? 2 : ins->fn == RT_prt_acc ? 3 : 0;
    int count = ins->fn == RT_prt_zero ? 1 : 2;
    if (passes == 0 || ins->nargs <= count || ins->args[count].kind != ARG_INT) return;
    if (ins->fn == RT_prt_acc && (ins->writes & 1u)) passes = 2;
    int bytes = plan_precision_bytes(plan->train.precision);
    double b = (double)passes * (double)ins->args[count].i * bytes;
    /* a clear and a copy move bytes whatever their dtype (the CPU runtime's
     * memset and memcpy); only an accumulation takes the 16-bit element path */
    t->stream_s += times * cost_memory_s(&plan->cluster, MEM_STREAM, b, bytes == 2 && passes == 3);
    t->stream_bytes += times * b;
}

void cost_terms_add(CostTerms *to, const CostTerms *from, double times)
{
    to->gemm_s += times * from->gemm_s;
    to->attention_s += times * from->attention_s;
    to->stream_s += times * from->stream_s;
    to->comm_s += times * from->comm_s;
    to->gemm_flops += times * from->gemm_flops;
    to->attention_flops += times * from->attention_flops;
    to->stream_bytes += times * from->stream_bytes;
    to->comm_bytes += times * from->comm_bytes;
    to->onchip_bytes += times * from->onchip_bytes;
    for (int c = 0; c < PARC_GEMM_CLASSES; c++) to->gemm_class_flops[c] += times * from->gemm_class_flops[c];
}

double cost_hidden_share(const Cluster *cl) { return cl->eff.overlap_set ? cl->eff.overlap : 1.0; }

double cost_terms_total(const CostTerms *t) { return t->gemm_s + t->attention_s + t->stream_s + t->comm_s; }

double cost_timeline(const double *dur, const int *wait_of, int n, double *hidden)
{
    return cost_timeline_each(dur, wait_of, n, hidden, NULL);
}

double cost_timeline_each(const double *dur, const int *wait_of, int n, double *hidden, double *hidden_of)
{
    double t = 0, link = 0, started = 0, work = 0;
    double *end = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    PARC_ASSERT(end);
    for (int i = 0; i < n; i++) {
        if (wait_of[i] == -2) {
            end[i] = link = (t > link ? t : link) + dur[i];
            started += dur[i];
        } else if (wait_of[i] >= 0) {
            PARC_ASSERT(wait_of[i] < i && wait_of[wait_of[i]] == -2);
            double held = end[wait_of[i]] > t ? end[wait_of[i]] - t : 0; /* the wait's exposed time */
            if (hidden_of) hidden_of[wait_of[i]] = dur[wait_of[i]] - held;
            t += held;
        } else {
            t += dur[i];
            work += dur[i];
        }
    }
    free(end);
    *hidden = started - (t - work);
    return t;
}

double cost_overlap(const double *ready, const double *dur, int n, double compute_end, double *hidden)
{
    double link = 0, total = 0;
    for (int i = 0; i < n; i++) {
        double begin = ready[i] > link ? ready[i] : link;
        link = begin + dur[i];
        total += dur[i];
    }
    double exposed = link > compute_end ? link - compute_end : 0;
    if (exposed > total) exposed = total;
    *hidden = total - exposed;
    return exposed;
}
