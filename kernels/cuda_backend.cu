/*
 * cuda_backend.cu - the cuda backend (DESIGN.md section 6): NeuMF training
 * and evaluation on an NVIDIA GPU, the same function as the cpu backend
 * (cpu.c, the specification) computed with cuBLAS for the dense layers and
 * the plain kernels of cuda_kernels.cu for the rest.
 *
 * Everything lives on the device: parameters, Adam moments and the gradient
 * (fp32 always), the training CSR (so that the sample stream is generated
 * there), the evaluation candidates, the activations.  The host only
 * launches work and reads back the step's loss (one synchronisation per
 * step).
 *
 * One training step on the rank's slice of the global batch (B rows at
 * epoch positions pos0 .. pos0 + B), against cpu.c's steps:
 *  1. samples: sample_cuda, ncf_sample_at per position (cpu.c 1);
 *  2. first layer, factorized over whole tables: AU = Pm W1u^T (U, H1) and
 *     AI = Qm W1i^T (I, H1), one GEMM each, every step.  cpu.c computes the
 *     rows of the batch's distinct ids only (its steps 2-3); on a GPU the
 *     whole tables cost about as much as the gather would (0.02 GFLOP per
 *     user or item row pair, ~10 GFLOP for ml-20m) and need no slot map;
 *  3. per row: h1 = dropout(relu(AU[u] + AI[i] + b1)) (layer1_cuda), then
 *     layers 2..L as a cuBLAS GEMM each plus bias_relu_dropout_cuda; the
 *     head, loss and dlogit = (sigmoid - y) / n (head_train_cuda); the
 *     backward of layers L..2 as GEMMs plus relu_dropout_back_cuda down to
 *     dz1 (B, H1) (cpu.c 4); bias and head gradients by deterministic
 *     column sums (colsum_cuda, head_grad_cuda);
 *  4. the batch sorted by user and by item (a stable radix sort), then
 *     dAU[u] = sum of dz1 over u's rows and dAI likewise (segsum_rows_cuda);
 *     dW1 = [dAU^T Pm, dAI^T Qm], db1 = column sums of dAU, dPm = dAU W1u,
 *     dQm = dAI W1i over whole tables (absent ids have zero rows, so their
 *     gradient is exactly 0, as in cpu.c 5);
 *  5. GMF: dP[u] = w_g * sum over u's rows of dlogit Q[i], dQ alike
 *     (segsum_gmf_cuda, cpu.c 6);
 *  6. all-reduce of the gradient across ranks (ncf_cuda_allreduce: nothing
 *     with one rank, NCCL with several), then one fused dense Adam pass over
 *     every parameter with ncf_adam_update (cpu.c 7).
 * The gradient is that of the mean loss over the global batch of n rows.
 *
 * Precision (be->precision): fp32 (cuBLAS pinned to fp32 math, no TF32: the
 * parity tests use it), tf32 (fp32 storage, TF32 tensor-core GEMMs; the
 * default on compute capability 8.0+), bf16 and fp16 (activations, the
 * tables AU/AI and a copy of the parameters from Pm on (plo) in 16 bits for
 * the GEMMs, fp32 accumulation; master weights, Adam state and gradients
 * stay fp32).  fp16 uses dynamic loss scaling as PyTorch's GradScaler:
 * dlogit is multiplied by the scale (2^15 at start), an inf or NaN anywhere
 * in the gradient skips the step (Adam's step count does not advance) and
 * halves the scale, 2000 good steps in a row double it.  The scale is not
 * saved in checkpoints: a resumed run starts again at 2^15.
 *
 * Reproducibility: no float atomics; every reduction has a fixed order (see
 * cuda_kernels.cuh), cuBLAS is deterministic for a given GPU and version, so
 * a run repeats bit for bit on the same GPU model and software.
 *
 * NCF_CUDA_PROFILE=1 in the environment times the phases of every training
 * step with CUDA events and prints milliseconds per step for each when the
 * backend is closed (bench/bench_gpu.c turns it on).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_kernels.cuh"

extern "C" {
#include "dist.h"
#include "err.h"
#include "metrics.h"
}

#ifndef NCF_CUDA_EMULATE
#include <cublasLt.h>
#ifdef NCF_HAVE_NCCL
#include <nccl.h>
#endif
#endif

#ifdef NCF_HAVE_NCCL
static int check_nccl(ncclResult_t r, const char *call, const char *file, int line)
{
	if (r == ncclSuccess)
		return 0;
	ncf_error("%s: %s:%d: NCCL: %s", call, file, line, ncclGetErrorString(r));
	return -1;
}
#define NCCL_CHECK(call) check_nccl((call), #call, __FILE__, __LINE__)
#endif

namespace NCF_CUDA_NS {

static const size_t EVAL_CHUNK = (size_t)1 << 20; /* (user, item) pairs per scoring launch */

/* Phases of a training step, timed under NCF_CUDA_PROFILE. */
enum {
	PH_SAMPLES, PH_TABLES, PH_FORWARD, PH_HEAD, PH_MLP_BACKWARD, PH_SORT, PH_LAYER1_BACKWARD,
	PH_GMF_LOSS, PH_ALLREDUCE_ADAM, PH_N
};
static const char *const ph_name[PH_N] = {
	"samples", "tables", "forward", "head", "mlp_backward", "sort", "layer1_backward",
	"gmf_loss", "allreduce_adam",
};

/* Scoring batches of at most GRAPH_MAX pairs are replayed as CUDA graphs
 * (copy in, forward, copy out), one per batch size, GRAPH_SLOTS sizes at a
 * time: at batch 1024 the launch overhead of a dozen kernels and GEMMs is
 * most of the latency. */
#define GRAPH_MAX 65536
#define GRAPH_SLOTS 8
#define BLAS_WORKSPACE (32u << 20)

struct cu {
	int dev;
	cudaDeviceProp prop;
	cudaStream_t s;
	cublasHandle_t blas;
	int have_stream, have_blas;
	act_type act;
	size_t es;			 /* bytes per activation element */
	cublasComputeType_t compute_f32; /* of GEMMs on fp32 operands */

	/* parameters (layout.total floats each) */
	float *params, *m, *v, *grad;
	void *plo; /* 16-bit copy of params from layout.pm on (bf16, fp16) */
	int plo_valid, tables_valid;
	void *AU, *AI;	  /* (U, H1), (I, H1) activation type: Pm W1u^T, Qm W1i^T */
	float *dAU, *dAI; /* (U, H1), (I, H1) */

	/* training data: CSR (offsets (U+1), items (P)), entry_user (P) */
	uint32_t *entry_user, *items_csr;
	int64_t *offsets;
	int64_t P;
	int have_td;
	/* evaluation data: test (U), neg (U, N), counted (U, N) */
	uint32_t *test, *neg;
	uint8_t *counted;
	uint32_t N;
	int have_ed;

#ifndef NCF_CUDA_EMULATE
	/* small scoring batches as CUDA graphs (see score_graph) */
	struct {
		size_t n;		/* batch size it was captured for, 0: empty */
		unsigned rows_gen;	/* c->rows_gen when captured */
		cudaGraphExec_t exec;
	} graphs[GRAPH_SLOTS];
	int graphs_off;			/* a capture failed: plain launches only */
	unsigned rows_gen;		/* bumped when the row buffers move */
	uint32_t *pin_u, *pin_i;	/* (GRAPH_MAX) pinned staging */
	float *pin_out;			/* (GRAPH_MAX) */
	void *blas_ws;			/* cuBLAS workspace, fixed for capture */
#endif

	/* rows of a step or a scoring launch: cap rows */
	size_t cap;
	uint32_t *su, *si; /* (cap) user, item */
	uint8_t *lab;	   /* (cap) */
	float *dl, *loss;  /* (cap) dlogit (logits when scoring), loss */
	void *h[NCF_MAX_LAYERS], *d[NCF_MAX_LAYERS]; /* (cap, H_k), k = 1..L */
	uint32_t *ku, *ju, *ki, *ji, *itmp;	      /* (cap) sorted keys and rows */
	void *sort_tmp;
	size_t sort_tmp_bytes;
	float *seg_head, *seg_tail; /* seg_scratch(cap, max(H1, F)) each */
	float *red;		    /* column-sum scratch */
	size_t red_cap;
	double *dred, *loss_dev; /* loss-sum scratch (sum_scratch(cap)), the sum */
	int *flag;		 /* fp16: inf/NaN in the gradient */
	uint32_t *ranks;
	size_t ranks_cap;

