/*
 * process.c — running a child process (process.h): the linker for codegen,
 * mpirun for `parc run`, the calibration programs.
 */
#define _GNU_SOURCE /* environ */
#include "process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Signals that stop a launched job. */
static const int process_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define PROCESS_NSIGNALS ((int)(sizeof process_signals / sizeof process_signals[0]))
static volatile sig_atomic_t process_child, process_pending, process_to_children, process_signalled;
static ProcessWatch *process_watch; /* the run's, or NULL */

/* Forwards a signal that was sent to parc by a process (si_code <= 0: kill,
 * sigqueue) to the child; one from the terminal (SI_KERNEL) reached the
 * child's process group already.  With process_to_children the signal is left
 * pending for the wait loop, which sends it to the child's children. */
static void process_forward(int sig, siginfo_t *info, void *context)
{
    (void)context;
    process_signalled = sig;
    if (info && info->si_code > 0) return;
    int saved = errno;
    if (process_child > 0 && !process_to_children) kill((pid_t)process_child, sig);
    else process_pending = sig;
    errno = saved;
}

/* Sends sig to the processes whose parent is `parent`; to `parent` itself
 * when it has none (yet). */
static void signal_children(pid_t parent, int sig)
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
        const char *close = got ? strrchr(line, ')') : NULL; /* the command name may hold spaces */
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

/* fork and exec as posix_spawnp would, the child tied to parc: it gets
 * SIGTERM when parc ends in any way (kill -9 included), so a launcher whose
 * parent is gone stops its ranks rather than train on as orphans.  0, or
 * the error. */
static int spawn_tied(pid_t *pid, char *const argv[], char *const env[], const char *stderr_path)
{
    pid_t parent = getpid();
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return errno;
    pid_t child = fork();
    if (child < 0) {
        int err = errno;
        close(report[0]), close(report[1]);
        return err;
    }
    if (child == 0) {
        close(report[0]);
        for (int k = 0; k < PROCESS_NSIGNALS; k++) signal(process_signals[k], SIG_DFL);
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(127);
        if (stderr_path) {
            int fd = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || dup2(fd, 2) < 0 || dup2(2, 1) < 0) _exit(127);
            close(fd);
        } else if (process_watch && process_watch->relay_file) {
            int fd = open(process_watch->relay_file, O_WRONLY | O_APPEND);
            if (fd < 0 || dup2(fd, 2) < 0) _exit(127);
            close(fd);
        }
        execvpe(argv[0], argv, env);
        int err = errno;
        if (write(report[1], &err, sizeof err) != (ssize_t)sizeof err) _exit(127);
        _exit(127);
    }
    close(report[1]);
    int err = 0;
    ssize_t got;
    do got = read(report[0], &err, sizeof err);
    while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got == (ssize_t)sizeof err) { /* exec failed: reap the child */
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
        return err;
    }
    *pid = child;
    return 0;
}

int process_signal_seen(void) { return process_signalled; }

int process_run_signalling_children(char *const argv[], char *const extra_env[], const char *stderr_path) {
    process_to_children = 1;
    int status = process_run(argv, extra_env, stderr_path);
    process_to_children = 0;
    return status;
}

/* The relay: what the child's stderr file gained since the last call, to
 * parc's stderr and, line by line, to watch->line. */
typedef struct Relay {
    int fd;
    char line[4096];
    size_t len;
} Relay;
static Relay *process_relay; /* process_run_watched's, while it runs */

static void relay_pump(ProcessWatch *w, Relay *r) {
    char buf[4096];
    ssize_t n;
    while (r->fd >= 0 && (n = read(r->fd, buf, sizeof buf)) > 0) {
        for (ssize_t off = 0; off < n;) {
            ssize_t put = write(2, buf + off, (size_t)(n - off));
            if (put <= 0) break;
            off += put;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n' && r->len < sizeof r->line - 1) {
                r->line[r->len++] = buf[i];
                continue;
            }
            r->line[r->len] = 0;
            if (buf[i] == '\n' && w->line) w->line(w->ctx, r->line);
            if (buf[i] == '\n') r->len = 0;
        }
    }
}

static double process_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Called in the wait loop: relays, and stops the child as watch->stop_file
 * asks (stop_at: when the file was first seen plus the grace, 0 before). */
static void process_tick(pid_t pid, ProcessWatch *w, Relay *r, double *stop_at) {
    relay_pump(w, r);
    if (!w->stop_file) return;
    double now = process_now();
    if (*stop_at == 0 && access(w->stop_file, F_OK) == 0) *stop_at = now + w->grace_s;
    if (*stop_at == 0 || now < *stop_at) return;
    double late = now - *stop_at;
    int stage = late < 2.0 ? 1 : 2;
    if (stage > w->stopped) { /* SIGTERM (mpirun ends what it can reach), SIGKILL */
        kill(pid, stage < 2 ? SIGTERM : SIGKILL);
        w->stopped = stage;
    }
}

int process_run_watched(char *const argv[], char *const extra_env[], ProcessWatch *watch) {
    Relay relay = {.fd = -1};
    if (watch->relay_file) {
        int fd = open(watch->relay_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) close(fd);
        relay.fd = open(watch->relay_file, O_RDONLY | O_CLOEXEC);
    }
    watch->stopped = 0;
    process_watch = watch;
    process_relay = &relay;
    process_to_children = 1;
    int status = process_run(argv, extra_env, NULL);
    process_to_children = 0;
    process_watch = NULL;
    process_relay = NULL;
    relay_pump(watch, &relay);
    if (relay.len && watch->line) { /* a last line without its newline */
        relay.line[relay.len] = 0;
        watch->line(watch->ctx, relay.line);
    }
    if (relay.fd >= 0) close(relay.fd);
    return status;
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
    process_signalled = 0;
    for (int k = 0; k < PROCESS_NSIGNALS; k++) sigaction(process_signals[k], &forward, &old[k]);

    pid_t pid;
    int err = process_to_children ? spawn_tied(&pid, argv, env, stderr_path) : posix_spawnp(&pid, argv[0], &actions, &attr, argv, env);
    int status = -1;
    if (err == 0) {
        process_child = pid;
        if (process_pending) kill(pid, process_pending), process_pending = 0;
        int ws;
        pid_t r;
        if (process_to_children) { /* poll, so that a signal is passed on as it comes */
            double stop_at = 0;
            while ((r = waitpid(pid, &ws, WNOHANG)) == 0 || (r < 0 && errno == EINTR)) {
                int sig = process_pending;
                process_pending = 0;
                if (sig) signal_children(pid, sig);
                if (process_watch) process_tick(pid, process_watch, process_relay, &stop_at);
                nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
            }
        } else {
            do r = waitpid(pid, &ws, 0);
            while (r < 0 && errno == EINTR);
        }
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
