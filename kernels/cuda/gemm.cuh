/*
 * gemm.cuh - the dense products of the cuda backend through cuBLAS, row
 * major, each named for the cost recorder (cost.cuh) and checked
 * (CUBLAS_CHECK): the launcher level of a GEMM, as kernels.cuh is of a
 * kernel.  fp32 operands use the backend's fp32 compute type (fp32 pinned,
 * or TF32 tensor cores); 16-bit operands accumulate in fp32.
 *
 * Legend as kernels.cuh: rows of the product, `in` and `out` the layer's
 * input and output widths; W (out, in) with leading dimension ldw.
 */
#ifndef NCF_CUDA_GEMM_CUH
#define NCF_CUDA_GEMM_CUH

#include "common.cuh"
#include "cost.cuh"

namespace NCF_CUDA_NS {

/* A cuBLAS handle and the compute type of its fp32 products. */
struct blas {
	cublasHandle_t h;
	cublasComputeType_t compute_f32; /* CUBLAS_COMPUTE_32F or _32F_FAST_TF32 */
};

/* An operand of a product: row-major at p, of cuBLAS type t, leading
 * dimension ld (an output's p is written). */
struct gemm_mat {
	const void *p;
	cudaDataType t;
	size_t ld;
};
/* A layer's product: rows, its input and output widths, and the name the
 * cost recorder gives it. */
struct gemm_layer {
	const char *what;
	size_t rows, in, out;
};

/* Y (rows, out) = X (rows, in) W^T. */
int lin_fwd(const struct blas *b, const struct gemm_layer &g, gemm_mat X, gemm_mat W, gemm_mat Y);
/* dW (out, in; fp32) = dY^T X: dY (rows, out), X (rows, in). */
int lin_wgrad(const struct blas *b, const struct gemm_layer &g, gemm_mat dY, gemm_mat X,
	      gemm_mat dW);
/* dX (rows, in) = dY (rows, out) W. */
int lin_dgrad(const struct blas *b, const struct gemm_layer &g, gemm_mat dY, gemm_mat W,
	      gemm_mat dX);

} /* namespace NCF_CUDA_NS */

#endif
