/*
 * emu.h - just enough of the CUDA runtime and cuBLAS for the cuda
 * backend's sources to compile as plain C++ (g++ -x c++ -DNCF_CUDA_EMULATE)
 * and run on the CPU, so that `make check` exercises them on machines
 * without a GPU (and without the CUDA toolkit).
 *
 * What it is:
 *  - device memory is host memory: cudaMalloc is an aligned malloc, every
 *    copy is memcpy, streams and events do nothing (all work is synchronous);
 *  - a plain kernel launch (NCF_LAUNCH in common.cuh) is nested loops over
 *    the blocks and threads of the grid calling the kernel body once per
 *    thread, one at a time, with blockIdx, threadIdx, blockDim and gridDim as
 *    thread_local globals set by the loop;
 *  - a cooperative launch (NCF_LAUNCH_SYNC) runs each thread of a block as a
 *    fiber (its own stack) on the calling thread: a thread runs until it
 *    reaches __syncthreads() or __syncwarp(), then the next thread runs, and
 *    a barrier opens when every thread of its block (or warp) has reached
 *    it.  __shared__ variables are static (one block runs at a time);
 *    dynamic shared memory is one buffer per launch, filled with 0xFF bytes
 *    (NaNs) before each block.  A
 *    thread that reads what another thread writes without a barrier in
 *    between reads what was there before (the other has not run yet), so
 *    missing barriers show as wrong results; a barrier that some threads of
 *    the block never reach (one returned early, or waits at another barrier)
 *    stops the program with a message, as it would hang a GPU;
 *  - the tensor-core fragments of nvcuda::wmma (16x16x16 bf16/fp16 and
 *    16x16x8 tf32, fp32 accumulators) with load_matrix_sync, mma_sync,
 *    store_matrix_sync and fill_fragment, see "wmma" below;
 *  - cublasGemmEx is cblas_sgemm (OpenBLAS) with cuBLAS's column-major
 *    semantics; bf16 and fp16 operands are widened to float and the result is
 *    rounded back, so those precisions run too (with fp32 products instead of
 *    the tensor cores' rounding);
 *  - __nv_bfloat16 and __half are 16-bit structs whose conversions round to
 *    nearest even exactly as NVIDIA's __float2bfloat16_rn / __float2half_rn.
 *
 * What it is not: threads never run concurrently, so races that need two
 * threads at once do not show (what shows is a read before the barrier that
 * should have preceded it); warp shuffles and votes are not there (no kernel
 * uses them).  The radix sort (CUB) is not emulated; its CPU twin
 * (sort_by_key_cpu) runs instead, and tests/gpu covers it.  There is no
 * asynchrony, and a bad device pointer is an ordinary bad pointer (the ASan
 * build of the emulation test finds those).
 */
#ifndef NCF_CUDA_EMU_H
#define NCF_CUDA_EMU_H

#ifndef NCF_CUDA_EMULATE
#error "emu.h is for -DNCF_CUDA_EMULATE builds only"
#endif

#include <cblas.h>
#include <setjmp.h>
#include <stdio.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <type_traits>
#undef I /* <complex.h>, pulled in by OpenBLAS */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- language ---------------------------------------------------------- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline thread_local dim3 threadIdx(0, 0, 0), blockIdx(0, 0, 0), blockDim(1, 1, 1),
	gridDim(1, 1, 1);

/* What ran since the start: kernel launches, cublasGemmEx calls,
 * cudaMemsetAsync and cudaMemcpyAsync calls (the emulation test compares
 * them with the cost recorder's notes, kernels/cuda/cost.cuh). */
enum { NCF_EMU_LAUNCHES, NCF_EMU_GEMMS, NCF_EMU_MEMSETS, NCF_EMU_COPIES, NCF_EMU_COUNTS };
inline unsigned long ncf_emu_count[NCF_EMU_COUNTS];

/* Run body() once per thread of a (grid, block) launch, blocks in order,
 * threads in order within a block. */
