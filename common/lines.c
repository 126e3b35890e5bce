/* lines.c - see lines.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "lines.h"

void ncf_lines_init(struct ncf_lines *l, int fd, const char *display, size_t cap)
{
	memset(l, 0, sizeof *l);
	l->fd = fd;
	l->display = display;
	l->cap = cap ? cap : NCF_LINES_CAP + 1; /* the line and its LF */
	l->buf = ncf_xmalloc(l->cap + 1);
}

void ncf_lines_free(struct ncf_lines *l)
{
	free(l->buf);
	l->buf = NULL;
}

/*
 * The next complete line into *s, or 0 when none is buffered: then *more
 * says whether reading may bring more.  Returns 1 line, 0 none buffered,
 * -1 a NUL byte in the line (reported).
 */
static int lines_next(struct ncf_lines *l, char **s, int *more)
{
	char *p = l->buf + l->start;
	char *nl = memchr(p, '\n', l->end - l->start);
	size_t len;
	if (nl) {
		len = (size_t)(nl - p);
	} else {
		*more = !l->eof;
		if (!l->eof || l->end == l->start)
			return 0;
		len = l->end - l->start; /* a last line without its end */
	}
	l->line++;
	if (memchr(p, 0, len)) {
		ncf_error("%s:%llu: a NUL byte in the line (binary data, not text)", l->display,
			  (unsigned long long)l->line);
		return -1;
	}
	p[len] = 0;
	if (nl && len > 0 && p[len - 1] == '\r')
		p[len - 1] = 0;
	*s = p;
	l->start += len + (nl != NULL);
	return 1;
}

/* Read more input (blocking).  Returns 0, or -1 on a read error or a line
 * longer than the buffer (reported). */
static int lines_fill(struct ncf_lines *l)
{
	if (l->start > 0) {
		memmove(l->buf, l->buf + l->start, l->end - l->start);
		l->end -= l->start;
		l->start = 0;
	}
	if (l->end == l->cap) {
		ncf_error("%s:%llu: line longer than %zu bytes", l->display,
			  (unsigned long long)l->line + 1, l->cap - 1);
		return -1;
	}
	ssize_t got;
	do
		got = read(l->fd, l->buf + l->end, l->cap - l->end);
	while (got < 0 && errno == EINTR);
	if (got < 0) {
		ncf_error("%s: read failed: %s", l->display, strerror(errno));
		return -1;
	}
	if (got == 0)
		l->eof = 1;
	l->end += (size_t)got;
	return 0;
}

static int blank(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return *s == 0;
}

int ncf_lines_read(struct ncf_lines *l, char **s, int (*flush)(void *), void *arg)
{
	for (;;) {
		int more = 0;
		int got = lines_next(l, s, &more);
		if (got < 0)
			return -1;
		if (got) {
			if (blank(*s))
				continue;
			return 1;
		}
		if (flush && flush(arg) != 0)
			return -1;
		if (!more)
			return 0;
		if (lines_fill(l) != 0)
			return -1;
	}
}

/* Parse an unsigned 32-bit id at *p; advance.  0 ok, -1 none. */
static int parse_id(const char **p, uint32_t *id)
{
	const char *s = *p;
	uint64_t v = 0;
	int d = 0;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return -1;
		s++, d++;
	}
	if (!d)
		return -1;
	*id = (uint32_t)v;
	*p = s;
	return 0;
}

static const char *skip_sep(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == ',')
		s++;
	return s;
}

int ncf_parse_ids(const char *s, int want, uint32_t *a, uint32_t *b)
{
	const char *p = s;
	while (*p == ' ' || *p == '\t')
		p++;
	if (parse_id(&p, a) != 0)
		return -1;
	if (want == 2) {
		const char *q = skip_sep(p);
		if (q == p || parse_id(&q, b) != 0)
			return -1;
		p = q;
	}
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == 0 ? 0 : -1;
}
