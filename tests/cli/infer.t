#!/usr/bin/env bash
# infer.t - ncf-infer on a small model trained on synthetic data:
# --score gives ncf-eval --scores' probabilities digit for digit, whatever
# the separator, order or pipe; --recommend K is the top K of scoring every
# item (ties to the lower item index), without the user's training items
# under --exclude-seen; --bench prints a sane table or JSON; bad lines,
# unknown ids, empty input and files that are not models fail with exit 1
# and FILE:LINE; a reader that goes away (| head) ends it quietly; usage
# errors exit 2.
. "$(dirname "$0")/../lib.sh"


export LC_ALL=C
F="--device cpu --factors 8 --layers 16,16,8"
# The synthetic tiny data through its CSV, so that the item indices (order
# of first appearance in the file, DESIGN.md 1.2) can be read off the CSV.
ncf-prep -q --synthetic tiny --emit-csv >"$T/tiny.csv" &&
	ncf-prep -q -o "$T/tiny.ncfc" "$T/tiny.csv" &&
	ncf-train -q "$T/tiny.ncfc" -o "$T/m.ncfm" $F -b 1024 -e 10 -l 0.05 --dropout 0 &&
	ncf-eval -q -m "$T/m.ncfm" --scores "$T/scores" "$T/tiny.ncfc" >/dev/null || {
	echo "Bail out! could not make the test model"
	exit 1
}
C=$T/tiny.ncfc
M=$T/m.ncfm
S=$T/scores
U=$(info users "$C")
I=$(info items "$C")
have_python=0
command -v python3 >/dev/null && have_python=1
# quiet FILE: FILE's size in bytes, less the notice that --device auto
# prints in a CUDA build on a machine without a usable GPU.
quiet() { grep -v '^ncf-infer: no usable GPU (.*); using the CPU$' "$1" | wc -c | tr -d ' '; }

# ---------------------------------------------------------------------------
# --score against ncf-eval --scores (user<TAB>item<TAB>probability, %.9g).
is "$(wc -l <"$S" | tr -d ' ')" $((U * 101)) "ncf-eval --scores: $U users x 101 candidates"
cut -f1,2 "$S" >"$T/pairs"
cut -f3 "$S" >"$T/want"
run ncf-infer --score -m "$M" "$T/pairs"
is "$status:$(quiet "$err")" "0:0" "--score FILE: exit 0, nothing on stderr"
cmp -s "$out" "$T/want"
ok $? "--score FILE (tabs): the probabilities of ncf-eval --scores, to the last digit"
tr '\t' ',' <"$T/pairs" >"$T/pairs.csv"
run ncf-infer --score -m "$M" "$T/pairs.csv"
cmp -s "$out" "$T/want"
ok $? "--score, comma-separated: the same numbers"
awk -F'\t' '{ printf "  %s \t %s  \r\n", $1, $2 }' "$T/pairs" >"$T/pairs.sp"
run ncf-infer --score -m "$M" "$T/pairs.sp"
cmp -s "$out" "$T/want"
ok $? "--score, spaces and tabs around the ids, CRLF: the same numbers"
run ncf-infer --score -m "$M" - <"$T/pairs"
cmp -s "$out" "$T/want"
ok $? "--score - (stdin): the same numbers"
cat "$T/pairs" | ncf-infer --score -m "$M" >"$T/piped" 2>"$T/piped.err"
ok $? "cat pairs | ncf-infer --score: exit 0"
cmp -s "$T/piped" "$T/want"
ok $? "cat pairs | ncf-infer --score: the same numbers"
# Another order: by the score's digits, then user, then item.
sort -t "$(printf '\t')" -k3,3 -k1,1n -k2,2n "$S" >"$T/shuffled"
cut -f1,2 "$T/shuffled" | ncf-infer --score -m "$M" >"$T/shuffled.got" 2>/dev/null
cut -f3 "$T/shuffled" | cmp -s - "$T/shuffled.got"
ok $? "--score in another order, through a pipe: each pair's number is unchanged"
head -n 1 "$T/pairs" | ncf-infer --score -m "$M" >"$T/one" 2>/dev/null
is "$(cat "$T/one")" "$(head -n 1 "$T/want")" "--score of a single pair (no batch around it): the same number"
printf '%s' "$(head -n 3 "$T/pairs")" | ncf-infer --score -m "$M" >"$T/three" 2>/dev/null
is "$(cat "$T/three" | tr '\n' ' ')" "$(head -n 3 "$T/want" | tr '\n' ' ')" \
	"--score: a last line without its line end is read"
