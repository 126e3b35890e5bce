/*
 * idindex.h - original MovieLens ids back to dense indices (the inverse of
 * a cache's or a model's id map), for the tools that read ids from people.
 * Building it is linear (a radix sort) and a lookup a binary search,
 * whichever ids the map holds.
 */
#ifndef NCF_IDINDEX_H
#define NCF_IDINDEX_H

#include <stddef.h>
#include <stdint.h>

struct ncf_idindex {
	uint64_t *pairs; /* (n) id << 32 | index, sorted */
	size_t n;
};

/* Build from ids (n), ids[index] = original id. */
void ncf_idindex_init(struct ncf_idindex *x, const uint32_t *ids, size_t n);
void ncf_idindex_free(struct ncf_idindex *x);
/* The index of id, or -1. */
int64_t ncf_idindex_find(const struct ncf_idindex *x, uint32_t id);

#endif
