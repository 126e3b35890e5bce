/*
 * step_fused.cu - the fused training step, the default (NCF_CUDA_PATH=fused;
 * see step.cuh).  The same function as step_unfused.cu and reference.c;
 * what moves fewer bytes is the order of the work and which pass does what
 * (the cost model, bench_gpu --cost, counts it):
 *
 *  1. the samples, then the slice sorted by user before anything else:
 *     row r of the step is sample rowpos[r] = ju[r] of the slice (a stable
 *     radix sort, so a user's rows keep their sample order), with its user
 *     ku[r], item ri[r], label rlab[r] and the first row of each user; then
 *     the rows sorted by item and the first position of each item.
 *     Dropout is addressed by sample, pos0 + rowpos[r], so the masks are
 *     those of every other backend;
 *  2. the first-layer tables AU = mlp_user W1u^T, AI = mlp_item W1i^T (two
 *     GEMMs; the 16-bit copy of the parameters was written by the previous
 *     step's Adam);
 *  3. layer 1 per row (AU rows of consecutive rows are the same user's, so
 *     they come from cache); layers 2..L fused: product, bias, ReLU and
 *     dropout in one pass;
 *  4. the head, loss and dlogit, dz of the last layer, with per-block
 *     partials of the head's gradient, the last bias gradient and the loss
 *     (no per-row loss, no separate head-gradient pass);
 *  5. layers L..2 backward: dz_{k-1} with the mask from h_{k-1} > 0, the
 *     partials of its column sums (the bias gradient of layer k - 1) and of
 *     dW_k = dz_k^T h_{k-1}, from one read of dz_k and h_{k-1} (a layer
 *     wider than BWDW_MAX_OUT: dW_k by cuBLAS, then the backward without
 *     it);
 *  6. one reduction of every partial in a fixed order: the bias gradients,
 *     the fused weight gradients, the head's gradient and the loss;
 *  7. per user: dAU = the sum of dz1 over its rows (contiguous) and the GMF
 *     gradient dgmf_user; per item the same through the item order; every
 *     key written, so nothing is cleared first (db1 came with the partials);
 *  8. dW1 and the MLP tables' gradients from dAU, dAI (four GEMMs);
 *  9. the all-reduce, then Adam, which writes the 16-bit copy as well.
 *
 * Sums are in other orders than the unfused step's (rows by user,
 * per-block partials), so the two paths agree to rounding, not bit for
 * bit; each is deterministic (no atomics; orders fixed by the sizes).
 */
#include "nccl.cuh"
#include "step.cuh"

namespace NCF_CUDA_NS {

static_assert(PART_SEGS >= NCF_MAX_LAYERS + 1, "the head's two segments and one per layer");

/* Does layer k's backward compute its weight gradient too (linear_bwdw)? */
static int with_dw(const struct ncf_shape *s, uint32_t k)
{
	return s->layers[k] <= BWDW_MAX_OUT;
}

/* Where a step of B rows puts its partial sums: the head's, then layer k's
 * backward for k = L..2 (its bias gradient's, and dW's where the backward
 * computes it), and the reduction that adds them (step 6). */
struct parts {
	float *bias[NCF_MAX_LAYERS], *w[NCF_MAX_LAYERS]; /* layer k's; w[k] NULL: cuBLAS */
	part_map map;
	size_t floats; /* all of them */
};

static void parts_of(const struct ncf_backend *be, float *base, float *grad, double *loss,
		     size_t B, struct parts *p)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	uint32_t F = s->factors, last = s->n_layers - 1, HL = s->layers[last];
	uint32_t nbh = (uint32_t)((B + HEAD_ROWS - 1) / HEAD_ROWS);
	uint32_t nbb = (uint32_t)((B + BWD_ROWS - 1) / BWD_ROWS), G = bwdw_groups(B);
	uint32_t ch = F + 2 * HL + 1;
	memset(p, 0, sizeof *p);
	part_map *m = &p->map;
	m->seg[m->n++] = {base, grad + L->head_w, nbh, ch, F + HL + 1};
	m->seg[m->n++] = {base + F + HL + 1, grad + L->b[last], nbh, ch, HL};
	float *at = base + (size_t)nbh * ch;
	for (uint32_t k = last; k >= 2; k--) {
		uint32_t in = s->layers[k - 1], out = s->layers[k];
		uint32_t rows = with_dw(s, k) ? G : nbb;
		p->bias[k] = at;
		m->seg[m->n++] = {at, grad + L->b[k - 1], rows, in, in};
		at += (size_t)rows * in;
		if (with_dw(s, k)) {
			p->w[k] = at;
			m->seg[m->n++] = {at, grad + L->w[k], G, out * in, out * in};
			at += (size_t)G * out * in;
		}
	}
	m->loss = loss;
	m->loss_rows = nbh;
	p->floats = (size_t)(at - base);
}

