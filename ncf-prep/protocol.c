/*
 * protocol.c - from rows to a cache: NVIDIA's leave-one-out protocol made
 * deterministic (DESIGN.md section 1, steps 1-5).
 *
 * Documented behaviours (ncf-prep(1), ncf-cache(5)):
 *  - each user's history is ordered by (timestamp, file row): ties in
 *    timestamps go by file order; a user whose test item was picked among
 *    equal latest timestamps is counted in test_ties;
 *  - a repeated (user, item) keeps its earliest row, the rest are counted
 *    in duplicates_dropped;
 *  - --min-ratings N counts distinct items per user and drops users under
 *    N (users_dropped, ratings_dropped); indices are then given in order of
 *    first appearance among the rows kept, so items rated only by dropped
 *    users vanish (items_dropped) and no index is empty;
 *  - a user with a single interaction keeps it as the test positive and
 *    has no training positives (test_only_users); such users are evaluated
 *    like the others;
 *  - evaluation negatives are drawn uniformly from [0, I) with
 *    replacement, redrawn while they hit a training positive of the user,
 *    for at most NCF_EVAL_MAX_TRIES draws (a user who rated nearly every
 *    item keeps the last draw).
 * Nothing here depends on the number of threads: users are independent and
 * every random number is addressed by (seed, user, k, attempt).
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ncf_hd.h"
#include "protocol.h"
#include "spill.h"

#define NCF_EVAL_MAX_TRIES 1000

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* The rows regrouped by user while the protocol runs: user u's rows are
 * order[start[u] .. start[u + 1]), the first kept[u] of them its distinct
 * interactions in time order after step 2.  U0, I0: the users and items
 * of the rows; user_new, item_new: their final indices (UINT32_MAX:
 * dropped). */
struct grouping {
	uint32_t U0, I0;
	uint32_t *start;    /* (U0 + 1) */
	uint32_t *order;    /* (n) row numbers */
	uint32_t *kept;	    /* (U0) */
	uint32_t *user_new; /* (U0) */
	uint32_t *item_new; /* (I0) */
};

static void grouping_free(struct grouping *g)
{
	free(g->start);
	free(g->order);
	free(g->kept);
	free(g->user_new);
	free(g->item_new);
}

/* 1. Group rows by user, each user's rows in order of (timestamp, row). */
static void group_by_user(const struct prep_rows *r, struct grouping *g)
{
	g->start = ncf_xmalloc(((size_t)g->U0 + 1) * sizeof *g->start);
	g->order = ncf_xmalloc((r->n ? r->n : 1) * sizeof *g->order);
	prep_rows_order(r, 0, g->U0, g->start, g->order);
}

/* 2. Per user: drop repeated items (keep the earliest), count what is
 * left.  Returns the duplicates dropped. */
static uint64_t dedup(const struct prep_rows *r, struct grouping *g)
{
	const uint32_t U0 = g->U0, I0 = g->I0;
	uint32_t *start = g->start, *order = g->order;
	uint32_t *kept = g->kept = ncf_xmalloc((size_t)U0 * sizeof *g->kept);
	uint64_t dups = 0;
#pragma omp parallel reduction(+ : dups)
	{
		uint32_t *stamp = ncf_xcalloc(I0, sizeof *stamp);
#pragma omp for schedule(dynamic, 256)
		for (int64_t u = 0; u < (int64_t)U0; u++) {
			uint32_t *row = order + start[u];
			size_t len = start[u + 1] - start[u];
			uint32_t tag = (uint32_t)u + 1, w = 0;
			for (size_t k = 0; k < len; k++) {
				uint32_t it = r->item[row[k]];
				if (stamp[it] == tag)
					continue;
				stamp[it] = tag;
				row[w++] = row[k];
			}
			kept[u] = w;
			dups += len - w;
		}
		free(stamp);
	}
	return dups;
}

/* 3. --min-ratings: the users with at least min distinct items, in
 * index order, into user_new (UINT32_MAX: dropped); *ratings_dropped
 * gets their items.  Returns the users kept, or 0 after reporting that
 * none is. */
