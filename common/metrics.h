/*
 * metrics.h - HR@K and NDCG@K under the evaluation rules of DESIGN.md
 * section 5, shared by ncf-prep (oracle), ncf-train, ncf-eval and the
 * backends.
 *
 * Per user: the test positive and N negatives.  A negative counts unless it
 * equals the positive or repeats an earlier negative.  rank = number of
 * counted negatives scoring higher than the positive or equal to it (ties
 * go against the positive).  HR@K = mean of [rank < K]; NDCG@K = mean of
 * 1/log2(rank + 2) over hits.
 */
#ifndef NCF_METRICS_H
#define NCF_METRICS_H

#include <stdint.h>

#include "ncf_hd.h"

/*
 * Which negatives count, as a mask (U, N): 1 for counted.  neg is (U, N),
 * pos (U); n_items sizes its scratch table.
 */
uint8_t *ncf_eval_mask(const uint32_t *pos, const uint32_t *neg, uint32_t U, uint32_t N,
		       uint32_t n_items);

/* rank of the positive given its score and the negatives' (N) scores. */
NCF_HD uint32_t ncf_rank(float pos_score, const float *neg_scores, const uint8_t *counted,
			 uint32_t N)
{
	uint32_t r = 0;
	for (uint32_t k = 0; k < N; k++)
		r += counted[k] && neg_scores[k] >= pos_score;
	return r;
}

/* Mean HR@topk and NDCG@topk over ranks (n); sums in index order, so the
 * result does not depend on how the ranks were computed. */
void ncf_metrics_from_ranks(const uint32_t *ranks, uint32_t n, uint32_t topk, double *hr,
			    double *ndcg);

#endif