	/* fp16 dynamic loss scaling */
	float loss_scale;
	uint32_t good_steps, growth_interval;
	/* NCF_CUDA_PROFILE: an event at the start of each phase and at the end */
	int prof, prof_marked;
	cudaEvent_t ev[PH_N + 1];
	double prof_ms[PH_N];
	uint64_t prof_steps;
#ifdef NCF_HAVE_NCCL
	ncclComm_t comm;
	int have_comm;
#endif
};

static struct cu *impl(const struct ncf_backend *be)
{
	return (struct cu *)be->impl;
}

/* Profiling: the event that starts phase k (k = PH_N: the step's end). */
static void mark(struct cu *c, int k)
{
	if (c->prof) {
		cudaEventRecord(c->ev[k], c->s);
		c->prof_marked |= 1 << k;
	}
}

/* After a step's synchronisation: add the phases' times. */
static void prof_collect(struct cu *c)
{
	if (!c->prof || c->prof_marked != (1 << (PH_N + 1)) - 1) {
		c->prof_marked = 0;
		return;
	}
	for (int k = 0; k < PH_N; k++) {
		float ms = 0;
		if (cudaEventElapsedTime(&ms, c->ev[k], c->ev[k + 1]) == cudaSuccess)
			c->prof_ms[k] += ms;
	}
	c->prof_steps++;
	c->prof_marked = 0;
}

/* Bytes of n elements of es bytes, at least one. */
static inline size_t bytes_of(size_t n, size_t es)
{
	return n ? n * es : 1;
}
/* cudaMalloc of n elements of *p's type. */
#define DALLOC(p, n) CUDA_CHECK(cudaMalloc((void **)&(p), bytes_of((n), sizeof *(p))))
static int dalloc_bytes(void **p, size_t bytes)
{
	return CUDA_CHECK(cudaMalloc(p, bytes ? bytes : 1));
}
/* cudaFree and forget. */
template <typename X> static void dfree(X *&p)
{
	if (p)
		cudaFree((void *)p);
	p = NULL;
}

static size_t max_width(const struct ncf_shape *s)
{
	size_t m = s->factors + 1;
	for (uint32_t k = 1; k < s->n_layers; k++)
		if (s->layers[k] > m)
			m = s->layers[k];
	return m;
}

/* Bits of the largest id below n (at least 1). */
static int id_bits(uint32_t n)
{
	int b = 1;
	while (b < 32 && ((uint64_t)1 << b) < n)
		b++;
	return b;
}

static int grow_red(struct cu *c, size_t floats)
{
	if (floats <= c->red_cap)
		return 0;
	dfree(c->red);
	c->red_cap = 0;
	if (DALLOC(c->red, floats))
		return -1;
	c->red_cap = floats;
	return 0;
}

static void free_rows(struct cu *c)
{
	dfree(c->su), dfree(c->si), dfree(c->lab), dfree(c->dl), dfree(c->loss);
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		dfree(c->h[k]), dfree(c->d[k]);
	dfree(c->ku), dfree(c->ju), dfree(c->ki), dfree(c->ji), dfree(c->itmp);
	dfree(c->sort_tmp), dfree(c->seg_head), dfree(c->seg_tail), dfree(c->dred);
	c->sort_tmp_bytes = 0;
	c->cap = 0;
}

/* Room for n rows in every per-row buffer. */
static int ensure_rows(struct ncf_backend *be, struct cu *c, size_t n)
{
	if (n <= c->cap)
		return 0;
	const struct ncf_shape *s = &be->shape;
	free_rows(c);
	size_t wmax = max_width(s);
	if (DALLOC(c->su, n) || DALLOC(c->si, n) || DALLOC(c->lab, n) || DALLOC(c->dl, n) ||
	    DALLOC(c->loss, n) || DALLOC(c->ku, n) || DALLOC(c->ju, n) || DALLOC(c->ki, n) ||
	    DALLOC(c->ji, n) || DALLOC(c->itmp, n))
		return -1;
	for (uint32_t k = 1; k < s->n_layers; k++)
		if (dalloc_bytes(&c->h[k], n * s->layers[k] * c->es) ||
		    dalloc_bytes(&c->d[k], n * s->layers[k] * c->es))
			return -1;
#ifndef NCF_CUDA_EMULATE
	c->rows_gen++; /* graphs captured on the old buffers are stale */
#endif
	size_t seg = seg_scratch(n, wmax);
	if (DALLOC(c->seg_head, seg) || DALLOC(c->seg_tail, seg) || DALLOC(c->dred, sum_scratch(n)))
		return -1;
	size_t bu, bi;
	if (sort_temp_bytes(n, id_bits(s->users), &bu) || sort_temp_bytes(n, id_bits(s->items), &bi))
		return -1;
	c->sort_tmp_bytes = bu > bi ? bu : bi;
	if (dalloc_bytes(&c->sort_tmp, c->sort_tmp_bytes))
		return -1;
	size_t red = colsum_scratch(n, wmax);
	size_t hg = head_grad_scratch(n, s->factors, ncf_shape_last(s));
	if (hg > red)
		red = hg;
	if (grow_red(c, red))
		return -1;
	c->cap = n;
	return 0;
}

/* ---- GEMMs, row-major ------------------------------------------------- */

/* C (m, n) = op(A) op(B) + beta C in cuBLAS's column-major terms. */
static int gemm(struct cu *c, cublasOperation_t ta, cublasOperation_t tb, size_t m, size_t n,
		size_t k, const void *A, cudaDataType at, size_t lda, const void *B,
		cudaDataType bt, size_t ldb, void *C, cudaDataType ct, size_t ldc)
{
	if (m == 0 || n == 0)
		return 0;
	if (m > 0x7FFFFFFF || n > 0x7FFFFFFF || k > 0x7FFFFFFF || lda > 0x7FFFFFFF ||
	    ldb > 0x7FFFFFFF || ldc > 0x7FFFFFFF) {
		ncf_error("cuda backend: a matrix of %zu x %zu x %zu is too large for cuBLAS", m, n,
			  k);
		return -1;
	}
	cublasComputeType_t ctype =
		at == CUDA_R_32F && bt == CUDA_R_32F ? c->compute_f32 : CUBLAS_COMPUTE_32F;
	float alpha = 1.0f, beta = 0.0f;
	return CUBLAS_CHECK(cublasGemmEx(c->blas, ta, tb, (int)m, (int)n, (int)k, &alpha, A, at,
					 (int)lda, B, bt, (int)ldb, &beta, C, ct, (int)ldc, ctype,
					 CUBLAS_GEMM_DEFAULT));
}

/* Y (rows, out) = X (rows, in) W^T; W (out, in) with leading dimension ldw. */
static int lin_fwd(struct cu *c, size_t rows, size_t in, size_t out, const void *X,
		   cudaDataType xt, size_t ldx, const void *W, cudaDataType wt, size_t ldw, void *Y,
		   cudaDataType yt, size_t ldy)
{
	return gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, W, wt, ldw, X, xt, ldx, Y, yt, ldy);
}

/* dW (out, in) with leading dimension ldd = dY^T X: dY (rows, out), X (rows, in). */
static int lin_wgrad(struct cu *c, size_t rows, size_t in, size_t out, const void *dY,
		     cudaDataType dt, size_t lddy, const void *X, cudaDataType xt, size_t ldx,
		     float *dW, size_t ldd)
{
	return gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, X, xt, ldx, dY, dt, lddy, dW,
		    CUDA_R_32F, ldd);
}

