#!/bin/sh
# slurm-cluster.sh - a one-node Slurm cluster on this machine, for the
# tests of srun and sbatch (tests/slurm/slurm.t, make check-slurm).
#
#   slurm-cluster.sh install         apt-get install slurm-wlm and munge
#                                    when missing (Debian; root)
#   slurm-cluster.sh up DIR          generate a munge key and slurm.conf
#                                    into DIR, start munged, slurmctld and
#                                    slurmd, wait for the node to be idle
#   slurm-cluster.sh exec DIR CMD... run CMD as a client of that cluster
#                                    (srun, sbatch, squeue, scontrol)
#   slurm-cluster.sh down DIR        stop the daemons and what runs under
#                                    them (idempotent; for traps)
#
# Nothing of the machine's own configuration is used or changed: the key,
# slurm.conf, the munge socket, spool and state directories, pid and log
# files all live in DIR; the daemons run as root.  Where network
# namespaces work, the daemons and the clients share one of their own
# (ncf-PID-slurm, loopback only), so the standard ports cannot clash with
# another Slurm and nothing is reachable from outside; elsewhere they run
# on this machine's loopback on free ports.  The one node is this
# machine's host name, with its cores (CPUs=nproc), no cgroups
# (proctrack/linuxproc, task/none), and MpiDefault=pmix: srun starts Open
# MPI ranks through Slurm's PMIx plugin (srun --mpi=list).  down ends the
# daemons by the pids recorded at up, then anything left in the namespace
# (job steps), and removes the namespace.
set -u
ME=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

die() {
	echo "slurm-cluster: $*" >&2
	exit 1
}

cmd_install() {
	missing=""
	command -v slurmctld >/dev/null 2>&1 || missing="$missing slurmctld"
	command -v slurmd >/dev/null 2>&1 || missing="$missing slurmd"
	command -v srun >/dev/null 2>&1 || missing="$missing slurm-client"
	command -v munged >/dev/null 2>&1 || missing="$missing munge"
	[ -n "$missing" ] || return 0
	[ "$(id -u)" = 0 ] || die "not root: cannot install$missing"
	command -v apt-get >/dev/null 2>&1 || die "no apt-get: install$missing by hand"
	echo "slurm-cluster: installing slurm-wlm munge" >&2
	# policy-rc.d or not, the packages' own daemons are not wanted here
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		slurm-wlm munge >&2 ||
		{ apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y \
			--no-install-recommends slurm-wlm munge >&2; } ||
		die "apt-get install slurm-wlm munge failed"
}

# The command prefix that enters the cluster's network namespace (when it
# has one).  nsenter, not ip netns exec, which would mount a sysfs of the
# namespace over /sys and so hide /sys/fs/cgroup, which slurmd 22.05
# looks at even without cgroup plugins.
ns_prefix() {
	if [ -s "$dir/netns" ]; then
		echo "nsenter --net=/run/netns/$(cat "$dir/netns")"
	fi
}

# Run "$@" in the cluster's namespace.
in_ns() {
	# shellcheck disable=SC2046
	$(ns_prefix) "$@"
}

# A free TCP port on this machine's loopback, from $1 up.
free_port() {
	p=$1
	while ss -Htln "sport = :$p" 2>/dev/null | grep -q . && [ "$p" -lt 65000 ]; do
		p=$((p + 1))
	done
	echo "$p"
}

# Start a daemon in its foreground mode, in the background (exec: $! is the
# daemon); record its pid for down.
start() {
	name=$1
	shift
	# shellcheck disable=SC2046
	(exec $(ns_prefix) "$@" >>"$dir/$name.out" 2>&1 </dev/null) &
	echo "$name $!" >>"$dir/pids"
}

