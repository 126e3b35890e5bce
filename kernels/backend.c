/*
 * backend.c - choosing and opening a backend, and the public wrappers of
 * backend.h over the implementations' tables (backend_impl.h): optional
 * members are handled here, once (ggml-backend.c).  No option parsing and
 * no exit: backend_opts.c parses the options beside it, the tools exit.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "err.h"
#include "module.h"
#include "ncf_hd.h"

int ncf_backend_open_impl(struct ncf_backend *be, const struct ncf_backend_i *impl,
			  const struct ncf_shape *s, const struct ncf_hparams *hp,
			  enum ncf_precision precision, int threads, struct ncf_dist *dist)
{
	memset(be, 0, sizeof *be);
	be->shape = *s;
	ncf_layout_make(s, &be->layout);
	be->hp = *hp;
	be->dist = dist;
	be->threads = threads;
	be->precision = precision;
	be->i = impl;
	int rc = impl->init(be);
	if (rc != 0) {
		ncf_backend_close(be);
		return rc == -3 ? -3 : -1;
	}
	return 0;
}

/* The cuda module's backend when a GPU is usable, else NULL and why.
 * auto: the module is opened only where an NVIDIA driver seems present
 * (or NCF_CUDA_MODULE names one), so that a CPU machine maps nothing of
 * CUDA. */
static const struct ncf_backend_i *cuda_if_usable(enum ncf_device device, char *why, size_t len)
{
	const char *env = getenv("NCF_CUDA_MODULE");
	if (device == NCF_DEVICE_AUTO && !(env && *env) && !ncf_cuda_driver_present(why, len))
		return NULL;
	const struct ncf_cuda_api *api = ncf_cuda_load(why, len);
	if (!api || !api->usable(why, len))
		return NULL;
	return api->backend;
}

/* The implementation for device: CUDA when asked for or (auto) usable, else
 * the CPU (said at -v).  NULL after reporting when CUDA was asked for and
 * cannot be had. */
static const struct ncf_backend_i *choose(enum ncf_device device)
{
	if (device == NCF_DEVICE_CPU)
		return &ncf_backend_cpu;
	char why[1024];
	const struct ncf_backend_i *cuda = cuda_if_usable(device, why, sizeof why);
	if (cuda)
		return cuda;
	if (device == NCF_DEVICE_CUDA) {
		ncf_error("--device cuda: no usable GPU: %s", why);
		return NULL;
	}
	ncf_debug("no usable GPU (%s); using the CPU", why);
	return &ncf_backend_cpu;
}

int ncf_backend_open(struct ncf_backend *be, enum ncf_device device, const struct ncf_shape *s,
		     const struct ncf_hparams *hp, enum ncf_precision precision, int threads,
		     struct ncf_dist *dist)
{
	memset(be, 0, sizeof *be);
	const struct ncf_backend_i *impl = choose(device);
	if (!impl)
		return -3;
	if (impl->precision && impl->precision(&precision, device != NCF_DEVICE_AUTO) != 0)
		return -3;
	return ncf_backend_open_impl(be, impl, s, hp, precision, threads, dist);
}

/* Pairs kept for ncf_backend_score_resident by implementations without
 * resident_set: host copies, and room for their scores. */
struct ncf_resident {
	uint32_t *users, *items;
	float *out;
	size_t n;
};

static void resident_free(struct ncf_backend *be)
{
	struct ncf_resident *r = be->resident;
	if (!r)
		return;
	free(r->users), free(r->items), free(r->out);
	free(r);
	be->resident = NULL;
}

void ncf_backend_close(struct ncf_backend *be)
{
	if (be->i && be->i->free)
		be->i->free(be);
	resident_free(be);
	be->i = NULL;
}

const char *ncf_backend_name(const struct ncf_backend *be)
{
	return be->i->name;
}

int ncf_backend_keeps_loss(const struct ncf_backend *be)
{
	return be->i->take_loss != NULL;
}

int ncf_backend_pins_host(const struct ncf_backend *be)
{
	return be->i->host_alloc != NULL;
}

int ncf_backend_on_host(const struct ncf_backend *be)
{
	return be->i->device == NCF_DEVICE_CPU;
}

int ncf_backend_set_state(struct ncf_backend *be, const float *params, const float *m,
			  const float *v)
{
	return be->i->set_state(be, params, m, v);
}

int ncf_backend_get_state(struct ncf_backend *be, float *params, float *m, float *v)
{
	return be->i->get_state(be, params, m, v);
}

int ncf_backend_set_train_data(struct ncf_backend *be, const struct ncf_train_data *d)
{
	return be->i->set_train_data(be, d);
}

int ncf_backend_set_eval_data(struct ncf_backend *be, const struct ncf_eval_data *d)
{
	return be->i->set_eval_data(be, d);
}

