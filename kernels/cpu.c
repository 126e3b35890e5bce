/*
 * cpu.c - the cpu backend: NeuMF forward, backward and dense Adam in plain
 * C with OpenBLAS sgemm for the dense layers and OpenMP for the rest.  This
 * is the specification the cuda backend is tested against.
 *
 * Determinism.  Results depend on the seed only, never on the thread
 * count: OpenBLAS always runs single-threaded (its threaded sgemm splits
 * work differently per thread count, and the results differ in the last
 * bits), and the work is cut into pieces whose size is fixed: samples into
 * chunks of CHUNK, chunks into LANES lanes (chunk c goes to lane c % LANES
 * and a lane sums its chunks in order), table rows into tiles of TILE.
 * Threads take whole lanes or tiles; partial sums are added in lane or tile
 * order.  No float atomics anywhere.
 *
 * One training step on the batch's samples (B of them, this rank's slice):
 *  1. generate (user, item, label) for each position (ncf_sample_at);
 *  2. give the batch's distinct users and items slots, in order of first
 *     appearance, and list each slot's samples (counting sort);
 *  3. the factorized first layer: Au = Pm[users] W1u^T (Bu, H1) and
 *     Ai = Qm[items] W1i^T (Bi, H1), once per distinct user and item;
 *  4. per chunk: z1 = Au[u] + Ai[i] + b1, then ReLU, dropout, the layers
 *     2..L, GMF, head, BCE; and backward down to dz1, which is kept (B, H1);
 *     weight gradients of layers 2..L and the head go to the chunk's lane;
 *  5. dAu[slot] = sum of dz1 over the slot's samples (likewise dAi); then
 *     dW1 = [dAu^T Pm[users], dAi^T Qm[items]], db1 = column sums of dAu,
 *     dPm[users] = dAu W1u, dQm[items] = dAi W1i;
 *  6. GMF: dP[u] = w_g * sum over u's samples of dlogit Q[i], and dQ alike;
 *  7. all-reduce the gradient (ranks), dense Adam over every parameter.
 * The gradient is that of the mean loss over the global batch.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#undef I /* <complex.h>, pulled in by OpenBLAS */
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend_impl.h"
#include "clock.h"
#include "err.h"
#include "metrics.h"
#include "ncf_hd.h"

#define CHUNK 2048 /* samples per chunk */
#define LANES 64   /* accumulators of the dense weight gradients */
#define TILE 2048  /* table rows per tile */
#define NCF_MAX_HIDDEN 8192 /* widest layer (model.h limit) */
#define PAD16(n) (((n) + 15) & ~(size_t)15) /* inference row stride */

struct scratch {
	float *h[NCF_MAX_LAYERS]; /* (CHUNK, H_k) activations after dropout, h[1..L] */
	float *hp[NCF_MAX_LAYERS];/* (CHUNK, pad16(H_k)) inference activations, k >= 2 */
	float *dh, *dz;		  /* (CHUNK, max H) */
	float *g;		  /* (CHUNK, F) */
	float *logit;		  /* (CHUNK) */
};

struct cpu {
	float *params, *m, *v, *grad; /* (total) */
	struct ncf_train_data td;
	struct ncf_eval_data ed;
	int have_td, have_ed;
	/* step scratch */
	size_t cap;		     /* samples the arrays below hold */
	uint32_t *su, *si;	     /* (B) user, item */
	uint8_t *lab;		     /* (B) label */
	uint32_t *slot_u, *slot_i;   /* (B) slot of each sample's user, item */
	float *dlogit;		     /* (B) */
	float *dz1;		     /* (B, H1) */
	double *chunk_loss;	     /* (chunks) */
	int32_t *uslot, *islot;	     /* (U), (I): slot or -1 */
	uint32_t *slot_user;	     /* (Bu) user of each slot */
	uint32_t *slot_item;	     /* (Bi) */
	uint32_t *ustart, *ulist;    /* (Bu+1), (B) samples per user slot */
	uint32_t *rowof;	     /* (B) row of each sample in user order */
	uint32_t *istart, *ilist;    /* (Bi+1), (B) */
	float *xu, *xi;		     /* (Bu, M), (Bi, M) gathered MLP embeddings */
	float *au, *ai;		     /* (Bu, H1), (Bi, H1) first layer per slot */
	float *dau, *dai;	     /* (Bu, H1), (Bi, H1) */
	float *dx;		     /* (max(Bu, Bi), M) */
	size_t cap_u, cap_i;
	float *lane;		     /* (LANES, tail) */
	float *tile_part;	     /* (tiles, H1 * M) */
	size_t tile_cap;
	size_t tail_off, tail_len;   /* gradient part accumulated in lanes */
	struct scratch *ts;	     /* per thread */
	int nthreads;
	/* evaluation / scoring tables: first layer for every user and item */
	float *AU, *AI;		     /* (U, H1) with b1 added, (I, H1) */
	float *wt[NCF_MAX_LAYERS];   /* W_k^T packed (H_{k-1}, pad16(H_k)) for k >= 2 */
	int tables_valid;
};

/* NCF_CPU_PROFILE=1 in the environment prints seconds per phase at exit. */
static double prof[8];
/* inside chunks, summed over threads: gather, fwd gemm, fwd elementwise,
 * head, bwd gemm, bwd elementwise */
static double cprof[64][8];
static const char *prof_name[8] = {"samples", "slots", "layer1_fwd", "chunks",
				   "lane_reduce", "layer1_bwd", "gmf_bwd", "adam"};
