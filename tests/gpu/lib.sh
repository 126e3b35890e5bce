# shellcheck shell=sh
# lib.sh - helpers of the tests/gpu/*.t scripts (sourced).
# Environment from the Makefile: NCF_BIN (the tools), NCF_ROOT (the source tree).
NCF_ROOT=${NCF_ROOT:-.}
NCF_BIN=${NCF_BIN:-$NCF_ROOT/build/bin}
GPU_TESTS=${GPU_TESTS:-$NCF_ROOT/build/tests/gpu}
_n=0
_fail=0
# ok STATUS DESCRIPTION: one TAP line; a non-zero STATUS fails the test.
ok() {
	_n=$((_n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $_n - $2"
	else
		echo "not ok $_n - $2"
		_fail=$((_fail + 1))
	fi
}
# Exit status of the whole script: failed checks.
finish() {
	exit $((_fail > 0))
}
# Skip the whole script unless the tools were built with CUDA.
need_cuda_build() {
	if ! "$NCF_BIN/ncf-train" -vV 2>&1 | grep -q '^cuda runtime	'; then
		echo "1..0 # SKIP not built with CUDA"
		exit 0
	fi
}
# Is a GPU usable (as the cuda backend sees it)?
gpu_usable() {
	"$NCF_BIN/ncf-train" -vV 2>&1 | grep -q '^gpu	[0-9]'
}
# Skip the whole script without a usable GPU.
need_gpu() {
	need_cuda_build
	gpu_usable || { echo "1..0 # SKIP no GPU"; exit 0; }
}
