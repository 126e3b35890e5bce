#!/bin/sh
# gpu-check.sh - everything that needs a GPU, in one call that fits the
# device machine's budget: a driver check, the programs (the prebuilt
# bundle, or a build for the GPU found), the device's own figures,
# compute-sanitizer, parity with the cpu backend, the speed of each
# implementation of the dense layers beside the cost model, training and
# inference per precision, and
# NVIDIA's own NCF timed on the same GPU beside ncf.  Each stage has a time
# limit and prints its time; a stage that fails or runs out of time is
# recorded and the next one runs; at the end one summary table.
#
#   sh scripts/gpu-check.sh --quick --bundle   the first run on a GPU
#                machine: the bundle that make gpu-bundle made on a build
#                machine (.gpu-run/, carried with the working tree; the
#                device tool: carry .gpu-run, timeout_s 360; README.md's
#                "The first GPU run" has the call), nothing built there, no
#                compiler needed; <= 300 s all in, NVIDIA's NCF included
#   sh scripts/gpu-check.sh --quick      the same, built there first (make
#                cuda GPU_ARCH=<the GPU's>, which needs every -dev package
#                of the build): the build's 60 s more
#   sh scripts/gpu-check.sh [--bundle]   all of it: <= 480 s (+ 60 s)
#   sh scripts/gpu-check.sh --rehearse   the whole check here, on the CPU
#                (below); with --bundle, the bundle's tools and its checks
#   sh scripts/gpu-check.sh --dry-run    the plan (stages, limits, their
#                sum against the budget); runs nothing
#   sh scripts/gpu-check.sh --no-build   use build/ as it is
#   sh scripts/gpu-check.sh --fetch-deps on a machine with apt: below
#
# The stages, in order (--quick: the first ten):
#   driver      nvidia-smi: the driver is new enough for the CUDA the
#               programs were built with (min_driver below: nvcc's release,
#               or the bundle's MANIFEST's), and the GPU's architecture is
#               one they have code for (nvcc's targets, or the bundle's
#               sm_ list); with --bundle also the bundle itself: its
#               SHA256SUMS, its compressed libraries unpacked, this
#               machine's glibc against the newest symbol it needs, and
#               every library its programs need found (gpu-bundle.sh
#               --check-libs: CUDA's own from this machine, the rest from
#               the bundle).  When any of it fails, one line says which
#               and why, exit 3, nothing else runs
#   build       (not with --bundle) only what the check runs: make cuda
#               GPU_ARCH=<the GPU's> (the tools, bench_gpu, the module, the
#               GPU tests), -j$(nproc), NO_MPI=1 without mpicc.  When it
#               fails, "build failed" with configure's or the compiler's
#               last lines, and the GPU stages are skipped as such
#   device      bench_gpu --device: the GPU as the cost model sees it (SMs,
#               L2, shared memory per SM, clock, the datasheet's bandwidth)
#               and a device-to-device copy timed now; the copy's bandwidth
#               goes to every later stage as NCF_CUDA_BANDWIDTH, so that the
#               model, the profile and the summary judge the launches by
#               what this GPU moves, not by another's datasheet
#   data        synthetic tiny, ml-1m and ml-20m (ncf-prep), and ml-20m as
#               CSV for NVIDIA's NCF, at once; then NVIDIA's convert.py
#               starts on that CSV behind the stages that follow (its log:
#               peer_convert.log), for the peer stage
#   sanitizer   tests/gpu/sanitizer.t: memcheck, racecheck, initcheck and
#               synccheck on a few training steps and a scoring pass, per
#               implementation of the dense layers (NCF_CUDA_DENSE=fused,
#               lt, plain); a tool that cannot run is recorded as such.
#               First of the stages that run ncf on the GPU: correctness
#               before speed
#   parity      gpu_parity (synthetic ml-1m) against the cpu backend for
#               each implementation of the dense layers (--quick: all but
#               the first with --smoke)
#   dense       the training step with each implementation of the dense
#               layers (DENSE_VARIANTS below: fused, fused without the
#               step's graph, lt, plain, and the step as a run takes it:
#               NCF_CUDA_DENSE unset, each layer's implementations timed on
#               the first step, the fastest kept, its choice and times in
#               the summary as dense_layer_K lines): samples/s at batch 2^20
#               on synthetic ml-20m in bf16 (and tf32 in the full mode)
#               with how many of the timed steps ran as the CUDA graph,
#               beside the cost model's prediction for the layers that ran
#               (bench_gpu --cost --dense) and the samples/s the measured
#               bandwidth allows; then for fused, lt and plain a short
#               profiled run (NCF_CUDA_PROFILE=1: one line per launch, one
#               per CUB sort, measured beside the model; the table in
#               LOGS/profile.NAME.txt, the five slowest in the summary with
#               their share of the step, the model's time and the term that
#               binds it).  A variant whose speed run fails is run once
#               more with NCF_CUDA_SYNC=1 --steps 1, which names the
#               launch that failed
#   epochs      one epoch of ml-1m per precision (samples/s, HR@10)
#   inference   ncf-infer --bench (batch 1024 and 2^20 in tf32, bf16, fp32
#               and fp16; the full mode: NVIDIA's six sizes, 1024 to 2^20)
#   peer        NVIDIA's NCF (../shared/peer, the bundle's peer/) on the
#               same synthetic ml-20m: ncf.py -e 1 at batch 2^20 in TF32
#               and with --amp, each after ncf-train -e 1 at the same batch
#               in tf32 and with --amp, and inference.py (fp32 and --fp16)
#               at 1024 and 2^20; the summary puts each program's own
#               train_throughput and HR@10, and the inference samples/s,
#               side by side with their ratio, which is the headline (an
#               absolute time says little across machines).  It skips
#               itself where python3 lacks torch (PEER_PYTHON names
#               another); convert.py needs pandas < 3, which the bundle
#               carries as wheels when it could fetch them
#  and in the full mode:
#   bench_gpu   bench_gpu at ml-20m, every precision, a whole epoch each
#   target      time to the HR@10 target on ml-20m, bf16 (below)
#   gpu_tests   tests/gpu: train.t, resume.t, faults.t, dense.t, sass.t
#   mpi         one rank through mpirun gives the model of none; two GPUs
#               with NCCL where there are two (skips itself without MPI)
#
# The budget (quick 300 s, full 480 s, each 60 s more with the build;
# NCF_GPU_CHECK_BUDGET=S) holds for the whole run, the driver check and
# the build included.  Each stage has a limit (NCF_GPU_CHECK_LIMITS=
# name=S,name=S overrides some); the limits of the plan must add up to no
# more than the budget, or the script refuses to start (exit 2).  At run
# time a stage gets its limit or what is left, whichever is less, and is
# skipped ("out of time") when that is under 15 s and under its limit.
# The limits come from what was measured on a 2-core machine without a
# GPU (the build: make -j2 cuda GPU_ARCH=90 from clean, 85 s of CPU of
# which the longest single file, mlp.cu, is 12 s; NVIDIA's convert.py on
# ml-20m: about a minute; the data stage's four ncf-prep runs at once: 12 s
# on 2 busy cores, hence 17 s) and from estimates for the GPU work; the
# first GPU run's stage times replace them.  The driver check has 18 s: a
# first nvidia-smi on a machine just started brings the driver up (seconds,
# without a persistence daemon), and --bundle adds its sums, unpacking and
# ldd checks (1.2 s here); when it does not end in time, its line says
# which step it was in, and nothing else runs.
#
# REHEARSAL (--rehearse): the whole quick plan on a machine without a GPU,
# so that every stage's commands, their parsing and the summary run before
# the first real call does: the emulated module (build/lib/ncf/
# ncf-cuda-emu.so, NCF_CUDA_MODULE) stands in for the GPU and
# gpu_parity_emu for gpu_parity, a pass-through compute-sanitizer
# (scripts/rehearse/) for the real one (it finds nothing: it checks the
# plumbing; two of its tools, one implementation of the dense layers and
# one precision, not on gpu_parity), the data sets are synthetic tiny, the
# batches small, the dense layers are plain outside the dense stage
# (NCF_CUDA_DENSE=plain: their fused kernels' emulation is the slowest
# part of it; make check's emulation tests run them) and parity runs
# plain's with --smoke only, the dense layers' choice is the emulation's
# fixed order (it times nothing), inference times the epochs stage's
# tiny model, and NVIDIA's NCF runs on the CPU (its CPU patch and bf16
# script applied to a copy, ../shared/peer/README.md) where python3
# (PEER_PYTHON) has torch.  No driver is checked and nothing is built; the
# limits and the budget are three times the plan's; the figures are the
# CPU's and mean nothing.  tests/cli/gpu-rehearse.t runs it in make check.
#
# Output: each stage's last lines on stdout and the summary table last (the
# device tool returns only the end of the output: the table is under 8,000
# characters), each stage's whole output in LOGS/NAME.log, LOGS/results.tsv
# and LOGS/metrics.tsv the table's data, LOGS/driver.txt the driver
# check's line, LOGS/nvidia-smi.txt the GPU's state, LOGS/dmon.txt its
# power, clocks and load each second (nvidia-smi dmon), LOGS/bundle-libs.txt
# the bundle's library check.  LOGS is a temporary directory, kept and
# named at the end.  When $OUT is set (the device tool brings back at most
# 8 files of it), LOGS is removed at the end and $OUT/gpu-check holds four
# files instead, rewritten after the driver check and after every stage,
# so that a call cut short still brings back the stages that ended:
# summary.txt (the table as it stands), results.tsv, metrics.tsv and
# logs.tar.gz (LOGS).  A TERM, INT or HUP (the device tool's time limit)
# stops the stage that runs, records it as "FAIL (killed)", prints the
# table and exits 143.
#
# Time to the target: NVIDIA's target is HR@10 0.9562 on MovieLens-20M.  On
# synthetic ml-20m (no download) the equivalent used here is 0.9562 times
# the HR@10 of the planted scores (ncf-prep's oracle_hr@10, the best any
# model can rank there): NVIDIA's target as a share of the attainable.  It
# is a target a run reaches at about the point NVIDIA's does: on synthetic
# ml-1m (oracle 0.735, target 0.703) the cpu backend at batch 65536 has
# HR@10 0.380, 0.621, 0.700, 0.699, 0.710 after epochs 1-5 and levels off at
# 0.71 (synthetic ml-20m: oracle 0.827, target 0.790).  NCF_TARGET_HR=X sets
# an absolute target instead.  The time is NVIDIA's metric, summed from
# ncf-train's log: training and evaluation time of the epochs up to the
# first that reaches the target (checkpoint writes are not counted).
#
# The GPU machine has no network.  Without --bundle, when it lacks a
# library the build needs, run --fetch-deps on a machine with apt (Debian
# or Ubuntu, amd64) first: it downloads the .deb files (the -dev packages
# and their run-time libraries: zstd, libcsv, OpenBLAS, jansson; oneDNN
# where the archive has it) into .deps/ in this tree, which travels with
# the working tree (or name .deps in the device tool's carry list if it is
# ignored); on the GPU machine the build stage unpacks them under
# .deps/root (never into /) and the compiler and the loader are pointed
# there.  The bundle makes all of that unnecessary.
#
# Exit status: 0 when every stage that ran passed; 1 when one failed or ran
# out of time, the build included; 2 a bad option, a plan whose limits
# exceed the budget, or --bundle without a bundle; 3 no usable GPU: the
# driver check failed (nothing else ran), or the tools found no GPU (every
# GPU stage skipped); 143 stopped by a signal (the table printed).
set -u
self=$0
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)

