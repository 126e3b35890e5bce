/*
 * names.h - original ids that are text, and the one id type every tool
 * compares, prints and looks up, whatever kind of id a file holds.
 *
 * A ratings file's users (or items) are numbered ids when every one is an
 * integer from 0 to 4294967295 (MovieLens): a cache or a model keeps them
 * as u32 (user_ids, item_ids).  When any id of the column is other text
 * ("u17", "B00005JMJ8", a UUID), the column is named: every id is kept
 * as its text, and an integer among them as its decimal digits with no
 * sign or leading zero ("007" and "+7" are the id 7, written "7"), so
 * that the id 7 of a numbered column and the name "7" of a named one are
 * one id (ncf_id_equal).  A name is 1 to NCF_NAME_MAX bytes with no
 * control character (no tab, line end or NUL: names go into TSV output,
 * line-oriented streams and NUL-ended sections).
 *
 * struct ncf_names holds a column's names in index order, each followed
 * by a NUL; struct ncf_id is one id of either kind, which is what a tool
 * matching a model's ids against a cache's, or a person's input against
 * a model's, compares (idindex.h looks them up).
 */
#ifndef NCF_NAMES_H
#define NCF_NAMES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NCF_NAME_MAX 256 /* bytes of one name, its NUL not counted */

/* The names of n users or items, in index order: name k is the string at
 * text + start[k] (NUL-ended).  n == 0: none (the column is numbered). */
struct ncf_names {
	uint32_t n;
	uint64_t bytes;	  /* of text: every name and its NUL */
	char *text;	  /* (bytes) */
	uint64_t *start;  /* (n) */
	uint64_t cap, start_cap; /* the builder's room (ncf_names_add) */
};

/* One original id: the number num when text is NULL, else the name text
 * (len bytes; NUL-ended when it comes from a struct ncf_names). */
struct ncf_id {
	const char *text;
	uint32_t len;
	uint32_t num;
};

/* Append a name (len bytes, checked by the caller: ncf_name_check).  The
 * names are then indexed (start) as they grow. */
void ncf_names_add(struct ncf_names *m, const char *s, size_t len);
/* Free what m holds; m is then empty. */
void ncf_names_free(struct ncf_names *m);
/* A copy of src into dst (empty or not, replaced). */
void ncf_names_copy(struct ncf_names *dst, const struct ncf_names *src);
/* Name k (its length into *len when len is not NULL). */
static inline const char *ncf_names_at(const struct ncf_names *m, uint32_t k, size_t *len);

/*
 * The names of a section as read (text, bytes) checked and indexed: n
 * names each ended by a NUL, each a valid name (ncf_name_check), all
 * distinct (a sort: O(n log n) comparisons of at most NCF_NAME_MAX bytes
 * whatever the names).  On success m takes text.  Returns 0, or -1 with
 * the reason in why (cap bytes; m untouched, text not freed).
 */
int ncf_names_load(struct ncf_names *m, char *text, uint64_t bytes, uint32_t n, char *why,
		   size_t cap);

/* Can a names section of bytes hold the names of n ids (none when 0;
 * else 2 to NCF_NAME_MAX + 1 bytes each, a name and its NUL)?  What a
 * file's meta says is checked by this before the section is read. */
static inline int ncf_names_size_ok(uint64_t bytes, uint64_t n)
{
	return !bytes || (bytes >= 2 * n && bytes <= n * (NCF_NAME_MAX + 1));
}

struct ncf_cr;
/*
 * The names of section tag of an open container (names->bytes of them, as
 * the file's meta says; none when 0) for a column of n whose numbered ids
 * must then be its indices (ids): read, checked and indexed as
 * ncf_names_load does.  The one reading of names for caches and models.
 * Returns 0; or -1 with the reason in why (cap bytes), or with why empty
 * when the container has already said what is wrong.
 */
int ncf_names_read(struct ncf_cr *r, const char *tag, size_t n, struct ncf_names *names,
		   const uint32_t *ids, char *why, size_t cap);

/* Is s (len bytes) a name as kept (1 to NCF_NAME_MAX bytes, no control
 * byte, an integer only in canonical form)?  NULL if so, else what is
 * wrong ("empty", "longer than 256 bytes", "holds a control character",
 * "an integer not in canonical form"). */
const char *ncf_name_check(const char *s, size_t len);

/* Is s (len bytes) an integer id: decimal digits with an optional '+',
 * 0 to 4294967295?  Then 1 and its value in *v, else 0. */
int ncf_text_is_u32(const char *s, size_t len, uint32_t *v);

/* Id k of a column: ids (numbered) or names (named, names->n > 0). */
struct ncf_id ncf_id_at(const uint32_t *ids, const struct ncf_names *names, uint32_t k);
/* A person's id (a token of --score input, say): an integer is a number,
 * any other text a name.  The text is not copied. */
struct ncf_id ncf_id_from_text(const char *s, size_t len);
/*
 * The ids of a line a person gives (ncf-infer --score's "user item",
 * --recommend's "user"), where ids may be names: want of them (1 or 2),
 * separated by tabs when the line has one, else by a comma when it has
 * one, else by spaces (so a name with spaces needs a tab or a comma
 * between the two); spaces around each are dropped; with want 1 the
 * whole line is the id.  Each is a number or a valid name (ids point
 * into s).  Returns 0, or -1 when the line is not that.
 */
int ncf_id_split(const char *s, int want, struct ncf_id *a, struct ncf_id *b);

/* One id?  A number and a name are one id when the name is the number's
 * decimal digits. */
int ncf_id_equal(struct ncf_id a, struct ncf_id b);
/* The id as a NUL-ended string: the name (of a struct ncf_names), or
 * the number's digits in buf. */
#define NCF_ID_BUF 16
const char *ncf_id_str(struct ncf_id id, char buf[NCF_ID_BUF]);
/* id as a message says it: a number as its digits, a name quoted ('Smith,
 * John'), as a name may hold spaces or a comma, its bytes escaped (ncf_escape,
 * 60 at most).  Into buf (len bytes); returns buf. */
const char *ncf_id_quote(struct ncf_id id, char *buf, size_t len);
/* Print the id (its len bytes, or the number's digits) to fp.  Returns
 * 0, or EOF when the write failed. */
int ncf_id_print(FILE *fp, struct ncf_id id);

/*
 * The order of the names by their bytes (memcmp, then length), indices
 * into order (n); a merge sort, so its cost is bounded whatever the
 * names.  Used to check them distinct and to look them up (idindex.h).
 */
void ncf_names_sort(const struct ncf_names *m, uint32_t *order);
/* Compare name k of m with s (len bytes), in the order of
 * ncf_names_sort. */
int ncf_names_cmp(const struct ncf_names *m, uint32_t k, const char *s, size_t len);

static inline const char *ncf_names_at(const struct ncf_names *m, uint32_t k, size_t *len)
{
	const char *s = m->text + m->start[k];
	if (len) {
		uint64_t end = k + 1 < m->n ? m->start[k + 1] : m->bytes;
		*len = (size_t)(end - m->start[k] - 1);
	}
	return s;
}

#endif