void fused_free(struct cu *c)
{
	struct fused *f = c->fused;
	if (!f)
		return;
	dfree(f->ri), dfree(f->rlab), dfree(f->uoff), dfree(f->ioff), dfree(f->part), dfree(f->loss);
	free(f);
	c->fused = NULL;
}

int fused_prepare(const struct step *st)
{
	struct cu *c = st->c;
	const struct ncf_shape *s = &st->be->shape;
	size_t B = st->B;
	if (c->fused && B <= c->fused->cap)
		return 0;
	fused_free(c);
	struct fused *f = (struct fused *)ncf_xcalloc(1, sizeof *f);
	c->fused = f;
	struct parts p;
	parts_of(st->be, NULL, NULL, NULL, B, &p); /* only the count */
	NCF_TRY(mlp_setup());
	NCF_TRY(head_setup(s->factors, ncf_shape_last(s)));
	NCF_TRY(DALLOC(f->ri, B));
	NCF_TRY(DALLOC(f->rlab, B));
	NCF_TRY(DALLOC(f->uoff, (size_t)s->users + 1));
	NCF_TRY(DALLOC(f->ioff, (size_t)s->items + 1));
	NCF_TRY(DALLOC(f->part, p.floats));
	NCF_TRY(DALLOC(f->loss, (B + HEAD_ROWS - 1) / HEAD_ROWS));
	f->cap = B;
	return 0;
}

