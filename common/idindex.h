/*
 * idindex.h - original MovieLens ids back to dense indices (the inverse of
 * a cache's or a model's id map), for the tools that read ids from people,
 * and one id list matched against another (a model's rows onto a cache's,
 * ncf-train --init).  Building it is linear (a radix sort) and a lookup a
 * binary search, whichever ids the map holds.
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

/* The original ids of a table's rows (a cache's or a model's users or
 * items), row r having ids[r].  Ids of another kind (strings) would be
 * another member beside ids: every match goes through ncf_ids_match and
 * every message through ncf_id_say, so that they are the two places to
 * teach it. */
struct ncf_id_list {
	size_t n;	     /* rows */
	const uint32_t *ids; /* (n) integer ids */
};

/*
 * Where each row of from stands in to, by original id: at[r] (n of from)
 * is the row of to with from's id of row r, or -1 when to has no such
 * row.  Returns how many rows of from to lacks; *first_missing (may be
 * NULL) gets the first of them (from's row).  Linear in both sizes (a
 * radix-sorted index of to).
 */
size_t ncf_ids_match(const struct ncf_id_list *from, const struct ncf_id_list *to, int64_t *at,
		     size_t *first_missing);
/* Row r's id as people write it, into buf (len bytes): "17".  Returns buf. */
const char *ncf_id_say(const struct ncf_id_list *l, size_t r, char *buf, size_t len);

#endif
