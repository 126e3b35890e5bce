/* rows.c - see rows.h. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rows.h"

void prep_rows_grow(struct prep_rows *r, size_t need)
{
	if (need <= r->cap)
		return;
	size_t cap = r->cap ? r->cap : (1u << 16);
	while (cap < need)
		cap += cap / 2 + 1;
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

/*
 * An id -> index map: a direct table for ids below DIRECT, open addressing
 * for the rest.  Values are index + 1 (0 = absent).
 */
#define DIRECT (1u << 22)
struct idmap {
	uint32_t *direct;		 /* (DIRECT) */
	uint32_t *keys, *vals;		 /* hash part */
	size_t cap, used;
	uint32_t count;
	uint32_t *ids;			 /* index -> id */
	size_t ids_cap;
};

static uint32_t hash32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x45d9f3bu;
	x ^= x >> 16;
	return x;
}

static void idmap_rehash(struct idmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024;
	uint32_t *keys = ncf_xcalloc(cap, sizeof *keys);
	uint32_t *vals = ncf_xcalloc(cap, sizeof *vals);
	for (size_t i = 0; i < m->cap; i++)
		if (m->vals[i]) {
			size_t h = hash32(m->keys[i]) & (cap - 1);
			while (vals[h])
				h = (h + 1) & (cap - 1);
			keys[h] = m->keys[i];
			vals[h] = m->vals[i];
		}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
}

static uint32_t idmap_new(struct idmap *m, uint32_t id)
{
	if (m->count == m->ids_cap) {
		m->ids_cap = m->ids_cap ? m->ids_cap * 2 : 1024;
		m->ids = ncf_xrealloc(m->ids, m->ids_cap * sizeof *m->ids);
	}
	m->ids[m->count] = id;
	return ++m->count;
}

static inline uint32_t idmap_get(struct idmap *m, uint32_t id)
{
	if (id < DIRECT) {
		uint32_t v = m->direct[id];
		if (!v)
			v = m->direct[id] = idmap_new(m, id);
		return v - 1;
	}
	if ((m->used + 1) * 2 > m->cap)
		idmap_rehash(m);
	size_t h = hash32(id) & (m->cap - 1);
	while (m->vals[h]) {
		if (m->keys[h] == id)
			return m->vals[h] - 1;
		h = (h + 1) & (m->cap - 1);
	}
	m->keys[h] = id;
	m->vals[h] = idmap_new(m, id);
	m->used++;
	return m->vals[h] - 1;
}

void prep_rows_index(struct prep_rows *r)
{
	struct idmap um = {0}, im = {0};
	um.direct = ncf_xcalloc(DIRECT, sizeof(uint32_t));
	im.direct = ncf_xcalloc(DIRECT, sizeof(uint32_t));
	uint32_t last_id = 0, last_idx = UINT32_MAX;
	for (size_t k = 0; k < r->n; k++) {
		/* Files are usually grouped by user: skip the lookup for a repeat. */
		if (r->user[k] != last_id || last_idx == UINT32_MAX) {
			last_id = r->user[k];
			last_idx = idmap_get(&um, last_id);
		}
		r->user[k] = last_idx;
		r->item[k] = idmap_get(&im, r->item[k]);
	}
	r->n_users = um.count;
	r->n_items = im.count;
	r->user_ids = um.ids;
	r->item_ids = im.ids;
	free(um.direct);
	free(um.keys);
	free(um.vals);
	free(im.direct);
	free(im.keys);
	free(im.vals);
}

void prep_rows_free(struct prep_rows *r)
{
	free(r->user);
	free(r->item);
	free(r->ts);
	free(r->user_ids);
	free(r->item_ids);
	memset(r, 0, sizeof *r);
}
