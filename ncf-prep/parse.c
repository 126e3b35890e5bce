/*
 * parse.c - reading MovieLens ratings into rows (DESIGN.md section 1).
 *
 * Formats: ml-20m CSV (header userId,movieId,rating,timestamp), ml-1m
 * "::"-separated, ml-100k tab-separated, and a generic CSV whose header
 * names its columns, or whose columns --columns names (by header name or
 * by number, then with or without a header), separated by a comma, a
 * semicolon or a tab (detected from a header) or by --delimiter.  Lines
 * come from common/lines.h's reader; CSV and TSV go through libcsv, one
 * line at a time, so that every message can name its line; the input
 * streams through a fixed buffer and memory grows with the rows kept, not
 * with the file.
 *
 * What is accepted (and what the man page promises): in the MovieLens
 * formats ids are decimal integers 0..4294967295 and timestamps decimal
 * integers 0..2^63-1 (Unix seconds); in a generic CSV an id is any text
 * (names.h: a column whose ids are all integers keeps numbers, one with
 * any other text keeps every id as text) and a timestamp Unix seconds or
 * an ISO 8601 date or date-time (parse_time; without a zone it is UTC).
 * Ratings are any decimal number (checked, then dropped); CRLF or LF line
 * ends, a carriage return nowhere else (libcsv would end a row at it,
 * taking one line for two); lines of at most 1 MiB wherever they are;
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
#include "idmap.h"
#include "lines.h"
#include "names.h"
#include "parse.h"

#define BUF_SIZE (4u << 20)
#define MAX_LINE NCF_LINES_MAX /* the longest line (ncf-prep(1)) */
#define PROBE 65536	       /* the first bytes looked at for binary data */
#define MAX_FIELDS 256

static const char ML20M_HEADER[] = "userId,movieId,rating,timestamp";

enum col_kind { COL_IGNORE = 0, COL_USER, COL_ITEM, COL_RATING, COL_TS };

