/*
 * train.c - the fast cpu backend's gradient of one batch (see cpu.h for
 * the files, the determinism and the legend).  The function is reference.c's
 * (the model as DESIGN.md section 3 writes it); the work is arranged
 * differently:
 *  1. generate (user, item, label) for each position (ncf_sample_at);
 *  2. give the batch's distinct users and items slots, in order of first
 *     appearance, and list each slot's samples (counting sort);
 *  3. the factorized first layer: Au = mlp_user[users] W1u^T (Bu, H1) and
 *     Ai = mlp_item[items] W1i^T (Bi, H1), once per distinct user and item;
 *  4. per chunk: z1 = Au[u] + Ai[i] + b1, then ReLU, dropout, the layers
 *     2..L (the product with its bias and ReLU in one call, then dropout),
 *     GMF, head, BCE; and backward down to dz1, which is kept (B, H1);
 *     weight gradients of layers 2..L and the head go to the chunk's lane;
 *  5. dAu[slot] = sum of dz1 over the slot's samples (likewise dAi); then
 *     dW1 = [dAu^T mlp_user[users], dAi^T mlp_item[items]], db1 = column
 *     sums of dAu, dmlp_user[users] = dAu W1u, dmlp_item[items] = dAi W1i;
 *  6. GMF: dgmf_user[u] = w_g * sum over u's samples of dlogit gmf_item[i],
 *     and dgmf_item alike.
 * The gradient is that of the mean loss over the global batch (n samples
 * of all ranks); cpu.c all-reduces it and takes the Adam step.  The dense
 * products are matmul.h calls of type c->mt: in bf16 their operands are
 * bf16 copies (of the parameters, c->pb; of activations and gradients,
 * written by the pass that computes them, row by row while in cache),
 * their results fp32.
 */
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#undef I /* <complex.h>, pulled in by OpenBLAS */

#include "cpu.h"
#include "err.h"
#include "ncf_hd.h"
#include "simd.h"

/* Room for n samples in the step's per-sample arrays.  Returns 0 or -1. */
static int grow_samples(struct cpu *c, const struct ncf_shape *s, size_t n)
{
	if (n <= c->cap)
		return 0;
	size_t H1 = s->layers[1];
	c->sample_user = ncf_xrealloc(c->sample_user, n * sizeof *c->sample_user);
	c->sample_item = ncf_xrealloc(c->sample_item, n * sizeof *c->sample_item);
	c->label = ncf_xrealloc(c->label, n);
	c->user_slot = ncf_xrealloc(c->user_slot, n * sizeof *c->user_slot);
	c->item_slot = ncf_xrealloc(c->item_slot, n * sizeof *c->item_slot);
	c->dlogit = ncf_xrealloc(c->dlogit, n * sizeof *c->dlogit);
	free(c->dz1); /* 64-byte aligned, for streaming stores */
	c->dz1 = NULL;
	c->cap = 0;
	if (posix_memalign((void **)&c->dz1, 64, n * H1 * sizeof *c->dz1 + 64) != 0) {
		c->dz1 = NULL;
		ncf_error("cpu backend: out of memory (%zu bytes)", n * H1 * sizeof *c->dz1);
		return -1;
	}
	c->chunk_loss = ncf_xrealloc(c->chunk_loss, (n / CHUNK + 1) * sizeof *c->chunk_loss);
	c->user_list = ncf_xrealloc(c->user_list, n * sizeof *c->user_list);
	c->rowof = ncf_xrealloc(c->rowof, n * sizeof *c->rowof);
	c->item_list = ncf_xrealloc(c->item_list, n * sizeof *c->item_list);
	c->cap = n;
	return 0;
}

/*
 * Slots for the distinct ids of ids[0..n): slot[j] for each sample, the id
 * of each slot (first-appearance order), and the samples of each slot in
 * order (start (nslots+1), list (n)).  map (ids' range) must be all -1 and
 * is left so.  Returns the number of slots.
 */
static uint32_t make_slots(const uint32_t *ids, size_t n, int32_t *map, uint32_t *slot,
			   uint32_t **slot_id, uint32_t **start, uint32_t *list, size_t *cap)
{
	uint32_t ns = 0;
	for (size_t j = 0; j < n; j++) {
		int32_t s = map[ids[j]];
		if (s < 0) {
			s = (int32_t)ns++;
			map[ids[j]] = s;
			if (ns > *cap) {
				*cap = *cap ? *cap * 2 : 4096;
				*slot_id = ncf_xrealloc(*slot_id, *cap * sizeof **slot_id);
				*start = ncf_xrealloc(*start, (*cap + 1) * sizeof **start);
			}
			(*slot_id)[s] = ids[j];
		}
		slot[j] = (uint32_t)s;
	}
	uint32_t *st = *start;
	memset(st, 0, ((size_t)ns + 1) * sizeof *st);
	for (size_t j = 0; j < n; j++)
		st[slot[j] + 1]++;
	for (uint32_t s = 0; s < ns; s++)
		st[s + 1] += st[s];
	/* fill: use map as a cursor, then reset it */
	for (uint32_t s = 0; s < ns; s++)
		map[(*slot_id)[s]] = (int32_t)st[s];
	for (size_t j = 0; j < n; j++)
		list[map[ids[j]]++] = (uint32_t)j;
	for (uint32_t s = 0; s < ns; s++)
		map[(*slot_id)[s]] = -1;
	return ns;
}

