#!/bin/sh
# configure.sh - probe the build machine, install what is missing, write
# build/config.mk.
#
# Every feature is found by compiling and linking a small program (not by
# looking for files), and reported on one line.  Required: a C compiler with
# OpenMP, zstd, libcsv, jansson (the safetensors header), OpenBLAS.
# Wanted: MPI (installed like the required ones unless NO_MPI=1).  Wanted
# but optional: oneDNN (libdnnl-dev: the cpu backend's fused dense layers
# and bf16), installed unless NO_DNNL=1; without it the cpu backend runs on
# OpenBLAS alone and --precision bf16 on the cpu exits 3.  Wanted but
# optional: libyaml (libyaml-dev: ncf-prep --feature-spec reads NVIDIA's
# feature_spec.yaml), installed unless NO_YAML=1; without it
# --feature-spec exits 3.
# Optional: CUDA with cuBLAS/cuBLASLt, NCCL (probed, never installed;
# NO_CUDA=1 turns them off).  Wanted but optional: ONNX
# export (protobuf-c, protoc-c and the onnx.proto of libonnx-dev, with
# python3-onnx for its test), installed unless NO_ONNX=1; when they cannot
# be had the build goes on and ncf-infer --export F.onnx exits 3.
#
# Missing Debian packages are installed with apt-get when we are root or
# have password-less sudo; otherwise the script stops with the exact
# apt-get line to run.  Environment: CC, NVCC, CUDA_HOME, NO_CUDA, NO_MPI,
# NO_DNNL, NO_YAML, NO_ONNX, ONNX_PROTO (default /usr/include/onnx/onnx.proto), NO_INSTALL (1:
# never install, only report).
set -u
out=${1:-build/config.mk}
CC=${CC:-cc}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NO_CUDA=${NO_CUDA:-0}
NO_MPI=${NO_MPI:-0}
NO_ONNX=${NO_ONNX:-0}
NO_DNNL=${NO_DNNL:-0}
NO_YAML=${NO_YAML:-0}
ONNX_PROTO=${ONNX_PROTO:-/usr/include/onnx/onnx.proto}
NO_INSTALL=${NO_INSTALL:-0}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ncf-probe.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT

say() { printf '%-28s %s\n' "$1" "$2"; }

# probe NAME 'CFLAGS' 'LIBS' <<source
probe() {
	cat >"$dir/$1.c"
	$CC $2 "$dir/$1.c" -o "$dir/$1" $3 >"$dir/$1.log" 2>&1
}

