#!/usr/bin/env bash
# test_launch.sh PARC EXAMPLES — launching on the engines clusters use:
#   - `parc build --sbatch`: the batch script's --nodes / --ntasks-per-node are
#     the plan's nodes and gpus_per_node (a 1-node and a 2-node plan), it runs
#     the executable by its absolute path with srun and is executable; with
#     --emit=obj it is a usage error (2), into a missing directory an error (1);
#   - `parc run --hosts FILE`: a hostfile of two entries for this machine
#     (`localhost` and its host name, one slot each) runs tiny_tp's 2 ranks;
#     `localhost slots=1` is refused by mpirun, so the file is what places the
#     ranks; a missing file is an error (2) before anything is built;
#   - the start-up placement check (PRT_HOSTNAME, the runtime's test hook):
#     tiny_tp's tp group on two fake hosts gets the warning naming both ranks
#     and hosts, on one host none; tiny_3d (pp 2, dp 2, tp 2) with hosts per
#     rank pair warns about no tensor-parallel group but, its plan keeping
#     every axis inside one node of 8, once about `dp` and once about `pp`,
#     each naming how many of their groups span hosts; with hosts
#     alternating per rank it warns about all four tensor-parallel groups and
#     nothing else;
#   - a hostfile naming fewer hosts than the plan has nodes is an error (2)
#     naming both counts;
#   - `parc run --restarts N` without a checkpoint directory, and with N not
#     a count from 1 to 1000, is a usage error (2);
#   - Slurm (tests/launch/local_slurm.sh: slurmctld and slurmd on this machine,
#     auth/none): the --sbatch script of tiny_tp through `sbatch --wait`, and
#     `parc run` inside `salloc` (SLURM_JOB_ID set: srun instead of mpirun),
#     each training 2 steps on 2 ranks.  Skipped, and said so, when Slurm's
#     daemons are not installed (Debian: slurmctld slurmd slurm-client).
set -u
parc=$(realpath "$1"); examples=$(realpath "$2")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# ---- parc build --sbatch
"$parc" build "$examples/tiny_tp.par" -o "$tmp/tiny_tp" --sbatch "$tmp/tiny_tp.sbatch" || fail "build --sbatch tiny_tp"
want_lines=("#SBATCH --nodes=1" "#SBATCH --ntasks-per-node=2" "exec srun --kill-on-bad-exit=1 $tmp/tiny_tp \"\$@\"")
for l in "${want_lines[@]}"; do grep -qxF -- "$l" "$tmp/tiny_tp.sbatch" || fail "tiny_tp.sbatch has no line \`$l\`"; done
[ -x "$tmp/tiny_tp.sbatch" ] || fail "tiny_tp.sbatch is not executable"
"$parc" build "$examples/llama2_7b.par" -o "$tmp/llama" --sbatch "$tmp/llama.sbatch" > "$tmp/llama.out" 2>&1 ||
    fail "build --sbatch llama2_7b: $(tail -3 "$tmp/llama.out")"
for l in "#SBATCH --nodes=2" "#SBATCH --ntasks-per-node=8"; do
    grep -qxF -- "$l" "$tmp/llama.sbatch" || fail "llama.sbatch has no line \`$l\`"
done
"$parc" build "$examples/tiny_tp.par" -o "$tmp/x.o" --emit=obj --sbatch "$tmp/x.sbatch" > "$tmp/obj.out" 2>&1
rc=$?; [ $rc = 2 ] && grep -q "use it with --emit=exe" "$tmp/obj.out" || fail "--sbatch with --emit=obj: exit $rc"
"$parc" build "$examples/tiny_tp.par" -o "$tmp/y" --sbatch "$tmp/missing/y.sbatch" > "$tmp/miss.out" 2>&1
rc=$?; [ $rc = 1 ] && grep -q "missing/y.sbatch: cannot open it for writing" "$tmp/miss.out" ||
    fail "--sbatch into a missing directory: exit $rc: $(cat "$tmp/miss.out")"
[ $fails = 0 ] && ok "build --sbatch"

# ---- parc run --hosts
printf 'localhost\n%s\n' "$(hostname)" > "$tmp/hosts2"
timeout 300 "$parc" run "$examples/tiny_tp.par" --hosts "$tmp/hosts2" --steps 2 > "$tmp/hosts2.out" 2>&1
rc=$?; [ $rc = 0 ] && grep -q "2 steps | final loss" "$tmp/hosts2.out" ||
    fail "run --hosts (2 slots): exit $rc: $(tail -5 "$tmp/hosts2.out")"
printf 'localhost slots=1\n' > "$tmp/hosts1"
timeout 300 "$parc" run "$examples/tiny_tp.par" --hosts "$tmp/hosts1" --steps 2 > "$tmp/hosts1.out" 2>&1
rc=$?; [ $rc != 0 ] && grep -qi "slots" "$tmp/hosts1.out" || fail "run --hosts (1 slot, 2 ranks): exit $rc"
"$parc" run "$examples/tiny_tp.par" --hosts "$tmp/none" > "$tmp/none.out" 2>&1
rc=$?; [ $rc = 2 ] && grep -q -- "--hosts $tmp/none: cannot read it" "$tmp/none.out" || fail "run --hosts missing: exit $rc"
printf '# one host\nlocalhost slots=16\n\nlocalhost\n' > "$tmp/onehost"
"$parc" run "$examples/llama2_7b.par" --hosts "$tmp/onehost" > "$tmp/onehost.out" 2>&1
rc=$?; [ $rc = 2 ] && grep -qF -- "--hosts $tmp/onehost names 1 host, but the plan's cluster has 2 nodes of 8 GPUs" \
    "$tmp/onehost.out" || fail "run --hosts with fewer hosts than nodes: exit $rc: $(tail -3 "$tmp/onehost.out")"