static uint32_t keep_users(const uint32_t *kept, uint32_t U0, uint32_t min, uint32_t *user_new,
			   uint64_t *ratings_dropped)
{
	uint32_t U = 0;
	*ratings_dropped = 0;
	for (uint32_t u = 0; u < U0; u++) {
		if (kept[u] >= min) {
			user_new[u] = U++;
		} else {
			user_new[u] = UINT32_MAX;
			*ratings_dropped += kept[u]; /* duplicates are counted once, above */
		}
	}
	if (U == 0)
		ncf_error("no user has %u or more ratings (--min-ratings)", min);
	return U;
}

/* The sizes, --min-ratings counters and id maps of c, from the final
 * indices of g's users and items (U, I of them) and the rows' maps. */
static void set_ids(const struct grouping *g, uint32_t U, uint32_t I, uint64_t ratings_dropped,
		    const struct prep_rows *r, const struct prep_protocol_opts *o, struct ncf_cache *c)
{
	c->users = U;
	c->items = I;
	c->users_dropped = g->U0 - U;
	c->ratings_dropped = ratings_dropped;
	c->items_dropped = g->I0 - I;
	c->min_ratings = o->min_ratings;
	c->user_ids = ncf_xmalloc((size_t)U * sizeof *c->user_ids);
	c->item_ids = ncf_xmalloc((size_t)I * sizeof *c->item_ids);
	for (uint32_t u = 0; u < g->U0; u++)
		if (g->user_new[u] != UINT32_MAX)
			c->user_ids[g->user_new[u]] = r->user_ids[u];
	for (uint32_t i = 0; i < g->I0; i++)
		if (g->item_new[i] != UINT32_MAX)
			c->item_ids[g->item_new[i]] = r->item_ids[i];
}

/* Items keep their indices (no user was dropped). */
static uint32_t same_items(uint32_t *item_new, uint32_t I0)
{
	for (uint32_t i = 0; i < I0; i++)
		item_new[i] = i;
	return I0;
}

/* 3. --min-ratings, then final indices by first appearance among the
 * rows kept; sizes, counters and id maps into c.  Returns 0, or -1 when
 * no user is left (reported). */
static int reindex(const struct prep_rows *r, const struct prep_protocol_opts *o,
		   struct grouping *g, struct ncf_cache *c)
{
	const uint32_t U0 = g->U0, I0 = g->I0;
	uint32_t *user_new = g->user_new = ncf_xmalloc((size_t)U0 * sizeof *g->user_new);
	uint64_t ratings_dropped;
	uint32_t U = keep_users(g->kept, U0, o->min_ratings, user_new, &ratings_dropped);
	if (U == 0)
		return -1;
	uint32_t *item_new = g->item_new = ncf_xmalloc((size_t)I0 * sizeof *g->item_new);
	uint32_t I = 0;
	if (U == U0) {
		I = same_items(item_new, I0);
	} else {
		for (uint32_t i = 0; i < I0; i++)
			item_new[i] = UINT32_MAX;
		for (size_t k = 0; k < r->n; k++)
			if (user_new[r->user[k]] != UINT32_MAX && item_new[r->item[k]] == UINT32_MAX)
				item_new[r->item[k]] = I++;
	}
	set_ids(g, U, I, ratings_dropped, r, o, c);
	return 0;
}

/* 4. One user's leave-one-out, from its len >= 1 distinct items in time
 * order, item[row[k]] for k < len: the last is the test positive
 * (returned, as a final index), the others go to dst (len - 1) as final
 * indices in ascending order. */
static uint32_t split_user(const uint32_t *item, const uint32_t *row, uint32_t len,
			   const uint32_t *item_new, uint32_t *dst)
{
	for (uint32_t k = 0; k + 1 < len; k++)
		dst[k] = item_new[item[row[k]]];
	qsort(dst, len - 1, sizeof *dst, cmp_u32);
	return item_new[item[row[len - 1]]];
}

/* 4. Leave-one-out: the last interaction is the test positive, the rest
 * become the training CSR, sorted by item. */
