/*
 * backend_impl.h - what an implementation of backend.h provides
 * (ggml-backend-impl.h): the table of functions behind the public
 * ncf_backend_* wrappers, where the implementation also answers the tools'
 * questions (which precisions, whether the loss stays on the device, what
 * host memory it gives), and a way to open a given implementation.  Only
 * kernels/ and the tests that compare implementations include it; tools
 * use backend.h.  The implementations call nothing here or in backend.c:
 * what they share lies below them (common/).
 */
#ifndef NCF_BACKEND_IMPL_H
#define NCF_BACKEND_IMPL_H

#include "backend.h"

/* One member per operation of backend.h; "(optional)" members may be NULL,
 * and the wrappers in backend.c say what that means, once for everyone. */
struct ncf_backend_i {
	/* "cpu", "cuda", "reference" */
	const char *name;
	/* NCF_DEVICE_CPU or NCF_DEVICE_CUDA (ncf_backend_on_host) */
	enum ncf_device device;
	/* Allocate for be->shape, be->hp, and set be->precision to what it
	 * computes in (the default resolved).  Returns 0, -1 (reported), or -3
	 * when the device lacks a requested feature (reported). */
	int (*init)(struct ncf_backend *be);
	/* Release everything init and later calls allocated (also after a
	 * failed init). */
	void (*free)(struct ncf_backend *be);
	/* ncf_backend_set_state */
	int (*set_state)(struct ncf_backend *be, const float *params, const float *m,
			 const float *v);
	/* ncf_backend_get_state */
	int (*get_state)(struct ncf_backend *be, float *params, float *m, float *v);
	/* ncf_backend_set_train_data */
	int (*set_train_data)(struct ncf_backend *be, const struct ncf_train_data *d);
	/* ncf_backend_set_eval_data */
	int (*set_eval_data)(struct ncf_backend *be, const struct ncf_eval_data *d);
	/* ncf_backend_train_step */
	int (*train_step)(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			  double *loss_sum);
	/* (optional) ncf_backend_grad */
	int (*grad)(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		    float *grad, double *loss_sum);
	/* ncf_backend_eval_ranks */
	int (*eval_ranks)(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks);
	/* ncf_backend_score */
	int (*score)(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		     size_t n, float *out);
	/* (optional) ncf_backend_logits */
	int (*logits)(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		      size_t n, float *out);
	/* (optional) ncf_backend_sync: NULL when work is never queued */
	int (*sync)(struct ncf_backend *be);
	/* (optional) ncf_backend_describe */
	void (*describe)(struct ncf_backend *be, FILE *out);
	/* (optional) ncf_backend_resident_set: NULL keeps a host copy (backend.c) */
	int (*resident_set)(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
			    size_t n);
	/* (optional, with resident_set) ncf_backend_score_resident: NULL scores
	 * the host copy with score */
	int (*score_resident)(struct ncf_backend *be, size_t n, float *out);
	/* (optional) ncf_backend_take_loss; then train_step takes a NULL
	 * loss_sum and keeps the loss itself (ncf_backend_keeps_loss) */
	int (*take_loss)(struct ncf_backend *be, double *loss_sum);
	/* (optional, both or neither) ncf_backend_host_alloc/_free: NULL gives
	 * malloc'd memory (ncf_backend_pins_host) */
	void *(*host_alloc)(struct ncf_backend *be, size_t bytes);
	void (*host_free)(struct ncf_backend *be, void *p);
	/* (optional) Before init, in ncf_backend_open: may the implementation
	 * compute in *p?  0: yes, or, the device not named, in what it sets *p
	 * to after a warning; -3 after reporting, the device named.  NULL:
	 * every precision */
	int (*precision)(enum ncf_precision *p, int named);
};

/* The fast cpu backend (kernels/cpu/) and the plain reference it is tested
 * against (kernels/cpu/reference.c), which tests open with
 * ncf_backend_open_impl.  The cuda backend: cuda/cuda.h. */
extern const struct ncf_backend_i ncf_backend_cpu;
extern const struct ncf_backend_i ncf_backend_reference;

/*
 * Initialise be with the implementation impl, whatever the device (tests
 * that compare implementations).  Returns as ncf_backend_open; on failure
 * be is closed.
 */
int ncf_backend_open_impl(struct ncf_backend *be, const struct ncf_backend_i *impl,
			  const struct ncf_shape *s, const struct ncf_hparams *hp,
			  enum ncf_precision precision, int threads, struct ncf_dist *dist);

/* What the implementations share of a step (the epoch's samples and
 * Adam's constants) is below them, in common/model.h. */

#endif
