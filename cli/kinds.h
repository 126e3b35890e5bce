/*
 * kinds.h - what a file given to a tool is, by its first bytes, so that a
 * file in the wrong place (a model where the cache goes, a ratings file
 * given to ncf-train, ncf-eval's two files swapped) is refused by saying
 * what it is and where it goes, before a reader calls it corrupt.  Only
 * regular files are looked into (a pipe cannot be read twice); the
 * readers (common/) still check everything they read.
 */
#ifndef NCF_KINDS_H
#define NCF_KINDS_H

#include <stddef.h>

enum ncf_kind {
	NCF_KIND_UNKNOWN,     /* not looked into: stdin, absent, not a regular
			       * file, unreadable, or too short to say */
	NCF_KIND_CACHE,	      /* ncf-prep's (magic NCFCACHE) */
	NCF_KIND_MODEL,	      /* ncf-train's checkpoint (magic NCFMODEL) */
	NCF_KIND_SAFETENSORS, /* a model as safetensors (ncf-infer --export) */
	NCF_KIND_TEXT,	      /* text: ratings, ids or pairs */
	NCF_KIND_OTHER,	      /* anything else */
};

/* The kind of the file at path ("-" and NULL: unknown). */
enum ncf_kind ncf_kind_of(const char *path);
/* What a file of kind k is, for a message: "a cache (ncf-prep's)". */
const char *ncf_kind_says(enum ncf_kind k);
/* A cache's name for ratings at path: its base name with .ncfc in place
 * of its extension ("ml-20m/ratings.csv": "ratings.ncfc"), into buf. */
const char *ncf_kind_cache_name(const char *path, char *buf, size_t len);

#endif
