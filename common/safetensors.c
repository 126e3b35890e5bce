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
 * last one.  ncf reads and writes dtype F32 only.  The JSON is jansson's
 * to read and write; this file checks what safetensors and NeuMF ask of
 * it, and keeps memory to what the file holds (the header length is
 * checked against the file's size before the header is read).
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
 *   ncf.user_names  in place of ncf.user_ids (ncf.item_ids) where the ids
 *   ncf.item_names  are text (names.h): the names in row order, each
 *                   ended by a line feed ("u17\nB00X\n")
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
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

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

/* ------------------------------------------------------- jansson's memory */

/*
 * jansson builds the whole header as a tree before a single check of ours
 * runs, some 25 times the header's bytes for a header of small values (100
 * MB of "1," is 2.5 GB), where a real one (names, shapes, the ids as a few
 * strings) takes about 2.5 times.  So while it parses a header of N bytes
 * its allocations may come to 4 N + 1 MiB, no more: its allocator is ours
 * (json_set_alloc_funcs, for the whole process: this file is ncf's only
 * user of jansson), each block with its size in front, and a budget per
 * thread that is on only during a parse.
 */
#define JSON_BLOCK 16 /* the size in front of each block, keeping malloc's alignment */
#define JSON_BUDGET(n) (4 * (size_t)(n) + ((size_t)1 << 20))

static __thread struct {
	int on, hit;
	size_t left; /* bytes the parse may still allocate */
} budget;

static void *json_block_alloc(size_t n)
{
	if (budget.on) {
		if (n > budget.left || budget.left - n < JSON_BLOCK) {
			budget.hit = 1;
			return NULL;
		}
		budget.left -= n + JSON_BLOCK;
	}
	unsigned char *p = malloc(n + JSON_BLOCK);
	if (!p)
		return NULL;
	memcpy(p, &n, sizeof n);
	return p + JSON_BLOCK;
}

static void json_block_free(void *q)
{
	if (!q)
		return;
	unsigned char *p = (unsigned char *)q - JSON_BLOCK;
	size_t n;
	memcpy(&n, p, sizeof n);
	if (budget.on)
		budget.left += n + JSON_BLOCK;
	free(p);
}

static void json_alloc_init(void)
{
	json_set_alloc_funcs(json_block_alloc, json_block_free);
}

/* Before any use of jansson here. */
static void json_alloc_once(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, json_alloc_init);
}

/* ---------------------------------------------------------------- writer */

/* jansson fails only when it cannot allocate: the end of ncf_xmalloc. */
static json_t *jnew(json_t *v)
{
	if (!v)
		ncf_out_of_memory("JSON header");
	return v;
}

static void jset(json_t *obj, const char *key, json_t *v)
{
	if (json_object_set_new(obj, key, jnew(v)) != 0)
		ncf_out_of_memory("JSON header");
}

/* key: the decimal v, as a string (metadata values are strings). */
static void jset_u64(json_t *obj, const char *key, uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
	jset(obj, key, json_string(buf));
}

/* key: the shortest %g that reads back as f. */
static void jset_float(json_t *obj, const char *key, float f)
{
	char buf[24];
	for (int p = 6; p <= 9; p++) {
		snprintf(buf, sizeof buf, "%.*g", p, (double)f);
		if (strtof(buf, NULL) == f)
			break;
	}
	jset(obj, key, json_string(buf));
}

/* key: ids (n) as runs of consecutive ids, "1-3,7". */
static void jset_ids(json_t *obj, const char *key, const uint32_t *ids, size_t n)
{
	char *b = ncf_xmalloc(22 * n + 1); /* "4294967295-4294967295," at most per run */
	size_t o = 0;
	b[0] = 0;
	for (size_t k = 0; k < n;) {
		size_t e = k;
		while (e + 1 < n && ids[e] != UINT32_MAX && ids[e + 1] == ids[e] + 1)
			e++;
		if (e == k)
			o += (size_t)sprintf(b + o, "%s%u", k ? "," : "", ids[k]);
		else
			o += (size_t)sprintf(b + o, "%s%u-%u", k ? "," : "", ids[k], ids[e]);
		k = e + 1;
	}
	jset(obj, key, json_stringn(b, o));
	free(b);
}

/* A column's ids: ncf.KIND_ids, or where they are text ncf.KIND_names,
 * each name ended by a line feed. */
