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
 *
 * Each rule is said once, for one user: feed_add (repeats), user_kept
 * (--min-ratings), index_items (the order of the items kept),
 * leave_one_out (the test positive, ties) or given_split (a test
 * positive given with the data), write_split (the training items,
 * test-only users) and user_negatives (the evaluation negatives);
 * protocol_user applies steps 2-4 to a user.  The rows reach them three
 * ways, each in two passes over the users (the first counts each user's
 * distinct items, the second splits it):
 *  - in memory (prep_protocol_run): the rows grouped by user and ordered
 *    (prep_rows_order), each user fed from them, users in parallel;
 *  - spilled (prep_protocol_run_spilled): the runs merged back in (user,
 *    timestamp, row) order (spill.h), each user fed from the stream as it
 *    comes, and split in batches that hold a share of the budget, so that
 *    memory stays bounded whatever the input.
 *  - given (prep_protocol_run_given): a split made elsewhere (given.h),
 *    its training positives fed to each user as in memory, its test
 *    positive given in the place of leave_one_out's (given_split), then
 *    write_split, its candidates in the place of user_negatives' draw,
 *    its explicit negatives kept per user in the order given; nothing
 *    dropped, nothing drawn.
 * Nothing here depends on the number of threads: users are independent,
 * counters are sums of integers, and every random number is addressed by
 * (seed, user, k, attempt).
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ncf_hd.h"
#include "given.h"
#include "protocol.h"
#include "spill.h"

#define NCF_EVAL_MAX_TRIES 1000

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* ---- one user: the rules ------------------------------------------------- */

/* One user's history as the rules read it: its distinct items in
 * (timestamp, row) order, each at its earliest row (feed_add), and the
 * timestamps of the last two (the tie rule reads no others). */
struct history {
	uint32_t user;	      /* index among the rows' users */
	uint32_t len;	      /* distinct items, at least 1 */
	uint64_t rows;	      /* the rows they came from, repeats included */
	const uint32_t *item; /* (len) indices among the rows' items */
	int64_t ts_last;      /* the timestamp of item[len - 1] */
	int64_t ts_before;    /* of item[len - 2], when len >= 2 */
};

/* A user's rows fed one at a time in (timestamp, row) order (feed_begin,
 * feed_add), into its history.  seen (I0) is the feeder's own: seen[i] ==
 * user + 1 when item i is the user's; with first rows asked for, slot[i]
 * is its place in the history and first_row[k] the first row of the file
 * that item k has among the user's rows. */
struct feed {
	struct history h;
	uint32_t *item, *first_row;
	size_t cap;
	uint32_t *seen, *slot; /* (I0 + 1); slot NULL: no first rows */
};

static void feed_init(struct feed *f, uint32_t I0, int first_rows)
{
	memset(f, 0, sizeof *f);
	f->seen = ncf_xcalloc((size_t)I0 + 1, sizeof *f->seen);
	if (first_rows)
		f->slot = ncf_xmalloc(((size_t)I0 + 1) * sizeof *f->slot);
}

static void feed_free(struct feed *f)
{
	free(f->seen);
	free(f->slot);
	free(f->item);
	free(f->first_row);
	memset(f, 0, sizeof *f);
}

static void feed_begin(struct feed *f, uint32_t user)
{
	f->h = (struct history){.user = user};
}

/* 2. One row of the user: a repeated item keeps its earliest row (the
 * first fed) and is counted among the rows only. */
static void feed_add(struct feed *f, uint32_t item, int64_t ts, uint32_t row)
{
	struct history *h = &f->h;
	h->rows++;
	if (f->seen[item] == h->user + 1) {
		if (f->slot && row < f->first_row[f->slot[item]])
			f->first_row[f->slot[item]] = row;
		return;
	}
	if (h->len == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 1024;
		f->item = ncf_xrealloc(f->item, f->cap * sizeof *f->item);
		if (f->slot)
			f->first_row = ncf_xrealloc(f->first_row, f->cap * sizeof *f->first_row);
	}
	f->seen[item] = h->user + 1;
	if (f->slot) {
		f->slot[item] = h->len;
		f->first_row[h->len] = row;
	}
	f->item[h->len++] = item;
	h->item = f->item;
	h->ts_before = h->ts_last;
	h->ts_last = ts;
}

