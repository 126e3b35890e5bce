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

#define NCF_EVAL_MAX_TRIES 1000

/* Stable sort of idx[0..n) by ts[idx[]] (the indices come in file order,
 * so equal timestamps stay in file order).  tmp has room for n. */
static void sort_by_ts(uint32_t *idx, uint32_t *tmp, size_t n, const int64_t *ts)
{
	size_t k = 1;
	while (k < n && ts[idx[k - 1]] <= ts[idx[k]])
		k++;
	if (k >= n)
		return; /* already in order, the common case */
	if (n <= 16) {
		for (size_t i = 1; i < n; i++) {
			uint32_t v = idx[i];
			size_t j = i;
			while (j > 0 && ts[idx[j - 1]] > ts[v]) {
				idx[j] = idx[j - 1];
				j--;
			}
			idx[j] = v;
		}
		return;
	}
	size_t half = n / 2;
	sort_by_ts(idx, tmp, half, ts);
	sort_by_ts(idx + half, tmp, n - half, ts);
	if (ts[idx[half - 1]] <= ts[idx[half]])
		return;
	memcpy(tmp, idx, half * sizeof *idx);
	size_t a = 0, b = half, o = 0;
	while (a < half && b < n)
		idx[o++] = ts[idx[b]] < ts[tmp[a]] ? idx[b++] : tmp[a++];
	while (a < half)
		idx[o++] = tmp[a++];
}

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

/* 1. Group rows by user (counting sort, stable: file order within). */
static void group_by_user(const struct prep_rows *r, struct grouping *g)
{
	size_t n = r->n;
	uint32_t U0 = g->U0;
	g->start = ncf_xcalloc((size_t)U0 + 1, sizeof *g->start);
	for (size_t k = 0; k < n; k++)
		g->start[r->user[k] + 1]++;
	for (uint32_t u = 0; u < U0; u++)
		g->start[u + 1] += g->start[u];
	g->order = ncf_xmalloc(n * sizeof *g->order);
	uint32_t *fill = ncf_xmalloc((size_t)U0 * sizeof *fill);
	memcpy(fill, g->start, (size_t)U0 * sizeof *fill);
	for (size_t k = 0; k < n; k++)
		g->order[fill[r->user[k]]++] = (uint32_t)k;
	free(fill);
}

/* 2. Per user: order by (timestamp, row), drop repeated items (keep the
 * earliest), count what is left.  Returns the duplicates dropped. */
