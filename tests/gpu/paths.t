#!/bin/sh
# paths.t - the cuda backend's two training steps on a GPU (NCF_CUDA_PATH,
# ncf-train(1)): the fused step (the default: fused kernels, rows sorted by
# user, one CUDA graph per step, losses kept on the device) is
# deterministic (the same run twice gives the same parameters, bit for
# bit: no float atomics, reduction orders fixed by the sizes) with and
# without its graph, and trains as well as the unfused step: HR@10 after two
# epochs within 0.01 of it, in fp32 and bf16.  Synthetic ml-1m, batch 65536.
. "$(dirname "$0")/../lib.sh"
need_gpu
tmp=$T
"$NCF_BIN/ncf-prep" -q --synthetic ml-1m -o "$tmp/d.ncfc" || bail "ncf-prep failed"
diff_tool=$NCF_TEST_TOOLS/ckpt_diff

hr_of() { sed -n 's/.*"hr@10": \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }
train() { # train NAME PATH GRAPH PRECISION
	NCF_CUDA_PATH=$2 NCF_CUDA_GRAPH=$3 "$NCF_BIN/ncf-train" -q -e 2 -b 65536 --device cuda \
		--precision "$4" --log "$tmp/$1.log" "$tmp/d.ncfc" -o "$tmp/$1.ncfm" \
		2>"$tmp/$1.err"
	rc=$?
	[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/$1.err"
	return $rc
}
for p in fp32 bf16; do
	train "f1$p" fused 1 "$p" && train "f2$p" fused 1 "$p" && train "f3$p" fused 0 "$p"
	ok $? "$p: the fused step trains (twice with its graph, once without)"
	"$diff_tool" "$tmp/f1$p.ncfm.last" "$tmp/f2$p.ncfm.last" | grep -q '^identical	1'
	ok $? "$p: the fused step is deterministic (two runs, the same parameters)"
	"$diff_tool" "$tmp/f1$p.ncfm.last" "$tmp/f3$p.ncfm.last" | grep -q '^identical	1'
	ok $? "$p: the CUDA graph changes nothing (NCF_CUDA_GRAPH=0, the same parameters)"
	train "u$p" unfused 1 "$p"
	ok $? "$p: the unfused step trains"
	a=$(hr_of "$tmp/f1$p.log")
	b=$(hr_of "$tmp/u$p.log")
	awk -v a="${a:-nan}" -v b="${b:-nan}" \
		'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a == a + 0 && b == b + 0 && d <= 0.01) }'
	ok $? "$p: HR@10 fused $a, unfused $b (within 0.01)"
done
done_testing
