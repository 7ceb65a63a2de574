/*
 * process.h — running a child process and waiting for it.  Codegen runs the
 * linker with it, launch.c mpirun, calibrate.c its measuring programs; it
 * knows nothing of plans.
 */
#ifndef PARC_PROCESS_H
#define PARC_PROCESS_H

/* Runs argv[0] (searched in PATH) with `extra_env` (NULL-terminated
 * "NAME=value" strings, may be NULL) added to the environment, waits for it and returns its exit status (128 + signal when killed), or -1
 * when it could not be started.  When stderr_path != NULL the child's stderr
 * (and stdout) go to that file.  SIGINT and SIGQUIT are ignored in the caller
 * while the child runs (the child keeps the defaults). */
int process_run(char *const argv[], char *const extra_env[], const char *stderr_path);
/* process_run, but a SIGTERM/SIGINT/SIGHUP/SIGQUIT sent to parc goes to the
 * child's own children (mpirun's local ranks), or to the child while it has
 * none.  `parc run` uses it: Open MPI's mpirun, signalled, would end the ranks
 * before they can save (docs/checkpoints.md).  The child gets SIGTERM when
 * parc ends, however it ends (kill -9 included): a launcher never outlives
 * its parc. */
int process_run_signalling_children(char *const argv[], char *const extra_env[], const char *stderr_path);

/* The last of SIGINT, SIGTERM, SIGHUP, SIGQUIT parc received while the last
 * process_run* ran (0: none). */
int process_signal_seen(void);

/* What process_run_watched watches while the child runs, besides signals. */
typedef struct ProcessWatch {
    /* When this file exists, the child has grace_s seconds to end; then it
     * gets SIGTERM, and SIGKILL 2 s later (NULL: none).  `stopped` says it
     * had to be. */
    const char *stop_file;
    double grace_s;
    int stopped;
    /* The child's stderr goes to this file (created), which parc copies to
     * its own stderr as it grows, calling line() with each line (NULL: the
     * child keeps parc's stderr).  A file, not a pipe: the child never
     * blocks on it, nor dies writing to it when parc is gone. */
    const char *relay_file;
    void (*line)(void *ctx, const char *line);
    void *ctx;
} ProcessWatch;

/* process_run_signalling_children (stdout and stderr as parc's), watching as
 * `watch` says. */
int process_run_watched(char *const argv[], char *const extra_env[], ProcessWatch *watch);

#endif
