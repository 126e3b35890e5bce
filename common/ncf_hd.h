/*
 * ncf_hd.h - scalar formulas shared bit for bit by the CPU and the GPU.
 *
 * Everything here is compiled by gcc (the cpu backend, the tools) and by
 * nvcc (the cuda backend); NCF_HD marks each function host+device.  What
 * must agree exactly between the two backends lives here and nowhere else:
 * the Philox-4x32-10 generator, the counter layout of every random purpose,
 * the epoch's permutation, the sample stream, dropout masks, sigmoid, BCE
 * and the Adam update.  Integer formulas are exact on both sides; the float
 * ones are written so that both compilers evaluate the same operations in
 * the same order (no library calls whose rounding differs besides expf,
 * logf, sqrtf).
 *
 * This header has no dependencies beyond <stdint.h> and <math.h> and holds
 * no state.
 */
#ifndef NCF_HD_H
#define NCF_HD_H

#include <stdint.h>
#include <math.h>

#if defined(__CUDACC__)
#define NCF_HD __host__ __device__ __forceinline__
#else
#define NCF_HD static inline
#endif

/* ---------------------------------------------------------------------
 * Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11).  Checked against the published known-answer vectors in
 * tests/unit/test_rng.c.
 * ------------------------------------------------------------------- */

typedef struct ncf_u32x4 {
	uint32_t v[4];
} ncf_u32x4;

NCF_HD uint32_t ncf_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi)
{
	uint64_t p = (uint64_t)a * (uint64_t)b;
	*hi = (uint32_t)(p >> 32);
	return (uint32_t)p;
}

/* The constants of Philox-4x32: round multipliers and Weyl key increments. */
#define NCF_PHILOX_M0 0xD2511F53u
#define NCF_PHILOX_M1 0xCD9E8D57u
#define NCF_PHILOX_W0 0x9E3779B9u
#define NCF_PHILOX_W1 0xBB67AE85u

/*
 * The 10 rounds of Philox-4x32, written once for any lane type V: the
 * counter words c0..c3 are lvalues of type V, which holds one lane (uint32_t,
 * the generator below) or several (the cpu backend's eight AVX2 lanes,
 * kernels/cpu/simd.h); the key (k0, k1) is two uint32_t, the same for every
 * lane.  The caller names V's two operations:
 *   MULHILO(m, x, lo, hi)  lo, hi = low and high 32 bits of m * x per lane
 *                          (m one of the multipliers above);
 *   XORK(a, b, k)          a ^ b ^ k per lane (k a uint32_t key word).
 * The round: (c0, c1, c2, c3) = (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2),
 * hi(M0 c0) ^ c3 ^ k1, lo(M0 c0)), then k0 += W0, k1 += W1.
 */
#define NCF_PHILOX4X32_10(V, MULHILO, XORK, c0, c1, c2, c3, k0, k1)                       \
	do {                                                                              \
		uint32_t k0_ = (k0), k1_ = (k1);                                          \
		for (int r_ = 0; r_ < 10; r_++) {                                         \
			V lo0_, hi0_, lo1_, hi1_;                                         \
			MULHILO(NCF_PHILOX_M0, c0, lo0_, hi0_);                           \
			MULHILO(NCF_PHILOX_M1, c2, lo1_, hi1_);                           \
			c0 = XORK(hi1_, c1, k0_);                                         \
			c1 = lo1_;                                                        \
			c2 = XORK(hi0_, c3, k1_);                                         \
			c3 = lo0_;                                                        \
			k0_ += NCF_PHILOX_W0;                                             \
			k1_ += NCF_PHILOX_W1;                                             \
		}                                                                         \
	} while (0)

/* The one-lane operations. */
#define NCF_MULHILO_U32(m, x, lo, hi) ((lo) = ncf_mulhilo32((m), (x), &(hi)))
#define NCF_XORK_U32(a, b, k) ((a) ^ (b) ^ (k))

/* One Philox-4x32 block with 10 rounds: counter c, key (k0, k1). */
NCF_HD ncf_u32x4 ncf_philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
				uint32_t k0, uint32_t k1)
{
	NCF_PHILOX4X32_10(uint32_t, NCF_MULHILO_U32, NCF_XORK_U32, c0, c1, c2, c3, k0, k1);
	ncf_u32x4 out;
	out.v[0] = c0;
	out.v[1] = c1;
	out.v[2] = c2;
	out.v[3] = c3;
	return out;
}

/*
 * Every random number of ncf is addressed by (seed, purpose, a, index, sub):
 *   key     = (seed low 32 bits, seed high 32 bits)
 *   counter = (index low 32, index high 32, a, purpose << 24 | sub)
 * where a is the epoch (or the attempt, or the tensor) and sub a 24-bit
 * sub-index (a layer and word, an attempt).  Purposes never share counters.
 */
