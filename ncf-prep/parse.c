/*
 * parse.c - reading MovieLens ratings into rows (DESIGN.md section 1).
 *
 * Formats: ml-20m CSV (header userId,movieId,rating,timestamp), ml-1m
 * "::"-separated, ml-100k tab-separated, and a generic CSV whose header
 * names its columns.  Lines come from common/lines.h's reader; CSV and
 * TSV go through libcsv, one line at a time, so that every message can
 * name its line; the input streams through a fixed buffer and memory
 * grows with the rows kept, not with the file.
 *
 * What is accepted (and what the man page promises): ids are decimal
 * integers 0..4294967295, timestamps decimal integers 0..2^63-1 (Unix
 * seconds), ratings any decimal number (checked, then dropped); CRLF or LF
 * line ends, a carriage return nowhere else (libcsv would end a row at
 * it, taking one line for two); lines of at most 1 MiB wherever they are;
 * blank lines are skipped; every line, the last included, ends with a
 * line end (a missing one means a truncated file).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <csv.h>

#include "cache.h"
#include "cli.h"
#include "err.h"
#include "lines.h"
#include "parse.h"

#define BUF_SIZE (4u << 20)
#define MAX_LINE NCF_LINES_MAX /* the longest line (ncf-prep(1)) */
#define PROBE 65536	       /* the first bytes looked at for binary data */
#define MAX_FIELDS 32

static const char ML20M_HEADER[] = "userId,movieId,rating,timestamp";

enum col_kind { COL_IGNORE = 0, COL_USER, COL_ITEM, COL_RATING, COL_TS };

struct parser {
	const char *display;
	enum ncf_format format;
	struct prep_rows *rows;
	uint64_t line;		  /* current line, 1-based */
	int nfields;		  /* fields a row must have */
	enum col_kind col[MAX_FIELDS];
	char *header[MAX_FIELDS]; /* header names, for the second-header check */
	int has_header;
	/* the row being parsed */
	int field;
	int header_match;	  /* every field so far equals the header's */
	uint32_t user, item;
	int64_t ts;
	int err;		  /* an error was reported */
	char msg[512];		  /* its text, reported after the row */
	char deferred[512];	  /* a field error held while the row may be a header */
	/* header parsing: 1 in the header row, 2 after it on the same line
	 * (header_extra counts what libcsv found there), 0 in the data */
	int in_header;
	int header_fields;
	int header_extra;
	uint64_t rows_ended;	  /* rows completed, to catch a quote left open */
	const struct ncf_lines *lines; /* the reader (its lines keep their ends) */
};

static void fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct parser *p, const char *fmt, ...)
{
	if (p->err)
		return;
	p->err = 1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->msg, sizeof p->msg, fmt, ap);
	va_end(ap);
}

/* The column's name with its article: "a user id", "an item id". */
static const char *kind_name(enum col_kind k)
{
	switch (k) {
	case COL_USER:
		return "a user id";
	case COL_ITEM:
		return "an item id";
	case COL_RATING:
		return "a rating";
	case COL_TS:
		return "a timestamp";
	default:
		return "a field";
	}
}

/* Parse an unsigned decimal integer of len bytes; 0 ok, -1 not a number,
 * -2 negative, -3 out of range (above max). */
static int parse_uint(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	if (len == 0)
		return -1;
	if (s[0] == '-') {
		for (size_t i = 1; i < len; i++)
			if (s[i] < '0' || s[i] > '9')
				return -1;
		return len > 1 ? -2 : -1;
	}
	size_t i = s[0] == '+' ? 1 : 0;
	if (i == len)
		return -1;
	uint64_t v = 0;
	for (; i < len; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';
		if (d > 9)
			return -1;
		if (v > (max - d) / 10)
			return -3;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* A decimal number: digits, at most one '.', optional sign and exponent. */
static int is_number(const char *s, size_t len)
{
	size_t i = 0;
	int digits = 0;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		i++;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++, digits++;
	if (i < len && s[i] == '.') {
		i++;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++, digits++;
	}
	if (!digits)
		return 0;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < len && (s[i] == '-' || s[i] == '+'))
			i++;
		int ed = 0;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++, ed++;
		if (!ed)
			return 0;
	}
	return i == len;
}

