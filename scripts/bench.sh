#!/bin/sh
# bench.sh BIN - make bench: the benchmark tables.
#
#   1. ncf-prep on a synthetic ml-20m-shaped CSV (20,000,263 ratings), in
#      memory and within -S 100M (sorted runs in TMPDIR): MB/s, seconds per
#      stage, peak memory, cache/CSV size ratio, whether both caches are the
#      same bytes (BENCH_LARGE=1 adds ml-20mx10, 200M ratings, ~5 GB of CSV,
#      some 5.5 GB of memory in memory: not in the usual run for its time);
#      then 50,000 to 200,000 users with ids chosen to collide in a hash
#      table beside as many random ids: seconds and peak memory of each;
#   2. CPU training at batch 2^20 on ml-20m-shaped data, fp32 and bf16 side
#      by side (NVIDIA's training table: throughput per precision and the
#      speedup): samples/s, dense FLOP rate against this machine's sgemm
#      rate (and bf16 product rate) measured in the same run, evaluation
#      throughput, peak memory; the dense products per shape and library
#      (bench_matmul) and the ISA oneDNN uses; seconds per epoch on
#      ml-latest-small (../shared/data, else synthetic of its shape);
#   3. many processes: 1 and 2 CPU ranks (mpirun), samples/s per rank and
#      the fraction of step time in the all-reduce;
#   4. inference on the CPU with a random ml-20m-sized model, fp32 and
#      bf16: NVIDIA's tables (throughput per batch size and precision with
#      the speedup, then latency mean/p90/p95/p99 per precision);
#   5. the GPU part, when the cuda backend is built and a GPU is usable:
#      build/bench/bench_gpu (NVIDIA's training table per precision, epoch
#      time, evaluation time, fractions of peak) and ncf-infer --bench on
#      the GPU in bf16 (tf32 too);
#   6. how OpenMP's threads wait (cli/omp_wait.h, ncf(7) THREADS): training
#      (one epoch of ml-latest-small at batch 8192) and scoring (ncf-infer
#      --bench at 4096) with each policy, 1 and 2 threads, on the machine
#      as it is and with every core busy (a `yes` per core), the policies
#      alternating, BENCH_OMP_REPS runs each (default 3): min and median.
#
# Generated data live in build/bench (reused between runs).  Environment:
# BENCH_STEPS (timed training steps, default 3), BENCH_LARGE=1, NCF_DATA,
# BENCH_OMP_REPS, BENCH_ONLY=omp (the last table only).
set -eu
BIN=${1:-build/bin}
ROOT=$(pwd)
BENCHBIN=$ROOT/build/bench
W=$ROOT/build/bench-data
mkdir -p "$W"
STEPS=${BENCH_STEPS:-3}
DATA=${NCF_DATA:-$ROOT/../shared/data}
TIME=/usr/bin/time
[ -x "$TIME" ] || TIME=""

say() { printf '\n== %s\n' "$*"; }
# peak RSS in MB and wall seconds of a command: sets PEAK_MB and WALL_S
measure() {
	if [ -n "$TIME" ]; then
		"$TIME" -f '%e %M' -o "$W/time.out" "$@"
		WALL_S=$(cut -d' ' -f1 "$W/time.out")
		PEAK_MB=$(awk '{ printf "%.1f", $2 / 1024 }' "$W/time.out")
	else
		t0=$(date +%s.%N)
		"$@"
		WALL_S=$(echo "$(date +%s.%N) - $t0" | bc)
		PEAK_MB=n/a
	fi
}

cat <<EOF
ncf benchmarks on $(uname -n): $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)
EOF

