#!/usr/bin/env bash
# labels.sh CTEST BUILD_DIR SUBSYSTEM... — every test ctest knows in BUILD_DIR
# (`ctest -N --show-only=json-v1`) carries exactly one label from SUBSYSTEM...
# (tests/CMakeLists.txt's PARC_TEST_SUBSYSTEMS); other labels beside it, such
# as "compiler", are allowed.  Prints each test that has none or more than one,
# with its labels.  Exit status: 0 all hold, 1 any does not (or ctest lists no
# test), 2 usage.
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: labels.sh CTEST BUILD_DIR SUBSYSTEM..." >&2
    exit 2
fi
ctest=$1 build=$2; shift 2
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
(cd "$build" && "$ctest" -N --show-only=json-v1) > "$tmp"
python3 - "$tmp" "$@" <<'PY'
import json, sys
tests = json.load(open(sys.argv[1])).get("tests", [])
subsystems = set(sys.argv[2:])
bad = 0
for t in tests:
    labels = next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
    mine = [l for l in labels if l in subsystems]
    if len(mine) != 1:
        why = "no subsystem label" if not mine else "%d subsystem labels" % len(mine)
        print("labels: FAIL: %s: %s (labels: %s)" % (t["name"], why, ", ".join(labels) or "none"))
        bad += 1
if not tests:
    print("labels: FAIL: ctest lists no test")
    sys.exit(1)
print("labels: %d tests, %d without exactly one of: %s" % (len(tests), bad, " ".join(sorted(subsystems))))
sys.exit(1 if bad else 0)
PY
