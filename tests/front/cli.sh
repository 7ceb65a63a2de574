#!/usr/bin/env bash
# The command line: usage errors exit 2 with a message, plan errors exit 1,
# success exits 0; build's --emit kinds produce what they say; a bad runtime
# flag reaches every rank's usage message with exit 2; options anywhere, help,
# standard input, colour and JSON diagnostics; SIGTERM stops `parc run`.
set -u
parc=$(realpath "$1"); examples=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
expect() { # name, want_status, want_text (grep -E), command...
    local name=$1 want=$2 text=$3; shift 3
    n=$((n + 1))
    local out status
    out=$("$@" 2>&1); status=$?
    if [ "$status" != "$want" ] || ! printf '%s\n' "$out" | grep -qE -- "$text"; then
        echo "FAIL $name: exit $status (want $want), output lacks /$text/:"
        printf '%s\n' "$out" | head -15
        fails=$((fails + 1))
    fi
}
expect "no arguments" 2 "usage: parc" "$parc"
expect "help" 0 "usage: parc" "$parc" --help
expect "unknown command" 2 "did you mean .check." "$parc" chek "$examples/tiny_single.par"
expect "missing plan" 2 "missing PLAN" "$parc" explain
expect "unknown option" 2 "unknown option .--jsn." "$parc" explain "$examples/tiny_single.par" --jsn
expect "missing file" 1 "error" "$parc" check "$tmp/nope.par"
expect "valid plan" 0 "ok: 8 ranks" "$parc" check "$examples/tiny_3d.par"
expect "does not fit" 1 "does not fit.*\$|16 bytes per parameter" "$parc" check "$examples/llama7b_1gpu.par"
expect "explain json" 0 '"schema": "parc.explain/1"' "$parc" explain "$examples/tiny_3d.par" --json
expect "lower bad emit" 2 "--emit takes" "$parc" lower "$examples/tiny_3d.par" --emit=asm
expect "option without its value" 2 "needs a value" "$parc" build "$examples/tiny_tp.par" -o
expect "emit llvm" 0 "define i32 @main" "$parc" build "$examples/tiny_tp.par" --emit=llvm
expect "emit obj" 0 "" "$parc" build "$examples/tiny_tp.par" --emit=obj -o "$tmp/tp.o"
n=$((n + 1)); [ -s "$tmp/tp.o" ] || { echo "FAIL emit obj: no object file"; fails=$((fails + 1)); }
expect "build exe" 0 "" "$parc" build "$examples/tiny_tp.par" -o "$tmp/tp"
n=$((n + 1)); [ -x "$tmp/tp" ] || { echo "FAIL build: no executable"; fails=$((fails + 1)); }
expect "bad runtime flag" 2 "usage" "$parc" run "$examples/tiny_dp.par" --steps abc
expect "run trains" 0 "final loss" "$parc" run "$examples/tiny_dp.par" --steps 2
# a model without a head: its last stage holds the final norm, not "+ head"
sed -e 's/^  head untied;/  head none;/' -e 's/^  loss cross_entropy;/  loss none;/' \
    "$examples/common/tiny_gpt.par" > "$tmp/headless.par"
printf 'include "%s";\ncluster { nodes 1; gpus_per_node 1; include "%s"; }\ntrain { include "%s"; micro_batch 2; }\nmesh { dp 1; }\nlayout { batch -> dp; }\n' \
    "$tmp/headless.par" "$(realpath "$examples/common/tiny_cluster.par")" "$(realpath "$examples/common/tiny_train.par")" \
    > "$tmp/headless_plan.par"
expect "no head: explain says embedding only" 0 "layers 0..3 \+ embedding; " "$parc" explain "$tmp/headless_plan.par"
expect "no head: json head false" 0 '"embed": true, "head": false' "$parc" explain "$tmp/headless_plan.par" --json
expect "run trains grouped-query attention" 0 "final loss" "$parc" run "$examples/tiny_gqa_tp.par" --steps 2
# options before or after the plan, both spellings of a value, help on stdout
expect "option before the plan" 0 '"schema": "parc.explain/1"' "$parc" explain --json "$examples/tiny_3d.par"
expect "global option first" 0 "ok: 8 ranks" "$parc" --color=never check "$examples/tiny_3d.par"
# the lowering rows: each dump shows its pass's sequences and none of the next pass's
for row in "reshard block.fwd: block.bwd:" "autodiff block.bwd: optim.block:"; do
    set -- $row
    expect "emit $1" 0 "^  $2" "$parc" lower "$examples/tiny_3d.par" --emit="$1" --verify
    n=$((n + 1))
    if "$parc" lower "$examples/tiny_3d.par" --emit="$1" 2>&1 | grep -q "^  $3"; then
        echo "FAIL emit $1: the dump holds $3, which a later pass adds"; fails=$((fails + 1))
    fi
