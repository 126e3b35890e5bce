/*
 * test_idmap - the keyed hash (common/hash.c) against SipHash's published
 * vectors, the id map (common/idmap.c: indices in order of first
 * appearance, whatever the key, ids that all share one slot) and the
 * inverse index of ncf-infer (common/idindex.c) against a plain search.
 */
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "idindex.h"
#include "idmap.h"
#include "tap.h"

static const struct ncf_hash_key key_0f = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};

/* SipHash-2-4 with key 00..0f on the messages 00..(n-1): the reference
 * implementation's vectors for n = 0, 1, and the paper's for n = 15. */
static void t_siphash_vectors(void)
{
	unsigned char msg[16];
	for (int i = 0; i < 16; i++)
		msg[i] = (unsigned char)i;
	TAP_CHECK(ncf_siphash_rounds(key_0f, msg, 0, 2, 4) == 0x726fdb47dd0e0e31ull);
	TAP_CHECK(ncf_siphash_rounds(key_0f, msg, 1, 2, 4) == 0x74f839c593dc67fdull);
	TAP_CHECK(ncf_siphash_rounds(key_0f, msg, 15, 2, 4) == 0xa129ca6149be45e5ull);
}

/* The one-block path of a 32-bit id is the general one on its 4 bytes. */
static void t_siphash_u32(void)
{
	int bad = 0;
	for (uint32_t k = 0; k < 1000; k++) {
		struct ncf_hash_key key = {k * 0x9e3779b97f4a7c15ull, ~(uint64_t)k};
		uint32_t x = k * 2654435761u;
		unsigned char b[4] = {(unsigned char)x, (unsigned char)(x >> 8),
				      (unsigned char)(x >> 16), (unsigned char)(x >> 24)};
		bad += ncf_siphash_u32(key, x) != ncf_siphash(key, b, 4);
	}
	tap_ok(bad == 0, "ncf_siphash_u32(x) == ncf_siphash(le32(x)): %d of 1000 differ", bad);
	struct ncf_hash_key a = ncf_hash_key(), b = ncf_hash_key();
	tap_ok(a.k0 == b.k0 && a.k1 == b.k1 && (a.k0 | a.k1) != 0,
	       "the process's key is drawn once (and is not zero)");
}

/* ids (n) through a new map: their indices into idx. */
static void index_all(const uint32_t *ids, size_t n, uint32_t *idx, struct ncf_idmap *m)
{
	ncf_idmap_init(m);
	for (size_t k = 0; k < n; k++)
		idx[k] = ncf_idmap_get(m, ids[k]);
}

/* Small and large ids, repeats: indices by first appearance, find, and
 * the same indices under another key. */
static void t_first_appearance(void)
{
	enum { N = 20000 };
	uint32_t *ids = malloc(N * sizeof *ids), *a = malloc(N * sizeof *a),
		 *b = malloc(N * sizeof *b);
	for (size_t k = 0; k < N; k++) {
		uint32_t r = (uint32_t)(k * 2654435761u) % 7000; /* repeats */
		ids[k] = r % 3 ? NCF_IDMAP_DIRECT + r * 611953u : r;
	}
	struct ncf_idmap m;
	ncf_hash_key_pin((struct ncf_hash_key){1, 2});
	index_all(ids, N, a, &m);
	int bad = 0;
	uint32_t next = 0;
	for (size_t k = 0; k < N; k++) {
		bad += a[k] > next || m.ids[a[k]] != ids[k] || ncf_idmap_find(&m, ids[k]) != a[k];
		next += a[k] == next;
	}
	tap_ok(bad == 0 && next == m.count, "indices by first appearance, found again (%d bad)",
	       bad);
	TAP_CHECK(ncf_idmap_find(&m, 6999 * 611953u + 1) == -1 && ncf_idmap_find(&m, 7001) == -1);
	uint32_t count = m.count;
	uint32_t *list = ncf_idmap_take_ids(&m);
	TAP_CHECK(list && list[0] == ids[0] && m.ids == NULL);
	free(list);
	ncf_idmap_free(&m);
	ncf_hash_key_pin((struct ncf_hash_key){0xdeadbeef, 42});
	index_all(ids, N, b, &m);
	tap_ok(!memcmp(a, b, N * sizeof *a) && m.count == count,
	       "the same indices under another key");
	ncf_idmap_free(&m);
	free(ids), free(a), free(b);
}