prep_bench() { # shape [-S SIZE]: one row, in memory (the default budget) or within -S
	shape=$1
	shift
	budget=${2:-default}
	csv=$W/$shape.csv
	cache=$W/$shape${1:+-S$2}.ncfc
	[ -s "$csv" ] || "$BIN/ncf-prep" -q --synthetic "$shape" --emit-csv -o "$csv"
	bytes=$(stat -c %s "$csv")
	measure "$BIN/ncf-prep" -vv "$@" -o "$cache" "$csv" 2>"$W/prep.err"
	cache_bytes=$(stat -c %s "$cache")
	ratings=$(awk -F'\t' '$1 == "ratings_read" { print $2 }' <<EOF
$("$BIN/ncf-prep" --info "$cache")
EOF
)
	runs=$(sed -n 's/.*spill: [0-9]* ratings in \([0-9]*\) runs.*/\1/p' "$W/prep.err")
	stages=$(sed -n 's/.*time read \([0-9.]*\) s.*index \([0-9.]*\) s, protocol \([0-9.]*\) s, oracle [0-9.]* s, write \([0-9.]*\) s.*/\1 \2 \3 \4/p' "$W/prep.err")
	echo "$shape $budget ${runs:-0} $ratings $bytes $WALL_S $stages $PEAK_MB $cache_bytes" | awk '{
		printf "%-10s %-8s %5d %11d %9.1f %8.2f %8.1f %7.2f %7.2f %8.2f %8.2f %8s %9.1f %9.4f\n",
			$1, $2, $3, $4, $5 / 1e6, $6, $5 / 1e6 / $6, $7, $8, $9, $10, $11, $12 / 1e6, $12 / $5 }'
}
prep_header() {
	printf '%-10s %-8s %5s %11s %9s %8s %8s %7s %7s %8s %8s %8s %9s %9s\n' shape budget runs ratings csv_MB seconds MB/s read_s index_s proto_s write_s peak_MB cache_MB cache/csv
}
# a shape in memory and within -S 100M (sorted runs in TMPDIR), and whether
# the two caches are the same bytes
prep_pair() {
	prep_bench "$1"
	prep_bench "$1" -S 100M
	if cmp -s "$W/$1.ncfc" "$W/$1-S100M.ncfc"; then same=yes; else same=NO; fi
	echo "  $1: the cache made within -S 100M is the same bytes as in memory (cmp): $same"
}

