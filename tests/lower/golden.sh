#!/usr/bin/env bash
# Golden-file test of the per-pass dumps and reports of every example plan.
#   tests/lower/golden.sh PARC            compare (exit 1 on any difference, with the diff)
#   UPDATE=1 tests/lower/golden.sh PARC   regenerate tests/golden/ so reviews read the diff
# Each golden file holds the command's stdout, stderr and exit status.  Every
# command runs with the pass verifiers on (PARC_VERIFY=1): a broken invariant
# aborts with an internal error, which fails the test in both modes (a golden
# file never records one).
set -u
export PARC_VERIFY=1
parc=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
golden=tests/golden
fails=0; count=0
run() { # name, args...
    local name=$1; shift
    local out
    out=$("$parc" "$@" 2>&1; echo "exit status: $?")
    count=$((count + 1))
    if printf '%s\n' "$out" | grep -q "internal error"; then
        echo "FAIL: parc $* reports an internal error:"
        printf '%s\n' "$out" | grep "internal error" | head -3
        fails=$((fails + 1))
    elif [ "${UPDATE:-0}" = 1 ]; then
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
run fit_zero_cp.check check tests/neg_place/fit_zero_cp.par

# `parc lower --emit=<pass>` after every pass of the table (compiler/pipeline/passes.c)
run tiny_3d.front lower examples/tiny_3d.par --emit=front
run tiny_3d.place lower examples/tiny_3d.par --emit=place
run tiny_sp.place lower examples/tiny_sp.par --emit=place
run tiny_mlp_tp.reshard lower examples/tiny_mlp_tp.par --emit=reshard
run tiny_mlp_tp.autodiff lower examples/tiny_mlp_tp.par --emit=autodiff
run tiny_zero3.optim lower examples/tiny_zero3.par --emit=optim
run tiny_sp.tp_overlap lower examples/tiny_sp.par --emit=tp_overlap
run tiny_dp.overlap lower examples/tiny_dp.par --emit=overlap
run tiny_3d.schedule lower examples/tiny_3d.par --emit=schedule
run tiny_pp_interleaved.schedule lower examples/tiny_pp_interleaved.par --emit=schedule
run tiny_3d.analyze lower examples/tiny_3d.par --emit=analyze
run llama2_7b.analyze lower examples/llama2_7b.par --emit=analyze
run lower.unknown_pass lower examples/tiny_3d.par --emit=asm

# diff and search on small spaces (search writes no time unless --time)
run tiny_dp-zero3.diff diff examples/tiny_dp.par examples/tiny_zero3.par
run tiny_moe_dp-ep.diff diff examples/tiny_moe_dp.par examples/tiny_moe_ep.par
run tiny_rope_cp-ring.diff diff examples/tiny_rope_cp.par examples/tiny_rope_ring.par
run tiny_dp-blocking.diff diff examples/tiny_dp.par examples/tiny_dp_blocking.par
run tiny_tp-pp_1f1b.diff.json diff examples/tiny_tp.par examples/tiny_pp_1f1b.par --json
run tiny_dp.search search examples/tiny_dp.par --top 3
run tiny_mlp_tp.search.json search examples/tiny_mlp_tp.par --top 2 --json
run tiny_3d.search search examples/tiny_3d.par --top 2
same() { # what, command A..., --, command B...: identical stdout, both exit 0
    local what=$1; shift
    local a=() b=()
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift; b=("$@")
    count=$((count + 1))
    local out_a out_b rc_a rc_b
    out_a=$("$parc" "${a[@]}" 2>&1); rc_a=$?
    out_b=$("$parc" "${b[@]}" 2>&1); rc_b=$?
    if [ "$rc_a" != 0 ] || [ "$rc_b" != 0 ] || [ -z "$out_a" ] || [ "$out_a" != "$out_b" ]; then
        echo "FAIL: $what: parc ${a[*]} (exit $rc_a) and parc ${b[*]} (exit $rc_b) differ or failed"
        fails=$((fails + 1))
    fi
}
for plan in examples/tiny_3d.par examples/tiny_zero3.par; do
    same "plan is front" lower "$plan" --emit=plan -- lower "$plan" --emit=front
    same "graph is expand" lower "$plan" --emit=graph -- lower "$plan" --emit=expand
    same "ir is lower" lower "$plan" --emit=ir -- lower "$plan" --emit=lower
    same "ir is the default" lower "$plan" -- lower "$plan" --emit=ir
    same "--verify is PARC_VERIFY=1" lower "$plan" --emit=analyze -- lower "$plan" --emit=analyze --verify
    same "codegen dumps the module build writes" lower "$plan" --emit=codegen -- build "$plan" --emit=llvm
done
rm -f /tmp/parc-golden.$$
echo "golden: $((count - fails)) passed, $fails failed"
[ "$fails" = 0 ]
