/* lt.cu - see lt.cuh. */
#include "lt.cuh"

#ifndef NCF_CUDA_EMULATE
#include <cublasLt.h>
#endif

namespace NCF_CUDA_NS {

#define LT_WORKSPACE (32u << 20)
#define LT_PLANS 32

/* A product in cuBLAS's column-major terms: D (m, n) = op(A) op(B), A and
 * B of type t (leading dimensions lda, ldb), D of type dt (ldd), with the
 * epilogue of kind (0 forward, 1 dgrad, 2 wgrad; masked: with the ReLU's
 * mask). */
struct lt_shape {
	int kind, masked;
	cublasOperation_t ta, tb;
	size_t m, n, k, lda, ldb, ldd;
	cudaDataType t, dt;
};

/* A shape's descriptors and chosen algorithm, made once. */
struct lt_plan {
	struct lt_shape sh;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t a, b, d;
	cublasLtMatmulAlgo_t algo;
};

struct lt {
	cublasLtHandle_t h;
	void *ws;
	struct lt_plan plan[LT_PLANS];
	int nplans;
};

static int check_lt(cublasStatus_t s, const char *call, const char *file, int line)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return sync_after(call, file, line);
	cuda_report("%s: %s:%d: cuBLASLt: status %d", call, file, line, (int)s);
	return -1;
}
#define LT_TRY(call)                                                       \
	do {                                                               \
		if (check_lt((call), #call, __FILE__, __LINE__) != 0)      \
			return -1;                                         \
	} while (0)

int lt_open(struct cu *c)
{
	if (c->lt)
		return 0;
	struct lt *l = (struct lt *)ncf_xcalloc(1, sizeof *l);
	c->lt = l;
	if (cost_dry())
		return 0;
	LT_TRY(cublasLtCreate(&l->h));
	return DALLOC_BYTES(&l->ws, LT_WORKSPACE);
}

void lt_free(struct cu *c)
{
	struct lt *l = c->lt;
	if (!l)
		return;
	for (int k = 0; k < l->nplans; k++) {
		cublasLtMatrixLayoutDestroy(l->plan[k].a);
		cublasLtMatrixLayoutDestroy(l->plan[k].b);
		cublasLtMatrixLayoutDestroy(l->plan[k].d);
		cublasLtMatmulDescDestroy(l->plan[k].desc);
	}
	if (l->h)
		cublasLtDestroy(l->h);
	dfree(l->ws);
	free(l);
	c->lt = NULL;
}

/* The epilogue of a shape. */
static cublasLtEpilogue_t epilogue_of(const struct lt_shape *sh)
{
	switch (sh->kind) {
	case 0:
		return sh->masked ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS;
	case 1:
		return sh->masked ? CUBLASLT_EPILOGUE_DRELU_BGRAD : CUBLASLT_EPILOGUE_DEFAULT;
	default:
		return CUBLASLT_EPILOGUE_DEFAULT;
	}
}

/* Set attribute a of p's descriptor to the n bytes at v. */
static int set_attr(struct lt_plan *p, cublasLtMatmulDescAttributes_t a, const void *v, size_t n)
{
	LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, a, v, n));
	return 0;
}

/* p's descriptor: compute type, transposes, epilogue (and its bias type and
 * the mask's leading dimension). */
