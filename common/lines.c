/* lines.c - see lines.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "err.h"
#include "lines.h"

static const char BOM[3] = "\xEF\xBB\xBF";

static void lines_setup(struct ncf_lines *l, int fd, FILE *fp, const char *display, size_t max,
			size_t cap)
{
	memset(l, 0, sizeof *l);
	l->fd = fd;
	l->fp = fp;
	l->display = display;
	l->max = max ? max : NCF_LINES_MAX;
	/* the longest line, a CR and one byte more, which tells a line that
	 * is too long from one that ends there */
	l->cap = cap > l->max + 2 ? cap : l->max + 2;
	l->buf = ncf_xmalloc(l->cap + 1);
	l->at_start = 1;
}

void ncf_lines_init(struct ncf_lines *l, int fd, const char *display, size_t max)
{
	lines_setup(l, fd, NULL, display, max, 0);
}

void ncf_lines_init_stream(struct ncf_lines *l, FILE *fp, const char *display, size_t max,
			   size_t bufsize)
{
	lines_setup(l, -1, fp, display, max, bufsize);
}

void ncf_lines_free(struct ncf_lines *l)
{
	free(l->buf);
	l->buf = NULL;
}

/* The offset of the first c in the buffer's [from, to), or to. */
static size_t find(const struct ncf_lines *l, size_t from, size_t to, int c)
{
	const char *p = memchr(l->buf + from, c, to - from);
	return p ? (size_t)(p - l->buf) : to;
}

/* Read more input (blocking), after what is buffered.  Returns 0, or -1
 * on a read error (reported).  The first CR and NUL are looked for in
 * what it read only when none came before: a line's checks cost nothing
 * in a file that has neither. */
static int lines_fill(struct ncf_lines *l)
{
	if (l->start > 0) {
		memmove(l->buf, l->buf + l->start, l->end - l->start);
		l->end -= l->start;
		l->cr -= l->start;
		l->nul -= l->start;
		l->start = 0;
	}
	size_t from = l->end;
	size_t room = l->cap - l->end;
	size_t got;
	if (l->fp) {
		got = fread(l->buf + l->end, 1, room, l->fp);
		if (got < room && ferror(l->fp)) {
			ncf_error("%s: read failed: %s", l->display, strerror(errno));
			return -1;
		}
		if (got < room)
			l->eof = 1;
	} else {
		ssize_t r;
		do
			r = read(l->fd, l->buf + l->end, room);
		while (r < 0 && errno == EINTR);
		if (r < 0) {
			ncf_error("%s: read failed: %s", l->display, strerror(errno));
			return -1;
		}
		if (r == 0)
			l->eof = 1;
		got = (size_t)r;
	}
	if (l->crc_on)
		l->crc = ncf_crc32c(l->crc, l->buf + l->end, got);
	l->bytes += got;
	l->end += got;
	if (l->cr == from)
		l->cr = find(l, from, l->end, '\r');
	if (l->nul == from)
		l->nul = find(l, from, l->end, 0);
	if (l->prog)
		ncf_progress_update(l->prog, "reading", (double)l->bytes, l->total, NULL);
	return 0;
}

/* At the start of the input, a byte-order mark skipped once enough bytes
 * are in to tell.  Returns 1 when that is settled, 0 when more must be
 * read. */
static int lines_started(struct ncf_lines *l)
{
	if (!l->at_start)
		return 1;
	size_t have = l->end - l->start;
	if (have < sizeof BOM && !l->eof && !memcmp(l->buf + l->start, BOM, have))
		return 0;
	if (have >= sizeof BOM && !memcmp(l->buf + l->start, BOM, sizeof BOM))
		l->start += sizeof BOM;
	l->at_start = 0;
	return 1;
}

int ncf_lines_peek(struct ncf_lines *l, size_t want, const char **p, size_t *n)
{
	if (want > l->cap)
		want = l->cap;
	while (!lines_started(l) || (l->end - l->start < want && !l->eof))
		if (lines_fill(l) != 0)
			return -1;
	*p = l->buf + l->start;
	*n = l->end - l->start < want ? l->end - l->start : want;
	return 0;
}

/*
 * Judge the line (number no) at start from its first n bytes (at most max
 * + 1; body of them before its line end): a NUL, then a bare CR, then a
 * line longer than max.  Returns 0, or -1 (reported).
 */
static int judge(const struct ncf_lines *l, uint64_t no, size_t n, size_t body)
{
	if (l->nul < l->start + n) {
		ncf_error("%s:%llu: a NUL byte in the line (binary data, not text)", l->display,
			  (unsigned long long)no);
		return -1;
	}
	if (l->cr < l->start + body) {
		ncf_error("%s:%llu: a carriage return inside the line (lines end with LF or CRLF; "
			  "convert CR line ends (old Mac files) with tr '\\r' '\\n')",
			  l->display, (unsigned long long)no);
		return -1;
	}
	if (body > l->max) {
		ncf_error("%s:%llu: line longer than %zu bytes, the longest a line may be (binary "
			  "data?)",
			  l->display, (unsigned long long)no, l->max);
		return -1;
	}
	return 0;
}

/*
 * The next complete line into *s, *len, or 0 when none is buffered: then
 * *more says whether reading may bring more.  Returns 1 line, 0 none
 * buffered, -1 an error (reported).
 */
static int lines_take(struct ncf_lines *l, char **s, size_t *len, int *more)
{
	*more = !l->eof;
	if (!lines_started(l))
		return 0;
	char *p = l->buf + l->start;
	size_t have = l->end - l->start;
	char *nl = memchr(p, '\n', have);
	if (!nl && !(l->eof && have)) {
		/* no whole line yet: one already too long is judged now (it
		 * fails, as a NUL, a CR or its length) */
		if (have > l->max + 1) {
			judge(l, l->line + 1, l->max + 1, l->max + 1);
			return -1;
		}
		return 0;
	}
	size_t n = nl ? (size_t)(nl - p) : have;
	size_t body = nl && n && p[n - 1] == '\r' ? n - 1 : n;
	l->line++;
	size_t seen = n < l->max + 1 ? n : l->max + 1;
	if (judge(l, l->line, seen, body < seen ? body : seen) != 0)
		return -1;
	if (!l->keep_end)
		p[body] = 0;
	*s = p;
	*len = body;
	l->ended = nl != NULL;
	l->eol = n - body + (nl != NULL);
	l->start += n + (nl != NULL);
	/* the next CR and NUL after the line (a CRLF's CR, the NUL written) */
	if (l->cr < l->start)
		l->cr = find(l, l->start, l->end, '\r');
	if (l->nul < l->start)
		l->nul = find(l, l->start, l->end, 0);
	return 1;
}

int ncf_lines_next(struct ncf_lines *l, char **s, size_t *len)
{
	for (;;) {
		int more;
		int got = lines_take(l, s, len, &more);
		if (got != 0)
			return got;
		if (!more)
			return 0;
		if (lines_fill(l) != 0)
			return -1;
	}
}

int ncf_lines_read(struct ncf_lines *l, char **s, int (*flush)(void *), void *arg)
{
	for (;;) {
		int more;
		size_t len;
		int got = lines_take(l, s, &len, &more);
		if (got < 0)
			return -1;
		if (got) {
			if (ncf_lines_blank(*s, len))
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
