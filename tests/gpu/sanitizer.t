#!/bin/sh
# sanitizer.t - compute-sanitizer on a few training steps and a scoring
# pass of the cuda backend, per implementation of the dense layers
# (NCF_CUDA_DENSE: fused, lt, plain) and precision (bf16, fp32): memcheck (bad accesses and leaks),
# racecheck (shared-memory races), initcheck (reads of device memory never
# written) and synccheck (barriers that not every thread reaches).  Each
# run is ncf-train --device cuda on synthetic tiny, one epoch at batch 2048:
# three steps (each as one CUDA graph, as in a real run) and the
# evaluation after them (scoring on the device).  The runs go at once (they
# share the GPU) to keep the wall time short.  Beside them, memcheck on
# gpu_parity --smoke, which runs every operation of the backend once in
# every precision (scoring from device-resident pairs, fp16's skipped steps).
#
# Every check is named "TOOL DENSE PRECISION: ..." (scripts/gpu-check.sh
# reads them).  NCF_SANITIZER_TOOLS, NCF_SANITIZER_DENSE and
# NCF_SANITIZER_PRECS name fewer, and NCF_SANITIZER_PARITY=0 leaves
# gpu_parity out (the rehearsal's, scripts/gpu-check.sh).  A tool that
# cannot run here (it refuses the device, say) is a SKIP with its reason,
# not a pass.  Before the sanitizers,
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
denses=${NCF_SANITIZER_DENSE:-fused lt plain}
precs=${NCF_SANITIZER_PRECS:-bf16 fp32}

# train NAME DENSE PREC [SANITIZER...]: the workload (under SANITIZER), its
# output in NAME.out, its status in NAME.rc.
train() {
	name=$1
	dense=$2
	prec=$3
	shift 3
	NCF_CUDA_DENSE=$dense "$@" ncf-train -q --device cuda --precision "$prec" -e 1 -b 2048 \
		d.ncfc -o "$name.ncfm" >"$name.out" 2>&1
	echo $? >"$name.rc"
}

for dense in $denses; do
	for prec in $precs; do
		train "plain.$dense.$prec" "$dense" "$prec" &
	done
done
wait
run_ok=""
for dense in $denses; do
	for prec in $precs; do
		n=plain.$dense.$prec
		[ "$(cat "$n.rc")" = 0 ]
		st=$?
		ok $st "$dense $prec without a sanitizer: ncf-train runs"
		[ $st -eq 0 ] && run_ok="$run_ok $dense.$prec"
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

# verdict TOOL DENSE PREC: the check of the run TOOL.DENSE.PREC.
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
	for dense in $denses; do
		for prec in $precs; do
			[ -f "$t.$dense.$prec.rc" ] && verdict "$t" "$dense" "$prec"
		done
	done
done
if [ "${NCF_SANITIZER_PARITY:-1}" != 0 ]; then
	verdict memcheck parity smoke
else
	skip "memcheck parity smoke: NCF_SANITIZER_PARITY=0"
fi
done_testing
