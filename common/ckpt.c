/*
 * ckpt.c - reading and writing checkpoints, ncf-model(5).
 *
 * A checkpoint is a container file (container.h) with magic "NCFMODEL",
 * version 1 (or 2, below), and these sections in this order (U users, I
 * items, T the number of parameters of the shape, model.h):
 *
 *   tag       bytes   filters     contents
 *   meta      256     -           fixed fields below
 *   userids   4 U     shuffle 4   u32 original user id per index
 *   itemids   4 I     shuffle 4   u32 original item id per index
 *   usernams  UB      -           version 2, named users: U names, each
 *                                 NUL-ended (names.h), in index order
 *   itemnams  IB      -           version 2, named items: likewise
 *   params    4 T     shuffle 4   f32 parameters in the layout of model.h
 *   adam_m    4 T     shuffle 4   f32 Adam first moments
 *   adam_v    4 T     shuffle 4   f32 Adam second moments
 *   end
 *
 * meta (little-endian):
 *   0 u32 users      4 u32 items     8 u32 factors   12 u32 n_layers
 *  16 u32 layers[8]                                  48 u64 parameters (T)
 *  56 f32 lr        60 f32 beta1    64 f32 beta2     68 f32 eps
 *  72 f32 dropout   76 u32 negatives 80 u32 true_negatives
 *  84 u32 cache fingerprint          88 u64 batch    96 u64 seed
 * 104 u64 step     112 u32 epoch   116 u32 epochs_done
 * 120 u64 position 128 f64 epoch_loss
 * 136 f64 best_hr  144 f64 best_ndcg 152 u32 best_epoch 156 u32 topk
 * 160 f64 last_hr  168 f64 last_ndcg 176 u64 cache train_positives
 * 184 u64 UB (version 2: the users' names' bytes, 0 when numbered)
 * 192 u64 IB (version 2: likewise the items')  (184..199 zero in version 1)
 * 200 u64 cache train_negatives (E, the explicit ones; 0 for a cache
 *         without, and in every checkpoint written before they existed)
 * 208..255 zero
 *
 * A checkpoint is version 2 only when it has names: the one of a cache
 * whose ids are all integers is version 1, byte for byte as before.  The
 * ids of a named column are its indices, the names its original ids.
 *
 * No time or host goes in: two runs with one seed write the same bytes.
 *
 * A reader checks every field before it reads an array (ckpt_check_meta),
 * and names the field it refuses: the shape (U, I 1..2^30, factors
 * 1..65536, n_layers 2..8, layers 1..8192 with layers[0] even and the
 * unused ones 0) and T against it; the hyperparameters in the ranges
 * ncf-train's options accept (lr in (0, 1e30], betas and dropout in [0,
 * 1), eps in (0, 1], negatives <= 1000, true_negatives 0 or 1, batch 1..
 * 2^40, topk 1..100000); the cache's P in 1..min(2^40, U (I - 1)) and E in
 * 0..2^40; the run's place: epoch <= 1000000 and equal to epochs_done,
 * position a multiple of batch below the epoch's S = P (1 + negatives) + E
 * samples (ncf_epoch_samples), step
 * = epoch ceil(S / batch) + position / batch, epoch_loss finite, >= 0 and
 * 0 at position 0; the metrics: best and last HR and NDCG -1 before the
 * first epoch and in [0, 1] after it, best_epoch 0 or 1..epochs_done;
 * reserved bytes 0; a version 2 with no names.  Then every section's
 * exact size, the names valid and distinct (as a cache's), and the
 * parameters and moments finite (second moments >= 0).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "ckpt.h"
#include "container.h"
#include "err.h"
#include "io.h"
#include "ncf_hd.h"

#define META_SIZE 256
static const char MAGIC[8] = {'N', 'C', 'F', 'M', 'O', 'D', 'E', 'L'};
static const char HINT[] = " (not a usable ncf-train checkpoint)";

static float get_f32(const unsigned char *p)
{
	uint32_t v = ncf_get_u32(p);
	float f;
	memcpy(&f, &v, 4);
	return f;
}

static void put_f32(unsigned char *p, float f)
{
	uint32_t v;
	memcpy(&v, &f, 4);
	ncf_put_u32(p, v);
}

static int bad(const char *display, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const char *display, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ncf_error("%s: corrupt model: %s%s", display, msg, HINT);
	return -1;
}

/* A metric: -1 (none yet) when none, else in [0, 1]. */
static int metric_ok(double x, int none)
{
	return none ? x == -1 : (x >= 0 && x <= 1);
}

