#!/usr/bin/env bash
# Start-up to the first step and resident memory against the ledger, one CPU
# rank, figures printed (not a timed test): for bench/plans' 41 M and 5.3 M
# models, ROUNDS runs of `--steps 1 --memory --log` each at 1 and 2 BLAS
# threads under mpirun, OPENBLAS_CORETYPE unset as bench_cpu_speed.sh runs
# (so the start-up kernel check may restart the program, inside the first
# interval).  Per configuration the median of each start-up interval (the
# metrics log's summary `startup_ms`, docs/json.md) and of rank 0's VmHWM
# minus its ledger total; the targets beside them: start-up under 500 ms for
# the 41 M model, resident memory within 64 MiB of the ledger.  The first
# step's time beside them: pages the start-up does not touch are faulted in
# by their first writer there.  With a second parc (PEER, e.g. another
# checkout's build), its programs run alternately with ours, in the same
# run, and the ratios of its figures to ours are printed.
# Usage: bench/bench_startup.sh [build/parc [PEER]]   env: ROUNDS (default 3), MODELS ("41m 5m")
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
parc=$(realpath "${1:-$root/build/parc}")
peer=${2:+$(realpath "$2")}
ROUNDS=${ROUNDS:-3}
MODELS=${MODELS:-41m 5m}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset OPENBLAS_CORETYPE
MPIRUN=$(command -v mpirun || true)
[ -x "$parc" ] || { echo "bench_startup: no parc at $parc (run .ci/build)" >&2; exit 1; }
[ -z "$peer" ] || [ -x "$peer" ] || { echo "bench_startup: no peer parc at $peer" >&2; exit 1; }
[ -n "$MPIRUN" ] || { echo "bench_startup: no mpirun on PATH" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
declare -A plan
plan[41m]=$root/bench/plans/gpt_bench_41m.par
plan[5m]=$root/bench/plans/gpt_bench_single.par
echo "bench_startup: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bench_startup: ours $parc${peer:+, peer $peer}"
who="ours${peer:+ peer}"
summary() {  # summary MODEL THREADS WHO LOG... -> the figures, and "total first_step" on fd 3
    python3 - "$@" <<'PY'
import json, statistics, sys
m, nt, who, paths = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs, first = [], []
for p in paths:
    recs = [json.loads(l) for l in open(p) if l.strip()]
    s = recs[-1]
    assert s["record"] == "summary", p
    runs.append(s)
    first.append(next(r["step_ms"] for r in recs if r.get("step") == 1 and "step_ms" in r))
med = lambda k: statistics.median(r["startup_ms"][k] for r in runs)
over = statistics.median((r["resident_peak_bytes"] - r["ledger_bytes"]) / 2**20 for r in runs)
ledger = runs[0]["ledger_bytes"] / 2**20
total = med("total")
target = "  (target < 500 ms)" if m == "41m" else ""
th = f"{nt} thread{'s' if nt != '1' else ''}"
print(f"{who}: {m} model, {th}, median of {len(runs)}: start-up {total:.0f} ms{target}: "
      f"to prt_init {med('to_init'):.0f}, MPI_Init {med('mpi_init'):.0f}, options/mesh/data/backend {med('init'):.0f}, "
      f"buffers + initial values {med('buffers'):.0f}, then {med('to_step'):.0f}; first step {statistics.median(first):.0f} ms")
print(f"{who}: {m} model, {th}: resident peak - ledger = {over:+.1f} MiB "
      f"(ledger {ledger:.1f} MiB; target within 64 MiB)")
with open(3, "w") as f:
    f.write(f"{total} {statistics.median(first)}\n")
PY
}
for m in $MODELS; do
    for w in $who; do
        p=$parc; [ "$w" = peer ] && p=$peer
        "$p" build "${plan[$m]}" -o "$tmp/prog_${w}_$m" > "$tmp/build_$m.log" 2>&1 ||
            { echo "$p build ${plan[$m]} failed:"; cat "$tmp/build_$m.log"; exit 1; }
    done
    for nt in 1 2; do
        for r in $(seq "$ROUNDS"); do
            for w in $who; do  # alternately, so both see the same load
                log=$tmp/log_${w}_${m}_${nt}_$r
                OPENBLAS_NUM_THREADS=$nt "$MPIRUN" --bind-to none -np 1 "$tmp/prog_${w}_$m" --steps 1 --memory \
                    --quiet --log "$log" > "$tmp/out_${w}_${m}_${nt}_$r" 2>&1 ||
                    { echo "run of $m ($w) failed:"; cat "$tmp/out_${w}_${m}_${nt}_$r"; exit 1; }
            done
        done
        for w in $who; do
            summary "$m" "$nt" "$w" "$tmp"/log_${w}_${m}_${nt}_* 3> "$tmp/fig_$w" || exit 1
        done
        if [ -n "$peer" ]; then
            read -r ot of < "$tmp/fig_ours"; read -r pt pf < "$tmp/fig_peer"
            awk -v m="$m" -v nt="$nt" -v ot="$ot" -v of="$of" -v pt="$pt" -v pf="$pf" 'BEGIN {
                printf "%s model, %s thread(s): start-up peer/ours %.2fx; start-up + first step peer/ours %.2fx\n",
                       m, nt, pt / ot, (pt + pf) / (ot + of) }'
        fi
    done
done
