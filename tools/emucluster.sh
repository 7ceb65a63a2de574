#!/usr/bin/env bash
# emucluster.sh — an emulated cluster of N hosts on this machine, to rehearse a
# multi-node plan (`parc run PLAN --hosts FILE`, `parc calibrate --hosts FILE`)
# without a second machine.  Needs root (network, UTS and mount namespaces),
# iproute2's `ip` and `tc`, `unshare` and Open MPI.
#
#   emucluster.sh up DIR [--hosts N] [--slots S] [--rate RATE] [--cores own|shared]
#       N hosts (default 2) named node0 .. node{N-1}, each a network namespace
#       with one veth link (eth0, 10.77.0.{i+1}/24) to a bridge inside a switch
#       namespace of its own; nothing is added to this machine's network.  Each
#       host's eth0 sends through `tc tbf rate RATE` (default 1gbit; any rate
#       tc reads: 100mbit, 2gbit), so every transfer between two hosts is
#       shaped in each direction; ranks on one host talk through shared memory
#       as on a real node.  With `--cores own` (the default where this machine
#       has a core for every slot of every host) every process of host i runs
#       on cores of its own, this machine's cores split evenly among the hosts
#       (taskset), as on hosts with their own processors; with `--cores
#       shared` (the default otherwise) the hosts' ranks share every core:
#       two ranks that poll for each other's messages on one core wait a
#       scheduler's time slice (milliseconds) for every one.  DIR (which must
#       not exist) receives
#         hostfile   `nodeI slots=S` per host (S default 2);
#         env        the launcher settings to source before mpirun: the rsh
#                    agent and the per-host temporary directories;
#         rsh        the agent Open MPI starts its daemon with: it runs the
#                    daemon inside the host's namespaces, under its host name;
#         tmp/HOST/  each host's TMPDIR (Open MPI's and PMIx's session files);
#         namespaces the network namespaces it made, one per line;
#         cores      with own cores, `HOST CPULIST` per host.
#   emucluster.sh exec DIR HOST COMMAND [ARG...]
#       COMMAND inside HOST: its network, its host name, its temporary
#       directory and the launcher settings.  mpirun and `parc run` must start
#       inside a host (usually node0): the other hosts reach it only there.
#   emucluster.sh link DIR HOST up|down      HOST's eth0 up or down (a cut cable)
#   emucluster.sh kill DIR HOST              SIGKILL to every process inside HOST
#   emucluster.sh rate DIR RATE              reshape every host's link to RATE
#   emucluster.sh down DIR                   ends every process inside the hosts,
#                                            removes the namespaces and DIR
#
# `up` undoes what it made when a step fails.  Exit status 0; 1 when a step
# fails (the message names it); 2 for a bad command line.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
    exit 2
}
die() {
    echo "emucluster: $*" >&2
    exit 1
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2

# The namespaces' names carry a digest of DIR's absolute path, so two clusters
# (two test runs) coexist.
ns_prefix() {
    local abs
    abs=$(realpath -m "$1")
    echo "emc$(printf %s "$abs" | md5sum | cut -c1-8)"
}
prefix=$(ns_prefix "$dir")
switch_ns=$prefix-switch
host_ns() { echo "$prefix-$1"; }

# The hosts a cluster in DIR has, from its hostfile.
hosts_of() { [ -f "$dir/hostfile" ] && awk '{print $1}' "$dir/hostfile"; }

# Removes what `up` made for DIR, whatever of it exists: the processes inside
# the namespaces first (their pids as the kernel lists them), then the
# namespaces, their /etc/netns files, and DIR.
teardown() {
    local ns names
    names=$(ip netns list 2>/dev/null | awk -v p="$prefix-" 'index($1, p) == 1 {print $1}')
    for ns in $names; do
        local pids
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
    done
    for ns in $names; do
        ip netns del "$ns" 2>/dev/null || true
        rm -rf "/etc/netns/$ns"
    done
    [ -f "$dir/.emucluster" ] && rm -rf "$dir"
    return 0
}

# A rate as tc reads it, in bytes per second (tbf's burst is sized from it).
rate_bytes() {
    local r=${1,,} n unit
    n=${r%%[a-z]*}
    unit=${r#"$n"}
    case $unit in
        bit) echo $((n / 8)) ;;
        kbit) echo $((n * 1000 / 8)) ;;
        mbit) echo $((n * 1000000 / 8)) ;;
        gbit) echo $((n * 1000000000 / 8)) ;;
        bps) echo "$n" ;;
        kbps) echo $((n * 1000)) ;;
        mbps) echo $((n * 1000000)) ;;
        gbps) echo $((n * 1000000000)) ;;
        *) die "rate \`$1\`: give a whole number and a unit: 100mbit, 1gbit, 50mbps" ;;
    esac
}

