#!/bin/bash
# hostile.t - hostile input and faults that once broke a tool, one
# regression each: the CR in a header line (was SIGSEGV), outputs that are
# inputs (were overwritten), NUL bytes inside text lines (were read up to
# the NUL), dangling symbolic links as outputs (were replaced), --log
# failures (no reason, no checkpoint), where a truncated file ends, the
# bad-magic escape; ratings files with bare CRs (were split into rows),
# lines past 1 MiB (were read but at some offsets), more negatives than a
# cache holds (ran out of memory), ids chosen to collide (were quadratic).
# The messages are the contract: compared with tests/expected/hostile-*.  Resuming from impossible positions and
# epochs, memory from claims: crafted.t; kills, full disks: faults.t.
. "$(dirname "$0")/../lib.sh"
cd "$T"
H='userId,movieId,rating,timestamp'
printf '%s\n1,10,4.0,100\n1,11,4.0,200\n2,10,3.0,50\n2,12,3.0,60\n3,11,2,70\n3,12,2,80\n' "$H" >r.csv
cp r.csv r.orig
ncf-prep -q -o c.ncfc r.csv || bail "no cache"
cp c.ncfc c.orig
ncf-train -q --device cpu c.ncfc -o m.ncfm -e 1 -b 8 -f 4 --layers 8,4 || bail "no model"
cp m.ncfm m.orig

# --- 1. a CR inside the header line ----------------------------------------------------
printf 'a\r,"\n' >cr.csv
run ncf-prep --format csv -o x.ncfc cr.csv
is "$status" 1 "a bare CR in the header: exit 1 (was SIGSEGV)"
expect hostile-header-cr "$err" "... with the line named"
printf 'user,item,time\rstamp\n1,2,3\n' | ncf-prep -o x.ncfc 2>err.cr
like err.cr "^ncf-prep: <stdin>:1: a carriage return inside the line" \
	"a CR that would end the header early, on stdin"
[ ! -e x.ncfc ]
ok $? "no cache from either"

# --- 4. an output that is the same file as an input ------------------------------------
same() { # NAME CMD...: exit 2, the message, nothing touched
	local name=$1
	shift
	run "$@"
	is "$status" 2 "$name: exit 2"
	expect "hostile-same-$name" "$err" "$name: the message names both"
}
same prep-o ncf-prep -o r.csv r.csv
same prep-dot ncf-prep -o ./r.csv r.csv
ln -s r.csv link.csv
same prep-link ncf-prep -o link.csv r.csv
ln r.csv hard.csv
same prep-hardlink ncf-prep -o hard.csv r.csv
same prep-info-stdout sh -c 'ncf-prep --info c.ncfc >>c.ncfc'
same train-o ncf-train --device cpu c.ncfc -o c.ncfc
same train-log-o ncf-train --device cpu c.ncfc -o n.ncfm --log n.ncfm
same train-checkpoint-o ncf-train --device cpu c.ncfc -o n.ncfm --checkpoint ./n.ncfm
same train-log-default-checkpoint ncf-train --device cpu c.ncfc -o n.ncfm --log n.ncfm.last
same train-log-cache ncf-train --device cpu c.ncfc -o n.ncfm --log c.ncfc
same train-log-resume ncf-train --device cpu c.ncfc -o n.ncfm --resume m.ncfm --log m.ncfm
same eval-scores-model ncf-eval --device cpu -m m.ncfm --scores m.ncfm c.ncfc
same eval-scores-cache ncf-eval --device cpu -m m.ncfm --scores c.ncfc c.ncfc
echo '1 10' >pairs.txt
cp pairs.txt pairs.orig
same infer-stdout-input sh -c 'ncf-infer --device cpu --score -m m.ncfm pairs.txt >>pairs.txt'
cmp -s r.csv r.orig && cmp -s c.ncfc c.orig && cmp -s m.ncfm m.orig && cmp -s pairs.txt pairs.orig &&
	[ ! -e n.ncfm ] && [ ! -e n.ncfm.last ]
