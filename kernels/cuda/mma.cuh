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
 *   MMA_16   T bf16 or fp16: mma.sync m16n8k16 (two per 16x16 tile), fp32
 *            accumulators, fragments loaded by ldmatrix (x4; .trans for a
 *            transposed operand) from 32-bit shared-memory addresses: one
 *            LDSM per 8x8x4 pieces, no generic loads;
 *   MMA_TF32 T float: mma.sync m16n8k8 on TF32-rounded inputs (cvt.rna),
 *            fp32 accumulators; row-major fragments by ldmatrix (an 8x8
 *            matrix of b16 is 8 rows of 4 floats, which is the tf32 A and B
 *            fragment layout), transposed ones by 32-bit shared loads;
 *   MMA_F32  T float: no tensor cores: lane l owns row l / 2, columns
 *            8 (l % 2) .. + 8 of the tile and adds a[r][k] b[k][n] in k order
 *            in fp32, so that a product of K terms is summed exactly as
 *            kernels/cpu/reference.c sums it (precision fp32: bit for bit).
 *
 * The fragments are PTX's (the ISA's "matrix fragments for mma.m16n8k16"
 * and "mma.m16n8k8" with .tf32): with g = lane / 4 and t = lane % 4, A's
 * registers hold (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)
 * (tf32: (g, t), (g+8, t), (g, t+4), (g+8, t+4)); B's (2t..2t+1, g),
 * (2t+8.., g) (tf32: (t, g), (t+4, g)); C's (g, 2t), (g, 2t+1), (g+8, 2t),
 * (g+8, 2t+1).  ldmatrix gives lane l of each 8x8 matrix the pair (row l/4,
 * columns 2(l%4)..+1), or with .trans (rows 2(l%4)..+1, column l/4); lanes
 * 8j..8j+7 name the rows of matrix j.  emu.h emulates exactly these
 * layouts (the warp's lanes exchange their registers), so a fragment in
 * the wrong place is a wrong result under make check.  Pointers are 16-byte
 * aligned and ld a multiple of 8 elements (16 bytes), as ldmatrix needs.
 */
#ifndef NCF_CUDA_MMA_CUH
#define NCF_CUDA_MMA_CUH

#include <type_traits>

#include "common.cuh"

namespace NCF_CUDA_NS {

enum { MMA_F32, MMA_TF32, MMA_16 };
struct mma_col {};
struct mma_row {};

/* The lane of this thread in its warp (1-D blocks). */
NCF_DI unsigned lane_id(void)
{
	return threadIdx.x % 32u;
}

/* ---- the instructions ---------------------------------------------------- */

/* A shared-memory address: 32 bits on the device (what ldmatrix and
 * ld.shared take), the pointer itself under emulation; byte offsets add. */
#ifdef NCF_CUDA_EMULATE
typedef const unsigned char *smem_t;
NCF_DEV smem_t smem_of(const void *p)
{
	return (smem_t)p;
}
#else
typedef uint32_t smem_t;
NCF_DEV smem_t smem_of(const void *p)
{
	return (smem_t)__cvta_generic_to_shared(p);
}
#endif

/* r[0..4) = four 8x8 b16 matrices, the rows of matrix j at lanes 8j..8j+7's
 * addresses (ldmatrix .x4; trans: each transposed). */
NCF_DEV void ldsm_x4(uint32_t r[4], smem_t a)
{
#ifdef NCF_CUDA_EMULATE
	ncf_emu_ldmatrix(r, a, 0);
#elif defined(__CUDA_ARCH__)
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(a));
#endif
}
NCF_DEV void ldsm_x4_trans(uint32_t r[4], smem_t a)
{
#ifdef NCF_CUDA_EMULATE
	ncf_emu_ldmatrix(r, a, 1);
#elif defined(__CUDA_ARCH__)
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(a));
#endif
}
/* 32 bits at a (ld.shared). */
NCF_DEV uint32_t lds32(smem_t a)
{
#ifdef NCF_CUDA_EMULATE
	uint32_t v;
	memcpy(&v, a, 4);
	return v;
#elif defined(__CUDA_ARCH__)
	uint32_t v;
	asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(a));
	return v;
#else
	return 0;
#endif
}
/* x rounded to TF32 (cvt.rna.tf32.f32: to nearest, ties away), as bits. */
NCF_DEV uint32_t tf32_bits(uint32_t x)
{
#ifdef NCF_CUDA_EMULATE
	return f2u(ncf_emu_tf32(u2f(x)));
#elif defined(__CUDA_ARCH__)
	uint32_t r;
	asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(u2f(x)));
	return r;
#else
	return x;
#endif
}

/* d[0..4) += A B for one m16n8 piece: mma.sync m16n8k16 of bf16 or fp16
 * (T), m16n8k8 of tf32 (T float), fp32 accumulators. */
