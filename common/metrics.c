/* metrics.c - see metrics.h. */
#include <math.h>
#include <stdlib.h>

#include "err.h"
#include "metrics.h"

uint8_t *ncf_eval_mask(const uint32_t *pos, const uint32_t *neg, uint32_t U, uint32_t N,
		       uint32_t n_items)
{
	uint8_t *mask = ncf_xmalloc((size_t)U * N + 1);
#pragma omp parallel
	{
		/* stamp[i] == u + 1: item i already seen for user u */
		uint32_t *stamp = ncf_xcalloc(n_items, sizeof *stamp);
#pragma omp for schedule(static)
		for (int64_t u = 0; u < (int64_t)U; u++) {
			uint32_t tag = (uint32_t)u + 1;
			stamp[pos[u]] = tag;
			for (uint32_t k = 0; k < N; k++) {
				uint32_t it = neg[(size_t)u * N + k];
				mask[(size_t)u * N + k] = stamp[it] != tag;
				stamp[it] = tag;
			}
		}
		free(stamp);
	}
	return mask;
}

void ncf_metrics_from_ranks(const uint32_t *ranks, uint32_t n, uint32_t topk, double *hr,
			    double *ndcg)
{
	double h = 0, g = 0;
	for (uint32_t u = 0; u < n; u++)
		if (ranks[u] < topk) {
			h += 1;
			g += 1.0 / log2((double)ranks[u] + 2.0);
		}
	*hr = n ? h / n : 0;
	*ndcg = n ? g / n : 0;
}
