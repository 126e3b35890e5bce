/*
 * cpu.h - the fast cpu backend's private state, shared by its files:
 *   cpu.c      the interface table, state, Adam (ncf_backend_cpu);
 *   train.c    the gradient of a batch: the factorized first layer, chunks
 *              of samples in lanes, per-slot reductions;
 *   infer.c    logits, scores, evaluation ranks over precomputed tables;
 *   tiles.c    column sums over fixed tiles of rows, in parallel;
 *   matmul.c   the dense products of training and scoring (matmul.h): oneDNN, fp32
 *              or bf16, or OpenBLAS; dnnl.c its oneDNN 2.x/3.x difference;
 *   simd.h     every intrinsic (AVX2, FMA), with the plain C it replaces.
 * It computes the function of reference.c (the specification, in plain C;
 * tests/unit/test_cpu_ref.c holds the two side by side) faster.
 *
 * Determinism.  Results depend on the seed only, never on the thread
 * count: OpenBLAS always runs single-threaded (its threaded sgemm splits
 * work differently per thread count, and the results differ in the last
 * bits), and the work is cut into pieces whose size is fixed: samples into
 * chunks of CHUNK, chunks into LANES lanes (chunk c goes to lane c % LANES
 * and a lane sums its chunks in order), table rows into tiles of TILE.
 * Threads take whole lanes or tiles; partial sums are added in lane or tile
 * order.  No float atomics anywhere.  oneDNN is called the same way: each
 * product on one thread, inside a lane or tile, its primitive planned for
 * one thread (matmul.h).
 *
 * Precision.  fp32, or bf16 (--precision bf16, --amp) as NVIDIA's AMP
 * means it: the dense products take bf16 operands and accumulate and write
 * fp32; everything else (the first layer's gather-add, bias, ReLU,
 * dropout, GMF, head, loss, the gradient sums, Adam) stays fp32, on fp32
 * master weights.  pb, a bf16 copy of all parameters (the MLP tables and
 * weights are what the products read), is refreshed by every Adam step and
 * by set_state.
 *
 * Legend: B batch (this rank's slice), U users, I items, F GMF factors,
 * H0..HL the MLP widths (H0 = 2M, M the MLP embedding width), Bu and Bi the
 * distinct users and items of a batch ("slots"), in order of first
 * appearance.  Tables by role: gmf_user (U, F), gmf_item (I, F), mlp_user
 * (U, M), mlp_item (I, M) (model.h; the layout's offsets of the same names).
 */
#ifndef NCF_CPU_H
#define NCF_CPU_H

#include <stddef.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend_impl.h"
#include "matmul.h"
#include "state.h"

#define CHUNK 2048 /* samples per chunk */
#define LANES 64   /* accumulators of the dense weight gradients */
#define TILE 2048  /* table rows per tile (= NCF_MM_TILE) */
#define NCF_MAX_HIDDEN 8192 /* widest layer (model.h limit) */
#define PAD16(n) (((n) + 15) & ~(size_t)15) /* inference row stride */

/* One thread's activations for a chunk. */
struct scratch {
	float *h[NCF_MAX_LAYERS]; /* (CHUNK, H_k) activations after dropout, h[1..L] */
	float *hp[NCF_MAX_LAYERS];/* (CHUNK, pad16(H_k)) inference activations, k >= 2 */
	float *dh, *dz;		  /* (CHUNK, max H) */
	float *g;		  /* (CHUNK, F) */
	float *logit;		  /* (CHUNK) */
	ncf_bf16 *hb[NCF_MAX_LAYERS]; /* bf16 only: (CHUNK, H_k) copies of h[k], k < L */
	ncf_bf16 *dzb;		  /* bf16 only: (CHUNK, max H) copy of dz */
};