# --- OpenMP waiting: the table (section 6), defined here, run last ---------
# omp_env POLICY: the environment that sets it (libgomp's default spins
# 300,000 rounds; GOMP_SPINCOUNT=N with no OMP_WAIT_POLICY spins N)
omp_env() {
	case $1 in
	active) echo OMP_WAIT_POLICY=active ;;
	passive) echo OMP_WAIT_POLICY=passive ;;
	spin-300k) echo GOMP_SPINCOUNT=300000 ;;
	spin-10k) echo GOMP_SPINCOUNT=10000 ;;
	spin-1k) echo GOMP_SPINCOUNT=1000 ;;
	esac
}
# omp_run WORK THREADS POLICY: samples/s of one run
omp_run() {
	if [ "$1" = train ]; then
		env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT $(omp_env "$3") "$BIN/ncf-train" -q "$W/omp.ncfc" \
			-o "$W/omp.ncfm" -e 1 -b 8192 -l 0.002 --device cpu --threads "$2" --log - |
			sed -n 's/.*"train_throughput": \([0-9.]*\).*/\1/p' | head -n 1
	else
		env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT $(omp_env "$3") "$BIN/ncf-infer" --bench \
			-m "$W/omp-score.ncfm" --device cpu --threads "$2" -b 4096 --warmup 20 \
			--iterations 300 2>/dev/null | awk -F'\t' 'NR == 2 { print $2 }'
	fi
}
# omp_summary DEFAULT RUNS: the table of RUNS ("work threads load policy
# samples/s" lines): min and median per policy, the median over the best
# median of its group, ncf's default marked
omp_summary() {
	awk -v ours="$1" '
		function env(p) {
			if (p == "active") return "OMP_WAIT_POLICY=active"
			if (p == "passive") return "OMP_WAIT_POLICY=passive"
			if (p == "spin-300k") return "GOMP_SPINCOUNT=300000"
			if (p == "spin-10k") return "GOMP_SPINCOUNT=10000"
			return "GOMP_SPINCOUNT=1000"
		}
		{
			k = $1 " " $2 " " $3 " " $4
			n[k]++
			v[k, n[k]] = $5
			if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
		}
		END {
			printf "  %-6s %-7s %-6s %-24s %11s %11s %6s\n", "work", "threads", "load", "policy", "min", "median", "/best"
			for (i = 1; i <= nk; i++) {
				k = keys[i]; m = n[k]
				for (a = 1; a <= m; a++) s[a] = v[k, a]
				for (a = 1; a <= m; a++)
					for (b = a + 1; b <= m; b++)
						if (s[b] < s[a]) { t = s[a]; s[a] = s[b]; s[b] = t }
				med[k] = m % 2 ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
				lo[k] = s[1]
				split(k, f, " ")
				g = f[1] " " f[2] " " f[3]
				if (med[k] > best[g]) best[g] = med[k]
			}
			for (i = 1; i <= nk; i++) {
				k = keys[i]; split(k, f, " "); g = f[1] " " f[2] " " f[3]; e = env(f[4])
				mark = e == ours ? "  <- default" : ""
				rel = best[g] > 0 ? med[k] / best[g] : 0
				printf "  %-6s %-7s %-6s %-24s %11.0f %11.0f %6.2f%s\n", f[1], f[2], f[3], e, lo[k], med[k], rel, mark
			}
		}' "$2"
}
omp_table() {
	POLICIES="active passive spin-300k spin-10k spin-1k"
	REPS=${BENCH_OMP_REPS:-3}
	ours=$(sed -n 's/^#define NCF_OMP_WAIT_DEFAULT "\(.*\)"/\1/p' "$ROOT/cli/omp_wait.h")
	say "OpenMP waiting: samples/s per policy, min and median of $REPS runs (policies alternating; busy: a yes per core; ncf's default: $ours)"
	if [ -s "$DATA/ml-latest-small/ratings.csv" ]; then
		"$BIN/ncf-prep" -q -o "$W/omp.ncfc" "$DATA/ml-latest-small/ratings.csv"
	else
		"$BIN/ncf-prep" -q --synthetic ml-latest-small -o "$W/omp.ncfc"
	fi
	OMP_WAIT_POLICY=passive "$BIN/ncf-train" -q "$W/omp.ncfc" -o "$W/omp-score.ncfm" -e 1 -b 8192 \
		-l 0.002 --device cpu
	: >"$W/omp.runs"
	for load in quiet busy; do
		pids=""
		if [ $load = busy ]; then
			for k in $(seq "$(nproc)"); do yes >/dev/null & pids="$pids $!"; done
		fi
		for work in train score; do
			for th in 1 2; do
				for r in $(seq "$REPS"); do
					# each run starts the rotation one policy later
					set -- $POLICIES
					for k in $(seq $(((r - 1) % 5))); do p=$1; shift; set -- "$@" "$p"; done
					for p in "$@"; do
						echo "$work $th $load $p $(omp_run $work $th $p)" >>"$W/omp.runs"
					done
				done
			done
		done
		for p in $pids; do kill "$p"; done
	done
	omp_summary "$ours" "$W/omp.runs"
	echo "  load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs; other work on the machine counts)"
}
if [ "${BENCH_ONLY:-}" = omp ]; then
	omp_table
	exit 0
fi

say "ncf-prep: synthetic ml-20m-shaped CSV to cache, in memory and within -S 100M (target: <= 15 s, <= 2 GB; runs: sorted runs spilled to TMPDIR)"
prep_header
prep_pair ml-20m
if [ "${BENCH_LARGE:-0}" = 1 ]; then
	say "ncf-prep: ml-20mx10 (200M ratings, a 5 GB CSV in build/bench-data, removed after)"
	prep_header
	prep_pair ml-20mx10
	rm -f "$W/ml-20mx10.csv" "$W/ml-20mx10.ncfc" "$W/ml-20mx10-S100M.ncfc"
fi

say "ncf-prep: users whose ids were chosen to collide under the unkeyed mix its id map once hashed with (tests/tools/crafted_ids: every id in one run of slots, quadratic there), beside as many random ids; both now cost the same (one rating per user)"
printf '%-8s %9s %10s %8s %9s %14s\n' users crafted_s crafted_MB random_s random_MB crafted/random
for n in 50000 100000 200000; do
	for kind in crafted random; do
		[ -s "$W/ids-$kind-$n.csv" ] || "$ROOT/build/tests/tools/crafted_ids" $kind $n >"$W/ids-$kind-$n.csv"
		measure "$BIN/ncf-prep" -q -o "$W/ids-$kind.ncfc" "$W/ids-$kind-$n.csv"
		eval "${kind}_s=\$WALL_S ${kind}_mb=\$PEAK_MB"
	done
	echo "$n $crafted_s $crafted_mb $random_s $random_mb" | awk '{
		printf "%-8d %9.2f %10s %8.2f %9s %14.2f\n", $1, $2, $3, $4, $5, ($4 > 0 ? $2 / $4 : 0) }'