/*
 * Fill ck's scalar fields from meta m and check every one (the list at the
 * top of this file); *L gets the layout.  Returns 0, or -1 after a report
 * naming the field.
 */
/* The shape (meta bytes 0..47) and the layout it makes, which must hold
 * the number of parameters the meta gives. */
static int check_shape_meta(struct ncf_ckpt *ck, const unsigned char *m, struct ncf_layout *L,
			    const char *display)
{
	struct ncf_shape *sh = &ck->shape;
	sh->users = ncf_get_u32(m + 0);
	sh->items = ncf_get_u32(m + 4);
	sh->factors = ncf_get_u32(m + 8);
	sh->n_layers = ncf_get_u32(m + 12);
	if (sh->users < 1 || sh->users > (1u << 30))
		return bad(display, "meta field users is %u (1 to 2^30)", sh->users);
	if (sh->items < 1 || sh->items > (1u << 30))
		return bad(display, "meta field items is %u (1 to 2^30)", sh->items);
	if (sh->factors < 1 || sh->factors > 65536)
		return bad(display, "meta field factors is %u (1 to 65536)", sh->factors);
	if (sh->n_layers < 2 || sh->n_layers > NCF_MAX_LAYERS)
		return bad(display, "meta field n_layers is %u (2 to %d)", sh->n_layers,
			   NCF_MAX_LAYERS);
	for (int k = 0; k < NCF_MAX_LAYERS; k++) {
		uint32_t v = ncf_get_u32(m + 16 + 4 * k);
		sh->layers[k] = v;
		if (k < (int)sh->n_layers && (v < 1 || v > 8192 || (k == 0 && v % 2)))
			return bad(display, "meta field layers[%d] is %u (%s1 to 8192)", k, v,
				   k == 0 ? "even, " : "");
		if (k >= (int)sh->n_layers && v)
			return bad(display, "meta field layers[%d] is %u past n_layers %u (must be 0)",
				   k, v, sh->n_layers);
	}
	ncf_layout_make(sh, L);
	if (ncf_get_u64(m + 48) != L->total)
		return bad(display, "meta field parameters is %llu, the shape needs %zu",
			   (unsigned long long)ncf_get_u64(m + 48), L->total);
	return 0;
}

/* The hyperparameters and the run's state (meta bytes 56..183), unchecked. */
static void unpack_run_meta(struct ncf_ckpt *ck, const unsigned char *m)
{
	struct ncf_hparams *h = &ck->hp;
	h->lr = get_f32(m + 56);
	h->beta1 = get_f32(m + 60);
	h->beta2 = get_f32(m + 64);
	h->eps = get_f32(m + 68);
	h->dropout = get_f32(m + 72);
	h->negatives = ncf_get_u32(m + 76);
	h->true_neg = ncf_get_u32(m + 80);
	ck->fingerprint = ncf_get_u32(m + 84);
	h->batch = ncf_get_u64(m + 88);
	h->seed = ncf_get_u64(m + 96);
	ck->step = ncf_get_u64(m + 104);
	ck->epoch = ncf_get_u32(m + 112);
	ck->epochs_done = ncf_get_u32(m + 116);
	ck->position = ncf_get_u64(m + 120);
	ck->epoch_loss = ncf_get_f64(m + 128);
	ck->best_hr = ncf_get_f64(m + 136);
	ck->best_ndcg = ncf_get_f64(m + 144);
	ck->best_epoch = ncf_get_u32(m + 152);
	ck->topk = ncf_get_u32(m + 156);
	ck->last_hr = ncf_get_f64(m + 160);
	ck->last_ndcg = ncf_get_f64(m + 168);
	ck->train_positives = ncf_get_u64(m + 176);
	ck->train_negatives = ncf_get_u64(m + 200);
}

