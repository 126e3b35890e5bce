#!/bin/sh
# run.sh BUILD TARGET... - make fuzz: seed corpora made by the tools, then
# each libFuzzer target for FUZZ_SECONDS (default 60), one after the other;
# with FUZZ_RUNS set (make check's check-fuzz), each for that many inputs
# after its seeds instead, on a corpus of this run's own.
#
# Per target: build/fuzz/corpus/TARGET (kept between runs, grown by
# libFuzzer), seeds remade each run (in a directory of this run's own, so
# that two runs on different targets can go side by side), the log in
# build/fuzz/logs/TARGET.log and a crash, leak or sanitizer report's
# reproducer in build/fuzz/artifacts/TARGET/.  The ratings parser gets a
# dictionary (tests/fuzz/prep.dict and ids that collide in the id maps
# under the harness's pinned key, from tests/tools/crafted_ids) and a seed
# of such ids; inputs are at most 64 KiB, and its harness expands a marker
# into lines past the 1 MiB limit.  Prints a table of executions, coverage
# (cov, ft) and findings; exits 1 when any target found something.
# FUZZ_ARGS adds libFuzzer options.
set -u
BUILD=$1
shift
SECONDS_EACH=${FUZZ_SECONDS:-60}
BIN=$BUILD/bin
F=$BUILD/fuzz
mkdir -p "$F/logs"
S=$(mktemp -d "$F/seeds.XXXXXX") || exit 1
mkdir -p "$S/cache" "$S/ckpt" "$S/prep" "$S/lines" "$S/safetensors" "$S/given"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# --- seeds, from the tools ---------------------------------------------------------
t=$(mktemp -d "${TMPDIR:-/tmp}/ncf-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$t" "$S"' EXIT
H='userId,movieId,rating,timestamp'
printf '%s\n1,10,4.0,100\n1,11,4.0,200\n1,12,3.5,300\n2,10,3.0,50\n2,12,3.0,60\n3,11,5,70\n3,10,1,80\n' "$H" >"$t/r.csv"
"$BIN/ncf-prep" -q --eval-negatives 2 -o "$S/cache/tiny.ncfc" "$t/r.csv" || exit 1
"$BIN/ncf-prep" -q --eval-negatives 3 --min-ratings 3 -o "$S/cache/min.ncfc" "$t/r.csv" || exit 1
"$BIN/ncf-prep" -q --synthetic ml-latest-small --emit-csv | head -n 120 >"$t/s.csv"
"$BIN/ncf-prep" -q --eval-negatives 4 -o "$S/cache/synth.ncfc" "$t/s.csv" || exit 1
"$BIN/ncf-train" -q --device cpu "$S/cache/tiny.ncfc" -o "$t/m.ncfm" -e 1 -b 8 -f 2 \
	--layers 4,2 || exit 1
cp "$t/m.ncfm" "$S/ckpt/best.ncfm"
cp "$t/m.ncfm.last" "$S/ckpt/last.ncfm"
"$BIN/ncf-train" -q --device cpu "$S/cache/synth.ncfc" -o "$t/n.ncfm" -e 2 -b 64 -f 3 \
	--layers 6,4,2 --dropout 0 -n 1 || exit 1
cp "$t/n.ncfm.last" "$S/ckpt/two.ncfm"
# ratings: byte 0 the format (0 detected .. 4 csv), byte 1 the protocol options
for f in 0 1 4; do
	{ printf "\\$(printf %03o $f)\\000"; cat "$t/r.csv"; } >"$S/prep/ml20m-$f"
done
{ printf '\002\004'; sed 1d "$t/r.csv" | tr ',' '\n' | paste -d: - - - - | sed 's/:/::/g'; } >"$S/prep/ml1m"
{ printf '\003\005'; sed 1d "$t/r.csv" | tr ',' '\t'; } >"$S/prep/ml100k"
{ printf '\004\001'; printf 'item,user,ts\r\n10,1,5\r\n11,1,6\r\n"12",2,7\r\n'; } >"$S/prep/csv"
# text ids and dates (byte 0 4: csv; 9: --delimiter ;; 12: --columns by number; 19: by name, tabs)
{ printf '\004\000user,item,time\nu1,B01,2000-07-30\nu1,"B 2",2000-07-30T18:45:03Z\n7,B01,1999-12-31 23:00:00+02:00\n007,x,964982703\n'; } >"$S/prep/names"
{ printf '\011\000uid;sid;time\na;b;2000-01-01\na;c;2000-01-02\n'; } >"$S/prep/semicolon"
{ printf '\014\000u1,i1,4.0,2001-09-09T01:46:40\nu1,i2,3.0,1000000001\n'; } >"$S/prep/by-number"
{ printf '\023\000r\tt\ti\tu\n4\t2000-07-30\tx\ty\n'; } >"$S/prep/by-name-tab"
{ printf '\000\000'; head -n 40 "$t/s.csv"; } >"$S/prep/synth"
# ids that share one slot of the id maps (the harness pins the key), and
# lines past 1 MiB made by the harness's marker F5 F5 C (bit 4 of byte 1):
# the first line, a quoted field, the last line; CR line ends
{ printf '\000\000'; "$BUILD/tests/tools/crafted_ids" fuzz-csv 24; } >"$S/prep/collide" || exit 1
{ printf '\001\020%s\365\365\077\n' "$H"; sed 1d "$t/r.csv"; } >"$S/prep/long-first"
{ printf '\000\020%s\n1,"1\365\365\100",4.0,5\n' "$H"; } >"$S/prep/long-field"
{ printf '\000\020'; cat "$t/r.csv"; printf '1,12,4.0,9\365\365\100\n'; } >"$S/prep/long-last"
{ printf '\000\000'; tr '\n' '\r' <"$t/r.csv"; } >"$S/prep/cr-only"
cp tests/fuzz/prep.dict "$S/prep.dict" &&
	"$BUILD/tests/tools/crafted_ids" fuzz-dict 32 >>"$S/prep.dict" || exit 1
case " $* " in
*" fuzz_safetensors "*) sh tests/fuzz/seed_safetensors.sh "$BIN" "$S/safetensors" || exit 1 ;;
esac
# given splits: byte 0 the kind (0 a feature spec, 1 the paper's files),
# then the files cut at a line %% (fuzz_given.c): NVIDIA's example as
# it is, the same with explicit chunks side by side and a cardinality,
# and the paper's three files made by scripts/paper-split.sh
nv=../shared/peer/nvidia-ncf-pytorch/data/csv_conversion
if [ -f "$nv/feature_spec.yaml" ]; then
	{ printf '\000'; sed 's/train_data_1.csv/a.csv/; s/train_data_2.csv/b.csv/; s/test_data_1.csv/c.csv/' \
		"$nv/feature_spec.yaml"; printf '\n%%%%\n'; cat "$nv/train_data_1.csv"; printf '\n%%%%\n'
	  cat "$nv/train_data_2.csv"; printf '\n%%%%\n'; cat "$nv/test_data_1.csv"; } >"$S/given/nvidia"