static int prof_on = -1;
static double prof_t;
static void prof_report(void)
{
	static const char *cn[6] = {"gather", "fwd_gemm", "fwd_elem", "head", "bwd_gemm",
				    "bwd_elem"};
	for (int k = 0; k < 8; k++)
		fprintf(stderr, "cpu profile: %-12s %.3f s\n", prof_name[k], prof[k]);
	for (int k = 0; k < 6; k++) {
		double t = 0;
		for (int th = 0; th < 64; th++)
			t += cprof[th][k];
		fprintf(stderr, "cpu profile:   chunk %-9s %.3f thread-s\n", cn[k], t);
	}
}
#define CPROF(k)                                                                 \
	do {                                                                      \
		if (prof_on > 0) {                                                \
			double t__ = ncf_now();                                   \
			cprof[thread_id() & 63][k] += t__ - ct;                   \
			ct = t__;                                                 \
		}                                                                 \
	} while (0)
static void prof_mark(int k)
{
	if (prof_on < 0) {
		prof_on = getenv("NCF_CPU_PROFILE") != NULL;
		if (prof_on)
			atexit(prof_report);
	}
	if (!prof_on)
		return;
	double t = ncf_now();
	if (k >= 0)
		prof[k] += t - prof_t;
	prof_t = t;
}

static int thread_id(void)
{
#ifdef _OPENMP
	return omp_get_thread_num();
#else
	return 0;
#endif
}

static size_t max_hidden(const struct ncf_shape *s)
{
	size_t m = 0;
	for (uint32_t k = 0; k < s->n_layers; k++)
		if (s->layers[k] > m)
			m = s->layers[k];
	return m;
}

static int cpu_init(struct ncf_backend *be)
{
	struct cpu *c = ncf_xcalloc(1, sizeof *c);
	be->impl = c;
	const struct ncf_shape *s = &be->shape;
	size_t total = be->layout.total;
	c->params = ncf_xcalloc(total, sizeof(float));
	c->m = ncf_xcalloc(total, sizeof(float));
	c->v = ncf_xcalloc(total, sizeof(float));
	c->grad = ncf_xcalloc(total, sizeof(float));
	c->uslot = ncf_xmalloc((size_t)s->users * sizeof *c->uslot);
	c->islot = ncf_xmalloc((size_t)s->items * sizeof *c->islot);
	memset(c->uslot, 0xff, (size_t)s->users * sizeof *c->uslot);
	memset(c->islot, 0xff, (size_t)s->items * sizeof *c->islot);
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
	}
	return 0;
}

static void cpu_free(struct ncf_backend *be)
{
	struct cpu *c = be->impl;
	if (!c)
		return;
	for (int t = 0; t < c->nthreads; t++) {
		for (uint32_t k = 1; k < be->shape.n_layers; k++)
			free(c->ts[t].h[k]), free(c->ts[t].hp[k]);
		free(c->ts[t].dh);
		free(c->ts[t].dz);
		free(c->ts[t].g);
		free(c->ts[t].logit);
	}
	free(c->ts);
	free(c->params), free(c->m), free(c->v), free(c->grad);
	free(c->su), free(c->si), free(c->lab), free(c->slot_u), free(c->slot_i);
	free(c->dlogit), free(c->dz1), free(c->chunk_loss);
	free(c->uslot), free(c->islot), free(c->slot_user), free(c->slot_item);
	free(c->ustart), free(c->ulist), free(c->istart), free(c->ilist), free(c->rowof);
	free(c->xu), free(c->xi), free(c->au), free(c->ai), free(c->dau), free(c->dai);
	free(c->dx), free(c->lane), free(c->tile_part), free(c->AU), free(c->AI);
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		free(c->wt[k]);
	free(c);
	be->impl = NULL;
}

static int cpu_set_state(struct ncf_backend *be, const float *params, const float *m,
			 const float *v)
{
	struct cpu *c = be->impl;
	size_t n = be->layout.total * sizeof(float);
	memcpy(c->params, params, n);
	if (m)
		memcpy(c->m, m, n);
	else
		memset(c->m, 0, n);
	if (v)
		memcpy(c->v, v, n);
	else
		memset(c->v, 0, n);
	c->tables_valid = 0;
	return 0;
}

static int cpu_get_state(struct ncf_backend *be, float *params, float *m, float *v)
{
	struct cpu *c = be->impl;
	size_t n = be->layout.total * sizeof(float);
	if (params)
		memcpy(params, c->params, n);
	if (m)
		memcpy(m, c->m, n);
	if (v)
		memcpy(v, c->v, n);
	return 0;
}

static int cpu_set_train_data(struct ncf_backend *be, const struct ncf_train_data *d)
{
	struct cpu *c = be->impl;
	c->td = *d;
	c->have_td = 1;
	return 0;
}

static int cpu_set_eval_data(struct ncf_backend *be, const struct ncf_eval_data *d)
{
	struct cpu *c = be->impl;
	c->ed = *d;
	c->have_ed = 1;
	return 0;
}

static void grow_samples(struct cpu *c, const struct ncf_shape *s, size_t n)
{
	if (n <= c->cap)
		return;
	c->cap = n;
	size_t H1 = s->layers[1];
	c->su = ncf_xrealloc(c->su, n * sizeof *c->su);
	c->si = ncf_xrealloc(c->si, n * sizeof *c->si);
	c->lab = ncf_xrealloc(c->lab, n);
	c->slot_u = ncf_xrealloc(c->slot_u, n * sizeof *c->slot_u);
	c->slot_i = ncf_xrealloc(c->slot_i, n * sizeof *c->slot_i);
	c->dlogit = ncf_xrealloc(c->dlogit, n * sizeof *c->dlogit);
	free(c->dz1); /* 64-byte aligned, for streaming stores */
	if (posix_memalign((void **)&c->dz1, 64, n * H1 * sizeof *c->dz1 + 64) != 0)
		ncf_die(NCF_EXIT_FAIL, "out of memory (%zu bytes)", n * H1 * sizeof *c->dz1);
	c->chunk_loss = ncf_xrealloc(c->chunk_loss, (n / CHUNK + 1) * sizeof *c->chunk_loss);
	c->ulist = ncf_xrealloc(c->ulist, n * sizeof *c->ulist);
	c->rowof = ncf_xrealloc(c->rowof, n * sizeof *c->rowof);
	c->ilist = ncf_xrealloc(c->ilist, n * sizeof *c->ilist);
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

/* out (rows, H) = x (rows, M) W^T, W (H, M) with leading dimension ldw;
 * tiles of TILE rows in parallel. */
static void rows_times_wt(const float *x, size_t rows, size_t M, const float *W, size_t ldw,
			  size_t H, float *out)
{
	size_t tiles = (rows + TILE - 1) / TILE;
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t t = 0; t < (int64_t)tiles; t++) {
		size_t r0 = (size_t)t * TILE, nr = rows - r0 < TILE ? rows - r0 : TILE;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)H, (int)M, 1.0f,
			    x + r0 * M, (int)M, W, (int)ldw, 0.0f, out + r0 * H, (int)H);
	}
}

