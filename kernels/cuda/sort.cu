/*
 * sort.cu - the stable sort of a batch's sample numbers by user (or
 * item) id, which the per-key sums of the first layer's and the GMF
 * embeddings' backward pass need (kernels.cuh, key_grad_cuda).
 *
 * On the GPU this is CUB's LSD radix sort (DeviceRadixSort::SortPairs): it
 * is stable, deterministic and about as fast as a sort gets, but it relies on
 * shared memory, block barriers and warp primitives, so it cannot run under
 * NCF_CUDA_EMULATE; there the CPU twin sort_by_key_cpu (a stable sort of the
 * same pairs, hence the same output) runs instead.  The GPU version is
 * covered by tests/gpu (one training step against the cpu backend, and the
 * whole training runs).
 */
#include <algorithm>
#include <vector>

#include "kernels.cuh"

#ifndef NCF_CUDA_EMULATE
#include <cub/device/device_radix_sort.cuh>
#endif

namespace NCF_CUDA_NS {

/*
 * The notes of one sort of n keys of `bits` bits (cost.cuh), the same in
 * both builds: the iota of the row numbers, then what CUB's onesweep
 * dispatch (cub/device/dispatch/dispatch_radix_sort.cuh, InvokeOnesweep,
 * CUDA 13) launches for 32-bit keys and values: two memsets (counters,
 * histograms), the histogram kernel (reads the keys), the exclusive sum
 * (tiny), then per pass of 8 bits a memset of the look-back tiles and one
 * onesweep kernel that reads and writes keys and values.  CUB issues all of
 * them inside one call, so they are noted as launches of that call
 * ("cub_sort"): the model counts each, the profile times the call as one
 * row.  Returns 1 in a dry run.
 */
static int sort_cost(size_t n, int bits)
{
	if (!cost_active)
		return 0;
	static const char *const call = "cub_sort";
	double N = (double)n;
	int passes = (bits + 7) / 8, dry = 0;
	dry |= NCF_COST(COST_SORT, "sort_iota", 4.0 * N, 0);
	dry |= cost_note_in(call, COST_SORT, "cub_memset", 64.0, 0);
	dry |= cost_note_in(call, COST_SORT, "cub_memset", passes * 256.0 * 4, 0);
	dry |= cost_note_in(call, COST_SORT, "cub_histogram", 4.0 * N, 0);
	dry |= cost_note_in(call, COST_SORT, "cub_exclusive_sum", passes * 256.0 * 8, 0);
	for (int p = 0; p < passes; p++) {
		dry |= cost_note_in(call, COST_SORT, "cub_memset", N / 16, 0);
		dry |= cost_note_in(call, COST_SORT, "cub_onesweep", 16.0 * N, 0);
	}
	return dry;
}

void sort_by_key_cpu(const uint32_t *keys, size_t n, uint32_t *keys_out, uint32_t *idx_out)
{
	std::vector<uint32_t> order(n);
	for (size_t j = 0; j < n; j++)
		order[j] = (uint32_t)j;
	std::stable_sort(order.begin(), order.end(),
			 [keys](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
	for (size_t j = 0; j < n; j++) {
		idx_out[j] = order[j];
		keys_out[j] = keys[order[j]];
	}
}

#ifndef NCF_CUDA_EMULATE

__global__ void iota_kernel(uint32_t *__restrict__ x, size_t n)
{
	size_t j = NCF_TID;
	if (j < n)
		x[j] = (uint32_t)j;
}

int sort_temp_bytes(size_t n, int bits, size_t *bytes)
{
	*bytes = 0;
	if (n == 0 || cost_dry())
		return 0;
	if (n > 0x7FFFFFFFu) {
		ncf_error("cuda backend: cannot sort %zu keys at once", n);
		return -1;
	}
	return CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
		(void *)NULL, *bytes, (const uint32_t *)NULL, (uint32_t *)NULL,
		(const uint32_t *)NULL, (uint32_t *)NULL, (int)n, 0, bits));
}

int sort_by_key_cuda(const uint32_t *keys, size_t n, int bits, uint32_t *keys_out,
		     uint32_t *idx_out, const sort_scratch &tmp, cudaStream_t stream)
{
	if (n == 0 || sort_cost(n, bits))
		return 0;
	unsigned blocks;
	if (grid_1d(n, &blocks))
		return -1;
	NCF_LAUNCH(iota_kernel, blocks, BLOCK, 0, stream, tmp.idx_tmp, n);
	if (CUDA_CHECK(cudaGetLastError()))
		return -1;
	size_t bytes = tmp.temp_bytes;
	if (CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.temp, bytes, keys, keys_out, tmp.idx_tmp,
							idx_out, (int)n, 0, bits, stream)))
		return -1;
	return launch_done("cub::DeviceRadixSort::SortPairs", __FILE__, __LINE__, stream);
}