probe_all_required() {
	missing_pkgs=""
	probe openmp "-fopenmp" "-fopenmp" <<'EOF' || missing_pkgs="$missing_pkgs libgomp1"
#include <omp.h>
int main(void) { return omp_get_max_threads() < 1; }
EOF
	probe zstd "" "-lzstd" <<'EOF' || missing_pkgs="$missing_pkgs libzstd-dev"
#include <zstd.h>
int main(void) { return ZSTD_versionNumber() < 10400; }
EOF
	probe csv "" "-lcsv" <<'EOF' || missing_pkgs="$missing_pkgs libcsv-dev"
#include <csv.h>
int main(void) { struct csv_parser p; if (csv_init(&p, 0)) return 1; csv_free(&p); return 0; }
EOF
	# jansson as the safetensors reader uses it: a duplicate key refused, the
	# byte where the parse stopped given
	probe jansson "" "-ljansson" <<'EOF' || missing_pkgs="$missing_pkgs libjansson-dev"
#include <jansson.h>
int main(void) { json_error_t e; const char *s = "{\"a\":1,\"a\":2}";
  json_t *j = json_loadb(s, 13, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
  if (j) json_decref(j); return j != NULL || e.position != 10; }
EOF
	probe openblas "" "-lopenblas" <<'EOF' || missing_pkgs="$missing_pkgs libopenblas-dev"
#include <cblas.h>
int main(void) { float a = 1, b = 2, c = 0;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
  openblas_set_num_threads(1); return !(c == 2.0f && openblas_get_config()); }
EOF
	if [ "$NO_MPI" != 1 ]; then
		mpi_ok=0
		if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
			MPI_CFLAGS=$(mpicc --showme:compile 2>/dev/null || true)
			MPI_LIBS=$(mpicc --showme:link 2>/dev/null || true)
			probe mpi "$MPI_CFLAGS" "$MPI_LIBS" <<'EOF' && mpi_ok=1
#include <mpi.h>
int main(int argc, char **argv) { int v, s; MPI_Get_version(&v, &s); (void)argc; (void)argv; return v < 3; }
EOF
		fi
		[ $mpi_ok = 1 ] || missing_pkgs="$missing_pkgs libopenmpi-dev openmpi-bin"
	fi
}

# find_sudo: how to run apt-get here, in $sudo: "" as root, "sudo -n" with
# password-less sudo, "none" when neither.
find_sudo() {
	if [ "$(id -u)" = 0 ]; then
		sudo=""
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	else
		sudo=none
	fi
}

# apt_install LOG PACKAGE...: install them (after an apt-get update when the
# first try fails), apt-get's words into LOG; its status.
apt_install() {
	log=$1; shift
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >"$log" 2>&1 ||
		{ $sudo apt-get update -q >>"$log" 2>&1 &&
		  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>"$log" 2>&1; }
}

probe_all_required
if [ -n "$missing_pkgs" ]; then
	line="apt-get install -y$missing_pkgs"
	if [ "$NO_INSTALL" = 1 ]; then
		echo "configure: missing packages; run: $line" >&2
		exit 1
	fi
	find_sudo
	if [ "$sudo" = none ]; then
		echo "configure: missing packages:$missing_pkgs" >&2
		echo "configure: run as root: $line" >&2
		exit 1
	fi
	echo "configure: installing$missing_pkgs"
	# shellcheck disable=SC2086 # the list splits into packages
	if ! apt_install "$dir/apt.log" $missing_pkgs; then
		tail -n 20 "$dir/apt.log" >&2
		echo "configure: installing failed; run: $line" >&2
		exit 1
	fi
	probe_all_required
	if [ -n "$missing_pkgs" ]; then
		echo "configure: still missing after install:$missing_pkgs (see the probe logs)" >&2
		exit 1
	fi
fi

say "openmp" found
say "zstd" found
say "libcsv" found
say "jansson" found
say "openblas" found
HAVE_MPI=0
if [ "$NO_MPI" = 1 ]; then
	say "mpi" "off (NO_MPI=1)"
	MPI_CFLAGS=""; MPI_LIBS=""
else
	HAVE_MPI=1
	say "mpi" "found ($(mpirun --version 2>/dev/null | head -n 1))"
fi

# probe_or_install NAME PACKAGE WHAT: probe_NAME passes, or, where we may
# install (not NO_INSTALL=1; root or password-less sudo), PACKAGE is
# installed and probe_NAME asked again.  For the wanted but optional
# libraries: a failed install goes on without them.
probe_or_install() {
	"probe_$1" && return 0
	[ "$NO_INSTALL" != 1 ] || return 1
	find_sudo
	if [ "$sudo" != none ]; then
		echo "configure: installing $2 ($3)"
		apt_install "$dir/apt-$1.log" "$2" ||
			echo "configure: installing $2 failed; going on without it" >&2
	fi
	"probe_$1"
}

# oneDNN: a program that creates a matmul primitive through the C API of
# its version (2.x or 3.x: kernels/cpu/dnnl.c keeps the difference), so
# that a header without a working library, or a library without matmul,
# is not taken for one.
probe_dnnl() {
	probe dnnl "-fopenmp" "-ldnnl -fopenmp" <<'EOF'
#include <oneapi/dnnl/dnnl.h>
int main(void) {
  dnnl_engine_t e; if (dnnl_engine_create(&e, dnnl_cpu, 0) != dnnl_success) return 1;
  dnnl_memory_desc_t a, b, c; dnnl_dims_t da = {4, 8}, db = {8, 2}, dc = {4, 2};
  dnnl_primitive_desc_t pd; int ok;
#if DNNL_VERSION_MAJOR >= 3
  dnnl_memory_desc_create_with_tag(&a, 2, da, dnnl_f32, dnnl_ab);
  dnnl_memory_desc_create_with_tag(&b, 2, db, dnnl_f32, dnnl_ab);
  dnnl_memory_desc_create_with_tag(&c, 2, dc, dnnl_f32, dnnl_ab);
  ok = dnnl_matmul_primitive_desc_create(&pd, e, a, b, NULL, c, NULL) == dnnl_success;
#else
  dnnl_matmul_desc_t md;
  dnnl_memory_desc_init_by_tag(&a, 2, da, dnnl_f32, dnnl_ab);
  dnnl_memory_desc_init_by_tag(&b, 2, db, dnnl_f32, dnnl_ab);
  dnnl_memory_desc_init_by_tag(&c, 2, dc, dnnl_f32, dnnl_ab);
  ok = dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) == dnnl_success &&
       dnnl_primitive_desc_create(&pd, &md, NULL, e, NULL) == dnnl_success;
#endif
  if (ok) dnnl_primitive_desc_destroy(pd);
  dnnl_engine_destroy(e); return !ok; }
EOF
}
dnnl_version() {
	cat >"$dir/dnnlv.c" <<'EOF'
#include <stdio.h>
#include <oneapi/dnnl/dnnl.h>
int main(void) { const dnnl_version_t *v = dnnl_version();
  printf("%d.%d.%d", v->major, v->minor, v->patch); return 0; }
EOF
	$CC "$dir/dnnlv.c" -o "$dir/dnnlv" -ldnnl >/dev/null 2>&1 && "$dir/dnnlv"
}
HAVE_DNNL=0
if [ "$NO_DNNL" = 1 ]; then
	say "onednn" "off (NO_DNNL=1): OpenBLAS only, no bf16 on the cpu"
