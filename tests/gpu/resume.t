#!/bin/sh
# resume.t - --resume on the GPU: two epochs in one run, and one epoch then
# --resume to two, give the same MODEL.last byte for byte, in fp32 and bf16
# (the cuda backend is deterministic on one GPU: no float atomics, fixed
# reduction orders, the sample stream and dropout a function of the
# position; the checkpoint holds parameters, Adam moments, step and
# position).  Not fp16: its dynamic loss scale is not saved, and a resumed
# run starts again at 2^15 (ncf-train(1)).
. "$(dirname "$0")/../lib.sh"
need_gpu
"$NCF_BIN/ncf-prep" -q --synthetic ml-latest-small -o "$T/d.ncfc" || bail "ncf-prep failed"
for p in fp32 bf16; do
	f="--device cuda --precision $p -b 8192 -q"
	"$NCF_BIN/ncf-train" "$T/d.ncfc" -e 2 $f -o "$T/a$p.ncfm" 2>"$T/a.err" &&
		"$NCF_BIN/ncf-train" "$T/d.ncfc" -e 1 $f -o "$T/b$p.ncfm" 2>"$T/b.err" &&
		"$NCF_BIN/ncf-train" "$T/d.ncfc" --resume "$T/b$p.ncfm.last" -e 2 $f \
			-o "$T/b$p.ncfm" 2>"$T/c.err"
	st=$?
	[ $st -eq 0 ] || cat "$T/a.err" "$T/b.err" "$T/c.err" | sed 's/^/# /'
	ok $st "$p: 2 epochs, and 1 epoch then --resume to 2, run on the GPU"
	cmp -s "$T/a$p.ncfm.last" "$T/b$p.ncfm.last"
	ok $? "$p: the resumed run's MODEL.last is the uninterrupted run's, byte for byte"
done
done_testing