/* dX (rows, in) = dY (rows, out) W, W (out, in) with leading dimension ldw. */
static int lin_dgrad(struct cu *c, size_t rows, size_t in, size_t out, const void *dY,
		     cudaDataType dt, size_t lddy, const void *W, cudaDataType wt, size_t ldw,
		     void *dX, cudaDataType xt, size_t lddx)
{
	return gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, W, wt, ldw, dY, dt, lddy, dX, xt,
		    lddx);
}

/* ---- forward pieces --------------------------------------------------- */

/* The parameters as the GEMMs read them: params (fp32) or plo. */
template <typename T> static const T *wts(struct cu *c)
{
	return c->act == ACT_F32 ? (const T *)(const void *)c->params : (const T *)c->plo;
}

/* plo up to date, then AU, AI for the current parameters. */
template <typename T> static int make_tables(struct ncf_backend *be, struct cu *c)
{
	if (c->tables_valid)
		return 0;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	size_t M = ncf_shape_m(s), H1 = s->layers[1];
	if (c->act != ACT_F32 && !c->plo_valid) {
		if (cast_cuda<T>(c->params + L->pm, (T *)c->plo + L->pm, L->total - L->pm, c->s))
			return -1;
		c->plo_valid = 1;
	}
	const T *w = wts<T>(c);
	cudaDataType dt = dtype_of<T>();
	if (lin_fwd(c, s->users, M, H1, w + L->pm, dt, M, w + L->w[1], dt, 2 * M, c->AU, dt, H1) ||
	    lin_fwd(c, s->items, M, H1, w + L->qm, dt, M, w + L->w[1] + M, dt, 2 * M, c->AI, dt,
		    H1))
		return -1;
	c->tables_valid = 1;
	return 0;
}

/* Layers 2..L on n rows: h[k] = dropout(relu(h[k-1] W_k^T + b_k)). */
template <typename T>
static int mlp_forward(struct ncf_backend *be, struct cu *c, size_t n, const dropout_k &dk)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const T *w = wts<T>(c);
	cudaDataType dt = dtype_of<T>();
	for (uint32_t k = 2; k < s->n_layers; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		if (lin_fwd(c, n, in, out, c->h[k - 1], dt, in, w + L->w[k], dt, in, c->h[k], dt,
			    out) ||
		    bias_relu_dropout_cuda<T>(n, (uint32_t)out, (T *)c->h[k], c->params + L->b[k], dk,
					      k - 1, c->s))
			return -1;
	}
	return 0;
}

/* Logits of the n pairs in su, si into out (device), no dropout. */
template <typename T>
static int forward_logits(struct ncf_backend *be, struct cu *c, size_t n, float *out)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	dropout_k none;
	memset(&none, 0, sizeof none);
	uint32_t last = s->n_layers - 1;
	if (make_tables<T>(be, c) ||
	    layer1_cuda<T>(n, s->layers[1], c->su, c->si, (const T *)c->AU, (const T *)c->AI,
			   c->params + L->b[1], 1, none, (T *)c->h[1], c->s) ||
	    mlp_forward<T>(be, c, n, none) ||
	    head_logits_cuda<T>(n, s->factors, s->layers[last], c->su, c->si, c->params + L->p,
				c->params + L->q, c->params + L->head_w, (const T *)c->h[last], out,
				c->s))
		return -1;
	return 0;
}

/* ---- the gradient ----------------------------------------------------- */

/*
 * The gradient of the mean loss over positions [first, first + n) of epoch,
 * this rank's slice, times the loss scale, into c->grad; this rank's loss
 * sum into c->loss_dev.  Asynchronous.
 */
template <typename T>
static int compute_grad(struct ncf_backend *be, struct cu *c, uint32_t epoch, uint64_t first,
			uint64_t n)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	if (!c->have_td) {
		ncf_error("cuda backend: no training data");
		return -1;
	}
	uint64_t lo, hi;
	ncf_dist_slice(n, be->dist->rank, be->dist->size, &lo, &hi);
	size_t B = (size_t)(hi - lo);
	uint64_t pos0 = first + lo;
	if (B == 0)
		return CUDA_CHECK(cudaMemsetAsync(c->grad, 0, L->total * sizeof(float), c->s)) ||
				       CUDA_CHECK(cudaMemsetAsync(c->loss_dev, 0, sizeof(double), c->s))
			       ? -1
			       : 0;
	float inv_n = 1.0f / (float)n;
	uint32_t F = s->factors, M = ncf_shape_m(s), H1 = s->layers[1];
	uint32_t last = s->n_layers - 1, HL = s->layers[last];
	uint32_t U = s->users, I = s->items;
	int drop = be->hp.dropout > 0.0f;
	float scale = drop ? 1.0f / (1.0f - be->hp.dropout) : 1.0f;
	dropout_k dk;
	dk.active = drop;
	dk.drop16 = ncf_dropout_threshold(be->hp.dropout);
	dk.scale = scale;
	dk.seed = be->hp.seed;
	dk.epoch = epoch;
	dk.pos0 = pos0;
	cudaDataType dt = dtype_of<T>();
	const float *prm = c->params;
	float *g = c->grad;
	const T *w = wts<T>(c);
	cudaStream_t st = c->s;

	if (ensure_rows(be, c, B))
		return -1;
	mark(c, PH_SAMPLES);
	/* 1. samples; 2. tables */
	uint64_t S = ncf_epoch_check("cuda", c->P, be->hp.negatives, first, n);
	if (S == 0)
		return -1;
	ncf_perm perm = ncf_perm_make(S, be->hp.seed, epoch);
	if (sample_cuda(perm, pos0, B, be->hp.seed, epoch, c->P, I, (int)be->hp.true_neg,
			c->entry_user, c->offsets, c->items_csr, c->su, c->si, c->lab, st))
		return -1;
	mark(c, PH_TABLES);
	if (make_tables<T>(be, c))
		return -1;
	w = wts<T>(c);
	mark(c, PH_FORWARD);
	/* 3. forward, head, backward to dz1 */
	if (layer1_cuda<T>(B, H1, c->su, c->si, (const T *)c->AU, (const T *)c->AI, prm + L->b[1],
			   0, dk, (T *)c->h[1], st) ||
	    mlp_forward<T>(be, c, B, dk))
		return -1;
	mark(c, PH_HEAD);
	if (head_train_cuda<T>(B, F, HL, c->su, c->si, c->lab, prm + L->p, prm + L->q,
			       prm + L->head_w, (const T *)c->h[last], inv_n, c->loss_scale, scale,
			       c->loss, c->dl, (T *)c->d[last], st) ||
	    head_grad_cuda<T>(B, F, HL, c->su, c->si, prm + L->p, prm + L->q, (const T *)c->h[last],
			      c->dl, g + L->head_w, c->red, st))
		return -1;
	mark(c, PH_MLP_BACKWARD);
	for (uint32_t k = last; k >= 2; k--) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		if (lin_wgrad(c, B, in, out, c->d[k], dt, out, c->h[k - 1], dt, in, g + L->w[k], in) ||
		    colsum_cuda<T>((const T *)c->d[k], B, out, g + L->b[k], c->red, st) ||
		    lin_dgrad(c, B, in, out, c->d[k], dt, out, w + L->w[k], dt, in, c->d[k - 1], dt,
			      in) ||
		    relu_dropout_back_cuda<T>(B * in, (T *)c->d[k - 1], (const T *)c->h[k - 1], scale,
					      st))
			return -1;
	}
	/* 4. first layer backward: segment sums by user and by item */
	mark(c, PH_SORT);
	if (sort_by_key_cuda(c->su, B, id_bits(U), c->ku, c->itmp, c->ju, c->sort_tmp,
			     c->sort_tmp_bytes, st) ||
	    sort_by_key_cuda(c->si, B, id_bits(I), c->ki, c->itmp, c->ji, c->sort_tmp,
			     c->sort_tmp_bytes, st))
		return -1;
	mark(c, PH_LAYER1_BACKWARD);
	if (CUDA_CHECK(cudaMemsetAsync(c->dAU, 0, (size_t)U * H1 * sizeof(float), st)) ||
	    CUDA_CHECK(cudaMemsetAsync(c->dAI, 0, (size_t)I * H1 * sizeof(float), st)) ||
	    segsum_rows_cuda<T>(c->ku, c->ju, B, (const T *)c->d[1], H1, c->dAU, c->seg_head,
				c->seg_tail, st) ||
	    segsum_rows_cuda<T>(c->ki, c->ji, B, (const T *)c->d[1], H1, c->dAI, c->seg_head,
				c->seg_tail, st))
		return -1;
	if (grow_red(c, colsum_scratch(U, H1)) ||
	    lin_wgrad(c, U, M, H1, c->dAU, CUDA_R_32F, H1, prm + L->pm, CUDA_R_32F, M, g + L->w[1],
		      2 * (size_t)M) ||
	    lin_wgrad(c, I, M, H1, c->dAI, CUDA_R_32F, H1, prm + L->qm, CUDA_R_32F, M,
		      g + L->w[1] + M, 2 * (size_t)M) ||
	    colsum_cuda<float>(c->dAU, U, H1, g + L->b[1], c->red, st) ||
	    lin_dgrad(c, U, M, H1, c->dAU, CUDA_R_32F, H1, prm + L->w[1], CUDA_R_32F, 2 * (size_t)M,
		      g + L->pm, CUDA_R_32F, M) ||
	    lin_dgrad(c, I, M, H1, c->dAI, CUDA_R_32F, H1, prm + L->w[1] + M, CUDA_R_32F,
		      2 * (size_t)M, g + L->qm, CUDA_R_32F, M))
		return -1;
	/* 5. GMF embeddings; the loss */
	mark(c, PH_GMF_LOSS);
	if (CUDA_CHECK(cudaMemsetAsync(g + L->p, 0, ((size_t)U + I) * F * sizeof(float), st)) ||
	    segsum_gmf_cuda(c->ku, c->ju, B, c->dl, c->si, prm + L->q, prm + L->head_w, F, g + L->p,
			    c->seg_head, c->seg_tail, st) ||
	    segsum_gmf_cuda(c->ki, c->ji, B, c->dl, c->su, prm + L->p, prm + L->head_w, F, g + L->q,
			    c->seg_head, c->seg_tail, st) ||
	    sum_f64_cuda(c->loss, B, c->loss_dev, c->dred, st))
		return -1;
	return 0;
}

