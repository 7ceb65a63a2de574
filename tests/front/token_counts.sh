#!/usr/bin/env bash
# token_counts.sh PARC EXAMPLES — how counts and units are read (docs/language.md §4):
# a unit right after its number (`128K`, `1GiB`) reads as with a space; `seq`,
# `batch`, `micro_batch` scale K / M by 2^10 / 2^20 (`seq 128K` = 131,072 tokens,
# `batch 2K` = 2,048), every other count by 10^3 (`vocab 32K` = 32,000); a word
# that starts with digits and is no unit (`1f1b`) stays a word.
set -u
parc=$1; examples=$(realpath "$2")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
# tiny_single with its counts rewritten: FROM -> TO in the model or train text
plan() { # name, sed script
    sed -e "s|include \"common/|include \"$examples/common/|" "$examples/tiny_single.par" > "$tmp/$1.par"
    sed -e "$2" "$examples/common/tiny_gpt.par" > "$tmp/$1.model.par"
    sed -e "s|$examples/common/tiny_gpt.par|$tmp/$1.model.par|" -i "$tmp/$1.par"
}
expect() { # name, field, value
    local got
    got=$("$parc" lower "$tmp/$1.par" --emit=front 2>&1 | awk -v f="$2" '$1 == f { print $2; exit }')
    if [ "$got" != "$3" ]; then
        echo "FAIL $1: $2 is ${got:-missing}, expected $3"
        "$parc" check "$tmp/$1.par" 2>&1 | head -5
        fails=$((fails + 1))
    else
        echo "ok   $1: $2 $3"
    fi
}
plan seq1k 's/seq 32;/seq 1K;/'
expect seq1k seq 1024
plan seq1k_space 's/seq 32;/seq 1 K;/'
expect seq1k_space seq 1024
plan seq_half 's/seq 32;/seq 0.5K;/'
expect seq_half seq 512
plan vocab 's/vocab 256;/vocab 1K;/'
expect vocab vocab 1000
# batch (train section of the plan itself)
sed -e "s|include \"common/|include \"$examples/common/|" -e 's/micro_batch 2;/micro_batch 2; batch 2K;/' \
    "$examples/tiny_single.par" > "$tmp/batch.par"
sed -e 's/^batch 8;//' "$examples/common/tiny_train.par" > "$tmp/train.par"
sed -e "s|$examples/common/tiny_train.par|$tmp/train.par|" -i "$tmp/batch.par"
expect batch batch 2048
# a unit written against its number
sed -e "s|include \"common/|include \"$examples/common/|" "$examples/tiny_single.par" > "$tmp/mem.par"
sed -e 's/memory 1 GiB;/memory 1GiB;/' "$examples/common/tiny_cluster.par" > "$tmp/cluster.par"
sed -e "s|$examples/common/tiny_cluster.par|$tmp/cluster.par|" -i "$tmp/mem.par"
expect mem gpu_memory 1073741824
# `1f1b` is still a schedule word
if ! "$parc" check "$examples/tiny_pp_1f1b.par" > /dev/null 2>&1; then
    echo "FAIL tiny_pp_1f1b.par: no longer checks (\`1f1b\` read as a number?)"; fails=$((fails + 1))
fi
[ "$fails" = 0 ] && echo "token_counts: every count read as documented"
[ "$fails" = 0 ]