/* The hyperparameters: the ranges ncf-train accepts on its command line. */
static int check_hparams_meta(const struct ncf_ckpt *ck, const char *display)
{
	const struct ncf_shape *sh = &ck->shape;
	const struct ncf_hparams *h = &ck->hp;
	if (!(h->lr > 0 && h->lr <= 1e30f))
		return bad(display, "meta field learning_rate is %g (0 < x <= 1e30)", h->lr);
	if (!(h->beta1 >= 0 && h->beta1 < 1))
		return bad(display, "meta field beta1 is %g (0 <= x < 1)", h->beta1);
	if (!(h->beta2 >= 0 && h->beta2 < 1))
		return bad(display, "meta field beta2 is %g (0 <= x < 1)", h->beta2);
	if (!(h->eps > 0 && h->eps <= 1))
		return bad(display, "meta field eps is %g (0 < x <= 1)", h->eps);
	if (!(h->dropout >= 0 && h->dropout < 1))
		return bad(display, "meta field dropout is %g (0 <= x < 1)", h->dropout);
	if (h->negatives > 1000)
		return bad(display, "meta field negatives is %u (0 to 1000)", h->negatives);
	if (h->true_neg > 1)
		return bad(display, "meta field true_negatives is %u (0 or 1)", h->true_neg);
	if (h->batch < 1 || h->batch > ((uint64_t)1 << 40))
		return bad(display, "meta field batch is %llu (1 to 2^40)",
			   (unsigned long long)h->batch);
	if (ck->topk < 1 || ck->topk > 100000)
		return bad(display, "meta field topk is %u (1 to 100000)", ck->topk);
	uint64_t P = ck->train_positives;
	if (P < 1 || P > ((uint64_t)1 << 40) || P > (uint64_t)sh->users * (sh->items - 1))
		return bad(display, "meta field train_positives is %llu (1 to %s)",
			   (unsigned long long)P,
			   P > ((uint64_t)1 << 40) ? "2^40" : "users x (items - 1)");
	if (ck->train_negatives > ((uint64_t)1 << 40))
		return bad(display, "meta field train_negatives is %llu (0 to 2^40)",
			   (unsigned long long)ck->train_negatives);
	return 0;
}

/* Where the run stands: epoch, position, step and the epoch's loss agree. */
static int check_progress_meta(const struct ncf_ckpt *ck, const char *display)
{
	const struct ncf_hparams *h = &ck->hp;
	uint64_t S = ncf_epoch_samples(ck->train_positives, h->negatives, ck->train_negatives);
	uint64_t steps = S / h->batch + (S % h->batch != 0);
	if (ck->epoch > 1000000)
		return bad(display, "meta field epoch is %u (0 to 1000000)", ck->epoch);
	if (ck->epochs_done != ck->epoch)
		return bad(display, "meta field epochs_done is %u, epoch %u", ck->epochs_done,
			   ck->epoch);
	if (ck->position >= S || ck->position % h->batch)
		return bad(display,
			   "meta field position is %llu, %s (an epoch is %llu samples in batches of "
			   "%llu)",
			   (unsigned long long)ck->position,
			   ck->position >= S ? "at or past the end of the epoch" : "not a batch boundary",
			   (unsigned long long)S, (unsigned long long)h->batch);
	unsigned __int128 want = (unsigned __int128)ck->epoch * steps + ck->position / h->batch;
	if ((unsigned __int128)ck->step != want)
		return bad(display, "meta field step is %llu, epoch %u and position %llu make %llu",
			   (unsigned long long)ck->step, ck->epoch, (unsigned long long)ck->position,
			   (unsigned long long)(want > UINT64_MAX ? UINT64_MAX : (uint64_t)want));
	if (!(isfinite(ck->epoch_loss) && ck->epoch_loss >= 0) ||
	    (ck->position == 0 && ck->epoch_loss != 0))
		return bad(display, "meta field epoch_loss is %g (%s)", ck->epoch_loss,
			   ck->position ? "finite, >= 0" : "0 at the start of an epoch");
	return 0;
}

