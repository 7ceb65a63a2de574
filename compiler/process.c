/*
 * process.c — running a child process (process.h): the linker for codegen,
 * mpirun for `parc run`, the calibration programs.
 */
#define _GNU_SOURCE /* environ */
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Signals that stop a launched job. */
static const int process_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define PROCESS_NSIGNALS ((int)(sizeof process_signals / sizeof process_signals[0]))
static volatile sig_atomic_t process_child, process_pending;

/* Forwards a signal that was sent to parc by a process (si_code <= 0: kill,
 * sigqueue) to the child; one from the terminal (SI_KERNEL) reached the
 * child's process group already. */
static void process_forward(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (info && info->si_code > 0) return;
    int saved = errno;
    if (process_child > 0) kill((pid_t)process_child, sig);
    else process_pending = sig;
    errno = saved;
}

int process_run(char *const argv[], char *const extra_env[], const char *stderr_path) {
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
    for (int k = 0; k < PROCESS_NSIGNALS; k++) sigaddset(&defaults, process_signals[k]);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);

    /* The child shares our process group, so a terminal's ^C reaches it
     * directly; a signal sent to parc alone (kill, timeout, a batch system)
     * is forwarded.  Either way we wait for the child and return its status. */
    struct sigaction forward = {.sa_sigaction = process_forward, .sa_flags = SA_SIGINFO}, old[PROCESS_NSIGNALS];
    sigemptyset(&forward.sa_mask);
    process_child = 0;
    process_pending = 0;
    for (int k = 0; k < PROCESS_NSIGNALS; k++) sigaction(process_signals[k], &forward, &old[k]);

    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &actions, &attr, argv, env);
    int status = -1;
    if (err == 0) {
        process_child = pid;
        if (process_pending) kill(pid, process_pending);
        int ws;
        pid_t r;
        do r = waitpid(pid, &ws, 0);
        while (r < 0 && errno == EINTR);
        if (r == pid) status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
        process_child = 0;
    }
    for (int k = 0; k < PROCESS_NSIGNALS; k++) sigaction(process_signals[k], &old[k], NULL);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    free(env);
    if (err) errno = err;
    return status;
}
