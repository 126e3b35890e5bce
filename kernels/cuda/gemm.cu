/* gemm.cu - see gemm.cuh. */
#include "gemm.cuh"

namespace NCF_CUDA_NS {

/* Bytes of one element of a cuBLAS type. */
static double elem_bytes(cudaDataType t)
{
	return t == CUDA_R_32F ? 4.0 : 2.0;
}

/* C (m, n) = op(A) op(B) in cuBLAS's column-major terms (beta 0); `what`
 * names it for the cost recorder. */
static int gemm(const struct blas *b, const char *what, cublasOperation_t ta,
		cublasOperation_t tb, size_t m, size_t n, size_t k, const void *A, cudaDataType at,
		size_t lda, const void *B, cudaDataType bt, size_t ldb, void *C, cudaDataType ct,
		size_t ldc)
{
	if (m == 0 || n == 0)
		return 0;
	if (m > 0x7FFFFFFF || n > 0x7FFFFFFF || k > 0x7FFFFFFF || lda > 0x7FFFFFFF ||
	    ldb > 0x7FFFFFFF || ldc > 0x7FFFFFFF) {
		ncf_error("cuda backend: a matrix of %zu x %zu x %zu is too large for cuBLAS", m, n,
			  k);
		return -1;
	}
	cublasComputeType_t ctype =
		at == CUDA_R_32F && bt == CUDA_R_32F ? b->compute_f32 : CUBLAS_COMPUTE_32F;
	float alpha = 1.0f, beta = 0.0f;
	double M = (double)m, N = (double)n, K = (double)k;
	if (NCF_COST(COST_GEMM, what,
		     M * K * elem_bytes(at) + K * N * elem_bytes(bt) + M * N * elem_bytes(ct),
		     2.0 * M * N * K))
		return 0;
	return CUBLAS_CHECK(cublasGemmEx(b->h, ta, tb, (int)m, (int)n, (int)k, &alpha, A, at,
					 (int)lda, B, bt, (int)ldb, &beta, C, ct, (int)ldc, ctype,
					 CUBLAS_GEMM_DEFAULT));
}

int lin_fwd(const struct blas *b, const char *what, size_t rows, size_t in, size_t out,
	    const void *X, cudaDataType xt, size_t ldx, const void *W, cudaDataType wt, size_t ldw,
	    void *Y, cudaDataType yt, size_t ldy)
{
	return gemm(b, what, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, W, wt, ldw, X, xt, ldx, Y,
		    yt, ldy);
}

int lin_wgrad(const struct blas *b, const char *what, size_t rows, size_t in, size_t out,
	      const void *dY, cudaDataType dt, size_t lddy, const void *X, cudaDataType xt,
	      size_t ldx, float *dW, size_t ldd)
{
	return gemm(b, what, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, X, xt, ldx, dY, dt, lddy, dW,
		    CUDA_R_32F, ldd);
}

int lin_dgrad(const struct blas *b, const char *what, size_t rows, size_t in, size_t out,
	      const void *dY, cudaDataType dt, size_t lddy, const void *W, cudaDataType wt,
	      size_t ldw, void *dX, cudaDataType xt, size_t lddx)
{
	return gemm(b, what, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, W, wt, ldw, dY, dt, lddy, dX,
		    xt, lddx);
}

} /* namespace NCF_CUDA_NS */
