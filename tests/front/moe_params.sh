#!/usr/bin/env bash
# moe_params.sh PARC EXAMPLES_DIR — the parameter counts of mixture-of-experts
# plans, as the resolved plan states them (`parc lower PLAN --emit=front`):
# the tiny plans' exact figures (worked out by hand in the comments),
# Mixtral 8x7B's against Mistral's published 46.7B total and 12.9B active,
# within 0.5%, and Qwen1.5-MoE-A2.7B's (shared experts) against Qwen's
# published 14.3B total and 2.7B active, within 1%, with parc's own figures
# exactly, and Llama 4 Maverick's (the mixture in every second layer) against
# Meta's published 400B and 17B.  Exit status: 0 when every figure holds.
set -u
parc=$1; dir=$2
fails=0
counts() { "$parc" lower "$1" --emit=front | awk '$1 == "parameters" && $3 == "active" { print $2, $4 }'; }
# exact NAME TOTAL ACTIVE: the plan's counts are exactly these (total, active then hold its figures)
exact() {
    read -r total active < <(counts "$dir/$1.par")
    if [ "${total:-}" != "$2" ] || [ "${active:-}" != "$3" ]; then
        echo "FAIL $1: parameters ${total:-?} active ${active:-?}, expected $2 active $3"
        fails=$((fails + 1))
        return 1
    fi
}

# tiny_moe: hidden 64, vocab 256, 2 layers, 4 heads over 2 kv heads of 16,
# 4 SwiGLU experts of 96, top 2.  Embedding + untied head + final norm:
# 2*256*64 + 64 = 32832.  A layer: 2 norms 128, qkv 64*(4+2*2)*16 = 8192,
# proj 64*64 = 4096, router 64*4 = 256, an expert 64*192 + 96*64 = 18432.
# Total 32832 + 2*(12416 + 256 + 4*18432) = 205632;
# active 32832 + 2*(12416 + 256 + 2*18432) = 131904.
exact tiny_moe 205632 131904

# tiny_moe_shared: tiny_moe with 4 SwiGLU experts of 48, top 2, and 2 shared
# experts: one SwiGLU MLP of 2*48 = 96 units.  An expert 64*96 + 48*64 = 9216,
# the shared MLP 64*192 + 96*64 = 18432 (in both counts).
# Total 32832 + 2*(12416 + 256 + 4*9216 + 18432) = 168768;
# active 32832 + 2*(12416 + 256 + 2*9216 + 18432) = 131904.
exact tiny_moe_shared 168768 131904

# tiny_moe_shared_gelu: a GPT-2 block (biases, learned positions, tied head)
# with 3 GELU experts of 48, top 2, and a shared expert of shared_ffn 80.
# Embedding + positions + final norm: 256*64 + 32*64 + 128 = 18560.  A layer:
# 2 norms 256, qkv 64*192 + 192 = 12480, proj 4096 + 64 = 4160, router 64*3 =
# 192, an expert 64*48 + 48*64 = 6144, the shared MLP 64*80 + 80*64 = 10240
# (no biases).  Total 18560 + 2*(17088 + 3*6144 + 10240) = 110080;
# active 18560 + 2*(17088 + 2*6144 + 10240) = 97792.
exact tiny_moe_shared_gelu 110080 97792

# within X WANT TOLERANCE: |X - WANT| / WANT < TOLERANCE
within() { awk -v x="$1" -v want="$2" -v tol="$3" 'BEGIN { d = (x - want) / want; exit !(d < tol && d > -tol) }'; }
read -r total active < <(counts "$dir/mixtral_8x7b.par")
if ! within "${total:-0}" 46.7e9 0.005 || ! within "${active:-0}" 12.9e9 0.005; then
    echo "FAIL mixtral_8x7b: parameters ${total:-?} active ${active:-?}, expected 46.7e9 and 12.9e9 within 0.5%"
    fails=$((fails + 1))
fi
mixtral="$total ($active active)"

# Qwen1.5-MoE-A2.7B: hidden 2048, vocab 151936, 24 layers of 16 heads of 128.
# Embedding + untied head + final norm: 2*151936*2048 + 2048 = 622331904.  A
# layer: 2 norms 4096, qkv 3*2048*2048 = 12582912, proj 2048*2048 = 4194304,
# router 2048*60 = 122880, an expert 3*2048*1408 = 8650752, the shared MLP
# 3*2048*5632 = 34603008.  Total 622331904 + 24*(16781312 + 122880 +
# 60*8650752 + 34603008) = 14315587584 (published 14.3B; the released model
# adds q/k/v biases and the shared expert's gate, 196608 parameters, that parc
# lacks); active 622331904 + 24*(16781312 + 122880 + 4*8650752 + 34603008) =
# 2688976896 (published 2.7B).
if exact qwen15_moe_a27b 14315587584 2688976896 &&
    { ! within "$total" 14.3e9 0.01 || ! within "$active" 2.7e9 0.01; }; then
    echo "FAIL qwen15_moe_a27b: parameters $total active $active, more than 1% off the published 14.3e9 and 2.7e9"
    fails=$((fails + 1))
fi
qwen="$total ($active active)"

# tiny_moe_every: tiny_moe's model over 4 layers with the mixture in layers 1
# and 3 (`every 2`), layers 0 and 2 a dense SwiGLU MLP of ffn 172: 64*344 +
# 172*64 = 33024.  Total 32832 + 4*12416 + 2*33024 + 2*(256 + 4*18432) =
# 296512; active 32832 + 4*12416 + 2*33024 + 2*(256 + 2*18432) = 222784.
exact tiny_moe_every 296512 222784

# Llama 4 Maverick: hidden 5120, vocab 202048, 48 layers of 40 heads over 8 kv
# heads of 128.  Embedding + untied head + final norm: 2*202048*5120 + 5120 =
# 2068976640.  A layer's attention and norms: 5120*(40+16)*128 + 40*128*5120 +
# 2*5120 = 62924800.  A dense layer's SwiGLU MLP of 16384: 3*5120*16384 =
# 251658240; a mixture layer's router 5120*128 = 655360, an expert or the
# shared expert of 8192 3*5120*8192 = 125829120.  24 of each kind: total
# 2068976640 + 48*62924800 + 24*251658240 + 24*(655360 + 129*125829120) =
# 400711848960; active, 1 expert and the shared one: 17184691200.  Meta
# publishes 400B and 17B (rounded to the billion): within 0.5% and 3%.
if exact llama4_maverick 400711848960 17184691200 &&
    { ! within "$total" 400e9 0.005 || ! within "$active" 17e9 0.03; }; then
    echo "FAIL llama4_maverick: parameters $total active $active, off the published 400e9 (0.5%) or 17e9 (3%)"
    fails=$((fails + 1))
fi
[ "$fails" = 0 ] && echo "moe_params: tiny_moe 205632 (131904 active), tiny_moe_shared 168768 (131904 active)," \
    "tiny_moe_shared_gelu 110080 (97792 active), tiny_moe_every 296512 (222784 active)," \
    "mixtral_8x7b $mixtral, qwen15_moe_a27b $qwen, llama4_maverick $total ($active active)"
exit $((fails > 0))