static void leave_one_out(const struct prep_rows *r, const struct grouping *g, struct ncf_cache *c)
{
	const uint32_t U0 = g->U0, U = c->users;
	const uint32_t *start = g->start, *order = g->order, *kept = g->kept;
	const uint32_t *user_new = g->user_new, *item_new = g->item_new;
	c->offsets = ncf_xmalloc(((size_t)U + 1) * sizeof *c->offsets);
	c->test_items = ncf_xmalloc((size_t)U * sizeof *c->test_items);
	c->offsets[0] = 0;
	uint64_t test_only = 0;
	for (uint32_t u = 0; u < U0; u++) {
		uint32_t nu = user_new[u];
		if (nu == UINT32_MAX)
			continue;
		c->offsets[nu + 1] = c->offsets[nu] + (int64_t)kept[u] - 1;
		test_only += kept[u] == 1;
	}
	c->train_positives = c->offsets[U];
	c->test_only_users = test_only;
	c->train_items = ncf_xmalloc((size_t)(c->train_positives ? c->train_positives : 1) *
				     sizeof *c->train_items);
	uint64_t ties = 0;
#pragma omp parallel for schedule(dynamic, 256) reduction(+ : ties)
	for (int64_t u = 0; u < (int64_t)U0; u++) {
		uint32_t nu = user_new[u];
		if (nu == UINT32_MAX)
			continue;
		const uint32_t *row = order + start[u];
		uint32_t len = kept[u];
		if (len >= 2 && r->ts[row[len - 1]] == r->ts[row[len - 2]])
			ties++;
		c->test_items[nu] =
			split_user(r->item, row, len, item_new, c->train_items + c->offsets[nu]);
	}
	c->test_ties = ties;
}

int prep_protocol_check_size(uint64_t users, uint32_t N)
{
	if (users * N <= NCF_CACHE_MAX_SCORES)
		return 0;
	ncf_error("%llu users x %u evaluation negatives is %llu, more than the 2^36 (%llu) a cache "
		  "may hold for its readers; the largest --eval-negatives that fits is %llu",
		  (unsigned long long)users, N, (unsigned long long)(users * N),
		  (unsigned long long)NCF_CACHE_MAX_SCORES,
		  (unsigned long long)(NCF_CACHE_MAX_SCORES / users));
	return -1;
}

int prep_protocol_run(struct prep_rows *r, const struct prep_protocol_opts *o, struct ncf_cache *c)
{
	NCF_TRY(prep_rows_check_count(r->n));
	struct grouping g = {.U0 = r->n_users, .I0 = r->n_items};
	group_by_user(r, &g);
	c->duplicates_dropped = dedup(r, &g);
	int rc = reindex(r, o, &g, c);
	if (rc == 0)
		rc = prep_protocol_check_size(c->users, o->eval_negatives);
	if (rc == 0)
		leave_one_out(r, &g, c);
	grouping_free(&g);
	if (rc != 0)
		return -1;
	/* 5. Evaluation negatives. */
	prep_protocol_draw_negatives(c, o->eval_negatives, o->seed);
	return 0;
}

/* 5. The N evaluation negatives of user u (a final index) into out,
 * given its training items row (len, ascending) among I items. */
static void user_negatives(const uint32_t *row, int64_t len, uint64_t u, uint32_t N, uint32_t I,
			   uint64_t seed, uint32_t *out)
{
	for (uint32_t k = 0; k < N; k++) {
		uint64_t idx = u * N + k;
		uint32_t it = 0;
		for (uint32_t a = 0; a < NCF_EVAL_MAX_TRIES; a++) {
			ncf_u32x4 x = ncf_rng(seed, NCF_RNG_EVAL_NEG, a, idx, 0);
			it = ncf_uniform_below(x.v[0], I);
			if (!ncf_row_has(row, len, it))
				break;
		}
		out[k] = it;
	}
}

void prep_protocol_draw_negatives(struct ncf_cache *c, uint32_t N, uint64_t seed)
{
	c->eval_negatives = N;
	c->seed = seed;
	c->eval_neg = ncf_xmalloc((size_t)c->users * N * sizeof *c->eval_neg + 4);
#pragma omp parallel for schedule(dynamic, 256)
	for (int64_t u = 0; u < (int64_t)c->users; u++)
		user_negatives(c->train_items + c->offsets[u], c->offsets[u + 1] - c->offsets[u],
			       (uint64_t)u, N, c->items, seed, c->eval_neg + (size_t)u * N);
}

/* ---- the same over spilled rows ----------------------------------------- */

