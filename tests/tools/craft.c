/*
 * craft DIR - write caches and checkpoints with valid checksums and hostile
 * contents into DIR, for tests/cli/crafted.t: every reader must refuse
 * each one with exit 1 and a message naming the field, without a
 * sanitizer report and in bounded memory.
 *
 * The files are built here from the layouts documented in ncf-cache(5) and
 * ncf-model(5) (the meta tables at the top of common/cache.c and
 * common/ckpt.c), not with the library's writers, so that a field can hold
 * any value.  Sections go through the container writer (valid CRCs and
 * zstd checksums) unless a case forges a section header itself.
 *
 * Also written: good.ncfc and good.ncfm, which every reader accepts (the
 * base every case changes one thing of), and DIR/cases, one line per case:
 * "NAME<TAB>KIND" (KIND cache or model).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "cache.h"
#include "ckpt.h"
#include "container.h"
#include "crc32c.h"
#include "err.h"
#include "io.h"
#include "model.h"

static const char *dir;
static FILE *cases;

/* A step that failed: say which, exit 1 (a program may; the library may not). */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ncf_error("%s", buf);
	exit(1);
}

/* ---- the base cache: U 3, I 5, N 2, P 4 ------------------------------------------ */
/*   user 0 (id 11): train 0 1, test 2, negatives 3 4
 *   user 1 (id 22): train 2 3, test 4, negatives 0 1
 *   user 2 (id 33): no training items, test 0, negatives 1 2 */

struct cache_img {
	unsigned char meta[256];
	uint32_t uids[8], iids[8], tr[8], te[8], neg[16];
	int64_t off[8];
	size_t nu, ni, noff, ntr, nte, nneg; /* elements written per section */
	int order[8];			     /* sections in file order, -1 ends */
	int after_end;			     /* write a section after the end one */
	uint64_t claim[8];		     /* forge: raw size to claim (0: honest) */
	size_t rle_users;		     /* > 0: userids is that many zero ids, compressed */
	size_t noise_items;		     /* > 0: itemids is that many random bytes */
	int forge[8];			     /* 1: section k through forged_section */
	int skippable;			     /* evalneg as a zstd skippable frame */
};

enum { S_META, S_UIDS, S_IIDS, S_OFF, S_TR, S_TE, S_NEG, S_COUNT };
static const char *cache_tags[S_COUNT] = {"meta",    "userids", "itemids", "offsets",
					  "trainitm", "testitm", "evalneg"};

static void cache_base(struct cache_img *c)
{
	memset(c, 0, sizeof *c);
	unsigned char *m = c->meta;
	ncf_put_u32(m + 0, 3);	  /* users */
	ncf_put_u32(m + 4, 5);	  /* items */
	ncf_put_u64(m + 8, 4);	  /* train_positives */
	ncf_put_u32(m + 16, 2);	  /* eval_negatives */
	ncf_put_u32(m + 20, 0);	  /* min_ratings */
	ncf_put_u64(m + 24, 1);	  /* seed */
	ncf_put_u32(m + 32, 1);	  /* source_format: ml-20m */
	ncf_put_u32(m + 36, 0x1234);
	ncf_put_u64(m + 40, 200); /* source_bytes */
	ncf_put_u64(m + 48, 7);	  /* ratings_read = P + U */
	ncf_put_u64(m + 88, 1);	  /* test_only_users */
	ncf_put_f64(m + 104, NAN);
	static const uint32_t uids[] = {11, 22, 33}, iids[] = {101, 102, 103, 104, 105};
	static const uint32_t tr[] = {0, 1, 2, 3}, te[] = {2, 4, 0}, neg[] = {3, 4, 0, 1, 1, 2};
	static const int64_t off[] = {0, 2, 4, 4};
	memcpy(c->uids, uids, sizeof uids);
	memcpy(c->iids, iids, sizeof iids);
	memcpy(c->tr, tr, sizeof tr);
	memcpy(c->te, te, sizeof te);
	memcpy(c->neg, neg, sizeof neg);
	memcpy(c->off, off, sizeof off);
	c->nu = 3, c->ni = 5, c->noff = 4, c->ntr = 4, c->nte = 3, c->nneg = 6;
	for (int k = 0; k < S_COUNT; k++)
		c->order[k] = k;
	c->order[S_COUNT] = -1;
}

