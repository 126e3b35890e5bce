#!/bin/sh
# train.t - three epochs of ncf-train on synthetic data, on the CPU and on
# the GPU in every precision: each GPU run's HR@10 after the third epoch is
# within 0.01 of the CPU run's.
#
# Data: synthetic ml-1m (6040 users; override with NCF_GPU_TRAIN_DATA, e.g.
# ml-1mx4 for less sampling noise), batch 65536 (76 steps an epoch), the
# default seed and hyperparameters.  The runs share initial weights, batches
# and dropout masks, so they differ only by rounding (and by the 16-bit
# precisions' coarser activations), which moves HR@10 by far less than 0.01.
. "$(dirname "$0")/../lib.sh"
need_gpu
data=${NCF_GPU_TRAIN_DATA:-ml-1m}
tol=${NCF_GPU_HR_TOL:-0.01}
tmp=$T
"$NCF_BIN/ncf-prep" -q --synthetic "$data" -o "$tmp/d.ncfc" || bail "ncf-prep failed"

# hr_of LOG: HR@10 of the last epoch of an ncf-train --log file.
hr_of() {
	sed -n 's/.*"hr@10": \([0-9.]*\).*/\1/p' "$1" | tail -n 1
}
run() { # run NAME ARGS...: train 3 epochs, log to $tmp/NAME.log
	name=$1
	shift
	t0=$(date +%s)
	"$NCF_BIN/ncf-train" -q -e 3 -b 65536 "$@" --log "$tmp/$name.log" "$tmp/d.ncfc" \
		-o "$tmp/$name.ncfm" 2>"$tmp/$name.err"
	rc=$?
	echo "# $name: exit $rc, HR@10 $(hr_of "$tmp/$name.log"), $(($(date +%s) - t0)) s"
	[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/$name.err"
	return $rc
}
run cpu --device cpu
ok $? "the cpu backend trains 3 epochs of $data"
ref=$(hr_of "$tmp/cpu.log")
for p in fp32 tf32 bf16 fp16; do
	run "$p" --device cuda --precision "$p"
	rc=$?
	hr=$(hr_of "$tmp/$p.log")
	[ $rc -eq 0 ] && awk -v a="${hr:-nan}" -v b="${ref:-nan}" -v t="$tol" \
		'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a == a + 0 && d <= t) }'
	ok $? "cuda $p: HR@10 $hr within $tol of the CPU's $ref"
done
done_testing
