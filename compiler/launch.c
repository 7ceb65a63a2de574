/*
 * launch.c — `parc run`: build the plan's executable into a temporary
 * directory and run it on the local machine with mpirun, one rank per mesh
 * position.  Multi-node runs are mpirun's or srun's job, with the executable
 * of `parc build`.
 */
#define _GNU_SOURCE /* environ */
#include "launch.h"

#include "codegen.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef PARC_MPIEXEC
#define PARC_MPIEXEC "mpirun"
#endif

static SrcLoc no_loc(void) { return (SrcLoc){0}; }

/* The child being waited for; SIGINT and SIGTERM are passed on to it (a run
 * then finishes its step, saves and stops; a second signal kills it). */
static volatile pid_t g_child;
static void forward_signal(int sig) {
    if (g_child > 0) kill(g_child, sig);
}

int launch_process(char *const argv[], char *const extra_env[], const char *stderr_path) {
    /* environment: ours plus extra_env (extra entries come first, so they win
     * with getenv's first-match lookup; ours with the same name are dropped) */
    size_t nenv = 0, nextra = 0;
    while (environ && environ[nenv]) nenv++;
    while (extra_env && extra_env[nextra]) nextra++;
    char **env = calloc(nenv + nextra + 1, sizeof *env);
    if (!env) return -1;
    size_t n = 0;
    for (size_t i = 0; i < nextra; i++) env[n++] = extra_env[i];
    for (size_t i = 0; i < nenv; i++) {
        int shadowed = 0;
        for (size_t j = 0; j < nextra && !shadowed; j++) {
            const char *eq = strchr(extra_env[j], '=');
            size_t len = eq ? (size_t)(eq - extra_env[j]) + 1 : strlen(extra_env[j]);
            shadowed = strncmp(environ[i], extra_env[j], len) == 0;
        }
        if (!shadowed) env[n++] = environ[i];
    }
    env[n] = NULL;

    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    if (stderr_path) {
        posix_spawn_file_actions_addopen(&actions, 2, stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_adddup2(&actions, 2, 1);
    }
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGQUIT);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    /* The child runs in its own process group, so ^C (sent to ours) and a SIGTERM
     * (a scheduler's preemption) reach it exactly once: forwarded by us.  Its
     * stdin is /dev/null: a background group must not read the terminal. */
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);

    struct sigaction forward = {.sa_handler = forward_signal}, ignore = {.sa_handler = SIG_IGN};
    struct sigaction old_int, old_term, old_quit;
    sigemptyset(&forward.sa_mask);
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGINT, &forward, &old_int);
    sigaction(SIGTERM, &forward, &old_term);
    sigaction(SIGQUIT, &ignore, &old_quit);

    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &actions, &attr, argv, env);
    int status = -1;
    if (err == 0) {
        g_child = pid;
        int ws;
        pid_t r;
        do r = waitpid(pid, &ws, 0);
        while (r < 0 && errno == EINTR);
        if (r == pid) status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
    }
    g_child = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    free(env);
    if (err) errno = err;
    return status;
}

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

    int status = launch_process(args, env, NULL);
    if (status < 0)
        diag_error(no_loc(), "install Open MPI (openmpi-bin) or put its mpirun on PATH",
                   "run: cannot start %s: %s", PARC_MPIEXEC, strerror(errno));
    free(args);
    unlink(exe);
    rmdir(dir);
    return status;
}
