#!/usr/bin/env bash
# Regenerates docs/report.png, the README's picture of a plan report: the
# report of docs/report.par rendered by headless Chromium.
#   tests/html/screenshot.sh [PARC] [OUT.png]   (defaults: build/parc, docs/report.png)
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
