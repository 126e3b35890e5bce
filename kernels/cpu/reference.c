/*
 * reference.c - NeuMF as DESIGN.md section 3 defines it, in plain C: the
 * specification of the model and the oracle of the tests.  It is a backend
 * (ncf_backend_reference, backend_impl.h) that the tests open beside the
 * fast ones and compare with: tests/unit/test_grad.c checks its gradient
 * against finite differences of an independent double-precision model,
 * tests/unit/test_cpu_ref.c checks the fast cpu backend against it, and
 * tests/unit/test_cuda_emu.cc the emulated CUDA kernels.  No tool uses it.
 *
 * What it forbids itself: intrinsics, OpenMP, BLAS, the factorized first
 * layer, tiles, lanes, slots.  One forward and one backward function per
 * layer, loops in the obvious order, float arithmetic as in the backends,
 * and the formulas that must agree bit for bit taken from ncf_hd.h: the
 * sample stream (ncf_sample_at), the dropout bits (ncf_dropout_bits), BCE,
 * sigmoid and the Adam update.  So the reference sees the same samples and
 * the same dropout masks as every backend, and differs from them only in
 * the order of float sums.  It is slow and keeps a whole batch's
 * activations ((B, H0 + 3 (H1 + ... + HL) + 2F) floats): for tests.
 *
 * Legend: B rows of a batch, U users, I items, F GMF factors, H0..HL the
 * MLP widths (H0 = 2M), L hidden layers.  Tables by role: gmf_user (U, F),
 * gmf_item (I, F), mlp_user (U, M), mlp_item (I, M); layer l has W_l
 * (H_l, H_{l-1}) and b_l (H_l); the head w (F + HL) and b (model.h).
 *
 * Per row j, user u, item i (the model):
 *   GMF:   g = gmf_user[u] * gmf_item[i]                     (B, F)
 *   MLP:   x = [mlp_user[u], mlp_item[i]]                    (B, H0)
 *          z_l = h_{l-1} W_l^T + b_l, h_0 = x                (B, H_l)
 *          h_l = relu(z_l) * mult_l   (mult: 1/(1-p) kept, 0 dropped)
 *   head:  logit = g . w[0..F) + h_L . w[F..F+HL) + b        (B)
 *   loss:  bce(logit, label), averaged over the global batch of n rows
 * Backward runs the same layers in reverse; Adam updates every parameter.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "err.h"
#include "metrics.h"
#include "ncf_hd.h"
#include "state.h"

#define REF_PIECE 4096 /* pairs per forward pass when scoring */

/* A batch's rows and activations. */
struct batch {
	size_t B;
	uint32_t *users, *items; /* (B) */
	uint8_t *labels;	 /* (B) */
	uint64_t *pos;		 /* (B) epoch position of each row (dropout) */
	float *x;		 /* (B, H0) */
	float *z[NCF_MAX_LAYERS], *mult[NCF_MAX_LAYERS], *h[NCF_MAX_LAYERS]; /* (B, H_l) */
	float *g;		 /* (B, F) */
	float *logit, *dlogit;	 /* (B) */
};

/* ---- the layers ---------------------------------------------------------- */

/* Two embedding tables of one role, (U, width) and (I, width): gmf_user
 * and gmf_item, or mlp_user and mlp_item; with their gradients for the
 * backward pass (NULL in the forward). */
struct tables {
	const float *user, *item;
	float *duser, *ditem;
	size_t width;
};

/* A dense layer: W (H, K) and b (H); with their gradients for the
 * backward pass (NULL in the forward). */
struct dense {
	const float *W, *b;
	float *dW, *db;
	size_t K, H;
};

/* x (B, 2M) = [mlp_user[users], mlp_item[items]], t the MLP tables (M). */
static void embedding_forward(float *x, const uint32_t *users, const uint32_t *items, size_t B,
			      const struct tables *t)
{
	size_t M = t->width;
	for (size_t j = 0; j < B; j++)
		for (size_t k = 0; k < M; k++) {
			x[j * 2 * M + k] = t->user[(size_t)users[j] * M + k];
			x[j * 2 * M + M + k] = t->item[(size_t)items[j] * M + k];
		}
}

