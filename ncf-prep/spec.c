/*
 * spec.c - NVIDIA's feature spec with CSV sources (the PyTorch NCF's
 * "bring your own dataset", data/csv_conversion in its repository): a
 * split made elsewhere, given.h's second kind.
 *
 * The YAML (libyaml reads it; at most 1 MiB) is read as NVIDIA's
 * feature_spec.py, dataloading.py and transcode.py read it:
 *  - channel_spec: user_ch, item_ch, label_ch each list the feature of
 *    that channel (the first, as NVIDIA's loader takes);
 *  - feature_spec: the user and item features, each with a cardinality
 *    that is an integer (every id below it) or auto (none given);
 *  - metadata: test_samples_per_series, the rows of one user's series;
 *  - source_spec: the mappings train and test, each a list of chunks;
 *    a chunk (type csv) lists its features, the columns of its files in
 *    order, and its files, relative to the YAML's directory, whose rows
 *    follow one another (rows 1..i in the first file, i+1.. in the next);
 *    the chunks of a mapping hold its rows side by side, so a feature of
 *    the user, item and label may sit in different chunks, read in step.
 * The CSV files have no header; fields are separated by commas, spaces
 * around them ignored, quotes as RFC 4180; blank lines are skipped and
 * the last line may lack its line end (NVIDIA's own files end so).  Ids
 * are integers from 0 (the spec's ids are already indices), below the
 * cardinality when one is given; a label is 0 or 1 (written 0, 1, 0.0,
 * 1.0, ...).  Train rows labelled 1 are the training positives, those
 * labelled 0 explicit negatives.  Test rows come in series of
 * test_samples_per_series rows, one user's each, exactly one of them
 * labelled 1: its positive, the others its negative candidates in the
 * order given (given.c says the rules all given splits share).
 * Everything refused names the YAML's line or the CSV's file and line,
 * and what was expected.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "err.h"
#include "io.h"
#include "spec.h"

#ifndef NCF_HAVE_YAML

int prep_spec_available(void)
{
	return 0;
}

int prep_spec_read(const char *path, const struct prep_opener *op, struct prep_given *g)
{
	(void)op, (void)g;
	ncf_error("%s: this build reads no YAML (libyaml was not found when it was made: "
		  "apt-get install libyaml-dev, then make)",
		  path);
	return -3;
}

#else

#include <csv.h>
#include <yaml.h>

#include "lines.h"
#include "names.h"
#include "parse.h"

#define YAML_MAX (1u << 20) /* the largest feature spec */
#define BUF_SIZE (1u << 20) /* a CSV reader's buffer */

enum { F_USER, F_ITEM, F_LABEL };
static const char *const F_WHAT[] = {"a user id", "an item id", "a label"};
static const char *const F_NAME[] = {"user id", "item id", "label"};
static const char *const F_CHANNEL[] = {"user_ch", "item_ch", "label_ch"};

/* A CSV file the spec names, in the order it names them (for the CRC). */
struct spec_file {
	char *path;
	uint32_t crc;
	int read;
};

struct spec {
	const char *display; /* the YAML's name */
	char *dir;	     /* its directory, with a '/' (or "") */
	yaml_document_t doc;
	const char *feature[3];	 /* the user, item and label features */
	int64_t card[2];	 /* the user's and item's cardinality, -1: auto */
	uint64_t series;	 /* test_samples_per_series */
	struct spec_file *files; /* (n_files) */
	int n_files;
	uint32_t yaml_crc;
	const struct prep_opener *op;
	struct prep_given *g;
};

/* ---- the YAML --------------------------------------------------------- */

static yaml_node_t *node(struct spec *s, int i)
{
	return yaml_document_get_node(&s->doc, i);
}

static unsigned long line_of(const yaml_node_t *n)
{
	return (unsigned long)n->start_mark.line + 1;
}

