/*
 * run.c - the setup of an ncf-train run and its end: the cache, the
 * starting state (fresh, from --init's weights (init.c), or resumed from a
 * checkpoint), the backend, and with several ranks the check that every
 * rank starts from the same place.  The epochs are epoch.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "err.h"
#include "evaluate.h"
#include "io.h"
#include "ncf_hd.h"
#include "train.h"
#include "usage.h"

/* A fresh model of o's shape on the cache's users and items, NVIDIA's
 * initialisation, Adam's moments zero. */
static void fresh_state(struct train_run *r, const struct train_opts *o)
{
	struct ncf_shape shape = o->shape;
	shape.users = r->cache.users;
	shape.items = r->cache.items;
	const char *why = ncf_shape_check(&shape);
	if (why)
		ncf_usage_error("%s", why);
	struct ncf_layout L;
	ncf_layout_make(&shape, &L);
	r->ck.shape = shape;
	r->ck.hp = o->hp;
	r->ck.params = ncf_xmalloc(L.total * sizeof(float));
	r->ck.m = ncf_xcalloc(L.total, sizeof(float));
	r->ck.v = ncf_xcalloc(L.total, sizeof(float));
	ncf_model_init(&shape, &L, o->hp.seed, r->ck.params);
	r->ck.best_hr = r->ck.best_ndcg = r->ck.last_hr = r->ck.last_ndcg = -1;
	r->ck.topk = r->topk;
}

/* Setting k of a shape and hyperparameters as its option: "--batch-size
 * 4096", into buf (len bytes). */
static const char *setting(enum train_setting k, const struct ncf_shape *s,
			   const struct ncf_hparams *hp, char *buf, size_t len)
{
	size_t n = 0;
	switch (k) {
	case TRAIN_SET_BATCH:
		snprintf(buf, len, "--batch-size %llu", (unsigned long long)hp->batch);
		break;
	case TRAIN_SET_FACTORS:
		snprintf(buf, len, "--factors %u", s->factors);
		break;
	case TRAIN_SET_LAYERS:
		n = (size_t)snprintf(buf, len, "--layers ");
		for (uint32_t j = 0; j < s->n_layers && n < len; j++)
			n += (size_t)snprintf(buf + n, len - n, "%s%u", j ? "," : "", s->layers[j]);
		break;
	case TRAIN_SET_NEGATIVES:
		snprintf(buf, len, "--negative-samples %u", hp->negatives);
		break;
	case TRAIN_SET_TRUENEG:
		snprintf(buf, len, "--true-negatives %s", hp->true_neg ? "on" : "off");
		break;
	case TRAIN_SET_LR:
		snprintf(buf, len, "--learning-rate %g", hp->lr);
		break;
	case TRAIN_SET_BETA1:
		snprintf(buf, len, "--beta1 %g", hp->beta1);
		break;
	case TRAIN_SET_BETA2:
		snprintf(buf, len, "--beta2 %g", hp->beta2);
		break;
	case TRAIN_SET_EPS:
		snprintf(buf, len, "--eps %g", hp->eps);
		break;
	case TRAIN_SET_DROPOUT:
		snprintf(buf, len, "--dropout %g", hp->dropout);
		break;
	default:
		snprintf(buf, len, "--seed %llu", (unsigned long long)hp->seed);
	}
	return buf;
}

/* The model options given with --resume, each with the model's own value:
 * "--batch-size 4096 (the model's: 8192), --dropout 0.1 (0.5)". */
static const char *ignored_settings(const struct train_opts *o, const struct ncf_ckpt *ck,
				    char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = 0;
	for (int k = 0; k < TRAIN_SETTINGS && n < len; k++) {
		if (!(o->given & (1u << k)))
			continue;
		char given[256], model[256];
		setting((enum train_setting)k, &o->shape, &o->hp, given, sizeof given);
		setting((enum train_setting)k, &ck->shape, &ck->hp, model, sizeof model);
		n += (size_t)snprintf(buf + n, len - n, "%s%s (%s%s)", n ? ", " : "", given,
				      n ? "" : "the model's: ", strchr(model, ' ') + 1);
	}
	return buf;
}

/* The state of --resume FILE, which must have been trained on this cache.
 * Returns 0 or -1 (reported). */
