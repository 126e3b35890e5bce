#!/bin/bash
# nodes.t - ncf-train across hosts over TCP: two test hosts made
# of network namespaces joined by a veth pair, then three on a bridge
# (scripts/nethosts.sh), Open MPI started across them with an orted inside
# each host's namespace (plm_rsh_agent in place of ssh), TCP only, each
# host reading its own copy of the cache from its own directory.  Two ranks must give the one-rank
# parameters and HR@10 (tests/ranks.sh); a rank killed, a rank hung and a
# network gone down must each end the job, non-zero, with ncf's message,
# within a time limit.
#
# Needs root and working network namespaces; without them the file is
# skipped saying why, except under make check-nodes (NCF_REQUIRE_NODES=1),
# where that is a failure.
. "$(dirname "$0")/../lib.sh"
need() {
	[ "${NCF_REQUIRE_NODES:-0}" = 1 ] && bail "make check-nodes: $*"
	skip_all "$*"
}
command -v mpirun >/dev/null 2>&1 || need "mpirun not installed"
ncf-train -vV 2>/dev/null | grep -q '^features:.* mpi' || need "built without MPI"
HOSTS=$NCF_ROOT/scripts/nethosts.sh
why=$(sh "$HOSTS" check 2>&1) || need "no test hosts here: ${why#nethosts: }"
cd "$T"
trap 'sh "$HOSTS" down "$T/net"; rm -rf "$T"' EXIT
trap 'exit 1' HUP INT TERM
sh "$HOSTS" up "$T/net" 2 || bail "nethosts.sh up failed"
MCA=$(cat net/mca)
diag "hosts h0, h1 on $(cat net/subnet): mpirun $MCA"
. "$NCF_ROOT/tests/ranks.sh"

ncf-prep -q --synthetic ml-latest-small -o data.ncfc
cp data.ncfc net/h0/data.ncfc
cp data.ncfc net/h1/data.ncfc
# mpirun runs as host h0; its orted for h1 is started by net/agent inside
# h1.  Each rank reads net/local/data.ncfc: on every host, its own copy.
# OMPI_MCA_* in the environment would reach mpirun too; none is needed.
MPIRUN="sh $HOSTS exec $T/net 0 timeout 120 mpirun --allow-run-as-root $MCA -np 2"
rx_bytes() { sh "$HOSTS" exec "$T/net" 1 cat /sys/class/net/eth0/statistics/rx_bytes; }

ncf-train -q data.ncfc -o one8.ncfm $RANKS_SHORT
rx0=$(rx_bytes)
run $MPIRUN ncf-train -v net/local/data.ncfc -o two8.ncfm $RANKS_SHORT
ok $status "mpirun across hosts h0 and h1 (status $status)"
like "$err" "rank 0 of 2, local rank 0 of 1 on h0" "rank 0 runs on h0, alone there"
like "$err" "rank 1 of 2, local rank 0 of 1 on h1" "rank 1 runs on h1, alone there"
ranks_same_params one8.ncfm.last two8.ncfm.last "2 ranks on 2 hosts over TCP"
# Two ranks add the same two numbers whichever way the halves travel.
mpirun --allow-run-as-root --oversubscribe -np 2 ncf-train -q data.ncfc -o shm8.ncfm $RANKS_SHORT
cmp -s shm8.ncfm.last two8.ncfm.last
ok $? "over TCP between hosts: the bytes of 2 ranks over shared memory on one host"
# The gradients crossed the veth: 8 all-reduces of the whole parameter
# vector (10172 rows of 16 + 32 floats, the MLP and head are small), of
# which an all-reduce of 2 ranks moves at least half each way.
rx=$(($(rx_bytes) - rx0))
diag "h1's eth0 received $rx bytes"
[ "$rx" -ge $((8 * 10172 * 48 * 4 / 2)) ]
ok $? "the gradients went over h1's network interface"

ncf-train -q data.ncfc -o one.ncfm $RANKS_LONG
run $MPIRUN ncf-train net/local/data.ncfc -o two.ncfm $RANKS_LONG
ok $status "2 epochs across the hosts"
ranks_same_hr one.ncfm.last two.ncfm.last data.ncfc "2 ranks on 2 hosts over TCP"
run $MPIRUN ncf-eval -m one.ncfm.last net/local/data.ncfc
is "$(awk -F'\t' '$1 == "hr@10" { print $2 }' "$out")" "$_hr1" "ncf-eval across the hosts: the same HR@10"