/* A section whose header says raw bytes while its frame decodes frame_raw
 * bytes of data (a forged header, CRC valid). */
static int frame_checksum = 1; /* forged_section: with zstd's content checksum */

/* A section whose header is given: tag, raw, the payload bytes as they are. */
static void raw_section(FILE *fp, const char *tag, uint64_t raw, const void *payload, size_t n,
			uint32_t filters)
{
	unsigned char h[32] = {0};
	memcpy(h, tag, strlen(tag));
	ncf_put_u64(h + 8, raw);
	ncf_put_u64(h + 16, n);
	ncf_put_u32(h + 24, filters);
	ncf_put_u32(h + 28, ncf_crc32c(0, h, 28));
	fwrite(h, 1, 32, fp);
	fwrite(payload, 1, n, fp);
}

static void forged_section(FILE *fp, const char *tag, uint64_t raw, const void *data,
			   size_t frame_raw, uint32_t filters)
{
	size_t bound = ZSTD_compressBound(frame_raw);
	unsigned char *z = ncf_xmalloc(bound);
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, frame_checksum);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
	size_t n = ZSTD_compress2(cc, z, bound, data, frame_raw);
	ZSTD_freeCCtx(cc);
	if (ZSTD_isError(n))
		die("zstd: %s", ZSTD_getErrorName(n));
	raw_section(fp, tag, raw, z, n, filters);
	free(z);
}

static FILE *open_case(const char *name, const char *kind, const char *ext)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
	FILE *fp = fopen(path, "wb");
	if (!fp)
		die("%s: cannot create", path);
	if (strcmp(name, "good"))
		fprintf(cases, "%s\t%s\n", name, kind);
	return fp;
}

static void cache_write(const struct cache_img *c, const char *name)
{
	FILE *fp = open_case(name, "cache", "ncfc");
	struct ncf_cw w = {0};
	uint32_t s4 = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(4);
	uint32_t s8 = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(8);
	const void *data[S_COUNT] = {c->meta, c->uids, c->iids, c->off, c->tr, c->te, c->neg};
	size_t size[S_COUNT] = {256,	      4 * c->nu,  4 * c->ni,  8 * c->noff,
				4 * c->ntr, 4 * c->nte, 4 * c->nneg};
	uint32_t filt[S_COUNT] = {0, s4, s4, s8, s4 | NCF_FILTER_DELTA32, s4, s4};
	ncf_cw_begin(&w, fp, name, "NCFCACHE", NCF_CACHE_VERSION);
	for (int i = 0; c->order[i] >= 0; i++) {
		int k = c->order[i];
		if (k == S_UIDS && c->rle_users) {
			size_t bytes = 4 * c->rle_users;
			void *zero = ncf_xcalloc(bytes, 1);
			forged_section(fp, "userids", bytes, zero, bytes, s4);
			free(zero);
		} else if (k == S_IIDS && c->noise_items) {
			unsigned char *noise = ncf_xmalloc(c->noise_items);
			uint32_t x = 2463534242u;
			for (size_t b = 0; b < c->noise_items; b++) {
				x ^= x << 13, x ^= x >> 17, x ^= x << 5;
				noise[b] = (unsigned char)x;
			}
			ncf_cw_section(&w, "itemids", noise, c->noise_items, 0);
			free(noise);
		} else if (k == S_NEG && c->skippable) {
			unsigned char sk[8 + 24] = {0x50, 0x2a, 0x4d, 0x18, 24, 0, 0, 0};
			memcpy(sk + 8, c->neg, 24);
			raw_section(fp, "evalneg", size[k], sk, sizeof sk, filt[k]);
		} else if (c->claim[k] || c->forge[k]) {
			forged_section(fp, cache_tags[k], c->claim[k] ? c->claim[k] : size[k], data[k],
				       size[k], filt[k]);
		} else {
			ncf_cw_section(&w, cache_tags[k], data[k], size[k], filt[k]);
		}
	}
	ncf_cw_end(&w);
	if (c->after_end)
		ncf_cw_section(&w, "evalneg", c->neg, 4 * c->nneg, s4);
	if (fclose(fp) != 0)
		die("%s: write failed", name);
}

