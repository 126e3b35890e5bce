/*
 * safetensors.c - NeuMF in safetensors with NVIDIA's state_dict names; see
 * safetensors.h and ncf-model(5).
 *
 * The file (the safetensors format, all integers little-endian):
 *
 *   offset   bytes  contents
 *   0        8      u64 N, the length of the header
 *   8        N      the header: a JSON object, padded with spaces so that
 *                   8 + N is a multiple of 8
 *   8 + N    D      the data: each tensor's elements, row-major, at
 *                   [begin, end) of data_offsets, relative to byte 8 + N
 *
 * The header maps each tensor name to {"dtype", "shape", "data_offsets"},
 * and the optional key "__metadata__" to an object of strings.  The data
 * must be exactly the tensors: no overlaps, no holes, nothing after the
 * last one.  ncf reads and writes dtype F32 only.
 *
 * The tensors, NVIDIA's NeuMF (U users, I items, F factors, M = H_0 / 2,
 * L hidden layers of H_1 .. H_L), in the order ncf writes them, which is
 * model.h's parameter layout, so the data is ncf's parameter vector as is:
 *
 *   mf_user_embed.weight   [U, F]          gmf_user
 *   mf_item_embed.weight   [I, F]          gmf_item
 *   mlp_user_embed.weight  [U, M]          mlp_user
 *   mlp_item_embed.weight  [I, M]          mlp_item
 *   mlp.K.weight           [H_K+1, H_K]    W_K+1 (K = 0 .. L-1; nn.Linear's
 *   mlp.K.bias             [H_K+1]         b_K+1  [out, in])
 *   final.weight           [1, F + H_L]    w (the GMF part first)
 *   final.bias             [1]             b
 *
 * Row r of an embedding is ncf's dense index r, the order of first
 * appearance in the ratings file, which is also NVIDIA's (pd.factorize).
 *
 * __metadata__ as ncf writes it (a reader takes what is there; without
 * it, the shape comes from the tensors, the hyperparameters are NVIDIA's
 * defaults and the model has no original ids):
 *
 *   format          "pt" (what safetensors.torch writes)
 *   ncf.version     the writer's version
 *   ncf.users, ncf.items, ncf.factors   U, I, F in decimal
 *   ncf.layers      "H_0,H_1,...,H_L", as ncf-train --layers
 *   ncf.lr, ncf.beta1, ncf.beta2, ncf.eps, ncf.dropout   the shortest %g that
 *                   reads back as the same float
 *   ncf.negatives, ncf.true_negatives, ncf.batch, ncf.seed   decimal
 *   ncf.user_ids    the original id of each row of the user tables, in row
 *   ncf.item_ids    order: comma-separated, a run of consecutive ids
 *                   written first-last ("1-3,7" is 1,2,3,7)
 *
 * The tiny model of ncf-model(5)'s worked example (ncf-prep --synthetic
 * tiny; 50 users, 197 items, F = 4, layers 8,4), ncf-infer --export:
 *
 *   00000000: 8006 0000 0000 0000 7b22 5f5f 6d65 7461  ........{"__meta
 *   00000010: 6461 7461 5f5f 223a 7b22 666f 726d 6174  data__":{"format
 *   00000020: 223a 2270 7422 2c22 6e63 662e 7665 7273  ":"pt","ncf.vers
 *
 * N = 0x680 = 1664, the header ending in
 *   ...,"final.bias":{"dtype":"F32","shape":[1],"data_offsets":[8080,8084]}}
 * and five spaces; the data at byte 1672 is the 2021 parameters (8084
 * bytes); the file has 9756 bytes.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "cli.h"
#include "err.h"
#include "io.h"
#include "safetensors.h"

/* ------------------------------------------------------------ the tensors */

/* Slots: the tensors in layout order.  4 embeddings, then weight and bias
 * of up to NCF_MAX_LAYERS - 1 hidden layers, then the head. */
#define MAX_HIDDEN (NCF_MAX_LAYERS - 1)
#define SLOT_MLP 4
#define SLOT_FINAL_W (SLOT_MLP + 2 * MAX_HIDDEN)
#define SLOT_FINAL_B (SLOT_FINAL_W + 1)
#define N_SLOTS (SLOT_FINAL_B + 1)
#define MAX_RANK 8

static const char *const EMBED_NAMES[4] = {"mf_user_embed.weight", "mf_item_embed.weight",
					   "mlp_user_embed.weight", "mlp_item_embed.weight"};

static void slot_name(int slot, char *buf, size_t n)
{
	if (slot < SLOT_MLP)
		snprintf(buf, n, "%s", EMBED_NAMES[slot]);
	else if (slot < SLOT_FINAL_W)
		snprintf(buf, n, "mlp.%d.%s", (slot - SLOT_MLP) / 2,
			 (slot - SLOT_MLP) % 2 ? "bias" : "weight");
	else
		snprintf(buf, n, "final.%s", slot == SLOT_FINAL_W ? "weight" : "bias");
}

/* The slot of a tensor name (len bytes, may hold NULs), or -1. */
static int name_slot(const char *s, size_t len)
{
	for (int k = 0; k < 4; k++)
		if (len == strlen(EMBED_NAMES[k]) && !memcmp(s, EMBED_NAMES[k], len))
			return k;
	if (len == 12 && !memcmp(s, "final.weight", 12))
		return SLOT_FINAL_W;
	if (len == 10 && !memcmp(s, "final.bias", 10))
		return SLOT_FINAL_B;
	if (len > 4 && !memcmp(s, "mlp.", 4)) {
		/* mlp.K.weight, mlp.K.bias: K in decimal as PyTorch writes it */
		size_t i = 4;
		unsigned k = 0;
		if (s[i] == '0' && i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '9')
			return -1;
		size_t d0 = i;
		while (i < len && s[i] >= '0' && s[i] <= '9' && i - d0 < 3)
			k = k * 10 + (unsigned)(s[i++] - '0');
		if (i == d0 || k >= MAX_HIDDEN)
			return -1;
		if (len - i == 7 && !memcmp(s + i, ".weight", 7))
			return SLOT_MLP + 2 * (int)k;
		if (len - i == 5 && !memcmp(s + i, ".bias", 5))
			return SLOT_MLP + 2 * (int)k + 1;
	}
	return -1;
}

/* Where slot's tensor lives in the layout, and its length in floats. */
static void slot_place(const struct ncf_shape *s, const struct ncf_layout *L, int slot,
		       size_t *off, size_t *len)
{
	size_t U = s->users, I = s->items, F = s->factors, M = ncf_shape_m(s);
	if (slot < SLOT_MLP) {
		size_t o[4] = {L->gmf_user, L->gmf_item, L->mlp_user, L->mlp_item};
		size_t n[4] = {U * F, I * F, U * M, I * M};
		*off = o[slot];
		*len = n[slot];
	} else if (slot < SLOT_FINAL_W) {
		uint32_t k = (uint32_t)(slot - SLOT_MLP) / 2 + 1;
		int bias = (slot - SLOT_MLP) % 2;
		*off = bias ? L->b[k] : L->w[k];
		*len = bias ? s->layers[k] : (size_t)s->layers[k] * s->layers[k - 1];
	} else if (slot == SLOT_FINAL_W) {
		*off = L->head_w;
		*len = F + ncf_shape_last(s);
	} else {
		*off = L->head_b;
		*len = 1;
	}
}

