#!/usr/bin/env bash
# prep-spill.t - ncf-prep in bounded memory (-S, --buffer-size): above the
# budget the rows go to sorted runs in TMPDIR and are merged back, and
#  - the cache is byte for byte the in-memory one, whatever the input:
#    real and synthetic ratings, the generator itself and its CSV through
#    a pipe, another line order, duplicates, timestamp ties, users and
#    items dropped by --min-ratings, the other formats (at -S 1M every
#    input here makes several runs and several merge passes);
#  - the peak memory of a pipe of repeated ratings stays put as the input
#    grows fourfold (it grew with the input before), measured with
#    tests/tools/maxrss; not under the sanitizers, whose memory is their own;
#  - a spilling run killed by SIGTERM or SIGKILL leaves no temporary file,
#    in TMPDIR or beside the output, with O_TMPFILE and without;
#  - -S is read as sort -S reads it, and bad sizes, a missing TMPDIR and a
#    full one are refused with the messages in tests/expected/spill.
. "$(dirname "$0")/../lib.sh"
cd "$T"
export LC_ALL=C
TOOLS=$NCF_ROOT/build/tests/tools
mkdir tmp
# same NAME ARGS...: ncf-prep ARGS in memory and at -S 1M, the same cache
# (and the spilled run did spill: its -v line says so)
same() {
	local name=$1
	shift
	ncf-prep -q -o mem.ncfc "$@" && TMPDIR=$T/tmp ncf-prep -v -S 1M -o spill.ncfc "$@" 2>spill.err
	[ $? = 0 ] && grep -q '^ncf-prep: spill: .* in [0-9]* runs' spill.err && cmp -s mem.ncfc spill.ncfc
	ok $? "$name: spilled at -S 1M, the same bytes as in memory"
}
ncf-prep -q --synthetic ml-latest-small --emit-csv -o s.csv || bail "no synthetic CSV"
same "synthetic ml-latest-small CSV" s.csv
same "the generator itself (--synthetic ml-latest-small, its oracle too)" --synthetic ml-latest-small
ncf-prep -q -o mem.ncfc s.csv
ncf-prep -q --synthetic ml-latest-small --emit-csv | TMPDIR=$T/tmp ncf-prep -q -S 1M -o pipe.ncfc
cmp -s mem.ncfc pipe.ncfc
ok $? "the generator's CSV through a pipe, spilled: the same bytes"
# lines reversed (users interleaved from the last), every 7th line repeated
# with its timestamp moved by 0, 1 or 2 seconds (duplicates before and after
# the original), every 5th timestamp rounded to 1000 s (ties)
awk -F, 'NR == 1 { print; next } { a[NR] = $0 }
	END { for (i = NR; i >= 2; i--) {
		split(a[i], f, ",")
		if (i % 5 == 0) f[4] = int(f[4] / 1000) * 1000
		print f[1] "," f[2] "," f[3] "," f[4]
		if (i % 7 == 0) print f[1] "," f[2] "," f[3] "," f[4] - i % 3 } }' s.csv >mixed.csv
same "reversed, repeated, tied" mixed.csv
same "... with --min-ratings 60 (users and items dropped)" --min-ratings 60 mixed.csv
[ "$(info users_dropped spill.ncfc)" -gt 0 ] && [ "$(info items_dropped spill.ncfc)" -gt 0 ] &&
	[ "$(info duplicates_dropped spill.ncfc)" -gt 0 ] && [ "$(info test_timestamp_ties spill.ncfc)" -gt 0 ]
ok $? "... which did drop users, items and duplicates and met ties"
same "... with other negatives and seed" --eval-negatives 999 --seed 7 mixed.csv
tail -n +2 mixed.csv | awk -F, '{ print $1 "::" $2 "::" int($3) "::" $4 }' >mixed.dat
same "ml-1m's :: format" mixed.dat
R=$NCF_DATA/ml-latest-small/ratings.csv
if [ -f "$R" ]; then
	same "ml-latest-small (GroupLens)" "$R"
else
	skip "no $R"
fi

# Memory: repeated ratings through a pipe, 0.5M and 2M of them
if [ "${NCF_SANITIZER:-0}" = 1 ]; then
	skip "memory under the sanitizers is theirs"
	skip "memory under the sanitizers is theirs"