done

# side KEY-FILE-FP32 KEY-FILE-BF16: key<TAB>value lines of both as one
# table, key fp32 bf16 (- where one lacks the key), in the first's order
side() {
	awk -F'\t' 'FNR == 1 { f++ } f == 1 { k[++n] = $1; a[$1] = $2; next }
		{ b[$1] = $2; if (!($1 in a)) k[++n] = $1 }
		END { printf "  %-32s %-42s %s\n", "", "fp32", "bf16"
		      for (i = 1; i <= n; i++) printf "  %-32s %-42s %s\n", k[i],
			(k[i] in a) ? a[k[i]] : "-", (k[i] in b) ? b[k[i]] : "-" }' "$1" "$2"
}
# kv KEY FILE: the value of KEY in key<TAB>value lines
kv() { awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$2"; }

say "ncf-train, cpu backend: batch 2^20 on ml-20m-shaped data, fp32 and bf16 ($STEPS timed steps each; targets >= 150,000 samples/s in fp32, dense layers >= 50% of sgemm; bf16 >= 1.6x fp32)"
[ -s "$W/ml-20m.ncfc" ] || "$BIN/ncf-prep" -q --synthetic ml-20m -o "$W/ml-20m.ncfc"
for prec in fp32 bf16; do
	if measure "$BENCHBIN/bench_train" "$W/ml-20m.ncfc" --batch 1048576 --steps "$STEPS" --warmup 1 \
		--precision $prec >"$W/train-$prec.out" 2>"$W/train-$prec.err"; then
		echo "peak_rss_mb_total	$PEAK_MB" >>"$W/train-$prec.out"
	else
		echo "unavailable	$(tail -n 1 "$W/train-$prec.err")" >"$W/train-$prec.out"
	fi
done
cp "$W/train-fp32.out" "$W/train.out"
side "$W/train-fp32.out" "$W/train-bf16.out"
f=$(kv samples_per_s "$W/train-fp32.out") b=$(kv samples_per_s "$W/train-bf16.out")
echo "$f $b" | awk '$1 > 0 && $2 > 0 { printf "  training throughput, samples/s (NVIDIA'"'"'s columns): fp32 %.0f, bf16 %.0f, speedup %.2f\n", $1, $2, $2 / $1 }'

if [ -x "$BENCHBIN/bench_matmul" ]; then
	say "the dense products alone: GFLOP/s per product of NVIDIA's shapes, every thread its own (bench_matmul)"
	"$BENCHBIN/bench_matmul" 2>&1 | sed 's/^/  /'
	isa=$(ONEDNN_VERBOSE=1 "$BENCHBIN/bench_matmul" --reps 1 2>/dev/null | sed -n 's/^onednn_verbose,info,cpu,isa://p' | head -n 1)
	echo "  oneDNN's ISA here (ONEDNN_VERBOSE): ${isa:-not reported}"
fi

say "ncf-train checkpoints, ml-20m-sized model: the snapshot (on the training clock), a write with zstd on one thread (before), with workers (the writer thread), the copy to -o (seconds, min and median of 3)"
measure "$BENCHBIN/bench_save" "$W" --reps 3 >"$W/save.out"
sed 's/^/  /' "$W/save.out"
echo "  peak_rss_mb_total	$PEAK_MB"

say "ncf-train, cpu backend: seconds per epoch on ml-latest-small (batch 16384)"
if [ -s "$DATA/ml-latest-small/ratings.csv" ]; then
	"$BIN/ncf-prep" -q -o "$W/mls.ncfc" "$DATA/ml-latest-small/ratings.csv"
	src="ml-latest-small (GroupLens)"
else
	"$BIN/ncf-prep" -q --synthetic ml-latest-small -o "$W/mls.ncfc"
	src="synthetic ml-latest-small (../shared/data absent)"
fi
measure "$BIN/ncf-train" "$W/mls.ncfc" -o "$W/mls.ncfm" -e 2 -b 16384 --log "$W/mls.jsonl" 2>/dev/null
echo "  data: $src; peak memory $PEAK_MB MB"
awk -F'[:,] *' '/"summary": true/ { next } { for (i = 1; i < NF; i++) { k = $i; gsub(/[{" ]/, "", k); v[k] = $(i + 1) }
	printf "  epoch %d: train %.2f s (%.0f samples/s), eval %.3f s, hr@10 %.4f\n",
		v["epoch"], v["train_time"], v["train_throughput"], v["eval_time"], v["hr@10"] }' "$W/mls.jsonl"