# Shapes HOST's eth0 to RATE: a token bucket whose burst is 0.5 ms at the
# rate (at least 16 KiB), and whose queue holds 100 ms of it: TCP's own
# pacing keeps it from dropping.  A link sends at its rate whatever it did
# before; a bucket of 4 ms let every transfer after 4 ms of compute pass at
# the veth's speed (at 1 Gbit/s a 512 KiB all-reduce in the middle of a
# training step, twice or more as fast as the rate allows).  The packets
# the stack hands eth0 (GSO) are kept to 16 KiB so that one fits the bucket
# (64 KiB ones in a 64 KiB bucket stall it).
shape() {
    local host=$1 rate=$2 bytes burst
    bytes=$(rate_bytes "$rate")
    burst=$((bytes / 2000))
    [ $burst -ge 16384 ] || burst=16384
    ip -n "$(host_ns "$host")" link set eth0 gso_max_size 16384
    ip -n "$(host_ns "$host")" link set eth0 up
    tc -n "$(host_ns "$host")" qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
}

up() {
    local hosts=2 slots=2 rate=1gbit cores=""
    while [ $# -gt 0 ]; do
        case $1 in
            --hosts) hosts=${2:-}; shift 2 ;;
            --slots) slots=${2:-}; shift 2 ;;
            --rate) rate=${2:-}; shift 2 ;;
            --cores) cores=${2:-}; shift 2 ;;
            *) usage ;;
        esac
    done
    [[ $hosts =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] && [ "$hosts" -le 200 ] || die "--hosts $hosts: 1 to 200"
    [[ $slots =~ ^[0-9]+$ ]] && [ "$slots" -ge 1 ] || die "--slots $slots: a count of at least 1"
    rate_bytes "$rate" > /dev/null
    local ncpu
    ncpu=$(nproc)
    [ -n "$cores" ] || { [ "$ncpu" -ge $((hosts * slots)) ] && cores=own || cores=shared; }
    case $cores in
        own) [ "$ncpu" -ge "$hosts" ] || die "--cores own: $hosts hosts need a core each, this machine has $ncpu" ;;
        shared) ;;
        *) die "--cores $cores: own or shared" ;;
    esac
    [ "$(id -u)" = 0 ] || die "making network namespaces needs root"
    for tool in ip tc unshare taskset mpirun; do command -v $tool > /dev/null || die "\`$tool\` is not on PATH"; done
    [ ! -e "$dir" ] || die "$dir exists: give a new directory (\`down\` removes an old cluster's)"
    mkdir -p "$dir/tmp"
    : > "$dir/.emucluster" # what `down` removes DIR by
    up_done=0
    trap '[ "$up_done" = 1 ] || { echo "emucluster: up failed; removing what it made" >&2; teardown; }' EXIT
    dir=$(realpath "$dir")

    ip netns add "$switch_ns"
    echo "$switch_ns" > "$dir/namespaces"
    ip -n "$switch_ns" link add br0 type bridge
    ip -n "$switch_ns" link set br0 up
    local i name ns
    : > "$dir/etc_hosts"
    for ((i = 0; i < hosts; i++)); do
        echo "10.77.0.$((i + 1)) node$i" >> "$dir/etc_hosts"
    done
    printf '127.0.0.1 localhost\n' >> "$dir/etc_hosts"
    : > "$dir/hostfile"
    for ((i = 0; i < hosts; i++)); do
        name=node$i
        ns=$(host_ns $name)
        ip netns add "$ns"
        echo "$ns" >> "$dir/namespaces"
        mkdir -p "/etc/netns/$ns" "$dir/tmp/$name"
        cp "$dir/etc_hosts" "/etc/netns/$ns/hosts"
        ip -n "$switch_ns" link add "p$i" type veth peer name eth0 netns "$ns"
        ip -n "$switch_ns" link set "p$i" master br0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev eth0
        shape $name "$rate"
        echo "$name slots=$slots" >> "$dir/hostfile"
        if [ "$cores" = own ]; then # host i: cores [i n / N, (i + 1) n / N)
            local first=$((i * ncpu / hosts)) last=$(((i + 1) * ncpu / hosts - 1))
            echo "$name $first-$last" >> "$dir/cores"
        fi
    done
    echo "$rate" > "$dir/rate"

    # The agent Open MPI calls as `rsh HOST COMMAND...` to start its daemon on
    # HOST.  Like ssh, it hands COMMAND to a shell.
    cat > "$dir/rsh" <<EOF
