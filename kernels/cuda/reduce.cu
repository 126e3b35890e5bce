/*
 * reduce.cu - the deterministic reductions (kernels.cuh): column sums, the
 * head's weight gradient, the loss sum, segment sums over a sorted batch.
 * Every sum has an order fixed by the sizes alone.
 *
 * Every kernel here is "plain": each thread computes its own outputs from
 * global memory, with no shared memory, barriers or warp primitives, so the
 * same source runs on the CPU under NCF_CUDA_EMULATE (one thread at a time).
 */
#include "kernels.cuh"

namespace NCF_CUDA_NS {

/* ---- deterministic reductions -------------------------------------------- */

/* Groups of one reduction pass over `rows` rows: each thread sums at most
 * 64 rows, g, g + G, ... */
static inline size_t pass_groups(size_t rows)
{
	return rows <= 64 ? 1 : (rows + 63) / 64;
}

size_t colsum_scratch(size_t rows, size_t cols)
{
	size_t g1 = pass_groups(rows), g2 = pass_groups(g1);
	return (g1 + g2) * cols + 2;
}

/* Thread (g, c): out[g][c] = x[g][c] + x[g + G][c] + ... over rows. */
template <typename T>
__global__ void colsum_pass_kernel(const T *__restrict__ x, size_t rows, size_t cols, size_t G,
				   float *__restrict__ out)
{
	size_t t = NCF_TID;
	if (t >= G * cols)
		return;
	size_t g = t / cols, c = t % cols;
	float acc = 0.0f;
	for (size_t r = g; r < rows; r += G)
		acc += to_f32(x[r * cols + c]);
	out[g * cols + c] = acc;
}

/* The passes after the first: (rows, cols) float partials in a, down to
 * one row in out; b is the other half of the scratch. */
static int colsum_rest(float *a, float *b, size_t rows, size_t cols, float *out,
		       cudaStream_t stream)
{
	while (rows > 1) {
		size_t G = pass_groups(rows);
		float *dst = G == 1 ? out : b;
		unsigned blocks;
		if (grid_1d(G * cols, &blocks))
			return -1;
		if (!NCF_COST(COST_KERNEL, "colsum", (rows + (double)G) * cols * 4.0, 0)) {
			NCF_LAUNCH(colsum_pass_kernel<float>, blocks, BLOCK, 0, stream, a, rows, cols,
				   G, dst);
			if (CUDA_CHECK(cudaGetLastError()))
				return -1;
		}
		float *tmp = a;
		a = b;
		b = tmp;
		rows = G;
	}
	return 0;
}

template <typename T>
int colsum_cuda(const T *x, size_t rows, size_t cols, float *out, float *scratch,
		cudaStream_t stream)
{
	if (!cols)
		return 0;
	size_t G = pass_groups(rows), g1 = G;
	float *a = scratch, *b = scratch + g1 * cols;
	float *dst = G == 1 ? out : a;
	unsigned blocks;
	if (grid_1d(G * cols, &blocks))
		return -1;
	if (!NCF_COST(COST_KERNEL, "colsum", ((double)rows * sizeof(T) + G * 4.0) * cols, 0)) {
		NCF_LAUNCH(colsum_pass_kernel<T>, blocks, BLOCK, 0, stream, x, rows, cols, G, dst);
		if (CUDA_CHECK(cudaGetLastError()))
			return -1;
	}
	return G == 1 ? 0 : colsum_rest(a, b, G, cols, out, stream);
}

size_t head_grad_scratch(size_t n, uint32_t F, uint32_t HL)
{
	return colsum_scratch(n, (size_t)F + HL + 1);
}

/* First pass of head_grad_cuda: thread (g, c) over the columns
 * c = [gmf_user gmf_item products (F) | hL (HL) | 1]. */
template <typename T>
__global__ void head_grad_kernel(size_t n, uint32_t F, uint32_t HL, size_t G,
				 const uint32_t *__restrict__ su, const uint32_t *__restrict__ si,
				 const float *__restrict__ gmf_user,
				 const float *__restrict__ gmf_item,
				 const T *__restrict__ hL, const float *__restrict__ dlogit,
				 float *__restrict__ out)
{
	size_t C = (size_t)F + HL + 1;
	size_t t = NCF_TID;
	if (t >= G * C)
		return;
	size_t g = t / C, c = t % C;
	float acc = 0.0f;
	for (size_t r = g; r < n; r += G) {
		float dl = dlogit[r], v;
		if (c < F)
			v = dl * (gmf_user[(size_t)su[r] * F + c] *
				  gmf_item[(size_t)si[r] * F + c]);
		else if (c < (size_t)F + HL)
			v = dl * to_f32(hL[r * HL + (c - F)]);
		else
			v = dl;
		acc += v;
	}
	out[g * C + c] = acc;
}

template <typename T>
int head_grad_cuda(size_t n, uint32_t F, uint32_t HL, const uint32_t *su, const uint32_t *si,
		   const float *gmf_user, const float *gmf_item, const T *hL, const float *dlogit,
		   float *out, float *scratch, cudaStream_t stream)
{
	size_t C = (size_t)F + HL + 1, G = pass_groups(n);
	float *a = scratch, *b = scratch + G * C;
	float *dst = G == 1 ? out : a;
	unsigned blocks;
	if (grid_1d(G * C, &blocks))
		return -1;
	if (!NCF_COST(COST_KERNEL, "head_grad",
		      n * (12.0 + 8.0 * F + HL * (double)sizeof(T)) + G * C * 4.0, 0)) {
		NCF_LAUNCH(head_grad_kernel<T>, blocks, BLOCK, 0, stream, n, F, HL, G, su, si,
			   gmf_user, gmf_item, hL, dlogit, dst);
		if (CUDA_CHECK(cudaGetLastError()))
			return -1;
	}
	return G == 1 ? 0 : colsum_rest(a, b, G, C, out, stream);
}

size_t sum_scratch(size_t n)
{
	size_t g1 = pass_groups(n), g2 = pass_groups(g1);
	return g1 + g2 + 2;
}

template <typename T>
__global__ void sum_pass_kernel(const T *__restrict__ x, size_t n, size_t G,
				double *__restrict__ out)
{
	size_t g = NCF_TID;
	if (g >= G)
		return;
	double acc = 0.0;
	for (size_t r = g; r < n; r += G)
		acc += (double)x[r];
	out[g] = acc;
}

int sum_f64_cuda(const float *x, size_t n, double *out, double *scratch, cudaStream_t stream)
{
	size_t G = pass_groups(n), g1 = G;
	double *a = scratch, *b = scratch + g1;
	unsigned blocks;
	if (grid_1d(G, &blocks))
		return -1;
	if (!NCF_COST(COST_KERNEL, "sum_f64", n * 4.0 + G * 8.0, 0)) {
		NCF_LAUNCH(sum_pass_kernel<float>, blocks, BLOCK, 0, stream, x, n, G,
			   G == 1 ? out : a);
		if (CUDA_CHECK(cudaGetLastError()))
			return -1;
	}
	size_t rows = G;
	while (rows > 1) {
		G = pass_groups(rows);
		double *dst = G == 1 ? out : b;
		if (grid_1d(G, &blocks))
			return -1;
		if (!NCF_COST(COST_KERNEL, "sum_f64", (rows + (double)G) * 8.0, 0)) {
			NCF_LAUNCH(sum_pass_kernel<double>, blocks, BLOCK, 0, stream, a, rows, G,
				   dst);
			if (CUDA_CHECK(cudaGetLastError()))
				return -1;
		}
		double *tmp = a;
		a = b;
		b = tmp;
		rows = G;
	}
	return 0;
}

/* ---- segment sums over a sorted batch ------------------------------------ */

size_t seg_scratch(size_t n, uint32_t H)
{
	return ((n + SEG_CHUNK - 1) / SEG_CHUNK + 1) * (size_t)H;
}

/* Values of segsum_rows_cuda: src[j][h]; finish writes out[k][h]. */
template <typename T> struct rows_value {
	const T *src;
	uint32_t H;
	float *out;
	NCF_DI float value(uint32_t j, uint32_t h) const
	{
		return to_f32(src[(size_t)j * H + h]);
	}
	NCF_DI void finish(uint32_t k, uint32_t h, float acc) const
	{
		out[(size_t)k * H + h] = acc;
	}
};

/* Values of segsum_gmf_cuda: dl[j] * tab[other[j]][f]; finish scales by
 * wg[f] (cpu/train.c step 6: acc[f] += dl * q[f], then gp[f] = wg[f] * acc[f]). */
struct gmf_value {
	const float *dl;
	const uint32_t *other;
	const float *tab;
	const float *wg;
	uint32_t F;
	float *out;
	NCF_DI float value(uint32_t j, uint32_t f) const
	{
		return dl[j] * tab[(size_t)other[j] * F + f];
	}
	NCF_DI void finish(uint32_t k, uint32_t f, float acc) const
	{
		out[(size_t)k * F + f] = wg[f] * acc;
	}
};

/*
 * Pass 1, thread (chunk c, column h): walk the chunk's positions, summing
 * runs of equal keys in order.  A run wholly inside the chunk is finished
 * here.  The run that continues into the next chunk leaves its partial in
 * tail[c]; the run that continues from the previous chunk and ends here
 * leaves its partial in head[c] (a chunk wholly inside one key is a tail).
 */
template <class V>
__global__ void segsum_pass1_kernel(V v, const uint32_t *__restrict__ key,
				    const uint32_t *__restrict__ idx, size_t n, uint32_t H,
				    float *__restrict__ head, float *__restrict__ tail)
{
	size_t chunks = (n + SEG_CHUNK - 1) / SEG_CHUNK;
	size_t t = NCF_TID;
	if (t >= chunks * H)
		return;
	size_t c = t / H;
	uint32_t h = (uint32_t)(t % H);
	size_t lo = c * SEG_CHUNK, hi = lo + SEG_CHUNK < n ? lo + SEG_CHUNK : n;
	uint32_t cur = key[lo];
	int first = 1, cont_in = lo > 0 && key[lo - 1] == cur;
	float acc = 0.0f;
	for (size_t e = lo; e < hi; e++) {
		uint32_t k = key[e];
		if (k != cur) {
			if (first && cont_in)
				head[c * H + h] = acc;
			else
				v.finish(cur, h, acc);
			first = 0;
			cur = k;
			acc = 0.0f;
		}
		acc += v.value(idx[e], h);
	}
	if (hi < n && key[hi] == cur)
		tail[c * H + h] = acc;
	else if (first && cont_in)
		head[c * H + h] = acc;
	else
		v.finish(cur, h, acc);
}

/*
 * Pass 2, thread (chunk c, column h), for a chunk whose first run continues
 * from earlier chunks and ends in this one: find the key's first position
 * (binary search in the sorted keys), then add the tails of the chunks from
 * there on and this chunk's head, left to right.
 */
template <class V>
__global__ void segsum_pass2_kernel(V v, const uint32_t *__restrict__ key, size_t n, uint32_t H,
				    const float *__restrict__ head, const float *__restrict__ tail)
{
	size_t chunks = (n + SEG_CHUNK - 1) / SEG_CHUNK;
	size_t t = NCF_TID;
	if (t >= chunks * H)
		return;
	size_t c = t / H;
	uint32_t h = (uint32_t)(t % H);
	size_t lo = c * SEG_CHUNK, hi = lo + SEG_CHUNK < n ? lo + SEG_CHUNK : n;
	uint32_t K = key[lo];
	if (lo == 0 || key[lo - 1] != K || (hi < n && key[hi] == K))
		return;
	size_t t0 = (size_t)ncf_lower_bound(key, 0, lo, K) / SEG_CHUNK;
	float acc = tail[t0 * H + h];
	for (size_t s = t0 + 1; s < c; s++)
		acc += tail[s * H + h];
	acc += head[c * H + h];
	v.finish(K, h, acc);
}

/* row_bytes: what pass 1 reads per sample besides key and idx; K: keys
 * (at most min(n, K) output rows of H floats are written). */
template <class V>
static int segsum_run(const V &v, const uint32_t *key, const uint32_t *idx, size_t n, uint32_t H,
		      uint32_t K, double row_bytes, float *head, float *tail, cudaStream_t stream)
{
	size_t chunks = (n + SEG_CHUNK - 1) / SEG_CHUNK;
	unsigned blocks;
	if (grid_1d(chunks * H, &blocks))
		return -1;
	if (!blocks)
		return 0;
	double outs = (double)(n < K ? n : K) * H * 4.0, parts = 2.0 * chunks * H * 4.0;
	if (!NCF_COST(COST_KERNEL, "segsum_pass1", n * (8.0 + row_bytes) + outs + parts, 0)) {
		NCF_LAUNCH(segsum_pass1_kernel<V>, blocks, BLOCK, 0, stream, v, key, idx, n, H,
			   head, tail);
		if (CUDA_CHECK(cudaGetLastError()))
			return -1;
	}
	if (chunks < 2)
		return 0;
	if (NCF_COST(COST_KERNEL, "segsum_pass2", chunks * 8.0 + parts, 0))
		return 0;
	NCF_LAUNCH(segsum_pass2_kernel<V>, blocks, BLOCK, 0, stream, v, key, n, H, head, tail);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T>
int segsum_rows_cuda(const uint32_t *key, const uint32_t *idx, size_t n, const T *src, uint32_t H,
		     uint32_t K, float *out, float *head, float *tail, cudaStream_t stream)
{
	rows_value<T> v = {src, H, out};
	return segsum_run(v, key, idx, n, H, K, (double)H * sizeof(T), head, tail, stream);
}

int segsum_gmf_cuda(const uint32_t *key, const uint32_t *idx, size_t n, const float *dl,
		    const uint32_t *other, const float *tab, const float *wg, uint32_t F,
		    uint32_t K, float *out, float *head, float *tail, cudaStream_t stream)
{
	gmf_value v = {dl, other, tab, wg, F, out};
	return segsum_run(v, key, idx, n, F, K, 8.0 + 4.0 * F, head, tail, stream);
}

/* ---- instantiations for the three activation types ---------------------- */

#define NCF_INSTANTIATE(T)                                                                         \
	template int colsum_cuda<T>(const T *, size_t, size_t, float *, float *, cudaStream_t);    \
	template int head_grad_cuda<T>(size_t, uint32_t, uint32_t, const uint32_t *,               \
				       const uint32_t *, const float *, const float *, const T *,  \
				       const float *, float *, float *, cudaStream_t);             \
	template int segsum_rows_cuda<T>(const uint32_t *, const uint32_t *, size_t, const T *,    \
					 uint32_t, uint32_t, float *, float *, float *,            \
					 cudaStream_t);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