/* The merged records one user at a time, repeats dropped as dedup does
 * (the earliest in (timestamp, row) order kept), each kept item with the
 * first row it has among all of the user's rows (for --min-ratings'
 * first appearances). */
struct user_reader {
	struct prep_merge *m;
	struct prep_spill_rec next; /* the first record of the next user */
	int have;		   /* next is set */
	uint32_t *stamp, *slot;	   /* (I0) stamp[i] == u + 1: item i is the user's, at slot[i] */
	uint32_t expect;	   /* the next user's index */
	/* the current user */
	uint32_t u, len;
	uint64_t rows;		   /* its rows, repeats included */
	uint32_t *item, *first_row;/* (len) its distinct items in time order */
	int64_t *ts;
	size_t cap;
};

static int reader_open(struct user_reader *ur, struct prep_spill *sp, uint32_t I0)
{
	memset(ur, 0, sizeof *ur);
	ur->m = prep_merge_open(sp);
	if (!ur->m)
		return -1;
	ur->stamp = ncf_xcalloc((size_t)I0 + 1, sizeof *ur->stamp);
	ur->slot = ncf_xmalloc(((size_t)I0 + 1) * sizeof *ur->slot);
	return 0;
}

static void reader_close(struct user_reader *ur)
{
	prep_merge_close(ur->m);
	free(ur->stamp);
	free(ur->slot);
	free(ur->item);
	free(ur->first_row);
	free(ur->ts);
	memset(ur, 0, sizeof *ur);
}

/* The next user into ur: 1, or 0 after the last, -1 on an error
 * (reported). */
static int reader_next(struct user_reader *ur)
{
	if (!ur->have) {
		int rc = prep_merge_next(ur->m, &ur->next);
		if (rc <= 0)
			return rc;
		ur->have = 1;
	}
	if (ur->next.user != ur->expect) { /* users come in index order, none missing */
		ncf_error("spilled rows out of order (user %u where %u was due)", ur->next.user,
			  ur->expect);
		return -1;
	}
	ur->u = ur->expect++;
	ur->len = 0;
	ur->rows = 0;
	uint32_t tag = ur->u + 1;
	do {
		const struct prep_spill_rec *rec = &ur->next;
		ur->rows++;
		if (ur->stamp[rec->item] == tag) {
			uint32_t k = ur->slot[rec->item];
			if (rec->row < ur->first_row[k])
				ur->first_row[k] = rec->row;
		} else {
			if (ur->len == ur->cap) {
				ur->cap = ur->cap ? 2 * ur->cap : 1024;
				ur->item = ncf_xrealloc(ur->item, ur->cap * sizeof *ur->item);
				ur->first_row = ncf_xrealloc(ur->first_row, ur->cap * sizeof *ur->first_row);
				ur->ts = ncf_xrealloc(ur->ts, ur->cap * sizeof *ur->ts);
			}
			ur->stamp[rec->item] = tag;
			ur->slot[rec->item] = ur->len;
			ur->item[ur->len] = rec->item;
			ur->first_row[ur->len] = rec->row;
			ur->ts[ur->len++] = rec->ts;
		}
		int rc = prep_merge_next(ur->m, &ur->next);
		if (rc < 0)
			return -1;
		ur->have = rc;
	} while (ur->have && ur->next.user == ur->u);
	return 1;
}

/* Pass 1, with --min-ratings: each user's distinct items (g->kept), and
 * each item's first row among the users kept, which orders the items
 * then (UINT32_MAX: none).  Returns 0 or -1. */
static int count_users(struct prep_spill *sp, const struct prep_protocol_opts *o, struct grouping *g,
		       uint32_t *first_row)
{
	struct user_reader ur;
	NCF_TRY(reader_open(&ur, sp, g->I0));
	int rc;
	while ((rc = reader_next(&ur)) > 0) {
		g->kept[ur.u] = ur.len;
		if (ur.len >= o->min_ratings)
			for (uint32_t k = 0; k < ur.len; k++)
				if (ur.first_row[k] < first_row[ur.item[k]])
					first_row[ur.item[k]] = ur.first_row[k];
	}
	reader_close(&ur);
	return rc;
}

struct by_row {
	uint32_t row, item;
};