#!/bin/sh
# Open MPI's rsh agent for the emulated cluster in $dir.
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec "$(realpath "$0")" exec "$dir" "\$host" /bin/sh -c "\$*"
EOF
    chmod 755 "$dir/rsh"
    cat > "$dir/env" <<EOF
# Open MPI's settings for the emulated cluster in $dir: source before mpirun
# (\`emucluster.sh exec\` does).  The agent starts the daemons, one per host;
# MPI's traffic between hosts goes over eth0, the shaped link.
export OMPI_MCA_plm_rsh_agent=$dir/rsh
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_btl_tcp_if_include=eth0
export OMPI_MCA_oob_tcp_if_include=eth0
# a host's ranks run on its cores (\`cores\`) or on all of this machine's:
# Open MPI's own binding would pin ranks of every host to the same first cores
export OMPI_MCA_hwloc_base_binding_policy=none
EOF
    up_done=1
    echo "emucluster: $hosts hosts of $slots slots, links shaped to $rate, $cores cores: $dir/hostfile" >&2
}

# COMMAND inside HOST: its network namespace (with /etc/hosts naming every
# host), a fresh UTS namespace carrying its host name, its own TMPDIR.
exec_in() {
    [ $# -ge 2 ] || usage
    local host=$1
    shift
    [ -f "$dir/hostfile" ] || die "no cluster in $dir (run \`up\` first)"
    hosts_of | grep -qxF "$host" || die "no host \`$host\` in $dir/hostfile"
    local tmp pin=()
    tmp=$(realpath "$dir")/tmp/$host
    if [ -f "$dir/cores" ]; then
        local list
        list=$(awk -v h="$host" '$1 == h {print $2}' "$dir/cores")
        [ -z "$list" ] || pin=(taskset -c "$list")
    fi
    # shellcheck disable=SC2016
    exec "${pin[@]}" ip netns exec "$(host_ns "$host")" unshare --uts /bin/sh -c '
        host=$1 tmp=$2 env=$3; shift 3
        hostname "$host" || exit 1
        export TMPDIR="$tmp" OMPI_MCA_orte_tmpdir_base="$tmp" PMIX_SYSTEM_TMPDIR="$tmp" PMIX_SERVER_TMPDIR="$tmp"
        . "$env"
        exec "$@"' sh "$host" "$tmp" "$(realpath "$dir")/env" "$@"
}

case $cmd in
    up) up "$@" ;;
    exec) exec_in "$@" ;;
    link)
        [ $# = 2 ] && { [ "$2" = up ] || [ "$2" = down ]; } || usage
        hosts_of | grep -qxF "$1" || die "no host \`$1\` in $dir/hostfile"
        ip -n "$(host_ns "$1")" link set eth0 "$2"
        ;;
    kill)
        [ $# = 1 ] || usage
        hosts_of | grep -qxF "$1" || die "no host \`$1\` in $dir/hostfile"
        pids=$(ip netns pids "$(host_ns "$1")")
        [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
        ;;
    rate)
        [ $# = 1 ] || usage
        rate_bytes "$1" > /dev/null
        for h in $(hosts_of); do shape "$h" "$1"; done
        echo "$1" > "$dir/rate"
        ;;
    down)
        [ $# = 0 ] || usage
        teardown
        ;;
    *) usage ;;
esac
