#!/usr/bin/env bash
# accuracy.t - training learns: on the real ml-latest-small ratings
# ($NCF_DATA) a trained NeuMF beats the popularity ranking by a clear
# margin, and on synthetic ml-latest-small-shaped data it comes within a
# stated distance of the HR@10 of ranking by the planted true scores
# (oracle_hr@10).  Two trainings of 6 epochs of 500k samples each, then
# bf16 against fp32 on both (below).
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
#
# bf16 against fp32, as NVIDIA checks AMP against fp32: on both data sets,
# HR@10 after 2 epochs of the same flags in --precision bf16 (training and
# its evaluation) and in fp32, 3 seeds each; the bf16 mean must lie within
# the seed noise of the fp32 mean (the bound is argued at amp_check
# below).  Epoch 2 of the 6-epoch runs above is fp32's seed 1 (a run is a
# pure function of its flags and seed, and 2 epochs of it are the first
# 2 of 6), so this adds 5 runs of 2 epochs per data set, 20 epochs of
# ~2 s of CPU.  2 epochs, not 6 or 3: the cost (with 3 the file took 4.3
# minutes of CPU); HR@10 is 0.65 there and still rising, and a bf16 path that
# learned worse would show already.  With 3 epochs (measured once
# on this machine): real fp32 0.6869 0.6754 0.6902, bf16 0.6885 0.6803
# 0.6852; synthetic fp32 0.5787 0.5541 0.5475, bf16 0.5738 0.5607 0.5607.
# Without bf16 on this CPU (or without oneDNN in the build) those checks
# print TAP skips.
# The model judged is the last epoch's (MODEL.last), not MODEL (the best
# epoch by the test HR, a choice that would peek at the test set).
# Cost: 6 epochs of 501k samples, ~2 s of CPU each, twice, and the 20
# epochs of the bf16 check; the whole file takes ~1.5-2 min on 2 cores
# (more on a busy machine).
. "$(dirname "$0")/../lib.sh"


# --device cpu: the numbers below were measured on the cpu backend, and
# make check stays GPU-free.
FLAGS="--device cpu -f 32 --layers 128,128,64,32 -b 8192 -l 0.01 --dropout 0.1 -e 6 -s 1"
CSV=$NCF_DATA/ml-latest-small/ratings.csv

# kv KEY FILE: the value of KEY in ncf-eval's key<TAB>value output
kv() { awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$2"; }
# ge X Y: X >= Y (reals)
ge() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x != "" && y != "" && x + 0 >= y + 0) }'; }
# hr_at EPOCH LOG: hr@10 of that epoch in ncf-train's --log
hr_at() { sed -n "s/^{\"epoch\": $1, .*\"hr@10\": \([0-9.]*\),.*/\1/p" "$2"; }