static int compute_grad_any(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n)
{
	struct cu *c = impl(be);
	switch (c->act) {
	case ACT_BF16:
		return compute_grad<bf16>(be, c, epoch, first, n);
	case ACT_F16:
		return compute_grad<f16>(be, c, epoch, first, n);
	default:
		return compute_grad<float>(be, c, epoch, first, n);
	}
}

static int forward_logits_any(struct ncf_backend *be, struct cu *c, size_t n, float *out)
{
	switch (c->act) {
	case ACT_BF16:
		return forward_logits<bf16>(be, c, n, out);
	case ACT_F16:
		return forward_logits<f16>(be, c, n, out);
	default:
		return forward_logits<float>(be, c, n, out);
	}
}

/* ---- the interface ---------------------------------------------------- */

static void cuda_free(struct ncf_backend *be)
{
	struct cu *c = impl(be);
	if (!c)
		return;
	if (c->have_stream)
		cudaStreamSynchronize(c->s);
	if (c->prof) {
		if (c->prof_steps) {
			double tot = 0;
			for (int k = 0; k < PH_N; k++)
				tot += c->prof_ms[k];
			fprintf(stderr, "cuda profile (%s, %llu steps): ms per step\n",
				ncf_precision_name(be->precision), (unsigned long long)c->prof_steps);
			for (int k = 0; k < PH_N; k++)
				fprintf(stderr, "cuda profile: %-16s %8.3f  %5.1f%%\n", ph_name[k],
					c->prof_ms[k] / (double)c->prof_steps,
					tot > 0 ? 100.0 * c->prof_ms[k] / tot : 0.0);
			fprintf(stderr, "cuda profile: %-16s %8.3f\n", "total",
				tot / (double)c->prof_steps);
		}
		for (int k = 0; k <= PH_N; k++)
			cudaEventDestroy(c->ev[k]);
	}
#ifndef NCF_CUDA_EMULATE
	for (int g = 0; g < GRAPH_SLOTS; g++)
		if (c->graphs[g].n)
			cudaGraphExecDestroy(c->graphs[g].exec);
	if (c->pin_u)
		cudaFreeHost(c->pin_u);
	if (c->pin_i)
		cudaFreeHost(c->pin_i);
	if (c->pin_out)
		cudaFreeHost(c->pin_out);
	dfree(c->blas_ws);
#endif
	free_rows(c);
	dfree(c->params), dfree(c->m), dfree(c->v), dfree(c->grad), dfree(c->plo);
	dfree(c->AU), dfree(c->AI), dfree(c->dAU), dfree(c->dAI);
	dfree(c->entry_user), dfree(c->items_csr), dfree(c->offsets);
	dfree(c->test), dfree(c->neg), dfree(c->counted);
	dfree(c->red), dfree(c->loss_dev), dfree(c->flag), dfree(c->ranks);
#ifdef NCF_HAVE_NCCL
	if (c->have_comm)
		ncclCommDestroy(c->comm);
#endif
	if (c->have_blas)
		cublasDestroy(c->blas);
	if (c->have_stream)
		cudaStreamDestroy(c->s);
	free(c);
	be->impl = NULL;
}

static int cuda_init(struct ncf_backend *be)
{
	struct cu *c = (struct cu *)ncf_xcalloc(1, sizeof *c);
	be->impl = c;
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	int count = 0;
	if (CUDA_CHECK(cudaGetDeviceCount(&count)))
		return -1;
	if (count < 1) {
		ncf_error("cuda backend: no CUDA device");
		return -1;
	}
	int lr = be->dist->local_rank > 0 ? be->dist->local_rank : 0;
	c->dev = lr % count;
	if (CUDA_CHECK(cudaSetDevice(c->dev)) ||
	    CUDA_CHECK(cudaGetDeviceProperties(&c->prop, c->dev)))
		return -1;
	int ampere = c->prop.major >= 8; /* TF32 and bf16 tensor cores */
	enum ncf_precision p = be->precision;
	if (p == NCF_PRECISION_DEFAULT)
		p = ampere ? NCF_PRECISION_TF32 : NCF_PRECISION_FP32;
	if ((p == NCF_PRECISION_TF32 || p == NCF_PRECISION_BF16) && !ampere) {
		ncf_error("--precision %s needs a GPU of compute capability 8.0 or newer; %s is %d.%d",
			  ncf_precision_name(p), c->prop.name, c->prop.major, c->prop.minor);
		return -3; /* a feature the device lacks: exit 3 */
	}
	be->precision = p;
	c->act = p == NCF_PRECISION_BF16 ? ACT_BF16 : p == NCF_PRECISION_FP16 ? ACT_F16 : ACT_F32;
	c->es = c->act == ACT_F32 ? 4 : 2;
	c->compute_f32 = p == NCF_PRECISION_FP32 || !ampere ? CUBLAS_COMPUTE_32F
							     : CUBLAS_COMPUTE_32F_FAST_TF32;
	if (CUDA_CHECK(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking)))
		return -1;
	c->have_stream = 1;
	if (CUBLAS_CHECK(cublasCreate(&c->blas)))
		return -1;
	c->have_blas = 1;
	if (CUBLAS_CHECK(cublasSetStream(c->blas, c->s)) ||
	    CUBLAS_CHECK(cublasSetMathMode(c->blas, p == NCF_PRECISION_FP32
							    ? CUBLAS_DEFAULT_MATH
							    : CUBLAS_TF32_TENSOR_OP_MATH)))
		return -1;
#ifndef NCF_CUDA_EMULATE
	/* a workspace of our own: cuBLAS must not allocate while a graph is
	 * being captured */
	if (dalloc_bytes(&c->blas_ws, BLAS_WORKSPACE) ||
	    CUBLAS_CHECK(cublasSetWorkspace(c->blas, c->blas_ws, BLAS_WORKSPACE)))
		return -1;
