/*
 * simd.h - every intrinsic of the cpu backend, in one place.  Each piece
 * has a plain C twin that gives the same bits (named beside it), used when
 * the compiler does not target AVX2 (and FMA); -march=native decides.
 *
 *   simd_philox8          eight Philox-4x32-10 blocks at once, the rounds
 *                         and constants of ncf_hd.h instantiated on AVX2
 *                         lanes (twin: ncf_dropout_bits per block);
 *   simd_philox16         the same, sixteen blocks on AVX-512 lanes;
 *   simd_relu_back_stream the ReLU/dropout backward with streaming stores
 *                         (twin: relu_dropout_back in train.c);
 *   dense_tile6/1         6x16 and 1x16 register tiles of y = relu(x W^T + b)
 *                         with fused multiply-adds (twin: the portable
 *                         dense_rows in infer.c, fmaf in the same order).
 */
#ifndef NCF_CPU_SIMD_H
#define NCF_CPU_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "ncf_hd.h"

#if defined(__AVX2__)
#include <immintrin.h>
#define NCF_SIMD_AVX2 1
#if defined(__FMA__)
#define NCF_SIMD_FMA 1
#endif
#endif

#ifdef NCF_SIMD_AVX2
/* ---- dropout bits ------------------------------------------------------ */

/* lo, hi of the eight 32x32-bit products a * b. */
static inline void simd_mulhilo8(__m256i a, __m256i b, __m256i *lo, __m256i *hi)
{
	__m256i even = _mm256_mul_epu32(a, b);
	__m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
	*lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
	*hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/* The lane operations of NCF_PHILOX4X32_10 (ncf_hd.h) on eight lanes. */
#define NCF_MULHILO_X8(m, x, lo, hi) simd_mulhilo8(_mm256_set1_epi32((int)(m)), (x), &(lo), &(hi))
#define NCF_XORK_X8(a, b, k) \
	_mm256_xor_si256(_mm256_xor_si256((a), (b)), _mm256_set1_epi32((int)(k)))

/*
 * ncf_philox4x32 of eight inputs that differ only in counter word 3, which
 * is in->c[3] + lane: out[i][lane] is word i of block lane.  The dropout
 * blocks w0..w0+7 of one sample and layer are such inputs
 * (ncf_dropout_input, w0 + 7 < 2^16).
 */
static inline void simd_philox8(const ncf_rng_input *in, uint32_t out[4][8])
{
	__m256i x0 = _mm256_set1_epi32((int)in->c[0]), x1 = _mm256_set1_epi32((int)in->c[1]);
	__m256i x2 = _mm256_set1_epi32((int)in->c[2]);
	__m256i x3 = _mm256_add_epi32(_mm256_set1_epi32((int)in->c[3]),
				      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	NCF_PHILOX4X32_10(__m256i, NCF_MULHILO_X8, NCF_XORK_X8, x0, x1, x2, x3, in->k[0],
			  in->k[1]);
	_mm256_storeu_si256((__m256i *)out[0], x0);
	_mm256_storeu_si256((__m256i *)out[1], x1);
	_mm256_storeu_si256((__m256i *)out[2], x2);
	_mm256_storeu_si256((__m256i *)out[3], x3);
}

#if defined(__AVX512F__)
#define NCF_SIMD_AVX512 1
/* lo, hi of the sixteen 32x32-bit products a * b. */
static inline void simd_mulhilo16(__m512i a, __m512i b, __m512i *lo, __m512i *hi)
{
	__m512i even = _mm512_mul_epu32(a, b);
	__m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32));
	*lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
	*hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

#define NCF_MULHILO_X16(m, x, lo, hi) \
	simd_mulhilo16(_mm512_set1_epi32((int)(m)), (x), &(lo), &(hi))
#define NCF_XORK_X16(a, b, k) \
	_mm512_xor_si512(_mm512_xor_si512((a), (b)), _mm512_set1_epi32((int)(k)))

/* Sixteen Philox blocks in->c[3] + 0..15 (w0 + 15 < 2^16 for dropout
 * inputs), as simd_philox8 computes them, written block-major: out[4b + i]
 * is word i of block b, the layout of ncf_dropout_bits for blocks 0..15. */
static inline void simd_philox16(const ncf_rng_input *in, uint32_t out[64])
{
	__m512i x0 = _mm512_set1_epi32((int)in->c[0]), x1 = _mm512_set1_epi32((int)in->c[1]);
	__m512i x2 = _mm512_set1_epi32((int)in->c[2]);
	__m512i x3 = _mm512_add_epi32(_mm512_set1_epi32((int)in->c[3]),
				      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
							13, 14, 15));
	NCF_PHILOX4X32_10(__m512i, NCF_MULHILO_X16, NCF_XORK_X16, x0, x1, x2, x3, in->k[0],
			  in->k[1]);
	/* transpose: in each 128-bit lane q, vj gets block 4q + j's four words */
	__m512i t0 = _mm512_unpacklo_epi32(x0, x1), t1 = _mm512_unpackhi_epi32(x0, x1);
	__m512i t2 = _mm512_unpacklo_epi32(x2, x3), t3 = _mm512_unpackhi_epi32(x2, x3);
	__m512i v0 = _mm512_unpacklo_epi64(t0, t2), v1 = _mm512_unpackhi_epi64(t0, t2);
	__m512i v2 = _mm512_unpacklo_epi64(t1, t3), v3 = _mm512_unpackhi_epi64(t1, t3);
	/* blocks 4q..4q+3 are 128-bit lane q of v0..v3: gather them in order */
	__m512i a = _mm512_shuffle_i32x4(v0, v1, 0x44), b = _mm512_shuffle_i32x4(v2, v3, 0x44);
	__m512i c = _mm512_shuffle_i32x4(v0, v1, 0xEE), d = _mm512_shuffle_i32x4(v2, v3, 0xEE);
	/* a = v0.q0 v0.q1 v1.q0 v1.q1, b = v2.q0 v2.q1 v3.q0 v3.q1 (c, d: q2, q3) */
	_mm512_storeu_si512((void *)out, _mm512_shuffle_i32x4(a, b, 0x88));
	_mm512_storeu_si512((void *)(out + 16), _mm512_shuffle_i32x4(a, b, 0xDD));
	_mm512_storeu_si512((void *)(out + 32), _mm512_shuffle_i32x4(c, d, 0x88));
	_mm512_storeu_si512((void *)(out + 48), _mm512_shuffle_i32x4(c, d, 0xDD));
}
#endif /* __AVX512F__ */