/* ---- the base model of the base cache: F 2, layers 4,2 ---------------------------- */

struct model_img {
	unsigned char meta[256];
	uint32_t uids[3], iids[5];
	float *params, *m, *v;
	size_t T, nparams; /* floats in the shape, floats written */
	uint64_t claim_params;
};

static uint32_t base_fingerprint(void)
{
	struct cache_img c;
	cache_base(&c);
	struct ncf_cache k;
	memset(&k, 0, sizeof k);
	k.users = 3, k.items = 5;
	k.user_ids = c.uids;
	k.item_ids = c.iids;
	return ncf_cache_fingerprint(&k);
}

static void put_f32(unsigned char *p, float f)
{
	uint32_t v;
	memcpy(&v, &f, 4);
	ncf_put_u32(p, v);
}

static void model_base(struct model_img *mi)
{
	memset(mi, 0, sizeof *mi);
	struct ncf_shape s = {.users = 3, .items = 5, .factors = 2, .n_layers = 2,
			      .layers = {4, 2}};
	struct ncf_layout L;
	ncf_layout_make(&s, &L);
	mi->T = mi->nparams = L.total;
	mi->params = ncf_xmalloc((L.total + 1) * sizeof(float));
	mi->m = ncf_xcalloc(L.total + 1, sizeof(float));
	mi->v = ncf_xcalloc(L.total + 1, sizeof(float));
	ncf_model_init(&s, &L, 1, mi->params);
	unsigned char *m = mi->meta;
	ncf_put_u32(m + 0, 3);
	ncf_put_u32(m + 4, 5);
	ncf_put_u32(m + 8, 2);
	ncf_put_u32(m + 12, 2);
	ncf_put_u32(m + 16, 4);
	ncf_put_u32(m + 20, 2);
	ncf_put_u64(m + 48, L.total);
	put_f32(m + 56, 0.0045f);
	put_f32(m + 60, 0.25f);
	put_f32(m + 64, 0.5f);
	put_f32(m + 68, 1e-8f);
	put_f32(m + 72, 0.5f);
	ncf_put_u32(m + 76, 1);	   /* negatives: S = 4 (1 + 1) = 8 */
	ncf_put_u32(m + 80, 0);
	ncf_put_u32(m + 84, base_fingerprint());
	ncf_put_u64(m + 88, 4);	   /* batch: 2 steps an epoch */
	ncf_put_u64(m + 96, 1);	   /* seed */
	ncf_put_u64(m + 104, 2);   /* step */
	ncf_put_u32(m + 112, 1);   /* epoch */
	ncf_put_u32(m + 116, 1);   /* epochs_done */
	ncf_put_u64(m + 120, 0);   /* position */
	ncf_put_f64(m + 128, 0);   /* epoch_loss */
	ncf_put_f64(m + 136, 0.5); /* best_hr */
	ncf_put_f64(m + 144, 0.4);
	ncf_put_u32(m + 152, 1);
	ncf_put_u32(m + 156, 10);
	ncf_put_f64(m + 160, 0.5);
	ncf_put_f64(m + 168, 0.4);
	ncf_put_u64(m + 176, 4); /* train_positives */
	static const uint32_t uids[] = {11, 22, 33}, iids[] = {101, 102, 103, 104, 105};
	memcpy(mi->uids, uids, sizeof uids);
	memcpy(mi->iids, iids, sizeof iids);
}

