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
static constexpr launch_facts layer1_facts = {BLOCK, 6};
template <typename T>
__global__ void NCF_BOUNDS(layer1_facts)
	layer1_kernel(layer1_rows<T> a, int eval_order, int vec, dropout_k dk,
		      const uint32_t *__restrict__ rowpos)
{
	uint32_t H = a.H, G = (H + 7) / 8;
	size_t t = NCF_TID;
	if (t >= a.n * G)
		return;
	size_t j = t / G;
	uint32_t w = (uint32_t)(t % G), h0 = w * 8, cnt = H - h0 < 8 ? H - h0 : 8;
	const T *pa = a.au + (size_t)a.users[j] * H + h0, *pb = a.ai + (size_t)a.items[j] * H + h0;
	float va[8], vb[8], out[8];
	load_upto8(pa, va, cnt, vec);
	load_upto8(pb, vb, cnt, vec);
	ncf_u32x4 bits = dropout_bits_at(dk, rowpos ? rowpos[j] : j, 0, w);
	NCF_UNROLL
	for (uint32_t k = 0; k < 8; k++) {
		float bias = k < cnt ? a.b1[h0 + k] : 0.0f;
		float x = eval_order ? (va[k] + bias) + vb[k] : (va[k] + vb[k]) + bias;
		float r = relu(x);
		if (dk.active)
			r = r * dropout_mult(dk, bits, k);
		out[k] = r;
	}
	store_upto8(a.h1 + j * H + h0, out, cnt, vec);
}

/* 16-byte pieces for a's rows? */
template <typename T> static int layer1_vec(const layer1_rows<T> &a)
{
	return a.H % 8 == 0 && aligned16(a.au) && aligned16(a.ai) && aligned16(a.h1);
}

template <typename T> int layer1_cuda(const layer1_rows<T> &a, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(a.n * ((a.H + 7) / 8), &blocks))
		return -1;
	if (!blocks)
		return 0;
	double es = sizeof(T);
	/* the ids, then both tables' 8 units at once */
	cost_shape sh = cost_shape_for(layer1_facts, blocks, 16 * es, 2);
	if (NCF_COST_SHAPED("layer1", a.n * (8.0 + 3.0 * a.H * es) + a.H * 4.0, 0, sh))
		return 0;
	dropout_k none;
	memset(&none, 0, sizeof none);
	NCF_LAUNCH(layer1_kernel<T>, blocks, BLOCK, 0, stream, a, 1, layer1_vec(a), none,
		   (const uint32_t *)NULL);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T>
int layer1_rows_cuda(const layer1_rows<T> &a, const dropout_k &dk, const uint32_t *rowpos,
		     uint32_t users, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(a.n * ((a.H + 7) / 8), &blocks))
		return -1;
	if (!blocks)
		return 0;
	size_t n = a.n;
	double es = sizeof(T), au_rows = n < users ? (double)n : (double)users;
	/* ids and positions per row; au once per distinct user (rows sorted by
	 * user), ai per row; h1 written */
	cost_shape sh = cost_shape_for(layer1_facts, blocks, 16 * es, 2);
	if (NCF_COST_SHAPED("layer1_rows", n * (12.0 + 2.0 * a.H * es) + au_rows * a.H * es + a.H * 4.0,
			    0, sh))
		return 0;
	NCF_LAUNCH(layer1_kernel<T>, blocks, BLOCK, 0, stream, a, 0, layer1_vec(a), dk, rowpos);
	return CUDA_CHECK(cudaGetLastError());
}

