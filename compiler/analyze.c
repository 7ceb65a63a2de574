/*
 * analyze.c — pass 8: the memory ledger, FLOPs, collective volumes, the
 * pipeline bubble and the step-time estimate, all read off the Program.
 *
 * The ledger is the sum of the buffers the generated program allocates (plus
 * the runtime's communication staging, bounded here), so the number `explain`
 * prints is the number the runtime measures; tests assert they are equal.
 * The cost model is deliberately simple and stated: compute at the GPU's peak
 * rate for the plan's precision, each collective costs latency × steps +
 * bytes × bus factor / link bandwidth (nccl-tests' bus bandwidth), pipeline
 * idle time from simulating the actual schedule.
 */
#include "analyze.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const ledger_class_names[PRT_NCLASS] = {"weights",     "gradients", "master", "optimizer",
                                                    "activations", "comm",      "workspace"};

void format_bytes(double bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    double v = bytes;
    while (fabs(v) >= 1024.0 && u < 5) v /= 1024.0, u++;
    if (u == 0) snprintf(buf, size, "%.0f B", v);
    else snprintf(buf, size, "%.*f %s", fabs(v) >= 100 ? 0 : 1, v, units[u]);
}

static void link_of(const Plan *plan, int inside, double *bw, double *lat)
{
    const Cluster *c = &plan->cluster;
    *bw = inside ? c->intra_bw : c->inter_bw;
    *lat = inside ? c->intra_latency : c->inter_latency;
    if (*bw <= 0) *bw = 1e12;
}

static double coll_time(const Plan *plan, CollKind kind, int axis, int64_t bytes)
{
    if (axis < 0) return 0;
    int n = plan->mesh.axes[axis].size;
    if (n <= 1) return 0;
    double bw, lat;
    link_of(plan, plan_axis_inside_node(plan, axis), &bw, &lat);
    int hops = (kind == COLL_ALLREDUCE || kind == COLL_ALLREDUCE_MAX) ? 2 * (n - 1) : n - 1;
    return hops * lat + (double)bytes * coll_bus_factor(kind, n) / bw;
}

/* The runtime's own scratch, as the CPU runtime allocates it (parc_rt.h,
 * prt_expect_memory): each scratch buffer grows to its largest request.
 *   comm:      one packing buffer for [outer, S, inner] collectives with outer > 1,
 *              plus one staging copy per pipeline message a stage sends in a step
 *              (an upper bound on those still in flight);
 *   workspace: attention's T x T (2 T x T in a backward that recomputes the
 *              probabilities) and cross-entropy's 3 N floats share one buffer. */
/* Pipeline messages a stage sends per step: one per micro-batch per chunk
 * boundary, activations forward (none from the model's last chunk) and
 * gradients backward (none from its first). */
static void stage_sends(const Program *prog, const StageProgram *sp, int64_t *fwd, int64_t *bwd)
{
    *fwd = *bwd = 0;
    if (prog->nstages <= 1) return;
    int64_t m = prog->plan->train.micro_batches;
    for (int c = 0; c < sp->chunks; c++) {
        if (!(sp->stage == prog->nstages - 1 && c == sp->chunks - 1)) *fwd += m;
        if (!(sp->stage == 0 && c == 0)) *bwd += m;
    }
}

static int arg_is_16(const StageProgram *sp, const Arg *a)
{
    return a->kind == ARG_BUF && dtype_is_16(sp->bufs[a->buf].dtype);
}

