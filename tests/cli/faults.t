#!/bin/bash
# faults.t - what a run leaves when it is killed, when the disk is full and
# when its reader goes away:
#  - kill -9 at random moments during ncf-prep and ncf-train writes: the
#    final names hold the old file or a complete new one, and no temporary
#    file is left (outputs are unnamed O_TMPFILE files until complete).
#    The one instant that can leave a name is between linking a finished
#    file under .NAME.XXXXXX and renaming it over the old one: such a file
#    is complete, and the test says how often that happened;
#  - SIGTERM at random moments where outputs have temporary names
#    (NCF_NO_TMPFILE=1, as on file systems without O_TMPFILE): the same,
#    the handlers remove them;
#  - a full disk (a small tmpfs, as root; else skipped): exit 1 with the
#    reason, the old file intact, nothing else left;
#  - stdout closed early: a reader going away stops a tool quietly
#    (SIGPIPE, even when the parent ignores it); a closed or full stdout
#    is an error with its reason.
. "$(dirname "$0")/../lib.sh"
cd "$T"
mkdir out
ncf-prep -q --synthetic ml-1m --emit-csv -o big.csv || bail "no input"
ncf-prep -q -o new.ncfc big.csv || bail "no reference cache"
printf 'userId,movieId,rating,timestamp\n1,10,4.0,100\n1,11,4.0,200\n2,10,3.0,50\n2,12,3.0,60\n' >r.csv
ncf-prep -q -o old.ncfc r.csv || bail "no small cache"
ncf-prep -q --synthetic ml-latest-small -o s.ncfc || bail "no training cache"
TR="--device cpu -e 3 -b 65536 -f 8 --layers 16,8"

# temporaries DIR: the temporary files left in DIR
temporaries() { find "$1" -name '.*.??????' | wc -l; }
# leftovers DIR CHECK...: 0 when DIR holds no temporary file, 1 when each
# one passes CHECK FILE (a complete file, linked in the instant before its
# rename), 100 when one does not (a partial file: the failure)
linked=0
leftovers() {
	local dir=$1 f r=0
	shift
	for f in $(find "$dir" -name '.*.??????'); do
		if "$@" "$f" >/dev/null 2>&1; then
			r=1
			linked=$((linked + 1))
		else
			r=100
			diag "left in $dir: $f, not a complete file"
			break
		fi
	done
	find "$dir" -name '.*' -delete
	return $r
}
same_as_new() { cmp -s "$1" new.ncfc; }
a_model() { ncf-eval -q --device cpu -m "$1" s.ncfc; }
# sleep_ms N: sleep N milliseconds
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

# writing PID: wait (up to 5 s) until PID has a file open in out/ (its
# output, being written), then a random 0 to 20 ms more; 1 if it never did
writing() {
	local k=0
	while [ $k -lt 1000 ]; do
		if ls -l /proc/"$1"/fd 2>/dev/null | grep -q "$T/out/"; then
			sleep_ms $((RANDOM % 20))
			return 0
		fi
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.005
		k=$((k + 1))
	done
	return 1
}

# --- kill -9 during ncf-prep ---------------------------------------------------------
# Each kill comes while the cache is being written (its file open in out/):
# every one leaves the old cache and nothing else, or (if the write ended
# first) the new one.
bad=0 olds=0 news=0 during=0
for i in 1 2 3 4 5 6 7 8; do
	cp old.ncfc out/c.ncfc
	ncf-prep -q -o out/c.ncfc big.csv &
	pid=$!
	writing $pid && during=$((during + 1))
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	if cmp -s out/c.ncfc old.ncfc; then
		olds=$((olds + 1))
	elif cmp -s out/c.ncfc new.ncfc; then
		news=$((news + 1))
	else
		bad=$((bad + 1))
	fi
	leftovers out same_as_new
	[ $? -lt 100 ] || bad=$((bad + 100))
done
diag "ncf-prep killed 8 times, $during while writing: $olds left the old cache, $news the new one"
is "$bad" 0 "kill -9 during ncf-prep: the old or the complete new cache, no partial temporary file"

# --- kill -9 during ncf-train ----------------------------------------------------------
ncf-train -q $TR s.ncfc -o ref.ncfm -e 1 || bail "no reference model"
bad=0 during=0
for i in 1 2 3 4 5 6; do
	cp ref.ncfm out/m.ncfm
	cp ref.ncfm.last out/m.ncfm.last
	ncf-train -q $TR s.ncfc -o out/m.ncfm &
	pid=$!
	# the first checkpoint write of the run, or a random later moment
	if [ $((i % 2)) = 1 ]; then
		writing $pid && during=$((during + 1))
	else
		sleep_ms $((RANDOM % 1500))
	fi
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	for f in out/m.ncfm out/m.ncfm.last; do
		a_model $f >/dev/null 2>&1 || bad=$((bad + 1))
	done
	leftovers out a_model
	[ $? -lt 100 ] || bad=$((bad + 100))
done
diag "ncf-train killed 6 times, $during while writing a checkpoint"
is "$bad" 0 "kill -9 during ncf-train: both checkpoints complete, no partial temporary file"
diag "kill -9 left $linked complete file(s) under a temporary name (killed between link and rename)"

