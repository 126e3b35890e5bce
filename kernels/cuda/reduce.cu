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
__global__ void NCF_PLAIN(8) colsum_pass_kernel(const T *__restrict__ x, size_t rows, size_t cols, size_t G,
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
		/* a thread adds its <= 64 rows one load at a time */
		cost_shape sh = cost_shape_of(blocks, BLOCK, 8, 4, (double)(rows < 64 ? rows : 64));
		if (!NCF_COST_SHAPED("colsum", (rows + (double)G) * cols * 4.0, 0, sh)) {
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
	cost_shape sh = cost_shape_of(blocks, BLOCK, 8, sizeof(T), (double)(rows < 64 ? rows : 64));
	if (!NCF_COST_SHAPED("colsum", ((double)rows * sizeof(T) + G * 4.0) * cols, 0, sh)) {
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
__global__ void NCF_PLAIN(8) head_grad_kernel(size_t n, uint32_t F, uint32_t HL, size_t G,
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
	/* a row's ids, then its values: two round trips a row, <= 64 rows */
	cost_shape sh = cost_shape_of(blocks, BLOCK, 8, 8, 2.0 * (n < 64 ? n : 64));
	if (!NCF_COST_SHAPED("head_grad", n * (12.0 + 8.0 * F + HL * (double)sizeof(T)) + G * C * 4.0,
			     0, sh)) {
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
__global__ void NCF_PLAIN(8) sum_pass_kernel(const T *__restrict__ x, size_t n, size_t G,
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
	cost_shape sh = cost_shape_of(blocks, BLOCK, 8, 4, (double)(n < 64 ? n : 64));
	if (!NCF_COST_SHAPED("sum_f64", n * 4.0 + G * 8.0, 0, sh)) {
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
		cost_shape sh2 = cost_shape_of(blocks, BLOCK, 8, 8, (double)(rows < 64 ? rows : 64));
		if (!NCF_COST_SHAPED("sum_f64", (rows + (double)G) * 8.0, 0, sh2)) {
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
__global__ void NCF_PLAIN(5) segsum_pass1_kernel(V v, const uint32_t *__restrict__ key,
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
__global__ void NCF_PLAIN(8) segsum_pass2_kernel(V v, const uint32_t *__restrict__ key, size_t n, uint32_t H,
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
	/* a chunk's positions one after another: key and idx, then the value
	 * (gathered through idx): two round trips a position */
	cost_shape sh = cost_shape_of(blocks, BLOCK, 5, 8, 2.0 * SEG_CHUNK);
	if (!NCF_COST_SHAPED("segsum_pass1", n * (8.0 + row_bytes) + outs + parts, 0, sh)) {
		NCF_LAUNCH(segsum_pass1_kernel<V>, blocks, BLOCK, 0, stream, v, key, idx, n, H,
			   head, tail);
		if (CUDA_CHECK(cudaGetLastError()))
			return -1;
	}
	if (chunks < 2)
		return 0;
	/* a key over many chunks: a search, then its chunks' tails one by one
	 * (the longest key of a sorted batch, COST_LONGEST_ITEM) */
	double longest = COST_LONGEST_ITEM * n / SEG_CHUNK + 2;
	cost_shape sh2 = cost_shape_of(blocks, BLOCK, 8, 4, 20 + longest);
	if (NCF_COST_SHAPED("segsum_pass2", chunks * 8.0 + parts, 0, sh2))
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

/* ---- the fused step's reductions ------------------------------------------ */

/*
 * Blocks of 256 threads, 32 columns by 8 row lanes: thread (j, c) of block
 * b takes column 32 b + c of the segments' columns side by side and sums
 * its rows j, j + 8, j + 16, ... in order (a warp reads 32 neighbouring
 * columns of a row: one coalesced access; RP_UNROLL rows' loads are in
 * flight before their additions), then the 8 lanes' sums are
 * added in a fixed tree.  The last block sums the loss (256 lanes, then a
 * tree) in double.  An order fixed by the sizes alone.
 */
enum { RP_COLS = 32, RP_LANES = 8, RP_THREADS = RP_COLS * RP_LANES, RP_UNROLL = 16 };

__global__ void __launch_bounds__(RP_THREADS, 6) reduce_partials_kernel(part_map m, uint32_t blocks)
{
	__shared__ float sf[RP_LANES][RP_COLS];
	__shared__ double sd[RP_THREADS];
	unsigned t = threadIdx.x, c = t % RP_COLS, j = t / RP_COLS;
	if (blockIdx.x + 1 < blocks) {
		uint32_t s = 0, col = blockIdx.x * RP_COLS + c;
		while (s < m.n && col >= m.seg[s].cols)
			col -= m.seg[s++].cols;
		float acc = 0.0f;
		if (s < m.n) {
			/* RP_UNROLL rows' loads in flight, then their additions in
			 * row order: the sum of one pass in order */
			const float *src = m.seg[s].src + col;
			size_t ld = m.seg[s].ld;
			uint32_t rows = m.seg[s].rows, r = j;
			for (; r + (RP_UNROLL - 1) * RP_LANES < rows; r += RP_UNROLL * RP_LANES) {
				float x[RP_UNROLL];
				NCF_UNROLL
				for (unsigned u = 0; u < RP_UNROLL; u++)
					x[u] = src[(size_t)(r + u * RP_LANES) * ld];
				NCF_UNROLL
				for (unsigned u = 0; u < RP_UNROLL; u++)
					acc += x[u];
			}
			for (; r < rows; r += RP_LANES)
				acc += src[(size_t)r * ld];
		}
		sf[j][c] = acc;
		__syncthreads();
		for (unsigned w = RP_LANES / 2; w > 0; w >>= 1) {
			if (j < w)
				sf[j][c] += sf[j + w][c];
			__syncthreads();
		}
		if (j == 0 && s < m.n)
			m.seg[s].dst[col] = sf[0][c];
		return;
	}
	double acc = 0;
	for (uint32_t r = t; r < m.loss_rows; r += RP_THREADS)
		acc += m.loss[r];
	sd[t] = acc;
	__syncthreads();
	for (unsigned w = RP_THREADS / 2; w > 0; w >>= 1) {
		if (t < w)
			sd[t] += sd[t + w];
		__syncthreads();
	}
	if (t == 0) {
		*m.loss_out = sd[0];
		if (m.loss_acc)
			*m.loss_acc += sd[0];
	}
}

int reduce_partials_cuda(const part_map &m, cudaStream_t stream)
{
	size_t cols = 0;
	double bytes = m.loss_rows * 8.0 + 16.0;
	for (uint32_t s = 0; s < m.n; s++) {
		cols += m.seg[s].cols;
		bytes += ((double)m.seg[s].rows + 1) * m.seg[s].cols * 4.0;
	}
	size_t blocks = (cols + RP_COLS - 1) / RP_COLS + 1;
	if (blocks > 0x7FFFFFFFu) {
		ncf_error("cuda backend: %zu partial sums are more than one launch takes", cols);
		return -1;
	}
	/* a lane adds its column's rows r, r + RP_LANES, ..., RP_UNROLL loads at
	 * a time: the longest segment's rows / RP_LANES / RP_UNROLL round trips */
	double longest = 0;
	for (uint32_t s = 0; s < m.n; s++)
		if (m.seg[s].rows > longest)
			longest = m.seg[s].rows;
	cost_shape sh = cost_shape_of((double)blocks, RP_THREADS, 6, 4.0 * RP_UNROLL,
				      ceil(longest / RP_LANES / RP_UNROLL) + RP_UNROLL + 3);
	if (NCF_COST_SHAPED("reduce_partials", bytes, 0, sh))
		return 0;
	NCF_LAUNCH_SYNC(reduce_partials_kernel, (unsigned)blocks, RP_THREADS, 0, stream, m,
			(uint32_t)blocks);
	return CUDA_CHECK(cudaGetLastError());
}

/*
 * The per-key sums (key_grad_cuda).  A slot is (key k, piece g) of G =
 * ceil(H / 8) + ceil(F / 8) pieces: g < ceil(H / 8): dA[k][8g .. +8] = the
 * sum of dz's rows of key k; else dE[k][f .. +8] = wg[f..] * the sum of
 * dl[row] tab[other[row]][f..], f = 8 (g - ceil(H / 8)); the rows of key k at
 * positions off[k] .. off[k + 1], row = idx[p] (idx NULL: p).  A block is
 * KG_SLOTS slots by KG_SPLIT threads: a key of more than KG_SHORT rows is
 * split into KG_SPLIT runs of consecutive rows, each summed in order by its
 * own thread (KG_UNROLL rows' loads in flight at a time), then the runs'
 * sums are added in run order; a shorter key is summed whole by the first
 * thread (the sum of one pass in order).  So the most-rated item's rows
 * (740 of a batch of 2^20 on MovieLens-20M) are not one thread's serial
 * tail.  Every key's slot is written: nothing is cleared first.
 */
enum { KG_SPLIT = 4, KG_SLOTS = BLOCK / KG_SPLIT, KG_SHORT = 16, KG_UNROLL = 4 };

/* The sum over positions [a, b) of dz's rows (h0, cnt of its 8 units). */
template <typename T>
NCF_DI void key_rows_dz(float acc[8], uint32_t a, uint32_t b, const uint32_t *__restrict__ idx,
			const T *__restrict__ dz, uint32_t H, uint32_t h0, uint32_t cnt, int vec)
{
	uint32_t p = a;
	for (; p + KG_UNROLL <= b; p += KG_UNROLL) {
		float x[KG_UNROLL][8];
		NCF_UNROLL
		for (unsigned u = 0; u < KG_UNROLL; u++) {
			uint32_t row = idx ? idx[p + u] : p + u;
			load_upto8(dz + (size_t)row * H + h0, x[u], cnt, vec);
		}
		NCF_UNROLL
		for (unsigned u = 0; u < KG_UNROLL; u++)
			NCF_UNROLL
			for (int e = 0; e < 8; e++)
				acc[e] += x[u][e];
	}
	for (; p < b; p++) {
		float x[8];
		uint32_t row = idx ? idx[p] : p;
		load_upto8(dz + (size_t)row * H + h0, x, cnt, vec);
		NCF_UNROLL
		for (int e = 0; e < 8; e++)
			acc[e] += x[e];
	}
}

/* The sum over positions [a, b) of dl[row] tab[other[row]] (f0, cnt). */
NCF_DI void key_rows_gmf(float acc[8], uint32_t a, uint32_t b, const uint32_t *__restrict__ idx,
			 const float *__restrict__ dl, const uint32_t *__restrict__ other,
			 const float *__restrict__ tab, uint32_t F, uint32_t f0, uint32_t cnt,
			 int vec)
{
	uint32_t p = a;
	for (; p + KG_UNROLL <= b; p += KG_UNROLL) {
		float x[KG_UNROLL][8], d[KG_UNROLL];
		NCF_UNROLL
		for (unsigned u = 0; u < KG_UNROLL; u++) {
			uint32_t row = idx ? idx[p + u] : p + u;
			d[u] = dl[row];
			load_upto8(tab + (size_t)other[row] * F + f0, x[u], cnt, vec);
		}
		NCF_UNROLL
		for (unsigned u = 0; u < KG_UNROLL; u++)
			NCF_UNROLL
			for (int e = 0; e < 8; e++)
				acc[e] += d[u] * x[u][e];
	}
	for (; p < b; p++) {
		float x[8];
		uint32_t row = idx ? idx[p] : p;
		float d = dl[row];
		load_upto8(tab + (size_t)other[row] * F + f0, x, cnt, vec);
		NCF_UNROLL
		for (int e = 0; e < 8; e++)
			acc[e] += d * x[e];
	}
}

template <typename T>
__global__ void __launch_bounds__(BLOCK, 4)
	key_grad_kernel(uint32_t K, uint32_t H, uint32_t F, const uint32_t *__restrict__ off,
			const uint32_t *__restrict__ idx, const T *__restrict__ dz,
			const float *__restrict__ dl, const uint32_t *__restrict__ other,
			const float *__restrict__ tab, const float *__restrict__ wg, int vecH,
			int vecF, float *__restrict__ dA, float *__restrict__ dE)
{
	__shared__ float runs[KG_SPLIT - 1][KG_SLOTS][8];
	uint32_t GH = (H + 7) / 8, G = GH + (F + 7) / 8;
	unsigned slot = threadIdx.x % KG_SLOTS, q = threadIdx.x / KG_SLOTS;
	size_t t = (size_t)blockIdx.x * KG_SLOTS + slot;
	int live = t < (size_t)K * G;
	uint32_t k = live ? (uint32_t)(t / G) : 0, g = live ? (uint32_t)(t % G) : 0;
	uint32_t lo = live ? off[k] : 0, hi = live ? off[k + 1] : 0, len = hi - lo;
	int split = len > KG_SHORT;
	uint32_t a = lo, b = hi; /* this thread's run */
	if (split) {
		a = lo + (uint32_t)((uint64_t)len * q / KG_SPLIT);
		b = lo + (uint32_t)((uint64_t)len * (q + 1) / KG_SPLIT);
	} else if (q) {
		a = b = hi;
	}
	float acc[8];
	NCF_UNROLL
	for (int e = 0; e < 8; e++)
		acc[e] = 0.0f;
	uint32_t h0 = 8 * g, cnt = 0;
	if (live && g < GH) {
		cnt = H - h0 < 8 ? H - h0 : 8;
		key_rows_dz(acc, a, b, idx, dz, H, h0, cnt, vecH);
	} else if (live) {
		h0 = 8 * (g - GH);
		cnt = F - h0 < 8 ? F - h0 : 8;
		key_rows_gmf(acc, a, b, idx, dl, other, tab, F, h0, cnt, vecF);
	}
	if (q)
		NCF_UNROLL
		for (int e = 0; e < 8; e++)
			runs[q - 1][slot][e] = acc[e];
	__syncthreads();
	if (q || !live)
		return;
	if (split)
		for (unsigned r = 0; r < KG_SPLIT - 1; r++)
			NCF_UNROLL
			for (int e = 0; e < 8; e++)
				acc[e] += runs[r][slot][e];
	if (g < GH) {
		store_upto8(dA + (size_t)k * H + h0, acc, cnt, vecH && cnt == 8);
		return;
	}
	NCF_UNROLL
	for (uint32_t e = 0; e < 8; e++)
		acc[e] = e < cnt ? wg[h0 + e] * acc[e] : 0.0f;
	store_upto8(dE + (size_t)k * F + h0, acc, cnt, vecF && cnt == 8);
}

template <typename T>
int key_grad_cuda(uint32_t K, uint32_t H, uint32_t F, size_t n, const uint32_t *off,
		  const uint32_t *idx, const T *dz, const float *dl, const uint32_t *other,
		  const float *tab, const float *wg, float *dA, float *dE, cudaStream_t stream)
{
	uint32_t G = (H + 7) / 8 + (F + 7) / 8;
	size_t slots = (size_t)K * G, nb = (slots + KG_SLOTS - 1) / KG_SLOTS;
	if (nb == 0)
		return 0;
	if (nb > 0x7FFFFFFFu) {
		ncf_error("cuda backend: %zu key sums are more than one launch takes", slots);
		return -1;
	}
	/* per row: dz (contiguous, or gathered through idx), dl, the other id,
	 * the other table's row; per key: offsets, dA and dE written */
	double bytes = n * ((double)H * sizeof(T) + 8.0 + (idx ? 4.0 : 0.0) + F * 4.0) +
		       K * (8.0 + 4.0 * H + 4.0 * F);
	/* the longest key (COST_LONGEST_*) in KG_SPLIT runs, KG_UNROLL rows at a
	 * time, each a row index, then its values (GMF: the other id, then its
	 * row): up to three round trips */
	double longest = (idx ? COST_LONGEST_ITEM : COST_LONGEST_USER) * n;
	double chain = 3 * ceil(longest / KG_SPLIT / KG_UNROLL) + 4;
	cost_shape sh = cost_shape_of((double)nb, BLOCK, 4, KG_UNROLL * 16.0, chain);
	if (NCF_COST_SHAPED(idx ? "key_grad_item" : "key_grad_user", bytes, 0, sh))
		return 0;
	int vecH = H % 8 == 0 && aligned16(dz) && aligned16(dA);
	int vecF = F % 8 == 0 && aligned16(tab) && aligned16(dE);
	NCF_LAUNCH_SYNC(key_grad_kernel<T>, (unsigned)nb, BLOCK, 0, stream, K, H, F, off, idx, dz, dl,
			other, tab, wg, vecH, vecF, dA, dE);
	return CUDA_CHECK(cudaGetLastError());
}

template int key_grad_cuda<float>(uint32_t, uint32_t, uint32_t, size_t, const uint32_t *,
				  const uint32_t *, const float *, const float *, const uint32_t *,
				  const float *, const float *, float *, float *, cudaStream_t);
template int key_grad_cuda<bf16>(uint32_t, uint32_t, uint32_t, size_t, const uint32_t *,
				 const uint32_t *, const bf16 *, const float *, const uint32_t *,
				 const float *, const float *, float *, float *, cudaStream_t);
template int key_grad_cuda<f16>(uint32_t, uint32_t, uint32_t, size_t, const uint32_t *,
				const uint32_t *, const f16 *, const float *, const uint32_t *,
				const float *, const float *, float *, float *, cudaStream_t);

} /* namespace NCF_CUDA_NS */