template <typename F> static inline void ncf_emu_launch(dim3 grid, dim3 block, F body)
{
	ncf_emu_count[NCF_EMU_LAUNCHES]++;
	gridDim = grid;
	blockDim = block;
	for (unsigned bz = 0; bz < grid.z; bz++)
		for (unsigned by = 0; by < grid.y; by++)
			for (unsigned bx = 0; bx < grid.x; bx++) {
				blockIdx = dim3(bx, by, bz);
				for (unsigned tz = 0; tz < block.z; tz++)
					for (unsigned ty = 0; ty < block.y; ty++)
						for (unsigned tx = 0; tx < block.x; tx++) {
							threadIdx = dim3(tx, ty, tz);
							body();
						}
			}
}

/* ---- cooperative launches (NCF_LAUNCH_SYNC): fibers and barriers ------ */

#define __shared__ static

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define NCF_EMU_ASAN 1
#else
#define NCF_EMU_ASAN 0
#endif
/* Switching stacks: _setjmp/_longjmp after a fiber's first entry
 * (makecontext), unless _FORTIFY_SOURCE makes _longjmp refuse to jump to a
 * deeper stack; then swapcontext, which is slower (a system call each). */
#if defined(_FORTIFY_SOURCE) && _FORTIFY_SOURCE > 0
#define NCF_EMU_JMP 0
#else
#define NCF_EMU_JMP 1
#endif

enum { NCF_EMU_READY, NCF_EMU_AT_BLOCK, NCF_EMU_AT_WARP, NCF_EMU_DONE };

struct ncf_emu_fiber {
	ucontext_t uc;
	jmp_buf jb;
	int state, started;
	dim3 tid;
	char *stack;
	size_t size;
	void *fake; /* ASan's fake stack while switched away */
};

/* The fibers of a host thread, kept from launch to launch (each waits in
 * its loop for the next block to run), and the scheduler's context. */
enum { NCF_EMU_STACK = 256 << 10 }; /* bytes of a fiber's stack (lazily committed) */
struct ncf_emu_pool {
	struct ncf_emu_fiber f[1024];
	ucontext_t sched_uc;
	jmp_buf sched;
	void *sched_fake;
	const void *main_bottom; /* the scheduler's stack, for ASan */
	size_t main_size;
};
inline thread_local struct ncf_emu_pool *ncf_emu_pool_cur;

struct ncf_emu_coop {
	unsigned n;		      /* threads per block */
	struct ncf_emu_fiber *f;      /* the pool's */
	unsigned cur;		      /* the fiber running */
	void (*body)(void *);
	void *arg;
	unsigned char *smem;	      /* the launch's dynamic shared memory */
	size_t smem_bytes;
};

inline thread_local struct ncf_emu_coop *ncf_emu_coop_cur;

[[noreturn]] static inline void ncf_emu_die(const char *what)
{
	fprintf(stderr, "cuda emulation: block (%u, %u, %u), thread (%u, %u, %u): %s\n", blockIdx.x,
		blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z, what);
	abort();
}

/* Fiber -> scheduler (the fiber's state says why); returns when resumed. */
static inline void ncf_emu_yield(void)
{
	struct ncf_emu_coop *C = ncf_emu_coop_cur;
	struct ncf_emu_pool *P = ncf_emu_pool_cur;
	struct ncf_emu_fiber *me = &C->f[C->cur];
#if NCF_EMU_ASAN
	__sanitizer_start_switch_fiber(&me->fake, P->main_bottom, P->main_size);
#endif
#if NCF_EMU_JMP
	if (!_setjmp(me->jb))
		_longjmp(P->sched, 1);
#else
	swapcontext(&me->uc, &P->sched_uc);
#endif
#if NCF_EMU_ASAN
	__sanitizer_finish_switch_fiber(me->fake, NULL, NULL);
#endif
}

/* A fiber's life: run the kernel body of the current launch for each block
 * the scheduler resumes it for (the fiber never ends; it waits, DONE,
 * between blocks and between launches). */
