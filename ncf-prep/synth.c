/*
 * synth.c - MovieLens-shaped synthetic ratings with planted structure.
 *
 * The model (all randomness from Philox, NCF_RNG_SYNTH, addressed by
 * (seed, table, row, draw), so the data are the same for any thread count
 * and, using only + - * / and sqrt in double, on any IEEE machine):
 *  - K = 20 clusters ("genres"); item i belongs to cluster c(i), uniform;
 *  - item popularity is Zipf: w(i) = 1 / (rank(i) + 10) with rank(i) a
 *    keyed permutation of the items;
 *  - user u likes three distinct clusters f1, f2, f3: its preference is
 *    theta(u, c) = 0.15/K + 0.85 * {0.6, 0.25, 0.15 for f1, f2, f3; else 0};
 *  - user activity is heavy-tailed: n(u) = m0 + floor((m - m0) * (1/sqrt(x) - 1))
 *    for x uniform in (0, 1], whose mean is m (Pareto, alpha 2), with
 *    m0 = 20 (MovieLens keeps users with 20 ratings or more; 10 for the
 *    shape "tiny"), capped at
 *    I/8, and m set (by bisection) so that the total is the shape's count;
 *  - each rating draws a cluster from theta(u, .), then an item of that
 *    cluster by popularity, rejecting items the user already has; so the
 *    probability of item i for user u is proportional to
 *    score(u, i) = theta(u, c(i)) * w(i) / W(c(i)), W(c) the cluster's total,
 *    the planted true score that the oracle ranks by;
 *  - timestamps increase along the draws (Unix seconds from 2000 on, gaps of
 *    0 (5%, a tie), up to two hours, or now and then up to 90 days); the
 *    rows of a user are written in item-id order, as GroupLens does, so the
 *    order in time differs from the order in the file;
 *  - original ids: users 1..U, movies 1 + i + 5 * (i / 8) (not contiguous).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "metrics.h"
#include "ncf_hd.h"
#include "synth.h"

#define K_CLUSTERS 20

enum { T_ITEM = 1, T_USER = 2, T_DRAW = 3, T_RANK = 4 };

static const struct {
	const char *name;
	uint32_t users, items;
	uint64_t ratings;
	uint32_t min_per_user;
} shapes[] = {
	{"tiny", 50, 200, 1200, 10},
	{"ml-latest-small", 610, 9724, 100836, 20},
	{"ml-100k", 943, 1682, 100000, 20},
	{"ml-1m", 6040, 3706, 1000209, 20},
	{"ml-10m", 69878, 10677, 10000054, 20},
	{"ml-20m", 138493, 26744, 20000263, 20},
	{"ml-25m", 162541, 59047, 25000095, 20},
};

int prep_synth_init(struct prep_synth *s, const char *spec, uint64_t seed)
{
	memset(s, 0, sizeof *s);
	char name[64];
	size_t len = strlen(spec);
	if (len >= sizeof name)
		return -1;
	memcpy(name, spec, len + 1);
	uint64_t scale = 1;
	char *x = strrchr(name, 'x');
	if (x && x[1]) {
		char *end;
		unsigned long long v = strtoull(x + 1, &end, 10);
		if (*end == 0 && x[1] >= '0' && x[1] <= '9') {
			if (v < 1 || v > 1000)
				return -1;
			scale = v;
			*x = 0;
		}
	}
	int found = -1;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		if (!strcmp(name, shapes[i].name))
			found = (int)i;
	if (found < 0)
		return -1;
	uint64_t users = shapes[found].users * scale, items = shapes[found].items * scale;
	if (users >= (1u << 31) || items >= (1u << 28))
		return -1;
	s->users = (uint32_t)users;
	s->items = (uint32_t)items;
	s->ratings = shapes[found].ratings * scale;
	s->seed = seed;
	snprintf(s->spec, sizeof s->spec, "%s", spec);
	uint32_t I = s->items;
	double mean = (double)s->ratings / (double)s->users;
	s->min_per_user = shapes[found].min_per_user;
	s->max_per_user = I / 8 > s->min_per_user ? I / 8 : s->min_per_user;
	/* The cap at I/8 lowers the mean: find the uncapped mean that gives
	 * the shape's rating count (bisection; each step sums U counts). */
	double lo = 0, hi = 4 * mean;
	for (int it = 0; it < 40; it++) {
		s->mean_excess = 0.5 * (lo + hi);
		uint64_t total = 0;
		for (uint32_t u = 0; u < s->users; u++)
			total += prep_synth_count(s, u);
		if (total < s->ratings)
			lo = s->mean_excess;
		else
			hi = s->mean_excess;
	}
	s->mean_excess = hi;

	/* Items: cluster and popularity. */
	s->cluster = ncf_xmalloc((size_t)I * sizeof *s->cluster);
	s->weight = ncf_xmalloc((size_t)I * sizeof *s->weight);
	ncf_perm rank = ncf_perm_make(I, seed ^ 0x5eed5eedull, T_RANK);
	for (uint32_t i = 0; i < I; i++) {
		ncf_u32x4 r = ncf_rng(seed, NCF_RNG_SYNTH, T_ITEM, i, 0);
		s->cluster[i] = ncf_uniform_below(r.v[0], K_CLUSTERS);
		s->weight[i] = 1.0 / ((double)ncf_perm_apply(&rank, i) + 10.0);
	}
	/* Per cluster: its items in index order and their cumulative weights. */
	s->cl_start = ncf_xcalloc(K_CLUSTERS + 1, sizeof *s->cl_start);
	for (uint32_t i = 0; i < I; i++)
		s->cl_start[s->cluster[i] + 1]++;
	for (int c = 0; c < K_CLUSTERS; c++)
		s->cl_start[c + 1] += s->cl_start[c];
	s->cl_items = ncf_xmalloc((size_t)I * sizeof *s->cl_items);
	s->cl_cum = ncf_xmalloc((size_t)I * sizeof *s->cl_cum);
	s->cl_total = ncf_xcalloc(K_CLUSTERS, sizeof *s->cl_total);
	uint32_t fill[K_CLUSTERS];
	for (int c = 0; c < K_CLUSTERS; c++)
		fill[c] = s->cl_start[c];
	for (uint32_t i = 0; i < I; i++) {
		uint32_t c = s->cluster[i], k = fill[c]++;
		s->cl_total[c] += s->weight[i];
		s->cl_items[k] = i;
		s->cl_cum[k] = s->cl_total[c];
	}
	return 0;
}