/* The metrics: -1 before the first epoch, else in range, last <= best. */
static int check_metrics_meta(const struct ncf_ckpt *ck, const char *display)
{
	int none = ck->epochs_done == 0;
	if (!metric_ok(ck->best_hr, none))
		return bad(display, "meta field best_hr is %g (%s)", ck->best_hr,
			   none ? "-1 before the first epoch" : "0 to 1");
	if (!metric_ok(ck->best_ndcg, none))
		return bad(display, "meta field best_ndcg is %g (%s)", ck->best_ndcg,
			   none ? "-1 before the first epoch" : "0 to 1");
	if (none ? ck->best_epoch != 0 : (ck->best_epoch < 1 || ck->best_epoch > ck->epochs_done))
		return bad(display, "meta field best_epoch is %u (%s%u)", ck->best_epoch,
			   none ? "" : "1 to ", none ? 0 : ck->epochs_done);
	if (!metric_ok(ck->last_hr, none) || (!none && ck->last_hr > ck->best_hr))
		return bad(display, "meta field last_hr is %g (%s)", ck->last_hr,
			   none ? "-1 before the first epoch" : "0 to best_hr");
	if (!metric_ok(ck->last_ndcg, none))
		return bad(display, "meta field last_ndcg is %g (%s)", ck->last_ndcg,
			   none ? "-1 before the first epoch" : "0 to 1");
	return 0;
}

static int ckpt_check_meta(struct ncf_ckpt *ck, const unsigned char *m, uint32_t version,
			   struct ncf_layout *L, const char *display)
{
	NCF_TRY(check_shape_meta(ck, m, L, display));
	unpack_run_meta(ck, m);
	NCF_TRY(check_hparams_meta(ck, display));
	NCF_TRY(check_progress_meta(ck, display));
	NCF_TRY(check_metrics_meta(ck, display));
	/* reserved: 184..199 (the names' sizes) in version 1, 208.. in both */
	for (int k = version >= NCF_CKPT_VERSION_NAMES ? 208 : 184; k < META_SIZE; k++)
		if ((k < 200 || k >= 208) && m[k])
			return bad(display, "meta byte %d is %u, not 0 (reserved)", k, m[k]);
	if (version < NCF_CKPT_VERSION_NAMES)
		return 0;
	uint64_t ub = ncf_get_u64(m + 184), ib = ncf_get_u64(m + 192);
	uint64_t U = ck->shape.users, I = ck->shape.items;
	if (!ub && !ib)
		return bad(display, "version %u, but no names (meta fields 184 and 192 are 0)",
			   version);
	if (!ncf_names_size_ok(ub, U))
		return bad(display, "meta field user_names_bytes is %llu, not 2 to %d for each of %llu "
				    "users",
			   (unsigned long long)ub, NCF_NAME_MAX + 1, (unsigned long long)U);
	if (!ncf_names_size_ok(ib, I))
		return bad(display, "meta field item_names_bytes is %llu, not 2 to %d for each of %llu "
				    "items",
			   (unsigned long long)ib, NCF_NAME_MAX + 1, (unsigned long long)I);
	ck->user_names.bytes = ub;
	ck->item_names.bytes = ib;
	return 0;
}

/* Are the n floats of section tag finite (and >= 0 with nonneg)? */
static int check_floats(const float *x, size_t n, int nonneg, const char *tag,
			const char *display)
{
	size_t badk = n;
#pragma omp parallel for schedule(static) reduction(min : badk)
	for (size_t k = 0; k < n; k++)
		if (!isfinite(x[k]) || (nonneg && x[k] < 0))
			badk = k < badk ? k : badk;
	if (badk == n)
		return 0;
	return bad(display, "section '%s': value %zu is %g (%s)", tag, badk, x[badk],
		   nonneg ? "finite, >= 0" : "finite");
}

/* The sections of ck after its packed meta m (T bytes per parameter
 * vector) to fp.  Returns 0 or -1 (reported). */
