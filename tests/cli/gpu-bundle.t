#!/bin/sh
# gpu-bundle.t - scripts/gpu-bundle.sh, which make gpu-bundle runs on its
# portable build (build/bundle), here on the default build, whose programs
# and libraries it gathers the same way (oneDNN's and MPI's come along, so
# the size limit is raised, and only libzstd is packed, BUNDLE_PACK, to
# keep the test quick): the bundle mirrors build/ (bin/, bench/bench_gpu,
# tests/gpu/gpu_parity, lib/ncf/ncf-cuda.so) with every library that is not
# glibc, the GCC runtime or CUDA's in lib/, NVIDIA's NCF in peer/, a
# MANIFEST and SHA256SUMS that hold; its ldd check finds every library in
# it and its tools train on the CPU with only its lib/ on LD_LIBRARY_PATH,
# mapping its libraries; --check unpacks, checks and packs again;
# without xz, Python's lzma unpacks; --check-libs makes programs that
# lost their modes executable again; a
# library taken away is named by --check-libs; a bundle over its limit is
# refused and nothing is left under its name.  Not under the sanitizers
# (the programs it gathers are build/'s).
. "$(dirname "$0")/../lib.sh"
[ -z "${NCF_SANITIZER:-}" ] || skip_all "the bundle gathers build/'s programs, not the sanitizers'"
[ -f "$NCF_ROOT/build/lib/ncf/ncf-cuda.so" ] && [ -x "$NCF_ROOT/build/tests/gpu/gpu_parity" ] ||
	skip_all "no cuda module built (no CUDA toolkit)"
script=$NCF_ROOT/scripts/gpu-bundle.sh
peer=$(cd "$NCF_ROOT/../shared/peer" 2>/dev/null && pwd)
[ -f "$peer/nvidia-ncf-pytorch/ncf.py" ] || peer=""
cd "$T" || bail "no $T"
export BUNDLE_PACK=libzstd.so.1
export BUNDLE_FLAGS="-O3 -march=x86-64-v3 -gencode arch=compute_90,code=sm_90"

BUNDLE_MIB=400 run sh "$script" "$NCF_ROOT/build" b $peer
is "$status" 0 "gpu-bundle.sh BUILD OUT PEER: exit 0"
[ "$status" = 0 ] || sed 's/^/# /' "$err" "$out" | tail -n 20
for f in bin/ncf-prep bin/ncf-train bin/ncf-eval bin/ncf-infer bench/bench_gpu tests/gpu/gpu_parity \
	lib/ncf/ncf-cuda.so lib/libjansson.so.4 lib/libopenblas.so.0 lib/libzstd.so.1.xz; do
	[ -f "b/$f" ] || echo "missing: $f"
done >missing
is "$(cat missing)" "" "the programs, the module, the libraries (libzstd packed)"
[ ! -e b/lib/libzstd.so.1 ] && [ ! -e b.new ]
ok $? "... the packed file only as .xz, and no b.new left"
if [ -n "$peer" ]; then
	[ -f b/peer/nvidia-ncf-pytorch/ncf.py ] && [ -f b/peer/dllogger.py ]
	ok $? "NVIDIA's NCF and its stand-ins in peer/"
else
	skip "no ../shared/peer here"
fi
(cd b && sha256sum -c --quiet SHA256SUMS)
ok $? "SHA256SUMS holds"
for k in commit cuda gpu_arch x86_64_level glibc_needed libraries packed size; do
	grep -q "^$k	." b/MANIFEST || echo "$k"
done >nokey
is "$(cat nokey)" "" "the MANIFEST has commit, cuda, gpu_arch, x86_64_level, glibc_needed, libraries, packed, size"
like b/MANIFEST '^gpu_arch	sm_90$' "... the GPU architectures from the -gencode flags"
like b/MANIFEST '^x86_64_level	x86-64-v3$' "... the x86-64 level from the flags"
like "$out" '^ok   bin/ncf-train: in the bundle: .*lib/libzstd.so.1' \
	"the ldd check: ncf-train's libraries in the bundle"
like "$out" '^ok   lib/ncf/ncf-cuda.so: in the bundle: .*system: .*libcublas' "... the module's CUDA libraries are the machine's"
unlike "$out" '^FAIL' "... no library found elsewhere"
like "$out" "^ok   a CPU training by the bundle's tools .*mapping from the bundle: .*libzstd.so.1" \
	"the bundle's tools train on the CPU with its own libraries"

run sh "$script" --check b
is "$status" 0 "--check: exit 0"
[ -f b/lib/libzstd.so.1.xz ] && [ ! -e b/lib/libzstd.so.1 ]
ok $? "... and the bundle is packed again after it"

# a machine without xz: Python's lzma unpacks
mkdir -p noxz && printf '#!/bin/sh\nexit 127\n' >noxz/xz && chmod +x noxz/xz
if python3 -c 'import lzma' 2>/dev/null; then
	PATH=$T/noxz:$PATH run sh "$script" --check-libs b
	is "$status" 0 "--check-libs without xz: exit 0"
	xz -dc b/lib/libzstd.so.1.xz | cmp -s - b/lib/libzstd.so.1
	ok $? "... python3's lzma unpacked libzstd.so.1"
	sh "$script" --clean b
else
	skip "python3 has no lzma"
	skip "python3 has no lzma"
fi

# a copy that lost the programs' modes (what carries the tree to the GPU
# machine may): --check-libs, which gpu-check.sh --bundle runs there first,
# makes them executable again
chmod a-x b/bin/ncf-train b/tests/gpu/gpu_parity
run sh "$script" --check-libs b
is "$status" 0 "--check-libs on a copy without the programs' modes: exit 0"
[ -x b/bin/ncf-train ] && [ -x b/tests/gpu/gpu_parity ]
ok $? "... and they are executable again"
sh "$script" --clean b

rm b/lib/libjansson.so.4
run sh "$script" --check-libs b
is "$status" 1 "a library taken away: --check-libs exits 1"
like "$out" '^FAIL bin/ncf-train: not in the bundle: libjansson.so.4 \(' "... naming the program and the library"

BUNDLE_MIB=1 run sh "$script" "$NCF_ROOT/build" small
is "$status" 1 "a bundle over its limit: exit 1"
like "$err" '^gpu-bundle: small would be [0-9]+ bytes, over 1 MiB \(BUNDLE_MIB\)' "... saying so"
[ ! -e small ] && [ ! -e small.new ]
ok $? "... and leaving nothing under its name"
done_testing