static int cmp_by_row(const void *a, const void *b)
{
	uint32_t x = ((const struct by_row *)a)->row, y = ((const struct by_row *)b)->row;
	return (x > y) - (x < y);
}

/* Final item indices in order of first appearance among the rows kept
 * (first_row from count_users).  Returns the items kept. */
static uint32_t items_by_first_row(const uint32_t *first_row, uint32_t I0, uint32_t *item_new)
{
	struct by_row *v = ncf_xmalloc(((size_t)I0 + 1) * sizeof *v);
	uint32_t n = 0;
	for (uint32_t i = 0; i < I0; i++) {
		item_new[i] = UINT32_MAX;
		if (first_row[i] != UINT32_MAX)
			v[n++] = (struct by_row){first_row[i], i};
	}
	qsort(v, n, sizeof *v, cmp_by_row);
	for (uint32_t k = 0; k < n; k++)
		item_new[v[k].item] = k;
	free(v);
	return n;
}

/* Users of pass 2 gathered to be split and given negatives in parallel:
 * the items of user j (final index first + j) are item[at[j] .. at[j + 1]),
 * in time order; its training items go to train[at[j] - j ..], its
 * negatives to neg[j N ..]. */
struct batch {
	uint32_t first, n, cap_users;
	uint32_t *at, *item, *train, *test, *neg;
	size_t items, cap_items;
};

/* Split, draw and write out the batch, then empty it.  Returns 0 or -1. */
static int flush_batch(struct batch *b, const uint32_t *iota, const uint32_t *item_new,
		       const struct prep_protocol_opts *o, struct ncf_cache *c,
		       struct prep_planes *train, struct prep_planes *neg,
		       const struct prep_protocol_hook *hook)
{
	uint32_t N = o->eval_negatives;
#pragma omp parallel for schedule(dynamic, 64)
	for (int64_t j = 0; j < (int64_t)b->n; j++) {
		uint32_t len = b->at[j + 1] - b->at[j];
		uint32_t *dst = b->train + b->at[j] - j;
		b->test[j] = split_user(b->item + b->at[j], iota, len, item_new, dst);
		user_negatives(dst, len - 1, (uint64_t)b->first + j, N, c->items, o->seed,
			       b->neg + (size_t)j * N);
	}
	for (uint32_t j = 0; j < b->n; j++) {
		uint32_t nu = b->first + j;
		c->test_items[nu] = b->test[j];
		c->offsets[nu + 1] = c->offsets[nu] + (b->at[j + 1] - b->at[j]) - 1;
	}
	NCF_TRY(prep_planes_put(train, b->train, b->items - b->n));
	NCF_TRY(prep_planes_put(neg, b->neg, (size_t)b->n * N));
	if (hook && hook->batch)
		hook->batch(hook->ctx, c, b->first, b->n, b->test, b->neg);
	b->first += b->n;
	b->n = 0;
	b->items = 0;
	return 0;
}

/* Add the reader's user to the batch (room made by the caller). */
static void add_user(struct batch *b, const struct user_reader *ur)
{
	if (ur->len > b->cap_items - b->items) {
		b->cap_items = b->items + ur->len;
		b->item = ncf_xrealloc(b->item, b->cap_items * sizeof *b->item);
		b->train = ncf_xrealloc(b->train, b->cap_items * sizeof *b->train);
	}
	memcpy(b->item + b->items, ur->item, ur->len * sizeof *b->item);
	b->items += ur->len;
	b->at[++b->n] = (uint32_t)b->items;
}

/* Pass 2: every user kept split and given negatives, in batches that
 * take a share of the budget; counts into c.  Returns 0 or -1. */