static int write_sections(const struct ncf_ckpt *ck, const unsigned char *m, size_t T, FILE *fp,
			  const char *display, int workers)
{
	struct ncf_cw w = {0};
	w.level = 1; /* floats hardly compress; be quick */
	w.workers = workers;
	uint32_t s4 = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(4);
	int named = ck->user_names.n || ck->item_names.n;
	NCF_TRY(ncf_cw_begin(&w, fp, display, MAGIC,
			     named ? NCF_CKPT_VERSION_NAMES : NCF_CKPT_VERSION));
	NCF_TRY(ncf_cw_section(&w, "meta", m, META_SIZE, 0));
	NCF_TRY(ncf_cw_section(&w, "userids", ck->user_ids, 4 * (size_t)ck->shape.users, s4));
	NCF_TRY(ncf_cw_section(&w, "itemids", ck->item_ids, 4 * (size_t)ck->shape.items, s4));
	if (ck->user_names.n)
		NCF_TRY(ncf_cw_section(&w, "usernams", ck->user_names.text,
				       (size_t)ck->user_names.bytes, 0));
	if (ck->item_names.n)
		NCF_TRY(ncf_cw_section(&w, "itemnams", ck->item_names.text,
				       (size_t)ck->item_names.bytes, 0));
	NCF_TRY(ncf_cw_section(&w, "params", ck->params, T, s4));
	NCF_TRY(ncf_cw_section(&w, "adam_m", ck->m, T, s4));
	NCF_TRY(ncf_cw_section(&w, "adam_v", ck->v, T, s4));
	NCF_TRY(ncf_cw_end(&w));
	return 0;
}

int ncf_ckpt_write(const struct ncf_ckpt *ck, const char *path, int workers)
{
	struct ncf_layout L;
	ncf_layout_make(&ck->shape, &L);
	unsigned char m[META_SIZE] = {0};
	ncf_put_u32(m + 0, ck->shape.users);
	ncf_put_u32(m + 4, ck->shape.items);
	ncf_put_u32(m + 8, ck->shape.factors);
	ncf_put_u32(m + 12, ck->shape.n_layers);
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		ncf_put_u32(m + 16 + 4 * k, k < (int)ck->shape.n_layers ? ck->shape.layers[k] : 0);
	ncf_put_u64(m + 48, L.total);
	put_f32(m + 56, ck->hp.lr);
	put_f32(m + 60, ck->hp.beta1);
	put_f32(m + 64, ck->hp.beta2);
	put_f32(m + 68, ck->hp.eps);
	put_f32(m + 72, ck->hp.dropout);
	ncf_put_u32(m + 76, ck->hp.negatives);
	ncf_put_u32(m + 80, ck->hp.true_neg);
	ncf_put_u32(m + 84, ck->fingerprint);
	ncf_put_u64(m + 88, ck->hp.batch);
	ncf_put_u64(m + 96, ck->hp.seed);
	ncf_put_u64(m + 104, ck->step);
	ncf_put_u32(m + 112, ck->epoch);
	ncf_put_u32(m + 116, ck->epochs_done);
	ncf_put_u64(m + 120, ck->position);
	ncf_put_f64(m + 128, ck->epoch_loss);
	ncf_put_f64(m + 136, ck->best_hr);
	ncf_put_f64(m + 144, ck->best_ndcg);
	ncf_put_u32(m + 152, ck->best_epoch);
	ncf_put_u32(m + 156, ck->topk);
	ncf_put_f64(m + 160, ck->last_hr);
	ncf_put_f64(m + 168, ck->last_ndcg);
	ncf_put_u64(m + 176, ck->train_positives);
	ncf_put_u64(m + 184, ck->user_names.n ? ck->user_names.bytes : 0);
	ncf_put_u64(m + 192, ck->item_names.n ? ck->item_names.bytes : 0);
	ncf_put_u64(m + 200, ck->train_negatives);

	struct ncf_out o;
	NCF_TRY(ncf_out_open(&o, path, 1));
	return ncf_out_end(&o, write_sections(ck, m, L.total * sizeof(float), o.fp, o.display,
					      workers));
}

void ncf_ckpt_free(struct ncf_ckpt *ck)
{
	free(ck->user_ids);
	free(ck->item_ids);
	free(ck->params);
	free(ck->m);
	free(ck->v);
	ncf_names_free(&ck->user_names);
	ncf_names_free(&ck->item_names);
	ck->user_ids = ck->item_ids = NULL;
	ck->params = ck->m = ck->v = NULL;
}

/* The names of tag (names.h: ncf_names_read), what is wrong said as this
 * file's corruption. */
