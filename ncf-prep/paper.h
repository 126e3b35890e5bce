/*
 * paper.h - the NCF paper's NAME.train.rating, NAME.test.rating and
 * NAME.test.negative (paper.c says what is read and refused).
 */
#ifndef NCF_PAPER_H
#define NCF_PAPER_H

#include <stddef.h>

#include "given.h"

/* The suffixes of the three files, in the order they are read. */
enum { PREP_PAPER_TRAIN, PREP_PAPER_TEST, PREP_PAPER_NEGATIVE };
extern const char *const prep_paper_suffix[3];
/* name with suffix k, a file's path (the caller frees it). */
char *prep_paper_path(const char *name, int k);

/* The three files of name (a path without the suffixes), opened by op,
 * into g (initialised).  Returns 0, or -1 after reporting "FILE:LINE:
 * what is wrong". */
int prep_paper_read(const char *name, const struct prep_opener *op, struct prep_given *g);

/* path with one of the three suffixes: NAME into name (cap bytes);
 * else NULL. */
const char *prep_paper_name(const char *path, char *name, size_t cap);

#endif
