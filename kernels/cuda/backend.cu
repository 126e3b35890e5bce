/*
 * backend.cu - the cuda backend (DESIGN.md section 6): NeuMF training and
 * evaluation on an NVIDIA GPU, the same function as the reference
 * (kernels/cpu/reference.c) and the fast cpu backend.  This file is the
 * interface (ncf_backend_cuda) and the module's entry point: state and data
 * in device memory, the training step's driver (the dense layers' choice on
 * the first step, graph or plain launches, the loss, fp16 loss scaling),
 * and the cost model's dry run.
 * What each file does and who calls whom: state.cuh.
 *
 * Everything lives on the device: parameters, Adam moments and the gradient
 * (fp32 always), the training CSR (so that the sample stream is generated
 * there), the evaluation candidates, the activations.  The host only
 * launches work (one CUDA graph per step) and reads back the loss: once
 * per step in fp16 (whose loss scaling needs each step's skip flag), else
 * when ncf_backend_take_loss asks (ncf-train: once per epoch).
 *
 * Precision (be->precision): fp32 (cuBLAS pinned to fp32 math, no TF32: the
 * parity tests use it), tf32 (fp32 storage, TF32 tensor-core GEMMs; the
 * default on compute capability 8.0+), bf16 and fp16 (activations, the
 * tables AU/AI and a copy of the parameters from mlp_user on in 16 bits for
 * the products, fp32 accumulation; master weights, Adam state and gradients
 * stay fp32).  fp16 uses dynamic loss scaling as PyTorch's GradScaler:
 * dlogit is multiplied by the scale (2^15 at start), an inf or NaN anywhere
 * in the gradient skips the step (Adam's step count does not advance) and
 * halves the scale, 2000 good steps in a row double it.  The scale is not
 * saved in checkpoints: a resumed run starts again at 2^15.
 *
 * Reproducibility: no float atomics; every reduction has a fixed order (see
 * kernels.cuh), cuBLAS is deterministic for a given GPU and version, so a
 * run repeats bit for bit on the same GPU model and software for the same
 * choice of the dense layers' implementations (dense.cuh: timed on the
 * first step, so pin it with NCF_CUDA_DENSE to compare runs).
 *
 * Many ranks: one GPU per rank, the rank's local rank on its node; a node
 * with more ranks than GPUs is refused when the backend opens (-3), and the
 * NCCL communicator of a job of several ranks is made then too.
 *
 * NCF_CUDA_PROFILE=1 in the environment times every launch of every
 * training step with CUDA events (no step graph then) and prints a table
 * per launch when the backend is closed, beside the cost model's time on
 * this device (cost.cuh).  NCF_CUDA_SYNC=1
 * synchronises after every launch and library call and names the one that
 * failed (common.cuh).
 */
#include "device.cuh"
#include "graphs.cuh"
#include "nccl.cuh"
#include "rows.cuh"
#include "score.cuh"
#include "step.cuh"

extern "C" {
#include "cli.h" /* NCF_VERSION */
}

