/*
 * parse.h - reading MovieLens ratings files (see parse.c for the rules).
 */
#ifndef NCF_PARSE_H
#define NCF_PARSE_H

#include <stdint.h>
#include <stdio.h>

#include "cache.h"
#include "rows.h"

struct prep_parse_info {
	enum ncf_format format; /* detected or given */
	uint64_t bytes;		/* bytes read */
	uint32_t crc;		/* CRC-32C of those bytes */
	uint64_t lines;		/* lines read */
};

/*
 * Read every rating of fp (named display in messages) into rows, as
 * original ids.  format NCF_FORMAT_UNKNOWN detects it from the first line.
 * Returns 0, or -1 after reporting "display:LINE: what is wrong" (rows
 * then freed).
 */
int prep_parse(FILE *fp, const char *display, enum ncf_format format, struct prep_rows *rows,
	      struct prep_parse_info *info, int force_progress);

/* A --format name (ml-20m, ml-1m, ml-100k, csv and aliases) or
 * NCF_FORMAT_UNKNOWN. */
enum ncf_format prep_parse_format(const char *name);

#endif
