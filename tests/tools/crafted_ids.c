/*
 * crafted_ids - ratings whose ids are chosen to collide in a hash table,
 * and random ones to compare them with (make bench's ncf-prep rows, the
 * hostile-input tests, the prep fuzzer's dictionary and seed).
 *
 *   crafted_ids crafted N     ml-20m CSV: N users (one rating each) whose
 *                             ids collide under the unkeyed mix ncf-prep
 *                             hashed large ids with before its id map was
 *                             keyed (below)
 *   crafted_ids random N [S]  the same with N distinct random ids (seed S)
 *   crafted_ids fuzz-dict N   N ids that collide under the fuzzers' pinned
 *                             key (tests/fuzz/fuzz_key.h), as libFuzzer
 *                             dictionary lines
 *   crafted_ids fuzz-csv N    ml-20m CSV of those ids as users and items
 *
 * The old mix, hash32 (x ^= x >> 16; x *= 0x45d9f3b; x ^= x >> 16), is a
 * public bijection of 32-bit values: inverting it gives, for any hash
 * value, the one id that has it.  Asking for hash values whose low 20
 * bits lie in [0, 64) puts every id in the same 64 slots of any table of
 * up to 2^20 slots, so that linear probing walks one run that grows with
 * each id: N ids cost N^2 / 2 probes.  Every id is at least 2^22 (ids
 * below are table entries, not hashed).  Under ncf's keyed map
 * (common/idmap.h) the same ids land where any ids would.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/fuzz_key.h"
#include "hash.h"
#include "idmap.h"

#define WINDOW_BITS 20 /* tables of up to 2^20 slots */
#define WINDOW 64      /* hash values land in [0, 64) of them */

static uint32_t unmix_xorshift(uint32_t x)
{
	return x ^ (x >> 16); /* x ^= x >> 16 undoes itself on 32 bits */
}

/* The inverse of an odd a modulo 2^32 (Newton's iteration). */
static uint32_t inverse_odd(uint32_t a)
{
	uint32_t x = a;
	for (int i = 0; i < 5; i++)
		x *= 2 - a * x;
	return x;
}

/* The id whose old hash32 is h. */
static uint32_t old_hash_preimage(uint32_t h)
{
	static uint32_t inv;
	if (!inv)
		inv = inverse_odd(0x45d9f3bu);
	return unmix_xorshift(unmix_xorshift(h) * inv);
}

static uint32_t old_hash32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x45d9f3bu;
	x ^= x >> 16;
	return x;
}

/* A bijection of 32-bit values (murmur3's finaliser): distinct k give
 * distinct ids. */
static uint32_t fmix32(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

static void header(void)
{
	puts("userId,movieId,rating,timestamp");
}

/* One rating of user id: an item among 100 small ids, a rising time. */
static void rating(uint32_t id, uint64_t k)
{
	printf("%u,%u,4.0,%llu\n", id, (unsigned)(k % 100) + 1,
	       (unsigned long long)(1000000000 + k));
}

static int crafted(uint64_t n)
{
	header();
	uint64_t k = 0;
	for (uint32_t hi = 0; k < n && hi < (1u << (32 - WINDOW_BITS)); hi++)
		for (uint32_t lo = 0; k < n && lo < WINDOW; lo++) {
			uint32_t h = hi << WINDOW_BITS | lo;
			uint32_t id = old_hash_preimage(h);
			if (old_hash32(id) != h) {
				fprintf(stderr, "crafted_ids: the inverse is wrong at %u\n", h);
				return 1;
			}
			if (id < NCF_IDMAP_DIRECT)
				continue;
			rating(id, k++);
		}
	return k == n ? 0 : 1;
}

static int random_ids(uint64_t n, uint32_t seed)
{
	header();
	uint64_t k = 0;
	for (uint32_t x = seed * 2654435761u; k < n; x++) {
		uint32_t id = fmix32(x);
		if (id >= NCF_IDMAP_DIRECT)
			rating(id, k++);
	}
	return 0;
}

/* The next id above *from that lands in the last slot of a 1024-slot
 * table under the fuzzers' key (probing from there wraps to slot 0). */
static uint32_t fuzz_collider(uint32_t *from)
{
	for (;;) {
		uint32_t id = (*from)++;
		if ((ncf_siphash_u32(FUZZ_HASH_KEY, id) & 1023) == 1023)
			return id;
	}
}

static int fuzz_ids(uint64_t n, int dict)
{
	uint32_t from = NCF_IDMAP_DIRECT;
	if (!dict)
		header();
	for (uint64_t k = 0; k < n; k++) {
		uint32_t id = fuzz_collider(&from);
		if (dict)
			printf("\"%u\"\n", id);
		else
			printf("%u,%u,4.0,%llu\n", id, fuzz_collider(&from),
			       (unsigned long long)(1000 + k));
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: crafted_ids crafted|random|fuzz-dict|fuzz-csv N [SEED]\n");
		return 2;
	}
	char *end;
	uint64_t n = strtoull(argv[2], &end, 10);
	uint32_t seed = argc == 4 ? (uint32_t)strtoul(argv[3], NULL, 10) : 1;
	if (*end || n > (1u << 28)) {
		fprintf(stderr, "crafted_ids: N '%s' is not a count up to 2^28\n", argv[2]);
		return 2;
	}
	int rc;
	if (!strcmp(argv[1], "crafted"))
		rc = crafted(n);
	else if (!strcmp(argv[1], "random"))
		rc = random_ids(n, seed);
	else if (!strcmp(argv[1], "fuzz-dict"))
		rc = fuzz_ids(n, 1);
	else if (!strcmp(argv[1], "fuzz-csv"))
		rc = fuzz_ids(n, 0);
	else {
		fprintf(stderr, "crafted_ids: unknown mode '%s'\n", argv[1]);
		return 2;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		perror("crafted_ids: stdout");
		return 1;
	}
	return rc;
}
