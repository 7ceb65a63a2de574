#!/usr/bin/env bash
# gpu_build.sh BUNDLE OUT — the GPU-only build (bench/gpu_build/CMakeLists.txt):
# the CUDA module libparc_cuda_serial.so and test_gpu_ops compiled here with
# cmake and nvcc, for a GPU machine where the bundle's own builds will not run
# (bench/gpu_check.sh's fallback).  No MPI, BLAS, flex, bison or LLVM needed;
# cJSON and zlib from the machine or from BUNDLE (dev/include, lib/).
# nvcc: CUDACXX, else nvcc on PATH, else CUDA_HOME/bin/nvcc (default
# /usr/local/cuda).  NCCL: NCCL_ROOT, else the nvidia-nccl wheel that python3
# (PYTHON) finds, else the toolkit's.  Ninja when it is on PATH.  Prints what
# it found and built; exits nonzero naming the step that failed (its log is
# OUT.configure.log / OUT.build.log).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$1 out=$2
nvcc=${CUDACXX:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
[ -x "$nvcc" ] || { echo "gpu_build: no nvcc (CUDACXX, PATH, ${CUDA_HOME:-/usr/local/cuda}/bin)"; exit 1; }
nccl=${NCCL_ROOT:-$("${PYTHON:-python3}" -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2> /dev/null)}
gen=(); command -v ninja > /dev/null && gen=(-G Ninja)
rm -rf "$out"
if ! cmake -S "$root/bench/gpu_build" -B "$out" "${gen[@]}" -DCMAKE_CUDA_COMPILER="$nvcc" -DPARC_GPU_DEPS="$bundle" \
        ${nccl:+-DNCCL_ROOT="$nccl"} > "$out.configure.log" 2>&1; then
    tail -15 "$out.configure.log"; echo "gpu_build: configure failed ($out.configure.log)"; exit 1
fi
grep '^-- parc GPU-only build' "$out.configure.log"
if ! cmake --build "$out" -j "$(nproc)" > "$out.build.log" 2>&1; then
    grep -m5 -E 'error|Error' "$out.build.log"; echo "gpu_build: build failed ($out.build.log)"; exit 1
fi
echo "gpu_build: $out/libparc_cuda_serial.so $out/test_gpu_ops"
