/*
 * kernels.cuh - the GPU operations of the cuda backend, one file per group:
 * sample.cu (the sample stream, evaluation candidates and ranks), layers.cu
 * (first layer, bias + ReLU + dropout and its backward with the bias
 * gradient's partials, casts), mlp.cu (the fused dense layers, on tensor
 * cores through mma.cuh), head.cu (the scoring head; the training step's
 * head, loss and dlogit), reduce.cu (the step's partial sums and per-key
 * sums), adam.cu (Adam, the inf/NaN check, Adam with the 16-bit copy),
 * sort.cu (the sort, the sorted rows and their offsets).
 *
 * Each op has three levels (STYLE.md 4): <op>_kernel, the __global__ in
 * its .cu file; <op>_cuda, declared here, which sizes the grid, notes what
 * the launch moves for the cost recorder (cost.cuh), launches on the given
 * stream through NCF_LAUNCH or NCF_LAUNCH_SYNC and checks the launch
 * (returns 0, or -1 after reporting); and its CPU twin.  Under
 * NCF_CUDA_EMULATE the kernel itself is the twin: NCF_LAUNCH runs a plain
 * kernel (each thread computes its own outputs: no shared memory, barriers
 * or warp primitives) thread by thread, and NCF_LAUNCH_SYNC runs a kernel
 * whose threads cooperate (__shared__ memory, __syncthreads, __syncwarp,
 * ldmatrix and mma.sync: mlp.cu, the fused head, reduce_partials) with each thread
 * of a block as a fiber (emu.h); tests/unit/test_cuda_emu.cc compares the
 * results with the reference (kernels/cpu/reference.c) and the fast cpu
 * backend (kernels/cpu/), whose step is named in each comment below.  The
 * exception is the radix sort (sort_by_key_cuda: CUB), whose CPU twin
 * sort_by_key_cpu is what runs under emulation; the sort is covered by the
 * real-GPU tests (tests/gpu).
 *
 * Determinism: no float atomics anywhere.  Every sum has an order fixed by
 * the sizes alone (not by the launch or the scheduling), so a GPU run is
 * bit-for-bit reproducible on one GPU model and cuBLAS version; the cpu
 * backend remains bit-exact across machines.
 *
 * Legend: n rows of the launch (samples, or (user, item) pairs), H a layer's
 * width, F GMF factors, HL the last hidden width, U users, I items, P
 * training positives, N evaluation negatives per user, T the activation type
 * (float, bf16 or fp16).  Tables by role: gmf_user (U, F), gmf_item (I, F),
 * mlp_user (U, M), mlp_item (I, M).  Matrices are row-major: "(n, H)" is n
 * rows of H.
 */
#ifndef NCF_CUDA_KERNELS_CUH
#define NCF_CUDA_KERNELS_CUH

#include "common.cuh"
#include "cost.cuh"