static constexpr launch_facts bias_relu_dropout_facts = {BLOCK, 8};
template <typename T>
__global__ void NCF_BOUNDS(bias_relu_dropout_facts) bias_relu_dropout_kernel(size_t n, uint32_t H, T *__restrict__ z,
					 const float *__restrict__ b, int vec, dropout_k dk,
					 uint32_t layer, const uint32_t *__restrict__ rowpos)
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
	ncf_u32x4 bits = dropout_bits_at(dk, rowpos ? rowpos[j] : j, layer, w);
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
			   uint32_t layer, const uint32_t *rowpos, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n * ((H + 7) / 8), &blocks))
		return -1;
	if (!blocks)
		return 0;
	/* z read and written, the positions when dropout reads them */
	cost_shape sh = cost_shape_for(bias_relu_dropout_facts, blocks, 8.0 * sizeof(T), rowpos ? 2 : 1);
	if (NCF_COST_SHAPED("bias_relu_dropout",
			    2.0 * n * H * sizeof(T) + H * 4.0 + (rowpos && dk.active ? 4.0 * n : 0.0),
			    0, sh))
		return 0;
	int vec = H % 8 == 0 && aligned16(z);
	NCF_LAUNCH(bias_relu_dropout_kernel<T>, blocks, BLOCK, 0, stream, n, H, z, b, vec, dk, layer,
		   rowpos);
	return CUDA_CHECK(cudaGetLastError());
}

/* Thread t: units 8w .. 8w+7 (w = t % G, G = ceil(H / 8)) of rows q
 * BWD_ROWS .. + BWD_ROWS (q = t / G), in order, BACK_UNROLL rows' loads at
 * a time; their column sums to part row q. */
enum { BACK_UNROLL = 4 };
static constexpr launch_facts relu_dropout_back_facts = {BLOCK, 8};
template <typename T>
__global__ void NCF_BOUNDS(relu_dropout_back_facts) relu_dropout_back_kernel(size_t n, uint32_t H, T *__restrict__ dx,
					 const T *__restrict__ h, float scale, int vec,
					 float *__restrict__ part)
{
	uint32_t G = (H + 7) / 8;
	size_t t = NCF_TID, q = t / G;
	size_t r0 = q * BWD_ROWS;
	if (r0 >= n)
		return;
	uint32_t w = (uint32_t)(t % G), h0 = 8 * w, cnt = H - h0 < 8 ? H - h0 : 8;
	size_t r1 = n - r0 < BWD_ROWS ? n : r0 + BWD_ROWS;
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	for (size_t r = r0; r < r1; r += BACK_UNROLL) {
		float d[BACK_UNROLL][8], hv[BACK_UNROLL][8];
		NCF_UNROLL
		for (unsigned u = 0; u < BACK_UNROLL; u++)
			if (r + u < r1) {
				load_upto8(dx + (r + u) * H + h0, d[u], cnt, vec);
				load_upto8(h + (r + u) * H + h0, hv[u], cnt, vec);
			}
		NCF_UNROLL
		for (unsigned u = 0; u < BACK_UNROLL; u++) {
			if (r + u >= r1)
				continue;
			NCF_UNROLL
			for (int e = 0; e < 8; e++) {
				d[u][e] = hv[u][e] > 0.0f ? d[u][e] * scale : 0.0f;
				acc[e] += d[u][e];
			}
			store_upto8(dx + (r + u) * H + h0, d[u], cnt, vec);
		}
	}
	for (uint32_t e = 0; e < cnt; e++)
		part[q * H + h0 + e] = acc[e];
}

template <typename T>
int relu_dropout_back_cuda(size_t n, uint32_t H, T *dx, const T *h, float scale, float *part,
			   cudaStream_t stream)
{
	size_t tiles = (n + BWD_ROWS - 1) / BWD_ROWS;
	unsigned blocks;
	if (grid_1d(tiles * ((H + 7) / 8), &blocks))
		return -1;
	if (!blocks)
		return 0;
	/* dx read and written, h read, the partials written; a thread's rows
	 * BACK_UNROLL at a time */
	double es = sizeof(T);
	cost_shape sh = cost_shape_for(relu_dropout_back_facts, blocks, BACK_UNROLL * 16.0 * es,
				      (double)BWD_ROWS / BACK_UNROLL);
	if (NCF_COST_SHAPED("relu_dropout_back", 3.0 * n * H * es + tiles * H * 4.0, 0, sh))
		return 0;
	int vec = H % 8 == 0 && aligned16(dx) && aligned16(h);
	NCF_LAUNCH(relu_dropout_back_kernel<T>, blocks, BLOCK, 0, stream, n, H, dx, h, scale, vec,
		   part);
	return CUDA_CHECK(cudaGetLastError());
}

