/*
 * given.h - a split made elsewhere, as its readers hand it to the
 * protocol's given way in (protocol.h, prep_protocol_run_given): NVIDIA's
 * feature spec (spec.c) and the NCF paper's files (paper.c).
 *
 * The readers give rows in the order of their files, train first: each
 * training row (an original user and item id and its label: 1 a positive,
 * 0 an explicit negative), then each user's test series (its positive and
 * N negative candidates).  Here users and items get dense indices in
 * order of first appearance over all those rows; the rules that are no
 * format's own are said once, with the file and line that breaks them:
 * a test user must have training rows, and only one series; every series
 * has the same N; every user of the training rows has a series; no more
 * ids than an index holds.  Memory grows with the rows given, 8 bytes a
 * row more than the protocol's own.
 */
#ifndef NCF_GIVEN_H
#define NCF_GIVEN_H

#include <stdint.h>
#include <stdio.h>

#include "cache.h"
#include "idmap.h"
#include "rows.h"

struct prep_given {
	struct ncf_idmap users, items; /* original ids -> dense indices */
	struct prep_rows pos;	       /* the training positives (dense), file order */
	uint32_t *neg_user, *neg_item; /* (n_neg) the explicit negatives, file order */
	size_t n_neg, cap_neg;
	uint32_t U;		       /* users of the training rows (prep_given_end_train) */
	uint32_t N;		       /* negatives per series, 0 before the first */
	uint32_t *test;		       /* (U) each user's given positive */
	uint32_t *cand;		       /* (U, N) its negative candidates, in the order given */
	uint64_t *test_line;	       /* (U) the line of its series, 0: none yet */
	const char **test_file;	       /* (U) and its file (one of files) */
	uint64_t *first_line;	       /* (U) the line of its first training row */
	const char **first_file;       /* (U) and its file (one of files) */
	size_t first_cap;	       /* their room */
	char **files;		       /* (n_files) the files read, for messages */
	uint32_t n_files;
	uint64_t bytes;		       /* bytes of every file read */
	uint32_t crc;		       /* their CRC-32C, in the order read */
	uint64_t series;	       /* series given */
};

void prep_given_init(struct prep_given *g);
void prep_given_free(struct prep_given *g);

/* A file rows come from: display copied into g, whose messages may name
 * it after the file is closed; the copy, which the calls below take. */
const char *prep_given_file(struct prep_given *g, const char *display);
/* A training row at file:line: user and item original ids, label 1 (a
 * positive) or 0 (an explicit negative).  Returns 0, or -1 after
 * reporting (too many ids). */
int prep_given_train(struct prep_given *g, uint32_t user, uint32_t item, int label, int64_t ts,
		     const char *file, uint64_t line);
/* The end of the training rows: the users are known.  Returns 0, or -1
 * after reporting that there is no training row (display names the
 * train files). */
int prep_given_end_train(struct prep_given *g, const char *display);
/* The index of a test user (original id) at file:line into *u.  Returns
 * 0, or -1 after reporting a user with no training rows. */
int prep_given_test_user(const struct prep_given *g, uint32_t user, const char *file,
			 uint64_t line, uint32_t *u);
/*
 * The series of user (original id) that begins at file:line: its
 * positive and its negatives (original item ids, n of them).  Returns 0,
 * or -1 after reporting: a user with no training rows, a second series,
 * a number of negatives other than the first series', too many items.
 */
int prep_given_series(struct prep_given *g, uint32_t user, uint32_t positive,
		      const uint32_t *negatives, uint32_t n, const char *file, uint64_t line);
/* After the last series: every user has one.  Returns 0, or -1 after
 * reporting the first that has none (test names the test files). */
int prep_given_end_test(struct prep_given *g, const char *test);
/* The original ids of the users and items into rows' maps (n_users,
 * user_ids, ...) for the protocol; g's maps are then emptied. */
void prep_given_ids(struct prep_given *g, struct prep_rows *rows);

/* A file of a given split opened for reading: fopen, or what a test or
 * a fuzzer puts in its place (display names it in messages).  NULL after
 * reporting. */
struct prep_opener {
	FILE *(*open)(void *ctx, const char *path, const char **display);
	void (*close)(void *ctx, FILE *fp);
	void *ctx;
};
/* ncf_in_open and ncf_in_close. */
extern const struct prep_opener prep_open_files;

#endif