# The implementations of the dense layers the GPU stages compare, one word
# each: NAME:ENV, ENV the environment that selects it (VAR=VALUE,
# comma-separated; VAR= unsets VAR).  Each is checked by the sanitizer and
# parity, timed, and profiled; the first is the default, and --quick's
# parity runs the others with --smoke.
DENSE_VARIANTS="fused:NCF_CUDA_DENSE=fused lt:NCF_CUDA_DENSE=lt plain:NCF_CUDA_DENSE=plain"
# and also timed (not profiled, no parity of their own): the fused layers
# without the step's graph, and the step as a run takes it (NCF_CUDA_DENSE
# unset: each layer's implementations timed on the first step; its choice
# and their times go to the summary)
DENSE_VARIANTS_TIMED="fused-nograph:NCF_CUDA_DENSE=fused,NCF_CUDA_GRAPH=0 timed:NCF_CUDA_DENSE="

# ---- the driver check ----------------------------------------------------------
#
# min_driver CUDA: the oldest Linux driver that runs what a CUDA toolkit of
# version CUDA (major.minor) builds, by minor version compatibility (NVIDIA,
# "CUDA Compatibility", Minor Version Compatibility, table 1: CUDA 13.x needs
# >= 580, 12.x >= 525, 11.x >= 450; the toolkit release notes' driver table
# gives 12.x's and 11.x's in full, 525.60.13 and 450.80.02).  That
# compatibility covers code built for the GPU's own architecture, which is
# what the build and the bundle hold (no PTX for the driver to compile).
# Prints nothing for a version the table does not know.
min_driver() {
	case $1 in
	13.*) echo 580 ;;
	12.*) echo 525.60.13 ;;
	11.*) echo 450.80.02 ;;
	esac
}

# version_ge A B: dotted version A is B or later (numbers field by field).
version_ge() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		n = split(a, x, "."); m = split(b, y, "."); k = n > m ? n : m
		for (i = 1; i <= k; i++) if (x[i] + 0 != y[i] + 0) exit !(x[i] + 0 > y[i] + 0)
		exit 0 }'
}

# manifest KEY: the value of KEY in the bundle's MANIFEST.
manifest() { awk -F'\t' -v k="$1" '$1 == k { print $2; exit }' "$B/MANIFEST" 2>/dev/null; }

# driver_refuse WHY: the driver check's one line, on stderr and in the logs;
# exit 3.
driver_refuse() {
	echo "gpu-check: $*" >&2
	echo "driver: $*" >"$logs/driver.txt"
	exit 3
}

# driver_step WHAT: what the driver check is doing, for the line that says
# it did not end in time.
driver_step() { echo "$*" >"$work/driver.step"; }

# bundle_ready: the bundle is whole (its SHA256SUMS), unpacked, this
# machine's glibc new enough, and its programs find every library here;
# else driver_refuse.
bundle_ready() {
	[ -f "$B/MANIFEST" ] || driver_refuse "--bundle: no $B/MANIFEST (make gpu-bundle makes it)"
	driver_step "checking the bundle's SHA256SUMS"
	if command -v sha256sum >/dev/null 2>&1; then
		bad=$(cd "$B" && sha256sum -c --quiet SHA256SUMS 2>&1 | head -n 1)
		[ -z "$bad" ] || driver_refuse "the bundle $B is damaged or incomplete: $bad (make gpu-bundle again, and carry .gpu-run whole)"
	fi
	need=$(manifest glibc_needed)
	have=$(ldd --version 2>/dev/null | head -n 1 | awk '{ print $NF }')
	case $need$have in
	*[!0-9.]* | '') ;;
	*) version_ge "$have" "$need" ||
		driver_refuse "this machine's glibc $have is older than the bundle's programs need ($need): make gpu-bundle on an older system" ;;
	esac
	# its compressed files unpacked, CUDA's libraries looked for where its
	# module's run path does not find them, then every library found
	driver_step "unpacking the bundle and checking its libraries (gpu-bundle.sh --check-libs)"
	sh scripts/gpu-bundle.sh --check-libs "$B" >"$logs/bundle-libs.txt" 2>&1 ||
		{ cuda_libs_find && sh scripts/gpu-bundle.sh --check-libs "$B" >"$logs/bundle-libs.txt" 2>&1; } ||
		driver_refuse "the bundle's programs need libraries this machine lacks: $(grep -m1 '^FAIL' "$logs/bundle-libs.txt" | sed 's/^FAIL *//') (CUDA $(manifest cuda)'s own must be here; LOGS/bundle-libs.txt)"
}

# cuda_libs_find: CUDA's libraries that the bundle's module needs and the
# loader does not find (its run path is the build machine's CUDA_HOME),
# looked for in CUDA_HOME, /usr/local/cuda and the nvidia-* Python wheels
# (PyTorch's); the folders that hold them go into LD_LIBRARY_PATH here and
# into $work/cuda_ld for the stages.  Returns 1 when none was missing.
cuda_libs_find() {
	m=$B/lib/ncf/ncf-cuda.so
	missing=$(LD_LIBRARY_PATH=$B/lib ldd "$m" 2>/dev/null | awk '$3 == "not" { print $1 }')
	[ -n "$missing" ] || return 1
	driver_step "looking for CUDA's libraries ($(echo $missing))"
	wheels=$(python3 -c 'import glob, os, nvidia
for p in nvidia.__path__: print("\n".join(sorted(set(os.path.dirname(f) for f in glob.glob(os.path.join(p, "**", "lib*.so*"), recursive=True)))))' 2>/dev/null)
	dirs=""
	for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 \
		/usr/local/cuda/targets/x86_64-linux/lib $wheels; do
		for n in $missing; do
			[ -e "$d/$n" ] && case ":$dirs:" in *":$d:"*) ;; *) dirs=$dirs${dirs:+:}$d ;; esac
		done
	done
	[ -n "$dirs" ] || return 1
	echo "gpu-check: CUDA's libraries ($(echo $missing)) from $dirs" | tee "$logs/cuda-libs.txt"
	echo "$dirs" >"$work/cuda_ld"
	LD_LIBRARY_PATH=$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
	return 0
}

# driver_check: the driver against the CUDA the programs were built with,
# the GPU's architecture into $work/gpu_arch; one line on stdout, or
# driver_refuse.  (Run under the driver stage's limit: nvidia-smi can hang
# on a wedged driver.)
driver_check() {
	if [ "$rehearse" = 1 ]; then
		[ "$src" = bundle ] && bundle_ready
		echo 90 >"$work/gpu_arch"
		echo "driver: rehearsal on the CPU: no driver checked; the emulated module stands in for the GPU${bundle_note:+ ($bundle_note)}" |
			tee "$logs/driver.txt"
		return 0
	fi
	driver_step "asking nvidia-smi (it or the driver hangs)"
	command -v nvidia-smi >/dev/null 2>&1 ||
		driver_refuse "no NVIDIA driver: nvidia-smi is not on PATH (no driver installed, or none mapped into this machine)"
	q=$(nvidia-smi --query-gpu=driver_version,compute_cap,name --format=csv,noheader 2>&1)
	rc=$?
	if [ $rc -ne 0 ]; then
		# an old driver's nvidia-smi may not know compute_cap: ask for the version alone
		drv=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
		case $drv in
		[0-9]*.[0-9]*) cc="" name="GPU" ;;
		*) driver_refuse "no usable NVIDIA driver: nvidia-smi failed (exit $rc): $(echo "$q" | head -n 1)" ;;
		esac
	else
		line=$(echo "$q" | head -n 1)
		drv=$(echo "$line" | awk -F', *' '{ print $1 }')
		cc=$(echo "$line" | awk -F', *' '{ print $2 }')
		name=$(echo "$line" | awk -F', *' '{ print $3 }')
	fi
	case $drv in
	[0-9]*.[0-9]*) ;;
	*) driver_refuse "no usable NVIDIA driver: nvidia-smi gave no driver version ('$drv')" ;;
	esac
	if [ "$src" = bundle ]; then
		cuda=$(manifest cuda)
		[ -n "$cuda" ] || driver_refuse "--bundle: $B/MANIFEST names no CUDA version (make gpu-bundle again)"
		whose="the bundle's"
	else
		driver_step "asking nvcc for its release"
		nvcc=${NVCC:-$(command -v nvcc 2>/dev/null)}
		[ -n "$nvcc" ] || nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
		[ -x "$nvcc" ] || command -v "$nvcc" >/dev/null 2>&1 ||
			driver_refuse "no CUDA toolkit: no nvcc on PATH nor in CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} (the build needs it; NVCC=PATH names one)"
		cuda=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1)
		[ -n "$cuda" ] || driver_refuse "no CUDA toolkit: $nvcc --version names no CUDA release"
		whose="nvcc"
	fi
	min=$(min_driver "$cuda")
	if [ -n "$min" ] && ! version_ge "$drv" "$min"; then
		driver_refuse "the NVIDIA driver $drv is too old for CUDA $cuda ($whose): CUDA ${cuda%%.*}.x needs driver $min or newer"
	fi
	case $cc in
	[0-9]*.[0-9]*) ;;
	*) driver_refuse "nvidia-smi gave no compute capability for the GPU ('$cc')" ;;
	esac
	gpu_arch=$(echo "$cc" | tr -d .)
	echo "$gpu_arch" >"$work/gpu_arch"
	if [ "$src" = bundle ]; then
		archs=$(manifest gpu_arch)
		echo " $archs " | grep -q " sm_$gpu_arch " ||
			driver_refuse "the bundle has no code for the $name: compute capability $cc (sm_$gpu_arch) is not among its $archs (make gpu-bundle BUNDLE_CUDA_ARCH=...)"
		bundle_ready
	else
		# nvcc lists the architectures it builds for (sm_80, sm_90, ...)
		driver_step "asking nvcc for its GPU targets"
		codes=$("$nvcc" --list-gpu-code 2>/dev/null)
		if [ -n "$codes" ] && ! echo "$codes" | grep -qx "sm_$gpu_arch"; then
			driver_refuse "CUDA $cuda (nvcc) cannot build for the $name: compute capability $cc (sm_$gpu_arch) is not among its targets"
		fi
	fi
	need=${min:+CUDA ${cuda%%.*}.x needs $min or newer}
	echo "driver: $name, compute capability $cc (GPU_ARCH=$gpu_arch), driver $drv, CUDA $cuda ($whose): ${need:-CUDA $cuda is not in the driver table: not checked}${bundle_note:+; $bundle_note}" |
		tee "$logs/driver.txt"
}

# ---- the libraries carried as .deb files (--fetch-deps) --------------------------

