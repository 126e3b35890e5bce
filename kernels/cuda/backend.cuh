/*
 * backend.cuh - the cuda backend's private state and the functions its
 * files share (not for outside kernels/cuda/):
 *   backend.cu     the interface (ncf_backend_cuda): init, state, data,
 *                  the step's all-reduce and Adam, evaluation, scoring;
 *   step.cu        the GEMMs and the forward and backward pass of a step
 *                  (the unfused path, NCF_CUDA_PATH=unfused);
 *   step_fused.cu  the fused step (the default);
 *   score.cu       scoring: ids checked on the device, pinned double-buffered
 *                  transfers overlapping compute, pairs kept on the device;
 *   graphs.cu      the fused step as one CUDA graph; scoring chunks replayed
 *                  as CUDA graphs;
 *   cost.cu        the cost recorder and the cost model of a step (cost.cuh);
 *   nccl.cu        the gradient's all-reduce across ranks;
 *   device.cu      device queries (usable, versions, facts for benchmarks);
 *   test_hooks.cu  single operations for the tests (tests only);
 * and the kernels (kernels.cuh, mma.cuh), the sort (sort.cu), the CPU
 * emulation (emu.h).
 *
 * Legend: B rows of a step (this rank's slice), U users, I items, F GMF
 * factors, H1..HL the hidden widths, M the MLP embedding width, P training
 * positives, N evaluation negatives per user.  Tables by role: gmf_user
 * (U, F), gmf_item (I, F), mlp_user (U, M), mlp_item (I, M) (the layout's
 * offsets of the same names).
 */
#ifndef NCF_CUDA_BACKEND_CUH
#define NCF_CUDA_BACKEND_CUH

#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "kernels.cuh"

extern "C" {
#include "dist.h"
#include "err.h"
}

namespace NCF_CUDA_NS {

static const size_t EVAL_CHUNK = (size_t)1 << 20; /* (user, item) pairs per scoring launch */

/* Phases of a training step, timed under NCF_CUDA_PROFILE. */
enum {
	PH_SAMPLES, PH_TABLES, PH_FORWARD, PH_HEAD, PH_MLP_BACKWARD, PH_SORT, PH_LAYER1_BACKWARD,
	PH_GMF_LOSS, PH_ALLREDUCE_ADAM, PH_N
};

/* The training step's code path: NCF_CUDA_PATH=fused (the default) or
 * unfused (step.cu's passes as they were before issue 12, for
 * comparison). */
enum { PATH_FUSED = 0, PATH_UNFUSED = 1 };

struct graphs; /* graphs.cu */
struct scorer; /* score.cu */
struct nccl;   /* nccl.cu */

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
	void *plo; /* 16-bit copy of params from layout.mlp_user on (bf16, fp16) */
	int plo_valid, tables_valid;
	void *AU, *AI;	  /* (U, H1), (I, H1) activation type: mlp_user W1u^T, mlp_item W1i^T */
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

	struct graphs *graphs; /* the step's and scoring's graphs (graphs.cu) */
	unsigned rows_gen;     /* bumped when the row buffers move (graphs go stale) */
	uint64_t graph_captures, graph_launches; /* for tests */
	uint64_t step_captures, step_instantiations, step_launches; /* the step's graph (tests) */
	struct scorer *sc;     /* scoring streams and buffers, NULL until first used */

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
	double *loss_acc;	 /* (1) losses of steps given no loss_sum (take_loss reads it) */
	double loss_host;	 /* the same, of such steps whose loss came to the host */
	int loss_to_acc;	 /* this step adds its loss to loss_acc (step_fused.cu) */
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

	struct nccl *nccl; /* the communicator of several ranks (opened with the backend) */

	/* ---- the fused training step (step_fused.cu) ---------------------- */
	int path;	      /* PATH_FUSED or PATH_UNFUSED */
	int fused_said;	      /* said once why a shape takes the unfused path */
	size_t fcap;	      /* rows the buffers below hold */
	uint32_t *ri;	      /* (fcap) item of each row, rows sorted by user */
	uint8_t *rlab;	      /* (fcap) label of each row */
	uint32_t *uoff, *ioff; /* (U + 1), (I + 1) first row (position) of each user (item) */
	float *fpart;	      /* per-block partial sums of the head and the backward */
	double *floss;	      /* (ceil(fcap / HEAD_ROWS)) per-block loss sums */
};