#endif
	size_t total = L->total, H1 = s->layers[1];
	if (DALLOC(c->params, total) || DALLOC(c->m, total) || DALLOC(c->v, total) ||
	    DALLOC(c->grad, total) || dalloc_bytes(&c->AU, (size_t)s->users * H1 * c->es) ||
	    dalloc_bytes(&c->AI, (size_t)s->items * H1 * c->es) ||
	    DALLOC(c->dAU, (size_t)s->users * H1) || DALLOC(c->dAI, (size_t)s->items * H1) ||
	    DALLOC(c->loss_dev, 1) || DALLOC(c->flag, 1))
		return -1;
	if (c->act != ACT_F32 && dalloc_bytes(&c->plo, total * c->es))
		return -1;
	if (CUDA_CHECK(cudaMemsetAsync(c->params, 0, total * sizeof(float), c->s)) ||
	    CUDA_CHECK(cudaMemsetAsync(c->m, 0, total * sizeof(float), c->s)) ||
	    CUDA_CHECK(cudaMemsetAsync(c->v, 0, total * sizeof(float), c->s)))
		return -1;
	c->loss_scale = c->act == ACT_F16 ? 32768.0f : 1.0f;
	c->growth_interval = 2000;
	const char *pe = getenv("NCF_CUDA_PROFILE");
	if (pe && *pe && strcmp(pe, "0")) {
		for (int k = 0; k <= PH_N; k++)
			if (CUDA_CHECK(cudaEventCreate(&c->ev[k])))
				return -1;
		c->prof = 1;
	}
	return 0;
}

