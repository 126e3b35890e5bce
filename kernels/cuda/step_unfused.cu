/*
 * step_unfused.cu - the unfused training step (NCF_CUDA_PATH=unfused; see
 * step.cuh): every dense product through cuBLAS and one kernel per
 * elementwise pass, the order of the fast cpu backend (kernels/cpu/train.c),
 * kept beside the fused step so that the two can be compared, and for
 * shapes the fused kernels do not take.  The same function as reference.c:
 *  - the first layer factorized over whole tables: AU = mlp_user W1u^T
 *    (U, H1) and AI = mlp_item W1i^T (I, H1), one GEMM each (on a GPU the
 *    whole tables cost about as much as a gather of the batch's ids would,
 *    ~10 GFLOP for ml-20m, and need no slot map);
 *  - per row: h1 = dropout(relu(AU[u] + AI[i] + b1)), layers 2..L as a GEMM
 *    plus a bias + ReLU + dropout pass, the head, loss and dlogit = (sigmoid
 *    - y) / n; the backward of layers L..2 as GEMMs plus the ReLU and
 *    dropout mask, down to dz1 (B, H1); bias and head gradients by
 *    deterministic column sums;
 *  - the batch sorted by user and by item (a stable radix sort), then
 *    dAU[u] = the sum of dz1 over u's rows and dAI likewise (segment sums),
 *    and from them the first layer's and the MLP tables' gradients;
 *  - GMF: dgmf_user[u] = w_g * the sum over u's rows of dlogit gmf_item[i],
 *    dgmf_item alike.
 */
#include "nccl.cuh"
#include "rows.cuh"
#include "step.cuh"

