/*
 * step.cu - the forward and backward pass of the cuda backend (see
 * backend.cuh for the files and the legend): the same function as the
 * reference (kernels/cpu/reference.c) and the fast cpu backend
 * (kernels/cpu/train.c, whose steps are named below), computed with cuBLAS
 * for the dense layers and the kernels of kernels.cuh for the rest.
 *
 * One training step on the rank's slice of the global batch (B rows at
 * epoch positions pos0 .. pos0 + B):
 *  1. samples: sample_cuda, ncf_sample_at per position (cpu 1);
 *  2. first layer, factorized over whole tables: AU = mlp_user W1u^T
 *     (U, H1) and AI = mlp_item W1i^T (I, H1), one GEMM each, every step.
 *     The cpu backend computes the rows of the batch's distinct ids only
 *     (its steps 2-3); on a GPU the whole tables cost about as much as the
 *     gather would (0.02 GFLOP per user or item row pair, ~10 GFLOP for
 *     ml-20m) and need no slot map;
 *  3. per row: h1 = dropout(relu(AU[u] + AI[i] + b1)) (layer1_cuda), then
 *     layers 2..L as a cuBLAS GEMM each plus bias_relu_dropout_cuda; the
 *     head, loss and dlogit = (sigmoid - y) / n (head_train_cuda); the
 *     backward of layers L..2 as GEMMs plus relu_dropout_back_cuda down to
 *     dz1 (B, H1) (cpu 4); bias and head gradients by deterministic column
 *     sums (colsum_cuda, head_grad_cuda);
 *  4. the batch sorted by user and by item (a stable radix sort), then
 *     dAU[u] = sum of dz1 over u's rows and dAI likewise (segsum_rows_cuda);
 *     dW1 = [dAU^T mlp_user, dAI^T mlp_item], db1 = column sums of dAU,
 *     dmlp_user = dAU W1u, dmlp_item = dAI W1i over whole tables (absent ids
 *     have zero rows, so their gradient is exactly 0, as in cpu 5);
 *  5. GMF: dgmf_user[u] = w_g * sum over u's rows of dlogit gmf_item[i],
 *     dgmf_item alike (segsum_gmf_cuda, cpu 6).
 * backend.cu then all-reduces the gradient and takes the Adam step.  The
 * gradient is that of the mean loss over the global batch of n rows.
 */
#include "backend.cuh"