if command -v mpirun >/dev/null 2>&1 && [ -s "$W/ml-20m.ncfc" ]; then
	say "many processes, cpu backend: 1 and 2 ranks of 1 thread each, batch 2^20, ml-20m-shaped"
	printf '  %-6s %-8s %14s %18s %20s\n' ranks threads samples/s per_rank_samples/s allreduce_fraction
	for np in 1 2; do
		mpirun --allow-run-as-root --oversubscribe -np $np "$BENCHBIN/bench_train" "$W/ml-20m.ncfc" \
			--batch 1048576 --steps 2 --warmup 1 --threads 1 >"$W/mpi$np.out" 2>"$W/mpi$np.err" || {
			echo "  mpirun -np $np failed:"; sed 's/^/    /' "$W/mpi$np.err"; continue; }
		awk -F'\t' -v np=$np '{ v[$1] = $2 } END {
			printf "  %-6d %-8d %14.0f %18.0f %20.4f\n", np, v["threads"], v["samples_per_s"],
				v["rank_samples_per_s"], v["allreduce_fraction"] }' "$W/mpi$np.out"
	done
fi

say "ncf-infer --bench, cpu backend, random ml-20m-sized model, fp32 and bf16 (NVIDIA's tables; 3 warm-up + 30 timed passes per batch size; target >= 500,000 samples/s at 1,048,576)"
for prec in fp32 bf16; do
	if measure "$BIN/ncf-infer" --bench --random-model --device cpu --precision $prec --warmup 3 \
		--iterations 30 >"$W/infer-$prec.out" 2>"$W/infer-$prec.err"; then
		echo "  $prec: peak memory $PEAK_MB MB"
	else
		echo "  $prec: unavailable: $(tail -n 1 "$W/infer-$prec.err")"
		: >"$W/infer-$prec.out"
	fi
done
cp "$W/infer-fp32.out" "$W/infer.out"
echo "  throughput, samples/s (pairs kept where the backend computes, as inference.py; on the CPU that is host memory: one pass per iteration)"
awk -F'\t' 'FNR == 1 { f++; next } { t[f, $1] = $2; if (f == 1) k[++n] = $1 }
	END { printf "  %10s %16s %16s %8s\n", "batch_size", "throughput_fp32", "throughput_bf16", "speedup"
	      for (i = 1; i <= n; i++) { b = k[i]; x = t[1, b]; y = "-"; sp = "-"
		if ((2, b) in t) { y = t[2, b]; if (x > 0) sp = sprintf("%.2f", y / x) }
		printf "  %10s %16s %16s %8s\n", b, x, y, sp } }' \
	"$W/infer-fp32.out" "$W/infer-bf16.out"
for prec in fp32 bf16; do
	[ -s "$W/infer-$prec.out" ] || continue
	echo "  latency in $prec, seconds"
	cut -f1,3-6 "$W/infer-$prec.out" | column -t | sed 's/^/    /'
done

if [ -x "$BENCHBIN/bench_gpu" ]; then
	say "GPU: training and evaluation (build/bench/bench_gpu; targets on an H200: >= 200M samples/s bf16, >= 120M tf32, epoch <= 0.5 s, evaluation <= 50 ms)"
	"$BENCHBIN/bench_gpu" "$W/ml-20m.ncfc" 2>&1 | sed 's/^/  /'
	if "$BIN/ncf-infer" --bench --random-model --device cuda --batch-sizes 1 --warmup 0 --iterations 1 >/dev/null 2>&1; then
		for prec in bf16 tf32; do
			say "GPU: ncf-infer --bench --device cuda --precision $prec (target bf16: >= 500M samples/s at 1,048,576, p99 <= 50 us at 1024)"
			"$BIN/ncf-infer" --bench --random-model --device cuda --precision $prec 2>/dev/null | column -t | sed 's/^/  /'
		done
	fi
else
	say "GPU: the cuda backend is not built here (no nvcc/cuBLAS found)"
fi

omp_table
