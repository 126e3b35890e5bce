#!/bin/sh
# gpu-bundle.sh - gather and check the GPU bundle (make gpu-bundle): what
# scripts/gpu-check.sh --bundle runs on a GPU machine that has a driver and
# CUDA's own libraries but none of the -dev packages the build needs and no
# network, so that the machine's few minutes go to the GPU, not to a build.
#
#   sh scripts/gpu-bundle.sh BUILD OUT [PEER]   gather BUILD (make's
#        build/bundle) and PEER (NVIDIA's NCF, ../shared/peer) into OUT
#        (.gpu-run), then check it as below
#   sh scripts/gpu-bundle.sh --check OUT        unpack OUT's compressed files,
#        check it (the loader part, then a CPU training by its tools), and
#        remove the unpacked copies again (OUT stays the size that travels)
#   sh scripts/gpu-bundle.sh --check-libs OUT   unpack (and make the
#        programs executable, should the copy have lost their modes), then
#        the loader part only (what gpu-check.sh --bundle runs on the GPU
#        machine before anything else, after checking the sums)
#   sh scripts/gpu-bundle.sh --clean OUT        remove the unpacked copies
#
# OUT mirrors build/: bin/ (the four tools), bench/bench_gpu, tests/gpu/
# (gpu_parity), tests/tools/ckpt_diff, lib/ncf/ncf-cuda.so (the cuda module,
# found beside the tools as in build/), lib/ (every shared library those
# need that is not glibc, the GCC runtime, nor CUDA's own: zstd, libcsv,
# jansson, OpenBLAS with libgfortran and libquadmath, protobuf-c, OpenMP's
# libgomp), peer/ (the copy of NVIDIA's NCF with its stand-ins, and in
# peer/wheels/ the wheels of BUNDLE_WHEELS, a folder: pandas < 3 for its
# convert.py), MANIFEST (key<TAB>value: the commit, the flags, the x86-64
# level, CUDA's version, the GPU architectures, the newest glibc symbol
# needed, the libraries) and SHA256SUMS.  The programs keep their symbols
# (the cuda module calls the library in the program that opened it) and
# lose their debug information.  The libraries and the module over 1 MiB
# are kept as NAME.xz (OpenBLAS's 35 MiB of kernels for every CPU become
# 4 MiB, the module's cubins 11 MiB -> 1 MiB): gpu-check.sh --bundle
# unpacks them, after checking the sums, with xz or Python's lzma.  The
# bundle is refused when it is over BUNDLE_MIB MiB (default 48: it travels
# with the working tree, 64 MiB in all).  Nothing is left under OUT's name
# unless every step passed (it is made in OUT.new).
#
# The check (of the files unpacked): with OUT/lib first on LD_LIBRARY_PATH
# (alone when the bundle is made; --check-libs keeps the caller's after
# it, where CUDA's libraries may be), ldd of every program and library in
# OUT resolves each library it needs inside OUT/lib, or to
# glibc, the GCC runtime or CUDA's libraries (system); one line per file,
# the first that resolves elsewhere or not at all is an error.  Then (not
# with --check-libs) the bundle's tools, run that way, make a synthetic
# cache, train two epochs on the CPU, evaluate and score it, and the
# libraries the loader opened for the training (LD_DEBUG=libs) are the
# bundle's.  Exit status 0, 1 when a check failed, 2 a bad command line.
set -u

# system NAME PATH: is this library the machine's own (glibc, the GCC
# runtime, CUDA's)?  Everything else goes into the bundle.
system() {
	case $1 in
	linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | \
		librt.so.* | libresolv.so.* | libutil.so.* | libmvec.so.*) return 0 ;;
	libgcc_s.so.* | libstdc++.so.*) return 0 ;;
	libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | libnvrtc*.so.* | \
		libnvJitLink.so.* | libnccl.so.*) return 0 ;;
	esac
	return 1
}