struct parser {
	const char *display;
	enum ncf_format format;
	struct prep_rows *rows;
	uint64_t line;		  /* current line, 1-based */
	int nfields;		  /* fields a row must have */
	enum col_kind col[MAX_FIELDS];
	char *header[MAX_FIELDS]; /* header names (escaped), for the second-header check */
	char *raw[MAX_FIELDS];	  /* the same as read, for --columns */
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
	/* a generic CSV: ids through keys (NULL: ids are the numbers), and
	 * timestamps that may be ISO 8601 dates */
	struct ncf_idmap *user_keys, *item_keys;
	int dates;
	char delim;		  /* the CSV's separator, for messages */
	const struct prep_parse_opts *opts;
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

/* A decimal number: digits, at most one '.' (or ',', the decimal mark of
 * the files that separate fields by ';': 4,5), optional sign and
 * exponent. */
static int is_number(const char *s, size_t len)
{
	size_t i = 0;
	int digits = 0;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		i++;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++, digits++;
	if (i < len && (s[i] == '.' || s[i] == ',')) {
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

/* n decimal digits at s into *v; 0, or -1 when one is not a digit. */
static int digits(const char *s, size_t n, int *v)
{
	int x = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';
		if (d > 9)
			return -1;
		x = x * 10 + (int)d;
	}
	*v = x;
	return 0;
}

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
	static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	return m == 2 ? 28 + leap : dm[m - 1];
}

/* A zone at s (n bytes): Z, +HH, +HH:MM or +HHMM (or -); its offset in
 * seconds east of UTC.  0 or -1. */
static int parse_zone(const char *s, size_t n, int64_t *off)
{
	int h = 0, m = 0;
	if (n == 1 && (s[0] == 'Z' || s[0] == 'z')) {
		*off = 0;
		return 0;
	}
	if (n < 3 || (s[0] != '+' && s[0] != '-') || digits(s + 1, 2, &h) != 0)
		return -1;
	if (n == 6 && s[3] == ':' ? digits(s + 4, 2, &m) != 0
	    : n == 5		  ? digits(s + 3, 2, &m) != 0
				  : n != 3)
		return -1;
	if (h > 23 || m > 59)
		return -1;
	*off = (s[0] == '-' ? -1 : 1) * (int64_t)(h * 3600 + m * 60);
	return 0;
}

/* The clock of a date-time at s (len bytes), hh:mm[:ss[.fraction]]:
 * *used gets its bytes.  0, or -1 when it is not one. */
static int parse_clock(const char *s, size_t len, size_t *used, int *h, int *mi, int *sec)
{
	if (len < 5 || s[2] != ':' || digits(s, 2, h) || digits(s + 3, 2, mi) || *h > 23 ||
	    *mi > 59)
		return -1;
	size_t i = 5;
	if (i < len && s[i] == ':') {
		if (len - i < 3 || digits(s + i + 1, 2, sec) || *sec > 60)
			return -1;
		i += 3;
		if (i < len && (s[i] == '.' || s[i] == ',')) {
			size_t f = ++i;
			while (i < len && s[i] >= '0' && s[i] <= '9')
				i++;
			if (i == f)
				return -1;
		}
	}
	*used = i;
	return 0;
}

/*
 * An ISO 8601 date or date-time at s (len bytes) into Unix seconds:
 * YYYY-MM-DD, then optionally T (t) or a space and hh:mm[:ss[.fraction]],
 * then optionally a zone (Z or z, +hh, +hh:mm, +hhmm); without a zone the time
 * is UTC, and a fraction of a second is read and dropped.  0, or -1 when
 * it is not one (or not a day of the calendar).
 */
static int parse_time(const char *s, size_t len, int64_t *out)
{
	int y, mo, d, h = 0, mi = 0, sec = 0;
	if (len < 10 || s[4] != '-' || s[7] != '-' || digits(s, 4, &y) || digits(s + 5, 2, &mo) ||
	    digits(s + 8, 2, &d) || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
		return -1;
	size_t i = 10;
	if (i < len && (s[i] == 'T' || s[i] == 't' || s[i] == ' ')) {
		size_t used;
		if (parse_clock(s + i + 1, len - i - 1, &used, &h, &mi, &sec) != 0)
			return -1;
		i += 1 + used;
	}
	int64_t off = 0;
	if (i < len && parse_zone(s + i, len - i, &off) != 0)
		return -1;
	*out = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
	return 0;
}

/* Unix seconds with a fraction (s, len bytes: digits, '.', digits, as
 * 964982703.5, or a division of milliseconds by 1000, writes them) into
 * the whole seconds, the fraction dropped as a date-time's is.  0, or -1
 * when it is not one. */
static int parse_seconds(const char *s, size_t len, int64_t *out)
{
	const char *dot = memchr(s, '.', len);
	uint64_t v;
	if (!dot || parse_uint(s, (size_t)(dot - s), INT64_MAX, &v) != 0)
		return -1;
	for (const char *c = dot + 1; c < s + len; c++)
		if (*c < '0' || *c > '9')
			return -1;
	*out = (int64_t)v;
	return 0;
}

/* A generic CSV's id (s, len bytes) into its key (its index among the
 * column's ids in order of first appearance).  0, or -1 with why set. */
static int take_id(struct ncf_idmap *keys, const char *s, size_t len, uint32_t *key,
		   const char **why)
{
	uint32_t v;
	if (ncf_text_is_u32(s, len, &v)) {
		*key = ncf_idmap_get(keys, v);
		return 0;
	}
	*why = ncf_name_check(s, len);
	if (*why)
		return -1;
	if (keys->count == UINT32_MAX - 1) {
		*why = "one id too many (at most 4294967294)";
		return -1;
	}
	*key = ncf_idmap_get_text(keys, s, len);
	return 0;
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

/* A field of kind k (s, len bytes) into the row: 0 when taken, else
 * parse_uint's -1, -2 or -3 (*why set for an id that is not a name). */
static int take_value(struct parser *p, enum col_kind k, const char *s, size_t len,
		      const char **why)
{
	uint64_t v = 0;
	int rc;
	switch (k) {
	case COL_USER:
	case COL_ITEM: {
		uint32_t *to = k == COL_USER ? &p->user : &p->item;
		if (p->user_keys)
			return take_id(k == COL_USER ? p->user_keys : p->item_keys, s, len, to, why);
		rc = parse_uint(s, len, UINT32_MAX, &v);
		if (rc == 0)
			*to = (uint32_t)v;
		return rc;
	}
	case COL_TS:
		rc = parse_uint(s, len, INT64_MAX, &v);
		if (rc == 0)
			p->ts = (int64_t)v;
		else if (p->dates && rc == -1 &&
			 (parse_time(s, len, &p->ts) == 0 || parse_seconds(s, len, &p->ts) == 0))
			rc = 0;
		return rc;
	case COL_RATING:
		return is_number(s, len) ? 0 : -1;
	default:
		return 0;
	}
}

/* In ml-20m's CSV and ml-100k's tabs, where ids are integers and times
 * Unix seconds, a field of kind k (s, len bytes; take_value's rc) that
 * the generic CSV reads (an id that is text, a date): the options that
 * read the file so, for the message ("" when none). */
static const char *generic_hint(const struct parser *p, enum col_kind k, const char *s,
				size_t len, int rc)
{
	const char *opts = p->format == NCF_FORMAT_ML20M
				   ? "--columns user=userId,item=movieId,time=timestamp"
			   : p->format == NCF_FORMAT_ML100K ? "--delimiter tab --columns user=1,item=2,time=4"
							    : NULL;
	int64_t t;
	if (!opts || rc != -1 || len == 0)
		return "";
	static char hint[128];
	if ((k == COL_USER || k == COL_ITEM) && !ncf_name_check(s, len))
		snprintf(hint, sizeof hint, "; ids that are text are read with %s", opts);
	else if (k == COL_TS && parse_time(s, len, &t) == 0)
		snprintf(hint, sizeof hint, "; dates are read with %s", opts);
	else
		return "";
	return hint;
}

/* Why field idx (s, len bytes) was not taken, take_value's rc and why,
 * as the row's error (deferred: kept until the row is judged). */
static void field_refused(struct parser *p, int defer, int idx, const char *s, size_t len,
			  int rc, const char *why)
{
	enum col_kind k = p->col[idx];
	const char *what = kind_name(k);
	const char *esc = ncf_escape(s, len, 40);
	const char *hint = generic_hint(p, k, s, len, rc);
	if (len == 0)
		field_error(p, defer, "field %d: empty, expected %s", idx + 1, what);
	else if (why)
		field_error(p, defer, "field %d: '%s' is not %s (an id %s)", idx + 1, esc, what, why);
	else if (k == COL_TS && p->dates)
		field_error(p, defer,
			    "field %d: '%s' is not a timestamp (expected integer Unix seconds or an "
			    "ISO 8601 date or date-time, like 2000-07-30 or 2000-07-30T18:45:03Z)",
			    idx + 1, esc);
	else if (rc == -2)
		field_error(p, defer, "field %d: '%s' is not %s (negative)", idx + 1, esc, what);
	else if (rc == -3)
		field_error(p, defer, "field %d: '%s' is out of range for %s (0 to %llu)", idx + 1, esc, what,
		     k == COL_TS ? (unsigned long long)INT64_MAX : (unsigned long long)UINT32_MAX);
	else if (k == COL_TS)
		field_error(p, defer, "field %d: '%s' is not a timestamp (expected integer Unix seconds%s)",
		     idx + 1, esc, hint);
	else if (k == COL_RATING)
		field_error(p, defer, "field %d: '%s' is not a rating (expected a number)", idx + 1, esc);
	else
		field_error(p, defer, "field %d: '%s' is not %s (expected an integer from 0 to %u%s)",
		     idx + 1, esc, what, UINT32_MAX, hint);
}

static void take_field(struct parser *p, const char *s, size_t len)
{
	int idx = p->field++;
	if (p->err || idx >= p->nfields)
		return;
	if (p->has_header && p->header_match &&
	    !(strlen(p->header[idx]) == len && !memcmp(p->header[idx], s, len)))
		p->header_match = 0;
	const char *why = NULL;
	int rc = take_value(p, p->col[idx], s, len, &why);
	if (rc == 0)
		return;
	/* While every field equals the header's, the row may be a second
	 * header: keep the first error and judge at the end of the row. */
	int defer = p->has_header && p->header_match;
	if (defer && p->deferred[0])
		return;
	field_refused(p, defer, idx, s, len, rc, why);
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
		if (p->header_fields < MAX_FIELDS) {
			p->header[p->header_fields] = ncf_xstrdup(ncf_escape(s, len, 64));
			char *r = ncf_xmalloc(len + 1);
			memcpy(r, s, len);
			r[len] = 0;
			p->raw[p->header_fields] = r;
		}
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

/* Guess the format from the first line (len bytes, line end stripped);
 * a generic CSV's separator into *delim: a comma, or a semicolon or a tab
 * when the line has no comma. */
static enum ncf_format detect(const char *s, size_t len, char *delim)
{
	char line[4096];
	size_t n = len < sizeof line - 1 ? len : sizeof line - 1;
	memcpy(line, s, n);
	line[n] = 0;
	*delim = ',';
	if (!strcmp(line, ML20M_HEADER))
		return NCF_FORMAT_ML20M;
	/* what is inside quotes separates nothing ("Buyer, ID";"Date") */
	int quoted = 0;
	for (size_t i = 0; i < n; i++) {
		if (line[i] == '"')
			quoted = !quoted;
		else if (quoted)
			line[i] = 'x';
	}
	if (strstr(line, "::") && first_field_numeric(line, "::"))
		return NCF_FORMAT_ML1M;
	if (strchr(line, '\t') && first_field_numeric(line, "\t"))
		return NCF_FORMAT_ML100K;
	int digit = line[0] >= '0' && line[0] <= '9';
	if (strchr(line, ',') && !digit)
		return NCF_FORMAT_CSV;
	*delim = strchr(line, ';') ? ';' : '\t';
	if (!strchr(line, ',') && strchr(line, *delim) && !digit)
		return NCF_FORMAT_CSV;
	*delim = ',';
	return NCF_FORMAT_UNKNOWN;
}

void prep_csv_init(struct csv_parser *cp)
{
	if (csv_init(cp, CSV_STRICT | CSV_STRICT_FINI) != 0)
		ncf_out_of_memory("libcsv");
	csv_set_space_func(cp, csv_space);
}

const char *prep_csv_why(struct csv_parser *cp)
{
	if (csv_error(cp) == CSV_EPARSE) /* what strict RFC 4180 refuses */
		return "a quote inside a field that is not quoted, or text after a closing "
		       "quote (a field that holds a quote is quoted whole, its quotes doubled: "
		       "\"say \"\"hi\"\"\")";
	return csv_strerror(csv_error(cp));
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
		ncf_error("%s:1: malformed header (fields separated by '%s'): %s", p->display,
			  p->delim == '\t' ? "\\t" : (const char[2]){p->delim, 0},
			  bad ? prep_csv_why(cp) : "a quote is left open");
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
	p->field = 0;
	p->header_match = 1;
	return 0;
}

/*
 * A first line that names no columns but holds a time (an ISO 8601 date
 * or date-time, or an integer of 9 or more digits: Unix seconds) is taken
 * for data: a header's names are not times.  Then the message says so and
 * gives --columns by number (the time's column, the user and the item the
 * first two others that are not plain numbers, as ratings are), so that
 * no one names a first row of data as a header and loses it.  Returns 0
 * when it said so, -1 when the line may be a header.
 */
static int data_not_header(const struct parser *p, const char *line, size_t len)
{
	int ts = -1, other[2] = {-1, -1}, n_other = 0;
	for (int i = 0; i < p->nfields; i++) {
		const char *f = p->header[i];
		size_t fl = strlen(f);
		int64_t t;
		uint64_t v;
		int time = parse_time(f, fl, &t) == 0 ||
			   (fl >= 9 && parse_uint(f, fl, INT64_MAX, &v) == 0);
		if (time && ts < 0)
			ts = i;
		else if (!time && !is_number(f, fl) && n_other < 2)
			other[n_other++] = i;
	}
	if (ts < 0 || n_other < 2)
		return -1;
	ncf_error("%s:1: unknown format: '%s' is a line of data with no header (field %d is a "
		  "time); say which columns are which, counting from 1: --columns "
		  "user=%d,item=%d,time=%d",
		  p->display, ncf_escape(line, len, 80), ts + 1, other[0] + 1, other[1] + 1, ts + 1);
	return 0;
}

/* Can s be given to a shell as it is (no quotes needed)? */
static int shell_plain(const char *s)
{
	for (; *s; s++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,=-+/:@%",
			    *s))
			return 0;
	return 1;
}

/* The header's columns by their names (header_kind): a user, an item and
 * a timestamp column, each once.  Returns 0 or -1 (reported, with the
 * --columns that would read the file). */
static int columns_by_header(struct parser *p, const char *line, size_t len)
{
	int seen[5] = {0}, at[5] = {0};
	for (int i = 0; i < p->nfields; i++) {
		p->col[i] = header_kind(p->header[i]);
		if (p->col[i] != COL_IGNORE && seen[p->col[i]]++) {
			ncf_error("%s:1: column '%s' appears twice in the header", p->display,
				  p->header[i]);
			return -1;
		}
		at[p->col[i]] = i;
	}
	if (seen[COL_USER] && seen[COL_ITEM] && seen[COL_TS])
		return 0;
	if (data_not_header(p, line, len) == 0)
		return -1;
	/* the names header_kind knew (printable ASCII, no comma) as they are */
	char spec[256];
	snprintf(spec, sizeof spec, "user=%s,item=%s,time=%s",
		 seen[COL_USER] ? p->raw[at[COL_USER]] : "NAME",
		 seen[COL_ITEM] ? p->raw[at[COL_ITEM]] : "NAME", seen[COL_TS] ? p->raw[at[COL_TS]] : "NAME");
	ncf_error("%s:1: unknown format: the header '%s' does not name a user, an item and a "
		  "timestamp column (like userId,movieId,rating,timestamp); say which are which: "
		  "--columns %s%s%s",
		  p->display, ncf_escape(line, len, 80), shell_plain(spec) ? "" : "'", spec,
		  shell_plain(spec) ? "" : "'");
	return -1;
}

/* --columns: the kinds in the order of its keys (user, item, time,
 * rating) and their names in a SPEC. */
static const enum col_kind SPEC_KIND[] = {COL_USER, COL_ITEM, COL_TS, COL_RATING};
static const char *const SPEC_KEY[] = {"user", "item", "time", "rating"};

/* The key of --columns at s (up to '='): its index in SPEC_KEY, or -1.
 * "timestamp" is "time". */
static int spec_key(const char *s, size_t n)
{
	if (n == 9 && !memcmp(s, "timestamp", 9))
		return 2;
	for (int k = 0; k < 4; k++)
		if (strlen(SPEC_KEY[k]) == n && !memcmp(s, SPEC_KEY[k], n))
			return k;
	return -1;
}

/* One --columns entry: key k's column (s, n bytes: a name, or a number
 * from 1 into *number). */
struct spec_col {
	const char *name;
	size_t len;
	long number; /* 0: by name */
};

/* SPEC into its four entries (absent: len 0).  NULL, or what is wrong. */
static const char *spec_split(const char *spec, struct spec_col col[4])
{
	memset(col, 0, 4 * sizeof *col);
	const char *s = spec;
	while (*s) {
		const char *end = strchr(s, ','), *eq = strchr(s, '=');
		if (!end)
			end = s + strlen(s);
		if (!eq || eq > end)
			return "each entry is KEY=COLUMN (user=, item=, time=, rating=)";
		int k = spec_key(s, (size_t)(eq - s));
		if (k < 0)
			return "a key is not user, item, time or rating";
		if (col[k].len)
			return "a key is given twice";
		col[k].name = eq + 1;
		col[k].len = (size_t)(end - eq - 1);
		if (!col[k].len)
			return "a column is empty";
		char *num_end;
		long v = strtol(col[k].name, &num_end, 10);
		if (col[k].name[0] >= '0' && col[k].name[0] <= '9' && num_end == end)
			col[k].number = v;
		if (col[k].number && (v < 1 || v > MAX_FIELDS))
			return "a column number is not from 1 to 256";
		if (col[k].name[0] == '0' && num_end == end)
			return "a column number is not from 1 to 256";
		s = *end ? end + 1 : end;
	}
	if (!col[0].len || !col[1].len || !col[2].len)
		return "user=, item= and time= are needed";
	return NULL;
}

const char *prep_parse_columns_check(const char *spec)
{
	struct spec_col col[4];
	return spec_split(spec, col);
}

char prep_parse_delimiter(const char *v)
{
	if (!strcmp(v, "tab") || !strcmp(v, "\\t"))
		return '\t';
	if (strlen(v) != 1 || v[0] == '"' || v[0] == '\r' || v[0] == '\n' || v[0] == ' ')
		return 0;
	return v[0];
}

/* The index of the header's column named s (n bytes): exactly, else the
 * one column that matches without case.  -1 when none (or several). */
static int column_named(const struct parser *p, const char *s, size_t n)
{
	int found = -1, many = 0;
	for (int i = 0; i < p->nfields; i++)
		if (strlen(p->raw[i]) == n && !memcmp(p->raw[i], s, n))
			return i;
	for (int i = 0; i < p->nfields; i++)
		if (strlen(p->raw[i]) == n && !strncasecmp(p->raw[i], s, n)) {
			many += found >= 0;
			found = i;
		}
	return many ? -1 : found;
}

/* Is the text of field k of the first line a timestamp (parse_time or
 * Unix seconds)?  (With columns by number, a first line whose time field
 * is not one is a header.) */
static int field_is_time(const struct parser *p, int k)
{
	uint64_t v;
	int64_t t;
	const char *s = p->raw[k];
	return parse_uint(s, strlen(s), INT64_MAX, &v) == 0 || parse_time(s, strlen(s), &t) == 0 ||
	       parse_seconds(s, strlen(s), &t) == 0;
}

/* --columns over the first line's fields (p->raw, p->nfields): each
 * kind's column, by name in a header or by number.  Returns 1 when the
 * first line is a header, 0 when it is data, -1 (reported). */
static int columns_by_spec(struct parser *p, const char *line, size_t len)
{
	struct spec_col col[4];
	spec_split(p->opts->columns, col); /* checked by the option */
	int by_name = 0;
	for (int i = 0; i < p->nfields; i++)
		p->col[i] = COL_IGNORE;
	int at[4];
	for (int k = 0; k < 4; k++) {
		if (!col[k].len)
			continue;
		if (col[k].number) {
			at[k] = (int)col[k].number - 1;
			if (at[k] >= p->nfields) {
				ncf_error("%s:1: --columns %s=%ld, but the line has %d column%s: '%s'",
					  p->display, SPEC_KEY[k], col[k].number, p->nfields,
					  p->nfields == 1 ? "" : "s", ncf_escape(line, len, 60));
				return -1;
			}
		} else {
			by_name = 1;
			at[k] = column_named(p, col[k].name, col[k].len);
			if (at[k] < 0) {
				char name[80];
				snprintf(name, sizeof name, "%s", ncf_escape(col[k].name, col[k].len, 40));
				ncf_error("%s:1: --columns %s=%s: the header '%s' has no column of that "
					  "name (or several)",
					  p->display, SPEC_KEY[k], name, ncf_escape(line, len, 80));
				return -1;
			}
		}
		if (p->col[at[k]] != COL_IGNORE) {
			ncf_error("%s:1: --columns names column %d twice", p->display, at[k] + 1);
			return -1;
		}
		p->col[at[k]] = SPEC_KIND[k];
	}
	p->field = 0;
	p->header_match = 1;
	p->has_header = by_name || !field_is_time(p, at[2]);
	return p->has_header;
}

/* The hint for a first line no format reads: a line of data has no
 * header, and --columns says which of its columns are which. */
static void unknown_format(const struct parser *p, const char *first, size_t l0)
{
	char delim = 0;
	for (const char *d = ",;\t"; *d && !delim; d++)
		if (memchr(first, *d, l0))
			delim = *d;
	int fields = 1;
	for (size_t i = 0; i < l0; i++)
		fields += first[i] == delim;
	if (delim && l0 && first[0] >= '0' && first[0] <= '9' && fields >= 3) {
		ncf_error("%s:1: unknown format: '%s' is a line of data with no header; say which "
			  "columns are which, counting from 1: --columns user=1,item=2,time=%d%s",
			  p->display, ncf_escape(first, l0, 60), fields >= 4 ? 4 : 3,
			  delim == ',' ? "" : delim == ';' ? " --delimiter ';'" : " --delimiter tab");
		return;
	}
	ncf_error("%s:1: unknown format: '%s' is not a MovieLens ratings line or a CSV header "
		  "naming user, item and timestamp columns (--columns user=NAME,item=NAME,time=NAME "
		  "names them, --delimiter C sets the separator)",
		  p->display, ncf_escape(first, l0, 60));
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

/* How libcsv reads a file of format (a CSV's separator delim), and for a
 * generic CSV the maps of ids that may be text, and dates. */
static void set_reader(struct parser *p, struct csv_parser *cp, enum ncf_format format, char delim)
{
	p->delim = format == NCF_FORMAT_ML100K ? '\t' : format == NCF_FORMAT_CSV ? delim : ',';
	if (format == NCF_FORMAT_ML100K || (format == NCF_FORMAT_CSV && delim == '\t')) {
		csv_set_delim(cp, '\t');
		csv_set_space_func(cp, only_space);
	} else {
		csv_set_delim(cp, format == NCF_FORMAT_CSV ? (unsigned char)delim : ',');
		csv_set_space_func(cp, csv_space);
	}
	if (format == NCF_FORMAT_CSV) { /* ids may be text, times dates */
		p->user_keys = ncf_xmalloc(sizeof *p->user_keys);
		p->item_keys = ncf_xmalloc(sizeof *p->item_keys);
		ncf_idmap_init(p->user_keys);
		ncf_idmap_init(p->item_keys);
		p->dates = 1;
	}
}

/* The columns of a CSV (ml-20m's or a generic one) from its first line
 * (first, l0 bytes; ended: it has a line end) or --columns.  Returns 1
 * when that line is a header, 0 when it is data, -1 (reported). */
static int setup_columns(struct parser *p, struct csv_parser *cp, const char *first, size_t l0,
			 int ended)
{
	if (!ended && !p->opts->columns) {
		ncf_error("%s:1: no ratings after the header (and no line end: truncated file?)",
			  p->display);
		return -1;
	}
	if (setup_header(p, cp, first, l0) != 0)
		return -1;
	if (!p->opts->columns)
		return columns_by_header(p, first, l0) != 0 ? -1 : 1;
	int header = columns_by_spec(p, first, l0);
	if (header == 1 && !ended) {
		ncf_error("%s:1: no ratings after the header (and no line end: truncated file?)",
			  p->display);
		return -1;
	}
	return header;
}

/* The format from the first line (first, l0 bytes without its end, which
 * it had when ended), and the header when the format has one.  Returns 1
 * when the line was a header, 0 when it is data, -1 (reported). */
static int setup_format(struct parser *p, struct csv_parser *cp, enum ncf_format format,
			const char *first, size_t l0, int ended)
{
	char delim;
	enum ncf_format guess = detect(first, l0, &delim);
	if (p->opts->columns || p->opts->delimiter)
		format = NCF_FORMAT_CSV; /* the options say how to read it */
	if (p->opts->delimiter)
		delim = p->opts->delimiter;
	if (format == NCF_FORMAT_UNKNOWN)
		format = guess;
	if (format == NCF_FORMAT_UNKNOWN ||
	    (format == NCF_FORMAT_CSV && !p->opts->columns && l0 && first[0] >= '0' &&
	     first[0] <= '9')) {
		unknown_format(p, first, l0);
		return -1;
	}
	p->format = format;
	set_reader(p, cp, format, delim);
	if (format == NCF_FORMAT_ML20M &&
	    !(l0 == strlen(ML20M_HEADER) && !memcmp(first, ML20M_HEADER, l0))) {
		ncf_error("%s:1: expected the ml-20m header '%s', found '%s'", p->display,
			  ML20M_HEADER, ncf_escape(first, l0, 60));
		return -1;
	}
	if (format != NCF_FORMAT_ML20M && format != NCF_FORMAT_CSV) {
		fixed_columns(p);
		return 0;
	}
	return setup_columns(p, cp, first, l0, ended);
}

/* One data line s (len bytes, its end stripped) into the rows.  Returns 0
 * or -1 (reported). */
static int parse_line(struct parser *p, struct csv_parser *cp, const char *s, size_t len)
{
	if (ncf_lines_blank(s, len))
		return 0;
	uint64_t ended = p->rows_ended;
	if (p->format == NCF_FORMAT_ML1M) {
		parse_dat_line(p, s, len);
	} else if (csv_line(p, cp, s, len) != 0) {
		ncf_error("%s:%llu: malformed CSV: %s", p->display, (unsigned long long)p->line,
			  prep_csv_why(cp));
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
			  (unsigned long long)p->line, prep_csv_why(cp));
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

int prep_parse(FILE *fp, const char *display, const struct prep_parse_opts *o,
	       struct prep_rows *rows, struct prep_parse_info *info)
{
	struct parser p;
	memset(&p, 0, sizeof p);
	memset(info, 0, sizeof *info);
	p.display = display;
	p.rows = rows;
	p.header_match = 1;
	p.opts = o;
	struct csv_parser cp;
	prep_csv_init(&cp);
	struct ncf_lines l;
	ncf_lines_init_stream(&l, fp, display, MAX_LINE, BUF_SIZE);
	struct ncf_progress prog;
	ncf_progress_init(&prog, o->progress);
	struct stat st;
	if (fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode))
		l.total = (double)st.st_size;
	prog.unit = NCF_PROGRESS_BYTES;
	l.prog = &prog;
	l.crc_on = 1;
	l.keep_end = 1;
	p.lines = &l;
	int rc = parse_input(&p, &cp, &l, o->format);
	if (rows->failed)
		rc = -1; /* rows that could not spill (reported) */
	if (rc == 0) {
		info->format = p.format;
		info->bytes = l.bytes;
		info->crc = l.crc;
		info->lines = l.line;
		info->user_keys = p.user_keys;
		info->item_keys = p.item_keys;
		p.user_keys = p.item_keys = NULL;
	} else {
		prep_rows_free(rows); /* the rows before the bad one */
	}
	ncf_progress_clear(&prog);
	csv_free(&cp);
	for (int i = 0; i < MAX_FIELDS; i++) {
		free(p.header[i]);
		free(p.raw[i]);
	}
	struct prep_parse_info keys = {.user_keys = p.user_keys, .item_keys = p.item_keys};
	prep_parse_info_free(&keys);
	ncf_lines_free(&l);
	return rc;
}

void prep_parse_info_free(struct prep_parse_info *info)
{
	struct ncf_idmap **m[2] = {&info->user_keys, &info->item_keys};
	for (int k = 0; k < 2; k++)
		if (*m[k]) {
			ncf_idmap_free(*m[k]);
			free(*m[k]);
			*m[k] = NULL;
		}
}

/* One column's ids: index k of the rows holds key (*ids)[k] (in fact k:
 * the rows and the keys both number first appearances in row order), and
 * the key's id is the keys' (a number, or a name when the column has
 * any; the u32 ids of a named column are its indices). */
static void column_ids(struct ncf_idmap *keys, uint32_t n, uint32_t **ids,
		       struct ncf_names *names)
{
	uint32_t *key = *ids;
	if (ncf_idmap_named(keys)) {
		struct ncf_names all = {0};
		ncf_idmap_take_names(keys, &all);
		ncf_names_free(names);
		for (uint32_t k = 0; k < n; k++) {
			size_t len;
			const char *s = ncf_names_at(&all, key[k], &len);
			ncf_names_add(names, s, len);
			key[k] = k;
		}
		ncf_names_free(&all);
		return;
	}
	uint32_t *num = ncf_idmap_take_ids(keys);
	for (uint32_t k = 0; k < n; k++)
		key[k] = num[key[k]];
	free(num);
}

void prep_parse_ids(struct prep_parse_info *info, struct prep_rows *rows)
{
	if (info->user_keys)
		column_ids(info->user_keys, rows->n_users, &rows->user_ids, &rows->user_names);
	if (info->item_keys)
		column_ids(info->item_keys, rows->n_items, &rows->item_ids, &rows->item_names);
	prep_parse_info_free(info);
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
