/*
 * head.cu - the head, the loss and dlogit, per row (kernels.cuh).
 *
 * Every kernel here is "plain": each thread computes its own outputs from
 * global memory, with no shared memory, barriers or warp primitives, so the
 * same source runs on the CPU under NCF_CUDA_EMULATE (one thread at a time).
 */
#include "kernels.cuh"

namespace NCF_CUDA_NS {

/* ---- head ---------------------------------------------------------------- */

/* The head's logit of row j: the order of the cpu backend (GMF terms, then the MLP's,
 * then the bias). */
template <typename T>
NCF_DI float head_logit(size_t j, uint32_t F, uint32_t HL, const uint32_t *__restrict__ su,
			const uint32_t *__restrict__ si, const float *__restrict__ gmf_user,
			const float *__restrict__ gmf_item, const float *__restrict__ w,
			const T *__restrict__ hL, int vecF, int vecH)
{
	const float *pu = gmf_user + (size_t)su[j] * F, *qi = gmf_item + (size_t)si[j] * F;
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
				  const uint8_t *__restrict__ lab,
				  const float *__restrict__ gmf_user,
				  const float *__restrict__ gmf_item, const float *__restrict__ w,
				  const T *__restrict__ hL, float inv_n, float loss_scale,
				  float drop_scale, int vecF, int vecH, float *__restrict__ loss,
				  float *__restrict__ dlogit, T *__restrict__ dz)
{
	size_t j = NCF_TID;
	if (j >= n)
		return;
	float logit = head_logit(j, F, HL, su, si, gmf_user, gmf_item, w, hL, vecF, vecH);
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
		    const uint8_t *lab, const float *gmf_user, const float *gmf_item,
		    const float *w, const T *hL, float inv_n, float loss_scale, float drop_scale,
		    float *loss, float *dlogit, T *dz, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	int vecF = F % 8 == 0 && aligned16(gmf_user) && aligned16(gmf_item);
	int vecH = HL % 8 == 0 && aligned16(hL) && aligned16(dz);
	double es = sizeof(T);
	if (NCF_COST(COST_KERNEL, "head_train", n * (17.0 + 8.0 * F + 2.0 * HL * es) +
							(F + HL + 1.0) * 4, 0))
		return 0;
	NCF_LAUNCH(head_train_kernel<T>, blocks, BLOCK, 0, stream, n, F, HL, su, si, lab, gmf_user,
		   gmf_item, w, hL, inv_n, loss_scale, drop_scale, vecF, vecH, loss, dlogit, dz);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T>
__global__ void head_logits_kernel(size_t n, uint32_t F, uint32_t HL,
				   const uint32_t *__restrict__ su, const uint32_t *__restrict__ si,
				   const float *__restrict__ gmf_user,
				   const float *__restrict__ gmf_item,
				   const float *__restrict__ w, const T *__restrict__ hL, int vecF,
				   int vecH, float *__restrict__ logit)
{
	size_t j = NCF_TID;
	if (j >= n)
		return;
	logit[j] = head_logit(j, F, HL, su, si, gmf_user, gmf_item, w, hL, vecF, vecH);
}

template <typename T>
int head_logits_cuda(size_t n, uint32_t F, uint32_t HL, const uint32_t *su, const uint32_t *si,
		     const float *gmf_user, const float *gmf_item, const float *w, const T *hL,
		     float *logit, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	int vecF = F % 8 == 0 && aligned16(gmf_user) && aligned16(gmf_item);
	int vecH = HL % 8 == 0 && aligned16(hL);
	if (NCF_COST(COST_KERNEL, "head_logits",
		     n * (12.0 + 8.0 * F + HL * (double)sizeof(T)) + (F + HL + 1.0) * 4, 0))
		return 0;
	NCF_LAUNCH(head_logits_kernel<T>, blocks, BLOCK, 0, stream, n, F, HL, su, si, gmf_user,
		   gmf_item, w, hL, vecF, vecH, logit);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- instantiations for the three activation types ---------------------- */

#define NCF_INSTANTIATE(T)                                                                         \
	template int head_train_cuda<T>(size_t, uint32_t, uint32_t, const uint32_t *,              \
					const uint32_t *, const uint8_t *, const float *,          \
					const float *, const float *, const T *, float, float,     \
					float, float *, float *, T *, cudaStream_t);               \
	template int head_logits_cuda<T>(size_t, uint32_t, uint32_t, const uint32_t *,             \
					 const uint32_t *, const float *, const float *,           \
					 const float *, const T *, float *, cudaStream_t);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
