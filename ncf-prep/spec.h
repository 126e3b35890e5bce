/*
 * spec.h - NVIDIA's feature spec (feature_spec.yaml over CSV files, the
 * "bring your own dataset" of NVIDIA's PyTorch NCF): spec.c says what is
 * read and refused.
 */
#ifndef NCF_SPEC_H
#define NCF_SPEC_H

#include "given.h"

/* Is the feature spec reader built (libyaml found)? */
int prep_spec_available(void);
/* The YAML at path and the CSV files it names (relative to its
 * directory), opened by op, into g (initialised).  Returns 0, -1 after
 * reporting "FILE:LINE: what is wrong", or -3 after reporting that this
 * build has no YAML reader. */
int prep_spec_read(const char *path, const struct prep_opener *op, struct prep_given *g);

#endif
