/*
 * test_safetensors.c - the safetensors reader and writer (common/safetensors.c)
 * and the model loader in front of them (common/model_file.c).
 *
 * Round trips: a small random model with ids and unusual hyperparameters,
 * written and read back field by field and bit by bit; the same without
 * ids; a hand-written header with the tensors in reverse order, escaped
 * names, white space and fields the reader does not know.  Then a table of
 * bad files made by editing the written header (and the length before it)
 * as text: each must be refused with -1 and a message that names the
 * tensor or the field.  The CLI tests (tests/cli/export.t) compare the
 * main messages with expected files; this file covers the corners of the
 * JSON and of the metadata.  It also checks that a build without ONNX
 * says so and returns -3 (ncf-infer exits 3).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "helpers.h"
#include "io.h"
#include "model_file.h"
#include "safetensors.h"
#include "tap.h"

/* The ONNX writer as built without protobuf-c (the unit tests never define
 * NCF_HAVE_ONNX): it must refuse with -3. */
#undef NCF_HAVE_ONNX
#include "../../ncf-infer/export_onnx.c"

static char dir[256];

/* ---- a small model -------------------------------------------------- */

static const uint32_t USER_IDS[5] = {10, 11, 12, 20, 7};
static const uint32_t ITEM_IDS[4] = {3, 1, 2, 4000000000u};

static void make_model(struct ncf_model *m)
{
	memset(m, 0, sizeof *m);
	struct ncf_shape s = {.users = 5, .items = 4, .factors = 3, .n_layers = 3,
			      .layers = {4, 6, 2}};
	m->shape = s;
	ncf_hparams_nvidia(&m->hp);
	m->hp.lr = 0.25f;
	m->hp.beta1 = 0.1f;
	m->hp.dropout = 0.0f;
	m->hp.batch = 12345;
	m->hp.seed = 18446744073709551615ull;
	m->hp.true_neg = 1;
	m->hp.negatives = 7;
	struct ncf_layout L;
	ncf_layout_make(&s, &L);
	m->params = ncf_xmalloc(L.total * sizeof(float));
	for (size_t k = 0; k < L.total; k++)
		m->params[k] = (float)((int)(k * 2654435761u % 2001) - 1000) / 997.0f;
	m->user_ids = ncf_xmalloc(sizeof USER_IDS);
	m->item_ids = ncf_xmalloc(sizeof ITEM_IDS);
	memcpy(m->user_ids, USER_IDS, sizeof USER_IDS);
	memcpy(m->item_ids, ITEM_IDS, sizeof ITEM_IDS);
}

static int same_model(const struct ncf_model *a, const struct ncf_model *b, int ids)
{
	struct ncf_layout L;
	ncf_layout_make(&a->shape, &L);
	int ok = !memcmp(&a->shape, &b->shape, sizeof a->shape) &&
		 !memcmp(a->params, b->params, L.total * sizeof(float));
	if (ids)
		ok = ok && b->user_ids && b->item_ids &&
		     !memcmp(a->user_ids, b->user_ids, a->shape.users * sizeof(uint32_t)) &&
		     !memcmp(a->item_ids, b->item_ids, a->shape.items * sizeof(uint32_t));
	else
		ok = ok && !b->user_ids && !b->item_ids;
	return ok;
}

/* ---- file images edited as text ------------------------------------- */

static unsigned char *good;	/* the written file */
static size_t good_n, good_hlen;

/* A new image: good's header with the first `from` replaced by `to`
 * (from NULL: unchanged), then extra bytes appended to the data (or
 * cut bytes taken off it). */