/* Dropout as a pass over a chunk's rows applies it (ncf_hd.h's masks):
 * whether, the threshold and scale, and where row r's multipliers come
 * from: the epoch position pos0 + order[r] of its sample. */
struct dropout {
	int on;
	uint32_t drop16; /* ncf_dropout_threshold */
	float scale;	 /* 1 / (1 - p) of kept units; 1 when off */
	uint64_t seed;
	uint32_t epoch;
	uint64_t pos0;		/* the epoch position of sample 0 */
	const uint32_t *order;	/* (rows) the sample of each row */
};

/*
 * Dropout multipliers of one sample's H units of hidden layer `layer` at
 * epoch position pos: d->scale where kept, 0 where dropped.  The eight
 * 16-bit uniforms of a Philox block, read as little-endian u16, are units
 * 8w..8w+7 (ncf_dropout_keep, written for vectors); sixteen blocks at a
 * time with AVX-512 and eight with AVX2 (simd_philox16, simd_philox8: the
 * same numbers as ncf_dropout_bits).
 */
static void dropout_row(float *restrict mult, size_t H, const struct dropout *d, uint64_t pos,
			uint32_t layer)
{
	size_t blocks = (H + 7) / 8;
	uint16_t u16[8 * ((NCF_MAX_HIDDEN + 63) / 8)];
#ifdef NCF_SIMD_AVX2
	size_t w0 = 0;
#ifdef NCF_SIMD_AVX512
	for (; w0 + 16 <= blocks; w0 += 16) {
		uint32_t wide[64];
		ncf_rng_input in = ncf_dropout_input(d->seed, d->epoch, pos, layer, (uint32_t)w0);
		simd_philox16(&in, wide);
		memcpy(u16 + 8 * w0, wide, sizeof wide);
	}
#endif
	uint32_t words[4][8];
	for (; w0 < blocks; w0 += 8) {
		ncf_rng_input in = ncf_dropout_input(d->seed, d->epoch, pos, layer, (uint32_t)w0);
		simd_philox8(&in, words);
		for (size_t w = 0; w < 8; w++) /* block-major, as ncf_dropout_bits lays them */
			for (size_t i = 0; i < 4; i++)
				memcpy(u16 + 8 * (w0 + w) + 2 * i, &words[i][w], 4);
	}
#else
	for (size_t w = 0; w < blocks; w++) {
		ncf_u32x4 bits = ncf_dropout_bits(d->seed, d->epoch, pos, layer, (uint32_t)w);
		memcpy(u16 + 8 * w, bits.v, 16);
	}
#endif
	for (size_t h = 0; h < H; h++)
		mult[h] = u16[h] >= d->drop16 ? d->scale : 0.0f;
}

/* The factorized first layer of a step (step 3's products): each
 * sample's user and item slot, the slots' projections au (Bu, H) and ai
 * (Bi, H), and b1 (H). */
struct layer1 {
	const uint32_t *user_slot, *item_slot; /* (B) */
	const float *au, *ai, *b;
	size_t H;
};

/*
 * Layer 1's activations of rows [0, n) in one pass: row r is the sample
 * j = d->order[r], h1[r] = dropout(ReLU(au[user_slot[j]] +
 * ai[item_slot[j]] + b)) (hidden layer 0's multipliers when d->on), and
 * its bf16 copy into hb (n, H) when hb is not NULL, converted while the
 * row is in cache.  The sum is rounded to float before b is added, as two
 * separate passes would do: the same bits.
 */