/* out (rows, M) = d (rows, H) W, W (H, M) with leading dimension ldw. */
static void rows_times_w(const float *d, size_t rows, size_t H, const float *W, size_t ldw,
			 size_t M, float *out)
{
	size_t tiles = (rows + TILE - 1) / TILE;
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t t = 0; t < (int64_t)tiles; t++) {
		size_t r0 = (size_t)t * TILE, nr = rows - r0 < TILE ? rows - r0 : TILE;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)M, (int)H, 1.0f,
			    d + r0 * H, (int)H, W, (int)ldw, 0.0f, out + r0 * M, (int)M);
	}
}

/* out (H, M) with leading dimension ldo = d^T x over rows: d (rows, H),
 * x (rows, M).  Tile partials added in tile order. */
static void tn_sum(struct cpu *c, const float *d, const float *x, size_t rows, size_t H,
		   size_t M, float *out, size_t ldo)
{
	size_t tiles = (rows + TILE - 1) / TILE;
	if (tiles == 0) {
		for (size_t h = 0; h < H; h++)
			memset(out + h * ldo, 0, M * sizeof(float));
		return;
	}
	size_t need = tiles * H * M;
	if (need > c->tile_cap) {
		c->tile_cap = need;
		c->tile_part = ncf_xrealloc(c->tile_part, need * sizeof(float));
	}
	float *part = c->tile_part;
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t t = 0; t < (int64_t)tiles; t++) {
		size_t r0 = (size_t)t * TILE, nr = rows - r0 < TILE ? rows - r0 : TILE;
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)H, (int)M, (int)nr, 1.0f,
			    d + r0 * H, (int)H, x + r0 * M, (int)M, 0.0f, part + (size_t)t * H * M,
			    (int)M);
	}
#pragma omp parallel for schedule(static)
	for (int64_t h = 0; h < (int64_t)H; h++)
		for (size_t m = 0; m < M; m++) {
			float acc = 0.0f;
			for (size_t t = 0; t < tiles; t++)
				acc += part[t * H * M + (size_t)h * M + m];
			out[(size_t)h * ldo + m] = acc;
		}
}

/* Column sums of d (rows, H) into out (H), tile partials in order. */
static void col_sum(const float *d, size_t rows, size_t H, float *out)
{
	size_t tiles = (rows + TILE - 1) / TILE;
	float *part = ncf_xcalloc(tiles * H + 1, sizeof(float));
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t t = 0; t < (int64_t)tiles; t++) {
		size_t r0 = (size_t)t * TILE, r1 = r0 + TILE < rows ? r0 + TILE : rows;
		float *p = part + (size_t)t * H;
		for (size_t r = r0; r < r1; r++)
			for (size_t h = 0; h < H; h++)
				p[h] += d[r * H + h];
	}
	for (size_t h = 0; h < H; h++) {
		float acc = 0.0f;
		for (size_t t = 0; t < tiles; t++)
			acc += part[t * H + h];
		out[h] = acc;
	}
	free(part);
}

/* Dropout multipliers of one sample's H units of hidden layer `layer` at
 * position pos: scale where kept, 0 where dropped.  The eight 16-bit
 * uniforms of a Philox block, read as little-endian u16, are units
 * 8w..8w+7 (ncf_dropout_keep, written for vectors). */
#if defined(__AVX2__)
#include <immintrin.h>
/* lo, hi of the eight 32x32-bit products a * b. */
static inline void mulhilo8(__m256i a, __m256i b, __m256i *lo, __m256i *hi)
{
	__m256i even = _mm256_mul_epu32(a, b);
	__m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
	*lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
	*hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/* ncf_philox4x32 on eight counters that differ only in word 3 (c3 + lane),
 * as the dropout blocks w0..w0+7 of one sample do: out[i][lane] is word i
 * of block lane.  The same numbers as the scalar generator (test_grad's
 * reference uses ncf_dropout_bits). */
static void philox8(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
		    uint32_t out[4][8])
{
	__m256i x0 = _mm256_set1_epi32((int)c0), x1 = _mm256_set1_epi32((int)c1);
	__m256i x2 = _mm256_set1_epi32((int)c2);
	__m256i x3 = _mm256_add_epi32(_mm256_set1_epi32((int)c3),
				      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u);
	const __m256i m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
	for (int r = 0; r < 10; r++) {
		__m256i lo0, hi0, lo1, hi1;
		mulhilo8(m0, x0, &lo0, &hi0);
		mulhilo8(m1, x2, &lo1, &hi1);
		x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32((int)k0));
		x1 = lo1;
		x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32((int)k1));
		x3 = lo0;
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	_mm256_storeu_si256((__m256i *)out[0], x0);
	_mm256_storeu_si256((__m256i *)out[1], x1);
	_mm256_storeu_si256((__m256i *)out[2], x2);
	_mm256_storeu_si256((__m256i *)out[3], x3);
}
#endif

