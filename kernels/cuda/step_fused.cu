/*
 * step_fused.cu - the fused training step of the cuda backend, the default
 * (NCF_CUDA_PATH=fused; step.cu keeps the unfused passes, NCF_CUDA_PATH=
 * unfused).  The same function as step.cu and reference.c; what moves fewer
 * bytes is the order of the work and which pass does what (see the cost
 * model, bench_gpu --cost):
 *
 *  1. samples (sample_cuda), then the slice sorted by user before anything
 *     else: row r of the step is sample rowpos[r] = ju[r] (a stable radix
 *     sort, so a user's rows keep their sample order), with its user ru[r] =
 *     ku[r], item ri[r], label rlab[r] and the first row of each user
 *     (rows_by_user_cuda); then the rows sorted by item and the first
 *     position of each item (seg_offsets_cuda).  Dropout is addressed by
 *     sample, pos0 + rowpos[r], so masks are those of every other backend;
 *  2. the first-layer tables AU = mlp_user W1u^T, AI = mlp_item W1i^T (two
 *     GEMMs; the 16-bit copy of the parameters was written by the previous
 *     step's Adam);
 *  3. layer 1 per row (layer1_rows_cuda: AU rows of consecutive rows are
 *     the same user's, so they come from cache); layers 2..L fused
 *     (linear_fwd_cuda: product, bias, ReLU and dropout in one pass);
 *  4. the head, loss and dlogit, dz of the last layer, with per-block
 *     partials of the head's gradient, the last bias gradient and the loss
 *     (head_fused_cuda; no per-row loss, no separate head-gradient pass);
 *  5. layers L..2 backward: linear_bwdw_cuda: dz_{k-1} with the mask from
 *     h_{k-1} > 0, the partials of its column sums (bias gradient of layer
 *     k - 1) and of dW_k = dz_k^T h_{k-1}, from one read of dz_k and
 *     h_{k-1} (for a layer wider than BWDW_MAX_OUT: dW_k by cuBLAS, then
 *     linear_bwd_cuda without it);
 *  6. one reduce_partials_cuda for every bias gradient, the fused weight
 *     gradients, the head's gradient and the loss (fixed order);
 *  7. per user: dAU = the sum of dz1 over its rows (contiguous) and the GMF
 *     gradient dgmf_user (key_grad_cuda); per item the same through the item
 *     order; every key written, so nothing is cleared first.  db1 came with
 *     the partials (no column sum of dAU);
 *  8. dW1 = [dAU^T mlp_user, dAI^T mlp_item], dmlp_user = dAU W1u, dmlp_item
 *     = dAI W1i (four GEMMs over whole tables, as step.cu);
 * and after the all-reduce, Adam with the 16-bit copy (adam_fused).
 *
 * Sums are in other orders than step.cu's (rows by user, per-block
 * partials), so the two paths agree to rounding, not bit for bit; each is
 * deterministic (no atomics; orders fixed by the sizes).
 */
#include "backend.cuh"