static inline void ncf_emu_fiber_main(void)
{
#if NCF_EMU_ASAN
	struct ncf_emu_pool *P = ncf_emu_pool_cur;
	__sanitizer_finish_switch_fiber(NULL, &P->main_bottom, &P->main_size);
#endif
	for (;;) {
		struct ncf_emu_coop *C = ncf_emu_coop_cur;
		C->body(C->arg);
		C->f[C->cur].state = NCF_EMU_DONE;
		ncf_emu_yield();
	}
}

/* Scheduler -> fiber k until it yields. */
static inline void ncf_emu_resume(struct ncf_emu_coop *C, unsigned k)
{
	struct ncf_emu_pool *P = ncf_emu_pool_cur;
	struct ncf_emu_fiber *f = &C->f[k];
	C->cur = k;
	threadIdx = f->tid;
#if NCF_EMU_ASAN
	__sanitizer_start_switch_fiber(&P->sched_fake, f->stack, f->size);
#endif
#if NCF_EMU_JMP
	if (!_setjmp(P->sched)) {
		if (!f->started) {
			f->started = 1;
			swapcontext(&P->sched_uc, &f->uc);
		} else {
			_longjmp(f->jb, 1);
		}
	}
#else
	f->started = 1;
	swapcontext(&P->sched_uc, &f->uc);
#endif
#if NCF_EMU_ASAN
	__sanitizer_finish_switch_fiber(P->sched_fake, NULL, NULL);
#endif
}

static inline void __syncthreads(void)
{
	struct ncf_emu_coop *C = ncf_emu_coop_cur;
	if (!C)
		ncf_emu_die("__syncthreads in a plain launch (launch it with NCF_LAUNCH_SYNC)");
	C->f[C->cur].state = NCF_EMU_AT_BLOCK;
	ncf_emu_yield();
}

static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
	struct ncf_emu_coop *C = ncf_emu_coop_cur;
	if (!C)
		ncf_emu_die("__syncwarp in a plain launch (launch it with NCF_LAUNCH_SYNC)");
	if (mask != 0xffffffffu)
		ncf_emu_die("__syncwarp with a partial mask is not emulated");
	C->f[C->cur].state = NCF_EMU_AT_WARP;
	ncf_emu_yield();
}

/* The lane of this thread in its warp (linear thread index mod 32). */
static inline unsigned ncf_emu_lane(void)
{
	return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32u;
}

/* After a round: open the barriers every thread has reached.  Returns 1
 * when the block is done, 0 to go on; dies on a barrier that cannot open. */
static inline int ncf_emu_barriers(struct ncf_emu_coop *C)
{
	unsigned n = C->n, done = 0, at_block = 0;
	for (unsigned k = 0; k < n; k++) {
		done += C->f[k].state == NCF_EMU_DONE;
		at_block += C->f[k].state == NCF_EMU_AT_BLOCK;
	}
	if (done == n)
		return 1;
	if (at_block == n) {
		for (unsigned k = 0; k < n; k++)
			C->f[k].state = NCF_EMU_READY;
		return 0;
	}
	int opened = 0;
	for (unsigned w = 0; w * 32 < n; w++) {
		unsigned lo = w * 32, hi = lo + 32 < n ? lo + 32 : n, at = 0;
		for (unsigned k = lo; k < hi; k++)
			at += C->f[k].state == NCF_EMU_AT_WARP;
		if (at == hi - lo) {
			for (unsigned k = lo; k < hi; k++)
				C->f[k].state = NCF_EMU_READY;
			opened = 1;
		}
	}
	if (!opened) {
		threadIdx = dim3(0, 0, 0);
		ncf_emu_die(at_block ? "__syncthreads not reached by every thread of the block"
				     : "__syncwarp not reached by every thread of the warp");
	}
	return 0;
}

template <typename F> static inline void ncf_emu_call(void *p)
{
	(*(F *)p)();
}

