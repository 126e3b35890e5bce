/* step.cu - what the step paths share (see step.cuh). */
#include "nccl.cuh"
#include "rows.cuh"
#include "step.cuh"

namespace NCF_CUDA_NS {

int path_parse(const char *name, int *path)
{
	static const char *const names[PATHS] = {"fused", "unfused", "lt"};
	*path = PATH_FUSED;
	if (!name || !*name)
		return 0;
	for (int p = 0; p < PATHS; p++)
		if (!strcmp(name, names[p])) {
			*path = p;
			return 0;
		}
	ncf_error("cuda backend: NCF_CUDA_PATH=%s: not fused, unfused or lt", name);
	return -1;
}

const struct step_path *step_path_of(struct ncf_backend *be, struct cu *c)
{
	static int said;
	if (c->path == PATH_UNFUSED)
		return &step_unfused;
	if (c->path == PATH_LT)
		return &step_lt;
	const struct ncf_shape *s = &be->shape;
	for (uint32_t k = 1; k < s->n_layers; k++)
		if (s->layers[k] > FUSED_MAX_WIDTH) {
			if (!said)
				ncf_debug("cuda backend: a hidden layer of %u units is wider than the "
					  "fused kernels take (%u): the unfused path",
					  s->layers[k], (unsigned)FUSED_MAX_WIDTH);
			said = 1;
			return &step_unfused;
		}
	return &step_fused;
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

int step_idle(const struct step *st, int copy)
{
	struct cu *c = st->c;
	DMEMSET_TRY(c->grad, st->be->layout.total * sizeof(float), c->s, "clear_grad");
	DMEMSET_TRY(c->loss_dev, sizeof(double), c->s, "clear_loss");
	if (!st->update)
		return 0;
	NCF_TRY(allreduce(st->be, c->grad, st->be->layout.total));
	return step_adam(st, copy);
}

int step_tables_backward(const struct step *st, int user_w)
{
	struct ncf_backend *be = st->be;
	struct cu *c = st->c;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(s), H1 = s->layers[1], U = s->users, I = s->items;
	const float *prm = c->params;
	float *g = c->grad;
	const struct blas *b = &c->blas;
	if (user_w)
		NCF_TRY(lin_wgrad(b, "gemm_wgrad_user", U, M, H1, c->dAU, CUDA_R_32F, H1,
				  prm + L->mlp_user, CUDA_R_32F, M, g + L->w[1], 2 * M));
	NCF_TRY(lin_wgrad(b, "gemm_wgrad_item", I, M, H1, c->dAI, CUDA_R_32F, H1, prm + L->mlp_item,
			  CUDA_R_32F, M, g + L->w[1] + M, 2 * M));
	NCF_TRY(lin_dgrad(b, "gemm_dgrad_user", U, M, H1, c->dAU, CUDA_R_32F, H1, prm + L->w[1],
			  CUDA_R_32F, 2 * M, g + L->mlp_user, CUDA_R_32F, M));
	return lin_dgrad(b, "gemm_dgrad_item", I, M, H1, c->dAI, CUDA_R_32F, H1, prm + L->w[1] + M,
			 CUDA_R_32F, 2 * M, g + L->mlp_item, CUDA_R_32F, M);
}

int step_adam(const struct step *st, int copy)
{
	struct cu *c = st->c;
	size_t total = st->be->layout.total, lo = st->be->layout.mlp_user;
	const int *skip = NULL;
	if (c->act == ACT_F16) {
		DMEMSET_TRY(c->flag, sizeof(int), c->s, "clear_flag");
		NCF_TRY(nonfinite_cuda(c->grad, total, c->flag, c->s));
		skip = c->flag;
	}
	float g_scale = 1.0f / c->loss_scale;
	if (!copy || c->act == ACT_F32)
		NCF_TRY(adam_cuda(c->params, c->m, c->v, c->grad, total, st->adam, g_scale, skip,
				  c->s));
	else if (c->act == ACT_BF16)
		NCF_TRY(adam_cast_cuda<bf16>(c->params, c->m, c->v, c->grad, total, st->adam, g_scale,
					     skip, (bf16 *)c->plo, lo, c->s));
	else
		NCF_TRY(adam_cast_cuda<f16>(c->params, c->m, c->v, c->grad, total, st->adam, g_scale,
					    skip, (f16 *)c->plo, lo, c->s));
	params_stepped(c, copy);
	return 0;
}

} /* namespace NCF_CUDA_NS */