static void field_error(struct parser *p, int defer, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void field_error(struct parser *p, int defer, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (defer)
		vsnprintf(p->deferred, sizeof p->deferred, fmt, ap);
	else if (!p->err) {
		p->err = 1;
		vsnprintf(p->msg, sizeof p->msg, fmt, ap);
	}
	va_end(ap);
}

static void take_field(struct parser *p, const char *s, size_t len)
{
	int idx = p->field++;
	if (p->err || idx >= p->nfields)
		return;
	if (p->has_header && p->header_match &&
	    !(strlen(p->header[idx]) == len && !memcmp(p->header[idx], s, len)))
		p->header_match = 0;
	enum col_kind k = p->col[idx];
	uint64_t v = 0;
	int rc;
	switch (k) {
	case COL_USER:
	case COL_ITEM:
		rc = parse_uint(s, len, UINT32_MAX, &v);
		if (rc == 0) {
			if (k == COL_USER)
				p->user = (uint32_t)v;
			else
				p->item = (uint32_t)v;
			return;
		}
		break;
	case COL_TS:
		rc = parse_uint(s, len, INT64_MAX, &v);
		if (rc == 0) {
			p->ts = (int64_t)v;
			return;
		}
		break;
	case COL_RATING:
		if (is_number(s, len))
			return;
		rc = -1;
		break;
	default:
		return;
	}
	/* While every field equals the header's, the row may be a second
	 * header: keep the first error and judge at the end of the row. */
	int defer = p->has_header && p->header_match;
	if (defer && p->deferred[0])
		return;
	const char *what = kind_name(k);
	const char *esc = ncf_escape(s, len, 40);
	if (len == 0)
		field_error(p, defer, "field %d: empty, expected %s", idx + 1, what);
	else if (rc == -2)
		field_error(p, defer, "field %d: '%s' is not %s (negative)", idx + 1, esc, what);
	else if (rc == -3)
		field_error(p, defer, "field %d: '%s' is out of range for %s (0 to %llu)", idx + 1, esc, what,
		     k == COL_TS ? (unsigned long long)INT64_MAX : (unsigned long long)UINT32_MAX);
	else if (k == COL_TS)
		field_error(p, defer, "field %d: '%s' is not a timestamp (expected integer Unix seconds)",
		     idx + 1, esc);
	else if (k == COL_RATING)
		field_error(p, defer, "field %d: '%s' is not a rating (expected a number)", idx + 1, esc);
	else
		field_error(p, defer, "field %d: '%s' is not %s (expected an integer from 0 to %u)", idx + 1,
		     esc, what, UINT32_MAX);
}

static void end_row(struct parser *p)
{
	if (!p->err) {
		if (p->has_header && p->header_match && p->field == p->nfields)
			fail(p, "a second header (concatenated files?)");
		else if (p->deferred[0])
			fail(p, "%s", p->deferred);
		else if (p->field != p->nfields)
			fail(p, "%d field%s, expected %d", p->field, p->field == 1 ? "" : "s",
			     p->nfields);
	}
	if (!p->err)
		prep_rows_push(p->rows, p->user, p->item, p->ts);
	p->rows_ended++;
	p->field = 0;
	p->header_match = 1;
	p->deferred[0] = 0;
}

static void cb_field(void *s, size_t len, void *data)
{
	struct parser *p = data;
	if (p->in_header == 1) {
		if (p->header_fields < MAX_FIELDS)
			p->header[p->header_fields] = ncf_xstrdup(ncf_escape(s, len, 64));
		p->header_fields++;
		return;
	}
	if (p->in_header == 2) {
		p->header_extra++;
		return;
	}
	take_field(p, s, len);
}

static void cb_row(int c, void *data)
{
	(void)c;
	struct parser *p = data;
	if (p->in_header == 1) {
		p->in_header = 2;
		return;
	}
	if (p->in_header == 2) {
		p->header_extra++;
		return;
	}
	end_row(p);
}

/* Split a ml-1m line (no line end) on "::". */
static void parse_dat_line(struct parser *p, const char *s, size_t len)
{
	size_t start = 0;
	for (size_t i = 0; i + 1 < len; i++)
		if (s[i] == ':' && s[i + 1] == ':') {
			take_field(p, s + start, i - start);
			i++;
			start = i + 1;
		}
	take_field(p, s + start, len - start);
	end_row(p);
}

static int only_space(unsigned char c)
{
	return c == ' ';
}

static int csv_space(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* Map a header name to a column kind (case-insensitive, '_' ignored). */
static enum col_kind header_kind(const char *name)
{
	char n[64];
	size_t o = 0;
	for (const char *s = name; *s && o + 1 < sizeof n; s++) {
		if (*s == '_' || *s == ' ' || *s == '-')
			continue;
		n[o++] = (char)((*s >= 'A' && *s <= 'Z') ? *s + 32 : *s);
	}
	n[o] = 0;
	static const char *users[] = {"userid", "user", "uid", "userindex", NULL};
	static const char *items[] = {"movieid", "itemid", "item", "movie", "iid", "itemindex",
				      NULL};
	static const char *ratings[] = {"rating", "ratings", "score", "value", NULL};
	static const char *tss[] = {"timestamp", "time", "ts", "unixtime", NULL};
	for (int i = 0; users[i]; i++)
		if (!strcmp(n, users[i]))
			return COL_USER;
	for (int i = 0; items[i]; i++)
		if (!strcmp(n, items[i]))
			return COL_ITEM;
	for (int i = 0; ratings[i]; i++)
		if (!strcmp(n, ratings[i]))
			return COL_RATING;
	for (int i = 0; tss[i]; i++)
		if (!strcmp(n, tss[i]))
			return COL_TS;
	return COL_IGNORE;
}

/* Does the line start with an unsigned integer followed by sep? */
static int first_field_numeric(const char *s, const char *sep)
{
	size_t d = 0;
	while (s[d] >= '0' && s[d] <= '9')
		d++;
	return d > 0 && !strncmp(s + d, sep, strlen(sep));
}

/* Guess the format from the first line (len bytes, line end stripped). */
static enum ncf_format detect(const char *s, size_t len)
{
	char line[4096];
	size_t n = len < sizeof line - 1 ? len : sizeof line - 1;
	memcpy(line, s, n);
	line[n] = 0;
	if (!strcmp(line, ML20M_HEADER))
		return NCF_FORMAT_ML20M;
	if (strstr(line, "::") && first_field_numeric(line, "::"))
		return NCF_FORMAT_ML1M;
	if (strchr(line, '\t') && first_field_numeric(line, "\t"))
		return NCF_FORMAT_ML100K;
	if (strchr(line, ',') && !(line[0] >= '0' && line[0] <= '9'))
		return NCF_FORMAT_CSV;
	return NCF_FORMAT_UNKNOWN;
}

/* Feed one line (len bytes and the reader's l->eol bytes of line end
 * after them, at which libcsv ends the row) to libcsv.  Returns 0, or -1
 * when libcsv refused it (csv_error says why). */
static int csv_line(struct parser *p, struct csv_parser *cp, const char *s, size_t len)
{
	size_t all = len + p->lines->eol;
	return csv_parse(cp, s, all, cb_field, cb_row, p) == all ? 0 : -1;
}

/* The header line (len bytes, its end stripped; a CR inside it the line
 * reader has refused, so libcsv cannot end it early) into the columns. */
static int setup_header(struct parser *p, struct csv_parser *cp, const char *line, size_t len)
{
	p->in_header = 1;
	p->header_fields = p->header_extra = 0;
	int bad = csv_line(p, cp, line, len);
	int state = p->in_header;
	p->in_header = 0;
	if (bad || state == 1) {
		ncf_error("%s:1: malformed header: %s", p->display,
			  bad ? csv_strerror(csv_error(cp)) : "a quote is left open");
		return -1;
	}
	if (p->header_extra) {
		ncf_error("%s:1: malformed header: more than one row on the line", p->display);
		return -1;
	}
	int n = p->header_fields;
	if (n > MAX_FIELDS) {
		ncf_error("%s:1: header has %d columns, at most %d are supported", p->display, n,
			  MAX_FIELDS);
		return -1;
	}
	p->nfields = n;
	p->has_header = 1;
	int seen[5] = {0};
	for (int i = 0; i < n; i++) {
		p->col[i] = header_kind(p->header[i]);
		if (p->col[i] != COL_IGNORE && seen[p->col[i]]++) {
			ncf_error("%s:1: column '%s' appears twice in the header", p->display,
				  p->header[i]);
			return -1;
		}
	}
	if (!seen[COL_USER] || !seen[COL_ITEM] || !seen[COL_TS]) {
		ncf_error("%s:1: unknown format: the header '%s' does not name a user, an item and "
			  "a timestamp column (like userId,movieId,rating,timestamp)",
			  p->display, ncf_escape(line, len, 80));
		return -1;
	}
	p->field = 0;
	p->header_match = 1;
	return 0;
}

/* The columns of the headerless formats: user, item, rating, timestamp. */
static void fixed_columns(struct parser *p)
{
	p->nfields = 4;
	p->col[0] = COL_USER;
	p->col[1] = COL_ITEM;
	p->col[2] = COL_RATING;
	p->col[3] = COL_TS;
}

/* The format from the first line (first, l0 bytes without its end, which
 * it had when ended), and the header when the format has one.  Returns 1
 * when the line was a header, 0 when it is data, -1 (reported). */
static int setup_format(struct parser *p, struct csv_parser *cp, enum ncf_format format,
			const char *first, size_t l0, int ended)
{
	const char *display = p->display;
	enum ncf_format guess = detect(first, l0);
	if (format == NCF_FORMAT_UNKNOWN)
		format = guess;
	if (format == NCF_FORMAT_UNKNOWN) {
		ncf_error("%s:1: unknown format: '%s' is not a MovieLens ratings line or a "
			  "CSV header naming user, item and timestamp columns (use --format)",
			  display, ncf_escape(first, l0, 60));
		return -1;
	}
	p->format = format;
	if (format == NCF_FORMAT_ML100K) {
		csv_set_delim(cp, '\t');
		csv_set_space_func(cp, only_space);
	} else {
		csv_set_space_func(cp, csv_space);
	}
	if (format == NCF_FORMAT_ML20M &&
	    !(l0 == strlen(ML20M_HEADER) && !memcmp(first, ML20M_HEADER, l0))) {
		ncf_error("%s:1: expected the ml-20m header '%s', found '%s'", display, ML20M_HEADER,
			  ncf_escape(first, l0, 60));
		return -1;
	}
	if (format != NCF_FORMAT_ML20M && format != NCF_FORMAT_CSV) {
		fixed_columns(p);
		return 0;
	}
	if (!ended) {
		ncf_error("%s:1: no ratings after the header (and no line end: truncated file?)",
			  display);
		return -1;
	}
	return setup_header(p, cp, first, l0) != 0 ? -1 : 1;
}

/* One data line s (len bytes, its end stripped) into the rows.  Returns 0
 * or -1 (reported). */
static int parse_line(struct parser *p, struct csv_parser *cp, const char *s, size_t len)
{
	size_t sp = 0;
	while (sp < len && (s[sp] == ' ' || s[sp] == '\t'))
		sp++;
	if (sp == len)
		return 0; /* blank line (or spaces only) */
	uint64_t ended = p->rows_ended;
	if (p->format == NCF_FORMAT_ML1M) {
		parse_dat_line(p, s, len);
	} else if (csv_line(p, cp, s, len) != 0) {
		ncf_error("%s:%llu: malformed CSV: %s", p->display, (unsigned long long)p->line,
			  csv_strerror(csv_error(cp)));
		return -1;
	}
	if (!p->err && p->rows_ended == ended) {
		/* the line ended inside a quoted field */
		ncf_error("%s:%llu: unterminated quote (a field cannot span lines)", p->display,
			  (unsigned long long)p->line);
		return -1;
	}
	if (p->err) {
		ncf_error("%s:%llu: %s", p->display, (unsigned long long)p->line, p->msg);
		return -1;
	}
	return 0;
}

/* The end of the input: libcsv's last row, and at least one rating.
 * Returns 0 or -1 (reported). */
static int finish_input(struct parser *p, struct csv_parser *cp)
{
	if (csv_fini(cp, cb_field, cb_row, p) != 0) {
		ncf_error("%s:%llu: malformed CSV at the end: %s", p->display,
			  (unsigned long long)p->line, csv_strerror(csv_error(cp)));
		return -1;
	}
	if (p->err) {
		ncf_error("%s:%llu: %s", p->display, (unsigned long long)p->line, p->msg);
		return -1;
	}
	if (p->rows->n == 0) {
		ncf_error("%s: no ratings%s", p->display, p->has_header ? " after the header" : "");
		return -1;
	}
	return 0;
}

/* The reader's line s (len bytes) as data: it must have its end.
 * Returns 0, or -1 (reported; also when the rows could not spill). */
static int data_line(struct parser *p, struct csv_parser *cp, const struct ncf_lines *l,
		     const char *s, size_t len)
{
	p->line = l->line;
	if (!l->ended) {
		ncf_error("%s:%llu: last line has no line end (truncated file?): '%s'", p->display,
			  (unsigned long long)p->line, ncf_escape(s, len, 60));
		return -1;
	}
	return parse_line(p, cp, s, len) != 0 || p->rows->failed ? -1 : 0;
}

/* The whole input, line by line (common/lines.h: line ends, bare CRs, NUL
 * bytes and long lines are the reader's to refuse): not empty, not binary,
 * the format from the first line, then every data line, the last one with
 * its end.  Returns 0 or -1 (reported). */
static int parse_input(struct parser *p, struct csv_parser *cp, struct ncf_lines *l,
		       enum ncf_format format)
{
	const char *head;
	size_t n;
	if (ncf_lines_peek(l, PROBE, &head, &n) != 0)
		return -1;
	if (n == 0) {
		ncf_error("%s: empty input, expected MovieLens ratings", p->display);
		return -1;
	}
	if (memchr(head, 0, n)) {
		ncf_error("%s: binary data (NUL bytes), not a ratings file", p->display);
		return -1;
	}
	char *s;
	size_t len;
	int got = ncf_lines_next(l, &s, &len);
	if (got <= 0)
		return -1; /* not 0: the input holds a line */
	p->line = 1;
	int header = setup_format(p, cp, format, s, len, l->ended);
	if (header < 0 || (!header && data_line(p, cp, l, s, len) != 0))
		return -1;
	while ((got = ncf_lines_next(l, &s, &len)) > 0)
		if (data_line(p, cp, l, s, len) != 0)
			return -1;
	if (got < 0)
		return -1;
	return finish_input(p, cp);
}

int prep_parse(FILE *fp, const char *display, enum ncf_format format, struct prep_rows *rows,
	      struct prep_parse_info *info, int force_progress)
{
	struct parser p;
	memset(&p, 0, sizeof p);
	p.display = display;
	p.rows = rows;
	p.header_match = 1;
	struct csv_parser cp;
	if (csv_init(&cp, CSV_STRICT | CSV_STRICT_FINI) != 0) {
		ncf_error("libcsv: csv_init failed");
		return -1;
	}
	struct ncf_lines l;
	ncf_lines_init_stream(&l, fp, display, MAX_LINE, BUF_SIZE);
	struct ncf_progress prog;
	ncf_progress_init(&prog, force_progress);
	struct stat st;
	if (fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode))
		l.total = (double)st.st_size;
	prog.unit = NCF_PROGRESS_BYTES;
	l.prog = &prog;
	l.crc_on = 1;
	l.keep_end = 1;
	p.lines = &l;
	int rc = parse_input(&p, &cp, &l, format);
	if (rows->failed)
		rc = -1; /* rows that could not spill (reported) */
	if (rc == 0) {
		info->format = p.format;
		info->bytes = l.bytes;
		info->crc = l.crc;
		info->lines = l.line;
	} else {
		prep_rows_free(rows); /* the rows before the bad one */
	}
	ncf_progress_clear(&prog);
	csv_free(&cp);
	for (int i = 0; i < MAX_FIELDS; i++)
		free(p.header[i]);
	ncf_lines_free(&l);
	return rc;
}

enum ncf_format prep_parse_format(const char *name)
{
	static const struct {
		const char *name;
		enum ncf_format f;
	} names[] = {
		{"ml-20m", NCF_FORMAT_ML20M}, {"ml-25m", NCF_FORMAT_ML20M},
		{"ml-latest", NCF_FORMAT_ML20M}, {"ml-latest-small", NCF_FORMAT_ML20M},
		{"ml-1m", NCF_FORMAT_ML1M},	{"ml-10m", NCF_FORMAT_ML1M},
		{"dat", NCF_FORMAT_ML1M},	{"ml-100k", NCF_FORMAT_ML100K},
		{"tsv", NCF_FORMAT_ML100K},	{"csv", NCF_FORMAT_CSV},
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(name, names[i].name))
			return names[i].f;
	return NCF_FORMAT_UNKNOWN;
}