static int cuda_set_state(struct ncf_backend *be, const float *params, const float *m,
			  const float *v)
{
	struct cu *c = impl(be);
	size_t n = be->layout.total * sizeof(float);
	c->plo_valid = c->tables_valid = 0;
	if (CUDA_CHECK(cudaMemcpyAsync(c->params, params, n, cudaMemcpyHostToDevice, c->s)) ||
	    (m ? CUDA_CHECK(cudaMemcpyAsync(c->m, m, n, cudaMemcpyHostToDevice, c->s))
	       : CUDA_CHECK(cudaMemsetAsync(c->m, 0, n, c->s))) ||
	    (v ? CUDA_CHECK(cudaMemcpyAsync(c->v, v, n, cudaMemcpyHostToDevice, c->s))
	       : CUDA_CHECK(cudaMemsetAsync(c->v, 0, n, c->s))))
		return -1;
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

static int cuda_get_state(struct ncf_backend *be, float *params, float *m, float *v)
{
	struct cu *c = impl(be);
	size_t n = be->layout.total * sizeof(float);
	if ((params &&
	     CUDA_CHECK(cudaMemcpyAsync(params, c->params, n, cudaMemcpyDeviceToHost, c->s))) ||
	    (m && CUDA_CHECK(cudaMemcpyAsync(m, c->m, n, cudaMemcpyDeviceToHost, c->s))) ||
	    (v && CUDA_CHECK(cudaMemcpyAsync(v, c->v, n, cudaMemcpyDeviceToHost, c->s))))
		return -1;
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

/* A device copy of n elements of host array x into *dst (freed first). */
template <typename X> static int upload(X **dst, const X *x, size_t n, cudaStream_t s)
{
	dfree(*dst);
	if (DALLOC(*dst, n))
		return -1;
	return n ? CUDA_CHECK(cudaMemcpyAsync(*dst, x, n * sizeof *x, cudaMemcpyHostToDevice, s))
		 : 0;
}

static int cuda_set_train_data(struct ncf_backend *be, const struct ncf_train_data *d)
{
	struct cu *c = impl(be);
	if (d->users != be->shape.users || d->items != be->shape.items) {
		ncf_error("cuda backend: training data of %u users, %u items for a model of %u, %u",
			  d->users, d->items, be->shape.users, be->shape.items);
		return -1;
	}
	c->have_td = 0;
	size_t P = (size_t)d->positives;
	if (upload(&c->offsets, d->offsets, (size_t)d->users + 1, c->s) ||
	    upload(&c->items_csr, d->items_csr, P, c->s) ||
	    upload(&c->entry_user, d->entry_user, P, c->s) ||
	    CUDA_CHECK(cudaStreamSynchronize(c->s)))
		return -1;
	c->P = d->positives;
	c->have_td = 1;
	return 0;
}

static int cuda_set_eval_data(struct ncf_backend *be, const struct ncf_eval_data *d)
{
	struct cu *c = impl(be);
	if (d->users != be->shape.users) {
		ncf_error("cuda backend: evaluation data of %u users for a model of %u", d->users,
			  be->shape.users);
		return -1;
	}
	c->have_ed = 0;
	size_t UN = (size_t)d->users * d->negatives;
	if (upload(&c->test, d->test_items, d->users, c->s) || upload(&c->neg, d->neg, UN, c->s) ||
	    upload(&c->counted, d->counted, UN, c->s) || CUDA_CHECK(cudaStreamSynchronize(c->s)))
		return -1;
	c->N = d->negatives;
	c->have_ed = 1;
	return 0;
}

static int cuda_train_step(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			   double *loss_sum)
{
	struct cu *c = impl(be);
	size_t total = be->layout.total;
	*loss_sum = 0;
	c->prof_marked = 0;
	if (compute_grad_any(be, epoch, first, n))
		return -1;
	mark(c, PH_ALLREDUCE_ADAM);
	if (ncf_cuda_allreduce(be, c->grad, total))
		return -1;
	const int *skip = NULL;
	if (c->act == ACT_F16) {
		if (CUDA_CHECK(cudaMemsetAsync(c->flag, 0, sizeof(int), c->s)) ||
		    nonfinite_cuda(c->grad, total, c->flag, c->s))
			return -1;
		skip = c->flag;
	}
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, be->step + 1, &k);
	double loss = 0;
	int bad = 0;
	if (adam_cuda(c->params, c->m, c->v, c->grad, total, k, 1.0f / c->loss_scale, skip, c->s))
		return -1;
	mark(c, PH_N);
	if (CUDA_CHECK(cudaMemcpyAsync(&loss, c->loss_dev, sizeof loss, cudaMemcpyDeviceToHost,
				       c->s)) ||
	    (skip && CUDA_CHECK(cudaMemcpyAsync(&bad, c->flag, sizeof bad, cudaMemcpyDeviceToHost,
						c->s))) ||
	    CUDA_CHECK(cudaStreamSynchronize(c->s)))
		return -1;
	prof_collect(c);
	c->plo_valid = c->tables_valid = 0;
	*loss_sum = loss;
	if (bad) { /* the step was skipped */
		c->loss_scale *= 0.5f;
		c->good_steps = 0;
		ncf_debug("fp16: inf/NaN gradient at epoch %u, position %llu: step skipped, loss "
			  "scale now %g",
			  epoch + 1, (unsigned long long)first, (double)c->loss_scale);
		return 0;
	}
	be->step++;
	if (c->act == ACT_F16 && ++c->good_steps >= c->growth_interval) {
		c->loss_scale *= 2.0f;
		c->good_steps = 0;
	}
	return 0;
}

static int cuda_grad(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
		     float *grad, double *loss_sum)
{
	struct cu *c = impl(be);
	size_t total = be->layout.total;
	double loss = 0;
	if (compute_grad_any(be, epoch, first, n) ||
	    CUDA_CHECK(cudaMemcpyAsync(grad, c->grad, total * sizeof(float), cudaMemcpyDeviceToHost,
				       c->s)) ||
	    CUDA_CHECK(cudaMemcpyAsync(&loss, c->loss_dev, sizeof loss, cudaMemcpyDeviceToHost,
				       c->s)) ||
	    CUDA_CHECK(cudaStreamSynchronize(c->s)))
		return -1;
	if (c->loss_scale != 1.0f) {
		float inv = 1.0f / c->loss_scale;
		for (size_t j = 0; j < total; j++)
			grad[j] *= inv;
	}
	*loss_sum = loss;
	return 0;
}

static int cuda_eval_ranks(struct ncf_backend *be, uint32_t u0, uint32_t u1, uint32_t *ranks)
{
	struct cu *c = impl(be);
	if (!c->have_ed) {
		ncf_error("cuda backend: no evaluation data");
		return -1;
	}
	if (u1 <= u0)
		return 0;
	size_t per = (size_t)c->N + 1, nusers = u1 - u0;
	size_t upc = EVAL_CHUNK / per ? EVAL_CHUNK / per : 1;
	if (upc > nusers)
		upc = nusers;
	if (ensure_rows(be, c, upc * per))
		return -1;
	if (nusers > c->ranks_cap) {
		dfree(c->ranks);
		c->ranks_cap = 0;
		if (DALLOC(c->ranks, nusers))
			return -1;
		c->ranks_cap = nusers;
	}
	for (size_t a = u0; a < u1; a += upc) {
		uint32_t nb = (uint32_t)(u1 - a < upc ? u1 - a : upc);
		if (eval_pairs_cuda((uint32_t)a, nb, c->N, c->test, c->neg, c->su, c->si, c->s) ||
		    forward_logits_any(be, c, (size_t)nb * per, c->dl) ||
		    rank_cuda(c->dl, c->counted, (uint32_t)a, nb, c->N, c->ranks + (a - u0), c->s))
			return -1;
	}
	if (CUDA_CHECK(cudaMemcpyAsync(ranks, c->ranks, nusers * sizeof *ranks,
				       cudaMemcpyDeviceToHost, c->s)) ||
	    CUDA_CHECK(cudaStreamSynchronize(c->s)))
		return -1;
	return 0;
}

#ifndef NCF_CUDA_EMULATE
/*
 * Logits of n <= GRAPH_MAX pairs through a CUDA graph captured for this n
 * (on its first use): host ids -> pinned staging -> device, forward,
 * device -> pinned -> out.  The graph reads the first-layer tables but does
 * not make them: while they are stale (new parameters) the plain path runs
 * and rebuilds them.  Not under emulation (no graphs there).  Returns 0, 1 when the caller should take the
 * plain path, -1 on a CUDA error.
 */
static int score_graph(struct ncf_backend *be, struct cu *c, const uint32_t *users,
		       const uint32_t *items, size_t n, float *out)
{
	if (c->graphs_off || n == 0 || n > GRAPH_MAX || !c->tables_valid ||
	    (c->act != ACT_F32 && !c->plo_valid))
		return 1;
	if (!c->pin_u) {
		if (CUDA_CHECK(cudaMallocHost((void **)&c->pin_u, GRAPH_MAX * sizeof(uint32_t))) ||
		    CUDA_CHECK(cudaMallocHost((void **)&c->pin_i, GRAPH_MAX * sizeof(uint32_t))) ||
		    CUDA_CHECK(cudaMallocHost((void **)&c->pin_out, GRAPH_MAX * sizeof(float))))
			return -1;
	}
	if (ensure_rows(be, c, GRAPH_MAX))
		return -1;
	int slot = -1, free_slot = -1;
	for (int g = 0; g < GRAPH_SLOTS; g++) {
		if (c->graphs[g].n == n && c->graphs[g].rows_gen == c->rows_gen)
			slot = g;
		if (free_slot < 0 && (c->graphs[g].n == 0 || c->graphs[g].rows_gen != c->rows_gen))
			free_slot = g;
	}
	if (slot < 0) {
		if (free_slot < 0)
			free_slot = (int)(n % GRAPH_SLOTS); /* evict one */
		if (c->graphs[free_slot].n) {
			cudaGraphExecDestroy(c->graphs[free_slot].exec);
			c->graphs[free_slot].n = 0;
		}
		cudaGraph_t graph;
		if (cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
			goto give_up;
		int bad = cudaMemcpyAsync(c->su, c->pin_u, n * sizeof(uint32_t),
					  cudaMemcpyHostToDevice, c->s) != cudaSuccess ||
			  cudaMemcpyAsync(c->si, c->pin_i, n * sizeof(uint32_t),
					  cudaMemcpyHostToDevice, c->s) != cudaSuccess ||
			  forward_logits_any(be, c, n, c->dl) != 0 ||
			  cudaMemcpyAsync(c->pin_out, c->dl, n * sizeof(float),
					  cudaMemcpyDeviceToHost, c->s) != cudaSuccess;
		if (cudaStreamEndCapture(c->s, &graph) != cudaSuccess)
			goto give_up;
		if (bad) {
			cudaGraphDestroy(graph);
			goto give_up;
		}
		cudaError_t e = cudaGraphInstantiate(&c->graphs[free_slot].exec, graph, 0);
		cudaGraphDestroy(graph);
		if (e != cudaSuccess)
			goto give_up;
		c->graphs[free_slot].n = n;
		c->graphs[free_slot].rows_gen = c->rows_gen;
		slot = free_slot;
	}
	memcpy(c->pin_u, users, n * sizeof(uint32_t));
	memcpy(c->pin_i, items, n * sizeof(uint32_t));
	if (CUDA_CHECK(cudaGraphLaunch(c->graphs[slot].exec, c->s)) ||
	    CUDA_CHECK(cudaStreamSynchronize(c->s)))
		return -1;
	memcpy(out, c->pin_out, n * sizeof(float));
	return 0;
give_up:
	/* capture is an optimization: say why once and go on without it */
	ncf_debug("cuda backend: no CUDA graphs for scoring (%s); plain launches",
		  cudaGetErrorString(cudaGetLastError()));
	c->graphs_off = 1;
	return 1;
}
#endif

static int cuda_logits(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		       size_t n, float *out)
{
	struct cu *c = impl(be);
	for (size_t j = 0; j < n; j++)
		if (users[j] >= be->shape.users || items[j] >= be->shape.items) {
			ncf_error("cuda backend: pair %zu (user %u, item %u) is outside the model "
				  "(%u users, %u items)",
				  j, users[j], items[j], be->shape.users, be->shape.items);
			return -1;
		}
	size_t chunk = n < EVAL_CHUNK ? n : EVAL_CHUNK;
	if (n == 0)
		return 0;
#ifndef NCF_CUDA_EMULATE
	int g = score_graph(be, c, users, items, n, out);
	if (g <= 0)
		return g;
#endif
	if (ensure_rows(be, c, chunk))
		return -1;
	for (size_t o = 0; o < n; o += chunk) {
		size_t k = n - o < chunk ? n - o : chunk;
		if (CUDA_CHECK(cudaMemcpyAsync(c->su, users + o, k * sizeof *users,
					       cudaMemcpyHostToDevice, c->s)) ||
		    CUDA_CHECK(cudaMemcpyAsync(c->si, items + o, k * sizeof *items,
					       cudaMemcpyHostToDevice, c->s)) ||
		    forward_logits_any(be, c, k, c->dl) ||
		    CUDA_CHECK(cudaMemcpyAsync(out + o, c->dl, k * sizeof *out,
					       cudaMemcpyDeviceToHost, c->s)) ||
		    CUDA_CHECK(cudaStreamSynchronize(c->s)))
			return -1;
	}
	return 0;
}

static int cuda_score(struct ncf_backend *be, const uint32_t *users, const uint32_t *items,
		      size_t n, float *out)
{
	if (cuda_logits(be, users, items, n, out))
		return -1;
	for (size_t j = 0; j < n; j++)
		out[j] = ncf_sigmoid(out[j]);
	return 0;
}

static int cuda_sync(struct ncf_backend *be)
{
	return CUDA_CHECK(cudaStreamSynchronize(impl(be)->s));
}

static void cuda_describe(struct ncf_backend *be, FILE *out)
{
	struct cu *c = impl(be);
	fprintf(out, "device\tcuda:%d %s, compute capability %d.%d, %.1f GiB\n", c->dev,
		c->prop.name, c->prop.major, c->prop.minor,
		(double)c->prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
	fprintf(out, "precision\t%s\n", ncf_precision_name(be->precision));
}

} /* namespace NCF_CUDA_NS */

using namespace NCF_CUDA_NS;

/* ---- exported ----------------------------------------------------------- */

const struct ncf_backend_i ncf_backend_cuda = {
	"cuda",			/* name */
	NCF_DEVICE_CUDA,	/* device */
	cuda_init,		/* init */
	cuda_free,		/* free */
	cuda_set_state,		/* set_state */
	cuda_get_state,		/* get_state */
	cuda_set_train_data,	/* set_train_data */
	cuda_set_eval_data,	/* set_eval_data */
	cuda_train_step,	/* train_step */
	cuda_grad,		/* grad */
	cuda_eval_ranks,	/* eval_ranks */
	cuda_score,		/* score */
	cuda_logits,		/* logits */
	cuda_sync,		/* sync */
	cuda_describe,		/* describe */
};

int ncf_cuda_usable(char *why, size_t len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(why, len, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
		cudaGetLastError();
		return 0;
	}
	if (n < 1) {
		snprintf(why, len, "no CUDA device found");
		return 0;
	}
	cudaDeviceProp p;
	e = cudaGetDeviceProperties(&p, 0);
	if (e != cudaSuccess) {
		snprintf(why, len, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
		cudaGetLastError();
		return 0;
	}
	if (p.major < 8) {
		snprintf(why, len,
			 "%s has compute capability %d.%d; this build has code for 8.0 and newer",
			 p.name, p.major, p.minor);
		return 0;
	}
	return 1;
}

void ncf_cuda_describe_versions(FILE *out)
{
#ifdef NCF_CUDA_EMULATE
	fprintf(out, "cuda\tCPU emulation (NCF_CUDA_EMULATE)\n");
#else
	int rt = 0, drv = 0;
	if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
		fprintf(out, "cuda runtime\t%d.%d\n", rt / 1000, rt % 1000 / 10);
	if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0)
		fprintf(out, "cuda driver\t%d.%d\n", drv / 1000, drv % 1000 / 10);
	else
		fprintf(out, "cuda driver\tnone\n");
	int maj = 0, min = 0, pat = 0;
	if (cublasGetProperty(MAJOR_VERSION, &maj) == CUBLAS_STATUS_SUCCESS &&
	    cublasGetProperty(MINOR_VERSION, &min) == CUBLAS_STATUS_SUCCESS &&
	    cublasGetProperty(PATCH_LEVEL, &pat) == CUBLAS_STATUS_SUCCESS)
		fprintf(out, "cublas\t%d.%d.%d\n", maj, min, pat);
	size_t lt = cublasLtGetVersion();
	fprintf(out, "cublaslt\t%zu.%zu.%zu\n", lt / 10000, lt / 100 % 100, lt % 100);
#ifdef NCF_HAVE_NCCL
	int nv = 0;
	if (ncclGetVersion(&nv) == ncclSuccess)
		fprintf(out, "nccl\t%d.%d.%d\n", nv / 10000, nv % 10000 / 100, nv % 100);
#endif
	char why[256];
	if (!ncf_cuda_usable(why, sizeof why)) {
		fprintf(out, "gpu\tno usable GPU: %s\n", why);
		return;
	}
	int count = 0;
	cudaGetDeviceCount(&count);
	for (int d = 0; d < count; d++) {
		cudaDeviceProp p;
		if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
			continue;
		fprintf(out, "gpu\t%d: %s, compute capability %d.%d, %.1f GiB, %d SMs\n", d, p.name,
			p.major, p.minor, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0),
			p.multiProcessorCount);
	}
#endif
}

int ncf_cuda_allreduce(struct ncf_backend *be, float *dev, size_t count)
{
	struct ncf_dist *d = be->dist;
	if (d->size <= 1 || count == 0)
		return 0;
#ifdef NCF_HAVE_NCCL
	struct cu *c = impl(be);
	if (!c->have_comm) { /* NCCL bootstrapped through MPI, on first use */
		ncclUniqueId id;
		memset(&id, 0, sizeof id);
		if (d->rank == 0 && NCCL_CHECK(ncclGetUniqueId(&id)))
			return -1;
		if (ncf_dist_bcast(d, &id, sizeof id) != 0 ||
		    NCCL_CHECK(ncclCommInitRank(&c->comm, d->size, id, d->rank)))
			return -1;
		c->have_comm = 1;
	}
	return NCCL_CHECK(ncclAllReduce(dev, dev, count, ncclFloat, ncclSum, c->comm, c->s));
#else
	ncf_error("cuda backend: %d ranks need NCCL to sum gradients across GPUs, and this build "
		  "has none (rebuild where NCCL is installed)",
		  d->size);
	return -1;
#endif
}

void ncf_cuda_set_loss_scale(struct ncf_backend *be, float scale, uint32_t growth_interval)
{
	struct cu *c = impl(be);
	c->loss_scale = scale;
	c->growth_interval = growth_interval ? growth_interval : 1;
	c->good_steps = 0;
}

float ncf_cuda_loss_scale(const struct ncf_backend *be)
{
	return impl(be)->loss_scale;
}

/*
 * Dense matrix FLOP per SM per clock by architecture and precision (NVIDIA's
 * datasheets: A100 312 TFLOP/s bf16 at 1.41 GHz on 108 SMs = 2048, TF32
 * 1024, fp32 FMA 128; H100/H200 SXM 989 TFLOP/s bf16 at 1.83 GHz on 132 SMs
 * = 4096, TF32 2048, fp32 256).  Other architectures: unknown (0).
 */
static double matrix_per_sm_clock(int major, int minor, enum ncf_precision p)
{
	double bf = 0;
	if (major == 8 && minor == 0)
		bf = 2048;
	else if (major == 9)
		bf = 4096;
	if (bf == 0)
		return 0;
	switch (p) {
	case NCF_PRECISION_BF16:
	case NCF_PRECISION_FP16:
		return bf;
	case NCF_PRECISION_TF32:
		return bf / 2;
	default:
		return major == 9 ? 256 : 128;
	}
}

int ncf_cuda_peak_rates(const struct ncf_backend *be, struct ncf_cuda_peak *pk)
{
	struct cu *c = impl(be);
	memset(pk, 0, sizeof *pk);
	snprintf(pk->name, sizeof pk->name, "%s", c->prop.name);
	pk->cc_major = c->prop.major;
	pk->cc_minor = c->prop.minor;
	pk->sms = c->prop.multiProcessorCount;
	int clock_khz = 0, mem_khz = 0, bus = 0;
	if (CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, c->dev)) ||
	    CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, c->dev)) ||
	    CUDA_CHECK(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, c->dev)))
		return -1;
	pk->clock_hz = clock_khz * 1e3;
	pk->mem_bytes_s = 2.0 * mem_khz * 1e3 * (bus / 8.0); /* double data rate */
	double per = matrix_per_sm_clock(pk->cc_major, pk->cc_minor, be->precision);
	pk->matrix_flops = per * pk->sms * pk->clock_hz;
	pk->matrix_source = per > 0 ? "datasheet FLOP/SM/clock x SMs x boost clock"
				    : "unknown for this GPU";
	return 0;
}

