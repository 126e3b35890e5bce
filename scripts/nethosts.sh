#!/bin/sh
# nethosts.sh - test hosts on this one machine: network namespaces joined
# by veth pairs on a private subnet, for MPI across "nodes" over TCP
# (tests/cli/nodes.t, scripts/bench-nodes.sh; ncf-train(1) MANY PROCESSES).
#
#   nethosts.sh check              can hosts be made here? (root, ip netns,
#                                  veth, bind mounts); says why not, exit 1
#   nethosts.sh up DIR N           make hosts h0..h(N-1) described in DIR
#   nethosts.sh exec DIR K CMD...  run CMD as host hK
#   nethosts.sh down DIR           remove them (idempotent; for traps)
#
# Host hK is a network namespace ncf-PID-hK with loopback and one veth end
# named eth0 at 10.213.S.(K+1)/24; with 2 hosts the two ends face each
# other, with more each host's peer end sits on a bridge in a switch
# namespace ncf-PID-sw.  Every interface is created directly inside a
# namespace of its own: nothing is added to this machine's own network,
# so the traffic stays between the addresses made here, and runs side by
# side do not collide.  S is the first 10.213.S.0/24 absent from this
# machine's routes.
#
# A command run as hK (exec) also gets, in mount and UTS namespaces of
# its own: the host name hK, DIR/etc-hosts (the hosts' names and
# addresses) over /etc/hosts, and DIR/hK over DIR/local, so that one path
# names a different directory on every host, like a node-local disk.
#
# up writes into DIR:
#   hosts       an Open MPI hostfile: "hK slots=1" lines
#   etc-hosts   /etc/hosts for the hosts
#   agent       for mpirun --mca plm_rsh_agent: "agent HOST CMD" runs CMD
#               (the orted command line) as HOST, as ssh would
#   mca         the mpirun options for these hosts, TCP only, one line
#   subnet      10.213.S.0/24
#   netns       the namespaces made (what down removes)
#   h0 ... local  the hosts' own directories, and the mount point
set -u
ME=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

die() {
	echo "nethosts: $*" >&2
	exit 1
}

# Remove namespace $1 and what still runs in it: processes started there
# by the caller (a rank, an orted cut off from its mpirun), ended by id.
ns_del() {
	for pid in $(ip netns pids "$1" 2>/dev/null); do
		kill -KILL "$pid" 2>/dev/null
	done
	ip netns del "$1" 2>/dev/null # removes its veth ends too
}