static unsigned char *edit(const char *from, const char *to, size_t cut, size_t *n)
{
	const char *h = (const char *)good + 8;
	size_t hl = good_hlen;
	char *nh = ncf_xmalloc(hl + (to ? strlen(to) : 0) + 1);
	size_t o = 0;
	const char *at = from ? memmem(h, hl, from, strlen(from)) : NULL;
	if (from && !at) {
		tap_diag("edit: '%s' is not in the header", from);
		at = NULL;
	}
	if (at) {
		memcpy(nh, h, (size_t)(at - h));
		o = (size_t)(at - h);
		memcpy(nh + o, to, strlen(to));
		o += strlen(to);
		size_t rest = hl - (size_t)(at - h) - strlen(from);
		memcpy(nh + o, at + strlen(from), rest);
		o += rest;
	} else {
		memcpy(nh, h, hl);
		o = hl;
	}
	size_t data = good_n - 8 - hl - cut;
	unsigned char *img = ncf_xmalloc(8 + o + data + 1);
	ncf_put_u64(img, o);
	memcpy(img + 8, nh, o);
	memcpy(img + 8 + o, good + 8 + hl, data);
	free(nh);
	*n = 8 + o + data;
	return img;
}

/* Read an image; 1 when it was refused with a message holding want. */
static int refused(const unsigned char *img, size_t n, const struct ncf_model_want *w,
		   const char *want)
{
	struct ncf_model m;
	helper_capture_begin();
	int rc = ncf_safetensors_read_mem(img, n, "t.safetensors", w, &m);
	char *msg = helper_capture_end();
	if (rc == 0)
		ncf_model_free(&m);
	int ok = rc == -1 && strstr(msg, want) && strstr(msg, "t.safetensors: ") &&
		 strchr(msg, '\n') == msg + strlen(msg) - 1;
	if (!ok)
		tap_diag("rc %d, message: %s(want '%s')", rc, msg, want);
	free(msg);
	return ok;
}

static int edit_refused(const char *from, const char *to, size_t cut, const char *want)
{
	size_t n;
	unsigned char *img = edit(from, to, cut, &n);
	int ok = refused(img, n, NULL, want);
	free(img);
	return ok;
}

/* ---- cases ---------------------------------------------------------- */

/* good's header without the entries of the named tensors (the data as
 * is: the holes they leave come second to the names). */
static unsigned char *without(const char *const *names, int n, size_t *len)
{
	char *h = ncf_xmalloc(good_hlen + 1);
	memcpy(h, good + 8, good_hlen);
	h[good_hlen] = 0;
	for (int k = 0; k < n; k++) {
		char key[64];
		snprintf(key, sizeof key, ",\"%s\":{", names[k]);
		char *at = strstr(h, key), *end = at ? strchr(at, '}') : NULL;
		if (end)
			memmove(at, end + 1, strlen(end + 1) + 1);
	}
	size_t hl = strlen(h), data = good_n - 8 - good_hlen;
	unsigned char *img = ncf_xmalloc(8 + hl + data);
	ncf_put_u64(img, hl);
	memcpy(img + 8, h, hl);
	memcpy(img + 8 + hl, good + 8 + good_hlen, data);
	free(h);
	*len = 8 + hl + data;
	return img;
}

/* The state_dict of the test model (F 3, layers 4,6,2) without mlp.1 and
 * with final.weight [1, 3 + head_in], as a file whose data is exactly its
 * tensors (zeros): what a state_dict of a model that lost its last layer
 * looks like. */
static unsigned char *one_layer(unsigned head_in, size_t *len)
{
	static const char *const names[7] = {"mf_user_embed.weight", "mf_item_embed.weight",
					     "mlp_user_embed.weight", "mlp_item_embed.weight",
					     "mlp.0.weight", "mlp.0.bias", "final.weight"};
	char shapes[8][16] = {"[5,3]", "[4,3]", "[5,2]", "[4,2]", "[6,4]", "[6]", "", "[1]"};
	size_t count[8] = {15, 12, 10, 8, 24, 6, 3 + head_in, 1};
	snprintf(shapes[6], sizeof shapes[6], "[1,%u]", 3 + head_in);
	char hdr[2048];
	size_t o = (size_t)snprintf(hdr, sizeof hdr, "{"), at = 0;
	for (int k = 0; k < 8; k++) {
		o += (size_t)snprintf(hdr + o, sizeof hdr - o,
				      "%s\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
				      k ? "," : "", k < 7 ? names[k] : "final.bias", shapes[k], at,
				      at + 4 * count[k]);
		at += 4 * count[k];
	}
	o += (size_t)snprintf(hdr + o, sizeof hdr - o, "}");
	unsigned char *img = ncf_xcalloc(8 + o + at, 1);
	ncf_put_u64(img, o);
	memcpy(img + 8, hdr, o);
	*len = 8 + o + at;
	return img;
}

