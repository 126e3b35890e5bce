#!/bin/sh
# bench-nodes.sh BIN - make bench-nodes: 2 ranks over TCP between two
# network-namespace hosts (scripts/nethosts.sh) against 2 ranks over shared
# memory on one host, alternately (A B A B ...) in one run so that both
# see the same machine; per run and in the end (min and median): training
# samples/s (ncf-train's summary: the mean over epochs, all ranks) and the
# share of training time in the gradient all-reduce.  Root and network
# namespaces needed.
#
# Environment: BENCH_NODES_ROUNDS (pairs of runs, default 5),
# BENCH_NODES_FLAGS (ncf-train options, default "-e 3 -b 65536 --threads 1":
# NVIDIA's model, 8 steps an epoch of ml-latest-small), NCF_DATA (where
# ml-latest-small/ratings.csv is; else synthetic data of its shape).
set -u
BIN=${1:-build/bin}
ROOT=$(pwd)
HOSTS=$ROOT/scripts/nethosts.sh
ROUNDS=${BENCH_NODES_ROUNDS:-5}
FLAGS=${BENCH_NODES_FLAGS:--e 3 -b 65536 --threads 1}
DATA=${NCF_DATA:-$ROOT/../shared/data}
W=$ROOT/build/bench-nodes
PATH=$(cd "$BIN" && pwd):$PATH
export PATH
OMP_WAIT_POLICY=passive
export OMP_WAIT_POLICY

why=$(sh "$HOSTS" check 2>&1) || { echo "bench-nodes: $why" >&2; exit 1; }
command -v mpirun >/dev/null 2>&1 || { echo "bench-nodes: no mpirun" >&2; exit 1; }
mkdir -p "$W"
trap 'sh "$HOSTS" down "$W/net"' EXIT
trap 'exit 1' HUP INT TERM
rm -rf "$W/net"
sh "$HOSTS" up "$W/net" 2 || exit 1
if [ -s "$DATA/ml-latest-small/ratings.csv" ]; then
	src="$DATA/ml-latest-small/ratings.csv"
	ncf-prep -q -o "$W/data.ncfc" "$src" || exit 1
else
	src="synthetic ml-latest-small"
	ncf-prep -q --synthetic ml-latest-small -o "$W/data.ncfc" || exit 1
fi
cp "$W/data.ncfc" "$W/net/h0/data.ncfc"
cp "$W/data.ncfc" "$W/net/h1/data.ncfc"
cd "$W" || exit 1

cat <<EOF
2 ranks over TCP between network namespaces (A) against 2 ranks over shared memory (B),
alternately, $ROUNDS times each, on $(uname -n): $(nproc) CPUs, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)
data: $src; ncf-train $FLAGS
A: nethosts.sh exec net 0 mpirun $(cat net/mca) -np 2
B: mpirun --bind-to none -np 2 (vader, the shared-memory transport)
EOF
# "1.10M" -> 1100000
num() { awk -v x="$1" 'BEGIN { m = 1; if (x ~ /k$/) m = 1e3; if (x ~ /M$/) m = 1e6;
	if (x ~ /G$/) m = 1e9; sub(/[kMG]$/, "", x); printf "%.0f", x * m }'; }
one() { # name command...: appends "name samples/s share%" to results
	name=$1
	shift
	"$@" ncf-train "$name.ncfc" -o "$name.ncfm" $FLAGS >/dev/null 2>"$name.err" || {
		echo "run $name failed:" >&2
		tail -n 5 "$name.err" >&2
		exit 1
	}
	rate=$(sed -n 's/.*train throughput: mean \([0-9.]*[kMG]*\) samples\/s.*/\1/p' "$name.err")
	share=$(sed -n 's/.*; \([0-9.]*\)% of training time in the gradient all-reduce.*/\1/p' "$name.err")
	printf '  %-4s %-12s %14s %14s\n' "$i" "$name" "$(num "$rate")" "$share%"
	echo "$name $(num "$rate") $share" >>results
}
: >results
ln -sf net/local/data.ncfc tcp.ncfc # as host h0 and h1: each host's own copy
ln -sf data.ncfc shm.ncfc
printf '  %-4s %-12s %14s %14s\n' run transport samples/s all-reduce
i=1
while [ "$i" -le "$ROUNDS" ]; do
	one tcp sh "$HOSTS" exec "$W/net" 0 mpirun --allow-run-as-root $(cat net/mca) -np 2
	one shm mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2
	i=$((i + 1))
done
echo
printf '  %-12s %14s %14s %14s %14s\n' transport min_samples/s median min_all-reduce median
for name in tcp shm; do
	r=$(awk -v n=$name '$1 == n { print $2 }' results | sort -n | awk '{ v[NR] = $1 } END {
		printf "%d %d", v[1], (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
	s=$(awk -v n=$name '$1 == n { print $3 }' results | sort -n | awk '{ v[NR] = $1 } END {
		printf "%.1f%% %.1f%%", v[1], (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
	# shellcheck disable=SC2086
	printf '  %-12s %14s %14s %14s %14s\n' "$name" $r $s
done
