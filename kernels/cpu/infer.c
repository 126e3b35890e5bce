/*
 * infer.c - the fast cpu backend's logits, scores and evaluation ranks
 * (see cpu.h): the first layer of every user and item precomputed once per
 * set of parameters (scoring tables, b1 folded into the users'), then the
 * layers 2..L and the head.  The tables are products over tiles of rows
 * (matmul.h), and so are the layers where the build has oneDNN: blocks of
 * MM_ROWS rows, each one product with its bias and ReLU, bf16 operands
 * with fp32 sums in bf16, fp32 otherwise.  Without oneDNN the fp32 layers
 * run in register tiles (dense_rows, simd.h) instead of OpenBLAS, which
 * promises nothing about a row's last bits.
 *
 * Either way a pair's score depends on the pair and the parameters only:
 * not on the thread count, nor on the batch it comes in or its place
 * there, so that ncf-eval, ncf-train's evaluation, ncf-infer --score and
 * --recommend agree to the last digit.  A pair's bf16 score is not its
 * fp32 score (bf16 keeps 8 bits of each operand; tests/cli/bf16.t says
 * how close), and both depend on the instructions oneDNN picks (AMX,
 * AVX512_BF16, AVX-512, AVX2: ONEDNN_MAX_CPU_ISA) in their last bits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "err.h"
#include "metrics.h"
#include "ncf_hd.h"
#include "simd.h"

/*
 * Inference layers: y (n, outp) = relu(x (n, in) W^T + b), computed so that
 * every row's result depends on that row alone, never on the batch it came
 * in: y[r][o] = relu(b[o] + sum over q = 0..in-1 of x[r][q] W[o][q]), the
 * sum accumulated in q order with fused multiply-adds.  OpenBLAS sgemm does
 * not promise this (a row's last bits depend on its place in the batch), and
 * scores must not change with the batch: ncf-eval, ncf-infer --score and
 * --recommend agree to the last digit.  The layer comes packed (struct
 * packed); x has row stride ldx, y (n, outp).  With FMA, 6-row register
 * tiles (simd.h); without, one row at a time.
 */

/* Layer k packed for dense_rows (build_tables): wt is W^T (in, outp), outp
 * = out rounded up to 16 with zero columns, and b its bias (outp, zero
 * padded). */
struct packed {
	const float *wt, *b;
	size_t in, out, outp;
};

#ifdef NCF_SIMD_FMA
/* Rows in tiles of 96 (their inputs stay in L2) times column blocks of 16
 * (their weights stay in L1); 6-row register tiles, single rows at the end:
 * each output goes through the same operations either way. */
static void dense_rows(const struct packed *pl, const float *x, size_t ldx, size_t n, float *y)
{
	const float *wt = pl->wt, *b = pl->b;
	size_t in = pl->in, outp = pl->outp;
	for (size_t r0 = 0; r0 < n; r0 += 96) {
		size_t r1 = r0 + 96 < n ? r0 + 96 : n;
		for (size_t o = 0; o < outp; o += 16) {
			size_t r = r0;
			for (; r + 6 <= r1; r += 6)
				dense_tile6(x + r * ldx, ldx, in, wt, outp, b, y + r * outp, o);
			for (; r < r1; r++)
				dense_tile1(x + r * ldx, ldx, in, wt, outp, b, y + r * outp, o);
		}
	}
}
#else
/* Portable version of the same contract (one row at a time). */
static void dense_rows(const struct packed *pl, const float *x, size_t ldx, size_t n, float *y)
{
	const float *wt = pl->wt, *b = pl->b;
	size_t in = pl->in, out = pl->out, outp = pl->outp;
	for (size_t r = 0; r < n; r++) {
		float *yr = y + r * outp;
		for (size_t o = 0; o < outp; o++)
			yr[o] = 0.0f;
		for (size_t q = 0; q < in; q++) {
			float v = x[r * ldx + q];
			const float *w = wt + q * outp;
			for (size_t o = 0; o < outp; o++)
				yr[o] = fmaf(v, w[o], yr[o]);
		}
		for (size_t o = 0; o < outp; o++) {
			float z = yr[o] + (o < out ? b[o] : 0.0f);
			yr[o] = z > 0.0f ? z : 0.0f;
		}
	}
}
#endif

