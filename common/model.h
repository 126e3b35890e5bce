/*
 * model.h - NeuMF as NVIDIA defines it (DESIGN.md section 3): the shape,
 * the layout of all parameters in one flat float vector, the
 * initialisation, the hyperparameters and NVIDIA's defaults for all of
 * them, a whole model in memory (what a model file holds), the precisions
 * a backend computes in, and what every backend's training step shares
 * (the epoch's samples, Adam's constants).
 *
 * The legend of every file (DESIGN.md section 8): B batch, U users, I
 * items, F GMF factors, H_0..H_L the MLP widths (layers[]; H_0 = 2M, M
 * the MLP embedding width), P training positives, N evaluation negatives
 * per user.  The four embedding tables are named by their role: gmf_user,
 * gmf_item, mlp_user, mlp_item.
 *
 *   GMF:  g = gmf_user[u] * gmf_item[i]                        (F)
 *   MLP:  x = [mlp_user[u], mlp_item[i]]                       (2M)
 *         h_l = dropout(relu(W_l h_{l-1} + b_l)), l = 1..L     (H_l)
 *   head: logit = w . [g, h_L] + b                             (1)
 *
 * The flat vector holds, in this order (row-major, PyTorch's Linear
 * layout: W_l is (H_l, H_{l-1})):
 *   gmf_user (U, F) | gmf_item (I, F) | mlp_user (U, M) | mlp_item (I, M) |
 *   W_1 (H_1, 2M) | b_1 (H_1) | ... | W_L | b_L | w (F + H_L) | b (1)
 * Embeddings come first, the dense part after it (ncf_layout.dense).
 */
#ifndef NCF_MODEL_H
#define NCF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"

#define NCF_MAX_LAYERS 8

struct ncf_shape {
	uint32_t users;			 /* U */
	uint32_t items;			 /* I */
	uint32_t factors;		 /* F */
	uint32_t n_layers;		 /* entries in layers, >= 2 */
	uint32_t layers[NCF_MAX_LAYERS]; /* 2M, H_1, ..., H_L (NVIDIA: 256,256,128,64) */
};

struct ncf_layout {
	size_t gmf_user, gmf_item;     /* (U, F), (I, F) */
	size_t mlp_user, mlp_item;     /* (U, M), (I, M) */
	size_t w[NCF_MAX_LAYERS];      /* W_l for l = 1..L at w[l] (w[0] unused) */
	size_t b[NCF_MAX_LAYERS];      /* b_l */
	size_t head_w, head_b;	       /* w (F + H_L), b (1) */
	size_t dense;		       /* first dense parameter (= W_1) */
	size_t total;		       /* floats in all */
};

struct ncf_hparams {
	float lr;	     /* Adam learning rate (NVIDIA 0.0045) */
	float beta1;	     /* 0.25 */
	float beta2;	     /* 0.5 */
	float eps;	     /* 1e-8 */
	float dropout;	     /* 0.5; 0 = none */
	uint32_t negatives;  /* per positive (4) */
	uint32_t true_neg;   /* reject training positives as negatives */
	uint64_t batch;	     /* global batch (2^20) */
	uint64_t seed;	     /* of initialisation, stream and dropout */
};

/* What a backend computes in (ncf_backend_open): fp32, or NVIDIA's AMP
 * meaning for the 16-bit ones (16-bit operands of the products, fp32 sums,
 * master weights and Adam). */
enum ncf_precision {
	NCF_PRECISION_DEFAULT = 0, /* tf32 on GPUs that have it, fp32 on the CPU */
	NCF_PRECISION_FP32 = 1,
	NCF_PRECISION_TF32 = 2,
	NCF_PRECISION_BF16 = 3,
	NCF_PRECISION_FP16 = 4,
};
/* "fp32", "tf32", "bf16", "fp16" or "default". */
const char *ncf_precision_name(enum ncf_precision p);

/* A model: what ncf-eval and ncf-infer need of a checkpoint or a
 * safetensors file (model_file.h reads either, safetensors.h writes one). */