static int resumed_state(struct train_run *r, const struct train_opts *o, uint32_t fingerprint)
{
	if (ncf_ckpt_read(o->resume, &r->ck, 1) != 0)
		return -1;
	if (r->ck.fingerprint != fingerprint ||
	    r->ck.shape.users != r->cache.users || r->ck.shape.items != r->cache.items ||
	    r->ck.train_positives != (uint64_t)r->cache.train_positives ||
	    r->ck.train_negatives != r->cache.train_negatives) {
		ncf_error("%s was trained on another data set than %s (%u users, %u items vs "
			  "%u, %u); resume with the cache it was trained on",
			  o->resume, o->cache_path, r->ck.shape.users, r->ck.shape.items,
			  r->cache.users, r->cache.items);
		return -1;
	}
	if (o->given) {
		char list[1024];
		ncf_warn("--resume: the model's shape and hyperparameters come from %s; ignoring "
			 "%s",
			 o->resume, ignored_settings(o, &r->ck, list, sizeof list));
	}
	r->topk = r->ck.topk ? r->ck.topk : r->topk;
	free(r->ck.user_ids);
	free(r->ck.item_ids);
	ncf_names_free(&r->ck.user_names); /* the cache's go in (its fingerprint held them) */
	ncf_names_free(&r->ck.item_names);
	return 0;
}

/* K must be below the cache's candidates per user: a K given is refused,
 * the default or a resumed run's said to mean nothing (ncf_topk_refuse).
 * Returns 0, or -1 (reported; r->status 2). */
static int check_topk(struct train_run *r, const struct train_opts *o)
{
	int given = o->topk_given && !o->resume;
	if (ncf_topk_refuse(r->topk, given, o->cache_path, &r->cache) != 0) {
		r->status = NCF_EXIT_USAGE;
		return -1;
	}
	ncf_topk_warn(r->topk, given, o->cache_path, &r->cache);
	return 0;
}

/* The cache, then the starting state; the checkpoint borrows the cache's
 * ids.  Returns 0 or -1 (reported). */
static int open_state(struct train_run *r, const struct train_opts *o)
{
	if (ncf_cache_read(o->cache_path, &r->cache) != 0)
		return -1;
	uint32_t fingerprint = ncf_cache_fingerprint(&r->cache);
	if (o->resume) {
		if (resumed_state(r, o, fingerprint) != 0)
			return -1;
	} else if (o->init) {
		if (train_init_state(r, o) != 0)
			return -1;
	} else {
		fresh_state(r, o);
	}
	r->ck.user_ids = r->cache.user_ids;
	r->ck.item_ids = r->cache.item_ids;
	r->ck.user_names = r->cache.user_names; /* borrowed too: a named cache's ids */
	r->ck.item_names = r->cache.item_names;
	r->ck.fingerprint = fingerprint;
	r->ck.train_positives = (uint64_t)r->cache.train_positives;
	r->ck.train_negatives = r->cache.train_negatives;

	if (check_topk(r, o) != 0)
		return -1;
	const struct ncf_hparams *hp = &r->ck.hp;
	uint64_t P = (uint64_t)r->cache.train_positives;
	if (P == 0) {
		ncf_error("%s has no training positives: nothing to train on", o->cache_path);
		return -1;
	}
	r->samples = ncf_epoch_samples(P, hp->negatives, r->cache.train_negatives);
	if (hp->negatives == 0 && r->cache.train_negatives == 0)
		ncf_warn("-n 0 and %s has no explicit negatives: every sample is a positive "
			 "(label 1), so nothing teaches the model what a user passes over; give "
			 "-n 1 or more",
			 o->cache_path);
	r->steps_per_epoch = (r->samples + hp->batch - 1) / hp->batch;
	if (hp->batch > r->samples) {
		/* the largest power of two that gives at least 20 steps */
		uint64_t b = 1;
		while (b * 2 <= r->samples / 20)
			b *= 2;
		ncf_warn("the batch (%llu) is larger than an epoch (%llu samples): each epoch is "
			 "one step over all samples; for about %llu steps an epoch give -b %llu",
			 (unsigned long long)hp->batch, (unsigned long long)r->samples,
			 (unsigned long long)((r->samples + b - 1) / b), (unsigned long long)b);
	}
	return 0;
}

/* Where the backend gives page-locked memory (a GPU), the state's host
 * arrays in it: the snapshot of every checkpoint copies into them at the
 * bus's speed (save.c).  Rank 0 only, the one that saves. */