/* dmlp_user[users] += dx[:, 0..M), dmlp_item[items] += dx[:, M..2M). */
static void embedding_backward(const float *dx, const uint32_t *users, const uint32_t *items,
			       size_t B, const struct tables *t)
{
	size_t M = t->width;
	for (size_t j = 0; j < B; j++)
		for (size_t k = 0; k < M; k++) {
			t->duser[(size_t)users[j] * M + k] += dx[j * 2 * M + k];
			t->ditem[(size_t)items[j] * M + k] += dx[j * 2 * M + M + k];
		}
}

/* g (B, F) = gmf_user[users] * gmf_item[items], t the GMF tables (F). */
static void gmf_forward(float *g, const uint32_t *users, const uint32_t *items, size_t B,
			const struct tables *t)
{
	size_t F = t->width;
	for (size_t j = 0; j < B; j++)
		for (size_t f = 0; f < F; f++)
			g[j * F + f] = t->user[(size_t)users[j] * F + f] *
				       t->item[(size_t)items[j] * F + f];
}

/* dgmf_user[u] += dg * gmf_item[i], dgmf_item[i] += dg * gmf_user[u]; dg (B, F). */
static void gmf_backward(const float *dg, const uint32_t *users, const uint32_t *items, size_t B,
			 const struct tables *t)
{
	size_t F = t->width;
	for (size_t j = 0; j < B; j++)
		for (size_t f = 0; f < F; f++) {
			size_t u = (size_t)users[j] * F + f, i = (size_t)items[j] * F + f;
			t->duser[u] += dg[j * F + f] * t->item[i];
			t->ditem[i] += dg[j * F + f] * t->user[u];
		}
}

/* out (B, H) = in (B, K) W^T + b. */
static void linear_forward(float *out, const float *in, size_t B, const struct dense *l)
{
	size_t K = l->K, H = l->H;
	for (size_t j = 0; j < B; j++)
		for (size_t o = 0; o < H; o++) {
			float acc = 0.0f;
			for (size_t q = 0; q < K; q++)
				acc += in[j * K + q] * l->W[o * K + q];
			out[j * H + o] = acc + l->b[o];
		}
}

/* din (B, K) = dout W; dW (H, K) += dout^T in; db (H) += column sums of
 * dout (B, H). */
static void linear_backward(float *din, const float *dout, const float *in, size_t B,
			    const struct dense *l)
{
	size_t K = l->K, H = l->H;
	for (size_t j = 0; j < B; j++)
		for (size_t q = 0; q < K; q++) {
			float acc = 0.0f;
			for (size_t o = 0; o < H; o++)
				acc += dout[j * H + o] * l->W[o * K + q];
			din[j * K + q] = acc;
		}
	for (size_t o = 0; o < H; o++)
		for (size_t q = 0; q < K; q++) {
			float acc = 0.0f;
			for (size_t j = 0; j < B; j++)
				acc += dout[j * H + o] * in[j * K + q];
			l->dW[o * K + q] += acc;
		}
	for (size_t o = 0; o < H; o++) {
		float acc = 0.0f;
		for (size_t j = 0; j < B; j++)
			acc += dout[j * H + o];
		l->db[o] += acc;
	}
}

/* mult (B, H): the inverted-dropout multipliers of hidden layer `layer`
 * (0-based) for rows at epoch positions pos: 1/(1-p) where unit h's bits
 * (ncf_dropout_bits, block h / 8) keep it, 0 where they drop it; all 1
 * without dropout (p = 0, or scoring: pos NULL). */
