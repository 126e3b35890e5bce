#!/bin/sh
# dense.t - the training step's dense layers on a GPU (NCF_CUDA_DENSE,
# ncf-train(1); kernels/cuda/dense.cuh): each implementation (fused, lt,
# plain) trains, a fixed choice is deterministic (the same run twice gives
# the same parameters, bit for bit: no float atomics, reduction orders fixed
# by the sizes) with and without the step's graph, lt and plain train as
# well as fused (HR@10 after two epochs within 0.01), in fp32 and bf16; and
# without NCF_CUDA_DENSE the layers are timed on the first step, each
# layer's choice said at -v.  Synthetic ml-1m, batch 65536.
. "$(dirname "$0")/../lib.sh"
need_gpu
tmp=$T
"$NCF_BIN/ncf-prep" -q --synthetic ml-1m -o "$tmp/d.ncfc" || bail "ncf-prep failed"
diff_tool=$NCF_TEST_TOOLS/ckpt_diff

hr_of() { sed -n 's/.*"hr@10": \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }
train() { # train NAME DENSE GRAPH PRECISION [ncf-train options]
	name=$1 dense=$2 graph=$3 prec=$4
	shift 4
	NCF_CUDA_DENSE=$dense NCF_CUDA_GRAPH=$graph "$NCF_BIN/ncf-train" -q -e 2 -b 65536 \
		--device cuda --precision "$prec" --log "$tmp/$name.log" "$tmp/d.ncfc" \
		-o "$tmp/$name.ncfm" "$@" 2>"$tmp/$name.err"
	rc=$?
	[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/$name.err"
	return $rc
}
for p in fp32 bf16; do
	train "f1$p" fused 1 "$p" && train "f2$p" fused 1 "$p" && train "f3$p" fused 0 "$p"
	ok $? "$p: fused trains (twice with the step's graph, once without)"
	"$diff_tool" "$tmp/f1$p.ncfm.last" "$tmp/f2$p.ncfm.last" | grep -q '^identical	1'
	ok $? "$p: fused is deterministic (two runs, the same parameters)"
	"$diff_tool" "$tmp/f1$p.ncfm.last" "$tmp/f3$p.ncfm.last" | grep -q '^identical	1'
	ok $? "$p: the CUDA graph changes nothing (NCF_CUDA_GRAPH=0, the same parameters)"
	a=$(hr_of "$tmp/f1$p.log")
	for d in lt plain; do
		train "$d$p" "$d" 1 "$p"
		ok $? "$p: $d trains"
		b=$(hr_of "$tmp/$d$p.log")
		awk -v a="${a:-nan}" -v b="${b:-nan}" \
			'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a == a + 0 && b == b + 0 && d <= 0.01) }'
		ok $? "$p: HR@10 fused $a, $d $b (within 0.01)"
	done
	train "t$p" "" 1 "$p" -v
	ok $? "$p: the layers timed on the first step train"
	n=$(grep -c 'cuda backend: dense layer [0-9]: [a-z]* (.*timed; fused .* ms; lt .* ms; plain .* ms)' "$tmp/t$p.err")
	[ "$n" -eq 2 ]
	ok $? "$p: each of the two dense layers timed and said at -v: $(grep 'dense layer' "$tmp/t$p.err" | tr '\n' ' ')"
done
done_testing