cmd_up() {
	[ $# = 1 ] || die "usage: slurm-cluster.sh up DIR"
	[ "$(id -u)" = 0 ] || die "not root (the daemons run as root)"
	for c in munged slurmctld slurmd srun sinfo; do
		command -v $c >/dev/null 2>&1 || die "no $c (slurm-cluster.sh install)"
	done
	mkdir -p "$1" || exit 1
	dir=$(cd "$1" && pwd)
	if [ -s "$dir/pids" ]; then
		while read -r name pid; do
			kill -0 "$pid" 2>/dev/null &&
				die "$dir: a cluster is up there ($name $pid; slurm-cluster.sh down $dir)"
		done <"$dir/pids"
	fi
	rm -rf "$dir/munge" "$dir/ctld" "$dir/spool" "$dir"/*.log "$dir"/*.out "$dir"/*.pid \
		"$dir/netns" "$dir/pids"
	mkdir -p "$dir/munge" "$dir/ctld" "$dir/spool"
	chmod 700 "$dir/munge"
	: >"$dir/pids"
	ctld_port=6817
	d_port=6818
	ns=ncf-$PPID-slurm # the caller's pid: see nethosts.sh
	if [ -n "${NCF_SLURM_NO_NETNS:-}" ] || ! ip netns add "$ns" 2>/dev/null; then
		ctld_port=$(free_port 16817)
		d_port=$(free_port $((ctld_port + 1)))
		echo "slurm-cluster: no network namespace; ports $ctld_port, $d_port" >&2
	else
		echo "$ns" >"$dir/netns"
		ip -n "$ns" link set lo up
		# An address besides loopback, which getaddrinfo(AI_ADDRCONFIG)
		# wants before it resolves anything; the traffic stays on lo.
		ip -n "$ns" link add v0 type veth peer name v1 &&
			ip -n "$ns" addr add 10.213.255.1/24 dev v0 &&
			ip -n "$ns" link set v0 up && ip -n "$ns" link set v1 up ||
			die "cannot give $ns an address"
	fi
	host=$(hostname -s)
	# munge: a key of its own; munged checks that the key is private.
	dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
	chmod 400 "$dir/munge/munge.key"
	start munged munged --foreground --force --key-file="$dir/munge/munge.key" \
		--socket="$dir/munge/munge.socket.2" --pid-file="$dir/munge/munged.pid" \
		--log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
	cat >"$dir/slurm.conf" <<EOF
# One-node Slurm cluster for ncf's tests, made by scripts/slurm-cluster.sh.
ClusterName=ncftest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket.2
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=pmix
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MessageTimeout=5
KillWait=5
MinJobAge=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
	# wait for munged's socket before the others use it
	for _ in $(seq 50); do [ -S "$dir/munge/munge.socket.2" ] && break; sleep 0.1; done
	[ -S "$dir/munge/munge.socket.2" ] ||
		die "munged did not start: $(tail -n 3 "$dir/munge/munged.log" "$dir/munged.out")"
	start slurmctld slurmctld -D -i -f "$dir/slurm.conf"
	start slurmd slurmd -D -f "$dir/slurm.conf" -N "$host"
	state=""
	for _ in $(seq 100); do
		while read -r name pid; do
			kill -0 "$pid" 2>/dev/null ||
				die "$name ended: $(tail -n 4 "$dir/$name.out" | tr '\n' ' ')"
		done <"$dir/pids"
		state=$(SLURM_CONF=$dir/slurm.conf in_ns sinfo -h -N -o %t 2>/dev/null)
		[ "$state" = idle ] && break
		sleep 0.3
	done
	[ "$state" = idle ] || die "the node did not become idle (state '$state'); see $dir/*.log"
}

cmd_exec() {
	[ $# -ge 2 ] || die "usage: slurm-cluster.sh exec DIR CMD..."
	dir=$1
	shift
	[ -f "$dir/slurm.conf" ] || die "no cluster in $dir"
	SLURM_CONF=$dir/slurm.conf
	export SLURM_CONF
	in_ns "$@"
}

cmd_down() {
	[ $# = 1 ] || die "usage: slurm-cluster.sh down DIR"
	dir=$1
	[ -f "$dir/pids" ] || return 0
	# slurmd first (it ends its job steps), then slurmctld, munged last
	for name in slurmd slurmctld munged; do
		pid=$(awk -v n=$name '$1 == n { print $2 }' "$dir/pids")
		[ -n "$pid" ] || continue
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
	done
	if [ -s "$dir/netns" ]; then
		ns=$(cat "$dir/netns")
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null # a job step left behind, started there
		done
		ip netns del "$ns" 2>/dev/null
		: >"$dir/netns"
	fi
	: >"$dir/pids"
}

[ $# -ge 1 ] || die "usage: slurm-cluster.sh install | up DIR | exec DIR CMD... | down DIR"
c=$1
shift
case $c in
install) cmd_install ;;
up) cmd_up "$@" ;;
exec) cmd_exec "$@" ;;
down) cmd_down "$@" ;;
*) die "unknown command '$c'" ;;
esac