static inline struct cu *impl(const struct ncf_backend *be)
{
	return (struct cu *)be->impl;
}

/* Profiling: the event that starts phase k (k = PH_N: the step's end). */
static inline void mark(struct cu *c, int k)
{
	if (c->prof) {
		cudaEventRecord(c->ev[k], c->s);
		c->prof_marked |= 1 << k;
	}
}

/* ---- device memory ------------------------------------------------------ */

/* Bytes of n elements of es bytes, at least one. */
static inline size_t bytes_of(size_t n, size_t es)
{
	return n ? n * es : 1;
}
/* A fake device address for bytes bytes in a dry cost run (cost.cuh):
 * distinct, 256-byte aligned, never dereferenced.  Returns 0. */
static inline int fake_alloc(void **p, size_t bytes)
{
	struct cost_rec *r = cost_active;
	if (!r->next_fake)
		r->next_fake = (uintptr_t)1 << 40;
	*p = (void *)r->next_fake;
	r->next_fake += (bytes + 255) / 256 * 256 + 256;
	return 0;
}
/* cudaMalloc of n elements of *p's type, or of bytes bytes into *pp (void
 * **): 0 or -1 (reported).  A fake address in a dry cost run. */
#define DALLOC(p, n)                                                               \
	(cost_dry() ? fake_alloc((void **)&(p), bytes_of((n), sizeof *(p)))         \
		    : CUDA_CHECK(cudaMalloc((void **)&(p), bytes_of((n), sizeof *(p)))))
#define DALLOC_BYTES(pp, bytes)                                                \
	(cost_dry() ? fake_alloc((pp), bytes_of((bytes), 1))                   \
		    : CUDA_CHECK(cudaMalloc((pp), bytes_of((bytes), 1))))
/* cudaFree and forget (forget only, in a dry cost run). */
template <typename X> static inline void dfree(X *&p)
{
	if (p && !cost_dry())
		cudaFree((void *)p);
	p = NULL;
}

/* cudaMemsetAsync(p, 0, bytes, stream), cudaMemcpyAsync and
 * cudaStreamSynchronize in the training step: noted for the cost recorder
 * (cost.cuh), skipped in a dry cost run; on failure report and return -1
 * (CUDA_TRY). */
#define DMEMSET_TRY(p, bytes, stream, name)                                       \
	do {                                                                      \
		if (!NCF_COST(COST_MEMSET, (name), (double)(bytes), 0))           \
			CUDA_TRY(cudaMemsetAsync((p), 0, (bytes), (stream)));     \
	} while (0)
#define DCOPY_TRY(dst, src, bytes, kind, stream, name)                             \
	do {                                                                       \
		if (!NCF_COST(COST_COPY, (name), (double)(bytes), 0))              \
			CUDA_TRY(cudaMemcpyAsync((dst), (src), (bytes), (kind), (stream))); \
	} while (0)
#define DSYNC_TRY(stream)                                            \
	do {                                                         \
		if (!cost_dry())                                     \
			CUDA_TRY(cudaStreamSynchronize(stream));     \
	} while (0)

/* Bits of the largest id below n (at least 1). */
static inline int id_bits(uint32_t n)
{
	int b = 1;
	while (b < 32 && ((uint64_t)1 << b) < n)
		b++;
	return b;
}

/* ---- backend.cu --------------------------------------------------------- */

/* c's element type and GEMM compute type for be->precision (resolved;
 * ampere: a device of compute capability 8.0 or newer). */
void set_precision(struct ncf_backend *be, struct cu *c, int ampere);
/* Parameters, Adam state, gradient, first-layer tables and scalars for be
 * on the device (fake addresses in a dry cost run).  Returns 0 or -1. */
int alloc_state(struct ncf_backend *be, struct cu *c);
/* *path for a name: "fused", "unfused", NULL or "" (the default, fused).
 * Returns 0, or -1 (reported) for another name. */
int path_parse(const char *name, int *path);

/* Room for n rows in every per-row buffer.  Returns 0 or -1. */
int ensure_rows(struct ncf_backend *be, struct cu *c, size_t n);
/* At least floats of column-sum scratch in c->red.  Returns 0 or -1. */
int grow_red(struct cu *c, size_t floats);
/* A training step's work on the stream: the gradient, the all-reduce, the
 * fp16 check and Adam (no host synchronisation).  Returns 0 or -1. */
