/*
 * state.h - what both cpu backends (the fast one, cpu.c; the reference,
 * reference.c) hold in host memory, and the interface members that do no
 * more than copy it: the parameters, the Adam moments and the gradient
 * (layout total floats each), the borrowed training data and candidates.
 * An implementation's state begins with a struct ncf_host_state, so that
 * these members serve its table as they are.
 */
#ifndef NCF_CPU_STATE_H
#define NCF_CPU_STATE_H

#include <stddef.h>

#include "backend_impl.h"
#include "ncf_hd.h"

struct ncf_host_state {
	float *params, *m, *v, *grad; /* (total) */
	struct ncf_train_data td;     /* borrowed; valid when have_td */
	struct ncf_eval_data ed;      /* borrowed; valid when have_ed */
	int have_td, have_ed;
};

/* Zeroed arrays of total floats each; ncf_host_state_free releases them. */
void ncf_host_state_init(struct ncf_host_state *h, size_t total);
void ncf_host_state_free(struct ncf_host_state *h);

/* The interface's members (backend_impl.h) for a be->impl that begins
 * with a struct ncf_host_state.  Each returns 0. */
int ncf_host_set_state(struct ncf_backend *be, const float *params, const float *m,
		       const float *v);
int ncf_host_get_state(struct ncf_backend *be, float *params, float *m, float *v);
int ncf_host_set_train_data(struct ncf_backend *be, const struct ncf_train_data *d);
int ncf_host_set_eval_data(struct ncf_backend *be, const struct ncf_eval_data *d);

/* The sample stream of epoch, S samples (ncf_epoch_check), over h's
 * training data (its explicit negatives included) with be's seed and
 * --true-negatives. */
ncf_stream ncf_host_stream(const struct ncf_backend *be, const struct ncf_host_state *h,
			   uint64_t S, uint32_t epoch);

#endif
