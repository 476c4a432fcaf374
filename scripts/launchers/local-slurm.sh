#!/usr/bin/env bash
# A single-node Slurm on this machine for the launcher tests: munge, slurmctld and slurmd
# from Debian's packages, with their config, state and logs under STATE_DIR, talking over
# loopback only. Idempotent.
#   local-slurm.sh start STATE_DIR   starts what is not running; prints `export SLURM_CONF=...`
#   local-slurm.sh stop STATE_DIR    stops the daemons this script started (not a munged
#                                    that was running before)
set -euo pipefail
cmd=${1:?usage: local-slurm.sh start|stop STATE_DIR}
state=$(mkdir -p "${2:?usage: local-slurm.sh start|stop STATE_DIR}" && cd "$2" && pwd)
conf=$state/slurm.conf
log() { printf '[local-slurm] %s\n' "$*" >&2; }

stop_pidfile() {
  local file=$1
  [[ -f $file ]] || return 0
  local pid
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

if [[ $cmd == stop ]]; then
  stop_pidfile "$state/slurmd.pid"
  stop_pidfile "$state/slurmctld.pid"
  [[ -f $state/munged.started ]] && stop_pidfile /run/munge/munged.pid && rm -f "$state/munged.started"
  log "stopped"
  exit 0
fi
[[ $cmd == start ]] || { echo "unknown command $cmd" >&2; exit 2; }

host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$state/ctld" "$state/spool"
cat > "$conf.new" <<CONF
# Written by scripts/launchers/local-slurm.sh: one node, loopback only.
ClusterName=mrcnn-ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmctldPort=${MRCNN_SLURMCTLD_PORT:-6817}
SlurmdPort=${MRCNN_SLURMD_PORT:-6818}
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# How long scancel's SIGTERM has before SIGKILL: the trainer checkpoints well within it.
KillWait=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
mv "$conf.new" "$conf"

# munge: the credential service every Slurm RPC is signed with.
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  [[ -f /etc/munge/munge.key ]] || { mungekey --create --keyfile /etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key; }
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  runuser -u munge -- /usr/sbin/munged
  touch "$state/munged.started"
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || { log "munged did not start"; exit 1; }
  log "munged started"
fi

running() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! running "$state/slurmctld.pid"; then
  # -i: ignore state left by an earlier run of this script (jobs of a dead cluster).
  slurmctld -f "$conf" -i
  log "slurmctld started"
fi
if ! running "$state/slurmd.pid"; then
  slurmd -f "$conf"
  log "slurmd started"
fi
export SLURM_CONF=$conf
for _ in $(seq 150); do
  if sinfo -h -o '%t' 2>/dev/null | grep -qx 'idle\|mix\|alloc'; then
    log "node $host is up ($(sinfo -h -o '%t'))"
    echo "export SLURM_CONF=$conf"
    exit 0
  fi
  sleep 0.2
done
log "the node did not come up within 30 s; sinfo says: $(sinfo 2>&1 | tail -n +2)"
tail -n 20 "$state/slurmctld.log" "$state/slurmd.log" >&2 || true
exit 1
