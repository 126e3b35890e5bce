/*
 * rows.h - the interactions ncf-prep collects before the protocol runs:
 * one (user, item, timestamp) per input row, in file order, and the maps
 * that give users and items dense indices in order of first appearance.
 */
#ifndef NCF_ROWS_H
#define NCF_ROWS_H

#include <stddef.h>
#include <stdint.h>

struct prep_rows {
	uint32_t *user; /* (n) original id while reading; dense index after prep_rows_index */
	uint32_t *item; /* (n) likewise */
	int64_t *ts;	/* (n) Unix seconds */
	size_t n, cap;
	/* filled by prep_rows_index */
	uint32_t n_users, n_items;
	uint32_t *user_ids; /* (n_users) original id of each index */
	uint32_t *item_ids; /* (n_items) */
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
void prep_rows_free(struct prep_rows *r);

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