static void dropout_row(float *restrict mult, size_t H, uint32_t drop16, float scale,
			uint64_t seed, uint32_t epoch, uint64_t pos, uint32_t layer)
{
	size_t blocks = (H + 7) / 8;
	uint16_t u16[8 * ((NCF_MAX_HIDDEN + 63) / 8)];
#if defined(__AVX2__)
	uint32_t words[4][8];
	uint32_t c3 = ((uint32_t)NCF_RNG_DROPOUT << 24) | ((layer << 16) & 0xFFFFFFu);
	for (size_t w0 = 0; w0 < blocks; w0 += 8) {
		philox8((uint32_t)pos, (uint32_t)(pos >> 32), epoch, c3 | (uint32_t)w0,
			(uint32_t)seed, (uint32_t)(seed >> 32), words);
		for (size_t w = 0; w < 8; w++) /* block-major, as ncf_dropout_bits lays them */
			for (size_t i = 0; i < 4; i++)
				memcpy(u16 + 8 * (w0 + w) + 2 * i, &words[i][w], 4);
	}
#else
	for (size_t w = 0; w < blocks; w++) {
		ncf_u32x4 bits = ncf_dropout_bits(seed, epoch, pos, layer, (uint32_t)w);
		memcpy(u16 + 8 * w, bits.v, 16);
	}
#endif
	for (size_t h = 0; h < H; h++)
		mult[h] = u16[h] >= drop16 ? scale : 0.0f;
}

/* z += b, ReLU, dropout (hidden layer index `layer`; row j is the sample
 * at epoch position pos0 + order[j]), in place: z is (n, H). */
static void bias_relu_dropout(float *restrict z, size_t n, size_t H, const float *restrict b,
			      int drop, uint32_t drop16, float scale, uint64_t seed, uint32_t epoch,
			      uint64_t pos0, const uint32_t *order, uint32_t layer)
{
	float mult[NCF_MAX_HIDDEN];
	for (size_t j = 0; j < n; j++) {
		float *restrict row = z + j * H;
		if (!drop) {
			for (size_t h = 0; h < H; h++) {
				float x = row[h] + b[h];
				row[h] = x > 0.0f ? x : 0.0f;
			}
			continue;
		}
		dropout_row(mult, H, drop16, scale, seed, epoch, pos0 + order[j], layer);
		for (size_t h = 0; h < H; h++) {
			float x = row[h] + b[h];
			row[h] = (x > 0.0f ? x : 0.0f) * mult[h];
		}
	}
}

/* a . b over n floats in a fixed order that vectorizes: eight partial sums
 * (element k goes to sum k % 8), added pairwise at the end. */