static void t_missing_layer(void)
{
	static const char *const mlp0[2] = {"mlp.0.weight", "mlp.0.bias"};
	size_t n;
	unsigned char *img = without(mlp0, 2, &n);
	tap_ok(refused(img, n, NULL, "t.safetensors: tensors 'mlp.0.weight' and 'mlp.0.bias' are "
				     "missing (NVIDIA's NeuMF state_dict has them)"),
	       "mlp.0 gone, mlp.1 there: both tensors of mlp.0 named");
	free(img);
}

static void t_missing_last_layer(void)
{
	size_t n;
	unsigned char *img = one_layer(2, &n);
	tap_ok(refused(img, n, NULL, "tensors 'mlp.1.weight' and 'mlp.1.bias' are missing: "
				     "'final.weight' (shape [1, 5]) takes 2 MLP outputs, the last "
				     "layer present ('mlp.0') gives 6"),
	       "final.weight takes 2 MLP outputs, mlp.0 gives 6: mlp.1's tensors named");
	free(img);
	img = one_layer(6, &n);
	struct ncf_model m;
	int rc = ncf_safetensors_read_mem(img, n, "t.safetensors", NULL, &m);
	tap_ok(rc == 0 && m.shape.n_layers == 2 && m.shape.layers[1] == 6,
	       "final.weight [1, 3 + 6] after mlp.0: a model of one hidden layer, read");
	if (rc == 0)
		ncf_model_free(&m);
	free(img);
}

/* An unknown field of a tensor holding arrays nested d deep. */
static unsigned char *nested(int d, size_t *n)
{
	char to[200];
	size_t o = (size_t)snprintf(to, sizeof to, "\"x\":");
	for (int k = 0; k < d; k++)
		to[o++] = '[';
	to[o++] = '1';
	for (int k = 0; k < d; k++)
		to[o++] = ']';
	snprintf(to + o, sizeof to - o, ",\"dtype\":\"F32\"");
	return edit("\"dtype\":\"F32\"", to, 0, n);
}

static void t_depth(void)
{
	size_t n;
	unsigned char *img = nested(63, &n);
	struct ncf_model m;
	int rc = ncf_safetensors_read_mem(img, n, "t.safetensors", NULL, &m);
	tap_ok(rc == 0, "63 arrays deep (the value at depth 64): read");
	if (rc == 0)
		ncf_model_free(&m);
	free(img);
	img = nested(64, &n);
	tap_ok(refused(img, n, NULL, "tensor 'mf_user_embed.weight': 'x': values nested more than "
				     "64 deep"),
	       "64 arrays deep: refused, as the reader before jansson did");
	free(img);
}

/* A header of 256 KiB, nearly all of it "1," in a field ncf does not know:
 * jansson would build some 6 MB from it; refused at 4 times the header
 * (plus 1 MiB) instead. */
static void t_json_memory(void)
{
	size_t ones = 128 * 1024, n;
	char *to = ncf_xmalloc(2 * ones + 64);
	size_t o = (size_t)sprintf(to, "\"x\":[");
	for (size_t k = 0; k < ones; k++)
		o += (size_t)sprintf(to + o, k ? ",1" : "1");
	sprintf(to + o, "],\"dtype\":\"F32\"");
	unsigned char *img = edit("\"dtype\":\"F32\"", to, 0, &n);
	tap_ok(refused(img, n, NULL, "header: more JSON values than a safetensors header holds"),
	       "128Ki small values: refused before jansson takes 6 MB");
	free(img);
	free(to);
}

/* ---- the model written, read back ------------------------------------- */

static char path[512], path2[512]; /* the model's file, and one more */
static struct ncf_model m;	   /* the model written */
static struct ncf_layout L;

