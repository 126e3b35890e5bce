/*
 * step_lt.cu - the training step with cuBLASLt's dense layers
 * (NCF_CUDA_PATH=lt; see step.cuh): the fused step's rows sorted by user,
 * first layer, head, per-key sums and Adam, with layers 2..L as cuBLASLt
 * products whose epilogues do what mlp.cu's kernels do by hand (lt.cuh),
 * so that a GPU run can compare NVIDIA's tuned kernels with ours:
 *
 *  - forward: h_k = relu(h_{k-1} W_k^T + b_k) with the ReLU's bit mask
 *    (RELU_AUX_BIAS), then dropout in one light pass (dropout_mul_cuda:
 *    the same Philox masks as every other path, by sample);
 *  - backward, k = L..2: dW_k = dz_k^T h_{k-1}, with db_k as the product's
 *    bias gradient (BGRADB) below the last layer (db_L comes with the head's
 *    partials); dz_{k-1} = (dz_k W_k) * relu'(mask of layer k - 1) (DRELU),
 *    then the dropout of layer k - 1 in a light pass; for layer 1, whose
 *    forward is ours, the mask from h1 > 0 as the unfused step takes it;
 *  - db1 as the bias gradient of the user table's weight product (the sum
 *    over users of dAU is the sum over rows of dz1).
 *
 * cuBLASLt's ReLU may not keep a NaN as ours does (common.cuh relu), so an
 * fp16 overflow in a layer's product can reach the loss as a number; fp16
 * runs keep the fused path for that.  Sums are cuBLASLt's, in its orders:
 * the path agrees with the others to rounding, deterministic for a GPU and
 * cuBLASLt version.
 */
#include "lt.cuh"
#include "nccl.cuh"
#include "step.cuh"

