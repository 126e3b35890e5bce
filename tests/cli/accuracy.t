#!/usr/bin/env bash
# accuracy.t - training learns: on the real ml-latest-small ratings
# ($NCF_DATA) a trained NeuMF beats the popularity ranking by a clear
# margin, and on synthetic ml-latest-small-shaped data it comes within a
# stated distance of the HR@10 of ranking by the planted true scores
# (oracle_hr@10).  Two trainings of 6 epochs of 500k samples each.
#
# Flags (both parts), chosen by trying batch sizes, epochs, learning rates,
# shapes and dropouts on the real data (HR@10 of the last epoch, seed 1):
#   -b 8192         NVIDIA's 2^20 would be one step per epoch here (501,130
#                   samples); 8192 gives 62 steps per epoch; 4096 learns no
#                   better per epoch (0.726 vs 0.731 after 8) and costs
#                   twice the time (the dense Adam update runs every step).
#   -l 0.01         about twice NVIDIA's 0.0045, which needs ~10 epochs for
#                   what 0.01 reaches in 4-6 (0.0045: 0.693 after 5 epochs).
#   --dropout 0.1   NVIDIA's 0.5 slows learning on a data set this small
#                   (10 epochs at 0.0045: 0.734 with 0.5, 0.746 with 0.1).
#   -f 32 --layers 128,128,64,32
#                   half NVIDIA's widths: twice as fast per epoch and as good
#                   here (6 epochs: 0.741, vs 0.736 with 64 and 256,...,64,
#                   before 2981e57).
#   -e 6            HR@10 levels off from epoch 4 (0.70-0.74).
#   -s 1            the seed; seeds 2 and 3 were tried once (see below).
# When $NCF_DATA has no ml-latest-small, the real-data checks print TAP
# skips and the synthetic ones still run (they need no download).
# The model judged is the last epoch's (MODEL.last), not MODEL (the best
# epoch by the test HR, a choice that would peek at the test set).
# Cost: 6 epochs of 501k samples, ~2 s of CPU each, twice; the whole file
# takes ~30-50 s on 2 cores (80 s measured on a busy machine).
. "$(dirname "$0")/../lib.sh"


# --device cpu: the numbers below were measured on the cpu backend, and
# make check stays GPU-free.
FLAGS="--device cpu -f 32 --layers 128,128,64,32 -b 8192 -l 0.01 --dropout 0.1 -e 6 -s 1"
CSV=$NCF_DATA/ml-latest-small/ratings.csv

# kv KEY FILE: the value of KEY in ncf-eval's key<TAB>value output
kv() { awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$2"; }
# ge X Y: X >= Y (reals)
ge() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x != "" && y != "" && x + 0 >= y + 0) }'; }

# ---------------------------------------------------------------------------
# Real data: the model against the popularity baseline.
#
# Margin: HR@10 must beat popularity (0.6033 here) by at least 0.06
# absolute.  Measured with these flags: seed 1 0.736, seed 2 0.743, seed 3
# 0.716, i.e. +0.11 to +0.14; and a change in float summation order (commit
# 2981e57, fixed-order dot products) moved seed 1 from 0.741 to 0.736.
# With 610 users one HR@10 has a binomial standard error of
# sqrt(0.73 x 0.27 / 610) = 0.018, about the spread between seeds; the
# bound 0.663 is 0.073 (4 standard errors) below this seed's value and 0.053
# below the worst seed tried, so such changes do not trip it, while a model
# that learned nothing beyond item popularity (~0.60), or a broken gradient
# (~0.1, chance), fails by far.
if [ -r "$CSV" ]; then
	run ncf-prep -q -o "$T/mls.ncfc" "$CSV"
	is "$status" 0 "ncf-prep of $CSV"
	run ncf-eval --baseline popularity "$T/mls.ncfc"
	pop=$(kv hr@10 "$out")
	is "$status:$(kv users "$out")" "0:610" "popularity baseline: 610 users"
	t0=$(date +%s)
	run ncf-train -q "$T/mls.ncfc" -o "$T/m.ncfm" $FLAGS
	t1=$(date +%s)
	is "$status" 0 "ncf-train $FLAGS: exit 0 ($((t1 - t0)) s)"
	run ncf-eval -m "$T/m.ncfm.last" "$T/mls.ncfc"
	hr=$(kv hr@10 "$out")
	diag "real ml-latest-small: popularity hr@10 $pop, trained hr@10 $hr (last of 6 epochs, $((t1 - t0)) s)"
	ge "$hr" "$(awk -v p="$pop" 'BEGIN { print p + 0.06 }')"
	ok $? "trained hr@10 $hr >= popularity $pop + 0.06"
else
	for k in 1 2 3 4; do skip "no $CSV"; done
fi

# ---------------------------------------------------------------------------
# Synthetic data: how close to the oracle.
#
# Distance: HR@10 must come within 0.20 of oracle_hr@10 (0.769 for
# --synthetic ml-latest-small, seed 1; popularity gets 0.421 there).
# Measured with these flags (last of 6 epochs): training seeds 1, 2, 3:
# 0.641, 0.625, 0.652 (distances 0.128, 0.144, 0.117); data seed 2: 0.656
# against an oracle of 0.792 (0.136).  10 epochs do not close the gap
# further (0.630 at epoch 10, seed 1): the rest is what 164 ratings per user
# on average do not reveal of the planted factors.  0.20 is the worst
# distance seen plus three standard errors (3 x 0.019), and still asks for
# 40% of the way from popularity to the oracle (the runs get 59-66%).
run ncf-prep -q -o "$T/syn.ncfc" --synthetic ml-latest-small
is "$status" 0 "ncf-prep --synthetic ml-latest-small"
oracle=$(info oracle_hr@10 "$T/syn.ncfc")
run ncf-eval --baseline popularity "$T/syn.ncfc"
spop=$(kv hr@10 "$out")
t0=$(date +%s)
run ncf-train -q "$T/syn.ncfc" -o "$T/s.ncfm" $FLAGS
t1=$(date +%s)
is "$status" 0 "ncf-train $FLAGS on synthetic data: exit 0 ($((t1 - t0)) s)"
run ncf-eval -m "$T/s.ncfm.last" "$T/syn.ncfc"
shr=$(kv hr@10 "$out")
diag "synthetic ml-latest-small: oracle hr@10 $oracle, popularity $spop, trained $shr ($((t1 - t0)) s)" \
	"distance to the oracle $(awk -v o="$oracle" -v h="$shr" 'BEGIN { printf "%.3f", o - h }'), $(awk -v o="$oracle" -v h="$shr" -v p="$spop" 'BEGIN { printf "%.0f%%", 100 * (h - p) / (o - p) }') of the way from popularity to the oracle"
ge "$shr" "$(awk -v o="$oracle" 'BEGIN { print o - 0.20 }')"
ok $? "trained hr@10 $shr >= oracle $oracle - 0.20"

done_testing
