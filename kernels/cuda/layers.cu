/*
 * layers.cu - the first layer, bias + ReLU + dropout and its backward, and
 * the low-precision copies of the parameters (kernels.cuh).  Elementwise
 * kernels give a thread 8 consecutive elements of a row (one Philox block
 * of dropout bits, one 16-byte load of bf16 or fp16, two of fp32); rows
 * whose width is not a multiple of 8 take a scalar path.  Arrays indexed in
 * loops are indexed by unrolled constants only, so that nvcc keeps them in
 * registers.
 *
 * Every kernel here is "plain": each thread computes its own outputs from
 * global memory, with no shared memory, barriers or warp primitives, so the
 * same source runs on the CPU under NCF_CUDA_EMULATE (one thread at a time).
 */
#include "kernels.cuh"

namespace NCF_CUDA_NS {

/* ---- layer 1, bias + ReLU + dropout, and their backward ----------------- */

/* Thread t: row t / G, units 8w .. 8w+7 with w = t % G, G = ceil(H / 8). */
template <typename T>
__global__ void NCF_PLAIN(6) layer1_kernel(size_t n, uint32_t H, const uint32_t *__restrict__ su,
			      const uint32_t *__restrict__ si, const T *__restrict__ au,
			      const T *__restrict__ ai, const float *__restrict__ b1, int eval_order,
			      int vec, dropout_k dk, const uint32_t *__restrict__ rowpos,
			      T *__restrict__ h1)
{
	uint32_t G = (H + 7) / 8;
	size_t t = NCF_TID;
	if (t >= n * G)
		return;
	size_t j = t / G;
	uint32_t w = (uint32_t)(t % G), h0 = w * 8, cnt = H - h0 < 8 ? H - h0 : 8;
	const T *a = au + (size_t)su[j] * H + h0, *b = ai + (size_t)si[j] * H + h0;
	float va[8], vb[8], out[8];
	load_upto8(a, va, cnt, vec);
	load_upto8(b, vb, cnt, vec);
	ncf_u32x4 bits = dropout_bits_at(dk, rowpos ? rowpos[j] : j, 0, w);
	NCF_UNROLL
	for (uint32_t k = 0; k < 8; k++) {
		float bias = k < cnt ? b1[h0 + k] : 0.0f;
		float x = eval_order ? (va[k] + bias) + vb[k] : (va[k] + vb[k]) + bias;
		float r = relu(x);
		if (dk.active)
			r = r * dropout_mult(dk, bits, k);
		out[k] = r;
	}
	store_upto8(h1 + j * H + h0, out, cnt, vec);
}

template <typename T>
int layer1_cuda(size_t n, uint32_t H, const uint32_t *su, const uint32_t *si, const T *au,
		const T *ai, const float *b1, int eval_order, const dropout_k &dk, T *h1,
		cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n * ((H + 7) / 8), &blocks))
		return -1;
	if (!blocks)
		return 0;
	double es = sizeof(T);
	/* the ids, then both tables' 8 units at once */
	cost_shape sh = cost_shape_of(blocks, BLOCK, 6, 16 * es, 2);
	if (NCF_COST_SHAPED("layer1", n * (8.0 + 3.0 * H * es) + H * 4.0, 0, sh))
		return 0;
	int vec = H % 8 == 0 && aligned16(au) && aligned16(ai) && aligned16(h1);
	NCF_LAUNCH(layer1_kernel<T>, blocks, BLOCK, 0, stream, n, H, su, si, au, ai, b1, eval_order,
		   vec, dk, (const uint32_t *)NULL, h1);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T>
int layer1_rows_cuda(size_t n, uint32_t H, const uint32_t *ru, const uint32_t *ri, const T *au,
		     const T *ai, const float *b1, const dropout_k &dk, const uint32_t *rowpos,
		     uint32_t users, T *h1, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n * ((H + 7) / 8), &blocks))
		return -1;
	if (!blocks)
		return 0;
	double es = sizeof(T), au_rows = n < users ? (double)n : (double)users;
	/* ids and positions per row; au once per distinct user (rows sorted by
	 * user), ai per row; h1 written */
	cost_shape sh = cost_shape_of(blocks, BLOCK, 6, 16 * es, 2);
	if (NCF_COST_SHAPED("layer1_rows", n * (12.0 + 2.0 * H * es) + au_rows * H * es + H * 4.0,
			    0, sh))
		return 0;
	int vec = H % 8 == 0 && aligned16(au) && aligned16(ai) && aligned16(h1);
	NCF_LAUNCH(layer1_kernel<T>, blocks, BLOCK, 0, stream, n, H, ru, ri, au, ai, b1, 0, vec, dk,
		   rowpos, h1);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T>
