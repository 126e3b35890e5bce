/*
 * model_file.h - a NeuMF model from a file of either kind, what ncf-eval
 * and ncf-infer load with -m: an ncf-train checkpoint (.ncfm, ckpt.h,
 * ncf-model(5)) or a safetensors file holding NVIDIA's PyTorch NeuMF
 * state_dict (safetensors.h), told apart by content, into a struct
 * ncf_model (model.h).  It calls the two readers; they call nothing here.
 *
 * Legend: U users, I items, F GMF factors, T parameters (model.h).
 */
#ifndef NCF_MODEL_FILE_H
#define NCF_MODEL_FILE_H

#include <stdint.h>

#include "model.h"
#include "safetensors.h"

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
			struct ncf_model *m);

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
uint32_t ncf_model_file_fingerprint(const struct ncf_model *m);

#endif
