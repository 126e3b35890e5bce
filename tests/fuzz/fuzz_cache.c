/*
 * fuzz_cache.c - libFuzzer harness of the cache reader (ncf_cache_read_fp,
 * ncf-cache(5)).  Built plain (fuzz_cache: bytes as they come) and with
 * -DNCF_FUZZ_STRUCTURE (fuzz_cache_sa: the container mutator, which keeps
 * every checksum valid so that mutations reach the checks behind them).
 *
 * Invariants, beyond "no crash, no leak, no sanitizer report": a refused
 * file is refused with a message; an accepted cache is one every later
 * tool can index without a bound check (offsets from 0 to P, items, test
 * items and negatives below I), its --info prints, and written again it
 * reads back to the same arrays.
 */
#include <omp.h>

#include "cache.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	omp_set_num_threads(1);
	return 0;
}

static void check_accepted(const struct ncf_cache *c)
{
	FUZZ_ASSERT(c->users >= 1 && c->items >= 1 && c->offsets[0] == 0 &&
			    c->offsets[c->users] == c->train_positives,
		    "sizes");
	for (uint32_t u = 0; u < c->users; u++) {
		FUZZ_ASSERT(c->offsets[u] <= c->offsets[u + 1], "offsets of user %u", u);
		for (int64_t k = c->offsets[u]; k < c->offsets[u + 1]; k++)
			FUZZ_ASSERT(c->train_items[k] < c->items && c->entry_user[k] == u,
				    "entry %lld", (long long)k);
		FUZZ_ASSERT(c->test_items[u] < c->items, "test item of %u", u);
		for (uint32_t k = 0; k < c->eval_negatives; k++)
			FUZZ_ASSERT(c->eval_neg[(size_t)u * c->eval_negatives + k] < c->items,
				    "negative");
	}
	FILE *null = fopen("/dev/null", "w");
	ncf_cache_print_info(c, null);
	fclose(null);
	/* write it again and read it back */
	char *buf;
	struct ncf_cache r;
	fuzz_cache_round_trip(c, "<again>", &r, &buf);
	size_t U = c->users, P = (size_t)c->train_positives;
	FUZZ_ASSERT(r.users == c->users && r.items == c->items &&
			    r.train_positives == c->train_positives &&
			    !memcmp(r.user_ids, c->user_ids, 4 * U) &&
			    !memcmp(r.item_ids, c->item_ids, 4 * (size_t)c->items) &&
			    !memcmp(r.offsets, c->offsets, 8 * (U + 1)) &&
			    (!P || !memcmp(r.train_items, c->train_items, 4 * P)) &&
			    !memcmp(r.eval_neg, c->eval_neg, 4 * U * c->eval_negatives),
		    "the rewrite reads back differently");
	ncf_cache_free(&r);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_messages_reset();
	FILE *fp = fuzz_open_either(data, size);
	struct ncf_cache c;
	if (ncf_cache_read_fp(fp, "<fuzz>", &c) == 0) {
		check_accepted(&c);
		ncf_cache_free(&c);
	} else {
		fuzz_check_refusal();
	}
	fclose(fp);
	return 0;
}

#ifdef NCF_FUZZ_STRUCTURE
#include "container_mutator.h"

/* The width of the cache meta field at off (cache.c's table). */
static int cache_meta_width(size_t off)
{
	if (off < 8 || off == 16 || off == 20 || off == 32 || off == 36)
		return 4;
	if (off == 8 || off == 24 || (off >= 40 && off <= 104 && off % 8 == 0))
		return 8;
	if (off >= 112 && off < 256)
		return 4; /* the name and the reserved bytes */
	return 0;
}

/* A consistent smaller cache: the last user dropped (meta, ids, offsets,
 * training items, test items, negatives and counters), so that caches of
 * other sizes reach the checks on the arrays. */
static void drop_last_user(struct fz_file *f)
{
	if (f->n < 8 || f->s[0].size != 256)
		return;
	unsigned char *m = f->s[0].raw;
	uint32_t U = ncf_get_u32(m), N = ncf_get_u32(m + 16);
	if (U < 2 || f->s[3].size != 8 * ((size_t)U + 1) || f->s[1].size != 4 * (size_t)U ||
	    f->s[5].size != 4 * (size_t)U || f->s[6].size != 4 * (size_t)U * N)
		return;
	const unsigned char *off = f->s[3].raw;
	uint64_t P = ncf_get_u64(m + 8), P2 = ncf_get_u64(off + 8 * ((size_t)U - 1));
	if (P2 > P || f->s[4].size != 4 * P)
		return;
	int empty = ncf_get_u64(off + 8 * (size_t)U) == P2;
	ncf_put_u32(m, U - 1);
	ncf_put_u64(m + 8, P2);
	ncf_put_u64(m + 48, ncf_get_u64(m + 48) - (P - P2) - 1); /* ratings_read */
	ncf_put_u64(m + 88, ncf_get_u64(m + 88) - (uint64_t)empty);
	uint64_t ties = ncf_get_u64(m + 96);
	if (ties > U - 1 - ncf_get_u64(m + 88))
		ncf_put_u64(m + 96, U - 1 - ncf_get_u64(m + 88));
	fz_resize(&f->s[1], 4 * ((size_t)U - 1));
	fz_resize(&f->s[3], 8 * (size_t)U);
	fz_resize(&f->s[4], 4 * (size_t)P2);
	fz_resize(&f->s[5], 4 * ((size_t)U - 1));
	fz_resize(&f->s[6], 4 * ((size_t)U - 1) * N);
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned int seed)
{
	if (seed % 8 == 0) {
		struct fz_file f;
		if (fz_parse(data, size, &f) == 0) {
			fz_rng = seed * 0x9E3779B97F4A7C15ull + 7;
			drop_last_user(&f);
			uint8_t *out = malloc(max);
			size_t n = fz_write(&f, out, max);
			fz_free(&f);
			if (n) {
				memcpy(data, out, n);
				free(out);
				return n;
			}
			free(out);
		}
	}
	return fz_custom_mutate(data, size, max, seed, cache_meta_width);
}
#endif