awk -F'\t' '$3 !~ /^[0-9.e-]+$/ || $3 <= 0 || $3 >= 1 { exit 1 }' "$S"
ok $? "the scores are probabilities in (0, 1)"

# ---------------------------------------------------------------------------
# --recommend K: every item of the model scored and sorted.  items: index
# and original id, in order of first appearance in the CSV.
awk -F, 'NR > 1 && !($2 in seen) { seen[$2] = 1; print n++ "\t" $2 }' "$T/tiny.csv" >"$T/items"
is "$(wc -l <"$T/items" | tr -d ' ')" "$(info items "$C")" "the CSV names every item of the cache"
awk -F'\t' 'NR == FNR { u[$1] = 1; next } { for (x in u) print x "\t" $2 }' "$S" "$T/items" |
	sort -k1,1n -s >"$T/all.pairs"
is "$(wc -l <"$T/all.pairs" | tr -d ' ')" $((U * I)) "every (user, item) pair: $U x $I"
ncf-infer --score -m "$M" "$T/all.pairs" >"$T/all.p" 2>/dev/null
ok $? "--score of every pair"
# user, item, probability, item index; sorted best first, ties by index.
awk -F'\t' 'NR == FNR { idx[$2] = $1; next } { print $0 "\t" idx[$2] }' "$T/items" \
	<(paste "$T/all.pairs" "$T/all.p") |
	sort -t "$(printf '\t')" -k1,1n -k3,3gr -k4,4n >"$T/ranked"
# top K [EXCLUDED]: the first K lines per user of ranked, less EXCLUDED's
# "user<TAB>item" lines.
top() {
	awk -F'\t' -v k="$1" -v exfile="${2:-/dev/null}" '
		BEGIN { while ((getline l < exfile) > 0) ex[l] = 1 }
		($1 "\t" $2) in ex { next }
		{ if (++n[$1] <= k) print $1 "\t" $2 "\t" $3 }' "$T/ranked"
}
# Two items of a user with the same printed probability may have different
# logits, which --recommend ranks by; then only the probabilities' order,
# not the items', is known.  ties: such pairs in the table.
ties=$(cut -f1,3 "$T/ranked" | uniq -d | wc -l | tr -d ' ')
[ "$ties" = 0 ] || diag "$ties (user, probability) pairs shared by two items: items compared up to those ties"
# ranking_is GOT K [EXCLUDED]: GOT is top K [EXCLUDED]; up to ties, every
# line of GOT is a true (user, item, probability) and no item is there twice.
ranking_is() {
	if [ "$ties" = 0 ]; then
		cmp -s "$1" <(top "$2" "${3:-}")
		return
	fi
	cmp -s <(cut -f1,3 "$1") <(top "$2" "${3:-}" | cut -f1,3) &&
		awk -F'\t' 'NR == FNR { t[$1 "\t" $2 "\t" $3] = 1; next }
			!($0 in t) || seen[$1 "\t" $2]++ { bad = 1 } END { exit bad }' "$T/ranked" "$1"
}
top 10 >"$T/top10"
seq 1 "$U" >"$T/users"  # synthetic user ids are 1..U
run ncf-infer --recommend 10 -m "$M" "$T/users"
is "$status:$(wc -l <"$out" | tr -d ' ')" "0:$((U * 10))" "--recommend 10 for $U users: exit 0, 10 lines each"
ranking_is "$out" 10
ok $? "--recommend 10: the 10 best items of scoring every item, in order, same numbers"
if ! cmp -s "$out" "$T/top10"; then diff "$out" "$T/top10" | head -n 10 | sed 's/^/# /'; fi
n=$(info items "$C")
run ncf-infer --recommend 1000 -m "$M" "$T/users"
is "$(wc -l <"$out" | tr -d ' ')" $((U * n)) "--recommend 1000 (more than the $n items): every item once per user"
ranking_is "$out" 1000
ok $? "--recommend 1000: the full ranking"
run ncf-infer --recommend 3 -m "$M" - <<EOF
7

   7