static inline float dot8(const float *restrict a, const float *restrict b, size_t n)
{
	float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	size_t k = 0;
	for (; k + 8 <= n; k += 8)
		for (int l = 0; l < 8; l++)
			s[l] += a[k + l] * b[k + l];
	for (int l = 0; k < n; k++, l++)
		s[l] += a[k] * b[k];
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

/* (a * b) . w over n floats, the GMF term, in dot8's order. */
static inline float dot8_prod(const float *restrict a, const float *restrict b,
			      const float *restrict w, size_t n)
{
	float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	size_t k = 0;
	for (; k + 8 <= n; k += 8)
		for (int l = 0; l < 8; l++)
			s[l] += w[k + l] * (a[k + l] * b[k + l]);
	for (int l = 0; k < n; k++, l++)
		s[l] += w[k] * (a[k] * b[k]);
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
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
#if defined(__AVX2__)
	if (((uintptr_t)dz & 31) == 0 && count % 8 == 0) {
		__m256 sc = _mm256_set1_ps(scale), zero = _mm256_setzero_ps();
		for (size_t k = 0; k < count; k += 8) {
			__m256 v = _mm256_mul_ps(_mm256_loadu_ps(dh + k), sc);
			__m256 m = _mm256_cmp_ps(_mm256_loadu_ps(h + k), zero, _CMP_GT_OQ);
			_mm256_stream_ps(dz + k, _mm256_and_ps(v, m));
		}
		_mm_sfence();
		return;
	}
#endif
	relu_dropout_back(dz, dh, h, count, scale);
}

/*
 * Forward and backward of rows [k0, k0 + n) of the step, in user order:
 * row k is sample j = ulist[k] (the samples sorted by user slot, so rows
 * of one user are adjacent).  Weight gradients of layers 2..L and the head
 * go to lane (tail layout), dz1 of row k to c->dz1 row k, dlogit of sample
 * j to c->dlogit[j].  pos0 is the epoch position of sample 0.  Returns the
 * rows' loss sum.
 */
static double chunk_train(struct ncf_backend *be, struct cpu *c, struct scratch *x, size_t k0,
			  size_t n, uint64_t pos0, uint32_t epoch, float inv_n, float *lane)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const float *prm = c->params;
	const uint32_t *order = c->ulist + k0;
	uint32_t nl = s->n_layers, last = nl - 1;
	size_t F = s->factors, H1 = s->layers[1];
	int drop = be->hp.dropout > 0.0f;
	uint32_t drop16 = ncf_dropout_threshold(be->hp.dropout);
	float scale = drop ? 1.0f / (1.0f - be->hp.dropout) : 1.0f;
	uint64_t seed = be->hp.seed;

	double ct = prof_on > 0 ? ncf_now() : 0;
	/* layer 1, factorized: gather the per-slot projections */
	float *h1 = x->h[1];
	for (size_t r = 0; r < n; r++) {
		uint32_t j = order[r];
		const float *restrict a = c->au + (size_t)c->slot_u[j] * H1;
		const float *restrict b = c->ai + (size_t)c->slot_i[j] * H1;
		float *restrict z = h1 + r * H1;
		for (size_t h = 0; h < H1; h++)
			z[h] = a[h] + b[h];
	}
	CPROF(0);
	bias_relu_dropout(h1, n, H1, prm + L->b[1], drop, drop16, scale, seed, epoch, pos0, order,
			  0);
	CPROF(2);
	for (uint32_t k = 2; k < nl; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)out, (int)in, 1.0f,
			    x->h[k - 1], (int)in, prm + L->w[k], (int)in, 0.0f, x->h[k], (int)out);
		CPROF(1);
		bias_relu_dropout(x->h[k], n, out, prm + L->b[k], drop, drop16, scale, seed, epoch,
				  pos0, order, k - 1);
		CPROF(2);
	}
	/* GMF, head, loss */
	const float *wg = prm + L->head_w, *wh = wg + F;
	float hb = prm[L->head_b];
	size_t HL = s->layers[last];
	const float *hL = x->h[last];
	double loss = 0;
	float *lw = lane + (L->head_w - c->tail_off);
	float *lwh = lw + F, *lb = lane + (L->head_b - c->tail_off);
	float *restrict dl_row = x->logit;
	for (size_t r = 0; r < n; r++) {
		uint32_t j = order[r];
		const float *restrict pu = prm + L->p + (size_t)c->su[j] * F;
		const float *restrict qi = prm + L->q + (size_t)c->si[j] * F;
		float *restrict g = x->g + r * F;
		for (size_t f = 0; f < F; f++)
			g[f] = pu[f] * qi[f];
	}
	/* logits = G wg + H_L wh + b, as two matrix-vector products */
	cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)F, 1.0f, x->g, (int)F, wg, 1, 0.0f,
		    dl_row, 1);
	cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)HL, 1.0f, hL, (int)HL, wh, 1, 1.0f,
		    dl_row, 1);
	float bsum = 0.0f;
	for (size_t r = 0; r < n; r++) {
		uint32_t j = order[r];
		float y = (float)c->lab[j], l;
		float dl = ncf_bce_grad(dl_row[r] + hb, y, &l) * inv_n;
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
	CPROF(3);
	/* backward through layers L..2 */
	float *dh = x->dh, *dz = x->dz;
	for (size_t r = 0; r < n; r++) {
		float *restrict d = dh + r * HL;
		for (size_t h = 0; h < HL; h++)
			d[h] = dl_row[r] * wh[h];
	}
	for (uint32_t k = last; k >= 2; k--) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		relu_dropout_back(dz, dh, x->h[k], n * out, scale);
		float *lW = lane + (L->w[k] - c->tail_off);
		float *restrict lB = lane + (L->b[k] - c->tail_off);
		const float *restrict dzr = dz;
		for (size_t r = 0; r < n; r++)
			for (size_t h = 0; h < out; h++)
				lB[h] += dzr[r * out + h];
		CPROF(5);
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)n, 1.0f,
			    dz, (int)out, x->h[k - 1], (int)in, 1.0f, lW, (int)in);
		/* dh for layer k-1 */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)in, (int)out, 1.0f,
			    dz, (int)out, prm + L->w[k], (int)in, 0.0f, dh, (int)in);
		CPROF(4);
	}
	relu_dropout_back_stream(c->dz1 + k0 * H1, dh, h1, n * H1, scale);
	CPROF(5);
	return loss;
}

/*
 * The GMF gradient of one table's rows (P or Q): for slot k, row
 * slot_id[k] gets w_g * sum over the slot's samples j (start/list) of
 * dlogit[j] * other[other_id[j]], other being the opposite table (F wide).
 * Slots are independent: parallel without conflicts.
 */
static void gmf_rows_grad(size_t nslots, const uint32_t *start, const uint32_t *list,
			  const float *dlogit, const uint32_t *other_id, const float *other,
			  const uint32_t *slot_id, float *grad, const float *wg, size_t F)
{
#pragma omp parallel
	{
		float *acc = ncf_xmalloc(F * sizeof(float));
#pragma omp for schedule(dynamic, 64)
		for (int64_t k = 0; k < (int64_t)nslots; k++) {
			memset(acc, 0, F * sizeof(float));
			for (uint32_t e = start[k]; e < start[k + 1]; e++) {
				uint32_t j = list[e];
				float dl = dlogit[j];
				const float *o = other + (size_t)other_id[j] * F;
				for (size_t f = 0; f < F; f++)
					acc[f] += dl * o[f];
			}
			float *g = grad + (size_t)slot_id[k] * F;
			for (size_t f = 0; f < F; f++)
				g[f] = wg[f] * acc[f];
		}
		free(acc);
	}
}

/* Steps 1-6 of the file comment: the gradient of the mean loss over the
 * global batch of n positions into c->grad (this rank's part). */