/*
 * Layers 2..L on oneDNN go through products of MM_ROWS rows, always that
 * shape: a chunk's rows are padded up to a multiple of it (zero rows,
 * whose results are dropped).  oneDNN plans a product for its shape and
 * may sum a row differently in a product of another height (another
 * kernel, another blocking of the sum); with one height every row of
 * every call takes the same instructions, so a pair's score does not
 * depend on how many pairs came with it.  256 rows: eight blocks of a
 * chunk (CHUNK is a multiple), few calls (each costs some microseconds of
 * oneDNN's bookkeeping), little padding for small batches.
 */
#define MM_ROWS 256

/* Whether layers 2..L are oneDNN products: always in bf16; in fp32 where
 * the build has oneDNN (measured 1.2-1.5x dense_rows's rate on one
 * thread at 262,144 pairs, NVIDIA's widths, a Xeon with AVX-512). */
static int layers_on_mm(const struct cpu *c)
{
#ifdef NCF_HAVE_DNNL
	(void)c;
	return 1;
#else
	return c->mt == NCF_MM_BF16;
#endif
}

/* The first layer of every user (b1 folded in) and item, for scoring, as
 * products over tiles (matmul.h): in bf16 from the parameters' bf16 copy
 * (c->pb), in fp32 from the parameters.  Then, for dense_rows, W_k^T
 * packed.  Returns 0 or -1 (reported). */
static int build_tables(struct ncf_backend *be, struct cpu *c)
{
	if (c->tables_valid)
		return 0;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(s), H1 = s->layers[1];
	if (!c->AU)
		c->AU = ncf_xmalloc((size_t)s->users * H1 * sizeof(float));
	if (!c->AI)
		c->AI = ncf_xmalloc((size_t)s->items * H1 * sizeof(float));
	/* W1u, W1i: the two halves of W1's columns */
	struct ncf_mm_forward_op u = {.t = c->mt, .m = s->users, .n = H1, .k = M,
				      .X = ncf_cpu_param(c, L->mlp_user), .ldx = M,
				      .W = ncf_cpu_param(c, L->w[1]), .ldw = 2 * M,
				      .bias = c->h.params + L->b[1], .Y = c->AU, .ldy = H1};
	struct ncf_mm_forward_op i = u;
	i.m = s->items, i.X = ncf_cpu_param(c, L->mlp_item), i.W = ncf_cpu_param(c, L->w[1] + M);
	i.bias = NULL, i.Y = c->AI;
	if (ncf_mm_forward_tiles(&u) != 0 || ncf_mm_forward_tiles(&i) != 0)
		return -1;
	if (layers_on_mm(c)) {
		c->tables_valid = 1;
		return 0; /* the layers read pb and h.params as they are */
	}
	/* W_k^T packed with zero padding, then the padded bias right after */
	for (uint32_t k = 2; k < s->n_layers; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k], outp = PAD16(out);
		free(c->wt[k]);
		c->wt[k] = ncf_xcalloc(in * outp + outp, sizeof(float));
		const float *W = c->h.params + L->w[k];
		for (size_t o = 0; o < out; o++)
			for (size_t q = 0; q < in; q++)
				c->wt[k][q * outp + o] = W[o * in + q];
		memcpy(c->wt[k] + in * outp, c->h.params + L->b[k], out * sizeof(float));
	}
	c->tables_valid = 1;
	return 0;
}

/* Layers 2..L of n rows as products, whose first layer is in x->hb[1]
 * (bf16) or x->h[1] (fp32), rows n.. up to a multiple of MM_ROWS zero:
 * each layer one product per block of MM_ROWS rows (bias and ReLU in it)
 * into x->h[k], in bf16 rounded into x->hb[k] for the next.  Returns the
 * last layer (n, H_L) in fp32 (stride H_L), or NULL (reported). */
