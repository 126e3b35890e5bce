#!/usr/bin/env bash
# man-examples.t - the EXAMPLES of every manual page in man/ run as tests
# (STYLE.md rule 17).
#
# The convention, for whoever writes a page:
#  - Inside the EXAMPLES section (from ".SH EXAMPLES" to the next ".SH"),
#    every line of an .EX/.EE block that starts with "$ " is a shell
#    command, one line each (no continuation lines).  Everything else is
#    not run: prose, the output shown, and commands written without the
#    "$ " (indented, or after "# ") because they need a download, a GPU,
#    mpirun or minutes.  "$ " lines outside EXAMPLES (a worked example
#    elsewhere) are not run either.
#  - The roff escapes of a command are undone before it runs: \- is -,
#    \e is \, \(aq is ', \(dq is ", \(ga is `, \(ti is ~, \(ha is ^, and
#    \& is nothing.  Use no others in commands.
#  - For each page, its commands run in order, each with `bash -o
#    pipefail -c` (so every part of a pipeline must succeed; `! CMD` for
#    a command that must fail), stdin from /dev/null, a 300 s limit, in one
#    fresh scratch directory shared by the page's commands (what one makes
#    the next can use), with $NCF_BIN first on PATH.  The directory starts
#    with ratings.csv, made by `ncf-prep --synthetic tiny --emit-csv -o
#    ratings.csv` (ml-20m CSV: 50 users, about 1,200 ratings), so examples
#    should stay that small (--synthetic tiny, -e 1 to 5, -b 4096).
#  - Each command is one TAP test and passes when it exits 0.  A page whose
#    commands use an ncf tool that is not built (one still being written)
#    has its commands reported as skipped.
. "$(dirname "$0")/../lib.sh"

MAN=$NCF_ROOT/man
export LC_ALL=C

# examples PAGE: the page's example commands, one per line, unescaped
# (\e goes through a placeholder so that \e\- gives \- and \en gives \n).
examples() {
	awk '
		/^\.SH/ {
			s = $0
			sub(/^\.SH[ \t]+/, "", s)
			gsub(/"/, "", s)
			in_ex = (s == "EXAMPLES")
			in_block = 0
			next
		}
		in_ex && /^\.EX/ { in_block = 1; next }
		in_ex && /^\.EE/ { in_block = 0; next }
		in_ex && in_block && /^\$ / { print substr($0, 3) }
	' "$1" | sed -e 's/\\e/\x01/g' -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\(dq/"/g' \
		-e 's/\\(ga/`/g' -e 's/\\(ti/~/g' -e 's/\\(ha/^/g' -e 's/\\&//g' -e 's/\x01/\\/g'
}

# missing_tool FILE: the first ncf tool that FILE's commands use and that
# is not built, if any.
missing_tool() {
	local t
	for t in $(grep -Eo '(^|[^A-Za-z0-9_.-])ncf-(prep|train|eval|infer)([^A-Za-z0-9_.-]|$)' "$1" |
		grep -Eo 'ncf-[a-z]+' | sort -u); do
		[ -x "$NCF_BIN/$t" ] || { echo "$t"; return; }
	done
}

pages=()
for p in "$MAN"/*.[1-9]; do
	[ -f "$p" ] && pages+=("$p")
done
[ "${#pages[@]}" -gt 0 ] || skip_all "no manual pages in $MAN"

total=0
for p in "${pages[@]}"; do
	examples "$p" >"$T/$(basename "$p").cmds"
	total=$((total + $(wc -l <"$T/$(basename "$p").cmds")))
done
[ "$total" -gt 0 ] || skip_all "no EXAMPLES commands in $MAN"

if ! ncf-prep -q --synthetic tiny --emit-csv -o "$T/ratings.csv" 2>"$T/ratings.err"; then
	diag "ncf-prep --synthetic tiny --emit-csv failed:"
	sed 's/^/#   /' "$T/ratings.err"
	exit 1
fi

for p in "${pages[@]}"; do
	page=$(basename "$p")
	cmds=$T/$page.cmds
	missing=$(missing_tool "$cmds")
	dir=$T/run.$page
	mkdir "$dir"
	cp "$T/ratings.csv" "$dir/"
	while IFS= read -r cmd; do
		if [ -n "$missing" ]; then
			skip "$page: $cmd ($missing is not built)"
			continue
		fi
		log=$T/log.$_n
		(cd "$dir" && timeout 300 bash -o pipefail -c "$cmd") </dev/null >"$log" 2>&1
		st=$?
		ok "$st" "$page: $cmd"
		if [ "$st" != 0 ]; then
			diag "exit status $st; its output:"
			tail -n 20 "$log" | sed 's/^/#   /'
		fi
	done <"$cmds"
done

done_testing