namespace NCF_CUDA_NS {

/* Is the environment variable name set to something other than "" or "0"? */
static int env_on(const char *name)
{
	const char *v = getenv(name);
	return v && *v && strcmp(v, "0");
}

/* ---- state -------------------------------------------------------------- */

/* Parameters, Adam state, gradient, first-layer tables and scalars for be
 * on the device (fake addresses in a dry cost run).  Returns 0 or -1. */
static int alloc_state(struct ncf_backend *be, struct cu *c)
{
	const struct ncf_shape *s = &be->shape;
	size_t total = be->layout.total, H1 = s->layers[1];
	NCF_TRY(DALLOC(c->params, total));
	NCF_TRY(DALLOC(c->m, total));
	NCF_TRY(DALLOC(c->v, total));
	NCF_TRY(DALLOC(c->grad, total));
	NCF_TRY(DALLOC_BYTES(&c->AU, (size_t)s->users * H1 * c->es));
	NCF_TRY(DALLOC_BYTES(&c->AI, (size_t)s->items * H1 * c->es));
	NCF_TRY(DALLOC(c->dAU, (size_t)s->users * H1));
	NCF_TRY(DALLOC(c->dAI, (size_t)s->items * H1));
	NCF_TRY(DALLOC(c->loss_dev, 1));
	NCF_TRY(DALLOC(c->loss_acc, 1));
	NCF_TRY(DALLOC(c->flag, 1));
	if (c->act != ACT_F32)
		NCF_TRY(DALLOC_BYTES(&c->plo, total * c->es));
	DMEMSET_TRY(c->loss_acc, sizeof(double), c->s, "clear_loss");
	DMEMSET_TRY(c->params, total * sizeof(float), c->s, "clear_params");
	DMEMSET_TRY(c->m, total * sizeof(float), c->s, "clear_m");
	DMEMSET_TRY(c->v, total * sizeof(float), c->s, "clear_v");
	c->loss_scale = c->act == ACT_F16 ? 32768.0f : 1.0f;
	c->growth_interval = 2000;
	return 0;
}

/* The profile's table on stderr (against the cost model's machine). */
static void report_profile(struct ncf_backend *be, struct cu *c)
{
	char title[160];
	snprintf(title, sizeof title, "%s, batch %llu", ncf_precision_name(be->precision),
		 (unsigned long long)be->hp.batch);
	dense_describe(c, &be->shape, stderr);
	profile_report(c->prof, stderr, title);
}

static void cuda_free(struct ncf_backend *be)
{
	struct cu *c = impl(be);
	if (!c)
		return;
	if (c->have_stream)
		cudaStreamSynchronize(c->s);
	if (c->prof) {
		report_profile(be, c);
		profile_close(c->prof);
	}
	struct ncf_cuda_graphs g;
	ncf_cuda_graph_counts(be, &g);
	if (g.replays + g.plain > 0)
		ncf_debug("cuda backend: %llu training steps: %llu as the CUDA graph (%llu captures, "
			  "%llu instantiated anew), %llu launch by launch%s",
			  (unsigned long long)(g.replays + g.plain), (unsigned long long)g.replays,
			  (unsigned long long)g.captures, (unsigned long long)g.instantiations,
			  (unsigned long long)g.plain, g.failed ? " (a capture failed)" : "");
	score_free(c);
	graphs_free(c);
	rows_free(c);
	step_close(c);
	dense_free(c);
	dfree(c->params), dfree(c->m), dfree(c->v), dfree(c->grad), dfree(c->plo);
	dfree(c->AU), dfree(c->AI), dfree(c->dAU), dfree(c->dAI);
	dfree(c->entry_user), dfree(c->items_csr), dfree(c->offsets);
	dfree(c->neg_offsets), dfree(c->neg_items);
	dfree(c->test), dfree(c->neg), dfree(c->counted);
	dfree(c->loss_dev), dfree(c->loss_acc), dfree(c->flag);
	nccl_free(c);
	device_close(c);
	free(c);
	be->impl = NULL;
}

static int cuda_init(struct ncf_backend *be)
{
	struct cu *c = (struct cu *)ncf_xcalloc(1, sizeof *c);
	be->impl = c;
	g_sync = env_on("NCF_CUDA_SYNC");
	int rc = device_open(be, c);
	if (rc != 0)
		return rc;
	NCF_TRY(graphs_init(c));
	NCF_TRY(alloc_state(be, c));
	NCF_TRY(dense_open(c, &be->shape, getenv("NCF_CUDA_DENSE")));
	NCF_TRY(nccl_open(be, c));
	if (env_on("NCF_CUDA_PROFILE") && !(c->prof = profile_open()))
		return -1;
	return 0;
}

static int cuda_set_state(struct ncf_backend *be, const float *params, const float *m,
			  const float *v)
{
	struct cu *c = impl(be);
	size_t n = be->layout.total * sizeof(float);
	params_replaced(c);
	CUDA_TRY(cudaMemcpyAsync(c->params, params, n, cudaMemcpyHostToDevice, c->s));
	if (m)
		CUDA_TRY(cudaMemcpyAsync(c->m, m, n, cudaMemcpyHostToDevice, c->s));
	else
		CUDA_TRY(cudaMemsetAsync(c->m, 0, n, c->s));
	if (v)
		CUDA_TRY(cudaMemcpyAsync(c->v, v, n, cudaMemcpyHostToDevice, c->s));
	else
		CUDA_TRY(cudaMemsetAsync(c->v, 0, n, c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

static int cuda_get_state(struct ncf_backend *be, float *params, float *m, float *v)
{
	struct cu *c = impl(be);
	size_t n = be->layout.total * sizeof(float);
	if (params)
		CUDA_TRY(cudaMemcpyAsync(params, c->params, n, cudaMemcpyDeviceToHost, c->s));
	if (m)
		CUDA_TRY(cudaMemcpyAsync(m, c->m, n, cudaMemcpyDeviceToHost, c->s));
	if (v)
		CUDA_TRY(cudaMemcpyAsync(v, c->v, n, cudaMemcpyDeviceToHost, c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

/* A device copy of n elements of host array x into *dst (freed first). */
template <typename X> static int upload(X **dst, const X *x, size_t n, cudaStream_t s)
{
	dfree(*dst);
	NCF_TRY(DALLOC(*dst, n));
	if (n)
		CUDA_TRY(cudaMemcpyAsync(*dst, x, n * sizeof *x, cudaMemcpyHostToDevice, s));
	return 0;
}

static int cuda_set_train_data(struct ncf_backend *be, const struct ncf_train_data *d)
{
	struct cu *c = impl(be);
	if (d->users != be->shape.users || d->items != be->shape.items) {
		ncf_error("cuda backend: training data of %u users, %u items for a model of %u, %u",
			  d->users, d->items, be->shape.users, be->shape.items);
		return -1;
	}
	c->have_td = 0;
	size_t P = (size_t)d->positives;
	NCF_TRY(upload(&c->offsets, d->offsets, (size_t)d->users + 1, c->s));
	NCF_TRY(upload(&c->items_csr, d->items_csr, P, c->s));
	NCF_TRY(upload(&c->entry_user, d->entry_user, P, c->s));
	/* the explicit negatives, which ncf_sample_at reads past the drawn ones */
	dfree(c->neg_offsets), dfree(c->neg_items);
	if (d->train_negatives) {
		NCF_TRY(upload(&c->neg_offsets, d->neg_offsets, (size_t)d->users + 1, c->s));
		NCF_TRY(upload(&c->neg_items, d->neg_items, (size_t)d->train_negatives, c->s));
	}
	CUDA_TRY(cudaStreamSynchronize(c->s));
	c->P = d->positives;
	c->E = d->train_negatives;
	c->have_td = 1;
	return 0;
}

static int cuda_set_eval_data(struct ncf_backend *be, const struct ncf_eval_data *d)
{
	struct cu *c = impl(be);
	if (d->users != be->shape.users) {
		ncf_error("cuda backend: evaluation data of %u users for a model of %u", d->users,
			  be->shape.users);
		return -1;
	}
	c->have_ed = 0;
	size_t UN = (size_t)d->users * d->negatives;
	NCF_TRY(upload(&c->test, d->test_items, d->users, c->s));
	NCF_TRY(upload(&c->neg, d->neg, UN, c->s));
	NCF_TRY(upload(&c->counted, d->counted, UN, c->s));
	CUDA_TRY(cudaStreamSynchronize(c->s));
	c->N = d->negatives;
	c->have_ed = 1;
	return 0;
}

/* ---- training ----------------------------------------------------------- */

/* The step as graphs.cu captures it (graph_work). */
static int step_work(void *arg)
{
	return step_run((const struct step *)arg);
}

/* The step's buffers and, on its first step with rows, each dense layer's
 * implementation (timed with plain launches, before any capture).
 * Returns 0 or -1. */
static int prepare_step(const struct step *st)
{
	NCF_TRY(step_prepare(st));
	return dense_choose(st);
}

/* Issue the step: timed launch by launch under NCF_CUDA_PROFILE, else as
 * one graph (one rank: NCCL stays outside), else launch by launch.
 * Returns 0 or -1. */
static int issue_step(struct ncf_backend *be, struct cu *c, const struct step *st)
{
	if (c->prof) {
		graphs_step_plain(c);
		profile_begin(c->prof, c->s, be->precision);
		int rc = step_run(st);
		profile_end(c->prof);
		return rc;
	}
	if (be->dist->size == 1) {
		struct params_mark pm = params_save(c);
		int g = graphs_step(c, step_work, (void *)st);
		if (g <= 0)
			return g;
		params_restore(c, pm); /* the capture's flags; the launches below set them */
	}
	graphs_step_plain(c);
	return step_run(st);
}

/* The step's loss and (fp16) skip flag to the host. */
static int read_loss(struct cu *c, double *loss, int *bad)
{
	DCOPY_TRY(loss, c->loss_dev, sizeof *loss, cudaMemcpyDeviceToHost, c->s, "read_loss");
	if (c->act == ACT_F16)
		DCOPY_TRY(bad, c->flag, sizeof *bad, cudaMemcpyDeviceToHost, c->s, "read_flag");
	DSYNC_TRY(c->s);
	return 0;
}

/* fp16 loss scaling after a step: halve the scale when the step was
 * skipped, double it after growth_interval good steps in a row. */
static void scale_after(struct ncf_backend *be, struct cu *c, int skipped, uint32_t epoch,
			uint64_t first)
{
	if (skipped) {
		c->loss_scale *= 0.5f;
		c->good_steps = 0;
		ncf_debug("fp16: inf/NaN gradient at epoch %u, position %llu: step skipped, loss "
			  "scale now %g",
			  epoch + 1, (unsigned long long)first, (double)c->loss_scale);
		return;
	}
	be->step++;
	if (c->act == ACT_F16 && ++c->good_steps >= c->growth_interval) {
		c->loss_scale *= 2.0f;
		c->good_steps = 0;
	}
}

/*
 * A training step.  With loss_sum NULL (fp16 aside, whose host must see
 * each step's skip flag; NCF_CUDA_PROFILE aside, which waits for each step)
 * the loss is added on the device to c->loss_acc and nothing waits:
 * ncf_backend_take_loss reads it.
 */
static int cuda_train_step(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			   double *loss_sum)
{
	struct cu *c = impl(be);
	if (loss_sum)
		*loss_sum = 0;
	int keep = !loss_sum && c->act != ACT_F16 && !c->prof;
	struct step st;
	NCF_TRY(step_init(&st, be, epoch, first, n, 1, keep ? c->loss_acc : NULL));
	NCF_TRY(prepare_step(&st));
	NCF_TRY(issue_step(be, c, &st));
	double loss = 0;
	int bad = 0;
	if (!keep)
		NCF_TRY(read_loss(c, &loss, &bad));
	if (c->prof)
		NCF_TRY(profile_collect(c->prof));
	if (loss_sum)
		*loss_sum = loss;
	else
		c->loss_host += loss;
	scale_after(be, c, bad, epoch, first);
	return 0;
}

/* What the steps given no loss_sum left on the device and the host. */
static int cuda_take_loss(struct ncf_backend *be, double *loss_sum)
{
	struct cu *c = impl(be);
	double acc = 0;
	DCOPY_TRY(&acc, c->loss_acc, sizeof acc, cudaMemcpyDeviceToHost, c->s, "read_loss");
	DMEMSET_TRY(c->loss_acc, sizeof(double), c->s, "clear_loss");
	DSYNC_TRY(c->s);
	*loss_sum = acc + c->loss_host;
	c->loss_host = 0;
	return 0;
}

static int cuda_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		     float *grad, double *loss_sum)
{
	struct cu *c = impl(be);
	size_t total = be->layout.total;
	struct step st;
	NCF_TRY(step_init(&st, be, epoch, first, n, 0, NULL));
	NCF_TRY(prepare_step(&st));
	NCF_TRY(step_run(&st));
	double loss = 0;
	CUDA_TRY(cudaMemcpyAsync(grad, c->grad, total * sizeof(float), cudaMemcpyDeviceToHost,
				 c->s));
	CUDA_TRY(cudaMemcpyAsync(&loss, c->loss_dev, sizeof loss, cudaMemcpyDeviceToHost, c->s));
	CUDA_TRY(cudaStreamSynchronize(c->s));
	if (c->loss_scale != 1.0f) {
		float inv = 1.0f / c->loss_scale;
		for (size_t j = 0; j < total; j++)
			grad[j] *= inv;
	}
	*loss_sum = loss;
	return 0;
}

/* Page-locked host memory: get_state's copies (the checkpoint snapshot)
 * run at the bus's speed with no staging.  NULL when there is none to
 * have (the caller falls back to malloc). */
static void *cuda_host_alloc(struct ncf_backend *be, size_t bytes)
{
	(void)be;
	void *p = NULL;
	if (cudaMallocHost(&p, bytes) != cudaSuccess) {
		(void)cudaGetLastError(); /* not sticky: clear it */
		return NULL;
	}
	return p;
}

static void cuda_host_free(struct ncf_backend *be, void *p)
{
	(void)be;
	cudaFreeHost(p);
}

/* ---- evaluation and scoring --------------------------------------------- */

static int cuda_eval_ranks(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks)
{
	return score_eval_ranks(be, impl(be), u0, u1, ranks);
}

static int cuda_logits(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		       size_t n, float *out)
{
	return score_host(be, impl(be), users, items, n, out, 0);
}

static int cuda_score(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		      size_t n, float *out)
{
	return score_host(be, impl(be), users, items, n, out, 1);
}

static int cuda_resident_set(struct ncf_backend *be, const uint32_t *users,
			     const uint32_t *items, size_t n)
{
	return score_keep(be, impl(be), users, items, n);
}

static int cuda_score_resident(struct ncf_backend *be, size_t n, float *out)
{
	return score_kept(be, impl(be), n, out, 1);
}

static int cuda_sync(struct ncf_backend *be)
{
	return CUDA_CHECK(cudaStreamSynchronize(impl(be)->s));
}

static void cuda_describe(struct ncf_backend *be, FILE *out)
{
	struct cu *c = impl(be);
	fprintf(out, "device\tcuda:%d %s, compute capability %d.%d, %.1f GiB\n", c->dev,
		c->prop.name, c->prop.major, c->prop.minor,
		(double)c->prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
	fprintf(out, "precision\t%s\n", ncf_precision_name(be->precision));
	dense_describe(c, &be->shape, out);
}

/* ---- the cost model: one step run dry ------------------------------------ */

/* State for be on fake addresses, then one training step of n rows at
 * epoch 0, position 0, with recorder r active and dry; dense: the dense
 * layers' pins (NCF_CUDA_DENSE's form; NULL: the fixed order). */
static int dry_step(struct ncf_backend *be, struct cost_rec *r, const char *dense,
		    int64_t positives, uint64_t n)
{
	struct cu *c = (struct cu *)ncf_xcalloc(1, sizeof *c);
	be->impl = c;
	device_set_precision(be, c, 1);
	NCF_TRY(alloc_state(be, c));
	NCF_TRY(dense_open(c, &be->shape, dense));
	c->P = positives;
	c->have_td = 1;
	/* a step in the middle of training: the previous step's Adam wrote the
	 * 16-bit copy */
	params_stepped(c, 1);
	/* the state's setup is not part of a step */
	uintptr_t fake = r->next_fake;
	memset(r, 0, sizeof *r);
	r->dry = 1;
	r->prec = be->precision;
	r->next_fake = fake;
	/* as ncf-train takes it: the loss left on the device */
	return cuda_train_step(be, 0, 0, n, NULL);
}

} /* namespace NCF_CUDA_NS */

using namespace NCF_CUDA_NS;

/* ---- exported ----------------------------------------------------------- */

const struct ncf_backend_i ncf_backend_cuda = {
	"cuda",			/* name */
	NCF_DEVICE_CUDA,	/* device */
	cuda_init,		/* init */
	cuda_free,		/* free */
	cuda_set_state,		/* set_state */
	cuda_get_state,		/* get_state */
	cuda_set_train_data,	/* set_train_data */
	cuda_set_eval_data,	/* set_eval_data */
	cuda_train_step,	/* train_step */
	cuda_grad,		/* grad */
	cuda_eval_ranks,	/* eval_ranks */
	cuda_score,		/* score */
	cuda_logits,		/* logits */
	cuda_sync,		/* sync */
	cuda_describe,		/* describe */
	cuda_resident_set,	/* resident_set */
	cuda_score_resident,	/* score_resident */
	cuda_take_loss,		/* take_loss */
	cuda_host_alloc,	/* host_alloc */
	cuda_host_free,		/* host_free */
	NULL,			/* precision: cuda_init refuses what the GPU lacks */
};

void ncf_cuda_set_loss_scale(struct ncf_backend *be, float scale, uint32_t growth_interval)
{
	struct cu *c = impl(be);
	c->loss_scale = scale;
	c->growth_interval = growth_interval ? growth_interval : 1;
	c->good_steps = 0;
}

float ncf_cuda_loss_scale(const struct ncf_backend *be)
{
	return impl(be)->loss_scale;
}

int ncf_cuda_step_cost(const struct ncf_shape *s, const struct ncf_hparams *hp,
		       enum ncf_precision precision, const char *dense, int64_t positives,
		       struct ncf_cuda_cost *out)
{
	memset(out, 0, sizeof *out);
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
	/* the launchers size their grids for the model's machine */
	cost_machine_init();
	const struct ncf_cuda_machine *m = cost_machine();
	int sms = g_sms;
	size_t smem_sm = g_smem_sm, smem_block = g_smem_block;
	g_sms = m->sms;
	g_smem_sm = (size_t)m->smem_sm_bytes;
	g_smem_block = (size_t)m->smem_block_bytes;
	struct cost_rec *r = (struct cost_rec *)ncf_xcalloc(1, sizeof *r);
	r->dry = 1;
	struct cost_rec *saved = cost_active;
	cost_active = r;
	int rc = dry_step(&be, r, dense, positives, hp->batch);
	if (rc == 0) {
		cost_export(r, out);
		dense_names(impl(&be), s, out->dense);
	}
	cuda_free(&be);
	cost_active = saved;
	free(r);
	g_sms = sms;
	g_smem_sm = smem_sm;
	g_smem_block = smem_block;
	return rc;
}

void ncf_cuda_cost_model(FILE *out)
{
	cost_model_describe(out);
}

#ifdef NCF_CUDA_EMULATE
#define MODULE_KIND "cuda, emulated on the CPU"
#else
#define MODULE_KIND "cuda"
#endif

static const struct ncf_cuda_api module = {
	NCF_CUDA_ABI,
	(uint32_t)sizeof(struct ncf_backend),
	(uint32_t)sizeof(struct ncf_backend_i),
	NCF_VERSION,
	MODULE_KIND,
	&ncf_backend_cuda,
	ncf_cuda_usable,
	ncf_cuda_describe_versions,
	ncf_cuda_set_loss_scale,
	ncf_cuda_loss_scale,
	ncf_cuda_device_info,
	ncf_cuda_step_cost,
	ncf_cuda_cost_model,
	ncf_cuda_machine_of,
	ncf_cuda_copy_bandwidth,
	ncf_cuda_graph_counts,
};

const struct ncf_cuda_api *ncf_cuda_module(void)
{
	return &module;
}
