/*
 * export_onnx.c - NeuMF as an ONNX graph (ncf-infer --export F.onnx).
 *
 * Serialised with protobuf-c from C code that the build generates from the
 * onnx.proto of Debian's libonnx-dev (nothing generated is in the tree).
 * Without it (NO_ONNX=1, or the packages are missing) the export exits 3
 * and says what is missing.
 *
 * The graph (opset 13, and ai.onnx.ml 2 for LabelEncoder; IR version 7;
 * B is the batch, dynamic: the file names that dimension "N"; U users, I
 * items, F factors, M = H_0 / 2):
 *
 *   user, item            int64 [B]     original ids, as in the ratings file
 *                         (string [B] for a column whose ids are names,
 *                         names.h: the encoders then take keys_strings)
 *   user_row = LabelEncoder(user)        id -> row (ai.onnx.ml; unknown: 0)
 *   user_nan = LabelEncoder(user)        id -> 0.0f (unknown: NaN)
 *   item_row, item_nan    the same for items
 *   gmf  = Gather(mf_user_embed.weight, user_row) * Gather(mf_item_embed.weight, item_row)
 *   h_0  = Concat(Gather(mlp_user_embed.weight, user_row),
 *                 Gather(mlp_item_embed.weight, item_row), axis 1)      [B, 2M]
 *   h_k  = Relu(Gemm(h_k-1, mlp.K.weight, mlp.K.bias, transB = 1))      [B, H_k]
 *   logit = Reshape(Gemm(Concat(gmf, h_L), final.weight, final.bias, transB = 1), [-1])
 *   probability = Sigmoid(logit) + user_nan + item_nan   float32 [B]
 *
 * An unknown id is looked up as row 0 and its pair's probability made NaN
 * by adding NaN (x + 0.0f is x exactly, so known pairs are untouched).
 * The initializers have the names, shapes and layouts of the safetensors
 * export (NVIDIA's state_dict), raw little-endian data; the weight
 * matrices are [out, in], which Gemm reads with transB = 1.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "export.h"
#include "io.h"
#include "model_file.h"

#ifndef NCF_HAVE_ONNX

#ifndef NCF_ONNX_MISSING
#define NCF_ONNX_MISSING "the build was made with NO_ONNX=1"
#endif

void infer_export_describe(FILE *out)
{
	fprintf(out, "onnx export\tnot built: %s\n", NCF_ONNX_MISSING);
}

int infer_export_onnx(const struct ncf_model *m, const char *path)
{
	(void)m;
	(void)path;
	ncf_error("ONNX export is not built in (%s); --export F.safetensors works without it",
		  NCF_ONNX_MISSING);
	return -3;
}

#else

#include <protobuf-c/protobuf-c.h>

#include "onnx.pb-c.h"

/* Every allocation of the message tree, freed at once. */
struct arena {
	void **p;
	size_t n, cap;
};

static void *anew(struct arena *a, size_t size)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 256;
		a->p = ncf_xrealloc(a->p, a->cap * sizeof *a->p);
	}
	return a->p[a->n++] = ncf_xcalloc(1, size);
}

static char *astr(struct arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = anew(a, n);
	memcpy(d, s, n);
	return d;
}

static void arena_free(struct arena *a)
{
	for (size_t k = 0; k < a->n; k++)
		free(a->p[k]);
	free(a->p);
}

/* A tensor whose raw bytes are borrowed (data, bytes long). */
static Onnx__TensorProto *tensor(struct arena *a, const char *name, int32_t type,
				 const int64_t *dims, size_t ndims, const void *data, size_t bytes)
{
	Onnx__TensorProto *t = anew(a, sizeof *t);
	onnx__tensor_proto__init(t);
	t->name = astr(a, name);
	t->has_data_type = 1;
	t->data_type = type;
	t->n_dims = ndims;
	t->dims = anew(a, ndims * sizeof *t->dims + 1);
	memcpy(t->dims, dims, ndims * sizeof *dims);
	t->has_raw_data = 1;
	t->raw_data.len = bytes;
	t->raw_data.data = (uint8_t *)(uintptr_t)data;
	return t;
}

