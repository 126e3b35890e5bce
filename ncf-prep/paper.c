/*
 * paper.c - the NCF paper's files (He et al., WWW 2017; ml-1m and
 * pinterest-20 as its authors published them, and the many papers since
 * that evaluate on them): a split made elsewhere, given.h's first kind.
 *
 *   NAME.train.rating    user<TAB>item<TAB>rating<TAB>timestamp, the
 *                        training positives (rating and time read, then
 *                        dropped: every row is a positive)
 *   NAME.test.rating     the same, one row per user: its test positive
 *   NAME.test.negative   (user,item)<TAB>neg<TAB>neg..., one line per
 *                        user: its test pair and its negative candidates
 *                        (99 in the paper's files)
 *
 * Ids are integers 0..4294967295 (the paper's count from 0); users and
 * items keep them as original ids, numbered in order of first appearance
 * over the three files as ncf-prep numbers any file's.  The pair of a
 * .test.negative line must be the user's row of .test.rating; every user
 * of the training rows has one of each; every line has as many negatives
 * (given.c says the rules all given splits share).  Lines follow lines.h
 * (line ends, NUL, bare CR, 1 MiB), blank lines are skipped, and the last
 * line may lack its line end (a truncated line lacks fields, which is an
 * error).
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "given.h"
#include "lines.h"
#include "names.h"
#include "paper.h"

#define BUF_SIZE (1u << 20)

const char *const prep_paper_suffix[3] = {".train.rating", ".test.rating", ".test.negative"};

char *prep_paper_path(const char *name, int k)
{
	size_t n = strlen(name) + strlen(prep_paper_suffix[k]) + 1;
	char *path = ncf_xmalloc(n);
	snprintf(path, n, "%s%s", name, prep_paper_suffix[k]);
	return path;
}

/* One file being read: its lines, and the fields of the current one. */
struct file {
	struct ncf_lines l;
	const char *display;
	char *field[4];
	size_t len[4];
};

/* The bytes of one file: the given's count and CRC go on over it. */
static void file_open(struct file *f, FILE *fp, const char *display, struct prep_given *g)
{
	memset(f, 0, sizeof *f);
	f->display = display;
	ncf_lines_init_stream(&f->l, fp, display, NCF_LINES_MAX, BUF_SIZE);
	f->l.crc_on = 1;
	f->l.crc = g->crc;
}

static void file_close(struct file *f, struct prep_given *g)
{
	g->crc = f->l.crc;
	g->bytes += f->l.bytes;
	ncf_lines_free(&f->l);
}

/* The next line that is not blank into *s, *len.  1, 0 at the end, -1
 * (reported). */
static int next_line(struct file *f, char **s, size_t *len)
{
	int got;
	while ((got = ncf_lines_next(&f->l, s, len)) > 0)
		if (!ncf_lines_blank(*s, *len))
			return 1;
	return got;
}

/* An id of field k (1-based) of the current line.  0, or -1 (reported). */
static int id_field(const struct file *f, const char *s, size_t len, int k, const char *what,
		    uint32_t *v)
{
	if (ncf_text_is_u32(s, len, v))
		return 0;
	ncf_error("%s:%llu: field %d: '%s' is not %s (expected an integer from 0 to %u)",
		  f->display, (unsigned long long)f->l.line, k, ncf_escape(s, len, 40), what,
		  UINT32_MAX);
	return -1;
}

/* A .rating line (s, len bytes): user, item, rating, timestamp.  The ids
 * into u, i.  0, or -1 (reported). */
static int rating_line(struct file *f, char *s, size_t len, uint32_t *u, uint32_t *i,
		       int64_t *ts)
{
	int n = 0;
	size_t start = 0;
	for (size_t k = 0; k <= len; k++)
		if (k == len || s[k] == '\t') {
			if (n < 4) {
				f->field[n] = s + start;
				f->len[n] = k - start;
			}
			n++;
			start = k + 1;
		}
	if (n != 4) {
		ncf_error("%s:%llu: %d field%s, expected 4 (user, item, rating, timestamp, "
			  "separated by tabs)",
			  f->display, (unsigned long long)f->l.line, n, n == 1 ? "" : "s");
		return -1;
	}
	NCF_TRY(id_field(f, f->field[0], f->len[0], 1, "a user id", u));
	NCF_TRY(id_field(f, f->field[1], f->len[1], 2, "an item id", i));
	uint32_t t;
	/* the rating is dropped; the timestamp orders a user's repeats */
	*ts = ncf_text_is_u32(f->field[3], f->len[3], &t) ? t : 0;
	return 0;
}

/* NAME.train.rating into g.  0, or -1 (reported). */
static int read_train(struct file *f, struct prep_given *g)
{
	char *s;
	size_t len;
	int got;
	while ((got = next_line(f, &s, &len)) > 0) {
		uint32_t u, i;
		int64_t ts;
		NCF_TRY(rating_line(f, s, len, &u, &i, &ts));
		NCF_TRY(prep_given_train(g, u, i, 1, ts, f->display, f->l.line));
	}
	return got < 0 ? -1 : prep_given_end_train(g, f->display);
}

/* The test positives of NAME.test.rating: test[u] and its line (dense
 * users of g, UINT32_MAX: none).  0, or -1 (reported). */
