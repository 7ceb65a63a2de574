/*
 * launch.c — `parc run`: build the plan's executable into a temporary
 * directory and run it with mpirun, one rank per mesh position: on the local
 * machine, on the hosts of a hostfile (--hosts), or with srun inside a Slurm
 * allocation; and `parc build --sbatch`: the batch script that runs a built
 * executable with srun on the plan's nodes.  Placing the ranks is the
 * launcher's job (with a hostfile, the plan's node i on its i-th host,
 * gpus_per_node ranks each); the program checks at start-up that the groups
 * the plan keeps inside a node share a host (runtime/prt_placement.c).
 */
#define _GNU_SOURCE /* pipe2 */
#include "launch.h"

#include "codegen.h"
#include "process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PARC_MPIEXEC
#define PARC_MPIEXEC "mpirun"
#endif
#define PARC_SRUN "srun"

static SrcLoc no_loc(void) { return (SrcLoc){0}; }

/* Whether a process runs the executable at `exe` (ranks, until they end). */
static int exe_in_use(const char *exe)
{
    int used = 0;
    DIR *proc = opendir("/proc");
    for (struct dirent *e; proc && !used && (e = readdir(proc));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char link[300], target[PATH_MAX + 64];
        snprintf(link, sizeof link, "/proc/%s/exe", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        used = strncmp(target, exe, strlen(exe)) == 0; /* also "EXE (deleted)" */
    }
    if (proc) closedir(proc);
    return used;
}

/* Removes the run's directory and every file in it (parc's own: the
 * executable, the stderr relay, the ranks' placement and failure notes). */
static void remove_run_dir(const char *dir) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* A process that removes the run's directory once parc is gone and no rank
 * runs its executable any more, however parc ended (kill -9 too): it waits
 * for the end of the pipe parc holds open.  Returns its pid (-1: none) and
 * the pipe's end to close in *hold. */
static pid_t start_janitor(const char *dir, const char *exe, int *hold)
{
    int fds[2];
    *hold = -1;
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[1]);
        /* hold none of parc's output open: whoever reads it sees its end when parc ends */
        int null = open("/dev/null", O_RDWR);
        for (int fd = 0; fd <= 2 && null >= 0; fd++) dup2(null, fd);
        if (null > 2) close(null);
        signal(SIGINT, SIG_IGN), signal(SIGTERM, SIG_IGN), signal(SIGHUP, SIG_IGN), signal(SIGQUIT, SIG_IGN);
        char byte;
        while (read(fds[0], &byte, 1) != 0 && errno == EINTR) {}
        /* parc is gone or done; the ranks get SIGTERM with their launcher */
        for (int tries = 0; tries < 600 && access(dir, F_OK) == 0 && exe_in_use(exe); tries++)
            nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
        remove_run_dir(dir);
        _exit(0);
    }
    close(fds[0]);
    *hold = fds[1];
    return pid;
}

/* An Open MPI hostfile's distinct hosts (the first word of each line that is
 * not blank or a `#` comment) and the fewest slots a line gives its host
 * (`HOST slots=N`; a line without them counts 1); -1 when it cannot be read. */
static int hostfile_read(const char *path, int *fewest_slots) {
    FILE *f = fopen(path, "r");
    *fewest_slots = 1;
    if (!f) return -1;
    char line[1024], (*seen)[256] = NULL;
    int n = 0, fewest = 0;
    while (fgets(line, sizeof line, f)) {
        char word[256];
        if (sscanf(line, " %255s", word) != 1 || word[0] == '#') continue;
        const char *at = strstr(line, "slots=");
        int slots = at ? atoi(at + 6) : 1;
        if (slots < 1) slots = 1;
        if (fewest == 0 || slots < fewest) fewest = slots;
        int known = 0;
        for (int i = 0; i < n && !known; i++) known = strcmp(seen[i], word) == 0;
        if (known) continue;
        seen = realloc(seen, (size_t)(n + 1) * sizeof *seen);
        PARC_ASSERT(seen);
        memcpy(seen[n++], word, sizeof word);
    }
    fclose(f);
    free(seen);
    if (fewest > 0) *fewest_slots = fewest;
    return n;
}

int launch_hostfile_slots(const char *path) {
    int slots;
    hostfile_read(path, &slots);
    return slots;
}

int launch_hostfile_hosts(const char *path) {
    int slots;
    return hostfile_read(path, &slots);
}

/* The launcher's command line: srun inside a Slurm allocation, else mpirun
 * (with the hostfile, else on this machine).  args has room for 20 + argc. */