static Onnx__AttributeProto *attr(struct arena *a, const char *name,
				  Onnx__AttributeProto__AttributeType type)
{
	Onnx__AttributeProto *t = anew(a, sizeof *t);
	onnx__attribute_proto__init(t);
	t->name = astr(a, name);
	t->has_type = 1;
	t->type = type;
	return t;
}

static Onnx__AttributeProto *attr_int(struct arena *a, const char *name, int64_t v)
{
	Onnx__AttributeProto *t = attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	t->has_i = 1;
	t->i = v;
	return t;
}

static Onnx__AttributeProto *attr_float(struct arena *a, const char *name, float v)
{
	Onnx__AttributeProto *t = attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
	t->has_f = 1;
	t->f = v;
	return t;
}

static Onnx__AttributeProto *attr_ints(struct arena *a, const char *name, int64_t *v, size_t n)
{
	Onnx__AttributeProto *t = attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	t->n_ints = n;
	t->ints = v;
	return t;
}

/* The n names as a STRINGS attribute (the bytes borrowed from names). */
static Onnx__AttributeProto *attr_names(struct arena *a, const char *name,
					const struct ncf_names *names)
{
	Onnx__AttributeProto *t = attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
	t->n_strings = names->n;
	t->strings = anew(a, (size_t)names->n * sizeof *t->strings + 1);
	for (uint32_t k = 0; k < names->n; k++) {
		size_t len;
		const char *s = ncf_names_at(names, k, &len);
		t->strings[k].len = len;
		t->strings[k].data = (uint8_t *)(uintptr_t)s;
	}
	return t;
}

static Onnx__AttributeProto *attr_floats(struct arena *a, const char *name, float *v, size_t n)
{
	Onnx__AttributeProto *t = attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
	t->n_floats = n;
	t->floats = v;
	return t;
}

struct graph {
	struct arena *a;
	Onnx__NodeProto *node[64];
	size_t n_node;
	Onnx__TensorProto *init[32];
	size_t n_init;
};

/* One node: op (in domain; NULL: the default, "") from up to three inputs
 * to one output, with up to four attributes; the unused ones NULL. */
struct node {
	const char *op, *domain, *out;
	const char *in[3];
	Onnx__AttributeProto *attr[4];
};

static void add_node(struct graph *g, const struct node *nd)
{
	struct arena *a = g->a;
	Onnx__NodeProto *n = anew(a, sizeof *n);
	onnx__node_proto__init(n);
	char name[64];
	snprintf(name, sizeof name, "%s_%zu", nd->op, g->n_node);
	n->name = astr(a, name);
	n->op_type = astr(a, nd->op);
	n->domain = astr(a, nd->domain ? nd->domain : "");
	n->input = anew(a, 3 * sizeof *n->input);
	for (int k = 0; k < 3 && nd->in[k]; k++)
		n->input[n->n_input++] = astr(a, nd->in[k]);
	n->output = anew(a, sizeof *n->output);
	n->output[n->n_output++] = astr(a, nd->out);
	n->attribute = anew(a, 4 * sizeof *n->attribute);
	for (int k = 0; k < 4 && nd->attr[k]; k++)
		n->attribute[n->n_attribute++] = nd->attr[k];
	g->node[g->n_node++] = n;
}

/* A graph input or output: elem_type [B], the dimension named "N". */
static Onnx__ValueInfoProto *io_value(struct arena *a, const char *name, int32_t elem)
{
	Onnx__ValueInfoProto *v = anew(a, sizeof *v);
	onnx__value_info_proto__init(v);
	v->name = astr(a, name);
	Onnx__TypeProto *tp = anew(a, sizeof *tp);
	onnx__type_proto__init(tp);
	Onnx__TypeProto__Tensor *tt = anew(a, sizeof *tt);
	onnx__type_proto__tensor__init(tt);
	tt->has_elem_type = 1;
	tt->elem_type = elem;
	Onnx__TensorShapeProto *sh = anew(a, sizeof *sh);
	onnx__tensor_shape_proto__init(sh);
	Onnx__TensorShapeProto__Dimension *d = anew(a, sizeof *d);
	onnx__tensor_shape_proto__dimension__init(d);
	d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
	d->dim_param = astr(a, "N");
	sh->dim = anew(a, sizeof *sh->dim);
	sh->dim[sh->n_dim++] = d;
	tt->shape = sh;
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tp->tensor_type = tt;
	v->type = tp;
	return v;
}

