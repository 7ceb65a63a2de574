#!/usr/bin/env bash
# json_finite.sh PARC EXAMPLES_DIR — every JSON report of every example
# (explain --json, collectives --json, search --json) is JSON: it parses
# with NaN and Infinity refused (Python's json module reads them; JSON has
# neither).  Exit status: 0 all held, 1 any did not.
set -u
parc=$(realpath "$1"); examples=$(realpath "$2")
python3 - "$parc" "$examples" <<'PY'
import glob, json, os, subprocess, sys
parc, examples = sys.argv[1], sys.argv[2]

def refuse(name):
    raise ValueError(f"bare {name}")

fails = checked = 0
for plan in sorted(glob.glob(os.path.join(examples, "*.par"))):
    for args in (["explain", plan, "--json"], ["collectives", plan, "--json"], ["search", plan, "--json", "--top", "2"]):
        r = subprocess.run([parc, *args], capture_output=True, text=True, timeout=600)
        if not r.stdout.strip():
            continue  # a plan with errors prints none (its exit status and message are other tests')
        checked += 1
        try:
            json.loads(r.stdout, parse_constant=refuse)
        except ValueError as e:
            print(f"FAIL: parc {' '.join(args)}: not JSON: {e}")
            fails += 1
print(f"json_finite: {checked} reports parsed, {fails} failed")
sys.exit(1 if fails or not checked else 0)
PY