fi
{ printf '\000feature_spec:\n  u: {cardinality: 4}\n  i: {cardinality: auto}\n  l:\nmetadata:\n'
  printf '  test_samples_per_series: 2\nsource_spec:\n  train:\n    - {type: csv, features: [u, i], files: [a.csv]}\n'
  printf '    - {type: csv, features: [l], files: [b.csv]}\n  test:\n'
  printf '    - {type: csv, features: [l, i, u], files: [c.csv, d.csv]}\nchannel_spec:\n'
  printf '  user_ch: [u]\n  item_ch: [i]\n  label_ch: [l]\n%%%%\n0,1\n0,2\n1,1\n1,3\n%%%%\n1\n0\n1.0\n1\n'
  printf '%%%%\n1,2,0\n0,3,0\n%%%%\n0, 1, 1\n"1",2,1\n'; } >"$S/given/chunks"
printf '%s\n' "userId,movieId,rating,timestamp" >"$t/p.csv"
"$BIN/ncf-prep" -q --synthetic tiny --emit-csv | sed 1d >>"$t/p.csv"
sh scripts/paper-split.sh "$t/p.csv" "$t/paper" 3 || exit 1
# version 2 caches and checkpoints: a given split with explicit negatives
# (NVIDIA's example), names
"$BIN/ncf-prep" -q -o "$S/cache/paper.ncfc" --ncf-paper "$t/paper" || exit 1
printf 'user;item;time\nu1;B 1;2000-01-01\nu1;B2;2000-01-02\nu2;B2;1999-12-31T23:00:00Z\nu2;7;5\n' >"$t/n.csv"
"$BIN/ncf-prep" -q --eval-negatives 1 -o "$S/cache/names.ncfc" "$t/n.csv" || exit 1
"$BIN/ncf-train" -q --device cpu "$S/cache/names.ncfc" -o "$t/names.ncfm" -e 1 -b 2 -f 2 -k 1 \
	--layers 4,2 || exit 1
