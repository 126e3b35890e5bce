#!/usr/bin/env bash
# surroundings.t - the tools in their surroundings: how OpenMP's threads
# wait (ncf's default where the environment says nothing, -v says which),
# --progress off a terminal (plain lines, no carriage return or escape
# sequence), the bash completion, ncf-plot without gnuplot (the apt-get
# line, nothing installed), make install and uninstall into a DESTDIR.
. "$(dirname "$0")/../lib.sh"
cd "$T" || bail "cannot cd to $T"

ncf-prep -q --synthetic tiny -o c.ncfc || bail "ncf-prep --synthetic tiny failed"
ncf-prep -q --synthetic tiny --emit-csv -o r.csv || bail "ncf-prep --emit-csv failed"
F="--device cpu --factors 8 --layers 16,16,8"

# --- OpenMP's waiting --------------------------------------------------------
DEFAULT=$(sed -n 's/^#define NCF_OMP_WAIT_DEFAULT "\(.*\)"/\1/p' "$NCF_ROOT/cli/omp_wait.h")
run env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT ncf-train -v c.ncfc -o m.ncfm $F -e 1 -b 512
is "$status" 0 "ncf-train with nothing set about OpenMP's waiting: exit 0"
like "$err" "^ncf-train: openmp threads wait: $DEFAULT \\(ncf's default" "... -v says ncf's default, $DEFAULT"
run env OMP_WAIT_POLICY=active ncf-eval -v -m m.ncfm c.ncfc
like "$err" "^ncf-eval: openmp threads wait: OMP_WAIT_POLICY=active \\(from the environment\\)" \
	"OMP_WAIT_POLICY in the environment is left as it is, and -v says so"
run env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=50 ncf-prep -v -o p.ncfc r.csv
like "$err" "^ncf-prep: openmp threads wait: GOMP_SPINCOUNT=50 \\(from the environment\\)" \
	"GOMP_SPINCOUNT too"
run env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT ncf-infer -v --bench -m m.ncfm -b 8 --warmup 0 --iterations 1
like "$err" "^ncf-infer: openmp threads wait: $DEFAULT \\(ncf's default" "ncf-infer -v: the same"

# --- progress off a terminal -------------------------------------------------
# plain CMD...: stderr has no CR and no ESC (run's $err)
plain() { ! grep -q "$(printf '[\r\033]')" "$err"; }
ncf-prep -q --synthetic ml-latest-small -o mls.ncfc || bail "ncf-prep ml-latest-small failed"
t0=$(date +%s)
run ncf-train --progress mls.ncfc -o p.ncfm $F -e 2 -b 1024
t1=$(date +%s)
is "$status" 0 "ncf-train --progress into a file: exit 0"
plain
ok $? "... no carriage return or escape sequence"
like "$err" '^ncf-train: epoch 1/2  [0-9.k]+/[0-9.k]+ \([0-9]+%\)' "... plain lines 'ncf-train: epoch E/N  done/total (pct%)'"
n=$(grep -c '^ncf-train: epoch [0-9]*/2  ' "$err")
[ "$n" -ge 1 ] && [ "$n" -le $(((t1 - t0) / 5 + 1)) ]
ok $? "... at most one every 5 s ($n in $((t1 - t0)) s)"
run ncf-prep --progress -o q.ncfc r.csv
plain
ok $? "ncf-prep --progress into a file: no carriage return or escape sequence"
like "$err" '^ncf-prep: reading  [0-9.]+/[0-9.]+ MB \([0-9]+%\)' "... the bytes read as MB of the file's size"

# --- bash completion ---------------------------------------------------------
if command -v bash >/dev/null; then
	# complete WORD...: what _ncf offers for the last word (the tool first)
	complete_words() {
		bash -c '. "$1/scripts/ncf-completion.bash"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
			_ncf "$1"; printf "%s\n" "${COMPREPLY[@]}"' sh "$NCF_ROOT" "$@" | sort | tr '\n' ' '
	}
	is "$(complete_words ncf-train --batch)" "--batch-size " "ncf-train --batch<TAB>: --batch-size"
	is "$(complete_words ncf-infer --random)" "--random-model " "ncf-infer --random<TAB>: --random-model"
	is "$(complete_words ncf-eval --device "")" "auto cpu cuda " "--device <TAB>: auto cpu cuda"
	is "$(complete_words ncf-eval -m m.ncfm "")" "c.ncfc mls.ncfc p.ncfc q.ncfc " "ncf-eval's operand: the caches here"
	is "$(complete_words ncf-infer -m "")" "m.ncfm m.ncfm.last p.ncfm p.ncfm.last " "-m <TAB>: the models here"
else
	for k in 1 2 3 4 5; do skip "no bash"; done
fi

# --- ncf-plot without gnuplot --------------------------------------------------
mkdir nognuplot
for c in sh basename id sed awk mktemp rm wc head cat; do
	ln -s "$(command -v $c)" "nognuplot/$c" 2>/dev/null
done
ncf-train -q c.ncfc -o l.ncfm $F -e 2 -b 512 --log log.jsonl || bail "ncf-train --log failed"
run env PATH="$T/nognuplot" sh "$NCF_ROOT/scripts/plot.sh" log.jsonl </dev/null
is "$status" 1 "plot without gnuplot, not on a terminal: exit 1"
like "$err" "^plot: gnuplot is missing; install it with: (sudo )?apt-get install gnuplot-nox$" \
	"... says the line that installs it, and installs nothing"
[ ! -e log.jsonl.png ]
ok $? "... and draws nothing"

# --- make install, uninstall ------------------------------------------------
if command -v make >/dev/null && [ -x "$NCF_ROOT/build/bin/ncf-train" ]; then
	R=$T/root
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$NCF_ROOT" install DESTDIR="$R" PREFIX=/usr \
		>install.out 2>&1
	ok $? "make install DESTDIR=... PREFIX=/usr: exit 0"
	missing=""
	for f in bin/ncf-prep bin/ncf-train bin/ncf-eval bin/ncf-infer bin/ncf-plot \
		share/bash-completion/completions/ncf-prep share/bash-completion/completions/ncf-train \
		share/bash-completion/completions/ncf-eval share/bash-completion/completions/ncf-infer \
		share/man/man7/ncf.7; do
		[ -e "$R/usr/$f" ] || missing="$missing $f"
	done
	is "$missing" "" "... the tools, ncf-plot, the bash completion of each tool, the man pages"
	run "$R/usr/bin/ncf-plot" --help
	is "$status" 0 "ncf-plot --help: exit 0"
	like "$err" '^usage: ncf-plot LOG \[PNG\]' "... its usage names it ncf-plot"
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$NCF_ROOT" uninstall DESTDIR="$R" PREFIX=/usr \
		>uninstall.out 2>&1
	is "$(find "$R" -type f | sed "s|^$R/||" | tr '\n' ' ')" "" "make uninstall removes every file"
else
	for k in 1 2 3 4 5; do skip "no make or no build"; done
fi

done_testing