void ncf_cuda_step_cost(const struct ncf_backend *be, uint64_t n_, double *bytes, double *flops)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	struct cu *c = impl(be);
	double es = (double)c->es, n = (double)n_, U = s->users, I = s->items, F = s->factors;
	double M = ncf_shape_m(s), H1 = s->layers[1], HL = ncf_shape_last(s);
	double b = 0, f = 0;
	b += n * 25;					   /* samples: ids, labels, CSR reads */
	if (c->act != ACT_F32)
		b += (double)(L->total - L->pm) * (4 + es); /* 16-bit copy */
	b += (U + I) * (M + H1) * es;			   /* tables */
	f += 2 * (U + I) * M * H1;
	b += n * (8 + 3 * H1 * es); /* layer 1 */
	for (uint32_t k = 2; k < s->n_layers; k++) {
		double in = s->layers[k - 1], out = s->layers[k];
		b += n * (in + out) * es + 2 * n * out * es;	 /* GEMM, bias+ReLU+dropout */
		b += 2 * n * (in + out) * es + n * out * es;	 /* dW, dX GEMMs, bias grad */
		b += 3 * n * in * es;				 /* ReLU/dropout backward */
		f += 3 * 2 * n * in * out;
	}
	b += n * (2 * F * 4 + 2 * HL * es + 17); /* head */
	b += n * (2 * F * 4 + HL * es + 12);	 /* head gradient */
	b += 2 * 3 * 16 * n;			 /* two radix sorts, ~3 passes of 16 bytes */
	b += 2 * n * (8 + H1 * es) + 2 * (U + I) * H1 * 4; /* segment sums, clear */
	b += 2 * (U + I) * (H1 + M) * 4 + U * H1 * 4;	   /* first-layer backward */
	f += 2 * 2 * (U + I) * M * H1;
	b += (U + I) * F * 4 * 2 + 2 * n * (12 + F * 4); /* GMF */
	b += (double)L->total * 28;			  /* Adam */
	*bytes = b;
	*flops = f;
}

