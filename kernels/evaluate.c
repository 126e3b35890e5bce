/* evaluate.c - see evaluate.h. */
#include <stdlib.h>

#include "err.h"
#include "evaluate.h"
#include "metrics.h"

int ncf_backend_load_cache(struct ncf_backend *be, const struct ncf_cache *c, uint8_t **mask,
			   int with_train)
{
	if (with_train) {
		struct ncf_train_data td = {
			.users = c->users,
			.items = c->items,
			.positives = c->train_positives,
			.offsets = c->offsets,
			.items_csr = c->train_items,
			.entry_user = c->entry_user,
			.train_negatives = c->train_negatives,
			.neg_offsets = c->neg_offsets,
			.neg_items = c->neg_items,
		};
		if (ncf_backend_set_train_data(be, &td) != 0)
			return -1;
	}
	*mask = ncf_eval_mask(c->test_items, c->eval_neg, c->users, c->eval_negatives, c->items);
	struct ncf_eval_data ed = {
		.users = c->users,
		.negatives = c->eval_negatives,
		.test_items = c->test_items,
		.neg = c->eval_neg,
		.counted = *mask,
	};
	return ncf_backend_set_eval_data(be, &ed);
}

int ncf_evaluate(struct ncf_backend *be, const struct ncf_cache *c, uint32_t topk, double *hr,
		 double *ndcg)
{
	return ncf_evaluate_ks(be, c, &topk, 1, hr, ndcg);
}

int ncf_evaluate_ks(struct ncf_backend *be, const struct ncf_cache *c, const uint32_t *topk,
		    int nk, double *hr, double *ndcg)
{
	struct ncf_dist *d = be->dist;
	uint32_t *ranks = ncf_xmalloc(((size_t)c->users + 1) * sizeof *ranks);
	int *counts = ncf_xmalloc((size_t)d->size * sizeof *counts);
	for (int r = 0; r < d->size; r++) {
		uint64_t lo, hi;
		ncf_dist_slice(c->users, r, d->size, &lo, &hi);
		counts[r] = (int)(hi - lo);
	}
	uint64_t lo, hi;
	ncf_dist_slice(c->users, d->rank, d->size, &lo, &hi);
	uint32_t *mine = ncf_xmalloc((hi - lo + 1) * sizeof *mine);
	int rc = -1;
	int bad = hi > lo && ncf_backend_eval_ranks(be, (uint32_t)lo, (uint32_t)hi, mine) != 0;
	if (ncf_dist_max_int(d, bad)) /* every rank stops, none waits */
		goto out;
	if (ncf_dist_allgather_u32(d, mine, counts, ranks) != 0)
		goto out;
	for (int k = 0; k < nk; k++)
		ncf_metrics_from_ranks(ranks, c->users, topk[k], &hr[k], &ndcg[k]);
	rc = 0;
out:
	free(mine);
	free(counts);
	free(ranks);
	return rc;
}