done
expect "emit optim" 0 "^  grad_sync.block:" "$parc" lower "$examples/tiny_3d.par" --emit=optim --verify
expect "value as next argument" 0 "^stage 0" "$parc" lower --emit schedule "$examples/tiny_pp_1f1b.par"
expect "value after =" 0 "^stage 0" "$parc" lower "$examples/tiny_pp_1f1b.par" --emit=schedule
expect "parc help" 0 "^usage: parc COMMAND" "$parc" help
expect "parc help check" 0 "^usage: parc check PLAN" "$parc" help check
expect "parc explain --help" 0 "^usage: parc explain PLAN" "$parc" explain --help
expect "parc run -h" 0 "--steps N" "$parc" run -h
# the plan tools are commands of the one table: its help, its parser
expect "parc help diff" 0 "^usage: parc diff A.par B.par" "$parc" help diff
expect "parc search --help" 0 "--top K +how many layouts" "$parc" search --help
expect "parc calibrate -h" 0 "^  -o FILE +the cluster fragment to write" "$parc" calibrate -h
expect "parc export --help after arguments" 0 "--names hf.parc" "$parc" export ckpt -o x.safetensors --help
expect "a misspelt tool" 2 "unknown command .serch.; did you mean .search." "$parc" serch x.par
expect "general usage lists the tools" 0 "^  calibrate +measure this machine" "$parc" help
expect "a tool's misspelt option" 2 "unknown option .--exhaustiv.; did you mean .--exhaustive." "$parc" search x.par --exhaustiv
expect "search --top out of range" 2 "--top takes a count from 1 to 1000, not .0." "$parc" search x.par --top 0
expect "export --names" 2 "--names takes hf or parc, not .gguf." "$parc" export ck -o x --names=gguf
expect "export --max-shard-size" 2 "--max-shard-size takes a size such as 5GB, 500MB or 2GiB, not .5 GB." "$parc" export ck -o x --max-shard-size "5 GB"
expect "export without -o" 2 "missing -o OUT" "$parc" export ck
expect "diff of one plan" 2 "give two plans" "$parc" diff a.par
expect "calibrate --ranks without --device" 2 "--ranks goes with --device" "$parc" calibrate --ranks 2
expect "the tp hint divides the kv heads too" 1 "hint: tp = 8 would$" "$parc" check "$examples/../tests/neg/tp_kv_heads.par"
expect "uneven layers: the hint names balance auto" 1 "or let the cost model split them with .balance auto;." "$parc" check "$examples/../tests/neg/pipeline_layers.par"
# ... and following it works
n=$((n + 1))
sed 's/layers -> pp; .*/layers -> pp; balance auto;/' "$examples/../tests/neg/pipeline_layers.par" > "$tmp/balanced.par"
if ! out=$("$parc" check "$tmp/balanced.par" 2>&1); then echo "FAIL the hint's balance auto: $out"; fails=$((fails + 1)); fi
expect "search where no layout fits" 1 "no layout of .* fits its cluster" "$parc" search "$examples/../tests/analyze/plans/no_layout_fits.par"
expect "a global option on a tool" 2 "--color takes auto, always or never" "$parc" diff a.par b.par --color=sometimes
# every option each command's help lists, its own and the global ones, is
# one the parser takes for that command: given it (and a value), the usage
# error names the bogus argument after it
for cmd in check explain collectives lower build run report diff search calibrate export; do
    while read -r opt value; do
        [ "$opt" = --help ] || [ "$opt" = -h ] && continue
        n=$((n + 1))
        case $value in K | N) value=1 ;; "hf|parc") value=hf ;; WHEN) value=auto ;; FORMAT) value=text ;; SIZE) value=5GB ;; ?*) value=x ;; esac
        out=$("$parc" "$cmd" "$opt" ${value:+"$value"} --bogus-zz 2>&1); status=$?
        if [ "$status" != 2 ] || ! printf '%s' "$out" | grep -q -- "unknown option .--bogus-zz."; then
            echo "FAIL $cmd's help lists $opt, which its parser does not take: exit $status: $out"
            fails=$((fails + 1))
        fi
    done < <("$parc" help "$cmd" | sed -n 's/^  \(-[-a-z]*\)\( [A-Z|a-z]*\)\{0,1\}  .*/\1\2/p')
