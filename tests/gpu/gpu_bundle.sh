#!/usr/bin/env bash
# gpu_bundle.sh BUILD_DIR — the bundle bench/gpu_check.sh runs from
# (bench/gpu_bundle.sh; .ci/build makes it in BUILD_DIR/gpu-bundle):
#   1. it exists (built by CI's build), is at most 64 MiB, and MANIFEST's sizes
#      and hashes match its files;
#   2. its programs need no MPI; the CUDA module needs cudart, cuBLAS and NCCL
#      (found on the GPU machine) and nothing else outside the bundle but
#      glibc, libgcc_s and libstdc++;
#   3. its CPU parts run in a root holding only the bundle and those base
#      libraries (chroot): tiny_single and tiny_bf16 train 3 steps on the CPU
#      with falling loss; --device cuda there exits 2 naming what it could
#      not load (the toolkit is not in that root); parc_calibrate --device cpu
#      writes a one-rank fragment there, and --device cuda is refused in one
#      line naming libcudart.
# Exit 0 when all hold; 77 when the build has no CUDA backend (no bundle to
# make) or part 3 cannot chroot here.
set -uo pipefail
build=$(cd "$1" && pwd)
bundle=$build/gpu-bundle
[ -e "$build/libparc_cuda_serial.so" ] || { echo "gpu_bundle: the CUDA backend is OFF in this build: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "gpu_bundle: FAIL: $*"; fail=1; }

[ -s "$bundle/MANIFEST" ] || { echo "gpu_bundle: FAIL: no $bundle/MANIFEST: .ci/build did not make the bundle"; exit 1; }
bytes=$(du -sb "$bundle" | cut -f1)
echo "gpu_bundle: $bundle: $bytes bytes"
[ "$bytes" -le $((64 * 1048576)) ] || bad "$bytes bytes, over 64 MiB"
listed=0
while read -r size hash file; do
    listed=$((listed + 1))
    [ -f "$bundle/$file" ] || { bad "MANIFEST lists $file, absent"; continue; }
    [ "$(stat -c %s "$bundle/$file")" = "$size" ] || bad "$file: size differs from MANIFEST"
    [ "$(sha256sum "$bundle/$file" | cut -c1-16)" = "$hash" ] || bad "$file: hash differs from MANIFEST"
done < <(grep -E '^ *[0-9]+ [0-9a-f]{16} ' "$bundle/MANIFEST")
[ "$listed" = "$(cd "$bundle" && find bin lib dev -type f | wc -l)" ] || bad "MANIFEST lists $listed files, the bundle holds others"
for p in tiny_single tiny_bf16 gpt2_124m_gpu test_gpu_ops parc_calibrate; do
    [ -x "$bundle/bin/$p" ] || { bad "no bin/$p"; continue; }
    readelf -d "$bundle/bin/$p" | grep NEEDED | grep -Eq 'libmpi|libopen-pal' && bad "bin/$p needs MPI"
done

base='^(ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so'
device='^(libcudart|libcublas|libcublasLt|libnccl)\.so'
outside=$(for f in "$bundle"/bin/* "$bundle"/lib/*; do
    LD_LIBRARY_PATH=$bundle/lib ldd "$f" | awk '$2 == "=>" { print $1, $3 }'; done | sort -u |
    while read -r lib path; do
        [[ $lib =~ $base || $lib =~ $device || $path == "$bundle"/* ]] || echo "$lib"; done)
[ -z "$outside" ] || bad "needed from outside the bundle: $outside"
readelf -d "$bundle/lib/libparc_cuda_serial.so" | grep NEEDED | grep -q libcudart || bad "the CUDA module needs no cudart?"

# 3. a root with the bundle and the base libraries only
chroot=$(PATH=$PATH:/usr/sbin:/sbin command -v chroot)
if [ -z "$chroot" ]; then echo "gpu_bundle: no chroot: part 3 skipped"; exit $((fail ? 1 : 77))
elif [ "$(id -u)" = 0 ]; then enter=("$chroot" "$tmp/root")
elif unshare -r true 2> /dev/null; then enter=("$(command -v unshare)" -r "$chroot" "$tmp/root")
else echo "gpu_bundle: not root and no user namespaces: part 3 skipped"; exit $((fail ? 1 : 77)); fi
mkdir -p "$tmp/root/base" "$tmp/root/tmp"
cp -a "$bundle" "$tmp/root/bundle"
loader=
for lib in $(LD_LIBRARY_PATH=$bundle/lib ldd "$bundle"/bin/* "$bundle"/lib/libparc_cuda_serial.so 2> /dev/null |
             awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | sort -u); do
    name=$(basename "$lib")
    [[ $lib == "$bundle"/* ]] && continue
    if [[ $name == ld-linux* ]]; then loader=$lib; mkdir -p "$tmp/root$(dirname "$lib")"; cp -L "$lib" "$tmp/root$lib"
    elif [[ $name =~ $base ]]; then cp -L "$lib" "$tmp/root/base/"; fi
done
[ -n "$loader" ] || { echo "gpu_bundle: FAIL: no dynamic loader found"; exit 1; }
echo "gpu_bundle: the root holds $(ls "$tmp/root/base" | tr '\n' ' ')and the bundle"
run() {  # program args...: in the root, the bundle's and the base libraries only
    env -i OPENBLAS_NUM_THREADS=1 PRT_LOSS_FILE=/tmp/loss "${enter[@]}" "$loader" --library-path /bundle/lib:/base \
        "/bundle/bin/$@"
}
for p in tiny_single tiny_bf16; do
    rm -f "$tmp/root/tmp/loss"
    run "$p" --steps 3 --quiet > "$tmp/$p.out" 2>&1; rc=$?
    cat "$tmp/$p.out"
    [ $rc = 0 ] || { bad "$p on the CPU in the bare root: exit $rc"; continue; }
    awk 'NR == 1 { first = $2 } { last = $2; n++ } END { exit !(n == 3 && last < first) }' "$tmp/root/tmp/loss" ||
        bad "$p: loss not 3 falling steps: $(tr '\n' ' ' < "$tmp/root/tmp/loss")"
done
run tiny_single --steps 1 --device cuda > "$tmp/cuda.out" 2>&1; rc=$?
head -1 "$tmp/cuda.out"
[ $rc = 2 ] || bad "--device cuda without the toolkit: exit $rc, want 2"
grep -q "cannot load the CUDA backend libparc_cuda_serial.so: .*libcudart" "$tmp/cuda.out" ||
    bad "--device cuda without the toolkit: the message does not name libcudart"
# parc_calibrate: the fragment through the CPU backend in the bare root, and
# --device cuda there refused in one line naming what it could not load
run parc_calibrate --device cpu /tmp/cal.par > "$tmp/cal.out" 2>&1; rc=$?
[ $rc = 0 ] || bad "parc_calibrate --device cpu in the bare root: exit $rc: $(tail -3 "$tmp/cal.out")"
grep -q '^# Fragment (not a plan), written by `parc calibrate --device cpu`' "$tmp/root/tmp/cal.par" 2> /dev/null &&
    grep -q "backend (.*), 1 rank measuring at once" "$tmp/root/tmp/cal.par" &&
    grep -q '^gpu { memory [0-9]* B; bf16 .* FLOP/s; fp32 .* FLOP/s; hbm .* B/s; }$' "$tmp/root/tmp/cal.par" &&
    grep -q '^efficiency { gemm [0-9.]* [0-9.]* [0-9.]* [0-9.]*; attention ' "$tmp/root/tmp/cal.par" ||
    bad "parc_calibrate --device cpu wrote no one-rank fragment: $(head -c 300 "$tmp/root/tmp/cal.par" 2> /dev/null)"
run parc_calibrate --device cuda /tmp/cal2.par > "$tmp/cal2.out" 2>&1; rc=$?
[ $rc = 2 ] && [ "$(wc -l < "$tmp/cal2.out")" = 1 ] && grep -q "cannot load the CUDA backend libparc_cuda_serial.so: .*libcudart" "$tmp/cal2.out" ||
    bad "parc_calibrate --device cuda without the toolkit: exit $rc, not one line naming libcudart: $(head -3 "$tmp/cal2.out")"
[ -e "$tmp/root/tmp/cal2.par" ] && bad "parc_calibrate --device cuda wrote a fragment it did not measure"
[ $fail = 0 ] && echo "gpu_bundle: ok"
exit $fail
