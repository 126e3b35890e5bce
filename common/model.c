/* model.c - see model.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "model.h"
#include "ncf_hd.h"

const uint32_t ncf_nvidia_epochs = 30, ncf_nvidia_topk = 10;

const char *ncf_precision_name(enum ncf_precision p)
{
	switch (p) {
	case NCF_PRECISION_FP32:
		return "fp32";
	case NCF_PRECISION_TF32:
		return "tf32";
	case NCF_PRECISION_BF16:
		return "bf16";
	case NCF_PRECISION_FP16:
		return "fp16";
	default:
		return "default";
	}
}

void ncf_hparams_nvidia(struct ncf_hparams *hp)
{
	memset(hp, 0, sizeof *hp);
	hp->lr = 0.0045f;
	hp->beta1 = 0.25f;
	hp->beta2 = 0.5f;
	hp->eps = 1e-8f;
	hp->dropout = 0.5f;
	hp->negatives = 4;
	hp->batch = (uint64_t)1 << 20;
	hp->seed = 1;
}

void ncf_shape_nvidia(struct ncf_shape *s, uint32_t users, uint32_t items)
{
	static const uint32_t layers[] = {256, 256, 128, 64};
	memset(s, 0, sizeof *s);
	s->users = users;
	s->items = items;
	s->factors = 64;
	s->n_layers = 4;
	memcpy(s->layers, layers, sizeof layers);
}

void ncf_model_free(struct ncf_model *m)
{
	free(m->user_ids);
	free(m->item_ids);
	free(m->params);
	ncf_names_free(&m->user_names);
	ncf_names_free(&m->item_names);
	m->user_ids = m->item_ids = NULL;
	m->params = NULL;
}

void ncf_layout_make(const struct ncf_shape *s, struct ncf_layout *l)
{
	memset(l, 0, sizeof *l);
	size_t U = s->users, I = s->items, F = s->factors, M = ncf_shape_m(s);
	size_t o = 0;
	l->gmf_user = o;
	o += U * F;
	l->gmf_item = o;
	o += I * F;
	l->mlp_user = o;
	o += U * M;
	l->mlp_item = o;
	o += I * M;
	l->dense = o;
	for (uint32_t k = 1; k < s->n_layers; k++) {
		l->w[k] = o;
		o += (size_t)s->layers[k] * s->layers[k - 1];
		l->b[k] = o;
		o += s->layers[k];
	}
	l->head_w = o;
	o += F + ncf_shape_last(s);
	l->head_b = o;
	o += 1;
	l->total = o;
}

/* Uniform in [-limit, limit) for element k of tensor t. */
static float init_uniform(uint64_t seed, uint32_t t, size_t k, float limit)
{
	ncf_u32x4 r = ncf_rng(seed, NCF_RNG_INIT, t, k, 0);
	return (2.0f * ncf_uniform01(r.v[0]) - 1.0f) * limit;
}

