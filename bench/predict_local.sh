#!/usr/bin/env bash
# Predicted against measured step time on this machine.  `parc calibrate`
# measures it first; every plan then uses that cluster fragment.  Prints for
# each layout the estimate of `parc explain`, the step time the program
# measures (`parc run`, the mean ms/step it prints at the end) and their
# ratio, and whether the estimates order the layouts as the measurements do.
#   1. the tiny plans whose world fits the cores: single, dp 2, tp 2, pp 2,
#      ZeRO-3 dp 2, bf16 (target: every ratio within 0.8..1.2, same order);
#   2. the bench GPT (bench/plans/gpt_bench_dp2.par's model, batch 16) on two
#      ranks: `parc search`'s top two and four more layouts (dp 2, tp 2,
#      pp 2 1F1B, dp 2 ZeRO-3): the measured fastest should be one of the
#      search's top two.
# Each layout runs REPEATS times, the layouts of a section in turn (round-
# robin, after one uncounted warm-up run; the machine is shared: the spread is part
# of the answer): the ratio is the estimate over the median, min and max are
# printed beside it (two layouts whose min..max overlap count as a tie: an
# estimate that orders them either way agrees with the runs, and the order
# line names such pairs), and the median run's phases say where a miss comes
# from (estimated / measured ms per phase on the slowest rank's stage...
# rank 0's, as the program prints them, and the slowest rank).
# Usage: bench/predict_local.sh [build/parc] [steps] [repeats]
set -euo pipefail
parc=$(realpath "${1:-build/parc}")
steps=${2:-20}
repeats=${3:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. "$root/bench/lib.sh"
own_kernels # the calibration and every run on the kernels parc's start-up check picks
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "BLAS kernels: $kernels"
"$parc" calibrate -o "$tmp/cluster.par" | grep -v '^parc calibrate: wrote'
sed -n 's/^# //p' "$tmp/cluster.par" | sed -n '2,$p'
predict() { "$parc" explain "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_s"] * 1e3)'; }
run_all() { # name... -> each layout REPEATS times, round-robin (a slow spell of the machine then falls
            # on every layout alike, not on whichever ran during it), after one uncounted warm-up run
    local i n ms
    "$parc" run "$tmp/$1.par" --steps "$steps" --quiet > /dev/null 2>&1 || true
    for n in "$@"; do : > "$tmp/$n.runs"; done
    for i in $(seq "$repeats"); do
        for n in "$@"; do
            "$parc" run "$tmp/$n.par" --steps "$steps" --quiet > "$tmp/$n.out$i" 2>&1 ||
                { echo "FAILED: $tmp/$n.par: $(tail -3 "$tmp/$n.out$i")" >&2; exit 1; }
            ms=$(sed -n 's/.*| \([0-9.]*\) ms\/step.*/\1/p' "$tmp/$n.out$i" | tail -1)
            [ -n "$ms" ] || { echo "FAILED: no ms/step from $tmp/$n.par" >&2; exit 1; }
            echo "$ms $i" >> "$tmp/$n.runs"
        done
    done
}
report() { # name -> "name predicted median min max ratio" appended to $tmp/rows, the median run's phases after
    local p med at lo hi
    p=$(predict "$tmp/$1.par")
    read -r med at < <(sort -g "$tmp/$1.runs" | sed -n "$(( (repeats + 1) / 2 ))p")
    read -r lo _ < <(sort -g "$tmp/$1.runs" | head -1)
    read -r hi _ < <(sort -g "$tmp/$1.runs" | tail -1)
    printf '%-22s %10.3f %10.3f %8.3f %8.3f %7.3f\n' "$1" "$p" "$med" "$lo" "$hi" "$(echo "$p / $med" | bc -l)" |
        tee -a "$tmp/rows"
    sed -n 's/^parc: per step, estimated \/ measured ms (rank 0, [^)]*): /    phases (est. \/ meas. ms, rank 0): /p;
            s/^parc: per step over \([0-9]*\) ranks, measured ms min \/ mean \/ max (the rank of the max): .*; step \(.*\); slowest rank \([0-9]*\)$/    step over \1 ranks min \/ mean \/ max \2, slowest rank \3/p' \
        "$tmp/$1.out$at"
}
order() { # did the estimates rank the rows as the measurements did?
    python3 - "$tmp/rows" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
by_p = [r[0] for r in sorted(rows, key=lambda r: float(r[1]))]
by_m = [r[0] for r in sorted(rows, key=lambda r: float(r[2]))]
inside = sum(1 for r in rows if 0.8 <= float(r[5]) <= 1.2)
print(f"within 0.8..1.2: {inside} of {len(rows)}; estimated order {' < '.join(by_p)}")
# a pair the estimate orders one way and the medians the other agrees when
# the two layouts' measured [min, max] overlap: the runs cannot tell them apart
ties, wrong = [], []
for i, a in enumerate(rows):
    for b in rows[i + 1:]:
        if (float(a[1]) - float(b[1])) * (float(a[2]) - float(b[2])) >= 0: continue
        lo, hi = (a, b) if float(a[2]) < float(b[2]) else (b, a)
        (ties if float(lo[4]) >= float(hi[3]) else wrong).append(f"{lo[0]} < {hi[0]}")
verdict = "the same" if not ties and not wrong else \
    ("different: measured apart, estimated the other way: " + ", ".join(wrong)) if wrong else \
    ("the same within the measured spread (overlapping min..max, ordered the other way by the estimate: "
     + ", ".join(ties) + ")")
print(f"measured order {' < '.join(by_m)}; {verdict}")
PY
}

