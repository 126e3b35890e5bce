/*
 * parse.h - reading MovieLens ratings files (see parse.c for the rules).
 */
#ifndef NCF_PARSE_H
#define NCF_PARSE_H

#include <stdint.h>
#include <stdio.h>

#include "cache.h"
#include "idmap.h"
#include "rows.h"

/* What a run asks of the reader (ncf-prep's options). */
struct prep_parse_opts {
	enum ncf_format format; /* --format; NCF_FORMAT_UNKNOWN: detected */
	const char *columns;	/* --columns SPEC (prep_parse_columns), or NULL */
	char delimiter;		/* --delimiter, 0: the format's */
	int progress;		/* show progress even off a terminal */
};

struct prep_parse_info {
	enum ncf_format format; /* detected or given */
	uint64_t bytes;		/* bytes read */
	uint32_t crc;		/* CRC-32C of those bytes */
	uint64_t lines;		/* lines read */
	/* A generic CSV's ids, which may be text (names.h): the rows hold
	 * the index each id has in order of first appearance, and these maps
	 * the ids (prep_parse_ids); NULL for the MovieLens formats, whose
	 * rows hold the ids themselves. */
	struct ncf_idmap *user_keys, *item_keys;
};

/*
 * Read every rating of fp (named display in messages) into rows, as
 * original ids (or, for a generic CSV, as info's keys).  o->format
 * NCF_FORMAT_UNKNOWN detects it from the first line.  Returns 0, or -1
 * after reporting "display:LINE: what is wrong" (rows then freed).
 */
int prep_parse(FILE *fp, const char *display, const struct prep_parse_opts *o,
	       struct prep_rows *rows, struct prep_parse_info *info);

/*
 * After the rows are indexed (prep_rows_index, or prep_spill_finish),
 * rows' id maps, which then hold info's keys, replaced by the original
 * ids they stand for: numbers, or names when a column's ids are not all
 * integers.  Frees the keys.  Nothing to do without keys.
 */
void prep_parse_ids(struct prep_parse_info *info, struct prep_rows *rows);
/* Free what info holds (its keys, when prep_parse_ids did not). */
void prep_parse_info_free(struct prep_parse_info *info);

/* --columns SPEC: user=COL,item=COL,time=COL[,rating=COL], each COL a
 * header's column name or a number from 1.  NULL when it is one, else
 * what is wrong (a static string). */
const char *prep_parse_columns_check(const char *spec);
/* --delimiter VALUE: one character, or "tab" or "\t" for a tab; the
 * character, or 0 when VALUE is none of these. */
char prep_parse_delimiter(const char *value);

/* A libcsv parser as ncf-prep reads CSV: strict (RFC 4180 quoting, which
 * prep_csv_why below explains), spaces and tabs around a field no part of
 * it. */
struct csv_parser;
void prep_csv_init(struct csv_parser *cp);
/* Why libcsv (strict) refused a line, in words for the message. */
const char *prep_csv_why(struct csv_parser *cp);

/* A --format name (ml-20m, ml-1m, ml-100k, csv and aliases) or
 * NCF_FORMAT_UNKNOWN. */
enum ncf_format prep_parse_format(const char *name);

#endif
