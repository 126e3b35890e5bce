/*
 * matmul.c - the dense products of matmul.h on oneDNN or OpenBLAS.
 *
 * oneDNN: one matmul primitive per distinct product (type, shape, strides,
 * bias, ReLU, accumulation), created on first use and kept in a table
 * (a mutex guards it; lookups are a short scan), with a user scratchpad
 * per thread, so that threads run primitives concurrently.  A primitive is
 * created and executed with OpenMP's thread count set to 1 for the calling
 * thread: oneDNN then plans (blocking, any split of the k sum) and runs it
 * for one thread, and its result cannot depend on OMP_NUM_THREADS.
 *
 * The fixed rule for fp32 (NCF_MM_LIB_AUTO), from bench/bench_matmul on
 * the shapes of NVIDIA's model (tiles of 2048 rows, 2 threads, a Xeon with
 * AMX): every product goes to oneDNN when the build has it.  Its brgemm
 * kernels ran 1.4-9x OpenBLAS's rate on each shape (forward 93-105 against
 * 10-49 GFLOP/s with the bias and ReLU, which oneDNN fuses and OpenBLAS
 * leaves to a second pass; dX 144-186 against 78-99; dW 139-180 against
 * 92-126).  Without oneDNN everything is OpenBLAS.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#undef I /* <complex.h>, pulled in by OpenBLAS */
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512BF16__) && defined(__AVX512F__)
#include <immintrin.h> /* VCVTNEPS2BF16 */
#endif

#include "err.h"
#include "matmul.h"
#ifdef NCF_HAVE_DNNL
#include <oneapi/dnnl/dnnl_debug.h>
#include "dnnl.h"
#endif

static enum ncf_mm_lib forced = NCF_MM_LIB_AUTO;

void ncf_bf16_from_f32_n(const float *src, size_t n, ncf_bf16 *dst)
{
	size_t j = 0;
#if defined(__AVX512BF16__) && defined(__AVX512F__)
	for (; j + 16 <= n; j += 16) {
		__m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + j));
		_mm256_storeu_si256((__m256i *)(dst + j), (__m256i)h);
	}
#endif
	for (; j < n; j++)
		dst[j] = ncf_bf16_from_f32(src[j]);
}

void ncf_bf16_from_f32_n_stream(const float *src, size_t n, ncf_bf16 *dst)
{
#if defined(__AVX512BF16__) && defined(__AVX512F__)
	if (((uintptr_t)dst & 31) == 0 && n % 16 == 0) {
		for (size_t j = 0; j < n; j += 16) {
			__m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + j));
			_mm256_stream_si256((__m256i *)(dst + j), (__m256i)h);
		}
		_mm_sfence();
		return;
	}
#endif
	ncf_bf16_from_f32_n(src, n, dst);
}

void ncf_mm_force_lib(enum ncf_mm_lib lib)
{
	forced = lib;
}

#ifdef NCF_HAVE_DNNL
/* ---- oneDNN ------------------------------------------------------------ */

/* The thread count the calling thread would give a parallel region it
 * opened; set to 1 around oneDNN calls. */
static int omp_threads_get(void)
{
#ifdef _OPENMP
	return omp_get_max_threads();
#else
	return 1;
#endif
}

static void omp_threads_set(int n)
{
#ifdef _OPENMP
	omp_set_num_threads(n);
#else
	(void)n;
#endif
}


#define DNNL_CHECK(call)                                                                        \
	do {                                                                                    \
		dnnl_status_t st_ = (call);                                                     \
		if (st_ != dnnl_success) {                                                      \
			ncf_error("oneDNN: %s: %s (%s:%d)", #call, dnnl_status2str(st_), __FILE__, \
				  __LINE__);                                                    \
			return -1;                                                              \
		}                                                                               \
	} while (0)

