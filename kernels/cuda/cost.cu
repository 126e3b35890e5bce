/*
 * cost.cu - the cost recorder (cost.cuh) and the cost model of one
 * training step, ncf_cuda_step_cost (cuda.h): the backend's own step code
 * run dry, recording what each launch would move and compute instead of
 * launching it.  No device is touched: the state gets fake device
 * addresses, no stream or cuBLAS handle is made.  It works in an nvcc build
 * on a machine without a GPU, and under emulation.
 */
#include "backend.cuh"

namespace NCF_CUDA_NS {

thread_local struct cost_rec *cost_active;

static const char *const kind_name[COST_KINDS] = {"kernel", "gemm", "memset", "copy", "sort"};

int cost_note(int kind, const char *name, double bytes, double flops)
{
	struct cost_rec *r = cost_active;
	r->count[kind]++;
	r->bytes += bytes;
	r->flops += flops;
	if (r->n < COST_MAX_ITEMS) {
		struct cost_item *it = &r->item[r->n++];
		it->name = name;
		it->kind = kind;
		it->bytes = bytes;
		it->flops = flops;
	} else {
		r->dropped++;
	}
	return r->dry;
}

void cost_export(const struct cost_rec *r, struct ncf_cuda_cost *out)
{
	memset(out, 0, sizeof *out);
	out->bytes = r->bytes;
	out->flops = r->flops;
	out->kernels = r->count[COST_KERNEL];
	out->gemms = r->count[COST_GEMM];
	out->memsets = r->count[COST_MEMSET];
	out->copies = r->count[COST_COPY];
	out->sorts = r->count[COST_SORT];
	out->launches = out->kernels + out->gemms + out->memsets + out->sorts;
	out->dropped = r->dropped;
	out->n = r->n < NCF_CUDA_COST_ITEMS ? r->n : NCF_CUDA_COST_ITEMS;
	for (unsigned k = 0; k < out->n; k++) {
		out->item[k].name = r->item[k].name;
		out->item[k].kind = kind_name[r->item[k].kind];
		out->item[k].bytes = r->item[k].bytes;
		out->item[k].flops = r->item[k].flops;
	}
}

/* The dry step: state for be on fake addresses, one training step of n
 * rows at epoch 0, position 0. */
static int dry_step(struct ncf_backend *be, struct cost_rec *r, int path, int64_t positives,
		    uint64_t n)
{
	struct cu *c = (struct cu *)ncf_xcalloc(1, sizeof *c);
	be->impl = c;
	set_precision(be, c, 1);
	NCF_TRY(alloc_state(be, c));
	c->path = path;
	c->P = positives;
	c->have_td = 1;
	/* a step in the middle of training: on the fused path the previous
	 * step's Adam wrote the 16-bit copy of the parameters */
	c->plo_valid = fused_path(be, c);
	/* the state's setup is not part of a step */
	uintptr_t fake = r->next_fake;
	memset(r, 0, sizeof *r);
	r->dry = 1;
	r->next_fake = fake;
	/* as ncf-train takes it: the loss left on the device */
	return ncf_backend_cuda.train_step(be, 0, 0, n, NULL);
}

} /* namespace NCF_CUDA_NS */

using namespace NCF_CUDA_NS;

int ncf_cuda_step_cost(const struct ncf_shape *s, const struct ncf_hparams *hp,
		       enum ncf_precision precision, const char *path, int64_t positives,
		       struct ncf_cuda_cost *out)
{
	memset(out, 0, sizeof *out);
	int p = 0;
	if (path_parse(path, &p) != 0)
		return -1;
	if (precision == NCF_PRECISION_DEFAULT)
		precision = NCF_PRECISION_TF32;
	static struct ncf_dist one = {0, 1, 0, 1, 0, 0.0};
	struct ncf_backend be;
	memset(&be, 0, sizeof be);
	be.i = &ncf_backend_cuda;
	be.shape = *s;
	ncf_layout_make(s, &be.layout);
	be.hp = *hp;
	be.dist = &one;
	be.precision = precision;
	struct cost_rec *r = (struct cost_rec *)ncf_xcalloc(1, sizeof *r);
	r->dry = 1;
	struct cost_rec *saved = cost_active;
	cost_active = r;
	int rc = dry_step(&be, r, p, positives, hp->batch);
	if (rc == 0)
		cost_export(r, out);
	ncf_backend_cuda.free(&be);
	cost_active = saved;
	free(r);
	return rc;
}
