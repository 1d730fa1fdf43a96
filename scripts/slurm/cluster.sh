#!/usr/bin/env bash
# A throwaway one-node Slurm cluster (munged + slurmctld + slurmd) that lives
# entirely in STATE_DIR, for tests that submit job arrays of CPU workers.
#
#   eval "$(scripts/slurm/cluster.sh up /abs/state/dir)"   # exports SLURM_CONF
#   scripts/slurm/cluster.sh down /abs/state/dir
#
# `up` prints exactly one line on stdout (`export SLURM_CONF=...`); all other
# messages go to stderr. Built for Debian 12 (slurm-wlm 22.05, munge 0.5.15)
# as root without systemd: the daemons are started directly and daemonize
# themselves, and `down` stops only the pids recorded in STATE_DIR, never by
# name, so it is safe on a shared machine and idempotent.
set -euo pipefail

PROG=${0##*/}
# The daemons live in /usr/sbin, which a non-login PATH may lack.
PATH=$PATH:/usr/sbin:/sbin
NODE_CPUS=4          # more than this machine may have: see SlurmdParameters
PART=debug
BOOT_TIMEOUT=60      # seconds for the node to become idle
STOP_TIMEOUT=10      # seconds between SIGTERM and SIGKILL for a daemon in `down`
MARKER=.slurm-cluster-sh   # marks a dir as ours, so `down` may rm -rf it

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  printf 'usage: %s up|down STATE_DIR   (STATE_DIR must be absolute)\n' "$PROG" >&2
  exit 2
}

# shellcheck source=../lib/ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/ports.sh"

# Two adjacent free ports, starting from 16817, so a second cluster or a
# system slurm on 6817/6818 does not clash with this one.
pick_ports() {
  local p
  for ((p = 16817; p < 16917; p += 2)); do
    if ! port_busy "$p" && ! port_busy "$((p + 1))"; then
      echo "$p"
      return 0
    fi
  done
  die "no free port pair in 16817-16916"
}

# pid from pid file $1 if that process is alive and its command is $2
# (guards against a recycled pid after a crash or reboot).
live_pid() {
  local file=$1 comm=$2 pid
  [[ -r $file ]] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [[ -n $pid && -r /proc/$pid/comm ]] || return 1
  [[ $(</proc/"$pid"/comm) == "$comm" ]] || return 1
  echo "$pid"
}

