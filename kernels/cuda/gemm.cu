/* gemm.cu - see gemm.cuh. */
#include "gemm.cuh"

namespace NCF_CUDA_NS {

/* Bytes of one element of a cuBLAS type. */
static double elem_bytes(cudaDataType t)
{
	return t == CUDA_R_32F ? 4.0 : 2.0;
}

/* C (m, n) = op(A) op(B) in cuBLAS's column-major terms (beta 0). */
struct gemm_dims {
	cublasOperation_t ta, tb;
	size_t m, n, k;
};

/* The product d of A, B into C; `what` names it for the cost recorder. */
static int gemm(const struct blas *b, const char *what, const gemm_dims &d, const gemm_mat &A,
		const gemm_mat &B, const gemm_mat &C)
{
	if (d.m == 0 || d.n == 0)
		return 0;
	if (d.m > 0x7FFFFFFF || d.n > 0x7FFFFFFF || d.k > 0x7FFFFFFF || A.ld > 0x7FFFFFFF ||
	    B.ld > 0x7FFFFFFF || C.ld > 0x7FFFFFFF) {
		ncf_error("cuda backend: a matrix of %zu x %zu x %zu is too large for cuBLAS", d.m,
			  d.n, d.k);
		return -1;
	}
	cublasComputeType_t ctype =
		A.t == CUDA_R_32F && B.t == CUDA_R_32F ? b->compute_f32 : CUBLAS_COMPUTE_32F;
	float alpha = 1.0f, beta = 0.0f;
	double M = (double)d.m, N = (double)d.n, K = (double)d.k;
	if (NCF_COST(COST_GEMM, what,
		     M * K * elem_bytes(A.t) + K * N * elem_bytes(B.t) + M * N * elem_bytes(C.t),
		     2.0 * M * N * K))
		return 0;
	return CUBLAS_CHECK(cublasGemmEx(b->h, d.ta, d.tb, (int)d.m, (int)d.n, (int)d.k, &alpha, A.p,
					 A.t, (int)A.ld, B.p, B.t, (int)B.ld, &beta, (void *)C.p,
					 C.t, (int)C.ld, ctype, CUBLAS_GEMM_DEFAULT));
}

int lin_fwd(const struct blas *b, const struct gemm_layer &g, gemm_mat X, gemm_mat W, gemm_mat Y)
{
	gemm_dims d = {CUBLAS_OP_T, CUBLAS_OP_N, g.out, g.rows, g.in};
	return gemm(b, g.what, d, W, X, Y);
}

int lin_wgrad(const struct blas *b, const struct gemm_layer &g, gemm_mat dY, gemm_mat X,
	      gemm_mat dW)
{
	gemm_dims d = {CUBLAS_OP_N, CUBLAS_OP_T, g.in, g.out, g.rows};
	return gemm(b, g.what, d, X, dY, dW);
}

int lin_dgrad(const struct blas *b, const struct gemm_layer &g, gemm_mat dY, gemm_mat W,
	      gemm_mat dX)
{
	gemm_dims d = {CUBLAS_OP_N, CUBLAS_OP_N, g.in, g.rows, g.out};
	return gemm(b, g.what, d, W, dY, dX);
}

} /* namespace NCF_CUDA_NS */
