#!/bin/bash
# crafted.t - caches and checkpoints with valid checksums and hostile
# contents (tests/tools/craft.c: counts at 0, at their maximum and next to
# an overflow, offsets out of order, ids at or past their counts, shapes
# that disagree with their blobs, positions and epochs out of range, NaN
# and out-of-range hyperparameters, sizes claimed beyond what the bytes
# hold): every reader refuses each one with exit 1 and one line naming the
# field (tests/expected/crafted-cache, crafted-model), in bounded memory.
#
# Readers: caches through ncf-prep --info, ncf-train, ncf-eval --baseline
# and ncf-infer --exclude-seen; checkpoints through ncf-eval -m,
# ncf-infer --score and ncf-train --resume.  Under the sanitizers
# (NCF_SANITIZER=1, check-asan) one reader per kind, which runs the same
# reading code, and no memory bound (the sanitizers' own memory).
. "$(dirname "$0")/../lib.sh"
cd "$T"
TOOLS=$NCF_ROOT/build/tests/tools
"$TOOLS/craft" . || bail "craft failed"
san=${NCF_SANITIZER:-0}

# The good files every case is one change away from: accepted.
run ncf-prep --info good.ncfc
ok $status "the base cache is accepted"
echo '11 101' >pair.txt
echo 11 >user.txt
run ncf-infer --device cpu --score -m good.ncfm pair.txt
ok $status "the base model is accepted"
run ncf-eval --device cpu -m good.ncfm good.ncfc
ok $status "the base model and cache belong together"
run ncf-train -q --device cpu good.ncfc --resume good.ncfm -o resumed.ncfm -e 2
ok $status "the base model resumes on the base cache"

# Memory: a reader's peak above what it takes to refuse a one-byte file
# (the libraries it loads: cuBLAS alone is some 200 MB) is at most 64 MiB.
# A file's meta is weighed against its size first (what its bytes can
# decode to); through a pipe, c-userids-rle-16MiB, which really holds 16
# MiB of ids, is read and checked with two copies: some 50 MiB.
printf 'x' >empty.ncfc
printf 'x' >empty.ncfm
rss() { cat "$T/rss"; }
base_rss() { # READER-ARGS... : the peak of refusing a one-byte file
	"$TOOLS/maxrss" "$T/rss" "$@" >/dev/null 2>&1 <pair.txt
	rss
}

# check KIND NAME CMD... (the crafted file is the word @F@ of CMD)
check() {
	local kind=$1 name=$2 ext base over worst=0 worst_case= bad=0 f
	shift 2
	[ "$kind" = cache ] && ext=ncfc || ext=ncfm
	base=$(base_rss "${@//@F@/empty.$ext}")
	: >"got.$name"
	while IFS="$(printf '\t')" read -r c k; do
		[ "$k" = "$kind" ] || continue
		f=$c.$ext
		"$TOOLS/maxrss" "$T/rss" "${@//@F@/$f}" >/dev/null 2>"err.$name" <"$in"
		st=$?
		if [ "$st" != 1 ] || [ "$(wc -l <"err.$name")" != 1 ]; then
			bad=$((bad + 1))
			diag "$name $c: exit $st, stderr:" "$(head -n 3 "err.$name")"
		fi
		printf '%s\t%s\n' "$c" "$(sed 's/^[a-z-]*: //' "err.$name")" >>"got.$name"
		over=$(($(rss) - base))
		if [ "$over" -gt "$worst" ]; then
			worst=$over
			worst_case=$c
		fi
	done <cases
	is "$bad" 0 "$name: every crafted $kind refused with exit 1 and one line"
	expect "crafted-$kind" "got.$name" "$name: each refusal names the field"
	if [ "$san" = 0 ]; then
		[ "$worst" -le 65536 ]
		ok $? "$name: peak memory at most 64 MiB over refusing an empty file (worst: $worst KiB, $worst_case)"
	fi
}

in=pair.txt
check cache prep-info ncf-prep --info @F@
check model infer-score ncf-infer --device cpu --score -m @F@
if [ "$san" = 0 ]; then
	check cache train ncf-train -q --device cpu @F@ -o out.ncfm -e 1
	check cache eval-baseline ncf-eval --device cpu --baseline popularity @F@
	in=user.txt
	check cache infer-exclude ncf-infer --device cpu --recommend 1 -m good.ncfm --exclude-seen @F@
	in=pair.txt
	check model eval ncf-eval --device cpu -m @F@ good.ncfc
	check model train-resume ncf-train -q --device cpu good.ncfc --resume @F@ -o out.ncfm
fi
# Through a pipe the reader cannot weigh the whole file first: each
# section is bounded as it comes, and a genuine bomb is read, then refused.
: >got.pipe
bad=0 worst=0
for c in c-users-max c-userids-claim-1GiB c-evalneg-claim-2^60 c-userids-rle-16MiB; do
	"$TOOLS/maxrss" "$T/rss" sh -c "cat $c.ncfc | ncf-prep --info -" >/dev/null 2>err.pipe
	[ $? = 1 ] && [ "$(wc -l <err.pipe)" = 1 ] || bad=$((bad + 1))
	printf '%s\t%s\n' "$c" "$(cat err.pipe)" >>got.pipe
	[ "$(rss)" -gt "$worst" ] && worst=$(rss)
done
for c in m-params-claim; do
	"$TOOLS/maxrss" "$T/rss" sh -c "cat $c.ncfm | ncf-infer --device cpu --score -m - pair.txt" \
		>/dev/null 2>err.pipe
	[ $? = 1 ] && [ "$(wc -l <err.pipe)" = 1 ] || bad=$((bad + 1))
	printf '%s\t%s\n' "$c" "$(cat err.pipe)" >>got.pipe
done
is "$bad" 0 "through a pipe: the claims and the bomb refused with exit 1 and one line"
expect crafted-pipe got.pipe "through a pipe: the messages"
if [ "$san" = 0 ]; then
	[ "$worst" -le $((64 * 1024 + $(base_rss ncf-prep --info empty.ncfc))) ]
	ok $? "through a pipe: ncf-prep's peak at most 64 MiB over refusing an empty file ($worst KiB)"
fi
[ ! -e out.ncfm ] && [ ! -e out.ncfm.last ]
ok $? "no refused file led to a written model"
done_testing