# The -dev packages the build links, each with its run-time library (and
# that library's own, where an image may lack them); oneDNN is wanted, not
# needed (the build goes on without it).
DEPS_NEEDED="libzstd-dev libzstd1 libcsv-dev libcsv3 libopenblas-dev libopenblas0
	libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0
	libjansson-dev libjansson4"
DEPS_WANTED="libdnnl-dev libdnnl2 ocl-icd-libopencl1"

fetch_deps() {
	mkdir -p .deps && cd .deps || exit 1
	# shellcheck disable=SC2086
	apt-get download $DEPS_NEEDED || exit 1
	# shellcheck disable=SC2086
	apt-get download $DEPS_WANTED ||
		echo "gpu-check: --fetch-deps: no oneDNN packages here ($DEPS_WANTED); the build goes on without them" >&2
	ls -l
	exit 0
}

# deps_env: the compiler and the loader pointed at .deps/root (cheap: names
# only; deps_unpack fills it).
deps_env() {
	r=$root/.deps/root
	ml=x86_64-linux-gnu
	ob=$r/usr/lib/$ml/openblas-pthread
	export CPATH="$r/usr/include:$r/usr/include/$ml:$r/usr/include/$ml/openblas-pthread${CPATH:+:$CPATH}"
	export LIBRARY_PATH="$r/usr/lib/$ml:$ob${LIBRARY_PATH:+:$LIBRARY_PATH}"
	export LD_LIBRARY_PATH="$r/usr/lib/$ml:$ob${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# deps_unpack: every .deps/*.deb under .deps/root, and the unversioned names
# the linker wants that the packages' scripts would have made.
deps_unpack() {
	echo "gpu-check: unpacking .deps/*.deb under .deps/root"
	mkdir -p .deps/root
	for f in .deps/*.deb; do
		dpkg -x "$f" .deps/root || echo "gpu-check: cannot unpack $f"
	done
	r=$root/.deps/root/usr/lib/x86_64-linux-gnu
	[ -e "$r/openblas-pthread/libopenblas.so.0" ] && [ ! -e "$r/libopenblas.so" ] &&
		ln -s openblas-pthread/libopenblas.so.0 "$r/libopenblas.so"
	[ -e "$r/libcsv.so.3" ] && [ ! -e "$r/libcsv.so" ] && ln -s libcsv.so.3 "$r/libcsv.so"
	return 0
}

# ---- the stages' work (run as: sh gpu-check.sh --run-stage FUNCTION) --------
#
# Each runs in a process of its own under the stage's time limit, with
# $work (scratch, data), $logs, $mode, $mpi, $gpu_arch, $jobs, the
# programs ($bin, $bench, $parity, $ckpt_diff, $gpu_tests) and the sizes
# (set_sizes) from the parent; `metric` adds a line to the summary's data.
# A stage passes with status 0, fails with another, and says it skipped
# itself with 77 (its log says why).

metric() {
	(
		IFS='	'
		echo "$*"
	) >>"$logs/metrics.tsv"
}

# variant_env VARIANT: its environment as words for env(1) (VAR= as -u VAR).
variant_env() {
	echo "${1#*:}" | tr , '\n' | sed 's/^\([A-Za-z_][A-Za-z0-9_]*\)=$/-u \1/' | tr '\n' ' ' |
		sed 's/ *$//'
}

st_build() {
	if ls .deps/*.deb >/dev/null 2>&1; then deps_unpack; fi
	targets=cuda
	# dense.t and the mpi stage compare models with ckpt_diff
	[ "$mode" = full ] && targets="cuda build/tests/tools/ckpt_diff"
	echo "make -j$jobs $targets${gpu_arch:+ GPU_ARCH=$gpu_arch}${mpi:+ $mpi}"
	# shellcheck disable=SC2086
	NO_INSTALL=1 make -j"$jobs" $targets ${gpu_arch:+GPU_ARCH=$gpu_arch} $mpi >"$work/make.out" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "gpu-check: build failed (make exit $rc); its last lines:"
		tail -n 15 "$work/make.out" | sed 's/^/  /'
		tail -n 3 "$work/make.out" | tr '\n' ' ' | sed 's/  */ /g' >"$logs/build-failed.txt"
		echo "gpu-check: build failed: without a library the build needs, make the bundle on a build machine (make gpu-bundle) and run --bundle, or see --fetch-deps"
		return 1
	fi
	tail -n 5 "$work/make.out"
	"$bin/ncf-train" -vV 2>&1
}

# at_once NAME CMD...: CMD in the background, its output in $work/NAME.out
# and NAME.err, its status in NAME.rc (the caller waits, then reads them).
at_once() {
	n=$1
	shift
	(
		"$@" >"$work/$n.out" 2>"$work/$n.err"
		echo $? >"$work/$n.rc"
	) &
}
rc_of() { cat "$work/$1.rc" 2>/dev/null || echo 1; }

# val FILE KEY: the value of KEY in key<TAB>value lines.
val() { awk -F'\t' -v k="$2" '$1 == k { print $2 }' "$1" 2>/dev/null; }

# The device as the cost model sees it, and the bandwidth a copy reaches
# (into $work/bandwidth, GB/s, for NCF_CUDA_BANDWIDTH).  For the summary:
# metric device NAME SMS L2_MIB SMEM_KIB CLOCK_MHZ DATASHEET_GBS COPY_GBS.
st_device() {
	"$bench" --device --copy-bytes "$copy_bytes" >"$work/device.txt"
	rc=$?
	cat "$work/device.txt"
	[ $rc -eq 0 ] || return $rc
	f=$work/device.txt
	bw=$(val "$f" copy_bandwidth_GBs)
	[ -n "$bw" ] && [ "$bw" != 0 ] || return 1
	echo "$bw" >"$work/bandwidth"
	metric device "$(val "$f" model_machine)" "$(val "$f" model_sms)" "$(val "$f" model_l2_MiB)" \
		"$(val "$f" model_smem_per_sm_KiB)" "$(val "$f" model_clock_MHz)" \
		"$(val "$f" datasheet_bandwidth_GBs)" "$bw"
}

st_data() {
	sets="tiny $mid $big"
	[ "$mode" = full ] && sets="$sets $small"
	sets=$(echo "$sets" | tr ' ' '\n' | awk '!s[$0]++' | tr '\n' ' ')
	for d in $sets; do
		at_once "prep.$d" "$bin/ncf-prep" -q --synthetic "$d" -o "$work/$d.ncfc"
	done
	# in a folder named ml-20m, as NVIDIA's own path is: convert.py picks its reader by
	# the path's name (load.py), and reads any other as user, item, timestamp columns
	mkdir -p "$work/peer-csv/ml-20m"
	at_once prep.csv "$bin/ncf-prep" -q --synthetic "$big" --emit-csv -o "$work/peer-csv/ml-20m/ratings.csv"
	wait
	st=0
	for d in $sets csv; do [ "$(rc_of "prep.$d")" = 0 ] || st=1; done
	cat "$work"/prep.*.err
	ls -l "$work"/*.ncfc "$work/peer-csv"
	return $st
}

# The four compute-sanitizer tools per implementation of the dense layers
# (tests/gpu/sanitizer.t); for the summary, one line per run: metric
# sanitizer TOOL DENSE PREC RESULT.
st_sanitizer() {
	NCF_BIN=$bin NCF_ROOT=$root GPU_PARITY=$parity sh tests/gpu/sanitizer.t >"$work/san.tap" 2>&1
	rc=$?
	cat "$work/san.tap"
	grep -q '^1\.\.0 # SKIP' "$work/san.tap" && return 77
	sed -n 's/^\(not ok\|ok\) [0-9]* \(- \|# SKIP \)\([a-z]*\) \([a-z-]*\) \([a-z0-9]*\): \(.*\)/\1	\2	\3	\4	\5	\6/p' \
		"$work/san.tap" | while IFS='	' read -r res kind tool dense prec what; do
		case "$res$kind" in
		"ok- ") r=clean ;;
		"ok# SKIP ") r="not run: $what" ;;
		*) r="FAIL: $what" ;;
		esac
		metric sanitizer "$tool" "$dense" "$prec" "$r"
	done
	[ $rc -eq 0 ] && ! grep -q '^not ok' "$work/san.tap"
}

# gpu_parity for each implementation of the dense layers, at once (checks,
# not timings; the cpu backend's threads wait passively so that they share
# the cores; the rehearsal: the last one's --smoke only, the emulation
# being slow and the others' the same program).  For the summary: metric
# parity NAME PASSED TOTAL NOTE.
st_parity() {
	first=1
	variants=$DENSE_VARIANTS
	[ "$rehearse" = 1 ] && variants=${DENSE_VARIANTS##* }
	for v in $variants; do
		p=${v%%:*}
		a=""
		[ "$mode" = quick ] && [ $first = 0 ] && a=--smoke
		[ "$rehearse" = 1 ] && a=--smoke
		first=0
		# shellcheck disable=SC2086,SC2046
		at_once "parity.$p" env OMP_WAIT_POLICY=passive $(variant_env "$v") \
			"$parity" "$work/$mid.ncfc" $a
		echo "$a" >"$work/parity.$p.args"
	done
	wait
	st=0
	for v in $variants; do
		p=${v%%:*}
		echo "--- $(variant_env "$v")"
		cat "$work/parity.$p.out"
		head -n 20 "$work/parity.$p.err"
		n=$(grep -c '^ok' "$work/parity.$p.out")
		t=$(grep -c '^\(not \)\{0,1\}ok' "$work/parity.$p.out")
		note="gpu_parity, synthetic $mid"
		[ -n "$(cat "$work/parity.$p.args")" ] && note="$note, --smoke"
		metric parity "$p" "$n" "$t" "$note"
		[ "$(rc_of "parity.$p")" = 0 ] && [ "$n" = "$t" ] && [ "$t" -gt 0 ] || st=1
	done
	return $st
}

# ---- the dense layers: measured against the cost model, and profiled ------------
#
# For each variant (DENSE_VARIANTS, DENSE_VARIANTS_TIMED): the speed
# (bench_gpu, $tsteps steps after $twarm, NCF_CUDA_PROFILE=0 so that the
# step runs as its graph, with how many timed steps did; the layers it took
# are its dense_layer_K lines), bench_gpu --cost --dense with those layers
# (the cost model at the big data set's shape, batch $tbatch: bytes,
# launches, the samples/s at the measured bandwidth and the model's
# predicted samples/s), then, for DENSE_VARIANTS, a profiled run of $psteps
# steps (NCF_CUDA_PROFILE=1, a run of its own: the profile times each
# launch, so its samples/s are not the variant's).  A speed run that fails
# is run once more with NCF_CUDA_SYNC=1 and one step, which synchronises
# after every launch and names the one that failed.  For the summary:
#   metric train_dense NAME PREC MEASURED PREDICTED AT_BANDWIDTH GB LAUNCHES GRAPH
#   metric dense_layer PREC K CHOICE (the timed variant: what it chose, and the times)
#   metric slow NAME RANK KIND LAUNCH US SHARE MODEL_US BOUND GB/S %BW
#   metric sync NAME PREC FIRST_ERROR_LINE

# sync_rerun NAME PREC ENV: the failing speed run once more, launch by launch.
sync_rerun() {
	s=$work/sync.$1
	echo "--- $1 $2 failed: once more with NCF_CUDA_SYNC=1, one step"
	# shellcheck disable=SC2086
	env $3 NCF_CUDA_SYNC=1 NCF_CUDA_PROFILE=0 "$bench" --precisions "$2" --no-epoch --steps 1 \
		--warmup 0 --batch "$tbatch" "$work/$big.ncfc" >"$s.out" 2>"$s.err"
	rc=$?
	echo "exit $rc"
	head -n 20 "$s.err"
	head -n 5 "$s.out"
	if [ $rc -eq 0 ] && [ -n "$(val "$s.out" "${2}_samples_per_s")" ]; then
		line="it passed: the failure depends on the graph, on timing or on more steps"
	else
		line=$(grep -m1 -E 'error|failed|fault|illegal|misaligned|out of|no usable' "$s.err" "$s.out" |
			sed 's/^[^:]*://')
		[ -n "$line" ] || line=$(cat "$s.err" "$s.out" | head -n 1)
		line=$(echo "$line" | tr '\t' ' ')
	fi
	metric sync "$1" "$2" "${line:-exit $rc, no message}"
}

# layers_of FILE PREC [TEXT]: the dense_layer_K lines that bench_gpu printed
# in FILE for precision PREC: their implementations as --dense takes them
# (a,b,...), or with TEXT, "K<TAB>the whole line" each.
layers_of() {
	awk -F'\t' -v p="$2" -v text="${3:-}" '$1 == "precision" { on = $2 == p; next }
		on && $1 ~ /^dense_layer_[0-9]+$/ {
			if (text) { k = $1; sub(/^dense_layer_/, "", k); print k "\t" $2; next }
			split($2, w, " "); printf "%s%s", n++ ? "," : "", w[1] }' "$1"
}

# dense_variant VARIANT DATA PRECISIONS PROFILE CHOICE: one variant
# (PROFILE 1: also profiled; CHOICE 1: bench_gpu -v, and its layers'
# choice recorded).
dense_variant() {
	name=${1%%:*}
	env=$(variant_env "$1")
	data=$2
	precs=$3
	v=""
	[ "$5" = 1 ] && v=-v
	echo "--- $name: ${env:-(no environment)}"
	pst=0
	s=$work/speed.$name
	# shellcheck disable=SC2086
	env $env NCF_CUDA_PROFILE=0 "$bench" --precisions "$precs" --no-epoch --steps "$tsteps" \
		--warmup "$twarm" --batch "$tbatch" $v "$data" >"$s" 2>"$s.err"
	src=$?
	grep -E '^(dense_layer_[0-9]+|[a-z0-9]+_(samples_per_s|seconds_per_step|memory_bandwidth_fraction|graph_replays|plain_steps|graph_capture_failed))	' "$s"
	grep -E 'dense layer [0-9]|training steps:' "$s.err"
	grep -vE 'dense layer [0-9]|training steps:' "$s.err" | head -n 5
	for prec in $(echo "$precs" | tr , ' '); do
		c=$work/cost.$name.$prec
		layers=$(layers_of "$s" "$prec")
		# shellcheck disable=SC2086
		env $env "$bench" --cost "$big" --precision "$prec" --batch-size "$tbatch" \
			${layers:+--dense "$layers"} >"$c" 2>"$c.err" || { cat "$c.err"; pst=1; }
		grep -E '^(dense_layer_[0-9]+|bytes_per_step|launches_per_step|bandwidth_(GBs|bound_samples_per_s)|predicted_(step_us|samples_per_s))	' "$c"
		sps=$(val "$s" "${prec}_samples_per_s")
		if [ $src -ne 0 ] || [ -z "$sps" ]; then # no figure: the benchmark failed
			pst=1
			sync_rerun "$name" "$prec" "$env"
		fi
		gb=$(awk -F'\t' '$1 == "bytes_per_step" { printf "%.2f", $2 / 1e9 }' "$c" 2>/dev/null)
		rp=$(val "$s" "${prec}_graph_replays")
		graph=${rp:+$rp/$tsteps}
		[ "$(val "$s" "${prec}_graph_capture_failed")" = yes ] && graph="$graph failed"
		metric train_dense "$name" "$prec" "${sps:--}" "$(val "$c" predicted_samples_per_s)" \
			"$(val "$c" bandwidth_bound_samples_per_s)" "${gb:--}" "$(val "$c" launches_per_step)" \
			"${graph:--}"
		if [ "$5" = 1 ]; then
			layers_of "$s" "$prec" text | while IFS='	' read -r k line; do
				metric dense_layer "$prec" "$k" "$line"
			done
			[ -n "$layers" ] || { echo "$name $prec: no dense_layer_K lines from bench_gpu"; pst=1; }
		fi
	done
	[ "$4" = 1 ] || return $pst
	prof=$logs/profile.$name.txt
	# shellcheck disable=SC2086
	env $env NCF_CUDA_PROFILE=1 "$bench" --precisions bf16 --no-epoch --steps "$psteps" \
		--warmup "$twarm" --batch "$tbatch" "$data" >"$work/prof.$name.out" 2>"$prof" || pst=1
	profile_slowest "$name" "$prof"
	grep '^cuda profile:' "$prof" >/dev/null || pst=1
	return $pst
}

# profile_slowest NAME FILE: the five slowest launches of NCF_CUDA_PROFILE's
# table in FILE as metric lines, and on stdout.  The columns are found by
# the names in the table's header ("#", "kind", "launch", "us", "%",
# "model_us", "bound", "GB/s", "%bw"; a column the table lacks is "-").
profile_slowest() {
	awk -v OFS='\t' '$1 != "cuda" || $2 != "profile:" { next }
		$3 == "#" { for (i = 3; i <= NF; i++) col[$i] = i; next }
		$3 ~ /^[0-9]+$/ && col["us"] {
			print $col["us"], f("kind"), f("launch"), f("%"), f("model_us"), f("bound"),
				f("GB/s"), f("%bw") }
		function f(c) { return (c in col) ? $col[c] : "-" }' "$2" |
		sort -t '	' -k1,1 -g -r | head -n 5 | awk -F'\t' -v OFS='\t' -v p="$1" '{
			print "slow", p, NR, $2, $3, $1, $4, $5, $6, $7, $8 }' >"$work/slow.$1"
	cat "$work/slow.$1" >>"$logs/metrics.tsv"
	sed 's/^slow	/slowest	/' "$work/slow.$1"
}

st_dense() {
	precs=bf16
	[ "$mode" = full ] && precs=bf16,tf32
	st=0
	for v in $DENSE_VARIANTS; do
		dense_variant "$v" "$work/$big.ncfc" "$precs" 1 0 || st=1
	done
	for v in $DENSE_VARIANTS_TIMED; do
		choice=0
		[ "${v%%:*}" = timed ] && choice=1
		dense_variant "$v" "$work/$big.ncfc" "$precs" 0 $choice || st=1
	done
	return $st
}

# One epoch of the middle data set per precision: throughput and HR@10 from the log.
st_epochs() {
	st=0
	for p in fp32 tf32 bf16 fp16; do
		"$bin/ncf-train" -q -e 1 -b "$ebatch" --device cuda --precision $p \
			--log "$work/e$p.log" "$work/$mid.ncfc" -o "$work/e$p.ncfm" || st=1
		line=$(grep '"epoch"' "$work/e$p.log" 2>/dev/null | tail -n 1)
		sps=$(echo "$line" | sed -n 's/.*"train_throughput": \([0-9.e+]*\).*/\1/p')
		hr=$(echo "$line" | sed -n 's/.*"hr@10": \([0-9.]*\).*/\1/p')
		echo "$p: ${sps:-?} samples/s, HR@10 ${hr:-?}"
		metric train "$p" "${sps:--}" "1 epoch synthetic $mid, batch $ebatch, HR@10 ${hr:--}"
	done
	return $st
}

# ncf-infer --bench for the precisions and batch sizes given: NVIDIA's
# ml-20m-sized random model (the rehearsal: the epochs stage's tiny model,
# one warm-up pass).
infer_bench() {
	sizes=$1
	iters=$2
	shift 2
	st=0
	model=--random-model
	[ "$rehearse" = 1 ] && [ -f "$work/efp32.ncfm" ] && model="-m $work/efp32.ncfm --warmup 1"
	for p in "$@"; do
		# shellcheck disable=SC2086
		"$bin/ncf-infer" --bench $model --device cuda --precision $p \
			-b "$sizes" --iterations "$iters" >"$work/i$p.tsv" || st=1
		cat "$work/i$p.tsv"
		awk -F'\t' -v p="$p" 'NR > 1 && NF >= 11 {
			printf "infer\t%s\t%s\t%s\t%s\t%s\t%s\n", p, $1, $2, $6, $7, $11 }' \
			"$work/i$p.tsv" >>"$logs/metrics.tsv"
	done
	return $st
}
st_infer() {
	if [ "$mode" = quick ]; then
		infer_bench "$isizes" "$iiters" tf32 bf16 fp16
	else
		infer_bench 1024,4096,16384,65536,262144,1048576 190 tf32 bf16 fp16
	fi
}