static int read_test(struct file *f, struct prep_given *g, uint32_t *test, uint64_t *line)
{
	char *s;
	size_t len;
	int got;
	while ((got = next_line(f, &s, &len)) > 0) {
		uint32_t u, i;
		int64_t ts;
		NCF_TRY(rating_line(f, s, len, &u, &i, &ts));
		uint32_t x;
		NCF_TRY(prep_given_test_user(g, u, f->display, f->l.line, &x));
		if (test[x] != UINT32_MAX) {
			ncf_error("%s:%llu: a second test rating of user %u (the first is at line "
				  "%llu)",
				  f->display, (unsigned long long)f->l.line, u,
				  (unsigned long long)line[x]);
			return -1;
		}
		test[x] = i;
		line[x] = f->l.line;
	}
	return got < 0 ? -1 : 0;
}

/* The pair "(user,item)" at s (len bytes).  0, or -1 (reported). */
static int pair(const struct file *f, const char *s, size_t len, uint32_t *u, uint32_t *i)
{
	const char *comma = len > 2 ? memchr(s, ',', len) : NULL;
	if (!comma || s[0] != '(' || s[len - 1] != ')' ||
	    !ncf_text_is_u32(s + 1, (size_t)(comma - s - 1), u) ||
	    !ncf_text_is_u32(comma + 1, (size_t)(s + len - 1 - comma - 1), i)) {
		ncf_error("%s:%llu: field 1: '%s' is not a (user,item) pair", f->display,
			  (unsigned long long)f->l.line, ncf_escape(s, len, 40));
		return -1;
	}
	return 0;
}

/* NAME.test.negative into g's series, each pair checked against the test
 * positives of NAME.test.rating (tf names it).  0, or -1 (reported). */
static int read_negatives(struct file *f, struct prep_given *g, const uint32_t *test,
			  const uint64_t *line, const char *tf)
{
	size_t cap = 128;
	uint32_t *neg = ncf_xmalloc(cap * sizeof *neg);
	char *s;
	size_t len;
	int got, rc = 0;
	while (rc == 0 && (got = next_line(f, &s, &len)) > 0) {
		size_t end = 0;
		while (end < len && s[end] != '\t')
			end++;
		uint32_t u, i, n = 0;
		rc = pair(f, s, end, &u, &i);
		int64_t x = rc == 0 ? ncf_idmap_find(&g->users, u) : -1;
		if (rc == 0 && (x < 0 || test[x] != i)) {
			if (x < 0 || test[x] == UINT32_MAX)
				ncf_error("%s:%llu: (%u,%u): user %u has no test rating in %s",
					  f->display, (unsigned long long)f->l.line, u, i, u, tf);
			else
				ncf_error("%s:%llu: (%u,%u) is not user %u's test rating (%s:%llu has "
					  "item %u)",
					  f->display, (unsigned long long)f->l.line, u, i, u, tf,
					  (unsigned long long)line[x], test[x]);
			rc = -1;
		}
		for (size_t k = end; rc == 0 && k < len;) {
			size_t b = ++k;
			while (k < len && s[k] != '\t')
				k++;
			if (n == NCF_CACHE_MAX_NEGATIVES + 1)
				break; /* too many: given.c says so */
			if (n == cap) {
				cap *= 2;
				neg = ncf_xrealloc(neg, cap * sizeof *neg);
			}
			rc = id_field(f, s + b, k - b, (int)n + 2, "an item id", &neg[n]);
			n++;
		}
		if (rc == 0)
			rc = prep_given_series(g, u, i, neg, n, f->display, f->l.line);
	}
	free(neg);
	return rc != 0 || got < 0 ? -1 : 0;
}

/* File k of the three, opened by op into *fp and f, its name kept in g.
 * 0, or -1 (reported). */
static int read_file(const struct prep_opener *op, const char *name, int k, struct prep_given *g,
		     struct file *f, FILE **fp)
{
	char *path = prep_paper_path(name, k);
	const char *display;
	*fp = op->open(op->ctx, path, &display);
	if (*fp)
		file_open(f, *fp, prep_given_file(g, display), g);
	free(path);
	return *fp ? 0 : -1;
}

int prep_paper_read(const char *name, const struct prep_opener *op, struct prep_given *g)
{
	struct file f;
	FILE *fp;
	NCF_TRY(read_file(op, name, PREP_PAPER_TRAIN, g, &f, &fp));
	int rc = read_train(&f, g);
	file_close(&f, g);
	op->close(op->ctx, fp);
	if (rc != 0)
		return -1;
	uint32_t *test = ncf_xmalloc((size_t)g->U * sizeof *test);
	uint64_t *line = ncf_xmalloc((size_t)g->U * sizeof *line);
	memset(test, 0xff, (size_t)g->U * sizeof *test);
	rc = read_file(op, name, PREP_PAPER_TEST, g, &f, &fp);
	const char *tf = rc == 0 ? f.display : NULL;
	if (rc == 0) {
		rc = read_test(&f, g, test, line);
		file_close(&f, g);
		op->close(op->ctx, fp);
	}
	if (rc == 0)
		rc = read_file(op, name, PREP_PAPER_NEGATIVE, g, &f, &fp);
	if (rc == 0) {
		rc = read_negatives(&f, g, test, line, tf);
		const char *nf = f.display;
		file_close(&f, g);
		op->close(op->ctx, fp);
		if (rc == 0 && g->series == 0) {
			ncf_error("%s: no test series", nf);
			rc = -1;
		}
		if (rc == 0)
			rc = prep_given_end_test(g, nf);
	}
	free(test);
	free(line);
	return rc;
}

const char *prep_paper_name(const char *path, char *name, size_t cap)
{
	size_t n = strlen(path);
	for (int k = 0; k < 3; k++) {
		size_t m = strlen(prep_paper_suffix[k]);
		if (n > m && !strcmp(path + n - m, prep_paper_suffix[k]) && n - m < cap) {
			memcpy(name, path, n - m);
			name[n - m] = 0;
			return name;
		}
	}
	return NULL;
}
