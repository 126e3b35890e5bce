/* state.c - see state.h. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "state.h"

void ncf_host_state_init(struct ncf_host_state *h, size_t total)
{
	h->params = ncf_xcalloc(total, sizeof(float));
	h->m = ncf_xcalloc(total, sizeof(float));
	h->v = ncf_xcalloc(total, sizeof(float));
	h->grad = ncf_xcalloc(total, sizeof(float));
}

void ncf_host_state_free(struct ncf_host_state *h)
{
	free(h->params), free(h->m), free(h->v), free(h->grad);
	h->params = h->m = h->v = h->grad = NULL;
}

int ncf_host_set_state(struct ncf_backend *be, const float *params, const float *m,
		       const float *v)
{
	struct ncf_host_state *h = be->impl;
	size_t n = be->layout.total * sizeof(float);
	memcpy(h->params, params, n);
	if (m)
		memcpy(h->m, m, n);
	else
		memset(h->m, 0, n);
	if (v)
		memcpy(h->v, v, n);
	else
		memset(h->v, 0, n);
	return 0;
}

int ncf_host_get_state(struct ncf_backend *be, float *params, float *m, float *v)
{
	struct ncf_host_state *h = be->impl;
	size_t n = be->layout.total * sizeof(float);
	if (params)
		memcpy(params, h->params, n);
	if (m)
		memcpy(m, h->m, n);
	if (v)
		memcpy(v, h->v, n);
	return 0;
}

int ncf_host_set_train_data(struct ncf_backend *be, const struct ncf_train_data *d)
{
	struct ncf_host_state *h = be->impl;
	h->td = *d;
	h->have_td = 1;
	return 0;
}

int ncf_host_set_eval_data(struct ncf_backend *be, const struct ncf_eval_data *d)
{
	struct ncf_host_state *h = be->impl;
	h->ed = *d;
	h->have_ed = 1;
	return 0;
}

ncf_stream ncf_host_stream(const struct ncf_backend *be, const struct ncf_host_state *h,
			   uint64_t S, uint32_t epoch)
{
	const struct ncf_train_data *td = &h->td;
	return (ncf_stream){.perm = ncf_perm_make(S, be->hp.seed, epoch),
			    .seed = be->hp.seed,
			    .epoch = epoch,
			    .items = td->items,
			    .positives = td->positives,
			    .true_neg = (int)be->hp.true_neg,
			    .entry_user = td->entry_user,
			    .offsets = td->offsets,
			    .csr_items = td->items_csr,
			    .train_negatives = td->train_negatives,
			    .users = td->users,
			    .neg_offsets = td->neg_offsets,
			    .neg_items = td->neg_items};
}