# Each host reads its own copy: a stale one on h1 is found and refused.
ncf-prep -q --synthetic ml-latest-small --seed 2 -o net/h1/data.ncfc
run $MPIRUN ncf-train net/local/data.ncfc -o mm.ncfm $RANKS_SHORT
[ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "a different cache on h1 stops the job (status $status)"
like "$err" "rank 1 of 2: its cache differs from rank 0's" "and says that rank 1's differs"
cp data.ncfc net/h1/data.ncfc

# Start a long job in the background, wait until both ranks train, then
# do "$@" to rank 1 ($pid, in h1); sets $status, $err and $secs (from the
# deed to the end of mpirun).  The time limit is 60 s: a hang ends with
# timeout's 124.  The keepalive options let mpirun notice within about
# 6 s that h1's orted is cut off (the default is 300 s + 9 * 20 s).
LONG="-e 50 -b 1024 --factors 16 --layers 64,32,16 --threads 1"
H1=$(sed -n '/-h1$/p' net/netns)
break_job() {
	err=$T/err.break.$1
	shift
	sh "$HOSTS" exec "$T/net" 0 timeout 60 mpirun --allow-run-as-root $MCA -np 2 \
		--mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 \
		--mca oob_tcp_keepalive_probes 4 -x NCF_DIST_TIMEOUT \
		ncf-train -v net/local/data.ncfc -o dead.ncfm $LONG >/dev/null 2>"$err" &
	job=$!
	pid=""
	for _ in $(seq 300); do
		grep -q "each taking 1/2" "$err" 2>/dev/null && break # about to train
		sleep 0.1
	done
	sleep 1 # in the middle of the first epoch
	for p in $(ip netns pids "$H1"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = ncf-train ] && pid=$p
	done
	[ -n "$pid" ] || diag "no ncf-train in h1 to break"
	t0=$(date +%s.%N)
	[ -z "$pid" ] || "$@"
	wait $job
	status=$?
	secs=$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.1f", $1 - $2 }')
}
# Is ncf-train still running on h1 (after up to $1 s)?
left_on_h1() {
	for _ in $(seq $(($1 * 10))); do
		left=""
		for p in $(ip netns pids "$H1"); do
			[ "$(cat "/proc/$p/comm" 2>/dev/null)" = ncf-train ] && left=$p
		done
		[ -z "$left" ] && return 1
		sleep 0.1
	done
	return 0
}
export NCF_DIST_TIMEOUT=5
# Killed: h1's orted sees it and mpirun ends the job (SIGTERM, then SIGKILL
# after 1 s); rank 0, blocked in the all-reduce, says why it stops.
break_job kill eval 'kill -KILL $pid'
[ -n "$pid" ] && [ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "rank 1 killed on h1: the job ends (status $status after $secs s)"
like "$err" "rank 0 of 2: signal 15 .*while waiting .* for the other ranks in MPI_Allreduce" \
	"rank 0 says it was stopped while waiting for the others"
like "$err" "rank 1 .* on node h1 exited on signal 9" "mpirun names the rank killed"
# Hung (SIGSTOP): no launcher notices; rank 0's watchdog ends the job
# after NCF_DIST_TIMEOUT = 5 s without an answer.
break_job stop eval 'kill -STOP $pid'
[ -n "$pid" ] && [ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "rank 1 hung on h1: the job ends (status $status after $secs s)"
like "$err" "rank 0 of 2: no answer from the other ranks for [0-9]+ s in MPI_Allreduce" \
	"rank 0 says it got no answer"
unlike "$err" "rank 1 of 2: no answer" "rank 1, stopped then ended, blames no one"
# The network between the hosts down: nothing reaches anyone.  Rank 0's
# watchdog ends rank 0 after 3 s (before mpirun's keepalive gives up on
# h1), and with it the job; rank 1's ends rank 1, whose message cannot
# reach mpirun any more.
NCF_DIST_TIMEOUT=3 break_job net eval 'ip -n "$H1" link set eth0 down'
[ -n "$pid" ] && [ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "the network to h1 down: the job ends (status $status after $secs s)"
like "$err" "rank 0 of 2: no answer from the other ranks for [0-9]+ s" "rank 0 says it got no answer"
! left_on_h1 10
ok $? "rank 1 ends on h1 too"

# More hosts: three on a bridge (a switch namespace), one rank each.
sh "$HOSTS" down "$T/net"
rm -rf net
if ! why=$(sh "$HOSTS" up "$T/net" 3 2>&1); then
	case $why in
	*bridge*) skip "3 hosts: ${why#nethosts: }" ;;
	*) bail "nethosts.sh up 3 failed: $why" ;;
	esac
	done_testing
fi
MCA=$(cat net/mca)
for k in 0 1 2; do cp data.ncfc net/h$k/data.ncfc; done
run sh "$HOSTS" exec "$T/net" 0 timeout 120 mpirun --allow-run-as-root $MCA -np 3 \
	ncf-train -v net/local/data.ncfc -o three8.ncfm $RANKS_SHORT
ok $status "mpirun across hosts h0, h1 and h2 (status $status)"
like "$err" "rank 2 of 3, local rank 0 of 1 on h2" "rank 2 runs on h2"
ranks_same_params one8.ncfm.last three8.ncfm.last "3 ranks on 3 hosts over TCP"
done_testing