struct prim {
	struct ncf_dnnl_mm key;
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t p;
	size_t scratch_bytes;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t engine;
/* Entries are handed out by address and never move.  The shapes are
 * bounded: dnnl_rows cuts the row count (or the k of a dW product) into a
 * multiple of ROW_BLOCK and a rest below it. */
#define MAX_PRIMS 2048
#define ROW_BLOCK 64
static struct prim prims[MAX_PRIMS];
static size_t nprims;
static int engine_failed;

/* per thread: a stream and the scratchpad */
static __thread dnnl_stream_t tl_stream;
static __thread void *tl_scratch;
static __thread size_t tl_scratch_bytes;
/* every thread's, to release them */
struct tl_rec {
	dnnl_stream_t *stream;
	void **scratch;
	size_t *bytes;
};
static struct tl_rec *tls;
static size_t ntls, cap_tls;

static int key_eq(const struct ncf_dnnl_mm *a, const struct ncf_dnnl_mm *b)
{
	return a->bf16 == b->bf16 && a->m == b->m && a->n == b->n && a->k == b->k &&
	       a->as0 == b->as0 && a->as1 == b->as1 && a->bs0 == b->bs0 && a->bs1 == b->bs1 &&
	       a->ldc == b->ldc && a->bias == b->bias && a->relu == b->relu && a->sum == b->sum;
}

/* Call with the lock held.  Returns 0 or -1 (reported). */
static int engine_get(void)
{
	if (engine)
		return 0;
	if (engine_failed)
		return -1;
	dnnl_status_t st = dnnl_engine_create(&engine, dnnl_cpu, 0);
	if (st != dnnl_success) {
		engine_failed = 1;
		engine = NULL;
		ncf_error("oneDNN: cannot create the cpu engine: %s", dnnl_status2str(st));
		return -1;
	}
	return 0;
}

/* The primitive of d, created when new (for one thread).  Returns NULL
 * after reporting. */
static struct prim *prim_get(const struct ncf_dnnl_mm *d)
{
	pthread_mutex_lock(&lock);
	for (size_t j = nprims; j-- > 0;)
		if (key_eq(&prims[j].key, d)) {
			struct prim *p = &prims[j];
			pthread_mutex_unlock(&lock);
			return p;
		}
	struct prim *r = NULL;
	if (engine_get() != 0)
		goto out;
	if (nprims == MAX_PRIMS) {
		ncf_error("oneDNN: more than %d distinct matrix products", MAX_PRIMS);
		goto out;
	}
	struct prim p = {.key = *d};
	int saved = omp_threads_get();
	omp_threads_set(1);
	dnnl_status_t st = ncf_dnnl_matmul_pd(&p.pd, engine, d);
	if (st == dnnl_success) {
		st = dnnl_primitive_create(&p.p, p.pd);
		if (st != dnnl_success)
			dnnl_primitive_desc_destroy(p.pd);
	}
	omp_threads_set(saved);
	if (st != dnnl_success) {
		ncf_error("oneDNN: no %s matmul (%lld, %lld) x (%lld, %lld)%s%s: %s",
			  d->bf16 ? "bf16" : "f32", (long long)d->m, (long long)d->k,
			  (long long)d->k, (long long)d->n, d->bias ? " + bias" : "",
			  d->relu ? ", ReLU" : "", dnnl_status2str(st));
		goto out;
	}
	p.scratch_bytes = dnnl_memory_desc_get_size(
		dnnl_primitive_desc_query_md(p.pd, dnnl_query_scratchpad_md, 0));
	prims[nprims] = p;
	r = &prims[nprims++];
out:
	pthread_mutex_unlock(&lock);
	return r;
}

/* This thread's stream and a scratchpad of at least bytes.  Returns 0 or
 * -1 (reported). */
static int thread_get(size_t bytes)
{
	if (!tl_stream) {
		pthread_mutex_lock(&lock);
		if (engine_get() != 0) {
			pthread_mutex_unlock(&lock);
			return -1;
		}
		dnnl_status_t st = dnnl_stream_create(&tl_stream, engine, dnnl_stream_default_flags);
		if (st == dnnl_success) {
			if (ntls == cap_tls) {
				cap_tls = cap_tls ? 2 * cap_tls : 64;
				tls = ncf_xrealloc(tls, cap_tls * sizeof *tls);
			}
			tls[ntls++] = (struct tl_rec){&tl_stream, &tl_scratch, &tl_scratch_bytes};
		}
		pthread_mutex_unlock(&lock);
		if (st != dnnl_success) {
			tl_stream = NULL;
			ncf_error("oneDNN: cannot create a stream: %s", dnnl_status2str(st));
			return -1;
		}
	}
	if (bytes > tl_scratch_bytes) {
		free(tl_scratch);
		tl_scratch = NULL;
		tl_scratch_bytes = 0;
		if (posix_memalign(&tl_scratch, 64, bytes) != 0) {
			tl_scratch = NULL;
			ncf_error("oneDNN: out of memory (scratchpad of %zu bytes)", bytes);
			return -1;
		}
		tl_scratch_bytes = bytes;
	}
	return 0;
}

/* *m: handle as the primitive's q memory (index: 1 for the bias among the
 * weights). */
static int mem_make(dnnl_memory_t *m, struct prim *p, dnnl_query_t q, int index,
		    const void *handle)
{
	DNNL_CHECK(dnnl_memory_create(m, dnnl_primitive_desc_query_md(p->pd, q, index), engine,
				      (void *)handle));
	return 0;
}

/* C = A B (+ bias, ReLU, += as d says) on this thread.  Returns 0 or -1. */
static int dnnl_run(const struct ncf_dnnl_mm *d, const void *A, const void *B, const float *bias,
		    float *C)
{
	struct prim *p = prim_get(d);
	if (!p || thread_get(p->scratch_bytes) != 0)
		return -1;
	dnnl_memory_t mem[5] = {0};
	dnnl_exec_arg_t args[5];
	int nargs = 0, rc = -1;
	if (mem_make(&mem[0], p, dnnl_query_src_md, 0, A) != 0)
		goto out;
	args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem[0]};
	if (mem_make(&mem[1], p, dnnl_query_weights_md, 0, B) != 0)
		goto out;
	args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem[1]};
	if (mem_make(&mem[2], p, dnnl_query_dst_md, 0, C) != 0)
		goto out;
	args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem[2]};
	if (d->bias) {
		if (mem_make(&mem[3], p, dnnl_query_weights_md, 1, bias) != 0)
			goto out;
		args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem[3]};
	}
	if (p->scratch_bytes) {
		if (mem_make(&mem[4], p, dnnl_query_scratchpad_md, 0, tl_scratch) != 0)
			goto out;
		args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mem[4]};
	}
	int saved = omp_threads_get();
	omp_threads_set(1);
	dnnl_status_t st = dnnl_primitive_execute(p->p, tl_stream, nargs, args);
	if (st == dnnl_success)
		st = dnnl_stream_wait(tl_stream);
	omp_threads_set(saved);
	if (st != dnnl_success)
		ncf_error("oneDNN: matmul: %s", dnnl_status2str(st));
	else
		rc = 0;
