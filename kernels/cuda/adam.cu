/*
 * adam.cu - the dense Adam pass and the fp16 inf/NaN check (kernels.cuh).
 *
 * Every kernel here is "plain": each thread computes its own outputs from
 * global memory, with no shared memory, barriers or warp primitives, so the
 * same source runs on the CPU under NCF_CUDA_EMULATE (one thread at a time).
 */
#include <float.h>

#include "kernels.cuh"

namespace NCF_CUDA_NS {

/* ---- optimizer ------------------------------------------------------------ */

static constexpr launch_facts adam_facts = {BLOCK, 8};
__global__ void NCF_BOUNDS(adam_facts) adam_kernel(adam_pass a)
{
	size_t j = NCF_TID;
	if (j >= a.n || (a.skip && *a.skip))
		return;
	ncf_adam_update(&a.p[j], &a.m[j], &a.v[j], a.g[j] * a.g_scale, &a.k);
}

int adam_cuda(const adam_pass &a, cudaStream_t stream)
{
	size_t n = a.n;
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	/* p, m, v and g loaded at once, p, m and v stored */
	cost_shape sh = cost_shape_for(adam_facts, blocks, 16, 1);
	if (NCF_COST_SHAPED("adam", 28.0 * n, 0, sh))
		return 0;
	NCF_LAUNCH(adam_kernel, blocks, BLOCK, 0, stream, a);
	return CUDA_CHECK(cudaGetLastError());
}

static constexpr launch_facts nonfinite_facts = {BLOCK, 8};
__global__ void NCF_BOUNDS(nonfinite_facts) nonfinite_kernel(const float *__restrict__ g, size_t n, int *flag)
{
	size_t j = NCF_TID;
	if (j >= n)
		return;
	float a = g[j] < 0.0f ? -g[j] : g[j];
	if (!(a <= FLT_MAX)) /* inf, or NaN (every comparison false) */
		*flag = 1;   /* every writer writes 1: no race on the value */
}

int nonfinite_cuda(const float *g, size_t n, int *flag, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	cost_shape sh = cost_shape_for(nonfinite_facts, blocks, 4, 1);
	if (NCF_COST_SHAPED("nonfinite", 4.0 * n, 0, sh))
		return 0;
	NCF_LAUNCH(nonfinite_kernel, blocks, BLOCK, 0, stream, g, n, flag);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- Adam with the 16-bit copy (the training step) ----------------------- */

static constexpr launch_facts adam_cast_facts = {BLOCK, 8};
template <typename T>
__global__ void NCF_BOUNDS(adam_cast_facts)
	adam_cast_kernel(adam_pass a, T *__restrict__ plo, size_t lo_from)
{
	size_t j = NCF_TID;
	if (j >= a.n || (a.skip && *a.skip))
		return;
	ncf_adam_update(&a.p[j], &a.m[j], &a.v[j], a.g[j] * a.g_scale, &a.k);
	if (plo && j >= lo_from)
		plo[j] = from_f32<T>(a.p[j]);
}

template <typename T>
int adam_cast_cuda(const adam_pass &a, T *plo, size_t lo_from, cudaStream_t stream)
{
	size_t n = a.n;
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	double lo = plo && lo_from < n ? (double)(n - lo_from) * sizeof(T) : 0.0;
	cost_shape sh = cost_shape_for(adam_cast_facts, blocks, 16, 1);
	if (NCF_COST_SHAPED(plo ? "adam_cast" : "adam", 28.0 * n + lo, 0, sh))
		return 0;
	NCF_LAUNCH(adam_cast_kernel<T>, blocks, BLOCK, 0, stream, a, plo, lo_from);
	return CUDA_CHECK(cudaGetLastError());
}

template int adam_cast_cuda<float>(const adam_pass &, float *, size_t, cudaStream_t);
template int adam_cast_cuda<bf16>(const adam_pass &, bf16 *, size_t, cudaStream_t);
template int adam_cast_cuda<f16>(const adam_pass &, f16 *, size_t, cudaStream_t);

} /* namespace NCF_CUDA_NS */