/* 3. --min-ratings: is a user of len distinct items kept? */
static int user_kept(uint32_t len, uint32_t min_ratings)
{
	return len >= min_ratings;
}

/* What the rules need besides a user's rows: the final indices
 * (UINT32_MAX: dropped by --min-ratings), I, and how to draw negatives;
 * or, for a split that was given, each user's given test positive. */
struct rules {
	const uint32_t *user_new, *item_new;
	uint32_t items;
	uint32_t negatives; /* N per user */
	uint64_t seed;
	const uint32_t *given; /* (U0) the given test positives; NULL: leave one out */
};

/* 4. The training positives of a user of len distinct items: all but the
 * one left out, or all of them when the test positive was given. */
static uint32_t train_count(uint32_t len, const struct rules *x)
{
	return x->given ? len : len - 1;
}

/* Where users first .. go: user nu's test positive to test[j], its
 * training items to train[offsets[j] ..], j = nu - first. */
struct split_out {
	uint32_t first;
	const int64_t *offsets;
	uint32_t *test, *train;
};

/* The protocol's counters, summed over users. */
struct counts {
	uint64_t duplicates, ties, test_only;
};

static void counts_add(struct counts *to, const struct counts *n)
{
	to->duplicates += n->duplicates;
	to->ties += n->ties;
	to->test_only += n->test_only;
}

/* 5. The N evaluation negatives of user u (a final index) into out,
 * given its training items row (len, ascending). */
static void user_negatives(const uint32_t *row, int64_t len, uint64_t u, const struct rules *x,
			   uint32_t *out)
{
	uint32_t N = x->negatives;
	for (uint32_t k = 0; k < N; k++) {
		uint64_t idx = u * N + k;
		uint32_t it = 0;
		for (uint32_t a = 0; a < NCF_EVAL_MAX_TRIES; a++) {
			ncf_u32x4 x4 = ncf_rng(x->seed, NCF_RNG_EVAL_NEG, a, idx, 0);
			it = ncf_uniform_below(x4.v[0], x->items);
			if (!ncf_row_has(row, len, it))
				break;
		}
		out[k] = it;
	}
}

/* A user's split: its training items and its test positive, indices
 * among the rows' items. */
struct split {
	const uint32_t *train; /* (n_train), any order */
	uint32_t n_train;
	uint32_t test;
};

/* 4. Leave one out: the last of h's history is the test positive, a tie
 * (counted in n) when the one before it has the same timestamp; the
 * others, h->len - 1 of them, train. */
static struct split leave_one_out(const struct history *h, struct counts *n)
{
	uint32_t last = h->len - 1;
	n->ties += last >= 1 && h->ts_last == h->ts_before;
	return (struct split){h->item, h->len - 1, h->item[last]};
}

/* 4. A split that was given: all of h's history trains (none: the user
 * only has a test positive), and its test positive is the one given (it
 * may be among them: the split is taken as given). */
static struct split given_split(const struct history *h, const struct rules *x)
{
	return (struct split){h->item, h->len, x->given[h->user]};
}

/* 4. User nu's split into out in final indices, its training items in
 * ascending order; a user with none is counted test-only.  Step 5
 * (user_negatives) draws against those training items. */
static void write_split(const struct split *sp, uint32_t nu, const struct rules *x,
			const struct split_out *out, struct counts *n)
{
	uint32_t j = nu - out->first;
	n->test_only += sp->n_train == 0;
	uint32_t *train = out->train + out->offsets[j];
	for (uint32_t k = 0; k < sp->n_train; k++)
		train[k] = x->item_new[sp->train[k]];
	qsort(train, sp->n_train, sizeof *train, cmp_u32);
	out->test[j] = x->item_new[sp->test];
}

/* Steps 2-4 for one user whose rows came in by any way: its repeats
 * counted; when --min-ratings kept it, its split into out: leave one
 * out, or the test positive given with the data (whose candidates then
 * take user_negatives' place). */
