#!/usr/bin/env bash
# The command line: usage errors exit 2 with a message, plan errors exit 1,
# success exits 0; build's --emit kinds produce what they say; a bad runtime
# flag reaches every rank's usage message with exit 2.
set -u
parc=$1; examples=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
expect() { # name, want_status, want_text (grep -E), command...
    local name=$1 want=$2 text=$3; shift 3
    n=$((n + 1))
    local out status
    out=$("$@" 2>&1); status=$?
    if [ "$status" != "$want" ] || ! printf '%s\n' "$out" | grep -qE -- "$text"; then
        echo "FAIL $name: exit $status (want $want), output lacks /$text/:"
        printf '%s\n' "$out" | head -15
        fails=$((fails + 1))
    fi
}
expect "no arguments" 2 "usage: parc" "$parc"
expect "help" 0 "usage: parc" "$parc" --help
expect "unknown command" 2 "did you mean .check." "$parc" chek "$examples/tiny_single.par"
expect "missing plan" 2 "missing PLAN" "$parc" explain
expect "unknown option" 2 "unknown option .--jsn." "$parc" explain "$examples/tiny_single.par" --jsn
expect "missing file" 1 "error" "$parc" check "$tmp/nope.par"
expect "valid plan" 0 "ok: 8 ranks" "$parc" check "$examples/tiny_3d.par"
expect "does not fit" 1 "does not fit.*\$|16 bytes per parameter" "$parc" check "$examples/llama7b_1gpu.par"
expect "explain json" 0 '"schema": "parc.explain/1"' "$parc" explain "$examples/tiny_3d.par" --json
expect "lower bad emit" 2 "--emit takes" "$parc" lower "$examples/tiny_3d.par" --emit=asm
expect "option without its value" 2 "needs a value" "$parc" build "$examples/tiny_tp.par" -o
expect "emit llvm" 0 "define i32 @main" "$parc" build "$examples/tiny_tp.par" --emit=llvm
expect "emit obj" 0 "" "$parc" build "$examples/tiny_tp.par" --emit=obj -o "$tmp/tp.o"
n=$((n + 1)); [ -s "$tmp/tp.o" ] || { echo "FAIL emit obj: no object file"; fails=$((fails + 1)); }
expect "build exe" 0 "" "$parc" build "$examples/tiny_tp.par" -o "$tmp/tp"
n=$((n + 1)); [ -x "$tmp/tp" ] || { echo "FAIL build: no executable"; fails=$((fails + 1)); }
expect "bad runtime flag" 2 "usage" "$parc" run "$examples/tiny_dp.par" --steps abc
expect "run trains" 0 "final loss" "$parc" run "$examples/tiny_dp.par" --steps 2
# a rank killed mid-run: every rank stops, non-zero, within seconds, naming the rank
n=$((n + 1))
t0=$(date +%s)
out=$(PRT_TEST_DIE=1:3 timeout 60 "$parc" run "$examples/tiny_3d.par" --steps 8 2>&1); status=$?
t1=$(date +%s)
if [ "$status" = 0 ] || [ "$status" = 124 ] || [ $((t1 - t0)) -gt 30 ] || ! printf '%s\n' "$out" | grep -qiE "rank 1|process rank 1"; then
    echo "FAIL killed rank: exit $status after $((t1 - t0)) s"; printf '%s\n' "$out" | tail -12; fails=$((fails + 1))
fi
echo "cli: $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