cp "$t/names.ncfm" "$S/ckpt/names.ncfm"
if [ -f "$nv/feature_spec.yaml" ]; then
	"$BIN/ncf-prep" -q -o "$S/cache/nvidia.ncfc" --feature-spec "$nv/feature_spec.yaml" || exit 1
fi
{ printf '\001'; cat "$t/paper.train.rating"; printf '%%%%\n'; cat "$t/paper.test.rating"
  printf '%%%%\n'; cat "$t/paper.test.negative"; } >"$S/given/paper"
# lines: byte 0 the longest line and the id count
printf '\001%s' "$(printf '1 10\n2\t11\n\n 3 , 12 \r\n4,10')" >"$S/lines/pairs"
printf '\002\357\273\277%s' "$(printf '1\r2\n3\r\r\n')" >"$S/lines/bom-cr"
printf '\010%s' "$(printf '1\n2\n  \n3\r\n')" >"$S/lines/users"
printf '\377%s' "$(printf '1 1\n1 2\n')" >"$S/lines/long-buffer"

# --- the runs ------------------------------------------------------------------------
status=0
summary=$S/summary
printf '%-16s %12s %8s %8s %8s  %s\n' target executions cov ft seconds result >"$summary"
for target in "$@"; do
	case $target in
	fuzz_cache*) seeds=$S/cache ;;
	fuzz_ckpt*) seeds=$S/ckpt ;;
	fuzz_prep*) seeds=$S/prep ;;
	fuzz_given*) seeds=$S/given ;;
	fuzz_lines*) seeds=$S/lines ;;
	fuzz_safetensors*) seeds=$S/safetensors ;;
	*) echo "run.sh: no seeds for $target" >&2; exit 2 ;;
	esac
	case $target in
	fuzz_prep*) extra="-dict=$S/prep.dict" ;;
	fuzz_given*) extra="-dict=tests/fuzz/given.dict" ;;
	fuzz_safetensors*) extra="-dict=tests/fuzz/safetensors.dict -close_fd_mask=2" ;;
	*) extra= ;;
	esac
	if [ -n "${FUZZ_RUNS:-}" ]; then
		corpus=$S/corpus-$target
		limit="-runs=$FUZZ_RUNS -max_total_time=120 -seed=1"
	else
		corpus=$F/corpus/$target
		limit="-max_total_time=$SECONDS_EACH"
	fi
	art=$F/artifacts/$target
	log=$F/logs/$target.log
	mkdir -p "$corpus" "$art"
	if [ -n "${FUZZ_RUNS:-}" ]; then
		echo "fuzz: $target, its seeds and $FUZZ_RUNS inputs more (log $log)"
	else
		echo "fuzz: $target for $SECONDS_EACH s (log $log)"
	fi
	start=$(date +%s)
	# shellcheck disable=SC2086
	"$F/$target" $limit -print_final_stats=1 -rss_limit_mb=2560 -max_len=65536 -timeout=30 \
		-artifact_prefix="$art/" $extra ${FUZZ_ARGS:-} "$corpus" "$seeds" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
	cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	found=$(ls "$art" | wc -l)
	if [ "$rc" = 0 ] && [ "$found" = 0 ]; then
		result=ok
	else
		result="FAILED (exit $rc; $(ls "$art" | tr '\n' ' '))"
		status=1
		grep -E 'ERROR|invariant|SUMMARY|==[0-9]+==' "$log" | head -n 5
	fi
	printf '%-16s %12s %8s %8s %8s  %s\n' "$target" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$took" \
		"$result" >>"$summary"
done
cat "$summary"
[ "$status" = 0 ] || echo "fuzz: reproducers are in $F/artifacts/; add each to tests/fuzz/regress/" >&2
exit "$status"
