/*
 * idindex.h - original ids back to dense indices (the inverse of a
 * cache's or a model's id map), for the tools that read ids from people,
 * and one id list matched against another (a model's rows onto a cache's,
 * ncf-train --init).  Numbered ids: building is linear (a radix sort) and
 * a lookup a binary search.  Named ids (names.h): the names are sorted by
 * their bytes (a merge sort) and a lookup is a binary search of memcmp's;
 * no hash, so that no input can choose ids that cost more than others.
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

/* The original ids of a table's rows (a cache's or a model's users or
 * items): row r's is ncf_id_at(ids, names, r), a number or a name.  Every
 * match goes through ncf_ids_match and every message through ncf_id_say. */
struct ncf_id_list {
	size_t n;			/* rows */
	const uint32_t *ids;		/* (n) integer ids (row r itself when named) */
	const struct ncf_names *names;	/* (n) the rows' names, or NULL / n == 0:
					   numbered */
};

/*
 * Where each row of from stands in to, by original id: at[r] (n of from)
 * is the row of to with from's id of row r, or -1 when to has no such
 * row.  Returns how many rows of from to lacks; *first_missing (may be
 * NULL) gets the first of them (from's row).  Linear in both sizes for
 * numbered ids (a radix-sorted index of to), n log n for named ones.
 */
size_t ncf_ids_match(const struct ncf_id_list *from, const struct ncf_id_list *to, int64_t *at,
		     size_t *first_missing);
/* Row r's id as people write it, into buf (len bytes): "17", or a name
 * quoted and escaped (ncf_escape), "'u17'", "'Smith, John'".
 * Returns buf. */
const char *ncf_id_say(const struct ncf_id_list *l, size_t r, char *buf, size_t len);

#endif
