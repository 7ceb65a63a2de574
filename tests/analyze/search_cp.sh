#!/usr/bin/env bash
# search_cp.sh PARC EXAMPLES — `parc search` considers context parallelism for a long
# sequence: on llama3_70b_128k (131,072 tokens, 512 GPUs) it ranks layouts with a cp
# axis in both forms (the all-gather and ring attention), its #1 among them, every one of them
# lowered to its own figures (the
# written plan of #1 explains to the same step time), and the plan's own layout
# (pp 4 x cp 16 x tp 8) ranked; on a short sequence it adds no cp axis.
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
own = [r["rank"] for r in top if (r["pp"], r["dp"], r["cp"], r["tp"], r["cp_comm"]) == (4, 1, 16, 8, "allgather")]
forms = {r["cp_comm"] for r in cp}
bad = []
if not top or top[0]["cp"] <= 1:
    bad.append(f"#1 has no context axis: {top[0] if top else None}")
if len(cp) < len(top) // 2:
    bad.append(f"only {len(cp)} of {len(top)} ranked layouts split the sequence")
if not own:
    bad.append("the plan's own layout (pp 4 x cp 16 x tp 8, the all-gather form) is not ranked")
if forms != {"allgather", "ring"}:
    bad.append(f"the ranked cp layouts use {sorted(forms)}, not both the all-gather form and ring attention")
for b in bad:
    print("FAIL: llama3_70b_128k:", b)
if not bad:
    r = top[0]
    print(f"llama3_70b_128k: #1 pp {r['pp']} dp {r['dp']} cp {r['cp']} tp {r['tp']}, step {r['step_time_s']:.4g} s; "
          f"{r['cp_comm']}; {len(cp)} of {len(top)} ranked layouts split the sequence; the plan's own is #{own[0]}")
sys.exit(1 if bad else 0)
PY
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
