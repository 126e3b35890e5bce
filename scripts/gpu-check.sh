#!/bin/sh
# gpu-check.sh - everything that needs a GPU, in one call: build, the GPU
# tests (make check-gpu: tests/gpu/*.t) and the GPU benchmark
# (build/bench/bench_gpu on ncf-prep --synthetic ml-20m), printing all of it
# with the time of each stage.  Made to end well inside 10 minutes on one
# H200 (about 2-3 minutes of build on 16 cores, 2-4 of tests, 1-2 of
# benchmark).
#
#   sh scripts/gpu-check.sh [--quick]          on the GPU machine
#   sh scripts/gpu-check.sh --fetch-deps       here, before: see below
#
# --quick: tests and a benchmark of tf32 and bf16 only, without the whole
# epoch (for a second try with little time left).
#
# The GPU machine has no network.  When it lacks a library the build needs
# (libcsv, OpenBLAS, zstd's headers), run --fetch-deps on a machine with
# apt (Debian or Ubuntu, amd64) first: it downloads the .deb files into
# .deps/ in this tree, which travels with the working tree (or name .deps in
# the device tool's carry list if it is ignored); on the GPU machine this
# script unpacks them under .deps/root (never into /) and points the
# compiler and the loader there.  Without mpicc the build is made with
# NO_MPI=1 (one process; NCCL across GPUs needs MPI).
#
# Exit status: 0 when a GPU was usable, the build and every test passed (a
# benchmark bar that is missed is reported, not failed), 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)

if [ "${1:-}" = "--fetch-deps" ]; then
	mkdir -p .deps && cd .deps || exit 1
	apt-get download libcsv3 libcsv-dev libopenblas0-pthread libopenblas-pthread-dev \
		libopenblas-dev libgfortran5 libzstd-dev || exit 1
	ls -l
	exit 0
fi
quick=0
[ "${1:-}" = "--quick" ] && quick=1

t0=$(date +%s)
stage() {
	echo
	echo "=== $1 (at $(($(date +%s) - t0)) s)"
}
status=0

stage "machine"
uname -a
echo "cores: $(nproc)"
command -v nvidia-smi >/dev/null 2>&1 &&
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
		--format=csv || echo "(no nvidia-smi)"

