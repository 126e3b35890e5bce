/* lt.cu - see lt.cuh. */
#include "lt.cuh"

#ifndef NCF_CUDA_EMULATE
#include <cublasLt.h>
#endif

namespace NCF_CUDA_NS {

#define LT_WORKSPACE (32u << 20)
#define LT_PLANS 32

/* What a product needs beyond its pointers: descriptors and the chosen
 * algorithm, made once per shape and kind. */
struct lt_plan {
	int kind; /* 0 forward, 1 dgrad, 2 wgrad, 3 wgrad + bias gradient */
	size_t m, n, k, lda, ldb, ldd;
	cudaDataType t;
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

/* The epilogue of a kind. */
static cublasLtEpilogue_t epilogue_of(int kind, int masked)
{
	switch (kind) {
	case 0:
		return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
	case 1:
		return masked ? CUBLASLT_EPILOGUE_DRELU : CUBLASLT_EPILOGUE_DEFAULT;
	case 3:
		return CUBLASLT_EPILOGUE_BGRADB;
	default:
		return CUBLASLT_EPILOGUE_DEFAULT;
	}
}

/*
 * The plan for D (m, n) = op(A) op(B) in cuBLAS's column-major terms with
 * ta, tb, A of type t (lda), B of type t (ldb), D of type dt (ldd); made and
 * its algorithm chosen on first use.  kind as in struct lt_plan; masked:
 * a dgrad with a ReLU mask.
 */
static struct lt_plan *plan_of(struct cu *c, int kind, int masked, cublasOperation_t ta,
			       cublasOperation_t tb, size_t m, size_t n, size_t k, cudaDataType t,
			       size_t lda, size_t ldb, cudaDataType dt, size_t ldd)
{
	struct lt *l = c->lt;
	int key = kind * 2 + masked;
	for (int q = 0; q < l->nplans; q++) {
		struct lt_plan *p = &l->plan[q];
		if (p->kind == key && p->m == m && p->n == n && p->k == k && p->t == t &&
		    p->lda == lda && p->ldb == ldb && p->ldd == ldd)
			return p;
	}
	if (l->nplans == LT_PLANS) {
		ncf_error("cuda backend: more than %d cuBLASLt product shapes", LT_PLANS);
		return NULL;
	}
	struct lt_plan *p = &l->plan[l->nplans];
	memset(p, 0, sizeof *p);
	p->kind = key, p->m = m, p->n = n, p->k = k, p->t = t;
	p->lda = lda, p->ldb = ldb, p->ldd = ldd;
	cublasComputeType_t ct = t == CUDA_R_32F ? c->blas.compute_f32 : CUBLAS_COMPUTE_32F;
	cublasLtEpilogue_t epi = epilogue_of(kind, masked);
	cudaDataType bias_t = CUDA_R_32F;
	if (check_lt(cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F), "cublasLtMatmulDescCreate",
		     __FILE__, __LINE__) ||
	    check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
						    sizeof ta),
		     "cublasLtMatmulDescSetAttribute", __FILE__, __LINE__) ||
	    check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
						    sizeof tb),
		     "cublasLtMatmulDescSetAttribute", __FILE__, __LINE__) ||
	    check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
						    sizeof epi),
		     "cublasLtMatmulDescSetAttribute", __FILE__, __LINE__) ||
	    (kind == 0 &&
	     check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
						     &bias_t, sizeof bias_t),
		      "cublasLtMatmulDescSetAttribute", __FILE__, __LINE__)))
		return NULL;
	int64_t aux_ld = (int64_t)lt_aux_ld((uint32_t)m);
	if ((kind == 0 || (kind == 1 && masked)) &&
	    check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
						    &aux_ld, sizeof aux_ld),
		     "cublasLtMatmulDescSetAttribute", __FILE__, __LINE__))
		return NULL;
	size_t ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
	size_t br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
	if (check_lt(cublasLtMatrixLayoutCreate(&p->a, t, ar, ac, (int64_t)lda),
		     "cublasLtMatrixLayoutCreate", __FILE__, __LINE__) ||
	    check_lt(cublasLtMatrixLayoutCreate(&p->b, t, br, bc, (int64_t)ldb),
		     "cublasLtMatrixLayoutCreate", __FILE__, __LINE__) ||
	    check_lt(cublasLtMatrixLayoutCreate(&p->d, dt, m, n, (int64_t)ldd),
		     "cublasLtMatrixLayoutCreate", __FILE__, __LINE__))
		return NULL;
	cublasLtMatmulPreference_t pref;
	size_t wsb = LT_WORKSPACE;
	cublasLtMatmulHeuristicResult_t res;
	int found = 0;
	if (check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate",
		     __FILE__, __LINE__))
		return NULL;
	int bad = check_lt(cublasLtMatmulPreferenceSetAttribute(
				   pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb),
			   "cublasLtMatmulPreferenceSetAttribute", __FILE__, __LINE__) ||
		  check_lt(cublasLtMatmulAlgoGetHeuristic(l->h, p->desc, p->a, p->b, p->d, p->d,
							  pref, 1, &res, &found),
			   "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
	cublasLtMatmulPreferenceDestroy(pref);
	if (bad)
		return NULL;
	if (found < 1) {
		ncf_error("cuda backend: cuBLASLt has no algorithm for a %zu x %zu x %zu product "
			  "with its epilogue",
			  m, n, k);
		return NULL;
	}
	p->algo = res.algo;
	l->nplans++;
	return p;
}