enum ncf_rng_purpose {
	NCF_RNG_EVAL_NEG = 1,  /* a = attempt, index = user * negs + k          */
	NCF_RNG_TRAIN_NEG = 2, /* a = epoch, index = negative number, sub = try  */
	NCF_RNG_SHUFFLE = 3,   /* a = epoch, index = Feistel round              */
	NCF_RNG_DROPOUT = 4,   /* a = epoch, index = position, sub = layer/word */
	NCF_RNG_INIT = 5,      /* a = tensor, index = element pair              */
	NCF_RNG_SYNTH = 6,     /* synthetic data: a = table, index = row        */
	NCF_RNG_BENCH = 7,     /* benchmark ids and random models               */
};

/* What ncf_rng(seed, purpose, a, index, sub) encrypts: counter c, key k. */
typedef struct ncf_rng_input {
	uint32_t c[4], k[2];
} ncf_rng_input;

NCF_HD ncf_rng_input ncf_rng_input_of(uint64_t seed, uint32_t purpose, uint32_t a,
				      uint64_t index, uint32_t sub)
{
	ncf_rng_input in;
	in.c[0] = (uint32_t)index;
	in.c[1] = (uint32_t)(index >> 32);
	in.c[2] = a;
	in.c[3] = (purpose << 24) | (sub & 0xFFFFFFu);
	in.k[0] = (uint32_t)seed;
	in.k[1] = (uint32_t)(seed >> 32);
	return in;
}

NCF_HD ncf_u32x4 ncf_rng(uint64_t seed, uint32_t purpose, uint32_t a, uint64_t index,
			 uint32_t sub)
{
	ncf_rng_input in = ncf_rng_input_of(seed, purpose, a, index, sub);
	return ncf_philox4x32(in.c[0], in.c[1], in.c[2], in.c[3], in.k[0], in.k[1]);
}

/* Map a uniform 32-bit word to [0, n) by multiply-shift (bias below n/2^32). */
NCF_HD uint32_t ncf_uniform_below(uint32_t x, uint32_t n)
{
	return (uint32_t)(((uint64_t)x * (uint64_t)n) >> 32);
}

/* Map a uniform 32-bit word to a float in [0, 1) with 24 bits. */
NCF_HD float ncf_uniform01(uint32_t x)
{
	return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* ---------------------------------------------------------------------
 * The epoch's shuffle: a keyed permutation of [0, n).  A balanced 4-round
 * Feistel network on 2h bits (4^h >= n) with cycle walking: positions that
 * land outside [0, n) are encrypted again until they fall inside, which
 * keeps it a bijection on [0, n).  Round keys come from Philox
 * (NCF_RNG_SHUFFLE); the round function is an integer mixer.
 * ------------------------------------------------------------------- */

typedef struct ncf_perm {
	uint64_t n;	/* domain size */
	uint32_t half;	/* bits per half, 1..32 */
	uint32_t key[4];/* round keys */
} ncf_perm;

NCF_HD ncf_perm ncf_perm_make(uint64_t n, uint64_t seed, uint32_t epoch)
{
	ncf_perm p;
	uint32_t bits = 2;
	while (bits < 64 && (((uint64_t)1 << bits) < n))
		bits++;
	if (bits & 1)
		bits++;
	p.n = n;
	p.half = bits / 2;
	ncf_u32x4 k = ncf_rng(seed, NCF_RNG_SHUFFLE, epoch, 0, 0);
	for (int i = 0; i < 4; i++)
		p.key[i] = k.v[i];
	return p;
}

NCF_HD uint32_t ncf_mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7FEB352Du;
	x ^= x >> 15;
	x *= 0x846CA68Bu;
	x ^= x >> 16;
	return x;
}

/* The permuted image of position t (t < p->n). */
NCF_HD uint64_t ncf_perm_apply(const ncf_perm *p, uint64_t t)
{
	uint64_t mask = p->half >= 32 ? 0xFFFFFFFFull : (((uint64_t)1 << p->half) - 1);
	uint64_t x = t;
	do {
		uint64_t l = x >> p->half, r = x & mask;
		for (int round = 0; round < 4; round++) {
			uint64_t f = ncf_mix32((uint32_t)r ^ p->key[round]) & mask;
			uint64_t nl = r;
			r = l ^ f;
			l = nl;
		}
		x = (l << p->half) | r;
	} while (x >= p->n);
	return x;
}

