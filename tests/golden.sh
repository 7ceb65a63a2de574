#!/usr/bin/env bash
# Golden-file test of the per-pass dumps and reports of every example plan.
#   tests/golden.sh PARC            compare (exit 1 on any difference, with the diff)
#   UPDATE=1 tests/golden.sh PARC   regenerate tests/golden/ so reviews read the diff
# Each golden file holds the command's stdout, stderr and exit status.
set -u
parc=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
golden=tests/golden
fails=0; count=0
run() { # name, args...
    local name=$1; shift
    local out
    out=$("$parc" "$@" 2>&1; echo "exit status: $?")
    count=$((count + 1))
    if [ "${UPDATE:-0}" = 1 ]; then
        printf '%s\n' "$out" > "$golden/$name"
    elif ! diff -u "$golden/$name" <(printf '%s\n' "$out") > /tmp/parc-golden.$$ 2>&1; then
        echo "FAIL: parc $* differs from $golden/$name:"
        head -40 /tmp/parc-golden.$$
        fails=$((fails + 1))
    fi
}
for plan in examples/*.par; do
    n=$(basename "$plan" .par)
    run "$n.explain" explain "$plan"
    run "$n.collectives" collectives "$plan"
    run "$n.ir" lower "$plan" --emit=ir
    run "$n.graph" lower "$plan" --emit=graph
done
run tiny_3d.explain.json explain examples/tiny_3d.par --json
run tiny_3d.collectives.json collectives examples/tiny_3d.par --json
run llama2_7b.explain.verbose explain examples/llama2_7b.par --verbose
run fit_zero.check check tests/neg_place/fit_zero.par
rm -f /tmp/parc-golden.$$
echo "golden: $((count - fails)) passed, $fails failed"
[ "$fails" = 0 ]