static void pin_state(struct train_run *r)
{
	if (r->dist.rank != 0 || !ncf_backend_pins_host(&r->be))
		return;
	size_t n = r->be.layout.total * sizeof(float);
	float **a[3] = {&r->ck.params, &r->ck.m, &r->ck.v};
	for (int i = 0; i < 3; i++) {
		float *p = ncf_backend_host_alloc(&r->be, n);
		memcpy(p, *a[i], n);
		free(*a[i]);
		*a[i] = p;
	}
	r->pinned = 1;
}

static void unpin_state(struct train_run *r)
{
	if (!r->pinned)
		return;
	ncf_backend_host_free(&r->be, r->ck.params);
	ncf_backend_host_free(&r->be, r->ck.m);
	ncf_backend_host_free(&r->be, r->ck.v);
	r->ck.params = r->ck.m = r->ck.v = NULL;
	r->pinned = 0;
}

/* The backend, holding the starting state and the cache.  Returns 0, or
 * -1 with r->status set (3: the device is not available). */
static int open_backend(struct train_run *r, const struct train_opts *o)
{
	r->status = NCF_EXIT_FAIL;
	int rc = ncf_backend_open(&r->be, o->bo.device, &r->ck.shape, &r->ck.hp, o->bo.precision,
				  o->bo.threads, &r->dist);
	if (rc != 0) {
		if (rc == -3)
			r->status = NCF_EXIT_UNAVAILABLE;
		return -1;
	}
	r->be.step = r->ck.step;
	if (ncf_backend_set_state(&r->be, r->ck.params, r->ck.m, r->ck.v) != 0)
		return -1;
	pin_state(r);
	return ncf_backend_load_cache(&r->be, &r->cache, &r->mask, 1);
}

/*
 * What every rank must agree on before the first step: the data, the
 * starting model and the backend.  Fixed-width fields, widest first, so
 * that the struct has no padding and compares as bytes.
 */
struct start_digest {
	struct {
		uint64_t train_positives;
		uint64_t train_negatives;
		uint32_t fingerprint;
		uint32_t csr_crc;  /* offsets and training items */
		uint32_t eval_crc; /* test items and evaluation negatives */
		uint32_t neg_crc;  /* the explicit negatives (0 when none) */
	} data;
	struct {
		uint64_t batch, seed, step, position;
		uint32_t factors, n_layers, layers[NCF_MAX_LAYERS];
		float lr, beta1, beta2, eps, dropout;
		uint32_t negatives, true_neg, epoch;
		uint32_t params_crc;
		uint32_t zero;
	} model;
	char backend[16];
};

static void make_digest(const struct train_run *r, struct start_digest *d)
{
	const struct ncf_cache *c = &r->cache;
	const struct ncf_shape *s = &r->be.shape;
	const struct ncf_hparams *hp = &r->be.hp;
	memset(d, 0, sizeof *d);
	d->data.train_positives = (uint64_t)c->train_positives;
	d->data.fingerprint = r->ck.fingerprint;
	uint32_t crc = ncf_crc32c(0, c->offsets, ((size_t)c->users + 1) * sizeof *c->offsets);
	d->data.csr_crc =
		ncf_crc32c(crc, c->train_items, (size_t)c->train_positives * sizeof *c->train_items);
	crc = ncf_crc32c(0, c->test_items, (size_t)c->users * sizeof *c->test_items);
	d->data.eval_crc = ncf_crc32c(crc, c->eval_neg,
				      (size_t)c->users * c->eval_negatives * sizeof *c->eval_neg);
	d->data.train_negatives = c->train_negatives;
	if (c->train_negatives) {
		crc = ncf_crc32c(0, c->neg_offsets, ((size_t)c->users + 1) * sizeof *c->neg_offsets);
		d->data.neg_crc = ncf_crc32c(crc, c->neg_items,
					     (size_t)c->train_negatives * sizeof *c->neg_items);
	}
	d->model.batch = hp->batch;
	d->model.seed = hp->seed;
	d->model.step = r->ck.step;
	d->model.position = r->ck.position;
	d->model.factors = s->factors;
	d->model.n_layers = s->n_layers;
	for (uint32_t k = 0; k < s->n_layers && k < NCF_MAX_LAYERS; k++)
		d->model.layers[k] = s->layers[k];
	d->model.lr = hp->lr;
	d->model.beta1 = hp->beta1;
	d->model.beta2 = hp->beta2;
	d->model.eps = hp->eps;
	d->model.dropout = hp->dropout;
	d->model.negatives = hp->negatives;
	d->model.true_neg = hp->true_neg;
	d->model.epoch = r->ck.epoch;
	d->model.params_crc = ncf_crc32c(0, r->ck.params, r->be.layout.total * sizeof(float));
	snprintf(d->backend, sizeof d->backend, "%s", ncf_backend_name(&r->be));
}

