#!/bin/sh
# test_fault.sh — a rank that dies or hangs must end the whole job quickly, with a
# message naming it; bad runtime flags must print the usage and exit 2.
# usage: test_fault.sh FAULT_PROG [MPIRUN]
# Asserts:
#   1. PRT_TEST_DIE=2:3 (rank 2 SIGKILLs itself at step 3): mpirun exits non-zero
#      within 10 s and its output names rank 2;
#   2. FAULT_BADCALL=1:2 (rank 1 makes an invalid runtime call): non-zero within 10 s,
#      the output names rank 1 and the error;
#   3. FAULT_HANG=1:3 with PRT_TIMEOUT=2 (rank 1 hangs without dying): the watchdog
#      ends the job within 15 s, naming rank 1 as the one that did not arrive and
#      what its peers wait in;
#   3b. FAULT_STOP=3:2 with --timeout 2 (rank 3 SIGSTOPs itself at step 2): the
#      job stops within 15 s, naming rank 3 with its mesh coordinates;
#   3c. FAULT_STOP=3:6 (rank 3 stops after its last step, before prt_finalize)
#      with --trace: the shutdown gathers are watched too, rank 3 is named;
#   3d. FAULT_TAG0=1 FAULT_NOSEND=3:2 --timeout 2 (tags repeat each step, so
#      rank 1's receive of step 2 was posted ahead in step 1; rank 3 stops
#      instead of sending it): rank 3 is named, and rank 1 waits in the
#      pipeline receive; FAULT_TAG0=1 alone runs clean (every message arrives
#      with its values through the receives posted ahead);
#   4. --steps abc: usage and exit status 2; --device cuda: exit 2 naming the CPU
#      runtime; 2 ranks for a 4-rank mesh: exit 2 saying how many ranks it needs.
# Exit status 0 iff every assertion held.
PROG=${1:?usage: test_fault.sh FAULT_PROG [MPIRUN]}
MPIRUN=${2:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
failures=0

fail() { echo "FAIL: $*"; sed 's/^/    | /' "$OUT" | tail -20; failures=$((failures + 1)); }

# run NP LIMIT_S [ENV=VALUE...] -- ARGS: sets rc and elapsed
run() {
    np=$1; shift
    start=$(date +%s.%N)
    env "$@" timeout 30 "$MPIRUN" -np "$np" --oversubscribe "$PROG" $ARGS >"$OUT" 2>&1
    rc=$?
    end=$(date +%s.%N)
    elapsed=$(echo "$end $start" | awk '{printf "%.2f", $1 - $2}')
}
within() { awk -v e="$elapsed" -v l="$1" 'BEGIN { exit !(e < l) }'; }

ARGS="--quiet"
run 4 PRT_TEST_DIE=2:3
echo "die:      rc=$rc elapsed=${elapsed}s"
[ "$rc" -ne 0 ] || fail "PRT_TEST_DIE=2:3: mpirun exited 0"
[ "$rc" -ne 124 ] || fail "PRT_TEST_DIE=2:3: hung until timeout"
within 10 || fail "PRT_TEST_DIE=2:3: took ${elapsed}s (limit 10s)"
grep -q "rank 2" "$OUT" || fail "PRT_TEST_DIE=2:3: output does not name rank 2"

run 4 FAULT_BADCALL=1:2
echo "badcall:  rc=$rc elapsed=${elapsed}s"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "FAULT_BADCALL=1:2: rc=$rc"
within 10 || fail "FAULT_BADCALL=1:2: took ${elapsed}s (limit 10s)"
grep -q "rank 1 .*error: prt_ptr" "$OUT" || fail "FAULT_BADCALL=1:2: no error message naming rank 1"

run 4 FAULT_HANG=1:3 PRT_TIMEOUT=2
echo "hang:     rc=$rc elapsed=${elapsed}s"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "FAULT_HANG=1:3: rc=$rc"
within 15 || fail "FAULT_HANG=1:3: took ${elapsed}s (limit 15s)"
grep -q "rank 1 (dp 0, tp 1) did not reach all-reduce on tp within 2 s" "$OUT" ||
    fail "FAULT_HANG=1:3: the watchdog did not name rank 1"
grep -q "rank 0 (dp 0, tp 0) waits in all-reduce on tp (step 3)" "$OUT" ||
    fail "FAULT_HANG=1:3: the report does not say what rank 0 waits in"

ARGS="--quiet --timeout=2"
run 4 FAULT_STOP=3:2
echo "stop:     rc=$rc elapsed=${elapsed}s"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "FAULT_STOP=3:2: rc=$rc"
within 15 || fail "FAULT_STOP=3:2: took ${elapsed}s (limit 15s)"
grep -q "rank 3 (dp 1, tp 1) did not reach all-reduce on dp within 2 s (step 2; rank 1 (dp 0, tp 1) waits for it)" "$OUT" ||
    fail "FAULT_STOP=3:2: the report does not name rank 3"
[ "$(grep -c 'did not reach' "$OUT")" -eq 1 ] || fail "FAULT_STOP=3:2: the report is not printed exactly once"

ARGS="--quiet --timeout 2 --trace /dev/null"
run 4 FAULT_STOP=3:6
echo "shutdown: rc=$rc elapsed=${elapsed}s"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "FAULT_STOP=3:6: rc=$rc"
within 15 || fail "FAULT_STOP=3:6: took ${elapsed}s (limit 15s)"
grep -q "rank 3 (dp 1, tp 1) did not .*(shutdown)" "$OUT" || fail "FAULT_STOP=3:6: the shutdown hang does not name rank 3"

ARGS="--quiet --timeout 2"
run 4 FAULT_TAG0=1 FAULT_NOSEND=3:2
echo "nosend:   rc=$rc elapsed=${elapsed}s"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "FAULT_NOSEND=3:2: rc=$rc"
within 15 || fail "FAULT_NOSEND=3:2: took ${elapsed}s (limit 15s)"
grep -q "rank 3 (dp 1, tp 1) did not reach .* within 2 s (step 2;" "$OUT" || fail "FAULT_NOSEND=3:2: rank 3 is not named"
grep -q "rank 1 (dp 0, tp 1) waits in pipeline receive on dp (step 2)" "$OUT" ||
    fail "FAULT_NOSEND=3:2: the report does not say rank 1 waits in the pipeline receive"

ARGS="--quiet"
run 4 FAULT_TAG0=1 PRT_TIMEOUT=30
echo "tag0:     rc=$rc elapsed=${elapsed}s"
[ "$rc" -eq 0 ] || fail "FAULT_TAG0=1 (receives posted ahead): exit status $rc"

ARGS="--steps abc"
run 1 PRT_TIMEOUT=30
echo "badflag:  rc=$rc"
[ "$rc" -eq 2 ] || fail "--steps abc: exit status $rc, want 2"
grep -q "usage:" "$OUT" || fail "--steps abc: no usage message"

# Without a visible GPU, --device cuda is refused naming the CPU runtime; with
# one, the GPU path runs (bench/gpu_check.sh tests it).
if ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
    ARGS="--device cuda"
    run 1 PRT_TIMEOUT=30
    echo "cuda:     rc=$rc"
    [ "$rc" -eq 2 ] || fail "--device cuda: exit status $rc, want 2"
    grep -q "CPU runtime" "$OUT" || fail "--device cuda: no message naming the CPU runtime"
fi

ARGS="--quiet"
run 2 PRT_TIMEOUT=30
echo "mesh:     rc=$rc"
[ "$rc" -eq 2 ] || fail "2 ranks for a 4-rank mesh: exit status $rc, want 2"
grep -q "needs 4 ranks" "$OUT" || fail "2 ranks for a 4-rank mesh: no message saying it needs 4"

ARGS=""
run 4 PRT_TIMEOUT=30
echo "clean:    rc=$rc elapsed=${elapsed}s"
[ "$rc" -eq 0 ] || fail "a run without faults exited $rc"

if [ "$failures" -ne 0 ]; then echo "test_fault: FAIL ($failures)"; exit 1; fi
echo "test_fault: ok"