namespace NCF_CUDA_NS {

/* ---- GEMMs, row-major ------------------------------------------------- */

/* Bytes of one element of a cuBLAS type. */
static double elem_bytes(cudaDataType t)
{
	return t == CUDA_R_32F ? 4.0 : 2.0;
}

/* C (m, n) = op(A) op(B) in cuBLAS's column-major terms (beta 0); `what`
 * names it for the cost recorder. */
static int gemm(struct cu *c, const char *what, cublasOperation_t ta, cublasOperation_t tb,
		size_t m, size_t n, size_t k, const void *A, cudaDataType at, size_t lda,
		const void *B, cudaDataType bt, size_t ldb, void *C, cudaDataType ct, size_t ldc)
{
	if (m == 0 || n == 0)
		return 0;
	if (m > 0x7FFFFFFF || n > 0x7FFFFFFF || k > 0x7FFFFFFF || lda > 0x7FFFFFFF ||
	    ldb > 0x7FFFFFFF || ldc > 0x7FFFFFFF) {
		ncf_error("cuda backend: a matrix of %zu x %zu x %zu is too large for cuBLAS", m, n,
			  k);
		return -1;
	}
	cublasComputeType_t ctype =
		at == CUDA_R_32F && bt == CUDA_R_32F ? c->compute_f32 : CUBLAS_COMPUTE_32F;
	float alpha = 1.0f, beta = 0.0f;
	double M = (double)m, N = (double)n, K = (double)k;
	if (NCF_COST(COST_GEMM, what,
		     M * K * elem_bytes(at) + K * N * elem_bytes(bt) + M * N * elem_bytes(ct),
		     2.0 * M * N * K))
		return 0;
	return CUBLAS_CHECK(cublasGemmEx(c->blas, ta, tb, (int)m, (int)n, (int)k, &alpha, A, at,
					 (int)lda, B, bt, (int)ldb, &beta, C, ct, (int)ldc, ctype,
					 CUBLAS_GEMM_DEFAULT));
}

/* Y (rows, out) = X (rows, in) W^T; W (out, in) with leading dimension ldw. */
int lin_fwd(struct cu *c, const char *what, size_t rows, size_t in, size_t out,
		   const void *X, cudaDataType xt, size_t ldx, const void *W, cudaDataType wt,
		   size_t ldw, void *Y, cudaDataType yt, size_t ldy)
{
	return gemm(c, what, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, W, wt, ldw, X, xt, ldx, Y, yt,
		    ldy);
}

/* dW (out, in) with leading dimension ldd = dY^T X: dY (rows, out), X (rows, in). */
int lin_wgrad(struct cu *c, const char *what, size_t rows, size_t in, size_t out,
		     const void *dY, cudaDataType dt, size_t lddy, const void *X, cudaDataType xt,
		     size_t ldx, float *dW, size_t ldd)
{
	return gemm(c, what, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, X, xt, ldx, dY, dt, lddy, dW,
		    CUDA_R_32F, ldd);
}

/* dX (rows, in) = dY (rows, out) W, W (out, in) with leading dimension ldw. */
int lin_dgrad(struct cu *c, const char *what, size_t rows, size_t in, size_t out,
		     const void *dY, cudaDataType dt, size_t lddy, const void *W, cudaDataType wt,
		     size_t ldw, void *dX, cudaDataType xt, size_t lddx)
{
	return gemm(c, what, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, W, wt, ldw, dY, dt, lddy, dX,
		    xt, lddx);
}

/* ---- forward pieces --------------------------------------------------- */

template <typename T> int make_tables(struct ncf_backend *be, struct cu *c)
{
	if (c->tables_valid)
		return 0;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(s), H1 = s->layers[1];
	if (c->act != ACT_F32 && !c->plo_valid) {
		size_t count = L->total - L->mlp_user;
		NCF_TRY(cast_cuda<T>(c->params + L->mlp_user, (T *)c->plo + L->mlp_user, count, c->s));
		c->plo_valid = 1;
	}
	const T *w = wts<T>(c);
	cudaDataType dt = dtype_of<T>();
	NCF_TRY(lin_fwd(c, "gemm_table_user", s->users, M, H1, w + L->mlp_user, dt, M, w + L->w[1], dt,
			2 * M, c->AU, dt, H1));
	NCF_TRY(lin_fwd(c, "gemm_table_item", s->items, M, H1, w + L->mlp_item, dt, M, w + L->w[1] + M,
			dt, 2 * M, c->AI, dt, H1));
	c->tables_valid = 1;
	return 0;
}

template int make_tables<float>(struct ncf_backend *be, struct cu *c);
template int make_tables<bf16>(struct ncf_backend *be, struct cu *c);
template int make_tables<f16>(struct ncf_backend *be, struct cu *c);

/* Layers 2..L on n rows: h[k] = dropout(relu(h[k-1] W_k^T + b_k)). */
template <typename T>
static int mlp_forward(struct ncf_backend *be, struct cu *c, size_t n, const dropout_k &dk)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const T *w = wts<T>(c);
	cudaDataType dt = dtype_of<T>();
	for (uint32_t k = 2; k < s->n_layers; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		NCF_TRY(lin_fwd(c, "gemm_fwd", n, in, out, c->h[k - 1], dt, in, w + L->w[k], dt, in,
				c->h[k], dt, out));
		NCF_TRY(bias_relu_dropout_cuda<T>(n, (uint32_t)out, (T *)c->h[k],
						  c->params + L->b[k], dk, k - 1, c->s));
	}
	return 0;
}