static void layer1_rows(const struct layer1 *in, const struct dropout *d, size_t n,
			float *restrict h1, ncf_bf16 *restrict hb)
{
	const uint32_t *order = d->order, *slot_u = in->user_slot, *slot_i = in->item_slot;
	const float *restrict b = in->b, *ai = in->ai;
	size_t H = in->H;
	float mult[NCF_MAX_HIDDEN];
	for (size_t r = 0; r < n; r++) {
		uint32_t j = order[r];
		if (r + 16 < n) { /* slots of samples from anywhere: their ids first */
			__builtin_prefetch(slot_u + order[r + 16]);
			__builtin_prefetch(slot_i + order[r + 16]);
		}
		if (r + 4 < n) { /* item rows come from anywhere: fetched a few ahead */
			const char *ahead = (const char *)(ai + (size_t)slot_i[order[r + 4]] * H);
			for (size_t o = 0; o < H * sizeof(float); o += 64)
				__builtin_prefetch(ahead + o);
		}
		const float *restrict pa = in->au + (size_t)slot_u[j] * H;
		const float *restrict pi = ai + (size_t)slot_i[j] * H;
		float *restrict row = h1 + r * H;
		if (d->on) {
			dropout_row(mult, H, d, d->pos0 + j, 0);
			for (size_t h = 0; h < H; h++) {
				float z = pa[h] + pi[h], x = z + b[h];
				row[h] = (x > 0.0f ? x : 0.0f) * mult[h];
			}
		} else {
			for (size_t h = 0; h < H; h++) {
				float z = pa[h] + pi[h], x = z + b[h];
				row[h] = x > 0.0f ? x : 0.0f;
			}
		}
		if (hb)
			ncf_bf16_from_f32_n(row, H, hb + r * H);
	}
}

/* Dropout of rows already biased and ReLU'd (the product's post-ops), in
 * place, z (n, H), hidden layer index `layer`, rows as layer1_rows'; and
 * the bf16 copy of each row into hb (n, H) when hb is not NULL. */
static void dropout_rows(float *restrict z, ncf_bf16 *restrict hb, size_t n, size_t H,
			 const struct dropout *d, uint32_t layer)
{
	if (!d->on) {
		if (hb)
			ncf_bf16_from_f32_n(z, n * H, hb);
		return;
	}
	float mult[NCF_MAX_HIDDEN];
	for (size_t j = 0; j < n; j++) {
		float *restrict row = z + j * H;
		dropout_row(mult, H, d, d->pos0 + d->order[j], layer);
		for (size_t h = 0; h < H; h++)
			row[h] *= mult[h];
		if (hb)
			ncf_bf16_from_f32_n(row, H, hb + j * H);
	}
}


/* dz = dh where the unit was active and kept (h > 0), times scale. */
static void relu_dropout_back(float *restrict dz, const float *restrict dh,
			      const float *restrict h, size_t count, float scale)
{
	for (size_t k = 0; k < count; k++) {
		float v = dh[k] * scale; /* computed first: a select, not a branch */
		dz[k] = h[k] > 0.0f ? v : 0.0f;
	}
}

/* relu_dropout_back into dz1, which is read only after every chunk is
 * done: non-temporal stores keep it from evicting the chunk's activations
 * (the same values). */
static void relu_dropout_back_stream(float *restrict dz, const float *restrict dh,
				     const float *restrict h, size_t count, float scale)
{
#ifdef NCF_SIMD_AVX2
	if (simd_relu_back_stream(dz, dh, h, count, scale))
		return;
#endif
	relu_dropout_back(dz, dh, h, count, scale);
}

/*
 * The backward of ReLU and dropout of rows [0, n) of a layer H wide, with
 * the bias gradient: dz = relu_dropout_back(dh, h), lb (H) += the column
 * sums of dz, rows in order (as a pass over dz after the first would add
 * them: the same bits).  With dzb not NULL (bf16) dz goes only there, in
 * bf16, each row converted while in cache, and the fp32 dz is not
 * written; else to dz (n, H).
 */
static void relu_dropout_back_rows(float *restrict dz, ncf_bf16 *restrict dzb,
				   const float *restrict dh, const float *restrict h, size_t n,
				   size_t H, float scale, float *restrict lb)
{
	float tmp[NCF_MAX_HIDDEN];
	for (size_t r = 0; r < n; r++) {
		float *restrict d = dzb ? tmp : dz + r * H;
		relu_dropout_back(d, dh + r * H, h + r * H, H, scale);
		for (size_t k = 0; k < H; k++)
			lb[k] += d[k];
		if (dzb)
			ncf_bf16_from_f32_n(d, H, dzb + r * H);
	}
}

/* relu_dropout_back of rows [0, n), H wide, into the bf16 dz1 (n, H),
 * which is read only after every chunk is done: converted from cache a
 * few rows (BACK_ROWS floats) at a time, with non-temporal stores. */
#define BACK_ROWS 4096
static void relu_dropout_back_bf16(ncf_bf16 *restrict dzb, const float *restrict dh,
				   const float *restrict h, size_t n, size_t H, float scale)
{
	float tmp[BACK_ROWS > NCF_MAX_HIDDEN ? BACK_ROWS : NCF_MAX_HIDDEN];
	size_t rows = BACK_ROWS / H ? BACK_ROWS / H : 1;
	for (size_t r = 0; r < n; r += rows) {
		size_t cnt = (n - r < rows ? n - r : rows) * H;
		relu_dropout_back(tmp, dh + r * H, h + r * H, cnt, scale);
		ncf_bf16_from_f32_n_stream(tmp, cnt, dzb + r * H);
	}
}

