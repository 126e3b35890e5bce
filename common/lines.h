/*
 * lines.h - text lines from a file descriptor, for the tools that read
 * ids from people (ncf-infer --score and --recommend).
 *
 * Lines end with LF (a CR before it is dropped); the last line may lack
 * its end.  A line longer than the buffer, or holding a NUL byte, is an
 * error naming its line: text never carries NULs, and reading on past one
 * would score "1 1" for "1 1\0junk".  Blank lines (spaces and tabs only)
 * are skipped but counted, so that messages name the line a person sees.
 */
#ifndef NCF_LINES_H
#define NCF_LINES_H

#include <stddef.h>
#include <stdint.h>

struct ncf_lines {
	int fd;
	const char *display; /* name for messages */
	char *buf;	     /* (cap + 1) */
	size_t cap, start, end;
	uint64_t line;	     /* lines returned so far, blank ones included */
	int eof;
};

#define NCF_LINES_CAP (1u << 20) /* the longest line, in bytes */

/* Read lines from fd with a buffer of cap bytes, which holds lines of cap
 * - 1 bytes and their LF (0: lines of NCF_LINES_CAP bytes). */
void ncf_lines_init(struct ncf_lines *l, int fd, const char *display, size_t cap);
void ncf_lines_free(struct ncf_lines *l);

/*
 * The next non-blank line into *s (NUL-terminated, line end stripped).
 * Before blocking on more input, flush(arg) writes out what the lines so
 * far produced, so that results come as soon as their input does (a
 * pipe, a terminal); flush may be NULL.  Returns 1 line, 0 at the end of
 * the input, -1 on an error (reported as "FILE:LINE: ...": a read error,
 * a NUL byte, a line too long, or flush's failure).
 */
int ncf_lines_read(struct ncf_lines *l, char **s, int (*flush)(void *), void *arg);

/*
 * Parse "ID" (want 1) or "ID SEP ID" (want 2) with SEP spaces, tabs or a
 * comma and optional spaces or tabs around; ids are decimal 0..2^32-1.
 * Returns 0, or -1 when s is not that.
 */
int ncf_parse_ids(const char *s, int want, uint32_t *a, uint32_t *b);

#endif