struct ncf_model {
	struct ncf_shape shape;
	struct ncf_hparams hp; /* NVIDIA's defaults where the file has none */
	uint32_t *user_ids;    /* (U) original ids; NULL when the file has none */
	uint32_t *item_ids;    /* (I) original ids; NULL when the file has none */
	struct ncf_names user_names, item_names; /* (U), (I) where the ids are text
						    (names.h; user_ids the indices) */
	float *params;	       /* (T) in the layout below, T = layout total */
};
/* Free what m holds (a zeroed m: nothing); m can be used again. */
void ncf_model_free(struct ncf_model *m);

/* NVIDIA's hyperparameters: Adam lr 0.0045, betas 0.25 and 0.5, eps 1e-8,
 * dropout 0.5, 4 negatives, batch 2^20, seed 1; the tools' defaults and
 * what a file without any is taken to hold. */
void ncf_hparams_nvidia(struct ncf_hparams *hp);
/* NVIDIA's model on users and items: 64 GMF factors, MLP 256-256-128-64. */
void ncf_shape_nvidia(struct ncf_shape *s, uint32_t users, uint32_t items);
/* NVIDIA's run: 30 epochs, HR and NDCG at 10. */
extern const uint32_t ncf_nvidia_epochs, ncf_nvidia_topk;

/* M and L of a shape. */
static inline uint32_t ncf_shape_m(const struct ncf_shape *s)
{
	return s->layers[0] / 2;
}
static inline uint32_t ncf_shape_hidden(const struct ncf_shape *s)
{
	return s->n_layers - 1;
}
static inline uint32_t ncf_shape_last(const struct ncf_shape *s)
{
	return s->layers[s->n_layers - 1];
}

/* Fill the layout of shape s. */
void ncf_layout_make(const struct ncf_shape *s, struct ncf_layout *l);

/*
 * NVIDIA's initialisation, from Philox (NCF_RNG_INIT, a = tensor number):
 * embeddings N(0, 0.01); MLP weights Glorot uniform; head weight LeCun
 * uniform (limit sqrt(3 / fan_in)); biases uniform +-1/sqrt(fan_in).
 * params has l->total floats.
 */
void ncf_model_init(const struct ncf_shape *s, const struct ncf_layout *l, uint64_t seed,
		    float *params);

/*
 * A model's parameters onto another table of users and items, for starting
 * a run from a model's weights (ncf-train --init): from (the layout of
 * shape fs) onto to (shape ts: the same factors and layers, other users
 * and items).  The dense part is copied as it is; user row r of each
 * embedding goes to row user_at[r] of to's (NULL: row r, fs->users <=
 * ts->users), item rows likewise through item_at (I of from).  Rows of to
 * that no row of from reaches keep what to held (a fresh initialisation).
 */
void ncf_params_remap(const struct ncf_shape *fs, const float *from, const struct ncf_shape *ts,
		      float *to, const int64_t *user_at, const int64_t *item_at);

/* Multiply-adds per sample of the dense layers: unfactorized (the MLP as
 * written) and the part that runs per sample with the first layer
 * factorized (layers 2..L plus head and GMF). */
double ncf_dense_macs_per_sample(const struct ncf_shape *s);
double ncf_dense_macs_factorized(const struct ncf_shape *s);

/* Check a shape: first layer even, sizes in range.  Returns NULL or a
 * message. */
const char *ncf_shape_check(const struct ncf_shape *s);

/* What every training step shares, whichever backend runs it (the cpu's,
 * the reference, the cuda module's), below all of them: */

/*
 * The samples of an epoch, S = positives (1 + negatives) + train_negatives
 * (ncf_epoch_samples, ncf_hd.h: P positives, k drawn negatives each, E
 * explicit negatives), after checking that positions [first, first + n)
 * lie inside it (the permutation is defined on [0, S) only).  Returns S,
 * or 0 after reporting (who names the backend).
 */
uint64_t ncf_epoch_check(const char *who, int64_t positives, uint32_t negatives,
			 uint64_t train_negatives, uint64_t first, uint64_t n);

/* Adam's constants for the step-th update (1-based) of hp (ncf_hd.h's
 * ncf_adam_update applies them). */
struct ncf_adam_k;
void ncf_adam_constants(const struct ncf_hparams *hp, uint64_t step, struct ncf_adam_k *k);

#endif
