/*
 * idmap.h - ids as an input brings them (a ratings file's users and
 * items) to dense indices 0, 1, ... in order of first appearance, and the
 * index -> id list that a cache keeps.
 *
 * Cost: an id below NCF_IDMAP_DIRECT (every MovieLens id) is a table
 * entry; a larger one goes to open addressing (linear probing, at most
 * half full) on ncf_siphash_u32 under the process's random key
 * (hash.h), so that the expected cost of an id is the same whichever ids
 * a file holds: ids chosen to collide under one key are spread by the
 * next.  The indices depend only on the order in which ids come, never on
 * the key.  Memory: the direct table comes in blocks of 4096 ids (16 KiB)
 * made when an id of theirs first comes (16 MiB at most), plus 8 bytes a
 * slot (2 to 4 slots per large id) and 4 bytes an id.
 *
 * Text ids (names.h: a column of ratings whose ids are not all integers)
 * share the count: ncf_idmap_get_text gives a name its index in the same
 * order of first appearance, through a second table of the same kind
 * (linear probing, at most half full) on ncf_siphash of the bytes under
 * the map's key, its slots compared through the names.  From the first
 * name on, the map keeps every id's name (an integer's digits), so that
 * the column's ids can be handed over as names (ncf_idmap_take_names).
 */
#ifndef NCF_IDMAP_H
#define NCF_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "names.h"

#define NCF_IDMAP_DIRECT (1u << 22) /* ids below this are table entries */
#define NCF_IDMAP_BLOCK 12	    /* of 2^12 ids a block */

struct ncf_idmap_slot {
	uint32_t id, val; /* val: index + 1, 0 for an empty slot */
};

struct ncf_idmap {
	/* index + 1 of each small id (0: absent), by blocks (NULL: none of its ids) */
	uint32_t *direct[NCF_IDMAP_DIRECT >> NCF_IDMAP_BLOCK];
	struct ncf_idmap_slot *slots; /* (cap) the larger ids; cap a power of two or 0 */
	size_t cap, used;
	struct ncf_hash_key key;      /* the process's key when the map was made */
	uint32_t count;		      /* ids so far */
	uint32_t *ids;		      /* (count) index -> id (0 for a name) */
	size_t ids_cap;
	struct ncf_idmap_slot *tslots; /* (tcap) the names: id the hash's low bits */
	size_t tcap, tused;
	struct ncf_names names;	      /* (count) once a name has come, else empty */
};

/* An empty map (under the process's key at this time). */
void ncf_idmap_init(struct ncf_idmap *m);
void ncf_idmap_free(struct ncf_idmap *m);
/* The index of id, or -1 when it was never given. */
int64_t ncf_idmap_find(const struct ncf_idmap *m, uint32_t id);
/* Hand over the index -> id list (count ids; the caller frees it); only
 * ncf_idmap_find and ncf_idmap_free may follow. */
uint32_t *ncf_idmap_take_ids(struct ncf_idmap *m);
/* The index of the name s (len bytes: a valid name, ncf_name_check, that
 * is not an integer: those go to ncf_idmap_get), given the next one when
 * it is new. */
uint32_t ncf_idmap_get_text(struct ncf_idmap *m, const char *s, size_t len);
/* Has a name come (are the ids to be kept as names)? */
static inline int ncf_idmap_named(const struct ncf_idmap *m)
{
	return m->names.n > 0;
}
/* Hand over the names (count of them, every id's) into *out (emptied
 * first): what a named column keeps.  Only ncf_idmap_free may follow. */
void ncf_idmap_take_names(struct ncf_idmap *m, struct ncf_names *out);

/* The index of id, given the next one (count, then counted) when id is new.
 * At most UINT32_MAX - 1 distinct ids. */
static inline uint32_t ncf_idmap_get(struct ncf_idmap *m, uint32_t id);
/* ncf_idmap_get's slow paths: a small id not seen yet, a large id
 * through the hash table. */
uint32_t ncf_idmap_get_direct(struct ncf_idmap *m, uint32_t id);
uint32_t ncf_idmap_get_hashed(struct ncf_idmap *m, uint32_t id);

static inline uint32_t ncf_idmap_get(struct ncf_idmap *m, uint32_t id)
{
	if (id < NCF_IDMAP_DIRECT) {
		const uint32_t *b = m->direct[id >> NCF_IDMAP_BLOCK];
		uint32_t v = b ? b[id & ((1u << NCF_IDMAP_BLOCK) - 1)] : 0;
		return v ? v - 1 : ncf_idmap_get_direct(m, id);
	}
	return ncf_idmap_get_hashed(m, id);
}

#endif
