/*
 * dense.cuh - a hidden dense layer of the training step (layers 2..L), its
 * forward pass and its backward pass, each one call with interchangeable
 * implementations behind it, and which one each layer takes (dense.cu):
 *
 *   DENSE_FUSED  the fused tensor-core kernels of mlp.cu: forward with bias,
 *                ReLU and dropout in the product's epilogue; backward with
 *                the mask, the bias gradient's partials and (out <=
 *                BWDW_MAX_OUT) the weight gradient's in the same pass; for
 *                layers of at most FUSED_MAX_WIDTH units;
 *   DENSE_LT     cuBLASLt products with their epilogues (lt.cuh): forward
 *                bias + ReLU (+ the ReLU's bit mask without dropout), then
 *                dropout in a light pass; backward the weight gradient, and
 *                the input gradient with dReLU + the bias gradient
 *                (DRELU_BGRAD) where the layer below kept its mask, else a
 *                plain product and one mask pass;
 *   DENSE_PLAIN  cuBLAS GEMMs and one element-wise pass each way
 *                (bias_relu_dropout forward, relu_dropout_back backward),
 *                for any width.
 *
 * What every implementation does, so that they mix layer by layer:
 *   forward k:  h_k = dropout_{k-1}(relu(h_{k-1} W_k^T + b_k))   (B, H_k)
 *               dropout at the rows' positions pos0 + ju[r] (rows sorted
 *               by user, step.cu);
 *   backward k: from dz_k (B, H_k) (relu and dropout of layer k applied):
 *               dW_k = dz_k^T h_{k-1}, dz_{k-1} = h_{k-1} > 0 ? (dz_k W_k)
 *               scale : 0, and db_{k-1} = the column sums of dz_{k-1}; the
 *               sums either straight into the gradient or as partial rows
 *               that the step's one reduction adds (struct dense_parts).
 * db_L comes with the head's partials.
 *
 * Which implementation: NCF_CUDA_DENSE pins it (one name for every layer,
 * or a comma-separated name per layer 2..L); else, on the first step with
 * rows on a device, each layer's candidates are timed (forward + backward,
 * CUDA events, a warm-up and DENSE_REPS runs, outside any graph capture)
 * and the fastest kept, as cuBLASLt's heuristics and autotuners do; under
 * the emulation and in the cost model's dry run the same code takes the
 * first candidate in the order fused, lt, plain.  Said at -v, kept for
 * ncf_backend_describe and bench_gpu.  fp16 leaves lt out unless pinned
 * (cuBLASLt's ReLU need not keep a NaN, which loss scaling must see).
 */
#ifndef NCF_CUDA_DENSE_CUH
#define NCF_CUDA_DENSE_CUH

#include "state.cuh"

namespace NCF_CUDA_NS {

struct step; /* step.cuh */

enum dense_impl { DENSE_FUSED, DENSE_LT, DENSE_PLAIN, DENSE_IMPLS };
enum { DENSE_REPS = 3 };
extern const char *const dense_name[DENSE_IMPLS];

/* The choice of a backend and what its implementations keep. */
struct dense {
	int pin[NCF_MAX_LAYERS];  /* layer k's pinned implementation, -1: choose */
	int impl[NCF_MAX_LAYERS]; /* layer k's implementation, once chosen */
	int chosen;		  /* impl[] is settled */
	int how;		  /* DENSE_PINNED, DENSE_TIMED or DENSE_ORDER */
	float ms[NCF_MAX_LAYERS][DENSE_IMPLS]; /* forward + backward, ms; -1 not timed */
	void *aux[NCF_MAX_LAYERS];	       /* lt: the ReLU bit masks of layers 2..L-1 */
	size_t aux_cap;			       /* rows they hold */
};
enum { DENSE_PINNED, DENSE_TIMED, DENSE_ORDER };

/* Where layer k's backward leaves the sums it makes: bias (db_{k-1}) and
 * w (dW_k) partial rows for reduce_partials_cuda, or NULL where it writes
 * the gradient itself. */
struct dense_parts {
	float *bias, *w;
};

/* c->dense for shape s with the pins of spec (NCF_CUDA_DENSE: NULL or ""
 * none, "fused", "lt", "plain", or one of them per layer 2..L separated by
 * commas).  Returns 0 or -1 (reported: a name it does not know, or a
 * count of names that is not the number of hidden layers above the
 * first). */
int dense_open(struct cu *c, const struct ncf_shape *s, const char *spec);
void dense_free(struct cu *c);
/* Does implementation impl take layer k of s (whatever the activations'
 * type: what fp16 leaves out is the choice's to say)? */
int dense_takes(int impl, const struct ncf_shape *s, uint32_t k);
/* The buffers the implementations need for st's rows (lt's masks and
 * handle), before any launch.  Returns 0 or -1. */
int dense_prepare(const struct step *st);
/* Settle each layer's implementation on st's rows (a step with rows; once
 * per backend): pinned, timed on the device, or the fixed order.  Its
 * launches are plain (never inside a capture) and write only buffers the
 * step writes again.  Returns 0 or -1. */
int dense_choose(const struct step *st);
/* The partial rows of layer k's backward in implementation impl (below:
 * layer k - 1's), from *at on: p's pointers and their segments appended to
 * m; at and m NULL only count.  Returns the floats taken. */
size_t dense_parts_of(const struct step *st, uint32_t k, int impl, int below, float *at,
		      struct dense_parts *p, part_map *m);
/* Layer k's forward and backward in implementation impl (st's rows, c's
 * buffers; T the activations' type).  Return 0 or -1 (reported). */
template <typename T> int dense_forward(const struct step *st, uint32_t k, int impl);
template <typename T>
int dense_backward(const struct step *st, uint32_t k, int impl, const struct dense_parts &p);
/* names[k] = the name of layer k's implementation (k = 2..L), NULL where
 * there is no such layer or no choice yet. */
void dense_names(const struct cu *c, const struct ncf_shape *s, const char **names);
/* The choice as key<TAB>value lines: dense_layer_K<TAB>name (how), and
 * the times measured. */
void dense_describe(const struct cu *c, const struct ncf_shape *s, FILE *out);

} /* namespace NCF_CUDA_NS */

#endif