# ---- NVIDIA's NCF beside ncf ---------------------------------------------------------
#
# The peer is NVIDIA's PyTorch NCF as published (../shared/peer, the
# bundle's peer/), with the stand-ins for dllogger and apex on PYTHONPATH.
# On a GPU its scripts run unchanged; TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1
# gives its "TF32" run the TF32 products NVIDIA's containers enable by
# default.  In the rehearsal it runs on the CPU: the CPU patch and the
# bf16 script applied to copies (../shared/peer/README.md), through
# peer_run.py.  For the summary:
#   metric peer_train PREC NCF_SPS NVIDIA_SPS NCF_HR NVIDIA_HR
#   metric peer_infer PREC BATCH NVIDIA_SPS NVIDIA_P99_S
#   metric peer_about TEXT

# peer_dir: where the peer is (the bundle's copy, else PEER, else ../shared/peer).
peer_dir() {
	for d in ${PEER:-} "$B/peer" "$root/../shared/peer"; do
		[ -f "$d/nvidia-ncf-pytorch/ncf.py" ] && { (cd "$d" && pwd); return 0; }
	done
	return 1
}

# pyrun ARGS...: the peer's Python with the machine's library path (not the
# bundle's).
pyrun() { env LD_LIBRARY_PATH="$orig_ld" "$py" "$@"; }