static void t_write(void)
{
	tap_ok(ncf_safetensors_write(&m, path) == 0, "ncf_safetensors_write returns 0");
	good = helper_read_file(path, &good_n);
	good_hlen = good ? ncf_get_u64(good) : 0;
	tap_ok(good != NULL, "the file is there");
}

static void t_alignment(void)
{
	tap_ok(good && (8 + good_hlen) % 8 == 0 && good[8] == '{', "the data at byte %zu",
	       8 + good_hlen);
}

static void t_data_as_is(void)
{
	tap_ok(good && good_n == 8 + good_hlen + 4 * L.total &&
		       !memcmp(good + 8 + good_hlen, m.params, 4 * L.total),
	       "%zu floats after the header", L.total);
}

static void t_id_runs(void)
{
	tap_ok(good && memmem(good, good_n, "\"ncf.user_ids\":\"10-12,20,7\"", 27),
	       "the user ids 10-12,20,7");
	tap_ok(good && memmem(good, good_n, "\"ncf.item_ids\":\"3,1-2,4000000000\"", 33),
	       "the item ids 3,1-2,4000000000");
}

static void t_read_back(void)
{
	struct ncf_model r;
	int rc = ncf_model_file_read(path, NULL, &r);
	tap_ok(rc == 0 && same_model(&m, &r, 1), "the same shape, parameters and ids");
	tap_ok(rc == 0 && !memcmp(&m.hp, &r.hp, sizeof m.hp), "the same hyperparameters");
	if (rc == 0)
		ncf_model_free(&r);
}

static void t_read_for_cache(void)
{
	struct ncf_model r;
	struct ncf_model_want w = {5, 4};
	int rc = ncf_model_file_read(path, &w, &r);
	tap_ok(rc == 0, "ncf_model_file_read returns 0");
	if (rc == 0)
		ncf_model_free(&r);
}

static void t_no_ids(void)
{
	struct ncf_model noids = m, r;
	noids.user_ids = noids.item_ids = NULL;
	int rc = ncf_safetensors_write(&noids, path2) == 0 ? ncf_model_file_read(path2, NULL, &r) : -1;
	tap_ok(rc == 0 && same_model(&m, &r, 0), "written and read back without ids");
	if (rc == 0)
		ncf_model_free(&r);
}

/* A hand-written header for m: the tensors in reverse order, escaped names,
 * white space, unknown fields; no metadata.  Its image read into *r. */
static int read_hand_written(struct ncf_model *r)
{
	char hdr[4096];
	size_t o = 0;
	static const char *const names[10] = {
		"final.bias", "final.weight", "mlp.1.bias", "mlp.1.weight", "mlp.0.bias",
		"mlp.0.weight", "mlp_item_embed.weight", "mlp_user_embed.weight",
		"mf_item_embed.weight", "\\u006df_user_embed.weight"};
	/* layout slots of those, and their shapes */
	size_t off[10] = {L.head_b, L.head_w, L.b[2], L.w[2], L.b[1], L.w[1], L.mlp_item, L.mlp_user, L.gmf_item, L.gmf_user};
	static const char *const shapes[10] = {"[1]", "[1, 5]", "[2]", "[2,6]", "[6]",
					       "[ 6 , 4 ]", "[4,2]", "[5,2]", "[4,3]", "[5,3]"};
	size_t len[10] = {1, 5, 2, 12, 6, 24, 8, 10, 12, 15};
	unsigned char *data = ncf_xmalloc(4 * L.total);
	size_t at = 0;
	o += (size_t)snprintf(hdr + o, sizeof hdr - o, "\n{ ");
	for (int k = 0; k < 10; k++) {
		memcpy(data + at, m.params + off[k], 4 * len[k]);
		o += (size_t)snprintf(hdr + o, sizeof hdr - o,
				      "%s\"%s\" : {\"extra\": {\"a\": [1, -2.5e3, true, null, "
				      "\"x\\\"\"], \"b\": {}}, \"data_offsets\":[%zu,%zu],\n"
				      "\t\"shape\": %s, \"dtype\": \"F32\"}",
				      k ? ", " : "", names[k], at, at + 4 * len[k], shapes[k]);
		at += 4 * len[k];
	}
	o += (size_t)snprintf(hdr + o, sizeof hdr - o, "}  \r\n");
	unsigned char *img = ncf_xmalloc(8 + o + at);
	ncf_put_u64(img, o);
	memcpy(img + 8, hdr, o);
	memcpy(img + 8 + o, data, at);
	int rc = ncf_safetensors_read_mem(img, 8 + o + at, "hand.safetensors", NULL, r);
	free(img);
	free(data);
	return rc;
}

