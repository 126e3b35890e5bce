#!/bin/sh
# gpu-rehearse.t - scripts/gpu-check.sh --quick --rehearse: the whole quick
# check end to end on this machine, the emulated module standing in for
# the GPU (gpu-check.sh's REHEARSAL), so that every stage's commands, their
# parsing and the summary table have run before the first real call does.
# Every stage passes (NVIDIA's NCF where python3, or PEER_PYTHON, has
# torch; a skip otherwise), and the table holds what each stage measured:
# the copy's bandwidth, with which every later stage models the machine
# (bench_gpu --cost's bandwidth is that figure); the samples/s of the step
# with each implementation of the dense layers (fused, lt, plain, fused
# without the step's graph, and the choice a run makes), how many timed
# steps ran as the CUDA graph (all but the graph-less variant's), the
# model's prediction, and for fused, lt and plain the five slowest launches
# of its profile, which has one row per CUB sort and says the machine it
# models; the choice per dense layer (dense_layer_K: the emulation's fixed
# order), and the model's prediction for those layers; parity; the
# sanitizer's table; training and inference per precision; ncf beside
# NVIDIA's NCF with their ratios.  What the device tool brings back: $OUT
# holds four files (it returns at most 8), the table among them as printed,
# short enough for the end of the output it returns, and every log packed.
# Not under the sanitizers (it checks the script, and the emulated module
# is not built with them).
. "$(dirname "$0")/../lib.sh"
[ -z "${NCF_SANITIZER:-}" ] || skip_all "the rehearsal checks the script; the emulated module has no sanitizers"
[ -f "$NCF_ROOT/build/lib/ncf/ncf-cuda-emu.so" ] && [ -x "$NCF_ROOT/build/tests/gpu_parity_emu" ] ||
	skip_all "no emulated module (no C++ compiler)"
[ -x "$NCF_ROOT/build/bench/bench_gpu" ] || skip_all "no bench_gpu"
OUT=$T/out
export OUT
logs=$T/logs # logs.tar.gz, unpacked
cd "$T" || bail "no $T"
py=${PEER_PYTHON:-python3}
torch=0
"$py" -c 'import torch, pandas' 2>/dev/null && torch=1

run sh "$NCF_ROOT/scripts/gpu-check.sh" --quick --rehearse
is "$status" 0 "the rehearsal passes: exit 0"
[ "$status" = 0 ] || grep -E '^=== |FAIL' "$out" | sed 's/^/# /' | head -n 30
like "$out" '^=== summary: quick, REHEARSAL on the CPU' "the summary says it is a rehearsal"
like "$out" '^driver: rehearsal on the CPU: no driver checked' "... and that no driver was checked"
for s in driver device data sanitizer parity dense epochs inference; do
	like "$out" "^$s +PASS +[0-9]+ s$" "$s: PASS"
done
like "$out" '^build +skipped: --rehearse' "build: not run"

# what comes back: four files, the table as printed, every log
is "$(cd "$OUT" && find . -type f | sort | tr '\n' ' ')" \
	"./gpu-check/logs.tar.gz ./gpu-check/metrics.tsv ./gpu-check/results.tsv ./gpu-check/summary.txt " \
	"\$OUT: summary.txt, results.tsv, metrics.tsv, logs.tar.gz (the device tool returns 8 files at most)"
sed -n '/^=== summary/,$p' "$out" | sed '$d' >printed
sed 1d "$OUT/gpu-check/summary.txt" | cmp -s - printed
ok $? "summary.txt is the table printed last"
n=$(wc -c <printed)
[ "$n" -lt 8000 ]
ok $? "... in $n characters (under 8,000: the device tool returns the last 12,000)"
like "$out" "^results: $OUT/gpu-check: summary.txt" "... and the last line says where the results are"
mkdir -p "$logs" && tar -xzf "$OUT/gpu-check/logs.tar.gz" -C "$logs"
for f in driver.txt device.log data.log sanitizer.log parity.log dense.log epochs.log inference.log \
	peer.log profile.fused.txt metrics.tsv results.tsv; do
	[ -s "$logs/$f" ] || echo "$f"
done >nolog
is "$(cat nolog)" "" "logs.tar.gz holds every stage's log"

# the device stage's copy: the bandwidth of every later stage's model
bw=$(awk -F'\t' '$1 == "device" { print $8 }' "$logs/metrics.tsv")
like "$out" "^device: .*a device-to-device copy: $bw GB/s measured \\(datasheet [0-9]+ GB/s\\)" \
	"the device line: the copy's bandwidth ($bw GB/s) beside the datasheet's"