static int read_names(struct ncf_cr *r, const char *tag, size_t n, struct ncf_names *names,
		      const uint32_t *ids, const char *display)
{
	char why[300];
	if (ncf_names_read(r, tag, n, names, ids, why, sizeof why) == 0)
		return 0;
	return why[0] ? bad(display, "%s", why) : -1;
}

/* Read the id map of tag (n ids); its ids must be distinct. */
static int read_ids(struct ncf_cr *r, const char *tag, size_t n, uint32_t **ids,
		    const char *display)
{
	size_t got;
	if (ncf_cr_section(r, tag, 4 * n, 1, (void **)ids, &got) != 0)
		return -1;
	uint32_t dup;
	if (!ncf_ids_distinct(*ids, n, &dup))
		return bad(display, "section '%s': id %u appears twice", tag, dup);
	return 0;
}

int ncf_ckpt_read_fp(FILE *fp, const char *display, struct ncf_ckpt *ck, int with_adam)
{
	memset(ck, 0, sizeof *ck);
	struct ncf_cr r = {0};
	unsigned char *m = NULL;
	void *mm = NULL, *vv = NULL;
	size_t n;
	int rc = -1;
	NCF_TRY_GOTO(ncf_cr_open(&r, fp, display, MAGIC, NCF_CKPT_VERSION, NCF_CKPT_VERSION_NAMES,
				 HINT),
		     out);
	NCF_TRY_GOTO(ncf_cr_section(&r, "meta", META_SIZE, 1, (void **)&m, &n), out);
	struct ncf_layout L;
	if (ckpt_check_meta(ck, m, r.version, &L, display) != 0)
		goto out;
	size_t T = L.total * sizeof(float);
	uint64_t arrays = 4 * (uint64_t)ck->shape.users + 4 * (uint64_t)ck->shape.items + 3 * (uint64_t)T +
			  ck->user_names.bytes + ck->item_names.bytes;
	if (!ncf_cr_can_hold(&r, arrays)) {
		bad(display, "its meta section implies %llu bytes of arrays, more than the rest of the "
			     "file can hold",
		    (unsigned long long)arrays);
		goto out;
	}
	NCF_TRY_GOTO(read_ids(&r, "userids", ck->shape.users, &ck->user_ids, display), out);
	NCF_TRY_GOTO(read_ids(&r, "itemids", ck->shape.items, &ck->item_ids, display), out);
	NCF_TRY_GOTO(read_names(&r, "usernams", ck->shape.users, &ck->user_names, ck->user_ids,
				display),
		     out);
	NCF_TRY_GOTO(read_names(&r, "itemnams", ck->shape.items, &ck->item_names, ck->item_ids,
				display),
		     out);
	NCF_TRY_GOTO(ncf_cr_section(&r, "params", T, 1, (void **)&ck->params, &n), out);
	NCF_TRY_GOTO(ncf_cr_section(&r, "adam_m", T, 1, &mm, &n), out);
	NCF_TRY_GOTO(ncf_cr_section(&r, "adam_v", T, 1, &vv, &n), out);
	NCF_TRY_GOTO(ncf_cr_end(&r), out);
	NCF_TRY_GOTO(check_floats(ck->params, L.total, 0, "params", display), out);
	NCF_TRY_GOTO(check_floats(mm, L.total, 0, "adam_m", display), out);
	NCF_TRY_GOTO(check_floats(vv, L.total, 1, "adam_v", display), out);
	if (with_adam) {
		ck->m = mm;
		ck->v = vv;
		mm = vv = NULL;
	}
	rc = 0;
out:
	free(m);
	free(mm);
	free(vv);
	ncf_cr_close(&r);
	if (rc != 0)
		ncf_ckpt_free(ck);
	return rc;
}

int ncf_ckpt_read(const char *path, struct ncf_ckpt *ck, int with_adam)
{
	memset(ck, 0, sizeof *ck);
	const char *display;
	FILE *fp = ncf_in_open(path, &display);
	if (!fp)
		return -1;
	int rc = ncf_ckpt_read_fp(fp, display, ck, with_adam);
	ncf_in_close(fp);
	return rc;
}
