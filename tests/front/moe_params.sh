#!/usr/bin/env bash
# moe_params.sh PARC EXAMPLES_DIR — the parameter counts of mixture-of-experts
# plans, as the resolved plan states them (`parc lower PLAN --emit=front`):
# the tiny plan's exact figures (worked out by hand in the comments), and
# Mixtral 8x7B's against Mistral's published 46.7B total and 12.9B active,
# within 0.5%.  Exit status: 0 when every figure holds.
set -u
parc=$1; dir=$2
fails=0
counts() { "$parc" lower "$1" --emit=front | awk '$1 == "parameters" && $3 == "active" { print $2, $4 }'; }

# tiny_moe: hidden 64, vocab 256, 2 layers, 4 heads over 2 kv heads of 16,
# 4 SwiGLU experts of 96, top 2.  Embedding + untied head + final norm:
# 2*256*64 + 64 = 32832.  A layer: 2 norms 128, qkv 64*(4+2*2)*16 = 8192,
# proj 64*64 = 4096, router 64*4 = 256, an expert 64*192 + 96*64 = 18432.
# Total 32832 + 2*(12416 + 256 + 4*18432) = 205632;
# active 32832 + 2*(12416 + 256 + 2*18432) = 131904.
read -r total active < <(counts "$dir/tiny_moe.par")
if [ "${total:-}" != 205632 ] || [ "${active:-}" != 131904 ]; then
    echo "FAIL tiny_moe: parameters ${total:-?} active ${active:-?}, expected 205632 active 131904"
    fails=$((fails + 1))
fi

read -r total active < <(counts "$dir/mixtral_8x7b.par")
within() { awk -v x="$1" -v want="$2" 'BEGIN { d = (x - want) / want; exit !(d < 0.005 && d > -0.005) }'; }
if ! within "${total:-0}" 46.7e9 || ! within "${active:-0}" 12.9e9; then
    echo "FAIL mixtral_8x7b: parameters ${total:-?} active ${active:-?}, expected 46.7e9 and 12.9e9 within 0.5%"
    fails=$((fails + 1))
fi
[ "$fails" = 0 ] && echo "moe_params: tiny_moe 205632 (131904 active), mixtral_8x7b $total ($active active)"
exit $((fails > 0))
