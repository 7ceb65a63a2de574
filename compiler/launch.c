/*
 * launch.c — `parc run`: build the plan's executable into a temporary
 * directory and run it on the local machine with mpirun, one rank per mesh
 * position.  Multi-node runs are mpirun's or srun's job, with the executable
 * of `parc build`.
 */
#include "launch.h"

#include "codegen.h"
#include "process.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PARC_MPIEXEC
#define PARC_MPIEXEC "mpirun"
#endif

static SrcLoc no_loc(void) { return (SrcLoc){0}; }

int launch_run(const Program *program, int argc, char **argv) {
    const Plan *plan = program->plan;
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/parc-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        diag_error(no_loc(), NULL, "run: cannot create a temporary directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char exe[PATH_MAX + 64];
    snprintf(exe, sizeof exe, "%s/%s", dir, plan->model.name && *plan->model.name ? plan->model.name : "plan");
    if (codegen_emit(program, EMIT_EXE, exe) != 0) {
        rmdir(dir);
        return -1;
    }

    int world = plan->mesh.world > 0 ? plan->mesh.world : 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    char np[32];
    snprintf(np, sizeof np, "%d", world);
    char **args = calloc((size_t)argc + 10, sizeof *args);
    PARC_ASSERT(args);
    int n = 0;
    args[n++] = (char *)PARC_MPIEXEC;
    args[n++] = (char *)"-np";
    args[n++] = np;
    if (world > cores) args[n++] = (char *)"--oversubscribe";
    /* fewer ranks than cores: don't pin a rank to one core, its BLAS threads
     * would share it */
    if (world < cores) {
        args[n++] = (char *)"--bind-to";
        args[n++] = (char *)"none";
    }
    args[n++] = exe;
    for (int i = 0; i < argc; i++) args[n++] = argv[i];
    args[n] = NULL;

    char *env[8];
    int ne = 0;
    if (geteuid() == 0) {
        env[ne++] = (char *)"OMPI_ALLOW_RUN_AS_ROOT=1";
        env[ne++] = (char *)"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    }
    /* one BLAS thread per rank unless the user asks for more: at the shapes of
     * small plans threading costs more than it gains (bench/README.md) */
    if (!getenv("OPENBLAS_NUM_THREADS")) env[ne++] = (char *)"OPENBLAS_NUM_THREADS=1";
#ifdef PARC_RT_SANITIZE
    /* a sanitized runtime: LeakSanitizer would report Open MPI's own allocations */
    if (!getenv("ASAN_OPTIONS")) env[ne++] = (char *)"ASAN_OPTIONS=detect_leaks=0";
#endif
    env[ne] = NULL;

    int status = process_run(args, env, NULL);
    if (status < 0)
        diag_error(no_loc(), "install Open MPI (openmpi-bin) or put its mpirun on PATH",
                   "run: cannot start %s: %s", PARC_MPIEXEC, strerror(errno));
    free(args);
    unlink(exe);
    rmdir(dir);
    return status;
}