namespace NCF_CUDA_NS {

static_assert(PART_SEGS >= NCF_MAX_LAYERS + 1, "the head's two segments and one per layer");

int fused_path(struct ncf_backend *be, struct cu *c)
{
	if (c->path != PATH_FUSED)
		return 0;
	const struct ncf_shape *s = &be->shape;
	for (uint32_t k = 1; k < s->n_layers; k++)
		if (s->layers[k] > FUSED_MAX_WIDTH) {
			if (!c->fused_said)
				ncf_debug("cuda backend: a hidden layer of %u units is wider than "
					  "the "
					  "fused kernels take (%u): the unfused path",
					  s->layers[k], (unsigned)FUSED_MAX_WIDTH);
			c->fused_said = 1;
			return 0;
		}
	return 1;
}

/* Does layer k's backward compute its weight gradient too (linear_bwdw)? */
static int with_dw(const struct ncf_shape *s, uint32_t k)
{
	return s->layers[k] <= BWDW_MAX_OUT;
}

/* Floats of partials: the head's, then layer k's backward for k = L..2
 * (the bias gradient's, and dW's where the backward computes it). */
static size_t part_floats(const struct ncf_shape *s, size_t B)
{
	size_t nbh = (B + HEAD_ROWS - 1) / HEAD_ROWS, nbb = (B + BWD_ROWS - 1) / BWD_ROWS;
	size_t HL = ncf_shape_last(s), f = nbh * (s->factors + 2 * HL + 1), G = bwdw_groups(B);
	for (uint32_t k = 2; k < s->n_layers; k++)
		f += with_dw(s, k) ? G * s->layers[k - 1] * (1 + (size_t)s->layers[k])
				   : nbb * s->layers[k - 1];
	return f;
}

void fused_free(struct cu *c)
{
	dfree(c->ri), dfree(c->rlab), dfree(c->uoff), dfree(c->ioff);
	dfree(c->fpart), dfree(c->floss);
	c->fcap = 0;
}

int fused_prepare(struct ncf_backend *be, struct cu *c, size_t B)
{
	if (B <= c->fcap)
		return 0;
	const struct ncf_shape *s = &be->shape;
	fused_free(c);
	NCF_TRY(bwdw_setup());
	NCF_TRY(DALLOC(c->ri, B));
	NCF_TRY(DALLOC(c->rlab, B));
	NCF_TRY(DALLOC(c->uoff, (size_t)s->users + 1));
	NCF_TRY(DALLOC(c->ioff, (size_t)s->items + 1));
	NCF_TRY(DALLOC(c->fpart, part_floats(s, B)));
	NCF_TRY(DALLOC(c->floss, (B + HEAD_ROWS - 1) / HEAD_ROWS));
	c->fcap = B;
	return 0;
}

/* Step 1: samples, rows by user, rows by item. */
static int rows_sorted(struct ncf_backend *be, struct cu *c, uint64_t S, uint32_t epoch,
		       uint64_t pos0, size_t B)
{
	const struct ncf_shape *s = &be->shape;
	mark(c, PH_SAMPLES);
	ncf_perm perm = ncf_perm_make(S, be->hp.seed, epoch);
	NCF_TRY(sample_cuda(perm, pos0, B, be->hp.seed, epoch, c->P, s->items,
			    (int)be->hp.true_neg, c->entry_user, c->offsets, c->items_csr, c->su,
			    c->si, c->lab, c->s));
	NCF_TRY(sort_by_key_cuda(c->su, B, id_bits(s->users), c->ku, c->itmp, c->ju, c->sort_tmp,
				 c->sort_tmp_bytes, c->s));
	NCF_TRY(rows_by_user_cuda(B, s->users, c->ku, c->ju, c->si, c->lab, c->ri, c->rlab,
				  c->uoff, c->s));
	NCF_TRY(sort_by_key_cuda(c->ri, B, id_bits(s->items), c->ki, c->itmp, c->ji, c->sort_tmp,
				 c->sort_tmp_bytes, c->s));
	return seg_offsets_cuda(B, s->items, c->ki, c->ioff, c->s);
}

/* Steps 2-4: tables, layers, head. */
template <typename T>
static int forward_fused(struct ncf_backend *be, struct cu *c, size_t B, uint64_t n,
			 const dropout_k &dk, int tf32)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	uint32_t F = s->factors, last = s->n_layers - 1, HL = s->layers[last];
	const float *prm = c->params;
	mark(c, PH_TABLES);
	NCF_TRY(make_tables<T>(be, c));
	mark(c, PH_FORWARD);
	NCF_TRY(layer1_rows_cuda<T>(B, s->layers[1], c->ku, c->ri, (const T *)c->AU,
				    (const T *)c->AI, prm + L->b[1], dk, c->ju, s->users,
				    (T *)c->h[1], c->s));
	const T *w = wts<T>(c);
	for (uint32_t k = 2; k <= last; k++)
		NCF_TRY(linear_fwd_cuda<T>(B, s->layers[k - 1], s->layers[k],
					   (const T *)c->h[k - 1], w + L->w[k], prm + L->b[k], dk,
					   k - 1, c->ju, tf32, (T *)c->h[k], c->s));
	mark(c, PH_HEAD);
	return head_fused_cuda<T>(B, F, HL, c->ku, c->ri, c->rlab, prm + L->gmf_user, prm + L->gmf_item,
				  prm + L->head_w, (const T *)c->h[last], 1.0f / (float)n,
				  c->loss_scale, dk.scale, s->users, c->dl, (T *)c->d[last],
				  c->fpart, c->floss, c->s);
}