/* N(0, sd) for element k of tensor t (Box-Muller on one Philox block). */
static float init_normal(uint64_t seed, uint32_t t, size_t k, float sd)
{
	ncf_u32x4 r = ncf_rng(seed, NCF_RNG_INIT, t, k, 1);
	double u1 = ((double)r.v[0] + 1.0) / 4294967296.0; /* (0, 1] */
	double u2 = (double)r.v[1] / 4294967296.0;
	return (float)(sd * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void ncf_model_init(const struct ncf_shape *s, const struct ncf_layout *l, uint64_t seed,
		    float *params)
{
	size_t U = s->users, I = s->items, F = s->factors, M = ncf_shape_m(s);
	struct {
		size_t off, n;
	} emb[4] = {{l->gmf_user, U * F}, {l->gmf_item, I * F}, {l->mlp_user, U * M},
		    {l->mlp_item, I * M}};
	for (uint32_t t = 0; t < 4; t++) {
		float *x = params + emb[t].off;
		size_t n = emb[t].n;
#pragma omp parallel for schedule(static)
		for (int64_t k = 0; k < (int64_t)n; k++)
			x[k] = init_normal(seed, t, (size_t)k, 0.01f);
	}
	uint32_t t = 4;
	for (uint32_t k = 1; k < s->n_layers; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		float glorot = sqrtf(6.0f / (float)(in + out));
		float *w = params + l->w[k], *b = params + l->b[k];
		for (size_t j = 0; j < in * out; j++)
			w[j] = init_uniform(seed, t, j, glorot);
		t++;
		float bl = 1.0f / sqrtf((float)in);
		for (size_t j = 0; j < out; j++)
			b[j] = init_uniform(seed, t, j, bl);
		t++;
	}
	size_t hin = F + ncf_shape_last(s);
	float lecun = sqrtf(3.0f / (float)hin);
	for (size_t j = 0; j < hin; j++)
		params[l->head_w + j] = init_uniform(seed, t, j, lecun);
	t++;
	params[l->head_b] = init_uniform(seed, t, 0, 1.0f / sqrtf((float)hin));
}

double ncf_dense_macs_per_sample(const struct ncf_shape *s)
{
	double m = 0;
	for (uint32_t k = 1; k < s->n_layers; k++)
		m += (double)s->layers[k] * s->layers[k - 1];
	return m + s->factors + ncf_shape_last(s) + s->factors;
}

double ncf_dense_macs_factorized(const struct ncf_shape *s)
{
	return ncf_dense_macs_per_sample(s) - (double)s->layers[1] * s->layers[0];
}

/* Rows (n of them, w floats each) of from to the rows at of to (NULL: the same). */
static void rows_to(const float *from, size_t n, size_t w, const int64_t *at, float *to)
{
	for (size_t r = 0; r < n; r++)
		memcpy(to + (at ? (size_t)at[r] : r) * w, from + r * w, w * sizeof *to);
}

void ncf_params_remap(const struct ncf_shape *fs, const float *from, const struct ncf_shape *ts,
		      float *to, const int64_t *user_at, const int64_t *item_at)
{
	struct ncf_layout lf, lt;
	ncf_layout_make(fs, &lf);
	ncf_layout_make(ts, &lt);
	size_t F = fs->factors, M = ncf_shape_m(fs);
	rows_to(from + lf.gmf_user, fs->users, F, user_at, to + lt.gmf_user);
	rows_to(from + lf.gmf_item, fs->items, F, item_at, to + lt.gmf_item);
	rows_to(from + lf.mlp_user, fs->users, M, user_at, to + lt.mlp_user);
	rows_to(from + lf.mlp_item, fs->items, M, item_at, to + lt.mlp_item);
	memcpy(to + lt.dense, from + lf.dense, (lf.total - lf.dense) * sizeof *to);
}

const char *ncf_shape_check(const struct ncf_shape *s)
{
	if (s->n_layers < 2 || s->n_layers > NCF_MAX_LAYERS)
		return "--layers needs 2 to 8 sizes (the input width first)";
	if (s->layers[0] % 2)
		return "--layers: the first size is the concatenated user and item MLP embeddings "
		       "and must be even";
	for (uint32_t k = 0; k < s->n_layers; k++)
		if (s->layers[k] < 1 || s->layers[k] > 8192)
			return "--layers: sizes must be from 1 to 8192";
	if (s->factors < 1 || s->factors > 65536)
		return "--factors must be from 1 to 65536";
	return NULL;
}

uint64_t ncf_epoch_check(const char *who, int64_t positives, uint32_t negatives,
			 uint64_t train_negatives, uint64_t first, uint64_t n)
{
	uint64_t S = ncf_epoch_samples((uint64_t)positives, negatives, train_negatives);
	if (S == 0 || first > S || n > S - first) {
		ncf_error("%s backend: positions %llu..%llu are past the epoch's %llu samples", who,
			  (unsigned long long)first, (unsigned long long)(first + n),
			  (unsigned long long)S);
		return 0;
	}
	return S;
}

void ncf_adam_constants(const struct ncf_hparams *hp, uint64_t step, struct ncf_adam_k *k)
{
	k->lr = hp->lr;
	k->beta1 = hp->beta1;
	k->beta2 = hp->beta2;
	k->eps = hp->eps;
	k->bc1 = (float)(1.0 - pow((double)hp->beta1, (double)step));
	k->bc2 = (float)(1.0 - pow((double)hp->beta2, (double)step));
}