# peer_python: PYTHONPATH and the interpreter ready for the peer, or 77 with
# why: torch, numpy, yaml, tqdm, and pandas < 3 (the bundle's wheels where
# the machine's pandas is 3 or newer).  Sets $py, $pp (PYTHONPATH) and $pd.
peer_python() {
	py=${PEER_PYTHON:-python3}
	pd=$(peer_dir) || { echo "no copy of NVIDIA's NCF (the bundle's peer/, PEER=DIR, ../shared/peer)"; return 77; }
	pp=$pd:$pd/shim
	if ! pyrun -c 'import torch, numpy, yaml, tqdm' 2>"$work/peer.import"; then
		echo "no torch for the peer: $py lacks $(tail -n 1 "$work/peer.import" | sed 's/.*No module named //') (PEER_PYTHON=PYTHON names another)"
		return 77
	fi
	if ! pyrun -c 'import pandas, sys; sys.exit(int(pandas.__version__.split(".")[0]) >= 3)' 2>/dev/null; then
		whl=$(ls "$pd"/wheels/*.whl 2>/dev/null)
		if [ -z "$whl" ]; then
			echo "convert.py needs pandas < 3; $py has $(pyrun -c 'import pandas; print("pandas", pandas.__version__)' 2>/dev/null || echo "none"), and the bundle carries no wheels"
			return 77
		fi
		mkdir -p "$work/site"
		# shellcheck disable=SC2086
		pyrun -m pip install -q --no-index --no-deps --no-compile --target "$work/site" $whl ||
			{ echo "cannot install the bundle's pandas wheels for $py"; return 77; }
		pp=$work/site:$pp
	fi
	return 0
}

# peer_py LOG SCRIPT ARGS...: one of the peer's scripts, its output in LOG.
# On the GPU the script itself; in the rehearsal its CPU copy through
# peer_run.py.  The library path is the machine's (not the bundle's); TF32
# products on, as in NVIDIA's containers.
peer_py() {
	log=$1
	shift
	if [ "$rehearse" = 1 ]; then
		env PYTHONPATH="$pp" LD_LIBRARY_PATH="$orig_ld" OMP_NUM_THREADS=2 PYTHONUNBUFFERED=1 \
			"$py" "$pd/peer_run.py" "$@" >"$log" 2>&1
	else
		env PYTHONPATH="$pp" LD_LIBRARY_PATH="$orig_ld" PYTHONUNBUFFERED=1 \
			TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 "$py" "$@" >"$log" 2>&1
	fi
}

# peer_script NAME [amp]: the path of the peer's script NAME.py to run:
# NVIDIA's own on the GPU; in the rehearsal the CPU copy (amp: the bf16 one).
peer_script() {
	if [ "$rehearse" = 1 ]; then
		[ "${2:-}" = amp ] && echo "$work/peer-bf16/$1.py" || echo "$work/peer-cpu/$1.py"
	else
		echo "$pd/nvidia-ncf-pytorch/$1.py"
	fi
}

# NVIDIA's convert.py on the CSV the data stage wrote: started by the main
# loop behind the stages after data (see there), waited for by st_peer.
st_peer_convert() {
	peer_python || return $?
	if [ "$rehearse" = 1 ]; then
		rm -rf "$work/peer-cpu" "$work/peer-bf16"
		cp -R "$pd/nvidia-ncf-pytorch" "$work/peer-cpu" && chmod -R u+w "$work/peer-cpu" &&
			patch -s -d "$work/peer-cpu" -p1 <"$pd/peer-cpu.patch" &&
			cp -R "$work/peer-cpu" "$work/peer-bf16" &&
			sed -i -f "$pd/peer-bf16.sed" "$work/peer-bf16/ncf.py" "$work/peer-bf16/inference.py" ||
			{ echo "cannot make the peer's CPU copies"; return 1; }
	fi
	mkdir -p "$work/peer-data"
	echo "convert.py on $work/peer-csv/ml-20m/ratings.csv"
	peer_py "$work/peer-convert.out" "$(peer_script convert)" \
		--path "$work/peer-csv/ml-20m/ratings.csv" --output "$work/peer-data" --seed 1
	rc=$?
	tail -n 15 "$work/peer-convert.out"
	# its ml-20m reader, or the comparison is with another data set
	if [ "$rc" = 0 ] && grep -q 'Unknown dataset' "$work/peer-convert.out"; then
		echo "convert.py did not read the file as MovieLens-20M (its path must name ml-20m)"
		return 1
	fi
	return $rc
}

# dll FILE KEY: the last value of KEY in the DLLL lines of a peer's log.
dll() {
	sed -n "s/^DLLL .*\"$2\": \\([-0-9.eE+]*\\).*/\\1/p" "$1" 2>/dev/null | tail -n 1
}
# ncf_log FILE KEY: the value of KEY in ncf-train's last epoch line.
ncf_log() {
	grep '"epoch"' "$1" 2>/dev/null | tail -n 1 | sed -n "s/.*\"$2\": \\([-0-9.eE+]*\\).*/\\1/p"
}

st_peer() {
	peer_python || return $?
	pyrun -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
		"gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")' \
		>"$work/peer.about" 2>&1
	cat "$work/peer.about"
	metric peer_about "$(head -n 1 "$work/peer.about")"
	# convert.py started after the data stage: wait for it (within this limit)
	while [ ! -f "$work/peer_convert.rc" ]; do
		if [ ! -f "$work/peer_convert.started" ]; then
			echo "convert.py was not started (the data stage failed?)"
			return 1
		fi
		sleep 1
	done
	if [ "$(cat "$work/peer_convert.rc")" != 0 ]; then
		echo "NVIDIA's convert.py failed (exit $(cat "$work/peer_convert.rc")); its log, peer_convert.log:"
		tail -n 20 "$logs/peer_convert.log"
		return 1
	fi
	st=0
	dev=cuda
	for p in tf32 amp; do
		case $p in
		tf32) nf="--precision tf32" pf="" ;;
		amp) nf="--amp" pf="--amp" ;;
		esac
		# ncf, then NVIDIA's: one epoch at the same batch on the same data
		# shellcheck disable=SC2086
		"$bin/ncf-train" -v -e 1 -b "$pbatch" --device $dev $nf --log "$work/n.$p.log" \
			"$work/$big.ncfc" -o "$work/n.$p.ncfm" 2>"$work/n.$p.err" || { st=1; tail -n 20 "$work/n.$p.err"; }
		grep 'training steps:' "$work/n.$p.err"
		# shellcheck disable=SC2086
		peer_py "$work/p.$p.out" "$(peer_script ncf $p)" \
			--data "$work/peer-data" -e 1 -b "$pbatch" --seed 1 --log_path "$work/p.$p.json" $pf ||
			{ st=1; tail -n 15 "$work/p.$p.out"; }
		n=$(ncf_log "$work/n.$p.log" train_throughput)
		nh=$(ncf_log "$work/n.$p.log" 'hr@10')
		v=$(dll "$work/p.$p.json" train_throughput)
		vh=$(dll "$work/p.$p.json" 'hr@10')
		echo "$p: ncf ${n:-?} samples/s HR@10 ${nh:-?}; NVIDIA ${v:-?} samples/s HR@10 ${vh:-?}"
		metric peer_train "$p" "${n:--}" "${v:--}" "${nh:--}" "${vh:--}"
	done
	for p in tf32 fp16; do
		pf=""
		[ $p = fp16 ] && pf=--fp16
		# shellcheck disable=SC2086
		peer_py "$work/pi.$p.out" "$(peer_script inference)" --batch_sizes "$isizes" \
			--num_batches "$piters" --log_path "$work/pi.$p.json" $pf || { st=1; tail -n 15 "$work/pi.$p.out"; }
		for b in $(echo "$isizes" | tr , ' '); do
			v=$(dll "$work/pi.$p.json" "batch_${b}_mean_throughput")
			l=$(dll "$work/pi.$p.json" "batch_${b}_p99_latency")
			echo "inference.py $p batch $b: ${v:-?} samples/s, p99 ${l:-?} s"
			metric peer_infer "$p" "$b" "${v:--}" "${l:--}"
		done
	done
	return $st
}

st_bench_gpu() {
	"$bench" "$work/$big.ncfc" >"$work/bench.txt"
	rc=$?
	cat "$work/bench.txt"
	for p in fp32 tf32 bf16 fp16; do
		v=$(val "$work/bench.txt" "${p}_samples_per_s")
		[ -n "$v" ] && metric train "$p" "$v" "bench_gpu, synthetic $big, batch $tbatch"
	done
	return $rc
}

# Time to the target on synthetic ml-20m (see the top), bf16.
st_target() {
	oracle=$("$bin/ncf-prep" --info "$work/$big.ncfc" | awk -F'\t' '$1 == "oracle_hr@10" { print $2 }')
	target=${NCF_TARGET_HR:-$(awk -v o="${oracle:-0}" 'BEGIN { printf "%.4f", 0.9562 * o }')}
	echo "target HR@10 $target (oracle $oracle)"
	"$bin/ncf-train" --device cuda --precision bf16 -e "${NCF_TARGET_EPOCHS:-20}" -t "$target" \
		--log "$work/t.log" "$work/$big.ncfc" -o "$work/t.ncfm"
	rc=$?
	cat "$work/t.log"
	# the epochs' training and evaluation times summed (what the log's
	# summary time_to_target also counts: with the waits for checkpoints)
	awk -v t="$target" '
		/"summary": true/ {
			tt = $0; sub(/.*"time_to_target": /, "", tt); sub(/,.*/, "", tt); ttt = tt
			sw = $0; sub(/.*"save_wait": /, "", sw); sub(/,.*/, "", sw); wait = sw
			next
		}
		{
			hr = $0; sub(/.*"hr@10": /, "", hr); sub(/,.*/, "", hr)
			tt = $0; sub(/.*"train_time": /, "", tt); sub(/,.*/, "", tt)
			et = $0; sub(/.*"eval_time": /, "", et); sub(/,.*/, "", et)
			s += tt + et; e++
			if (hr + 0 > best) best = hr + 0
			if (!done && hr + 0 >= t) { done = 1; at = s; ep = e }
		}
		END {
			if (done) printf "target\t%s\t%.1f\t%d\t%.4f\ttime_to_target %s, save_wait %s\n", t, at, ep, best, ttt, wait
			else printf "target\t%s\t-\t%d\t%.4f\ttime_to_target %s, save_wait %s\n", t, e, best, ttt, wait
		}' "$work/t.log" >>"$logs/metrics.tsv"
	return $rc
}

# The GPU tests not run as stages of their own (sass.t reads the module's
# sm_90 code with cuobjdump, and the cost model's notes from bench_gpu).
st_gpu_tests() {
	st=0
	for t in tests/gpu/train.t tests/gpu/resume.t tests/gpu/faults.t tests/gpu/dense.t \
		tests/gpu/sass.t; do
		echo "--- $t"
		NCF_BIN=$bin NCF_ROOT=$root GPU_PARITY=$parity NCF_TEST_TOOLS=$(dirname "$ckpt_diff") \
			NCF_BENCH_GPU=$bench NCF_SASS_OBJECT=$Babs/lib/ncf/ncf-cuda.so sh "$t" >"$work/t.tap" 2>&1
		rc=$?
		cat "$work/t.tap"
		if [ $rc -ne 0 ] || grep -q '^not ok' "$work/t.tap"; then st=1; fi
	done
	return $st
}