out:
	for (int j = 0; j < 5; j++)
		if (mem[j])
			dnnl_memory_destroy(mem[j]);
	return rc;
}

/* dnnl_run of d in at most two pieces, so that the shapes seen stay few
 * whatever the callers' row counts: rows (d->m) cut into a multiple of
 * ROW_BLOCK and the rest, or for a dW product (dw: A is dY^T) its k, the
 * second piece added to the first. */
static int dnnl_rows(const struct ncf_dnnl_mm *d, int dw, const void *A, const void *B,
		     const float *bias, float *C)
{
	size_t es = d->bf16 ? sizeof(ncf_bf16) : sizeof(float);
	int64_t len = dw ? d->k : d->m, head = len / ROW_BLOCK * ROW_BLOCK;
	if (head == 0 || head == len)
		return dnnl_run(d, A, B, bias, C);
	struct ncf_dnnl_mm a = *d, b = *d;
	if (dw) {
		a.k = head, b.k = len - head, b.sum = 1;
		if (dnnl_run(&a, A, B, bias, C) != 0)
			return -1;
		return dnnl_run(&b, (const char *)A + (size_t)head * (size_t)d->as1 * es,
				(const char *)B + (size_t)head * (size_t)d->bs0 * es, bias, C);
	}
	a.m = head, b.m = len - head;
	if (dnnl_run(&a, A, B, bias, C) != 0)
		return -1;
	return dnnl_run(&b, (const char *)A + (size_t)head * (size_t)d->as0 * es, B, bias,
			C + (size_t)head * (size_t)d->ldc);
}

static int have_dnnl(void)
{
	return 1;
}
#else
static int have_dnnl(void)
{
	return 0;
}
#endif

int ncf_mm_available(enum ncf_mm_type t, const char **why)
{
	const char *w = NULL;
	if (t == NCF_MM_BF16) {
#ifdef NCF_HAVE_DNNL
		const char *isa;
		if (!ncf_dnnl_has_bf16(&isa))
			w = getenv("ONEDNN_MAX_CPU_ISA") || getenv("DNNL_MAX_CPU_ISA")
				    ? "bf16 needs AVX512_BF16 or AMX instructions, and "
				      "ONEDNN_MAX_CPU_ISA/DNNL_MAX_CPU_ISA forbids them"
				    : "bf16 needs AVX512_BF16 or AMX instructions, and this CPU has "
				      "neither";
#else
		w = "bf16 needs oneDNN, and this build has none (apt-get install libdnnl-dev, "
		    "then make)";
#endif
	}
	if (why)
		*why = w;
	return w == NULL;
}

