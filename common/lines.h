/*
 * lines.h - text read line by line, with the rules every reader of text
 * in ncf shares: the ratings files of ncf-prep and the ids people type or
 * pipe into ncf-infer (--score, --recommend).
 *
 * A line ends with LF or CRLF; the last line may lack its end, which the
 * reader reports (ended) for the caller to judge (a ratings file calls it
 * truncated).  Wherever a line is in the input, the first one and the
 * last one included, these are errors that name the file and the line:
 * a NUL byte (binary data: reading on past one would take "1 1" for
 * "1 1\0junk"), a carriage return that is not part of a CRLF (a bare CR
 * would split or hide a line; a file with old Mac CR line ends is told
 * how to convert it), and a line longer than max bytes (its line end not
 * counted).  A line is judged on its first max + 1 bytes, in that order
 * of checks, so that the message does not depend on where a buffer ends.
 * A UTF-8 byte-order mark at the start of the input is skipped.  Lines
 * are counted from 1, blank ones included, so that messages name the line
 * a person sees.  Memory: one buffer, whatever the input's size.
 */
#ifndef NCF_LINES_H
#define NCF_LINES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"

struct ncf_lines {
	int fd;		     /* the source: a descriptor, read as input comes (a pipe, a tty) */
	FILE *fp;	     /* or a stream, read a buffer at a time (then fd is -1) */
	const char *display; /* name for messages */
	char *buf;	     /* (cap + 1) */
	size_t cap, max, start, end;
	size_t cr, nul;	     /* the first CR, NUL at or after start (end: none before it) */
	uint64_t line;	     /* lines returned so far, blank ones included */
	uint64_t bytes;	     /* bytes read so far */
	int eof, at_start;
	int ended;	     /* the last line returned had its line end */
	size_t eol;	     /* the bytes of that end: 0, 1 (LF) or 2 (CRLF) */
	/* set by the caller after init, when wanted: */
	int keep_end;		   /* leave lines as they are, their ends after them (no NUL) */
	int crc_on;		   /* keep crc, the CRC-32C of the bytes read */
	uint32_t crc;
	struct ncf_progress *prog; /* updated after each read ("reading", bytes of total) */
	double total;		   /* the input's size, 0 when unknown */
};

#define NCF_LINES_MAX (1u << 20) /* the longest line by default, in bytes */

/* Read lines of at most max bytes (0: NCF_LINES_MAX) from fd, as its input
 * comes: a line is returned as soon as it is complete. */
void ncf_lines_init(struct ncf_lines *l, int fd, const char *display, size_t max);
/* The same from a stream, read bufsize bytes at a time (at least max + 2
 * are used). */
void ncf_lines_init_stream(struct ncf_lines *l, FILE *fp, const char *display, size_t max,
			   size_t bufsize);
void ncf_lines_free(struct ncf_lines *l);

/*
 * The first bytes of the input, before any line is taken (the byte-order
 * mark skipped): up to want of them (at most the buffer) in *p, *n (fewer
 * at the end of the input).  Returns 0, or -1 on a read error (reported).
 */
int ncf_lines_peek(struct ncf_lines *l, size_t want, const char **p, size_t *n);

/*
 * The next line, blank or not, into *s (NUL-terminated, its line end
 * stripped; with keep_end, not terminated and its l->eol bytes of line end
 * after it) and *len; l->ended says whether it had its end.  The line
 * stays valid until the next call.  Returns 1 line, 0 at the end of the
 * input, -1 on an error (reported as "FILE:LINE: ...": a read error, a
 * NUL byte, a bare CR, a line too long).
 */
int ncf_lines_next(struct ncf_lines *l, char **s, size_t *len);

/*
 * The next non-blank line (spaces and tabs only are blank) into *s, as
 * ncf_lines_next.  Before blocking on more input, flush(arg) writes out
 * what the lines so far produced, so that results come as soon as their
 * input does (a pipe, a terminal); flush may be NULL.  Returns 1 line, 0
 * at the end of the input, -1 on an error (ncf_lines_next's, or flush's
 * failure).
 */
int ncf_lines_read(struct ncf_lines *l, char **s, int (*flush)(void *), void *arg);

/* Is the line s (len bytes) blank: spaces and tabs only, or nothing? */
static inline int ncf_lines_blank(const char *s, size_t len)
{
	size_t k = 0;
	while (k < len && (s[k] == ' ' || s[k] == '\t'))
		k++;
	return k == len;
}

/*
 * Parse "ID" (want 1) or "ID SEP ID" (want 2) with SEP spaces, tabs or a
 * comma and optional spaces or tabs around; ids are decimal 0..2^32-1.
 * Returns 0, or -1 when s is not that.
 */
int ncf_parse_ids(const char *s, int want, uint32_t *a, uint32_t *b);

#endif