/*
 * With several ranks, every rank must start from the same data, model and
 * device, or the collectives go out of step (a hang or a crash in MPI).
 * Rank 0 broadcasts its digest; a rank that differs says so and every
 * rank stops.  Returns 0 when all agree.
 */
static int ranks_agree(struct train_run *r)
{
	if (r->dist.size == 1)
		return 0;
	struct start_digest mine, rank0;
	make_digest(r, &mine);
	rank0 = mine;
	if (ncf_dist_bcast(&r->dist, &rank0, sizeof rank0) != 0)
		return -1;
	const char *what = NULL;
	if (memcmp(&mine.data, &rank0.data, sizeof mine.data) != 0)
		what = "its cache differs from rank 0's (another file or another version of it)";
	else if (memcmp(&mine.model, &rank0.model, sizeof mine.model) != 0)
		what = "its starting model differs from rank 0's (another --resume file, or a stale "
		       "copy of it)";
	else if (memcmp(mine.backend, rank0.backend, sizeof mine.backend) != 0)
		what = "it uses another backend than rank 0 (--device auto found no GPU on some "
		       "ranks; give --device)";
	if (what)
		ncf_error("rank %d of %d: %s", r->dist.rank, r->dist.size, what);
	return ncf_dist_max_int(&r->dist, what != NULL) ? -1 : 0;
}

/* A resumed run may have nothing left to do: say so (and with its
 * threshold reached, do no more epochs). */
static void plan_epochs(struct train_run *r, const struct train_opts *o)
{
	if (r->ck.best_hr >= 0 && o->threshold >= 0 && r->ck.best_hr >= o->threshold) {
		ncf_info("%s already reached HR@%u %.4f >= %.4f; nothing to do", o->resume, r->topk,
			 r->ck.best_hr, o->threshold);
		r->epochs = r->ck.epoch;
	}
	if (r->ck.epoch >= r->epochs && !(r->ck.position > 0 && r->ck.epoch < r->epochs))
		ncf_info("nothing to do: %u epoch%s asked for, %u already done%s", r->epochs,
			 r->epochs == 1 ? "" : "s", r->ck.epoch,
			 o->resume ? " (raise -e to train more)" : "");
}

int train_open(struct train_run *r, const struct train_opts *o)
{
	r->o = o;
	r->epochs = o->epochs;
	r->topk = o->topk;
	r->status = NCF_EXIT_FAIL;
	if (open_state(r, o) != 0)
		return -1;
	if (open_backend(r, o) != 0)
		return -1;
	r->status = NCF_EXIT_FAIL;
	if (ranks_agree(r) != 0)
		return -1;
	/* the saved loss of an interrupted epoch is the sum over all ranks:
	 * rank 0 carries it on */
	if (r->dist.rank != 0)
		r->ck.epoch_loss = 0;
	if (train_report_open_log(r) != 0 || train_save_open(r) != 0)
		return -1;
	train_catch_signals();
	train_report_start(r);
	r->stats.run_start = ncf_now();
	r->stats.t_threshold = -1;
	r->stats.t_best = -1;
	r->stats.last_save_time = -1;
	ncf_progress_init(&r->prog, o->progress);
	r->prog.unit = "samples";
	if (r->dist.rank != 0)
		r->prog.enabled = 0;
	plan_epochs(r, o);
	r->status = 0;
	return 0;
}

int train_close(struct train_run *r, int status)
{
	if (train_save_finish(r) != 0 && !status) /* main waited already, or failed */
		status = NCF_EXIT_FAIL;
	if (train_report_close_log(r) != 0)
		status = NCF_EXIT_FAIL;
	unpin_state(r);
	ncf_backend_close(&r->be);
	free(r->mask);
	r->ck.user_ids = r->ck.item_ids = NULL; /* the cache's */
	memset(&r->ck.user_names, 0, sizeof r->ck.user_names);
	memset(&r->ck.item_names, 0, sizeof r->ck.item_names);
	ncf_ckpt_free(&r->ck);
	ncf_cache_free(&r->cache);
	int rank0 = r->dist.rank == 0;
	ncf_dist_finish(&r->dist);
	if (rank0 && ncf_close_stdout() != 0 && !status)
		status = NCF_EXIT_FAIL;
	return status;
}