#else /* NCF_CUDA_EMULATE: the CPU twin */

int sort_temp_bytes(size_t n, int bits, size_t *bytes)
{
	*bytes = 0;
	return 0;
}

int sort_by_key_cuda(const uint32_t *keys, size_t n, int bits, uint32_t *keys_out,
		     uint32_t *idx_out, const sort_scratch &tmp, cudaStream_t stream)
{
	(void)tmp;
	if (n == 0 || sort_cost(n, bits))
		return 0;
	/* on the stream, after the work that made the keys (emu.h) */
	ncf_emu_enqueue(stream, [=]() { sort_by_key_cpu(keys, n, keys_out, idx_out); });
	return 0;
}

#endif

/* ---- the step's rows (kernels.cuh) ------------------------------------- */

/* off[k] for the keys that position t of sorted keys (n) begins: every k in
 * (keys[t - 1], keys[t]] gets t (the first position of a key >= k), and
 * position n the keys after the last, up to K: each k of 0..K written once,
 * by one thread, with no search. */
NCF_DI void offsets_at(size_t t, size_t n, uint32_t K, const uint32_t *__restrict__ keys,
		       uint32_t *__restrict__ off)
{
	uint32_t lo = t ? keys[t - 1] + 1 : 0, hi = t < n ? keys[t] : K;
	for (uint32_t k = lo; k <= hi && k <= K; k++)
		off[k] = (uint32_t)t;
}

/* Thread t < n: row t's item and label from sample rowpos[t]; t <= n: the
 * offsets of the keys it begins. */
static constexpr launch_facts rows_by_user_facts = {BLOCK, 8};
__global__ void NCF_BOUNDS(rows_by_user_facts)
	rows_by_user_kernel(size_t n, uint32_t K, rows_by_user r)
{
	size_t t = NCF_TID;
	if (t < n) {
		uint32_t j = r.rowpos[t];
		r.ri[t] = r.si[j];
		r.rlab[t] = r.lab[j];
	}
	if (t <= n)
		offsets_at(t, n, K, r.keys, r.off);
}

int rows_by_user_cuda(size_t n, uint32_t K, const rows_by_user &r, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n + 1, &blocks))
		return -1;
	/* rows: rowpos, then one item and label each, read and written; the
	 * sorted keys read (twice, from cache) and every offset written once */
	cost_shape sh = cost_shape_for(rows_by_user_facts, blocks, 8, 2);
	if (NCF_COST_SHAPED("rows_by_user", n * (4.0 + 4.0 + 10.0) + (K + 1.0) * 4.0, 0, sh))
		return 0;
	NCF_LAUNCH(rows_by_user_kernel, blocks, BLOCK, 0, stream, n, K, r);
	return CUDA_CHECK(cudaGetLastError());
}

static constexpr launch_facts seg_offsets_facts = {BLOCK, 8};
__global__ void NCF_BOUNDS(seg_offsets_facts) seg_offsets_kernel(size_t n, uint32_t K,
						 const uint32_t *__restrict__ keys,
						 uint32_t *__restrict__ off)
{
	size_t t = NCF_TID;
	if (t <= n)
		offsets_at(t, n, K, keys, off);
}

int seg_offsets_cuda(size_t n, uint32_t K, const uint32_t *keys, uint32_t *off,
		     cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(n + 1, &blocks))
		return -1;
	cost_shape sh = cost_shape_for(seg_offsets_facts, blocks, 8, 1);
	if (NCF_COST_SHAPED("seg_offsets", n * 4.0 + (K + 1.0) * 4.0, 0, sh))
		return 0;
	NCF_LAUNCH(seg_offsets_kernel, blocks, BLOCK, 0, stream, n, K, keys, off);
	return CUDA_CHECK(cudaGetLastError());
}

} /* namespace NCF_CUDA_NS */