ok $? "no input was touched, no output written"
# resuming in place reads the checkpoint in full first: allowed
cp m.ncfm.last r.ncfm.last
run ncf-train -q --device cpu c.ncfc --resume r.ncfm.last -o r.ncfm -e 2
ok $status "--resume FILE with --checkpoint FILE (the default) is allowed"
# two outputs on stdout are allowed (ncf-eval prints the metrics first)
run ncf-eval --device cpu -m m.ncfm --scores - c.ncfc
ok $status "--scores - beside the metrics on stdout is allowed"

# --- 5. a NUL byte inside a text line ----------------------------------------------------
printf '1 10\0junk\n' | ncf-infer --device cpu --score -m m.ncfm >out.nul 2>err.nul
is "$?:$(wc -c <out.nul)" "1:0" "--score: a NUL inside a line: exit 1, nothing scored"
expect hostile-nul-score err.nul "... the line named"
printf '1\n1\000999\n' | ncf-infer --device cpu --recommend 1 -m m.ncfm >out.nul 2>err.nul
is "$?:$(wc -l <out.nul)" "1:1" "--recommend: user 1, then a NUL on line 2: exit 1"
expect hostile-nul-recommend err.nul "... line 2 named"

# --- 6. a dangling symbolic link as an output ----------------------------------------------
mkdir d
ln -s d/target.ncfc dangling.ncfc
run ncf-prep -q -o dangling.ncfc r.csv
[ "$status" = 0 ] && [ -L dangling.ncfc ] && cmp -s d/target.ncfc c.ncfc
ok $? "-o through a dangling link creates its target and keeps the link"
ln -s dangling.ncfc chain.ncfc
rm d/target.ncfc
run ncf-prep -q -o chain.ncfc r.csv
[ "$status" = 0 ] && [ -L chain.ncfc ] && [ -L dangling.ncfc ] && cmp -s d/target.ncfc c.ncfc
ok $? "... through a chain of links too"
ln -s nowhere/x.ncfc lost.ncfc
run ncf-prep -o lost.ncfc r.csv
is "$status" 1 "a link into a missing directory: exit 1"
expect hostile-link-missing-dir "$err" "... saying so"
ln -s d/m.ncfm mlink.ncfm
run ncf-train -q --device cpu c.ncfc -o mlink.ncfm -e 1 -b 8 -f 4 --layers 8,4
[ "$status" = 0 ] && [ -L mlink.ncfm ] && [ -f d/m.ncfm ] && [ -f mlink.ncfm.last ]
ok $? "ncf-train -o a dangling link: the model is written where it points"

# --- 9. --log failures, truncation offsets, the bad-magic escape ---------------------------
if [ -w /dev/full ]; then
	run ncf-train -q --device cpu c.ncfc -o full.ncfm -e 2 -b 8 -f 4 --layers 8,4 --log /dev/full
	is "$status" 1 "--log to a full disk: exit 1"
	expect hostile-log-full "$err" "... with the reason and where the state is"
	[ -f full.ncfm ] && [ -f full.ncfm.last ]
	ok $? "... after the epoch's checkpoints were written"
	run ncf-train -q --device cpu c.ncfc --resume full.ncfm.last -o full.ncfm -e 2
	ok $status "... from which the run resumes"
else
	skip "no /dev/full"
fi
size=$(wc -c <c.ncfc)
head -c $((size - 20)) c.ncfc >trunc.ncfc
run ncf-prep --info trunc.ncfc
is "$status" 1 "a truncated cache: exit 1"
like "$err" "at byte $((size - 20)) " "... the message names where the file ends ($((size - 20)))"
printf 'NCF\377\377\377\377\377%024d' 0 >magic.ncfc
run ncf-prep --info magic.ncfc
expect hostile-magic "$err" "the bad magic's escapes are whole"

