#!/bin/sh
# test_blas.sh — the BLAS kernel check at start-up (runtime/prt_blas.c): the
# choice rule; a user's OPENBLAS_CORETYPE wins and nothing is said; otherwise
# the ranks run the kernel family the rule picks for this CPU's instructions
# (/proc/cpuinfo) from OpenBLAS's own choice, and rank 0 says so in exactly one
# line (none under --quiet, none when OpenBLAS's choice stands); OMP_WAIT_POLICY
# becomes PASSIVE and OPENBLAS_THREAD_TIMEOUT 4 for a threaded rank unless the
# user set them.
# usage: test_blas.sh BLAS_CORE_PROG [MPIRUN]; exit status 0 iff every assertion held.
PROG=${1:?usage: test_blas.sh BLAS_CORE_PROG [MPIRUN]}
MPIRUN=${2:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PRT_TIMEOUT=60
unset OPENBLAS_CORETYPE OMP_WAIT_POLICY OPENBLAS_NUM_THREADS OPENBLAS_THREAD_TIMEOUT
DIR=$(mktemp -d)
OUT=$DIR/out.txt
trap 'rm -rf "$DIR"' EXIT
failures=0
fail() { echo "FAIL: $*"; sed 's/^/    | /' "$OUT" | head -20; failures=$((failures + 1)); }
# run NP [ENV=VALUE...]: $ARGS to the program, $BIND to mpirun
run() { np=$1; shift; env "$@" timeout 60 "$MPIRUN" -np "$np" --oversubscribe $BIND "$PROG" $ARGS >"$OUT" 2>&1; }
BIND=""
lines() { grep -c "parc: OpenBLAS chose" "$OUT"; }

"$PROG" --table > "$OUT" 2>&1 || fail "the choice rule"
cat "$OUT"

# What the rule must pick here: OpenBLAS's own choice and the CPU's flags.
own=$("$PROG" --own)
flags=" $(grep -m1 '^flags' /proc/cpuinfo | sed 's/^[^:]*://') "
has() { for f; do case "$flags" in *" $f "*) ;; *) return 1 ;; esac; done; }
in_set() { for f in $2; do [ "$(echo "$1" | tr A-Z a-z)" = "$(echo "$f" | tr A-Z a-z)" ] && return 0; done; return 1; }
want=$own
if has avx512f avx512cd avx512bw avx512dq avx512vl; then
    in_set "$own" "SkylakeX Cooperlake SapphireRapids" || want=SkylakeX
elif has avx2 fma; then
    in_set "$own" "Haswell Zen SkylakeX Cooperlake SapphireRapids" || want=Haswell
fi
echo "OpenBLAS's own choice: $own; expected: $want"

# 1. the user's setting wins, silently
ARGS=""
run 1 OPENBLAS_CORETYPE=Prescott OPENBLAS_NUM_THREADS=1
grep -q "^rank 0 core Prescott wait -$" "$OUT" || fail "OPENBLAS_CORETYPE=Prescott: not kept"
[ "$(lines)" -eq 0 ] || fail "OPENBLAS_CORETYPE=Prescott: a line about the kernels"

# 2. unset, two ranks: both run the expected family; one line iff it changed
run 2 OPENBLAS_NUM_THREADS=1
for r in 0 1; do grep -q "^rank $r core $want wait -$" "$OUT" || fail "2 ranks: rank $r does not run $want"; done
if [ "$want" != "$own" ]; then
    [ "$(lines)" -eq 1 ] || fail "2 ranks: $(lines) lines about the kernels, want 1"
    grep -q "parc: OpenBLAS chose its $own kernels on this CPU; restarted with OPENBLAS_CORETYPE=$want" "$OUT" ||
        fail "2 ranks: the line does not name $own and $want"
else
    [ "$(lines)" -eq 0 ] || fail "2 ranks: a line although OpenBLAS's choice stands"
fi

# 3. --quiet: the same kernels, no line
ARGS="--quiet"
run 1 OPENBLAS_NUM_THREADS=1
grep -q "^rank 0 core $want " "$OUT" || fail "--quiet: not $want"
[ "$(lines)" -eq 0 ] || fail "--quiet: a line about the kernels"
ARGS=""

# 4. the wait policy: PASSIVE for a 2-thread rank (unbound: Open MPI binds a lone
# rank to one core, and OpenBLAS then runs one thread), the user's own kept, none
# for ranks of 1 thread
BIND="--bind-to none"
run 1 OPENBLAS_NUM_THREADS=2
grep -q "^rank 0 core $want wait PASSIVE$" "$OUT" || fail "2 threads: OMP_WAIT_POLICY not PASSIVE"
grep -q "^rank 0 timeout 4$" "$OUT" || fail "2 threads: OPENBLAS_THREAD_TIMEOUT not 4"
run 1 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=active OPENBLAS_THREAD_TIMEOUT=20
grep -q "^rank 0 core $want wait active$" "$OUT" || fail "OMP_WAIT_POLICY=active: not kept"
grep -q "^rank 0 timeout 20$" "$OUT" || fail "OPENBLAS_THREAD_TIMEOUT=20: not kept"
BIND=""
run 1 OPENBLAS_NUM_THREADS=2
grep -q "^rank 0 core $want wait -$" "$OUT" || fail "a lone rank bound to one core: a wait policy set"
grep -q "^rank 0 timeout -$" "$OUT" || fail "a lone rank bound to one core: a thread timeout set"
run 2
grep -q "^rank 1 core $want wait -$" "$OUT" || fail "2 ranks sharing the node: a wait policy set"

# 5. the restart itself, whatever OpenBLAS picks here: PRT_TEST_BLAS_CHOSE=Prescott
# stands in for its choice; the ranks must then run the family for this CPU
BIND=""
if has avx512f avx512cd avx512bw avx512dq avx512vl; then fix=SkylakeX; elif has avx2 fma; then fix=Haswell; else fix=""; fi
run 2 OPENBLAS_NUM_THREADS=1 PRT_TEST_BLAS_CHOSE=Prescott
if [ -n "$fix" ]; then
    for r in 0 1; do grep -q "^rank $r core $fix wait -$" "$OUT" || fail "Prescott stand-in: rank $r does not run $fix"; done
    [ "$(lines)" -eq 1 ] || fail "Prescott stand-in: $(lines) lines about the kernels, want 1"
    grep -q "parc: OpenBLAS chose its Prescott kernels on this CPU; restarted with OPENBLAS_CORETYPE=$fix" "$OUT" ||
        fail "Prescott stand-in: the line does not name Prescott and $fix"
else
    [ "$(lines)" -eq 0 ] || fail "Prescott stand-in on a CPU without AVX2: a line about the kernels"
fi

echo "test_blas: $failures failures"
[ "$failures" -eq 0 ]
