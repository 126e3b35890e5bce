/*
 * fuzz_given.c - libFuzzer harness of the splits given with the data:
 * NVIDIA's feature spec (ncf-prep/spec.c: the YAML through libyaml and
 * the CSV files it names) and the NCF paper's files (paper.c), the rules
 * they share (given.c), the protocol's given way in (protocol.c) and the
 * cache writer and reader.
 *
 * Input: byte 0 picks the kind (even: a feature spec, odd: the paper's
 * files); the rest is cut at each "\n%%\n" into the files: for a feature
 * spec d/feature_spec.yaml, then d/a.csv, d/b.csv, d/c.csv, d/d.csv; for
 * the paper p/x.train.rating, p/x.test.rating, p/x.test.negative.  A
 * file the input does not hold is missing (refused as ncf_in_open
 * refuses a missing file).  Odd-sized files are read as regular files,
 * even-sized ones as pipes.
 *
 * Invariants: a refusal is one message that starts with "fuzz: " and
 * the name of a file (one of the input's, or one its YAML names); what is accepted has every user with its
 * series of the same length; the cache the protocol makes is one the
 * reader accepts (version 2, split_given, explicit negatives as read),
 * and its counts add up.
 */
#include <math.h>
#include <omp.h>

#include "cache.h"
#include "fuzz.h"
#include "fuzz_key.h"
#include "given.h"
#include "paper.h"
#include "protocol.h"
#include "spec.h"

#define MAX_PARTS 5

static const char *const SPEC_NAMES[MAX_PARTS] = {"d/feature_spec.yaml", "d/a.csv", "d/b.csv",
						  "d/c.csv", "d/d.csv"};
static const char *const PAPER_NAMES[MAX_PARTS] = {"p/x.train.rating", "p/x.test.rating",
						   "p/x.test.negative", NULL, NULL};

struct parts {
	const char *const *names;
	const uint8_t *d[MAX_PARTS];
	size_t n[MAX_PARTS];
	int count;
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	omp_set_num_threads(1);
	ncf_hash_key_pin(FUZZ_HASH_KEY);
	return 0;
}

static FILE *open_part(void *ctx, const char *path, const char **display)
{
	struct parts *p = ctx;
	*display = path;
	for (int k = 0; k < MAX_PARTS && p->names[k]; k++)
		if (!strcmp(path, p->names[k]) && k < p->count)
			return fuzz_open_either(p->d[k], p->n[k]);
	ncf_error("%s: No such file or directory", path);
	return NULL;
}

static void close_part(void *ctx, FILE *fp)
{
	(void)ctx;
	fclose(fp);
}

/* The input after byte 0 cut into parts at "\n%%\n" (the first \n kept
 * with the part before it). */
static void cut(const uint8_t *d, size_t n, struct parts *p)
{
	p->count = 0;
	size_t start = 0;
	for (size_t i = 0; p->count < MAX_PARTS - 1 && i + 4 <= n; i++)
		if (!memcmp(d + i, "\n%%\n", 4)) {
			p->d[p->count] = d + start;
			p->n[p->count++] = i + 1 - start;
			start = i + 4;
			i += 3;
		}
	p->d[p->count] = d + start;
	p->n[p->count++] = n - start;
}

static void write_and_read_back(const struct ncf_cache *c)
{
	char *buf;
	struct ncf_cache r;
	fuzz_cache_round_trip(c, "<cache>", &r, &buf);
	FUZZ_ASSERT(r.users == c->users && r.items == c->items && r.split_given == 1 &&
			    r.train_negatives == c->train_negatives &&
			    r.eval_negatives == c->eval_negatives &&
			    ncf_cache_version(&r) == NCF_CACHE_VERSION_GIVEN,
		    "read back differently");
	ncf_cache_free(&r);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct parts p = {.names = data[0] % 2 ? PAPER_NAMES : SPEC_NAMES};
	cut(data + 1, size - 1, &p);
	struct prep_opener op = {open_part, close_part, &p};
	fuzz_messages_reset();
	struct prep_given g;
	prep_given_init(&g);
	int rc = data[0] % 2 ? prep_paper_read("p/x", &op, &g)
			     : prep_spec_read("d/feature_spec.yaml", &op, &g);
	if (rc != 0) {
		fuzz_check_refusal();
		/* a file of the input, or one the YAML names (beside it, or absolute) */
		const char *m = fuzz_last_message + 6;
		FUZZ_ASSERT(!strncmp(m, data[0] % 2 ? "p/" : "d/", 2) || m[0] == '/',
			    "the message names no file: '%s'", fuzz_last_message);
		prep_given_free(&g);
		return 0;
	}
	FUZZ_ASSERT(g.U >= 1 && g.series == g.U && g.N >= 1, "users %u, series %llu, N %u", g.U,
		    (unsigned long long)g.series, g.N);
	struct ncf_cache c;
	memset(&c, 0, sizeof c);
	c.oracle_hr = NAN;
	c.format = data[0] % 2 ? NCF_FORMAT_NCF_PAPER : NCF_FORMAT_FEATURE_SPEC;
	uint64_t pos_rows = g.pos.n;
	size_t n_neg = g.n_neg;
	FUZZ_ASSERT(prep_protocol_run_given(&g, &c) == 0, "the protocol refused: %s",
		    fuzz_last_message);
	prep_given_free(&g);
	FUZZ_ASSERT(c.ratings_read == pos_rows + c.users && c.train_negatives == n_neg &&
			    (uint64_t)c.train_positives + c.duplicates_dropped == pos_rows,
		    "counts");
	write_and_read_back(&c);
	ncf_cache_free(&c);
	return 0;
}