static void dropout_mask(float *mult, const uint64_t *pos, size_t B, size_t H, uint32_t layer,
			 const struct ncf_hparams *hp, uint32_t epoch)
{
	int drop = pos && hp->dropout > 0.0f;
	uint32_t drop16 = ncf_dropout_threshold(hp->dropout);
	float scale = drop ? 1.0f / (1.0f - hp->dropout) : 1.0f;
	for (size_t j = 0; j < B; j++) {
		ncf_u32x4 bits = {{0, 0, 0, 0}};
		for (size_t h = 0; h < H; h++) {
			float m = 1.0f;
			if (drop) {
				if (h % 8 == 0) /* one Philox block per 8 units */
					bits = ncf_dropout_bits(hp->seed, epoch, pos[j], layer,
								(uint32_t)(h / 8));
				int keep = ncf_dropout_keep(bits, (uint32_t)(h % 8), drop16);
				m = keep ? scale : 0.0f;
			}
			mult[j * H + h] = m;
		}
	}
}

/* h (count) = relu(z) * mult. */
static void relu_dropout_forward(float *h, const float *z, const float *mult, size_t count)
{
	for (size_t k = 0; k < count; k++)
		h[k] = (z[k] > 0.0f ? z[k] : 0.0f) * mult[k];
}

/* dz (count) = dh * mult where z > 0, else 0: the derivative of relu(z) * mult. */
static void relu_dropout_backward(float *dz, const float *dh, const float *z, const float *mult,
				  size_t count)
{
	for (size_t k = 0; k < count; k++)
		dz[k] = z[k] > 0.0f ? dh[k] * mult[k] : 0.0f;
}

/* logit (B) = g (B, F) . w[0..F) + hL (B, HL) . w[F..F+HL) + b: the head,
 * a dense layer of one output over [g, hL] (w is W, K = F + HL). */
static void head_forward(float *logit, const float *g, const float *hL, size_t B, size_t F,
			 const struct dense *head)
{
	const float *w = head->W;
	size_t HL = head->K - F;
	for (size_t j = 0; j < B; j++) {
		float acc = 0.0f;
		for (size_t f = 0; f < F; f++)
			acc += g[j * F + f] * w[f];
		for (size_t k = 0; k < HL; k++)
			acc += hL[j * HL + k] * w[F + k];
		logit[j] = acc + head->b[0];
	}
}

/* dg (B, F) = dlogit w[0..F), dhL (B, HL) = dlogit w[F..); dw (F + HL) +=
 * dlogit^T [g, hL], db += sum of dlogit. */
static void head_backward(float *dg, float *dhL, const float *dlogit, const float *g,
			  const float *hL, size_t B, size_t F, const struct dense *head)
{
	const float *w = head->W;
	float *dw = head->dW;
	size_t HL = head->K - F;
	for (size_t j = 0; j < B; j++) {
		for (size_t f = 0; f < F; f++)
			dg[j * F + f] = dlogit[j] * w[f];
		for (size_t k = 0; k < HL; k++)
			dhL[j * HL + k] = dlogit[j] * w[F + k];
	}
	for (size_t f = 0; f < F; f++) {
		float acc = 0.0f;
		for (size_t j = 0; j < B; j++)
			acc += dlogit[j] * g[j * F + f];
		dw[f] += acc;
	}
	for (size_t k = 0; k < HL; k++) {
		float acc = 0.0f;
		for (size_t j = 0; j < B; j++)
			acc += dlogit[j] * hL[j * HL + k];
		dw[F + k] += acc;
	}
	float acc = 0.0f;
	for (size_t j = 0; j < B; j++)
		acc += dlogit[j];
	head->db[0] += acc;
}

/* The sum of bce(logit, label) over B rows, in double. */
static double bce_forward(const float *logit, const uint8_t *labels, size_t B)
{
	double sum = 0;
	for (size_t j = 0; j < B; j++)
		sum += (double)ncf_bce(logit[j], (float)labels[j]);
	return sum;
}

/* dlogit (B) = (sigmoid(logit) - label) / n: the mean over n rows. */
static void bce_backward(float *dlogit, const float *logit, const uint8_t *labels, size_t B,
			 uint64_t n)
{
	float inv_n = 1.0f / (float)n;
	for (size_t j = 0; j < B; j++)
		dlogit[j] = (ncf_sigmoid(logit[j]) - (float)labels[j]) * inv_n;
}

