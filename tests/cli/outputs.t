#!/bin/bash
# outputs.t - how the tools write files that are not plain new files: a
# FIFO or device is written in place (never replaced), a symbolic link's
# target is replaced (the link stays), an existing file keeps its mode; and
# a few input and output edge cases found in review.
. "$(dirname "$0")/../lib.sh"
cd "$T"
printf 'userId,movieId,rating,timestamp\n1,10,4.0,100\n1,11,4.0,200\n2,10,3.0,50\n2,12,3.0,60\n' >r.csv

mkfifo pipe
(cat pipe >from-fifo.bin) &
reader=$!
ncf-prep -q -o pipe r.csv
ok $? "ncf-prep -o FIFO writes into the FIFO"
wait $reader
[ -p pipe ] && [ -s from-fifo.bin ]
ok $? "the FIFO is still a FIFO, and its reader got the cache"
ncf-prep -q -o plain.ncfc r.csv
cmp -s plain.ncfc from-fifo.bin
ok $? "the same bytes as a plain file"

mkdir real
ncf-prep -q -o real/target.ncfc r.csv
ln -s real/target.ncfc link.ncfc
ncf-prep -q --seed 7 -o link.ncfc r.csv
[ -L link.ncfc ] && ! cmp -s link.ncfc plain.ncfc && [ "$(ls -A real | wc -l)" = 1 ]
ok $? "-o through a symbolic link replaces its target and keeps the link"

chmod 640 plain.ncfc
ncf-prep -q --seed 9 -o plain.ncfc r.csv
is "$(stat -c %a plain.ncfc)" 640 "an existing file keeps its mode"

run ncf-prep -q -o /dev/null r.csv
ok $status "-o /dev/null works"
[ -c /dev/null ]
ok $? "/dev/null is still a device"

printf 'userId,movieId,rating,timestamp\n1,10,4.0,100\n  \t \n1,11,4.0,200\n' | ncf-prep -q -o spaces.ncfc
ok $? "a line of spaces and tabs is skipped like a blank line"

ncf-train -q --device cpu plain.ncfc -o m.ncfm -e 1 -b 64
run ncf-eval --device cpu -m m.ncfm --scores - plain.ncfc
is "$(head -n 1 "$out" | cut -f1)" "hr@10" "--scores -: the metrics come first"
if [ -w /dev/full ]; then
	run ncf-train -q --device cpu plain.ncfc -o m2.ncfm -e 1 -b 64 --log /dev/full
	is "$status" 1 "--log to a full disk: exit 1"
else
	skip "no /dev/full"
fi
done_testing