static int cpu_compute_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			    double *loss_sum)
{
	struct cpu *c = be->impl;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	if (!c->have_td) {
		ncf_error("cpu backend: no training data");
		return -1;
	}
	const struct ncf_train_data *td = &c->td;
	uint64_t S = ncf_epoch_check("cpu", td->positives, be->hp.negatives, first, n);
	if (S == 0)
		return -1;
	uint64_t lo, hi;
	ncf_dist_slice(n, be->dist->rank, be->dist->size, &lo, &hi);
	size_t B = (size_t)(hi - lo);
	uint64_t pos0 = first + lo;
	if (hi - lo >= ((uint64_t)1 << 31)) { /* slots and rows are 32-bit */
		ncf_error("cpu backend: a batch of %llu samples per rank is too large (at most 2^31 - 1)",
			  (unsigned long long)(hi - lo));
		return -1;
	}
	float inv_n = 1.0f / (float)n;
	size_t F = s->factors, M = ncf_shape_m(s), H1 = s->layers[1];
	memset(c->grad, 0, L->total * sizeof(float));
	*loss_sum = 0;
	if (B == 0)
		return 0;
	grow_samples(c, s, B);
	prof_mark(-1);

	/* 1. the samples */
	ncf_perm perm = ncf_perm_make(S, be->hp.seed, epoch);
#pragma omp parallel for schedule(static)
	for (int64_t j = 0; j < (int64_t)B; j++)
		c->lab[j] = (uint8_t)ncf_sample_at(&perm, pos0 + (uint64_t)j, be->hp.seed, epoch,
						   td->positives, td->items, (int)be->hp.true_neg,
						   td->entry_user, td->offsets, td->items_csr,
						   &c->su[j], &c->si[j]);

	prof_mark(0);
	/* 2. slots */
	uint32_t nu = make_slots(c->su, B, c->uslot, c->slot_u, &c->slot_user, &c->ustart,
				 c->ulist, &c->cap_u);
	uint32_t ni = make_slots(c->si, B, c->islot, c->slot_i, &c->slot_item, &c->istart,
				 c->ilist, &c->cap_i);
	c->xu = ncf_xrealloc(c->xu, (size_t)c->cap_u * M * sizeof(float));
	c->au = ncf_xrealloc(c->au, (size_t)c->cap_u * H1 * sizeof(float));
	c->dau = ncf_xrealloc(c->dau, (size_t)c->cap_u * H1 * sizeof(float));
	c->xi = ncf_xrealloc(c->xi, (size_t)c->cap_i * M * sizeof(float));
	c->ai = ncf_xrealloc(c->ai, (size_t)c->cap_i * H1 * sizeof(float));
	c->dai = ncf_xrealloc(c->dai, (size_t)c->cap_i * H1 * sizeof(float));
	size_t cap_ui = c->cap_u > c->cap_i ? c->cap_u : c->cap_i;
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)B; k++)
		c->rowof[c->ulist[k]] = (uint32_t)k;
	c->dx = ncf_xrealloc(c->dx, cap_ui * M * sizeof(float));

	prof_mark(1);
	/* 3. factorized first layer */
	const float *W1 = c->params + L->w[1];
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)nu; k++)
		memcpy(c->xu + (size_t)k * M, c->params + L->pm + (size_t)c->slot_user[k] * M,
		       M * sizeof(float));
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)ni; k++)
		memcpy(c->xi + (size_t)k * M, c->params + L->qm + (size_t)c->slot_item[k] * M,
		       M * sizeof(float));
	rows_times_wt(c->xu, nu, M, W1, 2 * M, H1, c->au);
	rows_times_wt(c->xi, ni, M, W1 + M, 2 * M, H1, c->ai);

	prof_mark(2);
	/* 4. chunks, in lanes */
	size_t chunks = (B + CHUNK - 1) / CHUNK;
	size_t lanes = chunks < LANES ? chunks : LANES;
	memset(c->lane, 0, lanes * c->tail_len * sizeof(float));
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t l = 0; l < (int64_t)lanes; l++) {
		struct scratch *x = &c->ts[thread_id()];
		float *lane = c->lane + (size_t)l * c->tail_len;
		for (size_t ch = (size_t)l; ch < chunks; ch += LANES) {
			size_t j0 = ch * CHUNK, cn = B - j0 < CHUNK ? B - j0 : CHUNK;
			c->chunk_loss[ch] = chunk_train(be, c, x, j0, cn, pos0, epoch, inv_n, lane);
		}
	}
	prof_mark(3);
	double loss = 0;
	for (size_t ch = 0; ch < chunks; ch++)
		loss += c->chunk_loss[ch];
	*loss_sum = loss;
	float *gt = c->grad + c->tail_off;
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)c->tail_len; k++) {
		float acc = 0.0f;
		for (size_t l = 0; l < lanes; l++)
			acc += c->lane[l * c->tail_len + (size_t)k];
		gt[k] = acc;
	}

	prof_mark(4);
	/* 5. first layer backward, per slot */
#pragma omp parallel for schedule(dynamic, 64)
	for (int64_t k = 0; k < (int64_t)nu; k++) {
		float *d = c->dau + (size_t)k * H1;
		memset(d, 0, H1 * sizeof(float));
		for (uint32_t e = c->ustart[k]; e < c->ustart[k + 1]; e++) {
			const float *restrict z = c->dz1 + (size_t)e * H1; /* rows in user order */
			float *restrict dd = d;
			for (size_t h = 0; h < H1; h++)
				dd[h] += z[h];
		}
	}
#pragma omp parallel for schedule(dynamic, 64)
	for (int64_t k = 0; k < (int64_t)ni; k++) {
		float *d = c->dai + (size_t)k * H1;
		memset(d, 0, H1 * sizeof(float));
		uint32_t e1 = c->istart[k + 1];
		for (uint32_t e = c->istart[k]; e < e1; e++) {
			/* rows come from anywhere in dz1: fetch a few rows ahead */
			if (e + 4 < e1) {
				const char *ahead = (const char *)(c->dz1 + (size_t)c->rowof[c->ilist[e + 4]] * H1);
				for (size_t b = 0; b < H1 * sizeof(float); b += 64)
					__builtin_prefetch(ahead + b);
			}
			const float *restrict z = c->dz1 + (size_t)c->rowof[c->ilist[e]] * H1;
			float *restrict dd = d;
			for (size_t h = 0; h < H1; h++)
				dd[h] += z[h];
		}
	}
	float *gW1 = c->grad + L->w[1];
	tn_sum(c, c->dau, c->xu, nu, H1, M, gW1, 2 * M);
	tn_sum(c, c->dai, c->xi, ni, H1, M, gW1 + M, 2 * M);
	col_sum(c->dau, nu, H1, c->grad + L->b[1]);
	rows_times_w(c->dau, nu, H1, W1, 2 * M, M, c->dx);
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)nu; k++)
		memcpy(c->grad + L->pm + (size_t)c->slot_user[k] * M, c->dx + (size_t)k * M,
		       M * sizeof(float));
	rows_times_w(c->dai, ni, H1, W1 + M, 2 * M, M, c->dx);