/* One dense Adam step over n parameters (ncf_adam_update each). */
static void adam_step(float *p, float *m, float *v, const float *g, size_t n,
		      const struct ncf_adam_k *k)
{
	for (size_t j = 0; j < n; j++)
		ncf_adam_update(&p[j], &m[j], &v[j], g[j], k);
}

/* ---- the model --------------------------------------------------------- */

static void batch_free(struct batch *b)
{
	free(b->users), free(b->items), free(b->labels), free(b->pos), free(b->x);
	for (int l = 0; l < NCF_MAX_LAYERS; l++)
		free(b->z[l]), free(b->mult[l]), free(b->h[l]);
	free(b->g), free(b->logit), free(b->dlogit);
	memset(b, 0, sizeof *b);
}

static void batch_alloc(struct batch *b, const struct ncf_shape *s, size_t B)
{
	memset(b, 0, sizeof *b);
	b->B = B;
	b->users = ncf_xcalloc(B + 1, sizeof *b->users);
	b->items = ncf_xcalloc(B + 1, sizeof *b->items);
	b->labels = ncf_xcalloc(B + 1, sizeof *b->labels);
	b->pos = ncf_xcalloc(B + 1, sizeof *b->pos);
	b->x = ncf_xcalloc(B * s->layers[0] + 1, sizeof(float));
	for (uint32_t l = 1; l < s->n_layers; l++) {
		b->z[l] = ncf_xcalloc(B * s->layers[l] + 1, sizeof(float));
		b->mult[l] = ncf_xcalloc(B * s->layers[l] + 1, sizeof(float));
		b->h[l] = ncf_xcalloc(B * s->layers[l] + 1, sizeof(float));
	}
	b->g = ncf_xcalloc(B * s->factors + 1, sizeof(float));
	b->logit = ncf_xcalloc(B + 1, sizeof(float));
	b->dlogit = ncf_xcalloc(B + 1, sizeof(float));
}

/* The tables of one role at user, item (offsets of the layout), width
 * wide, in prm, and their gradients in grad (NULL: none). */
static struct tables tables_at(const float *prm, float *grad, size_t user, size_t item,
			       size_t width)
{
	return (struct tables){prm + user, prm + item, grad ? grad + user : NULL,
			       grad ? grad + item : NULL, width};
}

/* Layer l of the model (l = L + 1: the head, one output over [g, h_L]) in
 * prm, and its gradients in grad (NULL: none). */
static struct dense dense_at(const struct ncf_backend *be, const float *prm, float *grad,
			     uint32_t l)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	if (l == s->n_layers)
		return (struct dense){prm + L->head_w, prm + L->head_b,
				      grad ? grad + L->head_w : NULL,
				      grad ? grad + L->head_b : NULL,
				      s->factors + ncf_shape_last(s), 1};
	return (struct dense){prm + L->w[l], prm + L->b[l], grad ? grad + L->w[l] : NULL,
			      grad ? grad + L->b[l] : NULL, s->layers[l - 1], s->layers[l]};
}

/* The logits of the batch's rows (b->users, b->items; dropout at b->pos,
 * none when pos is NULL) into b->logit, keeping every activation. */
static void forward(const struct ncf_backend *be, const float *prm, struct batch *b,
		    const uint64_t *pos, uint32_t epoch)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	size_t B = b->B, F = s->factors, M = ncf_shape_m(s), last = s->n_layers - 1;
	struct tables gmf = tables_at(prm, NULL, L->gmf_user, L->gmf_item, F);
	struct tables mlp = tables_at(prm, NULL, L->mlp_user, L->mlp_item, M);
	gmf_forward(b->g, b->users, b->items, B, &gmf);
	embedding_forward(b->x, b->users, b->items, B, &mlp);
	const float *in = b->x;
	for (uint32_t l = 1; l <= last; l++) {
		struct dense layer = dense_at(be, prm, NULL, l);
		linear_forward(b->z[l], in, B, &layer);
		dropout_mask(b->mult[l], pos, B, layer.H, l - 1, &be->hp, epoch);
		relu_dropout_forward(b->h[l], b->z[l], b->mult[l], B * layer.H);
		in = b->h[l];
	}
	struct dense head = dense_at(be, prm, NULL, s->n_layers);
	head_forward(b->logit, b->g, b->h[last], B, F, &head);
}