# Remove the hosts of runs that were killed (their caller's PID is gone).
reap_stale() {
	for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(ncf-[0-9]*-[a-z0-9]*\).*/\1/p'); do
		pid=${ns#ncf-}
		pid=${pid%%-*}
		kill -0 "$pid" 2>/dev/null || ns_del "$ns"
	done
}

cmd_check() {
	[ "$(id -u)" = 0 ] || die "not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
	command -v ip >/dev/null 2>&1 || die "no ip command (iproute2)"
	command -v unshare >/dev/null 2>&1 || die "no unshare command (util-linux)"
	ns=ncf-$$-probe
	ip netns add "$ns" 2>/dev/null || die "ip netns add fails here (no network namespaces)"
	why=""
	if ! ip link add eth0 netns "$ns" type veth peer name eth1 netns "$ns" 2>/dev/null; then
		why="cannot create veth pairs"
	elif ! ip netns exec "$ns" sh -c 'd=$(mktemp -d) && mount --bind / "$d" && umount "$d" &&
		rmdir "$d"' 2>/dev/null; then
		why="cannot bind-mount inside a namespace"
	elif ! ip netns exec "$ns" unshare --uts true 2>/dev/null; then
		why="cannot make a UTS namespace (host names)"
	fi
	ip netns del "$ns"
	[ -z "$why" ] || die "$why"
	return 0
}

cmd_up() {
	[ $# = 2 ] || die "usage: nethosts.sh up DIR N"
	dir=$1
	n=$2
	[ "$n" -ge 2 ] 2>/dev/null && [ "$n" -le 200 ] || die "N must be 2..200"
	mkdir -p "$dir" || exit 1
	dir=$(cd "$dir" && pwd)
	reap_stale
	s=0
	while ip route show table all 2>/dev/null | grep -q "10\.213\.$s\." && [ $s -lt 255 ]; do
		s=$((s + 1))
	done
	[ $s -lt 255 ] || die "no free 10.213.S.0/24 subnet"
	p=ncf-$PPID # the caller, alive as long as the hosts are in use (see reap_stale)
	: >"$dir/netns"
	: >"$dir/hosts"
	echo "127.0.0.1 localhost" >"$dir/etc-hosts"
	echo "10.213.$s.0/24" >"$dir/subnet"
	mkdir -p "$dir/local"
	if [ "$n" -gt 2 ]; then
		ip netns add "$p-sw" || die "ip netns add $p-sw failed"
		echo "$p-sw" >>"$dir/netns"
		ip -n "$p-sw" link add br0 type bridge || die "cannot create a bridge"
		ip -n "$p-sw" link set br0 up
	fi
	k=0
	while [ $k -lt "$n" ]; do
		ip netns add "$p-h$k" || die "ip netns add $p-h$k failed"
		echo "$p-h$k" >>"$dir/netns"
		ip -n "$p-h$k" link set lo up
		echo "h$k slots=1" >>"$dir/hosts"
		echo "10.213.$s.$((k + 1)) h$k" >>"$dir/etc-hosts"
		mkdir -p "$dir/h$k"
		k=$((k + 1))
	done
	if [ "$n" = 2 ]; then
		ip link add eth0 netns "$p-h0" type veth peer name eth0 netns "$p-h1" ||
			die "cannot create a veth pair"
	else
		k=0
		while [ $k -lt "$n" ]; do
			ip link add eth0 netns "$p-h$k" type veth peer name "h$k" netns "$p-sw" ||
				die "cannot create a veth pair"
			ip -n "$p-sw" link set "h$k" master br0 up
			k=$((k + 1))
		done
	fi
	k=0
	while [ $k -lt "$n" ]; do
		ip -n "$p-h$k" addr add "10.213.$s.$((k + 1))/24" dev eth0
		ip -n "$p-h$k" link set eth0 up
		k=$((k + 1))
	done
	cat >"$dir/agent" <<EOF
#!/bin/sh
# plm_rsh_agent for the hosts of $dir: "agent HOST CMD..." runs CMD as HOST.
h=\$1
shift
exec sh "$ME" exec "$dir" "\${h#h}" sh -c "\$*"
EOF
	chmod +x "$dir/agent"
	# --bind-to none: the hosts share this machine's cores, and each one's
	# orted would bind its first rank to core 0
	echo "--hostfile $dir/hosts --mca plm_rsh_agent $dir/agent --mca btl tcp,self" \
		"--mca btl_tcp_if_include 10.213.$s.0/24 --mca oob_tcp_if_include 10.213.$s.0/24" \
		"--bind-to none" >"$dir/mca"
}

cmd_exec() {
	[ $# -ge 3 ] || die "usage: nethosts.sh exec DIR K CMD..."
	dir=$1
	k=$2
	shift 2
	ns=$(sed -n "/-h$k\$/p" "$dir/netns" 2>/dev/null)
	[ -n "$ns" ] || die "no host h$k in $dir"
	exec ip netns exec "$ns" unshare --uts sh -c '
		dir=$1 k=$2
		shift 2
		hostname "h$k" &&
		mount --bind "$dir/etc-hosts" /etc/hosts &&
		mount --bind "$dir/h$k" "$dir/local" &&
		exec "$@"' sh "$dir" "$k" "$@"
}

cmd_down() {
	[ $# = 1 ] || die "usage: nethosts.sh down DIR"
	[ -f "$1/netns" ] || return 0
	while read -r ns; do
		ns_del "$ns"
	done <"$1/netns"
	: >"$1/netns"
}

[ $# -ge 1 ] || die "usage: nethosts.sh check | up DIR N | exec DIR K CMD... | down DIR"
c=$1
shift
case $c in
check) cmd_check ;;
up) cmd_up "$@" ;;
exec) cmd_exec "$@" ;;
down) cmd_down "$@" ;;
*) die "unknown command '$c'" ;;
esac