/*
 * A chunk of the step: rows [k0, k0 + n), in user order: row r is sample
 * d.order[r] (the samples sorted by user slot, so that rows of one user
 * are adjacent; d.order = user_list + k0), x the thread's scratch, lane
 * (tail layout) where the weight gradients of layers 2..L and the head go;
 * inv_n is 1 / the global batch.
 */
struct chunk {
	const struct ncf_backend *be;
	struct cpu *c;
	struct scratch *x;
	size_t k0, n;
	struct dropout d;
	float inv_n;
	float *lane;
};

/* Forward through the MLP: layer 1 factorized (the slots' projections
 * gathered), then layers 2..L, each one product with its bias and ReLU,
 * then dropout.  Returns 0 or -1 (reported). */
static int chunk_forward(const struct chunk *ch)
{
	const struct ncf_shape *s = &ch->be->shape;
	const struct ncf_layout *L = &ch->be->layout;
	struct cpu *c = ch->c;
	struct scratch *x = ch->x;
	uint32_t last = s->n_layers - 1;
	int bf = c->mt == NCF_MM_BF16;
	struct layer1 l1 = {c->user_slot, c->item_slot, c->au, c->ai, c->h.params + L->b[1],
			    s->layers[1]};
	layer1_rows(&l1, &ch->d, ch->n, x->h[1], bf && last > 1 ? x->hb[1] : NULL);
	for (uint32_t k = 2; k <= last; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		struct ncf_mm_forward_op op = {
			.t = c->mt, .m = ch->n, .n = out, .k = in,
			.X = bf ? (const void *)x->hb[k - 1] : (const void *)x->h[k - 1], .ldx = in,
			.W = ncf_cpu_param(c, L->w[k]), .ldw = in,
			.bias = c->h.params + L->b[k], .relu = 1, .Y = x->h[k], .ldy = out};
		if (ncf_mm_forward(&op) != 0)
			return -1;
		dropout_rows(x->h[k], bf && k < last ? x->hb[k] : NULL, ch->n, out, &ch->d, k - 1);
	}
	return 0;
}

/* GMF, the head and the loss: dlogit of each row (into c->dlogit by
 * sample, and x->logit by row), the head's gradients into the lane.
 * Returns the rows' loss sum. */
static double chunk_head(const struct chunk *ch)
{
	const struct ncf_shape *s = &ch->be->shape;
	const struct ncf_layout *L = &ch->be->layout;
	struct cpu *c = ch->c;
	struct scratch *x = ch->x;
	const float *prm = c->h.params;
	const uint32_t *order = ch->d.order;
	size_t n = ch->n, F = s->factors, HL = ncf_shape_last(s);
	const float *wg = prm + L->head_w, *wh = wg + F, *hL = x->h[s->n_layers - 1];
	float hb = prm[L->head_b];
	float *lw = ch->lane + (L->head_w - c->tail_off);
	float *lwh = lw + F, *lb = ch->lane + (L->head_b - c->tail_off);
	float *restrict dl_row = x->logit;
	for (size_t r = 0; r < n; r++) {
		uint32_t j = order[r];
		const float *restrict pu = prm + L->gmf_user + (size_t)c->sample_user[j] * F;
		const float *restrict qi = prm + L->gmf_item + (size_t)c->sample_item[j] * F;
		float *restrict g = x->g + r * F;
		for (size_t f = 0; f < F; f++)
			g[f] = pu[f] * qi[f];
	}
	/* logits = G wg + H_L wh + b, as two matrix-vector products */
	cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)F, 1.0f, x->g, (int)F, wg, 1, 0.0f,
		    dl_row, 1);
	cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)HL, 1.0f, hL, (int)HL, wh, 1, 1.0f,
		    dl_row, 1);
	double loss = 0;
	float bsum = 0.0f;
	for (size_t r = 0; r < n; r++) {
		uint32_t j = order[r];
		float y = (float)c->label[j], l;
		float dl = ncf_bce_grad(dl_row[r] + hb, y, &l) * ch->inv_n;
		loss += (double)l;
		c->dlogit[j] = dl;
		dl_row[r] = dl;
		bsum += dl;
	}
	/* head gradients: w_g += G^T dl, w_h += H_L^T dl */
	cblas_sgemv(CblasRowMajor, CblasTrans, (int)n, (int)F, 1.0f, x->g, (int)F, dl_row, 1, 1.0f,
		    lw, 1);
	cblas_sgemv(CblasRowMajor, CblasTrans, (int)n, (int)HL, 1.0f, hL, (int)HL, dl_row, 1, 1.0f,
		    lwh, 1);
	lb[0] += bsum;
	return loss;
}

