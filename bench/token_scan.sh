#!/usr/bin/env bash
# token_scan.sh [build/parc] [GiB] — how long a built program's start-up check of
# a token file takes (every token below the vocab, each rank scanning 1/world of
# the file with pread), against two peers timed in the same run on the same
# file, warm in the page cache: numpy's max over np.memmap (what a Python loader
# would do once) and `cat FILE > /dev/null` (reading the bytes, nothing else).
# Prints seconds and ratios; passes or fails nothing.
set -eu
parc=$(realpath "${1:-build/parc}")
gib=${2:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$tmp/tokens.u16" "$gib" <<'PY'
import sys, numpy as np
path, gib = sys.argv[1], float(sys.argv[2])
n, rng = int(gib * (1 << 30)) // 2, np.random.default_rng(5)
with open(path, "wb") as f:
    for at in range(0, n, 1 << 25):
        f.write(rng.integers(0, 256, size=min(1 << 25, n - at), dtype=np.uint16).tobytes())
PY
cat "$tmp/tokens.u16" > /dev/null   # warm the page cache for every reader
"$parc" build "$root/examples/tiny_single.par" -o "$tmp/single" > /dev/null
"$parc" build "$root/examples/tiny_dp.par" -o "$tmp/dp" > /dev/null
check() { # ranks exe -> seconds of the start-up check
    mpirun -np "$1" --oversubscribe "$2" --steps 1 --data "$tmp/tokens.u16" --data-format u16 |
        sed -n 's/^parc: data checked in \([0-9.]*\) s.*/\1/p'
}
one=$(check 1 "$tmp/single"); two=$(check 2 "$tmp/dp")
numpy=$(/usr/bin/python3 -c "
import sys, time, numpy as np
t = time.perf_counter(); m = int(np.memmap(sys.argv[1], dtype=np.uint16, mode='r').max())
print(f'{time.perf_counter() - t:.3f}')" "$tmp/tokens.u16")
t0=$(date +%s.%N); cat "$tmp/tokens.u16" > /dev/null; t1=$(date +%s.%N)
catsec=$(echo "$t1 - $t0" | bc -l)
printf 'token file: %s GiB of u16 tokens, warm page cache, %s\n' "$gib" "$(nproc) cores"
printf '%-34s %8s %12s %12s\n' "reader" "seconds" "vs numpy" "vs cat"
for row in "parc start-up check, 1 rank:$one" "parc start-up check, 2 ranks:$two" "numpy memmap max:$numpy" \
           "cat > /dev/null:$catsec"; do
    name=${row%%:*}; s=${row##*:}
    printf '%-34s %8.3f %11.2fx %11.2fx\n' "$name" "$s" "$(echo "$s / $numpy" | bc -l)" "$(echo "$s / $catsec" | bc -l)"
done
