/*
 * model_file.h - a NeuMF model from a file of either kind, what ncf-eval
 * and ncf-infer load with -m: an ncf-train checkpoint (.ncfm, ckpt.h,
 * ncf-model(5)) or a safetensors file holding NVIDIA's PyTorch NeuMF
 * state_dict (safetensors.h), told apart by content.
 *
 * Legend: U users, I items, F GMF factors, T parameters (model.h).
 */
#ifndef NCF_MODEL_FILE_H
#define NCF_MODEL_FILE_H

#include <stdint.h>

#include "model.h"

enum ncf_model_format {
	NCF_MODEL_NCFM = 1,	   /* an ncf-train checkpoint */
	NCF_MODEL_SAFETENSORS = 2, /* NVIDIA's state_dict names, safetensors */
};

struct ncf_model_file {
	enum ncf_model_format format;
	struct ncf_shape shape;
	struct ncf_hparams hp; /* NVIDIA's defaults where the file has none */
	uint32_t *user_ids;    /* (U) original ids; NULL when the file has none */
	uint32_t *item_ids;    /* (I) original ids; NULL when the file has none */
	float *params;	       /* (T) in model.h's layout */
};

/* What the caller needs the model to fit (from a cache): 0 = any size. */
struct ncf_model_want {
	uint32_t users, items;
};

/*
 * Read path ("-": stdin) into m.  A file that begins with "NCF" is read as
 * a checkpoint; any other as safetensors.  From a pipe only the first byte
 * can be looked at: 'N' is a checkpoint (a safetensors file begins with its
 * header length, which safetensors writers pad to a multiple of 8, so its
 * first byte is never 'N').  want (may be NULL) is checked by the
 * safetensors reader, naming the tensor that does not fit; for a
 * checkpoint the caller compares sizes and fingerprints itself.
 * Returns 0, or -1 after a one-line report naming the file.
 */
int ncf_model_file_read(const char *path, const struct ncf_model_want *want,
			struct ncf_model_file *m);
void ncf_model_file_free(struct ncf_model_file *m);

/* NVIDIA's hyperparameters (lr 0.0045, betas 0.25 and 0.5, eps 1e-8,
 * dropout 0.5, 4 negatives, batch 2^20, seed 1), for files without any. */
void ncf_hparams_nvidia(struct ncf_hparams *hp);
/* NVIDIA's model on users and items: 64 GMF factors, MLP 256-256-128-64. */
void ncf_shape_nvidia(struct ncf_shape *s, uint32_t users, uint32_t items);

struct ncf_cache;
/*
 * Say (a warning, once per process) that the model at model_path, which
 * has no original ids, is read with its rows taken as the users and items
 * of the cache c at cache_path, and how to check that this is right: it
 * is only when c was made from the very ratings file the model was
 * trained on (NVIDIA's convert.py and ncf-prep both number users and
 * items in order of first appearance).
 */
void ncf_model_file_note_no_ids(const char *model_path, const char *cache_path,
				const struct ncf_cache *c);

/* The fingerprint of the cache the model's ids came from (what
 * ncf_cache_fingerprint gives for that cache).  m must have ids. */
uint32_t ncf_model_file_fingerprint(const struct ncf_model_file *m);

#endif