else
	if probe_or_install dnnl libdnnl-dev oneDNN; then
		HAVE_DNNL=1
		say "onednn" "found ($(dnnl_version))"
	else
		say "onednn" "not found (apt-get install libdnnl-dev): OpenBLAS only, no bf16 on the cpu"
	fi
fi

# libyaml: a program that loads a YAML document through the API
# ncf-prep/spec.c uses (yaml_parser_load, the nodes of a mapping).
probe_yaml() {
	probe yaml "" "-lyaml" <<'EOF'
#include <string.h>
#include <yaml.h>
int main(void) { yaml_parser_t p; yaml_document_t d; const char *s = "a: [1, 2]\n";
  if (!yaml_parser_initialize(&p)) return 1;
  yaml_parser_set_input_string(&p, (const unsigned char *)s, strlen(s));
  int ok = yaml_parser_load(&p, &d); yaml_node_t *r = ok ? yaml_document_get_root_node(&d) : 0;
  ok = r && r->type == YAML_MAPPING_NODE && r->data.mapping.pairs.top - r->data.mapping.pairs.start == 1;
  if (r) yaml_document_delete(&d); yaml_parser_delete(&p); return !ok; }
EOF
}
HAVE_YAML=0
if [ "$NO_YAML" = 1 ]; then
	say "libyaml" "off (NO_YAML=1): ncf-prep --feature-spec exits 3"
else
	if probe_or_install yaml libyaml-dev YAML; then
		HAVE_YAML=1
		say "libyaml" "found"
	else
		say "libyaml" "not found (apt-get install libyaml-dev): ncf-prep --feature-spec exits 3"
	fi
fi

# CUDA: nvcc, then a host program that links cudart, cuBLAS and cuBLASLt.
HAVE_CUDA=0; HAVE_NCCL=0; NVCC=${NVCC:-}
if [ "$NO_CUDA" = 1 ]; then
	say "cuda" "off (NO_CUDA=1)"
	say "nccl" "off (NO_CUDA=1)"
else
	[ -n "$NVCC" ] || NVCC=$(command -v nvcc 2>/dev/null || true)
	[ -n "$NVCC" ] || { [ -x "$CUDA_HOME/bin/nvcc" ] && NVCC=$CUDA_HOME/bin/nvcc; }
	if [ -n "$NVCC" ]; then
		CUDA_HOME=$(dirname "$(dirname "$NVCC")")
		cat >"$dir/cu.cu" <<'EOF'
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>
__global__ void k(float *x) { x[threadIdx.x] = 1.0f; }
int main(void) { int v = 0; cudaRuntimeGetVersion(&v); size_t lt = cublasLtGetVersion();
  cublasHandle_t h; (void)h; (void)lt; if (0) { k<<<1, 1>>>(0); cublasCreate(&h); } return v == 0; }
EOF
		if "$NVCC" -arch=sm_80 "$dir/cu.cu" -o "$dir/cu" -lcublas -lcublasLt >"$dir/cu.log" 2>&1; then
			HAVE_CUDA=1
			say "cuda" "found ($("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), cuBLAS, cuBLASLt)"
		else
			say "cuda" "not found (nvcc cannot build a cuBLAS program)"
		fi
	else
		say "cuda" "not found (no nvcc)"
	fi
	if [ $HAVE_CUDA = 1 ]; then
		if probe nccl "-I$CUDA_HOME/include" "-L$CUDA_HOME/lib64 -lnccl -lcudart" <<'EOF'
#include <nccl.h>
int main(void) { int v = 0; ncclGetVersion(&v); return 0; }
EOF
		then HAVE_NCCL=1; say "nccl" found; else say "nccl" "not found"; fi
	else
		say "nccl" "not found (needs cuda)"
	fi
fi

