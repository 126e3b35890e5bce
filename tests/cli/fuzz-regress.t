#!/bin/bash
# fuzz-regress.t - every reproducer kept in tests/fuzz/regress/TARGET/ (the
# findings of make fuzz, and crashes found earlier by hand, as inputs to
# the harnesses) replayed through its harness: the normal build's replay_*
# programs, and under check-asan the sanitized ones, so that a crash, a
# sanitizer report or a broken harness invariant fails make check.
. "$(dirname "$0")/../lib.sh"
REPLAY=$NCF_BIN/../tests/fuzz
for dir in "$NCF_ROOT"/tests/fuzz/regress/*/; do
	target=$(basename "$dir")
	if [ ! -x "$REPLAY/replay_$target" ]; then
		ok 1 "replay_$target is built"
		continue
	fi
	n=$(ls "$dir" | wc -l)
	run "$REPLAY/replay_$target" "$dir"*
	is "$status:$(cat "$out")" "0:replayed $n input$([ "$n" = 1 ] || echo s)" \
		"$target: the $n reproducers in tests/fuzz/regress/$target run clean"
	[ "$status" = 0 ] || sed 's/^/#   /' "$err" | head -n 20
done
done_testing