static int bad(const struct spec *s, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(const struct spec *s, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ncf_error("%s:%lu: %s", s->display, n ? line_of(n) : 1ul, msg);
	return -1;
}

/* The text of a scalar node, NULL for another kind. */
static const char *text(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Is n a null (an empty plain scalar, ~ or null)? */
static int is_null(const yaml_node_t *n)
{
	const char *t = text(n);
	return t && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") ||
		!strcmp(t, "NULL"));
}

/* A node type in words. */
static const char *type_name(yaml_node_type_t type)
{
	return type == YAML_MAPPING_NODE ? "a mapping"
	       : type == YAML_SEQUENCE_NODE ? "a list"
					    : "a scalar";
}

static const char *kind(const yaml_node_t *n)
{
	return type_name(n->type);
}

/* The value of key in the mapping map (where names it in messages), of
 * type type: 0 and *out, 1 when absent (*out NULL), -1 after reporting
 * (a key given twice, a value of another kind). */
static int get(struct spec *s, yaml_node_t *map, const char *key, yaml_node_type_t type,
	       const char *where, yaml_node_t **out)
{
	*out = NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		const char *k = text(node(s, p->key));
		if (!k || strcmp(k, key))
			continue;
		if (*out)
			return bad(s, node(s, p->key), "%s: '%s' is given twice", where, key);
		*out = node(s, p->value);
	}
	if (!*out)
		return 1;
	if ((*out)->type != type && !(type == YAML_MAPPING_NODE && is_null(*out)))
		return bad(s, *out, "%s: '%s' is %s, expected %s", where, key, kind(*out),
			   type_name(type));
	return 0;
}

/* get, with the key required. */
static int need(struct spec *s, yaml_node_t *map, const char *key, yaml_node_type_t type,
		const char *where, yaml_node_t **out)
{
	int rc = get(s, map, key, type, where, out);
	if (rc == 1)
		return bad(s, map, "%s has no '%s'", where, key);
	return rc;
}

/* Item k of the list n, a scalar: its text, or NULL after reporting. */
static const char *item_text(struct spec *s, yaml_node_t *n, long k, const char *where)
{
	yaml_node_t *v = node(s, n->data.sequence.items.start[k]);
	const char *t = text(v);
	if (!t || !*t)
		bad(s, v, "%s: item %ld is %s, expected a name", where, k + 1,
		    t ? "empty" : kind(v));
	return t && *t ? t : NULL;
}

static long list_len(const yaml_node_t *n)
{
	return (long)(n->data.sequence.items.top - n->data.sequence.items.start);
}

/* A whole number from 0 to max in the scalar n (what names it); 0 or
 * -1 (reported). */
static int whole(struct spec *s, yaml_node_t *n, uint64_t min, uint64_t max, const char *what,
		 uint64_t *v)
{
	const char *t = text(n);
	uint64_t x = 0;
	int ok = t && *t && strlen(t) <= 20;
	for (const char *c = t; ok && *c; c++) {
		ok = *c >= '0' && *c <= '9' && x <= (UINT64_MAX - 9) / 10;
		x = x * 10 + (uint64_t)(*c - '0');
	}
	if (!ok || x < min || x > max)
		return bad(s, n, "%s is '%s', expected a whole number from %llu to %llu", what,
			   t ? ncf_escape(t, strlen(t), 40) : kind(n), (unsigned long long)min,
			   (unsigned long long)max);
	*v = x;
	return 0;
}