static void protocol_user(const struct history *h, const struct rules *x,
			  const struct split_out *out, struct counts *n)
{
	n->duplicates += h->rows - h->len;
	uint32_t nu = x->user_new[h->user];
	if (nu == UINT32_MAX)
		return;
	struct split sp = x->given ? given_split(h, x) : leave_one_out(h, n);
	write_split(&sp, nu, x, out, n);
}

/* ---- what both ways share: the grouping, the indices, the ids ------------- */

/* The users and items of the rows as the protocol runs: U0, I0 of them;
 * distinct[u] user u's distinct items (pass 1); user_new, item_new their
 * final indices (UINT32_MAX: dropped). */
struct grouping {
	uint32_t U0, I0;
	uint32_t *distinct; /* (U0 + 1) */
	uint32_t *user_new; /* (U0 + 1) */
	uint32_t *item_new; /* (I0 + 1) */
};

static void grouping_init(struct grouping *g, uint32_t U0, uint32_t I0)
{
	g->U0 = U0;
	g->I0 = I0;
	g->distinct = ncf_xcalloc((size_t)U0 + 1, sizeof *g->distinct);
	g->user_new = ncf_xmalloc(((size_t)U0 + 1) * sizeof *g->user_new);
	g->item_new = ncf_xmalloc(((size_t)I0 + 1) * sizeof *g->item_new);
}

static void grouping_free(struct grouping *g)
{
	free(g->distinct);
	free(g->user_new);
	free(g->item_new);
}

/* 3. --min-ratings: the users kept, in index order, into user_new and
 * c's users, users_dropped, ratings_dropped.  Returns 0, or -1 after
 * reporting that none is. */
static int keep_users(struct grouping *g, uint32_t min_ratings, struct ncf_cache *c)
{
	uint32_t U = 0;
	uint64_t ratings_dropped = 0;
	for (uint32_t u = 0; u < g->U0; u++) {
		if (user_kept(g->distinct[u], min_ratings)) {
			g->user_new[u] = U++;
		} else {
			g->user_new[u] = UINT32_MAX;
			ratings_dropped += g->distinct[u]; /* duplicates are counted once, apart */
		}
	}
	if (U == 0) {
		ncf_error("no user has %u or more ratings (--min-ratings)", min_ratings);
		return -1;
	}
	c->users = U;
	c->users_dropped = g->U0 - U;
	c->ratings_dropped = ratings_dropped;
	return 0;
}

struct by_row {
	uint32_t row, item;
};

static int cmp_by_row(const void *a, const void *b)
{
	uint32_t x = ((const struct by_row *)a)->row, y = ((const struct by_row *)b)->row;
	return (x > y) - (x < y);
}

/* 3. The items kept, indexed in order of first appearance among the rows
 * kept, into item_new and c's items, items_dropped: first_row[i] is item
 * i's first row among the users kept (UINT32_MAX: none); NULL when every
 * user is kept, and the items keep their indices (given in that order). */
static void index_items(struct grouping *g, const uint32_t *first_row, struct ncf_cache *c)
{
	uint32_t n = 0;
	if (!first_row) {
		for (uint32_t i = 0; i < g->I0; i++)
			g->item_new[i] = i;
		n = g->I0;
	} else {
		struct by_row *v = ncf_xmalloc(((size_t)g->I0 + 1) * sizeof *v);
		for (uint32_t i = 0; i < g->I0; i++) {
			g->item_new[i] = UINT32_MAX;
			if (first_row[i] != UINT32_MAX)
				v[n++] = (struct by_row){first_row[i], i};
		}
		qsort(v, n, sizeof *v, cmp_by_row);
		for (uint32_t k = 0; k < n; k++)
			g->item_new[v[k].item] = k;
		free(v);
	}
	c->items = n;
	c->items_dropped = g->I0 - n;
}

/* A named column's names in the final indices (to: n0 of the rows' of
 * which n are kept, UINT32_MAX dropped): names kept in index order, and
 * the u32 ids, which are the indices. */
