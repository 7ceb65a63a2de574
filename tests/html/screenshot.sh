#!/usr/bin/env bash
# Regenerates docs/report.png, the README's picture of a plan report: the
# report of docs/report.par rendered by headless Chromium.  Given RUN.png, also
# a picture of a run report: examples/tiny_pp_interleaved.par trained for 3
# steps with --trace on this machine (mpirun), then `parc report --html`.
#   tests/html/screenshot.sh [PARC] [OUT.png] [RUN.png]   (defaults: build/parc, docs/report.png)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
parc=${1:-$root/build/parc}
out=${2:-$root/docs/report.png}
browser=${PARC_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$browser" ] || { echo "screenshot.sh: chromium is not installed (apt-get install chromium)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# run from the root so the page names the plan by its path in the tree
(cd "$root" && "$parc" explain docs/report.par --html "$tmp/report.html")
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$tmp/profile" \
    --window-size=1400,1580 --screenshot="$out" "file://$tmp/report.html" 2>/dev/null
[ -s "$out" ] || { echo "screenshot.sh: chromium wrote no $out" >&2; exit 1; }
echo "screenshot.sh: wrote $out"
run_out=${3:-}
[ -n "$run_out" ] || exit 0
plan=examples/tiny_pp_interleaved.par
(cd "$root" && "$parc" run "$plan" --steps 3 --quiet --trace "$tmp/trace.json" > "$tmp/run.log" 2>&1) ||
    { cat "$tmp/run.log" >&2; echo "screenshot.sh: the traced run failed" >&2; exit 1; }
(cd "$root" && "$parc" report "$tmp/trace.json" --plan "$plan" --html "$tmp/run.html" > /dev/null)
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$tmp/profile" \
    --window-size=1400,1300 --screenshot="$run_out" "file://$tmp/run.html" 2>/dev/null
[ -s "$run_out" ] || { echo "screenshot.sh: chromium wrote no $run_out" >&2; exit 1; }
echo "screenshot.sh: wrote $run_out"