static void t_hand_written(void)
{
	struct ncf_model r;
	int rc = read_hand_written(&r);
	tap_ok(rc == 0 && same_model(&m, &r, 0), "read as the model without ids");
	if (rc == 0)
		ncf_model_free(&r);
}

static void t_hand_written_defaults(void)
{
	struct ncf_model r;
	struct ncf_hparams nv;
	ncf_hparams_nvidia(&nv);
	int rc = read_hand_written(&r);
	tap_ok(rc == 0 && !memcmp(&nv, &r.hp, sizeof nv), "ncf_hparams_nvidia's");
	if (rc == 0)
		ncf_model_free(&r);
}

/* ---- refused: the written header edited ---------------------------------- */

static char deep_field[256]; /* an unknown field 70 arrays deep, then the dtype */

static void make_deep_field(void)
{
	size_t o = (size_t)snprintf(deep_field, sizeof deep_field, "\"x\":");
	for (int d = 0; d < 70; d++)
		deep_field[o++] = '[';
	deep_field[o++] = '1';
	for (int d = 0; d < 70; d++)
		deep_field[o++] = ']';
	snprintf(deep_field + o, sizeof deep_field - o, ",\"dtype\":\"F32\"");
}

/* The header's first `from` replaced by `to` (cut: bytes taken off the
 * data), and the message that names what is wrong. */