struct cpu {
	struct ncf_host_state h; /* first: parameters, moments, gradient, data (state.h) */
	/* step scratch */
	size_t cap;		     /* samples the arrays below hold */
	uint32_t *sample_user;	     /* (B) each sample's user */
	uint32_t *sample_item;	     /* (B) and item */
	uint8_t *label;		     /* (B) and label */
	uint32_t *user_slot;	     /* (B) the slot of each sample's user */
	uint32_t *item_slot;	     /* (B) and of its item */
	float *dlogit;		     /* (B) */
	float *dz1;		     /* (B, H1) */
	double *chunk_loss;	     /* (chunks) */
	int32_t *slot_of_user;	     /* (U) a user's slot in this batch, or -1 */
	int32_t *slot_of_item;	     /* (I) */
	uint32_t *slot_user;	     /* (Bu) user of each slot */
	uint32_t *slot_item;	     /* (Bi) */
	uint32_t *user_start;	     /* (Bu+1) where each user slot's samples begin in user_list */
	uint32_t *user_list;	     /* (B) the samples by user slot (user order) */
	uint32_t *rowof;	     /* (B) row of each sample in user order */
	uint32_t *item_start;	     /* (Bi+1) */
	uint32_t *item_list;	     /* (B) the samples by item slot */
	float *xu, *xi;		     /* (Bu, M), (Bi, M) gathered MLP embeddings */
	float *au, *ai;		     /* (Bu, H1), (Bi, H1) first layer per slot */
	float *dau, *dai;	     /* (Bu, H1), (Bi, H1) */
	float *dx;		     /* (max(Bu, Bi), M) */
	size_t cap_u, cap_i;
	float *lane;		     /* (LANES, tail) */
	float *tile_part;	     /* (tiles, H1 * M): tile partials of tn_sum, col_sum */
	size_t tile_cap;
	size_t tail_off, tail_len;   /* gradient part accumulated in lanes */
	struct scratch *ts;	     /* per thread */
	enum ncf_mm_type mt;	     /* the products' operands: NCF_MM_F32 or NCF_MM_BF16 */
	ncf_bf16 *pb;		     /* bf16 only: (total) copy of h.params */
	ncf_bf16 *xub, *xib;	     /* bf16 only: (Bu, M), (Bi, M) gathered from pb */
	ncf_bf16 *daub, *daib;	     /* bf16 only: (Bu, H1), (Bi, H1) copies of dau, dai */
	float *mm_part;		     /* (tiles, H1 * M): tile partials of dW1 */
	size_t mm_part_cap;
	int nthreads;
	/* evaluation / scoring tables: first layer for every user and item */
	float *AU, *AI;		     /* (U, H1) with b1 added, (I, H1) */
	float *wt[NCF_MAX_LAYERS];   /* W_k^T packed (H_{k-1}, pad16(H_k)) for k >= 2 */
	int tables_valid;
};

/* The parameters at offset off as the products' operands of c->mt:
 * h.params itself in fp32, its bf16 copy pb (the same offsets) in bf16. */
static inline const void *ncf_cpu_param(const struct cpu *c, size_t off)
{
	return c->mt == NCF_MM_BF16 ? (const void *)(c->pb + off)
				    : (const void *)(c->h.params + off);
}

static inline int thread_id(void)
{
#ifdef _OPENMP
	return omp_get_thread_num();
#else
	return 0;
#endif
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

/* ---- tiles.c: sums over tiles of TILE rows, in parallel -------------- */

/* out (H) = column sums of d (rows, H), tile partials in order. */
void ncf_cpu_col_sum(struct cpu *c, const float *d, size_t rows, size_t H, float *out);

/* ---- train.c ---------------------------------------------------------- */

/* The gradient of the mean loss over the global batch of n positions at
 * first of epoch into c->grad (this rank's part; not all-reduced), this
 * rank's loss sum into *loss_sum.  Returns 0 or -1 (reported). */
int ncf_cpu_compute_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			 double *loss_sum);

/* ---- infer.c: the members of the interface ---------------------------- */

int ncf_cpu_logits(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		   size_t n, float *out);
int ncf_cpu_score(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		  size_t n, float *out);
int ncf_cpu_eval_ranks(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks);

#endif