/* Backward from dlogit (x->logit) through layers L..2 into the lane, down
 * to dz1 of the chunk's rows in c->dz1 (row k0 on; bf16 in bf16).
 * Returns 0 or -1 (reported). */
static int chunk_backward(const struct chunk *ch)
{
	const struct ncf_shape *s = &ch->be->shape;
	const struct ncf_layout *L = &ch->be->layout;
	struct cpu *c = ch->c;
	struct scratch *x = ch->x;
	uint32_t last = s->n_layers - 1;
	size_t n = ch->n, H1 = s->layers[1], HL = s->layers[last];
	int bf = c->mt == NCF_MM_BF16;
	float scale = ch->d.scale, *dh = x->dh, *dz = x->dz;
	const float *wh = c->h.params + L->head_w + s->factors;
	for (size_t r = 0; r < n; r++) {
		float *restrict d = dh + r * HL;
		for (size_t h = 0; h < HL; h++)
			d[h] = x->logit[r] * wh[h];
	}
	for (uint32_t k = last; k >= 2; k--) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		float *lB = ch->lane + (L->b[k] - c->tail_off);
		relu_dropout_back_rows(dz, bf ? x->dzb : NULL, dh, x->h[k], n, out, scale, lB);
		const void *d = bf ? (const void *)x->dzb : (const void *)dz;
		struct ncf_mm_dw_op dw = {
			.t = c->mt, .m = n, .n = out, .k = in, .dY = d, .ldd = out,
			.X = bf ? (const void *)x->hb[k - 1] : (const void *)x->h[k - 1], .ldx = in,
			.dW = ch->lane + (L->w[k] - c->tail_off), .ldw = in, .accumulate = 1};
		/* and dh for layer k-1 */
		struct ncf_mm_dx_op dx = {.t = c->mt, .m = n, .n = out, .k = in, .dY = d,
					  .ldd = out, .W = ncf_cpu_param(c, L->w[k]), .ldw = in,
					  .dX = dh, .ldx = in};
		if (ncf_mm_dw(&dw) != 0 || ncf_mm_dx(&dx) != 0)
			return -1;
	}
	if (bf) /* dz1 kept in bf16, as AMP keeps the gradient of a bf16 activation */
		relu_dropout_back_bf16((ncf_bf16 *)c->dz1 + ch->k0 * H1, dh, x->h[1], n, H1, scale);
	else
		relu_dropout_back_stream(c->dz1 + ch->k0 * H1, dh, x->h[1], n * H1, scale);
	return 0;
}

/* Forward and backward of a chunk (step 4); its loss sum into *loss_out.
 * Returns 0 or -1 (reported). */
static int chunk_train(const struct chunk *ch, double *loss_out)
{
	if (chunk_forward(ch) != 0)
		return -1;
	*loss_out = chunk_head(ch);
	return chunk_backward(ch);
}

/* The slots of one kind (users or items) of a batch: slot k is id[k], its
 * samples list[start[k] .. start[k + 1]). */
struct slots {
	uint32_t n;
	const uint32_t *start, *list, *id;
};

/*
 * The GMF gradient of one table's rows (gmf_user or gmf_item): for slot k
 * of sl, row sl->id[k] of grad gets w_g * the sum over the slot's samples
 * j of dlogit[j] * other[other_id[j]], other being the opposite table (F
 * wide) and other_id each sample's row of it.  Slots are independent:
 * parallel without conflicts.
 */
static void gmf_rows_grad(const struct slots *sl, const float *dlogit, const uint32_t *other_id,
			  const float *other, const float *wg, size_t F, float *grad)
{
	const uint32_t *start = sl->start, *list = sl->list;
	uint32_t end = start[sl->n];
#pragma omp parallel
	{
		float *acc = ncf_xmalloc(F * sizeof(float));
#pragma omp for schedule(dynamic, 64)
		for (int64_t k = 0; k < (int64_t)sl->n; k++) {
			memset(acc, 0, F * sizeof(float));
			for (uint32_t e = start[k]; e < start[k + 1]; e++) {
				if (e + 16 < end) { /* as slot_sums: rows from anywhere */
					__builtin_prefetch(other_id + list[e + 16]);
					__builtin_prefetch(dlogit + list[e + 16]);
				}
				if (e + 4 < end) {
					const char *ahead =
						(const char *)(other + (size_t)other_id[list[e + 4]] * F);
					for (size_t b = 0; b < F * sizeof(float); b += 64)
						__builtin_prefetch(ahead + b);
				}
				uint32_t j = list[e];
				float dl = dlogit[j];
				const float *o = other + (size_t)other_id[j] * F;
				for (size_t f = 0; f < F; f++)
					acc[f] += dl * o[f];
			}
			float *g = grad + (size_t)sl->id[k] * F;
			for (size_t f = 0; f < F; f++)
				g[f] = wg[f] * acc[f];
		}
		free(acc);
	}
}