# ONNX export: protoc-c turns the onnx.proto of libonnx-dev into C that
# links with libprotobuf-c; the probe generates it and packs a ModelProto.
probe_onnx() {
	onnx_missing=""
	onnx_test_missing=""
	[ -f "$ONNX_PROTO" ] || onnx_missing="$onnx_missing libonnx-dev"
	PROTOC_C=$(command -v protoc-c 2>/dev/null || true)
	[ -n "$PROTOC_C" ] || onnx_missing="$onnx_missing protobuf-c-compiler"
	probe protobuf_c "" "-lprotobuf-c" <<'EOF' || onnx_missing="$onnx_missing libprotobuf-c-dev"
#include <protobuf-c/protobuf-c.h>
int main(void) { return protobuf_c_version_number() < 1000000; }
EOF
	if [ -z "$onnx_missing" ]; then
		mkdir -p "$dir/onnx"
		if ! "$PROTOC_C" --c_out="$dir/onnx" -I"$(dirname "$ONNX_PROTO")" "$ONNX_PROTO" \
			>"$dir/onnx.log" 2>&1; then
			onnx_bad=" a usable $ONNX_PROTO (protoc-c fails on it)"
		elif ! probe onnx_pack "-I$dir/onnx" "$dir/onnx/onnx.pb-c.c -lprotobuf-c" <<'EOF'
#include "onnx.pb-c.h"
int main(void) { Onnx__ModelProto m; onnx__model_proto__init(&m); m.has_ir_version = 1;
  m.ir_version = 7; return protobuf_c_message_get_packed_size(&m.base) != 2; }
EOF
		then
			onnx_bad=" a protobuf-c that builds $ONNX_PROTO"
		fi
	fi
	py_onnx=0
	for py in python3 /usr/bin/python3; do
		"$py" -c 'import onnx' >/dev/null 2>&1 && py_onnx=1 && break
	done
	[ $py_onnx = 1 ] || onnx_test_missing=" python3-onnx"
}

HAVE_ONNX=0; PROTOC_C=""; ONNX_MISSING=""; onnx_bad=""
if [ "$NO_ONNX" = 1 ]; then
	say "onnx export" "off (NO_ONNX=1)"
	ONNX_MISSING="the build was made with NO_ONNX=1"
else
	probe_onnx
	want="$onnx_missing$onnx_test_missing"
	if [ -n "$want" ] && [ "$NO_INSTALL" != 1 ]; then
		find_sudo
		if [ "$sudo" != none ]; then
			echo "configure: installing$want (ONNX export)"
			# shellcheck disable=SC2086 # the list splits into packages
			apt_install "$dir/apt-onnx.log" $want ||
				echo "configure: installing$want failed; going on without it" >&2
			probe_onnx
		fi
	fi
	if [ -z "$onnx_missing$onnx_bad" ]; then
		HAVE_ONNX=1
		say "onnx export" "found (protobuf-c $(pkg-config --modversion libprotobuf-c 2>/dev/null || echo '?'), $ONNX_PROTO)"
	elif [ -n "$onnx_missing" ]; then
		ONNX_MISSING="the build found no$onnx_missing: apt-get install -y libonnx-dev protobuf-c-compiler libprotobuf-c-dev, then make"
		say "onnx export" "not found (no$onnx_missing): --export F.onnx exits 3"
	else
		ONNX_MISSING="the build found no$onnx_bad"
		say "onnx export" "not found (no$onnx_bad): --export F.onnx exits 3"
	fi
	[ -z "$onnx_test_missing" ] || say "python3 onnx" "not found (the ONNX checker test skips)"
fi

mkdir -p "$(dirname "$out")"
tmp="$out.tmp"
{
	echo "# written by scripts/configure.sh; delete to probe again"
	echo "HAVE_MPI := $HAVE_MPI"
	echo "MPI_CFLAGS := $MPI_CFLAGS"
	echo "MPI_LIBS := $MPI_LIBS"
	echo "HAVE_CUDA := $HAVE_CUDA"
	echo "HAVE_NCCL := $HAVE_NCCL"
	echo "NVCC := $NVCC"
	echo "CUDA_HOME := $CUDA_HOME"
	echo "CONFIG_NO_CUDA := $NO_CUDA"
	echo "CONFIG_NO_MPI := $NO_MPI"
	echo "HAVE_DNNL := $HAVE_DNNL"
	echo "CONFIG_NO_DNNL := $NO_DNNL"
	echo "HAVE_YAML := $HAVE_YAML"
	echo "CONFIG_NO_YAML := $NO_YAML"
	echo "HAVE_ONNX := $HAVE_ONNX"
	echo "PROTOC_C := $PROTOC_C"
	echo "ONNX_PROTO := $ONNX_PROTO"
	echo "ONNX_MISSING := $ONNX_MISSING"
} >"$tmp" && mv "$tmp" "$out"