/* Fiber k of this thread's pool, made on first use. */
static inline struct ncf_emu_fiber *ncf_emu_fiber_get(unsigned k)
{
	if (!ncf_emu_pool_cur) {
		ncf_emu_pool_cur = (struct ncf_emu_pool *)calloc(1, sizeof *ncf_emu_pool_cur);
		if (!ncf_emu_pool_cur)
			ncf_emu_die("no memory for the fibers");
	}
	struct ncf_emu_fiber *f = &ncf_emu_pool_cur->f[k];
	if (!f->stack) {
		void *p = mmap(NULL, NCF_EMU_STACK, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			ncf_emu_die("no memory for a fiber's stack");
		f->stack = (char *)p;
		f->size = NCF_EMU_STACK;
		getcontext(&f->uc);
		f->uc.uc_stack.ss_sp = f->stack;
		f->uc.uc_stack.ss_size = f->size;
		f->uc.uc_link = NULL;
		makecontext(&f->uc, ncf_emu_fiber_main, 0);
	}
	return f;
}

/* Run body() once per thread of a (grid, block) launch whose threads
 * cooperate: blocks in order, the threads of a block as fibers. */
template <typename F>
static inline void ncf_emu_launch_sync(dim3 grid, dim3 block, size_t shmem, F body)
{
	ncf_emu_count[NCF_EMU_LAUNCHES]++;
	unsigned n = block.x * block.y * block.z;
	if (n == 0 || n > 1024)
		ncf_emu_die("a cooperative launch needs 1..1024 threads per block");
	if (ncf_emu_coop_cur)
		ncf_emu_die("a cooperative launch inside another");
	struct ncf_emu_coop C;
	memset(&C, 0, sizeof C);
	C.n = n;
	for (unsigned k = 0; k < n; k++)
		ncf_emu_fiber_get(k)->tid = dim3(k % block.x, k / block.x % block.y, k / (block.x * block.y));
	C.f = ncf_emu_pool_cur->f;
	C.body = ncf_emu_call<F>;
	C.arg = &body;
	C.smem_bytes = shmem;
	if (shmem && posix_memalign((void **)&C.smem, 128, shmem) != 0)
		ncf_emu_die("no memory for a launch's dynamic shared memory");
	gridDim = grid;
	blockDim = block;
	ncf_emu_coop_cur = &C;
	for (unsigned bz = 0; bz < grid.z; bz++)
		for (unsigned by = 0; by < grid.y; by++)
			for (unsigned bx = 0; bx < grid.x; bx++) {
				blockIdx = dim3(bx, by, bz);
				if (shmem) /* each block finds garbage there (NaNs) */
					memset(C.smem, 0xFF, shmem);
				for (unsigned k = 0; k < n; k++)
					C.f[k].state = NCF_EMU_READY;
				do {
					for (unsigned k = 0; k < n; k++)
						if (C.f[k].state == NCF_EMU_READY)
							ncf_emu_resume(&C, k);
				} while (!ncf_emu_barriers(&C));
			}
	ncf_emu_coop_cur = NULL;
	free(C.smem);
}

/* The dynamic shared memory of the running cooperative launch. */
static inline unsigned char *ncf_emu_dyn_smem(void)
{
	if (!ncf_emu_coop_cur || !ncf_emu_coop_cur->smem)
		ncf_emu_die("dynamic shared memory outside a launch that has some");
	return ncf_emu_coop_cur->smem;
}


/* Raw 16-byte vector, as CUDA's uint4 (used for vector loads). */
struct uint4 {
	unsigned x, y, z, w;
};

/* ---- 16-bit floats ------------------------------------------------------ */

struct __nv_bfloat16 {
	uint16_t x;
};
struct __half {
	uint16_t x;
};

static inline uint32_t ncf_emu_f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}
static inline float ncf_emu_u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline float __bfloat162float(__nv_bfloat16 h)
{
	return ncf_emu_u2f((uint32_t)h.x << 16);
}