/* channel_spec: the feature of each channel. */
static int read_channels(struct spec *s, yaml_node_t *root)
{
	yaml_node_t *ch, *list;
	NCF_TRY(need(s, root, "channel_spec", YAML_MAPPING_NODE, "the feature spec", &ch));
	for (int f = 0; f < 3; f++) {
		NCF_TRY(need(s, ch, F_CHANNEL[f], YAML_SEQUENCE_NODE, "channel_spec", &list));
		if (list_len(list) < 1)
			return bad(s, list, "channel_spec: '%s' lists no feature", F_CHANNEL[f]);
		s->feature[f] = item_text(s, list, 0, F_CHANNEL[f]);
		if (!s->feature[f])
			return -1;
	}
	if (!strcmp(s->feature[0], s->feature[1]) || !strcmp(s->feature[0], s->feature[2]) ||
	    !strcmp(s->feature[1], s->feature[2]))
		return bad(s, ch, "channel_spec: user_ch, item_ch and label_ch name one feature "
				  "twice");
	return 0;
}

/* feature_spec: the user's and item's cardinality (auto, or absent: -1). */
static int read_features(struct spec *s, yaml_node_t *root)
{
	yaml_node_t *fs, *f, *c;
	NCF_TRY(need(s, root, "feature_spec", YAML_MAPPING_NODE, "the feature spec", &fs));
	if (is_null(fs))
		return bad(s, fs, "feature_spec is empty");
	for (int k = 0; k < 2; k++) {
		char where[300];
		snprintf(where, sizeof where, "feature_spec: '%s'", s->feature[k]);
		NCF_TRY(need(s, fs, s->feature[k], YAML_MAPPING_NODE, "feature_spec", &f));
		s->card[k] = -1;
		if (is_null(f))
			continue;
		int rc = get(s, f, "cardinality", YAML_SCALAR_NODE, where, &c);
		if (rc < 0)
			return -1;
		if (rc == 1 || !strcmp(text(c), "auto"))
			continue;
		uint64_t v;
		snprintf(where, sizeof where, "feature_spec: '%s': cardinality", s->feature[k]);
		NCF_TRY(whole(s, c, 1, (uint64_t)UINT32_MAX + 1, where, &v));
		s->card[k] = (int64_t)v;
	}
	return 0;
}

/* metadata: test_samples_per_series. */
static int read_metadata(struct spec *s, yaml_node_t *root)
{
	yaml_node_t *m, *n;
	NCF_TRY(need(s, root, "metadata", YAML_MAPPING_NODE, "the feature spec", &m));
	if (is_null(m))
		return bad(s, m, "metadata has no 'test_samples_per_series'");
	NCF_TRY(need(s, m, "test_samples_per_series", YAML_SCALAR_NODE, "metadata", &n));
	return whole(s, n, 2, (uint64_t)NCF_CACHE_MAX_NEGATIVES + 1,
		     "metadata: test_samples_per_series", &s->series);
}

/* The YAML read (through the opener) and parsed into s->doc, its root a
 * mapping.  0, or -1 (reported). */
static int load(struct spec *s, const char *path, yaml_node_t **root)
{
	const char *display;
	FILE *fp = s->op->open(s->op->ctx, path, &display);
	if (!fp)
		return -1;
	s->display = prep_given_file(s->g, display);
	char *buf = ncf_xmalloc(YAML_MAX + 1);
	size_t n = fread(buf, 1, YAML_MAX + 1, fp);
	int err = ferror(fp);
	s->op->close(s->op->ctx, fp);
	int rc = -1;
	yaml_parser_t p;
	if (err) {
		ncf_error("%s: read failed", s->display);
	} else if (n > YAML_MAX) {
		ncf_error("%s: more than 1 MiB: not a feature spec", s->display);
	} else if (memchr(buf, 0, n)) {
		ncf_error("%s: binary data (NUL bytes), not a feature spec", s->display);
	} else if (!yaml_parser_initialize(&p)) {
		ncf_out_of_memory("YAML parser");
	} else {
		s->yaml_crc = ncf_crc32c(0, buf, n);
		s->g->bytes += n;
		yaml_parser_set_input_string(&p, (const unsigned char *)buf, n);
		if (!yaml_parser_load(&p, &s->doc)) {
			/* a tab where libyaml stopped: YAML indents with spaces only */
			size_t at = p.problem_mark.index;
			int tab = at < n && buf[at] == '\t' && !(p.problem && strstr(p.problem, "tab"));
			ncf_error("%s:%lu:%lu: not YAML: %s%s%s%s", s->display,
				  (unsigned long)p.problem_mark.line + 1,
				  (unsigned long)p.problem_mark.column + 1,
				  p.problem ? p.problem : "a parse error", p.context ? " " : "",
				  p.context ? p.context : "",
				  tab ? " (a tab: YAML indents with spaces only)" : "");
			memset(&s->doc, 0, sizeof s->doc);
		} else {
			*root = yaml_document_get_root_node(&s->doc);
			if (!*root)
				ncf_error("%s: empty: no feature spec", s->display);
			else if ((*root)->type != YAML_MAPPING_NODE)
				bad(s, *root, "the feature spec is %s, expected a mapping (feature_spec, "
					      "source_spec, channel_spec, metadata)",
				    kind(*root));
			else
				rc = 0;
		}
		yaml_parser_delete(&p);
	}
	free(buf);
	return rc;
}