void prep_synth_free(struct prep_synth *s)
{
	free(s->cluster);
	free(s->weight);
	free(s->cl_start);
	free(s->cl_items);
	free(s->cl_cum);
	free(s->cl_total);
	memset(s, 0, sizeof *s);
}

const char *prep_synth_shapes(void)
{
	return "tiny, ml-latest-small, ml-100k, ml-1m, ml-10m, ml-20m, ml-25m";
}

/* The three favourite clusters of u. */
static void favourites(const struct prep_synth *s, uint32_t u, uint32_t f[3])
{
	ncf_u32x4 r = ncf_rng(s->seed, NCF_RNG_SYNTH, T_USER, u, 0);
	f[0] = ncf_uniform_below(r.v[0], K_CLUSTERS);
	f[1] = (f[0] + 1 + ncf_uniform_below(r.v[1], K_CLUSTERS - 1)) % K_CLUSTERS;
	do {
		f[2] = ncf_uniform_below(r.v[2], K_CLUSTERS);
		r.v[2] = ncf_mix32(r.v[2] + 0x9E3779B9u);
	} while (f[2] == f[0] || f[2] == f[1]);
}

static void preference(const struct prep_synth *s, uint32_t u, double theta[K_CLUSTERS])
{
	uint32_t f[3];
	favourites(s, u, f);
	for (int c = 0; c < K_CLUSTERS; c++)
		theta[c] = 0.15 / K_CLUSTERS;
	theta[f[0]] += 0.85 * 0.6;
	theta[f[1]] += 0.85 * 0.25;
	theta[f[2]] += 0.85 * 0.15;
}

double prep_synth_score(const struct prep_synth *s, uint32_t u, uint32_t i)
{
	double theta[K_CLUSTERS];
	preference(s, u, theta);
	uint32_t c = s->cluster[i];
	return theta[c] * s->weight[i] / s->cl_total[c];
}

