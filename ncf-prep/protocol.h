/*
 * protocol.h - the protocol (protocol.c says its rules once, per user):
 * leave one out over rows in memory or over rows that spilled to sorted
 * runs, or a split given with the data.
 */
#ifndef NCF_PROTOCOL_H
#define NCF_PROTOCOL_H

#include "cache.h"
#include "rows.h"

struct prep_protocol_opts {
	uint32_t min_ratings;	 /* 0: keep every user */
	uint32_t eval_negatives; /* per user, NVIDIA: 100 */
	uint64_t seed;		 /* of the evaluation negatives */
	const uint32_t *given;	 /* a given split's test positives (prep_protocol_run_given's) */
};

/*
 * Turn indexed rows (prep_rows_index done) into the arrays and counts of c:
 * sizes, id maps, CSR, test items, evaluation negatives and the protocol
 * counters.  Source fields (format, bytes, crc) are the caller's.
 * Returns 0, or -1 after reporting (nothing left after --min-ratings, or
 * too many users for N: prep_protocol_check_size).
 */
int prep_protocol_run(struct prep_rows *r, const struct prep_protocol_opts *o, struct ncf_cache *c);

/*
 * A split given with the data (given.h: its training rows read, every
 * user's series given) to the cache's arrays and counts: the training
 * positives fed to each user as any user's rows (repeats dropped and
 * counted), its test positive the one given, its evaluation negatives the
 * candidates given, its explicit negatives in the order given; users and
 * items in g's order of first appearance, none dropped; split_given 1.
 * g's maps, rows and candidates are taken.  Returns 0 or -1 (reported).
 */
struct prep_given;
int prep_protocol_run_given(struct prep_given *g, struct ncf_cache *c);

/* Do U users with N evaluation negatives each fit in a cache (at most
 * NCF_CACHE_MAX_SCORES, cache.h)?  0, or -1 after reporting the limit and
 * the largest --eval-negatives that fits.  The protocol asks once U is
 * settled, before it allocates anything of that size. */
int prep_protocol_check_size(uint64_t users, uint32_t N);

/* What the spilled protocol shows of each batch of users it finishes
 * (ncf-prep's synthetic oracle): users first .. first + n of c (final
 * indices; c's sizes and ids are set), their test items (n) and
 * negatives (n, N). */
struct prep_protocol_hook {
	void (*batch)(void *ctx, const struct ncf_cache *c, uint32_t first, uint32_t n,
		      const uint32_t *test, const uint32_t *neg);
	void *ctx;
};

/*
 * prep_protocol_run on rows that spilled (spill.h; prep_spill_finish done,
 * ids holding the id maps): the same cache, byte for byte, from the runs
 * read back in (user, timestamp, row) order one user at a time, twice
 * with --min-ratings (its counts first).  c gets everything but the two
 * arrays that grow with the ratings: the training items go to train
 * (planes with delta) and the negatives to neg, in c's order, and
 * c->train_items and c->eval_neg stay NULL.  hook may be NULL.  Returns 0
 * or -1 (reported).
 */
struct prep_spill;
struct prep_planes;
int prep_protocol_run_spilled(struct prep_spill *sp, const struct prep_rows *ids,
			     const struct prep_protocol_opts *o, struct ncf_cache *c,
			     struct prep_planes *train, struct prep_planes *neg,
			     const struct prep_protocol_hook *hook);

#endif
