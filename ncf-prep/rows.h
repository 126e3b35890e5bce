/*
 * rows.h - the interactions ncf-prep collects before the protocol runs:
 * one (user, item, timestamp) per input row, in file order, and the maps
 * that give users and items dense indices in order of first appearance
 * (common/idmap.h: what an id costs does not depend on which ids come).
 */
#ifndef NCF_ROWS_H
#define NCF_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"

struct prep_rows {
	uint32_t *user; /* (n) original id while reading; dense index after prep_rows_index */
	uint32_t *item; /* (n) likewise */
	int64_t *ts;	/* (n) Unix seconds */
	size_t n, cap;
	/* filled by prep_rows_index */
	uint32_t n_users, n_items;
	uint32_t *user_ids; /* (n_users) original id of each index (the index
			       itself when the users are named) */
	uint32_t *item_ids; /* (n_items) */
	struct ncf_names user_names, item_names; /* (n_users), (n_items) when named */
	/* a memory budget (spill.h): with spill set the rows never grow past
	 * limit; a push that would calls spill(spill_ctx, r) first, which
	 * takes the rows away (n becomes 0) or sets failed (reported), after
	 * which the reader stops */
	size_t limit;
	void (*spill)(void *ctx, struct prep_rows *r);
	void *spill_ctx;
	int failed;
};

/* Append one row (original ids). */
static inline void prep_rows_push(struct prep_rows *r, uint32_t user, uint32_t item, int64_t ts);
void prep_rows_grow(struct prep_rows *r, size_t need);
/* Make room for n more rows and return the index of the first; the caller
 * fills user/item/ts[first .. first+n). */
size_t prep_rows_extend(struct prep_rows *r, size_t n);
/* Replace original ids by dense indices in order of first appearance and
 * fill the maps. */
void prep_rows_index(struct prep_rows *r);

/*
 * The rows (dense ids, all users in [first, first + span)) in order of
 * (user, timestamp, row), by a counting sort on the user, then a stable
 * sort of each user's rows by timestamp: order (n) gets row numbers,
 * start (span + 1) where each user's rows begin in it (user first + u at
 * order[start[u] .. start[u + 1])).
 */
void prep_rows_order(const struct prep_rows *r, uint32_t first, uint32_t span, uint32_t *start,
		    uint32_t *order);

/*
 * The maps of prep_rows_index kept from one batch of rows to the next
 * (ncf-prep's spill): the indices are those of one pass over all the
 * rows.  prep_ids_index replaces the ids of rows [from, r->n) of r;
 * prep_ids_finish hands the index -> id maps to r (n_users, user_ids, ...)
 * and frees x.
 */
struct prep_ids;
struct prep_ids *prep_ids_new(void);
void prep_ids_index(struct prep_ids *x, struct prep_rows *r, size_t from);
uint32_t prep_ids_users(const struct prep_ids *x);
void prep_ids_finish(struct prep_ids *x, struct prep_rows *r);
void prep_rows_free(struct prep_rows *r);
/* At most UINT32_MAX - 1 ratings (a row number is a u32): 0, or -1 after
 * reporting n. */
int prep_rows_check_count(uint64_t n);

static inline void prep_rows_push(struct prep_rows *r, uint32_t user, uint32_t item, int64_t ts)
{
	if (r->n == r->cap)
		prep_rows_grow(r, r->n + 1);
	r->user[r->n] = user;
	r->item[r->n] = item;
	r->ts[r->n] = ts;
	r->n++;
}

#endif