EOF
is "$(cut -f1 "$out" | uniq -c | awk '{ print $1 ":" $2 }' | tr '\n' ' ')" "6:7 " \
	"--recommend: blank lines skipped, spaces around the id allowed, a user twice"

# --exclude-seen: the user's training items are the CSV's (user, item) pairs
# less the test item, which ncf-eval --scores lists first for every user.
awk -F'\t' '!($1 in t) { t[$1] = 1; print $1 "\t" $2 }' "$S" >"$T/test.items"
is "$(wc -l <"$T/test.items" | tr -d ' ')" "$U" "one test item per user"
awk -F, 'NR == FNR { t[$1 "\t" $2] = 1; next }
	FNR > 1 && !(($1 "\t" $2) in t) { print $1 "\t" $2 }' FS='\t' "$T/test.items" FS=, "$T/tiny.csv" >"$T/train.items"
is "$(wc -l <"$T/train.items" | tr -d ' ')" "$(info train_positives "$C")" \
	"the training items: the cache's number of training positives"
run ncf-infer --recommend 10 -m "$M" --exclude-seen "$C" "$T/users"
is "$status:$(wc -l <"$out" | tr -d ' ')" "0:$((U * 10))" "--exclude-seen: exit 0, 10 lines per user"
awk -F'\t' 'NR == FNR { t[$1 "\t" $2] = 1; next } ($1 "\t" $2) in t { bad++ } END { exit bad > 0 }' \
	"$T/train.items" "$out"
ok $? "--exclude-seen: no training item of the user is recommended"
ranking_is "$out" 10 "$T/train.items"
ok $? "--exclude-seen: the 10 best of the other items (the test item may be one)"
# The test item is not excluded: with K = items, it is listed.
run ncf-infer --recommend 1000 -m "$M" --exclude-seen "$C" "$T/users"
awk -F'\t' 'NR == FNR { t[$1 "\t" $2] = 1; next } ($1 "\t" $2) in t { n++ } END { exit n != u }' u="$U" \
	"$T/test.items" "$out"
ok $? "--exclude-seen keeps every user's test item"
ncf-prep -q -o "$T/other.ncfc" --synthetic tiny --seed 2
run ncf-infer --recommend 10 -m "$M" --exclude-seen "$T/other.ncfc" "$T/users"
is "$status" 1 "--exclude-seen with another data set's cache: exit 1"
like "$err" "^ncf-infer: $M and $T/other.ncfc do not belong together" "... message"

