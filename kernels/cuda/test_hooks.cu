/*
 * test_hooks.cu - single operations of the cuda backend for the tests (see
 * test_hooks.h).  Compiled into the tests only: the emulation test
 * (tests/unit/test_cuda_emu.cc) and the GPU tests (tests/gpu), never into
 * libncf.a.  Each hook allocates what it needs, runs one launcher of
 * kernels.cuh on the backend's stream, copies the result back and frees.
 */
#include "dense.cuh"
#include "graphs.cuh"
#include "test_hooks.h"

using namespace NCF_CUDA_NS;

/* Device buffers of one hook, freed together. */
struct bufs {
	uint32_t *u[4];
	uint8_t *b;
	float *f[4];
	void *temp;
};

static void bufs_free(struct bufs *x)
{
	for (int k = 0; k < 4; k++)
		dfree(x->u[k]), dfree(x->f[k]);
	dfree(x->b), dfree(x->temp);
}

static int samples_run(struct ncf_backend *be, struct bufs *x, uint32_t epoch, uint64_t first,
		       uint64_t n, uint32_t *users, uint32_t *items, uint8_t *labels)
{
	struct cu *c = impl(be);
	uint64_t S = ncf_epoch_check("cuda", c->P, be->hp.negatives, c->E, first, n);
	if (S == 0)
		return -1;
	NCF_TRY(DALLOC(x->u[0], n));
	NCF_TRY(DALLOC(x->u[1], n));
	NCF_TRY(DALLOC(x->b, n));
	sample_src src = {stream_of(be, c, S, epoch), first};
	sample_out so = {x->u[0], x->u[1], x->b};
	NCF_TRY(sample_cuda(src, n, so, c->s));
	CUDA_TRY(cudaMemcpyAsync(users, x->u[0], n * 4, cudaMemcpyDeviceToHost, c->s));
	CUDA_TRY(cudaMemcpyAsync(items, x->u[1], n * 4, cudaMemcpyDeviceToHost, c->s));
	CUDA_TRY(cudaMemcpyAsync(labels, x->b, n, cudaMemcpyDeviceToHost, c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

int ncf_cuda_debug_samples(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			   uint32_t *users, uint32_t *items, uint8_t *labels)
{
	struct cu *c = impl(be);
	if (!c->have_td) {
		ncf_error("cuda backend: no training data");
		return -1;
	}
	struct bufs x;
	memset(&x, 0, sizeof x);
	int rc = samples_run(be, &x, epoch, first, n, users, items, labels);
	bufs_free(&x);
	return rc ? -1 : 0;
}

static int dropout_run(struct ncf_backend *be, struct bufs *x, const dropout_k &dk,
		       uint32_t layer, size_t n, uint32_t H, const float *z, float *out)
{
	struct cu *c = impl(be);
	size_t nh = n * H;
	NCF_TRY(DALLOC(x->f[0], nh));
	NCF_TRY(DALLOC(x->f[1], H));
	CUDA_TRY(cudaMemsetAsync(x->f[1], 0, (size_t)H * sizeof(float), c->s));
	CUDA_TRY(cudaMemcpyAsync(x->f[0], z, nh * sizeof(float), cudaMemcpyHostToDevice, c->s));
	NCF_TRY(bias_relu_dropout_cuda<float>(n, H, x->f[0], x->f[1], dk, layer, NULL, c->s));
	CUDA_TRY(cudaMemcpyAsync(out, x->f[0], nh * sizeof(float), cudaMemcpyDeviceToHost, c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

int ncf_cuda_debug_dropout(struct ncf_backend *be, uint32_t epoch, uint64_t pos0, uint32_t layer,
			   size_t n, uint32_t H, const float *z, float *out)
{
	struct bufs x;
	memset(&x, 0, sizeof x);
	int rc = dropout_run(be, &x, dropout_of(&be->hp, epoch, pos0), layer, n, H, z, out);
	bufs_free(&x);
	return rc ? -1 : 0;
}

static int adam_run(struct ncf_backend *be, struct bufs *x, float *p, float *m, float *v,
		    const float *g, size_t n, uint64_t step)
{
	struct cu *c = impl(be);
	const float *host[4] = {p, m, v, g};
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, step, &k);
	for (int i = 0; i < 4; i++) {
		NCF_TRY(DALLOC(x->f[i], n));
		CUDA_TRY(cudaMemcpyAsync(x->f[i], host[i], n * sizeof(float),
					 cudaMemcpyHostToDevice, c->s));
	}
	adam_pass a = {x->f[0], x->f[1], x->f[2], x->f[3], n, k, 1.0f, NULL};
	NCF_TRY(adam_cuda(a, c->s));
	float *back[3] = {p, m, v};
	for (int i = 0; i < 3; i++)
		CUDA_TRY(cudaMemcpyAsync(back[i], x->f[i], n * sizeof(float),
					 cudaMemcpyDeviceToHost, c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

int ncf_cuda_debug_adam(struct ncf_backend *be, float *p, float *m, float *v, const float *g,
			size_t n, uint64_t step)
{
	struct bufs x;
	memset(&x, 0, sizeof x);
	int rc = adam_run(be, &x, p, m, v, g, n, step);
	bufs_free(&x);
	return rc ? -1 : 0;
}

void ncf_cuda_debug_graphs(const struct ncf_backend *be, uint64_t *captured, uint64_t *launched)
{
	struct graph_counts n = graphs_counts(impl(be));
	*captured = n.captures;
	*launched = n.launches;
}

void ncf_cuda_debug_step_graph(const struct ncf_backend *be, uint64_t *captured,
			       uint64_t *instantiated, uint64_t *launched)
{
	struct graph_counts n = graphs_counts(impl(be));
	*captured = n.step_captures;
	*instantiated = n.step_instantiations;
	*launched = n.step_launches;
}

/* Stops with a fault. */
__global__ void fault_kernel(int *x)
{
	if (NCF_TID == 0)
		__trap();
	x[0] = 1;
}

static int fault_run(struct cu *c, struct bufs *x)
{
	NCF_TRY(DALLOC(x->u[0], 4));
	NCF_LAUNCH(fault_kernel, 1, 32, 0, c->s, (int *)x->u[0]);
	CUDA_TRY(cudaGetLastError()); /* launched: the fault comes later */
	CUDA_TRY(cudaMemsetAsync(x->u[0], 0, 4, c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

int ncf_cuda_debug_fault(struct ncf_backend *be)
{
	struct bufs x;
	memset(&x, 0, sizeof x);
	int rc = fault_run(impl(be), &x);
	bufs_free(&x);
	return rc ? -1 : 0;
}

#ifdef NCF_CUDA_EMULATE
void ncf_cuda_emu_lazy(int on)
{
	cudaDeviceSynchronize();
	ncf_emu_lazy = on;
}

void ncf_cuda_emu_blas_no_capture(int on)
{
	ncf_emu_blas_no_capture = on;
}

void ncf_cuda_emu_devices(int n)
{
	ncf_emu_devices = n;
}

void ncf_cuda_emu_reset_faults(void)
{
	ncf_emu_reset_faults();
	NCF_CUDA_NS::g_fault_reported = 0;
}
#endif

int ncf_cuda_debug_step_cost(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			     double *loss_sum, struct ncf_cuda_cost *out)
{
	struct cost_rec *r = (struct cost_rec *)ncf_xcalloc(1, sizeof *r);
	struct cost_rec *saved = cost_active;
	cost_active = r;
	int rc = ncf_backend_train_step(be, epoch, first, n, loss_sum);
	cost_active = saved;
	cost_export(r, out);
	free(r);
	return rc;
}

int ncf_cuda_debug_emu_counts(unsigned long c[4])
{
#ifdef NCF_CUDA_EMULATE
	/* the counts are of what ran: first run what is queued (lazy mode) */
	ncf_emu_run_all();
	for (int k = 0; k < 4; k++)
		c[k] = ncf_emu_count[k];
	return 0;
#else
	return -1;
#endif
}

/* ---- the fused dense layers (mlp.cu) ------------------------------------ */

/* Host floats to a device array of T (rounded on the host). */
template <typename T> static int upload_as(T **dst, const float *x, size_t n, cudaStream_t s)
{
	NCF_TRY(DALLOC(*dst, n));
	T *h = (T *)malloc((n ? n : 1) * sizeof(T));
	for (size_t j = 0; j < n; j++)
		h[j] = from_f32<T>(x[j]);
	int rc = CUDA_CHECK(cudaMemcpyAsync(*dst, h, n * sizeof(T), cudaMemcpyHostToDevice, s));
	if (rc == 0)
		rc = CUDA_CHECK(cudaStreamSynchronize(s));
	free(h);
	return rc;
}

template <typename T> static int download_as(float *x, const T *src, size_t n, cudaStream_t s)
{
	T *h = (T *)malloc((n ? n : 1) * sizeof(T));
	int rc = CUDA_CHECK(cudaMemcpyAsync(h, src, n * sizeof(T), cudaMemcpyDeviceToHost, s));
	if (rc == 0)
		rc = CUDA_CHECK(cudaStreamSynchronize(s));
	for (size_t j = 0; rc == 0 && j < n; j++)
		x[j] = to_f32(h[j]);
	free(h);
	return rc;
}

/* The device copies of a layer case: A, W, bh in T, the outputs. */
template <typename T> struct layer_bufs {
	T *a, *w, *h, *y;
	float *b, *pt, *pw, *odb, *odw;
	double *ls, *lo;
};
template <typename T> static void layer_bufs_free(layer_bufs<T> *x)
{
	dfree(x->a), dfree(x->w), dfree(x->h), dfree(x->y), dfree(x->b), dfree(x->pt);
	dfree(x->pw), dfree(x->odb), dfree(x->odw), dfree(x->ls), dfree(x->lo);
}

template <typename T>
static int linear_run(struct ncf_backend *be, const struct ncf_cuda_layer_case *lc, int backward,
		      float *res, float *part, layer_bufs<T> *x)
{
	struct cu *c = impl(be);
	size_t rows = lc->rows, nb = (rows + BWD_ROWS - 1) / BWD_ROWS;
	uint32_t in = lc->in, out = lc->out;
	int tf32 = lc->mode == 1;
	dropout_k dk = dropout_of(&be->hp, lc->epoch, lc->pos0);
	NCF_TRY(mlp_setup());
	NCF_TRY(upload_as(&x->a, lc->A, rows * (backward ? out : in), c->s));
	NCF_TRY(upload_as(&x->w, lc->W, (size_t)out * in, c->s));
	if (!backward) {
		NCF_TRY(upload_as(&x->b, lc->bh, out, c->s));
		NCF_TRY(DALLOC(x->y, rows * out));
		layer_fwd<T> f = {rows, in, out, x->a, x->w, x->b, dk, lc->layer, NULL, x->y};
		NCF_TRY(linear_fwd_cuda<T>(f, tf32, c->s));
		return download_as(res, x->y, rows * out, c->s);
	}
	NCF_TRY(upload_as(&x->h, lc->bh, rows * in, c->s));
	NCF_TRY(DALLOC(x->y, rows * in));
	NCF_TRY(DALLOC(x->pt, nb * in));
	layer_bwd<T> b = {rows, in, out, x->a, x->w, x->h, dk.scale, x->y, x->pt, in, NULL};
	NCF_TRY(linear_bwd_cuda<T>(b, tf32, c->s));
	NCF_TRY(download_as(res, x->y, rows * in, c->s));
	return download_as(part, x->pt, nb * in, c->s);
}

template <typename T>
static int linear_of(struct ncf_backend *be, const struct ncf_cuda_layer_case *lc, int backward,
		     float *res, float *part)
{
	layer_bufs<T> x;
	memset(&x, 0, sizeof x);
	int rc = linear_run<T>(be, lc, backward, res, part, &x);
	layer_bufs_free(&x);
	return rc ? -1 : 0;
}

int ncf_cuda_debug_linear(struct ncf_backend *be, const struct ncf_cuda_layer_case *lc,
			  int backward, float *res, float *part)
{
	switch (lc->mode) {
	case 2:
		return linear_of<bf16>(be, lc, backward, res, part);
	case 3:
		return linear_of<f16>(be, lc, backward, res, part);
	default:
		return linear_of<float>(be, lc, backward, res, part);
	}
}

/* linear_bwdw_cuda, then reduce_partials_cuda on its partials. */
template <typename T>
static int linear_w_run(struct ncf_backend *be, const struct ncf_cuda_layer_case *lc,
			float *const out3[3], layer_bufs<T> *x)
{
	struct cu *c = impl(be);
	size_t rows = lc->rows;
	uint32_t in = lc->in, out = lc->out, G = bwdw_groups(rows);
	float scale = dropout_of(&be->hp, 0, 0).scale;
	part_map m;
	memset(&m, 0, sizeof m);
	NCF_TRY(mlp_setup());
	NCF_TRY(upload_as(&x->a, lc->A, rows * out, c->s));
	NCF_TRY(upload_as(&x->w, lc->W, (size_t)out * in, c->s));
	NCF_TRY(upload_as(&x->h, lc->bh, rows * in, c->s));
	NCF_TRY(DALLOC(x->y, rows * in));
	NCF_TRY(DALLOC(x->pt, G * in));
	NCF_TRY(DALLOC(x->pw, (size_t)G * out * in));
	NCF_TRY(DALLOC(x->odb, in));
	NCF_TRY(DALLOC(x->odw, (size_t)out * in));
	NCF_TRY(DALLOC(x->ls, 1));
	NCF_TRY(DALLOC(x->lo, 1));
	CUDA_TRY(cudaMemsetAsync(x->ls, 0, sizeof(double), c->s));
	m.seg[m.n++] = {x->pt, x->odb, G, in, in};
	m.seg[m.n++] = {x->pw, x->odw, G, out * in, out * in};
	m.loss = x->ls;
	m.loss_rows = 1;
	m.loss_out = x->lo;
	layer_bwd<T> b = {rows, in, out, x->a, x->w, x->h, scale, x->y, x->pt, in, x->pw};
	NCF_TRY(linear_bwdw_cuda<T>(b, lc->mode == 1, c->s));
	NCF_TRY(reduce_partials_cuda(m, c->s));
	NCF_TRY(download_as(out3[0], x->y, rows * in, c->s));
	NCF_TRY(download_as(out3[1], x->odb, in, c->s));
	return download_as(out3[2], x->odw, (size_t)out * in, c->s);
}

template <typename T>
static int linear_w_of(struct ncf_backend *be, const struct ncf_cuda_layer_case *lc,
		       float *const out3[3])
{
	layer_bufs<T> x;
	memset(&x, 0, sizeof x);
	int rc = linear_w_run<T>(be, lc, out3, &x);
	layer_bufs_free(&x);
	return rc ? -1 : 0;
}

int ncf_cuda_debug_linear_w(struct ncf_backend *be, const struct ncf_cuda_layer_case *lc,
			    float *dX, float *db, float *dW)
{
	float *const out3[3] = {dX, db, dW};
	switch (lc->mode) {
	case 2:
		return linear_w_of<bf16>(be, lc, out3);
	case 3:
		return linear_w_of<f16>(be, lc, out3);
	default:
		return linear_w_of<float>(be, lc, out3);
	}
}

void ncf_cuda_debug_dense(const struct ncf_backend *be, const char **names)
{
	dense_names(impl(be), &be->shape, names);
}