/* ---- ReLU / dropout backward, streamed -------------------------------- */

/* dz (count) = h > 0 ? dh * scale : 0 with non-temporal stores, when dz is
 * 32-byte aligned and count a multiple of 8; returns 1 then, else 0 (and
 * does nothing). */
static inline int simd_relu_back_stream(float *restrict dz, const float *restrict dh,
					const float *restrict h, size_t count, float scale)
{
	if (((uintptr_t)dz & 31) != 0 || count % 8 != 0)
		return 0;
	__m256 sc = _mm256_set1_ps(scale), zero = _mm256_setzero_ps();
	for (size_t k = 0; k < count; k += 8) {
		__m256 v = _mm256_mul_ps(_mm256_loadu_ps(dh + k), sc);
		__m256 m = _mm256_cmp_ps(_mm256_loadu_ps(h + k), zero, _CMP_GT_OQ);
		_mm256_stream_ps(dz + k, _mm256_and_ps(v, m));
	}
	_mm_sfence();
	return 1;
}
#endif /* NCF_SIMD_AVX2 */

#ifdef NCF_SIMD_FMA
/* ---- dense layers for scoring ------------------------------------------ */

/* Store relu(acc + bias) of one row's 16 outputs. */
static inline void tile_store(float *y, __m256 a0, __m256 a1, __m256 b0, __m256 b1)
{
	__m256 z = _mm256_setzero_ps();
	_mm256_storeu_ps(y, _mm256_max_ps(_mm256_add_ps(a0, b0), z));
	_mm256_storeu_ps(y + 8, _mm256_max_ps(_mm256_add_ps(a1, b1), z));
}

/* 6 rows x 16 outputs starting at column o: twelve accumulators in
 * registers (written out: an array of vectors gets spilled). */
static inline void dense_tile6(const float *x, size_t ldx, size_t in, const float *wt,
			       size_t outp, const float *b, float *y, size_t o)
{
	__m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
	__m256 a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
	const float *w = wt + o;
	const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
	const float *x4 = x + 4 * ldx, *x5 = x + 5 * ldx;
	for (size_t q = 0; q < in; q++, w += outp) {
		__m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8), v;
		v = _mm256_broadcast_ss(x0 + q);
		a00 = _mm256_fmadd_ps(v, w0, a00);
		a01 = _mm256_fmadd_ps(v, w1, a01);
		v = _mm256_broadcast_ss(x1 + q);
		a10 = _mm256_fmadd_ps(v, w0, a10);
		a11 = _mm256_fmadd_ps(v, w1, a11);
		v = _mm256_broadcast_ss(x2 + q);
		a20 = _mm256_fmadd_ps(v, w0, a20);
		a21 = _mm256_fmadd_ps(v, w1, a21);
		v = _mm256_broadcast_ss(x3 + q);
		a30 = _mm256_fmadd_ps(v, w0, a30);
		a31 = _mm256_fmadd_ps(v, w1, a31);
		v = _mm256_broadcast_ss(x4 + q);
		a40 = _mm256_fmadd_ps(v, w0, a40);
		a41 = _mm256_fmadd_ps(v, w1, a41);
		v = _mm256_broadcast_ss(x5 + q);
		a50 = _mm256_fmadd_ps(v, w0, a50);
		a51 = _mm256_fmadd_ps(v, w1, a51);
	}
	__m256 b0 = _mm256_loadu_ps(b + o), b1 = _mm256_loadu_ps(b + o + 8);
	tile_store(y + o, a00, a01, b0, b1);
	tile_store(y + outp + o, a10, a11, b0, b1);
	tile_store(y + 2 * outp + o, a20, a21, b0, b1);
	tile_store(y + 3 * outp + o, a30, a31, b0, b1);
	tile_store(y + 4 * outp + o, a40, a41, b0, b1);
	tile_store(y + 5 * outp + o, a50, a51, b0, b1);
}

/* One row x 16 outputs: the same operations as a row of dense_tile6. */
static inline void dense_tile1(const float *x, size_t ldx, size_t in, const float *wt,
			       size_t outp, const float *b, float *y, size_t o)
{
	(void)ldx;
	__m256 a0 = _mm256_setzero_ps(), a1 = a0;
	const float *w = wt + o;
	for (size_t q = 0; q < in; q++, w += outp) {
		__m256 v = _mm256_broadcast_ss(x + q);
		a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(w), a0);
		a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(w + 8), a1);
	}
	tile_store(y + o, a0, a1, _mm256_loadu_ps(b + o), _mm256_loadu_ps(b + o + 8));
}

#endif /* NCF_SIMD_FMA */

#endif
