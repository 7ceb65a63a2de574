#!/usr/bin/env bash
# Predicted against measured step time across hosts, on a 2-host emulated
# cluster (tools/emucluster.sh: network namespaces node0 and node1, 2 ranks
# each; needs root).  At each shaped rate of the link between the hosts
# (RATES, default "1gbit 100mbit") it reshapes the link, runs `parc calibrate
# --hosts` (the fragment's `link intra` and `link inter`, printed), and runs
# four layouts of the bench GPT (bench/plans/gpt_bench_single.par's model:
# 4 layers, hidden 256, seq 256, vocab 4096; batch 8; MODEL=tiny: the tiny GPT
# of examples/common/tiny_gpt.par, whose steps are a few milliseconds) on
# `cluster { nodes 2; gpus_per_node 2; include "<that fragment>"; }`:
#   tp_inside_dp_across  mesh { dp 2; tp 2; }    tensor parallel inside a host, data parallel across
#   tp_across_dp_inside  mesh { tp 2; dp 2; }    the other way round
#   pp_across            mesh { pp 2; dp 2; }    two 1F1B stages on two hosts, 4 micro-batches a rank
#   zero3_across         mesh { dp 4; }          ZeRO-3 over all four ranks
# For each it prints `parc explain`'s step estimate, the step time the program
# measured (`parc run --steps STEPS --log`: the summary's mean over the steps
# after the first), their ratio, and the estimated / measured phases of rank 0;
# then, at each rate, the slowdown of tp across hosts over tp inside them,
# estimated and measured, and whether the estimates order the layouts as the
# measurements do.
# The BLAS kernels (those parc's start-up check picks, an inherited
# OPENBLAS_CORETYPE set aside: bench/lib.sh) and the machine's load average
# are printed first: the hosts share this machine's
# cores, so under load the compute and the shared-memory links inside a host
# measure the other work too.
# With PASSES=N the four layouts run N times in turn at each rate and the
# summary holds the median of each layout's measured steps (the hosts share
# this machine's cores: one run to the next differs by 10-20% here).
# Usage: bench/bench_multinode.sh [build/parc] [steps]   (RATES="1gbit 100mbit", MODEL=bench|tiny, PASSES=1)
set -euo pipefail
parc=$(realpath "${1:-build/parc}")
steps=${2:-10}
rates=${RATES:-1gbit 100mbit}
passes=${PASSES:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
emu=$root/tools/emucluster.sh
tmp=$(mktemp -d)
cluster=$tmp/cluster
trap '"$emu" down "$cluster" > /dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
. "$root/bench/lib.sh"
own_kernels # the calibration and every run on the kernels parc's start-up check picks
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "BLAS kernels: $kernels"
"$emu" up "$cluster" --hosts 2 --slots 2 --rate "${rates%% *}"
on0() { "$emu" exec "$cluster" node0 "$@"; }

case "${MODEL:-bench}" in
    bench) sed -n '/^model/,/^}/p' "$root/bench/plans/gpt_bench_single.par" > "$tmp/model.par" ;;
    tiny) echo "include \"$root/examples/common/tiny_gpt.par\";" > "$tmp/model.par" ;;
    *) echo "MODEL is bench or tiny, not ${MODEL}" >&2; exit 2 ;;
esac

plan() { # name mesh layout fragment micro_batch -> $tmp/name.par
    cat > "$tmp/$1.par" <<EOF
include "$tmp/model.par";
cluster { nodes 2; gpus_per_node 2; include "$4"; }
train { batch 8; micro_batch $5; precision fp32; optimizer adamw lr 1e-3 weight_decay 0.0; steps 10; seed 1234; }
mesh { $2 }
layout { $3 }
EOF
}

for rate in $rates; do
    "$emu" rate "$cluster" "$rate"
    frag=$tmp/cluster_$rate.par
    echo
    echo "== link between the hosts shaped to $rate"
    on0 "$parc" calibrate --hosts "$cluster/hostfile" -o "$frag" > "$tmp/calibrate.out" 2>&1 ||
        { echo "FAILED: parc calibrate --hosts: $(tail -5 "$tmp/calibrate.out")" >&2; exit 1; }
    grep -E '^(link|# between hosts)' "$frag" | sed 's/^/  /'
    plan tp_inside_dp_across "dp 2; tp 2;" "batch -> dp; heads -> tp; ffn -> tp; vocab -> tp;" "$frag" 2
    plan tp_across_dp_inside "tp 2; dp 2;" "batch -> dp; heads -> tp; ffn -> tp; vocab -> tp;" "$frag" 2
    plan pp_across "pp 2; dp 2;" "batch -> dp; layers -> pp schedule 1f1b;" "$frag" 1
    plan zero3_across "dp 4;" "batch -> dp; zero 3 over dp;" "$frag" 2
    printf '  %-22s %12s %12s %8s\n' layout "est. ms" "meas. ms" "est/meas"
    : > "$tmp/steps.$rate"
    for pass in $(seq "$passes"); do
    for name in tp_inside_dp_across tp_across_dp_inside pp_across zero3_across; do
        log=$tmp/$name.$rate.$pass.jsonl
        on0 "$parc" run "$tmp/$name.par" --hosts "$cluster/hostfile" --steps "$steps" --quiet --log "$log" \
            > "$tmp/$name.out" 2>&1 || { echo "FAILED: $name at $rate: $(tail -5 "$tmp/$name.out")" >&2; exit 1; }
        python3 - "$log" "$name" "$tmp/steps.$rate" <<'PY'
import json, sys
summary = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
est, meas = summary["step_ms"]["estimated"], summary["step_ms"]["measured"]
print(f"  {sys.argv[2]:<22} {est:12.2f} {meas:12.2f} {est / meas:8.3f}")
open(sys.argv[3], "a").write(f"{sys.argv[2]} {est} {meas}\n")
phases = ", ".join(f"{k} {v['estimated']:.2f} / {v['measured']:.2f}" for k, v in summary["phases_ms"].items())
print(f"    phases est. / meas. ms (rank 0): {phases}")
PY
    done
    done
    python3 - "$tmp/steps.$rate" <<'PY'
import statistics, sys
runs = {}
for n, e, m in (l.split() for l in open(sys.argv[1])):
    runs.setdefault(n, []).append((float(e), float(m)))
rows = {n: (r[0][0], statistics.median(m for _, m in r)) for n, r in runs.items()}
if any(len(r) > 1 for r in runs.values()):
    print("  the measured median of each layout's runs:")
    for n, (e, m) in rows.items():
        print(f"  {n:<22} {e:12.2f} {m:12.2f} {e / m:8.3f}   (runs {', '.join(f'{x:.1f}' for _, x in runs[n])})")
within = sum(1 for e, m in rows.values() if abs(e / m - 1) <= 0.25)
print(f"  steps within 25% of measured: {within} of {len(rows)}")
a, b = rows["tp_across_dp_inside"], rows["tp_inside_dp_across"]
est, meas = a[0] / b[0], a[1] / b[1]
print(f"  tp across over tp inside: estimated {est:.3f}x, measured {meas:.3f}x, ratio {est / meas:.3f}"
      f" ({'within' if abs(est / meas - 1) <= 0.25 else 'NOT within'} 25%)")
by_est = sorted(rows, key=lambda n: rows[n][0])
by_meas = sorted(rows, key=lambda n: rows[n][1])
print(f"  fastest to slowest, estimated: {', '.join(by_est)}")
print(f"  fastest to slowest, measured:  {', '.join(by_meas)} ({'the same' if by_est == by_meas else 'NOT the same'})")
PY
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