/* Logits (prob: probabilities) of the n pairs in su, si into out (device),
 * no dropout. */
template <typename T>
static int forward_logits(struct ncf_backend *be, struct cu *c, size_t n, float *out, int prob)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	dropout_k none;
	memset(&none, 0, sizeof none);
	uint32_t last = s->n_layers - 1;
	NCF_TRY(make_tables<T>(be, c));
	NCF_TRY(layer1_cuda<T>(n, s->layers[1], c->su, c->si, (const T *)c->AU, (const T *)c->AI,
			       c->params + L->b[1], 1, none, (T *)c->h[1], c->s));
	NCF_TRY(mlp_forward<T>(be, c, n, none));
	return head_logits_cuda<T>(n, s->factors, s->layers[last], c->su, c->si, c->params + L->gmf_user,
				   c->params + L->gmf_item, c->params + L->head_w, (const T *)c->h[last],
				   prob, out, c->s);
}

/* ---- the gradient ----------------------------------------------------- */

/* Steps 1-3 up to the head: samples of positions pos0 .. pos0 + B, the
 * tables, layer 1 and the MLP forward, the head, loss, dlogit and the head's
 * weight gradient, dz of the last layer.  S: the epoch's samples. */
template <typename T>
static int forward_train(struct ncf_backend *be, struct cu *c, uint64_t S, uint32_t epoch,
			 uint64_t pos0, size_t B, uint64_t n, const dropout_k &dk)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	uint32_t F = s->factors, H1 = s->layers[1], last = s->n_layers - 1, HL = s->layers[last];
	const float *prm = c->params;
	float inv_n = 1.0f / (float)n;
	mark(c, PH_SAMPLES);
	ncf_perm perm = ncf_perm_make(S, be->hp.seed, epoch);
	NCF_TRY(sample_cuda(perm, pos0, B, be->hp.seed, epoch, c->P, s->items,
			    (int)be->hp.true_neg, c->entry_user, c->offsets, c->items_csr, c->su,
			    c->si, c->lab, c->s));
	mark(c, PH_TABLES);
	NCF_TRY(make_tables<T>(be, c));
	mark(c, PH_FORWARD);
	NCF_TRY(layer1_cuda<T>(B, H1, c->su, c->si, (const T *)c->AU, (const T *)c->AI,
			       prm + L->b[1], 0, dk, (T *)c->h[1], c->s));
	NCF_TRY(mlp_forward<T>(be, c, B, dk));
	mark(c, PH_HEAD);
	NCF_TRY(head_train_cuda<T>(B, F, HL, c->su, c->si, c->lab, prm + L->gmf_user, prm + L->gmf_item,
				   prm + L->head_w, (const T *)c->h[last], inv_n, c->loss_scale,
				   dk.scale, c->loss, c->dl, (T *)c->d[last], c->s));
	return head_grad_cuda<T>(B, F, HL, c->su, c->si, prm + L->gmf_user, prm + L->gmf_item,
				 (const T *)c->h[last], c->dl, c->grad + L->head_w, c->red, c->s);
}

/* Step 3, backward of layers L..2 down to dz1 = c->d[1], with the weight
 * and bias gradients. */
template <typename T>
static int mlp_backward(struct ncf_backend *be, struct cu *c, size_t B, float drop_scale)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	cudaDataType dt = dtype_of<T>();
	const T *w = wts<T>(c);
	float *g = c->grad;
	mark(c, PH_MLP_BACKWARD);
	for (uint32_t k = s->n_layers - 1; k >= 2; k--) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		NCF_TRY(lin_wgrad(c, "gemm_wgrad", B, in, out, c->d[k], dt, out, c->h[k - 1], dt,
				  in, g + L->w[k], in));
		NCF_TRY(colsum_cuda<T>((const T *)c->d[k], B, out, g + L->b[k], c->red, c->s));
		NCF_TRY(lin_dgrad(c, "gemm_dgrad", B, in, out, c->d[k], dt, out, w + L->w[k], dt,
				  in, c->d[k - 1], dt, in));
		NCF_TRY(relu_dropout_back_cuda<T>(B * in, (T *)c->d[k - 1], (const T *)c->h[k - 1],
						  drop_scale, c->s));
	}
	return 0;
}

