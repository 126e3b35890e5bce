#!/usr/bin/env bash
# bf16.t - scoring in bf16 on the cpu backend (--precision bf16, --amp):
# every probability within a bound argued from bf16's 8-bit significand of
# its fp32 value, HR@10 the same up to near ties; the same bytes whatever
# the thread count and whatever batch a pair comes in (ncf-eval --scores,
# ncf-infer --score in file order and shuffled), --amp the same as
# --precision bf16; --bench names the precision.  Where bf16 is missing
# (this CPU, a build without oneDNN, or ONEDNN_MAX_CPU_ISA forbidding it):
# exit 3 and one line saying why with --device cpu, a warning and fp32
# with --device auto.
#
# The model: NVIDIA's widths (-f 64, --layers 256,256,128,64), one epoch
# on synthetic ml-latest-small-shaped data (~5 s), scored on its 610 x
# 101 candidates.
. "$(dirname "$0")/../lib.sh"
cd "$T" || bail "cannot cd to $T"

export LC_ALL=C
ncf-prep -q --synthetic ml-latest-small -o c.ncfc &&
	ncf-train -q c.ncfc -o m.ncfm --device cpu -b 8192 -l 0.01 --dropout 0.1 -e 1 &&
	ncf-eval -m m.ncfm --device cpu --scores fp32.tsv c.ncfc >fp32.out ||
	bail "could not make the test model"

# ---------------------------------------------------------------------------
# Without bf16: forced off through oneDNN's own switch where the CPU has
# it, else as this machine is.
run ncf-eval -m m.ncfm --device cpu --precision bf16 --scores bf16.tsv c.ncfc
if [ "$status" = 3 ]; then
	is "$(wc -l <"$err" | tr -d ' ')" 1 "no bf16 here: exit 3 and one line: $(cat "$err")"
	skip_rest=1
else
	is "$status" 0 "ncf-eval --device cpu --precision bf16 --scores: exit 0"
	cp "$out" bf16.out
	run env ONEDNN_MAX_CPU_ISA=AVX2 ncf-eval -m m.ncfm --device cpu --precision bf16 c.ncfc
	is "$status" 3 "ONEDNN_MAX_CPU_ISA=AVX2 --device cpu --precision bf16: exit 3"
	expect hints/eval-bf16-forbidden.err "$err" "... and the reason in one line"
	skip_rest=0
fi
run env ONEDNN_MAX_CPU_ISA=AVX2 ncf-eval -m m.ncfm --device auto --amp --scores auto.tsv c.ncfc
is "$status:$(wc -l <"$err" | tr -d ' ')" "0:1" "--device auto --amp without bf16: exit 0, one warning"
like "$err" "computing in fp32" "... saying it computes in fp32"
# (fp32 products on oneDNN differ between ISAs in the last bits: compare
# with fp32 under the same limit)
env ONEDNN_MAX_CPU_ISA=AVX2 ncf-eval -q -m m.ncfm --device cpu --scores avx2.tsv c.ncfc >/dev/null
cmp -s auto.tsv avx2.tsv
ok $? "... and the fp32 scores"
if [ "$skip_rest" = 1 ]; then
	for k in 1 2 3 4 5 6 7 8 9; do skip "no bf16 on this CPU or in this build"; done
	done_testing
fi

