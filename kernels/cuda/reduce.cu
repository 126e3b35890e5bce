/*
 * reduce.cu - the deterministic reductions of the training step
 * (kernels.cuh): the partial sums of the head and the backward passes, and
 * the per-key sums of the first layer's and the GMF tables' gradients.
 * Every sum has an order fixed by the sizes alone.  Their threads
 * cooperate within a block (NCF_LAUNCH_SYNC: fibers under emulation).
 */
#include "kernels.cuh"

namespace NCF_CUDA_NS {

/* ---- the step's partial sums -------------------------------------------- */

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

static constexpr launch_facts reduce_partials_facts = {RP_THREADS, 6};
__global__ void NCF_BOUNDS(reduce_partials_facts) reduce_partials_kernel(part_map m, uint32_t blocks)
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
	cost_shape sh = cost_shape_for(reduce_partials_facts, (double)blocks, 4.0 * RP_UNROLL,
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

/* The sum over positions [a, b) of s.dz's rows (h0, cnt of its 8 units). */
template <typename T>
NCF_DI void key_rows_dz(float acc[8], uint32_t a, uint32_t b, const key_sums<T> &s, uint32_t h0,
			uint32_t cnt, int vec)
{
	const uint32_t *__restrict__ idx = s.idx;
	const T *__restrict__ dz = s.dz;
	uint32_t H = s.H;
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
template <typename T>
NCF_DI void key_rows_gmf(float acc[8], uint32_t a, uint32_t b, const key_sums<T> &s, uint32_t f0,
			 uint32_t cnt, int vec)
{
	const uint32_t *__restrict__ idx = s.idx, *__restrict__ other = s.other;
	const float *__restrict__ dl = s.dl, *__restrict__ tab = s.tab;
	uint32_t F = s.F;
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

static constexpr launch_facts key_grad_facts = {BLOCK, 4};
template <typename T>
__global__ void NCF_BOUNDS(key_grad_facts)
	key_grad_kernel(key_sums<T> s, int vecH, int vecF)
{
	const uint32_t K = s.K, H = s.H, F = s.F;
	const uint32_t *__restrict__ off = s.off;
	const float *__restrict__ wg = s.wg;
	float *__restrict__ dA = s.dA, *__restrict__ dE = s.dE;
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
		key_rows_dz(acc, a, b, s, h0, cnt, vecH);
	} else if (live) {
		h0 = 8 * (g - GH);
		cnt = F - h0 < 8 ? F - h0 : 8;
		key_rows_gmf(acc, a, b, s, h0, cnt, vecF);
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

template <typename T> int key_grad_cuda(const key_sums<T> &s, cudaStream_t stream)
{
	uint32_t K = s.K, H = s.H, F = s.F;
	size_t n = s.n;
	const uint32_t *idx = s.idx;
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
	cost_shape sh = cost_shape_for(key_grad_facts, (double)nb, KG_UNROLL * 16.0, chain);
	if (NCF_COST_SHAPED(idx ? "key_grad_item" : "key_grad_user", bytes, 0, sh))
		return 0;
	int vecH = H % 8 == 0 && aligned16(s.dz) && aligned16(s.dA);
	int vecF = F % 8 == 0 && aligned16(s.tab) && aligned16(s.dE);
	NCF_LAUNCH_SYNC(key_grad_kernel<T>, (unsigned)nb, BLOCK, 0, stream, s, vecH, vecF);
	return CUDA_CHECK(cudaGetLastError());
}

template int key_grad_cuda<float>(const key_sums<float> &, cudaStream_t);
template int key_grad_cuda<bf16>(const key_sums<bf16> &, cudaStream_t);
template int key_grad_cuda<f16>(const key_sums<f16> &, cudaStream_t);

} /* namespace NCF_CUDA_NS */
