#!/bin/sh
# test_options.sh — a built program's options, outputs and data, as an
# adversarial user would give them: each case asserts the exit status, the
# message (once, from one rank, naming the user's file and no runtime source),
# and, for start-up checks, that nothing was trained first.
# usage: test_options.sh FAULT_PROG [MPIRUN]
# Exit status 0 iff every assertion held.
PROG=${1:?usage: test_options.sh FAULT_PROG [MPIRUN]}
MPIRUN=${2:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PRT_TIMEOUT=30
DIR=$(mktemp -d)
OUT=$DIR/out.txt
trap 'rm -rf "$DIR"' EXIT
failures=0

fail() { echo "FAIL: $*"; sed 's/^/    | /' "$OUT" | head -20; failures=$((failures + 1)); }

# expect NAME STATUS MESSAGE [ENV=VALUE...] -- ARGS...: 4 ranks, within 20 s; the
# message appears exactly once; no runtime source location (file.c:LINE) is printed.
expect() {
    name=$1 want=$2 message=$3; shift 3
    envs=""
    while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    start=$(date +%s)
    env $envs timeout 20 "$MPIRUN" -np 4 --oversubscribe "$PROG" "$@" >"$OUT" 2>&1
    rc=$?
    elapsed=$(($(date +%s) - start))
    echo "$name: rc=$rc (${elapsed}s)"
    [ "$rc" -eq "$want" ] || fail "$name: exit status $rc, want $want"
    n=$(grep -cF -- "$message" "$OUT")
    [ "$n" -eq 1 ] || fail "$name: '$message' printed $n times, want once"
    if grep -qE '[a-z_]+\.(c|cu):[0-9]+' "$OUT"; then fail "$name: a runtime source location is printed"; fi
}
# ...and it stopped before training: no step ran.
untrained() { if grep -q "^step \|steps |" "$OUT"; then fail "$1: steps ran before the error"; fi; }

# ---- numeric options: range-checked, exit 2
for v in 9223372036854775807 99999999999999999999 0 1e3 ''; do
    expect "--steps '$v'" 2 "parc: error: --steps needs a whole number of steps from 1 to 1000000000, got '$v'" -- --steps "$v"
    untrained "--steps '$v'"
done
expect "--timeout=-1" 2 "parc: error: --timeout needs seconds from 0 (never) to 1000000, got '-1'" -- --timeout=-1
expect "--timeout nan" 2 "parc: error: --timeout needs seconds from 0 (never) to 1000000, got 'nan'" -- --timeout nan
expect "PRT_TIMEOUT=abc" 2 "parc: error: PRT_TIMEOUT needs seconds from 0 (never) to 1000000, got 'abc'" PRT_TIMEOUT=abc --
expect "--memory=1" 2 "parc: error: --memory takes no value, got '--memory=1'" -- --memory=1
expect "--steps (no value)" 2 "parc: error: --steps needs a value" -- --quiet --steps

# ---- both spellings of a value
expect "--steps=3" 0 "parc: fault_prog: 3 steps |" -- --quiet --steps=3
expect "--steps 2" 0 "parc: fault_prog: 2 steps |" -- --quiet --steps 2

# ---- outputs: validated at start-up, every write checked
expect "--trace in a missing directory" 2 \
    "parc: error: --trace $DIR/missing/t.json: cannot open it for writing: No such file or directory" \
    -- --steps 2 --trace "$DIR/missing/t.json"
untrained "--trace in a missing directory"
expect "--trace /dev/full" 1 "parc: error: --trace /dev/full: cannot write the trace: No space left on device" \
    -- --quiet --steps 2 --trace /dev/full
if grep -q "trace of .* written" "$OUT"; then fail "--trace /dev/full: says the trace was written"; fi
expect "PRT_LOSS_FILE in a missing directory" 2 \
    "parc: error: PRT_LOSS_FILE $DIR/missing/loss.txt: cannot open it for writing: No such file or directory" \
    PRT_LOSS_FILE="$DIR/missing/loss.txt" -- --steps 2
untrained "PRT_LOSS_FILE in a missing directory"
expect "PRT_LOSS_FILE=/dev/full" 1 "parc: error: PRT_LOSS_FILE /dev/full: cannot write step 0: No space left on device" \
    PRT_LOSS_FILE=/dev/full -- --quiet --steps 2
expect "--log in a missing directory" 2 \
    "parc: error: --log $DIR/missing/log.jsonl: cannot open it for writing: No such file or directory" \
    -- --steps 2 --log "$DIR/missing/log.jsonl"
untrained "--log in a missing directory"
expect "--log /dev/full" 1 "parc: error: --log /dev/full: cannot write step 0: No space left on device" \
    -- --quiet --steps 2 --log /dev/full
expect "--log (no value)" 2 "parc: error: --log needs a value" -- --quiet --log
expect "PRT_DUMP_DIR=/dev/null" 2 "parc: error: PRT_DUMP_DIR /dev/null: is not a directory" \
    PRT_DUMP_DIR=/dev/null -- --steps 2
untrained "PRT_DUMP_DIR=/dev/null"

# ---- data: validated at start-up, before training; a FIFO must not hang
mkfifo "$DIR/fifo"
expect "--data FIFO" 2 "parc: error: --data $DIR/fifo: is a FIFO, not a regular file" -- --steps 2 --data "$DIR/fifo"
untrained "--data FIFO"
expect "--data directory" 2 "parc: error: --data $DIR: is a directory, not a regular file" -- --steps 2 --data "$DIR"
untrained "--data directory"
expect "--data missing" 2 "parc: error: --data $DIR/none.txt: cannot open it: No such file or directory" \
    -- --steps 2 --data "$DIR/none.txt"
printf 'short' >"$DIR/short.txt"
expect "--data too short" 2 "parc: error: --data $DIR/short.txt: 5 bytes is too short for sequences of 8 tokens (needs 10)" \
    -- --steps 2 --data "$DIR/short.txt"
head -c 3000 "$0" >"$DIR/data.txt"
expect "--data FILE" 0 "parc: fault_prog: 2 steps |" -- --quiet --steps 2 --data="$DIR/data.txt"

if [ "$failures" -ne 0 ]; then echo "test_options: FAIL ($failures)"; exit 1; fi
echo "test_options: ok"