#pragma omp parallel for schedule(static)
	for (int64_t k = 0; k < (int64_t)ni; k++)
		memcpy(c->grad + L->qm + (size_t)c->slot_item[k] * M, c->dx + (size_t)k * M,
		       M * sizeof(float));

	prof_mark(5);
	/* 6. GMF embeddings */
	const float *wg = c->params + L->head_w;
	gmf_rows_grad(nu, c->ustart, c->ulist, c->dlogit, c->si, c->params + L->q, c->slot_user,
		      c->grad + L->p, wg, F);
	gmf_rows_grad(ni, c->istart, c->ilist, c->dlogit, c->su, c->params + L->p, c->slot_item,
		      c->grad + L->q, wg, F);
	prof_mark(6);
	return 0;
}

static int cpu_train_step(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			  double *loss_sum)
{
	struct cpu *c = be->impl;
	if (cpu_compute_grad(be, epoch, first, n, loss_sum) != 0)
		return -1;
	if (ncf_dist_sum_f32(be->dist, c->grad, be->layout.total) != 0)
		return -1;
	prof_mark(-1);
	be->step++;
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, be->step, &k);
	size_t total = be->layout.total;
	float *p = c->params, *m = c->m, *v = c->v, *g = c->grad;
#pragma omp parallel for schedule(static)
	for (int64_t j = 0; j < (int64_t)total; j++)
		ncf_adam_update(&p[j], &m[j], &v[j], g[j], &k);
	prof_mark(7);
	c->tables_valid = 0;
	return 0;
}

static int cpu_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		    float *grad, double *loss_sum)
{
	struct cpu *c = be->impl;
	if (cpu_compute_grad(be, epoch, first, n, loss_sum) != 0)
		return -1;
	memcpy(grad, c->grad, be->layout.total * sizeof(float));
	return 0;
}

/*
 * Inference layers: y (n, outp) = relu(x (n, in) W^T + b), computed so that
 * every row's result depends on that row alone, never on the batch it came
 * in: y[r][o] = relu(b[o] + sum over q = 0..in-1 of x[r][q] W[o][q]), the
 * sum accumulated in q order with fused multiply-adds.  OpenBLAS sgemm does
 * not promise this (a row's last bits depend on its place in the batch), and
 * scores must not change with the batch: ncf-eval, ncf-infer --score and
 * --recommend agree to the last digit.  wt is W^T packed (in, outp), outp =
 * out rounded up to 16 with zero columns; x has row stride ldx.
 */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
/* Store relu(acc + bias) of one row's 16 outputs. */
static inline void tile_store(float *y, __m256 a0, __m256 a1, __m256 b0, __m256 b1)
{
	__m256 z = _mm256_setzero_ps();
	_mm256_storeu_ps(y, _mm256_max_ps(_mm256_add_ps(a0, b0), z));
	_mm256_storeu_ps(y + 8, _mm256_max_ps(_mm256_add_ps(a1, b1), z));
}

/* 6 rows x 16 outputs starting at column o: twelve accumulators in
 * registers (written out: an array of vectors gets spilled). */
static inline void dense_tile6(const float *x, size_t ldx, size_t in, const float *wt,
			       size_t outp, const float *b, float *y, size_t o)
{
	__m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
	__m256 a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
	const float *w = wt + o;
	const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
	const float *x4 = x + 4 * ldx, *x5 = x + 5 * ldx;
	for (size_t q = 0; q < in; q++, w += outp) {
		__m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8), v;
		v = _mm256_broadcast_ss(x0 + q);
		a00 = _mm256_fmadd_ps(v, w0, a00);
		a01 = _mm256_fmadd_ps(v, w1, a01);
		v = _mm256_broadcast_ss(x1 + q);
		a10 = _mm256_fmadd_ps(v, w0, a10);
		a11 = _mm256_fmadd_ps(v, w1, a11);
		v = _mm256_broadcast_ss(x2 + q);
		a20 = _mm256_fmadd_ps(v, w0, a20);
		a21 = _mm256_fmadd_ps(v, w1, a21);
		v = _mm256_broadcast_ss(x3 + q);
		a30 = _mm256_fmadd_ps(v, w0, a30);
		a31 = _mm256_fmadd_ps(v, w1, a31);
		v = _mm256_broadcast_ss(x4 + q);
		a40 = _mm256_fmadd_ps(v, w0, a40);
		a41 = _mm256_fmadd_ps(v, w1, a41);
		v = _mm256_broadcast_ss(x5 + q);
		a50 = _mm256_fmadd_ps(v, w0, a50);
		a51 = _mm256_fmadd_ps(v, w1, a51);
	}
	__m256 b0 = _mm256_loadu_ps(b + o), b1 = _mm256_loadu_ps(b + o + 8);
	tile_store(y + o, a00, a01, b0, b1);
	tile_store(y + outp + o, a10, a11, b0, b1);
	tile_store(y + 2 * outp + o, a20, a21, b0, b1);
	tile_store(y + 3 * outp + o, a30, a31, b0, b1);
	tile_store(y + 4 * outp + o, a40, a41, b0, b1);
	tile_store(y + 5 * outp + o, a50, a51, b0, b1);
}

/* One row x 16 outputs: the same operations as a row of dense_tile6. */
static inline void dense_tile1(const float *x, size_t ldx, size_t in, const float *wt,
			       size_t outp, const float *b, float *y, size_t o)
{
	(void)ldx;
	__m256 a0 = _mm256_setzero_ps(), a1 = a0;
	const float *w = wt + o;
	for (size_t q = 0; q < in; q++, w += outp) {
		__m256 v = _mm256_broadcast_ss(x + q);
		a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(w), a0);
		a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(w + 8), a1);
	}
	tile_store(y + o, a0, a1, _mm256_loadu_ps(b + o), _mm256_loadu_ps(b + o + 8));
}

