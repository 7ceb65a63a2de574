/*
 * calibrate.c — `parc calibrate [-o FILE] [--device DEV [--ranks N]]`: runs
 * the measuring program (calibrate/parc_calibrate.c) on two local ranks with
 * the local mpirun, as `parc run` starts programs (one BLAS thread per rank),
 * and reports the cluster fragment it wrote (default cluster.par).  With
 * --device it measures through the runtime's backend DEV instead (cuda:
 * cuBLAS, the GPU kernels, NCCL between the ranks), on one rank, or on N
 * under mpirun (one per GPU).  Plans include the fragment inside
 * `cluster { nodes 1; gpus_per_node N; include "cluster.par"; }`.
 *
 * With --hosts FILE (mpirun's hostfile, two hosts or more) the launches run
 * on its hosts: the link inside a host on the first one (two ranks there),
 * and one more launch of S ranks on every host (S the fewest slots a line of
 * FILE gives) measures the link between the first two hosts, their ranks in
 * pairs sending at once, which the fragment adds as `link inter` with its
 * efficiency and half-bandwidth size, and the compute with every rank at
 * once (hosts that share a machine's cores take each other's).  Plans
 * include it inside
 * `cluster { nodes M; gpus_per_node N; ... }`.
 */
#include "launch.h"
#include "process.h"
#include "tools.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PARC_MPIEXEC
#define PARC_MPIEXEC "mpirun"
#endif

int calibrate_main(const CliOptions *o)
{
    const char *out = o->output ? o->output : "cluster.par", *device = o->device, *hosts = o->hosts;
    long ranks = o->ranks;
    int nhosts = hosts ? launch_hostfile_hosts(hosts) : 0;
    if (hosts && nhosts < 2) {
        if (nhosts < 0) fprintf(stderr, "parc calibrate: --hosts %s: cannot read it: %s\n", hosts, strerror(errno));
        else fprintf(stderr, "parc calibrate: --hosts %s names %d host%s: the link between hosts needs two\n", hosts,
                     nhosts, nhosts == 1 ? "" : "s");
        return 2;
    }
#ifndef PARC_CALIBRATE_EXE
    fprintf(stderr, "parc calibrate: this parc was built without the CPU runtime (MPI and OpenBLAS), so without "
                    "its measuring program\n");
    return 3;
#else
    /* two ranks, each on its own core where there are two; the link is
     * measured in LINK_LAUNCHES launches (each launch's shared-memory
     * transport is its own: parc_calibrate.c, link_of_fast), the last of
     * which also measures the compute and writes the fragment */
    enum { LINK_LAUNCHES = 4 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char dir[] = "/tmp/parc-calibrate-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "parc calibrate: cannot make a temporary directory: %s\n", strerror(errno));
        return 3;
    }
    char links[LINK_LAUNCHES - 1][sizeof dir + 16] = {{0}}; /* empty until its launch names it */
    char inter[sizeof dir + 16] = "";
    /* the launch between hosts: every host's ranks, S on each */
    int slots = hosts ? launch_hostfile_slots(hosts) : 1;
    char between_np[24], between_map[32];
    snprintf(between_np, sizeof between_np, "%d", nhosts * slots);
    snprintf(between_map, sizeof between_map, "ppr:%d:node", slots);
    char *args[16 + LINK_LAUNCHES];
    char *env[4];
    int ne = 0;
    if (geteuid() == 0) {
        env[ne++] = (char *)"OMPI_ALLOW_RUN_AS_ROOT=1";
        env[ne++] = (char *)"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    }
    env[ne++] = (char *)"OPENBLAS_NUM_THREADS=1";
    env[ne] = NULL;
    int status = 0;
    if (device) { /* the name first, in one process, before the old file goes */
        char *ask[] = {(char *)PARC_CALIBRATE_EXE, (char *)"--known-device", (char *)device, NULL};
        if ((status = process_run(ask, env, NULL)) != 0) {
            rmdir(dir);
            return status == 2 ? 2 : 3;
        }
    }
    unlink(out);
    if (device) { /* one launch, every figure through the backend */
        char np[24];
        snprintf(np, sizeof np, "%ld", ranks);
        int n = 0;
        if (ranks > 1) {
            args[n++] = (char *)PARC_MPIEXEC;
            args[n++] = (char *)"-np";
            args[n++] = np;
            if (cores < ranks) args[n++] = (char *)"--oversubscribe";
        }
        args[n++] = (char *)PARC_CALIBRATE_EXE;
        args[n++] = (char *)"--device";
        args[n++] = (char *)device;
        args[n++] = (char *)out;
        args[n] = NULL;
        status = process_run(args, env, NULL);
    }
    /* the launches inside a host, the one between hosts before the last */
    for (int launch = 0; !device && launch < LINK_LAUNCHES + (hosts != NULL) && status == 0; launch++) {
        int between = hosts && launch == LINK_LAUNCHES - 1, last = launch == LINK_LAUNCHES - 1 + (hosts != NULL);
        int n = 0;
        args[n++] = (char *)PARC_MPIEXEC;
        args[n++] = (char *)"-np";
        args[n++] = between ? between_np : (char *)"2";
        if (hosts) {
            args[n++] = (char *)"--hostfile";
            args[n++] = (char *)hosts;
            args[n++] = (char *)"--map-by";
            args[n++] = between ? between_map : (char *)"ppr:2:node";
            if (between && slots > cores) args[n++] = (char *)"--oversubscribe";
        } else if (cores < 2) {
            args[n++] = (char *)"--oversubscribe";
        }
        args[n++] = (char *)PARC_CALIBRATE_EXE;
        if (between) {
            snprintf(inter, sizeof inter, "%s/inter", dir);
            args[n++] = (char *)"--link-inter";
            args[n++] = inter;
        } else if (!last) {
            snprintf(links[launch], sizeof links[launch], "%s/link%d", dir, launch);
            args[n++] = (char *)"--link";
            args[n++] = links[launch];
        } else {
            args[n++] = (char *)out;
            if (hosts) {
                args[n++] = (char *)"--inter";
                args[n++] = inter;
            }
            for (int i = 0; i < LINK_LAUNCHES - 1; i++) args[n++] = links[i];
        }
        args[n] = NULL;
        status = process_run(args, env, NULL);
    }
    for (int i = 0; i < LINK_LAUNCHES - 1; i++)
        if (links[i][0]) unlink(links[i]);
    if (inter[0]) unlink(inter);
    rmdir(dir);
    if (status != 0) {
        fprintf(stderr, "parc calibrate: %s%s%s exited with status %d\n", device && ranks == 1 ? "" : PARC_MPIEXEC,
                device && ranks == 1 ? "" : " ", PARC_CALIBRATE_EXE, status);
        return 3;
    }
    FILE *f = fopen(out, "r");
    if (!f) {
        fprintf(stderr, "parc calibrate: the measurements were not written to `%s`\n", out);
        return 3;
    }
    char line[512];
    while (fgets(line, sizeof line, f)) fputs(line, stdout);
    fclose(f);
    printf("parc calibrate: wrote %s\n", out);
    return fflush(stdout) == 0 ? 0 : 3;
#endif
}