/* Does the shape have the tensor of this slot? */
static int slot_used(const struct ncf_shape *s, int slot)
{
	return slot < SLOT_MLP || slot >= SLOT_FINAL_W ||
	       (uint32_t)(slot - SLOT_MLP) / 2 < ncf_shape_hidden(s);
}

/* The shape of slot's tensor as PyTorch has it; returns the rank. */
static int slot_dims(const struct ncf_shape *s, int slot, uint64_t *d)
{
	size_t off, len;
	struct ncf_layout L;
	ncf_layout_make(s, &L);
	slot_place(s, &L, slot, &off, &len);
	if (slot < SLOT_MLP) {
		d[0] = slot % 2 ? s->items : s->users;
		d[1] = len / d[0];
		return 2;
	}
	if (slot == SLOT_FINAL_B)
		return d[0] = 1, 1;
	if (slot == SLOT_FINAL_W)
		return d[0] = 1, d[1] = len, 2;
	uint32_t k = (uint32_t)(slot - SLOT_MLP) / 2 + 1;
	d[0] = s->layers[k];
	if ((slot - SLOT_MLP) % 2)
		return 1;
	d[1] = s->layers[k - 1];
	return 2;
}

/* ---------------------------------------------------------------- writer */

struct sbuf {
	char *s;
	size_t n, cap;
};

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int w = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (w >= 0 && (size_t)w < b->cap - b->n) {
			b->n += (size_t)w;
			return;
		}
		b->cap = b->cap * 2 + (w > 0 ? (size_t)w : 0) + 64;
		b->s = ncf_xrealloc(b->s, b->cap);
	}
}

/* ids (n) as runs of consecutive ids: "1-3,7". */
static void sb_ids(struct sbuf *b, const uint32_t *ids, size_t n)
{
	for (size_t k = 0; k < n;) {
		size_t e = k;
		while (e + 1 < n && ids[e] != UINT32_MAX && ids[e + 1] == ids[e] + 1)
			e++;
		if (e == k)
			sb_add(b, "%s%u", k ? "," : "", ids[k]);
		else
			sb_add(b, "%s%u-%u", k ? "," : "", ids[k], ids[e]);
		k = e + 1;
	}
}

/* The shortest %g that reads back as f. */
static const char *fmt_float(char *buf, size_t n, float f)
{
	for (int p = 6; p <= 9; p++) {
		snprintf(buf, n, "%.*g", p, (double)f);
		if (strtof(buf, NULL) == f)
			break;
	}
	return buf;
}

/* The file: the header's length (8 bytes, little-endian), the header
 * (n bytes), then the parameter vector as it is (a little-endian host).
 * Returns 0 or -1 (reported). */
static int st_write_file(struct ncf_out *o, const char *header, size_t n, const float *params,
			 size_t total)
{
	unsigned char len8[8];
	ncf_put_u64(len8, n);
	NCF_WRITE_TRY(o->display, ncf_write_full(o->fp, len8, 8));
	NCF_WRITE_TRY(o->display, ncf_write_full(o->fp, header, n));
	NCF_WRITE_TRY(o->display, ncf_write_full(o->fp, params, total * sizeof(float)));
	return 0;
}

int ncf_safetensors_write(const struct ncf_model *m, const char *path)
{
	const struct ncf_shape *s = &m->shape;
	const struct ncf_hparams *h = &m->hp;
	struct ncf_layout L;
	ncf_layout_make(s, &L);
	struct sbuf b = {ncf_xmalloc(4096), 0, 4096};
	sb_add(&b, "{\"__metadata__\":{\"format\":\"pt\",\"ncf.version\":\"%s\","
		   "\"ncf.users\":\"%u\",\"ncf.items\":\"%u\",\"ncf.factors\":\"%u\",\"ncf.layers\":\"",
	       NCF_VERSION, s->users, s->items, s->factors);
	for (uint32_t k = 0; k < s->n_layers; k++)
		sb_add(&b, "%s%u", k ? "," : "", s->layers[k]);
	char f[5][24];
	sb_add(&b, "\",\"ncf.lr\":\"%s\",\"ncf.beta1\":\"%s\",\"ncf.beta2\":\"%s\","
		   "\"ncf.eps\":\"%s\",\"ncf.dropout\":\"%s\",\"ncf.negatives\":\"%u\","
		   "\"ncf.true_negatives\":\"%u\",\"ncf.batch\":\"%llu\",\"ncf.seed\":\"%llu\"",
	       fmt_float(f[0], 24, h->lr), fmt_float(f[1], 24, h->beta1),
	       fmt_float(f[2], 24, h->beta2), fmt_float(f[3], 24, h->eps),
	       fmt_float(f[4], 24, h->dropout), h->negatives, h->true_neg,
	       (unsigned long long)h->batch, (unsigned long long)h->seed);
	if (m->user_ids && m->item_ids) {
		sb_add(&b, ",\"ncf.user_ids\":\"");
		sb_ids(&b, m->user_ids, s->users);
		sb_add(&b, "\",\"ncf.item_ids\":\"");
		sb_ids(&b, m->item_ids, s->items);
		sb_add(&b, "\"");
	}
	sb_add(&b, "}");
	for (int slot = 0; slot < N_SLOTS; slot++) {
		if (!slot_used(s, slot))
			continue;
		char name[32];
		uint64_t d[2];
		size_t off, len;
		slot_name(slot, name, sizeof name);
		int rank = slot_dims(s, slot, d);
		slot_place(s, &L, slot, &off, &len);
		sb_add(&b, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%llu", name,
		       (unsigned long long)d[0]);
		if (rank == 2)
			sb_add(&b, ",%llu", (unsigned long long)d[1]);
		sb_add(&b, "],\"data_offsets\":[%zu,%zu]}", 4 * off, 4 * (off + len));
	}
	sb_add(&b, "}");
	while ((8 + b.n) % 8)
		sb_add(&b, " ");
	if (b.n > NCF_ST_MAX_HEADER) {
		ncf_error("%s: the safetensors header would be %zu bytes (the ids), over the format's "
			  "limit of %u",
			  path ? path : "<stdout>", b.n, NCF_ST_MAX_HEADER);
		free(b.s);
		return -1;
	}
	struct ncf_out o;
	if (ncf_out_open(&o, path, 1) != 0) {
		free(b.s);
		return -1;
	}
	int bad = st_write_file(&o, b.s, b.n, m->params, L.total);
	free(b.s);
	if (bad) {
		ncf_out_abort(&o);
		return -1;
	}
	return ncf_out_commit(&o);
}

/* ------------------------------------------------------------ JSON header */

