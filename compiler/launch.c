/*
 * launch.c — `parc run`: build the plan's executable into a temporary
 * directory and run it on the local machine with mpirun, one rank per mesh
 * position.  Multi-node runs are mpirun's or srun's job, with the executable
 * of `parc build`.
 */
#define _GNU_SOURCE /* environ */
#include "launch.h"

#include "codegen.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef PARC_MPIEXEC
#define PARC_MPIEXEC "mpirun"
#endif

static SrcLoc no_loc(void) { return (SrcLoc){0}; }

/* Signals that stop a launched job. */
static const int launch_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define LAUNCH_NSIGNALS ((int)(sizeof launch_signals / sizeof launch_signals[0]))
static volatile sig_atomic_t launch_child, launch_pending, launch_to_ranks;

/* Forwards a signal that was sent to parc by a process (si_code <= 0: kill,
 * sigqueue) to the child; one from the terminal (SI_KERNEL) reached the
 * child's process group already.  For mpirun (launch_to_ranks) the signal is
 * left pending for the wait loop, which sends it to the ranks themselves. */
static void launch_forward(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (info && info->si_code > 0) return;
    int saved = errno;
    if (launch_child > 0 && !launch_to_ranks) kill((pid_t)launch_child, sig);
    else launch_pending = sig;
    errno = saved;
}

/* Sends sig to the processes whose parent is `parent` (mpirun's local ranks);
 * to `parent` itself when it has none.  Open MPI's mpirun, signalled, would
 * start its abort instead: SIGCONT, odls_base_sigkill_timeout seconds (1 by
 * default), SIGTERM, as long again, SIGKILL, which cuts a checkpoint short. */
static void launch_signal_children(pid_t parent, int sig)
{
    int sent = 0;
    DIR *proc = opendir("/proc");
    for (struct dirent *e; proc && (e = readdir(proc));) {
        char path[300], line[512];
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char *got = fgets(line, sizeof line, f);
        fclose(f);
        const char *close = got ? strrchr(line, ')') : NULL;  /* the command name may hold spaces */
        char state;
        int ppid;
        if (close && sscanf(close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) {
            kill((pid_t)atoi(e->d_name), sig);
            sent++;
        }
    }
    if (proc) closedir(proc);
    if (!sent) kill(parent, sig);
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
    for (int k = 0; k < LAUNCH_NSIGNALS; k++) sigaddset(&defaults, launch_signals[k]);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);

    /* The child shares our process group, so a terminal's ^C reaches it
     * directly; a signal sent to parc alone (kill, timeout, a batch system)
     * is forwarded.  Either way we wait for the child and return its status. */
    struct sigaction forward = {.sa_sigaction = launch_forward, .sa_flags = SA_SIGINFO}, old[LAUNCH_NSIGNALS];
    sigemptyset(&forward.sa_mask);
    launch_child = 0;
    launch_pending = 0;
    for (int k = 0; k < LAUNCH_NSIGNALS; k++) sigaction(launch_signals[k], &forward, &old[k]);

    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &actions, &attr, argv, env);
    int status = -1;
    if (err == 0) {
        launch_child = pid;
        if (launch_pending) kill(pid, launch_pending), launch_pending = 0;
        int ws;
        pid_t r;
        if (launch_to_ranks) { /* poll, so that a signal is passed on to the ranks as it comes */
            while ((r = waitpid(pid, &ws, WNOHANG)) == 0 || (r < 0 && errno == EINTR)) {
                int sig = launch_pending;
                launch_pending = 0;
                if (sig) launch_signal_children(pid, sig);
                nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
            }
        } else {
            do r = waitpid(pid, &ws, 0);
            while (r < 0 && errno == EINTR);
        }
        if (r == pid) status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
        launch_child = 0;
    }
    for (int k = 0; k < LAUNCH_NSIGNALS; k++) sigaction(launch_signals[k], &old[k], NULL);
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

    launch_to_ranks = 1;  /* SIGTERM/SIGINT go to the ranks: they save and stop (docs/checkpoints.md) */
    int status = launch_process(args, env, NULL);
    launch_to_ranks = 0;
    if (status < 0)
        diag_error(no_loc(), "install Open MPI (openmpi-bin) or put its mpirun on PATH",
                   "run: cannot start %s: %s", PARC_MPIEXEC, strerror(errno));
    free(args);
    unlink(exe);
    rmdir(dir);
    return status;
}
