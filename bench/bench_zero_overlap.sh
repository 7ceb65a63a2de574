#!/usr/bin/env bash
# ZeRO-2/3's gradient reduce-scatters started in the backward, and ZeRO-3's
# weight gathers started a layer ahead (overlap_gather.c), against the same
# plan with them blocking (`grad_overlap off;`, the runtime's behaviour
# before they were started), measured in the same run: the bench GPT
# (bench/plans/gpt_bench_dp2.par, 5 M parameters) with `zero 3 over dp;` and
# with `zero 2 over dp;`, 2 ranks x 1 thread, ROUNDS alternating rounds of
# STEPS steps; tokens/s from the median step of steps 3.. over the rounds;
# started / blocking; and the exposed communication the program measured on
# rank 0 (ms per step, the median over the rounds of its end-of-run
# "estimated / measured" line), started beside blocking.  The first line says
# the CPU and the load it ran at.
# Usage: bench/bench_zero_overlap.sh [build/parc]
#   env: STEPS (default 8), ROUNDS (default 3).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
parc=$(realpath "${1:-$root/build/parc}")
STEPS=${STEPS:-8}
ROUNDS=${ROUNDS:-3}
[ "$STEPS" -ge 4 ] || STEPS=4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=$(command -v mpirun || true)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -x "$parc" ] || { echo "bench_zero_overlap: no parc at $parc (run .ci/build)" >&2; exit 1; }
[ -n "$MPIRUN" ] || { echo "bench_zero_overlap: no mpirun on PATH" >&2; exit 1; }
echo "parc bench_zero_overlap — $(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '\n  %6s %16s %16s %9s %20s %21s\n' zero "started tok/s" "blocking tok/s" ratio "exposed ms, started" "exposed ms, blocking"
# exposed_ms FILE...: the median of the measured exposed communication (ms per step)
exposed_ms() {
    sed -n 's/.*estimated \/ measured ms.* exposed communication [^/]* \/ \([0-9.e+-]*\),.*/\1/p' "$@" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else printf "%.4g", v[int((NR + 1) / 2)] }'
}
fails=0
for zero in 3 2; do
    for mode in started blocking; do
        extra=""; [ "$mode" = blocking ] && extra=" grad_overlap off;"
        sed "s/^layout { batch -> dp; }/layout { batch -> dp; zero $zero over dp;$extra }/" \
            "$root/bench/plans/gpt_bench_dp2.par" > "$tmp/z$zero-$mode.par"
        grep -q "zero $zero over dp" "$tmp/z$zero-$mode.par" || { echo "bench_zero_overlap: the plan's layout line moved" >&2; exit 1; }
        "$parc" build "$tmp/z$zero-$mode.par" -o "$tmp/z$zero-$mode" > "$tmp/z$zero-$mode.build" 2>&1 ||
            { echo "  zero $zero $mode: parc build failed"; sed 's/^/    /' "$tmp/z$zero-$mode.build"; fails=1; }
    done
    for r in $(seq "$ROUNDS"); do
        for mode in started blocking; do
            OPENBLAS_NUM_THREADS=1 "$MPIRUN" -np 2 "$tmp/z$zero-$mode" --steps "$STEPS" > "$tmp/z$zero-${mode}_$r.log" 2>&1 ||
                { echo "  zero $zero $mode round $r failed:"; tail -5 "$tmp/z$zero-${mode}_$r.log"; fails=1; }
        done
    done
    on=$(toks 4096 "$(median_ms "$tmp/z$zero-started"_*.log)")
    off=$(toks 4096 "$(median_ms "$tmp/z$zero-blocking"_*.log)")
    printf '  %6s %16s %16s %9s %20s %21s\n' "$zero" "$on" "$off" \
        "$(awk -v a="$on" -v b="$off" 'BEGIN { if (a == "n/a" || b == "n/a" || b <= 0) print "n/a"; else printf "%.3fx", a / b }')" \
        "$(exposed_ms "$tmp/z$zero-started"_*.log)" "$(exposed_ms "$tmp/z$zero-blocking"_*.log)"
done
exit "$fails"
