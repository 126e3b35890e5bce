/*
 * sample.cu - the sample stream generated on the device (ncf_sample_at per
 * position), and the evaluation candidates and their ranks (kernels.cuh).
 *
 * Every kernel here is "plain": each thread computes its own outputs from
 * global memory, with no shared memory, barriers or warp primitives, so the
 * same source runs on the CPU under NCF_CUDA_EMULATE (one thread at a time).
 */
#include "kernels.cuh"

extern "C" {
#include "metrics.h"
}

namespace NCF_CUDA_NS {

/* ---- sample stream ------------------------------------------------------ */

static constexpr launch_facts sample_facts = {BLOCK, 6};
__global__ void NCF_BOUNDS(sample_facts) sample_kernel(sample_src a, size_t n, sample_out o)
{
	size_t j = NCF_TID;
	if (j >= n)
		return;
	uint32_t u = 0, it = 0;
	int y = ncf_sample_at(&a.stream, a.pos0 + j, &u, &it);
	o.users[j] = u;
	o.items[j] = it;
	o.labels[j] = (uint8_t)y;
}

int sample_cuda(const sample_src &a, size_t n, const sample_out &o, cudaStream_t stream)
{
	int true_neg = a.stream.true_neg;
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	/* writes user, item, label; reads the entry's user (and item, for
	 * positives; the user's CSR row with --true-negatives; for an explicit
	 * negative a search of the negatives' row offsets and its item).  The
	 * chain: the entry's user and item at once; with --true-negatives a
	 * search of the user's CSR row, one round trip a step; an explicit
	 * negative's search of the U + 1 offsets likewise */
	double chain = true_neg ? 12 : 1, explicit_bytes = 0;
	if (a.stream.train_negatives) {
		int steps = 1; /* of the binary search over U + 1 offsets */
		while (steps < 32 && ((uint64_t)1 << steps) < (uint64_t)a.stream.users + 1)
			steps++;
		chain = chain > steps + 1 ? chain : steps + 1;
		explicit_bytes = (double)a.stream.train_negatives / (double)a.stream.perm.n *
				 (8.0 * steps + 4.0);
	}
	cost_shape sh = cost_shape_for(sample_facts, blocks, 8, chain);
	if (NCF_COST_SHAPED("sample", n * (9.0 + 8.0 + (true_neg ? 24.0 : 0.0) + explicit_bytes),
			    0, sh))
		return 0;
	NCF_LAUNCH(sample_kernel, blocks, BLOCK, 0, stream, a, n, o);
	return CUDA_CHECK(cudaGetLastError());
}

/* ---- evaluation ---------------------------------------------------------- */

static constexpr launch_facts eval_pairs_facts = {BLOCK, 8};
__global__ void NCF_BOUNDS(eval_pairs_facts) eval_pairs_kernel(uint32_t u0, uint32_t nu, uint32_t N,
				  const uint32_t *__restrict__ test, const uint32_t *__restrict__ neg,
				  uint32_t *__restrict__ su, uint32_t *__restrict__ si)
{
	size_t t = NCF_TID, per = (size_t)N + 1;
	if (t >= (size_t)nu * per)
		return;
	uint32_t u = u0 + (uint32_t)(t / per), c = (uint32_t)(t % per);
	su[t] = u;
	si[t] = c == 0 ? test[u] : neg[(size_t)u * N + (c - 1)];
}

int eval_pairs_cuda(uint32_t u0, uint32_t nu, uint32_t N, const uint32_t *test,
		    const uint32_t *neg, uint32_t *su, uint32_t *si, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d((size_t)nu * ((size_t)N + 1), &blocks))
		return -1;
	if (!blocks)
		return 0;
	cost_shape sh = cost_shape_for(eval_pairs_facts, blocks, 4, 1);
	if (NCF_COST_SHAPED("eval_pairs", (double)nu * ((double)N + 1) * 12.0, 0, sh))
		return 0;
	NCF_LAUNCH(eval_pairs_kernel, blocks, BLOCK, 0, stream, u0, nu, N, test, neg, su, si);
	return CUDA_CHECK(cudaGetLastError());
}

static constexpr launch_facts rank_facts = {BLOCK, 8};
__global__ void NCF_BOUNDS(rank_facts) rank_kernel(const float *__restrict__ logit, const uint8_t *__restrict__ counted,
			    uint32_t u0, uint32_t nu, uint32_t N, uint32_t *__restrict__ ranks)
{
	size_t k = NCF_TID;
	if (k >= nu)
		return;
	const float *l = logit + k * ((size_t)N + 1);
	ranks[k] = ncf_rank(l[0], l + 1, counted + (size_t)(u0 + k) * N, N);
}

int rank_cuda(const float *logit, const uint8_t *counted, uint32_t u0, uint32_t nu, uint32_t N,
	      uint32_t *ranks, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(nu, &blocks))
		return -1;
	if (!blocks)
		return 0;
	/* a user's N + 1 logits, one after another */
	cost_shape sh = cost_shape_for(rank_facts, blocks, 4, N + 1.0);
	if (NCF_COST_SHAPED("rank", (double)nu * (((double)N + 1) * 4.0 + N + 4.0), 0, sh))
		return 0;
	NCF_LAUNCH(rank_kernel, blocks, BLOCK, 0, stream, logit, counted, u0, nu, N, ranks);
	return CUDA_CHECK(cudaGetLastError());
}

} /* namespace NCF_CUDA_NS */