/* ---- the CSV files of a mapping, read in step --------------------------- */

/* One chunk: its features and files (nodes of the YAML), the columns of
 * those of the three features it holds, and its files' place in
 * s->files. */
struct chunk {
	yaml_node_t *node, *features, *files;
	int n_features;
	int col[3];	  /* the column of the user, item, label; -1: another chunk's */
	int first_file;	  /* in s->files */
};

/* A chunk's files, row by row. */
struct reader {
	struct spec *s;
	const struct chunk *ch;
	int file;	   /* the file open, -1 before the first */
	FILE *fp;
	struct ncf_lines l;
	struct csv_parser cp;
	int open;
	const char *display; /* the file's name */
	uint64_t line;	   /* of the current row */
	/* the current row, as libcsv gives it */
	int fields, rows;
	char *val[3];	   /* the three features' text (NUL-terminated) */
	size_t cap[3];
};

static void on_field(void *f, size_t len, void *data)
{
	struct reader *r = data;
	for (int k = 0; k < 3; k++)
		if (r->ch->col[k] == r->fields) {
			if (len + 1 > r->cap[k]) {
				r->cap[k] = len + 1;
				r->val[k] = ncf_xrealloc(r->val[k], r->cap[k]);
			}
			memcpy(r->val[k], f, len);
			r->val[k][len] = 0;
		}
	r->fields++;
}

static void on_row(int c, void *data)
{
	(void)c;
	((struct reader *)data)->rows++;
}

/* Close the file open (its CRC noted).  */
static void reader_close(struct reader *r)
{
	if (!r->open)
		return;
	struct spec_file *f = &r->s->files[r->ch->first_file + r->file];
	f->crc = r->l.crc;
	f->read = 1;
	r->s->g->bytes += r->l.bytes;
	ncf_lines_free(&r->l);
	csv_free(&r->cp);
	r->s->op->close(r->s->op->ctx, r->fp);
	r->open = 0;
}

/* The next file of the chunk opened: 1, 0 after the last, -1 (reported). */
static int reader_next_file(struct reader *r)
{
	reader_close(r);
	if (r->file + 1 >= list_len(r->ch->files))
		return 0;
	r->file++;
	struct spec_file *f = &r->s->files[r->ch->first_file + r->file];
	const char *display;
	r->fp = r->s->op->open(r->s->op->ctx, f->path, &display);
	if (!r->fp)
		return -1;
	r->display = prep_given_file(r->s->g, display);
	ncf_lines_init_stream(&r->l, r->fp, r->display, NCF_LINES_MAX, BUF_SIZE);
	r->l.keep_end = 1;
	r->l.crc_on = 1;
	prep_csv_init(&r->cp);
	r->open = 1;
	return 1;
}

/* The next row of the chunk into r->val: 1, 0 after its last file, -1
 * (reported: a line of another number of fields than the chunk has
 * features, a quote left open). */
