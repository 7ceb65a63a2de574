#!/usr/bin/env bash
# The runtime's measured memory equals the compiler's ledger: every tiny plan is
# built and run for 2 steps with --memory; weights, gradients, master and
# optimizer bytes must match exactly on every rank, activations, communication
# and workspace must stay within the ledger (the runtime exits 3 otherwise).
# The table the program prints is checked too: one "ok" row per class per rank.
set -u
parc=$1; examples=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fails=0; n=0
for plan in "$examples"/tiny_*.par; do
    n=$((n + 1))
    out=$("$parc" run "$plan" --steps 2 --memory --quiet 2>&1); status=$?
    world=$(printf '%s\n' "$out" | sed -n 's/.*: ok: \([0-9]*\) rank.*/\1/p' | head -1)
    oks=$(printf '%s\n' "$out" | grep -cE '^ +[0-9]+ +(weights|grads|master|optim|activations|comm|workspace) +[0-9]+ +[0-9]+ +ok$')
    bad=$(printf '%s\n' "$out" | grep -c 'MISMATCH')
    if [ "$status" != 0 ] || [ "$bad" != 0 ] || [ -z "$world" ] || [ "$oks" != $((world * 7)) ]; then
        echo "FAIL $(basename "$plan"): exit $status, $oks ok rows for ${world:-?} ranks, $bad mismatches"
        printf '%s\n' "$out" | tail -20
        fails=$((fails + 1))
    else
        echo "ok   $(basename "$plan"): $world rank(s), every class matches the ledger"
    fi
done
echo "memory: $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