uint32_t prep_synth_count(const struct prep_synth *s, uint32_t u)
{
	ncf_u32x4 r = ncf_rng(s->seed, NCF_RNG_SYNTH, T_USER, u, 1);
	double x = ((double)r.v[0] + 1.0) / 4294967296.0; /* (0, 1] */
	double n = s->min_per_user + floor(s->mean_excess * (1.0 / sqrt(x) - 1.0));
	if (n > s->max_per_user)
		n = s->max_per_user;
	return (uint32_t)n;
}

uint64_t prep_synth_user_time(const struct prep_synth *s, uint32_t u)
{
	ncf_u32x4 r = ncf_rng(s->seed, NCF_RNG_SYNTH, T_USER, u, 2);
	return 946684800ull + ncf_uniform_below(r.v[0], 15u * 365u * 86400u);
}

static void heap_sort_by_item(uint32_t *it, int64_t *ts, uint8_t *rt, uint32_t n);

uint32_t prep_synth_user(const struct prep_synth *s, uint32_t u, uint32_t *items, int64_t *ts,
			uint8_t *rating, uint32_t *stamp)
{
	uint32_t n = prep_synth_count(s, u);
	double theta[K_CLUSTERS], cum[K_CLUSTERS];
	preference(s, u, theta);
	double acc = 0;
	for (int c = 0; c < K_CLUSTERS; c++) {
		acc += theta[c];
		cum[c] = acc;
	}
	int64_t t = (int64_t)prep_synth_user_time(s, u);
	uint32_t tag = u + 1, got = 0, draw = 0;
	while (got < n) {
		ncf_u32x4 r = ncf_rng(s->seed, NCF_RNG_SYNTH, T_DRAW, u, draw++);
		double x0 = (double)r.v[0] / 4294967296.0 * acc;
		int c = 0;
		while (c < K_CLUSTERS - 1 && cum[c] <= x0)
			c++;
		uint32_t lo = s->cl_start[c], hi = s->cl_start[c + 1];
		if (lo == hi)
			continue; /* an empty cluster (tiny shapes) */
		double x1 = ((double)r.v[1] + (double)r.v[2] / 4294967296.0) / 4294967296.0 *
			    s->cl_total[c];
		uint32_t a = lo, b = hi - 1; /* first k with cum[k] > x1, else the last */
		while (a < b) {
			uint32_t mid = a + (b - a) / 2;
			if (s->cl_cum[mid] > x1)
				b = mid;
			else
				a = mid + 1;
		}
		uint32_t item = s->cl_items[a];
		if (stamp[item] == tag)
			continue;
		stamp[item] = tag;
		uint32_t w = r.v[3];
		if ((w & 0xFF) >= 13) { /* 5% of ratings share the previous second */
			t += 1 + (int64_t)((w >> 8) % 7200u);
			if (((w >> 20) & 0xF) == 0)
				t += (int64_t)((w >> 8) % (90u * 86400u));
		}
		items[got] = item;
		ts[got] = t;
		rating[got] = (uint8_t)(1 + (w >> 28) % 10); /* half stars 1..10 */
		got++;
	}
	heap_sort_by_item(items, ts, rating, n);
	return n;
}

static void sift(uint32_t *it, int64_t *ts, uint8_t *rt, uint32_t root, uint32_t n)
{
	for (;;) {
		uint32_t child = 2 * root + 1;
		if (child >= n)
			return;
		if (child + 1 < n && it[child + 1] > it[child])
			child++;
		if (it[root] >= it[child])
			return;
		uint32_t ti = it[root];
		it[root] = it[child];
		it[child] = ti;
		int64_t tt = ts[root];
		ts[root] = ts[child];
		ts[child] = tt;
		uint8_t tr = rt[root];
		rt[root] = rt[child];
		rt[child] = tr;
		root = child;
	}
}

/* Items are distinct, so an unstable sort gives the same result. */
static void heap_sort_by_item(uint32_t *it, int64_t *ts, uint8_t *rt, uint32_t n)
{
	for (uint32_t k = n / 2; k-- > 0;)
		sift(it, ts, rt, k, n);
	for (uint32_t end = n; end-- > 1;) {
		uint32_t ti = it[0];
		it[0] = it[end];
		it[end] = ti;
		int64_t tt = ts[0];
		ts[0] = ts[end];
		ts[end] = tt;
		uint8_t tr = rt[0];
		rt[0] = rt[end];
		rt[end] = tr;
		sift(it, ts, rt, 0, end);
	}
}