static int reader_row(struct reader *r)
{
	for (;;) {
		if (!r->open) {
			int rc = reader_next_file(r);
			if (rc <= 0)
				return rc;
		}
		char *line;
		size_t len;
		int got = ncf_lines_next(&r->l, &line, &len);
		if (got < 0)
			return -1;
		if (got == 0) {
			reader_close(r);
			continue;
		}
		if (ncf_lines_blank(line, len))
			continue;
		r->line = r->l.line;
		r->fields = r->rows = 0;
		size_t all = len + r->l.eol;
		int bad_csv = csv_parse(&r->cp, line, all, on_field, on_row, r) != all;
		if (!bad_csv && !r->l.ended)
			bad_csv = csv_fini(&r->cp, on_field, on_row, r) != 0;
		if (bad_csv) {
			ncf_error("%s:%llu: malformed CSV: %s", r->display,
				  (unsigned long long)r->line, prep_csv_why(&r->cp));
			return -1;
		}
		if (r->rows != 1) {
			ncf_error("%s:%llu: unterminated quote (a field cannot span lines)",
				  r->display, (unsigned long long)r->line);
			return -1;
		}
		if (r->fields != r->ch->n_features) {
			ncf_error("%s:%llu: %d field%s, expected %d (the features of its chunk, %s:%lu)",
				  r->display, (unsigned long long)r->line, r->fields,
				  r->fields == 1 ? "" : "s", r->ch->n_features, r->s->display,
				  line_of(r->ch->node));
			return -1;
		}
		return 1;
	}
}

static void reader_free(struct reader *r)
{
	reader_close(r);
	for (int k = 0; k < 3; k++)
		free(r->val[k]);
}

/* ---- the mappings ----------------------------------------------------- */

/* The chunks of mapping name (train or test) into ch (*n of them, at most
 * max), and in their col the columns of the three features, each of
 * which must be in one chunk; their files into s->files.  0, or -1
 * (reported). */
static int read_chunks(struct spec *s, yaml_node_t *src, const char *name, struct chunk **out,
		       int *n)
{
	yaml_node_t *m;
	char where[64];
	snprintf(where, sizeof where, "source_spec: '%s'", name);
	NCF_TRY(need(s, src, name, YAML_SEQUENCE_NODE, "source_spec", &m));
	long chunks = list_len(m);
	if (chunks < 1)
		return bad(s, m, "%s lists no chunk", where);
	struct chunk *ch = ncf_xcalloc((size_t)chunks, sizeof *ch);
	*out = ch;
	*n = (int)chunks;
	int found[3] = {-1, -1, -1};
	for (long c = 0; c < chunks; c++) {
		yaml_node_t *cn = node(s, m->data.sequence.items.start[c]), *type;
		char cw[96];
		snprintf(cw, sizeof cw, "%s, chunk %ld", where, c + 1);
		ch[c].node = cn;
		if (cn->type != YAML_MAPPING_NODE)
			return bad(s, cn, "%s is %s, expected a mapping (type, features, files)", cw,
				   kind(cn));
		NCF_TRY(need(s, cn, "features", YAML_SEQUENCE_NODE, cw, &ch[c].features));
		NCF_TRY(need(s, cn, "files", YAML_SEQUENCE_NODE, cw, &ch[c].files));
		ch[c].n_features = (int)list_len(ch[c].features);
		ch[c].col[0] = ch[c].col[1] = ch[c].col[2] = -1;
		if (ch[c].n_features < 1)
			return bad(s, ch[c].features, "%s lists no feature", cw);
		for (int k = 0; k < ch[c].n_features; k++) {
			const char *f = item_text(s, ch[c].features, k, cw);
			if (!f)
				return -1;
			for (int j = 0; j < 3; j++) {
				if (strcmp(f, s->feature[j]))
					continue;
				if (found[j] >= 0)
					return bad(s, node(s, ch[c].features->data.sequence.items.start[k]),
						   "%s: feature '%s' is in two chunks (or twice in one)",
						   where, f);
				found[j] = (int)c;
				ch[c].col[j] = k;
			}
		}
		int wanted = ch[c].col[0] >= 0 || ch[c].col[1] >= 0 || ch[c].col[2] >= 0;
		NCF_TRY(need(s, cn, "type", YAML_SCALAR_NODE, cw, &type));
		if (wanted && strcmp(text(type), "csv"))
			return bad(s, type,
				   "%s: type '%s': ncf reads CSV chunks (the spec NVIDIA's transcode.py "
				   "reads, not the one it writes)",
				   cw, ncf_escape(text(type), strlen(text(type)), 40));
		if (wanted && list_len(ch[c].files) < 1)
			return bad(s, ch[c].files, "%s lists no file", cw);
		ch[c].first_file = s->n_files;
		for (long k = 0; wanted && k < list_len(ch[c].files); k++) {
			const char *f = item_text(s, ch[c].files, k, cw);
			if (!f)
				return -1;
			s->files = ncf_xrealloc(s->files, ((size_t)s->n_files + 1) * sizeof *s->files);
			size_t len = strlen(s->dir) + strlen(f) + 1;
			char *path = ncf_xmalloc(len);
			snprintf(path, len, "%s%s", f[0] == '/' ? "" : s->dir, f);
			s->files[s->n_files++] = (struct spec_file){path, 0, 0};
		}
	}
	for (int j = 0; j < 3; j++)
		if (found[j] < 0)
			return bad(s, m, "%s: no chunk holds feature '%s' (%s)", where, s->feature[j],
				   F_CHANNEL[j]);
	return 0;
}

