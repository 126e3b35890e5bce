/*
 * test_metrics - the evaluation rules (DESIGN.md section 5) and the Adam
 * update against answers computed by hand; a given split's candidates
 * (duplicates, the positive among the negatives) evaluated through a
 * backend as NVIDIA's BYO evaluation counts them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "cache.h"
#include "evaluate.h"
#include "metrics.h"
#include "model.h"
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

/*
 * NVIDIA's BYO evaluation (ncf.py val_epoch, dataloading.py TestDataLoader)
 * of one series of n candidates (items, labels, probabilities), written as
 * it does it: sort by item - label / 2 (the positive before a negative of
 * the same item), mask every item equal to the one before it, give masked
 * candidates the score -1, take the top k by score, and count the series a
 * hit at position j when the positive is the j-th of them.  Returns j, or
 * -1 for no hit.
 */
static int nvidia_hit(const uint32_t *items, const int *labels, const float *p, int n, int k)
{
	int order[16], masked[16];
	for (int j = 0; j < n; j++)
		order[j] = j;
	for (int a = 1; a < n; a++) /* insertion sort by item - label / 2 */
		for (int b = a; b > 0; b--) {
			double wb = items[order[b]] - 0.5 * labels[order[b]];
			double wa = items[order[b - 1]] - 0.5 * labels[order[b - 1]];
			if (wa <= wb)
				break;
			int t = order[b];
			order[b] = order[b - 1];
			order[b - 1] = t;
		}
	float r[16];
	for (int j = 0; j < n; j++) {
		masked[order[j]] = j > 0 && items[order[j]] == items[order[j - 1]];
		r[order[j]] = masked[order[j]] ? -1.0f : p[order[j]];
	}
	/* top k: the positive's place among them is the candidates above it */
	int pos = 0;
	while (labels[pos] != 1)
		pos++;
	int above = 0;
	for (int j = 0; j < n; j++)
		above += j != pos && r[j] > r[pos];
	return above < k ? above : -1;
}

/* A given split (split_given; every user N given negatives, duplicates and
 * the positive among them kept as given) on a small model: ncf's HR@K and
 * NDCG@K through the cpu backend equal NVIDIA's count of the same
 * candidates and probabilities, K 1, 3 and 5. */
static void t_given_split(void)
{
	enum { U = 4, I = 12, N = 6 };
	static int64_t offsets[U + 1] = {0, 2, 3, 5, 6};
	static uint32_t train[6] = {0, 1, 2, 3, 4, 5}, entry_user[6] = {0, 0, 1, 2, 2, 3};
	static uint32_t test[U] = {6, 7, 8, 9};
	static uint32_t neg[U * N] = {
		10, 6, 11, 10, 3, 2,  /* the positive itself; 10 twice */
		11, 11, 11, 0, 1, 2,  /* 11 three times */
		8, 8, 4, 5, 6, 7,     /* the positive twice, first */
		1, 2, 3, 4, 5, 10,    /* plain */
	};
	static uint32_t uids[U] = {1, 2, 3, 4}, iids[I];
	for (uint32_t i = 0; i < I; i++)
		iids[i] = 100 + i;
	struct ncf_cache c;
	memset(&c, 0, sizeof c);
	c.users = U, c.items = I, c.train_positives = 6, c.eval_negatives = N, c.split_given = 1;
	c.user_ids = uids, c.item_ids = iids, c.offsets = offsets, c.train_items = train;
	c.test_items = test, c.eval_neg = neg, c.entry_user = entry_user;
	struct ncf_shape s = {U, I, 4, 3, {8, 6, 4}};
	struct ncf_hparams hp;
	ncf_hparams_nvidia(&hp);
	struct ncf_dist one = {.rank = 0, .size = 1, .local_size = 1};
	struct ncf_backend be;
	if (!tap_ok(ncf_backend_open_impl(&be, &ncf_backend_cpu, &s, &hp, NCF_PRECISION_FP32, 1,
					  &one) == 0,
		    "open the cpu backend"))
		return;
	float *params = malloc(be.layout.total * sizeof *params);
	ncf_model_init(&s, &be.layout, 3, params);
	uint8_t *mask = NULL;
	int ok = ncf_backend_set_state(&be, params, NULL, NULL) == 0 &&
		 ncf_backend_load_cache(&be, &c, &mask, 0) == 0;
	const uint32_t ks[3] = {1, 3, 5};
	double hr[3], ndcg[3];
	ok = ok && ncf_evaluate_ks(&be, &c, ks, 3, hr, ndcg) == 0;
	tap_ok(ok, "evaluated");
	static const uint8_t want_mask[U * N] = {1, 0, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1,
						 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
	tap_ok(ok && !memcmp(mask, want_mask, sizeof want_mask),
	       "counted once: a repeated negative, a negative equal to the positive never");
	for (int kk = 0; kk < 3 && ok; kk++) {
		double h = 0, g = 0;
		for (uint32_t u = 0; u < U; u++) {
			uint32_t us[N + 1], its[N + 1];
			int lab[N + 1];
			float p[N + 1];
			for (int j = 0; j <= N; j++) {
				us[j] = u;
				its[j] = j ? neg[u * N + j - 1] : test[u];
				lab[j] = j == 0;
			}
			ok &= ncf_backend_score(&be, us, its, N + 1, p) == 0;
			int at = nvidia_hit(its, lab, p, N + 1, (int)ks[kk]);
			if (at >= 0) {
				h += 1;
				g += log(2.0) / log(at + 2.0);
			}
		}
		tap_ok(ok && tap_close(hr[kk], h / U, 0, 1e-12, "hr") &&
			       tap_close(ndcg[kk], g / U, 1e-12, 1e-12, "ndcg"),
		       "K %u: HR %.4f, NDCG %.4f as NVIDIA's count", ks[kk], h / U, g / U);
		tap_diag("K %u: HR %.4f NDCG %.4f; NVIDIA's count %.4f %.4f", ks[kk], hr[kk],
			 ndcg[kk], h / U, g / U);
	}
	free(mask);
	free(params);
	ncf_backend_close(&be);
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
	TEST(t_given_split(), "a given split's candidates (duplicates, the positive among them) "
			      "count as NVIDIA's BYO evaluation counts them");
	TEST(t_adam(), "Adam: PyTorch's update, two steps by hand");
	TEST(t_bce_sigmoid(), "BCE with logits and sigmoid, stable at the extremes");
	return tap_done();
}