static void runtime_scratch(const Program *prog, const StageProgram *sp, int64_t *comm, int64_t *work,
                            int64_t *work_16)
{
    int64_t pack = 0, scratch = 0, scratch_16 = 0;
    for (int q = 0; q < SEQ_COUNT; q++)
        for (int i = 0; i < sp->seq[q].n; i++) {
            const Instr *ins = &sp->seq[q].ins[i];
            if (ins->fn == RT_prt_allgather || ins->fn == RT_prt_reducescatter || ins->fn == RT_prt_alltoall) {
                int64_t outer = ins->args[3].i, S = prog->plan->mesh.axes[ins->axis].size;
                if (outer > 1 && S > 1 && ins->elems > pack) pack = ins->elems;
            }
            int64_t want = 0, base = 0;
            switch (ins->fn) {
            case RT_prt_attention_fwd: base = (ins->args[1].kind == ARG_NULL) * ins->args[4].i * ins->args[4].i; break;
            case RT_prt_attention_bwd:
                base = (ins->args[3].kind == ARG_NULL ? 2 : 1) * ins->args[5].i * ins->args[5].i;
                break;
            case RT_prt_xent_fwd: base = 3 * ins->args[4].i; break;
            default: break;
            }
#define A16(k) arg_is_16(sp, &ins->args[k])
#define HAS(k) (ins->args[k].kind != ARG_NULL)
#define I(k) (ins->args[k].i)
            switch (ins->fn) {
            case RT_prt_attention_fwd:
                want = (!HAS(1) || A16(1)) * I(4) * I(4) + (A16(2) * 3 + A16(0)) * I(4) * I(6);
                break;
            case RT_prt_attention_bwd:
                want = (!HAS(3) || A16(3) ? 2 : 1) * I(5) * I(5) + ((A16(2) + A16(0)) * 3 + A16(1)) * I(5) * I(7);
                break;
            case RT_prt_xent_fwd: want = 3 * I(4); break;
            case RT_prt_matmul_fwd:
            case RT_prt_matmul_t_fwd: {
                int64_t R = I(3) < PRT_CONVERT_ROWS ? I(3) : PRT_CONVERT_ROWS;
                want = A16(2) * I(4) * I(5) + R * (A16(1) * I(4) + A16(0) * I(5));
                break;
            }
            case RT_prt_matmul_bwd:
            case RT_prt_matmul_t_bwd: {
                int64_t R = I(5) < PRT_CONVERT_ROWS ? I(5) : PRT_CONVERT_ROWS;
                want = (A16(4) * HAS(0) + A16(1)) * I(6) * I(7) + R * (A16(2) * I(7) + (A16(0) + A16(3) * HAS(1)) * I(6));
                break;
            }
            case RT_prt_layernorm_bwd: want = (A16(1) + A16(2)) * I(9); break;
            case RT_prt_rmsnorm_bwd: want = A16(1) * I(7); break;
            case RT_prt_embed_bwd: want = A16(0) * I(4); break;
            default: break;
            }
#undef A16
#undef HAS
#undef I
            if (base > scratch) scratch = base;
            if (want > scratch_16) scratch_16 = want;
        }
    /* Pipeline send copies still in flight.  An activation sent for (micro,
     * chunk) is unreceived only while that pair is in flight on the sender (its
     * backward needs the receiver's gradient, which needs the activation); a
     * gradient sent back is unreceived only while the pair is in flight on the
     * receiver.  So the schedule's in-flight peaks bound the copies; one more per
     * direction covers a completed send not yet reaped. */
    int64_t sends = 0, fwd, bwd;
    stage_sends(prog, sp, &fwd, &bwd);
    if (prog->nstages > 1) {
        int p = prog->nstages, s = sp->stage;
        int prev = s > 0 ? s - 1 : p - 1;
        int64_t fwd_bound = prog->schedule.peak_in_flight[s] + 1;
        int64_t bwd_bound = prog->schedule.peak_in_flight[prev] + 1;
        sends = (fwd < fwd_bound ? fwd : fwd_bound) + (bwd < bwd_bound ? bwd : bwd_bound);
    }
    *comm = 4 * pack + 4 * sends * sp->boundary_elems;
    *work = 4 * scratch;
    *work_16 = 4 * (scratch_16 > scratch ? scratch_16 - scratch : 0);
}

static void add_row(Arena *arena, Analysis *an, CollRow row)
{
    for (int i = 0; i < an->nrows; i++) {
        CollRow *r = &an->rows[i];
        if (r->stage == row.stage && r->phase == row.phase && r->coll == row.coll && r->axis == row.axis &&
            r->elems == row.elems && r->op == row.op && r->tensor == row.tensor && r->why == row.why) {
            r->calls += row.calls;
            return;
        }
    }
    ARR_PUSH(arena, an->rows, an->nrows, an->rows_cap, row);
}

