#!/usr/bin/env bash
# given-eval.t - a cache whose split and candidates were given
# (tests/tools/given_cache: duplicates among a user's negatives, the
# positive among them) and which holds explicit training negatives:
# ncf-eval --scores lists exactly the given candidates of each user in the
# order given, the positive first; HR@K and NDCG@K count them as ncf-eval(1)
# says (a repeated negative once, a negative equal to the positive never,
# ties against the positive), computed here from those scores; ncf-train's
# epoch holds the explicit negatives beside the drawn ones, and with -n 0
# only them; -n 0 on a cache without any is said to teach nothing.
. "$(dirname "$0")/../lib.sh"
cd "$T" || bail "cannot cd to $T"

"$NCF_ROOT/build/tests/tools/given_cache" g.ncfc >kept 2>kept.err ||
	{ sed 's/^/# /' kept.err; bail "given_cache failed"; }
kept() { sed -n "s/^$1\t//p" kept; }
F="--device cpu --factors 4 --layers 8,4 -b 4"
ncf-train -q $F -e 2 -k 3 g.ncfc -o m.ncfm || bail "ncf-train g.ncfc failed"

# --- the candidates, as given --------------------------------------------------
run ncf-eval --device cpu -k 1,2,3 --scores s.tsv -m m.ncfm g.ncfc
is "$status" 0 "ncf-eval --scores on the given candidates: exit 0"
cut -f 1,2 s.tsv | tr '\t' ' ' | tr '\n' ' ' >listed
is "$(cat listed)" "1 110 1 104 1 110 1 105 1 106 1 107 2 101 2 108 2 108 2 109 2 110 2 108 3 103 3 103 3 104 3 105 3 103 3 106 4 105 4 101 4 103 4 104 4 106 4 107 " \
	"--scores: each user's positive, then its negatives in the order given, repeats kept"
# HR@K and NDCG@K by the rule, from the scores: per user, the negatives
# that count (not the positive's item, not seen before) scoring at least
# the positive's score are its rank
awk -F'\t' -v ks="1 2 3" '
	{ u = $1 }
	u != last { if (NR > 1) ranks[++n] = r; last = u; pos = $2; p = $3; r = 0; delete seen; next }
	$2 != pos && !($2 in seen) { seen[$2] = 1; if ($3 >= p) r++ }
	END {
		ranks[++n] = r
		split(ks, k, " ")
		for (j = 1; j <= 3; j++) {
			h = 0; g = 0
			for (i = 1; i <= n; i++) if (ranks[i] < k[j]) { h++; g += log(2) / log(ranks[i] + 2) }
			printf "hr@%d\t%.6f\nndcg@%d\t%.6f\n", k[j], h / n, k[j], g / n
		}
		printf "users\t%d\n", n
	}' s.tsv >want
cmp -s "$out" want
st=$?
ok $st "HR@K and NDCG@K (K 1, 2, 3) count a repeat once and the positive's item never"
[ $st = 0 ] || { sed 's/^/# got:  /' "$out"; sed 's/^/# want: /' want; }

# --- the epoch with explicit negatives ----------------------------------------
is "$(kept split_given) $(kept train_negatives)" "1 7" \
	"the cache keeps the given split and the 7 explicit negatives"
ncf-prep --info g.ncfc >info
ok $? "ncf-prep --info reads the given split's cache"
like info "^split	given\$" "... split given"
like info "^train_negatives	7\$" "... 7 explicit negatives"
run ncf-train $F -e 1 -k 3 g.ncfc -o e.ncfm
like "$err" "67 samples per epoch \(12 positives, 48 drawn and 7 explicit negatives\), batch 4 \(17 steps\)" \
	"-n 4: the epoch is 12 positives, 48 drawn and the 7 explicit negatives"
run ncf-train $F -e 1 -k 3 -n 0 g.ncfc -o e0.ncfm
is "$status" 0 "-n 0: exit 0"
like "$err" "19 samples per epoch \(12 positives, 0 drawn and 7 explicit negatives\), batch 4 \(5 steps\)" \
	"... the epoch is the positives and the explicit negatives"
unlike "$err" "teaches|nothing teaches" "... and no warning"

# -n 0 without explicit negatives: every sample a positive, said
ncf-prep -q --synthetic tiny -o t.ncfc || bail "ncf-prep failed"
run ncf-train $F -e 1 -n 0 t.ncfc -o n0.ncfm
is "$status" 0 "-n 0 on a cache without explicit negatives: exit 0, as before"
like "$err" "^ncf-train: -n 0 and t.ncfc has no explicit negatives: every sample is a positive \(label 1\), so nothing teaches the model what a user passes over; give -n 1 or more$" \
	"... with a warning that nothing teaches what a user passes over"
done_testing