static int launcher_args(const Plan *plan, const char *hosts, int slurm, char *exe, int argc, char **argv,
                         char **args, char *np, size_t np_size, char *map, size_t map_size) {
    int world = plan->mesh.world > 0 ? plan->mesh.world : 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    int n = 0;
    if (slurm) {
        snprintf(np, np_size, "--ntasks=%d", world);
        args[n++] = (char *)PARC_SRUN;
        args[n++] = np;
        args[n++] = (char *)"--kill-on-bad-exit=1";
    } else {
        snprintf(np, np_size, "%d", world);
        args[n++] = (char *)PARC_MPIEXEC;
        args[n++] = (char *)"-np";
        args[n++] = np;
        /* the launcher's notes (run_job) reach ranks on other hosts too */
        args[n++] = (char *)"-x";
        args[n++] = (char *)"PRT_FAILURE_FILE";
        args[n++] = (char *)"-x";
        args[n++] = (char *)"PRT_PLACEMENT_FILE";
        args[n++] = (char *)"-x";
        args[n++] = (char *)"PRT_LOG_APPEND";
        args[n++] = (char *)"-x";
        args[n++] = (char *)"PRT_LAUNCH_HOST";
        if (hosts) {
            /* the plan's nodes on the hostfile's hosts, in its order: gpus_per_node
             * consecutive ranks on each, within the slots it gives (no
             * oversubscription, no local binding rule) */
            snprintf(map, map_size, "ppr:%d:node", plan->cluster.gpus_per_node > 0 ? plan->cluster.gpus_per_node : 1);
            args[n++] = (char *)"--hostfile";
            args[n++] = (char *)hosts;
            args[n++] = (char *)"--map-by";
            args[n++] = map;
        } else {
            if (world > cores) args[n++] = (char *)"--oversubscribe";
            /* fewer ranks than cores: don't pin a rank to one core, its BLAS
             * threads would share it */
            if (world < cores) {
                args[n++] = (char *)"--bind-to";
                args[n++] = (char *)"none";
            }
        }
    }
    args[n++] = exe;
    for (int i = 0; i < argc; i++) args[n++] = argv[i];
    args[n] = NULL;
    return n;
}

/* What the launcher learns from a job's stderr as it runs. */
typedef struct JobWatch {
    char lost_host[256]; /* the host whose daemon Open MPI lost ("": none) */
    char *seen;          /* the ranks' `parc:` lines relayed so far, each ended by '\n' (at most SEEN_MAX bytes) */
    size_t seen_len;
} JobWatch;
#define SEEN_MAX ((size_t)1 << 16)

/* Open MPI's mpirun (4.x) reports a daemon it lost as "ORTE has lost
 * communication with a remote daemon" with a line "Remote daemon: [[J,0],D]
 * on node HOST". */
static void job_line(void *ctx, const char *line) {
    JobWatch *w = ctx;
    const char *daemon = strstr(line, "Remote daemon:"), *on = daemon ? strstr(daemon, " on node ") : NULL;
    if (on && !w->lost_host[0] && sscanf(on + 9, "%255s", w->lost_host) != 1) w->lost_host[0] = 0;
    size_t len = strlen(line);
    if (strncmp(line, "parc:", 5) != 0 || w->seen_len + len + 1 > SEEN_MAX) return;
    char *grown = realloc(w->seen, w->seen_len + len + 2);
    if (!grown) return;
    w->seen = grown;
    memcpy(w->seen + w->seen_len, line, len);
    w->seen_len += len;
    w->seen[w->seen_len++] = '\n';
    w->seen[w->seen_len] = 0;
}

/* The `parc:` lines of the ranks' failure notes that their stderr did not
 * bring (a rank on a host mpirun lost reports, but its output stays there). */
static void print_unseen_reports(const char *failure, const JobWatch *w) {
    FILE *f = fopen(failure, "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "parc:", 5) != 0) continue;
        size_t len = strlen(line);
        int seen = 0;
        for (const char *at = w->seen; at && !seen && (at = strstr(at, line)); at++)
            seen = at == w->seen || at[-1] == '\n';
        if (seen) continue;
        fwrite(line, 1, len, stderr);
        if (line[len - 1] != '\n') fputc('\n', stderr);
    }
    if (f) fclose(f);
    fflush(stderr);
}