static void set_names(const struct ncf_names *from, const uint32_t *to, uint32_t n0, uint32_t n,
		      uint32_t *ids, struct ncf_names *out)
{
	if (!from->n)
		return;
	uint32_t *old = ncf_xmalloc(((size_t)n + 1) * sizeof *old);
	for (uint32_t k = 0; k < n0; k++)
		if (to[k] != UINT32_MAX)
			old[to[k]] = k;
	for (uint32_t k = 0; k < n; k++) {
		size_t len;
		const char *s = ncf_names_at(from, old[k], &len);
		ncf_names_add(out, s, len);
		ids[k] = k;
	}
	free(old);
}

/* c's id maps and protocol settings, from the final indices of g and the
 * rows' maps (ids). */
static void set_ids(const struct grouping *g, const struct prep_rows *ids,
		    const struct prep_protocol_opts *o, struct ncf_cache *c)
{
	c->min_ratings = o->min_ratings;
	c->eval_negatives = o->eval_negatives;
	c->seed = o->seed;
	c->user_ids = ncf_xmalloc((size_t)c->users * sizeof *c->user_ids);
	c->item_ids = ncf_xmalloc((size_t)c->items * sizeof *c->item_ids);
	for (uint32_t u = 0; u < g->U0; u++)
		if (g->user_new[u] != UINT32_MAX)
			c->user_ids[g->user_new[u]] = ids->user_ids[u];
	for (uint32_t i = 0; i < g->I0; i++)
		if (g->item_new[i] != UINT32_MAX)
			c->item_ids[g->item_new[i]] = ids->item_ids[i];
	set_names(&ids->user_names, g->user_new, g->U0, c->users, c->user_ids, &c->user_names);
	set_names(&ids->item_names, g->item_new, g->I0, c->items, c->item_ids, &c->item_names);
}

static struct rules rules_of(const struct grouping *g, const struct prep_protocol_opts *o,
			     const struct ncf_cache *c)
{
	return (struct rules){.user_new = g->user_new,
			      .item_new = g->item_new,
			      .items = c->items,
			      .negatives = o->eval_negatives,
			      .seed = o->seed,
			      .given = o->given};
}

/* ---- in memory ------------------------------------------------------------ */

/* The rows grouped by user: user u's rows are order[start[u] ..
 * start[u + 1]), in (timestamp, row) order. */
struct by_user {
	uint32_t *start; /* (U0 + 1) */
	uint32_t *order; /* (n) row numbers */
};

/* User u's rows into f. */
static void feed_rows(struct feed *f, const struct prep_rows *r, const struct by_user *b,
		      uint32_t u)
{
	feed_begin(f, u);
	for (uint32_t k = b->start[u]; k < b->start[u + 1]; k++) {
		uint32_t row = b->order[k];
		feed_add(f, r->item[row], r->ts[row], row);
	}
}

/* Pass 1: each user's distinct items into g->distinct. */
static void count_rows(const struct prep_rows *r, const struct by_user *b, struct grouping *g)
{
#pragma omp parallel
	{
		struct feed f;
		feed_init(&f, g->I0, 0);
#pragma omp for schedule(dynamic, 256)
		for (int64_t u = 0; u < (int64_t)g->U0; u++) {
			feed_rows(&f, r, b, (uint32_t)u);
			g->distinct[u] = f.h.len;
		}
		feed_free(&f);
	}
}

/* Each item's first row among the users kept (UINT32_MAX: none), by
 * reading the rows in file order. */
static uint32_t *first_rows(const struct prep_rows *r, const struct grouping *g)
{
	uint32_t *first_row = ncf_xmalloc(((size_t)g->I0 + 1) * sizeof *first_row);
	memset(first_row, 0xff, ((size_t)g->I0 + 1) * sizeof *first_row);
	for (size_t k = 0; k < r->n; k++)
		if (g->user_new[r->user[k]] != UINT32_MAX && first_row[r->item[k]] == UINT32_MAX)
			first_row[r->item[k]] = (uint32_t)k;
	return first_row;
}

