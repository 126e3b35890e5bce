/* rows.c - see rows.h. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "idmap.h"
#include "rows.h"

void prep_rows_grow(struct prep_rows *r, size_t need)
{
	if (r->spill && need > r->limit && r->n) {
		size_t more = need - r->n;
		r->spill(r->spill_ctx, r);
		need = more;
	}
	if (need <= r->cap)
		return;
	size_t cap = r->cap ? r->cap : (1u << 16);
	while (cap < need)
		cap += cap / 2 + 1;
	if (r->spill && cap > r->limit)
		cap = need > r->limit ? need : r->limit;
	r->user = ncf_xrealloc(r->user, cap * sizeof *r->user);
	r->item = ncf_xrealloc(r->item, cap * sizeof *r->item);
	r->ts = ncf_xrealloc(r->ts, cap * sizeof *r->ts);
	r->cap = cap;
}

size_t prep_rows_extend(struct prep_rows *r, size_t n)
{
	prep_rows_grow(r, r->n + n);
	size_t first = r->n;
	r->n += n;
	return first;
}

struct prep_ids {
	struct ncf_idmap users, items;
	uint32_t last_id, last_idx; /* the previous row's user (last_idx UINT32_MAX: none) */
};

struct prep_ids *prep_ids_new(void)
{
	struct prep_ids *x = ncf_xcalloc(1, sizeof *x);
	ncf_idmap_init(&x->users);
	ncf_idmap_init(&x->items);
	x->last_idx = UINT32_MAX;
	return x;
}

void prep_ids_index(struct prep_ids *x, struct prep_rows *r, size_t from)
{
	for (size_t k = from; k < r->n; k++) {
		/* Files are usually grouped by user: skip the lookup for a repeat. */
		if (r->user[k] != x->last_id || x->last_idx == UINT32_MAX) {
			x->last_id = r->user[k];
			x->last_idx = ncf_idmap_get(&x->users, x->last_id);
		}
		r->user[k] = x->last_idx;
		r->item[k] = ncf_idmap_get(&x->items, r->item[k]);
	}
}

uint32_t prep_ids_users(const struct prep_ids *x)
{
	return x->users.count;
}

void prep_ids_finish(struct prep_ids *x, struct prep_rows *r)
{
	r->n_users = x->users.count;
	r->n_items = x->items.count;
	r->user_ids = ncf_idmap_take_ids(&x->users);
	r->item_ids = ncf_idmap_take_ids(&x->items);
	ncf_idmap_free(&x->users);
	ncf_idmap_free(&x->items);
	free(x);
}

void prep_rows_index(struct prep_rows *r)
{
	struct prep_ids *x = prep_ids_new();
	prep_ids_index(x, r, 0);
	prep_ids_finish(x, r);
}

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

void prep_rows_order(const struct prep_rows *r, uint32_t first, uint32_t span, uint32_t *start,
		    uint32_t *order)
{
	size_t n = r->n;
	/* counting sort by user: stable, so file order within a user */
	memset(start, 0, ((size_t)span + 1) * sizeof *start);
	for (size_t k = 0; k < n; k++)
		start[r->user[k] - first + 1]++;
	for (uint32_t u = 0; u < span; u++)
		start[u + 1] += start[u];
	uint32_t *fill = ncf_xmalloc(((size_t)span + 1) * sizeof *fill);
	memcpy(fill, start, (size_t)span * sizeof *fill);
	for (size_t k = 0; k < n; k++)
		order[fill[r->user[k] - first]++] = (uint32_t)k;
	free(fill);
	/* then each user's rows by time */
#pragma omp parallel
	{
		size_t tmp_cap = 1024;
		uint32_t *tmp = ncf_xmalloc(tmp_cap * sizeof *tmp);
#pragma omp for schedule(dynamic, 256)
		for (int64_t u = 0; u < (int64_t)span; u++) {
			size_t len = start[u + 1] - start[u];
			if (len > tmp_cap) {
				tmp_cap = len;
				tmp = ncf_xrealloc(tmp, tmp_cap * sizeof *tmp);
			}
			sort_by_ts(order + start[u], tmp, len, r->ts);
		}
		free(tmp);
	}
}

int prep_rows_check_count(uint64_t n)
{
	if (n < UINT32_MAX)
		return 0;
	ncf_error("%llu ratings: at most %u are supported", (unsigned long long)n, UINT32_MAX - 1);
	return -1;
}

void prep_rows_free(struct prep_rows *r)
{
	free(r->user);
	free(r->item);
	free(r->ts);
	free(r->user_ids);
	free(r->item_ids);
	ncf_names_free(&r->user_names);
	ncf_names_free(&r->item_names);
	memset(r, 0, sizeof *r);
}
