/*
 * test_hooks.cu - single operations of the cuda backend for the tests (see
 * test_hooks.h).  Compiled into the tests only: the emulation test
 * (tests/unit/test_cuda_emu.cc) and the GPU tests (tests/gpu), never into
 * libncf.a.  Each hook allocates what it needs, runs one launcher of
 * kernels.cuh on the backend's stream, copies the result back and frees.
 */
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

static int samples_run(struct ncf_backend *be, struct cu *c, struct bufs *x, uint32_t epoch,
		       uint64_t first, uint64_t n, uint32_t *users, uint32_t *items,
		       uint8_t *labels)
{
	uint64_t S = ncf_epoch_check("cuda", c->P, be->hp.negatives, c->E, first, n);
	if (S == 0)
		return -1;
	NCF_TRY(DALLOC(x->u[0], n));
	NCF_TRY(DALLOC(x->u[1], n));
	NCF_TRY(DALLOC(x->b, n));
	NCF_TRY(sample_cuda(stream_of(be, c, S, epoch), first, n, x->u[0], x->u[1], x->b, c->s));
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
	int rc = samples_run(be, c, &x, epoch, first, n, users, items, labels);
	bufs_free(&x);
	return rc ? -1 : 0;
}

static int dropout_run(struct ncf_backend *be, struct cu *c, struct bufs *x, uint32_t epoch,
		       uint64_t pos0, uint32_t layer, size_t n, uint32_t H, const float *z,
		       float *out)
{
	dropout_k dk = dropout_of(&be->hp, epoch, pos0);
	size_t nh = n * H;
	NCF_TRY(DALLOC(x->f[0], nh));
	NCF_TRY(DALLOC(x->f[1], H));
	CUDA_TRY(cudaMemsetAsync(x->f[1], 0, (size_t)H * sizeof(float), c->s));
	CUDA_TRY(cudaMemcpyAsync(x->f[0], z, nh * sizeof(float), cudaMemcpyHostToDevice, c->s));
	NCF_TRY(bias_relu_dropout_cuda<float>(n, H, x->f[0], x->f[1], dk, layer, c->s));
	CUDA_TRY(cudaMemcpyAsync(out, x->f[0], nh * sizeof(float), cudaMemcpyDeviceToHost, c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

int ncf_cuda_debug_dropout(struct ncf_backend *be, uint32_t epoch, uint64_t pos0, uint32_t layer,
			   size_t n, uint32_t H, const float *z, float *out)
{
	struct bufs x;
	memset(&x, 0, sizeof x);
	int rc = dropout_run(be, impl(be), &x, epoch, pos0, layer, n, H, z, out);
	bufs_free(&x);
	return rc ? -1 : 0;
}

static int adam_run(struct ncf_backend *be, struct cu *c, struct bufs *x, float *p, float *m,
		    float *v, const float *g, size_t n, uint64_t step)
{
	const float *host[4] = {p, m, v, g};
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, step, &k);
	for (int i = 0; i < 4; i++) {
		NCF_TRY(DALLOC(x->f[i], n));
		CUDA_TRY(cudaMemcpyAsync(x->f[i], host[i], n * sizeof(float),
					 cudaMemcpyHostToDevice, c->s));
	}
	NCF_TRY(adam_cuda(x->f[0], x->f[1], x->f[2], x->f[3], n, k, 1.0f, NULL, c->s));
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
	int rc = adam_run(be, impl(be), &x, p, m, v, g, n, step);
	bufs_free(&x);
	return rc ? -1 : 0;
}

static int segsum_run(struct cu *c, struct bufs *x, const uint32_t *keys, size_t n, uint32_t K,
		      const float *src, uint32_t H, float *out)
{
	size_t tb = 0;
	int bits = id_bits(K);
	for (int i = 0; i < 4; i++)
		NCF_TRY(DALLOC(x->u[i], n)); /* keys, sorted keys, scratch, rows */
	NCF_TRY(DALLOC(x->f[0], n * H));
	NCF_TRY(DALLOC(x->f[1], (size_t)K * H));
	NCF_TRY(DALLOC(x->f[2], seg_scratch(n, H)));
	NCF_TRY(DALLOC(x->f[3], seg_scratch(n, H)));
	NCF_TRY(sort_temp_bytes(n, bits, &tb));
	NCF_TRY(DALLOC_BYTES(&x->temp, tb));
	CUDA_TRY(cudaMemcpyAsync(x->u[0], keys, n * 4, cudaMemcpyHostToDevice, c->s));
	CUDA_TRY(cudaMemcpyAsync(x->f[0], src, n * H * sizeof(float), cudaMemcpyHostToDevice,
				 c->s));
	CUDA_TRY(cudaMemsetAsync(x->f[1], 0, (size_t)K * H * sizeof(float), c->s));
	NCF_TRY(sort_by_key_cuda(x->u[0], n, bits, x->u[1], x->u[2], x->u[3], x->temp, tb, c->s));
	NCF_TRY(segsum_rows_cuda<float>(x->u[1], x->u[3], n, x->f[0], H, K, x->f[1], x->f[2],
					x->f[3], c->s));
	CUDA_TRY(cudaMemcpyAsync(out, x->f[1], (size_t)K * H * sizeof(float),
				 cudaMemcpyDeviceToHost, c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

int ncf_cuda_debug_segsum(struct ncf_backend *be, const uint32_t *keys, size_t n, uint32_t K,
			  const float *src, uint32_t H, float *out)
{
	struct bufs x;
	memset(&x, 0, sizeof x);
	int rc = segsum_run(impl(be), &x, keys, n, K, src, H, out);
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

template <typename T>
static int linear_run(struct ncf_backend *be, struct cu *c, int backward, int tf32,
		      uint32_t epoch, uint64_t pos0, uint32_t layer, size_t rows, uint32_t in,
		      uint32_t out, const float *A, const float *W, const float *bh, float *res,
		      float *part)
{
	T *a = NULL, *w = NULL, *h = NULL, *y = NULL;
	float *b = NULL, *pt = NULL;
	size_t nb = (rows + BWD_ROWS - 1) / BWD_ROWS;
	int rc = -1;
	dropout_k dk = dropout_of(&be->hp, epoch, pos0);
	if (mlp_setup() || upload_as(&a, A, rows * (backward ? out : in), c->s) ||
	    upload_as(&w, W, (size_t)out * in, c->s))
		goto done;
	if (!backward) {
		if (upload_as(&b, bh, out, c->s) || DALLOC(y, rows * out) ||
		    linear_fwd_cuda<T>(rows, in, out, a, w, b, dk, layer, NULL, tf32, y, c->s) ||
		    download_as(res, y, rows * out, c->s))
			goto done;
	} else {
		if (upload_as(&h, bh, rows * in, c->s) || DALLOC(y, rows * in) ||
		    DALLOC(pt, nb * in) ||
		    linear_bwd_cuda<T>(rows, in, out, a, w, h, dk.scale, tf32, y, pt, in, c->s) ||
		    download_as(res, y, rows * in, c->s) || download_as(part, pt, nb * in, c->s))
			goto done;
	}
	rc = 0;
done:
	dfree(a), dfree(w), dfree(h), dfree(y), dfree(b), dfree(pt);
	return rc;
}

int ncf_cuda_debug_linear(struct ncf_backend *be, int backward, int mode, uint32_t epoch,
			  uint64_t pos0, uint32_t layer, size_t rows, uint32_t in, uint32_t out,
			  const float *A, const float *W, const float *bh, float *res, float *part)
{
	struct cu *c = impl(be);
	switch (mode) {
	case 2:
		return linear_run<bf16>(be, c, backward, 0, epoch, pos0, layer, rows, in, out, A, W,
					bh, res, part);
	case 3:
		return linear_run<f16>(be, c, backward, 0, epoch, pos0, layer, rows, in, out, A, W,
				       bh, res, part);
	default:
		return linear_run<float>(be, c, backward, mode == 1, epoch, pos0, layer, rows, in,
					 out, A, W, bh, res, part);
	}
}

template <typename T>
static int linear_w_run(struct ncf_backend *be, struct cu *c, int tf32, size_t rows, uint32_t in,
			uint32_t out, const float *dZ, const float *W, const float *H, float *dX,
			float *db, float *dW)
{
	T *a = NULL, *w = NULL, *h = NULL, *y = NULL;
	float *pt = NULL, *pw = NULL, *odb = NULL, *odw = NULL;
	double *ls = NULL, *lo = NULL;
	uint32_t G = bwdw_groups(rows);
	float scale = dropout_of(&be->hp, 0, 0).scale;
	int rc = -1;
	part_map m;
	memset(&m, 0, sizeof m);
	if (mlp_setup() || upload_as(&a, dZ, rows * out, c->s) ||
	    upload_as(&w, W, (size_t)out * in, c->s) ||
	    upload_as(&h, H, rows * in, c->s) || DALLOC(y, rows * in) || DALLOC(pt, G * in) ||
	    DALLOC(pw, (size_t)G * out * in) || DALLOC(odb, in) || DALLOC(odw, (size_t)out * in) ||
	    DALLOC(ls, 1) || DALLOC(lo, 1))
		goto done;
	if (CUDA_CHECK(cudaMemsetAsync(ls, 0, sizeof(double), c->s)))
		goto done;
	m.seg[m.n++] = {pt, odb, G, in, in};
	m.seg[m.n++] = {pw, odw, G, out * in, out * in};
	m.loss = ls;
	m.loss_rows = 1;
	m.loss_out = lo;
	if (linear_bwdw_cuda<T>(rows, in, out, a, w, h, scale, tf32, y, pt, in, pw, c->s) ||
	    reduce_partials_cuda(m, c->s) || download_as(dX, y, rows * in, c->s) ||
	    download_as(db, odb, in, c->s) || download_as(dW, odw, (size_t)out * in, c->s))
		goto done;
	rc = 0;
done:
	dfree(a), dfree(w), dfree(h), dfree(y), dfree(pt), dfree(pw), dfree(odb), dfree(odw);
	dfree(ls), dfree(lo);
	return rc;
}

int ncf_cuda_debug_linear_w(struct ncf_backend *be, int mode, size_t rows, uint32_t in,
			    uint32_t out, const float *dZ, const float *W, const float *H,
			    float *dX, float *db, float *dW)
{
	struct cu *c = impl(be);
	switch (mode) {
	case 2:
		return linear_w_run<bf16>(be, c, 0, rows, in, out, dZ, W, H, dX, db, dW);
	case 3:
		return linear_w_run<f16>(be, c, 0, rows, in, out, dZ, W, H, dX, db, dW);
	default:
		return linear_w_run<float>(be, c, mode == 1, rows, in, out, dZ, W, H, dX, db, dW);
	}
}
