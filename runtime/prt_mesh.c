/*
 * prt_mesh.c — prt_init: MPI, the runtime options, the mesh (coordinates, one
 * communicator per axis), the outputs and data checked before any training, and
 * the backend's start-up; the accessors of the mesh.  Every start-up phase
 * (PRT_STARTUP_PHASES) ends in a wait of the world that prt_wait polls, so
 * a rank that does not reach it is named; what cannot be polled (the
 * communicator splits, the backend's start-up) comes after such a wait, under
 * the watchdog thread.
 */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_backend.h"
#include "prt_internal.h"

void prt_startup_verdict(prt *rt, int phase, const char *message) {
    int first = message ? rt->world_rank : rt->world_size;
    const char *what = prt_startup_phase(rt, phase);
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, what, -1);
    if (first == rt->world_size) return;
    if (first == rt->world_rank) fprintf(stderr, "parc: error: %s\n", message);
    prt_exit_all(rt, 2);
}

/* Opens the outputs on rank 0 before any training, so that a path in a missing
 * directory or without write permission fails now, not after the run.  With
 * PRT_LOG_APPEND=1 (parc run --restarts, relaunching a failed job) the loss
 * file and the metrics log continue what the failed launch wrote. */
static void open_outputs(prt *rt, char *message, size_t size) {
    if (rt->world_rank != 0) return;
    const char *append = getenv("PRT_LOG_APPEND");
    const char *mode = append && !strcmp(append, "1") ? "a" : "w";
    const char *loss_path = getenv("PRT_LOSS_FILE");
    if (loss_path && *loss_path) {
        rt->loss_path = loss_path;
        rt->loss_file = fopen(loss_path, mode);
        if (!rt->loss_file) {
            snprintf(message, size, "PRT_LOSS_FILE %s: cannot open it for writing: %s", loss_path, strerror(errno));
            return;
        }
    }
    const char *metrics_path = getenv("PRT_METRICS_FILE"); /* the log's name when --log is not given */
    if (!rt->log_path && metrics_path && *metrics_path) rt->log_path = metrics_path;
    if (rt->log_path) {
        rt->log_file = fopen(rt->log_path, mode);
        if (!rt->log_file) {
            snprintf(message, size, "--log %s: cannot open it for writing: %s", rt->log_path, strerror(errno));
            return;
        }
    }
    if (rt->trace_path) {
        rt->trace_file = fopen(rt->trace_path, "w");
        if (!rt->trace_file)
            snprintf(message, size, "--trace %s: cannot open it for writing: %s", rt->trace_path, strerror(errno));
    }
}

/* The mesh: world size must be the product of the axis sizes. */
static void check_mesh(prt *rt, const prt_plan_desc *plan) {
    int64_t product = 1;
    int bad_mesh = plan->naxes < 0 || plan->naxes > PRT_MAX_AXES;
    for (int64_t a = 0; !bad_mesh && a < plan->naxes; a++) {
        if (plan->axis_sizes[a] < 1) bad_mesh = 1;
        else product *= plan->axis_sizes[a];
    }
    if (!bad_mesh && product == rt->world_size) return;
    if (rt->world_rank == 0) {
        fprintf(stderr, "parc: error: plan '%s' needs %lld ranks (mesh", plan->plan_name ? plan->plan_name : "?",
                (long long)product);
        for (int64_t a = 0; a < plan->naxes && a < PRT_MAX_AXES; a++)
            fprintf(stderr, "%s%s=%lld", a ? " x " : " ", plan->axis_names[a] ? plan->axis_names[a] : "?",
                    (long long)plan->axis_sizes[a]);
        fprintf(stderr, ") but was started with %d; run it with mpirun -np %lld\n", rt->world_size,
                (long long)product);
    }
    prt_exit_all(rt, 2);
}

/* This rank's coordinates, last axis fastest (the mesh checked): before any
 * wait, so that the watchdog's reports give every rank's. */