static void model_write(struct model_img *mi, const char *name)
{
	FILE *fp = open_case(name, "model", "ncfm");
	struct ncf_cw w = {0};
	w.level = 1;
	uint32_t s4 = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(4);
	size_t T = mi->nparams * sizeof(float);
	ncf_cw_begin(&w, fp, name, "NCFMODEL", NCF_CKPT_VERSION);
	ncf_cw_section(&w, "meta", mi->meta, 256, 0);
	ncf_cw_section(&w, "userids", mi->uids, sizeof mi->uids, s4);
	ncf_cw_section(&w, "itemids", mi->iids, sizeof mi->iids, s4);
	if (mi->claim_params)
		forged_section(fp, "params", mi->claim_params, mi->params, T, s4);
	else
		ncf_cw_section(&w, "params", mi->params, T, s4);
	ncf_cw_section(&w, "adam_m", mi->m, T, s4);
	ncf_cw_section(&w, "adam_v", mi->v, T, s4);
	ncf_cw_end(&w);
	if (fclose(fp) != 0)
		die("%s: write failed", name);
	free(mi->params), free(mi->m), free(mi->v);
}

/* ---- the cases ---------------------------------------------------------------------- */

#define U32(off, v) ncf_put_u32(c.meta + (off), (v))
#define U64(off, v) ncf_put_u64(c.meta + (off), (v))
#define F64(off, v) ncf_put_f64(c.meta + (off), (v))

/* The cache that every reader accepts, and caches whose counts are 0, at
 * their maximum, next to an overflow, or disagree with each other. */
static void cache_count_cases(void)
{
	struct cache_img c;
	cache_base(&c);
	cache_write(&c, "good");
	/* counts at 0, at their maximum, next to an overflow */
	cache_base(&c), U32(0, 0), cache_write(&c, "c-users-0");
	cache_base(&c), U32(4, 0), cache_write(&c, "c-items-0");
	cache_base(&c), U32(16, 0), cache_write(&c, "c-negatives-0");
	cache_base(&c), U32(16, 100001), cache_write(&c, "c-negatives-100001");
	cache_base(&c), U32(16, UINT32_MAX), cache_write(&c, "c-negatives-max");
	cache_base(&c), U64(8, 0), U64(48, 3), U64(88, 3), cache_write(&c, "c-positives-0");
	cache_base(&c), U64(8, (uint64_t)1 << 40), cache_write(&c, "c-positives-2^40");
	cache_base(&c), U64(8, UINT64_MAX), cache_write(&c, "c-positives-max");
	cache_base(&c), U64(8, 13), U64(48, 16), cache_write(&c, "c-positives-over-UxI");
	/* users at the maximum with the counters made to agree: refused at the
	 * first section, whose 12 bytes are not 4 U */
	cache_base(&c), U32(0, UINT32_MAX), U64(48, 4 + (uint64_t)UINT32_MAX),
		cache_write(&c, "c-users-max");
	cache_base(&c), U32(0, UINT32_MAX), U32(16, 100000), U64(48, 4 + (uint64_t)UINT32_MAX),
		cache_write(&c, "c-users-x-negatives-over");
	cache_base(&c), U32(4, UINT32_MAX), cache_write(&c, "c-items-max");
	cache_base(&c), U32(4, 8), cache_write(&c, "c-items-unrated");
	/* counters */
	cache_base(&c), U64(48, 6), cache_write(&c, "c-ratings-read-short");
	cache_base(&c), U64(48, UINT64_MAX), cache_write(&c, "c-ratings-read-max");
	cache_base(&c), U64(56, UINT64_MAX), cache_write(&c, "c-duplicates-max");
	cache_base(&c), U64(64, 1), cache_write(&c, "c-users-dropped");
	cache_base(&c), U64(48, 8), U64(72, 1), U64(80, 2), cache_write(&c, "c-items-dropped");
	cache_base(&c), U64(88, 4), cache_write(&c, "c-test-only-over");
	cache_base(&c), U64(88, 0), cache_write(&c, "c-test-only-wrong");
	cache_base(&c), U64(96, UINT64_MAX), cache_write(&c, "c-ties-max");
}