static const struct {
	const char *from, *to;
	size_t cut;
	const char *want;
} bad[] = {
		{"\"dtype\":\"F32\"", "\"dtype\":\"BF16\"", 0, "tensor 'mf_user_embed.weight': dtype BF16, but ncf reads F32 only"},
		{"\"shape\":[5,3]", "\"shape\":[5,3,1]", 0, "tensor 'mf_user_embed.weight': shape [5, 3, 1] but the model needs [U, F]"},
		{"\"shape\":[4,3]", "\"shape\":[3,4]", 0, "tensor 'mf_item_embed.weight': shape [3, 4] but the model needs [I, 3]"},
		{"\"shape\":[6,4]", "\"shape\":[3,8]", 0, "tensor 'mlp.0.weight': shape [3, 8] but the model needs [out, 4]"},
		{"\"shape\":[1,5]", "\"shape\":[5,1]", 0, "tensor 'final.weight': shape [5, 1] but the model needs [1, 5]"},
		{"\"shape\":[5,3]", "\"shape\":[4294967296,4294967296,4294967296]", 0, "shape [4294967296, 4294967296, 4294967296] is more than 2^64 bytes"},
		{"\"shape\":[5,3]", "\"shape\":[5,4]", 0, "tensor 'mf_user_embed.weight': shape [5, 4] is 80 bytes of F32 but data_offsets [0, 60] hold 60"},
		{"\"shape\":[5,3]", "\"shape\":[5,-3]", 0, "tensor 'mf_user_embed.weight': 'shape' must be up to 8 non-negative integers"},
		{"\"shape\":[5,3]", "\"shape\":[1,1,1,1,1,1,1,1,15]", 0, "more than 8 dimensions"},
		{"\"data_offsets\":[0,60]", "\"data_offsets\":[0,60,64]", 0, "'data_offsets' must be two"},
		{"\"data_offsets\":[0,60]", "\"data_offsets\":[0,6e1]", 0, "'data_offsets' must be two non-negative integers"},
		{"\"data_offsets\":[0,60]", "\"data_offsets\":[60,0]", 0, "data_offsets [60, 0] end before they begin"},
		{"\"data_offsets\":[60,108]", "\"data_offsets\":[56,104]", 0, "tensors 'mf_user_embed.weight' and 'mf_item_embed.weight' overlap (data_offsets [0, 60] and [56, 104])"},
		{"\"data_offsets\":[0,60]", "\"data_offsets\":[4,64]", 0, "bytes 0 to 4 of the data belong to no tensor (before tensor 'mf_user_embed.weight')"},
		{"\"data_offsets\":[0,60]", "\"data_offsets\":[0,60],\"dtype\":\"F32\"", 0, "header byte 455: duplicate object key near '\"dtype\"'"},
		{",\"data_offsets\":[0,60]", "", 0, "tensor 'mf_user_embed.weight': no 'data_offsets'"},
		{"\"mf_user_embed.weight\"", "\"mf_user_embed.weight\\u0000\"", 0, "NUL byte in object key not supported"},
		{"\"mlp.1.weight\"", "\"mlp.01.weight\"", 0, "unexpected tensor 'mlp.01.weight'"},
		{"\"mlp.1.weight\"", "\"module.mlp.1.weight\"", 0, "strip the 'module.' that DistributedDataParallel adds"},
		{"\"mlp.1.bias\"", "\"mlp.0.bias\"", 0, "duplicate object key near '\"mlp.0.bias\"'"},
		{"\"format\":\"pt\"", "\"format\":7", 0, "__metadata__: the value of 'format' is not a string"},
		{"\"format\":\"pt\"", "\"format\":\"pt\",\"format\":\"pt\"", 0, "header byte 39: duplicate object key near '\"format\"'"},
		{"{\"__metadata__\"", "{\"__metadata__\":{},\"__metadata__\"", 0, "duplicate object key near '\"__metadata__\"'"},
		{"\"format\":\"pt\"", "\"format\":\"\\ud800\"", 0, "invalid Unicode '\\uD800'"},
		{"\"format\":\"pt\"", "\"format\":\"\\udc00\"", 0, "invalid Unicode '\\uDC00'"},
		{"\"format\":\"pt\"", "\"format\":\"p\tt\"", 0, "control character 0x9"},
		{"\"format\":\"pt\"", "\"format\":\"p\\qt\"", 0, "invalid escape"},
		{"\"format\":\"pt\"", "\"format\":\"p\xfft\"", 0, "header byte 28: unable to decode byte 0xff"},
		{"\"format\":\"pt\"", "\"format\":\"p\xc0\xaft\"", 0, "unable to decode byte 0xc0"},
		{"\"format\":\"pt\"", "\"format\" \"pt\"", 0, "':' expected near '\"pt\"'"},
		{"\"format\":\"pt\",", "\"format\":\"pt\",}", 0, "string or '}' expected"},
		{"\"dtype\":\"F32\"", deep_field, 0, "nested more than 64 deep"},
		{"\"dtype\":\"F32\"", "\"x\":01,\"dtype\":\"F32\"", 0, "invalid token near '0'"},
		{"\"dtype\":\"F32\"", "\"x\":1 2,\"dtype\":\"F32\"", 0, "t.safetensors: header byte 405: '}' expected near '2'"},
		{"\"dtype\":\"F32\"", "\"x\":1.,\"dtype\":\"F32\"", 0, "invalid token near '1.'"},
		{"\"dtype\":\"F32\"", "\"x\":tru,\"dtype\":\"F32\"", 0, "invalid token near 'tru'"},
		{"\"ncf.users\":\"5\"", "\"ncf.users\":\"6\"", 0, "metadata 'ncf.users': '6' disagrees with the tensors (5)"},
		{"\"ncf.factors\":\"3\"", "\"ncf.factors\":\"3x\"", 0, "metadata 'ncf.factors': '3x' is not a number"},
		{"\"ncf.layers\":\"4,6,2\"", "\"ncf.layers\":\"4,6,3\"", 0, "metadata 'ncf.layers': '4,6,3' disagrees with the tensors (4,6,2)"},
		{"\"ncf.lr\":\"0.25\"", "\"ncf.lr\":\"-1\"", 0, "metadata 'ncf.lr': '-1' is not a number in ncf-train's range"},
		{"\"ncf.beta1\":\"0.1\"", "\"ncf.beta1\":\"1\"", 0, "metadata 'ncf.beta1': '1' is not a number"},
		{"\"ncf.batch\":\"12345\"", "\"ncf.batch\":\"0\"", 0, "metadata 'ncf.batch': '0' is not a number"},
		{"\"10-12,20,7\"", "\"10-12,20,20\"", 0, "metadata 'ncf.user_ids': id 20 appears twice"},
		{"\"10-12,20,7\"", "\"10-12,20\"", 0, "metadata 'ncf.user_ids' lists 4 ids but the model has 5 rows"},
		{"\"10-12,20,7\"", "\"10-12,20,7,8\"", 0, "metadata 'ncf.user_ids' lists more ids than the model's 5 rows"},
		{"\"10-12,20,7\"", "\"10-12,20,7,\"", 0, "metadata 'ncf.user_ids': '7,' at byte 9 is not an id"},
		{"\"10-12,20,7\"", "\"12-10,20,7\"", 0, "metadata 'ncf.user_ids': '12-10,20,7' at byte 0 is not an id or a run first-last"},
		{"\"10-12,20,7\"", "\"10-12,20,4294967296\"", 0, "is not an id or a run"},
		{",\"ncf.item_ids\":\"3,1-2,4000000000\"", "", 0, "metadata has 'ncf.user_ids' but not 'ncf.item_ids'"},
		{",\"final.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[376,380]}", "", 0, "no tensor 'final.bias' (NVIDIA's NeuMF state_dict has it)"},
		{NULL, NULL, 4, "tensor 'final.bias': data_offsets [376, 380] run past the end of the file (376 bytes of data)"},
		{"}}", "}}x", 0, "end of file expected near 'x'"},
};