struct tensor {
	int present;
	char dtype[16];
	int rank;
	uint64_t dims[MAX_RANK];
	uint64_t begin, end;
};

struct meta {
	char *key, *val;
	size_t klen, vlen;
};

struct header {
	struct tensor t[N_SLOTS];
	struct meta *meta;
	size_t n_meta;
	int has_meta;
};

struct jp {
	const unsigned char *s;
	size_t n, i;
	const char *display;
	char ctx[96]; /* "tensor 'x'", "__metadata__" or "" (the top level) */
};

/* Bad JSON at the current byte (of the file). */
static int jfail(struct jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jfail(struct jp *j, const char *fmt, ...)
{
	char what[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	ncf_error("%s: header: bad JSON at byte %zu%s%s: %s", j->display, 8 + j->i,
		  j->ctx[0] ? " in " : "", j->ctx, what);
	return -1;
}

/* Good JSON that is not what safetensors says, in the current context. */
static int jbad(struct jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jbad(struct jp *j, const char *fmt, ...)
{
	char what[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	ncf_error("%s: %s: %s", j->display, j->ctx[0] ? j->ctx : "header", what);
	return -1;
}

static void jws(struct jp *j)
{
	while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' ||
			       j->s[j->i] == '\r'))
		j->i++;
}

/* The next character after white space, or -1 at the end. */
static int jpeek(struct jp *j)
{
	jws(j);
	return j->i < j->n ? j->s[j->i] : -1;
}

static int jexpect(struct jp *j, char c, const char *where)
{
	if (jpeek(j) != c)
		return jfail(j, "expected '%c' %s", c, where);
	j->i++;
	return 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int jhex4(struct jp *j, unsigned *v)
{
	if (j->n - j->i < 4)
		return -1;
	*v = 0;
	for (int k = 0; k < 4; k++) {
		int h = hexval(j->s[j->i + (size_t)k]);
		if (h < 0)
			return -1;
		*v = *v << 4 | (unsigned)h;
	}
	j->i += 4;
	return 0;
}

/* A string into a new NUL-terminated buffer (*out, *len; *out may be NULL
 * to skip it).  The header was checked to be UTF-8 before. */
static int jstring(struct jp *j, char **out, size_t *len)
{
	if (jpeek(j) != '"')
		return jfail(j, "expected a string");
	size_t start = ++j->i;
	char *d = out ? ncf_xmalloc(j->n - start + 1) : NULL;
	size_t o = 0;
	for (;;) {
		if (j->i >= j->n) {
			free(d);
			j->i = start - 1;
			return jfail(j, "a string that does not end");
		}
		unsigned char c = j->s[j->i];
		if (c == '"') {
			j->i++;
			break;
		}
		if (c < 0x20) {
			free(d);
			return jfail(j, "a control character in a string");
		}
		if (c != '\\') {
			if (d)
				d[o] = (char)c;
			o++;
			j->i++;
			continue;
		}
		j->i++;
		int e = j->i < j->n ? j->s[j->i++] : -1;
		const char *simple = e > 0 ? strchr("\"\\/bfnrt", e) : NULL;
		if (simple) {
			static const char to[] = "\"\\/\b\f\n\r\t";
			if (d)
				d[o] = to[simple - "\"\\/bfnrt"];
			o++;
			continue;
		}
		unsigned u, lo;
		if (e != 'u' || jhex4(j, &u) != 0) {
			free(d);
			return jfail(j, "a bad escape in a string");
		}
		if (u >= 0xDC00 && u <= 0xDFFF) {
			free(d);
			return jfail(j, "a lone low surrogate in a string");
		}
		if (u >= 0xD800 && u <= 0xDBFF) {
			if (j->n - j->i < 2 || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u' ||
			    (j->i += 2, jhex4(j, &lo) != 0) || lo < 0xDC00 || lo > 0xDFFF) {
				free(d);
				return jfail(j, "a high surrogate without its low half");
			}
			u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
		}
		/* UTF-8: never longer than the escape it replaces */
		unsigned char enc[4];
		int ne;
		if (u < 0x80)
			enc[0] = (unsigned char)u, ne = 1;
		else if (u < 0x800)
			enc[0] = (unsigned char)(0xC0 | u >> 6), enc[1] = (unsigned char)(0x80 | (u & 63)),
			ne = 2;
		else if (u < 0x10000)
			enc[0] = (unsigned char)(0xE0 | u >> 12),
			enc[1] = (unsigned char)(0x80 | (u >> 6 & 63)),
			enc[2] = (unsigned char)(0x80 | (u & 63)), ne = 3;
		else
			enc[0] = (unsigned char)(0xF0 | u >> 18),
			enc[1] = (unsigned char)(0x80 | (u >> 12 & 63)),
			enc[2] = (unsigned char)(0x80 | (u >> 6 & 63)),
			enc[3] = (unsigned char)(0x80 | (u & 63)), ne = 4;
		if (d)
			memcpy(d + o, enc, (size_t)ne);
		o += (size_t)ne;
	}
	if (d) {
		d[o] = 0;
		*out = d;
	}
	if (len)
		*len = o;
	return 0;
}

/* A non-negative integer without fraction or exponent.  0 or -1 (not
 * reported: the caller names the field). */
static int juint(struct jp *j, uint64_t *v)
{
	jws(j);
	size_t i = j->i;
	if (i >= j->n || j->s[i] < '0' || j->s[i] > '9')
		return -1;
	if (j->s[i] == '0' && i + 1 < j->n && j->s[i + 1] >= '0' && j->s[i + 1] <= '9')
		return -1;
	uint64_t x = 0;
	while (i < j->n && j->s[i] >= '0' && j->s[i] <= '9') {
		unsigned dg = (unsigned)(j->s[i] - '0');
		if (x > (UINT64_MAX - dg) / 10)
			return -1;
		x = x * 10 + dg;
		i++;
	}
	if (i < j->n && (j->s[i] == '.' || j->s[i] == 'e' || j->s[i] == 'E'))
		return -1;
	j->i = i;
	*v = x;
	return 0;
}

/* Skip any JSON value (depth-limited). */
static int jskip(struct jp *j, int depth)
{
	if (depth > 64)
		return jfail(j, "values nested more than 64 deep");
	int c = jpeek(j);
	if (c == '"')
		return jstring(j, NULL, NULL);
	if (c == '{' || c == '[') {
		char close = c == '{' ? '}' : ']';
		j->i++;
		if (jpeek(j) == close)
			return j->i++, 0;
		for (;;) {
			if (c == '{' && (jstring(j, NULL, NULL) || jexpect(j, ':', "after a key")))
				return -1;
			if (jskip(j, depth + 1))
				return -1;
			int d = jpeek(j);
			j->i++;
			if (d == close)
				return 0;
			if (d != ',') {
				j->i--;
				return jfail(j, "expected ',' or '%c'", close);
			}
		}
	}
	static const char *const words[] = {"true", "false", "null"};
	for (int k = 0; k < 3; k++) {
		size_t wl = strlen(words[k]);
		if (j->n - j->i >= wl && !memcmp(j->s + j->i, words[k], wl)) {
			j->i += wl;
			return 0;
		}
	}
	/* a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
	size_t i = j->i;
	if (i < j->n && j->s[i] == '-')
		i++;
	size_t d0 = i;
	while (i < j->n && j->s[i] >= '0' && j->s[i] <= '9')
		i++;
	if (i == d0 || (j->s[d0] == '0' && i - d0 > 1))
		return jfail(j, "expected a value");
	if (i < j->n && j->s[i] == '.') {
		size_t f0 = ++i;
		while (i < j->n && j->s[i] >= '0' && j->s[i] <= '9')
			i++;
		if (i == f0)
			return jfail(j, "a number without digits after '.'");
	}
	if (i < j->n && (j->s[i] == 'e' || j->s[i] == 'E')) {
		i++;
		if (i < j->n && (j->s[i] == '+' || j->s[i] == '-'))
			i++;
		size_t e0 = i;
		while (i < j->n && j->s[i] >= '0' && j->s[i] <= '9')
			i++;
		if (i == e0)
			return jfail(j, "a number without exponent digits");
	}
	j->i = i;
	return 0;
}

/* Length of the valid UTF-8 prefix of s (n): n when all of it is. */
static size_t utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t k;
		unsigned min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			k = 1, min = 0x80, c &= 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			k = 2, min = 0x800, c &= 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			k = 3, min = 0x10000, c &= 0x07;
		} else {
			return i;
		}
		if (n - i <= k)
			return i;
		for (size_t q = 1; q <= k; q++) {
			if ((s[i + q] & 0xC0) != 0x80)
				return i;
			c = c << 6 | (s[i + q] & 0x3F);
		}
		if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			return i;
		i += k + 1;
	}
	return n;
}

static int parse_metadata(struct jp *j, struct header *h)
{
	if (h->has_meta)
		return jbad(j, "'__metadata__' appears twice");
	h->has_meta = 1;
	if (jpeek(j) != '{')
		return jbad(j, "'__metadata__' must be an object of strings");
	j->i++;
	if (jpeek(j) == '}')
		return j->i++, 0;
	size_t cap = 0;
	for (;;) {
		struct meta e = {0};
		if (jstring(j, &e.key, &e.klen))
			return -1;
		for (size_t k = 0; k < h->n_meta; k++)
			if (h->meta[k].klen == e.klen && !memcmp(h->meta[k].key, e.key, e.klen)) {
				int r = jbad(j, "key '%s' appears twice",
					      ncf_escape(e.key, e.klen, 60));
				free(e.key);
				return r;
			}
		if (jexpect(j, ':', "after a key")) {
			free(e.key);
			return -1;
		}
		if (jpeek(j) != '"') {
			int r = jbad(j, "the value of '%s' is not a string",
				      ncf_escape(e.key, e.klen, 60));
			free(e.key);
			return r;
		}
		if (jstring(j, &e.val, &e.vlen)) {
			free(e.key);
			return -1;
		}
		if (h->n_meta == cap) {
			cap = cap ? 2 * cap : 16;
			h->meta = ncf_xrealloc(h->meta, cap * sizeof *h->meta);
		}
		h->meta[h->n_meta++] = e;
		int d = jpeek(j);
		j->i++;
		if (d == '}')
			return 0;
		if (d != ',') {
			j->i--;
			return jfail(j, "expected ',' or '}' in __metadata__");
		}
	}
}

/* One tensor's entry: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}. */
static int parse_tensor(struct jp *j, struct tensor *t)
{
	if (jexpect(j, '{', "to open the tensor's entry"))
		return -1;
	int got_dtype = 0, got_shape = 0, got_off = 0;
	if (jpeek(j) != '}')
		for (;;) {
			char *key;
			size_t klen;
			if (jstring(j, &key, &klen))
				return -1;
			int which = !strcmp(key, "dtype") ? 1 : !strcmp(key, "shape") ? 2
					: !strcmp(key, "data_offsets") ? 3 : 0;
			free(key);
			if (jexpect(j, ':', "after a key"))
				return -1;
			if ((which == 1 && got_dtype) || (which == 2 && got_shape) ||
			    (which == 3 && got_off))
				return jbad(j, "a field appears twice");
			if (which == 1) {
				char *dt;
				size_t dl;
				if (jstring(j, &dt, &dl))
					return -1;
				snprintf(t->dtype, sizeof t->dtype, "%s",
					 dl < sizeof t->dtype ? ncf_escape(dt, dl, 15) : "(long)");
				free(dt);
				got_dtype = 1;
			} else if (which == 2 || which == 3) {
				if (jexpect(j, '[', which == 2 ? "to open 'shape'" : "to open 'data_offsets'"))
					return -1;
				uint64_t v[MAX_RANK + 1];
				int n = 0;
				if (jpeek(j) == ']') {
					j->i++;
				} else {
					for (;;) {
						if (n > MAX_RANK || juint(j, &v[n]) != 0)
							return jbad(j, "'%s' must be %s",
								     which == 2 ? "shape" : "data_offsets",
								     which == 2 ? "up to 8 non-negative integers"
										: "two non-negative integers");
						n++;
						int d = jpeek(j);
						j->i++;
						if (d == ']')
							break;
						if (d != ',') {
							j->i--;
							return jfail(j, "expected ',' or ']'");
						}
					}
				}
				if (which == 2) {
					if (n > MAX_RANK)
						return jbad(j, "more than 8 dimensions");
					t->rank = n;
					memcpy(t->dims, v, (size_t)n * sizeof *v);
					got_shape = 1;
				} else {
					if (n != 2)
						return jbad(j, "'data_offsets' must be two "
							       "integers [begin, end]");
					t->begin = v[0];
					t->end = v[1];
					got_off = 1;
				}
			} else if (jskip(j, 1)) {
				return -1;
			}
			int d = jpeek(j);
			j->i++;
			if (d == '}')
				break;
			if (d != ',') {
				j->i--;
				return jfail(j, "expected ',' or '}'");
			}
		}
	else
		j->i++;
	if (!got_dtype || !got_shape || !got_off)
		return jbad(j, "no '%s'",
			     !got_dtype ? "dtype" : !got_shape ? "shape" : "data_offsets");
	t->present = 1;
	return 0;
}

static void header_free(struct header *h)
{
	for (size_t k = 0; k < h->n_meta; k++) {
		free(h->meta[k].key);
		free(h->meta[k].val);
	}
	free(h->meta);
	h->meta = NULL;
	h->n_meta = 0;
}

static int parse_header(const unsigned char *s, size_t n, const char *display,
			struct header *h)
{
	memset(h, 0, sizeof *h);
	struct jp j = {s, n, 0, display, ""};
	size_t good = utf8_valid(s, n);
	if (good != n) {
		ncf_error("%s: header: not UTF-8 at byte %zu", display, 8 + good);
		return -1;
	}
	if (jpeek(&j) != '{')
		return jfail(&j, "the header must be a JSON object");
	j.i++;
	if (jpeek(&j) == '}') {
		j.i++;
	} else {
		for (;;) {
			char *key;
			size_t klen;
			if (jstring(&j, &key, &klen))
				return -1;
			if (jexpect(&j, ':', "after a key")) {
				free(key);
				return -1;
			}
			int rc;
			if (klen == 12 && !memcmp(key, "__metadata__", 12)) {
				snprintf(j.ctx, sizeof j.ctx, "__metadata__");
				rc = parse_metadata(&j, h);
			} else {
				int slot = name_slot(key, klen);
				const char *shown = ncf_escape(key, klen, 60);
				if (slot < 0) {
					ncf_error("%s: unexpected tensor '%s' (not in NVIDIA's NeuMF state_dict%s)",
						  display, shown,
						  klen > 7 && !memcmp(key, "module.", 7)
							  ? "; strip the 'module.' that DistributedDataParallel adds"
							  : "");
					free(key);
					return -1;
				}
				if (h->t[slot].present) {
					ncf_error("%s: tensor '%s' appears twice in the header", display, shown);
					free(key);
					return -1;
				}
				char name[32];
				slot_name(slot, name, sizeof name);
				snprintf(j.ctx, sizeof j.ctx, "tensor '%s'", name);
				rc = parse_tensor(&j, &h->t[slot]);
			}
			j.ctx[0] = 0;
			free(key);
			if (rc)
				return -1;
			int d = jpeek(&j);
			j.i++;
			if (d == '}')
				break;
			if (d != ',') {
				j.i--;
				return jfail(&j, "expected ',' or '}'");
			}
		}
	}
	if (jpeek(&j) != -1)
		return jfail(&j, "more after the header's object");
	return 0;
}

/* --------------------------------------------------------- the reading */

/* A byte source: a stream, or memory. */
struct src {
	FILE *fp;
	const unsigned char *mem;
	size_t n, pos;
	int64_t left; /* bytes known to remain; -1: unknown (a pipe) */
	const char *display;
};

/* Read up to len bytes; returns how many (short at the end), or -1 on a
 * read error (reported). */
static int64_t src_read(struct src *s, void *buf, size_t len)
{
	if (!s->fp) {
		size_t k = s->n - s->pos < len ? s->n - s->pos : len;
		memcpy(buf, s->mem + s->pos, k);
		s->pos += k;
		return (int64_t)k;
	}
	size_t got = fread(buf, 1, len, s->fp);
	if (got < len && ferror(s->fp)) {
		ncf_error("%s: read failed: %s", s->display, strerror(errno));
		return -1;
	}
	return (int64_t)got;
}

static void fmt_dims(char *buf, size_t n, int rank, const uint64_t *d)
{
	size_t o = (size_t)snprintf(buf, n, "[");
	for (int k = 0; k < rank && o < n; k++)
		o += (size_t)snprintf(buf + o, n - o, "%s%llu", k ? ", " : "", (unsigned long long)d[k]);
	if (o < n)
		snprintf(buf + o, n - o, "]");
}

/*
 * The NeuMF shape from the tensors' shapes.  need[k] = 0: taken from the
 * tensor (the legend letter shows in messages).
 */
struct fit {
	const char *display;
	const struct header *h;
	const struct ncf_model_want *want;
};

static int fit_tensor(struct fit *f, int slot, int rank, const uint64_t *need,
		      const char *const *letters, uint64_t *got)
{
	char name[32];
	slot_name(slot, name, sizeof name);
	const struct tensor *t = &f->h->t[slot];
	int ok = t->rank == rank;
	for (int k = 0; ok && k < rank; k++)
		ok = !need[k] || t->dims[k] == need[k];
	if (!ok) {
		char have[200], want[200];
		size_t o = 0;
		fmt_dims(have, sizeof have, t->rank, t->dims);
		o += (size_t)snprintf(want + o, sizeof want - o, "[");
		for (int k = 0; k < rank; k++) {
			if (need[k])
				o += (size_t)snprintf(want + o, sizeof want - o, "%s%llu", k ? ", " : "",
						      (unsigned long long)need[k]);
			else
				o += (size_t)snprintf(want + o, sizeof want - o, "%s%s", k ? ", " : "",
						      letters[k]);
		}
		snprintf(want + o, sizeof want - o, "]");
		ncf_error("%s: tensor '%s': shape %s but the model needs %s", f->display, name, have,
			  want);
		return -1;
	}
	for (int k = 0; k < rank; k++)
		got[k] = t->dims[k];
	return 0;
}

/* A size taken from a tensor must be in [1, max]. */
static int fit_range(struct fit *f, int slot, const char *what, uint64_t v, uint64_t max)
{
	if (v >= 1 && v <= max)
		return 0;
	char name[32];
	slot_name(slot, name, sizeof name);
	ncf_error("%s: tensor '%s': %llu %s, but ncf takes 1 to %llu", f->display, name,
		  (unsigned long long)v, what, (unsigned long long)max);
	return -1;
}

static int fit_want(struct fit *f, int slot, uint64_t have, uint32_t want, const char *what)
{
	if (!want || have == want)
		return 0;
	char name[32], dims[200];
	slot_name(slot, name, sizeof name);
	fmt_dims(dims, sizeof dims, f->h->t[slot].rank, f->h->t[slot].dims);
	ncf_error("%s: tensor '%s': shape %s but the cache has %u %s", f->display, name, dims, want,
		  what);
	return -1;
}

static int fit_shape(struct fit *f, struct ncf_shape *s)
{
	const struct header *h = f->h;
	memset(s, 0, sizeof *s);
	/* hidden layers: mlp.0 .. mlp.L-1, each with weight and bias */
	int L = 0;
	for (int k = 0; k < MAX_HIDDEN; k++)
		if (h->t[SLOT_MLP + 2 * k].present || h->t[SLOT_MLP + 2 * k + 1].present)
			L = k + 1;
	int order[N_SLOTS], n = 0;
	for (int k = 0; k < 4; k++)
		order[n++] = k;
	for (int k = 0; k < (L ? L : 1); k++)
		order[n++] = SLOT_MLP + 2 * k, order[n++] = SLOT_MLP + 2 * k + 1;
	order[n++] = SLOT_FINAL_W;
	order[n++] = SLOT_FINAL_B;
	for (int k = 0; k < n; k++)
		if (!h->t[order[k]].present) {
			char name[32];
			slot_name(order[k], name, sizeof name);
			ncf_error("%s: no tensor '%s' (NVIDIA's NeuMF state_dict has it)", f->display,
				  name);
			return -1;
		}
	static const char *const UF[] = {"U", "F"}, *const IF[] = {"I", "F"},
				 *const UM[] = {"U", "M"}, *const IM[] = {"I", "M"},
				 *const OUT_IN[] = {"out", "in"}, *const ONE[] = {"1", "F + H"};
	uint64_t need[2], got[2];
	/* U, F */
	need[0] = need[1] = 0;
	NCF_TRY(fit_tensor(f, 0, 2, need, UF, got));
	NCF_TRY(fit_range(f, 0, "users", got[0], 1u << 30));
	NCF_TRY(fit_range(f, 0, "factors", got[1], 65536));
	NCF_TRY(fit_want(f, 0, got[0], f->want ? f->want->users : 0, "users"));
	s->users = (uint32_t)got[0];
	s->factors = (uint32_t)got[1];
	/* I */
	need[0] = 0, need[1] = s->factors;
	NCF_TRY(fit_tensor(f, 1, 2, need, IF, got));
	NCF_TRY(fit_range(f, 1, "items", got[0], 1u << 30));
	NCF_TRY(fit_want(f, 1, got[0], f->want ? f->want->items : 0, "items"));
	s->items = (uint32_t)got[0];
	/* M */
	need[0] = s->users, need[1] = 0;
	NCF_TRY(fit_tensor(f, 2, 2, need, UM, got));
	NCF_TRY(fit_range(f, 2, "MLP embedding columns", got[1], 4096));
	uint64_t M = got[1];
	need[0] = s->items, need[1] = M;
	if (fit_tensor(f, 3, 2, need, IM, got))
		return -1;
	s->n_layers = (uint32_t)L + 1;
	s->layers[0] = (uint32_t)(2 * M);
	for (int k = 0; k < L; k++) {
		int sw = SLOT_MLP + 2 * k;
		need[0] = 0, need[1] = s->layers[k];
		NCF_TRY(fit_tensor(f, sw, 2, need, OUT_IN, got));
		NCF_TRY(fit_range(f, sw, "outputs", got[0], 8192));
		s->layers[k + 1] = (uint32_t)got[0];
		need[0] = s->layers[k + 1];
		if (fit_tensor(f, sw + 1, 1, need, OUT_IN, got))
			return -1;
	}
	need[0] = 1, need[1] = (uint64_t)s->factors + ncf_shape_last(s);
	if (fit_tensor(f, SLOT_FINAL_W, 2, need, ONE, got))
		return -1;
	need[0] = 1;
	if (fit_tensor(f, SLOT_FINAL_B, 1, need, ONE, got))
		return -1;
	return 0;
}

/* The bytes of each tensor: F32, the shape's size, no overlaps, no holes.
 * *data gets the data's length. */
static int check_offsets(const struct header *h, const char *display, uint64_t *data)
{
	int order[N_SLOTS], n = 0;
	for (int k = 0; k < N_SLOTS; k++) {
		const struct tensor *t = &h->t[k];
		if (!t->present)
			continue;
		char name[32], dims[200];
		slot_name(k, name, sizeof name);
		if (strcmp(t->dtype, "F32") != 0) {
			ncf_error("%s: tensor '%s': dtype %s, but ncf reads F32 only (convert with "
				  ".float() before saving)",
				  display, name, t->dtype);
			return -1;
		}
		uint64_t bytes = 4;
		int over = 0;
		for (int d = 0; d < t->rank; d++) {
			if (t->dims[d] && bytes > UINT64_MAX / t->dims[d])
				over = 1;
			else
				bytes *= t->dims[d];
		}
		fmt_dims(dims, sizeof dims, t->rank, t->dims);
		if (t->begin > t->end) {
			ncf_error("%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
				  display, name, (unsigned long long)t->begin,
				  (unsigned long long)t->end);
			return -1;
		}
		if (over || bytes != t->end - t->begin) {
			char size[32] = "more than 2^64";
			if (!over)
				snprintf(size, sizeof size, "%llu", (unsigned long long)bytes);
			ncf_error("%s: tensor '%s': shape %s is %s bytes of F32 but data_offsets "
				  "[%llu, %llu] hold %llu",
				  display, name, dims, size, (unsigned long long)t->begin,
				  (unsigned long long)t->end, (unsigned long long)(t->end - t->begin));
			return -1;
		}
		/* insertion by (begin, end) */
		int q = n++;
		while (q > 0 && (h->t[order[q - 1]].begin > t->begin ||
				 (h->t[order[q - 1]].begin == t->begin && h->t[order[q - 1]].end > t->end))) {
			order[q] = order[q - 1];
			q--;
		}
		order[q] = k;
	}
	uint64_t at = 0;
	int prev = -1;
	for (int q = 0; q < n; q++) {
		const struct tensor *t = &h->t[order[q]];
		char name[32], pname[32];
		slot_name(order[q], name, sizeof name);
		if (t->begin < at) {
			slot_name(prev, pname, sizeof pname);
			ncf_error("%s: tensors '%s' and '%s' overlap (data_offsets [%llu, %llu] and "
				  "[%llu, %llu])",
				  display, pname, name, (unsigned long long)h->t[prev].begin,
				  (unsigned long long)h->t[prev].end, (unsigned long long)t->begin,
				  (unsigned long long)t->end);
			return -1;
		}
		if (t->begin > at) {
			ncf_error("%s: bytes %llu to %llu of the data belong to no tensor (before "
				  "tensor '%s'); the data must be exactly the tensors",
				  display, (unsigned long long)at, (unsigned long long)t->begin, name);
			return -1;
		}
		at = t->end;
		prev = order[q];
	}
	*data = at;
	return 0;
}

static const struct meta *meta_get(const struct header *h, const char *key)
{
	size_t kl = strlen(key);
	for (size_t k = 0; k < h->n_meta; k++)
		if (h->meta[k].klen == kl && !memcmp(h->meta[k].key, key, kl))
			return &h->meta[k];
	return NULL;
}

static int meta_bad(const char *display, const struct meta *e, const char *why)
{
	ncf_error("%s: metadata '%s': '%s' %s", display, e->key, ncf_escape(e->val, e->vlen, 60),
		  why);
	return -1;
}

/* A decimal u64 that is the whole value. */
static int parse_dec(const struct meta *e, uint64_t *v)
{
	if (!e->vlen || e->vlen > 20 || strlen(e->val) != e->vlen)
		return -1;
	uint64_t x = 0;
	for (size_t k = 0; k < e->vlen; k++) {
		if (e->val[k] < '0' || e->val[k] > '9')
			return -1;
		unsigned dg = (unsigned)(e->val[k] - '0');
		if (x > (UINT64_MAX - dg) / 10)
			return -1;
		x = x * 10 + dg;
	}
	*v = x;
	return 0;
}

static int parse_real(const struct meta *e, double *v)
{
	if (!e->vlen || strlen(e->val) != e->vlen || e->val[0] == ' ')
		return -1;
	char *end;
	errno = 0;
	*v = strtod(e->val, &end);
	return *end || errno ? -1 : 0;
}

/* "1-3,7" into ids (exactly n), each id once. */
static int parse_ids(const char *display, const struct meta *e, uint32_t n, uint32_t **out)
{
	uint32_t *ids = ncf_xmalloc(((size_t)n ? n : 1) * sizeof *ids);
	size_t got = 0;
	const char *p = e->val, *end = e->val + e->vlen;
	while (p < end) {
		uint64_t a = 0, b;
		const char *q = p;
		while (q < end && *q >= '0' && *q <= '9' && a <= UINT32_MAX)
			a = a * 10 + (uint64_t)(*q++ - '0');
		b = a;
		int ok = q > p && a <= UINT32_MAX;
		if (ok && q < end && *q == '-') {
			const char *r = ++q;
			b = 0;
			while (q < end && *q >= '0' && *q <= '9' && b <= UINT32_MAX)
				b = b * 10 + (uint64_t)(*q++ - '0');
			ok = q > r && b <= UINT32_MAX && b >= a;
		}
		if (ok && q < end && *q != ',')
			ok = 0;
		if (ok && q + 1 == end)
			ok = 0; /* a trailing comma */
		if (!ok) {
			free(ids);
			ncf_error("%s: metadata '%s': '%s' at byte %zu is not an id or a run first-last",
				  display, e->key, ncf_escape(p, (size_t)(end - p), 20),
				  (size_t)(p - e->val));
			return -1;
		}
		if (b - a >= (uint64_t)n - got) {
			free(ids);
			ncf_error("%s: metadata '%s' lists more ids than the model's %u rows", display,
				  e->key, n);
			return -1;
		}
		for (uint64_t x = a; x <= b; x++)
			ids[got++] = (uint32_t)x;
		p = q < end ? q + 1 : q;
	}
	if (got != n) {
		free(ids);
		ncf_error("%s: metadata '%s' lists %zu ids but the model has %u rows", display, e->key,
			  got, n);
		return -1;
	}
	uint32_t dup;
	if (!ncf_ids_distinct(ids, n, &dup)) {
		ncf_error("%s: metadata '%s': id %u appears twice", display, e->key, dup);
		free(ids);
		return -1;
	}
	*out = ids;
	return 0;
}

/* The metadata: sizes that agree with the tensors, hyperparameters, ids. */
static int read_metadata(const struct header *h, const char *display, struct ncf_model *m)
{
	const struct ncf_shape *s = &m->shape;
	uint64_t v;
	static const struct {
		const char *key;
		int what;
	} sizes[] = {{"ncf.users", 0}, {"ncf.items", 1}, {"ncf.factors", 2}};
	for (int k = 0; k < 3; k++) {
		const struct meta *e = meta_get(h, sizes[k].key);
		uint32_t have = k == 0 ? s->users : k == 1 ? s->items : s->factors;
		if (!e)
			continue;
		if (parse_dec(e, &v) != 0)
			return meta_bad(display, e, "is not a number");
		if (v != have) {
			char why[96];
			snprintf(why, sizeof why, "disagrees with the tensors (%u)", have);
			return meta_bad(display, e, why);
		}
	}
	const struct meta *e = meta_get(h, "ncf.layers");
	if (e) {
		char want[128];
		size_t o = 0;
		for (uint32_t k = 0; k < s->n_layers; k++)
			o += (size_t)snprintf(want + o, sizeof want - o, "%s%u", k ? "," : "", s->layers[k]);
		if (e->vlen != o || memcmp(e->val, want, o)) {
			char why[160];
			snprintf(why, sizeof why, "disagrees with the tensors (%s)", want);
			return meta_bad(display, e, why);
		}
	}
	/* hyperparameters: the ranges ncf-train takes (ckpt.c) */
	struct ncf_hparams *hp = &m->hp;
	static const struct {
		const char *key;
		double lo, hi;
		int lo_open, hi_open;
	} reals[] = {{"ncf.lr", 0, 1e30, 1, 0},	  {"ncf.beta1", 0, 1, 0, 1},
		     {"ncf.beta2", 0, 1, 0, 1},	  {"ncf.eps", 0, 1, 1, 0},
		     {"ncf.dropout", 0, 1, 0, 1}};
	float *dst[] = {&hp->lr, &hp->beta1, &hp->beta2, &hp->eps, &hp->dropout};
	for (int k = 0; k < 5; k++) {
		double x;
		if (!(e = meta_get(h, reals[k].key)))
			continue;
		if (parse_real(e, &x) != 0 || !(reals[k].lo_open ? x > reals[k].lo : x >= reals[k].lo) ||
		    !(reals[k].hi_open ? x < reals[k].hi : x <= reals[k].hi))
			return meta_bad(display, e, "is not a number in ncf-train's range");
		*dst[k] = (float)x;
	}
	static const struct {
		const char *key;
		uint64_t lo, hi;
	} ints[] = {{"ncf.negatives", 0, 1000},
		    {"ncf.true_negatives", 0, 1},
		    {"ncf.batch", 1, (uint64_t)1 << 40},
		    {"ncf.seed", 0, UINT64_MAX}};
	for (int k = 0; k < 4; k++) {
		if (!(e = meta_get(h, ints[k].key)))
			continue;
		if (parse_dec(e, &v) != 0 || v < ints[k].lo || v > ints[k].hi)
			return meta_bad(display, e, "is not a number in ncf-train's range");
		if (k == 0)
			hp->negatives = (uint32_t)v;
		else if (k == 1)
			hp->true_neg = (uint32_t)v;
		else if (k == 2)
			hp->batch = v;
		else
			hp->seed = v;
	}
	const struct meta *u = meta_get(h, "ncf.user_ids"), *i = meta_get(h, "ncf.item_ids");
	if (!u != !i) {
		ncf_error("%s: metadata has '%s' but not '%s'", display,
			  u ? "ncf.user_ids" : "ncf.item_ids", u ? "ncf.item_ids" : "ncf.user_ids");
		return -1;
	}
	if (!u)
		return 0;
	NCF_TRY(parse_ids(display, u, s->users, &m->user_ids));
	NCF_TRY(parse_ids(display, i, s->items, &m->item_ids));
	return 0;
}

/* Grow-as-it-comes read of exactly need bytes into a new buffer (a
 * hostile header cannot make us allocate more than the input holds). */
static int read_data(struct src *s, uint64_t need, unsigned char **out)
{
	size_t cap = need < ((size_t)64 << 20) ? (size_t)need : ((size_t)64 << 20);
	if (s->left >= 0)
		cap = (size_t)need; /* checked against the size already */
	unsigned char *buf = ncf_xmalloc(cap ? cap : 1);
	uint64_t have = 0;
	while (have < need) {
		if (have == cap) {
			cap = cap * 2 < need ? cap * 2 : (size_t)need;
			buf = ncf_xrealloc(buf, cap);
		}
		int64_t got = src_read(s, buf + have, cap - have);
		if (got < 0) {
			free(buf);
			return -1;
		}
		if (got == 0) {
			ncf_error("%s: the data ends after %llu of its %llu bytes (a truncated file)",
				  s->display, (unsigned long long)have, (unsigned long long)need);
			free(buf);
			return -1;
		}
		have += (uint64_t)got;
	}
	*out = buf;
	return 0;
}

/* The 8-byte header length N and the N bytes of JSON header into a new
 * buffer *hb.  Returns 0 or -1 (reported). */
static int read_header_bytes(struct src *s, uint64_t *N_out, unsigned char **hb_out)
{
	const char *display = s->display;
	unsigned char len8[8];
	int64_t got = src_read(s, len8, 8);
	if (got < 0)
		return -1;
	if (got < 8) {
		ncf_error("%s: %lld bytes, too short for a safetensors file (an 8-byte header length, "
			  "then the header)",
			  display, (long long)got);
		return -1;
	}
	uint64_t N = ncf_get_u64(len8);
	if (N < 2 || N > NCF_ST_MAX_HEADER) {
		ncf_error("%s: header length %llu is %s (not a safetensors file?)", display,
			  (unsigned long long)N,
			  N < 2 ? "too small for a JSON object" : "over the format's limit of 100000000");
		return -1;
	}
	if (s->left >= 0 && (uint64_t)s->left < 8 + N) {
		ncf_error("%s: header length %llu runs past the end of the file (%lld bytes)", display,
			  (unsigned long long)N, (long long)s->left);
		return -1;
	}
	unsigned char *hb = ncf_xmalloc((size_t)N);
	got = src_read(s, hb, (size_t)N);
	if (got < 0 || (uint64_t)got < N) {
		if (got >= 0)
			ncf_error("%s: header length %llu runs past the end of the file (%lld bytes)",
				  display, (unsigned long long)N, (long long)got + 8);
		free(hb);
		return -1;
	}
	*N_out = N;
	*hb_out = hb;
	return 0;
}

/* A file of known size: after the 8 + N header bytes it must hold the D
 * bytes of tensor data, no more, no less.  Returns 0 or -1 (reported). */
static int check_data_size(const struct src *s, const struct header *h, uint64_t N, uint64_t D)
{
	if (s->left < 0)
		return 0;
	uint64_t R = (uint64_t)s->left - 8 - N;
	for (int k = 0; R < D && k < N_SLOTS; k++)
		if (h->t[k].present && h->t[k].end > R) {
			char name[32];
			slot_name(k, name, sizeof name);
			ncf_error("%s: tensor '%s': data_offsets [%llu, %llu] run past the end of "
				  "the file (%llu bytes of data)",
				  s->display, name, (unsigned long long)h->t[k].begin,
				  (unsigned long long)h->t[k].end, (unsigned long long)R);
			return -1;
		}
	if (R > D) {
		ncf_error("%s: %llu bytes after the last tensor; the data must be exactly the "
			  "tensors",
			  s->display, (unsigned long long)(R - D));
		return -1;
	}
	return 0;
}

/* A stream (size unknown) must end with the last tensor.  Returns 0 or -1
 * (reported). */
static int check_stream_end(struct src *s)
{
	if (s->left >= 0)
		return 0;
	unsigned char extra;
	int64_t x = src_read(s, &extra, 1);
	if (x == 0)
		return 0;
	if (x > 0)
		ncf_error("%s: bytes after the last tensor; the data must be exactly the tensors",
			  s->display);
	return -1;
}

/* The parameter vector from the tensor data: the data itself when the
 * tensors come in layout order (data is then owned by the result), else
 * each tensor copied to its place (data freed). */
static float *place_params(const struct header *h, const struct ncf_shape *shape,
			   const struct ncf_layout *L, unsigned char *data)
{
	int in_order = 1;
	for (int k = 0; k < N_SLOTS; k++) {
		size_t off, len;
		if (!slot_used(shape, k))
			continue;
		slot_place(shape, L, k, &off, &len);
		if (h->t[k].begin != 4 * (uint64_t)off)
			in_order = 0;
	}
	if (in_order)
		return (float *)(void *)data;
	float *params = ncf_xmalloc(L->total * sizeof(float));
	for (int k = 0; k < N_SLOTS; k++) {
		size_t off, len;
		if (!slot_used(shape, k))
			continue;
		slot_place(shape, L, k, &off, &len);
		memcpy(params + off, data + h->t[k].begin, 4 * len);
	}
	free(data);
	return params;
}

/* Every parameter finite.  Returns 0 or -1 (reported). */
static int check_finite(const struct ncf_model *m, const struct ncf_layout *L,
			const char *display)
{
	for (int k = 0; k < N_SLOTS; k++) {
		size_t off, len;
		if (!slot_used(&m->shape, k))
			continue;
		slot_place(&m->shape, L, k, &off, &len);
		for (size_t q = 0; q < len; q++)
			if (!isfinite(m->params[off + q])) {
				char name[32];
				slot_name(k, name, sizeof name);
				ncf_error("%s: tensor '%s': element %zu is %g", display, name, q,
					  (double)m->params[off + q]);
				return -1;
			}
	}
	return 0;
}

static int st_read(struct src *s, const struct ncf_model_want *want, struct ncf_model *m)
{
	const char *display = s->display;
	memset(m, 0, sizeof *m);
	uint64_t N;
	unsigned char *hb;
	NCF_TRY(read_header_bytes(s, &N, &hb));
	struct header h;
	int rc = parse_header(hb, (size_t)N, display, &h);
	free(hb);
	uint64_t D = 0;
	struct fit f = {display, &h, want};
	NCF_TRY_GOTO(rc, fail);
	NCF_TRY_GOTO(check_offsets(&h, display, &D), fail);
	NCF_TRY_GOTO(fit_shape(&f, &m->shape), fail);
	struct ncf_layout L;
	ncf_layout_make(&m->shape, &L);
	if (D != 4 * (uint64_t)L.total) { /* cannot happen after the checks above */
		ncf_error("%s: %llu bytes of data for %zu parameters", display,
			  (unsigned long long)D, L.total);
		goto fail;
	}
	NCF_TRY_GOTO(check_data_size(s, &h, N, D), fail);
	ncf_hparams_nvidia(&m->hp);
	NCF_TRY_GOTO(read_metadata(&h, display, m), fail);
	unsigned char *data;
	NCF_TRY_GOTO(read_data(s, D, &data), fail);
	if (check_stream_end(s) != 0) {
		free(data);
		goto fail;
	}
	m->params = place_params(&h, &m->shape, &L, data);
	NCF_TRY_GOTO(check_finite(m, &L, display), fail);
	header_free(&h);
	return 0;
fail:
	header_free(&h);
	ncf_model_free(m);
	return -1;
}

int ncf_safetensors_read(FILE *fp, const char *display, const struct ncf_model_want *want,
			 struct ncf_model *m)
{
	struct src s = {.fp = fp, .left = -1, .display = display};
	struct stat st;
	off_t at = ftello(fp);
	if (fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode) && at >= 0 && st.st_size >= at)
		s.left = (int64_t)(st.st_size - at);
	return st_read(&s, want, m);
}

int ncf_safetensors_read_mem(const void *buf, size_t n, const char *display,
			     const struct ncf_model_want *want, struct ncf_model *m)
{
	struct src s = {.mem = buf, .n = n, .left = (int64_t)n, .display = display};
	return st_read(&s, want, m);
}