/* The gradient of the batch's loss (dlogit already in b->dlogit) added to
 * grad, after forward. */
static void backward(const struct ncf_backend *be, const float *prm, struct batch *b, float *grad)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	size_t B = b->B, F = s->factors, M = ncf_shape_m(s), last = s->n_layers - 1;
	size_t widest = s->layers[0];
	for (uint32_t l = 1; l <= last; l++)
		widest = s->layers[l] > widest ? s->layers[l] : widest;
	float *dg = ncf_xcalloc(B * F + 1, sizeof(float));
	float *dh = ncf_xcalloc(B * widest + 1, sizeof(float));
	float *dz = ncf_xcalloc(B * widest + 1, sizeof(float));
	struct dense head = dense_at(be, prm, grad, s->n_layers);
	head_backward(dg, dh, b->dlogit, b->g, b->h[last], B, F, &head);
	for (uint32_t l = (uint32_t)last; l >= 1; l--) {
		struct dense layer = dense_at(be, prm, grad, l);
		relu_dropout_backward(dz, dh, b->z[l], b->mult[l], B * layer.H);
		linear_backward(dh, dz, l > 1 ? b->h[l - 1] : b->x, B, &layer);
	}
	struct tables mlp = tables_at(prm, grad, L->mlp_user, L->mlp_item, M);
	struct tables gmf = tables_at(prm, grad, L->gmf_user, L->gmf_item, F);
	embedding_backward(dh, b->users, b->items, B, &mlp);
	gmf_backward(dg, b->users, b->items, B, &gmf);
	free(dg), free(dh), free(dz);
}

/* This rank's slice of positions [first, first + n) of epoch: the gradient
 * of the mean loss over all n into r->grad, the slice's loss sum. */
static int ref_compute_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			    double *loss_sum)
{
	struct ncf_host_state *r = be->impl;
	const struct ncf_train_data *td = &r->td;
	if (!r->have_td) {
		ncf_error("reference backend: no training data");
		return -1;
	}
	uint64_t S = ncf_epoch_check("reference", td->positives, be->hp.negatives,
				     td->train_negatives, first, n);
	if (S == 0)
		return -1;
	uint64_t lo, hi;
	ncf_dist_slice(n, be->dist->rank, be->dist->size, &lo, &hi);
	memset(r->grad, 0, be->layout.total * sizeof(float));
	*loss_sum = 0;
	struct batch b;
	batch_alloc(&b, &be->shape, (size_t)(hi - lo));
	ncf_stream st = ncf_host_stream(be, r, S, epoch);
	for (size_t j = 0; j < b.B; j++) {
		b.pos[j] = first + lo + j;
		b.labels[j] = (uint8_t)ncf_sample_at(&st, b.pos[j], &b.users[j], &b.items[j]);
	}
	forward(be, r->params, &b, b.pos, epoch);
	*loss_sum = bce_forward(b.logit, b.labels, b.B);
	bce_backward(b.dlogit, b.logit, b.labels, b.B, n);
	backward(be, r->params, &b, r->grad);
	batch_free(&b);
	return 0;
}

/* ---- the interface ---------------------------------------------------- */

static int ref_init(struct ncf_backend *be)
{
	struct ncf_host_state *r = ncf_xcalloc(1, sizeof *r);
	be->impl = r;
	be->precision = NCF_PRECISION_FP32; /* whatever was asked */
	ncf_host_state_init(r, be->layout.total);
	return 0;
}

static void ref_free(struct ncf_backend *be)
{
	struct ncf_host_state *r = be->impl;
	if (!r)
		return;
	ncf_host_state_free(r);
	free(r);
	be->impl = NULL;
}