/* out: the rows of table (an initializer) that the rows input names. */
static void gather(struct graph *g, const char *out, const char *table, const char *rows)
{
	add_node(g, &(struct node){.op = "Gather", .out = out, .in = {table, rows},
				   .attr = {attr_int(g->a, "axis", 0)}});
}

/* The id -> row and id -> 0/NaN encoders of one input. */
static void add_encoders(struct graph *g, const char *input, const uint32_t *ids,
			 const struct ncf_names *names, uint32_t n)
{
	struct arena *a = g->a;
	int64_t *keys = anew(a, (size_t)n * sizeof *keys);
	int64_t *rows = anew(a, (size_t)n * sizeof *rows);
	float *zeros = anew(a, (size_t)n * sizeof *zeros);
	for (uint32_t k = 0; k < n; k++)
		keys[k] = ids[k], rows[k] = k;
	char row[32], nan[32];
	snprintf(row, sizeof row, "%s_row", input);
	snprintf(nan, sizeof nan, "%s_nan", input);
	/* names: the string input's keys, one attribute both encoders share */
	Onnx__AttributeProto *key = names->n ? attr_names(a, "keys_strings", names)
					     : attr_ints(a, "keys_int64s", keys, n);
	add_node(g, &(struct node){.op = "LabelEncoder", .domain = "ai.onnx.ml", .out = row,
				   .in = {input},
				   .attr = {key, attr_ints(a, "values_int64s", rows, n),
					    attr_int(a, "default_int64", 0)}});
	add_node(g, &(struct node){.op = "LabelEncoder", .domain = "ai.onnx.ml", .out = nan,
				   .in = {input},
				   .attr = {key, attr_floats(a, "values_floats", zeros, n),
					    attr_float(a, "default_float", NAN)}});
}

static Onnx__TensorProto *weights(struct graph *g, const char *name, const float *p, int64_t d0,
				  int64_t d1)
{
	int64_t dims[2] = {d0, d1};
	size_t nd = d1 ? 2 : 1;
	Onnx__TensorProto *t = tensor(g->a, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims, nd, p,
				      (size_t)d0 * (size_t)(d1 ? d1 : 1) * sizeof(float));
	g->init[g->n_init++] = t;
	return t;
}

static Onnx__StringStringEntryProto *prop(struct arena *a, const char *key, const char *fmt,
					  ...) __attribute__((format(printf, 3, 4)));
static Onnx__StringStringEntryProto *prop(struct arena *a, const char *key, const char *fmt, ...)
{
	Onnx__StringStringEntryProto *e = anew(a, sizeof *e);
	onnx__string_string_entry_proto__init(e);
	char v[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	e->key = astr(a, key);
	e->value = astr(a, v);
	return e;
}

/* Stream the packed message into a file. */
struct fbuf {
	ProtobufCBuffer base;
	FILE *fp;
	int err;
};

static void fbuf_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct fbuf *f = (struct fbuf *)b;
	if (!f->err && len && fwrite(data, 1, len, f->fp) != len)
		f->err = errno ? errno : EIO;
}

void infer_export_describe(FILE *out)
{
	fprintf(out, "onnx export\tprotobuf-c %s (opset 13, ai.onnx.ml 2)\n",
		protobuf_c_version());
}

/* NeuMF's nodes and initializers into g (the graph at the top of this
 * file). */