int step_work(struct ncf_backend *be, struct cu *c, uint32_t epoch, uint64_t first, uint64_t n);

/* ---- step.cu ------------------------------------------------------------ */

/* The parameters as the GEMMs read them: params (fp32) or plo. */
template <typename T> static inline const T *wts(struct cu *c)
{
	return c->act == ACT_F32 ? (const T *)(const void *)c->params : (const T *)c->plo;
}
/* plo up to date, then the first-layer tables AU, AI for the current
 * parameters.  Returns 0 or -1. */
template <typename T> int make_tables(struct ncf_backend *be, struct cu *c);
/* Row-major GEMMs through cuBLAS, `what` naming them for the cost recorder:
 * Y (rows, out) = X (rows, in) W^T;  dW (out, in; leading dimension ldd) =
 * dY^T X;  dX (rows, in) = dY (rows, out) W; W (out, in) with leading
 * dimension ldw.  Return 0 or -1. */
int lin_fwd(struct cu *c, const char *what, size_t rows, size_t in, size_t out, const void *X,
	    cudaDataType xt, size_t ldx, const void *W, cudaDataType wt, size_t ldw, void *Y,
	    cudaDataType yt, size_t ldy);
int lin_wgrad(struct cu *c, const char *what, size_t rows, size_t in, size_t out, const void *dY,
	      cudaDataType dt, size_t lddy, const void *X, cudaDataType xt, size_t ldx, float *dW,
	      size_t ldd);
int lin_dgrad(struct cu *c, const char *what, size_t rows, size_t in, size_t out, const void *dY,
	      cudaDataType dt, size_t lddy, const void *W, cudaDataType wt, size_t ldw, void *dX,
	      cudaDataType xt, size_t lddx);

/*
 * The gradient of the mean loss over positions [first, first + n) of
 * epoch, this rank's slice, times the loss scale, into c->grad; this rank's
 * loss sum into c->loss_dev.  Asynchronous.  Returns 0 or -1.
 */
int compute_grad_any(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n);
/* What a step of positions [first, first + n) needs before it runs: its
 * buffers (allocated here, never while a graph is being captured) and a
 * valid range of positions.  Returns 0 or -1 (reported). */
int step_prepare(struct ncf_backend *be, struct cu *c, uint64_t first, uint64_t n);
/* Logits (prob: probabilities, the sigmoid in the head kernel) of the n
 * pairs in c->su, c->si into out (device), no dropout.  Asynchronous.
 * Returns 0 or -1. */
int forward_logits_any(struct ncf_backend *be, struct cu *c, size_t n, float *out, int prob);
/* The first-layer tables AU, AI (and the 16-bit parameters) for the current
 * parameters, unless still valid.  Asynchronous.  Returns 0 or -1. */
int make_tables_any(struct ncf_backend *be, struct cu *c);

/* ---- score.cu ----------------------------------------------------------- */

/*
 * One scoring chunk: n pairs read from in_u, in_i (device); a pair outside
 * the model is scored as (0, 0) and sets *bad (device) to the smallest such
 * j; logits or (prob) probabilities into out (device).  What a CUDA graph of
 * graphs.cu holds; chunk_work issues it with plain launches on c->s
 * (asynchronous), reading the tables as they are (make_tables_any first).
 */
struct chunk {
	size_t n;
	const uint32_t *in_u, *in_i; /* (n) */
	float *out;		     /* (n) */
	unsigned long long *bad;     /* one word, all ones when every pair was inside */
	int prob;
};
int chunk_work(struct ncf_backend *be, struct cu *c, const struct chunk *k);
/* Logits or (prob) probabilities of n host pairs into out (host): pinned,
 * double-buffered transfers on their own streams overlapping the chunks'
 * compute, ids checked on the device (the first pair outside the model is
 * named).  Returns 0 or -1 (out is then undefined). */
int score_host(struct ncf_backend *be, struct cu *c, const uint32_t *users, const uint32_t *items,
	       size_t n, float *out, int prob);
/* Keep n pairs on the device (checked now); score the first n of them,
 * waiting for the result (NVIDIA's inference.py), into out (host) too when
 * it is not NULL.  Return 0 or -1. */