# elves DIR: the ELF files of a bundle, relative to it.
elves() {
	(cd "$1" && for f in bin/* bench/* tests/gpu/* tests/tools/* lib/ncf/*.so lib/*.so*; do
		[ -f "$f" ] && [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = 177ELF ] && echo "$f"
	done)
}

# deps FILE: "NAME<TAB>PATH" for every library ldd resolves for FILE, PATH
# without its links and dot-dots ("not found" when it does not resolve).
deps() {
	ldd "$1" 2>/dev/null | awk '
		$2 == "=>" && $3 == "not" { printf "%s\tnot found\n", $1; next }
		$2 == "=>" { printf "%s\t%s\n", $1, $3; next }
		$1 ~ /^\// { n = $1; sub(/.*\//, "", n); printf "%s\t%s\n", n, $1 }' |
		while IFS='	' read -r name path; do
			[ "$path" = "not found" ] || path=$(readlink -f "$path")
			printf '%s\t%s\n' "$name" "$path"
		done
}

# unpack DIR: every DIR/lib/*.xz and DIR/lib/ncf/*.xz beside itself,
# unpacked (xz, else Python's lzma), and DIR's programs executable (a copy
# to another machine may not keep the modes).
unpack() {
	for f in "$1"/bin/* "$1"/bench/* "$1"/tests/gpu/* "$1"/tests/tools/*; do
		[ -f "$f" ] && { [ -x "$f" ] || chmod 755 "$f"; }
	done
	for z in "$1"/lib/*.xz "$1"/lib/ncf/*.xz; do
		[ -f "$z" ] || continue
		f=${z%.xz}
		{ xz -dc "$z" >"$f.part" 2>/dev/null ||
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
				"$z" "$f.part"; } && chmod 755 "$f.part" && mv "$f.part" "$f" || {
			echo "FAIL cannot unpack $z (neither xz nor python3's lzma)"
			rm -f "$f.part"
			return 1
		}
	done
}

# clean DIR: the unpacked copies of DIR's .xz files removed.
clean() {
	for z in "$1"/lib/*.xz "$1"/lib/ncf/*.xz; do
		[ -f "$z" ] && rm -f "${z%.xz}"
	done
	return 0
}

# check_libs DIR: the loader part of the check (see the top).
check_libs() {
	d=$(cd "$1" && pwd) || return 1
	st=0
	for f in $(elves "$d"); do
		inside="" sys="" bad=""
		deps_of=$(LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} deps "$d/$f")
		while IFS='	' read -r name path; do
			[ -n "$name" ] || continue
			case $path in
			"$d"/lib/*) inside="$inside ${path#"$d"/}" ;;
			*) if system "$name" && [ "$path" != "not found" ]; then sys="$sys $name"; else
				bad="$bad $name ($path)"; fi ;;
			esac
		done <<EOF
$deps_of
EOF
		if [ -n "$bad" ]; then
			echo "FAIL $f: not in the bundle:$bad"
			st=1
		else
			echo "ok   $f: in the bundle:${inside:- none}; system:${sys:- none}"
		fi
	done
	return $st
}

# check_run DIR: the bundle's tools train, evaluate and score on the CPU
# with only DIR/lib on LD_LIBRARY_PATH, and map the bundle's libraries.
check_run() {
	d=$(cd "$1" && pwd) || return 1
	t=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bundle.XXXXXX") || return 1
	st=0
	(
		set -e
		export LD_LIBRARY_PATH="$d/lib"
		unset NCF_CUDA_MODULE
		"$d/bin/ncf-prep" -q --synthetic tiny -o "$t/t.ncfc"
		LD_DEBUG=libs "$d/bin/ncf-train" --device cpu -q -e 2 -b 512 --log "$t/log" "$t/t.ncfc" \
			-o "$t/m.ncfm" 2>"$t/ld"
		"$d/bin/ncf-eval" --device cpu -m "$t/m.ncfm" "$t/t.ncfc" >"$t/eval"
		printf '1 1\n2 2\n' | "$d/bin/ncf-infer" --device cpu --score -m "$t/m.ncfm" >"$t/score"
	) || st=1
	if [ $st = 0 ]; then
		mapped=$(sed -n 's/.*calling init: \(.*\)/\1/p' "$t/ld" | sort -u)
		outside=$(for f in $mapped; do
			n=${f##*/}
			case $f in "$d"/lib/*) ;; *) system "$n" || echo "$f" ;; esac
		done)
		inside=$(for f in $mapped; do case $f in "$d"/lib/*) printf ' %s' "${f##*/}" ;; esac; done)
		if [ -n "$outside" ]; then
			echo "FAIL the CPU training mapped libraries from outside the bundle: $outside"
			st=1
		else
			echo "ok   a CPU training by the bundle's tools (synthetic tiny, 2 epochs, ncf-eval, ncf-infer --score), mapping from the bundle:$inside"
			tr '\t\n' '= ' <"$t/eval" | sed 's/^/     ncf-eval: /'
			echo
		fi
	else
		echo "FAIL the bundle's tools could not train on the CPU:"
		tail -n 5 "$t/ld" 2>/dev/null
	fi
	rm -rf "$t"
	return $st
}

