#!/usr/bin/env bash
# gpu_build.sh SOURCE_DIR BUILD_DIR — the GPU-only build (bench/gpu_build/,
# bench/gpu_check.sh's fallback) as a GPU machine without MPI, OpenBLAS, flex,
# bison or LLVM would run it: configured and built in a fresh folder with a
# PATH that holds only cmake, ninja or make, the C compilers, binutils, the
# shell's tools and the CUDA toolkit's bin (no mpicc, mpirun, flex, bison or
# llvm-config), cJSON and zlib taken from the bundle in BUILD_DIR/gpu-bundle.
# Then: both products exist; neither needs MPI, OpenBLAS or LLVM (readelf);
# no object read a header of theirs (the compilers' dependency files); cJSON
# and zlib came from the bundle; and bin/test_gpu_ops runs: on a machine with
# an NVIDIA driver its verdict is this test's, elsewhere it must stop at its
# device probe naming the CUDA error, and the GPU part is reported skipped.
# Exit 0 when all hold, 77 when the build has no CUDA backend.
set -uo pipefail
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
bundle=$build/gpu-bundle
nvcc=$(grep -m1 '^CMAKE_CUDA_COMPILER:' "$build/CMakeCache.txt" | cut -d= -f2)
[ -n "$nvcc" ] && [ -x "$nvcc" ] || { echo "gpu_build: this build has no CUDA compiler: skipped"; exit 77; }
[ -s "$bundle/MANIFEST" ] || { echo "gpu_build: FAIL: no bundle in $bundle (.ci/build makes it)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "gpu_build: FAIL: $*"; fail=1; }

# a PATH of the tools a bare GPU machine has
mkdir -p "$tmp/bin"
for t in cmake ninja make nproc cc gcc g++ c++ cpp as ld ld.bfd ar ranlib nm objdump objcopy readelf strip \
         sh bash env uname sed grep awk cat mkdir rm rmdir cp mv ln ls dirname basename tr cut sort head tail wc \
         expr test true false printf echo touch chmod find xargs date sleep tee which mktemp realpath readlink; do
    p=$(command -v "$t" 2> /dev/null) && ln -s "$p" "$tmp/bin/$t"
done
gen=make; [ -e "$tmp/bin/ninja" ] && gen=Ninja
for t in mpicc mpirun flex bison llvm-config; do
    PATH=$tmp/bin:$(dirname "$nvcc") command -v "$t" > /dev/null && bad "$t is on the restricted PATH"
done
# bench/gpu_build.sh as gpu_check.sh runs it, with nothing but that PATH
if ! env -i HOME="$tmp" PATH="$tmp/bin:$(dirname "$nvcc")" CUDACXX="$nvcc" PYTHON=/nonexistent \
        bash "$src/bench/gpu_build.sh" "$bundle" "$tmp/b" > "$tmp/gpu_build.out" 2>&1; then
    cat "$tmp/gpu_build.out"; tail -30 "$tmp/b.build.log" 2> /dev/null; echo "gpu_build: FAIL: bench/gpu_build.sh"; exit 1
fi
cat "$tmp/gpu_build.out"
ops=$tmp/b/test_gpu_ops module=$tmp/b/libparc_cuda_serial.so
[ -x "$ops" ] && [ -e "$module" ] || { bad "no test_gpu_ops or libparc_cuda_serial.so in the build"; exit 1; }
needed=$(readelf -d "$ops" "$module" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u | tr '\n' ' ')
echo "gpu_build: they need: $needed"
grep -Eq 'libmpi|libopen-pal|libopenblas|libblas|libLLVM|libgfortran' <<< "$needed" && bad "a product needs MPI, a BLAS or LLVM: $needed"
deps=$(find "$tmp/b" -name '*.d' -exec cat {} + 2> /dev/null; [ "$gen" = Ninja ] && (cd "$tmp/b" && ninja -t deps))
[ -n "$deps" ] || bad "no dependency information in the build"
grep -Eq '/(openmpi|openblas[^ ]*|llvm-[0-9]+)/|x86_64-linux-gnu/cblas\.h' <<< "$deps" &&
    bad "an object read a header of MPI, OpenBLAS or LLVM: $(grep -Eo '[^ ]*(openmpi|openblas|llvm-[0-9]+|cblas\.h)[^ ]*' <<< "$deps" | sort -u | head -3 | tr '\n' ' ')"
grep -q 'tests/gpu/refblas/cblas.h' <<< "$deps" || bad "the runtime did not compile against the reference cblas.h"
for v in CJSON_LIBRARY ZLIB_LIBRARY CJSON_INCLUDE_DIR ZLIB_INCLUDE_DIR; do
    grep "^$v:" "$tmp/b/CMakeCache.txt" | grep -q "$bundle" || bad "$v is not the bundle's: $(grep "^$v:" "$tmp/b/CMakeCache.txt")"
done

"$ops" > "$tmp/ops.out" 2>&1; rc=$?
if command -v nvidia-smi > /dev/null 2>&1; then
    tail -1 "$tmp/ops.out"
    [ $rc = 0 ] || [ $rc = 77 ] || bad "test_gpu_ops exit $rc"
else
    line=$(grep -m1 '^test_gpu_ops: ' "$tmp/ops.out")
    if [ $rc = 77 ] || grep -Eq 'cudaError[A-Za-z]+: ' <<< "$line"; then
        echo "gpu_build: test_gpu_ops ran to its device probe; no NVIDIA driver here, the GPU checks are skipped ($line)"
    else
        cat "$tmp/ops.out"; bad "test_gpu_ops (exit $rc) did not reach its device probe"
    fi
fi
echo "gpu_build: $([ $fail = 0 ] && echo ok || echo FAIL)"
exit $fail