/* Caches with a bad format, name, oracle, reserved byte, row offset or id. */
static void cache_field_cases(void)
{
	struct cache_img c;
	/* format, name, oracle, reserved */
	cache_base(&c), U32(32, 0), cache_write(&c, "c-format-0");
	cache_base(&c), U32(32, 6), cache_write(&c, "c-format-6");
	cache_base(&c), U32(32, 8), cache_write(&c, "c-format-8");
	cache_base(&c), memcpy(c.meta + 112, "ml-1m", 5), cache_write(&c, "c-name-not-synthetic");
	cache_base(&c), U32(32, 5), cache_write(&c, "c-synthetic-no-name");
	cache_base(&c), U32(32, 5), memset(c.meta + 112, 'x', 32),
		cache_write(&c, "c-name-unterminated");
	cache_base(&c), F64(104, 1.5), cache_write(&c, "c-oracle-1.5");
	cache_base(&c), F64(104, -INFINITY), cache_write(&c, "c-oracle-inf");
	cache_base(&c), c.meta[200] = 1, cache_write(&c, "c-reserved");
	/* offsets */
	cache_base(&c), c.off[0] = 1, cache_write(&c, "c-offset-first");
	cache_base(&c), c.off[1] = 5, cache_write(&c, "c-offsets-decrease");
	cache_base(&c), c.off[1] = INT64_MIN, cache_write(&c, "c-offset-negative");
	cache_base(&c), c.off[3] = 3, cache_write(&c, "c-offsets-end");
	cache_base(&c), c.off[1] = INT64_MAX, c.off[2] = INT64_MAX, c.off[3] = INT64_MAX,
		cache_write(&c, "c-offsets-huge");
	/* ids at or past their counts, repeated, out of order */
	cache_base(&c), c.tr[1] = 5, cache_write(&c, "c-train-item-at-count");
	cache_base(&c), c.tr[3] = UINT32_MAX, cache_write(&c, "c-train-item-max");
	cache_base(&c), c.tr[0] = 1, c.tr[1] = 0, cache_write(&c, "c-train-items-unsorted");
	cache_base(&c), c.tr[1] = 0, cache_write(&c, "c-train-item-repeated");
	cache_base(&c), c.te[0] = 5, cache_write(&c, "c-test-item-at-count");
	cache_base(&c), c.te[1] = 3, cache_write(&c, "c-test-item-trained");
	cache_base(&c), c.neg[5] = 5, cache_write(&c, "c-negative-at-count");
	cache_base(&c), c.uids[2] = 11, cache_write(&c, "c-user-ids-repeated");
	cache_base(&c), c.iids[4] = 101, cache_write(&c, "c-item-ids-repeated");
}

/* Caches whose sections disagree with meta or each other, forged frames,
 * sizes claimed beyond the bytes. */
static void cache_layout_cases(void)
{
	struct cache_img c;
	/* shapes that disagree with their blobs */
	cache_base(&c), c.nu = 2, cache_write(&c, "c-userids-short");
	cache_base(&c), c.noff = 3, cache_write(&c, "c-offsets-short");
	cache_base(&c), c.ntr = 5, c.tr[4] = 4, cache_write(&c, "c-trainitm-long");
	cache_base(&c), c.nneg = 7, cache_write(&c, "c-evalneg-long");
	cache_base(&c), c.order[1] = S_IIDS, c.order[2] = S_UIDS, cache_write(&c, "c-order");
	cache_base(&c), c.order[6] = -1, cache_write(&c, "c-missing-evalneg");
	cache_base(&c), c.after_end = 1, cache_write(&c, "c-after-end");
	/* frames */
	cache_base(&c), c.forge[S_UIDS] = 1, frame_checksum = 0,
		cache_write(&c, "c-frame-without-checksum"), frame_checksum = 1;
	cache_base(&c), c.skippable = 1, cache_write(&c, "c-frame-skippable");
	/* sizes claimed beyond what the bytes hold */
	cache_base(&c), U32(0, 1u << 28), U64(48, 4 + (1u << 28)), c.claim[S_UIDS] = 4u << 28,
		cache_write(&c, "c-userids-claim-1GiB");
	cache_base(&c), c.claim[S_NEG] = (uint64_t)1 << 60, cache_write(&c, "c-evalneg-claim-2^60");
	/* a genuine zstd bomb: 2^22 zero user ids (16 MiB) from some 600 bytes,
	 * in a file long enough (8 KB of noise after them) to hold what meta
	 * implies: read in full (what the file holds), then refused */
	cache_base(&c), U32(0, 1u << 22), U64(48, 4 + (1u << 22)), c.rle_users = 1u << 22,
		c.noise_items = 8192, cache_write(&c, "c-userids-rle-16MiB");
}

