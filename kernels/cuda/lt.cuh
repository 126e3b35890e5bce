/*
 * lt.cuh - dense layers through cuBLASLt with its epilogues, the lt
 * implementation of dense.cuh: NVIDIA's tuned kernels doing in the
 * product's own epilogue what the fused kernels of mlp.cu do by hand.
 * Row-major in our terms, as gemm.cuh:
 *
 *   lt_fwd:   Y (rows, out) = relu(X W^T + b) (CUBLASLT_EPILOGUE_RELU_BIAS),
 *             and with aux a bit per element of Y: did the ReLU keep it
 *             (RELU_AUX_BIAS);
 *   lt_dgrad: Y (rows, in) = dY W (DEFAULT); with aux (the mask of Y's
 *             layer) and db: Y = (dY W) * relu'(aux) and db (in) = the
 *             column sums of Y (DRELU_BGRAD);
 *   lt_wgrad: dW (out, in) = dY^T X (DEFAULT).
 *
 * The bit mask's layout is cuBLASLt's own: only cuBLASLt reads it; its
 * leading dimension is lt_aux_ld(units) bits, its size lt_aux_bytes.
 * Algorithms come from cuBLASLt's heuristic, once per product shape, and
 * are kept.  Each call is noted for the cost recorder as a GEMM with the
 * epilogue's bytes.  Under emulation, emu.h's stand-in computes the same
 * products and epilogues as the documentation defines them.
 */
#ifndef NCF_CUDA_LT_CUH
#define NCF_CUDA_LT_CUH

#include "state.cuh"

namespace NCF_CUDA_NS {

struct lt; /* lt.cu */

/* A cuBLASLt handle and its workspace for c (once).  Returns 0 or -1. */
int lt_open(struct cu *c);
void lt_free(struct cu *c);

/* Bits between columns of an aux mask of `units` rows (cuBLASLt: a multiple
 * of 128), and the bytes of one for `rows` rows of a layer. */
static inline size_t lt_aux_ld(uint32_t units)
{
	return ((size_t)units + 127) / 128 * 128;
}
static inline size_t lt_aux_bytes(uint32_t units, size_t rows)
{
	return lt_aux_ld(units) / 8 * (rows ? rows : 1);
}

/* The operands of one call (T the activations' type: float, bf16, f16;
 * W in T; b, dW, db fp32); what a call does not read is left NULL. */
template <typename T> struct lt_args {
	size_t rows;
	uint32_t in, out; /* the layer's widths */
	const T *X;	  /* (rows, in) the layer's input: lt_fwd, lt_wgrad */
	const T *W;	  /* (out, in): lt_fwd, lt_dgrad */
	const T *dY;	  /* (rows, out): lt_dgrad, lt_wgrad */
	T *Y;		  /* lt_fwd: (rows, out); lt_dgrad: (rows, in) */
	const float *b;	  /* (out) lt_fwd's bias */
	float *dW;	  /* (out, in) lt_wgrad's result */
	float *db;	  /* (in) lt_dgrad's bias gradient (with aux) */
	void *aux;	  /* the ReLU mask: lt_fwd writes it, lt_dgrad reads it; NULL: none */
};

/* The operands of a layer of `rows` rows, in -> out, nothing else set. */
template <typename T> static inline lt_args<T> lt_args_of(size_t rows, uint32_t in, uint32_t out)
{
	lt_args<T> a;
	memset(&a, 0, sizeof a);
	a.rows = rows, a.in = in, a.out = out;
	return a;
}

/* Return 0 or -1 (reported). */
template <typename T> int lt_fwd(struct cu *c, const lt_args<T> &a);
template <typename T> int lt_dgrad(struct cu *c, const lt_args<T> &a);
template <typename T> int lt_wgrad(struct cu *c, const lt_args<T> &a);

} /* namespace NCF_CUDA_NS */

#endif