/* Round to nearest even; NaN stays a (quiet) NaN. */
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
	uint32_t u = ncf_emu_f2u(f);
	__nv_bfloat16 h;
	if ((u & 0x7fffffffu) > 0x7f800000u) {
		h.x = (uint16_t)((u >> 16) | 0x40u);
		return h;
	}
	u += 0x7fffu + ((u >> 16) & 1u);
	h.x = (uint16_t)(u >> 16);
	return h;
}

static inline float __half2float(__half h)
{
	uint32_t sign = (uint32_t)(h.x & 0x8000u) << 16;
	uint32_t e = (h.x >> 10) & 0x1fu, m = h.x & 0x3ffu;
	if (e == 0) { /* zero or subnormal: m * 2^-24, exact in float */
		float v = (float)m * (1.0f / 16777216.0f);
		return sign ? -v : v;
	}
	if (e == 31)
		return ncf_emu_u2f(sign | 0x7f800000u | (m << 13));
	return ncf_emu_u2f(sign | ((e + 112u) << 23) | (m << 13));
}

/* Round to nearest even, overflow to infinity, subnormals kept. */
static inline __half __float2half_rn(float f)
{
	uint32_t u = ncf_emu_f2u(f);
	uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	__half h;
	if (a > 0x7f800000u) { /* NaN */
		h.x = (uint16_t)(sign | 0x7e00u);
		return h;
	}
	if (a >= 0x477ff000u) { /* >= 65520: infinity (also inf itself) */
		h.x = (uint16_t)(sign | 0x7c00u);
		return h;
	}
	if (a <= 0x33000000u) { /* <= 2^-25: rounds to zero */
		h.x = (uint16_t)sign;
		return h;
	}
	uint32_t e = a >> 23;
	if (e < 113) { /* half subnormal: m_h = round(M * 2^(e - 126)) */
		uint32_t mant = (a & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - e; /* 14..24 */
		uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1u)))
			r++;
		h.x = (uint16_t)(sign | r);
		return h;
	}
	uint32_t mant = a & 0x7fffffu;
	uint32_t r = ((e - 112u) << 10) | (mant >> 13), rem = mant & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
		r++;
	h.x = (uint16_t)(sign | r);
	return h;
}

/* ---- wmma: tensor-core fragments ----------------------------------------
 *
 * nvcuda::wmma as the CUDA C++ Programming Guide documents it (section
 * "Warp Matrix Functions"), for the shapes the kernels use: matrix_a /
 * matrix_b / accumulator fragments of m16n16k16 (__half, __nv_bfloat16) and
 * m16n16k8 (precision::tf32), accumulators in float.
 *
 * The layout is an abstraction: CUDA leaves unspecified which elements of
 * a fragment each thread of the warp holds (num_elements and x[] may only be
 * used for operations applied alike to every element, such as
 * __float_to_tf32).  Here every thread's fragment holds the whole tile
 * (x[], row-major, num_elements = rows x columns).  load_matrix_sync and
 * fill_fragment fill it; mma_sync computes d = a b + c with each product
 * formed in float and summed in float in k order onto c (the tensor cores
 * form and add products in their own order and rounding; tests bound the
 * difference); store_matrix_sync is collective as on a GPU: thread lane l
 * of the warp writes the elements e = l, l + 32, ... of the tile only, so
 * reading the stored tile before a __syncwarp shows the other lanes'
 * elements unwritten.  A kernel that keeps to the documented semantics
 * gives here what it gives on a GPU up to the sums' rounding.
 */
namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
}
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K> struct ncf_emu_dims;
template <int M, int N, int K> struct ncf_emu_dims<matrix_a, M, N, K> {
	enum { R = M, C = K };
};
template <int M, int N, int K> struct ncf_emu_dims<matrix_b, M, N, K> {
	enum { R = K, C = N };
};
template <int M, int N, int K> struct ncf_emu_dims<accumulator, M, N, K> {
	enum { R = M, C = N };
};
template <typename T> struct ncf_emu_elem {
	typedef T type;
};
template <> struct ncf_emu_elem<precision::tf32> {
	typedef float type;
};

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
	enum { R = ncf_emu_dims<Use, M, N, K>::R, C = ncf_emu_dims<Use, M, N, K>::C };
	enum { num_elements = R * C };
	typename ncf_emu_elem<T>::type x[R * C];
};

