#!/bin/bash
# context_parallel.sh PARC PLAN — context parallelism's all-gather form through the
# placement mechanism (tests/lower/context_parallel.par: the tiny rotary model,
# micro_batch 2, seq 32 split over cp 2, 4 query and 2 key/value heads of 16):
#   - `parc collectives` lists, on axis cp, attention's qkv all-gathered in the
#     forward (and again in the backward: the gathered copy is not kept) and its
#     gradient reduce-scattered, each 2 x 32 x (4 + 2 x 2) x 16 = 8192 elements
#     (the whole sequence's qkv), once per layer and micro-batch (4 x 4 = 16 calls);
#   - explain says what the axis carries: context (seq);
#   - the lowered attention calls take the 32 keys of the gathered qkv, the rank's
#     16 query rows and their first row, the cp coordinate times 16.
set -u
parc=$1 plan=$2
fail=0
out=$("$parc" collectives "$plan") || { echo "FAIL: parc collectives exited $?"; exit 1; }
want() {
    if ! grep -Eq "$1" <<<"$out"; then
        echo "FAIL: no line matching: $1"
        fail=1
    fi
}
want '^  forward +attn +all-gather +cp +2 +8192 32-bit +32\.0 KiB +16 .*attn needs attn\.rope\.out whole on cp \(split on seq\)'
want '^  backward +attn +all-gather +cp +2 +8192 32-bit +32\.0 KiB +16 .*again for the backward of attn'
want '^  backward +attn +reduce-scatter +cp +2 +8192 32-bit +32\.0 KiB +16 .*Partial gradient of attn\.rope\.out'
out=$("$parc" explain "$plan") || { echo "FAIL: parc explain exited $?"; exit 1; }
want '^  cp +2  context \(seq\)'
out=$("$parc" lower "$plan") || { echo "FAIL: parc lower exited $?"; exit 1; }
want '^    attention_fwd\(%attn\.out\[l\+0,slot\], %attn\.probs\[l\+0,slot\], %attn\.rope\.out\.resharded, 2, 32, 4, 2, 16, 1, 16, coord\(0\)\*16\)$'
want '^    attention_bwd\(%attn\.rope\.out\.grad\.part, %attn\.out\.grad, %attn\.rope\.out\.resharded, %attn\.probs\[l\+0,slot\], 2, 32, 4, 2, 16, 1, 16, coord\(0\)\*16\)'
[ $fail -eq 0 ] && echo "context_parallel: ok"
exit $fail