/* Pass 2: every user split into c's CSR and test items. */
static void split_rows(const struct prep_rows *r, const struct by_user *b,
		       const struct grouping *g, const struct prep_protocol_opts *o,
		       struct ncf_cache *c)
{
	const uint32_t U = c->users;
	struct rules x = rules_of(g, o, c);
	c->offsets = ncf_xmalloc(((size_t)U + 1) * sizeof *c->offsets);
	c->offsets[0] = 0;
	for (uint32_t u = 0; u < g->U0; u++)
		if (g->user_new[u] != UINT32_MAX)
			c->offsets[g->user_new[u] + 1] =
				c->offsets[g->user_new[u]] + train_count(g->distinct[u], &x);
	c->train_positives = c->offsets[U];
	c->train_items = ncf_xmalloc((size_t)(c->train_positives ? c->train_positives : 1) *
				     sizeof *c->train_items);
	c->test_items = ncf_xmalloc((size_t)U * sizeof *c->test_items);
	struct split_out out = {0, c->offsets, c->test_items, c->train_items};
	struct counts total = {0};
#pragma omp parallel
	{
		struct feed f;
		struct counts n = {0};
		feed_init(&f, g->I0, 0);
#pragma omp for schedule(dynamic, 256)
		for (int64_t u = 0; u < (int64_t)g->U0; u++) {
			feed_rows(&f, r, b, (uint32_t)u);
			protocol_user(&f.h, &x, &out, &n);
		}
		feed_free(&f);
#pragma omp critical
		counts_add(&total, &n);
	}
	c->duplicates_dropped = total.duplicates;
	c->test_ties = total.ties;
	c->test_only_users = total.test_only;
}

