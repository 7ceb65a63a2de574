#!/bin/sh
# test_dtype_word.sh — the runtime checks each call's dtypes word against the
# registered buffers (parc_rt.h): the right words give the formula's numbers, a
# wrong word stops the run with a message naming the call, the argument, the
# buffer and both dtypes — in the first step always, later under
# PRT_CHECK_DTYPES=1.
# usage: test_dtype_word.sh DTYPE_WORD_PROG [MPIRUN]
# Exit status 0 iff every assertion held.
PROG=${1:?usage: test_dtype_word.sh DTYPE_WORD_PROG [MPIRUN]}
MPIRUN=${2:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PRT_TIMEOUT=30
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
failures=0

fail() { echo "FAIL: $*"; sed 's/^/    | /' "$OUT" | head -20; failures=$((failures + 1)); }

# expect NAME STATUS MESSAGE [ENV=VALUE...] -- CASE: one rank; STATUS 0 means
# exit 0, 1 any failing status; MESSAGE (may be empty) is printed exactly once.
expect() {
    name=$1 want=$2 message=$3; shift 3
    envs=""
    while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    env $envs DTYPE_WORD_CASE="$1" timeout 60 "$MPIRUN" -np 1 "$PROG" --quiet >"$OUT" 2>&1
    rc=$?
    echo "$name: rc=$rc"
    if [ "$want" -eq 0 ]; then [ "$rc" -eq 0 ] || fail "$name: exit status $rc, want 0"
    else [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$name: exit status $rc, want a failure"; fi
    if [ -n "$message" ]; then
        n=$(grep -cF -- "$message" "$OUT")
        [ "$n" -eq 1 ] || fail "$name: '$message' printed $n times, want once"
    fi
}

expect "right words" 0 "" -- ok
expect "right words, every call checked" 0 "" PRT_CHECK_DTYPES=1 -- ok
expect "op, wrong word" 1 "gelu_fwd: the call's dtypes word declares pointer argument 2 f32, but it points into buffer acts.bf16, which holds bf16" -- op
expect "collective, mixed word" 1 "allgather: its dtypes word declares bf16 and f32 elements; a collective moves one dtype" -- comm
expect "token ids declared fp32" 1 "embed_fwd: pointer argument 2 (token ids) must be i32" -- fixed
expect "wrong word after the first step" 0 "" -- later
expect "wrong word after the first step, every call checked" 1 "gelu_fwd: the call's dtypes word declares pointer argument 2 f32, but it points into buffer acts.bf16, which holds bf16" PRT_CHECK_DTYPES=1 -- later

[ "$failures" -eq 0 ] && echo "test_dtype_word: ok" || echo "test_dtype_word: $failures failed"
exit $((failures != 0))
