# shellcheck shell=sh
# lib.sh - the TAP library of every shell test (tests/cli/*.t, tests/gpu/*.t).
# Source it, make checks, end with done_testing: the tests count themselves
# (the plan "1..N" is printed at the end), and a test fails by exit status.
#
#   run CMD...            run CMD: $status, $out (its stdout file), $err (stderr file)
#   ok STATUS MSG         ok when STATUS (usually $?) is 0
#   is GOT WANT MSG       string equality
#   like FILE REGEX MSG   grep -E REGEX in FILE;  unlike: no match
#   expect NAME FILE MSG  FILE equals tests/expected/NAME, the contract of a
#                         message (NCF_UPDATE_EXPECTED=1 rewrites the file)
#   skip WHY              one skipped check;  skip_all WHY: the whole file
#   bail WHY              stop the file (Bail out!): a setup step failed
#   diag TEXT...          "# TEXT" lines
#   info KEY CACHE        the value of KEY in ncf-prep --info CACHE
#   need_cuda_build, gpu_usable, need_gpu   for tests/gpu (the emulated module,
#                         NCF_CUDA_MODULE=build/lib/ncf/ncf-cuda-emu.so, counts
#                         as a build with CUDA and a GPU: the rehearsal of
#                         scripts/gpu-check.sh runs them so)
#   done_testing          print the plan; exit 1 when a check failed
#
# Environment from make check: NCF_BIN (the tools), NCF_ROOT (the source
# tree), NCF_DATA (../shared/data); scripts/gpu-check.sh may also set
# GPU_TESTS (the GPU tests' programs), GPU_PARITY (gpu_parity),
# NCF_TEST_TOOLS (tests/tools' programs), NCF_BENCH_GPU (bench_gpu) and
# NCF_SASS_OBJECT (the module whose machine code sass.t reads) to run
# tests/gpu from its bundle.  $T is a temporary directory, removed
# at exit; tests cd into it and name files relatively so that messages,
# which name files, compare equal to their expected copies.
set -u
: "${NCF_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${NCF_BIN:=$NCF_ROOT/build/bin}"
: "${NCF_DATA:=$NCF_ROOT/../shared/data}"
: "${GPU_TESTS:=$NCF_ROOT/build/tests/gpu}"
: "${GPU_PARITY:=$GPU_TESTS/gpu_parity}"
: "${NCF_TEST_TOOLS:=$NCF_ROOT/build/tests/tools}"
: "${NCF_BENCH_GPU:=$NCF_ROOT/build/bench/bench_gpu}"
PATH="$NCF_BIN:$PATH"
export PATH
T=$(mktemp -d "${TMPDIR:-/tmp}/ncf-test.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
_n=0
_failed=0

skip_all() {
	echo "1..0 # SKIP $*"
	exit 0
}
bail() {
	echo "Bail out! $*"
	exit 1
}
diag() { printf '# %s\n' "$@"; }

_report() {
	_n=$((_n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $_n - $2"
	else
		echo "not ok $_n - $2"
		_failed=$((_failed + 1))
	fi
}

run() {
	out="$T/out.$_n"
	err="$T/err.$_n"
	"$@" >"$out" 2>"$err"
	status=$?
	return 0
}

ok() { _report "$1" "$2"; }
is() {
	if [ "$1" = "$2" ]; then _report 0 "$3"; else
		_report 1 "$3"
		diag "got:  '$1'" "want: '$2'"
	fi
}
like() {
	if grep -Eq -- "$2" "$1"; then _report 0 "$3"; else
		_report 1 "$3"
		diag "no match for /$2/ in:"
		sed 's/^/#   /' "$1" | head -n 10
	fi
}
unlike() {
	if grep -Eq -- "$2" "$1"; then
		_report 1 "$3"
		diag "unexpected match for /$2/ in:"
		sed 's/^/#   /' "$1" | head -n 10
	else _report 0 "$3"; fi
}
expect() {
	_want="$NCF_ROOT/tests/expected/$1"
	if [ "${NCF_UPDATE_EXPECTED:-0}" = 1 ]; then
		mkdir -p "$(dirname "$_want")" && cp "$2" "$_want"
	fi
	if [ -f "$_want" ] && cmp -s "$2" "$_want"; then _report 0 "$3"; else
		_report 1 "$3"
		if [ -f "$_want" ]; then
			diag "differs from tests/expected/$1 (- expected, + got):"
			diff -u "$_want" "$2" | tail -n +3 | head -n 20 | sed 's/^/#   /'
		else
			diag "tests/expected/$1 is missing (NCF_UPDATE_EXPECTED=1 writes it)"
		fi
	fi
}
skip() {
	_n=$((_n + 1))
	echo "ok $_n # SKIP $*"
}

info() { ncf-prep --info "$2" | awk -F'\t' -v k="$1" '$1 == k { print $2 }'; }

# Skip the whole file unless the tools were built with CUDA (or run the
# emulated module).
need_cuda_build() {
	ncf-train -vV 2>&1 | grep -q '^cuda runtime	\|^cuda	CPU emulation' || skip_all "not built with CUDA"
}
# Is a GPU usable (as the cuda backend sees it)?
gpu_usable() {
	ncf-train -vV 2>&1 | grep -q '^gpu	[0-9]'
}
# Skip the whole file without a usable GPU.
need_gpu() {
	need_cuda_build
	gpu_usable || skip_all "no GPU"
}

done_testing() {
	echo "1..$_n"
	[ "$_failed" = 0 ] || exit 1
	exit 0
}