template <typename T> NCF_DEV void mma_m16n8(float d[4], const uint32_t a[4], const uint32_t b[2])
{
#ifdef NCF_CUDA_EMULATE
	ncf_emu_mma(d, a, b,
		    sizeof(T) == 4 ? NCF_EMU_MMA_TF32
		    : std::is_same<T, __nv_bfloat16>::value ? NCF_EMU_MMA_BF16
							     : NCF_EMU_MMA_F16);
#elif defined(__CUDA_ARCH__)
	if constexpr (sizeof(T) == 4)
		asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
		    "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
	else if constexpr (std::is_same<T, bf16>::value)
		asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
		    "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
	else
		asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
		    "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* ---- the tensor-core tiles (MMA_16, MMA_TF32) ----------------------------- */

/*
 * What the two tensor-core modes share: a 16x16 tile as two m16n8 pieces,
 * its accumulators (x[0..4) columns 0..7, x[4..8) columns 8..15) and their
 * store.  E: elements of T per 16 bytes (8 for 16-bit, 4 for float), so
 * that a fragment row of KSTEP elements is two ldmatrix rows.
 */
template <typename T> struct mma_tc {
	enum { KSTEP = sizeof(T) == 2 ? 16 : 8, E = 16 / sizeof(T) };
	struct frag_a {
		uint32_t r[4];
	};
	typedef frag_a frag_at;
	template <typename L> struct frag_b {
		typedef frag_a type; /* r[0..2) columns 0..7, r[2..4) columns 8..15 */
	};
	struct frag_c {
		float x[8];
	};
	static NCF_DEV void zero(frag_c &c)
	{
		NCF_UNROLL
		for (int e = 0; e < 8; e++)
			c.x[e] = 0.0f;
	}
	/* The address lane l names for rows (l % 16) and column pieces l / 16 of
	 * a row-major (16, 2E) block at p (the A, and row-major B, order of the
	 * four matrices); and for rows l % 8 + 8 (l / 16), pieces (l / 8) % 2
	 * (the transposed A, and column-major B, order). */
	static NCF_DEV smem_t rows_first(const T *p, unsigned ld)
	{
		unsigned l = lane_id();
		return smem_of(p) + ((l % 16) * ld + E * (l / 16)) * (unsigned)sizeof(T);
	}
	static NCF_DEV smem_t pieces_first(const T *p, unsigned ld)
	{
		unsigned l = lane_id();
		return smem_of(p) + ((l % 8 + 8 * (l / 16)) * ld + E * ((l / 8) % 2)) *
					    (unsigned)sizeof(T);
	}
	template <typename FA, typename FB> static NCF_DEV void mma(frag_c &c, const FA &a, const FB &b)
	{
		mma_m16n8<T>(c.x, a.r, b.r);
		mma_m16n8<T>(c.x + 4, a.r, b.r + 2);
	}
	static NCF_DEV void store(float *p, const frag_c &c, unsigned ld)
	{
		unsigned l = lane_id(), g = l / 4, t = l % 4;
		NCF_UNROLL
		for (unsigned h = 0; h < 2; h++) {
			float *q = p + g * ld + 8 * h + 2 * t;
			q[0] = c.x[4 * h], q[1] = c.x[4 * h + 1];
			q[8 * ld] = c.x[4 * h + 2], q[8 * ld + 1] = c.x[4 * h + 3];
		}
	}
};

template <typename T, int MODE> struct mma_tile;

/* bf16 / fp16: every fragment by one ldmatrix. */
template <typename T> struct mma_tile<T, MMA_16> : mma_tc<T> {
	typedef mma_tc<T> B_;
	typedef typename B_::frag_a frag_a;
	static NCF_DEV void load_a(frag_a &a, const T *p, unsigned ld)
	{
		ldsm_x4(a.r, B_::rows_first(p, ld));
	}
	static NCF_DEV void load_at(frag_a &a, const T *p, unsigned ld)
	{
		ldsm_x4_trans(a.r, B_::pieces_first(p, ld));
	}
	template <typename L> static NCF_DEV void load_b(frag_a &b, const T *p, unsigned ld)
	{
		if constexpr (std::is_same<L, mma_col>::value)
			ldsm_x4(b.r, B_::pieces_first(p, ld));
		else
			ldsm_x4_trans(b.r, B_::rows_first(p, ld));
	}
};

/* tf32: row-major fragments by ldmatrix, transposed ones by 32-bit loads;
 * every element rounded to TF32. */
template <> struct mma_tile<float, MMA_TF32> : mma_tc<float> {
	static NCF_DEV void round(frag_a &f)
	{
		NCF_UNROLL
		for (int e = 0; e < 4; e++)
			f.r[e] = tf32_bits(f.r[e]);
	}
	static NCF_DEV void load_a(frag_a &a, const float *p, unsigned ld)
	{
		ldsm_x4(a.r, rows_first(p, ld));
		round(a);
	}
	/* A^T's fragment: (g, t) = p[t ld + g], (g + 8, t), (g, t + 4), (g + 8, t + 4) */
	static NCF_DEV void load_at(frag_a &a, const float *p, unsigned ld)
	{
		unsigned l = lane_id(), g = l / 4, t = l % 4;
		smem_t s = smem_of(p) + (t * ld + g) * 4u;
		a.r[0] = lds32(s);
		a.r[1] = lds32(s + 8 * 4);
		a.r[2] = lds32(s + 4 * ld * 4);
		a.r[3] = lds32(s + (4 * ld + 8) * 4);
		round(a);
	}
	template <typename L> static NCF_DEV void load_b(frag_a &b, const float *p, unsigned ld)
	{
		if constexpr (std::is_same<L, mma_col>::value) {
			ldsm_x4(b.r, pieces_first(p, ld));
			round(b);
			return;
		}
		/* row-major B: (t, g) = p[t ld + g], (t + 4, g); columns 8.. alike */
		unsigned l = lane_id(), g = l / 4, t = l % 4;
		smem_t s = smem_of(p) + (t * ld + g) * 4u;
		b.r[0] = lds32(s);
		b.r[1] = lds32(s + 4 * ld * 4);
		b.r[2] = lds32(s + 8 * 4);
		b.r[3] = lds32(s + (4 * ld + 8) * 4);
		round(b);
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