/* The three values of a row (from the readers rd of the features) into
 * user, item and label.  0, or -1 (reported naming the file and line). */
static int row_values(struct spec *s, struct reader *const rd[3], uint32_t *user, uint32_t *item,
		      int *label)
{
	uint32_t *id[2] = {user, item};
	for (int k = 0; k < 2; k++) {
		const struct reader *r = rd[k];
		const char *t = r->val[k];
		if (!ncf_text_is_u32(t, strlen(t), id[k])) {
			ncf_error("%s:%llu: field %d: '%s' is not %s (expected an integer from 0: the "
				  "feature spec's ids are indices)",
				  r->display, (unsigned long long)r->line, r->ch->col[k] + 1,
				  ncf_escape(t, strlen(t), 40), F_WHAT[k]);
			return -1;
		}
		if (s->card[k] >= 0 && *id[k] >= s->card[k]) {
			ncf_error("%s:%llu: field %d: %s %u is not below the cardinality %lld of '%s' "
				  "(%s)",
				  r->display, (unsigned long long)r->line, r->ch->col[k] + 1, F_NAME[k],
				  *id[k], (long long)s->card[k], s->feature[k], s->display);
			return -1;
		}
	}
	const struct reader *r = rd[F_LABEL];
	const char *t = r->val[F_LABEL];
	char *end;
	double v = strtod(t, &end);
	int number = *t && *end == 0 && ((*t >= '0' && *t <= '9') || *t == '.' || *t == '+');
	if (!number || (v != 0 && v != 1)) {
		ncf_error("%s:%llu: field %d: '%s' is not a label (expected 0 or 1)", r->display,
			  (unsigned long long)r->line, r->ch->col[F_LABEL] + 1,
			  ncf_escape(t, strlen(t), 40));
		return -1;
	}
	*label = v == 1;
	return 0;
}

/* The readers of a mapping's chunks: rd[f] reads feature f. */
struct step {
	struct reader *r;  /* (n) one per chunk */
	int n;
	struct reader *rd[3];
};

