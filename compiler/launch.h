/*
 * launch.h — `parc run`: build a plan's executable into a temporary directory
 * and run it with the local mpirun (launch.c).
 */
#ifndef PARC_LAUNCH_H
#define PARC_LAUNCH_H

#include "ir.h"

/* `parc run`: builds the program into a fresh temporary directory, then runs
 *   mpirun -np <world> [--oversubscribe] <exe> argv[0..argc-1]
 * with --oversubscribe when world > online cores, OPENBLAS_NUM_THREADS=1 when
 * world > cores, and OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}=1 when running as root
 * (only in the child's environment).  argv are runtime flags passed to every
 * rank (--steps 5 --memory --trace f.json --data FILE).  Returns the job's exit
 * status (128 + signal when a signal ended it); -1 when the build or the launch
 * failed (reported via diag_error).  The temporary directory is removed. */
int launch_run(const Program *program, int argc, char **argv);

#endif