else
	peak() { # N ARGS...: ncf-prep's peak RSS (KiB) on N repeated ratings
		local n=$1
		shift
		{ echo userId,movieId,rating,timestamp; yes 1,10,4.0,100 | head -n "$n"; } >rep.csv
		TMPDIR=$T/tmp "$TOOLS/maxrss" rss ncf-prep -q "$@" -o /dev/null rep.csv || echo fail >rss
		cat rss
	}
	m1=$(peak 500000) m4=$(peak 2000000)
	s1=$(peak 500000 -S 1M) s4=$(peak 2000000 -S 1M)
	diag "peak KiB in memory: $m1, $m4; at -S 1M: $s1, $s4"
	# in memory the 1.5M more rows cost 24 MB and more (16 bytes each read)
	[ $((m4 - m1)) -gt 20000 ]
	ok $? "in memory the peak grows with the input (+$((m4 - m1)) KiB)"
	# spilled, what grows is the runs' list and the zstd buffers: under 2 MiB
	[ $((s4 - s1)) -lt 2048 ] && [ "$s4" -lt $((m1)) ]
	ok $? "at -S 1M it stays put (+$((s4 - s1)) KiB), below the in-memory peak of the smaller input"
fi

# Kills: a run that has spilled, waiting for more input on a FIFO (more
# than its 4 MiB read buffer, so that it parses and spills meanwhile)
{ echo userId,movieId,rating,timestamp; yes 1,10,4.0,100 | head -n 400000; } >rep.csv
killed() { # SIG WHAT [ENV...]: kill a spilling run with SIG; nothing left
	local sig=$1 what=$2 pid n
	shift 2
	rm -f in.fifo && mkfifo in.fifo
	env TMPDIR=$T/tmp "$@" ncf-prep -q -S 1M -o killed.ncfc in.fifo &
	pid=$!
	exec 3>in.fifo
	cat rep.csv >&3
	for n in $(seq 100); do # until it holds a file in TMPDIR, no name leading to it
		ls -l /proc/$pid/fd 2>/dev/null | grep -q "$T/tmp/.*(deleted)" && break
		sleep 0.1
	done
	kill -"$sig" $pid
	wait $pid 2>/dev/null
	local st=$?
	exec 3>&-
	[ "$n" -lt 100 ] && [ -z "$(ls -A tmp)" ] && [ ! -e killed.ncfc ] && [ -z "$(ls -A | grep '^\.')" ]
	ok $? "$what: exit $st, no temporary file left in TMPDIR or beside the output"
}
killed TERM "SIGTERM while spilling"
killed KILL "SIGKILL while spilling"
killed TERM "SIGTERM while spilling, named temporaries (no O_TMPFILE)" NCF_NO_TMPFILE=1
killed KILL "SIGKILL while spilling, named temporaries" NCF_NO_TMPFILE=1

# -S as sort reads it; the messages
ncf-prep -q -o mem.ncfc s.csv
TMPDIR=tmp ncf-prep -q -S 2 -o k.ncfc s.csv && cmp -s k.ncfc mem.ncfc
ok $? "-S 2 (KiB, sort's default unit) is raised to 1M and works"
for size in 1048576b 1024k 1M 1g 1% 50%; do
	ncf-prep -q -S "$size" -o k.ncfc mixed.csv 2>/dev/null || break
done
ok $? "-S takes b, k, M, g and % (the last: $size)"
run ncf-prep -S 1.5G -o k.ncfc s.csv
is "$status" 2 "-S 1.5G: exit 2"
expect spill/size-bad.err "$err" "... a whole number with a unit, as for sort -S"
run ncf-prep -S 101% -o k.ncfc s.csv
expect spill/size-percent.err "$err" "-S 101%: refused too"
rm -f k.ncfc
run env TMPDIR=none ncf-prep -S 1M -o k.ncfc s.csv
is "$status:$(ls -A | grep -c 'k.ncfc')" "1:0" "a TMPDIR that does not exist: exit 1, no cache"
expect spill/tmpdir-missing.err "$err" "... naming TMPDIR"
if mkdir full && mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
	run env TMPDIR=full ncf-prep -S 1M -o k.ncfc mixed.csv
	is "$status:$(ls -A full | wc -l)" "1:0" "a full TMPDIR: exit 1, nothing left in it"
	expect spill/tmpdir-full.err "$err" "... saying where and why"
	umount full
else
	skip "cannot mount a small tmpfs here (needs root)"
	skip "cannot mount a small tmpfs here"
fi
done_testing
