#!/bin/sh
# cost.t - bench_gpu --cost, the cost model of one training step, in the
# nvcc build on any machine (it needs no GPU: the backend's step code runs
# dry and notes what each launch would move): the key<TAB>value lines are
# there; with -v the launches add up to the totals; the fused dense layers
# move fewer bytes in fewer launches than plain's GEMMs and passes at
# NVIDIA's shape, and the default (the fixed order: fused) no more than the
# 8.63 GB per bf16 step it is held to; the prediction is on the model's
# machine (NCF_CUDA_BANDWIDTH moves it), the H100's and H200's from their
# reference figures whatever that machine is; NCF_CUDA_DENSE is taken
# without --dense.  Skips in builds without CUDA.
# (Under emulation the same model is checked against what the emulated
# step launches: tests/unit/test_cuda_emu.cc.)
. "$(dirname "$0")/../lib.sh"
need_cuda_build
bench=$NCF_BENCH_GPU
[ -x "$bench" ] || skip_all "no $bench"

# val FILE KEY: the value of KEY.
val() { awk -F'\t' -v k="$2" '$1 == k { print $2 }' "$1"; }

for p in bf16 tf32; do
	for dense in fused lt plain; do
		f=$T/$dense.$p
		"$bench" --cost ml-20m --precision "$p" --batch-size 1048576 --dense "$dense" -v >"$f"
		ok $? "bench_gpu --cost ml-20m --precision $p --dense $dense"
		b=$(val "$f" bytes_per_step)
		l=$(val "$f" launches_per_step)
		s=$(val "$f" samples_per_s_at_bandwidth)
		awk -F'\t' -v b="${b:-0}" -v l="${l:-0}" -v fl="$(val "$f" flops_per_step)" '
			$1 == "launch" { if ($3 != "copy") n++; sum += $5; fsum += $6; k++ }
			END { d = sum - b; if (d < 0) d = -d; fd = fsum - fl; if (fd < 0) fd = -fd
			      exit !(b > 0 && n == l && d <= k && fd <= k) }' "$f"
		ok $? "$dense $p: $l launches, $b bytes ($s samples/s at 4.3 TB/s); the -v lines add up"
		[ "$(val "$f" dense_layer_2)" = "$dense" ] && [ "$(val "$f" dense_layer_3)" = "$dense" ]
		ok $? "$dense $p: dense_layer_2 and _3 say $dense"
	done
	fb=$(val "$T/fused.$p" bytes_per_step)
	ub=$(val "$T/plain.$p" bytes_per_step)
	fl=$(val "$T/fused.$p" launches_per_step)
	ul=$(val "$T/plain.$p" launches_per_step)
	awk -v a="${fb:-0}" -v b="${ub:-0}" -v c="${fl:-0}" -v d="${ul:-0}" \
		'BEGIN { exit !(a > 0 && a < b && c < d) }'
	ok $? "$p: fused moves fewer bytes ($fb < $ub) in fewer launches ($fl < $ul) than plain"
done

"$bench" --cost ml-20m --precision bf16 --batch-size 1048576 >"$T/default"
b=$(val "$T/default" bytes_per_step)
awk -v b="${b:-0}" 'BEGIN { exit !(b > 0 && b <= 8626552250) }'
ok $? "bf16 by default ($(val "$T/default" dense_layer_2)): $b bytes a step, no more than 8.63 GB"

# the model's machine is this one (here the reference H200, or
# NCF_CUDA_BANDWIDTH's bandwidth); the named machines' predictions are
# from their own reference figures whatever it is
d=$T/default
awk -F'\t' '$1 == "model_machine" { m = $2 } $1 == "predicted_step_us" { p = $2 }
	$1 == "predicted_step_us_H200" { h2 = $2 } $1 == "predicted_step_us_H100" { h1 = $2 }
	END { exit !(p > 0 && h2 > 0 && h1 > h2 && (m !~ /reference/ || p == h2)) }' "$d"
ok $? "the prediction on $(val "$d" model_machine): $(val "$d" predicted_step_us) us; H200 $(val "$d" predicted_step_us_H200) us, H100 $(val "$d" predicted_step_us_H100) us (less bandwidth)"
NCF_CUDA_BANDWIDTH=2000 "$bench" --cost ml-20m --precision bf16 --batch-size 1048576 >"$T/bw"
[ "$(val "$T/bw" model_bandwidth_GBs)" = 2000 ] && [ "$(val "$T/bw" bandwidth_GBs)" = 2000 ] &&
	awk -v a="$(val "$T/bw" predicted_step_us)" -v b="$(val "$d" predicted_step_us)" 'BEGIN { exit !(a > b) }' &&
	[ "$(val "$T/bw" predicted_step_us_H200)" = "$(val "$d" predicted_step_us_H200)" ]
ok $? "NCF_CUDA_BANDWIDTH=2000: the model's machine moves 2000 GB/s ($(val "$T/bw" predicted_step_us) us), the named H200's prediction stays"
NCF_CUDA_DENSE=plain "$bench" --cost ml-20m --precision bf16 --batch-size 1048576 >"$T/env"
[ "$(val "$T/env" dense_layer_2)" = plain ] && [ "$(val "$T/env" bytes_per_step)" = "$(val "$T/plain.bf16" bytes_per_step)" ]
ok $? "without --dense, the layers NCF_CUDA_DENSE pins, as a run would take them"

"$bench" --cost ml-20m --dense fused,sideways >/dev/null 2>"$T/err"
[ $? -ne 0 ] && grep -q "NCF_CUDA_DENSE: 'sideways' is not fused, lt or plain" "$T/err"
ok $? "an unknown implementation is refused: $(cat "$T/err")"

"$bench" --help >"$T/help" && grep -q '^       bench_gpu --cost SHAPE' "$T/help"
ok $? "--help prints the synopsis on stdout and exits 0"
"$bench" --cost ml-20m extra >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "^bench_gpu: --cost takes a shape, not a cache ('extra' is extra)" "$T/err" &&
	grep -q "^Try 'bench_gpu --help'" "$T/err"
ok $? "an operand after --cost: exit 2, what is extra, and the synopsis"
done_testing