static inline float ncf_emu_f32(float v)
{
	return v;
}
static inline float ncf_emu_f32(__nv_bfloat16 v)
{
	return __bfloat162float(v);
}
static inline float ncf_emu_f32(__half v)
{
	return __half2float(v);
}

/* TF32: float rounded to 10 mantissa bits, to nearest, ties away from zero
 * (PTX cvt.rna.tf32.f32). */
static inline float __float_to_tf32(float f)
{
	uint32_t u = ncf_emu_f2u(f);
	if ((u & 0x7f800000u) == 0x7f800000u)
		return f; /* inf, NaN */
	u = (u + 0x1000u) & 0xffffe000u;
	return ncf_emu_u2f(u);
}

template <typename Use, int M, int N, int K, typename T, typename Layout, typename P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const P *p,
				    unsigned ldm)
{
	typedef fragment<Use, M, N, K, T, Layout> F;
	for (int r = 0; r < F::R; r++)
		for (int c = 0; c < F::C; c++)
			f.x[r * F::C + c] = std::is_same<Layout, col_major>::value
						    ? p[(size_t)c * ldm + r]
						    : p[(size_t)r * ldm + c];
}

template <int M, int N, int K>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p,
				    unsigned ldm, layout_t l)
{
	for (int r = 0; r < M; r++)
		for (int c = 0; c < N; c++)
			f.x[r * N + c] = l == mem_col_major ? p[(size_t)c * ldm + r]
							    : p[(size_t)r * ldm + c];
}

template <int M, int N, int K>
static inline void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f,
				     unsigned ldm, layout_t l)
{
	for (int e = (int)ncf_emu_lane(); e < M * N; e += 32) {
		int r = e / N, c = e % N;
		p[l == mem_col_major ? (size_t)c * ldm + r : (size_t)r * ldm + c] = f.x[e];
	}
}

template <typename Use, int M, int N, int K, typename T, typename Layout, typename V>
static inline void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, const V &v)
{
	for (int e = 0; e < fragment<Use, M, N, K, T, Layout>::num_elements; e++)
		f.x[e] = v;
}

template <int M, int N, int K, typename T, typename LA, typename LB>
static inline void mma_sync(fragment<accumulator, M, N, K, float> &d,
			    const fragment<matrix_a, M, N, K, T, LA> &a,
			    const fragment<matrix_b, M, N, K, T, LB> &b,
			    const fragment<accumulator, M, N, K, float> &c)
{
	float out[M * N], fa[M * K], fb[N * K]; /* fb transposed: fb[j K + k] = b[k][j] */
	for (int e = 0; e < M * K; e++)
		fa[e] = ncf_emu_f32(a.x[e]);
	for (int k = 0; k < K; k++)
		for (int j = 0; j < N; j++)
			fb[j * K + k] = ncf_emu_f32(b.x[k * N + j]);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float acc = c.x[i * N + j];
			const float *ra = fa + i * K, *rb = fb + j * K;
			for (int k = 0; k < K; k++)
				acc += ra[k] * rb[k];
			out[i * N + j] = acc;
		}
	memcpy(d.x, out, sizeof out);
}

} /* namespace wmma */
} /* namespace nvcuda */

/* ---- runtime ------------------------------------------------------------ */

typedef int cudaError_t;
enum {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
};
enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};
typedef struct ncf_emu_stream *cudaStream_t;
typedef struct ncf_emu_event *cudaEvent_t;
#define cudaStreamNonBlocking 1