/* ---------------------------------------------------------------------
 * The training sample stream (DESIGN.md section 4).
 *
 * An epoch has S = P (1 + k) + E samples (ncf_epoch_samples): P training
 * positives, k drawn negatives per positive and E explicit negatives (the
 * label 0 rows a data set may give).  Sample s < P is positive s (CSR
 * entry s: user entry_user[s], item items[s], label 1).  Sample
 * P <= s < P (1 + k) is drawn negative q = s - P of positive q % P (NVIDIA
 * repeats the positives' users k times): its user is that positive's
 * user, its item uniform in [0, I) from (seed, NCF_RNG_TRAIN_NEG, epoch,
 * q, try), label 0.  Sample s >= P (1 + k) is explicit negative
 * e = s - P (1 + k) (entry e of the negatives' CSR: its user the row
 * holding e, its item neg_items[e]), label 0, the same in every epoch.
 * The position t of the epoch holds sample perm(t); batch b is positions
 * [bB, bB + B).  With E = 0 the stream is the one of P (1 + k) samples.
 * ------------------------------------------------------------------- */

/* The samples of an epoch, S = P (1 + k) + E: every count of an epoch
 * (its steps, the checkpoint's place in it, a backend's bounds) is derived
 * from this one.  Readers bound P (2^40), k (1000) and E, so that S fits. */
NCF_HD uint64_t ncf_epoch_samples(uint64_t P, uint32_t k, uint64_t E)
{
	return P * (1 + (uint64_t)k) + E;
}

/* The first index in [lo, hi) of the sorted a whose value is >= v (hi if
 * none).  Binary search. */