/* Step 1: (user, item, label) of positions pos0 .. pos0 + B of epoch, an
 * epoch of S samples. */
static void make_samples(struct ncf_backend *be, struct cpu *c, uint64_t S, uint32_t epoch,
			 uint64_t pos0, size_t B)
{
	ncf_stream st = ncf_host_stream(be, &c->h, S, epoch);
#pragma omp parallel for schedule(static)
	for (int64_t j = 0; j < (int64_t)B; j++)
		c->label[j] = (uint8_t)ncf_sample_at(&st, pos0 + (uint64_t)j, &c->sample_user[j],
						     &c->sample_item[j]);
}

/* Step 2: the slots of the B samples' users (*nu of them) and items (*ni),
 * each sample's row in user order, and the buffers sized by the slots. */
static void make_batch_slots(struct ncf_backend *be, struct cpu *c, size_t B, uint32_t *nu,
			     uint32_t *ni)
{
	size_t M = ncf_shape_m(&be->shape), H1 = be->shape.layers[1];
	*nu = make_slots(c->sample_user, B, c->slot_of_user, c->user_slot, &c->slot_user,
			 &c->user_start, c->user_list, &c->cap_u);
	*ni = make_slots(c->sample_item, B, c->slot_of_item, c->item_slot, &c->slot_item,
			 &c->item_start, c->item_list, &c->cap_i);
	c->xu = ncf_xrealloc(c->xu, (size_t)c->cap_u * M * sizeof(float));
	c->au = ncf_xrealloc(c->au, (size_t)c->cap_u * H1 * sizeof(float));
	c->dau = ncf_xrealloc(c->dau, (size_t)c->cap_u * H1 * sizeof(float));
	c->xi = ncf_xrealloc(c->xi, (size_t)c->cap_i * M * sizeof(float));
	c->ai = ncf_xrealloc(c->ai, (size_t)c->cap_i * H1 * sizeof(float));
	c->dai = ncf_xrealloc(c->dai, (size_t)c->cap_i * H1 * sizeof(float));
	size_t cap_ui = c->cap_u > c->cap_i ? c->cap_u : c->cap_i;
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)B; k++)
		c->rowof[c->user_list[k]] = (uint32_t)k;
	c->dx = ncf_xrealloc(c->dx, cap_ui * M * sizeof(float));
	if (c->mt == NCF_MM_BF16) {
		c->xub = ncf_xrealloc(c->xub, (size_t)c->cap_u * M * sizeof(ncf_bf16));
		c->xib = ncf_xrealloc(c->xib, (size_t)c->cap_i * M * sizeof(ncf_bf16));
		c->daub = ncf_xrealloc(c->daub, (size_t)c->cap_u * H1 * sizeof(ncf_bf16));
		c->daib = ncf_xrealloc(c->daib, (size_t)c->cap_i * H1 * sizeof(ncf_bf16));
	}
	size_t tiles = (cap_ui + TILE - 1) / TILE, part = tiles * H1 * M;
	if (part > c->mm_part_cap) {
		c->mm_part = ncf_xrealloc(c->mm_part, part * sizeof(float));
		c->mm_part_cap = part;
	}
}

/* Rows ids[0..n) of the table at offset off of the parameters (as
 * ncf_cpu_param gives them) into out (n, M) of the same type. */
static void gather_rows(const struct cpu *c, size_t off, const uint32_t *ids, size_t n, size_t M,
			void *out)
{
	size_t es = c->mt == NCF_MM_BF16 ? sizeof(ncf_bf16) : sizeof(float);
	const char *src = ncf_cpu_param(c, off);
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)n; k++)
		memcpy((char *)out + (size_t)k * M * es, src + (size_t)ids[k] * M * es, M * es);
}

/* Step 3: Au (nu, H1) = mlp_user[slot users] W1u^T, Ai (ni, H1) alike.
 * Returns 0 or -1 (reported). */
static int layer1_forward(struct ncf_backend *be, struct cpu *c, uint32_t nu, uint32_t ni)
{
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(&be->shape), H1 = be->shape.layers[1];
	enum ncf_mm_type mt = c->mt;
	int bf = mt == NCF_MM_BF16;
	void *xu = bf ? (void *)c->xub : (void *)c->xu, *xi = bf ? (void *)c->xib : (void *)c->xi;
	gather_rows(c, L->mlp_user, c->slot_user, nu, M, xu);
	gather_rows(c, L->mlp_item, c->slot_item, ni, M, xi);
	/* W1u, W1i: the two halves of W1's columns */
	struct ncf_mm_forward_op u = {.t = mt, .m = nu, .n = H1, .k = M, .X = xu, .ldx = M,
				      .W = ncf_cpu_param(c, L->w[1]), .ldw = 2 * M,
				      .Y = c->au, .ldy = H1};
	struct ncf_mm_forward_op i = u;
	i.m = ni, i.X = xi, i.W = ncf_cpu_param(c, L->w[1] + M), i.Y = c->ai;
	if (ncf_mm_forward_tiles(&u) != 0)
		return -1;
	return ncf_mm_forward_tiles(&i);
}