# --- SIGTERM with named temporary files ------------------------------------------------
bad=0
for i in 1 2 3 4; do
	cp old.ncfc out/c.ncfc
	NCF_NO_TMPFILE=1 ncf-prep -q -o out/c.ncfc big.csv &
	pid=$!
	writing $pid
	kill -TERM $pid 2>/dev/null
	wait $pid 2>/dev/null
	cmp -s out/c.ncfc old.ncfc || cmp -s out/c.ncfc new.ncfc || bad=$((bad + 1))
	[ "$(temporaries out)" = 0 ] || bad=$((bad + 100))
done
for i in 1 2 3; do
	NCF_NO_TMPFILE=1 ncf-train -q $TR s.ncfc -o out/t.ncfm &
	pid=$!
	sleep_ms $((RANDOM % 1000))
	kill -TERM $pid 2>/dev/null
	wait $pid 2>/dev/null
	[ "$(temporaries out)" = 0 ] || bad=$((bad + 100))
	rm -f out/t.ncfm*
done
is "$bad" 0 "SIGTERM with named temporary files: the old or the new file, the temporary removed"
cp old.ncfc out/c.ncfc
NCF_NO_TMPFILE=1 ncf-prep -q -o out/c.ncfc big.csv
cmp -s out/c.ncfc new.ncfc && [ "$(temporaries out)" = 0 ]
ok $? "NCF_NO_TMPFILE=1: the same cache, through a temporary name"

# --- a full disk -------------------------------------------------------------------------
mkdir full
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=96k ncf-full full 2>/dev/null; then
	trap 'umount "$T/full" 2>/dev/null; rm -rf "$T"' EXIT
	cp old.ncfc full/c.ncfc
	run ncf-prep -q -o full/c.ncfc big.csv
	is "$status" 1 "full disk: ncf-prep exits 1"
	expect faults-full-prep "$err" "full disk: ncf-prep says why"
	cmp -s full/c.ncfc old.ncfc && [ "$(ls -A full)" = c.ncfc ]
	ok $? "full disk: the old cache intact, nothing else left"
	NCF_NO_TMPFILE=1 run ncf-prep -q -o full/c.ncfc big.csv
	cmp -s full/c.ncfc old.ncfc && [ "$(ls -A full)" = c.ncfc ] && [ "$status" = 1 ]
	ok $? "full disk, named temporary: exit 1, the old cache intact, the temporary removed"
	run ncf-train -q $TR s.ncfc -o full/m.ncfm -e 1
	is "$status" 1 "full disk: ncf-train exits 1"
	expect faults-full-train "$err" "full disk: ncf-train says why"
	run ncf-prep -q --synthetic ml-1m --emit-csv -o full/r.csv
	is "$status" 1 "full disk: ncf-prep --emit-csv exits 1"
	expect faults-full-csv "$err" "full disk: ncf-prep --emit-csv says why"
	ncf-train -q $TR s.ncfc -o m.ncfm -e 1
	run ncf-eval --device cpu -m m.ncfm --scores full/s.txt s.ncfc
	is "$status" 1 "full disk: ncf-eval --scores exits 1"
	expect faults-full-scores "$err" "full disk: ncf-eval --scores says why"
	[ "$(ls -A full)" = c.ncfc ]
	ok $? "full disk: no partial file from any of them"
	umount full
else
	skip "a full disk needs root and tmpfs (mount -t tmpfs)"
fi

# --- stdout closed early ------------------------------------------------------------------
[ -f m.ncfm ] || ncf-train -q $TR s.ncfc -o m.ncfm -e 1
seq 1 200000 | awk '{ print 1 + $1 % 600, 1 + $1 % 9000 }' >pairs.txt
ncf-infer --device cpu --skip-unknown --score -m m.ncfm pairs.txt 2>err.pipe | head -n 1 >/dev/null
st=${PIPESTATUS[0]}
is "$st:$(cat err.pipe)" "141:" "a reader going away stops ncf-infer --score quietly (SIGPIPE)"
(
	trap '' PIPE
	ncf-infer --device cpu --skip-unknown --score -m m.ncfm pairs.txt 2>err.pipe | head -n 1 >/dev/null
	echo "${PIPESTATUS[0]}" >st.pipe
)
is "$(cat st.pipe):$(cat err.pipe)" "141:" "... even when the parent ignores SIGPIPE"
ncf-eval --device cpu -m m.ncfm --scores - s.ncfc 2>err.pipe | head -n 1 >/dev/null
is "${PIPESTATUS[0]}:$(cat err.pipe)" "141:" "ncf-eval --scores - | head: quietly stopped"
ncf-prep -o - big.csv 2>err.pipe | head -c 100 >/dev/null
is "${PIPESTATUS[0]}:$(cat err.pipe)" "141:" "ncf-prep -o - | head -c 100: quietly stopped"
ncf-prep --info s.ncfc >&- 2>err.closed
is "$?" 1 "ncf-prep --info with stdout closed: exit 1"
expect faults-closed-stdout err.closed "... and says why"
ncf-eval --device cpu -m m.ncfm --scores sc.txt s.ncfc >&- 2>err.closed
st=$?
[ "$st" = 1 ] && [ ! -e sc.txt ]
ok $? "ncf-eval with stdout closed: exit 1, and --scores is not written into stdout's place"
ncf-prep --info s.ncfc >/dev/full 2>err.full
is "$?" 1 "ncf-prep --info to a full stdout: exit 1"
expect faults-full-stdout err.full "... and says why"
done_testing