int ncf_backend_train_step(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			   double *loss_sum)
{
	if (loss_sum || be->i->take_loss)
		return be->i->train_step(be, epoch, first, n, loss_sum);
	double ls = 0;
	if (be->i->train_step(be, epoch, first, n, &ls) != 0)
		return -1;
	be->loss_kept += ls;
	return 0;
}

int ncf_backend_take_loss(struct ncf_backend *be, double *loss_sum)
{
	*loss_sum = 0;
	if (be->i->take_loss)
		return be->i->take_loss(be, loss_sum);
	*loss_sum = be->loss_kept;
	be->loss_kept = 0;
	return 0;
}

/* Host memory from the backend carries a header saying who gave it, so
 * that a fallback to malloc is freed as such. */
struct host_block {
	int pinned;
	int pad[3];
};

void *ncf_backend_host_alloc(struct ncf_backend *be, size_t bytes)
{
	struct host_block *b = NULL;
	if (be->i->host_alloc)
		b = be->i->host_alloc(be, sizeof *b + bytes);
	if (b) {
		b->pinned = 1;
	} else {
		if (be->i->host_alloc)
			ncf_debug("%s backend: no page-locked memory for %zu bytes; using "
				  "ordinary memory", be->i->name, bytes);
		b = ncf_xmalloc(sizeof *b + bytes);
		b->pinned = 0;
	}
	return b + 1;
}

void ncf_backend_host_free(struct ncf_backend *be, void *p)
{
	if (!p)
		return;
	struct host_block *b = (struct host_block *)p - 1;
	if (b->pinned)
		be->i->host_free(be, b);
	else
		free(b);
}

int ncf_backend_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		     float *grad, double *loss_sum)
{
	if (!be->i->grad) {
		ncf_error("%s backend: no gradient without a step", be->i->name);
		return -1;
	}
	return be->i->grad(be, epoch, first, n, grad, loss_sum);
}

int ncf_backend_eval_ranks(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks)
{
	return be->i->eval_ranks(be, u0, u1, ranks);
}

int ncf_backend_score(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		      size_t n, float *out)
{
	return be->i->score(be, users, items, n, out);
}

int ncf_backend_logits(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		       size_t n, float *out)
{
	if (!be->i->logits) {
		ncf_error("%s backend: no logits, only probabilities", be->i->name);
		return -1;
	}
	return be->i->logits(be, users, items, n, out);
}

int ncf_backend_resident_set(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
			     size_t n)
{
	if (be->i->resident_set)
		return be->i->resident_set(be, users, items, n);
	resident_free(be);
	for (size_t j = 0; j < n; j++)
		if (users[j] >= be->shape.users || items[j] >= be->shape.items) {
			ncf_error("%s backend: pair %zu (user %u, item %u) is outside the model (%u "
				  "users, %u items)",
				  be->i->name, j, users[j], items[j], be->shape.users, be->shape.items);
			return -1;
		}
	struct ncf_resident *r = ncf_xcalloc(1, sizeof *r);
	size_t k = n ? n : 1;
	r->users = ncf_xmalloc(k * sizeof *r->users);
	r->items = ncf_xmalloc(k * sizeof *r->items);
	r->out = ncf_xmalloc(k * sizeof *r->out);
	if (n) {
		memcpy(r->users, users, n * sizeof *users);
		memcpy(r->items, items, n * sizeof *items);
	}
	r->n = n;
	be->resident = r;
	return 0;
}

int ncf_backend_score_resident(struct ncf_backend *be, size_t n, float *out)
{
	if (be->i->score_resident)
		return be->i->score_resident(be, n, out);
	struct ncf_resident *r = be->resident;
	size_t kept = r ? r->n : 0;
	if (n > kept) {
		ncf_error("%s backend: %zu pairs asked for, %zu kept", be->i->name, n, kept);
		return -1;
	}
	if (n == 0)
		return 0;
	if (be->i->score(be, r->users, r->items, n, r->out) != 0)
		return -1;
	if (out)
		memcpy(out, r->out, n * sizeof *out);
	return 0;
}

int ncf_backend_sync(struct ncf_backend *be)
{
	return be->i->sync ? be->i->sync(be) : 0;
}

void ncf_backend_describe(struct ncf_backend *be, FILE *out)
{
	if (be->i->describe)
		be->i->describe(be, out);
}

void ncf_backend_describe_versions(FILE *out)
{
	char why[1024];
	const struct ncf_cuda_api *api = ncf_cuda_load(why, sizeof why);
	if (!api) {
		fprintf(out, "cuda\t%s\n", why);
		return;
	}
	fprintf(out, "cuda module\t%s (%s, ABI %u)\n", ncf_cuda_module_path(), api->kind,
		(unsigned)api->abi);
	api->describe_versions(out);
}