uint32_t prep_synth_item_id(uint32_t i)
{
	return 1 + i + 5 * (i / 8);
}

int prep_synth_item_index(uint32_t id, uint32_t *i)
{
	if (id == 0)
		return -1;
	uint32_t v = id - 1, a = v / 13, b = v % 13;
	if (b >= 8)
		return -1;
	*i = 8 * a + b;
	return 0;
}

/* Users per block of parallel generation. */
#define BLOCK 2048

void prep_synth_rows(const struct prep_synth *s, struct prep_rows *rows)
{
	uint32_t U = s->users;
	uint64_t *start = ncf_xmalloc(((size_t)U + 1) * sizeof *start);
	start[0] = 0;
	for (uint32_t u = 0; u < U; u++)
		start[u + 1] = start[u] + prep_synth_count(s, u);
	/* users in blocks that fit what the rows take before they spill (one
	 * block of all of them without a budget) */
	for (uint32_t u0 = 0, u1; u0 < U && !rows->failed; u0 = u1) {
		size_t room = !rows->spill ? SIZE_MAX : rows->limit > rows->n ? rows->limit - rows->n : 0;
		for (u1 = u0 + 1; u1 < U && start[u1 + 1] - start[u0] <= room; u1++)
			;
		size_t first = prep_rows_extend(rows, (size_t)(start[u1] - start[u0]));
#pragma omp parallel
		{
			uint32_t *stamp = ncf_xcalloc(s->items, sizeof *stamp);
			uint32_t *items = ncf_xmalloc(((size_t)s->max_per_user + 1) * sizeof *items);
			uint8_t *rt = ncf_xmalloc((size_t)s->max_per_user + 1);
#pragma omp for schedule(dynamic, 64)
			for (int64_t u = u0; u < (int64_t)u1; u++) {
				size_t o = first + start[u] - start[u0];
				uint32_t n = prep_synth_user(s, (uint32_t)u, items, rows->ts + o, rt, stamp);
				for (uint32_t k = 0; k < n; k++) {
					rows->user[o + k] = (uint32_t)u + 1;
					rows->item[o + k] = prep_synth_item_id(items[k]);
				}
			}
			free(stamp);
			free(items);
			free(rt);
		}
	}
	free(start);
}