case ${1:-} in
--check-libs)
	[ $# = 2 ] || { echo "usage: sh scripts/gpu-bundle.sh --check-libs OUT" >&2; exit 2; }
	unpack "$2" && check_libs "$2"
	exit $?
	;;
--check)
	[ $# = 2 ] || { echo "usage: sh scripts/gpu-bundle.sh --check OUT" >&2; exit 2; }
	unpack "$2" && check_libs "$2" && check_run "$2"
	st=$?
	clean "$2"
	exit $st
	;;
--clean)
	[ $# = 2 ] || { echo "usage: sh scripts/gpu-bundle.sh --clean OUT" >&2; exit 2; }
	clean "$2"
	exit $?
	;;
-* | '')
	echo "usage: sh scripts/gpu-bundle.sh BUILD OUT [PEER] | --check OUT | --check-libs OUT | --clean OUT" >&2
	exit 2
	;;
esac
[ $# -ge 2 ] && [ $# -le 3 ] || {
	echo "usage: sh scripts/gpu-bundle.sh BUILD OUT [PEER]" >&2
	exit 2
}
build=$1
out=$2
peer=${3:-}
unset LD_LIBRARY_PATH # the bundle's lib/ alone, in the check below
limit=${BUNDLE_MIB:-48}
for f in bin/ncf-prep bin/ncf-train bin/ncf-eval bin/ncf-infer bench/bench_gpu lib/ncf/ncf-cuda.so \
	tests/gpu/gpu_parity; do
	[ -f "$build/$f" ] || {
		echo "gpu-bundle: $build/$f is missing: build it first (make gpu-bundle does)" >&2
		exit 1
	}
done
if [ -n "$peer" ] && [ ! -f "$peer/nvidia-ncf-pytorch/ncf.py" ]; then
	echo "gpu-bundle: $peer/nvidia-ncf-pytorch/ncf.py is missing: PEER=DIR names NVIDIA's NCF (../shared/peer)" >&2
	exit 1
fi
mkdir -p "$(dirname "$out")" || exit 1
new=$(cd "$(dirname "$out")" && pwd)/$(basename "$out").new
rm -rf "$new"
mkdir -p "$new/bin" "$new/bench" "$new/lib/ncf" "$new/tests/gpu" "$new/tests/tools" || exit 1
trap 'rm -rf "$new"' EXIT

# the programs, without their debug information (their symbols stay)
for f in bin/ncf-prep bin/ncf-train bin/ncf-eval bin/ncf-infer bench/bench_gpu lib/ncf/ncf-cuda.so \
	tests/tools/ckpt_diff; do
	[ -f "$build/$f" ] || continue
	strip --strip-debug -o "$new/$f" "$build/$f" || exit 1
done
for f in "$build"/tests/gpu/*; do
	[ -f "$f" ] && [ -x "$f" ] && { strip --strip-debug -o "$new/tests/gpu/${f##*/}" "$f" || exit 1; }
done

# the libraries they need that are not the machine's own
libs=""
for f in $(elves "$new"); do
	deps_of=$(deps "$new/$f")
	while IFS='	' read -r name path; do
		[ -n "$name" ] || continue
		system "$name" && continue
		case $path in "$new"/*) continue ;; esac # the module, for the GPU tests
		if [ "$path" = "not found" ]; then
			echo "gpu-bundle: $f needs $name, which is not found here" >&2
			exit 1
		fi
		[ -f "$new/lib/$name" ] && continue
		strip --strip-debug -o "$new/lib/$name" "$path" 2>/dev/null || cp -L "$path" "$new/lib/$name" || exit 1
		libs="$libs $name"
	done <<EOF
$deps_of
EOF
done

wheels=""
if [ -n "$peer" ]; then
	cp -R "$peer" "$new/peer" || exit 1
	find "$new/peer" -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null
	chmod -R u+w "$new/peer"
	if [ -n "${BUNDLE_WHEELS:-}" ] && ls "$BUNDLE_WHEELS"/*.whl >/dev/null 2>&1; then
		mkdir -p "$new/peer/wheels" && cp "$BUNDLE_WHEELS"/*.whl "$new/peer/wheels/" || exit 1
		wheels=$(cd "$new/peer/wheels" && ls ./*.whl | sed 's|^\./||' | tr '\n' ' ' | sed 's/ $//')
	fi
fi

# the manifest
nvcc=${NVCC:-$(command -v nvcc 2>/dev/null || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
cuda=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1)
# the GPU architectures: the -gencode list the module was built with
# (BUNDLE_FLAGS, else the build's flags stamp): code=sm_NN is machine code
# for NN, code=compute_NN is PTX
flags=${BUNDLE_FLAGS:-$(cat "$build/flags.stamp" 2>/dev/null)}
archs=$(echo "$flags" | tr ' ' '\n' | sed -n 's/.*code=\(sm_[0-9a-z]*\).*/\1/p' | sort -u | tr '\n' ' ' |
	sed 's/ $//')
