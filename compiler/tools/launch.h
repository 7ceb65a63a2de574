/*
 * launch.h — `parc run`: build a plan's executable into a temporary directory
 * and run it with the local mpirun (launch.c).
 */
#ifndef PARC_LAUNCH_H
#define PARC_LAUNCH_H

#include "codegen.h"

/* `parc run`: writes the program's module (codegen's row of the pass table)
 * as an executable into a fresh temporary directory, then runs
 *   mpirun -np <world> [--oversubscribe] <exe> argv[0..argc-1]
 * (with `--hostfile hosts --map-by ppr:<gpus_per_node>:node` instead of the
 * local core rules when hosts != NULL: the plan's node i on the hostfile's
 * i-th host; a hostfile naming fewer hosts than the plan has nodes is an
 * error, status 2, before anything runs;
 * with `srun --ntasks=<world> --kill-on-bad-exit=1 <exe> argv` when
 * SLURM_JOB_ID is set and hosts == NULL, the executable then under the
 * working directory) with --oversubscribe when world > online cores, OPENBLAS_NUM_THREADS=1 when
 * world > cores, and OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}=1 when running as root
 * (only in the child's environment).  argv are runtime flags passed to every
 * rank (--steps 5 --memory --trace f.json --data FILE).  A SIGTERM or SIGINT
 * sent to parc goes to the ranks (mpirun's children), not to mpirun, whose own
 * handling would SIGKILL them a second later: they finish the step, save when
 * a checkpoint directory is set, and stop.  The launcher's stderr reaches
 * parc's through a file in the temporary directory, read as it grows; the
 * ranks get PRT_FAILURE_FILE and PRT_PLACEMENT_FILE there (mpirun -x): once
 * a rank noted a failure the launcher has 5 s to end before parc stops it
 * (SIGTERM, SIGKILL 2 s later; status 1), and a host whose daemon mpirun
 * reports lost is named, with its ranks, in one `parc: error:` line.
 * Returns the job's exit status (128 + signal when a signal ended it); -1
 * when the build or the launch failed (reported via diag_error).  The
 * temporary directory is removed. */
typedef struct LaunchOptions {
    const char *hosts; /* mpirun's hostfile, NULL: this machine (or srun in an allocation) */
    /* Relaunches after a failure: while a launch ends with a status other
     * than 0, 2 (usage), 3 (ledger) or 4 (divergence), and not because parc
     * was signalled, up to `restarts` more launches run, each with
     * `--resume latest` (--resume and --init-from dropped) when the
     * checkpoint directory (--checkpoint-dir, else the plan's) has a
     * checkpoint, with the first launch's options otherwise, and
     * PRT_LOG_APPEND=1: the loss file and the metrics log (--log, else
     * PRT_METRICS_FILE) continue, the log with a `restart` record first
     * (docs/json.md).  Without a checkpoint directory restarts > 0 is an
     * error (2). */
    int restarts;
} LaunchOptions;

int launch_run(const CodegenModule *module, const Program *program, const LaunchOptions *options, int argc,
               char **argv);

/* The distinct hosts a hostfile of mpirun names (the first word of each line
 * that is not blank or a `#` comment), or -1 when it cannot be read. */
int launch_hostfile_hosts(const char *path);
/* The fewest slots a line of the hostfile gives its host (`HOST slots=N`; a
 * line without them counts 1), at least 1; 1 when it cannot be read. */
int launch_hostfile_slots(const char *path);

/* `parc build --sbatch SCRIPT`: a Slurm batch script (mode 0755) that runs the
 * executable at `exe` (by its absolute path) with srun on the plan's nodes:
 * --nodes = cluster nodes, --ntasks-per-node = gpus_per_node (the mesh's world
 * equals their product), its arguments passed on.  0, or -1 after reporting. */
int launch_write_sbatch(const Program *program, const char *exe, const char *script);

#endif