/* Thread t: row t / G, units 8w .. 8w+7 with w = t % G, G = ceil(H / 8). */
static constexpr launch_facts dropout_mul_facts = {BLOCK, 8};
template <typename T>
__global__ void NCF_BOUNDS(dropout_mul_facts) dropout_mul_kernel(size_t n, uint32_t H, T *__restrict__ x,
						 int vec, dropout_k dk, uint32_t layer,
						 const uint32_t *__restrict__ rowpos)
{
	uint32_t G = (H + 7) / 8;
	size_t t = NCF_TID;
	if (t >= n * G)
		return;
	size_t j = t / G;
	uint32_t w = (uint32_t)(t % G), h0 = w * 8, cnt = H - h0 < 8 ? H - h0 : 8;
	T *row = x + j * H + h0;
	float v[8];
	load_upto8(row, v, cnt, vec);
	ncf_u32x4 bits = dropout_bits_at(dk, rowpos ? rowpos[j] : j, layer, w);
	NCF_UNROLL
	for (uint32_t k = 0; k < 8; k++)
		v[k] = v[k] * dropout_mult(dk, bits, k);
	store_upto8(row, v, cnt, vec);
}

template <typename T>
int dropout_mul_cuda(size_t n, uint32_t H, T *x, const dropout_k &dk, uint32_t layer,
		     const uint32_t *rowpos, cudaStream_t stream)
{
	if (!dk.active)
		return 0;
	unsigned blocks;
	if (grid_1d(n * ((H + 7) / 8), &blocks))
		return -1;
	if (!blocks)
		return 0;
	cost_shape sh = cost_shape_for(dropout_mul_facts, blocks, 8.0 * sizeof(T) + 4, 2);
	if (NCF_COST_SHAPED("dropout", 2.0 * n * H * sizeof(T) + (rowpos ? 4.0 * n : 0.0), 0, sh))
		return 0;
	int vec = H % 8 == 0 && aligned16(x);
	NCF_LAUNCH(dropout_mul_kernel<T>, blocks, BLOCK, 0, stream, n, H, x, vec, dk, layer, rowpos);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- low-precision copies ------------------------------------------------ */

static constexpr launch_facts cast_facts = {BLOCK, 8};
template <typename T>
__global__ void NCF_BOUNDS(cast_facts) cast_kernel(const float *__restrict__ x, T *__restrict__ y, size_t n)
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
	cost_shape sh = cost_shape_for(cast_facts, blocks, 4, 1);
	if (NCF_COST_SHAPED("cast", n * (4.0 + sizeof(T)), 0, sh))
		return 0;
	NCF_LAUNCH(cast_kernel<T>, blocks, BLOCK, 0, stream, x, y, n);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- instantiations for the three activation types ---------------------- */

#define NCF_INSTANTIATE(T)                                                                         \
	template int layer1_cuda<T>(const layer1_rows<T> &, cudaStream_t);                         \
	template int layer1_rows_cuda<T>(const layer1_rows<T> &, const dropout_k &,                \
					 const uint32_t *, uint32_t, cudaStream_t);                \
	template int bias_relu_dropout_cuda<T>(size_t, uint32_t, T *, const float *,               \
					       const dropout_k &, uint32_t, const uint32_t *,      \
					       cudaStream_t);                                      \
	template int relu_dropout_back_cuda<T>(size_t, uint32_t, T *, const T *, float, float *,   \
					       cudaStream_t);                                      \
	template int dropout_mul_cuda<T>(size_t, uint32_t, T *, const dropout_k &, uint32_t,       \
					 const uint32_t *, cudaStream_t);                          \
	template int cast_cuda<T>(const float *, T *, size_t, cudaStream_t);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
