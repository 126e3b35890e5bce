/* params.cu - see params.cuh. */
#include "params.cuh"

namespace NCF_CUDA_NS {

template <typename T> int params_tables(struct ncf_backend *be, struct cu *c)
{
	if (c->tables_valid)
		return 0;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(s), H1 = s->layers[1];
	if (c->act != ACT_F32 && !c->plo_valid) {
		size_t count = L->total - L->mlp_user;
		NCF_TRY(cast_cuda<T>(c->params + L->mlp_user, (T *)c->plo + L->mlp_user, count,
				     c->s));
		c->plo_valid = 1;
	}
	const T *w = lowp<T>(c);
	cudaDataType dt = dtype_of<T>();
	NCF_TRY(lin_fwd(&c->blas, {"gemm_table_user", s->users, M, H1}, {w + L->mlp_user, dt, M},
			{w + L->w[1], dt, 2 * M}, {c->AU, dt, H1}));
	NCF_TRY(lin_fwd(&c->blas, {"gemm_table_item", s->items, M, H1}, {w + L->mlp_item, dt, M},
			{w + L->w[1] + M, dt, 2 * M}, {c->AI, dt, H1}));
	c->tables_valid = 1;
	return 0;
}

template int params_tables<float>(struct ncf_backend *be, struct cu *c);
template int params_tables<bf16>(struct ncf_backend *be, struct cu *c);
template int params_tables<f16>(struct ncf_backend *be, struct cu *c);

int params_tables_any(struct ncf_backend *be, struct cu *c)
{
	return by_act(c->act, [&](auto t) { return params_tables<decltype(t)>(be, c); });
}

void params_replaced(struct cu *c)
{
	c->plo_valid = c->tables_valid = 0;
}

void params_stepped(struct cu *c, int copy_written)
{
	c->tables_valid = 0;
	c->plo_valid = copy_written && c->act != ACT_F32;
}

struct params_mark params_save(const struct cu *c)
{
	struct params_mark m = {c->plo_valid, c->tables_valid};
	return m;
}

void params_restore(struct cu *c, struct params_mark m)
{
	c->plo_valid = m.plo_valid;
	c->tables_valid = m.tables_valid;
}

} /* namespace NCF_CUDA_NS */
