/*
 * cpu.c - the fast cpu backend's interface (ncf_backend_cpu): state,
 * data, the training step (gradient from train.c, all-reduce, dense Adam
 * with the shared formula) and the scoring members from infer.c.  See
 * cpu.h.
 */
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#undef I /* <complex.h>, pulled in by OpenBLAS */

#include "cpu.h"
#include "err.h"
#include "ncf_hd.h"

static size_t max_hidden(const struct ncf_shape *s)
{
	size_t m = 0;
	for (uint32_t k = 0; k < s->n_layers; k++)
		if (s->layers[k] > m)
			m = s->layers[k];
	return m;
}

/*
 * The cpu's precisions, the one place that says them: fp32 (the default)
 * and bf16 where the products can take it (matmul.h); tf32 and fp16 are a
 * GPU's.  named: the cpu was asked for by name, and what it cannot do is
 * refused (-3, reported); else a warning, and *p becomes fp32.  Returns 0
 * or -3.
 */
static int cpu_precision(enum ncf_precision *p, int named)
{
	const char *why;
	if (*p == NCF_PRECISION_BF16 && !ncf_mm_available(NCF_MM_BF16, &why)) {
		if (named) {
			ncf_error("--precision bf16 on the cpu: %s", why);
			return -3;
		}
		ncf_warn("--precision bf16: no usable GPU, and on the cpu %s; computing in fp32",
			 why);
		*p = NCF_PRECISION_FP32;
	} else if (*p == NCF_PRECISION_TF32 || *p == NCF_PRECISION_FP16) {
		if (named) {
			ncf_error("--precision %s needs a GPU; the cpu backend computes in fp32 or bf16",
				  ncf_precision_name(*p));
			return -3;
		}
		ncf_warn("--precision %s is for GPUs; the CPU computes in fp32",
			 ncf_precision_name(*p));
		*p = NCF_PRECISION_FP32;
	}
	return 0;
}

static int cpu_init(struct ncf_backend *be)
{
	struct cpu *c = ncf_xcalloc(1, sizeof *c);
	be->impl = c;
	const struct ncf_shape *s = &be->shape;
	size_t total = be->layout.total;
	/* opened as such (ncf_backend_open_impl), bf16 has not been settled */
	if (be->precision == NCF_PRECISION_BF16 && cpu_precision(&be->precision, 1) != 0)
		return -3;
	c->mt = be->precision == NCF_PRECISION_BF16 ? NCF_MM_BF16 : NCF_MM_F32;
	be->precision = c->mt == NCF_MM_BF16 ? NCF_PRECISION_BF16 : NCF_PRECISION_FP32;
	ncf_host_state_init(&c->h, total);
	if (c->mt == NCF_MM_BF16)
		c->pb = ncf_xcalloc(total, sizeof *c->pb);
	c->slot_of_user = ncf_xmalloc((size_t)s->users * sizeof *c->slot_of_user);
	c->slot_of_item = ncf_xmalloc((size_t)s->items * sizeof *c->slot_of_item);
	memset(c->slot_of_user, 0xff, (size_t)s->users * sizeof *c->slot_of_user);
	memset(c->slot_of_item, 0xff, (size_t)s->items * sizeof *c->slot_of_item);
	c->tail_off = s->n_layers > 2 ? be->layout.w[2] : be->layout.head_w;
	c->tail_len = total - c->tail_off;
	c->lane = ncf_xcalloc((size_t)LANES * c->tail_len, sizeof(float));
#ifdef _OPENMP
	if (be->threads > 0) {
		omp_set_num_threads(be->threads);
	} else if (!getenv("OMP_NUM_THREADS") && be->dist->local_size > 1) {
		/* ranks sharing a node share its cores */
		int n = omp_get_num_procs() / be->dist->local_size;
		omp_set_num_threads(n > 0 ? n : 1);
	}
	c->nthreads = omp_get_max_threads();
#else
	c->nthreads = 1;
#endif
	openblas_set_num_threads(1);
	c->ts = ncf_xcalloc((size_t)c->nthreads, sizeof *c->ts);
	size_t hmax = max_hidden(s);
	for (int t = 0; t < c->nthreads; t++) {
		struct scratch *x = &c->ts[t];
		for (uint32_t k = 1; k < s->n_layers; k++)
			x->h[k] = ncf_xmalloc((size_t)CHUNK * s->layers[k] * sizeof(float));
		for (uint32_t k = 2; k < s->n_layers; k++)
			x->hp[k] = ncf_xmalloc((size_t)CHUNK * PAD16(s->layers[k]) * sizeof(float));
		x->dh = ncf_xmalloc((size_t)CHUNK * hmax * sizeof(float));
		x->dz = ncf_xmalloc((size_t)CHUNK * hmax * sizeof(float));
		x->g = ncf_xmalloc((size_t)CHUNK * s->factors * sizeof(float));
		x->logit = ncf_xmalloc((size_t)CHUNK * sizeof(float));
		if (c->mt != NCF_MM_BF16)
			continue;
		for (uint32_t k = 1; k + 1 < s->n_layers; k++)
			x->hb[k] = ncf_xmalloc((size_t)CHUNK * s->layers[k] * sizeof(ncf_bf16));
		x->dzb = ncf_xmalloc((size_t)CHUNK * hmax * sizeof(ncf_bf16));
	}
	return 0;
}

