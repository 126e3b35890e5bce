/*
 * test_prep_mls.c - ncf-prep's protocol on the real ml-latest-small ratings
 * ($NCF_DATA/ml-latest-small/ratings.csv; skipped when absent).
 *
 * The file is read a second time by a plain independent reader here, and
 * the split is re-derived from it: users and items indexed by first
 * appearance, each user's test item their latest rating with ties broken
 * by file order (the later row wins), the rest as sorted training rows,
 * evaluation negatives as drawn by Philox and never a training positive of
 * their user, --min-ratings dropping users and their items.  The arrays do
 * not depend on the thread count or on CRLF vs LF line ends, and the cache
 * that the ncf-prep program writes ($NCF_BIN/ncf-prep) is the same as the
 * one built here in-process.
 */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "crc32c.h"
#include "err.h"
#include "helpers.h"
#include "ncf_hd.h"
#include "parse.h"
#include "protocol.h"
#include "rows.h"
#include "tap.h"

/* The file as the independent reader sees it. */
struct ref {
	size_t n;
	uint32_t *user, *item; /* original ids, file order */
	int64_t *ts;
};

static int read_ref(const char *path, struct ref *r)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return -1;
	char line[512];
	size_t cap = 1 << 17;
	r->n = 0;
	r->user = malloc(cap * sizeof *r->user);
	r->item = malloc(cap * sizeof *r->item);
	r->ts = malloc(cap * sizeof *r->ts);
	int first = 1;
	while (fgets(line, sizeof line, fp)) {
		if (first) {
			first = 0;
			continue;
		}
		unsigned u, i;
		long long t;
		if (sscanf(line, "%u,%u,%*[^,],%lld", &u, &i, &t) != 3)
			return -1;
		if (r->n == cap) {
			cap *= 2;
			r->user = realloc(r->user, cap * sizeof *r->user);
			r->item = realloc(r->item, cap * sizeof *r->item);
			r->ts = realloc(r->ts, cap * sizeof *r->ts);
		}
		r->user[r->n] = u;
		r->item[r->n] = i;
		r->ts[r->n] = t;
		r->n++;
	}
	fclose(fp);
	return 0;
}

/* Parse, index and run the protocol on buf (len bytes) as ncf-prep does. */
static int prepare(const char *buf, size_t len, const char *display, uint32_t min_ratings,
		   struct ncf_cache *c, struct prep_parse_info *pi)
{
	FILE *fp = fmemopen((void *)buf, len, "rb");
	struct prep_rows rows = {0};
	struct prep_parse_opts o = {.format = NCF_FORMAT_UNKNOWN};
	int rc = prep_parse(fp, display, &o, &rows, pi);
	fclose(fp);
	if (rc != 0)
		return -1;
	memset(c, 0, sizeof *c);
	c->format = pi->format;
	c->source_bytes = pi->bytes;
	c->source_crc = pi->crc;
	c->ratings_read = rows.n;
	prep_rows_index(&rows);
	prep_parse_ids(pi, &rows);
	struct prep_protocol_opts po = {.min_ratings = min_ratings, .eval_negatives = 100, .seed = 1};
	rc = prep_protocol_run(&rows, &po, c);
	prep_rows_free(&rows);
	return rc;
}