const char *ncf_mm_describe(void)
{
#ifdef NCF_HAVE_DNNL
	static char buf[128];
	const dnnl_version_t *v = dnnl_version();
	const char *isa;
	ncf_dnnl_has_bf16(&isa);
	snprintf(buf, sizeof buf, "oneDNN %d.%d.%d (%s), OpenBLAS", v->major, v->minor, v->patch,
		 isa);
	return buf;
#else
	return "OpenBLAS";
#endif
}

void ncf_mm_release(void)
{
#ifdef NCF_HAVE_DNNL
	pthread_mutex_lock(&lock);
	for (size_t j = 0; j < nprims; j++) {
		dnnl_primitive_destroy(prims[j].p);
		dnnl_primitive_desc_destroy(prims[j].pd);
	}
	nprims = 0;
	for (size_t j = 0; j < ntls; j++) {
		dnnl_stream_destroy(*tls[j].stream);
		*tls[j].stream = NULL;
		free(*tls[j].scratch);
		*tls[j].scratch = NULL;
		*tls[j].bytes = 0;
	}
	free(tls);
	tls = NULL;
	ntls = cap_tls = 0;
	if (engine)
		dnnl_engine_destroy(engine);
	engine = NULL;
	pthread_mutex_unlock(&lock);
#endif
}

/* ---- the products ------------------------------------------------------ */

enum kind { KIND_FORWARD, KIND_DX, KIND_DW };

/* The library of an fp32 product of this kind. */
static enum ncf_mm_lib lib_for(enum kind kind)
{
	if (!have_dnnl())
		return NCF_MM_LIB_OPENBLAS;
	if (forced != NCF_MM_LIB_AUTO)
		return forced;
	const char *env = getenv("NCF_MM_LIB"); /* benchmarks' A/B switch (matmul.h) */
	if (env && !strcmp(env, "openblas"))
		return NCF_MM_LIB_OPENBLAS;
	(void)kind;
	return NCF_MM_LIB_DNNL;
}

#ifndef NCF_HAVE_DNNL
static int no_bf16(void)
{
	const char *why;
	ncf_mm_available(NCF_MM_BF16, &why);
	ncf_error("cpu backend: %s", why);
	return -1;
}
#endif

int ncf_mm_forward(const struct ncf_mm_forward_op *op)
{
	size_t m = op->m, n = op->n, k = op->k;
	if (m == 0 || n == 0)
		return 0;
	if (op->t == NCF_MM_BF16 || lib_for(KIND_FORWARD) == NCF_MM_LIB_DNNL) {
#ifdef NCF_HAVE_DNNL
		struct ncf_dnnl_mm d = {.bf16 = op->t == NCF_MM_BF16, .m = (int64_t)m,
					.n = (int64_t)n, .k = (int64_t)k, .as0 = (int64_t)op->ldx,
					.as1 = 1, .bs0 = 1, .bs1 = (int64_t)op->ldw,
					.ldc = (int64_t)op->ldy, .bias = op->bias != NULL,
					.relu = op->relu};
		return dnnl_rows(&d, 0, op->X, op->W, op->bias, op->Y);
#else
		return no_bf16();
#endif
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0f, op->X,
		    (int)op->ldx, op->W, (int)op->ldw, 0.0f, op->Y, (int)op->ldy);
	const float *b = op->bias;
	if (b || op->relu)
		for (size_t r = 0; r < m; r++) {
			float *restrict y = op->Y + r * op->ldy;
			for (size_t h = 0; h < n; h++) {
				float v = b ? y[h] + b[h] : y[h];
				y[h] = op->relu && !(v > 0.0f) ? 0.0f : v;
			}
		}
	return 0;
}

int ncf_mm_dx(const struct ncf_mm_dx_op *op)
{
	size_t m = op->m, n = op->n, k = op->k;
	if (m == 0 || k == 0)
		return 0;
	if (op->t == NCF_MM_BF16 || lib_for(KIND_DX) == NCF_MM_LIB_DNNL) {
#ifdef NCF_HAVE_DNNL
		struct ncf_dnnl_mm d = {.bf16 = op->t == NCF_MM_BF16, .m = (int64_t)m,
					.n = (int64_t)k, .k = (int64_t)n, .as0 = (int64_t)op->ldd,
					.as1 = 1, .bs0 = (int64_t)op->ldw, .bs1 = 1,
					.ldc = (int64_t)op->ldx};
		return dnnl_rows(&d, 0, op->dY, op->W, NULL, op->dX);
#else
		return no_bf16();
#endif
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)k, (int)n, 1.0f,
		    op->dY, (int)op->ldd, op->W, (int)op->ldw, 0.0f, op->dX, (int)op->ldx);
	return 0;
}

