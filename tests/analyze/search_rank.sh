#!/usr/bin/env bash
# search_rank.sh PARC PERCENT PLAN... — the closed-form estimate `parc search`
# prefilters with ranks each plan's own layout about where the exact model
# does: its rank by the estimate (the search's "(#R of M by the estimate)")
# and its rank by the exact model among every layout that fits (`--exhaustive`'s
# "ranks #E of N") differ by at most PERCENT of the M layouts
# considered.  A prefilter that credits overlap or latency the exact model
# does not charge puts a layout far from its exact place (tiny_dp's own was
# #2 by the estimate against #29 exactly).  Exit status: 0 all held, 1 any did not.
set -u
parc=$(realpath "$1"); percent=$2; shift 2
fails=0
for plan in "$@"; do
    # the estimate's rank from the prefiltered search, the exact one among
    # every layout that fits (--exhaustive): the prefilter ranks only those
    # it had to lower
    line=$("$parc" search "$plan" --top 3 | grep "the plan's own layout")
    read -r est space < <(printf '%s\n' "$line" |
        sed -n 's/.* is #[0-9]* of the [0-9]* ranked exactly (#\([0-9]*\) of \([0-9]*\) by the estimate).*/\1 \2/p')
    exact=$("$parc" search "$plan" --top 3 --exhaustive | sed -n "s/^the plan's own layout .* ranks #\([0-9]*\) of [0-9]*:.*/\1/p")
    [ -n "$exact" ] || space="" 
    if [ -z "${space:-}" ]; then
        echo "FAIL: $plan: no exact and estimated rank of its own layout in: $line"; fails=$((fails + 1)); continue
    fi
    gap=$(( exact > est ? exact - est : est - exact ))
    if [ $(( gap * 100 )) -gt $(( percent * space )) ]; then
        echo "FAIL: $plan: its own layout is #$exact exactly but #$est of $space by the estimate (more than $percent% apart)"
        fails=$((fails + 1))
    else
        echo "ok   $plan: its own layout #$exact exactly, #$est of $space by the estimate"
    fi
    unset exact est space
done
echo "search_rank: $# plans, $fails failures"
[ "$fails" = 0 ]