NCF_HD uint64_t ncf_lower_bound(const uint32_t *a, uint64_t lo, uint64_t hi, uint32_t v)
{
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (a[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Is item among the sorted row items[0..n)? */
NCF_HD int ncf_row_has(const uint32_t *items, int64_t n, uint32_t item)
{
	uint64_t k = ncf_lower_bound(items, 0, (uint64_t)n, item);
	return k < (uint64_t)n && items[k] == item;
}

/* The row of a CSR of rows rows (offsets (rows + 1), offsets[0] = 0) that
 * holds entry e < offsets[rows]: the last r with offsets[r] <= e.  Binary
 * search. */
NCF_HD uint32_t ncf_row_of(const int64_t *offsets, uint32_t rows, uint64_t e)
{
	uint32_t lo = 0, hi = rows; /* offsets[lo] <= e < offsets[hi] */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if ((uint64_t)offsets[mid] <= e)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Attempts before --true-negatives accepts a positive anyway (a user who
 * rated almost every item). */
#define NCF_NEG_MAX_TRIES 64

/* One epoch's sample stream, what ncf_sample_at reads: the epoch's
 * permutation of its S positions (ncf_perm_make(S, seed, epoch), S from
 * ncf_epoch_samples), how negatives are drawn, the training CSR and the
 * explicit negatives' (device memory on a GPU).  The explicit negatives
 * come last, so that a stream made without them (E = 0, NULL) is the
 * stream of a data set that has none. */
typedef struct ncf_stream {
	ncf_perm perm;
	uint64_t seed;
	uint32_t epoch;
	uint32_t items;		    /* I: negatives are uniform in [0, I) */
	int64_t positives;	    /* P */
	int true_neg;		    /* redraw negatives that are the user's positives */
	const uint32_t *entry_user; /* (P) the user of each CSR entry */
	const int64_t *offsets;	    /* (U + 1) */
	const uint32_t *csr_items;  /* (P) sorted within rows */
	uint64_t train_negatives;   /* E: the last E of the S samples */
	uint32_t users;		    /* U: rows of neg_offsets */
	const int64_t *neg_offsets; /* (U + 1) explicit negatives' CSR; NULL when E = 0 */
	const uint32_t *neg_items;  /* (E) in the order given */
} ncf_stream;

/* The sample at position t of the epoch of st: writes user, item; returns
 * the label (0 or 1). */
NCF_HD int ncf_sample_at(const ncf_stream *st, uint64_t t, uint32_t *user, uint32_t *item)
{
	const uint64_t P = (uint64_t)st->positives;
	uint64_t s = ncf_perm_apply(&st->perm, t);
	if (s < P) {
		*user = st->entry_user[s];
		*item = st->csr_items[s];
		return 1;
	}
	const uint64_t drawn_end = st->perm.n - st->train_negatives; /* P (1 + k) */
	if (s >= drawn_end) {
		uint64_t e = s - drawn_end;
		*user = ncf_row_of(st->neg_offsets, st->users, e);
		*item = st->neg_items[e];
		return 0;
	}
	uint64_t q = s - P;
	uint32_t u = st->entry_user[q % P];
	uint32_t it = 0;
	for (uint32_t tr = 0; tr < (st->true_neg ? NCF_NEG_MAX_TRIES : 1u); tr++) {
		ncf_u32x4 r = ncf_rng(st->seed, NCF_RNG_TRAIN_NEG, st->epoch, q, tr);
		it = ncf_uniform_below(r.v[0], st->items);
		if (!st->true_neg || !ncf_row_has(st->csr_items + st->offsets[u],
						  st->offsets[u + 1] - st->offsets[u], it))
			break;
	}
	*user = u;
	*item = it;
	return 0;
}

/* ---------------------------------------------------------------------
 * Dropout masks.  Unit j of layer l (0-based hidden layer) at epoch
 * position t is kept when its 16-bit uniform is >= drop16, where
 * drop16 = round(p * 65536); kept units are scaled by 1/(1-p).  One Philox
 * block gives the uniforms of 8 units: word w = j / 8, halves j % 8.
 * ------------------------------------------------------------------- */

NCF_HD uint32_t ncf_dropout_threshold(float p)
{
	float x = p * 65536.0f + 0.5f;
	if (x < 0.0f)
		x = 0.0f;
	if (x > 65536.0f)
		x = 65536.0f;
	return (uint32_t)x;
}

/* The Philox input of the block of units 8w..8w+7 of layer l at position
 * t.  Blocks w and w + 1 differ in the low 16 bits of counter word 3 only
 * (by 1), which the cpu backend's eight-lane generator relies on. */
NCF_HD ncf_rng_input ncf_dropout_input(uint64_t seed, uint32_t epoch, uint64_t t, uint32_t l,
				       uint32_t w)
{
	return ncf_rng_input_of(seed, NCF_RNG_DROPOUT, epoch, t, (l << 16) | (w & 0xFFFFu));
}

/* Eight 16-bit uniforms for units 8w..8w+7 of layer l at position t. */
NCF_HD ncf_u32x4 ncf_dropout_bits(uint64_t seed, uint32_t epoch, uint64_t t, uint32_t l,
				  uint32_t w)
{
	ncf_rng_input in = ncf_dropout_input(seed, epoch, t, l, w);
	return ncf_philox4x32(in.c[0], in.c[1], in.c[2], in.c[3], in.k[0], in.k[1]);
}

/* Keep bit of unit j (0..7 within the block) given the block's bits. */
NCF_HD int ncf_dropout_keep(ncf_u32x4 bits, uint32_t j, uint32_t drop16)
{
	uint32_t word = bits.v[j >> 1];
	uint32_t u16 = (j & 1) ? (word >> 16) : (word & 0xFFFFu);
	return u16 >= drop16;
}

/* ---------------------------------------------------------------------
 * Loss and optimizer.
 * ------------------------------------------------------------------- */

NCF_HD float ncf_sigmoid(float x)
{
	if (x >= 0.0f)
		return 1.0f / (1.0f + expf(-x));
	float e = expf(x);
	return e / (1.0f + e);
}

/* Binary cross-entropy with logits for label y (0 or 1), stable form. */
NCF_HD float ncf_bce(float x, float y)
{
	float ax = x < 0.0f ? -x : x;
	float m = x > 0.0f ? x : 0.0f;
	return m - x * y + log1pf(expf(-ax));
}

/*
 * BCE with logits and its gradient sigmoid(x) - y from one exp: the same
 * bits as ncf_bce(x, y) and ncf_sigmoid(x) - y.  Returns the gradient,
 * writes the loss.
 */
NCF_HD float ncf_bce_grad(float x, float y, float *loss)
{
	float ax = x < 0.0f ? -x : x;
	float e = expf(-ax);
	float m = x > 0.0f ? x : 0.0f;
	*loss = m - x * y + log1pf(e);
	float s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
	return s - y;
}

/* Adam constants of one step: bias corrections and step size. */
typedef struct ncf_adam_k {
	float lr;    /* learning rate */
	float beta1; /* first moment decay */
	float beta2; /* second moment decay */
	float eps;   /* added to the denominator */
	float bc1;   /* 1 - beta1^step */
	float bc2;   /* 1 - beta2^step */
} ncf_adam_k;

/*
 * One Adam update of parameter *p with gradient g (PyTorch's formula):
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr * (m / bc1) / (sqrt(v / bc2) + eps).
 */
NCF_HD void ncf_adam_update(float *p, float *m, float *v, float g, const ncf_adam_k *k)
{
	float mm = k->beta1 * *m + (1.0f - k->beta1) * g;
	float vv = k->beta2 * *v + (1.0f - k->beta2) * (g * g);
	*m = mm;
	*v = vv;
	float denom = sqrtf(vv / k->bc2) + k->eps;
	*p = *p - k->lr * ((mm / k->bc1) / denom);
}

#endif
