#!/bin/sh
# cost.t - bench_gpu --cost, the cost model of one training step, in the
# nvcc build on any machine (it needs no GPU: the backend's step code runs
# dry and notes what each launch would move): the key<TAB>value lines are
# there; with -v the launches add up to the totals; the fused path moves
# fewer bytes in fewer launches than the unfused one at NVIDIA's shape.
# Skips in builds without CUDA.  (Under emulation the same model is checked
# against what the emulated step launches: tests/unit/test_cuda_emu.cc.)
. "$(dirname "$0")/../lib.sh"
need_cuda_build
bench=$NCF_ROOT/build/bench/bench_gpu
[ -x "$bench" ] || skip_all "no $bench"

# val FILE KEY: the value of KEY.
val() { awk -F'\t' -v k="$2" '$1 == k { print $2 }' "$1"; }

for p in bf16 tf32; do
	for path in fused unfused; do
		f=$T/$path.$p
		"$bench" --cost ml-20m --precision "$p" --batch-size 1048576 --path "$path" -v >"$f"
		ok $? "bench_gpu --cost ml-20m --precision $p --path $path"
		b=$(val "$f" bytes_per_step)
		l=$(val "$f" launches_per_step)
		s=$(val "$f" samples_per_s_at_bandwidth)
		awk -F'\t' -v b="${b:-0}" -v l="${l:-0}" -v fl="$(val "$f" flops_per_step)" '
			$1 == "launch" { if ($3 != "copy") n++; sum += $5; fsum += $6; k++ }
			END { d = sum - b; if (d < 0) d = -d; fd = fsum - fl; if (fd < 0) fd = -fd
			      exit !(b > 0 && n == l && d <= k && fd <= k) }' "$f"
		ok $? "$path $p: $l launches, $b bytes ($s samples/s at 4.3 TB/s); the -v lines add up"
	done
	fb=$(val "$T/fused.$p" bytes_per_step)
	ub=$(val "$T/unfused.$p" bytes_per_step)
	fl=$(val "$T/fused.$p" launches_per_step)
	ul=$(val "$T/unfused.$p" launches_per_step)
	awk -v a="${fb:-0}" -v b="${ub:-0}" -v c="${fl:-0}" -v d="${ul:-0}" \
		'BEGIN { exit !(a > 0 && a < b && c < d) }'
	ok $? "$p: the fused path moves fewer bytes ($fb < $ub) in fewer launches ($fl < $ul)"
done

"$bench" --cost ml-20m --path sideways >/dev/null 2>"$T/err"
[ $? -ne 0 ] && grep -q 'NCF_CUDA_PATH=sideways' "$T/err"
ok $? "an unknown path is refused: $(cat "$T/err")"
done_testing
