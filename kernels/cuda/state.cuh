/*
 * state.cuh - the cuda backend's state on the device (struct cu) and the
 * helpers every non-kernel file of kernels/cuda/ uses to allocate it.  Who
 * writes what: device.cu the device, stream and cuBLAS; backend.cu the
 * parameters, Adam state and data; rows.cu the per-row buffers; params.cu
 * the 16-bit copy and the first-layer tables, and the flags saying whether
 * they are current (no other file writes those); step.cu the step's
 * buffers; dense.cu the dense layers' choice; graphs.cu, score.cu,
 * nccl.cu, lt.cu, cost.cu their own structs.
 *
 * The files and who calls whom (downward only):
 *
 *   backend.cu            the interface (ncf_backend_cuda), the module's entry,
 *    |                    the training step's driver, the cost model's dry run
 *    +- step.cu           one function: a step's launches in order
 *    |   +- dense.cu      a dense layer's forward and backward, one call each,
 *    |                    its implementation chosen per layer (fused, lt, plain)
 *    +- score.cu          scoring and evaluation (the forward pass of pairs)
 *    +- graphs.cu         capture and replay of a function's launches
 *    +- device.cu nccl.cu the device; the all-reduce across ranks
 *    +- params.cu rows.cu the 16-bit copy and tables; the per-row buffers
 *        +- gemm.cu lt.cu and the kernels (kernels.cuh: one .cu per group)
 *            +- cost.cu   the cost recorder and the per-launch profile
 *
 * Legend: B rows of a step (this rank's slice), U users, I items, F GMF
 * factors, H1..HL the hidden widths, M the MLP embedding width, P training
 * positives, N evaluation negatives per user, E explicit training
 * negatives.  Tables by role: gmf_user (U, F), gmf_item (I, F), mlp_user
 * (U, M), mlp_item (I, M) (the layout's offsets of the same names).
 */
#ifndef NCF_CUDA_STATE_CUH
#define NCF_CUDA_STATE_CUH

#include <stdlib.h>
#include <string.h>

#include "gemm.cuh"
#include "kernels.cuh"
#include "cuda.h"

extern "C" {
#include "dist.h"
#include "err.h"
}

namespace NCF_CUDA_NS {

struct graphs;	/* graphs.cu */
struct scorer;	/* score.cu */
struct nccl;	/* nccl.cu */
struct step_buffers; /* step.cu */
struct dense;	/* dense.cu */
struct profile; /* cost.cu */
struct lt;	/* lt.cu */

struct cu {
	/* device.cu */
	int dev;
	cudaDeviceProp prop;
	cudaStream_t s;
	struct blas blas;
	int have_stream, have_blas;
	act_type act; /* the activations' element type */
	size_t es;    /* bytes per activation element */

	/* backend.cu: parameters, Adam state, gradient (layout.total floats each) */
	float *params, *m, *v, *grad;
	float *dAU, *dAI; /* (U, H1), (I, H1): the gradients of the first-layer tables */
	/* training data: CSR (offsets (U+1), items (P)), entry_user (P); the
	 * explicit negatives' CSR (neg_offsets (U+1), neg_items (E)), NULL
	 * when E = 0 */
	uint32_t *entry_user, *items_csr;
	int64_t *offsets;
	int64_t P;
	int64_t *neg_offsets;
	uint32_t *neg_items;
	uint64_t E;
	int have_td;
	/* evaluation data: test (U), neg (U, N), counted (U, N) */
	uint32_t *test, *neg;
	uint8_t *counted;
	uint32_t N;
	int have_ed;
	double *loss_dev;	 /* (1) this step's loss sum */
	double *loss_acc;	 /* (1) losses of steps given no loss_sum (take_loss reads it) */
	double loss_host;	 /* the same, of such steps whose loss came to the host */
	int *flag;		 /* (1) fp16: inf/NaN in the gradient */
	float loss_scale;	 /* fp16 dynamic loss scaling */
	uint32_t good_steps, growth_interval;

	/* params.cu: a 16-bit copy of params from layout.mlp_user on (bf16, fp16), the
	 * first-layer tables AU = mlp_user W1u^T (U, H1), AI = mlp_item W1i^T (I, H1)
	 * in the activation type, and whether each is current */
	void *plo, *AU, *AI;
	int plo_valid, tables_valid;

	/* rows.cu: rows of a step or a scoring launch, cap rows */
	size_t cap;
	unsigned rows_gen; /* bumped when the row buffers move (graphs on them go stale) */
	uint32_t *su, *si; /* (cap) user, item */
	uint8_t *lab;	   /* (cap) */
	float *dl;	   /* (cap) dlogit (logits when scoring) */
	void *h[NCF_MAX_LAYERS], *d[NCF_MAX_LAYERS]; /* (cap, H_k), k = 1..L */
	uint32_t *ku, *ju, *ki, *ji, *itmp;	      /* (cap) sorted keys and rows */
	void *sort_tmp;
	size_t sort_tmp_bytes;

	struct step_buffers *sb; /* the step's buffers (step.cu) */
	struct dense *dense;	 /* the dense layers' implementations (dense.cu) */
	struct lt *lt;		 /* cuBLASLt (lt.cu), NULL until a layer may take it */
	struct graphs *graphs;	 /* captured graphs (graphs.cu) */
	struct scorer *sc;	 /* scoring streams and buffers, NULL until first used */
	uint32_t *ranks;	 /* evaluation ranks (score.cu) */
	size_t ranks_cap;
	struct nccl *nccl;	 /* the communicator of several ranks (nccl.cu) */
	struct profile *prof;	 /* NCF_CUDA_PROFILE: per-launch times (cost.cu), or NULL */
};

static inline struct cu *impl(const struct ncf_backend *be)
{
	return (struct cu *)be->impl;
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

/* The sample stream of epoch, S samples (ncf_epoch_check), over c's
 * training data on the device with be's seed and --true-negatives (the
 * cpu's ncf_host_stream). */
static inline ncf_stream stream_of(const struct ncf_backend *be, const struct cu *c, uint64_t S,
				   uint32_t epoch)
{
	ncf_stream st;
	memset(&st, 0, sizeof st);
	st.perm = ncf_perm_make(S, be->hp.seed, epoch);
	st.seed = be->hp.seed;
	st.epoch = epoch;
	st.items = be->shape.items;
	st.positives = c->P;
	st.true_neg = (int)be->hp.true_neg;
	st.entry_user = c->entry_user;
	st.offsets = c->offsets;
	st.csr_items = c->items_csr;
	st.train_negatives = c->E;
	st.users = be->shape.users;
	st.neg_offsets = c->neg_offsets;
	st.neg_items = c->neg_items;
	return st;
}

} /* namespace NCF_CUDA_NS */

#endif
