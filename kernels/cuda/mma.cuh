/*
 * mma.cuh - 16x16 tiles of a matrix product for the fused MLP kernels
 * (mlp.cu), one warp per tile, behind one interface for the precisions:
 *
 *   mma_tile<T, MODE>: frag_a, frag_at, frag_b<L>, frag_c; zero(c);
 *       load_a(a, p, ld)        a = A (16, KSTEP), row-major at p (shared memory)
 *       load_at(a, p, ld)       a = A (16, KSTEP) with A[i][k] at p[k ld + i]
 *                               (a row-major matrix read as its transpose)
 *       load_b<L>(b, p, ld)     b = B (KSTEP, 16): L = mma_col: B[k][n] at p[n ld + k]
 *                               (a row-major W read as W^T), mma_row: at p[k ld + n]
 *       mma(c, a, b)            c += a b
 *       store(p, c, ld)         the float tile, row-major at p; collective: every
 *                               lane of the warp calls it, then __syncwarp before
 *                               another lane's elements are read
 *
 *   MMA_16   T bf16 or fp16: wmma m16n16k16, fp32 accumulators (tensor cores)
 *   MMA_TF32 T float: wmma m16n16k8 on TF32-rounded inputs, fp32 accumulators
 *   MMA_F32  T float: no tensor cores: lane l owns row l / 2, columns
 *            8 (l % 2) .. + 8 of the tile and adds a[r][k] b[k][n] in k order
 *            in fp32, so that a product of K terms is summed exactly as
 *            kernels/cpu/reference.c sums it (precision fp32: bit for bit)
 *
 * The wmma modes use only the documented semantics of load_matrix_sync,
 * mma_sync, store_matrix_sync, fill_fragment (and x[] / num_elements for
 * the TF32 rounding applied alike to every element), which emu.h emulates;
 * pointers are 32-byte aligned and ld a multiple of 16 bytes, as wmma
 * requires.
 */
#ifndef NCF_CUDA_MMA_CUH
#define NCF_CUDA_MMA_CUH

#include "common.cuh"

#ifndef NCF_CUDA_EMULATE
#include <mma.h>
#endif