static int ref_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		    float *grad, double *loss_sum)
{
	struct ncf_host_state *r = be->impl;
	if (ref_compute_grad(be, epoch, first, n, loss_sum) != 0)
		return -1;
	memcpy(grad, r->grad, be->layout.total * sizeof(float));
	return 0;
}

/* The gradient of the global batch (summed over ranks), then Adam. */
static int ref_train_step(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			  double *loss_sum)
{
	struct ncf_host_state *r = be->impl;
	if (ref_compute_grad(be, epoch, first, n, loss_sum) != 0)
		return -1;
	if (ncf_dist_sum_f32(be->dist, r->grad, be->layout.total) != 0)
		return -1;
	be->step++;
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, be->step, &k);
	adam_step(r->params, r->m, r->v, r->grad, be->layout.total, &k);
	return 0;
}

static int ref_logits(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		      size_t n, float *out)
{
	struct ncf_host_state *r = be->impl;
	for (size_t j = 0; j < n; j++)
		if (users[j] >= be->shape.users || items[j] >= be->shape.items) {
			ncf_error("reference backend: pair %zu (user %u, item %u) is outside the "
				  "model (%u users, %u items)",
				  j, users[j], items[j], be->shape.users, be->shape.items);
			return -1;
		}
	struct batch b;
	batch_alloc(&b, &be->shape, n < REF_PIECE ? n : REF_PIECE);
	for (size_t o = 0; o < n; o += REF_PIECE) {
		b.B = n - o < REF_PIECE ? n - o : REF_PIECE;
		memcpy(b.users, users + o, b.B * sizeof *users);
		memcpy(b.items, items + o, b.B * sizeof *items);
		forward(be, r->params, &b, NULL, 0);
		memcpy(out + o, b.logit, b.B * sizeof *out);
	}
	batch_free(&b);
	return 0;
}

static int ref_score(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		     size_t n, float *out)
{
	if (ref_logits(be, users, items, n, out) != 0)
		return -1;
	for (size_t j = 0; j < n; j++)
		out[j] = ncf_sigmoid(out[j]);
	return 0;
}

/* Per user: the logits of the test item and the N negatives, ranked. */
static int ref_eval_ranks(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks)
{
	struct ncf_host_state *r = be->impl;
	if (!r->have_ed) {
		ncf_error("reference backend: no evaluation data");
		return -1;
	}
	const struct ncf_eval_data *ed = &r->ed;
	uint32_t N = ed->negatives;
	uint32_t *us = ncf_xmalloc(((size_t)N + 1) * sizeof *us);
	uint32_t *is = ncf_xmalloc(((size_t)N + 1) * sizeof *is);
	float *lg = ncf_xmalloc(((size_t)N + 1) * sizeof *lg);
	int rc = 0;
	for (uint32_t u = u0; u < u1 && rc == 0; u++) {
		us[0] = u;
		is[0] = ed->test_items[u];
		for (uint32_t q = 0; q < N; q++) {
			us[q + 1] = u;
			is[q + 1] = ed->neg[(size_t)u * N + q];
		}
		rc = ref_logits(be, us, is, (size_t)N + 1, lg);
		if (rc == 0)
			ranks[u - u0] = ncf_rank(lg[0], lg + 1, ed->counted + (size_t)u * N, N);
	}
	free(us), free(is), free(lg);
	return rc;
}

const struct ncf_backend_i ncf_backend_reference = {
	.name = "reference",
	.device = NCF_DEVICE_CPU,
	.init = ref_init,
	.free = ref_free,
	.set_state = ncf_host_set_state,
	.get_state = ncf_host_get_state,
	.set_train_data = ncf_host_set_train_data,
	.set_eval_data = ncf_host_set_eval_data,
	.train_step = ref_train_step,
	.grad = ref_grad,
	.eval_ranks = ref_eval_ranks,
	.score = ref_score,
	.logits = ref_logits,
	.sync = NULL,
	.describe = NULL,
};