"$parc" run "$examples/tiny_tp.par" --restarts 1 > "$tmp/restarts.out" 2>&1
rc=$?; [ $rc = 2 ] && grep -qF -- "--restarts relaunches from the newest checkpoint, and this run saves none" \
    "$tmp/restarts.out" || fail "run --restarts without checkpoints: exit $rc: $(tail -3 "$tmp/restarts.out")"
"$parc" run "$examples/tiny_tp.par" --restarts 0 > "$tmp/restarts0.out" 2>&1
rc=$?; [ $rc = 2 ] && grep -qF -- "--restarts takes a count from 1 to 1000, not \`0\`" "$tmp/restarts0.out" ||
    fail "run --restarts 0: exit $rc: $(tail -3 "$tmp/restarts0.out")"
ok "run --hosts"

# ---- the placement check
run_hosts() { # PLAN_EXE WORLD NAMES -> stderr in $tmp/place.err
    mpirun -np "$2" --oversubscribe -x PRT_HOSTNAME="$3" "$1" --steps 1 --quiet > "$tmp/place.out" 2> "$tmp/place.err"
}
run_hosts "$tmp/tiny_tp" 2 nodeA,nodeB || fail "tiny_tp on fake hosts: $(tail -3 "$tmp/place.err")"
want='parc: warning: the tensor-parallel group on `tp` of ranks 0 (nodeA), 1 (nodeB) spans hosts'
grep -qF "$want" "$tmp/place.err" || fail "no placement warning: $(cat "$tmp/place.err")"
run_hosts "$tmp/tiny_tp" 2 nodeA,nodeA || fail "tiny_tp on one fake host"
grep -q "spans hosts" "$tmp/place.err" && fail "a warning for a group on one host: $(cat "$tmp/place.err")"
"$parc" build "$examples/tiny_3d.par" -o "$tmp/tiny_3d" || fail "build tiny_3d"
run_hosts "$tmp/tiny_3d" 8 a,a,b,b,c,c,d,d || fail "tiny_3d on paired hosts"
grep -q "spans hosts" "$tmp/place.err" && fail "tiny_3d, tp pairs on one host each: $(cat "$tmp/place.err")"
for want in 'parc: warning: 4 of the 4 groups on `dp` span hosts (the first: ranks 0 (a), 2 (b)), but the plan keeps `dp` inside a node' \
            'parc: warning: 4 of the 4 groups on `pp` span hosts (the first: ranks 0 (a), 4 (c)), but the plan keeps `pp` inside a node'; do
    grep -qF "$want" "$tmp/place.err" || fail "tiny_3d on paired hosts: no \`$want\`: $(cat "$tmp/place.err")"
done
n=$(grep -c "warning" "$tmp/place.err")
[ "$n" = 2 ] || fail "tiny_3d on paired hosts: $n warnings, expected 2: $(cat "$tmp/place.err")"
run_hosts "$tmp/tiny_3d" 8 a,b,a,b,a,b,a,b || fail "tiny_3d on alternating hosts"
n=$(grep -c "spans hosts" "$tmp/place.err")
[ "$n" = 4 ] || fail "tiny_3d on alternating hosts: $n warnings, expected 4: $(cat "$tmp/place.err")"
n=$(grep -c "warning" "$tmp/place.err")
[ "$n" = 4 ] || fail "tiny_3d on alternating hosts: $n warnings in all, expected 4: $(cat "$tmp/place.err")"
grep -qF 'ranks 6 (a), 7 (b) spans hosts' "$tmp/place.err" || fail "tiny_3d: no warning for ranks 6, 7"
ok "placement check"

# ---- Slurm
if ! command -v slurmctld > /dev/null || ! command -v slurmd > /dev/null || ! command -v sbatch > /dev/null; then
    echo "Slurm: SKIPPED, slurmctld / slurmd / sbatch not installed (Debian: slurmctld slurmd slurm-client)"
else
    here=$(dirname "$(realpath "$0")")
    if ! env_line=$("$here/local_slurm.sh" "$tmp/slurm" start); then
        fail "a local Slurm did not come up"
    else
        eval "$env_line"
        trap '"$here/local_slurm.sh" "$tmp/slurm" stop; rm -rf "$tmp"' EXIT
        (cd "$tmp" && timeout 300 sbatch --wait -o "$tmp/sbatch.out" "$tmp/tiny_tp.sbatch" --steps 2 > /dev/null 2>&1)
        rc=$?; [ $rc = 0 ] && grep -q "2 steps | final loss" "$tmp/sbatch.out" ||
            fail "sbatch --wait tiny_tp.sbatch: exit $rc: $(tail -5 "$tmp/sbatch.out" 2>/dev/null)"
        (cd "$tmp" && timeout 300 salloc -n 2 "$parc" run "$examples/tiny_tp.par" --steps 2 > "$tmp/salloc.out" 2>&1)
        rc=$?; [ $rc = 0 ] && grep -q "2 steps | final loss" "$tmp/salloc.out" &&
            grep -q "^parc run: inside Slurm job [0-9]*: srun --ntasks=2" "$tmp/salloc.out" ||
            fail "salloc parc run: exit $rc: $(tail -5 "$tmp/salloc.out")"
        ls -a "$tmp" | grep -q '^\.parc-run-' && fail "parc run under Slurm left its build directory behind"
        ok "Slurm: sbatch --wait and parc run inside salloc, 2 ranks through srun"
    fi
fi
echo "launch: $fails failures"
[ $fails = 0 ]
