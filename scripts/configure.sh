#!/bin/sh
# configure.sh - probe the build machine, install what is missing, write
# build/config.mk.
#
# Every feature is found by compiling and linking a small program (not by
# looking for files), and reported on one line.  Required: a C compiler with
# OpenMP, zstd, libcsv, OpenBLAS.  Wanted: MPI (installed like the required
# ones unless NO_MPI=1).  Optional: CUDA with cuBLAS/cuBLASLt, NCCL (probed,
# never installed; NO_CUDA=1 turns them off).
#
# Missing Debian packages are installed with apt-get when we are root or
# have password-less sudo; otherwise the script stops with the exact
# apt-get line to run.  Environment: CC, NVCC, CUDA_HOME, NO_CUDA, NO_MPI,
# NO_INSTALL (1: never install, only report).
set -u
out=${1:-build/config.mk}
CC=${CC:-cc}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NO_CUDA=${NO_CUDA:-0}
NO_MPI=${NO_MPI:-0}
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

probe_all_required
if [ -n "$missing_pkgs" ]; then
	line="apt-get install -y$missing_pkgs"
	if [ "$NO_INSTALL" = 1 ]; then
		echo "configure: missing packages; run: $line" >&2
		exit 1
	fi
	if [ "$(id -u)" = 0 ]; then
		sudo=""
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	else
		echo "configure: missing packages:$missing_pkgs" >&2
		echo "configure: run as root: $line" >&2
		exit 1
	fi
	echo "configure: installing$missing_pkgs"
	if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing_pkgs >"$dir/apt.log" 2>&1 ||
		{ $sudo apt-get update -q >>"$dir/apt.log" 2>&1 &&
		  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing_pkgs >>"$dir/apt.log" 2>&1; }; }; then
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
say "openblas" found
HAVE_MPI=0
if [ "$NO_MPI" = 1 ]; then
	say "mpi" "off (NO_MPI=1)"
	MPI_CFLAGS=""; MPI_LIBS=""
else
	HAVE_MPI=1
	say "mpi" "found ($(mpirun --version 2>/dev/null | head -n 1))"
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
} >"$tmp" && mv "$tmp" "$out"
