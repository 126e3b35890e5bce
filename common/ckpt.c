/*
 * ckpt.c - reading and writing checkpoints, ncf-model(5).
 *
 * A checkpoint is a container file (container.h) with magic "NCFMODEL",
 * version 1, and these sections in this order (U users, I items, T the
 * number of parameters of the shape, model.h):
 *
 *   tag       bytes   filters     contents
 *   meta      256     -           fixed fields below
 *   userids   4 U     shuffle 4   u32 original user id per index
 *   itemids   4 I     shuffle 4   u32 original item id per index
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
 * 184..255 zero
 *
 * No time or host goes in: two runs with one seed write the same bytes.
 * A reader checks the shape (ncf_shape_check) and that T matches it, then
 * every section's exact size.
 */
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "container.h"
#include "err.h"
#include "io.h"

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

int ncf_ckpt_write(const struct ncf_ckpt *ck, const char *path)
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

	struct ncf_out o;
	if (ncf_out_open(&o, path, 1) != 0)
		return -1;
	struct ncf_cw w = {0};
	w.level = 1; /* floats hardly compress; be quick */
	uint32_t s4 = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(4);
	size_t T = L.total * sizeof(float);
	if (ncf_cw_begin(&w, o.fp, o.display, MAGIC, NCF_CKPT_VERSION) ||
	    ncf_cw_section(&w, "meta", m, META_SIZE, 0) ||
	    ncf_cw_section(&w, "userids", ck->user_ids, 4 * (size_t)ck->shape.users, s4) ||
	    ncf_cw_section(&w, "itemids", ck->item_ids, 4 * (size_t)ck->shape.items, s4) ||
	    ncf_cw_section(&w, "params", ck->params, T, s4) ||
	    ncf_cw_section(&w, "adam_m", ck->m, T, s4) ||
	    ncf_cw_section(&w, "adam_v", ck->v, T, s4) || ncf_cw_end(&w)) {
		ncf_out_abort(&o);
		return -1;
	}
	return ncf_out_commit(&o);
}

void ncf_ckpt_free(struct ncf_ckpt *ck)
{
	free(ck->user_ids);
	free(ck->item_ids);
	free(ck->params);
	free(ck->m);
	free(ck->v);
	ck->user_ids = ck->item_ids = NULL;
	ck->params = ck->m = ck->v = NULL;
}

int ncf_ckpt_read(const char *path, struct ncf_ckpt *ck, int with_adam)
{
	memset(ck, 0, sizeof *ck);
	const char *display;
	FILE *fp = ncf_in_open(path, &display);
	if (!fp)
		return -1;
	struct ncf_cr r;
	unsigned char *m = NULL;
	size_t n;
	int rc = -1;
	if (ncf_cr_open(&r, fp, display, MAGIC, NCF_CKPT_VERSION, NCF_CKPT_VERSION, HINT) ||
	    ncf_cr_section(&r, "meta", META_SIZE, 1, (void **)&m, &n))
		goto out;
	ck->shape.users = ncf_get_u32(m + 0);
	ck->shape.items = ncf_get_u32(m + 4);
	ck->shape.factors = ncf_get_u32(m + 8);
	ck->shape.n_layers = ncf_get_u32(m + 12);
	for (int k = 0; k < NCF_MAX_LAYERS; k++)
		ck->shape.layers[k] = ncf_get_u32(m + 16 + 4 * k);
	const char *why = ncf_shape_check(&ck->shape);
	if (!why && (ck->shape.users == 0 || ck->shape.items == 0 ||
		     ck->shape.users > (1u << 30) || ck->shape.items > (1u << 30)))
		why = "impossible table sizes";
	if (why) {
		ncf_error("%s: corrupt model: %s%s", display, why, HINT);
		goto out;
	}
	struct ncf_layout L;
	ncf_layout_make(&ck->shape, &L);
	if (ncf_get_u64(m + 48) != L.total) {
		ncf_error("%s: corrupt model: %llu parameters, the shape needs %zu%s", display,
			  (unsigned long long)ncf_get_u64(m + 48), L.total, HINT);
		goto out;
	}
	ck->hp.lr = get_f32(m + 56);
	ck->hp.beta1 = get_f32(m + 60);
	ck->hp.beta2 = get_f32(m + 64);
	ck->hp.eps = get_f32(m + 68);
	ck->hp.dropout = get_f32(m + 72);
	ck->hp.negatives = ncf_get_u32(m + 76);
	ck->hp.true_neg = ncf_get_u32(m + 80);
	ck->fingerprint = ncf_get_u32(m + 84);
	ck->hp.batch = ncf_get_u64(m + 88);
	ck->hp.seed = ncf_get_u64(m + 96);
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
	/* the ranges ncf-train accepts on its command line */
	const struct ncf_hparams *h = &ck->hp;
	if (!(h->lr > 0 && h->lr <= 1e30f) || !(h->beta1 >= 0 && h->beta1 < 1) ||
	    !(h->beta2 >= 0 && h->beta2 < 1) || !(h->eps > 0 && h->eps <= 1) ||
	    !(h->dropout >= 0 && h->dropout < 1) || h->negatives > 1000 || h->batch < 1 ||
	    h->batch > ((uint64_t)1 << 40) || ck->topk < 1 || ck->topk > 100000) {
		ncf_error("%s: corrupt model: hyperparameters out of range%s", display, HINT);
		goto out;
	}
	size_t T = L.total * sizeof(float);
	void *mm = NULL, *vv = NULL;
	if (ncf_cr_section(&r, "userids", 4 * (size_t)ck->shape.users, 1, (void **)&ck->user_ids,
			   &n) ||
	    ncf_cr_section(&r, "itemids", 4 * (size_t)ck->shape.items, 1, (void **)&ck->item_ids,
			   &n) ||
	    ncf_cr_section(&r, "params", T, 1, (void **)&ck->params, &n) ||
	    ncf_cr_section(&r, "adam_m", T, 1, &mm, &n) ||
	    ncf_cr_section(&r, "adam_v", T, 1, &vv, &n) || ncf_cr_end(&r)) {
		free(mm);
		free(vv);
		goto out;
	}
	if (with_adam) {
		ck->m = mm;
		ck->v = vv;
	} else {
		free(mm);
		free(vv);
	}
	rc = 0;
out:
	free(m);
	ncf_in_close(fp);
	if (rc != 0)
		ncf_ckpt_free(ck);
	return rc;
}