static void jset_column(json_t *obj, const char *kind, const uint32_t *ids,
			const struct ncf_names *names, size_t n)
{
	char key[32];
	if (!names->n) {
		snprintf(key, sizeof key, "ncf.%s_ids", kind);
		jset_ids(obj, key, ids, n);
		return;
	}
	snprintf(key, sizeof key, "ncf.%s_names", kind);
	char *text = ncf_xmalloc((size_t)names->bytes);
	for (uint64_t k = 0; k < names->bytes; k++)
		text[k] = names->text[k] ? names->text[k] : '\n';
	jset(obj, key, json_stringn(text, (size_t)names->bytes));
	free(text);
}

/* The header of m: the JSON object (metadata first, then the tensors in
 * layout order), padded with spaces to end at a multiple of 8 in the
 * file; *n gets its length.  A new buffer. */
static char *st_header(const struct ncf_model *m, const struct ncf_layout *L, size_t *n)
{
	const struct ncf_shape *s = &m->shape;
	const struct ncf_hparams *h = &m->hp;
	json_alloc_once();
	json_t *root = jnew(json_object()), *meta = jnew(json_object());
	jset(root, "__metadata__", meta);
	jset(meta, "format", json_string("pt"));
	jset(meta, "ncf.version", json_string(NCF_VERSION));
	jset_u64(meta, "ncf.users", s->users);
	jset_u64(meta, "ncf.items", s->items);
	jset_u64(meta, "ncf.factors", s->factors);
	char layers[NCF_MAX_LAYERS * 12] = "";
	for (uint32_t k = 0, o = 0; k < s->n_layers; k++)
		o += (uint32_t)snprintf(layers + o, sizeof layers - o, "%s%u", k ? "," : "", s->layers[k]);
	jset(meta, "ncf.layers", json_string(layers));
	jset_float(meta, "ncf.lr", h->lr);
	jset_float(meta, "ncf.beta1", h->beta1);
	jset_float(meta, "ncf.beta2", h->beta2);
	jset_float(meta, "ncf.eps", h->eps);
	jset_float(meta, "ncf.dropout", h->dropout);
	jset_u64(meta, "ncf.negatives", h->negatives);
	jset_u64(meta, "ncf.true_negatives", h->true_neg);
	jset_u64(meta, "ncf.batch", h->batch);
	jset_u64(meta, "ncf.seed", h->seed);
	if (m->user_ids && m->item_ids) {
		jset_column(meta, "user", m->user_ids, &m->user_names, s->users);
		jset_column(meta, "item", m->item_ids, &m->item_names, s->items);
	}
	for (int slot = 0; slot < N_SLOTS; slot++) {
		if (!slot_used(s, slot))
			continue;
		char name[32];
		uint64_t d[2];
		size_t off, len;
		slot_name(slot, name, sizeof name);
		int rank = slot_dims(s, slot, d);
		slot_place(s, L, slot, &off, &len);
		json_t *shape = rank == 2 ? json_pack("[I,I]", (json_int_t)d[0], (json_int_t)d[1])
					  : json_pack("[I]", (json_int_t)d[0]);
		jset(root, name,
		     json_pack("{s:s,s:o,s:[I,I]}", "dtype", "F32", "shape", jnew(shape),
			       "data_offsets", (json_int_t)(4 * off), (json_int_t)(4 * (off + len))));
	}
	size_t len = json_dumpb(root, NULL, 0, JSON_COMPACT), pad = (8 - (8 + len) % 8) % 8;
	char *text = ncf_xmalloc(len + pad);
	if (!len || json_dumpb(root, text, len, JSON_COMPACT) != len)
		ncf_out_of_memory("JSON header");
	json_decref(root);
	memset(text + len, ' ', pad);
	*n = len + pad;
	return text;
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
	struct ncf_layout L;
	ncf_layout_make(&m->shape, &L);
	size_t n;
	char *header = st_header(m, &L, &n);
	if (n > NCF_ST_MAX_HEADER) {
		ncf_error("%s: the safetensors header would be %zu bytes (the ids), over the format's "
			  "limit of %u",
			  path ? path : "<stdout>", n, NCF_ST_MAX_HEADER);
		free(header);
		return -1;
	}
	struct ncf_out o;
	if (ncf_out_open(&o, path, 1) != 0) {
		free(header);
		return -1;
	}
	int bad = st_write_file(&o, header, n, m->params, L.total);
	free(header);
	return ncf_out_end(&o, bad);
}
/* ------------------------------------------------------ the JSON header */