static void mesh_coordinates(prt *rt, const prt_plan_desc *plan) {
    rt->naxes = (int)plan->naxes;
    int rest = rt->world_rank;
    for (int a = rt->naxes - 1; a >= 0; a--) {
        rt->axis_size[a] = (int)plan->axis_sizes[a];
        rt->coord[a] = rest % rt->axis_size[a];
        rest /= rt->axis_size[a];
    }
    /* derived axes: the parts' coordinates in mesh order, the first slowest */
    rt->ncomms = rt->naxes;
    while (rt->ncomms < PRT_MAX_AXES && plan->axis_parts[rt->ncomms]) {
        int d = rt->ncomms++, size = 1, coord = 0;
        for (int a = 0; a < rt->naxes; a++)
            if (plan->axis_parts[d] >> a & 1) {
                size *= rt->axis_size[a];
                coord = coord * rt->axis_size[a] + rt->coord[a];
            }
        PRT_CHECK(size == plan->axis_sizes[d], "derived axis %s: its parts have %d ranks, the plan says %lld",
                  plan->axis_names[d] ? plan->axis_names[d] : "?", size, (long long)plan->axis_sizes[d]);
        rt->axis_size[d] = size;
        rt->coord[d] = coord;
    }
}

/* The mesh axes axis spans (bit a): itself, or a derived axis's parts. */
static int64_t axis_parts(const prt *rt, int axis) {
    return axis < rt->naxes ? (int64_t)1 << axis : rt->plan.axis_parts[axis];
}

/* One communicator per axis, mesh or derived (key = coordinate): the ranks
 * that differ only on the axis's parts. */
static void build_axes(prt *rt) {
    int stride = 1, strides[PRT_MAX_AXES];
    for (int a = rt->naxes - 1; a >= 0; a--) {
        strides[a] = stride;
        stride *= rt->axis_size[a];
    }
    prt_watched_barrier(rt, prt_startup_phase(rt, PRT_STARTUP_MESH));
    prt_block_begin("the communicator split (start-up)", -1);
    for (int a = 0; a < rt->ncomms; a++) {
        int color = rt->world_rank;
        for (int b = 0; b < rt->naxes; b++)
            if (axis_parts(rt, a) >> b & 1) color -= rt->coord[b] * strides[b];
        PRT_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, rt->coord[a], &rt->axis_comm[a]));
        MPI_Comm_set_errhandler(rt->axis_comm[a], MPI_ERRORS_RETURN);
        int r = -1;
        PRT_MPI_CHECK(MPI_Comm_rank(rt->axis_comm[a], &r));
        PRT_CHECK(r == rt->coord[a], "axis %d: communicator rank %d != coordinate %d", a, r, rt->coord[a]);
    }
    /* OpenBLAS: one thread per rank when several ranks share a node, unless the user says. */
    MPI_Comm local;
    PRT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    PRT_MPI_CHECK(MPI_Comm_size(local, &rt->local_ranks));
    MPI_Comm_free(&local);
    prt_block_end();
    if (!getenv("OPENBLAS_NUM_THREADS") && rt->local_ranks > 1) openblas_set_num_threads(1);
    int *tag_ub = NULL, has_ub = 0;
    PRT_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &has_ub));
    rt->tag_ub = has_ub && tag_ub ? *tag_ub : 32767;
}

/* The watchdog's own communicator, a duplicate of the world: the duplication is
 * polled, the watchdog's queries meanwhile going over the world itself (nothing
 * else sends point-to-point there), so a rank that does not reach it is named. */
static void watch_duplicate(prt *rt) {
    MPI_Comm watch;
    MPI_Request req;
    const char *what = prt_startup_phase(rt, PRT_STARTUP_DUP);
    PRT_MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &watch, &req));
    prt_wait(rt, &req, NULL, what, -1);
    rt->watch_comm = watch;
}