static uint64_t order_and_dedup(const struct prep_rows *r, struct grouping *g)
{
	const uint32_t U0 = g->U0, I0 = g->I0;
	uint32_t *start = g->start, *order = g->order;
	uint32_t *kept = g->kept = ncf_xmalloc((size_t)U0 * sizeof *g->kept);
	uint64_t dups = 0;
#pragma omp parallel reduction(+ : dups)
	{
		uint32_t *stamp = ncf_xcalloc(I0, sizeof *stamp);
		size_t tmp_cap = 1024;
		uint32_t *tmp = ncf_xmalloc(tmp_cap * sizeof *tmp);
#pragma omp for schedule(dynamic, 256)
		for (int64_t u = 0; u < (int64_t)U0; u++) {
			uint32_t *row = order + start[u];
			size_t len = start[u + 1] - start[u];
			if (len > tmp_cap) {
				tmp_cap = len;
				tmp = ncf_xrealloc(tmp, tmp_cap * sizeof *tmp);
			}
			sort_by_ts(row, tmp, len, r->ts);
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
		free(tmp);
	}
	return dups;
}

/* 3. --min-ratings, then final indices by first appearance among the
 * rows kept; sizes, counters and id maps into c.  Returns 0, or -1 when
 * no user is left (reported). */
static int reindex(const struct prep_rows *r, const struct prep_protocol_opts *o,
		   struct grouping *g, struct ncf_cache *c)
{
	const uint32_t U0 = g->U0, I0 = g->I0;
	uint32_t *user_new = g->user_new = ncf_xmalloc((size_t)U0 * sizeof *g->user_new);
	uint32_t U = 0;
	uint64_t ratings_dropped = 0;
	for (uint32_t u = 0; u < U0; u++) {
		if (g->kept[u] >= o->min_ratings) {
			user_new[u] = U++;
		} else {
			user_new[u] = UINT32_MAX;
			ratings_dropped += g->kept[u]; /* duplicates are counted once, above */
		}
	}
	if (U == 0) {
		ncf_error("no user has %u or more ratings (--min-ratings)", o->min_ratings);
		return -1;
	}
	uint32_t *item_new = g->item_new = ncf_xmalloc((size_t)I0 * sizeof *g->item_new);
	uint32_t I = 0;
	if (U == U0) {
		for (uint32_t i = 0; i < I0; i++)
			item_new[i] = i;
		I = I0;
	} else {
		for (uint32_t i = 0; i < I0; i++)
			item_new[i] = UINT32_MAX;
		for (size_t k = 0; k < r->n; k++)
			if (user_new[r->user[k]] != UINT32_MAX && item_new[r->item[k]] == UINT32_MAX)
				item_new[r->item[k]] = I++;
	}
	c->users = U;
	c->items = I;
	c->users_dropped = U0 - U;
	c->ratings_dropped = ratings_dropped;
	c->items_dropped = I0 - I;
	c->min_ratings = o->min_ratings;
	c->user_ids = ncf_xmalloc((size_t)U * sizeof *c->user_ids);
	c->item_ids = ncf_xmalloc((size_t)I * sizeof *c->item_ids);
	for (uint32_t u = 0; u < U0; u++)
		if (user_new[u] != UINT32_MAX)
			c->user_ids[user_new[u]] = r->user_ids[u];
	for (uint32_t i = 0; i < I0; i++)
		if (item_new[i] != UINT32_MAX)
			c->item_ids[item_new[i]] = r->item_ids[i];
	return 0;
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
		c->test_items[nu] = item_new[r->item[row[len - 1]]];
		if (len >= 2 && r->ts[row[len - 1]] == r->ts[row[len - 2]])
			ties++;
		uint32_t *dst = c->train_items + c->offsets[nu];
		for (uint32_t k = 0; k + 1 < len; k++)
			dst[k] = item_new[r->item[row[k]]];
		qsort(dst, len - 1, sizeof *dst, cmp_u32);
	}
	c->test_ties = ties;
}

int prep_protocol_run(struct prep_rows *r, const struct prep_protocol_opts *o, struct ncf_cache *c)
{
	if (r->n >= UINT32_MAX) {
		ncf_error("%zu ratings: at most %u are supported", r->n, UINT32_MAX - 1);
		return -1;
	}
	struct grouping g = {.U0 = r->n_users, .I0 = r->n_items};
	group_by_user(r, &g);
	c->duplicates_dropped = order_and_dedup(r, &g);
	int rc = reindex(r, o, &g, c);
	if (rc == 0)
		leave_one_out(r, &g, c);
	grouping_free(&g);
	if (rc != 0)
		return -1;
	/* 5. Evaluation negatives. */
	prep_protocol_draw_negatives(c, o->eval_negatives, o->seed);
	return 0;
}

void prep_protocol_draw_negatives(struct ncf_cache *c, uint32_t N, uint64_t seed)
{
	c->eval_negatives = N;
	c->seed = seed;
	c->eval_neg = ncf_xmalloc((size_t)c->users * N * sizeof *c->eval_neg + 4);
#pragma omp parallel for schedule(dynamic, 256)
	for (int64_t u = 0; u < (int64_t)c->users; u++) {
		const uint32_t *row = c->train_items + c->offsets[u];
		int64_t len = c->offsets[u + 1] - c->offsets[u];
		for (uint32_t k = 0; k < N; k++) {
			uint64_t idx = (uint64_t)u * N + k;
			uint32_t it = 0;
			for (uint32_t a = 0; a < NCF_EVAL_MAX_TRIES; a++) {
				ncf_u32x4 x = ncf_rng(seed, NCF_RNG_EVAL_NEG, a, idx, 0);
				it = ncf_uniform_below(x.v[0], c->items);
				if (!ncf_row_has(row, len, it))
					break;
			}
			c->eval_neg[idx] = it;
		}
	}
}