# --- 10. hostile ratings files: bare CRs, long lines anywhere, too many negatives, ids
# chosen to collide ------------------------------------------------------------------------
# refused NAME FILE [ARG...]: ncf-prep refuses FILE, exit 1, no cache left, the message of
# tests/expected/hostile-prep-NAME
refused() {
	local name=$1 file=$2
	shift 2
	run ncf-prep "$@" -o h.ncfc "$file"
	is "$status" 1 "$name: exit 1"
	expect "hostile-prep-$name" "$err" "$name: the message"
	[ -z "$(ls -A | grep -E '^\.?h\.ncfc')" ]
	ok $? "$name: no cache left"
}
# accepted DESC FILE: ncf-prep reads FILE
accepted() {
	run ncf-prep -q -o a.ncfc "$2"
	is "$status:$(cat "$err")" "0:" "$1"
}
# a carriage return anywhere but before a line's LF (libcsv ended a row at it)
printf '%s\n1,10,4.0,100\r1,11,4.0,200\n2,10,3.0,50\n' "$H" >cr-inside.csv
refused cr-inside cr-inside.csv
printf '%s\n1,10,4.0,100\r\r\n2,10,3.0,50\r\n' "$H" >cr-cr-lf.csv
refused cr-cr-lf cr-cr-lf.csv
printf '%s\n1,"10\r",4.0,100\n' "$H" >cr-quoted.csv
refused cr-quoted cr-quoted.csv
tr '\n' '\r' <r.csv >cr-only.csv
refused cr-only cr-only.csv
printf '1::10::4::100\r1::11::4::200\r2::10::3::50\r' >cr-only.dat
refused cr-only-dat cr-only.dat
printf '1 10\r\n1 11\r2 10\n' | ncf-infer --device cpu --score -m m.ncfm >out.cr 2>err.cr
is "$?:$(wc -c <out.cr)" "1:0" "--score: a bare CR on line 2: exit 1, nothing scored"
expect hostile-cr-score err.cr "... line 2 named"
# lines past 1 MiB: the first, one near the start and one far in, the last (with and
# without its end), a quoted field of 3 MiB; lines of exactly 1 MiB, LF or CRLF, pass
x() { head -c "$1" /dev/zero | tr '\0' "${2:-1}"; }
{ printf '%s,' "$H"; x 1500000 a; printf '\n1,10,4.0,100\n'; } >long-first.csv
refused long-first long-first.csv
{ printf '%s\n1,10,4.0,100\n1,' "$H"; x 1500000; printf ',4.0,100\n'; } >long-early.csv
refused long-early long-early.csv
{ printf '%s\n' "$H"; seq 1 190000 | awk '{ print "1," $1 ",4.0," $1 }'; printf '2,'; x 1500000
	printf ',4.0,100\n'; } >long-late.csv
refused long-late long-late.csv
{ cat r.csv; printf '3,13,4.0,'; x 1500000; printf '\n'; } >long-last.csv
refused long-last long-last.csv
{ cat r.csv; printf '3,13,4.0,'; x 1500000; } >long-last-unended.csv
refused long-last-unended long-last-unended.csv
{ printf 'user,item,note,timestamp\n1,10,a,100\n2,11,"'; x 3145728 b; printf '",200\n'; } >long-field.csv
refused long-field long-field.csv
{ printf 'user,item,note,timestamp\n1,10,'; x 1048567 n; printf ',100\n2,10,'; x 1048567 n
	printf ',100\r\n'; } >mib.csv
accepted "lines of exactly 1 MiB (LF, CRLF) are read" mib.csv
{ printf 'user,item,note,timestamp\n1,10,'; x 1048568 n; printf ',100\r\n'; } >mib1.csv
refused long-mib-plus-1 mib1.csv
# users x negatives past what a cache may hold (2^36), said before the negatives are made
{ printf '%s\n' "$H"; seq 1 700000 | awk '{ print $1 "," $1 % 50 + 1 ",4.0," $1 }'; } >u700k.csv
refused negatives u700k.csv --eval-negatives 100000
refused negatives-spilled u700k.csv --eval-negatives 100000 -S 1M
run ncf-prep --synthetic ml-20mx100 --eval-negatives 5000 -o h.ncfc
is "$status" 1 "--synthetic with too many negatives: exit 1"
expect hostile-prep-negatives-synthetic "$err" "... said before a rating is made"
# ids chosen to collide under the unkeyed mix the id map used to hash with (one slot for
# all, a cost quadratic in the ids; make bench times them): read as any ids, their cache
# exactly as before
"$NCF_ROOT/build/tests/tools/crafted_ids" crafted 2000 >crafted.csv || bail "no crafted_ids"
run ncf-prep -q --eval-negatives 5 -o crafted.ncfc crafted.csv
ok $status "2000 users with colliding ids: read"
ncf-prep --info crafted.ncfc >crafted.info
expect hostile-prep-crafted-ids-info crafted.info "... to the same cache (ids in order, fingerprint)"
done_testing
