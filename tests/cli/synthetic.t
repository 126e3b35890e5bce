#!/usr/bin/env bash
# synthetic.t - ncf-prep --synthetic: caches with the planted oracle's
# HR@10, scaling, determinism, and --emit-csv giving the same data through
# the CSV reader.
. "$(dirname "$0")/../lib.sh"


# body FILE: a cache's bytes after its meta section (the arrays).
body() {
	local comp
	comp=$(od -An -t u8 -j 48 -N 8 "$1" | tr -d ' ')
	tail -c +$((64 + comp + 1)) "$1"
}
# between X LO HI: LO < X < HI (reals)
between() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x != "" && x + 0 > lo && x + 0 < hi) }'; }

# tiny
run ncf-prep -o "$T/tiny.ncfc" --synthetic tiny
is "$status" 0 "--synthetic tiny exits 0"
like "$err" 'oracle HR@10 of the planted scores' "the oracle's HR@10 is reported on stderr"
is "$(info format "$T/tiny.ncfc")" synthetic "tiny: format synthetic"
is "$(info synthetic "$T/tiny.ncfc")" tiny "tiny: synthetic tiny"
is "$(info users "$T/tiny.ncfc")" 50 "tiny: 50 users"
hr=$(info oracle_hr@10 "$T/tiny.ncfc")
between "$hr" 0 1
ok $? "tiny: oracle_hr@10 $hr is between 0 and 1"
is "$(info source_bytes "$T/tiny.ncfc")" 0 "tiny: no source bytes"

# ml-latest-small
run ncf-prep -q -o "$T/mls.ncfc" --synthetic ml-latest-small
is "$status" 0 "--synthetic ml-latest-small exits 0"
is "$(info format "$T/mls.ncfc")" synthetic "ml-latest-small: format synthetic"
is "$(info users "$T/mls.ncfc")" 610 "ml-latest-small: 610 users"
is "$(info ratings_read "$T/mls.ncfc")" 100836 "ml-latest-small: 100836 ratings, as GroupLens's"
items=$(info items "$T/mls.ncfc")
[ "$items" -gt 5000 ] && [ "$items" -le 9724 ]
ok $? "ml-latest-small: $items items (at most 9724)"
hr=$(info oracle_hr@10 "$T/mls.ncfc")
between "$hr" 0.1 1
ok $? "ml-latest-small: oracle_hr@10 $hr is between 0.1 and 1 (planted structure)"
is "$(info eval_negatives_per_user "$T/mls.ncfc")" 100 "ml-latest-small: 100 negatives per user"

# Scale: tinyx2 has twice the users.
ncf-prep -q -o "$T/tinyx2.ncfc" --synthetic tinyx2
is "$(info users "$T/tinyx2.ncfc")" $((2 * $(info users "$T/tiny.ncfc"))) "tinyx2 has twice tiny's users"
is "$(info synthetic "$T/tinyx2.ncfc")" tinyx2 "tinyx2: synthetic tinyx2"
[ "$(info ratings_read "$T/tinyx2.ncfc")" -gt "$(info ratings_read "$T/tiny.ncfc")" ]
ok $? "tinyx2 has more ratings than tiny"

# Determinism: seed, threads, stdout.
ncf-prep -q -o "$T/tiny2.ncfc" --synthetic tiny
cmp -s "$T/tiny.ncfc" "$T/tiny2.ncfc"
ok $? "the same seed twice gives the same bytes"
OMP_NUM_THREADS=1 ncf-prep -q -o "$T/t1.ncfc" --synthetic ml-latest-small &&
	OMP_NUM_THREADS=3 ncf-prep -q -o "$T/t3.ncfc" --synthetic ml-latest-small
cmp -s "$T/t1.ncfc" "$T/t3.ncfc" && cmp -s "$T/t1.ncfc" "$T/mls.ncfc"
ok $? "1 and 3 threads give the same bytes"
ncf-prep -q --synthetic tiny >"$T/tiny-stdout.ncfc"
cmp -s "$T/tiny.ncfc" "$T/tiny-stdout.ncfc"
ok $? "to stdout: the same bytes"
ncf-prep -q --seed 7 -o "$T/tiny7.ncfc" --synthetic tiny
cmp -s "$T/tiny.ncfc" "$T/tiny7.ncfc"
is $? 1 "--seed 7 gives other bytes"
is "$(info seed "$T/tiny7.ncfc")" 7 "--seed 7 recorded"

# --emit-csv | ncf-prep: the same data through the CSV reader.
run ncf-prep --synthetic ml-latest-small --emit-csv
is "$status" 0 "--emit-csv exits 0"
is "$(head -n 1 "$out")" "userId,movieId,rating,timestamp" "--emit-csv starts with the ml-20m header"
is "$(($(wc -l <"$out") - 1))" 100836 "--emit-csv writes 100836 ratings"
ncf-prep -q -o "$T/csv.ncfc" "$out"
is "$(info format "$T/csv.ncfc")" ml-20m "the emitted CSV reads as ml-20m"
for k in users items train_positives fingerprint; do
	is "$(info $k "$T/csv.ncfc")" "$(info $k "$T/mls.ncfc")" "emitted CSV and direct: same $k"
done
cmp -s <(body "$T/csv.ncfc") <(body "$T/mls.ncfc")
ok $? "emitted CSV and direct: the same arrays (ids, training rows, test items, negatives)"
ncf-prep -q --synthetic ml-latest-small --emit-csv | ncf-prep -q -o "$T/pipe.ncfc"
cmp -s "$T/pipe.ncfc" "$T/csv.ncfc"
ok $? "--emit-csv | ncf-prep gives the same bytes as through a file"
ncf-prep -q --synthetic tiny --emit-csv -o "$T/tiny.csv"
ncf-prep -q --synthetic tiny --emit-csv | cmp -s - "$T/tiny.csv"
ok $? "--emit-csv to a file and to stdout: the same text"

done_testing