static inline const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "no error";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	default:
		return "invalid argument";
	}
}
static inline const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "cudaSuccess";
	case cudaErrorMemoryAllocation:
		return "cudaErrorMemoryAllocation";
	default:
		return "cudaErrorInvalidValue";
	}
}
static inline cudaError_t cudaGetLastError(void)
{
	return cudaSuccess;
}
/* Kernel attributes: only the dynamic shared memory limit, which the
 * emulation does not have. */
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <typename K> static inline cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute, int)
{
	return cudaSuccess;
}

static inline cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = NULL;
	if (posix_memalign(p, 256, n ? n : 1) != 0)
		return cudaErrorMemoryAllocation;
	/* device memory starts as garbage: fill it with NaNs (and huge
	 * indices), so that reading what was never written shows */
	memset(*p, 0xFF, n);
	return cudaSuccess;
}
template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t n)
{
	return cudaMalloc((void **)p, n);
}
static inline cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}
static inline cudaError_t cudaMallocHost(void **p, size_t n)
{
	return cudaMalloc(p, n);
}
static inline cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}
static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind)
{
	if (n)
		memmove(dst, src, n);
	return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k,
					  cudaStream_t)
{
	ncf_emu_count[NCF_EMU_COPIES]++;
	return cudaMemcpy(dst, src, n, k);
}
static inline cudaError_t cudaMemset(void *p, int v, size_t n)
{
	if (n)
		memset(p, v, n);
	return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t)
{
	ncf_emu_count[NCF_EMU_MEMSETS]++;
	return cudaMemset(p, v, n);
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned)
{
	*s = (cudaStream_t)(uintptr_t)0x5157;
	return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t)
{
	return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t)
{
	return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 1;
	return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d)
{
	return d == 0 ? cudaSuccess : cudaErrorInvalidValue;
}
static inline cudaError_t cudaGetDevice(int *d)
{
	*d = 0;
	return cudaSuccess;
}
static inline cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = 0;
	return cudaSuccess;
}
static inline cudaError_t cudaDriverGetVersion(int *v)
{
	*v = 0;
	return cudaSuccess;
}
/* Events exist so that the timing code runs; they measure nothing. */
static inline cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = (cudaEvent_t)(uintptr_t)0xE7;
	return cudaSuccess;
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t)
{
	return cudaSuccess;
}
static inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t)
{
	return cudaSuccess;
}
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t, cudaEvent_t)
{
	*ms = 0.0f;
	return cudaSuccess;
}
static inline cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	*free_b = *total = (size_t)1 << 34;
	return cudaSuccess;
}

struct cudaDeviceProp {
	char name[256];
	size_t totalGlobalMem;
	int major, minor;
	int multiProcessorCount;
	int memoryBusWidth;
	int l2CacheSize;
};
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
	if (d != 0)
		return cudaErrorInvalidValue;
	memset(p, 0, sizeof *p);
	strcpy(p->name, "CPU emulation (NCF_CUDA_EMULATE)");
	p->totalGlobalMem = (size_t)1 << 34;
	p->major = 9; /* claims bf16 and tf32, which the emulation runs as described above */
	p->minor = 0;
	p->multiProcessorCount = 1;
	return cudaSuccess;
}
enum cudaDeviceAttr {
	cudaDevAttrClockRate = 13,
	cudaDevAttrMemoryClockRate = 36,
	cudaDevAttrGlobalMemoryBusWidth = 37,
};
static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int)
{
	*v = 0;
	return cudaSuccess;
}

/* ---- cuBLAS ------------------------------------------------------------- */

