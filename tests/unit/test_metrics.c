/*
 * test_metrics - the evaluation rules (DESIGN.md section 5) and the Adam
 * update against answers computed by hand.
 */
#include <math.h>
#include <stdlib.h>

#include "backend_impl.h"
#include "metrics.h"
#include "ncf_hd.h"
#include "tap.h"

/* Candidates of one user and the rank of its positive among them. */
static void t_mask_and_rank(void)
{
	/* Candidates of one user: positive 5; negatives with a duplicate (3
	 * twice) and the positive itself (5). */
	uint32_t pos[1] = {5};
	uint32_t neg[6] = {3, 7, 3, 5, 9, 2};
	uint8_t *mask = ncf_eval_mask(pos, neg, 1, 6, 10);
	tap_ok(mask[0] == 1 && mask[1] == 1 && mask[2] == 0 && mask[3] == 0 && mask[4] == 1 &&
		       mask[5] == 1,
	       "mask: a repeated negative and the positive itself are not counted");
	/* scores: positive 0.5; negatives 0.9 (3), 0.1 (7), 0.9 (3 again), 0.99 (5 = positive),
	 * 0.5 (9, a tie), 0.2 (2) */
	float sc[6] = {0.9f, 0.1f, 0.9f, 0.99f, 0.5f, 0.2f};
	uint32_t r = ncf_rank(0.5f, sc, mask, 6);
	tap_ok(r == 2, "rank counts the higher negative once and the tie against the positive: %u",
	       r);
	float low[6] = {0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
	tap_ok(ncf_rank(0.5f, low, mask, 6) == 0, "a positive above every negative has rank 0");
	float all[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
	tap_ok(ncf_rank(0.5f, all, mask, 6) == 4, "all tied: rank = counted negatives (4)");
	free(mask);
}

static void t_hr_ndcg(void)
{
	/* HR and NDCG: ranks 0, 2, 9, 10, 50 with K = 10:
	 * hits 3 of 5; NDCG = (1/log2(2) + 1/log2(4) + 1/log2(11)) / 5. */
	uint32_t ranks[5] = {0, 2, 9, 10, 50};
	double hr, ndcg;
	ncf_metrics_from_ranks(ranks, 5, 10, &hr, &ndcg);
	double want = (1.0 + 0.5 + 1.0 / log2(11.0)) / 5.0;
	tap_ok(tap_close(hr, 0.6, 0, 1e-15, "hr"), "HR@10 of ranks 0,2,9,10,50 is 0.6");
	tap_ok(tap_close(ndcg, want, 0, 1e-15, "ndcg"), "NDCG@10 is (1 + 1/2 + 1/log2 11)/5 = %.6f",
	       want);
	ncf_metrics_from_ranks(ranks, 5, 1, &hr, &ndcg);
	tap_ok(hr == 0.2 && ndcg == 0.2, "HR@1 and NDCG@1 count rank 0 only");
}

static void t_adam(void)
{
	/* Adam, PyTorch's formula, lr 0.0045, betas 0.25 0.5, eps 1e-8.
	 * Step 1, g = 0.5 from zero moments: m = 0.375, v = 0.125,
	 * m/bc1 = 0.5, sqrt(v/bc2) = 0.5: p -= 0.0045 * 0.5 / (0.5 + 1e-8). */
	struct ncf_hparams hp = {.lr = 0.0045f, .beta1 = 0.25f, .beta2 = 0.5f, .eps = 1e-8f};
	struct ncf_adam_k k;
	ncf_adam_constants(&hp, 1, &k);
	float p = 1.0f, m = 0, v = 0;
	ncf_adam_update(&p, &m, &v, 0.5f, &k);
	tap_ok(m == 0.375f && v == 0.125f, "step 1 moments 0.375, 0.125 (exact in binary)");
	tap_ok(tap_close(p, 1.0 - 0.0045 * 0.5 / (0.5 + 1e-8), 0, 1e-7, "p"),
	       "step 1 parameter 1 - 0.0045 (to float precision)");
	/* Step 2, g = -0.25: m = 0.25*0.375 - 0.75*0.25 = -0.09375,
	 * v = 0.5*0.125 + 0.5*0.0625 = 0.09375, bc1 = 0.9375, bc2 = 0.75:
	 * p += 0.0045 * 0.1 / (sqrt(0.125) + 1e-8). */
	float p1 = p;
	ncf_adam_constants(&hp, 2, &k);
	ncf_adam_update(&p, &m, &v, -0.25f, &k);
	tap_ok(m == -0.09375f && v == 0.09375f, "step 2 moments -0.09375, 0.09375");
	tap_ok(tap_close(p - p1, 0.0045 * 0.1 / (sqrt(0.125) + 1e-8), 1e-9, 1e-5, "dp"),
	       "step 2 moves the parameter by +0.0045 * 0.1 / sqrt(0.125)");
	/* A zero gradient with zero moments leaves the parameter alone. */
	float q = 2.0f, mq = 0, vq = 0;
	ncf_adam_update(&q, &mq, &vq, 0.0f, &k);
	tap_ok(q == 2.0f, "zero gradient, zero moments: no move");
}

static void t_bce_sigmoid(void)
{
	/* BCE and sigmoid: log(2) at 0; the stable form for large |x|. */
	tap_ok(tap_close(ncf_bce(0.0f, 1.0f), log(2.0), 0, 1e-6, "bce0"), "BCE(0, y) = log 2");
	tap_ok(tap_close(ncf_bce(-100.0f, 1.0f), 100.0, 0, 1e-6, "bce") &&
		       ncf_bce(100.0f, 1.0f) < 1e-30f && ncf_sigmoid(-100.0f) > 0.0f &&
		       ncf_sigmoid(100.0f) == 1.0f,
	       "BCE and sigmoid stay finite and exact at +-100");
}

int main(void)
{
	TEST(t_mask_and_rank(), "evaluation mask and rank: repeats once, ties against the positive");
	TEST(t_hr_ndcg(), "HR@K and NDCG@K from ranks");
	TEST(t_adam(), "Adam: PyTorch's update, two steps by hand");
	TEST(t_bce_sigmoid(), "BCE with logits and sigmoid, stable at the extremes");
	return tap_done();
}