/* 2000 large ids that all hash to the last slot of every table up to 4096
 * slots (the table's size for them): one run that wraps around, through
 * every growth; each id keeps its index. */
static void t_one_slot(void)
{
	enum { N = 2000 };
	struct ncf_hash_key key = {0x1234, 0x5678};
	ncf_hash_key_pin(key);
	uint32_t *ids = malloc(N * sizeof *ids);
	uint32_t id = NCF_IDMAP_DIRECT;
	for (size_t k = 0; k < N; id++)
		if ((ncf_siphash_u32(key, id) & 4095) == 4095)
			ids[k++] = id;
	struct ncf_idmap m;
	ncf_idmap_init(&m);
	int bad = 0;
	for (size_t k = 0; k < N; k++)
		bad += ncf_idmap_get(&m, ids[k]) != k;
	for (size_t k = 0; k < N; k++)
		bad += ncf_idmap_get(&m, ids[k]) != k || ncf_idmap_find(&m, ids[k]) != (int64_t)k;
	tap_ok(bad == 0 && m.cap == 4096 && m.count == N,
	       "2000 ids in one slot: each keeps its index (%d bad, %zu slots)", bad, m.cap);
	ncf_idmap_free(&m);
	free(ids);
}

/* The lowest k with ids[k] == id (n ids), or -1. */
static int64_t lowest(const uint32_t *ids, size_t n, uint32_t id)
{
	for (size_t k = 0; k < n; k++)
		if (ids[k] == id)
			return (int64_t)k;
	return -1;
}

/* The inverse index against a plain search: the lowest index of an id. */
static void t_idindex(void)
{
	enum { N = 5000 };
	uint32_t *ids = malloc(N * sizeof *ids);
	for (size_t k = 0; k < N; k++) /* repeats, and ids up to 2^32 - 1 */
		ids[k] = k % 10 == 3 ? UINT32_MAX - (uint32_t)(k % 7)
				     : (uint32_t)((k * 2654435761u) % 4000) << (k % 4 * 7);
	struct ncf_idindex x;
	ncf_idindex_init(&x, ids, N);
	int bad = 0;
	for (size_t k = 0; k < N; k++) {
		bad += ncf_idindex_find(&x, ids[k]) != lowest(ids, N, ids[k]);
		bad += ncf_idindex_find(&x, ids[k] + 1) != lowest(ids, N, ids[k] + 1);
	}
	tap_ok(bad == 0, "every id found at its lowest index, absent ones not (%d bad)", bad);
	ncf_idindex_free(&x);
	ncf_idindex_init(&x, ids, 0);
	TAP_CHECK(ncf_idindex_find(&x, 0) == -1);
	ncf_idindex_free(&x);
	free(ids);
}

/* Names and numbers in one map: one count in order of first appearance;
 * from the first name on every id has a name (a number its digits), the
 * numbers before it included; the names' index finds them all, and the
 * names sort as memcmp orders them. */
static void t_names(void)
{
	static const char *in[] = {"7", "u1", "8", "u2", "u1", "7", "00009", "x y", "9", "u10"};
	static const uint32_t want[] = {0, 1, 2, 3, 1, 0, 4, 5, 4, 6};
	static const char *names[] = {"7", "u1", "8", "u2", "9", "x y", "u10"};
	struct ncf_idmap m;
	ncf_idmap_init(&m);
	int bad = 0;
	for (size_t k = 0; k < sizeof in / sizeof in[0]; k++) {
		uint32_t v, idx;
		if (ncf_text_is_u32(in[k], strlen(in[k]), &v))
			idx = ncf_idmap_get(&m, v);
		else
			idx = ncf_idmap_get_text(&m, in[k], strlen(in[k]));
		bad += idx != want[k];
	}
	tap_ok(bad == 0 && m.count == 7 && ncf_idmap_named(&m),
	       "indices by first appearance over numbers and names (%d bad)", bad);
	struct ncf_names nm = {0};
	ncf_idmap_take_names(&m, &nm);
	bad = nm.n != 7;
	for (uint32_t k = 0; k < nm.n && !bad; k++)
		bad += strcmp(ncf_names_at(&nm, k, NULL), names[k]) != 0;
	tap_ok(!bad, "every id's name, the numbers' as digits");
	struct ncf_idindex x;
	ncf_idindex_init_ids(&x, NULL, &nm, nm.n);
	for (uint32_t k = 0; k < nm.n; k++)
		bad += ncf_idindex_find_id(&x, ncf_id_from_text(names[k], strlen(names[k]))) != k;
	bad += ncf_idindex_find_id(&x, (struct ncf_id){NULL, 0, 9}) != 4;
	bad += ncf_idindex_find_id(&x, ncf_id_from_text("u", 1)) != -1;
	bad += ncf_idindex_find_id(&x, ncf_id_from_text("u100", 4)) != -1;
	tap_ok(!bad, "the names' index finds each, a number as its digits, not a prefix");
	ncf_idindex_free(&x);
	uint32_t order[7];
	ncf_names_sort(&nm, order);
	for (uint32_t k = 1; k < 7; k++)
		bad += strcmp(ncf_names_at(&nm, order[k - 1], NULL), ncf_names_at(&nm, order[k], NULL)) >= 0;
	tap_ok(!bad, "sorted by their bytes");
	ncf_names_free(&nm);
	ncf_idmap_free(&m);
	TAP_CHECK(ncf_name_check("", 0) && ncf_name_check("a\tb", 3) && ncf_name_check("07", 2) &&
		  ncf_name_check("+7", 2) && !ncf_name_check("7", 1) && !ncf_name_check("-7", 2) &&
		  !ncf_name_check("4294967296", 10));
}

