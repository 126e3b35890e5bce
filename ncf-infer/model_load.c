/*
 * model_load.c - the model ncf-infer runs: read from a checkpoint or
 * safetensors (common/model_file.c), or random (NVIDIA's sizes unless
 * given); its original ids, from the model or from a cache (--ids,
 * --exclude-seen).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "infer.h"
#include "model_file.h"

void infer_model_random(struct infer_model *m, const struct ncf_shape *shape, uint64_t seed)
{
	struct ncf_shape s = *shape;
	m->model.shape = s;
	ncf_hparams_nvidia(&m->model.hp);
	m->model.hp.seed = seed;
	struct ncf_layout L;
	ncf_layout_make(&s, &L);
	m->model.params = ncf_xmalloc(L.total * sizeof(float));
	ncf_model_init(&s, &L, seed, m->model.params);
	m->model.user_ids = ncf_xmalloc((size_t)s.users * sizeof(uint32_t));
	m->model.item_ids = ncf_xmalloc((size_t)s.items * sizeof(uint32_t));
	for (uint32_t u = 0; u < s.users; u++)
		m->model.user_ids[u] = u + 1;
	for (uint32_t i = 0; i < s.items; i++)
		m->model.item_ids[i] = i + 1;
}

int infer_model_load(struct infer_model *m, const char *path)
{
	if (ncf_model_file_read(path, NULL, &m->model) != 0)
		return -1;
	m->fingerprint = m->model.user_ids ? ncf_model_file_fingerprint(&m->model) : 0;
	return 0;
}

int infer_model_ids_from_cache(struct infer_model *m, const char *model_path,
			       const char *cache_path)
{
	struct ncf_cache c;
	if (ncf_cache_read(cache_path, &c) != 0)
		return -1;
	uint32_t fp = ncf_cache_fingerprint(&c);
	int rc = 0;
	if (c.users != m->model.shape.users || c.items != m->model.shape.items) {
		ncf_error("%s and %s do not belong together: the model has %u users and %u items, "
			  "the cache %u and %u",
			  model_path, cache_path, m->model.shape.users, m->model.shape.items,
			  c.users, c.items);
		rc = -1;
	} else if (m->model.user_ids && fp != m->fingerprint) {
		ncf_error("%s and %s do not belong together: they have other original ids "
			  "(fingerprints %08x and %08x)",
			  model_path, cache_path, m->fingerprint, fp);
		rc = -1;
	} else if (!m->model.user_ids) {
		ncf_model_file_note_no_ids(model_path, cache_path, &c);
		m->model.user_ids = c.user_ids;
		m->model.item_ids = c.item_ids;
		m->model.user_names = c.user_names;
		m->model.item_names = c.item_names;
		c.user_ids = c.item_ids = NULL;
		memset(&c.user_names, 0, sizeof c.user_names);
		memset(&c.item_names, 0, sizeof c.item_names);
		m->fingerprint = fp;
	}
	ncf_cache_free(&c);
	return rc;
}

int infer_model_read_seen(struct infer_model *m, const char *model_path, const char *path,
			  struct ncf_cache *seen)
{
	if (ncf_cache_read(path, seen) != 0)
		return -1;
	uint32_t fp_seen = ncf_cache_fingerprint(seen);
	if (!m->model.user_ids && seen->users == m->model.shape.users &&
	    seen->items == m->model.shape.items) {
		/* a model without ids: the rows are the cache's */
		ncf_model_file_note_no_ids(model_path, path, seen);
		m->model.user_ids = ncf_xmalloc((size_t)seen->users * sizeof *m->model.user_ids);
		m->model.item_ids = ncf_xmalloc((size_t)seen->items * sizeof *m->model.item_ids);
		memcpy(m->model.user_ids, seen->user_ids,
		       (size_t)seen->users * sizeof *m->model.user_ids);
		memcpy(m->model.item_ids, seen->item_ids,
		       (size_t)seen->items * sizeof *m->model.item_ids);
		ncf_names_copy(&m->model.user_names, &seen->user_names);
		ncf_names_copy(&m->model.item_names, &seen->item_names);
		m->fingerprint = fp_seen;
	}
	if (fp_seen != m->fingerprint || seen->users != m->model.shape.users ||
	    seen->items != m->model.shape.items) {
		ncf_error("%s and %s do not belong together: the model was trained on another "
			  "data set (%u users, %u items; the cache has %u, %u)",
			  model_path, path, m->model.shape.users, m->model.shape.items, seen->users,
			  seen->items);
		return -1;
	}
	return 0;
}

void infer_model_free(struct infer_model *m)
{
	ncf_idindex_free(&m->users);
	ncf_idindex_free(&m->items);
	ncf_model_free(&m->model);
	memset(m, 0, sizeof *m);
}

int infer_read_ids(const struct infer_model *m, const char *s, int want, struct ncf_id *a,
		   struct ncf_id *b)
{
	if (m->model.user_names.n || m->model.item_names.n)
		return ncf_id_split(s, want, a, b);
	uint32_t x, y = 0;
	if (ncf_parse_ids(s, want, &x, &y) != 0)
		return -1;
	*a = (struct ncf_id){NULL, 0, x};
	*b = (struct ncf_id){NULL, 0, y};
	return 0;
}
