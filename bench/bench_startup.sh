#!/usr/bin/env bash
# Start-up to the first step and resident memory against the ledger, one CPU
# rank, figures printed (not a timed test): for bench/plans' 41 M and 5.3 M
# models, ROUNDS runs of `--steps 1 --memory --log` each at 1 and 2 BLAS
# threads under mpirun, OPENBLAS_CORETYPE unset as bench_cpu_speed.sh runs
# (so the start-up kernel check may restart the program, inside the first
# interval).  Per configuration the median of each start-up interval (the
# metrics log's summary `startup_ms`, docs/json.md) and of rank 0's VmHWM
# minus its ledger total; the targets beside them: start-up under 500 ms for
# the 41 M model, resident memory within 64 MiB of the ledger.
# Usage: bench/bench_startup.sh [build/parc]   env: ROUNDS (default 3), MODELS ("41m 5m")
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
parc=$(realpath "${1:-$root/build/parc}")
ROUNDS=${ROUNDS:-3}
MODELS=${MODELS:-41m 5m}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset OPENBLAS_CORETYPE
MPIRUN=$(command -v mpirun || true)
[ -x "$parc" ] || { echo "bench_startup: no parc at $parc (run .ci/build)" >&2; exit 1; }
[ -n "$MPIRUN" ] || { echo "bench_startup: no mpirun on PATH" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
declare -A plan
plan[41m]=$root/bench/plans/gpt_bench_41m.par
plan[5m]=$root/bench/plans/gpt_bench_single.par
echo "bench_startup: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for m in $MODELS; do
    "$parc" build "${plan[$m]}" -o "$tmp/prog_$m" > "$tmp/build_$m.log" 2>&1 ||
        { echo "parc build ${plan[$m]} failed:"; cat "$tmp/build_$m.log"; exit 1; }
    for nt in 1 2; do
        for r in $(seq "$ROUNDS"); do
            log=$tmp/log_${m}_${nt}_$r
            OPENBLAS_NUM_THREADS=$nt "$MPIRUN" --bind-to none -np 1 "$tmp/prog_$m" --steps 1 --memory --quiet \
                --log "$log" > "$tmp/out_${m}_${nt}_$r" 2>&1 ||
                { echo "run of $m failed:"; cat "$tmp/out_${m}_${nt}_$r"; exit 1; }
        done
        python3 - "$m" "$nt" "$tmp"/log_${m}_${nt}_* <<'PY'
import json, statistics, sys
m, nt, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = []
for p in paths:
    s = [json.loads(l) for l in open(p) if l.strip()][-1]
    assert s["record"] == "summary", p
    runs.append(s)
med = lambda k: statistics.median(r["startup_ms"][k] for r in runs)
over = statistics.median((r["resident_peak_bytes"] - r["ledger_bytes"]) / 2**20 for r in runs)
ledger = runs[0]["ledger_bytes"] / 2**20
total = med("total")
target = "  (target < 500 ms)" if m == "41m" else ""
print(f"{m} model, {nt} thread{'s' if nt != '1' else ''}, median of {len(runs)}: start-up {total:.0f} ms{target}: "
      f"to prt_init {med('to_init'):.0f}, MPI_Init {med('mpi_init'):.0f}, options/mesh/data/backend {med('init'):.0f}, "
      f"buffers + initial values {med('buffers'):.0f}, then {med('to_step'):.0f}")
print(f"{m} model, {nt} thread{'s' if nt != '1' else ''}: resident peak - ledger = {over:+.1f} MiB "
      f"(ledger {ledger:.1f} MiB; target within 64 MiB)")
PY
    done
done