int resident_set(struct ncf_backend *be, struct cu *c, const uint32_t *users,
		 const uint32_t *items, size_t n);
int score_resident(struct ncf_backend *be, struct cu *c, size_t n, float *out, int prob);
void scorer_free(struct cu *c);

/* The dropout of a step (or a test's launch) with hp's rate: rows from
 * epoch position pos0 of epoch. */
static inline dropout_k dropout_of(const struct ncf_hparams *hp, uint32_t epoch, uint64_t pos0)
{
	dropout_k dk;
	memset(&dk, 0, sizeof dk);
	dk.active = hp->dropout > 0.0f;
	dk.drop16 = ncf_dropout_threshold(hp->dropout);
	dk.scale = dk.active ? 1.0f / (1.0f - hp->dropout) : 1.0f;
	dk.seed = hp->seed;
	dk.epoch = epoch;
	dk.pos0 = pos0;
	return dk;
}

/* ---- step_fused.cu ------------------------------------------------------ */

/* Does this step take the fused path (NCF_CUDA_PATH, and a shape the
 * fused kernels take: hidden widths <= FUSED_MAX_WIDTH)? */
int fused_path(struct ncf_backend *be, struct cu *c);
/* compute_grad_any's work on the fused path, for B rows at epoch positions
 * pos0 .. of an epoch of S samples, global batch n. */
template <typename T>
int compute_grad_fused(struct ncf_backend *be, struct cu *c, uint64_t S, uint32_t epoch,
		       uint64_t pos0, size_t B, uint64_t n, const dropout_k &dk);
/* The fused path's Adam: adam_cuda and the 16-bit copy of the parameters
 * from mlp_user on (plo valid after it).  Returns 0 or -1. */
int adam_fused(struct ncf_backend *be, struct cu *c, const ncf_adam_k &k, float g_scale,
	       const int *skip);
/* The fused path's buffers for B rows.  Returns 0 or -1. */
int fused_prepare(struct ncf_backend *be, struct cu *c, size_t B);
void fused_free(struct cu *c);

/* ---- cost.cu ------------------------------------------------------------ */

/* out = what recorder r holds (cuda.h's form). */
void cost_export(const struct cost_rec *r, struct ncf_cuda_cost *out);

/* ---- graphs.cu ---------------------------------------------------------- */

/* Before any GEMM: what capture needs (a cuBLAS workspace of our own).
 * Returns 0 or -1. */
int graphs_init(struct cu *c);
void graphs_free(struct cu *c);
/* Issue chunk k on c->s as a CUDA graph, captured on first use for its
 * sizes and buffers (the row buffers and the tables ready: ensure_rows,
 * make_tables_any).  Returns 0, 1 when the caller should issue it with plain
 * launches (graphs off, or capture failed: said once at -v), -1 on an
 * error. */
int graph_chunk(struct ncf_backend *be, struct cu *c, const struct chunk *k);
/* A training step's work (step_work) as one CUDA graph: captured anew each
 * step (the step's arguments change) and swapped into the instantiated
 * graph with cudaGraphExecUpdate, then launched: the device runs the step
 * without a gap between launches.  The fused path only, one rank only
 * (NCCL stays outside), no NCF_CUDA_PROFILE, not with NCF_CUDA_GRAPH=0 or
 * NCF_CUDA_SYNC=1.  Returns 0 (launched), 1 when the caller should launch
 * the work itself (graphs off, or a capture failed: said once at -v), -1
 * on an error. */
int graph_step(struct ncf_backend *be, struct cu *c, uint32_t epoch, uint64_t first, uint64_t n);

/* ---- nccl.cu ------------------------------------------------------------ */

/* The communicator of a job of several ranks (be->dist->mpi, size > 1):
 * NCCL, bootstrapped through MPI; nothing otherwise.  A build without NCCL
 * refuses several ranks.  Returns 0 or -1 (reported). */
int nccl_open(struct ncf_backend *be, struct cu *c);
/* Sum count floats at dev (device) across the ranks of be->dist in place:
 * nothing with one rank, NCCL with several.  Returns 0 or -1 (reported). */
int allreduce(struct ncf_backend *be, float *dev, size_t count);
void nccl_free(struct cu *c);

} /* namespace NCF_CUDA_NS */

#endif
