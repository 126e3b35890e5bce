/*
 * test_cache.c - the cache format (common/cache.c on common/container.c).
 *
 * Round trips: hand-built caches (one with a user who has no training
 * positives, one with no training positives at all, a larger random one)
 * are written with ncf_cache_write, read back with ncf_cache_read and
 * compared field by field and array by array.  Then corrupt copies: every
 * truncation, bit flips in headers and payloads, a changed version with a
 * valid header CRC, wrong magics, an empty file, a checkpoint's magic,
 * forged section headers and caches whose arrays break the invariants.
 * Every one must be refused with -1 and one line on stderr that names the
 * file and says "re-run ncf-prep"; nothing may crash or leak (make
 * check-asan runs this file under ASan and UBSan).
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "container.h"
#include "crc32c.h"
#include "err.h"
#include "idindex.h"
#include "io.h"
#include "helpers.h"
#include "ncf_hd.h"
#include "tap.h"

static char dir[256]; /* the temporary directory of this test */

static void path_in(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

/*
 * Read path expecting a refusal: -1, the cache left empty, and exactly one
 * line on stderr that names the file and hints at re-running ncf-prep (and
 * contains want, when given).  quiet: no diagnostics (for sweeps).
 */
static int refused(const char *path, const char *want, int quiet)
{
	struct ncf_cache c;
	helper_capture_begin();
	int rc = ncf_cache_read(path, &c);
	char *msg = helper_capture_end();
	int lines = 0;
	for (const char *s = msg; *s; s++)
		lines += *s == '\n';
	int ok = rc == -1 && !c.user_ids && !c.item_ids && !c.offsets && !c.train_items &&
		 !c.test_items && !c.eval_neg && !c.entry_user && lines == 1 &&
		 !strncmp(msg, "test_cache: ", 12) && strstr(msg, path) &&
		 strstr(msg, "re-run ncf-prep") && (!want || strstr(msg, want));
	if (!ok && !quiet)
		tap_diag("%s: rc %d, message: %s", path, rc, msg);
	if (rc == 0)
		ncf_cache_free(&c);
	free(msg);
	return ok;
}

/* ---- hand-built caches ------------------------------------------------ */

/*
 * Cache "a": U 4, I 7, N 3.
 *   user 0 (id 10): train 1 4 6, test 2
 *   user 1 (id 7):  no training positives, test 5
 *   user 2 (id 99): train 0 3, test 6
 *   user 3 (id 4000000000): train 5, test 0
 */
static void make_a(struct ncf_cache *c)
{
	static const uint32_t uids[] = {10, 7, 99, 4000000000u};
	static const uint32_t iids[] = {1, 2, 3, 50, 4294967295u, 0, 77};
	static const int64_t off[] = {0, 3, 3, 5, 6};
	static const uint32_t tr[] = {1, 4, 6, 0, 3, 5};
	static const uint32_t te[] = {2, 5, 6, 0};
	static const uint32_t neg[] = {0, 3, 5, 2, 6, 6, 1, 2, 4, 6, 4, 3};
	memset(c, 0, sizeof *c);
	c->users = 4;
	c->items = 7;
	c->train_positives = 6;
	c->eval_negatives = 3;
	c->seed = 0xfeedface12345678ull;
	c->min_ratings = 2;
	c->format = NCF_FORMAT_SYNTHETIC;
	c->source_bytes = 123456789012ull;
	c->source_crc = 0xdeadbeef;
	snprintf(c->synthetic, sizeof c->synthetic, "ml-latest-smallx1000");
	/* counters that add up as a reader checks: read = P + U + repeats +
	 * dropped; dropped users and items at most dropped ratings */
	c->ratings_read = 14;
	c->duplicates_dropped = 1;
	c->users_dropped = 2;
	c->ratings_dropped = 3;
	c->items_dropped = 3;
	c->test_only_users = 1;
	c->test_ties = 2;
	c->oracle_hr = 0.25;
	c->user_ids = malloc(sizeof uids);
	memcpy(c->user_ids, uids, sizeof uids);
	c->item_ids = malloc(sizeof iids);
	memcpy(c->item_ids, iids, sizeof iids);
	c->offsets = malloc(sizeof off);
	memcpy(c->offsets, off, sizeof off);
	c->train_items = malloc(sizeof tr);
	memcpy(c->train_items, tr, sizeof tr);
	c->test_items = malloc(sizeof te);
	memcpy(c->test_items, te, sizeof te);
	c->eval_neg = malloc(sizeof neg);
	memcpy(c->eval_neg, neg, sizeof neg);
}

/* Cache "b": 3 users who each have only a test positive (P = 0), I 2,
 * N 1, no oracle, no synthetic name. */
static void make_b(struct ncf_cache *c)
{
	memset(c, 0, sizeof *c);
	c->users = 3;
	c->items = 2;
	c->eval_negatives = 1;
	c->seed = 1;
	c->format = NCF_FORMAT_ML1M;
	c->test_only_users = 3;
	c->ratings_read = 3;
	c->oracle_hr = NAN;
	c->user_ids = malloc(12);
	c->item_ids = malloc(8);
	c->offsets = calloc(4, sizeof(int64_t));
	c->train_items = NULL;
	c->test_items = malloc(12);
	c->eval_neg = malloc(12);
	for (uint32_t u = 0; u < 3; u++) {
		c->user_ids[u] = u + 1;
		c->test_items[u] = u % 2;
		c->eval_neg[u] = (u + 1) % 2;
	}
	c->item_ids[0] = 5;
	c->item_ids[1] = 6;
}

/* Cache "c": U 300, I 5000, N 100, random rows of 0..200 items (some
 * empty), drawn with Philox so that the test is reproducible. */
static void make_c(struct ncf_cache *c)
{
	memset(c, 0, sizeof *c);
	uint32_t U = 300, I = 5000, N = 100;
	c->users = U;
	c->items = I;
	c->eval_negatives = N;
	c->seed = 42;
	c->format = NCF_FORMAT_ML20M;
	c->oracle_hr = NAN;
	c->user_ids = malloc(4 * U);
	c->item_ids = malloc(4 * I);
	c->offsets = malloc(8 * (U + 1));
	c->test_items = malloc(4 * U);
	c->eval_neg = malloc(4 * (size_t)U * N);
	c->train_items = malloc(4 * (size_t)U * 201);
	unsigned char *mark = calloc(I, 1);
	c->offsets[0] = 0;
	for (uint32_t u = 0; u < U; u++) {
		c->user_ids[u] = 3 * u + 1;
		ncf_u32x4 r = ncf_rng(42, NCF_RNG_BENCH, 1, u, 0);
		uint32_t len = ncf_uniform_below(r.v[0], 201);
		memset(mark, 0, I);
		for (uint32_t k = 0, d = 0; k < len; d++) {
			uint32_t it = ncf_uniform_below(ncf_rng(42, NCF_RNG_BENCH, 2, u, d).v[0], I);
			if (!mark[it]) {
				mark[it] = 1;
				k++;
			}
		}
		int64_t o = c->offsets[u];
		for (uint32_t it = 0; it < I; it++)
			if (mark[it])
				c->train_items[o++] = it;
		c->offsets[u + 1] = o;
		c->test_only_users += o == c->offsets[u];
		/* the test item is never one of the user's training items */
		uint32_t t = ncf_uniform_below(r.v[1], I);
		while (mark[t])
			t = (t + 1) % I;
		c->test_items[u] = t;
		for (uint32_t k = 0; k < N; k++)
			c->eval_neg[(size_t)u * N + k] =
				ncf_uniform_below(ncf_rng(42, NCF_RNG_BENCH, 3, u, k).v[0], I);
	}
	for (uint32_t i = 0; i < I; i++)
		c->item_ids[i] = 1 + i + 5 * (i / 8);
	c->train_positives = c->offsets[U];
	c->ratings_read = (uint64_t)c->train_positives + U;
	free(mark);
}

static int same_array(const void *a, const void *b, size_t bytes, const char *what)
{
	if (bytes == 0)
		return 1;
	if (!a || !b || memcmp(a, b, bytes)) {
		tap_diag("%s differs", what);
		return 0;
	}
	return 1;
}

/*
 * Cache "g", a given split (NCF_FORMAT_FEATURE_SPEC) with named users and
 * items and explicit negatives: U 3, I 6, N 2, E 4.
 *   user 0 ("alice"): train 1 2, test 2 (also a training positive: given),
 *     negatives {0, 0} (a repeat, kept), explicit negatives 3 5
 *   user 1 ("bob"): no training positives, test 4, negatives {4, 1},
 *     explicit negatives 0 0
 *   user 2 ("7"): train 0, test 5, negatives {3, 1}, no explicit negatives
 */
static void make_g(struct ncf_cache *c)
{
	static const char *users[] = {"alice", "bob", "7"};
	static const char *items[] = {"B0001", "B0002", "x y", "42", "B0005", "\xc3\xa9t\xc3\xa9"};
	static const int64_t off[] = {0, 2, 2, 3};
	static const uint32_t tr[] = {1, 2, 0};
	static const uint32_t te[] = {2, 4, 5};
	static const uint32_t neg[] = {0, 0, 4, 1, 3, 1};
	static const int64_t noff[] = {0, 2, 4, 4};
	static const uint32_t nit[] = {3, 5, 0, 0};
	memset(c, 0, sizeof *c);
	c->users = 3;
	c->items = 6;
	c->train_positives = 3;
	c->eval_negatives = 2;
	c->format = NCF_FORMAT_FEATURE_SPEC;
	c->split_given = 1;
	c->train_negatives = 4;
	c->ratings_read = 7; /* P + U + 1 repeat */
	c->duplicates_dropped = 1;
	c->test_only_users = 1;
	c->oracle_hr = NAN;
	c->user_ids = malloc(3 * 4);
	c->item_ids = malloc(6 * 4);
	for (uint32_t k = 0; k < 3; k++) {
		c->user_ids[k] = k;
		ncf_names_add(&c->user_names, users[k], strlen(users[k]));
	}
	for (uint32_t k = 0; k < 6; k++) {
		c->item_ids[k] = k;
		ncf_names_add(&c->item_names, items[k], strlen(items[k]));
	}
#define COPY(f, a)                                                                     \
	do {                                                                           \
		c->f = malloc(sizeof a);                                               \
		memcpy(c->f, a, sizeof a);                                             \
	} while (0)
	COPY(offsets, off);
	COPY(train_items, tr);
	COPY(test_items, te);
	COPY(eval_neg, neg);
	COPY(neg_offsets, noff);
	COPY(neg_items, nit);
#undef COPY
}

/* Every stored field and array of got equals want's; entry_user is right. */
static int same_cache(const struct ncf_cache *got, const struct ncf_cache *want)
{
	int ok = 1;
#define FIELD(f)                                                                       \
	if (got->f != want->f) {                                                       \
		tap_diag("field " #f ": got %llu, want %llu", (unsigned long long)got->f,   \
			 (unsigned long long)want->f);                                 \
		ok = 0;                                                                \
	}
	FIELD(users)
	FIELD(items)
	FIELD(train_positives)
	FIELD(eval_negatives)
	FIELD(seed)
	FIELD(min_ratings)
	FIELD(format)
	FIELD(source_bytes)
	FIELD(source_crc)
	FIELD(ratings_read)
	FIELD(duplicates_dropped)
	FIELD(users_dropped)
	FIELD(ratings_dropped)
	FIELD(items_dropped)
	FIELD(test_only_users)
	FIELD(test_ties)
	FIELD(split_given)
	FIELD(train_negatives)
	FIELD(user_names.n)
	FIELD(user_names.bytes)
	FIELD(item_names.n)
	FIELD(item_names.bytes)
#undef FIELD
	if (!(got->oracle_hr == want->oracle_hr ||
	      (isnan(got->oracle_hr) && isnan(want->oracle_hr)))) {
		tap_diag("oracle_hr: got %g, want %g", got->oracle_hr, want->oracle_hr);
		ok = 0;
	}
	if (strcmp(got->synthetic, want->synthetic)) {
		tap_diag("synthetic: got '%s', want '%s'", got->synthetic, want->synthetic);
		ok = 0;
	}
	if (!ok)
		return 0;
	size_t U = want->users, I = want->items, P = (size_t)want->train_positives;
	ok &= same_array(got->user_ids, want->user_ids, 4 * U, "user_ids");
	ok &= same_array(got->item_ids, want->item_ids, 4 * I, "item_ids");
	ok &= same_array(got->offsets, want->offsets, 8 * (U + 1), "offsets");
	ok &= same_array(got->train_items, want->train_items, 4 * P, "train_items");
	ok &= same_array(got->test_items, want->test_items, 4 * U, "test_items");
	ok &= same_array(got->eval_neg, want->eval_neg, 4 * U * want->eval_negatives, "eval_neg");
	if (want->train_negatives) {
		ok &= same_array(got->neg_offsets, want->neg_offsets, 8 * (U + 1), "neg_offsets");
		ok &= same_array(got->neg_items, want->neg_items, 4 * want->train_negatives,
				 "neg_items");
	} else if (got->neg_offsets || got->neg_items) {
		tap_diag("explicit negatives where there are none");
		ok = 0;
	}
	ok &= same_array(got->user_names.text, want->user_names.text, want->user_names.bytes,
			 "user names");
	ok &= same_array(got->item_names.text, want->item_names.text, want->item_names.bytes,
			 "item names");
	for (uint32_t k = 0; k < want->user_names.n; k++)
		ok &= got->user_names.start[k] == want->user_names.start[k];
	for (uint32_t k = 0; k < want->item_names.n; k++)
		ok &= got->item_names.start[k] == want->item_names.start[k];
	if (!got->entry_user) {
		tap_diag("entry_user not derived");
		return 0;
	}
	for (uint32_t u = 0; u < want->users; u++)
		for (int64_t k = want->offsets[u]; k < want->offsets[u + 1]; k++)
			if (got->entry_user[k] != u) {
				tap_diag("entry_user[%lld] = %u, want %u", (long long)k,
					 got->entry_user[k], u);
				return 0;
			}
	return ok;
}

/* Write c to name, read it back, compare. */
static int round_trip(const struct ncf_cache *c, const char *name)
{
	char path[400];
	path_in(path, sizeof path, name);
	if (ncf_cache_write(c, path) != 0) {
		tap_diag("%s: write failed", path);
		return 0;
	}
	struct ncf_cache r;
	if (ncf_cache_read(path, &r) != 0) {
		tap_diag("%s: read failed", path);
		return 0;
	}
	int ok = same_cache(&r, c);
	ncf_cache_free(&r);
	return ok;
}

/* The names in dir, sorted, joined by spaces (for the no-leftover check). */
static void list_dir(char *out, size_t n)
{
	struct dirent **ents;
	int k = scandir(dir, &ents, NULL, alphasort);
	out[0] = 0;
	for (int i = 0; i < k; i++) {
		const char *s = ents[i]->d_name;
		if (strcmp(s, ".") && strcmp(s, "..")) {
			if (out[0])
				strncat(out, " ", n - strlen(out) - 1);
			strncat(out, s, n - strlen(out) - 1);
		}
		free(ents[i]);
	}
	if (k >= 0)
		free(ents);
}

/* ---- the file's layout, found by walking its section headers ----------- */

struct section {
	size_t hdr;	/* offset of its 32-byte header */
	size_t payload; /* offset of its payload */
	size_t comp;	/* payload bytes */
	char tag[9];
};

static int walk(const unsigned char *b, size_t len, struct section *s, int max)
{
	size_t o = 32;
	int n = 0;
	while (o + 32 <= len && n < max) {
		s[n].hdr = o;
		s[n].payload = o + 32;
		s[n].comp = (size_t)ncf_get_u64(b + o + 16);
		memcpy(s[n].tag, b + o, 8);
		s[n].tag[8] = 0;
		o += 32 + s[n].comp;
		if (!strcmp(s[n++].tag, "end"))
			break;
	}
	return n;
}

/* Recompute the CRC of the 32-byte header at h. */
static void fix_crc(unsigned char *h)
{
	ncf_put_u32(h + 28, ncf_crc32c(0, h, 28));
}

/* The scratch file that the corruption sweeps rewrite in place (creating
 * and removing thousands of files is slow on some disks). */
static char scratch[400];
static int scratch_fd = -1;

static void scratch_set(const unsigned char *b, size_t len)
{
	if (scratch_fd < 0) {
		path_in(scratch, sizeof scratch, "corrupt.ncfc");
		scratch_fd = open(scratch, O_RDWR | O_CREAT | O_TRUNC, 0600);
	}
	if (scratch_fd < 0 || ftruncate(scratch_fd, (off_t)len) != 0 ||
	    (len && pwrite(scratch_fd, b, len, 0) != (ssize_t)len)) {
		printf("Bail out! cannot write %s\n", scratch);
		exit(1);
	}
}

/* Write a modified copy of b (len bytes) and expect a refusal.  name: a
 * file of its own (kept when the check fails), or NULL for the scratch
 * file. */
static int refused_copy(const unsigned char *b, size_t len, const char *name, const char *want,
			int quiet)
{
	if (!name) {
		scratch_set(b, len);
		return refused(scratch, want, quiet);
	}
	char path[400];
	path_in(path, sizeof path, name);
	helper_write_file(path, b, len);
	int ok = refused(path, want, quiet);
	if (ok)
		unlink(path);
	return ok;
}

/* A container file with magic "NCFCACHE" holding meta (256 bytes as given)
 * followed by the sections of cache c from userids on (or nothing but the
 * end section when c is NULL). */
static void forge(const char *path, const unsigned char *meta, const struct ncf_cache *c)
{
	FILE *fp = fopen(path, "wb");
	struct ncf_cw w = {0};
	uint32_t s4 = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(4);
	ncf_cw_begin(&w, fp, path, "NCFCACHE", NCF_CACHE_VERSION);
	ncf_cw_section(&w, "meta", meta, 256, 0);
	if (c) {
		size_t U = c->users, I = c->items;
		ncf_cw_section(&w, "userids", c->user_ids, 4 * U, s4);
		ncf_cw_section(&w, "itemids", c->item_ids, 4 * I, s4);
	}
	ncf_cw_end(&w);
	fclose(fp);
}

/* The meta section of a cache with these sizes (other fields zero). */
static void meta_of(unsigned char *m, uint32_t U, uint32_t I, uint64_t P, uint32_t N)
{
	memset(m, 0, 256);
	ncf_put_u32(m + 0, U);
	ncf_put_u32(m + 4, I);
	ncf_put_u64(m + 8, P);
	ncf_put_u32(m + 16, N);
	ncf_put_u64(m + 48, P + U); /* ratings_read, as the counters require */
	ncf_put_u32(m + 32, NCF_FORMAT_ML20M);
	ncf_put_f64(m + 104, NAN);
}

/* ---- the cases ---------------------------------------------------------- */

/* The hand-built caches, their files, and the bytes of a for the corruptions
 * (read once the round trips have written it; sec its sections). */
static struct ncf_cache ca, cb, cc, cg;
static char pa[400], pb[400], pc[400];
static unsigned char *orig, *buf;
static size_t len;
static struct section sec[16];
static int nsec;

static void t_round_trip_a(void)
{
	tap_ok(round_trip(&ca, "a.ncfc"), "a.ncfc reads back as written");
}

static void t_round_trip_b(void)
{
	tap_ok(round_trip(&cb, "b.ncfc"), "b.ncfc reads back as written");
}

static void t_round_trip_c(void)
{
	tap_ok(round_trip(&cc, "c.ncfc"), "c.ncfc reads back as written");
}

/* The atomic write leaves only the final names. */
static void t_round_trip_g(void)
{
	tap_ok(round_trip(&cg, "g.ncfc"), "cache g read back as written");
	char path[400];
	path_in(path, sizeof path, "g.ncfc");
	size_t n;
	unsigned char *b = helper_read_file(path, &n);
	tap_ok(b && ncf_get_u32(b + 8) == 2, "written as version 2");
	tap_ok(ncf_cache_version(&ca) == 1 && ncf_cache_version(&cg) == 2,
	       "a, which uses none of it, is version 1");
	free(b);
	unlink(path);
}

/* The ids of either kind: a cache's, compared and looked up. */
static void t_ids_of_g(void)
{
	char ib[NCF_ID_BUF];
	struct ncf_id a = ncf_cache_user_id(&cg, 0), seven = ncf_cache_user_id(&cg, 2);
	TAP_CHECK(a.text && !strcmp(ncf_id_str(a, ib), "alice"));
	TAP_CHECK(ncf_id_equal(seven, (struct ncf_id){NULL, 0, 7}));
	TAP_CHECK(!ncf_id_equal(seven, (struct ncf_id){NULL, 0, 70}));
	TAP_CHECK(ncf_id_equal(ncf_cache_user_id(&ca, 1), (struct ncf_id){NULL, 0, 7}));
	TAP_CHECK(ncf_id_equal(ncf_cache_user_id(&ca, 1), seven));
	TAP_CHECK(!strcmp(ncf_id_str(ncf_cache_user_id(&ca, 3), ib), "4000000000"));
	struct ncf_idindex x;
	ncf_idindex_init_ids(&x, cg.item_ids, &cg.item_names, cg.items);
	int ok = 1;
	for (uint32_t i = 0; i < cg.items; i++)
		ok &= ncf_idindex_find_id(&x, ncf_cache_item_id(&cg, i)) == i;
	tap_ok(ok, "every item name found at its index");
	TAP_CHECK(ncf_idindex_find_id(&x, ncf_id_from_text("0042", 4)) == 3);
	TAP_CHECK(ncf_idindex_find_id(&x, ncf_id_from_text("x y", 3)) == 2);
	TAP_CHECK(ncf_idindex_find_id(&x, ncf_id_from_text("x", 1)) == -1);
	TAP_CHECK(ncf_idindex_find_id(&x, ncf_id_from_text("B000", 4)) == -1);
	ncf_idindex_free(&x);
	ncf_idindex_init_ids(&x, ca.item_ids, &ca.item_names, ca.items);
	TAP_CHECK(ncf_idindex_find_id(&x, ncf_id_from_text("77", 2)) == 6);
	TAP_CHECK(ncf_idindex_find_id(&x, ncf_id_from_text("B0001", 5)) == -1);
	ncf_idindex_free(&x);
}

static void t_no_temporaries(void)
{
	char names[4096];
	list_dir(names, sizeof names);
	if (!tap_ok(!strcmp(names, "a.ncfc b.ncfc c.ncfc"), "only the three caches are left"))
		tap_diag("directory holds: %s", names);
}

/* Files are reproducible byte for byte, and write_fp writes the same bytes
 * as write. */
static void t_reproducible(void)
{
	size_t n1, n2;
	unsigned char *f1 = helper_read_file(pa, &n1);
	char *mem = NULL;
	size_t mlen = 0;
	FILE *ms = open_memstream(&mem, &mlen);
	int rc = ncf_cache_write_fp(&ca, ms, "<memory>");
	fclose(ms);
	char p2[400];
	path_in(p2, sizeof p2, "a2.ncfc");
	ncf_cache_write(&ca, p2);
	unsigned char *f2 = helper_read_file(p2, &n2);
	tap_ok(rc == 0 && f1 && f2 && n1 == n2 && n1 == mlen && !memcmp(f1, f2, n1) &&
		       !memcmp(f1, mem, n1),
	       "file, file again and stream hold the same bytes");
	unlink(p2);
	free(f1);
	free(f2);
	free(mem);
}

static void t_read_stdin(void)
{
	struct ncf_cache r;
	int ok = freopen(pa, "rb", stdin) != NULL && ncf_cache_read("-", &r) == 0;
	if (ok) {
		ok = same_cache(&r, &ca);
		ncf_cache_free(&r);
	}
	tap_ok(ok, "a.ncfc read from stdin (\"-\") is cache a");
	if (!freopen("/dev/null", "rb", stdin))
		tap_diag("cannot reopen stdin");
}

/* The header starts as documented at the top of cache.c. */
static void t_layout(void)
{
	size_t n;
	unsigned char *f = helper_read_file(pa, &n);
	int ok = f && n > 68 && !memcmp(f, "NCFCACHE\1\0\0\0", 12) &&
		 ncf_get_u32(f + 28) == ncf_crc32c(0, f, 28) && !memcmp(f + 32, "meta\0\0\0\0", 8) &&
		 ncf_get_u64(f + 40) == 256 && !memcmp(f + 64, "\x28\xb5\x2f\xfd", 4);
	tap_ok(ok, "magic, version 1, header CRC, meta section of 256 bytes, zstd frame");
	free(f);
}

static void t_fingerprint(void)
{
	uint32_t f0 = ncf_cache_fingerprint(&ca);
	ca.item_ids[3]++;
	uint32_t f1 = ncf_cache_fingerprint(&ca);
	ca.item_ids[3]--;
	tap_ok(f0 != f1 && f0 == ncf_cache_fingerprint(&ca), "the fingerprint follows the item ids");
	tap_ok(ncf_cache_train_users(&ca) == 3 && ncf_cache_train_users(&cb) == 0,
	       "train users: 3 of a's 4 rows, none of b's");
}

/* The --info text of c (malloc'd). */
static char *info_of(const struct ncf_cache *c)
{
	char *txt = NULL;
	size_t tlen = 0;
	FILE *ms = open_memstream(&txt, &tlen);
	ncf_cache_print_info(c, ms);
	fclose(ms);
	return txt;
}

static void t_info_a(void)
{
	char *txt = info_of(&ca);
	tap_ok(strstr(txt, "format\tsynthetic\n") && strstr(txt, "synthetic\tml-latest-smallx1000\n") &&
		       strstr(txt, "users\t4\n") && strstr(txt, "items\t7\n") &&
		       strstr(txt, "train_positives\t6\n") && strstr(txt, "test_positives\t4\n") &&
		       strstr(txt, "eval_negatives_per_user\t3\n") &&
		       strstr(txt, "seed\t18369614218089748088\n") &&
		       strstr(txt, "source_crc32c\tdeadbeef\n") &&
		       strstr(txt, "oracle_hr@10\t0.250000\n"),
	       "--info lines of cache a");
	free(txt);
}

static void t_info_b(void)
{
	char *txt = info_of(&cb);
	tap_ok(strstr(txt, "format\tml-1m\n") && !strstr(txt, "synthetic") &&
		       !strstr(txt, "oracle_hr") && strstr(txt, "test_only_users\t3\n"),
	       "--info of cache b: no synthetic or oracle line");
	free(txt);
}

static void t_write_missing_dir(void)
{
	char bad[400];
	path_in(bad, sizeof bad, "no/such/dir.ncfc");
	helper_capture_begin();
	int rc = ncf_cache_write(&ca, bad);
	char *msg = helper_capture_end();
	tap_ok(rc == -1 && strstr(msg, "cannot create"), "-1 and \"cannot create\"");
	free(msg);
}

static void t_sections(void)
{
	if (!tap_ok(nsec == 8 && !strcmp(sec[0].tag, "meta") && !strcmp(sec[7].tag, "end") &&
			    sec[7].hdr + 32 == len,
		    "8 sections from meta to end, the last ending the file"))
		tap_diag("found %d sections", nsec);
}

static void t_empty(void)
{
	tap_ok(refused_copy(orig, 0, "empty.ncfc", "empty file", 0), "refused as an empty file");
}

static void t_five_bytes(void)
{
	tap_ok(refused_copy(orig, 5, "five.ncfc", NULL, 0), "refused");
}

static void t_cut_file_header(void)
{
	tap_ok(refused_copy(orig, 20, "t-hdr.ncfc", "truncated", 0), "refused as truncated");
}

static void t_cut_section_header(void)
{
	tap_ok(refused_copy(orig, sec[2].hdr + 13, "t-sec.ncfc", "truncated", 0),
	       "refused as truncated");
}

static void t_cut_payload(void)
{
	tap_ok(refused_copy(orig, sec[4].payload + sec[4].comp / 2, "t-pay.ncfc", "truncated", 0),
	       "refused as truncated");
}

static void t_cut_end(void)
{
	tap_ok(refused_copy(orig, sec[7].hdr, "t-end.ncfc", "section 'end'", 0),
	       "refused, naming section 'end'");
}

static void t_every_truncation(void)
{
	int bad = 0;
	for (size_t cut = 0; cut < len; cut++)
		if (!refused_copy(orig, cut, NULL, NULL, bad > 3))
			bad++;
	tap_ok(bad == 0, "every truncation (0 to %zu bytes) refused (%d were not)", len - 1, bad);
}

/* A copy of orig with bit (of the whole file) flipped into buf. */
static void flip(size_t bit)
{
	memcpy(buf, orig, len);
	buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
}

static void t_file_header_bits(void)
{
	int bad = 0;
	for (size_t bit = 0; bit < 32 * 8; bit++) {
		flip(bit);
		bad += !refused_copy(buf, len, NULL, NULL, bad > 3);
	}
	tap_ok(bad == 0, "each of the 256 bits of the file header flipped: refused (%d not)", bad);
}

static void t_section_header_bits(void)
{
	int bad = 0;
	for (int s = 0; s < nsec; s++)
		for (size_t bit = 0; bit < 32 * 8; bit++) {
			flip(sec[s].hdr * 8 + bit);
			bad += !refused_copy(buf, len, NULL, "checksum mismatch", bad > 3);
		}
	tap_ok(bad == 0, "each bit of each of the %d section headers flipped: refused as a "
			 "checksum mismatch (%d not)",
	       nsec, bad);
}

/* The middle and the last byte (zstd's content checksum) of each payload. */
static void t_payload_bits(void)
{
	int bad = 0, tried = 0;
	for (int s = 0; s < nsec; s++) {
		if (!sec[s].comp)
			continue;
		size_t at[2] = {sec[s].payload + sec[s].comp / 2, sec[s].payload + sec[s].comp - 1};
		for (int j = 0; j < 2; j++)
			for (int bit = 0; bit < 8; bit++) {
				flip(at[j] * 8 + (size_t)bit);
				tried++;
				bad += !refused_copy(buf, len, NULL, NULL, bad > 3);
			}
	}
	tap_ok(bad == 0 && tried > 0,
	       "bit flips in the middle and the checksum of every payload refused (%d of %d not)",
	       bad, tried);
}

/* Read buf (len bytes) through the scratch file after a bit flip: 1 when it
 * is refused with the hint or read back as exactly cache a (a bit zstd
 * ignores; *harmless counts those), 0 (with a diagnostic while quiet is 0)
 * otherwise. */
static int flip_refused_or_harmless(size_t bit, int quiet, int *harmless)
{
	scratch_set(buf, len);
	struct ncf_cache r;
	helper_capture_begin();
	int rc = ncf_cache_read(scratch, &r);
	char *msg = helper_capture_end();
	int ok = 1;
	if (rc == 0) {
		if (same_cache(&r, &ca))
			(*harmless)++;
		else {
			if (!quiet)
				tap_diag("flipping bit %zu of byte %zu gives another cache", bit % 8,
					 bit / 8);
			ok = 0;
		}
		ncf_cache_free(&r);
	} else if (!strstr(msg, "re-run ncf-prep")) {
		if (!quiet)
			tap_diag("bit %zu: message without the hint: %s", bit, msg);
		ok = 0;
	}
	free(msg);
	return ok;
}

/* Under the sanitizers (slow allocations), one bit per byte. */
static void t_every_bit(void)
{
	int bad = 0, harmless = 0;
	size_t step = helper_sanitizer() ? 8 : 1;
	for (size_t bit = 0; bit < len * 8; bit += step) {
		if (step == 8)
			bit = (bit & ~(size_t)7) | ((bit / 8) % 8);
		flip(bit);
		bad += !flip_refused_or_harmless(bit, bad >= 4, &harmless);
	}
	if (harmless)
		tap_diag("%d bit flips were ignored by zstd and read back the original", harmless);
	tap_ok(bad == 0, "%s single-bit flip of the %zu-byte file is refused or harmless",
	       step == 1 ? "every" : "one", len);
}

/* A named cache written with names that the reader must refuse: two
 * items of one name, and users whose numbered ids are not their indices
 * (the writer trusts its caller; the reader trusts no file). */
static void t_bad_names(void)
{
	struct ncf_cache c;
	char path[400];
	make_g(&c);
	static const char *twice[] = {"B0001", "B0002", "x y", "B0002", "B0005", "z"};
	ncf_names_free(&c.item_names);
	for (uint32_t k = 0; k < 6; k++)
		ncf_names_add(&c.item_names, twice[k], strlen(twice[k]));
	path_in(path, sizeof path, "dupname.ncfc");
	TAP_CHECK(ncf_cache_write(&c, path) == 0);
	tap_ok(refused(path, "section 'itemnams': name 'B0002' appears twice", 0),
	       "a name given twice refused, naming the section and the name");
	unlink(path);
	ncf_cache_free(&c);
	make_g(&c);
	c.user_ids[0] = 1;
	c.user_ids[1] = 0;
	path_in(path, sizeof path, "idorder.ncfc");
	TAP_CHECK(ncf_cache_write(&c, path) == 0);
	tap_ok(refused(path, "section 'usernams' names the ids, but the numbered ids are not "
			     "the indices (id 1 at 0)", 0),
	       "names over ids that are not the indices refused");
	unlink(path);
	ncf_cache_free(&c);
}

/* A copy of orig with version v in the file header, its CRC fixed. */
static void t_version(uint32_t v)
{
	char name[32], want[32];
	snprintf(name, sizeof name, "v%u.ncfc", v);
	snprintf(want, sizeof want, "format version %u", v);
	memcpy(buf, orig, len);
	ncf_put_u32(buf + 8, v);
	fix_crc(buf);
	tap_ok(refused_copy(buf, len, name, want, 0), "refused as %s", want);
}

/* Cache a (version 1) claiming version 2: its meta section holds nothing
 * a version 2 cache adds. */
static void t_v2_empty(void)
{
	memcpy(buf, orig, len);
	ncf_put_u32(buf + 8, 2);
	fix_crc(buf);
	tap_ok(refused_copy(buf, len, "v2.ncfc", "holds nothing of version 2", 0),
	       "refused, naming what is missing");
}

/* A copy of orig with magic m, the header CRC fixed: refused (with want). */
static void t_magic(const char *m, const char *name, const char *want)
{
	memcpy(buf, orig, len);
	memcpy(buf, m, 8);
	fix_crc(buf);
	tap_ok(refused_copy(buf, len, name, want, 0), "magic %.8s refused", m);
}

static void t_ratings_csv(void)
{
	static const char text[] = "userId,movieId,rating,timestamp\n1,1,4.0,964982703\n";
	tap_ok(refused_copy((const unsigned char *)text, sizeof text - 1, "ratings.csv", "bad magic",
			    0),
	       "refused as a bad magic");
}

/* A copy of orig whose section s has the 64-bit field at byte at of its
 * header set to v, the header CRC fixed: refused (with want). */
static void t_forged_size(int s, size_t at, uint64_t v, const char *name, const char *want)
{
	memcpy(buf, orig, len);
	ncf_put_u64(buf + sec[s].hdr + at, v);
	fix_crc(buf + sec[s].hdr);
	tap_ok(refused_copy(buf, len, name, want, 0), "section %s with %llu at header byte %zu refused",
	       sec[s].tag, (unsigned long long)v, at);
}

static void t_section_misplaced(void)
{
	memcpy(buf, orig, len);
	memcpy(buf + sec[1].hdr, "itemids\0", 8);
	fix_crc(buf + sec[1].hdr);
	tap_ok(refused_copy(buf, len, "tag.ncfc", "expected section 'userids'", 0),
	       "itemids where userids belongs refused");
}

static void t_unknown_filter(void)
{
	memcpy(buf, orig, len);
	ncf_put_u32(buf + sec[1].hdr + 24, ncf_get_u32(buf + sec[1].hdr + 24) | 4);
	fix_crc(buf + sec[1].hdr);
	tap_ok(refused_copy(buf, len, "filt.ncfc", NULL, 0), "filter bit 4 refused");
}

/* A forged cache whose meta says U users, I items, P positives and N
 * negatives, followed by a's id sections (nothing but end without ids). */
static void t_forged_meta(uint32_t U, uint32_t I, uint64_t P, uint32_t N, int ids,
			  const char *want)
{
	unsigned char meta[256];
	char path[400];
	path_in(path, sizeof path, "forged.ncfc");
	meta_of(meta, U, I, P, N);
	forge(path, meta, ids ? &ca : NULL);
	tap_ok(refused(path, want, 0), "refused: %s", want);
	unlink(path);
}

/* x (a cache a with one array changed) written and read: refused (with
 * want). */
static int refused_built(const struct ncf_cache *x, const char *want)
{
	char path[400];
	path_in(path, sizeof path, "bad.ncfc");
	ncf_cache_write(x, path);
	int ok = refused(path, want, 0);
	if (ok)
		unlink(path);
	return ok;
}

static void t_bad_offsets(void)
{
	struct ncf_cache x;
	make_a(&x);
	x.offsets[0] = 1;
	tap_ok(refused_built(&x, "first row offset"), "a first offset of 1 refused");
	x.offsets[0] = 0;
	x.offsets[2] = 2;
	tap_ok(refused_built(&x, "row offsets decrease at user 1"), "decreasing offsets refused");
	x.offsets[2] = 3;
	x.offsets[4] = 5;
	tap_ok(refused_built(&x, "do not end"), "offsets ending short of P refused");
	ncf_cache_free(&x);
}

static void t_bad_train_items(void)
{
	struct ncf_cache x;
	make_a(&x);
	x.train_items[2] = 7;
	tap_ok(refused_built(&x, "training items"), "training item 7 of 7 refused");
	x.train_items[2] = 4; /* equal to its predecessor */
	tap_ok(refused_built(&x, "training items"), "a repeated training item refused");
	ncf_cache_free(&x);
}

static void t_bad_test_item(void)
{
	struct ncf_cache x;
	make_a(&x);
	x.test_items[3] = 7;
	tap_ok(refused_built(&x, "test item"), "test item 7 of 7 refused");
	ncf_cache_free(&x);
}

static void t_bad_eval_neg(void)
{
	struct ncf_cache x;
	make_a(&x);
	x.eval_neg[11] = 0xFFFFFFFFu;
	tap_ok(refused_built(&x, "evaluation negative"), "evaluation negative 2^32-1 refused");
	ncf_cache_free(&x);
}

static void t_zero_users(void)
{
	struct ncf_cache x;
	make_a(&x);
	x.users = 0;
	tap_ok(refused_built(&x, "impossible sizes"), "0 users refused as impossible sizes");
	x.users = 4;
	ncf_cache_free(&x);
}

static void t_zero_items(void)
{
	struct ncf_cache x;
	make_a(&x);
	x.items = 0;
	tap_ok(refused_built(&x, "impossible sizes"), "0 items refused as impossible sizes");
	x.items = 7;
	ncf_cache_free(&x);
}

/* x (a cache g with something changed) written and read: refused
 * (with want). */
static int refused_g(void (*change)(struct ncf_cache *), const char *want)
{
	struct ncf_cache x;
	make_g(&x);
	change(&x);
	int ok = refused_built(&x, want);
	ncf_cache_free(&x);
	return ok;
}

static void neg_first(struct ncf_cache *x) { x->neg_offsets[0] = 1; }
static void neg_down(struct ncf_cache *x) { x->neg_offsets[2] = 1; }
static void neg_end(struct ncf_cache *x) { x->neg_offsets[2] = x->neg_offsets[3] = 3; }
static void neg_item(struct ncf_cache *x) { x->neg_items[3] = 6; }
static void not_given(struct ncf_cache *x) { x->split_given = 0; }
static void twice(struct ncf_cache *x) { x->item_names.text[10] = '1'; }
static void tab(struct ncf_cache *x) { x->item_names.text[7] = '\t'; }
static void padded(struct ncf_cache *x)
{
	ncf_names_free(&x->user_names);
	ncf_names_add(&x->user_names, "a", 1);
	ncf_names_add(&x->user_names, "b", 1);
	ncf_names_add(&x->user_names, "07", 2);
}
static void ids_not_idx(struct ncf_cache *x) { x->user_ids[1] = 9; }
static void ml_format(struct ncf_cache *x) { x->format = NCF_FORMAT_ML20M; }

static void t_bad_given(void)
{
	tap_ok(refused_g(neg_first, "section 'negoffs': the first offset is not 0"), "negoffs[0] 1");
	tap_ok(refused_g(neg_down, "section 'negoffs': offsets decrease at user 1"), "decreasing");
	tap_ok(refused_g(neg_end, "the offsets end at 3, not at train_negatives 4"), "short end");
	tap_ok(refused_g(neg_item, "section 'negitems': item 6 at 3 is not below items 6"),
	       "an explicit negative out of range");
	tap_ok(refused_g(not_given, "train_negatives is 4 in a cache whose split was not given"),
	       "explicit negatives without a given split");
	tap_ok(refused_g(twice, "section 'itemnams': name 'B0001' appears twice"), "a name twice");
	tap_ok(refused_g(tab, "section 'itemnams': name 1 ('B"), "a tab in a name: named");
	tap_ok(refused_g(tab, "holds a control character"), "a tab in a name: why");
	tap_ok(refused_g(padded, "an integer not in canonical form"), "'07' as a name");
	tap_ok(refused_g(ids_not_idx, "the numbered ids are not the indices (id 9 at 1)"),
	       "numbered ids of a named column that are not its indices");
	tap_ok(refused_g(ml_format, "source_format is 1 (ml-20m) with split_given 1"),
	       "a given split from a MovieLens file");
}

static void t_missing_and_dir(void)
{
	struct ncf_cache r;
	char path[400];
	path_in(path, sizeof path, "missing.ncfc");
	helper_capture_begin();
	int r1 = ncf_cache_read(path, &r);
	int r2 = ncf_cache_read(dir, &r);
	char *msg = helper_capture_end();
	tap_ok(r1 == -1 && r2 == -1 && strstr(msg, "is a directory"),
	       "both -1, the directory said to be one");
	free(msg);
}

static void round_trips(void)
{
	TEST(t_round_trip_a(), "round trip: every field and array, a user with no training positives");
	TEST(t_round_trip_b(), "round trip: no training positives at all (P = 0), NaN oracle");
	TEST(t_round_trip_c(), "round trip: 300 users, 5000 items, %lld positives",
	     (long long)cc.train_positives);
	TEST(t_round_trip_g(), "round trip: a given split, names, explicit negatives (version 2)");
	TEST(t_ids_of_g(), "ids of either kind: compared, printed, looked up");
	TEST(t_no_temporaries(), "no temporary files left after writes");
	TEST(t_reproducible(), "the same cache gives the same bytes (file, file again, stream)");
	TEST(t_read_stdin(), "read from stdin (\"-\")");
	TEST(t_layout(), "layout: magic, version 1, header CRC, meta section of 256 bytes, zstd frame");
	TEST(t_fingerprint(), "fingerprint follows the id maps; train users counts non-empty rows");
	TEST(t_info_a(), "--info lines of cache a");
	TEST(t_info_b(), "--info of cache b: no synthetic or oracle line");
	TEST(t_write_missing_dir(), "write into a missing directory: -1");
}

static void corruptions(void)
{
	TEST(t_sections(), "cache a has 8 sections ending at the end of the file");
	TEST(t_empty(), "empty file refused");
	TEST(t_five_bytes(), "5-byte file refused");
	TEST(t_cut_file_header(), "truncated inside the file header (byte 20)");
	TEST(t_cut_section_header(), "truncated inside the header of section %s", sec[2].tag);
	TEST(t_cut_payload(), "truncated inside the payload of section %s", sec[4].tag);
	TEST(t_cut_end(), "truncated before the end section");
	TEST(t_every_truncation(), "every truncation refused");
	TEST(t_file_header_bits(), "each bit of the file header flipped: refused");
	TEST(t_section_header_bits(), "each bit of each section header flipped: a checksum mismatch");
	TEST(t_payload_bits(), "bit flips in the middle and the checksum of every payload refused");
	TEST(t_every_bit(), "a single-bit flip anywhere is refused or harmless");
	TEST(t_version(3), "version 3 (header CRC fixed) refused");
	TEST(t_v2_empty(), "version 2 that holds nothing of version 2 refused");
	TEST(t_bad_names(), "names read back are checked: distinct, over ids that are their indices");
	TEST(t_version(0), "version 0 (header CRC fixed) refused");
	TEST(t_magic("NCFCACHF", "magic.ncfc", NULL), "wrong magic NCFCACHF refused");
	TEST(t_magic("NCFMODEL", "model.ncfm", "NCFMODEL"),
	     "a checkpoint's magic NCFMODEL refused as another kind of file");
	TEST(t_ratings_csv(), "a ratings CSV refused (bad magic)");
}

static void forgeries(void)
{
	TEST(t_forged_size(6, 8, (uint64_t)1 << 60, "raw.ncfc", "section 'evalneg'"),
	     "section raw size 2^60 (CRC fixed) refused before allocating");
	TEST(t_forged_size(6, 16, (uint64_t)1 << 62, "comp.ncfc", NULL),
	     "section compressed size 2^62 (CRC fixed) refused");
	TEST(t_forged_size(6, 16, sec[6].comp - 1, "comp1.ncfc", NULL),
	     "section compressed size one short (CRC fixed) refused");
	TEST(t_section_misplaced(), "a section in the wrong place (CRC fixed) refused");
	TEST(t_unknown_filter(), "an unknown filter bit (CRC fixed) refused");
	TEST(t_forged_meta(0xFFFFFFFFu, 7, 0, 1, 1, "more than the rest of the file can hold"),
	     "meta claims 2^32-1 users: refused before any section, no huge allocation");
	TEST(t_forged_meta(4, 7, (uint64_t)1 << 41, 3, 1, "impossible sizes"),
	     "meta claims 2^41 positives: refused");
	TEST(t_forged_meta(4, 7, 6, 100001, 1, "impossible sizes"),
	     "meta claims 100001 negatives per user: refused");
	TEST(t_forged_meta(4, 7, 6, 3, 0, "expected section 'userids'"),
	     "a cache with only meta and end: refused");
	TEST(t_bad_offsets(), "bad row offsets refused (first, decreasing, last)");
	TEST(t_bad_train_items(), "training item out of range, and a repeated one, refused");
	TEST(t_bad_test_item(), "test item out of range refused");
	TEST(t_bad_eval_neg(), "evaluation negative out of range refused");
	TEST(t_zero_users(), "zero users refused");
	TEST(t_zero_items(), "zero items refused");
	TEST(t_missing_and_dir(), "a missing file and a directory: -1");
	TEST(t_bad_given(), "a given split's sections and names, broken: refused naming them");
}

int main(void)
{
	ncf_set_progname("test_cache");
	helper_make_tmpdir(dir, sizeof dir, "ncf-test-cache");
	make_a(&ca);
	make_b(&cb);
	make_c(&cc);
	make_g(&cg);
	path_in(pa, sizeof pa, "a.ncfc");
	path_in(pb, sizeof pb, "b.ncfc");
	path_in(pc, sizeof pc, "c.ncfc");
	round_trips();

	orig = helper_read_file(pa, &len);
	if (!orig) {
		printf("Bail out! cannot read %s\n", pa);
		return 1;
	}
	buf = malloc(len);
	nsec = walk(orig, len, sec, 16);
	corruptions();
	forgeries();

	free(orig);
	free(buf);
	if (scratch_fd >= 0) {
		close(scratch_fd);
		unlink(scratch);
	}
	ncf_cache_free(&ca);
	ncf_cache_free(&cb);
	ncf_cache_free(&cc);
	ncf_cache_free(&cg);
	unlink(pa);
	unlink(pb);
	unlink(pc);
	rmdir(dir);
	return tap_done();
}