/* "rank 2 (dp 1, tp 0)" of the plan's mesh, last axis fastest. */
static void rank_label(const Plan *plan, int rank, char *out, size_t size) {
    int coord[PRT_MAX_AXES], rest = rank;
    for (int a = plan->mesh.naxes - 1; a >= 0; a--) {
        coord[a] = rest % plan->mesh.axes[a].size;
        rest /= plan->mesh.axes[a].size;
    }
    int n = snprintf(out, size, "rank %d", rank);
    for (int a = 0; a < plan->mesh.naxes && n > 0 && (size_t)n < size; a++)
        n += snprintf(out + n, size - (size_t)n, "%s%s %d%s", a ? ", " : " (", plan->mesh.axes[a].name, coord[a],
                      a == plan->mesh.naxes - 1 ? ")" : "");
}

/* The one message for a host whose daemon mpirun lost (the host, its link or
 * every process on it gone), with its ranks from the placement rank 0 wrote
 * at start-up (none before that). */
static void report_lost_host(const Plan *plan, const char *host, const char *placement) {
    fprintf(stderr, "parc: error: host %s was lost", host);
    FILE *f = fopen(placement, "r");
    int rank, listed = 0;
    char name[256], label[160];
    while (f && fscanf(f, "%d %255s", &rank, name) == 2) {
        if (strcmp(name, host) != 0) continue;
        rank_label(plan, rank, label, sizeof label);
        fprintf(stderr, "%s%s", listed++ ? ", " : ": its ranks ", label + 5);
    }
    if (f) fclose(f);
    fprintf(stderr, "%s ended with Open MPI's daemon there: the host, its network link or every process on it is "
                    "down; the job stopped\n", listed ? "" : f ? ": no rank of the job ran there, and it" : " (before "
                    "the ranks started): it");
    fflush(stderr);
}

/* Seconds mpirun has to end the job after a rank wrote PRT_FAILURE_FILE: it
 * can hang aborting a job whose host it cannot reach. */
#define LAUNCH_STOP_GRACE 5.0

/* One launch of the job: args (the launcher's command line) with env; the
 * ranks' placement and failure notes and the relayed stderr in the run's
 * directory.  Returns the job's status: 1 when parc had to stop a launcher
 * that did not end after a rank's failure; -1 when it could not start. */
static int run_job(const Plan *plan, const char *dir, char **args, char **env, int append) {
    char failure[PATH_MAX + 32], placement[PATH_MAX + 32], relay[PATH_MAX + 32];
    char failure_env[PATH_MAX + 64], placement_env[PATH_MAX + 64], host_env[320] = "PRT_LAUNCH_HOST=";
    gethostname(host_env + 16, sizeof host_env - 17);
    snprintf(failure, sizeof failure, "%s/failure", dir);
    snprintf(placement, sizeof placement, "%s/placement", dir);
    snprintf(relay, sizeof relay, "%s/stderr", dir);
    char gate[PATH_MAX + 48];
    snprintf(gate, sizeof gate, "%s.report", failure);
    unlink(failure);
    unlink(gate);
    unlink(placement);
    snprintf(failure_env, sizeof failure_env, "PRT_FAILURE_FILE=%s", failure);
    snprintf(placement_env, sizeof placement_env, "PRT_PLACEMENT_FILE=%s", placement);
    int ne = 0;
    while (env[ne]) ne++;
    char **all = calloc((size_t)ne + 5, sizeof *all);
    PARC_ASSERT(all);
    memcpy(all, env, (size_t)ne * sizeof *all);
    all[ne] = failure_env;
    all[ne + 1] = placement_env;
    all[ne + 2] = (char *)(append ? "PRT_LOG_APPEND=1" : "PRT_LOG_APPEND=0");
    all[ne + 3] = host_env;
    JobWatch seen;
    memset(&seen, 0, sizeof seen);
    ProcessWatch watch = {.stop_file = failure, .grace_s = LAUNCH_STOP_GRACE, .relay_file = relay,
                          .line = job_line, .ctx = &seen};
    int status = process_run_watched(args, all, &watch); /* the ranks save and stop */
    int err = errno;
    free(all);
    int noted = access(failure, F_OK) == 0;
    if (noted) print_unseen_reports(failure, &seen);
    free(seen.seen);
    if (status > 0 && !noted && seen.lost_host[0]) report_lost_host(plan, seen.lost_host, placement);
    if (watch.stopped) {
        fprintf(stderr, "parc: %s did not end %.0f s after the job failed: stopped it\n", args[0], LAUNCH_STOP_GRACE);
        status = 1;
    }
    errno = err;
    return status;
}