/* 3000 names that all hash to one slot under a pinned key: each keeps
 * its index through every growth of the names' table. */
static void t_names_one_slot(void)
{
	enum { N = 3000 };
	struct ncf_hash_key key = {0x9abc, 0xdef0};
	ncf_hash_key_pin(key);
	char (*s)[16] = malloc(N * sizeof *s);
	size_t k = 0;
	for (uint64_t j = 0; k < N; j++) {
		char t[16];
		int n = snprintf(t, sizeof t, "n%llu", (unsigned long long)j);
		if ((ncf_siphash(key, t, (size_t)n) & 8191) == 0)
			memcpy(s[k++], t, sizeof t);
	}
	struct ncf_idmap m;
	ncf_idmap_init(&m);
	int bad = 0;
	for (int pass = 0; pass < 2; pass++)
		for (k = 0; k < N; k++)
			bad += ncf_idmap_get_text(&m, s[k], strlen(s[k])) != k;
	tap_ok(bad == 0 && m.count == N && m.tcap == 8192,
	       "3000 names in one slot: each keeps its index (%d bad, %zu slots)", bad, m.tcap);
	ncf_idmap_free(&m);
	free(s);
}

/* A person's line of ids where ids may be names (ncf_id_split): tabs,
 * else commas, else spaces between two; spaces around dropped; numbers
 * as numbers. */
static void t_id_split(void)
{
	struct ncf_id a, b;
	char ib[NCF_ID_BUF];
	TAP_CHECK(ncf_id_split("alice\tB 01", 2, &a, &b) == 0 && a.len == 5 && b.len == 4 &&
		  !memcmp(b.text, "B 01", 4));
	TAP_CHECK(ncf_id_split(" bob , 007 ", 2, &a, &b) == 0 && a.len == 3 && !b.text && b.num == 7);
	TAP_CHECK(ncf_id_split("  carol   x ", 2, &a, &b) == 0 && a.len == 5 && b.len == 1);
	TAP_CHECK(ncf_id_split("a b c", 2, &a, &b) == -1);
	TAP_CHECK(ncf_id_split("a\tb\tc", 2, &a, &b) == -1);
	TAP_CHECK(ncf_id_split("a,", 2, &a, &b) == -1);
	TAP_CHECK(ncf_id_split("alone", 2, &a, &b) == -1);
	TAP_CHECK(ncf_id_split(" B 01 ", 1, &a, &b) == 0 && a.len == 4);
	TAP_CHECK(ncf_id_split("42", 1, &a, &b) == 0 && !a.text &&
		  !strcmp(ncf_id_str(a, ib), "42"));
}

int main(void)
{
	TEST(t_siphash_vectors(), "SipHash-2-4 gives the published vectors");
	TEST(t_siphash_u32(), "the 32-bit path and the process key");
	TEST(t_first_appearance(), "the id map: first appearance, whatever the key");
	TEST(t_one_slot(), "the id map: ids that all share one slot");
	TEST(t_idindex(), "the inverse index against a plain search");
	TEST(t_names(), "names and numbers in one map, the names' index");
	TEST(t_names_one_slot(), "the id map: names that all share one slot");
	TEST(t_id_split(), "a person's line of ids that may be names");
	return tap_done();
}
