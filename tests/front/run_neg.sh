#!/usr/bin/env bash
# run_neg.sh PARC_BINARY FILE... — negative tests through the `parc check` CLI.
#
# Each FILE carries its expectations next to the offending line:
#   heads -> tp;   # error: heads = 32 does not divide by tp = 12
#   heads 32;      # warning: `heads` is unused
#   # error@file: the plan has no `mesh` section        (a diagnostic without a line)
# A line may carry several (`# error: A # error: B`).  The test passes when
# `parc check FILE` exits with status 1, every expectation is matched by a
# diagnostic of that level AT THAT LINE whose message contains the text, and
# every error/warning parc reports is expected.  Exit status: 0 all passed,
# 1 any mismatch (each one printed), 2 usage.
set -u
if [ $# -lt 2 ]; then
    echo "usage: run_neg.sh PARC_BINARY FILE..." >&2
    exit 2
fi
parc=$1
shift
if [ ! -x "$parc" ]; then
    echo "run_neg.sh: $parc is not an executable" >&2
    exit 1
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
files=0
failed=0
for f in "$@"; do
    files=$((files + 1))
    timeout 60 "$parc" check "$f" >"$tmp" 2>&1
    rc=$?
    ok=1
    if [ "$rc" -ne 1 ]; then
        echo "FAIL $f: \`parc check\` exited with status $rc, expected 1"
        ok=0
    fi
    if ! awk -v file="$f" '
        # First input: the .par file, for its expectations.
        FNR == NR {
            line = $0
            while (match(line, /# (error@file|error|warning):/)) {
                tag = substr(line, RSTART + 2, RLENGTH - 3)
                rest = substr(line, RSTART + RLENGTH)
                sub(/^ +/, "", rest)
                text = rest
                cut = index(text, " # ")
                if (cut > 0) text = substr(text, 1, cut - 1)
                sub(/[ \r]+$/, "", text)
                ne++
                eline[ne] = tag == "error@file" ? 0 : FNR
                elevel[ne] = tag == "warning" ? "warning" : "error"
                etext[ne] = text
                line = rest
            }
            next
        }
        # Second input: what parc printed.
        {
            prefix = file ":"
            if (substr($0, 1, length(prefix)) != prefix) {
                if ($0 ~ /^[^ ].*(error|warning): /) { print "FAIL " file ": unexpected diagnostic: " $0; bad = 1 }
                next
            }
            rest = substr($0, length(prefix) + 1)
            ln = 0
            if (match(rest, /^[0-9]+:[0-9]+: /)) {
                split(rest, parts, ":")
                ln = parts[1] + 0
                rest = substr(rest, RLENGTH + 1)
            } else if (substr(rest, 1, 1) == " ") {
                rest = substr(rest, 2)
            }
            if (rest ~ /^error: /) { level = "error"; msg = substr(rest, 8) }
            else if (rest ~ /^warning: /) { level = "warning"; msg = substr(rest, 10) }
            else next
            found = 0
            for (i = 1; i <= ne; i++)
                if (eline[i] == ln && elevel[i] == level && index(msg, etext[i]) > 0) { matched[i] = 1; found = 1 }
            if (!found) { print "FAIL " file ":" ln ": unexpected " level ": " msg; bad = 1 }
        }
        END {
            if (ne == 0) { print "FAIL " file ": no `# error:` expectations in the file"; bad = 1 }
            for (i = 1; i <= ne; i++)
                if (!matched[i]) {
                    print "FAIL " file ":" eline[i] ": expected " elevel[i] " containing \"" etext[i] "\" was not reported"
                    bad = 1
                }
            exit bad
        }' "$f" "$tmp"; then
        ok=0
    fi
    if [ "$ok" -ne 1 ]; then
        failed=$((failed + 1))
        echo "---- parc check $f printed:"
        cat "$tmp"
        echo "----"
    fi
done
echo "run_neg.sh: $files files, $failed failed"
[ "$failed" -eq 0 ]