/* The value of the program option `name` in argv (`name VALUE` or
 * `name=VALUE`, the last one given), or NULL. */
static const char *program_option(int argc, char **argv, const char *name) {
    const char *value = NULL;
    size_t len = strlen(name);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], name) && i + 1 < argc) value = argv[++i];
        else if (!strncmp(argv[i], name, len) && argv[i][len] == '=') value = argv[i] + len + 1;
    }
    return value;
}

/* The step of the checkpoint DIR/latest names (step-N), or 0 when there is none. */
static long latest_step(const char *ckpt_dir) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/latest", ckpt_dir);
    FILE *f = fopen(path, "r");
    long step = 0;
    if (f && fscanf(f, "step-%ld", &step) != 1) step = 0;
    if (f) fclose(f);
    return step;
}

/* The last step record's step in a metrics log (0: none). */
static long last_logged_step(const char *log) {
    FILE *f = log ? fopen(log, "r") : NULL;
    long last = 0, step;
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "{\"record\": \"step\", \"step\": ");
        if (at && sscanf(at + 27, "%ld", &step) == 1) last = step;
    }
    if (f) fclose(f);
    return last;
}

/* A job's failure that a relaunch may get past: not a usage error (2), a
 * ledger mismatch (3) or a divergence (4), which a relaunch repeats, nor a
 * stop parc was asked for by a signal. */
static int restartable(int status) {
    return status > 0 && status != 2 && status != 3 && status != 4 && !process_signal_seen();
}

/* The program options of a relaunch from the newest checkpoint: argv without
 * --resume and --init-from, then `--resume latest`.  Returns the count; out
 * has room for argc + 2. */
static int relaunch_options(int argc, char **argv, char **out) {
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int with_value = !strcmp(a, "--resume") || !strcmp(a, "--init-from");
        if (with_value) {
            i++;
            continue;
        }
        if (!strncmp(a, "--resume=", 9) || !strncmp(a, "--init-from=", 12)) continue;
        out[n++] = argv[i];
    }
    out[n++] = (char *)"--resume";
    out[n++] = (char *)"latest";
    return n;
}

/* The metrics log's record of a relaunch (docs/json.md), appended. */
static void log_restart(const char *log, int restart, int restarts, int status, long resume_step, long last_step) {
    FILE *f = log ? fopen(log, "a") : NULL;
    if (!f) return;
    fprintf(f, "{\"record\": \"restart\", \"restart\": %d, \"restarts\": %d, \"exit_status\": %d, "
               "\"last_step\": %ld, \"resume_step\": %ld}\n",
            restart, restarts, status, last_step, resume_step);
    if (fclose(f) != 0) fprintf(stderr, "parc: --log %s: cannot write the restart record\n", log);
}

