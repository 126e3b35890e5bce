/*
 * step.cu - the training step (step.cuh), the same function as reference.c
 * and the cpu backend's step; what moves few bytes is the order of the
 * work and which pass does what (the cost model, bench_gpu --cost, counts
 * it):
 *
 *  1. the samples, then the slice sorted by user before anything else:
 *     row r of the step is sample rowpos[r] = ju[r] of the slice (a stable
 *     radix sort, so a user's rows keep their sample order), with its user
 *     ku[r], item row_item[r], label row_label[r] and the first row of each
 *     user; then the rows sorted by item and the first position of each
 *     item.  Dropout is addressed by sample, pos0 + rowpos[r], so the masks
 *     are those of every other backend;
 *  2. the first-layer tables AU = mlp_user W1u^T, AI = mlp_item W1i^T (two
 *     GEMMs; the 16-bit copy of the parameters was written by the previous
 *     step's Adam);
 *  3. layer 1 per row (AU rows of consecutive rows are the same user's, so
 *     they come from cache); layers 2..L by dense_forward, product, bias,
 *     ReLU and dropout (dense.cuh);
 *  4. the head, loss and dlogit, dz of the last layer, with per-block
 *     partials of the head's gradient, the last bias gradient and the loss
 *     (no per-row loss, no separate head-gradient pass);
 *  5. layers L..2 by dense_backward: dW_k, dz_{k-1} with the mask from
 *     h_{k-1} > 0, and db_{k-1}, as partial rows where the implementation
 *     makes them;
 *  6. one reduction of every partial in a fixed order: the bias gradients,
 *     the weight gradients made in partials, the head's gradient and the
 *     loss;
 *  7. per user: dAU = the sum of dz1 over its rows (contiguous) and the GMF
 *     gradient dgmf_user; per item the same through the item order; every
 *     key written, so nothing is cleared first;
 *  8. dW1 and the MLP tables' gradients from dAU, dAI (four GEMMs):
 *     dW1 = [dAU^T mlp_user, dAI^T mlp_item], dmlp_user = dAU W1u,
 *     dmlp_item = dAI W1i, over whole tables (an absent id has a zero row,
 *     so its gradient is exactly 0);
 *  9. the all-reduce, then Adam, which writes the 16-bit copy as well.
 *
 * Sums are in other orders than the cpu backend's (rows by user,
 * per-block partials), so the two agree to rounding, not bit for bit; the
 * step is deterministic for a fixed choice of the dense implementations
 * (no atomics; orders fixed by the sizes).
 */
#include "nccl.cuh"
#include "rows.cuh"
#include "step.cuh"