int ncf_mm_dw(const struct ncf_mm_dw_op *op)
{
	size_t m = op->m, n = op->n, k = op->k;
	if (n == 0 || k == 0)
		return 0;
	if (m == 0) {
		if (!op->accumulate)
			for (size_t h = 0; h < n; h++)
				memset(op->dW + h * op->ldw, 0, k * sizeof(float));
		return 0;
	}
	if (op->t == NCF_MM_BF16 || lib_for(KIND_DW) == NCF_MM_LIB_DNNL) {
#ifdef NCF_HAVE_DNNL
		struct ncf_dnnl_mm d = {.bf16 = op->t == NCF_MM_BF16, .m = (int64_t)n,
					.n = (int64_t)k, .k = (int64_t)m, .as0 = 1,
					.as1 = (int64_t)op->ldd, .bs0 = (int64_t)op->ldx, .bs1 = 1,
					.ldc = (int64_t)op->ldw, .sum = op->accumulate};
		return dnnl_rows(&d, 1, op->dY, op->X, NULL, op->dW);
#else
		return no_bf16();
#endif
	}
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)k, (int)m, 1.0f, op->dY,
		    (int)op->ldd, op->X, (int)op->ldx, op->accumulate ? 1.0f : 0.0f, op->dW,
		    (int)op->ldw);
	return 0;
}

/* ---- over tiles ---------------------------------------------------------- */

static size_t esize(enum ncf_mm_type t)
{
	return t == NCF_MM_BF16 ? sizeof(ncf_bf16) : sizeof(float);
}

/* The rows of tile j of m: the first into *r0, the count returned. */
static size_t tile_rows(size_t m, int64_t j, size_t *r0)
{
	*r0 = (size_t)j * NCF_MM_TILE;
	return m - *r0 < NCF_MM_TILE ? m - *r0 : NCF_MM_TILE;
}

int ncf_mm_forward_tiles(const struct ncf_mm_forward_op *op)
{
	size_t tiles = (op->m + NCF_MM_TILE - 1) / NCF_MM_TILE, es = esize(op->t);
	int rc = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : rc)
	for (int64_t j = 0; j < (int64_t)tiles; j++) {
		struct ncf_mm_forward_op t = *op;
		size_t r0;
		t.m = tile_rows(op->m, j, &r0);
		t.X = (const char *)op->X + r0 * op->ldx * es;
		t.Y = op->Y + r0 * op->ldy;
		rc |= ncf_mm_forward(&t);
	}
	return rc ? -1 : 0;
}

int ncf_mm_dx_tiles(const struct ncf_mm_dx_op *op)
{
	size_t tiles = (op->m + NCF_MM_TILE - 1) / NCF_MM_TILE, es = esize(op->t);
	int rc = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : rc)
	for (int64_t j = 0; j < (int64_t)tiles; j++) {
		struct ncf_mm_dx_op t = *op;
		size_t r0;
		t.m = tile_rows(op->m, j, &r0);
		t.dY = (const char *)op->dY + r0 * op->ldd * es;
		t.dX = op->dX + r0 * op->ldx;
		rc |= ncf_mm_dx(&t);
	}
	return rc ? -1 : 0;
}

int ncf_mm_dw_tiles(const struct ncf_mm_dw_op *op, float *part)
{
	size_t m = op->m, n = op->n, k = op->k;
	size_t tiles = (m + NCF_MM_TILE - 1) / NCF_MM_TILE, es = esize(op->t);
	if (tiles == 0)
		return ncf_mm_dw(op);
	int rc = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : rc)
	for (int64_t j = 0; j < (int64_t)tiles; j++) {
		struct ncf_mm_dw_op t = *op;
		size_t r0;
		t.m = tile_rows(m, j, &r0);
		t.dY = (const char *)op->dY + r0 * op->ldd * es;
		t.X = (const char *)op->X + r0 * op->ldx * es;
		t.dW = part + (size_t)j * n * k;
		t.ldw = k;
		t.accumulate = 0;
		rc |= ncf_mm_dw(&t);
	}
	if (rc)
		return -1;
#pragma omp parallel for schedule(static)
	for (int64_t h = 0; h < (int64_t)n; h++)
		for (size_t c = 0; c < k; c++) {
			float acc = 0.0f;
			for (size_t j = 0; j < tiles; j++)
				acc += part[j * n * k + (size_t)h * k + c];
			op->dW[(size_t)h * op->ldw + c] = acc;
		}
	return 0;
}