/* Step 4: the chunks of the B samples in lanes, then the lanes' sum into
 * the gradient of layers 2..L and the head; all is step's but the rows
 * (chunk_train).  The loss sum into *loss_sum.  Returns 0 or -1
 * (reported). */
static int run_chunks(const struct chunk *step, size_t B, double *loss_sum)
{
	struct cpu *c = step->c;
	size_t chunks = (B + CHUNK - 1) / CHUNK;
	size_t lanes = chunks < LANES ? chunks : LANES;
	memset(c->lane, 0, lanes * c->tail_len * sizeof(float));
	int fail = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : fail)
	for (int64_t l = 0; l < (int64_t)lanes; l++) {
		struct chunk ch = *step;
		ch.x = &c->ts[thread_id()];
		ch.lane = c->lane + (size_t)l * c->tail_len;
		for (size_t k = (size_t)l; k < chunks && !fail; k += LANES) {
			ch.k0 = k * CHUNK;
			ch.n = B - ch.k0 < CHUNK ? B - ch.k0 : CHUNK;
			ch.d.order = c->user_list + ch.k0;
			fail |= chunk_train(&ch, &c->chunk_loss[k]) != 0;
		}
	}
	if (fail)
		return -1;
	double loss = 0;
	for (size_t ch = 0; ch < chunks; ch++)
		loss += c->chunk_loss[ch];
	float *gt = c->h.grad + c->tail_off;
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)c->tail_len; k++) {
		float acc = 0.0f;
		for (size_t l = 0; l < lanes; l++)
			acc += c->lane[l * c->tail_len + (size_t)k];
		gt[k] = acc;
	}
	*loss_sum = loss;
	return 0;
}

/* d (nslots, H1): row k the sum of dz1's rows of slot k's samples e in
 * [start[k], start[k+1]), in order: row e itself when list is NULL (user
 * slots: dz1 is in user order), else row rowof[list[e]] (item slots, rows
 * from anywhere: fetched a few ahead, their rowof further ahead, across
 * slots).  dz1 is float, or ncf_bf16 when db is not NULL: then the sums
 * are still fp32, and each row of d also goes to db (nslots, H1) as bf16
 * while in cache. */
static void slot_sums(const uint32_t *start, const uint32_t *list, const uint32_t *rowof,
		      uint32_t nslots, const void *dz1, size_t H1, float *d, ncf_bf16 *db)
{
	size_t es = db ? sizeof(ncf_bf16) : sizeof(float);
#pragma omp parallel for schedule(dynamic, 64)
	for (int64_t k = 0; k < (int64_t)nslots; k++) {
		float *restrict dd = d + (size_t)k * H1;
		memset(dd, 0, H1 * sizeof(float));
		uint32_t e1 = start[k + 1], end = start[nslots];
		for (uint32_t e = start[k]; e < e1; e++) {
			if (list && e + 16 < end)
				__builtin_prefetch(rowof + list[e + 16]);
			if (list && e + 4 < end) {
				const char *ahead = (const char *)dz1 + rowof[list[e + 4]] * H1 * es;
				for (size_t b = 0; b < H1 * es; b += 64)
					__builtin_prefetch(ahead + b);
			}
			size_t row = (size_t)(list ? rowof[list[e]] : e) * H1;
			if (db) {
				const ncf_bf16 *restrict z = (const ncf_bf16 *)dz1 + row;
				for (size_t h = 0; h < H1; h++)
					dd[h] += ncf_f32_from_bf16(z[h]);
			} else {
				const float *restrict z = (const float *)dz1 + row;
				for (size_t h = 0; h < H1; h++)
					dd[h] += z[h];
			}
		}
		if (db)
			ncf_bf16_from_f32_n(dd, H1, db + (size_t)k * H1);
	}
}

/* One side of step 5 (users: col 0, the user slots; items: col M):
 * dW1's half (n slots' dA (n, H1), as bf16 or fp32 operands, by their
 * gathered MLP embeddings X), then the embeddings' gradient dA W1 into the
 * rows slot_id of the MLP table at table.  Returns 0 or -1 (reported). */
struct side {
	uint32_t n;
	const void *dA, *X;
	const uint32_t *slot_id;
	size_t col, table;
};