static void build_neumf(struct graph *g, const struct ncf_model *m,
			const struct ncf_layout *L)
{
	const struct ncf_shape *s = &m->shape;
	struct arena *a = g->a;
	const float *p = m->params;
	int64_t U = s->users, I = s->items, F = s->factors, M = ncf_shape_m(s);
	char name[64], in[64], out[64];

	add_encoders(g, "user", m->user_ids, &m->user_names, s->users);
	add_encoders(g, "item", m->item_ids, &m->item_names, s->items);
	weights(g, "mf_user_embed.weight", p + L->gmf_user, U, F);
	weights(g, "mf_item_embed.weight", p + L->gmf_item, I, F);
	weights(g, "mlp_user_embed.weight", p + L->mlp_user, U, M);
	weights(g, "mlp_item_embed.weight", p + L->mlp_item, I, M);
	gather(g, "mf_user", "mf_user_embed.weight", "user_row");
	gather(g, "mf_item", "mf_item_embed.weight", "item_row");
	add_node(g, &(struct node){.op = "Mul", .out = "gmf", .in = {"mf_user", "mf_item"}});
	gather(g, "mlp_user", "mlp_user_embed.weight", "user_row");
	gather(g, "mlp_item", "mlp_item_embed.weight", "item_row");
	add_node(g, &(struct node){.op = "Concat", .out = "h_0", .in = {"mlp_user", "mlp_item"},
				   .attr = {attr_int(a, "axis", 1)}});
	for (uint32_t k = 1; k < s->n_layers; k++) {
		char w[32], b[32];
		snprintf(w, sizeof w, "mlp.%u.weight", k - 1);
		snprintf(b, sizeof b, "mlp.%u.bias", k - 1);
		weights(g, w, p + L->w[k], s->layers[k], s->layers[k - 1]);
		weights(g, b, p + L->b[k], s->layers[k], 0);
		snprintf(in, sizeof in, "h_%u", k - 1);
		snprintf(name, sizeof name, "z_%u", k);
		snprintf(out, sizeof out, "h_%u", k);
		add_node(g, &(struct node){.op = "Gemm", .out = name, .in = {in, w, b},
					   .attr = {attr_int(a, "transB", 1)}});
		add_node(g, &(struct node){.op = "Relu", .out = out, .in = {name}});
	}
	add_node(g, &(struct node){.op = "Concat", .out = "head_in", .in = {"gmf", out},
				   .attr = {attr_int(a, "axis", 1)}});
	weights(g, "final.weight", p + L->head_w, 1, F + ncf_shape_last(s));
	weights(g, "final.bias", p + L->head_b, 1, 0);
	add_node(g, &(struct node){.op = "Gemm", .out = "logit_2d",
				   .in = {"head_in", "final.weight", "final.bias"},
				   .attr = {attr_int(a, "transB", 1)}});
	static const int64_t minus_one = -1, one = 1;
	g->init[g->n_init++] = tensor(a, "flat", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &one, 1,
				      &minus_one, sizeof minus_one);
	add_node(g, &(struct node){.op = "Reshape", .out = "logit", .in = {"logit_2d", "flat"}});
	add_node(g, &(struct node){.op = "Sigmoid", .out = "score", .in = {"logit"}});
	add_node(g, &(struct node){.op = "Add", .out = "score_u", .in = {"score", "user_nan"}});
	add_node(g, &(struct node){.op = "Add", .out = "probability", .in = {"score_u", "item_nan"}});
}

/* The graph of g's nodes: its name, inputs (user, item) and output
 * (probability). */