n=$(grep -c "^bandwidth_GBs	$bw$" "$logs/dense.log")
is "$n" 5 "bench_gpu --cost of each variant models that bandwidth (NCF_CUDA_BANDWIDTH)"
like "$logs/profile.fused.txt" "^cuda profile: machine .*$bw GB/s \\(NCF_CUDA_BANDWIDTH" \
	"... and so does the profile"

# the dense layers' implementations
for v in fused lt plain fused-nograph timed; do
	[ $v = fused-nograph ] && g=0/2 || g=2/2
	like "$out" "^  $v +bf16 +[0-9.]+[KM] +$g +[0-9.]+[KM] +[0-9.]+[KM] +[0-9.]+ +[0-9]+$" \
		"$v: measured, $g steps as the graph, predicted, bandwidth-bound, GB, launches"
	n=$(awk -F'\t' -v v=$v '$1 == "slow" && $2 == v' "$logs/metrics.tsv" | wc -l)
	case $v in
	fused | lt | plain) is "$n" 5 "$v: its five slowest launches in the table" ;;
	*) is "$n" 0 "$v: timed, not profiled" ;;
	esac
done
for k in 2 3; do
	like "$out" "^  bf16 +dense_layer_$k +fused \([0-9]+ -> [0-9]+, fixed order\)$" \
		"the choice a run makes, per layer: dense_layer_$k (the emulation's fixed order)"
done
like "$logs/dense.log" '^--- timed: -u NCF_CUDA_DENSE$' "the timed run has NCF_CUDA_DENSE unset"
like "$logs/dense.log" 'cuda backend: dense layer 2: fused' "... and says its choice at -v"
like "$logs/dense.log" '^dense_layer_3	plain$' "the model of each variant takes the layers it ran (plain's: --dense plain,plain)"
sorts=$(grep -c '^cuda profile: *[0-9]* sort *sort_iota' "$logs/profile.fused.txt")
cubs=$(grep -c '^cuda profile: *[0-9]* sort *cub_sort' "$logs/profile.fused.txt")
parts=$(grep -c '^cuda profile: *[0-9]* sort *cub_\(memset\|onesweep\|histogram\)' "$logs/profile.fused.txt")
[ "$sorts" -gt 0 ] && [ "$cubs" = "$sorts" ] && [ "$parts" = 0 ]
ok $? "the profile: one row per CUB sort ($cubs for $sorts sorts), none per launch inside it"
like "$logs/dense.log" '^bf16_graph_replays	2$' "bench_gpu says how many timed steps ran as the graph"

like "$out" '^parity with NCF_CUDA_DENSE=plain \(gpu_parity, synthetic tiny, --smoke\): PASS, [0-9]+ of [0-9]+ checks' \
	"parity: PASS"
like "$out" '^  tool +plain/bf16 ' "the sanitizer's table: the dense layers and the precision it ran"
like "$out" '^  memcheck +clean' "... memcheck (the stand-in) clean"
like "$out" '^  racecheck +clean' "... racecheck"
for p in fp32 tf32 bf16 fp16; do
	like "$out" "^  $p +[0-9.]+ +1 epoch synthetic tiny, batch 2048, HR@10 0\\.[0-9]+$" "training: $p"
done
for p in tf32 bf16 fp16; do
	like "$out" "^  $p +1024 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "inference: $p"
done

# NVIDIA's NCF
if [ $torch = 1 ]; then
	like "$out" '^peer +PASS' "peer: PASS ($py has torch)"
	for p in tf32 --amp; do
		like "$out" "^  $p +[0-9.]+[KM] +[0-9.]+[KM] +[0-9.]+x +0\\.[0-9]+ +[01]\\.[0-9]+$" \
			"ncf beside NVIDIA's ncf.py, $p: samples/s, the ratio, HR@10"
	done
	like "$out" '^  fp16 +1024 +[0-9.]+[KM] +[0-9.]+[KM] +[0-9.]+x$' "... and inference.py --fp16 beside ncf-infer"
	# convert.py read ncf's CSV as MovieLens-20M: the same 50 users and 197 items as
	# ncf-prep's tiny (a path not naming ml-20m reads the rating as the item)
	like "$logs/peer_convert.log" '^[0-9]+ ratings on 197 items from 50 users' \
		"NVIDIA's convert.py read the data as ncf-prep did (197 items, 50 users)"
else
	like "$out" '^peer +skipped: by itself' "peer: skipped by itself, without torch"
	like "$out" "^NVIDIA's NCF: skipped: by itself \\(no torch for the peer" "... saying why"
	skip "NVIDIA's NCF on the CPU: $py has no torch (PEER_PYTHON names a Python that has)"
fi
done_testing