static int layer1_backward_side(const struct ncf_backend *be, struct cpu *c,
				const struct side *sd)
{
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(&be->shape), H1 = be->shape.layers[1];
	struct ncf_mm_dw_op dw = {.t = c->mt, .m = sd->n, .n = H1, .k = M, .dY = sd->dA,
				  .ldd = H1, .X = sd->X, .ldx = M,
				  .dW = c->h.grad + L->w[1] + sd->col, .ldw = 2 * M};
	struct ncf_mm_dx_op dx = {.t = c->mt, .m = sd->n, .n = H1, .k = M, .dY = sd->dA,
				  .ldd = H1, .W = ncf_cpu_param(c, L->w[1] + sd->col),
				  .ldw = 2 * M, .dX = c->dx, .ldx = M};
	if (ncf_mm_dw_tiles(&dw, c->mm_part) != 0 || ncf_mm_dx_tiles(&dx) != 0)
		return -1;
	float *grad = c->h.grad + sd->table;
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)sd->n; k++)
		memcpy(grad + (size_t)sd->slot_id[k] * M, c->dx + (size_t)k * M, M * sizeof(float));
	return 0;
}

/* Step 5: dAu, dAi per slot from dz1, then the gradients of W1, b1 and the
 * MLP embedding rows of the batch.  Returns 0 or -1 (reported). */
static int layer1_backward(struct ncf_backend *be, struct cpu *c, uint32_t nu, uint32_t ni)
{
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(&be->shape), H1 = be->shape.layers[1];
	int bf = c->mt == NCF_MM_BF16;
	slot_sums(c->user_start, NULL, NULL, nu, c->dz1, H1, c->dau, bf ? c->daub : NULL);
	slot_sums(c->item_start, c->item_list, c->rowof, ni, c->dz1, H1, c->dai,
		  bf ? c->daib : NULL);
	struct side u = {nu, c->dau, c->xu, c->slot_user, 0, L->mlp_user};
	struct side i = {ni, c->dai, c->xi, c->slot_item, M, L->mlp_item};
	if (bf)
		u.dA = c->daub, u.X = c->xub, i.dA = c->daib, i.X = c->xib;
	NCF_TRY(layer1_backward_side(be, c, &u));
	ncf_cpu_col_sum(c, c->dau, nu, H1, c->h.grad + L->b[1]);
	return layer1_backward_side(be, c, &i);
}

int ncf_cpu_compute_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			 double *loss_sum)
{
	struct cpu *c = be->impl;
	const struct ncf_layout *L = &be->layout;
	if (!c->h.have_td) {
		ncf_error("cpu backend: no training data");
		return -1;
	}
	uint64_t S = ncf_epoch_check("cpu", c->h.td.positives, be->hp.negatives,
				     c->h.td.train_negatives, first, n);
	if (S == 0)
		return -1;
	uint64_t lo, hi;
	ncf_dist_slice(n, be->dist->rank, be->dist->size, &lo, &hi);
	size_t B = (size_t)(hi - lo);
	uint64_t pos0 = first + lo;
	if (hi - lo >= ((uint64_t)1 << 31)) { /* slots and rows are 32-bit */
		ncf_error("cpu backend: a batch of %llu samples per rank is too large (at most "
			  "2^31 - 1)",
			  (unsigned long long)(hi - lo));
		return -1;
	}
	size_t F = be->shape.factors;
	memset(c->h.grad, 0, L->total * sizeof(float));
	*loss_sum = 0;
	if (B == 0)
		return 0;
	if (grow_samples(c, &be->shape, B) != 0)
		return -1;
	make_samples(be, c, S, epoch, pos0, B);			 /* 1 */
	uint32_t nu, ni;
	make_batch_slots(be, c, B, &nu, &ni);			 /* 2 */
	if (layer1_forward(be, c, nu, ni) != 0)			 /* 3 */
		return -1;
	float p = be->hp.dropout;
	struct chunk step = {.be = be,
			     .c = c,
			     .d = {.on = p > 0.0f,
				   .drop16 = ncf_dropout_threshold(p),
				   .scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f,
				   .seed = be->hp.seed,
				   .epoch = epoch,
				   .pos0 = pos0},
			     .inv_n = 1.0f / (float)n};
	if (run_chunks(&step, B, loss_sum) != 0)		 /* 4 */
		return -1;
	if (layer1_backward(be, c, nu, ni) != 0)		 /* 5 */
		return -1;
	const float *prm = c->h.params, *wg = prm + L->head_w; /* 6 */
	struct slots us = {nu, c->user_start, c->user_list, c->slot_user};
	struct slots is = {ni, c->item_start, c->item_list, c->slot_item};
	gmf_rows_grad(&us, c->dlogit, c->sample_item, prm + L->gmf_item, wg, F,
		      c->h.grad + L->gmf_user);
	gmf_rows_grad(&is, c->dlogit, c->sample_user, prm + L->gmf_user, wg, F,
		      c->h.grad + L->gmf_item);
	return 0;
}