Analysis *analyze_program(Arena *arena, Program *prog)
{
    const Plan *plan = prog->plan;
    const Graph *g = prog->graph;
    Analysis *an = arena_alloc(arena, sizeof(Analysis));
    an->prog = prog;
    an->stages = arena_alloc(arena, sizeof(StageCost) * (size_t)prog->nstages);
    int half = plan->train.precision != PREC_FP32;
    an->peak_flops = half ? plan->cluster.flops_bf16
                          : (plan->cluster.flops_fp32 > 0 ? plan->cluster.flops_fp32 : plan->cluster.flops_bf16);
    if (an->peak_flops <= 0) an->peak_flops = 1e12;
    double hbm = plan->cluster.hbm_bandwidth > 0 ? plan->cluster.hbm_bandwidth : 1e12;

    for (int s = 0; s < prog->nstages; s++) {
        StageProgram *sp = &prog->stages[s];
        StageCost *sc = &an->stages[s];
        for (int b = 0; b < sp->nbufs; b++) {
            const Buffer *bf = &sp->bufs[b];
            sc->ledger[bf->klass] += bf->elems * bf->instances * dtype_bytes(bf->dtype);
            if (bf->klass == PRT_WEIGHTS) sc->params_local += bf->elems * bf->instances;
        }
        int64_t scratch_comm, scratch_work;
        runtime_scratch(prog, sp, &scratch_comm, &scratch_work, &sc->cpu_widen);
        sc->ledger[PRT_COMM] += scratch_comm;
        sc->ledger[PRT_WORKSPACE] += scratch_work;
        for (int k = 0; k < PRT_NCLASS; k++) {
            sp->ledger[k] = sc->ledger[k];
            sc->total += sc->ledger[k];
        }
        /* the program built for the CPU runtime also widens 16-bit operands to
         * fp32 in its workspace; a GPU computes on them directly */
        sp->ledger[PRT_WORKSPACE] += sc->cpu_widen;
        if (sc->total > an->max_total) an->max_total = sc->total, an->worst_stage = s;

        /* FLOPs and blocking communication per chunk */
        int L = sp->layers_per_chunk;
        double per_chunk_embed = 1.0 / (sp->chunks ? sp->chunks : 1);
        for (int q = 0; q < SEQ_COUNT; q++) {
            const Seq *seq = &sp->seq[q];
            int64_t calls = seq_calls_per_step(prog, sp, (SeqKind)q);
            double flops = 0, comm = 0;
            for (int i = 0; i < seq->n; i++) {
                const Instr *ins = &seq->ins[i];
                flops += ins->flops;
                if (ins->coll != COLL_NONE && ins->coll != COLL_SLICE)
                    comm += coll_time(plan, ins->coll, ins->axis, ins->elems * ins->elem_bytes);
                if (ins->coll != COLL_NONE && ins->coll != COLL_SLICE) {
                    CollRow row = {s,
                                   ins->phase,
                                   ins->coll,
                                   ins->axis,
                                   plan->mesh.axes[ins->axis].size,
                                   ins->elems,
                                   ins->elem_bytes,
                                   calls,
                                   plan_axis_inside_node(plan, ins->axis),
                                   ins->op >= 0 ? g->ops[ins->op].name
                                                : (ins->tensor >= 0 ? g->tensors[ins->tensor].name : "-"),
                                   ins->tensor >= 0 ? g->tensors[ins->tensor].name : "-",
                                   ins->why ? ins->why : ""};
                    if (row.group > 1) add_row(arena, an, row);
                }
            }
            sc->flops_step += flops * (double)calls;
            switch (q) {
            case SEQ_BLOCK_FWD: sc->flops_fwd_chunk += flops * L, sc->comm_fwd_chunk_s += comm * L; break;
            case SEQ_BLOCK_BWD: sc->flops_bwd_chunk += flops * L, sc->comm_bwd_chunk_s += comm * L; break;
            case SEQ_EMBED_FWD:
            case SEQ_HEAD_FWD:
                sc->flops_fwd_chunk += flops * per_chunk_embed, sc->comm_fwd_chunk_s += comm * per_chunk_embed;
                break;
            case SEQ_EMBED_BWD:
            case SEQ_HEAD_BWD:
                sc->flops_bwd_chunk += flops * per_chunk_embed, sc->comm_bwd_chunk_s += comm * per_chunk_embed;
                break;
            case SEQ_GRAD_SYNC_BLOCK:
                /* bucketed during backward: all but the last bucket overlap the
                 * backward of earlier layers */
                sc->sync_s += comm * (sp->sync_in_backward ? 1.0 : (double)calls);
                break;
            case SEQ_GRAD_SYNC_ONCE:
            case SEQ_OPTIM_BLOCK:
            case SEQ_OPTIM_ONCE: sc->sync_s += comm * (double)calls; break;
            default: break;
            }
        }
        /* optimizer: reads and writes weights, gradients, master and moments */
        double state = (double)(sc->ledger[PRT_WEIGHTS] + sc->ledger[PRT_GRADS] + sc->ledger[PRT_MASTER] +
                                sc->ledger[PRT_OPTIM]);
        sc->optim_s = 2.0 * state / hbm;
        an->flops_per_step += sc->flops_step * (double)(plan->mesh.world / (prog->nstages ? prog->nstages : 1));

        /* pipeline messages: one per micro-batch per chunk boundary, each way */
        if (prog->nstages > 1) {
            int64_t sends_fwd, sends_bwd;
            stage_sends(prog, sp, &sends_fwd, &sends_bwd);
            int bytes = dtype_bytes(sp->bufs[sp->resid_buf].dtype);
            int inside = plan_axis_inside_node(plan, prog->pp_axis);
            CollRow fwd = {s, PHASE_PIPELINE, COLL_SEND, prog->pp_axis, 2, sp->boundary_elems, bytes, sends_fwd,
                           inside, "stage boundary", "resid",
                           "activations to the next stage (one message per micro-batch per chunk)"};
            CollRow bwd = {s, PHASE_PIPELINE, COLL_SEND, prog->pp_axis, 2, sp->boundary_elems, bytes, sends_bwd,
                           inside, "stage boundary", "resid.grad",
                           "gradients to the previous stage (one message per micro-batch per chunk)"};
            if (sends_fwd) add_row(arena, an, fwd);
            if (sends_bwd) add_row(arena, an, bwd);
        }
    }

    /* totals of stage 0's rows (every rank runs one stage; report the busiest) */
    for (int i = 0; i < an->nrows; i++) {
        const CollRow *r = &an->rows[i];
        if (r->stage != an->worst_stage) continue;
        double bytes = (double)r->elems * r->elem_bytes * (double)r->calls;
        if (r->phase == PHASE_PIPELINE) {
            an->pipeline_bytes += bytes;
            an->link_wire[r->inside_node ? 0 : 1] += bytes;
            continue;
        }
        an->axis_bytes[r->axis] += bytes;
        double wire = bytes * coll_bus_factor(r->coll, r->group);
        an->axis_wire[r->axis] += wire;
        an->link_wire[r->inside_node ? 0 : 1] += wire;
    }

    /* model FLOPs: 6 Ψ per token (forward 2, backward 4) plus attention */
    const Model *m = &plan->model;
    double tokens = (double)plan->train.batch * (double)m->seq;
    double attn = m->block.kind == BLOCK_TRANSFORMER ? 12.0 * (double)m->layers * (double)m->seq * (double)m->hidden
                                                     : 0.0;
    an->model_flops_per_step = 6.0 * (double)g->params_total * tokens + attn * tokens;

    /* step time: the slowest stage's chunk times through the actual schedule */
    for (int s = 0; s < prog->nstages; s++) {
        const StageCost *sc = &an->stages[s];
        double tf = sc->flops_fwd_chunk / an->peak_flops + sc->comm_fwd_chunk_s;
        double tb = sc->flops_bwd_chunk / an->peak_flops + sc->comm_bwd_chunk_s;
        if (tf > an->t_fwd) an->t_fwd = tf;
        if (tb > an->t_bwd) an->t_bwd = tb;
    }
    if (prog->nstages > 1) {
        const StageProgram *sp = &prog->stages[0];
        double bw, lat;
        link_of(plan, plan_axis_inside_node(plan, prog->pp_axis), &bw, &lat);
        an->t_p2p = lat + (double)sp->boundary_elems * dtype_bytes(sp->bufs[sp->resid_buf].dtype) / bw;
    }
    double *idle = arena_alloc(arena, sizeof(double) * (size_t)prog->nstages);
    an->pipeline_s = schedule_simulate(&prog->schedule, an->t_fwd, an->t_bwd, an->t_p2p, idle);
    an->bubble_ideal = schedule_bubble_ideal(&prog->schedule);
    double min_idle = an->pipeline_s;
    for (int s = 0; s < prog->nstages; s++)
        if (idle[s] < min_idle) min_idle = idle[s];
    an->bubble_share = an->pipeline_s > 0 ? min_idle / an->pipeline_s : 0;
    double tail = 0;
    for (int s = 0; s < prog->nstages; s++) {
        double t = an->stages[s].sync_s + an->stages[s].optim_s;
        if (t > tail) tail = t;
    }
    an->step_s = an->pipeline_s + tail;
    return an;
}

