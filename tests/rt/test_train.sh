#!/bin/sh
# test_train.sh — train_tiny (a one-layer GPT on the runtime's ops, 10 steps of
# synthetic data) must learn, and data parallelism must not change the run:
#   1. with dp=1 the loss of the last step is at least 0.15 below the first;
#   2. dp=2 (mpirun -np 2) gives the dp=1 loss curve within 1e-4 relative per step.
# usage: test_train.sh TRAIN_TINY [MPIRUN]
PROG=${1:?usage: test_train.sh TRAIN_TINY [MPIRUN]}
MPIRUN=${2:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
for np in 1 2; do
    PRT_LOSS_FILE="$DIR/loss$np.txt" timeout 120 "$MPIRUN" -np $np --oversubscribe "$PROG" --quiet >"$DIR/out$np.txt" 2>&1 ||
        { cat "$DIR/out$np.txt"; echo "test_train: FAIL (np $np exited non-zero)"; exit 1; }
done
paste "$DIR/loss1.txt" "$DIR/loss2.txt" | awk '
    { s[NR] = $1; a[NR] = $2; b[NR] = $4
      d = a[NR] - b[NR]; if (d < 0) d = -d
      if (d > 1e-4 * a[NR]) { printf "FAIL step %d: dp=1 loss %s, dp=2 loss %s\n", $1, $2, $4; bad++ }
      printf "step %s  dp=1 %s  dp=2 %s\n", $1, $2, $4 }
    END { if (NR != 10) { print "FAIL: " NR " steps, want 10"; bad++ }
          if (a[NR] > a[1] - 0.15) { printf "FAIL: loss fell from %s to %s only\n", a[1], a[NR]; bad++ }
          print "test_train: " (bad ? "FAIL" : "ok"); exit bad ? 1 : 0 }'