# ---------------------------------------------------------------------------
# amp_check NAME CACHE LOG: bf16 within seed noise of fp32 on CACHE (NAME
# names its files and checks); LOG is the --log of the 6-epoch fp32 run of
# seed 1 above.
#
# Bound: with U users an HR@10 near h is a mean of U hits, and what
# changes with the seed (the initial weights, the negatives, dropout)
# moves it by about one binomial standard error, sqrt(h (1 - h) / U):
# 0.019 for h = 0.65 and U = 610; the seeds measured above spread by as
# much.  A mean of 3 seeds has 1/sqrt(3) of it, the difference of two such
# means sqrt(2) times that: sd = sqrt(h (1 - h) / U) sqrt(2 / 3), 0.016
# here.  The bf16 mean must be within 3 sd of the fp32 mean (0.047 here):
# a bf16 path as good as fp32 fails it about once in 370 runs (two-sided
# normal tail), while one that learns markedly less (a systematic loss of
# a few hundredths, or HR@10 at the popularity level, 0.60 and 0.42 here)
# fails.  h is the fp32 mean, U the cache's users.
AMP_EPOCHS=2
AMP_FLAGS="--device cpu -f 32 --layers 128,128,64,32 -b 8192 -l 0.01 --dropout 0.1 -e $AMP_EPOCHS"
amp_check() {
	name=$1 cache=$2 log1=$3
	users=$(info users "$cache")
	run ncf-train -q "$cache" -o "$T/$name-bf16-1.ncfm" $AMP_FLAGS -s 1 --precision bf16 \
		--log "$T/$name-bf16-1.jsonl"
	if [ "$status" = 3 ]; then
		diag "no bf16 here: $(head -n 1 "$err")"
		skip "$name: bf16 training (no bf16 on this CPU or no oneDNN in the build)"
		skip "$name: bf16 HR@10 within seed noise of fp32"
		return
	fi
	is "$status" 0 "$name: ncf-train $AMP_FLAGS --precision bf16, seeds 1-3 and fp32 seeds 2-3: exit 0"
	bad=0
	for s in 2 3; do
		ncf-train -q "$cache" -o "$T/$name-bf16-$s.ncfm" $AMP_FLAGS -s $s --precision bf16 \
			--log "$T/$name-bf16-$s.jsonl" || bad=1
		ncf-train -q "$cache" -o "$T/$name-fp32-$s.ncfm" $AMP_FLAGS -s $s \
			--log "$T/$name-fp32-$s.jsonl" || bad=1
	done
	[ "$bad" = 0 ] || diag "a training of seed 2 or 3 failed"
	e=$AMP_EPOCHS
	f1=$(hr_at $e "$log1") f2=$(hr_at $e "$T/$name-fp32-2.jsonl") f3=$(hr_at $e "$T/$name-fp32-3.jsonl")
	b1=$(hr_at $e "$T/$name-bf16-1.jsonl") b2=$(hr_at $e "$T/$name-bf16-2.jsonl")
	b3=$(hr_at $e "$T/$name-bf16-3.jsonl")
	verdict=$(awk -v f1="$f1" -v f2="$f2" -v f3="$f3" -v b1="$b1" -v b2="$b2" -v b3="$b3" \
		-v u="$users" 'BEGIN {
		if (f1 == "" || f2 == "" || f3 == "" || b1 == "" || b2 == "" || b3 == "" || u == "") {
			print "missing values"; exit 1 }
		f = (f1 + f2 + f3) / 3; b = (b1 + b2 + b3) / 3
		sd = sqrt(f * (1 - f) / u) * sqrt(2 / 3)
		d = b - f; if (d < 0) d = -d
		printf "fp32 %.4f %.4f %.4f (mean %.4f), bf16 %.4f %.4f %.4f (mean %.4f): |difference| %.4f, bound 3 sd = %.4f",
			f1, f2, f3, f, b1, b2, b3, b, d, 3 * sd
		exit !(d <= 3 * sd) }')
	ok $? "$name: bf16 HR@10 within seed noise of fp32 (epoch $AMP_EPOCHS, 3 seeds): $verdict"
}

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
	run ncf-train -q "$T/mls.ncfc" -o "$T/m.ncfm" $FLAGS --log "$T/m.jsonl"
	t1=$(date +%s)
	is "$status" 0 "ncf-train $FLAGS: exit 0 ($((t1 - t0)) s)"
	run ncf-eval -m "$T/m.ncfm.last" "$T/mls.ncfc"
	hr=$(kv hr@10 "$out")
	diag "real ml-latest-small: popularity hr@10 $pop, trained hr@10 $hr (last of 6 epochs, $((t1 - t0)) s)"
	ge "$hr" "$(awk -v p="$pop" 'BEGIN { print p + 0.06 }')"
	ok $? "trained hr@10 $hr >= popularity $pop + 0.06"
	amp_check real "$T/mls.ncfc" "$T/m.jsonl"
else
	for k in 1 2 3 4 5 6; do skip "no $CSV"; done
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
run ncf-train -q "$T/syn.ncfc" -o "$T/s.ncfm" $FLAGS --log "$T/s.jsonl"
t1=$(date +%s)
is "$status" 0 "ncf-train $FLAGS on synthetic data: exit 0 ($((t1 - t0)) s)"
run ncf-eval -m "$T/s.ncfm.last" "$T/syn.ncfc"
shr=$(kv hr@10 "$out")
diag "synthetic ml-latest-small: oracle hr@10 $oracle, popularity $spop, trained $shr ($((t1 - t0)) s)" \
	"distance to the oracle $(awk -v o="$oracle" -v h="$shr" 'BEGIN { printf "%.3f", o - h }'), $(awk -v o="$oracle" -v h="$shr" -v p="$spop" 'BEGIN { printf "%.0f%%", 100 * (h - p) / (o - p) }') of the way from popularity to the oracle"
ge "$shr" "$(awk -v o="$oracle" 'BEGIN { print o - 0.20 }')"
ok $? "trained hr@10 $shr >= oracle $oracle - 0.20"
amp_check synthetic "$T/syn.ncfc" "$T/s.jsonl"

done_testing
