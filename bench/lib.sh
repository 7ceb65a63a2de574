# bench/lib.sh — what the training benchmarks share (sourced, not run).
#
# median_ms FILE...: the median of the `| X ms` column of the `step N | ...` /
#   `step N/TOTAL | ...` lines a program prints, over steps N >= 3 (the first
#   two warm the caches and the BLAS); "nan" when there is none.
# toks TOKENS MS: tokens per second of a step of TOKENS tokens in MS ms ("n/a"
#   when MS is not a time).
median_ms() {
    awk -F'|' '/^step [0-9]+(\/[0-9]+)? \|/ { split($1, a, "[ /]"); if (a[2] >= 3) for (i = NF; i > 1; i--) if ($i ~ / ms *$/) { gsub(/ ms/, "", $i); print $i + 0; break } }' "$@" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
                                            else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
toks() { awk -v t="$1" -v ms="$2" 'BEGIN { if (ms == "nan" || ms <= 0) print "n/a"; else printf "%.0f", t / ms * 1000 }'; }