/* Rows in tiles of 96 (their inputs stay in L2) times column blocks of 16
 * (their weights stay in L1); 6-row register tiles, single rows at the end:
 * each output goes through the same operations either way. */
static void dense_rows(const float *x, size_t ldx, size_t n, size_t in, const float *wt,
		       size_t outp, const float *b, size_t out, float *y)
{
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
	(void)out;
}
#else
/* Portable version of the same contract (one row at a time). */
static void dense_rows(const float *x, size_t ldx, size_t n, size_t in, const float *wt,
		       size_t outp, const float *b, size_t out, float *y)
{
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

/* The first layer of every user (b1 folded in) and item, for scoring. */
static void build_tables(struct ncf_backend *be, struct cpu *c)
{
	if (c->tables_valid)
		return;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(s), H1 = s->layers[1];
	if (!c->AU)
		c->AU = ncf_xmalloc((size_t)s->users * H1 * sizeof(float));
	if (!c->AI)
		c->AI = ncf_xmalloc((size_t)s->items * H1 * sizeof(float));
	const float *W1 = c->params + L->w[1], *b1 = c->params + L->b[1];
	rows_times_wt(c->params + L->pm, s->users, M, W1, 2 * M, H1, c->AU);
	rows_times_wt(c->params + L->qm, s->items, M, W1 + M, 2 * M, H1, c->AI);
#pragma omp parallel for schedule(static)
	for (int64_t u = 0; u < (int64_t)s->users; u++)
		for (size_t h = 0; h < H1; h++)
			c->AU[(size_t)u * H1 + h] += b1[h];
	/* W_k^T packed with zero padding, then the padded bias right after */
	for (uint32_t k = 2; k < s->n_layers; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k], outp = PAD16(out);
		free(c->wt[k]);
		c->wt[k] = ncf_xcalloc(in * outp + outp, sizeof(float));
		const float *W = c->params + L->w[k];
		for (size_t o = 0; o < out; o++)
			for (size_t q = 0; q < in; q++)
				c->wt[k][q * outp + o] = W[o * in + q];
		memcpy(c->wt[k] + in * outp, c->params + L->b[k], out * sizeof(float));
	}
	c->tables_valid = 1;
}

/* Logits of n pairs, no dropout: one chunk with thread scratch x.  Row
 * independent (see dense_rows): a pair's logit does not depend on the
 * others. */
static void chunk_logits(struct ncf_backend *be, struct cpu *c, struct scratch *x,
			 const uint32_t *users, const uint32_t *items, size_t n, float *out)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const float *prm = c->params;
	uint32_t nl = s->n_layers, last = nl - 1;
	size_t F = s->factors, H1 = s->layers[1];
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
	for (uint32_t k = 2; k < nl; k++) {
		size_t in = s->layers[k - 1], outw = s->layers[k], outp = PAD16(outw);
		dense_rows(prev, ld, n, in, c->wt[k], outp, c->wt[k] + in * outp, outw, x->hp[k]);
		prev = x->hp[k];
		ld = outp;
	}
	const float *wg = prm + L->head_w, *wh = wg + F;
	size_t HL = s->layers[last];
	for (size_t j = 0; j < n; j++) {
		const float *pu = prm + L->p + (size_t)users[j] * F;
		const float *qi = prm + L->q + (size_t)items[j] * F;
		const float *hrow = prev + j * ld;
		out[j] = (dot8_prod(pu, qi, wg, F) + dot8(wh, hrow, HL)) + prm[L->head_b];
	}
}

static int cpu_logits(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		      size_t n, float *out)
{
	struct cpu *c = be->impl;
	build_tables(be, c);
	size_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t ch = 0; ch < (int64_t)chunks; ch++) {
		size_t j0 = (size_t)ch * CHUNK, cn = n - j0 < CHUNK ? n - j0 : CHUNK;
		chunk_logits(be, c, &c->ts[thread_id()], users + j0, items + j0, cn, out + j0);
	}
	return 0;
}

static int cpu_score(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		     size_t n, float *out)
{
	cpu_logits(be, users, items, n, out);
#pragma omp parallel for schedule(static)
	for (int64_t j = 0; j < (int64_t)n; j++)
		out[j] = ncf_sigmoid(out[j]);
	return 0;
}

static int cpu_eval_ranks(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks)
{
	struct cpu *c = be->impl;
	if (!c->have_ed) {
		ncf_error("cpu backend: no evaluation data");
		return -1;
	}
	build_tables(be, c);
	const struct ncf_eval_data *ed = &c->ed;
	uint32_t N = ed->negatives, per = N + 1;
	uint32_t users_per_chunk = CHUNK / per ? CHUNK / per : 1;
	uint32_t nusers = u1 - u0;
	uint32_t chunks = (nusers + users_per_chunk - 1) / users_per_chunk;
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
				chunk_logits(be, c, x, us + o, is + o, cn, lg + o);
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
	return 0;
}

const struct ncf_backend_i ncf_backend_cpu = {
	.name = "cpu",
	.device = NCF_DEVICE_CPU,
	.init = cpu_init,
	.free = cpu_free,
	.set_state = cpu_set_state,
	.get_state = cpu_get_state,
	.set_train_data = cpu_set_train_data,
	.set_eval_data = cpu_set_eval_data,
	.train_step = cpu_train_step,
	.grad = cpu_grad,
	.eval_ranks = cpu_eval_ranks,
	.score = cpu_score,
	.logits = cpu_logits,
	.sync = NULL,
	.describe = NULL,
};