/* Step 4: the batch sorted by user and item, dAU and dAI by segment sums,
 * then the gradients of W1, b1 and the MLP embedding tables. */
template <typename T> static int layer1_backward(struct ncf_backend *be, struct cu *c, size_t B)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	uint32_t M = ncf_shape_m(s), H1 = s->layers[1], U = s->users, I = s->items;
	const float *prm = c->params;
	float *g = c->grad;
	mark(c, PH_SORT);
	NCF_TRY(sort_by_key_cuda(c->su, B, id_bits(U), c->ku, c->itmp, c->ju, c->sort_tmp,
				 c->sort_tmp_bytes, c->s));
	NCF_TRY(sort_by_key_cuda(c->si, B, id_bits(I), c->ki, c->itmp, c->ji, c->sort_tmp,
				 c->sort_tmp_bytes, c->s));
	mark(c, PH_LAYER1_BACKWARD);
	DMEMSET_TRY(c->dAU, (size_t)U * H1 * sizeof(float), c->s, "clear_dAU");
	DMEMSET_TRY(c->dAI, (size_t)I * H1 * sizeof(float), c->s, "clear_dAI");
	NCF_TRY(segsum_rows_cuda<T>(c->ku, c->ju, B, (const T *)c->d[1], H1, U, c->dAU,
				    c->seg_head, c->seg_tail, c->s));
	NCF_TRY(segsum_rows_cuda<T>(c->ki, c->ji, B, (const T *)c->d[1], H1, I, c->dAI,
				    c->seg_head, c->seg_tail, c->s));
	NCF_TRY(grow_red(c, colsum_scratch(U, H1)));
	NCF_TRY(lin_wgrad(c, "gemm_wgrad_user", U, M, H1, c->dAU, CUDA_R_32F, H1, prm + L->mlp_user,
			  CUDA_R_32F, M, g + L->w[1], 2 * (size_t)M));
	NCF_TRY(lin_wgrad(c, "gemm_wgrad_item", I, M, H1, c->dAI, CUDA_R_32F, H1, prm + L->mlp_item,
			  CUDA_R_32F, M, g + L->w[1] + M, 2 * (size_t)M));
	NCF_TRY(colsum_cuda<float>(c->dAU, U, H1, g + L->b[1], c->red, c->s));
	NCF_TRY(lin_dgrad(c, "gemm_dgrad_user", U, M, H1, c->dAU, CUDA_R_32F, H1, prm + L->w[1],
			  CUDA_R_32F, 2 * (size_t)M, g + L->mlp_user, CUDA_R_32F, M));
	return lin_dgrad(c, "gemm_dgrad_item", I, M, H1, c->dAI, CUDA_R_32F, H1, prm + L->w[1] + M,
			 CUDA_R_32F, 2 * (size_t)M, g + L->mlp_item, CUDA_R_32F, M);
}

/* Step 5: the GMF embedding gradients from the sorted batch; the loss sum. */
static int gmf_backward_loss(struct ncf_backend *be, struct cu *c, size_t B)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	uint32_t F = s->factors;
	const float *prm = c->params;
	float *g = c->grad;
	mark(c, PH_GMF_LOSS);
	DMEMSET_TRY(g + L->gmf_user, ((size_t)s->users + s->items) * F * sizeof(float), c->s,
		    "clear_dgmf");
	NCF_TRY(segsum_gmf_cuda(c->ku, c->ju, B, c->dl, c->si, prm + L->gmf_item, prm + L->head_w, F,
				s->users, g + L->gmf_user, c->seg_head, c->seg_tail, c->s));
	NCF_TRY(segsum_gmf_cuda(c->ki, c->ji, B, c->dl, c->su, prm + L->gmf_user, prm + L->head_w, F,
				s->items, g + L->gmf_item, c->seg_head, c->seg_tail, c->s));
	return sum_f64_cuda(c->loss, B, c->loss_dev, c->dred, c->s);
}