namespace NCF_CUDA_NS {

static int unfused_prepare(const struct step *st)
{
	const struct ncf_shape *s = &st->be->shape;
	return rows_grow_red(st->c, colsum_scratch(s->users, s->layers[1]));
}

template <typename T> static int unfused_run_t(const struct step *st)
{
	struct ncf_backend *be = st->be;
	struct cu *c = st->c;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const uint32_t F = s->factors, H1 = s->layers[1], last = s->n_layers - 1,
		       HL = s->layers[last], U = s->users, I = s->items;
	const size_t B = st->B;
	const float *prm = c->params;
	float *g = c->grad;
	const T *w = lowp<T>(c);
	const cudaDataType dt = dtype_of<T>();
	const struct blas *bl = &c->blas;
	const dropout_k &dk = st->dk;
	if (B == 0)
		return step_idle(st, 0);
	/* 1. the slice's samples; 2. the first-layer tables */
	NCF_TRY(sample_cuda(stream_of(be, c, st->S, st->epoch), st->pos0, B, c->su, c->si, c->lab,
			    c->s));
	NCF_TRY(params_tables<T>(be, c));
	/* 3. forward: layer 1 from the tables, layers 2..L a GEMM and a pass each */
	NCF_TRY(layer1_cuda<T>(B, H1, c->su, c->si, (const T *)c->AU, (const T *)c->AI,
			       prm + L->b[1], 0, dk, (T *)c->h[1], c->s));
	for (uint32_t k = 2; k <= last; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		NCF_TRY(lin_fwd(bl, "gemm_fwd", B, in, out, c->h[k - 1], dt, in, w + L->w[k], dt, in,
				c->h[k], dt, out));
		NCF_TRY(bias_relu_dropout_cuda<T>(B, (uint32_t)out, (T *)c->h[k], prm + L->b[k], dk,
						  k - 1, c->s));
	}
	/* 4. the head, loss, dlogit and dz of the last layer; the head's gradient */
	NCF_TRY(head_train_cuda<T>(B, F, HL, c->su, c->si, c->lab, prm + L->gmf_user,
				   prm + L->gmf_item, prm + L->head_w, (const T *)c->h[last],
				   1.0f / (float)st->n, c->loss_scale, dk.scale, c->loss, c->dl,
				   (T *)c->d[last], c->s));
	NCF_TRY(head_grad_cuda<T>(B, F, HL, c->su, c->si, prm + L->gmf_user, prm + L->gmf_item,
				  (const T *)c->h[last], c->dl, g + L->head_w, c->red, c->s));
	/* 5. layers L..2 backward: dW, db, dX, then the ReLU and dropout mask */
	for (uint32_t k = last; k >= 2; k--) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		NCF_TRY(lin_wgrad(bl, "gemm_wgrad", B, in, out, c->d[k], dt, out, c->h[k - 1], dt,
				  in, g + L->w[k], in));
		NCF_TRY(colsum_cuda<T>((const T *)c->d[k], B, out, g + L->b[k], c->red, c->s));
		NCF_TRY(lin_dgrad(bl, "gemm_dgrad", B, in, out, c->d[k], dt, out, w + L->w[k], dt,
				  in, c->d[k - 1], dt, in));
		NCF_TRY(relu_dropout_back_cuda<T>(B * in, (T *)c->d[k - 1], (const T *)c->h[k - 1],
						  dk.scale, c->s));
	}
	/* 6. rows sorted by user and by item; dAU, dAI as segment sums of dz1 */
	NCF_TRY(sort_by_key_cuda(c->su, B, id_bits(U), c->ku, c->itmp, c->ju, c->sort_tmp,
				 c->sort_tmp_bytes, c->s));
	NCF_TRY(sort_by_key_cuda(c->si, B, id_bits(I), c->ki, c->itmp, c->ji, c->sort_tmp,
				 c->sort_tmp_bytes, c->s));
	DMEMSET_TRY(c->dAU, (size_t)U * H1 * sizeof(float), c->s, "clear_dAU");
	DMEMSET_TRY(c->dAI, (size_t)I * H1 * sizeof(float), c->s, "clear_dAI");
	NCF_TRY(segsum_rows_cuda<T>(c->ku, c->ju, B, (const T *)c->d[1], H1, U, c->dAU,
				    c->seg_head, c->seg_tail, c->s));
	NCF_TRY(segsum_rows_cuda<T>(c->ki, c->ji, B, (const T *)c->d[1], H1, I, c->dAI,
				    c->seg_head, c->seg_tail, c->s));
	/* 7. db1, then dW1 and the MLP tables' gradients */
	NCF_TRY(colsum_cuda<float>(c->dAU, U, H1, g + L->b[1], c->red, c->s));
	NCF_TRY(step_tables_backward(st, 1));
	/* 8. the GMF tables' gradients by segment sums; the loss sum */
	DMEMSET_TRY(g + L->gmf_user, ((size_t)U + I) * F * sizeof(float), c->s, "clear_dgmf");
	NCF_TRY(segsum_gmf_cuda(c->ku, c->ju, B, c->dl, c->si, prm + L->gmf_item, prm + L->head_w,
				F, U, g + L->gmf_user, c->seg_head, c->seg_tail, c->s));
	NCF_TRY(segsum_gmf_cuda(c->ki, c->ji, B, c->dl, c->su, prm + L->gmf_user, prm + L->head_w,
				F, I, g + L->gmf_item, c->seg_head, c->seg_tail, c->s));
	NCF_TRY(sum_f64_cuda(c->loss, B, c->loss_dev, c->dred, c->s));
	/* 9. the gradient summed over the ranks, then Adam */
	if (!st->update)
		return 0;
	NCF_TRY(allreduce(be, g, L->total));
	return step_adam(st, 0);
}

static int unfused_run(const struct step *st)
{
	switch (st->c->act) {
	case ACT_BF16:
		return unfused_run_t<bf16>(st);
	case ACT_F16:
		return unfused_run_t<f16>(st);
	default:
		return unfused_run_t<float>(st);
	}
}

const struct step_path step_unfused = {"unfused", 0, 0, unfused_prepare, unfused_run, NULL};

} /* namespace NCF_CUDA_NS */
