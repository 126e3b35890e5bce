/*
 * cuda_kernels.cu - the kernels and launchers declared in cuda_kernels.cuh.
 *
 * Every kernel here is "plain": each thread computes its own outputs from
 * global memory, with no shared memory, barriers or warp primitives, so the
 * same source runs on the CPU under NCF_CUDA_EMULATE (one thread at a time).
 * Elementwise kernels give a thread 8 consecutive elements of a row (one
 * Philox block of dropout bits, one 16-byte load of bf16 or fp16, two of
 * fp32); rows whose width is not a multiple of 8 take a scalar path.
 * Arrays indexed in loops are indexed by unrolled constants only, so that
 * nvcc keeps them in registers.
 */
#include <float.h>

#include "cuda_kernels.cuh"

extern "C" {
#include "metrics.h"
}

namespace NCF_CUDA_NS {

/* ---- sample stream ------------------------------------------------------ */

__global__ void sample_kernel(ncf_perm perm, uint64_t pos0, size_t n, uint64_t seed,
			      uint32_t epoch, int64_t P, uint32_t n_items, int true_neg,
			      const uint32_t *__restrict__ entry_user,
			      const int64_t *__restrict__ offsets, const uint32_t *__restrict__ items,
			      uint32_t *__restrict__ su, uint32_t *__restrict__ si,
			      uint8_t *__restrict__ lab)
{
	size_t j = NCF_TID;
	if (j >= n)
		return;
	uint32_t u = 0, it = 0;
	int y = ncf_sample_at(&perm, pos0 + j, seed, epoch, P, n_items, true_neg, entry_user,
			      offsets, items, &u, &it);
	su[j] = u;
	si[j] = it;
	lab[j] = (uint8_t)y;
}

int sample_cuda(const ncf_perm &perm, uint64_t pos0, size_t n, uint64_t seed, uint32_t epoch,
		int64_t P, uint32_t n_items, int true_neg, const uint32_t *entry_user,
		const int64_t *offsets, const uint32_t *items, uint32_t *su, uint32_t *si,
		uint8_t *lab, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	NCF_LAUNCH(sample_kernel, blocks, BLOCK, 0, stream, perm, pos0, n, seed, epoch, P, n_items,
		   true_neg, entry_user, offsets, items, su, si, lab);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- layer 1, bias + ReLU + dropout, and their backward ----------------- */

/* Dropout multiplier of unit k (0..7) of a Philox block: scale or 0. */
NCF_DI float dropout_mult(const dropout_k &dk, ncf_u32x4 bits, uint32_t k)
{
	return ncf_dropout_keep(bits, k, dk.drop16) ? dk.scale : 0.0f;
}

/* Thread t: row t / G, units 8w .. 8w+7 with w = t % G, G = ceil(H / 8). */
template <typename T>
__global__ void layer1_kernel(size_t n, uint32_t H, const uint32_t *__restrict__ su,
			      const uint32_t *__restrict__ si, const T *__restrict__ au,
			      const T *__restrict__ ai, const float *__restrict__ b1, int eval_order,
			      int vec, dropout_k dk, T *__restrict__ h1)
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
	ncf_u32x4 bits = {{0, 0, 0, 0}};
	if (dk.active)
		bits = ncf_dropout_bits(dk.seed, dk.epoch, dk.pos0 + j, 0, w);
	NCF_UNROLL
	for (uint32_t k = 0; k < 8; k++) {
		float bias = k < cnt ? b1[h0 + k] : 0.0f;
		float x = eval_order ? (va[k] + bias) + vb[k] : (va[k] + vb[k]) + bias;
		float r = x > 0.0f ? x : 0.0f;
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
	int vec = H % 8 == 0 && aligned16(au) && aligned16(ai) && aligned16(h1);
	NCF_LAUNCH(layer1_kernel<T>, blocks, BLOCK, 0, stream, n, H, su, si, au, ai, b1, eval_order,
		   vec, dk, h1);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T>
__global__ void bias_relu_dropout_kernel(size_t n, uint32_t H, T *__restrict__ z,
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
	ncf_u32x4 bits = {{0, 0, 0, 0}};
	if (dk.active)
		bits = ncf_dropout_bits(dk.seed, dk.epoch, dk.pos0 + j, layer, w);
	NCF_UNROLL
	for (uint32_t k = 0; k < 8; k++) {
		float v = x[k] + (k < cnt ? b[h0 + k] : 0.0f);
		float r = v > 0.0f ? v : 0.0f;
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
	int vec = H % 8 == 0 && aligned16(z);
	NCF_LAUNCH(bias_relu_dropout_kernel<T>, blocks, BLOCK, 0, stream, n, H, z, b, vec, dk,
		   layer);
	return CUDA_CHECK(cudaGetLastError());
}

/* Thread t: elements 8t .. 8t+7 of the flat arrays. */
template <typename T>
__global__ void relu_dropout_back_kernel(size_t count, T *__restrict__ dh,
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
	int vec = count % 8 == 0 && aligned16(dh) && aligned16(h);
	NCF_LAUNCH(relu_dropout_back_kernel<T>, blocks, BLOCK, 0, stream, count, dh, h, scale, vec);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- head ---------------------------------------------------------------- */

/* The head's logit of row j: the order of cpu.c (GMF terms, then the MLP's,
 * then the bias). */
template <typename T>
NCF_DI float head_logit(size_t j, uint32_t F, uint32_t HL, const uint32_t *__restrict__ su,
			const uint32_t *__restrict__ si, const float *__restrict__ P,
			const float *__restrict__ Q, const float *__restrict__ w,
			const T *__restrict__ hL, int vecF, int vecH)
{
	const float *pu = P + (size_t)su[j] * F, *qi = Q + (size_t)si[j] * F;
	const float *wg = w, *wh = w + F;
	float acc = 0.0f;
	if (vecF) {
		for (uint32_t f0 = 0; f0 < F; f0 += 8) {
			float pa[8], qa[8];
			load8(pu + f0, pa);
			load8(qi + f0, qa);
			NCF_UNROLL
			for (int k = 0; k < 8; k++) {
				float g = pa[k] * qa[k];
				acc += wg[f0 + k] * g;
			}
		}
	} else {
		for (uint32_t f = 0; f < F; f++) {
			float g = pu[f] * qi[f];
			acc += wg[f] * g;
		}
	}
	const T *hr = hL + j * HL;
	if (vecH) {
		for (uint32_t h0 = 0; h0 < HL; h0 += 8) {
			float x[8];
			load8(hr + h0, x);
			NCF_UNROLL
			for (int k = 0; k < 8; k++)
				acc += wh[h0 + k] * x[k];
		}
	} else {
		for (uint32_t h = 0; h < HL; h++)
			acc += wh[h] * to_f32(hr[h]);
	}
	return acc + w[F + HL];
}

template <typename T>
__global__ void head_train_kernel(size_t n, uint32_t F, uint32_t HL,
				  const uint32_t *__restrict__ su, const uint32_t *__restrict__ si,
				  const uint8_t *__restrict__ lab, const float *__restrict__ P,
				  const float *__restrict__ Q, const float *__restrict__ w,
				  const T *__restrict__ hL, float inv_n, float loss_scale,
				  float drop_scale, int vecF, int vecH, float *__restrict__ loss,
				  float *__restrict__ dlogit, T *__restrict__ dz)
{
	size_t j = NCF_TID;
	if (j >= n)
		return;
	float logit = head_logit(j, F, HL, su, si, P, Q, w, hL, vecF, vecH);
	float y = (float)lab[j];
	loss[j] = ncf_bce(logit, y);
	float dl = (ncf_sigmoid(logit) - y) * inv_n;
	dl = dl * loss_scale;
	dlogit[j] = dl;
	const float *wh = w + F;
	const T *hr = hL + j * HL;
	T *dr = dz + j * HL;
	if (vecH) {
		for (uint32_t h0 = 0; h0 < HL; h0 += 8) {
			float x[8], d[8];
			load8(hr + h0, x);
			NCF_UNROLL
			for (int k = 0; k < 8; k++) {
				float dh = dl * wh[h0 + k];
				d[k] = x[k] > 0.0f ? dh * drop_scale : 0.0f;
			}
			store8(dr + h0, d);
		}
	} else {
		for (uint32_t h = 0; h < HL; h++) {
			float dh = dl * wh[h];
			dr[h] = from_f32<T>(to_f32(hr[h]) > 0.0f ? dh * drop_scale : 0.0f);
		}
	}
}

template <typename T>
int head_train_cuda(size_t n, uint32_t F, uint32_t HL, const uint32_t *su, const uint32_t *si,
		    const uint8_t *lab, const float *P, const float *Q, const float *w, const T *hL,
		    float inv_n, float loss_scale, float drop_scale, float *loss, float *dlogit,
		    T *dz, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	int vecF = F % 8 == 0 && aligned16(P) && aligned16(Q);
	int vecH = HL % 8 == 0 && aligned16(hL) && aligned16(dz);
	NCF_LAUNCH(head_train_kernel<T>, blocks, BLOCK, 0, stream, n, F, HL, su, si, lab, P, Q, w,
		   hL, inv_n, loss_scale, drop_scale, vecF, vecH, loss, dlogit, dz);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T>
__global__ void head_logits_kernel(size_t n, uint32_t F, uint32_t HL,
				   const uint32_t *__restrict__ su, const uint32_t *__restrict__ si,
				   const float *__restrict__ P, const float *__restrict__ Q,
				   const float *__restrict__ w, const T *__restrict__ hL, int vecF,
				   int vecH, float *__restrict__ logit)
{
	size_t j = NCF_TID;
	if (j >= n)
		return;
	logit[j] = head_logit(j, F, HL, su, si, P, Q, w, hL, vecF, vecH);
}

template <typename T>
int head_logits_cuda(size_t n, uint32_t F, uint32_t HL, const uint32_t *su, const uint32_t *si,
		     const float *P, const float *Q, const float *w, const T *hL, float *logit,
		     cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	int vecF = F % 8 == 0 && aligned16(P) && aligned16(Q);
	int vecH = HL % 8 == 0 && aligned16(hL);
	NCF_LAUNCH(head_logits_kernel<T>, blocks, BLOCK, 0, stream, n, F, HL, su, si, P, Q, w, hL,
		   vecF, vecH, logit);
	return CUDA_CHECK(cudaGetLastError());
}

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
		NCF_LAUNCH(colsum_pass_kernel<float>, blocks, BLOCK, 0, stream, a, rows, cols, G, dst);
		if (CUDA_CHECK(cudaGetLastError()))
			return -1;
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
	NCF_LAUNCH(colsum_pass_kernel<T>, blocks, BLOCK, 0, stream, x, rows, cols, G, dst);
	if (CUDA_CHECK(cudaGetLastError()))
		return -1;
	return G == 1 ? 0 : colsum_rest(a, b, G, cols, out, stream);
}

size_t head_grad_scratch(size_t n, uint32_t F, uint32_t HL)
{
	return colsum_scratch(n, (size_t)F + HL + 1);
}

/* First pass of head_grad_cuda: thread (g, c) over the columns
 * c = [P Q products (F) | hL (HL) | 1]. */
template <typename T>
__global__ void head_grad_kernel(size_t n, uint32_t F, uint32_t HL, size_t G,
				 const uint32_t *__restrict__ su, const uint32_t *__restrict__ si,
				 const float *__restrict__ P, const float *__restrict__ Q,
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
			v = dl * (P[(size_t)su[r] * F + c] * Q[(size_t)si[r] * F + c]);
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
		   const float *P, const float *Q, const T *hL, const float *dlogit, float *out,
		   float *scratch, cudaStream_t stream)
{
	size_t C = (size_t)F + HL + 1, G = pass_groups(n);
	float *a = scratch, *b = scratch + G * C;
	float *dst = G == 1 ? out : a;
	unsigned blocks;
	if (grid_1d(G * C, &blocks))
		return -1;
	NCF_LAUNCH(head_grad_kernel<T>, blocks, BLOCK, 0, stream, n, F, HL, G, su, si, P, Q, hL,
		   dlogit, dst);
	if (CUDA_CHECK(cudaGetLastError()))
		return -1;
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
	NCF_LAUNCH(sum_pass_kernel<float>, blocks, BLOCK, 0, stream, x, n, G, G == 1 ? out : a);
	if (CUDA_CHECK(cudaGetLastError()))
		return -1;
	size_t rows = G;
	while (rows > 1) {
		G = pass_groups(rows);
		double *dst = G == 1 ? out : b;
		if (grid_1d(G, &blocks))
			return -1;
		NCF_LAUNCH(sum_pass_kernel<double>, blocks, BLOCK, 0, stream, a, rows, G, dst);
		if (CUDA_CHECK(cudaGetLastError()))
			return -1;
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
 * wg[f] (cpu.c step 6: acc[f] += dl * q[f], then gp[f] = wg[f] * acc[f]). */
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

template <class V>
static int segsum_run(const V &v, const uint32_t *key, const uint32_t *idx, size_t n, uint32_t H,
		      float *head, float *tail, cudaStream_t stream)
{
	size_t chunks = (n + SEG_CHUNK - 1) / SEG_CHUNK;
	unsigned blocks;
	if (grid_1d(chunks * H, &blocks))
		return -1;
	if (!blocks)
		return 0;
	NCF_LAUNCH(segsum_pass1_kernel<V>, blocks, BLOCK, 0, stream, v, key, idx, n, H, head, tail);
	if (CUDA_CHECK(cudaGetLastError()))
		return -1;
	if (chunks < 2)
		return 0;
	NCF_LAUNCH(segsum_pass2_kernel<V>, blocks, BLOCK, 0, stream, v, key, n, H, head, tail);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T>
int segsum_rows_cuda(const uint32_t *key, const uint32_t *idx, size_t n, const T *src, uint32_t H,
		     float *out, float *head, float *tail, cudaStream_t stream)
{
	rows_value<T> v = {src, H, out};
	return segsum_run(v, key, idx, n, H, head, tail, stream);
}

int segsum_gmf_cuda(const uint32_t *key, const uint32_t *idx, size_t n, const float *dl,
		    const uint32_t *other, const float *tab, const float *wg, uint32_t F, float *out,
		    float *head, float *tail, cudaStream_t stream)
{
	gmf_value v = {dl, other, tab, wg, F, out};
	return segsum_run(v, key, idx, n, F, head, tail, stream);
}

/* ---- optimizer and casts ------------------------------------------------- */

__global__ void adam_kernel(float *__restrict__ p, float *__restrict__ m, float *__restrict__ v,
			    const float *__restrict__ g, size_t n, ncf_adam_k k, float g_scale,
			    const int *__restrict__ skip)
{
	size_t j = NCF_TID;
	if (j >= n || (skip && *skip))
		return;
	ncf_adam_update(&p[j], &m[j], &v[j], g[j] * g_scale, &k);
}

int adam_cuda(float *p, float *m, float *v, const float *g, size_t n, const ncf_adam_k &k,
	      float g_scale, const int *skip, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	NCF_LAUNCH(adam_kernel, blocks, BLOCK, 0, stream, p, m, v, g, n, k, g_scale, skip);
	return CUDA_CHECK(cudaGetLastError());
}

__global__ void nonfinite_kernel(const float *__restrict__ g, size_t n, int *flag)
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
	NCF_LAUNCH(nonfinite_kernel, blocks, BLOCK, 0, stream, g, n, flag);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T>
__global__ void cast_kernel(const float *__restrict__ x, T *__restrict__ y, size_t n)
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
	NCF_LAUNCH(cast_kernel<T>, blocks, BLOCK, 0, stream, x, y, n);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- evaluation ---------------------------------------------------------- */

__global__ void eval_pairs_kernel(uint32_t u0, uint32_t nu, uint32_t N,
				  const uint32_t *__restrict__ test, const uint32_t *__restrict__ neg,
				  uint32_t *__restrict__ su, uint32_t *__restrict__ si)
{
	size_t t = NCF_TID, per = (size_t)N + 1;
	if (t >= (size_t)nu * per)
		return;
	uint32_t u = u0 + (uint32_t)(t / per), c = (uint32_t)(t % per);
	su[t] = u;
	si[t] = c == 0 ? test[u] : neg[(size_t)u * N + (c - 1)];
}

int eval_pairs_cuda(uint32_t u0, uint32_t nu, uint32_t N, const uint32_t *test,
		    const uint32_t *neg, uint32_t *su, uint32_t *si, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d((size_t)nu * ((size_t)N + 1), &blocks))
		return -1;
	if (!blocks)
		return 0;
	NCF_LAUNCH(eval_pairs_kernel, blocks, BLOCK, 0, stream, u0, nu, N, test, neg, su, si);
	return CUDA_CHECK(cudaGetLastError());
}

__global__ void rank_kernel(const float *__restrict__ logit, const uint8_t *__restrict__ counted,
			    uint32_t u0, uint32_t nu, uint32_t N, uint32_t *__restrict__ ranks)
{
	size_t k = NCF_TID;
	if (k >= nu)
		return;
	const float *l = logit + k * ((size_t)N + 1);
	ranks[k] = ncf_rank(l[0], l + 1, counted + (size_t)(u0 + k) * N, N);
}

int rank_cuda(const float *logit, const uint8_t *counted, uint32_t u0, uint32_t nu, uint32_t N,
	      uint32_t *ranks, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(nu, &blocks))
		return -1;
	if (!blocks)
		return 0;
	NCF_LAUNCH(rank_kernel, blocks, BLOCK, 0, stream, logit, counted, u0, nu, N, ranks);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- instantiations for the three activation types ---------------------- */

#define NCF_INSTANTIATE(T)                                                                         \
	template int layer1_cuda<T>(size_t, uint32_t, const uint32_t *, const uint32_t *,          \
				    const T *, const T *, const float *, int, const dropout_k &,   \
				    T *, cudaStream_t);                                            \
	template int bias_relu_dropout_cuda<T>(size_t, uint32_t, T *, const float *,               \
					       const dropout_k &, uint32_t, cudaStream_t);         \
	template int relu_dropout_back_cuda<T>(size_t, T *, const T *, float, cudaStream_t);       \
	template int head_train_cuda<T>(size_t, uint32_t, uint32_t, const uint32_t *,              \
					const uint32_t *, const uint8_t *, const float *,          \
					const float *, const float *, const T *, float, float,     \
					float, float *, float *, T *, cudaStream_t);               \
	template int head_logits_cuda<T>(size_t, uint32_t, uint32_t, const uint32_t *,             \
					 const uint32_t *, const float *, const float *,           \
					 const float *, const T *, float *, cudaStream_t);         \
	template int colsum_cuda<T>(const T *, size_t, size_t, float *, float *, cudaStream_t);    \
	template int head_grad_cuda<T>(size_t, uint32_t, uint32_t, const uint32_t *,               \
				       const uint32_t *, const float *, const float *, const T *,  \
				       const float *, float *, float *, cudaStream_t);             \
	template int segsum_rows_cuda<T>(const uint32_t *, const uint32_t *, size_t, const T *,    \
					 uint32_t, float *, float *, float *, cudaStream_t);       \
	template int cast_cuda<T>(const float *, T *, size_t, cudaStream_t);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