static void step_init(struct step *st, struct spec *s, const struct chunk *ch, int n)
{
	st->n = n;
	st->r = ncf_xcalloc((size_t)n, sizeof *st->r);
	for (int c = 0; c < n; c++) {
		st->r[c] = (struct reader){.s = s, .ch = &ch[c], .file = -1};
		for (int f = 0; f < 3; f++)
			if (ch[c].col[f] >= 0)
				st->rd[f] = &st->r[c];
	}
}

static void step_free(struct step *st)
{
	for (int c = 0; c < st->n; c++)
		reader_free(&st->r[c]);
	free(st->r);
}

/* The next row of every chunk that holds one of the features, in step:
 * 1, 0 after the last, -1 (reported: chunks of unequal length). */
static int step_row(struct step *st)
{
	int got[3], rows = 0, wanted = 0;
	for (int c = 0; c < st->n; c++) {
		struct reader *r = &st->r[c];
		if (r != st->rd[0] && r != st->rd[1] && r != st->rd[2])
			continue;
		got[wanted] = reader_row(r);
		if (got[wanted] < 0)
			return -1;
		rows += got[wanted];
		wanted++;
	}
	if (rows == 0 || rows == wanted)
		return rows ? 1 : 0;
	for (int c = 0; c < st->n; c++) /* one ended: name where the other goes on */
		if (st->r[c].open) {
			ncf_error("%s:%llu: the chunks of one mapping have unequal lengths: this "
				  "chunk has a row where another's files have ended (%s:%lu)",
				  st->r[c].display, (unsigned long long)st->r[c].line, st->r[0].s->display,
				  line_of(st->r[c].ch->node));
			return -1;
		}
	ncf_error("%s: the chunks of one mapping have unequal lengths", st->r[0].s->display);
	return -1;
}

/* The train mapping into g.  0, or -1. */
static int read_train(struct spec *s, struct chunk *ch, int n)
{
	struct step st;
	step_init(&st, s, ch, n);
	int rc;
	while ((rc = step_row(&st)) > 0) {
		uint32_t u, i;
		int label;
		if ((rc = row_values(s, st.rd, &u, &i, &label)) != 0)
			break;
		/* a user's rows are named by the file and line of its user feature */
		if ((rc = prep_given_train(s->g, u, i, label, 0, st.rd[0]->display, st.rd[0]->line)) != 0)
			break;
	}
	step_free(&st);
	return rc < 0 ? -1 : prep_given_end_train(s->g, s->display);
}

/* One series (S rows: users, items, labels, lines of user's file) into
 * g: one user, exactly one positive.  0, or -1. */
static int series_end(struct spec *s, const char *file, const uint32_t *user,
		      const uint32_t *item, const int *label, const uint64_t *line, uint32_t *neg)
{
	uint64_t S = s->series;
	int pos = -1;
	for (uint64_t k = 0; k < S; k++) {
		if (user[k] != user[0]) {
			ncf_error("%s:%llu: user %u in the series of user %u that begins at line %llu "
				  "(test_samples_per_series %llu: a series is one user's candidates)",
				  file, (unsigned long long)line[k], user[k], user[0],
				  (unsigned long long)line[0], (unsigned long long)S);
			return -1;
		}
		if (label[k] && pos >= 0) {
			ncf_error("%s:%llu: a second positive (label 1) in the series of user %u that "
				  "begins at line %llu (expected exactly one)",
				  file, (unsigned long long)line[k], user[0], (unsigned long long)line[0]);
			return -1;
		}
		if (label[k])
			pos = (int)k;
	}
	if (pos < 0) {
		ncf_error("%s:%llu: the series of user %u (lines %llu to %llu) has no positive "
			  "(label 1; expected exactly one)",
			  file, (unsigned long long)line[0], user[0], (unsigned long long)line[0],
			  (unsigned long long)line[S - 1]);
		return -1;
	}
	uint32_t n = 0;
	for (uint64_t k = 0; k < S; k++)
		if ((int)k != pos)
			neg[n++] = item[k];
	return prep_given_series(s->g, user[0], item[pos], neg, n, file, line[0]);
}