static const float *chunk_layers_mm(struct ncf_backend *be, struct cpu *c, struct scratch *x,
				    size_t n)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	uint32_t nl = s->n_layers;
	int bf = c->mt == NCF_MM_BF16;
	size_t rows = (n + MM_ROWS - 1) / MM_ROWS * MM_ROWS;
	for (uint32_t k = 2; k < nl; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		for (size_t r = 0; r < rows; r += MM_ROWS) {
			struct ncf_mm_forward_op op = {
				.t = c->mt, .m = MM_ROWS, .n = out, .k = in,
				.X = bf ? (const void *)(x->hb[k - 1] + r * in)
					: (const void *)(x->h[k - 1] + r * in),
				.ldx = in, .W = ncf_cpu_param(c, L->w[k]), .ldw = in,
				.bias = c->h.params + L->b[k], .relu = 1, .Y = x->h[k] + r * out,
				.ldy = out};
			if (ncf_mm_forward(&op) != 0)
				return NULL;
		}
		if (bf && k + 1 < nl)
			ncf_bf16_from_f32_n(x->h[k], rows * out, x->hb[k]);
	}
	return x->h[nl - 1];
}

/* Logits of n pairs (n <= CHUNK), no dropout: one chunk with thread
 * scratch x.  Row independent (see dense_rows and MM_ROWS): a pair's
 * logit does not depend on the others.  Returns 0 or -1 (reported). */
static int chunk_logits(struct ncf_backend *be, struct cpu *c, struct scratch *x,
			const uint32_t *users, const uint32_t *items, size_t n, float *out)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const float *prm = c->h.params;
	uint32_t nl = s->n_layers, last = nl - 1;
	size_t F = s->factors, H1 = s->layers[1];
	int bf = c->mt == NCF_MM_BF16;
	float *h1 = x->h[1];
	for (size_t j = 0; j < n; j++) {
		const float *restrict a = c->AU + (size_t)users[j] * H1;
		const float *restrict b = c->AI + (size_t)items[j] * H1;
		float *restrict z = h1 + j * H1;
		for (size_t h = 0; h < H1; h++) {
			float v = a[h] + b[h];
			z[h] = v > 0.0f ? v : 0.0f;
		}
	}
	const float *prev = h1;
	size_t ld = H1;
	int mm = layers_on_mm(c);
	if (mm && nl > 2) {
		size_t rows = (n + MM_ROWS - 1) / MM_ROWS * MM_ROWS;
		if (bf) {
			ncf_bf16_from_f32_n(h1, n * H1, x->hb[1]);
			memset(x->hb[1] + n * H1, 0, (rows - n) * H1 * sizeof(ncf_bf16));
		} else {
			memset(h1 + n * H1, 0, (rows - n) * H1 * sizeof(float));
		}
		prev = chunk_layers_mm(be, c, x, n);
		if (!prev)
			return -1;
		ld = s->layers[last];
	}
	for (uint32_t k = 2; k < nl && !mm; k++) {
		size_t in = s->layers[k - 1], outw = s->layers[k], outp = PAD16(outw);
		struct packed pl = {c->wt[k], c->wt[k] + in * outp, in, outw, outp};
		dense_rows(&pl, prev, ld, n, x->hp[k]);
		prev = x->hp[k];
		ld = outp;
	}
	const float *wg = prm + L->head_w, *wh = wg + F;
	size_t HL = s->layers[last];
	for (size_t j = 0; j < n; j++) {
		const float *pu = prm + L->gmf_user + (size_t)users[j] * F;
		const float *qi = prm + L->gmf_item + (size_t)items[j] * F;
		const float *hrow = prev + j * ld;
		out[j] = (dot8_prod(pu, qi, wg, F) + dot8(wh, hrow, HL)) + prm[L->head_b];
	}
	return 0;
}

