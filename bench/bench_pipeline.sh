#!/usr/bin/env bash
# Pipeline speed over parc's own single rank: a plan on one rank, the same plan
# as pp 2 (1F1B) with the even split, and as pp 2 with `balance auto` (the
# split of least estimated busy time), each rank on one BLAS thread, the same
# global batch of 8 samples as 8 micro-batches of 1 in all three.  Two models:
#   plans/gpt_bench_41m.par          vocab 8192, hidden 768, 4 layers (the head
#                                    costs less than a layer: the even split is
#                                    already the balanced one)
#   plans/gpt_bench_41m_vocab16k.par vocab 16384, hidden 512, 8 layers (the head
#                                    costs more than two layers)
# Prints ms/step (median of steps 3..STEPS over ROUNDS alternating rounds), the
# split each pp 2 program holds and its estimated busy time per stage, and the
# ratios pp 2 / one rank for both splits and balanced / even.  Where balance auto
# keeps the even split the two pp 2 programs are the same, and their ratio is the
# run's noise.  Beside each pp 2 ratio, the bound that explain's per-stage busy
# times put on it: one rank does the work of both stages, sum(busy), while the
# slowest stage cannot start before the first work item has passed through the
# others nor finish before the last one's backward has passed back through
# them, so the step takes at least max(busy) + (sum(busy) - max(busy)) / n, n
# the work items a stage runs (explain's "(n x ...)": m micro-batches, m v
# with v interleaved chunks).  With equal stages this is the (p - 1) / (v m)
# bubble of GPipe, 1F1B and the interleaved schedule (Huang et al. 2019,
# Narayanan et al. 2021); a lighter stage's share of it is its own work.  With a
# second parc (PEER, e.g. another checkout's build) its two pp 2 programs run
# in the same rounds and their ratio to ours is printed.  Measures; does not
# pass or fail.
# The pp 2 runs use Open MPI's copy-in/out shared-memory transport (as every
# bench here); TRANSPORT=default leaves Open MPI's own choice (its single-copy
# path where the kernel allows it), as `parc run` and the programs get it.
#   usage: bench/bench_pipeline.sh [build/parc [PEER]]      env: STEPS (5), ROUNDS (1), MODELS, TRANSPORT
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
parc=$(realpath "${1:-$root/build/parc}")
peer=${2:+$(realpath "$2")}
STEPS=${STEPS:-5}
ROUNDS=${ROUNDS:-1}
MODELS=${MODELS:-"gpt_bench_41m gpt_bench_41m_vocab16k"}
[ "$STEPS" -ge 4 ] || STEPS=4
TRANSPORT=${TRANSPORT:-copy}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
case $TRANSPORT in
    copy) export OMPI_MCA_btl_vader_single_copy_mechanism=none ;;
    default) unset OMPI_MCA_btl_vader_single_copy_mechanism ;;
    *) echo "bench_pipeline: TRANSPORT is copy or default, not '$TRANSPORT'" >&2; exit 2 ;;
esac
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
own_kernels # this parc and the peer on the kernels their start-up check picks
MPIRUN=$(command -v mpirun || true)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -x "$parc" ] || { echo "bench_pipeline: no parc at $parc (run .ci/build)" >&2; exit 1; }
[ -n "$MPIRUN" ] || { echo "bench_pipeline: no mpirun on PATH" >&2; exit 1; }
[ -z "$peer" ] || [ -x "$peer" ] || { echo "bench_pipeline: no peer parc at $peer" >&2; exit 1; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || a + 0 <= 0) print "n/a"; else printf "%.2fx", b / a }'; }

# bound PLAN: sum(busy) / (max(busy) + (sum(busy) - max(busy)) / n) from
# explain's pipeline section ("stage S ... busy X s per step (n x ...)" lines)
bound() {
    "$parc" explain "$1" | awk '/^  stage [0-9]+ .*busy [0-9.e+-]+ s per step \([0-9]+ x/ {
            for (i = 1; i <= NF; i++) if ($i == "busy") b = $(i + 1); else if ($i == "step" && $(i + 1) ~ /^\(/) n = substr($(i + 1), 2)
            sum += b; if (b > max) max = b; p++ }
        END { if (p < 2 || max <= 0 || n <= 0) print "n/a"; else printf "%.2fx", sum / (max + (sum - max) / n) }'
}

# variant BASE NAME MESH LAYOUT: the base plan with batch 8 as 8 micro-batches of
# 1, on MESH with LAYOUT (a 2-GPU cluster with a link for pp 2); fails loudly if
# the base plan's lines are not where this script expects them
variant() {
    local base=$1 out=$tmp/$2.par mesh=$3 layout=$4 gpus=1
    [ "$mesh" = "pp 2;" ] && gpus=2
    sed -e "s/^  batch [0-9]*; micro_batch [0-9]*;/  batch 8; micro_batch 1;/" \
        -e "s/nodes 1; gpus_per_node 1;/nodes 1; gpus_per_node $gpus;/" \
        -e "s|^  gpu { memory \(.*\) }\$|  gpu { memory \1 }\n  link intra 10 GB/s 5 us;|" \
        -e "s/^mesh { .* }/mesh { $mesh }/" -e "s/^layout { .* }/layout { $layout }/" "$base" > "$out"
    grep -q "batch 8; micro_batch 1;" "$out" && grep -q "mesh { $mesh }" "$out" && grep -q "link intra" "$out" ||
        { echo "bench_pipeline: $base does not have the expected batch/mesh/layout lines" >&2; exit 1; }
}

