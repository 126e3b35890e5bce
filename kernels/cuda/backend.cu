/*
 * backend.cu - the cuda backend (DESIGN.md section 6): NeuMF training and
 * evaluation on an NVIDIA GPU, the same function as the reference
 * (kernels/cpu/reference.c) and the fast cpu backend.  This file is the
 * interface (ncf_backend_cuda): device setup, state and data in device
 * memory, the training step (the gradient from step.cu, the all-reduce
 * from nccl.cu, one fused dense Adam pass), evaluation and scoring.  See
 * backend.cuh for the other files and the legend.
 *
 * Everything lives on the device: parameters, Adam moments and the gradient
 * (fp32 always), the training CSR (so that the sample stream is generated
 * there), the evaluation candidates, the activations.  The host only
 * launches work (on the fused path one CUDA graph per step) and reads back
 * the loss: once per step on the unfused path and in fp16 (whose loss
 * scaling needs each step's skip flag), else when ncf_backend_take_loss
 * asks (ncf-train: once per epoch).
 *
 * Precision (be->precision): fp32 (cuBLAS pinned to fp32 math, no TF32: the
 * parity tests use it), tf32 (fp32 storage, TF32 tensor-core GEMMs; the
 * default on compute capability 8.0+), bf16 and fp16 (activations, the
 * tables AU/AI and a copy of the parameters from mlp_user on (plo) in 16
 * bits for the GEMMs, fp32 accumulation; master weights, Adam state and
 * gradients stay fp32).  fp16 uses dynamic loss scaling as PyTorch's
 * GradScaler: dlogit is multiplied by the scale (2^15 at start), an inf or
 * NaN anywhere in the gradient skips the step (Adam's step count does not
 * advance) and halves the scale, 2000 good steps in a row double it.  The
 * scale is not saved in checkpoints: a resumed run starts again at 2^15.
 *
 * Reproducibility: no float atomics; every reduction has a fixed order (see
 * kernels.cuh), cuBLAS is deterministic for a given GPU and version, so a
 * run repeats bit for bit on the same GPU model and software.
 *
 * Scoring (score.cu) keeps ids, the sigmoid and the id check on the
 * device, with pinned double-buffered transfers and CUDA graphs.
 *
 * Many ranks: one GPU per rank, the rank's local rank on its node; a node
 * with more ranks than GPUs is refused when the backend opens (-3), and the
 * NCCL communicator of a job of several ranks is made then too.
 *
 * NCF_CUDA_PROFILE=1 in the environment times the phases of every training
 * step with CUDA events and prints milliseconds per step for each when the
 * backend is closed (bench/bench_gpu.c turns it on).  NCF_CUDA_SYNC=1
 * synchronises after every launch and library call and names the one that
 * failed (common.cuh).
 */
#include <math.h>
#include <unistd.h>

#include "backend.cuh"

