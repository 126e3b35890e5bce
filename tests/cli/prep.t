#!/usr/bin/env bash
# prep.t - ncf-prep on the real ml-latest-small ratings ($NCF_DATA): sizes,
# the timestamp ties re-derived from the CSV with awk, and reproducibility
# (same seed, thread counts, stdin vs file, CRLF vs LF, another seed).
# The split itself is re-derived in C by tests/unit/test_prep_mls.c.
. "$(dirname "$0")/../lib.sh"

CSV=$NCF_DATA/ml-latest-small/ratings.csv
[ -r "$CSV" ] || skip_all "no $CSV"

# body FILE: the cache's bytes after its meta section (the arrays; meta
# holds the source's size and CRC, which differ between CRLF and LF).
body() {
	local comp
	comp=$(od -An -t u8 -j 48 -N 8 "$1" | tr -d ' ')
	tail -c +$((64 + comp + 1)) "$1"
}
# infos CACHE: --info without the lines that describe the source bytes.
infos() { ncf-prep --info "$1" | grep -Ev '^(source_bytes|source_crc32c)	'; }

mkdir "$T/out"
run ncf-prep -o "$T/out/a.ncfc" "$CSV"
is "$status" 0 "ncf-prep -o CACHE ratings.csv exits 0"
like "$err" '^ncf-prep: .*ratings\.csv: 100836 ratings, 610 users, 9724 items' "summary on stderr"
is "$(wc -c <"$out")" 0 "nothing on stdout with -o"
is "$(ls -A "$T/out")" a.ncfc "only the cache is left in the output directory"

A=$T/out/a.ncfc
is "$(info format "$A")" ml-20m "format ml-20m (detected)"
is "$(info users "$A")" 610 "610 users"
is "$(info items "$A")" 9724 "9724 items"
is "$(info train_positives "$A")" 100226 "100226 train_positives"
is "$(info test_positives "$A")" 610 "610 test_positives"
is "$(info eval_negatives_per_user "$A")" 100 "100 eval_negatives_per_user"
is "$(info ratings_read "$A")" 100836 "100836 ratings_read"
is "$(info source_bytes "$A")" "$(wc -c <"$CSV" | tr -d ' ')" "source_bytes is the file's size"

# Users whose latest timestamp is shared by two or more of their ratings,
# and the training positives (ratings minus one per user), from the CSV.
read -r want_ties want_train <<EOF
$(awk -F, 'NR > 1 {
	sub(/\r$/, "", $4); u = $1; t = $4 + 0; n++
	if (!(u in max) || t > max[u]) { max[u] = t; cnt[u] = 1 }
	else if (t == max[u]) cnt[u]++
}
END { for (u in cnt) { users++; if (cnt[u] > 1) ties++ }; print ties + 0, n - users }' "$CSV")
EOF
is "$(info test_timestamp_ties "$A")" "$want_ties" "test_timestamp_ties matches the CSV ($want_ties)"
is "$(info train_positives "$A")" "$want_train" "training positives are all ratings but one per user"

# Reproducibility.
run ncf-prep -q -o "$T/b.ncfc" "$CSV"
is "$(wc -c <"$err")" 0 "-q prints nothing"
cmp -s "$A" "$T/b.ncfc"
ok $? "the same seed twice gives the same bytes"
OMP_NUM_THREADS=1 ncf-prep -q -o "$T/t1.ncfc" "$CSV" && OMP_NUM_THREADS=2 ncf-prep -q -o "$T/t2.ncfc" "$CSV"
ok $? "OMP_NUM_THREADS=1 and 2 run"
cmp -s "$T/t1.ncfc" "$T/t2.ncfc" && cmp -s "$T/t1.ncfc" "$A"
ok $? "1 and 2 threads give the same bytes (and the same as the default)"
ncf-prep -q <"$CSV" >"$T/stdin.ncfc"
cmp -s "$A" "$T/stdin.ncfc"
ok $? "stdin to stdout gives the same bytes as FILE -o CACHE"
cat "$CSV" | ncf-prep -q -o "$T/pipe.ncfc" -
cmp -s "$A" "$T/pipe.ncfc"
ok $? "a pipe as '-' gives the same bytes"
ncf-prep -q --format ml-20m -o "$T/fmt.ncfc" "$CSV"
cmp -s "$A" "$T/fmt.ncfc"
ok $? "--format ml-20m gives the same bytes as detection"

# CRLF (the shared file) vs LF.
if grep -q $'\r$' "$CSV"; then
	tr -d '\r' <"$CSV" >"$T/lf.csv"
	ncf-prep -q -o "$T/lf.ncfc" "$T/lf.csv"
	cmp -s <(body "$A") <(body "$T/lf.ncfc")
	ok $? "CRLF and LF give the same arrays (bytes after meta)"
	is "$(infos "$T/lf.ncfc")" "$(infos "$A")" "CRLF and LF give the same --info but for the source"
	lines=$(wc -l <"$CSV" | tr -d ' ')
	is "$(info source_bytes "$T/lf.ncfc")" "$(($(info source_bytes "$A") - lines))" \
		"the LF source is one byte a line shorter"
else
	skip "$CSV is not CRLF"
	skip "$CSV is not CRLF"
	skip "$CSV is not CRLF"
fi

# Another seed.
ncf-prep -q --seed 2 -o "$T/s2.ncfc" "$CSV"
cmp -s "$A" "$T/s2.ncfc"
is $? 1 "--seed 2 gives different bytes"
cmp -s <(body "$A") <(body "$T/s2.ncfc")
is $? 1 "--seed 2 gives different arrays (the negatives)"
is "$(info seed "$T/s2.ncfc")" 2 "--info shows seed 2"
is "$(info fingerprint "$T/s2.ncfc")" "$(info fingerprint "$A")" "the seed leaves the id maps (fingerprint) alone"

# Fewer negatives.
ncf-prep -q --eval-negatives 5 -o "$T/n5.ncfc" "$CSV"
is "$(info eval_negatives_per_user "$T/n5.ncfc")" 5 "--eval-negatives 5"
[ "$(wc -c <"$T/n5.ncfc")" -lt "$(wc -c <"$A")" ]
ok $? "--eval-negatives 5 makes a smaller cache"

done_testing