/* 5. The (U, N) evaluation negatives of c, drawn against its CSR. */
static void draw_negatives(const struct grouping *g, const struct prep_protocol_opts *o,
			   struct ncf_cache *c)
{
	struct rules x = rules_of(g, o, c);
	c->eval_neg = ncf_xmalloc((size_t)c->users * x.negatives * sizeof *c->eval_neg + 4);
#pragma omp parallel for schedule(dynamic, 256)
	for (int64_t u = 0; u < (int64_t)c->users; u++)
		user_negatives(c->train_items + c->offsets[u], c->offsets[u + 1] - c->offsets[u],
			       (uint64_t)u, &x, c->eval_neg + (size_t)u * x.negatives);
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

/* The first pass of both ways in memory: each user's rows in order of
 * (timestamp, row) into b, then counted into g (count_rows). */
static void group_rows(struct prep_rows *r, struct grouping *g, struct by_user *b)
{
	grouping_init(g, r->n_users, r->n_items);
	b->start = ncf_xmalloc(((size_t)g->U0 + 1) * sizeof *b->start);
	b->order = ncf_xmalloc((r->n ? r->n : 1) * sizeof *b->order);
	prep_rows_order(r, 0, g->U0, b->start, b->order);
	count_rows(r, b, g);
}

int prep_protocol_run(struct prep_rows *r, const struct prep_protocol_opts *o, struct ncf_cache *c)
{
	NCF_TRY(prep_rows_check_count(r->n));
	struct grouping g;
	struct by_user b;
	group_rows(r, &g, &b);
	int rc = keep_users(&g, o->min_ratings, c);
	if (rc == 0)
		rc = prep_protocol_check_size(c->users, o->eval_negatives);
	if (rc == 0) {
		uint32_t *first_row = c->users < g.U0 ? first_rows(r, &g) : NULL;
		index_items(&g, first_row, c);
		free(first_row);
		set_ids(&g, r, o, c);
		split_rows(r, &b, &g, o, c);
	}
	free(b.start);
	free(b.order);
	if (rc == 0) /* once the order is freed: the two are never held together */
		draw_negatives(&g, o, c);
	grouping_free(&g);
	return rc;
}

/* ---- given ---------------------------------------------------------------- */

/* The explicit negatives (n, file order) as c's CSR over users, each
 * user's in the order given (a counting sort, stable). */
static void explicit_negatives(const uint32_t *user, const uint32_t *item, size_t n,
			       struct ncf_cache *c)
{
	c->train_negatives = n;
	if (!n)
		return;
	uint32_t U = c->users;
	c->neg_offsets = ncf_xcalloc((size_t)U + 1, sizeof *c->neg_offsets);
	c->neg_items = ncf_xmalloc(n * sizeof *c->neg_items);
	for (size_t k = 0; k < n; k++)
		c->neg_offsets[user[k] + 1]++;
	for (uint32_t u = 0; u < U; u++)
		c->neg_offsets[u + 1] += c->neg_offsets[u];
	int64_t *fill = ncf_xmalloc((size_t)U * sizeof *fill);
	memcpy(fill, c->neg_offsets, (size_t)U * sizeof *fill);
	for (size_t k = 0; k < n; k++)
		c->neg_items[fill[user[k]]++] = item[k];
	free(fill);
}

int prep_protocol_run_given(struct prep_given *gv, struct ncf_cache *c)
{
	struct prep_rows *r = &gv->pos;
	prep_given_ids(gv, r);
	NCF_TRY(prep_rows_check_count(r->n));
	struct prep_protocol_opts o = {.eval_negatives = gv->N, .given = gv->test};
	struct grouping g;
	struct by_user b;
	group_rows(r, &g, &b);
	int rc = keep_users(&g, 0, c); /* every user is kept: its split was given */
	if (rc == 0) {
		index_items(&g, NULL, c);
		set_ids(&g, r, &o, c);
		split_rows(r, &b, &g, &o, c);
		c->seed = 0; /* nothing is drawn */
		c->split_given = 1;
		c->ratings_read = r->n + c->users; /* the positives: train rows and test */
		c->eval_neg = gv->cand; /* in user_negatives' place */
		gv->cand = NULL;
		explicit_negatives(gv->neg_user, gv->neg_item, gv->n_neg, c);
	}
	free(b.start);
	free(b.order);
	grouping_free(&g);
	return rc;
}

/* ---- spilled ---------------------------------------------------------- */

/* The merged records fed one user at a time. */
struct user_reader {
	struct prep_merge *m;
	struct prep_spill_rec next; /* the first record of the next user */
	int have;		    /* next is set */
	uint32_t expect;	    /* the next user's index */
	struct feed f;		    /* the current user */
};

static int reader_open(struct user_reader *ur, struct prep_spill *sp, uint32_t I0, int first_rows)
{
	memset(ur, 0, sizeof *ur);
	ur->m = prep_merge_open(sp);
	if (!ur->m)
		return -1;
	feed_init(&ur->f, I0, first_rows);
	return 0;
}

static void reader_close(struct user_reader *ur)
{
	prep_merge_close(ur->m);
	feed_free(&ur->f);
	memset(ur, 0, sizeof *ur);
}

/* The next user's rows fed into ur->f: 1, or 0 after the last, -1 on an
 * error (reported). */
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
	uint32_t u = ur->expect++;
	feed_begin(&ur->f, u);
	do {
		feed_add(&ur->f, ur->next.item, ur->next.ts, ur->next.row);
		int rc = prep_merge_next(ur->m, &ur->next);
		if (rc < 0)
			return -1;
		ur->have = rc;
	} while (ur->have && ur->next.user == u);
	return 1;
}

/* Pass 1, with --min-ratings: each user's distinct items (g->distinct), and
 * each item's first row among the users kept into first_row (UINT32_MAX:
 * none).  Returns 0 or -1. */
static int count_spilled(struct prep_spill *sp, uint32_t min_ratings, struct grouping *g,
			 uint32_t *first_row)
{
	struct user_reader ur;
	NCF_TRY(reader_open(&ur, sp, g->I0, 1));
	const struct feed *f = &ur.f;
	int rc;
	while ((rc = reader_next(&ur)) > 0) {
		g->distinct[f->h.user] = f->h.len;
		if (user_kept(f->h.len, min_ratings))
			for (uint32_t k = 0; k < f->h.len; k++)
				if (f->first_row[k] < first_row[f->item[k]])
					first_row[f->item[k]] = f->first_row[k];
	}
	reader_close(&ur);
	return rc;
}