# Libraries carried as .deb files (see above).
if ls .deps/*.deb >/dev/null 2>&1; then
	stage "unpacking .deps/*.deb under .deps/root"
	mkdir -p .deps/root
	for f in .deps/*.deb; do
		dpkg -x "$f" .deps/root || echo "gpu-check: cannot unpack $f"
	done
	r=$root/.deps/root
	ml=x86_64-linux-gnu
	export CPATH="$r/usr/include:$r/usr/include/$ml:$r/usr/include/$ml/openblas-pthread${CPATH:+:$CPATH}"
	export LIBRARY_PATH="$r/usr/lib/$ml:$r/usr/lib/$ml/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}"
	export LD_LIBRARY_PATH="$r/usr/lib/$ml:$r/usr/lib/$ml/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	# the unversioned names the linker wants, which package scripts would make
	l=$r/usr/lib/$ml/openblas-pthread/libopenblas.so.0
	[ -e "$l" ] && [ ! -e "$r/usr/lib/$ml/libopenblas.so" ] && ln -s "$l" "$r/usr/lib/$ml/libopenblas.so"
	[ -e "$r/usr/lib/$ml/libcsv.so.3" ] && [ ! -e "$r/usr/lib/$ml/libcsv.so" ] &&
		ln -s libcsv.so.3 "$r/usr/lib/$ml/libcsv.so"
fi

stage "build"
mpi=""
command -v mpicc >/dev/null 2>&1 || mpi="NO_MPI=1"
# shellcheck disable=SC2086
if ! NO_INSTALL=1 make -j"${JOBS:-$(nproc)}" $mpi all; then
	echo "gpu-check: the build failed (missing libraries: see --fetch-deps in $0)"
	exit 1
fi
build/bin/ncf-train -vV 2>&1
if ! build/bin/ncf-train -vV 2>&1 | grep -q '^gpu	[0-9]'; then
	echo "gpu-check: no usable GPU here (see the gpu line above): the GPU tests will skip"
	status=1
fi

stage "GPU tests (make check-gpu)"
if command -v prove >/dev/null 2>&1; then
	# shellcheck disable=SC2086
	make --no-print-directory $mpi check-gpu || status=1
else
	echo "(no prove: running the tests one by one)"
	for t in tests/gpu/*.t; do
		echo "--- $t"
		NCF_BIN=$root/build/bin NCF_ROOT=$root sh "$t" >"/tmp/gpu-check.$$" 2>&1
		rc=$?
		cat "/tmp/gpu-check.$$"
		if [ $rc -ne 0 ] || grep -q '^not ok' "/tmp/gpu-check.$$"; then
			status=1
		fi
		rm -f "/tmp/gpu-check.$$"
	done
fi

stage "benchmark data (ncf-prep --synthetic ml-20m)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ncf-gpucheck.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
if build/bin/ncf-prep --synthetic ml-20m -o "$tmp/ml-20m.ncfc"; then
	stage "benchmark (build/bench/bench_gpu)"
	if [ $quick = 1 ]; then
		build/bench/bench_gpu --precisions tf32,bf16 --no-epoch "$tmp/ml-20m.ncfc" || status=1
	else
		build/bench/bench_gpu "$tmp/ml-20m.ncfc" || status=1
	fi
	# issue 12: the fused training step (NCF_CUDA_PATH=fused, the default,
	# which check-gpu and the benchmark above ran) against the unfused one,
	# so that a wrong fused kernel shows apart from a slow one: the cost
	# model, parity with the cpu backend (not with --quick) and the speed of
	# each path; the fused one also without its CUDA graph (NCF_CUDA_GRAPH=0)
	for path in unfused fused fused-nograph; do
		p=${path%-nograph}
		g=1
		[ "$path" = fused-nograph ] && g=0
		stage "NCF_CUDA_PATH=$p NCF_CUDA_GRAPH=$g: cost model, parity, speed"
		build/bench/bench_gpu --cost ml-20m --precision bf16 --path "$p" |
			grep -E '^(bytes_per_step|launches_per_step|samples_per_s_at)'
		if [ $quick = 0 ] && [ "$path" = unfused ]; then
			NCF_CUDA_PATH=$p NCF_BIN=$root/build/bin NCF_ROOT=$root sh tests/gpu/parity.t ||
				status=1
		fi
		NCF_CUDA_PATH=$p NCF_CUDA_GRAPH=$g build/bench/bench_gpu --precisions bf16,tf32 \
			--no-epoch --steps 10 "$tmp/ml-20m.ncfc" >"$tmp/path.out" || status=1
		grep -E '^(bf16|tf32)_(samples_per_s|seconds_per_step|memory_bandwidth_fraction)' \
			"$tmp/path.out"
	done
	# issue 5: inference on the GPU (bars: >= 500M samples/s bf16 at 2^20,
	# p99 <= 50 us at 1024; small batches run as CUDA graphs)
	stage "ncf-infer --bench on the GPU (bf16, tf32)"
	build/bin/ncf-infer --bench --random-model --device cuda --precision bf16 || status=1
	[ $quick = 1 ] || build/bin/ncf-infer --bench --random-model --device cuda --precision tf32 ||
		status=1
	# issue 6: one rank through MPI (and NCCL) gives the bytes of no mpirun
	if [ -z "$mpi" ] && command -v mpirun >/dev/null 2>&1; then
		stage "mpirun -np 1 on the GPU equals no mpirun (fp32)"
		build/bin/ncf-prep -q --synthetic ml-latest-small -o "$tmp/s.ncfc"
		f="--device cuda --precision fp32 -e 2 -b 65536 -q"
		build/bin/ncf-train "$tmp/s.ncfc" -o "$tmp/a.ncfm" $f &&
			mpirun --allow-run-as-root -np 1 build/bin/ncf-train "$tmp/s.ncfc" -o "$tmp/b.ncfm" $f &&
			build/tests/tools/ckpt_diff "$tmp/a.ncfm.last" "$tmp/b.ncfm.last" || status=1
		n=$(nvidia-smi -L 2>/dev/null | wc -l)
		if [ "$n" -ge 2 ]; then
			stage "mpirun -np 2 with NCCL on two GPUs"
			mpirun --allow-run-as-root -np 2 build/bin/ncf-train "$tmp/s.ncfc" -o "$tmp/c.ncfm" $f &&
				build/tests/tools/ckpt_diff "$tmp/a.ncfm.last" "$tmp/c.ncfm.last" || status=1
		fi
	fi
else
	echo "gpu-check: ncf-prep failed"
	status=1
fi

stage "done, status $status"
exit $status
