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
#include "io.h"
#include "ncf_hd.h"
#include "tap.h"

static char dir[256];	    /* the temporary directory of this test */
static int saved_stderr = -1;

static void path_in(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

/* ---- files ---------------------------------------------------------- */

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	size_t cap = 4096, n = 0;
	unsigned char *b = malloc(cap);
	size_t got;
	while ((got = fread(b + n, 1, cap - n, fp)) > 0) {
		n += got;
		if (n == cap)
			b = realloc(b, cap *= 2);
	}
	fclose(fp);
	*len = n;
	return b;
}

static void spill(const char *path, const void *buf, size_t len)
{
	FILE *fp = fopen(path, "wb");
	if (!fp || (len && fwrite(buf, 1, len, fp) != len) || fclose(fp) != 0) {
		printf("Bail out! cannot write %s\n", path);
		exit(1);
	}
}

/* ---- stderr capture (through a pipe: messages are one short line) ---- */

static int capture_pipe[2] = {-1, -1};

static void capture_begin(void)
{
	fflush(stderr);
	saved_stderr = dup(2);
	if (pipe(capture_pipe) != 0) {
		printf("Bail out! pipe failed\n");
		exit(1);
	}
	fcntl(capture_pipe[1], F_SETFL, O_NONBLOCK); /* never block on a full pipe */
	dup2(capture_pipe[1], 2);
	close(capture_pipe[1]);
}

/* The captured text (malloc'd, NUL-terminated). */
static char *capture_end(void)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	ssize_t got;
	while ((got = read(capture_pipe[0], b + n, cap - 1 - n)) > 0) {
		n += (size_t)got;
		if (n == cap - 1)
			b = realloc(b, cap *= 2);
	}
	close(capture_pipe[0]);
	b[n] = 0;
	return b;
}

/*
 * Read path expecting a refusal: -1, the cache left empty, and exactly one
 * line on stderr that names the file and hints at re-running ncf-prep (and
 * contains want, when given).  quiet: no diagnostics (for sweeps).
 */
