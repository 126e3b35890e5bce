#!/bin/sh
# sanitizer.t - compute-sanitizer finds no bad memory access or leak
# (memcheck), no read of uninitialised device memory (initcheck) and no
# shared-memory race (racecheck: the CUB sort is the only kernel with shared
# memory) in a short run of every operation of the cuda backend, in every
# precision (gpu_parity --smoke on tiny data).
# Skips where compute-sanitizer is missing or cannot use the GPU (it refuses
# the device under gVisor, for one).
. "$(dirname "$0")/../lib.sh"
need_gpu
san=$(command -v compute-sanitizer 2>/dev/null)
[ -n "$san" ] || [ ! -x /usr/local/cuda/bin/compute-sanitizer ] || san=/usr/local/cuda/bin/compute-sanitizer
if [ -z "$san" ]; then
	echo "1..0 # SKIP compute-sanitizer not found"
	exit 0
fi
tmp=$T
"$NCF_BIN/ncf-prep" -q --synthetic tiny -o "$tmp/d.ncfc" || bail "ncf-prep failed"

# sanitize TOOL [OPTIONS]: run gpu_parity --smoke under the tool, output in
# $tmp/TOOL.out, status in $tmp/TOOL.rc.
sanitize() {
	tool=$1
	shift
	"$san" --tool "$tool" "$@" --error-exitcode 99 "$GPU_TESTS/gpu_parity" "$tmp/d.ncfc" --smoke \
		>"$tmp/$tool.out" 2>&1
	echo $? >"$tmp/$tool.rc"
}
# The three at once (they share the GPU), to keep the wall time short.
sanitize memcheck --leak-check full &
sanitize initcheck &
sanitize racecheck &
wait
pat='Device not supported|error 999|Failed to initialize|Unable to'
if [ "$(cat "$tmp/memcheck.rc")" -ne 0 ] && grep -Eq "$pat" "$tmp/memcheck.out"; then
	echo "1..0 # SKIP compute-sanitizer cannot use this GPU: $(grep -Em1 "$pat" "$tmp/memcheck.out")"
	exit 0
fi
for tool in memcheck initcheck racecheck; do
	rc=$(cat "$tmp/$tool.rc")
	# clean: the tool found nothing (status not 99) and every check passed
	[ "$rc" -eq 0 ] && ! grep -q '^not ok' "$tmp/$tool.out"
	st=$?
	summary=$(grep -m1 'ERROR SUMMARY' "$tmp/$tool.out")
	ok $st "compute-sanitizer --tool $tool: ${summary:-exit $rc}"
	[ $st -eq 0 ] || grep -v '^ok' "$tmp/$tool.out" | head -n 40 | sed 's/^/# /'
done
done_testing