/* Run plan p with its pointers; the epilogue's pointers set first. */
static int run(struct cu *c, struct lt_plan *p, const void *A, const void *B, void *D,
	       const void *bias, const void *aux)
{
	if (bias)
		LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
						      sizeof bias));
	if (aux)
		LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
						      &aux, sizeof aux));
	float one = 1.0f, zero = 0.0f;
	LT_TRY(cublasLtMatmul(c->lt->h, p->desc, &one, A, p->a, B, p->b, &zero, D, p->d, D, p->d,
			      &p->algo, c->lt->ws, LT_WORKSPACE, c->s));
	return 0;
}

static double bytes_of_t(cudaDataType t)
{
	return t == CUDA_R_32F ? 4.0 : 2.0;
}

template <typename T>
int lt_fwd(struct cu *c, size_t rows, uint32_t in, uint32_t out, const T *X, const T *W,
	   const float *b, T *Y, void *aux)
{
	cudaDataType t = dtype_of<T>();
	double es = bytes_of_t(t), R = (double)rows;
	/* X, W and Y once, the bias, the mask written */
	if (NCF_COST(COST_GEMM, "lt_fwd",
		     R * in * es + (double)in * out * es + R * out * es + out * 4.0 +
			     (double)lt_aux_bytes(out, rows),
		     2.0 * R * in * out))
		return 0;
	struct lt_plan *p = plan_of(c, 0, 0, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, t, in, in, t,
				    out);
	return p ? run(c, p, W, X, Y, b, aux) : -1;
}

template <typename T>
int lt_dgrad(struct cu *c, size_t rows, uint32_t in, uint32_t out, const T *dY, const T *W,
	     const void *aux, T *dX)
{
	cudaDataType t = dtype_of<T>();
	double es = bytes_of_t(t), R = (double)rows;
	if (NCF_COST(COST_GEMM, "lt_dgrad",
		     R * out * es + (double)in * out * es + R * in * es +
			     (aux ? (double)lt_aux_bytes(in, rows) : 0.0),
		     2.0 * R * in * out))
		return 0;
	struct lt_plan *p = plan_of(c, 1, aux != NULL, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, t, in,
				    out, t, in);
	return p ? run(c, p, W, dY, dX, NULL, aux) : -1;
}

template <typename T>
int lt_wgrad(struct cu *c, size_t rows, uint32_t in, uint32_t out, const T *dY, size_t lddy,
	     const T *X, size_t ldx, float *dW, size_t ldd, float *db)
{
	cudaDataType t = dtype_of<T>();
	double es = bytes_of_t(t), R = (double)rows;
	if (NCF_COST(COST_GEMM, db ? "lt_wgrad_bgrad" : "lt_wgrad",
		     R * (in + (double)out) * es + (double)in * out * 4.0 + (db ? out * 4.0 : 0.0),
		     2.0 * R * in * out))
		return 0;
	struct lt_plan *p = plan_of(c, db ? 3 : 2, 0, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, t, ldx,
				    lddy, CUDA_R_32F, ldd);
	return p ? run(c, p, X, dY, dW, db, NULL) : -1;
}

#define NCF_INSTANTIATE(T)                                                                   \
	template int lt_fwd<T>(struct cu *, size_t, uint32_t, uint32_t, const T *, const T *,  \
			       const float *, T *, void *);                                    \
	template int lt_dgrad<T>(struct cu *, size_t, uint32_t, uint32_t, const T *, const T *, \
				 const void *, T *);                                           \
	template int lt_wgrad<T>(struct cu *, size_t, uint32_t, uint32_t, const T *, size_t,    \
				 const T *, size_t, float *, size_t, float *);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