static char *put_uint(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

int prep_synth_write_csv(const struct prep_synth *s, FILE *fp)
{
	static const char header[] = "userId,movieId,rating,timestamp\n";
	if (fwrite(header, 1, sizeof header - 1, fp) != sizeof header - 1)
		return -1;
	uint32_t U = s->users;
	uint32_t nblocks = (U + BLOCK - 1) / BLOCK;
	int failed = 0;
	/* Blocks are formatted in parallel, a wave at a time, and written in
	 * order. */
	uint32_t wave = 8;
	char **text = ncf_xcalloc(wave, sizeof *text);
	size_t *len = ncf_xcalloc(wave, sizeof *len);
	for (uint32_t b0 = 0; b0 < nblocks && !failed; b0 += wave) {
		uint32_t nb = nblocks - b0 < wave ? nblocks - b0 : wave;
#pragma omp parallel
		{
			uint32_t *stamp = ncf_xcalloc(s->items, sizeof *stamp);
			uint32_t *items = ncf_xmalloc(((size_t)s->max_per_user + 1) * sizeof *items);
			int64_t *ts = ncf_xmalloc(((size_t)s->max_per_user + 1) * sizeof *ts);
			uint8_t *rt = ncf_xmalloc((size_t)s->max_per_user + 1);
#pragma omp for schedule(dynamic, 1)
			for (uint32_t j = 0; j < nb; j++) {
				uint32_t u0 = (b0 + j) * BLOCK;
				uint32_t u1 = u0 + BLOCK < U ? u0 + BLOCK : U;
				size_t cap = 1 << 20, o = 0;
				char *t = ncf_xmalloc(cap);
				for (uint32_t u = u0; u < u1; u++) {
					uint32_t n = prep_synth_user(s, u, items, ts, rt, stamp);
					if (o + (size_t)n * 48 + 64 > cap) {
						cap = (o + (size_t)n * 48 + 64) * 2;
						t = ncf_xrealloc(t, cap);
					}
					for (uint32_t k = 0; k < n; k++) {
						char *p = t + o;
						p = put_uint(p, u + 1);
						*p++ = ',';
						p = put_uint(p, prep_synth_item_id(items[k]));
						*p++ = ',';
						*p++ = (char)('0' + rt[k] / 2);
						*p++ = '.';
						*p++ = rt[k] % 2 ? '5' : '0';
						*p++ = ',';
						p = put_uint(p, (uint64_t)ts[k]);
						*p++ = '\n';
						o = (size_t)(p - t);
					}
				}
				text[j] = t;
				len[j] = o;
			}
			free(stamp);
			free(items);
			free(ts);
			free(rt);
		}
		for (uint32_t j = 0; j < nb; j++) {
			if (!failed && fwrite(text[j], 1, len[j], fp) != len[j])
				failed = 1;
			free(text[j]);
			text[j] = NULL;
		}
	}
	free(text);
	free(len);
	return failed ? -1 : 0;
}

struct prep_synth_oracle {
	const struct prep_synth *s;
	uint32_t *gen;	  /* (I) generator item of each cache item */
	uint32_t *ranks;  /* (U) */
	int bad;	  /* an id the generator does not make */
};

struct prep_synth_oracle *prep_synth_oracle_begin(const struct prep_synth *s,
						const struct ncf_cache *c)
{
	struct prep_synth_oracle *q = ncf_xcalloc(1, sizeof *q);
	q->s = s;
	q->gen = ncf_xmalloc(((size_t)c->items + 1) * sizeof *q->gen);
	q->ranks = ncf_xmalloc(((size_t)c->users + 1) * sizeof *q->ranks);
	for (uint32_t i = 0; i < c->items; i++)
		if (prep_synth_item_index(c->item_ids[i], &q->gen[i]) != 0 || q->gen[i] >= s->items)
			q->bad = 1;
	for (uint32_t u = 0; u < c->users; u++)
		if (c->user_ids[u] == 0 || c->user_ids[u] > s->users)
			q->bad = 1;
	return q;
}

void prep_synth_oracle_users(struct prep_synth_oracle *q, const struct ncf_cache *c, uint32_t first,
			    uint32_t n, const uint32_t *test, const uint32_t *neg)
{
	if (q->bad)
		return;
	uint32_t N = c->eval_negatives;
	uint8_t *mask = ncf_eval_mask(test, neg, n, N, c->items);
#pragma omp parallel
	{
		float *sc = ncf_xmalloc(((size_t)N + 1) * sizeof *sc);
#pragma omp for schedule(static)
		for (int64_t j = 0; j < (int64_t)n; j++) {
			uint32_t gu = c->user_ids[first + j] - 1;
			double pos = prep_synth_score(q->s, gu, q->gen[test[j]]);
			/* Compare in double, then hand 0/1 scores to ncf_rank. */
			for (uint32_t k = 0; k < N; k++)
				sc[k] = prep_synth_score(q->s, gu, q->gen[neg[(size_t)j * N + k]]) >= pos
						? 1.0f
						: 0.0f;
			q->ranks[first + j] = ncf_rank(0.5f, sc, mask + (size_t)j * N, N);
		}
		free(sc);
	}
	free(mask);
}

double prep_synth_oracle_end(struct prep_synth_oracle *q, const struct ncf_cache *c, uint32_t topk)
{
	double hr = NAN, ndcg;
	if (!q->bad)
		ncf_metrics_from_ranks(q->ranks, c->users, topk, &hr, &ndcg);
	free(q->gen);
	free(q->ranks);
	free(q);
	return hr;
}

double prep_synth_oracle(const struct prep_synth *s, const struct ncf_cache *c, uint32_t topk)
{
	struct prep_synth_oracle *q = prep_synth_oracle_begin(s, c);
	prep_synth_oracle_users(q, c, 0, c->users, c->test_items, c->eval_neg);
	return prep_synth_oracle_end(q, c, topk);
}
