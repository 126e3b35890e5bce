/*
 * evaluate.h - a backend driven through a cache, for ncf-train, ncf-eval
 * and the benchmarks: the cache's training data and candidates (with the
 * candidate mask) given to it, users split across ranks, metrics.  Built
 * on the public wrappers only (backend.h), beside them, so that common/
 * (the cache, metrics, dist) never calls a backend.
 */
#ifndef NCF_EVALUATE_H
#define NCF_EVALUATE_H

#include "backend.h"
#include "cache.h"

/* Give the backend the cache's training data and candidates; keeps the
 * mask it builds in *mask (free it after the backend).  Returns 0 or -1. */
int ncf_backend_load_cache(struct ncf_backend *be, const struct ncf_cache *c, uint8_t **mask,
			   int with_train);

/* HR@topk and NDCG@topk over every user of the cache, users split across
 * ranks; every rank gets the result.  Returns 0 or -1. */
int ncf_evaluate(struct ncf_backend *be, const struct ncf_cache *c, uint32_t topk, double *hr,
		 double *ndcg);
/* The same for each of the nk values of topk (ranked once): hr[k] and
 * ndcg[k] for topk[k].  Returns 0 or -1. */
int ncf_evaluate_ks(struct ncf_backend *be, const struct ncf_cache *c, const uint32_t *topk,
		    int nk, double *hr, double *ndcg);

#endif