done
expect "help of an unknown command" 2 "unknown command .chek.; did you mean .check." "$parc" help chek
expect "version" 0 "^parc [0-9]+\.[0-9]+" "$parc" --version
expect "unknown option names it" 2 "parc check: unknown option .--fast." "$parc" check --fast "$examples/tiny_3d.par"
expect "option of another command" 2 "unknown option .--json." "$parc" check "$examples/tiny_3d.par" --json
expect "flag with a value" 2 ".--json. takes no value" "$parc" explain --json=yes "$examples/tiny_3d.par"
expect "second plan" 2 "unexpected argument .b.par." "$parc" check a.par b.par
expect "bad --color" 2 "--color takes auto, always or never, not .sometimes." "$parc" --color=sometimes check x.par
expect "bad --diagnostics-format" 2 "takes text or json, not .xml." "$parc" check x.par --diagnostics-format xml
n=$((n + 1))
out=$("$parc" help 2>/dev/null); [ -n "$out" ] || { echo "FAIL help: not on stdout"; fails=$((fails + 1)); }
n=$((n + 1))
out=$("$parc" help check 2>&1 >/dev/null); [ -z "$out" ] || { echo "FAIL help check: wrote to stderr: $out"; fails=$((fails + 1)); }

# `-` reads the plan from standard input (includes relative to the working directory)
n=$((n + 1))
out=$(cd "$examples" && "$parc" check - < tiny_3d.par 2>&1); status=$?
if [ "$status" != 0 ] || [ "$out" != "<stdin>: ok: 8 ranks, 235 K parameters, peak 1.5 MiB of 1.0 GiB per GPU (stage 0)" ]; then
    echo "FAIL stdin plan: exit $status: $out"; fails=$((fails + 1))
fi
n=$((n + 1))
out=$(printf 'mesh { dp 2 }\n' | "$parc" check - 2>&1); status=$?
if [ "$status" != 1 ] || ! printf '%s\n' "$out" | grep -q '^<stdin>:1:'; then
    echo "FAIL stdin error location: exit $status: $out"; fails=$((fails + 1))
fi

# diagnostics: colour only when asked (or on a terminal), JSON one object per line
bad=$tmp/bad.par
cat > "$bad" <<'PAR'
cluster { nodes 1; gpus_per_node 1; gpu { memory 1 GiB; bf16 1 TFLOP/s; hbm 1 TB/s; } }
model m { vocab 256; seq 32; hidden 64; heads 4; ffn 256; layers 4; embed; repeat layers { block gpt2; } norm layer; head untied; loss cross_entropy; }
train { batch 8; micro_batch 2; precision fp32; optimizer adamw lr 1e-3; }
mesh { dp 1; }
layout { heads -> tq; }
PAR
n=$((n + 1))
out=$("$parc" check "$bad" 2>&1); status=$?
if [ "$status" != 1 ] || printf '%s' "$out" | grep -q $'\033'; then
    echo "FAIL colour off when not a terminal: exit $status"; fails=$((fails + 1))
fi
n=$((n + 1))
out=$("$parc" check --color=always "$bad" 2>&1)
if ! printf '%s' "$out" | grep -q $'\033\\[1;31merror:\033\\[0m unknown mesh axis'; then
    echo "FAIL --color=always: no red error: $out" | cat -v; fails=$((fails + 1))
fi
if command -v script >/dev/null; then # a terminal (a pty): colour with auto, not with TERM=dumb or NO_COLOR
    n=$((n + 1))
    out=$(TERM=xterm script -qec "'$parc' check '$bad'" /dev/null 2>&1)
    printf '%s' "$out" | grep -q $'\033\\[1;31merror:' || { echo "FAIL --color=auto on a terminal: no colour"; fails=$((fails + 1)); }
    n=$((n + 1))
    out=$(NO_COLOR=1 TERM=xterm script -qec "'$parc' check '$bad'" /dev/null 2>&1)
    printf '%s' "$out" | grep -q $'\033' && { echo "FAIL NO_COLOR on a terminal: colour"; fails=$((fails + 1)); }
    n=$((n + 1))
    out=$(TERM=xterm script -qec "'$parc' --color=never check '$bad'" /dev/null 2>&1)
    printf '%s' "$out" | grep -q $'\033' && { echo "FAIL --color=never on a terminal: colour"; fails=$((fails + 1)); }