echo; echo "1. tiny plans ($steps steps each)"
printf '%-22s %10s %10s %8s %8s %7s\n' plan "est. ms" "median ms" min max ratio
tiny="tiny_single tiny_dp tiny_tp tiny_pp_1f1b tiny_zero3 tiny_bf16"
for n in $tiny; do
    sed -e "s|include \"common/tiny_cluster.par\";|include \"$tmp/cluster.par\";|" \
        -e "s|include \"common/|include \"$root/examples/common/|" "$root/examples/$n.par" > "$tmp/$n.par"
done
run_all $tiny
for n in $tiny; do report "$n"; done
order

echo; echo "2. the bench GPT on two ranks ($steps steps each)"
: > "$tmp/rows"
model=$(sed -n '/^model/,/^}/p' "$root/bench/plans/gpt_bench_dp2.par")
layout() { # name mesh layout micro_batch
    cat > "$tmp/$1.par" <<PLAN
cluster { nodes 1; gpus_per_node 2; include "$tmp/cluster.par"; }
$model
train { batch 16; micro_batch $4; precision fp32; optimizer adamw lr 1e-3 weight_decay 0.0; steps 10; seed 1234; }
mesh { $2 }
layout { $3 }
PLAN
}
layout dp2 "dp 2;" "batch -> dp;" 8
layout tp2 "tp 2;" "heads -> tp; ffn -> tp; vocab -> tp;" 8
layout pp2_1f1b "pp 2;" "layers -> pp schedule 1f1b;" 8
layout dp2_zero3 "dp 2;" "batch -> dp; zero 3 over dp;" 8
"$parc" search "$tmp/dp2.par" --top 2 -o "$tmp/search" | sed -n '1p;/^#[12] /p'
cp "$tmp/search/1.par" "$tmp/search1.par"; cp "$tmp/search/2.par" "$tmp/search2.par"
bench="search1 search2 dp2 tp2 pp2_1f1b dp2_zero3"
run_all $bench
for n in $bench; do report "$n"; done
order
fastest=$(sort -k3 -g "$tmp/rows" | head -1 | awk '{print $0}')
echo "measured fastest: $fastest"
python3 - "$tmp/rows" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
best = min(rows, key=lambda r: float(r[2]))
top = [r for r in rows if r[0] in ("search1", "search2")]
same = any(abs(float(r[1]) - float(best[1])) <= 1e-9 * float(best[1]) for r in top)
tied = [r[0] for r in top if float(r[3]) <= float(best[4]) and float(best[3]) <= float(r[4])]
if same:
    print("the measured fastest is one of the search's top two")
elif tied:
    # the rule the order check uses: overlapping min..max are runs that cannot tell the two apart
    print("the measured fastest is NOT one of the search's top two, but its measured min..max overlaps "
          + " and ".join(tied) + "'s: a tie within the spread")
else:
    print("the measured fastest is NOT one of the search's top two")
PY