# One rank through MPI (and NCCL) gives the bytes of no mpirun; two GPUs
# with NCCL when there are two.
st_mpi() {
	if [ -n "$mpi" ] || ! command -v mpirun >/dev/null 2>&1; then
		echo "no MPI (built with NO_MPI=1, or no mpirun)"
		return 77
	fi
	f="--device cuda --precision fp32 -e 2 -b 65536 -q"
	# shellcheck disable=SC2086
	"$bin/ncf-train" "$work/$small.ncfc" -o "$work/a.ncfm" $f &&
		mpirun --allow-run-as-root -np 1 "$bin/ncf-train" "$work/$small.ncfc" \
			-o "$work/b.ncfm" $f &&
		cmp "$work/a.ncfm.last" "$work/b.ncfm.last" || return 1
	echo "mpirun -np 1: the same MODEL.last, byte for byte"
	n=$(nvidia-smi -L 2>/dev/null | wc -l)
	if [ "$n" -ge 2 ]; then
		# shellcheck disable=SC2086
		mpirun --allow-run-as-root -np 2 "$bin/ncf-train" "$work/$small.ncfc" \
			-o "$work/c.ncfm" $f && "$ckpt_diff" "$work/a.ncfm.last" "$work/c.ncfm.last"
	fi
}

# ---- the summary -----------------------------------------------------------------
#
# summary: the table, from $logs/results.tsv and $logs/metrics.tsv ($mode,
# $budget, $spent, $rehearse and $src for its title).
summary() {
	m=$logs/metrics.tsv
	echo
	what=$mode
	[ "${src:-build}" = bundle ] && what="$what, the bundle"
	[ "${rehearse:-0}" = 1 ] && what="$what, REHEARSAL on the CPU (the emulated module, a pass-through compute-sanitizer; the figures are the CPU's)"
	echo "=== summary: $what, $spent s of $budget"
	[ ! -f "$logs/driver.txt" ] || cat "$logs/driver.txt"
	if grep -q '^device	' "$m"; then
		awk -F'\t' '$1 == "device" { printf "device: %s, %s SMs, L2 %s MiB, %s KiB shared memory per SM, %s MHz; a device-to-device copy: %s GB/s measured (datasheet %s GB/s), the bandwidth the model and the tables use\n",
			$2, $3, $4, $5, $6, $8, $7 }' "$m"
	fi
	printf '%-22s %-24s %s\n' stage status time
	awk -F'\t' '{ printf "%-22s %-24s %s s\n", $1, $2, $3 }' "$logs/results.tsv"
	[ ! -s "$logs/build-failed.txt" ] || echo "build failed: $(cat "$logs/build-failed.txt")"
	echo
	echo "training samples/s:"
	if grep -q '^train	' "$m"; then
		awk -F'\t' '$1 == "train" { printf "  %-6s %14s  %s\n", $2, $3, $4 }' "$m"
	else
		echo "  (not run)"
	fi
	if grep -q '^train_dense	' "$m"; then
		bw=$(awk -F'\t' '$1 == "device" { print $8 " GB/s" }' "$m")
		echo "the dense layers (NCF_CUDA_DENSE), batch ${tbatch:-?}, synthetic ${big:-?}: measured (bench_gpu, ${tsteps:-?} timed steps; graph: how many ran as the CUDA graph)"
		echo "beside the cost model (bench_gpu --cost): predicted, and what moving its bytes at ${bw:-the bandwidth of the model machine} allows:"
		printf '  %-13s %-5s %12s %7s %12s %12s %8s %9s\n' variant prec measured/s graph predicted/s "at bandwidth" GB/step launches
		awk -F'\t' 'function M(v) { return v !~ /^[0-9.e+]+$/ ? (v == "" ? "-" : v) : v >= 1e5 ? sprintf("%.1fM", v / 1e6) : sprintf("%.1fK", v / 1e3) }
			function D(v) { return v == "" ? "-" : v }
			$1 == "train_dense" { printf "  %-13s %-5s %12s %7s %12s %12s %8s %9s\n", $2, $3, M($4), D($9), M($5), M($6),
				D($7), D($8) }' "$m"
		awk -F'\t' '$1 == "sync" { printf "  %s %s failed; once more with NCF_CUDA_SYNC=1 --steps 1: %s\n", $2, $3, $4 }' "$m"
	else
		echo "the dense layers: not run"
	fi
	if grep -q '^dense_layer	' "$m"; then
		echo "the dense layers as a run chooses them (timed: NCF_CUDA_DENSE unset, each layer's implementations timed on the first step, the fastest kept; bench_gpu -v):"
		awk -F'\t' '$1 == "dense_layer" { printf "  %-5s dense_layer_%s  %s\n", $2, $3, $4 }' "$m"
	fi
	if grep -q '^slow	' "$m"; then
		echo "the five slowest launches per variant (NCF_CUDA_PROFILE=1, launch by launch; tables in profile.NAME.txt):"
		printf '  %-8s %1s %-6s %-20s %10s %6s %10s %-7s %8s %5s\n' variant '#' kind launch us share model_us bound GB/s %bw
		awk -F'\t' '$1 == "slow" { printf "  %-8s %1d %-6s %-20s %10.1f %5.1f%% %10s %-7s %8s %5s\n",
			$3 == 1 ? $2 : "", $3, $4, $5, $6, $7, $8, $9, $10, $11 }' "$m"
	fi
	if [ "${rehearse:-0}" = 1 ]; then
		echo "inference (ncf-infer --bench, the epochs stage's tiny model): samples/s and p99 latency"
	else
		echo "inference (ncf-infer --bench, random ml-20m model): samples/s and p99 latency"
	fi
	if grep -q '^infer	' "$m"; then
		printf '  %-6s %8s %16s %12s %16s %12s\n' prec batch device_samples/s p99_s host_samples/s host_p99_s
		awk -F'\t' '$1 == "infer" { printf "  %-6s %8s %16s %12s %16s %12s\n", $2, $3, $4, $5, $6, $7 }' "$m"
	else
		echo "  (not run)"
	fi
	if grep -q '^peer_train	\|^peer_infer	' "$m"; then
		about=$(awk -F'\t' '$1 == "peer_about" { print $2; exit }' "$m")
		echo "ncf beside NVIDIA's NCF (${about:-PyTorch}), the same synthetic ${big:-?}, one epoch at batch ${pbatch:-?}: each program's own train_throughput and HR@10 (ncf --amp: bf16; NVIDIA's --amp: fp16 autocast)"
		printf '  %-6s %14s %14s %11s %10s %12s\n' prec ncf/s NVIDIA/s ncf:NVIDIA "ncf HR@10" "NVIDIA HR@10"
		awk -F'\t' 'function M(v) { return v !~ /^[0-9.e+]+$/ ? "-" : v >= 1e5 ? sprintf("%.2fM", v / 1e6) : sprintf("%.2fK", v / 1e3) }
			function R(a, b) { return (a ~ /^[0-9.e+]+$/ && b ~ /^[0-9.e+]+$/ && b > 0) ? sprintf("%.2fx", a / b) : "-" }
			function H(v) { return v ~ /^[0-9.e+]+$/ ? sprintf("%.4f", v) : "-" }
			$1 == "peer_train" { printf "  %-6s %14s %14s %11s %10s %12s\n", $2 == "amp" ? "--amp" : $2, M($3), M($4),
				R($3, $4), H($5), H($6) }' "$m"
		echo "  inference, random model: ncf-infer --bench (device samples/s) beside NVIDIA's inference.py (fp16: --fp16)"
		printf '  %-6s %8s %14s %14s %11s\n' prec batch ncf/s NVIDIA/s ncf:NVIDIA
		awk -F'\t' 'function M(v) { return v !~ /^[0-9.e+]+$/ ? "-" : v >= 1e5 ? sprintf("%.2fM", v / 1e6) : sprintf("%.2fK", v / 1e3) }
			function R(a, b) { return (a ~ /^[0-9.e+]+$/ && b ~ /^[0-9.e+]+$/ && b > 0) ? sprintf("%.2fx", a / b) : "-" }
			$1 == "infer" { n[$2, $3] = $4 }
			$1 == "peer_infer" { k[++c] = $2 SUBSEP $3; v[c] = $4; p[c] = $2; b[c] = $3 }
			END { for (i = 1; i <= c; i++) printf "  %-6s %8s %14s %14s %11s\n", p[i], b[i],
				M(n[k[i]]), M(v[i]), R(n[k[i]], v[i]) }' "$m"
	elif grep -q '^peer	skipped: by itself' "$logs/results.tsv"; then
		echo "NVIDIA's NCF: $(awk -F'\t' '$1 == "peer" { print $2 }' "$logs/results.tsv") ($(tail -n 1 "$logs/peer.log" 2>/dev/null))"
	else
		echo "NVIDIA's NCF: not run"
	fi
	if grep -q '^parity	' "$m"; then
		awk -F'\t' '$1 == "parity" { printf "parity with NCF_CUDA_DENSE=%s (%s): %s, %s of %s checks\n", $2, $5,
				($3 == $4 && $4 > 0) ? "PASS" : "FAIL", $3, $4 }' "$m"
	else
		echo "parity: not run"
	fi
	if grep -q '^sanitizer	' "$m"; then
		echo "compute-sanitizer (ncf-train on synthetic tiny: 3 steps and the evaluation; parity/smoke: gpu_parity --smoke):"
		awk -F'\t' '$1 == "sanitizer" {
			if (!($2 in seen)) { seen[$2] = 1; tools[++nt] = $2 }
			k = $3 "/" $4
			if (!(k in col)) { col[k] = 1; cols[++nc] = k }
			r = $5
			if (r ~ /^not run: cannot run/) r = "cannot run"
			else if (r ~ /^FAIL/) r = "FAIL"
			cell[$2, k] = r
		}
		END {
			printf "  %-10s", "tool"
			for (j = 1; j <= nc; j++) printf j < nc ? " %-11s" : " %s\n", cols[j]
			for (i = 1; i <= nt; i++) {
				printf "  %-10s", tools[i]
				for (j = 1; j <= nc; j++)
					printf j < nc ? " %-11s" : " %s\n",
						((tools[i], cols[j]) in cell) ? cell[tools[i], cols[j]] : "-"
			}
		}' "$m"
		# the first 6 findings (the table stays short enough for the end of
		# the output the device tool returns); the rest in sanitizer.log
		awk -F'\t' '$1 == "sanitizer" && $5 ~ /^(FAIL|not run: cannot)/ {
				if (++n <= 6) printf "  %s %s %s: %.160s\n", $2, $3, $4, $5 }
			END { if (n > 6) printf "  (%d more in sanitizer.log)\n", n - 6 }' "$m"
	else
		echo "compute-sanitizer: not run"
	fi
	if grep -q '^target	' "$m"; then
		awk -F'\t' '$1 == "target" {
			if ($3 == "-") printf "time to HR@10 %s on synthetic ml-20m (bf16): not reached in %s epochs (best %s)\n", $2, $4, $5
			else printf "time to HR@10 %s on synthetic ml-20m (bf16): %s s of training and evaluation, epoch %s (best %s; %s)\n", $2, $3, $4, $5, $6 }' "$m"
	elif [ "$mode" = full ]; then
		echo "time to the target on synthetic ml-20m: not run"
	fi
	skipped=$(awk -F'\t' '$2 ~ /^skipped/ { printf "%s%s (%s)", n++ ? ", " : "", $1, substr($2, 10) }' "$logs/results.tsv")
	echo "skipped: ${skipped:-nothing}"
}