namespace NCF_CUDA_NS {

/* Dropout of one launch: unit h of row j of hidden layer l is kept when the
 * 16-bit uniform of ncf_dropout_bits(seed, epoch, pos0 + j, l, h / 8) is
 * >= drop16, then scaled by `scale` (reference.c dropout_mask; cpu/train.c dropout_row). */
struct dropout_k {
	int active;	 /* 0: no dropout (evaluation, or --dropout 0) */
	uint32_t drop16; /* ncf_dropout_threshold(p) */
	float scale;	 /* 1 / (1 - p) */
	uint64_t seed;
	uint32_t epoch;
	uint64_t pos0; /* epoch position of row 0 */
};

/* The Philox block of units 8w .. 8w+7 of row j (epoch position pos0 + j)
 * of hidden layer `layer`; zeros when dropout is off. */
NCF_DI ncf_u32x4 dropout_bits_at(const dropout_k &dk, uint64_t j, uint32_t layer, uint32_t w)
{
	ncf_u32x4 bits = {{0, 0, 0, 0}};
	if (dk.active)
		bits = ncf_dropout_bits(dk.seed, dk.epoch, dk.pos0 + j, layer, w);
	return bits;
}

/* Dropout multiplier of unit k (0..7) of such a block: scale or 0. */
NCF_DI float dropout_mult(const dropout_k &dk, ncf_u32x4 bits, uint32_t k)
{
	return ncf_dropout_keep(bits, k, dk.drop16) ? dk.scale : 0.0f;
}

/* Is p 16-byte aligned (for the 8-element vector loads)? */
static inline int aligned16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

/*
 * The sample stream (ncf_sample_at; cpu/train.c step 1): row j of n gets
 * the sample at epoch position pos0 + j of the stream, whose arrays (the
 * training CSR: entry_user, offsets, csr_items; the explicit negatives'
 * CSR: neg_offsets, neg_items) are on the device (state.cuh's stream_of).
 */
struct sample_src {
	ncf_stream stream; /* the epoch's stream, its arrays on the device */
	uint64_t pos0;	   /* the epoch position of row 0 */
};
struct sample_out {
	uint32_t *users, *items; /* (n) */
	uint8_t *labels;	 /* (n) */
};
int sample_cuda(const sample_src &a, size_t n, const sample_out &o, cudaStream_t stream);

/*
 * The factorized first layer per row (cpu/train.c chunk_train "layer 1" and
 * bias_relu_dropout with layer 0; cpu/infer.c chunk_logits for scoring):
 * au (U, H), ai (I, H) the tables mlp_user W1u^T and mlp_item W1i^T, b1
 * (H), h1 (n, H); rows (users[j], items[j]).
 */
template <typename T> struct layer1_rows {
	size_t n;
	uint32_t H;
	const uint32_t *users, *items;
	const T *au, *ai;
	const float *b1;
	T *h1;
};
/* Scoring: h1 = relu((au[u] + b1) + ai[i]) (b1 folded as the cpu backend's
 * scoring tables do). */
template <typename T> int layer1_cuda(const layer1_rows<T> &a, cudaStream_t stream);

/* z (n, H) = dropout(relu(z + b)) in place, dropout of hidden layer `layer`
 * (0-based) at positions dk.pos0 + rowpos[r] (r when rowpos is NULL)
 * (cpu/train.c bias_relu_dropout). */
template <typename T>
int bias_relu_dropout_cuda(size_t n, uint32_t H, T *z, const float *b, const dropout_k &dk,
			   uint32_t layer, const uint32_t *rowpos, cudaStream_t stream);

/* x (n, H) *= the dropout multiplier of hidden layer `layer` (0-based) at
 * positions dk.pos0 + rowpos[r] (r when rowpos is NULL): scale where the
 * unit is kept, 0 where it is dropped; nothing when dk is not active (the
 * lt dense layers' dropout, after cuBLASLt's ReLU). */
template <typename T>
int dropout_mul_cuda(size_t n, uint32_t H, T *x, const dropout_k &dk, uint32_t layer,
		     const uint32_t *rowpos, cudaStream_t stream);

/* dx (n, H) = h > 0 ? dx * scale : 0 in place: the backward of ReLU and
 * dropout from the layer's output h (n, H) (cpu/train.c
 * relu_dropout_back), and part (ceil(n / BWD_ROWS), H) the column sums of
 * the result per BWD_ROWS rows (the layer's bias gradient once
 * reduce_partials_cuda has added them). */
template <typename T>
int relu_dropout_back_cuda(size_t n, uint32_t H, T *dx, const T *h, float scale, float *part,
			   cudaStream_t stream);

/* The head's inputs for n rows: the rows' ids, the GMF tables, the head's
 * weights w (F + HL + 1: the GMF part, the MLP part, then the bias) and the
 * last hidden layer hL (n, HL). */
template <typename T> struct head_rows {
	size_t n;
	uint32_t F, HL;
	const uint32_t *users, *items; /* (n) */
	const float *gmf_user, *gmf_item, *w;
	const T *hL;
};

/*
 * The head per row (cpu/infer.c chunk_logits): logit[j] = w[0..F) .
 * (gmf_user[u] * gmf_item[i]) + w[F..F+HL) . hL[j] + w[F+HL]; prob:
 * ncf_sigmoid(logit[j]) instead, the score (cpu/infer.c ncf_cpu_score).
 */
template <typename T>
int head_logits_cuda(const head_rows<T> &a, int prob, float *logit, cudaStream_t stream);

/*
 * Stable sort of n keys below 2^bits: keys_out the sorted keys, idx_out the
 * original position of each (idx_tmp (n) is scratch).  GPU: CUB's radix
 * sort (temp: sort_temp_bytes); CPU twin sort_by_key_cpu under emulation.
 */
int sort_temp_bytes(size_t n, int bits, size_t *bytes);
struct sort_scratch {
	uint32_t *idx_tmp; /* (n) */
	void *temp;	   /* sort_temp_bytes of them */
	size_t temp_bytes;
};
int sort_by_key_cuda(const uint32_t *keys, size_t n, int bits, uint32_t *keys_out,
		     uint32_t *idx_out, const sort_scratch &tmp, cudaStream_t stream);
void sort_by_key_cpu(const uint32_t *keys, size_t n, uint32_t *keys_out, uint32_t *idx_out);

/*
 * One fused dense Adam pass over n parameters (reference.c adam_step):
 * ncf_adam_update(p, m, v, g * g_scale, k) per element.  g_scale undoes the
 * loss scale.  skip (device int, may be NULL): when *skip != 0 nothing is
 * updated (fp16 step with an inf/NaN gradient).
 */
struct adam_pass {
	float *p, *m, *v;  /* (n) updated in place */
	const float *g;	   /* (n) */
	size_t n;
	ncf_adam_k k;
	float g_scale;
	const int *skip;   /* device int or NULL */
};
int adam_cuda(const adam_pass &a, cudaStream_t stream);

/* *flag = 1 when any of g (n) is inf or NaN (flag left alone otherwise). */
int nonfinite_cuda(const float *g, size_t n, int *flag, cudaStream_t stream);

/* y (n) = x rounded to T: the low-precision copies of the parameters. */
template <typename T> int cast_cuda(const float *x, T *y, size_t n, cudaStream_t stream);

/* Candidates of users [u0, u0 + nu): row (k (N + 1) + c) is user u0 + k with
 * the test item (c = 0) or negative c - 1 (reference.c ref_eval_ranks).  test (U),
 * neg (U, N); su, si (nu (N + 1)). */
int eval_pairs_cuda(uint32_t u0, uint32_t nu, uint32_t N, const uint32_t *test,
		    const uint32_t *neg, uint32_t *su, uint32_t *si, cudaStream_t stream);

/* ranks[k] = ncf_rank of user u0 + k from its N + 1 logits (metrics.h);
 * logit (nu (N + 1)), counted (U, N). */
int rank_cuda(const float *logit, const uint8_t *counted, uint32_t u0, uint32_t nu, uint32_t N,
	      uint32_t *ranks, cudaStream_t stream);

/* ---- the training step (step.cu, dense.cu) ---------------------------------
 *
 * Its rows are the slice's samples sorted by user (a stable sort, so a
 * user's rows keep their sample order): row r is sample rowpos[r] of the
 * slice, whose dropout position is pos0 + rowpos[r].  Kernels that
 * cooperate within a block (__shared__ memory, barriers, mma.sync) are launched
 * with NCF_LAUNCH_SYNC and run under the emulation as fibers (emu.h), so
 * they too are checked against reference.c in make check.
 */

/* The widest hidden layer the fused kernels take (a layer's output in the
 * forward pass, its input in the backward pass); rows per partial row of
 * the backward passes and the head. */
enum { FUSED_MAX_WIDTH = 256, BWD_ROWS = 128, HEAD_ROWS = 128 };
/* linear_bwdw_cuda: the widest layer output it takes, the columns of the
 * input one block computes, the most row groups (blocks per column group,
 * each summing its rows' weight gradient in registers). */
enum { BWDW_MAX_OUT = 128, BWDW_COLS = 128, BWDW_GROUPS = 256 };

/* A dense layer k >= 2 forward (mlp.cu): Y (rows, out) = dropout(relu(X
 * W^T + b)) of hidden layer `layer` (0-based) at positions dk.pos0 +
 * rowpos[r] (r when rowpos is NULL). */
template <typename T> struct layer_fwd {
	size_t rows;
	uint32_t in, out;
	const T *X;	       /* (rows, in) */
	const T *W;	       /* (out, in) */
	const float *b;	       /* (out) */
	dropout_k dk;
	uint32_t layer;
	const uint32_t *rowpos; /* (rows) or NULL */
	T *Y;		       /* (rows, out) */
};
/* A dense layer k >= 2 backward (mlp.cu): dX (rows, in) = H > 0 ? (dZ W) *
 * scale : 0 with H the layer's input h_{k-1} and scale the dropout's
 * 1 / (1 - p), the column sums of dX in partial rows part (ld part_ld),
 * and (linear_bwdw_cuda) dW's partials partw. */
template <typename T> struct layer_bwd {
	size_t rows;
	uint32_t in, out;
	const T *dZ;	 /* (rows, out) */
	const T *W;	 /* (out, in) */
	const T *H;	 /* (rows, in) */
	float scale;
	T *dX;		 /* (rows, in) */
	float *part;	 /* partial rows of dX's column sums */
	uint32_t part_ld;
	float *partw;	 /* (bwdw_groups(rows), out, in), linear_bwdw_cuda only */
};

/*
 * The forward pass, fused: out <= FUSED_MAX_WIDTH; tf32 (T float): TF32
 * tensor cores, else exact fp32.
 */
template <typename T> int linear_fwd_cuda(const layer_fwd<T> &a, int tf32, cudaStream_t stream);

/*
 * The backward pass to the input, fused: part (ceil(rows / BWD_ROWS),
 * part_ld) gets per block of BWD_ROWS rows the column sums of dX (the bias
 * gradient of layer k - 1 once reduce_partials_cuda has added them); in <=
 * FUSED_MAX_WIDTH.
 */
template <typename T> int linear_bwd_cuda(const layer_bwd<T> &a, int tf32, cudaStream_t stream);

/*
 * linear_bwd_cuda and the layer's weight gradient in the same pass: dX and
 * part as linear_bwd_cuda, except that part has bwdw_groups(rows) rows,
 * one per group of row tiles, and partw (bwdw_groups(rows), out, in) gets
 * each group's dZ^T H (the weight gradient dW (out, in) once
 * reduce_partials_cuda has added the groups); out <= BWDW_MAX_OUT, in <=
 * FUSED_MAX_WIDTH.
 */
uint32_t bwdw_groups(size_t rows);
template <typename T> int linear_bwdw_cuda(const layer_bwd<T> &a, int tf32, cudaStream_t stream);
/* Let the fused layers' kernels that stage tiles in shared memory have
 * more than the default 48 KiB (the forward with W resident, the backward
 * with the weight gradient); once per device, never while a graph is being
 * captured.  Returns 0 or -1. */
int mlp_setup(void);
/* The same for the fused head of F factors and HL units (head_fused_cuda). */
int head_setup(uint32_t F, uint32_t HL);
/* The fused layers' instructions per mma (the cost model's issue term) as
 * key<TAB>value lines. */
void mlp_issue_describe(FILE *out);

/*
 * The rows of a slice sorted by user (sort.cu): keys (n) the sorted users,
 * rowpos (n) the sample of each row; ri, rlab (n) get each row's item and
 * label from si, lab (n, sample order); off (K + 1) the first row of each
 * user (off[K] = n; a user without rows has off[u] = off[u + 1]).
 */
struct rows_by_user {
	const uint32_t *keys, *rowpos; /* (n) the sorted users, the sample of each row */
	const uint32_t *si;	       /* (n) items, sample order */
	const uint8_t *lab;	       /* (n) labels, sample order */
	uint32_t *ri;		       /* (n) the item of each row */
	uint8_t *rlab;		       /* (n) the label of each row */
	uint32_t *off;		       /* (K + 1) the first row of each user */
};
int rows_by_user_cuda(size_t n, uint32_t K, const rows_by_user &r, cudaStream_t stream);
/* off (K + 1) = the first position of each key in sorted keys (n). */
int seg_offsets_cuda(size_t n, uint32_t K, const uint32_t *keys, uint32_t *off,
		     cudaStream_t stream);

/* Layer 1 of the training step (layers.cu): h1 = dropout(relu((au[u] +
 * ai[i]) + b1)) with dropout at positions dk.pos0 + rowpos[r]; on rows
 * sorted by user, users (U) sizing the cost note. */
template <typename T>
int layer1_rows_cuda(const layer1_rows<T> &a, const dropout_k &dk, const uint32_t *rowpos,
		     uint32_t users, cudaStream_t stream);

/* What the training step's head makes of its rows (head_fused_cuda). */
template <typename T> struct head_grads {
	const uint8_t *labels;	/* (n) */
	float inv_n;		/* 1 / the global batch */
	float loss_scale;	/* fp16's, else 1 */
	float drop_scale;	/* the dropout's 1 / (1 - p) */
	uint32_t users;		/* U: sizes the cost note only */
	float *dlogit;		/* (n) */
	T *dz;			/* (n, HL) */
	float *part;		/* (ceil(n / HEAD_ROWS), F + 2 HL + 1) */
	double *part_loss;	/* (ceil(n / HEAD_ROWS)) */
};

/*
 * The head of the training step (head.cu) on rows sorted by user: per row
 * the logit (as head_logits_cuda), loss = bce(logit, y), dlogit =
 * (sigmoid(logit) - y) inv_n loss_scale, dz = hL > 0 ? dlogit w[F..F+HL)
 * drop_scale : 0 (cpu/train.c chunk_train "GMF, head, loss" and the first
 * relu_dropout_back), written: dlogit, dz; and, per block of HEAD_ROWS
 * rows, the column sums part of [dlogit g | dlogit hL | dlogit | dz] (the
 * head's weight and bias gradient and the last layer's bias gradient, once
 * reduce_partials_cuda has added them) and the loss sum part_loss in
 * double.  No per-row loss.
 */
template <typename T>
int head_fused_cuda(const head_rows<T> &a, const head_grads<T> &o, cudaStream_t stream);

/*
 * Sums of per-block partials in a fixed order (reduce.cu), one launch:
 * dst[c] = sum over r < rows of src[r ld + c] for c < cols of each
 * segment, and *loss_out = the sum of loss (loss_rows) (also added to
 * *loss_acc unless NULL).
 */
struct part_seg {
	const float *src;
	float *dst;
	uint32_t rows, ld, cols;
};
enum { PART_SEGS = 16 }; /* >= the head's two + two per hidden layer (step.cu) */
struct part_map {
	uint32_t n;
	part_seg seg[PART_SEGS];
	const double *loss;
	uint32_t loss_rows;
	double *loss_out, *loss_acc;
};
int reduce_partials_cuda(const part_map &m, cudaStream_t stream);

/*
 * The embedding-side gradients of one key table (reduce.cu), every key
 * written (no clearing needed): for key k < K with rows at positions off[k]
 * .. off[k + 1] (row = idx[p], or p when idx is NULL), dA (K, H) = the sum
 * of dz (n, H) over k's rows (dAU or dAI) and dE (K, F) = wg * the sum of
 * dl[row] tab[other[row]] (the GMF embedding gradient; tab (., F) the other
 * side's GMF table).  Rows summed in order.
 */
template <typename T> struct key_sums {
	uint32_t K, H, F;
	size_t n;
	const uint32_t *off;   /* (K + 1) */
	const uint32_t *idx;   /* (n) or NULL */
	const T *dz;	       /* (n, H) */
	const float *dl;       /* (n) dlogit */
	const uint32_t *other; /* (n) the other side's id of each row */
	const float *tab;      /* (., F) the other side's GMF table */
	const float *wg;       /* (F) the head's GMF weights */
	float *dA, *dE;	       /* (K, H), (K, F) */
};
template <typename T> int key_grad_cuda(const key_sums<T> &a, cudaStream_t stream);

/* Adam (adam_cuda) and, from index lo_from on, plo[j] = p[j] rounded to T:
 * the 16-bit copy the next step's GEMMs read (plo NULL: none). */
template <typename T>
int adam_cast_cuda(const adam_pass &a, T *plo, size_t lo_from, cudaStream_t stream);

} /* namespace NCF_CUDA_NS */

#endif