prt *prt_init(int64_t argc, char **argv, const prt_plan_desc *plan) {
    int ac = (int)argc, provided = 0;
    char **av = argv;
    double created, entered;
    prt_startup_begin(&created, &entered);
    PRT_CHECK(plan, "prt_init: no plan");
    prt_blas_select(ac, argv);  /* may restart the program: before MPI and anything else */
    prt_allocator_settings();   /* before MPI allocates anything */
    prt_mpi_settings();         /* before MPI reads its settings */
    PRT_MPI_CHECK(MPI_Init_thread(&ac, &av, MPI_THREAD_FUNNELED, &provided));
    double mpi_done = prt_monotonic();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    prt *rt = prt_xcalloc(1, sizeof *rt);
    rt->start_mark[PRT_START_CREATED] = created;
    rt->start_mark[PRT_START_INIT] = entered;
    rt->start_mark[PRT_START_MPI] = mpi_done;
    rt->plan = *plan;
    PRT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rt->world_rank));
    PRT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &rt->world_size));
    int hostlen = 0;
    PRT_MPI_CHECK(MPI_Get_processor_name(rt->host, &hostlen));
    prt_failure_context(rt);
    rt->step = -1;
    rt->steps = plan->steps;
    rt->die_rank = rt->die_step = -1;
    rt->wait_axis = -1;
    rt->watch_comm = MPI_COMM_WORLD;  /* the watchdog's messages until its own duplicate exists */
    const char *check_dtypes = getenv("PRT_CHECK_DTYPES");  /* every call's dtypes word, not the first step's */
    rt->check_dtypes_always = check_dtypes && *check_dtypes && strcmp(check_dtypes, "0") != 0;
    prt_dtype_checks_update(rt);

    prt_parse_flags(rt, (int)argc, argv);
    prt_blas_report(rt);
    check_mesh(rt, plan);
    mesh_coordinates(rt, plan);
    prt_watchdog_start(rt);
    watch_duplicate(rt);
    build_axes(rt);
    prt_check_placement(rt);

    /* Test hooks. */
    const char *die = getenv("PRT_TEST_DIE");
    if (die) {
        long long r = -1, s = -1;
        PRT_CHECK(sscanf(die, "%lld:%lld", &r, &s) == 2, "PRT_TEST_DIE must be RANK:STEP, got '%s'", die);
        rt->die_rank = r;
        rt->die_step = s;
    }
    char message[1024] = "";
    open_outputs(rt, message, sizeof message);
    if (!*message) prt_dump_init(rt, message, sizeof message);
    if (!*message) prt_ckpt_init(rt, message, sizeof message);
    prt_startup_verdict(rt, PRT_STARTUP_OUTPUTS, *message ? message : NULL);
    prt_data_open(rt);
    if (rt->backend->init) {  /* it may communicate (the CUDA backend's node split, NCCL's set-up) */
        prt_watched_barrier(rt, prt_startup_phase(rt, PRT_STARTUP_BACKEND));
        prt_block_begin("the backend's start-up", -1);
        rt->backend->init(rt);
        prt_block_end();
    }

    rt->tracing = rt->trace_path != NULL;
    prt_watched_barrier(rt, prt_startup_phase(rt, PRT_STARTUP_READY));
    rt->time_origin = MPI_Wtime();
    prt_startup_mark(rt, PRT_START_READY);
    return rt;
}

int64_t prt_coord(prt *rt, int64_t axis) {
    if (axis < 0) return 0;
    PRT_CHECK(axis < rt->ncomms, "axis %lld out of range (mesh has %d axes, %d derived)", (long long)axis, rt->naxes,
              rt->ncomms - rt->naxes);
    return rt->coord[axis];
}

int64_t prt_steps(prt *rt) { return rt->steps; }

double prt_lr(prt *rt, int64_t step) { return prt_lr_at(&rt->plan.lr, step); }

int prt_axis_size(prt *rt, int64_t axis) {
    if (axis < 0) return 1;
    PRT_CHECK(axis < rt->ncomms, "axis %lld out of range (mesh has %d axes, %d derived)", (long long)axis, rt->naxes,
              rt->ncomms - rt->naxes);
    return rt->axis_size[axis];
}

MPI_Comm prt_axis_comm(prt *rt, int64_t axis) {
    if (axis < 0) return MPI_COMM_NULL;
    PRT_CHECK(axis < rt->ncomms, "axis %lld out of range (mesh has %d axes, %d derived)", (long long)axis, rt->naxes,
              rt->ncomms - rt->naxes);
    return rt->axis_comm[axis];
}