static int make_desc(struct cu *c, struct lt_plan *p)
{
	const struct lt_shape *sh = &p->sh;
	cublasComputeType_t ct = sh->t == CUDA_R_32F ? c->blas.compute_f32 : CUBLAS_COMPUTE_32F;
	cublasLtEpilogue_t epi = epilogue_of(sh);
	cudaDataType bias_t = CUDA_R_32F;
	int64_t aux_ld = (int64_t)lt_aux_ld((uint32_t)sh->m);
	LT_TRY(cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F));
	NCF_TRY(set_attr(p, CUBLASLT_MATMUL_DESC_TRANSA, &sh->ta, sizeof sh->ta));
	NCF_TRY(set_attr(p, CUBLASLT_MATMUL_DESC_TRANSB, &sh->tb, sizeof sh->tb));
	NCF_TRY(set_attr(p, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
	if (sh->kind == 0 || sh->masked) /* the bias, or the bias gradient, in fp32 */
		NCF_TRY(set_attr(p, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t, sizeof bias_t));
	if (sh->masked)
		NCF_TRY(set_attr(p, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
	return 0;
}

/* p's matrix layouts. */
static int make_layouts(struct lt_plan *p)
{
	const struct lt_shape *sh = &p->sh;
	size_t ar = sh->ta == CUBLAS_OP_N ? sh->m : sh->k, ac = sh->ta == CUBLAS_OP_N ? sh->k : sh->m;
	size_t br = sh->tb == CUBLAS_OP_N ? sh->k : sh->n, bc = sh->tb == CUBLAS_OP_N ? sh->n : sh->k;
	LT_TRY(cublasLtMatrixLayoutCreate(&p->a, sh->t, ar, ac, (int64_t)sh->lda));
	LT_TRY(cublasLtMatrixLayoutCreate(&p->b, sh->t, br, bc, (int64_t)sh->ldb));
	LT_TRY(cublasLtMatrixLayoutCreate(&p->d, sh->dt, sh->m, sh->n, (int64_t)sh->ldd));
	return 0;
}

/* p's algorithm: cuBLASLt's heuristic's first. */
static int choose_algo(struct lt *l, struct lt_plan *p)
{
	cublasLtMatmulPreference_t pref;
	size_t wsb = LT_WORKSPACE;
	cublasLtMatmulHeuristicResult_t res;
	int found = 0;
	LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
	int bad = check_lt(cublasLtMatmulPreferenceSetAttribute(
				   pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb),
			   "cublasLtMatmulPreferenceSetAttribute", __FILE__, __LINE__);
	if (!bad)
		bad = check_lt(cublasLtMatmulAlgoGetHeuristic(l->h, p->desc, p->a, p->b, p->d, p->d,
							      pref, 1, &res, &found),
			       "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
	cublasLtMatmulPreferenceDestroy(pref);
	if (bad)
		return -1;
	if (found < 1) {
		ncf_error("cuda backend: cuBLASLt has no algorithm for a %zu x %zu x %zu product "
			  "with its epilogue",
			  p->sh.m, p->sh.n, p->sh.k);
		return -1;
	}
	p->algo = res.algo;
	return 0;
}

/* The plan of shape sh, made and its algorithm chosen on first use. */
static struct lt_plan *plan_of(struct cu *c, const struct lt_shape *sh)
{
	struct lt *l = c->lt;
	for (int q = 0; q < l->nplans; q++)
		if (!memcmp(&l->plan[q].sh, sh, sizeof *sh))
			return &l->plan[q];
	if (l->nplans == LT_PLANS) {
		ncf_error("cuda backend: more than %d cuBLASLt product shapes", LT_PLANS);
		return NULL;
	}
	struct lt_plan *p = &l->plan[l->nplans];
	memset(p, 0, sizeof *p);
	p->sh = *sh;
	if (make_desc(c, p) || make_layouts(p) || choose_algo(l, p))
		return NULL;
	l->nplans++;
	return p;
}

/* Run plan p with its pointers; the epilogue's pointers set first. */
static int run(struct cu *c, struct lt_plan *p, const void *A, const void *B, void *D,
	       const void *bias, const void *aux)
{
	if (bias)
		NCF_TRY(set_attr(p, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
	if (aux)
		NCF_TRY(set_attr(p, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
	float one = 1.0f, zero = 0.0f;
	LT_TRY(cublasLtMatmul(c->lt->h, p->desc, &one, A, p->a, B, p->b, &zero, D, p->d, D, p->d,
			      &p->algo, c->lt->ws, LT_WORKSPACE, c->s));
	return 0;
}

/* A shape with nothing else set (memcmp compares them whole). */
static struct lt_shape shape_of(int kind, int masked, cublasOperation_t ta, cublasOperation_t tb)
{
	struct lt_shape sh;
	memset(&sh, 0, sizeof sh);
	sh.kind = kind, sh.masked = masked, sh.ta = ta, sh.tb = tb;
	return sh;
}

template <typename T> int lt_fwd(struct cu *c, const lt_args<T> &a)
{
	double es = sizeof(T), R = (double)a.rows;
	/* X, W and Y once, the bias, the mask written */
	if (NCF_COST(COST_GEMM, "lt_fwd",
		     R * a.in * es + (double)a.in * a.out * es + R * a.out * es + a.out * 4.0 +
			     (a.aux ? (double)lt_aux_bytes(a.out, a.rows) : 0.0),
		     2.0 * R * a.in * a.out))
		return 0;
	struct lt_shape sh = shape_of(0, a.aux != NULL, CUBLAS_OP_T, CUBLAS_OP_N);
	sh.m = a.out, sh.n = a.rows, sh.k = a.in, sh.lda = a.in, sh.ldb = a.in, sh.ldd = a.out;
	sh.t = sh.dt = dtype_of<T>();
	struct lt_plan *p = plan_of(c, &sh);
	return p ? run(c, p, a.W, a.X, a.Y, a.b, a.aux) : -1;
}

template <typename T> int lt_dgrad(struct cu *c, const lt_args<T> &a)
{
	double es = sizeof(T), R = (double)a.rows;
	int masked = a.aux != NULL;
	if (NCF_COST(COST_GEMM, masked ? "lt_dgrad_bgrad" : "lt_dgrad",
		     R * a.out * es + (double)a.in * a.out * es + R * a.in * es +
			     (masked ? (double)lt_aux_bytes(a.in, a.rows) + a.in * 4.0 : 0.0),
		     2.0 * R * a.in * a.out))
		return 0;
	struct lt_shape sh = shape_of(1, masked, CUBLAS_OP_N, CUBLAS_OP_N);
	sh.m = a.in, sh.n = a.rows, sh.k = a.out, sh.lda = a.in, sh.ldb = a.out, sh.ldd = a.in;
	sh.t = sh.dt = dtype_of<T>();
	struct lt_plan *p = plan_of(c, &sh);
	return p ? run(c, p, a.W, a.dY, a.Y, masked ? a.db : NULL, a.aux) : -1;
}

template <typename T> int lt_wgrad(struct cu *c, const lt_args<T> &a)
{
	double es = sizeof(T), R = (double)a.rows;
	if (NCF_COST(COST_GEMM, "lt_wgrad", R * (a.in + (double)a.out) * es + (double)a.in * a.out * 4.0,
		     2.0 * R * a.in * a.out))
		return 0;
	struct lt_shape sh = shape_of(2, 0, CUBLAS_OP_N, CUBLAS_OP_T);
	sh.m = a.in, sh.n = a.out, sh.k = a.rows, sh.lda = a.in, sh.ldb = a.out, sh.ldd = a.in;
	sh.t = dtype_of<T>(), sh.dt = CUDA_R_32F;
	struct lt_plan *p = plan_of(c, &sh);
	return p ? run(c, p, a.X, a.dY, a.dW, NULL, NULL) : -1;
}

#define NCF_INSTANTIATE(T)                                          \
	template int lt_fwd<T>(struct cu *, const lt_args<T> &);      \
	template int lt_dgrad<T>(struct cu *, const lt_args<T> &);    \
	template int lt_wgrad<T>(struct cu *, const lt_args<T> &);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
