#!/usr/bin/env bash
# serial.sh PARC — a one-rank plan builds into a program that needs no MPI and
# no CUDA library, and runs as ./plan where neither is installed:
#   1. its dynamic dependencies (readelf's NEEDED, ldd's closure) name no MPI
#      (libmpi, libopen-pal, libopen-rte) and no CUDA library (cudart, cuBLAS,
#      NCCL); a two-rank plan's do name libmpi (the check can fail);
#   2. it runs in a root directory that holds only it and the libraries ldd
#      lists (chroot, as root or in a user namespace): the loss curve equals the
#      run outside (both with an empty environment), line for line; --device cuda there fails with exit 2 and
#      names the CUDA module it could not load.
# Exit 0 when all hold; 77 (skipped) only when 1 holds and 2 cannot run here
# (no chroot, or a sanitized build whose runtime needs /proc).
set -uo pipefail
parc=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "serial: FAIL: $*"; fail=1; }

"$parc" build "$root/examples/tiny_single.par" -o "$tmp/single" || { echo "serial: FAIL: build"; exit 1; }
"$parc" build "$root/examples/tiny_dp.par" -o "$tmp/dp" || { echo "serial: FAIL: build dp"; exit 1; }
forbidden='libmpi|libopen-pal|libopen-rte|libcudart|libcublas|libnccl|libcuda\.'
needed=$(readelf -d "$tmp/single" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "serial: tiny_single NEEDED: $needed"
echo "$needed" | grep -Eq "$forbidden" && bad "tiny_single needs $(echo "$needed" | grep -Eo "$forbidden" | head -1)"
ldd "$tmp/single" > "$tmp/ldd" || bad "ldd failed"
grep -Eq "$forbidden" "$tmp/ldd" && bad "ldd of tiny_single lists $(grep -Eo "$forbidden" "$tmp/ldd" | head -1)"
grep -q "not found" "$tmp/ldd" && bad "ldd of tiny_single: $(grep 'not found' "$tmp/ldd")"
readelf -d "$tmp/dp" | grep NEEDED | grep -q libmpi || bad "tiny_dp (2 ranks) does not need libmpi: the check above proves nothing"

# 2. a root with nothing but the program and its libraries
if echo "$needed" | grep -q libasan; then  # the sanitizers' runtime reads /proc, absent there
    echo "serial: sanitized build: part 2 skipped"; exit $((fail ? 1 : 77))
fi
jail=$tmp/jail
mkdir -p "$jail/lib" "$jail/tmp"
cp "$tmp/single" "$jail/single"
for lib in $(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' "$tmp/ldd"); do
    cp -L "$lib" "$jail/lib/"
done
loader=$(awk '$1 ~ /^\// && $1 ~ /ld-linux/ { print $1 }' "$tmp/ldd")
[ -n "$loader" ] || { echo "serial: FAIL: no dynamic loader in ldd's list"; exit 1; }
mkdir -p "$jail$(dirname "$loader")" && cp -L "$loader" "$jail$loader"
chroot=$(PATH=$PATH:/usr/sbin:/sbin command -v chroot)
if [ -z "$chroot" ]; then echo "serial: no chroot program: part 2 skipped"; exit $((fail ? 1 : 77))
elif [ "$(id -u)" = 0 ]; then enter=("$chroot" "$jail")
elif unshare -r true 2> /dev/null; then enter=("$(command -v unshare)" -r "$chroot" "$jail")
else echo "serial: no chroot possible here (not root, no user namespaces): part 2 skipped"; exit $((fail ? 1 : 77)); fi
# both runs on one kernel family: the bare root has no /proc, so the runtime
# cannot restart itself there with the family its start-up check picks
# (runtime/prt_blas.c); the family it picks outside is given to both
core=$(env -i OPENBLAS_NUM_THREADS=1 "$tmp/single" --steps 1 2>&1 |
    sed -n 's/.*restarted with OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' | head -1)
kernels=(${core:+OPENBLAS_CORETYPE=$core})
env -i PRT_LOSS_FILE=$tmp/out.loss OPENBLAS_NUM_THREADS=1 "${kernels[@]}" "$tmp/single" --steps 4 --quiet > /dev/null ||
    bad "run outside failed"
env -i PRT_LOSS_FILE=/tmp/in.loss OPENBLAS_NUM_THREADS=1 "${kernels[@]}" "${enter[@]}" "$loader" --library-path /lib /single --steps 4 \
    > "$tmp/in.out" 2>&1; rc=$?
cat "$tmp/in.out"
[ $rc = 0 ] || bad "run with only $(ls "$jail/lib" | tr '\n' ' ')exited $rc"
if [ -s "$jail/tmp/in.loss" ] && [ "$(wc -l < "$jail/tmp/in.loss")" = 4 ]; then
    cmp -s "$tmp/out.loss" "$jail/tmp/in.loss" || bad "loss curves differ: $(paste "$tmp/out.loss" "$jail/tmp/in.loss" | head -4)"
else bad "no 4-line loss file from the run in the bare root"; fi
env -i "${enter[@]}" "$loader" --library-path /lib /single --steps 1 --device cuda > "$tmp/cuda.out" 2>&1; rc=$?
head -1 "$tmp/cuda.out"
if [ -e "$(dirname "$parc")/libparc_cuda_serial.so" ]; then
    [ $rc = 2 ] || bad "--device cuda without the CUDA module: exit $rc, want 2"
    grep -q "cannot load the CUDA backend libparc_cuda_serial.so" "$tmp/cuda.out" ||
        bad "--device cuda: no message naming the module it could not load"
else
    grep -q "this program was linked with the CPU runtime" "$tmp/cuda.out" || bad "--device cuda: no message saying why"
fi
[ $fail = 0 ] && echo "serial: ok"
exit $fail
