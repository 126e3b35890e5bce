/* rows.cu - see rows.cuh. */
#include "rows.cuh"

namespace NCF_CUDA_NS {

void rows_free(struct cu *c)
{
	dfree(c->su), dfree(c->si), dfree(c->lab), dfree(c->dl);
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		dfree(c->h[k]), dfree(c->d[k]);
	dfree(c->ku), dfree(c->ju), dfree(c->ki), dfree(c->ji), dfree(c->itmp);
	dfree(c->sort_tmp);
	c->sort_tmp_bytes = 0;
	c->cap = 0;
}

int rows_ensure(struct ncf_backend *be, struct cu *c, size_t n)
{
	if (n <= c->cap)
		return 0;
	const struct ncf_shape *s = &be->shape;
	rows_free(c);
	NCF_TRY(DALLOC(c->su, n));
	NCF_TRY(DALLOC(c->si, n));
	NCF_TRY(DALLOC(c->lab, n));
	NCF_TRY(DALLOC(c->dl, n));
	NCF_TRY(DALLOC(c->ku, n));
	NCF_TRY(DALLOC(c->ju, n));
	NCF_TRY(DALLOC(c->ki, n));
	NCF_TRY(DALLOC(c->ji, n));
	NCF_TRY(DALLOC(c->itmp, n));
	for (uint32_t k = 1; k < s->n_layers; k++) {
		NCF_TRY(DALLOC_BYTES(&c->h[k], n * s->layers[k] * c->es));
		NCF_TRY(DALLOC_BYTES(&c->d[k], n * s->layers[k] * c->es));
	}
	c->rows_gen++; /* graphs captured on the old buffers are stale */
	size_t bu, bi;
	NCF_TRY(sort_temp_bytes(n, id_bits(s->users), &bu));
	NCF_TRY(sort_temp_bytes(n, id_bits(s->items), &bi));
	c->sort_tmp_bytes = bu > bi ? bu : bi;
	NCF_TRY(DALLOC_BYTES(&c->sort_tmp, c->sort_tmp_bytes));
	c->cap = n;
	return 0;
}

} /* namespace NCF_CUDA_NS */
