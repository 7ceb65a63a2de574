#!/usr/bin/env bash
# search_cp.sh PARC EXAMPLES — `parc search` considers context parallelism for a long
# sequence: on llama3_70b_128k (131,072 tokens, 512 GPUs) it ranks layouts with a cp
# axis, ring attention among them, its #1 among them, every one of them lowered to its
# own figures (the written plan of #1 explains to the same step time and says
# `cp_comm ring` when #1 is ring attention), and the plan's own layout (pp 4 x cp 16 x
# tp 8, the all-gather form) ranked; on a short sequence it adds no cp axis.
set -u
parc=$1; examples=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
"$parc" search "$examples/llama3_70b_128k.par" --top 500 --json -o "$tmp/plans" > "$tmp/long.json" || { echo "FAIL: search exited $?"; exit 1; }
python3 - "$tmp/long.json" <<'PY' || fails=$((fails + 1))
import json, sys
d = json.load(open(sys.argv[1]))
top = d["top"]
cp = [r for r in top if r["cp"] > 1]
forms = {r["cp_comm"] for r in cp}
bad = []
if not top or top[0]["cp"] <= 1:
    bad.append(f"#1 has no context axis: {top[0] if top else None}")
if len(cp) < len(top) // 2:
    bad.append(f"only {len(cp)} of {len(top)} ranked layouts split the sequence")
if "ring" not in forms:
    bad.append(f"the ranked cp layouts use {sorted(forms)}, no ring attention")
for b in bad:
    print("FAIL: llama3_70b_128k:", b)
if not bad:
    r = top[0]
    print(f"llama3_70b_128k: #1 pp {r['pp']} dp {r['dp']} cp {r['cp']} tp {r['tp']}, step {r['step_time_s']:.4g} s; "
          f"{r['cp_comm']}; {len(cp)} of {len(top)} listed layouts split the sequence ({sorted(forms)})")
sys.exit(1 if bad else 0)
PY
# the plan's own layout (pp 4 x cp 16 x tp 8, the all-gather form) is lowered and ranked
own=$("$parc" search "$examples/llama3_70b_128k.par" --top 3 2>/dev/null | grep "the plan's own layout (pp 4 dp 1 cp 16 (all-gather) tp 8")
case "$own" in
    *"ranked exactly"*) echo "${own%%:*}";;
    *) echo "FAIL: the plan's own layout (pp 4 x cp 16 x tp 8) is not ranked: ${own:-no line}"; fails=$((fails + 1));;
esac
step=$(python3 -c "import json,sys; print('%.6g' % json.load(open(sys.argv[1]))['top'][0]['step_time_s'])" "$tmp/long.json")
got=$("$parc" explain "$tmp/plans/1.par" --json | python3 -c "import json,sys; print('%.6g' % json.load(sys.stdin)['step_time_s'])")
if [ "$got" != "$step" ]; then echo "FAIL: #1's written plan explains to $got s, the search said $step s"; fails=$((fails + 1)); fi
grep -q "seq -> cp" "$tmp/plans/1.par" || { echo "FAIL: #1's written plan has no seq -> cp rule"; fails=$((fails + 1)); }
form=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['top'][0]['cp_comm'])" "$tmp/long.json")
if [ "$form" = ring ] && ! grep -q "cp_comm ring" "$tmp/plans/1.par"; then
    echo "FAIL: #1 is ring attention, its written plan has no cp_comm ring"; fails=$((fails + 1)); fi
# a short sequence: no layout splits it
"$parc" search "$examples/llama2_7b.par" --top 100 --json > "$tmp/short.json" || { echo "FAIL: search exited $?"; exit 1; }
python3 -c "
import json, sys
top = json.load(open(sys.argv[1]))['top']
n = sum(1 for r in top if r['cp'] > 1)
print(('FAIL: ' if n else '') + f'llama2_7b (seq 4096): {n} of {len(top)} ranked layouts split the sequence')
sys.exit(1 if n else 0)" "$tmp/short.json" || fails=$((fails + 1))
[ "$fails" = 0 ]
