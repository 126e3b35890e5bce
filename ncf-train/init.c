/*
 * init.c - ncf-train --init MODEL: a new run that starts from a model's
 * weights (fine-tuning), NVIDIA's --load_checkpoint_path before training.
 *
 * The model (an ncf-train model or checkpoint, or safetensors with
 * NVIDIA's state_dict names: model_file.h) gives the shape and the
 * weights, nothing else: the run keeps its own settings (learning rate,
 * negatives, batch, dropout, seed, ...), and its optimizer starts fresh
 * (Adam's moments zero, step 0, epoch 0, no best HR yet).  The model's
 * rows go to the cache's users and items of the same original ids, so the
 * cache may hold more of them than the model (new users and items start
 * as a fresh model's rows: NVIDIA's initialisation from the run's seed);
 * a model without ids (NVIDIA's, converted) fits only a cache of its
 * counts, row for row, as ncf-eval reads one.  What it refuses: a shape
 * given on the command line that is not the model's, a cache that lacks
 * some of the model's ids, a model without ids on a cache of other counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "idindex.h"
#include "model_file.h"
#include "train.h"

/* "--factors 8 --layers 16,16,8" of shape s into buf (len bytes). */
static const char *shape_words(const struct ncf_shape *s, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "--factors %u --layers ", s->factors);
	for (uint32_t k = 0; k < s->n_layers && n < len; k++)
		n += (size_t)snprintf(buf + n, len - n, "%s%u", k ? "," : "", s->layers[k]);
	return buf;
}

static int same_layers(const struct ncf_shape *a, const struct ncf_shape *b)
{
	return a->n_layers == b->n_layers &&
	       !memcmp(a->layers, b->layers, a->n_layers * sizeof a->layers[0]);
}

/* The model's shape wins; one given on the command line must be it.
 * Returns 0, or -1 (reported). */
static int check_shape(const struct train_opts *o, const struct ncf_shape *ms)
{
	int factors = (o->given & (1u << TRAIN_SET_FACTORS)) && o->shape.factors != ms->factors;
	int layers = (o->given & (1u << TRAIN_SET_LAYERS)) && !same_layers(&o->shape, ms);
	if (!factors && !layers)
		return 0;
	char model[160], given[160];
	shape_words(ms, model, sizeof model);
	shape_words(&o->shape, given, sizeof given);
	/* the words of what was given: "--factors 16", "--layers 8,8", or both */
	const char *g = given;
	if (!factors)
		g = strstr(given, "--layers");
	else if (!layers)
		*strstr(given, " --layers") = 0;
	ncf_error("--init %s: the model has %s and %s was given: fine-tuning keeps the model's "
		  "shape (leave %s out), or train a new model without --init",
		  o->init, model, g, factors && layers ? "them" : "it");
	return -1;
}

/* "5 of the model's 55 users (user 51 among them)" into buf, or "" when
 * none is missing. */
static const char *missing_words(const char *what, const struct ncf_id_list *model,
				 size_t missing, size_t first, char *buf, size_t len)
{
	char id[300];
	buf[0] = 0;
	if (missing)
		snprintf(buf, len, "%zu of the model's %zu %ss (%s %s among them)", missing, model->n,
			 what, what, ncf_id_say(model, first, id, sizeof id));
	return buf;
}

/*
 * Where the model's rows go among the cache's: *user_at (U of the model)
 * and *item_at (I), malloc'd; NULL for both when the model has no ids (row
 * for row, the counts checked).  Returns 0, or -1 (reported).
 */