typedef struct ncf_emu_blas *cublasHandle_t;
typedef enum {
	CUBLAS_STATUS_SUCCESS = 0,
	CUBLAS_STATUS_INVALID_VALUE = 7,
	CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum {
	CUBLAS_DEFAULT_MATH = 0,
	CUBLAS_TF32_TENSOR_OP_MATH = 3,
} cublasMath_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum {
	CUBLAS_COMPUTE_32F = 68,
	CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

static inline const char *cublasGetStatusString(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS:
		return "the operation completed successfully";
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return "the functionality requested is not supported";
	default:
		return "an invalid value was used as an argument";
	}
}
static inline cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	*h = (cublasHandle_t)(uintptr_t)0xB1A5;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasDestroy(cublasHandle_t)
{
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t)
{
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t)
{
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasGetVersion(cublasHandle_t, int *v)
{
	*v = 0;
	return CUBLAS_STATUS_SUCCESS;
}

/* Element e of an operand of type t, widened to float. */
static inline float ncf_emu_load(const void *p, cudaDataType t, size_t e)
{
	switch (t) {
	case CUDA_R_16BF:
		return __bfloat162float(((const __nv_bfloat16 *)p)[e]);
	case CUDA_R_16F:
		return __half2float(((const __half *)p)[e]);
	default:
		return ((const float *)p)[e];
	}
}
static inline void ncf_emu_store(void *p, cudaDataType t, size_t e, float v)
{
	switch (t) {
	case CUDA_R_16BF:
		((__nv_bfloat16 *)p)[e] = __float2bfloat16_rn(v);
		break;
	case CUDA_R_16F:
		((__half *)p)[e] = __float2half_rn(v);
		break;
	default:
		((float *)p)[e] = v;
	}
}
/* A float copy of the column-major (rows, cols, ld) matrix p of type t
 * (p itself when it is float). */
static inline float *ncf_emu_widen(const void *p, cudaDataType t, int rows, int cols, int ld)
{
	if (t == CUDA_R_32F)
		return (float *)p;
	float *w = (float *)malloc(((size_t)ld * (size_t)(cols > 0 ? cols : 1)) * sizeof(float));
	for (int c = 0; c < cols; c++)
		for (int r = 0; r < rows; r++)
			w[(size_t)c * ld + r] = ncf_emu_load(p, t, (size_t)c * ld + r);
	return w;
}

/*
 * C (m, n) = alpha op(A) op(B) + beta C, column-major, op(A) (m, k),
 * op(B) (k, n): cuBLAS's semantics on cblas_sgemm.  Types: 32F, 16BF, 16F
 * operands, 32F or the operands' type for C; the compute type is always
 * float here.
 */
static inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta,
					  cublasOperation_t tb, int m, int n, int k,
					  const void *alpha, const void *A, cudaDataType at, int lda,
					  const void *B, cudaDataType bt, int ldb, const void *beta,
					  void *C, cudaDataType ct, int ldc, cublasComputeType_t,
					  cublasGemmAlgo_t)
{
	if (m < 0 || n < 0 || k < 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	ncf_emu_count[NCF_EMU_GEMMS]++;
	int arows = ta == CUBLAS_OP_N ? m : k, acols = ta == CUBLAS_OP_N ? k : m;
	int brows = tb == CUBLAS_OP_N ? k : n, bcols = tb == CUBLAS_OP_N ? n : k;
	if (lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
	    ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	float al = *(const float *)alpha, be = *(const float *)beta;
	float *a = ncf_emu_widen(A, at, arows, acols, lda);
	float *b = ncf_emu_widen(B, bt, brows, bcols, ldb);
	float *c = ct == CUDA_R_32F ? (float *)C : ncf_emu_widen(C, ct, m, n, ldc);
	if (k == 0) {
		for (int j = 0; j < n; j++)
			for (int i = 0; i < m; i++)
				c[(size_t)j * ldc + i] = be == 0.0f ? 0.0f : be * c[(size_t)j * ldc + i];
	} else {
		cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
			    tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, al, a, lda, b, ldb,
			    be, c, ldc);
	}
	if (ct != CUDA_R_32F) {
		for (int j = 0; j < n; j++)
			for (int i = 0; i < m; i++)
				ncf_emu_store(C, ct, (size_t)j * ldc + i, c[(size_t)j * ldc + i]);
		free(c);
	}
	if (a != A)
		free(a);
	if (b != B)
		free(b);
	return CUBLAS_STATUS_SUCCESS;
}

#endif
