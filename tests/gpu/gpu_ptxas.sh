#!/usr/bin/env bash
# gpu_ptxas.sh NVCC SOURCE_DIR [ARCH] — every kernel of the CUDA backend
# (runtime/cuda/*.cu) compiled for ARCH (default sm_90, the H100/H200) with
# ptxas' resource report (-Xptxas -v): fails when any function spills (spill
# stores or loads above 0 bytes) or keeps a stack frame, and when the attention
# kernels at head dims 64 and 128 (k_attn_rows, k_attn_dq, k_attn_dkv) are
# missing from the report, so the check cannot pass by compiling nothing.
# Prints one line per kernel: registers, shared memory, stack, spills.
set -uo pipefail
nvcc=$1 src=$(cd "$2" && pwd) arch=${3:-sm_90}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
for f in "$src"/runtime/cuda/*.cu; do
    name=$(basename "$f" .cu)
    if ! "$nvcc" -c -std=c++17 -arch="$arch" -Xptxas -v -DPRT_HAVE_CUDA -DOMPI_SKIP_MPICXX \
            -I"$src/runtime/serial" -I"$src/include" -I"$src/runtime" -I"$src/runtime/cuda" "$f" -o "$tmp/$name.o" > "$tmp/$name.log" 2>&1; then
        cat "$tmp/$name.log"; echo "gpu_ptxas: FAIL: $name.cu does not compile"; exit 1
    fi
    # "Function properties for F" / "N bytes stack frame, S bytes spill stores, L bytes spill loads" /
    # "Used R registers, ... B bytes smem"
    awk -v file="$name.cu" '
        /Function properties for/ { fn = $NF; next }
        /bytes stack frame/ { stack[fn] = $1; st[fn] = $5; ld[fn] = $9; order[++n] = fn; next }
        /Compiling entry function/ { sub(/^.*entry function \x27/, ""); sub(/\x27.*$/, ""); entry[$0] = 1; next }
        /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) { if ($(i + 1) == "registers,") reg[fn] = $i; if ($(i + 1) == "bytes" && $(i + 2) == "smem") sm[fn] = $i } }
        END { for (i = 1; i <= n; i++) { f = order[i]
                printf "%s %s regs %s smem %s stack %s spill_st %s spill_ld %s\n", file, f, reg[f] + 0, sm[f] + 0, stack[f], st[f], ld[f] } }
    ' "$tmp/$name.log" > "$tmp/$name.tab"
    cat "$tmp/$name.tab" >> "$tmp/all.tab"  # empty for a file without device code
done
cxxfilt=$(command -v c++filt || echo cat)
while read -r file fn _ regs _ smem _ stack _ sst _ sld; do
    verdict=ok
    if [ "$sst" != 0 ] || [ "$sld" != 0 ] || [ "$stack" != 0 ]; then verdict=FAIL; fail=1; fi
    printf '%-24s %-60s regs %3s smem %6s stack %4s spill st/ld %s/%s %s\n' "$file" "$(echo "$fn" | $cxxfilt | cut -c1-60)" \
        "$regs" "$smem" "$stack" "$sst" "$sld" "$verdict"
done < "$tmp/all.tab"
for k in k_attn_rows k_attn_dq k_attn_dkv; do
    for hd in 64 128; do
        grep -q "_Z[0-9]*${k}ILi${hd}E" "$tmp/all.tab" || { echo "gpu_ptxas: FAIL: no report for $k<$hd>"; fail=1; }
    done
done
echo "gpu_ptxas: $(wc -l < "$tmp/all.tab") functions for $arch, $(grep -c -v ' spill_st 0 spill_ld 0$' "$tmp/all.tab") spilling: $([ $fail = 0 ] && echo ok || echo FAIL)"
exit $fail
