/*
 * test_rng.c - the shared random formulas of ncf_hd.h and CRC-32C.
 *
 * Checks: Philox-4x32-10 against the Random123 known-answer vectors
 * (kat_vectors, "philox4x32 10"); ncf_perm_apply is a bijection on [0, n);
 * ncf_uniform_below stays in range; CRC-32C check value; the training
 * sample stream (ncf_sample_at) on a hand-built CSR: every positive exactly
 * once per epoch, negatives with their positive's user, --true-negatives
 * never returning a training positive of a user who has unrated items.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "ncf_hd.h"
#include "tap.h"

static int philox_kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
		      uint32_t k1, const uint32_t want[4], const char *name)
{
	ncf_u32x4 r = ncf_philox4x32(c0, c1, c2, c3, k0, k1);
	int ok = !memcmp(r.v, want, sizeof r.v);
	if (!ok)
		tap_diag("%s: got %08x %08x %08x %08x, want %08x %08x %08x %08x", name, r.v[0],
			 r.v[1], r.v[2], r.v[3], want[0], want[1], want[2], want[3]);
	return tap_ok(ok, "philox4x32-10 known answer: %s", name);
}

/* Is ncf_perm_apply a bijection on [0, n) for (seed, epoch)? */
static int perm_is_bijection(uint64_t n, uint64_t seed, uint32_t epoch)
{
	ncf_perm p = ncf_perm_make(n, seed, epoch);
	unsigned char *seen = calloc(n, 1);
	int ok = 1;
	for (uint64_t t = 0; t < n && ok; t++) {
		uint64_t x = ncf_perm_apply(&p, t);
		if (x >= n) {
			tap_diag("n=%llu: perm(%llu) = %llu out of range", (unsigned long long)n,
				 (unsigned long long)t, (unsigned long long)x);
			ok = 0;
		} else if (seen[x]++) {
			tap_diag("n=%llu: perm(%llu) = %llu twice", (unsigned long long)n,
				 (unsigned long long)t, (unsigned long long)x);
			ok = 0;
		}
	}
	free(seen);
	return ok;
}

/*
 * The hand-built data set: 4 users, 10 items, k negatives per positive.
 *   user 0: items 1 3 5
 *   user 1: no training positives
 *   user 2: items 0 2 4 6 8
 *   user 3: item 9
 */
#define NU 4
#define NI 10
#define NP 9
static const int64_t offsets[NU + 1] = {0, 3, 3, 8, 9};
static const uint32_t items[NP] = {1, 3, 5, 0, 2, 4, 6, 8, 9};
static const uint32_t entry_user[NP] = {0, 0, 0, 2, 2, 2, 2, 2, 3};

/* One epoch of the stream: positives exactly once, negatives of the right
 * user, counts per user.  Returns 1 when every check holds. */
static int stream_epoch(uint64_t seed, uint32_t epoch, uint32_t k, int true_neg, int *hit_pos)
{
	uint64_t S = (uint64_t)NP * (1 + k);
	ncf_stream st = {.perm = ncf_perm_make(S, seed, epoch), .seed = seed, .epoch = epoch,
			 .items = NI, .positives = NP, .true_neg = true_neg,
			 .entry_user = entry_user, .offsets = offsets, .csr_items = items};
	const ncf_perm *perm = &st.perm;
	int pos_seen[NP] = {0};
	uint64_t neg_per_user[NU] = {0}, npos = 0, nneg = 0;
	int ok = 1;
	*hit_pos = 0;
	for (uint64_t t = 0; t < S; t++) {
		uint32_t u = UINT32_MAX, it = UINT32_MAX;
		int label = ncf_sample_at(&st, t, &u, &it);
		uint64_t s = ncf_perm_apply(perm, t);
		if (u >= NU || it >= NI) {
			tap_diag("t=%llu: user %u item %u out of range", (unsigned long long)t, u, it);
			ok = 0;
			continue;
		}
		if (label == 1) {
			npos++;
			if (s >= NP || u != entry_user[s] || it != items[s]) {
				tap_diag("t=%llu: positive (%u, %u) is not CSR entry %llu",
					 (unsigned long long)t, u, it, (unsigned long long)s);
				ok = 0;
			} else if (pos_seen[s]++) {
				tap_diag("t=%llu: positive %llu seen twice", (unsigned long long)t,
					 (unsigned long long)s);
				ok = 0;
			}
		} else if (label == 0) {
			nneg++;
			neg_per_user[u]++;
			if (s < NP || u != entry_user[(s - NP) % NP]) {
				tap_diag("t=%llu: negative sample %llu has user %u",
					 (unsigned long long)t, (unsigned long long)s, u);
				ok = 0;
			}
			if (ncf_row_has(items + offsets[u], offsets[u + 1] - offsets[u], it))
				(*hit_pos)++;
		} else {
			tap_diag("t=%llu: label %d", (unsigned long long)t, label);
			ok = 0;
		}
	}
	if (npos != NP || nneg != (uint64_t)NP * k) {
		tap_diag("epoch %u: %llu positives, %llu negatives (want %d, %llu)", epoch,
			 (unsigned long long)npos, (unsigned long long)nneg, NP,
			 (unsigned long long)NP * k);
		ok = 0;
	}
	for (int u = 0; u < NU; u++)
		if (neg_per_user[u] != (uint64_t)k * (uint64_t)(offsets[u + 1] - offsets[u])) {
			tap_diag("epoch %u: user %d has %llu negatives, want %llu", epoch, u,
				 (unsigned long long)neg_per_user[u],
				 (unsigned long long)k * (uint64_t)(offsets[u + 1] - offsets[u]));
			ok = 0;
		}
	return ok;
}