/* jansson parses the header (JSON itself: syntax, UTF-8, escapes, keys
 * that appear twice anywhere); what follows checks what safetensors and
 * NeuMF ask of it. */

struct tensor {
	int present;
	char dtype[16];
	int rank;
	uint64_t dims[MAX_RANK];
	uint64_t begin, end;
};

struct header {
	struct tensor t[N_SLOTS];
	json_t *root; /* the parsed header (owned) */
	json_t *meta; /* its "__metadata__" object, or NULL (borrowed from root) */
};

/* A metadata entry: key and value (vlen bytes, may hold NULs). */
struct meta {
	const char *key, *val;
	size_t vlen;
};

/* "file: tensor 'x': what" for a header entry that is JSON but not what
 * safetensors says. */
static int tbad(const char *display, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int tbad(const char *display, const char *name, const char *fmt, ...)
{
	char what[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	ncf_error("%s: tensor '%s': %s", display, name, what);
	return -1;
}

/* A value nested deeper than 64 (the value of a field at depth 1): what a
 * tensor's entry may hold in fields ncf does not know. */
static int too_deep(const json_t *v, int depth)
{
	if (depth > 64)
		return 1;
	const char *key;
	size_t k;
	json_t *x;
	if (json_is_array(v))
		json_array_foreach(v, k, x)
			if (too_deep(x, depth + 1))
				return 1;
	if (json_is_object(v))
		json_object_foreach((json_t *)v, key, x)
			if (too_deep(x, depth + 1))
				return 1;
	return 0;
}

/* A JSON array of at most max non-negative integers into v; the count, or
 * -1 when it is not one (-2: more than max entries). */
static int juints(const json_t *a, uint64_t *v, int max)
{
	if (!json_is_array(a))
		return -1;
	if (json_array_size(a) > (size_t)max)
		return -2;
	size_t k;
	json_t *x;
	json_array_foreach(a, k, x) {
		if (!json_is_integer(x) || json_integer_value(x) < 0)
			return -1;
		v[k] = (uint64_t)json_integer_value(x);
	}
	return (int)json_array_size(a);
}

/* One tensor's entry: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}
 * and fields ncf does not know. */
static int parse_tensor(const json_t *e, const char *display, const char *name, struct tensor *t)
{
	if (!json_is_object(e))
		return tbad(display, name, "the entry must be an object with 'dtype', 'shape' and "
					   "'data_offsets'");
	json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
	       *off = json_object_get(e, "data_offsets");
	if (!dt || !sh || !off)
		return tbad(display, name, "no '%s'", !dt ? "dtype" : !sh ? "shape" : "data_offsets");
	if (!json_is_string(dt))
		return tbad(display, name, "'dtype' must be a string");
	size_t dl = json_string_length(dt);
	snprintf(t->dtype, sizeof t->dtype, "%s",
		 dl < sizeof t->dtype ? ncf_escape(json_string_value(dt), dl, 15) : "(long)");
	t->rank = juints(sh, t->dims, MAX_RANK);
	if (t->rank == -2)
		return tbad(display, name, "more than 8 dimensions");
	if (t->rank < 0)
		return tbad(display, name, "'shape' must be up to 8 non-negative integers");
	uint64_t be[2];
	int n = juints(off, be, 2);
	if (n == -1)
		return tbad(display, name, "'data_offsets' must be two non-negative integers");
	if (n != 2)
		return tbad(display, name, "'data_offsets' must be two integers [begin, end]");
	t->begin = be[0];
	t->end = be[1];
	const char *key;
	json_t *x;
	json_object_foreach((json_t *)e, key, x)
		if (too_deep(x, 1))
			return tbad(display, name, "'%s': values nested more than 64 deep",
				    ncf_escape(key, strlen(key), 60));
	t->present = 1;
	return 0;
}

/* "__metadata__": an object of strings. */
static int parse_metadata(json_t *meta, const char *display, struct header *h)
{
	if (!json_is_object(meta)) {
		ncf_error("%s: header: '__metadata__' must be an object of strings", display);
		return -1;
	}
	const char *key;
	json_t *v;
	json_object_foreach(meta, key, v)
		if (!json_is_string(v)) {
			ncf_error("%s: __metadata__: the value of '%s' is not a string", display,
				  ncf_escape(key, strlen(key), 60));
			return -1;
		}
	h->meta = meta;
	return 0;
}

static void header_free(struct header *h)
{
	json_decref(h->root);
	h->root = h->meta = NULL;
}

/* The header's n bytes (s) into h: jansson's parse, then every entry a
 * tensor of NVIDIA's state_dict or the metadata.  Returns 0 or -1 after
 * one line (jansson's own words and byte for bad JSON). */
static int parse_header(const unsigned char *s, size_t n, const char *display,
			struct header *h)
{
	memset(h, 0, sizeof *h);
	json_error_t e;
	json_alloc_once();
	budget.on = 1;
	budget.hit = 0;
	budget.left = JSON_BUDGET(n);
	/* JSON_ALLOW_NUL: "\u0000" in a value (a name with one is refused below) */
	h->root = json_loadb((const char *)s, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
	budget.on = 0;
	if (!h->root && budget.hit) {
		ncf_error("%s: header: more JSON values than a safetensors header holds (reading "
			  "them would take over %zu bytes)",
			  display, JSON_BUDGET(n));
		return -1;
	}
	if (!h->root) {
		ncf_error("%s: header byte %d: %s", display, e.position, e.text);
		return -1;
	}
	if (!json_is_object(h->root)) {
		ncf_error("%s: header: a JSON %s, but safetensors has an object", display,
			  json_is_array(h->root) ? "array" : "value");
		return -1;
	}
	const char *key;
	json_t *v;
	json_object_foreach(h->root, key, v) {
		if (!strcmp(key, "__metadata__")) {
			NCF_TRY(parse_metadata(v, display, h));
			continue;
		}
		int slot = name_slot(key, strlen(key));
		if (slot < 0) {
			ncf_error("%s: unexpected tensor '%s' (not in NVIDIA's NeuMF state_dict%s)",
				  display, ncf_escape(key, strlen(key), 60),
				  !strncmp(key, "module.", 7)
					  ? "; strip the 'module.' that DistributedDataParallel adds"
					  : "");
			return -1;
		}
		char name[32];
		slot_name(slot, name, sizeof name);
		NCF_TRY(parse_tensor(v, display, name, &h->t[slot]));
	}
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

/* The hidden layers L of the header: mlp.0 .. mlp.L-1, L - 1 the highest
 * present (weight or bias). */
static int hidden_layers(const struct header *h)
{
	int L = 0;
	for (int k = 0; k < MAX_HIDDEN; k++)
		if (h->t[SLOT_MLP + 2 * k].present || h->t[SLOT_MLP + 2 * k + 1].present)
			L = k + 1;
	return L;
}

/* "'a'", "'a' and 'b'", "'a', 'b' and 'c'": the names of the n slots. */
static void name_list(char *buf, size_t size, const int *slots, int n)
{
	size_t o = 0;
	buf[0] = 0;
	for (int k = 0; k < n && o < size; k++) {
		char name[32];
		slot_name(slots[k], name, sizeof name);
		o += (size_t)snprintf(buf + o, size - o, "%s'%s'",
				      k == 0 ? "" : k == n - 1 ? " and " : ", ", name);
	}
}

/* Every tensor of NVIDIA's state_dict for the header's L layers is there
 * (an MLP of at least one layer), before anything is said about offsets
 * or shapes: all the missing ones are named.  Returns 0 or -1. */
static int check_present(const struct header *h, const char *display)
{
	int L = hidden_layers(h), missing[N_SLOTS], n = 0;
	for (int k = 0; k < N_SLOTS; k++)
		if (!h->t[k].present && (k < SLOT_MLP || k >= SLOT_FINAL_W ||
					 (k - SLOT_MLP) / 2 < (L ? L : 1)))
			missing[n++] = k;
	if (!n)
		return 0;
	char names[N_SLOTS * 40];
	name_list(names, sizeof names, missing, n);
	if (n == 1)
		ncf_error("%s: no tensor %s (NVIDIA's NeuMF state_dict has it)", display, names);
	else
		ncf_error("%s: tensors %s are missing (NVIDIA's NeuMF state_dict has them)", display,
			  names);
	return -1;
}

/* final.weight [1, F + X] after L layers of which the last gives H != X:
 * a state_dict without its last layer(s) (nothing names them: the header
 * simply ends at mlp.L-1).  Returns 0 when that is not it, else -1 after
 * naming the first layer missing. */
static int check_last_layer(struct fit *f, const struct ncf_shape *s)
{
	const struct tensor *t = &f->h->t[SLOT_FINAL_W];
	uint32_t L = ncf_shape_hidden(s), H = ncf_shape_last(s);
	if (L >= MAX_HIDDEN || t->rank != 2 || t->dims[0] != 1 || t->dims[1] <= s->factors ||
	    t->dims[1] - s->factors == H)
		return 0;
	int next[2] = {SLOT_MLP + 2 * (int)L, SLOT_MLP + 2 * (int)L + 1};
	char names[80];
	name_list(names, sizeof names, next, 2);
	ncf_error("%s: tensors %s are missing: 'final.weight' (shape [1, %llu]) takes %llu MLP "
		  "outputs, the last layer present ('mlp.%u') gives %u",
		  f->display, names, (unsigned long long)t->dims[1],
		  (unsigned long long)(t->dims[1] - s->factors), L - 1, H);
	return -1;
}

/* The NeuMF shape from the tensors' shapes (all present: check_present). */
static int fit_shape(struct fit *f, struct ncf_shape *s)
{
	const struct header *h = f->h;
	memset(s, 0, sizeof *s);
	int L = hidden_layers(h);
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
	NCF_TRY(check_last_layer(f, s));
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

/* The metadata entry key: 1 and *e, or 0 when there is none. */
static int meta_get(const struct header *h, const char *key, struct meta *e)
{
	json_t *v = h->meta ? json_object_get(h->meta, key) : NULL;
	if (!v)
		return 0;
	e->key = key;
	e->val = json_string_value(v);
	e->vlen = json_string_length(v);
	return 1;
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

/* The decimal digits from q (before end) into *v, which stops growing once
 * past UINT32_MAX.  Returns the byte after them. */
static const char *id_digits(const char *q, const char *end, uint64_t *v)
{
	uint64_t a = 0;
	while (q < end && *q >= '0' && *q <= '9' && a <= UINT32_MAX)
		a = a * 10 + (uint64_t)(*q++ - '0');
	*v = a;
	return q;
}

/* One element of an id list at p (before end): an id a, or a run a-b with
 * b >= a, ids below 2^32, then a comma that is not the last byte, or the
 * end.  Returns the byte after the element (its comma, or end), or NULL
 * when p holds none. */
static const char *id_run(const char *p, const char *end, uint64_t *a, uint64_t *b)
{
	const char *q = id_digits(p, end, a);
	*b = *a;
	if (q == p || *a > UINT32_MAX)
		return NULL;
	if (q < end && *q == '-') {
		const char *r = q + 1;
		q = id_digits(r, end, b);
		if (q == r || *b > UINT32_MAX || *b < *a)
			return NULL;
	}
	if (q < end && (*q != ',' || q + 1 == end)) /* something else, or a trailing comma */
		return NULL;
	return q;
}

/* The ids of e listed, got of them: exactly the model's n, each once.
 * Returns 0 or -1 (reported). */
static int ids_complete(const char *display, const struct meta *e, const uint32_t *ids,
			size_t got, uint32_t n)
{
	if (got != n) {
		ncf_error("%s: metadata '%s' lists %zu ids but the model has %u rows", display, e->key,
			  got, n);
		return -1;
	}
	uint32_t dup;
	if (!ncf_ids_distinct(ids, n, &dup)) {
		ncf_error("%s: metadata '%s': id %u appears twice", display, e->key, dup);
		return -1;
	}
	return 0;
}

/* "1-3,7" into ids (exactly n), each id once. */
static int parse_ids(const char *display, const struct meta *e, uint32_t n, uint32_t **out)
{
	uint32_t *ids = ncf_xmalloc(((size_t)n ? n : 1) * sizeof *ids);
	size_t got = 0;
	const char *p = e->val, *end = e->val + e->vlen;
	while (p < end) {
		uint64_t a, b;
		const char *q = id_run(p, end, &a, &b);
		if (!q) {
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
	if (ids_complete(display, e, ids, got, n) != 0) {
		free(ids);
		return -1;
	}
	*out = ids;
	return 0;
}

/* The metadata's sizes (ncf.users, ncf.items, ncf.factors, ncf.layers),
 * where given, against the tensors' shape s. */
static int meta_sizes(const struct header *h, const char *display, const struct ncf_shape *s)
{
	struct meta e;
	uint64_t v;
	static const char *const sizes[3] = {"ncf.users", "ncf.items", "ncf.factors"};
	for (int k = 0; k < 3; k++) {
		uint32_t have = k == 0 ? s->users : k == 1 ? s->items : s->factors;
		if (!meta_get(h, sizes[k], &e))
			continue;
		if (parse_dec(&e, &v) != 0)
			return meta_bad(display, &e, "is not a number");
		if (v != have) {
			char why[96];
			snprintf(why, sizeof why, "disagrees with the tensors (%u)", have);
			return meta_bad(display, &e, why);
		}
	}
	if (meta_get(h, "ncf.layers", &e)) {
		char want[128];
		size_t o = 0;
		for (uint32_t k = 0; k < s->n_layers; k++)
			o += (size_t)snprintf(want + o, sizeof want - o, "%s%u", k ? "," : "", s->layers[k]);
		if (e.vlen != o || memcmp(e.val, want, o)) {
			char why[160];
			snprintf(why, sizeof why, "disagrees with the tensors (%s)", want);
			return meta_bad(display, &e, why);
		}
	}
	return 0;
}

/* The hyperparameters given in the metadata into hp, each in the range
 * ncf-train takes (ckpt.c). */
static int meta_hparams(const struct header *h, const char *display, struct ncf_hparams *hp)
{
	struct meta e;
	static const struct {
		const char *key;
		double lo, hi;
		int lo_open, hi_open;
	} reals[] = {{"ncf.lr", 0, 1e30, 1, 0},	  {"ncf.beta1", 0, 1, 0, 1},
		     {"ncf.beta2", 0, 1, 0, 1},	  {"ncf.eps", 0, 1, 1, 0},
		     {"ncf.dropout", 0, 1, 0, 1}};
	float *real_dst[] = {&hp->lr, &hp->beta1, &hp->beta2, &hp->eps, &hp->dropout};
	for (int k = 0; k < 5; k++) {
		double x;
		if (!meta_get(h, reals[k].key, &e))
			continue;
		if (parse_real(&e, &x) != 0 || !(reals[k].lo_open ? x > reals[k].lo : x >= reals[k].lo) ||
		    !(reals[k].hi_open ? x < reals[k].hi : x <= reals[k].hi))
			return meta_bad(display, &e, "is not a number in ncf-train's range");
		*real_dst[k] = (float)x;
	}
	static const struct {
		const char *key;
		uint64_t lo, hi;
	} ints[] = {{"ncf.negatives", 0, 1000},
		    {"ncf.true_negatives", 0, 1},
		    {"ncf.batch", 1, (uint64_t)1 << 40},
		    {"ncf.seed", 0, UINT64_MAX}};
	uint64_t got[4] = {hp->negatives, hp->true_neg, hp->batch, hp->seed};
	for (int k = 0; k < 4; k++) {
		uint64_t v;
		if (!meta_get(h, ints[k].key, &e))
			continue;
		if (parse_dec(&e, &v) != 0 || v < ints[k].lo || v > ints[k].hi)
			return meta_bad(display, &e, "is not a number in ncf-train's range");
		got[k] = v;
	}
	hp->negatives = (uint32_t)got[0];
	hp->true_neg = (uint32_t)got[1];
	hp->batch = got[2];
	hp->seed = got[3];
	return 0;
}

/* The names of e (n of them, each ended by a line feed) into names, and
 * the column's u32 ids, its indices, into *ids.  0, or -1 (reported). */
static int parse_names(const char *display, const struct meta *e, uint32_t n, uint32_t **ids,
		       struct ncf_names *names)
{
	char *text = ncf_xmalloc(e->vlen + 1);
	for (size_t k = 0; k < e->vlen; k++)
		text[k] = e->val[k] == '\n' ? 0 : e->val[k] ? e->val[k] : '\x01';
	char why[160];
	if (ncf_names_load(names, text, e->vlen, n, why, sizeof why) != 0) {
		free(text);
		ncf_error("%s: metadata '%s': %s", display, e->key, why);
		return -1;
	}
	*ids = ncf_xmalloc(((size_t)n ? n : 1) * sizeof **ids);
	for (uint32_t k = 0; k < n; k++)
		(*ids)[k] = k;
	return 0;
}

/* One column's ids: ncf.KIND_ids or ncf.KIND_names (not both), into ids
 * or names.  1 when there are some, 0 none, -1 (reported). */
static int meta_column(const struct header *h, const char *display, const char *kind, uint32_t n,
		       uint32_t **ids, struct ncf_names *names)
{
	char ik[32], nk[32];
	snprintf(ik, sizeof ik, "ncf.%s_ids", kind);
	snprintf(nk, sizeof nk, "ncf.%s_names", kind);
	struct meta e, f;
	int has_ids = meta_get(h, ik, &e), has_names = meta_get(h, nk, &f);
	if (has_ids && has_names) {
		ncf_error("%s: metadata has both '%s' and '%s'", display, ik, nk);
		return -1;
	}
	if (has_ids)
		NCF_TRY(parse_ids(display, &e, n, ids));
	if (has_names)
		NCF_TRY(parse_names(display, &f, n, ids, names));
	return has_ids || has_names;
}

/* The metadata's id maps (ncf.user_ids or ncf.user_names, and the
 * items': both columns or neither) into m's. */
static int meta_ids(const struct header *h, const char *display, struct ncf_model *m)
{
	int has_u = meta_column(h, display, "user", m->shape.users, &m->user_ids, &m->user_names);
	if (has_u < 0)
		return -1;
	int has_i = meta_column(h, display, "item", m->shape.items, &m->item_ids, &m->item_names);
	if (has_i < 0)
		return -1;
	if (has_u != has_i) {
		ncf_error("%s: metadata has '%s' but not '%s'", display,
			  has_u ? "ncf.user_ids" : "ncf.item_ids", has_u ? "ncf.item_ids" : "ncf.user_ids");
		return -1;
	}
	return 0;
}

/* The metadata: sizes that agree with the tensors, hyperparameters, ids. */
static int read_metadata(const struct header *h, const char *display, struct ncf_model *m)
{
	NCF_TRY(meta_sizes(h, display, &m->shape));
	NCF_TRY(meta_hparams(h, display, &m->hp));
	return meta_ids(h, display, m);
}

/* Exactly need bytes into a new buffer *out, which grows as they come
 * when the size of the input is unknown (a pipe), so that a hostile length
 * cannot make us allocate more than the input holds (from a file, need
 * was checked against its size).  Returns 0; 1 when the input ends first
 * (*have: the bytes it had; nothing kept); -1 on a read error (reported). */
static int read_exact(struct src *s, uint64_t need, unsigned char **out, uint64_t *have)
{
	size_t cap = s->left >= 0 || need < ((size_t)1 << 20) ? (size_t)need : (size_t)1 << 20;
	unsigned char *buf = ncf_xmalloc(cap);
	*have = 0;
	while (*have < need) {
		if (*have == cap) {
			cap = cap * 2 < need ? cap * 2 : (size_t)need;
			buf = ncf_xrealloc(buf, cap);
		}
		int64_t got = src_read(s, buf + *have, cap - *have);
		if (got <= 0) {
			free(buf);
			return got < 0 ? -1 : 1;
		}
		*have += (uint64_t)got;
	}
	*out = buf;
	return 0;
}

/* The D bytes of tensor data.  Returns 0 or -1 (reported). */
static int read_data(struct src *s, uint64_t D, unsigned char **out)
{
	uint64_t have;
	int rc = read_exact(s, D, out, &have);
	if (rc == 1)
		ncf_error("%s: the data ends after %llu of its %llu bytes (a truncated file)",
			  s->display, (unsigned long long)have, (unsigned long long)D);
	return rc == 0 ? 0 : -1;
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
	uint64_t have; /* of the header's N bytes */
	int rc;
	if (s->left >= 0 && (uint64_t)s->left < 8 + N) { /* known before reading a byte of it */
		have = (uint64_t)s->left - 8;
		rc = 1;
	} else {
		rc = read_exact(s, N, hb_out, &have);
	}
	if (rc == 1)
		ncf_error("%s: header length %llu runs past the end of the file (%llu bytes)", display,
			  (unsigned long long)N, (unsigned long long)have + 8);
	*N_out = N;
	return rc == 0 ? 0 : -1;
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
	NCF_TRY_GOTO(check_present(&h, display), fail);
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