ptx=$(echo "$flags" | tr ' ' '\n' | sed -n 's/.*code=compute_\([0-9a-z]*\).*/sm_\1/p' | sort -u |
	tr '\n' ' ' | sed 's/ $//')
[ -n "$archs" ] || archs="sm_80 sm_90" # the Makefile's default CUDA_ARCH
# the newest glibc and libstdc++ symbol versions the programs need, from
# one reading of their dynamic symbols
syms=$(for f in $(elves "$new"); do objdump -T "$new/$f"; done 2>/dev/null)
newest() {
	echo "$syms" | sed -n "s/.*$1_\([0-9][0-9.]*\).*/\1/p" | sort -t . -k1,1n -k2,2n -k3,3n |
		tail -n 1
}
glibc=$(newest GLIBC)
glibcxx=$(newest GLIBCXX)
src=$(cd "$(dirname "$0")/.." && pwd)
if commit=$(git -C "$src" rev-parse --short=12 HEAD 2>/dev/null); then
	git -C "$src" diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
else
	commit=unknown
fi
{
	printf 'bundle\tncf GPU bundle (scripts/gpu-bundle.sh; run by scripts/gpu-check.sh --bundle)\n'
	printf 'ncf\t%s\n' "$("$build/bin/ncf-train" -V 2>&1 | head -n 1)"
	printf 'commit\t%s\n' "$commit"
	printf 'built\t%s on %s (%s)\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(uname -m)" \
		"$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
	printf 'flags\t%s\n' "$flags"
	printf 'x86_64_level\t%s\n' "$(echo "${BUNDLE_FLAGS:-}" | sed -n 's/.*-march=\([^ ]*\).*/\1/p')"
	printf 'cuda\t%s\n' "${cuda:-unknown}"
	printf 'gpu_arch\t%s\n' "${archs:-unknown}"
	printf 'gpu_ptx\t%s\n' "${ptx:-none}"
	printf 'glibc_needed\t%s\n' "${glibc:-unknown}"
	printf 'glibcxx_needed\t%s\n' "${glibcxx:-none}"
	printf 'libraries\t%s\n' "$(echo $libs)"
	printf 'system_libraries\tglibc, libgcc_s, libstdc++, CUDA %s (cudart, cuBLAS, cuBLASLt) from the GPU machine\n' \
		"${cuda:-?}"
	if [ -n "$peer" ]; then
		printf 'peer\tNVIDIA DeepLearningExamples PyTorch/Recommendation/NCF (%s), with the stand-ins of %s\n' \
			"$(sed -n 's/.*(commit \([0-9a-f]*\).*/\1/p' "$peer/README.md" | head -n 1)" "${peer##*/}"
		printf 'peer_wheels\t%s\n' "${wheels:-none (convert.py needs pandas < 3 on the GPU machine)}"
	fi
} >"$new/MANIFEST"

echo "gpu-bundle: checking $new"
check_libs "$new" && check_run "$new" || exit 1

# the large files kept compressed (gpu-check.sh --bundle unpacks them):
# those over 1 MiB, or those BUNDLE_PACK names (file names; tests)
packed=""
for f in "$new"/lib/*.so* "$new"/lib/ncf/*.so; do
	[ -f "$f" ] || continue
	if [ -n "${BUNDLE_PACK+set}" ]; then
		case " $BUNDLE_PACK " in *" ${f##*/} "*) ;; *) continue ;; esac
	else
		[ "$(wc -c <"$f")" -gt 1048576 ] || continue
	fi
	xz -6 -T2 -c "$f" >"$f.xz" && rm "$f" || exit 1
	packed="$packed ${f#"$new"/}"
done
printf 'packed\t%s\n' "$(echo ${packed:-none}) (kept as FILE.xz)" >>"$new/MANIFEST"
bytes=$(du -sb "$new" | awk '{ print $1 }')
printf 'size\t%s bytes (%.1f MiB; limit %s MiB), SHA256SUMS aside\n' "$bytes" \
	"$(echo "$bytes" | awk '{ print $1 / 1048576 }')" "$limit" >>"$new/MANIFEST"
(cd "$new" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort | xargs sha256sum >SHA256SUMS) ||
	exit 1
bytes=$(du -sb "$new" | awk '{ print $1 }')
if [ "$bytes" -gt $((limit * 1048576)) ]; then
	echo "gpu-bundle: $out would be $bytes bytes, over $limit MiB (BUNDLE_MIB); the largest:" >&2
	du -ab "$new" | sort -n -r | head -n 8 >&2
	exit 1
fi

rm -rf "$out"
mv "$new" "$out" || exit 1
trap - EXIT
echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)):"
sed 's/^/  /' "$out/MANIFEST"
