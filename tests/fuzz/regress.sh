#!/usr/bin/env bash
# regress.sh PARC FILE... — inputs the fuzzer once broke parc with: each must now
# get a verdict (exit 0 valid, 1 with diagnostics) from check, explain and the
# IR dump, within 20 s, with no internal error or sanitizer report.
set -u
parc=$1; shift
fails=0; n=0
for f in "$@"; do
    for cmd in "check" "explain --verbose" "collectives --json" "lower --emit=ir" "lower --emit=plan"; do
        n=$((n + 1))
        # shellcheck disable=SC2086
        out=$(timeout 20 "$parc" $cmd "$f" 2>&1 >/dev/null); status=$?
        if { [ "$status" != 0 ] && [ "$status" != 1 ]; } || printf '%s' "$out" | grep -qE "internal error|runtime error|Sanitizer"; then
            echo "FAIL $f: parc $cmd exited $status"; printf '%s\n' "$out" | tail -5; fails=$((fails + 1))
        elif [ "$status" = 1 ] && ! printf '%s' "$out" | grep -qE "^[^ ]+:[0-9]+:[0-9]+: error: |^[^ ]+: error: "; then
            echo "FAIL $f: parc $cmd exited 1 without a located error"; fails=$((fails + 1))
        fi
    done
done
echo "fuzz regressions: $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