static int refused(const char *path, const char *want, int quiet)
{
	struct ncf_cache c;
	capture_begin();
	int rc = ncf_cache_read(path, &c);
	char *msg = capture_end();
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

/* Free a hand-built cache (entry_user is never set on these). */
static void free_built(struct ncf_cache *c)
{
	ncf_cache_free(c);
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
	spill(path, b, len);
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

int main(void)
{
	ncf_set_progname("test_cache");
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/ncf-test-cache.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		printf("Bail out! mkdtemp %s failed\n", dir);
		return 1;
	}
	tap_plan(44);

	struct ncf_cache a, b, cc;
	make_a(&a);
	make_b(&b);
	make_c(&cc);
	char pa[400], pb[400], pc[400], names[4096];
	path_in(pa, sizeof pa, "a.ncfc");
	path_in(pb, sizeof pb, "b.ncfc");
	path_in(pc, sizeof pc, "c.ncfc");

	/* 1-3: round trips. */
	tap_ok(round_trip(&a, "a.ncfc"),
	       "round trip: every field and array, a user with no training positives");
	tap_ok(round_trip(&b, "b.ncfc"), "round trip: no training positives at all (P = 0), NaN oracle");
	tap_ok(round_trip(&cc, "c.ncfc"), "round trip: 300 users, 5000 items, %lld positives",
	       (long long)cc.train_positives);

	/* 4: atomic write leaves only the final names. */
	list_dir(names, sizeof names);
	if (!tap_ok(!strcmp(names, "a.ncfc b.ncfc c.ncfc"), "no temporary files left after writes"))
		tap_diag("directory holds: %s", names);

	/* 5: files are reproducible byte for byte, and write_fp writes the
	 * same bytes as write. */
	{
		size_t n1, n2;
		unsigned char *f1 = slurp(pa, &n1);
		char *mem = NULL;
		size_t mlen = 0;
		FILE *ms = open_memstream(&mem, &mlen);
		int rc = ncf_cache_write_fp(&a, ms, "<memory>");
		fclose(ms);
		char p2[400];
		path_in(p2, sizeof p2, "a2.ncfc");
		ncf_cache_write(&a, p2);
		unsigned char *f2 = slurp(p2, &n2);
		tap_ok(rc == 0 && f1 && f2 && n1 == n2 && n1 == mlen && !memcmp(f1, f2, n1) &&
			       !memcmp(f1, mem, n1),
		       "the same cache gives the same bytes (file, file again, stream)");
		unlink(p2);
		free(f1);
		free(f2);
		free(mem);
	}

	/* 6: reading from stdin ("-"). */
	{
		struct ncf_cache r;
		int ok = freopen(pa, "rb", stdin) != NULL && ncf_cache_read("-", &r) == 0;
		if (ok) {
			ok = same_cache(&r, &a);
			ncf_cache_free(&r);
		}
		tap_ok(ok, "read from stdin (\"-\")");
		if (!freopen("/dev/null", "rb", stdin))
			tap_diag("cannot reopen stdin");
	}

	/* 7: the header starts as documented at the top of cache.c. */
	{
		size_t n;
		unsigned char *f = slurp(pa, &n);
		int ok = f && n > 68 && !memcmp(f, "NCFCACHE\1\0\0\0", 12) &&
			 ncf_get_u32(f + 28) == ncf_crc32c(0, f, 28) && !memcmp(f + 32, "meta\0\0\0\0", 8) &&
			 ncf_get_u64(f + 40) == 256 && !memcmp(f + 64, "\x28\xb5\x2f\xfd", 4);
		tap_ok(ok, "layout: magic, version 1, header CRC, meta section of 256 bytes, zstd frame");
		free(f);
	}

	/* 8: fingerprint, train users and --info text. */
	{
		uint32_t f0 = ncf_cache_fingerprint(&a);
		a.item_ids[3]++;
		uint32_t f1 = ncf_cache_fingerprint(&a);
		a.item_ids[3]--;
		tap_ok(f0 != f1 && f0 == ncf_cache_fingerprint(&a) && ncf_cache_train_users(&a) == 3 &&
			       ncf_cache_train_users(&b) == 0,
		       "fingerprint follows the id maps; train users counts non-empty rows");
	}
	/* 9-10 */
	{
		char *txt = NULL;
		size_t tlen = 0;
		FILE *ms = open_memstream(&txt, &tlen);
		ncf_cache_print_info(&a, ms);
		fclose(ms);
		tap_ok(strstr(txt, "format\tsynthetic\n") && strstr(txt, "synthetic\tml-latest-smallx1000\n") &&
			       strstr(txt, "users\t4\n") && strstr(txt, "items\t7\n") &&
			       strstr(txt, "train_positives\t6\n") && strstr(txt, "test_positives\t4\n") &&
			       strstr(txt, "eval_negatives_per_user\t3\n") &&
			       strstr(txt, "seed\t18369614218089748088\n") &&
			       strstr(txt, "source_crc32c\tdeadbeef\n") &&
			       strstr(txt, "oracle_hr@10\t0.250000\n"),
		       "--info lines of cache a");
		free(txt);
		txt = NULL;
		ms = open_memstream(&txt, &tlen);
		ncf_cache_print_info(&b, ms);
		fclose(ms);
		tap_ok(strstr(txt, "format\tml-1m\n") && !strstr(txt, "synthetic") &&
			       !strstr(txt, "oracle_hr") && strstr(txt, "test_only_users\t3\n"),
		       "--info of cache b: no synthetic or oracle line");
		free(txt);
	}

	/* 11: writing into a missing directory fails and says why. */
	{
		char bad[400];
		path_in(bad, sizeof bad, "no/such/dir.ncfc");
		capture_begin();
		int rc = ncf_cache_write(&a, bad);
		char *msg = capture_end();
		tap_ok(rc == -1 && strstr(msg, "cannot create"), "write into a missing directory: -1");
		free(msg);
	}

	/* The bytes of a, for the corruptions. */
	size_t len;
	unsigned char *orig = slurp(pa, &len);
	unsigned char *buf = malloc(len);
	struct section sec[16];
	int nsec = walk(orig, len, sec, 16);
	if (!tap_ok(nsec == 8 && !strcmp(sec[0].tag, "meta") && !strcmp(sec[7].tag, "end") &&
			    sec[7].hdr + 32 == len,
		    "cache a has 8 sections ending at the end of the file")) /* 12 */
		tap_diag("found %d sections", nsec);

	/* 13-14: an empty file, a file shorter than the magic. */
	tap_ok(refused_copy(orig, 0, "empty.ncfc", "empty file", 0), "empty file refused");
	tap_ok(refused_copy(orig, 5, "five.ncfc", NULL, 0), "5-byte file refused");

	/* 15-17: truncations at named places. */
	tap_ok(refused_copy(orig, 20, "t-hdr.ncfc", "truncated", 0),
	       "truncated inside the file header (byte 20)");
	tap_ok(refused_copy(orig, sec[2].hdr + 13, "t-sec.ncfc", "truncated", 0),
	       "truncated inside the header of section %s", sec[2].tag);
	tap_ok(refused_copy(orig, sec[4].payload + sec[4].comp / 2, "t-pay.ncfc", "truncated", 0),
	       "truncated inside the payload of section %s", sec[4].tag);
	/* 18: without the end section. */
	tap_ok(refused_copy(orig, sec[7].hdr, "t-end.ncfc", "section 'end'", 0),
	       "truncated before the end section");

	/* 19: every truncation. */
	{
		int bad = 0;
		for (size_t cut = 0; cut < len; cut++)
			if (!refused_copy(orig, cut, NULL, NULL, bad > 3))
				bad++;
		tap_ok(bad == 0, "every truncation (0 to %zu bytes) refused (%d were not)", len - 1,
		       bad);
	}

	/* 20-21: bit flips in the file header and in every section header. */
	{
		int bad = 0;
		for (size_t bit = 0; bit < 32 * 8; bit++) {
			memcpy(buf, orig, len);
			buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
			bad += !refused_copy(buf, len, NULL, NULL, bad > 3);
		}
		tap_ok(bad == 0, "each of the 256 bits of the file header flipped: refused (%d not)",
		       bad);
		bad = 0;
		for (int s = 0; s < nsec; s++)
			for (size_t bit = 0; bit < 32 * 8; bit++) {
				memcpy(buf, orig, len);
				buf[sec[s].hdr + bit / 8] ^= (unsigned char)(1u << (bit % 8));
				bad += !refused_copy(buf, len, NULL, "checksum mismatch", bad > 3);
			}
		tap_ok(bad == 0, "each bit of each of the %d section headers flipped: refused as a "
				 "checksum mismatch (%d not)",
		       nsec, bad);
	}

	/* 22: bit flips in the data of each payload: the middle and the last
	 * byte (zstd's content checksum). */
	{
		int bad = 0, tried = 0;
		for (int s = 0; s < nsec; s++) {
			if (!sec[s].comp)
				continue;
			size_t at[2] = {sec[s].payload + sec[s].comp / 2,
					sec[s].payload + sec[s].comp - 1};
			for (int j = 0; j < 2; j++)
				for (int bit = 0; bit < 8; bit++) {
					memcpy(buf, orig, len);
					buf[at[j]] ^= (unsigned char)(1u << bit);
					tried++;
					bad += !refused_copy(buf, len, NULL, NULL, bad > 3);
				}
		}
		tap_ok(bad == 0 && tried > 0,
		       "bit flips in the middle and the checksum of every payload refused (%d of %d "
		       "not)",
		       bad, tried);
	}

	/* 23: every bit of the file: refused, or (a bit zstd ignores) read
	 * back as exactly the original.  Under the sanitizers (slow
	 * allocations), one bit per byte. */
	{
		int bad = 0, harmless = 0;
		const char *san = getenv("NCF_SANITIZER");
		size_t step = san && *san && strcmp(san, "0") ? 8 : 1;
		for (size_t bit = 0; bit < len * 8; bit += step) {
			if (step == 8)
				bit = (bit & ~(size_t)7) | ((bit / 8) % 8);
			memcpy(buf, orig, len);
			buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
			scratch_set(buf, len);
			struct ncf_cache r;
			capture_begin();
			int rc = ncf_cache_read(scratch, &r);
			char *msg = capture_end();
			if (rc == 0) {
				if (same_cache(&r, &a))
					harmless++;
				else {
					if (bad < 4)
						tap_diag("flipping bit %zu of byte %zu gives another cache",
							 bit % 8, bit / 8);
					bad++;
				}
				ncf_cache_free(&r);
			} else if (!strstr(msg, "re-run ncf-prep")) {
				if (bad < 4)
					tap_diag("bit %zu: message without the hint: %s", bit, msg);
				bad++;
			}
			free(msg);
		}
		if (harmless)
			tap_diag("%d bit flips were ignored by zstd and read back the original",
				 harmless);
		tap_ok(bad == 0, "%s single-bit flip of the %zu-byte file is refused or harmless",
		       step == 1 ? "every" : "one", len);
	}

	/* 24-25: version 2 and 0 with a valid header CRC. */
	memcpy(buf, orig, len);
	ncf_put_u32(buf + 8, 2);
	fix_crc(buf);
	tap_ok(refused_copy(buf, len, "v2.ncfc", "format version 2", 0),
	       "version 2 (header CRC fixed) refused");
	ncf_put_u32(buf + 8, 0);
	fix_crc(buf);
	tap_ok(refused_copy(buf, len, "v0.ncfc", "format version 0", 0),
	       "version 0 (header CRC fixed) refused");

	/* 26-28: magics. */
	memcpy(buf, orig, len);
	memcpy(buf, "NCFCACHF", 8);
	fix_crc(buf);
	tap_ok(refused_copy(buf, len, "magic.ncfc", NULL, 0), "wrong magic NCFCACHF refused");
	memcpy(buf, "NCFMODEL", 8);
	fix_crc(buf);
	tap_ok(refused_copy(buf, len, "model.ncfm", "NCFMODEL", 0),
	       "a checkpoint's magic NCFMODEL refused as another kind of file");
	{
		static const char text[] = "userId,movieId,rating,timestamp\n1,1,4.0,964982703\n";
		tap_ok(refused_copy((const unsigned char *)text, sizeof text - 1, "ratings.csv",
				    "bad magic", 0),
		       "a ratings CSV refused (bad magic)");
	}

	/* 29-33: forged section headers with valid CRCs. */
	{
		struct section *en = &sec[6]; /* evalneg */
		memcpy(buf, orig, len);
		ncf_put_u64(buf + en->hdr + 8, (uint64_t)1 << 60);
		fix_crc(buf + en->hdr);
		tap_ok(refused_copy(buf, len, "raw.ncfc", "section 'evalneg'", 0),
		       "section raw size 2^60 (CRC fixed) refused before allocating");
		memcpy(buf, orig, len);
		ncf_put_u64(buf + en->hdr + 16, (uint64_t)1 << 62);
		fix_crc(buf + en->hdr);
		tap_ok(refused_copy(buf, len, "comp.ncfc", NULL, 0),
		       "section compressed size 2^62 (CRC fixed) refused");
		memcpy(buf, orig, len);
		ncf_put_u64(buf + en->hdr + 16, en->comp - 1);
		fix_crc(buf + en->hdr);
		tap_ok(refused_copy(buf, len, "comp1.ncfc", NULL, 0),
		       "section compressed size one short (CRC fixed) refused");
		memcpy(buf, orig, len);
		memcpy(buf + sec[1].hdr, "itemids\0", 8);
		fix_crc(buf + sec[1].hdr);
		tap_ok(refused_copy(buf, len, "tag.ncfc", "expected section 'userids'", 0),
		       "a section in the wrong place (CRC fixed) refused");
		memcpy(buf, orig, len);
		ncf_put_u32(buf + sec[1].hdr + 24, ncf_get_u32(buf + sec[1].hdr + 24) | 4);
		fix_crc(buf + sec[1].hdr);
		tap_ok(refused_copy(buf, len, "filt.ncfc", NULL, 0),
		       "an unknown filter bit (CRC fixed) refused");
	}

	/* 34-37: impossible sizes in meta, missing sections. */
	{
		unsigned char meta[256];
		char path[400];
		path_in(path, sizeof path, "forged.ncfc");
		meta_of(meta, 0xFFFFFFFFu, 7, 0, 1);
		forge(path, meta, &a);
		tap_ok(refused(path, "more than the rest of the file can hold", 0),
		       "meta claims 2^32-1 users: refused before any section, no huge allocation");
		meta_of(meta, 4, 7, (uint64_t)1 << 41, 3);
		forge(path, meta, &a);
		tap_ok(refused(path, "impossible sizes", 0), "meta claims 2^41 positives: refused");
		meta_of(meta, 4, 7, 6, 100001);
		forge(path, meta, &a);
		tap_ok(refused(path, "impossible sizes", 0),
		       "meta claims 100001 negatives per user: refused");
		meta_of(meta, 4, 7, 6, 3);
		forge(path, meta, NULL);
		tap_ok(refused(path, "expected section 'userids'", 0),
		       "a cache with only meta and end: refused");
		unlink(path);
	}

	/* 38-43: well-formed files whose arrays break the cache's invariants. */
	{
		struct ncf_cache x;
		char path[400];
		path_in(path, sizeof path, "bad.ncfc");
		make_a(&x);
		x.offsets[0] = 1;
		ncf_cache_write(&x, path);
		int ok = refused(path, "first row offset", 0);
		x.offsets[0] = 0;
		x.offsets[2] = 2;
		ncf_cache_write(&x, path);
		ok &= refused(path, "row offsets decrease at user 1", 0);
		x.offsets[2] = 3;
		x.offsets[4] = 5;
		ncf_cache_write(&x, path);
		ok &= refused(path, "do not end", 0);
		x.offsets[4] = 6;
		tap_ok(ok, "bad row offsets refused (first, decreasing, last)");

		x.train_items[2] = 7;
		ncf_cache_write(&x, path);
		ok = refused(path, "training items", 0);
		x.train_items[2] = 4; /* equal to its predecessor */
		ncf_cache_write(&x, path);
		ok &= refused(path, "training items", 0);
		x.train_items[2] = 6;
		tap_ok(ok, "training item out of range, and a repeated one, refused");

		x.test_items[3] = 7;
		ncf_cache_write(&x, path);
		tap_ok(refused(path, "test item", 0), "test item out of range refused");
		x.test_items[3] = 0;

		x.eval_neg[11] = 0xFFFFFFFFu;
		ncf_cache_write(&x, path);
		tap_ok(refused(path, "evaluation negative", 0), "evaluation negative out of range refused");
		x.eval_neg[11] = 3;

		x.users = 0;
		ncf_cache_write(&x, path);
		tap_ok(refused(path, "impossible sizes", 0), "zero users refused");
		x.users = 4;
		x.items = 0;
		ncf_cache_write(&x, path);
		tap_ok(refused(path, "impossible sizes", 0), "zero items refused");
		x.items = 7;
		free_built(&x);
		unlink(path);
	}

	/* 44: a missing file and a directory. */
	{
		struct ncf_cache r;
		char path[400];
		path_in(path, sizeof path, "missing.ncfc");
		capture_begin();
		int r1 = ncf_cache_read(path, &r);
		int r2 = ncf_cache_read(dir, &r);
		char *msg = capture_end();
		tap_ok(r1 == -1 && r2 == -1 && strstr(msg, "is a directory"),
		       "a missing file and a directory: -1");
		free(msg);
	}

	free(orig);
	free(buf);
	if (scratch_fd >= 0) {
		close(scratch_fd);
		unlink(scratch);
	}
	free_built(&a);
	free_built(&b);
	free_built(&cc);
	unlink(pa);
	unlink(pb);
	unlink(pc);
	rmdir(dir);
	return tap_done();
}