/* Rows per chunk for a call of n pairs: CHUNK, or less so that every
 * thread gets a chunk when n is small (a batch of 1,024 would otherwise be
 * one thread's), in multiples of MM_ROWS.  Results do not depend on it
 * (rows are independent). */
static size_t chunk_rows(const struct cpu *c, size_t n)
{
	size_t per = (n + (size_t)c->nthreads - 1) / (size_t)c->nthreads;
	per = (per + MM_ROWS - 1) / MM_ROWS * MM_ROWS;
	return per < CHUNK ? per : CHUNK;
}

int ncf_cpu_logits(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		      size_t n, float *out)
{
	struct cpu *c = be->impl;
	if (build_tables(be, c) != 0)
		return -1;
	if (n == 0)
		return 0;
	size_t rows = chunk_rows(c, n), chunks = (n + rows - 1) / rows;
	int failed = 0;
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t ch = 0; ch < (int64_t)chunks; ch++) {
		size_t j0 = (size_t)ch * rows, cn = n - j0 < rows ? n - j0 : rows;
		if (chunk_logits(be, c, &c->ts[thread_id()], users + j0, items + j0, cn,
				 out + j0) != 0) {
#pragma omp atomic write
			failed = 1;
		}
	}
	return failed ? -1 : 0;
}

int ncf_cpu_score(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		     size_t n, float *out)
{
	if (ncf_cpu_logits(be, users, items, n, out) != 0)
		return -1;
#pragma omp parallel for schedule(static)
	for (int64_t j = 0; j < (int64_t)n; j++)
		out[j] = ncf_sigmoid(out[j]);
	return 0;
}

int ncf_cpu_eval_ranks(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks)
{
	struct cpu *c = be->impl;
	if (!c->h.have_ed) {
		ncf_error("cpu backend: no evaluation data");
		return -1;
	}
	if (build_tables(be, c) != 0)
		return -1;
	const struct ncf_eval_data *ed = &c->h.ed;
	uint32_t N = ed->negatives, per = N + 1;
	uint32_t users_per_chunk = CHUNK / per ? CHUNK / per : 1;
	uint32_t nusers = u1 - u0;
	uint32_t chunks = (nusers + users_per_chunk - 1) / users_per_chunk;
	int failed = 0;
#pragma omp parallel
	{
		size_t cap = (size_t)users_per_chunk * per;
		uint32_t *us = ncf_xmalloc(cap * sizeof *us), *is = ncf_xmalloc(cap * sizeof *is);
		float *lg = ncf_xmalloc(cap * sizeof *lg);
		struct scratch *x = &c->ts[thread_id()];
#pragma omp for schedule(dynamic, 1)
		for (int64_t ch = 0; ch < (int64_t)chunks; ch++) {
			uint32_t a = u0 + (uint32_t)ch * users_per_chunk;
			uint32_t b = a + users_per_chunk < u1 ? a + users_per_chunk : u1;
			size_t k = 0;
			for (uint32_t u = a; u < b; u++) {
				us[k] = u;
				is[k++] = ed->test_items[u];
				for (uint32_t q = 0; q < N; q++) {
					us[k] = u;
					is[k++] = ed->neg[(size_t)u * N + q];
				}
			}
			/* more candidates than a chunk holds: go piecewise */
			for (size_t o = 0; o < k; o += CHUNK) {
				size_t cn = k - o < CHUNK ? k - o : CHUNK;
				if (chunk_logits(be, c, x, us + o, is + o, cn, lg + o) != 0) {
#pragma omp atomic write
					failed = 1;
				}
			}
			for (uint32_t u = a; u < b; u++) {
				const float *l = lg + (size_t)(u - a) * per;
				ranks[u - u0] = ncf_rank(l[0], l + 1, ed->counted + (size_t)u * N, N);
			}
		}
		free(us);
		free(is);
		free(lg);
	}
	return failed ? -1 : 0;
}
