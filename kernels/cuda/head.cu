/*
 * head.cu - the head (kernels.cuh): the scoring head, a plain kernel (each
 * thread its own row from global memory, one thread at a time under
 * NCF_CUDA_EMULATE), and the training step's head with the loss, dlogit
 * and the partial sums of its gradient (head_fused_cuda, whose threads
 * cooperate within a block).
 */
#include "kernels.cuh"

namespace NCF_CUDA_NS {

/* ---- head ---------------------------------------------------------------- */

/* The head's logit from a row's GMF rows pu, qi (F) and its last hidden
 * layer hr (HL): the order of the cpu backend (GMF terms, then the MLP's,
 * then the bias); vecF, vecH: the rows are 16-byte aligned with F, HL
 * multiples of 8, so they are read 8 elements at a time (the same sums). */
template <typename T>
NCF_DI float head_logit_of(const float *pu, const float *qi, const T *hr, uint32_t F, uint32_t HL,
			   const float *__restrict__ w, int vecF, int vecH)
{
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

/* The logit of row j of a's rows. */
template <typename T>
NCF_DI float head_logit(const head_rows<T> &a, size_t j, int vecF, int vecH)
{
	return head_logit_of(a.gmf_user + (size_t)a.users[j] * a.F,
			     a.gmf_item + (size_t)a.items[j] * a.F, a.hL + j * a.HL, a.F, a.HL, a.w,
			     vecF, vecH);
}

/* Scoring: the logit, or (prob) its sigmoid, ncf_sigmoid as the cpu
 * backend's scores. */
static constexpr launch_facts head_logits_facts = {BLOCK, 8};
template <typename T>
__global__ void NCF_BOUNDS(head_logits_facts)
	head_logits_kernel(head_rows<T> a, int vecF, int vecH, int prob, float *__restrict__ logit)
{
	size_t j = NCF_TID;
	if (j >= a.n)
		return;
	float x = head_logit(a, j, vecF, vecH);
	logit[j] = prob ? ncf_sigmoid(x) : x;
}

template <typename T>
int head_logits_cuda(const head_rows<T> &a, int prob, float *logit, cudaStream_t stream)
{
	size_t n = a.n;
	uint32_t F = a.F, HL = a.HL;
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	int vecF = F % 8 == 0 && aligned16(a.gmf_user) && aligned16(a.gmf_item);
	int vecH = HL % 8 == 0 && aligned16(a.hL);
	cost_shape sh = cost_shape_for(head_logits_facts, blocks, 64, (F + 7) / 8 + (HL + 7) / 8 + 1.0);
	if (NCF_COST_SHAPED("head_logits",
			    n * (12.0 + 8.0 * F + HL * (double)sizeof(T)) + (F + HL + 1.0) * 4, 0, sh))
		return 0;
	NCF_LAUNCH(head_logits_kernel<T>, blocks, BLOCK, 0, stream, a, vecF, vecH, prob, logit);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- instantiations for the three activation types ---------------------- */

template int head_logits_cuda<float>(const head_rows<float> &, int, float *, cudaStream_t);
template int head_logits_cuda<bf16>(const head_rows<bf16> &, int, float *, cudaStream_t);
template int head_logits_cuda<f16>(const head_rows<f16> &, int, float *, cudaStream_t);

/* ---- the training step's head ------------------------------------------- */

/* Shared memory of head_fused_kernel: the block's rows of gmf_user (F
 * floats each, padded to 16 bytes), of gmf_item, of hL (HL elements, padded
 * likewise), then dlogit, the losses and the ids. */
template <typename T> struct head_smem {
	uint32_t ldf, ldh, gi, hl, dl, loss, ids, bytes;
	NCF_DI head_smem(uint32_t F, uint32_t HL)
	{
		uint32_t E = 16 / (uint32_t)sizeof(T);
		ldf = (F + 3) / 4 * 4;
		ldh = (HL + E - 1) / E * E;
		gi = HEAD_ROWS * ldf * 4;
		hl = 2 * gi;
		dl = hl + (HEAD_ROWS * ldh * (uint32_t)sizeof(T) + 15) / 16 * 16;
		loss = dl + HEAD_ROWS * 4;
		ids = loss + HEAD_ROWS * 4;
		bytes = ids + 2 * HEAD_ROWS * 4;
	}
};

/*
 * Block b: rows r0 = b HEAD_ROWS .. + HEAD_ROWS, sorted by user.  The
 * block's rows of gmf_user, gmf_item and hL come into shared memory at once
 * (cp.async: a whole block's inputs in flight, not a row's 16 bytes at a
 * time), then threads < HEAD_ROWS take a row each (the logit of
 * head_logit_of, as scoring computes it) and write dlogit and dz, and thread c of the
 * block sums column c of the block's rows in row order from shared memory:
 * [dlogit g (F) | dlogit hL (HL) | dlogit (1) | dz (HL)], g = gmf_user[u] *
 * gmf_item[i] and dz the unrounded value written to dz.  Thread 0 sums the
 * rows' losses in double.
 */
static constexpr launch_facts head_fused_facts = {256, 2};
template <typename T>
__global__ void NCF_BOUNDS(head_fused_facts)
	head_fused_kernel(head_rows<T> a, head_grads<T> o, int vecF, int vecH, int vecD)
{
	const size_t n = a.n;
	const uint32_t F = a.F, HL = a.HL;
	const uint32_t *__restrict__ ru = a.users, *__restrict__ ri = a.items;
	const uint8_t *__restrict__ lab = o.labels;
	const float *__restrict__ gmf_user = a.gmf_user, *__restrict__ gmf_item = a.gmf_item;
	const float *__restrict__ w = a.w;
	const T *__restrict__ hL = a.hL;
	const float inv_n = o.inv_n, loss_scale = o.loss_scale, drop_scale = o.drop_scale;
	float *__restrict__ dlogit = o.dlogit, *__restrict__ part = o.part;
	T *__restrict__ dz = o.dz;
	double *__restrict__ part_loss = o.part_loss;
	NCF_DYN_SHARED(smem);
	head_smem<T> L(F, HL);
	float *gu = (float *)smem, *gi = (float *)(smem + L.gi);
	T *hs = (T *)(smem + L.hl);
	float *s_dl = (float *)(smem + L.dl), *s_loss = (float *)(smem + L.loss);
	uint32_t *s_u = (uint32_t *)(smem + L.ids), *s_i = s_u + HEAD_ROWS;
	size_t r0 = (size_t)blockIdx.x * HEAD_ROWS;
	uint32_t rows = n - r0 < HEAD_ROWS ? (uint32_t)(n - r0) : (uint32_t)HEAD_ROWS;
	unsigned t = threadIdx.x;
	const float *wh = w + F;
	for (unsigned k = t; k < HEAD_ROWS; k += blockDim.x) {
		s_u[k] = k < rows ? ru[r0 + k] : ru[r0];
		s_i[k] = k < rows ? ri[r0 + k] : ri[r0];
	}
	__syncthreads();
	piece_walk wf = walk_of(L.ldf / 4), wt = walk_of(L.ldh / (16 / sizeof(T)));
	stage_rows(stile<float>{gu, L.ldf, rows, L.ldf}, gmat<float>{gmf_user, F, 0, F, vecF}, s_u,
		   wf);
	stage_rows(stile<float>{gi, L.ldf, rows, L.ldf}, gmat<float>{gmf_item, F, 0, F, vecF}, s_i,
		   wf);
	stage_tile(stile<T>{hs, L.ldh, rows, L.ldh}, gmat<T>{hL, HL, n, HL, vecH}, r0, 0, wt);
	cp_async_commit();
	cp_async_wait<0>();
	__syncthreads();
	if (t < rows) {
		size_t j = r0 + t;
		const T *hr = hs + (size_t)t * L.ldh;
		int vf = F % 8 == 0, vh = HL % 8 == 0;
		float logit = head_logit_of(gu + (size_t)t * L.ldf, gi + (size_t)t * L.ldf, hr, F, HL,
					    w, vf, vh);
		float y = (float)lab[j];
		float dl = (ncf_sigmoid(logit) - y) * inv_n;
		dl = dl * loss_scale;
		dlogit[j] = dl;
		s_dl[t] = dl;
		s_loss[t] = ncf_bce(logit, y);
		T *dr = dz + j * HL;
		for (uint32_t h0 = 0; h0 < HL; h0 += 8) {
			uint32_t cnt = HL - h0 < 8 ? HL - h0 : 8;
			float x[8], d[8];
			NCF_UNROLL
			for (uint32_t k = 0; k < 8; k++)
				x[k] = k < cnt ? to_f32(hr[h0 + k]) : 0.0f;
			NCF_UNROLL
			for (uint32_t k = 0; k < 8; k++) {
				float dh = dl * (k < cnt ? wh[h0 + k] : 0.0f);
				d[k] = x[k] > 0.0f ? dh * drop_scale : 0.0f;
			}
			store_upto8(dr + h0, d, cnt, vecD && cnt == 8);
		}
	}
	__syncthreads();
	uint32_t C = F + 2 * HL + 1;
	for (uint32_t c = t; c < C; c += blockDim.x) {
		float acc = 0.0f;
		for (uint32_t k = 0; k < rows; k++) {
			float dl = s_dl[k], v;
			const T *hr = hs + (size_t)k * L.ldh;
			if (c < F) {
				v = dl * (gu[(size_t)k * L.ldf + c] * gi[(size_t)k * L.ldf + c]);
			} else if (c < F + HL) {
				v = dl * to_f32(hr[c - F]);
			} else if (c == F + HL) {
				v = dl;
			} else {
				uint32_t h = c - F - HL - 1;
				float dh = dl * wh[h];
				v = to_f32(hr[h]) > 0.0f ? dh * drop_scale : 0.0f;
			}
			acc += v;
		}
		part[(size_t)blockIdx.x * C + c] = acc;
	}
	if (t == 0) {
		double sum = 0;
		for (uint32_t k = 0; k < rows; k++)
			sum += (double)s_loss[k];
		part_loss[blockIdx.x] = sum;
	}
}

template <typename T> static int head_allow(size_t bytes)
{
	return CUDA_CHECK(cudaFuncSetAttribute(head_fused_kernel<T>,
					       cudaFuncAttributeMaxDynamicSharedMemorySize,
					       (int)bytes));
}

int head_setup(uint32_t F, uint32_t HL)
{
	if (cost_dry())
		return 0;
	NCF_TRY(head_allow<float>(head_smem<float>(F, HL).bytes));
	NCF_TRY(head_allow<bf16>(head_smem<bf16>(F, HL).bytes));
	return head_allow<f16>(head_smem<f16>(F, HL).bytes);
}

template <typename T>
int head_fused_cuda(const head_rows<T> &a, const head_grads<T> &o, cudaStream_t stream)
{
	size_t n = a.n;
	uint32_t F = a.F, HL = a.HL, users = o.users;
	size_t nb = (n + HEAD_ROWS - 1) / HEAD_ROWS;
	if (nb == 0)
		return 0;
	if (nb > 0x7FFFFFFFu) {
		ncf_error("cuda backend: %zu rows are more than one launch takes", n);
		return -1;
	}
	double es = sizeof(T), C = (double)F + 2.0 * HL + 1;
	double urows = n < users ? (double)n : (double)users;
	size_t smem = head_smem<T>(F, HL).bytes;
	if (smem > g_smem_block) {
		ncf_error("cuda backend: a head of %u factors and %u units needs %zu bytes of shared "
			  "memory, more than a block has (%zu)",
			  F, HL, smem, g_smem_block);
		return -1;
	}
	/* per row: ids, label, gmf_item's row, hL read, dlogit and dz written;
	 * gmf_user once per distinct user (rows sorted by user); the partials.
	 * A block: its ids (a round trip), then its rows at once (another) */
	double res = g_smem_sm / (smem + 1024.0);
	double most = head_fused_facts.min_blocks;
	res = res < 1 ? 1 : res > most ? most : floor(res);
	cost_shape sh = cost_shape_for(head_fused_facts, (double)nb, res,
				       (double)(smem - 3 * HEAD_ROWS * 4) / head_fused_facts.threads,
				      2 * cost_waves((double)nb, res));
	if (NCF_COST_SHAPED("head_fused",
			    n * (9.0 + 4.0 * F + 2.0 * HL * es + 4.0) + urows * F * 4.0 +
				    nb * (C * 4.0 + 8.0) + C * 4.0,
			    0, sh))
		return 0;
	/* staging 16 bytes at a time where the rows allow; dz stored 8 at a time */
	int vecF = F % 4 == 0 && aligned16(a.gmf_user) && aligned16(a.gmf_item);
	int vecH = HL % (16 / sizeof(T)) == 0 && aligned16(a.hL);
	int vecD = HL % 8 == 0 && aligned16(o.dz);
	NCF_LAUNCH_SYNC(head_fused_kernel<T>, (unsigned)nb, head_fused_facts.threads, smem, stream, a,
			o, vecF, vecH, vecD);
	return CUDA_CHECK(cudaGetLastError());
}

template int head_fused_cuda<float>(const head_rows<float> &, const head_grads<float> &,
				    cudaStream_t);
template int head_fused_cuda<bf16>(const head_rows<bf16> &, const head_grads<bf16> &,
				   cudaStream_t);
template int head_fused_cuda<f16>(const head_rows<f16> &, const head_grads<f16> &, cudaStream_t);

} /* namespace NCF_CUDA_NS */
