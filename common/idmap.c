/* idmap.c - see idmap.h. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "idmap.h"

void ncf_idmap_init(struct ncf_idmap *m)
{
	memset(m, 0, sizeof *m);
	m->key = ncf_hash_key();
}

void ncf_idmap_free(struct ncf_idmap *m)
{
	for (size_t b = 0; b < sizeof m->direct / sizeof m->direct[0]; b++)
		free(m->direct[b]);
	free(m->slots);
	free(m->ids);
	free(m->tslots);
	ncf_names_free(&m->names);
	memset(m, 0, sizeof *m);
}

static inline size_t slot_of(const struct ncf_idmap *m, uint32_t id)
{
	return (size_t)ncf_siphash_u32(m->key, id) & (m->cap - 1);
}

/* Twice the slots (1024 at first), every id placed again. */
static void grow(struct ncf_idmap *m)
{
	struct ncf_idmap_slot *old = m->slots;
	size_t old_cap = m->cap;
	m->cap = old_cap ? old_cap * 2 : 1024;
	m->slots = ncf_xcalloc(m->cap, sizeof *m->slots);
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].val) {
			size_t h = slot_of(m, old[i].id);
			while (m->slots[h].val)
				h = (h + 1) & (m->cap - 1);
			m->slots[h] = old[i];
		}
	free(old);
}

/* The digits of id as the next name. */
static void add_digits(struct ncf_idmap *m, uint32_t id)
{
	char d[NCF_ID_BUF];
	int n = snprintf(d, sizeof d, "%u", id);
	ncf_names_add(&m->names, d, (size_t)n);
}

/* The next index, given to id (0 for a name, whose name the caller has
 * added). */
static uint32_t push_id(struct ncf_idmap *m, uint32_t id)
{
	if (m->count == m->ids_cap) {
		m->ids_cap = m->ids_cap ? m->ids_cap * 2 : 1024;
		m->ids = ncf_xrealloc(m->ids, m->ids_cap * sizeof *m->ids);
	}
	m->ids[m->count] = id;
	return m->count++;
}

/* The next index, given to id (and its digits as its name once the map
 * keeps names). */
static uint32_t new_index(struct ncf_idmap *m, uint32_t id)
{
	if (m->names.n)
		add_digits(m, id);
	return push_id(m, id);
}

static inline size_t tslot_of(const struct ncf_idmap *m, uint64_t h)
{
	return (size_t)h & (m->tcap - 1);
}

/* Twice the name slots (1024 at first), every name placed again. */
static void tgrow(struct ncf_idmap *m)
{
	struct ncf_idmap_slot *old = m->tslots;
	size_t old_cap = m->tcap;
	m->tcap = old_cap ? old_cap * 2 : 1024;
	m->tslots = ncf_xcalloc(m->tcap, sizeof *m->tslots);
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].val) {
			size_t len;
			const char *s = ncf_names_at(&m->names, old[i].val - 1, &len);
			size_t h = tslot_of(m, ncf_siphash(m->key, s, len));
			while (m->tslots[h].val)
				h = (h + 1) & (m->tcap - 1);
			m->tslots[h] = old[i];
		}
	free(old);
}

uint32_t ncf_idmap_get_text(struct ncf_idmap *m, const char *s, size_t len)
{
	if (!m->names.n) /* the first name: every id so far gets its digits */
		for (uint32_t k = 0; k < m->count; k++)
			add_digits(m, m->ids[k]);
	if ((m->tused + 1) * 2 > m->tcap)
		tgrow(m);
	uint64_t hash = ncf_siphash(m->key, s, len);
	size_t h = tslot_of(m, hash);
	for (; m->tslots[h].val; h = (h + 1) & (m->tcap - 1)) {
		if (m->tslots[h].id != (uint32_t)(hash >> 32))
			continue;
		size_t n;
		const char *t = ncf_names_at(&m->names, m->tslots[h].val - 1, &n);
		if (n == len && !memcmp(t, s, len))
			return m->tslots[h].val - 1;
	}
	ncf_names_add(&m->names, s, len);
	uint32_t v = push_id(m, 0);
	m->tslots[h].id = (uint32_t)(hash >> 32);
	m->tslots[h].val = v + 1;
	m->tused++;
	return v;
}

void ncf_idmap_take_names(struct ncf_idmap *m, struct ncf_names *out)
{
	ncf_names_free(out);
	*out = m->names;
	memset(&m->names, 0, sizeof m->names);
}

uint32_t ncf_idmap_get_direct(struct ncf_idmap *m, uint32_t id)
{
	uint32_t **b = &m->direct[id >> NCF_IDMAP_BLOCK];
	if (!*b)
		*b = ncf_xcalloc((size_t)1 << NCF_IDMAP_BLOCK, sizeof **b);
	uint32_t *v = &(*b)[id & ((1u << NCF_IDMAP_BLOCK) - 1)];
	if (!*v)
		*v = new_index(m, id) + 1;
	return *v - 1;
}

uint32_t ncf_idmap_get_hashed(struct ncf_idmap *m, uint32_t id)
{
	if ((m->used + 1) * 2 > m->cap)
		grow(m);
	size_t h = slot_of(m, id);
	while (m->slots[h].val) {
		if (m->slots[h].id == id)
			return m->slots[h].val - 1;
		h = (h + 1) & (m->cap - 1);
	}
	uint32_t v = new_index(m, id);
	m->slots[h].id = id;
	m->slots[h].val = v + 1;
	m->used++;
	return v;
}

int64_t ncf_idmap_find(const struct ncf_idmap *m, uint32_t id)
{
	if (id < NCF_IDMAP_DIRECT) {
		const uint32_t *b = m->direct[id >> NCF_IDMAP_BLOCK];
		return b ? (int64_t)b[id & ((1u << NCF_IDMAP_BLOCK) - 1)] - 1 : -1;
	}
	if (!m->cap)
		return -1;
	for (size_t h = slot_of(m, id); m->slots[h].val; h = (h + 1) & (m->cap - 1))
		if (m->slots[h].id == id)
			return (int64_t)m->slots[h].val - 1;
	return -1;
}

uint32_t *ncf_idmap_take_ids(struct ncf_idmap *m)
{
	uint32_t *ids = m->ids;
	m->ids = NULL;
	m->ids_cap = 0;
	return ids;
}
