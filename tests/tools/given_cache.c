/*
 * given_cache OUT.ncfc - a small cache whose split and candidates were
 * given (as NVIDIA's feature spec or the NCF paper's files give them) and
 * which holds explicit training negatives, written through the cache
 * writer (its source format the feature spec's, as a given split's must
 * be), for tests/cli/given-eval.t.  Then it reads the file back and prints
 * what the format kept, as key<TAB>value lines:
 *
 *   split_given      1 when the cache says its candidates were given
 *   train_negatives  E, the explicit negatives that came back
 *
 * The data: 4 users (ids 1..4), 10 items (ids 101..110), 3 training
 * positives each, every user 5 given negative candidates: user 1's hold
 * its positive, user 2's one item three times, user 3's its positive
 * twice, user 4's none of that; explicit negatives: users 1, 2 and 4,
 * in no order, one item twice.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "err.h"

enum { U = 4, I = 10, N = 5, P = 12, E = 7 };

int main(int argc, char **argv)
{
	ncf_set_progname("given_cache");
	if (argc != 2) {
		fprintf(stderr, "usage: given_cache OUT.ncfc\n");
		return 2;
	}
	static uint32_t uids[U] = {1, 2, 3, 4};
	static uint32_t iids[I] = {101, 102, 103, 104, 105, 106, 107, 108, 109, 110};
	static int64_t offsets[U + 1] = {0, 3, 6, 9, 12};
	static uint32_t train[P] = {0, 1, 2, 3, 4, 5, 0, 6, 7, 1, 8, 9};
	static uint32_t test[U] = {9, 0, 2, 4};
	static uint32_t neg[U * N] = {
		3, 9, 4, 5, 6, /* its positive (item 110) among them */
		7, 7, 8, 9, 7, /* item 108 three times */
		2, 3, 4, 2, 5, /* its positive (item 103) twice, first */
		0, 2, 3, 5, 6,
	};
	static int64_t neg_offsets[U + 1] = {0, 2, 5, 5, 7};
	static uint32_t neg_items[E] = {8, 4, 1, 9, 1, 3, 0};
	struct ncf_cache c;
	memset(&c, 0, sizeof c);
	c.users = U, c.items = I, c.train_positives = P, c.eval_negatives = N;
	c.seed = 1, c.format = NCF_FORMAT_FEATURE_SPEC, c.source_bytes = 1, c.ratings_read = P + U;
	c.oracle_hr = NAN;
	c.split_given = 1;
	c.train_negatives = E;
	c.user_ids = uids, c.item_ids = iids, c.offsets = offsets, c.train_items = train;
	c.test_items = test, c.eval_neg = neg;
	c.neg_offsets = neg_offsets, c.neg_items = neg_items;
	if (ncf_cache_write(&c, argv[1]) != 0)
		return 1;
	struct ncf_cache back;
	if (ncf_cache_read(argv[1], &back) != 0)
		return 1;
	printf("split_given\t%u\ntrain_negatives\t%llu\n", back.split_given,
	       (unsigned long long)back.train_negatives);
	ncf_cache_free(&back);
	return 0;
}
