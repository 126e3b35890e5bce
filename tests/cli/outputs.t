#!/bin/bash
# outputs.t - how the tools write files that are not plain new files: a
# FIFO or device is written in place (never replaced), a symbolic link's
# target is replaced (the link stays), an existing file keeps its mode; a
# few input and output edge cases found in review; and the checks made
# before any work: ncf-train --keep-epochs's epoch files are compared with
# every input and output like the other outputs (a link or hard link to
# the cache named MODEL.epoch-NNN was overwritten), and an output that
# cannot be created (a directory, a read-only file system) is refused
# before the cache is read, not after the first epoch.
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

# --keep-epochs: MODEL.epoch-NNN against the inputs and the other outputs
keep() { # NAME LINK-COMMAND: with the link made, exit 2 and the message, the cache intact
	local name=$1
	shift
	cp plain.ncfc keep.ncfc
	"$@"
	run ncf-train --device cpu keep.ncfc -o k.ncfm -e 3 -b 64 --keep-epochs
	is "$status" 2 "--keep-epochs, $name: exit 2"
	expect "outputs/keep-$name.err" "$err" "... naming the epoch file and the cache"
	cmp -s keep.ncfc plain.ncfc && [ ! -e k.ncfm ] && [ ! -e k.ncfm.last ]
	ok $? "... the cache intact, nothing written"
	rm -f k.ncfm.epoch-*
}
keep link ln -s keep.ncfc k.ncfm.epoch-002
keep hardlink ln keep.ncfc k.ncfm.epoch-003
run ncf-train --device cpu plain.ncfc -o k.ncfm -e 3 -b 64 --keep-epochs --log k.ncfm.epoch-001
is "$status" 2 "--log named as an epoch file: exit 2"
expect outputs/keep-log.err "$err" "... naming both"
cp plain.ncfc plain.orig
ln -s plain.ncfc k.ncfm.epoch-004
run ncf-train -q --device cpu plain.ncfc -o k.ncfm -e 3 -b 64 --keep-epochs
[ "$status" = 0 ] && cmp -s plain.ncfc plain.orig && [ -f k.ncfm.epoch-003 ]
ok $? "a link to the cache past the last epoch is left alone: the run goes ahead"
rm -f k.ncfm*

# an output that cannot be created: said before the cache is read
early() { # NAME CMD...: exit 1, the message, no epoch trained
	local name=$1
	shift
	run "$@"
	is "$status" 1 "$name: exit 1"
	expect "outputs/early-$name.err" "$err" "... at once, with the reason (no epoch line)"
}
mkdir adir
early train-o-dir ncf-train --device cpu plain.ncfc -o adir -e 1 -b 64
early train-checkpoint-dir ncf-train --device cpu plain.ncfc -o m3.ncfm --checkpoint adir -e 1 -b 64
early train-o-nodir ncf-train --device cpu plain.ncfc -o nodir/m.ncfm -e 1 -b 64
mkdir adir/k.ncfm.epoch-002
early train-epoch-dir ncf-train --device cpu plain.ncfc -o adir/k.ncfm -e 3 -b 64 --keep-epochs
early prep-o-dir ncf-prep -o adir r.csv
early eval-scores-dir ncf-eval --device cpu -m m.ncfm --scores adir plain.ncfc
early infer-export-dir ncf-infer -m m.ncfm --export adir --export-format safetensors
[ ! -e m3.ncfm ] && [ -z "$(ls -A adir/k.ncfm.epoch-002)" ] && [ "$(ls -A adir)" = k.ncfm.epoch-002 ]
ok $? "no file left by any of them"
# A read-only file system (chmod does not stop root): a tmpfs mounted
# read-only in a mount namespace of its own, gone when the command ends.
mkdir ro
ro() { unshare -m sh -c 'mount -t tmpfs -o ro,size=64k tmpfs ro && exec "$@"' sh "$@"; }
if ro true 2>/dev/null || { ro() { unshare -rm sh -c 'mount -t tmpfs -o ro,size=64k tmpfs ro && exec "$@"' sh "$@"; }; ro true 2>/dev/null; }; then
	early train-readonly ro ncf-train --device cpu plain.ncfc -o ro/m.ncfm -e 1 -b 64
	early train-log-readonly ro ncf-train --device cpu plain.ncfc -o m4.ncfm --log ro/log -e 1 -b 64
	early prep-readonly ro env NCF_NO_TMPFILE=1 ncf-prep -o ro/c.ncfc r.csv
	[ ! -e m4.ncfm ] && [ ! -e m4.ncfm.last ]
	ok $? "nothing written elsewhere either"
else
	for k in 1 2 3 4 5 6 7; do skip "cannot mount a read-only tmpfs here (needs root or user namespaces)"; done
fi

if [ -w /dev/full ]; then
	run ncf-train -q --device cpu plain.ncfc -o m2.ncfm -e 1 -b 64 --log /dev/full
	is "$status" 1 "--log to a full disk: exit 1"
else
	skip "no /dev/full"
fi
done_testing