static Onnx__GraphProto *graph_proto(struct graph *g, const struct ncf_model *m)
{
	struct arena *a = g->a;
	Onnx__GraphProto *gp = anew(a, sizeof *gp);
	onnx__graph_proto__init(gp);
	gp->name = astr(a, "neumf");
	gp->doc_string = astr(a, "NeuMF (ncf): the probability that user interacts with item, "
				 "both original ids; NaN for an id the model does not know");
	gp->n_node = g->n_node;
	gp->node = g->node;
	gp->n_initializer = g->n_init;
	gp->initializer = g->init;
	gp->n_input = 2;
	gp->input = anew(a, 2 * sizeof *gp->input);
	gp->input[0] = io_value(a, "user", m->user_names.n ? ONNX__TENSOR_PROTO__DATA_TYPE__STRING
							   : ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
	gp->input[1] = io_value(a, "item", m->item_names.n ? ONNX__TENSOR_PROTO__DATA_TYPE__STRING
							   : ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
	gp->n_output = 1;
	gp->output = anew(a, sizeof *gp->output);
	gp->output[0] = io_value(a, "probability", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
	return gp;
}

/* The model around graph gp: IR version, opsets, producer, ncf's
 * metadata. */
static void model_proto(struct arena *a, Onnx__ModelProto *model, Onnx__GraphProto *gp,
			const struct ncf_model *m)
{
	const struct ncf_shape *s = &m->shape;
	Onnx__OperatorSetIdProto **opp = anew(a, 2 * sizeof *opp);
	for (int k = 0; k < 2; k++) {
		opp[k] = anew(a, sizeof *opp[k]);
		onnx__operator_set_id_proto__init(opp[k]);
		opp[k]->domain = k ? "ai.onnx.ml" : "";
		opp[k]->has_version = 1;
		opp[k]->version = k ? 2 : 13;
	}
	char layers[128];
	size_t o = 0;
	for (uint32_t k = 0; k < s->n_layers; k++)
		o += (size_t)snprintf(layers + o, sizeof layers - o, "%s%u", k ? "," : "", s->layers[k]);
	enum { N_PROPS = 6 };
	Onnx__StringStringEntryProto **props = anew(a, N_PROPS * sizeof *props);
	props[0] = prop(a, "ncf.version", "%s", NCF_VERSION);
	props[1] = prop(a, "ncf.users", "%u", s->users);
	props[2] = prop(a, "ncf.items", "%u", s->items);
	props[3] = prop(a, "ncf.factors", "%u", s->factors);
	props[4] = prop(a, "ncf.layers", "%s", layers);
	props[5] = prop(a, "ncf.fingerprint", "%08x", ncf_model_file_fingerprint(m));
	onnx__model_proto__init(model);
	model->has_ir_version = 1;
	model->ir_version = 7;
	model->n_opset_import = 2;
	model->opset_import = opp;
	model->producer_name = "ncf";
	model->producer_version = NCF_VERSION;
	model->doc_string = "NeuMF, Neural Collaborative Filtering (ncf-infer --export)";
	model->graph = gp;
	model->n_metadata_props = N_PROPS;
	model->metadata_props = props;
}

/* Pack model into path.  Returns 0 or -1 (reported). */
static int write_model(const Onnx__ModelProto *model, const char *path, const struct graph *g)
{
	size_t size = protobuf_c_message_get_packed_size(&model->base);
	if (size > (size_t)INT32_MAX) {
		ncf_error("%s: the ONNX model would be %zu bytes, over protobuf's 2 GiB limit; "
			  "export .safetensors instead",
			  path, size);
		return -1;
	}
	struct ncf_out of;
	if (ncf_out_open(&of, path, 1) != 0)
		return -1;
	struct fbuf fb = {{fbuf_append}, of.fp, 0};
	errno = 0;
	protobuf_c_message_pack_to_buffer(&model->base, &fb.base);
	if (fb.err)
		ncf_error("%s: write failed: %s", of.display, strerror(fb.err));
	if (ncf_out_end(&of, fb.err) != 0)
		return -1;
	ncf_debug("%s: %zu bytes of ONNX (%zu nodes, %zu initializers)", of.display, size,
		  g->n_node, g->n_init);
	return 0;
}

int infer_export_onnx(const struct ncf_model *m, const char *path)
{
	if (!m->user_ids || !m->item_ids) {
		ncf_error("the model has no original ids, which the ONNX graph maps to rows; give the "
			  "cache it was trained on with --ids CACHE");
		return -1;
	}
	struct arena ar = {0};
	struct graph g = {.a = &ar};
	struct ncf_layout L;
	ncf_layout_make(&m->shape, &L);
	build_neumf(&g, m, &L);
	Onnx__ModelProto model;
	model_proto(&ar, &model, graph_proto(&g, m), m);
	int rc = write_model(&model, path, &g);
	arena_free(&ar);
	return rc;
}

#endif