# set_sizes: the data sets, batches and counts of the stages (the
# rehearsal's are tiny).
set_sizes() {
	if [ "$rehearse" = 1 ]; then
		small=tiny mid=tiny big=tiny
		tbatch=2048 tsteps=2 twarm=1 psteps=1 ebatch=2048
		isizes=1024 iiters=3 pbatch=1024 piters=12 copy_bytes=$((16 << 20))
	else
		small=ml-latest-small mid=ml-1m big=ml-20m
		tbatch=1048576 tsteps=20 twarm=3 psteps=5 ebatch=65536
		isizes=1024,1048576 iiters=100 pbatch=1048576 piters=30 copy_bytes=$((256 << 20))
	fi
}

# (internal) --run-stage FUNCTION [ARGS...]: one of the functions above, in
# a process of its own.
if [ "${1:-}" = "--run-stage" ]; then
	shift
	: "${rehearse:=0}" "${src:=build}" "${B:=build}" "${mode:=quick}"
	set_sizes
	"$@"
	exit $?
fi

# ---- options -----------------------------------------------------------------

mode=full
dry=0
build=1
src=build
rehearse=0
for a in "$@"; do
	case $a in
	--quick) mode=quick ;;
	--dry-run) dry=1 ;;
	--no-build) build=0 ;;
	--bundle) src=bundle build=0 ;;
	--rehearse) rehearse=1 build=0 ;;
	--fetch-deps) fetch_deps ;;
	-h | --help)
		sed -n '2,/^set -u/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "gpu-check: unknown option '$a' (--quick, --bundle, --rehearse, --dry-run, --no-build, --fetch-deps)" >&2
		exit 2
		;;
	esac
done
# the programs: the bundle's (NCF_GPU_BUNDLE names another than .gpu-run),
# or the build's; Babs, the same from anywhere
B=build
[ $src = bundle ] && B=${NCF_GPU_BUNDLE:-.gpu-run}
case $B in /*) Babs=$B ;; *) Babs=$root/$B ;; esac
bundle_note=""
if [ $src = bundle ]; then
	if [ -f "$B/MANIFEST" ]; then
		bundle_note="bundle $B: commit $(manifest commit), $(manifest gpu_arch), $(manifest x86_64_level)"
	elif [ $dry = 0 ]; then
		echo "gpu-check: --bundle: no $B/MANIFEST: run make gpu-bundle on a build machine and carry $B with the tree" >&2
		exit 2
	fi
fi
base=300
[ $mode = full ] && base=480
[ $build = 1 ] && base=$((base + 60))
budget=${NCF_GPU_CHECK_BUDGET:-$base}
case $budget in
'' | *[!0-9]*)
	echo "gpu-check: NCF_GPU_CHECK_BUDGET: '$budget' is not a number of seconds" >&2
	exit 2
	;;
esac
jobs=${JOBS:-$(nproc)}
set_sizes

# ---- the plan ------------------------------------------------------------------
#
# One line per stage: NAME LIMIT KIND FUNCTION WHAT.  KIND gpu: skipped
# without a usable GPU; cpu: runs anyway.  The driver check comes first,
# and when it fails the run ends there.

plan() {
	d="nvidia-smi: the driver against CUDA's minimum, GPU_ARCH"
	[ $rehearse = 1 ] && d="rehearsal: no driver checked"
	[ $src = bundle ] && d="$d; the bundle: sums, unpacked, glibc, libraries"
	echo "driver 18 cpu - $d"
	if [ $build = 1 ]; then
		b="make -j\$(nproc) cuda GPU_ARCH=<the GPU's>"
		[ $mode = full ] && b="$b, ckpt_diff"
		echo "build 60 cpu st_build $b"
	fi
	v=$(for x in $DENSE_VARIANTS; do printf '%s, ' "${x%%:*}"; done | sed 's/, $//')
	vt=$(for x in $DENSE_VARIANTS $DENSE_VARIANTS_TIMED; do printf '%s, ' "${x%%:*}"; done | sed 's/, $//')
	cat <<EOF
device 10 gpu st_device bench_gpu --device: SMs, L2, smem, clock; a copy timed -> NCF_CUDA_BANDWIDTH
EOF
	if [ $mode = quick ]; then
		cat <<EOF
data 17 gpu st_data ncf-prep --synthetic tiny, $mid, $big, $big CSV (at once); then convert.py behind
sanitizer 55 gpu st_sanitizer 4 tools x dense $v x bf16, fp32 (3 steps + scoring), memcheck gpu_parity --smoke
parity 30 gpu st_parity gpu_parity $mid, dense $v (all but the first --smoke; at once)
dense 55 gpu st_dense dense $vt: bf16 at $tbatch on $big, graph counted, predicted; $v profiled
epochs 15 gpu st_epochs one epoch of $mid per precision
inference 15 gpu st_infer ncf-infer --bench at $isizes, tf32 bf16 fp16
peer 85 gpu st_peer NVIDIA's ncf.py -e 1 (TF32, --amp) beside ncf-train; inference.py
EOF
	else
		cat <<EOF
data 17 gpu st_data ncf-prep --synthetic tiny, $small, $mid, $big, $big CSV (at once); then convert.py behind
sanitizer 55 gpu st_sanitizer 4 tools x dense $v x bf16, fp32 (3 steps + scoring), memcheck gpu_parity --smoke
parity 40 gpu st_parity gpu_parity $mid, dense $v (at once)
dense 60 gpu st_dense dense $vt: bf16, tf32 at $tbatch on $big, graph counted, predicted; $v profiled
epochs 15 gpu st_epochs one epoch of $mid per precision
inference 20 gpu st_infer ncf-infer --bench, NVIDIA's 6 batch sizes, tf32 bf16 fp16
peer 85 gpu st_peer NVIDIA's ncf.py -e 1 (TF32, --amp) beside ncf-train; inference.py
bench_gpu 35 gpu st_bench_gpu bench_gpu $big, every precision, a whole epoch each
target 40 gpu st_target time to HR@10 0.9562 x oracle on $big, bf16
gpu_tests 70 gpu st_gpu_tests tests/gpu: train.t resume.t faults.t dense.t sass.t
mpi 15 gpu st_mpi mpirun -np 1 (and 2 GPUs with NCCL where there are two)
EOF
	fi
}

# limit_of NAME DEFAULT: the stage's limit, NCF_GPU_CHECK_LIMITS's if it names one.
limit_of() {
	v=$(printf ',%s,' "${NCF_GPU_CHECK_LIMITS:-}" | sed -n "s/.*,$1=\([0-9][0-9]*\),.*/\1/p")
	echo "${v:-$2}"
}

# the rehearsal's limits and budget: three times the plan's (the emulation
# is slow, and the machine it runs on is often shared)
slow=1
[ $rehearse = 1 ] && slow=3 && budget=$((budget * 3))
planned=$(plan | while read -r name limit rest; do
	echo "$name $(($(limit_of "$name" "$limit") * slow)) $rest"
done)
for o in $(echo "${NCF_GPU_CHECK_LIMITS:-}" | tr , ' '); do
	n=${o%%=*}
	case $o in
	*=*[!0-9]* | *= | =*) ;;
	*=*) echo "$planned" | grep -q "^$n " && continue ;;
	esac
	echo "gpu-check: NCF_GPU_CHECK_LIMITS: '$o' is not NAME=SECONDS for a stage of the $mode plan" >&2
	exit 2
done
total=$(echo "$planned" | awk '{ s += $2 } END { print s }')

if [ $dry = 1 ]; then
	echo "gpu-check: $mode, budget $budget s, dry run"
	case $src$rehearse in
	bundle1) n=${bundle_note#bundle "$B": }
		echo "  programs: the bundle $B${n:+ ($n)}, the emulated module standing in for the GPU (rehearsal)" ;;
	bundle0) n=${bundle_note#bundle "$B": }
		echo "  programs: the bundle $B (${n:-missing: make gpu-bundle makes it}); nothing built" ;;
	build1) echo "  programs: build/ as it is, the emulated module standing in for the GPU (rehearsal)" ;;
	*) [ $build = 1 ] && echo "  programs: build/, built by the build stage" ||
		echo "  programs: build/ as it is (--no-build)" ;;
	esac
	echo "  stage       limit  on   runs"
	echo "$planned" | while read -r name limit kind fn what; do
		printf '  %-10s %4s s  %-3s  %s\n' "$name" "$limit" "$kind" "$what"
	done
	printf '  %-10s %4s s  of a budget of %s s\n' total "$total" "$budget"
	echo "  the sanitizer runs before any stage that times ncf; a variant whose speed run fails runs once more with NCF_CUDA_SYNC=1 --steps 1"
fi
if [ "$total" -gt "$budget" ]; then
	echo "gpu-check: the $mode plan's limits add up to $total s, over the budget of $budget s (NCF_GPU_CHECK_BUDGET, NCF_GPU_CHECK_LIMITS)" >&2
	exit 2
fi
[ $dry = 1 ] && exit 0

# ---- the run -------------------------------------------------------------------

t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-work.XXXXXX") || exit 1
# the logs: with $OUT, in $work (what comes back is sync_out's four files)
outd=""
if [ -n "${OUT:-}" ]; then
	outd=$OUT/gpu-check
	logs=$work/logs
else
	logs=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 1
fi
mkdir -p "$logs" ${outd:+"$outd"} || exit 1

