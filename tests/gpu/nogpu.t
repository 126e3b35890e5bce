#!/bin/sh
# nogpu.t - on a machine without a usable GPU, the cuda backend steps aside
# with the CUDA runtime's reason: --device cuda exits 3 and says why,
# --device auto trains on the CPU, saying so at -v only, -vV lists the CUDA
# versions and "no usable GPU".  Skips where a GPU is usable (the other
# tests here cover it) and in builds without CUDA.
. "$(dirname "$0")/../lib.sh"
need_cuda_build
if gpu_usable; then
	echo "1..0 # SKIP a GPU is usable; this test is for machines without one"
	exit 0
fi
tmp=$T
"$NCF_BIN/ncf-prep" -q --synthetic tiny -o "$tmp/t.ncfc" || bail "ncf-prep failed"

"$NCF_BIN/ncf-train" -vV >"$tmp/v.out" 2>&1
grep -q '^cuda runtime	' "$tmp/v.out" && grep -q '^cublas	' "$tmp/v.out"
ok $? "-vV lists the CUDA runtime and cuBLAS"
grep -q '^gpu	no usable GPU: ..*' "$tmp/v.out"
ok $? "-vV says there is no usable GPU, and why"

"$NCF_BIN/ncf-train" --device cuda -e 1 -b 512 "$tmp/t.ncfc" -o "$tmp/m.ncfm" 2>"$tmp/e.err"
rc=$?
test $rc -eq 3
ok $? "--device cuda exits 3 without a GPU (got $rc)"
grep -q 'no usable GPU: .' "$tmp/e.err"
ok $? "--device cuda gives the CUDA error in words: $(head -n 1 "$tmp/e.err")"

"$NCF_BIN/ncf-train" --device auto -e 1 -b 512 "$tmp/t.ncfc" -o "$tmp/a.ncfm" 2>"$tmp/a.err"
ok $? "--device auto trains without a GPU"
! grep -q 'GPU' "$tmp/a.err"
ok $? "--device auto says nothing of GPUs at the normal level"
"$NCF_BIN/ncf-train" -v --device auto -e 1 -b 512 "$tmp/t.ncfc" -o "$tmp/b.ncfm" 2>"$tmp/b.err"
grep -q 'no usable GPU (.*); using the CPU' "$tmp/b.err"
ok $? "--device auto -v says why it uses the CPU: $(grep -m1 'no usable GPU' "$tmp/b.err")"
done_testing
