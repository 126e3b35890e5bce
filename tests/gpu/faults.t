#!/bin/sh
# faults.t - faults that name themselves, on the GPU: a kernel that faults
# (gpu_parity --fault: __trap) surfaces at the next synchronisation with a
# hint, and with NCF_CUDA_SYNC=1 is named with its file and line; training
# with NCF_CUDA_SYNC=1 gives the same model, byte for byte (it only waits
# after every launch and cuBLAS call).  Each fault runs in a process of its
# own: the device is lost to the process after one.
. "$(dirname "$0")/../lib.sh"
need_gpu
"$NCF_BIN/ncf-prep" -q --synthetic tiny -o "$T/d.ncfc" || bail "ncf-prep failed"
"$GPU_PARITY" "$T/d.ncfc" --fault >"$T/f.out" 2>"$T/f.err"
grep -q '^ok 1 ' "$T/f.out" &&
	grep -q 'a kernel launched before this call failed; NCF_CUDA_SYNC=1 names it' "$T/f.err"
ok $? "a faulting kernel surfaces at the next synchronisation, with the hint: $(head -n 1 "$T/f.err")"
NCF_CUDA_SYNC=1 "$GPU_PARITY" "$T/d.ncfc" --fault >"$T/g.out" 2>"$T/g.err"
grep -q '^ok 1 ' "$T/g.out" &&
	grep -q 'kernel fault_kernel (.*test_hooks.cu:[0-9]*) failed on the device' "$T/g.err"
ok $? "NCF_CUDA_SYNC=1 names the faulting kernel: $(head -n 1 "$T/g.err")"

f="--device cuda --precision fp32 -e 2 -b 512 -q"
"$NCF_BIN/ncf-train" "$T/d.ncfc" $f -o "$T/a.ncfm" 2>"$T/a.err" &&
	NCF_CUDA_SYNC=1 "$NCF_BIN/ncf-train" "$T/d.ncfc" $f -o "$T/b.ncfm" 2>"$T/b.err"
st=$?
[ $st -eq 0 ] || cat "$T/a.err" "$T/b.err" | sed 's/^/# /'
ok $st "ncf-train with and without NCF_CUDA_SYNC=1"
cmp -s "$T/a.ncfm.last" "$T/b.ncfm.last"
ok $? "NCF_CUDA_SYNC=1 trains the same model, byte for byte"
printf '1 1\n2 3\n' >"$T/pairs"
NCF_CUDA_SYNC=1 "$NCF_BIN/ncf-infer" --score -m "$T/a.ncfm" --device cuda "$T/pairs" >"$T/s1" 2>"$T/s.err" &&
	"$NCF_BIN/ncf-infer" --score -m "$T/a.ncfm" --device cuda "$T/pairs" >"$T/s2" &&
	cmp -s "$T/s1" "$T/s2"
ok $? "ncf-infer --score with NCF_CUDA_SYNC=1 (no graphs) writes the same scores"
done_testing
