#!/usr/bin/env bash
# gpu_bundle.sh [BUILD_DIR [OUT_DIR]] — everything bench/gpu_check.sh runs on a
# GPU machine that has the NVIDIA driver, the CUDA toolkit and python3 with
# PyTorch and NCCL's wheel, but no MPI, no OpenBLAS and nothing to build parc
# with.  Built from BUILD_DIR (default build/, which .ci/build makes with the
# CUDA backend) into OUT_DIR (default BUILD_DIR/gpu-bundle):
#   bin/   the check's plans as one-rank programs (the single-process runtime:
#          no MPI), each also the CPU reference of itself (--device cpu),
#          test_gpu_ops (every CUDA op against the CPU path) and
#          parc_calibrate (`parc calibrate --device DEV` on one rank without
#          MPI: parc_calibrate --device cuda OUT.par writes the GPU's cluster
#          fragment);
#   lib/   the CUDA backend module (libparc_cuda_serial.so, dlopened for
#          --device cuda) and every library those need that is not glibc's,
#          GCC's (libgcc_s, libstdc++) or the CUDA toolkit's and NCCL's, which
#          the GPU machine has and gpu_check.sh puts on LD_LIBRARY_PATH;
#   dev/include  the headers of cJSON and zlib (Debian's), which the GPU-only
#          build (bench/gpu_build/, gpu_check.sh's fallback) compiles the runtime
#          against on a machine without them; their libraries are in lib/;
#   MANIFEST  the commit, the plans, each file's size and sha256, and what
#          lib/'s module needs at run time.
# Debug sections are stripped from parc's own files.  Prints the bundle's size;
# fails when any file cannot be built or found, or when the bundle is over
# 64 MiB (what a device run carries).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$build/gpu-bundle}
die() { echo "gpu_bundle: $*" >&2; exit 1; }
parc=$build/parc
module=$build/libparc_cuda_serial.so
ops=$build/tests/gpu_test_gpu_ops
[ -x "$parc" ] || die "no $parc: build parc first (.ci/build)"
# parc hands `parc build` to parc-codegen beside it (the compiler linked with LLVM)
[ -x "$build/parc-codegen" ] || die "no $build/parc-codegen, which parc runs to build programs: build parc first (.ci/build)"
[ -e "$module" ] || die "no $module: this build has the CUDA backend OFF (see $build.configure.log)"
[ -x "$ops" ] || die "no $ops"
calib=$build/calibrate/parc_calibrate_serial
[ -x "$calib" ] || die "no $calib"
plans=(examples/tiny_single.par examples/tiny_bf16.par bench/plans/gpt2_124m_gpu.par)

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for p in "${plans[@]}"; do
    name=$(basename "$p" .par)
    "$parc" build "$root/$p" -o "$out/bin/$name" > "$out/build.log" 2>&1 || { cat "$out/build.log"; die "parc build $p failed"; }
    readelf -d "$out/bin/$name" | grep NEEDED | grep -q libmpi && die "$p: the program needs MPI (not a one-rank plan?)"
done
rm -f "$out/build.log"
cp "$ops" "$out/bin/test_gpu_ops"
cp "$calib" "$out/bin/parc_calibrate"
cp "$module" "$out/lib/"
strip --strip-debug "$out"/bin/* "$out"/lib/*

# the libraries they need beyond the GPU machine's own
system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so'
device='^(libcudart|libcublas|libcublasLt|libnccl|libcuda|libnvidia-[a-z]*)\.so'
for f in "$out"/bin/* "$out"/lib/*; do
    ldd "$f" | awk '$2 == "=>" { print $1, $3 }' | while read -r lib path; do
        if [[ $lib =~ $system || $lib =~ $device ]]; then continue; fi
        [ "$path" != "not" ] || die "$f needs $lib, which this machine does not have"
        [ -e "$out/lib/$lib" ] || [ -e "$out/bin/$lib" ] || cp -L "$path" "$out/lib/$lib"
    done
done

# headers for the GPU-only build; it links lib/'s libcjson.so.1 and libz.so.1
mkdir -p "$out/dev/include/cjson"
for h in cjson/cJSON.h zlib.h zconf.h; do
    src=$(echo '#include <'"$h"'>' | cc -E -H -x c - 2>&1 > /dev/null | sed -n "s/^\. //p" | grep "/$h\$" | head -1)
    [ -n "$src" ] && [ -f "$src" ] || die "no $h on this machine (libcjson-dev, zlib1g-dev)"
    cp "$src" "$out/dev/include/$h"
done
for lib in libcjson.so.1 libz.so.1; do
    [ -e "$out/lib/$lib" ] || die "lib/ lacks $lib, which the GPU-only build links"
done

{
    echo "gpu bundle of parc $(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" diff --quiet 2>/dev/null || echo +dirty), built $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "plans: ${plans[*]}"
    echo "the module needs at run time: $(readelf -d "$out/lib/libparc_cuda_serial.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    (cd "$out" && find bin lib dev -type f | sort | while read -r f; do
        printf '%10d %s %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "$f"; done)
} > "$out/MANIFEST"
bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "gpu_bundle: $out: $(find "$out" -type f | wc -l) files, $mib MiB ($bytes bytes; limit 64 MiB)"
[ "$bytes" -le $((64 * 1048576)) ] || die "the bundle is $mib MiB, over 64 MiB"
