#!/bin/sh
# sanitizer.t - compute-sanitizer on a few training steps and a scoring
# pass of the cuda backend, per step path (fused; lt where the module has
# it) and precision (bf16, fp32): memcheck (bad accesses and leaks),
# racecheck (shared-memory races), initcheck (reads of device memory never
# written) and synccheck (barriers that not every thread reaches).  Each
# run is ncf-train --device cuda on synthetic tiny, one epoch at batch 2048:
# three steps (the fused one as its CUDA graph, as in a real run) and the
# evaluation after them (scoring on the device).  The runs go at once (they
# share the GPU) to keep the wall time short.  Beside them, memcheck on
# gpu_parity --smoke, which runs every operation of the backend once in
# every precision (scoring from device-resident pairs, fp16's skipped steps).
#
# Every check is named "TOOL PATH PRECISION: ..." (scripts/gpu-check.sh
# reads them).  NCF_SANITIZER_TOOLS, NCF_SANITIZER_PATHS and
# NCF_SANITIZER_PRECS name fewer, and NCF_SANITIZER_PARITY=0 leaves
# gpu_parity out (the rehearsal's, scripts/gpu-check.sh).  A tool that cannot run here (it refuses the device, say) is
# a SKIP with its reason, not a pass; so is a path the module lacks
# (NCF_CUDA_PATH refused: "not fused or unfused").  Before the sanitizers,
# each run once without one, so that a failing workload is told apart from
# a finding.  Skips without a GPU or compute-sanitizer.
. "$(dirname "$0")/../lib.sh"
need_gpu
san=$(command -v compute-sanitizer 2>/dev/null)
c=${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer
[ -n "$san" ] || [ ! -x "$c" ] || san=$c
[ -n "$san" ] || skip_all "compute-sanitizer not found (PATH, CUDA_HOME)"
cd "$T" || bail "no $T"
ncf-prep -q --synthetic tiny -o d.ncfc || bail "ncf-prep failed"
tools=${NCF_SANITIZER_TOOLS:-memcheck racecheck initcheck synccheck}
paths=${NCF_SANITIZER_PATHS:-fused lt}
precs=${NCF_SANITIZER_PRECS:-bf16 fp32}

# train NAME PATH PREC [SANITIZER...]: the workload (under SANITIZER), its
# output in NAME.out, its status in NAME.rc.
train() {
	name=$1
	path=$2
	prec=$3
	shift 3
	NCF_CUDA_PATH=$path "$@" ncf-train -q --device cuda --precision "$prec" -e 1 -b 2048 \
		d.ncfc -o "$name.ncfm" >"$name.out" 2>&1
	echo $? >"$name.rc"
}

for path in $paths; do
	for prec in $precs; do
		train "plain.$path.$prec" "$path" "$prec" &
	done
done
wait
run_ok=""
for path in $paths; do
	for prec in $precs; do
		n=plain.$path.$prec
		if grep -q 'not fused or unfused' "$n.out"; then
			skip "$path $prec without a sanitizer: the $path path is not built ($(head -n 1 "$n.out"))"
			continue
		fi
		[ "$(cat "$n.rc")" = 0 ]
		st=$?
		ok $st "$path $prec without a sanitizer: ncf-train runs"
		[ $st -eq 0 ] && run_ok="$run_ok $path.$prec"
		[ $st -eq 0 ] || sed 's/^/# /' "$n.out" | head -n 20
	done
done

for t in $tools; do
	for r in $run_ok; do
		a=""
		[ "$t" = memcheck ] && a="--leak-check full"
		# shellcheck disable=SC2086
		train "$t.$r" "${r%.*}" "${r#*.}" "$san" --tool "$t" $a --error-exitcode 99 &
	done
done
if [ "${NCF_SANITIZER_PARITY:-1}" != 0 ]; then
	(
		"$san" --tool memcheck --leak-check full --error-exitcode 99 "$GPU_PARITY" d.ncfc \
			--smoke >memcheck.parity.smoke.out 2>&1
		echo $? >memcheck.parity.smoke.rc
	) &
fi
wait
# what compute-sanitizer says when it cannot use this GPU or driver
cannot='not supported|Device not supported|error 999|Failed to initialize|Unable to|Internal Sanitizer Error'

# verdict TOOL PATH PREC: the check of the run TOOL.PATH.PREC.
verdict() {
	n=$1.$2.$3
	rc=$(cat "$n.rc")
	# memcheck, initcheck, synccheck: "ERROR SUMMARY: N errors";
	# racecheck: "RACECHECK SUMMARY: N hazards displayed (N errors, N warnings)"
	summary=$(grep -Em1 '(ERROR|RACECHECK) SUMMARY' "$n.out" | sed 's/^=* *//')
	if [ "$rc" -ne 0 ] && [ -z "$summary" ] && grep -Eq "$cannot" "$n.out"; then
		skip "$1 $2 $3: cannot run here: $(grep -Em1 "$cannot" "$n.out" | sed 's/^=* *//')"
		return
	fi
	# clean: the workload passed (gpu_parity: every check) and the tool found nothing
	[ "$rc" -eq 0 ] && echo "$summary" | grep -Eq '[ (]0 errors' && ! grep -q '^not ok' "$n.out"
	st=$?
	ok $st "$1 $2 $3: ${summary:-exit $rc}"
	[ $st -eq 0 ] || grep -v '^ok' "$n.out" | head -n 40 | sed 's/^/# /'
}
for t in $tools; do
	for path in $paths; do
		for prec in $precs; do
			if [ -f "$t.$path.$prec.rc" ]; then
				verdict "$t" "$path" "$prec"
			elif grep -q 'not fused or unfused' "plain.$path.$prec.out"; then
				skip "$t $path $prec: the $path path is not built"
			fi
		done
	done
done
if [ "${NCF_SANITIZER_PARITY:-1}" != 0 ]; then
	verdict memcheck parity smoke
else
	skip "memcheck parity smoke: NCF_SANITIZER_PARITY=0"
fi
done_testing
