#!/usr/bin/env bash
# local_slurm.sh DIR start|stop — a one-node Slurm on this machine for the
# launch test: slurmctld and slurmd in the foreground of background jobs, as
# the current user, every file under DIR (slurm.conf, state, spool, logs),
# auth/none (no munge daemon), ports chosen free at start.  `start` waits
# until the node is idle and prints `export SLURM_CONF=DIR/slurm.conf`;
# `stop` ends the two daemons by their pid files.  Exit 1 when Slurm does
# not come up within 30 s, with its logs.
set -u
dir=$1; what=$2
conf=$dir/slurm.conf
if [ "$what" = stop ]; then
    for p in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do [ -s "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
    exit 0
fi
mkdir -p "$dir/state" "$dir/spool"
node=$(hostname -s)
cpus=$(nproc)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
cat > "$conf" <<CONF
ClusterName=parclocal
SlurmctldHost=$node
AuthType=auth/none
CredType=cred/none
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
SlurmctldPort=$(port)
SlurmdPort=$(port)
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$node CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$conf
slurmctld -D -i > "$dir/slurmctld.out" 2>&1 &
slurmd -D -N "$node" > "$dir/slurmd.out" 2>&1 &
for _ in $(seq 60); do
    if sinfo -h -o '%t' 2>/dev/null | grep -qx idle; then echo "export SLURM_CONF=$conf"; exit 0; fi
    sleep 0.5
done
echo "local_slurm: the node did not become idle in 30 s" >&2
tail -20 "$dir"/*.log "$dir"/*.out >&2
exit 1