namespace NCF_CUDA_NS {

enum { MMA_F32, MMA_TF32, MMA_16 };
struct mma_col {};
struct mma_row {};

/* The lane of this thread in its warp (1-D blocks). */
NCF_DI unsigned lane_id(void)
{
	return threadIdx.x % 32u;
}

template <typename T, int MODE> struct mma_tile;

/* ---- MMA_16: bf16 / fp16 on tensor cores ---------------------------- */

template <typename L> struct wmma_layout;
template <> struct wmma_layout<mma_col> {
	typedef nvcuda::wmma::col_major type;
};
template <> struct wmma_layout<mma_row> {
	typedef nvcuda::wmma::row_major type;
};

template <typename T> struct mma_tile<T, MMA_16> {
	enum { KSTEP = 16 };
	typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T,
				       nvcuda::wmma::row_major>
		frag_a;
	template <typename L> struct frag_b {
		typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T,
					       typename wmma_layout<L>::type>
			type;
	};
	typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> frag_c;
	static __device__ __forceinline__ void zero(frag_c &c)
	{
		nvcuda::wmma::fill_fragment(c, 0.0f);
	}
	typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T,
				       nvcuda::wmma::col_major>
		frag_at;
	static __device__ __forceinline__ void load_a(frag_a &a, const T *p, unsigned ld)
	{
		nvcuda::wmma::load_matrix_sync(a, p, ld);
	}
	static __device__ __forceinline__ void load_at(frag_at &a, const T *p, unsigned ld)
	{
		nvcuda::wmma::load_matrix_sync(a, p, ld);
	}
	template <typename L>
	static __device__ __forceinline__ void load_b(typename frag_b<L>::type &b, const T *p,
						      unsigned ld)
	{
		nvcuda::wmma::load_matrix_sync(b, p, ld);
	}
	template <typename FA, typename FB>
	static __device__ __forceinline__ void mma(frag_c &c, const FA &a, const FB &b)
	{
		nvcuda::wmma::mma_sync(c, a, b, c);
	}
	static __device__ __forceinline__ void store(float *p, const frag_c &c, unsigned ld)
	{
		nvcuda::wmma::store_matrix_sync(p, c, ld, nvcuda::wmma::mem_row_major);
	}
};

/* ---- MMA_TF32: fp32 storage, TF32 tensor cores ----------------------- */

template <> struct mma_tile<float, MMA_TF32> {
	enum { KSTEP = 8 };
	typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8,
				       nvcuda::wmma::precision::tf32, nvcuda::wmma::row_major>
		frag_a;
	template <typename L> struct frag_b {
		typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 8,
					       nvcuda::wmma::precision::tf32,
					       typename wmma_layout<L>::type>
			type;
	};
	typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> frag_c;
	static __device__ __forceinline__ void zero(frag_c &c)
	{
		nvcuda::wmma::fill_fragment(c, 0.0f);
	}
	template <typename F> static __device__ __forceinline__ void round_tf32(F &f)
	{
		for (int t = 0; t < f.num_elements; t++)
			f.x[t] = nvcuda::wmma::__float_to_tf32(f.x[t]);
	}
	typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8,
				       nvcuda::wmma::precision::tf32, nvcuda::wmma::col_major>
		frag_at;
	static __device__ __forceinline__ void load_a(frag_a &a, const float *p, unsigned ld)
	{
		nvcuda::wmma::load_matrix_sync(a, p, ld);
		round_tf32(a);
	}
	static __device__ __forceinline__ void load_at(frag_at &a, const float *p, unsigned ld)
	{
		nvcuda::wmma::load_matrix_sync(a, p, ld);
		round_tf32(a);
	}
	template <typename L>
	static __device__ __forceinline__ void load_b(typename frag_b<L>::type &b, const float *p,
						      unsigned ld)
	{
		nvcuda::wmma::load_matrix_sync(b, p, ld);
		round_tf32(b);
	}
	template <typename FA, typename FB>
	static __device__ __forceinline__ void mma(frag_c &c, const FA &a, const FB &b)
	{
		nvcuda::wmma::mma_sync(c, a, b, c);
	}
	static __device__ __forceinline__ void store(float *p, const frag_c &c, unsigned ld)
	{
		nvcuda::wmma::store_matrix_sync(p, c, ld, nvcuda::wmma::mem_row_major);
	}
};

/* ---- MMA_F32: exact fp32, one lane per 8 outputs --------------------- */

template <> struct mma_tile<float, MMA_F32> {
	enum { KSTEP = 8 };
	struct frag_a {
		const float *p;
		unsigned ld;
	};
	struct frag_at {
		const float *p;
		unsigned ld;
	};
	template <typename L> struct frag_b {
		struct type {
			const float *p;
			unsigned ld;
		};
	};
	struct frag_c {
		float x[8];
	};
	static NCF_DI void zero(frag_c &c)
	{
		NCF_UNROLL
		for (int e = 0; e < 8; e++)
			c.x[e] = 0.0f;
	}
	static NCF_DI void load_a(frag_a &a, const float *p, unsigned ld)
	{
		a.p = p;
		a.ld = ld;
	}
	static NCF_DI void load_at(frag_at &a, const float *p, unsigned ld)
	{
		a.p = p;
		a.ld = ld;
	}
	/* A[i][k] of a frag_a, a frag_at */
	static NCF_DI float a_at(const frag_a &a, unsigned i, unsigned k)
	{
		return a.p[i * a.ld + k];
	}
	static NCF_DI float a_at(const frag_at &a, unsigned i, unsigned k)
	{
		return a.p[k * a.ld + i];
	}
	template <typename L>
	static NCF_DI void load_b(typename frag_b<L>::type &b, const float *p, unsigned ld)
	{
		b.p = p;
		b.ld = ld;
	}
	/* B[k][n] of a frag_b of layout L */
	static NCF_DI float b_at(const frag_b<mma_col>::type &b, unsigned k, unsigned n)
	{
		return b.p[n * b.ld + k];
	}
	static NCF_DI float b_at(const frag_b<mma_row>::type &b, unsigned k, unsigned n)
	{
		return b.p[k * b.ld + n];
	}
	template <typename FA, typename FB>
	static NCF_DI void mma(frag_c &c, const FA &a, const FB &b)
	{
		unsigned l = lane_id(), r = l / 2, n0 = (l % 2) * 8;
		for (unsigned k = 0; k < KSTEP; k++) {
			float av = a_at(a, r, k);
			NCF_UNROLL
			for (unsigned e = 0; e < 8; e++)
				c.x[e] += av * b_at(b, k, n0 + e);
		}
	}
	static NCF_DI void store(float *p, const frag_c &c, unsigned ld)
	{
		unsigned l = lane_id(), r = l / 2, n0 = (l % 2) * 8;
		NCF_UNROLL
		for (unsigned e = 0; e < 8; e++)
			p[r * ld + n0 + e] = c.x[e];
	}
};

} /* namespace NCF_CUDA_NS */

#endif
