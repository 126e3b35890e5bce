/* rows.cu - see rows.cuh. */
#include "rows.cuh"

namespace NCF_CUDA_NS {

static size_t max_width(const struct ncf_shape *s)
{
	size_t m = s->factors + 1;
	for (uint32_t k = 1; k < s->n_layers; k++)
		if (s->layers[k] > m)
			m = s->layers[k];
	return m;
}

int rows_grow_red(struct cu *c, size_t floats)
{
	if (floats <= c->red_cap)
		return 0;
	dfree(c->red);
	c->red_cap = 0;
	NCF_TRY(DALLOC(c->red, floats));
	c->red_cap = floats;
	return 0;
}

/* Everything but the column-sum scratch, which grows on its own. */
static void free_row_buffers(struct cu *c)
{
	dfree(c->su), dfree(c->si), dfree(c->lab), dfree(c->dl), dfree(c->loss);
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		dfree(c->h[k]), dfree(c->d[k]);
	dfree(c->ku), dfree(c->ju), dfree(c->ki), dfree(c->ji), dfree(c->itmp);
	dfree(c->sort_tmp), dfree(c->seg_head), dfree(c->seg_tail), dfree(c->dred);
	c->sort_tmp_bytes = 0;
	c->cap = 0;
}

void rows_free(struct cu *c)
{
	free_row_buffers(c);
	dfree(c->red);
	c->red_cap = 0;
}

int rows_ensure(struct ncf_backend *be, struct cu *c, size_t n)
{
	if (n <= c->cap)
		return 0;
	const struct ncf_shape *s = &be->shape;
	free_row_buffers(c);
	size_t wmax = max_width(s);
	NCF_TRY(DALLOC(c->su, n));
	NCF_TRY(DALLOC(c->si, n));
	NCF_TRY(DALLOC(c->lab, n));
	NCF_TRY(DALLOC(c->dl, n));
	NCF_TRY(DALLOC(c->loss, n));
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
	size_t seg = seg_scratch(n, wmax);
	NCF_TRY(DALLOC(c->seg_head, seg));
	NCF_TRY(DALLOC(c->seg_tail, seg));
	NCF_TRY(DALLOC(c->dred, sum_scratch(n)));
	size_t bu, bi;
	NCF_TRY(sort_temp_bytes(n, id_bits(s->users), &bu));
	NCF_TRY(sort_temp_bytes(n, id_bits(s->items), &bi));
	c->sort_tmp_bytes = bu > bi ? bu : bi;
	NCF_TRY(DALLOC_BYTES(&c->sort_tmp, c->sort_tmp_bytes));
	size_t red = colsum_scratch(n, wmax);
	size_t hg = head_grad_scratch(n, s->factors, ncf_shape_last(s));
	NCF_TRY(rows_grow_red(c, red > hg ? red : hg));
	c->cap = n;
	return 0;
}

} /* namespace NCF_CUDA_NS */
