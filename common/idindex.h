/*
 * idindex.h - original ids back to dense indices (the inverse of a
 * cache's or a model's id map), for the tools that read ids from people
 * and that match a model's rows with a cache's.  Numbered ids: building
 * is linear (a radix sort) and a lookup a binary search.  Named ids
 * (names.h): the names are sorted by their bytes (a merge sort) and a
 * lookup is a binary search of memcmp's; no hash, so that no input can
 * choose ids that cost more than others.
 */
#ifndef NCF_IDINDEX_H
#define NCF_IDINDEX_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"

struct ncf_idindex {
	uint64_t *pairs; /* (n) id << 32 | index, sorted; NULL when named */
	size_t n;
	const struct ncf_names *names; /* named: the names (not owned), else NULL */
	uint32_t *order;	       /* (n) named: the indices in the names' order */
};

/* Build from ids (n), ids[index] = original id. */
void ncf_idindex_init(struct ncf_idindex *x, const uint32_t *ids, size_t n);
/* Build from a column of either kind: names when names->n (kept by
 * reference: they must outlive x), else ids (n). */
void ncf_idindex_init_ids(struct ncf_idindex *x, const uint32_t *ids,
			  const struct ncf_names *names, size_t n);
void ncf_idindex_free(struct ncf_idindex *x);
/* The index of id, or -1 (numbered ids only). */
int64_t ncf_idindex_find(const struct ncf_idindex *x, uint32_t id);
/* The index of an id of either kind, or -1: a number among names is
 * looked up as its digits, a name among numbers is not there. */
int64_t ncf_idindex_find_id(const struct ncf_idindex *x, struct ncf_id id);

#endif