namespace NCF_CUDA_NS {

static void lt_close(struct cu *c)
{
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		dfree(c->aux[k]);
	c->aux_cap = 0;
	lt_free(c);
	fused_free(c);
}

static int lt_prepare(const struct step *st)
{
	struct cu *c = st->c;
	const struct ncf_shape *s = &st->be->shape;
	NCF_TRY(fused_prepare(st));
	NCF_TRY(lt_open(c));
	if (st->B <= c->aux_cap)
		return 0;
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		dfree(c->aux[k]);
	c->aux_cap = 0;
	for (uint32_t k = 2; k < s->n_layers; k++)
		NCF_TRY(DALLOC_BYTES(&c->aux[k], lt_aux_bytes(s->layers[k], st->B)));
	c->aux_cap = st->B;
	return 0;
}

template <typename T> static int lt_run_t(const struct step *st)
{
	struct ncf_backend *be = st->be;
	struct cu *c = st->c;
	struct fused *f = c->fused;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const uint32_t F = s->factors, H1 = s->layers[1], last = s->n_layers - 1,
		       HL = s->layers[last], U = s->users, I = s->items, M = ncf_shape_m(s);
	const size_t B = st->B;
	const float *prm = c->params;
	float *g = c->grad;
	const T *w = lowp<T>(c);
	const dropout_k &dk = st->dk;
	if (B == 0)
		return step_idle(st, 1);
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
	/* 3. forward: layer 1 from the tables, layers 2..L by cuBLASLt, then dropout */
	NCF_TRY(layer1_rows_cuda<T>(B, H1, c->ku, f->ri, (const T *)c->AU, (const T *)c->AI,
				    prm + L->b[1], dk, c->ju, U, (T *)c->h[1], c->s));
	for (uint32_t k = 2; k <= last; k++) {
		NCF_TRY(lt_fwd<T>(c, B, s->layers[k - 1], s->layers[k], (const T *)c->h[k - 1],
				  w + L->w[k], prm + L->b[k], (T *)c->h[k], c->aux[k]));
		NCF_TRY(dropout_mul_cuda<T>(B, s->layers[k], (T *)c->h[k], dk, k - 1, c->ju, c->s));
	}
	/* 4. the head, loss, dlogit and dz of the last layer, with their partials */
	NCF_TRY(head_fused_cuda<T>(B, F, HL, c->ku, f->ri, f->rlab, prm + L->gmf_user,
				   prm + L->gmf_item, prm + L->head_w, (const T *)c->h[last],
				   1.0f / (float)st->n, c->loss_scale, dk.scale, U, c->dl,
				   (T *)c->d[last], f->part, f->loss, c->s));
	/* 5. layers L..2 backward: dW and db by cuBLASLt, dz below by its DRELU,
	 *    then that layer's dropout (layer 1: the mask from h1) */
	for (uint32_t k = last; k >= 2; k--) {
		uint32_t in = s->layers[k - 1], out = s->layers[k];
		const T *dz = (const T *)c->d[k];
		NCF_TRY(lt_wgrad<T>(c, B, in, out, dz, out, (const T *)c->h[k - 1], in, g + L->w[k],
				    in, k == last ? NULL : g + L->b[k]));
		NCF_TRY(lt_dgrad<T>(c, B, in, out, dz, w + L->w[k], k > 2 ? c->aux[k - 1] : NULL,
				    (T *)c->d[k - 1]));
		if (k > 2)
			NCF_TRY(dropout_mul_cuda<T>(B, in, (T *)c->d[k - 1], dk, k - 2, c->ju, c->s));
		else
			NCF_TRY(relu_dropout_back_cuda<T>(B * in, (T *)c->d[1], (const T *)c->h[1],
							  dk.scale, c->s));
	}
	/* 6. the head's partials and the loss, summed in a fixed order */
	part_map m;
	memset(&m, 0, sizeof m);
	uint32_t nbh = (uint32_t)((B + HEAD_ROWS - 1) / HEAD_ROWS), ch = F + 2 * HL + 1;
	m.seg[m.n++] = {f->part, g + L->head_w, nbh, ch, F + HL + 1};
	m.seg[m.n++] = {f->part + F + HL + 1, g + L->b[last], nbh, ch, HL};
	m.loss = f->loss;
	m.loss_rows = nbh;
	m.loss_out = c->loss_dev;
	m.loss_acc = st->loss_acc;
	NCF_TRY(reduce_partials_cuda(m, c->s));
	/* 7. per user and per item: dAU, dAI and the GMF tables' gradients */
	NCF_TRY(key_grad_cuda<T>(U, H1, F, B, f->uoff, NULL, (const T *)c->d[1], c->dl, f->ri,
				 prm + L->gmf_item, prm + L->head_w, c->dAU, g + L->gmf_user, c->s));
	NCF_TRY(key_grad_cuda<T>(I, H1, F, B, f->ioff, c->ji, (const T *)c->d[1], c->dl, c->ku,
				 prm + L->gmf_user, prm + L->head_w, c->dAI, g + L->gmf_item, c->s));
	/* 8. dW1 (the user half with db1 as its bias gradient) and the tables' gradients */
	NCF_TRY(lt_wgrad<float>(c, U, M, H1, c->dAU, H1, prm + L->mlp_user, M, g + L->w[1], 2 * M,
				g + L->b[1]));
	NCF_TRY(step_tables_backward(st, 0));
	/* 9. the gradient summed over the ranks, then Adam and the 16-bit copy */
	if (!st->update)
		return 0;
	NCF_TRY(allreduce(be, g, L->total));
	return step_adam(st, 1);
}

static int lt_run(const struct step *st)
{
	switch (st->c->act) {
	case ACT_BF16:
		return lt_run_t<bf16>(st);
	case ACT_F16:
		return lt_run_t<f16>(st);
	default:
		return lt_run_t<float>(st);
	}
}

const struct step_path step_lt = {"lt", 1, 1, lt_prepare, lt_run, lt_close};

} /* namespace NCF_CUDA_NS */