/* Steps 5-6: layers L..2 backward, then every partial sum. */
template <typename T>
static int backward_fused(struct ncf_backend *be, struct cu *c, size_t B, const dropout_k &dk,
			  int tf32)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	uint32_t F = s->factors, last = s->n_layers - 1, HL = s->layers[last];
	cudaDataType dt = dtype_of<T>();
	const T *w = wts<T>(c);
	float *g = c->grad;
	uint32_t nbh = (uint32_t)((B + HEAD_ROWS - 1) / HEAD_ROWS);
	uint32_t nbb = (uint32_t)((B + BWD_ROWS - 1) / BWD_ROWS), ch = F + 2 * HL + 1;
	part_map m;
	memset(&m, 0, sizeof m);
	m.seg[m.n++] = {c->fpart, g + L->head_w, nbh, ch, F + HL + 1};
	m.seg[m.n++] = {c->fpart + F + HL + 1, g + L->b[last], nbh, ch, HL};
	float *part = c->fpart + (size_t)nbh * ch;
	mark(c, PH_MLP_BACKWARD);
	uint32_t G = bwdw_groups(B);
	for (uint32_t k = last; k >= 2; k--) {
		uint32_t in = s->layers[k - 1], out = s->layers[k];
		if (with_dw(s, k)) {
			float *pw = part + (size_t)G * in;
			NCF_TRY(linear_bwdw_cuda<T>(B, in, out, (const T *)c->d[k], w + L->w[k],
						    (const T *)c->h[k - 1], dk.scale, tf32,
						    (T *)c->d[k - 1], part, in, pw, c->s));
			m.seg[m.n++] = {part, g + L->b[k - 1], G, in, in};
			m.seg[m.n++] = {pw, g + L->w[k], G, out * in, out * in};
			part = pw + (size_t)G * out * in;
			continue;
		}
		NCF_TRY(lin_wgrad(c, "gemm_wgrad", B, in, out, c->d[k], dt, out, c->h[k - 1], dt,
				  in, g + L->w[k], in));
		NCF_TRY(linear_bwd_cuda<T>(B, in, out, (const T *)c->d[k], w + L->w[k],
					   (const T *)c->h[k - 1], dk.scale, tf32, (T *)c->d[k - 1],
					   part, in, c->s));
		m.seg[m.n++] = {part, g + L->b[k - 1], nbb, in, in};
		part += (size_t)nbb * in;
	}
	m.loss = c->floss;
	m.loss_rows = nbh;
	m.loss_out = c->loss_dev;
	m.loss_acc = c->loss_to_acc ? c->loss_acc : NULL;
	mark(c, PH_SORT); /* the sorts ran with the samples: nothing here */
	mark(c, PH_LAYER1_BACKWARD);
	return reduce_partials_cuda(m, c->s);
}

/* Steps 7-8: per-key sums, then the first layer's and the MLP tables'
 * gradients. */