/* Users of pass 2 gathered to be split in parallel: user j (final index
 * first + j) is hist[j], its items item[at[j] .. at[j + 1]); its training
 * items go to train[offsets[j] ..], its negatives to neg[j N ..]. */
struct batch {
	uint32_t first, n, cap_users;
	struct history *hist; /* (cap_users), item pointing into item */
	uint32_t *at;	      /* (cap_users + 1) */
	int64_t *offsets;     /* (cap_users + 1) */
	uint32_t *item, *train, *test, *neg;
	size_t items, cap_items;
};

/* Room for users with a share of the spill's budget: half of it for 8
 * bytes an item (its index and its training copy), half for 4 (N + 14)
 * bytes a user (its history, where it starts, its test item and N
 * negatives). */
static void batch_init(struct batch *b, uint64_t share, uint32_t N)
{
	memset(b, 0, sizeof *b);
	b->cap_items = share / 16 < 65536 ? 65536 : (size_t)(share / 16);
	uint64_t users = share / 2 / (4 * ((uint64_t)N + 14));
	b->cap_users = users < 64 ? 64 : users > (1u << 20) ? (1u << 20) : (uint32_t)users;
	b->hist = ncf_xmalloc((size_t)b->cap_users * sizeof *b->hist);
	b->at = ncf_xmalloc(((size_t)b->cap_users + 1) * sizeof *b->at);
	b->offsets = ncf_xmalloc(((size_t)b->cap_users + 1) * sizeof *b->offsets);
	b->item = ncf_xmalloc(b->cap_items * sizeof *b->item);
	b->train = ncf_xmalloc(b->cap_items * sizeof *b->train);
	b->test = ncf_xmalloc((size_t)b->cap_users * sizeof *b->test);
	b->neg = ncf_xmalloc((size_t)b->cap_users * N * sizeof *b->neg + 4);
	b->at[0] = 0;
	b->offsets[0] = 0;
}

static void batch_free(struct batch *b)
{
	free(b->hist), free(b->at), free(b->offsets);
	free(b->item), free(b->train), free(b->test), free(b->neg);
}

/* Does user h (kept) fit in the batch as it is? */
static int batch_fits(const struct batch *b, const struct history *h)
{
	return b->n < b->cap_users && h->len <= b->cap_items - b->items;
}

/* Add user h (kept) to the batch, growing it when h alone outgrows it. */
static void batch_add(struct batch *b, const struct history *h, const struct rules *x)
{
	if (h->len > b->cap_items - b->items) {
		b->cap_items = b->items + h->len;
		b->item = ncf_xrealloc(b->item, b->cap_items * sizeof *b->item);
		b->train = ncf_xrealloc(b->train, b->cap_items * sizeof *b->train);
	}
	memcpy(b->item + b->items, h->item, h->len * sizeof *b->item);
	b->items += h->len;
	b->hist[b->n] = *h; /* its item set when the batch is split: item may move */
	b->offsets[b->n + 1] = b->offsets[b->n] + train_count(h->len, x);
	b->at[++b->n] = (uint32_t)b->items;
}

/* What a batch's split goes to: c's offsets and test items, the planes,
 * the hook. */
struct spilled_out {
	struct ncf_cache *c;
	struct prep_planes *train, *neg;
	const struct prep_protocol_hook *hook;
};

/* Split the batch's users and draw their negatives (protocol_user,
 * user_negatives, in parallel), write them out, then empty the batch.
 * Returns 0 or -1. */