#undef U32
#undef U64
#undef F64
#define U32(off, v) ncf_put_u32(mi.meta + (off), (v))
#define U64(off, v) ncf_put_u64(mi.meta + (off), (v))
#define F32(off, v) put_f32(mi.meta + (off), (v))
#define F64(off, v) ncf_put_f64(mi.meta + (off), (v))

/* The checkpoint that every reader accepts, and checkpoints with a bad
 * shape or hyperparameter. */
static void model_shape_cases(void)
{
	struct model_img mi;
	model_base(&mi), model_write(&mi, "good");
	/* the shape */
	model_base(&mi), U32(0, 0), model_write(&mi, "m-users-0");
	model_base(&mi), U32(0, (1u << 30) + 1), model_write(&mi, "m-users-over");
	model_base(&mi), U32(4, UINT32_MAX), model_write(&mi, "m-items-max");
	model_base(&mi), U32(8, 0), model_write(&mi, "m-factors-0");
	model_base(&mi), U32(8, 65537), model_write(&mi, "m-factors-over");
	model_base(&mi), U32(12, 1), model_write(&mi, "m-layers-1");
	model_base(&mi), U32(12, 9), model_write(&mi, "m-layers-9");
	model_base(&mi), U32(16, 5), model_write(&mi, "m-layer0-odd");
	model_base(&mi), U32(20, 0), model_write(&mi, "m-layer1-0");
	model_base(&mi), U32(24, 7), model_write(&mi, "m-layer-past-n");
	model_base(&mi), U64(48, mi.T + 1), model_write(&mi, "m-parameters-off-by-1");
	model_base(&mi), U64(48, UINT64_MAX), model_write(&mi, "m-parameters-max");
	/* hyperparameters: NaN and out of range */
	model_base(&mi), F32(56, NAN), model_write(&mi, "m-lr-nan");
	model_base(&mi), F32(56, 0), model_write(&mi, "m-lr-0");
	model_base(&mi), F32(56, INFINITY), model_write(&mi, "m-lr-inf");
	model_base(&mi), F32(60, 1), model_write(&mi, "m-beta1-1");
	model_base(&mi), F32(64, NAN), model_write(&mi, "m-beta2-nan");
	model_base(&mi), F32(68, 0), model_write(&mi, "m-eps-0");
	model_base(&mi), F32(72, 1), model_write(&mi, "m-dropout-1");
	model_base(&mi), F32(72, -0.5f), model_write(&mi, "m-dropout-negative");
	model_base(&mi), U32(76, 1001), model_write(&mi, "m-negatives-1001");
	model_base(&mi), U32(80, 2), model_write(&mi, "m-true-negatives-2");
	model_base(&mi), U64(88, 0), model_write(&mi, "m-batch-0");
	model_base(&mi), U64(88, ((uint64_t)1 << 40) + 1), model_write(&mi, "m-batch-over");
	model_base(&mi), U32(156, 0), model_write(&mi, "m-topk-0");
	model_base(&mi), U32(156, 100001), model_write(&mi, "m-topk-over");
}

