/*
 * matmul.h - the cpu backend's dense products: one call per product of a
 * step (a layer's forward with its bias and ReLU, the backward dX and dW
 * products), in fp32 or in bf16 (bf16 operands, fp32 accumulation and
 * output: NVIDIA's AMP).  Behind it, oneDNN (matmul primitives, created
 * once per shape and kept) where the build has it, OpenBLAS sgemm where it
 * does not or where it is faster (fp32 only; the choice is a fixed rule per
 * kind of product, measured with bench/bench_matmul, never a timing at run
 * time, so that results do not depend on the machine's load).  It is not
 * the model: train.c and infer.c say which product is which layer.
 *
 * Threads and determinism.  Every call runs on the calling thread alone,
 * whatever OMP_NUM_THREADS says (oneDNN's primitives are created and run
 * for one thread; OpenBLAS is kept single-threaded by the backend), so its
 * result is a function of its arguments only.  Callers get parallelism by
 * calling from their own fixed tiles or lanes (cpu.h), or through the
 * _tiles helpers below, which cut rows into tiles of NCF_MM_TILE and sum
 * tile partials in tile order.  Calls from many threads at once are safe.
 *
 * A product is described by a struct of its kind (forward, dX, dW) whose
 * fields name each operand and its row stride, so that a call reads as
 * the layer it computes.  Layout: row-major; every matrix is given with
 * its row stride (ld, in elements, >= its width).  Legend: m rows
 * (samples, slots), k the layer's input width, n its output width; W is
 * (n, k), as model.h stores a layer's weight (out, in).  Operands (the
 * activations or gradients, and W) are float for NCF_MM_F32 and ncf_bf16
 * for NCF_MM_BF16; outputs and biases are always float.
 *
 * Errors: functions returning int give 0, or -1 after ncf_error() with the
 * library's words.  A bf16 call where ncf_mm_available(NCF_MM_BF16) is 0
 * fails so.
 */
#ifndef NCF_CPU_MATMUL_H
#define NCF_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t ncf_bf16; /* the top half of an IEEE float */

enum ncf_mm_type {
	NCF_MM_F32 = 0,	 /* float operands */
	NCF_MM_BF16 = 1, /* ncf_bf16 operands, float accumulation and output */
};

/* Which library a product uses (bench and tests may force one). */
enum ncf_mm_lib {
	NCF_MM_LIB_AUTO = 0, /* the fixed rule (matmul.c) */
	NCF_MM_LIB_OPENBLAS, /* fp32 only */
	NCF_MM_LIB_DNNL,
};

#define NCF_MM_TILE 2048 /* rows per tile of the _tiles helpers (= cpu.h TILE) */

/* ---- bf16 numbers ------------------------------------------------------ */

/* x rounded to the nearest bf16, ties to even; NaN stays NaN (quieted);
 * a subnormal x gives a zero of its sign.  The bits of AVX512_BF16's
 * VCVTNEPS2BF16, which treats subnormal inputs as zero (checked on all
 * kinds of input), so that vector and scalar conversions agree. */
static inline ncf_bf16 ncf_bf16_from_f32(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (ncf_bf16)((u >> 16) | 0x40);
	if ((u & 0x7f800000u) == 0)
		return (ncf_bf16)((u >> 16) & 0x8000);
	u += 0x7fffu + ((u >> 16) & 1);
	return (ncf_bf16)(u >> 16);
}

/* The float of a bf16 (exact). */
static inline float ncf_f32_from_bf16(ncf_bf16 h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;
	memcpy(&x, &u, 4);
	return x;
}

/* dst[j] = ncf_bf16_from_f32(src[j]) for j < n, on the calling thread
 * (AVX512_BF16 where compiled for it: the same bits). */
void ncf_bf16_from_f32_n(const float *src, size_t n, ncf_bf16 *dst);

/* The same bits with non-temporal stores (where compiled for AVX512_BF16,
 * dst 32-byte aligned and n a multiple of 16), for an output read long
 * after, which should not evict what is in cache. */
void ncf_bf16_from_f32_n_stream(const float *src, size_t n, ncf_bf16 *dst);

/* ---- what is there ----------------------------------------------------- */

/* 1 when products of type t can run here; 0 with a one-line reason in
 * *why (static; why may be NULL): for bf16, no oneDNN in the build, or a
 * CPU (or ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA) without bf16 instructions
 * (AVX512_BF16 or AMX), as oneDNN itself reports. */
int ncf_mm_available(enum ncf_mm_type t, const char **why);

/* A short description: the libraries and oneDNN's ISA, e.g. "oneDNN 2.6.3
 * (avx512_core_amx), OpenBLAS".  Static. */
const char *ncf_mm_describe(void);

/* Force a library for fp32 products (bench, tests); NCF_MM_LIB_AUTO
 * restores the rule.  Process-wide; call it when no product runs.  A
 * library the build lacks falls back to the other.  Without a call, the
 * environment's NCF_MM_LIB=openblas does the same for OpenBLAS (an A/B
 * switch for benchmarks: fp32 results then differ in the last bits). */
void ncf_mm_force_lib(enum ncf_mm_lib lib);

/* Release the cached primitives and per-thread buffers (at exit, for leak
 * checkers; later calls create them again).  Call it when no product runs. */
void ncf_mm_release(void);

/* ---- one product, on the calling thread -------------------------------- */

/* A layer's forward: Y (m, n) = X (m, k) W^T (+ bias, a row of n, when not
 * NULL), then max(., 0) when relu.  W (n, k). */
struct ncf_mm_forward_op {
	enum ncf_mm_type t;
	size_t m, n, k;
	const void *X;
	size_t ldx;
	const void *W;
	size_t ldw;
	const float *bias;
	int relu;
	float *Y;
	size_t ldy;
};
int ncf_mm_forward(const struct ncf_mm_forward_op *op);

/* A layer's input gradient: dX (m, k) = dY (m, n) W.  W (n, k). */
struct ncf_mm_dx_op {
	enum ncf_mm_type t;
	size_t m, n, k;
	const void *dY;
	size_t ldd;
	const void *W;
	size_t ldw;
	float *dX;
	size_t ldx;
};
int ncf_mm_dx(const struct ncf_mm_dx_op *op);

/* A layer's weight gradient: dW (n, k) = dY^T X over m rows, or dW += that
 * when accumulate.  dY (m, n), X (m, k). */
struct ncf_mm_dw_op {
	enum ncf_mm_type t;
	size_t m, n, k;
	const void *dY;
	size_t ldd;
	const void *X;
	size_t ldx;
	float *dW;
	size_t ldw;
	int accumulate;
};
int ncf_mm_dw(const struct ncf_mm_dw_op *op);

/* ---- the same over tiles of NCF_MM_TILE rows, in parallel (OpenMP) ------ */

/* ncf_mm_forward of rows [0, m), each tile by one thread. */
int ncf_mm_forward_tiles(const struct ncf_mm_forward_op *op);

/* ncf_mm_dx of rows [0, m), each tile by one thread. */
int ncf_mm_dx_tiles(const struct ncf_mm_dx_op *op);

/* dW (n, k) = dY^T X over rows [0, m) (op->accumulate must be 0): one
 * partial per tile into part (tiles n k floats, tiles = ceil(m /
 * NCF_MM_TILE)), then the partials added in tile order.  m = 0 gives
 * zeros. */
int ncf_mm_dw_tiles(const struct ncf_mm_dw_op *op, float *part);

#endif