static void t_edit(size_t k)
{
	tap_ok(edit_refused(bad[k].from, bad[k].to, bad[k].cut, bad[k].want), "-1 and the message");
}

/* ---- refused: whole files ------------------------------------------------ */

/* good with its header length set to hlen (0: as is), the first n bytes
 * (0: all): refused with want. */
static void t_header_length(uint64_t hlen, size_t n, const char *want)
{
	size_t len;
	unsigned char *img = edit(NULL, NULL, 0, &len);
	if (hlen)
		ncf_put_u64(img, hlen == UINT64_MAX ? len : hlen);
	tap_ok(refused(img, n ? n : len, NULL, want), "refused: %s", want);
	free(img);
}

static void t_data_after(void)
{
	unsigned char *img = ncf_xmalloc(good_n + 4);
	memcpy(img, good, good_n);
	memset(img + good_n, 0, 4);
	tap_ok(refused(img, good_n + 4, NULL, "4 bytes after the last tensor"),
	       "4 bytes after the last tensor");
	free(img);
}

static void t_nan_weight(void)
{
	unsigned char *img = ncf_xmalloc(good_n);
	memcpy(img, good, good_n);
	float nan = NAN;
	memcpy(img + 8 + good_hlen + 4 * (L.w[1] + 3), &nan, 4);
	tap_ok(refused(img, good_n, NULL, "tensor 'mlp.0.weight': element 3 is nan"),
	       "element 3 of mlp.0.weight named");
	free(img);
}

static void t_no_tensors(void)
{
	unsigned char empty[10] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
	tap_ok(refused(empty, 10, NULL, "tensors 'mf_user_embed.weight', 'mf_item_embed.weight', "),
	       "the missing tensors named");
}

/* The model (5 users, 4 items) against a cache of users and items. */
static void t_against_cache(uint32_t users, uint32_t items, const char *want)
{
	struct ncf_model_want w = {users, items};
	tap_ok(refused(good, good_n, &w, want), "refused: %s", want);
}