echo "parc bench_pipeline — $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  one BLAS thread per rank; pp 2 over Open MPI's $([ "$TRANSPORT" = copy ] && echo "copy-in/out" || echo "default") shared-memory transport; batch 8 = 8 micro-batches of 1 sample (256 tokens); ms/step = median of steps 3..$STEPS over $ROUNDS round(s)"
echo "  BLAS kernels: $kernels"
for m in $MODELS; do
    base=$root/bench/plans/$m.par
    variant "$base" "$m.single" "dp 1;" "batch -> dp;"
    variant "$base" "$m.even" "pp 2;" "layers -> pp schedule 1f1b;"
    variant "$base" "$m.balance" "pp 2;" "layers -> pp schedule 1f1b; balance auto;"
    variant "$base" "$m.inter" "pp 2;" "layers -> pp schedule interleaved 2;"
    ok=1
    for v in single even balance inter; do
        "$parc" build "$tmp/$m.$v.par" -o "$tmp/$m.$v" > "$tmp/$m.$v.build" 2>&1 ||
            { echo "parc build $m.$v failed:"; cat "$tmp/$m.$v.build"; ok=0; }
    done
    if [ -n "$peer" ]; then
        for v in even balance; do
            "$peer" build "$tmp/$m.$v.par" -o "$tmp/$m.peer_$v" > "$tmp/$m.peer_$v.build" 2>&1 ||
                { echo "peer build $m.$v failed:"; cat "$tmp/$m.peer_$v.build"; ok=0; }
        done
    fi
    [ "$ok" = 1 ] || continue
    echo
    echo "$m: $("$parc" explain "$tmp/$m.single.par" | awk '/^  parameters/ { print $2 }') parameters"
    for v in even balance inter; do
        echo "  pp 2, $v split:"
        "$parc" explain "$tmp/$m.$v.par" | grep -E '^  stage [0-9]+ +layers|^  balanced:' | sed 's/^/  /'
    done
    for r in $(seq "$ROUNDS"); do
        "$MPIRUN" --bind-to none -np 1 "$tmp/$m.single" --steps "$STEPS" > "$tmp/$m.single.$r.log" 2>&1
        "$MPIRUN" -np 2 "$tmp/$m.even" --steps "$STEPS" > "$tmp/$m.even.$r.log" 2>&1
        "$MPIRUN" -np 2 "$tmp/$m.balance" --steps "$STEPS" > "$tmp/$m.balance.$r.log" 2>&1
        "$MPIRUN" -np 2 "$tmp/$m.inter" --steps "$STEPS" > "$tmp/$m.inter.$r.log" 2>&1
        if [ -n "$peer" ]; then
            "$MPIRUN" -np 2 "$tmp/$m.peer_even" --steps "$STEPS" > "$tmp/$m.peer_even.$r.log" 2>&1
            "$MPIRUN" -np 2 "$tmp/$m.peer_balance" --steps "$STEPS" > "$tmp/$m.peer_balance.$r.log" 2>&1
        fi
    done
    s=$(median_ms "$tmp/$m".single.*.log); e=$(median_ms "$tmp/$m".even.*.log); b=$(median_ms "$tmp/$m".balance.*.log)
    i=$(median_ms "$tmp/$m".inter.*.log)
    printf '  %-28s %10s ms/step\n' "one rank" "$s" "pp 2, even split" "$e" "pp 2, balance auto" "$b" "pp 2, interleaved 2" "$i"
    echo "  pp 2 even / one rank:        $(ratio "$e" "$s")   (bound from explain's busy times $(bound "$tmp/$m.even.par"))"
    echo "  pp 2 balance auto / one rank: $(ratio "$b" "$s")   (bound $(bound "$tmp/$m.balance.par"); target 1.6x on 8 micro-batches)"
    echo "  pp 2 interleaved 2 / one rank: $(ratio "$i" "$s")   (bound $(bound "$tmp/$m.inter.par"))"
    echo "  balance auto / even:          $(ratio "$b" "$e")"
    if [ -n "$peer" ]; then
        pe=$(median_ms "$tmp/$m".peer_even.*.log); pb=$(median_ms "$tmp/$m".peer_balance.*.log)
        printf '  %-28s %10s ms/step\n' "peer pp 2, even split" "$pe" "peer pp 2, balance auto" "$pb"
        echo "  pp 2 even: ours over peer $(ratio "$e" "$pe"); balance auto: ours over peer $(ratio "$b" "$pb")"
    fi
done