# SIGTERM pids $2..., wait up to $1 seconds, then SIGKILL the survivors.
stop_pids() {
  local secs=$1 pid i st
  local -a alive
  shift
  (($# > 0)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  for ((i = 0; i <= secs * 10; i++)); do
    alive=()
    for pid in "$@"; do
      st=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
      st=${st##*) }
      # A zombie (state Z) is dead already, waiting for its parent to reap it.
      [[ ${st%% *} == Z ]] || alive+=("$pid")
    done
    ((${#alive[@]})) || return 0
    sleep 0.1
  done
  log "SIGKILL to ${alive[*]} after ${secs}s"
  kill -KILL "${alive[@]}" 2>/dev/null || true
}

# Job processes of this cluster still alive, with all their descendants:
# slurmstepd (it rewrites its environ for its process title, so it is
# recognised by its fd on this cluster's slurmd.log) and any process whose
# environment has both SLURM_JOB_ID and our SLURM_CONF (Slurm sets both in
# every job, even with --export=NONE). The latter catches double-forked
# daemons that escaped proctrack/linuxproc; the caller's own shell has
# SLURM_CONF but no SLURM_JOB_ID, so it never matches.
cluster_job_pids() {
  local dir=$1 p fd comm has_conf has_job v
  local -a roots=() env=()
  for p in /proc/[0-9]*; do
    comm=$(cat "$p/comm" 2>/dev/null) || continue
    if [[ $comm == slurmstepd ]]; then
      for fd in "$p"/fd/*; do
        if [[ $(readlink "$fd" 2>/dev/null) == "$dir/slurmd.log"* ]]; then
          roots+=("${p#/proc/}")
          break
        fi
      done
      continue
    fi
    { mapfile -d "" -t env <"$p/environ"; } 2>/dev/null || continue
    has_conf=0 has_job=0
    for v in "${env[@]}"; do
      [[ $v == "SLURM_CONF=$dir/slurm.conf" ]] && has_conf=1
      [[ $v == SLURM_JOB_ID=* ]] && has_job=1
    done
    if ((has_conf && has_job)); then roots+=("${p#/proc/}"); fi
  done
  ((${#roots[@]})) || return 0
  # Walk the ppid tree down from the roots.
  ps -e -o pid=,ppid= | awk -v roots="${roots[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2; pids[NR] = $1 }
    END {
      do { changed = 0
        for (i in pids) { p = pids[i]; if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } }
      } while (changed)
      for (p in keep) print p
    }'
}

stop_cluster() {
  local dir=$1 pid i
  local -a pids=()
  # Cancel jobs first so their processes die through Slurm, while it still runs.
  if live_pid "$dir/slurmctld.pid" slurmctld >/dev/null \
     && live_pid "$dir/munged.pid" munged >/dev/null; then
    if SLURM_CONF=$dir/slurm.conf timeout 10 scancel --partition="$PART" 2>/dev/null; then
      for ((i = 0; i < 150; i++)); do
        [[ -z $(SLURM_CONF=$dir/slurm.conf timeout 5 squeue -h -p "$PART" -o %i 2>/dev/null || echo x) ]] && break
        sleep 0.1
      done
    fi
  fi
  # Anything left from jobs (e.g. if slurmctld was already dead).
  mapfile -t pids < <(cluster_job_pids "$dir")
  stop_pids 5 "${pids[@]}"
  # One at a time, slurmd first: stopped together, slurmd sometimes waits
  # ~10 s (MessageTimeout) for the vanished slurmctld. munged last: the slurm
  # daemons talk to it while shutting down.
  if pid=$(live_pid "$dir/slurmd.pid" slurmd); then stop_pids "$STOP_TIMEOUT" "$pid"; fi
  if pid=$(live_pid "$dir/slurmctld.pid" slurmctld); then stop_pids "$STOP_TIMEOUT" "$pid"; fi
  if pid=$(live_pid "$dir/munged.pid" munged); then stop_pids "$STOP_TIMEOUT" "$pid"; fi
}

tail_logs() {
  local dir=$1 f
  for f in munged.log slurmctld.log slurmd.log; do
    [[ -f $dir/$f ]] || continue
    printf '==== %s (last 30 lines) ====\n' "$dir/$f" >&2
    tail -n 30 "$dir/$f" >&2
  done
}

ensure_packages() {
  local missing=0 b aptlog rc=0 policy=/usr/sbin/policy-rc.d ours=0
  for b in slurmctld slurmd munged sbatch; do
    command -v "$b" >/dev/null 2>&1 || missing=1
  done
  ((missing)) || return 0
  log "installing slurm-wlm and munge with apt-get"
  # The packages' postinst would start the system-wide daemons where there
  # is an init system; a policy-rc.d that exits 101 forbids that (as in
  # container images). Only added if none exists, removed right after.
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && ours=1
  fi
  aptlog=$(mktemp)
  {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends slurm-wlm munge
  } >"$aptlog" 2>&1 || rc=$?
  if ((ours)); then rm -f "$policy"; fi
  if ((rc != 0)); then
    cat "$aptlog" >&2
    rm -f "$aptlog"
    die "apt-get failed (exit $rc)"
  fi
  rm -f "$aptlog"
}

write_conf() {
  local dir=$1 host=$2 ctld_port=$3
  cat >"$dir/slurm.conf" <<EOF
# Generated by $PROG; a one-node test cluster living in $dir.
ClusterName=testcluster
# NodeAddr/ControlAddr pinned to loopback: works even if $host does not resolve.
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
# Non-default ports so a system-wide Slurm (6817/6818) or a second test
# cluster does not clash.
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
# Our own munged; "socket=" is read by auth/munge and cred/munge in the
# daemons and in sbatch/squeue/scancel/scontrol (via SLURM_CONF).
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/ctld-state
SlurmdSpoolDir=$dir/slurmd-spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in the container: track job processes by parent pid. Unlike
# proctrack/pgid this still finds children that called setsid()/setpgid(),
# so scancel kills them too.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Seconds between SIGTERM and SIGKILL on scancel/timeout (default 30).
KillWait=5
# A node that was DOWN becomes usable again as soon as it registers.
ReturnToService=2
# The default, written out so that scontrol show config prints it explicitly.
MaxArraySize=1001
# The node declares CPUs=$NODE_CPUS even on a 2-core machine, so that several
# one-CPU array tasks run at once; config_overrides makes slurmd trust
# slurm.conf instead of draining the node for having fewer CPUs than declared.
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=$NODE_CPUS State=UNKNOWN
PartitionName=$PART Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

cmd_up() {
  local dir=$1 host ctld_port i state=""
  ensure_packages
  if [[ -e $dir ]]; then
    [[ -d $dir ]] || die "$dir exists and is not a directory"
    if [[ -e $dir/$MARKER ]]; then
      log "$dir is left from an earlier cluster; stopping it and starting afresh"
      stop_cluster "$dir"
      find "$dir" -mindepth 1 -delete
    elif [[ -n $(ls -A "$dir") ]]; then
      die "$dir is not empty and was not made by $PROG"
    fi
  fi
  mkdir -p "$dir"
  touch "$dir/$MARKER"
  # munged refuses a socket or key dir that others may write to.
  chmod 0755 "$dir"
  mkdir -p "$dir/ctld-state" "$dir/slurmd-spool"

  # From here on, a failure prints the logs and stops what we started.
  trap 'rc=$?; if ((rc != 0)); then log "up failed"; tail_logs "$dir"; stop_cluster "$dir"; log "logs kept in $dir; run: $PROG down $dir"; fi' EXIT
  # Without these, a signal would kill bash without running the EXIT trap.
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM

  host=$(hostname -s)
  ctld_port=$(pick_ports)
  write_conf "$dir" "$host" "$ctld_port"
  export SLURM_CONF=$dir/slurm.conf

  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge.key"
  # --force: munged refuses to run as root without it. Stdio goes to the log:
  # a daemon holding our stdout would hang a caller's "$(... up ...)".
  munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" \
    --seed-file="$dir/munged.seed" </dev/null >>"$dir/munged.log" 2>&1 \
    || die "munged failed to start"
  for ((i = 0; i < 50; i++)); do [[ -S $dir/munge.sock ]] && break; sleep 0.1; done
  [[ -S $dir/munge.sock ]] || die "munged did not create $dir/munge.sock"

  # -c: there is no old state to recover. -N: the node is this host.
  slurmctld -c -f "$SLURM_CONF" </dev/null >>"$dir/slurmctld.log" 2>&1 \
    || die "slurmctld failed to start"
  slurmd -N "$host" -f "$SLURM_CONF" </dev/null >>"$dir/slurmd.log" 2>&1 \
    || die "slurmd failed to start"

  log "waiting up to ${BOOT_TIMEOUT}s for node $host to be idle (ports $ctld_port/$((ctld_port + 1)))"
  for ((i = 0; i < BOOT_TIMEOUT * 2; i++)); do
    state=$(timeout 5 sinfo -h -N -n "$host" -o %T 2>/dev/null || true)
    [[ $state == idle ]] && break
    live_pid "$dir/slurmctld.pid" slurmctld >/dev/null || ((i < 10)) || die "slurmctld is not running"
    live_pid "$dir/slurmd.pid" slurmd >/dev/null || ((i < 10)) || die "slurmd is not running"
    sleep 0.5
  done
  [[ $state == idle ]] || die "node $host not idle after ${BOOT_TIMEOUT}s (state: ${state:-none})"
  trap - EXIT
  log "cluster up in $dir"
  printf 'export SLURM_CONF=%q\n' "$SLURM_CONF"
}

cmd_down() {
  local dir=$1
  if [[ ! -e $dir ]]; then
    log "$dir does not exist; nothing to do"
    return 0
  fi
  [[ -d $dir ]] || die "$dir is not a directory"
  if [[ ! -e $dir/$MARKER ]]; then
    [[ -z $(ls -A "$dir") ]] || die "$dir was not made by $PROG; not touching it"
    rmdir "$dir"
    return 0
  fi
  stop_cluster "$dir"
  rm -rf -- "$dir"
  log "cluster in $dir is down"
}

(($# == 2)) || usage
dir=$2
[[ $dir == /* ]] || die "STATE_DIR must be an absolute path: $dir"
# Normalise (drop trailing slashes, "." components) without requiring it to exist.
dir=$(realpath -m -- "$dir")
[[ $dir != / ]] || die "refusing STATE_DIR=/"
# slurm.conf cannot quote paths.
[[ $dir != *[[:space:]]* ]] || die "STATE_DIR must not contain whitespace: $dir"
# Unix socket paths (munge.sock, slurmstepd's slurmd-spool/<node>_<job>.<step>)
# must fit in 108 bytes.
[[ $1 != up ]] || ((${#dir} + ${#HOSTNAME} + 36 <= 107)) || die "STATE_DIR path too long: $dir"
case $1 in
  up) cmd_up "$dir" ;;
  down) cmd_down "$dir" ;;
  *) usage ;;
esac