/* The loader: a checkpoint's magic goes to the checkpoint reader. */
static void t_checkpoint_magic(void)
{
	struct ncf_model r;
	snprintf(path2, sizeof path2, "%s/x.ncfm", dir);
	helper_write_file(path2, "NCFCACHE garbage", 16);
	helper_capture_begin();
	int rc = ncf_model_file_read(path2, NULL, &r);
	char *msg = helper_capture_end();
	tap_ok(rc == -1 && strstr(msg, "not a usable ncf-train checkpoint"),
	       "refused as a checkpoint (%s)", rc ? "refused" : "accepted");
	free(msg);
	unlink(path2);
}

/* Without ONNX: -3 and what is missing. */
static void t_no_onnx(void)
{
	helper_capture_begin();
	int rc = infer_export_onnx(&m, path2);
	char *msg = helper_capture_end();
	if (!tap_ok(rc == -3 && strstr(msg, "ONNX export is not built in ("), "-3 and the reason"))
		tap_diag("rc %d, message: %s", rc, msg);
	free(msg);
}

static void round_trips(void)
{
	TEST(t_write(), "write a 5-user, 4-item model with ids");
	TEST(t_alignment(), "the header starts with '{' and the data at a multiple of 8");
	TEST(t_data_as_is(), "the data is the parameter vector as is");
	TEST(t_id_runs(), "ids as runs of consecutive ids");
	TEST(t_read_back(), "read back: the same shape, parameters, ids and hyperparameters");
	TEST(t_read_for_cache(), "read against a cache of 5 users and 4 items");
	TEST(t_no_ids(), "a model without ids: read back without ids");
	TEST(t_hand_written(),
	     "tensors in reverse order, escaped names, unknown fields: the same model");
	TEST(t_hand_written_defaults(), "no metadata: NVIDIA's hyperparameters");
}

static void refusals(void)
{
	make_deep_field();
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
		TEST(t_edit(k), "refused: %s", bad[k].want);
	TEST(t_header_length(0, 5, "5 bytes, too short for a safetensors file"), "5 bytes: too short");
	TEST(t_header_length(1, 0, "header length 1 is too small"), "header length 1: too small");
	TEST(t_header_length(100000001, 0, "over the format's limit of 100000000"),
	     "header length over the limit");
	TEST(t_header_length(UINT64_MAX, 0, "runs past the end of the file"),
	     "header length past the end");
	TEST(t_data_after(), "data after the last tensor");
	TEST(t_nan_weight(), "a NaN weight");
	TEST(t_no_tensors(), "{}: no tensors");
	TEST(t_against_cache(6, 0, "tensor 'mf_user_embed.weight': shape [5, 3] but the cache has 6 users"),
	     "5 users against a cache of 6");
	TEST(t_against_cache(5, 3, "tensor 'mf_item_embed.weight': shape [4, 3] but the cache has 3 items"),
	     "4 items against a cache of 3");
	TEST(t_missing_layer(), "a state_dict without a layer in the middle names its tensors");
	TEST(t_missing_last_layer(), "a state_dict without its last layer names its tensors");
	TEST(t_depth(), "unknown fields nested at most 64 deep");
	TEST(t_json_memory(), "jansson's memory bounded by the header's size");
	TEST(t_checkpoint_magic(), "a file starting NCF is read as a checkpoint");
	TEST(t_no_onnx(), "a build without ONNX: -3 and the reason");
}

int main(int argc, char **argv)
{
	ncf_set_progname(argv[0]);
	helper_make_tmpdir(dir, sizeof dir, "ncf-st");
	snprintf(path, sizeof path, "%s/m.safetensors", dir);
	snprintf(path2, sizeof path2, "%s/noids.safetensors", dir);
	make_model(&m);
	ncf_layout_make(&m.shape, &L);
	round_trips();
	refusals();
	ncf_model_free(&m);
	free(good);
	unlink(path);
	snprintf(path, sizeof path, "%s/noids.safetensors", dir);
	unlink(path);
	rmdir(dir);
	return tap_done();
}