# sync_out: $OUT/gpu-check made to hold the run as it stands (see the top):
# each file written beside its name, then renamed, so that a call cut short
# finds the last whole one.
sync_out() {
	[ -n "$outd" ] && [ -d "$logs" ] || return 0
	[ -n "${final:-}" ] || spent=$(elapsed)
	summary >"$outd/summary.txt.part" 2>/dev/null && mv "$outd/summary.txt.part" "$outd/summary.txt"
	for f in results.tsv metrics.tsv; do
		[ ! -f "$logs/$f" ] || cp "$logs/$f" "$outd/$f"
	done
	{ tar -czf "$outd/logs.tar.gz.part" -C "$logs" . 2>/dev/null ||
		(cd "$logs" && python3 -c 'import sys, tarfile
with tarfile.open(sys.argv[1], "w:gz") as t: t.add(".")' "$outd/logs.tar.gz.part"); } &&
		mv "$outd/logs.tar.gz.part" "$outd/logs.tar.gz"
	rm -f "$outd"/*.part
	return 0
}

# at the end: $OUT/gpu-check as the run left it; convert.py stopped if it
# still runs (its timeout passes the signal on to it); a bundle rehearsed
# here left as small as it travels
trap '[ ! -f "$work/dmon.pid" ] || kill "$(cat "$work/dmon.pid")" 2>/dev/null
	sync_out; [ ! -f "$work/peer_convert.pid" ] || kill "$(cat "$work/peer_convert.pid")" 2>/dev/null
	rm -rf "$work"; [ "$src$rehearse" != bundle1 ] || sh scripts/gpu-bundle.sh --clean "$B"' EXIT
: >"$logs/results.tsv"
: >"$logs/metrics.tsv"
rm -f "$logs/build-failed.txt"
mpi=""
command -v mpicc >/dev/null 2>&1 || mpi="NO_MPI=1"
[ $src = bundle ] && mpi="NO_MPI=1"
have_timeout=0
command -v timeout >/dev/null 2>&1 && have_timeout=1
gpu_arch=""
# NCF_GPU_CHECK_ASSUME_GPU=1: run the GPU stages even without a usable GPU
# (they fail then): for testing this script itself (tests/cli/gpu-check.t).
assume_gpu=${NCF_GPU_CHECK_ASSUME_GPU:-0}
# the programs and the environment they run in
bin=$Babs/bin
bench=$Babs/bench/bench_gpu
parity=$Babs/tests/gpu/gpu_parity
ckpt_diff=$Babs/tests/tools/ckpt_diff
gpu_tests=$Babs/tests/gpu
orig_ld=${LD_LIBRARY_PATH:-}
if [ $src = bundle ]; then
	LD_LIBRARY_PATH=$Babs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
fi
if [ $rehearse = 1 ]; then
	NCF_CUDA_MODULE=$root/build/lib/ncf/ncf-cuda-emu.so
	parity=$root/build/tests/gpu_parity_emu
	# the pass-through compute-sanitizer, and fewer of its runs
	PATH=$root/scripts/rehearse:$PATH
	NCF_SANITIZER_TOOLS=${NCF_SANITIZER_TOOLS:-memcheck racecheck}
	# the dense layers plain wherever a stage does not name them: the
	# emulation of the fused layers' tensor-core instructions is the
	# slowest part of the stand-in (ten times plain's), the dense stage
	# runs every implementation, and make check's emulation tests run the
	# fused layers against the CPU
	NCF_CUDA_DENSE=${NCF_CUDA_DENSE:-plain}
	NCF_SANITIZER_DENSE=${NCF_SANITIZER_DENSE:-plain}
	NCF_SANITIZER_PRECS=${NCF_SANITIZER_PRECS:-bf16}
	NCF_SANITIZER_PARITY=${NCF_SANITIZER_PARITY:-0}
	OMP_WAIT_POLICY=passive
	export NCF_CUDA_MODULE PATH NCF_CUDA_DENSE NCF_SANITIZER_TOOLS NCF_SANITIZER_DENSE NCF_SANITIZER_PRECS \
		NCF_SANITIZER_PARITY OMP_WAIT_POLICY
	for f in "$NCF_CUDA_MODULE" "$parity"; do
		[ -f "$f" ] || { echo "gpu-check: --rehearse needs $f (make)" >&2; exit 2; }
	done
fi
export logs work mpi mode root jobs rehearse src B bin bench parity ckpt_diff gpu_tests orig_ld \
	bundle_note

record() { # record NAME STATUS SECONDS
	printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$logs/results.tsv"
	sync_out
}

# killed SIGNAL: the stage that runs stopped (its timeout passes the signal
# on to everything the stage started) and recorded, the table printed: the
# device tool's limit cuts a call short this way.
stage_pid="" stage_name="" stage_s0=""
killed() {
	trap - TERM INT HUP
	if [ -n "$stage_pid" ]; then
		kill -TERM "$stage_pid" 2>/dev/null
		wait "$stage_pid" 2>/dev/null
		record "$stage_name" "FAIL (killed: SIG$1)" $(($(date +%s) - stage_s0))
	fi
	echo "gpu-check: stopped by SIG$1 at $(elapsed) s"
	spent=$(elapsed) final=1
	summary
	exit 143
}
trap 'killed TERM' TERM
trap 'killed INT' INT
trap 'killed HUP' HUP

# stage NAME LIMIT FUNCTION: run FUNCTION as stage NAME within LIMIT seconds
# (or what is left of the budget), its output in $logs/NAME.log and its
# last lines here.
stage() {
	name=$1
	limit=$2
	fn=$3
	left=$((budget - $(elapsed)))
	floor=$((limit < 15 ? limit : 15))
	if [ $left -lt $floor ]; then
		echo "=== $name: skipped: out of time ($left s left)"
		record "$name" "skipped: out of time" 0
		return 0
	fi
	[ "$limit" -gt $left ] && limit=$left
	echo
	echo "=== $name (limit $limit s, at $(elapsed) s)"
	s0=$(date +%s)
	# in the background, waited for: a signal to this script is handled at
	# once (killed), not after the stage
	if [ $have_timeout = 1 ]; then
		# TERM at the limit less 3 s, KILL 3 s later: done within the limit
		timeout -k 3 $((limit > 6 ? limit - 3 : limit)) sh "$self" --run-stage "$fn" \
			>"$logs/$name.log" 2>&1 </dev/null &
	else
		sh "$self" --run-stage "$fn" >"$logs/$name.log" 2>&1 </dev/null &
	fi
	stage_pid=$! stage_name=$name stage_s0=$s0
	wait "$stage_pid"
	rc=$?
	stage_pid=""
	secs=$(($(date +%s) - s0))
	tail -n "${GPU_CHECK_TAIL:-12}" "$logs/$name.log"
	case $rc in
	0) st=PASS ;;
	77) st="skipped: by itself" ;;
	124 | 137) st="FAIL (time limit)" ;;
	*) st="FAIL (exit $rc)" ;;
	esac
	echo "=== $name: $st in $secs s"
	record "$name" "$st" "$secs"
}

# peer_convert_start: NVIDIA's convert.py behind the stages that follow the
# data stage, within what is left of the budget; st_peer waits for it.
peer_convert_start() {
	echo "$planned" | grep -q '^peer ' || return 0
	left=$((budget - $(elapsed) - 5))
	[ $left -gt 15 ] || return 0
	: >"$work/peer_convert.started"
	(
		if [ $have_timeout = 1 ]; then
			timeout -k 3 "$left" sh "$self" --run-stage st_peer_convert >"$logs/peer_convert.log" 2>&1 </dev/null &
		else
			sh "$self" --run-stage st_peer_convert >"$logs/peer_convert.log" 2>&1 </dev/null &
		fi
		echo $! >"$work/peer_convert.pid"
		wait $!
		echo $? >"$work/peer_convert.rc"
	) &
	echo "=== peer_convert: NVIDIA's convert.py started behind the next stages (log: peer_convert.log)"
}

echo "gpu-check: $mode, budget $budget s${bundle_note:+, $bundle_note}"
uname -a
echo "cores: $jobs"
# the driver check: one line on stderr and exit 3 when it fails
dl=$(echo "$planned" | awk '$1 == "driver" { print $2 }')
if [ $have_timeout = 1 ]; then
	timeout -k 2 "$dl" sh "$self" --run-stage driver_check </dev/null
else
	sh "$self" --run-stage driver_check </dev/null
fi
case $? in
0) ;;
124 | 137)
	step=$(cat "$work/driver.step" 2>/dev/null)
	echo "gpu-check: the driver check did not end in $dl s: it was ${step:-starting}" >&2
	echo "driver: did not end in $dl s: it was ${step:-starting}" >"$logs/driver.txt"
	exit 3
	;;
*) exit 3 ;;
esac
gpu_arch=$(cat "$work/gpu_arch")
export gpu_arch bundle_note
if [ -s "$work/cuda_ld" ]; then # the driver check found CUDA's libraries elsewhere
	LD_LIBRARY_PATH=$(cat "$work/cuda_ld"):$LD_LIBRARY_PATH
	export LD_LIBRARY_PATH
fi
# the GPU's whole state for the record, while the next stages run
if [ $have_timeout = 1 ] && [ $rehearse = 0 ]; then
	timeout -k 2 10 nvidia-smi -q >"$logs/nvidia-smi.txt" 2>&1 </dev/null &
	# the GPU's power, clocks and load once a second for the whole run (what
	# the timed stages ran at); a client of the driver kept open all the
	# while, too, where no persistence daemon keeps the GPU up between the
	# stages' processes
	timeout -k 2 $((budget + 30)) nvidia-smi dmon -d 1 -s puc -o T >"$logs/dmon.txt" 2>&1 </dev/null &
	echo $! >"$work/dmon.pid"
fi
if [ $src = build ] && ls .deps/*.deb >/dev/null 2>&1; then
	deps_env
	[ $build = 1 ] || [ -d .deps/root ] || deps_unpack
fi
record driver PASS "$(elapsed)"
[ $build = 1 ] || record build "skipped: $([ $src = bundle ] && echo "--bundle" || ([ $rehearse = 1 ] && echo "--rehearse" || echo "--no-build"))" 0

have_gpu=""
echo "$planned" | grep -v '^driver ' >"$work/plan"
while read -r name limit kind fn what; do
	if [ "$kind" = gpu ] && [ -z "$have_gpu" ]; then
		have_gpu=0
		if grep -q '^build	FAIL' "$logs/results.tsv"; then
			echo "gpu-check: build failed: the GPU stages cannot run (its last lines above; build.log)"
			have_gpu=build
		elif [ -x "$bin/ncf-train" ] && "$bin/ncf-train" -vV 2>&1 | grep -q '^gpu	[0-9]'; then
			have_gpu=1
		elif [ "$assume_gpu" = 1 ]; then
			echo "gpu-check: NCF_GPU_CHECK_ASSUME_GPU=1: the GPU stages run without a usable GPU"
			have_gpu=1
		else
			why=$([ -x "$bin/ncf-train" ] && "$bin/ncf-train" -vV 2>&1 | sed -n 's/^gpu	no usable GPU: //p')
			echo "gpu-check: no usable GPU here${why:+: $why}$([ -x "$bin/ncf-train" ] || echo " (no $B/bin/ncf-train)")"
		fi
	fi
	if [ "$kind" = gpu ] && [ "$have_gpu" = build ]; then
		echo "=== $name: skipped: build failed"
		record "$name" "skipped: build failed" 0
		continue
	fi
	if [ "$kind" = gpu ] && [ "$have_gpu" = 0 ]; then
		echo "=== $name: skipped: no GPU"
		record "$name" "skipped: no GPU" 0
		continue
	fi
	stage "$name" "$limit" "$fn"
	case $name in
	device)
		if [ -s "$work/bandwidth" ]; then
			NCF_CUDA_BANDWIDTH=$(cat "$work/bandwidth")
			export NCF_CUDA_BANDWIDTH
			echo "gpu-check: NCF_CUDA_BANDWIDTH=$NCF_CUDA_BANDWIDTH (GB/s) for the stages after this one"
		fi
		;;
	data) grep -q '^data	PASS' "$logs/results.tsv" && peer_convert_start ;;
	esac
done <"$work/plan"

spent=$(elapsed) final=1
export budget spent tbatch tsteps big pbatch
summary
sync_out
if [ -n "$outd" ]; then
	echo "results: $outd: summary.txt (this table), results.tsv, metrics.tsv, logs.tar.gz (every log)"
else
	echo "logs: $logs"
fi

if grep -q '	FAIL\|	skipped: out of time\|	skipped: build failed' "$logs/results.tsv"; then
	exit 1
fi
[ "$have_gpu" = 1 ] || exit 3
exit 0
