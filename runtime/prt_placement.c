/*
 * prt_placement.c — the start-up check that the ranks landed where the plan
 * assumed: the ranks of one tensor-parallel group (the plan's tp axis) share a
 * host, by the host name each rank reports.  A group that spans hosts still
 * runs, but its collectives, issued in every layer, cross the network: rank 0
 * prints one warning per such group, naming its ranks and their hosts.
 *
 * Test hook: PRT_HOSTNAME=NAME,NAME,... gives world rank r the r-th name (the
 * last one to the ranks after it) instead of MPI's processor name, so a test
 * on one machine can stand for several.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prt_internal.h"

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

/* Rank 0: one warning per tensor-parallel group whose ranks are on more than one host. */
static void report_groups(prt *rt, const char *hosts, size_t width, int tp) {
    int64_t stride = 1;
    for (int a = tp + 1; a < rt->naxes; a++) stride *= rt->axis_size[a];
    int size = rt->axis_size[tp];
    for (int r = 0; r < rt->world_size; r++) {
        if ((r / stride) % size != 0) continue; /* a group's first rank */
        int split = 0;
        for (int k = 1; k < size; k++)
            split |= strcmp(hosts + (size_t)r * width, hosts + (size_t)(r + k * stride) * width) != 0;
        if (!split) continue;
        fprintf(stderr, "parc: warning: the tensor-parallel group on `%s` of ranks", rt->plan.axis_names[tp]);
        for (int k = 0; k < size; k++) fprintf(stderr, "%s %lld (%s)", k ? "," : "", (long long)(r + k * stride),
                                               hosts + (size_t)(r + k * stride) * width);
        fprintf(stderr, " spans hosts: its collectives cross the network in every layer; give each host %d "
                        "consecutive ranks (a hostfile with `slots=%d`, or srun --ntasks-per-node=%d)\n",
                size, size, size);
    }
    fflush(stderr);
}

void prt_check_placement(prt *rt) {
    fake_hostname(rt);
    int tp = (int)rt->plan.tp_axis;
    if (tp < 0 || tp >= rt->naxes || rt->axis_size[tp] <= 1) return;
    size_t width = sizeof rt->host;
    char *hosts = rt->world_rank == 0 ? prt_xmalloc(width * (size_t)rt->world_size) : NULL;
    const char *what = prt_startup_phase(rt, PRT_STARTUP_HOSTS);
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Igather(rt->host, (int)width, MPI_CHAR, hosts, (int)width, MPI_CHAR, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, what, -1);
    if (rt->world_rank == 0) report_groups(rt, hosts, width, tp);
    free(hosts);
}