static void cpu_free(struct ncf_backend *be)
{
	struct cpu *c = be->impl;
	if (!c)
		return;
	if (!c->ts) { /* init stopped before allocating */
		free(c);
		be->impl = NULL;
		return;
	}
	for (int t = 0; t < c->nthreads; t++) {
		for (uint32_t k = 1; k < be->shape.n_layers; k++)
			free(c->ts[t].h[k]), free(c->ts[t].hp[k]), free(c->ts[t].hb[k]);
		free(c->ts[t].dzb);
		free(c->ts[t].dh);
		free(c->ts[t].dz);
		free(c->ts[t].g);
		free(c->ts[t].logit);
	}
	free(c->ts);
	ncf_host_state_free(&c->h);
	free(c->sample_user), free(c->sample_item), free(c->label);
	free(c->user_slot), free(c->item_slot);
	free(c->dlogit), free(c->dz1), free(c->chunk_loss);
	free(c->slot_of_user), free(c->slot_of_item), free(c->slot_user), free(c->slot_item);
	free(c->user_start), free(c->user_list), free(c->item_start), free(c->item_list);
	free(c->rowof);
	free(c->xu), free(c->xi), free(c->au), free(c->ai), free(c->dau), free(c->dai);
	free(c->dx), free(c->lane), free(c->tile_part), free(c->AU), free(c->AI);
	free(c->pb), free(c->xub), free(c->xib), free(c->daub), free(c->daib), free(c->mm_part);
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		free(c->wt[k]);
	free(c);
	be->impl = NULL;
}

/* The shared copy (state.h), its bf16 copy, and the scoring tables made
 * again. */
static int cpu_set_state(struct ncf_backend *be, const float *params, const float *m,
			 const float *v)
{
	struct cpu *c = be->impl;
	c->tables_valid = 0;
	if (ncf_host_set_state(be, params, m, v) != 0)
		return -1;
	if (c->pb) {
		size_t total = be->layout.total;
#pragma omp parallel for schedule(static)
		for (int64_t j = 0; j < (int64_t)total; j++)
			c->pb[j] = ncf_bf16_from_f32(c->h.params[j]);
	}
	return 0;
}

static int cpu_train_step(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			  double *loss_sum)
{
	struct cpu *c = be->impl;
	if (ncf_cpu_compute_grad(be, epoch, first, n, loss_sum) != 0)
		return -1;
	if (ncf_dist_sum_f32(be->dist, c->h.grad, be->layout.total) != 0)
		return -1;
	be->step++;
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, be->step, &k);
	size_t total = be->layout.total;
	float *p = c->h.params, *m = c->h.m, *v = c->h.v, *g = c->h.grad;
	ncf_bf16 *pb = c->pb;
	if (pb) {
		/* the fp32 master weights, then their bf16 copy in the same pass */
#pragma omp parallel for schedule(static)
		for (int64_t j = 0; j < (int64_t)total; j++) {
			ncf_adam_update(&p[j], &m[j], &v[j], g[j], &k);
			pb[j] = ncf_bf16_from_f32(p[j]);
		}
	} else {
#pragma omp parallel for schedule(static)
		for (int64_t j = 0; j < (int64_t)total; j++)
			ncf_adam_update(&p[j], &m[j], &v[j], g[j], &k);
	}
	c->tables_valid = 0;
	return 0;
}

static int cpu_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		    float *grad, double *loss_sum)
{
	struct cpu *c = be->impl;
	if (ncf_cpu_compute_grad(be, epoch, first, n, loss_sum) != 0)
		return -1;
	memcpy(grad, c->h.grad, be->layout.total * sizeof(float));
	return 0;
}

const struct ncf_backend_i ncf_backend_cpu = {
	.name = "cpu",
	.device = NCF_DEVICE_CPU,
	.init = cpu_init,
	.free = cpu_free,
	.set_state = cpu_set_state,
	.get_state = ncf_host_get_state,
	.set_train_data = ncf_host_set_train_data,
	.set_eval_data = ncf_host_set_eval_data,
	.train_step = cpu_train_step,
	.grad = cpu_grad,
	.eval_ranks = ncf_cpu_eval_ranks,
	.score = ncf_cpu_score,
	.logits = ncf_cpu_logits,
	.sync = NULL,
	.describe = NULL,
	.precision = cpu_precision,
};
