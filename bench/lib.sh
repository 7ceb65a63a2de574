# bench/lib.sh — what the training benchmarks share (sourced, not run).
#
# median_ms FILE...: the median of the `| X ms` column of the `step N | ...` /
#   `step N/TOTAL | ...` lines a program prints, over steps N >= 3 (the first
#   two warm the caches and the BLAS); "nan" when there is none.
# toks TOKENS MS: tokens per second of a step of TOKENS tokens in MS ms ("n/a"
#   when MS is not a time).
# same_kernels PROG: exports OPENBLAS_CORETYPE as the kernel family parc's
#   start-up check runs (runtime/prt_blas.c) when PROG, a one-rank program, is
#   started once, so that every run after it, torch's included, computes with
#   the same kernels: OpenBLAS alone picks an older family on CPUs it does not
#   know, and torch would be measured on it.  An OPENBLAS_CORETYPE in the
#   environment is set aside first (said in the line): an inherited Haswell
#   on an AVX-512 machine measured half-speed sgemm on both sides.  Sets
#   kernels to a line saying which family and why.
# own_kernels: the same for scripts whose runs are all parc's: sets aside an
#   inherited OPENBLAS_CORETYPE, so every run takes the kernels its start-up
#   check picks, and sets kernels to a line saying so.
median_ms() {
    awk -F'|' '/^step [0-9]+(\/[0-9]+)? \|/ { split($1, a, "[ /]"); if (a[2] >= 3) for (i = NF; i > 1; i--) if ($i ~ / ms *$/) { gsub(/ ms/, "", $i); print $i + 0; break } }' "$@" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
                                            else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
toks() { awk -v t="$1" -v ms="$2" 'BEGIN { if (ms == "nan" || ms <= 0) print "n/a"; else printf "%.0f", t / ms * 1000 }'; }
own_kernels() {
    local was=${OPENBLAS_CORETYPE:-}
    unset OPENBLAS_CORETYPE
    kernels="the family parc's start-up check picks (runtime/prt_blas.c), for every run"
    [ -z "$was" ] || kernels="$kernels; the environment's OPENBLAS_CORETYPE=$was set aside"
}
same_kernels() {
    local was=${OPENBLAS_CORETYPE:-} out core
    unset OPENBLAS_CORETYPE
    out=$(OPENBLAS_NUM_THREADS=1 "${MPIRUN:-mpirun}" --bind-to none -np 1 "$1" --steps 1 2>&1)
    core=$(printf '%s\n' "$out" | sed -n 's/.*restarted with OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' | head -1)
    if [ -n "$core" ]; then
        export OPENBLAS_CORETYPE=$core
        kernels="$core for every run, parc's and torch's (OpenBLAS alone picks $(printf '%s\n' "$out" |
            sed -n 's/.*OpenBLAS chose its \([A-Za-z0-9]*\) kernels.*/\1/p' | head -1) on this CPU)"
    else
        kernels="as OpenBLAS chose them, for every run (parc's start-up check changed nothing)"
    fi
    [ -z "$was" ] || kernels="$kernels; the environment's OPENBLAS_CORETYPE=$was set aside"
}
# peer_malloc: exports glibc's malloc thresholds for every run, the peers'
#   included: M_MMAP_THRESHOLD 32 MiB and M_TRIM_THRESHOLD 1 GiB, the values
#   parc's runtime sets itself with mallopt (runtime/prt_startup.c), through
#   glibc's MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_; PyTorch's CPU
#   performance guide recommends a tuned allocator, since glibc's defaults map
#   and unmap a large tensor on every allocation and fault its pages again.
#   Sets malloc_line to a line saying so.
peer_malloc() {
    export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824
    malloc_line="glibc, M_MMAP_THRESHOLD 32 MiB and M_TRIM_THRESHOLD 1 GiB for every run (parc's runtime by mallopt, the peers by MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_)"
}