void ncf_cuda_eval_cost(const struct ncf_backend *be, uint64_t pairs, double *bytes,
			double *flops)
{
	const struct ncf_shape *s = &be->shape;
	struct cu *c = impl(be);
	double es = (double)c->es, n = (double)pairs, F = s->factors, H1 = s->layers[1];
	double HL = ncf_shape_last(s), b = n * (8 + 8 + 3 * H1 * es), f = 0;
	for (uint32_t k = 2; k < s->n_layers; k++) {
		double in = s->layers[k - 1], out = s->layers[k];
		b += n * (in + out) * es + 2 * n * out * es;
		f += 2 * n * in * out;
	}
	b += n * (2 * F * 4 + HL * es + 4) + n * 5;
	*bytes = b;
	*flops = f;
}

int ncf_cuda_debug_samples(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n,
			   uint32_t *users, uint32_t *items, uint8_t *labels)
{
	struct cu *c = impl(be);
	if (!c->have_td) {
		ncf_error("cuda backend: no training data");
		return -1;
	}
	uint32_t *su = NULL, *si = NULL;
	uint8_t *lab = NULL;
	uint64_t S = ncf_epoch_check("cuda", c->P, be->hp.negatives, first, n);
	if (S == 0)
		return -1;
	ncf_perm perm = ncf_perm_make(S, be->hp.seed, epoch);
	int rc = DALLOC(su, n) || DALLOC(si, n) || DALLOC(lab, n) ||
		 sample_cuda(perm, first, n, be->hp.seed, epoch, c->P, be->shape.items,
			     (int)be->hp.true_neg, c->entry_user, c->offsets, c->items_csr, su, si,
			     lab, c->s) ||
		 CUDA_CHECK(cudaMemcpyAsync(users, su, n * 4, cudaMemcpyDeviceToHost, c->s)) ||
		 CUDA_CHECK(cudaMemcpyAsync(items, si, n * 4, cudaMemcpyDeviceToHost, c->s)) ||
		 CUDA_CHECK(cudaMemcpyAsync(labels, lab, n, cudaMemcpyDeviceToHost, c->s)) ||
		 CUDA_CHECK(cudaStreamSynchronize(c->s));
	dfree(su), dfree(si), dfree(lab);
	return rc ? -1 : 0;
}

int ncf_cuda_debug_dropout(struct ncf_backend *be, uint32_t epoch, uint64_t pos0, uint32_t layer,
			   size_t n, uint32_t H, const float *z, float *out)
{
	struct cu *c = impl(be);
	float *dz = NULL, *b = NULL;
	dropout_k dk;
	dk.active = be->hp.dropout > 0.0f;
	dk.drop16 = ncf_dropout_threshold(be->hp.dropout);
	dk.scale = dk.active ? 1.0f / (1.0f - be->hp.dropout) : 1.0f;
	dk.seed = be->hp.seed;
	dk.epoch = epoch;
	dk.pos0 = pos0;
	size_t nh = n * H;
	int rc = DALLOC(dz, nh) || DALLOC(b, H) ||
		 CUDA_CHECK(cudaMemsetAsync(b, 0, (size_t)H * sizeof(float), c->s)) ||
		 CUDA_CHECK(cudaMemcpyAsync(dz, z, nh * sizeof(float), cudaMemcpyHostToDevice,
					    c->s)) ||
		 bias_relu_dropout_cuda<float>(n, H, dz, b, dk, layer, c->s) ||
		 CUDA_CHECK(cudaMemcpyAsync(out, dz, nh * sizeof(float), cudaMemcpyDeviceToHost,
					    c->s)) ||
		 CUDA_CHECK(cudaStreamSynchronize(c->s));
	dfree(dz), dfree(b);
	return rc ? -1 : 0;
}

int ncf_cuda_debug_adam(struct ncf_backend *be, float *p, float *m, float *v, const float *g,
			size_t n, uint64_t step)
{
	struct cu *c = impl(be);
	float *x[4] = {NULL, NULL, NULL, NULL};
	const float *host[4] = {p, m, v, g};
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, step, &k);
	int rc = 0;
	for (int i = 0; i < 4 && !rc; i++)
		rc = DALLOC(x[i], n) ||
		     CUDA_CHECK(cudaMemcpyAsync(x[i], host[i], n * sizeof(float),
						cudaMemcpyHostToDevice, c->s));
	rc = rc || adam_cuda(x[0], x[1], x[2], x[3], n, k, 1.0f, NULL, c->s);
	float *back[3] = {p, m, v};
	for (int i = 0; i < 3 && !rc; i++)
		rc = CUDA_CHECK(cudaMemcpyAsync(back[i], x[i], n * sizeof(float),
						cudaMemcpyDeviceToHost, c->s));
	rc = rc || CUDA_CHECK(cudaStreamSynchronize(c->s));
	for (int i = 0; i < 4; i++)
		dfree(x[i]);
	return rc ? -1 : 0;
}

int ncf_cuda_debug_segsum(struct ncf_backend *be, const uint32_t *keys, size_t n, uint32_t K,
			  const float *src, uint32_t H, float *out)
{
	struct cu *c = impl(be);
	uint32_t *k = NULL, *ks = NULL, *tmp = NULL, *idx = NULL;
	float *x = NULL, *o = NULL, *head = NULL, *tail = NULL;
	void *temp = NULL;
	size_t tb = 0;
	int bits = id_bits(K);
	int rc = DALLOC(k, n) || DALLOC(ks, n) || DALLOC(tmp, n) || DALLOC(idx, n) ||
		 DALLOC(x, n * H) || DALLOC(o, (size_t)K * H) || DALLOC(head, seg_scratch(n, H)) ||
		 DALLOC(tail, seg_scratch(n, H)) || sort_temp_bytes(n, bits, &tb) ||
		 dalloc_bytes(&temp, tb) ||
		 CUDA_CHECK(cudaMemcpyAsync(k, keys, n * 4, cudaMemcpyHostToDevice, c->s)) ||
		 CUDA_CHECK(cudaMemcpyAsync(x, src, n * H * sizeof(float), cudaMemcpyHostToDevice,
					    c->s)) ||
		 CUDA_CHECK(cudaMemsetAsync(o, 0, (size_t)K * H * sizeof(float), c->s)) ||
		 sort_by_key_cuda(k, n, bits, ks, tmp, idx, temp, tb, c->s) ||
		 segsum_rows_cuda<float>(ks, idx, n, x, H, o, head, tail, c->s) ||
		 CUDA_CHECK(cudaMemcpyAsync(out, o, (size_t)K * H * sizeof(float),
					    cudaMemcpyDeviceToHost, c->s)) ||
		 CUDA_CHECK(cudaStreamSynchronize(c->s));
	dfree(k), dfree(ks), dfree(tmp), dfree(idx), dfree(x), dfree(o), dfree(head), dfree(tail);
	dfree(temp);
	return rc ? -1 : 0;
}