# ---------------------------------------------------------------------------
# --bench: a table (or JSON) with one row per batch size.
# bench_ok FILE: the header (NVIDIA's columns with the pairs on the device,
# on a GPU then the same host to host, then the timed passes), then rows
# for 1, 7, 64 with positive, finite values, p90 <= p95 <= p99, mean <=
# p99 (in both halves on a GPU) and 5 timed passes.
bench_ok() {
	awk -F'\t' '
	NR == 1 {
		cols = "batch_size\tthroughput_avg\tlatency_avg\tlatency_p90\tlatency_p95\tlatency_p99"
		host = "\thost_throughput_avg\thost_latency_avg\thost_latency_p90\thost_latency_p95\thost_latency_p99"
		if ($0 == cols "\titerations") nf = 7
		else if ($0 == cols host "\titerations") nf = 12
		else bad = 1
		next
	}
	{
		n++
		if (NF != nf) bad = 1
		for (i = 2; i < nf; i++) if ($i !~ /^[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?$/ || $i + 0 <= 0) bad = 1
		if (!($4 <= $5 && $5 <= $6 && $3 <= $6)) bad = 1
		if (nf == 12 && !($9 <= $10 && $10 <= $11 && $8 <= $11)) bad = 1
		if ($nf != 5) bad = 1
		sizes = sizes $1 " "
	}
	END { exit bad || n != 3 || sizes != "1 7 64 " }' "$1"
}
BENCH="--batch-sizes 1,7,64 --warmup 1 --iterations 5"
run ncf-infer --bench -m "$M" $BENCH
is "$status" 0 "--bench -m MODEL: exit 0"
bench_ok "$out"
ok $? "--bench -m MODEL: header, one row per batch size, positive values, p90 <= p95 <= p99, mean <= p99"
if ! bench_ok "$out"; then sed 's/^/# /' "$out"; fi
like "$err" "^ncf-infer: inference benchmark: .*$U users, $I items" "--bench: says what it measures on stderr"
run ncf-infer --bench --device cpu -m "$M" $BENCH
is "$(head -n 1 "$out" | cut -f7-)" "iterations" \
	"--bench on the CPU: one measurement per batch size (host memory is the device), no host_ columns"
run ncf-infer --bench --random-model $BENCH
is "$status" 0 "--bench --random-model: exit 0"
bench_ok "$out"
ok $? "--bench --random-model: a sane table"
like "$err" 'random ml-20m-sized model \(138493 users, 26744 items\)' "--random-model: ml-20m's sizes"
run ncf-infer --bench --random-model --users 300 --items 40 --factors 8 --layers 16,8 $BENCH
is "$status" 0 "--random-model --users 300 --items 40 --factors 8 --layers 16,8: exit 0"
like "$err" 'random model \(300 users, 40 items\)' "... a random model of those sizes"
ncf-infer --export "$T/r.safetensors" --random-model --users 300 --items 40 --factors 8 --layers 16,8 &&
	ncf-infer --bench -m "$T/r.safetensors" $BENCH >/dev/null 2>"$T/r.err" &&
	grep -q '(300 users, 40 items)' "$T/r.err"
ok $? "--export --random-model with sizes: a model of those sizes"
run ncf-infer --bench -m "$M" --batch-sizes 7
is "$(awk -F'\t' 'NR == 2 { print $NF }' "$out")" 190 \
	"--bench by default: NVIDIA's 190 timed passes where they take less than 3 s"
run ncf-infer --bench -m "$M" $BENCH --json
is "$status" 0 "--bench --json: exit 0"
is "$(grep -c '^ncf-infer: batch size [0-9]*: ' "$err")" 3 "--bench --json: a line on stderr per batch size"
if [ $have_python = 1 ]; then
	python3 -c '
import json, math, sys
d = json.load(open(sys.argv[1]))
r = d["results"]
assert [x["batch_size"] for x in r] == [1, 7, 64], r
for x in r:
  for p in ("", "host_") if d["device"] != "cpu" else ("",):
    v = [x[p + k] for k in ("throughput_avg", "latency_avg", "latency_p90", "latency_p95", "latency_p99")]
    assert all(math.isfinite(y) and y > 0 for y in v), x
    assert x[p + "latency_p90"] <= x[p + "latency_p95"] <= x[p + "latency_p99"], x
    assert x[p + "latency_avg"] <= x[p + "latency_p99"], x
  assert (d["device"] == "cpu") != ("host_latency_avg" in x), x
  assert x["iterations"] == 5, x
assert d["iterations"] == 5 and d["warmup"] == 1
' "$out"
	ok $? "--bench --json: valid JSON with the table's fields (and host_ on a GPU), sane values"
else skip "no python3"; fi
# the precision said is the one computed: on the CPU, fp16 is fp32
run ncf-infer --bench -m "$M" --precision fp16 --batch-sizes 7 --warmup 0 --iterations 1 --json
if grep -q '"device": "cpu"' "$out"; then
	like "$out" '"precision": "fp32"' "--precision fp16 on the CPU: the JSON says fp32, what it computes"
	like "$err" 'cpu backend in fp32' "... and so does the line on stderr"
else
	skip "the benchmark ran on a GPU"
	skip "the benchmark ran on a GPU"
fi

# The synopsis of --help and ncf-infer(1)'s SYNOPSIS are both the table of
# modes and options (main.c: mode_options): the same four lines, spaces
# and line breaks aside.
if command -v nroff >/dev/null; then
	ncf-infer --help | sed -n '1,/^$/p' | sed 's/^usage: //' |
		awk '/^ *ncf-infer / { if (l) print l; l = $0; next } { l = l " " $0 } END { print l }' |
		sed 's/^ *//; s/  */ /g; s/ *$//' | grep . >"$T/syn.help"
	nroff -man -rLL=2000n -Tascii "$NCF_ROOT/man/ncf-infer.1" 2>/dev/null | sed 's/.\x08//g' |
		sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | sed '1d;$d' | sed 's/^ *//; s/  */ /g; s/ *$//' |
		grep . >"$T/syn.man"
	cmp -s "$T/syn.help" "$T/syn.man"
	ok $? "ncf-infer --help's synopsis is ncf-infer(1)'s SYNOPSIS"
	is "$(wc -l <"$T/syn.help" | tr -d ' ')" 4 "... one line per mode"
else
	skip "no nroff"
	skip "no nroff"
fi

# ---------------------------------------------------------------------------
# Bad input: exit 1, one message naming FILE:LINE, nothing scored after it.
printf '1 33\n9999 33\n' >"$T/unknown-user"
run ncf-infer --score -m "$M" "$T/unknown-user"
is "$status" 1 "an unknown user id: exit 1"
like "$err" "^ncf-infer: $T/unknown-user:2: unknown user id 9999" "an unknown user id: FILE:LINE and the id"
printf '1 33\n1 33\n1 10\n' >"$T/unknown-item"
run ncf-infer --score -m "$M" "$T/unknown-item"
is "$status" 1 "an unknown item id: exit 1"
like "$err" "^ncf-infer: $T/unknown-item:3: unknown item id 10" "an unknown item id: FILE:LINE and the id"
printf '1 33\n1 x\n' >"$T/malformed"
run ncf-infer --score -m "$M" "$T/malformed"
is "$status" 1 "a malformed line: exit 1"
like "$err" "^ncf-infer: $T/malformed:2: expected 'user item'.*found '1 x'; the 1 score before it is written$" \
	"a malformed line: FILE:LINE and the line"
is "$(wc -l <"$out" | tr -d ' ')" 1 "a malformed line: the line before it is answered, as before an unknown id"
printf '1 33 5\n' >"$T/three-fields"
run ncf-infer --score -m "$M" "$T/three-fields"
is "$status" 1 "a third field: exit 1"
: >"$T/empty"
run ncf-infer --score -m "$M" "$T/empty"
is "$status" 1 "empty input: exit 1"
like "$err" "^ncf-infer: $T/empty: empty input" "empty input: message"
printf '\n  \n' | ncf-infer --score -m "$M" >/dev/null 2>"$T/blank.err"
is "$?" 1 "blank lines only: exit 1"
run ncf-infer --recommend 5 -m "$M" "$T/empty"
is "$status" 1 "--recommend, empty input: exit 1"
printf '1\n9999\n' >"$T/users2"
run ncf-infer --recommend 5 -m "$M" "$T/users2"
is "$status" 1 "--recommend, an unknown user: exit 1"
like "$err" "^ncf-infer: $T/users2:2: unknown user id 9999" "--recommend, an unknown user: FILE:LINE"
run ncf-infer --score -m "$C" "$T/pairs"
is "$status:$(wc -c <"$out" | tr -d ' ')" "1:0" "a cache given as the model: exit 1, no output"
like "$err" "^ncf-infer: -m: $C is a cache \\(ncf-prep's\\), not a model: -m takes the model ncf-train wrote" \
	"a cache given as the model: says what it is and where it goes"
run ncf-infer --score -m - "$T/pairs" <"$C"
like "$err" "^ncf-infer: <stdin>: .*not a usable ncf-train checkpoint" "a cache piped in as the model: the reader's message"
run ncf-infer --score -m "$T/tiny.csv" "$T/pairs"
is "$status" 1 "a CSV given as the model: exit 1"
like "$err" "^ncf-infer: $T/tiny.csv: not an ncf model file" "a CSV given as the model: message"
run ncf-infer --score -m "$T/nonexistent" "$T/pairs"
is "$status" 1 "a missing model: exit 1"

# --skip-unknown: nan for pairs with an unknown id, and go on.
printf '1\t33\n9999\t33\n1\t10\n%s\n' "$(sed -n 5p "$T/pairs")" >"$T/mixed"
run ncf-infer --score -m "$M" --skip-unknown "$T/mixed"
is "$status" 0 "--skip-unknown: exit 0"
is "$(sed -n 2,3p "$out" | tr '\n' ' ')" "nan nan " "--skip-unknown: nan for an unknown user and an unknown item"
is "$(sed -n 1p "$out") $(sed -n 4p "$out")" "$(ncf-infer --score -m "$M" <<<'1 33' 2>/dev/null) $(sed -n 5p "$T/want")" \
	"--skip-unknown: the known pairs' numbers are unchanged"
run ncf-infer --recommend 2 -m "$M" --skip-unknown "$T/users2"
is "$status:$(sed -n 3p "$out")" "0:9999	nan	nan" "--recommend --skip-unknown: a nan line for an unknown user"

# ---------------------------------------------------------------------------
# Pipes: a reader that goes away ends ncf-infer quietly.  ~500k pairs, so
# that it is still writing when head exits.
for i in $(seq 1 100); do cat "$T/pairs"; done >"$T/big"
ncf-infer --score -m "$M" "$T/big" 2>"$T/head.err" | head -n 1 >"$T/head.out"
st=${PIPESTATUS[0]}
is "$(cat "$T/head.out")" "$(head -n 1 "$T/want")" "| head -n 1: the first number"
is "$(quiet "$T/head.err")" 0 "| head -n 1: nothing on stderr"
case $st in 0 | 141) st=ok ;; esac
is "$st" ok "| head -n 1: exit 0 or killed by SIGPIPE"
(
	trap '' PIPE
	ncf-infer --score -m "$M" "$T/big" 2>"$T/head2.err" | head -n 1 >/dev/null
)
is "$(quiet "$T/head2.err")" 0 "| head -n 1 with SIGPIPE ignored: nothing on stderr"

# ---------------------------------------------------------------------------
# Usage errors: exit 2.
usage() {
	local regex=$1 desc=$2
	shift 2
	run ncf-infer "$@"
	is "$status" 2 "$desc: exit 2"
	like "$err" "^ncf-infer: $regex" "$desc: message"
}
usage "choose a mode" "no mode" -m "$M" "$T/pairs"
usage "choose one of --bench, --score, --recommend" "two modes" --score --recommend 3 -m "$M" "$T/pairs"
usage "--random-model is for --bench" "--random-model with --score" --score --random-model "$T/pairs"
usage "--exclude-seen is for --recommend" "--exclude-seen with --score" --score -m "$M" --exclude-seen "$C" "$T/pairs"
usage "no model given" "--score without a model" --score "$T/pairs"

done_testing
