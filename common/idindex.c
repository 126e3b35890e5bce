/* idindex.c - see idindex.h. */
#include <stdlib.h>

#include "err.h"
#include "idindex.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

void ncf_idindex_init(struct ncf_idindex *x, const uint32_t *ids, size_t n)
{
	x->n = n;
	x->pairs = ncf_xmalloc((n ? n : 1) * sizeof *x->pairs);
	for (size_t k = 0; k < n; k++)
		x->pairs[k] = (uint64_t)ids[k] << 32 | (uint64_t)k;
	qsort(x->pairs, n, sizeof *x->pairs, cmp_u64);
}

void ncf_idindex_free(struct ncf_idindex *x)
{
	free(x->pairs);
	x->pairs = NULL;
	x->n = 0;
}

int64_t ncf_idindex_find(const struct ncf_idindex *x, uint32_t id)
{
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
