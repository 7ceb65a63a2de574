/*
 * prt_placement.c — the start-up check that the ranks landed where the plan
 * assumed, by the host name each rank reports.  Every rank learns every
 * rank's host (the watchdog names the host of a rank it lost), and rank 0
 * warns where the groups of an axis have ranks on more than one host and the
 * plan did not count on it:
 *   - each tensor-parallel group (the plan's tp axis) that does, always: its
 *     collectives, issued in every layer, cross the network (at most
 *     PLACEMENT_MAX_GROUPS warnings, then a count of the rest);
 *   - any other axis that the plan's cluster keeps inside a node (every
 *     group's ranks within one block of gpus_per_node consecutive ranks, the
 *     rule the cost model prices its collectives and pipeline messages by,
 *     plan_axis_inside_node), once, with how many of its groups do and the
 *     first: the run pays the link between nodes where the estimate counted
 *     the one inside a node.
 * The run goes on.
 *
 * Test hook: PRT_HOSTNAME=NAME,NAME,... gives world rank r the r-th name (the
 * last one to the ranks after it) instead of MPI's processor name, so a test
 * on one machine can stand for several.  PRT_PLACEMENT_FILE=PATH: rank 0
 * writes `RANK HOST` per world rank there (for the launcher).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"

enum { PLACEMENT_MAX_GROUPS = 8, PLACEMENT_MAX_LISTED = 8 };

/* The test hook's name for this rank, into rt->host. */
static void fake_hostname(prt *rt) {
    const char *list = getenv("PRT_HOSTNAME");
    if (!list || !*list) return;
    const char *p = list;
    for (int r = 0; r < rt->world_rank; r++) {
        const char *comma = strchr(p, ',');
        if (!comma) break;
        p = comma + 1;
    }
    size_t len = strcspn(p, ",");
    if (len >= sizeof rt->host) len = sizeof rt->host - 1;
    memcpy(rt->host, p, len);
    rt->host[len] = '\0';
}

const char *prt_host_of(const prt *rt, int r) {
    if (!rt->host_of || r < 0 || r >= rt->world_size) return "?";
    return rt->host_names + (size_t)rt->host_of[r] * sizeof rt->host;
}

/* Rank 0: the distinct names among the gathered ones (world x width bytes),
 * in order of their first rank, into rt->host_names, and each rank's index
 * into rt->host_of.  Names sorted once, so O(world log world). */
static const char *g_sort_names;
static size_t g_sort_width;
static int by_name(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    int c = strcmp(g_sort_names + (size_t)x * g_sort_width, g_sort_names + (size_t)y * g_sort_width);
    return c ? c : (x > y) - (x < y);
}
static void index_hosts(prt *rt, const char *names, size_t width) {
    int n = rt->world_size;
    int *order = prt_xmalloc((size_t)n * sizeof *order), *first = prt_xmalloc((size_t)n * sizeof *first);
    for (int r = 0; r < n; r++) order[r] = r;
    g_sort_names = names, g_sort_width = width;
    qsort(order, (size_t)n, sizeof *order, by_name);
    /* first[r]: the lowest rank with r's name; then hosts numbered by it */
    for (int i = 0; i < n; i++)
        first[order[i]] = i > 0 && strcmp(names + (size_t)order[i] * width, names + (size_t)order[i - 1] * width) == 0
                              ? first[order[i - 1]]
                              : order[i];
    rt->nhosts = 0;
    for (int r = 0; r < n; r++) rt->host_of[r] = first[r] == r ? rt->nhosts++ : -1;
    for (int r = 0; r < n; r++) rt->host_of[r] = rt->host_of[first[r]];
    rt->host_names = prt_xcalloc((size_t)rt->nhosts, width);
    for (int r = 0; r < n; r++)
        if (first[r] == r) memcpy(rt->host_names + (size_t)rt->host_of[r] * width, names + (size_t)r * width, width);
    free(order);
    free(first);
}

/* Whether the plan's cluster keeps every group of axis a inside one node:
 * each group's first and last rank in one block of gpus_per_node ranks. */
static int planned_inside_node(prt *rt, int a, int64_t stride) {
    int64_t gpn = rt->plan.gpus_per_node, size = rt->axis_size[a];
    if (gpn <= 0) return 0;
    for (int64_t r = 0; r < rt->world_size; r++) {
        if ((r / stride) % size != 0) continue;
        if (r / gpn != (r + (size - 1) * stride) / gpn) return 0;
    }
    return 1;
}

/* "ranks 0 (a), 2 (b)": a group's ranks and hosts, at most PLACEMENT_MAX_LISTED. */
static void print_group(prt *rt, int64_t first, int64_t stride, int size) {
    fprintf(stderr, "ranks");
    for (int k = 0; k < size && k < PLACEMENT_MAX_LISTED; k++)
        fprintf(stderr, "%s %lld (%s)", k ? "," : "", (long long)(first + k * stride),
                prt_host_of(rt, (int)(first + k * stride)));
    if (size > PLACEMENT_MAX_LISTED) fprintf(stderr, ", ... (%d ranks)", size);
}