__global__ void NCF_PLAIN(8) bias_relu_dropout_kernel(size_t n, uint32_t H, T *__restrict__ z,
					 const float *__restrict__ b, int vec, dropout_k dk,
					 uint32_t layer)
{
	uint32_t G = (H + 7) / 8;
	size_t t = NCF_TID;
	if (t >= n * G)
		return;
	size_t j = t / G;
	uint32_t w = (uint32_t)(t % G), h0 = w * 8, cnt = H - h0 < 8 ? H - h0 : 8;
	T *row = z + j * H + h0;
	float x[8];
	load_upto8(row, x, cnt, vec);
	ncf_u32x4 bits = dropout_bits_at(dk, j, layer, w);
	NCF_UNROLL
	for (uint32_t k = 0; k < 8; k++) {
		float v = x[k] + (k < cnt ? b[h0 + k] : 0.0f);
		float r = relu(v);
		if (dk.active)
			r = r * dropout_mult(dk, bits, k);
		x[k] = r;
	}
	store_upto8(row, x, cnt, vec);
}

template <typename T>
int bias_relu_dropout_cuda(size_t n, uint32_t H, T *z, const float *b, const dropout_k &dk,
			   uint32_t layer, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n * ((H + 7) / 8), &blocks))
		return -1;
	if (!blocks)
		return 0;
	cost_shape sh = cost_shape_of(blocks, BLOCK, 8, 8.0 * sizeof(T), 1);
	if (NCF_COST_SHAPED("bias_relu_dropout", 2.0 * n * H * sizeof(T) + H * 4.0, 0, sh))
		return 0;
	int vec = H % 8 == 0 && aligned16(z);
	NCF_LAUNCH(bias_relu_dropout_kernel<T>, blocks, BLOCK, 0, stream, n, H, z, b, vec, dk,
		   layer);
	return CUDA_CHECK(cudaGetLastError());
}

/* Thread t: elements 8t .. 8t+7 of the flat arrays. */
template <typename T>
__global__ void NCF_PLAIN(8) relu_dropout_back_kernel(size_t count, T *__restrict__ dh,
					 const T *__restrict__ h, float scale, int vec)
{
	size_t e0 = NCF_TID * 8;
	if (e0 >= count)
		return;
	if (vec) {
		float d[8], hv[8];
		load8(dh + e0, d);
		load8(h + e0, hv);
		NCF_UNROLL
		for (int k = 0; k < 8; k++)
			d[k] = hv[k] > 0.0f ? d[k] * scale : 0.0f;
		store8(dh + e0, d);
		return;
	}
	size_t cnt = count - e0 < 8 ? count - e0 : 8;
	for (size_t k = 0; k < cnt; k++) {
		float hv = to_f32(h[e0 + k]);
		dh[e0 + k] = from_f32<T>(hv > 0.0f ? to_f32(dh[e0 + k]) * scale : 0.0f);
	}
}

template <typename T>
int relu_dropout_back_cuda(size_t count, T *dh, const T *h, float scale, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d((count + 7) / 8, &blocks))
		return -1;
	if (!blocks)
		return 0;
	cost_shape sh = cost_shape_of(blocks, BLOCK, 8, 16.0 * sizeof(T), 1);
	if (NCF_COST_SHAPED("relu_dropout_back", 3.0 * count * sizeof(T), 0, sh))
		return 0;
	int vec = count % 8 == 0 && aligned16(dh) && aligned16(h);
	NCF_LAUNCH(relu_dropout_back_kernel<T>, blocks, BLOCK, 0, stream, count, dh, h, scale, vec);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- low-precision copies ------------------------------------------------ */

template <typename T>
__global__ void NCF_PLAIN(8) cast_kernel(const float *__restrict__ x, T *__restrict__ y, size_t n)
{
	size_t j = NCF_TID;
	if (j < n)
		y[j] = from_f32<T>(x[j]);
}

template <typename T> int cast_cuda(const float *x, T *y, size_t n, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	cost_shape sh = cost_shape_of(blocks, BLOCK, 8, 4, 1);
	if (NCF_COST_SHAPED("cast", n * (4.0 + sizeof(T)), 0, sh))
		return 0;
	NCF_LAUNCH(cast_kernel<T>, blocks, BLOCK, 0, stream, x, y, n);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- instantiations for the three activation types ---------------------- */

#define NCF_INSTANTIATE(T)                                                                         \
	template int layer1_cuda<T>(size_t, uint32_t, const uint32_t *, const uint32_t *,          \
				    const T *, const T *, const float *, int, const dropout_k &,   \
				    T *, cudaStream_t);                                            \
	template int layer1_rows_cuda<T>(size_t, uint32_t, const uint32_t *, const uint32_t *,     \
					 const T *, const T *, const float *, const dropout_k &,   \
					 const uint32_t *, uint32_t, T *, cudaStream_t);           \
	template int bias_relu_dropout_cuda<T>(size_t, uint32_t, T *, const float *,               \
					       const dropout_k &, uint32_t, cudaStream_t);         \
	template int relu_dropout_back_cuda<T>(size_t, T *, const T *, float, cudaStream_t);       \
	template int cast_cuda<T>(const float *, T *, size_t, cudaStream_t);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
