/*
 * infer.h - the model ncf-infer scores with (model_load.c) and its two
 * streaming modes: --score (score.c) and --recommend (recommend.c).  The
 * benchmark is bench.h's, the export export.h's.
 */
#ifndef NCF_INFER_H
#define NCF_INFER_H

#include <stdint.h>

#include "backend.h"
#include "cache.h"
#include "idindex.h"
#include "lines.h"
#include "model.h"

/* A model to score with: its shape, parameters and original ids (which a
 * safetensors file converted from NVIDIA's checkpoint may lack: NULL). */
struct infer_model {
	struct ncf_model model;		 /* shape, hp, params; its original ids
					  * (numbers or names) or NULL */
	uint32_t fingerprint;		 /* of the ids (0 without them) */
	struct ncf_idindex users, items; /* original id -> index, for the streams */
};

/* --random-model's users and items unless given: ml-20m's, as NVIDIA's
 * inference.py (--n_users, --n_items). */
#define INFER_RANDOM_USERS 138493
#define INFER_RANDOM_ITEMS 26744

/* A model of shape s (checked) with weights initialised from seed, ids
 * 1..U and 1..I (--random-model). */
void infer_model_random(struct infer_model *m, const struct ncf_shape *s, uint64_t seed);
/* A checkpoint or a safetensors file (model_file.h).  Returns 0 or -1
 * (reported). */
int infer_model_load(struct infer_model *m, const char *path);
/* --ids CACHE: the cache's ids for a model without any; a model with ids
 * must have the same.  Returns 0 or -1 (reported). */
int infer_model_ids_from_cache(struct infer_model *m, const char *model_path,
			       const char *cache_path);
/* --exclude-seen CACHE into *seen, which must be the model's data set (a
 * model without ids takes the cache's).  Returns 0 or -1 (reported). */
int infer_model_read_seen(struct infer_model *m, const char *model_path, const char *path,
			  struct ncf_cache *seen);
void infer_model_free(struct infer_model *m);

/* The ids of line s (want: 1 or 2) as m speaks them: numbers only, as
 * ncf_parse_ids reads them, for a model of numbered ids; with names, as
 * ncf_id_split.  Returns 0 or -1 (not such a line). */
int infer_read_ids(const struct infer_model *m, const char *s, int want, struct ncf_id *a,
		   struct ncf_id *b);
/* An id for a message: a number's digits, or the name escaped. */

/* --score: "user item" lines from l, one probability per line on stdout
 * ("nan" for an unknown id with skip).  m's index is built.  Without skip
 * an unknown id ends it, every line before it scored and written (and
 * said how many).  Returns 0 or -1 (reported). */
int infer_score(struct ncf_backend *be, const struct infer_model *m, struct ncf_lines *l,
		int skip);
/* --recommend K: user ids from l, each user's K best items on stdout as
 * user<TAB>item<TAB>probability, best first; seen (may be NULL) leaves out
 * the user's training items.  Returns 0 or -1 (reported). */
int infer_recommend(struct ncf_backend *be, const struct infer_model *m, struct ncf_lines *l,
		    uint32_t K, const struct ncf_cache *seen, int skip);

#endif
