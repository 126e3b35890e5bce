/*
 * dnnl.c - the part of the oneDNN C API that changed between 2.x and 3.x
 * (see dnnl.h): 2.x builds an operation descriptor and then a primitive
 * descriptor from it, with memory descriptors as structs; 3.x creates the
 * primitive descriptor directly, with memory descriptors as handles, and
 * its post-ops lost the scale argument of eltwise.  Nothing else here.
 */
#ifdef NCF_HAVE_DNNL
#include "dnnl.h"

static dnnl_status_t make_attr(dnnl_primitive_attr_t *attr, const struct ncf_dnnl_mm *d)
{
	dnnl_status_t st = dnnl_primitive_attr_create(attr);
	if (st != dnnl_success)
		return st;
	st = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
	if (st != dnnl_success || (!d->sum && !d->relu))
		return st;
	dnnl_post_ops_t po;
	st = dnnl_post_ops_create(&po);
	if (st != dnnl_success)
		return st;
#if DNNL_VERSION_MAJOR >= 3
	if (d->sum)
		st = dnnl_post_ops_append_sum(po, 1.0f, 0, dnnl_data_type_undef);
	if (st == dnnl_success && d->relu)
		st = dnnl_post_ops_append_eltwise(po, dnnl_eltwise_relu, 0.0f, 0.0f);
#else
	if (d->sum)
		st = dnnl_post_ops_append_sum(po, 1.0f);
	if (st == dnnl_success && d->relu)
		st = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
#endif
	if (st == dnnl_success)
		st = dnnl_primitive_attr_set_post_ops(*attr, po);
	dnnl_post_ops_destroy(po);
	return st;
}

dnnl_status_t ncf_dnnl_matmul_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t e,
				 const struct ncf_dnnl_mm *d)
{
	dnnl_data_type_t ab = d->bf16 ? dnnl_bf16 : dnnl_f32;
	dnnl_dims_t da = {d->m, d->k}, sa = {d->as0, d->as1};
	dnnl_dims_t db = {d->k, d->n}, sb = {d->bs0, d->bs1};
	dnnl_dims_t dc = {d->m, d->n}, sc = {d->ldc, 1};
	dnnl_dims_t dbias = {1, d->n}, sbias = {d->n, 1};
	dnnl_primitive_attr_t attr = NULL;
	dnnl_status_t st = make_attr(&attr, d);
	if (st != dnnl_success) {
		if (attr)
			dnnl_primitive_attr_destroy(attr);
		return st;
	}
#if DNNL_VERSION_MAJOR >= 3
	dnnl_memory_desc_t a = NULL, b = NULL, c = NULL, bias = NULL;
	st = dnnl_memory_desc_create_with_strides(&a, 2, da, ab, sa);
	if (st == dnnl_success)
		st = dnnl_memory_desc_create_with_strides(&b, 2, db, ab, sb);
	if (st == dnnl_success)
		st = dnnl_memory_desc_create_with_strides(&c, 2, dc, dnnl_f32, sc);
	if (st == dnnl_success && d->bias)
		st = dnnl_memory_desc_create_with_strides(&bias, 2, dbias, dnnl_f32, sbias);
	if (st == dnnl_success)
		st = dnnl_matmul_primitive_desc_create(pd, e, a, b, bias, c, attr);
	if (a)
		dnnl_memory_desc_destroy(a);
	if (b)
		dnnl_memory_desc_destroy(b);
	if (c)
		dnnl_memory_desc_destroy(c);
	if (bias)
		dnnl_memory_desc_destroy(bias);
#else
	dnnl_memory_desc_t a, b, c, bias;
	dnnl_matmul_desc_t md;
	st = dnnl_memory_desc_init_by_strides(&a, 2, da, ab, sa);
	if (st == dnnl_success)
		st = dnnl_memory_desc_init_by_strides(&b, 2, db, ab, sb);
	if (st == dnnl_success)
		st = dnnl_memory_desc_init_by_strides(&c, 2, dc, dnnl_f32, sc);
	if (st == dnnl_success && d->bias)
		st = dnnl_memory_desc_init_by_strides(&bias, 2, dbias, dnnl_f32, sbias);
	if (st == dnnl_success)
		st = dnnl_matmul_desc_init(&md, &a, &b, d->bias ? &bias : NULL, &c);
	if (st == dnnl_success)
		st = dnnl_primitive_desc_create(pd, &md, attr, e, NULL);
#endif
	dnnl_primitive_attr_destroy(attr);
	return st;
}

int ncf_dnnl_has_bf16(const char **isa)
{
	dnnl_cpu_isa_t i = dnnl_get_effective_cpu_isa();
	const char *name = "below avx512_core_bf16";
	switch (i) {
	case dnnl_cpu_isa_avx512_core_bf16: name = "avx512_core_bf16"; break;
	case dnnl_cpu_isa_avx512_core_amx: name = "avx512_core_amx"; break;
	case dnnl_cpu_isa_avx512_core: name = "avx512_core"; break;
	case dnnl_cpu_isa_avx512_core_vnni: name = "avx512_core_vnni"; break;
	case dnnl_cpu_isa_avx2: name = "avx2"; break;
	default: break;
	}
	if (isa)
		*isa = name;
	/* the ISA values are nested bit sets: bf16 instructions are a subset */
	return ((unsigned)i & (unsigned)dnnl_cpu_isa_avx512_core_bf16) ==
	       (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}
#endif
