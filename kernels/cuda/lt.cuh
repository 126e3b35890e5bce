/*
 * lt.cuh - dense layers through cuBLASLt with its epilogues, for the lt
 * step path (step_lt.cu): NVIDIA's tuned kernels doing in the product's
 * own epilogue what the fused kernels of mlp.cu do by hand, so that the two
 * can be compared on a GPU.  Row-major in our terms, as gemm.cuh:
 *
 *   lt_fwd:   Y (rows, out) = relu(X W^T + b), and aux, a bit per element of
 *             Y: was it kept by the ReLU (CUBLASLT_EPILOGUE_RELU_AUX_BIAS);
 *   lt_dgrad: dX (rows, in) = (dY W) * relu'(aux of dX's layer)
 *             (CUBLASLT_EPILOGUE_DRELU; aux NULL: no mask);
 *   lt_wgrad: dW (out, in; leading dimension ldd) = dY^T X (leading
 *             dimensions lddy, ldx), and db (out) = the column sums of dY
 *             when db is not NULL (CUBLASLT_EPILOGUE_BGRADB).
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

/* T is the activations' type (float, bf16, f16); W in T; b, dW, db fp32.
 * Return 0 or -1 (reported). */
template <typename T>
int lt_fwd(struct cu *c, size_t rows, uint32_t in, uint32_t out, const T *X, const T *W,
	   const float *b, T *Y, void *aux);
template <typename T>
int lt_dgrad(struct cu *c, size_t rows, uint32_t in, uint32_t out, const T *dY, const T *W,
	     const void *aux, T *dX);
template <typename T>
int lt_wgrad(struct cu *c, size_t rows, uint32_t in, uint32_t out, const T *dY, size_t lddy,
	     const T *X, size_t ldx, float *dW, size_t ldd, float *db);

} /* namespace NCF_CUDA_NS */

#endif