/* This rank's slice of the global batch at epoch positions [first,
 * first + n): *B rows from position *pos0; when B > 0 the row buffers made
 * for it and *S, the epoch's samples, checked against the batch.  Returns
 * 0 or -1 (reported). */
static int step_slice(struct ncf_backend *be, struct cu *c, uint64_t first, uint64_t n,
		      size_t *B, uint64_t *pos0, uint64_t *S)
{
	if (!c->have_td) {
		ncf_error("cuda backend: no training data");
		return -1;
	}
	uint64_t lo, hi;
	ncf_dist_slice(n, be->dist->rank, be->dist->size, &lo, &hi);
	*B = (size_t)(hi - lo);
	*pos0 = first + lo;
	*S = 0;
	if (*B == 0)
		return 0;
	NCF_TRY(ensure_rows(be, c, *B));
	*S = ncf_epoch_check("cuda", c->P, be->hp.negatives, first, n);
	return *S ? 0 : -1;
}

template <typename T>
static int compute_grad(struct ncf_backend *be, struct cu *c, uint32_t epoch, uint64_t first,
			uint64_t n)
{
	size_t B;
	uint64_t pos0, S;
	NCF_TRY(step_slice(be, c, first, n, &B, &pos0, &S));
	if (B == 0) {
		DMEMSET_TRY(c->grad, be->layout.total * sizeof(float), c->s, "clear_grad");
		DMEMSET_TRY(c->loss_dev, sizeof(double), c->s, "clear_loss");
		return 0;
	}
	dropout_k dk = dropout_of(&be->hp, epoch, pos0);
	if (fused_path(be, c))
		return compute_grad_fused<T>(be, c, S, epoch, pos0, B, n, dk);
	NCF_TRY(forward_train<T>(be, c, S, epoch, pos0, B, n, dk)); /* 1-3 */
	NCF_TRY(mlp_backward<T>(be, c, B, dk.scale));		     /* 3 */
	NCF_TRY(layer1_backward<T>(be, c, B));			     /* 4 */
	return gmf_backward_loss(be, c, B);			     /* 5 */
}

int step_prepare(struct ncf_backend *be, struct cu *c, uint64_t first, uint64_t n)
{
	size_t B;
	uint64_t pos0, S;
	NCF_TRY(step_slice(be, c, first, n, &B, &pos0, &S));
	if (B == 0)
		return 0;
	if (fused_path(be, c))
		return fused_prepare(be, c, B);
	return grow_red(c, colsum_scratch(be->shape.users, be->shape.layers[1]));
}

int compute_grad_any(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n)
{
	struct cu *c = impl(be);
	switch (c->act) {
	case ACT_BF16:
		return compute_grad<bf16>(be, c, epoch, first, n);
	case ACT_F16:
		return compute_grad<f16>(be, c, epoch, first, n);
	default:
		return compute_grad<float>(be, c, epoch, first, n);
	}
}

int forward_logits_any(struct ncf_backend *be, struct cu *c, size_t n, float *out, int prob)
{
	switch (c->act) {
	case ACT_BF16:
		return forward_logits<bf16>(be, c, n, out, prob);
	case ACT_F16:
		return forward_logits<f16>(be, c, n, out, prob);
	default:
		return forward_logits<float>(be, c, n, out, prob);
	}
}

int make_tables_any(struct ncf_backend *be, struct cu *c)
{
	switch (c->act) {
	case ACT_BF16:
		return make_tables<bf16>(be, c);
	case ACT_F16:
		return make_tables<f16>(be, c);
	default:
		return make_tables<float>(be, c);
	}
}

} /* namespace NCF_CUDA_NS */
