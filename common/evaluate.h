/*
 * evaluate.h - evaluation glue shared by ncf-train, ncf-eval and the
 * benchmarks: a cache's training data and candidates (with the candidate
 * mask) given to a backend, users split across ranks, metrics.  Tool-side
 * code over the public backend wrappers (backend.h).
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

#endif
