/*
 * backend.cuh - the cuda backend's private state and the functions its
 * files share (not for outside kernels/cuda/):
 *   backend.cu     the interface (ncf_backend_cuda): init, state, data,
 *                  the step's all-reduce and Adam, evaluation, scoring;
 *   step.cu        the GEMMs and the forward and backward pass of a step;
 *   score.cu       scoring: ids checked on the device, pinned double-buffered
 *                  transfers overlapping compute, pairs kept on the device;
 *   graphs.cu      scoring chunks replayed as CUDA graphs;
 *   nccl.cu        the gradient's all-reduce across ranks;
 *   device.cu      device queries (usable, versions, facts for benchmarks);
 *   test_hooks.cu  single operations for the tests (tests only);
 * and the kernels (kernels.cuh), the sort (sort.cu), the CPU emulation
 * (emu.h).
 *
 * Legend: B rows of a step (this rank's slice), U users, I items, F GMF
 * factors, H1..HL the hidden widths, M the MLP embedding width, P training
 * positives, N evaluation negatives per user.  Tables by role: gmf_user
 * (U, F), gmf_item (I, F), mlp_user (U, M), mlp_item (I, M) (layout.p, .q,
 * .pm, .qm).
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
	void *plo; /* 16-bit copy of params from layout.pm on (bf16, fp16) */
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

	struct graphs *graphs; /* scoring graphs (graphs.cu) */
	unsigned rows_gen;     /* bumped when the row buffers move (graphs go stale) */
	uint64_t graph_captures, graph_launches; /* for tests */
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
/* cudaMalloc of n elements of *p's type, or of bytes bytes into *pp (void
 * **): 0 or -1 (reported). */
#define DALLOC(p, n) CUDA_CHECK(cudaMalloc((void **)&(p), bytes_of((n), sizeof *(p))))
#define DALLOC_BYTES(pp, bytes) CUDA_CHECK(cudaMalloc((pp), bytes_of((bytes), 1)))
/* cudaFree and forget. */
template <typename X> static inline void dfree(X *&p)
{
	if (p)
		cudaFree((void *)p);
	p = NULL;
}

/* Bits of the largest id below n (at least 1). */
static inline int id_bits(uint32_t n)
{
	int b = 1;
	while (b < 32 && ((uint64_t)1 << b) < n)
		b++;
	return b;
}

/* ---- backend.cu --------------------------------------------------------- */

/* Room for n rows in every per-row buffer.  Returns 0 or -1. */
int ensure_rows(struct ncf_backend *be, struct cu *c, size_t n);
/* At least floats of column-sum scratch in c->red.  Returns 0 or -1. */
int grow_red(struct cu *c, size_t floats);

/* ---- step.cu ------------------------------------------------------------ */

/*
 * The gradient of the mean loss over positions [first, first + n) of
 * epoch, this rank's slice, times the loss scale, into c->grad; this rank's
 * loss sum into c->loss_dev.  Asynchronous.  Returns 0 or -1.
 */
int compute_grad_any(struct ncf_backend *be, uint32_t epoch, uint64_t first, uint64_t n);
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
