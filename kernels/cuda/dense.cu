/* dense.cu - the hidden dense layers of the training step (see dense.cuh). */
#include "lt.cuh"
#include "step.cuh"

namespace NCF_CUDA_NS {

const char *const dense_name[DENSE_IMPLS] = {"fused", "lt", "plain"};
static const char *const how_name[] = {"NCF_CUDA_DENSE", "timed", "fixed order"};

/* *impl for the name at s (len bytes).  Returns 0, or -1 (reported). */
static int parse_one(const char *s, size_t len, int *impl)
{
	for (int i = 0; i < DENSE_IMPLS; i++)
		if (strlen(dense_name[i]) == len && !strncmp(s, dense_name[i], len)) {
			*impl = i;
			return 0;
		}
	ncf_error("cuda backend: NCF_CUDA_DENSE: '%.*s' is not fused, lt or plain", (int)len, s);
	return -1;
}

int dense_open(struct cu *c, const struct ncf_shape *s, const char *spec)
{
	struct dense *d = (struct dense *)ncf_xcalloc(1, sizeof *d);
	c->dense = d;
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		d->pin[k] = d->impl[k] = -1;
	if (!spec || !*spec)
		return 0;
	uint32_t last = s->n_layers - 1, names = 1;
	for (const char *p = spec; *p; p++)
		names += *p == ',';
	if (names != 1 && names != last - 1) {
		ncf_error("cuda backend: NCF_CUDA_DENSE=%s: %u names for %u dense layers above the "
			  "first (one for all, or one per layer)",
			  spec, names, last - 1);
		return -1;
	}
	const char *p = spec;
	for (uint32_t k = 2; k <= last; k++) {
		size_t len = strcspn(p, ",");
		NCF_TRY(parse_one(p, len, &d->pin[k]));
		if (names > 1)
			p += len + (p[len] == ',');
	}
	return 0;
}

void dense_free(struct cu *c)
{
	struct dense *d = c->dense;
	if (!d)
		return;
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		dfree(d->aux[k]);
	lt_free(c);
	free(d);
	c->dense = NULL;
}

int dense_takes(int impl, const struct ncf_shape *s, uint32_t k)
{
	if (impl == DENSE_FUSED)
		return s->layers[k] <= FUSED_MAX_WIDTH && s->layers[k - 1] <= FUSED_MAX_WIDTH;
	return impl == DENSE_LT || impl == DENSE_PLAIN;
}

/* May the choice take impl for layer k without a pin?  fp16 leaves lt out
 * (its ReLU need not keep the NaN of an overflow). */
static int candidate(int impl, const struct ncf_shape *s, uint32_t k, int act)
{
	return dense_takes(impl, s, k) && !(impl == DENSE_LT && act == ACT_F16);
}

/* May layer k end up in implementation impl (pinned, or a candidate)? */
static int may_take(const struct dense *d, int impl, const struct ncf_shape *s, uint32_t k,
		    int act)
{
	return d->chosen ? d->impl[k] == impl : d->pin[k] >= 0 ? d->pin[k] == impl
								: candidate(impl, s, k, act);
}

int dense_prepare(const struct step *st)
{
	struct cu *c = st->c;
	struct dense *d = c->dense;
	const struct ncf_shape *s = &st->be->shape;
	uint32_t last = s->n_layers - 1;
	int lt = 0;
	for (uint32_t k = 2; k <= last; k++)
		lt |= may_take(d, DENSE_LT, s, k, c->act);
	if (!lt)
		return 0;
	NCF_TRY(lt_open(c));
	/* the ReLU masks, for the layer above's DRELU_BGRAD: only without
	 * dropout (with it, the mask comes from h > 0) */
	if (st->dk.active || st->B <= d->aux_cap)
		return 0;
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		dfree(d->aux[k]);
	d->aux_cap = 0;
	for (uint32_t k = 2; k < last; k++)
		if (may_take(d, DENSE_LT, s, k, c->act))
			NCF_TRY(DALLOC_BYTES(&d->aux[k], lt_aux_bytes(s->layers[k], st->B)));
	d->aux_cap = st->B;
	return 0;
}

/* Does layer k's backward in lt take dReLU and the bias gradient from
 * cuBLASLt (the layer below, `below`, kept its ReLU mask: lt, no
 * dropout)? */
static int lt_bgrad(const struct step *st, int below)
{
	return !st->dk.active && below == DENSE_LT;
}

size_t dense_parts_of(const struct step *st, uint32_t k, int impl, int below, float *at,
		      struct dense_parts *p, part_map *m)
{
	const struct ncf_shape *s = &st->be->shape;
	const struct ncf_layout *L = &st->be->layout;
	uint32_t in = s->layers[k - 1], out = s->layers[k];
	uint32_t nbb = (uint32_t)((st->B + BWD_ROWS - 1) / BWD_ROWS), rows = nbb;
	float *g = st->c->grad;
	p->bias = p->w = NULL;
	int with_w = impl == DENSE_FUSED && out <= BWDW_MAX_OUT;
	if (impl == DENSE_LT && lt_bgrad(st, below))
		return 0;
	if (with_w)
		rows = bwdw_groups(st->B);
	size_t n = (size_t)rows * in + (with_w ? (size_t)rows * out * in : 0);
	if (!at)
		return n;
	p->bias = at;
	if (m)
		m->seg[m->n++] = {at, g + L->b[k - 1], rows, in, in};
	if (with_w) {
		p->w = at + (size_t)rows * in;
		if (m)
			m->seg[m->n++] = {p->w, g + L->w[k], rows, out * in, out * in};
	}
	return n;
}

/* ---- the implementations ----------------------------------------------- */

/* Layer k's operands in the step's buffers. */
template <typename T> struct layer_ops {
	size_t B;
	uint32_t in, out;
	const T *X, *W; /* h_{k-1} (B, in), W_k (out, in) */
	T *Y, *dZ, *dX; /* h_k (B, out), dz_k (B, out), dz_{k-1} (B, in) */
	const float *b; /* b_k */
	float *dW, *db; /* the gradient's W_k, b_{k-1} */
	layer_ops(const struct step *st, uint32_t k)
	{
		struct cu *c = st->c;
		const struct ncf_layout *L = &st->be->layout;
		B = st->B;
		in = st->be->shape.layers[k - 1];
		out = st->be->shape.layers[k];
		X = (const T *)c->h[k - 1];
		W = lowp<T>(c) + L->w[k];
		Y = (T *)c->h[k];
		dZ = (T *)c->d[k];
		dX = (T *)c->d[k - 1];
		b = c->params + L->b[k];
		dW = c->grad + L->w[k];
		db = c->grad + L->b[k - 1];
	}
};

template <typename T> static int fused_forward(const struct step *st, uint32_t k)
{
	layer_ops<T> o(st, k);
	int tf32 = st->be->precision == NCF_PRECISION_TF32;
	layer_fwd<T> a = {o.B, o.in, o.out, o.X, o.W, o.b, st->dk, k - 1, st->c->ju, o.Y};
	return linear_fwd_cuda<T>(a, tf32, st->c->s);
}

template <typename T>
static int fused_backward(const struct step *st, uint32_t k, const struct dense_parts &p)
{
	layer_ops<T> o(st, k);
	struct cu *c = st->c;
	int tf32 = st->be->precision == NCF_PRECISION_TF32;
	layer_bwd<T> a = {o.B, o.in, o.out, o.dZ, o.W, o.X, st->dk.scale, o.dX, p.bias, o.in, p.w};
	if (p.w)
		return linear_bwdw_cuda<T>(a, tf32, c->s);
	cudaDataType t = dtype_of<T>();
	NCF_TRY(lin_wgrad(&c->blas, {"gemm_wgrad", o.B, o.in, o.out}, {o.dZ, t, o.out},
			  {o.X, t, o.in}, {o.dW, CUDA_R_32F, o.in}));
	return linear_bwd_cuda<T>(a, tf32, c->s);
}

template <typename T> static int lt_forward(const struct step *st, uint32_t k)
{
	layer_ops<T> o(st, k);
	struct cu *c = st->c;
	lt_args<T> a = lt_args_of<T>(o.B, o.in, o.out);
	a.X = o.X, a.W = o.W, a.b = o.b, a.Y = o.Y, a.aux = c->dense->aux[k];
	NCF_TRY(lt_fwd<T>(c, a));
	return dropout_mul_cuda<T>(o.B, o.out, o.Y, st->dk, k - 1, c->ju, c->s);
}

template <typename T>
static int lt_backward(const struct step *st, uint32_t k, const struct dense_parts &p)
{
	layer_ops<T> o(st, k);
	struct cu *c = st->c;
	lt_args<T> w = lt_args_of<T>(o.B, o.in, o.out);
	w.X = o.X, w.dY = o.dZ, w.dW = o.dW;
	NCF_TRY(lt_wgrad<T>(c, w));
	lt_args<T> a = lt_args_of<T>(o.B, o.in, o.out);
	a.W = o.W, a.dY = o.dZ, a.Y = o.dX;
	if (!p.bias) { /* dReLU by the mask of layer k - 1, and db_{k-1} */
		a.aux = c->dense->aux[k - 1], a.db = o.db;
		return lt_dgrad<T>(c, a);
	}
	NCF_TRY(lt_dgrad<T>(c, a));
	return relu_dropout_back_cuda<T>(o.B, o.in, o.dX, o.X, st->dk.scale, p.bias, c->s);
}

template <typename T> static int plain_forward(const struct step *st, uint32_t k)
{
	layer_ops<T> o(st, k);
	struct cu *c = st->c;
	cudaDataType t = dtype_of<T>();
	NCF_TRY(lin_fwd(&c->blas, {"gemm_fwd", o.B, o.in, o.out}, {o.X, t, o.in}, {o.W, t, o.in},
			{o.Y, t, o.out}));
	return bias_relu_dropout_cuda<T>(o.B, o.out, o.Y, o.b, st->dk, k - 1, c->ju, c->s);
}

template <typename T>
static int plain_backward(const struct step *st, uint32_t k, const struct dense_parts &p)
{
	layer_ops<T> o(st, k);
	struct cu *c = st->c;
	cudaDataType t = dtype_of<T>();
	gemm_layer g = {"gemm_wgrad", o.B, o.in, o.out};
	NCF_TRY(lin_wgrad(&c->blas, g, {o.dZ, t, o.out}, {o.X, t, o.in}, {o.dW, CUDA_R_32F, o.in}));
	g.what = "gemm_dgrad";
	NCF_TRY(lin_dgrad(&c->blas, g, {o.dZ, t, o.out}, {o.W, t, o.in}, {o.dX, t, o.in}));
	return relu_dropout_back_cuda<T>(o.B, o.in, o.dX, o.X, st->dk.scale, p.bias, c->s);
}

template <typename T> int dense_forward(const struct step *st, uint32_t k, int impl)
{
	switch (impl) {
	case DENSE_FUSED:
		return fused_forward<T>(st, k);
	case DENSE_LT:
		return lt_forward<T>(st, k);
	default:
		return plain_forward<T>(st, k);
	}
}

template <typename T>
int dense_backward(const struct step *st, uint32_t k, int impl, const struct dense_parts &p)
{
	switch (impl) {
	case DENSE_FUSED:
		return fused_backward<T>(st, k, p);
	case DENSE_LT:
		return lt_backward<T>(st, k, p);
	default:
		return plain_backward<T>(st, k, p);
	}
}

/* ---- the choice -------------------------------------------------------- */

/* Layer k's forward and backward in impl, once. */
template <typename T>
static int run_layer(const struct step *st, uint32_t k, int impl, const struct dense_parts &p)
{
	NCF_TRY(dense_forward<T>(st, k, impl));
	return dense_backward<T>(st, k, impl, p);
}
static int run_layer_any(const struct step *st, uint32_t k, int impl, const struct dense_parts &p)
{
	return by_act(st->c->act, [&](auto t) { return run_layer<decltype(t)>(st, k, impl, p); });
}

/* Milliseconds of layer k's forward and backward in impl on the device:
 * a warm-up (cuBLASLt's plan is made there), then the mean of DENSE_REPS
 * runs between two events.  On the step's buffers, whose contents the
 * step then writes anew.  Returns 0 or -1. */
static int time_layer(const struct step *st, uint32_t k, int impl, float *ms)
{
	struct cu *c = st->c;
	struct dense_parts p;
	dense_parts_of(st, k, impl, k > 2 ? c->dense->impl[k - 1] : -1, c->sb->part, &p, NULL);
	cudaEvent_t ev[2];
	CUDA_TRY(cudaEventCreate(&ev[0]));
	if (CUDA_CHECK(cudaEventCreate(&ev[1])) != 0) {
		cudaEventDestroy(ev[0]);
		return -1;
	}
	int rc = run_layer_any(st, k, impl, p) || CUDA_CHECK(cudaEventRecord(ev[0], c->s));
	for (int r = 0; r < DENSE_REPS && !rc; r++)
		rc = run_layer_any(st, k, impl, p);
	rc = rc || CUDA_CHECK(cudaEventRecord(ev[1], c->s)) ||
	     CUDA_CHECK(cudaEventSynchronize(ev[1])) ||
	     CUDA_CHECK(cudaEventElapsedTime(ms, ev[0], ev[1]));
	*ms /= DENSE_REPS;
	cudaEventDestroy(ev[0]);
	cudaEventDestroy(ev[1]);
	return rc ? -1 : 0;
}

/* Layer k's implementation: pinned (a pin the layer cannot take falls back
 * to plain, said at -v), the first candidate, or the fastest timed. */
static int choose_layer(const struct step *st, uint32_t k, int timed)
{
	struct cu *c = st->c;
	struct dense *d = c->dense;
	const struct ncf_shape *s = &st->be->shape;
	if (d->pin[k] >= 0) {
		d->impl[k] = dense_takes(d->pin[k], s, k) ? d->pin[k] : DENSE_PLAIN;
		if (d->impl[k] != d->pin[k])
			ncf_debug("cuda backend: dense layer %u (%u -> %u) is wider than the fused "
				  "kernels take (%u): plain",
				  k, s->layers[k - 1], s->layers[k], (unsigned)FUSED_MAX_WIDTH);
		d->how = DENSE_PINNED;
		return 0;
	}
	float best = 0;
	for (int i = 0; i < DENSE_IMPLS; i++) {
		if (!candidate(i, s, k, c->act))
			continue;
		if (!timed) {
			d->impl[k] = i;
			d->how = DENSE_ORDER;
			return 0;
		}
		NCF_TRY(time_layer(st, k, i, &d->ms[k][i]));
		if (d->impl[k] < 0 || d->ms[k][i] < best) {
			d->impl[k] = i;
			best = d->ms[k][i];
		}
	}
	d->how = DENSE_TIMED;
	return 0;
}

/* "fused (256 -> 128, timed; fused 0.412 ms, lt 0.520 ms, plain 0.771 ms)" */
static void layer_line(const struct dense *d, const struct ncf_shape *s, uint32_t k, char *buf,
		       size_t len)
{
	int at = snprintf(buf, len, "%s (%u -> %u, %s", dense_name[d->impl[k]], s->layers[k - 1],
			  s->layers[k], how_name[d->how]);
	for (int i = 0; i < DENSE_IMPLS && at > 0 && (size_t)at < len; i++)
		if (d->ms[k][i] >= 0)
			at += snprintf(buf + at, len - at, "; %s %.3f ms",
				       dense_name[i], (double)d->ms[k][i]);
	if (at > 0 && (size_t)at < len)
		snprintf(buf + at, len - at, ")");
}

int dense_choose(const struct step *st)
{
	struct dense *d = st->c->dense;
	const struct ncf_shape *s = &st->be->shape;
	if (d->chosen || st->B == 0)
		return 0;
#ifdef NCF_CUDA_EMULATE
	int timed = 0; /* the emulation's times say nothing of a GPU's */
#else
	int timed = !cost_dry();
#endif
	for (uint32_t k = 2; k < s->n_layers; k++) {
		for (int i = 0; i < DENSE_IMPLS; i++)
			d->ms[k][i] = -1;
		NCF_TRY(choose_layer(st, k, timed));
	}
	d->chosen = 1;
	for (uint32_t k = 2; k < s->n_layers && !cost_dry(); k++) {
		char line[256];
		layer_line(d, s, k, line, sizeof line);
		ncf_debug("cuda backend: dense layer %u: %s", k, line);
	}
	return 0;
}

void dense_describe(const struct cu *c, const struct ncf_shape *s, FILE *out)
{
	const struct dense *d = c->dense;
	for (uint32_t k = 2; d && d->chosen && k < s->n_layers; k++) {
		char line[256];
		layer_line(d, s, k, line, sizeof line);
		fprintf(out, "dense_layer_%u\t%s\n", k, line);
	}
}

void dense_names(const struct cu *c, const struct ncf_shape *s, const char **names)
{
	const struct dense *d = c->dense;
	for (uint32_t k = 0; k < NCF_MAX_LAYERS; k++)
		names[k] = d && d->chosen && k >= 2 && k < s->n_layers ? dense_name[d->impl[k]] : NULL;
}

#define NCF_INSTANTIATE(T)                                                                   \
	template int dense_forward<T>(const struct step *, uint32_t, int);                     \
	template int dense_backward<T>(const struct step *, uint32_t, int,                     \
				       const struct dense_parts &);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
