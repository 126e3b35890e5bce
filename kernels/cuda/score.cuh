/*
 * score.cuh - scoring and evaluation on the cuda backend: the forward pass
 * of (user, item) pairs without dropout, for pairs from the host, pairs
 * kept on the device, and each user's evaluation candidates.  See score.cu.
 */
#ifndef NCF_CUDA_SCORE_CUH
#define NCF_CUDA_SCORE_CUH

#include "state.cuh"

namespace NCF_CUDA_NS {

/* Logits or (prob) probabilities of n host pairs into out (host): pinned,
 * double-buffered transfers on their own streams overlapping the chunks'
 * compute, ids checked on the device (the first pair outside the model is
 * named).  Returns 0 or -1 (out is then undefined). */
int score_host(struct ncf_backend *be, struct cu *c, const uint32_t *users, const uint32_t *items,
	       size_t n, float *out, int prob);
/* Keep n pairs on the device (checked now).  Returns 0 or -1. */
int score_keep(struct ncf_backend *be, struct cu *c, const uint32_t *users, const uint32_t *items,
	       size_t n);
/* Score the first n kept pairs, waiting for the result (NVIDIA's
 * inference.py), into out (host) too when it is not NULL.  Returns 0 or -1. */
int score_kept(struct ncf_backend *be, struct cu *c, size_t n, float *out, int prob);
/* Ranks of users [u0, u1) among their candidates into ranks (host, u1 -
 * u0), the candidates made on the device.  Returns 0 or -1. */
int score_eval_ranks(struct ncf_backend *be, struct cu *c, uint32_t u0, uint32_t u1,
		     uint32_t *ranks);
void score_free(struct cu *c);

} /* namespace NCF_CUDA_NS */

#endif