/* Checkpoints with a bad cache size, place in the run, metric or array. */
static void model_run_cases(void)
{
	struct model_img mi;
	/* the cache's size */
	model_base(&mi), U64(176, 0), model_write(&mi, "m-positives-0");
	model_base(&mi), U64(176, UINT64_MAX), model_write(&mi, "m-positives-max");
	model_base(&mi), U64(176, 13), model_write(&mi, "m-positives-over-UxI");
	model_base(&mi), U64(200, ((uint64_t)1 << 40) + 1), model_write(&mi, "m-explicit-over");
	/* 2 explicit negatives: S = 4 (1 + 1) + 2 = 10, position 12 past it */
	model_base(&mi), U64(200, 2), U64(120, 12), U64(104, 6), F64(128, 1),
		model_write(&mi, "m-explicit-position-past");
	/* where the run stands */
	model_base(&mi), U32(112, UINT32_MAX), U32(116, UINT32_MAX), model_write(&mi, "m-epoch-max");
	model_base(&mi), U32(112, 1000001), U32(116, 1000001), model_write(&mi, "m-epoch-over");
	model_base(&mi), U32(116, 0), model_write(&mi, "m-epochs-done-differ");
	model_base(&mi), U64(120, 8), model_write(&mi, "m-position-at-end");
	model_base(&mi), U64(120, (uint64_t)1 << 63), model_write(&mi, "m-position-2^63");
	model_base(&mi), U64(120, 2), F64(128, 1), model_write(&mi, "m-position-mid-batch");
	model_base(&mi), U64(104, 3), model_write(&mi, "m-step-wrong");
	model_base(&mi), U64(104, UINT64_MAX), model_write(&mi, "m-step-max");
	model_base(&mi), U64(120, 4), U64(104, 3), F64(128, NAN), model_write(&mi, "m-loss-nan");
	model_base(&mi), U64(120, 4), U64(104, 3), F64(128, -1), model_write(&mi, "m-loss-negative");
	model_base(&mi), F64(128, 2.5), model_write(&mi, "m-loss-at-start");
	/* metrics */
	model_base(&mi), F64(136, NAN), model_write(&mi, "m-best-hr-nan");
	model_base(&mi), F64(136, 2), model_write(&mi, "m-best-hr-2");
	model_base(&mi), F64(136, -1), model_write(&mi, "m-best-hr-none-after-epoch");
	model_base(&mi), U32(152, 2), model_write(&mi, "m-best-epoch-ahead");
	model_base(&mi), F64(160, 0.75), model_write(&mi, "m-last-hr-over-best");
	model_base(&mi), F64(168, INFINITY), model_write(&mi, "m-last-ndcg-inf");
	model_base(&mi), mi.meta[250] = 9, model_write(&mi, "m-reserved");
	/* arrays */
	model_base(&mi), mi.uids[1] = 11, model_write(&mi, "m-user-ids-repeated");
	model_base(&mi), mi.params[3] = NAN, model_write(&mi, "m-param-nan");
	model_base(&mi), mi.m[0] = INFINITY, model_write(&mi, "m-adam-m-inf");
	model_base(&mi), mi.v[1] = -1, model_write(&mi, "m-adam-v-negative");
	model_base(&mi), mi.nparams = mi.T - 1, model_write(&mi, "m-params-short");
	model_base(&mi), mi.claim_params = (uint64_t)mi.T * 4 * 100000,
		model_write(&mi, "m-params-claim");
}

int main(int argc, char **argv)
{
	ncf_set_progname("craft");
	if (argc != 2) {
		fprintf(stderr, "usage: craft DIR\n");
		return 2;
	}
	dir = argv[1];
	char path[4096];
	snprintf(path, sizeof path, "%s/cases", dir);
	cases = fopen(path, "w");
	if (!cases)
		die("%s: cannot create", path);
	cache_count_cases();
	cache_field_cases();
	cache_layout_cases();
	model_shape_cases();
	model_run_cases();
	if (fclose(cases) != 0)
		die("%s: write failed", path);
	return 0;
}