template <typename T> static int tables_backward(struct ncf_backend *be, struct cu *c, size_t B)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	uint32_t M = ncf_shape_m(s), H1 = s->layers[1], F = s->factors, U = s->users,
		 I = s->items;
	const float *prm = c->params;
	float *g = c->grad;
	NCF_TRY(key_grad_cuda<T>(U, H1, F, B, c->uoff, NULL, (const T *)c->d[1], c->dl, c->ri,
				 prm + L->gmf_item, prm + L->head_w, c->dAU, g + L->gmf_user, c->s));
	NCF_TRY(key_grad_cuda<T>(I, H1, F, B, c->ioff, c->ji, (const T *)c->d[1], c->dl, c->ku,
				 prm + L->gmf_user, prm + L->head_w, c->dAI, g + L->gmf_item, c->s));
	NCF_TRY(lin_wgrad(c, "gemm_wgrad_user", U, M, H1, c->dAU, CUDA_R_32F, H1, prm + L->mlp_user,
			  CUDA_R_32F, M, g + L->w[1], 2 * (size_t)M));
	NCF_TRY(lin_wgrad(c, "gemm_wgrad_item", I, M, H1, c->dAI, CUDA_R_32F, H1, prm + L->mlp_item,
			  CUDA_R_32F, M, g + L->w[1] + M, 2 * (size_t)M));
	NCF_TRY(lin_dgrad(c, "gemm_dgrad_user", U, M, H1, c->dAU, CUDA_R_32F, H1, prm + L->w[1],
			  CUDA_R_32F, 2 * (size_t)M, g + L->mlp_user, CUDA_R_32F, M));
	NCF_TRY(lin_dgrad(c, "gemm_dgrad_item", I, M, H1, c->dAI, CUDA_R_32F, H1,
			  prm + L->w[1] + M, CUDA_R_32F, 2 * (size_t)M, g + L->mlp_item, CUDA_R_32F, M));
	mark(c, PH_GMF_LOSS); /* the GMF gradients came with dAU, dAI */
	return 0;
}

template <typename T>
int compute_grad_fused(struct ncf_backend *be, struct cu *c, uint64_t S, uint32_t epoch,
		       uint64_t pos0, size_t B, uint64_t n, const dropout_k &dk)
{
	int tf32 = be->precision == NCF_PRECISION_TF32;
	NCF_TRY(fused_prepare(be, c, B));
	NCF_TRY(rows_sorted(be, c, S, epoch, pos0, B));
	NCF_TRY(forward_fused<T>(be, c, B, n, dk, tf32));
	NCF_TRY(backward_fused<T>(be, c, B, dk, tf32));
	return tables_backward<T>(be, c, B);
}

template int compute_grad_fused<float>(struct ncf_backend *, struct cu *, uint64_t, uint32_t,
				       uint64_t, size_t, uint64_t, const dropout_k &);
template int compute_grad_fused<bf16>(struct ncf_backend *, struct cu *, uint64_t, uint32_t,
				      uint64_t, size_t, uint64_t, const dropout_k &);
template int compute_grad_fused<f16>(struct ncf_backend *, struct cu *, uint64_t, uint32_t,
				     uint64_t, size_t, uint64_t, const dropout_k &);

int adam_fused(struct ncf_backend *be, struct cu *c, const ncf_adam_k &k, float g_scale,
	       const int *skip)
{
	size_t total = be->layout.total, lo = be->layout.mlp_user;
	switch (c->act) {
	case ACT_BF16:
		NCF_TRY(adam_cast_cuda<bf16>(c->params, c->m, c->v, c->grad, total, k, g_scale,
					     skip, (bf16 *)c->plo, lo, c->s));
		break;
	case ACT_F16:
		NCF_TRY(adam_cast_cuda<f16>(c->params, c->m, c->v, c->grad, total, k, g_scale, skip,
					    (f16 *)c->plo, lo, c->s));
		break;
	default:
		NCF_TRY(adam_cast_cuda<float>(c->params, c->m, c->v, c->grad, total, k, g_scale,
					      skip, NULL, 0, c->s));
	}
	c->plo_valid = c->act != ACT_F32;
	return 0;
}

} /* namespace NCF_CUDA_NS */