/* ------------------------------------------------------------ checks */

static Analysis *variant(Arena *arena, const Plan *base, void (*change)(Plan *, int), int arg)
{
    Plan *p = arena_alloc(arena, sizeof(Plan));
    *p = *base;
    change(p, arg);
    int before = diag_error_count();
    FILE *null = fopen("/dev/null", "w");
    diag_set_stream(null);
    Graph *g = expand_model(arena, p);
    Program *prog = g ? lower_program(arena, p, g) : NULL;
    diag_set_stream(NULL);
    if (null) fclose(null);
    if (!prog || diag_error_count() != before) return NULL;
    return analyze_program(arena, prog);
}

static void set_zero(Plan *p, int stage) { p->layout.zero_stage = stage, p->layout.zero_axis = p->layout.dim_axis[DIM_BATCH]; }
static void set_recompute(Plan *p, int kind) { p->layout.recompute = (RecomputeKind)kind; }
static void halve_micro(Plan *p, int unused)
{
    (void)unused;
    p->train.micro_batch /= 2;
    p->train.micro_batches *= 2;
}

int analyze_check(Arena *arena, const Analysis *an)
{
    const Program *prog = an->prog;
    const Plan *plan = prog->plan;
    int errors = 0;
    char buf[64], cap[64];
    /* tensor and sequence parallel groups should not cross nodes */
    for (int a = 0; a < plan->mesh.naxes; a++) {
        if (plan_axis_inside_node(plan, a) || plan->mesh.axes[a].size <= 1) continue;
        int tensor_axis = a == prog->tp_axis || a == plan->layout.sp_axis;
        if (!tensor_axis) continue;
        format_bytes(an->axis_wire[a], buf, sizeof buf);
        char bw[64];
        snprintf(bw, sizeof bw, "%.4g GB", plan->cluster.inter_bw / 1e9);
        diag_warning(plan->mesh.axes[a].loc,
                     "put the tensor axis last in `mesh { ... }` so its groups are GPUs of one node, and let "
                     "pipeline or data parallelism cross nodes",
                     "tensor-parallel axis `%s` spans nodes: its groups push %s per step over the %s/s link between "
                     "nodes",
                     plan->mesh.axes[a].name, buf, bw);
    }
    double capacity = plan->cluster.gpu_memory;
    if (capacity <= 0 || (double)an->max_total <= capacity) return 0;

    const StageCost *sc = &an->stages[an->worst_stage];
    /* the explanation: breakdown, bytes per parameter, the cheapest changes */
    char hint[4096];
    size_t used = 0;
#define HINT(...)                                                                          \
    do {                                                                                   \
        if (used < sizeof hint) used += (size_t)snprintf(hint + used, sizeof hint - used, __VA_ARGS__); \
    } while (0)
    HINT("per GPU:");
    for (int k = 0; k < PRT_NCLASS; k++) {
        if (!sc->ledger[k]) continue;
        format_bytes((double)sc->ledger[k], buf, sizeof buf);
        HINT(" %s %s%s", ledger_class_names[k], buf, k + 1 < PRT_NCLASS ? "," : "");
    }
    double states = (double)(sc->ledger[PRT_WEIGHTS] + sc->ledger[PRT_GRADS] + sc->ledger[PRT_MASTER] +
                             sc->ledger[PRT_OPTIM]);
    if (sc->params_local > 0) {
        double P = (double)sc->params_local;
        format_bytes(states, buf, sizeof buf);
        HINT("\n        model states: %.4g bytes per parameter (weights %.3g, gradients %.3g, fp32 master %.3g, "
             "optimizer moments %.3g) x %.4g B parameters = %s",
             states / P, (double)sc->ledger[PRT_WEIGHTS] / P, (double)sc->ledger[PRT_GRADS] / P,
             (double)sc->ledger[PRT_MASTER] / P, (double)sc->ledger[PRT_OPTIM] / P, P / 1e9, buf);
    }
    /* the cheapest changes, each re-lowered */
    int dp_axis = plan->layout.dim_axis[DIM_BATCH];
    int dp = dp_axis >= 0 ? plan->mesh.axes[dp_axis].size : 1;
    struct {
        void (*fn)(Plan *, int);
        int arg;
        const char *what;
    } tries[8];
    int ntries = 0;
    if (dp > 1)
        for (int z = plan->layout.zero_stage + 1; z <= 3; z++) {
            tries[ntries].fn = set_zero, tries[ntries].arg = z;
            tries[ntries++].what = z == 1 ? "zero 1 over dp" : z == 2 ? "zero 2 over dp" : "zero 3 over dp";
        }
    if (plan->layout.recompute < RECOMPUTE_SELECTIVE)
        tries[ntries].fn = set_recompute, tries[ntries].arg = RECOMPUTE_SELECTIVE,
        tries[ntries++].what = "recompute selective";
    if (plan->layout.recompute < RECOMPUTE_FULL)
        tries[ntries].fn = set_recompute, tries[ntries].arg = RECOMPUTE_FULL, tries[ntries++].what = "recompute full";
    if (plan->train.micro_batch % 2 == 0)
        tries[ntries].fn = halve_micro, tries[ntries].arg = 0, tries[ntries++].what = "micro_batch halved";
    int fits = 0;
    double min_other = (double)an->max_total - states;
    const char *min_other_what = NULL;
    for (int i = 0; i < ntries; i++) {
        Analysis *v = variant(arena, plan, tries[i].fn, tries[i].arg);
        if (!v) continue;
        format_bytes((double)v->max_total, buf, sizeof buf);
        int ok = (double)v->max_total <= capacity;
        fits += ok;
        HINT("\n        %-22s -> %s per GPU%s", tries[i].what, buf,
             ok ? (fits == 1 ? " (fits: the cheapest change)" : " (fits)") : "");
        const StageCost *vs = &v->stages[v->worst_stage];
        double vstates = (double)(vs->ledger[PRT_WEIGHTS] + vs->ledger[PRT_GRADS] + vs->ledger[PRT_MASTER] +
                                  vs->ledger[PRT_OPTIM]);
        if ((double)v->max_total - vstates < min_other && vstates >= states) {
            min_other = (double)v->max_total - vstates;
            min_other_what = tries[i].what;
        }
    }
    if (!fits) {
        /* more GPUs: model states shrink with ZeRO-3 over N data-parallel ranks */
        double room = capacity - min_other;
        if (room > 0) {
            double n = ceil(states / room);
            format_bytes(states / n + min_other, buf, sizeof buf);
            HINT("\n        no change of this mesh fits: model states alone are %.0f%% of the GPU; ZeRO-3 divides "
                 "them by the data-parallel size: dp %.0f%s%s -> %s per GPU",
                 100.0 * states / capacity, n, min_other_what ? " with " : "", min_other_what ? min_other_what : "",
                 buf);
        } else {
            HINT("\n        activations and buffers alone exceed the GPU: shard the model (tp, pp) or shrink "
                 "micro_batch and seq");
        }
    }
#undef HINT
    format_bytes((double)an->max_total, buf, sizeof buf);
    format_bytes(capacity, cap, sizeof cap);
    if (prog->nstages > 1)
        diag_error(plan->cluster.memory_loc.file ? plan->cluster.memory_loc : plan->cluster.loc, hint,
                   "the plan does not fit: a rank of stage %d needs %s, the GPU holds %s", an->worst_stage, buf, cap);
    else
        diag_error(plan->cluster.memory_loc.file ? plan->cluster.memory_loc : plan->cluster.loc, hint,
                   "the plan does not fit: each rank needs %s, the GPU holds %s", buf, cap);
    errors++;
    return errors;
}