/* Same arrays (and sizes)? */
static int same_arrays(const struct ncf_cache *a, const struct ncf_cache *b)
{
	if (a->users != b->users || a->items != b->items ||
	    a->train_positives != b->train_positives || a->eval_negatives != b->eval_negatives)
		return 0;
	size_t U = a->users;
	return !memcmp(a->user_ids, b->user_ids, 4 * U) &&
	       !memcmp(a->item_ids, b->item_ids, 4 * (size_t)a->items) &&
	       !memcmp(a->offsets, b->offsets, 8 * (U + 1)) &&
	       !memcmp(a->train_items, b->train_items, 4 * (size_t)a->train_positives) &&
	       !memcmp(a->test_items, b->test_items, 4 * U) &&
	       !memcmp(a->eval_neg, b->eval_neg, 4 * U * a->eval_negatives) &&
	       a->test_ties == b->test_ties && a->duplicates_dropped == b->duplicates_dropped &&
	       a->test_only_users == b->test_only_users && a->users_dropped == b->users_dropped &&
	       a->items_dropped == b->items_dropped;
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* ---- the cases ---------------------------------------------------------- */

static char path[4096]; /* the ratings file */
static char *buf;	/* its bytes */
static size_t len;
static struct ref ref;
static struct ncf_cache c; /* prepared in-process from buf */
static struct prep_parse_info pi;

/* The reference's view of the file: dense user and item indices by first
 * appearance (uidx, iidx by original id; ufirst, ifirst the ids in that
 * order), each user's count of rows, latest row (ties to the later row) and
 * how many rows share its latest timestamp. */
static uint32_t *uidx, *iidx, nu, ni, *ufirst, *ifirst;
static size_t *last;
static uint32_t *at_max, *count;

static void index_ref(void)
{
	uint32_t max_u = 0, max_i = 0;
	for (size_t k = 0; k < ref.n; k++) {
		if (ref.user[k] > max_u)
			max_u = ref.user[k];
		if (ref.item[k] > max_i)
			max_i = ref.item[k];
	}
	uidx = malloc(((size_t)max_u + 1) * sizeof *uidx);
	iidx = malloc(((size_t)max_i + 1) * sizeof *iidx);
	memset(uidx, 0xff, ((size_t)max_u + 1) * sizeof *uidx);
	memset(iidx, 0xff, ((size_t)max_i + 1) * sizeof *iidx);
	ufirst = malloc(ref.n * sizeof *ufirst);
	ifirst = malloc(ref.n * sizeof *ifirst);
	for (size_t k = 0; k < ref.n; k++) {
		if (uidx[ref.user[k]] == UINT32_MAX) {
			ufirst[nu] = ref.user[k];
			uidx[ref.user[k]] = nu++;
		}
		if (iidx[ref.item[k]] == UINT32_MAX) {
			ifirst[ni] = ref.item[k];
			iidx[ref.item[k]] = ni++;
		}
	}
}

static void latest_ref(void)
{
	last = malloc((size_t)nu * sizeof *last);
	at_max = calloc(nu, sizeof *at_max);
	count = calloc(nu, sizeof *count);
	for (uint32_t u = 0; u < nu; u++)
		last[u] = SIZE_MAX;
	for (size_t k = 0; k < ref.n; k++) {
		uint32_t u = uidx[ref.user[k]];
		count[u]++;
		if (last[u] == SIZE_MAX || ref.ts[k] >= ref.ts[last[u]])
			last[u] = k;
	}
	for (size_t k = 0; k < ref.n; k++) {
		uint32_t u = uidx[ref.user[k]];
		at_max[u] += ref.ts[k] == ref.ts[last[u]];
	}
}

static void t_prepare(void)
{
	tap_ok(prepare(buf, len, path, 0, &c, &pi) == 0, "prepare returns 0");
}

static void t_source(void)
{
	tap_ok(pi.format == NCF_FORMAT_ML20M, "the ml-20m format");
	tap_ok(c.ratings_read == ref.n && ref.n == 100836, "100836 rows read (%llu)",
	       (unsigned long long)c.ratings_read);
	tap_ok(pi.bytes == len && pi.crc == ncf_crc32c(0, buf, len),
	       "source bytes and CRC-32C of the whole file");
}

static void t_sizes(void)
{
	if (!tap_ok(c.users == 610 && c.items == 9724 && c.train_positives == 100226 &&
			    c.eval_negatives == 100 && c.duplicates_dropped == 0 &&
			    c.test_only_users == 0 && c.users_dropped == 0,
		    "610 users, 9724 items, 100226 training positives, 100 negatives each"))
		tap_diag("users %u items %u P %lld", c.users, c.items, (long long)c.train_positives);
}

static void t_first_appearance(void)
{
	tap_ok(nu == c.users && ni == c.items && !memcmp(ufirst, c.user_ids, 4 * (size_t)nu) &&
		       !memcmp(ifirst, c.item_ids, 4 * (size_t)ni),
	       "the id maps are the ids in order of first appearance");
}

static void t_test_items(void)
{
	int bad = 0;
	for (uint32_t u = 0; u < nu; u++)
		if (c.test_items[u] != iidx[ref.item[last[u]]] && bad++ < 3)
			tap_diag("user %u: test item id %u, want %u (row %zu)", c.user_ids[u],
				 c.item_ids[c.test_items[u]], ref.item[last[u]], last[u] + 2);
	tap_ok(bad == 0, "%d users with another test item", bad);
}

static void t_ties(void)
{
	uint64_t ties = 0;
	for (uint32_t u = 0; u < nu; u++)
		ties += at_max[u] > 1;
	tap_ok(c.test_ties == ties && ties == 94,
	       "test_timestamp_ties %llu, 94 users whose latest timestamp is shared",
	       (unsigned long long)c.test_ties);
}

/* The training rows are everything else, sorted. */
static void t_train_rows(void)
{
	uint32_t *want = malloc(ref.n * sizeof *want);
	int64_t *fill = malloc(((size_t)nu + 1) * sizeof *fill);
	fill[0] = 0;
	for (uint32_t u = 0; u < nu; u++)
		fill[u + 1] = fill[u] + count[u] - 1;
	int64_t *pos = malloc((size_t)nu * sizeof *pos);
	memcpy(pos, fill, (size_t)nu * sizeof *pos);
	for (size_t k = 0; k < ref.n; k++) {
		uint32_t u = uidx[ref.user[k]];
		if (k != last[u])
			want[pos[u]++] = iidx[ref.item[k]];
	}
	for (uint32_t u = 0; u < nu; u++)
		qsort(want + fill[u], (size_t)(fill[u + 1] - fill[u]), 4, cmp_u32);
	tap_ok(!memcmp(fill, c.offsets, 8 * ((size_t)nu + 1)), "the row offsets");
	tap_ok(!memcmp(want, c.train_items, 4 * (size_t)fill[nu]), "the rows' items");
	free(want);
	free(fill);
	free(pos);
}

/* The evaluation negatives against the rows and the documented draw. */
struct neg_counts {
	int hits, range, mismatch, is_test;
};

static struct neg_counts count_negatives(void)
{
	struct neg_counts n = {0};
	for (uint32_t u = 0; u < c.users; u++) {
		const uint32_t *row = c.train_items + c.offsets[u];
		int64_t rl = c.offsets[u + 1] - c.offsets[u];
		for (uint32_t k = 0; k < c.eval_negatives; k++) {
			uint32_t it = c.eval_neg[(size_t)u * c.eval_negatives + k];
			n.range += it >= c.items;
			n.hits += ncf_row_has(row, rl, it);
			n.is_test += it == c.test_items[u];
			/* The documented draw: (seed, EVAL_NEG, attempt,
			 * u * N + k), the first one off the user's row. */
			uint32_t want = 0;
			for (uint32_t a = 0; a < 1000; a++) {
				ncf_u32x4 x = ncf_rng(1, NCF_RNG_EVAL_NEG, a,
						      (uint64_t)u * c.eval_negatives + k, 0);
				want = ncf_uniform_below(x.v[0], c.items);
				if (!ncf_row_has(row, rl, want))
					break;
			}
			n.mismatch += want != it;
		}
	}
	return n;
}

static void t_negatives_off_rows(void)
{
	struct neg_counts n = count_negatives();
	tap_ok(n.hits == 0 && n.range == 0, "%d are training positives, %d out of range", n.hits,
	       n.range);
}

static void t_negatives_drawn(void)
{
	struct neg_counts n = count_negatives();
	tap_ok(n.mismatch == 0, "%d differ (%d equal the test item, which is allowed)", n.mismatch,
	       n.is_test);
}

static void t_threads(int threads)
{
	struct ncf_cache ct = {0};
	struct prep_parse_info pt;
	int nt = omp_get_max_threads();
	omp_set_num_threads(threads);
	int rc = prepare(buf, len, path, 0, &ct, &pt);
	omp_set_num_threads(nt);
	tap_ok(rc == 0 && same_arrays(&ct, &c), "the arrays with %d threads", threads);
	ncf_cache_free(&ct);
}

/* LF line ends give the same arrays as the file's CRLF. */
static void t_lf(void)
{
	char *lf = malloc(len);
	size_t n = 0, crs = 0;
	for (size_t k = 0; k < len; k++) {
		if (buf[k] == '\r' && k + 1 < len && buf[k + 1] == '\n') {
			crs++;
			continue;
		}
		lf[n++] = buf[k];
	}
	struct ncf_cache cl = {0};
	struct prep_parse_info pl;
	int ok = prepare(lf, n, "lf.csv", 0, &cl, &pl) == 0 && same_arrays(&cl, &c) &&
		 pl.bytes == n && crs == ref.n + 1;
	tap_ok(ok, "the same arrays after %zu CRs removed", crs);
	ncf_cache_free(&cl);
	free(lf);
}

/* --min-ratings 50: cm from the protocol; the users and items kept by the
 * reference (ids by first appearance among the rows kept). */
static struct ncf_cache cm;
static int cm_rc;
static uint32_t ku, ki, *kid_u, *kid_i;
static uint64_t rows_dropped;

static void min_ratings_50(void)
{
	struct prep_parse_info pm;
	cm_rc = prepare(buf, len, path, 50, &cm, &pm);
	kid_u = malloc((size_t)nu * 4);
	kid_i = malloc((size_t)ni * 4);
	unsigned char *iseen = calloc(ni, 1), *useen = calloc(nu, 1);
	for (size_t k = 0; k < ref.n; k++) {
		uint32_t u = uidx[ref.user[k]], i = iidx[ref.item[k]];
		if (count[u] < 50) {
			rows_dropped++;
			continue;
		}
		if (!useen[u]) {
			useen[u] = 1;
			kid_u[ku++] = ref.user[k];
		}
		if (!iseen[i]) {
			iseen[i] = 1;
			kid_i[ki++] = ref.item[k];
		}
	}
	free(iseen);
	free(useen);
}

static void t_min_ratings_counts(void)
{
	tap_ok(cm_rc == 0 && cm.users == ku && cm.items == ki && cm.users_dropped == nu - ku &&
		       cm.items_dropped == ni - ki && cm.ratings_dropped == rows_dropped &&
		       cm.min_ratings == 50 && nu - ku > 100 && ni - ki > 0,
	       "%u users, %u items kept; %u users, %u items, %llu rows dropped", ku, ki, nu - ku,
	       ni - ki, (unsigned long long)rows_dropped);
}

static void t_min_ratings_ids(void)
{
	int ok = cm_rc == 0 && cm.users == ku && cm.items == ki &&
		 !memcmp(cm.user_ids, kid_u, 4 * (size_t)ku) &&
		 !memcmp(cm.item_ids, kid_i, 4 * (size_t)ki);
	/* Each kept user keeps exactly their rows. */
	for (uint32_t u = 0; ok && u < cm.users; u++)
		ok = cm.offsets[u + 1] - cm.offsets[u] + 1 == count[uidx[cm.user_ids[u]]];
	tap_ok(ok, "the kept ids by first appearance, each kept user with all their rows");
}

/* The cache that the program ncf-prep writes: prog_rc -1 when it is not
 * there, else whether it ran and the cache read back (0). */
static struct ncf_cache prog;
static int prog_rc = -1, prog_ok;

static void run_program(void)
{
	const char *bin = getenv("NCF_BIN");
	char exe[4096], out[4096], cmd[16384];
	snprintf(exe, sizeof exe, "%s/ncf-prep", bin ? bin : "");
	if (!bin || access(exe, X_OK) != 0)
		return;
	const char *tmp = getenv("TMPDIR");
	snprintf(out, sizeof out, "%s/ncf-test-mls.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(out);
	close(fd);
	snprintf(cmd, sizeof cmd, "'%s' -q -o '%s' '%s'", exe, out, path);
	prog_rc = 0;
	prog_ok = system(cmd) == 0 && ncf_cache_read(out, &prog) == 0;
	unlink(out);
}

static void t_program_reads_back(void)
{
	if (prog_rc < 0)
		tap_skip_case("no $NCF_BIN/ncf-prep");
	else
		tap_ok(prog_ok, "ncf-prep ran and its cache reads back");
}

static void t_program_arrays(void)
{
	if (prog_rc < 0)
		tap_skip_case("no $NCF_BIN/ncf-prep");
	else
		tap_ok(prog_ok && same_arrays(&prog, &c), "the same arrays");
}

static void t_program_meta(void)
{
	if (prog_rc < 0)
		tap_skip_case("no $NCF_BIN/ncf-prep");
	else
		tap_ok(prog_ok && prog.format == NCF_FORMAT_ML20M && prog.source_bytes == len &&
			       prog.source_crc == pi.crc && prog.seed == 1 &&
			       prog.ratings_read == ref.n && prog.min_ratings == 0 &&
			       prog.synthetic[0] == 0,
		       "format, source bytes and CRC, seed, rows");
}

static void protocol_cases(void)
{
	TEST(t_first_appearance(), "users and items are indexed in order of first appearance");
	TEST(t_test_items(), "each user's test item is their latest rating, ties by file order");
	TEST(t_ties(), "test_timestamp_ties counts the users whose latest timestamp is shared");
	TEST(t_train_rows(), "training rows: every other rating of the user, item indices ascending");
	TEST(t_negatives_off_rows(), "no evaluation negative is a training positive of its user");
	TEST(t_negatives_drawn(), "evaluation negatives are the documented Philox draws");
	TEST(t_threads(1), "1 thread gives the same arrays");
	TEST(t_threads(3), "3 threads give the same arrays");
	TEST(t_lf(), "LF line ends give the same arrays as CRLF");
	min_ratings_50();
	TEST(t_min_ratings_counts(), "--min-ratings 50: the users, items and rows dropped");
	TEST(t_min_ratings_ids(), "--min-ratings 50: dense indices by first appearance among kept rows");
	run_program();
	TEST(t_program_reads_back(), "ncf-prep -o writes a cache that reads back");
	TEST(t_program_arrays(), "the program's arrays equal the in-process ones checked above");
	TEST(t_program_meta(), "the program's meta: format, source bytes and CRC, seed, rows");
}

static void free_all(void)
{
	if (prog_ok)
		ncf_cache_free(&prog);
	ncf_cache_free(&cm);
	ncf_cache_free(&c);
	void *p[] = {buf, ref.user, ref.item, ref.ts, uidx, iidx, ufirst, ifirst, last,
		     at_max, count, kid_u, kid_i};
	for (size_t k = 0; k < sizeof p / sizeof *p; k++)
		free(p[k]);
}

int main(void)
{
	ncf_set_progname("test_prep_mls");
	const char *data = getenv("NCF_DATA");
	snprintf(path, sizeof path, "%s/ml-latest-small/ratings.csv", data && *data ? data : "");
	if (!data || !*data || access(path, R_OK) != 0)
		tap_skip_all("no $NCF_DATA/ml-latest-small/ratings.csv");
	buf = (char *)helper_read_file(path, &len);
	if (!buf || read_ref(path, &ref) != 0) {
		printf("Bail out! cannot read %s\n", path);
		return 1;
	}
	if (!TEST(t_prepare(), "parse, index and protocol succeed")) {
		tap_done();
		return 1;
	}
	TEST(t_source(), "ml-20m format, 100836 rows, source bytes and CRC-32C of the whole file");
	TEST(t_sizes(), "610 users, 9724 items, 100226 training positives, 100 negatives each");
	index_ref();
	latest_ref();
	protocol_cases();
	free_all();
	return tap_done();
}