/* ---- the cases ---------------------------------------------------------- */

/* Random123 kat_vectors, philox4x32 with 10 rounds. */
static void t_philox_zeros(void)
{
	static const uint32_t z[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
	philox_kat(0, 0, 0, 0, 0, 0, z, "zeros");
}

static void t_philox_ones(void)
{
	static const uint32_t f[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
	philox_kat(~0u, ~0u, ~0u, ~0u, ~0u, ~0u, f, "all ones");
}

static void t_philox_pi(void)
{
	static const uint32_t p[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
	philox_kat(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, p,
		   "digits of pi");
}

/* ncf_rng lays out (seed, purpose, a, index, sub) as documented. */
static void t_rng_layout(void)
{
	uint64_t seed = 0x123456789abcdef0ull, index = 0x0fedcba987654321ull;
	ncf_u32x4 a = ncf_rng(seed, NCF_RNG_TRAIN_NEG, 7, index, 0xABCDEF);
	ncf_u32x4 b = ncf_philox4x32((uint32_t)index, (uint32_t)(index >> 32), 7,
				     (NCF_RNG_TRAIN_NEG << 24) | 0xABCDEF, (uint32_t)seed,
				     (uint32_t)(seed >> 32));
	tap_ok(!memcmp(a.v, b.v, sizeof a.v), "ncf_rng is philox4x32 of the documented words");
}

/* A bijection on [0, n) for 3 seeds x 3 epochs. */
static void t_perm_bijection(uint64_t n)
{
	int ok = 1;
	for (uint64_t seed = 0; seed < 3 && ok; seed++)
		for (uint32_t epoch = 0; epoch < 3 && ok; epoch++)
			ok = perm_is_bijection(n, seed * 0x9E3779B97F4A7C15ull, epoch);
	tap_ok(ok, "a bijection on [0, %llu)", (unsigned long long)n);
}

/* A permutation actually permutes, and the epoch changes it. */
static void t_perm_moves(void)
{
	ncf_perm a = ncf_perm_make(1000, 1, 0), b = ncf_perm_make(1000, 1, 1);
	int fixed = 0, same = 0;
	for (uint64_t t = 0; t < 1000; t++) {
		fixed += ncf_perm_apply(&a, t) == t;
		same += ncf_perm_apply(&a, t) == ncf_perm_apply(&b, t);
	}
	tap_ok(fixed < 50 && same < 50, "%d of 1000 fixed, %d the same in epochs 0 and 1", fixed,
	       same);
}

/* ncf_uniform_below(x, n) < n, at the extremes and at random. */
static void t_uniform_range(void)
{
	static const uint32_t ns[] = {1, 2, 3, 7, 100, 9724, 26744, 1u << 31, UINT32_MAX};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		uint32_t n = ns[i];
		int ok = 1;
		for (uint64_t j = 0; j < 20000; j++) {
			ncf_u32x4 r = ncf_rng(42, NCF_RNG_BENCH, (uint32_t)i, j, 0);
			for (int w = 0; w < 4; w++)
				ok &= ncf_uniform_below(r.v[w], n) < n;
		}
		tap_ok(ncf_uniform_below(0, n) == 0 && ncf_uniform_below(UINT32_MAX, n) == n - 1,
		       "n = %u: 0 -> 0, 2^32-1 -> n-1", n);
		tap_ok(ok, "n = %u: 80000 draws below n", n);
	}
}

/* Each of 10 values within 5% of 8000 over 80000 draws. */
static void t_uniform_spread(void)
{
	uint32_t count[10] = {0};
	for (uint64_t j = 0; j < 20000; j++) {
		ncf_u32x4 r = ncf_rng(7, NCF_RNG_EVAL_NEG, 0, j, 0);
		for (int w = 0; w < 4; w++)
			count[ncf_uniform_below(r.v[w], 10)]++;
	}
	for (int v = 0; v < 10; v++)
		tap_ok(count[v] > 7600 && count[v] < 8400, "value %d drawn %u times", v, count[v]);
}

static void t_crc_check_value(void)
{
	uint32_t c = ncf_crc32c(0, "123456789", 9);
	tap_ok(c == 0xE3069283u, "got %08x", c);
}

/* Extending a CRC piece by piece. */
static void t_crc_pieces(void)
{
	unsigned char buf[1000];
	for (int i = 0; i < 1000; i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	uint32_t whole = ncf_crc32c(0, buf, sizeof buf), part = 0;
	for (size_t o = 0; o < sizeof buf; o += 37)
		part = ncf_crc32c(part, buf + o, sizeof buf - o < 37 ? sizeof buf - o : 37);
	tap_ok(whole == part, "pieces of 37 bytes give the CRC of the whole");
	tap_ok(ncf_crc32c(0, buf, 0) == 0, "no bytes leave the CRC as it is");
}

/* ncf_row_has on the hand-built rows. */
static void t_row_has(void)
{
	int ok = 1;
	for (int u = 0; u < NU; u++)
		for (uint32_t it = 0; it < NI; it++) {
			int want = 0;
			for (int64_t k = offsets[u]; k < offsets[u + 1]; k++)
				want |= items[k] == it;
			ok &= ncf_row_has(items + offsets[u], offsets[u + 1] - offsets[u], it) == want;
		}
	tap_ok(ok, "each user's items found, no other");
}

static void t_row_has_empty(void)
{
	tap_ok(!ncf_row_has(items, 0, 1) && !ncf_row_has(NULL, 0, 0), "nothing found in no row");
}

/* The sample stream with plain negatives, several epochs; plain_hits counts
 * the negatives that hit a training positive, for the next case. */
static int plain_hits;

static void t_stream_plain(void)
{
	int h;
	for (uint32_t epoch = 0; epoch < 5; epoch++)
		for (uint32_t k = 1; k <= 4; k += 3) {
			tap_ok(stream_epoch(1, epoch, k, 0, &h), "seed 1, epoch %u, k %u", epoch, k);
			plain_hits += h;
		}
}

static void t_stream_plain_hits(void)
{
	tap_ok(plain_hits > 0, "%d negatives hit a training positive", plain_hits);
}

static void t_stream_seeds(void)
{
	int h;
	for (uint64_t seed = 2; seed < 6; seed++)
		tap_ok(stream_epoch(seed, 3, 4, 0, &h), "seed %llu, epoch 3, k 4",
		       (unsigned long long)seed);
}

/* Each user here has at least half of the items unrated, so 64 tries fail
 * with probability 2^-64 per negative. */
static void t_true_negatives(void)
{
	int hits = 0, h;
	for (uint64_t seed = 1; seed < 4; seed++)
		for (uint32_t epoch = 0; epoch < 20; epoch++) {
			tap_ok(stream_epoch(seed, epoch, 4, 1, &h), "seed %llu, epoch %u",
			       (unsigned long long)seed, epoch);
			hits += h;
		}
	tap_ok(hits == 0, "%d negatives were training positives", hits);
}

/* 64 tries at 1 in 10: fails with probability 0.9^64 = 0.1%; the counters
 * below are fixed, so the result is too. */
static void t_true_negative_last_item(void)
{
	static const int64_t off2[2] = {0, 9};
	static const uint32_t it2[9] = {0, 1, 2, 3, 4, 5, 6, 8, 9};
	static const uint32_t eu2[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
	uint64_t S = 9 * 5;
	int ok = 1, hits = 0;
	for (uint32_t epoch = 0; epoch < 4; epoch++) {
		ncf_stream st = {.perm = ncf_perm_make(S, 9, epoch), .seed = 9, .epoch = epoch,
				 .items = 10, .positives = 9, .true_neg = 1, .entry_user = eu2,
				 .offsets = off2, .csr_items = it2};
		for (uint64_t t = 0; t < S; t++) {
			uint32_t u, it;
			int label = ncf_sample_at(&st, t, &u, &it);
			if (label == 0) {
				ok &= u == 0;
				hits += it != 7;
			}
		}
	}
	tap_ok(ok, "every negative has user 0");
	tap_ok(hits == 0, "%d negatives are not item 7", hits);
}

/* True negatives give up after NCF_NEG_MAX_TRIES and still return an item
 * in range. */
static void t_true_negative_full_user(void)
{
	static const int64_t off3[2] = {0, 3};
	static const uint32_t it3[3] = {0, 1, 2};
	static const uint32_t eu3[3] = {0, 0, 0};
	ncf_stream st = {.perm = ncf_perm_make(12, 1, 0), .seed = 1, .epoch = 0, .items = 3,
			 .positives = 3, .true_neg = 1, .entry_user = eu3, .offsets = off3,
			 .csr_items = it3};
	int ok = 1;
	for (uint64_t t = 0; t < 12; t++) {
		uint32_t u = 99, it = 99;
		int label = ncf_sample_at(&st, t, &u, &it);
		ok &= (label == 0 || label == 1) && u == 0 && it < 3;
	}
	tap_ok(ok, "12 samples of user 0, labels 0 or 1, items below 3");
}

/* ncf_row_of finds the row of every entry, past empty rows. */
static void t_row_of(void)
{
	static const int64_t off[7] = {0, 0, 2, 2, 2, 5, 6};
	static const uint32_t want[6] = {1, 1, 4, 4, 4, 5};
	int ok = 1;
	for (uint64_t e = 0; e < 6; e++)
		ok &= ncf_row_of(off, 6, e) == want[e];
	tap_ok(ok, "entries 0..5 of rows (0, 2, 0, 0, 3, 1) are in rows 1 1 4 4 4 5");
	tap_ok(ncf_row_of(off, 1, 0) == 0, "one row: row 0");
}

/* Explicit negatives over the hand-built CSR: user 0 two (the same item
 * twice), users 1 and 2 none, user 3 three. */
#define NE 5
static const int64_t neg_off[NU + 1] = {0, 2, 2, 2, 5};
static const uint32_t neg_it[NE] = {7, 7, 3, 0, 9};

/* The sample index s (perm(t)) -> sample of every position t of stream st
 * into u, it, lab (S each). */
static void stream_by_sample(const ncf_stream *st, uint32_t *u, uint32_t *it, int *lab)
{
	for (uint64_t t = 0; t < st->perm.n; t++) {
		uint64_t s = ncf_perm_apply(&st->perm, t);
		lab[s] = ncf_sample_at(st, t, &u[s], &it[s]);
	}
}

/* An epoch with k drawn negatives per positive and the NE explicit ones:
 * S = NP (1 + k) + NE; samples below NP (1 + k) are the stream without
 * explicit negatives (the same (seed, epoch)), sample by sample; the last
 * NE are the explicit negatives in CSR order, each once, label 0. */
static int stream_explicit_epoch(uint64_t seed, uint32_t epoch, uint32_t k)
{
	uint64_t D = ncf_epoch_samples(NP, k, 0), S = ncf_epoch_samples(NP, k, NE);
	ncf_stream plain = {.perm = ncf_perm_make(D, seed, epoch), .seed = seed, .epoch = epoch,
			    .items = NI, .positives = NP, .entry_user = entry_user,
			    .offsets = offsets, .csr_items = items};
	ncf_stream st = plain;
	st.perm = ncf_perm_make(S, seed, epoch);
	st.train_negatives = NE;
	st.users = NU;
	st.neg_offsets = neg_off;
	st.neg_items = neg_it;
	enum { MAX = NP * 5 + NE };
	uint32_t u0[MAX], i0[MAX], u1[MAX], i1[MAX];
	int l0[MAX], l1[MAX], ok = S == D + NE && S <= MAX;
	stream_by_sample(&plain, u0, i0, l0);
	stream_by_sample(&st, u1, i1, l1);
	for (uint64_t s = 0; s < D && ok; s++)
		if (u0[s] != u1[s] || i0[s] != i1[s] || l0[s] != l1[s]) {
			tap_diag("k %u, epoch %u: sample %llu is (%u, %u, %d), without explicit "
				 "negatives (%u, %u, %d)",
				 k, epoch, (unsigned long long)s, u1[s], i1[s], l1[s], u0[s], i0[s],
				 l0[s]);
			ok = 0;
		}
	static const uint32_t want_user[NE] = {0, 0, 3, 3, 3};
	for (uint64_t e = 0; e < NE && ok; e++)
		if (u1[D + e] != want_user[e] || i1[D + e] != neg_it[e] || l1[D + e] != 0) {
			tap_diag("k %u, epoch %u: explicit negative %llu is (%u, %u, %d), want (%u, "
				 "%u, 0)",
				 k, epoch, (unsigned long long)e, u1[D + e], i1[D + e], l1[D + e],
				 want_user[e], neg_it[e]);
			ok = 0;
		}
	return ok;
}

static void t_stream_explicit(void)
{
	tap_ok(ncf_epoch_samples(NP, 4, NE) == NP * 5 + NE && ncf_epoch_samples(NP, 0, NE) ==
									NP + NE &&
		       ncf_epoch_samples(NP, 4, 0) == NP * 5,
	       "S = P (1 + k) + E");
	int ok = 1;
	static const uint32_t ks[3] = {0, 1, 4};
	for (int j = 0; j < 3 && ok; j++)
		for (uint32_t epoch = 0; epoch < 4 && ok; epoch++)
			ok = stream_explicit_epoch(11, epoch, ks[j]);
	tap_ok(ok, "k 0, 1 and 4, 4 epochs each");
}

/* Explicit negatives take positions of their own: the epoch's permutation
 * spreads them (not all at the end), and another epoch moves them. */
static void t_stream_explicit_spread(void)
{
	uint64_t S = ncf_epoch_samples(NP, 0, NE);
	ncf_stream st = {.perm = ncf_perm_make(S, 11, 0), .seed = 11, .epoch = 0, .items = NI,
			 .positives = NP, .entry_user = entry_user, .offsets = offsets,
			 .csr_items = items, .train_negatives = NE, .users = NU,
			 .neg_offsets = neg_off, .neg_items = neg_it};
	uint64_t last = 0, first = S, moved = 0;
	for (uint64_t t = 0; t < S; t++) {
		uint32_t u, it;
		if (ncf_perm_apply(&st.perm, t) >= NP) {
			ncf_sample_at(&st, t, &u, &it);
			first = t < first ? t : first;
			last = t;
		}
	}
	ncf_perm other = ncf_perm_make(S, 11, 1);
	for (uint64_t t = 0; t < S; t++)
		moved += ncf_perm_apply(&other, t) != ncf_perm_apply(&st.perm, t);
	tap_ok(first < S - NE || last < S - 1, "-n 0: the %d explicit negatives of %llu samples lie "
					       "at positions %llu..%llu",
	       NE, (unsigned long long)S, (unsigned long long)first, (unsigned long long)last);
	tap_ok(moved > 0, "epoch 1 moves %llu of them", (unsigned long long)moved);
}

/* The stream of (seed, epoch) over the hand-built CSR. */
static ncf_stream stream_of(uint64_t seed, uint32_t epoch)
{
	return (ncf_stream){.perm = ncf_perm_make((uint64_t)NP * 5, seed, epoch), .seed = seed,
			    .epoch = epoch, .items = NI, .positives = NP, .entry_user = entry_user,
			    .offsets = offsets, .csr_items = items};
}

static void t_stream_pure(void)
{
	ncf_stream a = stream_of(5, 2), b = stream_of(5, 2);
	int ok = 1;
	for (uint64_t t = 0; t < 45; t++) {
		uint32_t u1, i1, u2, i2;
		int l1 = ncf_sample_at(&a, t, &u1, &i1);
		int l2 = ncf_sample_at(&b, t, &u2, &i2);
		ok &= l1 == l2 && u1 == u2 && i1 == i2;
	}
	tap_ok(ok, "two permutations of the same (seed, epoch) give the same 45 samples");
}

static void t_stream_seed_changes(void)
{
	ncf_stream a = stream_of(5, 0), b = stream_of(6, 0);
	int diff = 0;
	for (uint64_t t = 0; t < 45; t++) {
		uint32_t u1, i1, u2, i2;
		ncf_sample_at(&a, t, &u1, &i1);
		ncf_sample_at(&b, t, &u2, &i2);
		diff += u1 != u2 || i1 != i2;
	}
	tap_ok(diff > 10, "%d of 45 positions differ", diff);
}

/* Domains past 2^32 (ml-20m scaled up): a sample of positions maps into
 * range and without collisions. */
static void t_perm_large(void)
{
	uint64_t n = 5000000011ull;
	ncf_perm p5 = ncf_perm_make(n, 1, 0);
	enum { M = 4096 };
	static uint64_t img[M];
	int ok = 1, collisions = 0;
	for (uint64_t j = 0; j < M; j++) {
		uint64_t t = j < M / 2 ? j : n - 1 - (j - M / 2) * 1000003ull;
		img[j] = ncf_perm_apply(&p5, t);
		ok &= img[j] < n;
	}
	tap_ok(ok, "%d positions in range", M);
	for (uint64_t a = 0; a < M && ok; a++)
		for (uint64_t b = a + 1; b < M; b++)
			if (img[a] == img[b]) {
				collisions++;
				break;
			}
	tap_ok(ok && !collisions, "%d positions collide", collisions);
}

int main(void)
{
	TEST(t_philox_zeros(), "philox4x32-10 known answer: zeros");
	TEST(t_philox_ones(), "philox4x32-10 known answer: all ones");
	TEST(t_philox_pi(), "philox4x32-10 known answer: digits of pi");
	TEST(t_rng_layout(), "ncf_rng counter and key layout");
	/* sizes around the powers of 4 the Feistel network works on */
	static const uint64_t sizes[] = {1, 2, 3, 1000, 4097, 100003};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		TEST(t_perm_bijection(sizes[i]),
		     "ncf_perm_apply is a bijection on [0, %llu) (3 seeds x 3 epochs)",
		     (unsigned long long)sizes[i]);
	TEST(t_perm_moves(), "the permutation moves positions and differs by epoch");
	TEST(t_uniform_range(), "ncf_uniform_below stays below n (0 -> 0, 2^32-1 -> n-1)");
	TEST(t_uniform_spread(), "ncf_uniform_below(., 10) over 80000 draws is roughly uniform");
	TEST(t_crc_check_value(), "crc32c(\"123456789\") = e3069283");
	TEST(t_crc_pieces(), "crc32c continues across pieces of any size and alignment");
	TEST(t_row_has(), "ncf_row_has finds exactly each user's items");
	TEST(t_row_has_empty(), "ncf_row_has on an empty row");
	TEST(t_stream_plain(), "sample stream: every positive exactly once per epoch, k negatives "
			       "per positive with the positive's user (k 1 and 4, 5 epochs)");
	TEST(t_stream_plain_hits(), "plain negatives may hit a training positive");
	TEST(t_stream_seeds(), "sample stream holds for other seeds");
	TEST(t_true_negatives(), "--true-negatives: no negative is a training positive of its user");
	TEST(t_true_negative_last_item(),
	     "--true-negatives finds the one unrated item of a near-complete user");
	TEST(t_true_negative_full_user(),
	     "--true-negatives terminates for a user who rated every item");
	TEST(t_stream_pure(), "the sample at a position depends only on (seed, epoch, position)");
	TEST(t_stream_seed_changes(), "another seed gives another stream");
	TEST(t_perm_large(), "ncf_perm_apply on a domain of 5e9: in range, no collisions");
	TEST(t_row_of(), "ncf_row_of: the row of a CSR entry");
	TEST(t_stream_explicit(),
	     "explicit negatives: the last E samples of the epoch, each once with its user and "
	     "label 0; the others as without them");
	TEST(t_stream_explicit_spread(), "explicit negatives are shuffled in with the rest");
	return tap_done();
}
