# lib.sh - TAP helpers for the shell CLI tests.  Source it, then call
# plan N, and the checks below; finish with done_testing.  A test fails by
# exit status (done_testing exits 1 when a check failed).
#
#   run CMD...          runs CMD, sets $status, $out (stdout file), $err (stderr file)
#   ok COND_STATUS MSG  ok when the previous command's status ($?) is 0
#   is GOT WANT MSG     string equality
#   like FILE REGEX MSG grep -E REGEX in FILE
#   skip_all WHY        the whole file is skipped (1..0 # SKIP)
#
# Environment from make check: NCF_BIN (the tools), NCF_ROOT (the source
# tree), NCF_DATA (../shared/data).
set -u
: "${NCF_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${NCF_BIN:=$NCF_ROOT/build/bin}"
: "${NCF_DATA:=$NCF_ROOT/../shared/data}"
export PATH="$NCF_BIN:$PATH"
T=$(mktemp -d "${TMPDIR:-/tmp}/ncf-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
_n=0
_failed=0

plan() { echo "1..$1"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
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
skip() { _n=$((_n + 1)); echo "ok $_n # SKIP $*"; }

# info KEY CACHE: the value of KEY in ncf-prep --info CACHE
info() { ncf-prep --info "$2" | awk -F'\t' -v k="$1" '$1 == k { print $2 }'; }

done_testing() {
	[ "$_failed" = 0 ] || exit 1
	exit 0
}