namespace NCF_CUDA_NS {

static const char *const ph_name[PH_N] = {
	"samples", "tables", "forward", "head", "mlp_backward", "sort", "layer1_backward",
	"gmf_loss", "allreduce_adam",
};

/* ---- NCF_CUDA_PROFILE ------------------------------------------------- */

/* After a step's synchronisation: add the phases' times. */
static void prof_collect(struct cu *c)
{
	if (!c->prof || c->prof_marked != (1 << (PH_N + 1)) - 1) {
		c->prof_marked = 0;
		return;
	}
	for (int k = 0; k < PH_N; k++) {
		float ms = 0;
		if (cudaEventElapsedTime(&ms, c->ev[k], c->ev[k + 1]) == cudaSuccess)
			c->prof_ms[k] += ms;
	}
	c->prof_steps++;
	c->prof_marked = 0;
}

/* At close: milliseconds per step for each phase on stderr. */
static void prof_report(struct ncf_backend *be, struct cu *c)
{
	if (!c->prof_steps)
		return;
	double tot = 0;
	for (int k = 0; k < PH_N; k++)
		tot += c->prof_ms[k];
	fprintf(stderr, "cuda profile (%s, %llu steps): ms per step\n",
		ncf_precision_name(be->precision), (unsigned long long)c->prof_steps);
	for (int k = 0; k < PH_N; k++)
		fprintf(stderr, "cuda profile: %-16s %8.3f  %5.1f%%\n", ph_name[k],
			c->prof_ms[k] / (double)c->prof_steps,
			tot > 0 ? 100.0 * c->prof_ms[k] / tot : 0.0);
	fprintf(stderr, "cuda profile: %-16s %8.3f\n", "total", tot / (double)c->prof_steps);
}

/* ---- row buffers ------------------------------------------------------- */

static size_t max_width(const struct ncf_shape *s)
{
	size_t m = s->factors + 1;
	for (uint32_t k = 1; k < s->n_layers; k++)
		if (s->layers[k] > m)
			m = s->layers[k];
	return m;
}

int grow_red(struct cu *c, size_t floats)
{
	if (floats <= c->red_cap)
		return 0;
	dfree(c->red);
	c->red_cap = 0;
	NCF_TRY(DALLOC(c->red, floats));
	c->red_cap = floats;
	return 0;
}

static void free_rows(struct cu *c)
{
	dfree(c->su), dfree(c->si), dfree(c->lab), dfree(c->dl), dfree(c->loss);
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		dfree(c->h[k]), dfree(c->d[k]);
	dfree(c->ku), dfree(c->ju), dfree(c->ki), dfree(c->ji), dfree(c->itmp);
	dfree(c->sort_tmp), dfree(c->seg_head), dfree(c->seg_tail), dfree(c->dred);
	c->sort_tmp_bytes = 0;
	c->cap = 0;
}

int ensure_rows(struct ncf_backend *be, struct cu *c, size_t n)
{
	if (n <= c->cap)
		return 0;
	const struct ncf_shape *s = &be->shape;
	free_rows(c);
	size_t wmax = max_width(s);
	NCF_TRY(DALLOC(c->su, n));
	NCF_TRY(DALLOC(c->si, n));
	NCF_TRY(DALLOC(c->lab, n));
	NCF_TRY(DALLOC(c->dl, n));
	NCF_TRY(DALLOC(c->loss, n));
	NCF_TRY(DALLOC(c->ku, n));
	NCF_TRY(DALLOC(c->ju, n));
	NCF_TRY(DALLOC(c->ki, n));
	NCF_TRY(DALLOC(c->ji, n));
	NCF_TRY(DALLOC(c->itmp, n));
	for (uint32_t k = 1; k < s->n_layers; k++) {
		NCF_TRY(DALLOC_BYTES(&c->h[k], n * s->layers[k] * c->es));
		NCF_TRY(DALLOC_BYTES(&c->d[k], n * s->layers[k] * c->es));
	}
	c->rows_gen++; /* graphs captured on the old buffers are stale */
	size_t seg = seg_scratch(n, wmax);
	NCF_TRY(DALLOC(c->seg_head, seg));
	NCF_TRY(DALLOC(c->seg_tail, seg));
	NCF_TRY(DALLOC(c->dred, sum_scratch(n)));
	size_t bu, bi;
	NCF_TRY(sort_temp_bytes(n, id_bits(s->users), &bu));
	NCF_TRY(sort_temp_bytes(n, id_bits(s->items), &bi));
	c->sort_tmp_bytes = bu > bi ? bu : bi;
	NCF_TRY(DALLOC_BYTES(&c->sort_tmp, c->sort_tmp_bytes));
	size_t red = colsum_scratch(n, wmax);
	size_t hg = head_grad_scratch(n, s->factors, ncf_shape_last(s));
	if (hg > red)
		red = hg;
	NCF_TRY(grow_red(c, red));
	c->cap = n;
	return 0;
}

/* ---- init and free ------------------------------------------------------ */

static void cuda_free(struct ncf_backend *be)
{
	struct cu *c = impl(be);
	if (!c)
		return;
	if (c->have_stream)
		cudaStreamSynchronize(c->s);
	if (c->prof) {
		prof_report(be, c);
		for (int k = 0; k <= PH_N; k++)
			cudaEventDestroy(c->ev[k]);
	}
	scorer_free(c);
	graphs_free(c);
	free_rows(c);
	fused_free(c);
	dfree(c->params), dfree(c->m), dfree(c->v), dfree(c->grad), dfree(c->plo);
	dfree(c->AU), dfree(c->AI), dfree(c->dAU), dfree(c->dAI);
	dfree(c->entry_user), dfree(c->items_csr), dfree(c->offsets);
	dfree(c->test), dfree(c->neg), dfree(c->counted);
	dfree(c->red), dfree(c->loss_dev), dfree(c->loss_acc), dfree(c->flag), dfree(c->ranks);
	nccl_free(c);
	if (c->have_blas)
		cublasDestroy(c->blas);
	if (c->have_stream)
		cudaStreamDestroy(c->s);
	free(c);
	be->impl = NULL;
}

/* The device of this rank, its precision and element type, a stream and
 * cuBLAS on it.  Returns 0, -1 or -3 (a precision the device lacks). */
static int open_device(struct ncf_backend *be, struct cu *c)
{
	int count = 0;
	CUDA_TRY(cudaGetDeviceCount(&count));
	if (count < 1) {
		ncf_error("cuda backend: no CUDA device");
		return -1;
	}
	struct ncf_dist *d = be->dist;
	if (d->mpi && d->local_size > count) { /* (ranks in one process share: tests) */
		char host[256] = "this host";
		if (gethostname(host, sizeof host) != 0)
			snprintf(host, sizeof host, "this host");
		host[sizeof host - 1] = 0;
		ncf_error("cuda backend: %d ranks on %s and %d GPU%s there: start at most one rank "
			  "per GPU (mpirun -npernode %d, or more nodes)",
			  d->local_size, host, count, count == 1 ? "" : "s", count);
		return -3; /* two ranks on one GPU: not available */
	}
	c->dev = (d->local_rank > 0 ? d->local_rank : 0) % count; /* the local rank, checked above */
	CUDA_TRY(cudaSetDevice(c->dev));
	CUDA_TRY(cudaGetDeviceProperties(&c->prop, c->dev));
	int ampere = c->prop.major >= 8; /* TF32 and bf16 tensor cores */
	enum ncf_precision p = be->precision;
	if (p == NCF_PRECISION_DEFAULT)
		p = ampere ? NCF_PRECISION_TF32 : NCF_PRECISION_FP32;
	if ((p == NCF_PRECISION_TF32 || p == NCF_PRECISION_BF16) && !ampere) {
		ncf_error("--precision %s needs a GPU of compute capability 8.0 or newer; %s is %d.%d",
			  ncf_precision_name(p), c->prop.name, c->prop.major, c->prop.minor);
		return -3; /* a feature the device lacks: exit 3 */
	}
	be->precision = p;
	set_precision(be, c, ampere);
	CUDA_TRY(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
	c->have_stream = 1;
	CUBLAS_TRY(cublasCreate(&c->blas));
	c->have_blas = 1;
	CUBLAS_TRY(cublasSetStream(c->blas, c->s));
	CUBLAS_TRY(cublasSetMathMode(c->blas, p == NCF_PRECISION_FP32 ? CUBLAS_DEFAULT_MATH
								 : CUBLAS_TF32_TENSOR_OP_MATH));
	return graphs_init(c);
}

void set_precision(struct ncf_backend *be, struct cu *c, int ampere)
{
	enum ncf_precision p = be->precision;
	c->act = p == NCF_PRECISION_BF16 ? ACT_BF16 : p == NCF_PRECISION_FP16 ? ACT_F16 : ACT_F32;
	c->es = c->act == ACT_F32 ? 4 : 2;
	c->compute_f32 = p == NCF_PRECISION_FP32 || !ampere ? CUBLAS_COMPUTE_32F
							     : CUBLAS_COMPUTE_32F_FAST_TF32;
}

int alloc_state(struct ncf_backend *be, struct cu *c)
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

int path_parse(const char *name, int *path)
{
	*path = PATH_FUSED;
	if (!name || !*name || !strcmp(name, "fused"))
		return 0;
	if (!strcmp(name, "unfused")) {
		*path = PATH_UNFUSED;
		return 0;
	}
	ncf_error("cuda backend: NCF_CUDA_PATH=%s: not fused or unfused", name);
	return -1;
}

/* Is the environment variable name set to something other than "" or "0"? */
static int env_on(const char *name)
{
	const char *v = getenv(name);
	return v && *v && strcmp(v, "0");
}

static int cuda_init(struct ncf_backend *be)
{
	struct cu *c = (struct cu *)ncf_xcalloc(1, sizeof *c);
	be->impl = c;
	g_sync = env_on("NCF_CUDA_SYNC");
	int rc = open_device(be, c);
	if (rc != 0)
		return rc;
	NCF_TRY(alloc_state(be, c));
	NCF_TRY(path_parse(getenv("NCF_CUDA_PATH"), &c->path));
	NCF_TRY(nccl_open(be, c));
	if (env_on("NCF_CUDA_PROFILE")) {
		for (int k = 0; k <= PH_N; k++)
			CUDA_TRY(cudaEventCreate(&c->ev[k]));
		c->prof = 1;
	}
	return 0;
}

/* ---- state and data ----------------------------------------------------- */

static int cuda_set_state(struct ncf_backend *be, const float *params, const float *m,
			  const float *v)
{
	struct cu *c = impl(be);
	size_t n = be->layout.total * sizeof(float);
	c->plo_valid = c->tables_valid = 0;
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
	CUDA_TRY(cudaStreamSynchronize(c->s));
	c->P = d->positives;
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

/* The all-reduced gradient's Adam pass (skipped on the device when fp16
 * found an inf or NaN), then the loss and the skip flag to the host. */
int step_work(struct ncf_backend *be, struct cu *c, uint32_t epoch, uint64_t first, uint64_t n)
{
	size_t total = be->layout.total;
	NCF_TRY(compute_grad_any(be, epoch, first, n));
	mark(c, PH_ALLREDUCE_ADAM);
	NCF_TRY(allreduce(be, c->grad, total));
	const int *skip = NULL;
	if (c->act == ACT_F16) {
		DMEMSET_TRY(c->flag, sizeof(int), c->s, "clear_flag");
		NCF_TRY(nonfinite_cuda(c->grad, total, c->flag, c->s));
		skip = c->flag;
	}
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, be->step + 1, &k);
	if (fused_path(be, c))
		NCF_TRY(adam_fused(be, c, k, 1.0f / c->loss_scale, skip));
	else
		NCF_TRY(adam_cuda(c->params, c->m, c->v, c->grad, total, k, 1.0f / c->loss_scale,
				  skip, c->s));
	mark(c, PH_N);
	return 0;
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

/*
 * A step: the work (step_work) as one CUDA graph where it can be
 * (graphs.cu), else launch by launch; then the loss.  With loss_sum NULL
 * on the fused path (fp16 aside, whose host must see each step's skip
 * flag; NCF_CUDA_PROFILE aside, which times each step) the loss is added
 * on the device to c->loss_acc and nothing waits: ncf_backend_take_loss
 * reads it.
 */
static int cuda_train_step(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			   double *loss_sum)
{
	struct cu *c = impl(be);
	if (loss_sum)
		*loss_sum = 0;
	c->prof_marked = 0;
	int fused = fused_path(be, c);
	c->loss_to_acc = !loss_sum && fused && c->act != ACT_F16 && !c->prof;
	int g = graph_step(be, c, epoch, first, n);
	if (g < 0)
		return -1;
	if (g > 0)
		NCF_TRY(step_work(be, c, epoch, first, n));
	double loss = 0;
	int bad = 0;
	if (!c->loss_to_acc)
		NCF_TRY(read_loss(c, &loss, &bad));
	c->loss_to_acc = 0;
	prof_collect(c);
	c->tables_valid = 0;
	if (!fused)
		c->plo_valid = 0; /* the fused path's Adam wrote the 16-bit copy */
	if (loss_sum)
		*loss_sum = loss;
	else
		c->loss_host += loss;
	if (bad) { /* the step was skipped */
		c->loss_scale *= 0.5f;
		c->good_steps = 0;
		ncf_debug("fp16: inf/NaN gradient at epoch %u, position %llu: step skipped, loss "
			  "scale now %g",
			  epoch + 1, (unsigned long long)first, (double)c->loss_scale);
		return 0;
	}
	be->step++;
	if (c->act == ACT_F16 && ++c->good_steps >= c->growth_interval) {
		c->loss_scale *= 2.0f;
		c->good_steps = 0;
	}
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

static int cuda_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		     float *grad, double *loss_sum)
{
	struct cu *c = impl(be);
	size_t total = be->layout.total;
	double loss = 0;
	NCF_TRY(compute_grad_any(be, epoch, first, n));
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

/* ---- evaluation and scoring --------------------------------------------- */

static int cuda_eval_ranks(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks)
{
	struct cu *c = impl(be);
	if (!c->have_ed) {
		ncf_error("cuda backend: no evaluation data");
		return -1;
	}
	if (u1 <= u0)
		return 0;
	size_t per = (size_t)c->N + 1, nusers = u1 - u0;
	size_t upc = EVAL_CHUNK / per ? EVAL_CHUNK / per : 1;
	if (upc > nusers)
		upc = nusers;
	NCF_TRY(ensure_rows(be, c, upc * per));
	if (nusers > c->ranks_cap) {
		dfree(c->ranks);
		c->ranks_cap = 0;
		NCF_TRY(DALLOC(c->ranks, nusers));
		c->ranks_cap = nusers;
	}
	for (size_t a = u0; a < u1; a += upc) {
		uint32_t nb = (uint32_t)(u1 - a < upc ? u1 - a : upc);
		NCF_TRY(eval_pairs_cuda((uint32_t)a, nb, c->N, c->test, c->neg, c->su, c->si,
					c->s));
		NCF_TRY(forward_logits_any(be, c, (size_t)nb * per, c->dl, 0));
		NCF_TRY(rank_cuda(c->dl, c->counted, (uint32_t)a, nb, c->N, c->ranks + (a - u0),
				  c->s));
	}
	CUDA_TRY(cudaMemcpyAsync(ranks, c->ranks, nusers * sizeof *ranks, cudaMemcpyDeviceToHost,
				 c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
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
	return resident_set(be, impl(be), users, items, n);
}

static int cuda_score_resident(struct ncf_backend *be, size_t n, float *out)
{
	return score_resident(be, impl(be), n, out, 1);
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