static int split_users(struct prep_spill *sp, const struct prep_protocol_opts *o,
		       const struct grouping *g, struct ncf_cache *c, struct prep_planes *train,
		       struct prep_planes *neg, const struct prep_protocol_hook *hook)
{
	uint32_t N = o->eval_negatives;
	/* half the budget: 8 bytes an item (its index and its training copy)
	 * and 4 (N + 2) a user */
	uint64_t share = prep_spill_budget(sp) / 2;
	struct batch b = {0};
	b.cap_items = share / 16 < 65536 ? 65536 : (size_t)(share / 16);
	uint64_t users = share / 2 / (4 * ((uint64_t)N + 3));
	b.cap_users = users < 64 ? 64 : users > (1u << 20) ? (1u << 20) : (uint32_t)users;
	b.at = ncf_xmalloc(((size_t)b.cap_users + 1) * sizeof *b.at);
	b.item = ncf_xmalloc(b.cap_items * sizeof *b.item);
	b.train = ncf_xmalloc(b.cap_items * sizeof *b.train);
	b.test = ncf_xmalloc((size_t)b.cap_users * sizeof *b.test);
	b.neg = ncf_xmalloc((size_t)b.cap_users * N * sizeof *b.neg + 4);
	b.at[0] = 0;
	uint32_t *iota = ncf_xmalloc(((size_t)g->I0 + 1) * sizeof *iota);
	for (uint32_t i = 0; i <= g->I0; i++)
		iota[i] = i;
	c->offsets[0] = 0;
	uint64_t dups = 0, test_only = 0, ties = 0;
	struct user_reader ur;
	int rc = reader_open(&ur, sp, g->I0);
	while (rc == 0) {
		int got = reader_next(&ur);
		if (got <= 0) {
			rc = got;
			break;
		}
		dups += ur.rows - ur.len;
		if (g->user_new[ur.u] == UINT32_MAX)
			continue;
		test_only += ur.len == 1;
		ties += ur.len >= 2 && ur.ts[ur.len - 1] == ur.ts[ur.len - 2];
		if (b.n && (b.n == b.cap_users || ur.len > b.cap_items - b.items))
			rc = flush_batch(&b, iota, g->item_new, o, c, train, neg, hook);
		add_user(&b, &ur);
	}
	if (rc == 0 && b.n)
		rc = flush_batch(&b, iota, g->item_new, o, c, train, neg, hook);
	reader_close(&ur);
	free(iota);
	free(b.at), free(b.item), free(b.train), free(b.test), free(b.neg);
	c->duplicates_dropped = dups;
	c->test_only_users = test_only;
	c->test_ties = ties;
	c->train_positives = c->offsets[c->users];
	return rc;
}

int prep_protocol_run_spilled(struct prep_spill *sp, const struct prep_rows *ids,
			     const struct prep_protocol_opts *o, struct ncf_cache *c,
			     struct prep_planes *train, struct prep_planes *neg,
			     const struct prep_protocol_hook *hook)
{
	struct grouping g = {.U0 = ids->n_users, .I0 = ids->n_items};
	g.user_new = ncf_xmalloc(((size_t)g.U0 + 1) * sizeof *g.user_new);
	g.item_new = ncf_xmalloc(((size_t)g.I0 + 1) * sizeof *g.item_new);
	uint32_t U = g.U0, I = g.I0;
	uint64_t ratings_dropped = 0;
	int rc = 0;
	if (o->min_ratings) {
		g.kept = ncf_xcalloc((size_t)g.U0 + 1, sizeof *g.kept);
		uint32_t *first_row = ncf_xmalloc(((size_t)g.I0 + 1) * sizeof *first_row);
		memset(first_row, 0xff, ((size_t)g.I0 + 1) * sizeof *first_row);
		rc = count_users(sp, o, &g, first_row);
		if (rc == 0 && (U = keep_users(g.kept, g.U0, o->min_ratings, g.user_new,
					       &ratings_dropped)) == 0)
			rc = -1;
		if (rc == 0)
			I = U == g.U0 ? same_items(g.item_new, g.I0)
				      : items_by_first_row(first_row, g.I0, g.item_new);
		free(first_row);
	} else {
		for (uint32_t u = 0; u < g.U0; u++)
			g.user_new[u] = u;
		same_items(g.item_new, g.I0);
	}
	if (rc == 0)
		rc = prep_protocol_check_size(U, o->eval_negatives);
	if (rc == 0) {
		set_ids(&g, U, I, ratings_dropped, ids, o, c);
		c->offsets = ncf_xmalloc(((size_t)U + 1) * sizeof *c->offsets);
		c->test_items = ncf_xmalloc(((size_t)U + 1) * sizeof *c->test_items);
		c->eval_negatives = o->eval_negatives;
		c->seed = o->seed;
		rc = split_users(sp, o, &g, c, train, neg, hook);
	}
	grouping_free(&g);
	return rc;
}
