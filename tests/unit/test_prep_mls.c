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
	int rc = prep_parse(fp, display, NCF_FORMAT_UNKNOWN, &rows, pi, 0);
	fclose(fp);
	if (rc != 0)
		return -1;
	memset(c, 0, sizeof *c);
	c->format = pi->format;
	c->source_bytes = pi->bytes;
	c->source_crc = pi->crc;
	c->ratings_read = rows.n;
	prep_rows_index(&rows);
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

int main(void)
{
	ncf_set_progname("test_prep_mls");
	const char *data = getenv("NCF_DATA");
	char path[4096];
	snprintf(path, sizeof path, "%s/ml-latest-small/ratings.csv", data && *data ? data : "");
	if (!data || !*data || access(path, R_OK) != 0)
		tap_skip_all("no $NCF_DATA/ml-latest-small/ratings.csv");
	tap_plan(17);

	FILE *fp = fopen(path, "rb");
	size_t cap = 1 << 22, len = 0, got;
	char *buf = malloc(cap);
	while ((got = fread(buf + len, 1, cap - len, fp)) > 0)
		if ((len += got) == cap)
			buf = realloc(buf, cap *= 2);
	fclose(fp);
	struct ref ref;
	if (read_ref(path, &ref) != 0) {
		printf("Bail out! cannot read %s\n", path);
		return 1;
	}

	/* 1-2: parsing. */
	struct ncf_cache c;
	struct prep_parse_info pi;
	int rc = prepare(buf, len, path, 0, &c, &pi);
	if (!tap_ok(rc == 0, "parse, index and protocol succeed")) {
		tap_done();
		return 1;
	}
	tap_ok(pi.format == NCF_FORMAT_ML20M && c.ratings_read == ref.n && ref.n == 100836 &&
		       pi.bytes == len && pi.crc == ncf_crc32c(0, buf, len),
	       "ml-20m format, 100836 rows, source bytes and CRC-32C of the whole file");

	/* 3: sizes. */
	if (!tap_ok(c.users == 610 && c.items == 9724 && c.train_positives == 100226 &&
			    c.eval_negatives == 100 && c.duplicates_dropped == 0 &&
			    c.test_only_users == 0 && c.users_dropped == 0,
		    "610 users, 9724 items, 100226 training positives, 100 negatives each"))
		tap_diag("users %u items %u P %lld", c.users, c.items, (long long)c.train_positives);

	/* The reference's indices by first appearance. */
	uint32_t max_u = 0, max_i = 0;
	for (size_t k = 0; k < ref.n; k++) {
		if (ref.user[k] > max_u)
			max_u = ref.user[k];
		if (ref.item[k] > max_i)
			max_i = ref.item[k];
	}
	uint32_t *uidx = malloc(((size_t)max_u + 1) * sizeof *uidx);
	uint32_t *iidx = malloc(((size_t)max_i + 1) * sizeof *iidx);
	memset(uidx, 0xff, ((size_t)max_u + 1) * sizeof *uidx);
	memset(iidx, 0xff, ((size_t)max_i + 1) * sizeof *iidx);
	uint32_t nu = 0, ni = 0;
	uint32_t *ufirst = malloc(ref.n * sizeof *ufirst), *ifirst = malloc(ref.n * sizeof *ifirst);
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
	/* 4 */
	tap_ok(nu == c.users && ni == c.items && !memcmp(ufirst, c.user_ids, 4 * (size_t)nu) &&
		       !memcmp(ifirst, c.item_ids, 4 * (size_t)ni),
	       "users and items are indexed in order of first appearance");

	/* The latest row of each user, ties to the later row, and whether
	 * the latest timestamp is shared. */
	size_t *last = malloc((size_t)nu * sizeof *last);
	uint32_t *at_max = calloc(nu, sizeof *at_max), *count = calloc(nu, sizeof *count);
	for (uint32_t u = 0; u < nu; u++)
		last[u] = SIZE_MAX;
	for (size_t k = 0; k < ref.n; k++) {
		uint32_t u = uidx[ref.user[k]];
		count[u]++;
		if (last[u] == SIZE_MAX || ref.ts[k] >= ref.ts[last[u]])
			last[u] = k;
	}
	uint64_t ties = 0;
	for (size_t k = 0; k < ref.n; k++) {
		uint32_t u = uidx[ref.user[k]];
		at_max[u] += ref.ts[k] == ref.ts[last[u]];
	}
	int bad = 0, tie_decided = 0;
	for (uint32_t u = 0; u < nu; u++) {
		ties += at_max[u] > 1;
		if (c.test_items[u] != iidx[ref.item[last[u]]]) {
			if (bad++ < 3)
				tap_diag("user %u: test item id %u, want %u (row %zu)", c.user_ids[u],
					 c.item_ids[c.test_items[u]], ref.item[last[u]], last[u] + 2);
		}
		tie_decided += at_max[u] > 1;
	}
	/* 5-6 */
	tap_ok(bad == 0, "each user's test item is their latest rating, ties by file order "
			 "(%d users wrong)",
	       bad);
	tap_ok(c.test_ties == ties && ties == 94 && tie_decided > 0,
	       "test_timestamp_ties counts the users whose latest timestamp is shared (%llu)",
	       (unsigned long long)c.test_ties);

	/* 7: the training rows are everything else, sorted. */
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
		int ok = !memcmp(fill, c.offsets, 8 * ((size_t)nu + 1)) &&
			 !memcmp(want, c.train_items, 4 * (size_t)fill[nu]);
		tap_ok(ok, "training rows: every other rating of the user, item indices ascending");
		free(want);
		free(fill);
		free(pos);
	}

	/* 8-9: evaluation negatives. */
	{
		int hits = 0, range = 0, mismatch = 0, is_test = 0;
		for (uint32_t u = 0; u < c.users; u++) {
			const uint32_t *row = c.train_items + c.offsets[u];
			int64_t rl = c.offsets[u + 1] - c.offsets[u];
			for (uint32_t k = 0; k < c.eval_negatives; k++) {
				uint32_t it = c.eval_neg[(size_t)u * c.eval_negatives + k];
				range += it >= c.items;
				hits += ncf_row_has(row, rl, it);
				is_test += it == c.test_items[u];
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
				mismatch += want != it;
			}
		}
		tap_ok(hits == 0 && range == 0,
		       "no evaluation negative is a training positive of its user (%d are, %d out "
		       "of range)",
		       hits, range);
		tap_ok(mismatch == 0, "evaluation negatives are the documented Philox draws (%d differ; "
				      "%d equal the test item, which is allowed)",
		       mismatch, is_test);
	}

	/* 10-11: the same arrays with 1 and 3 threads. */
	{
		struct ncf_cache c1, c3;
		struct prep_parse_info p1, p3;
		int nt = omp_get_max_threads();
		omp_set_num_threads(1);
		int ok1 = prepare(buf, len, path, 0, &c1, &p1) == 0 && same_arrays(&c1, &c);
		omp_set_num_threads(3);
		int ok3 = prepare(buf, len, path, 0, &c3, &p3) == 0 && same_arrays(&c3, &c);
		omp_set_num_threads(nt);
		tap_ok(ok1, "1 thread gives the same arrays");
		tap_ok(ok3, "3 threads give the same arrays");
		ncf_cache_free(&c1);
		ncf_cache_free(&c3);
	}

	/* 12: LF line ends give the same arrays as the file's CRLF. */
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
		struct ncf_cache cl;
		struct prep_parse_info pl;
		int ok = prepare(lf, n, "lf.csv", 0, &cl, &pl) == 0 && same_arrays(&cl, &c) &&
			 pl.bytes == n && crs == ref.n + 1;
		tap_ok(ok, "LF line ends give the same arrays as CRLF (%zu CRs removed)", crs);
		ncf_cache_free(&cl);
		free(lf);
	}

	/* 13-14: --min-ratings 50 drops users, their rows and the items only
	 * they rated; indices are by first appearance among the rows kept. */
	{
		struct ncf_cache cm;
		struct prep_parse_info pm;
		int ok = prepare(buf, len, path, 50, &cm, &pm) == 0;
		uint32_t ku = 0, ki = 0;
		uint64_t rows_dropped = 0;
		uint32_t *kid_u = malloc((size_t)nu * 4), *kid_i = malloc((size_t)ni * 4);
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
		tap_ok(ok && cm.users == ku && cm.items == ki && cm.users_dropped == nu - ku &&
			       cm.items_dropped == ni - ki && cm.ratings_dropped == rows_dropped &&
			       cm.min_ratings == 50 && nu - ku > 100 && ni - ki > 0,
		       "--min-ratings 50: %u users, %u items kept; %u users, %u items, %llu rows "
		       "dropped",
		       ku, ki, nu - ku, ni - ki, (unsigned long long)rows_dropped);
		ok = ok && cm.users == ku && cm.items == ki &&
		     !memcmp(cm.user_ids, kid_u, 4 * (size_t)ku) &&
		     !memcmp(cm.item_ids, kid_i, 4 * (size_t)ki);
		/* Each kept user keeps exactly their rows. */
		for (uint32_t u = 0; ok && u < cm.users; u++)
			ok = cm.offsets[u + 1] - cm.offsets[u] + 1 == count[uidx[cm.user_ids[u]]];
		tap_ok(ok, "--min-ratings 50: dense indices by first appearance among kept rows");
		free(kid_u);
		free(kid_i);
		free(iseen);
		free(useen);
		ncf_cache_free(&cm);
	}

	/* 15-17: the program writes the same cache. */
	{
		const char *bin = getenv("NCF_BIN");
		char prog[4096], out[4096], cmd[16384];
		snprintf(prog, sizeof prog, "%s/ncf-prep", bin ? bin : "");
		if (!bin || access(prog, X_OK) != 0) {
			tap_skip(3, "no $NCF_BIN/ncf-prep");
		} else {
			const char *tmp = getenv("TMPDIR");
			snprintf(out, sizeof out, "%s/ncf-test-mls.XXXXXX", tmp && *tmp ? tmp : "/tmp");
			int fd = mkstemp(out);
			close(fd);
			snprintf(cmd, sizeof cmd, "'%s' -q -o '%s' '%s'", prog, out, path);
			int st = system(cmd);
			struct ncf_cache f;
			int ok = st == 0 && ncf_cache_read(out, &f) == 0;
			tap_ok(ok, "ncf-prep -o writes a cache that reads back");
			tap_ok(ok && same_arrays(&f, &c),
			       "the program's arrays equal the in-process ones checked above");
			tap_ok(ok && f.format == NCF_FORMAT_ML20M && f.source_bytes == len &&
				       f.source_crc == pi.crc && f.seed == 1 && f.ratings_read == ref.n &&
				       f.min_ratings == 0 && f.synthetic[0] == 0,
			       "the program's meta: format, source bytes and CRC, seed, rows");
			if (ok)
				ncf_cache_free(&f);
			unlink(out);
		}
	}

	ncf_cache_free(&c);
	free(buf);
	free(ref.user);
	free(ref.item);
	free(ref.ts);
	free(uidx);
	free(iidx);
	free(ufirst);
	free(ifirst);
	free(last);
	free(at_max);
	free(count);
	return tap_done();
}