static int match_rows(const struct train_opts *o, const struct ncf_cache *c,
		      const struct ncf_model *m, int64_t **user_at, int64_t **item_at)
{
	*user_at = *item_at = NULL;
	if (!m->user_ids) {
		if (m->shape.users == c->users && m->shape.items == c->items) {
			ncf_model_file_note_no_ids(o->init, o->cache_path, c);
			return 0;
		}
		ncf_error("--init %s has no original ids and %u users, %u items; %s has %u users, "
			  "%u items: without ids the model's rows are taken as the cache's, which "
			  "needs the counts it was trained on; give the cache made from its "
			  "ratings, or a model with ids (ncf-infer -m MODEL --ids CACHE --export "
			  "M.safetensors)",
			  o->init, m->shape.users, m->shape.items, o->cache_path, c->users, c->items);
		return -1;
	}
	/* the model's and the cache's ids of each kind: numbers, or names
	 * where the column is named */
	struct ncf_id_list mu = {m->shape.users, m->user_ids, &m->user_names},
			   mi = {m->shape.items, m->item_ids, &m->item_names},
			   cu = {c->users, c->user_ids, &c->user_names},
			   ci = {c->items, c->item_ids, &c->item_names};
	*user_at = ncf_xmalloc(mu.n * sizeof **user_at);
	*item_at = ncf_xmalloc(mi.n * sizeof **item_at);
	size_t fu = 0, fi = 0;
	size_t nu = ncf_ids_match(&mu, &cu, *user_at, &fu);
	size_t ni = ncf_ids_match(&mi, &ci, *item_at, &fi);
	if (!nu && !ni)
		return 0;
	char us[400], is[400];
	missing_words("user", &mu, nu, fu, us, sizeof us);
	missing_words("item", &mi, ni, fi, is, sizeof is);
	ncf_error("--init %s: %s lacks %s%s%s: fine-tuning needs a cache whose users and items "
		  "include the model's; make it with ncf-prep from ratings that hold them",
		  o->init, o->cache_path, us, nu && ni ? " and " : "", is);
	free(*user_at), free(*item_at);
	*user_at = *item_at = NULL;
	return -1;
}

/* Say where the run starts from (-q: not). */
static void say_start(const struct train_opts *o, const struct ncf_cache *c,
		      const struct ncf_model *m, const char *model_shape)
{
	if (!m->user_ids || (m->shape.users == c->users && m->shape.items == c->items))
		ncf_info("--init %s: starting from its weights (%s) on the cache's %u users and %u "
			 "items, with a fresh optimizer and this run's settings",
			 o->init, model_shape, c->users, c->items);
	else
		ncf_info("--init %s: starting from its weights (%s) for %u of the cache's %u users "
			 "and %u of its %u items, matched by original id (the others start as a "
			 "fresh model's, seed %llu), with a fresh optimizer and this run's settings",
			 o->init, model_shape, m->shape.users, c->users, m->shape.items, c->items,
			 (unsigned long long)o->hp.seed);
}

int train_init_state(struct train_run *r, const struct train_opts *o)
{
	struct ncf_model m;
	if (ncf_model_file_read(o->init, NULL, &m) != 0)
		return -1;
	int64_t *user_at = NULL, *item_at = NULL;
	if (check_shape(o, &m.shape) != 0 || match_rows(o, &r->cache, &m, &user_at, &item_at) != 0) {
		ncf_model_free(&m);
		return -1;
	}
	struct ncf_shape shape = m.shape;
	shape.users = r->cache.users;
	shape.items = r->cache.items;
	struct ncf_layout L;
	ncf_layout_make(&shape, &L);
	struct ncf_ckpt *ck = &r->ck;
	ck->shape = shape;
	ck->hp = o->hp;
	ck->params = ncf_xmalloc(L.total * sizeof(float));
	ck->m = ncf_xcalloc(L.total, sizeof(float));
	ck->v = ncf_xcalloc(L.total, sizeof(float));
	/* the rows no row of the model reaches: a fresh model's */
	ncf_model_init(&shape, &L, o->hp.seed, ck->params);
	ncf_params_remap(&m.shape, m.params, &shape, ck->params, user_at, item_at);
	ck->best_hr = ck->best_ndcg = ck->last_hr = ck->last_ndcg = -1;
	ck->topk = r->topk;
	char words[160];
	say_start(o, &r->cache, &m, shape_words(&m.shape, words, sizeof words));
	free(user_at), free(item_at);
	ncf_model_free(&m);
	return 0;
}
