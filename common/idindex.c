/* idindex.c - see idindex.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "idindex.h"

/*
 * pairs (n) sorted by their high 32 bits (the id), stably, into place: a
 * radix sort, a byte of the id a pass (a pass whose byte is the same in
 * every id is skipped), so that the time is linear whichever ids a model
 * or a cache holds; tmp has room for n.  The pairs come in index order, so
 * equal ids stay in index order, as a sort of the whole value would leave
 * them.
 */
static void sort_by_id(uint64_t *pairs, uint64_t *tmp, size_t n)
{
	for (int shift = 32; shift < 64; shift += 8) {
		size_t count[256] = {0};
		for (size_t k = 0; k < n; k++)
			count[(pairs[k] >> shift) & 0xff]++;
		if (count[(pairs[0] >> shift) & 0xff] == n)
			continue;
		size_t at = 0;
		for (int b = 0; b < 256; b++) {
			size_t c = count[b];
			count[b] = at;
			at += c;
		}
		for (size_t k = 0; k < n; k++)
			tmp[count[(pairs[k] >> shift) & 0xff]++] = pairs[k];
		memcpy(pairs, tmp, n * sizeof *pairs);
	}
}

void ncf_idindex_init(struct ncf_idindex *x, const uint32_t *ids, size_t n)
{
	memset(x, 0, sizeof *x);
	x->n = n;
	x->pairs = ncf_xmalloc((n ? n : 1) * sizeof *x->pairs);
	for (size_t k = 0; k < n; k++)
		x->pairs[k] = (uint64_t)ids[k] << 32 | (uint64_t)k;
	if (n > 1) {
		uint64_t *tmp = ncf_xmalloc(n * sizeof *tmp);
		sort_by_id(x->pairs, tmp, n);
		free(tmp);
	}
}

void ncf_idindex_init_ids(struct ncf_idindex *x, const uint32_t *ids,
			  const struct ncf_names *names, size_t n)
{
	if (!names || !names->n) {
		ncf_idindex_init(x, ids, n);
		return;
	}
	memset(x, 0, sizeof *x);
	x->n = names->n;
	x->names = names;
	x->order = ncf_xmalloc((x->n ? x->n : 1) * sizeof *x->order);
	ncf_names_sort(names, x->order);
}

void ncf_idindex_free(struct ncf_idindex *x)
{
	free(x->pairs);
	free(x->order);
	memset(x, 0, sizeof *x);
}

/* The index of the name s (len bytes) among x's names, or -1. */
static int64_t find_name(const struct ncf_idindex *x, const char *s, size_t len)
{
	size_t lo = 0, hi = x->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ncf_names_cmp(x->names, x->order[mid], s, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < x->n && ncf_names_cmp(x->names, x->order[lo], s, len) == 0)
		return x->order[lo];
	return -1;
}

int64_t ncf_idindex_find_id(const struct ncf_idindex *x, struct ncf_id id)
{
	if (!x->names) {
		uint32_t v;
		if (!id.text)
			return ncf_idindex_find(x, id.num);
		return ncf_text_is_u32(id.text, id.len, &v) ? ncf_idindex_find(x, v) : -1;
	}
	if (id.text) {
		uint32_t v;
		/* an integer as a person may write it ("007") is its digits */
		if (!ncf_text_is_u32(id.text, id.len, &v))
			return find_name(x, id.text, id.len);
		id = (struct ncf_id){NULL, 0, v};
	}
	char buf[NCF_ID_BUF];
	const char *d = ncf_id_str(id, buf);
	return find_name(x, d, strlen(d));
}

int64_t ncf_idindex_find(const struct ncf_idindex *x, uint32_t id)
{
	if (!x->pairs)
		return -1;
	size_t lo = 0, hi = x->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint32_t v = (uint32_t)(x->pairs[mid] >> 32);
		if (v < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < x->n && (uint32_t)(x->pairs[lo] >> 32) == id)
		return (int64_t)(x->pairs[lo] & 0xFFFFFFFFu);
	return -1;
}

size_t ncf_ids_match(const struct ncf_id_list *from, const struct ncf_id_list *to, int64_t *at,
		     size_t *first_missing)
{
	struct ncf_idindex x;
	ncf_idindex_init_ids(&x, to->ids, to->names, to->n);
	size_t missing = 0;
	for (size_t r = 0; r < from->n; r++) {
		at[r] = ncf_idindex_find_id(&x, ncf_id_at(from->ids, from->names, (uint32_t)r));
		if (at[r] < 0 && !missing++ && first_missing)
			*first_missing = r;
	}
	ncf_idindex_free(&x);
	return missing;
}

const char *ncf_id_say(const struct ncf_id_list *l, size_t r, char *buf, size_t len)
{
	return ncf_id_quote(ncf_id_at(l->ids, l->names, (uint32_t)r), buf, len);
}