template <typename T> static int fused_run_t(const struct step *st)
{
	struct ncf_backend *be = st->be;
	struct cu *c = st->c;
	struct fused *f = c->fused;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const uint32_t F = s->factors, H1 = s->layers[1], last = s->n_layers - 1,
		       HL = s->layers[last], U = s->users, I = s->items;
	const size_t B = st->B;
	const float *prm = c->params;
	float *g = c->grad;
	const T *w = lowp<T>(c);
	const dropout_k &dk = st->dk;
	const int tf32 = be->precision == NCF_PRECISION_TF32;
	if (B == 0)
		return step_idle(st, 1);
	struct parts pp;
	parts_of(be, f->part, g, f->loss, B, &pp);
	pp.map.loss_out = c->loss_dev;
	pp.map.loss_acc = st->loss_acc;
	/* 1. the slice's samples, its rows sorted by user, then by item */
	NCF_TRY(sample_cuda(stream_of(be, c, st->S, st->epoch), st->pos0, B, c->su, c->si, c->lab,
			    c->s));
	NCF_TRY(sort_by_key_cuda(c->su, B, id_bits(U), c->ku, c->itmp, c->ju, c->sort_tmp,
				 c->sort_tmp_bytes, c->s));
	NCF_TRY(rows_by_user_cuda(B, U, c->ku, c->ju, c->si, c->lab, f->ri, f->rlab, f->uoff, c->s));
	NCF_TRY(sort_by_key_cuda(f->ri, B, id_bits(I), c->ki, c->itmp, c->ji, c->sort_tmp,
				 c->sort_tmp_bytes, c->s));
	NCF_TRY(seg_offsets_cuda(B, I, c->ki, f->ioff, c->s));
	/* 2. the first-layer tables */
	NCF_TRY(params_tables<T>(be, c));
	/* 3. forward: layer 1 from the tables, layers 2..L fused */
	NCF_TRY(layer1_rows_cuda<T>(B, H1, c->ku, f->ri, (const T *)c->AU, (const T *)c->AI,
				    prm + L->b[1], dk, c->ju, U, (T *)c->h[1], c->s));
	for (uint32_t k = 2; k <= last; k++)
		NCF_TRY(linear_fwd_cuda<T>(B, s->layers[k - 1], s->layers[k], (const T *)c->h[k - 1],
					   w + L->w[k], prm + L->b[k], dk, k - 1, c->ju, tf32,
					   (T *)c->h[k], c->s));
	/* 4. the head, loss, dlogit and dz of the last layer, with their partials */
	NCF_TRY(head_fused_cuda<T>(B, F, HL, c->ku, f->ri, f->rlab, prm + L->gmf_user,
				   prm + L->gmf_item, prm + L->head_w, (const T *)c->h[last],
				   1.0f / (float)st->n, c->loss_scale, dk.scale, U, c->dl,
				   (T *)c->d[last], f->part, f->loss, c->s));
	/* 5. layers L..2 backward, with the partials of db (and dW where it fits) */
	for (uint32_t k = last; k >= 2; k--) {
		uint32_t in = s->layers[k - 1], out = s->layers[k];
		const T *dz = (const T *)c->d[k], *h = (const T *)c->h[k - 1];
		if (pp.w[k]) {
			NCF_TRY(linear_bwdw_cuda<T>(B, in, out, dz, w + L->w[k], h, dk.scale, tf32,
						    (T *)c->d[k - 1], pp.bias[k], in, pp.w[k], c->s));
			continue;
		}
		NCF_TRY(lin_wgrad(&c->blas, "gemm_wgrad", B, in, out, dz, dtype_of<T>(), out, h,
				  dtype_of<T>(), in, g + L->w[k], in));
		NCF_TRY(linear_bwd_cuda<T>(B, in, out, dz, w + L->w[k], h, dk.scale, tf32,
					   (T *)c->d[k - 1], pp.bias[k], in, c->s));
	}
	/* 6. every partial and the loss, summed in a fixed order */
	NCF_TRY(reduce_partials_cuda(pp.map, c->s));
	/* 7. per user and per item: dAU, dAI and the GMF tables' gradients */
	NCF_TRY(key_grad_cuda<T>(U, H1, F, B, f->uoff, NULL, (const T *)c->d[1], c->dl, f->ri,
				 prm + L->gmf_item, prm + L->head_w, c->dAU, g + L->gmf_user, c->s));
	NCF_TRY(key_grad_cuda<T>(I, H1, F, B, f->ioff, c->ji, (const T *)c->d[1], c->dl, c->ku,
				 prm + L->gmf_user, prm + L->head_w, c->dAI, g + L->gmf_item, c->s));
	/* 8. dW1 and the MLP tables' gradients */
	NCF_TRY(step_tables_backward(st, 1));
	/* 9. the gradient summed over the ranks, then Adam and the 16-bit copy */
	if (!st->update)
		return 0;
	NCF_TRY(allreduce(be, g, L->total));
	return step_adam(st, 1);
}

static int fused_run(const struct step *st)
{
	switch (st->c->act) {
	case ACT_BF16:
		return fused_run_t<bf16>(st);
	case ACT_F16:
		return fused_run_t<f16>(st);
	default:
		return fused_run_t<float>(st);
	}
}

static void fused_close(struct cu *c)
{
	fused_free(c);
}

const struct step_path step_fused = {"fused", 1, 1, fused_prepare, fused_run, fused_close};

} /* namespace NCF_CUDA_NS */