static int batch_flush(struct batch *b, const struct rules *x, const struct spilled_out *so,
		       struct counts *total)
{
	struct ncf_cache *c = so->c;
	struct split_out out = {b->first, b->offsets, b->test, b->train};
#pragma omp parallel
	{
		struct counts n = {0};
#pragma omp for schedule(dynamic, 64)
		for (int64_t j = 0; j < (int64_t)b->n; j++) {
			struct history h = b->hist[j];
			h.item = b->item + b->at[j];
			protocol_user(&h, x, &out, &n);
			uint32_t *neg = b->neg + (size_t)j * x->negatives;
			user_negatives(b->train + b->offsets[j], b->offsets[j + 1] - b->offsets[j],
				       (uint64_t)b->first + j, x, neg);
		}
#pragma omp critical
		counts_add(total, &n);
	}
	for (uint32_t j = 0; j < b->n; j++) {
		uint32_t nu = b->first + j;
		c->test_items[nu] = b->test[j];
		c->offsets[nu + 1] = c->offsets[nu] + (b->offsets[j + 1] - b->offsets[j]);
	}
	NCF_TRY(prep_planes_put(so->train, b->train, (size_t)b->offsets[b->n]));
	NCF_TRY(prep_planes_put(so->neg, b->neg, (size_t)b->n * x->negatives));
	if (so->hook && so->hook->batch)
		so->hook->batch(so->hook->ctx, c, b->first, b->n, b->test, b->neg);
	b->first += b->n;
	b->n = 0;
	b->items = 0;
	return 0;
}

/* Pass 2: every user read back and split: the repeats of a user dropped
 * counted at once, the users kept in batches that take half the budget.
 * Returns 0 or -1. */
static int split_spilled(struct prep_spill *sp, const struct grouping *g,
			 const struct prep_protocol_opts *o, const struct spilled_out *so)
{
	struct ncf_cache *c = so->c;
	struct rules x = rules_of(g, o, c);
	struct batch b;
	batch_init(&b, prep_spill_budget(sp) / 2, o->eval_negatives);
	struct split_out none = {0};
	struct counts total = {0};
	c->offsets[0] = 0;
	struct user_reader ur;
	int rc = reader_open(&ur, sp, g->I0, 0);
	while (rc == 0) {
		int got = reader_next(&ur);
		if (got <= 0) {
			rc = got;
			break;
		}
		if (g->user_new[ur.f.h.user] == UINT32_MAX) {
			protocol_user(&ur.f.h, &x, &none, &total);
			continue;
		}
		if (b.n && !batch_fits(&b, &ur.f.h))
			rc = batch_flush(&b, &x, so, &total);
		batch_add(&b, &ur.f.h, &x);
	}
	if (rc == 0 && b.n)
		rc = batch_flush(&b, &x, so, &total);
	reader_close(&ur);
	batch_free(&b);
	c->duplicates_dropped = total.duplicates;
	c->test_only_users = total.test_only;
	c->test_ties = total.ties;
	c->train_positives = c->offsets[c->users];
	return rc;
}

int prep_protocol_run_spilled(struct prep_spill *sp, const struct prep_rows *ids,
			     const struct prep_protocol_opts *o, struct ncf_cache *c,
			     struct prep_planes *train, struct prep_planes *neg,
			     const struct prep_protocol_hook *hook)
{
	struct grouping g;
	grouping_init(&g, ids->n_users, ids->n_items);
	uint32_t *first_row = NULL;
	int rc = 0;
	if (o->min_ratings) {
		first_row = ncf_xmalloc(((size_t)g.I0 + 1) * sizeof *first_row);
		memset(first_row, 0xff, ((size_t)g.I0 + 1) * sizeof *first_row);
		rc = count_spilled(sp, o->min_ratings, &g, first_row);
	}
	/* without --min-ratings every user is kept, whatever its count */
	if (rc == 0)
		rc = keep_users(&g, o->min_ratings, c);
	if (rc == 0)
		rc = prep_protocol_check_size(c->users, o->eval_negatives);
	if (rc == 0) {
		index_items(&g, c->users < g.U0 ? first_row : NULL, c);
		set_ids(&g, ids, o, c);
		c->offsets = ncf_xmalloc(((size_t)c->users + 1) * sizeof *c->offsets);
		c->test_items = ncf_xmalloc(((size_t)c->users + 1) * sizeof *c->test_items);
		struct spilled_out so = {c, train, neg, hook};
		rc = split_spilled(sp, &g, o, &so);
	}
	free(first_row);
	grouping_free(&g);
	return rc;
}