/* Rank 0: the warnings of axis a (none when its placement costs nothing the
 * plan did not count). */
static void report_axis(prt *rt, int a) {
    int size = rt->axis_size[a];
    if (size <= 1) return;
    int64_t stride = 1;
    for (int b = a + 1; b < rt->naxes; b++) stride *= rt->axis_size[b];
    int tp = a == (int)rt->plan.tp_axis, inside = planned_inside_node(rt, a, stride);
    if (!tp && !inside) return;
    int64_t gpn = rt->plan.gpus_per_node, first = -1;
    int groups = 0, split_groups = 0;
    for (int64_t r = 0; r < rt->world_size; r++) {
        if ((r / stride) % size != 0) continue; /* a group's first rank */
        groups++;
        int split = 0;
        for (int k = 1; k < size && !split; k++) split = rt->host_of[r + k * stride] != rt->host_of[r];
        if (!split) continue;
        if (first < 0) first = r;
        if (!tp || ++split_groups > PLACEMENT_MAX_GROUPS) continue;
        fprintf(stderr, "parc: warning: the tensor-parallel group on `%s` of ", rt->plan.axis_names[a]);
        print_group(rt, r, stride, size);
        if (inside)
            fprintf(stderr, " spans hosts: its collectives cross the network in every layer; give each host %d "
                            "consecutive ranks (a hostfile with `slots=%d`, or srun --ntasks-per-node=%d)\n",
                    size, size, size);
        else
            fprintf(stderr, " spans hosts: its collectives cross the network in every layer, as the plan's cluster "
                            "has them (nodes of %lld GPU%s)\n", (long long)gpn, gpn == 1 ? "" : "s");
    }
    if (tp && split_groups > PLACEMENT_MAX_GROUPS)
        fprintf(stderr, "parc: warning: ... and %d more tensor-parallel groups on `%s` span hosts\n",
                split_groups - PLACEMENT_MAX_GROUPS, rt->plan.axis_names[a]);
    if (tp || first < 0) return;
    for (int64_t r = first; r < rt->world_size; r++) {
        if ((r / stride) % size != 0) continue;
        for (int k = 1; k < size; k++)
            if (rt->host_of[r + k * stride] != rt->host_of[r]) {
                split_groups++;
                break;
            }
    }
    fprintf(stderr, "parc: warning: %d of the %d groups on `%s` span hosts (the first: ", split_groups, groups,
            rt->plan.axis_names[a]);
    print_group(rt, first, stride, size);
    fprintf(stderr, "), but the plan keeps `%s` inside a node: its communication crosses the network where the "
                    "estimate counted the link inside a node; give each host %lld consecutive ranks, the plan's "
                    "gpus_per_node (parc run --hosts does, as does srun --ntasks-per-node=%lld)\n",
            rt->plan.axis_names[a], (long long)gpn, (long long)gpn);
}

/* Rank 0: `RANK HOST` per rank into PRT_PLACEMENT_FILE, when it is set. */
static void write_placement(prt *rt) {
    const char *path = getenv("PRT_PLACEMENT_FILE");
    if (!path || !*path) return;
    FILE *f = fopen(path, "w");
    int bad = !f;
    for (int r = 0; f && r < rt->world_size; r++) bad |= fprintf(f, "%d %s\n", r, prt_host_of(rt, r)) < 0;
    if (f) bad |= fclose(f) != 0;
    if (bad) fprintf(stderr, "parc: warning: PRT_PLACEMENT_FILE %s: cannot write it\n", path);
}

void prt_check_placement(prt *rt) {
    fake_hostname(rt);
    if (rt->world_size <= 1) return;
    size_t width = sizeof rt->host;
    char *names = rt->world_rank == 0 ? prt_xmalloc(width * (size_t)rt->world_size) : NULL;
    rt->host_of = prt_xmalloc((size_t)rt->world_size * sizeof *rt->host_of);
    const char *what = prt_startup_phase(rt, PRT_STARTUP_HOSTS);
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Igather(rt->host, (int)width, MPI_CHAR, names, (int)width, MPI_CHAR, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, what, -1);
    if (rt->world_rank == 0) index_hosts(rt, names, width);
    free(names);
    PRT_MPI_CHECK(MPI_Ibcast(&rt->nhosts, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, what, -1);
    if (rt->world_rank != 0) rt->host_names = prt_xmalloc((size_t)rt->nhosts * width);
    PRT_MPI_CHECK(MPI_Ibcast(rt->host_names, (int)((size_t)rt->nhosts * width), MPI_CHAR, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, what, -1);
    PRT_MPI_CHECK(MPI_Ibcast(rt->host_of, rt->world_size, MPI_INT, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, what, -1);
    if (rt->world_rank != 0) return;
    for (int a = 0; a < rt->naxes; a++) report_axis(rt, a);
    fflush(stderr);
    write_placement(rt);
}