/* The test mapping into g's series.  0, or -1. */
static int read_test(struct spec *s, struct chunk *ch, int n)
{
	size_t S = (size_t)s->series;
	uint32_t *user = ncf_xmalloc(S * sizeof *user), *item = ncf_xmalloc(S * sizeof *item);
	uint32_t *neg = ncf_xmalloc(S * sizeof *neg);
	int *label = ncf_xmalloc(S * sizeof *label);
	uint64_t *line = ncf_xmalloc(S * sizeof *line);
	struct step st;
	step_init(&st, s, ch, n);
	size_t k = 0;
	int rc;
	const char *first_file = NULL;
	while ((rc = step_row(&st)) > 0) {
		if ((rc = row_values(s, st.rd, &user[k], &item[k], &label[k])) != 0)
			break;
		line[k] = st.rd[0]->line;
		if (k == 0)
			first_file = st.rd[0]->display;
		if (++k == S) {
			if ((rc = series_end(s, first_file, user, item, label, line, neg)) != 0)
				break;
			k = 0;
		}
	}
	if (rc == 0 && k) {
		ncf_error("%s:%llu: the last series has %zu row%s, expected %zu "
			  "(test_samples_per_series, %s)",
			  st.rd[0]->display, (unsigned long long)line[0], k, k == 1 ? "" : "s", S,
			  s->display);
		rc = -1;
	}
	if (rc == 0 && s->g->series == 0) {
		ncf_error("%s: the test mapping has no rows", s->display);
		rc = -1;
	}
	step_free(&st);
	free(user), free(item), free(neg), free(label), free(line);
	return rc < 0 ? -1 : prep_given_end_test(s->g, s->display);
}

/* The directory of path, with its '/' ("" for none), into s->dir. */
static void set_dir(struct spec *s, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) + 1 : 0;
	s->dir = ncf_xmalloc(n + 1);
	memcpy(s->dir, path, n);
	s->dir[n] = 0;
}

int prep_spec_available(void)
{
	return 1;
}

int prep_spec_read(const char *path, const struct prep_opener *op, struct prep_given *g)
{
	struct spec s = {.op = op, .g = g};
	set_dir(&s, path);
	yaml_node_t *root = NULL, *src;
	struct chunk *train = NULL, *test = NULL;
	int n_train = 0, n_test = 0;
	int rc = load(&s, path, &root);
	if (rc == 0)
		rc = read_channels(&s, root);
	if (rc == 0)
		rc = read_features(&s, root);
	if (rc == 0)
		rc = read_metadata(&s, root);
	if (rc == 0)
		rc = need(&s, root, "source_spec", YAML_MAPPING_NODE, "the feature spec", &src);
	if (rc == 0 && is_null(src))
		rc = bad(&s, src, "source_spec is empty");
	if (rc == 0)
		rc = read_chunks(&s, src, "train", &train, &n_train);
	if (rc == 0)
		rc = read_chunks(&s, src, "test", &test, &n_test);
	if (rc == 0)
		rc = read_train(&s, train, n_train);
	if (rc == 0)
		rc = read_test(&s, test, n_test);
	if (rc == 0) { /* the CRC of the YAML's and each file's CRC, in the spec's order */
		unsigned char b[4];
		ncf_put_u32(b, s.yaml_crc);
		g->crc = ncf_crc32c(0, b, 4);
		for (int k = 0; k < s.n_files; k++) {
			ncf_put_u32(b, s.files[k].crc);
			g->crc = ncf_crc32c(g->crc, b, 4);
		}
	}
	free(train);
	free(test);
	for (int k = 0; k < s.n_files; k++)
		free(s.files[k].path);
	free(s.files);
	free(s.dir);
	yaml_document_delete(&s.doc);
	return rc;
}

#endif