# ---------------------------------------------------------------------------
# bf16 against fp32, per candidate, on the logit z = ln(p / (1 - p)).
#
# Bound: a bf16 operand keeps 8 significant bits, so rounding it moves it
# by at most u = 2^-8 of itself, and a product of two rounded operands by
# 2u; the sums are fp32 (their error is 2^-24 per addition, nothing next
# to u).  The MLP part of z passes three bf16 products here (the
# first-layer tables, layers 2 and 3, each with rounded inputs and
# weights); the GMF term, the head and the sigmoid are fp32.  So z moves
# by at most about 3 x 2u = 6u of the absolute sums of those products'
# terms, which for these models (ReLU activations are >= 0, so little
# cancels) stay near 1 + |z|.  The bound per candidate is 8u (1 + |z|),
# 0.031 (1 + |z|); measured: at most 1.9u (1 + |z|) on 61,610 candidates.
# A path that rounds worse (truncation, two roundings, a bf16 sum) shows
# in the mean: the mean |dz| must stay under u (measured 0.2u-0.3u).  The
# signed mean is printed, not bounded: a user's candidates share its table
# row and its rounding, so it averages far fewer independent errors than
# candidates.
U=0.00390625
paste fp32.tsv bf16.tsv >both.tsv
verdict=$(awk -F'\t' -v u=$U 'function lg(p) { return log(p / (1 - p)) }
	$1 != $4 || $2 != $5 { bad++; next }
	{ z = lg($3); d = lg($6) - z; a = d < 0 ? -d : d; az = z < 0 ? -z : z
	  if (a > 8 * u * (1 + az)) { over++; if (over <= 3) first = first sprintf(" (%s,%s: %s vs %s)", $1, $2, $3, $6) }
	  r = a / (1 + az); if (r > worst) worst = r; s += a; sd += d; n++ }
	END { printf "%d candidates, worst |dz| %.2fu (1 + |z|), mean |dz| %.2fu, mean dz %.3fu, %d over the bound%s",
		n, worst / u, s / n / u, sd / n / u, over, first
	      exit !(n > 0 && !bad && !over && s / n < u) }' both.tsv)
ok $? "bf16 logits within 8u (1 + |z|) of fp32, u = 2^-8: $verdict"
# HR@10 moves only where the test item and the tenth negative are closer
# than the error above: a few of 610 users at most (0.01 is 6 users).
hr32=$(awk -F'\t' '$1 == "hr@10" { print $2 }' fp32.out)
hr16=$(awk -F'\t' '$1 == "hr@10" { print $2 }' bf16.out)
awk -v a="$hr32" -v b="$hr16" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d <= 0.01 && d >= -0.01) }'
ok $? "hr@10 in bf16 $hr16, in fp32 $hr32: within 0.01"

# ---------------------------------------------------------------------------
# The same bytes: threads, batches, --amp.
run ncf-eval -m m.ncfm --device cpu --precision bf16 --threads 1 --scores t1.tsv c.ncfc
cmp -s t1.tsv bf16.tsv
ok $? "--threads 1 and all threads: the same bf16 scores"
run ncf-eval -m m.ncfm --device cpu --amp --scores amp.tsv c.ncfc
cmp -s amp.tsv bf16.tsv
ok $? "--amp: the scores of --precision bf16"
cut -f1,2 bf16.tsv >pairs
cut -f3 bf16.tsv >want
run ncf-infer --score -m m.ncfm --device cpu --precision bf16 pairs
cmp -s "$out" want
ok $? "ncf-infer --score: ncf-eval --scores' bf16 probabilities, to the last digit"
awk 'NR % 7 == 3' bf16.tsv | sort -t "$(printf '\t')" -k2,2n -k1,1nr >some.tsv
cut -f1,2 some.tsv | ncf-infer --score -m m.ncfm --device cpu --amp >some.got
cut -f3 some.tsv | cmp -s - some.got
ok $? "a seventh of the pairs, reordered, from a pipe: the same digits"
head -n 1 some.tsv | cut -f1,2 | ncf-infer --score -m m.ncfm --device cpu --amp >one.got
head -n 1 some.tsv | cut -f3 | cmp -s - one.got
ok $? "one pair alone: the same digits"
run ncf-infer --recommend 5 -m m.ncfm --device cpu --amp <<EOF
$(head -n 1 pairs | cut -f1)
EOF
is "$status:$(wc -l <"$out" | tr -d ' ')" "0:5" "--recommend 5 in bf16: five lines"

# ---------------------------------------------------------------------------
run ncf-infer --bench -m m.ncfm --device cpu --amp -b 1000,3000 --warmup 0 --iterations 2 --json
like "$out" '"precision": "bf16".*"batch_size": 1000.*"batch_size": 3000' \
	"--bench --amp --json: precision bf16, both batch sizes"

done_testing