namespace NCF_CUDA_NS {

static_assert(PART_SEGS >= 2 + 2 * (NCF_MAX_LAYERS - 2),
	      "the head's two segments and two per layer 2..L");

/* Where a step of B rows puts its partial sums: the head's, then layer k's
 * backward for k = L..2 (struct dense_parts), and the reduction that adds
 * them (stage 6).  impl: each layer's implementation.  Returns the floats. */
struct parts {
	struct dense_parts layer[NCF_MAX_LAYERS];
	part_map map;
};
static size_t parts_of(const struct step *st, const int *impl, float *base, struct parts *p)
{
	const struct ncf_backend *be = st->be;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	uint32_t F = s->factors, last = s->n_layers - 1, HL = s->layers[last];
	uint32_t nbh = (uint32_t)((st->B + HEAD_ROWS - 1) / HEAD_ROWS), ch = F + 2 * HL + 1;
	float *g = st->c->grad;
	memset(p, 0, sizeof *p);
	part_map *m = base ? &p->map : NULL;
	if (m) {
		m->seg[m->n++] = {base, g + L->head_w, nbh, ch, F + HL + 1};
		m->seg[m->n++] = {base + F + HL + 1, g + L->b[last], nbh, ch, HL};
	}
	size_t at = (size_t)nbh * ch;
	for (uint32_t k = last; k >= 2; k--)
		at += dense_parts_of(st, k, impl[k], k > 2 ? impl[k - 1] : -1,
				     base ? base + at : NULL, &p->layer[k], m);
	return at;
}

int step_init(struct step *st, struct ncf_backend *be, uint32_t epoch, uint64_t first,
	      uint64_t n, int update, double *loss_acc)
{
	struct cu *c = impl(be);
	memset(st, 0, sizeof *st);
	if (!c->have_td) {
		ncf_error("cuda backend: no training data");
		return -1;
	}
	uint64_t lo, hi;
	ncf_dist_slice(n, be->dist->rank, be->dist->size, &lo, &hi);
	st->be = be;
	st->c = c;
	st->epoch = epoch;
	st->first = first;
	st->n = n;
	st->pos0 = first + lo;
	st->B = (size_t)(hi - lo);
	st->dk = dropout_of(&be->hp, epoch, st->pos0);
	st->update = update;
	st->loss_acc = loss_acc;
	ncf_adam_constants(&be->hp, be->step + 1, &st->adam);
	if (st->B == 0)
		return 0;
	NCF_TRY(rows_ensure(be, c, st->B));
	st->S = ncf_epoch_check("cuda", c->P, be->hp.negatives, c->E, first, n);
	return st->S ? 0 : -1;
}

void step_close(struct cu *c)
{
	struct step_buffers *b = c->sb;
	if (!b)
		return;
	dfree(b->row_item), dfree(b->row_label), dfree(b->user_first), dfree(b->item_first);
	dfree(b->part), dfree(b->loss);
	free(b);
	c->sb = NULL;
}

int step_prepare(const struct step *st)
{
	struct cu *c = st->c;
	const struct ncf_shape *s = &st->be->shape;
	size_t B = st->B;
	NCF_TRY(dense_prepare(st));
	if (c->sb && B <= c->sb->cap)
		return 0;
	step_close(c);
	struct step_buffers *b = (struct step_buffers *)ncf_xcalloc(1, sizeof *b);
	c->sb = b;
	/* room for the partials of whichever implementations the layers take */
	size_t floats = 0;
	for (int i = 0; i < DENSE_IMPLS; i++) {
		int impl[NCF_MAX_LAYERS];
		for (int k = 0; k < NCF_MAX_LAYERS; k++)
			impl[k] = i;
		struct parts p;
		size_t f = parts_of(st, impl, NULL, &p);
		floats = f > floats ? f : floats;
	}
	NCF_TRY(mlp_setup());
	NCF_TRY(head_setup(s->factors, ncf_shape_last(s)));
	NCF_TRY(DALLOC(b->row_item, B));
	NCF_TRY(DALLOC(b->row_label, B));
	NCF_TRY(DALLOC(b->user_first, (size_t)s->users + 1));
	NCF_TRY(DALLOC(b->item_first, (size_t)s->items + 1));
	NCF_TRY(DALLOC(b->part, floats));
	NCF_TRY(DALLOC(b->loss, (B + HEAD_ROWS - 1) / HEAD_ROWS));
	b->cap = B;
	return 0;
}

/* Adam on the summed gradient (skipped on the device when fp16 found an
 * inf or NaN), writing the 16-bit copy that the next step's products
 * read. */
static int step_adam(const struct step *st)
{
	struct cu *c = st->c;
	size_t total = st->be->layout.total, lo = st->be->layout.mlp_user;
	const int *skip = NULL;
	if (c->act == ACT_F16) {
		DMEMSET_TRY(c->flag, sizeof(int), c->s, "clear_flag");
		NCF_TRY(nonfinite_cuda(c->grad, total, c->flag, c->s));
		skip = c->flag;
	}
	adam_pass a = {c->params, c->m, c->v, c->grad, total, st->adam, 1.0f / c->loss_scale, skip};
	if (c->act == ACT_F32)
		NCF_TRY(adam_cuda(a, c->s));
	else if (c->act == ACT_BF16)
		NCF_TRY(adam_cast_cuda<bf16>(a, (bf16 *)c->plo, lo, c->s));
	else
		NCF_TRY(adam_cast_cuda<f16>(a, (f16 *)c->plo, lo, c->s));
	params_stepped(c, 1);
	return 0;
}

/* A rank without rows: a zero gradient and loss, then the update (the
 * other ranks' gradients still arrive through the all-reduce). */
static int step_idle(const struct step *st)
{
	struct cu *c = st->c;
	DMEMSET_TRY(c->grad, st->be->layout.total * sizeof(float), c->s, "clear_grad");
	DMEMSET_TRY(c->loss_dev, sizeof(double), c->s, "clear_loss");
	if (!st->update)
		return 0;
	NCF_TRY(allreduce(st->be, c->grad, st->be->layout.total));
	return step_adam(st);
}

/* Stage 8: the first layer's and the MLP tables' gradients from dAU, dAI. */
static int step_tables_backward(const struct step *st)
{
	struct ncf_backend *be = st->be;
	struct cu *c = st->c;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(s), H1 = s->layers[1], U = s->users, I = s->items;
	const float *prm = c->params;
	float *g = c->grad;
	const struct blas *b = &c->blas;
	const cudaDataType f = CUDA_R_32F;
	gemm_mat dAU = {c->dAU, f, H1}, dAI = {c->dAI, f, H1};
	NCF_TRY(lin_wgrad(b, {"gemm_wgrad_user", U, M, H1}, dAU, {prm + L->mlp_user, f, M},
			  {g + L->w[1], f, 2 * M}));
	NCF_TRY(lin_wgrad(b, {"gemm_wgrad_item", I, M, H1}, dAI, {prm + L->mlp_item, f, M},
			  {g + L->w[1] + M, f, 2 * M}));
	NCF_TRY(lin_dgrad(b, {"gemm_dgrad_user", U, M, H1}, dAU, {prm + L->w[1], f, 2 * M},
			  {g + L->mlp_user, f, M}));
	return lin_dgrad(b, {"gemm_dgrad_item", I, M, H1}, dAI, {prm + L->w[1] + M, f, 2 * M},
			 {g + L->mlp_item, f, M});
}

template <typename T> static int step_run_t(const struct step *st)
{
	struct ncf_backend *be = st->be;
	struct cu *c = st->c;
	struct step_buffers *sb = c->sb;
	const int *impl = c->dense->impl;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const uint32_t F = s->factors, H1 = s->layers[1], last = s->n_layers - 1,
		       HL = s->layers[last], U = s->users, I = s->items;
	const size_t B = st->B;
	const float *prm = c->params;
	float *g = c->grad;
	const dropout_k &dk = st->dk;
	if (B == 0)
		return step_idle(st);
	struct parts pp;
	parts_of(st, impl, sb->part, &pp);
	pp.map.loss = sb->loss;
	pp.map.loss_rows = (uint32_t)((B + HEAD_ROWS - 1) / HEAD_ROWS);
	pp.map.loss_out = c->loss_dev;
	pp.map.loss_acc = st->loss_acc;
	/* 1. the slice's samples, its rows sorted by user, then by item */
	sample_src src = {stream_of(be, c, st->S, st->epoch), st->pos0};
	sample_out so = {c->su, c->si, c->lab};
	NCF_TRY(sample_cuda(src, B, so, c->s));
	sort_scratch tmp = {c->itmp, c->sort_tmp, c->sort_tmp_bytes};
	NCF_TRY(sort_by_key_cuda(c->su, B, id_bits(U), c->ku, c->ju, tmp, c->s));
	rows_by_user rows = {c->ku, c->ju, c->si, c->lab, sb->row_item, sb->row_label, sb->user_first};
	NCF_TRY(rows_by_user_cuda(B, U, rows, c->s));
	NCF_TRY(sort_by_key_cuda(sb->row_item, B, id_bits(I), c->ki, c->ji, tmp, c->s));
	NCF_TRY(seg_offsets_cuda(B, I, c->ki, sb->item_first, c->s));
	/* 2. the first-layer tables */
	NCF_TRY(params_tables<T>(be, c));
	/* 3. forward: layer 1 from the tables, layers 2..L dense */
	layer1_rows<T> l1 = {B, H1, c->ku, sb->row_item, (const T *)c->AU, (const T *)c->AI,
			     prm + L->b[1], (T *)c->h[1]};
	NCF_TRY(layer1_rows_cuda<T>(l1, dk, c->ju, U, c->s));
	for (uint32_t k = 2; k <= last; k++)
		NCF_TRY(dense_forward<T>(st, k, impl[k]));
	/* 4. the head, loss, dlogit and dz of the last layer, with their partials */
	head_rows<T> hr = {B, F, HL, c->ku, sb->row_item, prm + L->gmf_user, prm + L->gmf_item,
			   prm + L->head_w, (const T *)c->h[last]};
	head_grads<T> hg = {sb->row_label, 1.0f / (float)st->n, c->loss_scale, dk.scale, U, c->dl,
			    (T *)c->d[last], sb->part, sb->loss};
	NCF_TRY(head_fused_cuda<T>(hr, hg, c->s));
	/* 5. layers L..2 backward: dW_k, dz_{k-1} and db_{k-1} */
	for (uint32_t k = last; k >= 2; k--)
		NCF_TRY(dense_backward<T>(st, k, impl[k], pp.layer[k]));
	/* 6. every partial and the loss, summed in a fixed order */
	NCF_TRY(reduce_partials_cuda(pp.map, c->s));
	/* 7. per user and per item: dAU, dAI and the GMF tables' gradients */
	const T *dz1 = (const T *)c->d[1];
	key_sums<T> ku = {U, H1, F, B, sb->user_first, NULL, dz1, c->dl, sb->row_item,
			  prm + L->gmf_item, prm + L->head_w, c->dAU, g + L->gmf_user};
	NCF_TRY(key_grad_cuda<T>(ku, c->s));
	key_sums<T> ki = {I, H1, F, B, sb->item_first, c->ji, dz1, c->dl, c->ku, prm + L->gmf_user,
			  prm + L->head_w, c->dAI, g + L->gmf_item};
	NCF_TRY(key_grad_cuda<T>(ki, c->s));
	/* 8. dW1 and the MLP tables' gradients */
	NCF_TRY(step_tables_backward(st));
	/* 9. the gradient summed over the ranks, then Adam and the 16-bit copy */
	if (!st->update)
		return 0;
	NCF_TRY(allreduce(be, g, L->total));
	return step_adam(st);
}

int step_run(const struct step *st)
{
	return by_act(st->c->act, [&](auto t) { return step_run_t<decltype(t)>(st); });
}

} /* namespace NCF_CUDA_NS */