int launch_run(const CodegenModule *module, const Program *program, const LaunchOptions *options, int argc,
               char **argv) {
    const Plan *plan = program->plan;
    const char *hosts = options->hosts;
    const char *ckpt_dir = program_option(argc, argv, "--checkpoint-dir");
    if (!ckpt_dir) ckpt_dir = plan->train.ckpt_dir;
    if (options->restarts > 0 && !ckpt_dir) {
        diag_error(no_loc(), "give --checkpoint-dir DIR (with --checkpoint-every N), or `checkpoint every N steps;` "
                             "in the plan's train section",
                   "run: --restarts relaunches from the newest checkpoint, and this run saves none");
        return 2;
    }
    if (hosts && access(hosts, R_OK) != 0) {
        diag_error(no_loc(), "give mpirun's hostfile: one `HOST slots=N` per line",
                   "run: --hosts %s: cannot read it: %s", hosts, strerror(errno));
        return 2;
    }
    int nhosts = hosts ? launch_hostfile_hosts(hosts) : 0;
    if (hosts && nhosts < plan->cluster.nodes) {
        diag_error(no_loc(), "give one host per node of the plan's cluster: one `HOST slots=N` per line",
                   "run: --hosts %s names %d host%s, but the plan's cluster has %d nodes of %d GPUs", hosts, nhosts,
                   nhosts == 1 ? "" : "s", plan->cluster.nodes, plan->cluster.gpus_per_node);
        return 2;
    }
    const char *job = getenv("SLURM_JOB_ID");
    int slurm = !hosts && job && *job;
    /* under Slurm every node runs the executable: build it where they all see it */
    const char *tmp = slurm ? "." : getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%sparc-run-XXXXXX", tmp && *tmp ? tmp : "/tmp", slurm ? "." : "");
    if (!mkdtemp(dir)) {
        diag_error(no_loc(), NULL, "run: cannot create a temporary directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char exe[PATH_MAX + 64];
    snprintf(exe, sizeof exe, "%s/%s", dir, plan->model.name && *plan->model.name ? plan->model.name : "plan");
    if (codegen_write(module, EMIT_EXE, exe) != 0) {
        rmdir(dir);
        return -1;
    }

    char np[32], map[48];
    char **args = calloc((size_t)argc + 22, sizeof *args), **options_now = calloc((size_t)argc + 3, sizeof *args);
    PARC_ASSERT(args && options_now);

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

    int hold;
    pid_t janitor = start_janitor(dir, exe, &hold);
    const char *log = program_option(argc, argv, "--log");
    if (!log && getenv("PRT_METRICS_FILE") && *getenv("PRT_METRICS_FILE")) log = getenv("PRT_METRICS_FILE");
    int status = 0;
    for (int attempt = 0; attempt <= options->restarts; attempt++) {
        /* a relaunch resumes from the newest checkpoint; without one it starts as the first launch did */
        int resume = attempt && latest_step(ckpt_dir) > 0;
        int nopts = resume ? relaunch_options(argc, argv, options_now) : argc;
        launcher_args(plan, hosts, slurm, exe, nopts, resume ? options_now : argv, args, np, sizeof np, map,
                      sizeof map);
        if (slurm) {
            printf("parc run: inside Slurm job %s: srun %s\n", job, np);
            fflush(stdout);
        }
        status = run_job(plan, dir, args, env, attempt > 0);
        if (status < 0)
            diag_error(no_loc(), slurm ? "inside an allocation parc runs srun: put Slurm's srun on PATH"
                                       : "install Open MPI (openmpi-bin) or put its mpirun on PATH",
                       "run: cannot start %s: %s", args[0], strerror(errno));
        if (attempt == options->restarts || !restartable(status)) break;
        long next = latest_step(ckpt_dir);
        log_restart(log, attempt + 1, options->restarts, status, next, last_logged_step(log));
        if (next > 0)
            fprintf(stderr, "parc: the job failed (status %d); restart %d of %d from the newest checkpoint, step %ld "
                            "of %s\n", status, attempt + 1, options->restarts, next, ckpt_dir);
        else
            fprintf(stderr, "parc: the job failed (status %d) before its first checkpoint; restart %d of %d as it "
                            "started\n", status, attempt + 1, options->restarts);
        fflush(stderr);
    }
    free(args);
    free(options_now);
    remove_run_dir(dir);
    if (hold >= 0) close(hold);
    if (janitor > 0)
        while (waitpid(janitor, NULL, 0) < 0 && errno == EINTR) {}
    return status;
}

int launch_write_sbatch(const Program *program, const char *exe, const char *script) {
    const Plan *plan = program->plan;
    char abs[PATH_MAX];
    if (!realpath(exe, abs)) {
        diag_error(no_loc(), NULL, "build: --sbatch: cannot resolve %s: %s", exe, strerror(errno));
        return -1;
    }
    const char *name = plan->model.name && *plan->model.name ? plan->model.name : "plan";
    int nodes = (int)plan->cluster.nodes, per_node = (int)plan->cluster.gpus_per_node;
    FILE *f = fopen(script, "w");
    if (!f) {
        diag_error(no_loc(), NULL, "build: --sbatch %s: cannot open it for writing: %s", script, strerror(errno));
        return -1;
    }
    int bad = fprintf(f,
                      "#!/bin/bash\n"
                      "# %s on %d node(s) x %d rank(s), one rank per GPU of the plan's cluster and mesh\n"
                      "# (ranks in mesh order: consecutive ranks share a node).  Submit with: sbatch %s [program "
                      "options]\n"
                      "# A GPU cluster also wants --gpus-per-node=%d here and `--device cuda` after the executable.\n"
                      "#SBATCH --job-name=%s\n"
                      "#SBATCH --nodes=%d\n"
                      "#SBATCH --ntasks-per-node=%d\n"
                      "set -euo pipefail\n"
                      "exec srun --kill-on-bad-exit=1 %s \"$@\"\n",
                      name, nodes, per_node, script, per_node, name, nodes, per_node, abs) < 0;
    if (fclose(f) != 0) bad = 1;
    if (bad || chmod(script, 0755) != 0) {
        diag_error(no_loc(), NULL, "build: --sbatch %s: cannot write it: %s", script, strerror(errno));
        return -1;
    }
    return 0;
}