fi
n=$((n + 1))
out=$("$parc" check "$bad" --diagnostics-format=json 2>&1); status=$?
want="{\"file\": \"$bad\", \"line\": 5, \"column\": 19, \"length\": 2, \"severity\": \"error\", \"message\": \"unknown mesh axis \`tq\`\", \"hint\": \"the mesh axes are \`dp\`\"}"
if [ "$status" != 1 ] || [ "$out" != "$want" ]; then
    echo "FAIL json diagnostics: exit $status"; printf 'got  %s\nwant %s\n' "$out" "$want"; fails=$((fails + 1))
fi
if command -v python3 >/dev/null; then
    n=$((n + 1))
    "$parc" check "$examples/../tests/neg/mesh_world.par" --diagnostics-format json 2>&1 |
        python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert len(rows)==4 and all(set(r)=={"file","line","column","length","severity","message","hint"} for r in rows), rows' ||
        { echo "FAIL json diagnostics: not one object per line"; fails=$((fails + 1)); }
fi

# an include of a FIFO is refused at once (it would wait for a writer forever)
mkfifo "$tmp/fifo.par"
printf 'include "fifo.par";\n' > "$tmp/inc_fifo.par"
expect "include of a FIFO" 1 "cannot include .fifo.par.: it is not a regular file" timeout 10 "$parc" check "$tmp/inc_fifo.par"

# runtime options as --name=value too
expect "run --steps=2" 0 "final loss" "$parc" run "$examples/tiny_single.par" --steps=2 --quiet
expect "run: unknown option" 2 "parc run: unknown option .--stpes.; did you mean .--steps." "$parc" run "$examples/tiny_single.par" --stpes 2
# every option of the built program reaches it through parc run
expect "run --log --timeout" 0 "final loss" "$parc" run "$examples/tiny_single.par" --steps 2 --log "$tmp/metrics.jsonl" --timeout=30
n=$((n + 1))
if [ "$(grep -c '"step"' "$tmp/metrics.jsonl" 2>/dev/null)" != 2 ]; then
    echo "FAIL run --log: $tmp/metrics.jsonl holds no line per step"; fails=$((fails + 1))
fi
expect "run --timeout out of range" 2 "timeout" "$parc" run "$examples/tiny_single.par" --steps 1 --timeout -1

# SIGTERM or SIGINT sent to `parc run` reaches mpirun: the job stops within
# seconds, parc exits non-zero, and no rank is left
stop_run() { # signal
    n=$((n + 1))
    local runtmp=$tmp/run-$1 pid status t0 t1
    mkdir -p "$runtmp"
    TMPDIR=$runtmp "$parc" run "$examples/tiny_dp.par" --steps 1000000 > "$runtmp.out" 2>&1 &
    pid=$!
    for _ in $(seq 120); do grep -q "^step" "$runtmp.out" && break; sleep 0.5; done
    if ! pgrep -f "$runtmp/parc-run" >/dev/null; then
        echo "FAIL $1: no rank running before the signal"; tail -5 "$runtmp.out"; fails=$((fails + 1))
        kill -KILL "$pid" 2>/dev/null
        return
    fi
    t0=$(date +%s)
    kill -"$1" "$pid"
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    t1=$(date +%s)
    if kill -0 "$pid" 2>/dev/null; then
        echo "FAIL $1: parc still running after $((t1 - t0)) s"; kill -KILL "$pid"; fails=$((fails + 1))
        return
    fi
    wait "$pid"; status=$?
    sleep 1
    if [ "$status" = 0 ] || pgrep -f "$runtmp/parc-run" >/dev/null; then
        echo "FAIL $1: exit $status, ranks left: $(pgrep -af "$runtmp/parc-run")"; fails=$((fails + 1))
    fi
}
stop_run TERM
stop_run INT

# a rank killed mid-run: every rank stops, non-zero, within seconds, naming the rank
n=$((n + 1))
t0=$(date +%s)
out=$(PRT_TEST_DIE=1:3 timeout 60 "$parc" run "$examples/tiny_3d.par" --steps 8 2>&1); status=$?
t1=$(date +%s)
if [ "$status" = 0 ] || [ "$status" = 124 ] || [ $((t1 - t0)) -gt 30 ] || ! printf '%s\n' "$out" | grep -qiE "rank 1|process rank 1"; then
    echo "FAIL killed rank: exit $status after $((t1 - t0)) s"; printf '%s\n' "$out" | tail -12; fails=$((fails + 1))
fi
echo "cli: $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
